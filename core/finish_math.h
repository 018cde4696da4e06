/*
 * finish_math.h - the GPU decode's second half, written once: a rebuilt window's
 * resize (goldminer's train resize and PIL's eval resize, with their taps and
 * their rounding), the flip (mirrored taps), the colour jitter and the output
 * layout (uint8 HWC, float32 CHW, float16 CHW), one output element or pixel a
 * call. A C compiler builds it into the host path (aug.c's
 * gm_aug_coef_finish_shared); nvcc builds the same functions into the CUDA kernels
 * (coef_kernels.cu). GM_FM is `static inline` for C and `__host__ __device__`
 * inline under nvcc (built with -fmad=false: every float multiply and add is
 * rounded on its own, as the C build does them without FMA).
 *
 * The arithmetic restated from the CPU path (whose SIMD kernels compute the same
 * integers and float bits as their scalar twins, aug_simd.h):
 *   - train: the vertical pass first, 14-bit weights, the sum + 2^13 shifted by 14
 *     to a byte (vrow_c), then the horizontal pass the same way over those bytes
 *     (hrow_c): an output element is its horizontal taps over its vertical sums;
 *   - eval: PIL's order (resample.c): the horizontal pass first, 22-bit weights,
 *     the sum + 2^21 clipped to a byte (clip8), then the vertical one;
 *   - float32: byte * (1 / (255 std)) + (-mean / std), a multiply then an add
 *     (frow_c); float16: that value rounded to nearest even (gm_f32_to_f16, which
 *     is this file's gm_fm_f32_to_f16);
 *   - colour jitter (jitter.c): the byte * (1/255), the drawn ops in their order
 *     (brightness, contrast against the gray mean of the whole sample as it stands
 *     before the contrast op, saturation, hue), then uint8 (x * 255 + 0.5
 *     truncated) or (x * (1/std) + (-mean/std)) as float32 or float16. The gray
 *     mean's summation order is jitter.c's: 16 float lanes, each added into a
 *     double every 64 blocks of 16 pixels, lane by lane, the rest pixel by pixel.
 *
 * The taps are computed on the host once per sample (aug.c's axis_build for train,
 * resample.c's gm_rs_axis for eval) into a plan (struct gm_fm_plan), which travels
 * with the slot.
 *
 * Not here: the window's decode (coef_math.h), choosing the crop, flip and jitter
 * draws (aug.c, jitter.c: the slot carries them).
 */
#ifndef GM_CORE_FINISH_MATH_H
#define GM_CORE_FINISH_MATH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define GM_FM __host__ __device__ __forceinline__ static
#else
#define GM_FM static inline
#endif

#define GM_FM_TRAIN_BITS 14 /* aug_simd.h's COEF_BITS */
#define GM_FM_EVAL_BITS	 22 /* resample.c's PREC, PIL's */
#define GM_FM_LANES	 16 /* jitter.c's BLK: the gray mean's float lanes */
#define GM_FM_FLUSH	 64 /* blocks a lane adds before its sum goes to the double */

/*
 * One sample's finish: a header, then for each axis (x at off_x, y at off_y, from
 * the plan's start, 4-aligned) lo[size] (first source pixel of each output, in the
 * window), n[size] (its taps) and w[size * k] (its weights, k apart; int32).
 */
struct gm_fm_plan {
	uint32_t bytes;	       /* the plan, arrays included */
	uint32_t size;	       /* output side */
	uint32_t win_w, win_h; /* the window it reads (the slot's rw x rh) */
	uint8_t eval;	       /* 1: PIL's order and weights; 0: the train resize's */
	uint8_t out;	       /* enum gm_out_type */
	uint8_t jit_n;	       /* colour jitter ops drawn, 0..4 */
	uint8_t jitter;	       /* 1: the spec jitters: the jitter's float path, any jit_n */
	uint8_t jit_order[4];
	float jit_factor[4];
	float scale[3], bias[3]; /* the float layout: from bytes, or (jitter) from [0,1] */
	uint32_t kx, ky;	 /* weights stored per output, each axis */
	uint32_t off_x, off_y;
};

GM_FM const int32_t *gm_fm_axis(const struct gm_fm_plan *p, int y)
{
	return (const int32_t *)(const void *)((const uint8_t *)p + (y ? p->off_y : p->off_x));
}

/* Bytes of a plan of side size with k weights an output on each axis. */
GM_FM size_t gm_fm_plan_bytes(uint32_t size, uint32_t kx, uint32_t ky)
{
	return sizeof(struct gm_fm_plan) + 4 * (size_t)size * (4 + kx + ky);
}

