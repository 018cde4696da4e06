/*
 * aug.h - per-sample augmentation: JPEG bytes in, one finished sample out.
 *
 * A struct gm_aug is one worker's decoder + scratch buffers (allocated once,
 * reused for every sample). gm_aug_sample() runs the stateless per-sample part of
 * the pipeline: header -> (train) RandomResizedCrop parameters drawn from the
 * counter-based RNG keyed by (seed, epoch, sample id) -> partial decode of only the
 * crop window at the largest DCT scale that keeps the output resolution -> resize
 * -> flip -> output layout (uint8 HWC, or float32/float16 CHW normalised). Eval mode is
 * resize-shorter-side + center-crop. Not thread-safe per handle: one per worker.
 */
#ifndef GOLDMINER_OPS_H
#define GOLDMINER_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum gm_aug_mode {
	GM_AUG_TRAIN = 0, /* random-resized-crop + horizontal flip */
	GM_AUG_EVAL = 1,  /* resize shorter side to `resize`, center-crop `size` */
};

enum gm_out_type {
	GM_OUT_U8_HWC = 0,  /* uint8, H x W x 3 (RGB) */
	GM_OUT_F32_CHW = 1, /* float32, 3 x H x W, (x/255 - mean) / std */
	GM_OUT_F16_CHW = 2, /* float16 (IEEE half), the float32 value rounded to nearest even */
};

struct gm_aug_spec {
	enum gm_aug_mode mode;
	uint32_t size;		    /* output side in pixels (square), default 224 */
	float scale_min, scale_max; /* RRC area fraction, default 0.08 .. 1 */
	float ratio_min, ratio_max; /* RRC aspect ratio, default 3/4 .. 4/3 */
	float flip_p;		    /* probability of a horizontal flip, default 0.5 */
	uint32_t resize;	    /* eval: shorter side before center crop, default 256 */
	enum gm_out_type out;
	float mean[3], std[3]; /* normalisation in [0,1] units, default ImageNet */
	uint64_t max_pixels;   /* decompression-bomb limit (w*h), default 64e6 */
	/* ColorJitter after the resize (jitter.h): factor ranges [lo, hi] of
	 * brightness, contrast, saturation and hue; [0, 0] (the default) leaves
	 * one out */
	float jitter[4][2];
};

/* Per-sample timings a worker accumulates for its stats. */
struct gm_aug_times {
	uint64_t decode_ns;  /* header + entropy decode + IDCT + colour conversion */
	uint64_t augment_ns; /* resize, flip, layout/normalise */
};

struct gm_aug;

/* Fill *s with the defaults above (train mode, 224, uint8 HWC, ImageNet mean/std). */
void gm_aug_spec_default(struct gm_aug_spec *s);

/* Bytes one output sample occupies (size*size*3 * 1, 4 or 2). */
size_t gm_aug_out_bytes(const struct gm_aug_spec *s);

/*
 * Is *s a spec gm_aug_create accepts? 0, or -EINVAL with "invalid transform spec:
 * FIELD must be RANGE" in err[errlen] (err may be NULL). max_pixels over
 * GM_JPEG_MAX_MAX_PIXELS (a negative number cast to uint64_t) is refused, never
 * taken as "no limit".
 */
int gm_aug_spec_check(const struct gm_aug_spec *s, char *err, size_t errlen);

/* Create a handle for spec *s (copied). 0 or -EINVAL (bad spec) / -ENOMEM. */
int gm_aug_create(struct gm_aug **out, const struct gm_aug_spec *s);

/* Destroy; NULL is a no-op. */
void gm_aug_destroy(struct gm_aug *a);

/*
 * Decode and augment one sample. jpeg/len: the whole file (one with a row index,
 * jpeg.h, is decoded through it, as gm_aug_sample_range does: the same bytes). out:
 * gm_aug_out_bytes() bytes, written completely on success. t (may be NULL): timings are ADDED to
 * it. Returns 0, or -EBADMSG (corrupt/truncated/not a JPEG), -ENODATA (empty file), -E2BIG (over
 * max_pixels, detected before any pixel allocation), -ENOMEM. On error, gm_aug_errmsg() says what
 * was wrong (without the file name, which the caller knows) and *out holds unspecified bytes.
 */
int gm_aug_sample(struct gm_aug *a, const void *jpeg, size_t len, uint64_t seed, uint64_t epoch,
		  uint64_t sample_id, void *out, struct gm_aug_times *t);

/*
 * Whether the last gm_aug_sample met a row index that does not match its file
 * (jpeg.h: a header copy or row offsets unlike the file's) and so decoded the
 * file as one without an index: the same output bytes, for the caller to count.
 * false after a gm_aug_sample_range (which returns -ESTALE instead).
 */
bool gm_aug_index_stale(const struct gm_aug *a);

/*
 * Ranged reads (gm_jpeg_open_ranged): from the first plen bytes of a file_len-byte
 * file that carries a row index, the byte range [*off, *off + *len) that this
 * sample's window needs. 0; -ENOENT (no usable index: read the whole file and call
 * gm_aug_sample); -ESTALE (an index that does not match the file: the same);
 * -EBADMSG, -E2BIG, -ENOMEM as gm_aug_sample (then the whole file's gm_aug_sample
 * reports it too).
 */
