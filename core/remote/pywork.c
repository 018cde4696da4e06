/*
 * pywork.c - a Python job's remote worker process (worker.h): `goldminer node
 * --remote-worker FD` with a Python job's blob, exec'ed by a lending agent
 * (lender.c) after its check passed (--lend-python, the roots below a lend
 * root, the trainer's interpreter and Python here).
 *
 * The idea: the batch is made by a Python worker exactly as on the trainer's
 * host, with the same bind API (bind.h), against a staging ring on this host
 * (one batch in flight, in its slot 0): this process is that ring's consumer (a bind pool of one
 * Python worker, with its zygote: a SIGKILLed Python worker is replaced in
 * milliseconds and its staging task made again, same bytes). It connects to
 * the home with its own UCP context, starts the staging pool and waits for
 * its first Python worker (the home's deadline for a lease runs from the
 * claim: the interpreter's start is not the batch's), then loops: CLAIM -> LEASE (the slot's
 * ids[] the trainer wrote: epoch, batch, indices) -> the staging slot gets
 * that batch -> the Python worker makes it -> BATCH (err bits, records, the
 * payload whole) -> the next CLAIM. The staging slot is handed back only with
 * the next lease's indices (bind.h: slots go back in task order with their
 * batch), so the Python worker never sees a batch that is not the home's.
 *
 * What it receives is checked where it lands (a LEASE: its shape). It holds
 * no state of an agent's, and nothing between leases but the staging ring.
 *
 * Not here: the checks of the batch (the home: pyhome.c, check.c), forking
 * and retiring (lender.c), the Python worker (python/goldminer/_worker.py).
 */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <ucp/api/ucp.h>

#include "check.h"
#include "conn.h"
#include "ctl.h"
#include "goldminer/bind.h"
#include "goldminer/host.h"
#include "goldminer/limits.h"
#include "goldminer/policy.h"
#include "goldminer/ring.h"
#include "goldminer/util.h"
#include "msg.h"
#include "worker.h"

#define PY_REPLY_MS 10000
#define PY_NONE_MS  4  /* asks again this soon when no task is free */
#define PY_POLL_MS  20 /* the staging slot looked at, UCX progressed, this often */
/* The most a staging pool's first Python worker takes to start: the pool's
 * wait for its zygote (30 s), then a fresh interpreter's start. */
#define PY_WARM_MS 60000

struct pyproc {
	struct gm_remote_net net;
	struct m_lease lease;
	bool lease_in;
	uint32_t rows;
	uint32_t ids[GM_MAX_BATCH + GM_BIND_IDS_HDR];
	unsigned char *out; /* a BATCH's payload: err words, records, payload */
	size_t out_cap;
	struct m_batch_out b; /* its header (stamped), kept until the send completes */
	bool sending;	      /* the last BATCH's send has not completed */
	/* its lender's pace (py_pace): the blob's fd, kept for it alone */
	int bfd;
	uint32_t pace_milli, pace_least;
	double credit;		  /* gm_policy_pace_step's bucket */
	uint64_t wall_ns, cpu_ns; /* at the last step */
	uint64_t slept_ns, batches;
};

static volatile sig_atomic_t py_retire;

static void on_usr1(int sig)
{
	(void)sig;
	py_retire = 1;
}

static void on_msg(void *owner, struct conn *c, int id, const void *hdr, const void *data,
		   size_t len, bool rndv)
{
	struct pyproc *r = owner;
	const struct m_lease *l = hdr;
	(void)rndv;
	if (id == AM_LENT)
		return;
	if (id == AM_BYE) {
		char why[GM_BYE_WORDS];
		gm_remote_check_bye(hdr, why);
		gm_remote_conn_kill(c, "its home ended it: %s", why);
		return;
	}
	if (id != AM_LEASE || !c->outgoing) {
		gm_remote_conn_kill(c, "%s: message %d is not for a remote worker", c->ip, id);
		return;
	}
	if (!gm_remote_check_pylease(l, len, r->rows)) {
		gm_remote_conn_kill(c, "%s: malformed lease (status %d, %u samples, %zu bytes)",
				    c->ip, l->status, l->nb, len);
		return;
	}
	memcpy(r->ids, data, len);
	r->lease = *l;
	r->lease_in = true;
}

static bool is_set(const void *flag)
{
	return *(const volatile bool *)flag; /* set by on_msg or sent, inside the progress */
}

static bool is_clear(const void *flag)
{
	return !is_set(flag);
}

