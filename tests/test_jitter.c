/*
 * test_jitter.c - colour jitter (core/jitter.c): the draws are a function of the
 * key, inside their ranges, every order equally likely, ops left out when their
 * range is [0, 0]; the ops do what torchvision's do at their extremes (factor 0:
 * black, the mean gray, each pixel's gray; factor 1: the pixels unchanged through
 * gm_aug_sample; hue turns red to green, cyan, blue and keeps grays); bad ranges
 * are refused. The comparison with torchvision's own
 * ops and distributions is tests/python/test_plan.py's.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "goldminer/aug.h"
#include "goldminer/jitter.h"
#include "goldminer/synth.h"

#define SIDE 32
#define NPX  (SIDE * SIDE)

static void spec_with(struct gm_aug_spec *s, float b0, float b1, float c0, float c1, float s0,
		      float s1)
{
	gm_aug_spec_default(s);
	s->size = SIDE;
	s->jitter[0][0] = b0, s->jitter[0][1] = b1;
	s->jitter[1][0] = c0, s->jitter[1][1] = c1;
	s->jitter[2][0] = s0, s->jitter[2][1] = s1;
}

/* A colourful test image: every channel its own ramp. */
static void ramp(uint8_t *hwc)
{
	for (int i = 0; i < NPX; i++) {
		hwc[3 * i] = (uint8_t)(i * 7);
		hwc[3 * i + 1] = (uint8_t)(255 - i * 3);
		hwc[3 * i + 2] = (uint8_t)(i * 13 + 40);
	}
}

static void test_draws_are_a_function_of_the_key_inside_their_ranges(void **state)
{
	(void)state;
	struct gm_aug_spec s;
	struct gm_jitter a, b;
	spec_with(&s, 0.6f, 1.4f, 0.5f, 2.0f, 0, 0);
	assert_true(gm_jitter_on(&s));
	bool differs = false;
	for (uint64_t k = 0; k < 1000; k++) {
		gm_jitter_draw(&s, 7, 1, k, &a);
		gm_jitter_draw(&s, 7, 1, k, &b);
		assert_memory_equal(&a, &b, sizeof(a));
		assert_int_equal(a.n, 2); /* saturation's [0, 0]: left out */
		for (uint32_t i = 0; i < a.n; i++)
			assert_true(a.order[i] != GM_JITTER_SATURATION);
		assert_true(a.factor[0] >= 0.6f && a.factor[0] <= 1.4f);
		assert_true(a.factor[1] >= 0.5f && a.factor[1] <= 2.0f);
		gm_jitter_draw(&s, 7, 2, k, &b); /* another epoch */
		differs = differs || a.factor[0] != b.factor[0];
	}
	assert_true(differs);
	spec_with(&s, 0, 0, 0, 0, 0, 0);
	assert_false(gm_jitter_on(&s));
	gm_jitter_draw(&s, 7, 1, 3, &a);
	assert_int_equal(a.n, 0);
}

static void test_every_order_of_three_ops_comes_up_a_sixth_of_the_time(void **state)
{
	(void)state;
	struct gm_aug_spec s;
	struct gm_jitter j;
	int count[3][3][3] = {{{0}}};
	spec_with(&s, 0.6f, 1.4f, 0.6f, 1.4f, 0.6f, 1.4f);
	for (uint64_t k = 0; k < 6000; k++) {
		gm_jitter_draw(&s, 3, 0, k, &j);
		assert_int_equal(j.n, 3);
		assert_int_equal(j.order[0] + j.order[1] + j.order[2], 3); /* a permutation */
		assert_true(j.order[0] != j.order[1]);
		count[j.order[0]][j.order[1]][j.order[2]]++;
	}
	int orders = 0;
	for (int a = 0; a < 3; a++)
		for (int b = 0; b < 3; b++)
			for (int c = 0; c < 3; c++)
				if (count[a][b][c]) {
					orders++;
					/* binomial(6000, 1/6): sd 29; 5 sd */
					assert_in_range(count[a][b][c], 1000 - 145, 1000 + 145);
				}
	assert_int_equal(orders, 6);
}

/* One op alone with a factor of (almost) 0 on the ramp, uint8 output. */
static void apply_one(int op, uint8_t *out)
{
	struct gm_aug_spec s;
	uint8_t hwc[3 * NPX];
	static float planes[3 * NPX];
	struct gm_jitter j = {1, {(uint8_t)op, 0, 0}, {1, 1, 1}};
	spec_with(&s, 0, 0, 0, 0, 0, 0);
	j.factor[op] = 0;
	ramp(hwc);
	gm_jitter_apply(&j, &s, hwc, planes, out);
}

static void test_factor_zero_gives_black_the_mean_gray_and_each_pixels_gray(void **state)
{
	(void)state;
	uint8_t hwc[3 * NPX], out[3 * NPX];
	ramp(hwc);
	apply_one(GM_JITTER_BRIGHTNESS, out);
	for (int i = 0; i < 3 * NPX; i++)
		assert_int_equal(out[i], 0);
	apply_one(GM_JITTER_CONTRAST, out);
	double mean = 0;
	for (int i = 0; i < NPX; i++)
		mean += 0.2989 * hwc[3 * i] + 0.587 * hwc[3 * i + 1] + 0.114 * hwc[3 * i + 2];
	mean /= NPX;
	for (int i = 0; i < 3 * NPX; i++)
		assert_int_equal(out[i], (int)(mean + 0.5));
	apply_one(GM_JITTER_SATURATION, out);
	for (int i = 0; i < NPX; i++) {
		double g = 0.2989 * hwc[3 * i] + 0.587 * hwc[3 * i + 1] + 0.114 * hwc[3 * i + 2];
		for (int c = 0; c < 3; c++)
			assert_in_range(out[3 * i + c], (int)floor(g), (int)ceil(g));
	}
}

