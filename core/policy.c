/*
 * policy.c - elastic data-worker allocation by marginal throughput gain (policy.h).
 *
 * The math. Job j with w workers trains at f(w) = min(R, w d). The gain of its
 * (w+1)-th worker is
 *
 *     g(w) = v * clamp(R - w d, 0, d)
 *
 * which takes at most three values as w grows: v d for the first nf = floor(R/d)
 * workers ("full" units), v (R - nf d) for one "partial" unit when R/d is not whole,
 * then 0. g is non-increasing, so each f is concave, and for a sum of concave
 * separable functions under one budget the greedy rule "give the next worker to the
 * job whose next worker gains most" is optimal (the classic water-filling argument:
 * an allocation is optimal iff no worker can move from job a to job b with
 * g_b(w_b) > g_a(w_a - 1)). max_workers cuts the curve (gain 0 beyond it) and
 * min_workers are granted first and never taken back.
 *
 * The state keeps that optimality condition incrementally with two indexed heaps:
 * "want" holds jobs whose next worker has positive gain, largest gain first; "have"
 * holds jobs above their minimum, smallest last-worker gain first. A rebalance
 * (1) takes workers back from "have" while more are allocated than the budget,
 * (2) hands free workers to the top of "want", (3) moves workers from the bottom of
 * "have" to the top of "want" while that strictly raises the objective. Because a
 * job's gains are constant over a "level" (all full units, or the single partial
 * unit), each step moves a whole level at once, so a step is O(log n) and the
 * number of steps is bounded by the number of jobs whose allocation changes, not by
 * the number of jobs or workers. Ties go to the smaller tag (older job) so the
 * result is deterministic; moves need a strict gain so equal jobs never thrash.
 *
 * It does not know about nodes, locality or time: the caller turns per-node and
 * remote costs into (R, d, min, max) and calls again when they change.
 *
 * gm_policy_borrow, at the end, is the other half of contract 8: whether a job
 * asks other hosts for workers, from its local capacity (workers x on-CPU rate,
 * capped by the cores they can use) against its demand, overruled by the
 * measured delivery while its consumer stalls. One formula, no state.
 *
 * gm_policy_lendable: what a host may lend, from its free budget and the
 * cores its own jobs leave idle (policy.h).
 *
 * gm_policy_spread places a job's remote workers on the peers that can lend
 * the most: one worker at a time to the lender with the most cores left
 * (its lendable cores x the share of its lendable workers not yet placed),
 * so the first goes to the idlest peer, and a peer lending 1.0 core takes
 * three workers for each one of a peer lending 0.25 when each has workers
 * enough. The --peers order only breaks ties (the lower index first). It is
 * sticky: a worker placed stays where it runs (each move is a new worker
 * process and a cold lease) unless its lender needs it back or another is
 * idler by more than a core; heartbeats that differ by a few hundredths of
 * a core no longer flip a job's worker from B to C and back.
 *
 * The rules that keep a plan right the first time and steady (policy.h):
 * gm_policy_demand_add smooths the measured demand over a window of the
 * job's own batch periods; gm_policy_ask_next decides the remote ask at once,
 * then only after the gap has moved by more than a worker for a settled
 * interval (upward at once while the consumer waits for more);
 * gm_policy_fed_remotely keeps a small host's local workers until remote ones
 * measurably deliver more; gm_policy_ring_workers makes a named worker count
 * a cap, never a plan.
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "goldminer/policy.h"

#define NOPOS		  UINT32_MAX
#define GM_POLICY_ASK_MAX 100000 /* a count past any cap (bounded() cuts it) */

struct pslot {
	double g_full, g_part; /* gain of a full unit and of the partial unit */
	uint64_t tag;
	uint32_t nf;   /* full units: min(floor(R/d), max) */
	uint32_t need; /* units with positive gain: nf (+1 partial), <= max */
	uint32_t min, w;
	uint32_t want_pos, have_pos;
	bool live, changed;
};

struct gm_policy {
	struct pslot *s;
	uint32_t nslots, cap;
	uint32_t *freel; /* free slot stack */
	uint32_t nfree;
	uint32_t *want, *have; /* heaps of slot ids */
	uint32_t nwant, nhave;
	uint32_t *chg; /* changed slots */
	uint32_t nchg;
	uint64_t budget, used;
};

/* Gain of the worker that would take the job from w to w+1. */
static double gain_up(const struct pslot *s, uint32_t w)
{
	if (w < s->nf)
		return s->g_full;
	return w < s->need ? s->g_part : 0.0;
}

/* Workers that can be added at gain_up(w) before the gain drops. */
static uint32_t level_up(const struct pslot *s, uint32_t w)
{
	if (w < s->nf)
		return s->nf - w;
	return w < s->need ? 1 : 0;
}

/* Workers that can be removed (down to min) at gain_up(w - 1); requires w > min. */
static uint32_t level_down(const struct pslot *s, uint32_t w)
{
	uint32_t u = w - 1;
	if (u >= s->need)
		return w - (s->need > s->min ? s->need : s->min);
	if (u >= s->nf)
		return 1;
	return u + 1 - s->min;
}

