/*
 * fuzz_huff.c - fuzz target: goldminer's Huffman decoder (core/huff.c) against
 * libjpeg's on arbitrary bytes (seeded with baseline and restart-marked JPEGs
 * whose entropy data the fuzzer corrupts). Each input that opens is decoded by
 * core/jpeg.c with goldminer's decoder and with libjpeg's (gm_jpeg_set_own_huffman),
 * full at 8/8 and a window at 2/8, and its MCUs are decoded side by side at the
 * coefficient level (tests/fuzz/huffdiff.h). abort() on any difference that
 * huffdiff.h does not explain: return code, pixels, warning count, a coefficient,
 * a warning of the decode core/jpeg.c would stop at; or libjpeg's own two paths
 * disagreeing in a way not known there. Then the coefficient output (the
 * decoder's sparse form, gm_huff_decode_run) against the CPU path: a train uint8
 * sample both ways, the same return code and, finished on the host, the same bytes.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "goldminer/aug.h"
#include "goldminer/coef.h"
#include "huffdiff.h"

#if GM_OWN_HUFFMAN
static struct gm_jpeg *own, *lib;
static struct gm_huff *huff;
static struct gm_aug *cpu, *gpu;
#define SLOT_CAP (4u << 20) /* any window of a 4-megapixel image's coefficients */
static uint8_t *slot;

static void setup(void)
{
	struct gm_aug_spec s;
	gm_aug_spec_default(&s);
	s.size = 48;
	s.resize = 56;
	s.max_pixels = 1u << 22;
	if (gm_jpeg_create(&own, 1u << 22) || gm_jpeg_create(&lib, 1u << 22) ||
	    !(huff = calloc(1, sizeof(*huff))) || gm_aug_create(&cpu, &s) ||
	    gm_aug_create(&gpu, &s) || !(slot = aligned_alloc(64, SLOT_CAP)))
		abort();
	gm_jpeg_set_own_huffman(lib, false);
}

/* The coefficient output's sample against the CPU path's (see the top). */
static void coef_same(const uint8_t *data, size_t size)
{
	static uint8_t a[48 * 48 * 3], b[48 * 48 * 3];
	int rc = gm_aug_sample(cpu, data, size, 7, 1, size, a, NULL);
	int rg = gm_aug_coef_sample(gpu, data, size, 7, 1, size, slot, SLOT_CAP, NULL);
	if (rc != rg || (!rg && gm_aug_coef_finish(gpu, slot, SLOT_CAP, b)) ||
	    (!rc && memcmp(a, b, sizeof(a)))) {
		fprintf(stderr, "fuzz_huff: coefficient output: %d, the CPU path %d, or other bytes\n",
			rg, rc);
		abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gm_jpeg_info info;
	char why[512];
	bool installed, diverge;
	int explained = 0;

	if (!own) /* one pair of handles for all inputs, as a worker keeps its decoder */
		setup();
	int rc = gm_jpeg_open(own, data, size, &info);
	gm_jpeg_abort(own);
	if (rc) {
		if (rc != -EBADMSG && rc != -ENODATA && rc != -E2BIG)
			abort();
		gm_fuzz_check_msg(gm_jpeg_errmsg(own), 256);
		return 0;
	}
	int r = hd_coefs_same(data, size, huff, true, &installed, &diverge);
	if (r != HD_SAME) {
		fprintf(stderr, "fuzz_huff: %s\n",
			r == HD_DIFFER ? "coefficients or warnings differ from libjpeg's slow path"
				       : "libjpeg's fast and slow paths disagree, not as known");
		abort();
	}
	if (hd_same_outcome(own, lib, data, size, diverge, &explained, why, sizeof(why)) < 0) {
		fprintf(stderr, "fuzz_huff: %s\n", why);
		abort();
	}
	coef_same(data, size);
	return 0;
}
#else
/* libjpeg-turbo failed core/probe/huff.c: no decoder of goldminer's to compare */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	(void)data;
	(void)size;
	return 0;
}
#endif
