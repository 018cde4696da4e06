/*
 * test_jpeg.c - the per-worker JPEG decoder (core/jpeg.c).
 *
 * Inputs are made in memory by synth.c (real libjpeg-turbo encodes). Checks:
 * partial decode equals the same region of a full decode at the same DCT scale,
 * the scale choice, colour spaces to RGB, and every error path (-errno + message),
 * including that a decompression bomb is refused before libjpeg allocates the
 * image (jpeg_start_decompress is wrapped and counted), and the restart
 * transcode and splice (decoding only the crop's restart segments). The Huffman
 * decoder (core/huff.c) against libjpeg's is tests/test_huff.c.
 */
// LDFLAGS: -Wl,--wrap=jpeg_start_decompress
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <jerror.h>

#include "goldminer/jpeg.h"
#include "goldminer/synth.h"
#include "testutil.h"

/* Count calls of jpeg_start_decompress (the first call that allocates the image). */
boolean __real_jpeg_start_decompress(j_decompress_ptr cinfo);
boolean __wrap_jpeg_start_decompress(j_decompress_ptr cinfo);
static int start_calls;
boolean __wrap_jpeg_start_decompress(j_decompress_ptr cinfo)
{
	start_calls++;
	return __real_jpeg_start_decompress(cinfo);
}

static uint8_t *make(uint32_t w, uint32_t h, uint64_t seed, unsigned flags, size_t *len)
{
	uint8_t *buf = gm_test_jpeg(w, h, seed, flags, len);
	assert_non_null(buf);
	return buf;
}

/* Copy of a decoded image (the handle's buffer is reused by the next call). */
static uint8_t *copy_img(const struct gm_jpeg_image *im)
{
	uint8_t *p = malloc((size_t)im->width * im->height * 3);
	assert_non_null(p);
	for (uint32_t y = 0; y < im->height; y++)
		memcpy(p + (size_t)y * im->width * 3, im->pixels + y * im->stride,
		       (size_t)im->width * 3);
	return p;
}

static void check_region_equals_full(unsigned flags, uint32_t w, uint32_t h)
{
	struct gm_jpeg *j;
	struct gm_jpeg_image full, part;
	size_t len;
	uint8_t *buf = make(w, h, 7, flags, &len);

	assert_int_equal(gm_jpeg_create(&j, 0), 0);
	for (uint32_t n = 1; n <= 8; n++) {
		assert_int_equal(gm_jpeg_open(j, buf, len, NULL), 0);
		assert_int_equal(gm_jpeg_decode_full(j, n, &full), 0);
		assert_int_equal(full.scaled_width, gm_jpeg_scaled_dim(w, n));
		assert_int_equal(full.scaled_height, gm_jpeg_scaled_dim(h, n));
		uint8_t *ref = copy_img(&full);
		uint32_t sw = full.width, sh = full.height;
		/* windows: unaligned interior, left/top edge, right/bottom edge, 1x1 */
		const uint32_t win[][4] = {
		    {sw / 3 + 1, sh / 4 + 3, sw / 2, sh / 2},
		    {0, 0, sw / 2 + 1, sh / 3 + 1},
		    {sw - sw / 3, sh - sh / 5, sw / 3, sh / 5},
		    {sw / 2, sh / 2, 1, 1},
		};
		for (size_t k = 0; k < sizeof(win) / sizeof(win[0]); k++) {
			uint32_t x = win[k][0], y = win[k][1], ww = win[k][2], wh = win[k][3];
			if (ww == 0 || wh == 0)
				continue;
			assert_int_equal(gm_jpeg_open(j, buf, len, NULL), 0);
			assert_int_equal(gm_jpeg_decode_region(j, n, x, y, ww, wh, &part), 0);
			assert_int_equal(part.width, ww);
			assert_int_equal(part.height, wh);
			assert_int_equal(part.x, x);
			assert_int_equal(part.y, y);
			int maxd = 0;
			for (uint32_t r = 0; r < wh; r++)
				for (uint32_t c = 0; c < ww * 3; c++) {
					int d =
					    abs((int)part.pixels[r * part.stride + c] -
						(int)ref[((size_t)(y + r) * sw) * 3 + x * 3 + c]);
					maxd = d > maxd ? d : maxd;
				}
			/*
			 * Identical: the decoder asks libjpeg for 2 extra columns each
			 * side, so the crop-edge chroma upsampling lies outside.
			 */
			if (maxd > 0)
				fail_msg("flags %#x scale %u window %u: max diff %d", flags, n,
					 (unsigned)k, maxd);
		}
		free(ref);
	}
	gm_jpeg_destroy(j);
	free(buf);
}

static void test_region_equals_full_420(void **state)
{
	(void)state;
	check_region_equals_full(0, 333, 250);
}

