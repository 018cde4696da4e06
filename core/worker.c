/*
 * worker.c - data worker loop (see worker.h).
 *
 * Determinism (contract 1): a batch is a pure function of (index, spec, seed,
 * epoch, k). Sample ids come from the (seed, epoch) permutation (or the loader's
 * explicit order, cfg.order: a sampler's indices, the same every epoch),
 * augmentation randomness from (seed, epoch, sample id), and a bad sample at epoch
 * position p is replaced by the first good sample at positions p+1, p+2, ... (mod
 * the epoch's length), so the substitute is the same whichever worker makes the
 * batch, however often. When
 * none of the next GM_WORKER_SUBSTITUTE_TRIES is good the batch fails (-ENODATA
 * in the slot's status) rather than carry zeros labelled -1. Only the sample's own
 * bytes make it bad: a read that fails for want of memory or descriptors, or is
 * interrupted, is read again (with a pause), and a worker for which that keeps
 * failing gives the batch up to another, so timing never changes a batch.
 *
 * Crash safety (contract 2): each finished sample sets its bit in the slot's
 * `done` bitmap (release), so a worker that takes over a re-issued task skips
 * what the dead one finished; what it redoes, it redoes with the same bytes. The
 * bits count only for the task named in the slot's bits_task, which a worker
 * sets after clearing them: one killed between its claim and that point leaves
 * the previous batch's bits, and the next worker clears them again.
 *
 * I/O overlaps compute: all reads of a batch go to io_uring at once, and each
 * sample is decoded into its place in the slot from inside the completion
 * callback while the other reads are still in flight.
 *
 * Ranged reads (shards of restart-marked files with a row index, jpeg.h): the
 * crop is chosen from the header, so a worker reads the batch's members in two
 * rounds: first a prefix of each (RANGE_PREFIX bytes: the index with its copy of
 * the tables, and the member's own header it is checked against; more once a
 * member needed more), from which gm_aug_range names the
 * bytes of the MCU rows the crop needs; then only those, decoded with
 * gm_aug_sample_range into the same output bytes as from the whole member. A
 * member without an index is read whole in the second round; a batch none of
 * whose members has one turns ranged reads off for this worker (shards that were
 * not packed with --restart). An index that does not match its member (-ESTALE,
 * jpeg.h) has it read whole (in the second round when the prefix shows it, else
 * again at once); gm_aug_sample then decodes it without the index, to the same
 * bytes, and the slot counts it (n_stale) for the loader to report. Retries and
 * substitutes read whole members.
 * GM_NO_RANGE=1 turns ranged reads off. What was read never decides how a
 * sample decodes (contract 1): gm_aug_sample decodes a whole member that has an
 * index through it too, so only the bytes read differ between the ways.
 *
 * It does not fork, reap or replace workers (pool.c), and it talks to no one but
 * the ring: a worker neither knows the consumer nor the node agent.
 */
#include "goldminer/worker.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "goldminer/coef.h"
#include "goldminer/dataset.h"
#include "goldminer/jpeg.h"
#include "goldminer/policy.h"
#include "goldminer/rng.h"
#include "goldminer/ring.h"
#include "goldminer/reader.h"
#include "goldminer/util.h"

#define TRANSIENT_TRIES	  8	       /* re-reads of a sample after a transient error ... */
#define TRANSIENT_WAIT_MS 4	       /* ... after 4, 8, 16, ... ms (about 1 s in all) */
#define RANGE_PREFIX	  2048u	       /* bytes first read of a member (index + header) ... */
#define RANGE_PREFIX_MAX  (72u * 1024) /* ... raised up to this for larger indexes */
#define WHOLE		  UINT64_MAX

