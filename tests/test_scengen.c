/*
 * test_scengen.c - the seeded scenario family (sim/scengen.c) and `goldminer sim
 * --scenario-gen`: a seed gives the same bytes every time and different seeds
 * differ; every draw over many seeds stays in the ranges scengen.h states; every
 * generated file is valid input to gm_scenario_load and `goldminer sim
 * --scenario` and reads back to the values drawn; and lending never makes a job
 * slower than lending off in the simulator, on every generated seed.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "goldminer/scengen.h"
#include "testutil.h"

#define SEEDS 300 /* seeds the range and property checks draw (well under a second) */

static char dir[64];

static int setup(void **st)
{
	(void)st;
	return gm_test_tmpdir(dir, sizeof(dir), "gm-test-scengen");
}

static int teardown(void **st)
{
	(void)st;
	gm_test_rm_tree(dir);
	return 0;
}

static struct gm_scenario *make(uint64_t seed)
{
	struct gm_scenario *s = NULL;
	char err[256];
	int rc = gm_scengen_make(&s, seed, NULL, err, sizeof(err));
	if (rc)
		print_error("seed %llu: %s\n", (unsigned long long)seed, err);
	assert_int_equal(rc, 0);
	return s;
}

/* The file of seed into buf (its length). */
static size_t written(uint64_t seed, char *buf, size_t cap)
{
	struct gm_scenario *s = make(seed);
	FILE *f = fmemopen(buf, cap, "w");
	assert_non_null(f);
	assert_int_equal(gm_scengen_write(s, seed, f), 0);
	long n = ftell(f);
	fclose(f);
	gm_scenario_destroy(s);
	assert_true(n > 0 && (size_t)n < cap);
	return (size_t)n;
}

static void test_a_seed_gives_the_same_scenario_and_seeds_differ(void **st)
{
	(void)st;
	static char a[1 << 16], b[1 << 16];
	for (uint64_t seed = 1; seed <= 20; seed++) {
		size_t n = written(seed, a, sizeof(a));
		assert_int_equal(written(seed, b, sizeof(b)), n);
		assert_memory_equal(a, b, n);
		size_t m = written(seed + 1, b, sizeof(b));
		/* past the header comment, which names the seed */
		char *x = strstr(a, "\nnode"), *y = strstr(b, "\nnode");
		assert_true(m != n || strcmp(x, y));
	}
}

/* k * step within tol */
static bool on_grid(double x, double step)
{
	return fabs(x / step - round(x / step)) < 1e-9;
}

static void check_job(const struct gm_scenario *s, const struct gm_scen_job *j, uint32_t np)
{
	bool poor = j->home < np;
	double len = j->images / j->rate, epoch = GM_SCENGEN_EPOCH_IMAGES / j->rate;
	assert_true(on_grid(j->images, GM_SCENGEN_EPOCH_IMAGES) && j->images >= 1);
	assert_true(on_grid(j->rate, 128));
	assert_true(on_grid(j->submit, 0.5));
	assert_true(j->workers == 0 || j->workers == 4 || j->workers == 8 || j->workers == 16);
	assert_int_equal(j->name[0], poor ? 'p' : 'l');
	if (poor) {
		assert_in_range((uint64_t)j->rate, (uint64_t)GM_SCENGEN_RATE_MIN,
				(uint64_t)GM_SCENGEN_RATE_MAX);
		assert_true(j->submit <= GM_SCENGEN_FIRST_MAX_S +
					     (GM_SCENGEN_JOBS_MAX - 1) * GM_SCENGEN_GAP_MAX_S);
	} else {
		assert_in_range((uint64_t)j->rate, (uint64_t)GM_SCENGEN_OWN_RATE_MIN,
				(uint64_t)GM_SCENGEN_OWN_RATE_MAX);
	}
	/* a length in range, rounded to the nearest whole epoch (one at least) */
	double lo = poor ? GM_SCENGEN_LEN_MIN_S : GM_SCENGEN_OWN_LEN_MIN_S;
	double hi = poor ? GM_SCENGEN_LEN_MAX_S : GM_SCENGEN_OWN_LEN_MAX_S;
	assert_true(len <= hi + epoch / 2 + 1e-9);
	assert_true(len >= lo - epoch / 2 - 1e-9 || j->images == GM_SCENGEN_EPOCH_IMAGES);
	(void)s;
}

