/*
 * fuzz_peermsg.c - fuzz target: arbitrary peer messages (a message id, a header
 * and a payload, as UCX hands them to the remote plugin) through the checks the
 * receive path applies, in its order: the message table (check.c, which conn.c
 * applies to every message), then the receiver's own parse of that message up
 * to the point where it would act: the home's SAMPLE and PUBLISH checks
 * against a made-up lease of a made-up dataset index, its LENT parse, the
 * lender's LEND parse and --lend-root match (lendroot.h) with the request's
 * options checked as its check process does (gm_pool_check), a remote
 * worker's LEASE parse, an agent's BEAT (after one numbered by the prefix's
 * nsub byte); a Python job's: the lender's PYLEND parse, its facts and their
 * roots' --lend-root match, a remote Python worker's LEASE, the home's BATCH
 * (its sizes and records, then its container: gm_remote_check_pyslot)
 * against the same lease (its rows the batch + GM_BIND_IDS_HDR, the slot's
 * data bytes rows x sample bytes). What passes is then landed the way the receiver lands
 * it, into buffers of exactly the lease's size (so that ASan sees a byte
 * outside them).
 *
 * Input: a 10-byte prefix, then the header (its layout stamp first, as conn.c
 * sends it: msg.h), then the payload:
 *   id (u8), flags (u8: 1 rendezvous, 2 handshake done, 4 on_error=fail,
 *   8 the slot holds an error record already, 0xf0: the sample bytes - 1),
 *   batch (u16, +1), nsamples (u16, +1), nsub (u8, % 8), done (u8: positions
 *   of the lease already done, % (nb + 1)), header length (u16).
 * The lease the home holds: vpid LEASE_VPID, task LEASE_TASK; the dataset's
 * id at epoch position p is p, its label p % 11 - 1.
 *
 * Checks (abort): every value that passed is one the rules allow (a sample's
 * position inside the lease and its id and label the lease's, a publish's
 * sizes the lease's, a lend's root below a --lend-root, a lease's batch size
 * its task's), and every refusal says why in words.
 *
 * Built with -DGM_FUZZ_SEEDS, main(DIR) writes the seed corpus (valid
 * messages of every type and a few near misses) into DIR instead.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/remote/check.h" /* the plugin's, not installed */
#include "../../core/remote/lendroot.h"
#include "fuzz.h"
#include "goldminer/limits.h"
#include "goldminer/pool.h"
#include "goldminer/remote.h"
#include "goldminer/wire.h"

#define LEASE_VPID GM_REMOTE_VPID_MIN
#define LEASE_TASK 3u
#define PREFIX	   10

enum { F_RNDV = 1, F_HANDSHAKEN = 2, F_FAIL = 4, F_SLOT_REC = 8 };

/* The lendable roots of the made-up lender (as --lend-root words). */
static const char *const lend_words[] = {"/data", "/srv/lend/imagenet"};

/* The made-up job and the lease the home holds for the connection. */
struct job {
	uint32_t batch, bpe, nb, nsub, words, ndone;
	uint64_t nsamples, sb;
	enum gm_on_error on_error;
	bool slot_rec;
	uint32_t *id;
	int32_t *label;
};

static int32_t label_of(uint64_t id)
{
	return (int32_t)(id % 11) - 1;
}

static void job_init(struct job *j, const uint8_t *p)
{
	j->batch = 1 + (uint32_t)(p[2] | p[3] << 8) % GM_MAX_BATCH;
	j->nsamples = 1 + (uint64_t)(p[4] | p[5] << 8);
	j->nsub = p[6] % 8;
	j->bpe = (uint32_t)((j->nsamples + j->batch - 1) / j->batch);
	uint64_t first = (LEASE_TASK % j->bpe) * j->batch;
	j->nb = (uint32_t)(j->nsamples - first < j->batch ? j->nsamples - first : j->batch);
	j->ndone = p[7] % (j->nb + 1);
	j->words = (j->batch + 63) / 64;
	j->sb = 1 + (p[1] >> 4);
	j->on_error = p[1] & F_FAIL ? GM_ON_ERROR_FAIL : GM_ON_ERROR_SKIP;
	j->slot_rec = p[1] & F_SLOT_REC;
	j->id = malloc((j->nb + j->nsub) * sizeof(*j->id));
	j->label = malloc((j->nb + j->nsub) * sizeof(*j->label));
	if (!j->id || !j->label)
		abort();
	for (uint32_t q = 0; q < j->nb + j->nsub; q++) {
		j->id[q] = (uint32_t)((first + q) % j->nsamples);
		j->label[q] = label_of(j->id[q]);
	}
}

