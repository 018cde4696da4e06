/*
 * worker.c - a remote worker process (worker.h): `goldminer node --remote-worker
 * FD`, exec'ed by a lending agent for a peer's job, making that job's batches
 * on this host and shipping them to the job's home.
 *
 * The idea: the process is a stateless data worker (worker.h's gm_worker, the
 * same code as a local worker) that writes into a private two-slot mirror ring
 * instead of the job's ring. It connects to the home with its own UCP context
 * (made after the exec) and loops: CLAIM -> LEASE (slot, task, the done bits of
 * what the home already has) -> decode the batch into the mirror slot, the
 * done samples skipped -> one SAMPLE per sample it made (header: lease,
 * position, label, id, a bad file's record; data: the pixels) -> PUBLISH (err
 * bits, records, timings). Samples go eager, or by rendezvous when
 * GOLDMINER_REMOTE_RNDV=1. It double-buffers: the other mirror slot is decoded
 * while this one's sends complete. With eager samples it claims its next
 * lease as it starts a batch, so the claim's round trip is hidden behind the
 * making (the home holds that one until this one's publish, and gives
 * none ahead where its ring is small: home.c); by
 * rendezvous a publish may wait at the home for its samples, and the claim
 * waits with it, so there it claims after the publish. It holds no state of an agent's: its own
 * connection layer (conn.h), its lease, two scratch buffers.
 *
 * What it receives is checked where it lands (a LEASE: its status, and its
 * size against its task's batch). The test build (-DGM_REMOTE_TESTING) adds a
 * worker that misbehaves on request (after ship()); the installed plugin has
 * none of it.
 *
 * Not here: any check of what it sends (the home checks every message against
 * the lease it holds, home.c and check.c), forking and retiring (lender.c).
 */

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <linux/capability.h>
#include <ucp/api/ucp.h>

#include "check.h"
#include "conn.h"
#include "ctl.h"
#include "goldminer/aug.h"
#include "goldminer/dataset.h"
#include "goldminer/job.h"
#include "goldminer/limits.h"
#include "goldminer/pool.h"
#include "goldminer/ring.h"
#include "goldminer/util.h"
#include "goldminer/wire.h"
#include "goldminer/worker.h"
#include "msg.h"
#include "worker.h"

#define REPLY_MS 10000
/* A remote worker told no batch is free asks again NONE_WAIT_MS later, twice
 * as late each time it is told so again, up to NONE_WAIT_MAX_MS (the home's
 * ring then holds at least two batches per remote worker, each a batch period
 * of its trainer's, so a slot freed is taken before the trainer runs dry). At
 * 4 ms flat, seed 107's guests, "no batch free" 70-95% of their time, sent a
 * 0.15-core home a thousand or more claims a second between them; each spun
 * meanwhile at 200 us sleeps, and a lent image cost its lender 520-775 us of
 * CPU, 390 of them making it. */
#define NONE_WAIT_MS	 4
#define NONE_WAIT_MAX_MS 32

/* The remote worker process: its connection layer and the lease it holds. */
struct wproc {
	struct gm_remote_net net;
	struct m_lease lease, next; /* the one it makes; the reply that came */
	bool lease_in;
	uint32_t batch, bpe, lease_ms; /* the job's, to check a lease against */
	uint64_t nsamples;
	/* aligned copies of a message's payload (done words; err words + records) */
	uint64_t scratch[GM_MAX_BATCH / 64], next_scratch[GM_MAX_BATCH / 64];
	uint64_t
	    scratch2[GM_MAX_BATCH / 64 + GM_RING_MAX_ERRS * sizeof(struct gm_slot_err) / 8 + 1];
	/* where its time went (said when it ends): batches made, ns waiting for
	 * a lease (claim to reply), told no batch is free (the job's ring is
	 * full: its trainer has what it takes), making batches, waiting for the
	 * sends of a mirror slot to complete, and the CPU it used making them */
	uint64_t batches, samples, lease_ns, none_ns, make_ns, drain_ns, make_cpu_ns, start_ns;
	uint64_t start_cpu_ns; /* its CPU clock when the loop began: per sample, all of it */
	/* its blob's memfd (fd 3, -1: none), where its lender writes its pace,
	 * read before each batch; the pace now and the least it was given */
	int bfd;
	uint32_t pace_milli, pace_least;
	struct gm_ring *mirror; /* (a BYE unpaces the batch it makes: it is dropped) */
};

/* ---- the job's configuration ------------------------------------------------- */

/* The batches of the job that req describes, over index ds: its worker
 * configuration, as a pool of the home would make it. 0 or -errno with why. */
