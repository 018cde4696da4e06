/*
 * test_aug.c - per-sample augmentation (core/aug.c).
 *
 * The crop parameters are internal, so they are observed through the pixels: a
 * "coordinate image" stores x in red and y in green (256x256, quality 100, 4:4:4),
 * and the corners of an output tell which window of the source it shows.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

#include "goldminer/aug.h"
#include "goldminer/synth.h"

#include "../core/aug_simd.h" /* the kernels themselves */
#include "../core/aug_test.h" /* which kernels made an output; the table builders */

/* Encode w x h RGB pixels at quality 100, no subsampling. *out is malloc'ed. */
static void encode(const uint8_t *rgb, uint32_t w, uint32_t h, uint8_t **out, size_t *len)
{
	struct jpeg_compress_struct c;
	struct jpeg_error_mgr err;
	unsigned char *mem = NULL;
	unsigned long ml = 0;
	c.err = jpeg_std_error(&err);
	jpeg_create_compress(&c);
	jpeg_mem_dest(&c, &mem, &ml);
	c.image_width = w;
	c.image_height = h;
	c.input_components = 3;
	c.in_color_space = JCS_RGB;
	jpeg_set_defaults(&c);
	jpeg_set_quality(&c, 100, TRUE);
	c.comp_info[0].h_samp_factor = c.comp_info[0].v_samp_factor = 1;
	jpeg_start_compress(&c, TRUE);
	while (c.next_scanline < h) {
		JSAMPROW row = (JSAMPROW)(rgb + (size_t)c.next_scanline * w * 3);
		jpeg_write_scanlines(&c, &row, 1);
	}
	jpeg_finish_compress(&c);
	jpeg_destroy_compress(&c);
	*out = mem;
	*len = ml;
}

static uint8_t *coord_jpeg(size_t *len)
{
	uint8_t *rgb = malloc(256 * 256 * 3), *out;
	assert_non_null(rgb);
	for (int y = 0; y < 256; y++)
		for (int x = 0; x < 256; x++) {
			rgb[(y * 256 + x) * 3] = (uint8_t)x;
			rgb[(y * 256 + x) * 3 + 1] = (uint8_t)y;
			rgb[(y * 256 + x) * 3 + 2] = 128;
		}
	encode(rgb, 256, 256, &out, len);
	free(rgb);
	return out;
}

static uint8_t *synth(uint32_t w, uint32_t h, uint64_t seed, unsigned flags, size_t *len)
{
	uint8_t *buf;
	assert_int_equal(gm_synth_jpeg_mem(w, h, seed, flags, 90, &buf, len), 0);
	return buf;
}

static struct gm_aug *make_aug(enum gm_aug_mode mode, enum gm_out_type out, float flip_p)
{
	struct gm_aug_spec s;
	struct gm_aug *a;
	gm_aug_spec_default(&s);
	s.mode = mode;
	s.out = out;
	s.flip_p = flip_p;
	assert_int_equal(gm_aug_create(&a, &s), 0);
	return a;
}

static void test_defaults_and_out_bytes(void **state)
{
	struct gm_aug_spec s;
	(void)state;
	gm_aug_spec_default(&s);
	assert_int_equal(s.mode, GM_AUG_TRAIN);
	assert_int_equal(s.size, 224);
	assert_int_equal(s.resize, 256);
	assert_int_equal(s.out, GM_OUT_U8_HWC);
	assert_true(fabsf(s.mean[0] - 0.485f) < 1e-6f && fabsf(s.std[2] - 0.225f) < 1e-6f);
	assert_int_equal(gm_aug_out_bytes(&s), 224 * 224 * 3);
	s.out = GM_OUT_F32_CHW;
	assert_int_equal(gm_aug_out_bytes(&s), 224 * 224 * 3 * 4);
	s.size = 32;
	assert_int_equal(gm_aug_out_bytes(&s), 32 * 32 * 12);
	s.out = GM_OUT_F16_CHW;
	assert_int_equal(gm_aug_out_bytes(&s), 32 * 32 * 6);
}

static void test_bad_specs(void **state)
{
	struct gm_aug_spec s;
	struct gm_aug *a = NULL;
	(void)state;
	gm_aug_spec_default(&s);
	s.size = 0;
	assert_int_equal(gm_aug_create(&a, &s), -EINVAL);
	gm_aug_spec_default(&s);
	s.scale_min = 0.9f, s.scale_max = 0.5f;
	assert_int_equal(gm_aug_create(&a, &s), -EINVAL);
	gm_aug_spec_default(&s);
	s.ratio_min = 0;
	assert_int_equal(gm_aug_create(&a, &s), -EINVAL);
	gm_aug_spec_default(&s);
	s.flip_p = 1.5f;
	assert_int_equal(gm_aug_create(&a, &s), -EINVAL);
	gm_aug_spec_default(&s);
	s.std[1] = 0;
	assert_int_equal(gm_aug_create(&a, &s), -EINVAL);
	gm_aug_spec_default(&s);
	s.mode = GM_AUG_EVAL;
	s.resize = 200; /* smaller than the 224 crop */
	assert_int_equal(gm_aug_create(&a, &s), -EINVAL);
	gm_aug_spec_default(&s);
	s.mode = (enum gm_aug_mode)7;
	assert_int_equal(gm_aug_create(&a, &s), -EINVAL);
	gm_aug_spec_default(&s);
	s.out = (enum gm_out_type)9;
	assert_int_equal(gm_aug_create(&a, &s), -EINVAL);
	assert_null(a);
	gm_aug_destroy(NULL);
}

/* A negative max_pixels cast to uint64_t is refused, never "no limit"; the check
 * names the field and its range. */
