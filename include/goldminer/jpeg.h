/*
 * jpeg.h - one JPEG decoder per worker, with partial (crop-window) decode.
 *
 * A struct gm_jpeg wraps one libjpeg-turbo decompressor (libjpeg API) with its own
 * error manager: a fatal libjpeg error returns -errno with a message kept in the
 * handle, never exit(). Warnings are counted apart; the few that mean "pixels were
 * lost" (premature end of file or data segment, bad Huffman code) are treated as
 * errors so that a truncated file is rejected rather than padded with grey.
 *
 * Use: gm_jpeg_open() reads the header from memory and checks the pixel limit
 * before anything sized by the image is allocated; then ONE of gm_jpeg_decode_region()
 * / gm_jpeg_decode_crop() / gm_jpeg_decode_full() decodes pixels, or gm_jpeg_abort()
 * drops the image. The region decode uses DCT scaling (scale_num/8, 1..8), decodes
 * only the columns of the window (jpeg_crop_scanline), skips the rows above it
 * (jpeg_skip_scanlines) and stops after its last row without reading the rest;
 * in a file with restart markers it decodes only the restart segments covering the
 * window (plus one MCU), with the same pixels (gm_jpeg_spliced).
 * Output is always 8-bit RGB: grayscale is expanded, CMYK/YCCK is converted here.
 *
 * Pixel memory belongs to the handle, grows only when a larger window is needed
 * and is reused for every image. libjpeg's own per-image working memory is
 * allocated and freed by libjpeg itself (its memory manager; not replaceable
 * through the libjpeg API).
 *
 * Not thread-safe per handle: one handle per worker thread/process.
 */
#ifndef GOLDMINER_JPEG_H
#define GOLDMINER_JPEG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Default decompression-bomb limit (width * height). */
#define GM_JPEG_DEFAULT_MAX_PIXELS 64000000ull
/* The largest limit accepted (past any JPEG's 65535^2): larger is an error, as a
 * negative number cast to uint64_t would be. */
#define GM_JPEG_MAX_MAX_PIXELS 1000000000000ull

struct gm_jpeg;

/* What gm_jpeg_open() learned from the header. */
struct gm_jpeg_info {
	uint32_t width, height; /* full image size in pixels */
	uint32_t components;	/* 1 gray, 3 YCbCr/RGB, 4 CMYK/YCCK */
	bool progressive;
	bool cmyk; /* CMYK or YCCK (converted to RGB by the decoder) */
};

/*
 * A decoded window: RGB, 3 bytes per pixel. pixels points at the window's top-left
 * pixel; rows are `stride` bytes apart. Owned by the handle; valid until the next
 * gm_jpeg_open() / gm_jpeg_destroy() on it.
 */
struct gm_jpeg_image {
	const uint8_t *pixels;
	size_t stride;
	uint32_t x, y;			      /* window's top-left in the scaled image */
	uint32_t width, height;		      /* window size */
	uint32_t scale_num;		      /* DCT scale scale_num/8 */
	uint32_t scaled_width, scaled_height; /* whole image at that scale */
};

/*
 * Create a decoder. max_pixels: width*height limit (0 means the default 64 Mpx;
 * at most GM_JPEG_MAX_MAX_PIXELS). Returns 0, -EINVAL (max_pixels over that) or
 * -ENOMEM. *out is set on success only.
 */
int gm_jpeg_create(struct gm_jpeg **out, uint64_t max_pixels);

/* Destroy; NULL is a no-op. */
void gm_jpeg_destroy(struct gm_jpeg *j);

/*
 * Read the header of the JPEG in data[0..len). The bytes are NOT copied: they must
 * stay valid until the decode (or gm_jpeg_abort()) that follows. Any image still
 * open on the handle is dropped first. info may be NULL.
 * Returns 0; -ENODATA (len == 0); -EBADMSG (not a JPEG, corrupt or truncated
 * header); -E2BIG (width*height over the limit: nothing sized by the image has been
 * allocated yet); -ENOMEM. On error no image is open and gm_jpeg_errmsg() says why.
 */
