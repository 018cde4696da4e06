/*
 * loader.h - the consumer API: a trainer's view of goldminer.
 *
 * gm_loader_open() indexes the dataset, creates the shared-memory ring (memfd,
 * pre-faulted, pinned with cudaHostRegister when a GPU is present) and starts the
 * worker processes. gm_loader_next() returns a zero-copy view of the next batch in
 * order k = 0, 1, 2, ... of the seeded per-epoch permutation; its bytes depend only
 * on (dataset, spec, seed, epoch, k), never on the number of workers or crashes
 * (DESIGN.md contracts 1, 2). Errors are 0 / -errno with a per-handle message
 * (gm_loader_errmsg) that starts with the function name.
 *
 * The workers run in a pool of this process (pool.h: a private coordinator thread
 * forks, reaps and replaces them) or, with opts.node, in the node agent (node.h),
 * reached over the wire protocol (wire.h) and sharing only the ring. Either way
 * the consumer side below is the same code: it only reads the ring.
 *
 * Thread-safety: one thread uses a handle at a time.
 */
#ifndef GOLDMINER_LOADER_H
#define GOLDMINER_LOADER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "goldminer/aug.h"
#include "goldminer/job.h"

struct gm_loader;

/* The options (struct gm_loader_opts) and enum gm_on_error are in job.h, below
 * the worker, pool and wire modules that read them too. */

/* One delivered batch: a view into a ring slot, valid until the next
 * gm_loader_next() or gm_loader_release() on the same handle (or, once kept
 * with gm_loader_keep, until released). */
struct gm_batch {
	uint64_t epoch;		    /* epoch of this batch */
	uint64_t index;		    /* k within the epoch */
	uint32_t size;		    /* samples (the last batch may be short) */
	uint32_t n_errors;	    /* samples replaced because their file was bad */
	void *data;		    /* size * sample_bytes, layout as the spec says */
	size_t sample_bytes;	    /* bytes of one sample */
	const int32_t *labels;	    /* size labels */
	const uint32_t *sample_ids; /* size dataset ids actually delivered */
	uint32_t slot;		    /* internal */
};

struct gm_loader_stats {
	uint64_t batches, samples; /* delivered */
	double elapsed_s;	   /* since the first batch was delivered */
	double img_per_s;	   /* steady state: samples after the first batch / elapsed_s */
	/* Stage times summed over the delivered batches (worker CPU-side wall time). */
	uint64_t read_ns, decode_ns, augment_ns, write_ns;
	uint64_t wait_ns;	/* consumer time blocked in gm_loader_next */
	uint64_t errors;	/* bad samples met in delivered batches */
	uint32_t workers;	/* worker processes alive now */
	uint64_t worker_deaths; /* workers that died without being asked to */
	uint64_t reissued;	/* tasks re-issued after a worker died */
	uint32_t batches_per_epoch;
	uint32_t dataset_size;
	uint32_t num_classes;
	bool pinned;		/* the ring is registered with CUDA */
	uint64_t chaos_kills;	/* workers killed by chaos_kill_ms */
	uint64_t detect_ns_max; /* worst time from a kill to its reap + re-issue */
	uint64_t detect_ns_sum; /* ... summed over chaos kills (mean = sum / kills) */
	/* the effective transform (after a pipeline spec, if one was given) */
	uint32_t batch_size;
	uint32_t size; /* output side */
	uint32_t out;  /* enum gm_out_type */
	uint32_t mode; /* enum gm_aug_mode */
	uint64_t sample_bytes;
	uint32_t target_workers; /* what the pool is being sized to (auto or scale) */
	double demand_img_per_s; /* auto: consumer's measured demand (0 before a window) */
	double worker_img_per_s; /* auto: measured rate of one worker */
	uint64_t kept_copied;	 /* kept batches detached into a copy (gm_loader_keep) */
};

/* Defaults as documented in struct gm_loader_opts (job.h). */
void gm_loader_opts_default(struct gm_loader_opts *o);

/*
 * Open a loader. On failure returns -errno and, if errbuf is not NULL, writes a
 * message naming the cause (path, bad option) into errbuf (errlen bytes).
 */
int gm_loader_open(struct gm_loader **out, const struct gm_loader_opts *o, char *errbuf,
		   size_t errlen);