struct gm_worker {
	struct gm_worker_cfg c;
	struct gm_reader *rd;
	struct gm_aug *aug;
	uint32_t pid;
	uint32_t n;   /* dataset size */
	uint32_t len; /* samples per epoch: the explicit order's, else n */
	size_t sample_bytes;
	uint32_t *perm; /* permutation of perm_epoch (recomputable cache) */
	uint32_t perm_epoch;
	bool perm_valid;
	const char **paths; /* batch_size entries, reused */
	uint64_t *sizes;
	uint64_t *offs;	  /* shard member offsets, or NULL (whole files) */
	unsigned *fidx;	  /* shard of each read, when the shards are registered */
	int32_t *fail;	  /* per position: 0 or -errno */
	uint32_t *pos_of; /* read index -> batch position */
	int32_t *labels;
	_Atomic uint64_t *done, *err;
	char (*fail_msg)[GM_RING_MSG];
	/* per-batch context for the callback */
	struct gm_slot_ctl *ctl;
	uint8_t *data;
	uint32_t *ids;
	uint32_t epoch;
	struct gm_aug_times t;
	uint64_t cb_ns;
	char why[200]; /* why this worker gave a batch up (a persistent transient error) */
	int sched_fd;  /* /proc/self/schedstat, or -1 */
	/* ranged reads (see the top): per batch position the prefix read, and the
	 * range of the member read in the second round (roff WHOLE: all of it) */
	bool ranged;
	uint32_t prefix, want; /* bytes of a prefix read; wanted by the last batch */
	uint8_t *pre;
	uint32_t *plen;
	uint64_t *roff, *msize, *moff;
	/* pacing (ring.h a_pace_milli): CPU credit in ns, at the last look */
	uint64_t pace_now, pace_cpu;
	double pace_credit;
	uint64_t pace_rq_ns; /* run delay during this batch's pauses (not preemption of work) */
};

static volatile sig_atomic_t retire_flag;

static void on_retire(int sig)
{
	(void)sig;
	retire_flag = 1;
}

/* Nanoseconds this process has waited on a run queue (preempted), from
 * /proc/self/schedstat's second field; 0 where the kernel does not keep it. */