int gm_jpeg_open(struct gm_jpeg *j, const void *data, size_t len, struct gm_jpeg_info *info);

/*
 * Largest DCT reduction for a crop: the smallest n in {1, 2, 4, 8} such that
 * crop_w*n/8 >= min_w and crop_h*n/8 >= min_h (8 when even full scale is smaller,
 * i.e. the crop will be upsampled). Pure function.
 *
 * Why only 1/8, 1/4, 1/2 and 1: libjpeg-turbo 2.1 has SIMD inverse DCTs for those
 * sizes only; 3/8, 5/8, 6/8 and 7/8 run plain-C IDCTs (and 4:2:0 chroma at twice
 * that size, e.g. 12x12, 14x14). Measured on the real-photo set (500x375 q90), a
 * crop decoded at 5/8..7/8 took ~2.4x as long as the same crop at 8/8, so the
 * smaller intermediate is never worth it. gm_jpeg_decode_region() still accepts
 * any n in 1..8.
 */
uint32_t gm_jpeg_pick_scale(double crop_w, double crop_h, uint32_t min_w, uint32_t min_h);

/* Size of the whole image at DCT scale n/8 (libjpeg's rounding: ceil(dim*n/8)). */
uint32_t gm_jpeg_scaled_dim(uint32_t dim, uint32_t scale_num);

/*
 * Decode the window [x, x+w) x [y, y+h) of the image scaled by scale_num/8
 * (coordinates in the scaled image; the window must lie inside it, w, h > 0).
 * Only the rows and (iMCU-aligned) columns covering the window are decoded; the
 * rest of the file is not read. Closes the image (success or not).
 * Returns 0 (*img filled); -EINVAL (no image open, bad scale or window);
 * -EBADMSG (corrupt or truncated data inside the needed rows); -ENOMEM.
 */
int gm_jpeg_decode_region(struct gm_jpeg *j, uint32_t scale_num, uint32_t x, uint32_t y, uint32_t w,
			  uint32_t h, struct gm_jpeg_image *img);

/*
 * Decode the crop (x, y, w, h), given in FULL-image pixels, at the largest DCT
 * reduction that keeps it at least min_w x min_h (gm_jpeg_pick_scale). The window
 * decoded is the crop mapped into the scaled image, rounded outwards. Same returns
 * as gm_jpeg_decode_region(); -EINVAL if the crop is empty or outside the image.
 */
int gm_jpeg_decode_crop(struct gm_jpeg *j, uint32_t x, uint32_t y, uint32_t w, uint32_t h,
			uint32_t min_w, uint32_t min_h, struct gm_jpeg_image *img);

struct gm_coef_slot;

/*
 * Coefficient output (coef.h): instead of decoding the window as
 * gm_jpeg_decode_region would (same arguments; scale 1, 2, 4 or 8), write into
 * the slot s (cap bytes) the image part of a COEFS slot: its size, sampling,
 * quantisation tables and the quantised coefficients of the MCUs the window's
 * pixels depend on, sparse, and s->bytes. The Huffman decode is goldminer's own;
 * rows below the window are not read. Closes the image (success or not).
 * Returns 0; -ENOTSUP (a file coef.h cannot carry: progressive, arithmetic-coded,
 * CMYK, an unusual sampling, or libjpeg's decoder in use: decode its pixels);
 * -ENOSPC (the coefficients need more than cap); gm_jpeg_decode_region's errors.
 */
int gm_jpeg_decode_coefs(struct gm_jpeg *j, uint32_t scale_num, uint32_t x, uint32_t y, uint32_t w,
			 uint32_t h, struct gm_coef_slot *s, size_t cap);

/*
 * The bytes gm_jpeg_decode_coefs would likely need for a w x h window at scale
 * scale_num/8 of the open file, before any of its entropy data is decoded: the
 * window's share of the image's area times the file's entropy-coded bytes, times
 * GM_JPEG_COEF_GUESS (a window's slot bytes per entropy-coded byte of its share,
 * over 300 of the photo set's train windows: 2.35 to 4.46 for nine in ten, the
 * median 3.18, a quarter under 2.9). 0 when the file is not open whole (ranged)
 * or its scan is not found.
 */
