/*
 * profile.h - the model-class profile table of the simulator: per class, the
 * GPU-bound training rate (samples/s per GPU) and the pre-processing rate
 * (samples/s per vCPU), the share of trace jobs drawn into the class, and the
 * source of each rate. The table lives in traces/profile-pytorch.tsv; a built-in copy of
 * it is used when no --profile is given (test_trace checks that they agree).
 */
#ifndef GOLDMINER_PROFILE_H
#define GOLDMINER_PROFILE_H

#include <stddef.h>

#define GM_PROFILE_MAX 32

/*
 * Accepted range of a rate (samples/s per GPU or per vCPU) and of a share: wide
 * enough for any model, narrow enough that a job's slowdown under a small CPU share
 * (at most its GPU rate over one vCPU's rate) stays finite in a double.
 */
#define GM_PROFILE_MIN_RATE 1e-6
#define GM_PROFILE_MAX_RATE 1e12

struct gm_profile_class {
	char name[32];
	double gpu_rate;      /* samples/s per GPU when GPU-bound, > 0 */
	double cpu_rate;      /* pre-processing samples/s per vCPU, > 0 */
	double share;	      /* weight of the class in the seeded draw, >= 0 */
	char gpu_source[512]; /* where gpu_rate comes from */
	char cpu_source[512]; /* where cpu_rate comes from */
	/*
	 * GB of memory per GPU the class's job asks for at its ideal (Synergy's second
	 * resource; only synergy-tune reads it); 0 = no demand. The optional seventh
	 * column of a profile TSV.
	 */
	double mem_per_gpu;
	/*
	 * vCPUs per GPU the class's job asks for under synergy-tune's --tune-asks
	 * (Synergy's profiled `cpus`); 0 = none. The optional eighth column.
	 */
	double ask_per_gpu;
};

struct gm_profile {
	int n;
	struct gm_profile_class c[GM_PROFILE_MAX];
};

/* Fill p with the built-in table (the contents of traces/profile-pytorch.tsv). */
void gm_profile_default(struct gm_profile *p);

/*
 * Read a profile TSV (lines "class gpu_rate cpu_rate share gpu_source cpu_source
 * [mem_gb_per_gpu]", tab-separated, '#' comments; a source may be empty but its
 * tab must be there).
 * Returns 0, -errno when unreadable, -EBADMSG with "FILE:LINE: what" in err.
 */
int gm_profile_load(struct gm_profile *p, const char *path, char *err, size_t errlen);

/*
 * Write p as a profile TSV that gm_profile_load reads back (comment: optional
 * header text, one '#' line per line of it). 0, or -errno with "PATH: ..." in err.
 */
int gm_profile_write(const struct gm_profile *p, const char *path, const char *comment, char *err,
		     size_t errlen);

/* Index of a class by name, or -1. */
int gm_profile_find(const struct gm_profile *p, const char *name);

#endif
