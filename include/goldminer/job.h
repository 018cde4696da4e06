/*
 * job.h - what defines one training job's batches: the options a trainer gives
 * (struct gm_loader_opts) and what to do about a bad sample (enum gm_on_error).
 *
 * The types live here, below every module that needs them, so that the worker,
 * the worker pool, the node wire protocol and the consumer each include one
 * header that points down: the consumer API (loader.h) re-exports them; the
 * worker and the pool never include loader.h. No functions but gm_lease_ms (the
 * one place the default lease deadline is resolved): gm_loader_opts_default is
 * the consumer's (loader.h), the deadline's range check the pool's
 * (gm_pool_lease_check, pool.h). The layout of struct gm_loader_opts is mirrored by
 * the Python binding (python/goldminer/_abi.py): change both or neither.
 */
#ifndef GOLDMINER_JOB_H
#define GOLDMINER_JOB_H

#include <stdbool.h>
#include <stdint.h>

#include "goldminer/aug.h"

enum gm_on_error {
	GM_ON_ERROR_SKIP = 0, /* count, report, fill from the next sample deterministically */
	GM_ON_ERROR_FAIL = 1, /* gm_loader_next returns -EBADMSG naming the file */
};

struct gm_loader_opts {
	const char *root;	/* dataset: ImageFolder tree or tar shards (required) */
	const char *pipeline;	/* pipeline spec text; NULL: use `aug` as given */
	struct gm_aug_spec aug; /* per-sample transform (gm_aug_spec_default) */
	uint32_t batch_size;	/* samples per batch (default 64) */
	int workers;		/* worker processes (default 2; 0 = auto: elastic) */
	uint64_t seed;		/* shuffling and augmentation seed */
	uint32_t epoch;		/* first epoch to deliver (default 0) */
	uint32_t epochs;	/* epochs to deliver, 0 = unlimited */
	uint64_t start_batch;	/* resume: first batch index within `epoch` */
	uint32_t slots;		/* ring slots (power of two; 0 = automatic) */
	enum gm_on_error on_error;
	bool drop_last;		   /* drop the last short batch of an epoch */
	bool shuffle;		   /* per-epoch permutation (default true) */
	bool no_pin;		   /* never cudaHostRegister the ring */
	uint32_t chaos_kill_ms;	   /* testing: SIGKILL a random worker every N ms (0: off) */
	uint32_t max_workers;	   /* auto: CPU budget in workers (0: online CPUs) */
	const char *node;	   /* node agent socket: workers run in the agent (NULL: here);
				    * then `workers` is the most the agent may give (0: no cap) */
	uint32_t lease_timeout_ms; /* a worker whose batch makes no progress (no sample
				    * finished) for this long is killed and the batch
				    * re-issued; 0: GM_LEASE_TIMEOUT_MS */
	/* An explicit order (a sampler's indices): NULL, the seeded permutation
	 * (shuffle) or the dataset's order; else every epoch is order[0..order_len),
	 * dataset ids (each < the dataset's count, repeats allowed), shuffle ignored.
	 * gm_loader_open copies it. Workers here only (with node: -ENOTSUP). */
	const uint32_t *order;
	uint32_t order_len;
	/* The GPU decode's worker half (coef.h): workers write each sample's window
	 * as quantised coefficients (a GM_COEF slot, gm_coef_slot_bytes of the
	 * sample's bytes) for the consumer to finish on a device or on the host
	 * (gm_aug_coef_finish); default false: finished samples. Workers here only
	 * (with node: -ENOTSUP). */
	bool gpu_decode;
};

/* Default lease progress deadline: long enough for one sample to be read and
 * decoded on a loaded machine, short enough that a stuck worker (SIGSTOP, a hung
 * network file system) is replaced within seconds. At most GM_MAX_LEASE_MS. */
#define GM_LEASE_TIMEOUT_MS 5000u
#define GM_MAX_LEASE_MS	    86400000u /* one day */

/* The lease deadline of a job that asked for `asked` ms (0: the default). Every
 * module that resolves one (the pool, the node agent, the binding's pool, the
 * remote workers) resolves it here. */
static inline uint32_t gm_lease_ms(uint32_t asked)
{
	return asked ? asked : GM_LEASE_TIMEOUT_MS;
}

#endif
