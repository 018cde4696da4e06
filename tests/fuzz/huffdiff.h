/*
 * huffdiff.h - goldminer's Huffman decoder (core/huff.c) against libjpeg's, for
 * tests/test_huff.c and the fuzz target fuzz_huff.c. Header-only (static
 * functions), no test framework: every check returns its verdict.
 *
 * Two levels. Coefficients: a file's MCUs decoded three ways side by side (libjpeg's
 * decoder from memory, as core/jpeg.c runs it; libjpeg's from a source that hands
 * it 256 bytes at a time, which keeps it on its slow path, the one that checks
 * everything; goldminer's), every block and every warning (code, MCU) compared
 * (hd_coefs_same). Outcome: the file through core/jpeg.c with goldminer's decoder
 * and with libjpeg's, return code, pixels and warning count (hd_same_outcome).
 * The differences known and allowed are explained at hd_coefs_same and
 * hd_fast_path_known; anything else is reported.
 */
#ifndef GOLDMINER_TESTS_HUFFDIFF_H
#define GOLDMINER_TESTS_HUFFDIFF_H

#include <setjmp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <jerror.h>

#include "../../core/huff.h" /* gm_huff_install: goldminer's decoder in a decompressor */
#include "goldminer/jpeg.h"

#if GM_OWN_HUFFMAN /* else no decoder was built to compare (core/huff.h) */

/*
 * Offset of the first entropy byte (after the first SOS segment), or 0: the
 * segments walked from SOI by their lengths (bytes FF DA inside a table are not an
 * SOS), bytes between segments skipped as libjpeg's marker reader skips them.
 */
static size_t hd_scan_data(const uint8_t *b, size_t n)
{
	size_t p = 2;
	while (p + 3 < n) {
		if (b[p] != 0xFF || b[p + 1] == 0xFF || b[p + 1] == 0) {
			p++;
			continue;
		}
		uint8_t m = b[p + 1];
		size_t seg = (size_t)b[p + 2] << 8 | b[p + 3];
		if (m == 0xDA)
			return p + 2 + seg < n ? p + 2 + seg : 0;
		p += m == 0xD8 || m == 0x01 || (m >= 0xD0 && m <= 0xD7) ? 2 : 2 + seg;
	}
	return 0;
}

/*
 * Decode window win (x, y, w, h; w == 0: the full image) at scale n with j;
 * returns the rc and, on success, the image in *im.
 */
static int hd_decode(struct gm_jpeg *j, const uint8_t *buf, size_t len, uint32_t n,
		     const uint32_t win[4], struct gm_jpeg_image *im)
{
	int rc = gm_jpeg_open(j, buf, len, NULL);
	if (rc)
		return rc;
	if (!win[2])
		return gm_jpeg_decode_full(j, n, im);
	return gm_jpeg_decode_region(j, n, win[0], win[1], win[2], win[3], im);
}

static bool hd_same_pixels(const struct gm_jpeg_image *a, const struct gm_jpeg_image *b)
{
	if (a->width != b->width || a->height != b->height)
		return false;
	for (uint32_t r = 0; r < a->height; r++)
		if (memcmp(a->pixels + r * a->stride, b->pixels + r * b->stride,
			   (size_t)a->width * 3))
			return false;
	return true;
}

#define HD_MAX_WARN 32

/* libjpeg's errors longjmp; warnings are recorded with the MCU that emitted them. */
struct hd_err {
	struct jpeg_error_mgr pub; /* first: libjpeg casts cinfo->err to this */
	jmp_buf jb;
	long mcu;     /* the MCU being decoded (-1: before the first) */
	bool corrupt; /* do not record extraneous data, EOF (see hd_coefs_same) */
	int n;
	int code[HD_MAX_WARN];
	long at[HD_MAX_WARN];
};

static void hd_error_exit(j_common_ptr c)
{
	longjmp(((struct hd_err *)c->err)->jb, 1);
}

