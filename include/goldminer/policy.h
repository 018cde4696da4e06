/*
 * policy.h - the elastic data-worker allocation policy (DESIGN.md contract 8).
 *
 * One CPU budget (a number of data workers, one vCPU each) is shared by a set of
 * jobs. Job j trains at speed
 *
 *     f_j(w) = min(R_j, w * d_j)            samples/s, w = its data workers,
 *
 * where R_j is its GPU-bound rate and d_j the rate one worker produces. The policy
 * maximises sum_j v_j * f_j(w_j) (v_j = value of one sample/s; the simulator uses
 * v_j = GPUs_j / R_j so the objective is "GPUs kept busy") subject to
 * min_j <= w_j <= max_j and sum_j w_j <= budget. Each f_j is concave and piecewise
 * linear, so greedy allocation by marginal gain is optimal (see policy.c).
 *
 * The state object is incremental: add/remove/update a job or change the budget,
 * then gm_policy_rebalance() moves only the workers whose marginal gain ordering
 * changed, O(log n) per moved block of workers. gm_policy_allocate() is the pure
 * one-shot form for a node agent. No I/O, no global state; not thread-safe (one
 * state object per caller thread).
 */
#ifndef GOLDMINER_POLICY_H
#define GOLDMINER_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gm_policy;

/* One job as the policy sees it. */
struct gm_policy_job {
	double gpu_rate;      /* R: samples/s when GPU-bound (all its GPUs), >= 0 */
	double worker_rate;   /* d: samples/s one data worker produces, > 0 */
	double weight;	      /* v: value of one sample/s, > 0 (e.g. gpus / gpu_rate) */
	uint32_t min_workers; /* always granted, counted in the budget */
	uint32_t max_workers; /* never exceeded (UINT32_MAX: no cap), >= min_workers */
	uint64_t tag;	      /* caller's id; ties in gain go to the smaller tag */
};

/*
 * Create an empty state with a budget of `budget` workers.
 * Returns 0 and *out, or -ENOMEM. Destroy with gm_policy_destroy().
 */
int gm_policy_create(struct gm_policy **out, uint64_t budget);

/* Free the state; NULL does nothing. */
void gm_policy_destroy(struct gm_policy *p);

/* Change the budget; takes effect at the next rebalance. */
void gm_policy_set_budget(struct gm_policy *p, uint64_t budget);

/*
 * Add a job; it starts with min_workers. *slot_out receives its handle (slots are
 * reused after removal). Returns 0, -EINVAL for bad rates (d <= 0, R < 0, v <= 0,
 * max < min) or -ENOMEM.
 */
int gm_policy_add(struct gm_policy *p, const struct gm_policy_job *j, uint32_t *slot_out);

/* Remove a job; its workers return to the budget at the next rebalance. */
void gm_policy_remove(struct gm_policy *p, uint32_t slot);

/*
 * Replace a job's parameters (e.g. new measured rates); its allocation is clamped
 * into [min, max] at once and optimised at the next rebalance. Returns 0 or -EINVAL.
 */
int gm_policy_update(struct gm_policy *p, uint32_t slot, const struct gm_policy_job *j);

/*
 * Restore the greedy optimum after any add/remove/update/set_budget. Returns 0, or
 * -ENOSPC when the minimum workers alone exceed the budget (minimums are still
 * granted; every extra worker has been taken back).
 */
int gm_policy_rebalance(struct gm_policy *p);

/* Workers currently allocated to a job. */
uint32_t gm_policy_workers(const struct gm_policy *p, uint32_t slot);

/*
 * Slots whose allocation changed since the last call (each listed once; removed
 * slots are not listed). The array stays valid until the next call into the state.
 */
size_t gm_policy_changed(struct gm_policy *p, const uint32_t **slots);

/* Workers allocated in total (minimums included). */
uint64_t gm_policy_used(const struct gm_policy *p);

/*
 * One-shot: allocate `budget` workers to n jobs, writing workers[i]. Pure: the same
 * input gives the same output. Returns 0, -ENOSPC (minimums exceed the budget;
 * workers[] holds the minimums), -EINVAL or -ENOMEM.
 */
int gm_policy_allocate(const struct gm_policy_job *jobs, size_t n, uint64_t budget,
		       uint32_t *workers);

