/*
 * aug.c - per-sample augmentation (see aug.h): crop choice, partial decode,
 * antialiased resize, flip, output layout.
 *
 * Design:
 * - The crop is chosen before any pixel is decoded, from the header's size only:
 *   train = torchvision RandomResizedCrop.get_params (10 tries, log-uniform ratio,
 *   fallback to a ratio-clamped centre crop); eval = Resize(resize) + CenterCrop(size)
 *   expressed as a (fractional) box of the original image. The decoder then decodes
 *   only that box, at the largest DCT reduction that keeps it >= size x size.
 * - Resize is separable triangle (bilinear with antialias, as PIL / torchvision
 *   antialias=True): coefficients are computed once per image per axis in float,
 *   stored as 14-bit fixed point with a constant tap count per axis (zero padded),
 *   so the inner loops are fixed-length integer multiply-adds. For each pair of
 *   output rows the vertical pass runs first (the long, contiguous loop over the
 *   window's width, over each row's nonzero taps only) into two L1-resident rows,
 *   then one horizontal pass makes both output rows (same taps and weights). With
 *   AVX-512 VBMI the horizontal pass is a byte gather laid out once per image:
 *   with up to 4 taps (hw_build) a vector makes 32 output bytes of a row in 16-bit
 *   lanes, one vpermb and two vpmaddubsw per pair of taps, the weights split as
 *   128 wh + wl (vw_split in aug_simd.h says why that is exact); past 4 taps
 *   (hx_build) 16 bytes in 32-bit lanes; with AVX2, one pixel of each row per
 *   128-bit lane. The vertical pass uses the same split (vwrow) where it can.
 *   uint8 rows then go to the output by non-temporal stores (the 16-bit kernel's
 *   own where the rows are 32-byte aligned, else ntcopy: the output is not read
 *   first; the float planes likewise, px_store). Hand-written SSE2/SSSE3/AVX2/AVX-512
 * kernels (aug_simd.c, chosen at run time) do both passes; their scalar twins (aug_simd.h) are the
 *   reference they reproduce bit for bit. The coefficients are built in two cheap passes (span
 *   from the filter support, then weights) with no libm calls per tap.
 * - Flip costs nothing: the horizontal coefficient table is written mirrored.
 * - float32 CHW output is computed from the uint8 result as x * (1/(255 std)) +
 *   (-mean/std) (torchvision's ToTensor+Normalize of the resized PIL image, to
 *   ~1e-7), deinterleaving RGB into planes 8 pixels a step with AVX2. With
 *   AVX-512 VBMI the horizontal pass makes the planes itself (px_build, a planar
 *   byte gather: 16 pixels of one channel a vector, converted and stored without
 *   a uint8 row), falling back to hxrow + frow when a group's taps do not fit its
 *   window (a horizontal downscale past about 2.4x).
 * - float16 CHW output is the float32 value rounded to nearest-even half (F16C
 *   vcvtps2ph where the CPU has it, else a scalar conversion with the same bits):
 *   half the ring bytes and half the host-to-device copy, for mixed-precision
 *   training.
 * - The largest DCT reduction is chosen among 1/8, 1/4, 1/2, 1 (gm_jpeg_pick_scale
 *   says why), so the resize is at most a ~2x downscale (4 taps) for most crops of
 *   a normal photo (up to ~3x, 6 taps, for elongated ones); bigger factors use the
 *   general kernels.
 * - All scratch (coefficients, intermediate rows) lives in the handle and only
 *   grows; nothing is allocated per sample once the largest shape has been seen.
 *
 * RNG use per sample (stream GM_RNG_STREAM_SAMPLE, key (seed, epoch, sample id)):
 * draw 0 = flip (always taken, also when flip_p is 0 or 1), then the RRC draws.
 *
 * - Eval mode (Resize + CenterCrop) resizes with PIL's coefficients and order
 *   instead (resample.c), from a window holding every pixel its taps reach:
 *   torchvision's bytes, at about 1.8x the CPU per eval sample.
 *
 * Colour jitter (spec.jitter): the resize writes uint8 HWC into the handle's
 * scratch, without non-temporal stores, and jitter.c jitters it and lays it out.
 *
 * Not done here: other photometric ops, bfloat16 output, EXIF
 * orientation, padding when an eval image is smaller than the crop (the shorter
 * side is always resized to `resize` >= size, so it cannot be).
 */
#include "goldminer/aug.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "goldminer/coef.h"
#include "goldminer/jitter.h"
#include "goldminer/jpeg.h"
#include "goldminer/rng.h"
#include "goldminer/util.h"

#include "aug_simd.h"
#include "aug_test.h"
#include "finish_math.h"
#include "resample.h"

#define MAX_SIZE 8192u

struct gm_aug {
	struct gm_aug_spec spec;
	struct gm_jpeg *dec;
	struct axis ax, ay;
	/* the rows and tables the row passes use, carved from arena (plan_resize) */
	uint8_t *arena;
	size_t arena_cap;
	uint8_t *tmp;	  /* two vertical-pass rows (window width x 3, + slack) */
	int16_t *hv;	  /* horizontal coefficients as SIMD operands (hv_build) */
	int32_t *hx_base; /* the horizontal pass as a byte gather (hx_build) */
	uint8_t *hx_blk;
	struct hx_table hx;
	int32_t *hw_base; /* the horizontal pass in 16-bit lanes (hw_build) */
	uint8_t *hw_blk;
	uint32_t *hw_split; /* per output pixel: vw_split's wh, then wl (2 * size) */
	int16_t *hw_adj;    /* per output pixel: hw_pixel's index adjustment */
	struct hw_table hw;
	struct aug_kernels k; /* row kernels (aug_simd.h) */
	uint64_t fused_rows;  /* rows made by the fused float kernels (gm_aug_fused_rows) */
	uint64_t hw_rows;     /* rows made by the 16-bit horizontal kernel (gm_aug_hw_rows) */
	uint64_t hwnt_rows;   /* ... of which by non-temporal stores (gm_aug_hwnt_rows) */
	uint8_t *row;	      /* two output rows (u8 HWC, + slack) for the float path / odd size */
	uint32_t *vw;	      /* per output row: vw_split's wh (or VW_NONE), then wl: 2 * size */
	float scale[3], bias[3]; /* float output: x * scale + bias */
	bool ix_stale;		 /* the last gm_aug_sample met a row index unlike its file */
	/* what the resize writes: spec.out, or (colour jitter) uint8 HWC into jpx,
	 * which gm_jitter_apply turns into spec.out through the planes jf */
	enum gm_out_type rout;
	uint8_t *jpx;
	float *jf;
	/* eval: PIL's resize of the window (resample.h), its scratch rtmp */
	struct rs_axis rx, ry;
	uint8_t *rtmp;
	size_t rtmp_cap;
	/* coefficient mode's host path (gm_aug_coef_finish): planes and window */
	uint8_t *cplanes, *cpix;
	size_t cplanes_cap, cpix_cap;
	/* its finish plan (finish_math.h: taps, layout, jitter), gm_aug_coef_plan */
	uint8_t *fplan;
	size_t fplan_cap;
	char errmsg[320];
};

static void pick_kernels(struct gm_aug *a);

void gm_aug_spec_default(struct gm_aug_spec *s)
{
	memset(s, 0, sizeof(*s));
	s->mode = GM_AUG_TRAIN;
	s->size = 224;
	s->scale_min = 0.08f;
	s->scale_max = 1.0f;
	s->ratio_min = 3.0f / 4.0f;
	s->ratio_max = 4.0f / 3.0f;
	s->flip_p = 0.5f;
	s->resize = 256;
	s->out = GM_OUT_U8_HWC;
	s->mean[0] = 0.485f, s->mean[1] = 0.456f, s->mean[2] = 0.406f;
	s->std[0] = 0.229f, s->std[1] = 0.224f, s->std[2] = 0.225f;
	s->max_pixels = GM_JPEG_DEFAULT_MAX_PIXELS;
}

size_t gm_aug_out_bytes(const struct gm_aug_spec *s)
{
	size_t elem = s->out == GM_OUT_F32_CHW ? 4 : s->out == GM_OUT_F16_CHW ? 2 : 1;
	return (size_t)s->size * s->size * 3 * elem;
}

int gm_aug_spec_check(const struct gm_aug_spec *s, char *err, size_t errlen)
{
	const char *why = NULL;

	if (s->mode != GM_AUG_TRAIN && s->mode != GM_AUG_EVAL)
		why = "mode must be GM_AUG_TRAIN or GM_AUG_EVAL";
	else if (s->out != GM_OUT_U8_HWC && s->out != GM_OUT_F32_CHW && s->out != GM_OUT_F16_CHW)
		why = "out must be GM_OUT_U8_HWC, GM_OUT_F32_CHW or GM_OUT_F16_CHW";
	else if (s->size == 0 || s->size > MAX_SIZE)
		why = "size must be 1..8192";
	else if (s->mode == GM_AUG_TRAIN && !(s->scale_min > 0 && s->scale_min <= s->scale_max &&
					      s->ratio_min > 0 && s->ratio_min <= s->ratio_max))
		why = "scale and ratio must be MIN,MAX with 0 < MIN <= MAX";
	else if (s->mode == GM_AUG_TRAIN && !(s->flip_p >= 0 && s->flip_p <= 1))
		why = "flip_p must be in [0, 1]";
	else if (s->mode == GM_AUG_EVAL && (s->resize < s->size || s->resize > 4 * MAX_SIZE))
		why = "resize must be size..32768 in eval mode";
	else if (s->max_pixels > GM_JPEG_MAX_MAX_PIXELS)
		why = "max_pixels must be 0 (the default) .. 1000000000000";
	for (int c = 0; !why && c < 3; c++)
		if (!(s->std[c] != 0) || !isfinite(s->mean[c]) || !isfinite(s->std[c]))
			why = "mean and std must be finite, std nonzero";
	for (int k = 0; !why && k < 3; k++)
		if (!(s->jitter[k][0] >= 0 && s->jitter[k][0] <= s->jitter[k][1] &&
		      s->jitter[k][1] <= 1000))
			why = "jitter ranges must be LO,HI with 0 <= LO <= HI <= 1000";
	if (!why && !(s->jitter[3][0] >= -0.5f && s->jitter[3][0] <= s->jitter[3][1] &&
		      s->jitter[3][1] <= 0.5f))
		why = "the hue jitter range must be LO,HI with -0.5 <= LO <= HI <= 0.5";
	if (!why)
		return 0;
	if (err && errlen)
		gm_errf(err, errlen, "invalid transform spec: %s", why);
	return -EINVAL;
}

