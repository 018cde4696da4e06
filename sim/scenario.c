/*
 * scenario.c - the host-level scenario simulator (scenario.h): reads the scenario
 * file the cluster bench runs, then replays it as a fluid model of each host's
 * cores, with lending off or on.
 *
 * Why a model of its own beside sim.c: sim.c places GPU jobs on vCPU-counted
 * nodes and its pool counts remote workers without placing them, which is right
 * for thousands of GPU nodes and wrong for three hosts under fractional CPU
 * quotas, where what a trainer receives from a peer costs its own host CPU and a
 * lender's idle share is what its own jobs leave. Here every host's cores are
 * explicit and every image is charged where it costs.
 *
 * The model, between two events (an arrival or a finish) rates are constant:
 *   1. Lending off: on each host, its cores are water-filled (max-min fair, as a
 *      fair CPU scheduler shares them among the jobs' processes: on a host
 *      under half a core only because its agent keeps them on one CPU, host.h's
 *      GM_HOST_PIN_CORES) over its jobs, job j wanting rate_j * local_cpu
 *      (greedy: unbounded); it runs at its share / local_cpu.
 *   2. Lending on: the hosts without a short job (one below its rate) lend what
 *      their own jobs leave idle (own jobs first: a guest never slows them), in
 *      as many workers as the agent's rule gives (gm_policy_lendable: none on
 *      a host under half a core or with less than a quarter core idle; else the worker budget left
 * beside their own running jobs, or one per idle quarter core begun), each using at most a core and
 * sending at most worker_rate. A short job with home share s taking m images/s remotely runs at m +
 * (s - m remote_home_cpu) / local_cpu. On a home of GM_NODE_FED_CORES or more it wants the least m
 * that meets its rate, m* = (rate local_cpu - s) / (local_cpu - remote_home_cpu) while receiving is
 * cheaper than decoding; on a smaller home it wants all its images remote and, once they come to
 * measurably more than its local workers alone make (gm_policy_fed_remotely), runs at m alone, as
 * the agent does there (core/node.c: such a host then runs no local worker for a job that remote
 * workers feed); below that it keeps its local workers, never slower than lending off; at most s /
 * remote_home_cpu either way. Lent workers are placed once an event and stay with their job from
 * event to event (place_workers: a job gives back what it no longer asks for, a lender takes back
 * what its own jobs now need, a home divides its workers between its jobs, and the free slots go
 * to the jobs still asking, a worker each per round in submit order); a worker sends
 * remote_start_s after its grant, and the workers on one lender share its idle cores max-min
 * (deliver). The home's cores are then water-filled again with each job's new need (m
 * remote_home_cpu + (rate - m) local_cpu; on a home under half a core where remote images land, a
 * job receiving none at most the agent's pace of a local worker, gm_policy_local_pace) and what
 * the workers send computed again, until the shares settle. A job starts consuming start_s after
 * its submit (its process starts, opens the dataset and attaches: measured by the bench);
 * meanwhile it demands and gets nothing. Each event costs O(jobs log jobs + jobs x hosts): meant
 * for scenarios of tens to thousands of jobs, not for trace replays.
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "goldminer/elastic.h"
#include "goldminer/node.h"
#include "goldminer/policy.h"
#include "goldminer/scenario.h"
#include "goldminer/util.h"

#define SCEN_MAGIC  "# goldminer-scenario v1"
#define SCEN_ROUNDS 64 /* lending on: rounds of (workers, home) allocation at most */
/*
 * A host's own new job is fresh from its submit until its first window closes
 * (its first batch, start_s after the submit, and the next tick,
 * GM_ELASTIC_TICK_MS): meanwhile the agent keeps the guests it has, lends no
 * more, and paces them to gm_policy_fresh_guest_cores (node.c lend_capacity,
 * gm_policy_lend_next's GM_POLICY_LEND_FRESH); its first window then neither
 * adds nor preempts a guest (GM_POLICY_LEND_FIRST), and it lends on from what
 * the job's need leaves, which the model knows from the start. (Modelled
 * before as lending nothing for GM_POLICY_ASK_SETTLE_S + 0.25 s from the
 * start: re-dealt at once, seed 107's third poor host had kept its lent
 * workers in the model while its lenders' new jobs arrived; on the agents
 * they were all preempted at 35.8 s, at their first windows.)
 */
#define SCEN_FRESH_S(s) ((s)->start_s + GM_ELASTIC_TICK_MS / 1e3)
/*
 * A job's rate by its workers' CPU accounting (core/node.c cpu_rate) is the
 * samples its consumer took over its workers' CPU since its attach, which
 * holds the CPU of the batches they made ahead of it (its ring's lead, their
 * start beside it: lead_cpu_s): t seconds after its first image, at x img/s,
 * its agent reads x images a second for x local_cpu + lead_cpu / t of CPU,
 * and sees it need lead_cpu / t more cores than its images take. On a lender
 * that is room its guests lose: bc23's seed 107, a 0.75-core lender's new 666
 * img/s job read 1,000 and 1,179 img/s a core at its first readings against
 * 1,600-2,000 over the next 3 s, and all three guests were preempted at stall
 * 0 (taken back one by one as the reading rose); bc27's lenders' paced jobs
 * read 0.14-0.30 s of lead, a 0.25-core home's 4-slot ring about none. The
 * model reads it SCEN_LEAD_FIRST_S after the first image (the agent's first CPU
 * reading needs GM_POLICY_CPU_RATE_MIN_S of it and four batches; bc23's came
 * at the job's second window, about a second in), then every SCEN_LEAD_STEP_S,
 * until it is below SCEN_LEAD_LEAST cores.
 */
#define SCEN_LEAD_FIRST_S 1.0
#define SCEN_LEAD_STEP_S  0.5
#define SCEN_LEAD_LEAST	  (1.0 / 32)

/* ---- reading ---- */

/* A number in [lo, hi] filling the whole field. */
static bool num_in(const char *s, double lo, double hi, double *v)
{
	char *end;
	if (!*s)
		return false;
	*v = strtod(s, &end);
	return !*end && isfinite(*v) && *v >= lo && *v <= hi;
}

