/*
 * bind.c - the ring's lease protocol for bindings (see bind.h).
 *
 * The worker side is a thin skin over ring.c: the same claim CAS, the same
 * publish, the same progress bits the pool's lease watch reads, and the same
 * resume (gm_ring_begin_task): a re-issued task keeps the done bits and error
 * records its dead holder left, so a binding that keeps each finished sample in
 * the slot (python/goldminer/_worker.py does, beside the payload) makes only the
 * rest. The indices are the consumer's, written into ids[]
 * before the slot becomes FREE for the task, so the release store that makes it
 * FREE publishes them to the claimer: gm_bind_pool_release for task + slots
 * (gm_ring_release), gm_bind_pool_give for a task of the first window. Every
 * slot starts parked (gm_ring_park: READY, as if the consumer held it) and
 * gm_bind_pool_give unparks it, before or after the workers start: a consumer
 * whose first epoch is shorter than the ring gives the rest of the window once
 * it has drawn the next epoch, and no worker ever claims a slot with no indices.
 *
 * A slot's ids[] start with the batch's epoch and index (bind.h): a ring may carry
 * several epochs for persistent workers, and the pool's stall lines name them.
 *
 * A handle is its attaching process's: a process forked from the worker (a
 * dataset that spawns a helper) has a copy of the handle and of the mapping, and
 * the lease word names the worker's pid, so the ring alone cannot tell the two
 * apart. Every call that writes into the ring (claim, sample, done, error,
 * publish) first compares getpid() with the pid at attach and does nothing in
 * another process; publish is moreover a CAS from the lease it holds, so a
 * holder whose lease the pool took back publishes nothing.
 *
 * The consumer side is a pool (pool.c) in exec mode with no index and a
 * consumer (consumer.c, embedded): the wait, the counters, the pin, the in-order
 * give-back and kept batches are the C loader's own. A slot is held by the user
 * from delivery until gm_bind_pool_release (or, kept, until gm_bind_pool_drop)
 * and by the pool itself (GM_CONSUMER_OWNER) until the task after it has its
 * indices (gm_bind_pool_release's batch): it goes back to the ring only then.
 * It does not read payloads, only hands them out. It does not pickle, lay out or
 * check what a payload holds: the binding does.
 */
#include "goldminer/bind.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "goldminer/consumer.h"
#include "goldminer/elastic.h"
#include "goldminer/job.h" /* gm_lease_ms */
#include "goldminer/limits.h"
#include "goldminer/pool.h"
#include "goldminer/ring.h"
#include "goldminer/util.h"
#include "goldminer/wire.h"

/* ---- worker side ---------------------------------------------------------------- */

struct gm_bind {
	struct gm_ring *ring;
	uint32_t pid;
	uint64_t t0, rq0;	 /* clock and run-queue delay at the claim */
	int sched_fd;		 /* /proc/self/schedstat, read at each claim and publish (-1) */
	uint32_t deal_n, deal_w; /* gm_bind_deal: batches k with k mod n == w (n > 1) */
};

/* Is this the process that attached b (not a fork of it)? getpid() is a system
 * call of about 50 ns: once per call, at most twice a sample. */
static bool mine(const struct gm_bind *b)
{
	return (uint32_t)getpid() == b->pid;
}

/* Time this process waited for a CPU, in ns (the second field of
 * /proc/self/schedstat, kept open: twice a batch; 0 where the kernel does not
 * keep it). */
static uint64_t run_delay(const struct gm_bind *b)
{
	char buf[128], *end;
	ssize_t n = b->sched_fd >= 0 ? pread(b->sched_fd, buf, sizeof(buf) - 1, 0) : -1;

	if (n <= 0)
		return 0;
	buf[n] = '\0';
	strtoull(buf, &end, 10); /* time on a CPU */
	return strtoull(end, NULL, 10);
}

int gm_bind_attach(struct gm_bind **out, int fd)
{
	struct gm_bind *b;
	int rc;

	*out = NULL;
	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	rc = gm_ring_attach(&b->ring, fd);
	if (rc) {
		free(b);
		return rc;
	}
	b->pid = (uint32_t)getpid();
	b->sched_fd = open("/proc/self/schedstat", O_RDONLY | O_CLOEXEC);
	*out = b;
	return 0;
}

void gm_bind_detach(struct gm_bind *b)
{
	if (!b)
		return;
	if (b->sched_fd >= 0)
		close(b->sched_fd);
	gm_ring_destroy(b->ring);
	free(b);
}

int gm_bind_deal(struct gm_bind *b, uint32_t n, uint32_t w)
{
	if (n > 1 && w >= n)
		return -EINVAL;
	b->deal_n = n > 1 ? n : 0;
	b->deal_w = w;
	return 0;
}

/* gm_ring_claim_if's want for a dealt worker: the slot's batch number (its ids
 * header, put_batch) is this worker's. */
static bool dealt_to_me(const struct gm_ring *r, uint32_t slot, void *arg)
{
	const struct gm_bind *b = arg;
	return gm_ring_ids(r, slot)[1] % b->deal_n == b->deal_w;
}

