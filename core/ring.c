/*
 * ring.c - shared-memory batch ring (see ring.h for the protocol).
 *
 * The region is one memfd (no name in /dev/shm to leak; it dies with the last
 * mapping), sized with ftruncate and pre-faulted with MAP_POPULATE so neither the
 * workers nor the consumer pay first-touch faults on the hot path (a sparse ring,
 * gm_ring_create_sparse, a first guess at a slot size such as dataloader.py's
 * probe, is neither reserved nor pre-faulted, by its creator or by an attacher,
 * which looks at the memfd's allocated blocks: only the pages written cost).
 * Waiting is on futexes in the shared region (not FUTEX_PRIVATE: waiters are
 * other processes).
 *
 * Two defences for a consumer that maps a ring it did not create: the region is
 * sealed (F_SEAL_SHRINK|F_SEAL_GROW) as soon as it is sized, and attach checks the
 * seals, so no one can ftruncate pages away under a mapping (SIGBUS); and the
 * header is validated before any size in it is used. Seals do not stop writes:
 * the creator's workers write the pixels, so whoever created the ring can change
 * them (docs/DESIGN.md section 6 says why that is the trust boundary).
 *
 * Admission: the ring's bytes are known before anything is allocated, and are
 * compared with what /proc/meminfo and the memory cgroups above this process (v1
 * and v2, every level up to the root) can still give: host.h measures that,
 * gm_host_mem_room. fallocate alone is not enough: a memfd's pages are charged
 * to the cgroup, and when it is full the OOM killer picks a victim, often
 * another process than the one that asked.
 *
 * This file does not allocate batches, decode or spawn: it only moves leases.
 */
#include "goldminer/ring.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "goldminer/host.h"
#include "goldminer/util.h"

_Static_assert(sizeof(struct gm_ring_hdr) <= 4096, "ring header must fit one page");
_Static_assert(sizeof(struct gm_slot_ctl) <= 4096 - 64, "slot control must fit one page");

#define PAGE	  4096u
#define HDR_BYTES PAGE
#define SEALS	  (F_SEAL_SHRINK | F_SEAL_GROW)

struct gm_ring {
	int fd;
	void *base;
	size_t bytes;
	struct gm_ring_hdr *hdr;
	uint32_t mask;
};

static uint64_t round_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

static int futex_wait(_Atomic uint32_t *addr, uint32_t val, int timeout_ms)
{
	struct timespec ts = {timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000L};
	long rc = syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT, val,
			  timeout_ms >= 0 ? &ts : NULL, NULL, 0);
	return rc < 0 ? -errno : 0;
}

static void futex_wake(_Atomic uint32_t *addr, int n)
{
	syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE, n, NULL, NULL, 0);
}

static void layout(uint32_t batch, uint64_t sample_bytes, uint64_t *data_off, uint64_t *slot_bytes)
{
	/* control page, labels, ids, two progress bitmaps, pixels on a page boundary */
	*data_off = round_up(PAGE + (uint64_t)batch * 8 + 16 * (((uint64_t)batch + 63) / 64), PAGE);
	*slot_bytes = round_up(*data_off + (uint64_t)batch * sample_bytes, PAGE);
}

static int map_region(struct gm_ring *r, int fd, size_t bytes, bool populate)
{
	int flags = MAP_SHARED | (populate ? MAP_POPULATE : 0);
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, flags, fd, 0);
	if (p == MAP_FAILED)
		return -errno;
	r->base = p;
	r->bytes = bytes;
	r->hdr = p;
	return 0;
}

uint64_t gm_ring_size(uint32_t nslots, uint32_t batch_size, uint64_t sample_bytes)
{
	uint64_t data_off, slot_bytes;

	if (!nslots || (nslots & (nslots - 1)) || nslots > 1024 || !batch_size ||
	    batch_size > (1u << 20) || !sample_bytes || sample_bytes > (UINT64_C(1) << 32))
		return 0;
	layout(batch_size, sample_bytes, &data_off, &slot_bytes);
	if (slot_bytes > (UINT64_MAX - HDR_BYTES) / nslots)
		return 0;
	return HDR_BYTES + slot_bytes * nslots;
}

