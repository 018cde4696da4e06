/*
 * sim.c - the discrete-event cluster simulator (sim.h).
 *
 * Engine (ROSS-like): an indexed binary min-heap of events keyed by (time, sequence
 * number), so equal times pop in scheduling order and every run is deterministic.
 * There are four event types with one handler each (the callback table below):
 * ARRIVAL (only the next trace job is ever in the heap), FINISH (one per running job;
 * an allocation change re-keys it in place, O(log n)), SAMPLE (time series on a
 * fixed period, never per event) and, with opts.round, ROUND (Synergy's scheduling
 * rounds: every running job is preempted and the queue placed again).
 *
 * Job model: a job of class k with G GPUs has GPU-bound rate R = G * gpu_rate_k and
 * gets d = cpu_rate_k samples/s per data vCPU. Its work (samples) is calibrated so
 * that with its requested vCPUs it runs exactly its traced duration:
 * work = duration * min(R, vreq * d). Whenever its vCPUs change, the work done so
 * far is booked at the old rate and its FINISH is moved to now + left / new rate.
 *
 * Placement (the same under every policy): FIFO with best-fit packing onto the
 * node with the fewest free GPUs that fits, among those the one with the most free
 * vCPUs; with a backfill window, jobs behind a blocked head may start, but never
 * on the node held for the head (so it cannot starve); jobs larger than a node span
 * the emptiest nodes. opts.place_in_order (Synergy's random placement) takes a
 * job's GPUs node by node in node order instead, spreading a job that best fit
 * would keep waiting for one node.
 * How many vCPUs a job reserves, how fast it then runs and what it is charged is
 * the CPU policy's, one row of operations in policies.c (sim_policy.h): the engine
 * calls through s->policy and never tests which policy runs.
 *
 * Utilisation integrals and counters are updated incrementally at each event; no
 * work is O(running jobs) per event. Invariants (time never goes back, no node
 * over-committed, pool within idle vCPUs, each job's work done exactly once) are
 * checked at every change; opts.check adds a full audit after each event.
 *
 * Not modelled: GPU types, memory, network topology, preemption of GPUs, job
 * failures, CPU-only pods.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "goldminer/rng.h"
#include "goldminer/sim.h"
#include "goldminer/util.h"
#include "sim_policy.h"

#define GM_SIM_STREAM_CLASS 0x434c4153ull /* "CLAS": class draw, one stream per job */
#define GM_SIM_STREAM_JOBID 0x4a4f4249ull /* "JOBI": a job's identity from its content */

enum { EV_ARRIVAL, EV_FINISH, EV_SAMPLE, EV_ROUND, EV_NTYPES };

void sim_fail(struct sim *s, int rc, const char *fmt, ...)
{
	va_list ap;
	if (s->rc)
		return;
	s->rc = rc;
	va_start(ap, fmt);
	gm_verrf(s->err, s->errlen, fmt, ap);
	va_end(ap);
}

/* ---- engine: indexed heap on (t, seq) ---- */

static bool ev_before(const struct sim *s, uint32_t a, uint32_t b)
{
	const struct ev *x = &s->ev[a], *y = &s->ev[b];
	if (x->t != y->t)
		return x->t < y->t;
	return x->seq < y->seq;
}

static void hset(struct sim *s, uint32_t i, uint32_t id)
{
	s->heap[i] = id;
	s->ev[id].pos = i;
}

static void hfix(struct sim *s, uint32_t i)
{
	uint32_t x = s->heap[i];
	while (i > 0) {
		uint32_t p = (i - 1) / 2;
		if (!ev_before(s, x, s->heap[p]))
			break;
		hset(s, i, s->heap[p]);
		i = p;
	}
	for (;;) {
		uint32_t c = 2 * i + 1;
		if (c >= s->nheap)
			break;
		if (c + 1 < s->nheap && ev_before(s, s->heap[c + 1], s->heap[c]))
			c++;
		if (!ev_before(s, s->heap[c], x))
			break;
		hset(s, i, s->heap[c]);
		i = c;
	}
	hset(s, i, x);
}

/* Schedule event id at time t, or move it there if already scheduled. */
static void ev_at(struct sim *s, uint32_t id, double t)
{
	struct ev *e = &s->ev[id];
	if (t < s->now) {
		sim_fail(s, -ENOTRECOVERABLE,
			 "invariant: event scheduled in the past (%.17g < %.17g)", t, s->now);
		t = s->now;
	}
	e->t = t;
	e->seq = s->seq++;
	if (e->pos == NOPOS) {
		s->heap[s->nheap] = id;
		e->pos = s->nheap++;
	}
	hfix(s, e->pos);
}

static void ev_cancel(struct sim *s, uint32_t id)
{
	uint32_t i = s->ev[id].pos;
	if (i == NOPOS)
		return;
	s->ev[id].pos = NOPOS;
	uint32_t last = s->heap[--s->nheap];
	if (i != s->nheap) {
		hset(s, i, last);
		hfix(s, i);
	}
}

static uint32_t ev_pop(struct sim *s)
{
	uint32_t id = s->heap[0];
	ev_cancel(s, id);
	return id;
}

/* ---- metrics ---- */

/* Integrate the utilisation sums up to now (called before any of them changes). */
static void integrate(struct sim *s)
{
	double dt = s->now - s->t_int;
	if (dt > 0) {
		s->int_alloc_g += s->sum_alloc_g * dt;
		s->int_busy_g += s->sum_busy_g * dt;
		s->int_alloc_c += s->sum_alloc_c * dt;
		s->int_busy_c += s->sum_busy_c * dt;
	}
	s->t_int = s->now;
}

/* ---- nodes ---- */

static bool node_before(const struct sim *s, uint32_t a, uint32_t b)
{
	if (s->free_c[a] != s->free_c[b])
		return s->free_c[a] > s->free_c[b];
	return a < b;
}

static void bset(struct sim *s, uint32_t k, uint32_t i, uint32_t n)
{
	s->bh[k][i] = n;
	s->bpos[n] = i;
}

static void bfix(struct sim *s, uint32_t k, uint32_t i)
{
	uint32_t *h = s->bh[k], x = h[i];
	while (i > 0) {
		uint32_t p = (i - 1) / 2;
		if (!node_before(s, x, h[p]))
			break;
		bset(s, k, i, h[p]);
		i = p;
	}
	for (;;) {
		uint32_t c = 2 * i + 1;
		if (c >= s->bn[k])
			break;
		if (c + 1 < s->bn[k] && node_before(s, h[c + 1], h[c]))
			c++;
		if (!node_before(s, h[c], x))
			break;
		bset(s, k, i, h[c]);
		i = c;
	}
	bset(s, k, i, x);
}

static void bk_del(struct sim *s, uint32_t n)
{
	uint32_t k = (uint32_t)s->free_g[n], i = s->bpos[n], last = --s->bn[k];
	if (i != last) {
		bset(s, k, i, s->bh[k][last]);
		bfix(s, k, i);
	}
}

static void bk_add(struct sim *s, uint32_t n)
{
	uint32_t k = (uint32_t)s->free_g[n];
	if (s->bn[k] == s->bcap[k]) {
		uint32_t nc = s->bcap[k] ? 2 * s->bcap[k] : 16;
		void *a = realloc(s->bh[k], nc * sizeof(uint32_t));
		if (!a) {
			sim_fail(s, -ENOMEM, "gm_sim_run: out of memory");
			return;
		}
		s->bh[k] = a;
		s->bcap[k] = nc;
	}
	bset(s, k, s->bn[k]++, n);
	bfix(s, k, s->bn[k] - 1);
}

