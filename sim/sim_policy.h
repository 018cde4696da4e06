/*
 * sim_policy.h - private to sim/: the seam between the simulator's engine (sim.c)
 * and its CPU policies (policies.c).
 *
 * Idea: a CPU policy is one row of a table of operations (struct sim_policy), in
 * the spirit of ROSS's callback table per entity type and of core/pipeline.c's op
 * table: the engine places jobs, moves events and keeps the books, and asks the
 * policy row only what differs between policies - how many vCPUs a job reserves on
 * a node, how fast it then runs, what it is charged, and (goldminer) how the pool
 * of idle vCPUs is shared out. The engine never tests which policy runs.
 *
 * The engine's state is defined here because the policies read it (a job's rates
 * and places, the cluster, the options) and the pool policy keeps its own state in
 * it. Not a public header: nothing outside sim/ includes it, and its two engine
 * hooks are hidden from libgoldminer.so's exports.
 */
#ifndef GOLDMINER_SIM_POLICY_H
#define GOLDMINER_SIM_POLICY_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "goldminer/policy.h"
#include "goldminer/sim.h"

#define SIM_HIDDEN __attribute__((visibility("hidden")))
#define NOPOS	   UINT32_MAX

struct gm_policy;

struct ev {
	double t;
	uint64_t seq;
	uint32_t type, id, pos; /* pos: index in the heap or NOPOS */
};

/*
 * One node of a running job: its GPUs and reserved vCPUs there, the pool workers it
 * has there (local: full rate), and its links in that node's list of resident
 * places (place indices, NOPOS-terminated; only policies with a pool link them).
 */
struct place {
	uint32_t node, g, c;
	uint32_t job;	      /* the job it belongs to */
	uint32_t w;	      /* pool workers of the job on this node */
	uint32_t prev, next;  /* the node's residents (policies.c) */
	float tune, tune_mem; /* synergy-tune: vCPUs and GB it holds on this node */
};

/* A job's state (struct sjob.state). */
enum { J_PENDING, J_QUEUED, J_RUNNING, J_DONE, J_DROPPED };

struct sjob {
	double R, d;	     /* GPU-bound rate, per-vCPU data rate */
	double work0, left;  /* samples in total, samples left at t_last */
	double rate, t_last; /* current samples/s, time of last booking */
	double start, end;
	double busy_g, busy_c, alloc_c; /* this job's share of the utilisation sums */
	float vreq;			/* requested vCPUs (filled when the trace has none) */
	uint32_t gpus, local, extra, pslot;
	uint32_t lw;   /* of its extra pool workers, those on its own nodes (the rest remote) */
	uint32_t want; /* cachew/pecan: the autoscaler's worker target */
	uint32_t fifo_prev, fifo_next; /* cachew/pecan: running pool jobs in start order */
	uint32_t place_off, nplace;
	int16_t cls;
	uint8_t state;
	uint8_t dirty; /* goldminer: listed in sim.dirty, its cap to be recomputed */
	uint8_t ran;   /* has started once (rounds: a preempted job keeps its start) */
};

struct sim;

/*
 * One CPU policy: the operations the engine calls. Optional ones are NULL where the
 * policy has nothing to do there.
 */
struct sim_policy {
	const char *name; /* as gm_sim_policy_name() and --policy spell it */
	/*
	 * Why a GPU node with 0 vCPUs can never run a job under this policy, or NULL
	 * where it can (gm_sim_run refuses such a cluster with this reason).
	 */
	const char *no_cpu_node;
	/* Pool workers sit on the job's own nodes first (local, full rate), then remote. */
	bool local_first;
	/* vCPUs job j reserves on node n for t of its GPUs (placement; n fits them). */
	uint32_t (*reserve)(const struct sim *s, const struct sjob *j, uint32_t n, uint32_t t);
	/*
	 * Optional: true when j's reservation differs between GPU nodes with enough
	 * GPUs (a request capped to a node's vCPUs), so placement must scan a bucket
	 * rather than trust its heap top. NULL: never.
	 */
	bool (*reserve_varies)(const struct sim *s, const struct sjob *j);
	/* Samples/s of running job j under its allocation; *busy: vCPUs it keeps busy. */
	double (*rate)(const struct sim *s, const struct sjob *j, double *busy);
	/* vCPUs counted as allocated to j (the utilisation books), given rate()'s busy. */
	double (*charge)(const struct sim *s, const struct sjob *j, double busy);
	/* Optional pool of idle vCPUs: create/destroy its state (close(NULL state) ok), */
	int (*open)(struct sim *s);
	void (*close)(struct sim *s);
	/* a job joins it when it starts (0 or -errno after sim_fail), leaves at its end, */
	int (*start)(struct sim *s, uint32_t ji);
	void (*stop)(struct sim *s, uint32_t ji);
	/* and after every event the pool is shared out again (rates moved by sim_set_rate). */
	void (*rebalance)(struct sim *s);
	/*
	 * Optional: true when j's demand under this policy fits on node n beside what
	 * n's jobs hold (opts.place_demand prefers such nodes). NULL: any node fits.
	 */
	bool (*fits)(const struct sim *s, const struct sjob *j, uint32_t n);
	/*
	 * Optional: how many of j's GPUs, at most want, node n takes with the policy's
	 * demand for them fitting beside what n's jobs hold. Where set (and not
	 * opts.place_demand) the engine first takes GPUs node by node, in node order,
	 * where this allows (synergy-tune: Synergy's random placement), then its best
	 * fit. NULL: best fit only.
	 */
	uint32_t (*fit_gpus)(const struct sim *s, const struct sjob *j, uint32_t n, uint32_t want);
	/* Optional: check the policy's own books (opts.check); sim_fail on a mismatch. */
	void (*audit)(struct sim *s);
};