/*
 * Next batch, blocking (futex wait) until it is ready. Releases the previous batch
 * if it was not released. Returns 0 (batch filled), GM_LOADER_END_OF_EPOCH (1,
 * returned once after the last batch of each epoch; the next call starts the next
 * epoch), GM_LOADER_END (2, all requested epochs delivered), or -errno:
 * -EBADMSG (on_error=fail and a sample was bad; errmsg names the file),
 * -ENODATA (a bad sample and no good one to replace it: every file bad, or all
 * of the next 64 in epoch order; errmsg names files), -EIO (the workers cannot
 * run, or keep stalling), -EPIPE (the node agent went away and this process
 * could not start the job's workers itself: GM_CONSUMER_AGENT_GONE, consumer.h;
 * when it can, it goes on with them, says so once on stderr, and hands the job
 * back to an agent that answers on the socket again: loader.c), -EINTR (a
 * signal, see gm_loader_interrupt).
 */
#define GM_LOADER_END_OF_EPOCH 1
/* (python/goldminer/_abi.py mirrors both; test_abi.py reads them as written) */
#define GM_LOADER_END 2
int gm_loader_next(struct gm_loader *l, struct gm_batch *b);

/*
 * A wait in gm_loader_next for a batch that is not ready returns -EINTR (the
 * loader stays at that batch; call again to go on) when a signal handler runs
 * during it, so Ctrl-C or SIGTERM is seen even while every worker is stuck. A
 * signal that lands just outside the kernel's wait gives no EINTR: a handler that
 * must not be missed also calls gm_loader_interrupt(l), which is
 * async-signal-safe; the wait under way, or the next one, then returns -EINTR
 * within 100 ms.
 */
void gm_loader_interrupt(struct gm_loader *l);

/* Give the batch's slot back to the workers early; b may be a kept batch
 * (gm_loader_keep) from any earlier call. 0 or -EINVAL. */
int gm_loader_release(struct gm_loader *l, struct gm_batch *b);

/*
 * Keep the batch just delivered past the next gm_loader_next, so a binding can
 * hand it out without copying it: b->data, labels and sample_ids are moved to a
 * second mapping of its slot and stay valid and unwritten until
 * gm_loader_release(l, b) with this b (a copy of the struct does), in any order,
 * or gm_loader_close. A batch held so long that the workers would have fewer than
 * 2 slots left to fill is detached: its pages are replaced by a private copy at
 * the same addresses (one copy, then the slot goes back to the workers). 0;
 * -ENOTSUP for a shuffle_buffer batch (a copy the next batch overwrites); -EINVAL
 * if b is not the batch held; -errno if the slot cannot be mapped again.
 */
int gm_loader_keep(struct gm_loader *l, struct gm_batch *b);

/* Delivered batches whose ring slots are still kept (detached ones are not);
 * *slots, if not NULL, the ring's. */
uint32_t gm_loader_kept(const struct gm_loader *l, uint32_t *slots);

/*
 * gpu_decode: finish the batch b just delivered (or kept) on the host, the GPU
 * decode's host path: each of its b->size coefficient slots through
 * gm_aug_coef_finish (coef.h) under the workers' transform (the pipeline's, when
 * one was given), into out, out_len = b->size * the sample's bytes (the CPU
 * path's layout: the same bytes as gpu_decode off). Runs on the calling thread.
 * 0; -EINVAL (the loader is not in gpu_decode, or out_len is not that);
 * -ENOMEM; a slot's error (-EBADMSG: malformed, named in gm_loader_errmsg).
 */
int gm_loader_finish(struct gm_loader *l, const struct gm_batch *b, void *out, size_t out_len);

/*
 * gpu_decode on a CUDA device: the same batch finished by the GPU decode's
 * kernels (the plugin libgoldminer-cuda.so, loaded at the first call) into d_out,
 * out_len = b->size * the sample's bytes of device memory (a torch CUDA tensor's
 * data_ptr(), cudaMalloc), the bytes gm_loader_finish gives. Every slot is
 * checked first, on the host (a slot neither COEFS nor PIXELS, or malformed, is
 * refused before the device is touched); the PIXELS slots (the workers' CPU
 * fallback) are copied to their places. stream: the consumer's cudaStream_t on
 * d_out's device (NULL: the legacy default stream): the device's work waits for
 * what is queued there so far, and its later work waits for the samples, so the
 * samples may be used on that stream at once. Returns once the device has copied
 * the slots out of the ring: give the slot back then (gm_loader_release, or the
 * next gm_loader_next); with flags GM_LOADER_FINISH_SYNC, once the samples are in
 * d_out too. Runs on the calling thread; a wait gives up after 60 s. 0; -EINVAL
 * (as gm_loader_finish, an unknown flag, d_out not device memory), -EBADMSG (a
 * malformed slot, named), -ENODEV (no device or no plugin: why as
 * gm_loader_device_finish_ready says), -EIO, -ETIMEDOUT, -ENOMEM; the message in
 * gm_loader_errmsg.
 */