int gm_aug_create(struct gm_aug **out, const struct gm_aug_spec *s)
{
	struct gm_aug *a;
	int ret;

	if (!out || !s || gm_aug_spec_check(s, NULL, 0))
		return -EINVAL;
	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->spec = *s;
	ret = gm_jpeg_create(&a->dec, s->max_pixels);
	if (ret)
		goto out_free;
	pick_kernels(a);
	a->rout = s->out;
	if (gm_jitter_on(s) || s->mode == GM_AUG_EVAL) {
		size_t n = (size_t)s->size * s->size * 3;
		a->rout = gm_jitter_on(s) ? GM_OUT_U8_HWC : s->out;
		a->jpx = malloc(n);
		a->jf = gm_jitter_on(s) ? malloc(n * sizeof(float)) : NULL;
		ret = -ENOMEM;
		if (!a->jpx || (gm_jitter_on(s) && !a->jf))
			goto out_free_jitter;
	}
	for (int c = 0; c < 3; c++) {
		a->scale[c] = (float)(1.0 / (255.0 * s->std[c]));
		a->bias[c] = (float)(-(double)s->mean[c] / s->std[c]);
	}
	*out = a;
	return 0;

out_free_jitter:
	free(a->jf);
	free(a->jpx);
	gm_jpeg_destroy(a->dec);
out_free:
	free(a);
	return ret;
}

static void axis_free(struct axis *ax)
{
	free(ax->min);
	free(ax->coef);
	free(ax->w);
	free(ax->first);
	free(ax->count);
}

void gm_aug_destroy(struct gm_aug *a)
{
	if (!a)
		return;
	axis_free(&a->ax);
	axis_free(&a->ay);
	free(a->arena);
	free(a->jf);
	free(a->jpx);
	free(a->rtmp);
	free(a->cplanes);
	free(a->cpix);
	free(a->fplan);
	gm_rs_axis_free(&a->rx);
	gm_rs_axis_free(&a->ry);
	gm_jpeg_destroy(a->dec);
	free(a);
}

const char *gm_aug_errmsg(const struct gm_aug *a)
{
	return a->errmsg;
}

uint64_t gm_aug_fused_rows(const struct gm_aug *a)
{
	return a->fused_rows;
}

uint64_t gm_aug_hw_rows(const struct gm_aug *a)
{
	return a->hw_rows;
}

uint64_t gm_aug_hwnt_rows(const struct gm_aug *a)
{
	return a->hwnt_rows;
}

/* ---- crop choice --------------------------------------------------------------- */

struct box {
	double x0, y0, x1, y1; /* in full-image pixels */
};

/* torchvision RandomResizedCrop.get_params, draws from r. */
static struct box rrc_box(const struct gm_aug_spec *s, struct gm_rng *r, uint32_t W, uint32_t H)
{
	double area = (double)W * H;
	double lr0 = log(s->ratio_min), lr1 = log(s->ratio_max);
	struct box b;

	for (int attempt = 0; attempt < 10; attempt++) {
		double target =
		    area * (s->scale_min + (s->scale_max - s->scale_min) * gm_rng_uniform(r));
		double ar = exp(lr0 + (lr1 - lr0) * gm_rng_uniform(r));
		double w = nearbyint(sqrt(target * ar));
		double h = nearbyint(sqrt(target / ar));
		if (w > 0 && w <= W && h > 0 && h <= H) {
			uint64_t i = gm_rng_below(r, (uint64_t)(H - h) + 1);
			uint64_t j = gm_rng_below(r, (uint64_t)(W - w) + 1);
			b.x0 = (double)j, b.y0 = (double)i, b.x1 = (double)j + w,
			b.y1 = (double)i + h;
			return b;
		}
	}
	/* Fallback: centre crop, aspect ratio clamped to the range. */
	double in_ratio = (double)W / H, w = W, h = H;
	if (in_ratio < s->ratio_min)
		h = nearbyint(w / s->ratio_min);
	else if (in_ratio > s->ratio_max)
		w = nearbyint(h * s->ratio_max);
	if (h < 1)
		h = 1;
	if (w < 1)
		w = 1;
	b.y0 = floor((H - h) / 2);
	b.x0 = floor((W - w) / 2);
	b.x1 = b.x0 + w;
	b.y1 = b.y0 + h;
	return b;
}

/* torchvision Resize(resize)'s size (shorter side resize, the other floored) and
 * CenterCrop(size)'s top-left in it, for a W x H image. */
static void eval_dims(const struct gm_aug_spec *s, uint32_t W, uint32_t H, double *nw, double *nh,
		      double *left, double *top)
{
	if (W <= H) {
		*nw = s->resize;
		*nh = floor((double)s->resize * H / W);
	} else {
		*nh = s->resize;
		*nw = floor((double)s->resize * W / H);
	}
	*top = nearbyint((*nh - s->size) / 2.0);
	*left = nearbyint((*nw - s->size) / 2.0);
}

/* torchvision Resize(resize) (shorter side) + CenterCrop(size), as a box of the original. */
static struct box eval_box(const struct gm_aug_spec *s, uint32_t W, uint32_t H)
{
	double nw, nh, top, left;
	struct box b;
	eval_dims(s, W, H, &nw, &nh, &left, &top);
	double fx = W / nw, fy = H / nh;
	b.x0 = left * fx;
	b.x1 = (left + s->size) * fx;
	b.y0 = top * fy;
	b.y1 = (top + s->size) * fy;
	return b;
}

/* The sample's crop box and flip: train draws them (flip first, then the RRC
 * draws), eval is the centre crop, unflipped. */
static struct box draw_box(const struct gm_aug_spec *s, uint32_t W, uint32_t H, uint64_t seed,
			   uint64_t epoch, uint64_t sample_id, bool *flip)
{
	struct gm_rng r;

	*flip = false;
	if (s->mode != GM_AUG_TRAIN)
		return eval_box(s, W, H);
	gm_rng_init(&r, seed, GM_RNG_STREAM_SAMPLE, epoch, sample_id);
	*flip = gm_rng_uniform(&r) < s->flip_p;
	return rrc_box(s, &r, W, H);
}

void gm_aug_window(const struct gm_aug_spec *s, uint32_t w, uint32_t h, uint64_t seed,
		   uint64_t epoch, uint64_t sample_id, double box[4], bool *flip)
{
	struct box b = draw_box(s, w, h, seed, epoch, sample_id, flip);
	box[0] = b.x0, box[1] = b.y0, box[2] = b.x1, box[3] = b.y1;
}

/* ---- resampling ------------------------------------------------------------------ */

/* floor() of a double well inside the int64 range, without a libm call. */
static inline int64_t ifloor(double v)
{
	int64_t t = (int64_t)v;
	return t - (v < (double)t);
}

/* axis_build's second pass for outputs [i0, out) (axisw_fn's portable twin). */
static void axis_weights(struct axis *ax, double b0, double scale, double inv, uint32_t in,
			 uint32_t i0, uint32_t out, bool mirror)
{
	uint32_t taps = ax->taps;
	/* Pass 2: weights, normalised, in fixed point, in a run of `taps` inside [0, in). */
	for (uint32_t i = i0; i < out; i++) {
		double center = b0 + (i + 0.5) * scale, *w = ax->w, sum = 0;
		int64_t f = ax->first[i], n = ax->count[i];
		int64_t start = f + taps > in ? (int64_t)in - taps : f; /* taps <= in holds */
		int64_t off = f - start;
		uint32_t slot = mirror ? out - 1 - i : i;
		int16_t *c = ax->coef + (size_t)slot * taps;
		int32_t total = 0, big = (int32_t)off, bigv = -1;
		for (int64_t k = 0; k < n; k++) {
			double v = 1.0 - fabs((f + k - center + 0.5) * inv);
			v = v > 0 ? v : 0; /* a rounding zero at the span's edge */
			w[k] = v;
			sum += v;
		}
		double rs = sum > 0 ? COEF_ONE / sum : 0; /* normalised, scaled to fixed point */
		for (uint32_t k = 0; k < taps; k++)
			c[k] = 0;
		for (int64_t k = 0; k < n; k++) {
			int32_t v = (int32_t)(w[k] * rs + 0.5); /* w >= 0: round */
			c[off + k] = (int16_t)v;
			total += v;
			big = v > bigv ? (int32_t)(off + k) : big;
			bigv = v > bigv ? v : bigv;
		}
		c[big] = (int16_t)(c[big] + COEF_ONE - total); /* weights sum to exactly 1 */
		ax->min[slot] = (int32_t)start;
	}
}

/*
 * Triangle-filter coefficients mapping the source interval [b0, b1) of a row of
 * `in` samples onto `out` samples (PIL's antialiased bilinear: the filter widens
 * with the downscale factor; taps outside [0, in) are dropped and the rest
 * renormalised). The tap count is the widest span of NONZERO weights (PIL's window
 * is up to 2 taps wider), so a 1..2x downscale needs at most 4.
 * mirror: output i is stored at out-1-i (horizontal flip for free).
 * k: the SIMD span and weight kernels (8 outputs a step) where set, or NULL.
 */
