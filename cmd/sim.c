/*
 * sim.c - `goldminer sim`: load a cluster, a trace and a profile, run one policy
 * (or all of them on the same input) and print one JSON summary line each; with
 * --seeds N, N runs per policy and the mean and 95% interval of each figure
 * (sim_stats.h).
 *
 * Options come from one declared table (name, argument, help) as in ROSS; the
 * shared parser (cmd.h) reads argv and writes the help text from it. The simulator
 * itself is the library's (sim.h); this file only turns options into
 * struct gm_sim_opts and files into inputs. Input errors ("FILE:LINE: what") exit
 * 1, usage errors 2.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cmd.h"
#include "goldminer/cluster.h"
#include "goldminer/profile.h"
#include "goldminer/scenario.h"
#include "goldminer/scengen.h"
#include "goldminer/sim.h"
#include "goldminer/sim_stats.h"
#include "goldminer/trace.h"
#include "goldminer/util.h"

#define STR_(x) #x
#define STR(x)	STR_(x)

#define SYNOPSIS                                                                                   \
	"goldminer sim --cluster SPEC --trace SPEC --policy NAME [options]\n"                      \
	"       goldminer sim --scenario FILE [--lending off|on|both] [--out DIR]\n"               \
	"       goldminer sim --scenario-gen SEED [--epoch-images N] [--out FILE]\n"               \
	"       goldminer sim --pair NUM.tsv:POLICY,DEN.tsv:POLICY [--figure NAME]"

enum {
	O_CLUSTER,
	O_TRACE,
	O_POLICY,
	O_PROFILE,
	O_SEED,
	O_SEEDS,
	O_OUT,
	O_SCALE,
	O_REMOTE,
	O_LOCAL,
	O_CORES,
	O_INTERVAL,
	O_BACKFILL,
	O_MAXJOBS,
	O_WRITE,
	O_CHECK,
	O_WORKAT,
	O_PERSEED,
	O_VS,
	O_SCENARIO,
	O_LENDING,
	O_SCENGEN,
	O_EPOCHIMG,
	O_ROUND,
	O_PLACEMENT,
	O_ASKS,
	O_PAIR,
	O_FIGURE,
	O_HELP,
	O_N
};

static const struct cmd_opt opts[O_N] = {
    [O_CLUSTER] = {"cluster", "SPEC", 0,
		   "8x(8gpu,96cpu) (memory and cores optional: 8x(8gpu,24cpu,500gb,12.5cores)), "
		   "an openb node list or the PAI machine list"},
    [O_TRACE] = {"trace", "SPEC", 0,
		 "openb pod list, philly.csv, a goldminer TSV or synth:k=v,..."},
    [O_POLICY] = {"policy", "NAME", 0,
		  "static|proportional|goldminer|unlimited-cpu|synergy-tune|cachew|pecan|"
		  "node-elastic, a "
		  "comma-separated list of them, or all"},
    [O_PROFILE] = {"profile", "FILE", 0,
		   "profile table TSV (default: built-in traces/profile-pytorch.tsv)"},
    [O_SEED] = {"seed", "N", 0, "seed of the model-class draw (default 1)"},
    [O_SEEDS] = {"seeds", "N", 0,
		 "run seeds SEED..SEED+N-1; report mean and 95% CI (Student t) of each figure "
		 "(1)"},
    [O_OUT] = {"out", "DIR", 0,
	       "write jobs.tsv, timeseries.tsv, summary.json (DIR/POLICY with all)"},
    [O_SCALE] = {"arrival-scale", "F", 0, "divide submit times by F to load a small cluster (1)"},
    [O_REMOTE] = {"remote-cost", "F", 0,
		  "fraction of a remote data worker's rate lost; local ones lose nothing "
		  "(" STR(GM_SIM_REMOTE_COST) ", an assumption until measured)"},
    [O_LOCAL] = {"local-min", "F|request", 0,
		 "goldminer, node-elastic, cachew, pecan: vCPUs a job reserves per GPU at "
		 "placement, at most its request (1); request: its whole request, as static"},
    [O_CORES] = {"node-cores", "F", 0,
		 "every node's workers time-share F cores, max-min fair (0: a vCPU is a core, "
		 "or the cluster shape's cores per node, e.g. 3x(1gpu,4cpu,0.75cores))"},
    [O_INTERVAL] = {"sample-interval", "S", 0, "time-series period in s (last submit / 500)"},
    [O_BACKFILL] = {"backfill", "N|all", 0,
		    "try N queued jobs behind a blocked head (0 = FIFO); all: every queued job "
		    "that fits starts, no node is held for the head (Synergy's FIFO)"},
    [O_MAXJOBS] = {"max-jobs", "N", 0, "replay only the first N jobs of the trace"},
    [O_WRITE] = {"write-trace", "FILE", 0, "also write the loaded trace as a goldminer TSV"},
    [O_CHECK] = {"check", NULL, 0, "audit every node after every event (slow)"},
    [O_WORKAT] = {"work-at", "WHAT", 0,
		  "a job's trace duration is its run at its 'request'ed vCPUs or at its "
		  "fair 'share' of the cluster's (request)"},
    [O_PERSEED] = {"per-seed", "FILE", 0,
		   "with --seeds: one TSV row per policy and seed (the paired runs)"},
    [O_VS] = {"vs", "POLICY[,..]", 0,
	      "with --seeds: paired per-seed avg JCT ratios of every policy and POLICY, "
	      "median and bootstrap 95% interval"},
    [O_SCENARIO] = {"scenario", "FILE", 0,
		    "instead of --cluster, --trace and --policy: hosts with fractional cores and "
		    "jobs pinned to a home with a consumer rate (traces/cluster.tsv; "
		    "scenario.h)"},
    [O_LENDING] = {"lending", "off|on|both", 0,
		   "with --scenario: jobs borrow other hosts' idle cores (on) or not (both)"},
    [O_SCENGEN] = {"scenario-gen", "SEED", 0,
		   "write scenario SEED of the seeded family (scengen.h; docs/USAGE.md lists its "
		   "ranges) to --out FILE (default: standard output), for --scenario and the "
		   "cluster bench"},
    [O_EPOCHIMG] = {"epoch-images", "N", 0,
		    "with --scenario-gen: each job's images are whole multiples of N, the "
		    "bench's photo count (" STR(GM_SCENGEN_EPOCH_IMAGES) ")"},
    [O_ROUND] = {"round", "S", 0,
		 "scheduling rounds of S seconds with preemption, as Synergy's simulator (300 "
		 "there): every running job is placed again each round (0: continuous time)"},
    [O_PLACEMENT] = {"placement", "WHAT", 0,
		     "'best-fit' on GPUs (default; synergy-tune first takes GPUs node by node "
		     "where its ideal fits, as Synergy's random placement); 'node-order': every "
		     "policy takes a job's GPUs node by node where its demand fits, spreading it "
		     "rather than waiting for one node (Synergy's random placement, FIFO+fair's "
		     "and FIFO+tune's); or 'demand': a node where the policy's demand fits first "
		     "(synergy-tune: its ideal vCPUs and memory, as Synergy's placement mode)"},
    [O_ASKS] = {"tune-asks", "WHAT", 0,
		"synergy-tune asks for the profile column ask_cpu_per_gpu (Synergy's profiled "
		"CPUs, default: 'profile') or its 'ideal' vCPUs (the fewest that reach its GPU "
		"rate; also where a class has no ask)"},
    [O_PAIR] = {"pair", "A,B", 0,
		"instead of a run: the paired per-seed ratio A / B of two --per-seed files' "
		"runs, A and B each FILE:POLICY (runs with different options, e.g. "
		"--local-min), as --vs prints it"},
    [O_FIGURE] = {"figure", "NAME", 0,
		  "with --pair: the per-seed column compared (avg_jct; gpu_util, gpu_busy, "
		  "...)"},
    [O_HELP] = {"help", NULL, 0, "this help"},
};

#define SIM_MAX_SEEDS 1000 /* --seeds: runs per policy */