int gm_remote_job_batches(const struct gm_node_req *req, const struct gm_dataset *ds,
			  struct gm_pool_cfg *pc, char *why, size_t wl)
{
	struct gm_loader_opts o;
	struct gm_node_req rq = *req;
	uint64_t first, end;
	uint32_t bpe;
	char e[768];
	rq.root[sizeof(rq.root) - 1] = '\0';
	gm_wire_request_opts(&rq, &o);
	int rc = gm_pool_check(&o, e, sizeof(e));
	if (!rc)
		rc = gm_pool_tasks(&o, ds, &bpe, &first, &end, e, sizeof(e));
	if (rc) {
		copy_str(why, wl, e);
		return rc;
	}
	gm_pool_cfg_init(pc, &o, ds, bpe, first, end);
	return 0;
}

/* The job's worker configuration from a blob: the same dataset path here, its
 * fingerprint equal to the home's. 0 or -errno with why (*ds then NULL). */
int gm_remote_worker_job_cfg(struct gm_dataset **ds, struct gm_pool_cfg *pc, const struct wblob *b,
			     char *why, size_t wl)
{
	struct gm_loader_opts o;
	struct gm_node_req req = b->req;
	char e[768];
	req.root[sizeof(req.root) - 1] = '\0';
	gm_wire_request_opts(&req, &o);
	int rc = gm_pool_check(&o, e, sizeof(e));
	if (!rc)
		rc = gm_dataset_open(ds, o.root, e, sizeof(e));
	if (rc) {
		copy_str(why, wl, e);
		return rc;
	}
	if (gm_dataset_fingerprint(*ds) != b->fingerprint || gm_dataset_count(*ds) != b->nsamples) {
		gm_errf(why, wl,
			"the dataset at %.80s differs on this host (fingerprint %016" PRIx64
			", %u samples; the job's: %016" PRIx64 ", %" PRIu64 "): every host needs "
			"the same files at the same path",
			o.root, gm_dataset_fingerprint(*ds), gm_dataset_count(*ds), b->fingerprint,
			b->nsamples);
		rc = -ESTALE;
	} else {
		rc = gm_remote_job_batches(&req, *ds, pc, why, wl);
		if (!rc && pc->w.batches_per_epoch != b->bpe) {
			copy_str(why, wl, "the job's batches differ here");
			rc = -ESTALE;
		}
	}
	if (rc) {
		gm_dataset_close(*ds);
		*ds = NULL;
		return rc;
	}
	pc->lease_timeout_ms = b->lease_ms;
	return 0;
}

/* ---- the process ------------------------------------------------------------- */

static volatile sig_atomic_t w_retire;

static void on_usr1(int sig)
{
	(void)sig;
	w_retire = 1;
}

/* What the worker's lease reply said (its done words are in r->scratch). */
static void on_lease(struct wproc *r, struct conn *c, const struct m_lease *l, const void *data,
		     size_t len)
{
	if (!c->outgoing) {
		gm_remote_conn_kill(c, "%s: unexpected lease", c->ip);
		return;
	}
	if (r->lease_in ||
	    !gm_remote_check_lease(l, len, r->batch, r->bpe, r->nsamples, sizeof(r->scratch))) {
		gm_remote_conn_kill(c, "%s: malformed lease (status %d, %u samples, %zu bytes)",
				    c->ip, l->status, l->nb, len);
		return;
	}
	memcpy(r->next_scratch, data, len); /* (the lease being made keeps its own) */
	r->next = *l;
	r->lease_in = true;
}

/* The messages after the handshake: a remote worker is sent only LEASE (a LENT,
 * an agent's answer, is dropped as an agent that did not ask drops it). */
static void on_msg(void *owner, struct conn *c, int id, const void *hdr, const void *data,
		   size_t len, bool rndv)
{
	struct wproc *r = owner;
	(void)rndv;
	if (id == AM_LEASE) {
		on_lease(r, c, hdr, data, len);
	} else if (id == AM_BYE) {
		char why[GM_BYE_WORDS];
		gm_remote_check_bye(hdr, why);
		gm_remote_conn_kill(c, "its home ended it: %s", why);
		/* the batch it makes goes nowhere now: out of its pace, it ends at
		 * once (a batch paced to the least takes seconds) */
		if (r->mirror)
			atomic_store_explicit(&gm_ring_hdr(r->mirror)->a_pace_milli, 0,
					      memory_order_relaxed);
	} else if (id != AM_LENT)
		gm_remote_conn_kill(c, "%s: message %d is not for a remote worker", c->ip, id);
}

static void wprogress(void *arg)
{
	struct wproc *r = arg;
	ucp_worker_progress(r->net.w);
}

