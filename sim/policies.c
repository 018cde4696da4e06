/*
 * policies.c - the simulator's CPU policies, one row of operations each
 * (sim_policy.h); the engine (sim.c) calls them and never asks which one runs.
 *
 *   static         a job reserves its requested vCPUs on its own nodes (today's
 *                  schedulers) and runs at min(R, requested vCPUs x d);
 *   proportional   a job gets its nodes' vCPUs in proportion to its GPUs there;
 *   goldminer      a job keeps a small local share (local_min vCPUs per GPU) and
 *                  the idle vCPUs of the whole cluster form a pool of data workers
 *                  shared out by core/policy.c; a job's pool workers sit on idle
 *                  vCPUs of its own nodes first (local: full rate), the rest on
 *                  other nodes (remote: (1 - remote_cost) of the rate); each job
 *                  is capped at the workers it needs given where they land;
 *   unlimited-cpu  every job runs at its GPU-bound rate R (the upper bound); it
 *                  reserves nothing and is charged the vCPUs it would need;
 * and three baselines from the literature (rules and sources in traces/README.md):
 *   synergy-tune   Synergy (OSDI'22): own nodes' vCPUs, planned per node greedily in
 *                  arrival order: ideal where it fits, else fair share, earlier
 *                  jobs trimmed to theirs only as far as a later one needs;
 *   cachew         Cachew (ATC'22): remote workers autoscaled to each job's
 *                  throughput target, first come first served, no priority;
 *   pecan          Pecan (ATC'24): cachew with local idle vCPUs first.
 *
 * Pool workers are one vCPU each; where they sit is kept per node (local first,
 * see "where pool workers sit"), and "pool used <= idle vCPUs" is the condition
 * for placing the remote ones without over-commit.
 *
 * Not here: placement (best fit, backfill, spreading live in the engine, the same
 * for every policy but synergy-tune, which tells it where its demand fits:
 * fits, fit_gpus), events, metrics.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "goldminer/policy.h"
#include "sim_policy.h"

/* ---- reservations ---- */

/* static: the requested vCPUs, split over the job's nodes by GPUs (at least 1). */
static double want_requested(const struct sim *s, const struct sjob *j, uint32_t t)
{
	(void)s;
	double want = ceil((double)j->vreq * t / j->gpus - 1e-9);
	return want < 1 ? 1 : want;
}

/* goldminer: local_min vCPUs per GPU, at most the request and at least 1 per job. */
static double want_local_min(const struct sim *s, const struct sjob *j, uint32_t t)
{
	double l = s->o.local_min * j->gpus;
	if (l > j->vreq)
		l = j->vreq;
	if (l < 1)
		l = 1;
	double want = ceil(l * t / j->gpus - 1e-9);
	return want < 1 ? 1 : want;
}

static uint32_t capped(const struct sim *s, uint32_t n, double want)
{
	if (want > s->c->cpus[n])
		want = s->c->cpus[n]; /* a request no node can hold is capped to the node */
	return (uint32_t)want;
}

static uint32_t reserve_requested(const struct sim *s, const struct sjob *j, uint32_t n, uint32_t t)
{
	return capped(s, n, want_requested(s, j, t));
}

static uint32_t reserve_local_min(const struct sim *s, const struct sjob *j, uint32_t n, uint32_t t)
{
	return capped(s, n, want_local_min(s, j, t));
}

/* proportional: always free while the GPUs are (floor of the share). */
static uint32_t reserve_share(const struct sim *s, const struct sjob *j, uint32_t n, uint32_t t)
{
	(void)j;
	return (uint32_t)((uint64_t)s->c->cpus[n] * t / s->c->gpus[n]);
}

static uint32_t reserve_none(const struct sim *s, const struct sjob *j, uint32_t n, uint32_t t)
{
	(void)s, (void)j, (void)n, (void)t;
	return 0;
}

/* A whole-job want above the smallest GPU node is capped differently per node. */
static bool varies_requested(const struct sim *s, const struct sjob *j)
{
	return s->min_cpus != s->max_cpus && want_requested(s, j, j->gpus) > s->min_cpus;
}

static bool varies_local_min(const struct sim *s, const struct sjob *j)
{
	return s->min_cpus != s->max_cpus && want_local_min(s, j, j->gpus) > s->min_cpus;
}

/* ---- rates and charges ---- */

static double rate_requested(const struct sim *s, const struct sjob *j, double *busy)
{
	(void)s;
	double lr = (j->local < j->vreq ? j->local : j->vreq) * j->d;
	double r = lr < j->R ? lr : j->R;
	*busy = r / j->d;
	return r;
}

static double rate_share(const struct sim *s, const struct sjob *j, double *busy)
{
	/* exact share (the reservation is rounded down to whole vCPUs) */
	double share = 0;
	for (uint32_t i = 0; i < j->nplace; i++) {
		const struct place *p = &s->pl[j->place_off + i];
		share += (double)s->c->cpus[p->node] * p->g / s->c->gpus[p->node];
	}
	double lr = share * j->d;
	double r = lr < j->R ? lr : j->R;
	*busy = r / j->d;
	return r;
}

/*
 * Its reserved vCPUs, then its local pool workers at the full rate d, then its
 * remote ones at (1 - remote_cost) d. At no remote cost where a worker sits does
 * not change its rate: lw is then left out, so such runs keep their exact bytes.
 */
static double rate_pool(const struct sim *s, const struct sjob *j, double *busy)
{
	double rc = s->o.remote_cost, rr = j->d * (1 - rc);
	uint32_t lw = rc > 0 ? j->lw : 0;
	double lr = j->local * j->d;
	double pr = j->extra * rr + lw * j->d * rc; /* each local worker wins back rc */
	if (lr >= j->R) {
		*busy = j->R / j->d;
		return j->R;
	}
	if (lr + pr >= j->R) {
		double x = (j->R - lr) / j->d; /* local workers that would be enough */
		*busy = x <= lw ? j->local + x : j->local + lw + (j->R - lr - lw * j->d) / rr;
		return j->R;
	}
	*busy = (double)j->local + j->extra;
	return lr + pr;
}

static double rate_unlimited(const struct sim *s, const struct sjob *j, double *busy)
{
	(void)s;
	*busy = j->R / j->d;
	return j->R;
}

/* What it holds: its local reservation and its pool workers. */
static double charge_held(const struct sim *s, const struct sjob *j, double busy)
{
	(void)s, (void)busy;
	return (double)j->local + j->extra;
}

/* unlimited-cpu reserves nothing: count the vCPUs it would need */
static double charge_busy(const struct sim *s, const struct sjob *j, double busy)
{
	(void)s, (void)j;
	return busy;
}

/* ---- where pool workers sit: local first ---- */

