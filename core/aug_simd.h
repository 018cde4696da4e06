/*
 * aug_simd.h - internal to aug.c and aug_simd.c: the resize axis, the signatures
 * of the row kernels and of the per-image table builders, their portable (scalar)
 * versions, and the x86 kernel picker.
 *
 * The scalar kernels are the reference: every SIMD kernel in aug_simd.c computes
 * the same integers (resize) or the same float bits (layout), and falls back on
 * them for short or ragged rows. The ISA paths, each chosen by cpuid at handle
 * creation (gm_aug_simd_pick, below; aug_simd.c's header has the full list):
 *   - SSE2 (every x86-64) and SSSE3: the vertical and horizontal passes, a pixel
 *     a step;
 *   - AVX2, and F16C for float16: the vertical pass 32 bytes a step, the
 *     horizontal pass two rows at once, the float and float16 layouts;
 *   - AVX-512 F+BW+VBMI (+VL for the table builders, +VNNI for the vertical
 *     pass): the horizontal pass as a byte gather (struct hx_table, and in
 *     16-bit lanes struct hw_table, with vw_split's weights), fused with the
 *     float layout (pxrow_fn), non-temporal output stores, and the per-image
 *     coefficient and gather tables built 8 outputs or a group at a time;
 *   - anything else (other architectures, GM_NO_SIMD=1): the scalar kernels.
 * The scalar kernels are defined here, static, so that both files compile them
 * as before the split: vrow_c may be inlined into the SSE2 tail, and
 * frow_c/hfrow_c are noinline because the AVX2 layout kernels called them (a tail
 * call) when they shared a file with the dispatch; inlined, the hot loops would be
 * register-allocated differently. Both SIMD files then compile to the same code.
 *
 * Not a public header: only core/aug*.c and tests/test_aug.c include it. It
 * declares nothing aug.c defines: the test hooks into aug.c are in aug_test.h.
 */
#ifndef GOLDMINER_AUG_SIMD_H
#define GOLDMINER_AUG_SIMD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "goldminer/aug.h"

#define COEF_BITS 14
#define COEF_ONE  (1 << COEF_BITS)

/*
 * One axis of the resize: for output i, taps src[min[i] .. min[i]+taps) (pixels;
 * for the horizontal axis gm_aug_sample turns min into byte offsets).
 */
struct axis {
	int32_t *min;
	int16_t *coef;		/* out * taps */
	double *w;		/* scratch: one output's float weights (2*ceil(support)+1) */
	int32_t *first, *count; /* scratch: first nonzero tap and span per output */
	size_t min_cap, coef_cap, w_cap, first_cap, count_cap;
	uint32_t taps;
};

typedef void vrow_fn(uint8_t *restrict d, const uint8_t *restrict s, size_t stride, size_t n,
		     const int16_t *c, uint32_t taps);
/*
 * The vertical pass of a row whose weights vw_split accepted, given its split
 * (wh, wl); c and taps as vrow_fn's, for rows under one vector.
 */
typedef void vwrow_fn(uint8_t *restrict d, const uint8_t *restrict s, size_t stride, size_t n,
		      const int16_t *c, uint32_t taps, uint32_t wh, uint32_t wl);
typedef void frow_fn(float *restrict p0, float *restrict p1, float *restrict p2,
		     const uint8_t *restrict rgb, uint32_t n, const float *scale,
		     const float *bias);
typedef void hfrow_fn(uint16_t *restrict p0, uint16_t *restrict p1, uint16_t *restrict p2,
		      const uint8_t *restrict rgb, uint32_t n, const float *scale,
		      const float *bias);
typedef void hrow_fn(uint8_t *restrict dst, const uint8_t *restrict src, const struct axis *ax,
		     const int16_t *hv, uint32_t out_w);
typedef void hrow2_fn(uint8_t *restrict dst0, uint8_t *restrict dst1, const uint8_t *src0,
		      const uint8_t *src1, const struct axis *ax, const int16_t *hv,
		      uint32_t out_w);

