/*
 * home.c - the home's side of the remote plugin (agent.h): the jobs attached to
 * this agent that remote workers help, and the leases those workers hold.
 *
 * The idea: a remote worker's CLAIM is served with the same gm_ring_claim CAS
 * the local workers use, for a virtual lease id at or above GM_REMOTE_VPID_MIN,
 * so the ring, its resume bits and the pool's re-issue work unchanged. Every
 * SAMPLE and PUBLISH is checked against the lease this agent holds for that
 * connection (the slot's state word, task, position, exact size) before any
 * byte of it lands, and the home, not the writer, decides where the bytes go:
 * a peer cannot write outside the slot it leased, and a writer whose lease was
 * taken back is fenced by construction (its messages no longer match). Every
 * other value is checked where it lands against what the home computed at the
 * claim (check.h: ids, labels, error records, a publish's status); a value
 * that breaks a rule ends the connection, and agent.c's tick closes its
 * endpoint, then takes the lease back, logging the peer and the rule in one
 * line. A lease ends when no sample at a new position came for the job's
 * lease deadline (a Python job's, whose batch comes whole: no batch for the
 * deadline since its claim), and after LEASE_BOUND deadlines whatever came, or at once
 * when the lender is down (agent.c: no heartbeat for DOWN_MS). A worker may
 * hold a second lease, asked for ahead while it makes the first (its claim's
 * round trip hidden behind the making): that one takes nothing (its samples
 * are fenced) until the first is published, then it is the one held, its
 * deadline and bound counted from then; the connection's death takes both
 * back. The home also
 * asks the peers for workers (LEND), spread by what their heartbeats say they
 * can lend (gm_policy_spread: the idlest first), measures what they deliver
 * and keeps, per job, why it has fewer than it wants (refusals by reason,
 * capacity); a peer that refused a job is asked again after a wait that
 * doubles per (job, peer) up to BACKOFF_MAX_MS (back_off), never per tick.
 * What a peer or its workers can make this agent log goes through the
 * per-address limiter (gm_remote_logf_from).
 *
 * Not here: the connection's death (agent.c's tick calls
 * gm_remote_home_revoke), the rules themselves (check.c), making batches
 * (worker.c), lending (lender.c).
 */

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "agent.h"
#include "auth.h"
#include "check.h"
#include "conn.h"
#include "goldminer/dataset.h"
#include "goldminer/policy.h"
#include "goldminer/remote.h"
#include "goldminer/ring.h"
#include "goldminer/rng.h"
#include "goldminer/util.h"
#include "msg.h"
#include "worker.h"

/*
 * A lease is revoked LEASE_BOUND x the job's lease deadline after its claim,
 * whatever arrives. The deadline alone bounds the time between two samples at
 * new positions, so a writer that sends one every deadline - 1 ms would hold a
 * batch of B samples for B deadlines (and the consumer, which takes batches in
 * order, with it). 8: a batch must come within 40 s at the default deadline
 * (5 s), which a remote worker making at least B / 40 img/s meets (6.4 img/s
 * at B = 256, where one core decodes 100-1,000); a slower one loses every
 * lease, and the home's local workers or the other peers make those batches.
 */
#define LEASE_BOUND 8

/*
 * The batch the trainer waits for (the ring's head, consumed in order) held by
 * a remote worker for HEAD_MS of that wait while every other slot of the ring
 * is made or being made: its lease is revoked (head_tick), and an idle worker
 * makes the batch again. Each worker's lease then lags the head by the whole
 * ring, so the holder is several times slower than the job's other workers:
 * a guest its lender starves of CPU (seed 2's and 105's runs: a remote worker
 * "making 76% (on CPU 1% of that)" held the head while the trainer and every
 * other worker waited; lending made the job slower than its local workers
 * alone), which the lease deadline, a sample every 5 s, never catches.
 */
#define HEAD_MS 1000 /* and two batches after the head made meanwhile */

/* ---- leases for remote workers ----------------------------------------------- */

struct hjob *gm_remote_home_job(void *owner, uint64_t token)
{
	struct gm_remote *r = owner;
	for (int i = 0; i < MAX_HJOBS; i++)
		if (r->hjobs[i].used && r->hjobs[i].token == token)
			return &r->hjobs[i];
	return NULL;
}

/* The slot's lease is still c's (the ring's state word says so), and c is alive
 * (a connection that broke a rule is dead until the tick takes its lease). */
static bool lease_held(const struct conn *c, uint32_t vpid, uint64_t task)
{
	if (c->st == C_DEAD || !c->job || !c->vpid || c->vpid != vpid || c->task != task)
		return false;
	struct gm_slot_ctl *ctl = gm_ring_ctl(c->job->ring, c->slot);
	/* pairs with the CAS of gm_ring_claim / gm_ring_reclaim */
	return atomic_load_explicit(&ctl->state, memory_order_acquire) ==
		   GM_SLOT_WORD(GM_SLOT_CLAIMED, vpid) &&
	       atomic_load_explicit(&ctl->task, memory_order_relaxed) == task;
}

bool gm_remote_home_lease_held(const struct conn *c, uint32_t vpid, uint64_t task)
{
	return lease_held(c, vpid, task);
}

struct conn *gm_remote_home_worker(struct gm_remote *r, const struct hjob *j, uint32_t vpid)
{
	for (int i = 0; j && i < MAX_CONNS; i++)
		if (r->net.conns[i] && r->net.conns[i]->job == j && r->net.conns[i]->vpid == vpid)
			return r->net.conns[i];
	return NULL;
}

void gm_remote_home_recv(struct gm_remote *r, struct conn *c, void *desc, void *dst, size_t len,
			 ucp_am_recv_data_nbx_callback_t done, void *user, const char *what)
{
	ucp_request_param_t rp = {.op_attr_mask =
				      UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
				  .cb.recv_am = done,
				  .user_data = user};
	c->inflight++;
	void *p = ucp_am_recv_data_nbx(r->net.w, desc, dst, len, &rp);
	if (UCS_PTR_IS_ERR(p)) {
		c->inflight--;
		gm_remote_conn_kill(c, "%s: receiving %s: %s", c->ip, what,
				    ucs_status_string(UCS_PTR_STATUS(p)));
		free(user);
	} else if (p == NULL) {
		done(NULL, UCS_OK, len, user); /* landed already */
	}
}

/* Take c's leases back (the one it makes and the one it asked for ahead):
 * their batches are made again by whoever claims them next. */
