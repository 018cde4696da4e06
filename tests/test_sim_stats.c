/*
 * test_sim_stats.c - mean and 95% confidence interval over seeds (sim/stats.c):
 * the Student t quantiles against the standard table, an interval worked by hand,
 * intervals that shrink with more runs, and the JSON and text forms; the paired
 * per-seed ratio of two policies with its bootstrap interval, worked by hand.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "goldminer/sim_stats.h"

static void test_t_quantiles(void **st)
{
	(void)st;
	assert_true(isnan(gm_sim_t975(0)));
	assert_true(fabs(gm_sim_t975(1) - 12.706205) < 1e-6);
	assert_true(fabs(gm_sim_t975(4) - 2.776445) < 1e-6);
	assert_true(fabs(gm_sim_t975(30) - 2.042272) < 1e-6);
	/* beyond the table: the expansion against tabled values, then towards z */
	assert_true(fabs(gm_sim_t975(40) - 2.021075) < 1e-5);
	assert_true(fabs(gm_sim_t975(60) - 2.000298) < 1e-5);
	assert_true(fabs(gm_sim_t975(120) - 1.979930) < 1e-5);
	assert_true(gm_sim_t975(100000) > 1.95996 && gm_sim_t975(100000) < 1.96000);
	for (size_t df = 1; df < 200; df++)
		assert_true(gm_sim_t975(df + 1) < gm_sim_t975(df));
}

/*
 * 1, 2, 3, 4, 5: mean 3, sample variance 10 / 4 = 2.5, standard error
 * sqrt(2.5 / 5) = 0.707107, t(0.975, 4) = 2.776445: half-width 1.963243.
 * Twice the same values (n = 10): variance 20 / 9, standard error 0.471405,
 * t(0.975, 9) = 2.262157: 1.066391, narrower.
 */
static void test_interval_by_hand(void **st)
{
	(void)st;
	const double x[10] = {1, 2, 3, 4, 5, 1, 2, 3, 4, 5};
	struct gm_sim_interval iv;

	assert_int_equal(gm_sim_interval(x, 5, &iv), 0);
	assert_true(iv.mean == 3);
	assert_true(fabs(iv.half - 1.963243) < 1e-6);
	assert_int_equal(gm_sim_interval(x, 10, &iv), 0);
	assert_true(iv.mean == 3);
	assert_true(fabs(iv.half - 1.066391) < 1e-6);
	assert_int_equal(gm_sim_interval(x, 1, &iv), 0);
	assert_true(iv.mean == 1 && isnan(iv.half));
	assert_int_equal(gm_sim_interval(x, 0, &iv), -EINVAL);
	const double same[3] = {7, 7, 7};
	assert_int_equal(gm_sim_interval(same, 3, &iv), 0);
	assert_true(iv.mean == 7 && iv.half == 0);
}

/*
 * Two runs with avg JCT 100 and 200 s: mean 150, standard error 50,
 * t(0.975, 1) = 12.706205: half-width 635.3. GPU util 0.5 both: 0.
 */
static void test_json_and_text(void **st)
{
	(void)st;
	struct gm_sim_summary r[2] = {0};
	char buf[2048];

	for (int i = 0; i < 2; i++) {
		snprintf(r[i].policy, sizeof(r[i].policy), "goldminer");
		r[i].jobs = 7;
		r[i].avg_jct = 100.0 * (i + 1);
		r[i].gpu_util = 0.5;
	}
	assert_true(gm_sim_seeds_json(r, 2, 11, buf, sizeof(buf)) > 0);
	assert_non_null(
	    strstr(buf, "{\"policy\":\"goldminer\",\"seeds\":2,\"seed\":11,\"jobs\":7,"));
	assert_non_null(strstr(buf, ",\"avg_jct\":150.0,\"avg_jct_ci95\":635.3,"));
	assert_non_null(strstr(buf, ",\"gpu_util\":0.5000,\"gpu_util_ci95\":0.0000,"));
	assert_true(buf[strlen(buf) - 1] == '}');
	/* one run: its own figures, no interval */
	assert_true(gm_sim_seeds_json(r, 1, 11, buf, sizeof(buf)) > 0);
	assert_non_null(strstr(buf, ",\"avg_jct\":100.0,\"avg_jct_ci95\":null,"));
	assert_true(gm_sim_seeds_text(r, 2, buf, sizeof(buf)) > 0);
	assert_non_null(strstr(buf, "over 2 seeds: avg_jct 150.0 +- 635.3, p50_jct"));
	assert_int_equal(gm_sim_seeds_json(r, 0, 1, buf, sizeof(buf)), -EINVAL);
	/* a short buffer is cut, and the count says how much was needed */
	int need = gm_sim_seeds_json(r, 2, 11, buf, sizeof(buf));
	assert_true(gm_sim_seeds_json(r, 2, 11, buf, 16) == need);
	assert_int_equal(strlen(buf), 15);
}

