/*
 * stats.c - mean and 95% confidence interval of the simulator's headline figures
 * over seeds, and the paired per-seed ratio of two policies with its bootstrap
 * interval (sim_stats.h).
 *
 * The figures are one table (name, field, unit, printf precision), so the JSON and
 * text forms list the same ones in the same order and a new figure is one row.
 * The interval is the textbook one for a mean of n independent runs: t(0.975,
 * n-1) s / sqrt(n). The seeds' runs are independent draws of the class
 * assignment, which is what the interval covers; it does not cover the model's
 * own assumptions (the profile, the remote cost).
 */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "goldminer/rng.h"
#include "goldminer/sim_stats.h"

#define STREAM_BOOT 0x424f4f54ull /* "BOOT": the bootstrap's resampling draws */

/* t(0.975, df) for df = 1..30 (standard tables, 6 decimals). */
static const double t975[31] = {
    NAN,      12.706205, 4.302653, 3.182446, 2.776445, 2.570582, 2.446912, 2.364624,
    2.306004, 2.262157,	 2.228139, 2.200985, 2.178813, 2.160369, 2.144787, 2.131450,
    2.119905, 2.109816,	 2.100922, 2.093024, 2.085963, 2.079614, 2.073873, 2.068658,
    2.063899, 2.059539,	 2.055529, 2.051831, 2.048407, 2.045230, 2.042272,
};

double gm_sim_t975(size_t df)
{
	if (df <= 30)
		return t975[df];
	/* Cornish-Fisher expansion of t around the normal quantile z, to 1/df^3. */
	double z = 1.959963984540054, n = (double)df, z2 = z * z;
	return z + z * (z2 + 1) / (4 * n) + z * ((5 * z2 + 16) * z2 + 3) / (96 * n * n) +
	       z * (((3 * z2 + 19) * z2 + 17) * z2 - 15) / (384 * n * n * n);
}

int gm_sim_interval(const double *x, size_t n, struct gm_sim_interval *out)
{
	double sum = 0, ss = 0;

	if (!n)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		sum += x[i];
	out->mean = sum / (double)n;
	if (n == 1) {
		out->half = NAN;
		return 0;
	}
	for (size_t i = 0; i < n; i++)
		ss += (x[i] - out->mean) * (x[i] - out->mean);
	out->half = gm_sim_t975(n - 1) * sqrt(ss / (double)(n - 1)) / sqrt((double)n);
	return 0;
}

/* The headline figures: JSON name, field, decimals (as gm_sim_summary_json prints). */
static const struct figure {
	const char *name;
	size_t off;
	int prec;
} figures[] = {
    {"avg_jct", offsetof(struct gm_sim_summary, avg_jct), 1},
    {"p50_jct", offsetof(struct gm_sim_summary, p50_jct), 1},
    {"p95_jct", offsetof(struct gm_sim_summary, p95_jct), 1},
    {"p99_jct", offsetof(struct gm_sim_summary, p99_jct), 1},
    {"avg_queue", offsetof(struct gm_sim_summary, avg_queue), 1},
    {"makespan", offsetof(struct gm_sim_summary, makespan), 1},
    {"offered_load", offsetof(struct gm_sim_summary, offered_load), 4},
    {"gpu_util", offsetof(struct gm_sim_summary, gpu_util), 4},
    {"gpu_busy", offsetof(struct gm_sim_summary, gpu_busy), 4},
    {"gpu_alloc", offsetof(struct gm_sim_summary, gpu_alloc), 4},
    {"cpu_util", offsetof(struct gm_sim_summary, cpu_util), 4},
    {"cpu_alloc", offsetof(struct gm_sim_summary, cpu_alloc), 4},
};
#define NFIG (sizeof(figures) / sizeof(figures[0]))

/* The interval of every figure over the runs: 0, -EINVAL (n == 0) or -ENOMEM. */
static int intervals(const struct gm_sim_summary *runs, size_t n, struct gm_sim_interval *iv)
{
	double *x;

	if (!n)
		return -EINVAL;
	if (!(x = malloc(n * sizeof(double))))
		return -ENOMEM;
	for (size_t f = 0; f < NFIG; f++) {
		for (size_t i = 0; i < n; i++)
			x[i] = *(const double *)(const void *)((const char *)&runs[i] +
							       figures[f].off);
		gm_sim_interval(x, n, &iv[f]);
	}
	free(x);
	return 0;
}

