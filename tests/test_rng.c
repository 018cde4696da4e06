/*
 * test_rng.c - the counter-based generator (core/rng.c): determinism, ranges,
 * and that permutations are permutations that change with seed and epoch.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "goldminer/rng.h"

static void test_same_key_same_stream(void **state)
{
	struct gm_rng a, b;
	(void)state;
	gm_rng_init(&a, 1, GM_RNG_STREAM_SAMPLE, 2, 3);
	gm_rng_init(&b, 1, GM_RNG_STREAM_SAMPLE, 2, 3);
	assert_int_equal(a.ctr, 0);
	for (int i = 0; i < 100; i++)
		assert_true(gm_rng_next(&a) == gm_rng_next(&b));
	assert_int_equal(a.ctr, 100);
}

static void test_keys_differ(void **state)
{
	struct gm_rng r[6];
	(void)state;
	gm_rng_init(&r[0], 1, GM_RNG_STREAM_SAMPLE, 2, 3);
	gm_rng_init(&r[1], 2, GM_RNG_STREAM_SAMPLE, 2, 3);
	gm_rng_init(&r[2], 1, GM_RNG_STREAM_PERM, 2, 3);
	gm_rng_init(&r[3], 1, GM_RNG_STREAM_SAMPLE, 3, 3);
	gm_rng_init(&r[4], 1, GM_RNG_STREAM_SAMPLE, 2, 4);
	gm_rng_init(&r[5], 1, GM_RNG_STREAM_SAMPLE, 3, 2); /* a and b are not symmetric */
	uint64_t first[6];
	for (int i = 0; i < 6; i++)
		first[i] = gm_rng_next(&r[i]);
	for (int i = 0; i < 6; i++)
		for (int k = i + 1; k < 6; k++)
			assert_true(first[i] != first[k]);
}

static void test_uniform_range_and_mean(void **state)
{
	struct gm_rng r;
	double sum = 0;
	int low = 0, high = 0;
	(void)state;
	gm_rng_init(&r, 7, GM_RNG_STREAM_SAMPLE, 0, 0);
	for (int i = 0; i < 100000; i++) {
		double u = gm_rng_uniform(&r);
		assert_true(u >= 0.0 && u < 1.0);
		sum += u;
		low += u < 0.01;
		high += u >= 0.99;
	}
	/* mean 0.5 (sd of the mean ~0.0009), both tails reached */
	assert_true(sum / 100000 > 0.49 && sum / 100000 < 0.51);
	assert_in_range(low, 800, 1200);
	assert_in_range(high, 800, 1200);
}

static void test_below_bounds(void **state)
{
	struct gm_rng r;
	static const uint64_t ns[] = {1, 2, 3, 7, 10, 1000, (1ull << 63) + 1, UINT64_MAX};
	int hist[10] = {0};
	(void)state;
	gm_rng_init(&r, 9, GM_RNG_STREAM_SAMPLE, 1, 1);
	for (size_t k = 0; k < sizeof(ns) / sizeof(ns[0]); k++)
		for (int i = 0; i < 2000; i++)
			assert_true(gm_rng_below(&r, ns[k]) < ns[k]);
	for (int i = 0; i < 1000; i++)
		assert_int_equal(gm_rng_below(&r, 1), 0);
	for (int i = 0; i < 50000; i++)
		hist[gm_rng_below(&r, 10)]++;
	for (int i = 0; i < 10; i++) /* expected 5000, sd ~67 */
		assert_in_range(hist[i], 4600, 5400);
}

static int is_permutation(const uint32_t *p, uint32_t n)
{
	uint8_t *seen = calloc(n ? n : 1, 1);
	int ok = 1;
	for (uint32_t i = 0; i < n; i++) {
		if (p[i] >= n || seen[p[i]])
			ok = 0;
		else
			seen[p[i]] = 1;
	}
	free(seen);
	return ok;
}

static void test_permutation(void **state)
{
	enum { N = 1000 };
	uint32_t *a = malloc(N * 4), *b = malloc(N * 4), *c = malloc(N * 4), *d = malloc(N * 4);
	(void)state;
	gm_rng_permutation(a, N, 5, 0);
	gm_rng_permutation(b, N, 5, 0);
	gm_rng_permutation(c, N, 5, 1);
	gm_rng_permutation(d, N, 6, 0);
	assert_true(is_permutation(a, N));
	assert_true(is_permutation(c, N));
	assert_true(is_permutation(d, N));
	assert_memory_equal(a, b, N * 4);
	assert_memory_not_equal(a, c, N * 4);
	assert_memory_not_equal(a, d, N * 4);
	/* actually shuffled: few fixed points (expected ~1) */
	int fixed = 0;
	for (uint32_t i = 0; i < N; i++)
		fixed += a[i] == i;
	assert_in_range(fixed, 0, 8);
	/* edge sizes */
	uint32_t one = 77;
	gm_rng_permutation(&one, 1, 5, 0);
	assert_int_equal(one, 0);
	gm_rng_permutation(NULL, 0, 5, 0); /* nothing to touch */
	uint32_t two[2];
	int swapped = 0;
	for (uint64_t e = 0; e < 64; e++) {
		gm_rng_permutation(two, 2, 5, e);
		assert_true(is_permutation(two, 2));
		swapped += two[0] == 1;
	}
	assert_in_range(swapped, 16, 48);
	free(a);
	free(b);
	free(c);
	free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_same_key_same_stream),
	    cmocka_unit_test(test_keys_differ),
	    cmocka_unit_test(test_uniform_range_and_mean),
	    cmocka_unit_test(test_below_bounds),
	    cmocka_unit_test(test_permutation),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