/* A lease: 0 with r->lease (status 0), -ENODATA (no more), or -errno. */
static int claim(struct pyproc *r, struct conn *c)
{
	for (;;) {
		struct m_claim m = {0};
		r->lease_in = false;
		int rc = gm_remote_conn_send(c, AM_CLAIM, &m, sizeof(m), NULL, 0);
		if (!rc)
			rc = gm_remote_net_wait(&r->net, c, is_set, &r->lease_in, PY_REPLY_MS);
		if (rc)
			return rc;
		if (r->lease.status != -EAGAIN)
			return r->lease.status;
		if (py_retire)
			return -ENODATA;
		struct timespec ts = {0, PY_NONE_MS * 1000000L};
		nanosleep(&ts, NULL);
	}
}

/* Wait for the staging task's batch, progressing UCX (the home's messages,
 * the endpoint's liveness). The slot, or -errno with err. */
static int wait_batch(struct pyproc *r, struct conn *c, struct gm_bind_pool *p, uint64_t task,
		      char *err, size_t errlen)
{
	for (;;) {
		ucp_worker_progress(r->net.w);
		if (c->st == C_DEAD)
			return -ECONNRESET;
		int rc = gm_bind_pool_next(p, task, PY_POLL_MS, err, errlen);
		if (rc != -ETIMEDOUT && rc != -EINTR)
			return rc;
	}
}

static void sent(void *req, ucs_status_t st, void *user)
{
	(void)st; /* a failed send: the endpoint's error ends the connection */
	*(bool *)user = false;
	ucp_request_free(req);
}

/* Progress until the last BATCH's send completed (its buffer is ours again),
 * or c died. */
static int drain(struct pyproc *r, struct conn *c)
{
	return gm_remote_net_wait(&r->net, c, is_clear, &r->sending, -1);
}

/* A BATCH over 64 KiB whose records fit in the slot after its payload goes
 * by rendezvous (r->b.h.tail: payload first), received straight into the slot
 * (no copy of UCX's fragments or of ours at the home: what a CPU-poor home
 * wants for 19 MB float batches); others eager. Sent from r->out, which stays
 * ours until the send completes (drain). 0 or -errno. */
static int send_batch(struct pyproc *r, struct conn *c, size_t len)
{
	ucp_request_param_t rp = {
	    .op_attr_mask =
		UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
	    .flags = UCP_AM_SEND_FLAG_REPLY |
		     (r->b.h.tail ? UCP_AM_SEND_FLAG_RNDV : UCP_AM_SEND_FLAG_EAGER),
	    .cb.send = sent,
	    .user_data = &r->sending,
	};
	if (c->st == C_DEAD || !c->ep)
		return -ECONNRESET;
	void *p = ucp_am_send_nbx(c->ep, AM_BATCH, &r->b, sizeof(r->b), r->out, len, &rp);
	if (UCS_PTR_IS_ERR(p)) {
		gm_remote_conn_kill(c, "send failed: %s", ucs_status_string(UCS_PTR_STATUS(p)));
		return -ECONNRESET;
	}
	r->sending = p != NULL;
	return 0;
}

#ifdef GM_REMOTE_TESTING
/* The test build's misbehaviours (worker.c names them), once a batch (a
 * complete one: its container whole) is about to go: its payload pl. */
static void mis_batch(struct m_batch *b, unsigned char *pl)
{
	if (b->status || b->size < 64)
		return;
	uint64_t v;
	uint32_t k;
	if (gm_remote_misbehave("py-magic"))
		pl[23] ^= 0x20; /* "GMPYSLOT" -> "GMPYSLOt" */
	if (gm_remote_misbehave("py-total")) {
		v = b->size + 64;
		memcpy(pl, &v, 8);
	}
	if (gm_remote_misbehave("py-tree"))
		memcpy(pl + 8, &b->size, 8); /* 64 + size: past its end */
	if (gm_remote_misbehave("py-batch")) {
		memcpy(&k, pl + 28, 4);
		k++;
		memcpy(pl + 28, &k, 4);
	}
	if (gm_remote_misbehave("py-norec") && !b->n_recs)
		b->status = -EBADMSG;
}

static bool mis_silent(void)
{
	return gm_remote_misbehave("py-silent");
}

/* py-silent: the lease held, no batch, until the home ends the connection
 * (120 s at most). */
static int mis_wait(struct pyproc *r, struct conn *c)
{
	static const bool never = false;
	int rc = gm_remote_net_wait(&r->net, c, is_set, &never, 120000);
	return rc ? rc : -ECONNRESET;
}
#else
static void mis_batch(struct m_batch *b, unsigned char *pl)
{
	(void)b, (void)pl;
}