/* Split line at its tabs into f (at most 8; returns the count, 9 = too many). */
static int split_tabs(char *line, char *f[8])
{
	int n = 0;
	for (char *s = line;; s++) {
		if (n == 8)
			return 9;
		f[n++] = s;
		if (!(s = strchr(s, '\t')))
			return n;
		*s = 0;
	}
}

static bool name_ok(const char *s)
{
	return *s && strlen(s) < GM_SCEN_NAME && !strpbrk(s, " #");
}

static int node_index(const struct gm_scenario *s, const char *name)
{
	for (uint32_t i = 0; i < s->nnodes; i++)
		if (!strcmp(s->node[i].name, name))
			return (int)i;
	return -1;
}

static bool job_named(const struct gm_scenario *s, const char *name)
{
	for (size_t i = 0; i < s->njobs; i++)
		if (!strcmp(s->job[i].name, name))
			return true;
	return false;
}

/* "node NAME CORES [WORKERS]": NULL or what is wrong. */
static const char *add_node(struct gm_scenario *s, char **f, int nf)
{
	double cores, w;
	if (nf != 3 && nf != 4)
		return "want node<TAB>NAME<TAB>CORES[<TAB>WORKERS]";
	if (!name_ok(f[1]) || node_index(s, f[1]) >= 0)
		return "node name missing, longer than 31 bytes, with a space or '#', or repeated";
	if (!num_in(f[2], 1e-6, GM_SCEN_MAX_CORES, &cores))
		return "cores must be a number in 0.000001..100000 (fractions allowed)";
	w = ceil(cores);
	if (nf == 4 && (!num_in(f[3], 1, GM_SCEN_MAX_CORES, &w) || w != floor(w)))
		return "workers (the agent's worker budget) must be a whole number 1..100000";
	if (s->nnodes == GM_SCEN_MAX_NODES)
		return "more than 64 nodes";
	snprintf(s->node[s->nnodes].name, GM_SCEN_NAME, "%s", f[1]);
	s->node[s->nnodes].workers = (uint32_t)w;
	s->node[s->nnodes++].cores = cores;
	return NULL;
}

/* "job NAME HOME SUBMIT IMAGES RATE [WORKERS]": NULL or what is wrong. */
static const char *add_job(struct gm_scenario *s, char **f, int nf, uint32_t line)
{
	struct gm_scen_job *j = &s->job[s->njobs];
	int home;
	if (s->njobs == GM_SCEN_MAX_JOBS) /* before j, one past the array, is written */
		return "more than 10000 jobs";
	double w = 0;
	if (nf != 6 && nf != 7)
		return "want "
		       "job<TAB>NAME<TAB>HOME<TAB>SUBMIT_S<TAB>IMAGES<TAB>RATE_IMG_S[<TAB>WORKERS]";
	if (!name_ok(f[1]) || job_named(s, f[1]))
		return "job name missing, longer than 31 bytes, with a space or '#', or repeated";
	if ((home = node_index(s, f[2])) < 0)
		return "its home is not a node declared above it";
	if (!num_in(f[3], 0, GM_SCEN_MAX_TIME, &j->submit))
		return "submit must be 0..3155760000 s";
	if (!num_in(f[4], 1, GM_SCEN_MAX_IMAGES, &j->images))
		return "images must be 1..1e12";
	if (!num_in(f[5], 0, GM_SCEN_MAX_RATE, &j->rate) || (j->rate > 0 && j->rate < 1e-3))
		return "rate must be 0 (greedy) or 0.001..1e9 img/s";
	if (nf == 7 && strcmp(f[6], "auto") &&
	    (!num_in(f[6], 1, GM_SCEN_MAX_WORKERS, &w) || w != floor(w)))
		return "workers (the job's --workers) must be 'auto' or a whole number 1..1024";
	j->workers = (uint32_t)w;
	snprintf(j->name, GM_SCEN_NAME, "%s", f[1]);
	j->home = (uint32_t)home;
	j->line = line;
	s->njobs++;
	return NULL;
}

/* "cost NAME US" (remote_worker_img_s: img/s; start_s, remote_start_s: s;
 * job_cpu_s, lead_cpu_s: s of CPU): NULL or what is wrong;
 * *seen gets the cost's bit. */
static const char *add_cost(struct gm_scenario *s, char **f, int nf, unsigned *seen)
{
	static const char *const names[3] = {"local_us", "remote_home_us", "remote_lender_us"};
	double *dst[3] = {&s->local_cpu, &s->remote_home_cpu, &s->remote_lender_cpu};
	double us;
	if (nf != 3)
		return "want cost<TAB>NAME<TAB>MICROSECONDS";
	if (!strcmp(f[1], "remote_worker_img_s")) {
		if (*seen & 8u)
			return "this cost is given twice";
		if (!num_in(f[2], 1e-3, GM_SCEN_MAX_RATE, &s->worker_rate))
			return "remote_worker_img_s must be 0.001..1e9 img/s";
		*seen |= 8u;
		return NULL;
	}
	if (!strcmp(f[1], "job_cpu_s") || !strcmp(f[1], "lead_cpu_s")) {
		bool job = f[1][0] == 'j';
		unsigned bit = job ? 64u : 128u;
		if (*seen & bit)
			return "this cost is given twice";
		if (!num_in(f[2], 0, 3600, job ? &s->job_cpu : &s->lead_cpu))
			return job ? "job_cpu_s must be 0..3600 s of CPU"
				   : "lead_cpu_s must be 0..3600 s of CPU";
		*seen |= bit;
		return NULL;
	}
	if (!strcmp(f[1], "start_s") || !strcmp(f[1], "remote_start_s")) {
		bool remote = f[1][0] == 'r';
		unsigned bit = remote ? 32u : 16u;
		if (*seen & bit)
			return "this cost is given twice";
		if (!num_in(f[2], 0, 3600, remote ? &s->remote_start_s : &s->start_s))
			return remote ? "remote_start_s must be 0..3600 s"
				      : "start_s must be 0..3600 s";
		*seen |= bit;
		return NULL;
	}
	for (int k = 0; k < 3; k++) {
		if (strcmp(f[1], names[k]))
			continue;
		if (*seen & 1u << k)
			return "this cost is given twice";
		if (!num_in(f[2], 1e-3, GM_SCEN_MAX_COST, &us))
			return "a cost must be 0.001..1e9 us of CPU per image";
		*dst[k] = us / 1e6;
		*seen |= 1u << k;
		return NULL;
	}
	return "unknown cost (local_us, remote_home_us, remote_lender_us, remote_worker_img_s, "
	       "start_s, remote_start_s, job_cpu_s, lead_cpu_s)";
}