static void hd_emit(j_common_ptr c, int level)
{
	struct hd_err *e = (struct hd_err *)c->err;
	if (level >= 0 || (e->corrupt && (c->err->msg_code == JWRN_EXTRANEOUS_DATA ||
					  c->err->msg_code == JWRN_JPEG_EOF)))
		return;
	if (e->n < HD_MAX_WARN) {
		e->code[e->n] = c->err->msg_code;
		e->at[e->n] = e->mcu;
	}
	e->n++;
}

/*
 * A source that hands libjpeg the file 256 bytes at a time, and at its end a fake
 * EOI with a warning, as jpeg_mem_src does. libjpeg-turbo 2.1 decodes an MCU by
 * its fast path only when at least 512 bytes a block are in the buffer (and the
 * file has no restart interval): from this source, libjpeg's decoder runs its
 * slow path only, the one that checks everything.
 */
struct hd_src {
	struct jpeg_source_mgr pub; /* first: libjpeg casts cinfo->src to this */
	const uint8_t *buf;
	size_t len, pos;
};

static void hd_src_init(j_decompress_ptr c)
{
	(void)c;
}

static boolean hd_src_fill(j_decompress_ptr c)
{
	static const JOCTET eoi[2] = {0xFF, JPEG_EOI};
	struct hd_src *s = (struct hd_src *)c->src;
	if (s->pos >= s->len) {
		WARNMS(c, JWRN_JPEG_EOF);
		s->pub.next_input_byte = eoi;
		s->pub.bytes_in_buffer = 2;
		return TRUE;
	}
	size_t n = s->len - s->pos < 256 ? s->len - s->pos : 256;
	s->pub.next_input_byte = s->buf + s->pos;
	s->pub.bytes_in_buffer = n;
	s->pos += n;
	return TRUE;
}

static void hd_src_skip(j_decompress_ptr c, long n)
{
	while (n > (long)c->src->bytes_in_buffer) {
		n -= (long)c->src->bytes_in_buffer;
		hd_src_fill(c);
	}
	c->src->next_input_byte += n;
	c->src->bytes_in_buffer -= (size_t)n;
}

static void hd_src_term(j_decompress_ptr c)
{
	(void)c;
}

enum hd_dec {
	HD_LIB,	     /* libjpeg's decoder, from jpeg_mem_src (as core/jpeg.c) */
	HD_LIB_SLOW, /* libjpeg's decoder, from hd_src: its slow path only */
	HD_OWN,	     /* goldminer's, from jpeg_mem_src */
};

struct hd_coefs {
	JBLOCK *blocks; /* nmcu * per MCU blocks, in decode order */
	long nmcu, done;
	int per;
	unsigned restart; /* the file's restart interval (MCUs) */
	bool failed, installed;
	struct hd_err err;
};

/*
 * Decode every MCU of the single-scan file buf with decoder dec into out. Scale
 * 8/8: at smaller scales libjpeg does not store the AC coefficients it has no use
 * for. h: goldminer's decoder state (HD_OWN). skip: runs of skip MCUs passed over
 * as libjpeg skips them (decode_mcu with no blocks: theirs stay 0), every other
 * run from the first; 0: none.
 */
