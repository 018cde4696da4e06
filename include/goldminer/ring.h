/*
 * ring.h - the shared-memory batch ring between workers and the consumer.
 *
 * One memfd region: a header page, then N slots. Slot k mod N carries batch
 * (task) k. Each slot has a control block whose 32-bit `state` word is both the
 * lease and the futex: FREE (waiting to be produced for task slot.task),
 * CLAIMED|pid (a worker holds the lease), READY (published). Workers claim with a
 * CAS FREE -> CLAIMED|pid, so a claim and its lease are one atomic step; if that
 * worker dies, the coordinator CASes CLAIMED|pid back to FREE and any worker makes
 * the batch again (same bytes, contract 1). Backpressure: only tasks in
 * [consumed, consumed + N) exist as FREE slots. Indices are free-running u64,
 * masked on access, published with release stores and read with acquire loads.
 *
 * The region is sealed against shrinking and growing (F_SEAL_SHRINK|F_SEAL_GROW)
 * once sized, and gm_ring_attach refuses a region without those seals: whoever
 * created it cannot cut pages out from under a mapping (SIGBUS in the consumer).
 * A ring is admitted before it is created: its bytes are compared with what the
 * machine and the process's memory cgroup can still give (gm_ring_admit), so a
 * too-large --batch/--size/--slots is an error naming the sizes, not the OOM
 * killer's choice of victim.
 *
 * The ring neither knows what a batch contains nor spawns anyone: worker.c fills
 * slots, loader.c consumes and coordinates.
 */
#ifndef GOLDMINER_RING_H
#define GOLDMINER_RING_H

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GM_RING_MAGIC	  0x31304e49524d4721ull /* "!GMRIN01" little-endian */
#define GM_RING_VERSION	  3   /* 3: the slots count stale row indexes (n_stale, stale[]) */
#define GM_RING_MAX_ERRS  8   /* error records kept per batch (count is exact) */
#define GM_RING_MSG	  112 /* bytes of one error message */
#define GM_RING_MAX_STALE 4   /* members with a stale row index named per batch */
#define GM_RING_NO_END	  UINT64_MAX

enum gm_slot_state {
	GM_SLOT_FREE = 0,
	GM_SLOT_CLAIMED = 1,
	GM_SLOT_READY = 2,
};
#define GM_SLOT_STATE(w)      ((w) >> 24)
#define GM_SLOT_PID(w)	      ((w)&0xffffffu)
#define GM_SLOT_WORD(st, pid) (((uint32_t)(st) << 24) | ((uint32_t)(pid)&0xffffffu))

struct gm_slot_err {
	uint32_t sample; /* dataset id of the bad sample */
	int32_t err;	 /* -errno */
	char msg[GM_RING_MSG];
};

/* Per-slot control block, at the start of each slot (one page). */
struct gm_slot_ctl {
	_Atomic uint32_t state;	     /* lease + futex word, see above */
	uint32_t attempts;	     /* times this task was re-issued after a death */
	_Atomic uint64_t task;	     /* task this slot currently carries */
	_Atomic uint32_t cur_sample; /* sample being decoded (crash attribution) */
	uint32_t n;		     /* samples in the batch */
	uint32_t n_errors;	     /* bad samples replaced (or the failing one) */
	int32_t status;		     /* 0, -EBADMSG (on_error=fail hit a bad sample) or
				      * -ENODATA (no good substitute left): gm_ring_status_ok */
	uint32_t n_recs;	     /* valid entries of errs[] */
	uint64_t read_ns, decode_ns, augment_ns, write_ns;
	struct gm_slot_err errs[GM_RING_MAX_ERRS];
	/* (version 2) worker.c, no stuck run: 1 + the task whose progress the done/err
	 * bits hold (0: none). A worker clears the bits before it stores this, so a
	 * worker killed between its claim and that clearing never lets the next one
	 * trust the previous task's bits. Written by the lease holder only. */
	_Atomic uint64_t bits_task;
	/* worker.c, the crop-only decode: bytes the workers read for this batch (ranged
	 * reads of restart-marked shards read less than the members' sizes) */
	uint64_t read_bytes;
	/* worker.c, for measured rates: of the stage times above, how long the worker
	 * sat on a run queue, preempted (/proc/self/schedstat's run delay): the
	 * controller plans with a worker's rate while it runs or waits for I/O, not
	 * with what the other processes on its cores leave it */
	uint64_t preempt_ns;
	/* worker.c, row indexes that lie: samples of this batch whose shard member's
	 * row index did not match the member (jpeg.h), decoded whole instead; the
	 * first GM_RING_MAX_STALE of them, for the loader to name each once */
	uint32_t n_stale;
	uint32_t stale[GM_RING_MAX_STALE];
	/* remote/home.c: 1 when a remote worker made this batch (0 from
	 * gm_ring_begin_task, but 1 where it resumes a task with samples done:
	 * their maker's times were lost with its lease, and seed 105's fed home
	 * read its local capacity 7,091-10,511 img/s from 0.25 core after remote
	 * leases timed out): its stage times are the lender's, on the lender's
	 * cores, or do not cover its samples, and a consumer leaves them and its
	 * samples out of a local worker's rate (c_remote_samples) */
	uint32_t remote;
};