/* Append to buf at *k like snprintf (counting on past len, as snprintf does). */
__attribute__((format(printf, 4, 5))) static void put(char *buf, size_t len, size_t *k,
						      const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = vsnprintf(*k < len ? buf + *k : NULL, *k < len ? len - *k : 0, fmt, ap);
	va_end(ap);
	if (r > 0)
		*k += (size_t)r;
}

int gm_sim_seeds_json(const struct gm_sim_summary *runs, size_t n, unsigned long long seed0,
		      char *buf, size_t len)
{
	struct gm_sim_interval iv[NFIG];
	size_t k = 0;
	int rc;

	if ((rc = intervals(runs, n, iv)))
		return rc;
	put(buf, len, &k,
	    "{\"policy\":\"%s\",\"seeds\":%zu,\"seed\":%llu,\"jobs\":%zu,"
	    "\"unplaceable\":%zu",
	    runs[0].policy, n, seed0, runs[0].jobs, runs[0].unplaceable);
	for (size_t f = 0; f < NFIG; f++) {
		const struct figure *fg = &figures[f];
		put(buf, len, &k, ",\"%s\":%.*f,\"%s_ci95\":", fg->name, fg->prec, iv[f].mean,
		    fg->name);
		if (isnan(iv[f].half))
			put(buf, len, &k, "null");
		else
			put(buf, len, &k, "%.*f", fg->prec, iv[f].half);
	}
	put(buf, len, &k, "}");
	return (int)k;
}

int gm_sim_seeds_text(const struct gm_sim_summary *runs, size_t n, char *buf, size_t len)
{
	struct gm_sim_interval iv[NFIG];
	size_t k = 0;
	int rc;

	if ((rc = intervals(runs, n, iv)))
		return rc;
	put(buf, len, &k, "%s, mean +- 95%% CI (Student t) over %zu seeds:", runs[0].policy, n);
	for (size_t f = 0; f < NFIG; f++)
		put(buf, len, &k, "%s %s %.*f +- %.*f", f ? "," : "", figures[f].name,
		    figures[f].prec, iv[f].mean, figures[f].prec, iv[f].half);
	return (int)k;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Median of v[0..n), n > 0; sorts v. Even n: the mean of the two middle values. */
static double median_of(double *v, size_t n)
{
	qsort(v, n, sizeof(double), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/*
 * Per seed i the ratio r_i = a_i / b_i; their median; and the percentile bootstrap
 * of that median: `resamples` times, n of the r_i drawn with replacement (gm_rng,
 * keyed by seed and the resample's number), each resample's median; the interval
 * is the 2.5th and 97.5th percentiles of those medians (order statistics
 * floor(0.025 B) and ceil(0.975 B) - 1, 0-based).
 */
int gm_sim_paired_ratio(const double *a, const double *b, size_t n, uint64_t seed, size_t resamples,
			struct gm_sim_ratio *out)
{
	double *r = NULL, *m = NULL, *tmp = NULL;
	int rc = -EINVAL;

	if (!n || !resamples)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (!(a[i] > 0) || !(b[i] > 0) || !isfinite(a[i]) || !isfinite(b[i]))
			return -EINVAL;
	rc = -ENOMEM;
	if (!(r = malloc(n * sizeof(double))) || !(tmp = malloc(n * sizeof(double))) ||
	    !(m = malloc(resamples * sizeof(double))))
		goto out_free;
	for (size_t i = 0; i < n; i++)
		r[i] = a[i] / b[i];
	for (size_t k = 0; k < resamples; k++) {
		struct gm_rng g;
		gm_rng_init(&g, seed, STREAM_BOOT, k, n);
		for (size_t i = 0; i < n; i++)
			tmp[i] = r[gm_rng_below(&g, n)];
		m[k] = median_of(tmp, n);
	}
	qsort(m, resamples, sizeof(double), cmp_double);
	out->n = n;
	out->lo = m[(size_t)floor(0.025 * (double)resamples)];
	out->hi = m[(size_t)ceil(0.975 * (double)resamples) - 1];
	memcpy(tmp, r, n * sizeof(double));
	out->median = median_of(tmp, n);
	out->min = tmp[0];
	out->max = tmp[n - 1];
	out->separated = out->lo > 1 || out->hi < 1;
	rc = 0;
out_free:
	free(m);
	free(tmp);
	free(r);
	return rc;
}