/* want: larger gain first, then smaller tag. */
static bool want_before(const struct gm_policy *p, uint32_t a, uint32_t b)
{
	double ga = gain_up(&p->s[a], p->s[a].w), gb = gain_up(&p->s[b], p->s[b].w);
	if (ga != gb)
		return ga > gb;
	return p->s[a].tag < p->s[b].tag;
}

/* have: smaller last-worker gain first, then larger tag (newest gives back first). */
static bool have_before(const struct gm_policy *p, uint32_t a, uint32_t b)
{
	double ga = gain_up(&p->s[a], p->s[a].w - 1), gb = gain_up(&p->s[b], p->s[b].w - 1);
	if (ga != gb)
		return ga < gb;
	return p->s[a].tag > p->s[b].tag;
}

/* One indexed binary heap, parameterised by which array/position field it uses. */
struct heapdesc {
	uint32_t **arr;
	uint32_t *n;
	size_t posoff;
	bool (*before)(const struct gm_policy *, uint32_t, uint32_t);
};

static uint32_t *posof(struct gm_policy *p, const struct heapdesc *h, uint32_t slot)
{
	return (uint32_t *)((char *)&p->s[slot] + h->posoff);
}

static void heap_set(struct gm_policy *p, const struct heapdesc *h, uint32_t i, uint32_t slot)
{
	(*h->arr)[i] = slot;
	*posof(p, h, slot) = i;
}

static void heap_fix(struct gm_policy *p, const struct heapdesc *h, uint32_t i)
{
	uint32_t *a = *h->arr, n = *h->n, x = a[i];
	while (i > 0) { /* sift up */
		uint32_t par = (i - 1) / 2;
		if (!h->before(p, x, a[par]))
			break;
		heap_set(p, h, i, a[par]);
		i = par;
	}
	for (;;) { /* sift down */
		uint32_t c = 2 * i + 1;
		if (c >= n)
			break;
		if (c + 1 < n && h->before(p, a[c + 1], a[c]))
			c++;
		if (!h->before(p, a[c], x))
			break;
		heap_set(p, h, i, a[c]);
		i = c;
	}
	heap_set(p, h, i, x);
}

static void heap_del(struct gm_policy *p, const struct heapdesc *h, uint32_t slot)
{
	uint32_t i = *posof(p, h, slot);
	uint32_t last = --*h->n;
	*posof(p, h, slot) = NOPOS;
	if (i != last) {
		heap_set(p, h, i, (*h->arr)[last]);
		heap_fix(p, h, i);
	}
}

static void heap_put(struct gm_policy *p, const struct heapdesc *h, uint32_t slot)
{
	uint32_t i = (*h->n)++;
	heap_set(p, h, i, slot);
	heap_fix(p, h, i);
}

/* Re-file a slot in both heaps after its w or parameters changed. */
static void refile(struct gm_policy *p, uint32_t slot)
{
	const struct heapdesc hw = {&p->want, &p->nwant, offsetof(struct pslot, want_pos),
				    want_before};
	const struct heapdesc hh = {&p->have, &p->nhave, offsetof(struct pslot, have_pos),
				    have_before};
	struct pslot *s = &p->s[slot];
	bool in_w = s->live && s->w < s->need, in_h = s->live && s->w > s->min;

	if (s->want_pos != NOPOS && !in_w)
		heap_del(p, &hw, slot);
	else if (s->want_pos != NOPOS)
		heap_fix(p, &hw, s->want_pos);
	else if (in_w)
		heap_put(p, &hw, slot);
	if (s->have_pos != NOPOS && !in_h)
		heap_del(p, &hh, slot);
	else if (s->have_pos != NOPOS)
		heap_fix(p, &hh, s->have_pos);
	else if (in_h)
		heap_put(p, &hh, slot);
}

static void set_w(struct gm_policy *p, uint32_t slot, uint32_t w)
{
	struct pslot *s = &p->s[slot];
	p->used = p->used - s->w + w;
	s->w = w;
	if (!s->changed) {
		s->changed = true;
		p->chg[p->nchg++] = slot;
	}
	refile(p, slot);
}

static int check_job(const struct gm_policy_job *j)
{
	if (!(j->worker_rate > 0) || !(j->gpu_rate >= 0) || !(j->weight > 0) ||
	    j->max_workers < j->min_workers || !isfinite(j->gpu_rate) ||
	    !isfinite(j->worker_rate) || !isfinite(j->weight))
		return -EINVAL;
	return 0;
}

/* Derive the gain curve (nf, need, g_full, g_part) from the job's rates. */
static void set_params(struct pslot *s, const struct gm_policy_job *j)
{
	double q = j->gpu_rate / j->worker_rate;
	double nfull = floor(q + 1e-9);
	double rem = j->gpu_rate - nfull * j->worker_rate;
	uint32_t nf, need;

	if (rem < 1e-9 * j->worker_rate)
		rem = 0;
	nf = nfull >= (double)j->max_workers ? j->max_workers : (uint32_t)nfull;
	need = nf;
	if (rem > 0 && nf < j->max_workers)
		need = nf + 1;
	s->nf = nf;
	s->need = need;
	s->g_full = j->weight * j->worker_rate;
	s->g_part = j->weight * rem;
	s->min = j->min_workers;
	s->tag = j->tag;
}

