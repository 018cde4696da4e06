/*
 * scengen.c - the seeded scenario family (scengen.h): hosts, jobs and lenders'
 * own demand drawn from the stated ranges, and the writer of a scenario file.
 *
 * Design: one counter-based RNG stream keyed by the seed (rng.h), drawn in a
 * fixed order (hosts, then each poor host's jobs, then each lender's), so a seed
 * is a scenario on any host and a change of one range moves only what follows
 * it. Every draw is on a grid (0.05 core, 0.5 s, 128 img/s) whose points are
 * k / 20, k / 2 and k * 128: exact decimals, so the written file reads back to
 * the very doubles drawn. The jobs are sorted by submit (ties: poor hosts
 * first, then in draw order), as gm_scenario_load sorts a file.
 *
 * The jobs are drawn again (from a stream of their own per draw, the hosts
 * kept) until the cluster's CPUs can feed every poor host's GPUs at their rate
 * throughout, each host using GM_SCENGEN_FEED_SHARE of its cores
 * (gm_scenario_feedable): a scenario that no policy can feed measures the
 * cluster's size, not the controller (of the first draws of 68 seeds, 1..60 and
 * 101..108, 31 met that at full cores and 9 at 0.75). After
 * GM_SCENGEN_DRAWS draws it keeps the one that came closest. It does not
 * check that a scenario is interesting otherwise (a seed may give lenders
 * that are never idle): the family is the point, and the tests run the
 * simulator over many seeds.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "goldminer/rng.h"
#include "goldminer/scengen.h"
#include "goldminer/util.h"

#define SCENGEN_STREAM 0x5343454eull /* "SCEN" */

/* The committed measured costs of traces/cluster.tsv (us per image, img/s, s). */
#define SCENGEN_LOCAL_US   335.3
#define SCENGEN_HOME_US	   63.4
#define SCENGEN_LENDER_US  385.0
#define SCENGEN_WORKER_IMG 403.1
#define SCENGEN_START_S	   0.41

/* Jobs one scenario holds at most: the poor hosts' plus each lender's phases
 * (at least 10 s each, plus a pause) over its span. */
#define SCENGEN_MAX_JOBS (GM_SCENGEN_POOR_MAX * GM_SCENGEN_JOBS_MAX + GM_SCENGEN_LENDERS * 64)

/* A point of lo, lo + step, ..., hi, uniformly. */
static double grid(struct gm_rng *r, double lo, double hi, double step)
{
	uint64_t n = (uint64_t)llround((hi - lo) / step) + 1;
	return (llround(lo / step) + (double)gm_rng_below(r, n)) * step;
}

/* Seconds on the 0.5 s grid (k / 2: exact). */
static double half_s(struct gm_rng *r, double lo, double hi)
{
	return (double)(llround(lo * 2) +
			(long long)gm_rng_below(r, (uint64_t)llround((hi - lo) * 2) + 1)) /
	       2;
}

/* Cores on the 0.05 grid (k / 20: exact), lo..hi. */
static double twentieths(struct gm_rng *r, double lo, double hi)
{
	long long a = llround(lo * 20), b = llround(hi * 20);
	return (double)(a + (long long)gm_rng_below(r, (uint64_t)(b - a + 1))) / 20;
}

/* A job's --workers: 8 (0.60), 4 or 16 (0.075 each), auto (0.25: 0). */
static uint32_t draw_workers(struct gm_rng *r)
{
	uint64_t u = gm_rng_below(r, 1000);
	if (u < 600)
		return 8;
	if (u < 675)
		return 4;
	if (u < 750)
		return 16;
	return 0;
}

/* Images of a job of len s at rate: whole epochs, at least one. */
static double epochs_of(double len, double rate, uint32_t unit)
{
	double e = round(len * rate / unit);
	return (e < 1 ? 1 : e) * unit;
}

