/*
 * elastic.c - the elastic controller (see elastic.h): measurement windows over a
 * ring's consumer counters, and their translation into the shared policy's terms.
 *
 * The numbers come from counters the consumer adds to with relaxed atomics
 * (c_samples, c_wait_ns, c_work_ns): they are statistics, read here from another
 * thread or process, and an estimate one batch off is harmless. A window closes
 * only on evidence (two batches, or 4 s; the job's first, one batch), so a slow
 * trainer is not judged on one batch, and at a look while the consumer waits
 * (or after GM_ELASTIC_OWN_BATCHES): then every batch it took has had all its
 * own time, and the wait going on is counted up to the look, so a window's
 * demand is the consumer's own time per batch, exact. The policy is
 * core/policy.c, the same one the simulator evaluates.
 *
 * It holds no pool: it does not fork, signal, lock or sleep.
 */
#include "goldminer/elastic.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

#include "goldminer/policy.h"
#include "goldminer/ring.h"
#include "goldminer/util.h"

/* a window closes while the consumer waits, or after this many batches */
#define GM_ELASTIC_OWN_BATCHES 8

void gm_elastic_meter_restart(struct gm_elastic_meter *m)
{
	m->t = gm_now_ns();
}

int gm_elastic_measure(struct gm_elastic_meter *m, struct gm_ring_hdr *h, uint32_t batch_size,
		       double *demand_out, double *worker_out)
{
	uint64_t now = gm_now_ns();
	uint64_t samples = atomic_load_explicit(&h->c_samples, memory_order_relaxed);
	uint64_t wait = atomic_load_explicit(&h->c_wait_ns, memory_order_relaxed);
	uint64_t work = atomic_load_explicit(&h->c_work_ns, memory_order_relaxed);
	uint64_t pause = atomic_load_explicit(&h->c_pause_ns, memory_order_relaxed);
	uint64_t remote = atomic_load_explicit(&h->c_remote_samples, memory_order_relaxed);
	uint64_t p0 = atomic_load_explicit(&h->c_pause_t0, memory_order_relaxed);
	uint64_t w0 = atomic_load_explicit(&h->c_waiting, memory_order_relaxed);
	if (p0 && p0 < now)
		pause += now - p0; /* a pause going on counts up to now */
	if (!samples) {
		/* Nothing taken yet: the consumer's own time begins with its first
		 * wait (its set-up before that, opening a dataset or building a model,
		 * is no demand: counted, it made a starved trainer read as a slow one
		 * and its first ask too small). The window starts there. */
		m->t = w0 > 1 && w0 < now ? w0 : now;
		m->samples = 0;
		m->wait = wait; /* (the wait going on is the window's) */
		m->work = work;
		m->pause = pause;
		m->remote = remote;
		return 0;
	}
	if (w0 > 1 && w0 < now)
		wait += now - w0; /* so does a wait (c_waiting: when it began) */
	uint64_t dt = now - m->t, ds = samples - m->samples;
	/* a wait that ended between the two loads may count twice: never below */
	uint64_t dw = wait > m->wait ? wait - m->wait : 0, dk = work - m->work;
	uint64_t dp = pause > m->pause ? pause - m->pause : 0;
	uint64_t dr = remote > m->remote ? remote - m->remote : 0;
	uint64_t dl = ds > dr ? ds - dr : 0; /* the local workers' samples */
	bool first = !(m->demand.samples > 0);

	if (ds < (first ? 1 : 2) * batch_size && dt < 4000000000ull)
		return 0; /* too little evidence yet; keep accumulating */
	if (!w0 && ds < GM_ELASTIC_OWN_BATCHES * batch_size && dt < 4000000000ull)
		return 0; /* the consumer is busy with a batch it took: its own time for
			   * it is not over; a look while it waits counts every taken
			   * batch's time whole (a consumer that never waits: every
			   * GM_ELASTIC_OWN_BATCHES batches, one batch off at most) */
	m->t = now;
	m->samples = samples;
	m->wait = wait;
	m->work = work;
	m->pause = pause;
	m->remote = remote;
	if (!ds && !atomic_load_explicit(&h->c_waiting, memory_order_relaxed) &&
	    dt >= 4000000000ull) {
		/* Nothing taken for 4 s and nobody waiting: the trainer is idle (eval,
		 * checkpointing). Its demand is 0; one worker's rate is as last seen. */
		atomic_store(&h->p_demand_mrate, 0);
		m->demand = (struct gm_policy_demand){0}; /* it starts afresh */
		*demand_out = 0;
		*worker_out = (double)atomic_load(&h->p_worker_mrate) / 1000;
		return *worker_out > 0;
	}
	/* one local worker's rate: its batches over their time; a window of remote
	 * batches alone (a job its remote workers feed) keeps the last one */
	double per_worker = dl && dk ? (double)dl / ((double)dk / 1e9)
				     : (double)atomic_load(&h->p_worker_mrate) / 1000;
	if (!ds || !(per_worker > 0))
		return 0; /* starving (waiting for a first batch): no estimate */
	/* the consumer's own time: neither waiting for a batch nor paused */
	double busy = (double)(dt > dw + dp ? dt - dw - dp : 0) / 1e9;
	double demand =
	    gm_policy_demand_add(&m->demand, (double)ds, busy, (double)dt / 1e9, batch_size);
	atomic_store(&h->p_demand_mrate, (uint64_t)(demand < 1e12 ? demand * 1000 : 0));
	atomic_store(&h->p_worker_mrate, (uint64_t)(per_worker * 1000));
	*demand_out = demand;
	*worker_out = per_worker;
	return 1;
}

