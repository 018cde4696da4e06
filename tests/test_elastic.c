/*
 * test_elastic.c - workers = auto: the node's controller measures the consumer's
 * demand and one worker's rate and sizes the pool through the shared policy
 * (core/policy.c). A greedy consumer grows the pool to the CPU budget; a slow one
 * (a trainer whose GPU step takes 40 ms) shrinks it to the one worker that keeps
 * its stall low. Assertions are on the pool size reached, with generous deadlines.
 * gm_elastic_grant (the node agent's way to a division within its budget) is
 * checked by hand on small cases.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <ftw.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "goldminer/elastic.h"
#include "goldminer/ring.h"
#include "goldminer/loader.h"
#include "goldminer/synth.h"
#include "testutil.h"

static char dir[64];

static int setup(void **state)
{
	(void)state;
	char err[256];
	if (gm_test_tmpdir(dir, sizeof(dir), "gm-elastic"))
		return -1;
	return gm_synth_write(dir, 64, 2, 3, 0, NULL, err, sizeof(err)) ? -1 : 0;
}

static int teardown(void **state)
{
	(void)state;
	gm_test_rm_tree(dir);
	return 0;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void test_grow_then_shrink(void **state)
{
	(void)state;
	struct gm_loader_opts o;
	struct gm_loader *l;
	struct gm_loader_stats st;
	struct gm_batch b;
	char err[256];

	gm_loader_opts_default(&o);
	o.root = dir;
	o.workers = 0; /* auto */
	o.max_workers = 3;
	o.batch_size = 8;
	o.aug.size = 32;
	o.no_pin = true;
	assert_int_equal(gm_loader_open(&l, &o, err, sizeof(err)), 0);

	/* Greedy consumer: demand is unbounded, the pool grows to the budget. */
	double t0 = now_s();
	do {
		assert_true(gm_loader_next(l, &b) >= 0);
		gm_loader_stats(l, &st);
	} while (st.target_workers < 3 && now_s() - t0 < 30);
	assert_int_equal(st.target_workers, 3);
	assert_true(st.demand_img_per_s == 0 || st.demand_img_per_s > st.worker_img_per_s);

	/* Slow consumer: 40 ms per batch of 8 = 200 img/s at most; far below what one
	 * worker makes of 32x32 outputs, so the pool shrinks to 1. */
	t0 = now_s();
	do {
		assert_true(gm_loader_next(l, &b) >= 0);
		struct timespec ts = {0, 40 * 1000000};
		nanosleep(&ts, NULL);
		gm_loader_stats(l, &st);
	} while ((st.target_workers > 1 || st.workers > 1) && now_s() - t0 < 60);
	printf("# shrunk to %u worker(s) in %.1f s; demand %.0f img/s, one worker %.0f img/s\n",
	       st.target_workers, now_s() - t0, st.demand_img_per_s, st.worker_img_per_s);
	assert_int_equal(st.target_workers, 1);
	assert_int_equal(st.workers, 1);
	assert_true(st.worker_img_per_s > st.demand_img_per_s);
	assert_int_equal(st.worker_deaths, 0);
	gm_loader_close(l);
}

/* Hand-checked: job 0 holds the whole budget of 2, newcomer 1 wants 1. The shrink
 * is applied at once, the newcomer waits while job 0's retiree is alive, then
 * starts; never more than 2 held. */
static void test_grant_shrinks_first_then_grows_into_freed_cpus(void **state)
{
	(void)state;
	uint32_t want[2] = {1, 1}, retiring[2] = {0, 0}, alive[2] = {2, 0}, t[2] = {2, 0};
	/* job 0 not yet retired (its coordinator has not acted): 2 alive, held 2 */
	assert_int_equal(gm_elastic_grant(want, retiring, alive, 2, 2, t), 2);
	assert_int_equal(t[0], 1);
	assert_int_equal(t[1], 0);
	/* retired, not yet exited: 1 active + 1 retiring, held still 2 */
	retiring[0] = 1;
	assert_int_equal(gm_elastic_grant(want, retiring, alive, 2, 2, t), 2);
	assert_int_equal(t[1], 0);
	/* the retiree exited: one CPU free, the newcomer starts */
	retiring[0] = 0;
	alive[0] = 1;
	assert_int_equal(gm_elastic_grant(want, retiring, alive, 2, 2, t), 2);
	assert_int_equal(t[0], 1);
	assert_int_equal(t[1], 1);
}

