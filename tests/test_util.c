/*
 * test_util.c - the library's one message formatter (gm_errf: a message too long
 * for its buffer loses its middle, never the function or the cause) and its one
 * log line (gm_log: "goldminer WHO: EVENT" on stderr, one line per call).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_a_message_that_fits_is_written_whole),
	    cmocka_unit_test(test_a_long_message_keeps_its_start_and_its_cause),
	    cmocka_unit_test(test_log_lines_read_goldminer_who_event),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