/* One line (no newline); NULL or what is wrong. */
static const char *read_line(struct gm_scenario *s, char *line, uint32_t lineno, unsigned *seen)
{
	char *f[8];
	int nf;
	if (!line[0] || line[0] == '#')
		return NULL;
	nf = split_tabs(line, f);
	if (!strcmp(f[0], "node"))
		return s->njobs ? "nodes come before the jobs" : add_node(s, f, nf);
	if (!strcmp(f[0], "job"))
		return add_job(s, f, nf, lineno);
	if (!strcmp(f[0], "cost"))
		return add_cost(s, f, nf, seen);
	return "unknown keyword (node, job, cost; fields separated by tabs)";
}

static int cmp_submit(const void *a, const void *b)
{
	const struct gm_scen_job *x = a, *y = b;
	if (x->submit != y->submit)
		return x->submit < y->submit ? -1 : 1;
	return x->line < y->line ? -1 : x->line > y->line; /* file order */
}

static int read_file(struct gm_scenario *s, FILE *f, const char *path, char *err, size_t errlen)
{
	char *line = NULL;
	size_t cap = 0;
	uint32_t lineno = 0;
	unsigned seen = 0;
	const char *why = NULL;

	while (!why && getline(&line, &cap, f) >= 0) {
		line[strcspn(line, "\r\n")] = 0;
		if (++lineno == 1 && strcmp(line, SCEN_MAGIC))
			why = "not a scenario (want the first line '" SCEN_MAGIC "')";
		else if (lineno > 1)
			why = read_line(s, line, lineno, &seen);
	}
	free(line);
	if (!why && (!s->nnodes || !s->njobs))
		why = "no node or no job";
	else if (!why && (seen & 7) != 7)
		why = "the three costs local_us, remote_home_us and remote_lender_us are needed";
	if (why) {
		gm_errf(err, errlen, "%s:%u: %s", path, lineno, why);
		return -EBADMSG;
	}
	qsort(s->job, s->njobs, sizeof(*s->job), cmp_submit);
	return 0;
}

int gm_scenario_load(struct gm_scenario **out, const char *path, char *err, size_t errlen)
{
	struct gm_scenario *s = calloc(1, sizeof(*s));
	FILE *f = NULL;
	int rc = -ENOMEM;

	if (!s)
		return -ENOMEM;
	s->node = calloc(GM_SCEN_MAX_NODES, sizeof(*s->node));
	s->job = calloc(GM_SCEN_MAX_JOBS, sizeof(*s->job));
	if (!s->node || !s->job) {
		gm_errf(err, errlen, "%s: out of memory", path);
		goto out_free;
	}
	if (!(f = fopen(path, "r"))) {
		rc = -errno;
		gm_errf(err, errlen, "%s: %s", path, strerror(errno));
		goto out_free;
	}
	rc = read_file(s, f, path, err, errlen);
	fclose(f);
	if (rc)
		goto out_free;
	*out = s;
	return 0;
out_free:
	gm_scenario_destroy(s);
	return rc;
}

void gm_scenario_destroy(struct gm_scenario *s)
{
	if (!s)
		return;
	free(s->node);
	free(s->job);
	free(s);
}

/* ---- the model ---- */

struct run {
	const struct gm_scenario *s;
	double *left, *x, *m, *share;	   /* per job: images left, rate, of it remote, home CPU */
	double *alone;			   /* per job: its rate with lending off, now */
	double *need;			   /* per job: home CPU it wants (INFINITY: unbounded) */
	uint8_t *state;			   /* 0 pending, 1 running, 2 done */
	bool *isshort;			   /* below its rate with lending off */
	double *want;			   /* lending on: remote img/s each short job wants */
	uint32_t *took;			   /* scratch: the lent workers each job asks for */
	uint32_t *act, nact;		   /* running jobs */
	uint32_t lw[GM_SCEN_MAX_NODES];	   /* lending on: workers each node can lend now */
	double lcap[GM_SCEN_MAX_NODES];	   /* and the img/s its idle cores give them in all */
	double now;			   /* s: the event being allocated */
	double lend_at[GM_SCEN_MAX_NODES]; /* lending on: a node's new own job is fresh
					    * until this (SCEN_FRESH_S after its submit) */
	double idle_settled[GM_SCEN_MAX_NODES]; /* its idle cores when none was fresh */
	/* lending on, per job j and lender nd at [j * nnodes + nd]: the lent workers j
	 * holds there (they stay from event to event), of them those granted but not
	 * sending yet, and when those start (remote_start_s after their grant) */
	uint32_t *held, *pend;
	double *ready;
	uint32_t *hold, *hpend;		  /* per job: the sums of held and pend over the lenders */
	uint32_t lent[GM_SCEN_MAX_NODES]; /* per lender: the sum of held over the jobs */
	struct wf {
		double d;
		uint32_t j;
	} * wf; /* water-filling scratch */
};

static int cmp_wf(const void *a, const void *b)
{
	const struct wf *x = a, *y = b;
	if (x->d != y->d)
		return x->d < y->d ? -1 : 1;
	return x->j < y->j ? -1 : x->j > y->j;
}

/*
 * Max-min fair split of cap over the n jobs in r->wf (their needs in .d): each gets
 * min(need, level), the level spending cap when the needs exceed it. Into out[j].
 */
static void water_fill(struct run *r, uint32_t n, double cap, double *out)
{
	qsort(r->wf, n, sizeof(*r->wf), cmp_wf);
	for (uint32_t k = 0; k < n; k++) {
		double level = cap / (double)(n - k);
		double give = r->wf[k].d < level ? r->wf[k].d : level;
		out[r->wf[k].j] = give;
		cap -= give;
		if (cap < 0)
			cap = 0;
	}
}

