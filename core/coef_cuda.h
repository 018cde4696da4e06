/*
 * coef_cuda.h - the GPU decode's device half (core/coef_kernels.cu, built by nvcc
 * in `make coef-cuda` and `make gpu-bundle`, not by the C build): the windows of a
 * batch of coefficient slots (coef.h) rebuilt on the device with coef_math.h's
 * arithmetic, the host path's bytes.
 *
 * Per batch: one copy of the slots to the device, three launches (the blocks'
 * coefficient offsets, a prefix over each component's counts; one thread per
 * block: dequantise + IDCT into the component planes; one thread per window
 * pixel: upsampling + colour conversion), one copy of the windows back. Not per
 * image. Not here (yet): the resize, flip, jitter and layout on the device: the
 * windows come back to the host, where aug.c's resize finishes them (the device
 * check, tests/gpu/coef_check.c, compares both stages with the CPU's bytes).
 */
#ifndef GM_CORE_COEF_CUDA_H
#define GM_CORE_COEF_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "goldminer/coef.h"

#ifdef __cplusplus
extern "C" {
#endif

struct gm_coef_cuda;

/* A handle on device 0 with its stream; device memory grows on demand. 0, or
 * -ENODEV / -ENOMEM with why in err. */
int gm_coef_cuda_create(struct gm_coef_cuda **out, char *err, size_t errlen);

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

#ifdef __cplusplus
}
#endif

#endif