int gm_policy_create(struct gm_policy **out, uint64_t budget)
{
	struct gm_policy *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->budget = budget;
	*out = p;
	return 0;
}

void gm_policy_destroy(struct gm_policy *p)
{
	if (!p)
		return;
	free(p->s);
	free(p->freel);
	free(p->want);
	free(p->have);
	free(p->chg);
	free(p);
}

void gm_policy_set_budget(struct gm_policy *p, uint64_t budget)
{
	p->budget = budget;
}

static int grow(struct gm_policy *p)
{
	uint32_t nc = p->cap ? p->cap * 2 : 64;
	void *a;

	if (!(a = realloc(p->s, nc * sizeof(*p->s))))
		return -ENOMEM;
	p->s = a;
	if (!(a = realloc(p->freel, nc * sizeof(uint32_t))))
		return -ENOMEM;
	p->freel = a;
	if (!(a = realloc(p->want, nc * sizeof(uint32_t))))
		return -ENOMEM;
	p->want = a;
	if (!(a = realloc(p->have, nc * sizeof(uint32_t))))
		return -ENOMEM;
	p->have = a;
	if (!(a = realloc(p->chg, nc * sizeof(uint32_t))))
		return -ENOMEM;
	p->chg = a;
	p->cap = nc;
	return 0;
}

int gm_policy_add(struct gm_policy *p, const struct gm_policy_job *j, uint32_t *slot_out)
{
	uint32_t slot;
	int rc = check_job(j);

	if (rc)
		return rc;
	if (p->nfree) {
		slot = p->freel[--p->nfree];
	} else {
		if (p->nslots == p->cap && (rc = grow(p)))
			return rc;
		slot = p->nslots++;
		p->s[slot].changed = false;
	}
	struct pslot *s = &p->s[slot];
	set_params(s, j);
	s->w = 0;
	s->want_pos = s->have_pos = NOPOS;
	s->live = true;
	set_w(p, slot, j->min_workers);
	*slot_out = slot;
	return 0;
}

void gm_policy_remove(struct gm_policy *p, uint32_t slot)
{
	struct pslot *s = &p->s[slot];
	p->used -= s->w;
	s->w = 0;
	s->live = false;
	refile(p, slot);
	p->freel[p->nfree++] = slot;
}

int gm_policy_update(struct gm_policy *p, uint32_t slot, const struct gm_policy_job *j)
{
	struct pslot *s = &p->s[slot];
	uint32_t w = s->w;
	int rc = check_job(j);

	if (rc)
		return rc;
	set_params(s, j);
	if (w < j->min_workers)
		w = j->min_workers;
	if (w > j->max_workers)
		w = j->max_workers;
	if (w != s->w) {
		set_w(p, slot, w);
	} else {
		refile(p, slot);
	}
	return 0;
}

int gm_policy_rebalance(struct gm_policy *p)
{
	for (;;) {
		if (p->used > p->budget) { /* over budget: take back the least useful */
			if (!p->nhave)
				return -ENOSPC;
			uint32_t h = p->have[0], k = level_down(&p->s[h], p->s[h].w);
			uint64_t over = p->used - p->budget;
			if (k > over)
				k = (uint32_t)over;
			set_w(p, h, p->s[h].w - k);
			continue;
		}
		if (!p->nwant)
			break;
		uint32_t t = p->want[0], k = level_up(&p->s[t], p->s[t].w);
		if (p->used < p->budget) { /* free workers: to the largest gain */
			uint64_t fr = p->budget - p->used;
			if (k > fr)
				k = (uint32_t)fr;
			set_w(p, t, p->s[t].w + k);
			continue;
		}
		if (!p->nhave)
			break;
		uint32_t h = p->have[0];
		if (h == t || !(gain_up(&p->s[t], p->s[t].w) > gain_up(&p->s[h], p->s[h].w - 1)))
			break;
		uint32_t kd = level_down(&p->s[h], p->s[h].w);
		if (k > kd)
			k = kd;
		set_w(p, h, p->s[h].w - k); /* full budget: move a level, gain strictly up */
		set_w(p, t, p->s[t].w + k);
	}
	return 0;
}

uint32_t gm_policy_workers(const struct gm_policy *p, uint32_t slot)
{
	return p->s[slot].w;
}

size_t gm_policy_changed(struct gm_policy *p, const uint32_t **slots)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < p->nchg; i++) {
		uint32_t sl = p->chg[i];
		p->s[sl].changed = false;
		if (p->s[sl].live)
			p->chg[n++] = sl;
	}
	p->nchg = 0;
	*slots = p->chg;
	return n;
}

uint64_t gm_policy_used(const struct gm_policy *p)
{
	return p->used;
}

int gm_policy_allocate(const struct gm_policy_job *jobs, size_t n, uint64_t budget,
		       uint32_t *workers)
{
	struct gm_policy *p;
	uint32_t slot;
	int rc = gm_policy_create(&p, budget);

	if (rc)
		return rc;
	for (size_t i = 0; i < n; i++)
		if ((rc = gm_policy_add(p, &jobs[i], &slot)))
			goto out_destroy;
	rc = gm_policy_rebalance(p);
	for (size_t i = 0; i < n; i++)
		workers[i] = gm_policy_workers(p, (uint32_t)i);
out_destroy:
	gm_policy_destroy(p);
	return rc;
}