static void test_region_equals_full_other_layouts(void **state)
{
	(void)state;
	check_region_equals_full(GM_SYNTH_444, 201, 150);
	check_region_equals_full(GM_SYNTH_422, 210, 97);
	check_region_equals_full(GM_SYNTH_GRAY, 190, 130);
	check_region_equals_full(GM_SYNTH_PROGRESSIVE, 230, 170);
	check_region_equals_full(GM_SYNTH_CMYK, 120, 90);
}

/*
 * Decoding only the crop's restart segments: on a restart-marked file, every window
 * at every scale gives the pixels of the original's full decode, and the decoder
 * read a spliced file whenever the window (+ one MCU) is not the whole image.
 * Intervals that divide the MCUs of a row (cut on both axes) and that do not
 * (whole rows; segments straddle rows), 1 MCU, and one longer than the image.
 */
#define GRAY22 0x10000u /* not a synth flag: gray22() */
static uint8_t *gray22(uint32_t w, uint32_t h, size_t *len);

static void check_restart_regions(unsigned flags, uint32_t w, uint32_t h, uint32_t interval)
{
	struct gm_jpeg *j;
	struct gm_jpeg_image full, part;
	size_t len, tl;
	uint8_t *buf = flags == GRAY22 ? gray22(w, h, &len) : make(w, h, 17, flags, &len), *t;
	char err[256];
	int spliced = 0;

	assert_int_equal(
	    gm_jpeg_restart_transcode(buf, len, interval, 0, &t, &tl, err, sizeof(err)), 0);
	assert_int_equal(gm_jpeg_create(&j, 0), 0);
	for (uint32_t n = 1; n <= 8; n *= 2) {
		assert_int_equal(gm_jpeg_open(j, buf, len, NULL), 0);
		assert_int_equal(gm_jpeg_decode_full(j, n, &full), 0);
		uint8_t *ref = copy_img(&full);
		uint32_t sw = full.width, sh = full.height;
		const uint32_t win[][4] = {
		    {sw / 3 + 1, sh / 4 + 3, sw / 2, sh / 2},
		    {0, 0, sw / 2 + 1, sh / 3 + 1},
		    {sw - sw / 3, sh - sh / 5, sw / 3, sh / 5},
		    {sw / 2, sh / 2, 1, 1},
		    {sw / 5, sh - 1, sw / 2, 1},
		    {0, 0, sw, sh},
		};
		for (size_t k = 0; k < sizeof(win) / sizeof(win[0]); k++) {
			uint32_t x = win[k][0], y = win[k][1], ww = win[k][2], wh = win[k][3];
			if (ww == 0 || wh == 0)
				continue;
			assert_int_equal(gm_jpeg_open(j, t, tl, NULL), 0);
			assert_int_equal(gm_jpeg_decode_region(j, n, x, y, ww, wh, &part), 0);
			spliced += gm_jpeg_spliced(j);
			if (ww == sw && wh == sh)
				assert_false(gm_jpeg_spliced(j)); /* nothing to leave out */
			assert_int_equal(part.x, x);
			assert_int_equal(part.y, y);
			assert_int_equal(part.scaled_width, sw);
			for (uint32_t r = 0; r < wh; r++)
				if (memcmp(part.pixels + r * part.stride,
					   ref + ((size_t)(y + r) * sw + x) * 3, (size_t)ww * 3))
					fail_msg("flags %#x interval %u scale %u window %u row %u",
						 flags, interval, n, (unsigned)k, r);
		}
		free(ref);
	}
	if (interval < 1000)
		assert_true(spliced >= 8); /* the small windows at least, at every scale */
	gm_jpeg_destroy(j);
	free(t);
	free(buf);
}

/* A grey JPEG whose one component says 2x2 sampling (its MCU is still 8x8). */
static uint8_t *gray22(uint32_t w, uint32_t h, size_t *len)
{
	struct jpeg_compress_struct c;
	struct jpeg_error_mgr err;
	unsigned char *mem = NULL;
	unsigned long ml = 0;
	uint8_t *row = malloc(w);
	assert_non_null(row);
	c.err = jpeg_std_error(&err);
	jpeg_create_compress(&c);
	jpeg_mem_dest(&c, &mem, &ml);
	c.image_width = w;
	c.image_height = h;
	c.input_components = 1;
	c.in_color_space = JCS_GRAYSCALE;
	jpeg_set_defaults(&c);
	c.comp_info[0].h_samp_factor = c.comp_info[0].v_samp_factor = 2;
	jpeg_start_compress(&c, TRUE);
	while (c.next_scanline < h) {
		for (uint32_t x = 0; x < w; x++)
			row[x] =
			    (uint8_t)(x * 7 + c.next_scanline * 3 + (x * c.next_scanline) % 13);
		JSAMPROW r = row;
		jpeg_write_scanlines(&c, &r, 1);
	}
	jpeg_finish_compress(&c);
	jpeg_destroy_compress(&c);
	free(row);
	*len = ml;
	return mem;
}

