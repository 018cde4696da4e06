/*
 * worker.h - the data worker: a stateless process that turns tasks into batches.
 *
 * Loop: claim the lowest free task in the ring (lease = its pid) -> read all files
 * of the batch through its own io_uring -> decode + augment each sample straight
 * into the slot as its read completes -> write labels/ids/status -> publish. It
 * keeps no state that matters: the epoch permutation it caches is recomputed from
 * (seed, epoch). It exits when the ring says stop or when it gets SIGUSR1 (retire).
 * It never spawns, reaps or talks to anyone but the ring.
 */
#ifndef GOLDMINER_WORKER_H
#define GOLDMINER_WORKER_H

#include <stdbool.h>
#include <stdint.h>

#include "goldminer/aug.h"
#include "goldminer/job.h" /* enum gm_on_error */

struct gm_ring;
struct gm_dataset;

/* A bad sample is replaced by the first good one among the next this many in
 * epoch order; when all of them are bad too, the batch fails with -ENODATA
 * (its slot's status) instead of carrying a made-up sample. */
#define GM_WORKER_SUBSTITUTE_TRIES 64

struct gm_worker_cfg {
	struct gm_ring *ring;	     /* mapped ring (inherited or attached) */
	const struct gm_dataset *ds; /* the index, read-only */
	struct gm_aug_spec aug;	     /* per-sample transform */
	uint64_t seed;
	uint32_t epoch0; /* epoch of task 0 */
	uint32_t batch_size;
	uint32_t batches_per_epoch;
	bool shuffle;
	enum gm_on_error on_error;
	/* the epoch's dataset ids in order (gm_loader_opts.order; NULL: the
	 * permutation or the dataset's order) and their count */
	const uint32_t *order;
	uint32_t order_len;
	/* Called after each sample of a batch is complete (NULL: nothing). A worker
	 * on another host progresses its network sends here (remote.c), so that
	 * the previous batch travels while this one decodes. */
	void (*on_sample)(void *arg);
	void *sample_arg;
	/* A descriptor above 2 that gm_worker_main writes one byte to, then closes,
	 * once its worker is made (the pool's start watch, pool.c); 0: none. */
	int ready_fd;
	/* Coefficient mode (gm_loader_opts.gpu_decode): gm_aug_coef_sample into
	 * slots of gm_coef_slot_bytes; ranged reads off (it reads whole files). */
	bool coef;
};

/* Task t -> (epoch, batch index). */
static inline void gm_worker_task_pos(const struct gm_worker_cfg *c, uint64_t t, uint32_t *epoch,
				      uint64_t *k)
{
	*epoch = c->epoch0 + (uint32_t)(t / c->batches_per_epoch);
	*k = t % c->batches_per_epoch;
}

/*
 * Run the worker loop in this process until stop or retire. Returns 0 on a clean
 * exit, or -errno if it could not start (the reason is also written into the
 * ring header's `fatal` field for the coordinator). Meant to run in a child right
 * after fork(); the caller then _exit()s.
 */
int gm_worker_main(const struct gm_worker_cfg *cfg);

/* Produce task t into slot (exposed for tests and single-process use). */
struct gm_worker;
int gm_worker_create(struct gm_worker **out, const struct gm_worker_cfg *cfg, char *err,
		     size_t errlen);
int gm_worker_produce(struct gm_worker *w, uint32_t slot, uint64_t task);
void gm_worker_destroy(struct gm_worker *w);

#endif
