/*
 * test_huff.c - goldminer's Huffman decoder (core/huff.c) against libjpeg's.
 *
 * core/huff.c takes the place of libjpeg's entropy decoder in every baseline decode;
 * it must give the same coefficients from the same bits, and on bad data the same
 * warnings at the same point. Three levels of proof: (1) pixels: every image of a
 * varied set (layouts, sizes, restart intervals, standard / optimized / hand-made
 * Huffman tables, qualities 30..100), full and windowed at every scale, decoded by
 * a handle with goldminer's decoder and one with libjpeg's (gm_jpeg_set_own_huffman)
 * give the same bytes; (2) coefficients: the same files' MCUs decoded by both
 * decoders side by side, each block compared, with the warnings each emits (a
 * recording error manager, warnings not fatal), libjpeg's also on its slow path
 * alone; (3) both on seeded random corruptions of those files (return code,
 * pixels, warnings, coefficients), every difference explained or a failure. The
 * comparisons are tests/fuzz/huffdiff.h's, which fuzz_huff shares. The rest of the
 * JPEG decoder (core/jpeg.c) is tests/test_jpeg.c.
 */
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
#include "fuzz/huffdiff.h" /* goldminer's Huffman decoder against libjpeg's */
#include "testutil.h"

/* A build whose libjpeg-turbo failed core/probe/huff.c has no decoder to test
 * (GM_OWN_HUFFMAN 0, see core/huff.h): every test skips, saying so. */
#if GM_OWN_HUFFMAN

/* A deterministic random stream (xorshift64*). */
static uint64_t hd_rand(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545F4914F6CDD1Dull;
}

enum hd_tables {
	HD_STD,	 /* libjpeg's standard tables (or optimized ones, with .optimize) */
	HD_LONG, /* every code 11..16 bits: each symbol takes huff.c's slow search */
	HD_EDGE, /* code lengths 2..16, many at 9..11: the lookup's edge, both ways */
};

struct hd_enc {
	uint32_t w, h;
	int comps;	   /* 1 (grey), 3 (YCbCr), 4 (CMYK or YCCK) */
	J_COLOR_SPACE jcs; /* the file's colour space for 4 components */
	int hs, vs;	   /* component 0's sampling factors (and K's), others 1x1 */
	int quality;
	bool optimize;
	enum hd_tables tables;
	unsigned restart, restart_rows; /* restart interval in MCUs, or in MCU rows */
	bool arith;			/* arithmetic coding (goldminer keeps libjpeg's) */
	uint64_t seed;
};

/*
 * Hand-made tables: the symbols in a fixed order (AC: EOB, then by magnitude
 * category and run, ZRL last; DC: categories 0..11) and the count of codes of each
 * length 1..16.
 */
static void hd_table(JHUFF_TBL *t, bool ac, enum hd_tables kind)
{
	static const uint8_t long_ac[17] = {0, 0, 0,  0,  0,  0,  0,  0, 0,
					    0, 0, 40, 40, 30, 20, 20, 12};
	static const uint8_t long_dc[17] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2};
	static const uint8_t edge_ac[17] = {0,	0,  1,	1,  2,	3,  4,	6, 8,
					    10, 12, 20, 25, 20, 20, 15, 15};
	static const uint8_t edge_dc[17] = {0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 1, 1, 0, 0, 0, 0};
	const uint8_t *bits = kind == HD_LONG ? (ac ? long_ac : long_dc) : (ac ? edge_ac : edge_dc);
	int n = 0;
	memcpy(t->bits, bits, 17);
	if (!ac) {
		for (int s = 0; s < 12; s++)
			t->huffval[n++] = (UINT8)s;
	} else {
		t->huffval[n++] = 0x00;
		for (int s = 1; s <= 10; s++)
			for (int r = 0; r < 16; r++)
				t->huffval[n++] = (UINT8)(r << 4 | s);
		t->huffval[n++] = 0xF0;
	}
	int sum = 0;
	for (int l = 1; l <= 16; l++)
		sum += bits[l];
	assert_int_equal(sum, n);
	t->sent_table = FALSE;
}

/*
 * Pixels with everything an entropy coder meets: smooth gradients (long zero runs,
 * EOBs), hard noise (large coefficients: the longest magnitude categories at high
 * quality), edges and flat areas. comps bytes a pixel.
 */
