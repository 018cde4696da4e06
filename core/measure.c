/*
 * measure.c - `goldminer profile`: measure this machine's pre-processing rate per
 * vCPU with the real pipeline, and write it into a simulator profile table.
 *
 * The simulator (sim/) models a job's data rate as cpu_rate samples/s per vCPU of
 * data workers. That figure should come from the pipeline that runs, not from the
 * literature: this command runs the loader on a dataset with ONE worker for whole
 * epochs (so every sample processed is a sample delivered), takes the worker's CPU
 * time from getrusage(RUSAGE_CHILDREN) once it has been reaped, and reports
 * samples / CPU second. The consumer only hashes nothing and releases, so the
 * worker never waits on it (its CPU time is the pipeline's, read + decode + augment
 * + slot bookkeeping; an idle wait costs no CPU). The rate replaces cpu_rate of
 * the chosen classes in a copy of the base profile (the built-in table, or --base
 * FILE), with a source naming the data, the pipeline, the CPU and the date; GPU
 * rates are left as they are (measuring them needs the model, in PyTorch).
 *
 * What it does not do: measure GPU-bound rates, or several worker counts (the
 * per-vCPU rate is what the policy scales; bench --workers N shows the scaling).
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "goldminer/cli.h"
#include "goldminer/dataset.h"
#include "goldminer/loader.h"
#include "goldminer/pipeline.h"
#include "goldminer/profile.h"

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

static void profile_usage(FILE *f)
{
	fprintf(f,
		"usage: goldminer profile DATA [--class NAME[,NAME...]] [--base FILE] [--out FILE]\n"
		"                         [--images N] [--pipeline SPEC] [--batch B]\n"
		"  Measure the pre-processing rate per vCPU (1 worker, CPU time) of the\n"
		"  pipeline on DATA and write a simulator profile (for goldminer sim\n"
		"  --profile) whose classes NAME get it as cpu_rate.\n"
		"  --class    classes to update (default resnet50,cv-light: the ImageNet JPEG\n"
		"             pipeline); each must exist in the base profile\n"
		"  --base     profile TSV to start from (default: the built-in table,\n"
		"             traces/profile.tsv)\n"
		"  --out      where to write the profile (default: stdout)\n"
		"  --images   at least this many samples, in whole epochs (default 2000)\n"
		"  --pipeline pipeline spec (default: the train transform, uint8 output)\n");
}

int gm_cli_profile(int argc, char **argv)
{
	static const struct option lo[] = {{"class", required_argument, NULL, 'c'},
					   {"base", required_argument, NULL, 'b'},
					   {"out", required_argument, NULL, 'o'},
					   {"images", required_argument, NULL, 'n'},
					   {"pipeline", required_argument, NULL, 'p'},
					   {"batch", required_argument, NULL, 'B'},
					   {"help", no_argument, NULL, 'h'},
					   {NULL, 0, NULL, 0}};
	const char *classes = "resnet50,cv-light", *base = NULL, *outp = NULL, *spec = NULL;
	unsigned long images = 2000, batch = 64;
	char err[1024], *end;
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case 'c':
			classes = optarg;
			break;
		case 'b':
			base = optarg;
			break;
		case 'o':
			outp = optarg;
			break;
		case 'p':
			spec = optarg;
			break;
		case 'n':
		case 'B':
			errno = 0;
			unsigned long v = strtoul(optarg, &end, 10);
			if (errno || *end || !v || v > (c == 'n' ? 100000000ul : 65536ul) ||
			    optarg[0] == '-') {
				fprintf(stderr, "goldminer profile: --%s wants a positive number, not "
						"'%s'\n",
					c == 'n' ? "images" : "batch", optarg);
				return 2;
			}
			*(c == 'n' ? &images : &batch) = v;
			break;
		case 'h':
			profile_usage(stdout);
			return 0;
		default:
			profile_usage(stderr);
			return 2;
		}
	}
	if (argc - optind != 1) {
		profile_usage(stderr);
		return 2;
	}
	const char *data = argv[optind];

	/* the base table and the classes to update, checked before any work */
	struct gm_profile prof;
	if (base) {
		if (gm_profile_load(&prof, base, err, sizeof(err))) {
			fprintf(stderr, "goldminer profile: %s\n", err);
			return 1;
		}
	} else {
		gm_profile_default(&prof);
	}
	int idx[GM_PROFILE_MAX], nidx = 0;
	char *list = strdup(classes), *save = NULL;
	if (!list) {
		fprintf(stderr, "goldminer profile: out of memory\n");
		return 1;
	}
	for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		int k = gm_profile_find(&prof, t);
		if (k < 0) {
			fprintf(stderr, "goldminer profile: class '%s' is not in the %s profile\n", t,
				base ? base : "built-in");
			free(list);
			return 2;
		}
		if (nidx < GM_PROFILE_MAX)
			idx[nidx++] = k;
	}
	free(list);
	if (!nidx) {
		fprintf(stderr, "goldminer profile: --class names no class\n");
		return 2;
	}

	struct gm_loader_opts o;
	gm_loader_opts_default(&o);
	o.root = data;
	o.pipeline = spec;
	o.workers = 1;
	o.batch_size = (uint32_t)batch;
	o.no_pin = true;
	struct gm_loader *l;
	struct rusage r0, r1;
	struct timespec w0, w1;
	/* whole epochs: the index alone gives the dataset size (no workers started) */
	struct gm_dataset *ds;
	if (gm_dataset_open(&ds, data, err, sizeof(err))) {
		fprintf(stderr, "goldminer profile: %s\n", err);
		return 1;
	}
	uint32_t count = gm_dataset_count(ds);
	gm_dataset_close(ds);
	uint32_t epochs = (uint32_t)((images + count - 1) / count);
	o.epochs = epochs;
	getrusage(RUSAGE_CHILDREN, &r0);
	clock_gettime(CLOCK_MONOTONIC, &w0);
	if (gm_loader_open(&l, &o, err, sizeof(err))) {
		fprintf(stderr, "goldminer profile: %s\n", err);
		return 1;
	}
	struct gm_batch b;
	struct gm_loader_stats st;
	int rc;
	while ((rc = gm_loader_next(l, &b)) >= 0) {
		if (rc == GM_LOADER_END)
			break;
		if (rc == 0)
			gm_loader_release(l, &b);
	}
	if (rc < 0) {
		fprintf(stderr, "goldminer profile: %s\n", gm_loader_errmsg(l));
		gm_loader_close(l);
		return 1;
	}
	gm_loader_stats(l, &st);
	gm_loader_close(l); /* reaps the worker: its CPU time is in RUSAGE_CHILDREN now */
	clock_gettime(CLOCK_MONOTONIC, &w1);
	getrusage(RUSAGE_CHILDREN, &r1);
	double cpu = tv_s(r1.ru_utime) - tv_s(r0.ru_utime) + tv_s(r1.ru_stime) - tv_s(r0.ru_stime);
	double wall = (double)(w1.tv_sec - w0.tv_sec) + (double)(w1.tv_nsec - w0.tv_nsec) * 1e-9;
	if (!(cpu > 0) || !st.samples) {
		fprintf(stderr, "goldminer profile: no worker CPU time was measured\n");
		return 1;
	}
	double rate = (double)st.samples / cpu;
	double n = (double)st.samples;

	char model[160], day[32], pipe[300] = "the default train transform, uint8 HWC";
	cpu_model(model, sizeof(model));
	time_t now = time(NULL);
	strftime(day, sizeof(day), "%Y-%m-%d", gmtime(&now));
	if (spec) {
		struct gm_pipeline *p;
		if (!gm_pipeline_parse(spec, &p, NULL, 0)) {
			snprintf(pipe, sizeof(pipe), "'%s'", gm_pipeline_canonical(p));
			gm_pipeline_free(p);
		}
	}
	for (int k = 0; k < nidx; k++) {
		struct gm_profile_class *pc = &prof.c[idx[k]];
		pc->cpu_rate = rate;
		snprintf(pc->cpu_source, sizeof(pc->cpu_source),
			 "measured: goldminer profile %s, %s: %llu samples (%u of %u), %s, 1 "
			 "worker on %s: %.0f us CPU per sample (read %.0f, decode %.0f, augment "
			 "%.0f us)",
			 day, data, (unsigned long long)st.samples, epochs, st.dataset_size, pipe,
			 model, 1e6 / rate, (double)st.read_ns / 1e3 / n,
			 (double)st.decode_ns / 1e3 / n, (double)st.augment_ns / 1e3 / n);
	}
	fprintf(stderr,
		"profile: %s: %llu samples in %.2f s wall, worker CPU %.2f s: %.1f samples/s per "
		"vCPU (%.0f us each); written to class%s",
		data, (unsigned long long)st.samples, wall, cpu, rate, 1e6 / rate,
		nidx > 1 ? "es" : "");
	for (int k = 0; k < nidx; k++)
		fprintf(stderr, " %s", prof.c[idx[k]].name);
	fprintf(stderr, "\n");
	char comment[512];
	snprintf(comment, sizeof(comment),
		 "Written by goldminer profile %s from the %s table; cpu_rate of the measured\n"
		 "classes is this machine's; every other figure is the base table's.\n"
		 "vCPUs per GPU needed to keep the GPU busy = gpu_rate / cpu_rate.",
		 day, base ? base : "built-in");
	if (outp) {
		if (gm_profile_write(&prof, outp, comment, err, sizeof(err))) {
			fprintf(stderr, "goldminer profile: %s\n", err);
			return 1;
		}
	} else if (gm_profile_write(&prof, "/dev/stdout", comment, err, sizeof(err))) {
		fprintf(stderr, "goldminer profile: %s\n", err);
		return 1;
	}
	return 0;
}