static void job_fini(struct job *j)
{
	free(j->id);
	free(j->label);
}

static struct gm_remote_expect expect_of(const struct job *j)
{
	return (struct gm_remote_expect){
	    .id = j->id, .label = j->label, .nb = j->nb, .nsub = j->nsub, .on_error = j->on_error};
}

/* A refusal says why: non-empty, inside its buffer. */
static void refused(const char *why, size_t cap)
{
	gm_fuzz_check_msg(why, cap);
}

/* ---- each receiver's parse --------------------------------------------------- */

/* The home: a sample of the lease lands at its position of the slot. */
static void on_sample(const struct job *j, const struct m_sample *s, const uint8_t *data,
		      size_t len, bool rndv)
{
	char why[200];
	struct gm_remote_expect e = expect_of(j);
	if (s->vpid != LEASE_VPID || s->task != LEASE_TASK)
		return; /* not the lease the home holds: fenced */
	if (!gm_remote_check_sample_msg(&e, s, len, j->sb, why, sizeof(why))) {
		refused(why, sizeof(why));
		return;
	}
	/* what passed: a position of the lease, its id or (bad) a substitute's, that
	 * sample's label, a record only for a bad one, naming the position's sample */
	if (s->pos >= j->nb || len != j->sb || s->bad > 1)
		abort();
	uint32_t q = s->pos;
	while (q <= s->pos + (s->bad ? j->nsub : 0) && j->id[q] != s->id)
		q++;
	if (q > s->pos + (s->bad ? j->nsub : 0) || j->label[q] != s->label)
		abort();
	if (s->has_rec && (!s->bad || s->rec.sample != j->id[s->pos] || s->rec.err >= 0))
		abort();
	/* landed as home.c lands it: the pixels, the label, the id, the bits */
	uint8_t *slot = malloc((size_t)j->nb * j->sb);
	int32_t *labels = malloc(j->nb * sizeof(*labels));
	uint32_t *ids = malloc(j->nb * sizeof(*ids));
	uint64_t *bits = calloc(j->words, sizeof(*bits));
	if (!slot || !labels || !ids || !bits)
		abort();
	if (!rndv)
		memcpy(slot + (size_t)s->pos * j->sb, data, len);
	labels[s->pos] = s->label;
	ids[s->pos] = s->id;
	bits[s->pos / 64] |= 1ull << (s->pos % 64);
	free(slot);
	free(labels);
	free(ids);
	free(bits);
}

/* The home: a publish of the lease (agent.c copies its payload to aligned memory
 * first, refusing one larger than its buffer). */
static void on_publish(const struct job *j, const struct m_publish *p, const uint8_t *data,
		       size_t len)
{
	char why[200];
	struct gm_remote_expect e = expect_of(j);
	if (len > (GM_MAX_BATCH / 64 + GM_RING_MAX_ERRS * sizeof(struct gm_slot_err) / 8 + 1) * 8)
		return; /* "oversized message" */
	if (p->vpid != LEASE_VPID || p->task != LEASE_TASK)
		return;
	uint64_t *copy = malloc(len ? len : 1); /* exactly len bytes: ASan sees past them */
	if (!copy)
		abort();
	memcpy(copy, data, len);
	bool ok = gm_remote_check_publish(&e, p, copy, len, j->words, j->ndone, j->slot_rec, why,
					  sizeof(why));
	if (!ok) {
		refused(why, sizeof(why));
		free(copy);
		return;
	}
	if (p->words != j->words || p->nb != j->nb || p->n_recs > GM_RING_MAX_ERRS ||
	    len != j->words * 8 + p->n_recs * sizeof(struct gm_slot_err) ||
	    (p->status != 0 && p->status != -EBADMSG && p->status != -ENODATA) ||
	    (p->status == 0 && j->ndone != j->nb))
		abort();
	/* landed as home.c lands it: the err bits, then the records (their words
	 * printable) */
	uint32_t nerr = 0;
	for (uint32_t q = 0; q < j->words; q++) {
		if (q * 64 >= j->nb ? copy[q] != 0
				    : (j->nb - q * 64 < 64 && copy[q] >> (j->nb - q * 64)))
			abort(); /* an err bit past the batch */
		nerr += (uint32_t)__builtin_popcountll(copy[q]);
	}
	const struct gm_slot_err *recs = (const struct gm_slot_err *)(copy + j->words);
	for (uint32_t k = 0; k < p->n_recs; k++) {
		struct gm_slot_err r = recs[k];
		r.msg[GM_RING_MSG - 1] = '\0';
		if (r.err >= 0 || r.err <= -4096 || !nerr)
			abort();
	}
	free(copy);
}

