/*
 * check.c - the rules a peer's values must meet before they land (check.h):
 * the message table; a publish's status, a sample's position, id, label and
 * error record, a publish's sizes, err bits and error records; a lend
 * request's sizes, a lent answer's words and a lease's shape; a Python job's
 * lend request, its facts, its leases and its whole batches.
 *
 * The idea: compare with what the home computed at the claim (the ids and
 * labels of the lease's positions and their substitutes), never with anything
 * else the writer says. A bad sample's slot holds its substitute (the first
 * good one after it in epoch order, or, when the batch fails, the last one
 * tried), so a bad sample may carry any id of its window; a good one, only
 * its own.
 *
 * Not here: the lease itself (slot state, task, vpid, sizes: home.c checks
 * them first), and what a refusal costs the writer (home.c).
 */

#include "check.h"
#include "goldminer/limits.h"
#include "goldminer/util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* What may arrive over UCX: one row per message, its header's exact size,
 * whether a payload may follow it and whether it may come over UCX at all (the
 * handshake's messages go over the control port, ctl.c, before an endpoint
 * exists: one that comes over UCX is a protocol error). */
struct msg_row {
	size_t hlen;
	bool data, ucx;
};
// clang-format off
#define ROW(id, type, data, ucx) [id] = {sizeof(struct type), data, ucx}
static const struct msg_row msg_rows[AM_N] = {
	/*  message      header       payload  over UCX */
	ROW(AM_HELLO,     m_hello,     false,   false),
	ROW(AM_CHALLENGE, m_challenge, false,   false),
	ROW(AM_AUTH,      m_auth,      false,   false),
	ROW(AM_WELCOME,   m_welcome,   false,   false),
	ROW(AM_LEND,      m_lend,      true,    true),
	ROW(AM_LENT,      m_lent,      false,   true),
	ROW(AM_CLAIM,     m_claim,     false,   true),
	ROW(AM_LEASE,     m_lease,     true,    true),
	ROW(AM_SAMPLE,    m_sample,    true,    true),
	ROW(AM_PUBLISH,   m_publish,   true,    true),
	ROW(AM_BEAT,      m_beat,      false,   true),
	ROW(AM_PYLEND,    m_pylend,    true,    true),
	ROW(AM_BATCH,     m_batch,     true,    true),
};
#undef ROW
// clang-format on

bool gm_remote_check_msg(int id, size_t hlen, size_t len, bool rndv, bool handshaken, char *why,
			 size_t wl)
{
	if (id < 1 || id >= AM_N) {
		gm_errf(why, wl, "unknown message %d", id);
		return false;
	}
	if (rndv && id != AM_SAMPLE && id != AM_BATCH) {
		gm_errf(why, wl, "a rendezvous message %d (only samples and batches come so)", id);
		return false;
	}
	if (hlen != msg_rows[id].hlen || (len && !msg_rows[id].data)) {
		gm_errf(why, wl, "malformed message %d (%zu+%zu bytes)", id, hlen, len);
		return false;
	}
	if (!msg_rows[id].ucx || !handshaken) {
		gm_errf(why, wl, "message %d out of place (the handshake is the control port's)",
			id);
		return false;
	}
	return true;
}

bool gm_remote_check_status(const struct gm_remote_expect *e, int32_t status, char *why, size_t wl)
{
	bool fail = e->on_error == GM_ON_ERROR_FAIL;
	if (status == 0 || (status == -EBADMSG && fail) || (status == -ENODATA && !fail))
		return true;
	gm_errf(why, wl,
		"status %" PRId32 " is not one its job's workers publish (0 or %s, on_error=%s)",
		status, fail ? "-EBADMSG" : "-ENODATA", fail ? "fail" : "skip");
	return false;
}

/* A record's error is what a worker records: a -errno. */
static bool rec_err_ok(const struct gm_slot_err *r, char *why, size_t wl)
{
	if (r->err < 0 && r->err > -4096)
		return true;
	gm_errf(why, wl,
		"an error record for sample %" PRIu32 " with error %" PRId32 " (not a -errno)",
		r->sample, r->err);
	return false;
}