/* The policies, indexed by enum gm_sim_policy (policies.c). */
SIM_HIDDEN extern const struct sim_policy sim_policies[GM_SIM_NPOLICY];

struct sim {
	const struct gm_cluster *c;
	const struct gm_trace *t;
	const struct gm_profile *prof;
	struct gm_sim_opts o;
	const struct sim_policy *policy; /* &sim_policies[o.policy] */
	char *err;
	size_t errlen;
	/* engine */
	struct ev *ev; /* [0, n) FINISH of job i, n = ARRIVAL, n+1 = SAMPLE */
	uint32_t *heap, nheap;
	uint64_t seq, events;
	double now;
	/* jobs */
	struct sjob *j;
	size_t n, next_arrival, ndone, nqueued, nrunning;
	uint32_t *queue, qhead, qtail;
	struct place *pl;
	size_t npl, plcap;
	/* nodes: free resources and buckets of nodes by free GPU count */
	int64_t *free_g, *free_c;
	/*
	 * Buckets of nodes by free GPU count; each bucket is a max-heap on free vCPUs
	 * (ties: lower node id), so "a node with >= g free GPUs and c free vCPUs" is
	 * answered from the heap tops in O(max GPUs per node), not O(nodes).
	 */
	uint32_t **bh, *bn, *bcap, *bpos;
	uint32_t min_cpus, max_cpus; /* of GPU nodes: capped requests differ between them */
	uint64_t free_gpus;
	uint32_t resv_node, resv_job; /* backfill: node held for the blocked head */
	/* rounds (opts.round): a job came or went since the last round; jobs before
	 * live_lo are all done or dropped */
	bool round_dirty;
	size_t live_lo;
	/* the goldminer pool (policies.c) */
	struct gm_policy *pol;
	uint32_t *slot2job;
	uint32_t slotcap;
	uint64_t reserved_cpu;
	/*
	 * Placement of pool workers (policies.c): per node, the pool workers that sit
	 * there as local workers of its resident jobs (never above free_c), and the
	 * first of its resident places. Remote workers are counted, not placed: they
	 * fit in the idle vCPUs the local ones leave (see policies.c).
	 */
	int64_t *lpool;
	uint32_t *res_head;
	/*
	 * cachew/pecan: running jobs in start order; every job before fifo_bound has
	 * its target, fifo_bound (NOPOS: none) has fewer, every job after it none.
	 */
	uint32_t fifo_head, fifo_tail, fifo_bound;
	uint64_t pool_used;
	uint32_t *dirty, ndirty, dirtycap; /* goldminer: jobs whose local workers moved */
	/* node-elastic: nodes whose residents changed (flag and list), and scratch for
	 * one node's residents: their policy rows and the workers given them */
	uint8_t *node_dirty;
	uint32_t *dnodes, ndnodes;
	struct gm_policy_job *node_jobs;
	uint32_t *node_w;
	/*
	 * Cores (sim.c, contend): 1 where some node's workers time-share fewer cores
	 * than its vCPUs (--node-cores, or a cluster shape's cores); scratch pieces
	 * (one per running job and node it has workers on) and their order by node.
	 */
	int cores_on;
	struct cpiece {
		uint32_t node, job;
		double a, u, level; /* workers there, a core share each wants, granted */
	} * cp;
	uint32_t *cpi;
	size_t ncp, cpcap;
	uint32_t *tune_ord; /* synergy-tune: scratch, one node's residents in arrival order */
	double *tune_new;   /* and their new vCPUs, then their new GB (2 x max GPUs) */
	/* metrics */
	double sum_alloc_g, sum_busy_g, sum_alloc_c, sum_busy_c;
	double int_alloc_g, int_busy_g, int_alloc_c, int_busy_c, t_int;
	/* integrals at the start [0] and end [1] of the window of the middle 90% of submits */
	double win_alloc_g[2], win_busy_g[2], win_alloc_c[2], win_busy_c[2], t_win[2];
	size_t win_idx[2];
	double interval;
	uint64_t samples; /* SAMPLE events handled; none re-armed past GM_SIM_MAX_SAMPLES */
	uint64_t realloc;
	size_t unplaceable;
	FILE *ts;
	int rc;
};

/* Engine hooks for the policies (sim.c): record the run's first error; */
SIM_HIDDEN void sim_fail(struct sim *s, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* recompute running job ji's rate from its allocation and move its FINISH. */
SIM_HIDDEN void sim_set_rate(struct sim *s, uint32_t ji);

#endif
