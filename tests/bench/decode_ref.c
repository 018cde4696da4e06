/*
 * decode_ref.c - one-core decode reference rates over an ImageFolder tree.
 *
 *   usage: decode_ref DIR [SECONDS]      (SECONDS per measurement, default 3)
 *
 * Loads every *.jpg / *.jpeg under DIR into memory first (I/O excluded), then on
 * one thread measures, each for at least SECONDS and at least one full pass:
 *   full_decode  libjpeg-turbo full-size decode to RGB (gm_jpeg_decode_full)
 *   crop_decode  the train-mode RandomResizedCrop window only, at the DCT scale
 *                gm_aug_sample would pick, no resize (gm_jpeg_decode_crop)
 *   crop_decode_gm  the same with goldminer's Huffman decoder (core/huff.c); the
 *                two above are libjpeg-turbo's own decode (the reference: targets
 *                are stated against it)
 *   aug_u8/f32   the whole gm_aug_sample path, uint8 HWC and float32 CHW
 * and prints one JSON line on stdout (details on stderr). Rates are images per
 * second of this thread's CPU time (robust on a shared machine); wall_* fields
 * give the same per wall-clock second. The crop parameters
 * repeat aug.c's draw order (flip draw first, then torchvision's RRC draws).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "goldminer/jpeg.h"
#include "goldminer/aug.h"
#include "goldminer/rng.h"

struct file {
	char *path;
	uint8_t *data;
	size_t len;
};

static struct file *files;
static size_t nfiles, capfiles;

static int has_jpeg_ext(const char *p)
{
	const char *dot = strrchr(p, '.');
	return dot && (!strcasecmp(dot, ".jpg") || !strcasecmp(dot, ".jpeg"));
}

static int visit(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)ftw;
	if (type != FTW_F || !has_jpeg_ext(path))
		return 0;
	if (nfiles == capfiles) {
		size_t cap = capfiles ? capfiles * 2 : 1024;
		struct file *grown = realloc(files, cap * sizeof(*files));
		if (!grown)
			return -1; /* files stays valid; main frees it */
		files = grown;
		capfiles = cap;
	}
	struct file *f = &files[nfiles];
	f->path = strdup(path);
	f->len = (size_t)st->st_size;
	f->data = malloc(f->len ? f->len : 1);
	int fd = open(path, O_RDONLY);
	if (!f->path || !f->data || fd < 0) {
		fprintf(stderr, "decode_ref: %s: %s\n", path, strerror(errno));
		return -1;
	}
	size_t off = 0;
	while (off < f->len) {
		ssize_t n = read(fd, f->data + off, f->len - off);
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	close(fd);
	f->len = off;
	nfiles++;
	return 0;
}

static int by_path(const void *a, const void *b)
{
	return strcmp(((const struct file *)a)->path, ((const struct file *)b)->path);
}