static int axis_build(struct axis *ax, double b0, double b1, uint32_t in, uint32_t out, bool mirror,
		      const struct aug_kernels *k)
{
	double scale = (b1 - b0) / out;
	double fscale = scale > 1.0 ? scale : 1.0; /* triangle support 1, widened */
	double inv = 1.0 / fscale;		   /* multiply, not divide, in the per-tap loop */
	uint32_t kmax = (uint32_t)ceil(fscale) * 2 + 1, taps = 1;

	if (gm_grow_scratch((void **)&ax->w, &ax->w_cap, sizeof(double) * kmax, 1024) ||
	    gm_grow_scratch((void **)&ax->first, &ax->first_cap, sizeof(int32_t) * out, 1024) ||
	    gm_grow_scratch((void **)&ax->count, &ax->count_cap, sizeof(int32_t) * out, 1024) ||
	    gm_grow_scratch((void **)&ax->min, &ax->min_cap, sizeof(int32_t) * out, 1024))
		return -ENOMEM;
	/* Pass 1: the span of nonzero weights, |x + 0.5 - center| < fscale, per output. */
	uint32_t i1 = 0;
	if (k && k->axiss && out >= 8) {
		taps = k->axiss(ax, b0, scale, fscale, kmax, in, out);
		i1 = out - out % 8;
	}
	for (uint32_t i = i1; i < out; i++) {
		double center = b0 + (i + 0.5) * scale;
		int64_t f = ifloor(center - fscale - 0.5) + 1;
		int64_t l = -ifloor(-(center + fscale - 0.5)) - 1; /* ceil - 1 */
		f = f < 0 ? 0 : f;
		l = l > (int64_t)in - 1 ? (int64_t)in - 1 : l;
		l = l - f + 1 > (int64_t)kmax ? f + kmax - 1 : l;
		if (l < f) /* no sample under the filter: nearest one */
			f = l = center < 0 ? 0 : center >= in ? (int64_t)in - 1 : (int64_t)center;
		ax->first[i] = (int32_t)f;
		ax->count[i] = (int32_t)(l - f + 1);
		taps = (uint32_t)ax->count[i] > taps ? (uint32_t)ax->count[i] : taps;
	}
	if (gm_grow_scratch((void **)&ax->coef, &ax->coef_cap, sizeof(int16_t) * out * taps, 1024))
		return -ENOMEM;
	ax->taps = taps;
	uint32_t i0 = 0;
	if (k && k->axisw && taps <= AXISW_MAX_TAPS) {
		i0 = out - out % 8;
		if (i0)
			k->axisw(ax, b0, scale, inv, in, out, mirror);
	}
	axis_weights(ax, b0, scale, inv, in, i0, out, mirror);
	return 0;
}

/*
 * IEEE float -> half, round to nearest even, the result vcvtps2ph gives (NaN kept
 * quiet with the top payload bits). Written out because C11 has no half type and
 * gcc 12 / clang 14 disagree on _Float16 for x86; tests compare it with F16C.
 */
uint16_t gm_f32_to_f16(float f)
{
	return gm_fm_f32_to_f16(f); /* finish_math.h: the device's too */
}

/*
 * Choose the fastest kernels this CPU runs. GM_NO_SIMD=1 forces the portable ones;
 * GM_SIMD_MAX=sse|avx2|avx512 (AVX-512 without VNNI) stops at that level (tests compare every
 * level's kernels with the portable ones).
 */
static void pick_kernels(struct gm_aug *a)
{
	enum aug_simd_level max = AUG_SIMD_VNNI;
	a->k.vrow = vrow_c;
	a->k.vwrow = NULL;
	a->k.vws = NULL;
	a->k.hwg = NULL;
	a->k.ntcopy = NULL;
	a->k.ntfence = NULL;
	a->k.hrow = hrow_c;
	a->k.hrow2 = NULL;
	a->k.hxrow = NULL;
	a->k.hwrow = NULL;
	a->k.hwntrow = NULL;
	a->k.axiss = NULL;
	a->k.axisw = NULL;
	a->k.hxb = NULL;
	a->k.pxrow = NULL;
	a->k.hpxrow = NULL;
	a->k.frow = frow_c;
	a->k.hfrow = hfrow_c;
	const char *no = getenv("GM_NO_SIMD"); /* "1": portable kernels (tests compare) */
	if (no && no[0] == '1')
		return;
	const char *cap = getenv("GM_SIMD_MAX");
	if (cap && strcmp(cap, "sse") == 0)
		max = AUG_SIMD_SSE;
	else if (cap && strcmp(cap, "avx2") == 0)
		max = AUG_SIMD_AVX2;
	else if (cap && strcmp(cap, "avx512") == 0)
		max = AUG_SIMD_AVX512;
	gm_aug_simd_pick(&a->k, max);
}

/*
 * Lay out the horizontal coefficients as pmaddwd operands: 8 int16 per pair of
 * taps (c0 c1 c0 c1 c0 c1 0 0), `pairs` pairs per output (zero-padded beyond the
 * taps); dup: each 8 written twice (both lanes of a 256-bit operand).
 */
static void hv_build(int16_t *hv, const struct axis *ax, uint32_t out_w, uint32_t pairs, bool dup)
{
	uint32_t taps = ax->taps, n = dup ? 16 : 8;
	for (uint32_t ox = 0; ox < out_w; ox++) {
		const int16_t *c = ax->coef + (size_t)ox * taps;
		for (uint32_t p = 0; p < pairs; p++) {
			int16_t c0 = 2 * p < taps ? c[2 * p] : 0;
			int16_t c1 = 2 * p + 1 < taps ? c[2 * p + 1] : 0;
			int16_t *o = hv + ((size_t)ox * pairs + p) * n;
			for (uint32_t k = 0; k < n; k += 8) {
				o[k] = o[k + 2] = o[k + 4] = c0;
				o[k + 1] = o[k + 3] = o[k + 5] = c1;
				o[k + 6] = o[k + 7] = 0;
			}
		}
	}
}

/* Byte j of an output row (pixel ox, channel c) -> byte j + 1; bytes past the row's
 * end (nval) repeat its last one. */
static inline void next_byte(uint32_t *j, uint32_t *c, uint32_t *ox, uint32_t nval)
{
	if (*j + 1 < nval) {
		++*j;
		*c = *c == 2 ? 0 : *c + 1;
		*ox += *c == 0;
	}
}

/*
 * Lane l of the group at gb: the output value whose first tap is source byte at
 * (relative to the group's base) and whose taps are cf (taps of them, 3 bytes
 * apart), as index bytes and coefficient pairs (struct hx_table).
 */
static void hx_lane(uint8_t *gb, uint32_t l, uint32_t at, const int16_t *cf, uint32_t taps,
		    uint32_t pairs)
{
	for (uint32_t p = 0; p < pairs; p++) {
		uint8_t *idx = gb + (size_t)p * 8 * HX_GROUP;
		int16_t w[2] = {cf[2 * p], 2 * p + 1 < taps ? cf[2 * p + 1] : 0};
		idx[4 * l] = (uint8_t)(at + 6 * p);
		idx[4 * l + 1] = idx[4 * l + 3] = 0;
		idx[4 * l + 2] = (uint8_t)(at + (2 * p + 1 < taps ? 6 * p + 3 : 6 * p));
		memcpy(idx + 4 * HX_GROUP + 4 * l, w, sizeof(w));
	}
}

/*
 * Lay out the horizontal pass as a byte gather (struct hx_table, aug_simd.h) for
 * out_w pixels of the byte-offset axis ax. false when some group's taps span more
 * than HX_WINDOW source bytes (a big downscale): the other kernels take the image.
 * The portable builder: hxb_fn (aug_simd.c) makes the same bytes, a group per
 * vector step, where the CPU has it (hx_layout chooses).
 */
static bool hx_build(struct hx_table *t, int32_t *base, uint8_t *blk, const struct axis *ax,
		     uint32_t out_w)
{
	uint32_t taps = ax->taps, nval = 3 * out_w, pairs = (taps + 1) / 2;
	size_t gstep = (size_t)pairs * 8 * HX_GROUP;
	bool narrow = true;

	t->pairs = pairs;
	t->groups = (nval + 4 * HX_GROUP - 1) / (4 * HX_GROUP) * 4; /* the kernels take 4 a step */
	t->nval = nval;
	t->base = base;
	t->blk = blk;
	for (uint32_t g = 0; g < t->groups; g++) {
		uint32_t j0 = g * HX_GROUP < nval ? g * HX_GROUP : nval - 1;
		uint32_t j1 = j0 + HX_GROUP - 1 < nval ? j0 + HX_GROUP - 1 : nval - 1;
		int32_t b = INT32_MAX, far = 0;
		for (uint32_t ox = j0 / 3; ox <= j1 / 3; ox++)
			b = ax->min[ox] < b ? ax->min[ox] : b;
		for (uint32_t ox = j0 / 3; ox <= j1 / 3; ox++)
			far = ax->min[ox] - b > far ? ax->min[ox] - b : far;
		far += 3 * (int32_t)taps - 1; /* the last tap's blue byte */
		if (far >= HX_WINDOW)
			return false;
		narrow = narrow && far < 64;
		base[g] = b;
		uint8_t *gb = blk + g * gstep;
		uint32_t ox = j0 / 3, c = j0 % 3;
		for (uint32_t l = 0, j = j0; l < HX_GROUP; l++) {
			hx_lane(gb, l, (uint32_t)(ax->min[ox] - b) + c,
				ax->coef + (size_t)ox * taps, taps, pairs);
			next_byte(&j, &c, &ox, nval);
		}
	}
	t->narrow = narrow;
	return true;
}