static void node_take(struct sim *s, uint32_t n, uint32_t g, uint32_t c)
{
	bk_del(s, n);
	s->free_g[n] -= g;
	s->free_c[n] -= c;
	s->free_gpus -= g;
	s->reserved_cpu += c;
	if (s->free_g[n] < 0 || s->free_c[n] < 0)
		sim_fail(s, -ENOTRECOVERABLE,
			 "invariant: node %u over-committed (%lld GPUs, %lld "
			 "vCPUs free)",
			 n, (long long)s->free_g[n], (long long)s->free_c[n]);
	else
		bk_add(s, n);
}

static void node_give(struct sim *s, uint32_t n, uint32_t g, uint32_t c)
{
	bk_del(s, n);
	s->free_g[n] += g;
	s->free_c[n] += c;
	s->free_gpus += g;
	s->reserved_cpu -= c;
	if (s->free_g[n] > s->c->gpus[n] || s->free_c[n] > s->c->cpus[n])
		sim_fail(s, -ENOTRECOVERABLE, "invariant: node %u freed more than it has", n);
	else
		bk_add(s, n);
}

/*
 * The preferred node of bucket k that can take the job's g GPUs: the one with the
 * most free vCPUs (skipping a node held for another job). Where the need is the
 * same on every node this is the heap top, or its better child when the top is
 * held; where capped requests make it depend on the node, the bucket is scanned.
 */
static uint32_t pick(const struct sim *s, uint32_t ji, uint32_t k)
{
	const struct sjob *j = &s->j[ji];
	const uint32_t *h = s->bh[k];
	uint32_t m = s->bn[k], best = NOPOS;
	bool held = s->resv_node != NOPOS && ji != s->resv_job;

	if (s->policy->reserve_varies && s->policy->reserve_varies(s, j)) {
		for (uint32_t i = 0; i < m; i++) {
			uint32_t n = h[i];
			if ((held && n == s->resv_node) ||
			    s->free_c[n] < s->policy->reserve(s, j, n, j->gpus))
				continue;
			if (best == NOPOS || node_before(s, n, best))
				best = n;
		}
		return best;
	}
	for (uint32_t i = 0; i < m && i < 3; i++) {
		uint32_t n = h[i];
		if (held && n == s->resv_node)
			continue;
		if (i > 0 && h[0] != s->resv_node)
			break; /* the top was usable: children only stand in for a held top */
		if (best == NOPOS || node_before(s, n, best))
			best = n;
	}
	if (best != NOPOS && s->free_c[best] < s->policy->reserve(s, j, best, j->gpus))
		best = NOPOS;
	return best;
}

static int push_place(struct sim *s, uint32_t ji, uint32_t n, uint32_t g, uint32_t c)
{
	if (s->npl == s->plcap) {
		size_t nc = s->plcap ? s->plcap * 2 : 1024;
		void *a = realloc(s->pl, nc * sizeof(*s->pl));
		if (!a)
			return -ENOMEM;
		s->pl = a;
		s->plcap = nc;
	}
	s->pl[s->npl++] = (struct place){n, g, c, ji, 0, NOPOS, NOPOS, 0, 0};
	return 0;
}

/*
 * opts.place_demand: the node with the fewest free GPUs that holds ji's GPUs and
 * reservation and where the policy's demand for it fits (ties as node_before), or
 * NOPOS. A scan of the GPU buckets: meant for small clusters (Synergy's setup).
 */
static uint32_t pick_demand(const struct sim *s, uint32_t ji)
{
	const struct sjob *j = &s->j[ji];
	bool held = s->resv_node != NOPOS && ji != s->resv_job;
	for (uint32_t k = j->gpus; k <= s->c->max_gpus; k++) {
		uint32_t best = NOPOS;
		for (uint32_t i = 0; i < s->bn[k]; i++) {
			uint32_t n = s->bh[k][i];
			if ((held && n == s->resv_node) ||
			    s->free_c[n] < s->policy->reserve(s, j, n, j->gpus) ||
			    !s->policy->fits(s, j, n))
				continue;
			if (best == NOPOS || node_before(s, n, best))
				best = n;
		}
		if (best != NOPOS)
			return best;
	}
	return NOPOS;
}

/*
 * A placement over several nodes, its tentative records s->pl[off..]: with no GPU
 * left to place, the job's (its nodes' GPUs and vCPUs taken, local the vCPUs
 * reserved there) and true; else forgotten, and false.
 */
static bool place_commit(struct sim *s, struct sjob *j, size_t off, uint32_t left, uint32_t local)
{
	if (left) {
		s->npl = off;
		return false;
	}
	j->place_off = (uint32_t)off;
	j->nplace = (uint32_t)(s->npl - off);
	for (size_t i = off; i < s->npl; i++)
		node_take(s, s->pl[i].node, s->pl[i].g, s->pl[i].c);
	j->local = local;
	return true;
}

/*
 * Take ji's GPUs node by node, in node order (Synergy's random placement): with
 * ideal, as many of a node's free GPUs as policy->fit_gpus lets the policy's
 * demand for them fit; without, every free GPU of a node whose vCPUs hold the
 * policy's reservation for them (a fair share always fits beside fair shares).
 * False (nothing taken) where the nodes do not hold them all so.
 */
static bool place_fitting(struct sim *s, uint32_t ji, bool ideal)
{
	struct sjob *j = &s->j[ji];
	size_t off = s->npl;
	uint32_t left = j->gpus, local = 0;
	for (uint32_t n = 0; n < s->c->n && left; n++) {
		uint32_t t = s->free_g[n] < (int64_t)left ? (uint32_t)s->free_g[n] : left;
		if (!t || (n == s->resv_node && ji != s->resv_job))
			continue;
		if (ideal)
			t = s->policy->fit_gpus(s, j, n, t);
		uint32_t c = t ? s->policy->reserve(s, j, n, t) : 0;
		if (!t || s->free_c[n] < c)
			continue;
		if (push_place(s, ji, n, t, c)) {
			sim_fail(s, -ENOMEM, "out of memory");
			s->npl = off;
			return false;
		}
		left -= t;
		local += c;
	}
	return place_commit(s, j, off, left, local);
}

/*
 * Place job ji: where the policy's demand fits (policy->fit_gpus), else in node
 * order at its reservation (opts.place_in_order), else best fit on one node,
 * else spread over the emptiest nodes.
 */
