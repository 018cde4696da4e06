/*
 * test_coef.c - coefficient output and its host path (coef.h, coef_math.h,
 * gm_jpeg_decode_coefs, gm_aug_coef_sample/finish): a slot written by a worker in
 * coefficient mode and finished on the host gives the CPU workers' bytes, train
 * and eval, uint8, float32 and float16, with colour jitter, over synthetic
 * images of every sampling, restart-marked (spliced) files, the odd-JPEG corpus
 * (tests/fuzz/corpus) and real photos (GM_PHOTOS, else /var/tmp/goldminer-photos
 * when on this machine, else the repository's twelve in tests/data/photos;
 * GM_COEF_ALL=1: every photo, else 60); the window
 * rebuilt equals libjpeg-turbo's region decode pixel for pixel at every scale;
 * files the form cannot carry travel as finished samples; malformed slots are
 * refused before use.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "goldminer/aug.h"
#include "goldminer/checksum.h"
#include "goldminer/coef.h"
#include "goldminer/jpeg.h"
#include "goldminer/loader.h"
#include "goldminer/pipeline.h"
#include "goldminer/synth.h"

#include "testutil.h"

#define SLOT_CAP (8u << 20)

static uint8_t *slot, *planes, *rgb, *ref, *out_cpu, *out_gpu;

static int setup(void **state)
{
	(void)state;
	slot = aligned_alloc(64, SLOT_CAP);
	planes = malloc(64u << 20);
	rgb = malloc(16u << 20);
	ref = malloc(16u << 20);
	out_cpu = aligned_alloc(64, 4u << 20);
	out_gpu = aligned_alloc(64, 4u << 20);
	return slot && planes && rgb && ref && out_cpu && out_gpu ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	free(slot);
	free(planes);
	free(rgb);
	free(ref);
	free(out_cpu);
	free(out_gpu);
	return 0;
}

static uint8_t *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *b = NULL;
	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0) {
		long n = ftell(f);
		rewind(f);
		if (n >= 0 && (b = malloc((size_t)n + 1)) &&
		    fread(b, 1, (size_t)n, f) != (size_t)n) {
			free(b);
			b = NULL;
		}
		*len = (size_t)n;
	}
	fclose(f);
	return b;
}

/* The specs every file goes through: train and eval, each output type; colour
 * jitter with train float32, eval uint8 and train float16. */
#define NSPECS 9
static void spec_n(struct gm_aug_spec *s, int i, uint32_t size)
{
	gm_aug_spec_default(s);
	s->size = size;
	s->resize = size + size / 7;
	s->mode = i % 2 ? GM_AUG_EVAL : GM_AUG_TRAIN;
	s->out = i < 2 ? GM_OUT_U8_HWC : i < 4 ? GM_OUT_F32_CHW : GM_OUT_F16_CHW;
	if (i >= 6) {
		s->mode = i == 7 ? GM_AUG_EVAL : GM_AUG_TRAIN;
		s->out = i == 6 ? GM_OUT_F32_CHW : i == 7 ? GM_OUT_U8_HWC : GM_OUT_F16_CHW;
		s->jitter[0][0] = 0.6f, s->jitter[0][1] = 1.4f;
		s->jitter[1][0] = 0.6f, s->jitter[1][1] = 1.4f;
		s->jitter[2][0] = 0.6f, s->jitter[2][1] = 1.4f;
		s->jitter[3][0] = -0.1f, s->jitter[3][1] = 0.1f;
	}
}

struct tally {
	uint32_t coefs, pixels, errors;
	uint64_t coef_bytes, u8_bytes;
};

/*
 * One file through spec i both ways for a few keys: the same return, the same
 * bytes. A COEFS slot is counted, with its bytes against the uint8 sample's.
 */
static void same_bytes(struct gm_aug *cpu, struct gm_aug *gpu, const struct gm_aug_spec *s,
		       const uint8_t *jpg, size_t len, const char *name, size_t cap,
		       struct tally *t)
{
	size_t ob = gm_aug_out_bytes(s);
	cap = cap ? cap : gm_coef_slot_bytes(ob);
	for (uint64_t k = 0; k < 3; k++) {
		uint64_t seed = 11 + k, epoch = k, id = 1000 + 7 * k;
		memset(out_gpu, 0xA5, ob);
		int rc = gm_aug_sample(cpu, jpg, len, seed, epoch, id, out_cpu, NULL);
		int rg = gm_aug_coef_sample(gpu, jpg, len, seed, epoch, id, slot, cap, NULL);
		if (rc != rg)
			fail_msg("%s: the CPU path returns %d, coefficient mode %d (%s)", name, rc,
				 rg, gm_aug_errmsg(gpu));
		if (rc) {
			t->errors++;
			continue;
		}
		const struct gm_coef_slot *sl = (const void *)slot;
		if (gm_aug_coef_finish(gpu, slot, cap, out_gpu))
			fail_msg("%s: finish: %s", name, gm_aug_errmsg(gpu));
		if (memcmp(out_cpu, out_gpu, ob))
			fail_msg("%s (key %llu): the host path's sample differs from the CPU's "
				 "(slot kind %u)",
				 name, (unsigned long long)k, sl->kind);
		/* the device's arithmetic (finish_math.h), element by element */
		memset(out_gpu, 0x5A, ob);
		if (gm_aug_coef_finish_shared(gpu, slot, cap, out_gpu))
			fail_msg("%s: shared finish: %s", name, gm_aug_errmsg(gpu));
		if (memcmp(out_cpu, out_gpu, ob))
			fail_msg("%s (key %llu): finish_math.h's sample differs from the CPU's "
				 "(slot kind %u, spec out %d, mode %d)",
				 name, (unsigned long long)k, sl->kind, (int)s->out, (int)s->mode);
		if (sl->kind == GM_COEF_KIND_COEFS) {
			t->coefs++;
			t->coef_bytes += sl->bytes;
			t->u8_bytes += (size_t)s->size * s->size * 3;
		} else {
			t->pixels++;
		}
	}
}

