/*
 * pyhome.c - the home's side of a Python job's remote workers (agent.h): a
 * job of a binding's ring (bind.h, a node agent's CMDJOB) whose batches
 * Python workers on peer agents make, one whole batch per lease.
 *
 * The idea: the unit of a Python job is the batch the trainer reads (the
 * payload of _slot.py: a header and 64-byte aligned arrays), not the sample:
 * its layout is the Python worker's and its size varies, so there is nothing
 * per sample for the home to check or place. A remote worker's CLAIM is the
 * ring's CAS for a virtual lease id (as home.c's), and the LEASE carries the
 * slot's ids[] the trainer wrote (epoch, batch, indices: the trainer's state,
 * never the writer's); the remote worker has a Python worker make the batch
 * into a staging slot on its host with the same bind API, and sends it whole
 * (BATCH). The home checks it against the lease it holds (the slot word,
 * task, sample count, err bits inside the batch, records naming the lease's
 * indices, a status a Python worker publishes, at most the slot's data
 * bytes, then the container's header: vouch, check.h), only then copies it
 * into the slot, marks every position done and publishes. A lease gets the
 * job's deadline from its claim for its whole batch (home.c). A LEND for such
 * a job (PYLEND) carries the request (the command, the trainer's Python
 * version, the dataset's roots) and names the spec the workers load by its
 * SHA-256; the spec itself goes only to a peer that would lend the job and
 * says it does not hold it (home.c asks, msg.h's PY_SPEC_WANTED); the lender
 * decides (lender.c, pylend checks).
 *
 * Trust: the payload is unpickled by the trainer, so the home vouches for
 * every batch before it lands, as it does for a C job's samples: its sizes,
 * status, err bits and records (gm_remote_check_batch), then its container
 * (_slot.py's header, gm_remote_check_pyslot): the magic of its status, total
 * equal to its size, the tree inside it, the lease's epoch and batch index
 * and the digest of the lease's ids[], a failed status with an error record.
 * A batch that breaks a rule is refused: the connection ends, the peer's
 * address and the rule are logged, the lease is taken back and the batch made
 * again by another worker; the trainer never sees it. What the rules cannot
 * stop: a container that meets them all with any pickle inside, from a peer
 * that holds the secret and lends Python workers; the rules catch a worker's
 * mistakes and a batch of another lease or job. The shared secret stays the
 * boundary for that, both ways (a lender that opts in with --lend-python runs
 * the home's pickles; the home unpickles the lender's batches).
 *
 * Not here: the leases' deadlines and the asking (home.c, which calls in
 * here for a Python job), the peer's side (lender.c, pywork.c).
 */

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "agent.h"
#include "auth.h"
#include "check.h"
#include "conn.h"
#include "goldminer/bind.h"
#include "goldminer/ring.h"
#include "goldminer/util.h"
#include "goldminer/version.h"
#include "msg.h"

/* The spec (what the workers load) from fd into a buffer of ours, and its
 * SHA-256: a PYLEND names it by that, and carries it to a peer that asks for
 * it (home.c). 0 or -errno with err. */
static int read_spec(struct hjob *j, int fd, char *err, size_t errlen)
{
	struct stat st;
	if (fstat(fd, &st) || st.st_size <= 0 || (uint64_t)st.st_size > PY_SPEC_MAX) {
		gm_errf(err, errlen, "a spec of 1..%u bytes for peers", PY_SPEC_MAX);
		return -EFBIG;
	}
	j->spec_len = (uint64_t)st.st_size;
	j->spec = malloc(j->spec_len);
	if (!j->spec) {
		gm_errf(err, errlen, "out of memory for the spec");
		return -ENOMEM;
	}
	for (uint64_t off = 0; off < j->spec_len;) {
		ssize_t k = pread(fd, j->spec + off, j->spec_len - off, (off_t)off);
		if (k <= 0) {
			gm_errf(err, errlen, "reading the spec: %s", k ? strerror(errno) : "short");
			return -EIO;
		}
		off += (uint64_t)k;
	}
	if (!EVP_Digest(j->spec, j->spec_len, j->spec_hash, NULL, EVP_sha256(), NULL)) {
		gm_errf(err, errlen, "hashing the spec: libcrypto failed");
		return -EIO;
	}
	return 0;
}

