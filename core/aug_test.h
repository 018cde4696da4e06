/*
 * aug_test.h - test hooks into aug.c, for tests/test_aug.c only: which kernels
 * made a handle's rows, and the per-image table builders called directly with a
 * chosen kernel set, so that each builder can be compared with its portable twin.
 *
 * Defined in aug.c (hidden: libgoldminer.so does not export them; the tests link
 * the static library). aug.c and the tests include this header; aug_simd.h and
 * aug_simd.c do not, so the kernels' header declares nothing that aug.c defines
 * (aug.c -> aug_test.h -> aug_simd.h, no way back).
 *
 * Not an interface: nothing but aug.c and tests/test_aug.c includes it.
 */
#ifndef GOLDMINER_AUG_TEST_H
#define GOLDMINER_AUG_TEST_H

#include <stdbool.h>
#include <stdint.h>

#include "goldminer/aug.h"

#include "aug_simd.h" /* struct axis, struct hx_table, struct aug_kernels */

/* Output rows the fused kernels made on handle a (tests check that they ran). */
__attribute__((visibility("hidden"))) uint64_t gm_aug_fused_rows(const struct gm_aug *a);
/* Output rows the 16-bit horizontal kernel (hwrow_fn) made on handle a. */
__attribute__((visibility("hidden"))) uint64_t gm_aug_hw_rows(const struct gm_aug *a);
/* ... of those, the rows it stored straight to the output (hwntrow_fn). */
__attribute__((visibility("hidden"))) uint64_t gm_aug_hwnt_rows(const struct gm_aug *a);

/*
 * axis_build (aug.c) with kernels k (NULL: the portable code), 0 or -ENOMEM;
 * axis_free; and hx_build (planar: px_build) through k's hxb (k NULL or without
 * one: the portable builders).
 */
__attribute__((visibility("hidden"))) int gm_aug_axis_build(struct axis *ax, double b0, double b1,
							    uint32_t in, uint32_t out, bool mirror,
							    const struct aug_kernels *k);
__attribute__((visibility("hidden"))) void gm_aug_axis_free(struct axis *ax);
__attribute__((visibility("hidden"))) bool gm_aug_hx_build(struct hx_table *t, int32_t *base,
							   uint8_t *blk, const struct axis *ax,
							   uint32_t out_w, bool planar,
							   const struct aug_kernels *k);

#endif