/* Every spec over one file, slots of cap bytes (0: gm_coef_slot_bytes's, the
 * smallest allowed). */
static void same_bytes_all(const uint8_t *jpg, size_t len, const char *name, uint32_t size,
			   size_t cap, struct tally *t)
{
	for (int i = 0; i < NSPECS; i++) {
		struct gm_aug_spec s;
		struct gm_aug *cpu, *gpu;
		spec_n(&s, i, size);
		assert_int_equal(gm_aug_create(&cpu, &s), 0);
		assert_int_equal(gm_aug_create(&gpu, &s), 0);
		same_bytes(cpu, gpu, &s, jpg, len, name, cap, t);
		gm_aug_destroy(cpu);
		gm_aug_destroy(gpu);
	}
}

static const unsigned kinds[] = {0, GM_SYNTH_444, GM_SYNTH_422, GM_SYNTH_GRAY, GM_SYNTH_FLAT};

static void test_host_path_gives_the_cpu_bytes_on_synthetic_images(void **state)
{
	(void)state;
	struct tally t = {0};
	const uint32_t dims[][2] = {{333, 250}, {97, 411}, {640, 427}, {64, 49}};
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++)
		for (size_t d = 0; d < sizeof(dims) / sizeof(dims[0]); d++) {
			size_t len;
			uint8_t *jpg =
			    gm_test_jpeg(dims[d][0], dims[d][1], k * 10 + d, kinds[k], &len);
			char name[96];
			assert_non_null(jpg);
			snprintf(name, sizeof(name), "synthetic %ux%u flags %#x", dims[d][0],
				 dims[d][1], kinds[k]);
			same_bytes_all(jpg, len, name, 56, SLOT_CAP, &t);
			free(jpg);
		}
	/* every one of these is baseline YCbCr or gray: each must travel as coefficients */
	assert_int_equal(t.pixels, 0);
	assert_int_equal(t.errors, 0);
	assert_true(t.coefs > 0);
}

/* Restart-marked files: the coefficients come from the spliced segments. */
static void test_host_path_gives_the_cpu_bytes_on_spliced_files(void **state)
{
	(void)state;
	struct tally t = {0};
	const uint32_t intervals[] = {1, 3, 8};
	for (size_t k = 0; k < 3; k++)
		for (size_t i = 0; i < sizeof(intervals) / sizeof(intervals[0]); i++) {
			size_t len, tl;
			uint8_t *jpg = gm_test_jpeg(500, 333, 40 + k, kinds[k], &len), *tr = NULL;
			char err[256], name[96];
			assert_non_null(jpg);
			assert_int_equal(gm_jpeg_restart_transcode(jpg, len, intervals[i], 0, &tr,
								   &tl, err, sizeof(err)),
					 0);
			snprintf(name, sizeof(name), "restart %u flags %#x", intervals[i],
				 kinds[k]);
			same_bytes_all(tr, tl, name, 64, SLOT_CAP, &t);
			free(tr);
			free(jpg);
		}
	assert_int_equal(t.pixels, 0);
	assert_true(t.coefs > 0);
}

/* Progressive and CMYK files cannot travel as coefficients, nor coefficients
 * over the slot's size: the slot carries the finished sample, the same bytes. */
static void test_unsupported_files_and_full_slots_carry_the_finished_sample(void **state)
{
	(void)state;
	const unsigned fl[] = {GM_SYNTH_PROGRESSIVE, GM_SYNTH_CMYK};
	for (size_t i = 0; i < 2; i++) {
		struct tally t = {0};
		size_t len;
		uint8_t *jpg = gm_test_jpeg(300, 200, 5 + i, fl[i], &len);
		assert_non_null(jpg);
		same_bytes_all(jpg, len, fl[i] == GM_SYNTH_CMYK ? "CMYK" : "progressive", 48,
			       SLOT_CAP, &t);
		assert_int_equal(t.coefs, 0);
		assert_int_equal(t.pixels, NSPECS * 3);
		free(jpg);
	}
	/* a noisy 4:4:4 image's window needs more than the smallest slot holds */
	struct tally t = {0};
	size_t len;
	uint8_t *jpg = gm_test_jpeg(400, 300, 9, GM_SYNTH_444, &len);
	assert_non_null(jpg);
	same_bytes_all(jpg, len, "4:4:4 in the smallest slot", 32, 0, &t);
	assert_true(t.pixels > 0);
	free(jpg);
}