/* Borrowing (policy.h): the model's local capacity, lowered to the measured local
 * delivery while the consumer stalls, against the demand with headroom. */
/* The count within the job's cap and what the peers can lend (out says so). */
static uint32_t bounded(const struct gm_policy_borrow_in *in, uint32_t n,
			struct gm_policy_borrow_out *out)
{
	out->capped = out->peers_short = false;
	if (n > in->most) {
		n = in->most;
		out->capped = true;
	}
	if (in->bounded && n > in->lendable) {
		n = in->lendable;
		out->capped = false;
		out->peers_short = true;
	}
	return n;
}

/* Its consumer fed, its local workers' share of what it got nearly all the
 * demand (GM_BORROW_FED); a job with no local worker (fed remotely) never:
 * its remote rate, measured over other windows, may read low for a moment. */
static bool locally_fed(const struct gm_policy_borrow_in *in)
{
	double local = in->delivered - (in->remote_rate > 0 ? in->remote_rate : 0);
	return in->workers && in->demand > 0 && in->stall <= GM_POLICY_STALL &&
	       local >= in->demand * (1 - GM_POLICY_STALL) && isfinite(local);
}

void gm_policy_borrow(const struct gm_policy_borrow_in *in, struct gm_policy_borrow_out *out)
{
	double h = in->headroom > 1 ? in->headroom : 1;

	*out = (struct gm_policy_borrow_out){0};
	if (!(in->worker_rate > 0)) {
		out->why = GM_BORROW_UNMEASURED;
		return;
	}
	double units = in->workers;
	if (in->cores > 0 && in->cores < units)
		units = in->cores;
	out->capacity = units * in->worker_rate;
	double local = in->delivered - (in->remote_rate > 0 ? in->remote_rate : 0);
	out->why = GM_BORROW_CAPACITY;
	if (in->stall > GM_POLICY_STALL && in->delivered < in->demand) {
		local = local > 0 ? local : 0;
		if (local < out->capacity) {
			out->capacity = local;
			out->why = GM_BORROW_STALL;
		}
	}
	if (in->alone > 0 && in->alone < in->demand && in->alone < out->capacity) {
		out->capacity = in->alone;
		out->why = GM_BORROW_ALONE;
	}
	double need = in->demand * h - out->capacity;
	if (!(need > 0)) {
		out->why = GM_BORROW_COVERED;
		return;
	}
	if (locally_fed(in)) {
		out->capacity = local; /* measured: they feed it, whatever the model says */
		out->why = GM_BORROW_FED;
		return;
	}
	double rw = in->remote_worker_rate > 0 ? in->remote_worker_rate : in->worker_rate;
	double n = ceil(need / rw - 1e-9);
	out->want = bounded(in, n < UINT32_MAX ? (uint32_t)n : UINT32_MAX, out);
}

double gm_policy_job_cores(double host_cores, uint32_t workers, uint32_t local, uint32_t fed)
{
	uint64_t shares = (uint64_t)local + fed;
	return shares ? host_cores * workers / (double)shares : host_cores;
}

double gm_policy_cpu_rate(double samples, double cpu_s, uint32_t batch_size)
{
	if (!(cpu_s >= GM_POLICY_CPU_RATE_MIN_S) || !isfinite(cpu_s) || !isfinite(samples) ||
	    !(samples >= 4.0 * (batch_size ? batch_size : 1)))
		return 0;
	return samples / cpu_s;
}

double gm_policy_worker_rate(double stage, double cpu, double known)
{
	double bound = cpu > 0 && isfinite(cpu) ? cpu : known > 0 && isfinite(known) ? known : 0;
	return bound > 0 && bound < stage ? bound : stage;
}

double gm_policy_pace_step(double *credit, double wall_ns, double cpu_ns, uint32_t milli)
{
	if (!milli || milli >= 1000)
		return 0;
	double c = *credit + (wall_ns > 0 ? wall_ns : 0) * milli / 1000 - (cpu_ns > 0 ? cpu_ns : 0);
	if (!isfinite(c))
		c = 0;
	*credit = c < GM_POLICY_PACE_BURST_NS ? c : GM_POLICY_PACE_BURST_NS;
	return *credit < 0 ? -*credit * 1000 / milli : 0;
}

/* A job's place within a round of gm_policy_home_share: the more it asks, the
 * sooner (one not yet decided, UINT32_MAX, last). */
static uint32_t ask_rank(uint32_t ask)
{
	return ask == UINT32_MAX ? 0 : ask;
}