static uint8_t *hd_pixels(const struct hd_enc *e)
{
	uint64_t s = e->seed * 0x9E3779B97F4A7C15ull + 1;
	uint8_t *px = malloc((size_t)e->w * e->h * (size_t)e->comps);
	assert_non_null(px);
	for (uint32_t y = 0; y < e->h; y++)
		for (uint32_t x = 0; x < e->w; x++) {
			uint32_t zone = ((x / 24) + (y / 16) * 3 + (uint32_t)e->seed) % 4;
			for (int c = 0; c < e->comps; c++) {
				uint32_t v;
				uint64_t r = hd_rand(&s);
				if (zone == 0)
					v = (x * 3 + y * 2 + (uint32_t)c * 40) & 255;
				else if (zone == 1)
					v = (r >> 20) & 255; /* noise */
				else if (zone == 2)	     /* stripes, checks: |AC| up to ~900 */
					v = (y & 8 ? x + y : x / 3 + y / 5) & 1 ? 250 : 5;
				else
					v = 128 + (uint32_t)c * 20 + (uint32_t)((r >> 40) & 7);
				px[((size_t)y * e->w + x) * (size_t)e->comps + (size_t)c] =
				    (uint8_t)v;
			}
		}
	return px;
}

static uint8_t *hd_encode(const struct hd_enc *e, size_t *len)
{
	struct jpeg_compress_struct c;
	struct jpeg_error_mgr err;
	unsigned char *mem = NULL;
	unsigned long ml = 0;
	uint8_t *px = hd_pixels(e);

	c.err = jpeg_std_error(&err);
	jpeg_create_compress(&c);
	jpeg_mem_dest(&c, &mem, &ml);
	c.image_width = e->w;
	c.image_height = e->h;
	c.input_components = e->comps;
	c.in_color_space = e->comps == 1 ? JCS_GRAYSCALE : e->comps == 3 ? JCS_RGB : JCS_CMYK;
	jpeg_set_defaults(&c);
	if (e->comps == 4)
		jpeg_set_colorspace(&c, e->jcs);
	jpeg_set_quality(&c, e->quality, TRUE);
	for (int i = 0; i < c.num_components; i++)
		c.comp_info[i].h_samp_factor = c.comp_info[i].v_samp_factor = 1;
	c.comp_info[0].h_samp_factor = e->hs;
	c.comp_info[0].v_samp_factor = e->vs;
	if (e->comps == 4) {
		c.comp_info[3].h_samp_factor = e->hs;
		c.comp_info[3].v_samp_factor = e->vs;
	}
	c.optimize_coding = e->optimize;
	c.arith_code = e->arith;
	c.restart_interval = e->restart;
	c.restart_in_rows = (int)e->restart_rows;
	if (e->tables != HD_STD)
		for (int i = 0; i < 2; i++) {
			hd_table(c.dc_huff_tbl_ptrs[i], false, e->tables);
			hd_table(c.ac_huff_tbl_ptrs[i], true, e->tables);
		}
	jpeg_start_compress(&c, TRUE);
	while (c.next_scanline < e->h) {
		JSAMPROW r = px + (size_t)c.next_scanline * e->w * (size_t)e->comps;
		jpeg_write_scanlines(&c, &r, 1);
	}
	jpeg_finish_compress(&c);
	jpeg_destroy_compress(&c);
	free(px);
	*len = ml;
	return mem;
}

static int hd_spliced; /* decodes of spliced files (restart-marked) by goldminer's decoder */

/*
 * buf decoded by own (goldminer's decoder) and lib (libjpeg's), full and in up to
 * nwin - 1 (at most four) windows at scales 1, 2, 3, 4, 8: every decode succeeds with the same
 * pixels and warnings; own used goldminer's decoder iff baseline, lib never. Returns how many
 * decodes used goldminer's decoder.
 */
static int hd_same_both_ways(struct gm_jpeg *own, struct gm_jpeg *lib, const uint8_t *buf,
			     size_t len, bool baseline, size_t nwin, const char *what)
{
	static const uint32_t scales[] = {1, 2, 3, 4, 8};
	struct gm_jpeg_info info;
	struct gm_jpeg_image a, b;
	int used = 0;

	assert_int_equal(gm_jpeg_open(own, buf, len, &info), 0);
	gm_jpeg_abort(own);
	for (size_t si = 0; si < sizeof(scales) / sizeof(scales[0]); si++) {
		uint32_t n = scales[si], sw = gm_jpeg_scaled_dim(info.width, n);
		uint32_t sh = gm_jpeg_scaled_dim(info.height, n);
		const uint32_t win[][4] = {
		    {0, 0, 0, 0},
		    {sw / 3, sh / 4, sw - sw / 3, (sh + 1) / 2},
		    {0, sh - 1, sw, 1},
		    {sw - 1, 0, 1, sh},
		    {sw / 2, sh / 2, (sw + 3) / 4, (sh + 3) / 4},
		};
		for (size_t k = 0; k < nwin && k < sizeof(win) / sizeof(win[0]); k++) {
			int ra = hd_decode(own, buf, len, n, win[k], &a);
			int rb = hd_decode(lib, buf, len, n, win[k], &b);
			if (ra || rb)
				fail_msg("%s scale %u window %zu: rc %d (%s) / libjpeg's %d (%s)",
					 what, n, k, ra, gm_jpeg_errmsg(own), rb,
					 gm_jpeg_errmsg(lib));
			if (gm_jpeg_own_huffman(own) != baseline || gm_jpeg_own_huffman(lib))
				fail_msg("%s scale %u window %zu: own_huffman %d / %d", what, n, k,
					 gm_jpeg_own_huffman(own), gm_jpeg_own_huffman(lib));
			used += gm_jpeg_own_huffman(own);
			hd_spliced += gm_jpeg_spliced(own) && gm_jpeg_own_huffman(own);
			if (!hd_same_pixels(&a, &b) ||
			    gm_jpeg_warnings(own) != gm_jpeg_warnings(lib))
				fail_msg("%s scale %u window %zu: pixels or warnings differ", what,
					 n, k);
		}
	}
	return used;
}