/* Every file of a directory both ways (the same return code and bytes). */
static void corpus(const char *dir, struct tally *t)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char path[4200];
	assert_non_null(d);
	while ((e = readdir(d))) {
		size_t len;
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		uint8_t *b = slurp(path, &len);
		if (!b)
			continue;
		same_bytes_all(b, len, path, 40, SLOT_CAP, t);
		free(b);
	}
	closedir(d);
}

/* The odd JPEGs (fuzz corpora: truncated, corrupt, odd markers and sizes): the
 * same outcome both ways, the same bytes when decoded. */
static void test_odd_jpegs_same_outcome_and_bytes(void **state)
{
	(void)state;
	struct tally t = {0};
	corpus("tests/fuzz/corpus/jpeg", &t);
	corpus("tests/fuzz/corpus/splice", &t);
	print_message("# odd JPEGs: %u coefficient slots, %u finished samples, %u errors\n",
		      t.coefs, t.pixels, t.errors);
	assert_true(t.coefs > 100);
}

/* The window rebuilt from the coefficients is the region decode's, at every scale,
 * windows at every offset of the MCU grid. */
static void test_window_pixels_equal_the_region_decode(void **state)
{
	(void)state;
	struct gm_jpeg *j;
	struct gm_jpeg_info info;
	struct gm_jpeg_image img;
	assert_int_equal(gm_jpeg_create(&j, 0), 0);
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		size_t len;
		uint8_t *jpg = gm_test_jpeg(203, 141, 70 + k, kinds[k], &len);
		assert_non_null(jpg);
		for (uint32_t n = 1; n <= 8; n *= 2)
			for (uint32_t i = 0; i < 40; i++) {
				assert_int_equal(gm_jpeg_open(j, jpg, len, &info), 0);
				uint32_t sw = gm_jpeg_scaled_dim(info.width, n);
				uint32_t sh = gm_jpeg_scaled_dim(info.height, n);
				uint32_t x = (i * 7) % sw, y = (i * 5) % sh;
				uint32_t w = 1 + (i * 13) % (sw - x), h = 1 + (i * 11) % (sh - y);
				assert_int_equal(gm_jpeg_decode_region(j, n, x, y, w, h, &img), 0);
				for (uint32_t r = 0; r < h; r++)
					memcpy(ref + (size_t)r * w * 3, img.pixels + r * img.stride,
					       (size_t)w * 3);
				struct gm_coef_slot *s = (void *)slot;
				memset(s, 0, GM_COEF_HDR_BYTES);
				assert_int_equal(gm_jpeg_open(j, jpg, len, &info), 0);
				assert_int_equal(
				    gm_jpeg_decode_coefs(j, n, x, y, w, h, s, SLOT_CAP), 0);
				s->rx = x, s->ry = y, s->rw = w, s->rh = h;
				assert_int_equal(gm_coef_check(s, SLOT_CAP, 0, NULL, 0), 0);
				assert_int_equal(gm_coef_pixels(s, planes, rgb), 0);
				if (memcmp(rgb, ref, (size_t)w * h * 3))
					fail_msg("flags %#x scale %u/8 window %ux%u+%u+%u differs",
						 kinds[k], n, w, h, x, y);
			}
		free(jpg);
	}
	gm_jpeg_destroy(j);
}

/*
 * The window (x, y, w, h) of jpg at scale n/8 both ways: the region decode's
 * pixels into ref, the coefficients into the slot (checked), for the caller to
 * rebuild (gm_coef_pixels) and compare.
 */
static void window_both_ways(struct gm_jpeg *j, const uint8_t *jpg, size_t len, uint32_t n,
			     uint32_t x, uint32_t y, uint32_t w, uint32_t h)
{
	struct gm_jpeg_info info;
	struct gm_jpeg_image img;
	struct gm_coef_slot *s = (void *)slot;
	assert_int_equal(gm_jpeg_open(j, jpg, len, &info), 0);
	assert_int_equal(gm_jpeg_decode_region(j, n, x, y, w, h, &img), 0);
	for (uint32_t r = 0; r < h; r++)
		memcpy(ref + (size_t)r * w * 3, img.pixels + r * img.stride, (size_t)w * 3);
	memset(s, 0, GM_COEF_HDR_BYTES);
	assert_int_equal(gm_jpeg_open(j, jpg, len, &info), 0);
	assert_int_equal(gm_jpeg_decode_coefs(j, n, x, y, w, h, s, SLOT_CAP), 0);
	s->rx = x, s->ry = y, s->rw = w, s->rh = h;
	assert_int_equal(gm_coef_check(s, SLOT_CAP, 0, NULL, 0), 0);
}