static void test_max_pixels_out_of_range_is_refused(void **state)
{
	struct gm_aug_spec s;
	struct gm_aug *a = NULL;
	char err[200];
	(void)state;
	gm_aug_spec_default(&s);
	s.max_pixels = (uint64_t)-1;
	assert_int_equal(gm_aug_create(&a, &s), -EINVAL);
	assert_null(a);
	assert_int_equal(gm_aug_spec_check(&s, err, sizeof(err)), -EINVAL);
	assert_string_equal(
	    err, "invalid transform spec: max_pixels must be 0 (the default) .. 1000000000000");
	s.max_pixels = 1000000000001ull;
	assert_int_equal(gm_aug_create(&a, &s), -EINVAL);
	for (int k = 0; k < 2; k++) {
		s.max_pixels = k ? 1000000000000ull : 0; /* the largest, and the default */
		assert_int_equal(gm_aug_spec_check(&s, err, sizeof(err)), 0);
		assert_int_equal(gm_aug_create(&a, &s), 0);
		gm_aug_destroy(a);
	}
	gm_aug_spec_default(&s);
	s.flip_p = 1.5f;
	assert_int_equal(gm_aug_spec_check(&s, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "invalid transform spec: flip_p must be in [0, 1]");
}

static void test_deterministic(void **state)
{
	size_t len;
	uint8_t *jpg = synth(500, 375, 1, 0, &len);
	struct gm_aug *a = make_aug(GM_AUG_TRAIN, GM_OUT_U8_HWC, 0.5f);
	struct gm_aug *b = make_aug(GM_AUG_TRAIN, GM_OUT_U8_HWC, 0.5f);
	size_t n = 224 * 224 * 3;
	uint8_t *o1 = malloc(n), *o2 = malloc(n), *o3 = malloc(n);
	(void)state;
	assert_int_equal(gm_aug_sample(a, jpg, len, 42, 3, 17, o1, NULL), 0);
	/* another sample in between must not matter */
	assert_int_equal(gm_aug_sample(b, jpg, len, 42, 3, 99, o2, NULL), 0);
	assert_int_equal(gm_aug_sample(b, jpg, len, 42, 3, 17, o2, NULL), 0);
	assert_memory_equal(o1, o2, n);
	/* different sample id, epoch or seed: different crop */
	assert_int_equal(gm_aug_sample(a, jpg, len, 42, 3, 18, o3, NULL), 0);
	assert_memory_not_equal(o1, o3, n);
	assert_int_equal(gm_aug_sample(a, jpg, len, 42, 4, 17, o3, NULL), 0);
	assert_memory_not_equal(o1, o3, n);
	assert_int_equal(gm_aug_sample(a, jpg, len, 43, 3, 17, o3, NULL), 0);
	assert_memory_not_equal(o1, o3, n);
	gm_aug_destroy(a);
	gm_aug_destroy(b);
	free(o1);
	free(o2);
	free(o3);
	free(jpg);
}

/* Read the source window an output shows, from the coordinate image's corners. */
static void window_of(const uint8_t *o, double *x0, double *y0, double *x1, double *y1)
{
	const uint8_t *tl = o, *br = o + (223 * 224 + 223) * 3;
	/* pixel centres: the first/last output pixels sit half a step inside */
	double sx = (br[0] - tl[0]) / 223.0, sy = (br[1] - tl[1]) / 223.0;
	*x0 = tl[0] - sx / 2, *x1 = br[0] + sx / 2 + 1;
	*y0 = tl[1] - sy / 2, *y1 = br[1] + sy / 2 + 1;
}

static void test_rrc_within_bounds(void **state)
{
	size_t len;
	uint8_t *jpg = coord_jpeg(&len);
	struct gm_aug *a = make_aug(GM_AUG_TRAIN, GM_OUT_U8_HWC, 0.0f);
	uint8_t *o = malloc(224 * 224 * 3);
	double amin = 2, amax = 0;
	(void)state;
	for (uint64_t id = 0; id < 300; id++) {
		double x0, y0, x1, y1;
		assert_int_equal(gm_aug_sample(a, jpg, len, 5, 0, id, o, NULL), 0);
		window_of(o, &x0, &y0, &x1, &y1);
		double w = x1 - x0, h = y1 - y0;
		double area = w * h / (256.0 * 256.0), ratio = w / h;
		/* tolerance: JPEG error and the filter blur the corner readings */
		assert_true(area > 0.08 * 0.8 && area < 1.0 * 1.1);
		if (w > 60 && h > 60)
			assert_true(ratio > 0.75 * 0.9 && ratio < 4.0 / 3.0 * 1.1);
		assert_true(x0 > -3 && y0 > -3 && x1 < 259 && y1 < 259);
		/* not flipped: red grows to the right */
		assert_true(o[(112 * 224 + 200) * 3] > o[(112 * 224 + 20) * 3]);
		amin = area < amin ? area : amin;
		amax = area > amax ? area : amax;
	}
	/* the draws cover the scale range */
	assert_true(amin < 0.2);
	assert_true(amax > 0.8);
	gm_aug_destroy(a);
	free(o);
	free(jpg);
}

static void test_flip_mirrors(void **state)
{
	size_t len, n = 224 * 224 * 3;
	uint8_t *jpg = synth(500, 375, 8, 0, &len);
	struct gm_aug *a = make_aug(GM_AUG_TRAIN, GM_OUT_U8_HWC, 0.0f);
	struct gm_aug *b = make_aug(GM_AUG_TRAIN, GM_OUT_U8_HWC, 1.0f);
	struct gm_aug *c = make_aug(GM_AUG_TRAIN, GM_OUT_U8_HWC, 0.5f);
	uint8_t *o1 = malloc(n), *o2 = malloc(n), *o3 = malloc(n);
	int flips = 0;
	(void)state;
	for (uint64_t id = 0; id < 40; id++) {
		assert_int_equal(gm_aug_sample(a, jpg, len, 1, 0, id, o1, NULL), 0);
		assert_int_equal(gm_aug_sample(b, jpg, len, 1, 0, id, o2, NULL), 0);
		for (int y = 0; y < 224; y++)
			for (int x = 0; x < 224; x++)
				assert_memory_equal(o1 + (y * 224 + x) * 3,
						    o2 + (y * 224 + 223 - x) * 3, 3);
		assert_memory_not_equal(o1, o2, n);
		/* p = 0.5: each output is one of the two */
		assert_int_equal(gm_aug_sample(c, jpg, len, 1, 0, id, o3, NULL), 0);
		if (memcmp(o3, o2, n) == 0)
			flips++;
		else
			assert_memory_equal(o3, o1, n);
	}
	assert_in_range(flips, 8, 32);
	gm_aug_destroy(a);
	gm_aug_destroy(b);
	gm_aug_destroy(c);
	free(o1);
	free(o2);
	free(o3);
	free(jpg);
}

static void test_float_normalisation(void **state)
{
	size_t len;
	uint8_t *jpg = synth(320, 240, 3, 0, &len);
	struct gm_aug *a = make_aug(GM_AUG_TRAIN, GM_OUT_U8_HWC, 0.5f);
	struct gm_aug *f = make_aug(GM_AUG_TRAIN, GM_OUT_F32_CHW, 0.5f);
	uint8_t *o = malloc(224 * 224 * 3);
	float *p = malloc(224 * 224 * 3 * sizeof(float));
	static const double mean[3] = {0.485, 0.456, 0.406}, sd[3] = {0.229, 0.224, 0.225};
	(void)state;
	for (uint64_t id = 0; id < 4; id++) {
		assert_int_equal(gm_aug_sample(a, jpg, len, 2, 1, id, o, NULL), 0);
		assert_int_equal(gm_aug_sample(f, jpg, len, 2, 1, id, p, NULL), 0);
		for (int c = 0; c < 3; c++)
			for (int i = 0; i < 224 * 224; i++) {
				double want = (o[i * 3 + c] / 255.0 - mean[c]) / sd[c];
				if (fabs(p[c * 224 * 224 + i] - want) > 1e-5)
					fail_msg("c %d i %d: %f want %f", c, i,
						 p[c * 224 * 224 + i], want);
			}
	}
	/* a known value: 255 in channel 0 */
	assert_true(fabs((255 / 255.0 - 0.485) / 0.229 - 2.2489083) < 1e-6);
	gm_aug_destroy(a);
	gm_aug_destroy(f);
	free(o);
	free(p);
	free(jpg);
}

static void test_eval_center_crop(void **state)
{
	size_t len;
	uint8_t *jpg = coord_jpeg(&len);
	struct gm_aug *a = make_aug(GM_AUG_EVAL, GM_OUT_U8_HWC, 0.5f);
	uint8_t *o1 = malloc(224 * 224 * 3), *o2 = malloc(224 * 224 * 3);
	(void)state;
	/* 256x256 resized to 256 is itself; the centre 224 starts at 16 */
	assert_int_equal(gm_aug_sample(a, jpg, len, 1, 0, 0, o1, NULL), 0);
	assert_in_range(o1[0], 14, 18);
	assert_in_range(o1[1], 14, 18);
	assert_in_range(o1[(223 * 224 + 223) * 3], 237, 241);
	assert_in_range(o1[(223 * 224 + 223) * 3 + 1], 237, 241);
	/* eval ignores the key */
	assert_int_equal(gm_aug_sample(a, jpg, len, 9, 9, 9, o2, NULL), 0);
	assert_memory_equal(o1, o2, 224 * 224 * 3);
	gm_aug_destroy(a);
	free(o1);
	free(o2);
	free(jpg);
}

static void test_eval_matches_resize_then_crop(void **state)
{
	/* 512x384 -> shorter side 256 (341x256, a 1.5x downscale) -> centre 224 */
	size_t len;
	uint8_t *rgb = malloc(512 * 384 * 3), *jpg;
	(void)state;
	for (int y = 0; y < 384; y++)
		for (int x = 0; x < 512; x++) {
			rgb[(y * 512 + x) * 3] = (uint8_t)(x / 2);
			rgb[(y * 512 + x) * 3 + 1] = (uint8_t)(y * 2 / 3);
			rgb[(y * 512 + x) * 3 + 2] = 50;
		}
	encode(rgb, 512, 384, &jpg, &len);
	struct gm_aug *a = make_aug(GM_AUG_EVAL, GM_OUT_U8_HWC, 0.5f);
	uint8_t *o = malloc(224 * 224 * 3);
	assert_int_equal(gm_aug_sample(a, jpg, len, 1, 0, 0, o, NULL), 0);
	/* resized width 341: left = round((341-224)/2) = 58 -> source x 58*1.5 = 87 */
	double x_at0 = (87 + 0.75) / 2.0, y_at0 = (16 * 1.5 + 0.75) * 2.0 / 3.0;
	assert_true(fabs(o[0] - x_at0) <= 2.0);
	assert_true(fabs(o[1] - y_at0) <= 2.0);
	gm_aug_destroy(a);
	free(o);
	free(rgb);
	free(jpg);
}

static void test_flat_colour_kept(void **state)
{
	/* the filter weights sum to one: a flat picture stays exactly flat */
	uint8_t *rgb = malloc(300 * 200 * 3), *jpg, *o = malloc(224 * 224 * 3);
	size_t len;
	(void)state;
	for (int i = 0; i < 300 * 200; i++)
		rgb[3 * i] = 255, rgb[3 * i + 1] = 100, rgb[3 * i + 2] = 50;
	encode(rgb, 300, 200, &jpg, &len);
	for (int mode = 0; mode < 2; mode++) {
		struct gm_aug *a = make_aug((enum gm_aug_mode)mode, GM_OUT_U8_HWC, 0.5f);
		for (uint64_t id = 0; id < 5; id++) {
			assert_int_equal(gm_aug_sample(a, jpg, len, 1, 0, id, o, NULL), 0);
			for (int i = 0; i < 224 * 224; i++) {
				assert_int_equal(o[3 * i], 255);
				assert_in_range(o[3 * i + 1], 99, 101);
				assert_in_range(o[3 * i + 2], 49, 51);
				assert_memory_equal(o + 3 * i, o, 3);
			}
		}
		gm_aug_destroy(a);
	}
	free(rgb);
	free(jpg);
	free(o);
}

static uint32_t f32_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	return u;
}

