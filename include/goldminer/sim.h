/*
 * sim.h - discrete-event cluster simulator (DESIGN.md, "The simulator").
 *
 * Replays a trace (trace.h) on a cluster (cluster.h) under one CPU policy and
 * reports job completion times and utilisation. A job trains at
 * min(GPU-bound rate, data rate of its vCPUs) with rates from the profile table
 * (profile.h); its work is calibrated so that under its own requested vCPUs it
 * runs exactly its trace duration. Deterministic: the same inputs and seed give
 * the same bytes. One run is single-threaded; runs share nothing.
 */
#ifndef GOLDMINER_SIM_H
#define GOLDMINER_SIM_H

#include <stddef.h>
#include <stdint.h>

#include "goldminer/cluster.h"
#include "goldminer/profile.h"
#include "goldminer/trace.h"

/*
 * At most this many time-series rows per run (plus the header and the final-state
 * row): ~50 MB of timeseries.tsv. An explicit sample interval that would exceed it
 * over the trace's span is refused (gm_sim_min_sample_interval); a run that outlasts
 * that span (jobs slowed by their CPU share) stops sampling at the cap and says so
 * in gm_sim_summary.samples_capped, so output and events stay bounded either way.
 */
#define GM_SIM_MAX_SAMPLES 1000000u

/*
 * The default remote cost: the fraction of a data worker's rate lost when it runs
 * on another node than the job's GPUs (a local worker loses nothing). MEASURED by
 * tests/bench/bench-remote.sh (make bench): one worker with a core to itself
 * delivers 0.83-0.99 (median 0.91, seven quiet runs) of its img/s to a trainer
 * on another host (UCX over TCP between network namespaces) of what it delivers
 * on its own host, on the development machine (2 cores, 2026-11-30): a cost of
 * about 0.1.
 * Over RDMA it would be lower, over a slow network higher: sim/RESULTS.md sweeps
 * 0..0.3. --help, RESULTS.md and the docs take it from here.
 */
#define GM_SIM_REMOTE_COST 0.1 /* source: measured, tests/bench/bench-remote.sh (above) */

enum gm_sim_policy {
	GM_SIM_STATIC,	     /* requested vCPUs on the job's own nodes (today) */
	GM_SIM_PROPORTIONAL, /* each node's vCPUs split by GPU share */
	GM_SIM_GOLDMINER,    /* minimal local share + elastic pool (core/policy.c) */
	GM_SIM_UNLIMITED,    /* every job at its GPU-bound rate (upper bound) */
	GM_SIM_SYNERGY,	     /* Synergy-TUNE (OSDI'22): own nodes' vCPUs by sensitivity */
	GM_SIM_CACHEW, /* Cachew (ATC'22): remote workers autoscaled, first come first served */
	GM_SIM_PECAN,  /* Pecan (ATC'24): Cachew with local idle vCPUs first */
	/* goldminer's placement and allocation rule, workers on the job's own nodes only */
	GM_SIM_NODE_ELASTIC,
	GM_SIM_NPOLICY
};

#define GM_SIM_BACKFILL_ALL UINT32_MAX /* --backfill all */

/*
 * local_min at least every job's request per GPU (--local-min request): a job
 * reserves its whole request at placement, as static does, so a policy with a pool
 * is compared with static at static's placement.
 */
#define GM_SIM_LOCAL_REQUEST 1e9