/*
 * Quality 100 (quantiser steps of 1): values past -512..511, carried in wide
 * blocks (coef.h), beside narrow ones in the same slot: the window rebuilt equals
 * the region decode, and every spec's sample the CPU path's.
 */
static void test_large_values_travel_in_wide_blocks(void **state)
{
	(void)state;
	struct gm_jpeg *j;
	struct gm_jpeg_info info;
	struct gm_coef_slot *s = (void *)slot;
	struct tally t = {0};
	uint32_t wide = 0, narrow = 0;
	assert_int_equal(gm_jpeg_create(&j, 0), 0);
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		uint8_t *jpg = NULL;
		size_t len;
		assert_int_equal(gm_synth_jpeg_mem(211, 150, 90 + k, kinds[k], 100, &jpg, &len), 0);
		for (uint32_t n = 2; n <= 8; n *= 2) {
			assert_int_equal(gm_jpeg_open(j, jpg, len, &info), 0);
			uint32_t w = gm_jpeg_scaled_dim(info.width, n) - 3;
			uint32_t h = gm_jpeg_scaled_dim(info.height, n) - 2;
			window_both_ways(j, jpg, len, n, 3, 2, w, h);
			for (uint32_t c = 0; c < s->ncomp; c++)
				for (uint32_t b = 0; b < s->comp[c].nblocks; b++) {
					uint8_t cnt = slot[s->comp[c].off_counts + b];
					wide += (cnt & GM_COEF_WIDE) != 0;
					narrow += cnt && !(cnt & GM_COEF_WIDE);
				}
			assert_int_equal(gm_coef_pixels(s, planes, rgb), 0);
			if (memcmp(rgb, ref, (size_t)w * h * 3))
				fail_msg("quality 100, flags %#x, scale %u/8: the window differs",
					 kinds[k], n);
		}
		same_bytes_all(jpg, len, "quality 100", 48, SLOT_CAP, &t);
		free(jpg);
	}
	gm_jpeg_destroy(j);
	print_message("# quality 100: %u wide blocks, %u narrow\n", wide, narrow);
	assert_true(wide > 0 && narrow > 0);
	assert_int_equal(t.pixels, 0);
}

/*
 * Two corrupt files (fuzz_huff's finds, kept in tests/fuzz/corpus/huff) whose
 * blocks hold values that, dequantised, outgrow 16 bits (-2252 x 66 in one):
 * libjpeg-turbo's SIMD IDCT keeps 16- and 32-bit lanes there (coef_math.h's
 * opening comment), and the window rebuilt equals the region decode at every
 * scale only where coef_math.h keeps them too; then every spec's sample is the
 * CPU path's, and at least one of them travels as coefficients.
 */
static void test_values_past_16_bits_rebuild_as_the_simd_idct(void **state)
{
	(void)state;
	static const char *const files[] = {
	    "tests/fuzz/corpus/huff/4dd83a66ec080484f5a018e310e31b4c4b3f1156",
	    "tests/fuzz/corpus/huff/f0470429067325de70bb1ecc0dc41238c529c388",
	};
	struct gm_jpeg *j;
	struct gm_jpeg_info info;
	struct gm_coef_slot *s = (void *)slot;
	struct tally t = {0};
	assert_int_equal(gm_jpeg_create(&j, 0), 0);
	for (size_t f = 0; f < sizeof(files) / sizeof(files[0]); f++) {
		size_t len;
		uint8_t *jpg = slurp(files[f], &len);
		if (!jpg)
			fail_msg("%s: not found (run from the repository)", files[f]);
		for (uint32_t n = 1; n <= 8; n *= 2) {
			assert_int_equal(gm_jpeg_open(j, jpg, len, &info), 0);
			uint32_t w = gm_jpeg_scaled_dim(info.width, n);
			uint32_t h = gm_jpeg_scaled_dim(info.height, n);
			window_both_ways(j, jpg, len, n, 0, 0, w, h);
			assert_int_equal(gm_coef_pixels(s, planes, rgb), 0);
			if (memcmp(rgb, ref, (size_t)w * h * 3))
				fail_msg("%s, scale %u/8: the window differs", files[f], n);
		}
		same_bytes_all(jpg, len, files[f], 48, SLOT_CAP, &t);
		free(jpg);
	}
	gm_jpeg_destroy(j);
	assert_true(t.coefs > 0);
}

/*
 * The entropy decode's two builds (huff.c: BMI2 where the CPU has it, else the
 * baseline x86-64's; GM_NO_SIMD=1 at the handle's creation picks the second)
 * write the same slot, byte for byte, and decode the same region pixels: every
 * kind of test image, whole (its buffer ends with EOI: huff.c's TOP_UP) and cut
 * short (REFILL one symbol at a time), at every scale, 40 windows each. Skips on a
 * CPU without BMI2 (one build only).
 */