static bool is_set(const void *flag)
{
	return *(const volatile bool *)flag; /* set by on_msg, inside the progress */
}

struct wsend {
	unsigned inflight[2];	     /* sends of each mirror slot not yet completed */
	struct m_sample_out *hdr[2]; /* each one stamped (msg.h) */
};

/* Samples go eager (the home copies each one from UCX's buffer: over TCP the
 * fastest, measured by tests/bench/bench-remote.sh: 2,045-2,197 img/s against
 * 1,147-1,541 by rendezvous, whose handshake per sample costs a round trip to
 * a CPU-poor home) unless $GOLDMINER_REMOTE_RNDV=1: then by rendezvous, received
 * straight into the slot (what an RDMA fabric wants: no copy at the home). */
static bool rndv_samples(void)
{
	static int on = -1;
	if (on < 0) {
		const char *e = getenv("GOLDMINER_REMOTE_RNDV");
		on = e && !strcmp(e, "1");
	}
	return on;
}

static void sample_done(void *req, ucs_status_t st, void *user)
{
	(void)st;
	(*(unsigned *)user)--;
	ucp_request_free(req);
}

static void mis_stamp(struct m_stamp *st); /* the test build's (below) */

static int send_sample(struct conn *c, struct m_sample_out *h, const void *px, size_t len,
		       unsigned *inflight)
{
	gm_remote_msg_stamp(AM_SAMPLE, &h->st);
	mis_stamp(&h->st);
	ucp_request_param_t rp = {
	    .op_attr_mask =
		UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
	    .flags = UCP_AM_SEND_FLAG_REPLY |
		     (rndv_samples() ? UCP_AM_SEND_FLAG_RNDV : UCP_AM_SEND_FLAG_EAGER),
	    .cb.send = sample_done,
	    .user_data = inflight,
	};
	void *p = ucp_am_send_nbx(c->ep, AM_SAMPLE, h, sizeof(*h), px, len, &rp);
	if (UCS_PTR_IS_ERR(p)) {
		gm_remote_conn_kill(c, "send failed: %s", ucs_status_string(UCS_PTR_STATUS(p)));
		return -ECONNRESET;
	}
	if (p)
		(*inflight)++;
	return 0;
}

/* Position i of the mirror slot is one this worker made (not one the lease
 * said was done). */
static bool made_here(const struct wproc *r, struct gm_ring *m, uint32_t slot, uint32_t i)
{
	uint64_t bit = 1ull << (i % 64);
	return (atomic_load(&gm_ring_done_bits(m, slot)[i / 64]) & bit) &&
	       !(r->scratch[i / 64] & bit);
}

/* The header of the sample at position i; *nbad: the bad ones made before it. */
static void sample_header(const struct wproc *r, struct gm_ring *m, uint32_t slot, uint32_t i,
			  uint32_t *nbad, struct m_sample *h)
{
	const struct m_lease *l = &r->lease;
	const struct gm_slot_ctl *ctl = gm_ring_ctl(m, slot);
	uint64_t bit = 1ull << (i % 64);
	*h = (struct m_sample){.task = l->task,
			       .vpid = l->vpid,
			       .pos = i,
			       .id = gm_ring_ids(m, slot)[i],
			       .bad = !!(atomic_load(&gm_ring_err_bits(m, slot)[i / 64]) & bit),
			       .label = gm_ring_labels(m, slot)[i]};
	/* the worker recorded its bad samples in position order (handle_bad), so
	 * the k-th bad one it made has the k-th record (keyed by the bad file's
	 * id: the slot holds the substitute's); past GM_RING_MAX_ERRS, none */
	if (h->bad && *nbad < ctl->n_recs) {
		h->rec = ctl->errs[*nbad];
		h->has_rec = 1;
	}
	*nbad += h->bad;
}

static bool mis_lease(void);
static bool mis_claim(void);
static void mis_sample(const struct wproc *r, struct m_sample *h);
static void mis_publish(struct gm_ring *m, uint32_t slot, struct m_publish *p, unsigned char *recs);
static int mis_ship(struct wproc *r, struct conn *c, struct gm_ring *m, uint32_t slot,
		    struct wsend *ws, size_t sb);