/*
 * A pool job's workers sit on its own nodes while those have idle vCPUs (local,
 * full rate), the rest anywhere else (remote). Per node, lpool counts the local
 * pool workers there; the node's spare = free_c - lpool. Remote workers are only
 * counted: they fit in the spare of all nodes taken together (pool used <= idle
 * vCPUs, checked by the engine), and since a job has remote workers only while its
 * own nodes have no spare (kept by the four moves below), any spare vCPU is remote
 * to every job that has remote workers, so a per-node placement of them exists.
 * The moves touch one job's places or one node's residents (at most its GPUs), so
 * no event costs O(running jobs):
 *   fill    a job takes spare on its nodes for its remote workers;
 *   shrink  a job with fewer workers gives back remote ones first, then local
 *           ones, and the node's other residents fill the spare (wake);
 *   evict   a job reserving vCPUs on a node with too little spare pushes local
 *           workers of its residents to remote (they then fill elsewhere);
 *   leave   a finishing job's local workers free their node's spare (wake).
 */
static int64_t spare(const struct sim *s, uint32_t n)
{
	return s->free_c[n] - s->lpool[n];
}

/* The rate of job ji changed because workers moved between local and remote. */
static void mark_dirty(struct sim *s, uint32_t ji);

static void moved(struct sim *s, uint32_t ji)
{
	if (s->o.remote_cost > 0) { /* else the move does not change its rate */
		sim_set_rate(s, ji);
		s->realloc++;
		mark_dirty(s, ji);
	}
}

static void take_local(struct sim *s, struct place *p, int64_t k)
{
	p->w = (uint32_t)((int64_t)p->w + k);
	s->lpool[p->node] += k;
	s->j[p->job].lw = (uint32_t)((int64_t)s->j[p->job].lw + k);
}

/* Move remote workers of ji onto spare vCPUs of its nodes; true if any moved. */
static bool fill(struct sim *s, uint32_t ji)
{
	struct sjob *j = &s->j[ji];
	bool any = false;
	for (uint32_t i = 0; i < j->nplace && j->lw < j->extra; i++) {
		struct place *p = &s->pl[j->place_off + i];
		int64_t a = spare(s, p->node), want = (int64_t)j->extra - j->lw;
		if (a <= 0)
			continue;
		take_local(s, p, a < want ? a : want);
		any = true;
	}
	return any;
}

/* Spare on node n went up: its residents with remote workers move them there. */
static void wake(struct sim *s, uint32_t n)
{
	for (uint32_t pi = s->res_head[n]; pi != NOPOS && spare(s, n) > 0; pi = s->pl[pi].next) {
		struct place *p = &s->pl[pi];
		struct sjob *j = &s->j[p->job];
		if (j->lw >= j->extra)
			continue;
		int64_t a = spare(s, n), want = (int64_t)j->extra - j->lw;
		take_local(s, p, a < want ? a : want);
		moved(s, p->job);
	}
}

/* Job ji now has fewer workers than local ones: give back local ones, last node first. */
static void shrink(struct sim *s, uint32_t ji)
{
	struct sjob *j = &s->j[ji];
	for (uint32_t i = j->nplace; i-- > 0 && j->lw > j->extra;) {
		struct place *p = &s->pl[j->place_off + i];
		int64_t over = (int64_t)j->lw - j->extra;
		if (!p->w)
			continue;
		take_local(s, p, -(p->w < over ? (int64_t)p->w : over));
		wake(s, p->node);
	}
}

/* Node n has negative spare (a new reservation): push residents' local workers out. */
static void evict(struct sim *s, uint32_t n)
{
	for (uint32_t pi = s->res_head[n]; pi != NOPOS && spare(s, n) < 0; pi = s->pl[pi].next) {
		struct place *p = &s->pl[pi];
		if (!p->w)
			continue;
		int64_t over = -spare(s, n);
		take_local(s, p, -(p->w < over ? (int64_t)p->w : over));
		fill(s, p->job); /* its other nodes, if it spans several */
		moved(s, p->job);
	}
}

/* Place pi joins / leaves its node's residents. */
static void res_link(struct sim *s, uint32_t pi)
{
	struct place *p = &s->pl[pi];
	p->prev = NOPOS;
	p->next = s->res_head[p->node];
	if (p->next != NOPOS)
		s->pl[p->next].prev = pi;
	s->res_head[p->node] = pi;
}

static void res_unlink(struct sim *s, uint32_t pi)
{
	struct place *p = &s->pl[pi];
	if (p->prev != NOPOS)
		s->pl[p->prev].next = p->next;
	else
		s->res_head[p->node] = p->next;
	if (p->next != NOPOS)
		s->pl[p->next].prev = p->prev;
	p->prev = p->next = NOPOS;
}

/* Job ji starts: its places join their nodes' residents; make room for its reservation. */
static void join_nodes(struct sim *s, uint32_t ji)
{
	struct sjob *j = &s->j[ji];
	j->lw = 0;
	for (uint32_t i = 0; i < j->nplace; i++) {
		s->pl[j->place_off + i].w = 0;
		res_link(s, j->place_off + i);
	}
	for (uint32_t i = 0; i < j->nplace; i++)
		if (spare(s, s->pl[j->place_off + i].node) < 0)
			evict(s, s->pl[j->place_off + i].node);
}

/* Job ji ends (its vCPUs are already given back): its places leave their nodes. */
static void leave_nodes(struct sim *s, uint32_t ji)
{
	struct sjob *j = &s->j[ji];
	for (uint32_t i = 0; i < j->nplace; i++) {
		struct place *p = &s->pl[j->place_off + i];
		take_local(s, p, -(int64_t)p->w);
		res_unlink(s, j->place_off + i);
	}
	for (uint32_t i = 0; i < j->nplace; i++)
		wake(s, s->pl[j->place_off + i].node);
}

/* Job ji's worker count changed to j->extra: place the difference, local first. */
static void replace_workers(struct sim *s, uint32_t ji)
{
	if (s->j[ji].lw > s->j[ji].extra)
		shrink(s, ji);
	else
		fill(s, ji);
}

/*
 * opts.check: recount every node's local workers from the running jobs' places,
 * and check that remote workers fit in the spare and that no job has remote
 * workers while one of its nodes has spare.
 */