/*
 * Windows whose edges sweep every offset within two MCUs, at the scales where
 * chroma is upsampled (8/8) and where it is decoded at twice the scale (3, 5, 6,
 * 7 /8): the splice leaves out a neighbour MCU only where no pixel of the window
 * can depend on it (splice_axis), so every window equals the full decode's.
 */
static void check_window_edges(unsigned flags, uint32_t w, uint32_t h)
{
	struct gm_jpeg *j;
	struct gm_jpeg_image full, part;
	size_t len, tl;
	uint8_t *buf = make(w, h, 23, flags, &len), *t;
	char err[256];
	int spliced = 0;
	static const uint32_t scales[] = {8, 7, 6, 5, 3};

	assert_int_equal(gm_jpeg_restart_transcode(buf, len, 1, 0, &t, &tl, err, sizeof(err)), 0);
	assert_int_equal(gm_jpeg_create(&j, 0), 0);
	for (size_t si = 0; si < sizeof(scales) / sizeof(scales[0]); si++) {
		uint32_t n = scales[si];
		assert_int_equal(gm_jpeg_open(j, buf, len, NULL), 0);
		assert_int_equal(gm_jpeg_decode_full(j, n, &full), 0);
		uint8_t *ref = copy_img(&full);
		uint32_t sw = full.width, sh = full.height, m = 2 * n; /* an MCU, scaled */
		for (uint32_t d = 0; d < 2 * m + 1; d++) {
			uint32_t x = m + d, y = m + (d * 5) % (2 * m), ww = m + 3 * d % (2 * m) + 1;
			uint32_t wh = m + (d * 7) % (2 * m) + 1;
			if (x + ww > sw || y + wh > sh)
				continue;
			assert_int_equal(gm_jpeg_open(j, t, tl, NULL), 0);
			assert_int_equal(gm_jpeg_decode_region(j, n, x, y, ww, wh, &part), 0);
			spliced += gm_jpeg_spliced(j);
			for (uint32_t r = 0; r < wh; r++)
				if (memcmp(part.pixels + r * part.stride,
					   ref + ((size_t)(y + r) * sw + x) * 3, (size_t)ww * 3))
					fail_msg("flags %#x scale %u window %u,%u %ux%u row %u",
						 flags, n, x, y, ww, wh, r);
		}
		free(ref);
	}
	assert_true(spliced >= 100);
	gm_jpeg_destroy(j);
	free(t);
	free(buf);
}

static void test_restart_window_edges(void **state)
{
	(void)state;
	check_window_edges(0, 320, 240);	    /* 4:2:0 */
	check_window_edges(GM_SYNTH_422, 320, 240); /* 4:2:2 */
}

static void test_restart_regions_equal_original(void **state)
{
	(void)state;
	/* 333 wide, 4:2:0: 21 MCUs a row; 7 and 3 divide it, 4 does not */
	static const uint32_t iv[] = {1, 3, 4, 7, 100000 % 65536};
	for (size_t i = 0; i < sizeof(iv) / sizeof(iv[0]); i++)
		check_restart_regions(0, 333, 250, iv[i]);
	check_restart_regions(GM_SYNTH_444, 201, 150, 4); /* 26 MCUs a row: whole rows */
	check_restart_regions(GM_SYNTH_444, 200, 150, 5); /* 25 */
	check_restart_regions(GM_SYNTH_422, 210, 97, 2);
	check_restart_regions(GM_SYNTH_GRAY, 190, 130, 4);
	check_restart_regions(GM_SYNTH_PROGRESSIVE, 230, 170, 3);
	check_restart_regions(GM_SYNTH_CMYK, 120, 90, 1);
	check_restart_regions(GRAY22, 192, 128, 4); /* 24 MCUs a row, not 12 */
	check_restart_regions(GRAY22, 200, 140, 5);
}

