/*
 * pool.h - the worker pool of one job: the coordinator that forks the data
 * workers, watches them, re-issues a dead worker's tasks and replaces it.
 *
 * gm_pool_create() makes the job's ring (memfd, pre-faulted); gm_pool_start()
 * starts a private coordinator thread that forks the workers from itself (so that
 * PR_SET_PDEATHSIG, which is tied to the forking thread, kills them if this
 * process dies), waits on their pidfds (poll, no polling loop), reaps them, hands
 * a dead worker's leased tasks back (gm_ring_reclaim) and forks a replacement.
 * It also watches every lease: a worker that finishes no sample of its batch for
 * cfg.lease_timeout_ms is SIGKILLed (and a line on stderr names the sample it
 * was stuck on), so its batch is made again; a sample that stalls workers twice
 * is quarantined like one that crashes them. A worker that holds no lease and is
 * stopped (a signal or a tracer) for as long is SIGKILLed and replaced too.
 * The pool is sized by gm_pool_set_target/gm_pool_fix, or, with cfg.autoscale, by
 * the elastic controller (elastic.h) every GM_ELASTIC_TICK_MS. Two owners: a
 * loader with its workers in this process (loader.c), and the node agent, one
 * pool per attached job (node.c). The consumer side of the ring is not here.
 *
 * Errors are 0 / -errno with a message in the caller's buffer; the messages do
 * not name a function (the caller prefixes its own). A pool that cannot keep
 * workers alive says why in the ring header (p_fatal, p_fatal_msg), where the
 * consumer finds it. Thread-safety: set_target, fix, measure and the ring
 * accessors may be called from any one thread while the coordinator runs.
 */
#ifndef GOLDMINER_POOL_H
#define GOLDMINER_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "goldminer/job.h"
#include "goldminer/worker.h"

struct gm_pool;
struct gm_dataset;

struct gm_pool_cfg {
	struct gm_worker_cfg w;	       /* what the workers make; w.ring is set by gm_pool_create */
	uint64_t first_task, end_task; /* the tasks of the ring (end: GM_RING_NO_END) */
	uint32_t slots;		       /* ring slots, a power of two; 0: twice the first pool */
	int workers;		       /* first pool size (>= 0; 0: none until a target) */
	bool autoscale;		       /* the elastic controller sizes the pool (workers = auto) */
	uint32_t budget;	       /* ... within this many workers */
	uint32_t chaos_kill_ms;	       /* testing: SIGKILL a random worker every N ms (0: off) */
	uint32_t lease_timeout_ms;     /* kill a lease holder that finishes no sample for this
					* long and re-issue its batch (0: not watched) */
	int nice;		       /* workers' nice value (0: the coordinator's) */
	uint32_t start_timeout_ms;     /* kill a worker not made this long after its fork
					* and start another (0: GM_POOL_START_MS, or
					* $GM_POOL_START_MS, 100 ms up to that); watched
					* with the leases (lease_timeout_ms 0: not watched) */
	/* Workers of a binding (bind.h): each worker is a fresh process running this
	 * command (execvp; NULL-terminated, borrowed: it must outlive the pool) with the
	 * ring's memfd as fd 3 and its worker id in GM_WORKER_ID (the lowest no live
	 * worker holds: 0..workers-1, a replacement takes the id of the worker it
	 * replaces, a shrink retires the highest), instead of the C worker loop. NULL:
	 * the C worker. Its w.ds may be NULL: the ring's ids[] then hold the
	 * consumer's sample indices. */
	const char *const *exec_argv;
	uint64_t sample_bytes; /* bytes per sample in the ring (0: the transform's output) */
	/* With exec_argv: a zygote's command (NULL: none). It loads what a worker loads,
	 * then forks each new worker on request (fd 4: it writes "R" once loaded, reads
	 * "F" and the worker's id as an int32, answers the worker's pid as an int32;
	 * an exec'd worker finds its id in GM_WORKER_ID), so a replaced worker starts in
	 * milliseconds. The owner's process is a child subreaper
	 * (PR_SET_CHILD_SUBREAPER) while it waits for each fork, so that worker
	 * reaches it as an orphan; other orphans of its descendants go to init. */
	const char *const *zygote_argv;
	/* With zygote_argv and exec_fd: > 2, a SOCK_SEQPACKET socket to this process's
	 * zygote server (python/goldminer/_zserver.py), which makes the zygote instead
	 * of an exec of zygote_argv: sent "Z" with the ring's fd, the zygote's socket
	 * and exec_fd (SCM_RIGHTS), it forks the zygote from an interpreter that has
	 * loaded what the trainer had (torch), orphaned to the owner (the adoption
	 * window), and says "P" and its pid on the zygote's socket. A server that
	 * fails (gone, no answer within 5 s) is not asked again by this pool: its
	 * zygotes are exec'd. Borrowed; 0: none. */
	int zygote_server;
	/* With exec_argv: > 2, an fd every exec'd worker and the zygote get as fd 5
	 * (borrowed: open until gm_pool_destroy), e.g. a sealed memfd with what the
	 * workers load, so that nothing is left on a file system if the owner is
	 * SIGKILLed; 0: none. */
	int exec_fd;
	/* > 0: the pool's ring is the one of this memfd (made by its consumer, a
	 * binding's: bind.h), attached and checked (gm_ring_attach) instead of
	 * created; its geometry and tasks are the ring's (w.batch_size, slots,
	 * sample_bytes, first_task and end_task are taken from it). Not owned. */
	int ring_fd;
	/* Without ring_fd: the ring is sparse (gm_ring_create_sparse: not reserved,
	 * not pre-faulted; a first guess at its slot size, only what is written costs). */
	bool sparse;
};

