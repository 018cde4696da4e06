/*
 * test_util.c - the library's one message formatter (gm_errf: a message too long
 * for its buffer loses its middle, never the function or the cause) and its one
 * log line (gm_log: "goldminer WHO: EVENT" on stderr, one line per call), and
 * its one JSON string writer (gm_json_quote, gm_json_str): random bytes in, a
 * valid JSON string literal out that a strict reader written here decodes back
 * to the same bytes (\udcXX read as Python's surrogateescape reads it); and
 * its one byte formatter (gm_fmt_bytes: "64.1 MiB").
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "goldminer/util.h"

static void test_a_message_that_fits_is_written_whole(void **state)
{
	char err[64] = "old";
	(void)state;
	gm_errf(err, sizeof(err), "gm_x_open: %s: %s", "/a/b", "No such file or directory");
	assert_string_equal(err, "gm_x_open: /a/b: No such file or directory");
	gm_errf(NULL, 10, "ignored %d", 1); /* no buffer: nothing, no crash */
	gm_errf(err, 0, "ignored %d", 2);
	assert_string_equal(err, "gm_x_open: /a/b: No such file or directory");
}

static void test_a_long_message_keeps_its_start_and_its_cause(void **state)
{
	char err[48], path[200];
	(void)state;
	memset(path, 'p', sizeof(path) - 1);
	path[sizeof(path) - 1] = 0;
	gm_errf(err, sizeof(err), "gm_x_open: %s: Permission denied", path);
	assert_int_equal(strlen(err), sizeof(err) - 1);
	assert_memory_equal(err, "gm_x_op", 7);		     /* the first fifth */
	assert_non_null(strstr(err, "..."));		     /* the cut */
	assert_non_null(strstr(err, ": Permission denied")); /* the end */
}

/* What fn writes on stderr, into buf. */
static void capture(char *buf, size_t len, void (*fn)(void))
{
	char path[] = "/tmp/gm-test-util-XXXXXX";
	int fd = mkstemp(path), saved = dup(2);
	assert_true(fd >= 0 && saved >= 0);
	unlink(path);
	fflush(stderr);
	dup2(fd, 2);
	fn();
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	ssize_t n = pread(fd, buf, len - 1, 0);
	close(fd);
	buf[n > 0 ? n : 0] = 0;
}

static void log_two(void)
{
	gm_log("node", "job pid %d attached", 42);
	gm_log("pool", "worker %d: killed it", 7);
}

static void log_long(void)
{
	static char big[10000];
	memset(big, 'x', sizeof(big) - 1);
	gm_log("node", "%s the end", big);
}

static void test_log_lines_read_goldminer_who_event(void **state)
{
	static char out[16384];
	(void)state;
	capture(out, sizeof(out), log_two);
	assert_string_equal(out, "goldminer node: job pid 42 attached\n"
				 "goldminer pool: worker 7: killed it\n");
	capture(out, sizeof(out), log_long); /* one line of 4 KiB at most, its end kept */
	size_t n = strlen(out);
	assert_in_range(n, 1000, 4095);
	assert_memory_equal(out, "goldminer node: xxx", 19);
	assert_non_null(strstr(out, "..."));
	assert_string_equal(out + n - 9, " the end\n");
	assert_ptr_equal(strchr(out, '\n'), out + n - 1); /* one newline: the last byte */
}

