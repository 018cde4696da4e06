/*
 * hybrid.h - one image file through the C data plane's per-sample prefix, into a
 * caller's buffer: the C half of a C+Python hybrid pipeline.
 *
 * `goldminer run` (python/goldminer/plan.py) serves a torchvision transform whose
 * first ops the C plane knows (RandomResizedCrop + RandomHorizontalFlip, or
 * Resize + CenterCrop, then maybe ToTensor/PILToTensor/Normalize) and whose rest
 * it does not (ColorJitter, RandAugment, ...): a Python worker calls
 * gm_hybrid_sample for the file, which reads it, decodes only the crop window,
 * resizes and flips (core/aug.c, the same code as the C workers), and writes the
 * pixels where the next Python op will find them - a PIL image's own memory
 * (GM_HYBRID_RGBX: PIL keeps an RGB image as 4 bytes a pixel) or a tensor's
 * (uint8 HWC, float32/float16 CHW). The crop and flip are drawn from (seed,
 * epoch, sample_id) exactly as gm_aug_sample draws them.
 *
 * Not here: the Python ops, batching, the lease protocol (the Python worker's);
 * formats other than JPEG (the caller's plan keeps those in Python).
 * Thread-safety: one handle per thread.
 */
#ifndef GOLDMINER_HYBRID_H
#define GOLDMINER_HYBRID_H

#include <stddef.h>
#include <stdint.h>

#include "goldminer/aug.h"

/* How the pixels are laid out in the caller's buffer. */
enum gm_hybrid_layout {
	GM_HYBRID_AUG = 0,  /* as the spec's `out` says (aug.h): uint8 HWC, float CHW */
	GM_HYBRID_RGBX = 1, /* uint8 H x W x 4: R, G, B, 255 (PIL's RGB in memory);
			     * the spec's out must be GM_OUT_U8_HWC */
};

/* The largest file gm_hybrid_sample reads (a JPEG past it is refused, -EFBIG). */
#define GM_HYBRID_MAX_FILE (1ull << 30)

struct gm_hybrid;

/*
 * A handle for spec *s (copied; checked as gm_aug_create checks it) and layout.
 * 0, or -EINVAL (bad spec or layout; err says which) or -ENOMEM. err/errlen may
 * be NULL/0.
 */
int gm_hybrid_create(struct gm_hybrid **out, const struct gm_aug_spec *s,
		     enum gm_hybrid_layout layout, char *err, size_t errlen);

/* Destroy; NULL is a no-op. */
void gm_hybrid_destroy(struct gm_hybrid *h);

/* Bytes one sample needs in the caller's buffer (size * size * 3 or 4 for uint8,
 * times the element size for float output). */
size_t gm_hybrid_out_bytes(const struct gm_hybrid *h);

/*
 * Read the JPEG at path and write its sample into out (out_len >= out_bytes):
 * crop window and flip drawn from (seed, epoch, sample_id). 0, or -errno with
 * gm_hybrid_errmsg naming the path and the cause: -ENOENT/-EACCES/-EISDIR/-EIO
 * (the file), -EFBIG (over GM_HYBRID_MAX_FILE), -ENODATA (empty), -EBADMSG (not a
 * JPEG, corrupt, truncated), -E2BIG (over the spec's max_pixels), -ENOBUFS
 * (out_len too small: nothing written), -ENOMEM. On error out holds unspecified
 * bytes.
 */
int gm_hybrid_sample(struct gm_hybrid *h, const char *path, uint64_t seed, uint64_t epoch,
		     uint64_t sample_id, void *out, size_t out_len);

/* Message of the last error ("" if none): "gm_hybrid_sample: PATH: CAUSE". */
const char *gm_hybrid_errmsg(const struct gm_hybrid *h);

#endif