/* The home: a peer's answer to its LEND. */
static void on_lent(const struct m_lent *m)
{
	char msg[sizeof(m->msg) + 1];
	uint32_t granted = gm_remote_check_lent(m, msg);
	size_t n = strnlen(msg, sizeof(msg));
	if (granted > GM_MAX_WORKERS || n == sizeof(msg))
		abort();
	for (size_t k = 0; k < n; k++)
		if ((unsigned char)msg[k] < 0x20 || msg[k] == 0x7f)
			abort(); /* the home prints it */
}

/* A remote worker: its home's BYE, whose words it prints (worker.c, pywork.c). */
static void on_bye(const struct m_bye *m)
{
	char why[GM_BYE_WORDS];
	gm_remote_check_bye(m, why);
	size_t n = strnlen(why, sizeof(why));
	if (n == sizeof(why))
		abort();
	for (size_t k = 0; k < n; k++)
		if ((unsigned char)why[k] < 0x20 || why[k] == 0x7f)
			abort();
}

/* The lender: a LEND's request, then its root against --lend-root (by words),
 * then the request's options as its check process reads them. */
static void on_lend(const struct m_lend *m, const uint8_t *data, size_t len)
{
	struct gm_node_req req;
	char path[sizeof(req.root)], e[768];
	struct gm_loader_opts opts;
	char why[256] = "";
	if (gm_remote_check_lend(m, data, len, &req, why, sizeof(why))) {
		refused(why, sizeof(why)); /* another version (refused), or malformed */
		return;
	}
	if (len != sizeof(req) || m->workers > GM_MAX_WORKERS || !m->port || m->port > 65535 ||
	    req.magic != GM_NODE_MAGIC || req.version != GM_NODE_VERSION ||
	    strnlen(req.root, sizeof(req.root)) == sizeof(req.root))
		abort();
	if (gm_lendroot_normalise(req.root, path, sizeof(path)))
		return; /* not lendable */
	int w = gm_lendroot_find(lend_words, 2, path);
	if (w < 0)
		return;
	size_t rl = strlen(lend_words[w]);
	if (path[0] != '/' || strncmp(path, lend_words[w], rl) || (path[rl] && path[rl] != '/') ||
	    strstr(path, "/../") || strstr(path, "//"))
		abort(); /* matched, yet not below the root */
	gm_wire_request_opts(&req, &opts);
	if (gm_pool_check(&opts, e, sizeof(e)))
		refused(e, sizeof(e));
}

/* An agent: a peer's heartbeat, after one numbered last. */
static void on_beat(const struct m_beat *b, uint64_t last)
{
	char why[200] = "";
	if (!gm_remote_check_beat(b, last, why, sizeof(why))) {
		refused(why, sizeof(why));
		return;
	}
	if (b->seq <= last || b->mcores > BEAT_MAX_MCORES || b->slots > BEAT_MAX_WORKERS ||
	    b->lent > BEAT_MAX_WORKERS || b->for_you > b->lent || b->rate > BEAT_MAX_RATE || b->pad)
		abort(); /* let through what it must not */
}