bool gm_remote_check_sample(const struct gm_remote_expect *e, const struct m_sample *s, char *why,
			    size_t wl)
{
	if (s->pos >= e->nb || s->bad > 1 || s->has_rec > 1) {
		gm_errf(why, wl, "a sample at position %" PRIu32 " of a batch of %" PRIu32, s->pos,
			e->nb);
		return false;
	}
	uint32_t last = s->bad ? s->pos + e->nsub : s->pos, q = s->pos;
	while (q <= last && e->id[q] != s->id)
		q++;
	if (q > last) {
		gm_errf(why, wl,
			"sample id %" PRIu32 " at position %" PRIu32 " is not its lease's (%" PRIu32
			"%s)",
			s->id, s->pos, e->id[s->pos], s->bad ? " or a substitute of it" : "");
		return false;
	}
	if (s->label != e->label[q]) {
		gm_errf(why, wl,
			"label %" PRId32 " of sample %" PRIu32 " is not its label %" PRId32,
			s->label, s->id, e->label[q]);
		return false;
	}
	if (s->has_rec && (!s->bad || s->rec.sample != e->id[s->pos])) {
		gm_errf(why, wl,
			"an error record for sample %" PRIu32 " with position %" PRIu32
			" (%s sample %" PRIu32 ")",
			s->rec.sample, s->pos, s->bad ? "its bad" : "a good", e->id[s->pos]);
		return false;
	}
	return !s->has_rec || rec_err_ok(&s->rec, why, wl);
}

/* The position < nb whose err bit is set and whose sample is id, or nb. */
static uint32_t bad_position_of(const struct gm_remote_expect *e, const uint64_t *err_words,
				uint32_t id)
{
	for (uint32_t q = 0; q < e->nb; q++)
		if ((err_words[q / 64] >> (q % 64) & 1) && e->id[q] == id)
			return q;
	return e->nb;
}

bool gm_remote_check_records(const struct gm_remote_expect *e, const uint64_t *err_words,
			     uint32_t words, const struct gm_slot_err *recs, uint32_t n, char *why,
			     size_t wl)
{
	for (uint32_t q = 0; q < words; q++) {
		uint64_t w = err_words[q];
		uint32_t first = q * 64;
		if (first >= e->nb ? w != 0 : (e->nb - first < 64 && w >> (e->nb - first))) {
			gm_errf(why, wl, "err bits past the batch's %" PRIu32 " positions", e->nb);
			return false;
		}
	}
	for (uint32_t k = 0; k < n; k++) {
		if (bad_position_of(e, err_words, recs[k].sample) == e->nb) {
			gm_errf(why, wl,
				"an error record for sample %" PRIu32
				", which no position it marks bad holds",
				recs[k].sample);
			return false;
		}
		if (!rec_err_ok(&recs[k], why, wl))
			return false;
	}
	return true;
}

bool gm_remote_check_sample_msg(const struct gm_remote_expect *e, const struct m_sample *s,
				size_t len, uint64_t sb, char *why, size_t wl)
{
	if (len != sb) {
		gm_errf(why, wl, "a sample of %zu bytes (the job's are %" PRIu64 ")", len, sb);
		return false;
	}
	return gm_remote_check_sample(e, s, why, wl);
}

bool gm_remote_check_publish(const struct gm_remote_expect *e, const struct m_publish *p,
			     const void *data, size_t len, uint32_t words, uint32_t ndone,
			     uint32_t slot_recs, char *why, size_t wl)
{
	size_t need = (size_t)words * 8 + (size_t)p->n_recs * sizeof(struct gm_slot_err);
	if (p->words != words || p->n_recs > GM_RING_MAX_ERRS || len != need || p->nb != e->nb) {
		gm_errf(why, wl,
			"%u err words, %u records in %zu bytes for %u samples (the lease's: %u "
			"words, at most %d records, %u samples)",
			p->words, p->n_recs, len, p->nb, words, GM_RING_MAX_ERRS, e->nb);
		return false;
	}
	const uint64_t *ew = data;
	const struct gm_slot_err *recs = (const struct gm_slot_err *)(ew + words);
	if (!gm_remote_check_status(e, p->status, why, wl) ||
	    !gm_remote_check_records(e, ew, words, recs, p->n_recs, why, wl))
		return false;
	if (p->status == 0 && ndone != e->nb) {
		gm_errf(why, wl, "a complete batch with %u of its %u samples", ndone, e->nb);
		return false;
	}
	if (p->status != 0 && !p->n_recs && !slot_recs) {
		gm_errf(why, wl, "a failed batch (status %d) without an error record", p->status);
		return false;
	}
	return true;
}