/* A slot's status is one a worker writes (worker.c): anything else came from a
 * writer that misbehaves, and whoever reads the slot refuses it rather than
 * pass it on (a positive status would read as the loader's END codes). */
static inline bool gm_ring_status_ok(int32_t status)
{
	return status == 0 || status == -EBADMSG || status == -ENODATA;
}

/* The header page. Fields above `consumed` are written once at creation. */
struct gm_ring_hdr {
	uint64_t magic;
	uint32_t version;
	uint32_t hdr_bytes;
	uint32_t nslots; /* power of two */
	uint32_t batch_size;
	uint64_t sample_bytes; /* bytes per sample */
	uint64_t slot_bytes;   /* bytes per slot including its control page */
	uint64_t data_offset;  /* offset of pixels within a slot */
	uint64_t total_bytes;  /* whole region */
	uint64_t first_task;
	uint64_t end_task;			/* GM_RING_NO_END when unlimited */
	_Alignas(64) _Atomic uint64_t consumed; /* next task the consumer takes */
	_Alignas(64) _Atomic uint32_t work_seq; /* futex: bumped when work appears */
	_Atomic uint32_t stop;			/* all workers: exit now */
	/* consumer -> coordinator, for the elastic controller (relaxed counters) */
	_Alignas(64) _Atomic uint64_t c_samples; /* samples delivered */
	_Atomic uint64_t c_wait_ns;		 /* consumer time blocked in next() */
	_Atomic uint64_t c_work_ns;		 /* worker time of delivered batches */
	_Atomic uint64_t c_waiting; /* while the consumer is blocked in next(): when it began
				     * (CLOCK_MONOTONIC ns, > 1; an older consumer: 1); else 0 */
	_Atomic uint64_t c_errors;  /* (v2) bad samples in delivered batches */
	/* the consumer's pauses between epochs (it asks for nothing, waits for
	 * nothing: an evaluation, a checkpoint, another loader's epoch): the ones
	 * ended, and when the current one began (CLOCK_MONOTONIC ns; 0: none), so
	 * a demand is measured over the time it iterates (gm_elastic_measure). A
	 * consumer that does not count them leaves both 0. */
	_Atomic uint64_t c_pause_ns, c_pause_t0;
	/* of c_samples, those of batches remote workers made (ctl remote): their
	 * time is not in c_work_ns, which is the local workers' alone */
	_Atomic uint64_t c_remote_samples;
	/* coordinator -> consumer, for stats (the consumer may be another process) */
	_Alignas(64) _Atomic uint32_t p_alive, p_target;
	_Atomic uint64_t p_deaths, p_reissued, p_chaos_kills, p_detect_max, p_detect_sum;
	_Atomic uint64_t p_demand_mrate, p_worker_mrate; /* milli-images/s */
	_Atomic int32_t p_fatal;			 /* -errno once the pool cannot run */
	char p_fatal_msg[256];				 /* written before p_fatal (release) */
	_Alignas(64) _Atomic uint32_t fatal_set;	 /* a worker could not start */
	char fatal[256];				 /* ... and why (first one wins) */
	_Alignas(64) _Atomic uint32_t quarantine_n;
	uint32_t quarantine[64]; /* samples that crashed workers twice */
	/* node agent -> a trainer that runs its job's workers itself (wire.h,
	 * GM_NODE_TRAINER_WORKERS): the pool size the agent's division gives the
	 * job, which the trainer's pool takes (gm_pool_set_target) */
	_Alignas(64) _Atomic uint32_t a_target;
	/* node agent -> the job's local workers (worker.c, pace): the share of a
	 * core each may spend on average, in thousandths (0: no limit), set on a
	 * CPU-poor host while remote workers' batches land there
	 * (gm_policy_local_pace), so the host's quota is left to the receive path */
	_Atomic uint32_t a_pace_milli;
};

