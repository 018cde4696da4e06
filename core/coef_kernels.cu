/*
 * coef_kernels.cu - the GPU decode's kernels (see coef_cuda.h): coef_math.h's and
 * finish_math.h's functions, the ones the host path runs (coef.c,
 * gm_aug_coef_finish_shared), compiled by nvcc for the device (-fmad=false: no
 * multiply-add contracted, the float bits the C build gives).
 *
 * Design: the host reads the (checked) slot headers and lays out the batch: the
 * slots one after another in one device buffer (each copied from the caller's
 * memory by its own async copy: from the registered ring, no host copy), then the
 * batch's tables (one job per (slot, component) with the index of its first block
 * and the offset of its plane, each slot's first window pixel and plan, a block's
 * job) and the plans, staged on the host and copied in one piece. Launches:
 * k_offsets (a thread a job: the prefix of its counts' spans, each block's first
 * entry), k_idct (a thread a block: its entries scattered into 64,
 * dequantised and inverse-transformed into its plane), k_pixels (a thread a
 * window pixel: its slot by binary search over the first pixels, then upsampled
 * and converted); for gm_coef_cuda_finish then k_resize (a thread an output
 * element: resized from the window and laid out, or, under colour jitter, kept as
 * a byte), and under jitter k_mean (16 threads a slot with a contrast op: the gray
 * mean in jitter.c's lane order) and k_jitter (a thread an output pixel).
 *
 * Not done: more than one stream; the launches' sizes tuned.
 */
#include <cuda_runtime.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coef_cuda.h"
#include "coef_math.h"
#include "finish_math.h"

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
	uint64_t pix0;	   /* its first window pixel in the batch */
	uint64_t plan_off; /* its finish plan in the plans (gm_coef_cuda_finish) */
	float mean;	   /* its gray mean before the contrast op (k_mean) */
	uint32_t place;	   /* its sample's place in the output (gm_coef_cuda_finish) */
};