/* ---- coefficient level: the decoders side by side over the MCUs of a file ---------- */

/* ---- the image set ---------------------------------------------------------------- */

#define HD_CMYK JCS_CMYK
#define HD_YCCK JCS_YCCK

/* Layouts, sizes, tables, qualities and restart intervals, each row one file. */
static const struct hd_enc hd_set[] = {
    /* w, h, comps, jcs, hs, vs, quality, optimize, tables, restart, rows, arith, seed */
    {600, 401, 3, JCS_YCbCr, 2, 2, 90, false, HD_STD, 0, 0, false, 1}, /* 4:2:0 */
    {600, 401, 3, JCS_YCbCr, 2, 2, 100, true, HD_STD, 5, 0, false, 2},
    {333, 250, 3, JCS_YCbCr, 2, 1, 75, false, HD_STD, 2, 0, false, 3},	/* 4:2:2 */
    {201, 150, 3, JCS_YCbCr, 1, 1, 100, false, HD_STD, 1, 0, false, 4}, /* 4:4:4 */
    {210, 97, 3, JCS_YCbCr, 1, 2, 50, true, HD_STD, 0, 1, false, 5},	/* 4:4:0 */
    {190, 130, 1, JCS_GRAYSCALE, 1, 1, 30, false, HD_STD, 5, 0, false, 6},
    {190, 130, 1, JCS_GRAYSCALE, 1, 1, 100, true, HD_STD, 0, 0, false, 7},
    {120, 90, 4, HD_CMYK, 1, 1, 95, false, HD_STD, 2, 0, false, 8},
    {120, 90, 4, HD_YCCK, 2, 2, 85, true, HD_STD, 0, 1, false, 9},
    {1, 1, 3, JCS_YCbCr, 2, 2, 90, false, HD_STD, 0, 0, false, 10},
    {7, 9, 3, JCS_YCbCr, 2, 2, 100, false, HD_STD, 1, 0, false, 11},
    {17, 33, 1, JCS_GRAYSCALE, 1, 1, 60, true, HD_STD, 1, 0, false, 12},
    {17, 33, 3, JCS_YCbCr, 1, 1, 100, false, HD_LONG, 2, 0, false, 13},
    {160, 120, 3, JCS_YCbCr, 2, 2, 100, false, HD_LONG, 0, 0, false, 14},
    {160, 120, 3, JCS_YCbCr, 2, 2, 100, false, HD_EDGE, 5, 0, false, 15},
    {150, 100, 1, JCS_GRAYSCALE, 1, 1, 40, false, HD_EDGE, 0, 0, false, 16},
    {150, 100, 3, JCS_YCbCr, 2, 1, 97, false, HD_EDGE, 0, 1, false, 17},
    {64, 48, 4, HD_CMYK, 1, 1, 100, false, HD_LONG, 1, 0, false, 18},
    {120, 90, 3, JCS_YCbCr, 2, 2, 90, false, HD_STD, 0, 0, true, 19}, /* arithmetic */
    {240, 160, 3, JCS_YCbCr, 2, 2, 95, false, HD_STD, 0, 0, false, 20},
};

/* File i of the set (the same bytes every time). */
static uint8_t *hd_file(size_t i, size_t *len)
{
	return hd_encode(&hd_set[i], len);
}

/*
 * The pixels of every file of the set (and of its restart-marked copies, whose
 * windows are spliced) are the same with goldminer's decoder and libjpeg's, at
 * every scale, and goldminer's is the one used for every baseline file.
 */
