/*
 * test_sim.c - the cluster simulator (sim/sim.c, sim/policies.c, cmd/sim.c):
 * golden output of tiny hand-computed traces, determinism, invariants under every
 * policy, and errors. The hand computations are in the comments next to each
 * golden file.
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
#include <sys/wait.h>
#include <unistd.h>

#include "cmd.h"
#include "goldminer/cluster.h"
#include "goldminer/profile.h"
#include "goldminer/sim.h"
#include "goldminer/trace.h"
#include "testutil.h"

static char dir[64];

static int setup(void **st)
{
	(void)st;
	return gm_test_tmpdir(dir, sizeof(dir), "gm-test-sim");
}

static int teardown(void **st)
{
	(void)st;
	gm_test_rm_tree(dir);
	return 0;
}

static const char *path_of(const char *name)
{
	static char p[4][256];
	static int k;
	k = (k + 1) % 4;
	snprintf(p[k], sizeof(p[k]), "%s/%s", dir, name);
	return p[k];
}

static const char *put(const char *name, const char *text)
{
	const char *p = path_of(name);
	FILE *f = fopen(p, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	return p;
}

/* Whole file into a malloc'd string (NULL if missing). */
static char *slurp(const char *p)
{
	FILE *f = fopen(p, "r");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *b = malloc((size_t)n + 1);
	assert_non_null(b);
	assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
	b[n] = 0;
	fclose(f);
	return b;
}

static void mkdir_in(const char *name)
{
	char cmd[400];
	snprintf(cmd, sizeof(cmd), "mkdir -p '%s/%s'", dir, name);
	assert_int_equal(system(cmd), 0);
}

/*
 * Class a: GPU-bound 100 samples/s per GPU, 10 per vCPU (needs 10 vCPUs per GPU).
 * Class b: 100 and 100 (needs 1 vCPU per GPU).
 */
static const char *PROFILE =
    "# test\na\t100\t10\t1\tmade up\tmade up\nb\t100\t100\t0\tmade up\tmade up\n";

/*
 * One node, 4 GPUs, 8 vCPUs. j0 (a, 2 vCPU, 100 s) and j1 (b, 4 vCPU, 100 s) at 0,
 * j2 (a, 2 vCPU, 100 s) at 10. Work: j0 = j2 = 100 s x min(100, 2 x 10) = 2000
 * samples; j1 = 100 x 100 = 10000.
 */
static const char *GOLD_TRACE = "# goldminer-trace v1\n0\t100\t1\t2\t0\n0\t100\t1\t4\t1\n"
				"10\t100\t1\t2\t0\n";

/* static and proportional (8/4 = 2 vCPUs per GPU): every job runs its trace time. */
static const char *GOLD_STATIC =
    "id\tclass\tgpus\tvcpu_req\tsubmit\tstart\tend\tjct\tqueue\trun\ttrace_run\tspeedup\n"
    "0\ta\t1\t2\t0.0\t0.0\t100.0\t100.0\t0.0\t100.0\t100\t1.0000\n"
    "1\tb\t1\t4\t0.0\t0.0\t100.0\t100.0\t0.0\t100.0\t100\t1.0000\n"
    "2\ta\t1\t2\t10.0\t10.0\t110.0\t100.0\t0.0\t100.0\t100\t1.0000\n";

/*
 * goldminer, remote cost 0, 1 local vCPU per GPU. t=0: locals 1+1, pool 6; j1 is
 * saturated by its local vCPU, so j0 gets all 6: 10 + 60 = 70/s. t=10: j0 has done
 * 700; j2 takes 1 local, pool 5: j0 gives one back (60/s); j2 ties j0 on gain and
 * loses the tie to the older job, so it runs on its local vCPU (10/s). j0 ends at
 * 10 + 1300/60 = 31.67. Then j2 (216.7 done) gets 6 workers: 70/s, ends at
 * 31.67 + 1783.3/70 = 57.14. j1 runs 100 s.
 */
static const char *GOLD_GM =
    "id\tclass\tgpus\tvcpu_req\tsubmit\tstart\tend\tjct\tqueue\trun\ttrace_run\tspeedup\n"
    "0\ta\t1\t2\t0.0\t0.0\t31.7\t31.7\t0.0\t31.7\t100\t3.1579\n"
    "1\tb\t1\t4\t0.0\t0.0\t100.0\t100.0\t0.0\t100.0\t100\t1.0000\n"
    "2\ta\t1\t2\t10.0\t10.0\t57.1\t47.1\t0.0\t47.1\t100\t2.1212\n";

/*
 * Every 20 s: at 20, 3 jobs on 3 GPUs, busy 0.6 + 1 + 0.1 = 1.7 of 4 GPUs, all 8 vCPUs
 * allocated and busy; at 40, j1 and j2 (70/s): 1.7 busy, 2 local + 6 pool vCPUs; at
 * 60 and 80 only j1 (1 GPU, 1 vCPU); the final row at 100 is empty.
 */
static const char *GOLD_GM_TS = "time\tgpu_alloc\tgpu_busy\tcpu_alloc\tcpu_busy\trunning\tqueued\n"
				"20\t0.7500\t0.4250\t1.0000\t1.0000\t3\t0\n"
				"40\t0.5000\t0.4250\t1.0000\t1.0000\t2\t0\n"
				"60\t0.2500\t0.2500\t0.1250\t0.1250\t1\t0\n"
				"80\t0.2500\t0.2500\t0.1250\t0.1250\t1\t0\n"
				"100\t0.0000\t0.0000\t0.0000\t0.0000\t0\t0\n";

/* unlimited-cpu: class a at 100/s: 2000 samples in 20 s. */
static const char *GOLD_UNL =
    "id\tclass\tgpus\tvcpu_req\tsubmit\tstart\tend\tjct\tqueue\trun\ttrace_run\tspeedup\n"
    "0\ta\t1\t2\t0.0\t0.0\t20.0\t20.0\t0.0\t20.0\t100\t5.0000\n"
    "1\tb\t1\t4\t0.0\t0.0\t100.0\t100.0\t0.0\t100.0\t100\t1.0000\n"
    "2\ta\t1\t2\t10.0\t10.0\t30.0\t20.0\t0.0\t20.0\t100\t5.0000\n";

struct world {
	struct gm_cluster *c;
	struct gm_trace *t;
	struct gm_profile p;
};

static void load(struct world *w, const char *cluster, const char *trace, const char *prof)
{
	char err[512];
	if (gm_cluster_load(&w->c, cluster, err, sizeof(err)) ||
	    gm_trace_load(&w->t, trace, err, sizeof(err)))
		fail_msg("%s", err);
	if (prof) {
		if (gm_profile_load(&w->p, put("prof.tsv", prof), err, sizeof(err)))
			fail_msg("%s", err);
	} else {
		gm_profile_default(&w->p);
	}
}

static void unload(struct world *w)
{
	gm_trace_destroy(w->t);
	gm_cluster_destroy(w->c);
}

/* Run one policy into dir/name; returns the summary. */
static struct gm_sim_summary run(struct world *w, struct gm_sim_opts *o, const char *name)
{
	struct gm_sim_summary m;
	char err[512];
	mkdir_in(name);
	o->out_dir = path_of(name);
	int rc = gm_sim_run(w->c, w->t, &w->p, o, &m, err, sizeof(err));
	if (rc)
		fail_msg("gm_sim_run %s: %d %s", name, rc, err);
	return m;
}

static void assert_file(const char *name, const char *want)
{
	char *got = slurp(path_of(name));
	assert_non_null(got);
	if (strcmp(got, want))
		fail_msg("%s differs:\n--- got\n%s--- want\n%s", name, got, want);
	free(got);
}

static void test_golden(void **st)
{
	(void)st;
	struct world w;
	struct gm_sim_opts o;
	struct gm_sim_summary m;

	load(&w, "1x(4gpu,8cpu)", put("gold.tsv", GOLD_TRACE), PROFILE);
	gm_sim_opts_defaults(&o);
	o.remote_cost = 0;
	o.sample_interval = 20;
	o.check = 1;

	o.policy = GM_SIM_STATIC;
	m = run(&w, &o, "g-static");
	assert_file("g-static/jobs.tsv", GOLD_STATIC);
	assert_true(m.avg_jct == 100 && m.makespan == 110 && m.jobs == 3);

	o.policy = GM_SIM_PROPORTIONAL;
	run(&w, &o, "g-prop");
	assert_file("g-prop/jobs.tsv", GOLD_STATIC);

	o.policy = GM_SIM_GOLDMINER;
	m = run(&w, &o, "g-gm");
	assert_file("g-gm/jobs.tsv", GOLD_GM);
	assert_file("g-gm/timeseries.tsv", GOLD_GM_TS);
	/* avg JCT = (31.667 + 100 + 47.143) / 3; busy/alloc GPU = 140 / 178.81 */
	double e0 = 10 + 1300.0 / 60, e2 = e0 + (2000 - 10 * (e0 - 10)) / 70;
	assert_true(fabs(m.avg_jct - (e0 + 100 + (e2 - 10)) / 3) < 0.05);
	/* GPU-s busy = work / R = 20 + 100 + 20; allocated = the three run times */
	assert_true(fabs(m.gpu_util - 140.0 / (e0 + 100 + (e2 - 10))) < 1e-4);
	assert_true(m.makespan == 100);
	char *js = slurp(path_of("g-gm/summary.json"));
	assert_non_null(js);
	assert_non_null(strstr(js, "\"policy\":\"goldminer\",\"jobs\":3,"));
	assert_null(strstr(js, "wall_s")); /* the file is deterministic */
	free(js);

	o.policy = GM_SIM_UNLIMITED;
	run(&w, &o, "g-unl");
	assert_file("g-unl/jobs.tsv", GOLD_UNL);

	/*
	 * A remote cost of 0.5 changes nothing here: with one node every pool worker
	 * sits next to the job's GPUs (local, full rate), so the run is the one above.
	 */
	o.policy = GM_SIM_GOLDMINER;
	o.remote_cost = 0.5;
	run(&w, &o, "g-gm-remote");
	assert_file("g-gm-remote/jobs.tsv", GOLD_GM);
	unload(&w);
}

/*
 * Placement-aware pool workers: node 0 has 2 GPUs and 4 vCPUs, node 1 no GPU and
 * 4 vCPUs; remote cost 0.5, so a local worker gives 10/s, a remote one 5/s. Both
 * jobs are class a (R = 100/s, 2000 samples), 1 GPU, 1 local vCPU reserved.
 *   t=0   j0 alone: pool budget 8 - 1 = 7 workers, all to j0 (it could use 18):
 *         node 0's 3 spare vCPUs local, 4 remote: 10 + 3 x 10 + 4 x 5 = 60/s.
 *         (Charged as remote everywhere, the old model, it ran at 10 + 7 x 5 = 45/s.)
 *   t=10  j0 has done 600. j1 reserves node 0's 1 vCPU: one of j0's local workers
 *         goes remote; budget 6: j0 keeps 6 (a tie with j1, the older job wins),
 *         2 local + 4 remote: 10 + 20 + 20 = 50/s; j1 10/s on its own vCPU.
 *         j0 ends at 10 + 1400 / 50 = 38.
 *   t=38  j1 has done 280; it gets 7 workers, 3 local + 4 remote: 60/s, ends at
 *         38 + 1720 / 60 = 66.67.
 * With remote cost 0 every worker gives 10/s: j0 80/s, then 70/s from t=10, ends
 * at 10 + 1200 / 70 = 27.14; j1 (171.4 done) then 80/s, ends at 50.0.
 */
