/*
 * elastic.h - the one elastic controller: how many data workers a job deserves,
 * from what its ring says about the consumer.
 *
 * Every GM_ELASTIC_TICK_MS the owner of a pool measures, over the window since
 * the last estimate,
 *   demand  D = samples / (window - consumer wait)   (how fast the trainer would eat)
 *   worker  d = samples / worker time                 (one worker's rate)
 * from the consumer's counters in the ring header, and asks the shared policy
 * (core/policy.c, the one the simulator evaluates: contract 8) for a pool size, with
 * GM_ELASTIC_HEADROOM on D so that the consumer's stall stays under ~5%. Two
 * owners use it: the in-process pool of a loader with workers = auto (one job:
 * gm_elastic_want + the hysteresis of gm_elastic_next) and the node agent (all
 * the host's jobs under one budget: gm_elastic_divide).
 *
 * It does not fork, signal or lock: it returns numbers; the pool applies them.
 */
#ifndef GOLDMINER_ELASTIC_H
#define GOLDMINER_ELASTIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "goldminer/policy.h"

#define GM_ELASTIC_TICK_MS  250	 /* period of the control loop (pool and node agent) */
#define GM_ELASTIC_HEADROOM 1.10 /* asked rate = measured demand x this */
#define GM_ELASTIC_MAX_JOBS 64	 /* jobs one division sizes (the node agent's table) */

struct gm_ring_hdr;

/* The measurement window of one job (zeroed, then gm_elastic_meter_restart). */
struct gm_elastic_meter {
	uint64_t t, samples, wait, work, pause, remote; /* clock and ring counters at the
							 * window start */
	struct gm_policy_demand demand; /* the windows' demand, smoothed (policy.h) */
};

/* Start the window's clock now (the counts stay where they are). */
void gm_elastic_meter_restart(struct gm_elastic_meter *m);

/*
 * Close the window if it holds enough evidence (two batches of batch_size, or 4 s;
 * one batch for the job's first estimate) while the consumer waits (or after 8
 * batches) and estimate: *demand (samples/s the
 * consumer would take, from its own time: the window less its waits, the one
 * going on counted up to now, and its pauses; smoothed over the job's batch
 * periods, gm_policy_demand_add; 0 when it has been idle for 4 s) and
 * *worker_rate (one local worker's samples/s: the local batches' samples over
 * their workers' time; remote workers' batches, c_remote_samples, left out; a
 * window with no local batch keeps the last rate). Publishes both in h
 * (p_demand_mrate, p_worker_mrate) for the stats. Returns 1 when a new estimate is
 * ready, 0 when not (too little delivered, or starving for a first batch).
 * The caller owns m; h is the ring header the consumer counts into.
 */
int gm_elastic_measure(struct gm_elastic_meter *m, struct gm_ring_hdr *h, uint32_t batch_size,
		       double *demand, double *worker_rate);

/* The consumer's pause between epochs (h's c_pause_ns, c_pause_t0): begin (1)
 * when an epoch's last batch was taken, end (0) when it asks for the next
 * epoch's first; a second begin, or an end with none begun, does nothing. */
void gm_elastic_pause(struct gm_ring_hdr *h, int begin);

/* One job alone under a budget of `budget` workers: the policy's pool size in
 * *want. 0, or the policy's -errno (then keep the pool as it is). */
int gm_elastic_want(double demand, double worker_rate, uint32_t budget, uint32_t *want);

/* Hysteresis of an in-process pool: grow at once, shrink only after two windows
 * agree, one worker at a time (a retired worker finishes its batch first, nothing
 * is lost). Zero-initialised state. */
struct gm_elastic {
	int want;   /* last window's wish */
	int streak; /* windows in a row with that wish below the pool */
};

/* The new target given this window's wish and the current target `cur`. */
int gm_elastic_next(struct gm_elastic *e, int want, int cur);

/* One job of a node agent, as the division sees it. */
struct gm_elastic_share {
	uint32_t fixed;	     /* pool size fixed by request (0: the policy decides) */
	uint32_t cap;	     /* most workers (0: the budget) */
	uint32_t workers;    /* what it has now */
	double demand, rate; /* last estimate; rate 0: not measured yet */
};