static bool mis_silent(void)
{
	return false;
}

static int mis_wait(struct pyproc *r, struct conn *c)
{
	(void)r, (void)c;
	return -ENOSYS;
}
#endif

/* The ready staging slot as a BATCH to the home. 0 or -errno. */
static int ship(struct pyproc *r, struct conn *c, struct gm_bind_pool *p, uint32_t slot)
{
	struct gm_ring *ring = gm_bind_pool_ring(p);
	const struct gm_slot_ctl *ctl = gm_ring_ctl(ring, slot);
	uint32_t words = (r->rows + 63) / 64;
	uint64_t cap, size = 0;
	const unsigned char *pl = gm_bind_pool_payload(p, slot, &cap);
	struct m_batch b = {.task = r->lease.task,
			    .vpid = r->lease.vpid,
			    .nb = r->lease.nb,
			    .status = gm_bind_pool_status(p, slot),
			    .n_recs =
				ctl->n_recs < GM_RING_MAX_ERRS ? ctl->n_recs : GM_RING_MAX_ERRS,
			    .words = words};
	if (drain(r, c))
		return -ECONNRESET;
	memcpy(&size, pl, sizeof(size)); /* the payload's first 8 bytes: its size */
	b.size = b.status == -EMSGSIZE ? 8 : size >= 8 && size <= cap ? size : 0;
	size_t head = (size_t)words * 8 + b.n_recs * sizeof(struct gm_slot_err);
	b.tail = head + b.size > 65536 && head + b.size <= cap;
	if (head + b.size > r->out_cap) {
		free(r->out);
		r->out_cap = head + b.size;
		if (!(r->out = malloc(r->out_cap))) {
			r->out_cap = 0;
			return -ENOMEM;
		}
	}
	unsigned char *h = r->out + (b.tail ? b.size : 0);
	_Atomic uint64_t *err = gm_ring_err_bits(ring, slot);
	for (uint32_t q = 0; q < words; q++) {
		uint64_t w = atomic_load_explicit(&err[q], memory_order_acquire);
		memcpy(h + (size_t)q * 8, &w, 8);
	}
	memcpy(h + (size_t)words * 8, ctl->errs, b.n_recs * sizeof(struct gm_slot_err));
	memcpy(r->out + (b.tail ? 0 : head), pl, b.size);
	mis_batch(&b, r->out + (b.tail ? 0 : head));
	r->b.h = b;
	gm_remote_msg_stamp(AM_BATCH, &r->b.st);
	return send_batch(r, c, head + b.size);
}

/* The staging pool of one Python worker (and its zygote), started with every
 * slot parked (the first lease's batch comes with gm_bind_pool_give). 0 or
 * -errno with err. */
static int staging(struct gm_bind_pool **p, const struct wblob *b, const char *const *argv,
		   const char *const *zargv, int spec_fd, char *err, size_t errlen)
{
	struct gm_bind_pool_cfg cfg = {.argv = argv,
				       .workers = 1,
				       .slots = 1,
				       .batch_max = b->rows - GM_BIND_IDS_HDR,
				       .payload_bytes = (uint64_t)b->rows * b->sample_bytes,
				       .first_task = 0,
				       .end_task = GM_RING_NO_END,
				       .lease_timeout_ms = b->lease_ms,
				       .zygote_argv = zargv,
				       .spec_fd = spec_fd};
	int rc = gm_bind_pool_create(p, &cfg, err, errlen);
	/* One batch in flight, always in slot 0: a ring has at least GM_MIN_SLOTS
	 * slots, and the others stay parked (never given: no worker claims them);
	 * staging task k * nslots is the k-th lease's (gm_bind_pool_give of task 0
	 * for the first, then gm_bind_pool_release of slot 0 gives task + nslots). */
	if (!rc)
		rc = gm_bind_pool_start(*p, err, errlen);
	return rc;
}

/* Until the staging pool's Python worker runs (the pool forks it from its
 * zygote once the zygote has loaded the interpreter, torch and the spec:
 * seconds), progressing UCX: the first claim comes after, so a lease's
 * deadline (the home's, from its claim) is the batch's time alone, as a
 * local worker's. 0, -ECONNRESET, -ENODATA (retired meanwhile), or
 * -ETIMEDOUT with err. */