/* Hand-checked: a job's own retiree counts against its growth (target 1, one
 * retiring, alive 2: raising it to 2 would run 3); jobs without workers come
 * first; a shrink never waits. */
static void test_grant_counts_retirees_and_serves_empty_jobs_first(void **state)
{
	(void)state;
	uint32_t want[3] = {3, 1, 0}, retiring[3] = {1, 0, 0}, alive[3] = {2, 0, 1},
		 t[3] = {1, 0, 1};
	/* capacity 4: held 2 + 0 + 0 (job 2 shrinks to 0, but its worker is alive: 1) = 3 */
	assert_int_equal(gm_elastic_grant(want, retiring, alive, 3, 4, t), 4);
	assert_int_equal(t[2], 0);
	assert_int_equal(t[1], 1); /* the empty job got the one free CPU, not job 0 */
	assert_int_equal(t[0], 1);
	/* job 2's worker and job 0's retiree exit: two free, job 0 grows to 3 */
	retiring[0] = 0;
	alive[0] = 1;
	alive[1] = 1;
	alive[2] = 0;
	assert_int_equal(gm_elastic_grant(want, retiring, alive, 3, 4, t), 4);
	assert_int_equal(t[0], 3);
	assert_int_equal(t[1], 1);
	/* already over (a lease-watch overlap): no growth, shrinks still apply */
	uint32_t w2[2] = {2, 1}, r2[2] = {1, 0}, a2[2] = {3, 0}, t2[2] = {3, 0};
	assert_int_equal(gm_elastic_grant(w2, r2, a2, 2, 2, t2), 3);
	assert_int_equal(t2[0], 2);
	assert_int_equal(t2[1], 0);
}

/* Two pools fixed at the whole budget (3) and a newcomer: the division never asks
 * for more than the budget (else the newcomer would wait for ever for a CPU no
 * one gives back); with more jobs than the budget, one worker each. */
static void test_divide_never_exceeds_the_budget(void **state)
{
	(void)state;
	struct gm_elastic_share sh[3] = {
	    {.fixed = 3, .workers = 3}, {.fixed = 3, .workers = 0}, {.workers = 1}};
	uint32_t w[3];
	gm_elastic_divide(sh, 3, 3, w);
	assert_int_equal(w[0] + w[1] + w[2], 3);
	assert_int_equal(w[0], 1);
	assert_int_equal(w[1], 1);
	assert_int_equal(w[2], 1);
	gm_elastic_divide(sh, 2, 3, w);
	assert_int_equal(w[0], 2); /* the older keeps more among equals */
	assert_int_equal(w[1], 1);
	gm_elastic_divide(sh, 3, 2, w);
	assert_int_equal(w[0] + w[1] + w[2], 3); /* max(budget 2, 3 jobs) */
}

/* The consumer's own time per batch, whatever the look cuts: a window of 1 s
 * in which it took two batches of 64 (its own time 0.2 s in all) and has been
 * waiting for the third since 0.8 s: 640 img/s. Counted only once it ended, a
 * wait going on read as the trainer's own time (128 img/s here; a 768 img/s
 * trainer read 261 and 1,011 in turn in the cluster's log). A look while it is
 * busy with a batch it took (its own time for it not over) closes no window. */
static void test_demand_is_the_consumers_own_time_per_batch(void **state)
{
	(void)state;
	static struct gm_ring_hdr h;
	struct gm_elastic_meter m = {0};
	struct timespec ts;
	double demand = -1, rate = -1;

	memset(&h, 0, sizeof(h));
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	m.t = now - 1000000000ull;
	atomic_store(&h.c_samples, 128);
	atomic_store(&h.c_work_ns, 1000000000ull);
	atomic_store(&h.c_waiting, now - 800000000ull); /* waiting since 0.2 s */
	assert_int_equal(gm_elastic_measure(&m, &h, 64, &demand, &rate), 1);
	assert_in_range((uint64_t)demand, 620, 660);
	/* two more batches, and the consumer busy with the last: no window yet */
	atomic_store(&h.c_samples, 256);
	atomic_store(&h.c_wait_ns, 800000000ull);
	atomic_store(&h.c_waiting, 0);
	m.t -= 500000000ull;
	assert_int_equal(gm_elastic_measure(&m, &h, 64, &demand, &rate), 0);
}

