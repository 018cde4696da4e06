/*
 * consumer.c - the consumer's side of a ring (see consumer.h), shared by the C
 * loader and the bindings' trainers.
 *
 * The wait: gm_ring_wait_ready in slices of WAIT_SLICE_MS, and between slices the
 * reasons to stop waiting, in the order a user would want them: a ready batch is
 * delivered even after a fatal error, a signal beats a deadline. A node agent
 * never writes unasked on its connection, so a hang-up or end of file there
 * means it went away (with the workers it ran); gm_consumer_orphans then readies
 * the ring for the embedder's own workers (the dead ones' leases back), and
 * gm_consumer_strays, where the embedder's workers ran all along (the agent only
 * sized them), takes back the leases of the remote workers the agent served.
 *
 * Give-back: the ring moves in task order (gm_ring_release hands task t's slot on
 * to t + N and `consumed` says where the workers' window starts), so a slot that
 * nothing holds any more goes back only once every older delivered one has.
 * hold[] says, per slot, what still holds it (consumer.h's bits).
 *
 * Keep and detach: a kept batch is viewed through an alias, a second mapping of
 * its pages alone (MAP_SHARED over the ring's memfd). When the user holds so many
 * that the workers would have fewer than 2 slots to fill, the oldest kept one's
 * alias pages are replaced, in one mremap, by a private copy: the user's views
 * read the same bytes at the same addresses (a reader in another thread sees the
 * old pages or the copy, never a hole) and the slot goes back. Only a batch kept
 * across N - 1 later ones is ever copied.
 *
 * The way back: when the agent went away, gm_consumer_reattach tries its socket
 * again, at most every GM_CONSUMER_RETRY_MS, and puts the embedder's question
 * (loader.c: adopt the running ring; bind.c: the job's command again) to an
 * agent there; a refusal is said once and doubles the wait.
 *
 * It does not read what a batch holds, own the ring, or write a task's indices.
 */
#include "goldminer/consumer.h"

#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "goldminer/cuda.h"
#include "goldminer/ring.h"
#include "goldminer/util.h"
#include "goldminer/wire.h"

#define WAIT_SLICE_MS 100 /* a fatal error, a gone agent, an interrupt: seen this soon */

struct alias {
	char *addr; /* NULL: none */
	size_t off, len;
};

struct gm_consumer_keep {
	struct alias *alias; /* per slot: its alias mapping (kept for the next keep) */
	struct {	     /* detached batches: private copies the user still holds */
		char *addr;
		size_t len;
	} * gone;
	size_t n_gone, cap_gone;
};

int gm_consumer_init(struct gm_consumer *c, struct gm_ring *ring, uint64_t first)
{
	memset(c, 0, sizeof(*c));
	c->agent_fd = -1;
	c->ring = ring;
	c->h = gm_ring_hdr(ring);
	c->nslots = c->h->nslots;
	c->next = c->rel = first;
	c->hold = calloc(c->nslots, 1);
	return c->hold ? 0 : -ENOMEM;
}

/* An alias goes: unpinned first (harmless where it was not pinned). */
static void unmap_alias(const struct gm_consumer *c, struct alias *a)
{
	if (!a->addr)
		return;
	if (c->pinned)
		gm_cuda_host_unregister(a->addr);
	munmap(a->addr, a->len);
	a->addr = NULL;
}

void gm_consumer_fini(struct gm_consumer *c)
{
	struct gm_consumer_keep *k = c->keep;
	if (k) {
		for (uint32_t i = 0; i < c->nslots; i++)
			unmap_alias(c, &k->alias[i]);
		for (size_t i = 0; i < k->n_gone; i++)
			munmap(k->gone[i].addr, k->gone[i].len);
		free(k->gone);
		free(k->alias);
		free(k);
		c->keep = NULL;
	}
	if (c->pinned)
		gm_cuda_host_unregister(gm_ring_base(c->ring));
	c->pinned = false;
	free(c->hold);
	c->hold = NULL;
}

int gm_consumer_pin(struct gm_consumer *c)
{
	if (c->pinned)
		return 0;
	if (!gm_cuda_available(NULL, 0))
		return -ENODEV;
	int rc = gm_cuda_host_register(gm_ring_base(c->ring), gm_ring_bytes(c->ring));
	c->pinned = rc == 0;
	return rc;
}

