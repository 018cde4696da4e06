/*
 * resample.c - PIL's antialiased bilinear resize for a window of its output
 * (resample.h), used by aug.c for the eval transform.
 *
 * Design: the coefficients are PIL's (Pillow's precompute_coeffs and
 * normalize_coeffs_8bpc, restated here from what they compute): output i of a
 * resize of `in` samples to `full` is centred at (i + 0.5) * in / full; its taps
 * are the samples from (int)(centre - support + 0.5) to (int)(centre + support +
 * 0.5) clipped to the input, support = max(in / full, 1); each weight is the
 * triangle 1 - |x + 0.5 - centre| / max(in / full, 1), normalised in double, then
 * rounded to 22-bit fixed point. The passes are PIL's too: horizontal first, over
 * only the rows the vertical taps reach, rounding to uint8 (add half, shift,
 * clamp), then vertical. For a crop of PIL's output this gives PIL's bytes, which
 * goldminer's own resize (aug.c: vertical first, 14-bit weights, its SIMD
 * kernels) misses by one level on about one pixel in ten.
 *
 * Both passes run the same vectorised row loop (vrow): the horizontal one over
 * the window's columns laid out as rows (a transpose there and back). It still
 * costs more than aug.c's kernels (14-bit weights in 16-bit lanes; PIL's 22-bit
 * weights need 32-bit products), so aug.c uses it for the eval transform, where
 * torchvision's bytes are the reference, and keeps its own for the train crop.
 *
 * Not done here: other filters, 16-bit or float images, the image's edge
 * handling for a window that does not cover the taps (the caller decodes one
 * that does).
 */
#include "resample.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "goldminer/util.h"

#define PREC 22 /* PIL's PRECISION_BITS for 8-bit images */

void gm_rs_axis_free(struct rs_axis *ax)
{
	free(ax->lo);
	free(ax->n);
	free(ax->k);
	free(ax->w);
}

/* Pass 1, PIL's: output i's first tap, tap count and normalised weights (in
 * ax->w, ksize apart); returns the largest tap count. */
static uint32_t pil_weights(struct rs_axis *ax, uint32_t in, double scale, double support,
			    uint32_t first)
{
	double ss = 1.0 / (scale < 1.0 ? 1.0 : scale);
	uint32_t taps = 1;
	for (uint32_t i = 0; i < ax->out; i++) {
		double center = (first + i + 0.5) * scale, ww = 0,
		       *w = ax->w + (size_t)i * ax->ksize;
		int xmin = (int)(center - support + 0.5), xmax = (int)(center + support + 0.5);
		xmin = xmin < 0 ? 0 : xmin;
		xmax = xmax > (int)in ? (int)in : xmax;
		xmax -= xmin;
		xmax = xmax > (int)ax->ksize ? (int)ax->ksize : xmax;
		for (int x = 0; x < xmax; x++) {
			double v = fabs((x + xmin - center + 0.5) * ss);
			w[x] = v < 1.0 ? 1.0 - v : 0.0;
			ww += w[x];
		}
		for (int x = 0; x < xmax; x++)
			w[x] = ww != 0.0 ? w[x] / ww : w[x];
		ax->lo[i] = xmin;
		ax->n[i] = xmax;
		taps = (uint32_t)xmax > taps ? (uint32_t)xmax : taps;
	}
	return taps;
}

int gm_rs_axis(struct rs_axis *ax, uint32_t in, uint32_t full, uint32_t first, uint32_t out)
{
	if (!out || !in || !full || first + (uint64_t)out > full)
		return -EINVAL;
	double scale = (double)in / full, support = scale < 1.0 ? 1.0 : scale;
	uint32_t ksize = (uint32_t)ceil(support) * 2 + 1;
	if (gm_grow_scratch((void **)&ax->lo, &ax->lo_cap, sizeof(int32_t) * out, 256) ||
	    gm_grow_scratch((void **)&ax->n, &ax->n_cap, sizeof(int32_t) * out, 256) ||
	    gm_grow_scratch((void **)&ax->k, &ax->k_cap, sizeof(int32_t) * out * ksize, 1024) ||
	    gm_grow_scratch((void **)&ax->w, &ax->w_cap, sizeof(double) * out * ksize, 1024))
		return -ENOMEM;
	ax->out = out;
	ax->ksize = ksize;
	uint32_t taps = pil_weights(ax, in, scale, support, first);
	/* Pass 2: every output a run of `taps` inside [0, in) (zeros past its own
	 * taps), so that the passes can take the same count for each; 22-bit. */
	ax->taps = taps;
	for (uint32_t i = 0; i < out; i++) {
		int xmin = ax->lo[i], n = ax->n[i];
		int start = xmin + (int)taps > (int)in ? (int)(in - taps) : xmin;
		const double *w = ax->w + (size_t)i * ksize;
		int32_t *k = ax->k + (size_t)i * ksize;
		for (uint32_t x = 0; x < taps; x++) {
			int at = (int)x - (xmin - start);
			double v = at >= 0 && at < n ? w[at] : 0.0;
			k[x] = (int32_t)(0.5 + v * (1 << PREC)); /* v >= 0 */
		}
		ax->lo[i] = start;
		ax->n[i] = (int32_t)taps;
	}
	return 0;
}

void gm_rs_span(const struct rs_axis *ax, uint32_t *lo, uint32_t *hi)
{
	int32_t a = ax->lo[0], b = 0;
	for (uint32_t i = 0; i < ax->out; i++) {
		a = ax->lo[i] < a ? ax->lo[i] : a;
		b = ax->lo[i] + ax->n[i] > b ? ax->lo[i] + ax->n[i] : b;
	}
	*lo = (uint32_t)a;
	*hi = (uint32_t)(b > a ? b : a + 1);
}