/*
 * hw_build's split of output pixel ox (sp: wh[out_w], then wl[out_w], from vws;
 * adj[ox]: added to its lanes' pair-0 index word). A pixel whose one tap k has
 * weight COEF_ONE has no split (wh would be 128): it becomes taps k and k at
 * COEF_ONE / 2 each (wh 64, wl 0, both index bytes on tap k). false for any other
 * pixel without a split.
 */
static bool hw_pixel(uint32_t *sp, int16_t *adj, const struct axis *ax, uint32_t ox, uint32_t out_w)
{
	const int16_t *c = ax->coef + (size_t)ox * ax->taps;
	adj[ox] = 0;
	if (sp[ox] != VW_NONE)
		return true;
	for (uint32_t k = 0; k < ax->taps; k++)
		if (c[k] == COEF_ONE) {
			sp[ox] = 0x4040u;
			sp[out_w + ox] = 0;
			adj[ox] = (int16_t)(3 * k * 257 - 3 * 256);
			return true;
		}
	return false;
}

/*
 * Lay out the horizontal pass in 16-bit lanes (struct hw_table, aug_simd.h) for
 * out_w pixels of the byte-offset axis ax; sp: 2 * out_w words and adj: out_w of
 * scratch. false when the taps are more than 4, some pixel's weights do not split
 * (hw_pixel) or some group's taps span more than HX_WINDOW source bytes.
 */
static bool hw_build(struct hw_table *t, int32_t *base, uint8_t *blk, uint32_t *sp, int16_t *adj,
		     const struct axis *ax, uint32_t out_w, const struct aug_kernels *k)
{
	uint32_t taps = ax->taps, nval = 3 * out_w, pairs = taps > 2 ? 2 : 1;
	size_t gstep = (size_t)pairs * 192;
	bool narrow = true;

	if (taps > 4)
		return false;
	k->vws(ax->coef, taps, out_w, sp, sp + out_w);
	for (uint32_t ox = 0; ox < out_w; ox++)
		if (!hw_pixel(sp, adj, ax, ox, out_w))
			return false;
	t->pairs = pairs;
	t->groups = (nval + 2 * HW_GROUP - 1) / (2 * HW_GROUP) * 2; /* the kernel takes 2 a step */
	t->nval = nval;
	t->base = base;
	t->blk = blk;
	for (uint32_t g = 0; g < t->groups; g++) {
		uint32_t j0 = g * HW_GROUP < nval ? g * HW_GROUP : nval - 1;
		uint32_t j1 = j0 + HW_GROUP - 1 < nval ? j0 + HW_GROUP - 1 : nval - 1;
		int32_t m0 = ax->min[j0 / 3], m1 = ax->min[j1 / 3]; /* min[] is monotonic */
		int32_t b = m0 < m1 ? m0 : m1,
			far = (m0 < m1 ? m1 - m0 : m0 - m1) + 3 * (int32_t)taps - 1;
		if (far >= HX_WINDOW)
			return false;
		narrow = narrow && far < 64;
		base[g] = b;
		uint16_t *q = (uint16_t *)(blk + g * gstep);
		uint32_t ox = j0 / 3, c = j0 % 3;
		if (k->hwg && j0 + HW_GROUP <= nval) {
			k->hwg(q, ax->min + ox, sp + ox, sp + out_w + ox, adj + ox, out_w - ox, c,
			       b, pairs);
			continue;
		}
		for (uint32_t l = 0, j = j0; l < HW_GROUP; l++) {
			uint32_t v = (uint32_t)(ax->min[ox] - b) + c;
			q[l] = (uint16_t)(v * 257 + 3 * 256 + (uint32_t)adj[ox]);
			q[32 + l] = (uint16_t)sp[ox];
			q[64 + l] = (uint16_t)sp[out_w + ox];
			if (pairs == 2) {
				q[96 + l] = (uint16_t)(v * 257 + 6 + 9 * 256);
				q[128 + l] = (uint16_t)(sp[ox] >> 16);
				q[160 + l] = (uint16_t)(sp[out_w + ox] >> 16);
			}
			next_byte(&j, &c, &ox, nval);
		}
	}
	t->narrow = narrow;
	return true;
}

/* Groups of the planar table for out_w pixels (px_build). */
static uint32_t px_groups(uint32_t out_w)
{
	return 3 * ((out_w + HX_GROUP - 1) / HX_GROUP);
}

/*
 * hx_build's planar variant, for the fused float kernels (pxrow_fn): group q of
 * channel c is pixels 16q .. 16q+15 of that channel (the last one's lanes past
 * out_w repeat pixel out_w - 1). false when some group's taps span more than
 * HX_WINDOW source bytes: 16 pixels of one channel reach further than hx_build's
 * 16 bytes (5 1/3 pixels), so a downscale past about 2.4x takes hxrow + frow.
 */
static bool px_build(struct hx_table *t, int32_t *base, uint8_t *blk, const struct axis *ax,
		     uint32_t out_w)
{
	uint32_t taps = ax->taps, pairs = (taps + 1) / 2, gpp = px_groups(out_w) / 3;
	size_t gstep = (size_t)pairs * 8 * HX_GROUP;
	bool narrow = true;

	t->pairs = pairs;
	t->groups = 3 * gpp;
	t->nval = out_w;
	t->base = base;
	t->blk = blk;
	for (uint32_t q = 0; q < gpp; q++) {
		uint32_t x0 = q * HX_GROUP, x1 = x0 + HX_GROUP < out_w ? x0 + HX_GROUP : out_w;
		int32_t b = INT32_MAX, far = 0;
		for (uint32_t ox = x0; ox < x1; ox++)
			b = ax->min[ox] < b ? ax->min[ox] : b;
		for (uint32_t ox = x0; ox < x1; ox++)
			far = ax->min[ox] - b > far ? ax->min[ox] - b : far;
		far += 3 * ((int32_t)taps - 1); /* the channel's byte of the last tap */
		if (far >= HX_WINDOW)
			return false;
		narrow = narrow && far < 64;
		for (uint32_t c = 0; c < 3; c++) {
			uint8_t *gb = blk + (size_t)(c * gpp + q) * gstep;
			base[c * gpp + q] = b + (int32_t)c;
			for (uint32_t l = 0; l < HX_GROUP; l++) {
				uint32_t ox = x0 + l < x1 ? x0 + l : x1 - 1;
				hx_lane(gb, l, (uint32_t)(ax->min[ox] - b),
					ax->coef + (size_t)ox * taps, taps, pairs);
			}
		}
	}
	t->narrow = narrow;
	return true;
}

/* hx_build (planar: px_build) through k's kernel where it takes the axis. */
static bool hx_layout(struct hx_table *t, int32_t *base, uint8_t *blk, const struct axis *ax,
		      uint32_t out_w, bool planar, const struct aug_kernels *k)
{
	if (k && k->hxb && ax->taps <= HXB_MAX_TAPS)
		return k->hxb(t, base, blk, ax, out_w, planar);
	return planar ? px_build(t, base, blk, ax, out_w) : hx_build(t, base, blk, ax, out_w);
}

int gm_aug_axis_build(struct axis *ax, double b0, double b1, uint32_t in, uint32_t out, bool mirror,
		      const struct aug_kernels *k)
{
	return axis_build(ax, b0, b1, in, out, mirror, k);
}

void gm_aug_axis_free(struct axis *ax)
{
	axis_free(ax);
}

bool gm_aug_hx_build(struct hx_table *t, int32_t *base, uint8_t *blk, const struct axis *ax,
		     uint32_t out_w, bool planar, const struct aug_kernels *k)
{
	return hx_layout(t, base, blk, ax, out_w, planar, k);
}

/*
 * Vertical pass of output row y over the nonzero taps only: the tap count is the
 * axis maximum, and rows with fewer weights (often every other row) have zeros at
 * one end, which would cost a whole pair of source rows. Same sums either way.
 * With a split table (a->vw), the 16-bit kernel: the split of the trimmed taps is
 * the split of all of them shifted (a zero weight splits to two zero bytes).
 */
static void vpass(struct gm_aug *a, uint8_t *d, const uint8_t *src, size_t stride, size_t nbytes,
		  uint32_t y, bool vw)
{
	const int16_t *c = a->ay.coef + (size_t)y * a->ay.taps;
	uint32_t k0 = 0, k1 = a->ay.taps - 1;
	while (k0 < k1 && c[k0] == 0)
		k0++;
	while (k1 > k0 && c[k1] == 0)
		k1--;
	const uint8_t *s = src + ((size_t)a->ay.min[y] + k0) * stride;
	if (k0 == k1 && c[k0] == COEF_ONE) /* one tap of weight 1: vrow_c's bytes are s's */
		memcpy(d, s, nbytes);
	else if (vw && a->vw[y] != VW_NONE)
		a->k.vwrow(d, s, stride, nbytes, c + k0, k1 - k0 + 1, a->vw[y] >> (8 * k0),
			   a->vw[a->spec.size + y] >> (8 * k0));
	else
		a->k.vrow(d, s, stride, nbytes, c + k0, k1 - k0 + 1);
}

/* ---- the sample ------------------------------------------------------------------- */

static int fail(struct gm_aug *a, int ret, const char *what)
{
	gm_errf(a->errmsg, sizeof(a->errmsg), "gm_aug_sample: %s", what);
	return ret;
}

/* Where the crop lies in the decoded window (scaled pixels, window-relative after
 * decode_resize), and whether it is flipped. */
struct window {
	double x0, y0, x1, y1; /* the crop box in DCT-scaled pixels */
	uint32_t wx0, wy0;     /* the decoded window's top-left, scaled pixels */
	bool flip;
	struct gm_jitter jit; /* the colour jitter's draws (a->jpx set) */
};