int gm_remote_pyhome_add(struct gm_remote *r, int ring_fd, int spec_fd,
			 const struct gm_node_req *req, uint32_t lease_ms, uint64_t *token,
			 char *err, size_t errlen)
{
	struct gm_remote_py_facts f;
	struct hjob *j;
	int rc = gm_remote_py_facts(req->root, sizeof(req->root), &f, err, errlen);
	if (rc)
		return rc;
	rc = gm_remote_home_job_new(r, ring_fd, req, lease_ms, &j, err, errlen);
	if (rc)
		return rc;
	rc = read_spec(j, spec_fd, err, errlen);
	if (!rc && j->batch <= GM_BIND_IDS_HDR) { /* ids[]: epoch, batch, then the indices */
		gm_errf(err, errlen, "a ring of %u rows is not a binding's", j->batch);
		rc = -EINVAL;
	}
	if (rc) {
		gm_remote_home_drop(j);
		return rc;
	}
	j->py = true;
	j->tick_ms = gm_now_ms();
	j->used = true;
	*token = j->token;
	return 0;
}

int gm_remote_pyhome_send_lend(struct gm_remote *r, struct hjob *j, struct conn *c, uint32_t n,
			       bool with_spec)
{
	struct m_pylend m = {.token = j->token,
			     .workers = n,
			     .lease_ms = j->lease_ms,
			     .port = r->port,
			     .rows = j->batch,
			     .sample_bytes = j->sb,
			     .spec_len = n ? j->spec_len : 0};
	copy_str(m.gm, sizeof(m.gm), gm_version());
	memcpy(m.spec_hash, j->spec_hash, sizeof(m.spec_hash));
	size_t len = sizeof(j->req) + (n && with_spec ? (size_t)m.spec_len : 0);
	unsigned char *d = malloc(len);
	if (!d)
		return -ENOMEM;
	memcpy(d, &j->req, sizeof(j->req));
	if (len > sizeof(j->req))
		memcpy(d + sizeof(j->req), j->spec, m.spec_len);
	int rc = gm_remote_conn_send(c, AM_PYLEND, &m, sizeof(m), d, len);
	free(d);
	return rc;
}

/* A claim of a Python job's remote worker: the ring's CAS, then the slot's
 * ids[] as the trainer wrote them (checked: a count the ring can hold). */
void gm_remote_pyhome_claim(struct gm_remote *r, struct conn *c)
{
	struct hjob *j = c->job;
	struct m_lease l = {0};
	const uint32_t *ids = NULL;
	size_t dlen = 0;
	if (c->vpid && c->inflight) { /* its batch is still landing: then */
		c->claim_pending = true;
		return;
	}
	if (c->vpid) {
		gm_remote_conn_kill(c, "refused its claim: a claim while it holds a lease");
		return;
	}
	uint32_t vpid = r->next_vpid < GM_REMOTE_VPID_MIN || r->next_vpid >= 0xffffffu
			    ? GM_REMOTE_VPID_MIN
			    : r->next_vpid;
	r->next_vpid = vpid + 1;
	uint64_t task;
	int slot = gm_ring_claim(j->ring, vpid, &task);
	uint32_t n = slot >= 0 ? gm_ring_ctl(j->ring, (uint32_t)slot)->n : 0;
	if (slot >= 0 && (!n || n > j->batch - GM_BIND_IDS_HDR)) {
		/* the trainer's slot holds no batch: give it back, let a local worker say so */
		gm_ring_reclaim(j->ring, vpid, NULL);
		slot = -EAGAIN;
	}
	if (slot < 0) {
		l.status = slot == -EAGAIN ? -EAGAIN : -ENODATA;
	} else {
		gm_ring_begin_task(j->ring, (uint32_t)slot, task, n);
		ids = gm_ring_ids(j->ring, (uint32_t)slot);
		dlen = ((size_t)n + GM_BIND_IDS_HDR) * sizeof(*ids);
		c->vpid = vpid;
		c->slot = (uint32_t)slot;
		c->task = task;
		c->nb = n;
		c->lease_ms = c->lease_since_ms = gm_now_ms();
		l = (struct m_lease){.vpid = vpid, .slot = (uint32_t)slot, .nb = n, .task = task};
	}
	gm_remote_conn_send(c, AM_LEASE, &l, sizeof(l), ids, dlen);
}