/* What the command line asks for. */
struct sim_args {
	const char *val[O_N];
	struct gm_sim_opts o;
	int first, last; /* policies to run: those of run between first and last */
	unsigned run;	 /* bit p set = policy p runs */
	uint64_t max_jobs;
	uint64_t seeds; /* runs per policy, seeds o.seed .. o.seed + seeds - 1 */
	unsigned vs;	/* --vs: bit p set = compare every policy with policy p */
	/* with --seeds: every run's summary, [policy * seeds + k] */
	struct gm_sim_summary *runs;
};

static int mkdirs(const char *dir)
{
	char buf[4096];
	snprintf(buf, sizeof(buf), "%s", dir);
	for (char *p = buf + 1; *p; p++)
		if (*p == '/') {
			*p = 0;
			if (mkdir(buf, 0777) && errno != EEXIST)
				return -errno;
			*p = '/';
		}
	if (mkdir(buf, 0777) && errno != EEXIST)
		return -errno;
	return 0;
}

static int get_vs(struct sim_args *a);

/* Turn the option values into simulator options; -EINVAL after a message. */
static int get_numbers(struct sim_args *a)
{
	const char **v = a->val;
	struct gm_sim_opts *o = &a->o;
	uint64_t x;

	if (v[O_SEED] && cmd_u64("sim", "--seed", v[O_SEED], 0, UINT64_MAX, &o->seed))
		return -EINVAL;
	if (v[O_SCALE] && cmd_double("sim", "--arrival-scale", v[O_SCALE], 1e-9, &o->arrival_scale))
		return -EINVAL;
	if (v[O_REMOTE] && (cmd_double("sim", "--remote-cost", v[O_REMOTE], 0, &o->remote_cost) ||
			    o->remote_cost >= 1)) {
		cmd_err("sim", "--remote-cost", NULL, "must be in [0, 1), not '%s'", v[O_REMOTE]);
		return -EINVAL;
	}
	if (v[O_LOCAL] && !strcmp(v[O_LOCAL], "request"))
		o->local_min = GM_SIM_LOCAL_REQUEST;
	else if (v[O_LOCAL] && cmd_double("sim", "--local-min", v[O_LOCAL], 0, &o->local_min))
		return -EINVAL;
	if (v[O_CORES] && cmd_double("sim", "--node-cores", v[O_CORES], 0, &o->node_cores))
		return -EINVAL;
	if (v[O_INTERVAL] &&
	    cmd_double("sim", "--sample-interval", v[O_INTERVAL], 0, &o->sample_interval))
		return -EINVAL;
	if (v[O_BACKFILL] && !strcmp(v[O_BACKFILL], "all")) {
		o->backfill = GM_SIM_BACKFILL_ALL;
	} else if (v[O_BACKFILL]) {
		if (cmd_u64("sim", "--backfill", v[O_BACKFILL], 0, UINT32_MAX - 1, &x))
			return -EINVAL;
		o->backfill = (uint32_t)x;
	}
	a->seeds = 1;
	if (v[O_SEEDS] && cmd_u64("sim", "--seeds", v[O_SEEDS], 1, SIM_MAX_SEEDS, &a->seeds))
		return -EINVAL;
	if (a->seeds - 1 > UINT64_MAX - o->seed) {
		cmd_err("sim", "--seeds", "lower --seed or --seeds",
			"--seed + --seeds - 1 passes 2^64 - 1");
		return -EINVAL;
	}
	a->max_jobs = UINT64_MAX;
	if (v[O_MAXJOBS] && cmd_u64("sim", "--max-jobs", v[O_MAXJOBS], 0, UINT64_MAX, &a->max_jobs))
		return -EINVAL;
	o->check = v[O_CHECK] != NULL;
	if (v[O_WORKAT]) {
		if (!strcmp(v[O_WORKAT], "share") || !strcmp(v[O_WORKAT], "request")) {
			o->work_at_share = !strcmp(v[O_WORKAT], "share");
		} else {
			cmd_err("sim", "--work-at", NULL, "'share' or 'request', not '%s'",
				v[O_WORKAT]);
			return -EINVAL;
		}
	}
	if ((v[O_PERSEED] || v[O_VS]) && !v[O_SEEDS]) {
		cmd_err("sim", v[O_VS] ? "--vs" : "--per-seed", "add --seeds N",
			"compares runs over several seeds");
		return -EINVAL;
	}
	return get_vs(a);
}