static int claim(struct gm_bind *b, uint64_t *task)
{
	if (b->deal_n)
		return gm_ring_claim_if(b->ring, b->pid, task, dealt_to_me, b);
	return gm_ring_claim(b->ring, b->pid, task);
}

int gm_bind_claim(struct gm_bind *b, int timeout_ms, uint64_t *task)
{
	struct gm_ring_hdr *h = gm_ring_hdr(b->ring);
	/* read the sequence before looking, so a release after the look wakes us */
	uint32_t seq = atomic_load_explicit(&h->work_seq, memory_order_acquire);

	if (!mine(b))
		return -EPERM;
	int slot = claim(b, task);

	if (slot == -EAGAIN && timeout_ms != 0) {
		gm_ring_wait_work(b->ring, seq, timeout_ms);
		slot = claim(b, task);
	}
	if (slot >= 0) {
		/* bits and records kept when they are this task's (a re-issue) */
		gm_ring_begin_task(b->ring, (uint32_t)slot, *task,
				   gm_ring_ctl(b->ring, (uint32_t)slot)->n);
		b->t0 = gm_now_ns();
		b->rq0 = run_delay(b);
	}
	return slot;
}

uint32_t gm_bind_indices(const struct gm_bind *b, uint32_t slot, const uint32_t **idx,
			 uint32_t *epoch, uint32_t *batch)
{
	uint32_t n = gm_ring_ctl(b->ring, slot)->n;
	const uint32_t *ids = gm_ring_ids(b->ring, slot);

	*epoch = ids[0];
	*batch = ids[1];
	*idx = ids + GM_BIND_IDS_HDR;
	/* written by the consumer, another process: checked before it sizes anything */
	return n <= gm_ring_hdr(b->ring)->batch_size - GM_BIND_IDS_HDR ? n : 0;
}

void *gm_bind_payload(const struct gm_bind *b, uint32_t slot, uint64_t *cap)
{
	const struct gm_ring_hdr *h = gm_ring_hdr(b->ring);

	*cap = (uint64_t)h->batch_size * h->sample_bytes;
	return gm_ring_data(b->ring, slot);
}

bool gm_bind_sample(struct gm_bind *b, uint32_t slot, uint32_t sample)
{
	if (!mine(b))
		return sample != UINT32_MAX && gm_ring_quarantined(b->ring, sample);
	/* read relaxed by the pool's lease watch and reclaim: a hint for attribution */
	atomic_store_explicit(&gm_ring_ctl(b->ring, slot)->cur_sample, sample,
			      memory_order_relaxed);
	return sample != UINT32_MAX && gm_ring_quarantined(b->ring, sample);
}

uint32_t gm_bind_done_count(const struct gm_bind *b, uint32_t slot)
{
	uint32_t n = gm_ring_hdr(b->ring)->batch_size - GM_BIND_IDS_HDR, count = 0;
	_Atomic uint64_t *done = gm_ring_done_bits(b->ring, slot);

	/* acquire pairs with the release in gm_bind_done, as gm_bind_is_done's */
	for (uint32_t q = 0; q < (n + 63) / 64; q++)
		count += (uint32_t)__builtin_popcountll(
		    atomic_load_explicit(&done[q], memory_order_acquire));
	return count;
}

bool gm_bind_is_done(const struct gm_bind *b, uint32_t slot, uint32_t i)
{
	if (i >= gm_ring_hdr(b->ring)->batch_size - GM_BIND_IDS_HDR)
		return false;
	/* pairs with the release in gm_bind_done: what position i's holder wrote */
	return atomic_load_explicit(&gm_ring_done_bits(b->ring, slot)[i / 64],
				    memory_order_acquire) >>
		   (i % 64) &
	       1;
}

void gm_bind_done(struct gm_bind *b, uint32_t slot, uint32_t i)
{
	if (i >= gm_ring_hdr(b->ring)->batch_size - GM_BIND_IDS_HDR || !mine(b))
		return;
	/* pairs with the relaxed loads of the lease watch (pool.c): progress only */
	atomic_fetch_or_explicit(&gm_ring_done_bits(b->ring, slot)[i / 64], 1ull << (i % 64),
				 memory_order_release);
}

int gm_bind_error(struct gm_bind *b, uint32_t slot, uint32_t i, uint32_t sample, int32_t err,
		  const char *msg)
{
	struct gm_slot_ctl *ctl = gm_ring_ctl(b->ring, slot);

	if (i >= gm_ring_hdr(b->ring)->batch_size - GM_BIND_IDS_HDR)
		return -EINVAL;
	if (!mine(b))
		return -EPERM;
	atomic_fetch_or_explicit(&gm_ring_err_bits(b->ring, slot)[i / 64], 1ull << (i % 64),
				 memory_order_relaxed);
	if (ctl->n_recs < GM_RING_MAX_ERRS) {
		struct gm_slot_err *e = &ctl->errs[ctl->n_recs++];
		e->sample = sample;
		e->err = err;
		snprintf(e->msg, sizeof(e->msg), "%s", msg ? msg : "");
	}
	ctl->n_errors++;
	return 0;
}

