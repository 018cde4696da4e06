/*
 * test_hybrid.c - one file through the C per-sample prefix into a caller's buffer
 * (core/hybrid.c): the bytes are gm_aug_sample's on the file, RGBX is the same
 * pixels widened with 255, the draws follow the key (gm_aug_window names them),
 * and every refusal names the file (a read error injected by wrapping read()).
 */
// LDFLAGS: -Wl,--wrap=read
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "goldminer/aug.h"
#include "goldminer/hybrid.h"
#include "goldminer/synth.h"

#include "testutil.h"

/* read() fails with EIO while read_fails is set (only gm_hybrid_sample reads here) */
static int read_fails;
ssize_t __real_read(int fd, void *buf, size_t n);
ssize_t __wrap_read(int fd, void *buf, size_t n);
ssize_t __wrap_read(int fd, void *buf, size_t n)
{
	if (read_fails) {
		errno = EIO;
		return -1;
	}
	return __real_read(fd, buf, n);
}

static char dir[256];
static char jpg[300], other[300];
#define SIZE 48

static int setup(void **state)
{
	(void)state;
	if (gm_test_tmpdir(dir, sizeof(dir), "gm-test-hybrid"))
		return -1;
	snprintf(jpg, sizeof(jpg), "%s/a.jpg", dir);
	snprintf(other, sizeof(other), "%s/b.jpg", dir);
	if (gm_synth_write_jpeg(jpg, 160, 120, 7, 0) || gm_synth_write_jpeg(other, 90, 200, 8, 0))
		return -1;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	gm_test_rm_tree(dir);
	return 0;
}

static struct gm_aug_spec spec(enum gm_aug_mode mode, enum gm_out_type out)
{
	struct gm_aug_spec s;
	gm_aug_spec_default(&s);
	s.mode = mode;
	s.size = SIZE;
	s.resize = 64;
	s.out = out;
	return s;
}

static uint8_t *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	*len = (size_t)ftell(f);
	rewind(f);
	uint8_t *b = malloc(*len);
	assert_non_null(b);
	assert_int_equal(fread(b, 1, *len, f), *len);
	fclose(f);
	return b;
}

/* gm_hybrid_sample's bytes == gm_aug_sample's on the file's bytes, same key. */
static void check_same_as_aug(enum gm_aug_mode mode, enum gm_out_type out)
{
	struct gm_aug_spec s = spec(mode, out);
	struct gm_hybrid *h;
	struct gm_aug *a;
	size_t len, n = gm_aug_out_bytes(&s);
	uint8_t *file = slurp(jpg, &len), *want = malloc(n), *got = malloc(n);

	assert_int_equal(gm_hybrid_create(&h, &s, GM_HYBRID_AUG, NULL, 0), 0);
	assert_int_equal(gm_hybrid_out_bytes(h), n);
	assert_int_equal(gm_aug_create(&a, &s), 0);
	for (uint64_t key = 0; key < 8; key++) {
		assert_int_equal(gm_aug_sample(a, file, len, key, 3, 5, want, NULL), 0);
		assert_int_equal(gm_hybrid_sample(h, jpg, key, 3, 5, got, n), 0);
		assert_memory_equal(got, want, n);
	}
	gm_aug_destroy(a);
	gm_hybrid_destroy(h);
	free(file);
	free(want);
	free(got);
}

static void test_train_uint8_bytes_are_gm_aug_samples(void **state)
{
	(void)state;
	check_same_as_aug(GM_AUG_TRAIN, GM_OUT_U8_HWC);
}

static void test_eval_float32_bytes_are_gm_aug_samples(void **state)
{
	(void)state;
	check_same_as_aug(GM_AUG_EVAL, GM_OUT_F32_CHW);
	check_same_as_aug(GM_AUG_TRAIN, GM_OUT_F16_CHW);
}

static void test_rgbx_is_hwc_widened_with_255(void **state)
{
	struct gm_aug_spec s = spec(GM_AUG_TRAIN, GM_OUT_U8_HWC);
	struct gm_hybrid *hwc, *rgbx;
	size_t px = SIZE * SIZE;
	uint8_t *a = malloc(px * 3), *b = malloc(px * 4);
	(void)state;

	assert_int_equal(gm_hybrid_create(&hwc, &s, GM_HYBRID_AUG, NULL, 0), 0);
	assert_int_equal(gm_hybrid_create(&rgbx, &s, GM_HYBRID_RGBX, NULL, 0), 0);
	assert_int_equal(gm_hybrid_out_bytes(rgbx), px * 4);
	for (uint64_t key = 0; key < 6; key++) {
		const char *f = key & 1 ? other : jpg;
		assert_int_equal(gm_hybrid_sample(hwc, f, key, 0, 0, a, px * 3), 0);
		memset(b, 0, px * 4);
		assert_int_equal(gm_hybrid_sample(rgbx, f, key, 0, 0, b, px * 4), 0);
		for (size_t i = 0; i < px; i++) {
			assert_memory_equal(b + 4 * i, a + 3 * i, 3);
			assert_int_equal(b[4 * i + 3], 255);
		}
	}
	gm_hybrid_destroy(hwc);
	gm_hybrid_destroy(rgbx);
	free(a);
	free(b);
}