/*
 * Borrowing: how many remote workers (another host's CPUs) one job should ask for.
 * Pure, no state: the node agent calls it every tick for each of its jobs (node.c,
 * through gm_policy_ask_next, below, which holds it steady) and a simulator can call it
 * with its model's figures. All rates are samples/s.
 *
 * A job's local capacity is what its local workers can deliver together: each
 * image costs 1 / worker_rate seconds of CPU (worker_rate is a worker's on-CPU
 * rate), and the workers have `cores` cores between them, so
 *
 *     capacity = min(workers, cores) x worker_rate          (cores 0: no limit)
 *
 * and, while the consumer stalls (stall > GM_POLICY_STALL and delivered < demand),
 * no more than the local workers measurably delivered (delivered less the remote
 * workers' rate): the measurement overrules the model when the model is too kind.
 * So does `alone`, what its local workers alone delivered over the windows in
 * which the consumer waited, once that is below the demand: a job fed by
 * remote workers runs no local worker, so its stall says nothing of them, and
 * the model alone once read "local capacity covers demand (1068 >= 365 img/s)"
 * for a job on a 0.15-core host whose local workers alone had delivered 175
 * (seed 107): it gave back its remote workers and ran at half its rate.
 * The job asks for
 *
 *     want = ceil((demand x headroom - capacity) / one remote worker's rate)
 *
 * remote workers when that is positive, at most `most` and, when the peers'
 * heartbeats are known (bounded), at most what the live peers can lend it: a
 * tiny measured remote rate must not turn into hundreds of asks no peer can
 * grant. 0 once local capacity covers the demand again (the caller's
 * hysteresis gives them back one by one), and 0 while the measurement says
 * the local workers feed the job themselves (GM_BORROW_FED): its consumer
 * waits no more than GM_POLICY_STALL and the local workers' share of what it
 * got (delivered less remote_rate) is at least demand x (1 - GM_POLICY_STALL),
 * whatever the model's capacity and the headroom say. A lent worker is a slot
 * another host's job may wait for: a lender's 684 img/s job whose model read
 * 679 asked for one, held it for its whole life (28 s) while its guest made
 * 7 img/s ("no batch free" 95% of its time), and a 0.15-core home's job
 * waited 10 s for that slot (seed 1).
 */
#define GM_POLICY_STALL 0.05 /* a consumer waiting more than this share is short */

struct gm_policy_borrow_in {
	double demand;		   /* D: what the consumer takes when fed (measured) */
	double headroom;	   /* asked rate = D x this; <= 1: none */
	double delivered;	   /* what it was given over the last window */
	double stall;		   /* share of that window it waited for data, 0..1 */
	double worker_rate;	   /* one local worker's on-CPU rate; 0: not measured */
	double cores;		   /* cores the local workers can use; 0: no limit */
	double remote_rate;	   /* what the remote workers delivered over the window */
	double remote_worker_rate; /* one remote worker's rate; 0: worker_rate is used */
	double alone;		   /* what its local workers alone delivered while the
				    * consumer waited (img/s; 0: not measured) */
	uint32_t workers;	   /* local workers */
	uint32_t most;		   /* most remote workers it may have */
	bool bounded;		   /* lendable below is known (false: no bound) */
	uint32_t lendable;	   /* workers the live peers can lend it in all */
	bool ring_bound;	   /* its ring refused remote workers' claims ("no batch
				    * free") while the consumer waited, since the last
				    * call: more workers would have nothing to make */
};

enum gm_policy_borrow_why {
	GM_BORROW_UNMEASURED, /* no worker rate yet: asks for none */
	GM_BORROW_COVERED,    /* local capacity covers the demand: none */
	GM_BORROW_CAPACITY,   /* local capacity is below the demand */
	GM_BORROW_STALL,      /* the consumer waits: the measured delivery is short */
	GM_BORROW_ALONE,      /* its local workers alone fell short when last measured */
	GM_BORROW_FED,	      /* its local workers measurably feed it: none */
};

struct gm_policy_borrow_out {
	double capacity;  /* local capacity (see above) */
	uint32_t want;	  /* remote workers to ask for, <= most (and lendable) */
	bool capped;	  /* want was cut to most */
	bool peers_short; /* want was cut to what the peers can lend */
	enum gm_policy_borrow_why why;
};

/* The answer for one job (see above) in *out. */
void gm_policy_borrow(const struct gm_policy_borrow_in *in, struct gm_policy_borrow_out *out);

/* The reason in words into buf[len]: "local capacity 650 img/s < demand 960 img/s",
 * "local capacity covers demand (1300 >= 960 img/s)", ... */
void gm_policy_borrow_why(const struct gm_policy_borrow_in *in,
			  const struct gm_policy_borrow_out *out, char *buf, size_t len);

/*
 * The cores a job's local workers can use on its host (gm_policy_borrow_in's
 * cores): the host's cores shared by workers, its workers of all the local
 * workers (local), where each job that remote workers feed with no local
 * worker (fed, those of gm_policy_fed_remotely) holds one share for its
 * receive path: a second 256 img/s job on a 0.15-core home counted the whole
 * core as its own, kept its local worker, and the fed job's remote worker
 * waited for leases 34% of its time (859 -> 694 img/s) behind the quota that
 * worker burnt. The host's cores when no worker runs. Pure.
 */