bool gm_bind_quarantined(const struct gm_bind *b, uint32_t sample)
{
	return gm_ring_quarantined(b->ring, sample);
}

int gm_bind_publish(struct gm_bind *b, uint32_t slot, int32_t status)
{
	if (!gm_ring_status_ok(status) && status != -EMSGSIZE)
		return -EINVAL;
	struct gm_slot_ctl *ctl = gm_ring_ctl(b->ring, slot);
	/* relaxed: a look before writing the slot's figures; the CAS below decides */
	uint32_t word = atomic_load_explicit(&ctl->state, memory_order_relaxed);
	if (!mine(b) || word != GM_SLOT_WORD(GM_SLOT_CLAIMED, b->pid))
		return -EPERM;
	uint64_t rq = run_delay(b);
	ctl->decode_ns = gm_now_ns() - b->t0;
	ctl->preempt_ns = rq > b->rq0 ? rq - b->rq0 : 0;
	ctl->status = status;
	/* release: the payload and records go with it; -EPERM when the lease was
	 * taken back since the look */
	return gm_ring_publish_held(b->ring, slot, b->pid);
}

void gm_bind_fatal(struct gm_bind *b, const char *msg)
{
	struct gm_ring_hdr *h = gm_ring_hdr(b->ring);
	uint32_t zero = 0;
	/* first writer wins; pairs with the acquire load in worker_fatal below */
	if (atomic_compare_exchange_strong(&h->fatal_set, &zero, 1)) {
		snprintf(h->fatal, sizeof(h->fatal), "%s", msg ? msg : "");
		atomic_store_explicit(&h->fatal_set, 2, memory_order_release);
	}
}

/* ---- consumer side ------------------------------------------------------------- */

struct gm_bind_pool {
	struct gm_pool *pool;
	struct gm_ring *ring;
	struct gm_ring_hdr *h;
	struct gm_consumer c; /* the wait, give-back, kept batches, pin (consumer.h) */
	uint32_t batch_max;
	uint32_t workers;
	bool started;
	bool sparse; /* a sparse ring (never pinned: that would fault every page) */
	/* for gm_bind_pool_node: the workers' command, spec and deadline, and the
	 * connection to the agent that runs them (-1: none) */
	const char *const *argv;
	int spec_fd;
	uint32_t lease_ms;
	int node_fd;
	/* the agent gone: workers of this process over the ring (bind_take_over)
	 * until an agent on node_path adopts it again (bind_reattach) */
	struct gm_pool_cfg pc; /* the pool's configuration, for them */
	struct gm_pool *fallback;
	char node_path[sizeof(((struct sockaddr_un *)0)->sun_path) + 64];
	uint32_t cap;	  /* the workers' cap asked of the agent */
	char facts[2048]; /* gm_bind_pool_facts' words, after the command's */
	size_t nfacts;
	/* the agent cannot run the command (wire.h, GM_NODE_TRAINER_WORKERS): the
	 * workers are this process's (fallback) from the start, sized by the
	 * agent's a_target (ring.h), the last value taken in a_seen */
	bool trainer_runs;
	uint32_t a_seen;
	uint32_t flags; /* the request's (GOLDMINER_NODE_WORKERS) */
	/* per slot: parked (gm_ring_park) until gm_bind_pool_give hands out its first
	 * task; no worker ever sees a slot whose indices were not written */
	bool *parked;
};

