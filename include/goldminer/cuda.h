/*
 * cuda.h - the project's only door to the CUDA runtime.
 *
 * Pinning (cudaHostRegister) of the ring and host-to-device copies. When the
 * library is built without CUDA (make CUDA=0), or at run time there is no driver
 * or no device, every call returns -ENODEV and gm_cuda_available() says why once:
 * that is a normal outcome, not an error.
 */
#ifndef GOLDMINER_CUDA_H
#define GOLDMINER_CUDA_H

#include <stdbool.h>
#include <stddef.h>

/* True when a CUDA device can be used. The first call probes (cudaGetDeviceCount)
 * and caches; why (len bytes, may be NULL) gets the reason when false. Thread-safe. */
bool gm_cuda_available(char *why, size_t len);

/* Page-lock [p, p+n) for DMA (cudaHostRegister). 0, -ENODEV, or -EIO. */
int gm_cuda_host_register(void *p, size_t n);
/* Undo gm_cuda_host_register; harmless on memory that was not registered. */
void gm_cuda_host_unregister(void *p);

/* Device memory and copies (synchronous). 0, -ENODEV, -ENOMEM or -EIO. */
int gm_cuda_malloc(void **p, size_t n);
void gm_cuda_free(void *p);
int gm_cuda_memcpy_h2d(void *dst, const void *src, size_t n);
int gm_cuda_memcpy_d2h(void *dst, const void *src, size_t n);

/* Name of the build's CUDA support: "cuda <runtime version>" or "none". */
const char *gm_cuda_build(void);

#endif
