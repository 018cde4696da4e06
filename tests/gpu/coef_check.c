/*
 * coef_check.c - the GPU decode's device check (tests/gpu/check.sh runs it on a
 * machine with an NVIDIA GPU; built by `make coef-cuda` / `make gpu-bundle`).
 *
 * Usage: coef_check DIR [N [WORKERS]]
 *   DIR: an ImageFolder tree of JPEGs (the photo set); its first N (default: all)
 *   images are read into memory.
 * 1. Same bytes: every image through seven specs (train uint8, float32 and
 *    float16, eval uint8 and float32, train float32 with colour jitter, eval
 *    float16 with colour jitter including contrast and hue; 224), its coefficient
 *    slot's window rebuilt on the device (gm_coef_cuda_windows, a batch of 256
 *    slots a call) must equal the host path's (gm_coef_pixels), the sample
 *    finished from it on the host (gm_aug_coef_finish_window) the CPU workers'
 *    (gm_aug_sample), and the sample finished on the device (gm_coef_cuda_finish:
 *    resize, flip, jitter and layout there too, read back) the CPU workers'.
 * 2. Speed, train float32 224 (the default pipeline), WORKERS threads (default 4),
 *    each over its share of the images, three passes, the best: the CPU path
 *    (gm_aug_sample) against the GPU decode (gm_aug_coef_sample and
 *    gm_aug_coef_plan on the worker, gm_coef_cuda_finish on its own stream for
 *    each batch of 64 slots, the samples left on the device).
 * Prints one line per result; exit 0 when every byte matched, 1 otherwise, 77
 * when there is no device.
 */
#include <errno.h>
#include <glob.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "goldminer/aug.h"
#include "goldminer/coef.h"

#include "../../core/coef_cuda.h"

#define BATCH 256
#define PLAN_CAP (64u << 10) /* a plan: 80 + 4 x 224 x (4 + taps) bytes */

static char **data;
static size_t *lens;
static int nimg;

