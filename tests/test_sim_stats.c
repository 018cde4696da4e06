/*
 * test_sim_stats.c - mean and 95% confidence interval over seeds (sim/stats.c):
 * the Student t quantiles against the standard table, an interval worked by hand,
 * intervals that shrink with more runs, and the JSON and text forms.
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

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_t_quantiles),
	    cmocka_unit_test(test_interval_by_hand),
	    cmocka_unit_test(test_json_and_text),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
