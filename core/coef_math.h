/*
 * coef_math.h - the GPU decode's arithmetic, written once: dequantise + inverse
 * DCT, chroma upsampling and YCbCr->RGB, giving the bytes libjpeg-turbo 2.1
 * gives. A C compiler builds it into the host path (coef.c); nvcc builds the same
 * functions into the CUDA kernels (coef_kernels.cu). GM_CM is `static inline`
 * for C and `__host__ __device__` inline under nvcc.
 *
 * The arithmetic restated (libjpeg's own words, not its code):
 *   - the integer "islow" IDCT: a column pass then a row pass of the LL&M
 *     butterfly, 13-bit constants, 2 extra bits kept between the passes, each
 *     output rounded by adding half before the shift; the reduced 4x4 and 2x2
 *     forms read only the coefficients a 4- or 2-point output depends on (their
 *     own constants); 1x1 is the DC term / 8, rounded. Outputs are level-shifted
 *     by 128 and limited to 0..255; libjpeg-turbo's SIMD forms (what the CPU
 *     workers run) saturate where its C forms wrap an out-of-range value, and
 *     SIMD is what is matched (1x1 has no SIMD form: it wraps). A corrupt file's
 *     coefficients reach past what 16-bit lanes hold, and there the SIMD forms'
 *     lane widths show: each dequantised coefficient keeps the low 16 bits of its
 *     product, the sums in0 + in4, in0 - in4, in7 + in3 and in5 + in1 theirs, the
 *     32-bit sums theirs, and a pass-1 output is saturated to 16 bits (2x2: kept
 *     at 32 bits, only its odd columns saturated before pass 2). Where no
 *     coefficient below the first row is non-zero (4x4: row 4 aside), pass 1
 *     takes a shortcut: the DC row times 4 in 16 bits, wrapped, not saturated.
 *     All of it is restated here (gm_cm_w16 and the rest) so that the bytes are
 *     the CPU path's for every block a decode can give, not only a valid file's.
 *   - fancy upsampling: a 3:1 triangle between a sample and its nearer
 *     neighbour, the image's edge sample repeated; across (h2v1) rounded +1 on
 *     even and +2 on odd outputs, down (h1v2) +1 above and +2 below, both ways
 *     (h2v2) the vertical sum kept exact and +8 / +7 after the horizontal one.
 *     Without fancy upsampling (at scale 1/8, or a component 2 samples wide or
 *     less) each sample is repeated.
 *   - YCbCr->RGB: 16-bit fixed point, R = Y + 1.402 (Cr-128), B = Y + 1.772
 *     (Cb-128), G = Y - 0.34414 (Cb-128) - 0.71414 (Cr-128), each product
 *     rounded as libjpeg's tables round it, then limited to 0..255.
 *
 * The slot's coefficient entries are read here too (gm_cm_span, gm_cm_scatter),
 * once for both builds.
 *
 * Not here: the entropy decode (the workers', huff.c), the resize after it.
 */
#ifndef GM_CORE_COEF_MATH_H
#define GM_CORE_COEF_MATH_H

#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#define GM_CM __host__ __device__ __forceinline__ static
#else
#define GM_CM static inline
#endif

#define GM_CM_CONST_BITS 13
#define GM_CM_PASS1_BITS 2

/* x / 2^n rounded (half up), an arithmetic shift */
GM_CM int64_t gm_cm_descale(int64_t x, int n)
{
	return (x + ((int64_t)1 << (n - 1))) >> n;
}

/* An IDCT output (before the +128 level shift) as a sample, saturated */
GM_CM uint8_t gm_cm_sat(int64_t x)
{
	x += 128;
	return (uint8_t)(x < 0 ? 0 : x > 255 ? 255 : x);
}