static void test_decode_same_bytes_with_and_without_bmi2(void **state)
{
	(void)state;
#if defined(__x86_64__)
	__builtin_cpu_init();
	if (!__builtin_cpu_supports("bmi2")) {
		skip();
		return;
	}
#else
	skip();
	return;
#endif
	struct gm_jpeg *j, *base;
	struct gm_jpeg_info info;
	struct gm_jpeg_image img;
	uint8_t *other = aligned_alloc(64, SLOT_CAP);
	assert_non_null(other);
	assert_int_equal(gm_jpeg_create(&j, 0), 0);
	setenv("GM_NO_SIMD", "1", 1);
	assert_int_equal(gm_jpeg_create(&base, 0), 0);
	unsetenv("GM_NO_SIMD");
	uint64_t coefs = 0;
	for (size_t k = 0; k < 2 * sizeof(kinds) / sizeof(kinds[0]); k++) {
		size_t len;
		uint8_t *jpg = gm_test_jpeg(203, 141, 90 + k, kinds[k / 2], &len);
		assert_non_null(jpg);
		if (k % 2)
			len -= len / 5; /* no EOI: the last fifth of the data gone */
		for (uint32_t n = 1; n <= 8; n *= 2)
			for (uint32_t i = 0; i < 40; i++) {
				if (gm_jpeg_open(j, jpg, len, &info))
					fail_msg("test image %zu does not open", k);
				assert_int_equal(gm_jpeg_open(base, jpg, len, &info), 0);
				uint32_t sw = gm_jpeg_scaled_dim(info.width, n);
				uint32_t sh = gm_jpeg_scaled_dim(info.height, n);
				uint32_t x = (i * 7) % sw, y = (i * 5) % sh;
				uint32_t w = 1 + (i * 13) % (sw - x), h = 1 + (i * 11) % (sh - y);
				struct gm_coef_slot *a = (void *)slot, *b = (void *)other;
				/* the same bytes under both (the layout's alignment gaps
				 * are not written) */
				memset(slot, 0xA5, 1u << 16);
				memset(other, 0xA5, 1u << 16);
				int ra = gm_jpeg_decode_coefs(j, n, x, y, w, h, a, SLOT_CAP);
				int rb = gm_jpeg_decode_coefs(base, n, x, y, w, h, b, SLOT_CAP);
				assert_int_equal(ra, rb);
				if (!ra) {
					assert_int_equal(a->bytes, b->bytes);
					assert_true(a->bytes <= 1u << 16);
					if (memcmp(slot, other, a->bytes))
						fail_msg("image %zu scale %u/8 window %ux%u+%u+%u: "
							 "the slots differ",
							 k, n, w, h, x, y);
					for (uint32_t c = 0; c < a->ncomp; c++)
						coefs += a->comp[c].nnz;
				}
				/* the CPU path's decode (decode_mcu) */
				assert_int_equal(gm_jpeg_open(j, jpg, len, &info), 0);
				assert_int_equal(gm_jpeg_open(base, jpg, len, &info), 0);
				ra = gm_jpeg_decode_region(j, n, x, y, w, h, &img);
				for (uint32_t r = 0; !ra && r < h; r++)
					memcpy(ref + (size_t)r * w * 3, img.pixels + r * img.stride,
					       (size_t)w * 3);
				rb = gm_jpeg_decode_region(base, n, x, y, w, h, &img);
				assert_int_equal(ra, rb);
				for (uint32_t r = 0; !ra && r < h; r++)
					if (memcmp(ref + (size_t)r * w * 3,
						   img.pixels + r * img.stride, (size_t)w * 3))
						fail_msg("image %zu scale %u/8 window %ux%u+%u+%u: "
							 "pixels differ in row %u",
							 k, n, w, h, x, y, r);
			}
		free(jpg);
	}
	assert_true(coefs > 100000);
	gm_jpeg_destroy(j);
	gm_jpeg_destroy(base);
	free(other);
}

/*
 * A window's coefficients go into a slot of exactly their bytes, and one byte
 * less is -ENOSPC (the decode stops once they cannot fit: never before): every
 * kind of test image, scales 8/8 and 4/8, 10 windows each.
 */
static void test_coefficients_fit_a_slot_of_their_bytes_exactly(void **state)
{
	(void)state;
	struct gm_jpeg *j;
	struct gm_jpeg_info info;
	struct gm_coef_slot *s = (void *)slot;
	assert_int_equal(gm_jpeg_create(&j, 0), 0);
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		size_t len;
		uint8_t *jpg = gm_test_jpeg(203, 141, 110 + k, kinds[k], &len);
		assert_non_null(jpg);
		for (uint32_t n = 4; n <= 8; n *= 2)
			for (uint32_t i = 0; i < 10; i++) {
				assert_int_equal(gm_jpeg_open(j, jpg, len, &info), 0);
				uint32_t sw = gm_jpeg_scaled_dim(info.width, n);
				uint32_t sh = gm_jpeg_scaled_dim(info.height, n);
				uint32_t x = (i * 17) % sw, y = (i * 7) % sh;
				uint32_t w = 1 + (i * 31) % (sw - x), h = 1 + (i * 23) % (sh - y);
				assert_int_equal(
				    gm_jpeg_decode_coefs(j, n, x, y, w, h, s, SLOT_CAP), 0);
				uint32_t used = s->bytes;
				assert_int_equal(gm_jpeg_open(j, jpg, len, &info), 0);
				assert_int_equal(gm_jpeg_decode_coefs(j, n, x, y, w, h, s, used),
						 0);
				assert_int_equal(s->bytes, used);
				assert_int_equal(gm_jpeg_open(j, jpg, len, &info), 0);
				assert_int_equal(
				    gm_jpeg_decode_coefs(j, n, x, y, w, h, s, used - 1), -ENOSPC);
			}
		free(jpg);
	}
	gm_jpeg_destroy(j);
}