int gm_bind_pool_create(struct gm_bind_pool **out, const struct gm_bind_pool_cfg *c, char *err,
			size_t errlen)
{
	struct gm_pool_cfg pc;
	struct gm_bind_pool *p;
	int rc;

	*out = NULL;
	if (!c->argv || !c->argv[0] || !c->workers || c->workers > GM_MAX_WORKERS ||
	    !c->batch_max || c->batch_max > GM_MAX_BATCH || !c->payload_bytes ||
	    c->end_task <= c->first_task) {
		gm_errf(err, errlen,
			"a pool needs a command, 1..%d workers, a batch size, a payload size "
			"and a task",
			GM_MAX_WORKERS);
		return -EINVAL;
	}
	rc = gm_pool_lease_check(c->lease_timeout_ms, err, errlen);
	if (rc)
		return rc;
	memset(&pc, 0, sizeof(pc));
	pc.exec_argv = c->argv;
	pc.zygote_argv = c->zygote_argv;
	pc.zygote_server = c->zygote_server;
	pc.exec_fd = c->spec_fd;
	pc.sparse = c->sparse != 0;
	uint32_t rows = c->batch_max + GM_BIND_IDS_HDR; /* the ring's batch: ids[] rows */
	pc.sample_bytes = (c->payload_bytes + rows - 1) / rows;
	pc.w.batch_size = rows;
	pc.w.batches_per_epoch = UINT32_MAX; /* a slot says its epoch (the pool reads it) */
	pc.first_task = c->first_task;
	pc.end_task = c->end_task;
	pc.slots = c->slots;
	pc.workers = (int)c->workers;
	pc.lease_timeout_ms = gm_lease_ms(c->lease_timeout_ms);
	pc.autoscale = c->budget > 0;
	pc.budget = c->budget > GM_MAX_WORKERS ? GM_MAX_WORKERS : c->budget;
	p = calloc(1, sizeof(*p));
	if (!p) {
		gm_errf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	p->pc = pc;
	rc = gm_pool_create(&p->pool, &pc, err, errlen);
	if (rc)
		goto out_free;
	p->ring = gm_pool_ring(p->pool);
	p->h = gm_ring_hdr(p->ring);
	p->parked = calloc(p->h->nslots, sizeof(*p->parked));
	if (!p->parked || gm_consumer_init(&p->c, p->ring, c->first_task)) {
		gm_errf(err, errlen, "out of memory");
		rc = -ENOMEM;
		goto out_destroy_pool;
	}
	/* The first window's tasks wait for their indices: a consumer that gives
	 * fewer (its epoch is shorter than the ring, the next one not drawn) gives
	 * the rest when it knows them, while the workers run. */
	for (uint32_t s = 0; s < p->h->nslots; s++) {
		gm_ring_park(p->ring, s);
		p->parked[s] = true;
	}
	p->batch_max = c->batch_max;
	p->workers = c->workers;
	p->argv = c->argv;
	p->spec_fd = c->spec_fd;
	p->sparse = c->sparse != 0;
	p->lease_ms = c->lease_timeout_ms;
	p->node_fd = -1;
	*out = p;
	return 0;

out_destroy_pool:
	gm_consumer_fini(&p->c);
	free(p->parked);
	gm_pool_destroy(p->pool);
out_free:
	free(p);
	return rc;
}

/* Write task's batch into its slot (the slot is FREE or about to be, for task). */
static void put_batch(struct gm_bind_pool *p, uint64_t task, const struct gm_bind_batch *b)
{
	uint32_t slot = (uint32_t)(task & (p->h->nslots - 1));
	uint32_t *ids = gm_ring_ids(p->ring, slot);

	ids[0] = b->epoch;
	ids[1] = b->batch;
	memcpy(ids + GM_BIND_IDS_HDR, b->idx, (size_t)b->n * sizeof(*b->idx));
	gm_ring_ctl(p->ring, slot)->n = b->n;
}

static bool batch_ok(const struct gm_bind_pool *p, const struct gm_bind_batch *b)
{
	return b && b->n && b->n <= p->batch_max && b->idx;
}

int gm_bind_pool_give(struct gm_bind_pool *p, uint64_t task, const struct gm_bind_batch *b)
{
	uint32_t slot = (uint32_t)(task & (p->h->nslots - 1));

	if (!batch_ok(p, b) || task < p->h->first_task || task >= p->h->first_task + p->h->nslots ||
	    task >= p->h->end_task)
		return -EINVAL;
	if (!p->parked[slot])
		return -EBUSY;
	put_batch(p, task, b);
	p->parked[slot] = false;
	gm_ring_unpark(p->ring, slot); /* its release store publishes the indices */
	return 0;
}

int gm_bind_pool_start(struct gm_bind_pool *p, char *err, size_t errlen)
{
	int rc = gm_pool_start(p->pool, err, errlen);

	if (!rc)
		p->started = true;
	return rc;
}

/* A CMDJOB request for the node agent (wire.h): the command, cap and deadline.
 * 0, or -E2BIG when the command does not fit. */
static int cmd_request(const struct gm_bind_pool *p, uint32_t cap, struct gm_node_req *req)
{
	size_t off = 0;

	gm_wire_request(req, GM_NODE_CMDJOB);
	for (int k = 0; p->argv[k]; k++) {
		size_t l = strlen(p->argv[k]) + 1;
		if (k == GM_NODE_CMD_ARGS || off + l >= sizeof(req->root))
			return -E2BIG;
		memcpy(req->root + off, p->argv[k], l);
		off += l;
	}
	req->root[off++] = '\0'; /* the empty argument that ends them */
	if (p->nfacts && off + p->nfacts <= sizeof(req->root))
		memcpy(req->root + off, p->facts, p->nfacts);
	else if (p->nfacts)
		return -E2BIG;
	req->workers = (int32_t)(cap > GM_MAX_WORKERS ? GM_MAX_WORKERS : cap);
	req->lease_timeout_ms = p->lease_ms;
	req->flags = p->flags;
	return 0;
}

/* $GOLDMINER_NODE_WORKERS: "trainer" (this process runs the workers, the agent
 * sizes them), unset, "" or "auto" (the agent runs them when it can: wire.h).
 * 0, or -EINVAL with why. */
static int workers_env(struct gm_bind_pool *p, char *err, size_t errlen)
{
	const char *v = getenv("GOLDMINER_NODE_WORKERS");

	p->flags = 0;
	if (v && !strcmp(v, "trainer"))
		p->flags = GM_NODE_TRAINER_WORKERS;
	else if (v && *v && strcmp(v, "auto")) {
		gm_errf(err, errlen,
			"GOLDMINER_NODE_WORKERS=%.64s: give trainer (this process runs the "
			"workers, the node agent sizes them) or auto (the agent runs them when it "
			"has this interpreter)",
			v);
		return -EINVAL;
	}
	return 0;
}

/* The agent's size for workers this process runs (a_target, ring.h) into its
 * pool, when it changed since the last look. */
static void follow_agent(struct gm_bind_pool *p)
{
	uint32_t n = atomic_load(&p->h->a_target);

	if (n == p->a_seen)
		return;
	p->a_seen = n;
	gm_pool_set_target(p->fallback, (int)(n > GM_MAX_WORKERS ? GM_MAX_WORKERS : n));
}

/* This process's pool over the ring, started with the agent's size (a_target)
 * when the agent sizes it (node_fd open), else with the configured one: 0, or
 * -errno with why. */
static int own_pool(struct gm_bind_pool *p, char *why, size_t len)
{
	struct gm_pool_cfg pc = p->pc;

	pc.ring_fd = gm_ring_fd(p->ring);
	if (p->trainer_runs) {
		p->a_seen = atomic_load(&p->h->a_target);
		pc.workers = (int)(p->a_seen > GM_MAX_WORKERS ? GM_MAX_WORKERS : p->a_seen);
	}
	int rc = gm_pool_create(&p->fallback, &pc, why, len);
	if (!rc)
		rc = gm_pool_start(p->fallback, why, len);
	if (rc) {
		gm_pool_destroy(p->fallback);
		p->fallback = NULL;
	}
	return rc;
}

int gm_bind_pool_node(struct gm_bind_pool *p, const char *socket_path, uint32_t cap, char *err,
		      size_t errlen)
{
	struct gm_node_req req;
	struct gm_node_reply *rep;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path) + 64], why[512];
	int rc, fd;

	if (p->started)
		return -EBUSY;
	if (p->spec_fd <= 2) {
		gm_errf(err, errlen, "a pool run by the node agent needs a spec_fd");
		return -EINVAL;
	}
	if (workers_env(p, err, errlen))
		return -EINVAL;
	if (cmd_request(p, cap, &req)) {
		gm_errf(err, errlen,
			"the workers' command is too long for the node agent "
			"(%d arguments, %zu bytes at most)",
			GM_NODE_CMD_ARGS, sizeof(req.root) - 1);
		return -E2BIG;
	}
	if (!socket_path || !*socket_path)
		socket_path = gm_wire_default_socket(path, sizeof(path));
	rep = malloc(sizeof(*rep));
	if (!rep) {
		gm_errf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	fd = gm_wire_connect(socket_path, why, sizeof(why));
	if (fd < 0) {
		gm_errf(err, errlen, "%s", why);
		rc = fd;
		goto out_free;
	}
	int fds[2] = {gm_ring_fd(p->ring), p->spec_fd};
	rc = gm_wire_call_fds(fd, &req, fds, 2, rep, NULL);
	if (rc == 0 && rep->status)
		rc = rep->status;
	if (rc) {
		if (rc == -EPROTONOSUPPORT)
			snprintf(rep->msg, sizeof(rep->msg),
				 "it speaks goldminer node protocol version %u, this process "
				 "version %d (different goldminer builds: run the agent of this "
				 "build)",
				 rep->version, GM_NODE_VERSION);
		gm_errf(err, errlen, "node agent at %s: %s", socket_path,
			rc == -EPIPE	? "it closed the connection"
			: rc == -EPROTO ? "malformed reply (another goldminer version?)"
					: rep->msg);
		close(fd);
		goto out_free;
	}
	p->cap = cap;
	snprintf(p->node_path, sizeof(p->node_path), "%s", socket_path);
	p->trainer_runs = (rep->flags & GM_NODE_TRAINER_WORKERS) != 0;
	if (p->trainer_runs && (rc = own_pool(p, why, sizeof(why)))) {
		gm_errf(err, errlen,
			"node agent at %s: it has not this interpreter, and this process cannot "
			"run the job's workers itself: %s",
			socket_path, why);
		close(fd);
		goto out_free;
	}
	p->node_fd = fd;
	p->c.agent_fd = fd;
	p->started = true;
out_free:
	free(rep);
	return rc;
}

