/*
 * bench.c - `goldminer bench`: run the data pipeline on a dataset as a trainer
 * would (consume every batch, touch nothing) and report images/s, stage times,
 * errors and, on request, a checksum of every delivered byte per epoch.
 *
 * It is a consumer of the public loader API only, so what it measures is what a
 * user of the library gets. The run is five steps, one function each: the
 * options (into struct bench), opening the loader and the optional GPU buffer,
 * the consume loop, the progress line (stderr, when it is a terminal) and the
 * report (bad files on stderr, then one JSON line on stdout, its fields in a
 * fixed order that scripts rely on).
 *
 * It does not retry, tune or interpret: a loader error ends the run with status 1.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "goldminer/checksum.h"
#include "goldminer/cuda.h"
#include "goldminer/limits.h"
#include "goldminer/loader.h"
#include "goldminer/reader.h"
#include "goldminer/util.h"

#define CMD "bench"

/* One run: the options, then what the run opened and measured. */
struct bench {
	struct gm_loader_opts o;
	uint64_t epochs;
	bool checksum, quiet, device_copy;
	double rate; /* synthetic trainer: batches/s, 0 = as fast as delivered */

	struct gm_loader *l;
	void *dev;	    /* device buffer of one batch (--device-copy) */
	bool cuda;	    /* a CUDA device is usable */
	const char *reader; /* how the workers read: io_uring or pread */
	double open_s;
	double wait_max; /* the longest wait for one batch after the first (s) */
	uint64_t got;	 /* batches taken */

	bool tty;	/* progress line on stderr */
	uint64_t *sums; /* checksum of each finished epoch */
	double *ends;	/* when each finished epoch ended (s after the first wait) */
	uint64_t ep;	/* epochs finished */
	double due;	/* --consumer-rate: when the next step may start */
	double dev_s;	/* time in device copies */
	uint64_t dev_bytes;

	size_t out_bytes; /* a finished sample's (the transform in effect) */
};

/* The signal (SIGINT, SIGTERM) that asked the run to end, or 0. The handler only
 * records it; gm_loader_next returns -EINTR when it lands during its wait, and
 * the consume loop ends with status 128 + the signal after the loader is closed
 * (workers gone, ring unmapped). */
static volatile sig_atomic_t interrupted;
static struct gm_loader *volatile interrupt_loader; /* set while it is open */

static void on_int(int sig)
{
	interrupted = sig;
	struct gm_loader *l = interrupt_loader;
	if (l)
		gm_loader_interrupt(l); /* even when the signal misses the futex */
}

static const char *out_name(int out)
{
	return out == GM_OUT_F32_CHW ? "float32" : out == GM_OUT_F16_CHW ? "float16" : "uint8";
}

enum {
	O_WORKERS,
	O_CPUS,
	O_NODE,
	O_RATE,
	O_BATCH,
	O_EPOCHS,
	O_SIZE,
	O_OUTPUT,
	O_EVAL,
	O_PIPELINE,
	O_SEED,
	O_ON_ERROR,
	O_SLOTS,
	O_CHECKSUM,
	O_DEVICE_COPY,
	O_GPU_DECODE,
	O_CHAOS,
	O_LEASE,
	O_QUIET,
	O_HELP,
	O_N
};