static bool place(struct sim *s, uint32_t ji)
{
	struct sjob *j = &s->j[ji];
	uint32_t maxg = s->c->max_gpus;

	if (s->free_gpus < j->gpus)
		return false;
	if (s->policy->fit_gpus && !s->o.place_demand && place_fitting(s, ji, true))
		return true;
	if (s->rc)
		return false;
	if (s->o.place_in_order && !s->o.place_demand)
		return place_fitting(s, ji, false);
	if (j->gpus <= maxg) {
		uint32_t want = s->o.place_demand && s->policy->fits ? pick_demand(s, ji) : NOPOS;
		for (uint32_t k = want != NOPOS ? maxg : j->gpus; k <= maxg; k++) {
			uint32_t n = want != NOPOS ? want : s->bn[k] ? pick(s, ji, k) : NOPOS;
			if (n == NOPOS)
				continue;
			uint32_t c = s->policy->reserve(s, j, n, j->gpus);
			if (push_place(s, ji, n, j->gpus, c)) {
				sim_fail(s, -ENOMEM, "out of memory");
				return false;
			}
			j->place_off = (uint32_t)(s->npl - 1);
			j->nplace = 1;
			node_take(s, n, j->gpus, c);
			j->local = c;
			return true;
		}
		return false; /* fits one node: wait for one rather than spread */
	}
	/* Larger than any node's free GPUs: take whole free GPUs of the emptiest nodes. */
	size_t off = s->npl;
	uint32_t left = j->gpus, local = 0;
	for (uint32_t k = maxg; k >= 1 && left; k--)
		for (uint32_t i = 0; i < s->bn[k] && left; i++) {
			uint32_t n = s->bh[k][i];
			uint32_t t = k < left ? k : left;
			uint32_t c = s->policy->reserve(s, j, n, t);
			if (s->free_c[n] < c || (n == s->resv_node && ji != s->resv_job))
				continue;
			if (push_place(s, ji, n, t, c)) {
				sim_fail(s, -ENOMEM, "out of memory");
				return false;
			}
			left -= t;
			local += c;
		}
	return place_commit(s, j, off, left, local);
}

/* ---- job rates ---- */

/* Book work done since t_last at the current rate. */
static void book(struct sim *s, struct sjob *j)
{
	j->left -= j->rate * (s->now - j->t_last);
	j->t_last = s->now;
}

/* Set running job ji's rate to r (busy: the vCPUs it keeps busy) and move its FINISH. */
static void apply_rate(struct sim *s, uint32_t ji, double r, double busy)
{
	struct sjob *j = &s->j[ji];

	book(s, j);
	s->sum_busy_g -= j->busy_g;
	s->sum_busy_c -= j->busy_c;
	s->sum_alloc_c -= j->alloc_c;
	j->rate = r;
	j->busy_g = j->gpus * r / j->R;
	j->busy_c = busy;
	j->alloc_c = s->policy->charge(s, j, busy);
	s->sum_busy_g += j->busy_g;
	s->sum_busy_c += j->busy_c;
	s->sum_alloc_c += j->alloc_c;
	if (r > 0)
		ev_at(s, ji, s->now + (j->left > 0 ? j->left : 0) / r);
	else
		ev_cancel(s, ji);
}

/* The cores node n's workers time-share: --node-cores on every node, else the
 * cluster's own figure; 0: every vCPU is a core. */
static double cores_of(const struct sim *s, uint32_t n)
{
	if (s->o.node_cores > 0)
		return s->o.node_cores;
	return s->c->cores ? s->c->cores[n] : 0;
}

static int cmp_piece(const void *a, const void *b, void *arg)
{
	const struct cpiece *cp = arg;
	const struct cpiece *x = &cp[*(const uint32_t *)a], *y = &cp[*(const uint32_t *)b];
	if (x->node != y->node)
		return x->node < y->node ? -1 : 1;
	return *(const uint32_t *)a < *(const uint32_t *)b ? -1 : 1;
}

/* Room for k more pieces; false after sim_fail. */
static bool piece_room(struct sim *s, size_t k)
{
	if (s->ncp + k <= s->cpcap)
		return true;
	size_t nc = (s->ncp + k) * 2;
	void *a = realloc(s->cp, nc * sizeof(*s->cp)), *b;
	if (a)
		s->cp = a;
	if (!a || !(b = realloc(s->cpi, nc * sizeof(uint32_t)))) {
		sim_fail(s, -ENOMEM, "gm_sim_run: out of memory");
		return false;
	}
	s->cpi = b;
	s->cpcap = nc;
	return true;
}

/*
 * Running job ji's a workers, each wanting u of a core, as pieces by node: its
 * places' reserved vCPUs and local pool workers there, in proportion; what sits
 * nowhere (remote pool workers, which are counted, not placed) is no piece and
 * shares no node's cores. On a 1-node cluster every worker is on the node.
 */
static void add_pieces(struct sim *s, uint32_t ji, double a, double u)
{
	const struct sjob *j = &s->j[ji];
	double placed = 0, remote = j->extra;
	for (uint32_t i = 0; i < j->nplace; i++) {
		const struct place *p = &s->pl[j->place_off + i];
		placed += (double)p->c + p->w;
		remote -= p->w;
	}
	if (remote < 0 || s->c->n == 1)
		remote = 0;
	if (!piece_room(s, j->nplace))
		return;
	for (uint32_t i = 0; i < j->nplace; i++) { /* nothing placed: all on its first */
		const struct place *p = &s->pl[j->place_off + i];
		double w = placed > 0 ? ((double)p->c + p->w) / (placed + remote) : !i;
		if (w > 0)
			s->cp[s->ncp++] = (struct cpiece){p->node, ji, a * w, u, 1};
	}
}

/* Each node's level: the core share a worker there gets, max-min fair (bisection,
 * 60 halvings: exact to a double); 1 where every worker fits. */
static void fill_levels(struct sim *s)
{
	for (size_t k = 0; k < s->ncp; k++)
		s->cpi[k] = (uint32_t)k;
	qsort_r(s->cpi, s->ncp, sizeof(uint32_t), cmp_piece, s->cp);
	for (size_t lo_k = 0, hi_k; lo_k < s->ncp; lo_k = hi_k) {
		uint32_t n = s->cp[s->cpi[lo_k]].node;
		double want = 0, cores = cores_of(s, n), lo = 0, hi = 1;
		for (hi_k = lo_k; hi_k < s->ncp && s->cp[s->cpi[hi_k]].node == n; hi_k++)
			want += s->cp[s->cpi[hi_k]].a * s->cp[s->cpi[hi_k]].u;
		if (!(cores > 0) || want <= cores)
			continue;
		for (int it = 0; it < 60; it++) {
			double mid = (lo + hi) / 2, used = 0;
			for (size_t k = lo_k; k < hi_k; k++) {
				const struct cpiece *c = &s->cp[s->cpi[k]];
				used += c->a * (c->u < mid ? c->u : mid);
			}
			*(used > cores ? &hi : &lo) = mid;
		}
		for (size_t k = lo_k; k < hi_k; k++)
			s->cp[s->cpi[k]].level = lo;
	}
}

/*
 * Cores (--node-cores, or a cluster shape's cores): the policy's rates of every
 * running job, then each node's cores shared max-min fairly among the workers
 * there (as a fair CPU scheduler shares them among runnable processes). Job j
 * holds a_j workers (its charge) that each want u_j = busy_j / a_j of a core; on
 * node n the level L_n with sum a_jn min(u_j, L_n) = cores_n (L_n = 1 when all
 * fit) gives the job busy_j' = sum_n a_jn min(u_j, L_n) plus its unplaced workers'
 * share, and the rate r_j busy_j' / busy_j. A job with nothing placed (unlimited-cpu
 * reserves nothing) has its workers on its first node. O(jobs of the trace) per call, as it
 * scans them for the running ones: meant for small scenarios of a sim-to-real
 * check, not for replaying big traces.
 */
