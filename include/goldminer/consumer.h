/*
 * consumer.h - the consumer's side of a ring, once for both kinds of job: the C
 * loader (loader.c) and the bindings' trainers (bind.c, goldminer.torch.DataLoader)
 * each embed one struct gm_consumer and keep only what is theirs (what a batch
 * holds, and where its next task comes from).
 *
 * It waits for a task's slot in short slices, so that a fatal error of the pool
 * or a worker, a node agent that went away, a signal or a deadline ends the wait
 * (one errno for each: see gm_consumer_wait); it keeps the counters the elastic
 * controller reads in the ring header; it pins the ring for the GPU; and it gives
 * slots back to the ring in task order. A slot is given back once nothing holds
 * it: the user (the batch delivered, or kept past the next one) and the embedder
 * (bind.c: the next task's indices not written yet) each hold it by one bit. A
 * kept batch is handed out through an alias, a second mapping of its slot's
 * pages alone, so that when the user keeps so many that the workers would have
 * fewer than 2 slots to fill, the oldest is detached: one mremap puts a private
 * copy of its pages at the same addresses and its slot goes back. When the node
 * agent went away, it looks for one on the socket again and asks it, in the
 * embedder's words, to take the job back (gm_consumer_reattach).
 *
 * What it does not do: it does not read what a batch holds (loader.c checks a
 * C batch, the binding lays out and checks a payload), create, own or destroy
 * the ring or the workers (pool.c, node.c), or write a task's indices (bind.c).
 *
 * The struct is public so that loader.c and bind.c embed it (one allocation, its
 * state beside theirs); its fields are read by them, written only here.
 * Thread-safety: one thread uses a consumer at a time, except gm_consumer_interrupt
 * (async-signal-safe).
 */
#ifndef GOLDMINER_CONSUMER_H
#define GOLDMINER_CONSUMER_H

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gm_ring;
struct gm_ring_hdr;
struct gm_consumer_keep; /* the aliases and detached copies (consumer.c) */

/* What holds a slot (bits of struct gm_consumer's hold[]): the ring gets it back
 * when none is left. */
#define GM_CONSUMER_USER  1u /* delivered (gm_consumer_take), not given back yet */
#define GM_CONSUMER_KEPT  2u /* viewed through its alias (gm_consumer_keep) */
#define GM_CONSUMER_OWNER 4u /* the embedder's own reason (bind.c: no next task yet) */

/* The vanished node agent's errno, for the C loader and the bindings alike. */
#define GM_CONSUMER_AGENT_GONE (-EPIPE)

struct gm_consumer {
	struct gm_ring *ring;		 /* borrowed: the pool's, or the agent's mapped here */
	struct gm_ring_hdr *h;		 /* its header: counters, fatal errors */
	uint32_t nslots;		 /* a power of two */
	uint64_t next;			 /* one past the last task delivered (the next to take) */
	uint64_t rel;			 /* oldest delivered task not given back to the ring */
	uint8_t *hold;			 /* per slot: GM_CONSUMER_* bits */
	struct gm_consumer_keep *keep;	 /* NULL until a batch is kept */
	int agent_fd;			 /* the node agent's connection (borrowed), or -1 */
	volatile sig_atomic_t interrupt; /* gm_consumer_interrupt: the wait says -EINTR */
	bool pinned;			 /* the ring is registered with CUDA */
	uint64_t wait_ns;		 /* time blocked in gm_consumer_wait for delivered tasks */
	uint64_t detached;		 /* kept batches copied out (gm_consumer_keep) */
	uint64_t retry_ns;		 /* gm_consumer_reattach's next look for an agent */
	uint32_t retry_ms;		 /* ... this long after the last (doubling on a refusal) */
	bool told_refusal;		 /* a refusal was said once (said again after a yes) */
	char errmsg[512];		 /* why the last call failed, without a function name */
};

/* Consume `ring` (borrowed: it outlives the consumer) from task `first`. 0 or
 * -ENOMEM. */
int gm_consumer_init(struct gm_consumer *c, struct gm_ring *ring, uint64_t first);

/* Unmap the aliases and the detached copies (no view of a kept batch may be used
 * after), unpin the ring, free. The ring is not given anything back: its owner
 * stops the workers first. A zeroed struct (never initialised) is a no-op. */
void gm_consumer_fini(struct gm_consumer *c);

/* Page-lock the ring for the GPU (cuda.h). 0 (also when pinned already), -ENODEV
 * when no CUDA device is usable here, or the runtime's -errno. Undone by fini. */
int gm_consumer_pin(struct gm_consumer *c);

/*
 * Wait for task's slot to be READY. First, when task is the next one to take and
 * kept batches leave the workers fewer than 2 free slots, the oldest kept ones
 * are detached (see above). The slot (>= 0); or, with the reason in errmsg:
 *   -EINTR      a signal handler ran, or gm_consumer_interrupt (call again);
 *   -ETIMEDOUT  not ready within timeout_ms (-1: no limit);
 *   the pool's errno (-EIO) when the workers cannot run (the pool's fatal
 *               error, or a worker's gm_bind_fatal);
 *   GM_CONSUMER_AGENT_GONE (-EPIPE) when the node agent at agent_fd went away;
 *   -errno      a kept batch could not be detached.
 * The wait is counted in the ring (c_waiting, c_wait_ns) for the controller.
 */