/*
 * A window whose guessed bytes (gm_jpeg_coef_guess) pass the slot's size takes
 * the CPU path before its decode: in a slot its coefficients would just fit
 * (gm_jpeg_decode_coefs's contract stays exact), the slot carries the finished
 * sample, the CPU path's bytes.
 */
static void test_a_window_guessed_past_the_slot_takes_the_cpu_path(void **state)
{
	(void)state;
	struct gm_aug_spec s;
	struct gm_aug *cpu, *gpu;
	struct gm_jpeg *j;
	struct gm_jpeg_info info;
	const struct gm_coef_slot *sl = (const void *)slot;
	uint32_t tried = 0;
	gm_aug_spec_default(&s);
	s.size = 24;
	assert_int_equal(gm_aug_create(&cpu, &s), 0);
	assert_int_equal(gm_aug_create(&gpu, &s), 0);
	assert_int_equal(gm_jpeg_create(&j, 0), 0);
	size_t ob = gm_aug_out_bytes(&s), least = gm_coef_slot_bytes(ob);
	for (uint64_t seed = 1; seed <= 40; seed++) {
		size_t len;
		uint8_t *jpg = gm_test_jpeg(160, 120, seed, kinds[seed % 5], &len);
		assert_non_null(jpg);
		assert_int_equal(
		    gm_aug_coef_sample(gpu, jpg, len, seed, 0, 5, slot, SLOT_CAP, NULL), 0);
		assert_int_equal(sl->kind, GM_COEF_KIND_COEFS);
		size_t need = sl->bytes;
		assert_int_equal(gm_jpeg_open(j, jpg, len, &info), 0);
		uint64_t guess = gm_jpeg_coef_guess(j, sl->scale, sl->rw, sl->rh);
		gm_jpeg_abort(j);
		assert_true(guess > GM_COEF_HDR_BYTES);
		if (need < least || guess <= need) {
			free(jpg);
			continue; /* one the guess lets through: the decode decides */
		}
		tried++;
		assert_int_equal(gm_aug_sample(cpu, jpg, len, seed, 0, 5, out_cpu, NULL), 0);
		assert_int_equal(gm_aug_coef_sample(gpu, jpg, len, seed, 0, 5, slot, need, NULL),
				 0);
		assert_int_equal(sl->kind, GM_COEF_KIND_PIXELS);
		assert_memory_equal(slot + GM_COEF_HDR_BYTES, out_cpu, ob);
		free(jpg);
	}
	print_message("# %u windows guessed past a slot their coefficients fit\n", tried);
	assert_true(tried > 0);
	gm_jpeg_destroy(j);
	gm_aug_destroy(cpu);
	gm_aug_destroy(gpu);
}

/* A good slot to break: a 4:2:0 image's, train, uint8. */
static size_t good_slot(struct gm_aug **a, struct gm_aug_spec *s)
{
	size_t len;
	uint8_t *jpg = gm_test_jpeg(320, 240, 3, 0, &len);
	assert_non_null(jpg);
	gm_aug_spec_default(s);
	s->size = 64;
	assert_int_equal(gm_aug_create(a, s), 0);
	size_t cap = SLOT_CAP;
	assert_int_equal(gm_aug_coef_sample(*a, jpg, len, 1, 2, 3, slot, cap, NULL), 0);
	free(jpg);
	assert_int_equal(((struct gm_coef_slot *)(void *)slot)->kind, GM_COEF_KIND_COEFS);
	return cap;
}

static void expect_refused(struct gm_aug *a, size_t cap, const char *what)
{
	const void *plan = NULL;
	if (gm_aug_coef_finish(a, slot, cap, out_gpu) != -EBADMSG)
		fail_msg("a slot with %s was taken", what);
	assert_non_null(strstr(gm_aug_errmsg(a), "coefficient slot") ? "" : NULL);
	/* the device's path: no plan made for it, nor a host run */
	if (gm_aug_coef_finish_shared(a, slot, cap, out_gpu) != -EBADMSG ||
	    gm_aug_coef_plan(a, slot, cap, &plan, NULL) != -EBADMSG || plan)
		fail_msg("a slot with %s was taken by the device's path", what);
}