#define GM_JPEG_COEF_GUESS 2.9
uint64_t gm_jpeg_coef_guess(const struct gm_jpeg *j, uint32_t scale_num, uint32_t w, uint32_t h);

/* Decode the whole image at scale_num/8 (8 = full size). Returns as above. */
int gm_jpeg_decode_full(struct gm_jpeg *j, uint32_t scale_num, struct gm_jpeg_image *img);

/*
 * Whether the last decode read only the restart segments its window needs (a file
 * with restart markers, see gm_jpeg_restart_transcode; the pixels are the same).
 * GM_NO_SPLICE=1 in the environment at gm_jpeg_create turns this off.
 */
bool gm_jpeg_spliced(const struct gm_jpeg *j);

/*
 * Which Huffman decoder reads the entropy data: goldminer's (core/huff.c, the
 * default: same coefficients, faster) or libjpeg's own (on = false; also
 * GM_LIBJPEG_HUFFMAN=1 in the environment at gm_jpeg_create). Benchmarks measure
 * the libjpeg-turbo reference with libjpeg's. gm_jpeg_own_huffman() tells whether
 * the last decode used goldminer's (a progressive, arithmetic-coded or multi-scan
 * file always takes libjpeg's; so does every file when the build found a libjpeg
 * other than the one goldminer's decoder was written for, and said so, or when
 * the libjpeg loaded at run time is not the one the build compiled against).
 */
void gm_jpeg_set_own_huffman(struct gm_jpeg *j, bool on);
bool gm_jpeg_own_huffman(const struct gm_jpeg *j);

/* Drop the open image without decoding it (no-op if none). */
void gm_jpeg_abort(struct gm_jpeg *j);

/* Message of the last error ("" if none); it starts with the function name. */
const char *gm_jpeg_errmsg(const struct gm_jpeg *j);

/*
 * Warnings (non-fatal libjpeg messages, e.g. extraneous bytes before a marker)
 * seen since the last gm_jpeg_open(), and the text of the last one ("" if none).
 */
uint32_t gm_jpeg_warnings(const struct gm_jpeg *j);
const char *gm_jpeg_warnmsg(const struct gm_jpeg *j);

/* Largest restart interval in MCUs (the DRI field is 16 bits). */
#define GM_JPEG_MAX_RESTART 65535u

/*
 * Losslessly rewrite the JPEG in[0..len) with a restart marker every `interval`
 * MCUs (1..GM_JPEG_MAX_RESTART), as `jpegtran -restart N -optimize` does: the DCT
 * coefficients, quantisation tables and sampling are copied untouched
 * (jpeg_read_coefficients, jpeg_copy_critical_parameters, jpeg_write_coefficients),
 * so a decoder that reconstructs pixels from the coefficients alone gives the same
 * pixels. The output is a sequential Huffman-coded file with optimal tables
 * (progressive or arithmetic-coded input becomes baseline, much cheaper to
 * decode); APPn and COM markers are copied (JFIF and Adobe ones are written anew
 * by libjpeg). Does not check the pixels: a caller that must be sure decodes both
 * (gm_pack does), since libjpeg smooths the blocks of a progressive file whose
 * scans stop short of full precision, and CMYK without an Adobe marker gains one.
 * max_pixels: the width*height limit, as gm_jpeg_create's (0: the default).
 * On success *out (malloc'ed, the caller frees it) holds *out_len bytes.
 * Returns 0; -EINVAL (interval 0 or too large, no data); -EBADMSG (corrupt or not
 * a JPEG); -E2BIG (over the pixel limit); -ENOMEM; with a message in err.
 * Thread-safe (no shared state).
 */
int gm_jpeg_restart_transcode(const void *in, size_t len, uint32_t interval, uint64_t max_pixels,
			      uint8_t **out, size_t *out_len, char *err, size_t errlen);

