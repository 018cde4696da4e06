/*
 * aug_simd.c - the x86 SIMD kernels of the resize, the output layout and the
 * per-image tables, and the run-time choice among them (cpuid).
 *
 * Each kernel computes exactly what its scalar twin computes, and the twin
 * defines the bytes: vrow_c, hrow_c, frow_c and hfrow_c (aug_simd.h) for the row
 * kernels (the same integers for the resize, the same float bits for the
 * layout), vw_split (aug_simd.h) for the 16-bit lanes, and aug.c's axis_build,
 * hx_build, px_build and hw_build for the table builders. So batches are
 * byte-identical whichever kernels a CPU gets; test_aug compares every level
 * (GM_SIMD_MAX) with the scalar code. Each function carries its own target
 * attribute, so this file is compiled with the library's flags like any other
 * and only runs an instruction set after cpuid says the CPU has it.
 *
 * The ISA paths, by what gm_aug_simd_pick (the ladder at the end) asks cpuid:
 *   - SSE2, every x86-64: vrow_sse2 (vertical pass, 16 bytes a step);
 *   - ssse3: hrow_ssse3 (horizontal pass, a pixel a step, any tap count);
 *   - avx2: vrow_avx2 (32 bytes a step), hrow2_avx2 (two rows a step, up to 6
 *     taps), frow_avx2 (float32 layout); with F16C (cpuid leaf 1, ECX; clang
 *     14's __builtin_cpu_supports does not know it) hfrow_avx2 (float16);
 *   - avx512f + avx512bw + avx512vbmi, all three: vrow_avx512 and vwrow_avx512
 *     (vertical, 32-bit and 16-bit lanes), hxrow_avx512 and hwrow_avx512 (the
 *     horizontal pass as a byte gather, 32-bit and 16-bit lanes), hwntrow_avx512
 *     and ntcopy_avx512 (uint8 rows by non-temporal stores; ntfence_sse fences),
 *     pxrow_avx512 and hpxrow_avx512 (horizontal pass and float layouts fused),
 *     frow_avx512 and hfrow_avx512 (the layouts; float16 only with F16C),
 *     hxb_avx512 (the gather tables); with avx512vl too: vws_avx512 and
 *     hwg_avx512 (the 16-bit tables), axiss_avx512 and axisw_avx512 (the resize
 *     coefficients); with avx512vnni: vrow_avx512vnni and vwrow_avx512vnni;
 *   - other architectures: nothing here, the scalar kernels stay.
 * A kernel left NULL in struct aug_kernels (no such instruction set) makes aug.c
 * take the general path, which the levels below serve.
 *
 * Sections, in order: SSE2 and AVX2 vertical; SSSE3 and AVX2 horizontal; AVX2
 * and F16C layouts; AVX-512 vertical; the AVX-512 byte gather; non-temporal
 * stores; the 16-bit tables; the 16-bit gather; the fused gather and layout; the
 * AVX-512 layouts; the coefficients; the gather tables; the dispatch ladder.
 *
 * What it does not do: choose crops or lay out the tables' contents (aug.c),
 * ARM NEON (the scalar kernels run there).
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "aug_simd.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>

/*
 * Every kernel starts a 64-byte line (nothing else in its code changes): where a
 * hot loop sits in its cache line otherwise follows the size of unrelated code
 * before it, and that moved the speed by 2% (huff.c's decode_mcu 48 bytes past a
 * line: decode 305-307 against 298 us/img at 32, same run).
 */
#define LINE_ALIGNED __attribute__((aligned(64)))

/* ---- SSE2: the vertical pass, every x86-64 ----------------------------------------- */

/*
 * x86 versions (hand-written because gcc -O2 does not vectorise these loops).
 * Vertical: two taps at a time, bytes of the two source rows interleaved and
 * widened to 16 bits so one pmaddwd does 2 multiply-adds per lane.
 */
LINE_ALIGNED static void vrow_sse2(uint8_t *restrict d, const uint8_t *restrict s, size_t stride,
				   size_t n, const int16_t *c, uint32_t taps)
{
	const __m128i rnd = _mm_set1_epi32(1 << (COEF_BITS - 1)), z = _mm_setzero_si128();
	size_t x = 0;
	for (; x + 16 <= n; x += 16) {
		__m128i a0 = rnd, a1 = rnd, a2 = rnd, a3 = rnd;
		for (uint32_t k = 0; k < taps; k += 2) {
			const uint8_t *p = s + k * stride + x;
			__m128i v0 = _mm_loadu_si128((const __m128i *)p), v1 = v0, cc;
			if (k + 1 < taps) {
				v1 = _mm_loadu_si128((const __m128i *)(p + stride));
				cc =
				    _mm_set1_epi32((int32_t)((uint32_t)(uint16_t)c[k] |
							     ((uint32_t)(uint16_t)c[k + 1] << 16)));
			} else {
				cc = _mm_set1_epi32((int32_t)(uint16_t)c[k]);
			}
			__m128i lo = _mm_unpacklo_epi8(v0, v1), hi = _mm_unpackhi_epi8(v0, v1);
			a0 = _mm_add_epi32(a0, _mm_madd_epi16(_mm_unpacklo_epi8(lo, z), cc));
			a1 = _mm_add_epi32(a1, _mm_madd_epi16(_mm_unpackhi_epi8(lo, z), cc));
			a2 = _mm_add_epi32(a2, _mm_madd_epi16(_mm_unpacklo_epi8(hi, z), cc));
			a3 = _mm_add_epi32(a3, _mm_madd_epi16(_mm_unpackhi_epi8(hi, z), cc));
		}
		a0 = _mm_srai_epi32(a0, COEF_BITS);
		a1 = _mm_srai_epi32(a1, COEF_BITS);
		a2 = _mm_srai_epi32(a2, COEF_BITS);
		a3 = _mm_srai_epi32(a3, COEF_BITS);
		__m128i r = _mm_packus_epi16(_mm_packs_epi32(a0, a1), _mm_packs_epi32(a2, a3));
		_mm_storeu_si128((__m128i *)(d + x), r);
	}
	if (x < n)
		vrow_c(d + x, s + x, stride, n - x, c, taps);
}

/* ---- AVX2: the vertical pass, 32 bytes a step -------------------------------------- */

/* One pair of taps on 32 bytes: interleave rows a and b, widen, pmaddwd into a0..a3. */
__attribute__((target("avx2"))) static inline void vpair_avx2(const uint8_t *a, const uint8_t *b,
							      __m256i cc, __m256i *a0, __m256i *a1,
							      __m256i *a2, __m256i *a3)
{
	const __m256i z = _mm256_setzero_si256();
	__m256i v0 = _mm256_loadu_si256((const __m256i *)a);
	__m256i v1 = _mm256_loadu_si256((const __m256i *)b);
	__m256i lo = _mm256_unpacklo_epi8(v0, v1), hi = _mm256_unpackhi_epi8(v0, v1);
	*a0 = _mm256_add_epi32(*a0, _mm256_madd_epi16(_mm256_unpacklo_epi8(lo, z), cc));
	*a1 = _mm256_add_epi32(*a1, _mm256_madd_epi16(_mm256_unpackhi_epi8(lo, z), cc));
	*a2 = _mm256_add_epi32(*a2, _mm256_madd_epi16(_mm256_unpacklo_epi8(hi, z), cc));
	*a3 = _mm256_add_epi32(*a3, _mm256_madd_epi16(_mm256_unpackhi_epi8(hi, z), cc));
}

#define VROW_MAX_PAIRS 16

/*
 * Vertical, AVX2: 32 bytes a step. Row pointers and broadcast coefficient pairs
 * are set up once per output row (an odd last tap pairs with itself at weight 0);
 * 1 and 2 pairs (upscales, 1..2x downscales) get straight-line loops.
 */
__attribute__((target("avx2"))) LINE_ALIGNED static void vrow_avx2(uint8_t *restrict d,
								   const uint8_t *restrict s,
								   size_t stride, size_t n,
								   const int16_t *c, uint32_t taps)
{
	const __m256i rnd = _mm256_set1_epi32(1 << (COEF_BITS - 1));
	uint32_t np = (taps + 1) / 2;
	const uint8_t *r0[VROW_MAX_PAIRS], *r1[VROW_MAX_PAIRS];
	__m256i cc[VROW_MAX_PAIRS];
	size_t x = 0;

	if (np > VROW_MAX_PAIRS) {
		vrow_sse2(d, s, stride, n, c, taps);
		return;
	}
	for (uint32_t p = 0; p < np; p++) {
		bool two = 2 * p + 1 < taps;
		r0[p] = s + 2 * p * stride;
		r1[p] = two ? r0[p] + stride : r0[p];
		cc[p] = _mm256_set1_epi32(
		    (int32_t)((uint32_t)(uint16_t)c[2 * p] |
			      (two ? (uint32_t)(uint16_t)c[2 * p + 1] << 16 : 0)));
	}
	if (n < 32) {
		vrow_sse2(d, s, stride, n, c, taps);
		return;
	}
	for (;;) {
		/* a ragged end redoes the last full 32 bytes (same inputs, same bytes) */
		if (x + 32 > n)
			x = n - 32;
		__m256i a0 = rnd, a1 = rnd, a2 = rnd, a3 = rnd;
		if (np == 1) {
			vpair_avx2(r0[0] + x, r1[0] + x, cc[0], &a0, &a1, &a2, &a3);
		} else if (np == 2) {
			vpair_avx2(r0[0] + x, r1[0] + x, cc[0], &a0, &a1, &a2, &a3);
			vpair_avx2(r0[1] + x, r1[1] + x, cc[1], &a0, &a1, &a2, &a3);
		} else {
			for (uint32_t p = 0; p < np; p++)
				vpair_avx2(r0[p] + x, r1[p] + x, cc[p], &a0, &a1, &a2, &a3);
		}
		a0 = _mm256_srai_epi32(a0, COEF_BITS);
		a1 = _mm256_srai_epi32(a1, COEF_BITS);
		a2 = _mm256_srai_epi32(a2, COEF_BITS);
		a3 = _mm256_srai_epi32(a3, COEF_BITS);
		/* unpack and pack both work within 128-bit lanes, so byte order round-trips */
		__m256i r =
		    _mm256_packus_epi16(_mm256_packs_epi32(a0, a1), _mm256_packs_epi32(a2, a3));
		_mm256_storeu_si256((__m256i *)(d + x), r);
		x += 32;
		if (x >= n)
			break;
	}
}

/* ---- SSSE3: the horizontal pass, a pixel a step ------------------------------------ */

/*
 * Horizontal, SSSE3: per output pixel and pair of taps, one 8-byte load, a pshufb
 * to (r0 r1 g0 g1 b0 b1 0 0) as 16-bit lanes and one pmaddwd with the prepared
 * (c0 c1 c0 c1 c0 c1 0 0) vector (hv, built by hv_build). Reads up to 8 bytes
 * past the last tap: the source buffer has slack for that.
 */