/* Train: output element (oy, ox, channel c) of window src (stride bytes a row). */
GM_FM uint8_t gm_fm_train_at(const struct gm_fm_plan *p, const uint8_t *src, size_t stride,
			     uint32_t oy, uint32_t ox, uint32_t c)
{
	const int32_t *ax = gm_fm_axis(p, 0), *ay = gm_fm_axis(p, 1);
	uint32_t s = p->size;
	int32_t xlo = ax[ox], xn = ax[s + ox], ylo = ay[oy], yn = ay[s + oy];
	const int32_t *wx = ax + 2 * s + (size_t)ox * p->kx, *wy = ay + 2 * s + (size_t)oy * p->ky;
	int32_t acc = 1 << (GM_FM_TRAIN_BITS - 1);
	for (int32_t kx = 0; kx < xn; kx++) {
		const uint8_t *col = src + (size_t)ylo * stride + 3 * (size_t)(xlo + kx) + c;
		int32_t v = 1 << (GM_FM_TRAIN_BITS - 1);
		for (int32_t ky = 0; ky < yn; ky++)
			v += col[(size_t)ky * stride] * wy[ky];
		acc += (uint8_t)(v >> GM_FM_TRAIN_BITS) * wx[kx];
	}
	return (uint8_t)(acc >> GM_FM_TRAIN_BITS);
}

/* PIL's rounding of a 22-bit sum to a byte (resample.c's clip8) */
GM_FM uint8_t gm_fm_clip8(int32_t v)
{
	if (v >= (1 << GM_FM_EVAL_BITS << 8))
		return 255;
	return v <= 0 ? 0 : (uint8_t)(v >> GM_FM_EVAL_BITS);
}

/* Eval: output element (oy, ox, c), horizontal pass first. */
GM_FM uint8_t gm_fm_eval_at(const struct gm_fm_plan *p, const uint8_t *src, size_t stride,
			    uint32_t oy, uint32_t ox, uint32_t c)
{
	const int32_t *ax = gm_fm_axis(p, 0), *ay = gm_fm_axis(p, 1);
	uint32_t s = p->size;
	int32_t xlo = ax[ox], xn = ax[s + ox], ylo = ay[oy], yn = ay[s + oy];
	const int32_t *wx = ax + 2 * s + (size_t)ox * p->kx, *wy = ay + 2 * s + (size_t)oy * p->ky;
	int32_t acc = 1 << (GM_FM_EVAL_BITS - 1);
	for (int32_t ky = 0; ky < yn; ky++) {
		const uint8_t *row = src + (size_t)(ylo + ky) * stride + 3 * (size_t)xlo + c;
		int32_t h = 1 << (GM_FM_EVAL_BITS - 1);
		for (int32_t kx = 0; kx < xn; kx++)
			h += row[3 * kx] * wx[kx];
		acc += gm_fm_clip8(h) * wy[ky];
	}
	return gm_fm_clip8(acc);
}

/* The resized byte of output element (oy, ox, c), by the plan's mode. */
GM_FM uint8_t gm_fm_resized(const struct gm_fm_plan *p, const uint8_t *src, size_t stride,
			    uint32_t oy, uint32_t ox, uint32_t c)
{
	return p->eval ? gm_fm_eval_at(p, src, stride, oy, ox, c)
		       : gm_fm_train_at(p, src, stride, oy, ox, c);
}

GM_FM uint32_t gm_fm_bits(float f)
{
#ifdef __CUDA_ARCH__
	return __float_as_uint(f);
#else
	uint32_t x;
	memcpy(&x, &f, sizeof(x));
	return x;
#endif
}

GM_FM float gm_fm_float(uint32_t x)
{
#ifdef __CUDA_ARCH__
	return __uint_as_float(x);
#else
	float f;
	memcpy(&f, &x, sizeof(f));
	return f;
#endif
}

/*
 * IEEE float -> half, round to nearest even, the result vcvtps2ph gives (NaN kept
 * quiet with the top payload bits); aug.c's gm_f32_to_f16 is this function.
 */