int gm_ring_admit(uint32_t nslots, uint32_t batch_size, uint64_t sample_bytes, char *err,
		  size_t errlen)
{
	char src[384], need[32], have[32];
	uint64_t bytes = gm_ring_size(nslots, batch_size, sample_bytes);
	uint64_t room;
	int rc = gm_host_mem_limit(&room, err, errlen);

	if (rc)
		return rc; /* an operator's cap that cannot be read is not ignored */
	if (!bytes) {
		if (err && errlen)
			gm_errf(err, errlen,
				"a ring of %u slots x %u samples x %" PRIu64
				" bytes is out of range (slots: a power of two up to 1024)",
				nslots, batch_size, sample_bytes);
		return -EINVAL;
	}
	room = gm_host_mem_room(src, sizeof(src));
	if (bytes <= room)
		return 0;
	if (err && errlen) {
		gm_fmt_bytes(need, sizeof(need), bytes);
		gm_fmt_bytes(have, sizeof(have), room);
		gm_errf(err, errlen,
			"a ring of %u slots x %u samples x %" PRIu64
			" bytes needs %s, more than the %s of memory this process may still take "
			"(%s); lower the batch size, the image size or the slots (--batch, "
			"--size, --slots)",
			nslots, batch_size, sample_bytes, need, have, src);
	}
	return -ENOMEM;
}

/* gm_ring_create and gm_ring_create_sparse: reserved and pre-faulted, or neither. */
static int ring_make(struct gm_ring **out, uint32_t nslots, uint32_t batch_size,
		     uint64_t sample_bytes, uint64_t first_task, uint64_t end_task, bool sparse)
{
	struct gm_ring *r;
	uint64_t data_off, slot_bytes, total;
	int err;

	*out = NULL;
	total = gm_ring_size(nslots, batch_size, sample_bytes);
	if (!total || end_task <= first_task)
		return -EINVAL;
	layout(batch_size, sample_bytes, &data_off, &slot_bytes);
	err = gm_ring_admit(nslots, batch_size, sample_bytes, NULL, 0);
	if (err)
		return err;

	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->fd = memfd_create("goldminer-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (r->fd < 0) {
		err = -errno;
		goto out_free;
	}
	if (ftruncate(r->fd, (off_t)total) < 0) {
		err = -errno;
		goto out_close;
	}
	/* Reserve the pages now so a full tmpfs fails here, not with SIGBUS later
	 * (a sparse ring takes that risk: its pages are charged as they are written). */
	if (!sparse && fallocate(r->fd, 0, 0, (off_t)total) < 0 && errno != EOPNOTSUPP) {
		err = -errno;
		goto out_close;
	}
	/* The size is final: no one (this process included) may shrink or grow it. */
	if (fcntl(r->fd, F_ADD_SEALS, SEALS) < 0) {
		err = -errno;
		goto out_close;
	}
	err = map_region(r, r->fd, total, !sparse);
	if (err)
		goto out_close;
	r->mask = nslots - 1;

	struct gm_ring_hdr *h = r->hdr;
	h->version = GM_RING_VERSION;
	h->hdr_bytes = HDR_BYTES;
	h->nslots = nslots;
	h->batch_size = batch_size;
	h->sample_bytes = sample_bytes;
	h->slot_bytes = slot_bytes;
	h->data_offset = data_off;
	h->total_bytes = total;
	h->first_task = first_task;
	h->end_task = end_task;
	atomic_store_explicit(&h->consumed, first_task, memory_order_relaxed);
	for (uint32_t i = 0; i < nslots; i++) {
		uint64_t t = first_task + i;
		struct gm_slot_ctl *c = gm_ring_ctl(r, (uint32_t)(t & r->mask));
		atomic_store_explicit(&c->task, t, memory_order_relaxed);
		atomic_store_explicit(&c->state, GM_SLOT_WORD(GM_SLOT_FREE, 0),
				      memory_order_relaxed);
	}
	/* Magic last: an attacher that sees it sees a complete header. */
	atomic_thread_fence(memory_order_release);
	h->magic = GM_RING_MAGIC;
	*out = r;
	return 0;

out_close:
	close(r->fd);
out_free:
	free(r);
	return err;
}

