/*
 * coef.h - coefficient output: the slot a worker writes when the decode's second
 * half (dequantise, IDCT, upsampling, colour conversion) and the resize run
 * elsewhere (the GPU decode), and the host path that finishes such a slot.
 *
 * A worker in coefficient mode (gm_aug_coef_sample, aug.h) reads the header,
 * draws the sample's crop, flip and colour jitter exactly as gm_aug_sample does,
 * and Huffman-decodes only the MCUs the crop window needs (plus the neighbour
 * MCU where fancy chroma upsampling reaches across an MCU edge, the rule the
 * restart splice uses: jpeg.c). It writes them still quantised and sparse.
 * A file the coefficient form cannot carry (progressive, arithmetic-coded, CMYK,
 * sampling other than 1x1, 2x1, 1x2 or 2x2 against the luma, a file whose entropy
 * decode is libjpeg's own), or whose coefficients do not fit the slot, is decoded
 * on the CPU as today and the slot carries the finished sample (kind PIXELS): a
 * consumer handles both kinds, and the output bytes are the same either way.
 *
 * Slot layout, version GM_COEF_VERSION (all integers little-endian, as the host):
 *
 *   struct gm_coef_slot    the header below (fixed size, GM_COEF_HDR_BYTES)
 *   kind PIXELS:           gm_aug_out_bytes() bytes of the finished sample
 *   kind COEFS, for each component c < ncomp, at the offsets comp[c] gives
 *   (from the slot's start):
 *     counts[nblocks]      uint8: the low 7 bits, each block's non-zero
 *                          coefficients (0..64); the top bit (GM_COEF_WIDE), the
 *                          block's entries are wide
 *     ent[nent]            uint16 (2-byte aligned): the blocks' coefficients, one
 *                          block after another in counts' order. A block's entry:
 *                          position | value << 6, the position 0..63 numbered in
 *                          natural (row-major) order and the quantised value
 *                          -512..511 as 10-bit two's complement; a wide block's
 *                          (one with a value outside that range: quantiser steps
 *                          of 1 or 2, quality about 95 and up) two entries: the
 *                          position, then the value as int16. Each position once
 *                          in a block, in no set order within it (the decode
 *                          writes zigzag order). nent: the counts' sum, a wide
 *                          block's twice.
 *   Version 1 carried a byte of position and an int16 value apiece (3 bytes, 2
 *   now): 9% of the photo set's train windows outgrew a uint8 sample's slot.
 *
 * Block order: the decode's. Block k of component c lies in MCU m = k / (mw * mh)
 * of the rectangle (raster order over its mcols MCU columns), at (b % mw, b / mw)
 * within it, b = k % (mw * mh): component block column bx0 + (m % mcols) * mw +
 * b % mw, row by0 + (m / mcols) * mh + b / mw. A block at or past the component's
 * blocks across (bw_all) or down (bh_all) is padding of the MCU: carried, never
 * shown. Pixels come out as libjpeg-turbo 2.1 decodes the whole image at
 * scale/8 (islow IDCT and its reduced 4x4, 2x2, 1x1 forms, fancy upsampling, the
 * fixed-point YCbCr->RGB): coef_math.h holds that arithmetic, once, for the host
 * path here and the CUDA kernels (core/coef_kernels.cu).
 *
 * Not here: the resize, flip, jitter and layout after the window is rebuilt
 * (aug.c's, run by gm_aug_coef_finish on the host; core/finish_math.h's, run by
 * the CUDA kernels and by gm_aug_coef_finish_shared).
 */
#ifndef GOLDMINER_COEF_H
#define GOLDMINER_COEF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" { /* the CUDA kernels' host code (coef_kernels.cu) includes this */
#endif

#define GM_COEF_MAGIC	  0x46434d47u /* "GMCF" */
#define GM_COEF_VERSION	  2u
#define GM_COEF_MAX_COMPS 3u
#define GM_COEF_WIDE	  0x80u /* a count's flag: the block's entries are wide */

enum gm_coef_kind {
	GM_COEF_KIND_COEFS = 0,	 /* sparse coefficients follow */
	GM_COEF_KIND_PIXELS = 1, /* the finished sample follows (CPU decode) */
};

enum gm_coef_color {
	GM_COEF_GRAY = 0, /* one component, replicated to R, G, B */
	GM_COEF_YCC = 1,  /* YCbCr -> RGB */
	GM_COEF_RGB = 2,  /* three components stored as R, G, B */
};