static const struct cmd_opt opts[O_N] = {
    [O_WORKERS] = {"workers", "N|auto", 0,
		   "worker processes (default 2; with --node the agent decides and N caps it); "
		   "auto: sized by the policy"},
    [O_CPUS] = {"cpus", "N", 0, "auto: most workers to use (default: online CPUs)"},
    [O_NODE] = {"node", "PATH", 0, "let the node agent at PATH run the workers"},
    [O_RATE] = {"consumer-rate", "R", 0,
		"act as a trainer that takes R batches/s (a GPU stand-in)"},
    [O_BATCH] = {"batch", "B", 0, "samples per batch (default 64)"},
    [O_EPOCHS] = {"epochs", "E", 0, "epochs to run (default 1)"},
    [O_SIZE] = {"size", "S", 0, "output side in pixels (default 224)"},
    [O_OUTPUT] = {"output", "T", 0, "uint8 (HWC, default), float32 or float16 (CHW, normalised)"},
    [O_EVAL] = {"eval", NULL, 0, "resize 256 + center crop instead of random-resized-crop"},
    [O_PIPELINE] = {"pipeline", "SPEC", 0,
		    "a pipeline spec (see goldminer plan); overrides the above"},
    [O_SEED] = {"seed", "X", 0, "shuffle/augmentation seed (default 0)"},
    [O_ON_ERROR] = {"on-error", "P", 0, "skip (default) or fail on a bad sample"},
    [O_SLOTS] = {"slots", "N", 0, "ring slots (power of two; default 2 x workers, >= 4)"},
    [O_CHECKSUM] = {"checksum", NULL, 0, "print a hash of all delivered batch bytes per epoch"},
    [O_DEVICE_COPY] = {"device-copy", NULL, 0,
		       "copy every batch to the GPU (needs a CUDA device); with --gpu-decode, "
		       "finish it there (the GPU decode's kernels, libgoldminer-cuda.so)"},
    [O_GPU_DECODE] = {"gpu-decode", NULL, 0,
		      "workers write coefficient slots (the GPU decode's worker half; the "
		      "stage times are theirs)"},
    [O_CHAOS] = {"chaos-kill-ms", "N", 0, "SIGKILL a random worker every N ms (crash-safety demo)"},
    [O_LEASE] = {"lease-timeout-ms", "N", 0,
		 "kill a worker whose batch makes no progress for N ms and make the batch"
		 " again (default 5000)"},
    [O_QUIET] = {"quiet", NULL, 0, "no progress line"},
    [O_HELP] = {"help", NULL, 'h', "this help"},
};

static const char synopsis[] =
    "goldminer bench DATA [options]\n"
    "  DATA: an ImageFolder root (DATA/<class>/*.jpg), or WebDataset tar shards\n"
    "  (one .tar, or a directory of them)";

/* An unsigned option value into *out (a uint32_t field); false after a message. */
static bool u32_opt(const char *what, const char *s, uint64_t lo, uint64_t hi, uint32_t *out)
{
	uint64_t v;
	if (cmd_u64(CMD, what, s, lo, hi, &v))
		return false;
	*out = (uint32_t)v;
	return true;
}

/* The keyword options: --output, --on-error. false after a message. */
static bool keyword_opts(struct bench *b, const char **val)
{
	const char *s = val[O_OUTPUT];
	if (s) {
		if (!strcmp(s, "uint8"))
			b->o.aug.out = GM_OUT_U8_HWC;
		else if (!strcmp(s, "float32"))
			b->o.aug.out = GM_OUT_F32_CHW;
		else if (!strcmp(s, "float16"))
			b->o.aug.out = GM_OUT_F16_CHW;
		else {
			cmd_err(CMD, "--output", NULL, "is uint8, float32 or float16, not '%s'", s);
			return false;
		}
	}
	s = val[O_ON_ERROR];
	if (s) {
		if (!strcmp(s, "skip"))
			b->o.on_error = GM_ON_ERROR_SKIP;
		else if (!strcmp(s, "fail"))
			b->o.on_error = GM_ON_ERROR_FAIL;
		else {
			cmd_err(CMD, "--on-error", NULL, "is skip or fail, not '%s'", s);
			return false;
		}
	}
	return true;
}

