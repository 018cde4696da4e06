/*
 * coef_kernels.cu - the GPU decode's kernels (see coef_cuda.h): coef_math.h's
 * functions, the ones coef.c's host path runs, compiled by nvcc for the device.
 *
 * Design: the host reads the (checked) slot headers and lays out the batch: the
 * slots one after another in one device buffer, one job per (slot, component)
 * with the index of its first block in the batch and the offset of its plane,
 * and each slot's first window pixel. Three launches then: k_offsets (a thread a
 * job: the prefix of its counts, each block's first coefficient), k_idct (a
 * thread a block: its coefficients scattered into 64, dequantised and
 * inverse-transformed into its plane), k_pixels (a thread a window pixel: its
 * slot by binary search over the first pixels, then upsampled and converted).
 *
 * Not done: the resize and layout on the device; pinned staging (the ring is
 * registered with the driver already, cuda.c); more than one stream.
 */
#include <cuda_runtime.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coef_cuda.h"
#include "coef_math.h"

/* One component of one slot of the batch. */
struct job {
	uint64_t slot_off;  /* the slot in the device copy */
	uint64_t plane_off; /* its plane in the planes buffer */
	uint32_t comp, block0, pw, pad;
};

/* One slot of the batch. */
struct slot_at {
	uint64_t slot_off;
	uint64_t plane_off[GM_COEF_MAX_COMPS];
	uint64_t pix0; /* its first window pixel in the batch */
};

struct gm_coef_cuda {
	cudaStream_t stream;
	uint8_t *d_buf; /* slots, jobs, per-block arrays, planes, windows: one block */
	size_t d_cap;
	uint8_t *h_stage; /* the same layout's host half (slots, jobs, slot_at) */
	size_t h_cap;
};

static int cuda_err(cudaError_t e, const char *what, char *err, size_t errlen)
{
	if (e == cudaSuccess)
		return 0;
	if (err && errlen)
		snprintf(err, errlen, "gm_coef_cuda: %s: %s (%s)", what, cudaGetErrorString(e),
			 cudaGetErrorName(e));
	return e == cudaErrorMemoryAllocation ? -ENOMEM : -EIO;
}

__global__ void k_offsets(const uint8_t *slots, const struct job *jobs, uint32_t njobs,
			  uint32_t *boff)
{
	uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= njobs)
		return;
	const struct gm_coef_slot *s = (const struct gm_coef_slot *)(slots + jobs[i].slot_off);
	const struct gm_coef_comp *k = &s->comp[jobs[i].comp];
	const uint8_t *cnt = (const uint8_t *)s + k->off_counts;
	uint32_t at = 0;
	for (uint32_t b = 0; b < k->nblocks; b++) {
		boff[jobs[i].block0 + b] = at;
		at += cnt[b];
	}
}

__global__ void k_idct(const uint8_t *slots, const struct job *jobs, const uint32_t *block_job,
		       uint32_t nblocks, const uint32_t *boff, uint8_t *planes)
{
	uint32_t g = blockIdx.x * blockDim.x + threadIdx.x;
	if (g >= nblocks)
		return;
	const struct job *j = &jobs[block_job[g]];
	const struct gm_coef_slot *s = (const struct gm_coef_slot *)(slots + j->slot_off);
	const struct gm_coef_comp *k = &s->comp[j->comp];
	uint32_t b = g - j->block0, per = (uint32_t)k->mw * k->mh;
	uint32_t m = b / per, i = b % per;
	uint32_t lx = (m % s->mcols) * k->mw + i % k->mw, ly = (m / s->mcols) * k->mh + i / k->mw;
	if (k->bx0 + lx >= k->bw_all || k->by0 + ly >= k->bh_all)
		return; /* MCU padding: never shown */
	const uint8_t *base = (const uint8_t *)s, *pos = base + k->off_pos;
	const int16_t *val = (const int16_t *)(base + k->off_val);
	uint32_t at = boff[g], n = base[k->off_counts + b];
	int16_t blk[64];
	for (int e = 0; e < 64; e++)
		blk[e] = 0;
	for (uint32_t e = 0; e < n; e++)
		blk[pos[at + e]] = val[at + e];
	uint8_t *out =
	    planes + j->plane_off + (size_t)ly * k->ssize * j->pw + (size_t)lx * k->ssize;
	gm_cm_idct(k->ssize, blk, s->q[k->qt], out, j->pw);
}