static void audit_places(struct sim *s)
{
	uint32_t N = s->c->n;
	int64_t *lp = calloc(N, sizeof(int64_t)), remote = 0, room = 0;
	if (!lp) {
		sim_fail(s, -ENOMEM, "out of memory");
		return;
	}
	for (size_t i = 0; i < s->n && !s->rc; i++) {
		const struct sjob *j = &s->j[i];
		int64_t lw = 0;
		if (j->state != J_RUNNING)
			continue;
		for (uint32_t k = 0; k < j->nplace; k++) {
			const struct place *p = &s->pl[j->place_off + k];
			lp[p->node] += p->w;
			lw += p->w;
			if (j->lw < j->extra && spare(s, p->node) > 0)
				sim_fail(s, -ENOTRECOVERABLE,
					 "invariant: job %zu has remote workers while its node %u "
					 "has %lld spare vCPUs",
					 i, p->node, (long long)spare(s, p->node));
		}
		if (lw != j->lw || j->lw > j->extra)
			sim_fail(s, -ENOTRECOVERABLE,
				 "invariant: job %zu has %lld local of %u workers, counted %u", i,
				 (long long)lw, j->extra, j->lw);
		remote += (int64_t)j->extra - j->lw;
	}
	for (uint32_t n = 0; n < N && !s->rc; n++) {
		if (lp[n] != s->lpool[n] || lp[n] > s->free_c[n])
			sim_fail(s, -ENOTRECOVERABLE,
				 "invariant: node %u has %lld local pool workers, counted %lld, "
				 "%lld vCPUs free",
				 n, (long long)lp[n], (long long)s->lpool[n],
				 (long long)s->free_c[n]);
		room += spare(s, n);
	}
	if (!s->rc && remote > room)
		sim_fail(s, -ENOTRECOVERABLE,
			 "invariant: %lld remote pool workers, %lld spare vCPUs", (long long)remote,
			 (long long)room);
	free(lp);
}

/* ---- the goldminer pool ---- */

/* The per-node books of placement-aware pools (freed by their close). */
static int placement_open(struct sim *s)
{
	s->lpool = calloc(s->c->n, sizeof(int64_t));
	s->res_head = malloc(s->c->n * sizeof(uint32_t));
	if (!s->lpool || !s->res_head) {
		sim_fail(s, -ENOMEM, "gm_sim_run: out of memory");
		return -ENOMEM;
	}
	memset(s->res_head, 0xff, s->c->n * sizeof(uint32_t)); /* NOPOS */
	return 0;
}

static int pool_open(struct sim *s)
{
	int rc = placement_open(s);
	if (!rc && (rc = gm_policy_create(&s->pol, s->c->total_cpus)))
		sim_fail(s, rc, "gm_sim_run: out of memory");
	return rc;
}

static void pool_close(struct sim *s)
{
	gm_policy_destroy(s->pol);
	free(s->slot2job);
	free(s->dirty);
	free(s->lpool);
	free(s->res_head);
}

static int grow_slots(struct sim *s, uint32_t slot)
{
	if (slot < s->slotcap)
		return 0;
	uint32_t nc = s->slotcap ? s->slotcap : 1024;
	while (nc <= slot)
		nc *= 2;
	void *a = realloc(s->slot2job, nc * sizeof(uint32_t));
	if (!a)
		return -ENOMEM;
	s->slot2job = a;
	s->slotcap = nc;
	return 0;
}

/*
 * core/policy.c plans every pool worker at the remote rate (it knows one rate per
 * job), so a job whose workers land on its own nodes would be given more than it
 * needs. Its cap (max_workers) is therefore the count that reaches its GPU-bound
 * rate given the local vCPUs it has or could take (its local workers plus its
 * nodes' spare): those at the full rate first, remote ones for the rest. The cap
 * is recomputed for the jobs whose local workers moved, and the pool rebalanced
 * again, at most POOL_PASSES times per event; what is left waits for the next
 * event. Rates always follow the workers held, so a stale cap costs efficiency,
 * never correctness. At no remote cost no cap is needed (every worker is worth
 * the same), and none is set.
 */
#define POOL_PASSES 3

static uint32_t pool_need(const struct sim *s, const struct sjob *j)
{
	double rest = j->R - j->local * j->d, rr = j->d * (1 - s->o.remote_cost), a = j->lw;
	if (rest <= 0)
		return 0;
	for (uint32_t i = 0; i < j->nplace; i++) {
		int64_t sp = spare(s, s->pl[j->place_off + i].node);
		a += sp > 0 ? (double)sp : 0;
	}
	if (rest <= a * j->d)
		return (uint32_t)ceil(rest / j->d - 1e-9);
	double w = a + ceil((rest - a * j->d) / rr - 1e-9);
	return w < (double)UINT32_MAX ? (uint32_t)w : UINT32_MAX;
}

/* What core/policy.c knows of job ji: the rate its pool must add, per worker, its cap. */
static struct gm_policy_job pool_job(const struct sim *s, uint32_t ji)
{
	const struct sjob *j = &s->j[ji];
	double rest = j->R - j->local * j->d; /* what the local share leaves */
	return (struct gm_policy_job){
	    .gpu_rate = rest > 0 ? rest : 0,
	    .worker_rate = j->d * (1 - s->o.remote_cost),
	    .weight = j->gpus / j->R, /* objective: GPUs kept busy */
	    .min_workers = 0,
	    .max_workers = j->want,
	    .tag = ji,
	};
}

static void mark_dirty(struct sim *s, uint32_t ji)
{
	if (!s->pol || s->j[ji].dirty)
		return; /* not goldminer (pecan shares the moves), or listed */
	if (s->ndirty == s->dirtycap) {
		uint32_t nc = s->dirtycap ? 2 * s->dirtycap : 256;
		void *a = realloc(s->dirty, nc * sizeof(uint32_t));
		if (!a) {
			sim_fail(s, -ENOMEM, "gm_sim_run: out of memory");
			return;
		}
		s->dirty = a;
		s->dirtycap = nc;
	}
	s->j[ji].dirty = 1;
	s->dirty[s->ndirty++] = ji;
}

/* New caps for the listed jobs; true if one changed (the pool must be rebalanced). */
static bool recap(struct sim *s)
{
	bool any = false;
	for (uint32_t i = 0; i < s->ndirty; i++) {
		uint32_t ji = s->dirty[i];
		struct sjob *j = &s->j[ji];
		j->dirty = 0;
		if (j->state != J_RUNNING || pool_need(s, j) == j->want)
			continue;
		j->want = pool_need(s, j);
		struct gm_policy_job pj = pool_job(s, ji);
		if (gm_policy_update(s->pol, j->pslot, &pj))
			sim_fail(s, -ENOTRECOVERABLE, "invariant: policy refused job %u", ji);
		any = true;
	}
	s->ndirty = 0;
	return any;
}

static int pool_start(struct sim *s, uint32_t ji)
{
	struct sjob *j = &s->j[ji];
	uint32_t slot;
	j->want = UINT32_MAX;
	j->dirty = 0;
	struct gm_policy_job pj = pool_job(s, ji);
	int rc = gm_policy_add(s->pol, &pj, &slot);
	if (!rc)
		rc = grow_slots(s, slot);
	if (rc) {
		sim_fail(s, rc, "policy: cannot add job %u (%s)", ji, strerror(-rc));
		return rc;
	}
	j->pslot = slot;
	s->slot2job[slot] = ji;
	join_nodes(s, ji);
	return 0;
}