int gm_ring_create(struct gm_ring **out, uint32_t nslots, uint32_t batch_size,
		   uint64_t sample_bytes, uint64_t first_task, uint64_t end_task)
{
	return ring_make(out, nslots, batch_size, sample_bytes, first_task, end_task, false);
}

int gm_ring_create_sparse(struct gm_ring **out, uint32_t nslots, uint32_t batch_size,
			  uint64_t sample_bytes, uint64_t first_task, uint64_t end_task)
{
	return ring_make(out, nslots, batch_size, sample_bytes, first_task, end_task, true);
}

int gm_ring_attach(struct gm_ring **out, int fd)
{
	struct gm_ring *r;
	struct gm_ring_hdr h;
	struct stat st;
	uint64_t data_off, slot_bytes;
	int err;

	*out = NULL;
	if (fstat(fd, &st) < 0)
		return -errno;
	if ((uint64_t)st.st_size < HDR_BYTES)
		return -EBADMSG;
	if (pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h))
		return -EBADMSG;
	/* Validate everything another process wrote before trusting any size. */
	if (h.magic != GM_RING_MAGIC || h.version != GM_RING_VERSION || h.hdr_bytes != HDR_BYTES ||
	    !h.nslots || (h.nslots & (h.nslots - 1)) || h.nslots > 1024 || !h.batch_size ||
	    h.batch_size > (1u << 20) || !h.sample_bytes || h.sample_bytes > (1ull << 32))
		return -EBADMSG;
	layout(h.batch_size, h.sample_bytes, &data_off, &slot_bytes);
	if (h.data_offset != data_off || h.slot_bytes != slot_bytes ||
	    h.total_bytes != HDR_BYTES + slot_bytes * h.nslots ||
	    h.total_bytes > (uint64_t)st.st_size)
		return -EBADMSG;
	/* Not sealed: its creator could shrink it under our mapping (SIGBUS). */
	int seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || (seals & SEALS) != SEALS)
		return -EPERM;

	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (r->fd < 0) {
		err = -errno;
		goto out_free;
	}
	/* Pre-faulted when its creator reserved every page; a sparse ring
	 * (gm_ring_create_sparse) stays sparse: its pages come as they are written. */
	err = map_region(r, r->fd, h.total_bytes, (uint64_t)st.st_blocks * 512 >= h.total_bytes);
	if (err)
		goto out_close;
	r->mask = h.nslots - 1;
	*out = r;
	return 0;

out_close:
	close(r->fd);
out_free:
	free(r);
	return err;
}

void gm_ring_destroy(struct gm_ring *r)
{
	if (!r)
		return;
	munmap(r->base, r->bytes);
	close(r->fd);
	free(r);
}

int gm_ring_fd(const struct gm_ring *r)
{
	return r->fd;
}

struct gm_ring_hdr *gm_ring_hdr(const struct gm_ring *r)
{
	return r->hdr;
}

void *gm_ring_base(const struct gm_ring *r)
{
	return r->base;
}

size_t gm_ring_bytes(const struct gm_ring *r)
{
	return r->bytes;
}

static char *slot_base(const struct gm_ring *r, uint32_t slot)
{
	return (char *)r->base + HDR_BYTES + (uint64_t)(slot & r->mask) * r->hdr->slot_bytes;
}

void *gm_ring_slot(const struct gm_ring *r, uint32_t slot)
{
	return slot_base(r, slot);
}

struct gm_slot_ctl *gm_ring_ctl(const struct gm_ring *r, uint32_t slot)
{
	return (struct gm_slot_ctl *)slot_base(r, slot);
}

int32_t *gm_ring_labels(const struct gm_ring *r, uint32_t slot)
{
	return (int32_t *)(slot_base(r, slot) + PAGE);
}

uint32_t *gm_ring_ids(const struct gm_ring *r, uint32_t slot)
{
	return (uint32_t *)(slot_base(r, slot) + PAGE + (uint64_t)r->hdr->batch_size * 4);
}