/* One component of a COEFS slot (52 bytes). */
struct gm_coef_comp {
	uint8_t ssize;	/* its IDCT size: 1, 2, 4 or 8 samples a block side */
	uint8_t hr, vr; /* output pixels per component sample across, down: 1 or 2 */
	uint8_t fancy;	/* 1: triangle (fancy) upsampling; 0: replication */
	uint8_t mw, mh; /* its blocks across and down an MCU */
	uint8_t qt;	/* which of the slot's quantisation tables */
	uint8_t pad;
	uint32_t dw, dh;     /* its size in samples at ssize (libjpeg's downsampled_*) */
	uint32_t bw_all;     /* its blocks across the image (past: MCU padding) */
	uint32_t bh_all;     /* its blocks down the image */
	uint32_t bx0, by0;   /* block column and row of the rectangle's first MCU */
	uint32_t nblocks;    /* blocks carried */
	uint32_t nnz;	     /* non-zero coefficients carried */
	uint32_t nent;	     /* their uint16 entries (nnz, a wide block's twice) */
	uint32_t off_counts; /* from the slot's start */
	uint32_t off_ent;
};

/* The slot header. */
struct gm_coef_slot {
	uint32_t magic;	   /* GM_COEF_MAGIC */
	uint16_t version;  /* GM_COEF_VERSION */
	uint16_t kind;	   /* enum gm_coef_kind */
	uint32_t bytes;	   /* bytes of the slot in use, header included */
	uint32_t width;	   /* the image, full size */
	uint32_t height;   /* (train/eval parameters below are from these) */
	uint8_t ncomp;	   /* 1 or 3 */
	uint8_t scale;	   /* DCT scale scale/8: 1, 2, 4 or 8 */
	uint8_t color;	   /* enum gm_coef_color */
	uint8_t flip;	   /* mirrored left-right */
	uint32_t rx, ry;   /* the window rebuilt, in the image at scale/8 */
	uint32_t rw, rh;   /* (aug.c's decode region) */
	uint32_t mcols;	   /* MCU columns of the rectangle carried */
	uint32_t mrows;	   /* MCU rows of it */
	double box[4];	   /* train: the crop x0, y0, x1, y1 in scaled pixels */
	uint64_t key[3];   /* seed, epoch, sample id */
	uint32_t jitter_n; /* colour jitter: ops drawn (0: none) */
	uint8_t jitter_order[4];
	float jitter_factor[4];
	uint32_t pad;
	struct gm_coef_comp comp[GM_COEF_MAX_COMPS];
	uint16_t q[GM_COEF_MAX_COMPS][64]; /* dequantisation multipliers, natural order */
};

#define GM_COEF_HDR_BYTES sizeof(struct gm_coef_slot)

/* Bytes a slot needs to hold any sample of out_bytes: the header and the finished
 * sample (the fallback's size; coefficients that do not fit take it). */
static inline size_t gm_coef_slot_bytes(size_t out_bytes)
{
	return GM_COEF_HDR_BYTES + ((out_bytes + 15) & ~(size_t)15);
}

/*
 * Check a COEFS or PIXELS slot of len bytes read from shared memory before using
 * it: magic, version, kind, bytes within len, the scale and sampling in range,
 * every component's arrays inside the slot and its blocks adding up. out_bytes:
 * the sample size a PIXELS slot must carry. 0 or -EBADMSG with why in err.
 */
int gm_coef_check(const struct gm_coef_slot *s, size_t len, size_t out_bytes, char *err,
		  size_t errlen);

/*
 * Rebuild the window (rx, ry, rw, rh) of a checked COEFS slot as RGB, rw * 3 bytes
 * a row, into rgb: the pixels libjpeg-turbo's decode of the whole image at
 * scale/8 has there. planes: scratch of gm_coef_planes_bytes(s) bytes (the
 * components' samples). 0, or -EBADMSG (the slot's blocks do not cover the window).
 */
int gm_coef_pixels(const struct gm_coef_slot *s, uint8_t *planes, uint8_t *rgb);

/* Bytes of the component planes gm_coef_pixels uses for slot s. */
size_t gm_coef_planes_bytes(const struct gm_coef_slot *s);

#ifdef __cplusplus
}
#endif

#endif
