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

#endif