static void test_pick_scale(void **state)
{
	(void)state;
	assert_int_equal(gm_jpeg_pick_scale(448, 448, 224, 224), 4);
	assert_int_equal(gm_jpeg_pick_scale(447, 448, 224, 224), 8);
	assert_int_equal(gm_jpeg_pick_scale(1792, 1800, 224, 224), 1);
	assert_int_equal(gm_jpeg_pick_scale(1791, 1800, 224, 224), 2);
	assert_int_equal(gm_jpeg_pick_scale(900, 2000, 224, 224), 2);
	assert_int_equal(gm_jpeg_pick_scale(100, 100, 224, 224), 8);
	assert_int_equal(gm_jpeg_pick_scale(500, 375, 224, 224), 8);
	/* never below the minimum in either dimension */
	for (uint32_t w = 1; w < 3000; w += 37)
		for (uint32_t h = 1; h < 3000; h += 41) {
			uint32_t n = gm_jpeg_pick_scale(w, h, 224, 224);
			assert_true(n == 1 || n == 2 || n == 4 || n == 8);
			if (n < 8)
				assert_true((double)w * n / 8 >= 224 && (double)h * n / 8 >= 224);
			if (n > 1) /* the next reduction would be too small */
				assert_true((double)w * (n / 2) / 8 < 224 ||
					    (double)h * (n / 2) / 8 < 224);
		}
	assert_int_equal(gm_jpeg_scaled_dim(333, 1), 42);
	assert_int_equal(gm_jpeg_scaled_dim(333, 4), 167);
	assert_int_equal(gm_jpeg_scaled_dim(333, 8), 333);
}

static void test_decode_crop_maps_window(void **state)
{
	struct gm_jpeg *j;
	struct gm_jpeg_image im;
	size_t len;
	uint8_t *buf = make(1000, 800, 3, 0, &len);
	(void)state;
	assert_int_equal(gm_jpeg_create(&j, 0), 0);
	assert_int_equal(gm_jpeg_open(j, buf, len, NULL), 0);
	/* 900x700 crop, 224 out: scale 2 (225 x 175 is too small for h -> 4) */
	assert_int_equal(gm_jpeg_decode_crop(j, 50, 60, 900, 700, 224, 224, &im), 0);
	assert_int_equal(im.scale_num, 4);
	assert_int_equal(im.x, 25);
	assert_int_equal(im.y, 30);
	assert_int_equal(im.width, 450);
	assert_int_equal(im.height, 350);
	assert_int_equal(gm_jpeg_open(j, buf, len, NULL), 0);
	assert_int_equal(gm_jpeg_decode_crop(j, 1, 1, 101, 99, 224, 224, &im), 0);
	assert_int_equal(im.scale_num, 8);
	assert_int_equal(im.width, 101);
	assert_int_equal(im.height, 99);
	/* outside the image */
	assert_int_equal(gm_jpeg_open(j, buf, len, NULL), 0);
	assert_int_equal(gm_jpeg_decode_crop(j, 900, 0, 101, 10, 224, 224, &im), -EINVAL);
	assert_non_null(strstr(gm_jpeg_errmsg(j), "outside"));
	gm_jpeg_destroy(j);
	free(buf);
}

static void test_gray_to_rgb(void **state)
{
	struct gm_jpeg *j;
	struct gm_jpeg_info info;
	struct gm_jpeg_image im;
	size_t len;
	uint8_t *buf = make(160, 120, 5, GM_SYNTH_GRAY, &len);
	(void)state;
	assert_int_equal(gm_jpeg_create(&j, 0), 0);
	assert_int_equal(gm_jpeg_open(j, buf, len, &info), 0);
	assert_int_equal(info.components, 1);
	assert_int_equal(gm_jpeg_decode_full(j, 8, &im), 0);
	int varied = 0;
	for (uint32_t y = 0; y < im.height; y++)
		for (uint32_t x = 0; x < im.width; x++) {
			const uint8_t *p = im.pixels + y * im.stride + x * 3;
			assert_int_equal(p[0], p[1]);
			assert_int_equal(p[1], p[2]);
			varied |= p[0] != im.pixels[0];
		}
	assert_true(varied);
	gm_jpeg_destroy(j);
	free(buf);
}

/* Mean absolute difference between two full decodes. */
static double mean_diff(struct gm_jpeg *j, const uint8_t *a, size_t alen, const uint8_t *b,
			size_t blen)
{
	struct gm_jpeg_image im;
	assert_int_equal(gm_jpeg_open(j, a, alen, NULL), 0);
	assert_int_equal(gm_jpeg_decode_full(j, 8, &im), 0);
	uint8_t *ref = copy_img(&im);
	assert_int_equal(gm_jpeg_open(j, b, blen, NULL), 0);
	assert_int_equal(gm_jpeg_decode_full(j, 8, &im), 0);
	double sum = 0;
	for (uint32_t y = 0; y < im.height; y++)
		for (uint32_t x = 0; x < im.width * 3; x++)
			sum += abs((int)im.pixels[y * im.stride + x] -
				   (int)ref[(size_t)y * im.width * 3 + x]);
	free(ref);
	return sum / ((double)im.width * im.height * 3);
}