void gm_elastic_pause(struct gm_ring_hdr *h, int begin)
{
	uint64_t p0 = atomic_load_explicit(&h->c_pause_t0, memory_order_relaxed);
	if (begin) {
		if (!p0)
			atomic_store_explicit(&h->c_pause_t0, gm_now_ns(), memory_order_relaxed);
		return;
	}
	if (!p0)
		return;
	uint64_t now = gm_now_ns();
	atomic_fetch_add_explicit(&h->c_pause_ns, now > p0 ? now - p0 : 0, memory_order_relaxed);
	atomic_store_explicit(&h->c_pause_t0, 0, memory_order_relaxed);
}

int gm_elastic_want(double demand, double worker_rate, uint32_t budget, uint32_t *want)
{
	struct gm_policy_job job = {
	    .gpu_rate = demand * GM_ELASTIC_HEADROOM,
	    .worker_rate = worker_rate,
	    .weight = 1,
	    .min_workers = 1,
	    .max_workers = budget,
	    .tag = 0,
	};
	*want = 1;
	return gm_policy_allocate(&job, 1, budget, want) < 0 ? -EINVAL : 0;
}

int gm_elastic_next(struct gm_elastic *e, int want, int cur)
{
	int target = cur;
	if (want > cur) {
		target = want;
		e->streak = 0;
	} else if (want < cur) {
		if (e->want == want && ++e->streak >= 2) {
			target = cur - 1;
			e->streak = 0;
		} else if (e->want != want) {
			e->streak = 1;
		}
	} else {
		e->streak = 0;
	}
	e->want = want;
	return target;
}

/* The policy's view of one agent job (see gm_elastic_divide). */
static void share_to_policy(const struct gm_elastic_share *j, uint32_t budget,
			    struct gm_policy_job *pj)
{
	uint32_t cap = j->cap && j->cap < budget ? j->cap : budget;
	if (j->fixed) {
		pj->min_workers = pj->max_workers = j->fixed;
		pj->gpu_rate = 1;
		pj->worker_rate = 1;
		pj->weight = 1;
	} else if (!j->rate) {
		/* Not measured yet: it may keep what it has, but only from what the
		 * measured jobs leave (tiny weight), and never less than one. */
		pj->min_workers = 1;
		pj->max_workers = j->workers > 1 ? (j->workers < cap ? j->workers : cap) : 1;
		pj->gpu_rate = 1e9;
		pj->worker_rate = 1;
		pj->weight = 1e-12;
	} else {
		double demand = j->demand > 1e9 ? 1e9 : j->demand;
		pj->gpu_rate = demand * GM_ELASTIC_HEADROOM;
		pj->worker_rate = j->rate;
		pj->weight = 1.0 / (demand > 1 ? demand : 1);
		pj->min_workers = 1;
		pj->max_workers = cap;
	}
}