static void pool_stop(struct sim *s, uint32_t ji)
{
	gm_policy_remove(s->pol, s->j[ji].pslot);
	leave_nodes(s, ji);
	s->j[ji].pslot = NOPOS;
}

/* Apply the policy's changes: place the workers, re-rate the jobs. */
static void pool_apply(struct sim *s)
{
	const uint32_t *ch;
	size_t n = gm_policy_changed(s->pol, &ch);
	for (size_t i = 0; i < n; i++) {
		uint32_t ji = s->slot2job[ch[i]];
		s->j[ji].extra = gm_policy_workers(s->pol, ch[i]);
		replace_workers(s, ji);
		sim_set_rate(s, ji);
		s->realloc++;
		if (s->o.remote_cost > 0)
			mark_dirty(s, ji);
	}
}

/* Share the idle vCPUs out again and apply the changes to job rates. */
static void pool_rebalance(struct sim *s)
{
	uint64_t total = s->c->total_cpus;
	gm_policy_set_budget(s->pol, total > s->reserved_cpu ? total - s->reserved_cpu : 0);
	for (int pass = 0; pass < POOL_PASSES && !s->rc; pass++) {
		if (gm_policy_rebalance(s->pol))
			sim_fail(s, -ENOTRECOVERABLE, "invariant: pool over budget");
		pool_apply(s);
		if (!recap(s))
			break;
	}
	if (gm_policy_used(s->pol) + s->reserved_cpu > total)
		sim_fail(s, -ENOTRECOVERABLE,
			 "invariant: vCPUs over-committed (%llu pool + %llu "
			 "local > %llu)",
			 (unsigned long long)gm_policy_used(s->pol),
			 (unsigned long long)s->reserved_cpu, (unsigned long long)total);
}

/* ---- synergy-tune (Synergy, OSDI'22) ---- */

/*
 * A job's data workers run on the vCPUs of its own nodes only; each node's vCPUs
 * are planned by Synergy-TUNE's greedy rule (traces/README.md cites the source):
 * the node's jobs in arrival order, each asks for its ideal (its profiled CPUs per
 * GPU where the profile gives them, capped at a node's vCPUs, as Synergy's demand;
 * else the vCPUs that saturate its GPUs there); it gets it where the vCPUs left
 * allow, else it is switched to its GPU-proportional fair share (where its ideal
 * is above it); where even that does not fit, earlier jobs holding more than
 * their fair share are trimmed to it, one at a time (single-node jobs first, then
 * the most vCPUs per GPU first), until the shortfall is covered; what the
 * trimming frees beyond it goes to later jobs. The fair share is the floor
 * (reserved at placement, as proportional, so always free while the GPUs are).
 * Memory is the second resource where the node's size is known and the job's
 * class asks for some (profile mem_per_gpu): a job gets its ideal only where both
 * its vCPUs and its memory fit, is switched to fair share in both where either is
 * above it, and a shortfall in either is covered by trimming. A job at its ideal
 * runs at its profiled speed-up (synergy_peak), else min(that, vCPUs x rate).
 * Placement is Synergy's too: its GPUs are taken node by node, in node order,
 * where their share of the ideal fits (synergy_fit_gpus: Synergy's random
 * placement, the one its benchmark runs), else the engine's best fit at fair
 * share; opts.place_demand: a node where the whole ideal fits (synergy_fits:
 * Synergy's placement mode). Synergy re-plans every round of 300 s; here a node
 * is re-planned whenever its jobs change (with opts.round, when the round places
 * them again: a job that ends mid-round leaves its vCPUs idle until then), and
 * vCPUs nobody asks for stay idle (it never lends them to another server's jobs). */

/*
 * vCPUs per GPU j asks for: its class's profiled ask (Synergy's `cpus` per GPU)
 * where the profile gives one, unless opts.tune_fewest; else 0 (the fewest vCPUs
 * that reach its GPU rate).
 */
static double ask_per_gpu(const struct sim *s, const struct sjob *j)
{
	return s->o.tune_fewest ? 0 : s->prof->c[j->cls].ask_per_gpu;
}

static double fair_at(const struct sim *s, const struct place *p)
{
	return (double)s->c->cpus[p->node] * p->g / s->c->gpus[p->node];
}

/*
 * j's ideal vCPUs on place p. With a profiled ask, Synergy's demand
 * (Workload.add_synergy_profile): the ask times the job's GPUs, capped at a
 * server's vCPUs, spread over its GPUs evenly (p holds p->g of them); a job with
 * more GPUs than a server asks for its fair share. Without one: the whole vCPUs
 * that saturate its GPUs there (the profile's exact rates), at most the node's.
 * At least 1.
 */
static double ideal_at(const struct sim *s, const struct sjob *j, const struct place *p)
{
	double ask = ask_per_gpu(s, j), v;
	if (ask > 0 && j->gpus > s->c->gpus[p->node]) {
		v = fair_at(s, p);
	} else if (ask > 0) {
		double tot = ask * j->gpus;
		if (tot > s->c->cpus[p->node])
			tot = s->c->cpus[p->node];
		v = tot * p->g / j->gpus;
	} else {
		v = ceil(j->R * p->g / j->gpus / j->d - 1e-9);
		if (v > s->c->cpus[p->node])
			v = s->c->cpus[p->node];
	}
	return v < 1 ? 1 : v;
}

/* Node n's memory in GB, 0 where not known (then memory is not planned). */
static double node_mem(const struct sim *s, uint32_t n)
{
	return s->c->mem ? (double)s->c->mem[n] : 0;
}

static double mem_fair_at(const struct sim *s, const struct sjob *j, const struct place *p)
{
	return node_mem(s, p->node) > 0 && s->prof->c[j->cls].mem_per_gpu > 0
		   ? node_mem(s, p->node) * p->g / s->c->gpus[p->node]
		   : 0;
}

/*
 * GB j asks for on place p (0 where not planned): as its vCPUs, the class's GB per
 * GPU times its GPUs, capped at a server's memory, spread evenly; fair share for a
 * job larger than a server.
 */
static double mem_ideal_at(const struct sim *s, const struct sjob *j, const struct place *p)
{
	double mem = node_mem(s, p->node), tot = s->prof->c[j->cls].mem_per_gpu * j->gpus;
	if (!(mem > 0) || !(tot > 0))
		return 0;
	if (j->gpus > s->c->gpus[p->node])
		return mem_fair_at(s, j, p);
	return (tot < mem ? tot : mem) * p->g / j->gpus;
}

static double synergy_held(const struct sim *s, const struct sjob *j)
{
	double v = 0;
	for (uint32_t i = 0; i < j->nplace; i++)
		v += s->pl[j->place_off + i].tune;
	return v;
}