static void test_cmyk_and_progressive_to_rgb(void **state)
{
	struct gm_jpeg *j;
	struct gm_jpeg_info info;
	size_t l0, l1, l2;
	/* the same picture (seed, size) encoded three ways */
	uint8_t *base = make(200, 150, 9, GM_SYNTH_444 | GM_SYNTH_FLAT, &l0);
	uint8_t *cmyk = make(200, 150, 9, GM_SYNTH_CMYK | GM_SYNTH_FLAT, &l1);
	uint8_t *prog = make(200, 150, 9, GM_SYNTH_444 | GM_SYNTH_PROGRESSIVE | GM_SYNTH_FLAT, &l2);
	(void)state;
	assert_int_equal(gm_jpeg_create(&j, 0), 0);
	assert_int_equal(gm_jpeg_open(j, cmyk, l1, &info), 0);
	assert_true(info.cmyk);
	assert_int_equal(info.components, 4);
	gm_jpeg_abort(j);
	assert_int_equal(gm_jpeg_open(j, prog, l2, &info), 0);
	assert_true(info.progressive);
	assert_false(info.cmyk);
	gm_jpeg_abort(j);
	double dc = mean_diff(j, base, l0, cmyk, l1);
	double dp = mean_diff(j, base, l0, prog, l2);
	/* only JPEG loss apart: a wrong CMYK inversion would be off by ~100 */
	assert_true(dc < 4.0);
	assert_true(dp < 1.0);
	gm_jpeg_destroy(j);
	free(base);
	free(cmyk);
	free(prog);
}

/* A limit past GM_JPEG_MAX_MAX_PIXELS (a negative number cast) is refused, not
 * taken as no limit at all. */
static void test_create_refuses_a_limit_out_of_range(void **state)
{
	struct gm_jpeg *j = NULL;
	(void)state;
	assert_int_equal(gm_jpeg_create(&j, (uint64_t)-1), -EINVAL);
	assert_null(j);
	assert_int_equal(gm_jpeg_create(&j, GM_JPEG_MAX_MAX_PIXELS + 1), -EINVAL);
	assert_int_equal(gm_jpeg_create(&j, GM_JPEG_MAX_MAX_PIXELS), 0);
	gm_jpeg_destroy(j);
}

static void test_empty_and_not_jpeg(void **state)
{
	struct gm_jpeg *j;
	static const uint8_t png[] = {0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13};
	static const char text[] = "hello, this is not a picture\n";
	(void)state;
	assert_int_equal(gm_jpeg_create(&j, 0), 0);
	assert_int_equal(gm_jpeg_open(j, png, 0, NULL), -ENODATA);
	assert_non_null(strstr(gm_jpeg_errmsg(j), "empty"));
	assert_int_equal(gm_jpeg_open(j, png, sizeof(png), NULL), -EBADMSG);
	assert_non_null(strstr(gm_jpeg_errmsg(j), "Not a JPEG"));
	assert_int_equal(strncmp(gm_jpeg_errmsg(j), "gm_jpeg_open: ", 14), 0);
	assert_int_equal(gm_jpeg_open(j, text, sizeof(text) - 1, NULL), -EBADMSG);
	assert_non_null(strstr(gm_jpeg_errmsg(j), "Not a JPEG"));
	/* a lone SOI: header runs out */
	assert_int_equal(gm_jpeg_open(j, "\xff\xd8", 2, NULL), -EBADMSG);
	gm_jpeg_destroy(j);
}

static void test_truncated(void **state)
{
	struct gm_jpeg *j;
	struct gm_jpeg_image im;
	size_t len;
	uint8_t *buf = make(320, 240, 11, 0, &len);
	(void)state;
	assert_int_equal(gm_jpeg_create(&j, 0), 0);
	/* cut in the header */
	assert_int_equal(gm_jpeg_open(j, buf, 100, NULL), -EBADMSG);
	assert_non_null(strstr(gm_jpeg_errmsg(j), "Premature end"));
	/* cut in the entropy data: the full decode must fail, not pad with grey */
	assert_int_equal(gm_jpeg_open(j, buf, len / 2, NULL), 0);
	assert_int_equal(gm_jpeg_decode_full(j, 8, &im), -EBADMSG);
	assert_non_null(strstr(gm_jpeg_errmsg(j), "truncated"));
	assert_int_equal(strncmp(gm_jpeg_errmsg(j), "gm_jpeg_decode_region: ", 23), 0);
	/* same for a progressive file (all scans are read at start) */
	free(buf);
	buf = make(320, 240, 11, GM_SYNTH_PROGRESSIVE, &len);
	assert_int_equal(gm_jpeg_open(j, buf, len - len / 3, NULL), 0);
	assert_int_equal(gm_jpeg_decode_full(j, 8, &im), -EBADMSG);
	/* the handle still works afterwards */
	assert_int_equal(gm_jpeg_open(j, buf, len, NULL), 0);
	assert_int_equal(gm_jpeg_decode_full(j, 8, &im), 0);
	assert_string_equal(gm_jpeg_errmsg(j), "");
	gm_jpeg_destroy(j);
	free(buf);
}