/* --vs POLICY[,POLICY...] into a->vs; -EINVAL after a message. */
static int get_vs(struct sim_args *a)
{
	const char **v = a->val;

	a->vs = 0;
	for (const char *p = v[O_VS]; p && *p;) {
		char name[32];
		size_t k = strcspn(p, ",");
		int q = -1;
		if (k < sizeof(name)) {
			memcpy(name, p, k);
			name[k] = 0;
			q = gm_sim_policy_parse(name);
		}
		if (q < 0) {
			cmd_err("sim", "--vs", "goldminer sim --help lists them",
				"unknown policy in '%s'", v[O_VS]);
			return -EINVAL;
		}
		if (!(a->run & 1u << q)) {
			cmd_err("sim", "--vs", "run it too: --policy all", "policy '%s' is not run",
				name);
			return -EINVAL;
		}
		a->vs |= 1u << q;
		p += k + (p[k] == ',');
	}
	return 0;
}

/* Is an option given beside --LEAD other than --WITH and --out (after a message
 * naming it)? */
static bool other_option(const struct sim_args *a, int lead, int with)
{
	for (int k = 0; k < O_N; k++)
		if (a->val[k] && k != lead && k != with && k != O_OUT) {
			char what[40], says[128];
			snprintf(what, sizeof(what), "--%s", opts[k].name);
			snprintf(says, sizeof(says),
				 "does not go with --%s (only --%s and --out do)", opts[lead].name,
				 opts[with].name);
			cmd_err("sim", what, "leave it out", "%s", says);
			return true;
		}
	return false;
}

/*
 * --scenario: only --lending and --out go with it (the rest describe a trace
 * replay). 0, or -EINVAL after a message and the usage line.
 */
static int scenario_args(struct sim_args *a)
{
	const char *l = a->val[O_LENDING];
	if (!a->val[O_SCENARIO]) {
		cmd_err("sim", "--lending", "add --scenario FILE", "goes with a scenario");
		goto out_usage;
	}
	if (other_option(a, O_SCENARIO, O_LENDING))
		goto out_usage;
	if (l && strcmp(l, "off") && strcmp(l, "on") && strcmp(l, "both")) {
		cmd_err("sim", "--lending", NULL, "'off', 'on' or 'both', not '%s'", l);
		goto out_usage;
	}
	a->first = !l || strcmp(l, "on") ? 0 : 1; /* lending off .. on */
	a->last = !l || strcmp(l, "off") ? 1 : 0;
	return 0;
out_usage:
	fprintf(stderr, "usage: " SYNOPSIS "  (goldminer sim --help)\n");
	return -EINVAL;
}

/*
 * --pair A,B: only --figure goes with it. 0, or -EINVAL after a message and the
 * usage line.
 */
static int pair_args(struct sim_args *a)
{
	const char *p = a->val[O_PAIR];
	if (!p) {
		cmd_err("sim", "--figure", "add --pair A,B", "goes with --pair");
		goto out_usage;
	}
	for (int k = 0; k < O_N; k++)
		if (a->val[k] && k != O_PAIR && k != O_FIGURE) {
			char what[40];
			snprintf(what, sizeof(what), "--%s", opts[k].name);
			cmd_err("sim", what, "leave it out",
				"does not go with --pair (only --figure does)");
			goto out_usage;
		}
	const char *comma = strchr(p, ',');
	if (!comma || strchr(comma + 1, ',') || !strchr(p, ':') || comma[1] == 0 ||
	    !strchr(comma + 1, ':')) {
		cmd_err("sim", "--pair", "e.g. a.tsv:goldminer,b.tsv:goldminer",
			"'%s' is not FILE:POLICY,FILE:POLICY", p);
		goto out_usage;
	}
	return 0;
out_usage:
	fprintf(stderr, "usage: " SYNOPSIS "  (goldminer sim --help)\n");
	return -EINVAL;
}

