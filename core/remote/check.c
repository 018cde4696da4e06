/*
 * check.c - the rules a peer's values must meet before they land (check.h):
 * the message table; a publish's status, a sample's position, id, label and
 * error record, a publish's sizes, err bits and error records; a lend
 * request's sizes, a lent answer's words and a lease's shape; a Python job's
 * lend request, its facts, its leases, its whole batches and their container
 * (_slot.py's header: one table row per rule).
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
#include "goldminer/checksum.h"
#include "goldminer/limits.h"
#include "goldminer/util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* What may arrive over UCX: one row per message, its name, its layout (the
 * number its stamp carries: bump it when its struct changes, msg.h), its
 * header's exact size, whether a payload may follow it and whether it may come
 * over UCX at all (the handshake's messages go over the control port, ctl.c,
 * before an endpoint exists: one that comes over UCX is a protocol error). */
struct msg_row {
	const char *name;
	uint16_t layout;
	size_t hlen;
	bool data, ucx;
};
// clang-format off
#define ROW(id, type, layout, data, ucx) [id] = {#id + 3, layout, sizeof(struct type), data, ucx}
static const struct msg_row msg_rows[AM_N] = {
	/*  message      header      layout  payload  over UCX */
	ROW(AM_HELLO,     m_hello,     2,     false,   false),
	[AM_CHALLENGE] = {"CHALLENGE", 0, 0, false, false}, /* gone (version 6): ids kept */
	[AM_AUTH]      = {"AUTH", 0, 0, false, false},
	ROW(AM_WELCOME,   m_welcome,   1,     false,   false),
	ROW(AM_LEND,      m_lend,      1,     true,    true),
	ROW(AM_LENT,      m_lent,      1,     false,   true),
	ROW(AM_CLAIM,     m_claim,     1,     false,   true),
	ROW(AM_LEASE,     m_lease,     1,     true,    true),
	ROW(AM_SAMPLE,    m_sample,    1,     true,    true),
	ROW(AM_PUBLISH,   m_publish,   1,     true,    true),
	ROW(AM_BEAT,      m_beat,      1,     false,   true),
	ROW(AM_PYLEND,    m_pylend,    1,     true,    true),
	ROW(AM_BATCH,     m_batch,     1,     true,    true),
	ROW(AM_BYE,       m_bye,       1,     false,   true),
};
#undef ROW
// clang-format on

void gm_remote_msg_stamp(int id, struct m_stamp *st)
{
	*st = (struct m_stamp){.mark = MSG_STAMP_MARK,
			       .layout = msg_rows[id].layout,
			       .size = (uint32_t)msg_rows[id].hlen};
}

/* The stamp before a header of hlen bytes (the stamp's included) says this
 * build's layout of message id. */
static bool stamp_ok(int id, const void *hdr, size_t hlen, char *why, size_t wl)
{
	const struct msg_row *row = &msg_rows[id];
	struct m_stamp st;
	if (hlen < sizeof(st)) {
		gm_errf(why, wl, "malformed message %s (%zu bytes)", row->name, hlen);
		return false;
	}
	memcpy(&st, hdr, sizeof(st));
	if (st.mark != MSG_STAMP_MARK) {
		gm_errf(why, wl,
			"another goldminer version: message %s of %zu bytes without this build's "
			"layout stamp; run one goldminer version on every host",
			row->name, hlen);
		return false;
	}
	if (hlen - sizeof(st) != st.size) {
		gm_errf(why, wl, "malformed message %s (%zu bytes, its stamp says %u + %zu)",
			row->name, hlen, st.size, sizeof(st));
		return false;
	}
	if (st.layout != row->layout || st.size != row->hlen) {
		gm_errf(why, wl,
			"another goldminer version: message %s in layout %u of %u bytes (this "
			"build's: layout %u, %zu bytes); run one goldminer version on every host",
			row->name, st.layout, st.size, row->layout, row->hlen);
		return false;
	}
	return true;
}

