/*
 * jpeg.c - per-worker JPEG decoder over libjpeg-turbo's libjpeg API (see jpeg.h).
 *
 * Design: one jpeg_decompress_struct per handle, created once and reset with
 * jpeg_abort_decompress() between images, so libjpeg's permanent state (source
 * manager, error manager) is reused. Errors longjmp back to the public function
 * that called into libjpeg; the handler formats libjpeg's message into the handle.
 * Warnings that mean pixel data is missing (premature end of file/segment, bad
 * entropy code) are promoted to errors: libjpeg would otherwise pad the image
 * with grey and report success. Other warnings (e.g. extraneous bytes before a
 * marker, common in real photo collections) are counted and kept.
 *
 * The crop-window path is the reason this uses the libjpeg API rather than
 * TurboJPEG (2.1): DCT scaling + jpeg_crop_scanline + jpeg_skip_scanlines, and
 * jpeg_abort_decompress() right after the last needed row. A file with restart
 * markers is first cut down to the restart segments the window needs (the splice,
 * below), so not even the entropy data around the window is decoded.
 *
 * CMYK/YCCK is hand-converted (libjpeg has no CMYK->RGB conversion). Files with an
 * Adobe APP14 marker store inverted CMYK (Photoshop convention); others plain.
 *
 * Not done here: 12-bit or lossless JPEG (rejected by libjpeg as corrupt), colour
 * management (ICC profiles are ignored), EXIF orientation (pixels as stored).
 */
#include "goldminer/jpeg.h"
#include "goldminer/coef.h"
#include "goldminer/util.h"
#include "huff.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef __SSE2__
#include <emmintrin.h> /* coef_pack_narrow */
#endif

#include <jpeglib.h> /* first: jerror.h depends on the jconfig.h it includes */
#include <jerror.h>

struct gm_jpeg_errmgr {
	struct jpeg_error_mgr pub; /* first: libjpeg casts cinfo->err to this */
	jmp_buf jb;
	struct gm_jpeg *owner;
};

struct gm_jpeg {
	struct jpeg_decompress_struct cinfo;
	struct gm_jpeg_errmgr err;
	uint64_t max_pixels;
	bool open;	   /* a header has been read and not yet decoded/aborted */
	bool cmyk;	   /* source is CMYK/YCCK: decode as CMYK, convert by hand */
	int errnum;	   /* -errno of the failure being unwound */
	const char *where; /* public function running, for messages */
	uint8_t *buf;	   /* window pixels (RGB), grown on demand */
	size_t buf_cap;
	uint8_t *row4; /* one CMYK row, grown on demand */
	size_t row4_cap;
	JSAMPROW *rows; /* row pointers into buf */
	size_t rows_cap;
	const uint8_t *data; /* the open file (the caller's bytes), for the splice */
	size_t len;
	uint8_t *splice; /* the spliced file of the last decode (splice.c's idea, below) */
	size_t splice_cap;
	uint32_t *seg; /* per restart segment: start and end offsets in data */
	size_t seg_cap;
	/* ranged mode (gm_jpeg_open_ranged): the row index of the member's prefix,
	 * and the entropy bytes [ent_off, ent_off + ent_len) of the file */
	bool ranged;
	const uint8_t *ix_hdr; /* SOI + tables + SOS, from the index */
	size_t ix_hlen;
	const uint8_t *ix_rows; /* nrows + 1 big-endian u32 file offsets */
	uint32_t ix_nrows;
	uint64_t file_len;
	const uint8_t *ent;
	uint64_t ent_off;
	size_t ent_len;
	bool spliced;	      /* the last decode read a spliced file */
	bool no_splice;	      /* GM_NO_SPLICE=1 at creation: never splice (benchmarks compare) */
	bool libjpeg_huff;    /* decode entropy data with libjpeg's decoder, not core/huff.c's */
	bool own_huff;	      /* the last decode used core/huff.c's */
	struct gm_huff *huff; /* its own allocation: 104 KB, mostly its table cache; NULL
			       * when the build left huff.c out (GM_OWN_HUFFMAN 0, huff.h) */
	int16_t *cval[3];     /* coefficient output: each component's values, then */
	uint8_t *cpos[3];     /* positions, grown on demand (gm_jpeg_decode_coefs) */
	size_t cval_cap[3], cpos_cap[3];
	uint32_t nwarn;
	char errmsg[256];
	char warnmsg[JMSG_LENGTH_MAX];
};

