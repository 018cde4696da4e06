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
 * Classes whose pipeline is not goldminer's C image path (nlp, speech, recsys, vit;
 * with --torchvision also the image classes as PyTorch users run them) are measured
 * by a Python module, python/goldminer/tools/profile_classes.py, run by /usr/bin/python3
 * (GM_PYTHON overrides) pinned to one CPU: it runs the real pipeline (tokenise and
 * pad a text corpus, decode audio into log-mel features, parse and hash Criteo
 * rows, torchvision transforms) and reports samples per CPU second of its measured
 * loop; the table py_rows says which class runs which pipeline. A module it lacks
 * (NumPy, torch, soundfile) ends it with exit status 3 and a message naming the
 * Debian package; it is killed after GM_PROFILE_PY_S seconds.
 *
 * What it does not do: measure GPU-bound rates, or several worker counts (the
 * per-vCPU rate is what the policy scales; bench --workers N shows the scaling).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "goldminer/dataset.h"
#include "goldminer/limits.h"
#include "goldminer/loader.h"
#include "goldminer/pipeline.h"
#include "goldminer/profile.h"
#include "goldminer/util.h"

#define CMD		"profile"
#define GM_PROFILE_PY_S 900 /* a Python measurement still running then is killed */

extern char **environ;

#define PY_MODULE "goldminer.tools.profile_classes" /* run as python3 -m PY_MODULE */

/*
 * The pipelines python/goldminer/tools/profile_classes.py runs, by the class they
 * measure (a NEW=BASE class follows BASE). Image classes run goldminer's C data
 * plane unless --torchvision; a row with needs_data takes DATA, the others their
 * Debian default or --input.
 */
static const struct py_row {
	const char *cls, *pipeline;
	bool needs_data, image;
	uint64_t samples; /* default --images: a few seconds of CPU */
} py_rows[] = {
    {"nlp", "text", false, false, 20000},	   {"speech", "speech", false, false, 100},
    {"recsys", "criteo", false, false, 100000},	   {"vit", "randaugment", true, false, 1000},
    {"resnet50", "torchvision", true, true, 1000}, {"cv-light", "torchvision", true, true, 1000},
};
#define NPY (sizeof(py_rows) / sizeof(py_rows[0]))

/* One Python measurement's answer (profile_classes --tsv). */
struct py_res {
	double rate, samples, cpu, wall;
	char unit[64], what[400];
};

struct run {
	const char *data, *classes, *base, *outp, *spec, *input;
	uint64_t images, batch;
	bool images_given, torchvision;
	struct gm_profile prof;
	int idx[GM_PROFILE_MAX], nidx;		 /* the classes to update */
	const struct py_row *py[GM_PROFILE_MAX]; /* each one's Python pipeline, or NULL */
	bool c_plane;				 /* some class runs the C data plane */
	/* the measurement */
	uint32_t epochs;
	struct gm_loader_stats st;
	double cpu, wall, rate;
};

enum { O_CLASS, O_BASE, O_OUT, O_IMAGES, O_PIPELINE, O_BATCH, O_INPUT, O_TV, O_HELP, O_N };

static const struct cmd_opt opts[O_N] = {
    [O_CLASS] = {"class", "NAME,...", 0,
		 "classes to update (default resnet50,cv-light: the ImageNet JPEG "
		 "pipeline on DATA); each must exist in the base profile, or be NEW=BASE: a new "
		 "class NEW with BASE's gpu_rate (an assumption) and share 0. nlp, speech, "
		 "recsys and vit run Python pipelines (python/goldminer/tools/profile_classes.py): "
		 "nlp tokenises and pads a text corpus, speech decodes audio into log-mel "
		 "features, recsys parses and hashes Criteo rows, vit runs torchvision's "
		 "RandAugment on DATA"},
    [O_BASE] =
	{"base", "FILE", 0,
	 "profile TSV to start from (default: the built-in table, traces/profile-pytorch.tsv)"},
    [O_OUT] = {"out", "FILE", 0, "where to write the profile (default: stdout)"},
    [O_IMAGES] = {"images", "N", 0, "at least this many samples, in whole epochs (default 2000)"},
    [O_PIPELINE] = {"pipeline", "SPEC", 0,
		    "pipeline spec (default: the train transform, uint8 output)"},
    [O_BATCH] = {"batch", "B", 0, "samples per batch (default 64)"},
    [O_INPUT] = {"input", "PATH", 0,
		 "nlp's corpus, speech's audio directory or recsys's Criteo TSV (default: "
		 "/usr/share/common-licenses, /usr/share/sounds/freedesktop/stereo, rows "
		 "from a seeded generator in Criteo's layout)"},
    [O_TV] = {"torchvision", NULL, 0,
	      "image classes through torchvision (PIL decode, RandomResizedCrop, flip, "
	      "ToTensor, normalise: the PyTorch-era pipeline) instead of goldminer's data plane"},
    [O_HELP] = {"help", NULL, 'h', "this help"},
};