/* A remote worker: the home's reply to its claim. */
static void on_lease(const struct job *j, const struct m_lease *l, const uint8_t *data, size_t len)
{
	uint64_t scratch[GM_MAX_BATCH / 64];
	if (!gm_remote_check_lease(l, len, j->batch, j->bpe, j->nsamples, sizeof(scratch)))
		return; /* "malformed lease" */
	if (l->status) {
		if (len || (l->status != -EAGAIN && l->status != -ENODATA))
			abort();
		return;
	}
	uint64_t first = (l->task % j->bpe) * j->batch;
	if (first >= j->nsamples || !l->nb || l->nb > j->batch || first + l->nb > j->nsamples ||
	    len != j->words * 8)
		abort();
	memcpy(scratch, data, len);
}

/* The lender: a Python job's LEND, its facts, its roots by their words. */
static void on_pylend(const struct m_pylend *m, const uint8_t *data, size_t len)
{
	struct gm_node_req req;
	struct gm_remote_py_facts f;
	char why[256] = "", path[sizeof(req.root)];
	if (gm_remote_check_pylend(m, data, len, &req, why, sizeof(why))) {
		refused(why, sizeof(why));
		return;
	}
	if (m->workers > GM_MAX_WORKERS ||
	    (m->workers && ((len != sizeof(req) + m->spec_len && len != sizeof(req)) ||
			    !m->spec_len || m->spec_len > PY_SPEC_MAX)) ||
	    req.magic != GM_NODE_MAGIC || req.version != GM_NODE_VERSION ||
	    strnlen(req.root, sizeof(req.root)) == sizeof(req.root))
		abort();
	if (gm_remote_py_facts(req.root, sizeof(req.root), &f, why, sizeof(why))) {
		refused(why, sizeof(why));
		return;
	}
	if (!f.argc || f.argc > GM_NODE_CMD_ARGS || f.argv[0][0] != '/' || !f.py || !f.nroots ||
	    f.nroots > GM_REMOTE_PY_ROOTS)
		abort();
	for (int q = 0; q < f.nroots; q++) {
		const char *end = req.root + sizeof(req.root);
		if (f.roots[q] < req.root || f.roots[q] >= end ||
		    strnlen(f.roots[q], (size_t)(end - f.roots[q])) == (size_t)(end - f.roots[q]))
			abort(); /* a fact outside the request */
		if (!gm_lendroot_normalise(f.roots[q], path, sizeof(path)))
			(void)gm_lendroot_find(lend_words, 2, path);
	}
}

/* A remote Python worker: the home's reply to its claim (rows: batch + hdr). */
static void on_pylease(const struct job *j, const struct m_lease *l, const uint8_t *data,
		       size_t len)
{
	uint32_t ids[GM_MAX_BATCH + GM_BIND_IDS_HDR];
	uint32_t rows = j->batch + GM_BIND_IDS_HDR;
	if (!gm_remote_check_pylease(l, len, rows))
		return;
	if (!l->status && (!l->nb || l->nb > j->batch || len != (l->nb + GM_BIND_IDS_HDR) * 4))
		abort();
	memcpy(ids, data, len);
}

/* The home: a whole batch of the lease, landed into a slot of exactly its
 * data bytes (rows x sample bytes): eager, its records first; by rendezvous
 * (rndv), received whole into the slot, its records after the payload. */
static void on_batch(const struct job *j, const struct m_batch *b, const uint8_t *data, size_t len,
		     bool rndv)
{
	char why[300] = "";
	uint32_t rows = j->batch + GM_BIND_IDS_HDR, words = (rows + 63) / 64;
	uint64_t cap = (uint64_t)rows * j->sb;
	size_t head = (size_t)words * 8 + (size_t)b->n_recs * sizeof(struct gm_slot_err);
	if (b->words != words || b->n_recs > GM_RING_MAX_ERRS || len < head || b->size > cap ||
	    len != head + b->size || b->tail != rndv || (rndv && len > cap))
		return; /* refused before anything lands (pyhome.c) */
	unsigned char *slot = malloc(cap ? cap : 1);
	uint64_t *copy = malloc(head ? head : 1);
	if (!slot || !copy)
		abort();
	if (rndv) {
		memcpy(slot, data, len);
		memcpy(copy, slot + b->size, head);
	} else {
		memcpy(copy, data, head);
	}
	if (!gm_remote_check_batch(b, j->id, j->nb, words, cap, len, copy, why, sizeof(why))) {
		refused(why, sizeof(why));
	} else {
		if (b->size > cap || head + b->size != len || b->nb != j->nb || b->tail > 1)
			abort();
		if (!rndv)
			memcpy(slot, data + head, b->size);
		/* then its container against the lease's ids[] (batch 0 of epoch 0) */
		uint32_t ids[GM_MAX_BATCH + GM_BIND_IDS_HDR] = {0};
		memcpy(ids + GM_BIND_IDS_HDR, j->id, (size_t)j->nb * sizeof(*ids));
		if (!gm_remote_check_pyslot(b, slot, ids, cap, why, sizeof(why)))
			refused(why, sizeof(why));
	}
	free(slot);
	free(copy);
}

