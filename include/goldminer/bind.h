/*
 * bind.h - the ring's lease protocol for workers and consumers written in another
 * language (python/goldminer/_worker.py and goldminer.torch.DataLoader call it
 * through ctypes), so that a binding never speaks a second protocol of its own.
 *
 * A binding's ring is an ordinary ring (ring.h) used one way round: the consumer
 * draws each batch's sample indices (its sampler's order, its state) and writes
 * them into the slot of that batch before the slot is FREE for it, with the
 * batch's place: ids[0] its epoch, ids[1] its index in the epoch, ids[2..2+n) the
 * sample indices, n in the slot's control block (the ring's batch size is the
 * longest batch + GM_BIND_IDS_HDR). One ring may carry several epochs (the
 * consumer's persistent workers): a task is a ring position, its epoch and batch
 * are what the slot says. A worker claims a task with the same CAS as a
 * C worker (gm_ring_claim: the claim is the lease), reads those indices, computes
 * the batch whole and writes it as opaque bytes into the slot's data region (the
 * "payload": the binding's own layout, with its size inside), marks each sample
 * done as it goes (the pool's lease watch sees progress by the done bits and the
 * sample being computed) and publishes with a status. A worker holds nothing
 * between tasks: a task re-issued after its holder died is made again from the
 * indices, which no worker writes, after the positions its holder finished.
 *
 * The consumer side (gm_bind_pool_*) is a pool (pool.h) whose workers are fresh
 * processes running a command (fork + exec, ring memfd as fd 3), watched,
 * re-issued, replaced and quarantined exactly as C workers are, and a consumer
 * (consumer.h) that waits, counts, pins, gives slots back in task order and
 * keeps batches exactly as the C loader's does.
 *
 * What it does not do: no batch layout (the binding's), no pickling, no sampler,
 * no policy of its own: a budget hands the pool to the elastic controller, which
 * reads the counters gm_bind_pool_next and gm_bind_publish keep in the ring.
 */
#ifndef GOLDMINER_BIND_H
#define GOLDMINER_BIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GM_BIND_IDS_HDR 2 /* ids[] words before a batch's indices: epoch, batch */

/* ---- worker side ---------------------------------------------------------------- */

struct gm_bind;

/* Map the ring of memfd fd (the pool gives it as fd 3; not owned: dup'ed) for a
 * worker whose lease id is this process's pid. 0, or gm_ring_attach's -errno
 * (-EBADMSG, -EPERM) / -ENOMEM. One handle per worker process, one thread: in a
 * process forked from the attaching one (a dataset's helper), the calls below
 * that write into the ring do nothing (claim and error: -EPERM, publish: -EPERM,
 * sample and done: no write), for its lease is the attaching process's. */
int gm_bind_attach(struct gm_bind **out, int fd);

/* Unmap; NULL is a no-op. */
void gm_bind_detach(struct gm_bind *b);

/* Claim the lowest free task, waiting for one up to timeout_ms (-1: no limit).
 * The slot (>= 0) with *task set; its done/err bits, error records and bytes are
 * what an earlier holder of this task left when it died (a re-issue: resume
 * after them, gm_bind_is_done), else the bits and records are cleared;
 * -EAGAIN when none came in time (the caller may look at its own flags and call
 * again), -ENODATA when every task is handed out or the ring says stop, -EPERM
 * in a process forked from the attaching one. */
int gm_bind_claim(struct gm_bind *b, int timeout_ms, uint64_t *task);

/* Dealt claims, as torch's DataLoader deals batches: from now on b claims only
 * batches whose number in their epoch is w modulo n (worker w of n makes batch
 * k when k mod n == w); n 0 or 1: any batch. 0, or -EINVAL (w >= n). Only for
 * a pool of exactly n workers with ids 0..n-1 (a replacement keeps the id of
 * the worker it replaces): else a batch may wait for a worker that never comes. */
int gm_bind_deal(struct gm_bind *b, uint32_t n, uint32_t w);

/* The claimed slot's batch: its epoch and index in the epoch (*epoch, *batch), and
 * its sample indices: their count, *idx pointing at them in the ring (valid while
 * the lease is held). 0 when the count is out of range. */
uint32_t gm_bind_indices(const struct gm_bind *b, uint32_t slot, const uint32_t **idx,
			 uint32_t *epoch, uint32_t *batch);

/* The slot's data region and its capacity in bytes (*cap), for the payload. */
void *gm_bind_payload(const struct gm_bind *b, uint32_t slot, uint64_t *cap);

/* Sample `sample` is being computed now (crash and stall attribution: a sample
 * that kills or stalls two workers is quarantined); UINT32_MAX: none. Returns
 * whether it is quarantined (gm_bind_quarantined: one call per sample). */
bool gm_bind_sample(struct gm_bind *b, uint32_t slot, uint32_t sample);