/* ---- give-back ------------------------------------------------------------------ */

void gm_consumer_give_back(struct gm_consumer *c, uint32_t slot, unsigned bits)
{
	uint32_t mask = c->nslots - 1;
	c->hold[slot & mask] &= (uint8_t)~bits;
	while (c->rel < c->next && !c->hold[c->rel & mask]) {
		gm_ring_release(c->ring, (uint32_t)(c->rel & mask));
		c->rel++;
	}
}

void gm_consumer_take(struct gm_consumer *c, uint64_t task, uint32_t slot, unsigned owner)
{
	const struct gm_slot_ctl *ctl = gm_ring_ctl(c->ring, slot);
	if (task < c->next)
		return; /* taken already */
	if (c->rel == c->next)
		c->rel = task; /* nothing held: the window starts here */
	c->next = task + 1;
	c->hold[slot & (c->nslots - 1)] = (uint8_t)(GM_CONSUMER_USER | owner);
	/* for the controller, which may run in another process (relaxed counters):
	 * the local workers' time running or in I/O, not preempted; a remote
	 * worker's batch only as samples (its time was spent on another host's
	 * cores: counted here, a fed job's local rate read 4,332-13,628 img/s
	 * where its own worker made 3,000) */
	if (ctl->remote) {
		atomic_fetch_add_explicit(&c->h->c_remote_samples, ctl->n, memory_order_relaxed);
	} else {
		uint64_t busy = ctl->read_ns + ctl->decode_ns + ctl->augment_ns + ctl->write_ns;
		busy = busy > ctl->preempt_ns ? busy - ctl->preempt_ns : 0;
		atomic_fetch_add_explicit(&c->h->c_work_ns, busy, memory_order_relaxed);
	}
	atomic_fetch_add_explicit(&c->h->c_samples, ctl->n, memory_order_relaxed);
	atomic_fetch_add_explicit(&c->h->c_errors, ctl->n_errors, memory_order_relaxed);
}

uint32_t gm_consumer_held(const struct gm_consumer *c)
{
	return (uint32_t)(c->next - c->rel);
}

/* ---- keep and detach -------------------------------------------------------------- */

static int keep_alloc(struct gm_consumer *c)
{
	struct gm_consumer_keep *k = calloc(1, sizeof(*k));
	if (!k)
		return -ENOMEM;
	k->alias = calloc(c->nslots, sizeof(*k->alias));
	if (!k->alias) {
		free(k);
		return -ENOMEM;
	}
	c->keep = k;
	return 0;
}

/* Slot's alias of [off, off + len): the one mapped for an earlier keep when it
 * covers the same bytes, else a new one. 0 or -errno. */
static int map_alias(struct gm_consumer *c, uint32_t slot, size_t off, size_t len)
{
	struct alias *a = &c->keep->alias[slot];
	if (a->addr && a->off == off && a->len == len)
		return 0;
	unmap_alias(c, a); /* no view of it is alive: the slot was not kept */
	char *start = (char *)gm_ring_slot(c->ring, slot) + off;
	/* populated: the pages are there (the workers wrote them), their table
	 * entries are made once here instead of faulting each page on first read */
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
		       gm_ring_fd(c->ring), start - (char *)gm_ring_base(c->ring));
	if (p == MAP_FAILED)
		return -errno;
	*a = (struct alias){p, off, len};
	/* a kept batch of a pinned ring is pinned too (once per alias: they are
	 * reused); best effort: unpinned, its views are only slower to copy */
	if (c->pinned)
		gm_cuda_host_register(p, len);
	return 0;
}

