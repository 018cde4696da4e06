/*
 * sim_cli.c - `goldminer sim`: load a cluster, a trace and a profile, run one
 * policy (or all of them on the same input) and print one JSON summary line each.
 *
 * Options come from one declared table (name, argument, help) as in ROSS; the help
 * text is generated from it. Input errors ("FILE:LINE: what") exit 1, usage 2.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "goldminer/cli.h"
#include "goldminer/cluster.h"
#include "goldminer/profile.h"
#include "goldminer/sim.h"
#include "goldminer/trace.h"

enum {
	O_CLUSTER,
	O_TRACE,
	O_POLICY,
	O_PROFILE,
	O_SEED,
	O_OUT,
	O_SCALE,
	O_REMOTE,
	O_LOCAL,
	O_INTERVAL,
	O_BACKFILL,
	O_MAXJOBS,
	O_WRITE,
	O_CHECK,
	O_HELP,
	O_N
};

static const struct {
	const char *name, *arg, *help;
} opts[O_N] = {
    [O_CLUSTER] = {"cluster", "SPEC", "8x(8gpu,96cpu), an openb node list or the PAI machine list"},
    [O_TRACE] = {"trace", "SPEC", "openb pod list, philly.csv, a goldminer TSV or synth:k=v,..."},
    [O_POLICY] = {"policy", "NAME", "static|proportional|goldminer|unlimited-cpu|all"},
    [O_PROFILE] = {"profile", "FILE", "profile table TSV (default: built-in traces/profile.tsv)"},
    [O_SEED] = {"seed", "N", "seed of the model-class draw (default 1)"},
    [O_OUT] = {"out", "DIR", "write jobs.tsv, timeseries.tsv, summary.json (DIR/POLICY with all)"},
    [O_SCALE] = {"arrival-scale", "F", "divide submit times by F to load a small cluster (1)"},
    [O_REMOTE] = {"remote-cost", "F", "fraction of a pool worker's rate lost remotely (0.1)"},
    [O_LOCAL] = {"local-min", "F", "goldminer: local vCPUs kept per GPU (1)"},
    [O_INTERVAL] = {"sample-interval", "S", "time-series period in s (last submit / 500)"},
    [O_BACKFILL] = {"backfill", "N", "try N queued jobs behind a blocked head (0 = FIFO)"},
    [O_MAXJOBS] = {"max-jobs", "N", "replay only the first N jobs of the trace"},
    [O_WRITE] = {"write-trace", "FILE", "also write the loaded trace as a goldminer TSV"},
    [O_CHECK] = {"check", NULL, "audit every node after every event (slow)"},
    [O_HELP] = {"help", NULL, "this help"},
};

static void usage(FILE *f)
{
	fprintf(f, "usage: goldminer sim --cluster SPEC --trace SPEC --policy NAME [options]\n\n");
	for (int i = 0; i < O_N; i++) {
		char lhs[64];
		snprintf(lhs, sizeof(lhs), "--%s%s%s", opts[i].name, opts[i].arg ? " " : "",
			 opts[i].arg ? opts[i].arg : "");
		fprintf(f, "  %-24s %s\n", lhs, opts[i].help);
	}
}

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

static int getnum(const char *name, const char *v, double lo, double *out)
{
	char *end;
	double x = strtod(v, &end);
	if (!*v || *end || !isfinite(x) || x < lo) {
		fprintf(stderr, "goldminer sim: --%s: bad value '%s'\n", name, v);
		return -1;
	}
	*out = x;
	return 0;
}

int gm_cli_sim(int argc, char **argv)
{
	const char *val[O_N] = {0};
	struct gm_sim_opts o;
	struct gm_profile prof;
	struct gm_cluster *c = NULL;
	struct gm_trace *t = NULL;
	char err[8192] = "";
	int ret = 2, first, last, rc;
	double x;

	gm_sim_opts_defaults(&o);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *eq;
		int k;
		if (strncmp(a, "--", 2)) {
			fprintf(stderr, "goldminer sim: unexpected argument '%s'\n", a);
			goto out_usage;
		}
		a += 2;
		eq = strchr(a, '=');
		size_t len = eq ? (size_t)(eq - a) : strlen(a);
		for (k = 0; k < O_N; k++)
			if (strlen(opts[k].name) == len && !strncmp(opts[k].name, a, len))
				break;
		if (k == O_N) {
			fprintf(stderr, "goldminer sim: unknown option '%s'\n", argv[i]);
			goto out_usage;
		}
		if (!opts[k].arg) {
			val[k] = "1";
		} else if (eq) {
			val[k] = eq + 1;
		} else if (i + 1 < argc) {
			val[k] = argv[++i];
		} else {
			fprintf(stderr, "goldminer sim: --%s needs %s\n", opts[k].name,
				opts[k].arg);
			goto out_usage;
		}
	}
	if (val[O_HELP]) {
		usage(stdout);
		return 0;
	}
	if (!val[O_CLUSTER] || !val[O_TRACE] || !val[O_POLICY]) {
		fprintf(stderr, "goldminer sim: --cluster, --trace and --policy are required\n");
		goto out_usage;
	}
	if (!strcmp(val[O_POLICY], "all")) {
		first = 0;
		last = GM_SIM_NPOLICY - 1;
	} else if ((first = last = gm_sim_policy_parse(val[O_POLICY])) < 0) {
		fprintf(stderr, "goldminer sim: unknown policy '%s'\n", val[O_POLICY]);
		goto out_usage;
	}
	if (val[O_SEED]) {
		if (getnum("seed", val[O_SEED], 0, &x))
			goto out_usage;
		o.seed = (uint64_t)x;
	}
	if (val[O_SCALE] && getnum("arrival-scale", val[O_SCALE], 1e-9, &o.arrival_scale))
		goto out_usage;
	if (val[O_REMOTE] &&
	    (getnum("remote-cost", val[O_REMOTE], 0, &o.remote_cost) || o.remote_cost >= 1)) {
		fprintf(stderr, "goldminer sim: --remote-cost must be in [0, 1)\n");
		goto out_usage;
	}
	if (val[O_LOCAL] && getnum("local-min", val[O_LOCAL], 0, &o.local_min))
		goto out_usage;
	if (val[O_INTERVAL] && getnum("sample-interval", val[O_INTERVAL], 0, &o.sample_interval))
		goto out_usage;
	if (val[O_BACKFILL]) {
		if (getnum("backfill", val[O_BACKFILL], 0, &x))
			goto out_usage;
		o.backfill = (uint32_t)x;
	}
	o.check = val[O_CHECK] != NULL;

	ret = 1;
	if (val[O_PROFILE]) {
		if (gm_profile_load(&prof, val[O_PROFILE], err, sizeof(err)))
			goto out_err;
	} else {
		gm_profile_default(&prof);
	}
	if (gm_cluster_load(&c, val[O_CLUSTER], err, sizeof(err)))
		goto out_err;
	if (gm_trace_load(&t, val[O_TRACE], err, sizeof(err)))
		goto out_err;
	if (val[O_MAXJOBS]) {
		if (getnum("max-jobs", val[O_MAXJOBS], 0, &x)) {
			ret = 2;
			goto out_free;
		}
		if ((size_t)x < t->n)
			t->n = (size_t)x;
	}
	fprintf(stderr,
		"goldminer sim: cluster %u nodes, %llu GPUs, %llu vCPUs; trace %s, %zu jobs "
		"(left out: %zu CPU-only, %zu never ran, %zu bad times, %zu still running at "
		"the end; %zu fractional-GPU pods run on one GPU)\n",
		c->n, (unsigned long long)c->total_gpus, (unsigned long long)c->total_cpus,
		t->format, t->n, t->skipped_cpu_only, t->skipped_never_ran, t->skipped_bad_time,
		t->skipped_censored, t->rounded_fraction);
	if (val[O_WRITE] && (rc = gm_trace_write(t, val[O_WRITE]))) {
		snprintf(err, sizeof(err), "%s: %s", val[O_WRITE], strerror(-rc));
		goto out_err;
	}
	for (int p = first; p <= last; p++) {
		struct gm_sim_summary sum;
		char dir[4096], line[1024];
		o.policy = (enum gm_sim_policy)p;
		o.out_dir = NULL;
		if (val[O_OUT]) {
			if (first != last)
				snprintf(dir, sizeof(dir), "%s/%s", val[O_OUT],
					 gm_sim_policy_name(o.policy));
			else
				snprintf(dir, sizeof(dir), "%s", val[O_OUT]);
			if ((rc = mkdirs(dir))) {
				snprintf(err, sizeof(err), "%s: %s", dir, strerror(-rc));
				goto out_err;
			}
			o.out_dir = dir;
		}
		if (gm_sim_run(c, t, &prof, &o, &sum, err, sizeof(err)))
			goto out_err;
		gm_sim_summary_json(&sum, 1, line, sizeof(line));
		printf("%s\n", line);
		fflush(stdout);
	}
	ret = 0;
	goto out_free;
out_err:
	fprintf(stderr, "goldminer sim: %s\n", err);
out_free:
	gm_trace_destroy(t);
	gm_cluster_destroy(c);
	return ret;
out_usage:
	fprintf(stderr, "usage: goldminer sim --cluster SPEC --trace SPEC --policy NAME [options]"
			"  (goldminer sim --help)\n");
	return 2;
}