__attribute__((target("ssse3"))) LINE_ALIGNED static void
hrow_ssse3(uint8_t *restrict dst, const uint8_t *restrict src, const struct axis *ax,
	   const int16_t *hv, uint32_t out_w)
{
	const __m128i shuf =
	    _mm_setr_epi8(0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1);
	const __m128i rnd = _mm_set1_epi32(1 << (COEF_BITS - 1));
	uint32_t pairs = (ax->taps + 1) / 2;
	const __m128i *cv = (const __m128i *)hv;
	for (uint32_t ox = 0; ox < out_w; ox++) {
		const uint8_t *s = src + ax->min[ox];
		__m128i acc = rnd;
		for (uint32_t p = 0; p < pairs; p++) {
			__m128i v = _mm_loadl_epi64((const __m128i *)(s + 6 * p));
			acc = _mm_add_epi32(acc, _mm_madd_epi16(_mm_shuffle_epi8(v, shuf), cv[p]));
		}
		cv += pairs;
		acc = _mm_srai_epi32(acc, COEF_BITS);
		acc = _mm_packus_epi16(_mm_packs_epi32(acc, acc), acc);
		uint32_t px = (uint32_t)_mm_cvtsi128_si32(acc);
		memcpy(dst + 3 * ox, &px, 3);
	}
}

/* ---- AVX2: the horizontal pass, two rows a step ------------------------------------ */

/*
 * Horizontal, AVX2, two output rows at once, for up to 6 taps (every upscale and
 * 1..2x downscale, and most up to 3x). Both rows use the same taps and weights,
 * so one pixel of row 0 goes in the low lane and the same pixel of row 1 in the
 * high lane: per pair of taps one vpshufb to (r0 r1 g0 g1 b0 b1 0 0) as 16-bit
 * lanes and one vpmaddwd with hv (c0 c1 c0 c1 c0 c1 0 0 in both lanes, hv_build with dup). The
 * packs keep the lanes apart, so no cross-lane step is needed: after packing four pixels the low
 * lane is row 0's 12 bytes and the high lane row 1's. PAIRS is 1, 2 or 3 (a constant after
 * inlining). Reads up to 20 bytes from each pixel's first tap: the rows have slack for that.
 * Offsets in ax->min are in bytes.
 */
__attribute__((target("avx2"), always_inline)) static inline __m256i
hpix2_avx2(const uint8_t *s0, const uint8_t *s1, const __m256i *cv, int pairs)
{
	const __m256i sh01 =
	    _mm256_setr_epi8(0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1, 0, -1, 3, -1,
			     1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1);
	const __m256i sh23 =
	    _mm256_setr_epi8(6, -1, 9, -1, 7, -1, 10, -1, 8, -1, 11, -1, -1, -1, -1, -1, 6, -1, 9,
			     -1, 7, -1, 10, -1, 8, -1, 11, -1, -1, -1, -1, -1);
	__m256i v, acc;
	if (pairs == 1)
		v = _mm256_inserti128_si256(
		    _mm256_castsi128_si256(_mm_loadl_epi64((const __m128i *)s0)),
		    _mm_loadl_epi64((const __m128i *)s1), 1);
	else
		v = _mm256_inserti128_si256(
		    _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)s0)),
		    _mm_loadu_si128((const __m128i *)s1), 1);
	acc = _mm256_madd_epi16(_mm256_shuffle_epi8(v, sh01), _mm256_loadu_si256(cv));
	if (pairs >= 2)
		acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_shuffle_epi8(v, sh23),
							      _mm256_loadu_si256(cv + 1)));
	if (pairs == 3) { /* taps 4 and 5 start at byte 12 */
		v = _mm256_inserti128_si256(
		    _mm256_castsi128_si256(_mm_loadl_epi64((const __m128i *)(s0 + 12))),
		    _mm_loadl_epi64((const __m128i *)(s1 + 12)), 1);
		acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_shuffle_epi8(v, sh01),
							      _mm256_loadu_si256(cv + 2)));
	}
	return acc;
}

/* always inlined, so that each PAIRS gets its own straight-line loop */
__attribute__((target("avx2"), always_inline)) static inline void
hrow2_body(uint8_t *restrict d0, uint8_t *restrict d1, const uint8_t *s0, const uint8_t *s1,
	   const int32_t *m, const __m256i *cv, uint32_t out_w, int pairs)
{
	const __m256i rnd = _mm256_set1_epi32(1 << (COEF_BITS - 1));
	/* gathers the RGB of four RGBx dwords into 12 bytes, in each lane */
	const __m256i pack12 =
	    _mm256_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1, 0, 1, 2, 4, 5,
			     6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
	uint32_t ox = 0;
	for (; ox + 4 <= out_w; ox += 4) {
		__m256i a = hpix2_avx2(s0 + m[ox], s1 + m[ox], cv + (size_t)ox * pairs, pairs);
		__m256i b = hpix2_avx2(s0 + m[ox + 1], s1 + m[ox + 1],
				       cv + (size_t)(ox + 1) * pairs, pairs);
		__m256i c = hpix2_avx2(s0 + m[ox + 2], s1 + m[ox + 2],
				       cv + (size_t)(ox + 2) * pairs, pairs);
		__m256i d = hpix2_avx2(s0 + m[ox + 3], s1 + m[ox + 3],
				       cv + (size_t)(ox + 3) * pairs, pairs);
		a = _mm256_srai_epi32(_mm256_add_epi32(a, rnd), COEF_BITS);
		b = _mm256_srai_epi32(_mm256_add_epi32(b, rnd), COEF_BITS);
		c = _mm256_srai_epi32(_mm256_add_epi32(c, rnd), COEF_BITS);
		d = _mm256_srai_epi32(_mm256_add_epi32(d, rnd), COEF_BITS);
		/* per lane: A B C D as RGBx bytes, then 12 packed bytes */
		__m256i p = _mm256_packus_epi16(_mm256_packs_epi32(a, b), _mm256_packs_epi32(c, d));
		p = _mm256_shuffle_epi8(p, pack12);
		__m128i q0 = _mm256_castsi256_si128(p), q1 = _mm256_extracti128_si256(p, 1);
		if (ox + 6 <= out_w) { /* the 4 extra bytes land where later pixels go */
			_mm_storeu_si128((__m128i *)(d0 + 3 * ox), q0);
			_mm_storeu_si128((__m128i *)(d1 + 3 * ox), q1);
		} else {
			uint8_t last[32];
			_mm256_storeu_si256((__m256i *)last, p);
			memcpy(d0 + 3 * ox, last, 12);
			memcpy(d1 + 3 * ox, last + 16, 12);
		}
	}
	for (; ox < out_w; ox++) {
		__m256i a = hpix2_avx2(s0 + m[ox], s1 + m[ox], cv + (size_t)ox * pairs, pairs);
		a = _mm256_srai_epi32(_mm256_add_epi32(a, rnd), COEF_BITS);
		a = _mm256_packus_epi16(_mm256_packs_epi32(a, a), a);
		uint32_t pa = (uint32_t)_mm_cvtsi128_si32(_mm256_castsi256_si128(a));
		uint32_t pb = (uint32_t)_mm_cvtsi128_si32(_mm256_extracti128_si256(a, 1));
		memcpy(d0 + 3 * ox, &pa, 3);
		memcpy(d1 + 3 * ox, &pb, 3);
	}
}

/* Two rows src0/src1 -> dst0/dst1 with the same horizontal taps (see above). */
__attribute__((target("avx2"))) LINE_ALIGNED static void
hrow2_avx2(uint8_t *restrict dst0, uint8_t *restrict dst1, const uint8_t *src0, const uint8_t *src1,
	   const struct axis *ax, const int16_t *hv, uint32_t out_w)
{
	if (ax->taps <= 2)
		hrow2_body(dst0, dst1, src0, src1, ax->min, (const __m256i *)hv, out_w, 1);
	else if (ax->taps <= 4)
		hrow2_body(dst0, dst1, src0, src1, ax->min, (const __m256i *)hv, out_w, 2);
	else
		hrow2_body(dst0, dst1, src0, src1, ax->min, (const __m256i *)hv, out_w, 3);
}

/* ---- AVX2 and F16C: the float32 and float16 layouts -------------------------------- */