int gm_consumer_keep(struct gm_consumer *c, uint32_t slot, size_t off, size_t len, void **addr)
{
	size_t slot_bytes = gm_ring_hdr(c->ring)->slot_bytes;
	long page = sysconf(_SC_PAGESIZE);
	int err;

	if (!len)
		len = slot_bytes - off;
	if (slot >= c->nslots || !(c->hold[slot] & GM_CONSUMER_USER) ||
	    (c->hold[slot] & GM_CONSUMER_KEPT) || off % (size_t)page || off >= slot_bytes ||
	    len > slot_bytes - off) {
		gm_errf(c->errmsg, sizeof(c->errmsg),
			"slot %u is not held, is kept already, or [%zu, +%zu) is not in it", slot,
			off, len);
		return -EINVAL;
	}
	if (!c->keep && keep_alloc(c))
		return -ENOMEM;
	err = map_alias(c, slot, off, len);
	if (err) {
		gm_errf(c->errmsg, sizeof(c->errmsg), "mapping slot %u again: %s", slot,
			strerror(-err));
		return err;
	}
	c->hold[slot] |= GM_CONSUMER_KEPT;
	*addr = c->keep->alias[slot].addr;
	return 0;
}

/* Replace the kept batch of slot's pages under its alias by a private copy and
 * give the slot back. 0 or -errno (the batch then stays kept). */
