/*
 * test_policy.c - the elastic allocation policy (core/policy.c): hand-computable
 * allocations, the incremental state against the one-shot optimum, and bad input.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "goldminer/policy.h"
#include "goldminer/rng.h"

static struct gm_policy_job job(double R, double d, double v, uint32_t mn, uint32_t mx,
				uint64_t tag)
{
	struct gm_policy_job j = {R, d, v, mn, mx, tag};
	return j;
}

/* A: 4 full units of gain 100; B: 2 full (100) and a partial (50). */
static void test_enough_budget(void **st)
{
	(void)st;
	struct gm_policy_job j[2] = {job(400, 100, 1, 0, UINT32_MAX, 1),
				     job(250, 100, 1, 0, UINT32_MAX, 2)};
	uint32_t w[2];
	assert_int_equal(gm_policy_allocate(j, 2, 10, w), 0);
	assert_int_equal(w[0], 4); /* exactly what saturates the GPUs, no more */
	assert_int_equal(w[1], 3); /* 2 full + the partial unit */
}

static void test_short_budget_ties_to_older(void **st)
{
	(void)st;
	struct gm_policy_job j[2] = {job(400, 100, 1, 0, UINT32_MAX, 1),
				     job(250, 100, 1, 0, UINT32_MAX, 2)};
	uint32_t w[2];
	/* Six units gain 100; five to give; equal gains go to the smaller tag first. */
	assert_int_equal(gm_policy_allocate(j, 2, 5, w), 0);
	assert_int_equal(w[0], 4);
	assert_int_equal(w[1], 1);
	/* The partial unit (50) comes last: with 6, B gets its second full unit. */
	assert_int_equal(gm_policy_allocate(j, 2, 6, w), 0);
	assert_int_equal(w[0], 4);
	assert_int_equal(w[1], 2);
}

static void test_weight_orders(void **st)
{
	(void)st;
	/* B's unit is worth 3 x 100 > A's 1 x 100: B first. */
	struct gm_policy_job j[2] = {job(400, 100, 1, 0, UINT32_MAX, 1),
				     job(300, 100, 3, 0, UINT32_MAX, 2)};
	uint32_t w[2];
	assert_int_equal(gm_policy_allocate(j, 2, 4, w), 0);
	assert_int_equal(w[0], 1);
	assert_int_equal(w[1], 3);
}

static void test_min_and_max(void **st)
{
	(void)st;
	struct gm_policy_job j[2] = {job(400, 100, 1, 2, 3, 1), job(1000, 100, 1, 0, 5, 2)};
	uint32_t w[2];
	assert_int_equal(gm_policy_allocate(j, 2, 100, w), 0);
	assert_int_equal(w[0], 3); /* capped by max */
	assert_int_equal(w[1], 5);
	/* Minimums exceed the budget: -ENOSPC, minimums kept, no extras. */
	assert_int_equal(gm_policy_allocate(j, 2, 1, w), -ENOSPC);
	assert_int_equal(w[0], 2);
	assert_int_equal(w[1], 0);
	/* A minimum above the saturation point is still granted. */
	struct gm_policy_job k = job(100, 100, 1, 3, UINT32_MAX, 1);
	assert_int_equal(gm_policy_allocate(&k, 1, 10, w), 0);
	assert_int_equal(w[0], 3);
}

static void test_bad_input(void **st)
{
	(void)st;
	struct gm_policy *p;
	uint32_t slot, w[1];
	struct gm_policy_job bad[] = {job(100, 0, 1, 0, 1, 1), job(-1, 1, 1, 0, 1, 1),
				      job(100, 1, 0, 0, 1, 1), job(100, 1, 1, 2, 1, 1),
				      job(NAN, 1, 1, 0, 1, 1)};
	assert_int_equal(gm_policy_create(&p, 10), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(gm_policy_add(p, &bad[i], &slot), -EINVAL);
		assert_int_equal(gm_policy_allocate(&bad[i], 1, 10, w), -EINVAL);
	}
	struct gm_policy_job ok = job(100, 10, 1, 0, UINT32_MAX, 1);
	assert_int_equal(gm_policy_add(p, &ok, &slot), 0);
	assert_int_equal(gm_policy_update(p, slot, &bad[0]), -EINVAL);
	gm_policy_destroy(p);
	gm_policy_destroy(NULL);
}