static const char synopsis[] =
    "goldminer profile [DATA] [--class NAME|NEW=BASE[,...]] [--base FILE] [--out FILE]\n"
    "                         [--images N] [--pipeline SPEC] [--batch B] [--input PATH]\n"
    "                         [--torchvision]\n"
    "  Measure the pre-processing rate per vCPU (1 worker or 1 pinned Python\n"
    "  process, CPU time) of each class's pipeline and write a simulator profile\n"
    "  (for goldminer sim --profile) whose classes NAME get it as cpu_rate. DATA\n"
    "  (an image directory) is needed by the image classes and vit.";

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
	r->input = val[O_INPUT];
	r->torchvision = val[O_TV] != NULL;
	r->images = 2000;
	r->images_given = val[O_IMAGES] != NULL;
	r->batch = 64;
	if ((val[O_IMAGES] && cmd_u64(CMD, "--images", val[O_IMAGES], 1, 100000000, &r->images)) ||
	    (val[O_BATCH] && cmd_u64(CMD, "--batch", val[O_BATCH], 1, GM_MAX_BATCH, &r->batch)))
		return 2;
	if (a.npos > 1) {
		cmd_err(CMD, NULL, NULL, "expected one DATA directory, not %d arguments", a.npos);
		cmd_usage(stderr, synopsis, opts, O_N);
		return 2;
	}
	r->data = a.npos ? a.pos[0] : NULL;
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

/* The Python pipeline that measures class name, or NULL for the C data plane. */
static const struct py_row *py_for(const struct run *r, const char *name)
{
	for (size_t i = 0; i < NPY; i++)
		if (!strcmp(py_rows[i].cls, name) && (!py_rows[i].image || r->torchvision))
			return &py_rows[i];
	return NULL;
}

/* DATA where a chosen class needs it, --input where exactly one can take it. 0, or
 * 2 after a message. */
static int profile_inputs(const struct run *r)
{
	const char *needs = NULL, *takes = NULL;
	int ntakes = 0;
	if (r->c_plane && !r->data)
		needs = r->prof.c[r->idx[0]].name;
	for (int k = 0; k < r->nidx; k++) {
		const struct py_row *p = r->py[k];
		if (p && p->needs_data && !r->data)
			needs = r->prof.c[r->idx[k]].name;
		if (p && !p->needs_data && (!takes || strcmp(takes, p->pipeline))) {
			takes = p->pipeline;
			ntakes++;
		}
	}
	for (int k = 0; k < r->nidx && r->c_plane && !r->data && !r->py[k]; k++)
		needs = r->prof.c[r->idx[k]].name;
	if (needs) {
		cmd_err(CMD, NULL, "give an image directory, e.g. /var/tmp/goldminer-photos",
			"class '%s' is measured on images: DATA is needed", needs);
		return 2;
	}
	if (r->input && ntakes != 1) {
		cmd_err(CMD, "--input", NULL, "is the data of one of nlp, speech or recsys, and %s",
			ntakes ? "several of them are chosen: measure them one at a time"
			       : "none is chosen");
		return 2;
	}
	return 0;
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
		if (r->nidx < GM_PROFILE_MAX) {
			r->py[r->nidx] = py_for(r, eq ? eq + 1 : t);
			r->c_plane |= !r->py[r->nidx];
			r->idx[r->nidx++] = k;
		}
	}
	free(list);
	if (!r->nidx) {
		cmd_err(CMD, "--class", NULL, "names no class");
		return 2;
	}
	return profile_inputs(r);
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
	getrusage(RUSAGE_CHILDREN, &r0);
	double w0 = gm_now_s();
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
	r->wall = gm_now_s() - w0;
	getrusage(RUSAGE_CHILDREN, &r1);
	r->cpu = tv_s(r1.ru_utime) - tv_s(r0.ru_utime) + tv_s(r1.ru_stime) - tv_s(r0.ru_stime);
	if (!(r->cpu > 0) || !r->st.samples) {
		cmd_err(CMD, r->data, "give more --images", "no worker CPU time was measured");
		return 1;
	}
	r->rate = (double)r->st.samples / r->cpu;
	return 0;
}

