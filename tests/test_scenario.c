/*
 * test_scenario.c - the host-level scenario simulator (sim/scenario.c) and
 * `goldminer sim --scenario`: the committed scenarios load, every loader error
 * names its file and line, hand-computed fluid cases (a fractional core, max-min
 * shares, lending with an ample and a scarce pool), the utilisation figure
 * against the run's own JCTs, lending never slowing a job, range checks, the
 * command line; and the committed measured figures of the short cluster
 * experiment against the simulator.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "goldminer/elastic.h"
#include "goldminer/scenario.h"
#include "testutil.h"

static char dir[64];

static int setup(void **st)
{
	(void)st;
	return gm_test_tmpdir(dir, sizeof(dir), "gm-test-scenario");
}

static int teardown(void **st)
{
	(void)st;
	gm_test_rm_tree(dir);
	return 0;
}

/* Write text to dir/name; the path (one of four static buffers). */
static const char *put(const char *name, const char *text)
{
	static char p[4][256];
	static int k;
	k = (k + 1) % 4;
	snprintf(p[k], sizeof(p[k]), "%s/%s", dir, name);
	assert_int_equal(gm_test_put(dir, name, text), 0);
	return p[k];
}

#define HEAD  "# goldminer-scenario v1\n"
#define COSTS "cost\tlocal_us\t400\ncost\tremote_home_us\t100\ncost\tremote_lender_us\t400\n"
/* A lender's own new job is fresh for its first window: start_s (0 in COSTS)
 * and a tick (sim/scenario.c, SCEN_FRESH_S). */
#define FRESH (GM_ELASTIC_TICK_MS / 1e3)

static struct gm_scenario *load(const char *text)
{
	struct gm_scenario *s = NULL;
	char err[512];
	int rc = gm_scenario_load(&s, put("s.tsv", text), err, sizeof(err));
	if (rc)
		fail_msg("load: %s", err);
	return s;
}

/* Run s; res must hold s->njobs. */
static void run(const struct gm_scenario *s, int lending, struct gm_scen_result *res,
		struct gm_scen_summary *m)
{
	char err[512];
	int rc = gm_scenario_run(s, lending, res, m, err, sizeof(err));
	if (rc)
		fail_msg("run: %s", err);
}

static void test_committed_scenarios_load(void **st)
{
	(void)st;
	const char *files[4] = {"traces/cluster.tsv", "traces/cluster-short.tsv",
				"traces/cluster-unseen-1.tsv", "traces/cluster-unseen-2.tsv"};
	for (int f = 0; f < 4; f++) {
		struct gm_scenario *s = NULL;
		char err[512];
		assert_int_equal(gm_scenario_load(&s, files[f], err, sizeof(err)), 0);
		assert_int_equal(s->nnodes, f == 3 ? 4 : 3);
		assert_string_equal(s->node[0].name, "A");
		assert_true(s->node[0].cores == 0.25);
		if (f == 3) /* A 0.25, D 0.2, lenders of 0.65: unseen-2 */
			assert_true(s->node[1].cores == 0.2 && s->node[2].cores == 0.65 &&
				    s->node[3].cores == 0.65);
		else
			assert_true(s->node[1].cores == 0.75 && s->node[2].cores == 0.75);
		for (size_t k = 1; k < s->njobs; k++)
			assert_true(s->job[k].submit >= s->job[k - 1].submit);
		assert_true(s->local_cpu > 0 && s->remote_home_cpu > 0 && s->remote_lender_cpu > 0);
		gm_scenario_destroy(s);
	}
}

static void test_load_errors_name_file_and_line(void **st)
{
	(void)st;
	static const struct {
		const char *text, *want;
	} cases[] = {
	    {"node\tA\t1\n", ":1: not a scenario"},
	    {HEAD "host\tA\t1\n", ":2: unknown keyword"},
	    {HEAD "node\tA\n", ":2: want node"},
	    {HEAD "node\tA\t0\n", ":2: cores must be"},
	    {HEAD "node\tA\tx\n", ":2: cores must be"},
	    {HEAD "node\tA\t1e6\n", ":2: cores must be"},
	    {HEAD "node\tA\t1\t0\n", ":2: workers (the agent's worker budget)"},
	    {HEAD "node\tA\t1\t1.5\n", ":2: workers (the agent's worker budget)"},
	    {HEAD "node\tA\t1\t2\t3\n", ":2: want node"},
	    {HEAD "node\tA\t1\ncost\tremote_worker_img_s\t0\n", ":3: remote_worker_img_s must"},
	    {HEAD "node\tA\t1\ncost\tstart_s\t-1\n", ":3: start_s must be"},
	    {HEAD "node\tA\t1\ncost\tstart_s\t4000\n", ":3: start_s must be"},
	    {HEAD "node\tA\t1\ncost\tstart_s\t1\ncost\tstart_s\t1\n", ":4: this cost is given"},
	    {HEAD "node\tA\t1\ncost\tremote_start_s\t-0.5\n", ":3: remote_start_s must be"},
	    {HEAD "node\tA\t1\ncost\tjob_cpu_s\t-1\n", ":3: job_cpu_s must be"},
	    {HEAD "node\tA\t1\ncost\tjob_cpu_s\tx\n", ":3: job_cpu_s must be"},
	    {HEAD "node\tA\t1\ncost\tjob_cpu_s\t1\ncost\tjob_cpu_s\t1\n", ":4: this cost is given"},
	    {HEAD "node\tA\t1\ncost\tlead_cpu_s\t-0.1\n", ":3: lead_cpu_s must be"},
	    {HEAD "node\tA\t1\ncost\tlead_cpu_s\tnan\n", ":3: lead_cpu_s must be"},
	    {HEAD "node\tA\t1\ncost\tlead_cpu_s\t0\ncost\tlead_cpu_s\t1\n",
	     ":4: this cost is given"},
	    {HEAD "node\tA\t1\ncost\tremote_start_s\t1\ncost\tremote_start_s\t2\n",
	     ":4: this cost is given"},
	    {HEAD "node\tA\t1\ncost\tremote_worker_img_s\t1\ncost\tremote_worker_img_s\t1\n",
	     ":4: this cost is given"},
	    {HEAD "node\tA\t1\nnode\tA\t1\n", ":3: node name"},
	    {HEAD "node\t\t1\n", ":2: node name"},
	    {HEAD "node\tA B\t1\n", ":2: node name"},
	    {HEAD "node\tA\t1\njob\tj\tA\t0\t10\t1\nnode\tB\t1\n", ":4: nodes come before"},
	    {HEAD "node\tA\t1\njob\tj\tA\t0\t10\n", ":3: want job"},
	    {HEAD "node\tA\t1\njob\tj\tB\t0\t10\t1\n", ":3: its home is not a node"},
	    {HEAD "node\tA\t1\njob\tj\tA\t-1\t10\t1\n", ":3: submit must be"},
	    {HEAD "node\tA\t1\njob\tj\tA\t0\t0\t1\n", ":3: images must be"},
	    {HEAD "node\tA\t1\njob\tj\tA\t0\t10\t0.0001\n", ":3: rate must be"},
	    {HEAD "node\tA\t1\njob\tj\tA\t0\t10\t1\njob\tj\tA\t0\t10\t1\n", ":4: job name"},
	    {HEAD "node\tA\t1\njob\tj\tA\t0\t10\t1\tx\ty\tz\tw\n", ":3: want job"},
	    {HEAD "node\tA\t1\ncost\tlocal_us\t0\n", ":3: a cost must be"},
	    {HEAD "node\tA\t1\ncost\tlocal_us\n", ":3: want cost"},
	    {HEAD "node\tA\t1\ncost\tdecode_us\t1\n", ":3: unknown cost"},
	    {HEAD "node\tA\t1\ncost\tlocal_us\t1\ncost\tlocal_us\t1\n", ":4: this cost is given"},
	    {HEAD "node\tA\t1\njob\tj\tA\t0\t10\t1\ncost\tlocal_us\t1\n", ":4: the three costs"},
	    {HEAD COSTS, ": no node or no job"},
	    {"", ":0: no node or no job"},
	};
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		struct gm_scenario *s = NULL;
		char err[512] = "";
		const char *p = put("bad.tsv", cases[k].text);
		assert_int_equal(gm_scenario_load(&s, p, err, sizeof(err)), -EBADMSG);
		assert_null(s);
		assert_non_null(strstr(err, p));
		if (!strstr(err, cases[k].want))
			fail_msg("case %zu: '%s' does not say '%s'", k, err, cases[k].want);
	}
	/* 65 nodes */
	char big[4096] = HEAD;
	for (int i = 0; i < 65; i++)
		snprintf(big + strlen(big), sizeof(big) - strlen(big), "node\tn%d\t1\n", i);
	struct gm_scenario *s = NULL;
	char err[512];
	assert_int_equal(gm_scenario_load(&s, put("big.tsv", big), err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, ":66: more than 64 nodes"));
	/* 10,001 jobs */
	size_t cap = 64 + (GM_SCEN_MAX_JOBS + 1) * 32, n = 0;
	char *many = malloc(cap);
	assert_non_null(many);
	n += (size_t)snprintf(many, cap, HEAD "node\tA\t1\n");
	for (int i = 0; i <= GM_SCEN_MAX_JOBS; i++)
		n += (size_t)snprintf(many + n, cap - n, "job\tj%d\tA\t0\t10\t1\n", i);
	assert_int_equal(gm_scenario_load(&s, put("many.tsv", many), err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "more than 10000 jobs"));
	free(many);
	assert_int_equal(gm_scenario_load(&s, "/nonexistent/s.tsv", err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "/nonexistent/s.tsv"));
}