static void hd_coefs_decode_skip(const uint8_t *buf, size_t len, enum hd_dec dec,
				 struct gm_huff *h, bool corrupt, long skip, struct hd_coefs *out)
{
	struct jpeg_decompress_struct ci;
	struct hd_src src = {{0}, buf, len, 0};
	memset(out, 0, sizeof(*out));
	ci.err = jpeg_std_error(&out->err.pub);
	out->err.pub.error_exit = hd_error_exit;
	out->err.pub.emit_message = hd_emit;
	out->err.mcu = -1;
	out->err.corrupt = corrupt;
	jpeg_create_decompress(&ci);
	if (setjmp(out->err.jb)) {
		out->failed = true;
		goto out_destroy;
	}
	if (dec == HD_LIB_SLOW) {
		src.pub.init_source = hd_src_init;
		src.pub.fill_input_buffer = hd_src_fill;
		src.pub.skip_input_data = hd_src_skip;
		src.pub.resync_to_restart = jpeg_resync_to_restart;
		src.pub.term_source = hd_src_term;
		ci.src = &src.pub;
	} else {
		jpeg_mem_src(&ci, buf, (unsigned long)len);
	}
	jpeg_read_header(&ci, TRUE);
	jpeg_start_decompress(&ci);
	out->restart = ci.restart_interval;
	if (ci.inputctl->has_multiple_scans) { /* all read by now: not comparable */
		out->failed = true;
		goto out_destroy;
	}
	if (dec == HD_OWN)
		out->installed = gm_huff_install(h, &ci);
	out->nmcu = (long)ci.MCUs_per_row * (long)ci.MCU_rows_in_scan;
	out->per = ci.blocks_in_MCU;
	out->blocks = calloc((size_t)out->nmcu * (size_t)out->per, sizeof(JBLOCK));
	if (!out->blocks)
		abort();
	for (long m = 0; m < out->nmcu; m++) {
		JBLOCKROW rows[D_MAX_BLOCKS_IN_MCU];
		for (int b = 0; b < out->per; b++)
			rows[b] = &out->blocks[m * out->per + b];
		out->err.mcu = m;
		if (!ci.entropy->decode_mcu(&ci, skip && m % (2 * skip) < skip ? NULL : rows))
			abort(); /* suspension: neither source suspends */
		out->done = m + 1;
	}
out_destroy:
	if (dec == HD_LIB_SLOW)
		ci.src = NULL; /* not libjpeg's to free (it is not: a permanent pool) */
	jpeg_destroy_decompress(&ci);
}

static void hd_coefs_decode(const uint8_t *buf, size_t len, enum hd_dec dec, struct gm_huff *h,
			    bool corrupt, struct hd_coefs *out)
{
	hd_coefs_decode_skip(buf, len, dec, h, corrupt, 0, out);
}

/* The first warning of e that core/jpeg.c stops at (its index), or e->n. */
static int hd_first_fatal(const struct hd_err *e)
{
	for (int i = 0; i < e->n && i < HD_MAX_WARN; i++)
		if (e->code[i] == JWRN_JPEG_EOF || e->code[i] == JWRN_HIT_MARKER ||
		    e->code[i] == JWRN_HUFF_BAD_CODE || e->code[i] == JWRN_MUST_RESYNC)
			return i;
	return e->n;
}

/*
 * a and b decoded the same MCUs into the same coefficients with the same warnings
 * (codes, MCUs). corrupt: only up to the first warning core/jpeg.c stops at (the
 * same code at the same MCU, the MCUs before it the same): nothing after it
 * reaches a caller.
 */
static bool hd_coefs_match(const struct hd_coefs *a, const struct hd_coefs *b, bool corrupt)
{
	long upto = a->done;
	int nw = a->err.n;
	if (a->failed != b->failed || a->done != b->done)
		return false;
	if (corrupt) {
		int fa = hd_first_fatal(&a->err), fb = hd_first_fatal(&b->err);
		if ((fa < a->err.n) != (fb < b->err.n) || fa != fb)
			return false;
		if (fa < a->err.n && fa < HD_MAX_WARN) {
			if (a->err.code[fa] != b->err.code[fb] || a->err.at[fa] != b->err.at[fb])
				return false;
			upto = a->err.at[fa] < 0 ? 0 : a->err.at[fa];
		}
		nw = fa;
	} else if (a->err.n != b->err.n) {
		return false;
	}
	for (int i = 0; i < nw && i < HD_MAX_WARN; i++)
		if (a->err.code[i] != b->err.code[i] || a->err.at[i] != b->err.at[i])
			return false;
	return !upto ||
	       !memcmp(a->blocks, b->blocks, (size_t)upto * (size_t)a->per * sizeof(JBLOCK));
}