/* The numeric options. false after a message. */
static bool number_opts(struct bench *b, const char **val)
{
	struct gm_loader_opts *o = &b->o;
	if (val[O_WORKERS] && !strcmp(val[O_WORKERS], "auto"))
		o->workers = 0;
	else if (val[O_WORKERS]) {
		uint32_t w;
		if (!u32_opt("--workers (or auto)", val[O_WORKERS], 1, GM_MAX_WORKERS, &w))
			return false;
		o->workers = (int)w;
	}
	if ((val[O_CPUS] && !u32_opt("--cpus", val[O_CPUS], 1, GM_MAX_WORKERS, &o->max_workers)) ||
	    (val[O_BATCH] && !u32_opt("--batch", val[O_BATCH], 1, GM_MAX_BATCH, &o->batch_size)) ||
	    (val[O_SIZE] &&
	     !u32_opt("--size", val[O_SIZE], GM_MIN_SIZE, GM_MAX_SIZE, &o->aug.size)) ||
	    (val[O_SLOTS] &&
	     !u32_opt("--slots", val[O_SLOTS], GM_MIN_SLOTS, GM_MAX_SLOTS, &o->slots)) ||
	    (val[O_CHAOS] &&
	     !u32_opt("--chaos-kill-ms", val[O_CHAOS], 1, GM_MAX_CHAOS_MS, &o->chaos_kill_ms)) ||
	    (val[O_LEASE] && !u32_opt("--lease-timeout-ms", val[O_LEASE], 1, GM_MAX_LEASE_MS,
				      &o->lease_timeout_ms)))
		return false;
	if (val[O_EPOCHS] && cmd_u64(CMD, "--epochs", val[O_EPOCHS], 1, GM_MAX_EPOCHS, &b->epochs))
		return false;
	if (val[O_SEED] && cmd_u64(CMD, "--seed", val[O_SEED], 0, UINT64_MAX, &o->seed))
		return false;
	if (val[O_RATE]) {
		if (cmd_double(CMD, "--consumer-rate (batches/s)", val[O_RATE], 0, &b->rate))
			return false;
		if (!(b->rate > 0)) {
			cmd_err(CMD, "--consumer-rate (batches/s)", "a number > 0",
				"bad value '%s'", val[O_RATE]);
			return false;
		}
	}
	return true;
}

/* argv into *b. -1 to run, else the exit status (0 after --help, 2 usage). */
static int bench_options(struct bench *b, int argc, char **argv)
{
	const char *val[O_N];
	char *pos[argc > 0 ? argc : 1];
	struct cmd_args a = {val, pos, 0};

	gm_loader_opts_default(&b->o);
	b->epochs = 1;
	if (cmd_parse(CMD, opts, O_N, argc, argv, &a))
		return 2;
	if (val[O_HELP]) {
		cmd_usage(stdout, synopsis, opts, O_N);
		return 0;
	}
	if (!number_opts(b, val) || !keyword_opts(b, val))
		return 2;
	b->o.node = val[O_NODE];
	/* through an agent, workers not asked for are the agent's to decide (the
	 * library's default of 2 would cap local + remote); --workers N is a cap */
	if (b->o.node && !val[O_WORKERS])
		b->o.workers = 0;
	b->o.pipeline = val[O_PIPELINE];
	b->checksum = val[O_CHECKSUM] != NULL;
	b->device_copy = val[O_DEVICE_COPY] != NULL;
	b->o.gpu_decode = val[O_GPU_DECODE] != NULL;
	b->quiet = val[O_QUIET] != NULL;
	if (val[O_EVAL]) {
		b->o.aug.mode = GM_AUG_EVAL;
		b->o.aug.flip_p = 0;
	}
	if (a.npos != 1) {
		cmd_err(CMD, NULL, NULL, "expected one DATA directory, not %d arguments", a.npos);
		cmd_usage(stderr, synopsis, opts, O_N);
		return 2;
	}
	b->o.root = a.pos[0];
	b->o.epochs = (uint32_t)b->epochs;
	return -1;
}

/* How the workers will read (they set up the same way in their processes). */
static const char *probe_reader(bool quiet)
{
	const char *reader = "io_uring";
	struct gm_reader *probe;
	if (gm_reader_create(&probe, 1) == 0) {
		reader = gm_reader_mode(probe);
		if (strcmp(reader, "io_uring") != 0 && !quiet)
			cmd_note(CMD,
				 "io_uring is not usable here (%s); workers read with pread, "
				 "file by file",
				 gm_reader_why(probe));
		gm_reader_destroy(probe);
	}
	return reader;
}

/* Open the loader, the signal handlers, the device buffer. 0, or 1 after a message
 * (b->l may then be open: the caller closes it). */