static uint64_t run_delay_ns(struct gm_worker *w)
{
	char buf[128];
	unsigned long long run, delay;
	if (w->sched_fd < 0)
		return 0;
	ssize_t n = pread(w->sched_fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	return sscanf(buf, "%llu %llu", &run, &delay) == 2 ? (uint64_t)delay : 0;
}

static const uint32_t *perm_for(struct gm_worker *w, uint32_t epoch)
{
	if (w->c.order)
		return w->c.order; /* a sampler's indices, the same every epoch */
	if (!w->c.shuffle)
		return NULL;
	if (!w->perm_valid || w->perm_epoch != epoch) {
		gm_rng_permutation(w->perm, w->n, w->c.seed, epoch);
		w->perm_epoch = epoch;
		w->perm_valid = true;
	}
	return w->perm;
}

static uint32_t sample_at(const uint32_t *perm, uint64_t pos)
{
	return perm ? perm[pos] : (uint32_t)pos;
}

/* A member whose row index did not match it (decoded whole): counted, and the
 * first GM_RING_MAX_STALE named, for the loader to report once. */
static void count_stale(struct gm_slot_ctl *ctl, uint32_t id)
{
	if (ctl->n_stale < GM_RING_MAX_STALE)
		ctl->stale[ctl->n_stale] = id;
	ctl->n_stale++;
}

/* Decode one sample into position i of the slot; 0 or -errno with msg filled
 * (-ESTALE without: read it again, whole). */
static int make_sample(struct gm_worker *w, uint32_t i, uint32_t id, const void *data, size_t len,
		       int rerr, char *msg)
{
	if (rerr) {
		if (rerr == -ENODATA && gm_dataset_sharded(w->c.ds))
			gm_errf(msg, GM_RING_MSG,
				"read failed: the shard ends inside this member (truncated since"
				" indexing?)");
		else if (rerr == -ESPIPE)
			gm_errf(msg, GM_RING_MSG,
				"not a regular file (a FIFO, socket or device): refused without"
				" reading it");
		else
			gm_errf(msg, GM_RING_MSG, "read failed: %s", strerror(-rerr));
		return rerr;
	}
	if (gm_ring_quarantined(w->c.ring, id)) {
		gm_errf(msg, GM_RING_MSG, "quarantined: it crashed or stalled workers twice");
		return -EBADMSG;
	}
	/* Read by gm_ring_reclaim (crash attribution) and the pool's lease watch
	 * (stall attribution): set while this sample decodes, UINT32_MAX otherwise,
	 * so a worker stuck in I/O is not blamed on the last sample it decoded. */
	atomic_store_explicit(&w->ctl->cur_sample, id, memory_order_relaxed);
	uint8_t *out = w->data + (size_t)i * w->sample_bytes;
	int err = w->roff && w->roff[i] != WHOLE
		      ? gm_aug_sample_range(w->aug, w->pre + (size_t)i * w->prefix, w->plen[i],
					    w->msize[i], data, w->roff[i], len, w->c.seed, w->epoch,
					    id, out, &w->t)
		  : w->c.coef
		      ? gm_aug_coef_sample(w->aug, data, len, w->c.seed, w->epoch, id, out,
					   w->sample_bytes, &w->t)
		      : gm_aug_sample(w->aug, data, len, w->c.seed, w->epoch, id, out, &w->t);
	atomic_store_explicit(&w->ctl->cur_sample, UINT32_MAX, memory_order_relaxed);
	if (err == -ESTALE)
		return err; /* a ranged read whose index lied: handle_bad reads it whole */
	if (err)
		gm_errf(msg, GM_RING_MSG, "%s", gm_aug_errmsg(w->aug));
	else if (gm_aug_index_stale(w->aug))
		count_stale(w->ctl, id);
	return err;
}

static void set_bit(_Atomic uint64_t *bits, uint32_t i)
{
	/* pairs with the acquire loads in produce() of a worker that resumes the task */
	atomic_fetch_or_explicit(&bits[i / 64], 1ull << (i % 64), memory_order_release);
}

static bool test_bit(_Atomic uint64_t *bits, uint32_t i)
{
	return atomic_load_explicit(&bits[i / 64], memory_order_acquire) >> (i % 64) & 1;
}

/* Sample at batch position i is complete: label, then the done bit. */
static void finish(struct gm_worker *w, uint32_t i)
{
	w->labels[i] = (int32_t)gm_dataset_label(w->c.ds, w->ids[i]);
	set_bit(w->done, i);
}

#define PACE_MAX_NS 1000000000.0 /* the longest one pause */

/*
 * Pacing, after each sample: while the ring's a_pace_milli is set (the node
 * agent on a CPU-poor host whose remote workers' batches land there), this
 * worker spends at most that share of a core on average, in bursts of at most
 * GM_POLICY_PACE_BURST_NS (gm_policy_pace_step's token bucket): a greedy
 * worker there would spend the host's CPU quota and leave the cgroup
 * throttled, the agent's receive path with it, for the rest of each period.
 * The ns it slept (a retire signal cuts a pause short: the worker leaves
 * between batches as ever).
 */
static uint64_t pace(struct gm_worker *w)
{
	uint32_t p = w->c.ring ? atomic_load_explicit(&gm_ring_hdr(w->c.ring)->a_pace_milli,
						      memory_order_relaxed)
			       : 0;
	if (!p || p >= 1000) {
		w->pace_now = 0;
		return 0;
	}
	uint64_t now = gm_now_ns(), cpu = gm_cpu_ns();
	if (!w->pace_now || now < w->pace_now || cpu < w->pace_cpu) {
		w->pace_now = now;
		w->pace_cpu = cpu;
		w->pace_credit = GM_POLICY_PACE_BURST_NS;
		return 0;
	}
	double ns = gm_policy_pace_step(&w->pace_credit, (double)(now - w->pace_now),
					(double)(cpu - w->pace_cpu), p);
	w->pace_now = now;
	w->pace_cpu = cpu;
	if (!(ns > 0) || retire_flag)
		return 0;
	ns = ns < PACE_MAX_NS ? ns : PACE_MAX_NS;
	struct timespec ts = {.tv_sec = (time_t)(ns / 1e9),
			      .tv_nsec = (long)(ns - (double)(time_t)(ns / 1e9) * 1e9)};
	uint64_t rq0 = run_delay_ns(w);
	nanosleep(&ts, NULL); /* EINTR: a retire; the credit refills by the clock */
	uint64_t rq1 = run_delay_ns(w);
	/* the wake-up's wait for a CPU is part of the pause, which the stage times
	 * leave out: the batch's preemption must leave it out too, or a paced
	 * worker's measured rate reads several times its own */
	w->pace_rq_ns += rq1 > rq0 ? rq1 - rq0 : 0;
	return gm_now_ns() - now;
}

static int on_read(void *arg, unsigned j, const void *data, size_t len, int err)
{
	struct gm_worker *w = arg;
	uint32_t i = w->pos_of[j];
	uint64_t t0 = gm_now_ns();
	w->ctl->read_bytes += len;
	w->fail[i] = make_sample(w, i, w->ids[i], data, len, err, w->fail_msg[i]);
	if (!w->fail[i])
		finish(w, i);
	w->cb_ns += gm_now_ns() - t0;
	if (w->c.on_sample)
		w->c.on_sample(w->c.sample_arg);
	w->cb_ns += pace(w); /* a pause is neither read nor decode time */
	return 0;
}

/* Record a bad sample once, however often its task is re-issued. */
static void add_err(struct gm_slot_ctl *ctl, uint32_t sample, int err, const char *msg)
{
	uint32_t n = ctl->n_recs < GM_RING_MAX_ERRS ? ctl->n_recs : GM_RING_MAX_ERRS;
	for (uint32_t k = 0; k < n; k++)
		if (ctl->errs[k].sample == sample)
			return;
	if (n < GM_RING_MAX_ERRS) {
		ctl->errs[n].sample = sample;
		ctl->errs[n].err = err;
		snprintf(ctl->errs[n].msg, sizeof(ctl->errs[n].msg), "%s", msg);
		ctl->n_recs = n + 1;
	}
}

/* An error of the read (not of the sample's bytes) that says nothing about the
 * file: the machine was short of memory or descriptors, or the read was
 * interrupted. Substituting such a sample would make the batch depend on timing
 * (contract 1), so it is read again instead. */
static bool transient(int err)
{
	return err == -EAGAIN || err == -EINTR || err == -ENOMEM || err == -ENFILE ||
	       err == -EMFILE || err == -ENOBUFS || err == -ECANCELED;
}

/* Read sample id into position i (one file through the reader; on_read decodes
 * it). 0 (w->fail[i] says how the sample went) or the reader's -errno. */
static int read_one(struct gm_worker *w, uint32_t i, uint32_t id)
{
	const char *path = gm_dataset_path(w->c.ds, id);
	uint64_t size = gm_dataset_file_size(w->c.ds, id);
	uint64_t off = gm_dataset_offset(w->c.ds, id);
	unsigned fi = gm_dataset_shard(w->c.ds, id);
	uint64_t t0 = gm_now_ns(), cb0 = w->cb_ns;
	w->ids[i] = id;
	w->pos_of[0] = i;
	w->fail[i] = 0;
	if (w->roff)
		w->roff[i] = WHOLE;
	int rc = w->fidx
		     ? gm_reader_read_fixed(w->rd, &fi, &off, &size, 1, on_read, w)
		     : gm_reader_read_at(w->rd, &path, w->offs ? &off : NULL, &size, 1, on_read, w);
	w->ctl->read_ns += gm_now_ns() - t0 - (w->cb_ns - cb0);
	return rc;
}

/* Read sample id into position i, again while the read fails transiently, with
 * a growing pause. 0 with w->fail[i] set for a real (or no) error of the sample,
 * or -errno when the error persists: then this worker gives the batch up (it is
 * re-issued) rather than substitute a good sample. */
static int read_retrying(struct gm_worker *w, uint32_t i, uint32_t id, bool first_done)
{
	int rc = first_done ? 0 : read_one(w, i, id);
	for (int k = 0; !rc && transient(w->fail[i]) && k < TRANSIENT_TRIES; k++) {
		struct timespec ts = {0, (long)(TRANSIENT_WAIT_MS << k) * 1000000L};
		nanosleep(&ts, NULL);
		rc = read_one(w, i, id);
	}
	if (!rc && transient(w->fail[i])) {
		rc = w->fail[i];
		snprintf(w->why, sizeof(w->why), "%s: %s (still after %d tries)",
			 gm_dataset_name(w->c.ds, id), strerror(-rc), TRANSIENT_TRIES + 1);
	}
	return rc;
}

/* Replace the bad sample at position i (epoch position pos) by the first good
 * one after it in epoch order. 0; -ENODATA when none of the next
 * GM_WORKER_SUBSTITUTE_TRIES is good; or a reader's (or a persistent transient) -errno. */
static int substitute(struct gm_worker *w, uint32_t i, uint64_t pos, const uint32_t *perm)
{
	for (uint32_t j = 1; j <= GM_WORKER_SUBSTITUTE_TRIES && j < w->len; j++) {
		int rc = read_retrying(w, i, sample_at(perm, (pos + j) % w->len), false);
		if (rc)
			return rc;
		if (w->fail[i] == 0)
			return 0; /* on_read finished it */
	}
	return -ENODATA;
}

/* Point the callback context at slot; a fresh task forgets the slot's last batch. */
static void begin_task(struct gm_worker *w, uint32_t slot, uint64_t task, uint32_t epoch,
		       uint32_t nb)
{
	struct gm_ring *r = w->c.ring;
	w->ctl = gm_ring_ctl(r, slot);
	w->data = gm_ring_data(r, slot);
	w->ids = gm_ring_ids(r, slot);
	w->labels = gm_ring_labels(r, slot);
	w->done = gm_ring_done_bits(r, slot);
	w->err = gm_ring_err_bits(r, slot);
	w->epoch = epoch;
	memset(&w->t, 0, sizeof(w->t));
	w->cb_ns = 0;
	gm_ring_begin_task(r, slot, task, nb);
}

/* Bad samples of the m reads, in position order (the pass over pos_of is in that
 * order): a transient failure is read again; a real one is recorded, then the
 * batch fails (on_error=fail, or no good substitute: the slot's status) or the
 * sample is substituted. 0, or -errno when this worker must give the batch up. */
static int handle_bad(struct gm_worker *w, uint32_t m, uint64_t first, const uint32_t *perm)
{
	struct gm_slot_ctl *ctl = w->ctl;
	uint32_t words = (w->c.batch_size + 63) / 64;
	int rc = 0;

	for (uint32_t j = 0; j < m && !rc; j++) {
		uint32_t i = w->pos_of[j];
		/* read_retrying() and substitute() reuse pos_of[0]: remember it */
		uint32_t saved = w->pos_of[0];
		if (w->fail[i] == -ESTALE) /* the row index lied about the rows read */
			rc = read_one(w, i, w->ids[i]);
		if (!rc && transient(w->fail[i]))
			rc = read_retrying(w, i, w->ids[i], true);
		w->pos_of[0] = saved;
		if (rc || !w->fail[i])
			continue;
		set_bit(w->err, i);
		add_err(ctl, w->ids[i], w->fail[i], w->fail_msg[i]);
		if (w->c.on_error == GM_ON_ERROR_FAIL) {
			ctl->status = -EBADMSG;
			break;
		}
		rc = substitute(w, i, first + i, perm);
		w->pos_of[0] = saved;
		if (rc == -ENODATA) {
			ctl->status = -ENODATA; /* no good sample left near it: an error */
			rc = 0;
			break;
		}
	}
	uint32_t nerr = 0;
	for (uint32_t q = 0; q < words; q++)
		nerr += (uint32_t)__builtin_popcountll(atomic_load(&w->err[q]));
	ctl->n_errors = nerr;
	return rc;
}

/* First round of a ranged batch: read j's prefix, ask which bytes its crop needs. */
static int on_prefix(void *arg, unsigned j, const void *data, size_t len, int err)
{
	struct gm_worker *w = arg;
	uint32_t i = w->pos_of[j];
	uint64_t t0 = gm_now_ns(), off, rlen;

	w->ctl->read_bytes += len;
	w->roff[i] = WHOLE;
	if (!err && len <= w->prefix) {
		memcpy(w->pre + (size_t)i * w->prefix, data, len);
		w->plen[i] = (uint32_t)len;
		if (gm_aug_range(w->aug, w->pre + (size_t)i * w->prefix, len, w->msize[i],
				 w->c.seed, w->epoch, w->ids[i], &off, &rlen) == 0 &&
		    off + rlen <= w->msize[i])
			w->roff[i] = off;
		size_t need = gm_jpeg_index_bytes(data, len);
		if (w->roff[i] == WHOLE && need > len && need <= RANGE_PREFIX_MAX && need > w->want)
			w->want = (uint32_t)need; /* a larger index: read more of the next */
		w->sizes[j] = w->roff[i] == WHOLE ? w->msize[i] : rlen;
	}
	w->t.decode_ns += gm_now_ns() - t0;
	w->cb_ns += gm_now_ns() - t0;
	return 0;
}

/*
 * Read the prefixes of the m members of the batch and set each read of the second
 * round to the range its crop needs (offs, sizes), or to the whole member. 0 or
 * the reader's -errno.
 */
static int read_prefixes(struct gm_worker *w, uint32_t m)
{
	uint32_t ranged = 0;
	if (w->want > w->prefix) {
		uint8_t *p = realloc(w->pre, (size_t)w->c.batch_size * w->want);
		if (!p)
			return -ENOMEM;
		w->pre = p;
		w->prefix = w->want;
	}
	for (uint32_t j = 0; j < m; j++) {
		uint32_t i = w->pos_of[j];
		w->msize[i] = w->sizes[j];
		w->moff[i] = w->offs[j];
		w->sizes[j] = w->sizes[j] < w->prefix ? w->sizes[j] : w->prefix;
	}
	int rc = w->fidx ? gm_reader_read_fixed(w->rd, w->fidx, w->offs, w->sizes, m, on_prefix, w)
			 : gm_reader_read_at(w->rd, w->paths, w->offs, w->sizes, m, on_prefix, w);
	for (uint32_t j = 0; j < m; j++) {
		uint32_t i = w->pos_of[j];
		bool whole = w->roff[i] == WHOLE;
		ranged += !whole;
		w->offs[j] = w->moff[i] + (whole ? 0 : w->roff[i]);
		w->sizes[j] = whole ? w->msize[i] : w->sizes[j];
	}
	if (!ranged && !w->want)
		w->ranged = false; /* no index in these shards: read whole members */
	return rc;
}

int gm_worker_produce(struct gm_worker *w, uint32_t slot, uint64_t task)
{
	struct gm_slot_ctl *ctl;
	uint64_t k, t0, t1;
	uint32_t epoch, nb, m = 0;

	gm_worker_task_pos(&w->c, task, &epoch, &k);
	const uint32_t *perm = perm_for(w, epoch);
	uint64_t first = k * w->c.batch_size;
	nb = (uint32_t)((w->len - first) < w->c.batch_size ? (w->len - first) : w->c.batch_size);
	begin_task(w, slot, task, epoch, nb);
	ctl = w->ctl;

	for (uint32_t i = 0; i < nb; i++) {
		if (test_bit(w->done, i))
			continue;
		uint32_t id = sample_at(perm, first + i);
		w->ids[i] = id;
		w->paths[m] = gm_dataset_path(w->c.ds, id);
		w->sizes[m] = gm_dataset_file_size(w->c.ds, id);
		if (w->offs)
			w->offs[m] = gm_dataset_offset(w->c.ds, id);
		if (w->fidx)
			w->fidx[m] = gm_dataset_shard(w->c.ds, id);
		w->pos_of[m] = i;
		w->fail[i] = 0;
		if (w->roff)
			w->roff[i] = WHOLE;
		m++;
	}
	t0 = gm_now_ns();
	w->pace_rq_ns = 0;
	uint64_t rq0 = run_delay_ns(w);
	if (w->ranged && m) {
		int pr = read_prefixes(w, m);
		if (pr < 0)
			return pr;
	}
	int rc = !m	   ? 0
		 : w->fidx ? gm_reader_read_fixed(w->rd, w->fidx, w->offs, w->sizes, m, on_read, w)
			   : gm_reader_read_at(w->rd, w->paths, w->offs, w->sizes, m, on_read, w);
	t1 = gm_now_ns();
	if (rc < 0)
		return rc;
	ctl->read_ns += t1 - t0 - w->cb_ns;
	rc = handle_bad(w, m, first, perm);
	if (rc < 0)
		return rc;
	ctl->decode_ns += w->t.decode_ns;
	ctl->augment_ns += w->t.augment_ns;
	ctl->write_ns += gm_now_ns() - t1; /* bookkeeping after the last sample landed */
	uint64_t rq1 = run_delay_ns(w), rq = rq1 > rq0 ? rq1 - rq0 : 0;
	ctl->preempt_ns += rq > w->pace_rq_ns ? rq - w->pace_rq_ns : 0;
	return 0;
}

/* The ring's file table may not exceed RLIMIT_NOFILE: raise the soft limit towards
 * need (up to the hard limit) in this worker process; failure just means the
 * shards are read by path. */
static void raise_nofile(uint64_t need)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur >= need)
		return;
	rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > need ? need : rl.rlim_max;
	(void)setrlimit(RLIMIT_NOFILE, &rl);
}