/* The batch is complete (or failed): its err bits, records and timings. */
static int publish(struct wproc *r, struct conn *c, struct gm_ring *m, uint32_t slot)
{
	const struct m_lease *l = &r->lease;
	uint32_t words = (gm_ring_hdr(m)->batch_size + 63) / 64;
	_Atomic uint64_t *err = gm_ring_err_bits(m, slot);
	struct gm_slot_ctl *ctl = gm_ring_ctl(m, slot);
	struct m_publish p = {.task = l->task,
			      .vpid = l->vpid,
			      .nb = l->nb,
			      .status = ctl->status,
			      .n_recs = ctl->n_recs,
			      .words = words,
			      .ns = {ctl->read_ns, ctl->decode_ns, ctl->augment_ns, ctl->write_ns},
			      .read_bytes = ctl->read_bytes,
			      .preempt_ns = ctl->preempt_ns};
	unsigned char *buf = (unsigned char *)r->scratch2;
	for (uint32_t q = 0; q < words; q++) {
		uint64_t e = atomic_load(&err[q]);
		memcpy(buf + q * 8, &e, 8);
	}
	memcpy(buf + words * 8, ctl->errs, ctl->n_recs * sizeof(struct gm_slot_err));
	mis_publish(m, slot, &p, buf + words * 8);
	return gm_remote_conn_send(c, AM_PUBLISH, &p, sizeof(p), buf,
				   words * 8 + p.n_recs * sizeof(struct gm_slot_err));
}

/* Send the samples this worker made and the publish; the mirror slot stays
 * untouched until its sends complete. */
static int ship(struct wproc *r, struct conn *c, struct gm_ring *m, uint32_t slot, struct wsend *ws,
		size_t sb)
{
	const uint8_t *px = gm_ring_data(m, slot);
	uint32_t nbad = 0;
	bool first = true;
	if (mis_lease())
		return mis_ship(r, c, m, slot, ws, sb);
	if (mis_claim()) {
		struct m_claim cl = {0};
		for (int k = 0; k < 2; k++)
			if (gm_remote_conn_send(c, AM_CLAIM, &cl, sizeof(cl), NULL, 0))
				return -ECONNRESET;
	}
	for (uint32_t i = 0; i < r->lease.nb; i++) {
		if (!made_here(r, m, slot, i))
			continue;
		struct m_sample_out *h = &ws->hdr[slot][i];
		sample_header(r, m, slot, i, &nbad, &h->h);
		if (first)
			mis_sample(r, &h->h);
		first = false;
		if (send_sample(c, h, px + (uint64_t)i * sb, sb, &ws->inflight[slot]))
			return -ECONNRESET;
	}
	return publish(r, c, m, slot);
}

#ifdef GM_REMOTE_TESTING
/*
 * Misbehaving on request, in the test build only: tests/test_remote.sh runs a
 * peer agent with the plugin built from this file with -DGM_REMOTE_TESTING
 * (build/tests/libgoldminer-remote-test.so, never installed) and
 * $GOLDMINER_REMOTE_MISBEHAVE naming one way to break the protocol in a lease:
 * status=N (its publish's status), rec-out (its publish names a bad sample
 * outside the lease), rec-big (its first sample's record names an id past the
 * dataset), label (its first sample's label is 999999), id (its first sample
 * has the next id), resend (its first sample again every 0.4 deadline, never a
 * publish), trickle (one sample every 0.4 deadline), claim (two claims more
 * as it ships: a third lease while it holds one and one ahead), layout (a
 * sample stamped as another build's layout of SAMPLE would be); a Python
 * job's worker (pywork.c, gm_remote_misbehave) py-magic, py-total, py-tree,
 * py-batch (its batch's container: a wrong magic, a total not its size, a
 * tree past its end, the next batch index), py-norec (a failed status, no
 * error record), py-silent (no batch, ever). Every lease does so, or
 * with $GOLDMINER_REMOTE_MISBEHAVE_ONCE=FILE only the first one, whose worker
 * creates FILE (the test's proof that it happened).
 */
#include <fcntl.h>

enum mis_mode {
	MIS_NONE,
	MIS_STATUS,
	MIS_REC_OUT,
	MIS_REC_BIG,
	MIS_LABEL,
	MIS_ID,
	MIS_RESEND,
	MIS_TRICKLE,
	MIS_CLAIM,
	MIS_LAYOUT
};
static enum mis_mode mis_mode;
static int32_t mis_status;

static void mis_init(void)
{
	static const char *const names[] = {"",	  "status=", "rec-out", "rec-big", "label",
					    "id", "resend",  "trickle", "claim",   "layout"};
	const char *m = getenv("GOLDMINER_REMOTE_MISBEHAVE");
	for (int k = 1; m && k < (int)(sizeof(names) / sizeof(names[0])); k++)
		if (k == MIS_STATUS ? !strncmp(m, names[k], 7) : !strcmp(m, names[k]))
			mis_mode = (enum mis_mode)k;
	if (mis_mode == MIS_STATUS)
		mis_status = (int32_t)strtol(m + 7, NULL, 10);
}