void gm_remote_home_revoke(struct gm_remote *r, struct conn *c, const char *why)
{
	if (!c->job || (!c->vpid && !c->ahead.vpid))
		return;
	struct hjob *j = c->job;
	uint32_t n = 0;
	if (c->vpid)
		n += gm_ring_reclaim(j->ring, c->vpid, NULL);
	if (c->ahead.vpid)
		n += gm_ring_reclaim(j->ring, c->ahead.vpid, NULL);
	atomic_fetch_add(&gm_ring_hdr(j->ring)->p_reissued, n);
	j->revoked++;
	/* (a Python job's ring counts batches, not epochs of them: bpe 0) */
	uint64_t bpe = j->bpe ? j->bpe : UINT64_MAX;
	if (c->vpid && c->ahead.vpid)
		gm_remote_logf_from(&r->net, c->ip,
				    "remote worker at %s: %s; its batches %" PRIu64 " and %" PRIu64
				    " are made again",
				    c->ip, why, c->task % bpe, c->ahead.task % bpe);
	else
		gm_remote_logf_from(&r->net, c->ip,
				    "remote worker at %s: %s; its batch %" PRIu64 " is made again",
				    c->ip, why, (c->vpid ? c->task : c->ahead.task) % bpe);
	c->vpid = 0;
	c->ahead.vpid = 0;
}

/* A value of c's that breaks a rule (check.h): the connection ends; agent.c's
 * tick closes its endpoint, then takes the lease back and logs the rule with
 * the peer (gm_remote_home_revoke). Nothing of the message has landed. */
static void refuse(struct conn *c, const char *what, const char *why)
{
	gm_remote_conn_kill(c, "refused its %s: %s", what, why);
}

/* ---- what a lease must carry ------------------------------------------------- */

static uint32_t *exp_id(const struct hjob *j, uint32_t slot)
{
	return j->exp_id + (size_t)slot * (j->batch + j->nsub);
}

static int32_t *exp_label(const struct hjob *j, uint32_t slot)
{
	return j->exp_label + (size_t)slot * (j->batch + j->nsub);
}

static uint64_t *seen_words(const struct hjob *j, uint32_t slot)
{
	return j->seen + (size_t)slot * j->words;
}

/* The expectations of c's lease, for check.c. */
static struct gm_remote_expect expect_of(const struct hjob *j, const struct conn *c)
{
	return (struct gm_remote_expect){.id = exp_id(j, c->slot),
					 .label = exp_label(j, c->slot),
					 .nb = c->nb,
					 .nsub = j->nsub,
					 .on_error = j->wc.on_error};
}

/* At the claim: the ids of task's positions and of the substitutes after them
 * (worker.c: epoch position p's bad sample is replaced by one of p+1 ..
 * p+nsub, mod n), their labels, and the bytes reading them all may take (twice
 * their sizes: a ranged read reads a member's prefix, then its rows). The
 * epoch's permutation is computed once per epoch (O(n); leases cross an
 * epoch's end in task order, so it changes about once per epoch). */
static void expect_lease(struct hjob *j, uint32_t slot, uint64_t task, uint32_t nb)
{
	uint32_t epoch;
	uint64_t k, cap = 0;
	gm_worker_task_pos(&j->wc, task, &epoch, &k);
	if (j->perm && (!j->perm_valid || j->perm_epoch != epoch)) {
		gm_rng_permutation(j->perm, (uint32_t)j->nsamples, j->wc.seed, epoch);
		j->perm_epoch = epoch;
		j->perm_valid = true;
	}
	uint32_t *id = exp_id(j, slot);
	int32_t *label = exp_label(j, slot);
	for (uint64_t q = 0, first = k * j->batch; q < nb + j->nsub; q++) {
		uint64_t pos = (first + q) % j->nsamples;
		id[q] = j->perm ? j->perm[pos] : (uint32_t)pos;
		label[q] = (int32_t)gm_dataset_label(j->wc.ds, id[q]);
		cap += gm_dataset_file_size(j->wc.ds, id[q]);
	}
	j->read_cap[slot] = 2 * cap;
}

static uint32_t next_vpid(struct gm_remote *r)
{
	if (r->next_vpid < GM_REMOTE_VPID_MIN || r->next_vpid >= 0xffffffu)
		r->next_vpid = GM_REMOTE_VPID_MIN;
	return r->next_vpid++;
}

/* The lease of task in slot for c: what the home expects of it, and its
 * done bits in words (*dlen bytes). It is the one c makes now, or the one it
 * makes next when it holds one (ahead: its clocks start at that one's publish). */
static void grant(struct hjob *j, struct conn *c, uint32_t vpid, uint32_t slot, uint64_t task,
		  uint64_t *words, size_t *dlen, struct m_lease *l)
{
	uint64_t first = (task % j->bpe) * j->batch;
	uint32_t nb = (uint32_t)(j->nsamples - first < j->batch ? j->nsamples - first : j->batch);
	gm_ring_begin_task(j->ring, slot, task, nb);
	_Atomic uint64_t *done = gm_ring_done_bits(j->ring, slot);
	for (uint32_t q = 0; q < j->words; q++)
		words[q] = atomic_load_explicit(&done[q], memory_order_acquire);
	*dlen = j->words * sizeof(uint64_t);
	expect_lease(j, slot, task, nb);
	memcpy(seen_words(j, slot), words, *dlen); /* done before: not again */
	if (c->vpid) {
		c->ahead.vpid = vpid;
		c->ahead.slot = slot;
		c->ahead.task = task;
		c->ahead.nb = nb;
	} else {
		c->vpid = vpid;
		c->slot = slot;
		c->task = task;
		c->nb = nb;
		c->lease_ms = c->lease_since_ms = gm_now_ms();
		c->resent_said = false;
	}
	*l = (struct m_lease){.vpid = vpid, .slot = slot, .nb = nb, .task = task};
}

/* A lease ahead only where the ring has room for one more per worker: the
 * job's remote workers' slots twice, and two more (the consumer's and a local
 * worker's). In a smaller ring a slot held ahead, not being made, would keep
 * another worker from a batch (measured: 4 slots, 3 remote workers, each told
 * "no batch free" a quarter of its time), so there the claim waits for the
 * publish as it did. */
static bool room_ahead(const struct gm_remote *r, const struct hjob *j)
{
	uint32_t n = 0;
	for (int i = 0; i < MAX_CONNS; i++) {
		const struct conn *o = r->net.conns[i];
		n += o && o->job == j && o->role == ROLE_WORKER && o->st != C_DEAD;
	}
	return j->nslots >= 2 * n + 2;
}

/* A claim answered "no batch free": was the trainer waiting then, and for a
 * batch that whom was making (the job's end line says; a ring whose head a
 * slow maker holds keeps every other worker idle: it is consumed in order) */
static void count_none(struct hjob *j)
{
	struct gm_ring_hdr *h = gm_ring_hdr(j->ring);
	j->none++;
	if (!atomic_load_explicit(&h->c_waiting, memory_order_relaxed))
		return;
	j->none_starved++;
	uint64_t head = atomic_load_explicit(&h->consumed, memory_order_acquire);
	uint32_t w = atomic_load_explicit(
	    &gm_ring_ctl(j->ring, (uint32_t)(head & (j->nslots - 1)))->state, memory_order_relaxed);
	if (GM_SLOT_STATE(w) == GM_SLOT_CLAIMED)
		*(GM_SLOT_PID(w) >= GM_REMOTE_VPID_MIN ? &j->none_head_remote
						       : &j->none_head_local) += 1;
}