/* The window of the DCT-scaled image to decode (scale n/8). */
struct region {
	uint32_t n, x, y, w, h;
};

/*
 * Eval: PIL's resize (resample.h) of the image at DCT scale n/8 to torchvision's
 * Resize size, its CenterCrop's rows and columns only; the window decoded is
 * every source pixel their taps reach. 0 or -ENOMEM with the message set.
 */
static int eval_window(struct gm_aug *a, const struct gm_jpeg_info *info, uint32_t n,
		       struct window *win, struct region *rg)
{
	const struct gm_aug_spec *s = &a->spec;
	uint32_t sw = gm_jpeg_scaled_dim(info->width, n), sh = gm_jpeg_scaled_dim(info->height, n);
	uint32_t x0, x1, y0, y1;
	double nw, nh, left, top;
	eval_dims(s, info->width, info->height, &nw, &nh, &left, &top);
	int ret = gm_rs_axis(&a->rx, sw, (uint32_t)nw, (uint32_t)left, s->size);
	if (!ret)
		ret = gm_rs_axis(&a->ry, sh, (uint32_t)nh, (uint32_t)top, s->size);
	if (ret)
		return fail(a, ret,
			    ret == -ENOMEM ? "out of memory for resize coefficients"
					   : "the image is too small for its eval crop");
	gm_rs_span(&a->rx, &x0, &x1);
	gm_rs_span(&a->ry, &y0, &y1);
	win->wx0 = x0, win->wy0 = y0;
	*rg = (struct region){n, x0, y0, x1 - x0, y1 - y0};
	return 0;
}

/*
 * Choose the crop from the header info (train: RNG draws keyed by seed, epoch,
 * sample id; eval: the centre crop) and the window of the DCT-scaled image that
 * covers it, rounded outwards.
 */
static int choose_window(struct gm_aug *a, const struct gm_jpeg_info *info, uint64_t seed,
			 uint64_t epoch, uint64_t sample_id, struct window *win, struct region *rg)
{
	const struct gm_aug_spec *s = &a->spec;
	struct box b;
	uint32_t size = s->size;

	b = draw_box(s, info->width, info->height, seed, epoch, sample_id, &win->flip);
	if (a->jf)
		gm_jitter_draw(s, seed, epoch, sample_id, &win->jit);

	uint32_t n = gm_jpeg_pick_scale(b.x1 - b.x0, b.y1 - b.y0, size, size);
	uint32_t sw = gm_jpeg_scaled_dim(info->width, n), sh = gm_jpeg_scaled_dim(info->height, n);
	if (s->mode == GM_AUG_EVAL)
		return eval_window(a, info, n, win, rg);
	double f = n / 8.0;
	win->x0 = b.x0 * f, win->y0 = b.y0 * f, win->x1 = b.x1 * f, win->y1 = b.y1 * f;
	uint32_t wx0 = (uint32_t)floor(win->x0), wy0 = (uint32_t)floor(win->y0);
	uint32_t wx1 = (uint32_t)ceil(win->x1), wy1 = (uint32_t)ceil(win->y1);
	if (wx1 > sw)
		wx1 = sw;
	if (wy1 > sh)
		wy1 = sh;
	if (wx0 >= wx1)
		wx0 = wx1 - 1;
	if (wy0 >= wy1)
		wy0 = wy1 - 1;
	win->wx0 = wx0;
	win->wy0 = wy0;
	*rg = (struct region){n, wx0, wy0, wx1 - wx0, wy1 - wy0};
	return 0;
}

/*
 * Open the file (whole: jpeg/len; ranged: the prefix jpeg/len of a file_len-byte
 * file, file_len > 0), choose the window, and for a ranged open say which bytes it
 * needs (*off, *blen; may be NULL). 0 or -errno with the message set (-ENOENT: no
 * row index, quietly: the caller reads the whole file).
 */
static int open_window(struct gm_aug *a, const void *jpeg, size_t len, uint64_t file_len,
		       uint64_t seed, uint64_t epoch, uint64_t sample_id, struct window *win,
		       struct region *rg)
{
	struct gm_jpeg_info info;
	int ret = file_len ? gm_jpeg_open_ranged(a->dec, jpeg, len, file_len, &info)
			   : gm_jpeg_open(a->dec, jpeg, len, &info);
	if (ret)
		return ret == -ENOENT ? ret : fail(a, ret, gm_jpeg_errmsg(a->dec));
	return choose_window(a, &info, seed, epoch, sample_id, win, rg);
}

/* What the row loop needs once the coefficients are built. */
struct resize_plan {
	const uint8_t *src; /* first column the horizontal taps reach, row 0 */
	size_t stride;	    /* of the decoded window */
	size_t nbytes;	    /* bytes of a row the vertical pass makes */
	size_t rowcap;	    /* nbytes + slack: the distance of the two scratch rows */
	bool two;	    /* the two-row horizontal kernel applies */
	bool hx;	    /* the byte-gather kernel applies (a->hx is built) */
	bool px;	    /* the fused float kernel applies (a->hx is built planar) */
	bool hw;	    /* the 16-bit kernel applies (a->hw is built) */
	bool hwnt;	    /* ... by non-temporal stores straight to the output */
	bool vw;	    /* a->vw holds the vertical splits (the 16-bit kernel applies) */
};

/* n bytes at *off, which moves on to the next 64-byte boundary */
static size_t carve(size_t *off, size_t n)
{
	size_t at = *off;
	*off = (at + n + 63) & ~(size_t)63;
	return at;
}

/*
 * Point tmp, row and the tables into one block, 64-byte aligned, hottest first:
 * two intermediate rows (rowcap apart, a multiple of 64; +HX_WINDOW each: the SIMD
 * horizontal passes read past their last tap), two output rows, the 16-bit
 * horizontal table, the vertical splits, the byte-gather table, then what only the
 * set-up reads. Measured (aug_bench, uint8): with the second row at an unaligned
 * rowcap and the buffers wherever the heap put them, the same code took 29 or 33
 * us/img depending on where a block allocated before them ended (a padded struct)
 * or on the block's offset in its page; aligned and together, 29 at every offset.
 */
static int carve_buffers(struct gm_aug *a, const struct resize_plan *p, uint32_t pairs,
			 uint32_t groups)
{
	size_t size = a->spec.size, off = 0;
	size_t hwg = (3 * size + 2 * HW_GROUP - 1) / (2 * HW_GROUP) * 2;
	size_t o_tmp = carve(&off, 2 * p->rowcap), o_row = carve(&off, size * 6 + 32);
	size_t o_hwblk = carve(&off, hwg * 2 * 192), o_hwbase = carve(&off, sizeof(int32_t) * hwg);
	size_t o_vw = carve(&off, sizeof(uint32_t) * 2 * size);
	size_t o_hxblk = carve(&off, (size_t)groups * pairs * 8 * HX_GROUP);
	size_t o_hxbase = carve(&off, sizeof(int32_t) * groups);
	size_t o_split = carve(&off, sizeof(uint32_t) * 2 * size);
	size_t o_adj = carve(&off, sizeof(int16_t) * size);
	size_t o_hv = carve(&off, sizeof(int16_t) * 16 * pairs * size);
	if (gm_grow_scratch((void **)&a->arena, &a->arena_cap, off + 64, 1 << 16))
		return -ENOMEM;
	uint8_t *b = (uint8_t *)(((uintptr_t)a->arena + 63) & ~(uintptr_t)63);
	a->tmp = b + o_tmp;
	a->row = b + o_row;
	a->hw_blk = b + o_hwblk;
	a->hw_base = (int32_t *)(void *)(b + o_hwbase);
	a->vw = (uint32_t *)(void *)(b + o_vw);
	a->hx_blk = b + o_hxblk;
	a->hx_base = (int32_t *)(void *)(b + o_hxbase);
	a->hw_split = (uint32_t *)(void *)(b + o_split);
	a->hw_adj = (int16_t *)(void *)(b + o_adj);
	a->hv = (int16_t *)(void *)(b + o_hv);
	return 0;
}

/*
 * Build this image's coefficients (box relative to the decoded window) and size
 * the scratch rows; turn the horizontal offsets into bytes from the first column
 * used. 0 or -ENOMEM with the message set.
 */
static int plan_resize(struct gm_aug *a, const struct gm_jpeg_image *img, const struct window *win,
		       struct resize_plan *p)
{
	uint32_t size = a->spec.size;