static void test_huff_same_pixels_as_libjpeg(void **state)
{
	struct gm_jpeg *own, *lib;
	char err[256];
	(void)state;
	assert_int_equal(gm_jpeg_create(&own, 0), 0);
	assert_int_equal(gm_jpeg_create(&lib, 0), 0);
	gm_jpeg_set_own_huffman(lib, false);
	hd_spliced = 0;
	for (size_t i = 0; i < sizeof(hd_set) / sizeof(hd_set[0]); i++) {
		size_t len, tl;
		uint8_t *buf = hd_file(i, &len), *t;
		char what[64];
		snprintf(what, sizeof(what), "file %zu", i);
		assert_true(hd_same_both_ways(own, lib, buf, len, !hd_set[i].arith, 5, what) > 0 ||
			    hd_set[i].arith);
		if (hd_set[i].arith || hd_set[i].w * hd_set[i].h > 100000) {
			free(buf);
			continue;
		}
		/* restart-marked (lossless transcode): 1 MCU, and an interval that does not
		 * divide a row; the windows are decoded from spliced files */
		static const uint32_t iv[] = {1, 3};
		for (size_t k = 0; k < 2; k++) {
			assert_int_equal(gm_jpeg_restart_transcode(buf, len, iv[k], 0, &t, &tl, err,
								   sizeof(err)),
					 0);
			snprintf(what, sizeof(what), "file %zu restart %u", i, iv[k]);
			hd_same_both_ways(own, lib, t, tl, true, 5, what);
			free(t);
		}
		free(buf);
	}
	assert_true(hd_spliced > 100);
	/* progressive: goldminer's decoder is not installed, the pixels are libjpeg's */
	size_t len;
	uint8_t *prog = gm_test_jpeg(230, 170, 3, GM_SYNTH_PROGRESSIVE, &len);
	assert_non_null(prog);
	assert_int_equal(hd_same_both_ways(own, lib, prog, len, false, 5, "progressive"), 0);
	free(prog);
	gm_jpeg_destroy(own);
	gm_jpeg_destroy(lib);
}

/*
 * Every MCU of every baseline file of the set (and its restart-marked copies):
 * the same coefficients from both decoders, block by block, and no warnings.
 */
static void test_huff_same_coefficients(void **state)
{
	struct gm_huff *h = calloc(1, sizeof(*h));
	char err[256];
	bool installed, diverge;
	(void)state;
	assert_non_null(h);
	for (size_t i = 0; i < sizeof(hd_set) / sizeof(hd_set[0]); i++) {
		if (hd_set[i].arith)
			continue;
		size_t len, tl;
		uint8_t *buf = hd_file(i, &len), *t;
		if (hd_coefs_same(buf, len, h, false, &installed, &diverge) != HD_SAME || diverge)
			fail_msg("file %zu: the coefficients or warnings differ", i);
		assert_true(installed);
		assert_int_equal(
		    gm_jpeg_restart_transcode(buf, len, 2, 0, &t, &tl, err, sizeof(err)), 0);
		if (hd_coefs_same(t, tl, h, false, &installed, &diverge) != HD_SAME || diverge)
			fail_msg("file %zu restart 2: the coefficients or warnings differ", i);
		assert_true(installed);
		free(t);
		free(buf);
	}
	free(h);
}

/*
 * MCUs passed over as libjpeg skips them (rows above a window, the coefficient
 * output's columns beside it; huff.c's skip table) leave the decoder where
 * decoding them does: every file of the set, its restart-marked copy, and copies
 * cut short in the entropy data, with no marker after the cut (the reader runs
 * into the buffer's end: its warning must come at the MCU it comes at when every
 * MCU is decoded) and with an EOI after it (bits past the data), each decoded
 * with runs of 1, 2 and 5 MCUs skipped: the other MCUs' coefficients and every
 * warning (code, MCU) are those of the decode of every MCU.
 */