static void hd_coefs_print(const char *who, const struct hd_coefs *x)
{
	fprintf(stderr, "%s: failed %d done %ld warnings", who, x->failed, x->done);
	for (int i = 0; i < x->err.n && i < HD_MAX_WARN; i++)
		fprintf(stderr, " %d@%ld", x->err.code[i], x->err.at[i]);
	fprintf(stderr, "\n");
}

/*
 * libjpeg-turbo 2.1's fast path (files without restart markers, at least 512
 * bytes a block before the end of the data) disagrees with its slow path in two
 * ways known here (test_huff_fast_path_disagreements makes each on purpose):
 *   - a bad Huffman code: the fast path takes it as symbol 0 after 17 bits, as
 *     the slow path does, but without a warning; so the slow path's first fatal
 *     warning is a bad code that the fast path's decode does not have;
 *   - fill bytes before a stuffed zero (FF FF .. FF 00), a data byte 0xFF to the
 *     slow path: the fast path takes FF FF for a marker and hands the MCU to the
 *     slow path, which decodes it again into the same blocks without clearing
 *     what the fast path wrote there: that MCU keeps stale coefficients where the
 *     slow path's decode has zeros (and no warning says so). The same happens at
 *     a real marker, but then the slow path warns (a fatal warning at that MCU,
 *     which the comparison leaves out).
 * True when a (memory) and s (slow path) differ in one of these ways.
 */
static bool hd_fast_path_known(const uint8_t *buf, size_t len, const struct hd_coefs *a,
			       const struct hd_coefs *s)
{
	int fs = hd_first_fatal(&s->err);
	if (a->restart)
		return false;
	if (fs < s->err.n && fs < HD_MAX_WARN && s->err.code[fs] == JWRN_HUFF_BAD_CODE) {
		bool lib_too = false;
		for (int i = 0; i < a->err.n && i < HD_MAX_WARN; i++)
			lib_too |=
			    a->err.code[i] == JWRN_HUFF_BAD_CODE && a->err.at[i] == s->err.at[fs];
		if (!lib_too)
			return true;
	}
	for (size_t i = hd_scan_data(buf, len); i + 2 < len; i++)
		if (buf[i] == 0xFF && buf[i + 1] == 0xFF) {
			while (i + 2 < len && buf[i + 1] == 0xFF)
				i++;
			if (buf[i + 1] == 0)
				return true;
		}
	return false;
}

enum {
	HD_SAME = 0,	    /* the same (but for what hd_coefs_same allows) */
	HD_DIFFER,	    /* goldminer's decoder differs from libjpeg's slow path */
	HD_LIBJPEG_UNKNOWN, /* libjpeg's two paths disagree, in no way known here */
};

/*
 * buf's MCUs by goldminer's decoder and by libjpeg's slow path: the same
 * coefficients and warnings (hd_coefs_match). corrupt: a corrupted file, where
 * two warnings are not compared, as they depend on how far ahead of the bits it
 * uses each reader has read, not on the data:
 *   - extraneous data (not recorded): libjpeg's marker reader reports the bytes
 *     skipped before a restart marker at the next marker its bit reader has not
 *     already met (so a count can come late, merged with the next segment's),
 *     goldminer's at the marker that ends the segment; the same bytes in all, a
 *     warning core/jpeg.c only counts;
 *   - premature end of file (not recorded): each reader warns when it reaches the
 *     end of the buffer, and reads ahead on its own schedule (libjpeg refills to
 *     57 bits when a read needs more than it holds, goldminer's to 56 when it holds
 *     under 32), so a file whose data is all there but whose EOI is missing may
 *     have either warn, or both, at different MCUs; when the data is really short,
 *     the "premature end of data segment" that follows is compared.
 * Sets *diverge when libjpeg's decode from jpeg_mem_src (its fast path where it
 * can) does not match its slow path's; *installed when goldminer's decoder took
 * the file. Returns HD_SAME, or HD_DIFFER / HD_LIBJPEG_UNKNOWN with the three
 * decodes' warnings printed to stderr.
 */