/* One greedy job alone on a quarter core: 0.25 / 400 us = 625 img/s. */
static void test_a_fractional_core_runs_at_its_share(void **st)
{
	(void)st;
	struct gm_scenario *s = load(HEAD "node\tA\t0.25\njob\tg\tA\t5\t6250\t0\n" COSTS);
	struct gm_scen_result res[1];
	struct gm_scen_summary m;
	for (int lend = 0; lend < 2; lend++) {
		run(s, lend, res, &m);
		assert_float_equal(res[0].jct, 10.0, 1e-9);
		assert_float_equal(res[0].end, 15.0, 1e-9);
		assert_float_equal(res[0].remote, 0, 0);
		assert_float_equal(m.gpu_util, 0, 0); /* a greedy job demands no rate */
	}
	gm_scenario_destroy(s);
}

/*
 * One core at 1000 us per image (1000 img/s): a 300 img/s job gets its 0.3 core,
 * a greedy one the other 0.7 (700 img/s) until the first ends at 10 s, then the
 * whole core: 8000 images = 7000 + 1000 at 1000 img/s, so 11 s. Two 600 img/s jobs
 * on another core get 0.5 each: 500 img/s, 5000 images in 10 s.
 */
static void test_cores_are_shared_max_min(void **st)
{
	(void)st;
	struct gm_scenario *s = load(
	    HEAD "node\tA\t1\nnode\tB\t1\n"
		 "job\tr\tA\t0\t3000\t300\njob\tg\tA\t0\t8000\t0\n"
		 "job\tp\tB\t0\t5000\t600\njob\tq\tB\t0\t5000\t600\n"
		 "cost\tlocal_us\t1000\ncost\tremote_home_us\t100\ncost\tremote_lender_us\t1000\n");
	struct gm_scen_result res[4];
	struct gm_scen_summary m;
	run(s, 0, res, &m);
	assert_float_equal(res[0].jct, 10.0, 1e-9);
	assert_float_equal(res[1].jct, 11.0, 1e-9);
	assert_float_equal(res[2].jct, 10.0, 1e-9);
	assert_float_equal(res[3].jct, 10.0, 1e-9);
	/* bounds 10, -, 25/3, 25/3 over JCTs 10 + 10 + 10 */
	assert_float_equal(m.gpu_util, (10 + 2 * 5000.0 / 600) / 30, 1e-12);
	gm_scenario_destroy(s);
}

/*
 * A at 0.25 core, a job there at 1000 img/s (alone: 625). B has 1 core, a budget
 * of 4 workers and its own 1500 img/s job (0.6 core): the pool is 0.4 / 400 us =
 * 1000 img/s. On a home below one core the job takes all its images remotely:
 * its home spends 0.1 core receiving 1000 img/s, so 10,000 images in 10 s (16 s
 * lending off), all remote, when it comes 3 s after B's job. B's job: 10 s
 * either way. Both at 0 s, B lends nothing while its own job is fresh (FRESH,
 * its first window: start_s 0 and a tick; gm_policy_lend_next lends no more
 * meanwhile): A's job makes 625 img/s alone until then, 156.25 images, and
 * the rest remote: 10.094 s. B's second job, 100 img/s for 5 s from 5 s, is
 * fresh until 5.25 s: B keeps A's worker but paces it to a quarter of the
 * 0.36 core idle (gm_policy_fresh_guest_cores: 0.09 core, 225 img/s), so A runs
 * its local worker beside it (225 + (0.25 - 225 x 100 us) / 400 us = 793.75
 * img/s); then B's 0.36 idle core sends A 900 img/s to 10 s, and 1,000 after:
 * 10.62 s (lending nothing for 2.25 s from b2's start, as the model did
 * before, A's own 625 img/s until its worker was granted again).
 */