static int warm(struct pyproc *r, struct conn *c, struct gm_bind_pool *p, char *err, size_t errlen)
{
	int64_t end = gm_now_ms() + PY_WARM_MS;
	for (;;) {
		uint64_t st[5];
		gm_bind_pool_stats(p, st);
		if (st[0] >= 1)
			return 0;
		while (ucp_worker_progress(r->net.w))
			;
		if (c->st == C_DEAD)
			return -ECONNRESET;
		if (py_retire) /* retired first (the job ended): nothing to say */
			return -ENODATA;
		if (gm_now_ms() >= end) {
			gm_errf(err, errlen, "no Python worker started in %d ms", PY_WARM_MS);
			return -ETIMEDOUT;
		}
		struct timespec ts = {0, PY_POLL_MS * 1000000L};
		nanosleep(&ts, NULL);
	}
}

/* On-CPU time of the staging pool's Python workers (gm_host_proc_cpu_ns), ns;
 * a worker replaced restarts its count, which py_pace reads as no time spent. */
static uint64_t py_cpu_ns(const struct gm_bind_pool *p)
{
	int pids[4];
	int n = gm_bind_pool_pids(p, pids, 4);
	uint64_t ns = 0;
	for (int i = 0; i < n; i++) {
		uint64_t c = gm_host_proc_cpu_ns(NULL, pids[i]);
		ns += c != UINT64_MAX ? c : 0;
	}
	return ns;
}

/* Before each claim: the share of a core its lender lets it spend (the blob's
 * pace_milli, which the lender writes again as its own jobs' idle cores and
 * its guests change, lender.c; worker.c's read_pace for a C job's guest). The
 * Python worker makes a batch whole, so its time is paid for between batches:
 * gm_policy_pace_step's bucket over the worker's CPU time since the last step,
 * then a sleep (UCX progressed, retirement and a dead connection heard) before
 * the next claim: the lease's deadline, from the claim, is not spent on it. */
static void py_pace(struct pyproc *r, struct conn *c, const struct gm_bind_pool *p)
{
	uint32_t milli = 0;
	if (r->bfd < 0 || pread(r->bfd, &milli, sizeof(milli),
				offsetof(struct wblob, pace_milli)) != (ssize_t)sizeof(milli))
		milli = 0;
	milli = milli < 1000 ? milli : 0;
	uint64_t wall = gm_now_ns(), cpu = py_cpu_ns(p);
	double dw = r->wall_ns ? (double)(wall - r->wall_ns) : 0;
	double dc = r->cpu_ns && cpu > r->cpu_ns ? (double)(cpu - r->cpu_ns) : 0;
	r->wall_ns = wall, r->cpu_ns = cpu;
	if (milli && (!r->pace_least || milli < r->pace_least))
		r->pace_least = milli;
	r->pace_milli = milli;
	double ns = gm_policy_pace_step(&r->credit, dw, dc, milli);
	uint64_t end = wall + (uint64_t)(ns < 5e9 ? ns : 5e9); /* read again within 5 s */
	while (gm_now_ns() < end && c->st != C_DEAD && !py_retire)
		if (!ucp_worker_progress(r->net.w)) {
			struct timespec ts = {0, 1000000};
			nanosleep(&ts, NULL);
		}
	r->slept_ns += gm_now_ns() - wall;
}

/* Lease, make, ship, until no task is left, retired or cut off. */
static int py_loop(struct pyproc *r, struct conn *c, const struct wblob *b, const char *const *argv,
		   const char *const *zargv, int spec_fd)
{
	struct gm_bind_pool *p = NULL;
	char err[512] = "";
	uint64_t task = 0;
	int slot = -1;
	int rc = staging(&p, b, argv, zargv, spec_fd, err, sizeof(err));
	if (!rc)
		rc = warm(r, c, p, err, sizeof(err));
	while (!rc && !py_retire) {
		py_pace(r, c, p);
		if (py_retire || c->st == C_DEAD)
			break;
		rc = claim(r, c);
		if (rc)
			break;
		if (mis_silent()) {
			rc = mis_wait(r, c);
			break;
		}
		struct gm_bind_batch batch = {.epoch = r->ids[0],
					      .batch = r->ids[1],
					      .idx = r->ids + GM_BIND_IDS_HDR,
					      .n = r->lease.nb};
		if (slot < 0)
			rc = gm_bind_pool_give(p, 0, &batch);
		else
			rc = gm_bind_pool_release(p, (uint32_t)slot, &batch);
		if (!rc && slot >= 0)
			task += gm_bind_pool_slots(p);
		if (!rc)
			rc = slot = wait_batch(r, c, p, task, err, sizeof(err));
		if (rc >= 0)
			rc = ship(r, c, p, (uint32_t)slot);
		r->batches += rc >= 0;
	}
	if (r->pace_least)
		gm_log("remote worker",
		       "for %s: %" PRIu64 " batches; paced by its lender to %.3f of a core at "
		       "least, %.1f s spent waiting for its pace",
		       b->home_addr, r->batches, r->pace_least / 1000.0, (double)r->slept_ns / 1e9);
	if (rc && rc != -ENODATA)
		gm_log("remote worker", "for %s: %s%s%s", b->home_addr, strerror(-rc),
		       err[0] ? ": " : "", err[0] ? err : c->why);
	drain(r, c); /* the last batch's send completes before the endpoint closes */
	gm_bind_pool_destroy(p);
	return rc == -ENODATA ? 0 : rc;
}