/* One side of --pair: a policy's figure per seed from a --per-seed file. */
struct pair_side {
	char file[4096], policy[32];
	uint64_t seed[SIM_MAX_SEEDS];
	double v[SIM_MAX_SEEDS];
	size_t n;
};

/* The column of figure fig in the --per-seed header line h, or -1. */
static int pair_column(char *h, const char *fig)
{
	int col = 0;
	for (char *save = NULL, *f = strtok_r(h, "\t\n", &save); f;
	     f = strtok_r(NULL, "\t\n", &save), col++)
		if (col >= 2 && !strcmp(f, fig))
			return col;
	return -1;
}

/*
 * Read side spec = FILE:POLICY (the last colon splits) from a --per-seed file: its
 * rows of POLICY, the seed and the figure's value (finite, > 0). 0 or -1 with err
 * naming the file, line and the fix.
 */
static int pair_read(const char *spec, size_t len, const char *fig, struct pair_side *p, char *err,
		     size_t errlen)
{
	char line[1024];
	size_t fl = len, pl, ln = 1;
	while (fl && spec[fl - 1] != ':')
		fl--;
	fl = fl ? fl - 1 : 0; /* the last colon's index (pair_args saw one) */
	const char *colon = spec + fl;
	pl = len - fl - 1;
	FILE *f = NULL;
	int col;

	if (!fl || fl >= sizeof(p->file) || !pl || pl >= sizeof(p->policy)) {
		snprintf(err, errlen, "--pair: '%.*s' is not FILE:POLICY", (int)len, spec);
		return -1;
	}
	memcpy(p->file, spec, fl);
	p->file[fl] = 0;
	memcpy(p->policy, colon + 1, pl);
	p->policy[pl] = 0;
	p->n = 0;
	if (!(f = fopen(p->file, "r"))) {
		snprintf(err, errlen, "%s: %s (write it with --seeds N --per-seed FILE)", p->file,
			 strerror(errno));
		return -1;
	}
	if (!fgets(line, sizeof(line), f) || strncmp(line, "policy\tseed\t", 12) ||
	    (col = pair_column(line, fig)) < 0) {
		snprintf(err, errlen, "%s: not a --per-seed file with a '%s' column", p->file, fig);
		goto out_err;
	}
	while (fgets(line, sizeof(line), f)) {
		char *save = NULL, *name = strtok_r(line, "\t\n", &save), *x = NULL, *end;
		ln++;
		if (!name || strcmp(name, p->policy))
			continue;
		const char *sd = strtok_r(NULL, "\t\n", &save);
		for (int k = 2; k <= col; k++)
			x = strtok_r(NULL, "\t\n", &save);
		double v = x ? strtod(x, &end) : 0;
		if (!sd || !x || *end || !isfinite(v) || !(v > 0) || p->n == SIM_MAX_SEEDS) {
			snprintf(err, errlen,
				 "%s:%zu: no positive %s for %s (at most %d seeds; write the "
				 "file again with --per-seed)",
				 p->file, ln, fig, p->policy, SIM_MAX_SEEDS);
			goto out_err;
		}
		p->seed[p->n] = strtoull(sd, NULL, 10);
		p->v[p->n++] = v;
	}
	if (!p->n) {
		snprintf(err, errlen, "%s: no rows of policy '%s'", p->file, p->policy);
		goto out_err;
	}
	fclose(f);
	return 0;
out_err:
	fclose(f);
	return -1;
}

/*
 * --pair A,B [--figure F]: the paired ratio F(A) / F(B) over the seeds both files
 * hold (the same seeds, in the same order), printed as --vs prints its ratios with
 * A and B as the names. 0 or -1 with err filled.
 */
static int run_pair(struct sim_args *a, char *err, size_t errlen)
{
	const char *spec = a->val[O_PAIR], *comma = strchr(spec, ',');
	const char *fig = a->val[O_FIGURE] ? a->val[O_FIGURE] : "avg_jct";
	struct pair_side *s = calloc(2, sizeof(*s));
	struct gm_sim_ratio r;
	int rc = -1;

	if (!s) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (pair_read(spec, (size_t)(comma - spec), fig, &s[0], err, errlen) ||
	    pair_read(comma + 1, strlen(comma + 1), fig, &s[1], err, errlen))
		goto out_free;
	if (s[0].n != s[1].n || memcmp(s[0].seed, s[1].seed, s[0].n * sizeof(uint64_t))) {
		snprintf(err, errlen,
			 "--pair: %.1000s holds %zu seeds of %s, %.1000s %zu of %s, not the same "
			 "ones (run both with the same --seed and --seeds)",
			 s[0].file, s[0].n, s[0].policy, s[1].file, s[1].n, s[1].policy);
		goto out_free;
	}
	if (gm_sim_paired_ratio(s[0].v, s[1].v, s[0].n, s[0].seed[0], 2000, &r)) {
		snprintf(err, errlen, "--pair: no ratio of %s", fig);
		goto out_free;
	}
	printf("{\"ratio\":\"%s\",\"num\":\"%.*s\",\"den\":\"%s\",\"seeds\":%zu,"
	       "\"median\":%.4f,\"lo\":%.4f,\"hi\":%.4f,\"min\":%.4f,\"max\":%.4f,"
	       "\"separated\":%s}\n",
	       fig, (int)(comma - spec), spec, comma + 1, r.n, r.median, r.lo, r.hi, r.min, r.max,
	       r.separated ? "true" : "false");
	rc = fflush(stdout) ? -1 : 0;
	if (rc)
		snprintf(err, errlen, "standard output: %s", strerror(errno));
out_free:
	free(s);
	return rc;
}