void gm_remote_home_on_claim(struct gm_remote *r, struct conn *c)
{
	struct hjob *j = c->job;
	struct m_lease l = {0};
	uint64_t words[GM_MAX_BATCH / 64];
	size_t dlen = 0;

	if (c->role != ROLE_WORKER || !j) {
		gm_remote_conn_kill(c, "%s: a claim from a connection that is not a remote worker",
				    c->ip);
		return;
	}
	if (j->py) { /* a whole batch per lease (pyhome.c) */
		gm_remote_pyhome_claim(r, c);
		return;
	}
	if (c->vpid && c->pub_data) { /* its publish waits for its last samples: then */
		c->claim_pending = true;
		return;
	}
	if (c->ahead.vpid) { /* a worker holds two leases at most */
		refuse(c, "claim", "a claim while it holds a lease and one ahead");
		return;
	}
	uint32_t vpid = next_vpid(r);
	uint64_t task;
	int slot = c->vpid && !room_ahead(r, j) ? -EAGAIN : gm_ring_claim(j->ring, vpid, &task);
	if (slot < 0)
		l.status = slot == -EAGAIN ? -EAGAIN : -ENODATA;
	else
		grant(j, c, vpid, (uint32_t)slot, task, words, &dlen, &l);
	if (slot == -EAGAIN)
		count_none(j);
	gm_remote_conn_send(c, AM_LEASE, &l, sizeof(l), words, dlen);
}

/* Error records (a published batch's, or a sample's), merged once per sample into the
 * slot's. */
static void merge_recs(struct gm_slot_ctl *ctl, const struct gm_slot_err *e, uint32_t n)
{
	for (uint32_t k = 0; k < n; k++) {
		bool seen = false;
		for (uint32_t q = 0; q < ctl->n_recs && !seen; q++)
			seen = ctl->errs[q].sample == e[k].sample;
		if (!seen && ctl->n_recs < GM_RING_MAX_ERRS) {
			struct gm_slot_err *d = &ctl->errs[ctl->n_recs++];
			*d = e[k];
			d->msg[GM_RING_MSG - 1] = '\0';
			for (char *ch = d->msg; *ch; ch++) /* the trainer prints it */
				if ((unsigned char)*ch < 0x20 || *ch == 0x7f)
					*ch = '?';
		}
	}
}

void gm_remote_home_merge_recs(struct gm_slot_ctl *ctl, const struct gm_slot_err *e, uint32_t n)
{
	merge_recs(ctl, e, n);
}

/* A sample's bytes are in the slot: its label, id and done bit (the lease was
 * checked when it came, and is checked again: it may have been taken back). */
static void sample_landed(struct hjob *j, struct conn *c, uint32_t slot, const struct m_sample *s)
{
	gm_ring_labels(j->ring, slot)[s->pos] = s->label;
	gm_ring_ids(j->ring, slot)[s->pos] = s->id;
	if (s->bad)
		atomic_fetch_or_explicit(&gm_ring_err_bits(j->ring, slot)[s->pos / 64],
					 1ull << (s->pos % 64), memory_order_relaxed);
	if (s->has_rec) /* (check.c: only with a bad sample, naming its position's) */
		merge_recs(gm_ring_ctl(j->ring, slot), &s->rec, 1);
	/* pairs with the acquire loads of whoever resumes or publishes the task */
	atomic_fetch_or_explicit(&gm_ring_done_bits(j->ring, slot)[s->pos / 64],
				 1ull << (s->pos % 64), memory_order_release);
	c->lease_ms = gm_now_ms();
	c->samples++;
	j->samples++;
	j->tick_samples++;
	j->bytes += j->sb;
}

/* A rendezvous receive in flight: what it is for (its connection may be gone
 * when it completes, so it names the job and the lease, not the connection). */
struct rx {
	struct gm_remote *r;
	uint64_t token;
	struct m_sample s;
};

static void publish_now(struct gm_remote *r, struct conn *c, const struct m_publish *p,
			const void *data, size_t len);

static void rx_done(void *req, ucs_status_t st, size_t length, void *user)
{
	struct rx *x = user;
	struct gm_remote *r = x->r;
	struct hjob *j = gm_remote_home_job(r, x->token);
	struct conn *c = gm_remote_home_worker(r, j, x->s.vpid);
	if (c) {
		c->inflight--;
		if (st == UCS_OK && length == j->sb && lease_held(c, x->s.vpid, x->s.task))
			sample_landed(j, c, c->slot, &x->s);
		else if (st != UCS_OK)
			gm_remote_conn_kill(c, "%s: a sample's transfer failed: %s", c->ip,
					    ucs_status_string(st));
		if (!c->inflight && c->pub_data && c->st != C_DEAD) {
			unsigned char *d = c->pub_data;
			c->pub_data = NULL;
			publish_now(r, c, &c->pub, d, c->pub_len);
			free(d);
			if (c->claim_pending && c->st != C_DEAD) {
				c->claim_pending = false;
				gm_remote_home_on_claim(r, c);
			}
		}
	}
	if (req)
		ucp_request_free(req);
	free(x);
}

/* A sample: checked against the lease before any byte of it lands. Eager ones
 * are copied now; rendezvous ones are received straight into the slot (no copy
 * of ours; UCX's zero-copy where the transport has it). */
void gm_remote_home_on_sample(struct gm_remote *r, struct conn *c, const struct m_sample *s,
			      void *data, size_t len, bool rndv)
{
	struct hjob *j = c->job;
	if (c->role != ROLE_WORKER || !j) {
		gm_remote_conn_kill(c, "%s: a sample from a connection that is not a remote worker",
				    c->ip);
		return;
	}
	if (j->py) {
		refuse(c, "sample", "a sample for a Python job (its batches come whole)");
		return;
	}
	if (!lease_held(c, s->vpid, s->task)) {
		j->fenced++; /* a lease taken back: its writer is fenced */
		return;
	}
	char why[200];
	struct gm_remote_expect e = expect_of(j, c);
	if (!gm_remote_check_sample_msg(&e, s, len, j->sb, why, sizeof(why))) {
		refuse(c, "sample", why);
		return;
	}
	uint64_t *seen = &seen_words(j, c->slot)[s->pos / 64], bit = 1ull << (s->pos % 64);
	if (*seen & bit) { /* not landed, and no progress: the deadline runs on */
		if (!c->resent_said)
			gm_remote_logf_from(
			    &r->net, c->ip,
			    "remote worker at %s: refused a sample sent again (position %u "
			    "of batch %" PRIu64 "): dropped; it does not extend the lease",
			    c->ip, s->pos, c->task % j->bpe);
		c->resent_said = true;
		return;
	}
	*seen |= bit;
	uint8_t *dst = (uint8_t *)gm_ring_data(j->ring, c->slot) + (uint64_t)s->pos * j->sb;
	if (!rndv) {
		memcpy(dst, data, len);
		sample_landed(j, c, c->slot, s);
		return;
	}
	struct rx *x = malloc(sizeof(*x));
	if (!x) {
		gm_remote_conn_kill(c, "out of memory receiving a sample");
		return;
	}
	*x = (struct rx){.r = r, .token = j->token, .s = *s};
	gm_remote_home_recv(r, c, data, dst, len, rx_done, x, "a sample");
}