static double clock_s(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double now_s(void)
{
	return clock_s(CLOCK_MONOTONIC);
}

/* torchvision RRC as aug.c draws it (flip draw first). Integer box. */
static void rrc(uint64_t id, uint32_t W, uint32_t H, uint32_t *x, uint32_t *y, uint32_t *w,
		uint32_t *h)
{
	struct gm_rng r;
	gm_rng_init(&r, 1, GM_RNG_STREAM_SAMPLE, 0, id);
	(void)gm_rng_uniform(&r); /* flip */
	double area = (double)W * H, lr0 = log(3.0 / 4.0), lr1 = log(4.0 / 3.0);
	for (int i = 0; i < 10; i++) {
		double t = area * (0.08 + 0.92 * gm_rng_uniform(&r));
		double ar = exp(lr0 + (lr1 - lr0) * gm_rng_uniform(&r));
		double cw = nearbyint(sqrt(t * ar)), ch = nearbyint(sqrt(t / ar));
		if (cw > 0 && cw <= W && ch > 0 && ch <= H) {
			*h = (uint32_t)ch;
			*w = (uint32_t)cw;
			*y = (uint32_t)gm_rng_below(&r, H - *h + 1);
			*x = (uint32_t)gm_rng_below(&r, W - *w + 1);
			return;
		}
	}
	*x = 0, *y = 0, *w = W, *h = H;
}

enum kind { FULL, CROP, CROP_GM, AUG_U8, AUG_F32 };

static double measure(enum kind k, double secs, struct gm_jpeg *dec, struct gm_aug *aug,
		      void *out, struct gm_aug_times *tm, size_t *errors, size_t *count,
		      double *wall_rate)
{
	size_t done = 0, i = 0;
	double t0 = now_s(), c0 = clock_s(CLOCK_THREAD_CPUTIME_ID), el = 0;
	*errors = 0;
	for (;;) {
		const struct file *f = &files[i];
		struct gm_jpeg_info info;
		struct gm_jpeg_image img;
		int ret;
		if (k <= CROP_GM) {
			gm_jpeg_set_own_huffman(dec, k == CROP_GM);
			ret = gm_jpeg_open(dec, f->data, f->len, &info);
			if (!ret && k == FULL) {
				ret = gm_jpeg_decode_full(dec, 8, &img);
			} else if (!ret) {
				uint32_t x, y, w, h;
				rrc(i, info.width, info.height, &x, &y, &w, &h);
				ret = gm_jpeg_decode_crop(dec, x, y, w, h, 224, 224, &img);
			}
		} else if (aug) {
			ret = gm_aug_sample(aug, f->data, f->len, 1, 0, i, out, tm);
		} else {
			ret = -EINVAL;
		}
		if (ret && (*errors)++ == 0)
			fprintf(stderr, "decode_ref: %s: %s\n", f->path,
				k <= CROP_GM ? gm_jpeg_errmsg(dec) : gm_aug_errmsg(aug));
		done++;
		if (++i == nfiles) {
			i = 0;
			el = now_s() - t0;
			if (el >= secs)
				break;
		}
	}
	*count = done;
	*wall_rate = (double)done / el;
	return (double)done / (clock_s(CLOCK_THREAD_CPUTIME_ID) - c0);
}

int main(int argc, char **argv)
{
	struct gm_aug_spec spec;
	struct gm_aug *au8 = NULL, *af32 = NULL;
	struct gm_jpeg *dec = NULL;
	struct gm_aug_times tu8 = {0, 0}, tf32 = {0, 0};
	size_t e[5];
	double secs = argc > 2 ? atof(argv[2]) : 3.0;

	if (argc < 2) {
		fprintf(stderr, "usage: decode_ref DIR [SECONDS]\n");
		return 2;
	}
	if (nftw(argv[1], visit, 32, FTW_PHYS) != 0 || nfiles == 0) {
		fprintf(stderr, "decode_ref: no JPEG files loaded from %s\n", argv[1]);
		return 1;
	}
	qsort(files, nfiles, sizeof(*files), by_path);
	gm_aug_spec_default(&spec);
	void *out = malloc(gm_aug_out_bytes(&spec) * 4);
	int rc = 1;
	if (!out || gm_jpeg_create(&dec, 0) || gm_aug_create(&au8, &spec))
		goto out_free;
	spec.out = GM_OUT_F32_CHW;
	if (gm_aug_create(&af32, &spec))
		goto out_free;

	size_t c[5];
	double w[5];
	double full = measure(FULL, secs, dec, NULL, NULL, NULL, &e[0], &c[0], &w[0]);
	double crop = measure(CROP, secs, dec, NULL, NULL, NULL, &e[1], &c[1], &w[1]);
	double cgm = measure(CROP_GM, secs, dec, NULL, NULL, NULL, &e[4], &c[4], &w[4]);
	double u8 = measure(AUG_U8, secs, NULL, au8, out, &tu8, &e[2], &c[2], &w[2]);
	double f32 = measure(AUG_F32, secs, NULL, af32, out, &tf32, &e[3], &c[3], &w[3]);
	fprintf(stderr,
		"decode_ref: %zu files; errors full %zu crop %zu crop_gm %zu u8 %zu f32 %zu; "
		"per image: aug_u8 decode %.1f us + augment %.1f us, aug_f32 decode %.1f us + augment "
		"%.1f us\n",
		nfiles, e[0], e[1], e[4], e[2], e[3], (double)tu8.decode_ns / 1e3 / (double)c[2],
		(double)tu8.augment_ns / 1e3 / (double)c[2],
		(double)tf32.decode_ns / 1e3 / (double)c[3],
		(double)tf32.augment_ns / 1e3 / (double)c[3]);
	printf("{\"full_decode_img_per_s\":%.1f,\"crop_decode_img_per_s\":%.1f,"
	       "\"crop_decode_gm_img_per_s\":%.1f,\"aug_u8_img_per_s\":%.1f,"
	       "\"aug_f32_img_per_s\":%.1f,\"files\":%zu,\"clock\":\"thread_cpu\","
	       "\"wall_full\":%.1f,\"wall_crop\":%.1f,\"wall_crop_gm\":%.1f,"
	       "\"wall_aug_u8\":%.1f,\"wall_aug_f32\":%.1f}\n",
	       full, crop, cgm, u8, f32, nfiles, w[0], w[1], w[4], w[2], w[3]);
	rc = 0;
out_free:
	gm_aug_destroy(af32);
	gm_aug_destroy(au8);
	gm_jpeg_destroy(dec);
	free(out);
	for (size_t i = 0; i < nfiles; i++) {
		free(files[i].path);
		free(files[i].data);
	}
	free(files);
	return rc;
}