/* How many positions of the claimed slot are done (0: a fresh task, nothing to
 * resume; one call instead of gm_bind_is_done for each position). */
uint32_t gm_bind_done_count(const struct gm_bind *b, uint32_t slot);

/* Was position i completed by this task's holder, or an earlier one that died? */
bool gm_bind_is_done(const struct gm_bind *b, uint32_t slot, uint32_t i);

/* Position i of the batch is complete (the lease watch's progress; a re-issue
 * resumes after it: whatever the binding keeps for it must be written first). */
void gm_bind_done(struct gm_bind *b, uint32_t slot, uint32_t i);

/* Position i's own sample `sample` was bad (err: -errno, msg: why, truncated to
 * the ring's record size): an error record and its err bit. 0, -EINVAL for
 * an i beyond the batch, or -EPERM in a process forked from the attaching one. */
int gm_bind_error(struct gm_bind *b, uint32_t slot, uint32_t i, uint32_t sample, int32_t err,
		  const char *msg);

/* Has sample been quarantined (it crashed or stalled two workers)? */
bool gm_bind_quarantined(const struct gm_bind *b, uint32_t sample);

/* Publish the claimed slot (its time since the claim, less the time this process
 * waited for a CPU, goes into the slot for the elastic controller) with status 0, -EBADMSG (the
 * batch failed on a bad sample: its record says which), -ENODATA (no substitute was good) or
 * -EMSGSIZE (the batch does not fit the slot: the payload's first 8 bytes hold
 * its size). 0, -EINVAL for another status, or -EPERM when this process does not
 * hold the slot's lease (a fork of the worker; a lease the pool took back after
 * its deadline): nothing published. */
int gm_bind_publish(struct gm_bind *b, uint32_t slot, int32_t status);

/* This worker cannot run at all (the dataset does not load): msg goes into the
 * ring header for the consumer (the first writer wins). */
void gm_bind_fatal(struct gm_bind *b, const char *msg);

/* ---- the epoch table -------------------------------------------------------------
 *
 * A pool's workers may start before the consumer has drawn its first epoch (a
 * loader starts them when it is built) and serve epoch after epoch (a loader's
 * next epoch reuses them): what differs per epoch beside the indices, its base
 * seed, is in the ring's header page past struct gm_ring_hdr, GM_BIND_EPOCHS
 * entries (epoch % GM_BIND_EPOCHS), written by the consumer before it gives the
 * epoch's first task and read by a worker after it claims one (the claim's
 * acquire sees it). A ring's tasks span at most two epochs at a time, so an entry
 * is never rewritten while a task of its epoch is in flight. */
#define GM_BIND_EPOCHS 64

/* The worker side: epoch's base seed in *seed. 0, or -ENOENT when the consumer
 * wrote none for that epoch (the entry holds another epoch's, or nothing). */
int gm_bind_epoch_seed(const struct gm_bind *b, uint32_t epoch, uint64_t *seed);

/* The worker side, before its first claim: wait up to timeout_ms for the table's
 * first entry (the consumer's first epoch, drawn when its first iterator is made)
 * and give its epoch and seed (the lowest epoch of the table), for what a worker
 * sets up once with its epoch's seed (torch's get_worker_info().seed,
 * worker_init_fn). 0; -EAGAIN when none came in time; -ENODATA when the ring says
 * stop. */
int gm_bind_first_epoch(struct gm_bind *b, int timeout_ms, uint32_t *epoch, uint64_t *seed);

/* ---- consumer side ------------------------------------------------------------- */

struct gm_bind_pool;
struct gm_ring;

struct gm_bind_pool_cfg {
	const char *const *argv;	/* each worker's command (execvp, NULL-terminated;
					 * borrowed: it must outlive the pool) */
	uint32_t workers;		/* processes (1..GM_MAX_WORKERS) */
	uint32_t slots;			/* ring slots, a power of two (0: 2 per worker, >= 4) */
	uint32_t batch_max;		/* most indices in one batch */
	uint64_t payload_bytes;		/* capacity of a slot's payload */
	uint64_t first_task;		/* tasks: ring positions [first_task, end_task) */
	uint64_t end_task;		/* (GM_RING_NO_END: as many as the consumer gives) */
	uint32_t lease_timeout_ms;	/* a lease with no progress for this long is ended
					 * (0: GM_LEASE_TIMEOUT_MS) */
	uint32_t budget;		/* > 0: the elastic controller sizes the pool within
					 * this many workers, from `workers` (elastic.h) */
	const char *const *zygote_argv; /* a zygote's command (pool.h), NULL: none */
	int spec_fd;	   /* > 2: each worker's and the zygote's fd 5, what they load (a
			    * memfd: gone with the consumer's process, however it ends;
			    * borrowed: open until the pool is destroyed); 0: none */
	int sparse;	   /* != 0: a sparse ring (ring.h, gm_ring_create_sparse): payload_bytes
			    * is a first guess, its pages cost only once written; such a ring
			    * cannot be pinned (gm_bind_pool_pin: -EINVAL) */
	int zygote_server; /* > 2: the process's zygote server, which makes the zygote
			    * (pool.h; borrowed: open while the pool may start one); 0: none */
};

