/*
 * jitter.c - colour jitter of one resized sample, then its output layout
 * (jitter.h).
 *
 * Design: the uint8 HWC image is spread into three float planes in [0,1]
 * (x / 255, ToTensor's value), each drawn op runs over the planes in the drawn
 * order, and the planes go to the output layout. The loops run over contiguous
 * floats in blocks of a constant count, the clamp written as comparisons and
 * the planes' pointers restrict, so that gcc -O2 vectorises brightness,
 * contrast and saturation (hue's HSV round trip stays scalar: finish_math.h's gm_fm_hue); a
 * 224 x 224 sample is 150,528 floats (600 KiB, L2-resident). The contrast mean is summed in BLK
 * float lanes of at most 1024 values each, then in double. The float output is x * (1/std) -
 * mean/std, as aug.c's own (within an ulp of Normalize's (x - mean) / std).
 *
 * Draws (stream GM_RNG_STREAM_JITTER): Fisher-Yates over the active ops
 * (n - 1 draws), then one uniform per active op in op order. The sample stream
 * (crop, flip) is untouched, so a spec without jitter gives the bytes it gave.
 *
 * Not done here: PIL's uint8 rounding between the ops, SIMD by hand.
 */
#include "goldminer/jitter.h"

#include <string.h>

#include "goldminer/rng.h"

#include "finish_math.h"

bool gm_jitter_on(const struct gm_aug_spec *s)
{
	for (int k = 0; k < 4; k++)
		if (s->jitter[k][0] != 0 || s->jitter[k][1] != 0)
			return true;
	return false;
}

void gm_jitter_draw(const struct gm_aug_spec *s, uint64_t seed, uint64_t epoch, uint64_t sample_id,
		    struct gm_jitter *j)
{
	struct gm_rng r;
	uint32_t n = 0;

	memset(j, 0, sizeof(*j));
	for (int k = 0; k < 4; k++)
		if (s->jitter[k][0] != 0 || s->jitter[k][1] != 0)
			j->order[n++] = (uint8_t)k;
	j->n = n;
	gm_rng_init(&r, seed, GM_RNG_STREAM_JITTER, epoch, sample_id);
	for (uint32_t i = n; i > 1; i--) { /* Fisher-Yates: each order 1/n! */
		uint32_t k = (uint32_t)gm_rng_below(&r, i);
		uint8_t t = j->order[i - 1];
		j->order[i - 1] = j->order[k];
		j->order[k] = t;
	}
	for (int k = 0; k < 4; k++) {
		if (s->jitter[k][0] == 0 && s->jitter[k][1] == 0)
			continue;
		double lo = s->jitter[k][0], hi = s->jitter[k][1];
		j->factor[k] = (float)(lo + (hi - lo) * gm_rng_uniform(&r));
	}
}

static inline float clamp01(float v)
{
	v = v < 0.0f ? 0.0f : v;
	return v > 1.0f ? 1.0f : v;
}

/*
 * The loops below run in blocks of BLK floats with a constant inner trip count,
 * which gcc's -O2 (very cheap cost model) turns into vector code, then a scalar
 * tail; n is a multiple of BLK for every side that is a multiple of 4.
 */
#define BLK 16

/* x = clamp(f * x + c) over n floats: brightness (c = 0) and contrast. */
static void blend_const(float *x, size_t n, float f, float c)
{
	size_t i = 0;
	for (; i + BLK <= n; i += BLK)
		for (int k = 0; k < BLK; k++)
			x[i + k] = clamp01(f * x[i + k] + c);
	for (; i < n; i++)
		x[i] = clamp01(f * x[i] + c);
}

static inline float gray(float r, float g, float b)
{
	return 0.2989f * r + 0.587f * g + 0.114f * b;
}

static float gray_mean(const float *r, const float *g, const float *b, size_t n)
{
	float part[BLK] = {0};
	double sum = 0;
	size_t i = 0;
	for (; i + BLK <= n; i += BLK) {
		for (int k = 0; k < BLK; k++)
			part[k] += gray(r[i + k], g[i + k], b[i + k]);
		if ((i / BLK) % 64 == 63) { /* 1024 values a lane at most in float */
			for (int k = 0; k < BLK; k++) {
				sum += part[k];
				part[k] = 0;
			}
		}
	}
	for (int k = 0; k < BLK; k++)
		sum += part[k];
	for (; i < n; i++)
		sum += gray(r[i], g[i], b[i]);
	return (float)(sum / (double)n);
}