void gm_policy_home_share(const uint32_t *ask, const uint32_t *held, size_t n, uint32_t pool,
			  uint32_t *share)
{
	for (size_t i = 0; i < n; i++)
		share[i] = 0;
	/* round r gives each job with an ask left its (r+1)th worker: a job that
	 * still asks at its start holds r of them, and r+1 once served */
	for (uint32_t r = 0; pool; r++) {
		bool gave = false;
		uint32_t top = 0; /* those holding more first */
		for (size_t i = 0; i < n; i++)
			if (share[i] < ask[i] && held[i] > top)
				top = held[i];
		for (uint64_t h = (uint64_t)top + 1; h-- > 0 && pool;) {
			for (;;) { /* within a level, those asking more first */
				size_t best = n;
				for (size_t i = 0; i < n; i++)
					if (held[i] == h && share[i] == r && share[i] < ask[i] &&
					    (best == n || ask_rank(ask[i]) > ask_rank(ask[best])))
						best = i;
				if (best == n || !pool)
					break;
				share[best]++;
				pool--;
				gave = true;
			}
			if (h == 0)
				break;
		}
		if (!gave)
			return;
	}
}

double gm_policy_local_pace(double host_cores, double agent_cores, uint32_t workers,
			    uint32_t landing, double landing_cores, uint32_t landing_workers)
{
	if (!landing || !workers || !(host_cores > 0) || !(host_cores < GM_POLICY_LEND_HOST_CORES))
		return 0;
	double agent = agent_cores > 0 && isfinite(agent_cores) ? agent_cores : 0;
	double cores = host_cores * (1 - GM_POLICY_PACE_SLACK);
	double room = (cores - agent * GM_POLICY_PACE_MARGIN) / workers;
	/* what the workers had beside the landing jobs' local decode: an equal
	 * share, or what those jobs' demand left when it needed less */
	double eq = host_cores / ((double)workers + landing);
	double took = landing_cores >= 0 && isfinite(landing_cores) ? landing_cores : INFINITY;
	took = took < eq * landing ? took : eq * landing;
	uint32_t others = workers > landing_workers ? workers - landing_workers : 1;
	double share = (host_cores - took) / others;
	return room > share ? room : share;
}

uint32_t gm_policy_lendable(uint32_t budget, uint32_t wished, double cores, double idle_cores,
			    bool starved)
{
	uint32_t free_ = budget > wished ? budget - wished : 0, by_cores;
	if (starved || !(cores >= GM_POLICY_LEND_HOST_CORES) ||
	    !(idle_cores >= GM_POLICY_LEND_MIN_CORES) || !isfinite(idle_cores))
		return 0; /* its own jobs first; a poor host lends nothing */
	by_cores = (uint32_t)ceil(
	    (idle_cores < 1e6 ? idle_cores : 1e6) / GM_POLICY_LEND_WORKER_CORES - 1e-9);
	return free_ > by_cores ? free_ : by_cores;
}

void gm_policy_borrow_why(const struct gm_policy_borrow_in *in,
			  const struct gm_policy_borrow_out *out, char *buf, size_t len)
{
	int n = 0;

	switch (out->why) {
	case GM_BORROW_UNMEASURED:
		n = snprintf(buf, len, "not measured yet");
		break;
	case GM_BORROW_COVERED:
		n = snprintf(buf, len, "local capacity covers demand (%.0f >= %.0f img/s)",
			     out->capacity, in->demand);
		break;
	case GM_BORROW_CAPACITY:
		n = snprintf(buf, len, "local capacity %.0f img/s < demand %.0f img/s%s",
			     out->capacity, in->demand,
			     out->capacity >= in->demand ? " with its headroom" : "");
		break;
	case GM_BORROW_STALL:
		n = snprintf(buf, len,
			     "delivered %.0f img/s < demand %.0f img/s, the trainer waits %.0f%% "
			     "of the time: local workers deliver %.0f img/s",
			     in->delivered, in->demand, in->stall * 100, out->capacity);
		break;
	case GM_BORROW_FED:
		n = snprintf(buf, len,
			     "its local workers feed it (%.0f of demand %.0f img/s, the trainer "
			     "waits %.0f%% of the time)",
			     out->capacity, in->demand, in->stall * 100);
		break;
	case GM_BORROW_ALONE:
		n = snprintf(buf, len,
			     "its local workers alone delivered %.0f img/s < demand %.0f img/s "
			     "while the trainer waited",
			     out->capacity, in->demand);
		break;
	}
	if (out->capped && n >= 0 && (size_t)n < len)
		n += snprintf(buf + n, len - (size_t)n, "; capped at %u remote workers", in->most);
	else if (out->peers_short && n >= 0 && (size_t)n < len)
		n += snprintf(buf + n, len - (size_t)n, "; the live peers can lend it %u",
			      in->lendable);
	if (in->ring_bound && n >= 0 && (size_t)n < len)
		snprintf(buf + n, len - (size_t)n,
			 "; its ring told remote workers 'no batch free' while the trainer "
			 "waited (no more workers)");
}

double gm_policy_guest_cores(double idle_cores, uint32_t guests, bool own_jobs)
{
	if (!own_jobs || !guests)
		return 0;
	double each = idle_cores > 0 && isfinite(idle_cores) ? idle_cores / guests : 0;
	if (each >= 1)
		return 0;
	return each > GM_POLICY_GUEST_MIN_CORES ? each : GM_POLICY_GUEST_MIN_CORES;
}