/* Home cores of node nd water-filled over its running jobs' r->need; returns the
 * CPU they leave idle. */
static double fill_node(struct run *r, uint32_t nd)
{
	uint32_t n = 0;
	double used = 0;
	for (uint32_t k = 0; k < r->nact; k++) {
		uint32_t j = r->act[k];
		if (r->s->job[j].home == nd)
			r->wf[n++] = (struct wf){r->need[j], j};
	}
	water_fill(r, n, r->s->node[nd].cores, r->share);
	for (uint32_t k = 0; k < n; k++)
		used += r->share[r->wf[k].j];
	return r->s->node[nd].cores > used ? r->s->node[nd].cores - used : 0;
}

/* The cores job j's agent reads it need beyond its images' at time t (its
 * ring's lead in its CPU reading), at the model's last reading by t. */
static double lead_extra(const struct gm_scenario *s, uint32_t j, double t)
{
	double tau = t - (s->job[j].submit + s->start_s), e;
	if (!(s->lead_cpu > 0) || tau < SCEN_LEAD_FIRST_S - 1e-9)
		return 0;
	tau = SCEN_LEAD_FIRST_S +
	      floor((tau - SCEN_LEAD_FIRST_S) / SCEN_LEAD_STEP_S + 1e-9) * SCEN_LEAD_STEP_S;
	e = s->lead_cpu / tau;
	return e >= SCEN_LEAD_LEAST ? e : 0;
}

/* The time of job j's next reading of lead_extra after t that changes it
 * (INFINITY: none). */
static double lead_next(const struct gm_scenario *s, uint32_t j, double t)
{
	double t0 = s->job[j].submit + s->start_s, tau = t - t0;
	if (!(s->lead_cpu > 0))
		return INFINITY;
	if (tau < SCEN_LEAD_FIRST_S - 1e-9)
		return s->lead_cpu / SCEN_LEAD_FIRST_S >= SCEN_LEAD_LEAST ? t0 + SCEN_LEAD_FIRST_S
									  : INFINITY;
	tau = SCEN_LEAD_FIRST_S +
	      (floor((tau - SCEN_LEAD_FIRST_S) / SCEN_LEAD_STEP_S + 1e-9) + 1) * SCEN_LEAD_STEP_S;
	/* the reading before it still counted: this one changes the need */
	return s->lead_cpu / (tau - SCEN_LEAD_STEP_S) >= SCEN_LEAD_LEAST ? t0 + tau : INFINITY;
}

/* Job j's share of its own CPU cost beside its images (job_cpu), per image. */
static double per_job(const struct gm_scenario *s, uint32_t j)
{
	return s->job_cpu > 0 && s->job[j].images > 0 ? s->job_cpu / (double)s->job[j].images : 0;
}

/* Its home's CPU per image it decodes there, and per image it receives. */
static double local_of(const struct gm_scenario *s, uint32_t j)
{
	return s->local_cpu + per_job(s, j);
}

static double recv_of(const struct gm_scenario *s, uint32_t j)
{
	return s->remote_home_cpu + per_job(s, j);
}

/*
 * Job j takes m > 0 images/s remotely on a home of less than GM_NODE_FED_CORES,
 * measurably more than its local workers alone make there: as the agent does
 * (core/node.c, fed_remotely: the same rule, gm_policy_fed_remotely), it then
 * runs no local worker. Else it keeps them, and with them at least its rate
 * with lending off.
 */
static bool fed_only(const struct run *r, uint32_t j, double m)
{
	bool small = r->s->node[r->s->job[j].home].cores < GM_NODE_FED_CORES;
	return gm_policy_fed_remotely(small, r->alone[j], m, r->s->job[j].rate, false);
}

/* A job's home CPU need, given the m images/s it takes remotely. */
static double home_need(const struct run *r, uint32_t j, double m)
{
	const struct gm_scenario *s = r->s;
	double rate = s->job[j].rate;
	if (fed_only(r, j, m))
		return m * recv_of(s, j);
	if (!(rate > 0))
		return INFINITY;
	return m * recv_of(s, j) + (rate > m ? rate - m : 0) * local_of(s, j);
}

/* The most img/s one lent worker sends: a core's worth, or worker_rate. */
static double worker_cap(const struct gm_scenario *s)
{
	double per = 1 / s->remote_lender_cpu;
	return s->worker_rate > 0 && s->worker_rate < per ? s->worker_rate : per;
}

/* Lending off: every host alone; then what each could lend (r->lw, r->lcap).
 * Returns the img/s all lenders could send. */
static double alloc_local(struct run *r)
{
	const struct gm_scenario *s = r->s;
	double pool = 0;
	bool has_short[GM_SCEN_MAX_NODES] = {false};
	uint32_t own[GM_SCEN_MAX_NODES] = {0};
	double idle[GM_SCEN_MAX_NODES] = {0};
	const double per = worker_cap(s);

	for (uint32_t k = 0; k < r->nact; k++)
		r->need[r->act[k]] = home_need(r, r->act[k], 0), r->m[r->act[k]] = 0;
	for (uint32_t nd = 0; nd < s->nnodes; nd++)
		idle[nd] = fill_node(r, nd);
	for (uint32_t k = 0; k < r->nact; k++) {
		uint32_t j = r->act[k];
		r->x[j] = r->alone[j] = r->share[j] / local_of(s, j);
		r->isshort[j] = !(s->job[j].rate > 0) || r->x[j] < s->job[j].rate * (1 - 1e-9);
		if (r->isshort[j])
			has_short[s->job[j].home] = true;
		own[s->job[j].home]++;
	}
	for (uint32_t nd = 0; nd < s->nnodes; nd++) { /* the agent's rule (policy.h) */
		uint32_t w = s->node[nd].workers;
		/* the idle cores as the agent counts them: its jobs' images at its
		 * workers' rate, their own cost beside them (job_cpu) unseen, a new
		 * job's lead read as its images' (lead_extra); what its guests get
		 * is what is left (idle) */
		double seen = s->node[nd].cores;
		for (uint32_t k = 0; k < r->nact; k++) {
			uint32_t j = r->act[k];
			if (s->job[j].home == nd)
				seen -= fmin(r->share[j], r->x[j] * s->local_cpu) +
					lead_extra(s, j, r->now);
		}
		r->lw[nd] =
		    gm_policy_lendable(w, own[nd], s->node[nd].cores, fmax(seen, 0), has_short[nd]);
		if (r->now < r->lend_at[nd]) { /* its new job fresh (SCEN_FRESH_S) */
			r->lw[nd] = r->lent[nd];
			idle[nd] = gm_policy_fresh_guest_cores(idle[nd], r->idle_settled[nd]);
		} else {
			r->idle_settled[nd] = idle[nd];
		}
		r->lcap[nd] = idle[nd] / s->remote_lender_cpu;
		pool += fmin(r->lcap[nd], r->lw[nd] * per);
	}
	return pool;
}