struct gm_coef_cuda {
	int device; /* the device its stream and memory are on */
	cudaStream_t stream;
	cudaEvent_t copied; /* the last batch's slots are on the device */
	cudaEvent_t done;   /* the last batch's samples are in its output */
	cudaEvent_t theirs; /* the caller's stream's work so far (gm_coef_cuda_run) */
	bool events;
	uint8_t *d_buf; /* slots, tables, plans, per-block arrays, planes, windows,
			 * jitter bytes: one block */
	size_t d_cap;
	uint8_t *h_stage; /* the tables and plans, staged */
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
		at += gm_cm_span(cnt[b]);
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
	const uint8_t *base = (const uint8_t *)s;
	const uint16_t *ent = (const uint16_t *)(base + k->off_ent);
	int16_t blk[64];
	gm_cm_scatter(base[k->off_counts + b], ent + boff[g], blk);
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

/* One output element of slot i (a thread each, every slot the same size): resized
 * from its window and laid out, or kept as a byte for the jitter. */
__global__ void k_resize(const uint8_t *plans, const struct slot_at *at, uint32_t n,
			 uint32_t size, const uint8_t *rgb, uint8_t *hwc, uint8_t *out,
			 size_t out_bytes)
{
	uint64_t g = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
	uint64_t per = (uint64_t)size * size * 3;
	if (g >= per * n)
		return;
	uint32_t i = (uint32_t)(g / per), c = (uint32_t)(g % per % 3);
	uint64_t pix = g % per / 3;
	const struct gm_fm_plan *p = (const struct gm_fm_plan *)(plans + at[i].plan_off);
	uint32_t oy = (uint32_t)(pix / size), ox = (uint32_t)(pix % size);
	uint8_t v = gm_fm_resized(p, rgb + 3 * at[i].pix0, (size_t)p->win_w * 3, oy, ox, c);
	if (p->jitter)
		hwc[g] = v;
	else
		gm_fm_layout(p, out + at[i].place * out_bytes, oy, ox, c, v);
}

/* Slot blockIdx.x's gray mean before its contrast op (none: nothing), a lane a
 * thread, the lanes' sums added to the double in jitter.c's order. */
__global__ void k_mean(const uint8_t *plans, struct slot_at *at, const uint8_t *hwc, uint64_t per)
{
	__shared__ float part[GM_FM_LANES];
	uint32_t i = blockIdx.x, lane = threadIdx.x;
	const struct gm_fm_plan *p = (const struct gm_fm_plan *)(plans + at[i].plan_off);
	if (!p->jitter || gm_fm_contrast_at(p) >= p->jit_n)
		return; /* the whole block */
	const uint8_t *h = hwc + i * per;
	size_t nb = gm_fm_gray_blocks(p);
	double sum = 0;
	for (size_t b0 = 0; b0 < nb; b0 += GM_FM_FLUSH) {
		part[lane] =
		    gm_fm_gray_part(p, h, lane, b0, b0 + GM_FM_FLUSH < nb ? b0 + GM_FM_FLUSH : nb);
		__syncthreads();
		if (lane == 0)
			for (int k = 0; k < GM_FM_LANES; k++)
				sum += part[k];
		__syncthreads();
	}
	if (lane == 0)
		at[i].mean = gm_fm_gray_finish(p, h, sum);
}

/* One output pixel of a jittered slot: its ops, then the layout. */
__global__ void k_jitter(const uint8_t *plans, const struct slot_at *at, uint32_t n, uint32_t size,
			 const uint8_t *hwc, uint8_t *out, size_t out_bytes)
{
	uint64_t g = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
	uint64_t per = (uint64_t)size * size;
	if (g >= per * n)
		return;
	uint32_t i = (uint32_t)(g / per);
	const struct gm_fm_plan *p = (const struct gm_fm_plan *)(plans + at[i].plan_off);
	if (p->jitter)
		gm_fm_jitter_out(p, hwc + i * per * 3, g % per, at[i].mean,
				 out + at[i].place * out_bytes);
}

/* The handle's device made current for the scope of an entry point, the
 * caller's put back after it (a trainer on another device keeps its own). */
struct on_device {
	int old;
	explicit on_device(int d)
	{
		if (cudaGetDevice(&old) != cudaSuccess)
			old = -1;
		if (old != d)
			cudaSetDevice(d);
	}
	~on_device()
	{
		int now = -1;
		if (old >= 0 && cudaGetDevice(&now) == cudaSuccess && now != old)
			cudaSetDevice(old);
	}
	on_device(const on_device &) = delete;
	on_device &operator=(const on_device &) = delete;
};

/* The events and stream of g (device current), or their error. */
static int make_stream(struct gm_coef_cuda *g, char *err, size_t errlen)
{
	int ret = cuda_err(cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking),
			   "cudaStreamCreate", err, errlen);
	if (ret)
		return ret == -EIO ? -ENODEV : ret;
	cudaEvent_t *ev[3] = {&g->copied, &g->done, &g->theirs};
	for (int k = 0; k < 3; k++) {
		ret = cuda_err(cudaEventCreateWithFlags(ev[k], cudaEventDisableTiming),
			       "cudaEventCreate", err, errlen);
		if (ret) {
			while (k-- > 0)
				cudaEventDestroy(*ev[k]);
			cudaStreamDestroy(g->stream);
			return ret;
		}
	}
	g->events = true;
	return 0;
}

extern "C" int gm_coef_cuda_create(struct gm_coef_cuda **out, int device, char *err,
				   size_t errlen)
{
	struct gm_coef_cuda *g = (struct gm_coef_cuda *)calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	g->device = device;
	int old = -1;
	if (cudaGetDevice(&old) != cudaSuccess)
		old = -1;
	int ret = cuda_err(cudaSetDevice(device), "cudaSetDevice", err, errlen);
	ret = ret ? -ENODEV : make_stream(g, err, errlen);
	if (old >= 0 && old != device)
		cudaSetDevice(old); /* the caller's device, as every entry point leaves it */
	if (ret) {
		free(g);
		return ret;
	}
	*out = g;
	return 0;
}

extern "C" void gm_coef_cuda_destroy(struct gm_coef_cuda *g)
{
	if (!g)
		return;
	on_device on(g->device);
	cudaStreamSynchronize(g->stream);
	cudaFree(g->d_buf);
	cudaFreeHost(g->h_stage);
	if (g->events) {
		cudaEventDestroy(g->copied);
		cudaEventDestroy(g->done);
		cudaEventDestroy(g->theirs);
	}
	cudaStreamDestroy(g->stream);
	free(g);
}