_Atomic uint64_t *gm_ring_done_bits(const struct gm_ring *r, uint32_t slot)
{
	return (_Atomic uint64_t *)(slot_base(r, slot) + PAGE + (uint64_t)r->hdr->batch_size * 8);
}

_Atomic uint64_t *gm_ring_err_bits(const struct gm_ring *r, uint32_t slot)
{
	return gm_ring_done_bits(r, slot) + (r->hdr->batch_size + 63) / 64;
}

void *gm_ring_data(const struct gm_ring *r, uint32_t slot)
{
	return slot_base(r, slot) + r->hdr->data_offset;
}

int gm_ring_claim(struct gm_ring *r, uint32_t pid, uint64_t *task)
{
	return gm_ring_claim_if(r, pid, task, NULL, NULL);
}

/* A claim want refused once it was made: the slot had moved on to a later task
 * while we looked. Free again, and its claimers woken (they may have seen it
 * claimed and gone back to sleep). */
static void unclaim(struct gm_ring *r, struct gm_slot_ctl *ctl)
{
	atomic_store_explicit(&ctl->state, GM_SLOT_WORD(GM_SLOT_FREE, 0), memory_order_release);
	atomic_fetch_add_explicit(&r->hdr->work_seq, 1, memory_order_release);
	futex_wake(&r->hdr->work_seq, INT_MAX);
}

int gm_ring_claim_if(struct gm_ring *r, uint32_t pid, uint64_t *task, gm_ring_want_fn want,
		     void *arg)
{
	struct gm_ring_hdr *h = r->hdr;
	/* pairs with the release store of consumed in gm_ring_release */
	uint64_t c = atomic_load_explicit(&h->consumed, memory_order_acquire);
	uint32_t n = h->nslots;

	if (atomic_load_explicit(&h->stop, memory_order_acquire))
		return -ENODATA;
	for (uint64_t t = c; t < c + n && t < h->end_task; t++) {
		uint32_t slot = (uint32_t)(t & r->mask);
		struct gm_slot_ctl *ctl = gm_ring_ctl(r, slot);
		uint32_t free_word = GM_SLOT_WORD(GM_SLOT_FREE, 0), want_word = free_word;
		/* pairs with the release store of task in gm_ring_release */
		if (atomic_load_explicit(&ctl->task, memory_order_acquire) != t)
			continue;
		/* with want: acquire, pairing with gm_ring_unpark's store, so what the
		 * consumer wrote for t is visible to it */
		if (atomic_load_explicit(&ctl->state, want ? memory_order_acquire
							   : memory_order_relaxed) != free_word)
			continue;
		if (want && !want(r, slot, arg))
			continue;
		/* The claim and the lease are this one CAS. */
		if (!atomic_compare_exchange_strong_explicit(
			&ctl->state, &want_word, GM_SLOT_WORD(GM_SLOT_CLAIMED, pid),
			memory_order_acq_rel, memory_order_relaxed))
			continue;
		/* The slot may have moved on to t + k*N while we looked: trust what it
		 * says now (the task store precedes the FREE store we CASed). */
		uint64_t real = atomic_load_explicit(&ctl->task, memory_order_acquire);
		if (real >= h->end_task) {
			atomic_store_explicit(&ctl->state, free_word, memory_order_release);
			continue;
		}
		if (want && real != t && !want(r, slot, arg)) {
			unclaim(r, ctl);
			continue;
		}
		*task = real;
		return (int)slot;
	}
	if (c >= h->end_task)
		return -ENODATA;
	/* Every task up to end is handed out once the window reaches end. */
	return -EAGAIN;
}

void gm_ring_publish(struct gm_ring *r, uint32_t slot)
{
	struct gm_slot_ctl *ctl = gm_ring_ctl(r, slot);
	/* pairs with the acquire load in gm_ring_wait_ready: the batch bytes are visible */
	atomic_store_explicit(&ctl->state, GM_SLOT_WORD(GM_SLOT_READY, 0), memory_order_release);
	futex_wake(&ctl->state, INT_MAX);
}