static float bits_f32(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
__attribute__((target("f16c"))) static uint16_t f16c_ref(float f)
{
	return (uint16_t)_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
}
#endif

static void test_f32_to_f16(void **state)
{
	(void)state;
	static const struct {
		float f;
		uint16_t h;
	} known[] = {
	    {0.0f, 0x0000},
	    {-0.0f, 0x8000},
	    {1.0f, 0x3c00},
	    {-2.0f, 0xc000},
	    {0.1f, 0x2e66},
	    {65504.0f, 0x7bff},
	    {65519.0f, 0x7bff},
	    {65520.0f, 0x7c00},
	    {1e10f, 0x7c00},
	    {-1e10f, 0xfc00},
	    {0x1p-24f, 0x0001},
	    {0x1p-25f, 0x0000}, /* tie: even */
	    {0x1.8p-25f, 0x0001},
	    {0x1.8p-24f, 0x0002}, /* tie 1.5 ulp: up to even */
	    {0x1p-14f, 0x0400},
	    {0x1.ff8p-15f, 0x03ff},    /* largest subnormal */
	    {0x1.ffcp-15f, 0x0400},    /* tie between it and 2^-14: even */
	    {1.0f + 0x1p-11f, 0x3c00}, /* tie: down to even */
	    {1.0f + 0x3p-11f, 0x3c02}, /* tie: up to even */
	    {2.2489083f, 0x407f},
	    {-2.117904f, 0xc03c},
	};
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (gm_f32_to_f16(known[i].f) != known[i].h)
			fail_msg("%a: got %04x want %04x", (double)known[i].f,
				 gm_f32_to_f16(known[i].f), known[i].h);
	assert_int_equal(gm_f32_to_f16(bits_f32(0x7f800000u)), 0x7c00);		 /* inf */
	assert_int_equal(gm_f32_to_f16(bits_f32(0xff800000u)), 0xfc00);		 /* -inf */
	assert_int_equal(gm_f32_to_f16(bits_f32(0x7fc00000u)), 0x7e00);		 /* qNaN */
	assert_int_equal(gm_f32_to_f16(bits_f32(0x7f800001u)) & 0x7e00, 0x7e00); /* quieted */
#if defined(__x86_64__)
	/* Every 4099th bit pattern (about a million, all classes) against the CPU's
	 * own conversion; the full 2^32 sweep was run once by hand (0 mismatches). */
	unsigned eax, ebx, ecx, edx;
	if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !(ecx & bit_F16C))
		return;
	for (uint64_t u = 0; u <= 0xffffffffull; u += 4099) {
		float f = bits_f32((uint32_t)u);
		if (gm_f32_to_f16(f) != f16c_ref(f))
			fail_msg("%08x: %04x, F16C %04x", (unsigned)u, gm_f32_to_f16(f),
				 f16c_ref(f));
	}
	assert_int_equal(f32_bits(1.0f), 0x3f800000u);
#endif
}

static void test_f16_output_is_rounded_f32(void **state)
{
	size_t len;
	uint8_t *jpg = synth(320, 240, 5, 0, &len);
	(void)state;
	for (int mode = 0; mode < 2; mode++) {
		struct gm_aug *f = make_aug((enum gm_aug_mode)mode, GM_OUT_F32_CHW, 0.5f);
		struct gm_aug *h = make_aug((enum gm_aug_mode)mode, GM_OUT_F16_CHW, 0.5f);
		float *p = malloc(224 * 224 * 3 * sizeof(float));
		uint16_t *q = malloc(224 * 224 * 3 * sizeof(uint16_t));
		for (uint64_t id = 0; id < 4; id++) {
			assert_int_equal(gm_aug_sample(f, jpg, len, 9, 2, id, p, NULL), 0);
			assert_int_equal(gm_aug_sample(h, jpg, len, 9, 2, id, q, NULL), 0);
			for (int i = 0; i < 224 * 224 * 3; i++)
				if (q[i] != gm_f32_to_f16(p[i]))
					fail_msg("mode %d id %d i %d: %04x, want %04x (%g)", mode,
						 (int)id, i, q[i], gm_f32_to_f16(p[i]), p[i]);
		}
		gm_aug_destroy(f);
		gm_aug_destroy(h);
		free(p);
		free(q);
	}
	free(jpg);
}

static void test_simd_equals_portable(void **state)
{
	size_t len, blen;
	uint8_t *jpg = synth(640, 480, 21, 0, &len);
	uint8_t *big = synth(2400, 1800, 22, GM_SYNTH_FLAT, &blen); /* 1/2 and 1/4 scales */
	(void)state;
	for (int out = 0; out < 3; out++)
		for (int mode = 0; mode < 2; mode++) {
			struct gm_aug *s =
			    make_aug((enum gm_aug_mode)mode, (enum gm_out_type)out, 0.5f);
			setenv("GM_NO_SIMD", "1", 1);
			struct gm_aug *p =
			    make_aug((enum gm_aug_mode)mode, (enum gm_out_type)out, 0.5f);
			unsetenv("GM_NO_SIMD");
			size_t n = 224 * 224 * 3 * (out == 1 ? 4 : out == 2 ? 2 : 1);
			uint8_t *o1 = malloc(n), *o2 = malloc(n);
			for (uint64_t id = 0; id < 12; id++) {
				const uint8_t *src = id % 4 == 3 ? big : jpg;
				size_t l = id % 4 == 3 ? blen : len;
				assert_int_equal(gm_aug_sample(s, src, l, 1, 0, id, o1, NULL), 0);
				assert_int_equal(gm_aug_sample(p, src, l, 1, 0, id, o2, NULL), 0);
				assert_memory_equal(o1, o2, n);
			}
			gm_aug_destroy(s);
			gm_aug_destroy(p);
			free(o1);
			free(o2);
		}
	free(jpg);
	free(big);
}

/* Decode a whole JPEG with libjpeg (defaults, as core/jpeg.c uses) to RGB. */
static uint8_t *decode_all(const uint8_t *jpg, size_t len, uint32_t *w, uint32_t *h)
{
	struct jpeg_decompress_struct d;
	struct jpeg_error_mgr err;
	uint8_t *rgb;
	d.err = jpeg_std_error(&err);
	jpeg_create_decompress(&d);
	jpeg_mem_src(&d, jpg, (unsigned long)len);
	assert_int_equal(jpeg_read_header(&d, TRUE), JPEG_HEADER_OK);
	d.out_color_space = JCS_RGB;
	jpeg_start_decompress(&d);
	*w = d.output_width, *h = d.output_height;
	rgb = malloc((size_t)*w * *h * 3);
	assert_non_null(rgb);
	while (d.output_scanline < *h) {
		JSAMPROW row = (JSAMPROW)(rgb + (size_t)d.output_scanline * *w * 3);
		jpeg_read_scanlines(&d, &row, 1);
	}
	jpeg_finish_decompress(&d);
	jpeg_destroy_decompress(&d);
	return rgb;
}

