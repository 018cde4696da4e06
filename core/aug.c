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
 *   then one horizontal pass makes both output rows (same taps and weights, one
 *   row per 128-bit lane). Hand-written SSE2/SSSE3/AVX2 kernels (chosen at run
 *   time) do both passes. The coefficients are built in two cheap passes (span
 *   from the filter support, then weights) with no libm calls per tap.
 * - Flip costs nothing: the horizontal coefficient table is written mirrored.
 * - float32 CHW output is computed from the uint8 result as x * (1/(255 std)) +
 *   (-mean/std) (torchvision's ToTensor+Normalize of the resized PIL image, to
 *   ~1e-7), deinterleaving RGB into planes 8 pixels a step with AVX2.
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
 * Not done here: colour jitter and other photometric ops, bfloat16 output, EXIF
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

#include "goldminer/jpeg.h"
#include "goldminer/rng.h"
#include "goldminer/util.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#define COEF_BITS 14
#define COEF_ONE (1 << COEF_BITS)
#define MAX_SIZE 8192u

/*
 * One axis of the resize: for output i, taps src[min[i] .. min[i]+taps) (pixels;
 * for the horizontal axis gm_aug_sample turns min into byte offsets).
 */
struct axis {
	int32_t *min;
	int16_t *coef; /* out * taps */
	double *w;     /* scratch: one output's float weights (2*ceil(support)+1) */
	int32_t *first, *count; /* scratch: first nonzero tap and span per output */
	size_t min_cap, coef_cap, w_cap, first_cap, count_cap;
	uint32_t taps;
};

typedef void vrow_fn(uint8_t *restrict d, const uint8_t *restrict s, size_t stride, size_t n,
		     const int16_t *c, uint32_t taps);
typedef void frow_fn(float *restrict p0, float *restrict p1, float *restrict p2,
		     const uint8_t *restrict rgb, uint32_t n, const float *scale, const float *bias);
typedef void hfrow_fn(uint16_t *restrict p0, uint16_t *restrict p1, uint16_t *restrict p2,
		      const uint8_t *restrict rgb, uint32_t n, const float *scale,
		      const float *bias);
typedef void hrow_fn(uint8_t *restrict dst, const uint8_t *restrict src, const struct axis *ax,
		     const int16_t *hv, uint32_t out_w);
typedef void hrow2_fn(uint8_t *restrict dst0, uint8_t *restrict dst1, const uint8_t *src0,
		      const uint8_t *src1, const struct axis *ax, const int16_t *hv,
		      uint32_t out_w);