/* A window of 1 s in which the consumer took 1,000 samples, waited 0.2 s for
 * batches and paused p ns between epochs: its demand. The meter's clock is set
 * back by hand (the measure reads CLOCK_MONOTONIC). */
static double demand_after(uint64_t pause_done, int pause_going_ms)
{
	static struct gm_ring_hdr h;
	struct gm_elastic_meter m = {0};
	struct timespec ts;
	double demand = -1, rate = -1;

	memset(&h, 0, sizeof(h));
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	m.t = now - 1000000000ull;
	atomic_store(&h.c_samples, 1000);
	atomic_store(&h.c_wait_ns, 200000000ull);
	atomic_store(&h.c_work_ns, 2000000000ull);
	atomic_store(&h.c_pause_ns, pause_done);
	if (pause_going_ms)
		atomic_store(&h.c_pause_t0, now - (uint64_t)pause_going_ms * 1000000ull);
	assert_int_equal(gm_elastic_measure(&m, &h, 32, &demand, &rate), 1);
	assert_true(rate > 499 && rate < 501); /* 1,000 samples in 2 s of work */
	return demand;
}

/* One local worker's rate leaves remote workers' batches out: 1,000 samples in
 * 1 s, 600 of them remote, the local 400 in 2 s of work: 200/s (counted with
 * the remote ones, 500/s); then a window of remote batches alone keeps it. */
static void test_the_worker_rate_is_the_local_batches_alone(void **state)
{
	(void)state;
	static struct gm_ring_hdr h;
	struct gm_elastic_meter m = {0};
	struct timespec ts;
	double demand = -1, rate = -1;

	memset(&h, 0, sizeof(h));
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	m.t = now - 1000000000ull;
	atomic_store(&h.c_samples, 1000);
	atomic_store(&h.c_remote_samples, 600);
	atomic_store(&h.c_wait_ns, 200000000ull);
	atomic_store(&h.c_work_ns, 2000000000ull);
	assert_int_equal(gm_elastic_measure(&m, &h, 32, &demand, &rate), 1);
	assert_true(rate > 199 && rate < 201);
	m.t -= 1000000000ull; /* a second later: 1,000 more, every one remote */
	atomic_store(&h.c_samples, 2000);
	atomic_store(&h.c_remote_samples, 1600);
	atomic_store(&h.c_wait_ns, 400000000ull);
	rate = -1;
	assert_int_equal(gm_elastic_measure(&m, &h, 32, &demand, &rate), 1);
	assert_true(rate > 199 && rate < 201);
	assert_true(demand > 1000); /* the demand still measured */
	/* with no local rate ever measured: no estimate */
	memset(&h, 0, sizeof(h));
	m = (struct gm_elastic_meter){.t = now - 1000000000ull};
	atomic_store(&h.c_samples, 1000);
	atomic_store(&h.c_remote_samples, 1000);
	assert_int_equal(gm_elastic_measure(&m, &h, 32, &demand, &rate), 0);
}

static void test_demand_leaves_out_the_consumers_pauses_between_epochs(void **state)
{
	(void)state;
	double plain = demand_after(0, 0), ended = demand_after(600000000ull, 0);
	double going = demand_after(0, 600);
	/* 1,000 samples over 0.8 s of its own time; a pause of 0.6 s ended or going
	 * on: over 0.2 s (the clock moved on a little since the window's start) */
	assert_true(plain > 1200 && plain < 1251);
	assert_true(ended > 4000 && ended < 5001);
	assert_true(going > 4000 && going < 5001);
}