struct gm_ring;

/* Bytes of the region of a ring of nslots slots of batch_size samples of
 * sample_bytes each (header page, control pages, labels, pixels); 0 when the
 * sizes are out of range (what gm_ring_create refuses with -EINVAL). Pure. */
uint64_t gm_ring_size(uint32_t nslots, uint32_t batch_size, uint64_t sample_bytes);

/* Admission: 0 when a ring of these sizes fits in gm_host_mem_room() (host.h),
 * else -ENOMEM with a message in err giving the ring's size, the room and its
 * source, and the options that lower it; -EINVAL (message too) for sizes out of
 * range and for a GM_MEM_LIMIT that is not a size (gm_host_mem_limit). */
int gm_ring_admit(uint32_t nslots, uint32_t batch_size, uint64_t sample_bytes, char *err,
		  size_t errlen);

/* Create a ring region (memfd, sized, sealed against shrink/grow, pre-faulted),
 * after gm_ring_admit. 0 or -errno (-EINVAL, -ENOMEM: does not fit in memory). */
int gm_ring_create(struct gm_ring **out, uint32_t nslots, uint32_t batch_size,
		   uint64_t sample_bytes, uint64_t first_task, uint64_t end_task);

/* gm_ring_create without the reservation and the pre-fault: a sparse region whose
 * pages are allocated (and charged to the memory cgroup) as they are first
 * written, and that gm_ring_attach maps without pre-faulting either (it
 * pre-faults a ring only when every page of the memfd is allocated). For a first
 * guess much larger than what is likely used. Memory that runs out later is a
 * SIGBUS in the process that writes the page, not -ENOMEM here. 0 or -errno. */
int gm_ring_create_sparse(struct gm_ring **out, uint32_t nslots, uint32_t batch_size,
			  uint64_t sample_bytes, uint64_t first_task, uint64_t end_task);

/* Map a ring from a memfd another process created, validating the header (magic,
 * version, sizes vs the fd's size) and its seals. Takes no ownership of fd (it is
 * dup'ed). -EBADMSG for a header that does not validate; -EPERM for a region
 * that is not sealed against shrinking and growing (its creator could cut pages
 * out from under the mapping). */
int gm_ring_attach(struct gm_ring **out, int fd);

/* Unmap and close; NULL is a no-op. */
void gm_ring_destroy(struct gm_ring *r);

int gm_ring_fd(const struct gm_ring *r);
struct gm_ring_hdr *gm_ring_hdr(const struct gm_ring *r);
void *gm_ring_base(const struct gm_ring *r);
size_t gm_ring_bytes(const struct gm_ring *r);
struct gm_slot_ctl *gm_ring_ctl(const struct gm_ring *r, uint32_t slot);
int32_t *gm_ring_labels(const struct gm_ring *r, uint32_t slot);
uint32_t *gm_ring_ids(const struct gm_ring *r, uint32_t slot);
void *gm_ring_data(const struct gm_ring *r, uint32_t slot);
/* The whole slot (control page first, slot_bytes long) at file offset
 * gm_ring_slot - gm_ring_base: a second mapping of one slot maps this. */