/*
 * The horizontal pass as a byte gather, for the kernels that make several output
 * pixels per vector (hxrow_fn). The bytes of an output row (RGB, 3 per pixel) go in
 * groups of HX_GROUP, one 32-bit lane each; a group reads the source row from
 * base[g] on, and for each pair of taps has HX_GROUP lanes of 4 index bytes (tap
 * 2p's source byte in byte 0, tap 2p+1's in byte 2, relative to base[g], both <
 * HX_WINDOW; bytes 1 and 3 unused) then HX_GROUP lanes of two int16 coefficients
 * (tap 2p, tap 2p+1; 0 past the last tap). hx_build (aug.c) lays it out once per
 * image from the axis; every row of the image uses it. Lanes past the row's end
 * repeat its last byte and are not stored.
 */
#define HX_GROUP  16
#define HX_WINDOW 128 /* source bytes one group may reach (two 64-byte vectors) */

struct hx_table {
	uint32_t groups, pairs;
	uint32_t nval;	     /* bytes of an output row: 3 * out_w */
	bool narrow;	     /* every index < 64: one source vector per group */
	const int32_t *base; /* groups */
	const uint8_t *blk;  /* groups * pairs * 8 * HX_GROUP: indices, then coefficients */
};

typedef void hxrow_fn(uint8_t *restrict dst0, uint8_t *restrict dst1, const uint8_t *src0,
		      const uint8_t *src1, const struct hx_table *t);

/*
 * The horizontal pass in 16-bit lanes (hwrow_fn), for images whose horizontal taps
 * are at most 4 and whose every output pixel's weights vw_split accepts: a group
 * is HW_GROUP consecutive bytes of an output row, one 16-bit lane each; it reads
 * the source row from base[g] on, and for each pair of taps p has 64 index bytes
 * (lane l: tap 2p's source byte in byte 2l, tap 2p+1's in byte 2l+1, relative to
 * base[g]; < 64 when narrow, else < HX_WINDOW), then 64 bytes of wh (lane l: the
 * two taps' wh, vw_split's bytes) and 64 of wl. Two groups make 64 output bytes;
 * groups is even. Lanes past the row's end repeat its last byte and are not
 * stored. hw_build (aug.c) lays it out once per image.
 */
#define HW_GROUP 32

struct hw_table {
	uint32_t groups, pairs;
	uint32_t nval; /* bytes of an output row: 3 * out_w */
	bool narrow;
	const int32_t *base;
	const uint8_t *blk; /* groups * pairs * 3 * 64 bytes */
};

typedef void hwrow_fn(uint8_t *restrict dst0, uint8_t *restrict dst1, const uint8_t *src0,
		      const uint8_t *src1, const struct hw_table *t);
/*
 * hwntrow: the same bytes by non-temporal stores, straight to the output, for rows
 * that start 32-byte aligned and whose nval is a multiple of 32 (uint8 at 224: 672
 * bytes a row). The caller fences (ntfence_fn) before the output is published.
 */

/*
 * The horizontal pass fused with the float layout (pxrow_fn, hpxrow_fn): the same
 * gather as hxrow_fn, through a PLANAR hx_table (px_build in aug.c). A group's
 * HX_GROUP lanes are HX_GROUP consecutive output pixels of one channel (groups =
 * 3 * ceil(out_w / HX_GROUP): channel 0's, then 1's, then 2's; nval = out_w;
 * base[g] includes the channel's byte), so its sums are 16 values of one plane:
 * (sum >> COEF_BITS) is hrow_c's byte. It is 0..255, so hrow_c's (uint8_t) cast
 * drops nothing: the weights sum to COEF_ONE and are >= 0 (axis_build rounds each
 * and gives the remainder to the largest; with the at most 43 taps a 128-byte
 * window holds, that one is >= COEF_ONE / 43 = 381, more than the 21 units the
 * roundings can take from it), and the rounding constant is under one unit. And
 * (float)byte * scale[c] + bias[c], a multiply then an add as frow_c, goes
 * straight to the plane (float16: rounded to nearest even, as hfrow_c). Lanes of
 * a ragged last group repeat the row's last pixel and are not stored.
 *
 * One output row: src (the vertical pass's row) -> dst (plane 0's row; planes
 * `plane` values apart).
 */
