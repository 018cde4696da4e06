/*
 * scenario.h - a small cluster of hosts whose cores are known (fractions of a
 * core allowed) and jobs pinned to their home host, each with a consumer that
 * takes a given rate: the cluster experiment of tests/bench/bench-cluster.sh, read
 * from the file that experiment runs (format: traces/README.md, "Scenarios"), and
 * simulated with lending off (every job decodes on its home's cores) and on (a
 * job short of its consumer's rate borrows the idle cores of other hosts).
 *
 * What it models: CPU only. Each host's cores are shared max-min fairly among
 * the jobs homed there (a fair CPU scheduler among their processes), a local
 * image costs its home local_us of CPU (decode and the trainer's take), a remote
 * one remote_home_us on the home (receive and take) and remote_lender_us on a
 * lender (decode and send): the three per-image costs are measured on the real
 * path by the bench. Lenders' own jobs come first (a host lends nothing for
 * 2.25 s after one of its own jobs starts, as its agent holds back until its
 * new job has gone unstarved for GM_POLICY_ASK_SETTLE_S); what they leave idle goes to
 * lent workers, as many as their agent's worker budget leaves beside their own
 * running jobs (one worker each). A lent worker serves one job and stays with
 * it (a free slot goes to whoever asks first; a home divides its workers
 * between its jobs) until that job gives it back or its lender's own jobs take
 * it back; it sends remote_start_s after its grant, uses at most one core and
 * sends at most worker_rate img/s. A job consumes nothing for start_s after
 * its submit (start-up). Not
 * modelled: the workers of a home's own jobs (its share is fluid), GPUs (each
 * trainer has its own), queueing. For GPU clusters replayed
 * from traces, see sim.h.
 */
#ifndef GOLDMINER_SCENARIO_H
#define GOLDMINER_SCENARIO_H

#include <stddef.h>
#include <stdint.h>

#define GM_SCEN_MAX_NODES   64		 /* hosts in a scenario */
#define GM_SCEN_MAX_JOBS    10000	 /* jobs in a scenario (each event is O(jobs)) */
#define GM_SCEN_MAX_CORES   100000.0	 /* cores of one host */
#define GM_SCEN_MAX_TIME    3155760000.0 /* s: a submit (100 years) */
#define GM_SCEN_MAX_IMAGES  1e12	 /* images of one job */
#define GM_SCEN_MAX_RATE    1e9		 /* img/s of one consumer */
#define GM_SCEN_MAX_COST    1e9		 /* us of CPU per image */
#define GM_SCEN_NAME	    32		 /* bytes of a name, with its NUL */
#define GM_SCEN_MAX_WORKERS 1024	 /* a job's named --workers */

struct gm_scen_node {
	char name[GM_SCEN_NAME];
	double cores;	  /* > 0 */
	uint32_t workers; /* its agent's worker budget (default ceil(cores), as --cpus) */
};

struct gm_scen_job {
	char name[GM_SCEN_NAME];
	uint32_t home;	  /* node index */
	double submit;	  /* s */
	double images;	  /* > 0 */
	double rate;	  /* img/s its consumer takes; 0: greedy (as fast as fed) */
	uint32_t workers; /* the --workers it names (a cap on its lent workers); 0: auto */
	uint32_t line;	  /* in the file */
};

struct gm_scenario {
	struct gm_scen_node *node;
	uint32_t nnodes;
	struct gm_scen_job *job; /* sorted by submit (ties in file order) */
	size_t njobs;
	/* CPU seconds per image: local (home), remote on the home, remote on a lender */
	double local_cpu, remote_home_cpu, remote_lender_cpu;
	double worker_rate;    /* img/s one lent worker sends at most; 0: its core's worth */
	double start_s;	       /* s from a job's submit to its first image (0: none) */
	double remote_start_s; /* s from a lent worker's grant to its first image (0: none) */
	/* CPU seconds a job costs its home beside its images' (its trainer's and
	 * workers' starts, its ring's pages), charged over its images: job_cpu /
	 * images more CPU per image it decodes or receives there (0: none) */
	double job_cpu;
	/* CPU seconds a job's workers spend ahead of its consumer (the batches
	 * that fill its ring, their start), which its agent's rate reading
	 * counts as the taken images' CPU until they dilute it: the agent of a
	 * lender sees its new job need lead_cpu / t more cores t seconds into
	 * its run, and takes back the guests that leaves no room for (0: none) */
	double lead_cpu;
};

/* One job's outcome. */
struct gm_scen_result {
	double end, jct; /* s: its finish, and finish - submit */
	double bound;	 /* images / rate: its JCT at its consumer's rate (0: greedy) */
	double remote;	 /* images remote workers sent it */
};

struct gm_scen_summary {
	size_t jobs;
	double avg_jct, bound_avg_jct, makespan, remote_images;
	/*
	 * GPU utilisation: delivered / demanded, time-weighted over the submitted jobs
	 * with a rate (integral of sum x_j / rate_j over the integral of their count,
	 * start-up included); since a job is counted from its submit to its end, it
	 * equals the sum of their bounds over the sum of their JCTs
	 * (tests/test_scenario.c checks it).
	 */
	double gpu_util;
	uint64_t events;
};

/*
 * Read a scenario file. Returns 0 and *out; -errno when it cannot be read,
 * -EBADMSG for a malformed line ("FILE:LINE: what" in err: unknown keyword, a
 * number out of its range above, a job whose home is not a node, a duplicate
 * name, a missing cost; remote_worker_img_s, start_s, remote_start_s,
 * job_cpu_s and lead_cpu_s are optional), -ENOMEM.
 */
int gm_scenario_load(struct gm_scenario **out, const char *path, char *err, size_t errlen);

/* Free; NULL does nothing. */
void gm_scenario_destroy(struct gm_scenario *s);

/*
 * Simulate s with lending off (0) or on (1): res[k] for s->job[k] (njobs entries)
 * and *sum. Deterministic. Returns 0; -EINVAL for a scenario out of the ranges
 * above (err says which), -ENOMEM, -EDEADLK should jobs be left with no event
 * (cannot happen with cores > 0; it stops rather than loop).
 */
int gm_scenario_run(const struct gm_scenario *s, int lending, struct gm_scen_result *res,
		    struct gm_scen_summary *sum, char *err, size_t errlen);

/*
 * What the cluster's CPUs can feed at best: the least share, over the bound
 * schedule (every job with a rate consuming it from its submit for images /
 * rate s), of the CPU-poor hosts' demand (hosts under GM_NODE_FED_CORES) that
 * their own cores and what the other hosts' own jobs leave idle can deliver,
 * each host using at most `share` of its cores (0 < share <= 1, else 1: the
 * headroom a real host needs beside its agent and trainers) at the scenario's
 * costs.
 * A poor host decodes what its cores hold and receives the rest (receiving
 * costs it remote_home_cpu an image, a lender remote_lender_cpu); lent
 * capacity goes wherever it is short, as every remote image is worth the same.
 * No controller, worker count or start-up: an upper bound on any. 1 when no
 * poor host's job has a rate. A scenario whose value is under 1 cannot have
 * every poor host's GPUs fed, whatever the policy. Pure; O(jobs^2).
 */
double gm_scenario_feedable(const struct gm_scenario *s, double share);

#endif