static void add_job(struct gm_scenario *s, const char *name, uint32_t home, double submit,
		    double rate, double len, uint32_t unit, uint32_t workers)
{
	struct gm_scen_job *j = &s->job[s->njobs];
	snprintf(j->name, GM_SCEN_NAME, "%s", name);
	j->home = home;
	j->submit = submit;
	j->rate = rate;
	j->images = epochs_of(len, rate, unit);
	j->workers = workers;
	j->line = (uint32_t)++s->njobs; /* draw order, for ties */
}

/* The hosts: P1..Pn then L1, L2. */
static void draw_hosts(struct gm_scenario *s, struct gm_rng *r)
{
	uint32_t np = GM_SCENGEN_POOR_MIN +
		      (uint32_t)gm_rng_below(r, GM_SCENGEN_POOR_MAX - GM_SCENGEN_POOR_MIN + 1);
	double poor = 0, hi;
	s->nnodes = 0;
	for (uint32_t k = 0; k < np; k++) {
		struct gm_scen_node *n = &s->node[s->nnodes++];
		snprintf(n->name, GM_SCEN_NAME, "P%u", k + 1);
		n->cores = twentieths(r, GM_SCENGEN_POOR_CORES_MIN, GM_SCENGEN_POOR_CORES_MAX);
		poor += n->cores;
	}
	hi = floor((GM_SCENGEN_TOTAL_CORES - poor) / GM_SCENGEN_LENDERS * 20 + 1e-9) / 20;
	hi = fmin(hi, GM_SCENGEN_LEND_CORES_MAX); /* >= 0.55 with three poor hosts of 0.30 */
	for (uint32_t k = 0; k < GM_SCENGEN_LENDERS; k++) {
		struct gm_scen_node *n = &s->node[s->nnodes++];
		snprintf(n->name, GM_SCEN_NAME, "L%u", k + 1);
		n->cores = twentieths(r, GM_SCENGEN_LEND_CORES_MIN, hi);
	}
	for (uint32_t k = 0; k < s->nnodes; k++)
		s->node[k].workers = (uint32_t)ceil(s->node[k].cores);
}

/* The poor hosts' jobs; returns the last submit. */
static double draw_poor_jobs(struct gm_scenario *s, struct gm_rng *r, uint32_t np, uint32_t unit)
{
	double last = 0;
	for (uint32_t h = 0; h < np; h++) {
		uint32_t nj =
		    GM_SCENGEN_JOBS_MIN +
		    (uint32_t)gm_rng_below(r, GM_SCENGEN_JOBS_MAX - GM_SCENGEN_JOBS_MIN + 1);
		double t = half_s(r, 0, GM_SCENGEN_FIRST_MAX_S);
		for (uint32_t k = 0; k < nj; k++) {
			char name[GM_SCEN_NAME];
			if (k)
				t += half_s(r, GM_SCENGEN_GAP_MIN_S, GM_SCENGEN_GAP_MAX_S);
			double rate = grid(r, GM_SCENGEN_RATE_MIN, GM_SCENGEN_RATE_MAX, 128);
			double len = half_s(r, GM_SCENGEN_LEN_MIN_S, GM_SCENGEN_LEN_MAX_S);
			snprintf(name, sizeof(name), "p%u-%u", h + 1, k + 1);
			add_job(s, name, h, t, rate, len, unit, draw_workers(r));
			last = fmax(last, t);
		}
	}
	return last;
}

