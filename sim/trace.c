/*
 * trace.c - trace readers and the seeded synthetic generator (trace.h).
 *
 * A file's first line picks its format from a table (header, row parser, what to
 * do after the last row); one shared line loop then hands every row to that
 * format's parser, which turns it into a struct gm_job, leaves it out (counted), or
 * rejects it, and the loop reports "FILE:LINE: what is wrong" (-EBADMSG). Finally
 * jobs are sorted by submit time (stable, so equal submits keep file order) and
 * time is shifted so the first submit is 0. The mapping of each public format is
 * in traces/README.md.
 *
 * The generator draws every attribute of job i from its own counter-based RNG
 * stream (seed, GM_TRACE_STREAM, i), so a job does not change when the trace is made
 * longer. It does not model diurnal load or job dependencies.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "goldminer/profile.h"
#include "goldminer/rng.h"
#include "goldminer/trace.h"
#include "goldminer/util.h"

#define GM_TRACE_STREAM 0x54524143ull /* "TRAC" */

/* Append a job: 0, -E2BIG past GM_TRACE_MAX_JOBS, -ENOMEM. */
static int push(struct gm_trace *t, size_t *cap, const struct gm_job *j)
{
	if (t->n >= GM_TRACE_MAX_JOBS)
		return -E2BIG;
	if (t->n == *cap) {
		size_t nc = *cap ? *cap * 2 : 1024;
		void *a = realloc(t->jobs, nc * sizeof(*t->jobs));
		if (!a)
			return -ENOMEM;
		t->jobs = a;
		*cap = nc;
	}
	t->jobs[t->n++] = *j;
	return 0;
}

static int cmp_job(const void *a, const void *b)
{
	const struct gm_job *x = a, *y = b;
	if (x->submit != y->submit)
		return x->submit < y->submit ? -1 : 1;
	return x->line < y->line ? -1 : x->line > y->line;
}

/*
 * Sort by submit (stable via the line number) and start time at 0. Refuses a span
 * of submits beyond GM_TRACE_MAX_SECONDS, naming the last job's line (what: the
 * source, a path or a synth spec).
 */
static int finish(struct gm_trace *t, const char *what, char *err, size_t errlen)
{
	int stable = 1;
	for (size_t i = 1; i < t->n; i++)
		if (cmp_job(&t->jobs[i - 1], &t->jobs[i]) > 0) {
			stable = 0;
			break;
		}
	if (!stable)
		qsort(t->jobs, t->n, sizeof(*t->jobs), cmp_job);
	double t0 = t->n ? t->jobs[0].submit : 0;
	for (size_t i = 0; i < t->n; i++)
		t->jobs[i].submit -= t0;
	if (t->n && t->jobs[t->n - 1].submit > GM_TRACE_MAX_SECONDS) {
		const struct gm_job *j = &t->jobs[t->n - 1];
		gm_errf(err, errlen,
			"%s:%u: submitted %.6g s after the first job; the accepted span of "
			"submits is 0..%.0f s (100 years)",
			what, j->line, j->submit, GM_TRACE_MAX_SECONDS);
		return -EBADMSG;
	}
	return 0;
}

/* Split a line in place on sep; empty fields are kept. Returns the field count. */
static int split(char *s, char sep, char **f, int max)
{
	int n = 0;
	s[strcspn(s, "\r\n")] = 0;
	for (;;) {
		if (n == max)
			return max + 1;
		f[n++] = s;
		char *c = strchr(s, sep);
		if (!c)
			return n;
		*c = 0;
		s = c + 1;
	}
}

/* Strict number parsing: the whole field must be a finite number. */
static bool num(const char *s, double *v)
{
	char *end;
	if (!*s)
		return false;
	*v = strtod(s, &end);
	return *end == 0 && isfinite(*v);
}