#define GM_LOADER_FINISH_SYNC 1u
int gm_loader_finish_device(struct gm_loader *l, const struct gm_batch *b, void *d_out,
			    size_t out_len, void *stream, unsigned flags);

/*
 * Can gm_loader_finish_device run in this process? true when the plugin
 * libgoldminer-cuda.so is there (beside libgoldminer.so, or named by
 * $GOLDMINER_CUDA_PLUGIN), a CUDA device is, and the plugin loads and is this
 * build's; else false with why (len bytes, may be NULL): "libgoldminer-cuda.so not
 * built: ...", "no CUDA device: ..." or "libgoldminer-cuda.so unusable: ...".
 * The device is probed once a process; thread-safe.
 */
bool gm_loader_device_finish_ready(char *why, size_t len);

/* Snapshot of the counters. */
void gm_loader_stats(const struct gm_loader *l, struct gm_loader_stats *s);

/* Bad samples met so far (in delivered batches, each once), i = 0, 1, ...; the
 * listing keeps the first GM_RING_MAX_ERRS (8) of each batch, the count in
 * stats.errors is exact. Returns 0 with the dataset path and a message (valid
 * until close), or -ERANGE past the listing. */
int gm_loader_error(const struct gm_loader *l, uint64_t i, const char **path, const char **msg);

/* Change the number of worker processes (>= 1). 0 or -EINVAL. */
int gm_loader_scale(struct gm_loader *l, int workers);

/* Position to resume from: the epoch and batch the next gm_loader_next returns.
 * With a shuffle_buffer op a loader can only be reopened at batch 0 of an epoch. */
void gm_loader_position(const struct gm_loader *l, uint32_t *epoch, uint64_t *batch);

/* Copy a delivered batch to GPU memory dst (cudaMemcpy, DMA when pinned).
 * -ENODEV without a usable GPU. */
int gm_loader_copy_to_device(struct gm_loader *l, const struct gm_batch *b, void *dst);

/* sizeof of the public structs as this library was built (0 aug spec, 1 loader
 * opts, 2 batch, 3 stats; 0 for another value): lets a binding (Python ctypes)
 * refuse a library whose layout differs from the one it mirrors. */
size_t gm_loader_abi_size(int which);

/* Message of the last error on this handle ("" if none). */
const char *gm_loader_errmsg(const struct gm_loader *l);

/* Stop the workers (and the coordinator, or detach from the node agent) but keep
 * the ring mapped, so views handed out stay readable (stale, never refilled)
 * until gm_loader_close. Later gm_loader_next calls return -ECANCELED. Idempotent;
 * NULL is a no-op. */
void gm_loader_stop(struct gm_loader *l);

/* Stop the workers, unmap and free everything; NULL is a no-op. */
void gm_loader_close(struct gm_loader *l);

/*
 * Bytes the workers read for the batches delivered so far (a batch re-made after
 * a worker died counts what its last worker read). Ranged reads of restart-marked
 * shards (worker.c) make it less than the members' sizes. Not thread-safe with
 * gm_loader_next on the same handle.
 */
uint64_t gm_loader_read_bytes(const struct gm_loader *l);

/*
 * Samples of the batches delivered so far whose shard member carries a row index
 * (pack --restart) that does not match the member: a header copy or row offsets
 * unlike its bytes (a damaged or crafted shard). Each was decoded whole instead,
 * to the pixels an honest index gives, and each member is named once a run on
 * stderr ("goldminer loader: SHARD.tar:MEMBER: ..."). Counted like errors (once a
 * batch that holds one); 0 for batches made by remote workers. Not thread-safe
 * with gm_loader_next on the same handle.
 */
uint64_t gm_loader_stale_index(const struct gm_loader *l);

/*
 * Of the workers' stage times of the batches delivered so far, the time they sat
 * preempted on a run queue (/proc/self/schedstat's run delay; 0 where the kernel
 * keeps none). The elastic controller leaves it out of a worker's rate, so that
 * the rate does not depend on how many workers share the cores. Not thread-safe
 * with gm_loader_next on the same handle.
 */
uint64_t gm_loader_preempt_ns(const struct gm_loader *l);

#endif
