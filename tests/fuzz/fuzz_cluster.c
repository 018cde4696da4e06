/*
 * fuzz_cluster.c - fuzz target: gm_cluster_load on a spec string (first byte even)
 * or on a node-list file (first byte odd). Checks: 0 with consistent totals, or an
 * error with a message. A loaded cluster of at most 4,096 nodes then runs a small
 * synthetic trace under every policy: each run must end (libFuzzer's -timeout
 * catches one that does not) with 0 or an error with a message.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "goldminer/cluster.h"
#include "goldminer/profile.h"
#include "goldminer/sim.h"
#include "goldminer/trace.h"

/* Every policy on c with 16 synthetic jobs: 0, or an error with a message. */
static void run_all(const struct gm_cluster *c)
{
	static struct gm_profile prof;
	static struct gm_trace *t;
	struct gm_sim_opts o;
	struct gm_sim_summary sum;
	char err[512];

	gm_profile_default(&prof);
	if (!t &&
	    gm_trace_load(&t, "synth:jobs=16,seed=3,ia=600,gpumix=1:4/4:2/16:1", err, sizeof(err)))
		abort();
	gm_sim_opts_defaults(&o);
	o.backfill = 2;
	for (int p = 0; p < GM_SIM_NPOLICY; p++) {
		o.policy = (enum gm_sim_policy)p;
		err[0] = 0;
		int rc = gm_sim_run(c, t, &prof, &o, &sum, err, sizeof(err));
		if (rc == -ENOTRECOVERABLE || rc == -EDEADLK)
			abort(); /* a broken invariant or a stall: a bug */
		if (rc)
			gm_fuzz_check_msg(err, sizeof(err));
		else if (sum.jobs + sum.unplaceable != t->n ||
			 sum.events > 2 * (uint64_t)t->n + sum.samples + 1)
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[64], err[512];
	struct gm_cluster *c = NULL;
	int rc, fd = -1;

	if (size < 1)
		return 0;
	if (data[0] % 2 == 0) {
		char *spec = malloc(size);
		if (!spec)
			return 0;
		memcpy(spec, data + 1, size - 1);
		spec[size - 1] = 0;
		if (!spec[0] || strchr(spec, '/')) { /* a path: not what this branch fuzzes */
			free(spec);
			return 0;
		}
		rc = gm_cluster_load(&c, spec, err, sizeof(err));
		free(spec);
	} else {
		fd = gm_fuzz_memfile(data + 1, size - 1, path, sizeof(path));
		if (fd < 0)
			return 0;
		rc = gm_cluster_load(&c, path, err, sizeof(err));
		close(fd);
	}
	if (rc) {
		if (c)
			abort();
		gm_fuzz_check_msg(err, sizeof(err));
		return 0;
	}
	uint64_t g = 0, p = 0;
	uint32_t mx = 0;
	for (uint32_t i = 0; i < c->n; i++) {
		g += c->gpus[i];
		p += c->cpus[i];
		mx = c->gpus[i] > mx ? c->gpus[i] : mx;
	}
	if (c->n == 0 || g != c->total_gpus || p != c->total_cpus || mx != c->max_gpus || !g ||
	    !p || mx > GM_CLUSTER_MAX_NODE_GPUS || c->n > GM_CLUSTER_MAX_NODES)
		abort();
	if (c->n <= 4096)
		run_all(c);
	gm_cluster_destroy(c);
	return 0;
}