double gm_policy_job_cores(double host_cores, uint32_t workers, uint32_t local, uint32_t fed);

/*
 * One local worker's rate by the CPU accounting (img/s per core): samples
 * its workers made over the CPU seconds they spent, once those are at least
 * GM_POLICY_CPU_RATE_MIN_S and the samples four batches of batch_size (0
 * before: too little to bound anything). The agent bounds the stage-timed
 * rate by it (node.c cpu_rate). Pure.
 */
#define GM_POLICY_CPU_RATE_MIN_S 0.25
double gm_policy_cpu_rate(double samples, double cpu_s, uint32_t batch_size);

/*
 * The worker rate a job's decisions use (img/s per core): the stage-timed rate
 * (stage), bounded by its workers' CPU accounting (cpu, gm_policy_cpu_rate)
 * once that reads, and until then by what the same pipeline's workers on this
 * host last read by their CPU accounting (known; 0: none). On a host of a few
 * tenths of a core a worker's batch runs within one quota period, so its stage
 * timing reads the core's full speed whatever share of it the quota gives, and
 * its own accounting needs GM_POLICY_CPU_RATE_MIN_S of CPU, close to two
 * seconds of a 0.15-core host: a new job there read "local capacity covers
 * demand (306 >= 187 img/s)" at its first window beside a job that remote
 * workers fed, and asked the peers 6 s later, when its accounting gave 112
 * (seed 107, P1; five more poor hosts' jobs of seeds 1, 2 and 107 read
 * "covers" at their first window, and four of them asked later, three within
 * 2 s). stage when neither bound reads. Pure.
 */
double gm_policy_worker_rate(double stage, double cpu, double known);

/*
 * A home's remote workers divided between its jobs: the pool its live peers
 * can lend it (gm_remote_home_lendable: their free slots and those they run
 * for it) water-filled over the jobs' asks (ask[i]; UINT32_MAX for a job not
 * yet decided), a worker to each job with an ask left per round, the jobs
 * that hold more (held[i]) first within a round, then those that ask more
 * (one not yet decided last), then by index: no job holds a second worker
 * while another asks for its first (a 0.15-core home's first job held both
 * peers' workers while its second, asking for one, had none and ran 23.3 s
 * against the simulator's 17.8), a lone worker stays where it is, and the one
 * worker the peers can lend goes to the job short by more: seed 2's 0.3-core
 * home gave it by index to its 314 img/s job short by 23 (asking 1) over its
 * 601 img/s job whose trainer waited 56% of the time (asking 2), and the two
 * asks traded it back and forth. Into share[i]; at most ask[i]. Pure.
 */
void gm_policy_home_share(const uint32_t *ask, const uint32_t *held, size_t n, uint32_t pool,
			  uint32_t *share);

/*
 * The share of a core each local worker may use on a host of host_cores under
 * GM_POLICY_LEND_HOST_CORES while remote workers' batches land there for
 * `landing` of its jobs and its agent spends agent_cores (measured) receiving
 * them: what the cores leave after GM_POLICY_PACE_MARGIN times the agent's and
 * GM_POLICY_PACE_SLACK of them, shared by the host's local workers (workers);
 * never less than what a worker had with lending off beside the landing jobs'
 * local decode: the cores less landing_cores (the cores those jobs' demand
 * takes decoding locally, at most an equal share each), shared by the
 * workers of the other jobs (workers less landing_workers, the landing jobs'
 * own) (a neighbour job keeps what it had beside the fed one's local
 * worker; with the slack taken from it too, a 0.15-core home's 230 img/s
 * neighbour ran 4% slower than with lending off). landing_cores < 0 or not
 * finite: an equal share each. 0 (no limit) on a
 * larger host, with nothing landing, or no local worker. Why: a local worker
 * left to spend the host's CPU quota has the cgroup throttled for the rest of
 * each period, the agent's receive path with it (a 0.15-core home: throttled
 * in 90% of its periods with a neighbour job's local worker, 22% without; the
 * fed job's remote worker waited for leases 37-43% of its time and sent
 * 470-521 img/s, against 5% and 859). Pure.
 */
#define GM_POLICY_PACE_MARGIN 1.25
#define GM_POLICY_PACE_SLACK  0.05
double gm_policy_local_pace(double host_cores, double agent_cores, uint32_t workers,
			    uint32_t landing, double landing_cores, uint32_t landing_workers);

/*
 * A paced worker's token bucket of CPU time (worker.c, after each sample):
 * *credit (ns of CPU it may still spend at once) grows by milli/1000 of the
 * wall_ns since the last look, less the cpu_ns it spent, capped at
 * GM_POLICY_PACE_BURST_NS (under the quota of a 0.15-core host's 20 ms
 * period); the ns to sleep out a debt (its sleep refills the credit at the
 * next look), 0 with none. milli 0 or >= 1000: no pacing. Pure apart from
 * *credit.
 */