/* Misbehave now as mode? Yes if that is the mode, and without ..._ONCE, or when
 * this worker is the first to make its file (said on stderr). */
static bool mis_once(void)
{
	const char *once = getenv("GOLDMINER_REMOTE_MISBEHAVE_ONCE");
	int fd = once && *once ? open(once, O_CREAT | O_EXCL | O_WRONLY, 0600) : -2;
	if (fd == -1)
		return false;
	if (fd >= 0)
		close(fd);
	gm_log("remote worker (test build)", "misbehaving (%s)",
	       getenv("GOLDMINER_REMOTE_MISBEHAVE"));
	return true;
}

static bool mis_now(enum mis_mode mode)
{
	return mis_mode != MIS_NONE && mis_mode == mode && mis_once();
}

bool gm_remote_misbehave(const char *mode)
{
	const char *m = getenv("GOLDMINER_REMOTE_MISBEHAVE");
	return m && !strcmp(m, mode) && mis_once();
}

/* At a lease: is it shipped slowly (resend, trickle)? */
static bool mis_lease(void)
{
	return mis_now(MIS_RESEND) || mis_now(MIS_TRICKLE);
}

/* At a lease: does it claim more than it may hold? */
static bool mis_claim(void)
{
	return mis_now(MIS_CLAIM);
}

static void mis_sample(const struct wproc *r, struct m_sample *h)
{
	if (mis_now(MIS_LABEL))
		h->label = 999999;
	if (mis_now(MIS_ID))
		h->id = (uint32_t)((h->id + 1) % r->nsamples);
	if (!mis_now(MIS_REC_BIG))
		return;
	struct gm_slot_err e = {.sample = (uint32_t)r->nsamples + 1000, .err = -EIO};
	copy_str(e.msg, sizeof(e.msg), "test build: a record past the dataset");
	h->bad = h->has_rec = 1;
	h->rec = e;
}

/* A sample stamped as a build whose SAMPLE is in the next layout (msg.h). */
static void mis_stamp(struct m_stamp *st)
{
	if (mis_now(MIS_LAYOUT))
		st->layout++;
}

static bool in_batch(const uint32_t *ids, uint32_t nb, uint32_t id)
{
	for (uint32_t i = 0; i < nb; i++)
		if (ids[i] == id)
			return true;
	return false;
}

static void mis_publish(struct gm_ring *m, uint32_t slot, struct m_publish *p, unsigned char *recs)
{
	if (mis_now(MIS_STATUS))
		p->status = mis_status;
	if (p->n_recs == GM_RING_MAX_ERRS || !mis_now(MIS_REC_OUT))
		return;
	struct gm_slot_err e = {.sample = 0, .err = -EIO};
	copy_str(e.msg, sizeof(e.msg), "test build: a record outside the lease");
	while (in_batch(gm_ring_ids(m, slot), p->nb, e.sample))
		e.sample++;
	memcpy(recs + p->n_recs++ * sizeof(e), &e, sizeof(e));
}

/* resend: the lease's first sample, then the same again every 0.4 deadline,
 * never a publish; trickle: one sample every 0.4 deadline, then the publish.
 * Until the home ends the connection, 120 s at most. */
static int mis_ship(struct wproc *r, struct conn *c, struct gm_ring *m, uint32_t slot,
		    struct wsend *ws, size_t sb)
{
	const uint8_t *px = gm_ring_data(m, slot);
	int64_t end = gm_now_ms() + 120000, pause = r->lease_ms * 2 / 5;
	uint32_t nbad = 0;
	for (uint32_t i = 0; i < r->lease.nb; i++) {
		if (!made_here(r, m, slot, i))
			continue;
		struct m_sample_out *h = &ws->hdr[slot][i];
		sample_header(r, m, slot, i, &nbad, &h->h);
		do {
			if (send_sample(c, h, px + (uint64_t)i * sb, sb, &ws->inflight[slot]))
				return -ECONNRESET;
			for (int64_t t = gm_now_ms() + pause; gm_now_ms() < t && c->st != C_DEAD;)
				if (!ucp_worker_progress(r->net.w))
					usleep(1000);
			if (c->st == C_DEAD)
				return -ECONNRESET;
			if (gm_now_ms() >= end)
				return -ETIMEDOUT;
		} while (mis_mode == MIS_RESEND);
	}
	return publish(r, c, m, slot);
}
#else
static void mis_init(void)
{
}

static bool mis_lease(void)
{
	return false;
}

static bool mis_claim(void)
{
	return false;
}

static void mis_sample(const struct wproc *r, struct m_sample *h)
{
	(void)r, (void)h;
}

static void mis_stamp(struct m_stamp *st)
{
	(void)st;
}