/*
 * Normalised triangle weights of output i of a crop starting at source position
 * b0 of a resize by 1/scale over the `in` samples (resize the whole image, then
 * crop, as torchvision's eval transform: the taps reach past the crop's box).
 */
static void ref_weights(double b0, double scale, uint32_t in, uint32_t i, double *w)
{
	double center = b0 + (i + 0.5) * scale, sup = scale > 1 ? scale : 1, sum = 0;
	for (uint32_t x = 0; x < in; x++) {
		double v = 1 - fabs(x + 0.5 - center) / sup;
		w[x] = v > 0 ? v : 0;
		sum += w[x];
	}
	for (uint32_t x = 0; x < in; x++)
		w[x] /= sum;
}

static void test_resize_accuracy(void **state)
{
	/*
	 * Eval mode on 448x448 (Resize 256: a 1.75x downscale, CenterCrop 224 from
	 * source position 28 on both axes, decoded at full size) against a
	 * double-precision separable triangle filter of the same decoded pixels, with
	 * no intermediate rounding. The fixed-point path (PIL's, resample.c) rounds
	 * twice (after each pass), so it may be 1 off, rarely.
	 */
	uint32_t W = 448, w, h;
	uint8_t *rgb = malloc((size_t)W * W * 3), *jpg, *o = malloc(224 * 224 * 3);
	size_t len;
	(void)state;
	uint64_t x = 12345;
	for (uint32_t i = 0; i < W * W * 3; i++) { /* smooth ramps + noise: all levels */
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		uint32_t p = i / 3, px = p % W, py = p / W;
		rgb[i] = (uint8_t)((px * (i % 3 + 1) / 2 + py / 2 + (x >> 59)) & 255);
	}
	encode(rgb, W, W, &jpg, &len);
	uint8_t *dec = decode_all(jpg, len, &w, &h);
	assert_int_equal(w, W);
	double *wx = malloc(sizeof(double) * 224 * W), *tmp = malloc(sizeof(double) * W * 224 * 3);
	for (uint32_t i = 0; i < 224; i++)
		ref_weights(28, 1.75, W, i, wx + (size_t)i * W);
	struct gm_aug *a = make_aug(GM_AUG_EVAL, GM_OUT_U8_HWC, 0.5f);
	assert_int_equal(gm_aug_sample(a, jpg, len, 1, 0, 0, o, NULL), 0);
	/* both passes in double (the order does not matter without rounding) */
	for (uint32_t oy = 0; oy < 224; oy++)
		for (uint32_t sx = 0; sx < W * 3; sx++) {
			double acc = 0;
			for (uint32_t sy = 0; sy < W; sy++)
				if (wx[(size_t)oy * W + sy] != 0)
					acc += wx[(size_t)oy * W + sy] *
					       dec[((size_t)sy * W) * 3 + sx];
			tmp[(size_t)oy * W * 3 + sx] = acc;
		}
	double sum_err = 0, max_err = 0;
	for (uint32_t oy = 0; oy < 224; oy++)
		for (uint32_t ox = 0; ox < 224; ox++)
			for (uint32_t c = 0; c < 3; c++) {
				double acc = 0;
				for (uint32_t sx = 0; sx < W; sx++)
					acc += wx[(size_t)ox * W + sx] *
					       tmp[((size_t)oy * W + sx) * 3 + c];
				double e = fabs(o[(oy * 224 + ox) * 3 + c] - acc);
				sum_err += e;
				max_err = e > max_err ? e : max_err;
			}
	double mean_err = sum_err / (224.0 * 224 * 3);
	print_message("resize vs double reference: mean |err| %.4f, max %.4f\n", mean_err, max_err);
	assert_true(max_err < 1.0 + 1e-9);
	assert_true(mean_err < 0.3);
	gm_aug_destroy(a);
	free(wx);
	free(tmp);
	free(dec);
	free(rgb);
	free(jpg);
	free(o);
}

static void test_odd_sizes_simd_equals_portable(void **state)
{
	/* odd output sides (the two-row kernel's lone last row) and big downscales */
	static const uint32_t sizes[] = {1, 7, 33, 99, 224};
	size_t len;
	uint8_t *jpg = synth(640, 480, 31, 0, &len);
	(void)state;
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++)
		for (int out = 0; out < 3; out++) {
			struct gm_aug_spec sp;
			struct gm_aug *s, *p;
			gm_aug_spec_default(&sp);
			sp.size = sizes[k];
			sp.out = (enum gm_out_type)out;
			assert_int_equal(gm_aug_create(&s, &sp), 0);
			setenv("GM_NO_SIMD", "1", 1);
			assert_int_equal(gm_aug_create(&p, &sp), 0);
			unsetenv("GM_NO_SIMD");
			size_t n = gm_aug_out_bytes(&sp);
			uint8_t *o1 = malloc(n), *o2 = malloc(n);
			for (uint64_t id = 0; id < 16; id++) {
				assert_int_equal(gm_aug_sample(s, jpg, len, 3, 0, id, o1, NULL), 0);
				assert_int_equal(gm_aug_sample(p, jpg, len, 3, 0, id, o2, NULL), 0);
				assert_memory_equal(o1, o2, n);
			}
			gm_aug_destroy(s);
			gm_aug_destroy(p);
			free(o1);
			free(o2);
		}
	free(jpg);
}

/*
 * Every kernel level (GM_SIMD_MAX: sse, avx2, avx512, and the best this CPU has) against
 * the portable kernels, bit for bit: odd output sides (a ragged last group of the
 * byte-gather kernel, the two-row kernels' lone last row), flips, and aspect
 * ratios that make the horizontal resize 1 to ~6 taps, so that the byte-gather
 * kernel runs with one and two source vectors and 1 to 4+ tap pairs, and falls
 * back to the other kernels when a group's taps reach past its window. Sides 64,
 * 99, 130 and 224 run the AVX-512 float layout on whole 64-pixel steps and with a
 * ragged end; 21 and 22 the AVX2 one it falls back to.
 */
static void test_every_level_equals_portable(void **state)
{
	static const char *levels[] = {"sse", "avx2", "avx512", NULL};
	static const uint32_t sizes[] = {1, 21, 22, 64, 99, 130, 224};
	static const float ratios[][2] = {{0.75f, 1.3333f}, {2.5f, 4.0f}, {0.25f, 0.4f}};
	size_t len;
	uint8_t *jpg = synth(640, 480, 41, 0, &len);
	(void)state;
	for (size_t lv = 0; lv < sizeof(levels) / sizeof(levels[0]); lv++)
		for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++)
			for (size_t r = 0; r < sizeof(ratios) / sizeof(ratios[0]); r++)
				for (int out = 0; out < 3; out++) {
					struct gm_aug_spec sp;
					struct gm_aug *s, *p;
					gm_aug_spec_default(&sp);
					sp.size = sizes[k];
					sp.out = (enum gm_out_type)out;
					sp.ratio_min = ratios[r][0];
					sp.ratio_max = ratios[r][1];
					if (levels[lv])
						setenv("GM_SIMD_MAX", levels[lv], 1);
					assert_int_equal(gm_aug_create(&s, &sp), 0);
					unsetenv("GM_SIMD_MAX");
					setenv("GM_NO_SIMD", "1", 1);
					assert_int_equal(gm_aug_create(&p, &sp), 0);
					unsetenv("GM_NO_SIMD");
					size_t n = gm_aug_out_bytes(&sp);
					uint8_t *o1 = malloc(n), *o2 = malloc(n);
					assert_non_null(o1);
					assert_non_null(o2);
					for (uint64_t id = 0; id < 6; id++) {
						assert_int_equal(
						    gm_aug_sample(s, jpg, len, 5, 0, id, o1, NULL),
						    0);
						assert_int_equal(
						    gm_aug_sample(p, jpg, len, 5, 0, id, o2, NULL),
						    0);
						assert_memory_equal(o1, o2, n);
					}
					gm_aug_destroy(s);
					gm_aug_destroy(p);
					free(o1);
					free(o2);
				}
	free(jpg);
}

