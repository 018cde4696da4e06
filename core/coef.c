/*
 * coef.c - the coefficient slot's check and its host path (see coef.h): the
 * window's pixels rebuilt from the quantised coefficients with coef_math.h's
 * arithmetic, the same functions the CUDA kernels run.
 *
 * Design: two passes, as the kernels do them. First every block carried is
 * dequantised and inverse-transformed into its component's plane (one plane per
 * component covering the MCU rectangle, at the component's IDCT size); then
 * every pixel of the window takes its components from the planes (upsampled as
 * libjpeg-turbo upsamples) and converts them to RGB. A block's coefficients are
 * found by a running sum of the counts, as a kernel finds them by a prefix sum.
 *
 * Not here: writing slots (jpeg.c, aug.c), the resize after (aug.c), speed: the
 * host path exists to prove the arithmetic, the device to run it.
 */
#include "goldminer/coef.h"
#include "goldminer/util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "coef_math.h"

/* the sample after a PIXELS header stays 32-byte aligned (the 16-bit resize kernel's stores) */
_Static_assert(sizeof(struct gm_coef_slot) % 32 == 0, "header size");

static int bad(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int bad(char *err, size_t errlen, const char *fmt, ...)
{
	char why[200];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	if (err && errlen)
		gm_errf(err, errlen, "gm_coef_check: a malformed coefficient slot: %s", why);
	return -EBADMSG;
}

static bool pow2_scale(uint32_t n)
{
	return n == 1 || n == 2 || n == 4 || n == 8;
}

/* One component's geometry and arrays against the slot's bytes. */
static int check_comp(const struct gm_coef_slot *s, uint32_t c, char *err, size_t errlen)
{
	const struct gm_coef_comp *k = &s->comp[c];
	const uint8_t *base = (const uint8_t *)s;
	uint64_t nb = (uint64_t)s->mcols * s->mrows * k->mw * k->mh;

	if (!pow2_scale(k->ssize) || k->hr < 1 || k->hr > 2 || k->vr < 1 || k->vr > 2 ||
	    k->mw < 1 || k->mw > 4 || k->mh < 1 || k->mh > 4 || k->qt >= GM_COEF_MAX_COMPS ||
	    k->fancy > 1)
		return bad(err, errlen, "component %u's sampling", c);
	if (k->nblocks != nb || (uint64_t)k->off_counts + k->nblocks > s->bytes || k->off_ent % 2 ||
	    (uint64_t)k->off_ent + 2ull * k->nent > s->bytes || k->off_counts < GM_COEF_HDR_BYTES ||
	    k->off_ent < GM_COEF_HDR_BYTES)
		return bad(err, errlen, "component %u's arrays leave the slot", c);
	if ((uint64_t)k->bx0 * k->ssize >= k->dw || (uint64_t)k->by0 * k->ssize >= k->dh ||
	    (uint64_t)k->dw > (uint64_t)k->bw_all * k->ssize ||
	    (uint64_t)k->dh > (uint64_t)k->bh_all * k->ssize)
		return bad(err, errlen, "component %u's blocks lie outside it", c);
	uint64_t sum = 0, span = 0;
	const uint8_t *cnt = base + k->off_counts;
	const uint16_t *ent = (const uint16_t *)(const void *)(base + k->off_ent);
	for (uint32_t b = 0; b < k->nblocks; b++) {
		uint32_t n = cnt[b] & 0x7Fu;
		if (n > 64)
			return bad(err, errlen, "component %u block %u: %u coefficients", c, b, n);
		/* a wide block's positions (a packed entry's are 6 bits) */
		if (cnt[b] & GM_COEF_WIDE)
			for (uint32_t e = 0; e < n && span + 2 * e < k->nent; e++)
				if (ent[span + 2 * e] > 63)
					return bad(err, errlen, "component %u: position %u", c,
						   ent[span + 2 * e]);
		sum += n, span += gm_cm_span(cnt[b]);
	}
	if (sum != k->nnz || span != k->nent)
		return bad(err, errlen,
			   "component %u: counts add to %llu in %llu entries, not %u in %u", c,
			   (unsigned long long)sum, (unsigned long long)span, k->nnz, k->nent);
	/* the window's pixels take their samples from inside the plane */
	uint64_t x0 = (uint64_t)k->bx0 * k->ssize, y0 = (uint64_t)k->by0 * k->ssize;
	uint64_t w = (uint64_t)s->mcols * k->mw * k->ssize,
		 h = (uint64_t)s->mrows * k->mh * k->ssize;
	if (s->rx / k->hr < x0 || (s->rx + s->rw - 1) / k->hr >= x0 + w || s->ry / k->vr < y0 ||
	    (s->ry + s->rh - 1) / k->vr >= y0 + h)
		return bad(err, errlen, "component %u's blocks do not cover the window", c);
	return 0;
}

int gm_coef_check(const struct gm_coef_slot *s, size_t len, size_t out_bytes, char *err,
		  size_t errlen)
{
	if (!s || len < GM_COEF_HDR_BYTES || s->magic != GM_COEF_MAGIC)
		return bad(err, errlen, "no slot header (%zu bytes)", len);
	if (s->version != GM_COEF_VERSION)
		return bad(err, errlen, "version %u, this build reads %u", s->version,
			   GM_COEF_VERSION);
	if (s->bytes < GM_COEF_HDR_BYTES || s->bytes > len)
		return bad(err, errlen, "%u bytes in a %zu-byte slot", s->bytes, len);
	if (s->kind == GM_COEF_KIND_PIXELS)
		return s->bytes >= GM_COEF_HDR_BYTES + out_bytes
			   ? 0
			   : bad(err, errlen, "a %u-byte sample slot, %zu wanted", s->bytes,
				 GM_COEF_HDR_BYTES + out_bytes);
	if (s->kind != GM_COEF_KIND_COEFS)
		return bad(err, errlen, "kind %u", s->kind);
	if ((s->ncomp != 1 && s->ncomp != 3) || !pow2_scale(s->scale) || s->color > GM_COEF_RGB ||
	    (s->ncomp == 1) != (s->color == GM_COEF_GRAY) || !s->width || !s->height ||
	    s->width > 65535 || s->height > 65535 || !s->mcols || !s->mrows || s->mcols > 8192 ||
	    s->mrows > 8192) /* 65535 pixels in MCUs of 8 or more */
		return bad(err, errlen, "image %ux%u, %u components, scale %u/8", s->width,
			   s->height, s->ncomp, s->scale);
	uint64_t sw = ((uint64_t)s->width * s->scale + 7) / 8;
	uint64_t sh = ((uint64_t)s->height * s->scale + 7) / 8;
	if (!s->rw || !s->rh || (uint64_t)s->rx + s->rw > sw || (uint64_t)s->ry + s->rh > sh)
		return bad(err, errlen, "window %ux%u+%u+%u outside the %llux%llu image", s->rw,
			   s->rh, s->rx, s->ry, (unsigned long long)sw, (unsigned long long)sh);
	for (uint32_t c = 0; c < s->ncomp; c++) {
		int ret = check_comp(s, c, err, errlen);
		if (ret)
			return ret;
	}
	return 0;
}

/* Component c's plane: its samples over the rectangle, w x h */
static void plane_dims(const struct gm_coef_slot *s, uint32_t c, size_t *w, size_t *h)
{
	const struct gm_coef_comp *k = &s->comp[c];
	*w = (size_t)s->mcols * k->mw * k->ssize;
	*h = (size_t)s->mrows * k->mh * k->ssize;
}

size_t gm_coef_planes_bytes(const struct gm_coef_slot *s)
{
	size_t n = 0, w, h;
	for (uint32_t c = 0; c < s->ncomp && c < GM_COEF_MAX_COMPS; c++) {
		plane_dims(s, c, &w, &h);
		n += w * h;
	}
	return n;
}

/* Pass 1 for component c: every block inverse-transformed into its plane. */
static void idct_comp(const struct gm_coef_slot *s, uint32_t c, uint8_t *plane)
{
	const struct gm_coef_comp *k = &s->comp[c];
	const uint8_t *base = (const uint8_t *)s;
	const uint8_t *cnt = base + k->off_counts;
	const uint16_t *ent = (const uint16_t *)(const void *)(base + k->off_ent);
	size_t pw, ph, at = 0;
	uint32_t per = (uint32_t)k->mw * k->mh;
	int16_t blk[64];

	plane_dims(s, c, &pw, &ph);
	for (uint32_t b = 0; b < k->nblocks; b++) {
		uint32_t m = b / per, i = b % per;
		uint32_t lx = (m % s->mcols) * k->mw + i % k->mw,
			 ly = (m / s->mcols) * k->mh + i / k->mw;
		if (k->bx0 + lx < k->bw_all && k->by0 + ly < k->bh_all) {
			gm_cm_scatter(cnt[b], ent + at, blk);
			gm_cm_idct(k->ssize, blk, s->q[k->qt],
				   plane + (size_t)ly * k->ssize * pw + (size_t)lx * k->ssize, pw);
		}
		at += gm_cm_span(cnt[b]);
	}
}

int gm_coef_pixels(const struct gm_coef_slot *s, uint8_t *planes, uint8_t *rgb)
{
	struct gm_cm_plane pl[GM_COEF_MAX_COMPS];
	size_t off = 0, pw, ph;

	if (s->kind != GM_COEF_KIND_COEFS)
		return -EBADMSG;
	for (uint32_t c = 0; c < s->ncomp; c++) {
		const struct gm_coef_comp *k = &s->comp[c];
		plane_dims(s, c, &pw, &ph);
		idct_comp(s, c, planes + off);
		pl[c] = (struct gm_cm_plane){planes + off,
					     (uint32_t)pw,
					     k->bx0 * k->ssize,
					     k->by0 * k->ssize,
					     (uint32_t)pw,
					     (uint32_t)ph,
					     k->dw,
					     k->dh,
					     k->hr,
					     k->vr,
					     k->fancy};
		off += pw * ph;
	}
	for (uint32_t y = 0; y < s->rh; y++) {
		uint8_t *row = rgb + (size_t)y * s->rw * 3;
		for (uint32_t x = 0; x < s->rw; x++)
			gm_cm_pixel(pl, s->ncomp, s->color, s->rx + x, s->ry + y, row + 3 * x);
	}
	return 0;
}