#define GM_POLICY_PACE_BURST_NS 2000000.0
double gm_policy_pace_step(double *credit, double wall_ns, double cpu_ns, uint32_t milli);

/* A peer as a lender to one home, from its last heartbeat: the cores it can
 * lend in all (0: none, or not heard), the workers it can lend the home's job
 * (each at most a core; what it lends other homes and jobs taken out), and its
 * slots in all, theirs included (0: as workers). Each of its slots has
 * cores / slots of its cores. */
struct gm_policy_lender {
	double cores;
	uint32_t workers;
	uint32_t slots;
};

/* Spread want remote workers over n lenders (see policy.c): ask[i] the
 * workers to ask lender i for (ask[n], written), never more than its workers;
 * a lender with less than GM_POLICY_LEND_MIN_CORES cores in all gets none (no
 * spare cores: never a poor host asked), however small the share of a slot it
 * has left: it lends a worker per GM_POLICY_LEND_WORKER_CORES of idle cores
 * begun, so 0.46 idle cores make two slots of 0.23 (a share of the slots left
 * held against the minimum kept seed 1's 180 img/s job on a 0.15-core host
 * waiting 11 s, "the live peers can lend it 0", beside a lender with two slots
 * and one free). Sticky: with prev (ask[n] of the last
 * spread; NULL: none) each lender keeps the workers it runs for the job unless
 * it needs them back (fewer workers than that now: the lender's own rules
 * decide, not its cores' share here, which a 0.6-core lender's 0.45 idle
 * over 2 slots, or a lender's 0 while its new job is measured, put below
 * GM_POLICY_LEND_MIN_CORES: its homes moved their running workers away, 19-44
 * moves a run of seed 107, each a cold start) or another lender
 * is idler by more than a worker (one core); fewer wanted: taken from the
 * busiest first; more: the idlest first. Returns the workers placed (<= want;
 * the rest no lender has room for). Pure, thread-safe. */
uint32_t gm_policy_spread(const struct gm_policy_lender *l, size_t n, uint32_t want,
			  const uint32_t *prev, uint32_t *ask);

/*
 * Lending: how many workers a host may run for other hosts' jobs. None while
 * one of its own jobs is starved (starved: its consumer waits and gets less
 * than its demand), on a CPU-poor host (cores, the host's: under
 * GM_POLICY_LEND_HOST_CORES, where what it has beside its own decode is its
 * own jobs' receive path: a 0.3-core host lent its 0.1 idle core to another
 * poor host and its own next job waited), or when its own jobs leave less than
 * GM_POLICY_LEND_MIN_CORES of its cores idle (its free budget neither). Else
 * the `free` workers of its budget no own job wishes for, or, more when its
 * own jobs leave idle cores (idle_cores: its cores less its measured jobs'
 * needs), a worker per GM_POLICY_LEND_WORKER_CORES of them begun, even when
 * its whole worker budget is wished for: under --cpus 0.75 the budget is one
 * worker, its own job holds it, and half a core would otherwise sit idle. A
 * quarter core per worker, not a core: a lent worker's rate is bounded by its
 * leases' round trips more than by its CPU (the cluster bench's calibration:
 * 1,056 img/s from about half a core each, lenders idle) and a poor host's
 * job asks a few hundred img/s, so a worker per idle core begun left much of
 * the core idle while jobs went unserved (seed 107: seven jobs on three
 * 0.15-0.2-core hosts, two lenders with half a core idle each lent one worker
 * each, "the live peers can lend it 0" most of the poor jobs' lives). Workers
 * that share the idle cores share them as the scheduler does (all nice 19),
 * so more of them never take more than the idle cores. The lent workers run at nice
 * 19, far below the host's own, inside the same CPU quota, so the quota bounds
 * them, and they are preempted when the own jobs' needs grow (idle shrinks).
 * GM_POLICY_LEND_HOST_CORES is GM_NODE_FED_CORES (node.h): the host size
 * under which a job that remote workers feed runs no local worker. A tenth of
 * a core instead of a quarter was tried (the cluster bench, seed 1): a 0.5-core
 * lender whose own 896 img/s job left it 0.2 core then lent a nice-19 guest,
 * three poor jobs raced for it, and its own job lost 2.4-5.1% against 0.6-1.4%
 * (the poor hosts' GPU use 0.849-0.881 against 0.896). Pure.
 */
#define GM_POLICY_LEND_MIN_CORES    0.25
#define GM_POLICY_LEND_HOST_CORES   0.5
#define GM_POLICY_LEND_WORKER_CORES 0.25
uint32_t gm_policy_lendable(uint32_t budget, uint32_t wished, double cores, double idle_cores,
			    bool starved);