static int load(const char *dir, int want)
{
	char pat[4200];
	glob_t g;
	snprintf(pat, sizeof(pat), "%s/*/*.jpg", dir);
	if (glob(pat, 0, NULL, &g) || g.gl_pathc == 0)
		return -1;
	int n = want > 0 && (size_t)want < g.gl_pathc ? want : (int)g.gl_pathc;
	data = calloc((size_t)n, sizeof(*data));
	lens = calloc((size_t)n, sizeof(*lens));
	for (int i = 0; i < n; i++) {
		FILE *f = fopen(g.gl_pathv[i], "rb");
		long l = -1;
		if (f && fseek(f, 0, SEEK_END) == 0 && (l = ftell(f)) > 0 &&
		    fseek(f, 0, SEEK_SET) == 0 && (data[nimg] = malloc((size_t)l)) &&
		    fread(data[nimg], 1, (size_t)l, f) == (size_t)l)
			lens[nimg++] = (size_t)l;
		if (f)
			fclose(f);
	}
	globfree(&g);
	return nimg > 0 ? 0 : -1;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

#define NSPECS 7
static void spec_n(struct gm_aug_spec *s, int i)
{
	static const enum gm_out_type out[NSPECS] = {
	    GM_OUT_U8_HWC,  GM_OUT_F32_CHW, GM_OUT_U8_HWC, GM_OUT_F32_CHW,
	    GM_OUT_F16_CHW, GM_OUT_F16_CHW, GM_OUT_F32_CHW};
	gm_aug_spec_default(s);
	s->mode = i == 2 || i == 5 || i == 6 ? GM_AUG_EVAL : GM_AUG_TRAIN;
	s->out = out[i];
	if (i == 3 || i == 5)
		for (int k = 0; k < 3; k++)
			s->jitter[k][0] = 0.6f, s->jitter[k][1] = 1.4f;
	if (i == 5)
		s->jitter[3][0] = -0.1f, s->jitter[3][1] = 0.1f;
}

static const char *spec_name(int i)
{
	static const char *const name[NSPECS] = {
	    "train uint8",   "train float32", "eval uint8",   "train float32 jitter",
	    "train float16", "eval float16 jitter+hue", "eval float32"};
	return name[i];
}

/* The plans of the n COEFS slots cs, each copied out of the handle into plan[m]
 * (16 KiB... the cap given); 0 or the first error. */
static int plans_of(struct gm_aug *a, const struct gm_coef_slot *const *cs, uint32_t n,
		    size_t len, uint8_t **plan, size_t cap, const void **pp)
{
	for (uint32_t m = 0; m < n; m++) {
		const void *p;
		size_t pb;
		int ret = gm_aug_coef_plan(a, cs[m], len, &p, &pb);
		if (ret || pb > cap) {
			fprintf(stderr, "coef_check: plan %u: %s\n", m,
				ret ? gm_aug_errmsg(a) : "over the cap");
			return ret ? ret : -ENOSPC;
		}
		memcpy(plan[m], p, pb);
		pp[m] = plan[m];
	}
	return 0;
}

/* Part 1 for spec i: 0 when every byte matched; the counts printed. */
static int same_bytes(struct gm_coef_cuda *g, int i)
{
	struct gm_aug_spec spec;
	struct gm_aug *cpu, *gpu;
	spec_n(&spec, i);
	if (gm_aug_create(&cpu, &spec) || gm_aug_create(&gpu, &spec))
		return -1;
	size_t ob = gm_aug_out_bytes(&spec), cap = gm_coef_slot_bytes(ob);
	uint8_t *slots = aligned_alloc(64, cap * BATCH), *a = aligned_alloc(64, ob);
	uint8_t *b = aligned_alloc(64, ob), *win[BATCH], *host = malloc(64u << 20);
	const struct gm_coef_slot *cs[BATCH];
	int rc[BATCH], idx[BATCH], bad = 0, ncoef = 0;
	char err[256];
	uint8_t *plan[BATCH], *fin = malloc(ob * BATCH);
	const void *pp[BATCH];
	void *d_out = NULL;
	int bad_dev = 0;
	for (int k = 0; k < BATCH; k++)
		win[k] = malloc(16u << 20), plan[k] = malloc(PLAN_CAP);
	if (gm_coef_cuda_alloc(&d_out, ob * BATCH, err, sizeof(err))) {
		fprintf(stderr, "coef_check: %s\n", err);
		return -1;
	}
	for (int i0 = 0; i0 < nimg; i0 += BATCH) {
		uint32_t n = 0;
		for (int k = 0; k < BATCH && i0 + k < nimg; k++) {
			uint8_t *sl = slots + (size_t)k * cap;
			rc[k] = gm_aug_coef_sample(gpu, data[i0 + k], lens[i0 + k], 5, 1,
						   (uint64_t)(i0 + k), sl, cap, NULL);
			if (!rc[k] && ((struct gm_coef_slot *)(void *)sl)->kind == 0 &&
			    !gm_coef_check((void *)sl, cap, ob, NULL, 0)) {
				idx[n] = k;
				cs[n++] = (const void *)sl;
			}
		}
		if (gm_coef_cuda_windows(g, cs, n, win, err, sizeof(err))) {
			fprintf(stderr, "coef_check: %s\n", err);
			return -1;
		}
		/* the whole finish on the device, read back */
		if (plans_of(gpu, cs, n, cap, plan, PLAN_CAP, pp) ||
		    gm_coef_cuda_finish(g, cs, pp, NULL, n, d_out, ob, err, sizeof(err)) ||
		    gm_coef_cuda_sync(g, err, sizeof(err)) || gm_coef_cuda_released(g) != 1 ||
		    gm_coef_cuda_done(g) != 1 ||
		    gm_coef_cuda_read(g, fin, d_out, ob * n, err, sizeof(err))) {
			fprintf(stderr, "coef_check: device finish: %s\n", err);
			return -1;
		}
		for (uint32_t m = 0; m < n; m++) { /* the device's window = the host path's */
			const struct gm_coef_slot *s = cs[m];
			gm_coef_pixels(s, host, host + gm_coef_planes_bytes(s));
			bad += memcmp(win[m], host + gm_coef_planes_bytes(s),
				      (size_t)s->rw * s->rh * 3) != 0;
		}
		for (int k = 0, m = 0; k < BATCH && i0 + k < nimg; k++) {
			int r = gm_aug_sample(cpu, data[i0 + k], lens[i0 + k], 5, 1,
					      (uint64_t)(i0 + k), a, NULL);
			uint8_t *sl = slots + (size_t)k * cap;
			bool dev = m < (int)n && idx[m] == k;
			int f = rc[k] ? rc[k]
				: dev ? gm_aug_coef_finish_window(gpu, sl, cap, win[m], b)
				      : gm_aug_coef_finish(gpu, sl, cap, b);
			ncoef += dev;
			bad += r != f || (!r && memcmp(a, b, ob) != 0);
			bad_dev += dev && (r || memcmp(a, fin + (size_t)m * ob, ob) != 0);
			m += dev;
		}
	}
	printf("same bytes, spec %d (%s): %d images, %d through the device; windows finished on "
	       "the host: %d differ; finished on the device: %d differ\n",
	       i, spec_name(i), nimg, ncoef, bad, bad_dev);
	bad += bad_dev;
	for (int k = 0; k < BATCH; k++)
		free(win[k]), free(plan[k]);
	free(fin);
	gm_coef_cuda_free(d_out);
	free(host);
	free(slots);
	free(a);
	free(b);
	gm_aug_destroy(cpu);
	gm_aug_destroy(gpu);
	return bad ? 1 : 0;
}

struct worker {
	pthread_t t;
	int first, end;
	bool device;
	int failed;
};

/* One worker's share, CPU path or GPU decode, default train float32 spec: the
 * device finishes a batch of 64 slots into device memory while the worker writes
 * the next (its slots in two halves, a batch's released before they are reused);
 * a PIXELS slot's sample is copied on the host, as a consumer would. */
static void *work(void *arg)
{
	struct worker *w = arg;
	struct gm_aug_spec spec;
	struct gm_aug *a;
	struct gm_coef_cuda *g = NULL;
	void *d_out = NULL;
	char err[256];
	gm_aug_spec_default(&spec);
	spec.out = GM_OUT_F32_CHW;
	size_t ob = gm_aug_out_bytes(&spec), cap = gm_coef_slot_bytes(ob);
	uint8_t *slots = aligned_alloc(64, cap * 128), *out = aligned_alloc(64, ob);
	uint8_t *plan[64];
	const void *pp[64];
	const struct gm_coef_slot *cs[64];
	for (int k = 0; k < 64; k++)
		plan[k] = malloc(PLAN_CAP);
	if (gm_aug_create(&a, &spec)) {
		w->failed = 1;
		goto out_free;
	}
	if (w->device && (gm_coef_cuda_create(&g, 0, err, sizeof(err)) ||
			  gm_coef_cuda_alloc(&d_out, ob * 64, err, sizeof(err)))) {
		w->failed = 1;
		goto out_destroy;
	}
	for (int i0 = w->first, half = 0; i0 < w->end; i0 += 64, half ^= 1) {
		uint32_t n = 0;
		uint8_t *base = slots + (size_t)half * 64 * cap;
		for (int k = 0; k < 64 && i0 + k < w->end; k++) {
			if (!w->device) {
				gm_aug_sample(a, data[i0 + k], lens[i0 + k], 5, 1,
					      (uint64_t)(i0 + k), out, NULL);
				continue;
			}
			uint8_t *sl = base + (size_t)k * cap;
			if (gm_aug_coef_sample(a, data[i0 + k], lens[i0 + k], 5, 1,
					       (uint64_t)(i0 + k), sl, cap, NULL))
				continue;
			if (((struct gm_coef_slot *)(void *)sl)->kind == 0)
				cs[n++] = (const void *)sl;
			else
				gm_aug_coef_finish(a, sl, cap, out);
		}
		if (!w->device)
			continue;
		/* the previous batch: done before its output and this half's slots are reused */
		if (gm_coef_cuda_sync(g, err, sizeof(err)) ||
		    plans_of(a, cs, n, cap, plan, PLAN_CAP, pp) ||
		    gm_coef_cuda_finish(g, cs, pp, NULL, n, d_out, ob, err, sizeof(err)))
			w->failed = 1;
	}
	if (g && gm_coef_cuda_sync(g, err, sizeof(err)))
		w->failed = 1;
	gm_coef_cuda_free(d_out);
	gm_coef_cuda_destroy(g);
out_destroy:
	gm_aug_destroy(a);
out_free:
	for (int k = 0; k < 64; k++)
		free(plan[k]);
	free(slots);
	free(out);
	return NULL;
}

/* img/s of nw workers, the best of three passes. */
static double rate(int nw, bool device)
{
	double best = 0;
	struct worker w[64];
	for (int pass = 0; pass < 3; pass++) {
		double t0 = now();
		for (int i = 0; i < nw; i++) {
			w[i] = (struct worker){0};
			w[i].first = nimg * i / nw, w[i].end = nimg * (i + 1) / nw;
			w[i].device = device;
			pthread_create(&w[i].t, NULL, work, &w[i]);
		}
		for (int i = 0; i < nw; i++) {
			pthread_join(w[i].t, NULL);
			if (w[i].failed)
				return -1; /* a worker's device or handle failed */
		}
		double r = nimg / (now() - t0);
		best = r > best ? r : best;
	}
	return best;
}

int main(int argc, char **argv)
{
	struct gm_coef_cuda *g;
	char err[256];
	int nw = argc > 3 ? atoi(argv[3]) : 4, bad = 0;
	if (argc < 2 || load(argv[1], argc > 2 ? atoi(argv[2]) : 0)) {
		fprintf(stderr,
			"usage: coef_check DIR [N [WORKERS]] (DIR: an ImageFolder of JPEGs)\n");
		return 2;
	}
	if (gm_coef_cuda_create(&g, 0, err, sizeof(err))) {
		printf("SKIP: %s\n", err);
		return 77;
	}
	for (int i = 0; i < NSPECS; i++)
		bad |= same_bytes(g, i) != 0;
	gm_coef_cuda_destroy(g);
	if (nw < 1 || nw > 64)
		nw = 4;
	double cpu = rate(nw, false), dev = rate(nw, true);
	if (cpu < 0 || dev < 0) {
		printf("FAIL: a speed run's worker failed (%s path)\n", cpu < 0 ? "CPU" : "device");
		return 1;
	}
	printf("speed, train float32 224, %d workers: CPU path %.0f img/s, GPU decode %.0f img/s "
	       "(%.2fx; finished on the device, left there)\n",
	       nw, cpu, dev, dev / cpu);
	printf("%s\n", bad ? "FAIL: bytes differ" : "ok: the same bytes");
	return bad ? 1 : 0;
}