typedef void pxrow_fn(float *dst, size_t plane, const uint8_t *src, const struct hx_table *t,
		      const float *scale, const float *bias);
typedef void hpxrow_fn(uint16_t *dst, size_t plane, const uint8_t *src, const struct hx_table *t,
		       const float *scale, const float *bias);

/*
 * axis_build's second pass (aug.c) for outputs [0, out - out % 8) of an axis whose
 * first[] and count[] are set and whose taps are at most AXISW_MAX_TAPS: the
 * weights of output i are 1 - |(first + k - center + 0.5) * inv|, center = b0 +
 * (i + 0.5) * scale, normalised to COEF_ONE in fixed point, the largest taking the
 * rounding rest; coef and min written as axis_build writes them (mirror: output i
 * at out - 1 - i). The same double operations in the same order, 8 outputs a
 * vector, so the same integers.
 */
#define AXISW_MAX_TAPS 8
typedef void axisw_fn(struct axis *ax, double b0, double scale, double inv, uint32_t in,
		      uint32_t out, bool mirror);
/*
 * axis_build's first pass for outputs [0, out - out % 8): first[] and count[] of
 * the span of nonzero weights of each output, with axis_build's double operations;
 * returns the largest count (at least 1).
 */
typedef uint32_t axiss_fn(struct axis *ax, double b0, double scale, double fscale, uint32_t kmax,
			  uint32_t in, uint32_t out);

/*
 * Copy n bytes to dst with non-temporal stores where the lines are whole (plain
 * ones for a partial first and last line): the output rows go to memory without
 * being read first. The caller fences (ntfence_fn) before the output is published.
 */
typedef void ntcopy_fn(uint8_t *restrict dst, const uint8_t *restrict src, size_t n);
typedef void ntfence_fn(void);

/*
 * vw_split for the n rows (taps each, taps <= 4) of coef: wh[i], wl[i] as vw_split
 * writes them, wh[i] = VW_NONE where it returns false. 8 rows a step.
 */
#define VW_NONE UINT32_MAX /* vw_split's bytes are <= 127: no split has it */
typedef void vws_fn(const int16_t *coef, uint32_t taps, uint32_t n, uint32_t *wh, uint32_t *wl);

/*
 * hw_build's words for one group that lies inside the row (struct hw_table: index,
 * wh and wl words for pairs pairs): its first byte is channel c0 of pixel 0 of the
 * arrays min (byte offsets), wh, wl (splits) and adj (hw_build's), of which n
 * pixels exist (12 at most are read); b: the group's base.
 */
typedef void hwg_fn(uint16_t *q, const int32_t *min, const uint32_t *wh, const uint32_t *wl,
		    const int16_t *adj, uint32_t n, uint32_t c0, int32_t b, uint32_t pairs);

/*
 * hx_build's table (planar: px_build's) for out_w pixels of the byte-offset axis ax
 * whose taps are at most HXB_MAX_TAPS: the same header, base[] and blk bytes, and
 * the same false (some group's window over HX_WINDOW bytes).
 */
#define HXB_MAX_TAPS 8
typedef bool hxb_fn(struct hx_table *t, int32_t *base, uint8_t *blk, const struct axis *ax,
		    uint32_t out_w, bool planar);

/* The kernels one handle uses, chosen once at creation (aug.c's pick_kernels). */
struct aug_kernels {
	vrow_fn *vrow;
	vwrow_fn *vwrow;   /* rows vw_split accepts, in 16-bit lanes, or NULL */
	vws_fn *vws;	   /* vw_split over many rows, or NULL */
	hwg_fn *hwg;	   /* hw_build's group, or NULL */
	ntcopy_fn *ntcopy; /* uint8 output rows by non-temporal stores, or NULL */
	ntfence_fn *ntfence;
	hrow_fn *hrow;	   /* any tap count */
	hrow2_fn *hrow2;   /* two rows, 1 to 6 taps (hv built with dup), or NULL */
	hxrow_fn *hxrow;   /* two rows, several pixels a vector (hx_table), or NULL */
	hwrow_fn *hwrow;   /* two rows, 16-bit lanes (hw_table), or NULL */
	hwrow_fn *hwntrow; /* hwrow by non-temporal stores (hwntrow_fn), or NULL */
	axiss_fn *axiss;   /* axis_build's spans, 8 outputs a step, or NULL */
	axisw_fn *axisw;   /* axis_build's weights, 8 outputs a step, or NULL */
	hxb_fn *hxb;	   /* hx_build / px_build, a group a step, or NULL */
	pxrow_fn *pxrow;   /* hxrow + frow fused (planar hx_table), or NULL */
	hpxrow_fn *hpxrow; /* hxrow + hfrow fused, or NULL */
	frow_fn *frow;
	hfrow_fn *hfrow; /* float16 output */
};