static void test_lending_with_an_ample_pool(void **st)
{
	(void)st;
	struct gm_scenario *s =
	    load(HEAD "node\tA\t0.25\nnode\tB\t1\t4\n"
		      "job\ta\tA\t3\t10000\t1000\njob\tb\tB\t0\t15000\t1500\n" COSTS);
	struct gm_scen_result res[2];
	struct gm_scen_summary m;
	assert_string_equal(s->job[0].name, "b"); /* sorted by submit */
	run(s, 0, res, &m);
	assert_float_equal(res[1].jct, 16.0, 1e-9);
	assert_float_equal(res[0].jct, 10.0, 1e-9);
	run(s, 1, res, &m);
	assert_float_equal(res[1].jct, 10.0, 1e-9);
	assert_float_equal(res[1].remote, 10000, 1e-6);
	assert_float_equal(res[0].jct, 10.0, 1e-9);
	assert_float_equal(m.remote_images, 10000, 1e-6);
	assert_float_equal(m.gpu_util, 1.0, 1e-12);
	gm_scenario_destroy(s);
	s = load(HEAD "node\tA\t0.25\nnode\tB\t1\t4\n"
		      "job\ta\tA\t0\t10000\t1000\njob\tb\tB\t0\t15000\t1500\n" COSTS);
	run(s, 1, res, &m);
	assert_float_equal(res[0].jct, FRESH + (10000 - FRESH * 625) / 1000, 1e-9);
	assert_float_equal(res[0].remote, 10000 - FRESH * 625, 1e-6);
	assert_float_equal(res[1].jct, 10.0, 1e-9);
	gm_scenario_destroy(s);
	s = load(HEAD "node\tA\t0.25\nnode\tB\t1\t4\n"
		      "job\ta\tA\t0\t10000\t1000\njob\tb\tB\t0\t15000\t1500\n"
		      "job\tb2\tB\t5\t500\t100\n" COSTS);
	struct gm_scen_result r3[3];
	run(s, 1, r3, &m);
	double done = FRESH * 625 + (5 - FRESH) * 1000 + FRESH * 793.75 + (5 - FRESH) * 900;
	assert_float_equal(r3[0].jct, 10 + (10000 - done) / 1000, 1e-9);
	assert_float_equal(r3[1].jct, 10.0, 1e-9);
	assert_float_equal(r3[2].jct, 5.0, 1e-9);
	gm_scenario_destroy(s);
}

/*
 * A's home is below a core: once remote workers feed its job measurably more
 * than its local worker alone (625 img/s) it runs no local worker (as the
 * agent), never before. B's own job takes 0.9 core: B keeps 0.1 core idle,
 * under a quarter, and lends nothing (the old rule lent its free budget, a
 * pool of 250 img/s, and A's job, fed by it alone, ran 17.5 s against 16
 * off); A's job runs alone at 625 img/s until B's job ends at 10 s, then at
 * 1000 img/s all remote: 3,750 more in 3.75 s. With B's job at 0.75 core, B
 * lends its idle quarter, 625 img/s, no more than A's own worker: A keeps its
 * worker and takes the 625 beside it (625 + (0.25 - 625 x 100 us) / 400 us >
 * 1000 img/s, its rate) once B lends, once its own job is no longer fresh
 * (FRESH: 625 img/s alone until then): 10.094 s. Lending off: 16 s.
 */
static void test_a_sub_core_home_keeps_its_local_worker_until_remote_ones_deliver_more(void **st)
{
	(void)st;
	struct gm_scenario *s =
	    load(HEAD "node\tA\t0.25\nnode\tB\t1\t4\n"
		      "job\ta\tA\t0\t10000\t1000\njob\tb\tB\t0\t22500\t2250\n" COSTS);
	struct gm_scen_result res[2];
	struct gm_scen_summary m;
	run(s, 1, res, &m);
	assert_float_equal(res[1].jct, 10.0, 1e-9);
	assert_float_equal(res[0].jct, 13.75, 1e-9);
	assert_float_equal(res[0].remote, 3750, 1e-6);
	run(s, 0, res, &m);
	assert_float_equal(res[0].jct, 16.0, 1e-9);
	gm_scenario_destroy(s);
	s = load(HEAD "node\tA\t0.25\nnode\tB\t1\t4\n"
		      "job\ta\tA\t0\t10000\t1000\njob\tb\tB\t0\t18750\t1875\n" COSTS);
	run(s, 1, res, &m);
	assert_float_equal(res[1].jct, 10.0, 1e-9);
	assert_float_equal(res[0].jct, FRESH + (10000 - FRESH * 625) / 1000, 1e-9);
	run(s, 0, res, &m);
	assert_float_equal(res[0].jct, 16.0, 1e-9);
	gm_scenario_destroy(s);
}

/*
 * Two CPU-poor hosts: A (0.25 core) runs a job, D (0.2 core) none. D's free
 * worker budget is one worker, but it has less than a quarter core to give:
 * it lends nothing (the old rule lent that worker, A's job was fed by its
 * 500 img/s alone and ran 20 s against 16 with lending off). Lending on or
 * off: 16 s, nothing remote.
 */
/*
 * What the CPUs can feed, by hand (costs 400 / 100 / 400 us): P of 0.2 core makes
 * 500 img/s of p's 1,000 itself; receiving x remote images leaves (0.2 - x 100
 * us) / 400 us local, so 1,000 needs x = (0.4 - 0.2) / 300 us = 666.7 remote.
 * L's 1 core lends 2,500 img/s alone: fed. Beside its own 2,250 img/s job (0.9
 * core) it lends 250: 500 + 250 x 0.75 = 687.5 of 1,000. At half of every host's
 * cores: P makes 250 and L's own job takes all of L's half: 0.25.
 */
static void test_feedable_by_hand(void **st)
{
	(void)st;
	struct gm_scenario *s = load(HEAD "node\tP\t0.2\nnode\tL\t1\n"
					  "job\tp\tP\t0\t10000\t1000\n" COSTS);
	assert_float_equal(gm_scenario_feedable(s, 1), 1, 1e-12);
	assert_float_equal(gm_scenario_feedable(s, 0.5), 1, 1e-12);
	gm_scenario_destroy(s);
	s = load(HEAD "node\tP\t0.2\nnode\tL\t1\njob\tp\tP\t0\t10000\t1000\n"
		      "job\tl\tL\t5\t22500\t2250\n" COSTS);
	assert_float_equal(gm_scenario_feedable(s, 1), 0.6875, 1e-12);
	assert_float_equal(gm_scenario_feedable(s, 0.5), 0.25, 1e-12);
	assert_float_equal(gm_scenario_feedable(s, 7), 0.6875, 1e-12); /* out of range: 1 */
	gm_scenario_destroy(s);
	/* receiving as dear as decoding: remote images gain nothing */
	s = load(HEAD "node\tP\t0.2\nnode\tL\t1\njob\tp\tP\t0\t10000\t1000\n"
		      "cost\tlocal_us\t400\ncost\tremote_home_us\t400\n"
		      "cost\tremote_lender_us\t400\n");
	assert_float_equal(gm_scenario_feedable(s, 1), 0.5, 1e-12);
	gm_scenario_destroy(s);
	/* no poor host: nothing to feed */
	s = load(HEAD "node\tL\t1\njob\tl\tL\t0\t22500\t2250\n" COSTS);
	assert_float_equal(gm_scenario_feedable(s, 1), 1, 1e-12);
	gm_scenario_destroy(s);
}

