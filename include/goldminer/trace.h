/*
 * trace.h - job traces for the cluster simulator: readers for the public traces,
 * the project's own TSV format and its seeded synthetic generator.
 *
 * A trace is plain data (an array of jobs sorted by submit time), so the structs
 * are deliberately not opaque: the simulator walks a million of them. Formats and
 * how each public column is mapped are documented in traces/README.md.
 */
#ifndef GOLDMINER_TRACE_H
#define GOLDMINER_TRACE_H

#include <stddef.h>
#include <stdint.h>

#define GM_TRACE_CLASS_AUTO (-1) /* model class drawn by the simulator (seeded) */

/*
 * Accepted ranges, checked by every reader and the generator. 100 years of
 * simulated time (365.25-day years) bounds a duration and the span of submits, so
 * a run's clock stays where a double counts seconds exactly and its time series
 * stays finite; 100,000,000 jobs keeps job ids 32-bit with room for the
 * simulator's own events (the largest public trace has ~100,000 jobs).
 */
#define GM_TRACE_MAX_SECONDS 3155760000.0 /* 100 years */
#define GM_TRACE_MAX_JOBS    100000000u

struct gm_job {
	double submit;	 /* s since the first submit of the trace */
	double duration; /* s of running time observed under the trace's own CPUs */
	float vcpu;	 /* requested vCPUs in total; 0 = unknown (filled by the sim) */
	uint32_t gpus;	 /* whole GPUs, >= 1 */
	int32_t cls;	 /* profile class index, or GM_TRACE_CLASS_AUTO */
	uint32_t line;	 /* source line (0 for generated jobs) */
};

struct gm_trace {
	struct gm_job *jobs; /* sorted by (submit, source order) */
	size_t n;
	/* What the reader left out or changed, for the summary and README. */
	size_t skipped_cpu_only;  /* openb pods with no GPU */
	size_t skipped_never_ran; /* openb pods never scheduled (Pending) */
	size_t skipped_bad_time;  /* deletion <= scheduled, or duration <= 0 */
	size_t skipped_censored;  /* openb pods still Running at the trace's end */
	size_t rounded_fraction;  /* shared (fractional) GPU pods run as one GPU */
	char format[16];	  /* "openb", "philly", "gm", "synth" */
};

/* Options of the synthetic generator; gm_trace_synth_defaults() fills them. */
struct gm_trace_synth_opts {
	uint64_t seed;
	size_t jobs;
	double interarrival;   /* mean s between submits (Poisson); 0 = from load */
	double load;	       /* offered GPU load used when interarrival == 0 */
	uint64_t cluster_gpus; /* GPUs the load refers to */
	double dur_median;     /* lognormal duration: median s */
	double dur_sigma;      /* ... and sigma of log(duration) */
	double dur_max;	       /* durations are capped here (s) */
	uint32_t gpu_n[8];     /* GPU-count mix: values ... */
	double gpu_p[8];       /* ... and their weights */
	int gpu_k;	       /* entries used */
	double vcpu_per_gpu[8];
	int vcpu_k;
};

void gm_trace_synth_defaults(struct gm_trace_synth_opts *o);

/*
 * Load a trace named by spec:
 *   synth:key=value,...   the generator (keys: jobs seed ia load gpus median sigma
 *                         max gpumix=1:70/2:10/4:10/8:10 vcpu=4/8/12)
 *   PATH                  a file; its header picks the reader: openb pod list
 *                         ("name,cpu_milli,..."), Philly ("timestamp,duration,...")
 *                         or the project's TSV ("# goldminer-trace v1").
 * Numbers must lie in their accepted ranges (durations and the span of submits at
 * most GM_TRACE_MAX_SECONDS, at most GM_TRACE_MAX_JOBS jobs, synth keys as in
 * traces/README.md); the message names the range.
 * Returns 0 and *out, -ENOENT/-errno when the file cannot be read, -EBADMSG for a
 * malformed row or spec, -ENOMEM. On error err gets "FILE:LINE: what is wrong".
 */
int gm_trace_load(struct gm_trace **out, const char *spec, char *err, size_t errlen);

/*
 * Generate a synthetic trace (no I/O). Returns 0, -EINVAL for a parameter out of
 * the ranges in traces/README.md (or one whose derived interarrival or last submit
 * passes GM_TRACE_MAX_SECONDS), -ENOMEM. gm_trace_load says which parameter.
 */
int gm_trace_synth(struct gm_trace **out, const struct gm_trace_synth_opts *o);

/* Write a trace in the project's TSV format. Returns 0 or -errno. */
int gm_trace_write(const struct gm_trace *t, const char *path);

/* Free a trace; NULL does nothing. */
void gm_trace_destroy(struct gm_trace *t);

#endif