static void contend(struct sim *s)
{
	s->ncp = 0;
	for (size_t i = 0; i < s->n && !s->rc; i++) {
		struct sjob *j = &s->j[i];
		double busy, a;
		if (j->state != J_RUNNING)
			continue;
		s->policy->rate(s, j, &busy);
		a = s->policy->charge(s, j, busy);
		if (a > 0)
			add_pieces(s, (uint32_t)i, a, busy / a);
	}
	if (s->rc)
		return;
	fill_levels(s);
	for (size_t i = 0, k = 0; i < s->n; i++) { /* pieces are in job order */
		struct sjob *j = &s->j[i];
		double busy, r, got;
		if (j->state != J_RUNNING)
			continue;
		r = s->policy->rate(s, j, &busy);
		got = busy;
		for (; k < s->ncp && s->cp[k].job == i; k++)
			if (s->cp[k].u > s->cp[k].level)
				got -= s->cp[k].a * (s->cp[k].u - s->cp[k].level);
		apply_rate(s, (uint32_t)i, busy > 0 ? r * got / busy : r, got);
	}
}

/* Recompute a running job's rate and move its FINISH. */
void sim_set_rate(struct sim *s, uint32_t ji)
{
	double busy, r;

	if (s->cores_on) {
		contend(s);
		return;
	}
	r = s->policy->rate(s, &s->j[ji], &busy);
	apply_rate(s, ji, r, busy);
}

static void start_job(struct sim *s, uint32_t ji)
{
	struct sjob *j = &s->j[ji];
	j->state = J_RUNNING;
	if (!j->ran) /* a preempted job (rounds) keeps its first start */
		j->start = s->now;
	j->ran = 1;
	j->t_last = s->now;
	j->rate = 0;
	j->extra = 0;
	s->nqueued--;
	s->nrunning++;
	s->sum_alloc_g += j->gpus;
	if (s->policy->start && s->policy->start(s, ji))
		return;
	sim_set_rate(s, ji);
}

/*
 * Hold a node for a blocked head so backfill cannot starve it: the node with the
 * most free GPUs among those big enough (first in bucket order). Only jobs that fit
 * one node get a hold; the head then waits at most for that node's jobs to end.
 */
static void hold_for(struct sim *s, uint32_t ji)
{
	const struct sjob *j = &s->j[ji];
	if (s->resv_job == ji || j->gpus > s->c->max_gpus)
		return;
	s->resv_job = ji;
	s->resv_node = NOPOS;
	for (uint32_t k = s->c->max_gpus + 1; k-- > 0 && s->resv_node == NOPOS;)
		for (uint32_t i = 0; i < s->bn[k]; i++)
			if (s->c->gpus[s->bh[k][i]] >= j->gpus) {
				s->resv_node = s->bh[k][i];
				break;
			}
}

/* FIFO (with an optional backfill window and a node held for the head). */
static void schedule(struct sim *s)
{
	while (s->qhead < s->qtail && s->j[s->queue[s->qhead]].state != J_QUEUED)
		s->qhead++;
	if (s->resv_job != NOPOS && s->j[s->resv_job].state != J_QUEUED)
		s->resv_job = s->resv_node = NOPOS; /* the head it was held for has started */
	uint32_t fails = 0;
	for (uint32_t q = s->qhead; q < s->qtail && s->free_gpus && !s->rc; q++) {
		uint32_t ji = s->queue[q];
		if (s->j[ji].state != J_QUEUED)
			continue;
		if (place(s, ji)) {
			start_job(s, ji);
			if (ji == s->resv_job)
				s->resv_job = s->resv_node = NOPOS;
			continue;
		}
		if (++fails > s->o.backfill)
			break; /* strict FIFO stops at the head; backfill tries a few more */
		if (fails == 1 && s->o.backfill != GM_SIM_BACKFILL_ALL)
			hold_for(s, ji); /* all: any job that fits starts, none waits for a node */
	}
}

/* Let the policy share out its pool again after an event (a no-op without one), and
 * the node's cores with --node-cores. */
static void rebalance(struct sim *s)
{
	if (s->policy->rebalance && !s->rc)
		s->policy->rebalance(s);
	if (s->cores_on && !s->rc)
		contend(s); /* a job came or went: the cores are shared anew */
}

/* Job ji leaves its nodes (it ends, or a round preempts it): its GPUs and vCPUs
 * go back, the cluster's sums drop, its policy is told. */
static void release(struct sim *s, uint32_t ji)
{
	struct sjob *j = &s->j[ji];
	s->sum_alloc_g -= j->gpus;
	s->sum_busy_g -= j->busy_g;
	s->sum_busy_c -= j->busy_c;
	s->sum_alloc_c -= j->alloc_c;
	j->busy_g = j->busy_c = j->alloc_c = 0;
	for (uint32_t i = 0; i < j->nplace; i++) {
		const struct place *p = &s->pl[j->place_off + i];
		node_give(s, p->node, p->g, p->c);
	}
	if (s->policy->stop)
		s->policy->stop(s, ji);
	j->extra = 0;
}

/* ---- event handlers (the callback table) ---- */

static void on_arrival(struct sim *s, uint32_t id)
{
	(void)id;
	uint32_t ji = (uint32_t)s->next_arrival++;
	struct sjob *j = &s->j[ji];

	if (s->next_arrival < s->n)
		ev_at(s, (uint32_t)s->n, s->t->jobs[s->next_arrival].submit / s->o.arrival_scale);
	for (int k = 0; k < 2; k++)
		if (ji == s->win_idx[k]) { /* window edge: keep the integrals (up to now) */
			s->win_alloc_g[k] = s->int_alloc_g;
			s->win_busy_g[k] = s->int_busy_g;
			s->win_alloc_c[k] = s->int_alloc_c;
			s->win_busy_c[k] = s->int_busy_c;
			s->t_win[k] = s->now;
		}
	if (j->gpus > s->c->total_gpus) {
		j->state = J_DROPPED;
		s->unplaceable++;
		s->ndone++;
		return;
	}
	j->state = J_QUEUED;
	s->nqueued++;
	s->queue[s->qtail++] = ji;
	if (s->o.round > 0) {
		s->round_dirty = true;
		return; /* rounds: it waits for the next one */
	}
	schedule(s);
	rebalance(s);
}

static void on_finish(struct sim *s, uint32_t ji)
{
	struct sjob *j = &s->j[ji];

	if (j->state != J_RUNNING) {
		sim_fail(s, -ENOTRECOVERABLE, "invariant: job %u finished twice", ji);
		return;
	}
	book(s, j);
	if (fabs(j->left) > 1e-6 * j->work0 + 1e-6) {
		sim_fail(s, -ENOTRECOVERABLE,
			 "invariant: job %u finished with %.9g of %.9g samples "
			 "left",
			 ji, j->left, j->work0);
		return;
	}
	j->left = 0;
	j->state = J_DONE;
	j->end = s->now;
	s->nrunning--;
	s->ndone++;
	release(s, ji);
	if (s->o.round > 0) {
		s->round_dirty = true;
		return; /* rounds: its GPUs and vCPUs wait for the next one */
	}
	schedule(s);
	rebalance(s);
}

/* Rounds: take running job ji off its nodes, its progress booked; it is queued. */
static void preempt(struct sim *s, uint32_t ji)
{
	struct sjob *j = &s->j[ji];
	book(s, j);
	ev_cancel(s, ji);
	j->rate = 0;
	release(s, ji);
	j->state = J_QUEUED;
	s->nrunning--;
	s->nqueued++;
}

/*
 * A scheduling round (opts.round, Synergy's simulator): every running job is
 * preempted, the queue is rebuilt in arrival order (job index = submit order) and
 * placed again, then the next round is set, unless nothing can ever start again
 * (no job running, no arrival to come: stalled() reports the queue). A round after
 * which no job came or went, with none queued, would place every job as the last
 * one did (the same jobs in the same order on the same nodes): it is skipped.
 */
