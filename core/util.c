/*
 * util.c - see util.h.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>

#include "goldminer/util.h"

/*
 * full (n bytes) into err[errlen] without its middle: the head, "...", and as much
 * of the tail as fits. Messages read "WHO: PATH: CAUSE", so a long path loses its
 * middle and the function, the file name and the cause survive. UTF-8 sequences
 * are not split.
 */
static void elide_middle(char *err, size_t errlen, const char *full, size_t n)
{
	size_t keep = errlen - 1, head, tail;

	if (keep < 16) {
		memcpy(err, full + n - keep, keep); /* too small for a head: the cause */
		err[keep] = 0;
		return;
	}
	head = keep / 5;
	tail = keep - head - 3;
	while (head > 0 && ((unsigned char)full[head] & 0xC0) == 0x80)
		head--; /* full[head] starts a character: cut before it */
	while (tail > 0 && ((unsigned char)full[n - tail] & 0xC0) == 0x80)
		tail--;
	memcpy(err, full, head);
	memcpy(err + head, "...", 3);
	memcpy(err + head + 3, full + n - tail, tail);
	err[head + 3 + tail] = 0;
}

void gm_verrf(char *err, size_t errlen, const char *fmt, va_list ap)
{
	va_list again;
	char *full;
	int n;

	if (!err || !errlen)
		return;
	va_copy(again, ap);
	n = vsnprintf(err, errlen, fmt, ap);
	if (n >= 0 && (size_t)n >= errlen && (full = malloc((size_t)n + 1))) {
		vsnprintf(full, (size_t)n + 1, fmt, again);
		elide_middle(err, errlen, full, (size_t)n);
		free(full);
	} /* else it fitted, or no memory: cut at the end as vsnprintf does */
	va_end(again);
}

void gm_errf(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	gm_verrf(err, errlen, fmt, ap);
	va_end(ap);
}

/* GOLDMINER_LOG_TIME=1: each line starts with its UTC time to the millisecond
 * (the agents of a cluster, and a job's events, put side by side) */
static bool log_time(void)
{
	const char *e = getenv("GOLDMINER_LOG_TIME");
	return e && *e && strcmp(e, "0") != 0;
}

void gm_vlog(const char *who, const char *fmt, va_list ap)
{
	char line[4096];
	int n = 0;
	struct timespec ts;
	struct tm tm;
	if (log_time() && clock_gettime(CLOCK_REALTIME, &ts) == 0 && gmtime_r(&ts.tv_sec, &tm))
		n = snprintf(line, sizeof(line), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ ",
			     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
			     tm.tm_sec, ts.tv_nsec / 1000000);
	n += snprintf(line + n, sizeof(line) - (size_t)n, "goldminer %s: ", who);

	if (n < 0 || (size_t)n >= sizeof(line) - 1)
		n = 0;
	gm_verrf(line + n, sizeof(line) - 1 - (size_t)n, fmt, ap);
	n += (int)strlen(line + n);
	line[n++] = '\n';
	fwrite(line, 1, (size_t)n, stderr);
}

void gm_log(const char *who, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	gm_vlog(who, fmt, ap);
	va_end(ap);
}

int gm_grow_scratch(void **p, size_t *cap, size_t n, size_t min_cap)
{
	if (n <= *cap)
		return 0;
	size_t c = *cap ? *cap : (min_cap ? min_cap : 64);
	while (c < n) {
		if (c > ((size_t)-1) / 2)
			return -ENOMEM;
		c *= 2;
	}
	void *q = malloc(c);
	if (!q)
		return -ENOMEM;
	free(*p);
	*p = q;
	*cap = c;
	return 0;
}

const char *gm_write_cause(int err, const char *dir, char *buf, size_t len)
{
	struct statvfs vfs;

	if (err == -ENOSPC && dir && statvfs(dir, &vfs) == 0 && vfs.f_files > 0 &&
	    vfs.f_favail == 0)
		snprintf(buf, len,
			 "no space left on device (ENOSPC: the file system has no free inodes;"
			 " remove files there or use another file system)");
	else if (err == -ENOSPC)
		snprintf(buf, len,
			 "no space left on device (ENOSPC: the file system is full; free space"
			 " or write elsewhere)");
	else if (err == -EDQUOT)
		snprintf(buf, len,
			 "disk quota exceeded (EDQUOT: your quota of blocks or inodes there is"
			 " used up)");
	else if (err == -EFBIG)
		snprintf(buf, len, "file too large (EFBIG: over the file size limit)");
	else
		snprintf(buf, len, "%s", strerror(-err));
	return buf;
}