/*
 * Lending over time: gm_policy_lendable, except that a host whose own jobs
 * were starved lends nothing until they have gone unstarved for a hold of
 * GM_POLICY_ASK_SETTLE_S (its guests were preempted for them: offered again at
 * the next quiet window, a lender took a worker back, offered it, took it back,
 * and the home's one worker went B -> C -> B with it). Its own jobs starved
 * again while it lent, within GM_POLICY_LEND_CALM_TIMES holds of lending again, the
 * hold doubles, up to GM_POLICY_LEND_HOLD_MAX_S; lending that long unstarved
 * brings it back to GM_POLICY_ASK_SETTLE_S. (Seed 105 on a slow afternoon:
 * its lenders started 31 guests and preempted 13 in 80 s, each start a cold
 * worker on both hosts, and the poor host's jobs ran at 0.378 of their rate,
 * 0.579 with lending off; runs with 10-17 starts read 0.66-0.81.) A host never
 * starved lends at once. More at once; fewer (its guests preempted) only once
 * the idle cores are half of GM_POLICY_LEND_WORKER_CORES below what the last
 * count needed, so a measure's noise around a boundary kills no guest; none at
 * once while starved or under GM_POLICY_LEND_MIN_CORES idle. fresh
 * (GM_POLICY_LEND_FRESH): an own job has come whose need is not measured yet;
 * the caller leaves it out of idle_cores and wished, and the count may not
 * grow meanwhile, nor fall for it (node.c paces the guests to
 * gm_policy_fresh_guest_cores meanwhile). GM_POLICY_LEND_FIRST: an own job's
 * first measured window, its workers' on-CPU rate counting their start (a
 * 0.6-core lender's new 90 img/s job read 441 img/s a core, a fourth of the
 * guests' 1,300, so a need of 0.22 core): the count neither grows nor falls
 * unless starved. Seed 2: that need took a guest of three from a poor home's
 * job, and seed 1's lender did the same to a job whose home had just gone
 * fed on that one worker (5.2% slower than with lending off). Counted as its want, a
 * new own job with a worker of a 0.75-core lender's budget of 1 preempted
 * every guest at its attach; seed 107's lenders did so 6 times in a run, each
 * preempted guest a cold start for its poor home's job, which the new job's
 * measure then showed did not need it ("covers demand (1096 >= 211 img/s)"). dt_s:
 * seconds since the last call. Zero-initialised state.
 */
/*
 * The share of a core each of a lender's guests (the workers it runs for
 * other hosts' jobs, all of them together) may spend while its own jobs run:
 * the idle cores those leave over the guests, at least
 * GM_POLICY_GUEST_MIN_CORES (none idle: its guests go at the next tick,
 * preempted), 0 (no bound) where that is a core or more each, without own
 * jobs (nothing of its own to keep), or with no guest. A nice-19 guest took
 * what the own job's worker left while it slept, and so emptied the host's
 * CPU quota for the rest of each period: the own job's trainer then waited,
 * and the guest was preempted. Pure.
 */
#define GM_POLICY_GUEST_MIN_CORES 0.01
double gm_policy_guest_cores(double idle_cores, uint32_t guests, bool own_jobs);

/*
 * The guests' paces, work-conserving: out[j], the share of a core each of lent
 * job j's n[j] workers may spend, from idle_cores (the cores the lender's own
 * jobs leave, at least GM_POLICY_GUEST_MIN_CORES a guest) split max-min fair
 * over all the guests. A job whose workers used together (used[j], cores over
 * the last window, counting the time they waited for a CPU: a guest its host
 * starves wants more, not less) under GM_POLICY_GUEST_LIGHT of their pace (last[j] a
 * worker; 0: none or not measured) counts as wanting GM_POLICY_GUEST_GROW x
 * what it used: its ring was full ("no batch free") or it waited for leases;
 * the others want all they can get, and share what the light ones leave;
 * when all are light, what they leave is split equally on top. An
 * equal split left the cores of the idle guests idle: seed 107's lenders used
 * 0.46 of 0.75 and 0.35 of 0.6 of a core while the guests of one poor host's
 * job sat "no batch free" 52-66% of the time and another poor host's jobs
 * read "the live peers can lend it 0". 0 in out[j]: no bound (a core or more).
 * Pure.
 */
#define GM_POLICY_GUEST_LIGHT 0.8
#define GM_POLICY_GUEST_GROW  1.25
void gm_policy_guest_shares(double idle_cores, const uint32_t *n, const double *used,
			    const double *last, size_t jobs, double *out);

