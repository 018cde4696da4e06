/*
 * policies.c - the simulator's CPU policies, one row of operations each
 * (sim_policy.h); the engine (sim.c) calls them and never asks which one runs.
 *
 *   static         a job reserves its requested vCPUs on its own nodes (today's
 *                  schedulers) and runs at min(R, requested vCPUs x d);
 *   proportional   a job gets its nodes' vCPUs in proportion to its GPUs there;
 *   goldminer      a job keeps a small local share (local_min vCPUs per GPU) and
 *                  the idle vCPUs of the whole cluster form a pool of data workers
 *                  shared out by core/policy.c; a pool worker delivers
 *                  (1 - remote_cost) of a local one's rate, and every pool worker is
 *                  charged so, conservatively, even one on the job's own node;
 *   unlimited-cpu  every job runs at its GPU-bound rate R (the upper bound); it
 *                  reserves nothing and is charged the vCPUs it would need.
 *
 * Pool workers are one vCPU each and fungible, so "pool used <= idle vCPUs" is
 * exactly the condition for a per-node placement without over-commit.
 *
 * Not here: placement (best fit, backfill, spreading are the same for every policy
 * and live in the engine), events, metrics.
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

/* Local vCPUs first, then pool workers at (1 - remote_cost) of their rate. */
static double rate_pool(const struct sim *s, const struct sjob *j, double *busy)
{
	double lr = j->local * j->d;
	double er = j->extra * j->d * (1 - s->o.remote_cost);
	if (lr >= j->R) {
		*busy = j->R / j->d;
		return j->R;
	}
	if (lr + er >= j->R) {
		*busy = j->local + (j->R - lr) / (j->d * (1 - s->o.remote_cost));
		return j->R;
	}
	*busy = (double)j->local + j->extra;
	return lr + er;
}

static double rate_unlimited(const struct sim *s, const struct sjob *j, double *busy)
{
	(void)s;
	*busy = j->R / j->d;
	return j->R;
}

/* What it holds: its local reservation and its pool workers. */
static double charge_held(const struct sjob *j, double busy)
{
	(void)busy;
	return (double)j->local + j->extra;
}

/* unlimited-cpu reserves nothing: count the vCPUs it would need */
static double charge_busy(const struct sjob *j, double busy)
{
	(void)j;
	return busy;
}

/* ---- the goldminer pool ---- */

static int pool_open(struct sim *s)
{
	int rc = gm_policy_create(&s->pol, s->c->total_cpus);
	if (rc)
		sim_fail(s, rc, "gm_sim_run: out of memory");
	return rc;
}

static void pool_close(struct sim *s)
{
	gm_policy_destroy(s->pol);
	free(s->slot2job);
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

static int pool_start(struct sim *s, uint32_t ji)
{
	struct sjob *j = &s->j[ji];
	/* The pool sees what the local share leaves of the GPU-bound rate. */
	double rest = j->R - j->local * j->d;
	struct gm_policy_job pj = {
	    .gpu_rate = rest > 0 ? rest : 0,
	    .worker_rate = j->d * (1 - s->o.remote_cost),
	    .weight = j->gpus / j->R, /* objective: GPUs kept busy */
	    .min_workers = 0,
	    .max_workers = UINT32_MAX,
	    .tag = ji,
	};
	uint32_t slot;
	int rc = gm_policy_add(s->pol, &pj, &slot);
	if (!rc)
		rc = grow_slots(s, slot);
	if (rc) {
		sim_fail(s, rc, "policy: cannot add job %u (%s)", ji, strerror(-rc));
		return rc;
	}
	j->pslot = slot;
	s->slot2job[slot] = ji;
	return 0;
}

static void pool_stop(struct sim *s, uint32_t ji)
{
	gm_policy_remove(s->pol, s->j[ji].pslot);
}

/* Share the idle vCPUs out again and apply the changes to job rates. */
static void pool_rebalance(struct sim *s)
{
	const uint32_t *ch;
	size_t n;

	uint64_t total = s->c->total_cpus;
	gm_policy_set_budget(s->pol, total > s->reserved_cpu ? total - s->reserved_cpu : 0);
	if (gm_policy_rebalance(s->pol))
		sim_fail(s, -ENOTRECOVERABLE, "invariant: pool over budget");
	n = gm_policy_changed(s->pol, &ch);
	for (size_t i = 0; i < n; i++) {
		uint32_t ji = s->slot2job[ch[i]];
		s->j[ji].extra = gm_policy_workers(s->pol, ch[i]);
		sim_set_rate(s, ji);
		s->realloc++;
	}
	if (gm_policy_used(s->pol) + s->reserved_cpu > total)
		sim_fail(s, -ENOTRECOVERABLE,
			 "invariant: vCPUs over-committed (%llu pool + %llu "
			 "local > %llu)",
			 (unsigned long long)gm_policy_used(s->pol),
			 (unsigned long long)s->reserved_cpu, (unsigned long long)total);
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
	    .reserve = reserve_local_min,
	    .reserve_varies = varies_local_min,
	    .rate = rate_pool,
	    .charge = charge_held,
	    .open = pool_open,
	    .close = pool_close,
	    .start = pool_start,
	    .stop = pool_stop,
	    .rebalance = pool_rebalance,
	},
    [GM_SIM_UNLIMITED] =
	{
	    .name = "unlimited-cpu",
	    .reserve = reserve_none,
	    .rate = rate_unlimited,
	    .charge = charge_busy,
	},
};