static void test_a_poor_host_lends_to_no_one(void **st)
{
	(void)st;
	struct gm_scenario *s = load(HEAD "node\tA\t0.25\nnode\tD\t0.2\n"
					  "job\ta\tA\t0\t10000\t1000\n" COSTS);
	struct gm_scen_result res[1];
	struct gm_scen_summary m;
	run(s, 1, res, &m);
	assert_float_equal(res[0].jct, 16.0, 1e-9);
	assert_float_equal(res[0].remote, 0, 1e-9);
	run(s, 0, res, &m);
	assert_float_equal(res[0].jct, 16.0, 1e-9);
	gm_scenario_destroy(s);
}

/*
 * A home of 0.75 core, at or above GM_NODE_FED_CORES, keeps its local worker when
 * remote ones feed its job: 1,875 img/s alone (0.75 / 400 us), short of 3,000.
 * B lends 2 workers of 1,000 img/s; the job wants m* = (3000 x 400 - 750000) /
 * (400 - 100) = 1,500 remote, gets them, and decodes (0.75 - 0.15) / 400 us =
 * 1,500 itself: 3,000 img/s, 10,000 images in 3.333 s. Dropping its local worker
 * (the rule below half a core) it would run at the 2,000 of its two workers.
 */
static void test_a_home_of_half_a_core_or_more_keeps_its_local_worker(void **st)
{
	(void)st;
	struct gm_scenario *s =
	    load(HEAD "node\tA\t0.75\nnode\tB\t2\n"
		      "job\ta\tA\t0\t10000\t3000\n" COSTS "cost\tremote_worker_img_s\t1000\n");
	struct gm_scen_result res[1];
	struct gm_scen_summary m;
	run(s, 0, res, &m);
	assert_float_equal(res[0].jct, 10000 / 1875.0, 1e-6);
	run(s, 1, res, &m);
	assert_float_equal(res[0].jct, 10000 / 3000.0, 1e-6);
	assert_float_equal(res[0].remote, 5000, 1e-3);
	gm_scenario_destroy(s);
}

/*
 * A home of a core (2,500 img/s at 400 us) and a job at 3,000 img/s. B's worker
 * budget (default ceil(1 core) = 1) is its own job's, but that job (300 img/s)
 * needs 0.12 of B's core: the 0.88 idle lend a worker all the same (the agent's
 * rule, gm_policy_lendable). The job wants m* = (3000 x 400 - 1e6) / (400 -
 * 100) = 667 remote and gets them: 667 + (1 - 0.0667) / 400 us = 3,000 img/s,
 * once B lends, when its own job is no longer fresh (FRESH: 2,500 img/s alone
 * until then): 27,250 images in 9.125 s. When B's own job takes 0.8 of its core (2,000 img/s)
 * the 0.2 left is under a quarter core: B lends nothing and the job runs at
 * 2,500 img/s, 10.9 s. With a budget of 2, lent workers that send at most
 * 300 img/s, and B's own job at 1,400 img/s (0.56 core: 0.44 idle), B lends
 * two workers (one per idle quarter core begun; one per idle core begun lent
 * one), so it gets 600 and decodes (1 - 0.06) / 400 us = 2,350 itself: 2,950
 * img/s once B lends, 27,250 images in 9.275 s.
 */
static void test_lending_is_capped_by_the_idle_cores_and_the_budget(void **st)
{
	(void)st;
	struct gm_scenario *s =
	    load(HEAD "node\tA\t1\nnode\tB\t1\n"
		      "job\ta\tA\t0\t27250\t3000\njob\tb\tB\t0\t30000\t300\n" COSTS);
	struct gm_scen_result res[2];
	struct gm_scen_summary m;
	assert_int_equal(s->node[1].workers, 1);
	run(s, 1, res, &m);
	const double lent_s = (27250.0 - FRESH * 2500) / 3000;
	assert_float_equal(res[0].jct, FRESH + lent_s, 1e-6);
	assert_float_equal(res[0].remote, lent_s * 2000 / 3, 1e-3);
	gm_scenario_destroy(s);
	s = load(HEAD "node\tA\t1\nnode\tB\t1\n"
		      "job\ta\tA\t0\t27250\t3000\njob\tb\tB\t0\t30000\t2000\n" COSTS);
	run(s, 1, res, &m);
	assert_float_equal(res[0].jct, 10.9, 1e-9);
	assert_float_equal(m.remote_images, 0, 0);
	gm_scenario_destroy(s);
	s = load(HEAD "node\tA\t1\nnode\tB\t1\t2\n"
		      "job\ta\tA\t0\t27250\t3000\njob\tb\tB\t0\t30000\t1400\n" COSTS
		      "cost\tremote_worker_img_s\t300\n");
	run(s, 1, res, &m);
	assert_float_equal(res[0].jct, FRESH + (27250.0 - FRESH * 2500) / 2950, 1e-9);
	assert_float_equal(res[0].remote, 600 * (27250.0 - FRESH * 2500) / 2950, 1e-6);
	gm_scenario_destroy(s);
}

/*
 * A lent worker serves one job, and a home's jobs get a worker each before any
 * gets a second (gm_policy_home_share). Two 600 img/s jobs on a quarter core
 * (312.5 img/s each alone: 6,000 images in 19.2 s); B, half a core, lends 2
 * workers of 300 img/s (one per idle quarter core): one each. 300 is not measurably more than a
 * job's 312.5 alone, so each keeps its local worker: 0.125 core each, 0.03 of it receiving, 237.5
 * img/s decoded: 537.5 img/s, 11.163 s both. (First come, first served, the
 * first took both, ended at 10 s, and the second, paced beside it, at 13.229.)
 */