static void test_corrupt(void **state)
{
	struct gm_jpeg *j;
	struct gm_jpeg_image im;
	size_t len;
	uint8_t *buf = make(320, 240, 12, 0, &len);
	(void)state;
	assert_int_equal(gm_jpeg_create(&j, 0), 0);
	/* SOF precision 8 -> 13 */
	uint8_t *bad = malloc(len);
	assert_non_null(bad);
	size_t i;
	for (i = 2; i + 1 < len && !(buf[i] == 0xff && buf[i + 1] == 0xc0); i++)
		;
	assert_true(i + 4 < len);
	memcpy(bad, buf, len);
	bad[i + 4] = 13;
	assert_int_equal(gm_jpeg_open(j, bad, len, NULL), -EBADMSG);
	assert_non_null(strstr(gm_jpeg_errmsg(j), "corrupt"));
	/* entropy data replaced by a marker-like run: data stops early */
	memcpy(bad, buf, len);
	memset(bad + len / 2, 0xff, 64);
	bad[len / 2 + 64] = 0xd9;
	assert_int_equal(gm_jpeg_open(j, bad, len, NULL), 0);
	assert_int_equal(gm_jpeg_decode_full(j, 8, &im), -EBADMSG);
	gm_jpeg_destroy(j);
	free(bad);
	free(buf);
}

static void test_bomb_refused_before_allocation(void **state)
{
	struct gm_jpeg *j;
	struct gm_jpeg_info info;
	uint8_t *buf;
	size_t len;
	(void)state;
	assert_int_equal(gm_synth_bomb_mem(30000, 30000, &buf, &len), 0);
	assert_true(len < 4096);
	assert_int_equal(gm_jpeg_create(&j, 0), 0);
	start_calls = 0;
	assert_int_equal(gm_jpeg_open(j, buf, len, &info), -E2BIG);
	assert_non_null(strstr(gm_jpeg_errmsg(j), "30000x30000"));
	assert_non_null(strstr(gm_jpeg_errmsg(j), "pixel limit"));
	assert_int_equal(start_calls, 0); /* libjpeg never sized anything by the image */
	struct gm_jpeg_image im;
	assert_int_equal(gm_jpeg_decode_full(j, 8, &im), -EINVAL); /* nothing open */
	gm_jpeg_destroy(j);
	free(buf);

	/* the limit is inclusive: exactly w*h passes, one less refuses */
	buf = make(64, 48, 1, 0, &len);
	assert_int_equal(gm_jpeg_create(&j, 64 * 48), 0);
	assert_int_equal(gm_jpeg_open(j, buf, len, NULL), 0);
	gm_jpeg_abort(j);
	gm_jpeg_destroy(j);
	assert_int_equal(gm_jpeg_create(&j, 64 * 48 - 1), 0);
	assert_int_equal(gm_jpeg_open(j, buf, len, NULL), -E2BIG);
	gm_jpeg_destroy(j);
	free(buf);
}

/* Decode a (scale n/8) and b the same way and compare the pixels. */
static void same_decode(struct gm_jpeg *j, const uint8_t *a, size_t la, const uint8_t *b, size_t lb,
			uint32_t n)
{
	struct gm_jpeg_image ia, ib;
	assert_int_equal(gm_jpeg_open(j, a, la, NULL), 0);
	assert_int_equal(gm_jpeg_decode_full(j, n, &ia), 0);
	uint8_t *ref = copy_img(&ia);
	assert_int_equal(gm_jpeg_open(j, b, lb, NULL), 0);
	assert_int_equal(gm_jpeg_decode_full(j, n, &ib), 0);
	assert_int_equal(ib.width, ia.width);
	assert_int_equal(ib.height, ia.height);
	for (uint32_t y = 0; y < ib.height; y++)
		assert_memory_equal(ib.pixels + y * ib.stride, ref + (size_t)y * ia.width * 3,
				    (size_t)ia.width * 3);
	free(ref);
}