__global__ void k_pixels(const uint8_t *slots, const struct slot_at *at, uint32_t n,
			 const uint8_t *planes, uint8_t *rgb)
{
	uint64_t g = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (g >= at[n].pix0)
		return;
	uint32_t lo = 0, hi = n; /* the slot i with at[i].pix0 <= g < at[i + 1].pix0 */
	while (hi - lo > 1) {
		uint32_t mid = (lo + hi) / 2;
		if (at[mid].pix0 <= g)
			lo = mid;
		else
			hi = mid;
	}
	const struct gm_coef_slot *s = (const struct gm_coef_slot *)(slots + at[lo].slot_off);
	uint64_t p = g - at[lo].pix0;
	struct gm_cm_plane pl[GM_COEF_MAX_COMPS];
	for (uint32_t c = 0; c < s->ncomp; c++) {
		const struct gm_coef_comp *k = &s->comp[c];
		uint32_t pw = s->mcols * k->mw * k->ssize, ph = s->mrows * k->mh * k->ssize;
		pl[c].p = planes + at[lo].plane_off[c];
		pl[c].stride = pw, pl[c].x0 = k->bx0 * k->ssize, pl[c].y0 = k->by0 * k->ssize;
		pl[c].w = pw, pl[c].h = ph, pl[c].dw = k->dw, pl[c].dh = k->dh;
		pl[c].hr = k->hr, pl[c].vr = k->vr, pl[c].fancy = k->fancy;
	}
	gm_cm_pixel(pl, s->ncomp, s->color, s->rx + (uint32_t)(p % s->rw),
		    s->ry + (uint32_t)(p / s->rw), rgb + 3 * g);
}

extern "C" int gm_coef_cuda_create(struct gm_coef_cuda **out, char *err, size_t errlen)
{
	struct gm_coef_cuda *g = (struct gm_coef_cuda *)calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	int ret = cuda_err(cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking),
			   "cudaStreamCreate", err, errlen);
	if (ret) {
		free(g);
		return ret == -EIO ? -ENODEV : ret;
	}
	*out = g;
	return 0;
}

extern "C" void gm_coef_cuda_destroy(struct gm_coef_cuda *g)
{
	if (!g)
		return;
	cudaFree(g->d_buf);
	free(g->h_stage);
	cudaStreamDestroy(g->stream);
	free(g);
}

/* The batch's layout: sizes of its parts (bytes, 16-aligned). */
struct layout {
	size_t slots, jobs, at, boff, bjob, planes, rgb;
	uint32_t njobs, nblocks;
	uint64_t npix;
};

static size_t up16(size_t n)
{
	return (n + 15) & ~(size_t)15;
}

static void plan(const struct gm_coef_slot *const *slots, uint32_t n, struct layout *l)
{
	memset(l, 0, sizeof(*l));
	for (uint32_t i = 0; i < n; i++) {
		const struct gm_coef_slot *s = slots[i];
		l->slots += up16(s->bytes);
		l->npix += (uint64_t)s->rw * s->rh;
		l->planes += up16(gm_coef_planes_bytes(s));
		l->njobs += s->ncomp;
		for (uint32_t c = 0; c < s->ncomp; c++)
			l->nblocks += s->comp[c].nblocks;
	}
	l->jobs = up16(sizeof(struct job) * l->njobs);
	l->at = up16(sizeof(struct slot_at) * (n + 1));
	l->boff = up16(sizeof(uint32_t) * l->nblocks);
	l->bjob = l->boff;
	l->rgb = up16(3 * l->npix);
}