/*
 * The restart interval to give the JPEG in[0..len) for at most `interval` MCUs:
 * the largest divisor of its MCUs per row that is <= interval, so that every row
 * holds whole segments and gm_jpeg_decode_region can leave out columns as well as
 * rows (with an interval that does not divide a row it can leave out rows only:
 * measured on the photo set, that decodes no faster than the original file).
 * interval itself when the header does not read. Uses j (an open image is dropped).
 */
uint32_t gm_jpeg_fit_restart(struct gm_jpeg *j, const void *in, size_t len, uint32_t interval);

/*
 * Ranged reads (a member of a shard read in part): gm_jpeg_add_row_index() writes
 * into a restart-marked file (its interval dividing an MCU row, as pack --restart
 * makes them) an APP15 segment near the start holding a copy of the tables and the
 * file offset of each MCU row. A reader then reads a prefix of the file,
 * gm_jpeg_open_ranged() on it, chooses its window, asks gm_jpeg_region_bytes()
 * which bytes that window needs, reads them, hands them over with
 * gm_jpeg_set_bytes() and calls gm_jpeg_decode_region() as usual: the same pixels
 * as from the whole file (the same restart segments are spliced), but only the MCU
 * rows of the window (plus one MCU) are read. The file stays a valid JPEG (decoders
 * skip APP15); its pixels do not change. The index is checked against the file
 * (jpeg.c): its header copy against the file's own header, its offsets against
 * the file's size, the rows a window reads against their restart markers; one
 * that does not match is -ESTALE: decode the whole file with gm_jpeg_open.
 */

/*
 * The file in[0..len) with the row index added (*out malloc'ed, *out_len bytes;
 * the caller frees it). Uses j (an open image is dropped). 0; -ENOENT when the
 * file does not qualify (no restart interval, one that does not divide an MCU
 * row, progressive, or an index over 64 KB); gm_jpeg_open's errors.
 */
int gm_jpeg_add_row_index(struct gm_jpeg *j, const void *in, size_t len, uint8_t **out,
			  size_t *out_len);

/*
 * Open a file from its first plen bytes (file_len in all) through its row index,
 * as gm_jpeg_open() does from the whole file. The prefix must stay valid until the
 * decode. 0; -ENOENT (no index in the prefix, or not all of it and of the file's
 * own header: read the whole file and use gm_jpeg_open, or a longer prefix,
 * gm_jpeg_index_bytes); -ESTALE (an index that does not match the file: malformed,
 * offsets that do not rise or leave the file, a header copy unlike the file's own
 * header; use gm_jpeg_open); gm_jpeg_open's other errors.
 */
int gm_jpeg_open_ranged(struct gm_jpeg *j, const void *prefix, size_t plen, uint64_t file_len,
			struct gm_jpeg_info *info);

/*
 * How many bytes of the file a prefix must hold for gm_jpeg_open_ranged: the end
 * of the row index whose start prefix[0..plen) holds, or, when it holds all of it,
 * the first entropy byte its row 0 names (the file's own header, which the copy is
 * checked against, ends there); 0 when it holds no index. Pure function.
 */
size_t gm_jpeg_index_bytes(const void *prefix, size_t plen);

/*
 * After gm_jpeg_open_ranged: the byte range [*off, *off + *len) of the file that
 * the decode of this window (as gm_jpeg_decode_region's arguments) needs: its MCU
 * rows, from the restart marker before the first (which the decode checks). 0, or
 * -EINVAL (no ranged open, a bad window).
 */
int gm_jpeg_region_bytes(struct gm_jpeg *j, uint32_t scale_num, uint32_t x, uint32_t y, uint32_t w,
			 uint32_t h, uint64_t *off, uint64_t *len);

/* After gm_jpeg_open_ranged: the file's bytes [off, off + len), valid until the
 * decode (the caller's memory). A decode whose rows they do not hold fails with
 * -EBADMSG; one whose rows are not where the index says (their restart markers),
 * with -ESTALE. */
void gm_jpeg_set_bytes(struct gm_jpeg *j, const void *bytes, uint64_t off, size_t len);

#endif
