/*
 * coef_bench.c - a worker's CPU time per image in coefficient mode (the GPU
 * decode's worker half, gm_aug_coef_sample) against the full CPU path
 * (gm_aug_sample), in the same run, and the coefficient bytes per sample against
 * the uint8 sample's.
 *
 * Usage: coef_bench ROOT [N [PASSES [SIZE [MODE [restart]]]]]
 *   ROOT: an ImageFolder tree; its first N images (default 300, every class
 *   directory in turn) are read into memory, then each pass (default 5) runs
 *   every image through both paths, alternating, with the same keys: the default
 *   train spec (MODE eval: resize + center crop; train32, eval32: float32
 *   output, the default pipeline's) at SIZE (default 224), uint8 output, slots of
 * gm_coef_slot_bytes. restart: each image first rewritten as `goldminer pack --restart` writes it
 * (GM_PACK_RESTART_DEFAULT), so that both paths read only the window's restart segments. Times are
 * thread CPU time, each image's minimum over the passes, summed (what another process took is
 * filtered out). Prints: us/img for each path and their ratio, the host path's us/img
 * (gm_aug_coef_finish: the arithmetic a device runs, on one core), the slots that
 * carried coefficients and their mean bytes against the uint8 sample's, and
 * whether every finished sample equals the CPU's (it must).
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "goldminer/aug.h"
#include "goldminer/coef.h"
#include "goldminer/jpeg.h"
#include "goldminer/pack.h"

struct set {
	char **data;
	size_t *len;
	int n, cap;
};

static int add_file(struct set *s, const char *path)
{
	FILE *f = fopen(path, "rb");
	long l = -1;
	char *b = NULL;
	if (!f)
		return -1;
	if (fseek(f, 0, SEEK_END) == 0 && (l = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (b = malloc((size_t)l)) && fread(b, 1, (size_t)l, f) == (size_t)l) {
		s->data[s->n] = b;
		s->len[s->n++] = (size_t)l;
		b = NULL;
	}
	free(b);
	fclose(f);
	return 0;
}

/* The first n images of root's class directories, a few from each in turn. */
static int load(struct set *s, const char *root, int n)
{
	struct dirent **cls;
	int nc = scandir(root, &cls, NULL, alphasort);
	char path[4096];
	if (nc < 0)
		return -1;
	s->data = calloc((size_t)n, sizeof(char *));
	s->len = calloc((size_t)n, sizeof(size_t));
	for (int k = 0; s->n < n && k < 1000; k++)
		for (int c = 0; c < nc && s->n < n; c++) {
			struct dirent **fs;
			if (cls[c]->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "%s/%s", root, cls[c]->d_name);
			int nf = scandir(path, &fs, NULL, alphasort), seen = 0;
			for (int i = 0; i < nf; i++) {
				if (fs[i]->d_name[0] != '.' && seen++ == k && s->n < n) {
					snprintf(path, sizeof(path), "%s/%s/%s", root,
						 cls[c]->d_name, fs[i]->d_name);
					add_file(s, path);
				}
				free(fs[i]);
			}
			if (nf > 0)
				free(fs);
		}
	for (int c = 0; c < nc; c++)
		free(cls[c]);
	free(cls);
	return s->n > 0 ? 0 : -1;
}

/* Each image as pack --restart writes it (one that does not transcode stays). */
static void restart_all(struct set *s)
{
	struct gm_jpeg *j;
	char err[256];
	if (gm_jpeg_create(&j, 0))
		return;
	for (int i = 0; i < s->n; i++) {
		uint8_t *t = NULL;
		size_t tl;
		uint32_t every =
		    gm_jpeg_fit_restart(j, s->data[i], s->len[i], GM_PACK_RESTART_DEFAULT);
		if (gm_jpeg_restart_transcode(s->data[i], s->len[i], every, 0, &t, &tl, err,
					      sizeof(err)) == 0) {
			free(s->data[i]);
			s->data[i] = (char *)t;
			s->len[i] = tl;
		}
	}
	gm_jpeg_destroy(j);
}

static uint64_t cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void keep_min(uint64_t *m, uint64_t v)
{
	if (!*m || v < *m)
		*m = v;
}