/*
 * --scenario-gen SEED: only --epoch-images and --out (a file) go with it. 0, or
 * -EINVAL after a message and the usage line.
 */
static int scengen_args(struct sim_args *a)
{
	uint64_t v;
	if (!a->val[O_SCENGEN]) {
		cmd_err("sim", "--epoch-images", "add --scenario-gen SEED", "goes with it");
		goto out_usage;
	}
	if (other_option(a, O_SCENGEN, O_EPOCHIMG))
		goto out_usage;
	if (cmd_u64("sim", "--scenario-gen", a->val[O_SCENGEN], 0, UINT64_MAX, &v) ||
	    (a->val[O_EPOCHIMG] &&
	     cmd_u64("sim", "--epoch-images", a->val[O_EPOCHIMG], 1, 1000000000, &v)))
		goto out_usage;
	return 0;
out_usage:
	fprintf(stderr, "usage: " SYNOPSIS "  (goldminer sim --help)\n");
	return -EINVAL;
}

/* --scenario-gen: the scenario of that seed to --out or stdout; 0 or -1 with err. */
static int run_scengen(struct sim_args *a, char *err, size_t errlen)
{
	struct gm_scengen_opts o = {0};
	struct gm_scenario *s = NULL;
	const char *path = a->val[O_OUT];
	uint64_t seed = strtoull(a->val[O_SCENGEN], NULL, 10); /* checked by scengen_args */
	FILE *f;
	int rc = -1, bad;

	if (a->val[O_EPOCHIMG])
		o.epoch_images = (uint32_t)strtoul(a->val[O_EPOCHIMG], NULL, 10);
	if (gm_scengen_make(&s, seed, &o, err, errlen))
		return -1;
	if (!path) {
		bad = gm_scengen_write(s, seed, stdout) || fflush(stdout);
	} else if ((f = fopen(path, "w"))) {
		bad = gm_scengen_write(s, seed, f);
		bad |= fclose(f);
	} else {
		snprintf(err, errlen, "%s: %s (--out names the scenario file to write)", path,
			 strerror(errno));
		goto out_free;
	}
	if (bad) {
		snprintf(err, errlen, "%s: cannot write the scenario", path ? path : "stdout");
		goto out_free;
	}
	rc = 0;
out_free:
	gm_scenario_destroy(s);
	return rc;
}

/* --round, --placement, --tune-asks (the Synergy comparison); -EINVAL after a message. */
static int get_synergy_opts(struct sim_args *a)
{
	const char **v = a->val;
	struct gm_sim_opts *o = &a->o;
	if (v[O_ROUND] && (cmd_double("sim", "--round", v[O_ROUND], 0, &o->round) ||
			   (o->round > 0 && o->round < 1) || o->round > 1e9)) {
		cmd_err("sim", "--round", NULL, "0 (none) or 1..1e9 seconds, not '%s'", v[O_ROUND]);
		return -EINVAL;
	}
	if (v[O_PLACEMENT] && strcmp(v[O_PLACEMENT], "best-fit") &&
	    strcmp(v[O_PLACEMENT], "node-order") && strcmp(v[O_PLACEMENT], "demand")) {
		cmd_err("sim", "--placement", NULL,
			"'best-fit', 'node-order' or 'demand', not '%s'", v[O_PLACEMENT]);
		return -EINVAL;
	}
	o->place_demand = v[O_PLACEMENT] && !strcmp(v[O_PLACEMENT], "demand");
	o->place_in_order = v[O_PLACEMENT] && !strcmp(v[O_PLACEMENT], "node-order");
	if (v[O_ASKS] && strcmp(v[O_ASKS], "ideal") && strcmp(v[O_ASKS], "profile")) {
		cmd_err("sim", "--tune-asks", NULL, "'ideal' or 'profile', not '%s'", v[O_ASKS]);
		return -EINVAL;
	}
	o->tune_fewest = v[O_ASKS] && !strcmp(v[O_ASKS], "ideal");
	return 0;
}

/* --policy NAME[,NAME...] or all into a->run, first, last; -EINVAL after a message. */
static int parse_policies(struct sim_args *a)
{
	const char *p = a->val[O_POLICY];
	a->run = 0;
	if (!strcmp(p, "all"))
		p += 3, a->run = (1u << GM_SIM_NPOLICY) - 1;
	while (!a->run || *p) {
		char name[32];
		size_t k = strcspn(p, ",");
		int q = -1;
		if (k < sizeof(name)) {
			memcpy(name, p, k);
			name[k] = 0;
			q = gm_sim_policy_parse(name);
		}
		if (q < 0) {
			cmd_err("sim", "--policy", "goldminer sim --help lists them",
				"unknown policy in '%s'", a->val[O_POLICY]);
			return -EINVAL;
		}
		a->run |= 1u << q;
		p += k + (p[k] == ',');
	}
	a->first = __builtin_ctz(a->run);
	a->last = 31 - __builtin_clz(a->run);
	return 0;
}