static void mis_publish(struct gm_ring *m, uint32_t slot, struct m_publish *p, unsigned char *recs)
{
	(void)m, (void)slot, (void)p, (void)recs;
}

static int mis_ship(struct wproc *r, struct conn *c, struct gm_ring *m, uint32_t slot,
		    struct wsend *ws, size_t sb)
{
	(void)r, (void)c, (void)m, (void)slot, (void)ws, (void)sb;
	return -ENOSYS;
}
#endif

/* The mirror slot starts from what the home already has of the task. */
static void preset(struct wproc *r, struct gm_ring *m, uint32_t slot)
{
	const struct m_lease *l = &r->lease;
	uint32_t words = (gm_ring_hdr(m)->batch_size + 63) / 64;
	struct gm_slot_ctl *ctl = gm_ring_ctl(m, slot);
	for (uint32_t q = 0; q < words; q++) {
		atomic_store(&gm_ring_done_bits(m, slot)[q], r->scratch[q]);
		atomic_store(&gm_ring_err_bits(m, slot)[q], 0);
	}
	ctl->n_errors = ctl->n_recs = 0;
	ctl->read_ns = ctl->decode_ns = ctl->augment_ns = ctl->write_ns = 0;
	ctl->read_bytes = 0;
	ctl->preempt_ns = 0;
	atomic_store(&ctl->bits_task, l->task + 1);
}

static bool none_left(const void *count)
{
	return !*(const volatile unsigned *)count; /* counted down by sent callbacks */
}

/* Progress until a mirror slot's sends completed (its bytes are ours again). */
static int drain(struct wproc *r, struct conn *c, unsigned *inflight)
{
	return gm_remote_net_wait(&r->net, c, none_left, inflight, REPLY_MS);
}

/* Ask for a lease (the reply lands in r->next: on_lease). */
static int claim(struct wproc *r, struct conn *c)
{
	struct m_claim cl = {0};
	r->lease_in = false;
	return gm_remote_conn_send(c, AM_CLAIM, &cl, sizeof(cl), NULL, 0);
}

/* Wait for the lease claimed, then it is the one made (its done words too). */
static int take_lease(struct wproc *r, struct conn *c)
{
	int rc = gm_remote_net_wait(&r->net, c, is_set, &r->lease_in, REPLY_MS);
	if (rc)
		return rc;
	r->lease = r->next;
	memcpy(r->scratch, r->next_scratch, sizeof(r->scratch));
	return 0;
}

/* Make the lease's batch into the other mirror slot and ship it, the next
 * lease claimed first unless ahead is false. */
static int make(struct wproc *r, struct conn *c, struct gm_worker *w, struct gm_ring *m,
		struct wsend *ws, size_t sb, uint32_t slot, bool ahead)
{
	uint64_t t1 = gm_now_ns();
	int rc = drain(r, c, &ws->inflight[slot]);
	if (!rc && ahead)
		rc = claim(r, c);
	if (rc)
		return rc;
	uint64_t t2 = gm_now_ns(), c2 = gm_cpu_ns();
	preset(r, m, slot);
	rc = gm_worker_produce(w, slot, r->lease.task);
	if (rc) {
		gm_log("remote worker", "batch %" PRIu64 ": %s", r->lease.task, strerror(-rc));
		return rc;
	}
	r->make_cpu_ns += gm_cpu_ns() - c2;
	r->make_ns += gm_now_ns() - t2;
	r->drain_ns += t2 - t1;
	r->batches++;
	r->samples += r->lease.nb;
	return ship(r, c, m, slot, ws, sb);
}

/* The share of a core its lender lets it spend (its blob's pace_milli, which
 * the lender writes again as its own jobs' idle cores and its guests change;
 * lender.c), into its mirror ring's a_pace_milli: worker.c's pacing. */
static void read_pace(struct wproc *r, struct gm_ring *m, uint32_t p)
{
	if (r->bfd >= 0 &&
	    pread(r->bfd, &p, sizeof(p), offsetof(struct wblob, pace_milli)) != (ssize_t)sizeof(p))
		return;
	p = p < 1000 ? p : 0;
	if (p == r->pace_milli)
		return;
	r->pace_milli = p;
	if (p && (!r->pace_least || p < r->pace_least))
		r->pace_least = p;
	atomic_store_explicit(&gm_ring_hdr(m)->a_pace_milli, p, memory_order_relaxed);
}

/* Claim, make, ship until retired, told there is no more, or cut off. A lease
 * claimed ahead is made even when retired meanwhile (the home holds it). */