/* Days from 1970-01-01 to y-m-d (proleptic Gregorian). */
static long days_from_civil(long y, long m, long d)
{
	y -= m <= 2;
	long era = (y >= 0 ? y : y - 399) / 400;
	long yoe = y - era * 400;
	long doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	long doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

static bool parse_stamp(const char *s, double *v)
{
	int y, mo, d, h, mi, se, n = 0;
	if (sscanf(s, "%4d-%2d-%2d %2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &se, &n) != 6 || s[n] ||
	    mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60)
		return false;
	*v = (double)days_from_civil(y, mo, d) * 86400.0 + h * 3600 + mi * 60 + se;
	return true;
}

/*
 * One file being read. Row parsers return 1 for a job, 0 for a row left out (and
 * counted), -EBADMSG with *what set for a malformed row, or -ENOMEM.
 */
struct reader {
	struct gm_trace *t;
	double *cens; /* openb: deletion times of pods Running at the end */
	size_t ncens, ccap;
	double tmax; /* openb: the latest deletion time */
};

static int row_openb(struct reader *r, char *line, struct gm_job *j, const char **what)
{
	struct gm_trace *t = r->t;
	char *fld[16];
	double v[8];

	if (split(line, ',', fld, 11) != 11) {
		*what = "expected 11 comma-separated fields";
		return -EBADMSG;
	}
	if (!num(fld[1], &v[0]) || !num(fld[3], &v[1]) || !num(fld[4], &v[2]) || v[0] < 0 ||
	    v[0] > 1e10 || v[1] < 0 || v[1] > 1e6 || v[2] < 0 || v[1] != floor(v[1]) ||
	    v[2] > 1000) {
		*what = "bad cpu_milli (0..1e10), num_gpu (0..1e6) or gpu_milli (0..1000)";
		return -EBADMSG;
	}
	if (!num(fld[8], &v[3]) || !num(fld[9], &v[4]) || v[3] < 0 || v[4] < 0) {
		*what = "bad creation_time or deletion_time";
		return -EBADMSG;
	}
	if (fld[10][0] && (!num(fld[10], &v[5]) || v[5] < 0)) {
		*what = "bad scheduled_time";
		return -EBADMSG;
	}
	if (v[1] == 0) {
		t->skipped_cpu_only++;
		return 0;
	}
	if (!fld[10][0]) {
		t->skipped_never_ran++;
		return 0;
	}
	if (v[4] <= v[5]) {
		t->skipped_bad_time++;
		return 0;
	}
	if (v[4] - v[5] > GM_TRACE_MAX_SECONDS) {
		*what = "deletion_time - scheduled_time (the duration) beyond the accepted "
			"0..3155760000 s (100 years)";
		return -EBADMSG;
	}
	if (v[2] < 1000)
		t->rounded_fraction++;
	j->gpus = (uint32_t)v[1];
	j->vcpu = (float)(v[0] / 1000.0);
	j->submit = v[3];
	j->duration = v[4] - v[5];
	if (v[4] > r->tmax)
		r->tmax = v[4];
	if (!strcmp(fld[7], "Running")) {
		if (r->ncens == r->ccap) {
			size_t nc = r->ccap ? 2 * r->ccap : 256;
			void *a = realloc(r->cens, nc * sizeof(double));
			if (!a)
				return -ENOMEM;
			r->cens = a;
			r->ccap = nc;
		}
		r->cens[r->ncens++] = v[4];
		j->cls = -2; /* marker, resolved by drop_censored */
	}
	return 1;
}

/*
 * openb: a pod still Running when the trace ends has deletion_time = the end of
 * the trace, so its duration is censored (unknown) and it is mostly a
 * long-lived service. Such pods are left out and counted.
 */
static void drop_censored(struct reader *r)
{
	struct gm_trace *t = r->t;
	size_t k = 0, c = 0;
	for (size_t i = 0; i < t->n; i++) {
		struct gm_job *j = &t->jobs[i];
		if (j->cls == -2) {
			bool censored = r->cens[c++] >= r->tmax;
			j->cls = GM_TRACE_CLASS_AUTO;
			if (censored) {
				t->skipped_censored++;
				continue;
			}
		}
		t->jobs[k++] = *j;
	}
	t->n = k;
}

static int row_philly(struct reader *r, char *line, struct gm_job *j, const char **what)
{
	char *fld[16];
	double v[8];

	if (split(line, ',', fld, 5) != 5) {
		*what = "expected 5 comma-separated fields";
		return -EBADMSG;
	}
	if (!parse_stamp(fld[0], &v[0])) {
		*what = "bad timestamp (want YYYY-MM-DD HH:MM:SS)";
		return -EBADMSG;
	}
	if (!num(fld[1], &v[1]) || !num(fld[2], &v[2]) || v[1] < 0 || v[2] < 0 || v[2] > 1e6 ||
	    v[2] != floor(v[2])) {
		*what = "bad duration or num_gpus (0..1e6)";
		return -EBADMSG;
	}
	if (v[2] == 0) {
		r->t->skipped_cpu_only++;
		return 0;
	}
	if (v[1] <= 0) {
		r->t->skipped_bad_time++;
		return 0;
	}
	if (v[1] > GM_TRACE_MAX_SECONDS) {
		*what = "duration beyond the accepted 0..3155760000 s (100 years)";
		return -EBADMSG;
	}
	j->submit = v[0];
	j->duration = v[1];
	j->gpus = (uint32_t)v[2];
	j->vcpu = 0;
	return 1;
}

static int row_gm(struct reader *r, char *line, struct gm_job *j, const char **what)
{
	char *fld[16];
	double v[8];

	(void)r;
	if (split(line, '\t', fld, 5) != 5) {
		*what = "expected 5 tab-separated fields (submit duration gpus vcpu class)";
		return -EBADMSG;
	}
	if (!num(fld[0], &v[0]) || !num(fld[1], &v[1]) || !num(fld[2], &v[2]) ||
	    !num(fld[3], &v[3]) || !num(fld[4], &v[4]) || v[0] < 0 || v[1] <= 0 ||
	    v[1] > GM_TRACE_MAX_SECONDS || v[2] < 1 || v[2] != floor(v[2]) || v[2] > 1e6 ||
	    v[3] < 0 || v[3] > 1e7 || v[4] < -1 || v[4] >= GM_PROFILE_MAX || v[4] != floor(v[4])) {
		*what = "bad number (submit>=0, duration 0..3155760000 s (100 years) and > 0, "
			"gpus 1..1e6, vcpu 0..1e7, class -1..31)";
		return -EBADMSG;
	}
	j->submit = v[0];
	j->duration = v[1];
	j->gpus = (uint32_t)v[2];
	j->vcpu = (float)v[3];
	j->cls = (int32_t)v[4];
	return 1;
}

/*
 * The trace formats, chosen once by the file's first line: the first row whose
 * header matches (exactly, or as a prefix) wins. A row without a parser is a
 * format recognised only to be refused with its message.
 */
static const struct format {
	const char *name; /* gm_trace.format */
	const char *header;
	bool prefix;
	int (*row)(struct reader *r, char *line, struct gm_job *j, const char **what);
	void (*done)(struct reader *r); /* after the last row; NULL: nothing */
	const char *refusal;
} formats[] = {
    {"openb",
     "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
     "creation_time,deletion_time,scheduled_time",
     false, row_openb, drop_censored, NULL},
    {"openb", "name,cpu_milli,", true, NULL, NULL,
     "openb pod list without creation/deletion/scheduled times (e.g. multigpu variants) "
     "cannot be replayed"},
    {"philly", "timestamp,duration,num_gpus,gpu_time,cluster", false, row_philly, NULL, NULL},
    {"gm", "# goldminer-trace v1", false, row_gm, NULL, NULL},
};

/* The format of a header line, or NULL after a message in err. */
static const struct format *pick_format(const char *path, const char *header, char *err,
					size_t errlen)
{
	for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++) {
		const struct format *fm = &formats[i];
		if (fm->prefix ? strncmp(header, fm->header, strlen(fm->header))
			       : strcmp(header, fm->header))
			continue;
		if (fm->row)
			return fm;
		gm_errf(err, errlen, "%s:1: %s", path, fm->refusal);
		return NULL;
	}
	gm_errf(err, errlen,
		"%s:1: unknown trace header (expected an openb pod list, "
		"the Philly csv or '# goldminer-trace v1')",
		path);
	return NULL;
}

/* Read a trace file: pick the format from its header, then one row parser per line. */
static int read_file(struct gm_trace *t, const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	struct reader r = {.t = t};
	const struct format *fm;
	char *line = NULL;
	size_t lcap = 0, cap = 0;
	unsigned lineno = 1;
	int rc = 0;

	if (!f) {
		rc = -errno;
		gm_errf(err, errlen, "%s: %s", path, strerror(errno));
		return rc;
	}
	if (getline(&line, &lcap, f) < 0) {
		gm_errf(err, errlen, "%s:1: empty file", path);
		rc = -EBADMSG;
		goto out_close;
	}
	line[strcspn(line, "\r\n")] = 0;
	if (!(fm = pick_format(path, line, err, errlen))) {
		rc = -EBADMSG;
		goto out_close;
	}
	snprintf(t->format, sizeof(t->format), "%s", fm->name);
	while (getline(&line, &lcap, f) >= 0) {
		struct gm_job j = {.cls = GM_TRACE_CLASS_AUTO, .line = ++lineno};
		const char *what = NULL;

		if (line[0] == '\n' || line[0] == 0 || line[0] == '#')
			continue;
		rc = fm->row(&r, line, &j, &what);
		if (rc == -EBADMSG) {
			gm_errf(err, errlen, "%s:%u: %s", path, lineno, what);
			goto out_close;
		}
		if (rc == 1)
			rc = push(t, &cap, &j);
		if (rc == -E2BIG) {
			gm_errf(err, errlen, "%s:%u: more than %u jobs (the accepted range)", path,
				lineno, GM_TRACE_MAX_JOBS);
			rc = -EBADMSG;
			goto out_close;
		}
		if (rc < 0) {
			gm_errf(err, errlen, "%s: out of memory", path);
			goto out_close;
		}
	}
	if (ferror(f)) {
		rc = -EIO;
		gm_errf(err, errlen, "%s: read error", path);
		goto out_close;
	}
	if (fm->done)
		fm->done(&r);
out_close:
	free(r.cens);
	free(line);
	fclose(f);
	return rc;
}

void gm_trace_synth_defaults(struct gm_trace_synth_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->seed = 1;
	o->jobs = 1000;
	o->interarrival = 60;
	o->load = 0.9;
	o->cluster_gpus = 64;
	o->dur_median = 3600;
	o->dur_sigma = 1.0;
	o->dur_max = 7 * 86400;
	/* GPU-count mix of the openb trace's whole-GPU pods, rounded (most are 1-GPU). */
	const uint32_t gn[] = {1, 2, 4, 8};
	const double gp[] = {0.70, 0.10, 0.10, 0.10};
	for (int i = 0; i < 4; i++) {
		o->gpu_n[i] = gn[i];
		o->gpu_p[i] = gp[i];
	}
	o->gpu_k = 4;
	/* Requested vCPU per GPU, spread like openb (p10 ~3, median ~11, p90 16). */
	const double vc[] = {4, 6, 8, 12, 12, 16};
	for (int i = 0; i < 6; i++)
		o->vcpu_per_gpu[i] = vc[i];
	o->vcpu_k = 6;
}

/* Accepted ranges of the generator's list parameters (the scalars are in keys[]). */
#define SYNTH_MAX_GPUS	 1e6  /* GPUs of one job, as the trace readers */
#define SYNTH_MAX_VCPU	 1024 /* requested vCPUs per GPU */
#define SYNTH_MAX_WEIGHT 1e9  /* one gpumix weight */

/*
 * Check o and derive the mean interarrival *ia and the sum of the GPU-mix weights:
 * 0, or -EINVAL with what is wrong in err (which may be NULL). The ranges keep
 * every derived number finite: with sigma <= 10 the lognormal's mean stays below
 * e^50 times its median, so NaN or infinity can only come from a derived
 * interarrival beyond 100 years, which is refused here.
 */
static int synth_check(const struct gm_trace_synth_opts *o, double *ia, double *gsum, char *err,
		       size_t errlen)
{
	double mean_gpus = 0, mean_dur;

	*gsum = 0;
	if (o->gpu_k < 1 || o->gpu_k > 8 || o->vcpu_k < 1 || o->vcpu_k > 8) {
		gm_errf(err, errlen, "gpumix and vcpu take 1..8 entries");
		return -EINVAL;
	}
	for (int i = 0; i < o->gpu_k; i++) {
		if (!o->gpu_n[i] || o->gpu_n[i] > SYNTH_MAX_GPUS ||
		    !(o->gpu_p[i] >= 0 && o->gpu_p[i] <= SYNTH_MAX_WEIGHT)) {
			gm_errf(err, errlen,
				"gpumix entry %d: GPUs must be 1..1000000 and the weight 0..1e9",
				i + 1);
			return -EINVAL;
		}
		*gsum += o->gpu_p[i];
		mean_gpus += o->gpu_p[i] * o->gpu_n[i];
	}
	for (int i = 0; i < o->vcpu_k; i++)
		if (!(o->vcpu_per_gpu[i] >= 0 && o->vcpu_per_gpu[i] <= SYNTH_MAX_VCPU)) {
			gm_errf(err, errlen, "vcpu entry %d: must be 0..%d vCPUs per GPU", i + 1,
				SYNTH_MAX_VCPU);
			return -EINVAL;
		}
	if (!(*gsum > 0)) {
		gm_errf(err, errlen, "gpumix: the weights must not all be 0");
		return -EINVAL;
	}
	if (o->jobs < 1 || o->jobs > GM_TRACE_MAX_JOBS || !(o->dur_median > 0) ||
	    !(o->dur_median <= GM_TRACE_MAX_SECONDS) || !(o->dur_sigma >= 0) ||
	    !(o->dur_sigma <= 10) || !(o->dur_max > 0) || !(o->dur_max <= GM_TRACE_MAX_SECONDS) ||
	    !(o->interarrival >= 0) || !(o->interarrival <= GM_TRACE_MAX_SECONDS)) {
		gm_errf(err, errlen,
			"jobs, median, sigma, max or ia out of range (jobs 1..%u, median, max "
			"and ia 0..%.0f s, sigma 0..10)",
			GM_TRACE_MAX_JOBS, GM_TRACE_MAX_SECONDS);
		return -EINVAL;
	}
	*ia = o->interarrival;
	if (*ia > 0)
		return 0;
	/* Offered load = arrival rate x mean GPU-seconds per job / cluster GPUs. */
	mean_dur = o->dur_median * exp(o->dur_sigma * o->dur_sigma / 2);
	if (!(o->load > 0) || !o->cluster_gpus) {
		gm_errf(err, errlen, "load must be > 0 and gpus >= 1");
		return -EINVAL;
	}
	*ia = mean_gpus / *gsum * mean_dur / (o->load * (double)o->cluster_gpus);
	if (!(*ia > 0 && *ia <= GM_TRACE_MAX_SECONDS)) {
		gm_errf(err, errlen,
			"load, gpus, median and sigma give a mean interarrival of %g s, outside "
			"the accepted (0, %.0f] s: raise load or gpus, or lower median or sigma",
			*ia, GM_TRACE_MAX_SECONDS);
		return -EINVAL;
	}
	return 0;
}

/* gm_trace_synth with what is wrong in err (NULL: no message). */
static int synth(struct gm_trace **out, const struct gm_trace_synth_opts *o, char *err,
		 size_t errlen)
{
	struct gm_trace *t;
	double gsum, ia, now = 0;
	int rc;

	if ((rc = synth_check(o, &ia, &gsum, err, errlen)))
		return rc;
	if (!(t = calloc(1, sizeof(*t))))
		return -ENOMEM;
	if (!(t->jobs = malloc(o->jobs * sizeof(*t->jobs)))) {
		free(t);
		return -ENOMEM;
	}
	snprintf(t->format, sizeof(t->format), "synth");
	for (size_t i = 0; i < o->jobs; i++) {
		struct gm_rng r;
		struct gm_job *j = &t->jobs[i];
		gm_rng_init(&r, o->seed, GM_TRACE_STREAM, i, 0);
		double u = gm_rng_uniform(&r);
		now += -ia * log1p(-u); /* exponential interarrival */
		double x = gm_rng_uniform(&r) * gsum;
		int k = 0;
		while (k < o->gpu_k - 1 && x >= o->gpu_p[k]) {
			x -= o->gpu_p[k];
			k++;
		}
		/* Box-Muller normal for the lognormal duration. */
		double u1 = 1.0 - gm_rng_uniform(&r), u2 = gm_rng_uniform(&r);
		double z = sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
		double d = o->dur_median * exp(o->dur_sigma * z);
		if (d > o->dur_max)
			d = o->dur_max;
		if (d < 1)
			d = 1;
		j->submit = floor(now);
		j->duration = floor(d);
		j->gpus = o->gpu_n[k];
		j->vcpu = (float)(o->vcpu_per_gpu[gm_rng_below(&r, (uint64_t)o->vcpu_k)] * j->gpus);
		j->cls = GM_TRACE_CLASS_AUTO;
		j->line = 0;
	}
	t->n = o->jobs;
	if (!(now <= GM_TRACE_MAX_SECONDS)) {
		gm_errf(err, errlen,
			"the last of %zu jobs would be submitted at %g s, past the accepted span "
			"of %.0f s (100 years): lower jobs or ia, or raise load",
			o->jobs, now, GM_TRACE_MAX_SECONDS);
		gm_trace_destroy(t);
		return -EINVAL;
	}
	finish(t, "synth", NULL, 0); /* already sorted; starts time at 0 like the readers */
	*out = t;
	return 0;
}

int gm_trace_synth(struct gm_trace **out, const struct gm_trace_synth_opts *o)
{
	return synth(out, o, NULL, 0);
}

/*
 * The scalar keys of "synth:k=v" and their accepted ranges: a whole number for
 * the integer ones, and lo itself excluded where lo_open. A value outside is
 * refused with the range, never rounded or clamped.
 */
enum key_type { KEY_SIZE, KEY_U64, KEY_DOUBLE };
static const struct synth_key {
	const char *name;
	enum key_type type;
	size_t off;
	double lo, hi;
	bool lo_open;
	const char *range; /* lo..hi as the message gives it */
} synth_keys[] = {
    {"jobs", KEY_SIZE, offsetof(struct gm_trace_synth_opts, jobs), 1, GM_TRACE_MAX_JOBS, false,
     "a whole number 1..100000000"},
    {"seed", KEY_U64, offsetof(struct gm_trace_synth_opts, seed), 0, 18446744073709551615.0, false,
     "a whole number 0..18446744073709551615"},
    {"ia", KEY_DOUBLE, offsetof(struct gm_trace_synth_opts, interarrival), 0, GM_TRACE_MAX_SECONDS,
     true, "0 < ia <= 3155760000 s (100 years)"},
    {"load", KEY_DOUBLE, offsetof(struct gm_trace_synth_opts, load), 0, 1e6, true,
     "0 < load <= 1e6"},
    {"gpus", KEY_U64, offsetof(struct gm_trace_synth_opts, cluster_gpus), 1, 1e10, false,
     "a whole number 1..1e10"},
    {"median", KEY_DOUBLE, offsetof(struct gm_trace_synth_opts, dur_median), 0,
     GM_TRACE_MAX_SECONDS, true, "0 < median <= 3155760000 s (100 years)"},
    {"sigma", KEY_DOUBLE, offsetof(struct gm_trace_synth_opts, dur_sigma), 0, 10, false, "0..10"},
    {"max", KEY_DOUBLE, offsetof(struct gm_trace_synth_opts, dur_max), 0, GM_TRACE_MAX_SECONDS,
     true, "0 < max <= 3155760000 s (100 years)"},
};

/* Set one scalar key from text: 0, or -EBADMSG with the accepted range in err. */
static int set_key(struct gm_trace_synth_opts *o, const struct synth_key *k, const char *val,
		   const char *spec, char *err, size_t errlen)
{
	char *p = (char *)o + k->off, *end;
	double v;
	uint64_t u = 0;
	bool whole = k->type != KEY_DOUBLE;

	if (whole && val[0] >= '0' && val[0] <= '9' && strspn(val, "0123456789") == strlen(val)) {
		errno = 0;
		u = strtoull(val, &end, 10); /* all 64 bits, which a double cannot hold */
		v = (double)u;
		if (errno == ERANGE)
			goto bad;
	} else if (!num(val, &v) || (whole && (v != floor(v) || v >= 9007199254740992.0))) {
		goto bad;
	} else if (whole && v >= 0) {
		u = (uint64_t)v;
	}
	if (v < k->lo || v > k->hi || (k->lo_open && v == k->lo))
		goto bad;
	if (k->type == KEY_SIZE)
		*(size_t *)(void *)p = (size_t)u;
	else if (k->type == KEY_U64)
		*(uint64_t *)(void *)p = u;
	else
		*(double *)(void *)p = v;
	return 0;
bad:
	gm_errf(err, errlen, "%s: %s=%s: the accepted range is %s", spec, k->name, val, k->range);
	return -EBADMSG;
}

/* One list key (gpumix=1:70/8:30, vcpu=4/8): 0 or -EBADMSG with the range in err. */
static int set_list(struct gm_trace_synth_opts *o, const char *key, char *val, const char *spec,
		    char *err, size_t errlen)
{
	bool vcpu = !strcmp(key, "vcpu");
	char *save = NULL;
	int n = 0;

	for (char *it = strtok_r(val, "/", &save); it; it = strtok_r(NULL, "/", &save)) {
		double v, p;
		char *colon = strchr(it, ':');
		if (n == 8)
			goto bad;
		if (vcpu) {
			if (!num(it, &v) || v < 0 || v > SYNTH_MAX_VCPU)
				goto bad;
			o->vcpu_per_gpu[n++] = v;
			continue;
		}
		if (!colon)
			goto bad;
		*colon = 0;
		if (!num(it, &v) || !num(colon + 1, &p) || v < 1 || v > SYNTH_MAX_GPUS ||
		    v != floor(v) || p < 0 || p > SYNTH_MAX_WEIGHT)
			goto bad;
		o->gpu_n[n] = (uint32_t)v;
		o->gpu_p[n++] = p;
	}
	if (!n)
		goto bad;
	if (vcpu)
		o->vcpu_k = n;
	else
		o->gpu_k = n;
	return 0;
bad:
	gm_errf(err, errlen,
		vcpu ? "%s: vcpu: want 1..8 numbers 0..1024 (vCPUs per GPU) joined by '/', "
		       "e.g. vcpu=4/8"
		     : "%s: gpumix: want 1..8 GPUS:WEIGHT joined by '/' (GPUS a whole number "
		       "1..1000000, WEIGHT 0..1e9), e.g. gpumix=1:70/8:30",
		spec);
	return -EBADMSG;
}

/* Parse "synth:k=v,k=v". */
static int parse_synth(struct gm_trace_synth_opts *o, const char *spec, char *err, size_t errlen)
{
	char buf[512], *save = NULL;
	int rc;

	gm_trace_synth_defaults(o);
	o->interarrival = 0;
	if (strlen(spec) >= sizeof(buf)) {
		gm_errf(err, errlen, "%.64s...: spec too long (at most %zu characters)", spec,
			sizeof(buf) - 1);
		return -EBADMSG;
	}
	snprintf(buf, sizeof(buf), "%s", spec + 6);
	for (char *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(kv, '=');
		size_t i = 0;
		if (!eq)
			goto bad;
		*eq++ = 0;
		if (!strcmp(kv, "gpumix") || !strcmp(kv, "vcpu")) {
			if ((rc = set_list(o, kv, eq, spec, err, errlen)))
				return rc;
			continue;
		}
		while (i < sizeof(synth_keys) / sizeof(synth_keys[0]) &&
		       strcmp(kv, synth_keys[i].name))
			i++;
		if (i == sizeof(synth_keys) / sizeof(synth_keys[0]))
			goto bad;
		if ((rc = set_key(o, &synth_keys[i], eq, spec, err, errlen)))
			return rc;
	}
	return 0;
bad:
	gm_errf(err, errlen,
		"%s: bad synthetic trace spec (keys: jobs seed ia load gpus median "
		"sigma max gpumix=1:70/8:30 vcpu=4/8)",
		spec);
	return -EBADMSG;
}

int gm_trace_load(struct gm_trace **out, const char *spec, char *err, size_t errlen)
{
	struct gm_trace *t;
	int rc;

	if (!strncmp(spec, "synth:", 6) || !strcmp(spec, "synth")) {
		struct gm_trace_synth_opts o;
		char what[512];
		if ((rc = parse_synth(&o, spec[5] ? spec : "synth:", err, errlen)))
			return rc;
		if ((rc = synth(out, &o, what, sizeof(what))) == -EINVAL)
			gm_errf(err, errlen, "%s: %s", spec, what);
		else if (rc)
			gm_errf(err, errlen, "%s: cannot generate (%s)", spec, strerror(-rc));
		return rc == -EINVAL ? -EBADMSG : rc;
	}
	if (!(t = calloc(1, sizeof(*t))))
		return -ENOMEM;
	if ((rc = read_file(t, spec, err, errlen)) || (rc = finish(t, spec, err, errlen))) {
		gm_trace_destroy(t);
		return rc;
	}
	*out = t;
	return 0;
}

int gm_trace_write(const struct gm_trace *t, const char *path)
{
	FILE *f = fopen(path, "w");
	int rc = 0;
	if (!f)
		return -errno;
	fprintf(f, "# goldminer-trace v1\n");
	fprintf(f, "#submit_s\tduration_s\tgpus\tvcpu\tclass\n");
	for (size_t i = 0; i < t->n; i++) {
		const struct gm_job *j = &t->jobs[i];
		fprintf(f, "%.17g\t%.17g\t%u\t%.9g\t%d\n", j->submit, j->duration, j->gpus,
			(double)j->vcpu, j->cls);
	}
	if (fclose(f))
		rc = -errno;
	return rc;
}

void gm_trace_destroy(struct gm_trace *t)
{
	if (!t)
		return;
	free(t->jobs);
	free(t);
}