/* Parse argv into *a: 0 to run, 1 after printing the help, 2 after a usage error. */
static int parse_args(struct sim_args *a, int argc, char **argv)
{
	char *pos[argc > 0 ? argc : 1];
	struct cmd_args ca = {.val = a->val, .pos = pos};
	int rc;

	gm_sim_opts_defaults(&a->o);
	if ((rc = cmd_parse("sim", opts, O_N, argc, argv, &ca)))
		return rc;
	if (a->val[O_HELP]) {
		cmd_usage(stdout, SYNOPSIS, opts, O_N);
		return 1;
	}
	if (ca.npos) {
		cmd_err("sim", ca.pos[0], NULL, "unexpected argument");
		goto out_usage;
	}
	if (a->val[O_PAIR] || a->val[O_FIGURE])
		return pair_args(a) ? 2 : 0;
	if (a->val[O_SCENGEN] || a->val[O_EPOCHIMG])
		return scengen_args(a) ? 2 : 0;
	if (a->val[O_SCENARIO] || a->val[O_LENDING])
		return scenario_args(a) ? 2 : 0;
	if (!a->val[O_CLUSTER] || !a->val[O_TRACE] || !a->val[O_POLICY]) {
		cmd_err("sim", NULL, NULL, "--cluster, --trace and --policy are required");
		goto out_usage;
	}
	if (parse_policies(a))
		goto out_usage;
	if (get_numbers(a) || get_synergy_opts(a))
		goto out_usage;
	return 0;
out_usage:
	fprintf(stderr, "usage: " SYNOPSIS "  (goldminer sim --help)\n");
	return 2;
}

/* Write text + newline to DIR/summary.json; 0 or -1 with err filled. */
static int write_summary(const char *dir, const char *text, char *err, size_t errlen)
{
	char path[4200];
	FILE *f;

	snprintf(path, sizeof(path), "%s/summary.json", dir);
	if (!(f = fopen(path, "w")))
		goto out_err;
	int bad = fprintf(f, "%s\n", text) < 0;
	if (fclose(f) || bad)
		goto out_err;
	return 0;
out_err:
	snprintf(err, errlen, "%s: %s", path, strerror(errno ? errno : EIO));
	return -1;
}

/*
 * Run policy o->policy once per seed (into DIR/seed-K with --out), then print the
 * mean and 95% CI of every figure: JSON on stdout (and DIR/summary.json), text on
 * stderr. 0 or -1 with err filled.
 */
static int run_seeds(const struct gm_cluster *c, const struct gm_trace *t,
		     const struct gm_profile *prof, struct sim_args *a, const char *dir, char *err,
		     size_t errlen)
{
	struct gm_sim_opts o = a->o;
	struct gm_sim_summary *runs = a->runs + (size_t)a->o.policy * a->seeds;
	char sub[4200], line[2048];
	int rc = -1;

	for (uint64_t k = 0; k < a->seeds; k++) {
		o.seed = a->o.seed + k;
		o.out_dir = NULL;
		if (dir) {
			snprintf(sub, sizeof(sub), "%s/seed-%llu", dir, (unsigned long long)o.seed);
			if ((rc = mkdirs(sub))) {
				snprintf(err, errlen, "%s: %s", sub, strerror(-rc));
				goto out_free;
			}
			o.out_dir = sub;
		}
		if ((rc = gm_sim_run(c, t, prof, &o, &runs[k], err, errlen)))
			goto out_free;
	}
	if (gm_sim_seeds_json(runs, a->seeds, (unsigned long long)a->o.seed, line, sizeof(line)) <
	    0) {
		snprintf(err, errlen, "out of memory");
		goto out_free;
	}
	printf("%s\n", line);
	fflush(stdout);
	rc = dir ? write_summary(dir, line, err, errlen) : 0;
	gm_sim_seeds_text(runs, a->seeds, line, sizeof(line));
	cmd_note("sim", "%s", line);
out_free:
	return rc ? -1 : 0;
}

/* --per-seed FILE: one row per policy run and seed. 0 or -1 with err filled. */
static int write_per_seed(const struct sim_args *a, const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "w");
	int bad;

	if (!f)
		goto out_err;
	bad = fprintf(f, "policy\tseed\tavg_jct\tp50_jct\tp95_jct\tavg_queue\tgpu_util\tgpu_busy"
			 "\tcpu_util\tmakespan\n") < 0;
	for (int p = a->first; p <= a->last; p++)
		for (uint64_t k = 0; k < a->seeds && a->run & 1u << p; k++) {
			const struct gm_sim_summary *m = &a->runs[(size_t)p * a->seeds + k];
			bad |=
			    fprintf(f, "%s\t%llu\t%.1f\t%.1f\t%.1f\t%.1f\t%.4f\t%.4f\t%.4f\t%.1f\n",
				    m->policy, (unsigned long long)(a->o.seed + k), m->avg_jct,
				    m->p50_jct, m->p95_jct, m->avg_queue, m->gpu_util, m->gpu_busy,
				    m->cpu_util, m->makespan) < 0;
		}
	if (fclose(f) || bad)
		goto out_err;
	return 0;
out_err:
	snprintf(err, errlen, "%s: %s", path, strerror(errno ? errno : EIO));
	return -1;
}