struct gm_sim_opts {
	enum gm_sim_policy policy;
	uint64_t seed;	      /* class draw of a job without one: hash(seed, job's identity) */
	double arrival_scale; /* submit times are divided by this (> 0; 1 = as traced) */
	double remote_cost;   /* fraction of a remote pool worker's rate lost (0..1) */
	double local_min;     /* pool policies: vCPUs reserved per GPU (>= 1 per job, <= request) */
	double sample_interval; /* time-series period in s; 0 = last submit / 500, see below */
	uint32_t backfill;	/* 0 = strict FIFO; else jobs behind the head tried */
	/* (GM_SIM_BACKFILL_ALL: every queued job that fits starts, no node is held) */
	/*
	 * > 0: every node's data workers time-share this many cores (a real node whose
	 * worker budget, its vCPUs, is above the cores it has): each worker gets a
	 * max-min fair share of its node's cores, so a rate-capped job's worker leaves
	 * the rest of its core to the others. 0: the cluster's own cores per node
	 * (gm_cluster.cores, a shape's "0.75cores"), and where it has none every vCPU
	 * is a core (the default). Only placed workers share a node's cores: a job's
	 * reserved vCPUs and its local pool workers; remote pool workers are counted,
	 * not placed, and share none (on a 1-node cluster every worker is there).
	 */
	double node_cores;
	/*
	 * 1: a job's work is its trace duration at the cluster's vCPUs per GPU (its
	 * fair share: the trace ran at that, as in Synergy's simulator); 0: at its
	 * requested vCPUs (the default).
	 */
	int work_at_share;
	/*
	 * > 0: scheduling rounds of this many seconds with preemption (as Synergy's
	 * simulator): arrivals and ends wait for the next round, which takes every
	 * running job off its GPUs and places the queue again in arrival order (a job
	 * keeps its progress). 0 = continuous time, a job keeps its GPUs (the default).
	 */
	double round;
	/*
	 * 1: a job goes to a node where the policy's demand for it fits (synergy-tune:
	 * its ideal vCPUs and memory beside what the node's jobs hold), best fit among
	 * those, else as usual (Synergy's placement mode); 0: best fit on GPUs (the
	 * default), where synergy-tune first takes GPUs node by node where its ideal
	 * fits (Synergy's random placement, its benchmark's).
	 */
	int place_demand;
	/*
	 * 1 (without place_demand): every policy takes a job's GPUs node by node, in
	 * node order, where its demand for them fits, wherever that spreads the job
	 * (Synergy's random placement, the same for its FIFO+fair and FIFO+tune):
	 * synergy-tune where its ideal fits, else where its reservation does (its fair
	 * share, as proportional's); 0 (the default): best fit on one node, a job
	 * that fits one node waiting for one rather than spreading.
	 */
	int place_in_order;
	/*
	 * 1: synergy-tune asks for the fewest vCPUs that reach the GPU-bound rate even
	 * where the profile gives a class's ask_cpu_per_gpu; 0 (the default): that ask
	 * where given (Synergy's profiled CPUs per GPU, capped at a node's; the job runs
	 * at its profiled speed-up once it holds it).
	 */
	int tune_fewest;
	int check;	     /* 1 = audit every node after every event (slow) */
	const char *out_dir; /* jobs.tsv, timeseries.tsv, summary.json; NULL = none */
};

struct gm_sim_summary {
	char policy[16];
	size_t jobs, unplaceable;
	double avg_jct, p50_jct, p95_jct, p99_jct, avg_queue, makespan;
	double gpu_util; /* useful fraction of allocated GPU time, whole run (as nvidia-smi) */
	/* Time averages over the window of the middle 90% of submits: */
	double offered_load;	  /* traced GPU time submitted in it / its GPU time */
	double gpu_busy;	  /* fraction of all GPUs doing useful work */
	double gpu_alloc;	  /* fraction of all GPUs allocated to jobs */
	double cpu_util;	  /* fraction of vCPUs busy pre-processing */
	double cpu_alloc;	  /* fraction of vCPUs allocated */
	uint64_t events, realloc; /* events handled, job-rate changes by the policy */
	double wall_s;
	double max_rss_mib; /* of the process, at the end of the run */
	uint64_t samples;   /* time-series samples taken (rows without the final one) */
	int samples_capped; /* 1: sampling stopped at GM_SIM_MAX_SAMPLES before the end */
};

/* Fill defaults: static, seed 1, scale 1, remote cost GM_SIM_REMOTE_COST, local_min 1. */
void gm_sim_opts_defaults(struct gm_sim_opts *o);

/*
 * Policy names: "static", "proportional", "goldminer", "unlimited-cpu",
 * "synergy-tune", "cachew", "pecan", "node-elastic" (rules and sources in
 * traces/README.md).
 */
const char *gm_sim_policy_name(enum gm_sim_policy p);

/* Parse a policy name; returns the policy or -EINVAL. */
int gm_sim_policy_parse(const char *name);

/*
 * The smallest sample interval (s) that keeps t's time series within
 * GM_SIM_MAX_SAMPLES rows over its span (last scaled submit + longest duration);
 * the automatic interval is max(last submit / 500, 60 s, this).
 */
double gm_sim_min_sample_interval(const struct gm_trace *t, const struct gm_sim_opts *o);

/*
 * Run one simulation. Inputs are checked first (a loader has checked them already;
 * a hand-built cluster, trace or profile gets the same ranges): a GPU node with 0
 * vCPUs is refused under static, proportional, synergy-tune and node-elastic, whose
 * jobs pre-process only on their own nodes' vCPUs (goldminer, cachew and pecan feed
 * such a node's jobs from their pools, and unlimited-cpu does not need vCPUs); a sample interval
 * below gm_sim_min_sample_interval() is refused. A run handles at most 2 events per job plus its
 * samples; should no event be left while jobs are unfinished, it stops with -EDEADLK naming one,
 * instead of waiting forever. Returns 0 with *sum filled; -EINVAL for bad options or inputs,
 * -ENOMEM, -errno when an output file cannot be written, -EDEADLK (above), -ENOTRECOVERABLE when an
 * internal invariant breaks (a bug; err says which). err gets a message on any error.
 */
int gm_sim_run(const struct gm_cluster *c, const struct gm_trace *t, const struct gm_profile *prof,
	       const struct gm_sim_opts *o, struct gm_sim_summary *sum, char *err, size_t errlen);

/* Format the summary as one JSON object (no newline). Returns snprintf's count. */
int gm_sim_summary_json(const struct gm_sim_summary *s, int with_wall, char *buf, size_t len);

#endif