/* The per-batch arrays of a worker for batches of b samples, and the epoch
 * permutation; the range-read arrays when the dataset is sharded and ranged reads
 * are not turned off (GM_NO_RANGE=1). 0 or -ENOMEM (gm_worker_destroy frees
 * whatever was made). */
static int alloc_arrays(struct gm_worker *w, const struct gm_dataset *ds, uint32_t b)
{
	w->perm = malloc((size_t)w->n * sizeof(*w->perm));
	w->paths = calloc(b, sizeof(*w->paths));
	w->sizes = calloc(b, sizeof(*w->sizes));
	if (gm_dataset_sharded(ds) && !(w->offs = calloc(b, sizeof(*w->offs))))
		return -ENOMEM;
	const char *nr = getenv("GM_NO_RANGE");
	w->ranged = w->offs && !(nr && !strcmp(nr, "1")) && !w->c.coef;
	w->prefix = RANGE_PREFIX;
	if (w->ranged &&
	    (!(w->pre = malloc((size_t)b * RANGE_PREFIX)) || !(w->plen = calloc(b, 4)) ||
	     !(w->roff = calloc(b, 8)) || !(w->msize = calloc(b, 8)) || !(w->moff = calloc(b, 8))))
		return -ENOMEM;
	w->fail = calloc(b, sizeof(*w->fail));
	w->pos_of = calloc(b, sizeof(*w->pos_of));
	w->fail_msg = calloc(b, sizeof(*w->fail_msg));
	if (!w->perm || !w->paths || !w->sizes || !w->fail || !w->fail_msg || !w->pos_of)
		return -ENOMEM;
	return 0;
}