/* A test's own random numbers (xorshift64*): reproducible, no global state. */
static uint64_t test_rand(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ull;
}

/* A uniform double in [lo, hi) from s. */
static double test_uniform(uint64_t *s, double lo, double hi)
{
	return lo + (hi - lo) * (double)(test_rand(s) >> 11) / 9007199254740992.0;
}

/*
 * A random axis (out samples from [b0, b1) of a row of in, taps 1 to 8 for the
 * scales drawn, a quarter of them ending at the row's end) built with kernels k,
 * or the portable code when k is NULL (which draws it: bx, for the next call).
 */
static void random_axis(struct axis *ax, uint64_t *s, uint32_t out, const struct aug_kernels *k,
			double *bx)
{
	if (k == NULL) {
		double scale = test_uniform(s, 0.2, 3.6), len = scale * out;
		uint32_t in = (uint32_t)len + 1 + (uint32_t)(test_rand(s) % 300);
		bx[0] = test_uniform(s, 0, in - len), bx[1] = bx[0] + len, bx[2] = in;
		if (test_rand(s) % 4 == 0) /* the crop at the right edge: runs pushed left */
			bx[0] = in - len, bx[1] = in;
		bx[3] = (double)(test_rand(s) & 1);
	}
	assert_int_equal(gm_aug_axis_build(ax, bx[0], bx[1], (uint32_t)bx[2], out, bx[3] != 0, k),
			 0);
}

/* The kernels of the best level this CPU has (none of them NULL'd by aug.c). */
static void best_kernels(struct aug_kernels *k)
{
	memset(k, 0, sizeof(*k));
	gm_aug_simd_pick(k, AUG_SIMD_VNNI);
}

/*
 * axis_build's SIMD span and weight kernels against its portable code: for random
 * crops (scales 0.2 to 3.6, so 1 to 8 taps; flipped or not; sizes with and
 * without a ragged last 8) the same tap count, min[] and coefficients, bit for bit;
 * and min[] inside the row and monotonic (reversed when flipped).
 */
static void test_axis_kernels_equal_portable(void **state)
{
	static const uint32_t sizes[] = {1, 8, 17, 100, 224, 500};
	struct aug_kernels k;
	struct axis p, f;
	uint64_t s = 0x9e3779b97f4a7c15ull;
	unsigned seen = 0; /* bit t: an axis of t taps was compared */
	(void)state;
	best_kernels(&k);
	if (!k.axisw || !k.axiss)
		skip();
	memset(&p, 0, sizeof(p));
	memset(&f, 0, sizeof(f));
	for (int it = 0; it < 3000; it++) {
		uint32_t out = sizes[it % 6];
		double bx[4];
		random_axis(&p, &s, out, NULL, bx);
		random_axis(&f, &s, out, &k, bx);
		assert_int_equal(f.taps, p.taps);
		assert_memory_equal(f.min, p.min, sizeof(int32_t) * out);
		assert_memory_equal(f.coef, p.coef, sizeof(int16_t) * out * p.taps);
		/* plan_resize and hw_build take min[] to be monotonic, inside the row */
		for (uint32_t i = 0; i < out; i++) {
			assert_true(p.min[i] >= 0 && p.min[i] + (int32_t)p.taps <= (int32_t)bx[2]);
			if (i > 0 &&
			    (bx[3] != 0 ? p.min[i] > p.min[i - 1] : p.min[i] < p.min[i - 1]))
				fail_msg("min[] not monotonic at %u: %d after %d (mirror %d)", i,
					 p.min[i], p.min[i - 1], bx[3] != 0);
		}
		seen |= 1u << p.taps;
	}
	assert_int_equal(seen & 0x1fe, 0x1fe);
	gm_aug_axis_free(&p);
	gm_aug_axis_free(&f);
}

/* The axis's min[] as plan_resize makes it: bytes from the first column used. */
static void axis_to_bytes(struct axis *ax, uint32_t out)
{
	int32_t lo = INT32_MAX;
	for (uint32_t i = 0; i < out; i++)
		lo = ax->min[i] < lo ? ax->min[i] : lo;
	for (uint32_t i = 0; i < out; i++)
		ax->min[i] = (ax->min[i] - lo) * 3;
}

/*
 * hx_table_builder's cases at the window's edge: axes made by hand whose offsets
 * grow (or shrink) by s/16 bytes a pixel, s = 0..699, so that every window width
 * around 64 and HX_WINDOW comes up, for 1 to 8 taps (random coefficients): the
 * fast builder's result, narrow flag and bytes must be the portable one's.
 */
static void hx_window_edges(const struct aug_kernels *k, int32_t *bp, int32_t *bf, uint8_t *tp,
			    uint8_t *tf, size_t cap)
{
	enum { OUT = 100 };
	int32_t min[OUT];
	int16_t coef[OUT * 8];
	uint64_t r = 0x5851f42d4c957f2dull;
	cap = cap < 24 * 4 * 8 * HX_GROUP ? cap : 24 * 4 * 8 * HX_GROUP; /* 21 groups at most */
	for (uint32_t i = 0; i < OUT * 8; i++)
		coef[i] = (int16_t)(test_rand(&r) % COEF_ONE);
	for (uint32_t taps = 1; taps <= 8; taps++)
		for (int32_t st = 0; st < 700; st++)
			for (int form = 0; form < 4; form++) {
				bool planar = form & 1, down = form & 2;
				struct axis ax = {.min = min, .coef = coef, .taps = taps};
				struct hx_table p = {0}, f = {0};
				for (int32_t i = 0; i < OUT; i++)
					min[i] = (down ? OUT - 1 - i : i) * st / 16;
				memset(bp, 0, cap), memset(tp, 0, cap);
				memset(bf, 0xff, cap), memset(tf, 0xff, cap);
				bool okp = gm_aug_hx_build(&p, bp, tp, &ax, OUT, planar, NULL);
				assert_int_equal(gm_aug_hx_build(&f, bf, tf, &ax, OUT, planar, k),
						 okp);
				if (!okp)
					continue;
				assert_int_equal(f.narrow, p.narrow);
				assert_memory_equal(bf, bp, sizeof(int32_t) * p.groups);
				assert_memory_equal(tf, tp,
						    (size_t)p.groups * p.pairs * 8 * HX_GROUP);
			}
}

/*
 * The AVX-512 builder of the byte-gather tables (hx_build, px_build) against the
 * portable builders, byte for byte (the two start from different bytes, so every
 * byte must be written): for random axes (1 to 8 taps, flipped or not, sizes with
 * ragged last groups), interleaved and planar, the same result, header, base[]
 * and blk; both true (the table) and false (a window too wide) must come up.
 */
static void test_hx_table_builder_equals_portable(void **state)
{
	static const uint32_t sizes[] = {1, 17, 100, 224, 500};
	struct aug_kernels k;
	struct axis ax;
	uint64_t s = 0x2545f4914f6cdd1dull;
	size_t cap = 1 << 16;
	unsigned built = 0, refused = 0; /* bit t: a table of t taps was built / refused */
	(void)state;
	best_kernels(&k);
	if (!k.hxb) /* (before the buffers: a skip returns, and make sanitize saw them leak
		     * on a CPU without the kernels) */
		skip();
	int32_t *bp = malloc(cap), *bf = malloc(cap);
	uint8_t *tp = malloc(cap), *tf = malloc(cap);
	assert_true(bp && bf && tp && tf);
	memset(&ax, 0, sizeof(ax));
	for (int it = 0; it < 4000; it++) {
		uint32_t out = sizes[it % 5];
		bool planar = (it / 5) & 1;
		double bx[4];
		random_axis(&ax, &s, out, NULL, bx);
		axis_to_bytes(&ax, out);
		struct hx_table p = {0}, f = {0};
		memset(bp, 0, cap), memset(tp, 0, cap);
		memset(bf, 0xff, cap), memset(tf, 0xff, cap);
		bool okp = gm_aug_hx_build(&p, bp, tp, &ax, out, planar, NULL);
		bool okf = gm_aug_hx_build(&f, bf, tf, &ax, out, planar, &k);
		assert_int_equal(okf, okp);
		if (!okp) {
			refused |= 1u << ax.taps;
			continue;
		}
		built |= 1u << ax.taps;
		assert_int_equal(f.groups, p.groups);
		assert_int_equal(f.pairs, p.pairs);
		assert_int_equal(f.nval, p.nval);
		assert_int_equal(f.narrow, p.narrow);
		assert_ptr_equal(f.base, bf);
		assert_ptr_equal(f.blk, tf);
		assert_memory_equal(bf, bp, sizeof(int32_t) * p.groups);
		assert_memory_equal(tf, tp, (size_t)p.groups * p.pairs * 8 * HX_GROUP);
	}
	assert_int_equal(built & 0x1fe, 0x1fe);
	assert_true(refused != 0);
	gm_aug_axis_free(&ax);
	hx_window_edges(&k, bp, bf, tp, tf, cap);
	free(bp), free(bf), free(tp), free(tf);
}