/* What one guest of a lent job wants (gm_policy_guest_shares). */
static double guest_want(uint32_t n, double used, double last)
{
	double each = n && used > 0 && isfinite(used) ? used / n : 0;
	if (!(last > 0) || !isfinite(last) || each >= GM_POLICY_GUEST_LIGHT * last)
		return INFINITY;
	each *= GM_POLICY_GUEST_GROW;
	return each > GM_POLICY_GUEST_MIN_CORES ? each : GM_POLICY_GUEST_MIN_CORES;
}

void gm_policy_guest_shares(double idle_cores, const uint32_t *n, const double *used,
			    const double *last, size_t jobs, double *out)
{
	uint64_t units = 0;
	double left = idle_cores > 0 && isfinite(idle_cores) ? idle_cores : 0;
	for (size_t j = 0; j < jobs; j++) { /* -1: not given yet */
		out[j] = n[j] ? -1 : 0;
		units += n[j];
	}
	uint64_t all = units;
	/* max-min fair: the least wanting first, each given what it wants while
	 * that is at most an equal split of what is left; the rest that split */
	while (units) {
		size_t m = jobs;
		double wm = INFINITY;
		for (size_t j = 0; j < jobs; j++) {
			double w = out[j] < 0 ? guest_want(n[j], used[j], last[j]) : INFINITY;
			if (out[j] < 0 && (m == jobs || w < wm))
				m = j, wm = w;
		}
		double fair = left / (double)units;
		if (wm > fair) {
			for (size_t j = 0; j < jobs; j++)
				if (out[j] < 0)
					out[j] = fair;
			break;
		}
		out[m] = wm;
		left -= wm * n[m];
		units -= n[m];
	}
	/* all light: what they leave is wanted by no other guest, so it is theirs
	 * again, an equal part each on top of its want (left idle, seed 5's L1
	 * paced its one guest to 0.010 of a core beside 0.45 idle: the guest,
	 * "no batch free" while the home's own worker ran, then held the lease of
	 * the batch the trainer waited for 1.4 s) */
	if (!units && all && left > 0)
		for (size_t j = 0; j < jobs; j++)
			if (n[j])
				out[j] += left / (double)all;
	for (size_t j = 0; j < jobs; j++) {
		if (!n[j])
			continue;
		if (out[j] < GM_POLICY_GUEST_MIN_CORES)
			out[j] = GM_POLICY_GUEST_MIN_CORES;
		if (out[j] >= 1)
			out[j] = 0;
	}
}

double gm_policy_fresh_guest_cores(double idle_now, double idle_settled)
{
	double idle = idle_now < idle_settled ? idle_now : idle_settled;
	return idle > 0 && isfinite(idle) ? GM_POLICY_FRESH_GUEST_SHARE * idle : 0;
}

uint32_t gm_policy_lend_next(struct gm_policy_lend *s, uint32_t budget, uint32_t wished,
			     double cores, double idle_cores, bool starved, unsigned fresh,
			     double dt_s)
{
	double hold = s->hold_s > GM_POLICY_ASK_SETTLE_S ? s->hold_s : GM_POLICY_ASK_SETTLE_S;
	dt_s = dt_s > 0 && isfinite(dt_s) ? dt_s : 0;
	if (starved) {
		if (s->starved_once && s->last && s->lent_s < GM_POLICY_LEND_CALM_TIMES * hold)
			/* again, soon after it lent again: lending starved them */
			hold = 2 * hold < GM_POLICY_LEND_HOLD_MAX_S ? 2 * hold
								    : GM_POLICY_LEND_HOLD_MAX_S;
		*s = (struct gm_policy_lend){.starved_once = true, .hold_s = hold};
		return 0;
	}
	s->calm_s += dt_s;
	if (s->starved_once && s->calm_s < hold) {
		s->last = 0;
		return 0; /* its own jobs first, until they have settled */
	}
	uint32_t n = gm_policy_lendable(budget, wished, cores, idle_cores, false);
	s->lent_s = n && s->last ? s->lent_s + dt_s : 0;
	if (s->lent_s >= GM_POLICY_LEND_CALM_TIMES * hold)
		s->hold_s = 0; /* lent that long, its own jobs fed: back to the shortest */
	/* fewer only once the idle cores are half a worker's share below what
	 * the last count needed: a measure's noise preempts no guest */
	if (n && n < s->last &&
	    gm_policy_lendable(budget, wished, cores, idle_cores + GM_POLICY_LEND_WORKER_CORES / 2,
			       false) >= s->last)
		n = s->last;
	if (fresh && n > s->last)
		n = s->last; /* an own job's need is not known yet: no more guests */
	if (fresh == GM_POLICY_LEND_FIRST && n < s->last)
		n = s->last; /* nor fewer for a need read from its workers' start */
	s->last = n;
	return n;
}

/* The cores lender i has left once it runs a[i] workers of the job. */
static double left_of(const struct gm_policy_lender *l, const uint32_t *a, size_t i)
{
	uint32_t slots = l[i].slots > l[i].workers ? l[i].slots : l[i].workers;
	return l[i].cores * (double)(l[i].workers - a[i]) / slots;
}