/* The key decides the draws: the same key the same bytes, other keys others. */
static void test_draws_follow_the_key(void **state)
{
	struct gm_aug_spec s = spec(GM_AUG_TRAIN, GM_OUT_U8_HWC);
	struct gm_hybrid *h;
	size_t n = SIZE * SIZE * 3;
	uint8_t *a = malloc(n), *b = malloc(n);
	int differ = 0;
	(void)state;

	assert_int_equal(gm_hybrid_create(&h, &s, GM_HYBRID_AUG, NULL, 0), 0);
	assert_int_equal(gm_hybrid_sample(h, jpg, 42, 0, 0, a, n), 0);
	assert_int_equal(gm_hybrid_sample(h, jpg, 42, 0, 0, b, n), 0);
	assert_memory_equal(a, b, n);
	for (uint64_t key = 43; key < 48; key++) {
		assert_int_equal(gm_hybrid_sample(h, jpg, key, 0, 0, b, n), 0);
		differ += memcmp(a, b, n) != 0;
	}
	assert_int_equal(differ, 5);
	gm_hybrid_destroy(h);
	free(a);
	free(b);
}

/* gm_aug_window: the eval box is Resize + CenterCrop's; a train box lies in the
 * image within the spec's scale and ratio, is the key's alone, and its flip is the
 * one the pixels show (flip_p 1 mirrors flip_p 0's output: the same box). */
static void test_window_is_the_crop_and_flip_of_the_sample(void **state)
{
	struct gm_aug_spec s = spec(GM_AUG_EVAL, GM_OUT_U8_HWC);
	double b[4], c[4];
	bool flip = true, flip2;
	(void)state;

	gm_aug_window(&s, 160, 120, 1, 2, 3, b, &flip);
	assert_false(flip); /* 160x120 -> 85x64, crop 48 at (18, 8) of it */
	assert_true(fabs(b[0] - 18 * 160.0 / 85) < 1e-9 && fabs(b[2] - 66 * 160.0 / 85) < 1e-9);
	assert_true(fabs(b[1] - 15.0) < 1e-9 && fabs(b[3] - 105.0) < 1e-9);
	s = spec(GM_AUG_TRAIN, GM_OUT_U8_HWC);
	for (uint64_t key = 0; key < 200; key++) {
		gm_aug_window(&s, 160, 120, key, 0, 0, b, &flip);
		gm_aug_window(&s, 160, 120, key, 0, 0, c, &flip2);
		assert_memory_equal(b, c, sizeof(b));
		assert_int_equal(flip, flip2);
		double w = b[2] - b[0], h = b[3] - b[1];
		assert_true(b[0] >= 0 && b[1] >= 0 && b[2] <= 160 && b[3] <= 120 && w >= 1 &&
			    h >= 1);
		assert_true(w * h <= 160 * 120 * 1.0001);
		assert_true(w * h >= 160 * 120 * 0.08 * 0.8); /* w, h rounded to whole pixels */
	}
	size_t n = SIZE * SIZE * 3;
	uint8_t *p0 = malloc(n), *p1 = malloc(n);
	struct gm_hybrid *h0, *h1;
	s.flip_p = 0;
	assert_int_equal(gm_hybrid_create(&h0, &s, GM_HYBRID_AUG, NULL, 0), 0);
	s.flip_p = 1;
	assert_int_equal(gm_hybrid_create(&h1, &s, GM_HYBRID_AUG, NULL, 0), 0);
	gm_aug_window(&s, 160, 120, 9, 0, 0, b, &flip);
	assert_true(flip);
	assert_int_equal(gm_hybrid_sample(h0, jpg, 9, 0, 0, p0, n), 0);
	assert_int_equal(gm_hybrid_sample(h1, jpg, 9, 0, 0, p1, n), 0);
	for (size_t y = 0; y < SIZE; y++)
		for (size_t x = 0; x < SIZE; x++)
			assert_memory_equal(p1 + (y * SIZE + x) * 3,
					    p0 + (y * SIZE + SIZE - 1 - x) * 3, 3);
	gm_hybrid_destroy(h0);
	gm_hybrid_destroy(h1);
	free(p0);
	free(p1);
}