	if (axis_build(&a->ax, win->x0 - win->wx0, win->x1 - win->wx0, img->width, size, win->flip,
		       &a->k) ||
	    axis_build(&a->ay, win->y0 - win->wy0, win->y1 - win->wy0, img->height, size, false,
		       &a->k))
		return fail(a, -ENOMEM, "out of memory for resize coefficients");
	/*
	 * Only the columns the horizontal taps reach go through the vertical pass:
	 * min[] is monotonic (first[] follows the centres, the clamp to in - taps
	 * keeps the order; mirrored, it is reversed), so its ends bound it.
	 */
	uint32_t m0 = (uint32_t)a->ax.min[0], m1 = (uint32_t)a->ax.min[size - 1];
	uint32_t lo = m0 < m1 ? m0 : m1, hi = (m0 > m1 ? m0 : m1) + a->ax.taps;
	p->nbytes = (size_t)(hi - lo) * 3;
	p->rowcap = (p->nbytes + HX_WINDOW + 63) & ~(size_t)63; /* both rows 64-byte aligned */
	/* 1..6 taps: the two-row AVX2 kernel (1, 2 or 3 pairs, lanes doubled) */
	p->two = a->k.hrow2 && a->ax.taps <= 6;
	uint32_t pairs = (a->ax.taps + 1) / 2;
	uint32_t groups = (3 * size + 4 * HX_GROUP - 1) / (4 * HX_GROUP) * 4;
	bool fuse =
	    (a->rout == GM_OUT_F32_CHW && a->k.pxrow) || (a->rout == GM_OUT_F16_CHW && a->k.hpxrow);
	groups = fuse && px_groups(size) > groups ? px_groups(size) : groups;
	if (carve_buffers(a, p, pairs, groups))
		return fail(a, -ENOMEM, "out of memory for resize buffers");
	memset(a->tmp + p->nbytes, 0, HX_WINDOW);
	memset(a->tmp + p->rowcap + p->nbytes, 0, HX_WINDOW);
	/* from here on the horizontal offsets are in bytes, relative to column lo */
	for (uint32_t i = 0; i < size; i++)
		a->ax.min[i] = (a->ax.min[i] - (int32_t)lo) * 3;
	p->px = fuse && hx_layout(&a->hx, a->hx_base, a->hx_blk, &a->ax, size, true, &a->k);
	p->hw =
	    !p->px && a->k.hwrow && a->k.vws &&
	    hw_build(&a->hw, a->hw_base, a->hw_blk, a->hw_split, a->hw_adj, &a->ax, size, &a->k);
	p->hx = !p->px && !p->hw && a->k.hxrow &&
		hx_layout(&a->hx, a->hx_base, a->hx_blk, &a->ax, size, false, &a->k);
	if (!p->px && !p->hw && !p->hx && a->k.hrow != hrow_c)
		hv_build(a->hv, &a->ax, size, pairs, p->two);
	p->src = img->pixels + (size_t)lo * 3;
	p->stride = img->stride;
	p->vw = a->k.vwrow && a->k.vws && a->ay.taps <= 4;
	if (p->vw)
		a->k.vws(a->ay.coef, a->ay.taps, size, a->vw, a->vw + size);
	return 0;
}

/*
 * Output rows y and y+1 (pair false: y only) of a float output straight from the
 * vertical pass's rows t0, t1, through the fused kernel and the planar table.
 */
static void fused_rows(struct gm_aug *a, void *out, uint32_t y, bool pair, const uint8_t *t0,
		       const uint8_t *t1)
{
	size_t size = a->spec.size, plane = size * size, at = (size_t)y * size;
	for (uint32_t r = 0; r < (pair ? 2u : 1u); r++, at += size) {
		if (a->rout == GM_OUT_F32_CHW)
			a->k.pxrow((float *)out + at, plane, r ? t1 : t0, &a->hx, a->scale,
				   a->bias);
		else
			a->k.hpxrow((uint16_t *)out + at, plane, r ? t1 : t0, &a->hx, a->scale,
				    a->bias);
	}
	a->fused_rows += pair ? 2 : 1;
}

/*
 * Output rows y and y+1 (pair false: y only) into out, vertical then horizontal:
 * the intermediates stay in L1. An odd last row is paired with itself, its twin
 * going to scratch. float outputs are laid out from the uint8 rows as they are
 * made, or with the horizontal pass in one kernel (p->px). nt: uint8 rows are made
 * in a->row, then go to out by non-temporal stores; or (p->hwnt) the 16-bit kernel
 * stores them to out that way itself (aug_bench uint8 min 28.0 -> 27.4 us/img,
 * `bench` augment stage 0.7-1.3 us/img less, same runs).
 */
static void resample_pair(struct gm_aug *a, const struct resize_plan *p, void *out, uint32_t y,
			  bool pair, bool nt)
{
	const struct gm_aug_spec *s = &a->spec;
	uint32_t size = s->size;
	uint8_t *tmp0 = a->tmp, *tmp1 = a->tmp + p->rowcap;
	size_t plane = (size_t)size * size, orow = (size_t)size * 3;

	vpass(a, tmp0, p->src, p->stride, p->nbytes, y, p->vw);
	if (pair)
		vpass(a, tmp1, p->src, p->stride, p->nbytes, y + 1, p->vw);
	if (p->px) {
		fused_rows(a, out, y, pair, tmp0, tmp1);
		return;
	}
	uint8_t *d0 = a->row, *d1 = a->row + orow;
	if (a->rout == GM_OUT_U8_HWC && !nt) {
		d0 = (uint8_t *)out + y * orow;
		d1 = pair ? d0 + orow : a->row;
	}
	if (p->hwnt) { /* the 16-bit kernel stores to out itself, non-temporally */
		d0 = (uint8_t *)out + y * orow;
		d1 = pair ? d0 + orow : a->row;
		a->k.hwntrow(d0, d1, tmp0, pair ? tmp1 : tmp0, &a->hw);
		a->hw_rows += pair ? 2 : 1;
		a->hwnt_rows += pair ? 2 : 1;
		return;
	}
	if (p->hw) {
		a->k.hwrow(d0, d1, tmp0, pair ? tmp1 : tmp0, &a->hw);
		a->hw_rows += pair ? 2 : 1;
	} else if (p->hx) {
		a->k.hxrow(d0, d1, tmp0, pair ? tmp1 : tmp0, &a->hx);
	} else if (p->two) {
		a->k.hrow2(d0, d1, tmp0, pair ? tmp1 : tmp0, &a->ax, a->hv, size);
	} else {
		a->k.hrow(d0, tmp0, &a->ax, a->hv, size);
		if (pair)
			a->k.hrow(d1, tmp1, &a->ax, a->hv, size);
	}
	if (nt)
		a->k.ntcopy((uint8_t *)out + y * orow, a->row, pair ? 2 * orow : orow);
	if (a->rout == GM_OUT_F32_CHW) {
		float *p0 = (float *)out + (size_t)y * size;
		a->k.frow(p0, p0 + plane, p0 + 2 * plane, d0, size, a->scale, a->bias);
		if (pair)
			a->k.frow(p0 + size, p0 + size + plane, p0 + size + 2 * plane, d1, size,
				  a->scale, a->bias);
	} else if (a->rout == GM_OUT_F16_CHW) {
		uint16_t *p0 = (uint16_t *)out + (size_t)y * size;
		a->k.hfrow(p0, p0 + plane, p0 + 2 * plane, d0, size, a->scale, a->bias);
		if (pair)
			a->k.hfrow(p0 + size, p0 + size + plane, p0 + size + 2 * plane, d1, size,
				   a->scale, a->bias);
	}
}

/*
 * Eval: the decoded window img through PIL's resize (rx, ry, built by
 * eval_window) into out, or into jpx and from there to the output layout
 * (jitter, or the float planes row by row). 0 or -ENOMEM with the message set.
 */
static int eval_resize(struct gm_aug *a, const struct gm_jpeg_image *img, const struct window *win,
		       void *out)
{
	const struct gm_aug_spec *s = &a->spec;
	size_t size = s->size, orow = size * 3, plane = size * size;
	if (gm_grow_scratch((void **)&a->rtmp, &a->rtmp_cap, gm_rs_scratch(&a->rx, &a->ry),
			    1 << 16))
		return fail(a, -ENOMEM, "out of memory for the resize's rows");
	uint8_t *px = s->out == GM_OUT_U8_HWC && !a->jf ? out : a->jpx;
	gm_rs_run(&a->rx, &a->ry, img->pixels, img->stride, win->wx0, win->wy0, a->rtmp, px, orow);
	if (a->jf) {
		gm_jitter_apply(&win->jit, s, a->jpx, a->jf, out);
	} else if (s->out == GM_OUT_F32_CHW) {
		for (size_t y = 0; y < size; y++) {
			float *p0 = (float *)out + y * size;
			a->k.frow(p0, p0 + plane, p0 + 2 * plane, px + y * orow, (uint32_t)size,
				  a->scale, a->bias);
		}
	} else if (s->out == GM_OUT_F16_CHW) {
		for (size_t y = 0; y < size; y++) {
			uint16_t *p0 = (uint16_t *)out + y * size;
			a->k.hfrow(p0, p0 + plane, p0 + 2 * plane, px + y * orow, (uint32_t)size,
				   a->scale, a->bias);
		}
	}
	return 0;
}

/* Train: the crop through goldminer's resize kernels (resample_pair) into out, or
 * into jpx for the colour jitter. 0 or -ENOMEM with the message set. */
static int train_resize(struct gm_aug *a, const struct gm_jpeg_image *img, const struct window *win,
			void *out)
{
	struct resize_plan plan = {
	    0}; /* every field is set by plan_resize; gcc cannot always tell */
	const struct gm_aug_spec *s = &a->spec;
	int ret = plan_resize(a, img, win, &plan);
	if (ret)
		return ret;
	/* colour jitter reads the resized rows at once: no non-temporal stores */
	void *dst = a->jf ? (void *)a->jpx : out;
	bool nt = a->rout == GM_OUT_U8_HWC && a->k.ntcopy && !a->jf;
	/* hwntrow's stores need every row 32-byte aligned (a ring slot is) */
	plan.hwnt =
	    nt && plan.hw && a->k.hwntrow && ((uintptr_t)out & 31) == 0 && s->size * 3 % 32 == 0;
	for (uint32_t y = 0; y < s->size; y += 2)
		resample_pair(a, &plan, dst, y, y + 1 < s->size, nt);
	if (a->k.ntfence) /* the non-temporal stores are done before the caller publishes */
		a->k.ntfence();
	if (a->jf)
		gm_jitter_apply(&win->jit, s, a->jpx, a->jf, out);
	return 0;
}

/*
 * Decode the window rg, then resize it into out; timings added to t from t0
 * (start). 0 or -errno with the message set. (Resizing rows as the decoder
 * delivered them, 16 at a time, while they were in the cache: 2 us/img slower.)
 */
