/*
 * profile.c - `goldminer profile`: measure this machine's pre-processing rate per
 * vCPU with the real pipeline, and write it into a simulator profile table.
 *
 * The simulator (sim/) models a job's data rate as cpu_rate samples/s per vCPU of
 * data workers. That figure should come from the pipeline that runs, not from the
 * literature: this command runs the loader on a dataset with ONE worker for whole
 * epochs (so every sample processed is a sample delivered), takes the worker's CPU
 * time from getrusage(RUSAGE_CHILDREN) once it has been reaped, and reports
 * samples / CPU second. The consumer only releases, so the worker never waits on
 * it (its CPU time is the pipeline's, read + decode + augment + slot bookkeeping;
 * an idle wait costs no CPU). The rate replaces cpu_rate of the chosen classes in
 * a copy of the base profile (the built-in table, or --base FILE), with a source
 * naming the data, the pipeline, the CPU and the date; GPU rates are left as they
 * are (measuring them needs the model, in PyTorch).
 *
 * Why a command and not library code (it was core/measure.c): it is the one place
 * that joins the data plane (core/: loader, dataset, pipeline) to the simulator's
 * rate table (sim/profile.h), and only a client above both may include both. The
 * measurement itself is one loop over the public loader API plus getrusage of the
 * process's children, which is process-wide state a library must not read on its
 * caller's behalf; nothing in it is reusable library material.
 *
 * What it does not do: measure GPU-bound rates, or several worker counts (the
 * per-vCPU rate is what the policy scales; bench --workers N shows the scaling).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "cmd.h"
#include "goldminer/dataset.h"
#include "goldminer/limits.h"
#include "goldminer/loader.h"
#include "goldminer/pipeline.h"
#include "goldminer/profile.h"

#define CMD "profile"

struct run {
	const char *data, *classes, *base, *outp, *spec;
	uint64_t images, batch;
	struct gm_profile prof;
	int idx[GM_PROFILE_MAX], nidx; /* the classes to update */
	/* the measurement */
	uint32_t epochs;
	struct gm_loader_stats st;
	double cpu, wall, rate;
};

enum { O_CLASS, O_BASE, O_OUT, O_IMAGES, O_PIPELINE, O_BATCH, O_HELP, O_N };

static const struct cmd_opt opts[O_N] = {
    [O_CLASS] = {"class", "NAME,...", 0,
		 "classes to update (default resnet50,cv-light: the ImageNet JPEG "
		 "pipeline); each must exist in the base profile, or be NEW=BASE: a new "
		 "class NEW with BASE's gpu_rate (an assumption) and share 0"},
    [O_BASE] =
	{"base", "FILE", 0,
	 "profile TSV to start from (default: the built-in table, traces/profile-pytorch.tsv)"},
    [O_OUT] = {"out", "FILE", 0, "where to write the profile (default: stdout)"},
    [O_IMAGES] = {"images", "N", 0, "at least this many samples, in whole epochs (default 2000)"},
    [O_PIPELINE] = {"pipeline", "SPEC", 0,
		    "pipeline spec (default: the train transform, uint8 output)"},
    [O_BATCH] = {"batch", "B", 0, "samples per batch (default 64)"},
    [O_HELP] = {"help", NULL, 'h', "this help"},
};

static const char synopsis[] =
    "goldminer profile DATA [--class NAME|NEW=BASE[,...]] [--base FILE] [--out FILE]\n"
    "                         [--images N] [--pipeline SPEC] [--batch B]\n"
    "  Measure the pre-processing rate per vCPU (1 worker, CPU time) of the\n"
    "  pipeline on DATA and write a simulator profile (for goldminer sim\n"
    "  --profile) whose classes NAME get it as cpu_rate.";

static double tv_s(struct timeval t)
{
	return (double)t.tv_sec + (double)t.tv_usec * 1e-6;
}

static void cpu_model(char *buf, size_t len)
{
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[512];
	snprintf(buf, len, "unknown CPU");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "model name", 10)) {
			char *v = strchr(line, ':');
			if (v) {
				v += 1 + (v[1] == ' ');
				v[strcspn(v, "\n")] = 0;
				snprintf(buf, len, "%s", v);
			}
			break;
		}
	fclose(f);
}

/* argv into *r. -1 to run, else the exit status (0 after --help, 2 usage). */
static int profile_options(struct run *r, int argc, char **argv)
{
	const char *val[O_N];
	char *pos[argc > 0 ? argc : 1];
	struct cmd_args a = {val, pos, 0};

	if (cmd_parse(CMD, opts, O_N, argc, argv, &a))
		return 2;
	if (val[O_HELP]) {
		cmd_usage(stdout, synopsis, opts, O_N);
		return 0;
	}
	r->classes = val[O_CLASS] ? val[O_CLASS] : "resnet50,cv-light";
	r->base = val[O_BASE];
	r->outp = val[O_OUT];
	r->spec = val[O_PIPELINE];
	r->images = 2000;
	r->batch = 64;
	if ((val[O_IMAGES] && cmd_u64(CMD, "--images", val[O_IMAGES], 1, 100000000, &r->images)) ||
	    (val[O_BATCH] && cmd_u64(CMD, "--batch", val[O_BATCH], 1, GM_MAX_BATCH, &r->batch)))
		return 2;
	if (a.npos != 1) {
		cmd_err(CMD, NULL, NULL, "expected one DATA directory, not %d arguments", a.npos);
		cmd_usage(stderr, synopsis, opts, O_N);
		return 2;
	}
	r->data = a.pos[0];
	return -1;
}