#define GM_POLICY_LEND_CALM_TIMES 4
#define GM_POLICY_LEND_HOLD_MAX_S 16.0
struct gm_policy_lend {
	bool starved_once; /* its own jobs have been starved */
	double calm_s;	   /* how long since, unstarved */
	uint32_t last;	   /* the count it returned last */
	double hold_s;	   /* the calm it waits for now (0: GM_POLICY_ASK_SETTLE_S) */
	double lent_s;	   /* how long it has lent since it last began to */
};

#define GM_POLICY_LEND_SETTLED 0 /* every own job measured past its first window */
#define GM_POLICY_LEND_FRESH   1 /* an own job not measured yet */
#define GM_POLICY_LEND_FIRST   2 /* an own job at its first measured window */
uint32_t gm_policy_lend_next(struct gm_policy_lend *s, uint32_t budget, uint32_t wished,
			     double cores, double idle_cores, bool starved, unsigned fresh,
			     double dt_s);

/*
 * The cores a lender's guests may spend, all together, while an own job of
 * its is fresh (not measured yet): GM_POLICY_FRESH_GUEST_SHARE of the idle
 * cores they had before it came (idle_settled) or of those its other jobs
 * leave now (idle_now, the new job left out), whichever is fewer. Unpaced,
 * nice 19 did not keep them from emptying the CPU quota in a period the new
 * job's worker slept (a 1,189 img/s job on a 0.5-core lender lost 7.5%); paced
 * to the least (GM_POLICY_GUEST_MIN_CORES) for the new job's first window, 3 s
 * on seed 2's 0.6-core lender, they held their homes' next batches a second
 * and more, and the homes ended two of them (HEAD_MS) and started their own
 * workers cold. A quarter keeps a guest making a 32-image batch in about half
 * a second and leaves the new job three quarters. Pure.
 */
#define GM_POLICY_FRESH_GUEST_SHARE 0.25
double gm_policy_fresh_guest_cores(double idle_now, double idle_settled);

/*
 * The rules that keep a job's plan right the first time and steady after.
 *
 * Demand: what the consumer takes when fed, from its own time per batch (the
 * window less its waits, the wait going on included, less its pauses). One
 * window of the controller's tick holds two or three batches, and a wait that
 * a window's edge cuts moves a batch's time from one window to the next (a
 * 768 img/s trainer read 261 and 1,011 in turn), so the windows are summed
 * with weights that fall by e every GM_POLICY_DEMAND_BATCHES batch periods of
 * the job (at least GM_POLICY_DEMAND_MIN_S): a cut wait then moves a
 * batch's time within one sum. A job's first window gives its demand at once.
 */
#define GM_POLICY_DEMAND_BATCHES 16  /* the smoothing window, in the job's batch periods */
#define GM_POLICY_DEMAND_MIN_S	 1.0 /* ... and at least this long (s) */
#define GM_POLICY_DEMAND_MAX_S	 30  /* ... and at most */

struct gm_policy_demand {
	double samples, busy_s, wall_s; /* weighted sums of the windows (zeroed: none) */
};

/* Add a window: the samples the consumer took, its own time (busy_s: neither
 * waiting nor paused) and the window's length (wall_s), for batches of
 * batch_size. Returns the smoothed demand in samples/s (1e12: it takes
 * batches as fast as they come), or 0 while no sample has been taken. */
double gm_policy_demand_add(struct gm_policy_demand *d, double samples, double busy_s,
			    double wall_s, uint32_t batch_size);

/*
 * The remote ask: the number of remote workers covering the gap (demand x
 * headroom less the local capacity, gm_policy_borrow) at one remote worker's
 * measured rate (the pipeline's measured cost, one local worker's on-CPU
 * rate, until a remote one is measured). Decided at once on the job's first
 * measurement (no warm-up ramp, no one-at-a-time growth), then changed only
 * when the gap has stayed more than one worker's rate away from the gap of
 * the last decision (or the worker's rate has moved so that gap needs another
 * count) for GM_POLICY_ASK_SETTLE_S: to the count covering the gap's mean over
 * that interval, but no further than the count covering the gap at that moment
 * (and not at all when that one lies the other way: a job whose local worker
 * just stopped read its gap jump while the mean held the covered gaps before,
 * and its ask went 3 -> 0). A gap that swings around its mean changes nothing
 * (no 1 -> 2 -> 1). Upward, a consumer that waits (stall > GM_POLICY_STALL, delivered <
 * demand) for more than the last count covers gets the count covering its gap
 * at once: a first ask counts a remote worker as a local worker's core and
 * may come from a low first window, and a starved trainer is the evidence
 * the interval waits for. The job's cap and what the live peers can lend bound
 * the ask at every call, not after the interval: a lender that needs its
 * workers back has them. A job whose ring bounds it (in->ring_bound: a worker
 * stood idle, told "no batch free", while the consumer waited: every slot was
 * full or being made, the consumer waiting on the one at its head) asks for
 * no more than it was given: the measured per-worker rate then counts the
 * ring's wait, not what a worker makes, and a count from it grows with the
 * wait (a 0.15-core home's job asked for 6 workers, "delivered 211 img/s <
 * demand 538", and held both lenders' slots while another host's job, asking
 * for its first, had none for 10 s).
 */