int main(int argc, char **argv)
{
	struct set s = {0};
	struct gm_aug_spec spec;
	struct gm_aug *cpu, *gpu;
	int n = argc > 2 ? atoi(argv[2]) : 300, passes = argc > 3 ? atoi(argv[3]) : 5;
	if (argc < 2 || n < 1 || passes < 1) {
		fprintf(stderr, "usage: coef_bench ROOT [N [PASSES [SIZE [train|eval]]]]\n");
		return 2;
	}
	gm_aug_spec_default(&spec);
	spec.size = argc > 4 ? (uint32_t)atoi(argv[4]) : 224;
	spec.mode = argc > 5 && !strncmp(argv[5], "eval", 4) ? GM_AUG_EVAL : GM_AUG_TRAIN;
	spec.out = argc > 5 && strstr(argv[5], "32") ? GM_OUT_F32_CHW : GM_OUT_U8_HWC;
	if (load(&s, argv[1], n) || gm_aug_create(&cpu, &spec) || gm_aug_create(&gpu, &spec)) {
		fprintf(stderr, "coef_bench: no images under %s, or a bad spec\n", argv[1]);
		return 1;
	}
	if (argc > 6 && !strcmp(argv[6], "restart"))
		restart_all(&s);
	size_t ob = gm_aug_out_bytes(&spec), cap = gm_coef_slot_bytes(ob);
	uint8_t *a = aligned_alloc(64, ob), *b = aligned_alloc(64, ob),
		*slot = aligned_alloc(64, cap);
	uint64_t *tc = calloc((size_t)s.n, 8), *tg = calloc((size_t)s.n, 8),
		 *tf = calloc((size_t)s.n, 8);
	uint64_t coef_bytes = 0, ncoef = 0, bad = 0, sc = 0, sg = 0, sf = 0, kc = 0, kg = 0;
	uint8_t *is_coef = calloc((size_t)s.n, 1);
	for (int p = 0; p < passes; p++)
		for (int i = 0; i < s.n; i++) {
			uint64_t t0 = cpu_ns();
			int rc =
			    gm_aug_sample(cpu, s.data[i], s.len[i], 1, 0, (uint64_t)i, a, NULL);
			uint64_t t1 = cpu_ns();
			int rg = gm_aug_coef_sample(gpu, s.data[i], s.len[i], 1, 0, (uint64_t)i,
						    slot, cap, NULL);
			uint64_t t2 = cpu_ns();
			int rf = rg ? rg : gm_aug_coef_finish(gpu, slot, cap, b);
			uint64_t t3 = cpu_ns();
			keep_min(&tc[i], t1 - t0);
			keep_min(&tg[i], t2 - t1);
			keep_min(&tf[i], t3 - t2);
			bad += rc != rf || (!rc && memcmp(a, b, ob));
			if (p == 0 && !rg && ((struct gm_coef_slot *)(void *)slot)->kind == 0) {
				ncoef++;
				is_coef[i] = 1;
				coef_bytes += ((struct gm_coef_slot *)(void *)slot)->bytes;
			}
		}
	for (int i = 0; i < s.n; i++)
		sc += tc[i], sg += tg[i], sf += tf[i], kc += is_coef[i] ? tc[i] : 0,
		    kg += is_coef[i] ? tg[i] : 0;
	printf("images %d, passes %d, %s %u, sample %zu bytes (uint8: %u)\n", s.n, passes,
	       spec.mode == GM_AUG_EVAL ? "eval" : "train", spec.size, ob,
	       spec.size * spec.size * 3);
	printf("cpu path      %8.1f us/img (worker CPU)\n", sc / 1e3 / s.n);
	printf("coefficients  %8.1f us/img (worker CPU), %.3f of the cpu path\n", sg / 1e3 / s.n,
	       (double)sg / (double)sc);
	printf("  of which the %llu images sent as coefficients: %.1f vs %.1f us/img, %.3f\n",
	       (unsigned long long)ncoef, ncoef ? kg / 1e3 / ncoef : 0.0,
	       ncoef ? kc / 1e3 / ncoef : 0.0, kc ? (double)kg / (double)kc : 0.0);
	printf("host finish   %8.1f us/img (one core: the device's share)\n", sf / 1e3 / s.n);
	printf("coefficient slots %llu of %d, mean %.0f bytes, %.3f of the uint8 sample\n",
	       (unsigned long long)ncoef, s.n, ncoef ? (double)coef_bytes / ncoef : 0.0,
	       ncoef ? (double)coef_bytes / ncoef / (3.0 * spec.size * spec.size) : 0.0);
	printf("same bytes as the cpu path: %s\n", bad ? "NO" : "yes");
	return bad ? 1 : 0;
}
