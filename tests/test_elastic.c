/*
 * test_elastic.c - workers = auto: the node's controller measures the consumer's
 * demand and one worker's rate and sizes the pool through the shared policy
 * (core/policy.c). A greedy consumer grows the pool to the CPU budget; a slow one
 * (a trainer whose GPU step takes 40 ms) shrinks it to the one worker that keeps
 * its stall low. Assertions are on the pool size reached, with generous deadlines.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_grow_then_shrink),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
