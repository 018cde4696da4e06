/*
 * test_policy.c - the elastic allocation policy (core/policy.c): hand-computable
 * allocations, the incremental state against the one-shot optimum, and bad input;
 * borrowing (gm_policy_borrow) on hand-computed cases: a quota-limited job borrows
 * where an unlimited host would not, a demand-limited one does not, a stalled
 * consumer overrules the model, a job whose local capacity recovered gives its
 * remote workers back, the cap, and a job not measured yet; and the rules that
 * keep a plan right the first time and steady: a named worker count plans as
 * auto, the demand smoothed over the job's batch periods, the remote ask at
 * once and without flapping, remote workers sticking to their lender, a small
 * host's local workers kept until remote ones deliver more, a starved or poor
 * host lending nothing.
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

#include "goldminer/elastic.h"
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

/* Host A's job: 2 workers of 3,400 img/s on-CPU under a 0.25-core quota, a
 * trainer at 960 img/s, remote workers of 1,000 img/s each. */
static struct gm_policy_borrow_in host_a(void)
{
	struct gm_policy_borrow_in in = {.demand = 960,
					 .headroom = 1.1,
					 .delivered = 850,
					 .stall = 0,
					 .worker_rate = 3400,
					 .cores = 0.25,
					 .remote_rate = 0,
					 .remote_worker_rate = 1000,
					 .workers = 2,
					 .most = 8};
	return in;
}

static void test_quota_limited_job_borrows_where_unlimited_would_not(void **st)
{
	struct gm_policy_borrow_in in = host_a();
	struct gm_policy_borrow_out out;
	char why[160];
	(void)st;
	/* capacity 0.25 x 3400 = 850 < 960 x 1.1 = 1056: 206 short, one remote worker */
	gm_policy_borrow(&in, &out);
	assert_true(out.capacity == 850);
	assert_int_equal(out.want, 1);
	assert_int_equal(out.why, GM_BORROW_CAPACITY);
	assert_false(out.capped);
	gm_policy_borrow_why(&in, &out, why, sizeof(why));
	assert_string_equal(why, "local capacity 850 img/s < demand 960 img/s");
	/* half as fast remote workers: ceil(206 / 500) = 1; a tenth: ceil(2.06) = 3 */
	in.remote_worker_rate = 100;
	gm_policy_borrow(&in, &out);
	assert_int_equal(out.want, 3);
	/* the same job on a host without a limit: 2 x 3400 = 6800 covers it */
	in.cores = 0;
	gm_policy_borrow(&in, &out);
	assert_true(out.capacity == 6800);
	assert_int_equal(out.want, 0);
	assert_int_equal(out.why, GM_BORROW_COVERED);
	gm_policy_borrow_why(&in, &out, why, sizeof(why));
	assert_string_equal(why, "local capacity covers demand (6800 >= 960 img/s)");
	/* within the headroom only: 1000 >= 960 but < 1056 */
	in = host_a();
	in.cores = 1000.0 / 3400;
	gm_policy_borrow(&in, &out);
	assert_int_equal(out.want, 1);
	gm_policy_borrow_why(&in, &out, why, sizeof(why));
	assert_string_equal(why, "local capacity 1000 img/s < demand 960 img/s with its headroom");
}

static void test_demand_limited_job_does_not_borrow(void **st)
{
	struct gm_policy_borrow_in in = host_a();
	struct gm_policy_borrow_out out;
	(void)st;
	in.demand = 512; /* 563 with headroom, under 850 */
	in.delivered = 512;
	gm_policy_borrow(&in, &out);
	assert_int_equal(out.want, 0);
	assert_int_equal(out.why, GM_BORROW_COVERED);
	in.demand = 0; /* an idle trainer */
	gm_policy_borrow(&in, &out);
	assert_int_equal(out.want, 0);
	assert_int_equal(out.why, GM_BORROW_COVERED);
}

/* A job fed by remote workers runs no local worker, so no stall speaks of them;
 * the model read 1068 img/s for a 0.15-core host's worker whose job's local
 * workers alone had delivered 175 while its trainer waited (seed 107): what they
 * delivered then bounds them, while it is below the demand. */
static void test_what_local_workers_alone_delivered_overrules_the_model(void **st)
{
	struct gm_policy_borrow_in in = host_a();
	struct gm_policy_borrow_out out;
	char why[200];
	(void)st;
	in.demand = 365;
	in.cores = 0.3;
	in.worker_rate = 3560; /* 1068 */
	in.workers = 1;
	in.remote_worker_rate = 120;
	in.delivered = 365, in.remote_rate = 300; /* remote workers feed it */
	gm_policy_borrow(&in, &out);
	assert_int_equal(out.want, 0); /* the model alone: covered */
	in.alone = 175;		       /* 402 - 175 = 227 short: two of 120 */
	gm_policy_borrow(&in, &out);
	assert_true(out.capacity == 175);
	assert_int_equal(out.want, 2);
	assert_int_equal(out.why, GM_BORROW_ALONE);
	gm_policy_borrow_why(&in, &out, why, sizeof(why));
	assert_string_equal(why, "its local workers alone delivered 175 img/s < demand 365 img/s "
				 "while the trainer waited");
	/* at or above the demand it was no shortfall: the model stands */
	in.alone = 365;
	gm_policy_borrow(&in, &out);
	assert_int_equal(out.want, 0);
	/* nor does it raise a smaller model */
	in.alone = 175;
	in.cores = 0.03; /* 107 */
	gm_policy_borrow(&in, &out);
	assert_true(out.capacity < 108);
	assert_int_equal(out.why, GM_BORROW_CAPACITY);
}

/* The CPU accounting bounds the stage-timed rate once it has enough to say */
static void test_a_workers_rate_by_its_cpu_time(void **st)
{
	(void)st;
	assert_true(gm_policy_cpu_rate(2600, 1.0, 32) == 2600);
	assert_true(gm_policy_cpu_rate(650, 0.25, 32) == 2600);
	assert_true(gm_policy_cpu_rate(650, 0.2, 32) == 0); /* too little CPU */
	assert_true(gm_policy_cpu_rate(127, 1.0, 32) == 0); /* under four batches */
	assert_true(gm_policy_cpu_rate(128, 1.0, 32) == 128);
	assert_true(gm_policy_cpu_rate(NAN, 1.0, 32) == 0);
	assert_true(gm_policy_cpu_rate(1000, INFINITY, 32) == 0);
	assert_true(gm_policy_cpu_rate(8, 1.0, 0) == 8); /* batch 0 taken as 1 */
}

/* A new job's first windows: its stage-timed rate bounded by what the same
 * pipeline read on the host by its CPU, until its own accounting reads */
static void test_a_new_jobs_rate_is_bounded_by_its_pipelines_known_rate(void **st)
{
	(void)st;
	/* seed 107's P1: 4,080 img/s a core by its stages, 1,490 known */
	assert_true(gm_policy_worker_rate(4080, 0, 1490) == 1490);
	/* its own accounting, once it reads, before what the others read */
	assert_true(gm_policy_worker_rate(4080, 1700, 1490) == 1700);
	/* a bound never raises the stage-timed rate */
	assert_true(gm_policy_worker_rate(1200, 0, 1490) == 1200);
	assert_true(gm_policy_worker_rate(1200, 2600, 1490) == 1200);
	/* nothing known: the stages alone */
	assert_true(gm_policy_worker_rate(4080, 0, 0) == 4080);
	assert_true(gm_policy_worker_rate(4080, NAN, NAN) == 4080);
	assert_true(gm_policy_worker_rate(4080, INFINITY, 1490) == 1490);
	assert_true(gm_policy_worker_rate(0, 0, 1490) == 0); /* not measured */
}

static void test_a_stalled_consumer_overrules_the_model(void **st)
{
	struct gm_policy_borrow_in in = host_a();
	struct gm_policy_borrow_out out;
	char why[200];
	(void)st;
	/* the model says one worker of 3400 covers 960; the trainer waits 32% and
	 * gets 650, of which 100 came from one remote worker: local 550, short
	 * 1056 - 550 = 506, two remote workers of 300 */
	in.cores = 0;
	in.workers = 1;
	in.delivered = 650;
	in.stall = 0.32;
	in.remote_rate = 100;
	in.remote_worker_rate = 300;
	gm_policy_borrow(&in, &out);
	assert_true(out.capacity == 550);
	assert_int_equal(out.want, 2);
	assert_int_equal(out.why, GM_BORROW_STALL);
	gm_policy_borrow_why(&in, &out, why, sizeof(why));
	assert_string_equal(why, "delivered 650 img/s < demand 960 img/s, the trainer waits 32% "
				 "of the time: local workers deliver 550 img/s");
	/* a wait under GM_POLICY_STALL is noise: the model stands */
	in.stall = 0.04;
	gm_policy_borrow(&in, &out);
	assert_int_equal(out.want, 0);
	/* remote workers delivering more than all of it: local 0, not negative */
	in.stall = 0.5;
	in.remote_rate = 900;
	gm_policy_borrow(&in, &out);
	assert_true(out.capacity == 0);
	assert_int_equal(out.want, 4); /* ceil(1056 / 300) */
}

static void test_recovered_local_capacity_returns_the_remote_workers(void **st)
{
	struct gm_policy_borrow_in in = host_a();
	struct gm_policy_borrow_out out;
	struct gm_elastic hyst = {0};
	int rwant = 0;
	(void)st;
	/* another job shares the host's core: 0.1 core, 340 img/s; 716 short, remote
	 * workers of 300: 3 */
	in.cores = 0.1;
	in.remote_worker_rate = 300;
	gm_policy_borrow(&in, &out);
	assert_int_equal(out.want, 3); /* ceil(716 / 300) */
	rwant = gm_elastic_next(&hyst, (int)out.want, rwant);
	assert_int_equal(rwant, 3);
	/* the other job ends: a whole core, 3400 img/s, covers the demand (the remote
	 * workers deliver the rest meanwhile, no stall) */
	in.cores = 1;
	in.delivered = 960;
	in.remote_rate = 600;
	gm_policy_borrow(&in, &out);
	assert_int_equal(out.want, 0);
	assert_int_equal(out.why, GM_BORROW_COVERED);
	/* given back one by one, after two ticks agree each time */
	int seen[6];
	for (int t = 0; t < 6; t++)
		seen[t] = rwant = gm_elastic_next(&hyst, (int)out.want, rwant);
	assert_int_equal(seen[0], 3);
	assert_int_equal(seen[1], 2);
	assert_int_equal(seen[5], 0);
}

