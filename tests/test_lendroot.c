/*
 * test_lendroot.c - which roots a lending agent opens for peers (lendroot.h):
 * a path is normalised by its words (relative, "..", control bytes and overlong
 * paths refused; "//", "." and a trailing '/' dropped), matched whole-component
 * against the roots ("/data" covers "/data/x", not "/data2" or "/dat"), and a
 * --lend-root is canonical at start-up or refused in words.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core/remote/lendroot.h" /* the plugin's, not installed */
#include "testutil.h"

static char base[64];

static int group_setup(void **state)
{
	(void)state;
	return gm_test_tmpdir(base, sizeof(base), "gm-test-lendroot");
}

static int group_teardown(void **state)
{
	(void)state;
	gm_test_rm_tree(base);
	return 0;
}

static const char *norm(const char *in)
{
	static char out[64];
	int rc = gm_lendroot_normalise(in, out, sizeof(out));
	return rc ? "(refused)" : out;
}

static void test_normalise_refuses_what_words_cannot_settle(void **state)
{
	(void)state;
	assert_string_equal(norm("data/x"), "(refused)"); /* relative */
	assert_string_equal(norm(""), "(refused)");
	assert_string_equal(norm("/data/../etc"), "(refused)");
	assert_string_equal(norm("/data/.."), "(refused)");
	assert_string_equal(norm("/../data"), "(refused)");
	assert_string_equal(norm("/data/x\n"), "(refused)"); /* a control byte: a log line */
	assert_string_equal(norm("/data/\x7f"), "(refused)");
	char big[80];
	memset(big, 'a', sizeof(big) - 1);
	big[0] = '/';
	big[sizeof(big) - 1] = '\0';
	assert_string_equal(norm(big), "(refused)"); /* does not fit out[64] */
	big[63] = '\0';				     /* 63 characters fit */
	assert_string_equal(norm(big), big);
	char out[8];
	assert_int_equal(gm_lendroot_normalise("/abc", out, 1), -EINVAL);
	assert_int_equal(gm_lendroot_normalise(NULL, out, sizeof(out)), -EINVAL);
}

static void test_normalise_drops_empty_and_dot_components(void **state)
{
	(void)state;
	assert_string_equal(norm("/data//x/./y/"), "/data/x/y");
	assert_string_equal(norm("/"), "/");
	assert_string_equal(norm("//./"), "/");
	assert_string_equal(norm("/data/..x/x.."), "/data/..x/x.."); /* names, not ".." */
	assert_string_equal(norm("/data/.hidden"), "/data/.hidden");
}

static void test_find_matches_whole_components(void **state)
{
	(void)state;
	const char *roots[] = {"/srv/data", "/scratch/sets"};
	assert_int_equal(gm_lendroot_find(roots, 2, "/srv/data"), 0);
	assert_int_equal(gm_lendroot_find(roots, 2, "/srv/data/imagenet/train"), 0);
	assert_int_equal(gm_lendroot_find(roots, 2, "/scratch/sets/x"), 1);
	assert_int_equal(gm_lendroot_find(roots, 2, "/srv/data2"), -1); /* a sibling */
	assert_int_equal(gm_lendroot_find(roots, 2, "/srv/dat"), -1);
	assert_int_equal(gm_lendroot_find(roots, 2, "/srv"), -1); /* above a root */
	assert_int_equal(gm_lendroot_find(roots, 2, "/usr"), -1);
	assert_int_equal(gm_lendroot_find(roots, 0, "/srv/data"), -1); /* none: nothing */
	const char *all[] = {"/"};
	assert_int_equal(gm_lendroot_find(all, 1, "/usr/share"), 0);
}

static void test_canon_resolves_and_refuses_in_words(void **state)
{
	(void)state;
	char dir[128], link[128], file[128], out[4096], err[512];
	snprintf(dir, sizeof(dir), "%s/sets", base);
	snprintf(link, sizeof(link), "%s/via", base);
	snprintf(file, sizeof(file), "%s/file", base);
	assert_int_equal(mkdir(dir, 0755), 0);
	assert_int_equal(symlink(dir, link), 0);
	int fd = open(file, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	close(fd);

	assert_int_equal(gm_lendroot_canon(link, out, sizeof(out), err, sizeof(err)), 0);
	char want[4096];
	assert_non_null(realpath(dir, want));
	assert_string_equal(out, want); /* the symlink resolved */

	assert_int_equal(gm_lendroot_canon(file, out, sizeof(out), err, sizeof(err)), -ENOTDIR);
	assert_non_null(strstr(err, file));
	assert_non_null(strstr(err, "not a directory"));
	char none[160];
	snprintf(none, sizeof(none), "%s/none", base);
	assert_int_equal(gm_lendroot_canon(none, out, sizeof(out), err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, none));
	assert_int_equal(gm_lendroot_canon(dir, out, 4, err, sizeof(err)), -ENAMETOOLONG);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_canon_resolves_and_refuses_in_words),
	    cmocka_unit_test(test_find_matches_whole_components),
	    cmocka_unit_test(test_normalise_drops_empty_and_dot_components),
	    cmocka_unit_test(test_normalise_refuses_what_words_cannot_settle),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