/* 8 RGB pixels -> three vectors of x * scale[c] + bias[c] (deinterleaved). */
__attribute__((target("avx2"), always_inline)) static inline void
rgb8_ps(const uint8_t *rgb, const __m256 *s, const __m256 *b, __m256 *o)
{
	const __m128i rl =
	    _mm_setr_epi8(0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
	const __m128i rh =
	    _mm_setr_epi8(-1, -1, -1, -1, -1, -1, 2, 5, -1, -1, -1, -1, -1, -1, -1, -1);
	const __m128i gl =
	    _mm_setr_epi8(1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
	const __m128i gh =
	    _mm_setr_epi8(-1, -1, -1, -1, -1, 0, 3, 6, -1, -1, -1, -1, -1, -1, -1, -1);
	const __m128i bl =
	    _mm_setr_epi8(2, 5, 8, 11, 14, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
	const __m128i bh =
	    _mm_setr_epi8(-1, -1, -1, -1, -1, 1, 4, 7, -1, -1, -1, -1, -1, -1, -1, -1);
	__m128i lo = _mm_loadu_si128((const __m128i *)rgb);
	__m128i hi = _mm_loadl_epi64((const __m128i *)(rgb + 16));
	__m128i c[3] = {_mm_or_si128(_mm_shuffle_epi8(lo, rl), _mm_shuffle_epi8(hi, rh)),
			_mm_or_si128(_mm_shuffle_epi8(lo, gl), _mm_shuffle_epi8(hi, gh)),
			_mm_or_si128(_mm_shuffle_epi8(lo, bl), _mm_shuffle_epi8(hi, bh))};
	for (int k = 0; k < 3; k++)
		o[k] = _mm256_add_ps(
		    _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(c[k])), s[k]), b[k]);
}

/* The per-channel scale and bias as vectors. */
__attribute__((target("avx2"), always_inline)) static inline void
splat3(const float *scale, const float *bias, __m256 *s, __m256 *b)
{
	for (int c = 0; c < 3; c++) {
		s[c] = _mm256_set1_ps(scale[c]);
		b[c] = _mm256_set1_ps(bias[c]);
	}
}

/* RGB row -> three float planes, x * scale[c] + bias[c]; AVX2 (8 pixels a step). */
__attribute__((target("avx2"))) LINE_ALIGNED static void
frow_avx2(float *restrict p0, float *restrict p1, float *restrict p2, const uint8_t *restrict rgb,
	  uint32_t n, const float *scale, const float *bias)
{
	__m256 s[3], b[3];
	splat3(scale, bias, s, b);
	uint32_t x = 0;
	for (; x + 8 <= n; x += 8) {
		__m256 o[3];
		rgb8_ps(rgb + 3 * x, s, b, o);
		_mm256_storeu_ps(p0 + x, o[0]);
		_mm256_storeu_ps(p1 + x, o[1]);
		_mm256_storeu_ps(p2 + x, o[2]);
	}
	if (x < n)
		frow_c(p0 + x, p1 + x, p2 + x, rgb + 3 * x, n - x, scale, bias);
}

/* frow_avx2 with the planes stored as float16 (vcvtps2ph, round to nearest even). */
__attribute__((target("avx2,f16c"))) LINE_ALIGNED static void
hfrow_avx2(uint16_t *restrict p0, uint16_t *restrict p1, uint16_t *restrict p2,
	   const uint8_t *restrict rgb, uint32_t n, const float *scale, const float *bias)
{
	__m256 s[3], b[3];
	splat3(scale, bias, s, b);
	uint32_t x = 0;
	for (; x + 8 <= n; x += 8) {
		__m256 o[3];
		rgb8_ps(rgb + 3 * x, s, b, o);
		_mm_storeu_si128((__m128i *)(p0 + x),
				 _mm256_cvtps_ph(o[0], _MM_FROUND_TO_NEAREST_INT));
		_mm_storeu_si128((__m128i *)(p1 + x),
				 _mm256_cvtps_ph(o[1], _MM_FROUND_TO_NEAREST_INT));
		_mm_storeu_si128((__m128i *)(p2 + x),
				 _mm256_cvtps_ph(o[2], _MM_FROUND_TO_NEAREST_INT));
	}
	if (x < n)
		hfrow_c(p0 + x, p1 + x, p2 + x, rgb + 3 * x, n - x, scale, bias);
}

/* ---- AVX-512: the vertical pass (32-bit lanes, VNNI; 16-bit lanes) ----------------- */

#define AVX512 "avx512f,avx512bw,avx512vbmi"

/*
 * Vertical, AVX-512: vrow_avx2 at 64 bytes a step (unpack and pack stay within
 * 128-bit lanes, so bytes come back in order); with VNNI, vpdpwssd folds each add
 * into its multiply (pixels and weights are >= 0: no overflow, same integer sums as
 * vrow_c). Rows under 64 bytes, and more than VROW_MAX_PAIRS pairs, go to
 * vrow_avx2. (Laying a pair of rows out as words with four zero-masked vpermt2b, in
 * the order the packs want, in place of the six unpacks: no faster on Zen 4, min
 * over 5 passes 43.8-43.9 against 43.0-44.8 us/img uint8 augment.)
 */
/* acc + the pairwise products of w and c (vpdpwssd, written as asm so that the
 * non-VNNI kernel compiles from the same body). */
__attribute__((target(AVX512), always_inline)) static inline __m512i vdot(__m512i acc, __m512i w,
									  __m512i c, bool vnni)
{
	if (!vnni)
		return _mm512_add_epi32(acc, _mm512_madd_epi16(w, c));
	__asm__("vpdpwssd %2, %1, %0" : "+v"(acc) : "v"(w), "v"(c));
	return acc;
}

__attribute__((target(AVX512), always_inline)) static inline void
vpair_avx512(const uint8_t *a, const uint8_t *b, __m512i cc, __m512i *a0, __m512i *a1, __m512i *a2,
	     __m512i *a3, bool vnni)
{
	const __m512i z = _mm512_setzero_si512();
	__m512i v0 = _mm512_loadu_si512(a), v1 = _mm512_loadu_si512(b);
	__m512i lo = _mm512_unpacklo_epi8(v0, v1), hi = _mm512_unpackhi_epi8(v0, v1);
	*a0 = vdot(*a0, _mm512_unpacklo_epi8(lo, z), cc, vnni);
	*a1 = vdot(*a1, _mm512_unpackhi_epi8(lo, z), cc, vnni);
	*a2 = vdot(*a2, _mm512_unpacklo_epi8(hi, z), cc, vnni);
	*a3 = vdot(*a3, _mm512_unpackhi_epi8(hi, z), cc, vnni);
}

/* named accumulators, not an array: gcc would keep an array on the stack */
__attribute__((target(AVX512), always_inline)) static inline void
vrow_body(uint8_t *restrict d, const uint8_t *restrict s, size_t stride, size_t n, const int16_t *c,
	  uint32_t taps, bool vnni)
{
	const __m512i rnd = _mm512_set1_epi32(1 << (COEF_BITS - 1));
	uint32_t np = (taps + 1) / 2;
	const uint8_t *r0[VROW_MAX_PAIRS], *r1[VROW_MAX_PAIRS];
	__m512i cc[VROW_MAX_PAIRS];
	size_t x = 0;

	if (np > VROW_MAX_PAIRS || n < 64) {
		vrow_avx2(d, s, stride, n, c, taps);
		return;
	}
	for (uint32_t p = 0; p < np; p++) {
		bool two = 2 * p + 1 < taps;
		r0[p] = s + 2 * p * stride;
		r1[p] = two ? r0[p] + stride : r0[p];
		cc[p] = _mm512_set1_epi32(
		    (int32_t)((uint32_t)(uint16_t)c[2 * p] |
			      (two ? (uint32_t)(uint16_t)c[2 * p + 1] << 16 : 0)));
	}
	for (;;) {
		if (x + 64 > n) /* a ragged end redoes the last full 64 bytes */
			x = n - 64;
		__m512i a0 = rnd, a1 = rnd, a2 = rnd, a3 = rnd;
		if (np == 1) {
			vpair_avx512(r0[0] + x, r1[0] + x, cc[0], &a0, &a1, &a2, &a3, vnni);
		} else if (np == 2) {
			vpair_avx512(r0[0] + x, r1[0] + x, cc[0], &a0, &a1, &a2, &a3, vnni);
			vpair_avx512(r0[1] + x, r1[1] + x, cc[1], &a0, &a1, &a2, &a3, vnni);
		} else {
			for (uint32_t p = 0; p < np; p++)
				vpair_avx512(r0[p] + x, r1[p] + x, cc[p], &a0, &a1, &a2, &a3, vnni);
		}
		a0 = _mm512_srai_epi32(a0, COEF_BITS);
		a1 = _mm512_srai_epi32(a1, COEF_BITS);
		a2 = _mm512_srai_epi32(a2, COEF_BITS);
		a3 = _mm512_srai_epi32(a3, COEF_BITS);
		__m512i r =
		    _mm512_packus_epi16(_mm512_packs_epi32(a0, a1), _mm512_packs_epi32(a2, a3));
		_mm512_storeu_si512(d + x, r);
		x += 64;
		if (x >= n)
			break;
	}
}

/*
 * Vertical, AVX-512 BW, in 16-bit lanes (vwrow_fn): 64 output bytes with two
 * unpacks and four vpmaddubsw per pair of taps, where vrow_body needs six unpacks
 * and four 32-bit multiply-adds; why it is exact: vw_split (aug_simd.h).
 */
/* One pair of rows a, b on 64 bytes: bytes interleaved, 4 vpmaddubsw. */
__attribute__((target(AVX512), always_inline)) static inline void
vw_pair(const uint8_t *a, const uint8_t *b, __m512i wh, __m512i wl, __m512i *h0, __m512i *h1,
	__m512i *l0, __m512i *l1, bool first)
{
	__m512i va = _mm512_loadu_si512(a), vb = _mm512_loadu_si512(b);
	__m512i lo = _mm512_unpacklo_epi8(va, vb), hi = _mm512_unpackhi_epi8(va, vb);
	__m512i x0 = _mm512_maddubs_epi16(lo, wh), x1 = _mm512_maddubs_epi16(hi, wh);
	__m512i y0 = _mm512_maddubs_epi16(lo, wl), y1 = _mm512_maddubs_epi16(hi, wl);
	if (first) {
		*h0 = x0, *h1 = x1, *l0 = y0, *l1 = y1;
	} else {
		*h0 = _mm512_add_epi16(*h0, x0), *h1 = _mm512_add_epi16(*h1, x1);
		*l0 = _mm512_add_epi16(*l0, y0), *l1 = _mm512_add_epi16(*l1, y1);
	}
}

__attribute__((target(AVX512), always_inline)) static inline void
vw_body(uint8_t *restrict d, const uint8_t *restrict s, size_t stride, size_t n, const int16_t *c,
	uint32_t taps, uint32_t wh, uint32_t wl, bool vnni)
{
	if (n < 64 || taps > 4) {
		vrow_body(d, s, stride, n, c, taps, vnni);
		return;
	}
	const __m512i k256 = _mm512_set1_epi16(256);
	const __m512i wh0 = _mm512_set1_epi16((short)wh), wl0 = _mm512_set1_epi16((short)wl);
	const __m512i wh1 = _mm512_set1_epi16((short)(wh >> 16));
	const __m512i wl1 = _mm512_set1_epi16((short)(wl >> 16));
	const uint8_t *r1 = taps > 1 ? s + stride : s;
	const uint8_t *r2 = taps > 2 ? s + 2 * stride : s, *r3 = taps > 3 ? s + 3 * stride : r2;
	size_t x = 0;
	for (;;) {
		if (x + 64 > n) /* a ragged end redoes the last full 64 bytes */
			x = n - 64;
		__m512i h0, h1, l0, l1;
		vw_pair(s + x, r1 + x, wh0, wl0, &h0, &h1, &l0, &l1, true);
		if (taps > 2)
			vw_pair(r2 + x, r3 + x, wh1, wl1, &h0, &h1, &l0, &l1, false);
		h0 = _mm512_mulhrs_epi16(_mm512_add_epi16(h0, _mm512_srai_epi16(l0, 7)), k256);
		h1 = _mm512_mulhrs_epi16(_mm512_add_epi16(h1, _mm512_srai_epi16(l1, 7)), k256);
		_mm512_storeu_si512(d + x, _mm512_packus_epi16(h0, h1));
		x += 64;
		if (x >= n)
			break;
	}
}

__attribute__((target(AVX512))) LINE_ALIGNED static void
vrow_avx512(uint8_t *restrict d, const uint8_t *restrict s, size_t stride, size_t n,
	    const int16_t *c, uint32_t taps)
{
	vrow_body(d, s, stride, n, c, taps, false);
}

/* With AVX512-VNNI (Ice Lake, Zen 4): vpdpwssd. */
__attribute__((target(AVX512))) LINE_ALIGNED static void
vrow_avx512vnni(uint8_t *restrict d, const uint8_t *restrict s, size_t stride, size_t n,
		const int16_t *c, uint32_t taps)
{
	vrow_body(d, s, stride, n, c, taps, true);
}

__attribute__((target(AVX512))) LINE_ALIGNED static void
vwrow_avx512(uint8_t *restrict d, const uint8_t *restrict s, size_t stride, size_t n,
	     const int16_t *c, uint32_t taps, uint32_t wh, uint32_t wl)
{
	vw_body(d, s, stride, n, c, taps, wh, wl, false);
}

__attribute__((target(AVX512))) LINE_ALIGNED static void
vwrow_avx512vnni(uint8_t *restrict d, const uint8_t *restrict s, size_t stride, size_t n,
		 const int16_t *c, uint32_t taps, uint32_t wh, uint32_t wl)
{
	vw_body(d, s, stride, n, c, taps, wh, wl, true);
}

/* ---- AVX-512 VBMI: the horizontal pass as a byte gather (hx_table) ----------------- */

/*
 * Horizontal, AVX-512 VBMI, two rows: 16 output bytes (5 1/3 pixels) per vector
 * and row, four vectors a step (see struct hx_table). Per pair of taps one
 * zero-masked vpermb (vpermt2b for a 128-byte window) gathers each lane's two
 * source bytes as 16-bit words, and one vpmaddwd with the lane's two coefficients
 * adds both taps: the same integer sums as hrow_c, in another order, with no
 * overflow. The four vectors are packed to 64 bytes (the sums are 0..255, so
 * saturation is hrow_c's (uint8_t) cast) and one vpermb puts them in order. Both
 * rows share the index and coefficient loads. PAIRS and NARROW are constants
 * after inlining. Reads up to HX_WINDOW bytes from each group's base: the rows
 * have that slack. (VNNI's vpdpwssd in place of vpmaddwd + vpaddd, and one
 * vector a step with vpmovdb stores, measured no faster on Zen 4.)
 */
__attribute__((target(AVX512), always_inline)) static inline void
hx_group(const uint8_t *s0, const uint8_t *s1, const uint8_t *blk, uint32_t pairs, bool narrow,
	 __m512i *acc0, __m512i *acc1)
{
	const __mmask64 even = 0x5555555555555555ull; /* the low byte of each word */
	__m512i lo0 = _mm512_loadu_si512(s0), lo1 = _mm512_loadu_si512(s1);
	__m512i hi0 = lo0, hi1 = lo1;
	if (!narrow) {
		hi0 = _mm512_loadu_si512(s0 + 64);
		hi1 = _mm512_loadu_si512(s1 + 64);
	}
	for (uint32_t p = 0; p < pairs; p++) {
		__m512i idx = _mm512_loadu_si512(blk + (size_t)p * 8 * HX_GROUP);
		__m512i cf = _mm512_loadu_si512(blk + (size_t)p * 8 * HX_GROUP + 64);
		__m512i v0, v1;
		if (narrow) {
			v0 = _mm512_maskz_permutexvar_epi8(even, idx, lo0);
			v1 = _mm512_maskz_permutexvar_epi8(even, idx, lo1);
		} else {
			v0 = _mm512_maskz_permutex2var_epi8(even, lo0, idx, hi0);
			v1 = _mm512_maskz_permutex2var_epi8(even, lo1, idx, hi1);
		}
		*acc0 = _mm512_add_epi32(*acc0, _mm512_madd_epi16(v0, cf));
		*acc1 = _mm512_add_epi32(*acc1, _mm512_madd_epi16(v1, cf));
	}
}

/* Four vectors of sums (output bytes 0-15, 16-31, ...) -> 64 bytes in order. */
__attribute__((target(AVX512), always_inline)) static inline __m512i hx_pack(__m512i a0, __m512i a1,
									     __m512i a2, __m512i a3)
{
	/*
	 * After the packs, byte 16k + 4q + i holds vector q's lane 4k + i, which
	 * goes to byte 16q + 4k + i (a 4x4 transpose of dwords).
	 */
	const __m512i order = _mm512_set_epi8(
	    63, 62, 61, 60, 47, 46, 45, 44, 31, 30, 29, 28, 15, 14, 13, 12, 59, 58, 57, 56, 43, 42,
	    41, 40, 27, 26, 25, 24, 11, 10, 9, 8, 55, 54, 53, 52, 39, 38, 37, 36, 23, 22, 21, 20, 7,
	    6, 5, 4, 51, 50, 49, 48, 35, 34, 33, 32, 19, 18, 17, 16, 3, 2, 1, 0);
	__m512i r = _mm512_packus_epi16(
	    _mm512_packs_epi32(_mm512_srai_epi32(a0, COEF_BITS), _mm512_srai_epi32(a1, COEF_BITS)),
	    _mm512_packs_epi32(_mm512_srai_epi32(a2, COEF_BITS), _mm512_srai_epi32(a3, COEF_BITS)));
	return _mm512_permutexvar_epi8(order, r);
}

/* 64 bytes of two rows at byte at, the part before nval only. */
__attribute__((target(AVX512), always_inline)) static inline void
store2(uint8_t *d0, uint8_t *d1, uint32_t at, uint32_t nval, __m512i r0, __m512i r1)
{
	if (at + 64 <= nval) {
		_mm512_storeu_si512(d0 + at, r0);
		_mm512_storeu_si512(d1 + at, r1);
	} else {
		__mmask64 m = ((__mmask64)1 << (nval - at)) - 1;
		_mm512_mask_storeu_epi8(d0 + at, m, r0);
		_mm512_mask_storeu_epi8(d1 + at, m, r1);
	}
}

__attribute__((target(AVX512), always_inline)) static inline void
hx_body(uint8_t *restrict d0, uint8_t *restrict d1, const uint8_t *s0, const uint8_t *s1,
	const struct hx_table *t, uint32_t pairs, bool narrow)
{
	const __m512i rnd = _mm512_set1_epi32(1 << (COEF_BITS - 1));
	size_t gstep = (size_t)pairs * 8 * HX_GROUP;
	const int32_t *base = t->base;
	const uint8_t *blk = t->blk;
	/* named accumulators, not an array: gcc would keep an array on the stack */
	for (uint32_t at = 0; at < t->nval; at += 4 * HX_GROUP, base += 4, blk += 4 * gstep) {
		__m512i a0 = rnd, a1 = rnd, a2 = rnd, a3 = rnd;
		__m512i b0 = rnd, b1 = rnd, b2 = rnd, b3 = rnd;
		hx_group(s0 + base[0], s1 + base[0], blk, pairs, narrow, &a0, &b0);
		hx_group(s0 + base[1], s1 + base[1], blk + gstep, pairs, narrow, &a1, &b1);
		hx_group(s0 + base[2], s1 + base[2], blk + 2 * gstep, pairs, narrow, &a2, &b2);
		hx_group(s0 + base[3], s1 + base[3], blk + 3 * gstep, pairs, narrow, &a3, &b3);
		__m512i r0 = hx_pack(a0, a1, a2, a3), r1 = hx_pack(b0, b1, b2, b3);
		store2(d0, d1, at, t->nval, r0, r1);
	}
}

/* Two rows through the table t: hx_body specialised (hx_build pads groups to fours). */
__attribute__((target(AVX512))) LINE_ALIGNED static void
hxrow_avx512(uint8_t *restrict dst0, uint8_t *restrict dst1, const uint8_t *src0,
	     const uint8_t *src1, const struct hx_table *t)
{
	if (t->narrow && t->pairs == 1)
		hx_body(dst0, dst1, src0, src1, t, 1, true);
	else if (t->narrow && t->pairs == 2)
		hx_body(dst0, dst1, src0, src1, t, 2, true);
	else if (t->narrow && t->pairs == 3)
		hx_body(dst0, dst1, src0, src1, t, 3, true);
	else if (t->narrow)
		hx_body(dst0, dst1, src0, src1, t, t->pairs, true);
	else /* 7 taps and more: a downscale by 3 and more */
		hx_body(dst0, dst1, src0, src1, t, t->pairs, false);
}

/* ---- AVX-512: non-temporal stores of the output ------------------------------------ */

__attribute__((target(AVX512))) LINE_ALIGNED static void
ntcopy_avx512(uint8_t *restrict dst, const uint8_t *restrict src, size_t n)
{
	size_t head = (64 - ((uintptr_t)dst & 63)) & 63, i;
	head = head < n ? head : n;
	if (head)
		_mm512_mask_storeu_epi8(dst, ((__mmask64)1 << head) - 1,
					_mm512_maskz_loadu_epi8(((__mmask64)1 << head) - 1, src));
	for (i = head; i + 64 <= n; i += 64)
		_mm512_stream_si512((void *)(dst + i), _mm512_loadu_si512(src + i));
	if (i < n) {
		__mmask64 m = ((__mmask64)1 << (n - i)) - 1;
		_mm512_mask_storeu_epi8(dst + i, m, _mm512_maskz_loadu_epi8(m, src + i));
	}
}

LINE_ALIGNED static void ntfence_sse(void)
{
	_mm_sfence();
}

/* ---- AVX-512 VL: the 16-bit tables (vw_split, hw_build's groups) ------------------- */

/*
 * vw_split, 8 rows a step (vws_fn): each row's 4 weights in one 64-bit lane (fewer
 * taps zero-extended), the ranks from the three rotations of the lane, with
 * vw_split's keys.
 */
__attribute__((target(AVX512 ",avx512vl"))) LINE_ALIGNED static void
vws_avx512(const int16_t *coef, uint32_t taps, uint32_t n, uint32_t *wh, uint32_t *wl)
{
	const __m512i k127 = _mm512_set1_epi16(127), k128 = _mm512_set1_epi16(128);
	const __m512i one = _mm512_set1_epi16(1), z = _mm512_setzero_si512();
	const __m512i pos = _mm512_set1_epi64(0x0000000100020003ll); /* 3 - k in word k */
	/* 3 taps: row q's words to lane q's words 0-2 (word 3 zeroed by the mask) */
	const __m512i t3 =
	    _mm512_set_epi16(31, 23, 22, 21, 31, 20, 19, 18, 31, 17, 16, 15, 31, 14, 13, 12, 31, 11,
			     10, 9, 31, 8, 7, 6, 31, 5, 4, 3, 31, 2, 1, 0);
	uint32_t i = 0;
	if (taps >= 1 && taps <= 4)
		for (; i + 8 <= n; i += 8) {
			const int16_t *c0 = coef + (size_t)i * taps;
			__m512i c;
			if (taps == 4)
				c = _mm512_loadu_si512(c0);
			else if (taps == 3)
				c = _mm512_maskz_permutexvar_epi16(
				    0x77777777u, t3, _mm512_maskz_loadu_epi16(0xffffffu, c0));
			else if (taps == 2)
				c = _mm512_cvtepu32_epi64(_mm256_loadu_si256((const __m256i *)c0));
			else
				c = _mm512_cvtepu16_epi64(_mm_loadu_si128((const __m128i *)c0));
			__m512i r = _mm512_and_si512(c, k127);
			__m512i rk = _mm512_maskz_mov_epi16(
			    _mm512_cmplt_epi16_mask(c, _mm512_set1_epi16(127 * 128)), r);
			__m512i key = _mm512_or_si512(_mm512_slli_epi16(rk, 2), pos);
			__m512i rank = z;
			rank = _mm512_mask_add_epi16(
			    rank, _mm512_cmpgt_epu16_mask(_mm512_rol_epi64(key, 16), key), rank,
			    one);
			rank = _mm512_mask_add_epi16(
			    rank, _mm512_cmpgt_epu16_mask(_mm512_rol_epi64(key, 32), key), rank,
			    one);
			rank = _mm512_mask_add_epi16(
			    rank, _mm512_cmpgt_epu16_mask(_mm512_rol_epi64(key, 48), key), rank,
			    one);
			__m512i rs = _mm512_add_epi16(r, _mm512_rol_epi64(r, 16));
			rs = _mm512_add_epi16(rs, _mm512_rol_epi64(rs, 32));
			__m512i cs = _mm512_add_epi16(c, _mm512_rol_epi64(c, 16));
			cs = _mm512_add_epi16(cs, _mm512_rol_epi64(cs, 32));
			__mmask32 e = _mm512_cmplt_epu16_mask(rank, _mm512_srli_epi16(rs, 7));
			__m512i h = _mm512_srai_epi16(c, 7);
			h = _mm512_mask_add_epi16(h, e, h, one);
			__m512i l = _mm512_mask_sub_epi16(r, e, r, k128);
			__mmask32 bad = _mm512_cmpgt_epi16_mask(h, k127) |
					_mm512_cmplt_epi16_mask(c, z) |
					_mm512_cmpgt_epi16_mask(c, _mm512_set1_epi16(COEF_ONE)) |
					_mm512_cmpneq_epi16_mask(cs, _mm512_set1_epi16(COEF_ONE));
			__mmask8 rowbad = _mm512_test_epi64_mask(_mm512_maskz_set1_epi16(bad, -1),
								 _mm512_maskz_set1_epi16(bad, -1));
			__m256i hb = _mm512_cvtepi16_epi8(h), lb = _mm512_cvtepi16_epi8(l);
			hb = _mm256_mask_mov_epi32(hb, rowbad, _mm256_set1_epi32(-1));
			_mm256_storeu_si256((__m256i *)(wh + i), hb);
			_mm256_storeu_si256((__m256i *)(wl + i), lb);
		}
	for (; i < n; i++)
		if (!vw_split(coef + (size_t)i * taps, taps, &wh[i], &wl[i]))
			wh[i] = VW_NONE;
}

/* hwg_fn: lane l is byte c0 + l of the pixels from 0: pixel (c0 + l) / 3, channel the rest. */
__attribute__((target(AVX512 ",avx512vl"))) LINE_ALIGNED static void
hwg_avx512(uint16_t *q, const int32_t *min, const uint32_t *wh, const uint32_t *wl,
	   const int16_t *adj, uint32_t n, uint32_t c0, int32_t b, uint32_t pairs)
{
	const __m512i iota =
	    _mm512_set_epi16(31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14,
			     13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
	__m512i t = _mm512_add_epi16(iota, _mm512_set1_epi16((short)c0));
	__m512i px = _mm512_mulhi_epu16(t, _mm512_set1_epi16(21846)); /* t / 3, t < 34 */
	__m512i ch = _mm512_sub_epi16(t, _mm512_mullo_epi16(px, _mm512_set1_epi16(3)));
	__m512i px2 = _mm512_add_epi16(px, px);
	__mmask16 m = n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1);
	__m512i mins = _mm512_sub_epi32(_mm512_maskz_loadu_epi32(m, min), _mm512_set1_epi32(b));
	__m512i v = _mm512_add_epi16(
	    _mm512_permutexvar_epi16(px, _mm512_castsi256_si512(_mm512_cvtepi32_epi16(mins))), ch);
	__m512i a =
	    _mm512_permutexvar_epi16(px, _mm512_castsi256_si512(_mm256_maskz_loadu_epi16(m, adj)));
	__m512i v257 = _mm512_mullo_epi16(v, _mm512_set1_epi16(257));
	__m512i h = _mm512_maskz_loadu_epi32(m, wh), l = _mm512_maskz_loadu_epi32(m, wl);
	_mm512_storeu_si512(q, _mm512_add_epi16(_mm512_add_epi16(v257, _mm512_set1_epi16(768)), a));
	_mm512_storeu_si512(q + 32, _mm512_permutexvar_epi16(px2, h));
	_mm512_storeu_si512(q + 64, _mm512_permutexvar_epi16(px2, l));
	if (pairs == 2) {
		__m512i px21 = _mm512_add_epi16(px2, _mm512_set1_epi16(1));
		_mm512_storeu_si512(q + 96, _mm512_add_epi16(v257, _mm512_set1_epi16(6 + 9 * 256)));
		_mm512_storeu_si512(q + 128, _mm512_permutexvar_epi16(px21, h));
		_mm512_storeu_si512(q + 160, _mm512_permutexvar_epi16(px21, l));
	}
}

/* ---- AVX-512 VBMI: the horizontal pass in 16-bit lanes (hw_table) ------------------ */

/*
 * Horizontal, AVX-512 VBMI, two rows, in 16-bit lanes (struct hw_table): per group
 * of 32 output bytes and pair of taps one vpermb (vpermt2b for a 128-byte window)
 * gathers each lane's two source bytes, and two vpmaddubsw multiply them by the
 * split weights (vw_split: H and L); then (H + (L >> 7) + 64) >> 7 by vpmulhrsw,
 * and one vpermt2b takes the low bytes of two groups' words: 64 output bytes in
 * order. Both rows share the table loads. PAIRS and NARROW are constants after
 * inlining. Reads up to HX_WINDOW bytes from each group's base: the rows have that
 * slack.
 */
__attribute__((target(AVX512), always_inline)) static inline __m512i
hw_group(const uint8_t *s0, const uint8_t *s1, const uint8_t *blk, uint32_t pairs, bool narrow,
	 __m512i *r1)
{
	const __m512i k256 = _mm512_set1_epi16(256);
	__m512i lo0 = _mm512_loadu_si512(s0), lo1 = _mm512_loadu_si512(s1);
	__m512i hi0 = lo0, hi1 = lo1;
	__m512i h0 = _mm512_setzero_si512(), h1 = h0, l0 = h0, l1 = h0;
	if (!narrow) {
		hi0 = _mm512_loadu_si512(s0 + 64);
		hi1 = _mm512_loadu_si512(s1 + 64);
	}
	for (uint32_t p = 0; p < pairs; p++) {
		const uint8_t *b = blk + (size_t)p * 192;
		__m512i idx = _mm512_loadu_si512(b);
		__m512i wh = _mm512_loadu_si512(b + 64), wl = _mm512_loadu_si512(b + 128);
		__m512i v0, v1;
		if (narrow) {
			v0 = _mm512_permutexvar_epi8(idx, lo0);
			v1 = _mm512_permutexvar_epi8(idx, lo1);
		} else {
			v0 = _mm512_permutex2var_epi8(lo0, idx, hi0);
			v1 = _mm512_permutex2var_epi8(lo1, idx, hi1);
		}
		h0 = _mm512_add_epi16(h0, _mm512_maddubs_epi16(v0, wh));
		h1 = _mm512_add_epi16(h1, _mm512_maddubs_epi16(v1, wh));
		l0 = _mm512_add_epi16(l0, _mm512_maddubs_epi16(v0, wl));
		l1 = _mm512_add_epi16(l1, _mm512_maddubs_epi16(v1, wl));
	}
	*r1 = _mm512_mulhrs_epi16(_mm512_add_epi16(h1, _mm512_srai_epi16(l1, 7)), k256);
	return _mm512_mulhrs_epi16(_mm512_add_epi16(h0, _mm512_srai_epi16(l0, 7)), k256);
}

/*
 * store2 for rows whose starts are 32-byte aligned and whose length is a multiple
 * of 32 (hwntrow_fn): non-temporal stores, 64 bytes where the line is aligned, else
 * two halves; the last 32 bytes alone when the row ends half way through a vector.
 */
__attribute__((target(AVX512), always_inline)) static inline void
store2_nt(uint8_t *d0, uint8_t *d1, uint32_t at, uint32_t nval, __m512i r0, __m512i r1)
{
	if (at + 64 <= nval) {
		if (((uintptr_t)(d0 + at) & 63) == 0)
			_mm512_stream_si512((void *)(d0 + at), r0);
		else {
			_mm256_stream_si256((__m256i *)(d0 + at), _mm512_castsi512_si256(r0));
			_mm256_stream_si256((__m256i *)(d0 + at + 32),
					    _mm512_extracti64x4_epi64(r0, 1));
		}
		if (((uintptr_t)(d1 + at) & 63) == 0)
			_mm512_stream_si512((void *)(d1 + at), r1);
		else {
			_mm256_stream_si256((__m256i *)(d1 + at), _mm512_castsi512_si256(r1));
			_mm256_stream_si256((__m256i *)(d1 + at + 32),
					    _mm512_extracti64x4_epi64(r1, 1));
		}
	} else {
		_mm256_stream_si256((__m256i *)(d0 + at), _mm512_castsi512_si256(r0));
		_mm256_stream_si256((__m256i *)(d1 + at), _mm512_castsi512_si256(r1));
	}
}

__attribute__((target(AVX512), always_inline)) static inline void
hw_body(uint8_t *restrict d0, uint8_t *restrict d1, const uint8_t *s0, const uint8_t *s1,
	const struct hw_table *t, uint32_t pairs, bool narrow, bool nt)
{
	/* byte 2i of the two groups' words (their low bytes: values 0..255) */
	const __m512i even =
	    _mm512_set_epi8(126, 124, 122, 120, 118, 116, 114, 112, 110, 108, 106, 104, 102, 100,
			    98, 96, 94, 92, 90, 88, 86, 84, 82, 80, 78, 76, 74, 72, 70, 68, 66, 64,
			    62, 60, 58, 56, 54, 52, 50, 48, 46, 44, 42, 40, 38, 36, 34, 32, 30, 28,
			    26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
	size_t gstep = (size_t)pairs * 192;
	const int32_t *base = t->base;
	const uint8_t *blk = t->blk;
	for (uint32_t at = 0; at < t->nval; at += 2 * HW_GROUP, base += 2, blk += 2 * gstep) {
		__m512i b0, b1;
		if (at + HW_GROUP >= t->nval) { /* one group left (672-byte rows: 1 in 22) */
			__m512i a0 = hw_group(s0 + base[0], s1 + base[0], blk, pairs, narrow, &b0);
			__m512i r0 = _mm512_permutexvar_epi8(even, a0);
			__m512i r1 = _mm512_permutexvar_epi8(even, b0);
			if (nt)
				store2_nt(d0, d1, at, t->nval, r0, r1);
			else
				store2(d0, d1, at, t->nval, r0, r1);
			break;
		}
		__m512i a0 = hw_group(s0 + base[0], s1 + base[0], blk, pairs, narrow, &b0);
		__m512i a1 = hw_group(s0 + base[1], s1 + base[1], blk + gstep, pairs, narrow, &b1);
		__m512i r0 = _mm512_permutex2var_epi8(a0, even, a1);
		__m512i r1 = _mm512_permutex2var_epi8(b0, even, b1);
		if (nt)
			store2_nt(d0, d1, at, t->nval, r0, r1);
		else
			store2(d0, d1, at, t->nval, r0, r1);
	}
}

__attribute__((target(AVX512))) LINE_ALIGNED static void
hwrow_avx512(uint8_t *restrict dst0, uint8_t *restrict dst1, const uint8_t *src0,
	     const uint8_t *src1, const struct hw_table *t)
{
	if (t->narrow && t->pairs == 1)
		hw_body(dst0, dst1, src0, src1, t, 1, true, false);
	else if (t->narrow)
		hw_body(dst0, dst1, src0, src1, t, 2, true, false);
	else if (t->pairs == 1)
		hw_body(dst0, dst1, src0, src1, t, 1, false, false);
	else
		hw_body(dst0, dst1, src0, src1, t, 2, false, false);
}

/*
 * hwrow_avx512 with non-temporal stores (hwntrow_fn's conditions). The dispatch is
 * written out twice on purpose: one always_inline helper for both (and a helper for
 * store2_nt's two rows) made gcc 12 lay this function out otherwise, 1-2 us/img
 * slower in aug_bench (3 alternating runs).
 */
__attribute__((target(AVX512))) LINE_ALIGNED static void
hwntrow_avx512(uint8_t *restrict dst0, uint8_t *restrict dst1, const uint8_t *src0,
	       const uint8_t *src1, const struct hw_table *t)
{
	if (t->narrow && t->pairs == 1)
		hw_body(dst0, dst1, src0, src1, t, 1, true, true);
	else if (t->narrow)
		hw_body(dst0, dst1, src0, src1, t, 2, true, true);
	else if (t->pairs == 1)
		hw_body(dst0, dst1, src0, src1, t, 1, false, true);
	else
		hw_body(dst0, dst1, src0, src1, t, 2, false, true);
}

/* ---- AVX-512 VBMI: the horizontal pass fused with the float layouts ---------------- */

/*
 * The horizontal pass and the float layout fused, AVX-512 VBMI, one row (see
 * pxrow_fn): per group hx_group's gather and multiply-adds for one row, then a
 * shift, a conversion, a multiply and an add (not an FMA: frow_c rounds twice)
 * and a store of 16 values into the channel's plane (masked for a ragged last
 * group). No uint8 row, no pack, no deinterleave. One row a call, not two as
 * hxrow, although the second row would share the index and coefficient loads:
 * with rows y and y+1 of a plane stored in turn, float32 took 88-91 us/img
 * against today's path's 74 in aug_bench (the output not in cache), and with
 * row y+1 kept in L1 and copied after row y, 73; one row a call writes each
 * plane row in one run and takes 64-68 (48 against 56 with the output hot).
 * Two groups a step measured no faster. PAIRS, NARROW and F16 are constants
 * after inlining.
 */
__attribute__((target(AVX512), always_inline)) static inline __m512i
px_group(const uint8_t *s, const uint8_t *blk, uint32_t pairs, bool narrow)
{
	const __mmask64 even = 0x5555555555555555ull; /* the low byte of each word */
	__m512i acc = _mm512_set1_epi32(1 << (COEF_BITS - 1));
	__m512i lo = _mm512_loadu_si512(s), hi = lo;
	if (!narrow)
		hi = _mm512_loadu_si512(s + 64);
	for (uint32_t p = 0; p < pairs; p++) {
		__m512i idx = _mm512_loadu_si512(blk + (size_t)p * 8 * HX_GROUP);
		__m512i cf = _mm512_loadu_si512(blk + (size_t)p * 8 * HX_GROUP + 64);
		__m512i v = narrow ? _mm512_maskz_permutexvar_epi8(even, idx, lo)
				   : _mm512_maskz_permutex2var_epi8(even, lo, idx, hi);
		acc = _mm512_add_epi32(acc, _mm512_madd_epi16(v, cf));
	}
	return acc;
}

/*
 * sums -> (sum >> COEF_BITS) * s + b -> 16 values at dst[at], the lanes of m only;
 * whole aligned vectors by non-temporal stores (the planes go to memory unread:
 * float32 augment 62-63 -> 52-53 us/img in aug_bench; gm_aug_sample fences).
 */
__attribute__((target(AVX512), always_inline)) static inline void
px_store(void *dst, size_t at, __m512i sum, __m512 s, __m512 b, __mmask16 m, bool f16)
{
	__m512 f = _mm512_cvtepi32_ps(_mm512_srai_epi32(sum, COEF_BITS));
	f = _mm512_add_ps(_mm512_mul_ps(f, s), b);
	if (f16) {
		__m256i h = _mm512_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT);
		uint16_t *p = (uint16_t *)dst + at;
		if (m == 0xffff && ((uintptr_t)p & 31) == 0)
			_mm256_stream_si256((__m256i *)p, h);
		else if (m == 0xffff)
			_mm256_storeu_si256((__m256i *)p, h);
		else
			_mm512_mask_storeu_epi16(p, m, _mm512_castsi256_si512(h));
	} else if (m == 0xffff && (((uintptr_t)((float *)dst + at)) & 63) == 0) {
		_mm512_stream_ps((float *)dst + at, f);
	} else if (m == 0xffff) {
		_mm512_storeu_ps((float *)dst + at, f);
	} else {
		_mm512_mask_storeu_ps((float *)dst + at, m, f);
	}
}

__attribute__((target(AVX512), always_inline)) static inline void
px_body(void *dst, size_t plane, const uint8_t *src, const struct hx_table *t, const float *scale,
	const float *bias, uint32_t pairs, bool narrow, bool f16)
{
	size_t gstep = (size_t)pairs * 8 * HX_GROUP;
	const int32_t *base = t->base;
	const uint8_t *blk = t->blk;
	uint32_t w = t->nval;
	for (uint32_t c = 0; c < 3; c++) {
		__m512 sc = _mm512_set1_ps(scale[c]), bc = _mm512_set1_ps(bias[c]);
		for (uint32_t x = 0; x < w; x += HX_GROUP, base++, blk += gstep) {
			__mmask16 m = x + HX_GROUP <= w ? (__mmask16)0xffff
							: (__mmask16)((1u << (w - x)) - 1);
			__m512i sum = px_group(src + *base, blk, pairs, narrow);
			px_store(dst, c * plane + x, sum, sc, bc, m, f16);
		}
	}
}

/*
 * px_body specialised for the common tap counts (as hxrow_avx512; one tap pair
 * always fits one source vector: 16 pixels of an upscale span under 64 bytes).
 */
__attribute__((target(AVX512), always_inline)) static inline void
px_pick(void *dst, size_t plane, const uint8_t *src, const struct hx_table *t, const float *scale,
	const float *bias, bool f16)
{
	if (t->narrow && t->pairs == 1)
		px_body(dst, plane, src, t, scale, bias, 1, true, f16);
	else if (t->narrow && t->pairs == 2)
		px_body(dst, plane, src, t, scale, bias, 2, true, f16);
	else if (t->narrow)
		px_body(dst, plane, src, t, scale, bias, t->pairs, true, f16);
	else if (t->pairs == 2)
		px_body(dst, plane, src, t, scale, bias, 2, false, f16);
	else if (t->pairs == 3)
		px_body(dst, plane, src, t, scale, bias, 3, false, f16);
	else
		px_body(dst, plane, src, t, scale, bias, t->pairs, false, f16);
}

__attribute__((target(AVX512))) LINE_ALIGNED static void
pxrow_avx512(float *dst, size_t plane, const uint8_t *src, const struct hx_table *t,
	     const float *scale, const float *bias)
{
	px_pick(dst, plane, src, t, scale, bias, false);
}

__attribute__((target(AVX512))) LINE_ALIGNED static void
hpxrow_avx512(uint16_t *dst, size_t plane, const uint8_t *src, const struct hx_table *t,
	      const float *scale, const float *bias)
{
	px_pick(dst, plane, src, t, scale, bias, true);
}

/* ---- AVX-512: the float32 and float16 layouts, 64 pixels a step -------------------- */

/*
 * The float layout, AVX-512: 64 RGB pixels a step, deinterleaved by two vpermt2b
 * and a blend per channel (a channel's 64 bytes lie in two of the three source
 * vectors), then 16 floats a vector, x * scale + bias as two roundings (a multiply
 * and an add, as frow_c): a third of the AVX2 kernel's instructions a pixel.
 * Reads 192 bytes a step: a ragged end redoes the last 64 pixels; rows of fewer
 * than 64 pixels go to the AVX2 kernel. (Non-temporal stores of the planes,
 * tried with an sfence before the sample is published, made float32 and
 * float16 slower here: min over 5 passes 111-116 against 75.5 us/img.)
 */
struct rgb64 {
	__m512i c[3]; /* R, G, B: 64 bytes each */
};

__attribute__((target(AVX512), always_inline)) static inline struct rgb64
rgb64_split(const uint8_t *rgb)
{
	static const uint8_t ia[3][64] __attribute__((aligned(64))) = {
#define L(c, i) (uint8_t)((3 * (i) + (c)) < 128 ? 3 * (i) + (c) : 3 * (i) + (c)-64)
#define ROW(c)                                                                                     \
	{L(c, 0),  L(c, 1),  L(c, 2),  L(c, 3),	 L(c, 4),  L(c, 5),  L(c, 6),  L(c, 7),            \
	 L(c, 8),  L(c, 9),  L(c, 10), L(c, 11), L(c, 12), L(c, 13), L(c, 14), L(c, 15),           \
	 L(c, 16), L(c, 17), L(c, 18), L(c, 19), L(c, 20), L(c, 21), L(c, 22), L(c, 23),           \
	 L(c, 24), L(c, 25), L(c, 26), L(c, 27), L(c, 28), L(c, 29), L(c, 30), L(c, 31),           \
	 L(c, 32), L(c, 33), L(c, 34), L(c, 35), L(c, 36), L(c, 37), L(c, 38), L(c, 39),           \
	 L(c, 40), L(c, 41), L(c, 42), L(c, 43), L(c, 44), L(c, 45), L(c, 46), L(c, 47),           \
	 L(c, 48), L(c, 49), L(c, 50), L(c, 51), L(c, 52), L(c, 53), L(c, 54), L(c, 55),           \
	 L(c, 56), L(c, 57), L(c, 58), L(c, 59), L(c, 60), L(c, 61), L(c, 62), L(c, 63)}
	    ROW(0), ROW(1), ROW(2)};
#undef ROW
#undef L
	__m512i v0 = _mm512_loadu_si512(rgb), v1 = _mm512_loadu_si512(rgb + 64);
	__m512i v2 = _mm512_loadu_si512(rgb + 128);
	struct rgb64 o;
	for (int c = 0; c < 3; c++) {
		__m512i idx = _mm512_load_si512(ia[c]);
		/* pixel i's byte 3i + c: in v0:v1 below 128 (the index as is), else in
		 * v1:v2 (the index less 64, which the table holds for those lanes) */
		__mmask64 high = ~0ull << (uint32_t)((128 - c + 2) / 3);
		__m512i lo = _mm512_permutex2var_epi8(v0, idx, v1);
		__m512i hi = _mm512_permutex2var_epi8(v1, idx, v2);
		o.c[c] = _mm512_mask_blend_epi8(high, lo, hi);
	}
	return o;
}

/* 16 bytes of a channel -> 16 floats, x * s + b (a multiply, then an add). */
__attribute__((target(AVX512), always_inline)) static inline __m512 ch16_ps(__m512i ch, int q,
									    __m512 s, __m512 b)
{
	__m128i x = q == 0   ? _mm512_castsi512_si128(ch)
		    : q == 1 ? _mm512_extracti32x4_epi32(ch, 1)
		    : q == 2 ? _mm512_extracti32x4_epi32(ch, 2)
			     : _mm512_extracti32x4_epi32(ch, 3);
	return _mm512_add_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(x)), s), b);
}