/* ---- the target -------------------------------------------------------------- */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char why[160];
	if (size < PREFIX)
		return 0;
	int id = data[0];
	bool rndv = data[1] & F_RNDV, handshaken = data[1] & F_HANDSHAKEN;
	size_t hlen = (size_t)(data[8] | data[9] << 8);
	if (hlen > size - PREFIX)
		hlen = size - PREFIX;
	const uint8_t *hdr = data + PREFIX, *pay = hdr + hlen;
	size_t len = size - PREFIX - hlen;
	if (!gm_remote_check_msg(id, hdr, hlen, len, rndv, handshaken, why, sizeof(why))) {
		refused(why, sizeof(why));
		return 0;
	}
	static const size_t sizes[AM_N] = {
	    [AM_LEND] = sizeof(struct m_lend),	   [AM_LENT] = sizeof(struct m_lent),
	    [AM_CLAIM] = sizeof(struct m_claim),   [AM_LEASE] = sizeof(struct m_lease),
	    [AM_SAMPLE] = sizeof(struct m_sample), [AM_PUBLISH] = sizeof(struct m_publish),
	    [AM_BEAT] = sizeof(struct m_beat),	   [AM_PYLEND] = sizeof(struct m_pylend),
	    [AM_BATCH] = sizeof(struct m_batch),   [AM_BYE] = sizeof(struct m_bye)};
	struct m_stamp st;
	if (hlen < sizeof(st))
		abort();
	memcpy(&st, hdr, sizeof(st));
	hdr += sizeof(st);
	hlen -= sizeof(st);
	if (id < 1 || id >= AM_N || !sizes[id] || hlen != sizes[id] || !handshaken ||
	    st.mark != MSG_STAMP_MARK || st.size != hlen ||
	    (rndv && id != AM_SAMPLE && id != AM_BATCH) ||
	    (len && id != AM_LEND && id != AM_LEASE && id != AM_SAMPLE && id != AM_PUBLISH &&
	     id != AM_PYLEND && id != AM_BATCH))
		abort(); /* the table let through what it must not */
	union m_any h;
	memcpy(&h, hdr, hlen); /* conn.c: the header, after its stamp, to aligned memory */
	struct job j;
	job_init(&j, data);
	switch (id) {
	case AM_LEND:
		on_lend(&h.lend, pay, len);
		break;
	case AM_LENT:
		on_lent(&h.lent);
		break;
	case AM_LEASE: /* a C job's worker, or a Python job's (the prefix's done byte) */
		if (data[7] & 0x80)
			on_pylease(&j, &h.lease, pay, len);
		else
			on_lease(&j, &h.lease, pay, len);
		break;
	case AM_PYLEND:
		on_pylend(&h.pylend, pay, len);
		break;
	case AM_BATCH:
		on_batch(&j, &h.batch, pay, len, rndv);
		break;
	case AM_SAMPLE:
		on_sample(&j, &h.sample, pay, len, rndv);
		break;
	case AM_PUBLISH:
		on_publish(&j, &h.pub, pay, len);
		break;
	case AM_BEAT:
		on_beat(&h.beat, data[6]);
		break;
	case AM_BYE:
		on_bye(&h.bye);
		break;
	default: /* CLAIM: no value in it */
		break;
	}
	job_fini(&j);
	return 0;
}

