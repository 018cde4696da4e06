/*
 * test_synth.c - synthetic datasets and bad files (core/synth.c), and the
 * `goldminer synth` command (cmd/synth.c). Everything is written under a
 * mkdtemp() directory.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd.h"
#include "goldminer/jpeg.h"
#include "goldminer/synth.h"

static char root[64];

static int rm_one(const char *p, const struct stat *st, int type, struct FTW *f)
{
	(void)st, (void)type, (void)f;
	return remove(p);
}

static int setup(void **state)
{
	(void)state;
	strcpy(root, "/tmp/gm-test-synth-XXXXXX");
	return mkdtemp(root) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	return nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static uint8_t *read_all(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return buf;
}

static int count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;
	assert_non_null(d);
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

static void test_dataset_layout_and_decode(void **state)
{
	char dir[PATH_MAX], path[PATH_MAX + 64], err[256];
	struct gm_jpeg *j;
	uint64_t bytes = 0, sum = 0;
	(void)state;
	snprintf(dir, sizeof(dir), "%s/ds1/nested", root);
	assert_int_equal(gm_synth_write(dir, 25, 4, 7, 90, &bytes, err, sizeof(err)), 0);
	assert_int_equal(count_entries(dir), 4);
	assert_int_equal(gm_jpeg_create(&j, 0), 0);
	for (uint32_t c = 0; c < 4; c++) {
		snprintf(path, sizeof(path), "%s/class_%02u", dir, c);
		assert_int_equal(count_entries(path), c == 0 ? 7 : 6);
	}
	for (uint32_t i = 0; i < 25; i++) {
		size_t len;
		struct gm_jpeg_info info;
		struct gm_jpeg_image im;
		snprintf(path, sizeof(path), "%s/class_%02u/img_%06u.jpg", dir, i % 4, i);
		uint8_t *buf = read_all(path, &len);
		sum += len;
		assert_int_equal(gm_jpeg_open(j, buf, len, &info), 0);
		assert_in_range(info.width, 200, 800);
		assert_in_range(info.height, 200, 800);
		if (gm_jpeg_decode_full(j, 8, &im) != 0)
			fail_msg("%s: %s", path, gm_jpeg_errmsg(j));
		assert_int_equal(gm_jpeg_warnings(j), 0);
		free(buf);
	}
	assert_int_equal(bytes, sum);
	/* photo-like sizes: mean of 25 files between 15 and 100 KB */
	assert_in_range(sum / 25, 15000, 100000);
	gm_jpeg_destroy(j);
}

static void test_deterministic(void **state)
{
	char a[PATH_MAX], b[PATH_MAX], c[PATH_MAX], pa[PATH_MAX + 64], pb[PATH_MAX + 64];
	(void)state;
	snprintf(a, sizeof(a), "%s/da", root);
	snprintf(b, sizeof(b), "%s/db", root);
	snprintf(c, sizeof(c), "%s/dc", root);
	assert_int_equal(gm_synth_write(a, 12, 3, 99, 0, NULL, NULL, 0), 0);
	assert_int_equal(gm_synth_write(b, 12, 3, 99, 0, NULL, NULL, 0), 0);
	assert_int_equal(gm_synth_write(c, 12, 3, 100, 0, NULL, NULL, 0), 0);
	int differ = 0;
	for (uint32_t i = 0; i < 12; i++) {
		size_t la, lb, lc;
		snprintf(pa, sizeof(pa), "%s/class_%02u/img_%06u.jpg", a, i % 3, i);
		snprintf(pb, sizeof(pb), "%s/class_%02u/img_%06u.jpg", b, i % 3, i);
		uint8_t *x = read_all(pa, &la), *y = read_all(pb, &lb);
		assert_int_equal(la, lb);
		assert_memory_equal(x, y, la);
		free(y);
		snprintf(pb, sizeof(pb), "%s/class_%02u/img_%06u.jpg", c, i % 3, i);
		y = read_all(pb, &lc);
		differ += la != lc || memcmp(x, y, la) != 0;
		free(x);
		free(y);
	}
	assert_int_equal(differ, 12);
}

static void test_single_file_kinds(void **state)
{
	struct gm_jpeg *j;
	struct gm_jpeg_info info;
	struct gm_jpeg_image im;
	uint8_t *buf;
	size_t len;
	(void)state;
	assert_int_equal(gm_jpeg_create(&j, 0), 0);
	assert_int_equal(gm_synth_jpeg_mem(64, 48, 1, GM_SYNTH_GRAY, 0, &buf, &len), 0);
	assert_int_equal(gm_jpeg_open(j, buf, len, &info), 0);
	assert_int_equal(info.components, 1);
	assert_int_equal(info.width, 64);
	assert_int_equal(info.height, 48);
	gm_jpeg_abort(j);
	free(buf);
	assert_int_equal(gm_synth_jpeg_mem(64, 48, 1, GM_SYNTH_PROGRESSIVE, 75, &buf, &len), 0);
	assert_int_equal(gm_jpeg_open(j, buf, len, &info), 0);
	assert_true(info.progressive);
	assert_int_equal(gm_jpeg_decode_full(j, 8, &im), 0);
	free(buf);
	assert_int_equal(gm_synth_jpeg_mem(64, 48, 1, GM_SYNTH_CMYK, 0, &buf, &len), 0);
	assert_int_equal(gm_jpeg_open(j, buf, len, &info), 0);
	assert_true(info.cmyk);
	gm_jpeg_abort(j);
	free(buf);
	/* quality changes the size */
	size_t l50, l95;
	assert_int_equal(gm_synth_jpeg_mem(300, 200, 3, 0, 50, &buf, &l50), 0);
	free(buf);
	assert_int_equal(gm_synth_jpeg_mem(300, 200, 3, 0, 95, &buf, &l95), 0);
	free(buf);
	assert_true(l95 > l50);
	/* bad arguments */
	assert_int_equal(gm_synth_jpeg_mem(0, 10, 1, 0, 0, &buf, &len), -EINVAL);
	assert_int_equal(gm_synth_jpeg_mem(10, 70000, 1, 0, 0, &buf, &len), -EINVAL);
	assert_int_equal(gm_synth_jpeg_mem(10, 10, 1, 0, 101, &buf, &len), -EINVAL);
	assert_int_equal(gm_synth_bomb_mem(0, 5, &buf, &len), -EINVAL);
	gm_jpeg_destroy(j);
}