/* AVX-512 VBMI and BW on this CPU (and VL where vl): the byte-gather kernels run. */
static bool cpu_vbmi(bool vl)
{
#if defined(__x86_64__)
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512bw") &&
	       (!vl || __builtin_cpu_supports("avx512vl"));
#else
	(void)vl;
	return false;
#endif
}

/* bytes of 0x5a (what a kernel writing past its output would change). */
static uint8_t *guarded(size_t bytes)
{
	uint8_t *p = malloc(bytes);
	assert_non_null(p);
	memset(p, 0x5a, bytes);
	return p;
}

/*
 * Create the handle of spec sp (the portable kernels when portable), sample ids
 * 0..n-1 of jpg into o and return the rows the fused float kernels made; *hw (if
 * not NULL): the rows the 16-bit horizontal kernel made.
 */
static uint64_t sample_all_hw(const struct gm_aug_spec *sp, bool portable, const uint8_t *jpg,
			      size_t len, uint64_t n, uint8_t *o, uint64_t *hw)
{
	struct gm_aug *a;
	size_t bytes = gm_aug_out_bytes(sp);
	if (portable)
		setenv("GM_NO_SIMD", "1", 1);
	assert_int_equal(gm_aug_create(&a, sp), 0);
	unsetenv("GM_NO_SIMD");
	for (uint64_t id = 0; id < n; id++)
		assert_int_equal(gm_aug_sample(a, jpg, len, 7, 1, id, o + id * bytes, NULL), 0);
	uint64_t rows = gm_aug_fused_rows(a);
	if (hw)
		*hw = gm_aug_hw_rows(a);
	gm_aug_destroy(a);
	return rows;
}

static uint64_t sample_all(const struct gm_aug_spec *sp, bool portable, const uint8_t *jpg,
			   size_t len, uint64_t n, uint8_t *o)
{
	return sample_all_hw(sp, portable, jpg, len, n, o, NULL);
}

/*
 * The fused horizontal pass + float layout (AVX-512 VBMI, a planar byte gather)
 * against the portable kernels, bit for bit: float32 and float16; train without
 * and with flip, and eval; sides whose last group of 16 pixels is full (16, 128,
 * 160, 224) or ragged (1, 15, 17, 100); crops that make the horizontal pass an
 * upscale (one source vector a group), a 1-2x downscale (two vectors, 1 to 3 tap
 * pairs) and a downscale too wide for the gather window (hxrow + frow instead).
 * On a CPU with VBMI each side and type must have gone through the fused kernel
 * for some crops and through the fallback for others; elsewhere the fused kernel
 * does not exist and the test checks the other kernels, then skips.
 */
static void test_fused_float_layout_equals_portable(void **state)
{
	static const uint32_t sizes[] = {1, 15, 16, 17, 100, 128, 160, 224};
	static const float ratios[][2] = {{0.75f, 1.3333f}, {2.5f, 4.0f}, {0.25f, 0.4f}};
	const uint64_t n = 6;
	size_t len;
	uint8_t *jpg = synth(640, 480, 51, 0, &len);
	bool vbmi = cpu_vbmi(false);
	(void)state;
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++)
		for (int out = 1; out < 3; out++) {
			uint64_t fused = 0, rows = 0;
			for (int mode = 0; mode < 4; mode++)
				for (size_t r = 0; r < sizeof(ratios) / sizeof(ratios[0]); r++) {
					struct gm_aug_spec sp;
					gm_aug_spec_default(&sp);
					sp.size = sizes[k];
					sp.out = (enum gm_out_type)out;
					sp.mode = mode == 3 ? GM_AUG_EVAL : GM_AUG_TRAIN;
					sp.flip_p = mode == 0 ? 0.0f : mode == 1 ? 1.0f : 0.5f;
					sp.ratio_min = ratios[r][0];
					sp.ratio_max = ratios[r][1];
					/* + 256 guard bytes: nothing is written past the end */
					size_t bytes = gm_aug_out_bytes(&sp) * n + 256;
					uint8_t *o1 = guarded(bytes), *o2 = guarded(bytes);
					fused += sample_all(&sp, false, jpg, len, n, o1);
					assert_int_equal(sample_all(&sp, true, jpg, len, n, o2), 0);
					rows += sizes[k] * n;
					if (memcmp(o1, o2, bytes) != 0)
						fail_msg("size %u out %d mode %d ratios %zu differ",
							 sizes[k], out, mode, r);
					free(o1);
					free(o2);
				}
			if (vbmi && (fused == 0 || fused == rows))
				fail_msg("size %u out %d: %llu of %llu rows fused, want some and "
					 "not all",
					 sizes[k], out, (unsigned long long)fused,
					 (unsigned long long)rows);
		}
	free(jpg);
	if (!vbmi)
		skip();
}

/*
 * The 16-bit horizontal kernel (hwrow_fn, hw_build) against the portable kernels,
 * bit for bit: every output type (float ones take it when their fused kernel
 * cannot), train without and with flip, eval, and a train crop at scale 1 exactly
 * (every output pixel one tap of weight 1: hw_build's doubled tap); sides whose last
 * 64-byte step is full or ragged; upscales (some pixels one tap), 1-2x
 * downscales (one and two source vectors) and wider ones (taps past 4: the other
 * kernels). On a CPU with AVX-512 VBMI the kernel must have made some rows of each
 * side and not all.
 */
static void test_hw_kernel_equals_portable(void **state)
{
	static const uint32_t sizes[] = {1, 21, 22, 64, 100, 224};
	static const float ratios[][2] = {{0.75f, 1.3333f}, {2.5f, 4.0f}, {0.25f, 0.4f}};
	const uint64_t n = 6;
	size_t len, ilen;
	uint8_t *jpg = synth(640, 480, 61, 0, &len), *ident;
	bool vbmi = cpu_vbmi(true);
	(void)state;
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		uint64_t hw = 0, rows = 0;
		/* scale 1: a train crop of the whole square image at its own size */
		ident = synth(sizes[k], sizes[k], 62, 0, &ilen);
		for (int mode = 0; mode < 5; mode++)
			for (size_t r = 0; r < sizeof(ratios) / sizeof(ratios[0]); r++)
				for (int out = 0; out < 3; out++) {
					struct gm_aug_spec sp;
					uint64_t h = 0;
					gm_aug_spec_default(&sp);
					sp.size = sizes[k];
					sp.out = (enum gm_out_type)out;
					sp.mode = mode == 3 ? GM_AUG_EVAL : GM_AUG_TRAIN;
					sp.flip_p = mode == 0 ? 0.0f : mode == 1 ? 1.0f : 0.5f;
					sp.ratio_min = mode == 4 ? 1.0f : ratios[r][0];
					sp.ratio_max = mode == 4 ? 1.0f : ratios[r][1];
					sp.scale_min = mode == 4 ? 1.0f : sp.scale_min;
					const uint8_t *src = mode == 4 ? ident : jpg;
					size_t sl = mode == 4 ? ilen : len;
					size_t bytes = gm_aug_out_bytes(&sp) * n + 256;
					uint8_t *o1 = guarded(bytes), *o2 = guarded(bytes);
					sample_all_hw(&sp, false, src, sl, n, o1, &h);
					sample_all_hw(&sp, true, src, sl, n, o2, NULL);
					if (out == 0)
						hw += h, rows += sizes[k] * n;
					if (memcmp(o1, o2, bytes) != 0)
						fail_msg("size %u out %d mode %d ratios %zu differ",
							 sizes[k], out, mode, r);
					if (vbmi && mode == 4 && out == 0 && h != sizes[k] * n)
						fail_msg("size %u: scale 1 made %llu rows with the "
							 "16-bit kernel, want all %llu",
							 sizes[k], (unsigned long long)h,
							 (unsigned long long)(sizes[k] * n));
					free(o1);
					free(o2);
				}
		free(ident);
		if (vbmi && (hw == 0 || hw == rows))
			fail_msg("size %u: %llu of %llu uint8 rows by the 16-bit kernel, want some "
				 "and not all",
				 sizes[k], (unsigned long long)hw, (unsigned long long)rows);
	}
	free(jpg);
	if (!vbmi)
		skip();
}