#ifdef GM_FUZZ_SEEDS
/* ---- the seed corpus --------------------------------------------------------- */

static const char *seed_dir;

/* One seed: the prefix for message id (flags, batch, nsamples, nsub, done),
 * its header (after this build's stamp, as conn.c sends it; stamp false: none,
 * as a build before the stamps sent it) and payload. */
static void seed_as(bool stamp, const char *name, int id, uint8_t flags, uint32_t batch,
		    uint32_t nsamples, uint8_t nsub, uint8_t done, const void *hdr, size_t hlen,
		    const void *pay, size_t len)
{
	char path[512];
	struct m_stamp st;
	gm_remote_msg_stamp(id, &st);
	size_t sl = stamp ? sizeof(st) : 0;
	hlen += sl;
	uint8_t p[PREFIX] = {(uint8_t)id,
			     flags,
			     (uint8_t)(batch - 1),
			     (uint8_t)((batch - 1) >> 8),
			     (uint8_t)(nsamples - 1),
			     (uint8_t)((nsamples - 1) >> 8),
			     nsub,
			     done,
			     (uint8_t)hlen,
			     (uint8_t)(hlen >> 8)};
	snprintf(path, sizeof(path), "%s/%s", seed_dir, name);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(p, 1, sizeof(p), f) != sizeof(p) || fwrite(&st, 1, sl, f) != sl ||
	    fwrite(hdr, 1, hlen - sl, f) != hlen - sl ||
	    (len && fwrite(pay, 1, len, f) != len) || fclose(f)) {
		perror(path);
		exit(1);
	}
}