static int work_loop(struct wproc *r, struct conn *c, struct gm_worker *w, struct gm_ring *m,
		     struct wsend *ws, size_t sb)
{
	uint32_t slot = 0, none_ms = NONE_WAIT_MS;
	bool claimed = false;
	int rc = 0;
	while (!rc && (claimed || !w_retire)) {
		uint64_t t0 = gm_now_ns();
		if (!claimed)
			rc = claim(r, c);
		if (!rc)
			rc = take_lease(r, c);
		if (rc || r->lease.status == -ENODATA)
			break;
		if (r->lease.status == -EAGAIN && claimed) { /* none ahead: ask now */
			claimed = false;
			continue;
		}
		claimed = false;
		if (r->lease.status) {
			int64_t end = gm_now_ms() + none_ms;
			for (int64_t now;
			     (now = gm_now_ms()) < end && c->st != C_DEAD && !w_retire;)
				if (!ucp_worker_progress(r->net.w))
					gm_remote_net_idle(&r->net, (int)(end - now));
			none_ms = none_ms < NONE_WAIT_MAX_MS / 2 ? none_ms * 2 : NONE_WAIT_MAX_MS;
			r->none_ns += gm_now_ns() - t0;
			continue;
		}
		none_ms = NONE_WAIT_MS;
		r->lease_ns += gm_now_ns() - t0;
		claimed = !w_retire && !rndv_samples();
		read_pace(r, m, 0);
		slot ^= 1;
		rc = make(r, c, w, m, ws, sb, slot, claimed);
	}
	if (!rc)
		rc = drain(r, c, &ws->inflight[0]);
	if (!rc)
		rc = drain(r, c, &ws->inflight[1]);
	return rc;
}

/* Where a remote worker's time went, in one line when it ends. */
static void tell_times(const struct wproc *r, const char *home)
{
	double all = (double)(gm_now_ns() - r->start_ns) / 1e9;
	char paced[64] = "";
	if (!r->batches || !(all > 0))
		return;
	if (r->pace_least)
		snprintf(paced, sizeof(paced), "; paced by its lender to %.3f of a core at least",
			 r->pace_least / 1000.0);
	gm_log("remote worker",
	       "for %s: %" PRIu64 " batches, %" PRIu64 " samples in %.1f s (%.0f img/s): "
	       "waiting for leases %.0f%%, no batch free %.0f%%, making %.0f%% (on CPU "
	       "%.0f%% of that), waiting for sends %.0f%%; CPU per sample %.0f us, "
	       "%.0f us of it making%s",
	       home, r->batches, r->samples, all, (double)r->samples / all,
	       (double)r->lease_ns / 1e7 / all, (double)r->none_ns / 1e7 / all,
	       (double)r->make_ns / 1e7 / all,
	       r->make_ns ? 100.0 * (double)r->make_cpu_ns / (double)r->make_ns : 0,
	       (double)r->drain_ns / 1e7 / all,
	       (double)(gm_cpu_ns() - r->start_cpu_ns) / 1e3 / (double)r->samples,
	       (double)r->make_cpu_ns / 1e3 / (double)r->samples, paced);
}