/* The same as libjpeg's C tables limit it: the low 10 bits, as a signed value */
GM_CM uint8_t gm_cm_wrap(int64_t x)
{
	int64_t v = (int64_t)(((uint64_t)x & 1023u) ^ 512u) - 512 + 128;
	return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* What a 16-bit lane keeps of x (pmullw, paddw, psllw): its low 16 bits, signed */
GM_CM int32_t gm_cm_w16(int64_t x)
{
	return (int32_t)(((uint64_t)x & 0xFFFFu) ^ 0x8000u) - 0x8000;
}

/* What a 32-bit lane keeps of x (paddd): its low 32 bits, signed */
GM_CM int64_t gm_cm_w32(int64_t x)
{
	return (int64_t)(((uint64_t)x & 0xFFFFFFFFu) ^ 0x80000000u) - 0x80000000;
}

/* x saturated to 16 bits (packssdw) */
GM_CM int32_t gm_cm_s16(int64_t x)
{
	return (int32_t)(x < -32768 ? -32768 : x > 32767 ? 32767 : x);
}

/* x / 2^n rounded in a 32-bit lane: the sum and its rounding wrap, then the
 * arithmetic shift (paddd, psrad) */
GM_CM int64_t gm_cm_descale32(int64_t x, int n)
{
	return gm_cm_w32(x + ((int64_t)1 << (n - 1))) >> n;
}

/* Coefficient i of c dequantised as a 16-bit lane holds it (pmullw) */
GM_CM int32_t gm_cm_deq(const int16_t *c, const uint16_t *q, int i)
{
	return gm_cm_w16((int64_t)c[i] * q[i]);
}

/* Whether pass 1 takes the SIMD forms' shortcut: every coefficient of rows 1-7
 * zero (skip: a row the transform does not read, 4x4's row 4, left out) */
GM_CM int gm_cm_dc_rows(const int16_t *c, int skip)
{
	int any = 0;
	for (int i = 8; i < 64; i++)
		any |= (i >> 3) != skip && c[i];
	return !any;
}

/* The even part of an 8-point column or row: in0, in2, in4, in6 -> t[0..3]
 * (t10, t11, t12, t13 in the usual names), scaled by 2^13; in0 + in4 and
 * in0 - in4 in 16 bits, as the SIMD forms add them. */
GM_CM void gm_cm_even8(int64_t z0, int64_t z2, int64_t z4, int64_t z6, int64_t t[4])
{
	int64_t z1 = (z2 + z6) * 4433;
	int64_t tmp2 = z1 - z6 * 15137, tmp3 = z1 + z2 * 6270;
	int64_t tmp0 = (int64_t)gm_cm_w16(z0 + z4) * 8192;
	int64_t tmp1 = (int64_t)gm_cm_w16(z0 - z4) * 8192;
	t[0] = tmp0 + tmp3, t[1] = tmp1 + tmp2, t[2] = tmp1 - tmp2, t[3] = tmp0 - tmp3;
}

/* The odd part: in1, in3, in5, in7 -> o[0..3] (tmp0..tmp3 in the usual names);
 * z3 = in7 + in3 and z4 = in5 + in1 in 16 bits, as the SIMD forms add them
 * (z1 and z2 they never form: their products are taken apart) */
GM_CM void gm_cm_odd8(int64_t in1, int64_t in3, int64_t in5, int64_t in7, int64_t o[4])
{
	int64_t z1 = in7 + in1, z2 = in5 + in3;
	int64_t z3 = gm_cm_w16(in7 + in3), z4 = gm_cm_w16(in5 + in1);
	int64_t z5 = (z3 + z4) * 9633;
	z1 *= -7373, z2 *= -20995, z3 = z3 * -16069 + z5, z4 = z4 * -3196 + z5;
	o[0] = in7 * 2446 + z1 + z3;
	o[1] = in5 * 16819 + z2 + z4;
	o[2] = in3 * 25172 + z2 + z3;
	o[3] = in1 * 12299 + z1 + z4;
}

/* 8x8 islow: quantised coefficients c (natural order) times q -> 8 rows of 8
 * samples at out, stride bytes apart. */
GM_CM void gm_cm_idct8(const int16_t *c, const uint16_t *q, uint8_t *out, size_t stride)
{
	int32_t ws[64];
	int64_t e[4], o[4];
	int dc_only = gm_cm_dc_rows(c, -1);
	for (int x = 0; x < 8; x++) {
		int64_t d[8];
		for (int k = 0; k < 8; k++)
			d[k] = gm_cm_deq(c, q, 8 * k + x);
		if (dc_only) {
			for (int k = 0; k < 8; k++)
				ws[8 * k + x] = gm_cm_w16(d[0] * 4);
			continue;
		}
		gm_cm_even8(d[0], d[2], d[4], d[6], e);
		gm_cm_odd8(d[1], d[3], d[5], d[7], o);
		const int sh = GM_CM_CONST_BITS - GM_CM_PASS1_BITS;
		ws[x] = gm_cm_s16(gm_cm_descale32(e[0] + o[3], sh));
		ws[56 + x] = gm_cm_s16(gm_cm_descale32(e[0] - o[3], sh));
		ws[8 + x] = gm_cm_s16(gm_cm_descale32(e[1] + o[2], sh));
		ws[48 + x] = gm_cm_s16(gm_cm_descale32(e[1] - o[2], sh));
		ws[16 + x] = gm_cm_s16(gm_cm_descale32(e[2] + o[1], sh));
		ws[40 + x] = gm_cm_s16(gm_cm_descale32(e[2] - o[1], sh));
		ws[24 + x] = gm_cm_s16(gm_cm_descale32(e[3] + o[0], sh));
		ws[32 + x] = gm_cm_s16(gm_cm_descale32(e[3] - o[0], sh));
	}
	for (int y = 0; y < 8; y++) {
		const int32_t *w = ws + 8 * y;
		uint8_t *r = out + (size_t)y * stride;
		const int sh = GM_CM_CONST_BITS + GM_CM_PASS1_BITS + 3;
		gm_cm_even8(w[0], w[2], w[4], w[6], e);
		gm_cm_odd8(w[1], w[3], w[5], w[7], o);
		r[0] = gm_cm_sat(gm_cm_descale32(e[0] + o[3], sh));
		r[7] = gm_cm_sat(gm_cm_descale32(e[0] - o[3], sh));
		r[1] = gm_cm_sat(gm_cm_descale32(e[1] + o[2], sh));
		r[6] = gm_cm_sat(gm_cm_descale32(e[1] - o[2], sh));
		r[2] = gm_cm_sat(gm_cm_descale32(e[2] + o[1], sh));
		r[5] = gm_cm_sat(gm_cm_descale32(e[2] - o[1], sh));
		r[3] = gm_cm_sat(gm_cm_descale32(e[3] + o[0], sh));
		r[4] = gm_cm_sat(gm_cm_descale32(e[3] - o[0], sh));
	}
}

/* The 4-point reduced transform of one line: d0, d2, d6 even; d1, d3, d5, d7 odd
 * (d4 is not used) -> the sums t10 + t2, t12 + t0, t12 - t0, t10 - t2 */
GM_CM void gm_cm_line4(int64_t d0, int64_t d1, int64_t d2, int64_t d3, int64_t d5, int64_t d6,
		       int64_t d7, int64_t r[4])
{
	int64_t t0 = d0 * ((int64_t)1 << (GM_CM_CONST_BITS + 1));
	int64_t t2 = d2 * 15137 - d6 * 6270;
	int64_t t10 = t0 + t2, t12 = t0 - t2;
	int64_t o0 = -d7 * 1730 + d5 * 11893 - d3 * 17799 + d1 * 8697;
	int64_t o2 = -d7 * 4176 - d5 * 4926 + d3 * 7373 + d1 * 20995;
	r[0] = t10 + o2, r[1] = t12 + o0, r[2] = t12 - o0, r[3] = t10 - o2;
}

/* 4x4 reduced IDCT (scale 1/2): 4 rows of 4 samples. */
GM_CM void gm_cm_idct4(const int16_t *c, const uint16_t *q, uint8_t *out, size_t stride)
{
	int32_t ws[8 * 4];
	int64_t r[4];
	int dc_only = gm_cm_dc_rows(c, 4);
	for (int x = 0; x < 8; x++) {
		if (x == 4)
			continue;
		int64_t d[8];
		for (int k = 0; k < 8; k++)
			d[k] = gm_cm_deq(c, q, 8 * k + x);
		if (dc_only) {
			for (int k = 0; k < 4; k++)
				ws[8 * k + x] = gm_cm_w16(d[0] * 4);
			continue;
		}
		gm_cm_line4(d[0], d[1], d[2], d[3], d[5], d[6], d[7], r);
		for (int k = 0; k < 4; k++)
			ws[8 * k + x] = gm_cm_s16(
			    gm_cm_descale32(r[k], GM_CM_CONST_BITS - GM_CM_PASS1_BITS + 1));
	}
	for (int y = 0; y < 4; y++) {
		const int32_t *w = ws + 8 * y;
		gm_cm_line4(w[0], w[1], w[2], w[3], w[5], w[6], w[7], r);
		for (int k = 0; k < 4; k++)
			out[(size_t)y * stride + k] = gm_cm_sat(
			    gm_cm_descale32(r[k], GM_CM_CONST_BITS + GM_CM_PASS1_BITS + 3 + 1));
	}
}

/* The 2-point reduced transform of one line: d0 even, d1, d3, d5, d7 odd */
GM_CM void gm_cm_line2(int64_t d0, int64_t d1, int64_t d3, int64_t d5, int64_t d7, int64_t r[2])
{
	int64_t t10 = d0 * ((int64_t)1 << (GM_CM_CONST_BITS + 2));
	int64_t t0 = -d7 * 5906 + d5 * 6967 - d3 * 10426 + d1 * 29692;
	r[0] = t10 + t0, r[1] = t10 - t0;
}

/* 2x2 reduced IDCT (scale 1/4): 2 rows of 2 samples. Pass 1's outputs stay 32
 * bits wide; pass 2 saturates the odd columns' to 16 (they go through 16-bit
 * multiplies), not column 0's. */
GM_CM void gm_cm_idct2(const int16_t *c, const uint16_t *q, uint8_t *out, size_t stride)
{
	int64_t ws[8 * 2];
	int64_t r[2];
	for (int x = 0; x < 8; x++) {
		if (x == 2 || x == 4 || x == 6)
			continue;
		int64_t d[8];
		for (int k = 0; k < 8; k++)
			d[k] = gm_cm_deq(c, q, 8 * k + x);
		gm_cm_line2(d[0], d[1], d[3], d[5], d[7], r);
		for (int k = 0; k < 2; k++)
			ws[8 * k + x] =
			    gm_cm_descale32(r[k], GM_CM_CONST_BITS - GM_CM_PASS1_BITS + 2);
	}
	for (int y = 0; y < 2; y++) {
		const int64_t *w = ws + 8 * y;
		gm_cm_line2(w[0], gm_cm_s16(w[1]), gm_cm_s16(w[3]), gm_cm_s16(w[5]),
			    gm_cm_s16(w[7]), r);
		for (int k = 0; k < 2; k++)
			out[(size_t)y * stride + k] = gm_cm_sat(
			    gm_cm_descale32(r[k], GM_CM_CONST_BITS + GM_CM_PASS1_BITS + 3 + 2));
	}
}

/* 1x1 (scale 1/8): the DC term / 8, rounded (libjpeg's C form: wraps). */
GM_CM void gm_cm_idct1(const int16_t *c, const uint16_t *q, uint8_t *out)
{
	out[0] = gm_cm_wrap(gm_cm_descale((int64_t)c[0] * q[0], 3));
}

/* The slot's coefficient entries (coef.h, version 2), read the same way by the
 * host path and the kernels. A block's entries (uint16 each) by its count byte:
 * the count, twice it for a wide block. */
GM_CM uint32_t gm_cm_span(uint8_t cnt)
{
	return (uint32_t)(cnt & 0x7Fu) << (cnt >> 7);
}

/* A block's coefficients from its entries into c (natural order, the rest 0).
 * Positions are taken modulo 64 (the check refuses a wide entry's past 63). */
GM_CM void gm_cm_scatter(uint8_t cnt, const uint16_t *ent, int16_t c[64])
{
	uint32_t n = cnt & 0x7Fu;
	for (int i = 0; i < 64; i++)
		c[i] = 0;
	if (cnt & 0x80u) {
		for (uint32_t e = 0; e < n; e++)
			c[ent[2 * e] & 63u] = (int16_t)ent[2 * e + 1];
		return;
	}
	for (uint32_t e = 0; e < n; e++) /* the 10-bit value's sign extended */
		c[ent[e] & 63u] = (int16_t)((int)((ent[e] >> 6) ^ 512u) - 512);
}

/* Dequantise + IDCT one block at size n (1, 2, 4, 8). */
GM_CM void gm_cm_idct(int n, const int16_t *c, const uint16_t *q, uint8_t *out, size_t stride)
{
	if (n == 8)
		gm_cm_idct8(c, q, out, stride);
	else if (n == 4)
		gm_cm_idct4(c, q, out, stride);
	else if (n == 2)
		gm_cm_idct2(c, q, out, stride);
	else
		gm_cm_idct1(c, q, out);
}

/*
 * One component's samples [x0, x0 + w) x [y0, y0 + h) (its own coordinates),
 * stride bytes a row; dw x dh the whole component; hr x vr output pixels a sample.
 */
struct gm_cm_plane {
	const uint8_t *p;
	uint32_t stride, x0, y0, w, h, dw, dh;
	uint8_t hr, vr, fancy;
};

GM_CM int64_t gm_cm_clampi(int64_t v, int64_t lo, int64_t hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

/* Sample (x, y) of the component, the edge repeated past the image's and the
 * plane's edges */
GM_CM int gm_cm_at(const struct gm_cm_plane *pl, int64_t x, int64_t y)
{
	int64_t lx = (int64_t)pl->x0,
		hx = (int64_t)(pl->x0 + pl->w < pl->dw ? pl->x0 + pl->w : pl->dw);
	int64_t ly = (int64_t)pl->y0,
		hy = (int64_t)(pl->y0 + pl->h < pl->dh ? pl->y0 + pl->h : pl->dh);
	x = gm_cm_clampi(x, lx, hx - 1) - lx;
	y = gm_cm_clampi(y, ly, hy - 1) - ly;
	return pl->p[(size_t)y * pl->stride + (size_t)x];
}

/* The component's value at output pixel (px, py) of the scaled image. */
GM_CM int gm_cm_upsample(const struct gm_cm_plane *pl, uint32_t px, uint32_t py)
{
	int64_t x = px / pl->hr, y = py / pl->vr;
	if (!pl->fancy || (pl->hr == 1 && pl->vr == 1))
		return gm_cm_at(pl, x, y);
	int64_t nx = px & 1 ? x + 1 : x - 1, ny = py & 1 ? y + 1 : y - 1;
	if (pl->vr == 1) /* h2v1 */
		return (3 * gm_cm_at(pl, x, y) + gm_cm_at(pl, nx, y) + (px & 1 ? 2 : 1)) >> 2;
	if (pl->hr == 1) /* h1v2 */
		return (3 * gm_cm_at(pl, x, y) + gm_cm_at(pl, x, ny) + (py & 1 ? 2 : 1)) >> 2;
	int s0 = 3 * gm_cm_at(pl, x, y) + gm_cm_at(pl, x, ny);
	int s1 = 3 * gm_cm_at(pl, nx, y) + gm_cm_at(pl, nx, ny);
	return (3 * s0 + s1 + (px & 1 ? 7 : 8)) >> 4;
}

GM_CM uint8_t gm_cm_clamp8(int v)
{
	return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* YCbCr -> RGB, libjpeg's 16-bit fixed point. */
GM_CM void gm_cm_ycc_rgb(int y, int cb, int cr, uint8_t *rgb)
{
	int64_t b = cb - 128, r = cr - 128, half = (int64_t)1 << 15;
	rgb[0] = gm_cm_clamp8(y + (int)((91881 * r + half) >> 16));
	rgb[1] = gm_cm_clamp8(y + (int)((-46802 * r - 22554 * b + half) >> 16));
	rgb[2] = gm_cm_clamp8(y + (int)((116130 * b + half) >> 16));
}

/* Output pixel (px, py): the components upsampled, then colour-converted
 * (color: enum gm_coef_color's values). */
GM_CM void gm_cm_pixel(const struct gm_cm_plane *pl, int ncomp, int color, uint32_t px, uint32_t py,
		       uint8_t *rgb)
{
	int v0 = gm_cm_upsample(&pl[0], px, py);
	if (ncomp == 1) {
		rgb[0] = rgb[1] = rgb[2] = (uint8_t)v0;
		return;
	}
	int v1 = gm_cm_upsample(&pl[1], px, py), v2 = gm_cm_upsample(&pl[2], px, py);
	if (color == 2) {
		rgb[0] = (uint8_t)v0, rgb[1] = (uint8_t)v1, rgb[2] = (uint8_t)v2;
		return;
	}
	gm_cm_ycc_rgb(v0, v1, v2, rgb);
}

#endif
