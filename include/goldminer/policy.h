/*
 * policy.h - the elastic data-worker allocation policy (DESIGN.md contract 8).
 *
 * One CPU budget (a number of data workers, one vCPU each) is shared by a set of
 * jobs. Job j trains at speed
 *
 *     f_j(w) = min(R_j, w * d_j)            samples/s, w = its data workers,
 *
 * where R_j is its GPU-bound rate and d_j the rate one worker produces. The policy
 * maximises sum_j v_j * f_j(w_j) (v_j = value of one sample/s; the simulator uses
 * v_j = GPUs_j / R_j so the objective is "GPUs kept busy") subject to
 * min_j <= w_j <= max_j and sum_j w_j <= budget. Each f_j is concave and piecewise
 * linear, so greedy allocation by marginal gain is optimal (see policy.c).
 *
 * The state object is incremental: add/remove/update a job or change the budget,
 * then gm_policy_rebalance() moves only the workers whose marginal gain ordering
 * changed, O(log n) per moved block of workers. gm_policy_allocate() is the pure
 * one-shot form for a node agent. No I/O, no global state; not thread-safe (one
 * state object per caller thread).
 */
#ifndef GOLDMINER_POLICY_H
#define GOLDMINER_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gm_policy;

/* One job as the policy sees it. */
struct gm_policy_job {
	double gpu_rate;      /* R: samples/s when GPU-bound (all its GPUs), >= 0 */
	double worker_rate;   /* d: samples/s one data worker produces, > 0 */
	double weight;	      /* v: value of one sample/s, > 0 (e.g. gpus / gpu_rate) */
	uint32_t min_workers; /* always granted, counted in the budget */
	uint32_t max_workers; /* never exceeded (UINT32_MAX: no cap), >= min_workers */
	uint64_t tag;	      /* caller's id; ties in gain go to the smaller tag */
};

/*
 * Create an empty state with a budget of `budget` workers.
 * Returns 0 and *out, or -ENOMEM. Destroy with gm_policy_destroy().
 */
int gm_policy_create(struct gm_policy **out, uint64_t budget);

/* Free the state; NULL does nothing. */
void gm_policy_destroy(struct gm_policy *p);

/* Change the budget; takes effect at the next rebalance. */
void gm_policy_set_budget(struct gm_policy *p, uint64_t budget);

/*
 * Add a job; it starts with min_workers. *slot_out receives its handle (slots are
 * reused after removal). Returns 0, -EINVAL for bad rates (d <= 0, R < 0, v <= 0,
 * max < min) or -ENOMEM.
 */
int gm_policy_add(struct gm_policy *p, const struct gm_policy_job *j, uint32_t *slot_out);

/* Remove a job; its workers return to the budget at the next rebalance. */
void gm_policy_remove(struct gm_policy *p, uint32_t slot);

/*
 * Replace a job's parameters (e.g. new measured rates); its allocation is clamped
 * into [min, max] at once and optimised at the next rebalance. Returns 0 or -EINVAL.
 */
int gm_policy_update(struct gm_policy *p, uint32_t slot, const struct gm_policy_job *j);

/*
 * Restore the greedy optimum after any add/remove/update/set_budget. Returns 0, or
 * -ENOSPC when the minimum workers alone exceed the budget (minimums are still
 * granted; every extra worker has been taken back).
 */
int gm_policy_rebalance(struct gm_policy *p);

/* Workers currently allocated to a job. */
uint32_t gm_policy_workers(const struct gm_policy *p, uint32_t slot);

/*
 * Slots whose allocation changed since the last call (each listed once; removed
 * slots are not listed). The array stays valid until the next call into the state.
 */
size_t gm_policy_changed(struct gm_policy *p, const uint32_t **slots);

/* Workers allocated in total (minimums included). */
uint64_t gm_policy_used(const struct gm_policy *p);

/*
 * One-shot: allocate `budget` workers to n jobs, writing workers[i]. Pure: the same
 * input gives the same output. Returns 0, -ENOSPC (minimums exceed the budget;
 * workers[] holds the minimums), -EINVAL or -ENOMEM.
 */
int gm_policy_allocate(const struct gm_policy_job *jobs, size_t n, uint64_t budget,
		       uint32_t *workers);