static inline uint8_t clip8(int32_t v)
{
	if (v >= (1 << PREC << 8))
		return 255;
	return v <= 0 ? 0 : (uint8_t)(v >> PREC);
}

#define BLK 16

/* One row of the vertical pass: nb bytes from taps rows of t (rs bytes apart); K:
 * taps as a compile-time constant (the tap loop unrolls, the sums stay in
 * registers), or 0 for any count. */
static inline __attribute__((always_inline)) void vrow_k(const uint8_t *t, size_t rs, size_t nb,
							 const int32_t *k, int32_t taps, uint8_t *d,
							 const int32_t K)
{
	int32_t n = K ? K : taps;
	size_t x = 0;
	for (; x + BLK <= nb; x += BLK) { /* constant inner counts: gcc -O2 vectorises */
		int32_t acc[BLK];
		for (int j = 0; j < BLK; j++)
			acc[j] = 1 << (PREC - 1);
#pragma GCC unroll 8
		for (int32_t y = 0; y < n; y++)
			for (int j = 0; j < BLK; j++)
				acc[j] += t[(size_t)y * rs + x + j] * k[y];
		for (int j = 0; j < BLK; j++)
			d[x + j] = clip8(acc[j]);
	}
	for (; x < nb; x++) {
		int32_t acc = 1 << (PREC - 1);
		for (int32_t y = 0; y < n; y++)
			acc += t[(size_t)y * rs + x] * k[y];
		d[x] = clip8(acc);
	}
}

/* vrow_k for the common tap counts. Cloned for AVX2 and SSE4.1 (pmulld: SSE2 has
 * no 32-bit multiply, gcc emulates it), the clone chosen at load time by the CPU;
 * measured on 500x375 photos' eval crops, 0.52 -> 0.40 ms a resize. */
#ifdef __SANITIZE_THREAD__
/* (TSan instruments the clones' resolver, an ifunc the dynamic loader runs before
 * TSan's runtime is up: it crashed every binary linking this. One version there.) */
#define VROW_CLONES
#else
#define VROW_CLONES __attribute__((target_clones("avx2", "sse4.1", "default")))
#endif
VROW_CLONES static void vrow(const uint8_t *t, size_t rs, size_t nb, const int32_t *k, int32_t taps,
			     uint8_t *d)
{
	if (taps == 2)
		vrow_k(t, rs, nb, k, taps, d, 2);
	else if (taps == 3)
		vrow_k(t, rs, nb, k, taps, d, 3); /* 1..1.5x: most eval crops */
	else if (taps == 4)
		vrow_k(t, rs, nb, k, taps, d, 4);
	else
		vrow_k(t, rs, nb, k, taps, d, 0);
}

size_t gm_rs_scratch(const struct rs_axis *ax, const struct rs_axis *ay)
{
	uint32_t xlo, xhi, ylo, yhi;
	gm_rs_span(ax, &xlo, &xhi);
	gm_rs_span(ay, &ylo, &yhi);
	size_t ny3 = (size_t)(yhi - ylo) * 3;
	return (size_t)(xhi - xlo) * ny3 + 2 * (size_t)ax->out * ny3;
}

/* d[x * ny3 + y * 3 + c] = s[y * stride + x * 3 + c] for an nx x ny RGB block:
 * the columns as rows, 3 bytes a pixel. */
static void transpose(const uint8_t *s, size_t stride, uint32_t nx, uint32_t ny, uint8_t *d)
{
	size_t ny3 = (size_t)ny * 3;
	for (uint32_t y = 0; y < ny; y++) {
		const uint8_t *p = s + (size_t)y * stride;
		uint8_t *q = d + (size_t)y * 3;
		for (uint32_t x = 0; x < nx; x++, p += 3, q += ny3) {
			q[0] = p[0];
			q[1] = p[1];
			q[2] = p[2];
		}
	}
}

/*
 * The horizontal pass is the vertical one's loop (vrow, vectorised) over the
 * window's columns laid out as rows (transpose), its result laid back as rows:
 * two transposes cost less than a per-pixel tap loop.
 */
void gm_rs_run(const struct rs_axis *ax, const struct rs_axis *ay, const uint8_t *src,
	       size_t stride, uint32_t x0, uint32_t y0, uint8_t *scratch, uint8_t *out,
	       size_t ostride)
{
	uint32_t xlo, xhi, ylo, yhi;
	gm_rs_span(ax, &xlo, &xhi);
	gm_rs_span(ay, &ylo, &yhi);
	uint32_t nx = xhi - xlo, ny = yhi - ylo, w = ax->out;
	size_t ny3 = (size_t)ny * 3, rs = (size_t)w * 3;
	uint8_t *cols = scratch, *hcols = cols + (size_t)nx * ny3, *tmp = hcols + (size_t)w * ny3;
	transpose(src + (size_t)(ylo - y0) * stride + (size_t)(xlo - x0) * 3, stride, nx, ny, cols);
	for (uint32_t i = 0; i < w; i++)
		vrow(cols + (size_t)(ax->lo[i] - (int32_t)xlo) * ny3, ny3, ny3,
		     ax->k + (size_t)i * ax->ksize, ax->n[i], hcols + (size_t)i * ny3);
	transpose(hcols, ny3, ny, w, tmp); /* back: ny rows of w pixels */
	for (uint32_t i = 0; i < ay->out; i++)
		vrow(tmp + (size_t)(ay->lo[i] - (int32_t)ylo) * rs, rs, rs,
		     ay->k + (size_t)i * ay->ksize, ay->n[i], out + (size_t)i * ostride);
}
