/*
 * fuzz_trace.c - fuzz target: arbitrary bytes as a trace file (openb, Philly or the
 * project's TSV, picked by the header) through gm_trace_load. Checks: 0 with a
 * sane, sorted trace, or an error whose message names the file. A loaded trace
 * (its first 64 jobs) then runs under every policy on a small cluster with a
 * 0-vCPU GPU node: each run must end (libFuzzer's -timeout catches one that
 * does not) with 0 or an error with a message.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "goldminer/cluster.h"
#include "goldminer/profile.h"
#include "goldminer/sim.h"
#include "goldminer/trace.h"

/* Every policy on c and t (at most 64 jobs): 0, or an error with a message. */
static void run_all(const char *cluster, struct gm_trace *t)
{
	static struct gm_profile prof;
	struct gm_cluster *c = NULL;
	struct gm_sim_opts o;
	struct gm_sim_summary sum;
	char err[512];
	size_t n = t->n;

	gm_profile_default(&prof);
	if (gm_cluster_load(&c, cluster, err, sizeof(err)))
		abort();
	t->n = n < 64 ? n : 64;
	gm_sim_opts_defaults(&o);
	for (int p = 0; p < GM_SIM_NPOLICY; p++) {
		o.policy = (enum gm_sim_policy)p;
		err[0] = 0;
		int rc = gm_sim_run(c, t, &prof, &o, &sum, err, sizeof(err));
		if (rc == -ENOTRECOVERABLE || rc == -EDEADLK)
			abort(); /* a broken invariant or a stall: a bug */
		if (rc)
			gm_fuzz_check_msg(err, sizeof(err));
		else if (sum.samples > GM_SIM_MAX_SAMPLES ||
			 sum.events > 2 * (uint64_t)t->n + sum.samples + 1)
			abort(); /* more events than the jobs and samples justify */
	}
	t->n = n;
	gm_cluster_destroy(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[64], err[512];
	int fd = gm_fuzz_memfile(data, size, path, sizeof(path));
	if (fd < 0)
		return 0;
	struct gm_trace *t = NULL;
	int rc = gm_trace_load(&t, path, err, sizeof(err));
	close(fd);
	if (rc) {
		if (t)
			abort();
		gm_fuzz_check_msg(err, sizeof(err));
		if (!strstr(err, path))
			abort(); /* an error names the file */
		return 0;
	}
	for (size_t i = 0; i < t->n; i++) {
		const struct gm_job *j = &t->jobs[i];
		if (!isfinite(j->submit) || !isfinite(j->duration) || j->duration <= 0 ||
		    j->gpus < 1 || !(j->vcpu >= 0) || (i && j->submit < t->jobs[i - 1].submit) ||
		    j->duration > GM_TRACE_MAX_SECONDS || j->submit > GM_TRACE_MAX_SECONDS)
			abort();
	}
	run_all("2x(4gpu,8cpu)+1x(2gpu,2cpu)", t);
	run_all("2x(4gpu,8cpu)+1x(2gpu,0cpu)", t); /* static, proportional: refused */
	gm_trace_destroy(t);
	return 0;
}