/*
 * Borrowing: how many remote workers (another host's CPUs) one job should ask for.
 * Pure, no state: the node agent calls it every tick for each of its jobs (node.c,
 * with gm_elastic_next's hysteresis on the answer) and a simulator can call it
 * with its model's figures. All rates are samples/s.
 *
 * A job's local capacity is what its local workers can deliver together: each
 * image costs 1 / worker_rate seconds of CPU (worker_rate is a worker's on-CPU
 * rate), and the workers have `cores` cores between them, so
 *
 *     capacity = min(workers, cores) x worker_rate          (cores 0: no limit)
 *
 * and, while the consumer stalls (stall > GM_POLICY_STALL and delivered < demand),
 * no more than the local workers measurably delivered (delivered less the remote
 * workers' rate): the measurement overrules the model when the model is too kind.
 * The job asks for
 *
 *     want = ceil((demand x headroom - capacity) / one remote worker's rate)
 *
 * remote workers when that is positive, at most `most` and, when the peers'
 * heartbeats are known (bounded), at most what the live peers can lend it: a
 * tiny measured remote rate must not turn into hundreds of asks no peer can
 * grant. 0 once local capacity covers the demand again (the caller's
 * hysteresis gives them back one by one).
 */
#define GM_POLICY_STALL 0.05 /* a consumer waiting more than this share is short */

struct gm_policy_borrow_in {
	double demand;		   /* D: what the consumer takes when fed (measured) */
	double headroom;	   /* asked rate = D x this; <= 1: none */
	double delivered;	   /* what it was given over the last window */
	double stall;		   /* share of that window it waited for data, 0..1 */
	double worker_rate;	   /* one local worker's on-CPU rate; 0: not measured */
	double cores;		   /* cores the local workers can use; 0: no limit */
	double remote_rate;	   /* what the remote workers delivered over the window */
	double remote_worker_rate; /* one remote worker's rate; 0: worker_rate is used */
	uint32_t workers;	   /* local workers */
	uint32_t most;		   /* most remote workers it may have */
	bool bounded;		   /* lendable below is known (false: no bound) */
	uint32_t lendable;	   /* workers the live peers can lend it in all */
};

enum gm_policy_borrow_why {
	GM_BORROW_UNMEASURED, /* no worker rate yet: asks for none */
	GM_BORROW_COVERED,    /* local capacity covers the demand: none */
	GM_BORROW_CAPACITY,   /* local capacity is below the demand */
	GM_BORROW_STALL,      /* the consumer waits: the measured delivery is short */
};

struct gm_policy_borrow_out {
	double capacity;  /* local capacity (see above) */
	uint32_t want;	  /* remote workers to ask for, <= most (and lendable) */
	bool capped;	  /* want was cut to most */
	bool peers_short; /* want was cut to what the peers can lend */
	enum gm_policy_borrow_why why;
};

/* The answer for one job (see above) in *out. */
void gm_policy_borrow(const struct gm_policy_borrow_in *in, struct gm_policy_borrow_out *out);

/* The reason in words into buf[len]: "local capacity 650 img/s < demand 960 img/s",
 * "local capacity covers demand (1300 >= 960 img/s)", ... */
void gm_policy_borrow_why(const struct gm_policy_borrow_in *in,
			  const struct gm_policy_borrow_out *out, char *buf, size_t len);

/* A peer as a lender to one home, from its last heartbeat: the cores it can
 * lend that home (0: none, or not heard) and the workers (each at most a
 * core; what it lends other homes taken out). */
struct gm_policy_lender {
	double cores;
	uint32_t workers;
};

/* Spread want remote workers over n lenders, the idlest first (see policy.c):
 * ask[i] the workers to ask lender i for (ask[n], written), never more than
 * its workers; a lender without cores gets none. Returns the workers placed
 * (<= want; the rest no lender has room for). Pure, thread-safe. */
uint32_t gm_policy_spread(const struct gm_policy_lender *l, size_t n, uint32_t want, uint32_t *ask);

/*
 * Lending: how many workers a host may run for other hosts' jobs. `free`
 * workers of its budget no own job wishes for are lendable, as before; and a
 * host whose own jobs leave at least GM_POLICY_LEND_MIN_CORES of its cores
 * idle (idle_cores: its cores less its measured jobs' needs) lends
 * ceil(idle_cores) workers even when its whole worker budget is wished for:
 * under --cpus 0.75 the budget is one worker, its own job holds it, and half a
 * core would otherwise sit idle. The lent workers run niced below the host's
 * own (GM_NODE_LENT_NICE) inside the same CPU quota, so the quota bounds
 * them, and they are preempted when the own jobs' needs grow (idle shrinks).
 * Pure.
 */
#define GM_POLICY_LEND_MIN_CORES 0.25
uint32_t gm_policy_lendable(uint32_t budget, uint32_t wished, double idle_cores);

#endif