/* Incremental: a newcomer with a larger gain takes workers back, level by level. */
static void test_incremental_moves(void **st)
{
	(void)st;
	struct gm_policy *p;
	uint32_t a, b, n;
	const uint32_t *ch;
	struct gm_policy_job jb = job(250, 100, 1, 0, UINT32_MAX, 2);
	struct gm_policy_job ja = job(400, 100, 3, 0, UINT32_MAX, 1);

	assert_int_equal(gm_policy_create(&p, 4), 0);
	assert_int_equal(gm_policy_add(p, &jb, &b), 0);
	assert_int_equal(gm_policy_rebalance(p), 0);
	assert_int_equal(gm_policy_workers(p, b), 3);
	n = (uint32_t)gm_policy_changed(p, &ch);
	assert_int_equal(n, 1);
	assert_int_equal(ch[0], b);
	assert_int_equal(gm_policy_changed(p, &ch), 0); /* cleared */

	assert_int_equal(gm_policy_add(p, &ja, &a), 0);
	assert_int_equal(gm_policy_rebalance(p), 0);
	assert_int_equal(gm_policy_workers(p, a), 4); /* gain 300 beats 100 and 50 */
	assert_int_equal(gm_policy_workers(p, b), 0);
	assert_int_equal(gm_policy_used(p), 4);
	assert_int_equal(gm_policy_changed(p, &ch), 2);

	/* Budget shrinks: over-budget workers come back from the least useful unit. */
	gm_policy_set_budget(p, 2);
	assert_int_equal(gm_policy_rebalance(p), 0);
	assert_int_equal(gm_policy_workers(p, a), 2);
	assert_int_equal(gm_policy_used(p), 2);

	/* A leaves: B gets everything it can use. */
	gm_policy_remove(p, a);
	gm_policy_set_budget(p, 10);
	assert_int_equal(gm_policy_rebalance(p), 0);
	assert_int_equal(gm_policy_workers(p, b), 3);
	n = (uint32_t)gm_policy_changed(p, &ch);
	assert_int_equal(n, 1); /* the removed slot is not listed */
	assert_int_equal(ch[0], b);

	/* Update: B's GPU-bound rate doubles (500 = 5 full units): two more. */
	jb.gpu_rate = 500;
	assert_int_equal(gm_policy_update(p, b, &jb), 0);
	assert_int_equal(gm_policy_rebalance(p), 0);
	assert_int_equal(gm_policy_workers(p, b), 5);
	/* Update with a max below the allocation clamps at once. */
	jb.max_workers = 2;
	assert_int_equal(gm_policy_update(p, b, &jb), 0);
	assert_int_equal(gm_policy_workers(p, b), 2);
	gm_policy_destroy(p);
}

/* Objective sum v * min(R, w d). */
static double value(const struct gm_policy_job *j, const uint32_t *w, size_t n)
{
	double s = 0;
	for (size_t i = 0; i < n; i++)
		s += j[i].weight * fmin(j[i].gpu_rate, w[i] * j[i].worker_rate);
	return s;
}

/* Reference: give the budget unit by unit to the best marginal gain. */
static double brute(const struct gm_policy_job *j, size_t n, uint64_t budget)
{
	uint32_t w[32];
	uint64_t used = 0;
	for (size_t i = 0; i < n; i++) {
		w[i] = j[i].min_workers;
		used += w[i];
	}
	while (used < budget) {
		double best = 0;
		size_t bi = n;
		for (size_t i = 0; i < n; i++) {
			if (w[i] >= j[i].max_workers)
				continue;
			double g =
			    j[i].weight * (fmin(j[i].gpu_rate, (w[i] + 1) * j[i].worker_rate) -
					   fmin(j[i].gpu_rate, w[i] * j[i].worker_rate));
			if (g > best + 1e-12) {
				best = g;
				bi = i;
			}
		}
		if (bi == n)
			break;
		w[bi]++;
		used++;
	}
	return value(j, w, n);
}