static void test_borrowing_is_capped_and_waits_for_a_measurement(void **st)
{
	struct gm_policy_borrow_in in = host_a();
	struct gm_policy_borrow_out out;
	char why[160];
	(void)st;
	in.demand = 1e12; /* a greedy trainer */
	in.most = 2;
	gm_policy_borrow(&in, &out);
	assert_int_equal(out.want, 2);
	assert_true(out.capped);
	gm_policy_borrow_why(&in, &out, why, sizeof(why));
	assert_non_null(strstr(why, "; capped at 2 remote workers"));
	in = host_a(); /* 206 short at 100 each: 3, one more than the cap */
	in.remote_worker_rate = 100;
	in.most = 2;
	gm_policy_borrow(&in, &out);
	assert_int_equal(out.want, 2);
	assert_true(out.capped);
	in.most = 3;
	gm_policy_borrow(&in, &out);
	assert_int_equal(out.want, 3);
	assert_false(out.capped);
	in.most = 0;
	gm_policy_borrow(&in, &out);
	assert_int_equal(out.want, 0);
	in = host_a();
	in.worker_rate = 0;
	gm_policy_borrow(&in, &out);
	assert_int_equal(out.want, 0);
	assert_int_equal(out.why, GM_BORROW_UNMEASURED);
	gm_policy_borrow_why(&in, &out, why, sizeof(why));
	assert_string_equal(why, "not measured yet");
	/* one remote worker's rate unknown: a local worker's stands in (206 / 3400) */
	in = host_a();
	in.remote_worker_rate = 0;
	gm_policy_borrow(&in, &out);
	assert_int_equal(out.want, 1);
}

/* The cluster experiment's case: a home fed by remote workers alone (local
 * capacity 0) measured one remote worker at 4 img/s at its start and asked
 * for 239; the peers' heartbeats say they can lend 2 in all. */
static void test_borrowing_never_asks_past_what_the_peers_lend(void **st)
{
	struct gm_policy_borrow_in in = host_a();
	struct gm_policy_borrow_out out;
	char why[200];
	(void)st;
	in.workers = 0;
	in.cores = 0.25;
	in.remote_worker_rate = 4.4;
	in.most = 1000;
	gm_policy_borrow(&in, &out);
	assert_int_equal(out.want, 240); /* ceil(1056 / 4.4): unbounded */
	in.bounded = true;
	in.lendable = 2;
	gm_policy_borrow(&in, &out);
	assert_int_equal(out.want, 2);
	assert_true(out.peers_short);
	assert_false(out.capped);
	gm_policy_borrow_why(&in, &out, why, sizeof(why));
	assert_string_equal(why, "local capacity 0 img/s < demand 960 img/s; the live peers "
				 "can lend it 2");
	/* no live peer: none asked; a bound above the need changes nothing */
	in.lendable = 0;
	gm_policy_borrow(&in, &out);
	assert_int_equal(out.want, 0);
	in.remote_worker_rate = 500;
	in.lendable = 8;
	gm_policy_borrow(&in, &out);
	assert_int_equal(out.want, 3); /* ceil(1056 / 500) */
	assert_false(out.peers_short);
	/* the job's own cap below the peers' bound: the cap is what is said */
	in.most = 2;
	gm_policy_borrow(&in, &out);
	assert_int_equal(out.want, 2);
	assert_true(out.capped);
	assert_false(out.peers_short);
}

/* --cpus 0.75 is a budget of one worker, which the host's own job wishes for:
 * the free budget lends none, the idle cores do. */
static void test_idle_cores_lend_beyond_a_held_budget(void **st)
{
	(void)st;
	/* B: 0.75 core, its job needs 0.2 of it: 0.55 idle, a worker per
	 * quarter core begun (a lent worker's rate is bounded by its round
	 * trips more than its CPU): three */
	assert_int_equal(gm_policy_lendable(1, 1, 1.0, 0.55, false), 3);
	/* exactly a quarter, exactly a half, and 1.5 cores idle */
	assert_int_equal(gm_policy_lendable(1, 1, 1.0, 0.25, false), 1);
	assert_int_equal(gm_policy_lendable(1, 1, 1.0, 0.5, false), 2);
	assert_int_equal(gm_policy_lendable(2, 2, 1.0, 1.5, false), 6);
	/* the free budget when it is more than the idle cores make */
	assert_int_equal(gm_policy_lendable(4, 0, 1.0, 0.5, false), 4);
	/* nonsense idle cores lend nothing */
	assert_int_equal(gm_policy_lendable(1, 1, 1.0, -1, false), 0);
	assert_int_equal(gm_policy_lendable(1, 1, 1.0, NAN, false), 0);
	assert_int_equal(gm_policy_lendable(1, 1, 1.0, INFINITY, false), 0);
}

/* A job's share of its host's cores: by workers, a fed job's receive path
 * holding a share of its own (the 0.15-core home with a fed job and a second
 * job on one local worker: half the quota, not all of it). */
static void test_a_fed_job_holds_a_share_of_its_home(void **st)
{
	(void)st;
	assert_float_equal(gm_policy_job_cores(0.15, 1, 1, 0), 0.15, 1e-12);
	assert_float_equal(gm_policy_job_cores(0.15, 1, 1, 1), 0.075, 1e-12);
	assert_float_equal(gm_policy_job_cores(2.0, 3, 4, 0), 1.5, 1e-12);
	assert_float_equal(gm_policy_job_cores(2.0, 3, 4, 2), 1.0, 1e-12);
	assert_float_equal(gm_policy_job_cores(0.5, 0, 0, 0), 0.5, 1e-12); /* none runs */
	assert_float_equal(gm_policy_job_cores(0.5, 0, 0, 1), 0, 1e-12);   /* the fed one */
}

/* A home's peers' workers divided between its jobs: a worker each before any
 * job's second, a lone worker staying with the job that holds it. */
static void test_a_home_divides_its_peers_workers(void **st)
{
	(void)st;
	uint32_t sh[3];
	const uint32_t none[3] = {0, 0, 0};
	gm_policy_home_share((uint32_t[]){2, 1}, (uint32_t[]){2, 0}, 2, 2, sh);
	assert_int_equal(sh[0], 1); /* seed 101's 0.15-core home: one each */
	assert_int_equal(sh[1], 1);
	gm_policy_home_share((uint32_t[]){2, 1}, none, 2, 3, sh);
	assert_int_equal(sh[0], 2);
	assert_int_equal(sh[1], 1);
	gm_policy_home_share((uint32_t[]){1, 1}, (uint32_t[]){0, 1}, 2, 1, sh);
	assert_int_equal(sh[0], 0); /* it stays where it is */
	assert_int_equal(sh[1], 1);
	gm_policy_home_share((uint32_t[]){1, 1}, none, 2, 1, sh);
	assert_int_equal(sh[0], 1); /* none held: the first */
	assert_int_equal(sh[1], 0);
	/* none held, one to give: the job asking more (seed 2's P1: 1 and 2) */
	gm_policy_home_share((uint32_t[]){1, 2}, none, 2, 1, sh);
	assert_int_equal(sh[0], 0);
	assert_int_equal(sh[1], 1);
	gm_policy_home_share((uint32_t[]){1, 2}, none, 2, 3, sh); /* all of it */
	assert_int_equal(sh[0], 1);
	assert_int_equal(sh[1], 2);
	gm_policy_home_share((uint32_t[]){1, 2}, (uint32_t[]){1, 0}, 2, 1, sh);
	assert_int_equal(sh[0], 1); /* but a held worker stays */
	assert_int_equal(sh[1], 0);
	gm_policy_home_share((uint32_t[]){UINT32_MAX, 1, 3}, none, 3, 2, sh);
	assert_int_equal(sh[0], 0); /* not yet decided: after those decided */
	assert_int_equal(sh[1], 1);
	assert_int_equal(sh[2], 1);
	gm_policy_home_share((uint32_t[]){UINT32_MAX, 3}, none, 2, 4, sh);
	assert_int_equal(sh[0], 2); /* not yet decided: a fair share */
	assert_int_equal(sh[1], 2);
	gm_policy_home_share((uint32_t[]){0, 5, 1}, (uint32_t[]){0, 0, 7}, 3, 3, sh);
	assert_int_equal(sh[0], 0);
	assert_int_equal(sh[1], 2);
	assert_int_equal(sh[2], 1);
	gm_policy_home_share((uint32_t[]){4, 4}, none, 2, 0, sh);
	assert_int_equal(sh[0], 0);
	assert_int_equal(sh[1], 0);
	gm_policy_home_share(NULL, NULL, 0, 5, sh); /* no job */
}

/* A paced worker's bucket: bursts up to 2 ms of CPU, then sleeps its debt out
 * at its share; the sleep pays it back. */
static void test_a_paced_worker_sleeps_out_its_debt(void **st)
{
	(void)st;
	double c = GM_POLICY_PACE_BURST_NS;
	assert_float_equal(gm_policy_pace_step(&c, 1e6, 1e6, 100), 0, 0); /* 2e6+1e5-1e6 */
	assert_float_equal(c, 1.1e6, 1e-3);
	assert_float_equal(gm_policy_pace_step(&c, 3e6, 3e6, 100), 1.6e7, 1e-3);
	assert_float_equal(c, -1.6e6, 1e-3);
	assert_float_equal(gm_policy_pace_step(&c, 1.6e7, 0, 100), 0, 0); /* slept */
	assert_float_equal(c, 0, 1e-3);
	assert_float_equal(gm_policy_pace_step(&c, 1e9, 0, 100), 0, 0); /* idle: capped */
	assert_float_equal(c, GM_POLICY_PACE_BURST_NS, 1e-3);
	assert_float_equal(gm_policy_pace_step(&c, 1e6, 1e9, 0), 0, 0); /* unpaced */
	assert_float_equal(c, GM_POLICY_PACE_BURST_NS, 1e-3);
	assert_float_equal(gm_policy_pace_step(&c, 1e6, 1e9, 1000), 0, 0);
	assert_float_equal(gm_policy_pace_step(&c, NAN, 1e6, 500), 0, 0); /* no wall */
	assert_float_equal(c, 1e6, 1e-3);
}

