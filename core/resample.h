/*
 * resample.h - PIL's two-pass antialiased bilinear resize, horizontal pass first,
 * for a window of its output (internal to aug.c; core/resample.c).
 *
 * torchvision's eval transform (Resize, CenterCrop on a PIL image) is PIL's
 * resize of the whole image, then a crop. This makes the crop's pixels only, with
 * PIL's coefficients (computed for the whole resize, 22-bit fixed point) and its
 * order of rounding, from a decoded window that holds every source pixel they
 * reach: the same bytes as PIL for the same decoded pixels.
 */
#ifndef GM_RESAMPLE_H
#define GM_RESAMPLE_H

#include <stddef.h>
#include <stdint.h>

/* One axis: outputs [first, first + out) of a resize of in samples to full. */
struct rs_axis {
	uint32_t out, ksize, taps;
	int32_t *lo, *n; /* per output: first source sample, taps (taps, or fewer
			  * when the input is shorter) */
	int32_t *k;	 /* per output: weights, 22-bit fixed point, ksize apart */
	size_t lo_cap, n_cap, k_cap;
	double *w; /* scratch: the weights in double, ksize apart */
	size_t w_cap;
};

/* Build ax. 0 or -ENOMEM (or -EINVAL: out 0, first + out > full, in 0). */
int gm_rs_axis(struct rs_axis *ax, uint32_t in, uint32_t full, uint32_t first, uint32_t out);

/* The source samples [*lo, *hi) the axis's taps reach. */
void gm_rs_span(const struct rs_axis *ax, uint32_t *lo, uint32_t *hi);

/* Bytes of scratch gm_rs_run needs for these axes. */
size_t gm_rs_scratch(const struct rs_axis *ax, const struct rs_axis *ay);

/*
 * Resize: src is the decoded window (RGB, stride bytes a row) whose top-left is
 * source sample (x0, y0) of both axes' input; it must cover gm_rs_span of both.
 * scratch: gm_rs_scratch(ax, ay) bytes. out: ay->out rows of ax->out * 3 bytes,
 * ostride apart.
 */
void gm_rs_run(const struct rs_axis *ax, const struct rs_axis *ay, const uint8_t *src,
	       size_t stride, uint32_t x0, uint32_t y0, uint8_t *scratch, uint8_t *out,
	       size_t ostride);

void gm_rs_axis_free(struct rs_axis *ax);

#endif