static bool lends(const struct gm_policy_lender *l, size_t i)
{
	return l[i].workers && l[i].cores >= GM_POLICY_LEND_MIN_CORES && isfinite(l[i].cores);
}

/* The lender with a worker to spare and the most cores left (n: none). */
static size_t idlest(const struct gm_policy_lender *l, size_t n, const uint32_t *a)
{
	size_t best = n;
	for (size_t i = 0; i < n; i++)
		if (lends(l, i) && a[i] < l[i].workers &&
		    (best == n || left_of(l, a, i) > left_of(l, a, best)))
			best = i;
	return best;
}

/* The lender running a worker of the job with the fewest cores left (n: none). */
static size_t busiest(const struct gm_policy_lender *l, size_t n, const uint32_t *a)
{
	size_t worst = n;
	for (size_t i = 0; i < n; i++)
		if (a[i] && (worst == n || left_of(l, a, i) < left_of(l, a, worst)))
			worst = i;
	return worst;
}

uint32_t gm_policy_spread(const struct gm_policy_lender *l, size_t n, uint32_t want,
			  const uint32_t *prev, uint32_t *ask)
{
	uint32_t placed = 0;
	for (size_t i = 0; i < n; i++) { /* what each runs now, unless it needs it back */
		ask[i] = prev ? prev[i] : 0;
		ask[i] = ask[i] < l[i].workers ? ask[i] : l[i].workers;
		placed += ask[i];
	}
	for (; placed > want; placed--) /* fewer: from the busiest */
		ask[busiest(l, n, ask)]--;
	for (size_t best; placed < want && (best = idlest(l, n, ask)) < n; placed++)
		ask[best]++; /* more: to the idlest */
	/* moves: only to a lender idler by more than a worker (a core); each move
	 * narrows the gap between the two, so this ends (bounded anyway) */
	for (uint32_t k = 0; k < placed; k++) {
		size_t to = idlest(l, n, ask), from = busiest(l, n, ask);
		if (to == n || from == n || to == from ||
		    !(left_of(l, ask, to) > left_of(l, ask, from) + 1.0))
			break;
		ask[from]--;
		ask[to]++;
	}
	return placed;
}

/* ---- demand, the remote ask, the local workers, the ring (policy.h) ---- */

double gm_policy_demand_add(struct gm_policy_demand *d, double samples, double busy_s,
			    double wall_s, uint32_t batch_size)
{
	if (!(samples >= 0) || !(busy_s >= 0) || !(wall_s >= 0) ||
	    !isfinite(samples + busy_s + wall_s))
		samples = busy_s = wall_s = 0; /* nonsense adds nothing */
	double all = d->samples + samples, period = 0, window;
	if (all > 0 && batch_size) /* the batch period at the delivered rate */
		period = (d->wall_s + wall_s) * batch_size / all;
	window = GM_POLICY_DEMAND_BATCHES * period;
	window = window < GM_POLICY_DEMAND_MIN_S ? GM_POLICY_DEMAND_MIN_S : window;
	window = window > GM_POLICY_DEMAND_MAX_S ? GM_POLICY_DEMAND_MAX_S : window;
	double f = exp(-wall_s / window);
	d->samples = d->samples * f + samples;
	d->busy_s = d->busy_s * f + busy_s;
	d->wall_s = d->wall_s * f + wall_s;
	if (!(d->samples > 0))
		return 0;
	return d->busy_s > 1e-3 ? d->samples / d->busy_s : 1e12;
}

/* The workers covering gap at rate per (0 when covered). */
static uint32_t covering(double gap, double per)
{
	double n = gap > 0 ? ceil(gap / per - 1e-9) : 0;
	return n < GM_POLICY_ASK_MAX ? (uint32_t)n : GM_POLICY_ASK_MAX;
}