/* Does the home vouch for c's batch b (len bytes of message payload: head,
 * its err words and records, 8-aligned; payload, its size bytes)? Its sizes,
 * status, err bits and records, then its container against the lease the
 * home holds (check.h): the trainer unpickles nothing the home did not check. */
static bool vouch(const struct hjob *j, const struct conn *c, const struct m_batch *b, size_t len,
		  const void *head, const unsigned char *payload, char *why, size_t wl)
{
	const uint32_t *ids = gm_ring_ids(j->ring, c->slot);
	uint64_t cap = (uint64_t)j->batch * j->sb;
	return gm_remote_check_batch(b, ids + GM_BIND_IDS_HDR, c->nb, j->words, cap, len, head, why,
				     wl) &&
	       gm_remote_check_pyslot(b, payload, ids, cap, why, wl);
}

/* The batch lands: payload, err bits, records, every position done, then the
 * publish (release store of READY: gm_ring_publish). */
static void land(struct hjob *j, struct conn *c, const struct m_batch *b, const uint64_t *ew,
		 const unsigned char *payload)
{
	uint32_t slot = c->slot, nerr = 0;
	struct gm_slot_ctl *ctl = gm_ring_ctl(j->ring, slot);
	_Atomic uint64_t *err = gm_ring_err_bits(j->ring, slot);
	_Atomic uint64_t *done = gm_ring_done_bits(j->ring, slot);
	if (payload) /* (NULL: received into the slot, rendezvous) */
		memcpy(gm_ring_data(j->ring, slot), payload, b->size);
	for (uint32_t q = 0; q < j->words; q++) {
		nerr += (uint32_t)__builtin_popcountll(
		    atomic_fetch_or_explicit(&err[q], ew[q], memory_order_relaxed) | ew[q]);
		uint32_t first = q * 64;
		uint64_t all = first >= b->nb	     ? 0
			       : b->nb - first >= 64 ? ~0ull
						     : (1ull << (b->nb - first)) - 1;
		atomic_fetch_or_explicit(&done[q], all, memory_order_relaxed);
	}
	gm_remote_home_merge_recs(ctl, (const struct gm_slot_err *)(ew + j->words), b->n_recs);
	ctl->n_errors = nerr;
	ctl->status = b->status;
	c->samples += b->nb;
	j->samples += b->nb;
	j->tick_samples += b->nb;
	j->bytes += b->size;
	c->vpid = 0;
	gm_ring_publish(j->ring, slot);
}

/* A rendezvous BATCH in flight: what it is for (its connection may be gone
 * when it completes, so it names the job and the lease), and its err words and
 * records (received beside the payload, which lands in the slot). */
struct brx {
	struct gm_remote *r;
	uint64_t token;
	struct m_batch b;
	size_t len;
	uint64_t head[]; /* err words, records */
};