static void test_lent_workers_are_divided_between_a_homes_jobs(void **st)
{
	(void)st;
	struct gm_scenario *s = load(HEAD "node\tA\t0.25\nnode\tB\t0.5\n"
					  "job\ta\tA\t0\t6000\t600\njob\tb\tA\t0\t6000\t600\n" COSTS
					  "cost\tremote_worker_img_s\t300\n");
	struct gm_scen_result res[2];
	struct gm_scen_summary m;
	run(s, 0, res, &m);
	assert_float_equal(res[0].jct, 19.2, 1e-9);
	assert_float_equal(res[1].jct, 19.2, 1e-9);
	run(s, 1, res, &m);
	for (int k = 0; k < 2; k++) {
		assert_float_equal(res[k].jct, 6000 / 537.5, 1e-9);
		assert_float_equal(res[k].remote, 300 * 6000 / 537.5, 1e-6);
	}
	gm_scenario_destroy(s);
}

/*
 * A lent worker takes of its lender's idle cores what its job wants, and the
 * rest goes to its lender's other guests (all nice 19, sharing them). B, half
 * a core (1,250 img/s at 400 us), lends two workers of 1,000 img/s; jobs of
 * 500 img/s on two 0.1-core homes (250 alone) take one each: a 500, and b
 * 500 too, both fed remotely, 5,000 images in 10 s. (With the whole worker's
 * 1,000 img/s charged to B, b got the 250 left, decoded 187.5 itself: 11.43 s.)
 */
static void test_a_lent_worker_leaves_what_its_job_does_not_take(void **st)
{
	(void)st;
	struct gm_scenario *s =
	    load(HEAD "node\tA1\t0.1\nnode\tA2\t0.1\nnode\tB\t0.5\n"
		      "job\ta\tA1\t0\t5000\t500\njob\tb\tA2\t0\t5000\t500\n" COSTS
		      "cost\tremote_worker_img_s\t1000\n");
	struct gm_scen_result res[2];
	struct gm_scen_summary m;
	run(s, 1, res, &m);
	for (int k = 0; k < 2; k++) {
		assert_float_equal(res[k].jct, 10.0, 1e-9);
		assert_float_equal(res[k].remote, 5000, 1e-6);
	}
	gm_scenario_destroy(s);
}

/*
 * A lent worker stays with the job it was granted to (the lender grants a free
 * slot to whoever asks first; sticky), and starts sending remote_start_s
 * after its grant. B, half a core, lends two workers of 300 img/s; a (600
 * img/s, 0.1-core home: 250 alone) asks for both at 0 and is fed by them,
 * 6,000 images in 10 s. b, the same on another 0.1-core home from 1 s, finds
 * no free slot: 250 img/s alone until a ends, then both workers: 2,250 + 750
 * images, 10.25 s. (Re-dealt at every event, b took one of a's at 1 s and a
 * ended at 15 s, b at 11.) With remote_start_s 0.5, each waits 0.5 s for its workers.
 */
static void test_a_lent_worker_stays_with_its_job_and_starts_after_its_grant(void **st)
{
	(void)st;
	const char *text = HEAD "node\tA1\t0.1\nnode\tA2\t0.1\nnode\tB\t0.5\n"
				"job\ta\tA1\t0\t6000\t600\njob\tb\tA2\t1\t3000\t600\n" COSTS
				"cost\tremote_worker_img_s\t300\n";
	struct gm_scenario *s = load(text);
	struct gm_scen_result res[2];
	struct gm_scen_summary m;
	run(s, 1, res, &m);
	assert_float_equal(res[0].jct, 10.0, 1e-9);
	assert_float_equal(res[0].remote, 6000, 1e-6);
	assert_float_equal(res[1].jct, 9 + 750.0 / 600, 1e-9);
	assert_float_equal(res[1].remote, 750, 1e-6);
	gm_scenario_destroy(s);

	char with[1024];
	snprintf(with, sizeof(with), "%scost\tremote_start_s\t0.5\n", text);
	s = load(with);
	assert_float_equal(s->remote_start_s, 0.5, 0);
	run(s, 1, res, &m);
	double a_end = 0.5 + (6000 - 125) / 600.0;
	assert_float_equal(res[0].jct, a_end, 1e-9);
	assert_float_equal(res[0].remote, 6000 - 125, 1e-6);
	double b_local = (a_end + 0.5 - 1) * 250;
	assert_float_equal(res[1].jct, a_end + 0.5 + (3000 - b_local) / 600 - 1, 1e-9);
	assert_float_equal(res[1].remote, 3000 - b_local, 1e-6);
	gm_scenario_destroy(s);
}

/*
 * A job's named --workers caps the lent workers it takes (the agent's cap: a named
 * count bounds a job's workers). As above, but the first job names 1 worker:
 * it takes one of B's two (300 img/s at most from afar), and the second job gets
 * the other. Alone on A, the job naming 1 takes one worker of two; unnamed
 * ('auto', the default), both.
 */
static void test_a_named_worker_count_caps_the_lent_workers(void **st)
{
	(void)st;
	struct gm_scenario *s =
	    load(HEAD "node\tA\t0.25\nnode\tB\t0.5\n"
		      "job\ta\tA\t0\t6000\t600\t1\njob\tb\tA\t0\t6000\t600\tauto\n" COSTS
		      "cost\tremote_worker_img_s\t300\n");
	struct gm_scen_result res[2];
	struct gm_scen_summary m;
	assert_int_equal(s->job[0].workers, 1);
	assert_int_equal(s->job[1].workers, 0);
	run(s, 1, res, &m);
	assert_true(res[0].remote <= 300 * res[0].jct + 1e-6);
	assert_true(res[1].remote > 0);
	assert_true(res[0].jct > 10.0 + 1e-6); /* slower than with both workers */
	gm_scenario_destroy(s);
	const char *named[2] = {"1", "auto"};
	for (int k = 0; k < 2; k++) {
		char text[512];
		snprintf(text, sizeof(text),
			 HEAD "node\tA\t0.25\nnode\tB\t0.5\njob\ta\tA\t0\t6000\t1000\t%s\n" COSTS
			      "cost\tremote_worker_img_s\t300\n",
			 named[k]);
		s = load(text);
		run(s, 1, res, &m);
		if (k == 0)
			assert_true(res[0].remote <= 300 * res[0].jct + 1e-6);
		else
			assert_true(res[0].remote > 300 * res[0].jct + 1); /* both workers */
		gm_scenario_destroy(s);
	}
	/* a count is a whole number 1..1024 or auto */
	const char *bad[] = {"0", "1.5", "1025", "eight", ""};
	for (size_t k = 0; k < sizeof(bad) / sizeof(*bad); k++) {
		char text[512], err[256];
		struct gm_scenario *t = NULL;
		snprintf(text, sizeof(text), HEAD "node\tA\t1\njob\ta\tA\t0\t100\t10\t%s\n" COSTS,
			 bad[k]);
		assert_int_equal(gm_scenario_load(&t, put("w.tsv", text), err, sizeof(err)),
				 -EBADMSG);
		assert_non_null(strstr(err, ":3: workers"));
	}
}