/* A CPU-poor home's local workers leave its quota to the agent's receive path
 * while remote workers' batches land: 19/20 of the cores less 1.25x the
 * agent's, shared by the workers, never less than a worker's share of the
 * cores when each landing job holds one; no limit on a host of half a core or more, with
 * nothing landing, or no local worker. */
static void test_a_poor_home_paces_its_local_workers(void **st)
{
	(void)st;
	assert_float_equal(gm_policy_local_pace(0.15, 0.02, 1, 1, INFINITY, 0), 0.1175, 1e-12);
	assert_float_equal(gm_policy_local_pace(0.15, 0.01, 2, 1, INFINITY, 0), 0.065,
			   1e-12); /* 0.05 share */
	assert_float_equal(gm_policy_local_pace(0.3, 0, 1, 2, INFINITY, 0), 0.285, 1e-12);
	assert_float_equal(gm_policy_local_pace(0.15, 0.066, 1, 1, INFINITY, 0), 0.075,
			   1e-12); /* share */
	assert_float_equal(gm_policy_local_pace(0.15, 0.1, 3, 1, INFINITY, 0), 0.0375, 1e-12);
	assert_float_equal(gm_policy_local_pace(0.15, 0.1, 1, 2, INFINITY, 0), 0.05, 1e-12);
	assert_float_equal(gm_policy_local_pace(0.15, NAN, 1, 1, INFINITY, 0), 0.1425, 1e-12);
	/* the landing job needed 0.03 core with lending off: 0.12 was the neighbour's */
	assert_float_equal(gm_policy_local_pace(0.15, 0.066, 1, 1, 0.03, 0), 0.12, 1e-12);
	assert_float_equal(gm_policy_local_pace(0.15, 0.066, 1, 1, 0.1, 0), 0.075, 1e-12);
	assert_float_equal(gm_policy_local_pace(0.15, 0.066, 1, 1, NAN, 0), 0.075, 1e-12);
	/* the landing job's own worker is not the neighbour's (seed 5's 0.3-core
	 * home: 0.3 - 0.1 for the other worker, not halved with the landing job's) */
	assert_float_equal(gm_policy_local_pace(0.3, 0.0255, 2, 1, 0.3, 1), 0.2, 1e-12);
	assert_float_equal(gm_policy_local_pace(0.15, 0.02, 1, 0, INFINITY, 0), 0,
			   0); /* none lands */
	assert_float_equal(gm_policy_local_pace(0.15, 0.02, 0, 1, INFINITY, 0), 0,
			   0); /* no worker */
	assert_float_equal(gm_policy_local_pace(0.5, 0.02, 1, 1, INFINITY, 0), 0, 0); /* not poor */
	assert_float_equal(gm_policy_local_pace(0, 0.02, 1, 1, INFINITY, 0), 0, 0);
	assert_float_equal(gm_policy_local_pace(NAN, 0.02, 1, 1, INFINITY, 0), 0, 0);
}

/* A job's ring where remote workers may join: eight slots a worker and two
 * more, two a worker on a CPU-poor host (its pages cost it what its jobs need). */
static void test_a_poor_home_gets_a_smaller_ring(void **st)
{
	(void)st;
	assert_int_equal(gm_policy_ring_slots(1.0, 3), 32);   /* 26 */
	assert_int_equal(gm_policy_ring_slots(0.5, 2), 32);   /* 18 */
	assert_int_equal(gm_policy_ring_slots(0.15, 2), 8);   /* 6 */
	assert_int_equal(gm_policy_ring_slots(0.3, 3), 8);    /* 8 */
	assert_int_equal(gm_policy_ring_slots(0.15, 0), 4);   /* the least */
	assert_int_equal(gm_policy_ring_slots(4.0, 100), 64); /* the most */
}

/* A lender whose own job's trainer waited took its guest back, offered it
 * again at the next quiet window, took it back: the home's worker went B -> C
 * -> B with it. Once starved, a host lends again only after its own jobs have
 * gone unstarved for GM_POLICY_ASK_SETTLE_S (twice that when lending again
 * starved them again at once); a host never starved, at once. */
static void test_a_lender_that_took_its_workers_back_settles_first(void **st)
{
	(void)st;
	struct gm_policy_lend s = {0};
	assert_int_equal(gm_policy_lend_next(&s, 1, 1, 1.0, 0.5, false, false, 0), 2); /* at once */
	assert_int_equal(gm_policy_lend_next(&s, 1, 1, 1.0, 0.5, true, false, 0.25), 0);
	for (int t = 0; t < 7; t++) /* 1.75 s unstarved: not yet */
		assert_int_equal(gm_policy_lend_next(&s, 1, 1, 1.0, 0.5, false, false, 0.25), 0);
	assert_int_equal(gm_policy_lend_next(&s, 1, 1, 1.0, 0.5, false, false, 0.25), 2);
	assert_int_equal(gm_policy_lend_next(&s, 1, 1, 1.0, 0.5, true, false, 0.25), 0); /* again */
	assert_int_equal(gm_policy_lend_next(&s, 1, 1, 1.0, 0.5, false, false, 0.25), 0);
	assert_int_equal(gm_policy_lend_next(&s, 1, 1, 1.0, 0.5, false, false, 2.0),
			 0); /* 2.25 s */
	assert_int_equal(gm_policy_lend_next(&s, 1, 1, 1.0, 0.5, false, false, 1.75), 2); /* 4 s */
	/* settled, but no spare quarter core: still nothing */
	assert_int_equal(gm_policy_lend_next(&s, 1, 1, 1.0, 0.2, false, false, 0.25), 0);
	/* nor on a CPU-poor host */
	assert_int_equal(gm_policy_lend_next(&s, 1, 1, 0.3, 0.2, false, false, 0.25), 0);
}

/* A lender's own job not measured yet is left out of its idle cores, and the
 * count neither grows nor falls for it: counted as its want (a worker of a
 * 0.75-core host's budget of 1), it preempted every guest at its attach. */
static void test_a_lenders_new_job_preempts_no_guest_before_it_is_measured(void **st)
{
	(void)st;
	struct gm_policy_lend s = {0};
	assert_int_equal(gm_policy_lend_next(&s, 1, 0, 0.75, 0.6, false, false, 0), 3);
	/* the new job (fresh): the same idle cores, the same count */
	assert_int_equal(gm_policy_lend_next(&s, 1, 0, 0.75, 0.6, false, true, 0.25), 3);
	/* more idle while it is fresh (another job left): no more guests yet */
	assert_int_equal(gm_policy_lend_next(&s, 1, 0, 0.75, 0.74, false, true, 0.25), 3);
	assert_int_equal(gm_policy_lend_next(&s, 2, 0, 1.5, 1.2, false, true, 0.25), 3);
	/* measured: what it leaves */
	assert_int_equal(gm_policy_lend_next(&s, 1, 1, 0.75, 0.3, false, false, 0.25), 2);
	/* ... or starved: none, fresh or not */
	assert_int_equal(gm_policy_lend_next(&s, 1, 1, 0.75, 0.4, true, true, 0.25), 0);
	/* a lender that lent none lends none while its new job is fresh */
	s = (struct gm_policy_lend){0};
	assert_int_equal(gm_policy_lend_next(&s, 1, 0, 0.75, 0.75, false, true, 0), 0);
	assert_int_equal(gm_policy_lend_next(&s, 1, 0, 0.75, 0.75, false, false, 0.25), 3);
}

/* Seed 2: a 0.6-core lender's new 90 img/s job read 441 img/s a core at its
 * first window (its workers' start counted; the guests made 1,300), a need of
 * 0.22 core: the lender went from three guests to two, and a poor home's job
 * lost the one it had. At an own job's first window the count holds, neither
 * more nor fewer; measured again, what the need leaves; starved, none. */
static void test_a_lenders_new_job_at_its_first_window_preempts_no_guest(void **st)
{
	(void)st;
	struct gm_policy_lend s = {0};
	assert_int_equal(gm_policy_lend_next(&s, 1, 0, 0.6, 0.6, false, GM_POLICY_LEND_SETTLED, 0),
			 3);
	assert_int_equal(gm_policy_lend_next(&s, 1, 0, 0.6, 0.6, false, GM_POLICY_LEND_FRESH, 0.25),
			 3);
	assert_int_equal(
	    gm_policy_lend_next(&s, 1, 1, 0.6, 0.375, false, GM_POLICY_LEND_FIRST, 0.25), 3);
	/* nor more, if its first window leaves more idle */
	assert_int_equal(gm_policy_lend_next(&s, 4, 1, 1.2, 1.1, false, GM_POLICY_LEND_FIRST, 0.25),
			 3);
	/* its second window, warm: 0.05 core, 0.55 idle */
	assert_int_equal(
	    gm_policy_lend_next(&s, 1, 1, 0.6, 0.55, false, GM_POLICY_LEND_SETTLED, 0.25), 3);
	/* had it still read 0.375 idle: one fewer */
	assert_int_equal(
	    gm_policy_lend_next(&s, 1, 1, 0.6, 0.375, false, GM_POLICY_LEND_SETTLED, 0.25), 2);
	/* starved at its first window: none */
	assert_int_equal(
	    gm_policy_lend_next(&s, 1, 1, 0.6, 0.375, true, GM_POLICY_LEND_FIRST, 0.25), 0);
}

/* While an own job is fresh its lender's guests share a quarter of the idle
 * cores they had, or of what its other jobs leave, whichever is fewer: seed
 * 2's guests, paced to the least for 3 s, held their homes' batches over a
 * second and were ended. */
static void test_a_fresh_lenders_guests_keep_a_quarter_of_their_cores(void **st)
{
	(void)st;
	assert_float_equal(gm_policy_fresh_guest_cores(0.6, 0.6), 0.15, 1e-12);
	assert_float_equal(gm_policy_fresh_guest_cores(0.6, 0.3), 0.075, 1e-12); /* had less */
	assert_float_equal(gm_policy_fresh_guest_cores(0.2, 0.6), 0.05, 1e-12);	 /* leave less */
	assert_float_equal(gm_policy_fresh_guest_cores(0.6, 0), 0, 0);		 /* had none */
	assert_float_equal(gm_policy_fresh_guest_cores(-1, 0.6), 0, 0);
	assert_float_equal(gm_policy_fresh_guest_cores(NAN, NAN), 0, 0);
	assert_float_equal(gm_policy_fresh_guest_cores(INFINITY, INFINITY), 0, 0);
}