/*
 * The rate j reaches at its ideal. With a profiled ask, Synergy's speed-up where
 * the ask was capped (add_synergy_profile): on the line from fair share (speed-up
 * 1) to the whole ask (the profile's speed-up, the GPU-bound rate) at the capped
 * vCPUs; a job larger than a server keeps its fair-share rate. Else the GPU rate.
 */
static double synergy_peak(const struct sim *s, const struct sjob *j)
{
	double ask = ask_per_gpu(s, j);
	if (!(ask > 0) || !j->nplace)
		return j->R;
	uint32_t n = s->pl[j->place_off].node;
	double fair = (double)s->c->cpus[n] * j->gpus / s->c->gpus[n];
	double rf = fair * j->d < j->R ? fair * j->d : j->R, full = ask * j->gpus;
	if (j->gpus > s->c->gpus[n])
		return rf;
	if (full <= s->c->cpus[n] + 1e-9 || full <= fair + 1e-9)
		return j->R;
	return rf + (j->R - rf) * (s->c->cpus[n] - fair) / (full - fair);
}

/*
 * min(peak, vCPUs x d); with a profiled ask a job that holds its ideal on all its
 * nodes runs at its peak (Synergy's job runs at the speed-up its profile measured
 * at that many CPUs, even where the linear model would need more: m5 asks 6 per
 * GPU, 7.5 reach R).
 */
static double rate_synergy(const struct sim *s, const struct sjob *j, double *busy)
{
	double held = synergy_held(s, j), r = held * j->d, peak = synergy_peak(s, j);
	if (ask_per_gpu(s, j) > 0) {
		double ideal = 0;
		for (uint32_t i = 0; i < j->nplace; i++)
			ideal += ideal_at(s, j, &s->pl[j->place_off + i]);
		if (held + 1e-6 >= ideal)
			r = peak;
	}
	if (r > peak)
		r = peak;
	*busy = r / j->d;
	return r;
}

static double charge_synergy(const struct sim *s, const struct sjob *j, double busy)
{
	(void)busy;
	return synergy_held(s, j);
}

static int synergy_open(struct sim *s)
{
	uint32_t g = s->c->max_gpus ? s->c->max_gpus : 1;
	s->res_head = malloc(s->c->n * sizeof(uint32_t));
	s->tune_ord = malloc(g * sizeof(uint32_t)); /* a node's residents: one GPU each at least */
	s->tune_new = malloc(2 * (size_t)g * sizeof(double)); /* vCPUs, then memory */
	if (!s->res_head || !s->tune_ord || !s->tune_new) {
		sim_fail(s, -ENOMEM, "gm_sim_run: out of memory");
		return -ENOMEM;
	}
	memset(s->res_head, 0xff, s->c->n * sizeof(uint32_t)); /* NOPOS */
	return 0;
}

static void synergy_close(struct sim *s)
{
	free(s->res_head);
	free(s->tune_ord);
	free(s->tune_new);
}

/*
 * Position a before position b of a node's plan in the order peers are trimmed
 * (Synergy's sort key): fewer nodes first, then more vCPUs per GPU (as planned
 * so far on this node), more memory per GPU, then arrival order (Synergy's sort
 * is stable).
 */
static bool trim_before(const struct sim *s, const uint32_t *ord, const double *v, const double *m,
			uint32_t a, uint32_t b)
{
	const struct place *pa = &s->pl[ord[a]], *pb = &s->pl[ord[b]];
	uint32_t na = s->j[pa->job].nplace, nb = s->j[pb->job].nplace;
	if (na != nb)
		return na < nb;
	double va = v[a] / pa->g, vb = v[b] / pb->g;
	if (va != vb)
		return va > vb;
	if (m[a] / pa->g != m[b] / pb->g)
		return m[a] / pa->g > m[b] / pb->g; /* then more memory per GPU */
	return a < b;
}

/*
 * Re-plan node n: its residents in arrival order (job index = submit order), each
 * its ideal, its fair share, or its fair share after trimming earlier peers. New
 * allocations in tune_new (by position in tune_ord); then re-rate the jobs whose
 * vCPUs there changed.
 */
static void synergy_plan(struct sim *s, uint32_t n)
{
	uint32_t *ord = s->tune_ord, k = 0;
	double *a = s->tune_new, *m = s->tune_new + s->c->max_gpus;
	double free_c = s->c->cpus[n], free_m = node_mem(s, n);

	for (uint32_t q = s->res_head[n]; q != NOPOS; q = s->pl[q].next) {
		uint32_t i = k++; /* insertion sort by job index: at most the node's GPUs */
		while (i > 0 && s->pl[ord[i - 1]].job > s->pl[q].job) {
			ord[i] = ord[i - 1];
			i--;
		}
		ord[i] = q;
	}
	for (uint32_t i = 0; i < k; i++) {
		const struct place *p = &s->pl[ord[i]];
		const struct sjob *j = &s->j[p->job];
		double ideal = ideal_at(s, j, p), fair = fair_at(s, p);
		double mi = mem_ideal_at(s, j, p), mf = mem_fair_at(s, j, p);
		if (ideal <= free_c + 1e-9 && mi <= free_m + 1e-9) {
			a[i] = ideal;
			m[i] = mi;
			free_c -= ideal;
			free_m -= mi;
			continue;
		}
		double want = ideal, wm = mi;
		if (ideal > fair || mi > mf) { /* switched to fair share in both */
			want = fair;
			wm = mf;
		}
		while (want > free_c + 1e-9 || wm > free_m + 1e-9) { /* trim the first peer */
			uint32_t best = NOPOS;
			for (uint32_t q = 0; q < i; q++) {
				const struct place *pq = &s->pl[ord[q]];
				if ((a[q] > fair_at(s, pq) + 1e-9 ||
				     m[q] > mem_fair_at(s, &s->j[pq->job], pq) + 1e-9) &&
				    (best == NOPOS || trim_before(s, ord, a, m, q, best)))
					best = q;
			}
			if (best == NOPOS) {
				sim_fail(s, -ENOTRECOVERABLE,
					 "invariant: node %u cannot hold job %u's fair share", n,
					 p->job);
				return;
			}
			const struct place *pb = &s->pl[ord[best]];
			double f = fair_at(s, pb), fm = mem_fair_at(s, &s->j[pb->job], pb);
			free_c += a[best] - f;
			free_m += m[best] - fm;
			a[best] = f;
			m[best] = fm;
		}
		a[i] = want;
		m[i] = wm;
		free_c -= want;
		free_m -= wm;
	}
	for (uint32_t i = 0; i < k; i++) {
		struct place *p = &s->pl[ord[i]];
		p->tune_mem = (float)m[i];
		if (p->tune == (float)a[i])
			continue;
		p->tune = (float)a[i];
		if (s->j[p->job].state == J_RUNNING) {
			sim_set_rate(s, p->job);
			s->realloc++;
		}
	}
}