/* Each refusal: its errno, and a message naming the file. */
static void expect_fail(struct gm_hybrid *h, const char *path, int err, size_t len, const char *why)
{
	static uint8_t out[SIZE * SIZE * 4];
	assert_int_equal(gm_hybrid_sample(h, path, 1, 0, 0, out, len), err);
	const char *m = gm_hybrid_errmsg(h);
	if (!strstr(m, path) || !strstr(m, why))
		fail_msg("message '%s' lacks '%s' or '%s'", m, path, why);
}

static void test_bad_files_are_refused_naming_them(void **state)
{
	struct gm_aug_spec s = spec(GM_AUG_TRAIN, GM_OUT_U8_HWC);
	struct gm_hybrid *h;
	char p[320];
	size_t n = SIZE * SIZE * 3;
	(void)state;

	assert_int_equal(gm_hybrid_create(&h, &s, GM_HYBRID_AUG, NULL, 0), 0);
	snprintf(p, sizeof(p), "%s/missing.jpg", dir);
	expect_fail(h, p, -ENOENT, n, "No such file");
	expect_fail(h, dir, -EISDIR, n, "directory");
	snprintf(p, sizeof(p), "%s/empty.jpg", dir);
	assert_int_equal(gm_synth_write_bad(p, GM_SYNTH_BAD_EMPTY, 1), 0);
	expect_fail(h, p, -ENODATA, n, "empty");
	snprintf(p, sizeof(p), "%s/notjpeg.jpg", dir);
	assert_int_equal(gm_synth_write_bad(p, GM_SYNTH_BAD_NOT_JPEG, 1), 0);
	expect_fail(h, p, -EBADMSG, n, "");
	snprintf(p, sizeof(p), "%s/trunc.jpg", dir);
	assert_int_equal(gm_synth_write_bad(p, GM_SYNTH_BAD_TRUNCATED, 1), 0);
	expect_fail(h, p, -EBADMSG, n, "");
	snprintf(p, sizeof(p), "%s/bomb.jpg", dir);
	assert_int_equal(gm_synth_write_bad(p, GM_SYNTH_BAD_BOMB, 1), 0);
	expect_fail(h, p, -E2BIG, n, "");
	expect_fail(h, jpg, -ENOBUFS, n - 1, "smaller than a sample");
	read_fails = 1;
	expect_fail(h, jpg, -EIO, n, "Input/output error");
	read_fails = 0;
	/* a file longer than fstat said (procfs says 0 bytes) is not taken as it is */
	expect_fail(h, "/proc/self/status", -EIO, n, "grew while it was read");
	/* after errors, a good file is made as ever */
	static uint8_t out[SIZE * SIZE * 3];
	assert_int_equal(gm_hybrid_sample(h, jpg, 1, 0, 0, out, n), 0);
	assert_string_equal(gm_hybrid_errmsg(h), "");
	gm_hybrid_destroy(h);
}

static void test_bad_specs_and_layouts_are_refused_in_words(void **state)
{
	struct gm_aug_spec s = spec(GM_AUG_TRAIN, GM_OUT_F32_CHW);
	struct gm_hybrid *h = (struct gm_hybrid *)&s;
	char err[256];
	(void)state;

	assert_int_equal(gm_hybrid_create(&h, &s, GM_HYBRID_RGBX, err, sizeof(err)), -EINVAL);
	assert_null(h);
	assert_non_null(strstr(err, "GM_OUT_U8_HWC"));
	assert_int_equal(gm_hybrid_create(&h, &s, (enum gm_hybrid_layout)7, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "layout 7"));
	s.size = 0;
	assert_int_equal(gm_hybrid_create(&h, &s, GM_HYBRID_AUG, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "size"));
	assert_int_equal(gm_hybrid_create(&h, NULL, GM_HYBRID_AUG, err, sizeof(err)), -EINVAL);
	gm_hybrid_destroy(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_train_uint8_bytes_are_gm_aug_samples),
	    cmocka_unit_test(test_eval_float32_bytes_are_gm_aug_samples),
	    cmocka_unit_test(test_rgbx_is_hwc_widened_with_255),
	    cmocka_unit_test(test_draws_follow_the_key),
	    cmocka_unit_test(test_window_is_the_crop_and_flip_of_the_sample),
	    cmocka_unit_test(test_bad_files_are_refused_naming_them),
	    cmocka_unit_test(test_bad_specs_and_layouts_are_refused_in_words),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