/* The batch's layout: sizes of its parts (bytes, 16-aligned). The device buffer
 * holds slots, then the staged part (jobs, at, bjob, plans: h_stage's bytes), then
 * boff, planes, rgb (the windows), hwc (the jitter's bytes) and the finished
 * samples (gm_coef_cuda_run's PIXELS slots) on their way to their places. */
struct layout {
	size_t slots, jobs, at, boff, bjob, plans, planes, rgb, hwc, samples;
	uint32_t njobs, nblocks;
	uint64_t npix;
};

static size_t up16(size_t n)
{
	return (n + 15) & ~(size_t)15;
}

static void plan(const struct gm_coef_slot *const *slots, const void *const *plans, uint32_t n,
		 uint32_t size, struct layout *l)
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
		if (plans) {
			const struct gm_fm_plan *p = (const struct gm_fm_plan *)plans[i];
			l->plans += up16(p->bytes);
			l->hwc += p->jitter ? (size_t)size * size * 3 : 0;
		}
	}
	l->hwc = l->hwc ? (size_t)n * size * size * 3 : 0;
	l->jobs = up16(sizeof(struct job) * l->njobs);
	l->at = up16(sizeof(struct slot_at) * (n + 1));
	l->boff = up16(sizeof(uint32_t) * l->nblocks);
	l->bjob = l->boff;
	l->rgb = up16(3 * l->npix);
}