static int hd_coefs_same(const uint8_t *buf, size_t len, struct gm_huff *h, bool corrupt,
			 bool *installed, bool *diverge)
{
	struct hd_coefs a, s, o;
	hd_coefs_decode(buf, len, HD_LIB, NULL, corrupt, &a);
	hd_coefs_decode(buf, len, HD_LIB_SLOW, NULL, corrupt, &s);
	hd_coefs_decode(buf, len, HD_OWN, h, corrupt, &o);
	*installed = o.installed;
	*diverge = o.installed && !hd_coefs_match(&a, &s, corrupt);
	int ret = HD_SAME;
	/* without goldminer's decoder (not baseline, SOS parameters libjpeg only warns
	 * of, ...) both handles of core/jpeg.c run libjpeg's: nothing to compare */
	if (o.installed && !hd_coefs_match(&s, &o, corrupt))
		ret = HD_DIFFER;
	else if (*diverge && !hd_fast_path_known(buf, len, &a, &s))
		ret = HD_LIBJPEG_UNKNOWN;
	if (ret != HD_SAME) {
		hd_coefs_print("libjpeg (memory)", &a);
		hd_coefs_print("libjpeg (slow path)", &s);
		hd_coefs_print("goldminer", &o);
	}
	free(a.blocks);
	free(s.blocks);
	free(o.blocks);
	return ret;
}

/*
 * One corrupt file decoded by both handles, full at scale 8/8 and a window at
 * scale 2/8: the same return code, and where both succeed the same pixels and
 * warning count (but for extraneous-data warnings: hd_coefs_same). diverge: libjpeg's
 * two paths disagree on this file (hd_coefs_same), and then goldminer's decoder,
 * which gives libjpeg's slow path's coefficients and warnings, may have another
 * outcome than libjpeg's from memory: counted in *explained, as a reader that
 * warned of the end of the file only by reading further ahead (hd_coefs_same).
 * Returns the number of decodes that succeeded, or -1 with the difference in why.
 */
static int hd_same_outcome(struct gm_jpeg *own, struct gm_jpeg *lib, const uint8_t *buf, size_t len,
			   bool diverge, int *explained, char *why, size_t whylen)
{
	struct gm_jpeg_info info;
	struct gm_jpeg_image a, b;
	int ok = 0;
	if (gm_jpeg_open(own, buf, len, &info))
		return 0; /* the header is libjpeg's either way */
	gm_jpeg_abort(own);
	uint32_t sw = gm_jpeg_scaled_dim(info.width, 2), sh = gm_jpeg_scaled_dim(info.height, 2);
	const uint32_t win[2][4] = {{0, 0, 0, 0}, {sw / 3, sh / 3, (sw + 2) / 3, (sh + 2) / 3}};
	for (int k = 0; k < 2; k++) {
		uint32_t n = k ? 2 : 8;
		int ra = hd_decode(own, buf, len, n, win[k], &a);
		int rb = hd_decode(lib, buf, len, n, win[k], &b);
		uint32_t wa = gm_jpeg_warnings(own), wb = gm_jpeg_warnings(lib);
		bool same = ra == rb;
		if (same && ra == 0)
			same = hd_same_pixels(&a, &b) &&
			       (wa == wb || strstr(gm_jpeg_warnmsg(own), "extraneous") ||
				strstr(gm_jpeg_warnmsg(lib), "extraneous"));
		ok += ra == 0;
		if (!same && ra != rb &&
		    strstr(gm_jpeg_errmsg(ra ? own : lib), "Premature end of JPEG file")) {
			++*explained; /* read ahead to the end (hd_coefs_same) */
			continue;
		}
		if (same)
			continue;
		if (diverge) {
			++*explained;
			continue;
		}
		snprintf(why, whylen, "scale %u: rc %d (%s), %u warnings; libjpeg's: %d (%s), %u",
			 n, ra, gm_jpeg_errmsg(own), wa, rb, gm_jpeg_errmsg(lib), wb);
		return -1;
	}
	return ok;
}

#endif /* GM_OWN_HUFFMAN */
#endif
