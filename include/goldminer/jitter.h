/*
 * jitter.h - colour jitter of one sample (torchvision's ColorJitter: brightness,
 * contrast, saturation, hue) after its resize, and the output layout after it.
 *
 * The factors and the order of the ops are drawn per sample from the
 * counter-based RNG (stream GM_RNG_STREAM_JITTER, key (seed, epoch, sample id)),
 * with torchvision's distributions: each factor uniform in its range [lo, hi],
 * the active ops in a uniformly random order. The ops are torchvision's tensor
 * ones on [0,1] floats (ToTensor of the resized uint8 pixels): brightness
 * f*x, contrast f*x + (1-f)*mean(gray), saturation f*x + (1-f)*gray, each
 * clamped to [0,1], gray = 0.2989 R + 0.587 G + 0.114 B; hue adds f to the hue
 * of torchvision's RGB -> HSV -> RGB round trip, modulo 1. The bytes are
 * goldminer's: PIL's ColorJitter rounds to uint8 after every op (and computes
 * hue on uint8 HSV), this does not.
 *
 * Not here: other photometric ops.
 */
#ifndef GOLDMINER_JITTER_H
#define GOLDMINER_JITTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "goldminer/aug.h"

enum gm_jitter_op {
	GM_JITTER_BRIGHTNESS = 0,
	GM_JITTER_CONTRAST = 1,
	GM_JITTER_SATURATION = 2,
	GM_JITTER_HUE = 3,
};

/* One sample's draws: n ops, order[0..n) of enum gm_jitter_op, factor by op. */
struct gm_jitter {
	uint32_t n;
	uint8_t order[4];
	float factor[4];
};

/* Whether spec *s asks for any colour jitter (a range other than [0, 0]). */
bool gm_jitter_on(const struct gm_aug_spec *s);

/*
 * The draws of sample (seed, epoch, sample_id) under *s: the active ops (those
 * with a range other than [0, 0]) in a uniformly random order, each factor
 * uniform in its range. Pure; thread-safe.
 */
void gm_jitter_draw(const struct gm_aug_spec *s, uint64_t seed, uint64_t epoch, uint64_t sample_id,
		    struct gm_jitter *j);

/*
 * Apply j to the side x side uint8 HWC image hwc and write the sample in spec
 * *s's layout (uint8 HWC rounded to nearest, or float32/float16 CHW normalised
 * (x - mean) / std) to out (gm_aug_out_bytes(s) bytes). planes: scratch of
 * 3 * side * side floats. Thread-safe for distinct buffers.
 */
void gm_jitter_apply(const struct gm_jitter *j, const struct gm_aug_spec *s, const uint8_t *hwc,
		     float *planes, void *out);

#endif