/*
 * Divide `budget` workers among n jobs (array order breaks ties: older first).
 * Per job the GPU-bound rate is replaced by the measured demand D (+ headroom),
 * d = one worker's measured rate and weight 1/D, so that one worker is worth "the
 * fraction of this trainer's demand it covers": the budget goes first to the jobs
 * furthest from being fed. A job not yet measured keeps what it has (at least
 * one worker), from what the measured jobs leave. Writes want[0..n), each >= 1,
 * summing to at most max(budget, n): fixed sizes that do not fit beside the
 * others' one worker each are trimmed, the largest first (the youngest job among
 * equals). n <= GM_ELASTIC_MAX_JOBS (more are left out, each wanting 1).
 */
void gm_elastic_divide(const struct gm_elastic_share *jobs, size_t n, uint32_t budget,
		       uint32_t *want);

/*
 * Move the pools of n jobs towards a division without ever holding more than
 * `capacity` workers. Job k now has target[k] (what its pool is sized to),
 * retiring[k] workers asked to go but not yet reaped, and alive[k] worker
 * processes; from now on it can have at most held_k = max(target + retiring,
 * alive) alive until its target is raised (see gm_pool_retiring). Shrinks are
 * applied at once (target[k] = want[k]); a job grows only by what the others'
 * held workers leave of the capacity, first one worker to every job that has
 * none (a newcomer starts as soon as one worker is free), then in array order.
 * target[] is updated in place; a job short of its want gets the rest on a later
 * call, once retiring workers have exited (a retiring worker finishes its batch).
 * Returns the sum of held_k after the update: <= capacity whenever it was
 * before. Pure: no I/O.
 */
uint32_t gm_elastic_grant(const uint32_t *want, const uint32_t *retiring, const uint32_t *alive,
			  size_t n, uint32_t capacity, uint32_t *target);

/*
 * What a job's remote workers deliver, for the rule that a small home's job
 * runs no local worker once they measurably deliver more than its local
 * workers alone (gm_policy_fed_remotely): measured at each of the job's
 * measurements from the count of their samples landed so far, over windows
 * of at least GM_ELASTIC_REMOTE_MS and GM_ELASTIC_REMOTE_BATCHES batches
 * (their batches land whole: over 4 batches the rate moves in steps of a
 * quarter), or of 2 x GM_ELASTIC_REMOTE_MS whatever landed; the first window
 * opens at the measurement before their first samples landed. The home's
 * 1 s windows (remote.h's rate) start at the job's attach: the first held the
 * time before any remote worker ran and read a fraction of their rate, and a
 * 0.25-core home ran its local worker beside two remote ones ~2 s of a 4 s
 * run (tests/regress/bench-ab-remote.sh). Zero-initialised state.
 */
#define GM_ELASTIC_REMOTE_MS	  500
#define GM_ELASTIC_REMOTE_BATCHES 8

struct gm_elastic_remote {
	uint64_t samples;     /* landed by the last measurement */
	uint64_t acc;	      /* landed in the window being counted */
	int64_t last_ms;      /* the last measurement (0: none) */
	int64_t from_ms;      /* the window's start (0: none open) */
	double rate;	      /* samples/s over the last window closed; 0: none, or no worker */
	int64_t rate_from_ms; /* where that window began (0: none closed) */
	uint32_t quiet;	      /* measurements in a row with none landed (at most 2) */
};

/* One measurement at now_ms: samples, all the job's remote samples landed so
 * far; workers, its remote workers connected now (none: rate 0 at once). */
void gm_elastic_remote_add(struct gm_elastic_remote *m, uint64_t samples, uint32_t workers,
			   uint32_t batch_size, int64_t now_ms);

/* Whether what the consumer was given over the last measurement was its local
 * workers' alone: no remote sample landed in it (nor, once any has, in the one
 * before: the ring may still hold their batches). Counted while they landed,
 * a 0.25-core job's local worker read 636-810 img/s where it makes 450-570. */
bool gm_elastic_remote_none(const struct gm_elastic_remote *m);

#endif