/* Fill the host stage: jobs, slot_at, block_job, plans, in the device's order. */
static void stage(struct gm_coef_cuda *g, const struct gm_coef_slot *const *slots,
		  const void *const *plans, const uint32_t *place, uint32_t n,
		  const struct layout *l)
{
	uint8_t *h = g->h_stage;
	struct job *jobs = (struct job *)h;
	struct slot_at *at = (struct slot_at *)(h + l->jobs);
	uint32_t *bjob = (uint32_t *)(h + l->jobs + l->at);
	uint8_t *pl = h + l->jobs + l->at + l->bjob;
	uint64_t off = 0, poff = 0, pix = 0, planoff = 0;
	uint32_t nj = 0, block = 0;
	memset(at, 0, sizeof(*at) * (n + 1));
	for (uint32_t i = 0; i < n; i++) {
		const struct gm_coef_slot *s = slots[i];
		at[i].slot_off = off, at[i].pix0 = pix, at[i].plan_off = planoff;
		at[i].place = place ? place[i] : i;
		if (plans) {
			uint32_t pb = ((const struct gm_fm_plan *)plans[i])->bytes;
			memcpy(pl + planoff, plans[i], pb);
			planoff += up16(pb);
		}
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

/* The device's pointers into one batch's layout. */
struct dev {
	uint8_t *slots, *plans, *planes, *rgb, *hwc, *samples;
	struct job *jobs;
	struct slot_at *at;
	uint32_t *bjob, *boff;
};

/* The staging buffers for l: host (pinned, so that the tables' copy is async:
 * a copy from pageable memory would first wait for the stream's queued work) and
 * device. 0 or -ENOMEM / -EIO with why in err. */
static int grow(struct gm_coef_cuda *g, size_t hsz, size_t dsz, char *err, size_t errlen)
{
	int ret;
	if (hsz > g->h_cap) {
		cudaFreeHost(g->h_stage);
		g->h_stage = NULL, g->h_cap = 0;
		if ((ret = cuda_err(cudaMallocHost((void **)&g->h_stage, hsz), "cudaMallocHost", err,
				    errlen)))
			return ret;
		g->h_cap = hsz;
	}
	if (dsz > g->d_cap) {
		cudaFree(g->d_buf); /* waits for the device: the last batch is done with it */
		g->d_buf = NULL, g->d_cap = 0;
		if ((ret =
			 cuda_err(cudaMalloc((void **)&g->d_buf, dsz), "cudaMalloc", err, errlen)))
			return ret;
		g->d_cap = dsz;
	}
	return 0;
}

/* The finished samples to copy to their places (gm_coef_cuda_run's PIXELS slots). */
struct samples {
	const void *const *src;
	uint32_t n;
	size_t bytes;
};

/*
 * Grow the buffers for l, stage, copy the slots and the finished samples (each from
 * the caller's memory) and the staged tables, record `copied`, and run the three
 * window launches. 0 or -EIO / -ENOMEM with why in err.
 */
static int windows_async(struct gm_coef_cuda *g, const struct gm_coef_slot *const *slots,
			 const void *const *plans, const uint32_t *place, uint32_t n,
			 const struct samples *sm, const struct layout *l, struct dev *d, char *err,
			 size_t errlen)
{
	size_t hsz = l->jobs + l->at + l->bjob + l->plans;
	size_t dsz = l->slots + hsz + l->boff + l->planes + l->rgb + l->hwc + l->samples;
	/* the last batch's tables copied out of h_stage before it is written again */
	int ret = cuda_err(cudaEventSynchronize(g->copied), "the last batch's copies", err, errlen);
	if (ret || (ret = grow(g, hsz, dsz, err, errlen)))
		return ret;
	stage(g, slots, plans, place, n, l);
	uint8_t *b = g->d_buf, *st = b + l->slots;
	d->slots = b;
	d->jobs = (struct job *)st;
	d->at = (struct slot_at *)(st + l->jobs);
	d->bjob = (uint32_t *)(st + l->jobs + l->at);
	d->plans = st + l->jobs + l->at + l->bjob;
	d->boff = (uint32_t *)(st + hsz);
	d->planes = st + hsz + l->boff, d->rgb = d->planes + l->planes, d->hwc = d->rgb + l->rgb;
	d->samples = d->hwc + l->hwc;
	const struct slot_at *hat = (const struct slot_at *)(g->h_stage + l->jobs);
	for (uint32_t i = 0; i < n; i++)
		if ((ret = cuda_err(cudaMemcpyAsync(b + hat[i].slot_off, slots[i], slots[i]->bytes,
						    cudaMemcpyHostToDevice, g->stream),
				    "copy of a slot", err, errlen)))
			return ret;
	for (uint32_t k = 0; sm && k < sm->n; k++)
		if ((ret = cuda_err(cudaMemcpyAsync(d->samples + k * up16(sm->bytes), sm->src[k],
						    sm->bytes, cudaMemcpyHostToDevice, g->stream),
				    "copy of a finished sample", err, errlen)))
			return ret;
	if ((ret = cuda_err(cudaMemcpyAsync(st, g->h_stage, hsz, cudaMemcpyHostToDevice, g->stream),
			    "copy of the batch's tables", err, errlen)) ||
	    (ret = cuda_err(cudaEventRecord(g->copied, g->stream), "cudaEventRecord", err, errlen)))
		return ret;
	if (n == 0) /* (a grid of no blocks is not a launch) */
		return 0;
	k_offsets<<<(l->njobs + 127) / 128, 128, 0, g->stream>>>(d->slots, d->jobs, l->njobs,
								  d->boff);
	k_idct<<<(l->nblocks + 127) / 128, 128, 0, g->stream>>>(d->slots, d->jobs, d->bjob,
								 l->nblocks, d->boff, d->planes);
	k_pixels<<<(unsigned)((l->npix + 255) / 256), 256, 0, g->stream>>>(d->slots, d->at, n,
									   d->planes, d->rgb);
	return cuda_err(cudaGetLastError(), "kernel launch", err, errlen);
}

extern "C" int gm_coef_cuda_windows(struct gm_coef_cuda *g, const struct gm_coef_slot *const *slots,
				    uint32_t n, uint8_t *const *rgb, char *err, size_t errlen)
{
	struct layout l;
	struct dev d;
	int ret;
	if (n == 0)
		return 0;
	on_device on(g->device);
	plan(slots, NULL, n, 0, &l);
	if ((ret = windows_async(g, slots, NULL, NULL, n, NULL, &l, &d, err, errlen)))
		return ret;
	uint64_t pix = 0;
	for (uint32_t i = 0; i < n; i++) {
		size_t bytes = (size_t)slots[i]->rw * slots[i]->rh * 3;
		if ((ret = cuda_err(cudaMemcpyAsync(rgb[i], d.rgb + 3 * pix, bytes,
						    cudaMemcpyDeviceToHost, g->stream),
				    "copy of a window", err, errlen)))
			return ret;
		pix += (uint64_t)slots[i]->rw * slots[i]->rh;
	}
	return cuda_err(cudaStreamSynchronize(g->stream), "the batch's kernels", err, errlen);
}

/* Every plan for its slot and all of one spec, whose sample fits out_bytes: 0, or
 * -EINVAL with which in err. */
static int plans_check(const struct gm_coef_slot *const *slots, const void *const *plans,
		       uint32_t n, size_t out_bytes, char *err, size_t errlen)
{
	const struct gm_fm_plan *p0 = (const struct gm_fm_plan *)plans[0];
	uint32_t size = p0->size;
	for (uint32_t i = 0; i < n; i++) { /* one spec: the same side and layout */
		const struct gm_fm_plan *p = (const struct gm_fm_plan *)plans[i];
		size_t elem = p->out == 0 ? 1 : p->out == 1 ? 4 : 2;
		if (p->size != size || p->out != p0->out || p->out > 2 ||
		    (size_t)size * size * 3 * elem > out_bytes || p->win_w != slots[i]->rw ||
		    p->win_h != slots[i]->rh || p->bytes < gm_fm_plan_bytes(size, p->kx, p->ky) ||
		    p->off_x != sizeof(*p) || p->off_y != p->off_x + 4 * (size_t)size * (2 + p->kx)) {
			if (err && errlen)
				snprintf(err, errlen,
					 "gm_coef_cuda_finish: plan %u is not for slot %u under "
					 "the batch's spec (gm_aug_coef_plan makes them)",
					 i, i);
			return -EINVAL;
		}
	}
	return 0;
}

/* The output's part of a batch, after its windows: under `ordered`, a wait for the
 * caller's stream; the resize, layout and jitter launches; the finished samples
 * copied to their places; `done` recorded, and the caller's stream made to wait
 * for it. 0 or -EIO with why in err. */
static int outputs_async(struct gm_coef_cuda *g, const struct gm_coef_cuda_batch *b,
			 const struct layout *l, const struct dev *d, uint32_t size, char *err,
			 size_t errlen)
{
	cudaStream_t theirs = (cudaStream_t)b->stream;
	uint8_t *out = (uint8_t *)b->d_out;
	int ret = 0;
	if (b->ordered &&
	    ((ret = cuda_err(cudaEventRecord(g->theirs, theirs), "cudaEventRecord on the caller's "
				       "stream", err, errlen)) ||
	     (ret = cuda_err(cudaStreamWaitEvent(g->stream, g->theirs, 0), "cudaStreamWaitEvent",
			     err, errlen))))
		return ret;
	uint64_t per = (uint64_t)size * size * 3, all = per * b->n;
	if (b->n) {
		k_resize<<<(unsigned)((all + 255) / 256), 256, 0, g->stream>>>(
		    d->plans, d->at, b->n, size, d->rgb, d->hwc, out, b->out_bytes);
		if (l->hwc) {
			k_mean<<<b->n, GM_FM_LANES, 0, g->stream>>>(d->plans, d->at, d->hwc, per);
			k_jitter<<<(unsigned)((all / 3 + 255) / 256), 256, 0, g->stream>>>(
			    d->plans, d->at, b->n, size, d->hwc, out, b->out_bytes);
		}
		if ((ret = cuda_err(cudaGetLastError(), "kernel launch", err, errlen)))
			return ret;
	}
	for (uint32_t k = 0; k < b->ns; k++)
		if ((ret = cuda_err(cudaMemcpyAsync(out + (size_t)b->sample_place[k] * b->out_bytes,
						    d->samples + k * up16(b->out_bytes),
						    b->out_bytes, cudaMemcpyDeviceToDevice,
						    g->stream),
				    "copy of a finished sample to its place", err, errlen)))
			return ret;
	if ((ret = cuda_err(cudaEventRecord(g->done, g->stream), "cudaEventRecord", err, errlen)))
		return ret;
	return b->ordered ? cuda_err(cudaStreamWaitEvent(theirs, g->done, 0),
				     "cudaStreamWaitEvent on the caller's stream", err, errlen)
			  : 0;
}

extern "C" int gm_coef_cuda_run(struct gm_coef_cuda *g, const struct gm_coef_cuda_batch *b,
				char *err, size_t errlen)
{
	struct layout l;
	struct dev d;
	int ret;
	on_device on(g->device);
	if (b->n && (ret = plans_check(b->slots, b->plans, b->n, b->out_bytes, err, errlen)))
		return ret;
	uint32_t size = b->n ? ((const struct gm_fm_plan *)b->plans[0])->size : 0;
	struct samples sm = {b->samples, b->ns, b->out_bytes};
	plan(b->slots, b->plans, b->n, size, &l);
	l.samples = b->ns * up16(b->out_bytes);
	ret = windows_async(g, b->slots, b->plans, b->place, b->n, &sm, &l, &d, err, errlen);
	if (!ret)
		ret = outputs_async(g, b, &l, &d, size, err, errlen);
	if (ret) /* copies may be queued: the caller's memory is read until they are done */
		cudaStreamSynchronize(g->stream);
	return ret;
}

extern "C" int gm_coef_cuda_finish(struct gm_coef_cuda *g, const struct gm_coef_slot *const *slots,
				   const void *const *plans, const uint32_t *place, uint32_t n,
				   void *d_out, size_t out_bytes, char *err, size_t errlen)
{
	struct gm_coef_cuda_batch b = {slots, plans, place, n, NULL, NULL, 0, d_out, out_bytes,
				       false, NULL};
	return gm_coef_cuda_run(g, &b, err, errlen);
}

extern "C" int gm_coef_cuda_device_of(const void *d, int *device, char *err, size_t errlen)
{
	cudaPointerAttributes a;
	int ret = cuda_err(cudaPointerGetAttributes(&a, d), "cudaPointerGetAttributes", err, errlen);
	if (ret) {
		cudaGetLastError(); /* not sticky: clear it for the caller's next call */
		return ret;
	}
	if (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged) {
		if (err && errlen)
			snprintf(err, errlen,
				 "gm_coef_cuda: the output %p is not device memory (a CUDA "
				 "tensor's data_ptr(), cudaMalloc)",
				 d);
		return -EINVAL;
	}
	*device = a.device;
	return 0;
}

static int query(cudaEvent_t e)
{
	cudaError_t r = cudaEventQuery(e);
	return r == cudaSuccess ? 1 : r == cudaErrorNotReady ? 0 : -EIO;
}

extern "C" int gm_coef_cuda_released(struct gm_coef_cuda *g)
{
	return query(g->copied);
}

extern "C" int gm_coef_cuda_done(struct gm_coef_cuda *g)
{
	return query(g->done);
}

extern "C" int gm_coef_cuda_sync(struct gm_coef_cuda *g, char *err, size_t errlen)
{
	return cuda_err(cudaEventSynchronize(g->done), "the batch's kernels", err, errlen);
}

extern "C" int gm_coef_cuda_alloc(void **d, size_t bytes, char *err, size_t errlen)
{
	return cuda_err(cudaMalloc(d, bytes), "cudaMalloc", err, errlen);
}

extern "C" void gm_coef_cuda_free(void *d)
{
	cudaFree(d);
}

extern "C" int gm_coef_cuda_read(struct gm_coef_cuda *g, void *host, const void *d, size_t bytes,
				 char *err, size_t errlen)
{
	on_device on(g->device);
	int ret = cuda_err(cudaMemcpyAsync(host, d, bytes, cudaMemcpyDeviceToHost, g->stream),
			   "copy back", err, errlen);
	return ret ? ret : cuda_err(cudaStreamSynchronize(g->stream), "copy back", err, errlen);
}

extern "C" const struct gm_coef_cuda_ops *gm_coef_cuda_plugin(void)
{
	static const struct gm_coef_cuda_ops ops = {
	    GM_COEF_CUDA_ABI,	  GM_VERSION,	       gm_coef_cuda_create,
	    gm_coef_cuda_destroy, gm_coef_cuda_run,    gm_coef_cuda_released,
	    gm_coef_cuda_done,	  gm_coef_cuda_device_of,
	};
	return &ops;
}