static void test_bad_files(void **state)
{
	static const struct {
		enum gm_synth_bad kind;
		int open_ret, decode_ret;
	} k[] = {
	    {GM_SYNTH_BAD_EMPTY, -ENODATA, 0},	 {GM_SYNTH_BAD_TRUNCATED, 0, -EBADMSG},
	    {GM_SYNTH_BAD_CORRUPT, -EBADMSG, 0}, {GM_SYNTH_BAD_NOT_JPEG, -EBADMSG, 0},
	    {GM_SYNTH_BAD_BOMB, -E2BIG, 0},
	};
	char path[PATH_MAX];
	struct gm_jpeg *j;
	(void)state;
	assert_int_equal(gm_jpeg_create(&j, 0), 0);
	for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++) {
		size_t len;
		struct gm_jpeg_image im;
		snprintf(path, sizeof(path), "%s/bad%zu.jpg", root, i);
		assert_int_equal(gm_synth_write_bad(path, k[i].kind, 5), 0);
		uint8_t *buf = read_all(path, &len);
		assert_int_equal(gm_jpeg_open(j, buf, len, NULL), k[i].open_ret);
		if (k[i].open_ret == 0) {
			/* any window fails: not even the first MCU row is complete */
			assert_int_equal(gm_jpeg_decode_region(j, 8, 0, 0, 8, 8, &im),
					 k[i].decode_ret);
			assert_int_equal(gm_jpeg_open(j, buf, len, NULL), 0);
			assert_int_equal(gm_jpeg_decode_full(j, 1, &im), k[i].decode_ret);
		}
		free(buf);
	}
	snprintf(path, sizeof(path), "%s/badx.jpg", root);
	assert_int_equal(gm_synth_write_bad(path, (enum gm_synth_bad)42, 5), -EINVAL);
	snprintf(path, sizeof(path), "%s/no/such/dir/x.jpg", root);
	assert_int_equal(gm_synth_write_bad(path, GM_SYNTH_BAD_EMPTY, 5), -ENOENT);
	assert_int_equal(gm_synth_write_jpeg(path, 10, 10, 1, 0), -ENOENT);
	gm_jpeg_destroy(j);
}

static void test_write_errors(void **state)
{
	char file[PATH_MAX], dir[PATH_MAX], err[PATH_MAX + 128];
	(void)state;
	snprintf(file, sizeof(file), "%s/plainfile", root);
	FILE *f = fopen(file, "w");
	assert_non_null(f);
	fclose(f);
	snprintf(dir, sizeof(dir), "%s/plainfile/sub", root);
	assert_int_equal(gm_synth_write(dir, 3, 2, 1, 90, NULL, err, sizeof(err)), -ENOTDIR);
	assert_non_null(strstr(err, dir)); /* the message names the path */
	assert_int_equal(gm_synth_write(dir, 3, 0, 1, 90, NULL, err, sizeof(err)), -EINVAL);
	assert_int_equal(gm_synth_write(dir, 3, 2, 1, 101, NULL, err, sizeof(err)), -EINVAL);
}

static void test_cli(void **state)
{
	char dir[PATH_MAX], path[PATH_MAX + 64];
	(void)state;
	snprintf(dir, sizeof(dir), "%s/cli", root);
	char *ok[] = {"synth", dir, "--images", "5", "--classes", "2", "--seed", "3", NULL};
	assert_int_equal(gm_cmd_synth(8, ok), 0);
	snprintf(path, sizeof(path), "%s/class_01/img_000003.jpg", dir);
	assert_int_equal(access(path, R_OK), 0);
	/* non-empty DIR needs --force */
	assert_int_equal(gm_cmd_synth(8, ok), 1);
	char *force[] = {"synth", dir, "--images", "5", "--classes", "2", "--force", NULL};
	assert_int_equal(gm_cmd_synth(7, force), 0);
	/* usage errors */
	char *noimg[] = {"synth", dir, NULL};
	assert_int_equal(gm_cmd_synth(2, noimg), 2);
	char *badnum[] = {"synth", dir, "--images", "x5", NULL};
	assert_int_equal(gm_cmd_synth(4, badnum), 2);
	char *badopt[] = {"synth", dir, "--images", "5", "--bogus", NULL};
	assert_int_equal(gm_cmd_synth(5, badopt), 2);
	char *badq[] = {"synth", dir, "--images", "5", "--quality", "0", NULL};
	assert_int_equal(gm_cmd_synth(6, badq), 2);
	char *help[] = {"synth", "--help", NULL};
	assert_int_equal(gm_cmd_synth(2, help), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_dataset_layout_and_decode),
	    cmocka_unit_test(test_deterministic),
	    cmocka_unit_test(test_single_file_kinds),
	    cmocka_unit_test(test_bad_files),
	    cmocka_unit_test(test_write_errors),
	    cmocka_unit_test(test_cli),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
