/*
 * coef_cuda.h - the GPU decode's device half (core/coef_kernels.cu, built by nvcc
 * into the plugin libgoldminer-cuda.so by `make` where nvcc is, and into the
 * device check by `make coef-cuda` and `make gpu-bundle`; never into
 * libgoldminer.so): a batch of coefficient slots (coef.h) finished on the device
 * with coef_math.h's and finish_math.h's arithmetic, the host path's bytes
 * (gm_coef_pixels, gm_aug_coef_finish_shared), which are the CPU workers' bytes.
 *
 * On the device, per batch: the slots copied (each by its own async copy from the
 * caller's memory: the ring, registered with the driver by cuda.c) with the
 * batch's tables and each slot's finish plan (gm_aug_coef_plan: the resize's taps
 * computed on the host once per sample, the flip in them, the layout's scale and
 * bias, the jitter's draws) in one more copy; then the launches, each over the
 * whole batch: the blocks' coefficient offsets, dequantise + IDCT (a thread a
 * block), upsampling + colour conversion (a thread a window pixel), the resize
 * and layout (a thread an output element: uint8 HWC, float32 or float16 CHW),
 * and under colour jitter the gray mean (16 threads a slot with a contrast op)
 * and the jitter (a thread an output pixel). The finished samples stay on the
 * device, in the caller's buffer, each at its place. Two events a batch: the
 * slots copied (the ring's slots may be released) and the samples done.
 *
 * The plugin: libgoldminer.so does not link these functions; it loads the plugin
 * (dlopen, core/coef_device.c) only when a device is there and reaches them
 * through the table gm_coef_cuda_plugin returns, so that a build or a machine
 * without the toolkit or a device runs as before. A process that links
 * coef_kernels.o itself (tests/gpu/coef_check.c) calls them by name.
 *
 * Not here: the loader's batches (coef_device.c: the slots checked, their plans,
 * when the ring's slots go back), more than one batch in flight per handle, more
 * than one stream of its own.
 */
#ifndef GM_CORE_COEF_CUDA_H
#define GM_CORE_COEF_CUDA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "goldminer/coef.h"