/* Checks of a job's options that need no index: the batch size is
 * 1..GM_MAX_BATCH and the workers can build the transform. 0 or -errno. */
int gm_pool_check(const struct gm_loader_opts *o, char *err, size_t errlen);

/* A lease deadline a job asked for (lease_timeout_ms, in a job's options or a
 * node request): 0 (the default, gm_lease_ms) .. GM_MAX_LEASE_MS. 0, or -EINVAL
 * with "lease_timeout_ms must be 0 (default D) .. MAX, not N". */
int gm_pool_lease_check(uint32_t ms, char *err, size_t errlen);

/* The job's tasks over index ds: batches per epoch (drop_last), the first task
 * (start_batch) and one past the last (GM_RING_NO_END when epochs is 0).
 * -EINVAL with a message when the options deliver nothing. */
int gm_pool_tasks(const struct gm_loader_opts *o, const struct gm_dataset *ds, uint32_t *bpe,
		  uint64_t *first, uint64_t *end, char *err, size_t errlen);

/* A configuration from the options and gm_pool_tasks' results: the worker config
 * (ds borrowed: it must outlive the pool), slots, chaos, workers = o->workers;
 * no autoscale. The caller adjusts what its mode needs. */
void gm_pool_cfg_init(struct gm_pool_cfg *c, const struct gm_loader_opts *o,
		      const struct gm_dataset *ds, uint32_t bpe, uint64_t first, uint64_t end);

/* Create the ring of the job (no workers yet). 0, -EINVAL (slots), or the ring's
 * -errno, with a message in err. Destroy with gm_pool_destroy. */
int gm_pool_create(struct gm_pool **out, const struct gm_pool_cfg *c, char *err, size_t errlen);

/* The job's ring (owned by the pool) and its memfd, for a consumer elsewhere. */
struct gm_ring *gm_pool_ring(const struct gm_pool *p);

/* Start the coordinator and wait until it has forked the first cfg.workers
 * workers (0: none; the ring's consumer waits until gm_pool_set_target). 0, or -errno with a
 * message (then gm_pool_destroy the pool). */
int gm_pool_start(struct gm_pool *p, char *err, size_t errlen);

/* Size the pool to `workers` (clamped to 0..GM_MAX_WORKERS; 0 parks the job: its
 * workers retire and none starts); the controller, if any, may change it again.
 * A smaller size retires workers: each finishes its batch, then exits. gm_pool_fix sets the size
 * and turns the controller off (an explicit size wins). */
void gm_pool_set_target(struct gm_pool *p, int workers);
void gm_pool_fix(struct gm_pool *p, int workers);

/* Workers asked to go (retired by a smaller size, or killed by the lease watch)
 * that are not reaped yet: they still hold a CPU. With the ring header's p_alive
 * (load this first, then p_alive: a worker is then counted twice at worst, never
 * missed), the most workers the pool can have alive from now on, until its size is
 * raised, is max(target + retiring, p_alive). Any thread. */
uint32_t gm_pool_retiring(struct gm_pool *p);

/* For an owner that runs the elastic controller itself (the node agent): the
 * pool's measurement window, see gm_elastic_measure. 1 when a new estimate is in
 * *demand and *worker_rate, else 0. */
int gm_pool_measure(struct gm_pool *p, double *demand, double *worker_rate);

/* The last worker that quarantined sample took down: its pid and the signal that
 * killed it (0: it stalled past the lease deadline and the watch killed it). 0,
 * or -ENOENT when the sample is not quarantined by this pool. Any thread, once
 * the sample is known quarantined (gm_ring_quarantined, or a batch saying so). */
int gm_pool_culprit(struct gm_pool *p, uint32_t sample, int *pid, int *sig);

/* The pids of the workers running now, by worker id (at most max into pids):
 * how many. Any thread; a worker may exit right after. */
int gm_pool_pids(struct gm_pool *p, int *pids, int max);

/* Stop the coordinator: ask the workers to stop, then SIGKILL stragglers after
 * 2 s, and reap all. The ring stays mapped. Idempotent. */
void gm_pool_stop(struct gm_pool *p);

/* Stop the coordinator without stopping the ring: the ring goes on with another
 * pool's workers (a loader handing its job back to a node agent that adopted its
 * ring). Each worker is retired (it finishes its batch and exits), one still
 * running after 2 s is SIGKILLed, and every lease the pool's workers held goes
 * back to FREE. The ring stays mapped; then gm_pool_destroy. Idempotent. */
void gm_pool_hand_over(struct gm_pool *p);

/* Stop, then unmap the ring and free; NULL is a no-op. */
void gm_pool_destroy(struct gm_pool *p);

#endif