static void on_round(struct sim *s, uint32_t id)
{
	uint32_t k = 0;
	while (s->live_lo < s->next_arrival &&
	       (s->j[s->live_lo].state == J_DONE || s->j[s->live_lo].state == J_DROPPED))
		s->live_lo++;
	if (!s->round_dirty && !s->nqueued)
		goto out_next;
	s->round_dirty = false;
	for (size_t i = s->live_lo; i < s->next_arrival; i++)
		if (s->j[i].state == J_RUNNING)
			preempt(s, (uint32_t)i);
	for (size_t i = s->live_lo; i < s->next_arrival; i++)
		if (s->j[i].state == J_QUEUED)
			s->queue[k++] = (uint32_t)i;
	s->qhead = 0;
	s->qtail = k;
	s->resv_job = s->resv_node = NOPOS;
	schedule(s);
	rebalance(s);
out_next:
	if (s->ndone < s->n && (s->nrunning || s->ev[s->n].pos != NOPOS))
		ev_at(s, id, s->now + s->o.round);
}

static void write_sample(struct sim *s)
{
	if (!s->ts)
		return;
	double G = (double)s->c->total_gpus, C = (double)s->c->total_cpus;
	fprintf(s->ts, "%.0f\t%.4f\t%.4f\t%.4f\t%.4f\t%zu\t%zu\n", s->now, s->sum_alloc_g / G,
		s->sum_busy_g / G, s->sum_alloc_c / C, s->sum_busy_c / C, s->nrunning, s->nqueued);
}

/* One row; the next one unless every job is done or the cap is reached. */
static void on_sample(struct sim *s, uint32_t id)
{
	write_sample(s);
	if (s->ndone < s->n && ++s->samples < GM_SIM_MAX_SAMPLES)
		ev_at(s, id, s->now + s->interval);
}

static void (*const handlers[EV_NTYPES])(struct sim *, uint32_t) = {
    [EV_ARRIVAL] = on_arrival,
    [EV_FINISH] = on_finish,
    [EV_SAMPLE] = on_sample,
    [EV_ROUND] = on_round,
};

/* Full audit (opts.check): recompute every node's use from the running jobs. */
static void audit(struct sim *s)
{
	uint32_t N = s->c->n;
	int64_t *ug = calloc(N, sizeof(int64_t)), *uc = calloc(N, sizeof(int64_t));
	uint64_t pool = 0;
	if (!ug || !uc) {
		sim_fail(s, -ENOMEM, "out of memory");
		goto out_free;
	}
	for (size_t i = 0; i < s->n; i++) {
		const struct sjob *j = &s->j[i];
		if (j->state != J_RUNNING)
			continue;
		pool += j->extra;
		for (uint32_t k = 0; k < j->nplace; k++) {
			ug[s->pl[j->place_off + k].node] += s->pl[j->place_off + k].g;
			uc[s->pl[j->place_off + k].node] += s->pl[j->place_off + k].c;
		}
	}
	for (uint32_t n = 0; n < N; n++)
		if (ug[n] > s->c->gpus[n] || uc[n] > s->c->cpus[n] ||
		    ug[n] + s->free_g[n] != s->c->gpus[n] ||
		    uc[n] + s->free_c[n] != s->c->cpus[n]) {
			sim_fail(s, -ENOTRECOVERABLE,
				 "invariant: node %u accounting (%lld/%u GPUs, "
				 "%lld/%u vCPUs)",
				 n, (long long)ug[n], s->c->gpus[n], (long long)uc[n],
				 s->c->cpus[n]);
			break;
		}
	if (pool + s->reserved_cpu > s->c->total_cpus)
		sim_fail(s, -ENOTRECOVERABLE, "invariant: pool workers exceed idle vCPUs");
	if (s->policy->audit && !s->rc)
		s->policy->audit(s);
out_free:
	free(ug);
	free(uc);
}

/* ---- setup and reports ---- */

static int cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double pct(const double *v, size_t n, double p)
{
	if (!n)
		return 0;
	size_t k = (size_t)ceil(p * (double)n) - 1; /* nearest rank */
	if (k >= n)
		k = n - 1;
	return v[k];
}

void gm_sim_opts_defaults(struct gm_sim_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->policy = GM_SIM_STATIC;
	o->seed = 1;
	o->arrival_scale = 1;
	o->remote_cost = GM_SIM_REMOTE_COST;
	o->local_min = 1;
}

const char *gm_sim_policy_name(enum gm_sim_policy p)
{
	return (unsigned)p < GM_SIM_NPOLICY ? sim_policies[p].name : "?";
}

int gm_sim_policy_parse(const char *name)
{
	for (int i = 0; i < GM_SIM_NPOLICY; i++)
		if (!strcmp(name, sim_policies[i].name))
			return i;
	return -EINVAL;
}

int gm_sim_summary_json(const struct gm_sim_summary *m, int with_wall, char *buf, size_t len)
{
	int k =
	    snprintf(buf, len,
		     "{\"policy\":\"%s\",\"jobs\":%zu,\"unplaceable\":%zu,\"avg_jct\":%.1f,"
		     "\"p50_jct\":%.1f,\"p95_jct\":%.1f,\"p99_jct\":%.1f,\"avg_queue\":%.1f,"
		     "\"makespan\":%.1f,\"offered_load\":%.4f,\"gpu_util\":%.4f,\"gpu_busy\":%.4f,"
		     "\"gpu_alloc\":%.4f,"
		     "\"cpu_util\":%.4f,\"cpu_alloc\":%.4f,\"events\":%llu,\"reallocations\":%llu",
		     m->policy, m->jobs, m->unplaceable, m->avg_jct, m->p50_jct, m->p95_jct,
		     m->p99_jct, m->avg_queue, m->makespan, m->offered_load, m->gpu_util,
		     m->gpu_busy, m->gpu_alloc, m->cpu_util, m->cpu_alloc,
		     (unsigned long long)m->events, (unsigned long long)m->realloc);
	if (k < 0 || (size_t)k >= len)
		return k;
	if (with_wall)
		k += snprintf(buf + k, len - (size_t)k, ",\"wall_s\":%.3f,\"max_rss_mib\":%.1f}",
			      m->wall_s, m->max_rss_mib);
	else
		k += snprintf(buf + k, len - (size_t)k, "}");
	return k;
}

/*
 * A trace job's identity: a hash of what the trace says about it (submit time
 * relative to the trace's first, duration, GPUs, vCPU request), so it does not
 * depend on the job's position: inserting, dropping or reordering other jobs
 * leaves it, and a trace written by --write-trace and read back keeps it. Jobs
 * whose four numbers are equal are indistinguishable and share it.
 */
static uint64_t job_id(const struct gm_job *tj)
{
	double sub = tj->submit + 0.0, dur = tj->duration + 0.0; /* -0 as 0 */
	float vc = tj->vcpu + 0.0f;
	uint64_t a, b;
	uint32_t v;
	struct gm_rng r;

	memcpy(&a, &sub, sizeof(a));
	memcpy(&b, &dur, sizeof(b));
	memcpy(&v, &vc, sizeof(v));
	gm_rng_init(&r, a, GM_SIM_STREAM_JOBID, b, (uint64_t)tj->gpus << 32 | v);
	return gm_rng_next(&r);
}