/* A host that runs guests sizes a new job's ring for its own budget: its
 * jobs borrow nothing while it lends, and a 0.6-core lender's 32-slot ring
 * (two peers' workers counted) cost about a second of one core at its
 * attach; six counted make 64 slots. */
static void test_a_lenders_new_ring_counts_no_peer_worker(void **st)
{
	(void)st;
	assert_int_equal(gm_policy_ring_peers(6, 0), 6);
	assert_int_equal(gm_policy_ring_peers(6, 2), 0);
	assert_int_equal(gm_policy_ring_peers(0, 1), 0);
	assert_int_equal(gm_policy_ring_slots(0.6, gm_policy_ring_workers(0, 1, 6)), 64);
	assert_int_equal(gm_policy_ring_slots(0.6, gm_policy_ring_workers(0, 1, 2)), 32);
	assert_int_equal(
	    gm_policy_ring_slots(0.6, gm_policy_ring_workers(0, 1, gm_policy_ring_peers(2, 3))),
	    16);
}

/* Seed 105 on a slow afternoon: its lenders started 31 guests and preempted
 * 13 in 80 s, their own jobs starved each time soon after they lent again.
 * Each such round doubles the calm a lender waits for (2, 4, 8, 16 s, no
 * more); once it has lent GM_POLICY_LEND_CALM_TIMES holds unstarved, the
 * next starvation waits the shortest again. */
static void test_a_lender_whose_lending_starves_its_own_jobs_waits_longer(void **st)
{
	(void)st;
	struct gm_policy_lend s = {0};
	double want[] = {2, 4, 8, 16, 16};
	assert_int_equal(gm_policy_lend_next(&s, 1, 1, 1.0, 0.5, false, false, 0), 2);
	for (int r = 0; r < 5; r++) {
		assert_int_equal(gm_policy_lend_next(&s, 1, 1, 1.0, 0.5, true, false, 0.5), 0);
		assert_int_equal(
		    gm_policy_lend_next(&s, 1, 1, 1.0, 0.5, false, false, want[r] - 0.5), 0);
		assert_int_equal(gm_policy_lend_next(&s, 1, 1, 1.0, 0.5, false, false, 0.5), 2);
		assert_int_equal(gm_policy_lend_next(&s, 1, 1, 1.0, 0.5, false, false, 1),
				 2); /* lends 1 s */
	}
	/* it lends 4 x 16 s unstarved: the next starvation waits 2 s */
	for (int t = 0; t < 64; t++)
		assert_int_equal(gm_policy_lend_next(&s, 1, 1, 1.0, 0.5, false, false, 1), 2);
	assert_int_equal(gm_policy_lend_next(&s, 1, 1, 1.0, 0.5, true, false, 0.5), 0);
	assert_int_equal(gm_policy_lend_next(&s, 1, 1, 1.0, 0.5, false, false, 1.5), 0);
	assert_int_equal(gm_policy_lend_next(&s, 1, 1, 1.0, 0.5, false, false, 0.5), 2);
	/* a starvation long after it lent again (8 s at a hold of 2: 4 holds)
	 * does not double it either */
	for (int t = 0; t < 8; t++)
		assert_int_equal(gm_policy_lend_next(&s, 1, 1, 1.0, 0.5, false, false, 1), 2);
	assert_int_equal(gm_policy_lend_next(&s, 1, 1, 1.0, 0.5, true, false, 0.5), 0);
	assert_int_equal(gm_policy_lend_next(&s, 1, 1, 1.0, 0.5, false, false, 2), 2);
}

/* Beside its own jobs a lender's guests share the cores those leave (0.28 of
 * a 0.75-core host, two guests: 0.14 each); without own jobs, or a core or
 * more each, no bound (0), nor without a guest; none idle, the least. */
static void test_a_lenders_guests_share_what_its_own_jobs_leave(void **st)
{
	(void)st;
	assert_float_equal(gm_policy_guest_cores(0.28, 2, true), 0.14, 1e-12);
	assert_float_equal(gm_policy_guest_cores(0.5, 2, true), 0.25, 1e-12);
	assert_float_equal(gm_policy_guest_cores(0.75, 3, false), 0, 0);
	assert_float_equal(gm_policy_guest_cores(2.0, 2, true), 0, 0);
	assert_float_equal(gm_policy_guest_cores(0.3, 0, true), 0, 0);
	assert_float_equal(gm_policy_guest_cores(0, 2, true), GM_POLICY_GUEST_MIN_CORES, 0);
	assert_float_equal(gm_policy_guest_cores(NAN, 2, true), GM_POLICY_GUEST_MIN_CORES, 0);
}

/* Seed 107's L1: 0.63 of a core idle beside its own job, three guests paced
 * 0.21 each. Two of them, one poor host's job's, used 0.084 each (their ring
 * full 60% of the time): they are given 1.25 x that, 0.105, and the third
 * guest (a starved job's) what they leave, 0.42; when the light ones use
 * their pace again they are heavy, and the split is equal. Not measured
 * (last 0): heavy. A job without workers gets nothing. */
static void test_a_lenders_idle_guests_leave_their_share_to_the_busy_ones(void **st)
{
	(void)st;
	uint32_t n[3] = {2, 1, 0};
	double used[3] = {0.168, 0.21, 0}, last[3] = {0.21, 0.21, 0}, out[3];
	gm_policy_guest_shares(0.63, n, used, last, 3, out);
	assert_float_equal(out[0], 0.105, 1e-9);
	assert_float_equal(out[1], 0.63 - 2 * 0.105, 1e-9);
	assert_float_equal(out[2], 0, 0);
	/* the light ones at their new pace: heavy, an equal split */
	used[0] = 0.21, last[0] = 0.105, last[1] = 0.42, used[1] = 0.42;
	gm_policy_guest_shares(0.63, n, used, last, 3, out);
	assert_float_equal(out[0], 0.21, 1e-9);
	assert_float_equal(out[1], 0.21, 1e-9);
	/* all light: each what it wants and an equal part of what they leave,
	 * all 0.63 given (seed 5: left idle, a guest paced to 0.010 held the
	 * batch its trainer waited for) */
	used[0] = 0.02, last[0] = 0.21, used[1] = 0.01, last[1] = 0.21;
	gm_policy_guest_shares(0.63, n, used, last, 3, out);
	assert_float_equal(out[0], 0.21, 1e-9);
	assert_float_equal(out[1], 0.21, 1e-9);
	used[1] = 0.1, last[1] = 0.21; /* wants 0.125 */
	gm_policy_guest_shares(0.63, n, used, last, 3, out);
	assert_float_equal(out[0], 0.0125 + (0.63 - 0.025 - 0.125) / 3, 1e-9);
	assert_float_equal(out[1], 0.125 + (0.63 - 0.025 - 0.125) / 3, 1e-9);
	assert_float_equal(2 * out[0] + out[1], 0.63, 1e-9);
	/* not measured: heavy; a core or more each: no bound; none idle: the least */
	last[0] = last[1] = 0;
	gm_policy_guest_shares(0.63, n, used, last, 3, out);
	assert_float_equal(out[0], 0.21, 1e-9);
	gm_policy_guest_shares(3.5, n, used, last, 3, out);
	assert_float_equal(out[0], 0, 0);
	assert_float_equal(out[1], 0, 0);
	gm_policy_guest_shares(0, n, used, last, 3, out);
	assert_float_equal(out[0], GM_POLICY_GUEST_MIN_CORES, 0);
	gm_policy_guest_shares(NAN, n, used, last, 3, out);
	assert_float_equal(out[1], GM_POLICY_GUEST_MIN_CORES, 0);
}

/* A lender's idle cores are measured from its own jobs' noisy demand: at
 * 0.6 idle it lends three workers, and 0.49 (a measure's noise) must not
 * preempt one of them; 0.37, half a worker's share below 0.5, does; more comes
 * at once. */
static void test_a_lender_keeps_its_count_through_noise(void **st)
{
	(void)st;
	struct gm_policy_lend s = {0};
	assert_int_equal(gm_policy_lend_next(&s, 1, 1, 1.0, 0.6, false, false, 0), 3);
	assert_int_equal(gm_policy_lend_next(&s, 1, 1, 1.0, 0.49, false, false, 1), 3);
	assert_int_equal(gm_policy_lend_next(&s, 1, 1, 1.0, 0.38, false, false, 1), 3);
	assert_int_equal(gm_policy_lend_next(&s, 1, 1, 1.0, 0.37, false, false, 1), 2);
	assert_int_equal(gm_policy_lend_next(&s, 1, 1, 1.0, 0.3, false, false, 1), 2);
	assert_int_equal(gm_policy_lend_next(&s, 1, 1, 1.0, 0.76, false, false, 1), 4);
	/* under a quarter core idle, or its own job starved: none at once */
	assert_int_equal(gm_policy_lend_next(&s, 1, 1, 1.0, 0.24, false, false, 1), 0);
	assert_int_equal(gm_policy_lend_next(&s, 1, 1, 1.0, 0.76, false, false, 1), 4);
	assert_int_equal(gm_policy_lend_next(&s, 1, 1, 1.0, 0.76, true, false, 1), 0);
}

/* A host whose own jobs are starved, that is CPU-poor, or that has no spare
 * quarter core, lends nothing, its free budget neither: the second
 * scenario, where the 0.2-core host D lent a worker of its free budget to the
 * 0.25-core host A (poor -> poor), and a host lent while its own trainer
 * waited. */