/* ---- the node agent gone (loader.c does the same for a C job) --------------------
 *
 * The ring is ours and the workers stateless: when the agent that ran them goes
 * away, a pool of this process's own runs the same command over the ring (its
 * dead workers' leases back first: gm_consumer_orphans); when this process ran
 * them all along (trainer_runs), they go on, and only the leases of the remote
 * workers the agent served go back (gm_consumer_strays). An agent answering
 * on the socket again is sent the job again (CMDJOB: it runs its workers over
 * the ring as it is); then ours finish their batches (gm_pool_hand_over). */

/* The agent's connection closed with n batches taken back to be made again; the
 * socket is tried again in GM_CONSUMER_RETRY_MS (bind_reattach). */
static void agent_gone(struct gm_bind_pool *p, uint32_t n)
{
	close(p->node_fd);
	p->node_fd = -1;
	gm_consumer_agent_lost(&p->c);
	atomic_fetch_add(&p->h->p_reissued, n);
}

/* Is holder one of this process's live workers (the pool over a trainer-run
 * job's ring)? gm_consumer_strays' question. */
static bool own_worker(void *arg, uint32_t holder)
{
	struct gm_bind_pool *p = arg;
	int pids[GM_MAX_WORKERS];
	int n = p->fallback ? gm_pool_pids(p->fallback, pids, GM_MAX_WORKERS) : 0;

	for (int i = 0; i < n; i++)
		if ((uint32_t)pids[i] == holder)
			return true;
	return false;
}