/* Create the ring and the pool (no worker yet). 0 or -errno with a message. */
int gm_bind_pool_create(struct gm_bind_pool **out, const struct gm_bind_pool_cfg *c, char *err,
			size_t errlen);

/* Where a batch is and what it holds: batch `batch` of epoch `epoch`, n indices. */
struct gm_bind_batch {
	uint32_t epoch, batch;
	const uint32_t *idx;
	uint32_t n;
};

/* Task's batch, task one of the ring's first window [first_task, first_task +
 * slots): every slot starts parked (no worker claims it) until this gives its
 * task, before gm_bind_pool_start or after (a consumer whose first epoch is
 * shorter than the ring gives the rest once it knows them). Later tasks come
 * with gm_bind_pool_release. 0, -EINVAL (n out of 1..batch_max, task not in
 * the window or past the end), or -EBUSY (given already). */
int gm_bind_pool_give(struct gm_bind_pool *p, uint64_t task, const struct gm_bind_batch *b);

/* Start the workers. 0 or -errno with a message. */
int gm_bind_pool_start(struct gm_bind_pool *p, char *err, size_t errlen);

/* Instead of gm_bind_pool_start: have the node agent at socket_path (NULL or "":
 * the default socket, wire.h) run the workers over this pool's ring (a CMDJOB,
 * wire.h): the same command, the spec (spec_fd, required), the lease deadline;
 * cap: the most workers it may give (0: its policy decides). The agent sizes
 * the pool with its division across jobs; the workers stay on its host. The
 * connection is this pool's: once the agent is gone, gm_bind_pool_next runs
 * the same command's workers in this process over the ring (one line on
 * stderr) and sends the job again to an agent that answers on socket_path
 * later (then its workers go on; ours finish their batches); it fails with
 * -EPIPE (GM_CONSUMER_AGENT_GONE) only when ours cannot start.
 * gm_bind_pool_destroy closes the connection (the agent then stops the workers).
 * When the agent cannot run the command (its reply's GM_NODE_TRAINER_WORKERS,
 * wire.h), or $GOLDMINER_NODE_WORKERS is "trainer" (it asks that; "auto" or
 * unset: the agent decides; another value is -EINVAL), this process runs them
 * over the ring from the start, the pool of the agent-gone path, sized by the
 * agent: gm_bind_pool_next takes the ring header's a_target (ring.h) into it;
 * their lease watch and kills are this process's pool's; an agent that goes
 * away leaves them at their last size. 0, or -errno with
 * a message ("node agent: ..." for its refusals). */
int gm_bind_pool_node(struct gm_bind_pool *p, const char *socket_path, uint32_t cap, char *err,
		      size_t errlen);

/* Before gm_bind_pool_node: the job's facts for peers that lend Python
 * workers (core/remote/pyhome.c), NUL-terminated words ending with an empty
 * one ("py=" the interpreter's sys.version, "root=DIR" per directory the
 * dataset reads), sent after the command. Without them (or without peers)
 * the job's workers stay on the agent's host. 0, or -EINVAL (not such
 * words, more than 2 KiB). */
int gm_bind_pool_facts(struct gm_bind_pool *p, const char *facts, size_t len);

/* Epoch's base seed into the ring's epoch table (above), before the epoch's first
 * task is given. Consumer thread. */
void gm_bind_pool_seed(struct gm_bind_pool *p, uint32_t epoch, uint64_t seed);

/* The trainer's pause between epochs (gm_elastic_pause): begin (1) after an
 * epoch's last batch, end (0) before the next epoch's first, so what the agent
 * or the elastic pool measures as its demand leaves the pause out. */
void gm_bind_pool_pause(struct gm_bind_pool *p, int begin);

/* Wait for task's batch (the wait and the delivered batch are counted in the
 * ring for the elastic controller): its slot (>= 0); -ETIMEDOUT after timeout_ms (-1: no
 * limit); -EINTR when a signal handler ran (the caller decides); -EINVAL for a
 * task of the first window never given (its slot is parked); -EIO when the
 * workers cannot run (message in err: the pool's, or a worker's fatal); -EPIPE
 * when the node agent that runs them is gone; -errno when a kept batch had to be
 * detached (see gm_bind_pool_keep) and could not be. The slot is held (by the
 * user) until gm_bind_pool_release. */