/* A greedy job with lenders to spare takes everything remotely: its home only
 * receives, 0.25 / 100 us = 2,500 img/s. */
static void test_a_greedy_job_is_bounded_by_what_its_home_receives(void **st)
{
	(void)st;
	struct gm_scenario *s =
	    load(HEAD "node\tA\t0.25\nnode\tB\t4\njob\tg\tA\t0\t25000\t0\n" COSTS);
	assert_int_equal(s->node[1].workers, 4); /* ceil(4 cores) */
	struct gm_scen_result res[1];
	struct gm_scen_summary m;
	run(s, 1, res, &m);
	assert_float_equal(res[0].jct, 10.0, 1e-9);
	assert_float_equal(res[0].remote, 25000, 1e-6);
	gm_scenario_destroy(s);
}

/*
 * start_s: a job consumes nothing for its first 2 s. 5,000 images at 500 img/s on
 * a core of 1000 us an image: 2 + 10 s; a greedy one of 10,000 submitted at the
 * same time shares the core (0.5 each) until the first ends, then has it: 5,000
 * + 5,000 in 10 + 5 s, so 17 s. Utilisation: the rate job's bound 10 over its 12.
 */
static void test_a_job_starts_consuming_after_its_start_up(void **st)
{
	(void)st;
	struct gm_scenario *s = load(
	    HEAD "node\tA\t1\njob\tr\tA\t0\t5000\t500\njob\tg\tA\t0\t10000\t0\n"
		 "cost\tlocal_us\t1000\ncost\tremote_home_us\t100\ncost\tremote_lender_us\t1000\n"
		 "cost\tstart_s\t2\n");
	struct gm_scen_result res[2];
	struct gm_scen_summary m;
	run(s, 0, res, &m);
	assert_float_equal(res[0].jct, 12.0, 1e-9);
	assert_float_equal(res[1].jct, 17.0, 1e-9);
	assert_float_equal(m.gpu_util, 10.0 / 12.0, 1e-12);
	gm_scenario_destroy(s);
}

/*
 * A job's own CPU beside its images (job_cpu_s) is charged over its images. Half
 * a core at 1000 us an image, 0.5 s a job: a greedy 1,000-image job costs 1.5 s
 * of CPU, 3 s. On a core, two greedy jobs of 1,000 and 4,000 images, 1 s each:
 * 2 ms and 1.25 ms an image; half a core each, the first ends at 4 s (250 img/s),
 * the second has made 1,600 by then and the rest at 800 img/s: 7 s.
 */
static void test_a_jobs_own_cpu_is_charged_over_its_images(void **st)
{
	(void)st;
	struct gm_scen_result res[2];
	struct gm_scen_summary m;
	struct gm_scenario *s = load(
	    HEAD "node\tA\t0.5\njob\tg\tA\t0\t1000\t0\n"
		 "cost\tlocal_us\t1000\ncost\tremote_home_us\t100\ncost\tremote_lender_us\t1000\n"
		 "cost\tjob_cpu_s\t0.5\n");
	run(s, 0, res, &m);
	assert_float_equal(res[0].jct, 3.0, 1e-9);
	gm_scenario_destroy(s);
	s = load(HEAD
		 "node\tA\t1\njob\ta\tA\t0\t1000\t0\njob\tb\tA\t0\t4000\t0\n"
		 "cost\tlocal_us\t1000\ncost\tremote_home_us\t100\ncost\tremote_lender_us\t1000\n"
		 "cost\tjob_cpu_s\t1\n");
	run(s, 0, res, &m);
	assert_float_equal(res[0].jct, 4.0, 1e-9);
	assert_float_equal(res[1].jct, 7.0, 1e-9);
	gm_scenario_destroy(s);
}

/*
 * The lender tests' two hosts (A 0.25 core, B 0.75; 1,000 us an image decoded
 * or lent, 10 received), JOBS and one lent worker's img/s, run lending on
 * twice: cost NAME at 0 (res[0], m[0]) and at VALUE (res[1], m[1]).
 */
static void run_lender_pair(const char *jobs, int worker_img_s, const char *name, const char *value,
			    struct gm_scen_result res[2][2], struct gm_scen_summary m[2])
{
	for (int f = 0; f < 2; f++) {
		char text[1024];
		snprintf(text, sizeof(text),
			 HEAD "node\tA\t0.25\nnode\tB\t0.75\n%s"
			      "cost\tlocal_us\t1000\ncost\tremote_home_us\t10\n"
			      "cost\tremote_lender_us\t1000\ncost\tremote_worker_img_s\t%d\n"
			      "cost\t%s\t%s\n",
			 jobs, worker_img_s, name, f ? value : "0");
		struct gm_scenario *s = load(text);
		run(s, 1, res[f], &m[f]);
		gm_scenario_destroy(s);
	}
}

/*
 * A lender counts its idle cores as its agent does: its own jobs' images at its
 * workers' rate, their own cost (job_cpu_s) unseen. B (0.75 core) runs a 240
 * img/s job of 2,400 images: 0.24 core seen, 0.51 idle, three workers (one per
 * idle quarter core begun); with 0.24 s a job, 0.264 core is what it takes,
 * which would have counted two. A's greedy job gets what three 100 img/s
 * workers send either way.
 */
static void test_a_lender_counts_its_idle_cores_as_its_agent_does(void **st)
{
	(void)st;
	struct gm_scen_result res[2][2];
	struct gm_scen_summary m[2];
	run_lender_pair("job\tb\tB\t0\t2400\t240\njob\ta\tA\t0\t3000\t0\n", 100, "job_cpu_s",
			"0.24", res, m);
	assert_float_equal(res[1][0].jct, 10.0, 1e-6); /* B's job at its rate */
	/* three workers: A's job runs on their 300 img/s alone, 10.04 s (its own
	 * 0.24 s at 80 us an image of what it receives costs it 0.02 s); counted
	 * with the job's own cost, two workers, 7.34 s, a local worker kept */
	assert_float_equal(res[0][1].jct, 10.0417, 1e-3);
	assert_float_equal(res[1][1].jct, res[0][1].jct, 0.05);
	assert_float_equal(res[1][1].remote, res[0][1].remote, 10);
}

/*
 * A lender's agent reads the CPU of its new job's ring lead (lead_cpu_s) as
 * its taken images', and takes back the guests that leaves no room for. B (0.75
 * core) lends A's greedy job three 200 img/s workers (510 img/s of its idle
 * cores) until its own 240 img/s job b arrives at 2 s. With 0.5 s of lead,
 * b is read at 1 s in to need 0.24 + 0.5 cores, 0.01 idle: no guest; at 1.5
 * s, 0.177 idle: none; from 2 s on, 0.26 or more: two (one per idle quarter
 * begun) until b ends at 12 s: A gets its local 250 img/s instead of 510 for a
 * second, and 400 instead of 510 for the 8 after. Without it, three
 * throughout.
 */