void gm_elastic_divide(const struct gm_elastic_share *jobs, size_t n, uint32_t budget,
		       uint32_t *want)
{
	struct gm_policy_job pj[GM_ELASTIC_MAX_JOBS];
	uint32_t w[GM_ELASTIC_MAX_JOBS];
	size_t m = n < GM_ELASTIC_MAX_JOBS ? n : GM_ELASTIC_MAX_JOBS;

	for (size_t k = 0; k < m; k++) {
		share_to_policy(&jobs[k], budget, &pj[k]);
		pj[k].tag = (uint64_t)k; /* only compared: the array order breaks ties */
	}
	if (m)
		gm_policy_allocate(pj, m, budget, w); /* -ENOSPC still fills the minimums */
	uint32_t sum = 0;
	for (size_t k = 0; k < n; k++) {
		want[k] = k < m && w[k] ? w[k] : 1;
		sum += want[k];
	}
	/* Fixed sizes with the others' minimums may not fit: trim the largest wishes
	 * (the youngest job first among equals) until the sum is max(budget, n),
	 * which every job's one worker allows. */
	uint32_t most = budget > n ? budget : (uint32_t)n;
	while (sum > most) {
		size_t big = 0;
		for (size_t k = 1; k < n; k++)
			if (want[k] >= want[big])
				big = k;
		want[big]--;
		sum--;
	}
}

static uint32_t held(uint32_t target, uint32_t retiring, uint32_t alive)
{
	return target + retiring > alive ? target + retiring : alive;
}

/* One more worker for job k if the capacity allows it; true when given. */
static bool grant_one(const uint32_t *retiring, const uint32_t *alive, size_t k, uint32_t capacity,
		      uint32_t *used, uint32_t *target)
{
	uint32_t before = held(target[k], retiring[k], alive[k]);
	uint32_t after = held(target[k] + 1, retiring[k], alive[k]);
	if (*used + (after - before) > capacity)
		return false;
	*used += after - before;
	target[k]++;
	return true;
}

uint32_t gm_elastic_grant(const uint32_t *want, const uint32_t *retiring, const uint32_t *alive,
			  size_t n, uint32_t capacity, uint32_t *target)
{
	uint32_t used = 0;
	for (size_t k = 0; k < n; k++) {
		if (want[k] < target[k])
			target[k] = want[k];
		used += held(target[k], retiring[k], alive[k]);
	}
	for (size_t k = 0; k < n; k++)
		if (!target[k] && want[k])
			grant_one(retiring, alive, k, capacity, &used, target);
	for (size_t k = 0; k < n; k++)
		while (target[k] < want[k] &&
		       grant_one(retiring, alive, k, capacity, &used, target))
			;
	return used;
}

void gm_elastic_remote_add(struct gm_elastic_remote *m, uint64_t samples, uint32_t workers,
			   uint32_t batch_size, int64_t now_ms)
{
	uint64_t landed = samples > m->samples ? samples - m->samples : 0;
	int64_t prev = m->last_ms ? m->last_ms : now_ms;
	m->samples = samples;
	m->last_ms = now_ms;
	m->quiet = landed ? 0 : m->quiet < 2 ? m->quiet + 1 : 2;
	if (!workers) { /* none connected: nothing delivered from now */
		m->rate = 0;
		m->rate_from_ms = 0;
		m->acc = 0;
		m->from_ms = 0;
		return;
	}
	if (landed && !m->from_ms)
		m->from_ms = prev; /* they landed since the measurement before */
	if (!m->from_ms)
		return;
	m->acc += landed;
	int64_t span = now_ms - m->from_ms;
	if ((span >= GM_ELASTIC_REMOTE_MS &&
	     m->acc >= (uint64_t)GM_ELASTIC_REMOTE_BATCHES * batch_size) ||
	    span >= 2 * GM_ELASTIC_REMOTE_MS) {
		m->rate = (double)m->acc * 1000.0 / (double)span;
		m->rate_from_ms = m->from_ms;
		m->acc = 0;
		m->from_ms = now_ms;
	}
}

bool gm_elastic_remote_none(const struct gm_elastic_remote *m)
{
	return m->quiet >= (m->samples ? 2 : 1);
}