/* Fill the host stage: slots, jobs, slot_at, block_job, in the device's order. */
static void stage(struct gm_coef_cuda *g, const struct gm_coef_slot *const *slots, uint32_t n,
		  const struct layout *l)
{
	uint8_t *h = g->h_stage;
	struct job *jobs = (struct job *)(h + l->slots);
	struct slot_at *at = (struct slot_at *)(h + l->slots + l->jobs);
	uint32_t *bjob = (uint32_t *)(h + l->slots + l->jobs + l->at);
	uint64_t off = 0, poff = 0, pix = 0;
	uint32_t nj = 0, block = 0;
	for (uint32_t i = 0; i < n; i++) {
		const struct gm_coef_slot *s = slots[i];
		memcpy(h + off, s, s->bytes);
		at[i].slot_off = off, at[i].pix0 = pix;
		for (uint32_t c = 0; c < s->ncomp; c++) {
			const struct gm_coef_comp *k = &s->comp[c];
			uint32_t pw = s->mcols * k->mw * k->ssize, ph = s->mrows * k->mh * k->ssize;
			at[i].plane_off[c] = poff;
			jobs[nj] = (struct job){off, poff, c, block, pw, 0};
			for (uint32_t b = 0; b < k->nblocks; b++)
				bjob[block + b] = nj;
			block += k->nblocks, nj++;
			poff += (uint64_t)pw * ph;
		}
		poff = up16(poff);
		off += up16(s->bytes);
		pix += (uint64_t)s->rw * s->rh;
	}
	at[n].pix0 = pix;
}

extern "C" int gm_coef_cuda_windows(struct gm_coef_cuda *g, const struct gm_coef_slot *const *slots,
				    uint32_t n, uint8_t *const *rgb, char *err, size_t errlen)
{
	struct layout l;
	int ret;
	if (n == 0)
		return 0;
	plan(slots, n, &l);
	size_t hsz = l.slots + l.jobs + l.at + l.bjob;
	size_t dsz = hsz + l.boff + l.planes + l.rgb;
	if (hsz > g->h_cap) {
		free(g->h_stage);
		g->h_cap = 0;
		if (!(g->h_stage = (uint8_t *)malloc(hsz)))
			return -ENOMEM;
		g->h_cap = hsz;
	}
	if (dsz > g->d_cap) {
		cudaFree(g->d_buf);
		g->d_buf = NULL, g->d_cap = 0;
		if ((ret =
			 cuda_err(cudaMalloc((void **)&g->d_buf, dsz), "cudaMalloc", err, errlen)))
			return ret;
		g->d_cap = dsz;
	}
	stage(g, slots, n, &l);
	uint8_t *d = g->d_buf;
	const uint8_t *d_slots = d;
	const struct job *d_jobs = (const struct job *)(d + l.slots);
	const struct slot_at *d_at = (const struct slot_at *)(d + l.slots + l.jobs);
	const uint32_t *d_bjob = (const uint32_t *)(d + l.slots + l.jobs + l.at);
	uint32_t *d_boff = (uint32_t *)(d + hsz);
	uint8_t *d_planes = d + hsz + l.boff, *d_rgb = d_planes + l.planes;
	if ((ret = cuda_err(cudaMemcpyAsync(d, g->h_stage, hsz, cudaMemcpyHostToDevice, g->stream),
			    "copy of the slots", err, errlen)))
		return ret;
	k_offsets<<<(l.njobs + 127) / 128, 128, 0, g->stream>>>(d_slots, d_jobs, l.njobs, d_boff);
	k_idct<<<(l.nblocks + 127) / 128, 128, 0, g->stream>>>(d_slots, d_jobs, d_bjob, l.nblocks,
							       d_boff, d_planes);
	k_pixels<<<(unsigned)((l.npix + 255) / 256), 256, 0, g->stream>>>(d_slots, d_at, n,
									  d_planes, d_rgb);
	if ((ret = cuda_err(cudaGetLastError(), "kernel launch", err, errlen)))
		return ret;
	uint64_t pix = 0;
	for (uint32_t i = 0; i < n; i++) {
		size_t bytes = (size_t)slots[i]->rw * slots[i]->rh * 3;
		if ((ret = cuda_err(cudaMemcpyAsync(rgb[i], d_rgb + 3 * pix, bytes,
						    cudaMemcpyDeviceToHost, g->stream),
				    "copy of a window", err, errlen)))
			return ret;
		pix += (uint64_t)slots[i]->rw * slots[i]->rh;
	}
	return cuda_err(cudaStreamSynchronize(g->stream), "the batch's kernels", err, errlen);
}