/*
 * The 16-bit kernel's own non-temporal stores (hwntrow_fn) against the portable
 * kernels, bit for bit, uint8: sides whose rows are a multiple of 32 bytes (32, 64:
 * every row 64-byte aligned; 224: every other row half way through a line, its
 * last 32 bytes a vector's low half) with the output 64-byte aligned, 32 past
 * that, and 16 past (no longer allowed: the plain kernel and ntcopy); and one side
 * whose rows are not (100). The 64 bytes before and after the samples keep their
 * bytes. On a CPU with AVX-512 VBMI the non-temporal kernel must have made rows
 * exactly where the output allows it.
 */
static void test_hw_nt_stores_equal_portable(void **state)
{
	static const uint32_t sizes[] = {32, 64, 100, 224};
	static const size_t shifts[] = {0, 32, 16};
	const uint64_t n = 4;
	size_t len;
	uint8_t *jpg = synth(640, 480, 63, 0, &len);
	bool vbmi = cpu_vbmi(true);
	(void)state;
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++)
		for (size_t sh = 0; sh < sizeof(shifts) / sizeof(shifts[0]); sh++) {
			struct gm_aug_spec sp;
			struct gm_aug *a;
			gm_aug_spec_default(&sp);
			sp.size = sizes[k];
			sp.flip_p = 0.5f;
			size_t bytes = gm_aug_out_bytes(&sp) * n, total = bytes + 64 + 64 + 64;
			uint8_t *b1 = NULL, *b2 = guarded(total);
			assert_int_equal(posix_memalign((void **)&b1, 64, total), 0);
			memset(b1, 0x5a, total);
			uint8_t *o1 = b1 + 64 + shifts[sh], *o2 = b2 + 64 + shifts[sh];
			assert_int_equal(gm_aug_create(&a, &sp), 0);
			for (uint64_t id = 0; id < n; id++)
				assert_int_equal(gm_aug_sample(a, jpg, len, 7, 1, id,
							       o1 + id * gm_aug_out_bytes(&sp),
							       NULL),
						 0);
			uint64_t nt = gm_aug_hwnt_rows(a), hw = gm_aug_hw_rows(a);
			gm_aug_destroy(a);
			sample_all(&sp, true, jpg, len, n, o2);
			if (memcmp(o1, o2, bytes) != 0)
				fail_msg("size %u shift %zu: the samples differ", sizes[k],
					 shifts[sh]);
			for (size_t i = 0; i < 64 + shifts[sh]; i++)
				assert_int_equal(b1[i], 0x5a);
			for (size_t i = 64 + shifts[sh] + bytes; i < total; i++)
				assert_int_equal(b1[i], 0x5a);
			bool allowed = shifts[sh] != 16 && sizes[k] * 3 % 32 == 0;
			if (vbmi && (allowed ? nt == 0 || nt != hw : nt != 0))
				fail_msg("size %u shift %zu: %llu of %llu 16-bit rows stored "
					 "non-temporally, want %s",
					 sizes[k], shifts[sh], (unsigned long long)nt,
					 (unsigned long long)hw, allowed ? "all" : "none");
			free(b1);
			free(b2);
		}
	free(jpg);
	if (!vbmi)
		skip();
}

/* xorshift64 */
static uint64_t next_rand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/*
 * taps weights >= 0 summing to COEF_ONE (what axis_build makes). kind 0: a
 * random partition; 1: one weight near COEF_ONE (127 * 128 and up), the rest
 * small; 2: remainders near 127 (the most e to hand out); 3: weights that are
 * multiples of 128 but one.
 */
static void rand_weights(uint64_t *st, int16_t *c, uint32_t taps, int kind)
{
	int32_t left = COEF_ONE;
	for (uint32_t k = 0; k + 1 < taps; k++) {
		int32_t w;
		uint64_t r = next_rand(st);
		if (kind == 1)
			w = k == 0 ? 127 * 128 + (int32_t)(r % 129) : (int32_t)(r % (left / 2 + 1));
		else if (kind == 2)
			w = (int32_t)((r % (COEF_ONE / 128 / taps + 1)) * 128 + 96 + r % 32);
		else if (kind == 3)
			w = (int32_t)((r % (COEF_ONE / 128 / taps + 1)) * 128);
		else
			w = (int32_t)(r % (uint64_t)(left + 1));
		w = w > left ? left : w;
		c[k] = (int16_t)w;
		left -= w;
	}
	c[taps - 1] = (int16_t)left;
	if (kind == 1 && taps > 1) { /* the big one anywhere */
		uint32_t j = (uint32_t)(next_rand(st) % taps);
		int16_t t = c[0];
		c[0] = c[j];
		c[j] = t;
	}
}

/*
 * vrow_c's byte for taps pixels p and weights c, by vw_split's 16-bit arithmetic
 * as vwrow/hwrow do it (vpmaddubsw pairs, wrapping adds, vpmulhrsw by 256);
 * fails the test if a pair saturates.
 */
static int vw_byte(const uint8_t *p, uint32_t taps, uint32_t wh, uint32_t wl)
{
	int32_t h = 0, l = 0;
	for (uint32_t q = 0; q < 2; q++) {
		int32_t hp = 0, lp = 0;
		for (uint32_t k = 2 * q; k < 2 * q + 2; k++) {
			int32_t pk = k < taps ? p[k] : 0;
			hp += pk * (int8_t)(wh >> (8 * k));
			lp += pk * (int8_t)(wl >> (8 * k));
		}
		assert_true(hp >= -32768 && hp <= 32767 && lp >= -32768 && lp <= 32767);
		h = (int16_t)(h + hp);
		l = (int16_t)(l + lp);
	}
	int32_t x = (int16_t)(h + (l >> 7));
	return (x * 256 + (1 << 14)) >> 15;
}

/*
 * vw_split: it splits every row of 1..4 taps that axis_build can make except one
 * tap of weight 1, into bytes that obey its proof's bounds (w = 128 wh + wl, wh
 * 0..127 summing to 128, positive wl summing to <= 128, negative to >= -128), and
 * the 16-bit arithmetic on them equals vrow_c for extreme and random pixels (all
 * 2-tap rows, and random rows of 3 and 4 taps of every kind). With AVX-512, vws
 * equals vw_split row by row (also on rows it must refuse) and vwrow equals vrow_c.
 */