/*
 * --class NEW=BASE: a row NEW after the others, a copy of BASE whose gpu_rate is
 * an assumption (this pipeline's model was not measured on a GPU) and whose share
 * is 0 (never drawn for a trace job without a class: the mix stays the base's).
 * Its index, or -1 after a message.
 */
static int profile_new_class(struct run *r, const char *name, const char *base)
{
	int b = gm_profile_find(&r->prof, base);
	if (!*name || strlen(name) >= sizeof(r->prof.c[0].name) || strpbrk(name, "\t\n\r ") ||
	    gm_profile_find(&r->prof, name) >= 0) {
		char what[160];
		snprintf(what, sizeof(what), "--class %.64s=%.64s", name, base);
		cmd_err(CMD, what, NULL,
			"the new name must be 1..%zu characters without blanks and not already "
			"a class",
			sizeof(r->prof.c[0].name) - 1);
		return -1;
	}
	if (b < 0 || r->prof.n >= GM_PROFILE_MAX) {
		char what[160];
		snprintf(what, sizeof(what), "--class %.64s=%.64s", name, base);
		cmd_err(CMD, what, NULL, "%s",
			b < 0 ? "no such base class in the profile" : "the profile is full");
		return -1;
	}
	struct gm_profile_class *c = &r->prof.c[r->prof.n];
	char src[sizeof(c->gpu_source)];
	*c = r->prof.c[b];
	memcpy(src, c->gpu_source, sizeof(src));
	snprintf(c->name, sizeof(c->name), "%s", name);
	c->share = 0;
	snprintf(c->gpu_source, sizeof(c->gpu_source),
		 "assumption: %s's gpu_rate (not measured at this pipeline); its source: %.400s",
		 base, src);
	return r->prof.n++;
}

/* The base table and the classes to update, checked before any work. 0, or the
 * exit status after a message. */
static int profile_classes(struct run *r)
{
	char err[1024];
	if (r->base) {
		if (gm_profile_load(&r->prof, r->base, err, sizeof(err))) {
			cmd_err(CMD, NULL, NULL, "%s", err);
			return 1;
		}
	} else {
		gm_profile_default(&r->prof);
	}
	char *list = strdup(r->classes), *save = NULL;
	if (!list) {
		cmd_err(CMD, NULL, NULL, "out of memory");
		return 1;
	}
	r->nidx = 0;
	for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(t, '=');
		int k;
		if (eq) {
			*eq = 0;
			k = profile_new_class(r, t, eq + 1);
			if (k < 0) {
				free(list);
				return 2;
			}
		} else {
			k = gm_profile_find(&r->prof, t);
		}
		if (k < 0) {
			cmd_err(CMD, "--class", NULL, "class '%s' is not in the %s profile", t,
				r->base ? r->base : "built-in");
			free(list);
			return 2;
		}
		if (r->nidx < GM_PROFILE_MAX)
			r->idx[r->nidx++] = k;
	}
	free(list);
	if (!r->nidx) {
		cmd_err(CMD, "--class", NULL, "names no class");
		return 2;
	}
	return 0;
}