static int bench_open(struct bench *b)
{
	char err[512], why[200] = "";
	double t_open = gm_now_s();
	if (gm_loader_open(&b->l, &b->o, err, sizeof(err))) {
		cmd_err(CMD, NULL, NULL, "%s", err);
		b->l = NULL;
		return 1;
	}
	b->open_s = gm_now_s() - t_open;

	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_int;
	interrupt_loader = b->l;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	struct gm_loader_stats st;
	gm_loader_stats(b->l, &st);
	size_t elem = st.out == GM_OUT_U8_HWC ? 1 : 2; /* float16 */
	if (st.out == GM_OUT_F32_CHW)
		elem = 4;
	b->out_bytes = (size_t)st.size * st.size * 3 * elem;
	b->cuda = gm_cuda_available(why, sizeof(why));
	if (b->device_copy) {
		if (!b->cuda) {
			cmd_err(CMD, "--device-copy", "run without --device-copy", "%s", why);
			return 1;
		}
		if (b->o.gpu_decode && !gm_loader_device_finish_ready(why, sizeof(why))) {
			cmd_err(CMD, "--device-copy", "run without --device-copy or --gpu-decode",
				"--gpu-decode's batches cannot be finished on the device: %s", why);
			return 1;
		}
		size_t bytes = (size_t)st.batch_size * st.sample_bytes;
		if (gm_cuda_malloc(&b->dev, bytes)) {
			cmd_err(CMD, "--device-copy", "lower --batch or --size",
				"cudaMalloc of %zu bytes failed", bytes);
			return 1;
		}
	} else if (!b->cuda && !b->quiet) {
		cmd_note(CMD, "%s; pinning skipped", why);
	}
	b->reader = probe_reader(b->quiet);
	b->tty = !b->quiet && isatty(2);
	b->sums = calloc(b->epochs, sizeof(*b->sums));
	b->ends = calloc(b->epochs, sizeof(*b->ends));
	return b->sums && b->ends ? 0 : 1;
}

/* The trainer's step of --consumer-rate: a GPU works while this CPU sleeps. */
static void trainer_step(struct bench *b)
{
	double tn = gm_now_s();
	if (b->due < tn)
		b->due = tn;
	b->due += 1.0 / b->rate;
	if (b->due > tn) {
		double d = b->due - tn;
		struct timespec ts = {(time_t)d, (long)((d - (double)(time_t)d) * 1e9)};
		nanosleep(&ts, NULL);
	}
}

/* The progress line: rewritten in place on stderr, at most every 0.2 s. */
static void progress(struct bench *b, const struct gm_batch *bt, double t, double t0)
{
	struct gm_loader_stats st;
	gm_loader_stats(b->l, &st);
	fprintf(stderr,
		"\r  epoch %" PRIu64 "/%" PRIu64 "  batch %" PRIu64 "/%u  %8.0f img/s  "
		"wait %4.1f%%  errors %" PRIu64 "  workers %u/%u   ",
		bt->epoch - b->o.epoch + 1, b->epochs, bt->index + 1, st.batches_per_epoch,
		st.img_per_s, 100.0 * (double)st.wait_ns / 1e9 / (t - t0), st.errors, st.workers,
		st.target_workers);
}

/* --device-copy: the batch copied to the device, or with --gpu-decode finished
 * there (gm_loader_finish_device, waited for: its time is the device's). 0, or 1
 * with the loader's message said. */
static int to_device(struct bench *b, const struct gm_batch *bt)
{
	double d0 = gm_now_s();
	size_t ob = b->o.gpu_decode ? b->out_bytes : bt->sample_bytes;
	int e = b->o.gpu_decode ? gm_loader_finish_device(b->l, bt, b->dev, (size_t)bt->size * ob,
							  NULL, GM_LOADER_FINISH_SYNC)
				: gm_loader_copy_to_device(b->l, bt, b->dev);
	if (e) {
		cmd_err(CMD, NULL, NULL, "%s", gm_loader_errmsg(b->l));
		return 1;
	}
	b->dev_s += gm_now_s() - d0;
	b->dev_bytes += (uint64_t)bt->size * ob;
	return 0;
}