static void test_local_and_remote_workers(void **st)
{
	(void)st;
	struct world w;
	struct gm_sim_opts o;
	struct gm_sim_summary m;
	const char *hdr =
	    "id\tclass\tgpus\tvcpu_req\tsubmit\tstart\tend\tjct\tqueue\trun\ttrace_run\tspeedup\n";
	char want[1024];

	load(&w, "1x(2gpu,4cpu)+1x(0gpu,4cpu)",
	     put("lr.tsv", "# goldminer-trace v1\n0\t100\t1\t2\t0\n10\t100\t1\t2\t0\n"), PROFILE);
	gm_sim_opts_defaults(&o);
	o.check = 1;
	o.policy = GM_SIM_GOLDMINER;
	o.remote_cost = 0.5;
	m = run(&w, &o, "lr-half");
	snprintf(want, sizeof(want), "%s%s%s", hdr,
		 "0\ta\t1\t2\t0.0\t0.0\t38.0\t38.0\t0.0\t38.0\t100\t2.6316\n",
		 "1\ta\t1\t2\t10.0\t10.0\t66.7\t56.7\t0.0\t56.7\t100\t1.7647\n");
	assert_file("lr-half/jobs.tsv", want);
	assert_true(fabs(m.avg_jct - (38 + (38 + 1720.0 / 60 - 10)) / 2) < 1e-6);
	o.remote_cost = 0;
	run(&w, &o, "lr-zero");
	snprintf(want, sizeof(want), "%s%s%s", hdr,
		 "0\ta\t1\t2\t0.0\t0.0\t27.1\t27.1\t0.0\t27.1\t100\t3.6842\n",
		 "1\ta\t1\t2\t10.0\t10.0\t50.0\t40.0\t0.0\t40.0\t100\t2.5000\n");
	assert_file("lr-zero/jobs.tsv", want);
	unload(&w);
}

/*
 * FIFO and backfill (static): j0 (1 GPU, 100 s) at 0; j1 needs all 4 GPUs at 5 and
 * waits for j0 (start 100); j2 (1 GPU, 10 s) at 6 waits behind j1 under FIFO (110 ->
 * 120). With backfill, node 0 is held for the blocked j1, so on one node j2 still
 * waits; given a second node it starts at once (6 -> 16).
 */
static void test_fifo_backfill(void **st)
{
	(void)st;
	struct world w;
	struct gm_sim_opts o;
	struct gm_sim_summary m;
	const char *hdr =
	    "id\tclass\tgpus\tvcpu_req\tsubmit\tstart\tend\tjct\tqueue\trun\ttrace_run\tspeedup\n"
	    "0\ta\t1\t2\t0.0\t0.0\t100.0\t100.0\t0.0\t100.0\t100\t1.0000\n"
	    "1\tb\t4\t4\t5.0\t100.0\t110.0\t105.0\t95.0\t10.0\t10\t1.0000\n";
	char want[1024];

	load(
	    &w, "1x(4gpu,8cpu)",
	    put("q.tsv", "# goldminer-trace v1\n0\t100\t1\t2\t0\n5\t10\t4\t4\t1\n6\t10\t1\t2\t0\n"),
	    PROFILE);
	gm_sim_opts_defaults(&o);
	o.check = 1;
	m = run(&w, &o, "q-fifo");
	snprintf(want, sizeof(want), "%s%s", hdr,
		 "2\ta\t1\t2\t6.0\t110.0\t120.0\t114.0\t104.0\t10.0\t10\t1.0000\n");
	assert_file("q-fifo/jobs.tsv", want);
	assert_true(fabs(m.avg_queue - (95.0 + 104.0) / 3) < 0.05);
	o.backfill = 1;
	run(&w, &o, "q-bf");
	assert_file("q-fifo/jobs.tsv", want); /* held node: same as FIFO */
	unload(&w);
	/* j0 now takes 2 GPUs, so only node 0 fits it; node 1 has one GPU for j2. */
	load(&w, "1x(4gpu,8cpu)+1x(1gpu,8cpu)",
	     put("q2.tsv",
		 "# goldminer-trace v1\n0\t100\t2\t2\t0\n5\t10\t4\t4\t1\n6\t10\t1\t2\t0\n"),
	     PROFILE);
	const char *hdr2 =
	    "id\tclass\tgpus\tvcpu_req\tsubmit\tstart\tend\tjct\tqueue\trun\ttrace_run\tspeedup\n"
	    "0\ta\t2\t2\t0.0\t0.0\t100.0\t100.0\t0.0\t100.0\t100\t1.0000\n"
	    "1\tb\t4\t4\t5.0\t100.0\t110.0\t105.0\t95.0\t10.0\t10\t1.0000\n";
	o.arrival_scale = 1;
	run(&w, &o, "q-bf2");
	snprintf(want, sizeof(want), "%s%s", hdr2,
		 "2\ta\t1\t2\t6.0\t6.0\t16.0\t10.0\t0.0\t10.0\t10\t1.0000\n");
	assert_file("q-bf2/jobs.tsv", want);
	o.backfill = 0; /* FIFO: j2 starts with j1, on the other node */
	run(&w, &o, "q-fifo2");
	snprintf(want, sizeof(want), "%s%s", hdr2,
		 "2\ta\t1\t2\t6.0\t100.0\t110.0\t104.0\t94.0\t10.0\t10\t1.0000\n");
	assert_file("q-fifo2/jobs.tsv", want);
	/* arrival scale 2 halves submit times: j1 at 2.5, j2 at 3 */
	o.backfill = 0;
	o.arrival_scale = 2;
	run(&w, &o, "q-scale");
	char *got = slurp(path_of("q-scale/jobs.tsv"));
	assert_non_null(strstr(got, "\n1\tb\t4\t4\t2.5\t100.0\t110.0\t107.5\t97.5\t"));
	free(got);
	unload(&w);
}

/* Jobs larger than a node span nodes; larger than the cluster are counted out. */
static void test_spread_and_unplaceable(void **st)
{
	(void)st;
	struct world w;
	struct gm_sim_opts o;
	struct gm_sim_summary m;
	load(&w, "3x(2gpu,8cpu)",
	     put("big.tsv",
		 "# goldminer-trace v1\n0\t10\t5\t5\t1\n1\t10\t7\t7\t1\n2\t10\t1\t1\t1\n"),
	     PROFILE);
	gm_sim_opts_defaults(&o);
	o.check = 1;
	for (int p = 0; p < GM_SIM_NPOLICY; p++) {
		o.policy = (enum gm_sim_policy)p;
		m = run(&w, &o, "spread");
		assert_int_equal(m.jobs, 2);
		assert_int_equal(m.unplaceable, 1);
		char *got = slurp(path_of("spread/jobs.tsv"));
		/* the 5-GPU job runs at once on three nodes; the 1-GPU job uses the 6th GPU */
		assert_non_null(strstr(got, "\n0\tb\t5\t5\t0.0\t0.0\t10.0\t"));
		assert_non_null(strstr(got, "\n2\tb\t1\t1\t2.0\t2.0\t12.0\t"));
		free(got);
	}
	unload(&w);
}

static int files_equal(const char *a, const char *b)
{
	char *x = slurp(path_of(a)), *y = slurp(path_of(b));
	int eq = x && y && !strcmp(x, y);
	free(x);
	free(y);
	return eq;
}

static void test_determinism(void **st)
{
	(void)st;
	struct world w;
	struct gm_sim_opts o;
	load(&w, "3x(8gpu,32cpu)+1x(4gpu,16cpu)", "synth:jobs=3000,seed=5,load=1.1,gpus=28", NULL);
	gm_sim_opts_defaults(&o);
	o.backfill = 4;
	for (int p = 0; p < GM_SIM_NPOLICY; p++) {
		char a[64], b[64], fa[80], fb[80];
		o.policy = (enum gm_sim_policy)p;
		o.seed = 1;
		snprintf(a, sizeof(a), "det-a-%d", p);
		snprintf(b, sizeof(b), "det-b-%d", p);
		struct gm_sim_summary ma = run(&w, &o, a), mb = run(&w, &o, b);
		assert_int_equal(ma.events, mb.events);
		const char *files[] = {"jobs.tsv", "timeseries.tsv", "summary.json"};
		for (int f = 0; f < 3; f++) {
			snprintf(fa, sizeof(fa), "%s/%s", a, files[f]);
			snprintf(fb, sizeof(fb), "%s/%s", b, files[f]);
			if (!files_equal(fa, fb))
				fail_msg("%s and %s differ", fa, fb);
		}
		/* another seed draws other model classes: other results */
		o.seed = 2;
		run(&w, &o, b);
		snprintf(fa, sizeof(fa), "%s/jobs.tsv", a);
		snprintf(fb, sizeof(fb), "%s/jobs.tsv", b);
		assert_false(files_equal(fa, fb));
	}
	unload(&w);
}