void *gm_ring_slot(const struct gm_ring *r, uint32_t slot);
/* Per-sample progress of a slot's batch, ceil(batch/64) words each: bit i of
 * `done` is set (release) once sample i's bytes, label and id are complete, so a
 * re-issued task resumes where the dead worker stopped; `err` marks positions
 * whose own sample was bad (replaced or failing). Valid for the slot's current task. */
_Atomic uint64_t *gm_ring_done_bits(const struct gm_ring *r, uint32_t slot);
_Atomic uint64_t *gm_ring_err_bits(const struct gm_ring *r, uint32_t slot);

/*
 * Worker: claim the lowest-numbered free task with a lease for pid. Returns the
 * slot index (>= 0) with *task set, -EAGAIN if none is free now, -ENODATA if every
 * task has been handed out (end reached) or stop is set.
 */
int gm_ring_claim(struct gm_ring *r, uint32_t pid, uint64_t *task);

/* gm_ring_claim among the free tasks whose slot `want` accepts (it reads what the
 * consumer wrote into the slot for that task: visible, the load that saw the
 * slot free being an acquire); -EAGAIN while none of those is free. */
typedef bool (*gm_ring_want_fn)(const struct gm_ring *r, uint32_t slot, void *arg);
int gm_ring_claim_if(struct gm_ring *r, uint32_t pid, uint64_t *task, gm_ring_want_fn want,
		     void *arg);

/* Worker: publish a filled slot (release store of READY) and wake the consumer. */
void gm_ring_publish(struct gm_ring *r, uint32_t slot);

/* Worker: publish a filled slot as gm_ring_publish does, only while its lease is
 * pid's (a CAS CLAIMED|pid -> READY): 0, or -EPERM when the slot is not leased to
 * pid (the coordinator took it back, or it was never pid's): nothing published. */
int gm_ring_publish_held(struct gm_ring *r, uint32_t slot, uint32_t pid);

/* Worker: sleep until work_seq differs from seq (futex), or timeout_ms passes. */
void gm_ring_wait_work(struct gm_ring *r, uint32_t seq, int timeout_ms);

/* Consumer: wait until task's slot is READY. 0, -ETIMEDOUT after timeout_ms, or
 * -EINTR when a signal handler ran during the wait (the caller decides). */
int gm_ring_wait_ready(struct gm_ring *r, uint64_t task, int timeout_ms);

/* Consumer: hand the slot of task `consumed` back for task consumed + N. */
void gm_ring_release(struct gm_ring *r, uint32_t slot);

/* Consumer: hold a slot of the first window back, READY for its own task as if
 * the consumer held it, so that no worker claims it: its task's content is not
 * known yet (a binding's next epoch, bind.h). Before any worker maps the ring. */
void gm_ring_park(struct gm_ring *r, uint32_t slot);

/* Consumer: make a parked slot FREE for its task, once what the task needs is
 * written into it (the release store of FREE publishes that to the claimer's
 * CAS), and wake the workers waiting for work. Workers may be running. */
void gm_ring_unpark(struct gm_ring *r, uint32_t slot);

/* Lease holder (a worker, or the home agent for a remote worker): make slot ready
 * for task's batch of n samples. Its done/err bits and counters are kept when they
 * already describe this task (a re-issued task resumes after what its dead holder
 * finished: same bytes by contract 1), else cleared before bits_task claims them
 * for it (acquire/release on bits_task). */
void gm_ring_begin_task(struct gm_ring *r, uint32_t slot, uint64_t task, uint32_t n);

/* Coordinator: return every slot leased to pid to FREE (its task is re-issued).
 * Records the sample it was decoding in *crash_sample (UINT32_MAX if unknown) for
 * the first such slot. Returns the number of tasks re-issued. */
uint32_t gm_ring_reclaim(struct gm_ring *r, uint32_t pid, uint32_t *crash_sample);

/* Coordinator: ask all workers to stop and wake them. */
void gm_ring_stop(struct gm_ring *r);

/* Quarantine a sample (workers then treat it as bad without decoding it). */
void gm_ring_quarantine(struct gm_ring *r, uint32_t sample);
bool gm_ring_quarantined(const struct gm_ring *r, uint32_t sample);

#endif