void gm_remote_home_on_publish(struct gm_remote *r, struct conn *c, const struct m_publish *p,
			       const void *data, size_t len)
{
	struct hjob *j = c->job;
	if (c->role != ROLE_WORKER || !j) {
		gm_remote_conn_kill(
		    c, "%s: a publish from a connection that is not a remote worker", c->ip);
		return;
	}
	if (j->py) {
		refuse(c, "publish", "a publish for a Python job (its batches come whole)");
		return;
	}
	if (!lease_held(c, p->vpid, p->task)) {
		j->fenced++;
		return;
	}
	if (c->inflight) { /* its last samples are still landing: publish after them */
		free(c->pub_data);
		c->pub_data = malloc(len ? len : 1);
		if (!c->pub_data) {
			gm_remote_conn_kill(c, "out of memory");
			return;
		}
		memcpy(c->pub_data, data, len);
		c->pub_len = len;
		c->pub = *p;
		return;
	}
	publish_now(r, c, p, data, len);
}

/* A publish's every value against c's lease, before anything of it lands: its
 * sizes, status, err bits and records (check.h); a complete batch has every
 * position done, a failed one an error record. true, or false with why. */
static bool publish_ok(const struct hjob *j, const struct conn *c, const struct m_publish *p,
		       const void *data, size_t len, char *why, size_t wl)
{
	struct gm_remote_expect e = expect_of(j, c);
	const struct gm_slot_ctl *ctl = gm_ring_ctl(j->ring, c->slot);
	_Atomic uint64_t *done = gm_ring_done_bits(j->ring, c->slot);
	uint32_t ndone = 0;
	for (uint32_t q = 0; q < j->words; q++)
		ndone += (uint32_t)__builtin_popcountll(
		    atomic_load_explicit(&done[q], memory_order_acquire));
	return gm_remote_check_publish(&e, p, data, len, j->words, ndone, ctl->n_recs, why, wl);
}

static uint64_t at_most(uint64_t v, uint64_t cap)
{
	return v < cap ? v : cap;
}

static void publish_now(struct gm_remote *r, struct conn *c, const struct m_publish *p,
			const void *data, size_t len)
{
	struct hjob *j = c->job;
	char why[200];
	if (!j || !lease_held(c, p->vpid, p->task))
		return;
	if (!publish_ok(j, c, p, data, len, why, sizeof(why))) {
		refuse(c, "publish", why);
		return;
	}
	struct gm_slot_ctl *ctl = gm_ring_ctl(j->ring, c->slot);
	_Atomic uint64_t *err = gm_ring_err_bits(j->ring, c->slot);
	const uint64_t *ew = data;
	uint32_t nerr = 0;
	for (uint32_t q = 0; q < j->words; q++)
		nerr += (uint32_t)__builtin_popcountll(
		    atomic_fetch_or_explicit(&err[q], ew[q], memory_order_relaxed) | ew[q]);
	merge_recs(ctl, (const struct gm_slot_err *)(ew + j->words), p->n_recs);
	ctl->n_errors = nerr;
	ctl->status = p->status;
	/* the writer's timings and bytes are statistics: none beyond the lease's age
	 * (one process, one thread) or the files it may have read */
	uint64_t age = (uint64_t)(gm_now_ms() - c->lease_since_ms + 1) * 1000000u;
	ctl->read_ns += at_most(p->ns[0], age);
	ctl->decode_ns += at_most(p->ns[1], age);
	ctl->augment_ns += at_most(p->ns[2], age);
	ctl->write_ns += at_most(p->ns[3], age);
	ctl->read_bytes += at_most(p->read_bytes, j->read_cap[c->slot]);
	ctl->preempt_ns += at_most(p->preempt_ns, age);
	ctl->remote = 1; /* its times are the lender's: not a local worker's rate */
	c->vpid = 0;
	gm_ring_publish(j->ring, c->slot);
	if (c->ahead.vpid) { /* the lease asked for ahead is the one it makes now */
		c->vpid = c->ahead.vpid;
		c->slot = c->ahead.slot;
		c->task = c->ahead.task;
		c->nb = c->ahead.nb;
		c->lease_ms = c->lease_since_ms = gm_now_ms();
		c->resent_said = false;
		c->ahead.vpid = 0;
	}
	(void)r;
}

/* ---- asking peers for workers ------------------------------------------------ */

static const char *refusal_words(int32_t status);

/* A LEND (a Python job's: a PYLEND, carrying its spec only where the peer
 * asked for it) of n workers of j to peer p. */
static void ask_peer(struct gm_remote *r, struct hjob *j, int p, uint32_t n)
{
	struct m_lend m = {.token = j->token,
			   .fingerprint = j->fingerprint,
			   .nsamples = j->nsamples,
			   .workers = n,
			   .bpe = j->bpe,
			   .lease_ms = j->lease_ms,
			   .port = r->port};
	bool spec = j->py && n && j->spec_wanted[p];
	int rc = j->py ? gm_remote_pyhome_send_lend(r, j, r->peers[p].c, n, spec)
		       : gm_remote_conn_send(r->peers[p].c, AM_LEND, &m, sizeof(m), &j->req,
					     sizeof(j->req));
	if (rc == 0) {
		if (n != j->said[p]) /* (not each ask again after a refusal) */
			gm_remote_logf(&r->net,
				       "job %016" PRIx64 ": asks peer %s for %u remote workers "
				       "(was %u)",
				       j->token, r->peers[p].addr, n, j->said[p]);
		j->said[p] = j->asked[p] = n;
		j->answered[p] = false;
		j->ask_ms[p] = gm_now_ms();
		j->lends++;
		if (spec) {
			j->spec_wanted[p] = false;
			j->spec_sent_ms[p] = j->ask_ms[p];
		}
	}
}

/* Peer p refused job j at now: not asked again for RETRY_MS, then for twice
 * as long with each refusal while the peer stays in the same state (its
 * gen), up to BACKOFF_MAX_MS; the job's workers are spread again now, over
 * the others. A refusal costs the peer one LEND and one line per wait, not
 * one per tick (a refusing peer was asked ~600 times a second, a Python
 * job's whole spec each time). */