static void test_restart_transcode(void **state)
{
	static const unsigned kinds[] = {
	    0, GM_SYNTH_422, GM_SYNTH_444, GM_SYNTH_GRAY, GM_SYNTH_PROGRESSIVE, GM_SYNTH_CMYK};
	static const uint32_t intervals[] = {1, 3, 4, 100, GM_JPEG_MAX_RESTART};
	struct gm_jpeg *j;
	char err[256];
	(void)state;
	assert_int_equal(gm_jpeg_create(&j, 0), 0);
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++)
		for (size_t i = 0; i < sizeof(intervals) / sizeof(intervals[0]); i++) {
			size_t len, tl;
			uint8_t *buf = make(203, 141, 30 + k, kinds[k], &len), *t = NULL;
			assert_int_equal(gm_jpeg_restart_transcode(buf, len, intervals[i], 0, &t,
								   &tl, err, sizeof(err)),
					 0);
			assert_int_equal(gm_test_jpeg_dri(buf, len), -1);
			assert_int_equal(gm_test_jpeg_dri(t, tl), (int)intervals[i]);
			struct gm_jpeg_info info;
			assert_int_equal(gm_jpeg_open(j, t, tl, &info), 0);
			assert_false(info.progressive); /* progressive input becomes baseline */
			gm_jpeg_abort(j);
			/* the same pixels at every DCT scale the loader uses */
			for (uint32_t n = 1; n <= 8; n *= 2)
				same_decode(j, buf, len, t, tl, n);
			free(t);
			free(buf);
		}
	gm_jpeg_destroy(j);
}

static void test_fit_restart(void **state)
{
	struct gm_jpeg *j;
	size_t l1, l2;
	uint8_t *a = make(333, 40, 1, 0, &l1);		  /* 4:2:0: 21 MCUs a row */
	uint8_t *b = make(200, 40, 2, GM_SYNTH_444, &l2); /* 25 */
	(void)state;
	assert_int_equal(gm_jpeg_create(&j, 0), 0);
	assert_int_equal(gm_jpeg_fit_restart(j, a, l1, 4), 3);
	assert_int_equal(gm_jpeg_fit_restart(j, a, l1, 7), 7);
	assert_int_equal(gm_jpeg_fit_restart(j, a, l1, 20), 7);
	assert_int_equal(gm_jpeg_fit_restart(j, a, l1, 100), 21);
	assert_int_equal(gm_jpeg_fit_restart(j, b, l2, 4), 1);
	assert_int_equal(gm_jpeg_fit_restart(j, b, l2, 5), 5);
	assert_int_equal(gm_jpeg_fit_restart(j, "not a jpeg", 10, 4), 4);
	gm_jpeg_destroy(j);
	free(a);
	free(b);
}

static void test_restart_transcode_errors(void **state)
{
	size_t len, tl = 0;
	uint8_t *buf = make(64, 48, 3, 0, &len), *t = NULL, *bomb;
	char err[256];
	(void)state;
	assert_int_equal(gm_jpeg_restart_transcode(buf, len, 0, 0, &t, &tl, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "restart interval"));
	assert_int_equal(gm_jpeg_restart_transcode(buf, len, GM_JPEG_MAX_RESTART + 1, 0, &t, &tl,
						   err, sizeof(err)),
			 -EINVAL);
	assert_int_equal(gm_jpeg_restart_transcode(buf, 0, 4, 0, &t, &tl, err, sizeof(err)),
			 -EINVAL);
	assert_int_equal(
	    gm_jpeg_restart_transcode("not a jpeg", 10, 4, 0, &t, &tl, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "gm_jpeg_restart_transcode: corrupt"));
	/* cut in the entropy data: refused, not padded */
	assert_int_equal(gm_jpeg_restart_transcode(buf, len / 2, 4, 0, &t, &tl, err, sizeof(err)),
			 -EBADMSG);
	assert_int_equal(
	    gm_jpeg_restart_transcode(buf, len, 4, 64 * 48 - 1, &t, &tl, err, sizeof(err)), -E2BIG);
	assert_null(t);
	assert_int_equal(gm_synth_bomb_mem(30000, 30000, &bomb, &len), 0);
	assert_int_equal(gm_jpeg_restart_transcode(bomb, len, 4, 0, &t, &tl, err, sizeof(err)),
			 -E2BIG);
	assert_non_null(strstr(err, "30000x30000"));
	free(bomb);
	free(buf);
}

/*
 * A file without its quantisation tables is refused, also right after a file
 * that had them: libjpeg would keep the last file's tables in its object, and
 * the pixels would depend on what the handle decoded before.
 */
static void test_no_tables_from_the_last_file(void **state)
{
	struct gm_jpeg *j;
	struct gm_jpeg_image im;
	size_t len, i;
	uint8_t *buf = make(64, 48, 5, 0, &len), *cut = malloc(len);
	(void)state;
	assert_non_null(cut);
	for (i = 2; i + 3 < len && !(buf[i] == 0xff && buf[i + 1] == 0xdb); i++)
		;
	assert_true(i + 3 < len);
	size_t seg = 2 + ((size_t)buf[i + 2] << 8 | buf[i + 3]);
	memcpy(cut, buf, i);
	memcpy(cut + i, buf + i + seg, len - i - seg);
	assert_int_equal(gm_jpeg_create(&j, 0), 0);
	assert_int_equal(gm_jpeg_open(j, buf, len, NULL), 0);
	assert_int_equal(gm_jpeg_decode_full(j, 8, &im), 0);
	int rc = gm_jpeg_open(j, cut, len - seg, NULL);
	if (rc == 0)
		rc = gm_jpeg_decode_full(j, 8, &im);
	assert_int_equal(rc, -EBADMSG);
	assert_non_null(strstr(gm_jpeg_errmsg(j), "Quantization table"));
	gm_jpeg_destroy(j);
	free(cut);
	free(buf);
}