static void test_malformed_slots_are_refused_before_use(void **state)
{
	(void)state;
	struct gm_aug *a;
	struct gm_aug_spec s;
	size_t cap = good_slot(&a, &s);
	struct gm_coef_slot *sl = (void *)slot, keep = *sl;
	assert_int_equal(gm_aug_coef_finish(a, slot, cap, out_gpu), 0);

	sl->magic ^= 1;
	expect_refused(a, cap, "a bad magic");
	*sl = keep, sl->version = GM_COEF_VERSION - 1;
	expect_refused(a, cap, "another version");
	*sl = keep;
	expect_refused(a, sl->bytes - 1, "fewer bytes readable than it says");
	sl->comp[1].nnz++;
	expect_refused(a, cap, "counts that do not add up");
	*sl = keep, sl->comp[2].off_ent = sl->bytes - 1;
	expect_refused(a, cap, "entries past its end");
	*sl = keep, sl->comp[0].nent++;
	expect_refused(a, cap, "entries unlike its counts");
	*sl = keep, sl->comp[0].nblocks--;
	expect_refused(a, cap, "blocks unlike its rectangle");
	*sl = keep, sl->rx = sl->comp[0].dw;
	expect_refused(a, cap, "a window outside the image");
	*sl = keep, sl->comp[0].bx0 += 2;
	expect_refused(a, cap, "blocks that do not cover the window");
	*sl = keep, sl->mcols = 1u << 31, sl->mrows = 1u << 31; /* its blocks wrap to 0 */
	for (int c = 0; c < 3; c++)
		sl->comp[c].mw = sl->comp[c].mh = 2, sl->comp[c].nblocks = sl->comp[c].nnz = 0;
	expect_refused(a, cap, "an MCU rectangle past any image");
	*sl = keep, sl->scale = 3;
	expect_refused(a, cap, "scale 3/8");
	*sl = keep;
	uint8_t *cnt = slot + sl->comp[0].off_counts, keep_cnt = cnt[0];
	cnt[0] = 65;
	expect_refused(a, cap, "a block of 65 coefficients");
	cnt[0] = keep_cnt;
	/* a wide block (its entries doubled) whose first position is past 63 */
	uint32_t b = 0;
	while (b < sl->comp[0].nblocks && cnt[b] == 0)
		b++;
	assert_true(b < sl->comp[0].nblocks);
	uint8_t keep_b = cnt[b];
	uint16_t *ent = (uint16_t *)(void *)(slot + sl->comp[0].off_ent), keep_e[128];
	memcpy(keep_e, ent, 4u * keep_b);
	for (uint32_t e = 0; e < keep_b; e++)
		ent[2 * e] = (uint16_t)e, ent[2 * e + 1] = 1000;
	cnt[b] |= GM_COEF_WIDE, sl->comp[0].nent += keep_b;
	assert_int_equal(gm_coef_check(sl, cap, 0, NULL, 0), 0);
	ent[2 * (keep_b - 1u)] = 64;
	expect_refused(a, cap, "a wide block's position past 63");
	cnt[b] = keep_b, sl->comp[0].nent = keep.comp[0].nent;
	memcpy(ent, keep_e, 4u * keep_b);
	const void *plan = NULL; /* the slot itself again: a plan, its taps for both axes */
	size_t pb = 0;
	assert_int_equal(gm_aug_coef_plan(a, slot, cap, &plan, &pb), 0);
	assert_non_null(plan);
	assert_true(pb > 2 * 4 * 3 * (size_t)s.size);
	gm_aug_destroy(a);
}

/* The loader's batches (seed, epoch, batch) of one mode: each batch's samples
 * (finished on the host from their slots when gpu_decode) and labels, hashed. */
static void loader_batches(const char *dir, bool gpu, uint64_t *hash, uint32_t *nb, uint32_t *ncoef)
{
	struct gm_loader_opts o;
	struct gm_loader *l;
	struct gm_batch b;
	struct gm_aug *a = NULL;
	char err[512];
	gm_loader_opts_default(&o);
	o.root = dir;
	o.pipeline = "read | decode | random_resized_crop 64 | flip 0.5 | to_chw_f32 | batch 16";
	o.workers = 2;
	o.seed = 9;
	o.epochs = 2;
	o.gpu_decode = gpu;
	if (gm_loader_open(&l, &o, err, sizeof(err)))
		fail_msg("gm_loader_open: %s", err);
	struct gm_pipeline *p; /* the consumer finishes under the workers' spec */
	assert_int_equal(gm_pipeline_parse(o.pipeline, &p, err, sizeof(err)), 0);
	assert_int_equal(gm_aug_create(&a, gm_pipeline_aug(p)), 0);
	size_t ob = gm_aug_out_bytes(gm_pipeline_aug(p));
	gm_pipeline_free(p);
	*hash = GM_CHECKSUM_INIT, *nb = 0;
	while (gm_loader_next(l, &b) == 0) {
		assert_int_equal(b.sample_bytes, gpu ? gm_coef_slot_bytes(ob) : ob);
		for (uint32_t i = 0; i < b.size; i++) {
			const uint8_t *smp = (const uint8_t *)b.data + (size_t)i * b.sample_bytes;
			if (gpu) {
				*ncoef += ((const struct gm_coef_slot *)(const void *)smp)->kind ==
					  GM_COEF_KIND_COEFS;
				if (gm_aug_coef_finish(a, smp, b.sample_bytes, out_gpu))
					fail_msg("finish: %s", gm_aug_errmsg(a));
				smp = out_gpu;
			}
			*hash = gm_checksum64(*hash, smp, ob);
		}
		*hash = gm_checksum64(*hash, b.labels, b.size * sizeof(int32_t));
		(*nb)++;
		gm_loader_release(l, &b);
	}
	gm_aug_destroy(a);
	gm_loader_close(l);
}