static int decode_resize(struct gm_aug *a, const struct region *rg, const struct window *win,
			 void *out, struct gm_aug_times *t, uint64_t t0)
{
	struct gm_jpeg_image img;
	int ret = gm_jpeg_decode_region(a->dec, rg->n, rg->x, rg->y, rg->w, rg->h, &img);
	if (ret)
		return fail(a, ret, gm_jpeg_errmsg(a->dec));
	uint64_t t1 = gm_now_ns();
	ret = a->spec.mode == GM_AUG_EVAL ? eval_resize(a, &img, win, out)
					  : train_resize(a, &img, win, out);
	if (t && !ret) {
		t->decode_ns += t1 - t0;
		t->augment_ns += gm_now_ns() - t1;
	}
	return ret;
}

/*
 * The ranged decode (gm_aug_sample_range's, also gm_aug_sample's for a whole file
 * with a row index): -ENOENT, quietly, when the prefix holds no usable index.
 */
static int sample_ranged(struct gm_aug *a, const void *prefix, size_t plen, uint64_t file_len,
			 const void *bytes, uint64_t off, size_t blen, const uint64_t key[3],
			 void *out, struct gm_aug_times *t, uint64_t t0)
{
	struct window win;
	struct region rg;
	int ret = open_window(a, prefix, plen, file_len, key[0], key[1], key[2], &win, &rg);
	if (ret)
		return ret;
	gm_jpeg_set_bytes(a->dec, bytes, off, blen);
	return decode_resize(a, &rg, &win, out, t, t0);
}

/*
 * A file with a row index (pack --restart into shards) is decoded through it
 * whether it was read whole or in part (gm_aug_sample_range), so that which bytes
 * a worker read never decides how a sample decodes: for a valid file both ways
 * give the same pixels, and for a corrupt one the same outcome either way. An
 * index that does not match its file (-ESTALE: jpeg.c checks it on the bytes a
 * ranged read would hold, so both ways see the same) is set aside and the file
 * decoded as one without an index: the pixels an honest index gives, since a
 * window spliced from a restart-marked file is its full decode's window.
 */
int gm_aug_sample(struct gm_aug *a, const void *jpeg, size_t len, uint64_t seed, uint64_t epoch,
		  uint64_t sample_id, void *out, struct gm_aug_times *t)
{
	struct window win;
	struct region rg;
	uint64_t t0 = gm_now_ns(), key[3] = {seed, epoch, sample_id};
	int ret;

	a->errmsg[0] = '\0';
	a->ix_stale = false;
	if (!out)
		return fail(a, -EINVAL, "no output buffer");
	if (jpeg && gm_jpeg_index_bytes(jpeg, len)) {
		ret = sample_ranged(a, jpeg, len, len, jpeg, 0, len, key, out, t, t0);
		if (ret != -ENOENT && ret != -ESTALE)
			return ret;
		a->ix_stale = ret == -ESTALE;
		a->errmsg[0] = '\0';
	}
	ret = open_window(a, jpeg, len, 0, seed, epoch, sample_id, &win, &rg);
	return ret ? ret : decode_resize(a, &rg, &win, out, t, t0);
}

bool gm_aug_index_stale(const struct gm_aug *a)
{
	return a->ix_stale;
}

int gm_aug_range(struct gm_aug *a, const void *prefix, size_t plen, uint64_t file_len,
		 uint64_t seed, uint64_t epoch, uint64_t sample_id, uint64_t *off, uint64_t *len)
{
	struct window win;
	struct region rg;

	a->errmsg[0] = '\0';
	if (!file_len)
		return -ENOENT;
	int ret = open_window(a, prefix, plen, file_len, seed, epoch, sample_id, &win, &rg);
	if (!ret)
		ret = gm_jpeg_region_bytes(a->dec, rg.n, rg.x, rg.y, rg.w, rg.h, off, len);
	gm_jpeg_abort(a->dec);
	return ret;
}

int gm_aug_sample_range(struct gm_aug *a, const void *prefix, size_t plen, uint64_t file_len,
			const void *bytes, uint64_t off, size_t blen, uint64_t seed, uint64_t epoch,
			uint64_t sample_id, void *out, struct gm_aug_times *t)
{
	uint64_t t0 = gm_now_ns(), key[3] = {seed, epoch, sample_id};

	a->errmsg[0] = '\0';
	a->ix_stale = false;
	if (!out || !file_len)
		return fail(a, -EINVAL, !out ? "no output buffer" : "no file length");
	int ret = sample_ranged(a, prefix, plen, file_len, bytes, off, blen, key, out, t, t0);
	return ret == -ENOENT ? fail(a, -EBADMSG, "the row index of the first read no longer reads")
			      : ret;
}

/* ---- coefficient mode (coef.h) ------------------------------------------------ */

/* The PIXELS slot: the header, then the sample gm_aug_sample makes. */
static int coef_pixels_slot(struct gm_aug *a, const void *jpeg, size_t len, const uint64_t key[3],
			    struct gm_coef_slot *s, struct gm_aug_times *t)
{
	size_t ob = gm_aug_out_bytes(&a->spec);
	memset(s, 0, GM_COEF_HDR_BYTES);
	s->magic = GM_COEF_MAGIC, s->version = GM_COEF_VERSION, s->kind = GM_COEF_KIND_PIXELS;
	s->bytes = (uint32_t)(GM_COEF_HDR_BYTES + ob);
	memcpy(s->key, key, sizeof(s->key));
	return gm_aug_sample(a, jpeg, len, key[0], key[1], key[2], (uint8_t *)s + GM_COEF_HDR_BYTES,
			     t);
}

int gm_aug_coef_sample(struct gm_aug *a, const void *jpeg, size_t len, uint64_t seed,
		       uint64_t epoch, uint64_t sample_id, void *slot, size_t cap,
		       struct gm_aug_times *t)
{
	struct gm_coef_slot *s = slot;
	struct window win = {0};
	struct region rg;
	uint64_t t0 = gm_now_ns(), key[3] = {seed, epoch, sample_id};

	a->errmsg[0] = '\0';
	if (!slot || cap < gm_coef_slot_bytes(gm_aug_out_bytes(&a->spec)) || cap > UINT32_MAX)
		return fail(a, -EINVAL, "no slot, or one under gm_coef_slot_bytes");
	if (!jpeg || gm_jpeg_index_bytes(jpeg, len)) /* a row index: its own ranged decode */
		return coef_pixels_slot(a, jpeg, len, key, s, t);
	int ret = open_window(a, jpeg, len, 0, seed, epoch, sample_id, &win, &rg);
	if (ret)
		return ret;
	/* a window likely to outgrow the slot takes the CPU path before its decode,
	 * not after it (the entropy decode paid twice): 7 of the 10 of the photo
	 * set's 300 train uint8 windows that do not fit, none of those that do */
	if (gm_jpeg_coef_guess(a->dec, rg.n, rg.w, rg.h) > cap) {
		gm_jpeg_abort(a->dec);
		return coef_pixels_slot(a, jpeg, len, key, s, t);
	}
	memset(s, 0, GM_COEF_HDR_BYTES);
	ret = gm_jpeg_decode_coefs(a->dec, rg.n, rg.x, rg.y, rg.w, rg.h, s, cap);
	/* -EBADMSG too: the MCUs carried reach past the rows the CPU path reads (a
	 * neighbour for the upsampling), so a file corrupt there is the CPU path's to
	 * judge, and its outcome (an error, or pixels) is the one given */
	if (ret == -ENOTSUP || ret == -ENOSPC || ret == -EBADMSG)
		return coef_pixels_slot(a, jpeg, len, key, s, t);
	if (ret)
		return fail(a, ret, gm_jpeg_errmsg(a->dec));
	s->rx = rg.x, s->ry = rg.y, s->rw = rg.w, s->rh = rg.h;
	s->flip = win.flip;
	s->box[0] = win.x0, s->box[1] = win.y0, s->box[2] = win.x1, s->box[3] = win.y1;
	memcpy(s->key, key, sizeof(s->key));
	if (a->jf) {
		s->jitter_n = win.jit.n;
		memcpy(s->jitter_order, win.jit.order, sizeof(s->jitter_order));
		memcpy(s->jitter_factor, win.jit.factor, sizeof(s->jitter_factor));
	}
	if (t)
		t->decode_ns += gm_now_ns() - t0;
	return 0;
}

/* The window (and, eval, the resize axes) of a COEFS slot, as choose_window made
 * them: train from the slot's draws, eval rebuilt from the image's size and
 * checked against the slot's region. 0 or -EBADMSG / -ENOMEM with the message. */
static int coef_window_of(struct gm_aug *a, const struct gm_coef_slot *s, struct window *win)
{
	memset(win, 0, sizeof(*win));
	win->wx0 = s->rx, win->wy0 = s->ry, win->flip = s->flip != 0;
	win->x0 = s->box[0], win->y0 = s->box[1], win->x1 = s->box[2], win->y1 = s->box[3];
	if (s->jitter_n > 4 || (!a->jf && s->jitter_n))
		return fail(a, -EBADMSG, "a slot's colour jitter unlike the spec's");
	win->jit.n = s->jitter_n;
	memcpy(win->jit.order, s->jitter_order, sizeof(win->jit.order));
	memcpy(win->jit.factor, s->jitter_factor, sizeof(win->jit.factor));
	for (uint32_t i = 0; i < win->jit.n; i++)
		if (win->jit.order[i] > GM_JITTER_HUE)
			return fail(a, -EBADMSG, "a slot's colour jitter op out of range");
	if (a->spec.mode != GM_AUG_EVAL)
		return 0;
	struct gm_jpeg_info info = {.width = s->width, .height = s->height};
	struct region rg;
	struct window w2 = *win;
	int ret = eval_window(a, &info, s->scale, &w2, &rg);
	if (ret)
		return ret;
	if (rg.x != s->rx || rg.y != s->ry || rg.w != s->rw || rg.h != s->rh)
		return fail(a, -EBADMSG, "a slot's window unlike the eval crop of its image");
	return 0;
}