/* The remote images/s short job j wants with home CPU share sh: all its images on
 * a home of less than GM_NODE_FED_CORES, else the least that meets its rate. */
static double remote_want(const struct run *r, uint32_t j, double sh)
{
	const struct gm_scenario *s = r->s;
	double all = sh / recv_of(s, j), rate = s->job[j].rate, w;
	if (!(rate > 0))
		return all;
	if (s->node[s->job[j].home].cores < GM_NODE_FED_CORES)
		return rate < all ? rate : all;
	w = (rate * local_of(s, j) - sh) / (s->local_cpu - s->remote_home_cpu);
	w = w < all ? w : all;
	return w > 0 ? w : 0;
}

/* Job j gives back one of its workers on lender nd (one not sending yet first). */
static void drop_one(struct run *r, uint32_t j, uint32_t nd)
{
	size_t k = (size_t)j * r->s->nnodes + nd;
	if (r->pend[k])
		r->pend[k]--, r->hpend[j]--;
	r->held[k]--, r->hold[j]--, r->lent[nd]--;
}

/* Job j is granted a worker on lender nd: it sends remote_start_s from now. */
static void grant_one(struct run *r, uint32_t j, uint32_t nd)
{
	size_t k = (size_t)j * r->s->nnodes + nd;
	r->held[k]++, r->hold[j]++, r->lent[nd]++;
	if (r->s->remote_start_s > 0) {
		r->pend[k]++, r->hpend[j]++;
		r->ready[k] = r->now + r->s->remote_start_s;
	}
}

/* The workers granted by t start sending; returns the next grant's start
 * after t (INFINITY: none pending). */
static double start_sending(struct run *r, double t)
{
	double next = INFINITY;
	for (uint32_t q = 0; q < r->nact; q++) {
		uint32_t j = r->act[q];
		for (uint32_t nd = 0; r->hpend[j] && nd < r->s->nnodes; nd++) {
			size_t k = (size_t)j * r->s->nnodes + nd;
			if (!r->pend[k])
				continue;
			if (r->ready[k] <= t)
				r->hpend[j] -= r->pend[k], r->pend[k] = 0;
			else
				next = fmin(next, r->ready[k]);
		}
	}
	return next;
}

/* The lent workers job j asks for: its want (remote_want at its share now) in
 * whole workers of worker_cap, at most the --workers it names; 0 for a job
 * that is not short or not running. */
static uint32_t workers_asked(const struct run *r, uint32_t j)
{
	const struct gm_scenario *s = r->s;
	uint32_t most = s->job[j].workers ? s->job[j].workers : UINT32_MAX;
	double n;
	if (r->state[j] != 1 || !r->isshort[j])
		return 0;
	n = ceil(remote_want(r, j, r->share[j]) / worker_cap(s) - 1e-9);
	return n < (double)most ? (uint32_t)n : most;
}

/*
 * The lent workers' places, once an event, as the agents keep them: a
 * worker stays with the job it was granted to, from event to event (sticky:
 * its lender grants a free slot to whoever asks first and moves nobody's
 * worker to another home's job). At each event, in order:
 *   1. a job gives back what it no longer asks for (finished, no longer
 *      short, or more workers than its want);
 *   2. a lender whose own jobs now leave it fewer slots (gm_policy_lendable)
 *      takes workers back, from its earliest job on (the agent's preempt
 *      goes through its lent jobs in slot order);
 *   3. a home divides its workers between its jobs (gm_policy_home_share):
 *      a job that asks and holds none takes one from a job of the same home
 *      that holds two or more (on that worker's lender);
 *   4. the lenders' free slots go to the jobs still asking, a worker each per
 *      round in submit order, each to the lender with the most idle capacity
 *      per free slot (gm_policy_spread: the idlest peer first).
 * A worker granted sends remote_start_s later (the ask, the worker's start,
 * its connection and first batch; measured by the bench's calibration). In a
 * model that re-dealt every worker at every event, seed 107's third poor host
 * took lent workers at once; on the real agents, the two hosts that had asked
 * 1.5-2 s earlier held all six slots and its first job waited 15 s for one.
 */