/* GOLDMINER_LOG_TIME=1: the same line after its UTC time, to the millisecond */
static void test_log_lines_with_log_time_start_with_it(void **state)
{
	static char out[16384];
	(void)state;
	setenv("GOLDMINER_LOG_TIME", "1", 1);
	time_t before = time(NULL);
	capture(out, sizeof(out), log_two);
	time_t after = time(NULL);
	unsetenv("GOLDMINER_LOG_TIME");
	int y, mo, d, h, mi, s, ms, used = 0;
	assert_int_equal(
	    sscanf(out, "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ %n", &y, &mo, &d, &h, &mi, &s, &ms, &used),
	    7);
	assert_int_equal(used, 25);
	struct tm tm = {.tm_year = y - 1900,
			.tm_mon = mo - 1,
			.tm_mday = d,
			.tm_hour = h,
			.tm_min = mi,
			.tm_sec = s};
	time_t at = timegm(&tm);
	assert_true(at >= before && at <= after);
	assert_in_range(ms, 0, 999);
	assert_memory_equal(out + used, "goldminer node: job pid 42 attached\n", 36);
	const char *second = strchr(out, '\n') + 1;
	assert_memory_equal(second + 25, "goldminer pool: worker 7: killed it\n", 36);
	setenv("GOLDMINER_LOG_TIME", "0", 1); /* 0: off */
	capture(out, sizeof(out), log_two);
	unsetenv("GOLDMINER_LOG_TIME");
	assert_string_equal(out, "goldminer node: job pid 42 attached\n"
				 "goldminer pool: worker 7: killed it\n");
}

/* A strict reader of one JSON string literal (RFC 8259: no raw control
 * characters, only the nine escapes, UTF-8 outside them), written apart from the
 * writer: it decodes a code point by its bits and checks it is the shortest form.
 * \udc80..\udcff give the byte back (surrogateescape); any other lone surrogate,
 * or a pair, is refused (the writer never writes one). The bytes into out[],
 * NUL-terminated; their count, or -1 when lit is not one valid literal. */