/*
 * Job ji joins (sign 1) or leaves (-1) its nodes; each of them is re-planned. In
 * rounds (opts.round) a leaving job's vCPUs wait for the next round, as in
 * Synergy's simulator: its peers are re-planned when they are placed again.
 */
static void synergy_move(struct sim *s, uint32_t ji, int sign)
{
	struct sjob *j = &s->j[ji];
	for (uint32_t i = 0; i < j->nplace; i++) {
		uint32_t pi = j->place_off + i;
		if (sign > 0) {
			s->pl[pi].tune = 0;
			res_link(s, pi);
		} else {
			res_unlink(s, pi);
			if (s->o.round > 0)
				continue;
		}
		synergy_plan(s, s->pl[pi].node);
	}
}

static int synergy_start(struct sim *s, uint32_t ji)
{
	synergy_move(s, ji, 1);
	return s->rc;
}

static void synergy_stop(struct sim *s, uint32_t ji)
{
	synergy_move(s, ji, -1);
}

/* vCPUs and GB node n's jobs hold. */
static void synergy_node_held(const struct sim *s, uint32_t n, double *held, double *mem)
{
	*held = *mem = 0;
	for (uint32_t q = s->res_head[n]; q != NOPOS; q = s->pl[q].next) {
		*held += s->pl[q].tune;
		*mem += s->pl[q].tune_mem;
	}
}

/*
 * opts.place_demand: j's ideal vCPUs and memory on node n (all its GPUs there)
 * fit beside what n's jobs hold, as Synergy's placement asks of a server.
 */
static bool synergy_fits(const struct sim *s, const struct sjob *j, uint32_t n)
{
	struct place p = {.node = n, .g = j->gpus};
	double held, mem;
	synergy_node_held(s, n, &held, &mem);
	return ideal_at(s, j, &p) <= s->c->cpus[n] - held + 1e-9 &&
	       mem_ideal_at(s, j, &p) <= node_mem(s, n) - mem + 1e-9;
}

/*
 * How many of j's GPUs, at most want, node n takes with their share of j's ideal
 * vCPUs and memory fitting beside what n's jobs hold: Synergy's random placement
 * (Cluster._top_synergy_gpus) takes a free GPU wherever its server has the job's
 * per-GPU demand left, server after server.
 */
static uint32_t synergy_fit_gpus(const struct sim *s, const struct sjob *j, uint32_t n,
				 uint32_t want)
{
	double held, mem;
	synergy_node_held(s, n, &held, &mem);
	for (uint32_t t = want; t > 0; t--) {
		struct place p = {.node = n, .g = t};
		if (ideal_at(s, j, &p) <= s->c->cpus[n] - held + 1e-9 &&
		    mem_ideal_at(s, j, &p) <= node_mem(s, n) - mem + 1e-9)
			return t;
	}
	return 0;
}

/* opts.check: no node holds more vCPUs or memory than it has, no job less than its floor. */
static void synergy_audit(struct sim *s)
{
	for (uint32_t n = 0; n < s->c->n && !s->rc; n++) {
		double held = 0, mem = 0;
		for (uint32_t q = s->res_head[n]; q != NOPOS; q = s->pl[q].next) {
			const struct place *p = &s->pl[q];
			double floor_c = ideal_at(s, &s->j[p->job], p);
			if (floor_c > fair_at(s, p))
				floor_c = fair_at(s, p);
			if (p->tune + 1e-4 < floor_c) /* held as floats */
				sim_fail(s, -ENOTRECOVERABLE,
					 "invariant: job %u holds %.3f vCPUs on node %u, below its "
					 "floor %.3f",
					 p->job, (double)p->tune, n, floor_c);
			held += p->tune;
			mem += p->tune_mem;
		}
		if (held > s->c->cpus[n] + 1e-4)
			sim_fail(s, -ENOTRECOVERABLE,
				 "invariant: node %u holds %.3f of its %u vCPUs", n, held,
				 s->c->cpus[n]);
		if (mem > node_mem(s, n) * (1 + 1e-6) + 1e-4 && node_mem(s, n) > 0)
			sim_fail(s, -ENOTRECOVERABLE,
				 "invariant: node %u holds %.3f of its %.0f GB", n, mem,
				 node_mem(s, n));
	}
}

/* ---- cachew (Cachew, ATC'22) and pecan (Pecan, ATC'24): first come, first served ---- */

/*
 * Both keep local_min vCPUs per GPU on the job's nodes (as goldminer) and get
 * data workers from the idle vCPUs of the cluster. Each job's autoscaler asks for
 * the workers that reach its GPU-bound rate (its throughput target) and no more;
 * there is no priority between jobs: workers go to jobs in the order they started,
 * a job keeps what it got, and when reservations shrink the pool the youngest
 * holder gives back first. So jobs in start order are: all served, one partly,
 * the rest none (fifo_bound is the first not served in full).
 *   cachew  every worker is a remote tf.data service worker: (1 - remote_cost).
 *   pecan   AutoPlacement: workers take the job's own nodes' idle vCPUs first
 *           (full rate), then remote ones, as goldminer's do; its target counts
 *           the local idle vCPUs its nodes had when it started.
 */
static uint32_t fifo_target(const struct sim *s, const struct sjob *j, bool local_first)
{
	double rest = j->R - j->local * j->d, rr = j->d * (1 - s->o.remote_cost), avail = 0;
	if (rest <= 0)
		return 0;
	for (uint32_t i = 0; local_first && i < j->nplace; i++) {
		int64_t a = spare(s, s->pl[j->place_off + i].node);
		avail += a > 0 ? (double)a : 0;
	}
	if (rest <= avail * j->d)
		return (uint32_t)ceil(rest / j->d - 1e-9);
	double w = avail + ceil((rest - avail * j->d) / rr - 1e-9);
	return w < (double)UINT32_MAX ? (uint32_t)w : UINT32_MAX;
}

/* Give job ji k more (k > 0) or fewer (k < 0) workers and re-rate it. */
static void fifo_give(struct sim *s, uint32_t ji, int64_t k)
{
	struct sjob *j = &s->j[ji];
	j->extra = (uint32_t)((int64_t)j->extra + k);
	s->pool_used = (uint64_t)((int64_t)s->pool_used + k);
	if (s->policy->local_first) /* pecan: place them, local first */
		replace_workers(s, ji);
	sim_set_rate(s, ji);
	s->realloc++;
}

/* The first job from ji on (in start order) not served in full, or NOPOS. */
static uint32_t fifo_unserved(const struct sim *s, uint32_t ji)
{
	while (ji != NOPOS && s->j[ji].extra >= s->j[ji].want)
		ji = s->j[ji].fifo_next;
	return ji;
}

static int fifo_open(struct sim *s)
{
	s->fifo_head = s->fifo_tail = s->fifo_bound = NOPOS;
	if (s->policy->local_first) /* pecan places its workers */
		return placement_open(s);
	return 0;
}