static void test_huff_skipped_mcus_leave_the_decoder_as_decoded(void **state)
{
	static const long runs[] = {1, 2, 5};
	struct gm_huff *h = calloc(1, sizeof(*h));
	char err[256];
	int cases = 0, eof = 0, hit = 0;
	(void)state;
	assert_non_null(h);
	for (size_t i = 0; i < sizeof(hd_set) / sizeof(hd_set[0]); i++) {
		if (hd_set[i].arith)
			continue;
		size_t len, tl;
		uint8_t *f = hd_file(i, &len), *t;
		assert_int_equal(gm_jpeg_restart_transcode(f, len, 2, 0, &t, &tl, err, sizeof(err)),
				 0);
		for (int v = 0; v < 14 + 2 * 40; v++) {
			/* even: the file, odd: its restart-marked copy; v / 2: 0 whole, 1-3
			 * cut at a quarter, half and three quarters of the entropy data,
			 * 4-6 the same cuts with an EOI after them, 7 on: cut at each of
			 * the 40 bytes after the half (where the end is met, as to the bit,
			 * moves across MCUs' ends) */
			static const size_t quarters[] = {1, 2, 3};
			const uint8_t *src = v % 2 ? t : f;
			size_t sl = v % 2 ? tl : len, s0 = hd_scan_data(src, sl), ml = sl;
			int cut = v / 2;
			assert_true(s0 > 0 && s0 < sl);
			uint8_t *m = malloc(sl + 2);
			assert_non_null(m);
			memcpy(m, src, sl);
			if (cut > 6) {
				ml = s0 + (sl - s0) / 2 + (size_t)(cut - 7);
				if (ml >= sl) { /* a file too small for that cut */
					free(m);
					continue;
				}
			} else if (cut) {
				ml = s0 + (sl - s0) * quarters[(cut - 1) % 3] / 4;
				if (cut > 3)
					m[ml++] = 0xFF, m[ml++] = 0xD9;
			}
			struct hd_coefs all, some;
			hd_coefs_decode(m, ml, HD_OWN, h, false, &all);
			assert_true(all.installed);
			for (size_t r = 0; r < sizeof(runs) / sizeof(runs[0]); r++) {
				hd_coefs_decode_skip(m, ml, HD_OWN, h, false, runs[r], &some);
				/* the skipped MCUs' blocks: 0 in some; so in a copy of all */
				JBLOCK *keep =
				    malloc((size_t)all.nmcu * (size_t)all.per * sizeof(JBLOCK));
				assert_non_null(keep);
				memcpy(keep, all.blocks,
				       (size_t)all.nmcu * (size_t)all.per * sizeof(JBLOCK));
				for (long mc = 0; mc < all.nmcu; mc++)
					if (mc % (2 * runs[r]) < runs[r])
						memset(all.blocks + mc * all.per, 0,
						       (size_t)all.per * sizeof(JBLOCK));
				if (!hd_coefs_match(&all, &some, false)) {
					hd_coefs_print("every MCU", &all);
					hd_coefs_print("skipping", &some);
					fail_msg("file %zu variant %d, runs of %ld skipped: not "
						 "where the decode of every MCU is",
						 i, v, runs[r]);
				}
				memcpy(all.blocks, keep,
				       (size_t)all.nmcu * (size_t)all.per * sizeof(JBLOCK));
				free(keep);
				free(some.blocks);
				cases++;
			}
			for (int w = 0; w < all.err.n && w < HD_MAX_WARN; w++) {
				eof += all.err.code[w] == JWRN_JPEG_EOF;
				hit += all.err.code[w] == JWRN_HIT_MARKER;
			}
			free(all.blocks);
			free(m);
		}
		free(t);
		free(f);
	}
	/* the cuts did reach both endings */
	assert_true(cases > 100 && eof > 10 && hit > 10);
	free(h);
}

/* Count the coefficients of a file with |v| >= min (libjpeg's decode). */
static long hd_count_large(const uint8_t *buf, size_t len, int min)
{
	struct hd_coefs a;
	long n = 0;
	hd_coefs_decode(buf, len, HD_LIB, NULL, false, &a);
	assert_false(a.failed);
	for (long k = 0; k < a.nmcu * a.per; k++)
		for (int c = 1; c < 64; c++)
			n += abs(a.blocks[k][c]) >= min;
	free(a.blocks);
	return n;
}

/*
 * The paths of huff.c beside the one-lookup step really run on the set: with the
 * hand-made "long" tables every code is 11..16 bits, so the lookup tables are all
 * empty and every symbol of the file goes through the canonical search (and the
 * coefficients still equal libjpeg's); the "edge" tables have codes on both sides
 * of the lookup's width; and the quality-100 files hold AC coefficients of
 * category 10 (|v| >= 512), whose code and magnitude bits are over 10 bits
 * together whatever the code.
 */
static void test_huff_slow_path_runs(void **state)
{
	struct gm_huff *h = calloc(1, sizeof(*h));
	struct jpeg_decompress_struct ci;
	struct jpeg_error_mgr jerr;
	size_t len;
	bool installed, diverge;
	(void)state;
	assert_non_null(h);
	for (size_t i = 0; i < sizeof(hd_set) / sizeof(hd_set[0]); i++) {
		if (hd_set[i].tables == HD_STD)
			continue;
		uint8_t *buf = hd_file(i, &len);
		ci.err = jpeg_std_error(&jerr);
		jpeg_create_decompress(&ci);
		jpeg_mem_src(&ci, buf, (unsigned long)len);
		assert_int_equal(jpeg_read_header(&ci, TRUE), JPEG_HEADER_OK);
		jpeg_start_decompress(&ci);
		assert_true(gm_huff_install(h, &ci));
		int none = 0; /* lookup entries without a code of GM_HUFF_FAST bits or fewer */
		for (int b = 0; b < ci.blocks_in_MCU; b++)
			for (uint32_t k = 0; k < (1u << GM_HUFF_FAST); k++)
				none += (h->actab[b]->full[k] == 0) + (h->dc[b]->full[k] == 0);
		if (hd_set[i].tables == HD_LONG)
			assert_int_equal(none, ci.blocks_in_MCU * 2 << GM_HUFF_FAST);
		else
			assert_true(none > 0 && none < ci.blocks_in_MCU * 2 << GM_HUFF_FAST);
		jpeg_destroy_decompress(&ci);
		if (hd_coefs_same(buf, len, h, false, &installed, &diverge) != HD_SAME || diverge)
			fail_msg("file %zu: the coefficients or warnings differ", i);
		free(buf);
	}
	/* category-10 coefficients in the quality-100 files (standard, optimized) */
	for (size_t i = 1; i <= 3; i += 2) {
		assert_int_equal(hd_set[i].quality, 100);
		uint8_t *buf = hd_file(i, &len);
		assert_true(hd_count_large(buf, len, 512) > 0);
		free(buf);
	}
	free(h);
}