int gm_aug_range(struct gm_aug *a, const void *prefix, size_t plen, uint64_t file_len,
		 uint64_t seed, uint64_t epoch, uint64_t sample_id, uint64_t *off, uint64_t *len);

/*
 * gm_aug_sample from the prefix gm_aug_range read and the bytes [off, off + blen)
 * of the file (those it named): the same output bytes as gm_aug_sample on the whole
 * file. Returns as gm_aug_sample, or -ESTALE when the index's rows do not match
 * those bytes: then gm_aug_sample on the whole file gives the output.
 */
int gm_aug_sample_range(struct gm_aug *a, const void *prefix, size_t plen, uint64_t file_len,
			const void *bytes, uint64_t off, size_t blen, uint64_t seed, uint64_t epoch,
			uint64_t sample_id, void *out, struct gm_aug_times *t);

/*
 * The crop box (x0, y0, x1, y1 in the w x h image's pixels) and flip that
 * gm_aug_sample gives the sample keyed (seed, epoch, sample_id) under spec *s: in
 * train mode drawn as it draws them (torchvision's RandomResizedCrop.get_params
 * distributions, then the flip coin with probability flip_p), in eval mode the
 * Resize + CenterCrop box, unflipped. For tests and tools (the distribution of
 * the draws); gm_aug_sample does not need it. Pure; thread-safe.
 */
void gm_aug_window(const struct gm_aug_spec *s, uint32_t w, uint32_t h, uint64_t seed,
		   uint64_t epoch, uint64_t sample_id, double box[4], bool *flip);

/*
 * Coefficient mode (coef.h), the GPU decode's worker half: gm_aug_sample's
 * header read, crop, flip and jitter draws, then the window's quantised
 * coefficients into the slot (cap bytes, at least gm_coef_slot_bytes of
 * gm_aug_out_bytes) in place of its pixels; a file coef.h cannot carry, or one
 * whose coefficients do not fit (or are likely not to: gm_jpeg_coef_guess over
 * cap, then before their decode), is decoded and augmented here and goes in as
 * the finished sample (kind PIXELS). t: timings added (decode_ns: the whole of
 * it). Returns as gm_aug_sample; -EINVAL for a slot under that size.
 */
int gm_aug_coef_sample(struct gm_aug *a, const void *jpeg, size_t len, uint64_t seed,
		       uint64_t epoch, uint64_t sample_id, void *slot, size_t cap,
		       struct gm_aug_times *t);

/*
 * The host path: the finished sample from a slot gm_aug_coef_sample wrote under the
 * same spec, len bytes of it readable (checked first: it may come from shared
 * memory): the window rebuilt from the coefficients (coef_math.h's arithmetic,
 * gm_coef_pixels), then the same resize, flip, jitter and layout as gm_aug_sample,
 * giving its bytes. out: gm_aug_out_bytes() bytes. 0, -EBADMSG (a malformed slot,
 * or one written under another spec), -ENOMEM.
 */
int gm_aug_coef_finish(struct gm_aug *a, const void *slot, size_t len, void *out);

/*
 * The same from the window already rebuilt elsewhere (the device's
 * gm_coef_cuda_windows: rw * rh * 3 bytes, RGB): only the resize, flip, jitter and
 * layout run here. Returns as gm_aug_coef_finish.
 */
int gm_aug_coef_finish_window(struct gm_aug *a, const void *slot, size_t len, const uint8_t *window,
			      void *out);

/*
 * The same bytes as gm_aug_coef_finish by the GPU decode's own arithmetic
 * (core/finish_math.h, the functions the CUDA kernels run): the window rebuilt
 * (gm_coef_pixels), this slot's finish plan (gm_aug_coef_plan), then every output
 * element resized, jittered and laid out one at a time, as the device's threads
 * do. Scalar and slower than gm_aug_coef_finish (whose SIMD resize the workers'
 * CPU path shares): it exists so that every build proves the device's arithmetic
 * against the CPU path's bytes. Returns as gm_aug_coef_finish.
 */
int gm_aug_coef_finish_shared(struct gm_aug *a, const void *slot, size_t len, void *out);

/*
 * A checked COEFS slot's finish plan (core/finish_math.h's struct gm_fm_plan: the
 * resize's taps for both axes, flip included, the layout's scale and bias, the
 * colour jitter's draws), *bytes bytes at *plan, in the handle: valid until the
 * handle's next call. The device copies it with the slot. 0, -EBADMSG (as
 * gm_aug_coef_finish), -EINVAL (a PIXELS slot: it has no plan), -ENOMEM.
 */
int gm_aug_coef_plan(struct gm_aug *a, const void *slot, size_t len, const void **plan,
		     size_t *bytes);

/* IEEE float -> half bits, round to nearest even (what F16C's vcvtps2ph gives). */
uint16_t gm_f32_to_f16(float f);

/* Message of the last error on this handle ("" if none). */
const char *gm_aug_errmsg(const struct gm_aug *a);

#endif