/* The worker's io_uring reader for batches of b samples: over the shards, kept
 * open in the ring's file table (one READ per sample), or by path. 0 or -errno
 * with a message in err. */
static int open_reader(struct gm_worker *w, const struct gm_dataset *ds, uint32_t b, char *err,
		       size_t errlen)
{
	int rc;
	uint32_t ns = gm_dataset_num_shards(ds);

	if (ns) {
		/* Keep the shards open in the ring's file table: one READ per sample. */
		const char **sp = malloc(ns * sizeof(*sp));
		if (!sp) {
			gm_errf(err, errlen, "worker: out of memory");
			return -ENOMEM;
		}
		for (uint32_t k = 0; k < ns; k++)
			sp[k] = gm_dataset_shard_path(ds, k);
		raise_nofile(ns + b + 64);
		rc = gm_reader_create_files(&w->rd, b, sp, ns);
		free(sp);
		if (!rc && gm_reader_fixed_files(w->rd) &&
		    !(w->fidx = calloc(b, sizeof(*w->fidx)))) {
			gm_errf(err, errlen, "worker: out of memory");
			return -ENOMEM;
		}
	} else {
		rc = gm_reader_create(&w->rd, b);
	}
	if (rc)
		gm_errf(err, errlen, "worker: io_uring reader: %s (%s)", strerror(-rc),
			gm_reader_errmsg(w->rd));
	return rc;
}