int gm_bind_pool_next(struct gm_bind_pool *p, uint64_t task, int timeout_ms, char *err,
		      size_t errlen);

/* A ready slot: its status (gm_bind_publish's), its payload and capacity. */
int32_t gm_bind_pool_status(const struct gm_bind_pool *p, uint32_t slot);
const void *gm_bind_pool_payload(const struct gm_bind_pool *p, uint32_t slot, uint64_t *cap);

/* A ready slot's bad samples: how many (exact), and record r (< min(count, 8))
 * in *sample, *err, and its message (in the ring: valid until release). NULL
 * when r is out of range. */
uint32_t gm_bind_pool_errors(const struct gm_bind_pool *p, uint32_t slot);
const char *gm_bind_pool_error(const struct gm_bind_pool *p, uint32_t slot, uint32_t r,
			       uint32_t *sample, int32_t *err);

/* Hand the slot back for task + slots, whose batch it carries (NULL only when
 * that task is past the end). A consumer that does not know the next batch yet
 * (the next epoch's order is not drawn) keeps the slot until it does. The ring
 * gets slots back in task order, each once nothing holds it: a kept slot (below)
 * after its gm_bind_pool_drop too, and any slot after every older one. 0, or
 * -EINVAL (n out of 1..batch_max, NULL before the end, a slot still parked, not
 * delivered or released already: nothing done). */
int gm_bind_pool_release(struct gm_bind_pool *p, uint32_t slot, const struct gm_bind_batch *b);

/*
 * Keep the payload of the slot just delivered (its first len bytes) past its
 * release, for views a user may hold as long as it likes: *addr is a second
 * mapping of those pages (consumer.h), valid until gm_bind_pool_drop of an
 * address in it or gm_bind_pool_destroy. When the user keeps so many that the
 * workers would have fewer than 2 slots to fill, gm_bind_pool_next first detaches
 * the oldest: a private copy of its pages at the same addresses, its slot given
 * back (gm_bind_pool_detached counts them). 0; -EINVAL (a slot not delivered,
 * kept already, len 0 or past the payload); -errno from mmap.
 */
int gm_bind_pool_keep(struct gm_bind_pool *p, uint32_t slot, uint64_t len, void **addr);

/* The kept batch at addr (any address inside it) is no longer viewed: its slot's
 * hold ends (or its detached copy is unmapped). 0, or -ENOENT. */
int gm_bind_pool_drop(struct gm_bind_pool *p, const void *addr);

/* Kept batches detached into a copy so far. */
uint64_t gm_bind_pool_detached(const struct gm_bind_pool *p);

/* Stop the workers (and hang up on the node agent) but keep the ring and kept
 * batches mapped until gm_bind_pool_destroy, so views stay readable (no batch
 * is made any more). Idempotent; NULL is a no-op. */
void gm_bind_pool_stop(struct gm_bind_pool *p);

/* Counters: [0] workers alive, [1] deaths, [2] tasks re-issued, [3] samples
 * quarantined, [4] the pool's target size (the controller's, with a budget). */
void gm_bind_pool_stats(const struct gm_bind_pool *p, uint64_t out[5]);

/* Who a quarantined sample took down last (gm_pool_culprit): the worker's pid and
 * the signal that killed it, 0 for a stall the lease watch ended; so that a batch
 * failed on it is reported as torch reports a dead worker. 0, or -ENOENT (not
 * quarantined here, or the workers are a node agent's). Consumer thread. */
int gm_bind_pool_culprit(const struct gm_bind_pool *p, uint32_t sample, int *pid, int *sig);
/* The pids of the pool's workers running now (gm_pool_pids): how many (this
 * process's workers, also over a node agent's job when they run here); 0 for a
 * node agent's pool whose workers it runs itself (they are its children). */
int gm_bind_pool_pids(const struct gm_bind_pool *p, int *pids, int max);

/* Page-lock the ring for the GPU (cudaHostRegister, cuda.h), so that batches
 * that view it are pinned host memory (pin_memory=True). 0; -ENODEV when no
 * CUDA device or runtime is usable here; -EINVAL for a sparse ring (it would
 * fault every page in); the runtime's -errno otherwise. The
 * registration ends with gm_bind_pool_destroy. */
int gm_bind_pool_pin(struct gm_bind_pool *p);

/* The pool's ring (owned by the pool): a remote Python worker (core/remote/
 * pywork.c) reads a ready slot's err bits and records from it. */
struct gm_ring *gm_bind_pool_ring(const struct gm_bind_pool *p);

/* The pool's ring slots (the window of tasks that may be in flight). */
uint32_t gm_bind_pool_slots(const struct gm_bind_pool *p);

/* Stop the workers (SIGKILL after 2 s), unmap, free; NULL is a no-op. */
void gm_bind_pool_destroy(struct gm_bind_pool *p);

#endif