static int bind_take_over(struct gm_bind_pool *p, char *err, size_t errlen)
{
	char why[512];

	if (p->trainer_runs) { /* the workers are ours already: they go on as they are */
		/* but the peers' workers the agent served wrote through it: their
		 * leases, which nothing would ever publish or take back, go now */
		uint32_t n = gm_consumer_strays(&p->c, own_worker, p);
		agent_gone(p, n);
		gm_log("loader",
		       "the node agent at %s went away: this process's workers, which it "
		       "sized, go on at their last size, until an agent answers there again "
		       "(%u batches its peers' workers held made again)",
		       p->node_path, n);
		return 0;
	}
	uint32_t n = gm_consumer_orphans(&p->c);
	int rc = own_pool(p, why, sizeof(why));
	if (rc) {
		gm_errf(err, errlen,
			"the node agent at %s went away and this process cannot run the job's "
			"workers itself: %s",
			p->node_path, why);
		return rc;
	}
	agent_gone(p, n);
	gm_log("loader",
	       "the node agent at %s went away: this process's own workers make the job's "
	       "batches from batch %llu on (the same bytes; %u batches its workers held "
	       "made again), until an agent answers there again",
	       p->node_path, (unsigned long long)p->c.next, n);
	return 0;
}

/* bind_ask's question and the agent's answer. */
struct ask {
	struct gm_bind_pool *p;
	uint32_t flags; /* the agent's reply's GM_NODE_* flags, when it took the job */
};

/* The job again to the agent on fd (gm_consumer_ask_fn; arg: struct ask): 0, or
 * -errno with why. */
static int bind_ask(void *arg, int fd, char *why, size_t len)
{
	struct ask *a = arg;
	struct gm_node_req req;
	int fds[2] = {gm_ring_fd(a->p->ring), a->p->spec_fd};
	struct gm_node_reply *rep = malloc(sizeof(*rep));

	if (!rep || cmd_request(a->p, a->p->cap, &req)) {
		free(rep);
		snprintf(why, len, "out of memory");
		return -ENOMEM;
	}
	int rc = gm_wire_call_fds(fd, &req, fds, 2, rep, NULL);
	if (!rc && rep->status)
		rc = rep->status;
	a->flags = rc ? 0 : rep->flags;
	if (rc)
		snprintf(why, len, "%.400s",
			 rc == -EPIPE		  ? "no answer to the request"
			 : rc == -EPROTONOSUPPORT ? "another goldminer build"
						  : rep->msg);
	free(rep);
	return rc;
}

/* An agent on the socket again: it runs the job's workers again (ours finish
 * their batches) or sizes ours again. A refusal is said once; asked again later
 * (gm_consumer_reattach). */
static void bind_reattach(struct gm_bind_pool *p)
{
	struct ask a = {.p = p};
	int fd = gm_consumer_reattach(&p->c, p->node_path, bind_ask, &a);

	if (fd < 0)
		return;
	p->node_fd = fd;
	p->trainer_runs = (a.flags & GM_NODE_TRAINER_WORKERS) != 0;
	if (p->trainer_runs) { /* ours stay; the agent sizes them again */
		gm_log("loader",
		       "re-attached to the node agent at %s: it sizes this process's workers "
		       "again (it does not run this interpreter)",
		       p->node_path);
		return;
	}
	gm_pool_hand_over(p->fallback);
	gm_pool_destroy(p->fallback);
	p->fallback = NULL;
	gm_log("loader",
	       "re-attached to the node agent at %s: its workers make the job's batches "
	       "again from batch %llu on",
	       p->node_path, (unsigned long long)p->c.next);
}

/* ---- the epoch table (bind.h) ---- */

/* One epoch's entry: key is the epoch + 1 (0: none), written last. */
struct epoch_ent {
	_Atomic uint64_t key, seed;
};

#define EPOCH_TABLE_OFF 2048 /* in the header page, past struct gm_ring_hdr */
_Static_assert(sizeof(struct gm_ring_hdr) <= EPOCH_TABLE_OFF,
	       "the epoch table overlaps the ring header: move EPOCH_TABLE_OFF");
_Static_assert(EPOCH_TABLE_OFF + GM_BIND_EPOCHS * sizeof(struct epoch_ent) <= 4096,
	       "the epoch table does not fit the ring's header page");

static struct epoch_ent *epoch_table(struct gm_ring *r, uint32_t epoch)
{
	struct gm_ring_hdr *h = gm_ring_hdr(r);