/* Each lender's own jobs, one after another from 0 until end. */
static void draw_own_jobs(struct gm_scenario *s, struct gm_rng *r, uint32_t np, double end,
			  uint32_t unit)
{
	for (uint32_t l = 0; l < GM_SCENGEN_LENDERS; l++) {
		double t = 0;
		for (uint32_t k = 0; t <= end && k < 64; k++) {
			char name[GM_SCEN_NAME];
			double rate =
			    grid(r, GM_SCENGEN_OWN_RATE_MIN, GM_SCENGEN_OWN_RATE_MAX, 128);
			double len = half_s(r, GM_SCENGEN_OWN_LEN_MIN_S, GM_SCENGEN_OWN_LEN_MAX_S);
			snprintf(name, sizeof(name), "l%u-%u", l + 1, k + 1);
			add_job(s, name, np + l, t, rate, len, unit, draw_workers(r));
			/* due to end at its rate, then a pause */
			t += ceil(s->job[s->njobs - 1].images / rate * 2) / 2 +
			     half_s(r, 0, GM_SCENGEN_OWN_PAUSE_MAX_S);
		}
	}
}

static int cmp_submit(const void *a, const void *b)
{
	const struct gm_scen_job *x = a, *y = b;
	if (x->submit != y->submit)
		return x->submit < y->submit ? -1 : 1;
	return x->line < y->line ? -1 : x->line > y->line;
}

/* Every job of the scenario (any drawn before are dropped), sorted by submit. */
static void draw_jobs(struct gm_scenario *s, struct gm_rng *r, uint32_t np, uint32_t unit)
{
	s->njobs = 0;
	double last = draw_poor_jobs(s, r, np, unit);
	draw_own_jobs(s, r, np, last + GM_SCENGEN_OWN_TAIL_S, unit);
	qsort(s->job, s->njobs, sizeof(*s->job), cmp_submit);
	for (size_t k = 0; k < s->njobs; k++)
		s->job[k].line = 0; /* not from a file */
}

/* The options with their defaults filled; -EINVAL after err. */
static int resolve(struct gm_scengen_opts *o, const struct gm_scengen_opts *in, char *err,
		   size_t errlen)
{
	static const struct gm_scengen_opts def = {GM_SCENGEN_EPOCH_IMAGES, SCENGEN_LOCAL_US / 1e6,
						   SCENGEN_HOME_US / 1e6,   SCENGEN_LENDER_US / 1e6,
						   SCENGEN_WORKER_IMG,	    SCENGEN_START_S};
	*o = def;
	if (!in)
		return 0;
	o->epoch_images = in->epoch_images ? in->epoch_images : def.epoch_images;
	o->local_cpu = in->local_cpu > 0 ? in->local_cpu : def.local_cpu;
	o->remote_home_cpu = in->remote_home_cpu > 0 ? in->remote_home_cpu : def.remote_home_cpu;
	o->remote_lender_cpu =
	    in->remote_lender_cpu > 0 ? in->remote_lender_cpu : def.remote_lender_cpu;
	o->worker_rate = in->worker_rate > 0 ? in->worker_rate : def.worker_rate;
	o->start_s = in->start_s > 0 ? in->start_s : def.start_s;
	if (o->epoch_images > 1000000000u || o->local_cpu > GM_SCEN_MAX_COST / 1e6 ||
	    o->remote_home_cpu > GM_SCEN_MAX_COST / 1e6 ||
	    o->remote_lender_cpu > GM_SCEN_MAX_COST / 1e6 || o->worker_rate > GM_SCEN_MAX_RATE ||
	    o->start_s > 3600) {
		gm_errf(err, errlen,
			"gm_scengen_make: epoch_images over 1e9 or a cost out of the scenario's "
			"ranges (costs up to 1e9 us, 1e9 img/s, start_s 3600 s)");
		return -EINVAL;
	}
	return 0;
}