/* Consume every batch. 0 at the end, 1 on a loader error, 128 + the signal (130
 * SIGINT, 143 SIGTERM) when interrupted. */
static int bench_consume(struct bench *b, double t0)
{
	uint64_t h = GM_CHECKSUM_INIT;
	double last = 0;
	struct gm_batch bt;
	for (;;) {
		if (interrupted) {
			fputc('\n', stderr);
			cmd_err(CMD, NULL, NULL, "interrupted (%s)",
				interrupted == SIGTERM ? "SIGTERM" : "SIGINT");
			return 128 + interrupted;
		}
		double w0 = gm_now_s();
		int e = gm_loader_next(b->l, &bt);
		if (e == -EINTR)
			continue; /* a handler ran: the loop's first test looks at it */
		if (e >= 0 && b->got++ && gm_now_s() - w0 > b->wait_max)
			b->wait_max = gm_now_s() - w0;
		if (e == GM_LOADER_END)
			return 0;
		if (e == GM_LOADER_END_OF_EPOCH) {
			b->ends[b->ep] = gm_now_s() - t0;
			b->sums[b->ep++] = h;
			h = GM_CHECKSUM_INIT;
			continue;
		}
		if (e < 0) {
			if (b->tty)
				fputc('\n', stderr);
			cmd_err(CMD, NULL, NULL, "%s", gm_loader_errmsg(b->l));
			return 1;
		}
		if (b->checksum)
			h = gm_checksum64(h, bt.data, (size_t)bt.size * bt.sample_bytes);
		if (b->rate > 0)
			trainer_step(b);
		if (b->dev && to_device(b, &bt))
			return 1;
		double t = gm_now_s();
		if (b->tty && t - last > 0.2) {
			progress(b, &bt, t, t0);
			last = t;
		}
	}
}

/* The bad samples, on stderr, before the JSON line. */
static void report_errors(const struct bench *b, const struct gm_loader_stats *st)
{
	uint64_t listed = 0;
	const char *path, *msg;
	while (gm_loader_error(b->l, listed, &path, &msg) == 0) {
		cmd_err(CMD, path, NULL, "skipped: %s", msg);
		listed++;
	}
	if (st->errors > listed)
		cmd_err(CMD, NULL, "8 are listed per batch", "... and %" PRIu64 " more bad samples",
			st->errors - listed);
}

/* The JSON line's optional fields, in their fixed order after "reader". */
static void report_extras(const struct bench *b, const struct gm_loader_stats *st, double wall)
{
	const struct gm_loader_opts *o = &b->o;
	if (o->workers == 0 || b->rate > 0)
		printf(", \"auto\": %s, \"target_workers\": %u, \"consumer_rate\": %.1f"
		       ", \"demand_img_per_s\": %.1f, \"worker_img_per_s\": %.1f"
		       ", \"stall_pct\": %.2f",
		       o->workers == 0 ? "true" : "false", st->target_workers, b->rate,
		       st->demand_img_per_s, st->worker_img_per_s,
		       100.0 * st->wait_ns / 1e9 / wall);
	if (o->chaos_kill_ms)
		printf(", \"chaos_kills\": %" PRIu64
		       ", \"detect_ms_mean\": %.2f, \"detect_ms_max\": %.2f",
		       st->chaos_kills,
		       st->chaos_kills ? st->detect_ns_sum / 1e6 / (double)st->chaos_kills : 0,
		       st->detect_ns_max / 1e6);
	if (b->dev)
		printf(", \"h2d_gb_per_s\": %.2f",
		       b->dev_s > 0 ? (double)b->dev_bytes / b->dev_s / 1e9 : 0);
	if (o->node) /* a stall: a cut link, a stopped remote worker (test_remote.sh) */
		printf(", \"wait_max_ms\": %.1f", b->wait_max * 1e3);
	if (b->checksum) {
		printf(", \"checksum\": [");
		for (uint64_t i = 0; i < b->ep; i++)
			printf("%s\"%016" PRIx64 "\"", i ? ", " : "", b->sums[i]);
		printf("]");
	}
}