uint32_t gm_policy_ask_next(struct gm_policy_ask *s, const struct gm_policy_borrow_in *in,
			    double dt_s, struct gm_policy_borrow_out *out)
{
	uint32_t given = s->given;
	gm_policy_borrow(in, out);
	if (out->why == GM_BORROW_UNMEASURED) {
		out->want = s->decided ? bounded(in, s->count, out) : 0;
		out->want = out->want < given ? out->want : given;
		return s->given = out->want;
	}
	double h = in->headroom > 1 ? in->headroom : 1;
	double per = in->remote_worker_rate > 0 ? in->remote_worker_rate : in->worker_rate;
	/* fed by its local workers: no gap, given back after a settled interval
	 * however little the model's gap moved (the measurement overrules it) */
	bool fed = locally_fed(in);
	double gap = in->demand * h - out->capacity;
	gap = fed && gap > 0 ? 0 : gap;
	dt_s = dt_s > 0 && isfinite(dt_s) ? dt_s : 0;
	bool starved = in->stall > GM_POLICY_STALL && in->delivered < in->demand;
	if (!s->decided || (starved && covering(gap, per) > s->count)) {
		/* the first measurement, or a consumer that waits for more than the
		 * last count covers: all of it at once (fewer wait to settle) */
		*s = (struct gm_policy_ask){
		    .decided = true, .count = covering(gap, per), .gap = gap};
	} else if ((fed && s->count) || fabs(gap - s->gap) > per ||
		   covering(s->gap, per) != s->count) {
		s->moved_s += dt_s;
		s->moved_sum += gap * dt_s;
		if (s->moved_s >= GM_POLICY_ASK_SETTLE_S) {
			double mean = s->moved_sum / s->moved_s;
			uint32_t by_mean = covering(mean, per), now_ = covering(gap, per);
			/* towards the mean's count only as far as the gap now
			 * agrees (now_ clamped between the two): a job whose local
			 * worker stopped (fed remotely) reads its gap jump while
			 * the interval's mean still holds the covered gaps before */
			uint32_t lo = by_mean < s->count ? by_mean : s->count;
			uint32_t hi = by_mean < s->count ? s->count : by_mean;
			uint32_t n = now_ < lo ? lo : now_ > hi ? hi : now_;
			*s = (struct gm_policy_ask){.decided = true,
						    .count = n,
						    .gap = n == by_mean ? mean
							   : n == now_	? gap
									: s->gap};
		}
	} else {
		s->moved_s = s->moved_sum = 0; /* back within a worker: settled where it was */
	}
	if (in->ring_bound && s->count > given) { /* the ring, not the workers, bounds it */
		s->count = given;
		s->gap = gap;
		s->moved_s = s->moved_sum = 0;
	}
	/* The held count keeps the workers it has; it adds none the gap now does
	 * not call for. Decided while the peers could lend nothing (the want cut to
	 * 0), a count would otherwise ask them later, once they can, for workers
	 * its job no longer lacks: a lender's job read "asks the peers for 1
	 * remote worker (was 0): local capacity covers demand (1435 >= 1109)". */
	uint32_t n = s->count, now_ = covering(gap, per);
	if (n > given && n > now_)
		n = given > now_ ? given : now_;
	out->want = bounded(in, n, out);
	return s->given = out->want;
}

void gm_policy_remote_per_add(double *host, double per_worker, double stall)
{
	if (!(per_worker > 0) || !isfinite(per_worker) || !(stall > GM_POLICY_STALL))
		return;
	*host = *host > 0 && isfinite(*host) ? 0.7 * *host + 0.3 * per_worker : per_worker;
}

double gm_policy_remote_worker_rate(double job_per, double host_per, double last)
{
	double waited = job_per > 0 && isfinite(job_per)     ? job_per
			: host_per > 0 && isfinite(host_per) ? host_per
							     : 0;
	last = last > 0 && isfinite(last) ? last : 0;
	return waited > last ? waited : last;
}

void gm_policy_alone_add(double *alone, bool remote_none, uint32_t windows, double stall,
			 double delivered, double demand, double remote_rate)
{
	if (!(delivered >= 0) || !isfinite(delivered) || !isfinite(stall))
		return; /* nonsense changes nothing */
	double had = *alone > 0 && isfinite(*alone) ? *alone : 0;
	if (stall > GM_POLICY_STALL) {
		if (remote_none && windows >= 3 && delivered < demand)
			*alone = had > 0 ? 0.7 * had + 0.3 * delivered : delivered;
		return;
	}
	double local = delivered - (remote_none || !(remote_rate > 0) ? 0 : remote_rate);
	if (had > 0 && local > had && local >= demand * (1 - GM_POLICY_STALL))
		*alone = 0;
}

bool gm_policy_fed_remotely(bool small_home, double local_alone, double remote, double demand,
			    bool was)
{
	if (!small_home || !(local_alone > 0) || !(remote > 0))
		return false;
	if (demand > 0 && isfinite(demand)) { /* what the consumer can take of each */
		local_alone = local_alone < demand ? local_alone : demand;
		remote = remote < demand ? remote : demand;
	}
	return was ? remote >= local_alone : remote > local_alone * GM_POLICY_MEASURABLY;
}

bool gm_policy_fed_worse(double both, double fed)
{
	return both > 0 && fed >= 0 && isfinite(both) && fed * GM_POLICY_MEASURABLY < both;
}

bool gm_policy_fed_retry(double fed, double both_remote)
{
	return !(fed > 0) || !isfinite(fed) ||
	       (both_remote > 0 && isfinite(both_remote) &&
		fed * GM_POLICY_MEASURABLY < both_remote);
}

uint32_t gm_policy_ring_peers(uint32_t peers_lendable, uint32_t lent)
{
	return lent ? 0 : peers_lendable;
}

uint32_t gm_policy_ring_workers(uint32_t cap, uint32_t budget, uint32_t lendable)
{
	uint64_t all = (uint64_t)budget + lendable;
	if (cap && cap < all)
		all = cap;
	return all < UINT32_MAX ? (uint32_t)all : UINT32_MAX;
}

uint32_t gm_policy_pow2_slots(uint64_t need)
{
	uint32_t slots = 4;
	while (slots < need && slots < 64)
		slots *= 2;
	return slots;
}

uint32_t gm_policy_ring_slots(double host_cores, uint32_t all)
{
	return gm_policy_pow2_slots(
	    (uint64_t)(host_cores < GM_POLICY_LEND_HOST_CORES ? 2 : 8) * all + 2);
}