struct gm_aug {
	struct gm_aug_spec spec;
	struct gm_jpeg *dec;
	struct axis ax, ay;
	uint8_t *tmp; /* one vertical-pass row (window width x 3, + slack) */
	size_t tmp_cap;
	int16_t *hv; /* horizontal coefficients as SIMD operands (hv_build) */
	size_t hv_cap;
	vrow_fn *vrow;
	hrow_fn *hrow;	/* any tap count */
	hrow2_fn *hrow2; /* two rows, 1 to 6 taps (hv built with dup), or NULL */
	frow_fn *frow;
	hfrow_fn *hfrow; /* float16 output */
	uint8_t *row; /* two output rows (u8 HWC, + slack) for the float path / odd size */
	float scale[3], bias[3]; /* float output: x * scale + bias */
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

static bool spec_ok(const struct gm_aug_spec *s)
{
	if (s->mode != GM_AUG_TRAIN && s->mode != GM_AUG_EVAL)
		return false;
	if (s->out != GM_OUT_U8_HWC && s->out != GM_OUT_F32_CHW && s->out != GM_OUT_F16_CHW)
		return false;
	if (s->size == 0 || s->size > MAX_SIZE)
		return false;
	if (s->mode == GM_AUG_TRAIN &&
	    !(s->scale_min > 0 && s->scale_min <= s->scale_max && s->ratio_min > 0 &&
	      s->ratio_min <= s->ratio_max && s->flip_p >= 0 && s->flip_p <= 1))
		return false;
	if (s->mode == GM_AUG_EVAL && (s->resize < s->size || s->resize > 4 * MAX_SIZE))
		return false;
	for (int c = 0; c < 3; c++)
		if (!(s->std[c] != 0) || !isfinite(s->mean[c]) || !isfinite(s->std[c]))
			return false;
	return true;
}

int gm_aug_create(struct gm_aug **out, const struct gm_aug_spec *s)
{
	struct gm_aug *a;
	int ret;

	if (!out || !s || !spec_ok(s))
		return -EINVAL;
	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->spec = *s;
	ret = gm_jpeg_create(&a->dec, s->max_pixels);
	if (ret)
		goto out_free;
	a->row = malloc((size_t)s->size * 6 + 32);
	if (!a->row) {
		ret = -ENOMEM;
		goto out_jpeg;
	}
	pick_kernels(a);
	for (int c = 0; c < 3; c++) {
		a->scale[c] = (float)(1.0 / (255.0 * s->std[c]));
		a->bias[c] = (float)(-(double)s->mean[c] / s->std[c]);
	}
	*out = a;
	return 0;

out_jpeg:
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
	free(a->tmp);
	free(a->hv);
	free(a->row);
	gm_jpeg_destroy(a->dec);
	free(a);
}

const char *gm_aug_errmsg(const struct gm_aug *a)
{
	return a->errmsg;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
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
		double target = area * (s->scale_min + (s->scale_max - s->scale_min) *
							    gm_rng_uniform(r));
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

/* torchvision Resize(resize) (shorter side) + CenterCrop(size), as a box of the original. */
static struct box eval_box(const struct gm_aug_spec *s, uint32_t W, uint32_t H)
{
	double nw, nh;
	struct box b;
	if (W <= H) {
		nw = s->resize;
		nh = floor((double)s->resize * H / W);
	} else {
		nh = s->resize;
		nw = floor((double)s->resize * W / H);
	}
	double top = nearbyint((nh - s->size) / 2.0), left = nearbyint((nw - s->size) / 2.0);
	double fx = W / nw, fy = H / nh;
	b.x0 = left * fx;
	b.x1 = (left + s->size) * fx;
	b.y0 = top * fy;
	b.y1 = (top + s->size) * fy;
	return b;
}

/* ---- resampling ------------------------------------------------------------------ */

/* floor() of a double well inside the int64 range, without a libm call. */
static inline int64_t ifloor(double v)
{
	int64_t t = (int64_t)v;
	return t - (v < (double)t);
}

/*
 * Triangle-filter coefficients mapping the source interval [b0, b1) of a row of
 * `in` samples onto `out` samples (PIL's antialiased bilinear: the filter widens
 * with the downscale factor; taps outside [0, in) are dropped and the rest
 * renormalised). The tap count is the widest span of NONZERO weights (PIL's window
 * is up to 2 taps wider), so a 1..2x downscale needs at most 4.
 * mirror: output i is stored at out-1-i (horizontal flip for free).
 */
static int axis_build(struct axis *ax, double b0, double b1, uint32_t in, uint32_t out,
		      bool mirror)
{
	double scale = (b1 - b0) / out;
	double fscale = scale > 1.0 ? scale : 1.0; /* triangle support 1, widened */
	double inv = 1.0 / fscale; /* multiply, not divide, in the per-tap loop */
	uint32_t kmax = (uint32_t)ceil(fscale) * 2 + 1, taps = 1;

	if (gm_grow_scratch((void **)&ax->w, &ax->w_cap, sizeof(double) * kmax, 1024) ||
	    gm_grow_scratch((void **)&ax->first, &ax->first_cap, sizeof(int32_t) * out, 1024) ||
	    gm_grow_scratch((void **)&ax->count, &ax->count_cap, sizeof(int32_t) * out, 1024) ||
	    gm_grow_scratch((void **)&ax->min, &ax->min_cap, sizeof(int32_t) * out, 1024))
		return -ENOMEM;
	/* Pass 1: the span of nonzero weights, |x + 0.5 - center| < fscale, per output. */
	for (uint32_t i = 0; i < out; i++) {
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
	/* Pass 2: weights, normalised, in fixed point, in a run of `taps` inside [0, in). */
	for (uint32_t i = 0; i < out; i++) {
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
	return 0;
}

/*
 * Vertical pass, one output row: d[x] = sum_k s[k*stride + x] * c[k] over n bytes.
 * Scalar version (any CPU); the SIMD versions below compute the same integers.
 */
static void vrow_c(uint8_t *restrict d, const uint8_t *restrict s, size_t stride, size_t n,
		   const int16_t *c, uint32_t taps)
{
	for (size_t x = 0; x < n; x++) {
		int32_t acc = 1 << (COEF_BITS - 1);
		for (uint32_t k = 0; k < taps; k++)
			acc += s[k * stride + x] * c[k];
		d[x] = (uint8_t)(acc >> COEF_BITS);
	}
}

/*
 * Horizontal pass of one row: src (RGB) -> dst (out_w RGB pixels). Scalar. Here and
 * in the SIMD versions ax->min holds byte offsets into src (gm_aug_sample converts).
 */
static void hrow_c(uint8_t *restrict dst, const uint8_t *restrict src, const struct axis *ax,
		   const int16_t *hv, uint32_t out_w)
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

#if defined(__x86_64__)
/*
 * x86 versions (hand-written because gcc -O2 does not vectorise these loops).
 * Vertical: two taps at a time, bytes of the two source rows interleaved and
 * widened to 16 bits so one pmaddwd does 2 multiply-adds per lane.
 */
static void vrow_sse2(uint8_t *restrict d, const uint8_t *restrict s, size_t stride, size_t n,
		      const int16_t *c, uint32_t taps)
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
				cc = _mm_set1_epi32((int32_t)((uint32_t)(uint16_t)c[k] |
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

/* One pair of taps on 32 bytes: interleave rows a and b, widen, pmaddwd into a0..a3. */
__attribute__((target("avx2"))) static inline void
vpair_avx2(const uint8_t *a, const uint8_t *b, __m256i cc, __m256i *a0, __m256i *a1, __m256i *a2,
	   __m256i *a3)
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
__attribute__((target("avx2"))) static void vrow_avx2(uint8_t *restrict d,
						       const uint8_t *restrict s, size_t stride,
						       size_t n, const int16_t *c, uint32_t taps)
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
		cc[p] = _mm256_set1_epi32((int32_t)((uint32_t)(uint16_t)c[2 * p] |
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
		__m256i r = _mm256_packus_epi16(_mm256_packs_epi32(a0, a1),
						_mm256_packs_epi32(a2, a3));
		_mm256_storeu_si256((__m256i *)(d + x), r);
		x += 32;
		if (x >= n)
			break;
	}
}

/*
 * Horizontal, SSSE3: per output pixel and pair of taps, one 8-byte load, a pshufb
 * to (r0 r1 g0 g1 b0 b1 0 0) as 16-bit lanes and one pmaddwd with the prepared
 * (c0 c1 c0 c1 c0 c1 0 0) vector (hv, built by hv_build). Reads up to 8 bytes
 * past the last tap: the source buffer has slack for that.
 */
__attribute__((target("ssse3"))) static void hrow_ssse3(uint8_t *restrict dst,
							 const uint8_t *restrict src,
							 const struct axis *ax, const int16_t *hv,
							 uint32_t out_w)
{
	const __m128i shuf = _mm_setr_epi8(0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1);
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

/*
 * Horizontal, AVX2, two output rows at once, for up to 6 taps (every upscale and
 * 1..2x downscale, and most up to 3x). Both rows use the same taps and weights,
 * so one pixel of row 0 goes in the low lane and the same pixel of row 1 in the
 * high lane: per pair of taps one vpshufb to (r0 r1 g0 g1 b0 b1 0 0) as 16-bit
 * lanes and one vpmaddwd with hv (c0 c1 c0 c1 c0 c1 0 0 in both lanes, hv_build with dup). The packs keep
 * the lanes apart, so no cross-lane step is needed: after packing four pixels the
 * low lane is row 0's 12 bytes and the high lane row 1's. PAIRS is 1, 2 or 3 (a
 * constant after inlining). Reads up to 20 bytes from each pixel's first tap:
 * the rows have slack for that. Offsets in ax->min are in bytes.
 */
__attribute__((target("avx2"), always_inline)) static inline __m256i
hpix2_avx2(const uint8_t *s0, const uint8_t *s1, const __m256i *cv, int pairs)
{
	const __m256i sh01 = _mm256_setr_epi8(0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1,
					      -1, 0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1,
					      -1, -1, -1);
	const __m256i sh23 = _mm256_setr_epi8(6, -1, 9, -1, 7, -1, 10, -1, 8, -1, 11, -1, -1, -1,
					      -1, -1, 6, -1, 9, -1, 7, -1, 10, -1, 8, -1, 11, -1,
					      -1, -1, -1, -1);
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
	const __m256i pack12 = _mm256_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1,
						-1, 0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1,
						-1, -1);
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
__attribute__((target("avx2"))) static void hrow2_avx2(uint8_t *restrict dst0,
							uint8_t *restrict dst1,
							const uint8_t *src0, const uint8_t *src1,
							const struct axis *ax, const int16_t *hv,
							uint32_t out_w)
{
	if (ax->taps <= 2)
		hrow2_body(dst0, dst1, src0, src1, ax->min, (const __m256i *)hv, out_w, 1);
	else if (ax->taps <= 4)
		hrow2_body(dst0, dst1, src0, src1, ax->min, (const __m256i *)hv, out_w, 2);
	else
		hrow2_body(dst0, dst1, src0, src1, ax->min, (const __m256i *)hv, out_w, 3);
}

static void frow_c(float *restrict p0, float *restrict p1, float *restrict p2,
		   const uint8_t *restrict rgb, uint32_t n, const float *scale, const float *bias);
static void hfrow_c(uint16_t *restrict p0, uint16_t *restrict p1, uint16_t *restrict p2,
		    const uint8_t *restrict rgb, uint32_t n, const float *scale, const float *bias);

/* 8 RGB pixels -> three vectors of x * scale[c] + bias[c] (deinterleaved). */
__attribute__((target("avx2"), always_inline)) static inline void
rgb8_ps(const uint8_t *rgb, const __m256 *s, const __m256 *b, __m256 *o)
{
	const __m128i rl = _mm_setr_epi8(0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
	const __m128i rh = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, 2, 5, -1, -1, -1, -1, -1, -1, -1, -1);
	const __m128i gl = _mm_setr_epi8(1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
	const __m128i gh = _mm_setr_epi8(-1, -1, -1, -1, -1, 0, 3, 6, -1, -1, -1, -1, -1, -1, -1, -1);
	const __m128i bl = _mm_setr_epi8(2, 5, 8, 11, 14, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
	const __m128i bh = _mm_setr_epi8(-1, -1, -1, -1, -1, 1, 4, 7, -1, -1, -1, -1, -1, -1, -1, -1);
	__m128i lo = _mm_loadu_si128((const __m128i *)rgb);
	__m128i hi = _mm_loadl_epi64((const __m128i *)(rgb + 16));
	__m128i c[3] = {_mm_or_si128(_mm_shuffle_epi8(lo, rl), _mm_shuffle_epi8(hi, rh)),
			_mm_or_si128(_mm_shuffle_epi8(lo, gl), _mm_shuffle_epi8(hi, gh)),
			_mm_or_si128(_mm_shuffle_epi8(lo, bl), _mm_shuffle_epi8(hi, bh))};
	for (int k = 0; k < 3; k++)
		o[k] = _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(c[k])),
						   s[k]),
				     b[k]);
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
__attribute__((target("avx2"))) static void frow_avx2(float *restrict p0, float *restrict p1,
						       float *restrict p2,
						       const uint8_t *restrict rgb, uint32_t n,
						       const float *scale, const float *bias)
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
__attribute__((target("avx2,f16c"))) static void hfrow_avx2(uint16_t *restrict p0,
							      uint16_t *restrict p1,
							      uint16_t *restrict p2,
							      const uint8_t *restrict rgb,
							      uint32_t n, const float *scale,
							      const float *bias)
{
	__m256 s[3], b[3];
	splat3(scale, bias, s, b);
	uint32_t x = 0;
	for (; x + 8 <= n; x += 8) {
		__m256 o[3];
		rgb8_ps(rgb + 3 * x, s, b, o);
		_mm_storeu_si128((__m128i *)(p0 + x), _mm256_cvtps_ph(o[0], _MM_FROUND_TO_NEAREST_INT));
		_mm_storeu_si128((__m128i *)(p1 + x), _mm256_cvtps_ph(o[1], _MM_FROUND_TO_NEAREST_INT));
		_mm_storeu_si128((__m128i *)(p2 + x), _mm256_cvtps_ph(o[2], _MM_FROUND_TO_NEAREST_INT));
	}
	if (x < n)
		hfrow_c(p0 + x, p1 + x, p2 + x, rgb + 3 * x, n - x, scale, bias);
}
#endif

/* Scalar twin of frow_avx2 (same float operations, so the same bits). */
static void frow_c(float *restrict p0, float *restrict p1, float *restrict p2,
		   const uint8_t *restrict rgb, uint32_t n, const float *scale, const float *bias)
{
	for (uint32_t x = 0; x < n; x++) {
		p0[x] = (float)rgb[3 * x] * scale[0] + bias[0];
		p1[x] = (float)rgb[3 * x + 1] * scale[1] + bias[1];
		p2[x] = (float)rgb[3 * x + 2] * scale[2] + bias[2];
	}
}

/* Scalar twin of hfrow_avx2. */
static void hfrow_c(uint16_t *restrict p0, uint16_t *restrict p1, uint16_t *restrict p2,
		    const uint8_t *restrict rgb, uint32_t n, const float *scale, const float *bias)
{
	for (uint32_t x = 0; x < n; x++) {
		p0[x] = gm_f32_to_f16((float)rgb[3 * x] * scale[0] + bias[0]);
		p1[x] = gm_f32_to_f16((float)rgb[3 * x + 1] * scale[1] + bias[1]);
		p2[x] = gm_f32_to_f16((float)rgb[3 * x + 2] * scale[2] + bias[2]);
	}
}

/*
 * IEEE float -> half, round to nearest even, the result vcvtps2ph gives (NaN kept
 * quiet with the top payload bits). Written out because C11 has no half type and
 * gcc 12 / clang 14 disagree on _Float16 for x86; tests compare it with F16C.
 */
uint16_t gm_f32_to_f16(float f)
{
	uint32_t x;
	memcpy(&x, &f, sizeof(x));
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
		float v, half = 0.5f;
		memcpy(&v, &ax, sizeof(v));
		v += half;
		uint32_t r, h;
		memcpy(&r, &v, sizeof(r));
		memcpy(&h, &half, sizeof(h));
		return (uint16_t)(sign | (r - h));
	}
	/* Normal: rebias the exponent (127 -> 15) and round the 13 dropped bits to even. */
	uint32_t odd = (ax >> 13) & 1u;
	ax += 0xc8000fffu + odd; /* (15 - 127) << 23, + just under half an ulp, + odd */
	return (uint16_t)(sign | (ax >> 13));
}

/* Choose the fastest kernels this CPU runs; GM_NO_SIMD=1 forces the portable ones. */
static void pick_kernels(struct gm_aug *a)
{
	a->vrow = vrow_c;
	a->hrow = hrow_c;
	a->hrow2 = NULL;
	a->frow = frow_c;
	a->hfrow = hfrow_c;
#if defined(__x86_64__)
	const char *no = getenv("GM_NO_SIMD"); /* "1": portable kernels (tests compare) */
	if (no && no[0] == '1')
		return;
	__builtin_cpu_init();
	a->vrow = vrow_sse2;
	if (__builtin_cpu_supports("ssse3"))
		a->hrow = hrow_ssse3;
	if (__builtin_cpu_supports("avx2")) {
		a->vrow = vrow_avx2;
		a->hrow2 = hrow2_avx2;
		a->frow = frow_avx2;
		unsigned eax, ebx, ecx, edx; /* clang 14's builtin does not know "f16c" */
		if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C))
			a->hfrow = hfrow_avx2;
	}
#endif
}

/*
 * Lay out the horizontal coefficients as pmaddwd operands: 8 int16 per pair of
 * taps (c0 c1 c0 c1 c0 c1 0 0), `pairs` pairs per output (zero-padded beyond the
 * taps); dup: each 8 written twice (both lanes of a 256-bit operand).
 */
static void hv_build(int16_t *hv, const struct axis *ax, uint32_t out_w, uint32_t pairs,
		     bool dup)
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

/*
 * Vertical pass of output row y over the nonzero taps only: the tap count is the
 * axis maximum, and rows with fewer weights (often every other row) have zeros at
 * one end, which would cost a whole pair of source rows. Same sums either way.
 */
static void vpass(struct gm_aug *a, uint8_t *d, const uint8_t *src, size_t stride,
		  size_t nbytes, uint32_t y)
{
	const int16_t *c = a->ay.coef + (size_t)y * a->ay.taps;
	uint32_t k0 = 0, k1 = a->ay.taps - 1;
	while (k0 < k1 && c[k0] == 0)
		k0++;
	while (k1 > k0 && c[k1] == 0)
		k1--;
	a->vrow(d, src + ((size_t)a->ay.min[y] + k0) * stride, stride, nbytes, c + k0,
		k1 - k0 + 1);
}

/* ---- the sample ------------------------------------------------------------------- */

static int fail(struct gm_aug *a, int ret, const char *what)
{
	snprintf(a->errmsg, sizeof(a->errmsg), "gm_aug_sample: %s", what);
	return ret;
}

int gm_aug_sample(struct gm_aug *a, const void *jpeg, size_t len, uint64_t seed, uint64_t epoch,
		  uint64_t sample_id, void *out, struct gm_aug_times *t)
{
	const struct gm_aug_spec *s = &a->spec;
	struct gm_jpeg_info info;
	struct gm_jpeg_image img;
	struct gm_rng r;
	struct box b;
	bool flip = false;
	uint32_t size = s->size;
	uint64_t t0 = now_ns(), t1, t2;
	int ret;

	a->errmsg[0] = '\0';
	if (!out)
		return fail(a, -EINVAL, "no output buffer");
	ret = gm_jpeg_open(a->dec, jpeg, len, &info);
	if (ret)
		return fail(a, ret, gm_jpeg_errmsg(a->dec));
	if (s->mode == GM_AUG_TRAIN) {
		gm_rng_init(&r, seed, GM_RNG_STREAM_SAMPLE, epoch, sample_id);
		flip = gm_rng_uniform(&r) < s->flip_p;
		b = rrc_box(s, &r, info.width, info.height);
	} else {
		b = eval_box(s, info.width, info.height);
	}

	/* Window of the DCT-scaled image covering the box, rounded outwards. */
	uint32_t n = gm_jpeg_pick_scale(b.x1 - b.x0, b.y1 - b.y0, size, size);
	uint32_t sw = gm_jpeg_scaled_dim(info.width, n), sh = gm_jpeg_scaled_dim(info.height, n);
	double f = n / 8.0;
	double sx0 = b.x0 * f, sy0 = b.y0 * f, sx1 = b.x1 * f, sy1 = b.y1 * f;
	uint32_t wx0 = (uint32_t)floor(sx0), wy0 = (uint32_t)floor(sy0);
	uint32_t wx1 = (uint32_t)ceil(sx1), wy1 = (uint32_t)ceil(sy1);
	if (wx1 > sw)
		wx1 = sw;
	if (wy1 > sh)
		wy1 = sh;
	if (wx0 >= wx1)
		wx0 = wx1 - 1;
	if (wy0 >= wy1)
		wy0 = wy1 - 1;
	ret = gm_jpeg_decode_region(a->dec, n, wx0, wy0, wx1 - wx0, wy1 - wy0, &img);
	if (ret)
		return fail(a, ret, gm_jpeg_errmsg(a->dec));
	t1 = now_ns();

	/* Coefficients for this image, box relative to the decoded window. */
	if (axis_build(&a->ax, sx0 - wx0, sx1 - wx0, img.width, size, flip) ||
	    axis_build(&a->ay, sy0 - wy0, sy1 - wy0, img.height, size, false))
		return fail(a, -ENOMEM, "out of memory for resize coefficients");
	/* Only the columns the horizontal taps reach go through the vertical pass. */
	uint32_t lo = UINT32_MAX, hi = 0;
	for (uint32_t i = 0; i < size; i++) {
		uint32_t m = (uint32_t)a->ax.min[i];
		lo = m < lo ? m : lo;
		hi = m + a->ax.taps > hi ? m + a->ax.taps : hi;
	}
	size_t nbytes = (size_t)(hi - lo) * 3, rowcap = nbytes + 32;
	/* 1..6 taps: the two-row AVX2 kernel (1, 2 or 3 pairs, lanes doubled) */
	bool two = a->hrow2 && a->ax.taps <= 6;
	uint32_t pairs = (a->ax.taps + 1) / 2;
	/* Two intermediate rows (+32 each: the SIMD horizontal pass reads past its last tap). */
	if (gm_grow_scratch((void **)&a->tmp, &a->tmp_cap, 2 * rowcap, 1024) ||
	    gm_grow_scratch((void **)&a->hv, &a->hv_cap, sizeof(int16_t) * 16 * pairs * size, 1024))
		return fail(a, -ENOMEM, "out of memory for resize buffers");
	uint8_t *tmp0 = a->tmp, *tmp1 = a->tmp + rowcap;
	memset(tmp0 + nbytes, 0, 32);
	memset(tmp1 + nbytes, 0, 32);
	/* from here on the horizontal offsets are in bytes, relative to column lo */
	for (uint32_t i = 0; i < size; i++)
		a->ax.min[i] = (a->ax.min[i] - (int32_t)lo) * 3;
	if (a->hrow != hrow_c)
		hv_build(a->hv, &a->ax, size, pairs, two);
	const uint8_t *src = img.pixels + (size_t)lo * 3;
	size_t plane = (size_t)size * size, orow = (size_t)size * 3;
	/*
	 * Two rows at a time, vertical then horizontal: the intermediates stay in L1.
	 * An odd last row is paired with itself, its twin going to scratch.
	 */
	for (uint32_t y = 0; y < size; y += 2) {
		bool pair = y + 1 < size;
		vpass(a, tmp0, src, img.stride, nbytes, y);
		if (pair)
			vpass(a, tmp1, src, img.stride, nbytes, y + 1);
		uint8_t *d0 = a->row, *d1 = a->row + orow;
		if (s->out == GM_OUT_U8_HWC) {
			d0 = (uint8_t *)out + y * orow;
			d1 = pair ? d0 + orow : a->row;
		}
		if (two) {
			a->hrow2(d0, d1, tmp0, pair ? tmp1 : tmp0, &a->ax, a->hv, size);
		} else {
			a->hrow(d0, tmp0, &a->ax, a->hv, size);
			if (pair)
				a->hrow(d1, tmp1, &a->ax, a->hv, size);
		}
		if (s->out == GM_OUT_F32_CHW) {
			float *p0 = (float *)out + (size_t)y * size;
			a->frow(p0, p0 + plane, p0 + 2 * plane, d0, size, a->scale, a->bias);
			if (pair)
				a->frow(p0 + size, p0 + size + plane, p0 + size + 2 * plane, d1,
					size, a->scale, a->bias);
		} else if (s->out == GM_OUT_F16_CHW) {
			uint16_t *p0 = (uint16_t *)out + (size_t)y * size;
			a->hfrow(p0, p0 + plane, p0 + 2 * plane, d0, size, a->scale, a->bias);
			if (pair)
				a->hfrow(p0 + size, p0 + size + plane, p0 + size + 2 * plane, d1,
					 size, a->scale, a->bias);
		}
	}
	t2 = now_ns();
	if (t) {
		t->decode_ns += t1 - t0;
		t->augment_ns += t2 - t1;
	}
	return 0;
}