static void test_draws_stay_in_the_stated_ranges(void **st)
{
	(void)st;
	uint32_t seen_poor[GM_SCENGEN_POOR_MAX + 1] = {0}, autos = 0, named = 0;
	for (uint64_t seed = 0; seed < SEEDS; seed++) {
		struct gm_scenario *s = make(seed);
		uint32_t np = s->nnodes - GM_SCENGEN_LENDERS, per[GM_SCENGEN_POOR_MAX] = {0};
		double total = 0;
		assert_in_range(np, GM_SCENGEN_POOR_MIN, GM_SCENGEN_POOR_MAX);
		seen_poor[np]++;
		for (uint32_t k = 0; k < s->nnodes; k++) {
			double c = s->node[k].cores;
			assert_true(on_grid(c, 0.05));
			assert_int_equal(s->node[k].name[0], k < np ? 'P' : 'L');
			if (k < np)
				assert_true(c >= GM_SCENGEN_POOR_CORES_MIN - 1e-9 &&
					    c <= GM_SCENGEN_POOR_CORES_MAX + 1e-9);
			else
				assert_true(c >= GM_SCENGEN_LEND_CORES_MIN - 1e-9 &&
					    c <= GM_SCENGEN_LEND_CORES_MAX + 1e-9);
			total += c;
		}
		assert_true(total <= GM_SCENGEN_TOTAL_CORES + 1e-9);
		for (size_t k = 0; k < s->njobs; k++) {
			check_job(s, &s->job[k], np);
			if (k)
				assert_true(s->job[k].submit >= s->job[k - 1].submit);
			if (s->job[k].home < np)
				per[s->job[k].home]++;
			if (s->job[k].home < np)
				s->job[k].workers ? named++ : autos++;
		}
		for (uint32_t h = 0; h < np; h++)
			assert_in_range(per[h], GM_SCENGEN_JOBS_MIN, GM_SCENGEN_JOBS_MAX);
		gm_scenario_destroy(s);
	}
	/* every count of poor hosts occurs; most jobs name their workers */
	for (uint32_t n = GM_SCENGEN_POOR_MIN; n <= GM_SCENGEN_POOR_MAX; n++)
		assert_true(seen_poor[n] > SEEDS / 6);
	assert_true(autos > 0 && named > 2 * autos);
}

/* Each lender's own demand rises and falls: its jobs' summed rate over time
 * takes at least two different values above zero, and zero in some seeds. */
static void test_lenders_own_demand_rises_and_falls(void **st)
{
	(void)st;
	uint32_t varied = 0, paused = 0, lenders = 0;
	for (uint64_t seed = 0; seed < SEEDS; seed++) {
		struct gm_scenario *s = make(seed);
		for (uint32_t l = s->nnodes - GM_SCENGEN_LENDERS; l < s->nnodes; l++) {
			double lo = INFINITY, hi = 0, prev_end = 0;
			bool gap = false;
			for (size_t k = 0; k < s->njobs; k++) {
				const struct gm_scen_job *j = &s->job[k];
				if (j->home != l)
					continue;
				lo = fmin(lo, j->rate);
				hi = fmax(hi, j->rate);
				gap |= j->submit > prev_end + 1e-9;
				prev_end = j->submit + j->images / j->rate;
			}
			assert_true(hi > 0); /* every lender has jobs of its own */
			lenders++;
			varied += hi > lo;
			paused += gap;
		}
		gm_scenario_destroy(s);
	}
	assert_true(varied > lenders * 3 / 4);
	assert_true(paused > lenders / 2);
}

/* Every generated file loads back to the values drawn, and `goldminer sim
 * --scenario` runs it both ways. */
static void test_every_generated_scenario_is_valid_simulator_input(void **st)
{
	(void)st;
	char path[128], out[128], seedtxt[24], err[512];
	for (uint64_t seed = 1; seed <= 40; seed++) {
		struct gm_scenario *s = make(seed), *t = NULL;
		snprintf(path, sizeof(path), "%s/s%llu.tsv", dir, (unsigned long long)seed);
		snprintf(seedtxt, sizeof(seedtxt), "%llu", (unsigned long long)seed);
		char *argv[] = {"sim", "--scenario-gen", seedtxt, "--out", path, NULL};
		assert_int_equal(gm_cmd_sim(5, argv), 0);
		int rc = gm_scenario_load(&t, path, err, sizeof(err));
		if (rc)
			print_error("%s\n", err);
		assert_int_equal(rc, 0);
		assert_int_equal(t->nnodes, s->nnodes);
		assert_int_equal(t->njobs, s->njobs);
		for (uint32_t k = 0; k < s->nnodes; k++) {
			assert_string_equal(t->node[k].name, s->node[k].name);
			assert_true(t->node[k].cores == s->node[k].cores);
			assert_int_equal(t->node[k].workers, s->node[k].workers);
		}
		for (size_t k = 0; k < s->njobs; k++) {
			assert_string_equal(t->job[k].name, s->job[k].name);
			assert_int_equal(t->job[k].home, s->job[k].home);
			assert_true(t->job[k].submit == s->job[k].submit);
			assert_true(t->job[k].images == s->job[k].images);
			assert_true(t->job[k].rate == s->job[k].rate);
			assert_int_equal(t->job[k].workers, s->job[k].workers);
		}
		assert_true(fabs(t->local_cpu / s->local_cpu - 1) < 1e-12);
		assert_true(fabs(t->remote_home_cpu / s->remote_home_cpu - 1) < 1e-12);
		assert_true(fabs(t->remote_lender_cpu / s->remote_lender_cpu - 1) < 1e-12);
		assert_true(t->worker_rate == s->worker_rate && t->start_s == s->start_s);
		if (seed <= 3) { /* the command line too, both ways */
			snprintf(out, sizeof(out), "%s/o%llu", dir, (unsigned long long)seed);
			char *av[] = {"sim", "--scenario", path, "--out", out, NULL};
			assert_int_equal(gm_cmd_sim(5, av), 0);
		}
		gm_scenario_destroy(t);
		gm_scenario_destroy(s);
	}
	/* usage errors: no seed, a bad seed, a trace replay's option, --epoch-images alone */
	char *bad1[] = {"sim", "--scenario-gen", "x1", NULL};
	char *bad2[] = {"sim", "--scenario-gen", "1", "--policy", "static", NULL};
	char *bad3[] = {"sim", "--epoch-images", "100", NULL};
	char *bad4[] = {"sim", "--scenario-gen", "1", "--epoch-images", "0", NULL};
	assert_int_equal(gm_cmd_sim(3, bad1), 2);
	assert_int_equal(gm_cmd_sim(5, bad2), 2);
	assert_int_equal(gm_cmd_sim(3, bad3), 2);
	assert_int_equal(gm_cmd_sim(5, bad4), 2);
}