static void set_err(struct gm_jpeg *j, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void set_err(struct gm_jpeg *j, int errnum, const char *fmt, ...)
{
	char why[sizeof(j->errmsg)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	gm_errf(j->errmsg, sizeof(j->errmsg), "%s: %s", j->where, why);
	j->errnum = errnum;
}

/* libjpeg fatal error: record and unwind to the setjmp in the public function. */
static void on_error_exit(j_common_ptr cinfo)
{
	struct gm_jpeg_errmgr *e = (struct gm_jpeg_errmgr *)cinfo->err;
	char msg[JMSG_LENGTH_MAX];

	(*cinfo->err->format_message)(cinfo, msg);
	if (cinfo->err->msg_code == JERR_OUT_OF_MEMORY)
		set_err(e->owner, -ENOMEM, "out of memory: %s", msg);
	else
		set_err(e->owner, -EBADMSG, "corrupt or not a JPEG: %s", msg);
	longjmp(e->jb, 1);
}

/* Warnings that mean pixels were lost: data ended early or entropy data is bad. */
static bool warning_is_fatal(int code)
{
	return code == JWRN_JPEG_EOF || code == JWRN_HIT_MARKER || code == JWRN_HUFF_BAD_CODE ||
	       code == JWRN_ARITH_BAD_CODE || code == JWRN_MUST_RESYNC;
}

static void on_emit_message(j_common_ptr cinfo, int msg_level)
{
	struct gm_jpeg_errmgr *e = (struct gm_jpeg_errmgr *)cinfo->err;
	char msg[JMSG_LENGTH_MAX];

	if (msg_level >= 0)
		return; /* trace messages */
	(*cinfo->err->format_message)(cinfo, msg);
	if (warning_is_fatal(cinfo->err->msg_code)) {
		set_err(e->owner, -EBADMSG, "truncated or corrupt JPEG data: %s", msg);
		longjmp(e->jb, 1);
	}
	e->owner->nwarn++;
	memcpy(e->owner->warnmsg, msg, sizeof(msg));
}

/* Silence libjpeg's default stderr output (messages are kept in the handle). */
static void on_output_message(j_common_ptr cinfo)
{
	(void)cinfo;
}

int gm_jpeg_create(struct gm_jpeg **out, uint64_t max_pixels)
{
	struct gm_jpeg *j;
	if (max_pixels > GM_JPEG_MAX_MAX_PIXELS)
		return -EINVAL; /* never a silent "no limit" from a negative number */
	if (!(j = calloc(1, sizeof(*j))))
		return -ENOMEM;
#if GM_OWN_HUFFMAN
	if (!(j->huff = calloc(1, sizeof(*j->huff)))) {
		free(j);
		return -ENOMEM;
	}
	gm_huff_init(j->huff);
#endif
	j->max_pixels = max_pixels ? max_pixels : GM_JPEG_DEFAULT_MAX_PIXELS;
	const char *ns = getenv("GM_NO_SPLICE");
	j->no_splice = ns && ns[0] == '1';
	const char *lh = getenv("GM_LIBJPEG_HUFFMAN");
	j->libjpeg_huff = lh && lh[0] == '1';
	j->where = "gm_jpeg_create";
	j->cinfo.err = jpeg_std_error(&j->err.pub);
	j->err.pub.error_exit = on_error_exit;
	j->err.pub.emit_message = on_emit_message;
	j->err.pub.output_message = on_output_message;
	j->err.owner = j;
	if (setjmp(j->err.jb)) {
		/* Only an allocation failure inside libjpeg gets here. */
		free(j->huff);
		free(j);
		return -ENOMEM;
	}
	jpeg_create_decompress(&j->cinfo);
	*out = j;
	return 0;
}

void gm_jpeg_destroy(struct gm_jpeg *j)
{
	if (!j)
		return;
	jpeg_destroy_decompress(&j->cinfo);
	free(j->huff);
	for (int c = 0; c < 3; c++) {
		free(j->cval[c]);
		free(j->cpos[c]);
	}
	free(j->splice);
	free(j->seg);
	free(j->rows);
	free(j->row4);
	free(j->buf);
	free(j);
}

const char *gm_jpeg_errmsg(const struct gm_jpeg *j)
{
	return j->errmsg;
}

uint32_t gm_jpeg_warnings(const struct gm_jpeg *j)
{
	return j->nwarn;
}

const char *gm_jpeg_warnmsg(const struct gm_jpeg *j)
{
	return j->warnmsg;
}

void gm_jpeg_set_own_huffman(struct gm_jpeg *j, bool on)
{
	if (j)
		j->libjpeg_huff = !on;
}

bool gm_jpeg_own_huffman(const struct gm_jpeg *j)
{
	return j && j->own_huff;
}

void gm_jpeg_abort(struct gm_jpeg *j)
{
	if (j->open)
		jpeg_abort_decompress(&j->cinfo);
	j->open = false;
}

/* Forget the last image and its messages; j->where = fn. */
static void open_reset(struct gm_jpeg *j, const char *fn)
{
	gm_jpeg_abort(j);
	j->where = fn;
	j->errmsg[0] = '\0';
	j->warnmsg[0] = '\0';
	j->nwarn = 0;
	j->own_huff = false;
	j->ranged = false;
	j->ent = NULL;
}

/*
 * Read the header of data[0..len) into a fresh decompressor, check the pixel
 * limit, fill info. Under the caller's setjmp. 0, or -errno with the message set
 * (then the caller aborts).
 */
static int open_header(struct gm_jpeg *j, const void *data, size_t len, struct gm_jpeg_info *info)
{
	struct jpeg_decompress_struct *ci = &j->cinfo;
	/*
	 * A fresh decompressor for every file: libjpeg keeps the last file's
	 * quantisation and Huffman tables in the object, and a file that lacks some
	 * would decode with them, its pixels depending on what the handle decoded
	 * before (and on whether that was spliced). About a microsecond.
	 */
	jpeg_destroy_decompress(ci);
	jpeg_create_decompress(ci);
	j->open = true;
	jpeg_mem_src(ci, (const unsigned char *)data, (unsigned long)len);
	if (jpeg_read_header(ci, TRUE) != JPEG_HEADER_OK) {
		set_err(j, -EBADMSG, "corrupt JPEG: tables only, no image");
		return -EBADMSG;
	}
	if ((uint64_t)ci->image_width * ci->image_height > j->max_pixels) {
		set_err(j, -E2BIG, "image %ux%u is over the pixel limit %llu", ci->image_width,
			ci->image_height, (unsigned long long)j->max_pixels);
		return -E2BIG;
	}
	j->cmyk = ci->jpeg_color_space == JCS_CMYK || ci->jpeg_color_space == JCS_YCCK;
	if (info) {
		info->width = ci->image_width;
		info->height = ci->image_height;
		info->components = (uint32_t)ci->num_components;
		info->progressive = ci->progressive_mode;
		info->cmyk = j->cmyk;
	}
	return 0;
}

int gm_jpeg_open(struct gm_jpeg *j, const void *data, size_t len, struct gm_jpeg_info *info)
{
	open_reset(j, "gm_jpeg_open");
	if (len == 0) {
		set_err(j, -ENODATA, "empty file (0 bytes)");
		return -ENODATA;
	}
	if (!data) {
		set_err(j, -EINVAL, "no data");
		return -EINVAL;
	}
	if (setjmp(j->err.jb))
		goto out_abort;
	j->data = data;
	j->len = len;
	if (open_header(j, data, len, info))
		goto out_abort;
	return 0;

out_abort:
	gm_jpeg_abort(j);
	return j->errnum;
}

uint32_t gm_jpeg_pick_scale(double crop_w, double crop_h, uint32_t min_w, uint32_t min_h)
{
	/* Power-of-two scales only: see jpeg.h for the measurement behind this. */
	for (uint32_t n = 1; n < 8; n *= 2)
		if (crop_w * n >= 8.0 * min_w && crop_h * n >= 8.0 * min_h)
			return n;
	return 8;
}

uint32_t gm_jpeg_scaled_dim(uint32_t dim, uint32_t scale_num)
{
	return (uint32_t)(((uint64_t)dim * scale_num + 7) / 8);
}

/* Convert n CMYK pixels to RGB (inverted: Adobe/Photoshop convention). */
static void cmyk_to_rgb(uint8_t *restrict rgb, const uint8_t *restrict cmyk, uint32_t n,
			bool inverted)
{
	for (uint32_t i = 0; i < n; i++) {
		uint32_t c = cmyk[4 * i], m = cmyk[4 * i + 1], y = cmyk[4 * i + 2],
			 k = cmyk[4 * i + 3];
		if (!inverted) {
			c = 255 - c;
			m = 255 - m;
			y = 255 - y;
			k = 255 - k;
		}
		/* x*k/255 rounded, exact for 8-bit inputs */
		uint32_t r = c * k + 128, g = m * k + 128, b = y * k + 128;
		rgb[3 * i] = (uint8_t)((r + (r >> 8)) >> 8);
		rgb[3 * i + 1] = (uint8_t)((g + (g >> 8)) >> 8);
		rgb[3 * i + 2] = (uint8_t)((b + (b >> 8)) >> 8);
	}
}

/*
 * Start decompressing at scale_num/8 (sw x sh) and crop the scanlines to the
 * columns around x..x+w (*xoff, *cw). Runs under the caller's setjmp: a libjpeg
 * error longjmps there. 0 or -EBADMSG with the message set.
 */
static int start_window(struct gm_jpeg *j, uint32_t scale_num, uint32_t x, uint32_t w, uint32_t sw,
			uint32_t sh, JDIMENSION *xoff, JDIMENSION *cw)
{
	struct jpeg_decompress_struct *ci = &j->cinfo;
	uint32_t x0, x1;

	ci->scale_num = scale_num;
	ci->scale_denom = 8;
	ci->out_color_space = j->cmyk ? JCS_CMYK : JCS_RGB;
	jpeg_start_decompress(ci);
#if GM_OWN_HUFFMAN
	j->own_huff = !j->libjpeg_huff && gm_huff_install(j->huff, ci);
#endif
	if (ci->output_width != sw || ci->output_height != sh) {
		set_err(j, -EBADMSG, "unexpected scaled size %ux%u (wanted %ux%u)",
			ci->output_width, ci->output_height, sw, sh);
		return -EBADMSG;
	}
	/*
	 * Ask for 2 extra columns each side when the image has them: fancy chroma
	 * upsampling treats the edges of a cropped row like image edges, so the
	 * outermost pixels can differ from a full decode; the margin keeps that
	 * difference outside the window we return.
	 */
	x0 = x >= 2 ? x - 2 : 0;
	x1 = x + w + 2 <= sw ? x + w + 2 : sw;
	*xoff = x0;
	*cw = x1 - x0;
	if (*cw < sw)
		jpeg_crop_scanline(ci, xoff, cw);
	else
		*xoff = 0, *cw = sw;
	if (ci->output_width != *cw || *xoff > x || *xoff + *cw < x + w) {
		set_err(j, -EBADMSG, "crop_scanline gave %u+%u for window %u+%u", *cw, *xoff, w, x);
		return -EBADMSG;
	}
	return 0;
}

/*
 * Read rows y..y+h of the cropped scanlines (cw pixels) into j->buf as RGB,
 * stride bytes apart (CMYK converted row by row). Under the caller's setjmp, like
 * start_window. 0, or -ENOMEM / -EBADMSG with the message set.
 */
static int read_window(struct gm_jpeg *j, uint32_t y, uint32_t h, JDIMENSION cw, size_t stride)
{
	struct jpeg_decompress_struct *ci = &j->cinfo;

	if (gm_grow_scratch((void **)&j->buf, &j->buf_cap, stride * h, 4096) ||
	    gm_grow_scratch((void **)&j->rows, &j->rows_cap, sizeof(JSAMPROW) * h, 4096) ||
	    (j->cmyk && gm_grow_scratch((void **)&j->row4, &j->row4_cap, (size_t)cw * 4, 4096))) {
		set_err(j, -ENOMEM, "out of memory for a %ux%u window", cw, h);
		return -ENOMEM;
	}
	if (y > 0 && jpeg_skip_scanlines(ci, y) != y) {
		set_err(j, -EBADMSG, "could not skip %u rows", y);
		return -EBADMSG;
	}
	if (!j->cmyk) {
		for (uint32_t r = 0; r < h; r++)
			j->rows[r] = j->buf + r * stride;
		while (ci->output_scanline < y + h) {
			uint32_t r = ci->output_scanline - y;
			if (jpeg_read_scanlines(ci, j->rows + r, h - r) == 0) {
				set_err(j, -EBADMSG, "no progress reading row %u", r + y);
				return -EBADMSG;
			}
		}
		return 0;
	}
	bool inverted = ci->saw_Adobe_marker;
	JSAMPROW row = j->row4;
	for (uint32_t r = 0; r < h; r++) {
		if (jpeg_read_scanlines(ci, &row, 1) != 1) {
			set_err(j, -EBADMSG, "no progress reading row %u", r + y);
			return -EBADMSG;
		}
		cmyk_to_rgb(j->buf + r * stride, j->row4, cw, inverted);
	}
	return 0;
}

/* ---- decoding only the crop's restart segments ------------------------------------
 *
 * A file with restart markers (gm_jpeg_restart_transcode) is a run of segments of
 * R MCUs each, in raster order, each byte-aligned and starting with fresh DC
 * predictions: any run of them is valid entropy data on its own. For a window,
 * splice_window takes the rectangle of MCUs that covers it, plus the neighbour
 * MCU on a side where the window's edge pixel lies at the edge of its MCU (so that
 * chroma upsampling sees the neighbours a full decode sees, and the window's
 * pixels come out the same: splice_axis), widened to whole segments, and writes
 * a JPEG of just those MCUs into j->splice: the original header with the SOF's
 * size changed, the segments' bytes, RST markers renumbered, EOI. When R divides
 * the MCUs of a row the rectangle is cut on both axes, otherwise it keeps whole
 * rows (segments would straddle them). The decode then runs on that file as on
 * any other, and never Huffman-decodes the rows above the window nor the columns
 * beside it, which a crop of the original file must (entropy data is sequential).
 * Anything unexpected in the markers (a progressive, arithmetic or multi-scan
 * file, a missing or misnumbered RST, a DNL height) leaves the file to the
 * ordinary path, which reports what is wrong with it.
 */

/*
 * An MCU's size in image pixels: 8 x 8 in a one-component file (a scan of one
 * component has one block an MCU, whatever its sampling factors say), else the
 * largest sampling factors times 8.
 */
static void mcu_size(const struct jpeg_decompress_struct *ci, uint32_t *mw, uint32_t *mh)
{
	bool one = ci->num_components == 1;
	*mw = one ? 8 : 8 * (uint32_t)ci->max_h_samp_factor;
	*mh = one ? 8 : 8 * (uint32_t)ci->max_v_samp_factor;
}

struct mcu_rect {
	uint32_t c0, c1, r0, r1; /* MCU columns [c0, c1), rows [r0, r1) */
};

/* Offset of the first entropy byte of the (first) scan and of the SOF marker, or 0. */
static size_t scan_start(const uint8_t *d, size_t len, size_t *sof)
{
	size_t p = 2;
	*sof = 0;
	while (p + 4 <= len) {
		if (d[p] != 0xFF)
			return 0;
		uint8_t m = d[p + 1];
		if (m == 0xFF) { /* fill byte */
			p++;
			continue;
		}
		if (m == 0x01 || (m >= 0xD0 && m <= 0xD9))
			return 0; /* no marker without a length belongs in a header */
		size_t seg = (size_t)d[p + 2] << 8 | d[p + 3];
		if (seg < 2 || p + 2 + seg > len)
			return 0;
		if (m == 0xC0 || m == 0xC1) {
			if (seg < 8 || *sof)
				return 0;
			*sof = p;
		}
		if (m == 0xDA)
			return *sof ? p + 2 + seg : 0;
		p += 2 + seg;
	}
	return 0;
}

/*
 * The restart segments k0..k1-1 (of nseg) of the entropy data, segment k0 starting
 * at `start`: seg[2k], seg[2k+1] = the offsets of segment k's first byte and of the
 * marker that ends it (RSTn in order, EOI after the last of the image). false on
 * anything else (another scan, a marker out of order, too many or too few
 * segments, no EOI, the end of d before segment k1 - 1 ends).
 */
static bool find_segments(const uint8_t *d, size_t len, size_t start, uint32_t k0, uint32_t k1,
			  uint32_t nseg, uint32_t *seg)
{
	uint32_t k = k0;
	size_t p = start;
	seg[2 * k] = (uint32_t)start;
	for (;;) {
		const uint8_t *f = p < len ? memchr(d + p, 0xFF, len - p) : NULL;
		if (!f || (size_t)(f - d) + 1 >= len)
			return false;
		p = (size_t)(f - d);
		uint8_t m = d[p + 1];
		if (m == 0x00 || m == 0xFF) { /* a stuffed 0xFF, a fill byte */
			p += 1 + (m == 0x00);
			continue;
		}
		seg[2 * k + 1] = (uint32_t)p;
		if (m == 0xD9)
			return k + 1 == nseg && k + 1 == k1;
		if (m != 0xD0 + k % 8 || ++k >= nseg)
			return false;
		if (k == k1)
			return true;
		p += 2;
		seg[2 * k] = (uint32_t)p;
	}
}

/*
 * The MCUs [*a, *b) of one axis (MCU size m, mn MCUs) covering the pixels [p0, p1),
 * with the MCU before (after) when p0 (p1 - 1) lies within m / 8 pixels of the
 * edge of its MCU. Only there can a pixel depend on the neighbour MCU: fancy
 * chroma upsampling (h2v1, h2v2, libjpeg-turbo's only kinds with neighbours, and
 * only at full scale: at n/8 < 1 it decodes subsampled chroma at 2n/8 instead)
 * weighs in the chroma sample beyond the edge for the edge pixel alone, which the
 * spliced file's edge replaces by its own; m / 8 is twice that (the sweep of every
 * edge offset in test_jpeg passes with 1 pixel and fails with none). A margin
 * MCU all round decoded 9-17% more MCUs.
 */
static void splice_axis(uint64_t p0, uint64_t p1, uint32_t m, uint32_t mn, uint32_t *a, uint32_t *b)
{
	uint64_t last = p1 - 1, edge = m / 8 ? m / 8 : 1;
	*a = (uint32_t)(p0 / m);
	*a -= *a > 0 && p0 % m < edge;
	*b = (uint32_t)(last / m) + 1;
	*b += last % m >= m - edge;
	*b = *b < mn ? *b : mn;
}

/*
 * The MCU rectangle to splice for the full-image pixel box [x0, x1) x [y0, y1):
 * the MCUs it touches and their neighbours where a pixel can depend on them
 * (splice_axis), whole segments of r MCUs (mx x my MCUs in the image). false when
 * that is the whole image (nothing to gain).
 */
static bool splice_rect(struct mcu_rect *q, uint64_t x0, uint64_t x1, uint64_t y0, uint64_t y1,
			uint32_t mw, uint32_t mh, uint32_t mx, uint32_t my, uint32_t r)
{
	splice_axis(x0, x1, mw, mx, &q->c0, &q->c1);
	splice_axis(y0, y1, mh, my, &q->r0, &q->r1);
	if (mx % r == 0) {
		q->c0 = q->c0 / r * r;
		q->c1 = (q->c1 + r - 1) / r * r;
	} else { /* segments straddle rows: whole rows, from and to a segment's start */
		q->c0 = 0, q->c1 = mx;
		while ((uint64_t)q->r0 * mx % r)
			q->r0--;
		while (q->r1 < my && (uint64_t)q->r1 * mx % r)
			q->r1++;
	}
	return q->c0 > 0 || q->c1 < mx || q->r0 > 0 || q->r1 < my;
}

/*
 * Segments [*k0, *k1) of run i of q: row r0 + i when rows are cut (r divides mx),
 * else the one run of whole rows.
 */
static void splice_run(const struct mcu_rect *q, uint32_t i, uint32_t mx, uint32_t r, uint64_t *k0,
		       uint64_t *k1)
{
	bool cut = mx % r == 0;
	uint64_t a = cut ? (uint64_t)(q->r0 + i) * mx + q->c0 : (uint64_t)q->r0 * mx;
	uint64_t b = cut ? (uint64_t)(q->r0 + i) * mx + q->c1 : (uint64_t)q->r1 * mx;
	*k0 = a / r;
	*k1 = (b + r - 1) / r;
}

/* Where the spliced file's parts come from: the header hdr[0..start) (SOF at sof)
 * and the segments, at j->seg's offsets into src. */
struct splice_src {
	const uint8_t *hdr, *src;
	size_t sof, start;
};

/* Write into j->splice the file of the MCUs of q. */
static int splice_write(struct gm_jpeg *j, const struct mcu_rect *q, const struct splice_src *f,
			uint32_t mx, uint32_t r, uint32_t mw, uint32_t mh, size_t *out_len)
{
	size_t sof = f->sof, start = f->start;
	struct jpeg_decompress_struct *ci = &j->cinfo;
	uint32_t w = (q->c1 == mx ? ci->image_width : q->c1 * mw) - q->c0 * mw;
	uint32_t h = (q->r1 * mh < ci->image_height ? q->r1 * mh : ci->image_height) - q->r0 * mh;
	uint32_t runs = mx % r ? 1 : q->r1 - q->r0, rst = 0;
	uint64_t k0, k1;
	size_t cap = start + 2, n = start;

	for (uint32_t i = 0; i < runs; i++) { /* the bytes first, to size the buffer */
		splice_run(q, i, mx, r, &k0, &k1);
		cap += j->seg[2 * k1 - 1] - j->seg[2 * k0] + 2 * (k1 - k0);
	}
	if (gm_grow_scratch((void **)&j->splice, &j->splice_cap, cap, 1 << 16))
		return -ENOMEM;
	uint8_t *o = j->splice;
	memcpy(o, f->hdr, start);
	o[sof + 5] = (uint8_t)(h >> 8), o[sof + 6] = (uint8_t)h;
	o[sof + 7] = (uint8_t)(w >> 8), o[sof + 8] = (uint8_t)w;
	for (uint32_t i = 0; i < runs; i++) {
		splice_run(q, i, mx, r, &k0, &k1);
		for (uint64_t k = k0; k < k1; k++) {
			if (n > start) {
				o[n++] = 0xFF;
				o[n++] = (uint8_t)(0xD0 + rst++ % 8);
			}
			uint32_t a = j->seg[2 * k], b = j->seg[2 * k + 1];
			memcpy(o + n, f->src + a, b - a);
			n += b - a;
		}
	}
	o[n++] = 0xFF;
	o[n++] = 0xD9;
	*out_len = n;
	return 0;
}

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Row y's first entropy byte in the file (the EOI marker's offset for y = nrows). */
static uint64_t ix_row(const struct gm_jpeg *j, uint32_t y)
{
	return be32(j->ix_rows + 4 * (size_t)y);
}

/* The MCU grid of the open image: MCU size, MCUs across and down, segments. */
struct mcu_grid {
	uint32_t mw, mh, mx, my, r;
	uint64_t nseg;
};

static void mcu_grid(const struct jpeg_decompress_struct *ci, struct mcu_grid *g)
{
	mcu_size(ci, &g->mw, &g->mh);
	g->r = ci->restart_interval;
	g->mx = (ci->image_width + g->mw - 1) / g->mw;
	g->my = (ci->image_height + g->mh - 1) / g->mh;
	g->nseg = g->r ? ((uint64_t)g->mx * g->my + g->r - 1) / g->r : 0;
}

/* The MCUs to splice for the window (x, y, w, h) at scale n/8; false: all of them. */
static bool window_rect(const struct mcu_grid *g, struct mcu_rect *q, uint32_t n, uint32_t x,
			uint32_t y, uint32_t w, uint32_t h)
{
	return splice_rect(q, (uint64_t)x * 8 / n, ((uint64_t)(x + w) * 8 + n - 1) / n,
			   (uint64_t)y * 8 / n, ((uint64_t)(y + h) * 8 + n - 1) / n, g->mw, g->mh,
			   g->mx, g->my, g->r);
}

/*
 * The rows r0..r1 of q as the index gives them against the segments found from
 * row[r0] (j->seg, offsets into the bytes given, which start at file offset base):
 * each row y starts segment y * mx / r, and row[r1] lies right after the marker
 * that ends segment k1 - 1 (EOI itself for the last row).
 */
static bool ix_rows_match(const struct gm_jpeg *j, const struct mcu_rect *q,
			  const struct mcu_grid *g, uint64_t base, uint64_t k1)
{
	for (uint32_t y = q->r0 + 1; y < q->r1; y++)
		if (base + j->seg[2 * ((uint64_t)y * g->mx / g->r)] != ix_row(j, y))
			return false;
	return base + j->seg[2 * k1 - 1] + (q->r1 < g->my ? 2 : 0) == ix_row(j, q->r1);
}

/*
 * Ranged mode: the segments of q's rows from the bytes given (gm_jpeg_set_bytes),
 * the header from the index, after checking the index's rows against those bytes
 * (ix_rows_match; row[r0] follows the RSTn it names). Only the bytes
 * [row[r0] - 2, row[r1] + 2) are looked at, whatever more was given, so a whole
 * file decides as its ranged read would. 0; -EBADMSG when the bytes given do not
 * cover those; -ESTALE when the index does not match them.
 */
static int ranged_source(struct gm_jpeg *j, const struct mcu_rect *q, const struct mcu_grid *g,
			 struct splice_src *f)
{
	uint64_t a = ix_row(j, q->r0), b = ix_row(j, q->r1), from = a - (q->r0 ? 2 : 0);
	uint64_t k0 = (uint64_t)q->r0 * g->mx / g->r, k1 = (uint64_t)q->r1 * g->mx / g->r;

	if (!j->ent || from < j->ent_off || b + 2 > j->ent_off + j->ent_len) {
		set_err(j, -EBADMSG, "the bytes read do not hold the rows %u..%u the index names",
			q->r0, q->r1);
		return -EBADMSG;
	}
	const uint8_t *e = j->ent;
	size_t s = (size_t)(a - j->ent_off), lim = (size_t)(b + 2 - j->ent_off);
	if ((q->r0 && (e[s - 2] != 0xFF || e[s - 1] != 0xD0 + (k0 - 1) % 8)) ||
	    !find_segments(e, lim, s, (uint32_t)k0, (uint32_t)k1, (uint32_t)g->nseg, j->seg) ||
	    !ix_rows_match(j, q, g, j->ent_off, k1)) {
		set_err(j, -ESTALE,
			"the row index does not match the file: rows %u..%u are not where it says",
			q->r0, q->r1);
		return -ESTALE;
	}
	f->hdr = j->ix_hdr;
	f->start = scan_start(j->ix_hdr, j->ix_hlen, &f->sof);
	f->src = j->ent;
	return 0;
}

/*
 * If the open file has restart markers, reopen the decoder on a file of just the
 * segments the window (x, y, w, h at scale n/8) needs, and set *ox, *oy to where
 * that file starts in the scaled image; else leave everything as it is (*ox = *oy
 * = 0). A ranged open (gm_jpeg_open_ranged) always splices, from its bytes. Under
 * the caller's setjmp. 0, -ENOMEM or -EBADMSG.
 */
static int splice_window(struct gm_jpeg *j, uint32_t n, uint32_t x, uint32_t y, uint32_t w,
			 uint32_t h, uint32_t *ox, uint32_t *oy)
{
	struct jpeg_decompress_struct *ci = &j->cinfo;
	struct mcu_rect q;
	struct mcu_grid g;
	struct splice_src f;
	size_t len;
	int ret;

	*ox = *oy = 0;
	if (!j->ranged &&
	    (j->no_splice || !ci->restart_interval || ci->progressive_mode || ci->arith_code ||
	     ci->comps_in_scan != ci->num_components || j->len > UINT32_MAX))
		return 0;
	mcu_grid(ci, &g);
	if (!window_rect(&g, &q, n, x, y, w, h) && !j->ranged)
		return 0;
	if (g.nseg > UINT32_MAX / 2)
		return 0;
	if (gm_grow_scratch((void **)&j->seg, &j->seg_cap, sizeof(uint32_t) * 2 * g.nseg, 4096))
		return -ENOMEM;
	if (j->ranged) {
		if ((ret = ranged_source(j, &q, &g, &f)))
			return ret;
	} else {
		f.hdr = f.src = j->data;
		f.start = scan_start(j->data, j->len, &f.sof);
		if (!f.start || !find_segments(j->data, j->len, f.start, 0, (uint32_t)g.nseg,
					       (uint32_t)g.nseg, j->seg))
			return 0;
	}
	if (splice_write(j, &q, &f, g.mx, g.r, g.mw, g.mh, &len))
		return -ENOMEM;
	jpeg_abort_decompress(ci);
	jpeg_mem_src(ci, j->splice, (unsigned long)len);
	if (jpeg_read_header(ci, TRUE) != JPEG_HEADER_OK)
		return -EBADMSG;
	*ox = q.c0 * g.mw * n / 8;
	*oy = q.r0 * g.mh * n / 8;
	j->spliced = true;
	return 0;
}

uint32_t gm_jpeg_fit_restart(struct gm_jpeg *j, const void *in, size_t len, uint32_t interval)
{
	uint32_t d = interval;
	if (gm_jpeg_open(j, in, len, NULL) == 0 && interval > 0) {
		struct jpeg_decompress_struct *ci = &j->cinfo;
		uint32_t mw, mh;
		mcu_size(ci, &mw, &mh);
		uint32_t mx = (ci->image_width + mw - 1) / mw;
		while (mx % d)
			d--;
	}
	gm_jpeg_abort(j);
	return d;
}

bool gm_jpeg_spliced(const struct gm_jpeg *j)
{
	return j->spliced;
}

/*
 * The decode of gm_jpeg_decode_region once the window is checked: splice (a file
 * with restart markers), start, read into j->buf, fill img. Under the caller's
 * setjmp. 0 or -errno with the message set.
 */
static int decode_window(struct gm_jpeg *j, uint32_t scale_num, uint32_t x, uint32_t y, uint32_t w,
			 uint32_t h, struct gm_jpeg_image *img)
{
	struct jpeg_decompress_struct *ci = &j->cinfo;
	uint32_t sw = gm_jpeg_scaled_dim(ci->image_width, scale_num);
	uint32_t sh = gm_jpeg_scaled_dim(ci->image_height, scale_num), ox, oy;
	JDIMENSION xoff, cw;
	int ret = splice_window(j, scale_num, x, y, w, h, &ox, &oy);

	if (ret) {
		if (!j->errmsg[0])
			set_err(j, ret, "%s",
				ret == -ENOMEM ? "out of memory for a spliced file"
					       : "spliced file does not read");
		return ret;
	}
	/* the file decoded is sw x sh, or the spliced part of it from (ox, oy) */
	ret = start_window(j, scale_num, x - ox, w, gm_jpeg_scaled_dim(ci->image_width, scale_num),
			   gm_jpeg_scaled_dim(ci->image_height, scale_num), &xoff, &cw);
	if (ret)
		return ret;
	size_t stride = (size_t)cw * 3;
	ret = read_window(j, y - oy, h, cw, stride);
	if (ret)
		return ret;
	img->stride = stride;
	img->pixels = j->buf + (size_t)(x - ox - xoff) * 3;
	img->x = x;
	img->y = y;
	img->width = w;
	img->height = h;
	img->scale_num = scale_num;
	img->scaled_width = sw;
	img->scaled_height = sh;
	return 0;
}

int gm_jpeg_decode_region(struct gm_jpeg *j, uint32_t scale_num, uint32_t x, uint32_t y, uint32_t w,
			  uint32_t h, struct gm_jpeg_image *img)
{
	struct jpeg_decompress_struct *ci = &j->cinfo;
	uint32_t sw, sh;
	int ret;

	j->where = "gm_jpeg_decode_region";
	j->spliced = false;
	if (!j->open) {
		set_err(j, -EINVAL, "no image open");
		return -EINVAL;
	}
	sw = gm_jpeg_scaled_dim(ci->image_width, scale_num);
	sh = gm_jpeg_scaled_dim(ci->image_height, scale_num);
	if (scale_num < 1 || scale_num > 8 || w == 0 || h == 0 || x >= sw || y >= sh ||
	    w > sw - x || h > sh - y) {
		set_err(j, -EINVAL, "window %ux%u+%u+%u outside the %ux%u image at scale %u/8", w,
			h, x, y, sw, sh, scale_num);
		ret = -EINVAL;
		goto out_abort;
	}
	/* libjpeg errors in decode_window longjmp here */
	if (setjmp(j->err.jb)) {
		ret = j->errnum;
		goto out_abort;
	}
	ret = decode_window(j, scale_num, x, y, w, h, img);
	/* Stop here: the rows below the window are never read. */

out_abort:
	gm_jpeg_abort(j);
	return ret;
}

int gm_jpeg_decode_crop(struct gm_jpeg *j, uint32_t x, uint32_t y, uint32_t w, uint32_t h,
			uint32_t min_w, uint32_t min_h, struct gm_jpeg_image *img)
{
	struct jpeg_decompress_struct *ci = &j->cinfo;
	uint32_t n, sx0, sy0, sx1, sy1;

	if (!j->open) {
		j->where = "gm_jpeg_decode_crop";
		set_err(j, -EINVAL, "no image open");
		return -EINVAL;
	}
	if (w == 0 || h == 0 || x >= ci->image_width || y >= ci->image_height ||
	    w > ci->image_width - x || h > ci->image_height - y) {
		j->where = "gm_jpeg_decode_crop";
		set_err(j, -EINVAL, "crop %ux%u+%u+%u outside the %ux%u image", w, h, x, y,
			ci->image_width, ci->image_height);
		gm_jpeg_abort(j);
		return -EINVAL;
	}
	n = gm_jpeg_pick_scale(w, h, min_w, min_h);
	/* Map outwards: floor the top-left, ceil the bottom-right, clamp to the image. */
	sx0 = (uint32_t)((uint64_t)x * n / 8);
	sy0 = (uint32_t)((uint64_t)y * n / 8);
	sx1 = (uint32_t)(((uint64_t)(x + w) * n + 7) / 8);
	sy1 = (uint32_t)(((uint64_t)(y + h) * n + 7) / 8);
	if (sx1 > gm_jpeg_scaled_dim(ci->image_width, n))
		sx1 = gm_jpeg_scaled_dim(ci->image_width, n);
	if (sy1 > gm_jpeg_scaled_dim(ci->image_height, n))
		sy1 = gm_jpeg_scaled_dim(ci->image_height, n);
	return gm_jpeg_decode_region(j, n, sx0, sy0, sx1 - sx0, sy1 - sy0, img);
}

int gm_jpeg_decode_full(struct gm_jpeg *j, uint32_t scale_num, struct gm_jpeg_image *img)
{
	if (!j->open || scale_num < 1 || scale_num > 8) {
		j->where = "gm_jpeg_decode_full";
		if (j->open)
			set_err(j, -EINVAL, "bad scale %u/8", scale_num);
		else
			set_err(j, -EINVAL, "no image open");
		gm_jpeg_abort(j);
		return -EINVAL;
	}
	return gm_jpeg_decode_region(j, scale_num, 0, 0,
				     gm_jpeg_scaled_dim(j->cinfo.image_width, scale_num),
				     gm_jpeg_scaled_dim(j->cinfo.image_height, scale_num), img);
}

/* ---- lossless restart-marker transcoding ----------------------------------------- */

struct tc_err {
	struct jpeg_error_mgr pub; /* first: libjpeg casts cinfo->err to this */
	jmp_buf jb;
	int ret;
	char msg[JMSG_LENGTH_MAX];
	unsigned char *mem; /* jpeg_mem_dest's buffer: here, so it survives a longjmp */
	unsigned long mlen;
};

static void tc_error_exit(j_common_ptr cinfo)
{
	struct tc_err *e = (struct tc_err *)cinfo->err;
	(*cinfo->err->format_message)(cinfo, e->msg);
	e->ret = cinfo->err->msg_code == JERR_OUT_OF_MEMORY ? -ENOMEM : -EBADMSG;
	longjmp(e->jb, 1);
}

/* As the decoder: a warning that means lost data stops the transcode. */
static void tc_emit_message(j_common_ptr cinfo, int msg_level)
{
	if (msg_level < 0 && warning_is_fatal(cinfo->err->msg_code))
		tc_error_exit(cinfo);
}

/* Copy the saved APPn/COM markers of src into dst, except those libjpeg writes. */
static void tc_copy_markers(struct jpeg_decompress_struct *src, struct jpeg_compress_struct *dst)
{
	for (jpeg_saved_marker_ptr m = src->marker_list; m; m = m->next) {
		if (dst->write_JFIF_header && m->marker == JPEG_APP0 && m->data_length >= 5 &&
		    !memcmp(m->data, "JFIF", 5))
			continue;
		if (dst->write_Adobe_marker && m->marker == JPEG_APP0 + 14 && m->data_length >= 5 &&
		    !memcmp(m->data, "Adobe", 5))
			continue;
		jpeg_write_marker(dst, m->marker, m->data, m->data_length);
	}
}

int gm_jpeg_restart_transcode(const void *in, size_t len, uint32_t interval, uint64_t max_pixels,
			      uint8_t **out, size_t *out_len, char *err, size_t errlen)
{
	struct jpeg_decompress_struct src;
	struct jpeg_compress_struct dst;
	struct tc_err e = {0};
	volatile int ret = 0; /* set after the setjmp */
	volatile uint64_t limit = max_pixels ? max_pixels : GM_JPEG_DEFAULT_MAX_PIXELS;

	if (!in || !len || !interval || interval > GM_JPEG_MAX_RESTART || !out || !out_len) {
		gm_errf(err, errlen, "gm_jpeg_restart_transcode: %s",
			!in || !len ? "no data" : "restart interval must be 1..65535 MCUs");
		return -EINVAL;
	}
	src.err = dst.err = jpeg_std_error(&e.pub);
	e.pub.error_exit = tc_error_exit;
	e.pub.emit_message = tc_emit_message;
	/* both objects are created before any libjpeg call can fail into the setjmp */
	jpeg_create_decompress(&src);
	jpeg_create_compress(&dst);
	if (setjmp(e.jb)) {
		ret = e.ret;
		gm_errf(err, errlen, "gm_jpeg_restart_transcode: %s: %s",
			e.ret == -ENOMEM ? "out of memory" : "corrupt or not a JPEG", e.msg);
		goto out_destroy;
	}
	jpeg_mem_src(&src, (const unsigned char *)in, (unsigned long)len);
	jpeg_save_markers(&src, JPEG_COM, 0xFFFF);
	for (int m = 0; m < 16; m++)
		jpeg_save_markers(&src, JPEG_APP0 + m, 0xFFFF);
	if (jpeg_read_header(&src, TRUE) != JPEG_HEADER_OK) {
		gm_errf(err, errlen, "gm_jpeg_restart_transcode: tables only, no image");
		ret = -EBADMSG;
		goto out_destroy;
	}
	if ((uint64_t)src.image_width * src.image_height > limit) {
		gm_errf(err, errlen,
			"gm_jpeg_restart_transcode: image %ux%u is over the pixel limit",
			src.image_width, src.image_height);
		ret = -E2BIG;
		goto out_destroy;
	}
	jvirt_barray_ptr *coef = jpeg_read_coefficients(&src);
	jpeg_copy_critical_parameters(&src, &dst);
	dst.optimize_coding = TRUE;
	dst.restart_interval = interval;
	jpeg_mem_dest(&dst, &e.mem, &e.mlen);
	jpeg_write_coefficients(&dst, coef);
	tc_copy_markers(&src, &dst);
	jpeg_finish_compress(&dst);
	jpeg_finish_decompress(&src);
	*out = e.mem;
	*out_len = e.mlen;
	e.mem = NULL;

out_destroy:
	jpeg_destroy_compress(&dst);
	jpeg_destroy_decompress(&src);
	free(e.mem);
	return ret;
}

/* ---- the row index: reading a member's needed rows only ---------------------------- */

/*
 * The index (gm_jpeg_add_row_index) is an APP15 segment right after SOI (and the
 * JFIF APP0, when there is one), so that a small prefix of the file holds it:
 *   "GMRIDX1\0", u16 hlen, hdr[hlen] = SOI + the APP0/APP14/DQT/SOF/DHT/DRI/SOS
 *   segments of the file (no COM or other APPn), u32 nrows (MCU rows), u32 row[nrows + 1]
 * (big-endian): row[y] = the file offset of MCU row y's first entropy byte, row[nrows]
 * that of the EOI marker. It is written only when the restart interval divides an
 * MCU row, so every row starts a segment. A reader decodes the rows of a window from
 * the header copy and the bytes [row[r0] - 2, row[r1] + 2): the same segments, the
 * same pixels as from the whole file.
 *
 * The index is checked, not trusted (a lent shard may lie): the header copy must equal the
 * file's own header, read the way the copy was made, up to row[0] (so a ranged
 * read's prefix runs to there: gm_jpeg_index_bytes); the offsets must rise and lie
 * in the file; and a decode checks the rows of its window against their bytes:
 * row[r0] follows the RSTn that ends segment k0 - 1 (n = (k0 - 1) % 8), each row
 * up to r1 starts at the segment the scan of those bytes finds for it, and row[r1]
 * lies right after the marker ending segment k1 - 1 (EOI for the last row). Any
 * miss is -ESTALE (the caller decodes the whole file without the index). Only the
 * bytes a ranged read holds are looked at, and a whole file is checked on the
 * same bytes, so both ways decide alike (contract 1). What it cannot see from
 * them: a window's rows moved together by a multiple of 8 segments (the same
 * RSTn); that gives other pixels, the same both ways, and never an access outside
 * the bytes given.
 */
#define IX_MAGIC     "GMRIDX1"
#define IX_MAGIC_LEN 8u

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* Offset of the segment after SOI and a JFIF APP0, or 0 when d is no JPEG. */
static size_t ix_pos(const uint8_t *d, size_t len)
{
	if (len < 4 || d[0] != 0xFF || d[1] != 0xD8)
		return 0;
	if (d[2] == 0xFF && d[3] == 0xE0 && len >= 6)
		return 4 + ((size_t)d[4] << 8 | d[5]);
	return 2;
}

/* Left out of the header copy: COM and APPn but APP0 (JFIF) and APP14 (Adobe),
 * which say how the colours are coded (the index's own APP15 among them). */
static bool ix_skipped(uint8_t m)
{
	return (m >= 0xE1 && m <= 0xEF && m != 0xEE) || m == 0xFE;
}

/*
 * The header copy for the index: SOI + the segments of d[2..start) but COM and
 * APPn other than APP0 and APP14 (JFIF and Adobe: libjpeg reads the colour space
 * from them).
 * *hlen bytes into hdr (cap bytes). false if they do not fit.
 */
static bool ix_header(const uint8_t *d, size_t start, uint8_t *hdr, size_t cap, size_t *hlen)
{
	size_t p = 2, n = 2;
	hdr[0] = 0xFF, hdr[1] = 0xD8;
	while (p + 4 <= start) {
		if (d[p + 1] == 0xFF) { /* fill byte */
			p++;
			continue;
		}
		size_t seg = 2 + ((size_t)d[p + 2] << 8 | d[p + 3]);
		if (!ix_skipped(d[p + 1])) {
			if (n + seg > cap)
				return false;
			memcpy(hdr + n, d + p, seg);
			n += seg;
		}
		p += seg;
	}
	*hlen = n;
	return true;
}

/* The index payload (after the marker and length) for d, at most 65533 bytes, into
 * ix; its length, or 0 when d does not qualify. Offsets are d's plus shift. */
static size_t ix_build(struct gm_jpeg *j, const uint8_t *d, size_t len, size_t shift, uint8_t *ix)
{
	struct jpeg_decompress_struct *ci = &j->cinfo;
	struct mcu_grid g;
	size_t sof, start = scan_start(d, len, &sof), hlen;

	if (!start || ci->progressive_mode || ci->arith_code || !ci->restart_interval ||
	    ci->comps_in_scan != ci->num_components || len + shift > UINT32_MAX)
		return 0;
	mcu_grid(ci, &g);
	size_t body = IX_MAGIC_LEN + 2 + 4 + 4 * ((size_t)g.my + 1);
	if (g.mx % g.r || body >= 65533 ||
	    !ix_header(d, start, ix + IX_MAGIC_LEN + 2, 65533 - body, &hlen))
		return 0;
	if (gm_grow_scratch((void **)&j->seg, &j->seg_cap, sizeof(uint32_t) * 2 * g.nseg, 4096) ||
	    !find_segments(d, len, start, 0, (uint32_t)g.nseg, (uint32_t)g.nseg, j->seg))
		return 0;
	memcpy(ix, IX_MAGIC, IX_MAGIC_LEN);
	ix[IX_MAGIC_LEN] = (uint8_t)(hlen >> 8), ix[IX_MAGIC_LEN + 1] = (uint8_t)hlen;
	uint8_t *rows = ix + IX_MAGIC_LEN + 2 + hlen;
	put_be32(rows, g.my);
	for (uint32_t y = 0; y < g.my; y++)
		put_be32(rows + 4 + 4 * (size_t)y,
			 (uint32_t)(j->seg[2 * ((uint64_t)y * g.mx / g.r)] + shift));
	put_be32(rows + 4 + 4 * (size_t)g.my, (uint32_t)(j->seg[2 * g.nseg - 1] + shift));
	return body + hlen;
}

int gm_jpeg_add_row_index(struct gm_jpeg *j, const void *in, size_t len, uint8_t **out,
			  size_t *out_len)
{
	const uint8_t *d = in;
	uint8_t ix[65535];
	int ret = gm_jpeg_open(j, in, len, NULL);

	*out = NULL;
	*out_len = 0;
	if (ret)
		return ret;
	size_t pos = ix_pos(d, len);
	/* the payload's length decides the shift; the header copy and rows do not
	 * depend on it, so build once with a guessed shift to learn it, then again */
	size_t n = pos ? ix_build(j, d, len, 0, ix) : 0;
	if (n)
		n = ix_build(j, d, len, 4 + n, ix);
	gm_jpeg_abort(j);
	if (!n)
		return -ENOENT;
	uint8_t *o = malloc(len + 4 + n);
	if (!o)
		return -ENOMEM;
	memcpy(o, d, pos);
	o[pos] = 0xFF, o[pos + 1] = 0xEF;
	o[pos + 2] = (uint8_t)((n + 2) >> 8), o[pos + 3] = (uint8_t)(n + 2);
	memcpy(o + pos + 4, ix, n);
	memcpy(o + pos + 4 + n, d + pos, len - pos);
	*out = o;
	*out_len = len + 4 + n;
	return 0;
}

size_t gm_jpeg_index_bytes(const void *prefix, size_t plen)
{
	const uint8_t *d = prefix;
	size_t p = prefix ? ix_pos(d, plen) : 0;
	if (!p || p + 4 + IX_MAGIC_LEN + 2 > plen || d[p] != 0xFF || d[p + 1] != 0xEF ||
	    memcmp(d + p + 4, IX_MAGIC, IX_MAGIC_LEN))
		return 0;
	size_t end = p + 2 + ((size_t)d[p + 2] << 8 | d[p + 3]), h = p + 4 + IX_MAGIC_LEN;
	/* all of it here: then up to row[0], where the file's own header ends */
	size_t rows = h + 2 + ((size_t)d[h] << 8 | d[h + 1]);
	if (end > plen || rows + 8 > end)
		return end;
	size_t row0 = be32(d + rows + 4);
	return row0 > end ? row0 : end;
}

/*
 * The file's own header d[2..s) (s: row[0], its first entropy byte), read as
 * ix_header made the copy (its COM and APPn left out, the index's APP15 among
 * them), equals the copy hdr[0..hlen), and ends with its SOS at s. One pass over
 * bytes the prefix holds.
 */
static bool ix_same_header(const uint8_t *d, size_t s, const uint8_t *hdr, size_t hlen)
{
	size_t p = 2, n = 2;
	if (hlen < 2 || hdr[0] != 0xFF || hdr[1] != 0xD8)
		return false;
	while (p + 4 <= s && d[p] == 0xFF) {
		if (d[p + 1] == 0xFF) { /* fill byte */
			p++;
			continue;
		}
		size_t seg = 2 + ((size_t)d[p + 2] << 8 | d[p + 3]);
		if (seg > s - p)
			return false;
		if (!ix_skipped(d[p + 1])) {
			if (seg > hlen - n || memcmp(hdr + n, d + p, seg))
				return false;
			n += seg;
		}
		if (d[p + 1] == 0xDA)
			return p + seg == s && n == hlen;
		p += seg;
	}
	return false;
}

/*
 * Parse the index of prefix[0..plen) (of a file_len-byte file) into j (ix_*). 0;
 * -ENOENT when the prefix holds no index, or not all of it and of the header up to
 * row[0]; -ESTALE (message set) when the index does not match the file: malformed,
 * offsets that do not rise or leave the file, a header copy unlike the file's.
 */
static int ix_parse(struct gm_jpeg *j, const uint8_t *d, size_t plen, uint64_t file_len)
{
	size_t p = ix_pos(d, plen);
	if (!p || p + 4 + IX_MAGIC_LEN > plen || d[p] != 0xFF || d[p + 1] != 0xEF ||
	    memcmp(d + p + 4, IX_MAGIC, IX_MAGIC_LEN))
		return -ENOENT;
	size_t n = (size_t)d[p + 2] << 8 | d[p + 3], b = p + 4;
	if (n >= 2 && b + n - 2 > plen)
		return -ENOENT; /* a longer prefix holds it */
	const char *why = "malformed";
	if (n < 2 + IX_MAGIC_LEN + 6)
		goto stale;
	n -= 2;
	size_t hlen = (size_t)d[b + IX_MAGIC_LEN] << 8 | d[b + IX_MAGIC_LEN + 1];
	size_t rows = b + IX_MAGIC_LEN + 2 + hlen;
	if (rows + 4 > b + n)
		goto stale;
	uint32_t nrows = be32(d + rows);
	if (nrows == 0 || (uint64_t)4 * nrows + 8 != b + n - rows)
		goto stale;
	j->ix_hdr = d + b + IX_MAGIC_LEN + 2;
	j->ix_hlen = hlen;
	j->ix_rows = d + rows + 4;
	j->ix_nrows = nrows;
	why = "row offsets that do not rise";
	for (uint32_t y = 0; y < nrows; y++)
		if (ix_row(j, y) >= ix_row(j, y + 1))
			goto stale;
	why = "row offsets outside the file";
	if (ix_row(j, 0) < b + n || ix_row(j, nrows) + 2 > file_len)
		goto stale;
	if (ix_row(j, 0) > plen)
		return -ENOENT; /* the file's own header runs past the prefix */
	why = "a header copy unlike the file's header";
	if (!ix_same_header(d, (size_t)ix_row(j, 0), j->ix_hdr, hlen))
		goto stale;
	return 0;
stale:
	set_err(j, -ESTALE, "the row index does not match the file: %s", why);
	return -ESTALE;
}

int gm_jpeg_open_ranged(struct gm_jpeg *j, const void *prefix, size_t plen, uint64_t file_len,
			struct gm_jpeg_info *info)
{
	struct jpeg_decompress_struct *ci = &j->cinfo;
	struct mcu_grid g;
	size_t sof;

	open_reset(j, "gm_jpeg_open_ranged");
	int ret = prefix ? ix_parse(j, prefix, plen, file_len) : -ENOENT;
	if (ret == -ENOENT)
		set_err(j, -ENOENT, "no row index in the first %zu bytes", plen);
	if (ret)
		return ret;
	if (setjmp(j->err.jb))
		goto out_abort;
	j->data = j->ix_hdr;
	j->len = j->ix_hlen;
	if (open_header(j, j->ix_hdr, j->ix_hlen, info))
		goto out_abort;
	mcu_grid(ci, &g);
	if (ci->progressive_mode || ci->arith_code || !g.r || g.mx % g.r || g.my != j->ix_nrows ||
	    ci->comps_in_scan != ci->num_components ||
	    scan_start(j->ix_hdr, j->ix_hlen, &sof) != j->ix_hlen) {
		set_err(j, -ESTALE,
			"the row index does not match the file: it does not fit the image");
		goto out_abort;
	}
	j->ranged = true;
	return 0;

out_abort:
	gm_jpeg_abort(j);
	return j->errnum;
}

int gm_jpeg_region_bytes(struct gm_jpeg *j, uint32_t scale_num, uint32_t x, uint32_t y, uint32_t w,
			 uint32_t h, uint64_t *off, uint64_t *len)
{
	struct mcu_grid g;
	struct mcu_rect q;
	uint32_t sw, sh;

	if (!j->open || !j->ranged || scale_num < 1 || scale_num > 8)
		return -EINVAL;
	sw = gm_jpeg_scaled_dim(j->cinfo.image_width, scale_num);
	sh = gm_jpeg_scaled_dim(j->cinfo.image_height, scale_num);
	if (w == 0 || h == 0 || x >= sw || y >= sh || w > sw - x || h > sh - y)
		return -EINVAL;
	mcu_grid(&j->cinfo, &g);
	window_rect(&g, &q, scale_num, x, y, w, h);
	/* from the RSTn before row r0 (checked by the decode) */
	*off = ix_row(j, q.r0) - (q.r0 ? 2 : 0);
	*len = ix_row(j, q.r1) + 2 - *off;
	return 0;
}

void gm_jpeg_set_bytes(struct gm_jpeg *j, const void *bytes, uint64_t off, size_t len)
{
	j->ent = bytes;
	j->ent_off = off;
	j->ent_len = len;
}

/* ---- coefficient output (coef.h) --------------------------------------------------
 *
 * The GPU decode's CPU half: the entropy decode alone, through goldminer's own
 * Huffman decoder (huff.c's gm_huff_decode_run, a row of MCUs a call), of only
 * the MCUs a window needs (splice_axis's rule, which makes a restart-spliced
 * window come out as the full decode's) stored, the rest of the rows above and the
 * columns beside passed over (their DC decoded, their AC skipped), nothing below
 * the window read. The coefficients stay quantised; the
 * IDCT, upsampling and colour conversion are coef_math.h's, elsewhere.
 *
 * Not libjpeg-turbo's jpeg_read_coefficients (its own decoder, fast path
 * included), though the project prefers the library: it decodes every MCU of the
 * image into whole-image arrays, none skipped and none stopped short of the end,
 * 318-320 us an image on the photo set against 193-195 for this whole coefficient
 * output (window, store and all; one core, each image's best of 5, 2026-12-03;
 * 178-188 since the decode into the sparse form and the refill's top-up).
 */

/* One component's sampling as coef.h carries it (s->comp[c], s->q[c]) for the
 * started decompressor; the original image is W x H. -ENOTSUP when libjpeg would
 * upsample it by other than 1 or 2 a side. */
static int coef_comp(const struct jpeg_decompress_struct *ci, const jpeg_component_info *cp,
		     uint32_t W, uint32_t H, struct gm_coef_slot *s)
{
	int c = cp->component_index, mh = ci->max_h_samp_factor, mv = ci->max_v_samp_factor;
	int ms = ci->min_DCT_scaled_size, ss = cp->DCT_scaled_size;
	int hn = mh * ms, hd = cp->h_samp_factor * ss, vn = mv * ms, vd = cp->v_samp_factor * ss;
	struct gm_coef_comp *k = &s->comp[c];

	if (c < 0 || c >= (int)GM_COEF_MAX_COMPS || !cp->quant_table || hn % hd || vn % vd ||
	    hn / hd > 2 || vn / vd > 2 || (ss != 1 && ss != 2 && ss != 4 && ss != 8))
		return -ENOTSUP;
	k->ssize = (uint8_t)ss;
	k->hr = (uint8_t)(hn / hd), k->vr = (uint8_t)(vn / vd);
	k->mw = (uint8_t)cp->MCU_width, k->mh = (uint8_t)cp->MCU_height;
	k->qt = (uint8_t)c;
	k->dw = (uint32_t)(((uint64_t)W * cp->h_samp_factor * ss + 8 * mh - 1) / (8 * mh));
	k->dh = (uint32_t)(((uint64_t)H * cp->v_samp_factor * ss + 8 * mv - 1) / (8 * mv));
	k->bw_all = (uint32_t)(((uint64_t)W * cp->h_samp_factor + 8 * mh - 1) / (8 * mh));
	k->bh_all = (uint32_t)(((uint64_t)H * cp->v_samp_factor + 8 * mv - 1) / (8 * mv));
	/* libjpeg's choice of upsampler (jdsample.c): triangles only above 1/8
	 * scale, and across only for a component over 2 samples wide */
	bool fancy = ci->do_fancy_upsampling && ms > 1;
	k->fancy = (uint8_t)(fancy && (k->hr == 1 || k->dw > 2));
	for (int i = 0; i < 64; i++)
		s->q[c][i] = cp->quant_table->quantval[i];
	return 0;
}

/* Room for n coefficients of component c in j's scratch (its old contents are
 * not kept: sized once, before the decode). */
static int coef_room(struct gm_jpeg *j, int c, size_t n)
{
	if (gm_grow_scratch((void **)&j->cval[c], &j->cval_cap[c], n * sizeof(int16_t), 1 << 14) ||
	    gm_grow_scratch((void **)&j->cpos[c], &j->cpos_cap[c], n, 1 << 13))
		return -ENOMEM;
	return 0;
}

/* Place every component's counts after the header (written in place as the
 * decode goes, so placed before any nnz is known). The bytes they end at, or 0
 * when over cap. */
static size_t coef_counts_at(struct gm_coef_slot *s, size_t cap)
{
	size_t at = GM_COEF_HDR_BYTES;
	for (uint32_t c = 0; c < s->ncomp; c++) {
		s->comp[c].off_counts = (uint32_t)at;
		at += s->comp[c].nblocks;
	}
	return at > cap ? 0 : at;
}

/* The fewest bytes the slot takes with at least nnz coefficients a component
 * (coef_pack: 2 bytes each at least). */
static uint64_t coef_lower_bound(const struct gm_coef_slot *s, const uint32_t *nnz)
{
	uint64_t at = GM_COEF_HDR_BYTES;
	for (uint32_t c = 0; c < s->ncomp; c++)
		at += s->comp[c].nblocks + 2ull * nnz[c];
	return at;
}

/* n entries position | value << 6 (coef.h) from the decode's values and
 * positions; whether every value lay in -512..511 (else ent holds nothing of use).
 * SSE2 (every x86-64) 8 at a time: the scalar loop took 7% of coefficient mode's
 * time (perf; the compiler's vectoriser at -O2 leaves it, ent may alias). */
static bool coef_pack_narrow(uint16_t *ent, const int16_t *val, const uint8_t *pos, size_t n)
{
	uint16_t out = 0; /* a value + 512 past 10 bits: one outside the range */
	size_t i = 0;
#ifdef __SSE2__
	const __m128i bias = _mm_set1_epi16(512), zero = _mm_setzero_si128();
	__m128i acc = zero;
	for (; i + 8 <= n; i += 8) {
		__m128i v = _mm_loadu_si128((const __m128i *)(const void *)(val + i));
		__m128i p = _mm_unpacklo_epi8(
		    _mm_loadl_epi64((const __m128i *)(const void *)(pos + i)), zero);
		acc = _mm_or_si128(acc, _mm_add_epi16(v, bias));
		_mm_storeu_si128((__m128i *)(void *)(ent + i),
				 _mm_or_si128(_mm_slli_epi16(v, 6), p));
	}
	if (_mm_movemask_epi8(_mm_cmpeq_epi16(_mm_srli_epi16(acc, 10), zero)) != 0xFFFF)
		return false;
#endif
	for (; i < n; i++) {
		out |= (uint16_t)(val[i] + 512);
		ent[i] = (uint16_t)(pos[i] | (uint16_t)val[i] << 6);
	}
	return out < 1024;
}

/*
 * Component c's entries (coef.h) from the decode's scratch (j->cval, j->cpos, the
 * counts already in the slot) into the slot at *at (2-aligned first), which
 * advances past them: packed, unless some value lies outside -512..511; then
 * block by block, a block holding one wide (its count flagged). 0, or -ENOSPC
 * past cap.
 */
static int coef_pack(struct gm_jpeg *j, struct gm_coef_slot *s, uint32_t c, uint32_t nnz,
		     size_t *at, size_t cap)
{
	struct gm_coef_comp *k = &s->comp[c];
	const int16_t *val = j->cval[c];
	const uint8_t *pos = j->cpos[c];
	size_t o = 0, e = 0, start = (*at + 1) & ~(size_t)1;

	k->nnz = nnz, k->off_ent = (uint32_t)start;
	if (start + 2 * (size_t)nnz > cap)
		return -ENOSPC;
	uint16_t *ent = (uint16_t *)(void *)((uint8_t *)s + start);
	if (coef_pack_narrow(ent, val, pos, nnz)) {
		o = nnz;
		goto out;
	}
	uint8_t *cnt = (uint8_t *)s + k->off_counts;
	for (uint32_t b = 0; b < k->nblocks; e += cnt[b++] & 0x7Fu) {
		uint32_t n = cnt[b];
		bool wide = false;
		for (uint32_t i = 0; i < n; i++)
			wide |= val[e + i] < -512 || val[e + i] > 511;
		if (start + 2 * (o + ((size_t)n << wide)) > cap)
			return -ENOSPC;
		if (!wide) {
			(void)coef_pack_narrow(ent + o, val + e, pos + e, n);
			o += n;
			continue;
		}
		cnt[b] = (uint8_t)(n | GM_COEF_WIDE);
		for (uint32_t i = 0; i < n; i++)
			ent[o++] = pos[e + i], ent[o++] = (uint16_t)val[e + i];
	}
out:
	k->nent = (uint32_t)o;
	*at = start + 2 * o;
	return 0;
}

/* The window's MCUs in the grid of the file being decoded (the spliced one starts
 * at (ox, oy) of the image, in scaled pixels): q, and its offset in the image's
 * grid (q0). */
static void coef_rect(const struct mcu_grid *g, uint32_t n, uint32_t x, uint32_t y, uint32_t w,
		      uint32_t h, uint32_t ox, uint32_t oy, struct mcu_rect *q, struct mcu_rect *q0)
{
	uint64_t fx = (uint64_t)g->mw * n / 8, fy = (uint64_t)g->mh * n / 8;
	splice_axis((uint64_t)(x - ox) * 8 / n, ((uint64_t)(x - ox + w) * 8 + n - 1) / n, g->mw,
		    g->mx, &q->c0, &q->c1);
	splice_axis((uint64_t)(y - oy) * 8 / n, ((uint64_t)(y - oy + h) * 8 + n - 1) / n, g->mh,
		    g->my, &q->r0, &q->r1);
	q0->c0 = (uint32_t)(ox / fx), q0->r0 = (uint32_t)(oy / fy);
}

/* Fill the slot's image part from the started decompressor (W x H the image's
 * size before any splice) and place the counts; the blocks' components in comp.
 * 0, -ENOTSUP or -ENOSPC (counts over cap). */
static int coef_begin(struct gm_jpeg *j, struct gm_coef_slot *s, size_t cap, uint32_t W, uint32_t H,
		      const struct mcu_rect *q, const struct mcu_rect *q0, int *comp)
{
	struct jpeg_decompress_struct *ci = &j->cinfo;

	s->width = W, s->height = H;
	s->ncomp = (uint8_t)ci->num_components;
	s->color = ci->jpeg_color_space == JCS_GRAYSCALE ? GM_COEF_GRAY
		   : ci->jpeg_color_space == JCS_RGB	 ? GM_COEF_RGB
							 : GM_COEF_YCC;
	s->mcols = q->c1 - q->c0, s->mrows = q->r1 - q->r0;
	for (int i = 0; i < ci->comps_in_scan; i++) {
		const jpeg_component_info *cp = ci->cur_comp_info[i];
		if (coef_comp(ci, cp, W, H, s))
			return -ENOTSUP;
		struct gm_coef_comp *k = &s->comp[cp->component_index];
		k->bx0 = (q0->c0 + q->c0) * k->mw, k->by0 = (q0->r0 + q->r0) * k->mh;
		k->nblocks = s->mcols * s->mrows * k->mw * k->mh;
	}
	for (int b = 0; b < ci->blocks_in_MCU; b++)
		comp[b] = ci->cur_comp_info[ci->MCU_membership[b]]->component_index;
	return coef_counts_at(s, cap) ? 0 : -ENOSPC;
}

/*
 * Entropy-decode the MCUs of coef_window's rows 0..q->r1, storing the
 * coefficients of those in q into o (huff.c's sparse form, straight from the
 * decode: no block buffer to zero and scan): whole MCU rows, as libjpeg's decode
 * of the window reads them, so that a file corrupt in the last row's columns past
 * the window fails here as it does there. A row a call (huff.c keeps its bit
 * reader in registers across the row's MCUs). 0, or -ENOSPC once the
 * coefficients cannot fit cap.
 */
static int coef_mcus(struct gm_jpeg *j, const struct mcu_grid *g, const struct mcu_rect *q,
		     const struct gm_coef_slot *s, size_t cap, struct gm_huff_out *o)
{
	for (uint32_t my = 0; my < q->r1; my++) {
		bool row_in = my >= q->r0;
#if GM_OWN_HUFFMAN /* (else own_huff is never set: not reached) */
		gm_huff_decode_run(j->huff, &j->cinfo, g->mx, row_in ? q->c0 : 0,
				   row_in ? q->c1 : 0, o);
#else
		(void)j, (void)g, (void)o;
#endif
		/* the slot's bytes only grow: once past cap, the rest of the decode is
		 * wasted (the CPU path makes the sample: an eighth of the uint8 slots
		 * at 224 on the photo set) */
		if (row_in && coef_lower_bound(s, o->nnz) > cap)
			return -ENOSPC;
	}
	return 0;
}

/*
 * The coefficient output of the window (x, y, w, h) at scale n into the slot s of
 * cap bytes. Under the caller's setjmp. 0 or -errno with the message set.
 */
static int coef_window(struct gm_jpeg *j, uint32_t n, uint32_t x, uint32_t y, uint32_t w,
		       uint32_t h, struct gm_coef_slot *s, size_t cap)
{
	struct jpeg_decompress_struct *ci = &j->cinfo;
	uint32_t W = ci->image_width, H = ci->image_height, ox, oy;
	int ret = -ENOTSUP;
	struct gm_huff_out o = {0};
	struct mcu_rect q, q0;
	struct mcu_grid g;

	if (j->cmyk || ci->progressive_mode || ci->arith_code || j->libjpeg_huff || !j->huff ||
	    (ci->num_components != 1 && ci->num_components != 3))
		goto out_unsupported;
	if ((ret = splice_window(j, n, x, y, w, h, &ox, &oy))) {
		set_err(j, ret, "%s",
			ret == -ENOMEM ? "out of memory" : "spliced file does not read");
		return ret;
	}
	ci->scale_num = n, ci->scale_denom = 8, ci->out_color_space = JCS_RGB;
	jpeg_start_decompress(ci);
#if GM_OWN_HUFFMAN
	j->own_huff = gm_huff_install(j->huff, ci);
#endif
	ret = -ENOTSUP;
	if (!j->own_huff || ci->comps_in_scan != ci->num_components)
		goto out_unsupported;
	mcu_grid(ci, &g);
	coef_rect(&g, n, x, y, w, h, ox, oy, &q, &q0);
	s->scale = (uint8_t)n;
	if ((ret = coef_begin(j, s, cap, W, H, &q, &q0, o.comp)))
		goto out_unsupported;
	for (uint32_t c = 0; c < s->ncomp; c++) {
		o.cnt[c] = (uint8_t *)s + s->comp[c].off_counts;
		if (coef_room(j, (int)c, (size_t)s->comp[c].nblocks * 64)) {
			set_err(j, -ENOMEM, "out of memory for the coefficients");
			return -ENOMEM;
		}
		o.val[c] = j->cval[c], o.pos[c] = j->cpos[c];
	}
	if ((ret = coef_mcus(j, &g, &q, s, cap, &o)))
		goto out_unsupported;
	size_t used = coef_counts_at(s, cap);
	for (uint32_t c = 0; c < s->ncomp; c++)
		if ((ret = coef_pack(j, s, c, o.nnz[c], &used, cap)))
			goto out_unsupported;
	used = (used + 15) & ~(size_t)15;
	if (used > cap || used > UINT32_MAX) {
		ret = -ENOSPC;
		goto out_unsupported;
	}
	s->magic = GM_COEF_MAGIC, s->version = GM_COEF_VERSION, s->kind = GM_COEF_KIND_COEFS;
	s->bytes = (uint32_t)used;
	return 0;

out_unsupported:
	set_err(j, ret, "%s",
		ret == -ENOSPC ? "the coefficients do not fit the slot"
			       : "no coefficient output for this file (progressive, arithmetic, "
				 "CMYK, an unusual sampling, or libjpeg's Huffman decoder)");
	return ret;
}

uint64_t gm_jpeg_coef_guess(const struct gm_jpeg *j, uint32_t scale_num, uint32_t w, uint32_t h)
{
	const struct jpeg_decompress_struct *ci = &j->cinfo;
	size_t sof, start;
	if (!j->open || j->ranged || !j->data || !(start = scan_start(j->data, j->len, &sof)))
		return 0;
	double sw = gm_jpeg_scaled_dim(ci->image_width, scale_num),
	       sh = gm_jpeg_scaled_dim(ci->image_height, scale_num);
	double share = (double)w * h / (sw * sh);
	return GM_COEF_HDR_BYTES +
	       (uint64_t)(share * (double)(j->len - start) * GM_JPEG_COEF_GUESS);
}

int gm_jpeg_decode_coefs(struct gm_jpeg *j, uint32_t scale_num, uint32_t x, uint32_t y, uint32_t w,
			 uint32_t h, struct gm_coef_slot *s, size_t cap)
{
	struct jpeg_decompress_struct *ci = &j->cinfo;
	int ret;

	j->where = "gm_jpeg_decode_coefs";
	j->spliced = false;
	if (!j->open) {
		set_err(j, -EINVAL, "no image open");
		return -EINVAL;
	}
	uint32_t sw = gm_jpeg_scaled_dim(ci->image_width, scale_num);
	uint32_t sh = gm_jpeg_scaled_dim(ci->image_height, scale_num);
	if ((scale_num != 1 && scale_num != 2 && scale_num != 4 && scale_num != 8) || w == 0 ||
	    h == 0 || x >= sw || y >= sh || w > sw - x || h > sh - y || !s ||
	    cap < GM_COEF_HDR_BYTES) {
		set_err(j, -EINVAL, "window %ux%u+%u+%u outside the %ux%u image at scale %u/8", w,
			h, x, y, sw, sh, scale_num);
		ret = -EINVAL;
		goto out_abort;
	}
	if (setjmp(j->err.jb)) { /* libjpeg errors in coef_window */
		ret = j->errnum;
		goto out_abort;
	}
	ret = coef_window(j, scale_num, x, y, w, h, s, cap);

out_abort:
	gm_jpeg_abort(j);
	return ret;
}