/* A slot checked (0), or -EBADMSG with the message set. */
static int coef_checked(struct gm_aug *a, const struct gm_coef_slot *s, size_t len, void *out)
{
	char why[256];
	a->errmsg[0] = '\0';
	if (!out || gm_coef_check(s, len, gm_aug_out_bytes(&a->spec), why, sizeof(why)))
		return fail(a, -EBADMSG, out ? why : "no output buffer");
	return 0;
}

/* The window of a checked COEFS slot rebuilt on the host into a->cpix. */
static int coef_window_pixels(struct gm_aug *a, const struct gm_coef_slot *s)
{
	if (gm_grow_scratch((void **)&a->cplanes, &a->cplanes_cap, gm_coef_planes_bytes(s),
			    1 << 16) ||
	    gm_grow_scratch((void **)&a->cpix, &a->cpix_cap, (size_t)s->rw * s->rh * 3 + 64,
			    1 << 16))
		return fail(a, -ENOMEM, "out of memory for a coefficient slot's window");
	gm_coef_pixels(s, a->cplanes, a->cpix);
	return 0;
}

/* gm_aug_coef_finish and _window: the window given, or rebuilt here (NULL). */
static int coef_finish(struct gm_aug *a, const void *slot, size_t len, const uint8_t *window,
		       void *out)
{
	const struct gm_coef_slot *s = slot;
	size_t ob = gm_aug_out_bytes(&a->spec);
	struct window win;

	int ret = coef_checked(a, s, len, out);
	if (ret)
		return ret;
	if (s->kind == GM_COEF_KIND_PIXELS) {
		memcpy(out, (const uint8_t *)s + GM_COEF_HDR_BYTES, ob);
		return 0;
	}
	if ((ret = coef_window_of(a, s, &win)))
		return ret;
	if (!window) {
		if ((ret = coef_window_pixels(a, s)))
			return ret;
		window = a->cpix;
	}
	struct gm_jpeg_image img = {window, (size_t)s->rw * 3, s->rx, s->ry, s->rw,
				    s->rh,  s->scale,	       0,     0};
	return a->spec.mode == GM_AUG_EVAL ? eval_resize(a, &img, &win, out)
					   : train_resize(a, &img, &win, out);
}

int gm_aug_coef_finish(struct gm_aug *a, const void *slot, size_t len, void *out)
{
	return coef_finish(a, slot, len, NULL, out);
}

int gm_aug_coef_finish_window(struct gm_aug *a, const void *slot, size_t len, const uint8_t *window,
			      void *out)
{
	if (!window)
		return fail(a, -EINVAL, "no window");
	return coef_finish(a, slot, len, window, out);
}

/* One axis of the plan: train from ax (pixel offsets, the flip in them), eval from
 * PIL's axis r (its offsets made relative to the window's first sample w0). */
static void plan_axis(int32_t *d, uint32_t size, uint32_t k, const struct axis *ax,
		      const struct rs_axis *r, uint32_t w0)
{
	for (uint32_t i = 0; i < size; i++) {
		d[i] = ax ? ax->min[i] : r->lo[i] - (int32_t)w0;
		d[size + i] = ax ? (int32_t)ax->taps : r->n[i];
		for (uint32_t j = 0; j < k; j++)
			d[2 * size + (size_t)i * k + j] =
			    ax ? ax->coef[(size_t)i * k + j] : r->k[(size_t)i * k + j];
	}
}

/* The plan of a checked COEFS slot whose window is win, into a->fplan. */
static int coef_plan(struct gm_aug *a, const struct gm_coef_slot *s, const struct window *win,
		     struct gm_fm_plan **out)
{
	const struct gm_aug_spec *sp = &a->spec;
	uint32_t size = sp->size;
	bool eval = sp->mode == GM_AUG_EVAL;
	if (!eval &&
	    (axis_build(&a->ax, win->x0 - win->wx0, win->x1 - win->wx0, s->rw, size, win->flip,
			&a->k) ||
	     axis_build(&a->ay, win->y0 - win->wy0, win->y1 - win->wy0, s->rh, size, false, &a->k)))
		return fail(a, -ENOMEM, "out of memory for resize coefficients");
	uint32_t kx = eval ? a->rx.ksize : a->ax.taps, ky = eval ? a->ry.ksize : a->ay.taps;
	size_t bytes = gm_fm_plan_bytes(size, kx, ky);
	if (bytes > UINT32_MAX ||
	    gm_grow_scratch((void **)&a->fplan, &a->fplan_cap, bytes, 1 << 14))
		return fail(a, -ENOMEM, "out of memory for a finish plan");
	struct gm_fm_plan *p = (struct gm_fm_plan *)(void *)a->fplan;
	memset(p, 0, sizeof(*p));
	p->bytes = (uint32_t)bytes, p->size = size, p->win_w = s->rw, p->win_h = s->rh;
	p->eval = eval, p->out = (uint8_t)sp->out, p->jitter = a->jf != NULL;
	p->jit_n = (uint8_t)win->jit.n;
	memcpy(p->jit_order, win->jit.order, sizeof(p->jit_order));
	memcpy(p->jit_factor, win->jit.factor, sizeof(p->jit_factor));
	for (int c = 0; c < 3; c++) { /* jitter.c's from_planes, or aug.c's frow */
		p->scale[c] = a->jf ? (float)(1.0 / sp->std[c]) : a->scale[c];
		p->bias[c] = a->jf ? (float)(-(double)sp->mean[c] / sp->std[c]) : a->bias[c];
	}
	p->kx = kx, p->ky = ky;
	p->off_x = sizeof(*p);
	p->off_y = (uint32_t)(p->off_x + 4 * (size_t)size * (2 + kx));
	plan_axis((int32_t *)(void *)(a->fplan + p->off_x), size, kx, eval ? NULL : &a->ax, &a->rx,
		  win->wx0);
	plan_axis((int32_t *)(void *)(a->fplan + p->off_y), size, ky, eval ? NULL : &a->ay, &a->ry,
		  win->wy0);
	*out = p;
	return 0;
}

int gm_aug_coef_plan(struct gm_aug *a, const void *slot, size_t len, const void **plan,
		     size_t *bytes)
{
	const struct gm_coef_slot *s = slot;
	struct gm_fm_plan *p;
	struct window win;
	int ret = coef_checked(a, s, len, plan);
	if (ret)
		return ret;
	if (s->kind != GM_COEF_KIND_COEFS)
		return fail(a, -EINVAL, "a PIXELS slot carries its sample: no plan");
	if ((ret = coef_window_of(a, s, &win)) || (ret = coef_plan(a, s, &win, &p)))
		return ret;
	*plan = p;
	if (bytes)
		*bytes = p->bytes;
	return 0;
}

/* The gray mean of the resized sample hwc before the contrast op, jitter.c's sum:
 * each group of 64 blocks' 16 lane sums added to the double in lane order. */
static float coef_gray_mean(const struct gm_fm_plan *p, const uint8_t *hwc)
{
	size_t nb = gm_fm_gray_blocks(p);
	double sum = 0;
	for (size_t b0 = 0; b0 < nb; b0 += GM_FM_FLUSH)
		for (uint32_t lane = 0; lane < GM_FM_LANES; lane++)
			sum += gm_fm_gray_part(p, hwc, lane, b0,
					       b0 + GM_FM_FLUSH < nb ? b0 + GM_FM_FLUSH : nb);
	return gm_fm_gray_finish(p, hwc, sum);
}

/* The plan run on the host over window, an element (a pixel, jittered) a call, as
 * the device's kernels run it; hwc: size * size * 3 bytes of scratch (jitter). */
static void coef_plan_run(const struct gm_fm_plan *p, const uint8_t *window, uint8_t *hwc,
			  void *out)
{
	uint32_t size = p->size;
	size_t n = (size_t)size * size, stride = (size_t)p->win_w * 3;
	for (uint32_t oy = 0; oy < size; oy++)
		for (uint32_t ox = 0; ox < size; ox++)
			for (uint32_t c = 0; c < 3; c++) {
				uint8_t v = gm_fm_resized(p, window, stride, oy, ox, c);
				if (p->jitter)
					hwc[((size_t)oy * size + ox) * 3 + c] = v;
				else
					gm_fm_layout(p, out, oy, ox, c, v);
			}
	if (!p->jitter)
		return;
	float mean = gm_fm_contrast_at(p) < p->jit_n ? coef_gray_mean(p, hwc) : 0.0f;
	for (size_t i = 0; i < n; i++)
		gm_fm_jitter_out(p, hwc, i, mean, out);
}

int gm_aug_coef_finish_shared(struct gm_aug *a, const void *slot, size_t len, void *out)
{
	const struct gm_coef_slot *s = slot;
	struct gm_fm_plan *p;
	struct window win;
	int ret = coef_checked(a, s, len, out);
	if (ret)
		return ret;
	if (s->kind == GM_COEF_KIND_PIXELS) {
		memcpy(out, (const uint8_t *)s + GM_COEF_HDR_BYTES, gm_aug_out_bytes(&a->spec));
		return 0;
	}
	if ((ret = coef_window_of(a, s, &win)) || (ret = coef_window_pixels(a, s)) ||
	    (ret = coef_plan(a, s, &win, &p)))
		return ret;
	if (p->jitter && !a->jpx)
		return fail(a, -EINVAL, "no jitter scratch"); /* gm_aug_create made it */
	coef_plan_run(p, a->cpix, a->jpx, out);
	return 0;
}