/* ---- corrupt input ------------------------------------------------------------------ */

/*
 * One seeded corruption of f (entropy data from s0, EOI last) into out (room for
 * len + 8 bytes): bits or bytes changed, a cut, a 0xFF / stuffed / fill byte pair,
 * a stray RSTn, an RSTn renumbered or doubled, the EOI (and more) cut off.
 * Returns the new length.
 */
static size_t hd_mutate(const uint8_t *f, size_t len, size_t s0, uint64_t *rs, uint8_t *out)
{
	size_t span = len - 2 - s0, at = s0 + hd_rand(rs) % span, n = len;
	memcpy(out, f, len);
	uint64_t kind = hd_rand(rs) % 9;
	switch (kind) {
	case 0: /* one to three bits */
		for (int k = (int)(hd_rand(rs) % 3); k >= 0; k--)
			out[s0 + hd_rand(rs) % span] ^= (uint8_t)(1u << (hd_rand(rs) % 8));
		break;
	case 1: /* a byte */
		out[at] = (uint8_t)hd_rand(rs);
		break;
	case 2: /* cut anywhere in the entropy data */
		n = at;
		break;
	case 3: /* a lone 0xFF: with the byte after it, a marker, fill or stuffing */
		memmove(out + at + 1, out + at, len - at);
		out[at] = 0xFF;
		n = len + 1;
		break;
	case 4: /* FF 00 (a data byte 0xFF) or FF FF (fill) */
	case 5: /* a stray RSTn */ {
		uint64_t k = hd_rand(rs);
		memmove(out + at + 2, out + at, len - at);
		out[at] = 0xFF;
		out[at + 1] = (uint8_t)(kind == 4 ? (k & 1 ? 0xFF : 0x00) : 0xD0 + k % 8);
		n = len + 2;
		break;
	}
	case 6: /* an RSTn renumbered, or doubled */
	case 7: {
		size_t r[256], nr = 0;
		for (size_t i = s0; i + 1 < len && nr < 256; i++)
			if (f[i] == 0xFF && f[i + 1] >= 0xD0 && f[i + 1] <= 0xD7)
				r[nr++] = i;
		if (!nr) {
			out[at] ^= 0x10;
			break;
		}
		size_t p = r[hd_rand(rs) % nr];
		if (hd_rand(rs) % 2) {
			out[p + 1] =
			    (uint8_t)(0xD0 + (out[p + 1] - 0xD0 + 1 + hd_rand(rs) % 7) % 8);
		} else {
			memmove(out + p + 2, out + p, len - p);
			n = len + 2;
		}
		break;
	}
	default: /* the end cut: EOI, and up to 6 bytes before it */
		n = len - 2 - hd_rand(rs) % 7;
		break;
	}
	return n;
}

/*
 * 3000 seeded random corruptions of files of the set and of restart-marked copies
 * (hd_mutate): goldminer's decoder gives every coefficient and warning libjpeg's
 * slow path gives up to where core/jpeg.c stops (hd_coefs_same), and the same
 * outcome through core/jpeg.c as libjpeg's decoder (hd_same_outcome), but where
 * libjpeg-turbo's fast path disagrees with its own slow path (hd_fast_path_known:
 * then goldminer's outcome is the slow path's) or where one reader warned of the
 * end of the file only because it read further ahead (hd_coefs_same).
 */