int gm_consumer_wait(struct gm_consumer *c, uint64_t task, int timeout_ms);

/* The node agent that ran the ring's workers went away (GM_CONSUMER_AGENT_GONE):
 * ready the ring for workers of this process. Every lease its workers held goes
 * back to FREE once its holder is gone (2 s at most in all: a remote worker's
 * lease names no process here, a holder in another pid namespace may look
 * alive); the ring's stop, set by an agent that stopped on a signal it handles,
 * is cleared, and its count of live workers zeroed. The tasks re-issued. */
uint32_t gm_consumer_orphans(struct gm_consumer *c);

/* The node agent that only sized the ring's workers, which this process runs,
 * went away (bind.c's trainer-run jobs), and with it the remote workers it
 * served (their leases' virtual ids, remote.h, name no process here): every
 * lease whose holder is not ours (ours(arg, holder) false) goes back to FREE
 * once that holder is gone (at once for a remote worker's; 2 s at most in all,
 * as gm_consumer_orphans). ours is asked again while it waits (a worker this
 * process forked meanwhile is ours), from the calling thread. The ring's stop
 * and count of live workers are this process's workers' and stay. The tasks
 * re-issued. */
uint32_t gm_consumer_strays(struct gm_consumer *c, bool (*ours)(void *arg, uint32_t holder),
			    void *arg);

/* Looking for a node agent that went away: the first look on its socket this
 * long after gm_consumer_agent_lost, then as often while no agent answers there,
 * and after each refusal twice as long, up to GM_CONSUMER_RETRY_MAX_MS. An
 * agent's answer to the ask is waited for GM_CONSUMER_REATTACH_MS at most. */
#define GM_CONSUMER_RETRY_MS	 500
#define GM_CONSUMER_RETRY_MAX_MS 8000
#define GM_CONSUMER_REATTACH_MS	 10000

/* The node agent went away and the embedder closed its connection: agent_fd is
 * -1, and gm_consumer_reattach looks for an agent again in GM_CONSUMER_RETRY_MS. */
void gm_consumer_agent_lost(struct gm_consumer *c);

/* The embedder's request that the agent on fd take the job back (loader.c: adopt
 * the running ring; bind.c: run the job's workers again): 0 when it did, or
 * -errno with the agent's words (or what went wrong) in why. */
typedef int (*gm_consumer_ask_fn)(void *arg, int fd, char *why, size_t len);

/*
 * Try to give the job back to a node agent on the socket at path (the one that
 * went away, or its successor): at most once per retry period (see
 * GM_CONSUMER_RETRY_MS), connect and ask(arg, fd, why, len), with fd's send and
 * receive bounded by GM_CONSUMER_REATTACH_MS. The agent's connection when it took
 * the job (blocking again, no timeouts; agent_fd set to it; the embedder closes
 * it); -1 when it is not time yet, nothing listens there, or the agent refused:
 * the first refusal since the last agent is said in one log line with path and
 * the agent's words, and the wait before the next look doubles. Not thread-safe.
 */
int gm_consumer_reattach(struct gm_consumer *c, const char *path, gm_consumer_ask_fn ask,
			 void *arg);

/* The next wait, or the one under way, returns -EINTR (within 100 ms). Async-
 * signal-safe. */
void gm_consumer_interrupt(struct gm_consumer *c);

/* Deliver task's READY slot to the user (held: GM_CONSUMER_USER, plus `owner`
 * bits the embedder holds it by): its samples, errors and work are counted in
 * the ring for the controller. A task below `next` (taken already) changes
 * nothing. Tasks are taken in increasing order; a gap is allowed only when
 * nothing is held (bind.c's one-slot staging ring takes every nslots-th). */
void gm_consumer_take(struct gm_consumer *c, uint64_t task, uint32_t slot, unsigned owner);

/* Drop `bits` of what holds slot; the slots that nothing holds any more go back
 * to the ring, oldest task first (a slot waits for every older one). */
void gm_consumer_give_back(struct gm_consumer *c, uint32_t slot, unsigned bits);

/*
 * Keep the batch in slot (held by the user) past later deliveries: map bytes
 * [off, off + len) of the slot again (off a multiple of the page size; len 0: the
 * whole slot) and return that alias's address in *addr. The user's hold then
 * ends only with gm_consumer_drop, or when the batch is detached. 0; -EINVAL
 * (not held, kept already, off or len out of the slot); -errno from mmap.
 */
int gm_consumer_keep(struct gm_consumer *c, uint32_t slot, size_t off, size_t len, void **addr);

/* The kept batch that holds addr is no longer used: its detached copy is
 * unmapped, or its slot's user hold is given back. 0, or -ENOENT when addr is in
 * no kept batch. */
int gm_consumer_drop(struct gm_consumer *c, const void *addr);

/* Is slot's batch kept (through an alias, not detached)? */
bool gm_consumer_kept(const struct gm_consumer *c, uint32_t slot);

/* Delivered tasks whose slots are not back in the ring. */
uint32_t gm_consumer_held(const struct gm_consumer *c);

#endif