int gm_worker_create(struct gm_worker **out, const struct gm_worker_cfg *cfg, char *err,
		     size_t errlen)
{
	struct gm_worker *w;
	int rc;
	uint32_t b = cfg->batch_size;

	*out = NULL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->c = *cfg;
	w->n = gm_dataset_count(cfg->ds);
	w->len = cfg->order ? cfg->order_len : w->n;
	w->sample_bytes = cfg->coef ? gm_coef_slot_bytes(gm_aug_out_bytes(&cfg->aug))
				    : gm_aug_out_bytes(&cfg->aug);
	w->pid = (uint32_t)getpid();
	w->sched_fd = open("/proc/self/schedstat", O_RDONLY | O_CLOEXEC);
	rc = alloc_arrays(w, cfg->ds, b);
	if (rc) {
		gm_errf(err, errlen, "worker: out of memory");
		goto out_destroy;
	}
	rc = open_reader(w, cfg->ds, b, err, errlen);
	if (rc)
		goto out_destroy;
	rc = gm_aug_create(&w->aug, &cfg->aug);
	if (rc) {
		gm_errf(err, errlen, "worker: augmentation spec: %s", strerror(-rc));
		goto out_destroy;
	}
	*out = w;
	return 0;

out_destroy:
	gm_worker_destroy(w); /* frees whatever was made; NULL members are fine */
	return rc;
}