/* One paired ratio avg JCT(num) / avg JCT(den) over the seeds as a JSON line. */
static int print_ratio(const struct sim_args *a, int num, int den, double *x, double *y)
{
	struct gm_sim_ratio r;
	for (uint64_t k = 0; k < a->seeds; k++) {
		x[k] = a->runs[(size_t)num * a->seeds + k].avg_jct;
		y[k] = a->runs[(size_t)den * a->seeds + k].avg_jct;
	}
	if (gm_sim_paired_ratio(x, y, a->seeds, a->o.seed, 2000, &r))
		return -1;
	printf("{\"ratio\":\"avg_jct\",\"num\":\"%s\",\"den\":\"%s\",\"seeds\":%zu,"
	       "\"median\":%.4f,\"lo\":%.4f,\"hi\":%.4f,\"min\":%.4f,\"max\":%.4f,"
	       "\"separated\":%s}\n",
	       gm_sim_policy_name((enum gm_sim_policy)num),
	       gm_sim_policy_name((enum gm_sim_policy)den), r.n, r.median, r.lo, r.hi, r.min, r.max,
	       r.separated ? "true" : "false");
	return 0;
}

/*
 * --vs V: for every other policy P, the paired per-seed ratios P / V and V / P of
 * the average JCT (median, bootstrap of 2000 resamples keyed by the first seed).
 */
static int print_ratios(const struct sim_args *a, char *err, size_t errlen)
{
	double *x = malloc(a->seeds * sizeof(double)), *y = malloc(a->seeds * sizeof(double));
	int rc = -1;

	if (!x || !y) {
		snprintf(err, errlen, "out of memory");
		goto out_free;
	}
	for (int v = a->first; v <= a->last; v++) {
		if (!(a->vs & 1u << v))
			continue;
		for (int p = a->first; p <= a->last; p++) {
			if (p == v || (p < v && a->vs & 1u << p) || !(a->run & 1u << p))
				continue; /* itself, or printed with p as the one compared with */
			if (print_ratio(a, p, v, x, y) || print_ratio(a, v, p, x, y)) {
				snprintf(err, errlen, "%s / %s: no ratio (a run without jobs?)",
					 gm_sim_policy_name((enum gm_sim_policy)p),
					 gm_sim_policy_name((enum gm_sim_policy)v));
				goto out_free;
			}
		}
	}
	fflush(stdout);
	rc = 0;
out_free:
	free(x);
	free(y);
	return rc;
}

/* Run the policies asked for, one JSON line each; 0 or -1 with err filled. */
static int run_policies(const struct gm_cluster *c, const struct gm_trace *t,
			const struct gm_profile *prof, struct sim_args *a, char *err, size_t errlen)
{
	struct gm_sim_opts *o = &a->o;
	const char *out = a->val[O_OUT];
	int rc;

	for (int p = a->first; p <= a->last; p++) {
		struct gm_sim_summary sum;
		char dir[4096], line[1024];
		if (!(a->run & 1u << p))
			continue;
		o->policy = (enum gm_sim_policy)p;
		o->out_dir = NULL;
		if (out) {
			if (a->first != a->last)
				snprintf(dir, sizeof(dir), "%s/%s", out,
					 gm_sim_policy_name(o->policy));
			else
				snprintf(dir, sizeof(dir), "%s", out);
			if ((rc = mkdirs(dir))) {
				snprintf(err, errlen, "%s: %s", dir, strerror(-rc));
				return -1;
			}
			o->out_dir = dir;
		}
		if (a->runs) {
			if (run_seeds(c, t, prof, a, o->out_dir, err, errlen))
				return -1;
			continue;
		}
		if (gm_sim_run(c, t, prof, o, &sum, err, errlen))
			return -1;
		gm_sim_summary_json(&sum, 1, line, sizeof(line));
		printf("%s\n", line);
		fflush(stdout);
		if (sum.samples_capped && out)
			cmd_err("sim", sum.policy, "pass a larger --sample-interval",
				"the time series stopped at %u rows, before the run ended (its "
				"last row is the final state)",
				GM_SIM_MAX_SAMPLES);
	}
	if (a->runs && a->val[O_PERSEED] && write_per_seed(a, a->val[O_PERSEED], err, errlen))
		return -1;
	if (a->runs && a->vs && print_ratios(a, err, errlen))
		return -1;
	return 0;
}

/* DIR/jobs.tsv and DIR/summary.json of one scenario run; 0 or -1 with err filled. */
static int write_scenario(const char *dir, const struct gm_scenario *sc,
			  const struct gm_scen_result *res, const char *json, char *err,
			  size_t errlen)
{
	char path[4200];
	FILE *f;
	int bad;

	snprintf(path, sizeof(path), "%s/jobs.tsv", dir);
	if (!(f = fopen(path, "w")))
		goto out_err;
	bad = fprintf(f, "job\thome\tsubmit_s\timages\trate_img_s\tend_s\tjct_s\tbound_s"
			 "\tremote_images\n") < 0;
	for (size_t k = 0; k < sc->njobs; k++) {
		const struct gm_scen_job *j = &sc->job[k];
		bad |= fprintf(f, "%s\t%s\t%.6g\t%.10g\t%.6g\t%.3f\t%.3f\t%.3f\t%.0f\n", j->name,
			       sc->node[j->home].name, j->submit, j->images, j->rate, res[k].end,
			       res[k].jct, res[k].bound, res[k].remote) < 0;
	}
	if (fclose(f) || bad)
		goto out_err;
	return write_summary(dir, json, err, errlen);
out_err:
	snprintf(err, errlen, "%s: %s", path, strerror(errno ? errno : EIO));
	return -1;
}