static void test_bad_calls(void **state)
{
	struct gm_jpeg *j;
	struct gm_jpeg_image im;
	size_t len;
	uint8_t *buf = make(100, 80, 2, 0, &len);
	(void)state;
	assert_int_equal(gm_jpeg_create(&j, 0), 0);
	assert_int_equal(gm_jpeg_decode_region(j, 8, 0, 0, 10, 10, &im), -EINVAL);
	assert_non_null(strstr(gm_jpeg_errmsg(j), "no image open"));
	assert_int_equal(gm_jpeg_open(j, buf, len, NULL), 0);
	assert_int_equal(gm_jpeg_decode_region(j, 8, 95, 0, 10, 10, &im), -EINVAL);
	assert_int_equal(gm_jpeg_open(j, buf, len, NULL), 0);
	assert_int_equal(gm_jpeg_decode_region(j, 0, 0, 0, 1, 1, &im), -EINVAL);
	assert_int_equal(gm_jpeg_open(j, buf, len, NULL), 0);
	assert_int_equal(gm_jpeg_decode_region(j, 8, 0, 0, 0, 1, &im), -EINVAL);
	assert_int_equal(gm_jpeg_open(j, buf, len, NULL), 0);
	assert_int_equal(gm_jpeg_decode_full(j, 9, &im), -EINVAL);
	/* a decode closes the image */
	assert_int_equal(gm_jpeg_open(j, buf, len, NULL), 0);
	assert_int_equal(gm_jpeg_decode_full(j, 8, &im), 0);
	assert_int_equal(gm_jpeg_decode_full(j, 8, &im), -EINVAL);
	gm_jpeg_abort(j); /* no-op when nothing is open */
	gm_jpeg_destroy(j);
	gm_jpeg_destroy(NULL);
	free(buf);
}

static void test_warnings_kept_apart(void **state)
{
	struct gm_jpeg *j;
	struct gm_jpeg_image im;
	size_t len;
	uint8_t *buf = make(120, 90, 4, 0, &len);
	(void)state;
	/* 3 junk bytes before the SOS marker: libjpeg warns "extraneous bytes" */
	size_t i;
	for (i = 2; i + 1 < len && !(buf[i] == 0xff && buf[i + 1] == 0xda); i++)
		;
	uint8_t *odd = malloc(len + 3);
	assert_non_null(odd);
	memcpy(odd, buf, i);
	memcpy(odd + i, "abc", 3);
	memcpy(odd + i + 3, buf + i, len - i);
	assert_int_equal(gm_jpeg_create(&j, 0), 0);
	assert_int_equal(gm_jpeg_open(j, odd, len + 3, NULL), 0);
	assert_int_equal(gm_jpeg_decode_full(j, 8, &im), 0);
	assert_int_equal(gm_jpeg_warnings(j), 1);
	assert_non_null(strstr(gm_jpeg_warnmsg(j), "extraneous"));
	assert_string_equal(gm_jpeg_errmsg(j), "");
	/* reset by the next open */
	assert_int_equal(gm_jpeg_open(j, buf, len, NULL), 0);
	assert_int_equal(gm_jpeg_warnings(j), 0);
	gm_jpeg_abort(j);
	gm_jpeg_destroy(j);
	free(odd);
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_region_equals_full_420),
	    cmocka_unit_test(test_region_equals_full_other_layouts),
	    cmocka_unit_test(test_pick_scale),
	    cmocka_unit_test(test_create_refuses_a_limit_out_of_range),
	    cmocka_unit_test(test_decode_crop_maps_window),
	    cmocka_unit_test(test_gray_to_rgb),
	    cmocka_unit_test(test_cmyk_and_progressive_to_rgb),
	    cmocka_unit_test(test_empty_and_not_jpeg),
	    cmocka_unit_test(test_truncated),
	    cmocka_unit_test(test_corrupt),
	    cmocka_unit_test(test_bomb_refused_before_allocation),
	    cmocka_unit_test(test_bad_calls),
	    cmocka_unit_test(test_warnings_kept_apart),
	    cmocka_unit_test(test_restart_transcode),
	    cmocka_unit_test(test_restart_transcode_errors),
	    cmocka_unit_test(test_fit_restart),
	    cmocka_unit_test(test_restart_regions_equal_original),
	    cmocka_unit_test(test_restart_window_edges),
	    cmocka_unit_test(test_no_tables_from_the_last_file),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