static void back_off(struct gm_remote *r, struct hjob *j, int p, int64_t now)
{
	uint32_t gen = r->peers[p].gen;
	int64_t b = j->backoff_ms[p] && j->backoff_gen[p] == gen ? 2 * j->backoff_ms[p] : RETRY_MS;
	j->backoff_ms[p] = b < BACKOFF_MAX_MS ? b : BACKOFF_MAX_MS;
	j->backoff_gen[p] = gen;
	j->next_ms[p] = now + j->backoff_ms[p];
	j->spread_ms = 0;
}

/* Job j may ask peer p now: it did not refuse j, its wait has passed, or its
 * state changed since (it reconnected, came back up, or can lend again):
 * then it waits RETRY_MS after its refusal, no longer. */
static bool may_ask(const struct gm_remote *r, const struct hjob *j, int p, int64_t now)
{
	if (!j->backoff_ms[p] || now >= j->next_ms[p])
		return true;
	return j->backoff_gen[p] != r->peers[p].gen && now - j->refused_ms[p] >= RETRY_MS;
}

/* The peer is up and has said what it can lend (a heartbeat). */
static bool peer_live(const struct gm_remote *r, int p)
{
	const struct peer *pe = &r->peers[p];
	return pe->used && pe->c && pe->c->st == C_OK && !pe->down && pe->c->beat.seq;
}

/* What peer p can lend job j, from its last heartbeat: its workers less those it runs
 * for other jobs, this home's others included, its idle cores in all and its slots
 * (gm_policy_spread ranks the lenders by a slot's share and asks none under
 * GM_POLICY_LEND_MIN_CORES in all); none while j waits after its refusal (may_ask), at
 * most what it granted while that answer is fresh. Counting this home's other jobs'
 * workers as free made a second job see the slot its sibling held: it asked, was
 * granted none, saw none, asked none, saw it again, every tick of its life (a 0.15-core
 * home, seed 1 of the scenario family). */
static struct gm_policy_lender lender_of(const struct gm_remote *r, const struct hjob *j, int p,
					 int64_t now, bool refusals)
{
	struct gm_policy_lender l = {0};
	const struct m_beat *b = &r->peers[p].c->beat;
	/* others: the other homes' (lent less for_you), and this home's other
	 * jobs' as granted. Not lent less this job's grant: a peer down for a
	 * second (a link cut shorter than the lender's QUIET_MS) keeps running
	 * the workers whose grant peer_down forgot; they then counted as someone
	 * else's, the job saw "the live peers can lend it 0" and asked for none
	 * until they ended (test_remote case 34's healed link: no remote sample
	 * after it in 2 runs of 22) */
	uint32_t sibs = 0;
	for (int k = 0; k < MAX_HJOBS; k++)
		if (r->hjobs[k].used && &r->hjobs[k] != j)
			sibs += r->hjobs[k].granted[p];
	uint32_t others = b->lent - b->for_you + (sibs < b->for_you ? sibs : b->for_you);
	if (!b->slots || others >= b->slots)
		return l;
	l.workers = b->slots - others;
	l.cores = b->mcores / 1000.0;
	l.slots = b->slots;
	if (refusals && !may_ask(r, j, p, now))
		l.workers = 0;
	else if (j->answered[p] && j->granted[p] < j->asked[p] && now - j->ask_ms[p] < RETRY_MS)
		l.workers = j->granted[p] < l.workers ? j->granted[p] : l.workers;
	return l;
}

/* Spread the job's wish over the live peers, the idlest first, each keeping
 * the workers it runs for the job (gm_policy_spread over their heartbeats,
 * sticky), again every SPREAD_MS or when the
 * wish changes; ask each for its share when it changes, and again every
 * RETRY_MS while a peer gives less than asked (its idle CPUs change); a peer
 * that refused the job, only once its wait has passed (back_off). */
static void lend_tick(struct gm_remote *r, struct hjob *j, int64_t now)
{
	if (j->want != j->spread_want || now - j->spread_ms >= SPREAD_MS) {
		struct gm_policy_lender l[MAX_PEERS] = {{0}}, all[MAX_PEERS] = {{0}};
		uint32_t ask[MAX_PEERS], prev[MAX_PEERS];
		for (int p = 0; p < r->npeers; p++)
			if (peer_live(r, p)) {
				l[p] = lender_of(r, j, p, now, true);
				all[p] = lender_of(r, j, p, now, false);
			}
		/* sticky: each peer keeps what it runs for the job unless it needs
		 * it back or another is idler by more than a worker */
		for (int p = 0; p < r->npeers; p++)
			prev[p] = peer_live(r, p) ? j->spread[p] : 0;
		gm_policy_spread(l, (size_t)r->npeers, j->want, prev, j->spread);
		/* what no peer has room for, refusals aside (those are said apart) */
		uint32_t placed = gm_policy_spread(all, (size_t)r->npeers, j->want, NULL, ask);
		if (j->want - placed != j->unplaced && j->want > placed)
			gm_remote_logf(&r->net,
				       "job %016" PRIx64
				       ": wants %u remote workers, the live peers "
				       "can lend it %u (capacity)",
				       j->token, j->want, placed);
		j->unplaced = j->want - placed;
		j->spread_want = j->want;
		j->spread_ms = now;
	}
	for (int p = 0; p < r->npeers; p++) {
		if (!peer_live(r, p)) {
			j->granted[p] = j->asked[p] = j->said[p] = 0;
			continue;
		}
		uint32_t n = j->spread[p];
		if (n && !may_ask(r, j, p, now))
			continue; /* (the spread leaves it out from its next round) */
		bool short_ = j->granted[p] < n && now - j->ask_ms[p] >= RETRY_MS;
		if (n != j->asked[p] || short_)
			ask_peer(r, j, p, n);
	}
}

void gm_remote_home_on_lent(struct gm_remote *r, struct conn *c, const struct m_lent *m)
{
	struct hjob *j = gm_remote_home_job(r, m->token);
	if (c->peer < 0 || !j)
		return; /* an answer about a job that has ended */
	/* a peer runs at most GM_MAX_WORKERS for a job (lender.c); its words are
	 * printed: only what prints */
	char msg[sizeof(m->msg) + 1];
	int p = c->peer;
	int64_t now = gm_now_ms();
	const char *ip = r->peers[p].ip;
	uint32_t granted = gm_remote_check_lent(m, msg);
	if (m->status == PY_SPEC_WANTED && j->py) {
		/* it would lend the job and does not hold its spec: the next ask
		 * carries it (at once), unless one did within RETRY_MS (this is
		 * an answer to an ask before it, or a lender that keeps losing it:
		 * the ask again of a peer that gives less takes it then) */
		if (now - j->spec_sent_ms[p] >= RETRY_MS) {
			j->spec_wanted[p] = true;
			j->asked[p] = 0;
		}
		return;
	}
	if (m->status && (m->status != j->refused[p] || j->granted[p])) {
		gm_remote_logf_from(&r->net, ip, "peer %s lends no workers: %s", r->peers[p].addr,
				    msg);
		gm_remote_logf_from(&r->net, ip, "job %016" PRIx64 ": peer %s refused it: %s",
				    j->token, r->peers[p].addr, refusal_words(m->status));
	} else if (!m->status && granted != j->granted[p])
		gm_remote_logf_from(
		    &r->net, ip, "peer %s runs %u remote workers for job %016" PRIx64 "%s",
		    r->peers[p].addr, granted, j->token,
		    granted < j->asked[p] ? " (fewer than asked: its capacity)" : "");
	j->granted[p] = m->status ? 0 : granted;
	j->answered[p] = true;
	j->refusals += m->status != 0;
	j->refused[p] = m->status > 0 ? -EPROTO : m->status;
	j->refused_ms[p] = now;
	if (m->status) {
		j->asked[p] = 0; /* it ended the job there: nothing to take back */
		back_off(r, j, p, now);
	} else {
		j->backoff_ms[p] = 0;
	}
}

