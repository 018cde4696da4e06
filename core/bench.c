/*
 * bench.c - `goldminer bench`: run the data pipeline on a dataset as a trainer
 * would (consume every batch, touch nothing) and report images/s, stage times,
 * errors and, on request, a checksum of every delivered byte per epoch.
 *
 * It is a consumer of the public loader API only, so what it measures is what a
 * user of the library gets. A progress line goes to stderr when it is a terminal;
 * the result is one JSON line on stdout.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "goldminer/cli.h"
#include "goldminer/cuda.h"
#include "goldminer/checksum.h"
#include "goldminer/loader.h"
#include "goldminer/reader.h"

static volatile sig_atomic_t interrupted;

static void on_int(int sig)
{
	(void)sig;
	interrupted = 1;
}

static const char *out_name(int out)
{
	return out == GM_OUT_F32_CHW ? "float32" : out == GM_OUT_F16_CHW ? "float16" : "uint8";
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: goldminer bench DATA [options]\n"
		"  DATA                 ImageFolder root (DATA/<class>/*.jpg)\n"
		"  --workers N|auto     worker processes (default 2); auto: sized by the policy\n"
		"  --cpus N             auto: most workers to use (default: online CPUs)\n"
		"  --node PATH          let the node agent at PATH run the workers\n"
		"  --consumer-rate R    act as a trainer that takes R batches/s (a GPU stand-in)\n"
		"  --batch B            samples per batch (default 64)\n"
		"  --epochs E           epochs to run (default 1)\n"
		"  --size S             output side in pixels (default 224)\n"
		"  --output T           uint8 (HWC, default), float32 or float16 (CHW, normalised)\n"
		"  --eval               resize 256 + center crop instead of random-resized-crop\n"
		"  --pipeline SPEC      a pipeline spec (see goldminer plan); overrides the above\n"
		"  --seed X             shuffle/augmentation seed (default 0)\n"
		"  --on-error P         skip (default) or fail on a bad sample\n"
		"  --slots N            ring slots (power of two; default 2 x workers, >= 4)\n"
		"  --checksum           print a hash of all delivered batch bytes per epoch\n"
		"  --device-copy        copy every batch to the GPU (needs a CUDA device)\n"
		"  --chaos-kill-ms N    SIGKILL a random worker every N ms (crash-safety demo)\n"
		"  --quiet              no progress line\n");
}

static int parse_u64(const char *s, const char *what, uint64_t lo, uint64_t hi, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || end == s || *end || v < lo || v > hi || *s == '-') {
		fprintf(stderr, "goldminer bench: %s must be an integer in %" PRIu64 "..%" PRIu64
				", not '%s'\n",
			what, lo, hi, s);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

int gm_cli_bench(int argc, char **argv)
{
	static const struct option lopts[] = {
		{"workers", required_argument, NULL, 'w'}, {"batch", required_argument, NULL, 'b'},
		{"epochs", required_argument, NULL, 'e'},  {"size", required_argument, NULL, 's'},
		{"output", required_argument, NULL, 'o'},  {"seed", required_argument, NULL, 'x'},
		{"pipeline", required_argument, NULL, 'p'}, {"on-error", required_argument, NULL, 'E'},
		{"slots", required_argument, NULL, 'S'},   {"checksum", no_argument, NULL, 'c'},
		{"eval", no_argument, NULL, 'v'},	   {"device-copy", no_argument, NULL, 'd'},
		{"quiet", no_argument, NULL, 'q'},	   {"chaos-kill-ms", required_argument, NULL, 'K'},
		{"cpus", required_argument, NULL, 'C'},	   {"node", required_argument, NULL, 'N'},	   {"consumer-rate", required_argument, NULL, 'R'},	   {"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0}};
	struct gm_loader_opts o;
	uint64_t v, epochs = 1;
	bool checksum = false, quiet = false, device_copy = false;
	double rate = 0; /* synthetic trainer: batches/s, 0 = as fast as delivered */
	char *endp;
	char err[512];
	int c, rc = 1;

	gm_loader_opts_default(&o);
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", lopts, NULL)) != -1) {
		switch (c) {
		case 'w':
			if (!strcmp(optarg, "auto")) {
				o.workers = 0;
				break;
			}
			if (parse_u64(optarg, "--workers (or auto)", 1, 256, &v))
				return 2;
			o.workers = (int)v;
			break;
		case 'N':
			o.node = optarg;
			break;
		case 'C':
			if (parse_u64(optarg, "--cpus", 1, 256, &v))
				return 2;
			o.max_workers = (uint32_t)v;
			break;
		case 'R':
			rate = strtod(optarg, &endp);
			if (*endp || !(rate > 0)) {
				fprintf(stderr, "goldminer bench: --consumer-rate is batches/s > 0, not '%s'\n",
					optarg);
				return 2;
			}
			break;
		case 'b':
			if (parse_u64(optarg, "--batch", 1, 65536, &v))
				return 2;
			o.batch_size = (uint32_t)v;
			break;
		case 'e':
			if (parse_u64(optarg, "--epochs", 1, 1000000, &epochs))
				return 2;
			break;
		case 's':
			if (parse_u64(optarg, "--size", 8, 4096, &v))
				return 2;
			o.aug.size = (uint32_t)v;
			break;
		case 'o':
			if (!strcmp(optarg, "uint8"))
				o.aug.out = GM_OUT_U8_HWC;
			else if (!strcmp(optarg, "float32"))
				o.aug.out = GM_OUT_F32_CHW;
			else if (!strcmp(optarg, "float16"))
				o.aug.out = GM_OUT_F16_CHW;
			else {
				fprintf(stderr,
					"goldminer bench: --output is uint8, float32 or float16, not "
					"'%s'\n",
					optarg);
				return 2;
			}
			break;
		case 'x':
			if (parse_u64(optarg, "--seed", 0, UINT64_MAX, &o.seed))
				return 2;
			break;
		case 'p':
			o.pipeline = optarg;
			break;
		case 'E':
			if (!strcmp(optarg, "skip"))
				o.on_error = GM_ON_ERROR_SKIP;
			else if (!strcmp(optarg, "fail"))
				o.on_error = GM_ON_ERROR_FAIL;
			else {
				fprintf(stderr, "goldminer bench: --on-error is skip or fail, not '%s'\n",
					optarg);
				return 2;
			}
			break;
		case 'S':
			if (parse_u64(optarg, "--slots", 4, 1024, &v))
				return 2;
			o.slots = (uint32_t)v;
			break;
		case 'c':
			checksum = true;
			break;
		case 'v':
			o.aug.mode = GM_AUG_EVAL;
			o.aug.flip_p = 0;
			break;
		case 'd':
			device_copy = true;
			break;
		case 'q':
			quiet = true;
			break;
		case 'K':
			if (parse_u64(optarg, "--chaos-kill-ms", 1, 3600000, &v))
				return 2;
			o.chaos_kill_ms = (uint32_t)v;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "goldminer bench: expected one DATA directory\n");
		usage(stderr);
		return 2;
	}
	o.root = argv[optind];
	o.epochs = (uint32_t)epochs;

	struct gm_loader *l;
	double t_open = now_s();
	int e = gm_loader_open(&l, &o, err, sizeof(err));
	if (e) {
		fprintf(stderr, "goldminer bench: %s\n", err);
		return 1;
	}
	double open_s = now_s() - t_open;

	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_int;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	struct gm_loader_stats st;
	gm_loader_stats(l, &st);
	char why[200] = "";
	bool cuda = gm_cuda_available(why, sizeof(why));
	void *dev = NULL;
	if (device_copy) {
		if (!cuda) {
			fprintf(stderr, "goldminer bench: --device-copy: %s\n", why);
			goto out_close;
		}
		size_t bytes = (size_t)st.batch_size * st.sample_bytes;
		if (gm_cuda_malloc(&dev, bytes)) {
			fprintf(stderr, "goldminer bench: cudaMalloc of %zu bytes failed\n", bytes);
			goto out_close;
		}
	} else if (!cuda && !quiet) {
		fprintf(stderr, "goldminer: %s; pinning skipped\n", why);
	}
	/* How the workers will read (they set up the same way in their processes). */
	const char *reader = "io_uring";
	struct gm_reader *probe;
	if (gm_reader_create(&probe, 1) == 0) {
		reader = gm_reader_mode(probe);
		if (strcmp(reader, "io_uring") != 0 && !quiet)
			fprintf(stderr, "goldminer: io_uring is not usable here (%s); workers read "
					"with pread, file by file\n",
				gm_reader_why(probe));
		gm_reader_destroy(probe);
	}

	bool tty = !quiet && isatty(2);
	uint64_t *sums = calloc(epochs, sizeof(*sums));
	uint64_t h = GM_CHECKSUM_INIT, ep = 0, dev_bytes = 0;
	double last = 0, t0 = now_s(), dev_s = 0;
	struct gm_batch b;
	if (!sums)
		goto out_close;
	for (;;) {
		if (interrupted) {
			fprintf(stderr, "\ngoldminer bench: interrupted\n");
			rc = 130;
			goto out_free;
		}
		e = gm_loader_next(l, &b);
		if (e == GM_LOADER_END)
			break;
		if (e == GM_LOADER_END_OF_EPOCH) {
			sums[ep++] = h;
			h = GM_CHECKSUM_INIT;
			continue;
		}
		if (e < 0) {
			if (tty)
				fputc('\n', stderr);
			fprintf(stderr, "goldminer bench: %s\n", gm_loader_errmsg(l));
			goto out_free;
		}
		if (checksum)
			h = gm_checksum64(h, b.data, (size_t)b.size * b.sample_bytes);
		if (rate > 0) {
			/* the trainer's step: a GPU works while this CPU sleeps */
			static double due;
			double tn = now_s();
			if (due < tn)
				due = tn;
			due += 1.0 / rate;
			if (due > tn) {
				struct timespec ts = {(time_t)(due - tn),
						      (long)((due - tn - (double)(time_t)(due - tn)) * 1e9)};
				nanosleep(&ts, NULL);
			}
		}
		if (dev) {
			double d0 = now_s();
			if (gm_loader_copy_to_device(l, &b, dev)) {
				fprintf(stderr, "goldminer bench: %s\n", gm_loader_errmsg(l));
				goto out_free;
			}
			dev_s += now_s() - d0;
			dev_bytes += (uint64_t)b.size * b.sample_bytes;
		}
		double t = now_s();
		if (tty && t - last > 0.2) {
			gm_loader_stats(l, &st);
			fprintf(stderr,
				"\r  epoch %" PRIu64 "/%" PRIu64 "  batch %" PRIu64 "/%u  %8.0f img/s  "
				"wait %4.1f%%  errors %" PRIu64 "  workers %u/%u   ",
				b.epoch - o.epoch + 1, epochs, b.index + 1, st.batches_per_epoch,
				st.img_per_s, 100.0 * (double)st.wait_ns / 1e9 / (t - t0), st.errors,
				st.workers, st.target_workers);
			last = t;
		}
	}
	if (tty)
		fputc('\n', stderr);
	gm_loader_stats(l, &st);
	double wall = now_s() - t0;

	/* The final report: bad files first (stderr), then the JSON line. */
	uint64_t listed = 0;
	const char *path, *msg;
	while (gm_loader_error(l, listed, &path, &msg) == 0) {
		fprintf(stderr, "goldminer: skipped %s: %s\n", path, msg);
		listed++;
	}
	if (st.errors > listed)
		fprintf(stderr, "goldminer: ... and %" PRIu64 " more bad samples (8 are listed per batch)\n",
			st.errors - listed);
	double n = (double)(st.samples ? st.samples : 1);
	printf("{\"img_per_s\": %.1f, \"images\": %" PRIu64 ", \"batches\": %" PRIu64
	       ", \"epochs\": %" PRIu64 ", \"dataset\": %u, \"classes\": %u, \"workers\": %d"
	       ", \"batch\": %u, \"size\": %u, \"output\": \"%s\", \"mode\": \"%s\""
	       ", \"wall_s\": %.3f, \"open_s\": %.3f"
	       ", \"stage_ms\": {\"read\": %.1f, \"decode\": %.1f, \"augment\": %.1f"
	       ", \"write\": %.1f, \"consumer_wait\": %.1f}"
	       ", \"stage_us_per_img\": {\"read\": %.1f, \"decode\": %.1f, \"augment\": %.1f"
	       ", \"write\": %.2f}"
	       ", \"errors\": %" PRIu64 ", \"worker_deaths\": %" PRIu64 ", \"reissued\": %" PRIu64
	       ", \"pinned\": %s, \"cuda\": \"%s\", \"reader\": \"%s\"",
	       st.img_per_s, st.samples, st.batches, epochs, st.dataset_size, st.num_classes,
	       o.workers ? o.workers : (int)st.workers, st.batch_size, st.size, out_name(st.out),
	       st.mode == GM_AUG_EVAL ? "eval" : "train", wall, open_s, st.read_ns / 1e6,
	       st.decode_ns / 1e6, st.augment_ns / 1e6, st.write_ns / 1e6, st.wait_ns / 1e6,
	       st.read_ns / 1e3 / n, st.decode_ns / 1e3 / n, st.augment_ns / 1e3 / n,
	       st.write_ns / 1e3 / n, st.errors, st.worker_deaths, st.reissued,
	       st.pinned ? "true" : "false",
	       cuda ? gm_cuda_build() : "unavailable", reader);
	if (o.workers == 0 || rate > 0)
		printf(", \"auto\": %s, \"target_workers\": %u, \"consumer_rate\": %.1f"
		       ", \"demand_img_per_s\": %.1f, \"worker_img_per_s\": %.1f"
		       ", \"stall_pct\": %.2f",
		       o.workers == 0 ? "true" : "false", st.target_workers, rate,
		       st.demand_img_per_s, st.worker_img_per_s, 100.0 * st.wait_ns / 1e9 / wall);
	if (o.chaos_kill_ms)
		printf(", \"chaos_kills\": %" PRIu64 ", \"detect_ms_mean\": %.2f, \"detect_ms_max\": %.2f",
		       st.chaos_kills,
		       st.chaos_kills ? st.detect_ns_sum / 1e6 / (double)st.chaos_kills : 0,
		       st.detect_ns_max / 1e6);
	if (dev)
		printf(", \"h2d_gb_per_s\": %.2f", dev_s > 0 ? (double)dev_bytes / dev_s / 1e9 : 0);
	if (checksum) {
		printf(", \"checksum\": [");
		for (uint64_t i = 0; i < ep; i++)
			printf("%s\"%016" PRIx64 "\"", i ? ", " : "", sums[i]);
		printf("]");
	}
	printf("}\n");
	fflush(stdout);
	rc = 0;
out_free:
	free(sums);
out_close:
	gm_cuda_free(dev);
	gm_loader_close(l);
	return rc;
}