/* The AVX-512 layout body; f16: float16 planes (a constant after inlining). */
__attribute__((target(AVX512), always_inline)) static inline void
layout_body(void *restrict p0, void *restrict p1, void *restrict p2, const uint8_t *restrict rgb,
	    uint32_t n, const float *scale, const float *bias, bool f16)
{
	__m512 s[3], b[3];
	void *pl[3] = {p0, p1, p2};
	for (int c = 0; c < 3; c++) {
		s[c] = _mm512_set1_ps(scale[c]);
		b[c] = _mm512_set1_ps(bias[c]);
	}
	for (uint32_t x = 0;;) {
		if (x + 64 > n)
			x = n - 64;
		struct rgb64 v = rgb64_split(rgb + 3 * (size_t)x);
		for (int c = 0; c < 3; c++)
			for (int q = 0; q < 4; q++) {
				__m512 f = ch16_ps(v.c[c], q, s[c], b[c]);
				size_t at = (size_t)x + 16 * (size_t)q;
				if (f16)
					_mm256_storeu_si256(
					    (__m256i *)((uint16_t *)pl[c] + at),
					    _mm512_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT));
				else
					_mm512_storeu_ps((float *)pl[c] + at, f);
			}
		x += 64;
		if (x >= n)
			break;
	}
}