void gm_remote_home_peer_down(struct gm_remote *r, int p, const char *why)
{
	int n = 0;
	for (int i = 0; i < MAX_CONNS; i++) {
		struct conn *c = r->net.conns[i];
		if (c && c->role == ROLE_WORKER && c->st != C_DEAD &&
		    gm_remote_peer_of(r, c) == p) {
			n += (c->vpid != 0) + (c->ahead.vpid != 0);
			gm_remote_conn_kill(c, "its lender %s is down (%s)", r->peers[p].addr, why);
		}
	}
	for (int i = 0; i < MAX_HJOBS; i++) {
		r->hjobs[i].asked[p] = r->hjobs[i].granted[p] = r->hjobs[i].said[p] = 0;
		r->hjobs[i].ask_ms[p] = 0;
		r->hjobs[i].spec_wanted[p] = false; /* (it ends our jobs: then it asks) */
	}
	if (n)
		gm_remote_logf_from(&r->net, r->peers[p].ip,
				    "peer %s is down: the %d lease%s its workers hold are "
				    "taken back now",
				    r->peers[p].addr, n, n == 1 ? "" : "s");
}

/* ---- the tick ---------------------------------------------------------------- */

static int first_used(const struct gm_remote *r)
{
	for (int i = 0; i < MAX_HJOBS; i++)
		if (r->hjobs[i].used)
			return i;
	return -1;
}

/* Each peer's delivered rate over the window (its workers' connections come from
 * its address), then the connections' counts start again. */
static void peer_rates(struct gm_remote *r, int64_t window_ms)
{
	for (int p = 0; p < r->npeers; p++) {
		uint64_t n = 0;
		r->peers[p].workers = 0;
		for (int k = 0; r->peers[p].used && k < MAX_CONNS; k++) {
			struct conn *c = r->net.conns[k];
			if (c && c->role == ROLE_WORKER && c->st == C_OK &&
			    gm_remote_peer_of(r, c) == p) {
				n += c->samples;
				c->samples = 0;
				r->peers[p].workers++;
			}
		}
		r->peers[p].rate = window_ms > 0 ? (double)n * 1000.0 / (double)window_ms : 0;
	}
}

/* The leases' deadlines: no sample at a new position for the job's deadline,
 * or LEASE_BOUND deadlines since the claim whatever came; a Python job's lease
 * (a whole batch, pyhome.c): no batch for the deadline since the claim, as a
 * local Python worker's batch that makes no progress for it. The endpoint is
 * closed first (then nothing of the writer lands anywhere, its transfers into
 * the slot included), then the lease is taken back. */
static void leases_tick(struct gm_remote *r, int64_t now)
{
	for (int i = 0; i < MAX_CONNS; i++) {
		struct conn *c = r->net.conns[i];
		if (!c || c->st != C_OK || !c->vpid || !c->job)
			continue;
		int64_t d = c->job->lease_ms;
		if (now - c->lease_ms >= d && c->job->py) /* a whole batch, no samples */
			gm_remote_conn_kill(c,
					    "no batch %" PRId64 " ms after its claim (lease "
					    "deadline %u ms)",
					    now - c->lease_ms, c->job->lease_ms);
		else if (now - c->lease_ms >= d)
			gm_remote_conn_kill(c, "no sample for %u ms (lease deadline)",
					    c->job->lease_ms);
		else if (now - c->lease_since_ms >= LEASE_BOUND * d)
			gm_remote_conn_kill(c,
					    "held its lease %" PRId64
					    " ms, %d x the lease deadline "
					    "(the bound of a lease)",
					    now - c->lease_since_ms, LEASE_BOUND);
		if (c->st != C_DEAD)
			continue;
		gm_remote_conn_bye(c); /* it ends at once, its lender's slot free again */
		gm_remote_conn_close(&r->net, c);
		gm_remote_home_revoke(r, c, c->why);
	}
}

/* The slots of j's ring past its head that are made (READY), or -1 where one is
 * free to claim (a worker may still take it: the others are not all idle). */
static int ring_made(const struct hjob *j, uint64_t head)
{
	const struct gm_ring_hdr *h = gm_ring_hdr(j->ring);
	int made = 0;
	for (uint64_t t = head + 1; t < head + j->nslots && t < h->end_task; t++) {
		struct gm_slot_ctl *ctl = gm_ring_ctl(j->ring, (uint32_t)(t & (j->nslots - 1)));
		if (atomic_load_explicit(&ctl->task, memory_order_acquire) != t)
			continue;
		uint32_t st =
		    GM_SLOT_STATE(atomic_load_explicit(&ctl->state, memory_order_relaxed));
		if (st == GM_SLOT_FREE)
			return -1;
		made += st == GM_SLOT_READY;
	}
	return made;
}

/* The head of j's ring held by a remote worker past HEAD_MS of its trainer's
 * wait, no slot free and two batches after it made meanwhile (where the ring
 * has them: a ring no larger than its workers is always full, and a batch that
 * takes every worker more than HEAD_MS is no sign of a slow one): the
 * connection ends and the lease is revoked, as at a lease deadline (the
 * worker's lender starts another). */