int gm_ring_publish_held(struct gm_ring *r, uint32_t slot, uint32_t pid)
{
	struct gm_slot_ctl *ctl = gm_ring_ctl(r, slot);
	uint32_t held = GM_SLOT_WORD(GM_SLOT_CLAIMED, pid);
	/* release pairs with the acquire load in gm_ring_wait_ready, as gm_ring_publish's
	 * store; it fails when the lease is no longer pid's (gm_ring_reclaim's CAS) */
	if (!atomic_compare_exchange_strong_explicit(&ctl->state, &held,
						     GM_SLOT_WORD(GM_SLOT_READY, 0),
						     memory_order_release, memory_order_relaxed))
		return -EPERM;
	futex_wake(&ctl->state, INT_MAX);
	return 0;
}

void gm_ring_wait_work(struct gm_ring *r, uint32_t seq, int timeout_ms)
{
	futex_wait(&r->hdr->work_seq, seq, timeout_ms);
}

int gm_ring_wait_ready(struct gm_ring *r, uint64_t task, int timeout_ms)
{
	struct gm_slot_ctl *ctl = gm_ring_ctl(r, (uint32_t)(task & r->mask));
	int64_t t0 = gm_now_ms();
	for (;;) {
		/* pairs with the release store in gm_ring_publish */
		uint32_t w = atomic_load_explicit(&ctl->state, memory_order_acquire);
		if (GM_SLOT_STATE(w) == GM_SLOT_READY &&
		    atomic_load_explicit(&ctl->task, memory_order_relaxed) == task)
			return 0;
		int left = timeout_ms;
		if (timeout_ms >= 0) {
			int64_t el = gm_now_ms() - t0;
			if (el >= timeout_ms)
				return -ETIMEDOUT;
			left = (int)(timeout_ms - el);
		}
		if (futex_wait(&ctl->state, w, left) == -EINTR)
			return -EINTR; /* a signal handler ran: let the caller look */
	}
}

void gm_ring_release(struct gm_ring *r, uint32_t slot)
{
	struct gm_ring_hdr *h = r->hdr;
	struct gm_slot_ctl *ctl = gm_ring_ctl(r, slot);
	uint64_t t = atomic_load_explicit(&ctl->task, memory_order_relaxed);

	ctl->attempts = 0;
	ctl->n_errors = 0;
	ctl->n_recs = 0;
	ctl->status = 0;
	/* pairs with the acquire loads of task in gm_ring_claim */
	atomic_store_explicit(&ctl->task, t + h->nslots, memory_order_release);
	atomic_store_explicit(&ctl->state, GM_SLOT_WORD(GM_SLOT_FREE, 0), memory_order_release);
	/* pairs with the acquire load of consumed in gm_ring_claim */
	atomic_store_explicit(&h->consumed, t + 1, memory_order_release);
	atomic_fetch_add_explicit(&h->work_seq, 1, memory_order_release);
	futex_wake(&h->work_seq, INT_MAX);
}

void gm_ring_park(struct gm_ring *r, uint32_t slot)
{
	/* no worker yet: the claims to come are what it pairs with (their CAS) */
	atomic_store_explicit(&gm_ring_ctl(r, slot)->state, GM_SLOT_WORD(GM_SLOT_READY, 0),
			      memory_order_release);
}

void gm_ring_unpark(struct gm_ring *r, uint32_t slot)
{
	/* pairs with the CAS in gm_ring_claim: what the consumer wrote is visible */
	atomic_store_explicit(&gm_ring_ctl(r, slot)->state, GM_SLOT_WORD(GM_SLOT_FREE, 0),
			      memory_order_release);
	atomic_fetch_add_explicit(&r->hdr->work_seq, 1, memory_order_release);
	futex_wake(&r->hdr->work_seq, INT_MAX);
}