static void fifo_close(struct sim *s)
{
	free(s->lpool);
	free(s->res_head);
}

static int fifo_start(struct sim *s, uint32_t ji)
{
	struct sjob *j = &s->j[ji];
	bool pecan = s->policy->local_first;
	if (pecan)
		join_nodes(s, ji);
	j->extra = 0;
	j->want = fifo_target(s, j, pecan);
	j->fifo_next = NOPOS;
	j->fifo_prev = s->fifo_tail;
	if (s->fifo_tail != NOPOS)
		s->j[s->fifo_tail].fifo_next = ji;
	else
		s->fifo_head = ji;
	s->fifo_tail = ji;
	if (s->fifo_bound == NOPOS)
		s->fifo_bound = fifo_unserved(s, ji);
	return 0;
}

static void fifo_stop(struct sim *s, uint32_t ji)
{
	struct sjob *j = &s->j[ji];
	if (s->policy->local_first)
		leave_nodes(s, ji);
	s->pool_used -= j->extra;
	if (s->fifo_bound == ji)
		s->fifo_bound = fifo_unserved(s, j->fifo_next);
	if (j->fifo_prev != NOPOS)
		s->j[j->fifo_prev].fifo_next = j->fifo_next;
	else
		s->fifo_head = j->fifo_next;
	if (j->fifo_next != NOPOS)
		s->j[j->fifo_next].fifo_prev = j->fifo_prev;
	else
		s->fifo_tail = j->fifo_prev;
}

/* Take back from the youngest holders while over budget, then serve in start order. */
static void fifo_rebalance(struct sim *s)
{
	uint64_t total = s->c->total_cpus;
	uint64_t budget = total > s->reserved_cpu ? total - s->reserved_cpu : 0;
	uint32_t ji = s->fifo_bound != NOPOS ? s->fifo_bound : s->fifo_tail;

	while (s->pool_used > budget && ji != NOPOS) {
		uint64_t over = s->pool_used - budget, has = s->j[ji].extra;
		if (has) {
			fifo_give(s, ji, -(int64_t)(has < over ? has : over));
			s->fifo_bound = ji; /* now short of its target; all after it hold none */
		}
		ji = s->j[ji].fifo_prev;
	}
	while (s->pool_used < budget && s->fifo_bound != NOPOS) {
		struct sjob *j = &s->j[s->fifo_bound];
		uint64_t room = budget - s->pool_used, need = j->want - j->extra;
		fifo_give(s, s->fifo_bound, (int64_t)(need < room ? need : room));
		s->fifo_bound = fifo_unserved(s, s->fifo_bound);
	}
	if (s->pool_used + s->reserved_cpu > total)
		sim_fail(s, -ENOTRECOVERABLE, "invariant: pool over budget");
}

/* opts.check: the start-order invariant and the pool count (and pecan's places). */
static void fifo_audit(struct sim *s)
{
	uint64_t used = 0;
	bool past = false;
	for (uint32_t ji = s->fifo_head; ji != NOPOS; ji = s->j[ji].fifo_next) {
		const struct sjob *j = &s->j[ji];
		past |= ji == s->fifo_bound;
		if ((!past && j->extra < j->want) || (past && ji != s->fifo_bound && j->extra) ||
		    j->extra > j->want)
			sim_fail(s, -ENOTRECOVERABLE,
				 "invariant: job %u holds %u of %u workers out of start order", ji,
				 j->extra, j->want);
		used += j->extra;
	}
	if (used != s->pool_used)
		sim_fail(s, -ENOTRECOVERABLE, "invariant: pool holds %llu workers, counted %llu",
			 (unsigned long long)used, (unsigned long long)s->pool_used);
	if (s->policy->local_first && !s->rc)
		audit_places(s);
}

/* ---- node-elastic: per-job elastic, no pooling across nodes ---- */

/*
 * Each job reserves what goldminer does at placement (local_min vCPUs per GPU, at
 * most its request; with --local-min request, its whole request, as static) and
 * adds data workers on the idle vCPUs of its own nodes only: never on another
 * node. Each node's idle vCPUs (its unreserved ones) are shared among the places
 * resident there by core/policy.c's rule, the one the goldminer pool runs
 * (marginal gain in busy GPUs, gm_policy_allocate), with each place asking for the
 * part of its job's GPU-bound rate its GPUs there carry beyond its reservation
 * there. So goldminer against node-elastic is the pooling alone: the same
 * placement, the same allocation rule, the pool confined to each job's nodes.
 * Workers on the job's own nodes are local (full rate, no remote cost). A node is
 * shared out again when one of its residents starts or ends (its free vCPUs change
 * only then), after the event (rebalance); the books are place.w, lpool and
 * job.extra = job.lw, as the goldminer pool's local workers.
 */
static void node_mark(struct sim *s, uint32_t n)
{
	if (!s->node_dirty[n]) {
		s->node_dirty[n] = 1;
		s->dnodes[s->ndnodes++] = n;
	}
}

static int node_open(struct sim *s)
{
	uint32_t g = s->c->max_gpus ? s->c->max_gpus : 1;
	int rc = placement_open(s);
	if (rc)
		return rc;
	s->node_dirty = calloc(s->c->n, 1);
	s->dnodes = malloc(s->c->n * sizeof(uint32_t));
	s->tune_ord = malloc(g * sizeof(uint32_t)); /* a node's residents: one GPU each at least */
	s->node_jobs = malloc(g * sizeof(struct gm_policy_job));
	s->node_w = malloc(g * sizeof(uint32_t));
	if (!s->node_dirty || !s->dnodes || !s->tune_ord || !s->node_jobs || !s->node_w) {
		sim_fail(s, -ENOMEM, "gm_sim_run: out of memory");
		return -ENOMEM;
	}
	return 0;
}

static void node_close(struct sim *s)
{
	free(s->lpool);
	free(s->res_head);
	free(s->node_dirty);
	free(s->dnodes);
	free(s->tune_ord);
	free(s->node_jobs);
	free(s->node_w);
}

static int node_start(struct sim *s, uint32_t ji)
{
	struct sjob *j = &s->j[ji];
	j->lw = 0;
	for (uint32_t i = 0; i < j->nplace; i++) {
		s->pl[j->place_off + i].w = 0;
		res_link(s, j->place_off + i);
		node_mark(s, s->pl[j->place_off + i].node);
	}
	return 0;
}

static void node_stop(struct sim *s, uint32_t ji)
{
	struct sjob *j = &s->j[ji];
	for (uint32_t i = 0; i < j->nplace; i++) {
		struct place *p = &s->pl[j->place_off + i];
		take_local(s, p, -(int64_t)p->w);
		res_unlink(s, j->place_off + i);
		node_mark(s, p->node);
	}
}