static void place_workers(struct run *r)
{
	const struct gm_scenario *s = r->s;
	const uint32_t nn = s->nnodes;
	uint32_t *ask = r->took; /* scratch: each job's ask */
	bool more = true;

	for (size_t j = 0; j < s->njobs; j++) {
		ask[j] = workers_asked(r, (uint32_t)j);
		while (r->hold[j] > ask[j]) {
			uint32_t best = 0; /* 1. from the lender it holds the most on */
			for (uint32_t nd = 1; nd < nn; nd++)
				if (r->held[j * nn + nd] >= r->held[j * nn + best])
					best = nd;
			drop_one(r, (uint32_t)j, best);
		}
	}
	for (uint32_t nd = 0; nd < nn; nd++) /* 2. */
		for (size_t j = 0; r->lent[nd] > r->lw[nd] && j < s->njobs; j++)
			while (r->lent[nd] > r->lw[nd] && r->held[j * nn + nd])
				drop_one(r, (uint32_t)j, nd);
	for (size_t j = 0; j < s->njobs; j++) { /* 3. */
		uint32_t from = UINT32_MAX, most = 1;
		if (!ask[j] || r->hold[j])
			continue;
		for (uint32_t q = 0; q < r->nact; q++) {
			uint32_t k = r->act[q];
			if (k != j && s->job[k].home == s->job[j].home && r->hold[k] > most)
				from = k, most = r->hold[k];
		}
		if (from == UINT32_MAX)
			continue;
		for (uint32_t nd = 0; nd < nn; nd++)
			if (r->held[(size_t)from * nn + nd]) {
				drop_one(r, from, nd);
				grant_one(r, (uint32_t)j, nd);
				break;
			}
	}
	while (more) { /* 4. */
		more = false;
		for (size_t j = 0; j < s->njobs; j++) {
			uint32_t best = UINT32_MAX;
			double room = 0;
			if (r->hold[j] >= ask[j])
				continue;
			for (uint32_t nd = 0; nd < nn; nd++) {
				double c;
				if (r->lent[nd] >= r->lw[nd] || !(r->lcap[nd] > 0))
					continue;
				c = r->lcap[nd] * (double)(r->lw[nd] - r->lent[nd]) /
				    (double)r->lw[nd];
				if (c > room)
					best = nd, room = c;
			}
			if (best == UINT32_MAX)
				break;
			grant_one(r, (uint32_t)j, best);
			more = true;
		}
	}
}

/*
 * What the placed workers send (r->m): on each lender its idle capacity
 * (r->lcap) water-filled over the workers sending there, a worker of job j
 * wanting at most worker_cap and its share of what j still wants (r->want,
 * at j's home share now); all nice 19, they share its idle cores.
 */
static void deliver(struct run *r)
{
	const struct gm_scenario *s = r->s;
	const uint32_t nn = s->nnodes;
	const double per = worker_cap(s);

	for (uint32_t q = 0; q < r->nact; q++) {
		uint32_t j = r->act[q];
		r->m[j] = 0;
		r->want[j] = r->isshort[j] ? remote_want(r, j, r->share[j]) : 0;
	}
	for (uint32_t nd = 0; nd < nn; nd++) {
		uint32_t n = 0, left = 0;
		double cap = r->lcap[nd];
		for (uint32_t q = 0; q < r->nact; q++) {
			uint32_t j = r->act[q];
			size_t k = (size_t)j * nn + nd;
			uint32_t w = r->held[k] - r->pend[k];
			if (!w || !(r->want[j] > 0))
				continue;
			r->wf[n++] =
			    (struct wf){fmin(per, r->want[j] / (r->hold[j] - r->hpend[j])), j};
			left += w;
		}
		qsort(r->wf, n, sizeof(*r->wf), cmp_wf);
		for (uint32_t q = 0; q < n && left; q++) {
			uint32_t j = r->wf[q].j;
			size_t k = (size_t)j * nn + nd;
			uint32_t w = r->held[k] - r->pend[k];
			double give = fmin(r->wf[q].d, cap / (double)left);
			r->m[j] += give * w;
			cap = fmax(0, cap - give * w);
			left -= w;
		}
	}
	for (uint32_t q = 0; q < r->nact; q++)
		r->m[r->act[q]] = fmin(r->want[r->act[q]], r->m[r->act[q]]);
}

/*
 * On a home under GM_POLICY_LEND_HOST_CORES where remote images land, the
 * agent paces each local worker (core/node.c pace_local; the same rule,
 * gm_policy_local_pace, the receive CPU of the landing images standing for the
 * agent's measured CPU; a job there runs one local worker): a job that receives
 * nothing itself needs no more CPU than its pace. A job whose own images land
 * is paced there too, but only until it runs on its remote workers alone
 * (fed_only), a window the fluid model does not resolve: paced for its whole
 * run, seed 2's 852 img/s job on a 0.3-core home was predicted 26% slow
 * (13.7 s, 10.9 measured).
 */
static void pace_needs(struct run *r)
{
	const struct gm_scenario *s = r->s;
	for (uint32_t nd = 0; nd < s->nnodes; nd++) {
		double recv = 0, took = 0;
		uint32_t landing = 0, workers = 0, own = 0;
		for (uint32_t k = 0; k < r->nact; k++) {
			uint32_t j = r->act[k];
			double m = r->isshort[j] ? r->m[j] : 0;
			if (s->job[j].home != nd)
				continue;
			if (m > 0) {
				recv += m * recv_of(s, j), landing++;
				took +=
				    s->job[j].rate > 0 ? s->job[j].rate * local_of(s, j) : INFINITY;
			}
			workers += !fed_only(r, j, m);
			own += m > 0 && !fed_only(r, j, m);
		}
		double pace =
		    gm_policy_local_pace(s->node[nd].cores, recv, workers, landing, took, own);
		if (!(pace > 0))
			continue;
		for (uint32_t k = 0; k < r->nact; k++) {
			uint32_t j = r->act[k];
			double m = r->isshort[j] ? r->m[j] : 0;
			if (s->job[j].home != nd || m > 0)
				continue;
			if (r->need[j] > pace)
				r->need[j] = pace; /* (it receives nothing: m is 0) */
		}
	}
}

/* Lending on: rounds of workers then home water-filling until the shares settle. */
static void alloc_lend(struct run *r)
{
	const struct gm_scenario *s = r->s;
	for (int round = 0; round < SCEN_ROUNDS; round++) {
		double moved = 0;
		deliver(r);
		for (uint32_t k = 0; k < r->nact; k++) {
			uint32_t j = r->act[k];
			r->need[j] = home_need(r, j, r->isshort[j] ? r->m[j] : 0);
		}
		pace_needs(r);
		for (uint32_t k = 0; k < r->nact; k++)
			r->x[r->act[k]] = r->share[r->act[k]]; /* the shares before */
		for (uint32_t nd = 0; nd < s->nnodes; nd++)
			fill_node(r, nd);
		for (uint32_t k = 0; k < r->nact; k++)
			moved = fmax(moved, fabs(r->share[r->act[k]] - r->x[r->act[k]]));
		if (moved < 1e-12)
			break;
	}
}