/* The float layout of one row (the fallback of the fused kernels); short rows: AVX2. */
__attribute__((target(AVX512))) LINE_ALIGNED static void
frow_avx512(float *restrict p0, float *restrict p1, float *restrict p2, const uint8_t *restrict rgb,
	    uint32_t n, const float *scale, const float *bias)
{
	if (n < 64)
		frow_avx2(p0, p1, p2, rgb, n, scale, bias);
	else
		layout_body(p0, p1, p2, rgb, n, scale, bias, false);
}

__attribute__((target(AVX512))) LINE_ALIGNED static void
hfrow_avx512(uint16_t *restrict p0, uint16_t *restrict p1, uint16_t *restrict p2,
	     const uint8_t *restrict rgb, uint32_t n, const float *scale, const float *bias)
{
	if (n < 64)
		hfrow_c(p0, p1, p2, rgb, n, scale, bias);
	else
		layout_body(p0, p1, p2, rgb, n, scale, bias, true);
}

/* ---- AVX-512 VL: the resize coefficients (axis_build's two passes) ----------------- */

/*
 * axis_build's spans, AVX-512F, 8 outputs a vector (axiss_fn): its double
 * operations lane by lane (floor by a rounding conversion, which ifloor equals in
 * range), then its clamps in 32-bit integers (every bound is an image size).
 */