/* --scenario: each lending mode asked for, one JSON line each; 0 or -1 with err. */
static int run_scenario(struct sim_args *a, char *err, size_t errlen)
{
	struct gm_scenario *sc = NULL;
	struct gm_scen_result *res = NULL;
	const char *out = a->val[O_OUT];
	int rc = -1;

	if (gm_scenario_load(&sc, a->val[O_SCENARIO], err, errlen))
		return -1;
	if (!(res = calloc(sc->njobs, sizeof(*res)))) {
		snprintf(err, errlen, "out of memory");
		goto out_free;
	}
	char name[2048];
	gm_json_quote(name, sizeof(name), a->val[O_SCENARIO]);
	/* what the cluster's CPUs can feed the poor hosts at best, each host at
	 * the family's share of its cores (scengen.h): a bound on any policy */
	double feed = gm_scenario_feedable(sc, GM_SCENGEN_FEED_SHARE);
	for (int lend = a->first; lend <= a->last; lend++) {
		struct gm_scen_summary m;
		char dir[4096], line[4096];
		if (gm_scenario_run(sc, lend, res, &m, err, errlen))
			goto out_free;
		snprintf(line, sizeof(line),
			 "{\"scenario\":%s,\"lending\":\"%s\",\"jobs\":%zu,\"avg_jct\":%.3f,"
			 "\"bound_avg_jct\":%.3f,\"gpu_util\":%.4f,\"makespan\":%.3f,"
			 "\"remote_images\":%.0f,\"events\":%llu,\"feedable\":%.4f}",
			 name, lend ? "on" : "off", m.jobs, m.avg_jct, m.bound_avg_jct, m.gpu_util,
			 m.makespan, m.remote_images, (unsigned long long)m.events, feed);
		printf("%s\n", line);
		fflush(stdout);
		if (!out)
			continue;
		snprintf(dir, sizeof(dir), a->first != a->last ? "%s/lending-%s" : "%s", out,
			 lend ? "on" : "off");
		if ((rc = mkdirs(dir))) {
			snprintf(err, errlen, "%s: %s", dir, strerror(-rc));
			rc = -1;
			goto out_free;
		}
		if ((rc = write_scenario(dir, sc, res, line, err, errlen)))
			goto out_free;
	}
	rc = 0;
out_free:
	free(res);
	gm_scenario_destroy(sc);
	return rc;
}

int gm_cmd_sim(int argc, char **argv)
{
	struct sim_args a = {0};
	struct gm_profile prof;
	struct gm_cluster *c = NULL;
	struct gm_trace *t = NULL;
	char err[8192] = "";
	int ret, rc;

	if ((ret = parse_args(&a, argc, argv)))
		return ret == 1 ? 0 : ret;
	ret = 1;
	/* the modes that replace a trace replay: the first given runs */
	static const struct {
		int opt;
		int (*run)(struct sim_args *a, char *err, size_t errlen);
	} modes[] = {{O_PAIR, run_pair}, {O_SCENGEN, run_scengen}, {O_SCENARIO, run_scenario}};
	for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++)
		if (a.val[modes[m].opt]) {
			if (modes[m].run(&a, err, sizeof(err)))
				goto out_err;
			ret = 0;
			goto out_free;
		}
	if (a.val[O_PROFILE]) {
		if (gm_profile_load(&prof, a.val[O_PROFILE], err, sizeof(err)))
			goto out_err;
	} else {
		gm_profile_default(&prof);
	}
	if (gm_cluster_load(&c, a.val[O_CLUSTER], err, sizeof(err)))
		goto out_err;
	if (gm_trace_load(&t, a.val[O_TRACE], err, sizeof(err)))
		goto out_err;
	if (a.max_jobs < t->n)
		t->n = (size_t)a.max_jobs;
	double least = gm_sim_min_sample_interval(t, &a.o);
	if (a.o.sample_interval > 0 && a.o.sample_interval < least) {
		char hint[96];
		snprintf(hint, sizeof(hint), "the accepted range is >= %.6g s, or 0: automatic",
			 least);
		cmd_err("sim", "--sample-interval", hint,
			"%g s gives more than %u time-series rows over the trace's %.6g s",
			a.o.sample_interval, GM_SIM_MAX_SAMPLES, least * GM_SIM_MAX_SAMPLES);
		ret = 2;
		goto out_free;
	}
	cmd_note("sim",
		 "cluster %u nodes, %llu GPUs, %llu vCPUs; trace %s, %zu jobs "
		 "(left out: %zu CPU-only, %zu never ran, %zu bad times, %zu still running at "
		 "the end; %zu fractional-GPU pods run on one GPU)",
		 c->n, (unsigned long long)c->total_gpus, (unsigned long long)c->total_cpus,
		 t->format, t->n, t->skipped_cpu_only, t->skipped_never_ran, t->skipped_bad_time,
		 t->skipped_censored, t->rounded_fraction);
	if (a.val[O_WRITE] && (rc = gm_trace_write(t, a.val[O_WRITE]))) {
		snprintf(err, sizeof(err), "%s: %s", a.val[O_WRITE], strerror(-rc));
		goto out_err;
	}
	if (a.seeds > 1 && !(a.runs = calloc(GM_SIM_NPOLICY * a.seeds, sizeof(*a.runs)))) {
		snprintf(err, sizeof(err), "out of memory");
		goto out_err;
	}
	if (run_policies(c, t, &prof, &a, err, sizeof(err)))
		goto out_err;
	ret = 0;
	goto out_free;
out_err:
	cmd_err("sim", NULL, NULL, "%s", err);
out_free:
	free(a.runs);
	gm_trace_destroy(t);
	gm_cluster_destroy(c);
	return ret;
}