/* Rates of the running jobs: x (img/s) and m (of it remote). */
static void allocate(struct run *r, int lending)
{
	const struct gm_scenario *s = r->s;
	double pool = alloc_local(r);
	if (!lending)
		return;
	if (!(s->remote_home_cpu < s->local_cpu))
		memset(r->lw, 0, sizeof(r->lw)); /* receiving costs more than decoding */
	place_workers(r);
	if (!(pool > 0) || !(s->remote_home_cpu < s->local_cpu))
		return;
	alloc_lend(r);
	for (uint32_t k = 0; k < r->nact; k++) {
		uint32_t j = r->act[k];
		double sh = r->share[j], m = r->isshort[j] ? r->m[j] : 0, x;
		if (m * recv_of(s, j) > sh)
			m = sh / recv_of(s, j); /* the home cannot receive more */
		x = m;
		if (!fed_only(r, j, m))
			x += (sh - m * recv_of(s, j)) / local_of(s, j);
		if (s->job[j].rate > 0 && x > s->job[j].rate)
			x = s->job[j].rate;
		r->m[j] = m;
		r->x[j] = x;
	}
}

/* ---- the event loop ---- */

static int run_open(struct run *r, const struct gm_scenario *s)
{
	size_t n = s->njobs;
	r->s = s;
	r->left = calloc(n, sizeof(double));
	r->x = calloc(n, sizeof(double));
	r->alone = calloc(n, sizeof(double));
	r->m = calloc(n, sizeof(double));
	r->share = calloc(n, sizeof(double));
	r->need = calloc(n, sizeof(double));
	r->state = calloc(n, 1);
	r->isshort = calloc(n, sizeof(bool));
	r->want = calloc(n, sizeof(double));
	r->took = calloc(n, sizeof(uint32_t));
	r->hold = calloc(n, sizeof(uint32_t));
	r->hpend = calloc(n, sizeof(uint32_t));
	r->held = calloc(n * s->nnodes, sizeof(uint32_t));
	r->pend = calloc(n * s->nnodes, sizeof(uint32_t));
	r->ready = calloc(n * s->nnodes, sizeof(double));
	r->act = calloc(n, sizeof(uint32_t));
	r->wf = calloc(n, sizeof(*r->wf));
	if (!r->left || !r->x || !r->alone || !r->m || !r->share || !r->need || !r->state ||
	    !r->isshort || !r->want || !r->took || !r->act || !r->wf || !r->hold || !r->hpend ||
	    !r->held || !r->pend || !r->ready)
		return -ENOMEM;
	for (size_t j = 0; j < n; j++)
		r->left[j] = s->job[j].images;
	return 0;
}

static void run_close(struct run *r)
{
	free(r->left);
	free(r->x);
	free(r->alone);
	free(r->m);
	free(r->share);
	free(r->need);
	free(r->state);
	free(r->isshort);
	free(r->want);
	free(r->took);
	free(r->hold);
	free(r->hpend);
	free(r->held);
	free(r->pend);
	free(r->ready);
	free(r->act);
	free(r->wf);
}

/* The scenario in the loader's ranges (a hand-built one is checked too). */
static int check(const struct gm_scenario *s, char *err, size_t errlen)
{
	bool ok = s->nnodes >= 1 && s->nnodes <= GM_SCEN_MAX_NODES && s->njobs >= 1 &&
		  s->njobs <= GM_SCEN_MAX_JOBS && s->local_cpu > 0 && s->remote_home_cpu > 0 &&
		  s->remote_lender_cpu > 0 && s->local_cpu <= GM_SCEN_MAX_COST / 1e6 &&
		  s->remote_home_cpu <= GM_SCEN_MAX_COST / 1e6 &&
		  s->remote_lender_cpu <= GM_SCEN_MAX_COST / 1e6 && s->start_s >= 0 &&
		  s->start_s <= 3600 && s->worker_rate >= 0 && s->job_cpu >= 0 &&
		  s->job_cpu <= 3600 && s->lead_cpu >= 0 && s->lead_cpu <= 3600;
	for (uint32_t i = 0; ok && i < s->nnodes; i++)
		ok = s->node[i].cores > 0 && s->node[i].cores <= GM_SCEN_MAX_CORES;
	for (size_t k = 0; ok && k < s->njobs; k++) {
		const struct gm_scen_job *j = &s->job[k];
		ok = j->home < s->nnodes && j->submit >= 0 && j->submit <= GM_SCEN_MAX_TIME &&
		     (!k || j->submit >= s->job[k - 1].submit) && j->images >= 1 &&
		     j->images <= GM_SCEN_MAX_IMAGES && j->rate >= 0 && j->rate <= GM_SCEN_MAX_RATE;
	}
	if (!ok)
		gm_errf(err, errlen,
			"gm_scenario_run: the scenario is out of range (1..%d nodes of cores > 0, "
			"1..%d jobs sorted by submit with a known home, costs > 0)",
			GM_SCEN_MAX_NODES, GM_SCEN_MAX_JOBS);
	return ok ? 0 : -EINVAL;
}

/* Advance every running job by dt at its rate; the utilisation integrals. */
static void advance(struct run *r, double dt, struct gm_scen_result *res, double *num, double *den)
{
	for (uint32_t k = 0; k < r->nact; k++) {
		uint32_t j = r->act[k];
		double rate = r->s->job[j].rate;
		r->left[j] -= r->x[j] * dt;
		res[j].remote += r->m[j] * dt;
		if (rate > 0) {
			*num += r->x[j] / rate * dt;
			*den += dt;
		}
	}
}

/* The jobs done at time t leave the running set. */
static void finish(struct run *r, double t, struct gm_scen_result *res, size_t *done)
{
	for (uint32_t k = 0; k < r->nact;) {
		uint32_t j = r->act[k];
		if (r->left[j] > 1e-9 * r->s->job[j].images) {
			k++;
			continue;
		}
		r->state[j] = 2;
		res[j].end = t;
		res[j].jct = t - r->s->job[j].submit;
		r->act[k] = r->act[--r->nact];
		(*done)++;
	}
}