/* Build the per-job model: class, rates, calibrated work. */
static int init_jobs(struct sim *s, size_t *bad)
{
	const struct gm_profile *p = s->prof;
	double share_sum = 0;
	double cpg = (double)s->c->total_cpus / (double)s->c->total_gpus;

	for (int k = 0; k < p->n; k++)
		share_sum += p->c[k].share;
	*bad = SIZE_MAX;
	if (!(share_sum > 0))
		return -EINVAL;
	for (size_t i = 0; i < s->n; i++) {
		const struct gm_job *tj = &s->t->jobs[i];
		struct sjob *j = &s->j[i];
		int cls = tj->cls;
		if (cls >= p->n) {
			*bad = i;
			return -EINVAL;
		}
		if (cls < 0) {
			struct gm_rng r;
			gm_rng_init(&r, s->o.seed, GM_SIM_STREAM_CLASS, job_id(tj), 0);
			double x = gm_rng_uniform(&r) * share_sum;
			cls = 0;
			while (cls < p->n - 1 && x >= p->c[cls].share) {
				x -= p->c[cls].share;
				cls++;
			}
			/* rounding may carry x past the last class with a share: never
			 * draw a class of share 0 (goldminer profile --class NEW=BASE) */
			while (cls > 0 && !(p->c[cls].share > 0))
				cls--;
		}
		j->cls = (int16_t)cls;
		j->gpus = tj->gpus;
		/* No CPU request in the trace (Philly): the cluster's vCPU-per-GPU ratio. */
		j->vreq = tj->vcpu > 0 ? tj->vcpu : (float)(cpg * tj->gpus);
		if (j->vreq < 1)
			j->vreq = 1;
		j->R = p->c[cls].gpu_rate * tj->gpus;
		j->d = p->c[cls].cpu_rate;
		double v0 = s->o.work_at_share ? cpg * tj->gpus : j->vreq;
		double r0 = v0 * j->d < j->R ? v0 * j->d : j->R;
		j->work0 = j->left = tj->duration * r0;
		j->pslot = NOPOS;
		j->state = J_PENDING;
		s->ev[i] = (struct ev){.pos = NOPOS, .type = EV_FINISH, .id = (uint32_t)i};
	}
	return 0;
}

static int write_outputs(struct sim *s, struct gm_sim_summary *m)
{
	char path[4096];
	FILE *f;
	int rc = 0;

	snprintf(path, sizeof(path), "%s/jobs.tsv", s->o.out_dir);
	if (!(f = fopen(path, "w")))
		goto out_errno;
	fprintf(f, "id\tclass\tgpus\tvcpu_req\tsubmit\tstart\tend\tjct\tqueue\trun\ttrace_run"
		   "\tspeedup\n");
	for (size_t i = 0; i < s->n; i++) {
		const struct sjob *j = &s->j[i];
		double sub = s->t->jobs[i].submit / s->o.arrival_scale;
		if (j->state != J_DONE)
			continue;
		fprintf(f, "%zu\t%s\t%u\t%.3g\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.0f\t%.4f\n", i,
			s->prof->c[j->cls].name, j->gpus, (double)j->vreq, sub, j->start, j->end,
			j->end - sub, j->start - sub, j->end - j->start, s->t->jobs[i].duration,
			j->end > j->start ? s->t->jobs[i].duration / (j->end - j->start) : 0.0);
	}
	if (fclose(f))
		goto out_errno;
	snprintf(path, sizeof(path), "%s/summary.json", s->o.out_dir);
	if (!(f = fopen(path, "w")))
		goto out_errno;
	char buf[1024];
	gm_sim_summary_json(m, 0, buf, sizeof(buf));
	fprintf(f, "%s\n", buf);
	if (fclose(f))
		goto out_errno;
	return 0;
out_errno:
	rc = -errno;
	sim_fail(s, rc, "%s: %s", path, strerror(errno));
	return rc;
}

double gm_sim_min_sample_interval(const struct gm_trace *t, const struct gm_sim_opts *o)
{
	double longest = 0;

	if (!t->n || !(o->arrival_scale > 0))
		return 0;
	for (size_t i = 0; i < t->n; i++)
		if (t->jobs[i].duration > longest)
			longest = t->jobs[i].duration;
	return (t->jobs[t->n - 1].submit / o->arrival_scale + longest) / GM_SIM_MAX_SAMPLES;
}

/*
 * The cluster in the loader's ranges, and no GPU node that the policy could never
 * feed (sim_policy.no_cpu_node says why).
 */
static int check_cluster(struct sim *s)
{
	const struct gm_cluster *c = s->c;

	if (!c->n || c->n > GM_CLUSTER_MAX_NODES || c->max_gpus > GM_CLUSTER_MAX_NODE_GPUS ||
	    !c->total_gpus || !c->total_cpus) {
		sim_fail(s, -EINVAL,
			 "gm_sim_run: the cluster needs 1..%u nodes of 0..%u GPUs, and some GPUs "
			 "and vCPUs in total",
			 GM_CLUSTER_MAX_NODES, GM_CLUSTER_MAX_NODE_GPUS);
		return -EINVAL;
	}
	if (!s->policy->no_cpu_node)
		return 0;
	for (uint32_t n = 0; n < c->n; n++)
		if (c->gpus[n] && !c->cpus[n]) {
			sim_fail(s, -EINVAL,
				 "gm_sim_run: cluster node %u (0-based, in file order) has %u GPUs "
				 "but 0 vCPUs: under %s %s, so a job placed there could never run;"
				 " give the node vCPUs or leave it out (goldminer, "
				 "unlimited-cpu, cachew and pecan accept it)",
				 n, c->gpus[n], s->policy->name, s->policy->no_cpu_node);
			return -EINVAL;
		}
	return 0;
}

/* Rates and shares in the profile loader's ranges. */
static int check_profile(struct sim *s)
{
	const struct gm_profile *p = s->prof;

	if (p->n < 1 || p->n > GM_PROFILE_MAX) {
		sim_fail(s, -EINVAL, "gm_sim_run: the profile needs 1..%d classes", GM_PROFILE_MAX);
		return -EINVAL;
	}
	for (int k = 0; k < p->n; k++) {
		const struct gm_profile_class *pc = &p->c[k];
		if (!(pc->gpu_rate >= GM_PROFILE_MIN_RATE && pc->gpu_rate <= GM_PROFILE_MAX_RATE &&
		      pc->cpu_rate >= GM_PROFILE_MIN_RATE && pc->cpu_rate <= GM_PROFILE_MAX_RATE &&
		      pc->share >= 0 && pc->share <= GM_PROFILE_MAX_RATE)) {
			sim_fail(s, -EINVAL,
				 "gm_sim_run: profile class %d: rates must be %g..%g samples/s and "
				 "the share 0..%g",
				 k, GM_PROFILE_MIN_RATE, GM_PROFILE_MAX_RATE, GM_PROFILE_MAX_RATE);
			return -EINVAL;
		}
	}
	return 0;
}