/*
 * python/ beside the executable or up to two levels above it (the source tree:
 * build/goldminer, build/tests/test_profile) into buf; "" where there is none
 * (then an installed goldminer package is used).
 */
static void py_path(char *buf, size_t len)
{
	char exe[PATH_MAX], probe[PATH_MAX + 64];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	buf[0] = 0;
	if (n <= 0)
		return;
	exe[n] = 0;
	for (int up = 0; up < 3; up++) {
		char *slash = strrchr(exe, '/');
		if (!slash)
			return;
		*slash = 0;
		snprintf(probe, sizeof(probe), "%s/python/goldminer/tools/profile_classes.py", exe);
		if (access(probe, R_OK) == 0) {
			if (snprintf(buf, len, "%s/python", exe) >= (int)len)
				buf[0] = 0; /* cut: rather none than a wrong one */
			return;
		}
	}
}

/* The child's environment: ours with PYTHONPATH led by the source tree's python/.
 * Strings in store; NULL when it does not fit. */
static char **py_env(char *store, size_t len, char **envp, size_t nenv)
{
	char dir[PATH_MAX];
	const char *old = getenv("PYTHONPATH");
	size_t k = 0;
	py_path(dir, sizeof(dir));
	for (char **e = environ; *e && k + 2 < nenv; e++)
		if (strncmp(*e, "PYTHONPATH=", 11))
			envp[k++] = *e;
	if (*dir || old) {
		int w = snprintf(store, len, "PYTHONPATH=%s%s%s", dir,
				 *dir && old && *old ? ":" : "", old ? old : "");
		if (w < 0 || (size_t)w >= len)
			return NULL;
		envp[k++] = store;
	}
	envp[k] = NULL;
	return envp;
}

/* Read the child's stdout into buf until EOF or the deadline. 0, or -ETIMEDOUT. */
static int py_read(int fd, char *buf, size_t len, time_t deadline)
{
	size_t at = 0;
	for (;;) {
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		time_t left = deadline - time(NULL);
		if (left <= 0)
			return -ETIMEDOUT;
		int rc = poll(&pf, 1, (int)(left > 60 ? 60000 : left * 1000));
		if (rc < 0 && errno != EINTR)
			break; /* the pipe is gone: what was read is all there is */
		if (rc <= 0)
			continue; /* a signal, or a minute without output: check the deadline */
		ssize_t n = read(fd, buf + at, len - 1 - at);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		at += (size_t)n;
		if (at == len - 1) /* more than a measurement prints: keep the last part */
			at = 0;
	}
	buf[at] = 0;
	return 0;
}

/* Start the pipeline's Python process with its stdout on a pipe. Its pid, or -1
 * after a message. */
static pid_t py_start(const struct run *r, const struct py_row *p, const char *py, int *out)
{
	char samples[32], env_store[PATH_MAX * 2], *envp[4096];
	snprintf(samples, sizeof(samples), "%llu",
		 (unsigned long long)(r->images_given ? r->images : p->samples));
	const char *data = p->needs_data ? r->data : r->input;
	char *argv[] = {(char *)py,   "-m",	   PY_MODULE, (char *)p->pipeline,
			"--tsv",      "--samples", samples,   data ? "--data" : NULL,
			(char *)data, NULL};
	int fd[2];
	if (!py_env(env_store, sizeof(env_store), envp, sizeof(envp) / sizeof(envp[0]))) {
		cmd_err(CMD, "PYTHONPATH", NULL, "too long");
		return -1;
	}
	if (pipe2(fd, O_CLOEXEC)) {
		cmd_err(CMD, NULL, NULL, "pipe: %s", strerror(errno));
		return -1;
	}
	pid_t pid = fork();
	if (pid == 0) {
		if (dup2(fd[1], 1) < 0)
			_exit(127);
		execve(py, argv, envp);
		_exit(127); /* as a shell says "command not found" */
	}
	close(fd[1]);
	if (pid < 0) {
		cmd_err(CMD, NULL, NULL, "fork: %s", strerror(errno));
		close(fd[0]);
		return -1;
	}
	*out = fd[0];
	return pid;
}