/* The spec (after the blob in fd) into a sealed memfd of its own: the
 * Python workers' fd 5, without the blob's key. The fd, or -errno. */
static int spec_memfd(const struct wblob *b, int fd)
{
	int sfd = memfd_create("goldminer-spec", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	unsigned char buf[65536];
	if (sfd < 0)
		return -errno;
	for (uint64_t off = 0; off < b->spec_len;) {
		size_t want = b->spec_len - off < sizeof(buf) ? b->spec_len - off : sizeof(buf);
		ssize_t k = pread(fd, buf, want, (off_t)(sizeof(*b) + off));
		if (k <= 0 || write(sfd, buf, (size_t)k) != k) {
			close(sfd);
			return k < 0 ? -errno : -EIO;
		}
		off += (uint64_t)k;
	}
	if (fcntl(sfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL)) {
		close(sfd);
		return -errno;
	}
	return sfd;
}

int gm_remote_pywork_main(const struct wblob *b, int fd)
{
	struct sigaction sa = {.sa_handler = on_usr1};
	struct gm_remote_py_facts f;
	struct pyproc *r = calloc(1, sizeof(*r));
	struct conn *c = NULL;
	const char *zargv[GM_NODE_CMD_ARGS + 2];
	char err[512] = "";
	int sfd = spec_memfd(b, fd), rc = sfd < 0 ? sfd : 0;
	/* the blob's fd stays open for the pace alone (py_pace), close-on-exec:
	 * it holds the key, which the Python workers (exec'ed) never see */
	if (fcntl(fd, F_SETFD, FD_CLOEXEC))
		rc = rc ? rc : -errno;
	sigaction(SIGUSR1, &sa, NULL);
	if (!r)
		rc = -ENOMEM;
	else
		r->bfd = fd;
	if (!rc)
		rc = gm_remote_py_facts(b->req.root, sizeof(b->req.root), &f, err, sizeof(err));
	if (!rc) {
		for (int k = 0; k < f.argc; k++)
			zargv[k] = f.argv[k];
		zargv[f.argc] = "--zygote";
		zargv[f.argc + 1] = NULL;
		r->rows = b->rows;
		r->net.key = b->key;
		r->net.verbose = 1;
		r->net.on_msg = on_msg;
		r->net.owner = r;
		r->net.epfd = -1;
		r->net.unguarded_ok = b->unguarded == 1;
		struct sockaddr_storage ss; /* UCX's own sockets here admit the home only */
		socklen_t sl;
		rc = gm_remote_parse_addr(b->home_addr, &ss, &sl, r->net.allowed[0],
					  INET6_ADDRSTRLEN);
		r->net.nallowed = 1;
	}
	if (!rc)
		rc = gm_remote_net_init(&r->net, true, err, sizeof(err));
	gm_remote_worker_drop_admin(); /* its guard is set: the job's pickles get none */
	if (!rc)
		rc = gm_remote_ctl_connect(&r->net, b->home_addr, b->token, b->lport, b->sid, &c,
					   err, sizeof(err));
	if (rc)
		gm_log("remote worker", "for %s: %s", b->home_addr, err[0] ? err : strerror(-rc));
	if (!rc)
		rc = py_loop(r, c, b, f.argv, zargv, sfd);
	if (c)
		gm_remote_conn_free(&r->net, c);
	if (r) {
		gm_remote_net_fini(&r->net);
		free(r->out);
		memset(&r->net.key, 0, sizeof(r->net.key));
	}
	free(r);
	close(fd);
	if (sfd >= 0)
		close(sfd);
	return rc;
}