void gm_ring_begin_task(struct gm_ring *r, uint32_t slot, uint64_t task, uint32_t n)
{
	struct gm_slot_ctl *ctl = gm_ring_ctl(r, slot);
	uint32_t words = (r->hdr->batch_size + 63) / 64;
	uint32_t resumed = 0;
	/* pairs with the release store below, by an earlier holder of this lease */
	if (atomic_load_explicit(&ctl->bits_task, memory_order_acquire) == task + 1) {
		/* samples an earlier holder made: their times went with it (a
		 * remote worker's lease taken back before its publish, a worker
		 * that died), so the batch's times do not cover its samples */
		const _Atomic uint64_t *done = gm_ring_done_bits(r, slot);
		for (uint32_t q = 0; q < words && !resumed; q++)
			resumed = atomic_load_explicit(&done[q], memory_order_relaxed) != 0;
	} else {
		/* The bits are not this task's (a fresh task, or one whose first holder
		 * died before it got here): forget the slot's previous batch. */
		_Atomic uint64_t *done = gm_ring_done_bits(r, slot),
				 *err = gm_ring_err_bits(r, slot);
		for (uint32_t q = 0; q < words; q++) {
			atomic_store_explicit(&done[q], 0, memory_order_relaxed);
			atomic_store_explicit(&err[q], 0, memory_order_relaxed);
		}
		ctl->n_errors = 0;
		ctl->n_recs = 0;
		ctl->read_ns = ctl->decode_ns = ctl->augment_ns = ctl->write_ns = 0;
		ctl->read_bytes = 0;
		ctl->preempt_ns = 0;
		ctl->n_stale = 0;
		atomic_store_explicit(&ctl->bits_task, task + 1, memory_order_release);
	}
	atomic_store_explicit(&ctl->cur_sample, UINT32_MAX, memory_order_relaxed);
	ctl->n = n;
	ctl->status = 0;
	ctl->remote = resumed;
}

uint32_t gm_ring_reclaim(struct gm_ring *r, uint32_t pid, uint32_t *crash_sample)
{
	uint32_t n = 0;
	if (crash_sample)
		*crash_sample = UINT32_MAX;
	for (uint32_t s = 0; s < r->hdr->nslots; s++) {
		struct gm_slot_ctl *ctl = gm_ring_ctl(r, s);
		uint32_t want = GM_SLOT_WORD(GM_SLOT_CLAIMED, pid);
		if (atomic_load_explicit(&ctl->state, memory_order_acquire) != want)
			continue;
		if (crash_sample && *crash_sample == UINT32_MAX)
			*crash_sample =
			    atomic_load_explicit(&ctl->cur_sample, memory_order_relaxed);
		ctl->attempts++;
		if (atomic_compare_exchange_strong_explicit(
			&ctl->state, &want, GM_SLOT_WORD(GM_SLOT_FREE, 0), memory_order_acq_rel,
			memory_order_relaxed))
			n++;
	}
	if (n) {
		atomic_fetch_add_explicit(&r->hdr->work_seq, 1, memory_order_release);
		futex_wake(&r->hdr->work_seq, INT_MAX);
	}
	return n;
}

void gm_ring_stop(struct gm_ring *r)
{
	atomic_store_explicit(&r->hdr->stop, 1, memory_order_release);
	atomic_fetch_add_explicit(&r->hdr->work_seq, 1, memory_order_release);
	futex_wake(&r->hdr->work_seq, INT_MAX);
}

void gm_ring_quarantine(struct gm_ring *r, uint32_t sample)
{
	struct gm_ring_hdr *h = r->hdr;
	uint32_t n = atomic_load_explicit(&h->quarantine_n, memory_order_relaxed);
	if (gm_ring_quarantined(r, sample) || n >= sizeof(h->quarantine) / sizeof(h->quarantine[0]))
		return;
	h->quarantine[n] = sample;
	/* pairs with the acquire load in gm_ring_quarantined */
	atomic_store_explicit(&h->quarantine_n, n + 1, memory_order_release);
}

bool gm_ring_quarantined(const struct gm_ring *r, uint32_t sample)
{
	const struct gm_ring_hdr *h = r->hdr;
	uint32_t n =
	    atomic_load_explicit(&((struct gm_ring_hdr *)h)->quarantine_n, memory_order_acquire);
	for (uint32_t i = 0; i < n; i++)
		if (h->quarantine[i] == sample)
			return true;
	return false;
}