static int worker_run(const struct gm_pool_cfg *pc, const struct wblob *bl, int bfd)
{
	struct sigaction sa = {.sa_handler = on_usr1};
	sigaction(SIGUSR1, &sa, NULL);
	char err[512];
	struct wproc *r = calloc(1, sizeof(*r));
	struct gm_ring *m = NULL;
	/* (r is large: its scratch buffers hold a whole batch's bits) */
	struct gm_worker *w = NULL;
	struct conn *c = NULL;
	struct wsend ws = {{0}, {NULL, NULL}};
	uint32_t b = pc->w.batch_size;
	size_t sb = gm_aug_out_bytes(&pc->w.aug);
	int rc;
	if (!r)
		return -ENOMEM;
	mis_init();
	r->bfd = bfd;
	r->net.key = bl->key;
	r->batch = b;
	r->bpe = bl->bpe;
	r->lease_ms = bl->lease_ms;
	r->nsamples = bl->nsamples;
	r->net.verbose = 1;
	r->net.on_msg = on_msg;
	r->net.owner = r;
	r->net.epfd = -1;
	r->net.unguarded_ok = bl->unguarded == 1;
	err[0] = '\0';
	struct sockaddr_storage ss; /* UCX's own sockets here admit the home only */
	socklen_t sl;
	rc = gm_remote_parse_addr(bl->home_addr, &ss, &sl, r->net.allowed[0], INET6_ADDRSTRLEN);
	r->net.nallowed = 1;
	if (!rc)
		rc = gm_remote_net_init(&r->net, true, err, sizeof(err));
	gm_remote_worker_drop_admin(); /* its guard is set: a peer's job needs none */
	if (!rc)
		rc = gm_remote_ctl_connect(&r->net, bl->home_addr, bl->token, bl->lport, bl->sid,
					   &c, err, sizeof(err));
	if (rc && err[0])
		gm_log("remote worker", "for %s: %s", bl->home_addr, err);
	if (!rc)
		rc = gm_ring_create(&m, 2, b, sb, 0, GM_RING_NO_END);
	r->mirror = m;
	r->pace_milli = UINT32_MAX; /* (none set yet: read_pace sets it) */
	if (!rc)
		read_pace(r, m, bl->pace_milli);
	struct gm_worker_cfg cfg = pc->w;
	cfg.ring = m;
	cfg.on_sample = wprogress;
	cfg.sample_arg = r;
	ws.hdr[0] = calloc(b, sizeof(struct m_sample_out));
	ws.hdr[1] = calloc(b, sizeof(struct m_sample_out));
	if (!rc && (!ws.hdr[0] || !ws.hdr[1]))
		rc = -ENOMEM;
	if (!rc)
		rc = gm_worker_create(&w, &cfg, err, sizeof(err));
	r->start_ns = gm_now_ns();
	r->start_cpu_ns = gm_cpu_ns();
	if (!rc)
		rc = work_loop(r, c, w, m, &ws, sb);
	tell_times(r, bl->home_addr);
	if (rc && rc != -ENODATA)
		gm_log("remote worker", "for %s: %s%s%s", bl->home_addr, strerror(-rc),
		       c && c->why[0] ? ": " : "", c && c->why[0] ? c->why : "");
	gm_worker_destroy(w);
	gm_ring_destroy(m);
	free(ws.hdr[0]);
	free(ws.hdr[1]);
	if (c)
		gm_remote_conn_free(&r->net, c);
	gm_remote_net_fini(&r->net);
	free(r);
	return rc == -ENODATA ? 0 : rc;
}

void gm_remote_worker_drop_admin(void)
{
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
	struct __user_cap_data_struct d[2];
	unsigned w = CAP_NET_ADMIN / 32, bit = 1u << (CAP_NET_ADMIN % 32);
	(void)prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_LOWER, CAP_NET_ADMIN, 0, 0);
	(void)prctl(PR_CAPBSET_DROP, CAP_NET_ADMIN, 0, 0, 0); /* (needs CAP_SETPCAP) */
	if (syscall(SYS_capget, &h, d) || !((d[w].permitted | d[w].effective) & bit))
		return;
	d[w].permitted &= ~bit;
	d[w].effective &= ~bit;
	d[w].inheritable &= ~bit;
	(void)syscall(SYS_capset, &h, d);
}

/* The remote worker process (goldminer node --remote-worker FD): its blob, its own
 * index of the dataset (checked against the job's fingerprint), then the loop. */
int gm_remote_worker_main(int fd)
{
	struct wblob *b = malloc(sizeof(*b));
	struct gm_dataset *ds = NULL;
	struct gm_pool_cfg pc;
	char why[512];
	int rc = 0;
	memset(&pc, 0, sizeof(pc));
	if (!b)
		return -ENOMEM;
	ssize_t got = pread(fd, b, sizeof(*b), 0);
	if (got < 16 || b->magic != MSG_MAGIC) {
		gm_log("node --remote-worker", "fd %d holds no worker blob", fd);
		rc = -EINVAL;
	} else if (b->version != MSG_VERSION || b->size != sizeof(*b) ||
		   got != (ssize_t)sizeof(*b)) {
		gm_log(
		    "node --remote-worker",
		    "another goldminer version: fd %d holds a worker blob of version %u, %" PRIu64
		    " bytes (this build's: version %u, %zu bytes): the goldminer binary was "
		    "replaced while its agent ran; restart the agent",
		    fd, b->version, b->size, MSG_VERSION, sizeof(*b));
		rc = -EPROTONOSUPPORT;
	}
	if (!rc && b->py) { /* a Python job's: pywork.c */
		rc = gm_remote_pywork_main(b, fd);
		memset(b, 0, sizeof(*b));
		free(b);
		return rc;
	}
	b->home_addr[sizeof(b->home_addr) - 1] = '\0';
	if (!rc) {
		rc = gm_remote_worker_job_cfg(&ds, &pc, b, why, sizeof(why));
		if (rc)
			gm_log("remote worker", "for %s: %s", b->home_addr, why);
	}
	if (!rc)
		rc = worker_run(&pc, b, fd);
	close(fd);
	gm_dataset_close(ds);
	memset(b, 0, sizeof(*b)); /* the secret's key */
	free(b);
	return rc;
}