bool gm_remote_check_msg(int id, const void *hdr, size_t hlen, size_t len, bool rndv,
			 bool handshaken, char *why, size_t wl)
{
	if (id < 1 || id >= AM_N) {
		gm_errf(why, wl, "unknown message %d", id);
		return false;
	}
	if (!msg_rows[id].ucx || !handshaken) {
		gm_errf(why, wl, "message %s out of place (the handshake is the control port's)",
			msg_rows[id].name);
		return false;
	}
	if (!stamp_ok(id, hdr, hlen, why, wl))
		return false;
	if (rndv && id != AM_SAMPLE && id != AM_BATCH) {
		gm_errf(why, wl, "a rendezvous message %s (only samples and batches come so)",
			msg_rows[id].name);
		return false;
	}
	if (len && !msg_rows[id].data) {
		gm_errf(why, wl, "malformed message %s (%zu+%zu bytes)", msg_rows[id].name, hlen,
			len);
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

int gm_remote_check_lend(const struct m_lend *m, const void *data, size_t len,
			 struct gm_node_req *req, char *why, size_t wl)
{
	if (m->workers > GM_MAX_WORKERS || !m->port || m->port > 65535) {
		gm_errf(why, wl, "a lend of %u workers to port %u", m->workers, m->port);
		return -EBADMSG;
	}
	return gm_wire_request_take(req, data, len, why, wl);
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

void gm_remote_check_bye(const struct m_bye *m, char *why)
{
	gm_remote_check_words(why, m->why, sizeof(m->why));
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

int gm_remote_check_pylend(const struct m_pylend *m, const void *data, size_t len,
			   struct gm_node_req *req, char *why, size_t wl)
{
	if (m->workers > GM_MAX_WORKERS || !m->port || m->port > 65535) {
		gm_errf(why, wl, "a Python lend of %u workers to port %u", m->workers, m->port);
		return -EBADMSG;
	}
	if (!m->workers) /* the job ends there: the request alone */
		return gm_wire_request_take(req, data, len, why, wl);
	/* the spec after the request, or only its name (spec_hash): the request alone */
	if (m->spec_len == 0 || m->spec_len > PY_SPEC_MAX ||
	    (len != sizeof(*req) && len < m->spec_len + 8)) {
		gm_errf(why, wl,
			"a Python lend with a spec of %" PRIu64 " bytes in %zu (at most %u)",
			m->spec_len, len, PY_SPEC_MAX);
		return -EBADMSG;
	}
	int rc =
	    gm_wire_request_take(req, data, len == sizeof(*req) ? len : len - m->spec_len, why, wl);
	if (rc)
		return rc;
	if (m->rows <= GM_BIND_IDS_HDR || m->rows > GM_MAX_BATCH + GM_BIND_IDS_HDR ||
	    !gm_ring_size(1, m->rows, m->sample_bytes) || !memchr(m->gm, 0, sizeof(m->gm))) {
		gm_errf(why, wl, "a Python lend of %u rows of %" PRIu64 " bytes", m->rows,
			m->sample_bytes);
		return -EBADMSG;
	}
	return 0;
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

/* ---- a Python batch's container (_slot.py's header), against its lease ---------- */

/* What the rules see: the BATCH, its container's fields (the ones its payload
 * holds: an -EMSGSIZE payload is total alone), the lease's ids[] and the slot's
 * data bytes. */
struct pyslot {
	const struct m_batch *b;
	const uint32_t *ids;
	uint64_t cap;
	uint64_t total, tree, lease;
	uint32_t epoch, batch;
	char magic[8];
};

static bool py_failed(const struct m_batch *b)
{
	return b->status == -EBADMSG || b->status == -ENODATA;
}

/* A failed batch names the sample it failed on (the C path's rule too). */
static bool py_record(const struct pyslot *s, char *why, size_t wl)
{
	if (!py_failed(s->b) || s->b->n_recs)
		return true;
	gm_errf(why, wl, "a failed batch (status %" PRId32 ") without an error record",
		s->b->status);
	return false;
}

/* The container lies inside the payload: a whole header, or -EMSGSIZE's total. */
static bool py_size(const struct pyslot *s, char *why, size_t wl)
{
	bool big = s->b->status == -EMSGSIZE;
	if (big ? s->b->size == 8 : s->b->size >= GM_REMOTE_PY_HDR)
		return true;
	gm_errf(why, wl, "a container of %" PRIu64 " bytes (%s)", s->b->size,
		big ? "-EMSGSIZE's is its 8-byte size" : "its header alone is 64");
	return false;
}

static bool py_total(const struct pyslot *s, char *why, size_t wl)
{
	if (s->b->status == -EMSGSIZE ? s->total > s->cap : s->total == s->b->size)
		return true;
	if (s->b->status == -EMSGSIZE)
		gm_errf(why, wl,
			"a batch too big for the slot of %" PRIu64
			" bytes that says it needs %" PRIu64,
			s->cap, s->total);
	else
		gm_errf(why, wl, "a container whose total %" PRIu64 " is not its %" PRIu64 " bytes",
			s->total, s->b->size);
	return false;
}

static bool py_magic(const struct pyslot *s, char *why, size_t wl)
{
	const char *want = py_failed(s->b) ? "GMPYFAIL" : "GMPYSLOT";
	if (s->b->status == -EMSGSIZE || !memcmp(s->magic, want, 8))
		return true;
	char got[9];
	gm_remote_check_words(got, s->magic, 8);
	gm_errf(why, wl, "a container whose magic \"%s\" is not %s (status %" PRId32 ")", got, want,
		s->b->status);
	return false;
}

static bool py_tree(const struct pyslot *s, char *why, size_t wl)
{
	if (s->b->status == -EMSGSIZE || s->tree <= s->b->size - GM_REMOTE_PY_HDR)
		return true;
	gm_errf(why, wl, "a container whose tree of %" PRIu64 " bytes ends past its %" PRIu64,
		s->tree, s->b->size);
	return false;
}

static bool py_batch(const struct pyslot *s, char *why, size_t wl)
{
	if (s->b->status == -EMSGSIZE || (s->epoch == s->ids[0] && s->batch == s->ids[1]))
		return true;
	gm_errf(why, wl,
		"a container of batch %" PRIu32 " of epoch %" PRIu32
		" for the lease of batch %" PRIu32 " of epoch %" PRIu32,
		s->batch, s->epoch, s->ids[1], s->ids[0]);
	return false;
}

static bool py_lease(const struct pyslot *s, char *why, size_t wl)
{
	size_t n = ((size_t)GM_BIND_IDS_HDR + s->b->nb) * sizeof(*s->ids);
	uint64_t want = gm_checksum64(GM_CHECKSUM_INIT, s->ids, n);
	if (s->b->status == -EMSGSIZE || s->lease == want)
		return true;
	gm_errf(why, wl,
		"a container whose lease digest %016" PRIx64 " is not its lease's %016" PRIx64
		" (another job's, or other samples)",
		s->lease, want);
	return false;
}

/* One row per rule, in the order they are applied (the first broken one is
 * named): the later ones read fields the earlier ones showed present. */
struct pyslot_rule {
	const char *name;
	bool (*ok)(const struct pyslot *s, char *why, size_t wl);
};
// clang-format off
#define ROW(name, fn) {name, fn}
static const struct pyslot_rule pyslot_rules[] = {
	/*  rule      the batch meets it when                               */
	ROW("record", py_record), /* a failed one carries an error record */
	ROW("size",   py_size),   /* its payload holds the container's header */
	ROW("total",  py_total),  /* total is its size (-EMSGSIZE: > the slot's) */
	ROW("magic",  py_magic),  /* GMPYSLOT, or GMPYFAIL when failed */
	ROW("tree",   py_tree),   /* 64 + tree <= size */
	ROW("batch",  py_batch),  /* the lease's epoch and batch index */
	ROW("lease",  py_lease),  /* the digest of the lease's ids[] */
};
#undef ROW
// clang-format on

bool gm_remote_check_pyslot(const struct m_batch *b, const void *head, const uint32_t *ids,
			    uint64_t cap, char *why, size_t wl)
{
	const unsigned char *h = head;
	struct pyslot s = {.b = b, .ids = ids, .cap = cap};
	if (b->size >= 8)
		memcpy(&s.total, h, 8);
	if (b->size >= GM_REMOTE_PY_HDR && b->status != -EMSGSIZE) {
		memcpy(&s.tree, h + 8, 8);
		memcpy(s.magic, h + 16, 8);
		memcpy(&s.epoch, h + 24, 4);
		memcpy(&s.batch, h + 28, 4);
		memcpy(&s.lease, h + 32, 8);
	}
	char w[224];
	for (size_t k = 0; k < sizeof(pyslot_rules) / sizeof(pyslot_rules[0]); k++)
		if (!pyslot_rules[k].ok(&s, w, sizeof(w))) {
			gm_errf(why, wl, "rule %s: %s", pyslot_rules[k].name, w);
			return false;
		}
	return true;
}