bool gm_remote_check_lend(const struct m_lend *m, const void *data, size_t len,
			  struct gm_node_req *req)
{
	if (len != sizeof(*req) || m->workers > GM_MAX_WORKERS || !m->port || m->port > 65535)
		return false;
	memcpy(req, data, sizeof(*req));
	req->root[sizeof(req->root) - 1] = '\0';
	return true;
}

void gm_remote_check_words(char *dst, const char *src, size_t n)
{
	size_t k = 0;
	for (; k < n && src[k]; k++)
		dst[k] = (unsigned char)src[k] < 0x20 || src[k] == 0x7f ? '?' : src[k];
	dst[k] = '\0';
}

uint32_t gm_remote_check_lent(const struct m_lent *m, char *msg)
{
	gm_remote_check_words(msg, m->msg, sizeof(m->msg));
	return m->granted < GM_MAX_WORKERS ? m->granted : GM_MAX_WORKERS;
}

bool gm_remote_check_lease(const struct m_lease *l, size_t len, uint32_t batch, uint32_t bpe,
			   uint64_t nsamples, size_t cap)
{
	if (l->status == -EAGAIN || l->status == -ENODATA)
		return len == 0;
	if (!bpe) /* (a job has at least one batch an epoch: worker.c checked it) */
		return false;
	uint64_t first = (l->task % bpe) * batch;
	uint64_t nb = nsamples - first < batch ? nsamples - first : batch;
	return l->status == 0 && first < nsamples && l->nb == nb &&
	       len == ((size_t)batch + 63) / 64 * 8 && len <= cap;
}

bool gm_remote_check_beat(const struct m_beat *b, uint64_t last_seq, char *why, size_t wl)
{
	if (b->seq <= last_seq) {
		gm_errf(why, wl, "a heartbeat numbered %" PRIu64 " after %" PRIu64, b->seq,
			last_seq);
		return false;
	}
	if (b->mcores > BEAT_MAX_MCORES || b->slots > BEAT_MAX_WORKERS ||
	    b->lent > BEAT_MAX_WORKERS || b->rate > BEAT_MAX_RATE) {
		gm_errf(why, wl,
			"a heartbeat beyond the limits (%u/1000 cores, %u workers to lend, %u "
			"lent, %u img/s per core)",
			b->mcores, b->slots, b->lent, b->rate);
		return false;
	}
	if (b->for_you > b->lent || b->pad) {
		gm_errf(why, wl, "a heartbeat with %u of %u lent workers for us%s", b->for_you,
			b->lent, b->pad ? ", its padding not zero" : "");
		return false;
	}
	return true;
}

/* ---- Python jobs (AM_PYLEND, AM_BATCH) ----------------------------------------- */

bool gm_remote_check_pylend(const struct m_pylend *m, const void *data, size_t len,
			    struct gm_node_req *req, char *why, size_t wl)
{
	if (m->workers > GM_MAX_WORKERS || !m->port || m->port > 65535) {
		gm_errf(why, wl, "a Python lend of %u workers to port %u", m->workers, m->port);
		return false;
	}
	if (!m->workers && len == sizeof(*req)) { /* the job ends there */
		memcpy(req, data, sizeof(*req));
		req->root[sizeof(req->root) - 1] = '\0';
		return true;
	}
	/* the spec itself, or only its name (spec_hash: the lender holds it or asks) */
	if (m->spec_len == 0 || m->spec_len > PY_SPEC_MAX ||
	    (len != sizeof(*req) + m->spec_len && len != sizeof(*req))) {
		gm_errf(why, wl,
			"a Python lend with a spec of %" PRIu64 " bytes in %zu (at most %u)",
			m->spec_len, len, PY_SPEC_MAX);
		return false;
	}
	if (m->rows <= GM_BIND_IDS_HDR || m->rows > GM_MAX_BATCH + GM_BIND_IDS_HDR ||
	    !gm_ring_size(1, m->rows, m->sample_bytes) || !memchr(m->gm, 0, sizeof(m->gm))) {
		gm_errf(why, wl, "a Python lend of %u rows of %" PRIu64 " bytes", m->rows,
			m->sample_bytes);
		return false;
	}
	memcpy(req, data, sizeof(*req));
	req->root[sizeof(req->root) - 1] = '\0';
	return true;
}