/* Seconds from now to the earliest finish at the current rates (INFINITY: none). */
static double soonest_finish(const struct run *r)
{
	double dt = INFINITY;
	for (uint32_t k = 0; k < r->nact; k++) {
		uint32_t j = r->act[k];
		if (r->x[j] > 0 && r->left[j] / r->x[j] < dt)
			dt = r->left[j] / r->x[j];
	}
	return dt;
}

static int loop(struct run *r, int lending, struct gm_scen_result *res, struct gm_scen_summary *sum,
		char *err, size_t errlen)
{
	const struct gm_scenario *s = r->s;
	size_t next = 0, sub = 0, done = 0; /* [next, sub): submitted, starting up */
	double t = 0, num = 0, den = 0;

	while (done < s->njobs) {
		for (; sub < s->njobs && s->job[sub].submit <= t; sub++) {
			uint32_t h = s->job[sub].home;
			r->lend_at[h] = fmax(r->lend_at[h], s->job[sub].submit + SCEN_FRESH_S(s));
		}
		while (next < sub && s->job[next].submit + s->start_s <= t) {
			r->state[next] = 1;
			r->act[r->nact++] = (uint32_t)next++;
		}
		r->now = t;
		start_sending(r, t);
		allocate(r, lending);
		double ta = sub < s->njobs ? s->job[sub].submit : INFINITY;
		double tr = next < sub ? s->job[next].submit + s->start_s : INFINITY;
		double tn = fmin(fmin(ta, tr), t + soonest_finish(r));
		tn = fmin(tn, start_sending(r, t)); /* a lent worker starts sending */
		for (uint32_t nd = 0; lending && nd < s->nnodes; nd++)
			if (r->lend_at[nd] > t)
				tn = fmin(tn, r->lend_at[nd]); /* a host lends again */
		/* a new job read again (lead_extra) */
		for (uint32_t k = 0; lending && k < r->nact; k++)
			tn = fmin(tn, lead_next(s, r->act[k], t));
		if (!isfinite(tn)) {
			gm_errf(err, errlen, "gm_scenario_run: %zu jobs left and no event",
				s->njobs - done);
			return -EDEADLK;
		}
		for (size_t k = next; k < sub; k++) /* starting: demanded, nothing delivered */
			den += s->job[k].rate > 0 ? tn - t : 0;
		advance(r, tn - t, res, &num, &den);
		t = tn;
		finish(r, t, res, &done);
		sum->events++;
	}
	sum->gpu_util = den > 0 ? num / den : 0;
	return 0;
}

int gm_scenario_run(const struct gm_scenario *s, int lending, struct gm_scen_result *res,
		    struct gm_scen_summary *sum, char *err, size_t errlen)
{
	struct run r = {0};
	double sj = 0, sb = 0, first = INFINITY;
	int rc;

	memset(sum, 0, sizeof(*sum));
	if ((rc = check(s, err, errlen)))
		return rc;
	memset(res, 0, s->njobs * sizeof(*res));
	if ((rc = run_open(&r, s))) {
		gm_errf(err, errlen, "gm_scenario_run: out of memory");
		goto out_close;
	}
	if ((rc = loop(&r, lending, res, sum, err, errlen)))
		goto out_close;
	for (size_t k = 0; k < s->njobs; k++) {
		res[k].bound = s->job[k].rate > 0 ? s->job[k].images / s->job[k].rate : 0;
		sj += res[k].jct;
		sb += res[k].bound;
		sum->remote_images += res[k].remote;
		first = fmin(first, s->job[k].submit);
		sum->makespan = fmax(sum->makespan, res[k].end);
	}
	sum->jobs = s->njobs;
	sum->avg_jct = sj / (double)s->njobs;
	sum->bound_avg_jct = sb / (double)s->njobs;
	sum->makespan -= first;
out_close:
	run_close(&r);
	return rc;
}

/* ---- what the CPUs can feed (scenario.h) ---- */

/* Job j consumes during [submit, submit + images / rate) of the bound schedule. */
static bool busy_at(const struct gm_scen_job *j, double t)
{
	return j->rate > 0 && j->submit <= t && t < j->submit + j->images / j->rate;
}

/* The share of the poor hosts' demand fed at instant t (1: none demanded). */
static double feed_at(const struct gm_scenario *s, double share, double t)
{
	double lent = 0, base = 0, need = 0, demand = 0;
	for (uint32_t h = 0; h < s->nnodes; h++) {
		double cores = share * s->node[h].cores, d = 0;
		for (size_t k = 0; k < s->njobs; k++)
			if (s->job[k].home == h && busy_at(&s->job[k], t))
				d += s->job[k].rate;
		if (s->node[h].cores >= GM_NODE_FED_CORES) { /* a lender: what its own leave */
			lent += fmax(0, cores - d * s->local_cpu) / s->remote_lender_cpu;
			continue;
		}
		double local = cores / s->local_cpu;
		demand += d;
		if (d <= local) {
			base += d;
			continue;
		}
		/* decoding what its cores hold, receiving the rest: x remote images
		 * leave (cores - x home) / local_cpu local ones, at most all remote */
		base += local;
		if (s->local_cpu > s->remote_home_cpu) /* else a remote image gains nothing */
			need +=
			    fmin((d * s->local_cpu - cores) / (s->local_cpu - s->remote_home_cpu),
				 cores / s->remote_home_cpu);
	}
	if (!(demand > 0))
		return 1;
	/* each remote image adds 1 - home / local beyond what the host made alone */
	return fmin(1,
		    (base + fmin(lent, need) * (1 - s->remote_home_cpu / s->local_cpu)) / demand);
}

double gm_scenario_feedable(const struct gm_scenario *s, double share)
{
	double least = 1;
	share = share > 0 && share <= 1 ? share : 1;
	for (size_t a = 0; a < s->njobs; a++) { /* the mix changes at a submit or an end */
		const struct gm_scen_job *j = &s->job[a];
		if (!(j->rate > 0))
			continue;
		least = fmin(least, feed_at(s, share, j->submit));
		least = fmin(least, feed_at(s, share, j->submit + j->images / j->rate));
	}
	return least;
}