static void test_huff_corrupt_same_outcome(void **state)
{
	static const size_t files[] = {19, 2, 3, 5, 7, 11, 13, 14, 15, 17};
	struct gm_jpeg *own, *lib;
	struct gm_huff *h = calloc(1, sizeof(*h));
	char err[256], what[96], why[512];
	int decoded = 0, runs = 0, explained = 0, diverged = 0;
	bool installed, diverge;
	(void)state;
	assert_non_null(h);
	assert_int_equal(gm_jpeg_create(&own, 0), 0);
	assert_int_equal(gm_jpeg_create(&lib, 0), 0);
	gm_jpeg_set_own_huffman(lib, false);
	for (size_t fi = 0; fi < 2 * sizeof(files) / sizeof(files[0]); fi++) {
		size_t len, tl;
		uint8_t *f = hd_file(files[fi / 2], &len), *t;
		if (fi % 2) { /* the restart-marked copy, 1 MCU */
			assert_int_equal(
			    gm_jpeg_restart_transcode(f, len, 1, 0, &t, &tl, err, sizeof(err)), 0);
			free(f);
			f = t;
			len = tl;
		}
		size_t s0 = hd_scan_data(f, len);
		assert_true(s0 > 0 && s0 + 4 < len);
		uint8_t *m = malloc(len + 8);
		assert_non_null(m);
		uint64_t rs = 0x5eed0000u + fi;
		for (int i = 0; i < 150; i++) {
			size_t ml = hd_mutate(f, len, s0, &rs, m);
			snprintf(what, sizeof(what), "file %zu%s mutation %d", files[fi / 2],
				 fi % 2 ? " restart 1" : "", i);
			if (hd_coefs_same(m, ml, h, true, &installed, &diverge) != HD_SAME)
				fail_msg("%s: coefficients or warnings differ from libjpeg's",
					 what);
			diverged += diverge;
			int ok =
			    hd_same_outcome(own, lib, m, ml, diverge, &explained, why, sizeof(why));
			if (ok < 0)
				fail_msg("%s %s", what, why);
			decoded += ok;
			runs++;
		}
		free(m);
		free(f);
	}
	assert_int_equal(runs, 3000);
	assert_true(decoded > 100); /* not all fatal: some corruptions decode */
	/* the explained differences are a minority (about 230 of 6000 decodes) */
	assert_true(explained < runs / 8 && diverged < runs / 8);
	gm_jpeg_destroy(own);
	gm_jpeg_destroy(lib);
	free(h);
}

/* Decode buf three ways (recording as for a corrupt file) into a, s, o. */
static void hd_coefs_three(const uint8_t *buf, size_t len, struct gm_huff *h, struct hd_coefs *a,
			   struct hd_coefs *s, struct hd_coefs *o)
{
	hd_coefs_decode(buf, len, HD_LIB, NULL, true, a);
	hd_coefs_decode(buf, len, HD_LIB_SLOW, NULL, true, s);
	hd_coefs_decode(buf, len, HD_OWN, h, true, o);
	assert_true(o->installed);
}

/*
 * The two ways libjpeg-turbo's fast path disagrees with its slow path
 * (hd_fast_path_known), made on purpose near the start of a file without restart
 * markers (where libjpeg takes its fast path): goldminer's decoder gives the slow
 * path's coefficients and warnings in every MCU, and core/jpeg.c the outcome the
 * slow path means.
 */
static void test_huff_fast_path_disagreements(void **state)
{
	struct gm_huff *h = calloc(1, sizeof(*h));
	struct gm_jpeg *own, *lib;
	struct gm_jpeg_image a, b;
	struct hd_coefs fa, fs, fo, orig;
	size_t len, i;
	uint8_t *f = hd_file(0, &len), *m = malloc(len + 8);
	(void)state;
	assert_true(h && m && gm_test_jpeg_dri(f, len) < 0);
	assert_int_equal(gm_jpeg_create(&own, 0), 0);
	assert_int_equal(gm_jpeg_create(&lib, 0), 0);
	gm_jpeg_set_own_huffman(lib, false);
	size_t s0 = hd_scan_data(f, len);

	/* a bad code: 24 one bits where the first DC code starts (no DC code is all ones) */
	memcpy(m, f, s0);
	memcpy(m + s0, "\xFF\x00\xFF\x00\xFF\x00", 6);
	memcpy(m + s0 + 6, f + s0, len - s0);
	hd_coefs_three(m, len + 6, h, &fa, &fs, &fo);
	assert_true(fs.err.n > 0 && fs.err.code[0] == JWRN_HUFF_BAD_CODE && fs.err.at[0] == 0);
	assert_true(fa.err.n == 0 || fa.err.at[0] > 0); /* libjpeg's fast path: silent */
	assert_true(hd_coefs_match(&fs, &fo, false));	/* every MCU and warning after it too */
	assert_true(hd_coefs_match(&fa, &fo, true) == false);
	/* the same 17 bits dropped and the same symbol 0 as both of libjpeg's paths: the
	 * fast path's coefficients are the same in every MCU, only the warning is not */
	assert_int_equal(fa.done, fo.done);
	assert_memory_equal(fa.blocks, fo.blocks,
			    (size_t)fo.done * (size_t)fo.per * sizeof(JBLOCK));
	static const uint32_t full[4] = {0, 0, 0, 0};
	assert_int_equal(hd_decode(own, m, len + 6, 8, full, &a), -EBADMSG);
	assert_non_null(strstr(gm_jpeg_errmsg(own), "bad Huffman code"));
	free(fa.blocks);
	free(fs.blocks);
	free(fo.blocks);

	/* fill bytes before a stuffed zero, a few KB into the data */
	for (i = s0 + 4096; i + 1 < len && !(f[i] == 0xFF && f[i + 1] == 0); i++)
		;
	assert_true(i + 20000 < len);
	memcpy(m, f, i);
	memcpy(m + i, "\xFF\xFF", 2);
	memcpy(m + i + 2, f + i, len - i);
	hd_coefs_three(m, len + 2, h, &fa, &fs, &fo);
	hd_coefs_decode(f, len, HD_LIB_SLOW, NULL, true, &orig);
	assert_int_equal(fs.err.n, 0);
	assert_true(hd_coefs_match(&fs, &fo, false));
	assert_true(hd_coefs_match(&orig, &fo, false)); /* the file without the fill bytes */
	assert_false(hd_coefs_match(&fa, &fs, false));	/* libjpeg's fast path: stale ones */
	assert_int_equal(hd_decode(own, m, len + 2, 8, full, &a), 0);
	assert_int_equal(hd_decode(lib, f, len, 8, full, &b), 0);
	assert_true(hd_same_pixels(&a, &b));
	free(fa.blocks);
	free(fs.blocks);
	free(fo.blocks);
	free(orig.blocks);
	gm_jpeg_destroy(own);
	gm_jpeg_destroy(lib);
	free(m);
	free(f);
	free(h);
}