static void head_tick(struct gm_remote *r, struct hjob *j, int64_t now)
{
	struct gm_ring_hdr *h = gm_ring_hdr(j->ring);
	uint64_t since = atomic_load_explicit(&h->c_waiting, memory_order_relaxed);
	if (since <= 1 || (int64_t)(gm_now_ns() - since) < (int64_t)HEAD_MS * 1000000)
		return; /* not waiting, an older consumer (no start), or not for long */
	uint64_t head = atomic_load_explicit(&h->consumed, memory_order_acquire);
	uint32_t w = atomic_load_explicit(
	    &gm_ring_ctl(j->ring, (uint32_t)(head & (j->nslots - 1)))->state, memory_order_relaxed);
	uint32_t pid = GM_SLOT_PID(w);
	int made = GM_SLOT_STATE(w) == GM_SLOT_CLAIMED && pid >= GM_REMOTE_VPID_MIN
		       ? ring_made(j, head)
		       : -1;
	if (made < (j->nslots > 2 ? 2 : 1))
		return;
	for (int i = 0; i < MAX_CONNS; i++) {
		struct conn *c = r->net.conns[i];
		if (!c || c->st != C_OK || c->job != j ||
		    (c->vpid != pid && c->ahead.vpid != pid) || now - c->lease_since_ms < HEAD_MS)
			continue;
		gm_remote_conn_kill(c,
				    "held the batch its trainer waited for %" PRIu64
				    " ms while every other slot of the ring was made or being "
				    "made, %d of them made (a worker several times slower than "
				    "the job's others)",
				    (gm_now_ns() - since) / 1000000, made);
		j->head_revoked++;
		gm_remote_conn_bye(c);
		gm_remote_conn_close(&r->net, c);
		gm_remote_home_revoke(r, c, c->why);
		return;
	}
}

/* Lenders that run fewer workers for our jobs than they granted them (their
 * heartbeats' for_you) for SHORT_MS, with no ask of ours as recent: they ended
 * them on their own (a lender stops the workers of a home it has not heard
 * from for QUIET_MS, though the home, hearing the lender all the
 * while, never took it for down; or it restarted). What they granted is
 * forgotten, and lend_tick asks them again. */
static void short_tick(struct gm_remote *r, int64_t now)
{
	for (int p = 0; p < r->npeers; p++) {
		struct peer *pe = &r->peers[p];
		uint32_t g = 0;
		int64_t asked = 0;
		for (int i = 0; i < MAX_HJOBS; i++)
			if (r->hjobs[i].used) {
				g += r->hjobs[i].granted[p];
				asked =
				    r->hjobs[i].ask_ms[p] > asked ? r->hjobs[i].ask_ms[p] : asked;
			}
		if (!peer_live(r, p) || g <= pe->c->beat.for_you) {
			pe->short_ms = 0;
			continue;
		}
		if (!pe->short_ms)
			pe->short_ms = now;
		if (now - pe->short_ms < SHORT_MS || now - asked < SHORT_MS)
			continue;
		gm_remote_logf_from(
		    &r->net, pe->ip,
		    "peer %s runs %u remote workers for our jobs, not the %u it granted: "
		    "asking it again",
		    pe->addr, pe->c->beat.for_you, g);
		for (int i = 0; i < MAX_HJOBS; i++) {
			r->hjobs[i].asked[p] = r->hjobs[i].granted[p] = r->hjobs[i].said[p] = 0;
			r->hjobs[i].ask_ms[p] = 0;
		}
		pe->short_ms = 0;
	}
}

void gm_remote_home_tick(struct gm_remote *r, int64_t now)
{
	leases_tick(r, now);
	short_tick(r, now);
	for (int i = 0; i < MAX_HJOBS; i++) {
		struct hjob *j = &r->hjobs[i];
		if (!j->used)
			continue;
		head_tick(r, j, now);
		lend_tick(r, j, now);
		if (now - j->tick_ms >= 1000) {
			if (i == first_used(r))
				peer_rates(r, now - j->tick_ms);
			uint32_t n = 0;
			for (int k = 0; k < MAX_CONNS; k++)
				n += r->net.conns[k] && r->net.conns[k]->job == j &&
				     r->net.conns[k]->st == C_OK;
			j->rate = (double)j->tick_samples * 1000.0 / (double)(now - j->tick_ms);
			j->per_worker = n ? j->rate / n : 0;
			j->tick_samples = 0;
			j->tick_ms = now;
		}
	}
}

/* ---- the jobs attached here -------------------------------------------------- */

/* What the job's leases are checked with (check.h): its batches over the home's
 * index, the permutation's room, per slot the expectations. 0 or -errno. */
static int expect_init(struct hjob *j, const struct gm_dataset *ds, char *err, size_t errlen)
{
	struct gm_pool_cfg pc;
	int rc = j->nsamples ? gm_remote_job_batches(&j->req, ds, &pc, err, errlen) : -EINVAL;
	if (rc) {
		if (!j->nsamples)
			gm_errf(err, errlen, "a dataset without samples");
		return rc;
	}
	j->wc = pc.w;
	j->nsub = j->nsamples - 1 < GM_WORKER_SUBSTITUTE_TRIES ? (uint32_t)j->nsamples - 1
							       : GM_WORKER_SUBSTITUTE_TRIES;
	size_t per = (size_t)j->batch + j->nsub;
	j->perm = j->wc.shuffle ? malloc(j->nsamples * sizeof(*j->perm)) : NULL;
	j->exp_id = malloc(j->nslots * per * sizeof(*j->exp_id));
	j->exp_label = malloc(j->nslots * per * sizeof(*j->exp_label));
	j->seen = calloc((size_t)j->nslots * j->words, sizeof(*j->seen));
	j->read_cap = calloc(j->nslots, sizeof(*j->read_cap));
	if ((j->wc.shuffle && !j->perm) || !j->exp_id || !j->exp_label || !j->seen ||
	    !j->read_cap) {
		gm_errf(err, errlen, "out of memory for the checks of remote leases");
		return -ENOMEM;
	}
	return 0;
}

void gm_remote_home_drop(struct hjob *j)
{
	gm_ring_destroy(j->ring);
	free(j->perm);
	free(j->exp_id);
	free(j->exp_label);
	free(j->seen);
	free(j->read_cap);
	free(j->spec);
	memset(j, 0, sizeof(*j));
}

int gm_remote_home_job_new(struct gm_remote *r, int ring_fd, const struct gm_node_req *req,
			   uint32_t lease_ms, struct hjob **out, char *err, size_t errlen)
{
	struct hjob *j = NULL;
	for (int i = 0; i < MAX_HJOBS && !j; i++)
		if (!r->hjobs[i].used)
			j = &r->hjobs[i];
	if (!j) {
		gm_errf(err, errlen, "too many jobs");
		return -EMFILE;
	}
	memset(j, 0, sizeof(*j));
	int rc = gm_ring_attach(&j->ring, ring_fd);
	if (rc) {
		gm_errf(err, errlen, "mapping the job's ring for remote workers: %s",
			strerror(-rc));
		return rc;
	}
	const struct gm_ring_hdr *h = gm_ring_hdr(j->ring);
	uint8_t rnd[GM_AUTH_NONCE];
	gm_auth_nonce(rnd);
	memcpy(&j->token, rnd, sizeof(j->token));
	j->req = *req;
	j->lease_ms = lease_ms;
	j->batch = h->batch_size;
	j->sb = h->sample_bytes;
	j->words = (h->batch_size + 63) / 64;
	j->nslots = h->nslots;
	*out = j;
	return 0;
}