/* gpu_decode: the ring carries coefficient slots; finished on the host, every
 * batch is the CPU workers' (two workers, two epochs). */
static void test_loader_gpu_decode_batches_finish_to_the_cpu_bytes(void **state)
{
	(void)state;
	char dir[256], err[256];
	assert_int_equal(gm_test_tmpdir(dir, sizeof(dir), "gm-coef"), 0);
	assert_int_equal(gm_synth_write(dir, 96, 3, 5, 0, NULL, err, sizeof(err)), 0);
	uint64_t h_cpu, h_gpu;
	uint32_t n_cpu, n_gpu, ncoef = 0, none = 0;
	loader_batches(dir, false, &h_cpu, &n_cpu, &none);
	loader_batches(dir, true, &h_gpu, &n_gpu, &ncoef);
	gm_test_rm_tree(dir);
	assert_true(n_cpu >= 6);
	assert_int_equal(n_gpu, n_cpu);
	print_message("# gpu_decode: %u batches, %u samples as coefficients\n", n_gpu, ncoef);
	assert_true(ncoef > 0);
	assert_true(h_cpu == h_gpu);
}

/* The real photos, when present: same bytes for every spec, and the coefficient
 * bytes against the uint8 sample's (224 x 224, the default), printed. */
static void test_host_path_gives_the_cpu_bytes_on_photos(void **state)
{
	(void)state;
	const char *dir = getenv("GM_PHOTOS"), *all = getenv("GM_COEF_ALL");
	char pat[4200];
	glob_t g;
	snprintf(pat, sizeof(pat), "%s/*/*.jpg", dir && *dir ? dir : "/var/tmp/goldminer-photos");
	if ((glob(pat, 0, NULL, &g) || g.gl_pathc == 0) && !(dir && *dir)) {
		/* no larger set on this machine: the repository's twelve (PROVENANCE.csv) */
		globfree(&g);
		snprintf(pat, sizeof(pat), "tests/data/photos/*/*.jpg");
		if (glob(pat, 0, NULL, &g) || g.gl_pathc < 12)
			fail_msg(
			    "no photos: neither %s nor tests/data/photos (run from the repository)",
			    "/var/tmp/goldminer-photos");
	} else if (g.gl_pathc == 0) {
		fail_msg("GM_PHOTOS=%s: no */*.jpg there", dir);
	}
	struct tally t = {0};
	size_t want = all && all[0] == '1' ? g.gl_pathc : 60;
	size_t step = g.gl_pathc > want ? g.gl_pathc / want : 1, done = 0;
	for (size_t i = 0; i < g.gl_pathc && done < want; i += step, done++) {
		size_t len;
		uint8_t *b = slurp(g.gl_pathv[i], &len);
		assert_non_null(b);
		same_bytes_all(b, len, g.gl_pathv[i], 224, 0, &t);
		free(b);
	}
	print_message("# %zu photos x %d specs x 3 keys: %u coefficient slots (%.0f bytes each, "
		      "%.3f of the uint8 sample), %u finished samples, %u errors\n",
		      done, NSPECS, t.coefs, t.coefs ? (double)t.coef_bytes / t.coefs : 0.0,
		      t.u8_bytes ? (double)t.coef_bytes / (double)t.u8_bytes : 0.0, t.pixels,
		      t.errors);
	assert_true(t.coef_bytes < t.u8_bytes);
	globfree(&g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_host_path_gives_the_cpu_bytes_on_synthetic_images),
	    cmocka_unit_test(test_host_path_gives_the_cpu_bytes_on_spliced_files),
	    cmocka_unit_test(test_unsupported_files_and_full_slots_carry_the_finished_sample),
	    cmocka_unit_test(test_odd_jpegs_same_outcome_and_bytes),
	    cmocka_unit_test(test_window_pixels_equal_the_region_decode),
	    cmocka_unit_test(test_large_values_travel_in_wide_blocks),
	    cmocka_unit_test(test_values_past_16_bits_rebuild_as_the_simd_idct),
	    cmocka_unit_test(test_decode_same_bytes_with_and_without_bmi2),
	    cmocka_unit_test(test_coefficients_fit_a_slot_of_their_bytes_exactly),
	    cmocka_unit_test(test_a_window_guessed_past_the_slot_takes_the_cpu_path),
	    cmocka_unit_test(test_malformed_slots_are_refused_before_use),
	    cmocka_unit_test(test_loader_gpu_decode_batches_finish_to_the_cpu_bytes),
	    cmocka_unit_test(test_host_path_gives_the_cpu_bytes_on_photos),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