static void seed(const char *name, int id, uint8_t flags, uint32_t batch, uint32_t nsamples,
		 uint8_t nsub, uint8_t done, const void *hdr, size_t hlen, const void *pay,
		 size_t len)
{
	seed_as(true, name, id, flags, batch, nsamples, nsub, done, hdr, hlen, pay, len);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR (writes fuzz_peermsg's seed corpus)\n", argv[0]);
		return 2;
	}
	seed_dir = argv[1];
	const uint8_t ok = F_HANDSHAKEN, sb = 4; /* flags: sample bytes 4 */
	const uint8_t fl = ok | (uint8_t)((sb - 1) << 4);
	uint8_t px[4] = {1, 2, 3, 4};
	/* batch 8 of 30 samples: task 3 is positions 24..29 (6 samples) */
	const uint32_t B = 8, N = 30, first = 24;
	struct m_sample s = {.task = LEASE_TASK, .vpid = LEASE_VPID, .pos = 2, .id = first + 2};
	s.label = label_of(s.id);
	seed("sample-good", AM_SAMPLE, fl, B, N, 2, 0, &s, sizeof(s), px, sizeof(px));
	seed("sample-rndv", AM_SAMPLE, fl | F_RNDV, B, N, 2, 0, &s, sizeof(s), px, sizeof(px));
	struct m_sample b = s;
	b.bad = 1;
	b.id = (first + 2 + 1) % N; /* a substitute */
	b.label = label_of(b.id);
	b.has_rec = 1;
	b.rec = (struct gm_slot_err){.sample = first + 2, .err = -EBADMSG};
	snprintf(b.rec.msg, sizeof(b.rec.msg), "img%u.jpg: not a JPEG", first + 2);
	seed("sample-bad", AM_SAMPLE, fl, B, N, 2, 0, &b, sizeof(b), px, sizeof(px));
	struct m_sample w = s;
	w.label = label_of(s.id) + 1; /* a wrong label */
	seed("sample-wrong-label", AM_SAMPLE, fl, B, N, 2, 0, &w, sizeof(w), px, sizeof(px));
	seed("sample-early", AM_SAMPLE, F_RNDV, B, N, 2, 0, &s, sizeof(s), px, sizeof(px));

	struct {
		uint64_t words[1];
		struct gm_slot_err rec[1];
	} pub = {{1ull << 2}, {{.sample = first + 2, .err = -EBADMSG}}};
	struct m_publish p = {.task = LEASE_TASK, .vpid = LEASE_VPID, .nb = 6, .words = 1};
	uint64_t zero = 0;
	seed("publish-complete", AM_PUBLISH, fl, B, N, 2, 6, &p, sizeof(p), &zero, 8);
	p.status = -ENODATA;
	p.n_recs = 1;
	seed("publish-skipped", AM_PUBLISH, fl, B, N, 2, 6, &p, sizeof(p), &pub, sizeof(pub));
	p.status = -EBADMSG;
	seed("publish-failed", AM_PUBLISH, fl | F_FAIL, B, N, 2, 3, &p, sizeof(p), &pub,
	     sizeof(pub));
	struct m_publish p0 = {
	    .task = LEASE_TASK, .vpid = LEASE_VPID, .nb = 6, .words = 1, .status = -ENODATA};
	uint64_t bad2 = 1ull << 2;
	seed("publish-skipped-no-record", AM_PUBLISH, fl, B, N, 2, 6, &p0, sizeof(p0), &bad2, 8);
	seed("publish-skipped-slot-record", AM_PUBLISH, fl | F_SLOT_REC, B, N, 2, 6, &p0,
	     sizeof(p0), &bad2, 8);
	p.status = 2; /* END: refused */
	seed("publish-end", AM_PUBLISH, fl, B, N, 2, 6, &p, sizeof(p), &pub, sizeof(pub));
	/* a batch of 130: three err words */
	struct m_publish p3 = {.task = LEASE_TASK, .vpid = LEASE_VPID, .nb = 130, .words = 3};
	uint64_t w3[3] = {0};
	seed("publish-3-words", AM_PUBLISH, fl, 130, 1000, 0, 130, &p3, sizeof(p3), w3, sizeof(w3));

	struct m_lend l = {.token = 42,
			   .fingerprint = 7,
			   .nsamples = 1000,
			   .workers = 4,
			   .bpe = 4,
			   .lease_ms = 5000,
			   .port = 7001};
	struct gm_node_req req;
	gm_wire_request(&req, GM_NODE_ATTACH);
	snprintf(req.root, sizeof(req.root), "/data/imagenet/train");
	seed("lend", AM_LEND, ok, B, N, 0, 0, &l, sizeof(l), &req, sizeof(req));
	seed_as(false, "lend-unstamped", AM_LEND, ok, B, N, 0, 0, &l, sizeof(l), &req,
		sizeof(req));
	req.version = GM_NODE_VERSION - 1;
	seed("lend-request-older", AM_LEND, ok, B, N, 0, 0, &l, sizeof(l), &req, sizeof(req) - 8);
	req.version = GM_NODE_VERSION;
	snprintf(req.root, sizeof(req.root), "/data/../etc");
	seed("lend-dotdot", AM_LEND, ok, B, N, 0, 0, &l, sizeof(l), &req, sizeof(req));
	snprintf(req.root, sizeof(req.root), "/srv/lend/imagenet//val/.");
	seed("lend-second-root", AM_LEND, ok, B, N, 0, 0, &l, sizeof(l), &req, sizeof(req));

	struct m_lent lt = {.token = 42, .granted = 3};
	seed("lent", AM_LENT, ok, B, N, 0, 0, &lt, sizeof(lt), NULL, 0);
	lt = (struct m_lent){.token = 42, .status = -EACCES};
	snprintf(lt.msg, sizeof(lt.msg), "not lendable here\033[2J");
	seed("lent-refused", AM_LENT, ok, B, N, 0, 0, &lt, sizeof(lt), NULL, 0);

	struct m_claim cl = {0};
	seed("claim", AM_CLAIM, ok, B, N, 0, 0, &cl, sizeof(cl), NULL, 0);
	struct m_bye by;
	memset(&by, 'x', sizeof(by)); /* no NUL: the words end at the struct's end */
	memcpy(by.why, "no sample for 200 ms\n\x7f", 23);
	seed("bye", AM_BYE, ok, B, N, 0, 0, &by, sizeof(by), NULL, 0);

	struct m_lease ls = {.vpid = LEASE_VPID, .slot = 1, .nb = 6, .task = LEASE_TASK};
	seed("lease", AM_LEASE, ok, B, N, 0, 0, &ls, sizeof(ls), &zero, 8);
	ls = (struct m_lease){.status = -EAGAIN};
	seed("lease-none", AM_LEASE, ok, B, N, 0, 0, &ls, sizeof(ls), NULL, 0);
	ls.status = -ENODATA;
	seed("lease-no-more", AM_LEASE, ok, B, N, 0, 0, &ls, sizeof(ls), NULL, 0);

	struct m_beat bt = {
	    .seq = 5, .mcores = 750, .slots = 1, .lent = 2, .for_you = 1, .rate = 900};
	seed("beat", AM_BEAT, ok, B, N, 4, 0, &bt, sizeof(bt), NULL, 0);
	seed("beat-stale", AM_BEAT, ok, B, N, 5, 0, &bt, sizeof(bt), NULL, 0);
	bt.for_you = 3;
	seed("beat-more-for-us-than-lent", AM_BEAT, ok, B, N, 0, 0, &bt, sizeof(bt), NULL, 0);
	bt = (struct m_beat){.seq = 1, .mcores = UINT32_MAX};
	seed("beat-cores-past-limit", AM_BEAT, ok, B, N, 0, 0, &bt, sizeof(bt), NULL, 0);

	/* a Python job: its LEND (a request with facts, a spec), a lease of its ids,
	 * a whole batch */
	static const char facts[] = "/usr/bin/python3\0-c\0code\0\0py=3.11.2\0root=/data/x\0";
	static unsigned char plend[sizeof(struct gm_node_req) + 16];
	gm_wire_request((struct gm_node_req *)plend, GM_NODE_CMDJOB);
	memcpy(((struct gm_node_req *)plend)->root, facts, sizeof(facts));
	struct m_pylend pl = {.token = 1, .workers = 2, .lease_ms = 5000, .port = 4000,
			      .rows = B + GM_BIND_IDS_HDR, .sample_bytes = 64, .spec_len = 16};
	snprintf(pl.gm, sizeof(pl.gm), "1.0");
	seed("pylend", AM_PYLEND, ok, B, N, 0, 0, &pl, sizeof(pl), plend, sizeof(plend));
	struct gm_node_req *pr = (struct gm_node_req *)plend;
	snprintf(pr->root, sizeof(pr->root), "/usr/bin/python3");
	seed("pylend-no-facts", AM_PYLEND, ok, B, N, 0, 0, &pl, sizeof(pl), plend, sizeof(plend));
	uint32_t pids[6 + GM_BIND_IDS_HDR] = {1, 3, 24, 25, 26, 27, 28, 29};
	ls = (struct m_lease){.vpid = LEASE_VPID, .slot = 1, .nb = 6, .task = LEASE_TASK};
	seed("pylease", AM_LEASE, ok, B, N, 0, 0x80, &ls, sizeof(ls), pids, sizeof(pids));
	struct {
		uint64_t words[1];
		struct gm_slot_err rec[1];
		uint64_t payload[4];
	} pb = {{1ull << 2}, {{.sample = first + 2, .err = -EIO}}, {32, 0, 0, 0}};
	struct m_batch bb = {.task = LEASE_TASK, .vpid = LEASE_VPID, .nb = 6, .status = -EBADMSG,
			     .n_recs = 1, .words = 1, .size = 32};
	seed("batch-failed", AM_BATCH, fl, B, N, 0, 0, &bb, sizeof(bb), &pb, sizeof(pb));
	bb.status = 0;
	bb.n_recs = 0;
	pb.words[0] = 0;
	seed("batch", AM_BATCH, fl, B, N, 0, 0, &bb, sizeof(bb), &pb, 8 + 32);
	struct {
		uint64_t payload[4];
		uint64_t words[1];
	} pt = {{32, 0, 0, 0}, {0}};
	bb.tail = 1; /* rendezvous: the payload first, straight into the slot */
	seed("batch-rndv", AM_BATCH, fl | F_RNDV, B, N, 0, 0, &bb, sizeof(bb), &pt, sizeof(pt));

	struct m_hello he = {.magic = MSG_MAGIC, .version = MSG_VERSION, .role = ROLE_AGENT};
	seed("hello-over-ucx", AM_HELLO, ok, B, N, 0, 0, &he, sizeof(he), NULL, 0);
	return 0;
}
#endif