int gm_remote_home_add(struct gm_remote *r, int ring_fd, const struct gm_node_req *req,
		       const struct gm_dataset *ds, uint32_t bpe, uint32_t lease_ms,
		       uint64_t *token, char *err, size_t errlen)
{
	struct hjob *j;
	int rc = gm_remote_home_job_new(r, ring_fd, req, lease_ms, &j, err, errlen);
	if (rc)
		return rc;
	j->fingerprint = gm_dataset_fingerprint(ds);
	j->nsamples = gm_dataset_count(ds);
	j->bpe = bpe;
	rc = expect_init(j, ds, err, errlen);
	if (!rc && j->wc.batches_per_epoch != bpe) {
		gm_errf(err, errlen, "the job's batches differ from the agent's");
		rc = -ESTALE;
	}
	if (rc) {
		gm_remote_home_drop(j);
		return rc;
	}
	j->tick_ms = gm_now_ms();
	j->used = true;
	*token = j->token;
	return 0;
}

void gm_remote_home_remove(struct gm_remote *r, uint64_t token)
{
	struct hjob *j = gm_remote_home_job(r, token);
	if (!j)
		return;
	if (j->none || j->head_revoked)
		gm_remote_logf(
		    &r->net,
		    "job %016" PRIx64 ": %" PRIu64 " claims answered 'no batch free', %" PRIu64
		    " of them while its trainer waited: for a batch a remote worker made %" PRIu64
		    ", a local one %" PRIu64 "; %" PRIu64
		    " remote leases of the batch it waited for revoked (HEAD_MS)",
		    j->token, j->none, j->none_starved, j->none_head_remote, j->none_head_local,
		    j->head_revoked);
	for (int p = 0; p < r->npeers; p++)
		if (j->asked[p] && r->peers[p].c && r->peers[p].c->st == C_OK) {
			struct m_lend m = {.token = j->token, .workers = 0, .port = r->port};
			if (j->py)
				gm_remote_pyhome_send_lend(r, j, r->peers[p].c, 0, false);
			else
				gm_remote_conn_send(r->peers[p].c, AM_LEND, &m, sizeof(m), &j->req,
						    sizeof(j->req));
		}
	for (int i = 0; i < MAX_CONNS; i++) {
		struct conn *c = r->net.conns[i];
		if (c && c->job == j) {
			gm_remote_conn_kill(c, "job ended");
			gm_remote_conn_bye(c);
			gm_remote_conn_close(&r->net, c); /* before the ring is unmapped */
			gm_remote_home_revoke(r, c, "its job ended");
			c->job = NULL;
		}
	}
	gm_remote_home_drop(j);
}

void gm_remote_home_want(struct gm_remote *r, uint64_t token, uint32_t n)
{
	struct hjob *j = gm_remote_home_job(r, token);
	if (j)
		j->want = n > GM_MAX_WORKERS ? GM_MAX_WORKERS : n;
}

/* A refusal's status in the words --status and the log use. */
static const char *refusal_words(int32_t status)
{
	switch (status) {
	case -EBUSY:
		return "peer busy (indexing other datasets)";
	case -EACCES:
		return "no --lend-root there for this dataset";
	case -ESTALE:
		return "the dataset differs there";
	case -EFBIG:
		return "the dataset is larger than the peer indexes";
	case -EINVAL:
		return "the job's options are refused there";
	case -ETIMEDOUT:
		return "indexing the dataset took too long there";
	case -EPERM:
		return "Python workers are not lent there (no --lend-python)";
	case -ENOEXEC:
		return "the job's interpreter is missing there or reports another Python";
	case -EPROTONOSUPPORT:
		return "another goldminer version there";
	default:
		return "the dataset cannot be checked there";
	}
}

/* Why job j has fewer remote workers than it wants, counted and in words. */
static void home_why(const struct gm_remote *r, const struct hjob *j, struct gm_remote_job_info *o)
{
	size_t off = 0;
	uint32_t granted = 0;
	o->why[0] = '\0';
	for (int p = 0; p < r->npeers; p++)
		granted += j->granted[p];
	if (granted >= j->want)
		return; /* it has what it asked for */
#define SAY(...)                                                                                   \
	do {                                                                                       \
		int k_ = snprintf(o->why + off, off < sizeof(o->why) ? sizeof(o->why) - off : 0,   \
				  __VA_ARGS__);                                                    \
		off += k_ > 0 ? (size_t)k_ : 0;                                                    \
	} while (0)
	for (int p = 0; p < r->npeers; p++) {
		const struct peer *pe = &r->peers[p];
		if (!pe->used)
			continue;
		if (j->refused[p]) {
			o->refused_busy += j->refused[p] == -EBUSY;
			o->refused_root += j->refused[p] == -EACCES;
			o->refused_dataset += j->refused[p] != -EBUSY && j->refused[p] != -EACCES;
			SAY("%s%s refused: %s", off ? "; " : "", pe->addr,
			    refusal_words(j->refused[p]));
		} else if (j->answered[p] && j->granted[p] < j->asked[p]) {
			o->short_capacity += j->asked[p] - j->granted[p];
			SAY("%s%s lends %u of %u (capacity)", off ? "; " : "", pe->addr,
			    j->granted[p], j->asked[p]);
		} else if (pe->down && j->want) {
			SAY("%s%s is down", off ? "; " : "", pe->addr);
		}
	}
	if (j->unplaced) {
		o->short_capacity += j->unplaced;
		SAY("%s%u more than the live peers can lend (capacity)", off ? "; " : "",
		    j->unplaced);
	}
#undef SAY
}

uint32_t gm_remote_home_lendable(struct gm_remote *r)
{
	uint32_t n = 0;
	for (int p = 0; p < r->npeers; p++) {
		const struct m_beat *b = peer_live(r, p) ? &r->peers[p].c->beat : NULL;
		if (b && b->lent - b->for_you < b->slots)
			n += b->slots - (b->lent - b->for_you);
	}
	return n;
}

void gm_remote_home_info(struct gm_remote *r, uint64_t token, struct gm_remote_job_info *o)
{
	struct hjob *j = gm_remote_home_job(r, token);
	memset(o, 0, sizeof(*o));
	if (!j)
		return;
	for (int k = 0; k < MAX_CONNS; k++)
		o->workers +=
		    r->net.conns[k] && r->net.conns[k]->job == j && r->net.conns[k]->st == C_OK;
	o->asked = j->want;
	for (int p = 0; p < r->npeers; p++)
		o->granted += j->granted[p];
	o->samples = j->samples;
	o->bytes = j->bytes;
	o->revoked = j->revoked;
	o->fenced = j->fenced;
	o->none_starved = j->none_starved;
	o->rate = j->rate;
	o->per_worker = j->per_worker;
	o->lends = j->lends;
	o->refusals = j->refusals;
	int64_t now = gm_now_ms();
	for (int p = 0; p < r->npeers; p++)
		if (peer_live(r, p))
			o->lendable += lender_of(r, j, p, now, false).workers;
	home_why(r, j, o);
}