static void test_a_lenders_new_job_reads_its_lead_and_takes_its_guests_back(void **st)
{
	(void)st;
	struct gm_scen_result res[2][2];
	struct gm_scen_summary m[2];
	run_lender_pair("job\ta\tA\t0\t20000\t0\njob\tb\tB\t2\t2400\t240\n", 200, "lead_cpu_s",
			"0.5", res, m);
	/* b's own job at its rate either way */
	assert_float_equal(res[0][1].jct, 10.0, 1e-6);
	assert_float_equal(res[1][1].jct, 10.0, 1e-6);
	/* by 12 s A has 260 + 880 = 1,140 images fewer, made up at the 600 img/s
	 * of three idle workers: 1.9 s later; the 250 it made alone in the
	 * second without a guest are the remote images it took fewer */
	assert_float_equal(res[1][0].jct, res[0][0].jct + 1.9, 1e-6);
	assert_float_equal(res[1][0].remote, res[0][0].remote - 250, 1e-6);
	assert_true(m[1].events > m[0].events); /* b read again, every half second */
}

/* A small deterministic generator for the random scenarios (LCG, Knuth's MMIX). */
static double rnd(uint64_t *x)
{
	*x = *x * 6364136223846793005ull + 1442695040888963407ull;
	return (double)(*x >> 11) / 9007199254740992.0;
}

static struct gm_scenario *random_scenario(uint64_t seed)
{
	char *text = malloc(1 << 16);
	size_t n = 0;
	uint64_t x = seed;
	double t = 0;
	assert_non_null(text);
	n += (size_t)snprintf(text + n, 1 << 16, HEAD);
	for (int i = 0; i < 4; i++)
		n += (size_t)snprintf(text + n, (1 << 16) - n, "node\tn%d\t%.3f\n", i,
				      0.1 + 2 * rnd(&x));
	for (int k = 0; k < 40; k++) {
		t += 5 * rnd(&x);
		double rate = rnd(&x) < 0.1 ? 0 : 50 + 2000 * rnd(&x);
		n += (size_t)snprintf(text + n, (1 << 16) - n, "job\tj%d\tn%d\t%.3f\t%.0f\t%.1f\n",
				      k, (int)(4 * rnd(&x)), t, 1000 + 20000 * rnd(&x), rate);
	}
	snprintf(text + n, (1 << 16) - n, "%s%s", COSTS, seed % 2 ? "cost\tstart_s\t1.5\n" : "");
	struct gm_scenario *s = load(text);
	free(text);
	return s;
}

/*
 * The utilisation figure (integrated over time) equals the sum of the bounds over
 * the sum of the JCTs of the jobs with a rate, on the committed scenarios and on
 * random ones; and lending never makes a job slower on a home of a core or more.
 */
static void test_utilisation_agrees_with_the_jcts(void **st)
{
	(void)st;
	for (int c = 0; c < 12; c++) {
		struct gm_scenario *s = NULL;
		char err[512];
		if (c < 2)
			assert_int_equal(
			    gm_scenario_load(&s,
					     c ? "traces/cluster-short.tsv" : "traces/cluster.tsv",
					     err, sizeof(err)),
			    0);
		else
			s = random_scenario((uint64_t)c);
		struct gm_scen_result *res[2] = {calloc(s->njobs, sizeof(**res)),
						 calloc(s->njobs, sizeof(**res))};
		assert_non_null(res[0]);
		assert_non_null(res[1]);
		for (int lend = 0; lend < 2; lend++) {
			struct gm_scen_summary m;
			double sb = 0, sj = 0;
			run(s, lend, res[lend], &m);
			for (size_t k = 0; k < s->njobs; k++)
				if (s->job[k].rate > 0) {
					sb += res[lend][k].bound;
					sj += res[lend][k].jct;
					assert_true(res[lend][k].jct >=
						    res[lend][k].bound * (1 - 1e-9));
				}
			assert_float_equal(m.gpu_util, sb / sj, 1e-9 * m.gpu_util);
			assert_true(m.gpu_util > 0 && m.gpu_util <= 1 + 1e-12);
		}
		for (size_t k = 0; k < s->njobs; k++) /* a sub-core home may lose (above) */
			if (s->node[s->job[k].home].cores >= 1 &&
			    res[1][k].jct > res[0][k].jct * (1 + 1e-9) + 1e-9)
				fail_msg("scenario %d job %s: %.6f s lending on > %.6f off", c,
					 s->job[k].name, res[1][k].jct, res[0][k].jct);
		free(res[0]);
		free(res[1]);
		gm_scenario_destroy(s);
	}
}

static void test_run_refuses_a_scenario_out_of_range(void **st)
{
	(void)st;
	struct gm_scenario *s =
	    load(HEAD "node\tA\t1\njob\ta\tA\t0\t10\t1\njob\tb\tA\t1\t10\t1\n" COSTS);
	struct gm_scen_result res[2];
	struct gm_scen_summary m;
	char err[512];
	s->node[0].cores = 0;
	assert_int_equal(gm_scenario_run(s, 0, res, &m, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "out of range"));
	s->node[0].cores = 1;
	s->job[1].home = 7;
	assert_int_equal(gm_scenario_run(s, 0, res, &m, err, sizeof(err)), -EINVAL);
	s->job[1].home = 0;
	s->job[1].submit = -1; /* before the first: not sorted */
	assert_int_equal(gm_scenario_run(s, 0, res, &m, err, sizeof(err)), -EINVAL);
	s->job[1].submit = 1;
	s->remote_home_cpu = 0;
	assert_int_equal(gm_scenario_run(s, 1, res, &m, err, sizeof(err)), -EINVAL);
	s->remote_home_cpu = 1e-4;
	assert_int_equal(gm_scenario_run(s, 1, res, &m, err, sizeof(err)), 0);
	gm_scenario_destroy(s);
}

static int cli(int n, ...)
{
	char *argv[16];
	va_list ap;
	va_start(ap, n);
	for (int i = 0; i < n; i++)
		argv[i] = va_arg(ap, char *);
	va_end(ap);
	argv[n] = NULL;
	return gm_cmd_sim(n, argv);
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = calloc(1, 1 << 16);
	assert_non_null(f);
	assert_non_null(buf);
	size_t n = fread(buf, 1, (1 << 16) - 1, f);
	buf[n] = 0;
	fclose(f);
	return buf;
}

