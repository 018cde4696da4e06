/*
 * fuzz_huff.c - fuzz target: goldminer's Huffman decoder (core/huff.c) against
 * libjpeg's on arbitrary bytes (seeded with baseline and restart-marked JPEGs
 * whose entropy data the fuzzer corrupts). Each input that opens is decoded by
 * core/jpeg.c with goldminer's decoder and with libjpeg's (gm_jpeg_set_own_huffman),
 * full at 8/8 and a window at 2/8, and its MCUs are decoded side by side at the
 * coefficient level (tests/fuzz/huffdiff.h). abort() on any difference that
 * huffdiff.h does not explain: return code, pixels, warning count, a coefficient,
 * a warning of the decode core/jpeg.c would stop at; or libjpeg's own two paths
 * disagreeing in a way not known there.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "fuzz.h"
#include "huffdiff.h"

#if GM_OWN_HUFFMAN
static struct gm_jpeg *own, *lib;
static struct gm_huff *huff;

static void setup(void)
{
	if (gm_jpeg_create(&own, 1u << 22) || gm_jpeg_create(&lib, 1u << 22) ||
	    !(huff = calloc(1, sizeof(*huff))))
		abort();
	gm_jpeg_set_own_huffman(lib, false);
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