/*
 * Ratios all 2 (2/1, 4/2, 6/3): every resample's median is 2, so the interval is
 * [2, 2], separated from 1. One seed (3/2): [1.5, 1.5].
 */
static void test_paired_ratio_constant(void **st)
{
	(void)st;
	const double a[3] = {2, 4, 6}, b[3] = {1, 2, 3};
	struct gm_sim_ratio r;

	assert_int_equal(gm_sim_paired_ratio(a, b, 3, 1, 1000, &r), 0);
	assert_int_equal(r.n, 3);
	assert_true(r.median == 2 && r.lo == 2 && r.hi == 2 && r.min == 2 && r.max == 2);
	assert_true(r.separated);
	const double one_a[1] = {3}, one_b[1] = {2};
	assert_int_equal(gm_sim_paired_ratio(one_a, one_b, 1, 1, 100, &r), 0);
	assert_true(r.median == 1.5 && r.lo == 1.5 && r.hi == 1.5 && r.separated);
}

/*
 * Ratios 1 and 3: the median is 2; a resample of two draws has median 1 (both
 * draws 1, p = 1/4), 2 (p = 1/2) or 3 (p = 1/4), so with 1000 resamples the 2.5th
 * percentile is 1 and the 97.5th is 3: [1, 3], not separated (1 is in it).
 */
static void test_paired_ratio_two_seeds(void **st)
{
	(void)st;
	const double a[2] = {1, 3}, b[2] = {1, 1};
	struct gm_sim_ratio r;

	assert_int_equal(gm_sim_paired_ratio(a, b, 2, 7, 1000, &r), 0);
	assert_true(r.median == 2 && r.lo == 1 && r.hi == 3);
	assert_true(r.min == 1 && r.max == 3);
	assert_false(r.separated);
}

/*
 * A bimodal outcome: five seeds where policy A is twice as slow (ratio 2), five
 * where it is twice as fast (0.5). The median is 1.25 (mean of the middle two),
 * a "win" that the interval [0.5, 2] does not separate from 1: a resample's
 * median is 0.5 whenever 6 or more of its 10 draws are 0.5 (p = 0.377) and 2 as
 * often. Ratios all above 1 (1.1 .. 1.5) are separated.
 */
static void test_paired_ratio_bimodal_not_separated(void **st)
{
	(void)st;
	const double a[10] = {2, 2, 2, 2, 2, 1, 1, 1, 1, 1};
	const double b[10] = {1, 1, 1, 1, 1, 2, 2, 2, 2, 2};
	struct gm_sim_ratio r, r2;

	assert_int_equal(gm_sim_paired_ratio(a, b, 10, 1, 2000, &r), 0);
	assert_true(r.median == 1.25 && r.lo == 0.5 && r.hi == 2);
	assert_false(r.separated);
	/* deterministic: the same inputs and seed give the same interval */
	assert_int_equal(gm_sim_paired_ratio(a, b, 10, 1, 2000, &r2), 0);
	assert_true(r2.lo == r.lo && r2.hi == r.hi && r2.median == r.median);
	const double up[5] = {1.1, 1.5, 1.2, 1.4, 1.3}, ones[5] = {1, 1, 1, 1, 1};
	assert_int_equal(gm_sim_paired_ratio(up, ones, 5, 3, 2000, &r), 0);
	assert_true(fabs(r.median - 1.3) < 1e-12 && r.lo > 1 && r.separated);
	assert_true(r.lo >= 1.1 && r.hi <= 1.5 && r.lo <= r.median && r.median <= r.hi);
	/* B < 1: A faster in every seed, separated below 1 */
	assert_int_equal(gm_sim_paired_ratio(ones, up, 5, 3, 2000, &r), 0);
	assert_true(r.hi < 1 && r.separated);
}

static void test_paired_ratio_refuses_bad_input(void **st)
{
	(void)st;
	const double a[2] = {1, 2}, b[2] = {1, 0}, nan2[2] = {1, NAN};
	struct gm_sim_ratio r;

	assert_int_equal(gm_sim_paired_ratio(a, a, 0, 1, 100, &r), -EINVAL);
	assert_int_equal(gm_sim_paired_ratio(a, a, 2, 1, 0, &r), -EINVAL);
	assert_int_equal(gm_sim_paired_ratio(a, b, 2, 1, 100, &r), -EINVAL);
	assert_int_equal(gm_sim_paired_ratio(nan2, a, 2, 1, 100, &r), -EINVAL);
	assert_int_equal(gm_sim_paired_ratio(a, nan2, 2, 1, 100, &r), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_t_quantiles),
	    cmocka_unit_test(test_interval_by_hand),
	    cmocka_unit_test(test_json_and_text),
	    cmocka_unit_test(test_paired_ratio_constant),
	    cmocka_unit_test(test_paired_ratio_two_seeds),
	    cmocka_unit_test(test_paired_ratio_bimodal_not_separated),
	    cmocka_unit_test(test_paired_ratio_refuses_bad_input),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