static void brx_done(void *req, ucs_status_t st, size_t length, void *user)
{
	struct brx *x = user;
	struct gm_remote *r = x->r;
	struct hjob *j = gm_remote_home_job(r, x->token);
	struct conn *c = gm_remote_home_worker(r, j, x->b.vpid);
	char why[256];
	if (c && st == UCS_OK && length == x->len) /* its records, after the payload */
		memcpy(x->head, (unsigned char *)gm_ring_data(j->ring, c->slot) + x->b.size,
		       x->len - x->b.size);
	if (c) {
		c->inflight--;
		if (st != UCS_OK || length != x->len)
			gm_remote_conn_kill(c, "%s: a batch's transfer failed: %s", c->ip,
					    ucs_status_string(st));
		else if (!gm_remote_home_lease_held(c, x->b.vpid, x->b.task))
			j->fenced++;
		else if (!vouch(j, c, &x->b, x->len, x->head, gm_ring_data(j->ring, c->slot), why,
				sizeof(why)))
			gm_remote_conn_kill(c, "refused its batch: %s", why);
		else
			land(j, c, &x->b, x->head, NULL);
		if (c->claim_pending && c->st != C_DEAD && !c->inflight) {
			c->claim_pending = false;
			gm_remote_pyhome_claim(r, c);
		}
	}
	if (req)
		ucp_request_free(req);
	free(x);
}

/* A rendezvous BATCH, its header checked: received straight into the slot
 * (its payload first, then its err words and records, which the slot's bytes
 * after the payload hold: checked), checked and landed when complete. */
static void batch_rndv(struct gm_remote *r, struct conn *c, const struct m_batch *b, void *desc,
		       size_t len, size_t head)
{
	struct hjob *j = c->job;
	struct brx *x = malloc(sizeof(*x) + head + 8);
	if (!x) {
		gm_remote_conn_kill(c, "out of memory receiving a batch");
		return;
	}
	*x = (struct brx){.r = r, .token = j->token, .b = *b, .len = len};
	gm_remote_home_recv(r, c, desc, gm_ring_data(j->ring, c->slot), len, brx_done, x,
			    "a batch");
}

void gm_remote_pyhome_on_batch(struct gm_remote *r, struct conn *c, const struct m_batch *b,
			       void *data, size_t len, bool rndv)
{
	struct hjob *j = c->job;
	char why[256];
	if (c->role != ROLE_WORKER || !j || !j->py) {
		gm_remote_conn_kill(c,
				    "%s: a batch from a connection that is not a remote "
				    "Python worker",
				    c->ip);
		return;
	}
	if (!gm_remote_home_lease_held(c, b->vpid, b->task) || c->inflight) {
		j->fenced++; /* a lease taken back (or a second batch): its writer is fenced */
		return;
	}
	/* its sizes first: the err words and records, then at most the slot's bytes */
	size_t head = (size_t)j->words * 8 + (size_t)b->n_recs * sizeof(struct gm_slot_err);
	uint64_t cap = (uint64_t)j->batch * j->sb;
	if (b->words != j->words || b->n_recs > GM_RING_MAX_ERRS || len < head || b->size > cap ||
	    len != head + b->size || b->tail != rndv || (rndv && len > cap)) {
		gm_remote_conn_kill(c,
				    "refused its batch: %u err words, %u records, %" PRIu64
				    " bytes in %zu (at most %" PRIu64 "), records %s%s",
				    b->words, b->n_recs, b->size, len, cap,
				    b->tail ? "after" : "before", rndv ? ", by rendezvous" : "");
		return;
	}
	c->lease_ms = gm_now_ms(); /* it came: its transfer has a deadline of its own */
	if (rndv) {
		batch_rndv(r, c, b, data, len, head);
		return;
	}
	memcpy(r->scratch2, data, head); /* the err words and records, 8-aligned */
	if (!vouch(j, c, b, len, r->scratch2, (const unsigned char *)data + head, why,
		   sizeof(why))) {
		gm_remote_conn_kill(c, "refused its batch: %s", why);
		return;
	}
	land(j, c, b, r->scratch2, (const unsigned char *)data + head);
}