/* The report: bad files first (stderr), then the JSON line (stdout). */
static void bench_report(const struct bench *b, double wall)
{
	struct gm_loader_stats st;
	gm_loader_stats(b->l, &st);
	report_errors(b, &st);
	double n = (double)(st.samples ? st.samples : 1);
	/* With --node the agent decides: report what it granted (the pool's size in
	 * the ring header at the end of the run) and, apart, what was asked (0: no
	 * cap, the agent's policy). Locally the pool is what was asked (auto: alive). */
	int workers = b->o.workers ? b->o.workers : (int)st.workers;
	char requested[48] = "";
	if (b->o.node) {
		workers = (int)st.target_workers;
		snprintf(requested, sizeof(requested), ", \"workers_requested\": %d", b->o.workers);
	}
	printf("{\"img_per_s\": %.1f, \"images\": %" PRIu64 ", \"batches\": %" PRIu64
	       ", \"epochs\": %" PRIu64 ", \"dataset\": %u, \"classes\": %u, \"workers\": %d%s"
	       ", \"batch\": %u, \"size\": %u, \"output\": \"%s\", \"mode\": \"%s\""
	       ", \"wall_s\": %.3f, \"open_s\": %.3f"
	       ", \"stage_ms\": {\"read\": %.1f, \"decode\": %.1f, \"augment\": %.1f"
	       ", \"write\": %.1f, \"consumer_wait\": %.1f}"
	       ", \"stage_us_per_img\": {\"read\": %.1f, \"decode\": %.1f, \"augment\": %.1f"
	       ", \"write\": %.2f, \"preempted\": %.1f}"
	       ", \"errors\": %" PRIu64 ", \"worker_deaths\": %" PRIu64 ", \"reissued\": %" PRIu64
	       ", \"pinned\": %s, \"cuda\": \"%s\", \"reader\": \"%s\"",
	       st.img_per_s, st.samples, st.batches, b->epochs, st.dataset_size, st.num_classes,
	       workers, requested, st.batch_size, st.size, out_name(st.out),
	       st.mode == GM_AUG_EVAL ? "eval" : "train", wall, b->open_s, st.read_ns / 1e6,
	       st.decode_ns / 1e6, st.augment_ns / 1e6, st.write_ns / 1e6, st.wait_ns / 1e6,
	       st.read_ns / 1e3 / n, st.decode_ns / 1e3 / n, st.augment_ns / 1e3 / n,
	       st.write_ns / 1e3 / n, (double)gm_loader_preempt_ns(b->l) / 1e3 / n, st.errors,
	       st.worker_deaths, st.reissued, st.pinned ? "true" : "false",
	       b->cuda ? gm_cuda_build() : "unavailable", b->reader);
	printf(", \"read_bytes\": %" PRIu64, gm_loader_read_bytes(b->l));
	printf(", \"stale_index\": %" PRIu64, gm_loader_stale_index(b->l));
	/* when each epoch ended: a steady rate leaves out the first (workers starting,
	 * an agent's borrowing ramp) */
	printf(", \"epoch_end_s\": [");
	for (uint64_t k = 0; k < b->ep; k++)
		printf("%s%.3f", k ? ", " : "", b->ends[k]);
	printf("]");
	report_extras(b, &st, wall);
	printf("}\n");
	fflush(stdout);
}

int gm_cmd_bench(int argc, char **argv)
{
	struct bench b;
	memset(&b, 0, sizeof(b));
	interrupted = 0;
	int rc = bench_options(&b, argc, argv);
	if (rc >= 0)
		return rc;
	rc = bench_open(&b);
	if (rc == 0) {
		double t0 = gm_now_s();
		rc = bench_consume(&b, t0);
		if (rc == 0) {
			if (b.tty)
				fputc('\n', stderr);
			bench_report(&b, gm_now_s() - t0);
		}
	}
	free(b.sums);
	free(b.ends);
	gm_cuda_free(b.dev);
	interrupt_loader = NULL;
	gm_loader_close(b.l);
	return rc;
}