#ifdef __cplusplus
extern "C" {
#endif

struct gm_coef_cuda;

/* A handle on CUDA device `device` with its stream; device memory grows on
 * demand. Every call on the handle makes its device current for the call and puts
 * the caller's back. 0, or -ENODEV / -ENOMEM with why in err. */
int gm_coef_cuda_create(struct gm_coef_cuda **out, int device, char *err, size_t errlen);

/* Destroy; NULL is a no-op. */
void gm_coef_cuda_destroy(struct gm_coef_cuda *g);

/*
 * The windows of n COEFS slots (each checked by gm_coef_check first: they may come
 * from shared memory) into rgb[i], rw * rh * 3 bytes each (host memory). Blocks
 * until the windows are back. 0, or -EIO / -ENOMEM with why in err (the CUDA
 * error's name).
 */
int gm_coef_cuda_windows(struct gm_coef_cuda *g, const struct gm_coef_slot *const *slots,
			 uint32_t n, uint8_t *const *rgb, char *err, size_t errlen);

/*
 * Finish n COEFS slots (each checked by gm_coef_check first) on the device: sample
 * i goes to d_out + place[i] * out_bytes (place NULL: i; device memory on the
 * handle's device, gm_coef_cuda_alloc or the caller's own, large enough for every
 * place), the bytes gm_aug_coef_finish gives. plans[i]: slot i's
 * gm_aug_coef_plan (copied here: the aug handle's buffer may be reused at once);
 * every plan of one spec (the same side and layout). Asynchronous: returns once
 * the work is queued; gm_coef_cuda_released says when the slots may be reused,
 * gm_coef_cuda_done / _sync when the samples are in d_out. One batch at a time
 * per handle: the next call waits (on the host) until this one's slots are
 * copied, then reuses the buffers (the stream orders the rest). 0, or -EINVAL (a
 * plan not for its slot or the batch's spec, why in err), -EIO / -ENOMEM (the
 * CUDA error's name in err).
 */
int gm_coef_cuda_finish(struct gm_coef_cuda *g, const struct gm_coef_slot *const *slots,
			const void *const *plans, const uint32_t *place, uint32_t n, void *d_out,
			size_t out_bytes, char *err, size_t errlen);

/*
 * A consumer's batch (core/coef_device.c): n COEFS slots as gm_coef_cuda_finish
 * takes them, and ns finished samples (PIXELS slots' bytes, out_bytes each, from
 * the caller's memory) copied to d_out + sample_place[k] * out_bytes. With
 * `ordered`, stream (a cudaStream_t of the handle's device; 0, the legacy default
 * stream) orders the output: nothing is written to d_out before the work queued on
 * stream so far (the output may have just been allocated there), and stream's
 * later work waits for the samples; the slots' copies and the windows do not wait
 * for stream. The `released` event covers every copy out of the caller's memory.
 */
struct gm_coef_cuda_batch {
	const struct gm_coef_slot *const *slots;
	const void *const *plans;
	const uint32_t *place;
	uint32_t n;
	const void *const *samples;
	const uint32_t *sample_place;
	uint32_t ns;
	void *d_out;
	size_t out_bytes;
	bool ordered;
	void *stream;
};

/* Run batch b (n = ns = 0: both events recorded, nothing else). Asynchronous, as
 * gm_coef_cuda_finish (which is this with ns = 0, unordered); on an error no copy
 * out of the caller's memory is left queued. Returns as gm_coef_cuda_finish. */
int gm_coef_cuda_run(struct gm_coef_cuda *g, const struct gm_coef_cuda_batch *b, char *err,
		     size_t errlen);

/* The device of d (device or managed memory): 0 and *device; -EINVAL (host or
 * unknown memory), -EIO, with why in err. */
int gm_coef_cuda_device_of(const void *d, int *device, char *err, size_t errlen);

/* The last batch's slots (gm_coef_cuda_finish, _run, _windows) copied to the
 * device: 1 (the caller may release them), 0 not yet, -EIO. Does not block. */
int gm_coef_cuda_released(struct gm_coef_cuda *g);

/* The last batch's samples in d_out: 1, 0 not yet, -EIO. Does not block. */
int gm_coef_cuda_done(struct gm_coef_cuda *g);

/* Block until the last gm_coef_cuda_finish's samples are in d_out. 0 or -EIO. */
int gm_coef_cuda_sync(struct gm_coef_cuda *g, char *err, size_t errlen);

/* Device memory for outputs (cudaMalloc / cudaFree), and a blocking copy of bytes
 * from device memory d to host on the handle's stream (after its queued work). */
int gm_coef_cuda_alloc(void **d, size_t bytes, char *err, size_t errlen);
void gm_coef_cuda_free(void *d);
int gm_coef_cuda_read(struct gm_coef_cuda *g, void *host, const void *d, size_t bytes, char *err,
		      size_t errlen);

/* The plugin's table (gm_coef_cuda_plugin), checked by its loader: abi and
 * version must be this build's. */
#define GM_COEF_CUDA_ABI	1u
#define GM_COEF_CUDA_PLUGIN	"libgoldminer-cuda.so"
#define GM_COEF_CUDA_PLUGIN_ENV "GOLDMINER_CUDA_PLUGIN" /* its path, in place of the search */
struct gm_coef_cuda_ops {
	uint32_t abi;
	const char *version; /* gm_version() of the build that made it */
	int (*create)(struct gm_coef_cuda **out, int device, char *err, size_t errlen);
	void (*destroy)(struct gm_coef_cuda *g);
	int (*run)(struct gm_coef_cuda *g, const struct gm_coef_cuda_batch *b, char *err,
		   size_t errlen);
	int (*released)(struct gm_coef_cuda *g);
	int (*done)(struct gm_coef_cuda *g);
	int (*device_of)(const void *d, int *device, char *err, size_t errlen);
};

/* The plugin's one export. */
const struct gm_coef_cuda_ops *gm_coef_cuda_plugin(void);

#ifdef __cplusplus
}
#endif

#endif