/* What core/policy.c knows of place p: its share of the job's rate beyond its reservation. */
static struct gm_policy_job node_job(const struct sim *s, const struct place *p)
{
	const struct sjob *j = &s->j[p->job];
	double rest = j->R * p->g / j->gpus - (double)p->c * j->d;
	return (struct gm_policy_job){
	    .gpu_rate = rest > 0 ? rest : 0,
	    .worker_rate = j->d,
	    .weight = j->gpus / j->R, /* objective: GPUs kept busy, as the pool's */
	    .min_workers = 0,
	    .max_workers = UINT32_MAX,
	    .tag = p->job,
	};
}

/* Share node n's unreserved vCPUs among its residents; re-rate the jobs that moved. */
static void node_share(struct sim *s, uint32_t n)
{
	uint32_t k = 0;
	for (uint32_t pi = s->res_head[n]; pi != NOPOS; pi = s->pl[pi].next) {
		s->tune_ord[k] = pi;
		s->node_jobs[k++] = node_job(s, &s->pl[pi]);
	}
	if (!k)
		return;
	uint64_t budget = s->free_c[n] > 0 ? (uint64_t)s->free_c[n] : 0;
	int rc = gm_policy_allocate(s->node_jobs, k, budget, s->node_w);
	if (rc) {
		sim_fail(s, rc == -ENOMEM ? rc : -ENOTRECOVERABLE,
			 "invariant: node %u's vCPUs cannot be shared (%s)", n, strerror(-rc));
		return;
	}
	for (uint32_t i = 0; i < k; i++) {
		struct place *p = &s->pl[s->tune_ord[i]];
		int64_t dw = (int64_t)s->node_w[i] - p->w;
		if (!dw)
			continue;
		take_local(s, p, dw);
		s->j[p->job].extra = s->j[p->job].lw;
		sim_set_rate(s, p->job);
		s->realloc++;
	}
}

/* After an event: the nodes whose residents changed are shared out again. */
static void node_rebalance(struct sim *s)
{
	for (uint32_t i = 0; i < s->ndnodes && !s->rc; i++) {
		s->node_dirty[s->dnodes[i]] = 0;
		node_share(s, s->dnodes[i]);
	}
	s->ndnodes = 0;
}

/*
 * opts.check: every job's workers are on its own nodes (extra = lw), each node's
 * within its unreserved vCPUs, counted as placed (audit_places); and no node
 * shared out since its last change has an idle vCPU while one of its residents
 * is short of its share of its rate (with --round, a job's end leaves its node
 * to the next round's share-out, node_dirty, as it leaves its GPUs).
 */
static void node_audit(struct sim *s)
{
	audit_places(s);
	for (size_t i = 0; i < s->n && !s->rc; i++) {
		const struct sjob *j = &s->j[i];
		if (j->state != J_RUNNING)
			continue;
		if (j->extra != j->lw)
			sim_fail(s, -ENOTRECOVERABLE,
				 "invariant: job %zu has %u workers, %u of them on its own nodes",
				 i, j->extra, j->lw);
		for (uint32_t k = 0; k < j->nplace && !s->rc; k++) {
			const struct place *p = &s->pl[j->place_off + k];
			if (!s->node_dirty[p->node] && spare(s, p->node) > 0 &&
			    node_job(s, p).gpu_rate > (double)p->w * j->d + 1e-6)
				sim_fail(s, -ENOTRECOVERABLE,
					 "invariant: job %zu is short on node %u, which has %lld "
					 "idle vCPUs",
					 i, p->node, (long long)spare(s, p->node));
		}
	}
}

/* ---- the table ---- */

const struct sim_policy sim_policies[GM_SIM_NPOLICY] = {
    [GM_SIM_STATIC] =
	{
	    .name = "static",
	    .no_cpu_node = "a job's data pipeline runs on the vCPUs of its own nodes",
	    .reserve = reserve_requested,
	    .reserve_varies = varies_requested,
	    .rate = rate_requested,
	    .charge = charge_held,
	},
    [GM_SIM_PROPORTIONAL] =
	{
	    .name = "proportional",
	    .no_cpu_node = "a job's data pipeline runs on its share of its own nodes' vCPUs",
	    .reserve = reserve_share,
	    .rate = rate_share,
	    .charge = charge_held,
	},
    [GM_SIM_GOLDMINER] =
	{
	    .name = "goldminer",
	    .local_first = true,
	    .reserve = reserve_local_min,
	    .reserve_varies = varies_local_min,
	    .rate = rate_pool,
	    .charge = charge_held,
	    .open = pool_open,
	    .close = pool_close,
	    .start = pool_start,
	    .stop = pool_stop,
	    .rebalance = pool_rebalance,
	    .audit = audit_places,
	},
    [GM_SIM_UNLIMITED] =
	{
	    .name = "unlimited-cpu",
	    .reserve = reserve_none,
	    .rate = rate_unlimited,
	    .charge = charge_busy,
	},
    [GM_SIM_SYNERGY] =
	{
	    .name = "synergy-tune",
	    .no_cpu_node = "a job's data pipeline runs on the vCPUs of its own nodes",
	    .reserve = reserve_share,
	    .rate = rate_synergy,
	    .charge = charge_synergy,
	    .open = synergy_open,
	    .close = synergy_close,
	    .start = synergy_start,
	    .stop = synergy_stop,
	    .fits = synergy_fits,
	    .fit_gpus = synergy_fit_gpus,
	    .audit = synergy_audit,
	},
    [GM_SIM_CACHEW] =
	{
	    .name = "cachew",
	    .reserve = reserve_local_min,
	    .reserve_varies = varies_local_min,
	    .rate = rate_pool,
	    .charge = charge_held,
	    .open = fifo_open,
	    .close = fifo_close,
	    .start = fifo_start,
	    .stop = fifo_stop,
	    .rebalance = fifo_rebalance,
	    .audit = fifo_audit,
	},
    [GM_SIM_PECAN] =
	{
	    .name = "pecan",
	    .local_first = true,
	    .reserve = reserve_local_min,
	    .reserve_varies = varies_local_min,
	    .rate = rate_pool,
	    .charge = charge_held,
	    .open = fifo_open,
	    .close = fifo_close,
	    .start = fifo_start,
	    .stop = fifo_stop,
	    .rebalance = fifo_rebalance,
	    .audit = fifo_audit,
	},
    [GM_SIM_NODE_ELASTIC] =
	{
	    .name = "node-elastic",
	    .no_cpu_node = "a job's data pipeline runs on the vCPUs of its own nodes",
	    .local_first = true,
	    .reserve = reserve_local_min,
	    .reserve_varies = varies_local_min,
	    .rate = rate_pool,
	    .charge = charge_held,
	    .open = node_open,
	    .close = node_close,
	    .start = node_start,
	    .stop = node_stop,
	    .rebalance = node_rebalance,
	    .audit = node_audit,
	},
};