static void test_a_starved_or_poor_host_lends_nothing(void **st)
{
	(void)st;
	/* D: 0.2 core, no job yet: a free budget of one worker, 0.2 core idle */
	assert_int_equal(gm_policy_lendable(1, 0, 0.2, 0.2, false), 0);
	/* a 0.3-core host with no job yet: 0.3 core idle, but poor (under
	 * GM_POLICY_LEND_HOST_CORES: its own next job's receive path needs it) */
	assert_int_equal(gm_policy_lendable(1, 0, 0.3, 0.3, false), 0);
	assert_int_equal(gm_policy_lendable(1, 0, 0.5, 0.3, false), 2);
	/* under a quarter core idle beside its own job, a free budget of two */
	assert_int_equal(gm_policy_lendable(3, 1, 1.0, 0.2, false), 0);
	assert_int_equal(gm_policy_lendable(1, 0, 1.0, 0, false), 0);
	/* a whole idle core and free budget, but its own trainer waits */
	assert_int_equal(gm_policy_lendable(4, 1, 1.0, 1.0, true), 0);
	assert_int_equal(gm_policy_lendable(4, 1, 1.0, 1.0, false), 4);
	/* the home side: a lender under a quarter core is never asked, however
	 * many workers it says it has */
	struct gm_policy_lender l[] = {{.cores = 0.2, .workers = 1}, {.cores = 0.5, .workers = 1}};
	uint32_t ask[2];
	assert_int_equal(gm_policy_spread(l, 2, 2, NULL, ask), 1);
	assert_int_equal(ask[0], 0);
	assert_int_equal(ask[1], 1);
}

/* The case: B lends a quarter core, C a whole one: C's first. */
static void test_spread_asks_the_idlest_peer_first(void **st)
{
	(void)st;
	struct gm_policy_lender l[] = {{.cores = 0.25, .workers = 1}, {.cores = 1.0, .workers = 1}};
	uint32_t ask[2];
	assert_int_equal(gm_policy_spread(l, 2, 1, NULL, ask), 1);
	assert_int_equal(ask[0], 0);
	assert_int_equal(ask[1], 1);
	assert_int_equal(gm_policy_spread(l, 2, 2, NULL, ask), 2); /* room for both: both */
	assert_int_equal(ask[0], 1);
	assert_int_equal(ask[1], 1);
}

/* Workers enough on both: three on the whole core for one on the quarter
 * (1.0, .75, .5 left on C before .25 ties with B's .25: the lower index). */
static void test_spread_follows_the_capacity(void **st)
{
	(void)st;
	struct gm_policy_lender l[] = {{.cores = 0.25, .workers = 4}, {.cores = 1.0, .workers = 4}};
	uint32_t ask[2];
	assert_int_equal(gm_policy_spread(l, 2, 4, NULL, ask), 4);
	assert_int_equal(ask[0], 1);
	assert_int_equal(ask[1], 3);
	assert_int_equal(gm_policy_spread(l, 2, 8, NULL, ask), 8);
	assert_int_equal(ask[0], 4);
	assert_int_equal(ask[1], 4);
}

/* More wanted than lendable: each lender up to its workers, the rest placed
 * nowhere; a lender without cores (down, not heard, lending nothing) or
 * without workers gets none; equal lenders: the lower index first. */