	/* a header page smaller than a page (an older ring) has no table */
	if (h->hdr_bytes < EPOCH_TABLE_OFF + GM_BIND_EPOCHS * sizeof(struct epoch_ent))
		return NULL;
	return (struct epoch_ent *)((char *)h + EPOCH_TABLE_OFF) + epoch % GM_BIND_EPOCHS;
}

void gm_bind_pool_seed(struct gm_bind_pool *p, uint32_t epoch, uint64_t seed)
{
	struct epoch_ent *e = epoch_table(p->ring, epoch);

	if (!e)
		return;
	/* a reader that saw the old key before this and reads it again after sees 0 */
	atomic_store(&e->key, 0);
	atomic_store(&e->seed, seed);
	atomic_store(&e->key, (uint64_t)epoch + 1);
}

int gm_bind_epoch_seed(const struct gm_bind *b, uint32_t epoch, uint64_t *seed)
{
	struct epoch_ent *e = epoch_table(b->ring, epoch);

	if (!e)
		return -ENOENT;
	uint64_t k1 = atomic_load(&e->key);
	uint64_t s = atomic_load(&e->seed);
	uint64_t k2 = atomic_load(&e->key);
	if (k1 != (uint64_t)epoch + 1 || k2 != k1)
		return -ENOENT;
	*seed = s;
	return 0;
}

/* The lowest epoch with an entry, or -ENOENT. */
static int first_entry(const struct gm_bind *b, uint32_t *epoch, uint64_t *seed)
{
	uint64_t best = 0;

	if (!epoch_table(b->ring, 0))
		return -ENOENT;
	for (uint32_t i = 0; i < GM_BIND_EPOCHS; i++) {
		uint64_t k = atomic_load(&epoch_table(b->ring, i)->key);
		if (k && (!best || k < best))
			best = k;
	}
	if (!best || gm_bind_epoch_seed(b, (uint32_t)(best - 1), seed))
		return -ENOENT;
	*epoch = (uint32_t)(best - 1);
	return 0;
}

int gm_bind_first_epoch(struct gm_bind *b, int timeout_ms, uint32_t *epoch, uint64_t *seed)
{
	struct gm_ring_hdr *h = gm_ring_hdr(b->ring);
	uint64_t end = gm_now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ull;

	for (;;) {
		/* the sequence before the look: the give that follows the entry wakes us */
		uint32_t seq = atomic_load_explicit(&h->work_seq, memory_order_acquire);
		if (atomic_load(&h->stop))
			return -ENODATA;
		if (!first_entry(b, epoch, seed))
			return 0;
		uint64_t now = gm_now_ns();
		if (now >= end)
			return -EAGAIN;
		gm_ring_wait_work(b->ring, seq, (int)((end - now + 999999) / 1000000));
	}
}

void gm_bind_pool_pause(struct gm_bind_pool *p, int begin)
{
	gm_elastic_pause(p->h, begin);
}

int gm_bind_pool_next(struct gm_bind_pool *p, uint64_t task, int timeout_ms, char *err,
		      size_t errlen)
{
	uint32_t slot = (uint32_t)(task & (p->h->nslots - 1));
	int rc;

	if (p->parked[slot]) { /* READY for the ring, but empty */
		gm_errf(err, errlen, "batch %llu was never given (gm_bind_pool_give)",
			(unsigned long long)task);
		return -EINVAL;
	}
	if (p->fallback && p->node_fd < 0)
		bind_reattach(p);
	if (p->fallback && p->trainer_runs && p->node_fd >= 0)
		follow_agent(p);
	rc = gm_consumer_wait(&p->c, task, timeout_ms);
	if (rc == GM_CONSUMER_AGENT_GONE && p->node_fd >= 0) {
		rc = bind_take_over(p, err, errlen); /* our workers go on with the ring */
		if (rc)
			return rc;
		rc = gm_consumer_wait(&p->c, task, timeout_ms);
	}
	if (rc < 0) {
		gm_errf(err, errlen, "%s", p->c.errmsg);
		return rc;
	}
	/* held by the pool too until the task after it has its indices */
	bool more = task + p->h->nslots < p->h->end_task;
	gm_consumer_take(&p->c, task, slot, more ? GM_CONSUMER_OWNER : 0);
	return rc;
}

int32_t gm_bind_pool_status(const struct gm_bind_pool *p, uint32_t slot)
{
	return gm_ring_ctl(p->ring, slot)->status;
}

const void *gm_bind_pool_payload(const struct gm_bind_pool *p, uint32_t slot, uint64_t *cap)
{
	*cap = (uint64_t)p->h->batch_size * p->h->sample_bytes;
	return gm_ring_data(p->ring, slot);
}

uint32_t gm_bind_pool_errors(const struct gm_bind_pool *p, uint32_t slot)
{
	return gm_ring_ctl(p->ring, slot)->n_errors;
}

const char *gm_bind_pool_error(const struct gm_bind_pool *p, uint32_t slot, uint32_t r,
			       uint32_t *sample, int32_t *err)
{
	struct gm_slot_ctl *ctl = gm_ring_ctl(p->ring, slot);
	uint32_t n = ctl->n_recs < GM_RING_MAX_ERRS ? ctl->n_recs : GM_RING_MAX_ERRS;

	if (r >= n)
		return NULL;
	*sample = ctl->errs[r].sample;
	*err = ctl->errs[r].err;
	ctl->errs[r].msg[GM_RING_MSG - 1] = '\0'; /* a worker's text: terminated here */
	return ctl->errs[r].msg;
}