__attribute__((target("avx512f,avx512vl"))) LINE_ALIGNED static uint32_t
axiss_avx512(struct axis *ax, double b0, double scale, double fscale, uint32_t kmax, uint32_t in,
	     uint32_t out)
{
	const __m512d half = _mm512_set1_pd(0.5), fs = _mm512_set1_pd(fscale);
	const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), z = _mm256_setzero_si256();
	const __m256i last = _mm256_set1_epi32((int)in - 1), km = _mm256_set1_epi32((int)kmax);
	const __m256i one = _mm256_set1_epi32(1);
	__m256i taps = one;
	for (uint32_t i0 = 0; i0 + 8 <= out; i0 += 8) {
		__m512d ii = _mm512_cvtepi32_pd(_mm256_add_epi32(_mm256_set1_epi32((int)i0), lane));
		__m512d center =
		    _mm512_add_pd(_mm512_set1_pd(b0),
				  _mm512_mul_pd(_mm512_add_pd(ii, half), _mm512_set1_pd(scale)));
		__m512d lo = _mm512_sub_pd(_mm512_sub_pd(center, fs), half);
		__m512d hi = _mm512_sub_pd(_mm512_add_pd(center, fs), half);
		/* floor, and -floor(-x) = ceil(x) exactly, in the conversions */
		__m256i f = _mm256_add_epi32(
		    _mm512_cvt_roundpd_epi32(lo, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC), one);
		__m256i l = _mm256_sub_epi32(
		    _mm512_cvt_roundpd_epi32(hi, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC), one);
		f = _mm256_max_epi32(f, z);
		l = _mm256_min_epi32(l, last);
		__mmask8 wide =
		    _mm256_cmpgt_epi32_mask(_mm256_add_epi32(_mm256_sub_epi32(l, f), one), km);
		l = _mm256_mask_mov_epi32(l, wide, _mm256_sub_epi32(_mm256_add_epi32(f, km), one));
		__mmask8 none = _mm256_cmpgt_epi32_mask(f, l);
		if (none) { /* no sample under the filter: nearest one (rare) */
			__m256i t = _mm512_cvttpd_epi32(center);
			t = _mm256_mask_mov_epi32(
			    t, _mm512_cmp_pd_mask(center, _mm512_set1_pd((double)in), _CMP_GE_OQ),
			    last);
			t = _mm256_mask_mov_epi32(
			    t, _mm512_cmp_pd_mask(center, _mm512_setzero_pd(), _CMP_LT_OQ), z);
			f = _mm256_mask_mov_epi32(f, none, t);
			l = _mm256_mask_mov_epi32(l, none, t);
		}
		__m256i n = _mm256_add_epi32(_mm256_sub_epi32(l, f), one);
		_mm256_storeu_si256((__m256i *)(ax->first + i0), f);
		_mm256_storeu_si256((__m256i *)(ax->count + i0), n);
		taps = _mm256_max_epi32(taps, n);
	}
	return (uint32_t)_mm512_reduce_max_epi32(_mm512_inserti64x4(_mm512_set1_epi32(1), taps, 0));
}