static long json_read(const char *lit, char *out)
{
	const unsigned char *p = (const unsigned char *)lit;
	long n = 0;
	if (*p++ != '"')
		return -1;
	while (*p != '"') {
		unsigned c = *p;
		if (c < 0x20)
			return -1; /* raw control character, or the NUL: no closing quote */
		if (c == '\\') {
			const char *m = strchr("\"\\/bfnrt", p[1]);
			if (p[1] && m && p[1] != 'u') {
				out[n++] = "\"\\/\b\f\n\r\t"[m - "\"\\/bfnrt"];
				p += 2;
				continue;
			}
			unsigned u = 0;
			if (p[1] != 'u')
				return -1;
			for (int k = 2; k < 6; k++) {
				const char *h =
				    p[k] ? strchr("0123456789abcdef", tolower(p[k])) : NULL;
				if (!h)
					return -1;
				u = u * 16 + (unsigned)(h - "0123456789abcdef");
			}
			p += 6;
			if (u >= 0xDC80 && u <= 0xDCFF)
				out[n++] = (char)(u - 0xDC00);
			else if (u >= 0xD800 && u <= 0xDFFF)
				return -1;
			else if (u < 0x80)
				out[n++] = (char)u;
			else
				return -1; /* the writer escapes only ASCII and lone bytes */
			continue;
		}
		int len = c < 0x80	       ? 1
			  : (c & 0xE0) == 0xC0 ? 2
			  : (c & 0xF0) == 0xE0 ? 3
			  : (c & 0xF8) == 0xF0 ? 4
					       : 0;
		unsigned cp = len == 1 ? c : len == 2 ? c & 0x1F : len == 3 ? c & 0x0F : c & 0x07;
		if (!len)
			return -1;
		for (int k = 1; k < len; k++) {
			if ((p[k] & 0xC0) != 0x80)
				return -1;
			cp = cp << 6 | (p[k] & 0x3Fu);
		}
		static const unsigned least[5] = {0, 0, 0x80, 0x800, 0x10000};
		if (cp < least[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
			return -1; /* overlong, past Unicode, or a surrogate */
		memcpy(out + n, p, (size_t)len);
		n += len;
		p += len;
	}
	if (p[1])
		return -1; /* something after the closing quote */
	out[n] = '\0';
	return n;
}

static void test_json_quote_escapes_quote_backslash_and_control(void **state)
{
	char q[128], back[64];
	(void)state;
	assert_int_equal(gm_json_quote(q, sizeof(q), "/tmp/a\"b\\c\x01\n"), 22);
	assert_string_equal(q, "\"/tmp/a\\\"b\\\\c\\u0001\\n\"");
	gm_json_quote(q, sizeof(q), "caf\xc3\xa9 \xff\xed\xa0\x80");
	/* é as it is; 0xff and a surrogate's three bytes (no UTF-8) one by one */
	assert_string_equal(q, "\"caf\xc3\xa9 \\udcff\\udced\\udca0\\udc80\"");
	assert_int_equal(json_read(q, back), 10);
	assert_string_equal(back, "caf\xc3\xa9 \xff\xed\xa0\x80");
	assert_int_equal(gm_json_quote(q, 2, "x"), 0); /* no room for "" */
	assert_string_equal(q, "");
}

/* xorshift64: the fuzz is the same bytes on every run (a failure reproduces). */
static uint64_t next(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/* A string of random bytes, half the time drawn from the bytes that matter to the
 * writer (quote, backslash, controls, UTF-8 leads and continuations, 0xff). */
static size_t random_string(uint64_t *x, char *s, size_t max)
{
	static const unsigned char hot[] = {'"',  '\\', 1,    '\n', 0x1f, 0x7f, 0x80, 0xbf, 0xc0,
					    0xc2, 0xdf, 0xe0, 0xed, 0xef, 0xf0, 0xf4, 0xf5, 0xff};
	size_t n = next(x) % max;
	for (size_t i = 0; i < n; i++) {
		uint64_t r = next(x);
		s[i] = (char)(r & 1 ? hot[(r >> 8) % sizeof(hot)] : 1 + (r >> 8) % 255);
	}
	s[n] = '\0';
	return n;
}

static void test_json_quote_fuzz_random_bytes_round_trip(void **state)
{
	char s[65], q[6 * 64 + 3], cut[6 * 64 + 3], back[65], *mem;
	uint64_t x = 0x9E3779B97F4A7C15u;
	size_t memlen;
	(void)state;
	for (int t = 0; t < 20000; t++) {
		size_t n = random_string(&x, s, sizeof(s));
		size_t k = gm_json_quote(q, sizeof(q), s);
		assert_int_equal(strlen(q), k);
		if (json_read(q, back) != (long)n || memcmp(back, s, n)) {
			fail_msg("case %d: %s read back wrong", t, q);
		}
		/* gm_json_str writes the same text */
		FILE *f = open_memstream(&mem, &memlen);
		assert_non_null(f);
		gm_json_str(f, s);
		fclose(f);
		assert_string_equal(mem, q);
		free(mem);
		/* a buffer too small: still one valid literal, of a prefix of s */
		size_t len = 3 + next(&x) % k;
		size_t kc = gm_json_quote(cut, len, s);
		long m = json_read(cut, back);
		assert_true(kc < len && m >= 0 && memcmp(back, s, (size_t)m) == 0);
	}
}

/* The byte formatter: the largest binary unit reached, one decimal, whole
 * bytes below 1 KiB, and EiB the last unit. */
static void test_byte_sizes_read_in_the_largest_binary_unit(void **state)
{
	static const struct {
		uint64_t v;
		const char *want;
	} c[] = {
	    {0, "0 bytes"},
	    {1023, "1023 bytes"},
	    {1024, "1.0 KiB"},
	    {1536, "1.5 KiB"},
	    {2u << 20, "2.0 MiB"},
	    {(64u << 20) + (100u << 10), "64.1 MiB"},
	    {12652339200ull, "11.8 GiB"},
	    {UINT64_MAX, "16.0 EiB"},
	};
	char buf[32], small[6];
	(void)state;
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++)
		assert_string_equal(gm_fmt_bytes(buf, sizeof(buf), c[i].v), c[i].want);
	assert_string_equal(gm_fmt_bytes(small, sizeof(small), 1536), "1.5 K"); /* cut, ended */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_a_message_that_fits_is_written_whole),
	    cmocka_unit_test(test_a_long_message_keeps_its_start_and_its_cause),
	    cmocka_unit_test(test_log_lines_read_goldminer_who_event),
	    cmocka_unit_test(test_log_lines_with_log_time_start_with_it),
	    cmocka_unit_test(test_json_quote_escapes_quote_backslash_and_control),
	    cmocka_unit_test(test_json_quote_fuzz_random_bytes_round_trip),
	    cmocka_unit_test(test_byte_sizes_read_in_the_largest_binary_unit),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