/*
 * 40 photos of the real-photo set, when it is on this machine
 * (/var/tmp/goldminer-photos, or GM_PHOTOS): pixels full and in a window at
 * every scale, and the coefficients of every MCU, the same both ways.
 */
static void test_huff_photos_same_as_libjpeg(void **state)
{
	const char *dir = getenv("GM_PHOTOS");
	char pat[4200];
	glob_t g;
	(void)state;
	snprintf(pat, sizeof(pat), "%s/*/*.jpg", dir && *dir ? dir : "/var/tmp/goldminer-photos");
	if (glob(pat, 0, NULL, &g) || g.gl_pathc == 0) {
		skip();
		return;
	}
	struct gm_jpeg *own, *lib;
	struct gm_huff *h = calloc(1, sizeof(*h));
	bool installed, diverge;
	assert_non_null(h);
	assert_int_equal(gm_jpeg_create(&own, 0), 0);
	assert_int_equal(gm_jpeg_create(&lib, 0), 0);
	gm_jpeg_set_own_huffman(lib, false);
	size_t step = g.gl_pathc > 40 ? g.gl_pathc / 40 : 1;
	for (size_t i = 0, n = 0; i < g.gl_pathc && n < 40; i += step, n++) {
		FILE *fp = fopen(g.gl_pathv[i], "rb");
		assert_non_null(fp);
		fseek(fp, 0, SEEK_END);
		long sz = ftell(fp);
		assert_true(sz > 0);
		rewind(fp);
		uint8_t *buf = malloc((size_t)sz);
		assert_non_null(buf);
		assert_int_equal(fread(buf, 1, (size_t)sz, fp), (size_t)sz);
		fclose(fp);
		struct gm_jpeg_info info;
		assert_int_equal(gm_jpeg_open(own, buf, (size_t)sz, &info), 0);
		gm_jpeg_abort(own);
		hd_same_both_ways(own, lib, buf, (size_t)sz, !info.progressive, 2, g.gl_pathv[i]);
		if (!info.progressive &&
		    (hd_coefs_same(buf, (size_t)sz, h, false, &installed, &diverge) != HD_SAME ||
		     diverge))
			fail_msg("%s: the coefficients or warnings differ", g.gl_pathv[i]);
		free(buf);
	}
	globfree(&g);
	gm_jpeg_destroy(own);
	gm_jpeg_destroy(lib);
	free(h);
}

#else
static void test_huff_not_built(void **state)
{
	(void)state;
	skip(); /* libjpeg-turbo failed core/probe/huff.c: libjpeg's decoder is used */
}
#define test_huff_same_pixels_as_libjpeg		    test_huff_not_built
#define test_huff_same_coefficients			    test_huff_not_built
#define test_huff_skipped_mcus_leave_the_decoder_as_decoded test_huff_not_built
#define test_huff_slow_path_runs			    test_huff_not_built
#define test_huff_fast_path_disagreements		    test_huff_not_built
#define test_huff_corrupt_same_outcome			    test_huff_not_built
#define test_huff_photos_same_as_libjpeg		    test_huff_not_built
#endif

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_huff_same_pixels_as_libjpeg),
	    cmocka_unit_test(test_huff_same_coefficients),
	    cmocka_unit_test(test_huff_skipped_mcus_leave_the_decoder_as_decoded),
	    cmocka_unit_test(test_huff_slow_path_runs),
	    cmocka_unit_test(test_huff_fast_path_disagreements),
	    cmocka_unit_test(test_huff_corrupt_same_outcome),
	    cmocka_unit_test(test_huff_photos_same_as_libjpeg),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