/* Random add/remove/update/budget sequences reach the greedy optimum every time. */
static void test_incremental_matches_optimum(void **st)
{
	(void)st;
	struct gm_rng r;
	gm_rng_init(&r, 42, 7, 0, 0);
	for (int round = 0; round < 200; round++) {
		struct gm_policy *p;
		struct gm_policy_job j[16];
		uint32_t slot[16];
		int live[16] = {0};
		uint64_t budget = gm_rng_below(&r, 60);
		assert_int_equal(gm_policy_create(&p, budget), 0);
		for (int step = 0; step < 40; step++) {
			int i = (int)gm_rng_below(&r, 16), op = (int)gm_rng_below(&r, 4);
			struct gm_policy_job nj = job(
			    (double)(gm_rng_below(&r, 1000) + 1),
			    (double)(gm_rng_below(&r, 90) + 10),
			    (double)(gm_rng_below(&r, 4) + 1) / 4.0, (uint32_t)gm_rng_below(&r, 2),
			    (uint32_t)(gm_rng_below(&r, 3) ? UINT32_MAX : 2 + gm_rng_below(&r, 8)),
			    (uint64_t)i);
			if (op == 0 && !live[i]) {
				assert_int_equal(gm_policy_add(p, &nj, &slot[i]), 0);
				j[i] = nj;
				live[i] = 1;
			} else if (op == 1 && live[i]) {
				gm_policy_remove(p, slot[i]);
				live[i] = 0;
			} else if (op == 2 && live[i]) {
				assert_int_equal(gm_policy_update(p, slot[i], &nj), 0);
				j[i] = nj;
			} else {
				budget = gm_rng_below(&r, 60);
				gm_policy_set_budget(p, budget);
			}
			int rc = gm_policy_rebalance(p);
			struct gm_policy_job lj[16];
			uint32_t lw[16];
			size_t n = 0;
			uint64_t used = 0, mins = 0;
			for (int k = 0; k < 16; k++)
				if (live[k]) {
					lj[n] = j[k];
					lw[n] = gm_policy_workers(p, slot[k]);
					assert_true(lw[n] >= j[k].min_workers);
					assert_true(lw[n] <= j[k].max_workers);
					used += lw[n];
					mins += j[k].min_workers;
					n++;
				}
			assert_int_equal(used, gm_policy_used(p));
			if (mins > budget) {
				assert_int_equal(rc, -ENOSPC);
				assert_int_equal(used, mins);
				continue;
			}
			assert_int_equal(rc, 0);
			assert_true(used <= budget);
			double got = value(lj, lw, n), want = brute(lj, n, budget);
			assert_true(fabs(got - want) <= 1e-9 * (want + 1));
		}
		gm_policy_destroy(p);
	}
}

/* A large pool: rebalance after one departure touches only the jobs that change. */
static void test_changes_are_local(void **st)
{
	(void)st;
	struct gm_policy *p;
	uint32_t slot[1000];
	const uint32_t *ch;
	assert_int_equal(gm_policy_create(&p, 1000 * 3 + 2), 0);
	for (int i = 0; i < 1000; i++) {
		struct gm_policy_job j =
		    job(300 + (i == 999 ? 200 : 0), 100, 1, 0, UINT32_MAX, (uint64_t)i);
		assert_int_equal(gm_policy_add(p, &j, &slot[i]), 0);
	}
	assert_int_equal(gm_policy_rebalance(p), 0);
	assert_int_equal(gm_policy_workers(p, slot[999]), 5);
	assert_int_equal(gm_policy_changed(p, &ch), 1000);
	gm_policy_remove(p, slot[0]);
	assert_int_equal(gm_policy_rebalance(p), 0);
	assert_int_equal(gm_policy_changed(p, &ch), 0); /* nobody wants more */
	gm_policy_set_budget(p, 999 * 3);
	assert_int_equal(gm_policy_rebalance(p), 0);
	assert_int_equal(gm_policy_changed(p, &ch), 1); /* one job gave back 2 */
	gm_policy_destroy(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_enough_budget),
	    cmocka_unit_test(test_short_budget_ties_to_older),
	    cmocka_unit_test(test_weight_orders),
	    cmocka_unit_test(test_min_and_max),
	    cmocka_unit_test(test_bad_input),
	    cmocka_unit_test(test_incremental_moves),
	    cmocka_unit_test(test_incremental_matches_optimum),
	    cmocka_unit_test(test_changes_are_local),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