/* Every job in the readers' ranges, sorted by submit (trace.h). */
static int check_trace(struct sim *s)
{
	const struct gm_trace *t = s->t;

	if (t->n > GM_TRACE_MAX_JOBS) {
		sim_fail(s, -EINVAL, "gm_sim_run: %zu jobs; the accepted range is 0..%u", t->n,
			 GM_TRACE_MAX_JOBS);
		return -EINVAL;
	}
	for (size_t i = 0; i < t->n; i++) {
		const struct gm_job *j = &t->jobs[i];
		if (j->submit >= 0 && j->submit <= GM_TRACE_MAX_SECONDS && j->duration > 0 &&
		    j->duration <= GM_TRACE_MAX_SECONDS && j->gpus >= 1 && j->vcpu >= 0 &&
		    j->vcpu <= 1e7 && (!i || j->submit >= t->jobs[i - 1].submit))
			continue;
		sim_fail(s, -EINVAL,
			 "gm_sim_run: trace job %zu (line %u): want submit 0..%.0f s in order, "
			 "duration > 0 and <= %.0f s, gpus >= 1, vcpu 0..1e7",
			 i, j->line, GM_TRACE_MAX_SECONDS, GM_TRACE_MAX_SECONDS);
		return -EINVAL;
	}
	return 0;
}

/* The options; then the inputs against them. */
static int check_inputs(struct sim *s)
{
	const struct gm_sim_opts *o = &s->o;
	double least;

	if ((unsigned)o->policy >= GM_SIM_NPOLICY || !(o->arrival_scale > 0) ||
	    !(o->remote_cost >= 0) || !(o->remote_cost < 1) || !(o->local_min >= 0) ||
	    !isfinite(o->arrival_scale) || !isfinite(o->local_min) || !(o->sample_interval >= 0) ||
	    !isfinite(o->sample_interval) || !(o->node_cores >= 0) || !isfinite(o->node_cores) ||
	    !(o->round == 0 || (o->round >= 1 && o->round <= 1e9))) {
		sim_fail(s, -EINVAL, "gm_sim_run: bad options");
		return -EINVAL;
	}
	s->cores_on = o->node_cores > 0;
	for (uint32_t n = 0; s->c->cores && n < s->c->n; n++) {
		if (!(s->c->cores[n] >= 0) || s->c->cores[n] > GM_CLUSTER_MAX_NODE_CPUS) {
			sim_fail(s, -EINVAL, "gm_sim_run: node %u: cores must be 0..%u", n,
				 GM_CLUSTER_MAX_NODE_CPUS);
			return -EINVAL;
		}
		s->cores_on |= s->c->cores[n] > 0;
	}
	s->policy = &sim_policies[o->policy];
	if (check_cluster(s) || check_profile(s) || check_trace(s))
		return -EINVAL;
	least = gm_sim_min_sample_interval(s->t, o);
	if (o->sample_interval > 0 && o->sample_interval < least) {
		sim_fail(s, -EINVAL,
			 "gm_sim_run: a sample interval of %g s gives more than %u time-series "
			 "rows over the trace's %.6g s; the accepted range is >= %.6g s (0: "
			 "automatic)",
			 o->sample_interval, GM_SIM_MAX_SAMPLES, least * GM_SIM_MAX_SAMPLES, least);
		return -EINVAL;
	}
	return 0;
}

/* Check the options, allocate the run's arrays and open the policy's state. */
static int sim_open(struct sim *s)
{
	const struct gm_cluster *c = s->c;

	if (check_inputs(s))
		return -EINVAL;
	s->n = s->t->n;
	s->j = calloc(s->n ? s->n : 1, sizeof(*s->j));
	s->ev = calloc(s->n + 3, sizeof(*s->ev)); /* n FINISH, ARRIVAL, SAMPLE, ROUND */
	s->heap = calloc(s->n + 3, sizeof(uint32_t));
	s->queue = calloc(s->n ? s->n : 1, sizeof(uint32_t));
	s->free_g = calloc(c->n, sizeof(int64_t));
	s->free_c = calloc(c->n, sizeof(int64_t));
	s->bh = calloc(c->max_gpus + 1, sizeof(uint32_t *));
	s->bn = calloc(c->max_gpus + 1, sizeof(uint32_t));
	s->bcap = calloc(c->max_gpus + 1, sizeof(uint32_t));
	s->bpos = calloc(c->n, sizeof(uint32_t));
	if (!s->j || !s->ev || !s->heap || !s->queue || !s->free_g || !s->free_c || !s->bh ||
	    !s->bn || !s->bcap || !s->bpos) {
		sim_fail(s, -ENOMEM, "gm_sim_run: out of memory");
		return -ENOMEM;
	}
	return s->policy->open ? s->policy->open(s) : 0;
}

/* Free what sim_open and the run allocated; closes the time series. */
static void sim_close(struct sim *s)
{
	if (s->ts && fclose(s->ts) && !s->rc)
		sim_fail(s, -EIO, "timeseries.tsv: write error");
	if (s->policy && s->policy->close)
		s->policy->close(s);
	free(s->pl);
	free(s->cp);
	free(s->cpi);
	for (uint32_t k = 0; s->bh && k <= s->c->max_gpus; k++)
		free(s->bh[k]);
	free(s->bh);
	free(s->bn);
	free(s->bcap);
	free(s->bpos);
	free(s->free_c);
	free(s->free_g);
	free(s->queue);
	free(s->heap);
	free(s->ev);
	free(s->j);
}

/* init_jobs with the message that names the trace line or the profile at fault. */
static int load_jobs(struct sim *s)
{
	const struct gm_trace *t = s->t;
	size_t bad;

	if (!init_jobs(s, &bad))
		return 0;
	if (bad == SIZE_MAX)
		sim_fail(s, -EINVAL,
			 "profile: no class has a share > 0, so trace jobs without a"
			 " class cannot be given one");
	else if (t->jobs[bad].line)
		sim_fail(s, -EINVAL,
			 "trace line %u: class %d is not in the profile (classes"
			 " 0..%d)",
			 t->jobs[bad].line, t->jobs[bad].cls, s->prof->n - 1);
	else
		sim_fail(s, -EINVAL,
			 "trace job %zu: class %d is not in the profile (classes"
			 " 0..%d)",
			 bad, t->jobs[bad].cls, s->prof->n - 1);
	return -EINVAL;
}

/* Every node free, in its bucket; the vCPU range of GPU nodes. */
static int init_nodes(struct sim *s)
{
	const struct gm_cluster *c = s->c;

	s->min_cpus = UINT32_MAX;
	for (uint32_t n = 0; n < c->n && !s->rc; n++) {
		s->free_g[n] = c->gpus[n];
		s->free_c[n] = c->cpus[n];
		bk_add(s, n);
		if (c->gpus[n] && c->cpus[n] < s->min_cpus)
			s->min_cpus = c->cpus[n];
		if (c->gpus[n] && c->cpus[n] > s->max_cpus)
			s->max_cpus = c->cpus[n];
	}
	s->free_gpus = c->total_gpus;
	s->resv_job = s->resv_node = NOPOS;
	return s->rc;
}