int gm_remote_py_facts(const char *root, size_t size, struct gm_remote_py_facts *f, char *why,
		       size_t wl)
{
	size_t off = 0;
	memset(f, 0, sizeof(*f));
	while (off < size && root[off] && f->argc < GM_NODE_CMD_ARGS) {
		f->argv[f->argc++] = root + off;
		off += strnlen(root + off, size - off) + 1;
	}
	if (off >= size || root[off] || !f->argc || f->argv[0][0] != '/') {
		gm_errf(why, wl, "a command of 1..%d arguments, the first an absolute path",
			GM_NODE_CMD_ARGS);
		return -EINVAL;
	}
	for (off++; off < size && root[off];) {
		const char *w = root + off;
		off += strnlen(w, size - off) + 1;
		if (!strncmp(w, "py=", 3) && !f->py)
			f->py = w + 3;
		else if (!strncmp(w, "root=", 5) && w[5] && f->nroots < GM_REMOTE_PY_ROOTS)
			f->roots[f->nroots++] = w + 5;
		else {
			gm_errf(why, wl, "a fact that is not py= or root= (or too many)");
			return -EINVAL;
		}
	}
	if (off < size && !f->py && !f->nroots) {
		gm_errf(why, wl,
			"the job names no dataset root for peers to check (its dataset's root "
			"or goldminer_roots)");
		return -ENOENT;
	}
	if (off >= size || !f->py || !f->py[0]) {
		gm_errf(why, wl, "no Python version among the job's facts");
		return -EINVAL;
	}
	if (!f->nroots) {
		gm_errf(why, wl, "the dataset names no root");
		return -ENOENT;
	}
	return 0;
}

bool gm_remote_check_pylease(const struct m_lease *l, size_t len, uint32_t rows)
{
	if (l->status == -EAGAIN || l->status == -ENODATA)
		return len == 0;
	return l->status == 0 && l->nb >= 1 && l->nb <= rows - GM_BIND_IDS_HDR &&
	       len == ((size_t)l->nb + GM_BIND_IDS_HDR) * sizeof(uint32_t);
}

bool gm_remote_check_batch(const struct m_batch *b, const uint32_t *idx, uint32_t nb,
			   uint32_t words, uint64_t cap, size_t len, const void *data, char *why,
			   size_t wl)
{
	size_t head = (size_t)words * 8 + (size_t)b->n_recs * sizeof(struct gm_slot_err);
	if (b->nb != nb || b->words != words || b->n_recs > GM_RING_MAX_ERRS || b->tail > 1 ||
	    b->size > cap || len != head + b->size) {
		gm_errf(why, wl,
			"a batch of %u samples, %u err words, %u records, %" PRIu64
			" bytes in %zu (the lease's: %u samples, %u words, at most %d records, "
			"%" PRIu64 " bytes)",
			b->nb, b->words, b->n_recs, b->size, len, nb, words, GM_RING_MAX_ERRS, cap);
		return false;
	}
	if (b->status != 0 && b->status != -EBADMSG && b->status != -ENODATA &&
	    b->status != -EMSGSIZE) {
		gm_errf(why, wl, "status %" PRId32 " is not one a Python worker publishes",
			b->status);
		return false;
	}
	if ((b->status == 0 || b->status == -EMSGSIZE) ? b->size < 8 : 0) {
		gm_errf(why, wl, "a batch of %" PRIu64 " bytes (its payload holds its size)",
			b->size);
		return false;
	}
	struct gm_remote_expect e = {.id = idx, .nb = nb};
	const uint64_t *ew = data;
	return gm_remote_check_records(&e, ew, words, (const struct gm_slot_err *)(ew + words),
				       b->n_recs, why, wl);
}