GM_FM uint16_t gm_fm_f32_to_f16(float f)
{
	uint32_t x = gm_fm_bits(f);
	uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
	uint32_t ax = x & 0x7fffffffu;
	if (ax >= 0x7f800000u) /* inf, NaN */
		return (uint16_t)(sign | 0x7c00u |
				  (ax > 0x7f800000u ? 0x200u | ((ax >> 13) & 0x3ffu) : 0));
	if (ax >= 0x477ff000u) /* >= 65520: rounds past the largest half, 65504 */
		return (uint16_t)(sign | 0x7c00u);
	if (ax < 0x38800000u) {
		/*
		 * Below 2^-14, a half subnormal (or zero): units of 2^-24. Adding 0.5f
		 * puts the value's 2^-24 bit at the float's last mantissa bit, so the FPU's
		 * own round-to-nearest-even does the rounding; what is above 0.5 is the
		 * result.
		 */
		float v = gm_fm_float(ax) + 0.5f;
		return (uint16_t)(sign | (gm_fm_bits(v) - gm_fm_bits(0.5f)));
	}
	/* Normal: rebias the exponent (127 -> 15) and round the 13 dropped bits to even. */
	uint32_t odd = (ax >> 13) & 1u;
	ax += 0xc8000fffu + odd; /* (15 - 127) << 23, + just under half an ulp, + odd */
	return (uint16_t)(sign | (ax >> 13));
}

/* Element (oy, ox, c) of value v (a float's bits for float32) into out's layout:
 * uint8 HWC, float32 or float16 CHW (enum gm_out_type's 0, 1, 2). */
GM_FM void gm_fm_store(const struct gm_fm_plan *p, void *out, uint32_t oy, uint32_t ox, uint32_t c,
		       uint8_t byte, float v)
{
	size_t s = p->size, at = c * s * s + (size_t)oy * s + ox;
	if (p->out == 0)
		((uint8_t *)out)[((size_t)oy * s + ox) * 3 + c] = byte;
	else if (p->out == 1)
		((float *)out)[at] = v;
	else
		((uint16_t *)out)[at] = gm_fm_f32_to_f16(v);
}

/* Without jitter: the resized byte of element (oy, ox, c) laid out (frow_c's float). */
GM_FM void gm_fm_layout(const struct gm_fm_plan *p, void *out, uint32_t oy, uint32_t ox, uint32_t c,
			uint8_t byte)
{
	float v = 0.0f;
	if (p->out != 0)
		v = (float)byte * p->scale[c] + p->bias[c];
	gm_fm_store(p, out, oy, ox, c, byte, v);
}

/* ---- colour jitter (jitter.c's float operations, one pixel at a time) ---------- */

GM_FM float gm_fm_clamp01(float v)
{
	v = v < 0.0f ? 0.0f : v;
	return v > 1.0f ? 1.0f : v;
}

GM_FM float gm_fm_gray(float r, float g, float b)
{
	return 0.2989f * r + 0.587f * g + 0.114f * b;
}

/*
 * One pixel's hue turned by f (a fraction of the circle, |f| <= 0.5):
 * torchvision's tensor _rgb2hsv, (h + f) mod 1, _hsv2rgb, step for step in
 * float; the CPU path's too (jitter.c's hue). The two modulos are written as the
 * one subtraction or addition they come to in their ranges (the same float
 * operation as torch's fmod and remainder there), the sector as a truncation of
 * a non-negative value: no libm call. (gcc -O2 leaves the CPU's loop scalar:
 * about 0.4 ms a 224 x 224 sample; torchvision's 0/1-mask sums, tried for
 * vectorisation, cost twice that.)
 */
GM_FM void gm_fm_hue(float *px, float f)
{
	float r = px[0], g = px[1], b = px[2];
	float maxc = r > g ? r : g, minc = r < g ? r : g;
	maxc = maxc > b ? maxc : b;
	minc = minc < b ? minc : b;
	float cr = maxc - minc, crd = maxc == minc ? 1.0f : cr;
	float s = cr / (maxc == minc ? 1.0f : maxc);
	float rc = (maxc - r) / crd, gc = (maxc - g) / crd, bc = (maxc - b) / crd;
	float h = maxc == r ? bc - gc : maxc == g ? 2.0f + rc - bc : 4.0f + gc - rc;
	h = h / 6.0f + 1.0f;
	h = h >= 1.0f ? h - 1.0f : h;
	h = h + f;
	h = h < 0.0f ? h + 1.0f : h >= 1.0f ? h - 1.0f : h;
	int k = (int)(h * 6.0f);
	float fr = h * 6.0f - (float)k, v = maxc;
	float p = gm_fm_clamp01(v * (1.0f - s)), q = gm_fm_clamp01(v * (1.0f - s * fr));
	float t = gm_fm_clamp01(v * (1.0f - s * (1.0f - fr)));
	k = k == 6 ? 0 : k;
	px[0] = k == 0 || k == 5 ? v : k == 1 ? q : k == 4 ? t : p;
	px[1] = k == 1 || k == 2 ? v : k == 0 ? t : k == 3 ? q : p;
	px[2] = k == 3 || k == 4 ? v : k == 2 ? t : k == 5 ? q : p;
}