/*
 * The lanes' integers v[k] (tap k of output i0 + l in lane l; the first largest,
 * tap big, takes the rounding rest COEF_ONE - total) laid out as axis_weights lays
 * them: 8 x taps int16 to their slots by word permutes (idx: axisw_index's) and at
 * most two stores. A run that starts off taps past its slot's first tap (the
 * image's last columns: start = in - taps) takes its words from off taps earlier.
 */
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) static inline void
axisw_store(struct axis *ax, const __m256i *v, __m256i big, __m256i total, __m256i start,
	    __m256i off, const __m512i idx[2], uint32_t i0, uint32_t out, bool mirror,
	    const uint32_t taps)
{
	const uint32_t n = 8 * taps;
	const __m256i rest = _mm256_sub_epi32(_mm256_set1_epi32(COEF_ONE), total);
	__m256i w[AXISW_MAX_TAPS];
#pragma GCC unroll 8
	for (uint32_t k = 0; k < AXISW_MAX_TAPS; k++) {
		if (k >= taps) { /* big < taps */
			w[k] = _mm256_setzero_si256();
			continue;
		}
		__mmask8 top = _mm256_cmpeq_epi32_mask(big, _mm256_set1_epi32((int)k));
		w[k] = _mm256_mask_add_epi32(v[k], top, v[k], rest);
	}
	__m512i z[2] = {_mm512_setzero_si512(),
			_mm512_setzero_si512()}; /* tap t of lane l: t * 8 + l */
	for (int h = 0; h < (taps > 4 ? 2 : 1); h++) {
		__m256i a = _mm512_cvtepi32_epi16(
		    _mm512_inserti64x4(_mm512_castsi256_si512(w[4 * h]), w[4 * h + 1], 1));
		__m256i b = _mm512_cvtepi32_epi16(
		    _mm512_inserti64x4(_mm512_castsi256_si512(w[4 * h + 2]), w[4 * h + 3], 1));
		z[h] = _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1);
	}
	__m512i src[2] = {idx[0], idx[1]};
	if (_mm256_test_epi32_mask(off, off)) {
		/*
		 * word (slot, t) <- tap t - off of its lane: idx - 8 off. Below tap 0 the
		 * index wraps (the permute reads its low 6 bits) to tap 8 - off + t >= n +
		 * t (off + n <= taps <= 8), which is 0 in every lane: the zeros before
		 * the run come for free.
		 */
		__m512i o =
		    _mm512_castsi256_si512(_mm256_castsi128_si256(_mm256_cvtepi32_epi16(off)));
		for (int h = 0; h < 2; h++) {
			__m512i ow = _mm512_permutexvar_epi16(
			    _mm512_and_si512(idx[h], _mm512_set1_epi16(7)), o);
			src[h] = _mm512_sub_epi16(idx[h], _mm512_slli_epi16(ow, 3));
		}
	}
	uint32_t slot = mirror ? out - 8 - i0 : i0;
	int16_t *c = ax->coef + (size_t)slot * taps;
	_mm512_mask_storeu_epi16(c, n >= 32 ? ~0u : (1u << n) - 1,
				 _mm512_permutex2var_epi16(z[0], src[0], z[1]));
	if (n > 32)
		_mm512_mask_storeu_epi16(c + 32, n >= 64 ? ~0u : (1u << (n - 32)) - 1,
					 _mm512_permutex2var_epi16(z[0], src[1], z[1]));
	if (mirror)
		start = _mm256_permutexvar_epi32(_mm256_setr_epi32(7, 6, 5, 4, 3, 2, 1, 0), start);
	_mm256_storeu_si256((__m256i *)(ax->min + slot), start);
}

/* axisw_store's word permute: word s * taps + t of 8 slots <- tap t of lane s (mirror: 7 - s). */
__attribute__((target("avx512f"))) static void axisw_index(__m512i idx[2], uint32_t taps,
							   bool mirror)
{
	uint16_t x[64] = {0};
	for (uint32_t s = 0; s < 8; s++)
		for (uint32_t t = 0; t < taps; t++)
			x[s * taps + t] = (uint16_t)(t * 8 + (mirror ? 7 - s : s));
	idx[0] = _mm512_loadu_si512(x);
	idx[1] = _mm512_loadu_si512(x + 32);
}

/*
 * axis_build's weights, AVX-512F, 8 outputs a vector (axisw_fn): axis_weights'
 * double operations in its order, lane by lane (the span's taps past count add
 * +0.0 to the sum, which leaves it as it is), then the lanes' integers laid out as
 * axis_weights lays them, by permutes (axisw_store). A scalar loop over outputs
 * spent most of its time in loops of 1 to taps trips whose exits it mispredicted,
 * and then a scatter of the 8 x taps values one at a time most of the rest.
 */
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) static inline void
axisw_run(struct axis *ax, double b0, double scale, double inv, uint32_t in, uint32_t out,
	  bool mirror, const uint32_t taps)
{
	const __m512d half = _mm512_set1_pd(0.5), one = _mm512_set1_pd(1.0);
	const __m512d zero = _mm512_setzero_pd(), cone = _mm512_set1_pd((double)COEF_ONE);
	const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
	const __m256i edge = _mm256_set1_epi32((int)in - (int)taps); /* the last run's start */
	__m512d w[AXISW_MAX_TAPS], kd[AXISW_MAX_TAPS];
	__m256i v[AXISW_MAX_TAPS], ki[AXISW_MAX_TAPS];
	__m512i idx[2];

	axisw_index(idx, taps, mirror);
	for (uint32_t k = 0; k < taps; k++) { /* loaded, not rebuilt, in the loops below */
		kd[k] = _mm512_set1_pd((double)k);
		ki[k] = _mm256_set1_epi32((int)k);
	}
	for (uint32_t i0 = 0; i0 + 8 <= out; i0 += 8) {
		__m256i fi = _mm256_loadu_si256((const __m256i *)(ax->first + i0));
		__m256i ni = _mm256_loadu_si256((const __m256i *)(ax->count + i0));
		__m512d ii = _mm512_cvtepi32_pd(_mm256_add_epi32(_mm256_set1_epi32((int)i0), lane));
		__m512d center =
		    _mm512_add_pd(_mm512_set1_pd(b0),
				  _mm512_mul_pd(_mm512_add_pd(ii, half), _mm512_set1_pd(scale)));
		__m512d fd = _mm512_cvtepi32_pd(fi), sum = zero;
#pragma GCC unroll 8
		for (uint32_t k = 0; k < taps; k++) {
			__mmask8 run = _mm256_cmpgt_epi32_mask(ni, ki[k]);
			__m512d x = _mm512_sub_pd(_mm512_add_pd(fd, kd[k]), center);
			x = _mm512_mul_pd(_mm512_add_pd(x, half), _mm512_set1_pd(inv));
			__m512d val = _mm512_max_pd(_mm512_sub_pd(one, _mm512_abs_pd(x)), zero);
			w[k] = _mm512_maskz_mov_pd(run, val);
			sum = _mm512_add_pd(sum, w[k]);
		}
		__m512d rs =
		    _mm512_maskz_div_pd(_mm512_cmp_pd_mask(sum, zero, _CMP_GT_OQ), cone, sum);
		__m256i total = _mm256_setzero_si256(), big = _mm256_setzero_si256();
		__m256i bigv = _mm256_set1_epi32(-1);
#pragma GCC unroll 8
		for (uint32_t k = 0; k < taps; k++) {
			__mmask8 run = _mm256_cmpgt_epi32_mask(ni, ki[k]);
			v[k] = _mm256_maskz_mov_epi32(
			    run, _mm512_cvttpd_epi32(_mm512_add_pd(_mm512_mul_pd(w[k], rs), half)));
			total = _mm256_add_epi32(total, v[k]);
			__mmask8 gt = _mm256_mask_cmpgt_epi32_mask(run, v[k], bigv);
			big = _mm256_mask_mov_epi32(big, gt, ki[k]);
			bigv = _mm256_mask_mov_epi32(bigv, gt, v[k]);
		}
		__m256i start = _mm256_min_epi32(fi, edge);
		axisw_store(ax, v, big, total, start, _mm256_sub_epi32(fi, start), idx, i0, out,
			    mirror, taps);
	}
}

