/*
 * fuzz_splice.c - fuzz target: restart-marked JPEGs, their segments and markers
 * corrupted by the fuzzer, through gm_jpeg_decode_region's splice (core/jpeg.c),
 * which finds the restart segments in untrusted bytes and writes a new bitstream
 * from them. Three windows at each DCT scale, decoded by a handle that splices and
 * by one that does not (GM_NO_SPLICE=1 at its creation). Checks: 0 or a documented
 * -errno with a message; where both decode, the same pixels (a segment is decoded
 * from the same bytes and a fresh state either way). Files with a row index (pack
 * --restart into shards) are also decoded ranged, from a worker's prefix (2 KB, or
 * the index and header when gm_jpeg_index_bytes asks for more) and the bytes
 * gm_jpeg_region_bytes names, each copied to a buffer of just that size (so a read
 * past them is caught by ASan): 0, -ESTALE (an index that does not match the file:
 * the corpus holds lying ones) or a documented -errno, never a read
 * outside the bytes.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "goldminer/jpeg.h"

static struct gm_jpeg *dec, *plain;
static uint8_t *copy;
static size_t copy_cap;

static void setup(void)
{
	if (gm_jpeg_create(&dec, 1u << 22))
		abort();
	setenv("GM_NO_SPLICE", "1", 1);
	if (gm_jpeg_create(&plain, 1u << 22))
		abort();
	unsetenv("GM_NO_SPLICE");
}

static void check_rc(int rc, const struct gm_jpeg *j)
{
	if (rc == 0)
		return;
	if (rc != -EBADMSG && rc != -ENODATA && rc != -E2BIG)
		abort(); /* -ENOMEM, -EINVAL: the limits or the window arithmetic are wrong */
	gm_fuzz_check_msg(gm_jpeg_errmsg(j), 256);
}

/* A ranged call's: check_rc's, or -ESTALE (the index does not match the file). */
static void check_ranged_rc(int rc, const struct gm_jpeg *j)
{
	if (rc == -ESTALE)
		gm_fuzz_check_msg(gm_jpeg_errmsg(j), 256);
	else
		check_rc(rc, j);
}

/* Decode window k of 3 at scale n with both handles; compare where both succeed. */
static void one_window(const uint8_t *data, size_t size, const struct gm_jpeg_info *info,
		       uint32_t n, int k)
{
	struct gm_jpeg_image a, b;
	uint32_t sw = gm_jpeg_scaled_dim(info->width, n), sh = gm_jpeg_scaled_dim(info->height, n);
	uint32_t x = k == 0   ? sw / 3
		     : k == 1 ? 0
			      : sw - 1,
		 y = k == 0   ? sh / 4
		     : k == 1 ? 0
			      : sh / 2;
	uint32_t w = k == 0 ? (sw + 1) / 2 : k == 1 ? sw : 1, h = k == 0 ? (sh + 2) / 3 : 1;

	if (gm_jpeg_open(dec, data, size, NULL) || gm_jpeg_open(plain, data, size, NULL))
		abort(); /* the header read once already */
	int ra = gm_jpeg_decode_region(dec, n, x, y, w, h, &a);
	check_rc(ra, dec);
	if (ra == 0) { /* keep the pixels: the other handle's decode would not touch them */
		size_t row = (size_t)w * 3;
		if (copy_cap < row * h) {
			free(copy);
			copy_cap = row * h;
			if (!(copy = malloc(copy_cap)))
				abort();
		}
		for (uint32_t r = 0; r < h; r++)
			memcpy(copy + r * row, a.pixels + r * a.stride, row);
	}
	int rb = gm_jpeg_decode_region(plain, n, x, y, w, h, &b);
	check_rc(rb, plain);
	if (ra == 0 && rb == 0)
		for (uint32_t r = 0; r < h; r++)
			if (memcmp(copy + (size_t)r * w * 3, b.pixels + r * b.stride,
				   (size_t)w * 3))
				abort();
}

/* Window k of 3 at scale n decoded ranged (the file has a row index). */
static void one_ranged(const uint8_t *data, size_t size, uint32_t n, int k)
{
	struct gm_jpeg_info info;
	struct gm_jpeg_image a;
	uint64_t off, len;
	size_t plen = size < 2048 ? size : 2048, need = gm_jpeg_index_bytes(data, plen);
	if (need > plen && need <= size)
		plen = need; /* a worker's next prefix */
	uint8_t *pre = malloc(plen);
	if (!pre)
		abort();
	memcpy(pre, data, plen);
	int rc = gm_jpeg_open_ranged(dec, pre, plen, size, &info);
	if (rc == -ENOENT) {
		free(pre);
		return;
	}
	check_ranged_rc(rc, dec);
	if (rc == 0) {
		uint32_t sw = gm_jpeg_scaled_dim(info.width, n);
		uint32_t sh = gm_jpeg_scaled_dim(info.height, n);
		uint32_t x = k == 0 ? sw / 3 : 0, y = k == 0 ? sh / 4 : k == 1 ? 0 : sh - 1;
		uint32_t w = k == 0 ? (sw + 1) / 2 : sw, h = k == 0 ? (sh + 2) / 3 : 1;
		if (gm_jpeg_region_bytes(dec, n, x, y, w, h, &off, &len) || off + len > size)
			abort(); /* the index's offsets were checked against the size */
		uint8_t *b = malloc(len ? len : 1);
		if (!b)
			abort();
		memcpy(b, data + off, len);
		gm_jpeg_set_bytes(dec, b, off, len);
		check_ranged_rc(gm_jpeg_decode_region(dec, n, x, y, w, h, &a), dec);
		free(b);
	}
	gm_jpeg_abort(dec);
	free(pre);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gm_jpeg_info info;
	if (!dec) /* one pair of handles for all inputs, as a worker keeps its decoder */
		setup();
	int rc = gm_jpeg_open(dec, data, size, &info);
	check_rc(rc, dec);
	gm_jpeg_abort(dec);
	if (rc)
		return 0;
	for (uint32_t n = 1; n <= 8; n *= 2)
		for (int k = 0; k < 3; k++) {
			one_window(data, size, &info, n, k);
			one_ranged(data, size, n, k);
		}
	return 0;
}