/* Why the Python process failed, from its wait status (its own message is above). */
static void py_failed(const struct py_row *p, const char *py, int st, bool timed_out)
{
	char what[64];
	snprintf(what, sizeof(what), "the %s pipeline", p->pipeline);
	if (timed_out)
		cmd_err(CMD, what, "give fewer --images", "still running after %d s: killed",
			GM_PROFILE_PY_S);
	else if (WIFEXITED(st) && WEXITSTATUS(st) == 127)
		cmd_err(CMD, what, "apt-get install python3, or set GM_PYTHON to an interpreter",
			"cannot run %s", py);
	else if (WIFEXITED(st) && WEXITSTATUS(st) == 3)
		cmd_err(CMD, what, "install what the line above names",
			"%s lacks a module it needs", py);
	else if (WIFEXITED(st) && WEXITSTATUS(st) == 1)
		cmd_err(CMD, what,
			"run from the source tree, or pip install python/ into that interpreter",
			"%s failed (exit 1): is the goldminer Python package there?", py);
	else
		cmd_err(CMD, what, NULL, "%s failed (%s %d; its message is above)", py,
			WIFEXITED(st) ? "exit" : "signal",
			WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
}

/* Parse "rate samples cpu_s wall_s unit what" (profile_classes --tsv). */
static int py_parse(char *line, struct py_res *res)
{
	char *f[6], *save = NULL;
	int n = 0;
	char *nl = strrchr(line, '\n');
	if (nl && !nl[1]) /* the last line */
		*nl = 0;
	char *last = strrchr(line, '\n');
	for (char *t = strtok_r(last ? last + 1 : line, "\t", &save); t && n < 6;
	     t = strtok_r(NULL, "\t", &save))
		f[n++] = t;
	if (n != 6)
		return -EBADMSG;
	char *end;
	res->rate = strtod(f[0], &end);
	if (*end || !(res->rate >= GM_PROFILE_MIN_RATE && res->rate <= GM_PROFILE_MAX_RATE))
		return -EBADMSG;
	res->samples = strtod(f[1], NULL);
	res->cpu = strtod(f[2], NULL);
	res->wall = strtod(f[3], NULL);
	snprintf(res->unit, sizeof(res->unit), "%s", f[4]);
	snprintf(res->what, sizeof(res->what), "%s", f[5]);
	return 0;
}

/* Run pipeline p in Python and read its answer. 0, or 1 after a message. */
static int py_measure(const struct run *r, const struct py_row *p, struct py_res *res)
{
	const char *py =
	    getenv("GM_PYTHON") && *getenv("GM_PYTHON") ? getenv("GM_PYTHON") : "/usr/bin/python3";
	char out[8192];
	int fd, st = 0;
	pid_t pid = py_start(r, p, py, &fd);
	if (pid < 0)
		return 1;
	bool timed_out = py_read(fd, out, sizeof(out), time(NULL) + GM_PROFILE_PY_S) < 0;
	close(fd);
	if (timed_out)
		kill(pid, SIGKILL);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (timed_out || !WIFEXITED(st) || WEXITSTATUS(st)) {
		py_failed(p, py, st, timed_out);
		return 1;
	}
	if (py_parse(out, res)) {
		cmd_err(CMD, p->pipeline, NULL, "%s printed no measurement line", py);
		return 1;
	}
	return 0;
}

/* The C data plane's rate into class k's row, with a source naming how. */
static void update_c(struct run *r, struct gm_profile_class *pc, const char *day, const char *model)
{
	char pipe[300] = "the default train transform, uint8 HWC";
	double n = (double)r->st.samples;
	if (r->spec) {
		struct gm_pipeline *p;
		if (!gm_pipeline_parse(r->spec, &p, NULL, 0)) {
			snprintf(pipe, sizeof(pipe), "'%s'", gm_pipeline_canonical(p));
			gm_pipeline_free(p);
		}
	}
	pc->cpu_rate = r->rate;
	snprintf(pc->cpu_source, sizeof(pc->cpu_source),
		 "measured: goldminer profile %s, %s: %llu samples (%u of %u), %s, 1 "
		 "worker on %s: %.0f us CPU per sample (read %.0f, decode %.0f, augment "
		 "%.0f us)",
		 day, r->data, (unsigned long long)r->st.samples, r->epochs, r->st.dataset_size,
		 pipe, model, 1e6 / r->rate, (double)r->st.read_ns / 1e3 / n,
		 (double)r->st.decode_ns / 1e3 / n, (double)r->st.augment_ns / 1e3 / n);
}

/* A Python pipeline's rate into a row: the command, the machine, what ran. */
static void update_py(const struct py_row *p, const struct py_res *m, struct gm_profile_class *pc,
		      const char *day, const char *model)
{
	pc->cpu_rate = m->rate;
	int w = snprintf(pc->cpu_source, sizeof(pc->cpu_source),
			 "measured: goldminer profile --class %s %s (python3 -m " PY_MODULE
			 " %s, 1 pinned vCPU of %s): %.0f %s in %.2f s CPU; %s",
			 p->cls, day, p->pipeline, model, m->samples, m->unit, m->cpu, m->what);
	if (w >= (int)sizeof(pc->cpu_source)) /* cut: say so */
		memcpy(pc->cpu_source + sizeof(pc->cpu_source) - 4, "...", 4);
}

/* Measure every chosen class: the C data plane once, each Python pipeline once.
 * 0, or the exit status after a message. */
static int profile_run(struct run *r, const char *day)
{
	char model[160];
	struct py_res *res = calloc(NPY, sizeof(*res));
	bool done[NPY] = {false};
	int rc = 0;
	if (!res) {
		cmd_err(CMD, NULL, NULL, "out of memory");
		return 1;
	}
	cpu_model(model, sizeof(model));
	if (r->c_plane)
		rc = profile_measure(r);
	for (int k = 0; k < r->nidx && !rc; k++) {
		struct gm_profile_class *pc = &r->prof.c[r->idx[k]];
		const struct py_row *p = r->py[k];
		if (!p) {
			update_c(r, pc, day, model);
			continue;
		}
		size_t i = (size_t)(p - py_rows);
		if (!done[i]) {
			rc = py_measure(r, p, &res[i]);
			if (rc)
				break;
			done[i] = true;
			cmd_note(CMD, "%s (%s): %.0f %s in %.2f s CPU (%.2f s wall): %.1f per vCPU",
				 pc->name, p->pipeline, res[i].samples, res[i].unit, res[i].cpu,
				 res[i].wall, res[i].rate);
		}
		update_py(p, &res[i], pc, day, model);
	}
	free(res);
	return rc;
}

/* The summary on stderr and the table to --out or stdout. 0, or 1 after a message. */
static int profile_write(struct run *r, const char *day)
{
	char err[1024], comment[512], names[GM_PROFILE_MAX * 40] = "";
	size_t at = 0;
	for (int k = 0; k < r->nidx && at < sizeof(names); k++)
		at += (size_t)snprintf(names + at, sizeof(names) - at, " %s",
				       r->prof.c[r->idx[k]].name);
	if (r->c_plane)
		cmd_note(CMD,
			 "%s: %llu samples in %.2f s wall, worker CPU %.2f s: %.1f samples/s per "
			 "vCPU (%.0f us each)",
			 r->data, (unsigned long long)r->st.samples, r->wall, r->cpu, r->rate,
			 1e6 / r->rate);
	cmd_note(CMD, "written to class%s%s", r->nidx > 1 ? "es" : "", names);
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
	time_t now = time(NULL);
	struct tm tm;
	strftime(day, sizeof(day), "%Y-%m-%d", gmtime_r(&now, &tm));
	rc = profile_classes(r);
	if (rc == 0)
		rc = profile_run(r, day);
	if (rc == 0)
		rc = profile_write(r, day);
	free(r);
	return rc;
}