/* axisw_fn: axisw_run made once for each tap count, its loops unrolled. */
__attribute__((target("avx512f,avx512bw,avx512vl"))) LINE_ALIGNED static void
axisw_avx512(struct axis *ax, double b0, double scale, double inv, uint32_t in, uint32_t out,
	     bool mirror)
{
	switch (ax->taps) {
	case 1:
		axisw_run(ax, b0, scale, inv, in, out, mirror, 1);
		break;
	case 2:
		axisw_run(ax, b0, scale, inv, in, out, mirror, 2);
		break;
	case 3:
		axisw_run(ax, b0, scale, inv, in, out, mirror, 3);
		break;
	case 4:
		axisw_run(ax, b0, scale, inv, in, out, mirror, 4);
		break;
	case 5:
		axisw_run(ax, b0, scale, inv, in, out, mirror, 5);
		break;
	case 6:
		axisw_run(ax, b0, scale, inv, in, out, mirror, 6);
		break;
	case 7:
		axisw_run(ax, b0, scale, inv, in, out, mirror, 7);
		break;
	default:
		axisw_run(ax, b0, scale, inv, in, out, mirror, 8);
		break;
	}
}

/* ---- AVX-512 VBMI: the gather tables (hx_build, px_build) -------------------------- */

/*
 * hx_build's and px_build's tables, AVX-512 (hxb_fn): a group's 16 lanes as
 * vectors. Lane l's pixel ox (hx_build: byte j = min(16g + l, nval - 1), ox = j / 3
 * by a multiply, channel j - 3 ox; px_build: min(x0 + l, x1 - 1)) picks its min[]
 * and coefficient pairs by permutes from loads at the group's first pixels, with
 * no per-lane loop; then the same bytes as hx_lane, stored a vector at a time.
 */

/* Words [0, 64) of the coefficients from pixel r on, none past the axis's end. */
__attribute__((target("avx512f,avx512bw"))) static inline void
hxb_load(__m512i v[2], const struct axis *ax, uint32_t out, uint32_t r)
{
	const int16_t *c = ax->coef + (size_t)r * ax->taps;
	uint32_t avail = (out - r) * ax->taps; /* words left from pixel r, >= taps */
	__mmask32 m0 = avail >= 32 ? ~0u : (1u << avail) - 1;
	__mmask32 m1 = avail >= 64 ? ~0u : avail <= 32 ? 0 : (1u << (avail - 32)) - 1;
	v[0] = _mm512_maskz_loadu_epi16(m0, c);
	v[1] = _mm512_maskz_loadu_epi16(m1, c + 32);
}

/*
 * One group's lanes: ox (pixel of each lane; all within 8 pixels from r0, or when
 * split lanes 0-7 from r0 and 8-15 from r1, each within 8 pixels), chan (byte of
 * the pixel, 0 for planar), far0 (bytes the last tap adds to the window); writes
 * the group at gb and its base at *base, or returns false when the window is over
 * HX_WINDOW (*narrow cleared past 64 bytes).
 */
__attribute__((target("avx512f,avx512bw,avx512vbmi"), always_inline)) static inline bool
hxb_group(uint8_t *gb, int32_t *base, const struct axis *ax, uint32_t out, __m512i ox, __m512i chan,
	  uint32_t r0, uint32_t r1, bool split, int32_t far0, bool *narrow)
{
	const uint32_t taps = ax->taps, pairs = (taps + 1) / 2;
	uint32_t avail = out - r0;
	__m512i mv =
	    _mm512_maskz_loadu_epi32(avail >= 16 ? 0xffff : (1u << avail) - 1, ax->min + r0);
	mv = _mm512_permutexvar_epi32(_mm512_sub_epi32(ox, _mm512_set1_epi32((int)r0)), mv);
	int32_t b = _mm512_reduce_min_epi32(mv), far = _mm512_reduce_max_epi32(mv) - b + far0;
	if (far >= HX_WINDOW)
		return false;
	*narrow = *narrow && far < 64;
	__m512i at = _mm512_add_epi32(_mm512_sub_epi32(mv, _mm512_set1_epi32(b)), chan);
	__m512i rv = _mm512_set1_epi32((int)r0), a[2], c[2];
	hxb_load(a, ax, out, r0);
	if (split) {
		rv = _mm512_mask_set1_epi32(rv, 0xff00, (int)r1);
		hxb_load(c, ax, out, r1);
	}
	/* word index of the lane's first coefficient in its half's load, in both words */
	__m512i rel =
	    _mm512_mullo_epi32(_mm512_sub_epi32(ox, rv), _mm512_set1_epi32((int)taps * 0x10001));
	for (uint32_t p = 0; p < pairs; p++) {
		bool two = 2 * p + 1 < taps; /* else tap 2p is the last: no second one */
		__m512i i0 = _mm512_add_epi32(at, _mm512_set1_epi32((int)(6 * p)));
		__m512i i1 = _mm512_add_epi32(i0, _mm512_set1_epi32(two ? 3 : 0));
		__m512i w =
		    _mm512_add_epi32(rel, _mm512_set1_epi32((int)(2 * p) | (int)(2 * p + 1) << 16));
		__m512i cw = _mm512_permutex2var_epi16(a[0], w, a[1]);
		if (split)
			cw = _mm512_mask_mov_epi32(cw, 0xff00,
						   _mm512_permutex2var_epi16(c[0], w, c[1]));
		cw = two ? cw : _mm512_and_si512(cw, _mm512_set1_epi32(0xffff));
		_mm512_storeu_si512(gb + (size_t)p * 8 * HX_GROUP,
				    _mm512_or_si512(i0, _mm512_slli_epi32(i1, 16)));
		_mm512_storeu_si512(gb + (size_t)p * 8 * HX_GROUP + 4 * HX_GROUP, cw);
	}
	*base = b;
	return true;
}

/* hx_build's interleaved table (pixels' bytes in order). */
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) static bool
hxb_rgb(struct hx_table *t, int32_t *base, uint8_t *blk, const struct axis *ax, uint32_t out_w)
{
	const uint32_t nval = 3 * out_w, pairs = t->pairs;
	const __m512i lane =
	    _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
	const __m512i last = _mm512_set1_epi32((int)nval - 1), third = _mm512_set1_epi32(43691);
	bool narrow = true;
	for (uint32_t g = 0; g < t->groups; g++) {
		/* byte j of the row; j / 3 = (j * 43691) >> 17 for every j < 2^16 */
		__m512i j = _mm512_min_epi32(
		    _mm512_add_epi32(_mm512_set1_epi32((int)(g * HX_GROUP)), lane), last);
		__m512i ox = _mm512_srli_epi32(_mm512_mullo_epi32(j, third), 17);
		__m512i chan = _mm512_sub_epi32(j, _mm512_mullo_epi32(ox, _mm512_set1_epi32(3)));
		uint32_t j0 = g * HX_GROUP < nval ? g * HX_GROUP : nval - 1;
		/* 16 bytes are at most 6 pixels: one load reaches them all */
		if (!hxb_group(blk + (size_t)g * pairs * 8 * HX_GROUP, base + g, ax, out_w, ox,
			       chan, j0 / 3, 0, false, 3 * (int32_t)ax->taps - 1, &narrow))
			return false;
	}
	t->narrow = narrow;
	return true;
}

/* px_build's planar table: a group per 16 pixels, the same lanes for each channel. */
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) static bool
hxb_planar(struct hx_table *t, int32_t *base, uint8_t *blk, const struct axis *ax, uint32_t out_w)
{
	const uint32_t gpp = t->groups / 3;
	const size_t gstep = (size_t)t->pairs * 8 * HX_GROUP;
	const __m512i lane =
	    _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
	bool narrow = true;
	for (uint32_t q = 0; q < gpp; q++) {
		uint32_t x0 = q * HX_GROUP, n = out_w - x0 < HX_GROUP ? out_w - x0 : HX_GROUP;
		__m512i ox = _mm512_add_epi32(_mm512_min_epi32(lane, _mm512_set1_epi32((int)n - 1)),
					      _mm512_set1_epi32((int)x0));
		uint8_t *gb = blk + (size_t)q * gstep;
		if (!hxb_group(gb, base + q, ax, out_w, ox, _mm512_setzero_si512(), x0,
			       x0 + (n > 8 ? 8 : n - 1), true, 3 * ((int32_t)ax->taps - 1),
			       &narrow))
			return false;
		base[gpp + q] = base[q] + 1;
		base[2 * gpp + q] = base[q] + 2;
		memcpy(blk + (size_t)(gpp + q) * gstep, gb, gstep);
		memcpy(blk + (size_t)(2 * gpp + q) * gstep, gb, gstep);
	}
	t->narrow = narrow;
	return true;
}

/* hxb_fn: the header as hx_build / px_build set it, then the groups. */
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) LINE_ALIGNED static bool
hxb_avx512(struct hx_table *t, int32_t *base, uint8_t *blk, const struct axis *ax, uint32_t out_w,
	   bool planar)
{
	uint32_t pairs = (ax->taps + 1) / 2, nval = 3 * out_w;
	t->pairs = pairs;
	t->groups = planar ? 3 * ((out_w + HX_GROUP - 1) / HX_GROUP)
			   : (nval + 4 * HX_GROUP - 1) / (4 * HX_GROUP) * 4;
	t->nval = planar ? out_w : nval;
	t->base = base;
	t->blk = blk;
	return planar ? hxb_planar(t, base, blk, ax, out_w) : hxb_rgb(t, base, blk, ax, out_w);
}

/* ---- the dispatch ladder: cpuid, once per handle ----------------------------------- */

void gm_aug_simd_pick(struct aug_kernels *k, enum aug_simd_level max)
{
	__builtin_cpu_init();
	if (max < AUG_SIMD_SSE)
		return;
	k->vrow = vrow_sse2;
	if (__builtin_cpu_supports("ssse3"))
		k->hrow = hrow_ssse3;
	if (max < AUG_SIMD_AVX2 || !__builtin_cpu_supports("avx2"))
		return;
	k->vrow = vrow_avx2;
	k->hrow2 = hrow2_avx2;
	k->frow = frow_avx2;
	unsigned eax, ebx, ecx, edx; /* clang 14's builtin does not know "f16c" */
	if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C))
		k->hfrow = hfrow_avx2;
	if (max < AUG_SIMD_AVX512 || !__builtin_cpu_supports("avx512f") ||
	    !__builtin_cpu_supports("avx512bw") || !__builtin_cpu_supports("avx512vbmi"))
		return;
	k->vrow = vrow_avx512;
	k->vwrow = vwrow_avx512;
	if (__builtin_cpu_supports("avx512vl")) {
		k->vws = vws_avx512;
		k->hwg = hwg_avx512;
		k->axiss = axiss_avx512;
		k->axisw = axisw_avx512;
	}
	if (max >= AUG_SIMD_VNNI && __builtin_cpu_supports("avx512vnni")) {
		k->vrow = vrow_avx512vnni;
		k->vwrow = vwrow_avx512vnni;
	}
	k->hxrow = hxrow_avx512;
	k->hwrow = hwrow_avx512;
	k->hwntrow = hwntrow_avx512;
	k->ntcopy = ntcopy_avx512;
	k->ntfence = ntfence_sse;
	k->hxb = hxb_avx512;
	k->pxrow = pxrow_avx512;
	k->hpxrow = hpxrow_avx512;
	k->frow = frow_avx512;
	if (k->hfrow == hfrow_avx2)
		k->hfrow = hfrow_avx512;
}
#else
void gm_aug_simd_pick(struct aug_kernels *k, enum aug_simd_level max)
{
	(void)k; /* no SIMD kernels for this architecture: the portable ones stay */
	(void)max;
}
#endif