/* Instruction-set levels, for GM_SIMD_MAX (tests run each level's kernels). */
enum aug_simd_level { AUG_SIMD_NONE, AUG_SIMD_SSE, AUG_SIMD_AVX2, AUG_SIMD_AVX512, AUG_SIMD_VNNI };

/*
 * Replace the kernels of k with the fastest ones this CPU runs (cpuid), up to
 * level max: SSE2 and SSSE3 (AUG_SIMD_SSE); AVX2 and F16C (AUG_SIMD_AVX2);
 * AVX-512 F, BW and VBMI, with VL for the table builders (AUG_SIMD_AVX512);
 * AVX-512 VNNI (AUG_SIMD_VNNI). A kernel whose extension the CPU lacks keeps the
 * one below it. Does nothing on other architectures. aug.c calls it unless
 * GM_NO_SIMD=1; GM_SIMD_MAX sets max.
 */
__attribute__((visibility("hidden"))) void gm_aug_simd_pick(struct aug_kernels *k,
							    enum aug_simd_level max);

/* ---- the portable kernels -------------------------------------------------------- */

/*
 * Vertical pass, one output row: d[x] = sum_k s[k*stride + x] * c[k] over n bytes.
 * Scalar version (any CPU); the SIMD versions below compute the same integers.
 */
__attribute__((unused)) static void vrow_c(uint8_t *restrict d, const uint8_t *restrict s,
					   size_t stride, size_t n, const int16_t *c, uint32_t taps)
{
	for (size_t x = 0; x < n; x++) {
		int32_t acc = 1 << (COEF_BITS - 1);
		for (uint32_t k = 0; k < taps; k++)
			acc += s[k * stride + x] * c[k];
		d[x] = (uint8_t)(acc >> COEF_BITS);
	}
}

/*
 * Split a row's weights (taps <= 4 of them, >= 0, summing to COEF_ONE: what
 * axis_build makes) for the 16-bit kernels (vwrow_fn): w = 128 wh + wl with
 *   wh = (w >> 7) + e,  wl = (w & 127) - 128 e,  e in {0, 1},
 * e = 1 for the m largest remainders r = w & 127 (ties: the first), m = sum r / 128
 * (an integer: sum w is a multiple of 128). Then sum wl = 0 and sum wh = 128, and
 * the positive wl sum to the 4 - m smallest remainders (absent taps count as 0),
 * which is <= 128 since they average at most 128 m / 4; the negative ones sum to
 * minus that. A weight >= 127 * 128 ranks last (as if r were 0): with e it would
 * make wh = 128, and the others sum to <= 128 - r, so m <= 1 and another tap with
 * r > 0 takes the e, which keeps the positive wl <= 128. With pixels p in 0..255
 * as vpmaddubsw's unsigned bytes and wh, wl as its signed ones (wh <= 127 is
 * checked: it fails only for one tap of weight 1),
 *   H = sum wh p in [0, 255 * 128],  L = sum wl p in [-255 * 128, 255 * 128]:
 * no pair of taps saturates and neither sum overflows 16 bits. vrow_c's result is
 *   (2^13 + 128 H + L) >> 14 = (H + (L >> 7) + 64) >> 7
 * (2^13 + 128 H is a multiple of 128), and vpmulhrsw by 256 is the last step:
 * (256 x + 2^14) >> 15 = (x + 64) >> 7 for x in [-64, 32703], which holds since the
 * result is 0..255.
 * *wh, *wl: byte k is tap k's wh, wl (signed); false when the row does not qualify.
 */