int gm_scengen_make(struct gm_scenario **out, uint64_t seed, const struct gm_scengen_opts *opts,
		    char *err, size_t errlen)
{
	struct gm_scengen_opts o;
	struct gm_scenario *s;
	struct gm_rng r;
	uint32_t np;
	int rc;

	if ((rc = resolve(&o, opts, err, errlen)))
		return rc;
	if (!(s = calloc(1, sizeof(*s))))
		return -ENOMEM;
	s->node = calloc(GM_SCENGEN_POOR_MAX + GM_SCENGEN_LENDERS, sizeof(*s->node));
	s->job = calloc(SCENGEN_MAX_JOBS, sizeof(*s->job));
	if (!s->node || !s->job) {
		gm_errf(err, errlen, "gm_scengen_make: out of memory");
		gm_scenario_destroy(s);
		return -ENOMEM;
	}
	s->local_cpu = o.local_cpu;
	s->remote_home_cpu = o.remote_home_cpu;
	s->remote_lender_cpu = o.remote_lender_cpu;
	s->worker_rate = o.worker_rate;
	s->start_s = o.start_s;
	gm_rng_init(&r, seed, SCENGEN_STREAM, 0, 0);
	draw_hosts(s, &r);
	np = s->nnodes - GM_SCENGEN_LENDERS;
	/* the jobs: the first draw the cluster can feed (draw k > 0 from its own
	 * stream), else the draw that came closest */
	double best = -1;
	uint64_t best_k = 0;
	for (uint64_t k = 0;; k++) {
		if (k)
			gm_rng_init(&r, seed, SCENGEN_STREAM, k, 0);
		draw_jobs(s, &r, np, o.epoch_images);
		double f = gm_scenario_feedable(s, GM_SCENGEN_FEED_SHARE);
		if (f >= 1 - 1e-9) /* fed, to rounding */
			break;
		if (f > best)
			best = f, best_k = k;
		if (k + 1 == GM_SCENGEN_DRAWS) {
			gm_rng_init(&r, seed, SCENGEN_STREAM, best_k, 0);
			if (best_k == 0)
				draw_hosts(s, &r); /* the same hosts: the stream's start */
			draw_jobs(s, &r, np, o.epoch_images);
			break;
		}
	}
	*out = s;
	return 0;
}

/* x as its shortest decimal of up to 15 digits that reads back to x, else 17. */
static const char *num(char buf[32], double x)
{
	snprintf(buf, 32, "%.15g", x);
	if (strtod(buf, NULL) != x)
		snprintf(buf, 32, "%.17g", x);
	return buf;
}

int gm_scengen_write(const struct gm_scenario *s, uint64_t seed, FILE *f)
{
	int bad = fprintf(f,
			  "# goldminer-scenario v1\n"
			  "# Drawn by `goldminer sim --scenario-gen %llu` (sim/scengen.c; the "
			  "ranges: docs/USAGE.md,\n# \"Scenario family\"). P hosts are CPU-poor, "
			  "L hosts lend; l jobs are the lenders' own.\n",
			  (unsigned long long)seed) < 0;
	char a[32], b[32], c[32], d[32], e[32];
	for (uint32_t k = 0; k < s->nnodes; k++)
		bad |= fprintf(f, "node\t%s\t%s\t%u\n", s->node[k].name, num(a, s->node[k].cores),
			       s->node[k].workers) < 0;
	for (size_t k = 0; k < s->njobs; k++) {
		const struct gm_scen_job *j = &s->job[k];
		char w[16];
		snprintf(w, sizeof(w), j->workers ? "%u" : "auto", j->workers);
		bad |= fprintf(f, "job\t%s\t%s\t%s\t%s\t%s\t%s\n", j->name, s->node[j->home].name,
			       num(a, j->submit), num(b, j->images), num(c, j->rate), w) < 0;
	}
	bad |= fprintf(f,
		       "cost\tlocal_us\t%s\ncost\tremote_home_us\t%s\n"
		       "cost\tremote_lender_us\t%s\ncost\tremote_worker_img_s\t%s\n"
		       "cost\tstart_s\t%s\n",
		       num(a, s->local_cpu * 1e6), num(b, s->remote_home_cpu * 1e6),
		       num(c, s->remote_lender_cpu * 1e6), num(d, s->worker_rate),
		       num(e, s->start_s)) < 0;
	return bad || ferror(f) ? -EIO : 0;
}