#define GM_POLICY_ASK_SETTLE_S 2.0
/* Claims refused as the consumer waited since the agent's last decision that
 * make a job ring-bound: a refused worker claims again 4-32 ms later
 * (core/remote/worker.c), so about a tenth of a second of a worker idle. */
#define GM_POLICY_RING_BOUND_CLAIMS 3

struct gm_policy_ask {
	bool decided;	  /* a first decision was made */
	uint32_t count;	  /* workers covering the gap of the last decision (before bounds) */
	double gap;	  /* that gap, samples/s */
	double moved_s;	  /* how long the gap has stayed moved */
	double moved_sum; /* its integral over that time (for the mean) */
	uint32_t given;	  /* the bounded ask last returned */
};

/* The ask for one job, given its borrowing inputs and the seconds since the
 * last call (dt_s); out as gm_policy_borrow's (its want: the bounded ask
 * returned). Zero-initialised state. Pure apart from s. */
uint32_t gm_policy_ask_next(struct gm_policy_ask *s, const struct gm_policy_borrow_in *in,
			    double dt_s, struct gm_policy_borrow_out *out);

/*
 * What one remote worker delivers to a job of this host, for a job none has
 * joined yet: *host (img/s, 0: not measured) takes per_worker, one remote
 * worker's rate to some job of the host over the last measure (img/s), while
 * that job's consumer waited (stall > GM_POLICY_STALL: a job its workers
 * feed more than it takes measures what it takes, not what they can make),
 * smoothed (0.7 old, 0.3 new). Without it a new job's first ask counted
 * remote workers at a local worker's on-CPU rate: on seed 107's 0.15-core
 * homes a local worker reads 2,000-3,000 img/s a core, a remote one
 * delivered 250-400, so a job short by 653 img/s asked for 1 and ramped
 * over the windows that followed ("local capacity 185 img/s < demand 838").
 * Pure.
 */
void gm_policy_remote_per_add(double *host, double per_worker, double stall);

/*
 * One remote worker's rate as a job's ask counts it (img/s): last, what each
 * of its remote workers delivered over the last measure (their rate over
 * their count), or, when larger, what one delivered while a consumer waited:
 * job_per, the job's own (gm_policy_remote_per_add over its measures), else
 * host_per, the host's (0: not measured). Both are what the workers made, at
 * most what they can make; but a job that takes less than its workers make
 * (fed, its ring full) reads last as its demand over their count, and asked
 * for as many as it held: seed 2's 297 img/s job on a 0.15-core home held
 * three slots of a lender, each delivering 96-99 img/s, while three other
 * poor hosts' jobs read "the live peers can lend it 0" for 20 s beside
 * lenders whose guests used 0.24 of their 0.6 core. Pure.
 */
double gm_policy_remote_worker_rate(double job_per, double host_per, double last);

/*
 * What a job's local workers alone deliver while its consumer waits
 * (gm_policy_borrow_in's alone), over one measured window: *alone (img/s, 0:
 * not measured) takes delivered, smoothed (0.7 old, 0.3 new), when no remote
 * sample landed in the window (remote_none), the job has been measured for 3
 * windows (its start, workers coming up and a first wait, is no evidence),
 * its consumer waits (stall > GM_POLICY_STALL) and gets less than its demand.
 * It is forgotten (0) once its consumer goes fed (stall at most GM_POLICY_STALL) while
 * the local workers deliver more than it says and nearly all the demand themselves
 * (delivered less remote_rate, the remote workers' share, at least demand x (1 -
 * GM_POLICY_STALL)): a wait at a lender's job's start ("its local workers alone
 * delivered 668 img/s < demand 730 img/s while the trainer waited") otherwise held its
 * remote ask for its whole life, and the lent slot with it, while its guest made 18
 * img/s and a poor host's job waited 12 s for that slot (seed 1). Pure.
 */
void gm_policy_alone_add(double *alone, bool remote_none, uint32_t windows, double stall,
			 double delivered, double demand, double remote_rate);