/* Each channel towards the pixel's gray by 1 - f: saturation. */
static void saturate(float *restrict r, float *restrict g, float *restrict b, size_t n, float f)
{
	float h = 1.0f - f;
	size_t i = 0;
	for (; i + BLK <= n; i += BLK)
		for (int k = 0; k < BLK; k++) {
			float y = h * gray(r[i + k], g[i + k], b[i + k]);
			r[i + k] = clamp01(f * r[i + k] + y);
			g[i + k] = clamp01(f * g[i + k] + y);
			b[i + k] = clamp01(f * b[i + k] + y);
		}
	for (; i < n; i++) {
		float y = h * gray(r[i], g[i], b[i]);
		r[i] = clamp01(f * r[i] + y);
		g[i] = clamp01(f * g[i] + y);
		b[i] = clamp01(f * b[i] + y);
	}
}

/* x / 255 as three planes (ToTensor's values; a multiply by the reciprocal,
 * within an ulp of its division). */
/* Hue: the HSV round trip of finish_math.h's gm_fm_hue, one pixel at a time
 * (the device's kernel runs the same function: one source for both bytes). */
static void hue(float *r, float *g, float *b, size_t n, float f)
{
	for (size_t i = 0; i < n; i++) {
		float px[3] = {r[i], g[i], b[i]};
		gm_fm_hue(px, f);
		r[i] = px[0];
		g[i] = px[1];
		b[i] = px[2];
	}
}

static void to_planes(const uint8_t *restrict hwc, float *restrict r, float *restrict g,
		      float *restrict b, size_t n)
{
	const float inv = 1.0f / 255.0f;
	size_t i = 0;
	for (; i + BLK <= n; i += BLK)
		for (int k = 0; k < BLK; k++) {
			r[i + k] = hwc[3 * (i + k)] * inv;
			g[i + k] = hwc[3 * (i + k) + 1] * inv;
			b[i + k] = hwc[3 * (i + k) + 2] * inv;
		}
	for (; i < n; i++) {
		r[i] = hwc[3 * i] * inv;
		g[i] = hwc[3 * i + 1] * inv;
		b[i] = hwc[3 * i + 2] * inv;
	}
}

/* (x - mean) / std as x * (1/std) + (-mean/std), as aug.c's float output. */
static void normalize(float *o, const float *p, size_t n, float scale, float bias)
{
	size_t i = 0;
	for (; i + BLK <= n; i += BLK)
		for (int k = 0; k < BLK; k++)
			o[i + k] = p[i + k] * scale + bias;
	for (; i < n; i++)
		o[i] = p[i] * scale + bias;
}

static void from_planes(const struct gm_aug_spec *s, float *pl, size_t n, void *out)
{
	if (s->out == GM_OUT_U8_HWC) {
		uint8_t *o = out;
		for (size_t i = 0; i < n; i++)
			for (int c = 0; c < 3; c++)
				o[3 * i + c] = (uint8_t)(pl[c * n + i] * 255.0f + 0.5f);
		return;
	}
	for (int c = 0; c < 3; c++) {
		float scale = (float)(1.0 / s->std[c]),
		      bias = (float)(-(double)s->mean[c] / s->std[c]);
		if (s->out == GM_OUT_F32_CHW) {
			normalize((float *)out + c * n, pl + c * n, n, scale, bias);
		} else {
			uint16_t *o = (uint16_t *)out + c * n;
			normalize(pl + c * n, pl + c * n, n, scale, bias);
			for (size_t i = 0; i < n; i++)
				o[i] = gm_f32_to_f16(pl[c * n + i]);
		}
	}
}

void gm_jitter_apply(const struct gm_jitter *j, const struct gm_aug_spec *s, const uint8_t *hwc,
		     float *planes, void *out)
{
	size_t n = (size_t)s->size * s->size;
	float *r = planes, *g = planes + n, *b = planes + 2 * n;

	to_planes(hwc, r, g, b, n);
	for (uint32_t k = 0; k < j->n && k < 4; k++) {
		float f = j->factor[j->order[k]];
		switch (j->order[k]) {
		case GM_JITTER_BRIGHTNESS:
			blend_const(planes, 3 * n, f, 0.0f);
			break;
		case GM_JITTER_CONTRAST:
			blend_const(planes, 3 * n, f, (1.0f - f) * gray_mean(r, g, b, n));
			break;
		case GM_JITTER_SATURATION:
			saturate(r, g, b, n, f);
			break;
		default:
			hue(r, g, b, n, f);
			break;
		}
	}
	from_planes(s, planes, n, out);
}