/*
 * The controller's first rule: lending never makes a job slower than lending
 * off. On every generated seed, each job's simulated JCT with lending on is at
 * most its JCT off, within 1% + 0.05 s (the fluid model's rounding of event
 * times; a violation the rule allows is a job of its own host slowed by a
 * guest, or a home that stops its own workers for less from its peers).
 */
#define LEND_TOL_REL 0.01
#define LEND_TOL_S   0.05

/* Every seed's cluster can feed its poor hosts' GPUs throughout, each host at
 * the share of its cores the draw allows (gm_scenario_feedable); and the
 * family keeps its variety: one, two and three poor hosts all drawn. */
static void test_every_seed_can_feed_its_poor_hosts(void **st)
{
	(void)st;
	unsigned hosts[GM_SCENGEN_POOR_MAX + 1] = {0};
	for (uint64_t seed = 1; seed <= SEEDS; seed++) {
		struct gm_scenario *s = make(seed);
		double f = gm_scenario_feedable(s, GM_SCENGEN_FEED_SHARE);
		if (f < 1 - 1e-9)
			fail_msg("seed %llu: its CPUs feed %.3f of its poor hosts' demand",
				 (unsigned long long)seed, f);
		hosts[s->nnodes - GM_SCENGEN_LENDERS]++;
		gm_scenario_destroy(s);
	}
	for (unsigned n = GM_SCENGEN_POOR_MIN; n <= GM_SCENGEN_POOR_MAX; n++)
		assert_true(hosts[n] >= SEEDS / 6);
}

static void test_lending_is_never_slower_on_any_generated_seed(void **st)
{
	(void)st;
	char err[256];
	for (uint64_t seed = 0; seed < SEEDS; seed++) {
		struct gm_scenario *s = make(seed);
		struct gm_scen_result *off = calloc(s->njobs, sizeof(*off));
		struct gm_scen_result *on = calloc(s->njobs, sizeof(*on));
		struct gm_scen_summary so, sn;
		assert_non_null(off);
		assert_non_null(on);
		assert_int_equal(gm_scenario_run(s, 0, off, &so, err, sizeof(err)), 0);
		assert_int_equal(gm_scenario_run(s, 1, on, &sn, err, sizeof(err)), 0);
		for (size_t k = 0; k < s->njobs; k++) {
			if (on[k].jct <= off[k].jct * (1 + LEND_TOL_REL) + LEND_TOL_S)
				continue;
			print_error("seed %llu: job %s on %s: %.3f s with lending on, %.3f s off\n",
				    (unsigned long long)seed, s->job[k].name,
				    s->node[s->job[k].home].name, on[k].jct, off[k].jct);
			fail();
		}
		free(off);
		free(on);
		gm_scenario_destroy(s);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_a_seed_gives_the_same_scenario_and_seeds_differ),
	    cmocka_unit_test(test_draws_stay_in_the_stated_ranges),
	    cmocka_unit_test(test_lenders_own_demand_rises_and_falls),
	    cmocka_unit_test(test_every_generated_scenario_is_valid_simulator_input),
	    cmocka_unit_test(test_every_seed_can_feed_its_poor_hosts),
	    cmocka_unit_test(test_lending_is_never_slower_on_any_generated_seed),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