static void test_cli_runs_a_scenario(void **st)
{
	(void)st;
	const char *sc =
	    put("cli.tsv", HEAD "node\tA\t0.25\nnode\tB\t1\t4\n"
				"job\ta\tA\t3\t10000\t1000\njob\tb\tB\t0\t15000\t1500\n" COSTS);
	char out[256], f[320];
	snprintf(out, sizeof(out), "%s/out", dir);
	assert_int_equal(cli(5, "sim", "--scenario", sc, "--out", out), 0);
	snprintf(f, sizeof(f), "%s/lending-on/jobs.tsv", out);
	char *got = slurp(f);
	assert_non_null(strstr(got, "job\thome\tsubmit_s\timages\trate_img_s\tend_s\tjct_s"));
	assert_non_null(strstr(got, "a\tA\t3\t10000\t1000\t13.000\t10.000\t10.000\t10000\n"));
	free(got);
	snprintf(f, sizeof(f), "%s/lending-off/summary.json", out);
	got = slurp(f);
	assert_non_null(strstr(got, "\"lending\":\"off\""));
	assert_non_null(strstr(got, "\"avg_jct\":13.000"));
	/* A's 0.1875 core (0.75 of it) makes 468.75; B's 0.75 less its own 0.6
	 * lends 375 remote images worth 0.75 each: 750 of 1,000 */
	assert_non_null(strstr(got, "\"feedable\":0.7500}"));
	free(got);
	/* a path with a quote is still one JSON string */
	const char *q = put("q\"uote.tsv", HEAD "node\tA\t1\njob\ta\tA\t0\t100\t10\n" COSTS);
	snprintf(out, sizeof(out), "%s/q", dir);
	assert_int_equal(cli(7, "sim", "--scenario", q, "--lending", "off", "--out", out), 0);
	snprintf(f, sizeof(f), "%s/summary.json", out);
	got = slurp(f);
	assert_non_null(strstr(got, "q\\\"uote.tsv\",\"lending\""));
	free(got);
	snprintf(out, sizeof(out), "%s/one", dir);
	assert_int_equal(cli(7, "sim", "--scenario", sc, "--lending", "on", "--out", out), 0);
	snprintf(f, sizeof(f), "%s/jobs.tsv", out);
	assert_int_equal(access(f, R_OK), 0);
	/* usage errors: a bad --lending, --lending alone, a trace replay's option */
	assert_int_equal(cli(5, "sim", "--scenario", sc, "--lending", "maybe"), 2);
	assert_int_equal(cli(3, "sim", "--lending", "on"), 2);
	assert_int_equal(cli(5, "sim", "--scenario", sc, "--policy", "static"), 2);
	assert_int_equal(cli(5, "sim", "--scenario", sc, "--cluster", "1x(1gpu,1cpu)"), 2);
	/* input errors */
	assert_int_equal(cli(3, "sim", "--scenario", "/nonexistent/s.tsv"), 1);
	assert_int_equal(cli(3, "sim", "--scenario", put("bad.tsv", HEAD "node\tA\t0\n")), 1);
}

/*
 * The simulator against real hosts: the short cluster experiment (traces/cluster-short.tsv) was run
 * on real hosts; traces/cluster-short-measured.tsv holds each job's JCT there,
 * lending off and on, with the command, date and machine. The simulator, on the
 * same file, lands within 15% of every one of them.
 */
static void test_sim_matches_the_measured_short_experiment(void **st)
{
	(void)st;
	struct gm_scenario *s = NULL;
	char err[512], *line = NULL;
	size_t cap = 0, seen = 0;
	FILE *f = fopen("traces/cluster-short-measured.tsv", "r");
	assert_non_null(f);
	assert_int_equal(gm_scenario_load(&s, "traces/cluster-short.tsv", err, sizeof(err)), 0);
	struct gm_scen_result *res[2] = {calloc(s->njobs, sizeof(**res)),
					 calloc(s->njobs, sizeof(**res))};
	struct gm_scen_summary m;
	assert_non_null(res[0]);
	assert_non_null(res[1]);
	run(s, 0, res[0], &m);
	run(s, 1, res[1], &m);
	while (getline(&line, &cap, f) >= 0) {
		char name[GM_SCEN_NAME], mode[8];
		double real;
		if (line[0] == '#' || sscanf(line, "%31s %7s %lf", name, mode, &real) != 3)
			continue;
		int lend = !strcmp(mode, "on");
		size_t k = 0;
		while (k < s->njobs && strcmp(s->job[k].name, name))
			k++;
		if (k == s->njobs || (!lend && strcmp(mode, "off")))
			fail_msg("measured row '%s': no such job or lending mode", name);
		double e = (res[lend][k].jct - real) / real;
		if (fabs(e) > 0.15)
			fail_msg("job %s lending %s: sim %.2f s vs measured %.2f s (%+.1f%%)", name,
				 mode, res[lend][k].jct, real, 100 * e);
		seen++;
	}
	assert_int_equal(seen, 2 * s->njobs); /* every job, both ways */
	free(line);
	fclose(f);
	free(res[0]);
	free(res[1]);
	gm_scenario_destroy(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_committed_scenarios_load),
	    cmocka_unit_test(test_load_errors_name_file_and_line),
	    cmocka_unit_test(test_a_fractional_core_runs_at_its_share),
	    cmocka_unit_test(test_cores_are_shared_max_min),
	    cmocka_unit_test(test_lending_with_an_ample_pool),
	    cmocka_unit_test(
		test_a_sub_core_home_keeps_its_local_worker_until_remote_ones_deliver_more),
	    cmocka_unit_test(test_a_poor_host_lends_to_no_one),
	    cmocka_unit_test(test_a_home_of_half_a_core_or_more_keeps_its_local_worker),
	    cmocka_unit_test(test_lending_is_capped_by_the_idle_cores_and_the_budget),
	    cmocka_unit_test(test_a_greedy_job_is_bounded_by_what_its_home_receives),
	    cmocka_unit_test(test_a_job_starts_consuming_after_its_start_up),
	    cmocka_unit_test(test_a_jobs_own_cpu_is_charged_over_its_images),
	    cmocka_unit_test(test_a_lender_counts_its_idle_cores_as_its_agent_does),
	    cmocka_unit_test(test_a_lenders_new_job_reads_its_lead_and_takes_its_guests_back),
	    cmocka_unit_test(test_lent_workers_are_divided_between_a_homes_jobs),
	    cmocka_unit_test(test_a_lent_worker_leaves_what_its_job_does_not_take),
	    cmocka_unit_test(test_a_named_worker_count_caps_the_lent_workers),
	    cmocka_unit_test(test_a_lent_worker_stays_with_its_job_and_starts_after_its_grant),
	    cmocka_unit_test(test_utilisation_agrees_with_the_jcts),
	    cmocka_unit_test(test_run_refuses_a_scenario_out_of_range),
	    cmocka_unit_test(test_feedable_by_hand),
	    cmocka_unit_test(test_cli_runs_a_scenario),
	    cmocka_unit_test(test_sim_matches_the_measured_short_experiment),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