/* The resized pixel at hwc (3 bytes) as [0,1] floats, then ops [0, upto) of the
 * plan's jitter; mean: the gray mean the contrast op uses (when it is among them). */
GM_FM void gm_fm_jitter_px(const struct gm_fm_plan *p, const uint8_t *hwc, uint32_t upto,
			   float mean, float *px)
{
	const float inv = 1.0f / 255.0f;
	for (int c = 0; c < 3; c++)
		px[c] = hwc[c] * inv;
	for (uint32_t k = 0; k < upto && k < p->jit_n && k < 4; k++) {
		uint32_t op = p->jit_order[k];
		float f = p->jit_factor[op & 3];
		if (op == 0 || op == 1) { /* brightness, contrast */
			float add = op == 0 ? 0.0f : (1.0f - f) * mean;
			for (int c = 0; c < 3; c++)
				px[c] = gm_fm_clamp01(f * px[c] + add);
		} else if (op == 2) { /* saturation */
			float y = (1.0f - f) * gm_fm_gray(px[0], px[1], px[2]);
			for (int c = 0; c < 3; c++)
				px[c] = gm_fm_clamp01(f * px[c] + y);
		} else {
			gm_fm_hue(px, f);
		}
	}
}

/* Which op is the contrast one (the only op reading the whole sample), or jit_n. */
GM_FM uint32_t gm_fm_contrast_at(const struct gm_fm_plan *p)
{
	for (uint32_t k = 0; k < p->jit_n && k < 4; k++)
		if (p->jit_order[k] == 1)
			return k;
	return p->jit_n;
}

/* Lane `lane`'s float sum of the gray values over blocks [b0, b1) of 16 pixels of
 * the resized sample hwc, each pixel jittered by the ops before the contrast one. */
GM_FM float gm_fm_gray_part(const struct gm_fm_plan *p, const uint8_t *hwc, uint32_t lane,
			    size_t b0, size_t b1)
{
	uint32_t upto = gm_fm_contrast_at(p);
	float part = 0.0f, px[3];
	for (size_t b = b0; b < b1; b++) {
		gm_fm_jitter_px(p, hwc + 3 * (b * GM_FM_LANES + lane), upto, 0.0f, px);
		part += gm_fm_gray(px[0], px[1], px[2]);
	}
	return part;
}

/* Blocks of 16 pixels the gray mean's lanes cover; the rest go pixel by pixel. */
GM_FM size_t gm_fm_gray_blocks(const struct gm_fm_plan *p)
{
	return (size_t)p->size * p->size / GM_FM_LANES;
}

/* The pixels after the lanes' blocks, added to sum; the mean. */
GM_FM float gm_fm_gray_finish(const struct gm_fm_plan *p, const uint8_t *hwc, double sum)
{
	size_t n = (size_t)p->size * p->size;
	uint32_t upto = gm_fm_contrast_at(p);
	float px[3];
	for (size_t i = gm_fm_gray_blocks(p) * GM_FM_LANES; i < n; i++) {
		gm_fm_jitter_px(p, hwc + 3 * i, upto, 0.0f, px);
		sum += gm_fm_gray(px[0], px[1], px[2]);
	}
	return (float)(sum / (double)n);
}

/* Pixel i of the resized sample hwc jittered (mean: gm_fm_gray_finish's, when the
 * plan has a contrast op) and laid out into out. */
GM_FM void gm_fm_jitter_out(const struct gm_fm_plan *p, const uint8_t *hwc, size_t i, float mean,
			    void *out)
{
	float px[3];
	uint32_t oy = (uint32_t)(i / p->size), ox = (uint32_t)(i % p->size);
	gm_fm_jitter_px(p, hwc + 3 * i, 4, mean, px);
	for (uint32_t c = 0; c < 3; c++) {
		uint8_t byte = (uint8_t)(px[c] * 255.0f + 0.5f);
		float v = p->out == 0 ? 0.0f : px[c] * p->scale[c] + p->bias[c];
		gm_fm_store(p, out, oy, ox, c, byte, v);
	}
}

#endif