static void test_pause_begins_once_and_ends_into_the_count(void **state)
{
	(void)state;
	static struct gm_ring_hdr h;
	memset(&h, 0, sizeof(h));
	gm_elastic_pause(&h, 0); /* an end with none begun: nothing */
	assert_int_equal(atomic_load(&h.c_pause_ns), 0);
	gm_elastic_pause(&h, 1);
	uint64_t t0 = atomic_load(&h.c_pause_t0);
	assert_true(t0 > 0);
	gm_elastic_pause(&h, 1); /* a second begin keeps the first's time */
	assert_int_equal(atomic_load(&h.c_pause_t0), t0);
	struct timespec d = {0, 20000000};
	nanosleep(&d, NULL);
	gm_elastic_pause(&h, 0);
	assert_int_equal(atomic_load(&h.c_pause_t0), 0);
	assert_true(atomic_load(&h.c_pause_ns) >= 20000000ull);
}

/* Samples 2 remote workers landed by t ms, batches of 64 landing whole at
 * 2,800 img/s from 800 ms (asked at 300 ms, as bench-remote's home). */
static uint64_t landed_by(int64_t t)
{
	return t < 800 ? 0 : (uint64_t)((double)(t - 800) * 2.8 / 64) * 64;
}

/* The fed rule's remote delivery reads the workers' rate within
 * GM_ELASTIC_REMOTE_MS of their first batch (the home's windows from attach
 * read 560 img/s at 1 s and the rate only at 2 s), and local alone is what no
 * remote sample landed in. */
static void test_remote_delivery_is_measured_from_its_first_batch(void **state)
{
	(void)state;
	struct gm_elastic_remote m = {0};
	int64_t t = 100;
	for (; t <= 800; t += 100) { /* connected at 300, nothing landed yet */
		gm_elastic_remote_add(&m, 0, t >= 300 ? 2 : 0, 64, t);
		assert_true(m.rate == 0);
		assert_true(gm_elastic_remote_none(&m)); /* the local worker's alone */
	}
	for (; t <= 1400; t += 100) {
		gm_elastic_remote_add(&m, landed_by(t), 2, 64, t);
		assert_false(gm_elastic_remote_none(&m));
	}
	/* first batch at 823 ms: read by 1,400 ms (2,800 +- 10%) */
	assert_in_range((uint64_t)m.rate, 2520, 3080);
	/* they stop landing (the lender took them back): the ring may still hold
	 * their batches one measurement on; then the local workers' alone again */
	uint64_t all = landed_by(t - 100);
	gm_elastic_remote_add(&m, all, 2, 64, t);
	assert_false(gm_elastic_remote_none(&m));
	gm_elastic_remote_add(&m, all, 2, 64, t + 100);
	assert_true(gm_elastic_remote_none(&m));
	/* none connected: 0 at once */
	gm_elastic_remote_add(&m, all, 0, 64, t + 200);
	assert_true(m.rate == 0);
	/* one slow worker (a batch a second): a window closes within 1 s anyway */
	struct gm_elastic_remote s = {0};
	gm_elastic_remote_add(&s, 0, 1, 64, 0);
	for (int64_t k = 100; k <= 1200; k += 100)
		gm_elastic_remote_add(&s, (uint64_t)(k >= 200) * 64 + (uint64_t)(k >= 1200) * 64, 1,
				      64, k);
	assert_in_range((uint64_t)s.rate, 60, 140);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_demand_is_the_consumers_own_time_per_batch),
	    cmocka_unit_test(test_the_worker_rate_is_the_local_batches_alone),
	    cmocka_unit_test(test_demand_leaves_out_the_consumers_pauses_between_epochs),
	    cmocka_unit_test(test_pause_begins_once_and_ends_into_the_count),
	    cmocka_unit_test(test_remote_delivery_is_measured_from_its_first_batch),
	    cmocka_unit_test(test_divide_never_exceeds_the_budget),
	    cmocka_unit_test(test_grant_counts_retirees_and_serves_empty_jobs_first),
	    cmocka_unit_test(test_grant_shrinks_first_then_grows_into_freed_cpus),
	    cmocka_unit_test(test_grow_then_shrink),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