static void test_vw_split_exact(void **state)
{
	struct aug_kernels kk = {0};
	uint64_t st = 0x9e3779b97f4a7c15ull;
	int16_t c[4];
	uint8_t px[4];
	(void)state;
	kk.vrow = vrow_c;
	gm_aug_simd_pick(&kk, AUG_SIMD_VNNI);
	for (uint32_t iter = 0; iter < 16385 + 3 * 60000; iter++) {
		uint32_t taps = iter <= COEF_ONE ? 2 : 3 + iter % 2, wh, wl;
		if (iter <= COEF_ONE)
			c[0] = (int16_t)iter, c[1] = (int16_t)(COEF_ONE - iter);
		else
			rand_weights(&st, c, taps, (int)(iter / 2 % 4));
		bool one = false;
		for (uint32_t k = 0; k < taps; k++)
			one = one || c[k] == COEF_ONE;
		assert_int_equal(vw_split(c, taps, &wh, &wl), !one);
		if (one)
			continue;
		int32_t hs = 0, pos = 0, neg = 0;
		for (uint32_t k = 0; k < 4; k++) {
			int32_t h = (int8_t)(wh >> (8 * k)), l = (int8_t)(wl >> (8 * k));
			assert_int_equal(128 * h + l, k < taps ? c[k] : 0);
			assert_true(h >= 0 && h <= 127);
			hs += h;
			pos += l > 0 ? l : 0;
			neg += l < 0 ? l : 0;
		}
		assert_int_equal(hs, 128);
		assert_true(pos <= 128 && neg >= -128);
		for (uint32_t t = 0; t < 20; t++) {
			uint8_t want;
			for (uint32_t k = 0; k < 4; k++) /* the 16 corners, then random */
				px[k] = t < 16 ? (uint8_t)((t >> k & 1) * 255)
					       : (uint8_t)next_rand(&st);
			vrow_c(&want, px, 1, 1, c, taps);
			assert_int_equal(vw_byte(px, taps, wh, wl), want);
		}
	}
	if (!kk.vws || !kk.vwrow)
		skip();
	/* vws over 203 rows (8 a step and a tail), some it must refuse */
	for (uint32_t taps = 1; taps <= 4; taps++) {
		enum { ROWS = 203 };
		int16_t cs[ROWS * 4];
		uint32_t wh1[ROWS], wl1[ROWS], wh2, wl2;
		for (uint32_t i = 0; i < ROWS; i++) {
			rand_weights(&st, cs + i * taps, taps, (int)(i % 4));
			if (i % 17 == 5)
				cs[i * taps] = (int16_t)(cs[i * taps] + 1); /* sum off by one */
			if (i % 23 == 7 && taps > 1) { /* a negative weight, same sum */
				cs[i * taps] = (int16_t)(cs[i * taps] + cs[i * taps + 1] + 200);
				cs[i * taps + 1] = -200;
			}
		}
		kk.vws(cs, taps, ROWS, wh1, wl1);
		for (uint32_t i = 0; i < ROWS; i++) {
			bool ok = vw_split(cs + i * taps, taps, &wh2, &wl2);
			assert_int_equal(wh1[i], ok ? wh2 : VW_NONE);
			if (ok)
				assert_int_equal(wl1[i], wl2);
		}
	}
	/* vwrow against vrow_c on 4 rows of 200 bytes (a ragged end) and of 64 */
	uint8_t src[4 * 200], d1[200], d2[200];
	for (uint32_t iter = 0; iter < 3000; iter++) {
		uint32_t taps = 2 + iter % 3, wh, wl, n = iter % 2 ? 200 : 64;
		rand_weights(&st, c, taps, (int)(iter / 3 % 4));
		if (!vw_split(c, taps, &wh, &wl))
			continue;
		for (uint32_t i = 0; i < sizeof(src); i++)
			src[i] = iter % 5 == 0 ? (uint8_t)((next_rand(&st) & 1) * 255)
					       : (uint8_t)next_rand(&st);
		vrow_c(d1, src, 200, n, c, taps);
		kk.vwrow(d2, src, 200, n, c, taps, wh, wl);
		assert_memory_equal(d1, d2, n);
	}
}

static void test_odd_inputs(void **state)
{
	/* tiny, thin, gray, CMYK, progressive, upsampled: all produce output */
	static const struct {
		uint32_t w, h;
		unsigned flags;
	} in[] = {
	    {1, 1, 0},
	    {7, 5, 0},
	    {2000, 16, 0},
	    {16, 900, 0},
	    {100, 80, 0},
	    {300, 200, GM_SYNTH_GRAY},
	    {300, 200, GM_SYNTH_CMYK},
	    {300, 200, GM_SYNTH_PROGRESSIVE},
	};
	uint8_t *o = malloc(224 * 224 * 3);
	(void)state;
	for (int mode = 0; mode < 2; mode++) {
		struct gm_aug *a = make_aug((enum gm_aug_mode)mode, GM_OUT_U8_HWC, 0.5f);
		for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
			size_t len;
			uint8_t *jpg = synth(in[i].w, in[i].h, i, in[i].flags, &len);
			struct gm_aug_times t = {0, 0};
			memset(o, 0xa5, 224 * 224 * 3);
			if (gm_aug_sample(a, jpg, len, 1, 0, i, o, &t) != 0)
				fail_msg("%ux%u flags %#x: %s", in[i].w, in[i].h, in[i].flags,
					 gm_aug_errmsg(a));
			assert_true(t.decode_ns > 0);
			assert_true(t.augment_ns > 0);
			if (in[i].flags & GM_SYNTH_GRAY)
				for (int k = 0; k < 224 * 224; k++) {
					assert_int_equal(o[3 * k], o[3 * k + 1]);
					assert_int_equal(o[3 * k], o[3 * k + 2]);
				}
			free(jpg);
		}
		gm_aug_destroy(a);
	}
	free(o);
}

static void test_errors(void **state)
{
	struct gm_aug *a = make_aug(GM_AUG_TRAIN, GM_OUT_U8_HWC, 0.5f);
	uint8_t *o = malloc(224 * 224 * 3), *bomb;
	size_t len;
	(void)state;
	assert_int_equal(gm_aug_sample(a, "", 0, 1, 0, 0, o, NULL), -ENODATA);
	assert_int_equal(strncmp(gm_aug_errmsg(a), "gm_aug_sample: ", 15), 0);
	assert_non_null(strstr(gm_aug_errmsg(a), "empty"));
	assert_int_equal(gm_aug_sample(a, "GIF89a....", 10, 1, 0, 0, o, NULL), -EBADMSG);
	assert_non_null(strstr(gm_aug_errmsg(a), "Not a JPEG"));
	assert_int_equal(gm_synth_bomb_mem(30000, 30000, &bomb, &len), 0);
	assert_int_equal(gm_aug_sample(a, bomb, len, 1, 0, 0, o, NULL), -E2BIG);
	assert_non_null(strstr(gm_aug_errmsg(a), "pixel limit"));
	free(bomb);
	uint8_t *jpg = synth(400, 300, 1, 0, &len);
	assert_int_equal(gm_aug_sample(a, jpg, len / 3, 1, 0, 0, o, NULL), -EBADMSG);
	assert_non_null(strstr(gm_aug_errmsg(a), "truncated"));
	assert_int_equal(gm_aug_sample(a, jpg, len, 1, 0, 0, NULL, NULL), -EINVAL);
	/* and the handle recovers */
	assert_int_equal(gm_aug_sample(a, jpg, len, 1, 0, 0, o, NULL), 0);
	assert_string_equal(gm_aug_errmsg(a), "");
	gm_aug_destroy(a);
	free(jpg);
	free(o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_defaults_and_out_bytes),
	    cmocka_unit_test(test_bad_specs),
	    cmocka_unit_test(test_max_pixels_out_of_range_is_refused),
	    cmocka_unit_test(test_deterministic),
	    cmocka_unit_test(test_rrc_within_bounds),
	    cmocka_unit_test(test_flip_mirrors),
	    cmocka_unit_test(test_float_normalisation),
	    cmocka_unit_test(test_eval_center_crop),
	    cmocka_unit_test(test_eval_matches_resize_then_crop),
	    cmocka_unit_test(test_flat_colour_kept),
	    cmocka_unit_test(test_f32_to_f16),
	    cmocka_unit_test(test_f16_output_is_rounded_f32),
	    cmocka_unit_test(test_simd_equals_portable),
	    cmocka_unit_test(test_odd_sizes_simd_equals_portable),
	    cmocka_unit_test(test_every_level_equals_portable),
	    cmocka_unit_test(test_fused_float_layout_equals_portable),
	    cmocka_unit_test(test_hw_kernel_equals_portable),
	    cmocka_unit_test(test_hw_nt_stores_equal_portable),
	    cmocka_unit_test(test_vw_split_exact),
	    cmocka_unit_test(test_axis_kernels_equal_portable),
	    cmocka_unit_test(test_hx_table_builder_equals_portable),
	    cmocka_unit_test(test_resize_accuracy),
	    cmocka_unit_test(test_odd_inputs),
	    cmocka_unit_test(test_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
