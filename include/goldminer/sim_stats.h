/*
 * sim_stats.h - the simulator's figures over several seeds: mean and a 95%
 * confidence interval (Student t) of every headline figure of a run
 * (gm_sim_summary), for `goldminer sim --seeds N`.
 *
 * The runs differ only in the seed of the model-class draw, so the interval says
 * how much a figure hangs on which jobs got which class, not on anything else in
 * the model. Pure functions: no I/O, no global state, thread-safe.
 */
#ifndef GOLDMINER_SIM_STATS_H
#define GOLDMINER_SIM_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "goldminer/sim.h"

/* A mean and the half-width of its 95% confidence interval: mean +- half. */
struct gm_sim_interval {
	double mean, half;
};

/*
 * The 0.975 quantile of Student's t with df degrees of freedom (df >= 1): a table
 * for df <= 30, a Cornish-Fisher expansion beyond (within 1e-6 of the table's
 * values at 30, 40, 60, 120). Returns NAN for df 0.
 */
double gm_sim_t975(size_t df);

/*
 * Mean of x[0..n) and the half-width t975(n-1) * s / sqrt(n) with s the sample
 * standard deviation. n >= 2: 0 and *out; n == 1: 0, half NAN (no interval from
 * one run); n == 0: -EINVAL.
 */
int gm_sim_interval(const double *x, size_t n, struct gm_sim_interval *out);

/*
 * One JSON object (no newline) for n runs of one policy with seeds seed0 ..
 * seed0 + n - 1: "policy", "seeds", "seed", "jobs" and "unplaceable" of the first
 * run, then for every headline figure (avg/p50/p95/p99 JCT, avg queue, makespan,
 * offered load, GPU util/busy/alloc, CPU util/alloc) "NAME":mean and
 * "NAME_ci95":half-width (null for n == 1). The mean stays under the figure's own
 * name, so a reader of one run's summary reads the mean of several the same way.
 * Returns snprintf's count, -EINVAL for n == 0 or -ENOMEM.
 */
int gm_sim_seeds_json(const struct gm_sim_summary *runs, size_t n, unsigned long long seed0,
		      char *buf, size_t len);

/*
 * The same as one text line (no newline): "POLICY, mean +- 95% CI ... over N
 * seeds: NAME mean +- half, ..." for every figure. Returns as gm_sim_seeds_json.
 */
int gm_sim_seeds_text(const struct gm_sim_summary *runs, size_t n, char *buf, size_t len);

/*
 * The paired comparison of two policies over the same seeds (a seed draws the same
 * model class for every job under every policy): per seed the ratio a_i / b_i,
 * their median, smallest and largest, and a 95% percentile-bootstrap interval of
 * the median. separated: the interval lies wholly above or below 1.
 */
struct gm_sim_ratio {
	size_t n;
	double median, lo, hi, min, max;
	int separated;
};

/*
 * Fill *out from a[0..n) and b[0..n) (figures of two policies, index = seed) with
 * `resamples` bootstrap draws keyed by `seed`: the same inputs give the same
 * interval. 0; -EINVAL for n or resamples 0 or a value not finite and > 0;
 * -ENOMEM.
 */
int gm_sim_paired_ratio(const double *a, const double *b, size_t n, uint64_t seed, size_t resamples,
			struct gm_sim_ratio *out);

#endif