static inline bool vw_split(const int16_t *c, uint32_t taps, uint32_t *wh, uint32_t *wl)
{
	int32_t w[4] = {0, 0, 0, 0}, r[4], sum = 0;
	if (taps > 4)
		return false;
	for (uint32_t k = 0; k < taps; k++)
		w[k] = c[k];
	for (uint32_t k = 0; k < 4; k++) {
		r[k] = w[k] & 127;
		sum += w[k];
	}
	int32_t m = (r[0] + r[1] + r[2] + r[3]) >> 7, key[4];
	for (int k = 0; k < 4; k++) /* unique: ties go to the first tap */
		key[k] = (w[k] >= 127 * 128 ? 0 : r[k]) * 4 + 3 - k;
	bool ok = sum == COEF_ONE && w[0] >= 0 && w[1] >= 0 && w[2] >= 0 && w[3] >= 0;
	uint32_t h = 0, l = 0;
	for (int k = 0; k < 4; k++) {
		int32_t above = 0; /* taps ranked before tap k */
		for (int j = 0; j < 4; j++)
			above += key[j] > key[k];
		int32_t e = above < m, hk = (w[k] >> 7) + e;
		ok = ok && hk <= 127;
		h |= (uint32_t)(uint8_t)hk << (8 * k);
		l |= (uint32_t)(uint8_t)(r[k] - 128 * e) << (8 * k);
	}
	*wh = h;
	*wl = l;
	return ok;
}

/*
 * Horizontal pass of one row: src (RGB) -> dst (out_w RGB pixels). Scalar. Here and
 * in the SIMD versions ax->min holds byte offsets into src (gm_aug_sample converts).
 */
__attribute__((unused)) static void hrow_c(uint8_t *restrict dst, const uint8_t *restrict src,
					   const struct axis *ax, const int16_t *hv, uint32_t out_w)
{
	uint32_t taps = ax->taps;
	(void)hv;
	for (uint32_t ox = 0; ox < out_w; ox++) {
		const int16_t *c = ax->coef + (size_t)ox * taps;
		const uint8_t *s = src + ax->min[ox];
		int32_t r = 1 << (COEF_BITS - 1), g = r, b = r;
		for (uint32_t k = 0; k < taps; k++) {
			r += s[3 * k] * c[k];
			g += s[3 * k + 1] * c[k];
			b += s[3 * k + 2] * c[k];
		}
		dst[3 * ox] = (uint8_t)(r >> COEF_BITS);
		dst[3 * ox + 1] = (uint8_t)(g >> COEF_BITS);
		dst[3 * ox + 2] = (uint8_t)(b >> COEF_BITS);
	}
}

/* Scalar twin of frow_avx2 (same float operations, so the same bits). */
__attribute__((unused, noinline)) static void frow_c(float *restrict p0, float *restrict p1,
						     float *restrict p2,
						     const uint8_t *restrict rgb, uint32_t n,
						     const float *scale, const float *bias)
{
	for (uint32_t x = 0; x < n; x++) {
		p0[x] = (float)rgb[3 * x] * scale[0] + bias[0];
		p1[x] = (float)rgb[3 * x + 1] * scale[1] + bias[1];
		p2[x] = (float)rgb[3 * x + 2] * scale[2] + bias[2];
	}
}

/* Scalar twin of hfrow_avx2. */
__attribute__((unused, noinline)) static void hfrow_c(uint16_t *restrict p0, uint16_t *restrict p1,
						      uint16_t *restrict p2,
						      const uint8_t *restrict rgb, uint32_t n,
						      const float *scale, const float *bias)
{
	for (uint32_t x = 0; x < n; x++) {
		p0[x] = gm_f32_to_f16((float)rgb[3 * x] * scale[0] + bias[0]);
		p1[x] = gm_f32_to_f16((float)rgb[3 * x + 1] * scale[1] + bias[1]);
		p2[x] = gm_f32_to_f16((float)rgb[3 * x + 2] * scale[2] + bias[2]);
	}
}

#endif
