/*
 * cuda.c - CUDA runtime calls (see cuda.h). The only file that includes the CUDA
 * runtime header. Built against libcudart when the toolkit is found; with CUDA=0
 * the same functions report -ENODEV. It does not pick devices or manage streams:
 * device 0, the default stream.
 */
#include "goldminer/cuda.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>

#if GM_HAVE_CUDA
#include <cuda_runtime_api.h>

static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static bool have_device;
static char probe_why[160];

static void probe(void)
{
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);
	if (e != cudaSuccess) {
		snprintf(probe_why, sizeof(probe_why), "CUDA: %s (%s)", cudaGetErrorString(e),
			 cudaGetErrorName(e));
		cudaGetLastError(); /* clear the sticky error for later calls */
		return;
	}
	if (n == 0) {
		snprintf(probe_why, sizeof(probe_why), "CUDA: no device");
		return;
	}
	have_device = true;
}

bool gm_cuda_available(char *why, size_t len)
{
	pthread_once(&probe_once, probe);
	if (!have_device && why && len)
		snprintf(why, len, "%s", probe_why);
	return have_device;
}

static int check(cudaError_t e)
{
	if (e == cudaSuccess)
		return 0;
	cudaGetLastError();
	return e == cudaErrorMemoryAllocation ? -ENOMEM : -EIO;
}

int gm_cuda_host_register(void *p, size_t n)
{
	if (!gm_cuda_available(NULL, 0))
		return -ENODEV;
	return check(cudaHostRegister(p, n, cudaHostRegisterDefault));
}

void gm_cuda_host_unregister(void *p)
{
	if (gm_cuda_available(NULL, 0))
		check(cudaHostUnregister(p));
}

int gm_cuda_malloc(void **p, size_t n)
{
	if (!gm_cuda_available(NULL, 0))
		return -ENODEV;
	return check(cudaMalloc(p, n));
}

void gm_cuda_free(void *p)
{
	if (p && gm_cuda_available(NULL, 0))
		check(cudaFree(p));
}

int gm_cuda_memcpy_h2d(void *dst, const void *src, size_t n)
{
	if (!gm_cuda_available(NULL, 0))
		return -ENODEV;
	return check(cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice));
}

int gm_cuda_memcpy_d2h(void *dst, const void *src, size_t n)
{
	if (!gm_cuda_available(NULL, 0))
		return -ENODEV;
	return check(cudaMemcpy(dst, src, n, cudaMemcpyDeviceToHost));
}

const char *gm_cuda_build(void)
{
	static char s[32];
	int v = 0;
	cudaRuntimeGetVersion(&v);
	snprintf(s, sizeof(s), "cuda %d.%d", v / 1000, (v % 1000) / 10);
	return s;
}

#else /* !GM_HAVE_CUDA */

bool gm_cuda_available(char *why, size_t len)
{
	if (why && len)
		snprintf(why, len, "built without CUDA (make CUDA=0 or no toolkit)");
	return false;
}

int gm_cuda_host_register(void *p, size_t n)
{
	(void)p;
	(void)n;
	return -ENODEV;
}

void gm_cuda_host_unregister(void *p)
{
	(void)p;
}

int gm_cuda_malloc(void **p, size_t n)
{
	(void)n;
	*p = NULL;
	return -ENODEV;
}

void gm_cuda_free(void *p)
{
	(void)p;
}

int gm_cuda_memcpy_h2d(void *dst, const void *src, size_t n)
{
	(void)dst;
	(void)src;
	(void)n;
	return -ENODEV;
}

int gm_cuda_memcpy_d2h(void *dst, const void *src, size_t n)
{
	(void)dst;
	(void)src;
	(void)n;
	return -ENODEV;
}

const char *gm_cuda_build(void)
{
	return "none";
}
#endif