int gm_parse_bytes(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	int shift = 0;

	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	const char *units = "KMGT", *u = *end ? strchr(units, toupper((unsigned char)*end)) : NULL;
	if (u) {
		shift = 10 * (int)(u - units + 1);
		end++;
	}
	if (*end == 'i' && shift) /* "64MiB" too */
		end++;
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end || (shift && v > (UINT64_MAX >> shift)))
		return -EINVAL;
	*out = (uint64_t)v << shift;
	return 0;
}

const char *gm_fmt_bytes(char *buf, size_t len, uint64_t v)
{
	static const char *const unit[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
	double d = (double)v;
	int u = 0;

	while (d >= 1024 && u < 6) {
		d /= 1024;
		u++;
	}
	if (u)
		snprintf(buf, len, "%.1f %s", d, unit[u]);
	else
		snprintf(buf, len, "%" PRIu64 " bytes", v);
	return buf;
}

/*
 * The JSON text of the one unit at s (a byte s[0] != 0): an escape for '"', '\\'
 * and control characters, a valid UTF-8 sequence as it is, else the one byte as
 * \udcXX (Python's surrogateescape: os.fsencode gives the byte back). Writes at
 * most 6 bytes into out; returns their count, *used the bytes of s taken.
 */
static size_t json_unit(const unsigned char *s, char out[6], size_t *used)
{
	static const char hex[] = "0123456789abcdef";
	unsigned c = s[0], n = c < 0x80		       ? 1
			       : c >= 0xC2 && c < 0xE0 ? 2
			       : c >= 0xE0 && c < 0xF0 ? 3
			       : c >= 0xF0 && c < 0xF5 ? 4
						       : 0;
	const char *shortc = c == '"'	 ? "\\\""
			     : c == '\\' ? "\\\\"
			     : c == '\n' ? "\\n"
			     : c == '\t' ? "\\t"
			     : c == '\r' ? "\\r"
					 : NULL;

	*used = 1;
	if (shortc) {
		memcpy(out, shortc, 2);
		return 2;
	}
	for (unsigned k = 1; k < n; k++) /* continuation bytes; the string's NUL stops it */
		if ((s[k] & 0xC0) != 0x80)
			n = 0;
	/* no overlong 3- and 4-byte forms, no surrogates, nothing past U+10FFFF */
	if (n == 3 && ((c == 0xE0 && s[1] < 0xA0) || (c == 0xED && s[1] >= 0xA0)))
		n = 0;
	if (n == 4 && ((c == 0xF0 && s[1] < 0x90) || (c == 0xF4 && s[1] >= 0x90)))
		n = 0;
	if (c < 0x20 || !n) { /* a control character, or a byte that starts no sequence */
		memcpy(out, c < 0x20 ? "\\u00" : "\\udc", 4);
		out[4] = hex[c >> 4];
		out[5] = hex[c & 15];
		return 6;
	}
	memcpy(out, s, n);
	*used = n;
	return n;
}

size_t gm_json_quote(char *buf, size_t len, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t off = 0, used, k;
	char u[6];

	if (len < 3) {
		if (len)
			buf[0] = '\0';
		return 0;
	}
	buf[off++] = '"';
	for (; *p; p += used) {
		k = json_unit(p, u, &used);
		if (off + k + 2 > len)
			break; /* cut at a whole unit: the literal stays valid */
		memcpy(buf + off, u, k);
		off += k;
	}
	buf[off++] = '"';
	buf[off] = '\0';
	return off;
}

void gm_json_str(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t used;
	char u[6];

	fputc('"', f);
	for (; *p; p += used) {
		size_t k = json_unit(p, u, &used);
		fwrite(u, 1, k, f);
	}
	fputc('"', f);
}