static void test_factor_one_leaves_gm_aug_samples_pixels_as_they_are(void **state)
{
	(void)state;
	struct gm_aug_spec s0, s1;
	struct gm_aug *a0, *a1;
	uint8_t *jpg;
	size_t len;
	static float o0[3 * NPX], o1[3 * NPX];
	assert_int_equal(gm_synth_jpeg_mem(160, 120, 5, 0, 90, &jpg, &len), 0);
	spec_with(&s0, 0, 0, 0, 0, 0, 0);
	s0.out = GM_OUT_F32_CHW;
	s1 = s0;
	s1.jitter[0][0] = s1.jitter[0][1] = 1; /* brightness 1, contrast 1 */
	s1.jitter[1][0] = s1.jitter[1][1] = 1;
	assert_int_equal(gm_aug_create(&a0, &s0), 0);
	assert_int_equal(gm_aug_create(&a1, &s1), 0);
	for (uint64_t k = 0; k < 4; k++) {
		assert_int_equal(gm_aug_sample(a0, jpg, len, 1, 0, k, o0, NULL), 0);
		assert_int_equal(gm_aug_sample(a1, jpg, len, 1, 0, k, o1, NULL), 0);
		for (int i = 0; i < 3 * NPX; i++)
			assert_true(fabsf(o0[i] - o1[i]) < 1e-5f);
	}
	s1.jitter[0][0] = 0.5f; /* brightness 0.5..1: darker */
	s1.jitter[0][1] = 0.9f;
	gm_aug_destroy(a1);
	assert_int_equal(gm_aug_create(&a1, &s1), 0);
	assert_int_equal(gm_aug_sample(a1, jpg, len, 1, 0, 0, o1, NULL), 0);
	double d = 0;
	for (int i = 0; i < 3 * NPX; i++)
		d += o0[i] - o1[i];
	assert_true(d > 0);
	gm_aug_destroy(a0);
	gm_aug_destroy(a1);
	free(jpg);
}

/* One pixel through a hue turn of f, uint8 output. */
static void hue_of(uint8_t r, uint8_t g, uint8_t b, float f, uint8_t out[3])
{
	struct gm_aug_spec s;
	uint8_t hwc[3] = {r, g, b};
	float planes[3];
	struct gm_jitter j = {1, {GM_JITTER_HUE, 0, 0, 0}, {1, 1, 1, f}};
	spec_with(&s, 0, 0, 0, 0, 0, 0);
	s.size = 1;
	gm_jitter_apply(&j, &s, hwc, planes, out);
}

static void test_hue_turns_the_colour_wheel_and_keeps_grays(void **state)
{
	(void)state;
	uint8_t o[3];
	hue_of(255, 0, 0, 1.0f / 3, o); /* red a third of the way round: green */
	assert_int_equal(o[0], 0), assert_int_equal(o[1], 255), assert_int_equal(o[2], 0);
	hue_of(255, 0, 0, 0.5f, o); /* half: cyan */
	assert_int_equal(o[0], 0), assert_int_equal(o[1], 255), assert_int_equal(o[2], 255);
	hue_of(255, 0, 0, -1.0f / 3, o); /* back a third: blue */
	assert_int_equal(o[0], 0), assert_int_equal(o[1], 0), assert_int_equal(o[2], 255);
	hue_of(200, 100, 50, 0.0f, o); /* no turn: the same colour */
	assert_int_equal(o[0], 200), assert_int_equal(o[1], 100), assert_int_equal(o[2], 50);
	hue_of(90, 90, 90, 0.4f, o); /* a gray has no hue */
	assert_int_equal(o[0], 90), assert_int_equal(o[1], 90), assert_int_equal(o[2], 90);
}

static void test_bad_ranges_are_refused(void **state)
{
	(void)state;
	struct gm_aug_spec s;
	struct gm_aug *a = NULL;
	char err[160];
	const float bad[][2] = {{1.2f, 0.8f}, {-0.1f, 1.0f}, {0.5f, 1001.0f}, {NAN, 1.0f}};
	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		spec_with(&s, 0, 0, bad[k][0], bad[k][1], 0, 0);
		assert_int_equal(gm_aug_spec_check(&s, err, sizeof(err)), -EINVAL);
		assert_non_null(strstr(err, "jitter ranges must be LO,HI"));
		assert_int_equal(gm_aug_create(&a, &s), -EINVAL);
	}
	spec_with(&s, 0, 0, 0.8f, 1.2f, 0, 0);
	assert_int_equal(gm_aug_spec_check(&s, err, sizeof(err)), 0);
	s.jitter[3][0] = -0.6f; /* hue: a fraction of the circle, at most half */
	s.jitter[3][1] = 0.1f;
	assert_int_equal(gm_aug_spec_check(&s, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "the hue jitter range must be LO,HI"));
	s.jitter[3][0] = -0.5f;
	assert_int_equal(gm_aug_spec_check(&s, err, sizeof(err)), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_draws_are_a_function_of_the_key_inside_their_ranges),
	    cmocka_unit_test(test_every_order_of_three_ops_comes_up_a_sixth_of_the_time),
	    cmocka_unit_test(test_factor_zero_gives_black_the_mean_gray_and_each_pixels_gray),
	    cmocka_unit_test(test_factor_one_leaves_gm_aug_samples_pixels_as_they_are),
	    cmocka_unit_test(test_hue_turns_the_colour_wheel_and_keeps_grays),
	    cmocka_unit_test(test_bad_ranges_are_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