static int detach(struct gm_consumer *c, uint32_t slot)
{
	struct gm_consumer_keep *k = c->keep;
	struct alias *a = &k->alias[slot];
	if (k->n_gone == k->cap_gone) {
		size_t cap = k->cap_gone ? 2 * k->cap_gone : 8;
		void *p = realloc(k->gone, cap * sizeof(*k->gone));
		if (!p)
			return -ENOMEM;
		k->gone = p;
		k->cap_gone = cap;
	}
	char *copy = mmap(NULL, a->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (copy == MAP_FAILED)
		return -errno;
	memcpy(copy, a->addr, a->len);
	if (c->pinned)
		gm_cuda_host_unregister(a->addr); /* the copy over it is not the ring's */
	/* atomic for the user's other threads: a reader sees the old pages or the copy */
	if (mremap(copy, a->len, a->len, MREMAP_MAYMOVE | MREMAP_FIXED, a->addr) == MAP_FAILED) {
		int err = -errno;
		munmap(copy, a->len);
		return err;
	}
	k->gone[k->n_gone].addr = a->addr;
	k->gone[k->n_gone++].len = a->len;
	a->addr = NULL; /* the next keep of this slot maps it again */
	c->detached++;
	gm_consumer_give_back(c, slot, GM_CONSUMER_USER | GM_CONSUMER_KEPT);
	return 0;
}

/* Before waiting for the next task: the workers must have 2 slots to fill (or all
 * that are left), so the oldest kept batches are detached until they do. A slot
 * held by anything else than its kept batch ends it: detaching cannot help. */
static int make_room(struct gm_consumer *c)
{
	uint32_t mask = c->nslots - 1;
	while (c->keep && c->rel < c->next && c->rel + c->nslots - c->next < 2 &&
	       c->hold[c->rel & mask] == (GM_CONSUMER_USER | GM_CONSUMER_KEPT)) {
		int err = detach(c, (uint32_t)(c->rel & mask));
		if (err) {
			gm_errf(c->errmsg, sizeof(c->errmsg),
				"a batch kept since task %llu holds the ring and cannot be copied "
				"out: %s",
				(unsigned long long)c->rel, strerror(-err));
			return err;
		}
	}
	return 0;
}

int gm_consumer_drop(struct gm_consumer *c, const void *addr)
{
	struct gm_consumer_keep *k = c->keep;
	const char *p = addr;
	for (size_t i = 0; k && i < k->n_gone; i++) {
		char *a = k->gone[i].addr;
		if (p >= a && p < a + k->gone[i].len) {
			munmap(a, k->gone[i].len);
			k->gone[i] = k->gone[--k->n_gone];
			return 0;
		}
	}
	for (uint32_t s = 0; k && s < c->nslots; s++) {
		const struct alias *a = &k->alias[s];
		if ((c->hold[s] & GM_CONSUMER_KEPT) && a->addr && p >= a->addr &&
		    p < a->addr + a->len) {
			gm_consumer_give_back(c, s, GM_CONSUMER_USER | GM_CONSUMER_KEPT);
			return 0;
		}
	}
	return -ENOENT;
}

bool gm_consumer_kept(const struct gm_consumer *c, uint32_t slot)
{
	return slot < c->nslots && (c->hold[slot] & GM_CONSUMER_KEPT);
}

/* ---- the agent gone ---------------------------------------------------------------- */

#define HOLDER_WAIT_MS 2000 /* a dead agent's workers are gone within this */

/* Is process pid gone (no such process, or a zombie nobody reaped yet)? */
static bool holder_gone(uint32_t pid)
{
	char path[64], buf[256];
	snprintf(path, sizeof(path), "/proc/%u/stat", pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return true;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	const char *rp = strrchr(buf, ')');
	return !rp || rp[1] != ' ' || rp[2] == 'Z' || rp[2] == 'X';
}

/* Every lease whose holder is not ours (ours NULL: none is) back to FREE once
 * its holder is gone, HOLDER_WAIT_MS at most in all; a holder ours says is ours
 * (asked again at each look: a worker forked since is) keeps its lease. */
static uint32_t take_back(struct gm_consumer *c, bool (*ours)(void *, uint32_t), void *arg)
{
	uint64_t deadline = gm_now_ns() + HOLDER_WAIT_MS * 1000000ull;
	uint32_t n = 0;
	for (uint32_t s = 0; s < c->nslots; s++) {
		uint32_t w = atomic_load(&gm_ring_ctl(c->ring, s)->state);
		if (GM_SLOT_STATE(w) != GM_SLOT_CLAIMED)
			continue;
		uint32_t holder = GM_SLOT_PID(w);
		bool mine = ours && ours(arg, holder);
		while (!mine && !holder_gone(holder) && gm_now_ns() < deadline) {
			usleep(1000);
			mine = ours && ours(arg, holder);
		}
		if (!mine)
			n += gm_ring_reclaim(c->ring, holder, NULL);
	}
	return n;
}

uint32_t gm_consumer_orphans(struct gm_consumer *c)
{
	uint32_t n = take_back(c, NULL, NULL);
	/* an agent stopped by a signal it handles stopped the ring on its way out,
	 * and its workers, counted in the header, are gone */
	atomic_store(&c->h->stop, 0);
	atomic_store(&c->h->p_alive, 0);
	return n;
}

uint32_t gm_consumer_strays(struct gm_consumer *c, bool (*ours)(void *arg, uint32_t holder),
			    void *arg)
{
	/* a remote worker's lease (a virtual id, remote.h: no process here) goes at
	 * once: the agent that served it is gone, and nothing writes for it */
	return take_back(c, ours, arg);
}

/* ---- the wait ---------------------------------------------------------------------- */

void gm_consumer_interrupt(struct gm_consumer *c)
{
	c->interrupt = 1;
}

/* Has the node agent gone away? It says nothing unasked: a hang-up, an error or
 * the end of the stream is its going. */
static bool agent_gone(const struct gm_consumer *c)
{
	struct pollfd pf = {.fd = c->agent_fd, .events = POLLIN};
	char ch;

	if (c->agent_fd < 0 || poll(&pf, 1, 0) != 1)
		return false;
	return (pf.revents & (POLLHUP | POLLERR)) ||
	       recv(c->agent_fd, &ch, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

/* Why the wait must end now, with its message: the pool's fatal error, a
 * worker's, or the agent gone. 0 when none. */
static int fatal(struct gm_consumer *c)
{
	/* pairs with the release store in fatal() (pool.c) */
	int fe = atomic_load_explicit(&c->h->p_fatal, memory_order_acquire);
	if (fe) {
		gm_errf(c->errmsg, sizeof(c->errmsg), "%.*s", (int)sizeof(c->h->p_fatal_msg),
			c->h->p_fatal_msg);
		return fe < 0 ? fe : -EIO;
	}
	/* pairs with the release store in gm_bind_fatal (the pool turns it into
	 * p_fatal too; this sees it without waiting for the pool) */
	if (atomic_load_explicit(&c->h->fatal_set, memory_order_acquire) == 2) {
		gm_errf(c->errmsg, sizeof(c->errmsg), "workers cannot run: %.*s",
			(int)sizeof(c->h->fatal), c->h->fatal);
		return -EIO;
	}
	if (agent_gone(c)) {
		gm_errf(c->errmsg, sizeof(c->errmsg),
			"the node agent went away (and the workers it ran with it)");
		return GM_CONSUMER_AGENT_GONE;
	}
	return 0;
}

/* One slice of the wait: 0 (ready), -EINTR, or 1 (not yet). */
static int wait_slice(struct gm_consumer *c, uint64_t task, int ms)
{
	/* A signal that lands just outside the futex (between two slices, or as one
	 * times out) gives no EINTR: the handler's gm_consumer_interrupt is seen
	 * here, at the latest one slice later. */
	int rc = c->interrupt ? -EINTR : gm_ring_wait_ready(c->ring, task, ms);
	if (rc == -EINTR) {
		c->interrupt = 0;
		gm_errf(
		    c->errmsg, sizeof(c->errmsg),
		    "interrupted by a signal while waiting for batch %llu (call again to go on)",
		    (unsigned long long)task);
	}
	return rc == 0 || rc == -EINTR ? rc : 1;
}

int gm_consumer_wait(struct gm_consumer *c, uint64_t task, int timeout_ms)
{
	uint64_t t0 = gm_now_ns();
	int waited = 0, rc = task == c->next ? make_room(c) : 0;

	if (rc)
		return rc;
	/* when the wait began (never 0 nor 1): the controller counts a wait going
	 * on up to its look (elastic.c) */
	atomic_store_explicit(&c->h->c_waiting, t0 > 1 ? t0 : 2, memory_order_relaxed);
	for (;;) {
		int step = timeout_ms < 0 || timeout_ms - waited > WAIT_SLICE_MS
			       ? WAIT_SLICE_MS
			       : timeout_ms - waited;
		rc = wait_slice(c, task, step);
		if (rc <= 0)
			break;
		rc = fatal(c);
		if (rc)
			break;
		waited += step;
		if (timeout_ms >= 0 && waited >= timeout_ms) {
			gm_errf(c->errmsg, sizeof(c->errmsg), "batch %llu not ready after %d ms",
				(unsigned long long)task, timeout_ms);
			rc = -ETIMEDOUT;
			break;
		}
	}
	uint64_t dt = gm_now_ns() - t0;
	/* the wait counted before it stops going on: a look between the two sees
	 * it twice (elastic.c takes no more than the window), never not at all */
	atomic_fetch_add_explicit(&c->h->c_wait_ns, dt, memory_order_relaxed);
	atomic_store_explicit(&c->h->c_waiting, 0, memory_order_relaxed);
	if (rc)
		return rc;
	c->wait_ns += dt;
	return (int)(task & (c->nslots - 1));
}

/* ---- the way back to a node agent -------------------------------------------------- */

void gm_consumer_agent_lost(struct gm_consumer *c)
{
	c->agent_fd = -1;
	c->retry_ms = GM_CONSUMER_RETRY_MS;
	c->retry_ns = gm_now_ns() + GM_CONSUMER_RETRY_MS * 1000000ull;
}

/* fd's send and receive bounded by ms (0: no bound). */
static void sock_timeouts(int fd, unsigned ms)
{
	struct timeval tv = {ms / 1000, (ms % 1000) * 1000};

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

int gm_consumer_reattach(struct gm_consumer *c, const char *path, gm_consumer_ask_fn ask, void *arg)
{
	char why[512];
	uint64_t now = gm_now_ns();

	if (now < c->retry_ns)
		return -1;
	c->retry_ns = now + c->retry_ms * 1000000ull;
	int fd = gm_wire_connect(path, why, sizeof(why));
	if (fd < 0)
		return -1; /* no agent there yet */
	sock_timeouts(fd, GM_CONSUMER_REATTACH_MS);
	if (ask(arg, fd, why, sizeof(why))) {
		close(fd);
		if (!c->told_refusal)
			gm_log("loader",
			       "the node agent at %s does not take this job back (%s): its "
			       "workers stay in this process; asked again every %u s at most",
			       path, why, GM_CONSUMER_RETRY_MAX_MS / 1000);
		c->told_refusal = true;
		c->retry_ms = c->retry_ms * 2 < GM_CONSUMER_RETRY_MAX_MS ? c->retry_ms * 2
									 : GM_CONSUMER_RETRY_MAX_MS;
		return -1;
	}
	sock_timeouts(fd, 0);
	c->told_refusal = false;
	c->agent_fd = fd;
	return fd;
}