/* Run one worker over whole epochs and take its CPU time. 0, or 1 after a message. */
static int profile_measure(struct run *r)
{
	char err[1024];
	struct gm_loader_opts o;
	gm_loader_opts_default(&o);
	o.root = r->data;
	o.pipeline = r->spec;
	o.workers = 1;
	o.batch_size = (uint32_t)r->batch;
	o.no_pin = true;
	/* whole epochs: the index alone gives the dataset size (no workers started) */
	struct gm_dataset *ds;
	if (gm_dataset_open(&ds, r->data, err, sizeof(err))) {
		cmd_err(CMD, NULL, NULL, "%s", err);
		return 1;
	}
	uint32_t count = gm_dataset_count(ds);
	gm_dataset_close(ds);
	r->epochs = (uint32_t)((r->images + count - 1) / count);
	o.epochs = r->epochs;

	struct gm_loader *l;
	struct rusage r0, r1;
	struct timespec w0, w1;
	getrusage(RUSAGE_CHILDREN, &r0);
	clock_gettime(CLOCK_MONOTONIC, &w0);
	if (gm_loader_open(&l, &o, err, sizeof(err))) {
		cmd_err(CMD, NULL, NULL, "%s", err);
		return 1;
	}
	struct gm_batch b;
	int rc;
	while ((rc = gm_loader_next(l, &b)) >= 0) {
		if (rc == GM_LOADER_END)
			break;
		if (rc == 0)
			gm_loader_release(l, &b);
	}
	if (rc < 0) {
		cmd_err(CMD, NULL, NULL, "%s", gm_loader_errmsg(l));
		gm_loader_close(l);
		return 1;
	}
	gm_loader_stats(l, &r->st);
	gm_loader_close(l); /* reaps the worker: its CPU time is in RUSAGE_CHILDREN now */
	clock_gettime(CLOCK_MONOTONIC, &w1);
	getrusage(RUSAGE_CHILDREN, &r1);
	r->cpu = tv_s(r1.ru_utime) - tv_s(r0.ru_utime) + tv_s(r1.ru_stime) - tv_s(r0.ru_stime);
	r->wall = (double)(w1.tv_sec - w0.tv_sec) + (double)(w1.tv_nsec - w0.tv_nsec) * 1e-9;
	if (!(r->cpu > 0) || !r->st.samples) {
		cmd_err(CMD, r->data, "give more --images", "no worker CPU time was measured");
		return 1;
	}
	r->rate = (double)r->st.samples / r->cpu;
	return 0;
}

/* The measured rate into the chosen classes, with a source naming how. */
static void profile_update(struct run *r, const char *day)
{
	char model[160], pipe[300] = "the default train transform, uint8 HWC";
	double n = (double)r->st.samples;
	cpu_model(model, sizeof(model));
	if (r->spec) {
		struct gm_pipeline *p;
		if (!gm_pipeline_parse(r->spec, &p, NULL, 0)) {
			snprintf(pipe, sizeof(pipe), "'%s'", gm_pipeline_canonical(p));
			gm_pipeline_free(p);
		}
	}
	for (int k = 0; k < r->nidx; k++) {
		struct gm_profile_class *pc = &r->prof.c[r->idx[k]];
		pc->cpu_rate = r->rate;
		snprintf(pc->cpu_source, sizeof(pc->cpu_source),
			 "measured: goldminer profile %s, %s: %llu samples (%u of %u), %s, 1 "
			 "worker on %s: %.0f us CPU per sample (read %.0f, decode %.0f, augment "
			 "%.0f us)",
			 day, r->data, (unsigned long long)r->st.samples, r->epochs,
			 r->st.dataset_size, pipe, model, 1e6 / r->rate,
			 (double)r->st.read_ns / 1e3 / n, (double)r->st.decode_ns / 1e3 / n,
			 (double)r->st.augment_ns / 1e3 / n);
	}
}

/* The summary on stderr and the table to --out or stdout. 0, or 1 after a message. */
static int profile_write(struct run *r, const char *day)
{
	char err[1024], comment[512], names[GM_PROFILE_MAX * 40] = "";
	size_t at = 0;
	for (int k = 0; k < r->nidx && at < sizeof(names); k++)
		at += (size_t)snprintf(names + at, sizeof(names) - at, " %s",
				       r->prof.c[r->idx[k]].name);
	cmd_note(CMD,
		 "%s: %llu samples in %.2f s wall, worker CPU %.2f s: %.1f samples/s per vCPU "
		 "(%.0f us each); written to class%s%s",
		 r->data, (unsigned long long)r->st.samples, r->wall, r->cpu, r->rate,
		 1e6 / r->rate, r->nidx > 1 ? "es" : "", names);
	snprintf(comment, sizeof(comment),
		 "Written by goldminer profile %s from the %s table; cpu_rate of the measured\n"
		 "classes is this machine's; every other figure is the base table's.\n"
		 "vCPUs per GPU needed to keep the GPU busy = gpu_rate / cpu_rate.",
		 day, r->base ? r->base : "built-in");
	if (gm_profile_write(&r->prof, r->outp ? r->outp : "/dev/stdout", comment, err,
			     sizeof(err))) {
		cmd_err(CMD, NULL, NULL, "%s", err);
		return 1;
	}
	return 0;
}

int gm_cmd_profile(int argc, char **argv)
{
	struct run *r = calloc(1, sizeof(*r)); /* the profile table is 34 KiB: off the stack */
	char day[32];
	int rc;
	if (!r) {
		cmd_err(CMD, NULL, NULL, "out of memory");
		return 1;
	}
	rc = profile_options(r, argc, argv);
	if (rc >= 0) { /* --help (0) or a usage error (2): nothing to measure */
		free(r);
		return rc;
	}
	rc = profile_classes(r);
	if (rc == 0)
		rc = profile_measure(r);
	if (rc == 0) {
		time_t now = time(NULL);
		struct tm tm;
		strftime(day, sizeof(day), "%Y-%m-%d", gmtime_r(&now, &tm));
		profile_update(r, day);
		rc = profile_write(r, day);
	}
	free(r);
	return rc;
}
