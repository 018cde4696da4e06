/*
 * coef_device.h - the GPU decode's consumer half on a CUDA device, inside
 * libgoldminer (core/coef_device.c): the kernels' plugin (libgoldminer-cuda.so,
 * coef_cuda.h) found and loaded when a device is there, and a batch of ring slots
 * finished through it into the caller's device memory. Its caller is loader.c's
 * gm_loader_finish_device; the contract a binding sees is in loader.h.
 *
 * Not here: the host path (gm_loader_finish, aug.c), the kernels (coef_kernels.cu),
 * the ring's slots given back (the caller does, once a finish has returned).
 */
#ifndef GM_CORE_COEF_DEVICE_H
#define GM_CORE_COEF_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gm_aug;
struct gm_coef_device;

/*
 * Whether batches can be finished on a device in this process: the plugin's file
 * found ($GOLDMINER_CUDA_PLUGIN, else beside libgoldminer.so), a CUDA device
 * (gm_cuda_available), then the plugin loaded and of this build, checked in that
 * order. When false, why (len bytes, may be NULL) gets the
 * first that failed, "libgoldminer-cuda.so not built: ...", "no CUDA device: ..."
 * or "libgoldminer-cuda.so unusable: ...". Probes once; thread-safe.
 */
bool gm_coef_device_available(char *why, size_t len);

/* A finisher: its plans and, from the first batch, a handle on the output's
 * device. 0 or -ENOMEM. Destroy: after the last finish; NULL is a no-op. */
int gm_coef_device_create(struct gm_coef_device **out);
void gm_coef_device_destroy(struct gm_coef_device *d);

/*
 * Finish the n slots of slot_bytes each at data (a batch of the ring, written
 * under a's spec) into d_out, n * out_bytes bytes of device memory: each slot
 * checked first (gm_coef_check: kind COEFS or PIXELS, inside slot_bytes; any
 * other refused before the device is touched), the COEFS slots' plans made here
 * (gm_aug_coef_plan), then on the device's stream: a wait for the work queued on
 * `stream` so far (a cudaStream_t of the output's device, 0 the legacy default
 * stream), each PIXELS slot's sample copied to its place, the COEFS slots
 * finished in theirs, and `stream`'s next work made to wait for the samples.
 * Returns once the device has copied the slots (gm_coef_cuda_released): the
 * ring's slots may then go back; with sync, once the samples are in d_out too.
 * Either wait gives up after GM_COEF_DEVICE_WAIT_S seconds (-ETIMEDOUT).
 * 0; -EBADMSG (a malformed slot), -EINVAL (d_out not device memory), -ENODEV
 * (no device or plugin: gm_coef_device_available's why), -EIO, -ENOMEM; why in
 * err, naming the slot.
 */
#define GM_COEF_DEVICE_WAIT_S 60
int gm_coef_device_finish(struct gm_coef_device *d, struct gm_aug *a, const uint8_t *data,
			  uint32_t n, size_t slot_bytes, void *d_out, size_t out_bytes,
			  void *stream, bool sync, char *err, size_t errlen);

#endif