/*
 * Whether a job on a host under GM_NODE_FED_CORES runs no local worker while
 * remote workers feed it (its receive path needs the host's CPU more than a
 * local worker's decoding does): only once the remote workers measurably
 * deliver more than its local workers alone did (remote > local_alone x
 * GM_POLICY_MEASURABLY), and until they deliver less than that (then the local
 * workers come back), each counted at most at the consumer's demand (> 0;
 * else uncapped): what it can take is the gain, and a job whose local workers
 * alone nearly cover its demand keeps them (a 0.15-core home's 384 img/s job,
 * 397 alone, dropped its local worker for remote ones that made 683 and then
 * 381, and ran 16% slower than lending off). A job whose local delivery alone
 * was never measured keeps its local workers: lending never makes a job
 * slower than lending off. small_home false: always false. was: the last
 * answer.
 */
#define GM_POLICY_MEASURABLY 1.10
bool gm_policy_fed_remotely(bool small_home, double local_alone, double remote, double demand,
			    bool was);

/*
 * The check of that rule on the job itself: a job that went fed remotely
 * goes back to its local workers, for good, when its remote workers alone
 * (fed, over a whole window of theirs) deliver measurably less than its local
 * and remote workers together did before (both; 0: not measured): where the
 * lenders, not the home's receive path, bound the remote workers, the local
 * worker adds what it makes (tests/regress/bench-ab-remote.sh at load 4-5:
 * 1,224-1,305 img/s fed against 1,618-1,949 with the local worker kept).
 */
bool gm_policy_fed_worse(double both, double fed);

/*
 * After such a failed trial, whether the job may be fed remotely again later:
 * when its remote workers alone delivered nothing over their window (a
 * lender that preempted or starved them for its own jobs), or when the trial
 * was not a fair one: its remote workers alone delivered measurably less
 * (fed x GM_POLICY_MEASURABLY < both_remote) than they had delivered beside
 * its local ones (both_remote; 0: not measured). Fed, the home gives its
 * receive path more of its CPU, not less, so remote workers that delivered
 * less were slowed or taken back at their lenders. Never when they delivered
 * as much as before and the local ones had only added theirs. For good
 * there, a job that had lost its lender's workers for one window (SIGKILLed
 * for the lender's own job, 0 img/s) kept a local worker beside remote ones
 * that came back, on a 0.15-core home whose receive path needed the core,
 * for the rest of its life; and seed 107's poor jobs took their local
 * workers back for good 4 times in a run as their lenders took back or
 * paced their guests ("remote workers alone deliver 69 img/s, with its local
 * workers it got 362").
 */
bool gm_policy_fed_retry(double fed, double both_remote);

/*
 * Workers a job's ring is sized for: all it may get, the host's budget and
 * what the live peers can lend (lendable), cut to its --workers cap (0: none).
 * The cap a training script names (num_workers=8) is a cap the plan works
 * within, never a plan of its own: a cap above what the job may get sizes the
 * ring as no cap does.
 */
uint32_t gm_policy_ring_workers(uint32_t cap, uint32_t budget, uint32_t lendable);

/*
 * The peers' lendable workers a new job's ring is sized for: none on a host
 * that runs guests now (lent: the workers it runs for other hosts' jobs),
 * since its jobs borrow nothing while it lends (node.c borrow: its own CPUs
 * back first); else what the live peers can lend (peers_lendable). Every page
 * of a ring is pre-faulted when it is made, about 25 us a fresh page on the
 * bench's machine: a 0.6-core lender's new job, sized for its budget of one
 * and two peers' workers, got 32 slots (147 MiB), about a second of one core
 * at its attach, and its other own job's trainer waited, so every guest was
 * preempted (seed 2, L1; L2 did the same 13 s later). Sized for its own
 * budget: 16 slots. Pure.
 */
uint32_t gm_policy_ring_peers(uint32_t peers_lendable, uint32_t lent);

/*
 * The ring slots a job gets where remote workers may join, for all (local and
 * remote) workers it may get (gm_policy_ring_workers): eight per worker and two
 * more (a lease ahead per remote worker, home.c's room_ahead, and the late,
 * out-of-order batches of workers on other hosts: a greedy 0.25-core home fed
 * by two remote workers made 1,464-1,943 img/s with 8 slots, 2,593-2,623 with
 * 32), but two per worker and two more on a host under GM_POLICY_LEND_HOST_CORES
 * (host_cores): every page of a ring is pre-faulted by every process that maps
 * it, and there that cost what its jobs needed (a 0.15-core host's two 185
 * img/s jobs, no remote worker ever joining: 33.2-33.8 s lending off, 36.6-37.1
 * s on with 16-slot rings, 34.0 s with 4; the scenario family's seed 2: poor
 * hosts' GPU use 0.901 -> 0.940, its 0.15-core host's jobs +15.6% and +9.3%
 * with lending on -> +0.5% and -0.3%). A power of two from 4 to 64. Pure.
 */
uint32_t gm_policy_ring_slots(double host_cores, uint32_t all);

/* The least power of two from 4 to 64 that is >= need (ring slots). Pure. */
uint32_t gm_policy_pow2_slots(uint64_t need);

#endif