void gm_worker_destroy(struct gm_worker *w)
{
	if (!w)
		return;
	if (w->sched_fd >= 0)
		close(w->sched_fd);
	gm_aug_destroy(w->aug);
	gm_reader_destroy(w->rd);
	free(w->pre);
	free(w->plen);
	free(w->roff);
	free(w->msize);
	free(w->moff);
	free(w->fail_msg);
	free(w->pos_of);
	free(w->fail);
	free(w->sizes);
	free(w->offs);
	free(w->fidx);
	free(w->paths);
	free(w->perm);
	free(w);
}

static void set_fatal(struct gm_ring *r, const char *msg)
{
	struct gm_ring_hdr *h = gm_ring_hdr(r);
	uint32_t zero = 0;
	/* first writer wins; pairs with the acquire load in on_exit_of (pool.c) */
	if (atomic_compare_exchange_strong(&h->fatal_set, &zero, 1)) {
		snprintf(h->fatal, sizeof(h->fatal), "%s", msg);
		atomic_store_explicit(&h->fatal_set, 2, memory_order_release);
	}
}

int gm_worker_main(const struct gm_worker_cfg *cfg)
{
	struct gm_worker *w;
	struct gm_ring *r = cfg->ring;
	struct gm_ring_hdr *h = gm_ring_hdr(r);
	char err[256];
	struct sigaction sa;
	int rc;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_retire; /* no SA_RESTART: a futex wait returns EINTR */
	sigaction(SIGUSR1, &sa, NULL);
	sigset_t usr1; /* the pool forks us with it blocked (pool.c, spawn) */
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	pthread_sigmask(SIG_UNBLOCK, &usr1, NULL);
	/* Pre-fault our view of the ring: inherited shared mappings fault lazily. */
#ifdef MADV_POPULATE_WRITE
	madvise(gm_ring_base(r), gm_ring_bytes(r), MADV_POPULATE_WRITE);
#endif
	rc = gm_worker_create(&w, cfg, err, sizeof(err));
	if (rc) {
		set_fatal(r, err);
		return rc;
	}
	if (cfg->ready_fd > 2) { /* made: the pool's start watch stops looking at us */
		if (write(cfg->ready_fd, "r", 1) != 1) {
			/* the pool reads EOF as "started" too */
		}
		close(cfg->ready_fd);
	}
	while (!retire_flag && !atomic_load_explicit(&h->stop, memory_order_acquire)) {
		/* read the sequence before looking, so a release after the look wakes us */
		uint32_t seq = atomic_load_explicit(&h->work_seq, memory_order_acquire);
		uint64_t task;
		int slot = gm_ring_claim(r, w->pid, &task);
		if (slot < 0) {
			gm_ring_wait_work(r, seq, 200);
			continue;
		}
		rc = gm_worker_produce(w, (uint32_t)slot, task);
		if (rc) {
			gm_errf(err, sizeof(err), "worker: reading batch %llu: %s (%s)",
				(unsigned long long)task, strerror(-rc),
				w->why[0] ? w->why : gm_reader_errmsg(w->rd));
			set_fatal(r, err);
			break;
		}
		gm_ring_publish(r, (uint32_t)slot);
	}
	gm_worker_destroy(w);
	return rc;
}