static void test_spread_never_past_what_a_peer_lends(void **st)
{
	(void)st;
	struct gm_policy_lender l[] = {{.cores = 0.5, .workers = 1},
				       {.cores = 0, .workers = 8},
				       {.cores = 0.75, .workers = 2},
				       {.cores = 2.0, .workers = 0}};
	uint32_t ask[4];
	assert_int_equal(gm_policy_spread(l, 4, 5, NULL, ask), 3);
	assert_int_equal(ask[0], 1);
	assert_int_equal(ask[1], 0);
	assert_int_equal(ask[2], 2);
	assert_int_equal(ask[3], 0);
	assert_int_equal(gm_policy_spread(l, 4, 0, NULL, ask), 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(ask[i], 0);
	struct gm_policy_lender eq[] = {{.cores = 1.0, .workers = 2}, {.cores = 1.0, .workers = 2}};
	assert_int_equal(gm_policy_spread(eq, 2, 3, NULL, ask), 3);
	assert_int_equal(ask[0], 2);
	assert_int_equal(ask[1], 1);
}

/* A lender's cores count in all, its slots' share only ranks it: 0.46 idle
 * cores make two slots (a worker per quarter core begun); with one of them
 * lent to another job, the one left is still asked for (seed 1's 0.15-core
 * home waited 11 s for it), before a lender whose slot has less left. */
static void test_spread_asks_a_slot_left_under_a_quarter_core(void **st)
{
	(void)st;
	struct gm_policy_lender one[] = {{.cores = 0.46, .workers = 1, .slots = 2}};
	uint32_t ask[2];
	assert_int_equal(gm_policy_spread(one, 1, 1, NULL, ask), 1);
	assert_int_equal(ask[0], 1);
	struct gm_policy_lender two[] = {{.cores = 0.46, .workers = 1, .slots = 2},
					 {.cores = 0.30, .workers = 1, .slots = 1}};
	assert_int_equal(gm_policy_spread(two, 2, 1, NULL, ask), 1);
	assert_int_equal(ask[0], 0); /* 0.23 a slot against 0.30 */
	assert_int_equal(ask[1], 1);
	/* under a quarter core in all: none, whatever its slots */
	struct gm_policy_lender poor[] = {{.cores = 0.2, .workers = 2, .slots = 2}};
	assert_int_equal(gm_policy_spread(poor, 1, 1, NULL, ask), 0);
	assert_int_equal(ask[0], 0);
}

/* Seed 1's lender job: the model read 679 img/s against demand 684 (752 with
 * headroom) while its consumer was fed, 677 of it by the local worker: no
 * remote worker (its guest made 7 img/s for 28 s and held a slot a poor
 * host's job waited 10 s for). A remote share, or a wait, and it asks. */
static void test_local_workers_that_feed_the_job_ask_no_remote_worker(void **st)
{
	(void)st;
	struct gm_policy_borrow_in in = {.demand = 684,
					 .headroom = 1.1,
					 .delivered = 684,
					 .stall = 0.01,
					 .worker_rate = 679,
					 .remote_rate = 7,
					 .remote_worker_rate = 300,
					 .workers = 1,
					 .most = 8};
	struct gm_policy_borrow_out out;
	char why[200];
	gm_policy_borrow(&in, &out);
	assert_int_equal(out.want, 0);
	assert_int_equal(out.why, GM_BORROW_FED);
	assert_true(out.capacity == 677);
	gm_policy_borrow_why(&in, &out, why, sizeof(why));
	assert_string_equal(why, "its local workers feed it (677 of demand 684 img/s, the trainer "
				 "waits 1% of the time)");
	struct gm_policy_ask a = {0};
	assert_int_equal(gm_policy_ask_next(&a, &in, 0, &out), 0); /* the first decision */
	/* 624 local: short of 650 */
	in.remote_rate = 60;
	gm_policy_borrow(&in, &out);
	assert_int_equal(out.want, 1);
	assert_int_equal(out.why, GM_BORROW_CAPACITY);
	in.remote_rate = 0, in.delivered = 600, in.stall = 0.12; /* it waits */
	gm_policy_borrow(&in, &out);
	assert_int_equal(out.want, 1);
	assert_int_equal(out.why, GM_BORROW_STALL);
	in.delivered = 684, in.stall = 0.06; /* all of it, but waiting */
	gm_policy_borrow(&in, &out);
	assert_int_equal(out.want, 1);
	assert_int_equal(out.why, GM_BORROW_CAPACITY);
	/* no local worker (fed remotely), its remote rate read 0 for a moment */
	in.stall = 0, in.workers = 0;
	gm_policy_borrow(&in, &out);
	assert_int_equal(out.want, 3); /* ceil(752 / 300) */
	assert_int_equal(out.why, GM_BORROW_CAPACITY);
}

/* What local workers alone deliver while the consumer waits: measured only
 * from the fourth window, without remote samples, while it waits short of its
 * demand; forgotten once the consumer is fed and the local workers' share
 * nearly covers the demand (seed 1's lender job: 668 from its start's wait,
 * then 740 delivered of 740 with 18 of them remote). */
static void test_alone_is_measured_in_waits_and_forgotten_once_fed(void **st)
{
	(void)st;
	double alone = 0;
	gm_policy_alone_add(&alone, true, 2, 0.4, 500, 730, 0); /* its start */
	assert_true(alone == 0);
	gm_policy_alone_add(&alone, false, 3, 0.4, 500, 730, 50); /* remote samples */
	assert_true(alone == 0);
	gm_policy_alone_add(&alone, true, 3, 0.04, 500, 730, 0); /* no wait */
	assert_true(alone == 0);
	gm_policy_alone_add(&alone, true, 3, 0.4, 740, 730, 0); /* not short */
	assert_true(alone == 0);
	gm_policy_alone_add(&alone, true, 3, 0.4, 668, 730, 0);
	assert_true(alone == 668);
	gm_policy_alone_add(&alone, true, 4, 0.3, 568, 730, 0); /* smoothed */
	assert_true(fabs(alone - 638) < 1e-9);
	alone = 668;
	/* fed, but the remote workers made the rest: kept */
	gm_policy_alone_add(&alone, false, 9, 0.0, 740, 740, 300);
	assert_true(alone == 668);
	/* fed, local more than it says but well short of the demand: kept */
	gm_policy_alone_add(&alone, false, 9, 0.0, 740, 900, 18);
	assert_true(alone == 668);
	/* fed, the local share nearly all of the demand: forgotten */
	gm_policy_alone_add(&alone, false, 9, 0.0, 740, 740, 18);
	assert_true(alone == 0);
	alone = 668;
	gm_policy_alone_add(&alone, true, 9, 0.02, 720, 740, 0); /* alone, fed */
	assert_true(alone == 0);
	/* nonsense changes nothing */
	alone = 668;
	gm_policy_alone_add(&alone, true, 9, NAN, 100, 740, 0);
	gm_policy_alone_add(&alone, true, 9, 0.5, -1, 740, 0);
	gm_policy_alone_add(&alone, true, 9, 0.5, INFINITY, 740, 0);
	assert_true(alone == 668);
}

/* ---- the rules that keep a plan right the first time and steady ---- */

/* The case: --workers 8 on a host of one worker whose peers can lend
 * two sized the ring for 8 workers (32 slots) where auto sized it for 3: a
 * named count must be a cap the plan works within, never a plan of its own.
 * Below what the job may get it still cuts. The division and the ask within
 * the cap are auto's too. */
static void test_a_named_worker_count_plans_as_auto(void **st)
{
	(void)st;
	assert_int_equal(gm_policy_ring_workers(8, 1, 2), gm_policy_ring_workers(0, 1, 2));
	assert_int_equal(gm_policy_ring_workers(8, 1, 2), 3);
	assert_int_equal(gm_policy_ring_workers(8, 2, 0), 2);
	assert_int_equal(gm_policy_ring_workers(2, 4, 4), 2); /* a cap below: a cap */
	assert_int_equal(gm_policy_ring_workers(0, 4, 4), 8);
	struct gm_elastic_share sh[2] = {{.cap = 8, .workers = 1, .demand = 768, .rate = 400},
					 {.cap = 0, .workers = 1, .demand = 768, .rate = 400}};
	uint32_t w8[2], wa[2];
	gm_elastic_divide(sh, 1, 1, w8);
	gm_elastic_divide(sh + 1, 1, 1, wa);
	assert_int_equal(w8[0], wa[0]);
	/* the ask: cap 8 less its one local worker against no cap, the peers
	 * lending 3: the same 3 */
	struct gm_policy_borrow_in in = host_a();
	struct gm_policy_borrow_out out;
	struct gm_policy_ask a8 = {0}, aa = {0};
	in.remote_worker_rate = 300;
	in.bounded = true;
	in.lendable = 3;
	in.most = 8 - in.workers;
	uint32_t n8 = gm_policy_ask_next(&a8, &in, 0, &out);
	in.most = 256;
	assert_int_equal(gm_policy_ask_next(&aa, &in, 0, &out), n8);
}

/* The consumer of one job takes 768 img/s when fed (its own time per batch of
 * 64: 83 ms) and is given 400 img/s: it waits 77 ms for each batch. The
 * controller looks every 250 ms, and a wait is counted when it ends, so a look
 * inside a wait counts it as the consumer's own time and the next look takes
 * it all out: window by window the demand reads between about 400 and 1,500.
 * Smoothed over the job's batch periods it reads 768 within 10% from its
 * eighth batch period on, for a batch of 64 and for one of 512 alike (its
 * window scaled to the longer period; the agent's looks, in waits only and
 * counting the wait going on, read it exact: test_elastic.c). */
static void check_demand_settles(uint32_t batch)
{
	const double own = batch / 768.0, period = batch / 400.0, tick = 0.25 * batch / 64;
	struct gm_policy_demand d = {0};
	double t = 0, wait_done = 0, taken = 0, last_wait = 0, last_taken = 0, raw_lo = 1e18,
	       raw_hi = 0;
	uint64_t k = 1;	      /* the next batch, ready at k x period */
	double next_wait = 0; /* the consumer starts waiting at 0 */
	for (int look = 1; look <= 400; look++) {
		double now = look * tick;
		/* the consumer's batches up to now: a wait to k x period, then its own time */
		while (k * period <= now) {
			wait_done += k * period - next_wait;
			taken += batch;
			next_wait = k * period + own;
			k++;
		}
		double dw = wait_done - last_wait, ds = taken - last_taken;
		double busy = tick - dw;
		(void)t;
		double est = gm_policy_demand_add(&d, ds, busy > 0 ? busy : 0, tick, batch);
		if (ds > 0 && busy > 0) {
			raw_lo = fmin(raw_lo, ds / busy);
			raw_hi = fmax(raw_hi, ds / busy);
		}
		last_wait = wait_done;
		last_taken = taken;
		if (now >= 2 * period * GM_POLICY_DEMAND_BATCHES / 4 && ds > 0)
			assert_in_range((uint64_t)est, 691, 845);
	}
	assert_true(raw_hi / raw_lo > 1.5); /* the windows alone swing */
}

static void test_demand_is_the_consumers_own_time_smoothed_over_its_batch_periods(void **st)
{
	(void)st;
	check_demand_settles(64);
	check_demand_settles(512);
}

/* A job fed remotely (no local capacity) whose measured demand swings, tick by
 * tick, 487, 487, 1,011 (the log: the ask went 1 -> 2 -> 1 every
 * second), at 400 img/s a remote worker: its ask is decided at its first
 * measurement, all of it at once, then holds; a demand that moves for good
 * moves it after GM_POLICY_ASK_SETTLE_S, straight to the count that covers
 * it; a peer that can lend fewer cuts it at once. */
static void test_the_remote_ask_is_right_at_once_and_does_not_flap(void **st)
{
	(void)st;
	struct gm_policy_borrow_in in = host_a();
	struct gm_policy_borrow_out out;
	struct gm_policy_ask a = {0};
	static const double swing[] = {487, 487, 1011};
	in.workers = 0; /* fed remotely: no local worker */
	in.remote_worker_rate = 400;
	in.delivered = 700;
	in.demand = 1011;
	/* first measurement: ceil(1011 x 1.1 / 400) = 3 at once */
	assert_int_equal(gm_policy_ask_next(&a, &in, 0, &out), 3);
	for (int t = 0; t < 120; t++) { /* 30 s of 250 ms ticks */
		in.demand = swing[t % 3];
		assert_int_equal(gm_policy_ask_next(&a, &in, 0.25, &out), 3);
	}
	/* the trainer speeds up for good: 2,000 img/s needs 6 */
	in.demand = 2000;
	for (int t = 0; t < 7; t++) /* 1.75 s: not settled yet */
		assert_int_equal(gm_policy_ask_next(&a, &in, 0.25, &out), 3);
	assert_int_equal(gm_policy_ask_next(&a, &in, 0.25, &out), 6);
	for (int t = 0; t < 40; t++) /* and holds */
		assert_int_equal(gm_policy_ask_next(&a, &in, 0.25, &out), 6);
	/* the peers can lend only 2 now: cut at once, and back when they can */
	in.bounded = true;
	in.lendable = 2;
	assert_int_equal(gm_policy_ask_next(&a, &in, 0.25, &out), 2);
	assert_true(out.peers_short);
	in.lendable = 10;
	assert_int_equal(gm_policy_ask_next(&a, &in, 0.25, &out), 6);
	/* not measured yet: asks nothing before its first decision */
	struct gm_policy_ask b = {0};
	in.worker_rate = 0;
	assert_int_equal(gm_policy_ask_next(&b, &in, 0.25, &out), 0);
}

/* A job whose ring bounds it asks for no more workers: seed 107's 0.15-core P3
 * job, 3 remote workers delivering 211 img/s of a 538 demand (70 each, the
 * ring's wait counted in), asked for 6 as its trainer waited, though its
 * workers were told "no batch free" meanwhile. Ring-bound, it holds its 3
 * (and says why); once its workers find batches again, a waiting trainer
 * grows the ask at once as before; a job whose gap shrinks still gives
 * workers back. */
static void test_a_ring_bound_job_asks_for_no_more_workers(void **st)
{
	(void)st;
	struct gm_policy_borrow_in in = {.demand = 538,
					 .headroom = 1.1,
					 .delivered = 211,
					 .stall = 0.65,
					 .worker_rate = 1200,
					 .cores = 0.15,
					 .remote_rate = 211,
					 .remote_worker_rate = 70,
					 .workers = 0,
					 .most = 8};
	struct gm_policy_borrow_out out;
	struct gm_policy_ask a = {.decided = true, .count = 3, .gap = 400, .given = 3};
	char why[384];
	in.ring_bound = true;
	for (int t = 0; t < 20; t++) /* 5 s of 250 ms ticks: holds */
		assert_int_equal(gm_policy_ask_next(&a, &in, 0.25, &out), 3);
	gm_policy_borrow_why(&in, &out, why, sizeof(why));
	assert_non_null(strstr(why, "'no batch free' while the trainer waited"));
	/* the same inputs, no longer ring-bound: the waiting trainer's gap at once */
	in.ring_bound = false;
	assert_int_equal(gm_policy_ask_next(&a, &in, 0.25, &out), 8);
	gm_policy_borrow_why(&in, &out, why, sizeof(why));
	assert_null(strstr(why, "no batch free"));
	/* ring-bound again with 8 given: holds 8, and still comes down with the gap */
	in.ring_bound = true;
	assert_int_equal(gm_policy_ask_next(&a, &in, 0.25, &out), 8);
	in.demand = 150;
	in.stall = 0;
	in.delivered = 150;
	in.remote_rate = 150;
	in.remote_worker_rate = 300;
	uint32_t n = 8;
	for (int t = 0; t < 12; t++)
		n = gm_policy_ask_next(&a, &in, 0.25, &out);
	assert_int_equal(n, 1);
}

/* Seed 107's P1 (0.15 core, a remote worker 266 img/s): its job read its local
 * capacity as covering demand (1,762 >= 452 img/s) for the interval, then its
 * local worker stopped (fed remotely: capacity 0, gap 507) at the decision:
 * the interval's mean still held the covered gaps, and the ask went 3 -> 0
 * ("stops asking the peers for remote workers: local capacity 0 img/s <
 * demand 461 img/s"), its local worker back a second later. A settled change
 * goes only as far as the gap at the decision agrees, either way. */
static void test_a_settled_ask_moves_only_as_far_as_the_gap_now_agrees(void **st)
{
	(void)st;
	struct gm_policy_borrow_in fed = {.demand = 800,
					  .headroom = 1.1,
					  .worker_rate = 11747,
					  .cores = 0.15,
					  .remote_rate = 531,
					  .remote_worker_rate = 266,
					  .delivered = 531,
					  .most = 7,
					  .bounded = true,
					  .lendable = 7};
	struct gm_policy_borrow_in covered = fed;
	struct gm_policy_borrow_out out;
	struct gm_policy_ask a = {0};
	covered.workers = 1, covered.demand = 452; /* 0.15 x 11,747 = 1,762 */
	/* fed: ceil(880 / 266) = 4 at once */
	assert_int_equal(gm_policy_ask_next(&a, &fed, 0, &out), 4);
	for (int t = 0; t < 7; t++) /* 1.75 s covered: not settled yet */
		assert_int_equal(gm_policy_ask_next(&a, &covered, 0.25, &out), 4);
	/* fed again at the decision, demand 461: ceil(507 / 266) = 2, not 0 */
	fed.demand = 461;
	assert_int_equal(gm_policy_ask_next(&a, &fed, 0.25, &out), 2);
	for (int t = 0; t < 40; t++) /* and holds there */
		assert_int_equal(gm_policy_ask_next(&a, &fed, 0.25, &out), 2);
	/* upward alike: 1.75 s at demand 1,200 (5 workers), covered at the
	 * decision: still 2 */
	fed.demand = 1200;
	for (int t = 0; t < 7; t++)
		assert_int_equal(gm_policy_ask_next(&a, &fed, 0.25, &out), 2);
	assert_int_equal(gm_policy_ask_next(&a, &covered, 0.25, &out), 2);
	/* a gap that stays moved both ways moves it all the way: 2 s at 1,200 */
	for (int t = 0; t < 7; t++)
		assert_int_equal(gm_policy_ask_next(&a, &fed, 0.25, &out), 2);
	assert_int_equal(gm_policy_ask_next(&a, &fed, 0.25, &out), 5);
}

/* Seed 105's lender B: its job's first decision (demand 1,109 x 1.1 against a
 * capacity that read 1,100) counted one remote worker, cut to 0 while B lent
 * (its own CPUs back first: most 0). Measured since: capacity 1,435, which
 * covers demand and headroom. Once B lent nothing, the held count asked the
 * peers for that worker: "asks the peers for 1 remote workers (was 0): local
 * capacity covers demand (1435 >= 1109 img/s)". A held count keeps workers; it
 * adds only what the gap now calls for. */
static void test_a_held_ask_adds_no_worker_the_gap_does_not_call_for(void **st)
{
	(void)st;
	struct gm_policy_borrow_in in = {.demand = 1109,
					 .headroom = 1.1,
					 .worker_rate = 1100,
					 .workers = 1,
					 .most = 0, /* lending: borrows nothing */
					 .bounded = true,
					 .lendable = 4};
	struct gm_policy_borrow_out out;
	struct gm_policy_ask a = {0};
	assert_int_equal(gm_policy_ask_next(&a, &in, 0, &out), 0);
	assert_true(out.capped);
	in.worker_rate = 1435; /* covered within a worker's rate: the count holds */
	for (int t = 0; t < 4; t++)
		assert_int_equal(gm_policy_ask_next(&a, &in, 0.25, &out), 0);
	assert_int_equal(out.why, GM_BORROW_COVERED);
	in.most = 7; /* lends no more: still 0, and the words agree */
	for (int t = 0; t < 40; t++)
		assert_int_equal(gm_policy_ask_next(&a, &in, 0.25, &out), 0);
	/* the gap opens again (the trainer speeds up to 2,000 img/s): asked at
	 * once, since the job waits: ceil((2,200 - 1,400 delivered) / 1,435) = 1 */
	in.demand = 2000, in.delivered = 1400, in.stall = 0.3;
	assert_int_equal(gm_policy_ask_next(&a, &in, 0.25, &out), 1);
	/* and a held worker stays when the gap closes within its rate, while it
	 * delivers a share of what the consumer gets */
	in.demand = 1109, in.delivered = 1109, in.stall = 0, in.remote_rate = 300;
	for (int t = 0; t < 40; t++)
		assert_int_equal(gm_policy_ask_next(&a, &in, 0.25, &out), 1);
	/* once the local workers feed it nearly alone (the worker makes 7 img/s
	 * of 1,109), it goes after a settled interval (2 s) */
	in.remote_rate = 7;
	for (int t = 0; t < 7; t++)
		assert_int_equal(gm_policy_ask_next(&a, &in, 0.25, &out), 1);
	assert_int_equal(out.why, GM_BORROW_COVERED); /* by the model too */
	assert_int_equal(gm_policy_ask_next(&a, &in, 0.25, &out), 0);
	for (int t = 0; t < 40; t++) /* and stays gone */
		assert_int_equal(gm_policy_ask_next(&a, &in, 0.25, &out), 0);
}

/* tests/bench/bench-remote.sh's home (0.25 core, a local worker's on-CPU rate
 * 2,308 img/s, capacity 577): its first window read demand 1,801, so its first
 * ask, at a remote worker counted as one local worker's core, was 1; then its
 * trainer waited 94% of the time for 5,753 img/s. A consumer that waits for
 * more than the last count covers gets it at once (the settled interval held
 * it at one remote worker 2.4-2.6 s more, of a run that takes 4 s on a quiet
 * machine); fewer still wait to settle, and a swing back while it waits
 * changes nothing. */
static void test_a_starved_consumer_gets_more_remote_workers_at_once(void **st)
{
	(void)st;
	struct gm_policy_borrow_in in = {.demand = 1801,
					 .headroom = 1.1,
					 .worker_rate = 2308,
					 .cores = 0.25,
					 .workers = 1,
					 .most = 7,
					 .bounded = true,
					 .lendable = 2};
	struct gm_policy_borrow_out out;
	struct gm_policy_ask a = {0};
	/* first: ceil((1,801 x 1.1 - 577) / 2,308) = 1 */
	assert_int_equal(gm_policy_ask_next(&a, &in, 0, &out), 1);
	/* the trainer waits 94% of the time, 502 img/s delivered, 5,753 wanted:
	 * ceil((6,328 - 502) / 2,308) = 3, cut to the 2 the peer lends, at once */
	in.demand = 5753, in.delivered = 502, in.stall = 0.94;
	assert_int_equal(gm_policy_ask_next(&a, &in, 0.25, &out), 2);
	assert_true(out.peers_short);
	/* a reading of 1,801 again while it waits: no fewer before the interval */
	in.demand = 1801;
	for (int t = 0; t < 7; t++)
		assert_int_equal(gm_policy_ask_next(&a, &in, 0.25, &out), 2);
	/* fed now (no local worker), the remote rate measured: 1,400 a worker,
	 * the trainer takes 2,600 and no longer waits: the 2 the peer lends are
	 * all it gets (3 cover 2,860; the low readings while it waited, 1,479,
	 * no longer pull a settled count below what the gap then needs) */
	in = (struct gm_policy_borrow_in){.demand = 2600,
					  .headroom = 1.1,
					  .worker_rate = 2308,
					  .cores = 0.25,
					  .remote_rate = 2600,
					  .remote_worker_rate = 1400,
					  .delivered = 2600,
					  .most = 7,
					  .bounded = true,
					  .lendable = 2};
	for (int t = 0; t < 40; t++)
		assert_int_equal(gm_policy_ask_next(&a, &in, 0.25, &out), 2);
	/* a consumer that does not wait: a higher demand waits to settle (the
	 * flap rule), as test_the_remote_ask_is_right_at_once_and_does_not_flap */
	in.demand = 4000, in.lendable = 4; /* the 3 at once: the bound lifted */
	for (int t = 0; t < 7; t++)
		assert_int_equal(gm_policy_ask_next(&a, &in, 0.25, &out), 3);
	assert_int_equal(gm_policy_ask_next(&a, &in, 0.25, &out), 4);
}

/* The flip: B and C each lend about half a core, their heartbeats a
 * few hundredths apart, and the job's one remote worker moved B -> C -> B at
 * each spread, a new worker and a cold lease every time. It stays where it
 * runs; it moves when its lender needs it back, or to a lender idler by more
 * than a worker; fewer wanted are taken from the busiest. */
static void test_remote_workers_stay_with_their_lender(void **st)
{
	(void)st;
	uint32_t ask[2], prev[2];
	struct gm_policy_lender l[] = {{.cores = 0.50, .workers = 1},
				       {.cores = 0.52, .workers = 1}};
	assert_int_equal(gm_policy_spread(l, 2, 1, NULL, ask), 1);
	assert_int_equal(ask[1], 1); /* C, the idler */
	prev[0] = ask[0], prev[1] = ask[1];
	l[0].cores = 0.53, l[1].cores = 0.50; /* B idler by 0.03 now */
	assert_int_equal(gm_policy_spread(l, 2, 1, prev, ask), 1);
	assert_int_equal(ask[0], 0);
	assert_int_equal(ask[1], 1);
	/* C's cores read under GM_POLICY_LEND_MIN_CORES (0 while its own new
	 * job is measured; 0.2 a slot): it keeps the worker it runs, and gets
	 * no other */
	l[1].cores = 0;
	assert_int_equal(gm_policy_spread(l, 2, 1, prev, ask), 1);
	assert_int_equal(ask[1], 1);
	l[1].cores = 0.2;
	l[1].workers = 2;
	assert_int_equal(gm_policy_spread(l, 2, 2, prev, ask), 2);
	assert_int_equal(ask[0], 1);
	assert_int_equal(ask[1], 1);
	l[1].cores = 0.50;
	l[1].workers = 0; /* C needs its worker back */
	assert_int_equal(gm_policy_spread(l, 2, 1, prev, ask), 1);
	assert_int_equal(ask[0], 1);
	assert_int_equal(ask[1], 0);
	/* C keeps it at 0.5 core; B lends 3 cores over 4 workers: idler by more
	 * than a worker (3 left against none): it moves */
	struct gm_policy_lender big[] = {{.cores = 3.0, .workers = 4},
					 {.cores = 0.5, .workers = 1}};
	prev[0] = 0, prev[1] = 1;
	assert_int_equal(gm_policy_spread(big, 2, 1, prev, ask), 1);
	assert_int_equal(ask[0], 1);
	assert_int_equal(ask[1], 0);
	/* but not from 1.25 left to 2.25: not by more than a worker */
	struct gm_policy_lender two[] = {{.cores = 3.0, .workers = 4},
					 {.cores = 2.5, .workers = 2}};
	prev[0] = 1, prev[1] = 1;
	assert_int_equal(gm_policy_spread(two, 2, 2, prev, ask), 2);
	assert_int_equal(ask[0], 1);
	assert_int_equal(ask[1], 1);
	/* one fewer: from the busiest (1.25 left against 2.25) */
	assert_int_equal(gm_policy_spread(two, 2, 1, prev, ask), 1);
	assert_int_equal(ask[0], 1);
	assert_int_equal(ask[1], 0);
}

/* The second scenario: A's first job, on 0.25 core, made 400 img/s
 * with its own worker; the peers sent it 300 and it ran no local worker, 15.7 s
 * with lending off, 22.2 s on. A small host's job keeps its local workers
 * until its remote ones measurably deliver more than they did, and takes them
 * back when the remote ones deliver less again; a host of half a core or more
 * always keeps them. */
static void test_local_workers_stay_until_remote_ones_deliver_more(void **st)
{
	(void)st;
	assert_false(gm_policy_fed_remotely(true, 400, 300, 0, false));
	assert_false(gm_policy_fed_remotely(true, 400, 430, 0, false)); /* not measurably */
	assert_true(gm_policy_fed_remotely(true, 400, 450, 0, false));
	assert_true(gm_policy_fed_remotely(true, 400, 420, 0, true));  /* holds */
	assert_false(gm_policy_fed_remotely(true, 400, 390, 0, true)); /* local again */
	assert_false(gm_policy_fed_remotely(true, 0, 500, 0, false));  /* never measured alone */
	assert_false(gm_policy_fed_remotely(true, 400, 0, 0, false));
	assert_false(gm_policy_fed_remotely(false, 400, 900, 0, false));
	/* counted at what the consumer takes: local alone nearly covers 403 */
	assert_false(gm_policy_fed_remotely(true, 397, 683, 403, false));
	assert_true(gm_policy_fed_remotely(true, 250, 683, 403, false));
	assert_true(gm_policy_fed_remotely(true, 397, 683, 1e12, false)); /* greedy */
}

/* tests/regress/bench-ab-remote.sh at load 4-5: the 0.25-core home's job got
 * 1,618-1,949 img/s with its local worker beside two remote ones, 1,224-1,305
 * once it ran none (the lenders, not its receive path, bound the remote
 * ones). A job that went fed goes back to its local workers when remote ones
 * alone deliver measurably less than both together did; on a quiet machine
 * (remote alone 2,900 against 2,000 together) it stays fed. */
static void test_a_fed_job_that_got_less_takes_its_local_workers_back(void **st)
{
	(void)st;
	assert_true(gm_policy_fed_worse(1900, 1250));
	assert_false(gm_policy_fed_worse(2000, 2900));
	assert_false(gm_policy_fed_worse(1900, 1800)); /* not measurably */
	assert_false(gm_policy_fed_worse(0, 1250));    /* together never measured */
	assert_true(gm_policy_fed_worse(800, 0));      /* they stopped */
	/* ... for good only when they delivered measurably less, not nothing */
	assert_false(gm_policy_fed_retry(1250, 1240));
	assert_true(gm_policy_fed_retry(0, 1240));
	assert_false(gm_policy_fed_retry(1250, 0)); /* never measured beside */
}

/* Seed 107: a 0.15-core home's job fed by remote workers got 69 img/s once
 * its lenders took 2 of its 3 back for their own jobs, against 362 with its
 * local worker, of which the remote ones had made 330: no fair trial, so it
 * may be fed again. Remote workers that delivered as much alone as beside
 * the local one, which had added its own, are a fair trial: for good. */
static void test_a_fed_trial_its_lenders_cut_short_is_no_verdict(void **st)
{
	(void)st;
	assert_true(gm_policy_fed_worse(362, 69));
	assert_true(gm_policy_fed_retry(69, 330));
	assert_true(gm_policy_fed_retry(290, 330));  /* 290 x 1.1 < 330 */
	assert_false(gm_policy_fed_retry(310, 330)); /* as much: the local one added */
	assert_true(gm_policy_fed_worse(362, 310));
	assert_true(gm_policy_fed_retry(NAN, 330)); /* no measure: no verdict */
}

/* Seed 107's 0.15-core home: its remote workers delivered 300-400 img/s each
 * to jobs that waited; a new job short by 653 img/s asks for 2 at once, not 1
 * at a local worker's 2,600 img/s a core. A job they fed more than it took
 * (no wait) says nothing of what they can make. */
static void test_a_new_jobs_first_ask_counts_what_remote_workers_deliver(void **st)
{
	(void)st;
	double host = 0;
	gm_policy_remote_per_add(&host, 350, 0.01); /* fed: no evidence */
	assert_true(host == 0);
	gm_policy_remote_per_add(&host, 350, 0.4);
	assert_true(fabs(host - 350) < 1e-9);
	gm_policy_remote_per_add(&host, 250, 0.3);
	assert_true(fabs(host - 320) < 1e-9);
	gm_policy_remote_per_add(&host, NAN, 0.3);
	gm_policy_remote_per_add(&host, 0, 0.3);
	assert_true(fabs(host - 320) < 1e-9);
	struct gm_policy_borrow_in in = {.demand = 838,
					 .headroom = 1,
					 .delivered = 185,
					 .stall = 0.5,
					 .worker_rate = 2600,
					 .cores = 0.07,
					 .remote_worker_rate = host,
					 .workers = 1,
					 .most = 8};
	struct gm_policy_borrow_out out;
	gm_policy_borrow(&in, &out);
	assert_int_equal(out.want, 3); /* (838 - 182) / 320 */
	in.remote_worker_rate = 0;
	gm_policy_borrow(&in, &out);
	assert_int_equal(out.want, 1); /* the old count, at a local worker's rate */
}

/* Seed 2's fed 297 img/s job on a 0.15-core home: three remote workers, each
 * delivering 99 img/s while the trainer did not wait. Counted at 99 it asks
 * for 4 (and held its three slots); at what one delivered while it waited,
 * 210, for 2. */
static void test_a_fed_job_counts_its_remote_workers_at_what_they_made_while_it_waited(void **st)
{
	(void)st;
	double job = 0;
	gm_policy_remote_per_add(&job, 99, 0.0); /* fed: says nothing */
	assert_true(job == 0);
	assert_true(gm_policy_remote_worker_rate(job, 0, 99) == 99);	/* none else measured */
	assert_true(gm_policy_remote_worker_rate(job, 180, 99) == 180); /* the host's */
	gm_policy_remote_per_add(&job, 210, 0.4);
	assert_true(gm_policy_remote_worker_rate(job, 180, 99) == 210);	 /* its own first */
	assert_true(gm_policy_remote_worker_rate(job, 180, 260) == 260); /* they made more now */
	assert_true(gm_policy_remote_worker_rate(NAN, INFINITY, -1) == 0);
	assert_true(gm_policy_remote_worker_rate(0, 0, 0) == 0);
	struct gm_policy_borrow_in in = {.demand = 297,
					 .headroom = 1.1,
					 .delivered = 297,
					 .stall = 0.0,
					 .worker_rate = 2600,
					 .remote_rate = 297,
					 .remote_worker_rate =
					     gm_policy_remote_worker_rate(0, 0, 99),
					 .most = 8};
	struct gm_policy_borrow_out out;
	gm_policy_borrow(&in, &out);
	assert_int_equal(out.want, 4); /* 297 x 1.1 / 99: more than it holds */
	in.remote_worker_rate = gm_policy_remote_worker_rate(job, 0, 99);
	gm_policy_borrow(&in, &out);
	assert_int_equal(out.want, 2); /* 297 x 1.1 / 210 */
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
	    cmocka_unit_test(test_quota_limited_job_borrows_where_unlimited_would_not),
	    cmocka_unit_test(test_demand_limited_job_does_not_borrow),
	    cmocka_unit_test(test_a_stalled_consumer_overrules_the_model),
	    cmocka_unit_test(test_a_workers_rate_by_its_cpu_time),
	    cmocka_unit_test(test_a_new_jobs_rate_is_bounded_by_its_pipelines_known_rate),
	    cmocka_unit_test(test_what_local_workers_alone_delivered_overrules_the_model),
	    cmocka_unit_test(test_alone_is_measured_in_waits_and_forgotten_once_fed),
	    cmocka_unit_test(test_local_workers_that_feed_the_job_ask_no_remote_worker),
	    cmocka_unit_test(test_recovered_local_capacity_returns_the_remote_workers),
	    cmocka_unit_test(test_borrowing_is_capped_and_waits_for_a_measurement),
	    cmocka_unit_test(test_borrowing_never_asks_past_what_the_peers_lend),
	    cmocka_unit_test(test_idle_cores_lend_beyond_a_held_budget),
	    cmocka_unit_test(test_spread_asks_the_idlest_peer_first),
	    cmocka_unit_test(test_spread_follows_the_capacity),
	    cmocka_unit_test(test_spread_never_past_what_a_peer_lends),
	    cmocka_unit_test(test_spread_asks_a_slot_left_under_a_quarter_core),
	    cmocka_unit_test(test_a_starved_or_poor_host_lends_nothing),
	    cmocka_unit_test(test_a_lender_that_took_its_workers_back_settles_first),
	    cmocka_unit_test(test_a_lenders_new_job_preempts_no_guest_before_it_is_measured),
	    cmocka_unit_test(test_a_lenders_new_job_at_its_first_window_preempts_no_guest),
	    cmocka_unit_test(test_a_fresh_lenders_guests_keep_a_quarter_of_their_cores),
	    cmocka_unit_test(test_a_lenders_new_ring_counts_no_peer_worker),
	    cmocka_unit_test(test_a_lender_whose_lending_starves_its_own_jobs_waits_longer),
	    cmocka_unit_test(test_a_lenders_guests_share_what_its_own_jobs_leave),
	    cmocka_unit_test(test_a_lenders_idle_guests_leave_their_share_to_the_busy_ones),
	    cmocka_unit_test(test_a_lender_keeps_its_count_through_noise),
	    cmocka_unit_test(test_a_fed_job_holds_a_share_of_its_home),
	    cmocka_unit_test(test_a_poor_home_paces_its_local_workers),
	    cmocka_unit_test(test_a_paced_worker_sleeps_out_its_debt),
	    cmocka_unit_test(test_a_home_divides_its_peers_workers),
	    cmocka_unit_test(test_a_poor_home_gets_a_smaller_ring),
	    cmocka_unit_test(test_a_named_worker_count_plans_as_auto),
	    cmocka_unit_test(test_demand_is_the_consumers_own_time_smoothed_over_its_batch_periods),
	    cmocka_unit_test(test_the_remote_ask_is_right_at_once_and_does_not_flap),
	    cmocka_unit_test(test_a_ring_bound_job_asks_for_no_more_workers),
	    cmocka_unit_test(test_a_settled_ask_moves_only_as_far_as_the_gap_now_agrees),
	    cmocka_unit_test(test_a_held_ask_adds_no_worker_the_gap_does_not_call_for),
	    cmocka_unit_test(test_a_starved_consumer_gets_more_remote_workers_at_once),
	    cmocka_unit_test(test_remote_workers_stay_with_their_lender),
	    cmocka_unit_test(test_local_workers_stay_until_remote_ones_deliver_more),
	    cmocka_unit_test(test_a_fed_job_that_got_less_takes_its_local_workers_back),
	    cmocka_unit_test(test_a_fed_trial_its_lenders_cut_short_is_no_verdict),
	    cmocka_unit_test(test_a_new_jobs_first_ask_counts_what_remote_workers_deliver),
	    cmocka_unit_test(
		test_a_fed_job_counts_its_remote_workers_at_what_they_made_while_it_waited),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