int gm_bind_pool_release(struct gm_bind_pool *p, uint32_t slot, const struct gm_bind_batch *b)
{
	struct gm_slot_ctl *ctl = gm_ring_ctl(p->ring, slot);
	uint64_t next = atomic_load_explicit(&ctl->task, memory_order_relaxed) + p->h->nslots;

	if (slot >= p->h->nslots || p->parked[slot]) /* its task not given: gm_bind_pool_give */
		return -EINVAL;
	unsigned held = p->c.hold[slot];
	if (!(held & (GM_CONSUMER_USER | GM_CONSUMER_OWNER)))
		return -EINVAL; /* not delivered, or released already */
	if ((held & GM_CONSUMER_OWNER) && !batch_ok(p, b))
		return -EINVAL;
	if (held & GM_CONSUMER_OWNER)
		put_batch(p, next, b);
	/* in task order, once nothing holds it (a kept batch: until its drop); the
	 * ring's release store of the task publishes the batch to the next claimer */
	gm_consumer_give_back(&p->c, slot,
			      GM_CONSUMER_OWNER | (held & GM_CONSUMER_KEPT ? 0 : GM_CONSUMER_USER));
	return 0;
}

int gm_bind_pool_keep(struct gm_bind_pool *p, uint32_t slot, uint64_t len, void **addr)
{
	size_t off = p->h->data_offset;
	if (slot >= p->h->nslots || !len || len > p->h->slot_bytes - off)
		return -EINVAL;
	long page = sysconf(_SC_PAGESIZE);
	len = (len + (uint64_t)page - 1) / (uint64_t)page * (uint64_t)page;
	/* a reserved ring's whole payload: one alias a slot, reused (and pinned
	 * once); a sparse one's written pages only (mapping the rest would fault
	 * them in) */
	if (len > p->h->slot_bytes - off || !p->sparse)
		len = p->h->slot_bytes - off;
	return gm_consumer_keep(&p->c, slot, off, (size_t)len, addr);
}

int gm_bind_pool_drop(struct gm_bind_pool *p, const void *addr)
{
	return gm_consumer_drop(&p->c, addr);
}

uint64_t gm_bind_pool_detached(const struct gm_bind_pool *p)
{
	return p->c.detached;
}

void gm_bind_pool_stop(struct gm_bind_pool *p)
{
	if (!p)
		return;
	if (p->node_fd >= 0)
		close(p->node_fd); /* the agent stops the workers it ran for us */
	p->node_fd = p->c.agent_fd = -1;
	if (p->fallback)
		gm_pool_stop(p->fallback);
	gm_pool_stop(p->pool);
}

void gm_bind_pool_stats(const struct gm_bind_pool *p, uint64_t out[5])
{
	out[4] = atomic_load(&p->h->p_target);
	out[0] = atomic_load(&p->h->p_alive);
	out[1] = atomic_load(&p->h->p_deaths);
	out[2] = atomic_load(&p->h->p_reissued);
	out[3] = atomic_load(&p->h->quarantine_n);
}

int gm_bind_pool_culprit(const struct gm_bind_pool *p, uint32_t sample, int *pid, int *sig)
{
	if (p->fallback && !gm_pool_culprit(p->fallback, sample, pid, sig))
		return 0;
	return gm_pool_culprit(p->pool, sample, pid, sig); /* an agent's: its log says who */
}

int gm_bind_pool_pids(const struct gm_bind_pool *p, int *pids, int max)
{
	if (p->fallback) /* this process's workers over a node agent's job */
		return gm_pool_pids(p->fallback, pids, max);
	if (!p->pool)
		return -ENOTSUP;
	return gm_pool_pids(p->pool, pids, max);
}

int gm_bind_pool_pin(struct gm_bind_pool *p)
{
	if (p->sparse)
		return -EINVAL;
	return gm_consumer_pin(&p->c);
}

int gm_bind_pool_facts(struct gm_bind_pool *p, const char *facts, size_t len)
{
	if (len < 2 || len > sizeof(p->facts) || facts[len - 1] || facts[len - 2])
		return -EINVAL;
	memcpy(p->facts, facts, len);
	p->nfacts = len;
	return 0;
}

struct gm_ring *gm_bind_pool_ring(const struct gm_bind_pool *p)
{
	return p->ring;
}

uint32_t gm_bind_pool_slots(const struct gm_bind_pool *p)
{
	return p->h->nslots;
}

void gm_bind_pool_destroy(struct gm_bind_pool *p)
{
	if (!p)
		return;
	gm_bind_pool_stop(p);	 /* no worker writes while the pages are unregistered */
	gm_consumer_fini(&p->c); /* kept batches' mappings and the pin, before the ring */
	gm_pool_destroy(p->fallback);
	gm_pool_destroy(p->pool);
	free(p->parked);
	free(p);
}