/* Read column col (0-based) of every row of a jobs.tsv. */
static double *column(const char *name, int col, size_t *n)
{
	char *s = slurp(path_of(name)), *save = NULL;
	double *v = malloc(100000 * sizeof(double));
	assert_non_null(s);
	assert_non_null(v);
	*n = 0;
	for (char *l = strtok_r(s, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		if (l[0] == 'i')
			continue;
		char *f = l;
		for (int k = 0; k < col; k++)
			f = strchr(f, '\t') + 1;
		v[(*n)++] = strtod(f, NULL);
	}
	free(s);
	return v;
}

/* The end times (column 6 of jobs.tsv) of a run, checked to 0.01 s. */
static void assert_ends(const char *name, const double *want, size_t n)
{
	size_t got_n;
	double *got = column(name, 6, &got_n);
	assert_int_equal(got_n, n);
	for (size_t i = 0; i < n; i++)
		if (fabs(got[i] - want[i]) > 0.051)
			fail_msg("%s: job %zu ends at %.3f, want %.3f", name, i, got[i], want[i]);
	free(got);
}

/*
 * synergy-tune on one node of 4 GPUs and 8 vCPUs (fair share 2 per GPU). j0
 * (class a: ideal 10 vCPUs, capped at the node's 8; 2000 samples) at 0, j1
 * (class b: ideal 1; 20 s, 2000 samples) at 10.
 *   t=0   ideals 8 <= 8: j0 gets 8, 80/s.
 *   t=10  j0 has done 800; j1's ideal 1 (below its fair share 2) does not fit the
 *         0 vCPUs left, so the peer j0 is trimmed to its fair share 2 (20/s) and
 *         j1 gets its 1 (100/s); the other 5 vCPUs stay idle. j1 ends at 30.
 *   t=30  j0 has done 1200; alone again, 8 vCPUs: 800 / 80 = 10 s, ends at 40.
 */
static void test_synergy_tune_by_hand(void **st)
{
	(void)st;
	struct world w;
	struct gm_sim_opts o;

	load(&w, "1x(4gpu,8cpu)",
	     put("syn.tsv", "# goldminer-trace v1\n0\t100\t1\t2\t0\n10\t20\t1\t4\t1\n"), PROFILE);
	gm_sim_opts_defaults(&o);
	o.check = 1;
	o.policy = GM_SIM_SYNERGY;
	struct gm_sim_summary m = run(&w, &o, "syn");
	assert_ends("syn/jobs.tsv", (const double[]){40, 30}, 2);
	assert_true(m.makespan == 40);
	/* the window of the middle submits is 0..10 s, where j0 holds all 8 vCPUs */
	assert_true(fabs(m.cpu_alloc - 1) < 1e-9);
	unload(&w);
}

/*
 * Classes with whole ideals at 10 samples/s per vCPU: i8 (80/s per GPU, ideal 8
 * vCPUs per GPU), i6 (60/s, 6), i4 (40/s, 4), i1 (10/s, 1).
 */
static const char *SYN_PROFILE = "# test\ni8\t80\t10\t1\tmade up\tmade up\n"
				 "i6\t60\t10\t0\tmade up\tmade up\n"
				 "i4\t40\t10\t0\tmade up\tmade up\n"
				 "i1\t10\t10\t0\tmade up\tmade up\n";

/*
 * Synergy-TUNE's greedy order on one node of 4 GPUs and 12 vCPUs (fair share 3
 * per GPU), two 1-GPU jobs whose ideals (8 + 6) exceed the node; each requests 3
 * vCPUs for 100 s: 3000 samples.
 *   i8 at 0, i6 at 1: i8 takes its 8 (80/s); i6's 6 do not fit the 4 left, it
 *     gets its fair share 3 (30/s) and i8 keeps its ideal (the earlier rule
 *     trimmed both). i8 ends at 37.5; i6 (1095 done) alone takes its 6: 60/s,
 *     ends at 37.5 + 1905 / 60 = 69.25.
 *   i6 at 0, i8 at 1: i6 takes 6 (60/s), i8 gets its fair 3 (30/s). i6 ends at
 *     50; i8 (1470 done) then runs at 80/s: ends at 50 + 1530 / 80 = 69.125.
 */
static void test_synergy_tune_arrival_order(void **st)
{
	(void)st;
	struct world w;
	struct gm_sim_opts o;

	gm_sim_opts_defaults(&o);
	o.check = 1;
	o.policy = GM_SIM_SYNERGY;
	load(&w, "1x(4gpu,12cpu)",
	     put("syn-86.tsv", "# goldminer-trace v1\n0\t100\t1\t3\t0\n1\t100\t1\t3\t1\n"),
	     SYN_PROFILE);
	run(&w, &o, "syn-86");
	assert_ends("syn-86/jobs.tsv", (const double[]){37.5, 69.25}, 2);
	unload(&w);
	load(&w, "1x(4gpu,12cpu)",
	     put("syn-68.tsv", "# goldminer-trace v1\n0\t100\t1\t3\t1\n1\t100\t1\t3\t0\n"),
	     SYN_PROFILE);
	run(&w, &o, "syn-68");
	assert_ends("syn-68/jobs.tsv", (const double[]){50, 69.125}, 2);
	unload(&w);
}

/* The time-series row at time t of run name: gpu_busy and cpu_alloc. */
static void row_at(const char *name, double t, double *gpu_busy, double *cpu_alloc)
{
	char path[128], *s, *save = NULL;
	snprintf(path, sizeof(path), "%s/timeseries.tsv", name);
	s = slurp(path_of(path));
	assert_non_null(s);
	for (char *l = strtok_r(s, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		double v[5];
		if (sscanf(l, "%lf\t%lf\t%lf\t%lf\t%lf", &v[0], &v[1], &v[2], &v[3], &v[4]) == 5 &&
		    v[0] == t) {
			*gpu_busy = v[2];
			*cpu_alloc = v[3];
			free(s);
			return;
		}
	}
	free(s);
	fail_msg("%s: no row at %g", path, t);
}

/*
 * A peer is trimmed only as far as a later job needs, the one with the most vCPUs
 * per GPU first. One node of 4 GPUs and 12 vCPUs; 1-GPU jobs i4 at 0, i6 at 1,
 * i4 at 2, i1 at 3 (all long).
 *   i4 takes 4 (8 left); i6 takes 6 (2 left); the second i4's 4 do not fit, nor
 *   its fair 3: 1 short. Of the peers above their fair share (i4 +1, i6 +3), i6
 *   has more per GPU: trimmed to 3 (5 left), the new i4 gets 3 (2 left), the
 *   first i4 keeps its 4. i1 takes its 1.
 * At 10 s: 4 + 3 + 3 + 1 = 11 of 12 vCPUs allocated; GPUs busy 1 + 0.5 + 0.75 + 1
 * of 4 = 0.8125. Trimming the first i4 first would need i6 too (10 vCPUs, 0.75);
 * trimming every job above fair share (the earlier rule) gives the same 10.
 */
static void test_synergy_tune_trims_one_peer(void **st)
{
	(void)st;
	struct world w;
	struct gm_sim_opts o;
	double busy = -1, alloc = -1;

	gm_sim_opts_defaults(&o);
	o.check = 1;
	o.policy = GM_SIM_SYNERGY;
	o.sample_interval = 10;
	load(&w, "1x(4gpu,12cpu)",
	     put("syn-trim.tsv", "# goldminer-trace v1\n0\t1000\t1\t3\t2\n1\t1000\t1\t3\t1\n"
				 "2\t1000\t1\t3\t2\n3\t1000\t1\t3\t3\n"),
	     SYN_PROFILE);
	run(&w, &o, "syn-trim");
	row_at("syn-trim", 10, &busy, &alloc);
	if (fabs(alloc - 11.0 / 12) > 1e-4 || fabs(busy - 0.8125) > 1e-4)
		fail_msg("at 10 s: cpu_alloc %.4f (want 0.9167), gpu_busy %.4f (want 0.8125)",
			 alloc, busy);
	unload(&w);
}

/*
 * Memory as Synergy's second resource. One node of 4 GPUs, 32 vCPUs and 400 GB
 * (fair share 8 vCPUs and 100 GB per GPU); 1-GPU jobs of class m (120/s per GPU,
 * 10 per vCPU: ideal 12 vCPUs; 200 GB per GPU) at 0, 1 and 2, all long.
 *   The first two take 12 vCPUs and 200 GB each: memory is full. The third's
 *   ideal fits neither; its fair share (8, 100 GB) fits the vCPUs but not the
 *   memory, so the first job (the peers tie on vCPUs and memory per GPU: arrival
 *   order) is trimmed to 8 and 100 GB.
 * At 10 s: 8 + 12 + 8 = 28 of 32 vCPUs (0.875); GPUs busy 2/3 + 1 + 2/3 of 4.
 * Where the node's memory is not given, memory is not planned: 12 + 12 + 8 = 32.
 */
static void test_synergy_tune_memory(void **st)
{
	(void)st;
	struct world w;
	struct gm_sim_opts o;
	double busy = -1, alloc = -1;
	const char *prof = "# test\nm\t120\t10\t1\tmade up\tmade up\t200\n";
	const char *tr = put("syn-mem.tsv", "# goldminer-trace v1\n0\t1000\t1\t8\t0\n"
					    "1\t1000\t1\t8\t0\n2\t1000\t1\t8\t0\n");

	gm_sim_opts_defaults(&o);
	o.check = 1;
	o.policy = GM_SIM_SYNERGY;
	o.sample_interval = 10;
	load(&w, "1x(4gpu,32cpu,400gb)", tr, prof);
	assert_true(w.p.c[0].mem_per_gpu == 200 && w.c->mem[0] == 400);
	run(&w, &o, "syn-mem");
	row_at("syn-mem", 10, &busy, &alloc);
	if (fabs(alloc - 0.875) > 1e-4 || fabs(busy - (2.0 / 3 + 1 + 2.0 / 3) / 4) > 1e-4)
		fail_msg("with memory at 10 s: cpu_alloc %.4f (want 0.875), gpu_busy %.4f", alloc,
			 busy);
	unload(&w);
	load(&w, "1x(4gpu,32cpu)", tr, prof);
	run(&w, &o, "syn-nomem");
	row_at("syn-nomem", 10, &busy, &alloc);
	assert_true(fabs(alloc - 1) < 1e-4);
	unload(&w);
}

/*
 * synergy-tune asks for the profile's CPUs per GPU (the default; --tune-asks ideal:
 * the fewest vCPUs that reach its GPU rate) and runs at its GPU rate once it holds
 * them. Class b (750/s per GPU, 100 per vCPU, ask 6: like
 * Synergy's m5, below the 7.5 the linear model needs) alone on 1x(1gpu,8cpu):
 * ideal asks 8 (8 of 8 vCPUs), the ask 6 (0.75) and still ends at 1000 s (work
 * 1000 s x 750 at its request of 8). Class a (300/s, 100 per vCPU, ask 6) x 4 on
 * 1x(4gpu,16cpu), 1 GPU each at 0, 1, 2, 3: ideal 3 each (12 of 16); asks: 6, 6,
 * then fair 4, then the fourth's fair 4 trims both first ones to 4 (16 of 16).
 */
static void test_synergy_tune_asks(void **st)
{
	(void)st;
	struct world w;
	struct gm_sim_opts o;
	double busy, alloc;
	const char *prof = "# test\na\t300\t100\t1\tx\tx\t0\t6\nb\t750\t100\t1\tx\tx\t0\t6\n";
	gm_sim_opts_defaults(&o);
	o.check = 1;
	o.policy = GM_SIM_SYNERGY;
	o.sample_interval = 10;
	load(&w, "1x(1gpu,8cpu)", put("ask1.tsv", "# goldminer-trace v1\n0\t1000\t1\t8\t1\n"),
	     prof);
	o.tune_fewest = 1;
	run(&w, &o, "ask-ideal");
	row_at("ask-ideal", 10, &busy, &alloc);
	assert_true(fabs(alloc - 1) < 1e-4 && fabs(busy - 1) < 1e-4);
	o.tune_fewest = 0;
	run(&w, &o, "ask-prof");
	row_at("ask-prof", 10, &busy, &alloc);
	assert_true(fabs(alloc - 0.75) < 1e-4 && fabs(busy - 1) < 1e-4);
	assert_ends("ask-prof/jobs.tsv", (const double[]){1000}, 1);
	unload(&w);
	load(&w, "1x(4gpu,16cpu)",
	     put("ask4.tsv", "# goldminer-trace v1\n0\t1000\t1\t8\t0\n1\t1000\t1\t8\t0\n"
			     "2\t1000\t1\t8\t0\n3\t1000\t1\t8\t0\n"),
	     prof);
	o.tune_fewest = 1;
	run(&w, &o, "ask4-ideal");
	row_at("ask4-ideal", 10, &busy, &alloc);
	assert_true(fabs(alloc - 0.75) < 1e-4);
	o.tune_fewest = 0;
	run(&w, &o, "ask4-prof");
	row_at("ask4-prof", 10, &busy, &alloc);
	assert_true(fabs(alloc - 1) < 1e-4 && fabs(busy - 1) < 1e-4);
	unload(&w);
}

/*
 * --round 100 (Synergy's rounds with preemption), --backfill all, on 1x(2gpu,8cpu),
 * vCPUs never short: j0 (1 GPU, 150 s) at 0, j1 (2 GPUs, 100 s) at 1, j2 (1 GPU,
 * 1000 s) at 2. Nothing starts before the first round (100): j0 and j2 start, j1
 * does not fit. 200: all preempted and placed again in arrival order, the same.
 * j0 ends at 250; its GPU idles until 300, where j2 is preempted (900 - 100 done =
 * 800 left) and j1, earlier in the queue, takes both GPUs: ends 400; j2 again at
 * the 400 round, ends 1200. Continuous time: 150, 1102, 1002 (j2 keeps its GPU).
 */
static void test_rounds_preempt_in_arrival_order(void **st)
{
	(void)st;
	struct world w;
	struct gm_sim_opts o;
	gm_sim_opts_defaults(&o);
	o.check = 1;
	o.policy = GM_SIM_PROPORTIONAL;
	o.backfill = GM_SIM_BACKFILL_ALL;
	load(&w, "1x(2gpu,8cpu)",
	     put("rnd.tsv", "# goldminer-trace v1\n0\t150\t1\t4\t0\n1\t100\t2\t8\t0\n"
			    "2\t1000\t1\t4\t0\n"),
	     "# test\na\t100\t1000\t1\tx\tx\n");
	run(&w, &o, "rnd-cont");
	assert_ends("rnd-cont/jobs.tsv", (const double[]){150, 1102, 1002}, 3);
	o.round = 100;
	run(&w, &o, "rnd-100");
	assert_ends("rnd-100/jobs.tsv", (const double[]){250, 400, 1200}, 3);
	for (int p = 0; p < GM_SIM_NPOLICY; p++) { /* every policy survives the audit */
		o.policy = (enum gm_sim_policy)p;
		run(&w, &o, "rnd-any");
	}
	unload(&w);
}

/*
 * --backfill all holds no node for a blocked head. 2x(2gpu,8cpu): j0 (1 GPU, 1000 s)
 * at 0 on node 0, j1 (2 GPUs, 1000 s) at 1 on node 1, j2 (2 GPUs, 100 s) at 2
 * blocked, j3 (1 GPU, 100 s) at 3. Backfill 32 holds node 0 for j2: j3 waits for
 * node 1 (1001, ends 1101), j2 gets node 0 at 1000. all: j3 runs on node 0 at once.
 */
static void test_backfill_all_holds_nothing(void **st)
{
	(void)st;
	struct world w;
	struct gm_sim_opts o;
	gm_sim_opts_defaults(&o);
	o.check = 1;
	o.policy = GM_SIM_PROPORTIONAL;
	load(&w, "2x(2gpu,8cpu)",
	     put("bfa.tsv", "# goldminer-trace v1\n0\t1000\t1\t4\t0\n1\t1000\t2\t8\t0\n"
			    "2\t100\t2\t8\t0\n3\t100\t1\t4\t0\n"),
	     "# test\na\t100\t1000\t1\tx\tx\n");
	o.backfill = 32;
	run(&w, &o, "bfa-32");
	assert_ends("bfa-32/jobs.tsv", (const double[]){1000, 1001, 1100, 1101}, 4);
	o.backfill = GM_SIM_BACKFILL_ALL;
	run(&w, &o, "bfa-all");
	assert_ends("bfa-all/jobs.tsv", (const double[]){1000, 1001, 1100, 103}, 4);
	unload(&w);
}

/*
 * synergy-tune places a job where its ideal fits beside what the node's jobs hold.
 * 2x(2gpu,8cpu), two 1-GPU jobs of class b (ideal 6 vCPUs). Best fit alone would
 * put both on node 0 (fewest free GPUs): 6 + 2 free, the second switched to fair
 * share 4 and the first trimmed to 4: 8 of 16 vCPUs, each at 400 of 600/s (GPU
 * busy 1/3). By default (Synergy's random placement: node by node where the ideal
 * fits) and with --placement demand (Synergy's placement mode: a node where the
 * whole ideal fits) the second goes to node 1: 12 of 16, both at 600/s (busy 1/2).
 * Then a 2-GPU job c (ideal 1 vCPU per GPU) beside two b on 2x(2gpu,8cpu): no node
 * has 2 GPUs free, so by default it takes one GPU of each (its ideal fits on
 * both: 6 + 1 of 8 each), all at their GPU rate (busy 1); with demand it finds no
 * node for its ideal and is spread at fair share by the engine, all still fed.
 */
static void test_placement_where_the_ideal_fits(void **st)
{
	(void)st;
	struct world w;
	struct gm_sim_opts o;
	double busy, alloc;
	gm_sim_opts_defaults(&o);
	o.check = 1;
	o.policy = GM_SIM_SYNERGY;
	o.sample_interval = 10;
	load(&w, "2x(2gpu,8cpu)",
	     put("pd.tsv", "# goldminer-trace v1\n0\t1000\t1\t8\t0\n1\t1000\t1\t8\t0\n"),
	     "# test\nb\t600\t100\t1\tx\tx\n");
	run(&w, &o, "pd-fit");
	row_at("pd-fit", 10, &busy, &alloc);
	if (fabs(alloc - 0.75) > 1e-4 || fabs(busy - 0.5) > 1e-4)
		fail_msg("random: cpu_alloc %.4f (want 0.75), gpu_busy %.4f (want 0.5)", alloc,
			 busy);
	o.place_demand = 1;
	run(&w, &o, "pd-demand");
	row_at("pd-demand", 10, &busy, &alloc);
	if (fabs(alloc - 0.75) > 1e-4 || fabs(busy - 0.5) > 1e-4)
		fail_msg("demand: cpu_alloc %.4f (want 0.75), gpu_busy %.4f (want 0.5)", alloc,
			 busy);
	unload(&w);
	load(&w, "2x(2gpu,8cpu)",
	     put("pd3.tsv", "# goldminer-trace v1\n0\t1000\t1\t8\t0\n1\t1000\t1\t8\t0\n"
			    "2\t1000\t2\t2\t1\n"),
	     "# test\nb\t600\t100\t1\tx\tx\nc\t100\t100\t1\tx\tx\n");
	o.place_demand = 0;
	run(&w, &o, "pd3-fit");
	row_at("pd3-fit", 10, &busy, &alloc);
	if (fabs(alloc - 14.0 / 16) > 1e-4 || fabs(busy - 1) > 1e-4)
		fail_msg("random, split: cpu_alloc %.4f (want 0.875), gpu_busy %.4f (want 1)",
			 alloc, busy);
	unload(&w);
}

/*
 * --placement node-order (Synergy's random placement, FIFO+fair's and FIFO+tune's):
 * a job that fits one node but finds its GPUs free only on several is spread over
 * them rather than waiting for one node.
 * proportional on 2x(4gpu,16cpu), vCPUs never short: j0 and j1 (3 GPUs, 1000 s)
 * at 0 and 1, j2 (2 GPUs, 100 s) at 2. Best fit puts j0 and j1 on a node each;
 * j2 finds one GPU free on each and waits for j0's node: 1000 -> 1100. In node
 * order j0 takes node 0's GPUs 0-2, j1 node 0's last and two of node 1's, j2 node
 * 1's last two: it ends at 102.
 * synergy-tune on 2x(2gpu,8cpu): two 1-GPU jobs of class b (ideal 6 vCPUs) hold a
 * node each, then a 2-GPU b job (ideal 12) at 2 fits no node at its ideal. Best
 * fit waits for a node with 2 GPUs free (at 1000); in node order it starts at 2
 * at its fair share, one GPU and 4 vCPUs on each node (Synergy's second try,
 * allocate_synergy_random at fair share, takes the first free GPUs so).
 */
static void test_node_order_spreads_a_job_that_would_wait(void **st)
{
	(void)st;
	struct world w;
	struct gm_sim_opts o;
	size_t n;
	double *start;
	gm_sim_opts_defaults(&o);
	o.check = 1;
	o.policy = GM_SIM_PROPORTIONAL;
	load(&w, "2x(4gpu,16cpu)",
	     put("no.tsv", "# goldminer-trace v1\n0\t1000\t3\t12\t0\n1\t1000\t3\t12\t0\n"
			   "2\t100\t2\t8\t0\n"),
	     "# test\na\t100\t1000\t1\tx\tx\n");
	run(&w, &o, "no-bestfit");
	assert_ends("no-bestfit/jobs.tsv", (const double[]){1000, 1001, 1100}, 3);
	o.place_in_order = 1;
	run(&w, &o, "no-order");
	assert_ends("no-order/jobs.tsv", (const double[]){1000, 1001, 102}, 3);
	unload(&w);
	load(&w, "2x(2gpu,8cpu)",
	     put("no-tune.tsv", "# goldminer-trace v1\n0\t1000\t1\t8\t0\n1\t1000\t1\t8\t0\n"
				"2\t100\t2\t16\t0\n"),
	     "# test\nb\t600\t100\t1\tx\tx\n");
	o.policy = GM_SIM_SYNERGY;
	o.place_in_order = 0;
	run(&w, &o, "no-tune-bestfit");
	start = column("no-tune-bestfit/jobs.tsv", 5, &n);
	assert_int_equal(n, 3);
	if (fabs(start[2] - 1000) > 0.01)
		fail_msg("best fit: the 2-GPU job starts at %.2f (want 1000)", start[2]);
	free(start);
	o.place_in_order = 1;
	run(&w, &o, "no-tune-order");
	start = column("no-tune-order/jobs.tsv", 5, &n);
	assert_int_equal(n, 3);
	if (fabs(start[2] - 2) > 0.01)
		fail_msg("node order: the 2-GPU job starts at %.2f (want 2)", start[2]);
	free(start);
	unload(&w);
}

/*
 * Synergy caps a job's demand at a server (Workload.add_synergy_profile): an
 * m5-like class (750/s per GPU, 100 per vCPU, 187.5 GB and 6 vCPUs per GPU) with 4
 * GPUs on 1x(8gpu,24cpu,500gb) asks 24 vCPUs and 500 GB (not 750), which fit: it
 * runs at its speed-up, 3000/s (GPU busy 4/8). An alexnet-like one (882/s, 12
 * vCPUs and 125 GB per GPU) with 4 GPUs asks 48, capped at 24: it runs at the
 * speed-up on Synergy's line from fair share (12 vCPUs, 1200/s) to its whole ask
 * (48, 3528/s): 1200 + 2328 x 12 / 36 = 1976/s (busy 0.5 x 1976 / 3528).
 */
static void test_synergy_tune_caps_demand_at_a_node(void **st)
{
	(void)st;
	struct world w;
	struct gm_sim_opts o;
	double busy, alloc;
	gm_sim_opts_defaults(&o);
	o.check = 1;
	o.policy = GM_SIM_SYNERGY;
	o.sample_interval = 10;
	load(&w, "1x(8gpu,24cpu,500gb)",
	     put("cap.tsv", "# goldminer-trace v1\n0\t1000\t4\t12\t0\n"),
	     "# test\nm5\t750\t100\t1\tx\tx\t187.5\t6\n");
	run(&w, &o, "cap-m5");
	row_at("cap-m5", 10, &busy, &alloc);
	if (fabs(alloc - 1) > 1e-4 || fabs(busy - 0.5) > 1e-4)
		fail_msg("m5: cpu_alloc %.4f (want 1), gpu_busy %.4f (want 0.5)", alloc, busy);
	unload(&w);
	load(&w, "1x(8gpu,24cpu,500gb)",
	     put("cap2.tsv", "# goldminer-trace v1\n0\t1000\t4\t12\t0\n"),
	     "# test\nalexnet\t882\t100\t1\tx\tx\t125\t12\n");
	run(&w, &o, "cap-alex");
	row_at("cap-alex", 10, &busy, &alloc);
	if (fabs(alloc - 1) > 1e-4 || fabs(busy - 0.5 * 1976 / 3528) > 1e-4)
		fail_msg("alexnet: cpu_alloc %.4f (want 1), gpu_busy %.4f (want %.4f)", alloc, busy,
			 0.5 * 1976 / 3528);
	unload(&w);
}

/* The memory column of a profile and of a cluster shape: read, written, refused. */
static void test_memory_columns(void **st)
{
	(void)st;
	struct gm_profile p;
	struct gm_cluster *c = NULL;
	char err[512];

	assert_int_equal(gm_profile_load(&p,
					 put("mem1.tsv", "a\t1\t1\t1\t\t\t62.5\nb\t1\t1\t1\t\t\n"),
					 err, sizeof(err)),
			 0);
	assert_true(p.c[0].mem_per_gpu == 62.5 && p.c[1].mem_per_gpu == 0);
	assert_int_equal(gm_profile_write(&p, path_of("mem2.tsv"), NULL, err, sizeof(err)), 0);
	struct gm_profile q;
	assert_int_equal(gm_profile_load(&q, path_of("mem2.tsv"), err, sizeof(err)), 0);
	assert_true(q.c[0].mem_per_gpu == 62.5 && q.c[1].mem_per_gpu == 0);
	assert_int_equal(
	    gm_profile_load(&p, put("mem3.tsv", "a\t1\t1\t1\t\t\t-1\n"), err, sizeof(err)),
	    -EBADMSG);
	assert_non_null(strstr(err, "mem_gb_per_gpu"));
	/* the eighth column, synergy-tune's ask: read, written (with the seventh) */
	assert_int_equal(gm_profile_load(&p,
					 put("mem4.tsv", "a\t1\t1\t1\t\t\t0\t12\nb\t1\t1\t1\t\t\n"),
					 err, sizeof(err)),
			 0);
	assert_true(p.c[0].ask_per_gpu == 12 && p.c[0].mem_per_gpu == 0 && p.c[1].ask_per_gpu == 0);
	assert_int_equal(gm_profile_write(&p, path_of("mem5.tsv"), NULL, err, sizeof(err)), 0);
	assert_int_equal(gm_profile_load(&q, path_of("mem5.tsv"), err, sizeof(err)), 0);
	assert_true(q.c[0].ask_per_gpu == 12 && q.c[1].ask_per_gpu == 0);
	assert_int_equal(
	    gm_profile_load(&p, put("mem6.tsv", "a\t1\t1\t1\t\t\t1\t2\t3\n"), err, sizeof(err)),
	    -EBADMSG);
	assert_int_equal(
	    gm_profile_load(&p, put("mem7.tsv", "a\t1\t1\t1\t\t\t1\t-2\n"), err, sizeof(err)),
	    -EBADMSG);
	assert_non_null(strstr(err, "ask_cpu_per_gpu"));
	assert_int_equal(
	    gm_cluster_load(&c, "2x(8gpu,24cpu,500gb)+1x(4gpu,8cpu)", err, sizeof(err)), 0);
	assert_true(c->n == 3 && c->mem[0] == 500 && c->mem[1] == 500 && c->mem[2] == 0);
	gm_cluster_destroy(c);
	assert_int_equal(
	    gm_cluster_load(&c,
			    put("mem-nodes.csv", "sn,cpu_milli,memory_mib,gpu,model\n"
						 "a,96000,524288,8,V100\nb,8000,x,1,T4\n"),
			    err, sizeof(err)),
	    0);
	assert_true(c->n == 2 && c->mem[0] == 512 && c->mem[1] == 0); /* 0: not known */
	gm_cluster_destroy(c);
	assert_int_equal(gm_cluster_load(&c, "1x(8gpu,24cpu,500)", err, sizeof(err)), -EBADMSG);
	assert_int_equal(gm_cluster_load(&c, "1x(8gpu,24cpu,gb)", err, sizeof(err)), -EBADMSG);
}

/*
 * The pool policies against each other. Node 0: 2 GPUs, 4 vCPUs; node 1: no GPU,
 * 4 vCPUs; remote cost 0.5, 1 local vCPU per GPU. j0 (class a: R = 100/s, 10/s
 * per vCPU, needs 18 remote workers; 2000 samples) at 0; j1 (class c: 50/s per
 * vCPU, its local vCPU gives 50/s and 2 remote workers the other 50/s; 10000
 * samples) at 10.
 *   t=0 (all three)  j0 gets the 7 idle vCPUs.
 *   goldminer  j0: 3 local + 4 remote = 10 + 30 + 20 = 60/s; at 10 (600 done) j1
 *              reserves node 0's last spare vCPU and gains 5x more per worker, so
 *              it gets its 2 (remote: no spare left) and j0 keeps 4 (2 local):
 *              10 + 20 + 10 = 40/s, ends at 10 + 1400 / 40 = 45; j1 at 100/s
 *              ends at 110.
 *   pecan      the same until 10; then no priority: j0 keeps 6 (2 local + 4
 *              remote, 50/s), j1 runs on its own vCPU (50/s). j0 ends at
 *              10 + 1400 / 50 = 38; j1 (1400 done) then gets 2 local workers:
 *              100/s, ends at 38 + 86 = 124.
 *   cachew     every worker remote: j0 10 + 7 x 5 = 45/s, at 10 (450 done) 6
 *              workers, 40/s: ends at 10 + 1550 / 40 = 48.75; j1 at 50/s until
 *              then (1937.5 done), then 2 workers, 100/s: ends at 129.375.
 */
static void test_pool_policies_by_hand(void **st)
{
	(void)st;
	struct world w;
	struct gm_sim_opts o;

	load(&w, "1x(2gpu,4cpu)+1x(0gpu,4cpu)",
	     put("pools.tsv", "# goldminer-trace v1\n0\t100\t1\t2\t0\n10\t100\t1\t2\t2\n"),
	     "a\t100\t10\t1\tmade up\tmade up\nb\t100\t100\t0\tmade up\tmade up\n"
	     "c\t100\t50\t0\tmade up\tmade up\n");
	gm_sim_opts_defaults(&o);
	o.check = 1;
	o.remote_cost = 0.5;
	o.policy = GM_SIM_GOLDMINER;
	run(&w, &o, "pool-gm");
	assert_ends("pool-gm/jobs.tsv", (const double[]){45, 110}, 2);
	o.policy = GM_SIM_PECAN;
	run(&w, &o, "pool-pecan");
	assert_ends("pool-pecan/jobs.tsv", (const double[]){38, 124}, 2);
	o.policy = GM_SIM_CACHEW;
	run(&w, &o, "pool-cachew");
	assert_ends("pool-cachew/jobs.tsv", (const double[]){48.75, 129.375}, 2);
	/* at no remote cost cachew and pecan are one policy */
	o.remote_cost = 0;
	run(&w, &o, "pool-cachew0");
	o.policy = GM_SIM_PECAN;
	run(&w, &o, "pool-pecan0");
	assert_true(files_equal("pool-cachew0/jobs.tsv", "pool-pecan0/jobs.tsv"));
	unload(&w);
}

/*
 * node-elastic: a job adds workers on the idle vCPUs of its own nodes only, shared
 * among the node's jobs by the pool's rule (marginal gain in busy GPUs). Node 0:
 * 2 GPUs, 4 vCPUs; node 1: no GPU, 4 vCPUs; remote cost 0, 1 vCPU per GPU
 * reserved. j0 (class a: R = 100/s, 10/s per vCPU; 1 vCPU asked, 100 s: 1000
 * samples) and j1 (class c: 25/s per vCPU; 2500 samples), both at 0.
 *   node-elastic  node 0's 2 idle vCPUs go to j1 (a worker gains it 25/100 of a
 *                 GPU, j0 10/100): j1 25 + 50 = 75/s, ends at 2500 / 75 = 33.33;
 *                 j0 10/s until then (333.3 done), then node 0's 3 idle vCPUs:
 *                 40/s, ends at 33.33 + 666.7 / 40 = 50. Node 1's 4 vCPUs stay
 *                 idle throughout.
 *   goldminer     the pool is all 6 idle vCPUs: j1 its 3 (100/s), j0 the other 3
 *                 (40/s, node 1's among them): both end at 25.
 *   static        the asked vCPU each: j0 10/s, j1 25/s: both end at 100.
 * (An even split of node 0's 2 would end j1 at 2500 / 50 = 50, j0 later.)
 * With --local-min request (GM_SIM_LOCAL_REQUEST) a job reserves its whole request
 * at placement, as static: on 1 node of 2 GPUs and 4 vCPUs, j0 and j1 (class a, 3
 * vCPUs asked, 100 s: 3000 samples each) cannot run side by side; j0 reserves 3
 * and adds the 1 idle vCPU: 40/s, ends at 75; j1 then the same, ends at 150.
 */
static void test_node_elastic_by_hand(void **st)
{
	(void)st;
	struct world w;
	struct gm_sim_opts o;

	load(&w, "1x(2gpu,4cpu)+1x(0gpu,4cpu)",
	     put("node-el.tsv", "# goldminer-trace v1\n0\t100\t1\t1\t0\n0\t100\t1\t1\t1\n"),
	     "a\t100\t10\t1\tmade up\tmade up\nc\t100\t25\t1\tmade up\tmade up\n");
	gm_sim_opts_defaults(&o);
	o.check = 1;
	o.remote_cost = 0;
	o.policy = GM_SIM_NODE_ELASTIC;
	run(&w, &o, "node-el");
	assert_ends("node-el/jobs.tsv", (const double[]){50, 33.333}, 2);
	o.policy = GM_SIM_GOLDMINER;
	run(&w, &o, "node-el-gm");
	assert_ends("node-el-gm/jobs.tsv", (const double[]){25, 25}, 2);
	o.policy = GM_SIM_STATIC;
	run(&w, &o, "node-el-static");
	assert_ends("node-el-static/jobs.tsv", (const double[]){100, 100}, 2);
	unload(&w);

	load(&w, "1x(2gpu,4cpu)",
	     put("node-req.tsv", "# goldminer-trace v1\n0\t100\t1\t3\t0\n0\t100\t1\t3\t0\n"),
	     "a\t100\t10\t1\tmade up\tmade up\n");
	gm_sim_opts_defaults(&o);
	o.check = 1;
	o.policy = GM_SIM_NODE_ELASTIC;
	o.local_min = GM_SIM_LOCAL_REQUEST;
	run(&w, &o, "node-req");
	assert_ends("node-req/jobs.tsv", (const double[]){75, 150}, 2);
	assert_int_equal(gm_sim_policy_parse("node-elastic"), GM_SIM_NODE_ELASTIC);
	unload(&w);
}

/*
 * --node-cores: one node of 3 GPUs and 4 vCPUs whose workers time-share 1.5 cores
 * (a 4-worker budget on a smaller machine), 1000 samples/s per core. Classes: p
 * (R = 300/s), q (R = 800/s), g (greedy, R = 1e9/s); every job asks for 4 vCPUs.
 * goldminer gives each job its local vCPU and the fourth to g (p and q need less
 * than one). Each worker wants a core share of u: p 0.3, q 0.8, g's two 1 each;
 * max-min fair: p keeps 0.3 and the others get L with 0.3 + 3L = 1.5, L = 0.4.
 *   t=0   p 300/s, q 400/s, g 800/s.
 *   t=10  p ends (3000 samples). g takes the two freed vCPUs: 3 workers; q's one
 *         and g's three share 1.5 cores: 0.375 each: q 375/s, g 1125/s.
 *   t=20  q ends (4000 + 3750 samples). g alone: 4 workers, 1.5 cores: 1500/s.
 *   t=30  g ends (8000 + 11250 + 15000 = 34250 samples).
 * Without --node-cores every vCPU is a core: p, q at their rates, g at 2000/s.
 */
static void test_node_cores_by_hand(void **st)
{
	(void)st;
	struct world w;
	struct gm_sim_opts o;

	/* work = duration x min(R, 4 vCPUs x 1000/s) */
	load(&w, "1x(3gpu,4cpu)",
	     put("cores.tsv", "# goldminer-trace v1\n0\t10\t1\t4\t0\n0\t9.6875\t1\t4\t1\n"
			      "0\t8.5625\t1\t4\t2\n"),
	     "p\t300\t1000\t1\tmade up\tmade up\nq\t800\t1000\t1\tmade up\tmade up\n"
	     "g\t1e9\t1000\t1\tmade up\tmade up\n");
	gm_sim_opts_defaults(&o);
	o.check = 1;
	o.remote_cost = 0;
	o.policy = GM_SIM_GOLDMINER;
	o.node_cores = 1.5;
	run(&w, &o, "cores");
	assert_ends("cores/jobs.tsv", (const double[]){10, 20, 30}, 3);
	/* enough cores for every worker: the plain model, to the byte */
	o.node_cores = 4;
	run(&w, &o, "cores4");
	o.node_cores = 0;
	run(&w, &o, "cores0");
	assert_true(files_equal("cores4/jobs.tsv", "cores0/jobs.tsv"));
	/* static: each job holds the node's 4 vCPUs, so they run one after the other;
	 * p and q fit in 1.5 cores, g's 4 workers get 0.375 each: 1500/s, 34250
	 * samples take 22.83 s after q's end at 19.69 */
	o.policy = GM_SIM_STATIC;
	o.node_cores = 1.5;
	run(&w, &o, "cores-static");
	assert_ends("cores-static/jobs.tsv", (const double[]){10, 19.6875, 42.5208}, 3);
	unload(&w);
}

/*
 * Cores per node: node 0 has 4 vCPUs but 0.5 cores (a shape's "0.5cores"), node 1
 * 4 vCPUs that are cores. Two greedy jobs asking for 4 vCPUs each (work 40,000
 * samples: 10 s at 4 x 1000/s) land one per node under static: on node 0 its 4
 * workers share 0.5 core, 500/s, 80 s; on node 1, 10 s. --node-cores 0.5 gives
 * every node 0.5 cores: both 80 s.
 */
static void test_cores_per_node_by_hand(void **st)
{
	(void)st;
	struct world w;
	struct gm_sim_opts o;
	struct gm_sim_summary m;
	char err[512];

	load(&w, "1x(1gpu,4cpu,0.5cores)+1x(1gpu,4cpu)",
	     put("pn.tsv", "# goldminer-trace v1\n0\t10\t1\t4\t0\n0\t10\t1\t4\t0\n"),
	     "g\t1e9\t1000\t1\tmade up\tmade up\n");
	gm_sim_opts_defaults(&o);
	o.check = 1;
	o.remote_cost = 0;
	o.policy = GM_SIM_STATIC;
	run(&w, &o, "pn");
	assert_ends("pn/jobs.tsv", (const double[]){80, 10}, 2);
	o.node_cores = 0.5;
	run(&w, &o, "pn-all");
	assert_ends("pn-all/jobs.tsv", (const double[]){80, 80}, 2);
	/* a hand-built cluster's cores out of range are refused */
	w.c->cores[1] = -1;
	o.node_cores = 0;
	o.out_dir = NULL;
	assert_int_equal(gm_sim_run(w.c, w.t, &w.p, &o, &m, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "cores must be"));
	w.c->cores[1] = 0;
	unload(&w);
}

/*
 * goldminer caps a job at the workers it needs given where they land. Node 0: 1
 * GPU, 12 vCPUs; node 1: 1 GPU, 2 vCPUs; remote cost 0.5; two class-a jobs (R =
 * 100/s, 10/s per vCPU, 1 local vCPU, 2000 samples) at 0: j0 on node 0, j1 on
 * node 1; pool budget 14 - 2 = 12.
 *   Planned at the remote rate (5/s) each could use 18 workers; j0 (older) would
 *   take all 12: 11 local + 1 remote, 3 of them idle. Capped: with 11 local vCPUs
 *   to hand j0 needs 9 (10 + 9 x 10 = 100/s), so j1 gets the other 3: node 1's
 *   spare vCPU + 2 remote: 10 + 10 + 2 x 5 = 30/s.
 *   j0 ends at 20; j1 (600 done) then gets 13 workers, 1 local + 12 remote:
 *   10 + 10 + 60 = 80/s, ends at 20 + 1400 / 80 = 37.5 (uncapped: 42.5).
 */
static void test_goldminer_caps_local_surplus(void **st)
{
	(void)st;
	struct world w;
	struct gm_sim_opts o;

	load(&w, "1x(1gpu,12cpu)+1x(1gpu,2cpu)",
	     put("cap.tsv", "# goldminer-trace v1\n0\t100\t1\t2\t0\n0\t100\t1\t2\t0\n"), PROFILE);
	gm_sim_opts_defaults(&o);
	o.check = 1;
	o.policy = GM_SIM_GOLDMINER;
	o.remote_cost = 0.5;
	run(&w, &o, "cap");
	assert_ends("cap/jobs.tsv", (const double[]){20, 37.5}, 2);
	unload(&w);
}

/*
 * Invariants on a contended heterogeneous cluster with multi-node jobs, every
 * policy, the full audit after every event: the run must finish without the engine
 * reporting a broken invariant; static runs reproduce trace durations exactly (the
 * calibration) and no job anywhere runs faster than under unlimited-cpu.
 */
static void test_invariants(void **st)
{
	(void)st;
	struct world w;
	struct gm_sim_opts o;
	double *run_t[GM_SIM_NPOLICY], *trace_t;
	size_t n[GM_SIM_NPOLICY], nt;
	char name[64];

	load(&w, "3x(4gpu,16cpu)+1x(2gpu,8cpu)+1x(0gpu,32cpu)",
	     "synth:jobs=400,seed=9,load=1.3,gpus=14,gpumix=1:6/2:2/4:1/8:1,vcpu=2/3", NULL);
	gm_sim_opts_defaults(&o);
	o.check = 1;
	o.backfill = 3;
	for (int p = 0; p < GM_SIM_NPOLICY; p++) {
		o.policy = (enum gm_sim_policy)p;
		snprintf(name, sizeof(name), "inv-%d", p);
		struct gm_sim_summary m = run(&w, &o, name);
		assert_int_equal(m.jobs, 400);
		assert_true(m.gpu_util > 0 && m.gpu_util <= 1 + 1e-9);
		assert_true(m.gpu_alloc <= 1 + 1e-9 && m.gpu_busy <= m.gpu_alloc + 1e-9);
		if (p != GM_SIM_UNLIMITED)
			assert_true(m.cpu_alloc <= 1 + 1e-9);
		snprintf(name, sizeof(name), "inv-%d/jobs.tsv", p);
		run_t[p] = column(name, 9, &n[p]);
		assert_int_equal(n[p], 400);
	}
	trace_t = column("inv-0/jobs.tsv", 10, &nt);
	for (size_t i = 0; i < nt; i++) {
		assert_true(fabs(run_t[GM_SIM_STATIC][i] - trace_t[i]) <= 0.051);
		for (int p = 0; p < GM_SIM_NPOLICY; p++)
			assert_true(run_t[p][i] + 0.051 >= run_t[GM_SIM_UNLIMITED][i]);
	}
	free(trace_t);
	for (int p = 0; p < GM_SIM_NPOLICY; p++)
		free(run_t[p]);
	unload(&w);
}

static void test_errors(void **st)
{
	(void)st;
	struct world w;
	struct gm_sim_opts o;
	struct gm_sim_summary m;
	char err[512];

	load(&w, "1x(4gpu,8cpu)", put("e.tsv", "# goldminer-trace v1\n0\t10\t1\t2\t5\n"), PROFILE);
	gm_sim_opts_defaults(&o);
	/* class 5 is not in a 2-class profile */
	assert_int_equal(gm_sim_run(w.c, w.t, &w.p, &o, &m, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "trace line 2: class 5 is not in the profile (classes 0..1)"));
	w.t->jobs[0].cls = 0;
	o.arrival_scale = 0;
	assert_int_equal(gm_sim_run(w.c, w.t, &w.p, &o, &m, err, sizeof(err)), -EINVAL);
	o.arrival_scale = 1;
	o.remote_cost = 1;
	assert_int_equal(gm_sim_run(w.c, w.t, &w.p, &o, &m, err, sizeof(err)), -EINVAL);
	o.remote_cost = 0;
	o.policy = GM_SIM_NPOLICY;
	assert_int_equal(gm_sim_run(w.c, w.t, &w.p, &o, &m, err, sizeof(err)), -EINVAL);
	o.policy = GM_SIM_STATIC;
	o.out_dir = "/nonexistent/dir";
	assert_int_equal(gm_sim_run(w.c, w.t, &w.p, &o, &m, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "/nonexistent/dir"));
	o.out_dir = NULL;
	assert_int_equal(gm_sim_run(w.c, w.t, &w.p, &o, &m, err, sizeof(err)), 0);
	assert_int_equal(m.jobs, 1);
	/* an empty trace is a valid, empty run */
	w.t->n = 0;
	assert_int_equal(gm_sim_run(w.c, w.t, &w.p, &o, &m, err, sizeof(err)), 0);
	assert_int_equal(m.jobs, 0);
	w.t->n = 1;
	unload(&w);

	assert_int_equal(gm_sim_policy_parse("goldminer"), GM_SIM_GOLDMINER);
	assert_int_equal(gm_sim_policy_parse("unlimited-cpu"), GM_SIM_UNLIMITED);
	assert_int_equal(gm_sim_policy_parse("synergy-tune"), GM_SIM_SYNERGY);
	assert_int_equal(gm_sim_policy_parse("cachew"), GM_SIM_CACHEW);
	assert_int_equal(gm_sim_policy_parse("pecan"), GM_SIM_PECAN);
	assert_int_equal(gm_sim_policy_parse("nope"), -EINVAL);
	assert_string_equal(gm_sim_policy_name(GM_SIM_PROPORTIONAL), "proportional");
}

static int cli(int n, ...)
{
	char *argv[32];
	va_list ap;
	va_start(ap, n);
	for (int i = 0; i < n; i++)
		argv[i] = va_arg(ap, char *);
	va_end(ap);
	argv[n] = NULL;
	return gm_cmd_sim(n, argv);
}

static void test_cli(void **st)
{
	(void)st;
	const char *tr = put("cli.tsv", GOLD_TRACE);
	const char *prof = put("cliprof.tsv", PROFILE);
	const char *bad = put("clibad.tsv", "# goldminer-trace v1\n0\t10\t1\n");
	char out[256], f[300];

	snprintf(out, sizeof(out), "%s/cli-out", dir);
	assert_int_equal(cli(2, "sim", "--help"), 0);
	assert_int_equal(cli(1, "sim"), 2);
	assert_int_equal(cli(5, "sim", "--cluster", "1x(4gpu,8cpu)", "--trace", tr), 2);
	assert_int_equal(
	    cli(7, "sim", "--cluster", "1x(4gpu,8cpu)", "--trace", tr, "--policy", "nope"), 2);
	assert_int_equal(cli(8, "sim", "--cluster", "1x(4gpu,8cpu)", "--trace", tr, "--policy",
			     "static", "--bogus"),
			 2);
	assert_int_equal(cli(8, "sim", "--cluster", "1x(4gpu,8cpu)", "--trace", tr,
			     "--policy=static", "--arrival-scale=0", "--seed=1"),
			 2);
	/* a stray argument and a seed that is not a whole number are usage errors */
	assert_int_equal(cli(8, "sim", "--cluster", "1x(4gpu,8cpu)", "--trace", tr, "--policy",
			     "static", "extra"),
			 2);
	assert_int_equal(cli(9, "sim", "--cluster", "1x(4gpu,8cpu)", "--trace", tr, "--policy",
			     "static", "--seed", "1.5"),
			 2);
	assert_int_equal(
	    cli(7, "sim", "--cluster", "1x(4gpu,8cpu)", "--trace", bad, "--policy", "static"), 1);
	assert_int_equal(
	    cli(7, "sim", "--cluster", "1x(4gpu)", "--trace", tr, "--policy", "static"), 1);
	assert_int_equal(cli(13, "sim", "--cluster", "1x(4gpu,8cpu)", "--trace", tr, "--policy",
			     "all", "--profile", prof, "--out", out, "--remote-cost", "0"),
			 0);
	for (int p = 0; p < GM_SIM_NPOLICY; p++) {
		snprintf(f, sizeof(f), "%s/%s/summary.json", out, gm_sim_policy_name(p));
		assert_int_equal(access(f, R_OK), 0);
	}
	snprintf(f, sizeof(f), "%s/goldminer/jobs.tsv", out);
	char *got = slurp(f);
	assert_non_null(strstr(got, "\t31.7\t")); /* the golden goldminer run */
	free(got);
	/* the paired comparison's options: --per-seed writes one row per policy and seed */
	snprintf(f, sizeof(f), "%s/per-seed.tsv", dir);
	assert_int_equal(cli(15, "sim", "--cluster", "1x(4gpu,8cpu)", "--trace", tr, "--policy",
			     "all", "--profile", prof, "--seeds", "2", "--vs", "static,goldminer",
			     "--per-seed", f),
			 0);
	got = slurp(f);
	size_t rows = 0;
	for (char *c = got; (c = strchr(c, '\n')); c++)
		rows++;
	assert_int_equal(rows, 1 + 2 * GM_SIM_NPOLICY);
	assert_non_null(strstr(got, "goldminer\t2\t"));
	free(got);
	/* they need --seeds, a known policy that runs, and --work-at share or request */
	assert_int_equal(cli(11, "sim", "--cluster", "1x(4gpu,8cpu)", "--trace", tr, "--policy",
			     "all", "--profile", prof, "--vs", "static"),
			 2);
	assert_int_equal(cli(13, "sim", "--cluster", "1x(4gpu,8cpu)", "--trace", tr, "--policy",
			     "all", "--profile", prof, "--seeds", "2", "--vs", "static,nope"),
			 2);
	assert_int_equal(cli(13, "sim", "--cluster", "1x(4gpu,8cpu)", "--trace", tr, "--policy",
			     "static", "--profile", prof, "--seeds", "2", "--vs", "goldminer"),
			 2);
	assert_int_equal(cli(11, "sim", "--cluster", "1x(4gpu,8cpu)", "--trace", tr, "--policy",
			     "static", "--profile", prof, "--work-at", "half"),
			 2);
	/* --placement names one of three placements */
	assert_int_equal(cli(11, "sim", "--cluster", "2x(2gpu,8cpu)", "--trace", tr, "--policy",
			     "proportional", "--profile", prof, "--placement", "node-order"),
			 0);
	assert_int_equal(cli(11, "sim", "--cluster", "2x(2gpu,8cpu)", "--trace", tr, "--policy",
			     "proportional", "--profile", prof, "--placement", "random"),
			 2);
}

/*
 * --work-at: a class-a job (10 samples/s per vCPU) requesting 1 vCPU on a node of
 * 2 vCPUs per GPU. Its 100 traced seconds are 1000 samples at its request, 2000 at
 * its fair share; under static (1 vCPU) it then runs 100 or 200 s.
 */
static void test_work_at_share(void **st)
{
	(void)st;
	struct world w;
	struct gm_sim_opts o;

	load(&w, "1x(4gpu,8cpu)", put("wa.tsv", "# goldminer-trace v1\n0\t100\t1\t1\t0\n"),
	     PROFILE);
	gm_sim_opts_defaults(&o);
	o.policy = GM_SIM_STATIC;
	run(&w, &o, "wa-req");
	assert_ends("wa-req/jobs.tsv", (const double[]){100}, 1);
	o.work_at_share = 1;
	run(&w, &o, "wa-share");
	assert_ends("wa-share/jobs.tsv", (const double[]){200}, 1);
	unload(&w);
}

/* Column col (0-based) of row row (0-based, after the header) of a jobs.tsv. */
static void cell(const char *name, int row, int col, char *out, size_t len)
{
	char *s = slurp(path_of(name)), *l = s;
	assert_non_null(s);
	for (int r = -1; r < row; r++) {
		l = strchr(l, '\n');
		assert_non_null(l);
		l++;
	}
	for (int k = 0; k < col; k++)
		l = strchr(l, '\t') + 1;
	size_t n = strcspn(l, "\t\n");
	snprintf(out, len, "%.*s", (int)n, l);
	free(s);
}

/*
 * A job's class comes from a hash of the seed and the job itself, not from its
 * position: a trace with one more job in the middle (which moves every later job
 * one place on) gives every old job the same class. Under the former draw by
 * position, about 4 in 5 of the moved jobs changed class.
 */
static void test_class_independent_of_order(void **st)
{
	(void)st;
	struct world w;
	struct gm_sim_opts o;
	struct gm_trace *t2;
	char err[256], a[32], b[32];
	size_t n, k = 100, differ = 0, changed = 0;

	load(&w, "4x(8gpu,64cpu)", "synth:jobs=200,seed=3,load=0.5,gpus=32", NULL);
	n = w.t->n;
	assert_int_equal(
	    gm_trace_load(&t2, "synth:jobs=200,seed=3,load=0.5,gpus=32", err, sizeof(err)), 0);
	t2->jobs = realloc(t2->jobs, (n + 1) * sizeof(*t2->jobs));
	assert_non_null(t2->jobs);
	memmove(&t2->jobs[k + 1], &t2->jobs[k], (n - k) * sizeof(*t2->jobs));
	t2->jobs[k].duration = 777; /* a new job, submitted with job k */
	t2->n = n + 1;
	gm_sim_opts_defaults(&o);
	o.policy = GM_SIM_UNLIMITED; /* rates do not matter here, only classes */
	o.seed = 42;
	run(&w, &o, "ord-a");
	struct gm_trace *t1 = w.t;
	w.t = t2;
	run(&w, &o, "ord-b");
	o.seed = 43;
	run(&w, &o, "ord-c");
	for (size_t i = 0; i < n; i++) {
		cell("ord-a/jobs.tsv", (int)i, 1, a, sizeof(a));
		cell("ord-b/jobs.tsv", (int)(i < k ? i : i + 1), 1, b, sizeof(b));
		if (strcmp(a, b))
			fail_msg("job %zu: class %s, %s with a job inserted before it", i, a, b);
		char first[32];
		cell("ord-a/jobs.tsv", 0, 1, first, sizeof(first));
		differ += strcmp(a, first) != 0;
		cell("ord-c/jobs.tsv", (int)(i < k ? i : i + 1), 1, b, sizeof(b));
		changed += strcmp(a, b) != 0;
	}
	assert_true(differ > n / 4);  /* the classes vary between jobs */
	assert_true(changed > n / 4); /* and another seed draws others */
	gm_trace_destroy(t1);
	unload(&w);
}

/* gm_cmd_sim with its standard output into file out (a child: stdout untouched). */
static int cli_to(const char *out, int n, char **argv)
{
	fflush(stdout);
	pid_t pid = fork();
	int status;
	assert_true(pid >= 0);
	if (!pid) {
		if (!freopen(out, "w", stdout))
			_exit(99);
		int rc = gm_cmd_sim(n, argv);
		fflush(stdout);
		_exit(rc);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

/*
 * --pair A,B: the paired ratio of two --per-seed files' runs (runs with different
 * options), as --vs prints it. Seeds 1-3 of x: avg JCT 200, 300, 400 and GPU util
 * 0.5 each; of y: 100, 100, 100 and 1.0: per-seed ratios 2, 3, 4 (median 3) and
 * 0.5. Files with other seeds, a policy not in the file, a column it lacks and a
 * malformed pair are refused.
 */
/* Every policy passes its audit (--check) on openb's jobs in Synergy's rounds: a
 * job's end there leaves its node to the next round (node-elastic's audit failed
 * "job 10 is short on node 2, which has 5 idle vCPUs" between the two). */
static void test_every_policy_passes_its_audit_in_rounds(void **st)
{
	(void)st;
	static const char *const pol[] = {"static", "proportional", "synergy-tune", "goldminer",
					  "node-elastic"};
	for (size_t k = 0; k < sizeof(pol) / sizeof(pol[0]); k++)
		assert_int_equal(cli(14, "sim", "--cluster", "8x(8gpu,24cpu,500gb)", "--trace",
				     "traces/synergy/openb.tsv", "--policy", pol[k], "--profile",
				     "traces/profile-synergy.tsv", "--work-at", "share", "--round",
				     "300", "--check"),
				 0);
}

static void test_cli_pair(void **st)
{
	(void)st;
	const char *hd = "policy\tseed\tavg_jct\tp50_jct\tp95_jct\tavg_queue\tgpu_util\tgpu_busy"
			 "\tcpu_util\tmakespan\n";
	char a[512], b[512], c[512], spec[1200], out[300];
	char *got;

	snprintf(a, sizeof(a), "%s%s", hd,
		 "x\t1\t200\t1\t1\t1\t0.5\t1\t1\t1\nx\t2\t300\t1\t1\t1\t0.5\t1\t1\t1\n"
		 "x\t3\t400\t1\t1\t1\t0.5\t1\t1\t1\n");
	snprintf(b, sizeof(b), "%s%s", hd,
		 "y\t1\t100\t1\t1\t1\t1\t1\t1\t1\ny\t2\t100\t1\t1\t1\t1\t1\t1\t1\n"
		 "y\t3\t100\t1\t1\t1\t1\t1\t1\t1\n");
	snprintf(c, sizeof(c), "%s%s", hd, "y\t1\t100\t1\t1\t1\t1\t1\t1\t1\n");
	const char *fa = put("pair-a.tsv", a), *fb = put("pair-b.tsv", b);
	const char *fc = put("pair-c.tsv", c);
	snprintf(out, sizeof(out), "%s/pair.out", dir);

	snprintf(spec, sizeof(spec), "%s:x,%s:y", fa, fb);
	assert_int_equal(cli_to(out, 3, (char *[]){"sim", "--pair", spec, NULL}), 0);
	got = slurp(out);
	assert_non_null(got);
	assert_non_null(strstr(got, "{\"ratio\":\"avg_jct\",\"num\":\""));
	assert_non_null(strstr(got, ":x\",\"den\":\""));
	assert_non_null(strstr(got, "\"seeds\":3,\"median\":3.0000,"));
	assert_non_null(strstr(got, "\"min\":2.0000,\"max\":4.0000,"));
	free(got);
	assert_int_equal(
	    cli_to(out, 5, (char *[]){"sim", "--pair", spec, "--figure", "gpu_util", NULL}), 0);
	got = slurp(out);
	assert_non_null(strstr(got, "{\"ratio\":\"gpu_util\","));
	assert_non_null(strstr(got, "\"median\":0.5000,\"lo\":0.5000,\"hi\":0.5000,"));
	assert_non_null(strstr(got, "\"separated\":true}"));
	free(got);

	assert_int_equal(cli(5, "sim", "--pair", spec, "--figure", "nope"), 1);
	snprintf(spec, sizeof(spec), "%s:x,%s:y", fa, fc); /* other seeds */
	assert_int_equal(cli(3, "sim", "--pair", spec), 1);
	snprintf(spec, sizeof(spec), "%s:z,%s:y", fa, fb); /* no such policy there */
	assert_int_equal(cli(3, "sim", "--pair", spec), 1);
	snprintf(spec, sizeof(spec), "%s,%s:y", fa, fb); /* no policy named */
	assert_int_equal(cli(3, "sim", "--pair", spec), 1);
	assert_int_equal(cli(3, "sim", "--pair", "a.tsv:x"), 2);
	assert_int_equal(cli(3, "sim", "--figure", "gpu_util"), 2);
	snprintf(spec, sizeof(spec), "%s:x,%s:y", fa, fb);
	assert_int_equal(cli(5, "sim", "--pair", spec, "--seeds", "3"), 2);
	/* and --local-min request is a policy option like any number */
	assert_int_equal(
	    cli_to(out, 9,
		   (char *[]){"sim", "--cluster", "1x(4gpu,8cpu)", "--trace", "synth:jobs=20",
			      "--policy", "node-elastic", "--local-min", "request", NULL}),
	    0);
	got = slurp(out);
	assert_non_null(strstr(got, "{\"policy\":\"node-elastic\","));
	free(got);
	assert_int_equal(
	    cli_to(out, 9,
		   (char *[]){"sim", "--cluster", "1x(4gpu,8cpu)", "--trace", "synth:jobs=20",
			      "--policy", "node-elastic", "--local-min", "most", NULL}),
	    2);
}

/*
 * --seeds: one seed is the plain run, byte for byte; three seeds write each run
 * into DIR/seed-K and their mean (with its interval) into DIR/summary.json.
 */
static void test_cli_seeds(void **st)
{
	(void)st;
	const char *tr = "synth:jobs=300,seed=5,load=1.1,gpus=16";
	char one[256], plain[256], three[256], f[400];
	double x[3], mean = 0;

	snprintf(plain, sizeof(plain), "%s/seeds-plain", dir);
	snprintf(one, sizeof(one), "%s/seeds-one", dir);
	snprintf(three, sizeof(three), "%s/seeds-three", dir);
	assert_int_equal(cli(11, "sim", "--cluster", "2x(8gpu,32cpu)", "--trace", tr, "--policy",
			     "goldminer", "--seed", "7", "--out", plain),
			 0);
	assert_int_equal(cli(13, "sim", "--cluster", "2x(8gpu,32cpu)", "--trace", tr, "--policy",
			     "goldminer", "--seed", "7", "--out", one, "--seeds", "1"),
			 0);
	assert_true(files_equal("seeds-plain/summary.json", "seeds-one/summary.json"));
	assert_true(files_equal("seeds-plain/jobs.tsv", "seeds-one/jobs.tsv"));
	assert_true(files_equal("seeds-plain/timeseries.tsv", "seeds-one/timeseries.tsv"));
	assert_int_equal(cli(13, "sim", "--cluster", "2x(8gpu,32cpu)", "--trace", tr, "--policy",
			     "goldminer", "--seed", "7", "--out", three, "--seeds", "3"),
			 0);
	for (int k = 0; k < 3; k++) {
		snprintf(f, sizeof(f), "%s/seed-%d/summary.json", three, 7 + k);
		char *js = slurp(f);
		assert_non_null(js);
		x[k] = strtod(strstr(js, "\"avg_jct\":") + 10, NULL);
		mean += x[k] / 3;
		free(js);
	}
	assert_true(files_equal("seeds-plain/jobs.tsv", "seeds-three/seed-7/jobs.tsv"));
	assert_false(x[0] == x[1] && x[1] == x[2]); /* the seeds differ */
	snprintf(f, sizeof(f), "%s/summary.json", three);
	char *js = slurp(f);
	assert_non_null(js);
	assert_non_null(strstr(js, "\"policy\":\"goldminer\",\"seeds\":3,\"seed\":7,"));
	/* each run's figure is printed to 0.1 s: the mean of those is within 0.1 */
	assert_true(fabs(strtod(strstr(js, "\"avg_jct\":") + 10, NULL) - mean) < 0.1);
	double sd = sqrt(((x[0] - mean) * (x[0] - mean) + (x[1] - mean) * (x[1] - mean) +
			  (x[2] - mean) * (x[2] - mean)) /
			 2);
	double half = strtod(strstr(js, "\"avg_jct_ci95\":") + 15, NULL);
	assert_true(fabs(half - 4.302653 * sd / sqrt(3)) < 0.2);
	free(js);
	/* 0 seeds, too many, and a range past 2^64 - 1 are usage errors */
	assert_int_equal(cli(9, "sim", "--cluster", "2x(8gpu,32cpu)", "--trace", tr, "--policy",
			     "static", "--seeds", "0"),
			 2);
	assert_int_equal(cli(9, "sim", "--cluster", "2x(8gpu,32cpu)", "--trace", tr, "--policy",
			     "static", "--seeds", "1001"),
			 2);
	assert_int_equal(cli(11, "sim", "--cluster", "2x(8gpu,32cpu)", "--trace", tr, "--policy",
			     "static", "--seeds", "2", "--seed", "18446744073709551615"),
			 2);
}

/*
 * gm_sim_run in a forked child with alarm() as a safety net: a run that never
 * ends is killed by SIGALRM and fails the test instead of hanging it. Nothing is
 * timed: callers check the result and the events counted.
 */
struct bounded {
	int rc;
	struct gm_sim_summary sum;
	char err[512];
};

static void run_bounded(const struct world *w, const struct gm_sim_opts *o, struct bounded *b)
{
	int fd[2], status;
	pid_t pid;

	memset(b, 0, sizeof(*b));
	assert_int_equal(pipe(fd), 0);
	assert_true((pid = fork()) >= 0);
	if (pid == 0) {
		close(fd[0]);
		alarm(60);
		b->rc = gm_sim_run(w->c, w->t, &w->p, o, &b->sum, b->err, sizeof(b->err));
		_exit(write(fd[1], b, sizeof(*b)) == (ssize_t)sizeof(*b) ? 0 : 3);
	}
	close(fd[1]);
	size_t got = 0;
	ssize_t k;
	while (got < sizeof(*b) && (k = read(fd[0], (char *)b + got, sizeof(*b) - got)) > 0)
		got += (size_t)k;
	close(fd[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (WIFSIGNALED(status))
		fail_msg("the run did not end: killed by signal %d", WTERMSIG(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(got, sizeof(*b));
}

/*
 * A GPU node with 0 vCPUs: refused under static, proportional, synergy-tune and
 * node-elastic, whose jobs pre-process on their own nodes only (a job placed
 * there would run at 0 samples/s for ever: before, the run looped on its samples),
 * run under goldminer (pool workers from the CPU node feed it) and unlimited-cpu.
 */
static void test_zero_vcpu_node_never_hangs(void **st)
{
	(void)st;
	struct world w;
	struct gm_sim_opts o;
	struct bounded b;

	load(&w, "2x(8gpu,0cpu)+1x(0gpu,16cpu)", "synth:jobs=20,seed=4", NULL);
	gm_sim_opts_defaults(&o);
	for (int p = 0; p < GM_SIM_NPOLICY; p++) {
		o.policy = (enum gm_sim_policy)p;
		run_bounded(&w, &o, &b);
		if (p == GM_SIM_STATIC || p == GM_SIM_PROPORTIONAL || p == GM_SIM_SYNERGY ||
		    p == GM_SIM_NODE_ELASTIC) {
			assert_int_equal(b.rc, -EINVAL);
			assert_non_null(strstr(b.err, "node 0"));
			assert_non_null(strstr(b.err, "0 vCPUs"));
			assert_non_null(strstr(b.err, gm_sim_policy_name(o.policy)));
			continue;
		}
		if (b.rc)
			fail_msg("%s: %s", gm_sim_policy_name(o.policy), b.err);
		assert_int_equal(b.sum.jobs, 20);
		assert_true(b.sum.events <= 2 * 20 + b.sum.samples + 1);
	}
	unload(&w);
}

/*
 * A job slowed 4x by its capped vCPUs runs 3.79 simulated centuries: before, that
 * was 2e8 samples at the automatic 60 s interval; now the interval follows the
 * trace's span and samples stop at GM_SIM_MAX_SAMPLES, so events stay bounded.
 */
static void test_long_run_samples_bounded(void **st)
{
	(void)st;
	struct world w;
	struct gm_sim_opts o;
	struct bounded b;

	load(&w, "1x(8gpu,1cpu)", put("long.tsv", "# goldminer-trace v1\n0\t3e9\t1\t4\t-1\n"),
	     NULL);
	gm_sim_opts_defaults(&o);
	run_bounded(&w, &o, &b);
	if (b.rc)
		fail_msg("%s", b.err);
	assert_int_equal(b.sum.jobs, 1);
	assert_true(b.sum.samples <= GM_SIM_MAX_SAMPLES);
	assert_true(b.sum.events <= 2 + GM_SIM_MAX_SAMPLES + 1);
	assert_int_equal(b.sum.samples_capped, 1);
	/* an explicit interval that would write 3e12 rows is refused up front */
	o.sample_interval = 0.001;
	run_bounded(&w, &o, &b);
	assert_int_equal(b.rc, -EINVAL);
	assert_non_null(strstr(b.err, "the accepted range is >= 3000 s"));
	o.sample_interval = 3000; /* the least accepted */
	run_bounded(&w, &o, &b);
	assert_int_equal(b.rc, 0);
	unload(&w);
}

/* Inputs built by hand are held to the loaders' ranges. */
static void test_hand_built_inputs_checked(void **st)
{
	(void)st;
	struct world w;
	struct gm_sim_opts o;
	struct gm_sim_summary m;
	char err[512];

	load(&w, "1x(4gpu,8cpu)", put("h.tsv", "# goldminer-trace v1\n0\t10\t1\t2\t-1\n"), NULL);
	gm_sim_opts_defaults(&o);
	w.t->jobs[0].duration = 1e300;
	assert_int_equal(gm_sim_run(w.c, w.t, &w.p, &o, &m, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "line 2"));
	w.t->jobs[0].duration = 10;
	w.p.c[0].cpu_rate = 1e-300;
	assert_int_equal(gm_sim_run(w.c, w.t, &w.p, &o, &m, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "profile class 0"));
	gm_profile_default(&w.p);
	w.c->max_gpus = UINT32_MAX; /* would size the buckets at 0 */
	assert_int_equal(gm_sim_run(w.c, w.t, &w.p, &o, &m, err, sizeof(err)), -EINVAL);
	w.c->max_gpus = 4;
	assert_int_equal(gm_sim_run(w.c, w.t, &w.p, &o, &m, err, sizeof(err)), 0);
	unload(&w);
}

static void test_cli_bounds(void **st)
{
	(void)st;
	const char *tr = put("clilong.tsv", "# goldminer-trace v1\n0\t3e9\t1\t4\t-1\n");
	assert_int_equal(cli(8, "sim", "--cluster", "1x(8gpu,8cpu)", "--trace", tr, "--policy",
			     "static", "--sample-interval=0.5"),
			 2);
	assert_int_equal(
	    cli(7, "sim", "--cluster", "1x(8gpu,0cpu)", "--trace", tr, "--policy", "static"), 1);
	assert_int_equal(cli(7, "sim", "--cluster", "1x(8gpu,4294967304cpu)", "--trace", tr,
			     "--policy", "static"),
			 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_golden),
	    cmocka_unit_test(test_local_and_remote_workers),
	    cmocka_unit_test(test_fifo_backfill),
	    cmocka_unit_test(test_spread_and_unplaceable),
	    cmocka_unit_test(test_determinism),
	    cmocka_unit_test(test_invariants),
	    cmocka_unit_test(test_synergy_tune_by_hand),
	    cmocka_unit_test(test_synergy_tune_arrival_order),
	    cmocka_unit_test(test_synergy_tune_trims_one_peer),
	    cmocka_unit_test(test_work_at_share),
	    cmocka_unit_test(test_synergy_tune_memory),
	    cmocka_unit_test(test_synergy_tune_asks),
	    cmocka_unit_test(test_rounds_preempt_in_arrival_order),
	    cmocka_unit_test(test_backfill_all_holds_nothing),
	    cmocka_unit_test(test_placement_where_the_ideal_fits),
	    cmocka_unit_test(test_node_order_spreads_a_job_that_would_wait),
	    cmocka_unit_test(test_synergy_tune_caps_demand_at_a_node),
	    cmocka_unit_test(test_memory_columns),
	    cmocka_unit_test(test_pool_policies_by_hand),
	    cmocka_unit_test(test_goldminer_caps_local_surplus),
	    cmocka_unit_test(test_node_elastic_by_hand),
	    cmocka_unit_test(test_every_policy_passes_its_audit_in_rounds),
	    cmocka_unit_test(test_node_cores_by_hand),
	    cmocka_unit_test(test_cores_per_node_by_hand),
	    cmocka_unit_test(test_errors),
	    cmocka_unit_test(test_cli),
	    cmocka_unit_test(test_class_independent_of_order),
	    cmocka_unit_test(test_cli_seeds),
	    cmocka_unit_test(test_cli_pair),
	    cmocka_unit_test(test_zero_vcpu_node_never_hangs),
	    cmocka_unit_test(test_long_run_samples_bounded),
	    cmocka_unit_test(test_hand_built_inputs_checked),
	    cmocka_unit_test(test_cli_bounds),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