/* The time series file and the first ARRIVAL and SAMPLE events. */
static int init_events(struct sim *s)
{
	const struct gm_trace *t = s->t;

	s->ev[s->n] = (struct ev){.pos = NOPOS, .type = EV_ARRIVAL};
	s->ev[s->n + 1] = (struct ev){.pos = NOPOS, .type = EV_SAMPLE};
	s->ev[s->n + 2] = (struct ev){.pos = NOPOS, .type = EV_ROUND};
	if (s->o.out_dir) {
		char path[4096];
		snprintf(path, sizeof(path), "%s/timeseries.tsv", s->o.out_dir);
		if (!(s->ts = fopen(path, "w"))) {
			sim_fail(s, -errno, "%s: %s", path, strerror(errno));
			return s->rc;
		}
		fprintf(s->ts, "time\tgpu_alloc\tgpu_busy\tcpu_alloc\tcpu_busy\trunning\tqueued\n");
	}
	if (s->n) {
		s->win_idx[0] = (size_t)floor(0.05 * (double)s->n);
		s->win_idx[1] = (size_t)ceil(0.95 * (double)s->n) - 1;
		double last = t->jobs[s->n - 1].submit / s->o.arrival_scale;
		s->interval = s->o.sample_interval;
		if (!(s->interval > 0)) { /* auto: ~500 rows over the arrivals, >= 1 min */
			double least = gm_sim_min_sample_interval(t, &s->o);
			s->interval = last / 500 > 60 ? last / 500 : 60;
			if (s->interval < least) /* a long job after the last submit */
				s->interval = least;
		}
		ev_at(s, (uint32_t)s->n, t->jobs[0].submit / s->o.arrival_scale);
		ev_at(s, (uint32_t)s->n + 1, s->interval); /* samples at k x interval */
		if (s->o.round > 0)			   /* rounds at k x round, k >= 1 */
			ev_at(s, (uint32_t)s->n + 2, s->o.round);
	}
	return 0;
}

/*
 * No ARRIVAL or FINISH is left but jobs are unfinished: nothing can change any
 * more (a job at rate 0 that no event will speed up, or a queue no finish will
 * unblock). Inputs are checked so that this cannot happen; should it, the run
 * stops naming the first such job rather than sampling forever.
 */
static bool stalled(struct sim *s)
{
	uint32_t pending = s->nheap - (s->ev[s->n + 1].pos != NOPOS);

	if (pending || s->ndone == s->n)
		return false;
	for (size_t i = 0; i < s->n; i++) {
		const struct sjob *j = &s->j[i];
		if (j->state != J_QUEUED && j->state != J_RUNNING)
			continue;
		sim_fail(s, -EDEADLK,
			 "gm_sim_run: %zu of %zu jobs can never finish under %s: job %zu "
			 "(trace line %u, %u GPUs) is %s at %.3g samples/s and no event is left",
			 s->n - s->ndone, s->n, s->policy->name, i, s->t->jobs[i].line, j->gpus,
			 j->state == J_QUEUED ? "queued" : "running", j->rate);
		break;
	}
	return true;
}

/* The event loop: pop, advance time, integrate, handle; until no event is left. */
static int run_events(struct sim *s)
{
	while (s->nheap && !s->rc) {
		uint32_t id = ev_pop(s);
		double tn = s->ev[id].t;
		if (tn < s->now) {
			sim_fail(s, -ENOTRECOVERABLE, "invariant: time went back (%.17g < %.17g)",
				 tn, s->now);
			break;
		}
		s->now = tn;
		integrate(s);
		handlers[s->ev[id].type](s, id);
		s->events++;
		if (s->o.check && !s->rc)
			audit(s);
		if (s->ndone == s->n && id != s->n + 1) {
			write_sample(s); /* the final state */
			ev_cancel(s, (uint32_t)s->n + 1);
			ev_cancel(s, (uint32_t)s->n + 2); /* no round after the last end */
		}
		if (!s->rc && stalled(s))
			break;
	}
	if (s->rc)
		return s->rc;
	if (s->ndone != s->n || s->nqueued || s->nrunning)
		sim_fail(s, -ENOTRECOVERABLE, "invariant: %zu of %zu jobs never finished",
			 s->n - s->ndone, s->n);
	return s->rc;
}

/* Job completion times of the finished jobs: average, percentiles, makespan. */
static int summarize_jobs(struct sim *s, struct gm_sim_summary *m)
{
	const struct gm_trace *t = s->t;
	double *jct = malloc((s->n ? s->n : 1) * sizeof(double));
	size_t nj = 0;
	double sq = 0, sj = 0, first = INFINITY, lastend = 0;

	if (!jct) {
		sim_fail(s, -ENOMEM, "gm_sim_run: out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < s->n; i++) {
		const struct sjob *j = &s->j[i];
		double sub = t->jobs[i].submit / s->o.arrival_scale;
		if (j->state != J_DONE)
			continue;
		jct[nj++] = j->end - sub;
		sj += j->end - sub;
		sq += j->start - sub;
		if (sub < first)
			first = sub;
		if (j->end > lastend)
			lastend = j->end;
	}
	qsort(jct, nj, sizeof(double), cmp_dbl);
	m->jobs = nj;
	m->unplaceable = s->unplaceable;
	if (nj) {
		m->avg_jct = sj / (double)nj;
		m->avg_queue = sq / (double)nj;
		m->p50_jct = pct(jct, nj, 0.50);
		m->p95_jct = pct(jct, nj, 0.95);
		m->p99_jct = pct(jct, nj, 0.99);
		m->makespan = lastend - first;
	}
	free(jct);
	return 0;
}

/* Utilisation: of allocated GPUs over the run, cluster-wide shares over the window. */
static void summarize_use(const struct sim *s, struct gm_sim_summary *m)
{
	const struct gm_trace *t = s->t;

	m->gpu_util = s->int_alloc_g > 0 ? s->int_busy_g / s->int_alloc_g : 0;
	if (s->t_win[1] > s->t_win[0]) {
		/*
		 * Cluster-wide shares are averaged over the window of the middle 90% of
		 * submits: over the whole run the GPU-busy integral is the same for every
		 * policy (the work is fixed), and a sparse head or a long tail of the trace
		 * would dilute it. offered_load is the traced GPU time of the jobs submitted
		 * in the window over the window's GPU time (> 1: overloaded as traced).
		 */
		double w = s->t_win[1] - s->t_win[0], G = (double)s->c->total_gpus;
		double C = (double)s->c->total_cpus, gs = 0;
		m->gpu_busy = (s->win_busy_g[1] - s->win_busy_g[0]) / (w * G);
		m->gpu_alloc = (s->win_alloc_g[1] - s->win_alloc_g[0]) / (w * G);
		m->cpu_util = (s->win_busy_c[1] - s->win_busy_c[0]) / (w * C);
		m->cpu_alloc = (s->win_alloc_c[1] - s->win_alloc_c[0]) / (w * C);
		for (size_t i = s->win_idx[0]; i <= s->win_idx[1]; i++)
			gs += t->jobs[i].gpus * t->jobs[i].duration;
		m->offered_load = gs / (w * G);
	}
	m->events = s->events;
	m->realloc = s->realloc;
	m->samples = s->samples;
	m->samples_capped = s->samples >= GM_SIM_MAX_SAMPLES;
}

int gm_sim_run(const struct gm_cluster *c, const struct gm_trace *t, const struct gm_profile *prof,
	       const struct gm_sim_opts *o, struct gm_sim_summary *m, char *err, size_t errlen)
{
	struct sim S = {.c = c, .t = t, .prof = prof, .o = *o, .err = err, .errlen = errlen};
	struct sim *s = &S;
	struct rusage ru;

	double w0 = gm_now_s();
	memset(m, 0, sizeof(*m));
	if (sim_open(s) || load_jobs(s) || init_nodes(s) || init_events(s) || run_events(s))
		goto out_close;
	snprintf(m->policy, sizeof(m->policy), "%s", s->policy->name);
	if (summarize_jobs(s, m))
		goto out_close;
	summarize_use(s, m);
	m->wall_s = gm_now_s() - w0;
	if (!getrusage(RUSAGE_SELF, &ru))
		m->max_rss_mib = (double)ru.ru_maxrss / 1024.0;
	if (o->out_dir)
		write_outputs(s, m);
out_close:
	sim_close(s);
	return s->rc;
}
