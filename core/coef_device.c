/*
 * coef_device.c - the GPU decode's consumer half on a CUDA device (see
 * coef_device.h): find and load the kernels' plugin, and finish a batch of ring
 * slots through it.
 *
 * Why a plugin: the kernels need nvcc, which most builds lack, and a device,
 * which most machines lack; libgoldminer.so stays what it was on both (as the
 * remote workers' plugin keeps UCX out of it) and loads libgoldminer-cuda.so only
 * when its file is there and cudaGetDeviceCount found a device. Its file is
 * looked for beside libgoldminer.so (the build tree, an install) unless
 * $GOLDMINER_CUDA_PLUGIN names it; the file is checked before the device so that
 * a missing build is said as such on every machine.
 *
 * A batch: every slot is checked (the ring is shared memory) and every COEFS
 * slot's plan made on the host before the device is touched, so a malformed slot
 * is refused in words whether or not there is a device. Then one gm_coef_cuda_run
 * on the handle's stream: the slots and the PIXELS slots' samples (the workers'
 * CPU fallback) copied out of the ring, the windows rebuilt, then, after a wait
 * for the caller's stream (its output may be fresh from torch's caching
 * allocator, which hands out memory still in use by work queued on that stream),
 * the COEFS slots finished in their places and the samples copied to theirs, and
 * the caller's stream made to wait for them. The copies out of the ring wait for
 * nothing of the caller's, so the call returns once they are done (the `released`
 * event), which is when the ring's slots may go back; the caller's stream orders
 * the rest: no host wait for the kernels unless asked (sync).
 *
 * Not here: the device's arithmetic (coef_kernels.cu), choosing between host and
 * device (the binding: goldminer.torch), more than one batch in flight.
 */
#include "coef_device.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "goldminer/aug.h"
#include "goldminer/coef.h"
#include "goldminer/cuda.h"
#include "goldminer/util.h"
#include "goldminer/version.h"

#include "coef_cuda.h"

struct gm_coef_device {
	const struct gm_coef_cuda_ops *ops;
	struct gm_coef_cuda *g; /* on `device`, made at the first batch */
	int device;
	uint32_t cap;			/* entries of the arrays below */
	const struct gm_coef_slot **cs; /* the batch's COEFS slots */
	const void **pp;		/* their plans, in plans */
	uint32_t *place;		/* their samples' places in the output */
	size_t *poff;			/* each plan's offset in plans */
	const void **samples;		/* the PIXELS slots' finished samples */
	uint32_t *splace;		/* and their places */
	uint8_t *plans;			/* the plans, copied out of the aug handle */
	size_t plans_cap;
};

/* The plugin, loaded once (under lock), or why it could not be. */
static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static const struct gm_coef_cuda_ops *loaded;
static char load_why[512];

/* The plugin's path into path: $GOLDMINER_CUDA_PLUGIN, else beside the file that
 * holds this function (libgoldminer.so; a program linking libgoldminer.a: the
 * program). true, or false with "... not built: ..." in why. */
static bool plugin_path(char *path, size_t len, char *why, size_t wlen)
{
	const char *env = getenv(GM_COEF_CUDA_PLUGIN_ENV);
	Dl_info info;
	if (env && *env) {
		snprintf(path, len, "%s", env);
	} else if (dladdr((void *)plugin_path, &info) && info.dli_fname) {
		const char *slash = strrchr(info.dli_fname, '/');
		int dir = slash ? (int)(slash - info.dli_fname) : 1;
		snprintf(path, len, "%.*s/%s", dir, slash ? info.dli_fname : ".",
			 GM_COEF_CUDA_PLUGIN);
	} else {
		snprintf(path, len, "%s", GM_COEF_CUDA_PLUGIN);
	}
	if (access(path, R_OK) == 0)
		return true;
	if (why && wlen)
		gm_errf(why, wlen,
			"%s not built: no %s (%s; make builds it beside libgoldminer.so where "
			"nvcc is, or $%s names it)",
			GM_COEF_CUDA_PLUGIN, path, strerror(errno), GM_COEF_CUDA_PLUGIN_ENV);
	return false;
}

/* dlopen the plugin at path and check its table: it, or NULL with load_why. */
static const struct gm_coef_cuda_ops *plugin_open(const char *path)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		gm_errf(load_why, sizeof(load_why), "%s unusable: %s", GM_COEF_CUDA_PLUGIN,
			dlerror());
		return NULL;
	}
	const struct gm_coef_cuda_ops *(*get)(void) =
	    (const struct gm_coef_cuda_ops *(*)(void))dlsym(h, "gm_coef_cuda_plugin");
	const struct gm_coef_cuda_ops *ops = get ? get() : NULL;
	if (!ops || ops->abi != GM_COEF_CUDA_ABI || strcmp(ops->version, gm_version())) {
		gm_errf(load_why, sizeof(load_why),
			"%s unusable: %s is not the plugin of goldminer %s (abi %u, version %s): "
			"rebuild it with this library (make)",
			GM_COEF_CUDA_PLUGIN, path, gm_version(), ops ? ops->abi : 0,
			ops ? ops->version : "?");
		dlclose(h);
		return NULL;
	}
	return ops; /* stays loaded for the life of the process */
}

/* The plugin's table, or NULL with why. */
static const struct gm_coef_cuda_ops *plugin(char *why, size_t len)
{
	char path[PATH_MAX], w[200];
	if (!plugin_path(path, sizeof(path), why, len))
		return NULL;
	if (!gm_cuda_available(w, sizeof(w))) {
		if (why && len)
			gm_errf(why, len, "no CUDA device: %s", w);
		return NULL;
	}
	pthread_mutex_lock(&load_lock);
	if (!loaded && !load_why[0])
		loaded = plugin_open(path);
	const struct gm_coef_cuda_ops *ops = loaded;
	if (!ops && why && len)
		gm_errf(why, len, "%s", load_why);
	pthread_mutex_unlock(&load_lock);
	return ops;
}

bool gm_coef_device_available(char *why, size_t len)
{
	return plugin(why, len) != NULL;
}

int gm_coef_device_create(struct gm_coef_device **out)
{
	struct gm_coef_device *d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	*out = d;
	return 0;
}

void gm_coef_device_destroy(struct gm_coef_device *d)
{
	if (!d)
		return;
	if (d->g)
		d->ops->destroy(d->g);
	free(d->cs);
	free(d->pp);
	free(d->place);
	free(d->poff);
	free(d->samples);
	free(d->splace);
	free(d->plans);
	free(d);
}

/* The arrays for n slots. 0 or -ENOMEM. */
static int grow(struct gm_coef_device *d, uint32_t n)
{
	if (n <= d->cap)
		return 0;
	const struct gm_coef_slot **cs = realloc(d->cs, n * sizeof(*cs));
	if (cs)
		d->cs = cs;
	const void **pp = realloc(d->pp, n * sizeof(*pp));
	if (pp)
		d->pp = pp;
	uint32_t *place = realloc(d->place, n * sizeof(*place));
	if (place)
		d->place = place;
	size_t *poff = realloc(d->poff, n * sizeof(*poff));
	if (poff)
		d->poff = poff;
	const void **samples = realloc(d->samples, n * sizeof(*samples));
	if (samples)
		d->samples = samples;
	uint32_t *splace = realloc(d->splace, n * sizeof(*splace));
	if (splace)
		d->splace = splace;
	if (!cs || !pp || !place || !poff || !samples || !splace)
		return -ENOMEM;
	d->cap = n;
	return 0;
}

/*
 * The host's part: each slot checked, each COEFS slot listed in b with its place
 * and its plan copied into d->plans, each PIXELS slot's sample listed with its
 * place. 0, or -EBADMSG / -EINVAL / -ENOMEM with the slot named in err.
 */
static int host_part(struct gm_coef_device *d, struct gm_aug *a, const uint8_t *data, uint32_t n,
		     size_t slot_bytes, struct gm_coef_cuda_batch *b, char *err, size_t errlen)
{
	char why[256];
	size_t used = 0, out_bytes = b->out_bytes;
	uint32_t *nc = &b->n;
	*nc = 0, b->ns = 0;
	if (grow(d, n))
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++) {
		const struct gm_coef_slot *s = (const void *)(data + (size_t)i * slot_bytes);
		if (gm_coef_check(s, slot_bytes, out_bytes, why, sizeof(why))) {
			gm_errf(err, errlen, "slot %u: %s", i, why);
			return -EBADMSG;
		}
		if (s->kind == GM_COEF_KIND_PIXELS) { /* the workers' CPU fallback */
			d->samples[b->ns] = (const uint8_t *)s + GM_COEF_HDR_BYTES;
			d->splace[b->ns++] = i;
			continue;
		}
		const void *p;
		size_t pb;
		int ret = gm_aug_coef_plan(a, s, slot_bytes, &p, &pb);
		if (ret) {
			gm_errf(err, errlen, "slot %u: %s", i, gm_aug_errmsg(a));
			return ret;
		}
		if (gm_grow_scratch((void **)&d->plans, &d->plans_cap, used + pb, 1 << 16))
			return -ENOMEM;
		memcpy(d->plans + used, p, pb);
		d->cs[*nc] = s, d->place[*nc] = i, d->poff[*nc] = used;
		used += (pb + 15) & ~(size_t)15;
		(*nc)++;
	}
	for (uint32_t k = 0; k < *nc; k++) /* (the buffer may have moved while it grew) */
		d->pp[k] = d->plans + d->poff[k];
	b->slots = d->cs;
	b->plans = d->pp;
	b->place = d->place;
	b->samples = d->samples;
	b->sample_place = d->splace;
	return 0;
}

/* A handle on the device that holds d_out (made again if that changed). 0, or
 * -EINVAL / -ENODEV / -EIO with why in err. */
static int handle_for(struct gm_coef_device *d, void *d_out, char *err, size_t errlen)
{
	int dev, ret = d->ops->device_of(d_out, &dev, err, errlen);
	if (ret)
		return ret;
	if (d->g && d->device != dev) {
		d->ops->destroy(d->g); /* waits for its last batch */
		d->g = NULL;
	}
	if (!d->g && (ret = d->ops->create(&d->g, dev, err, errlen)))
		return ret;
	d->device = dev;
	return 0;
}

/* Poll an event of the handle until it has happened, for at most
 * GM_COEF_DEVICE_WAIT_S: a copy or a batch takes milliseconds. 0, -EIO,
 * -ETIMEDOUT. */
static int wait_event(struct gm_coef_device *d, int (*query)(struct gm_coef_cuda *),
		      const char *what, char *err, size_t errlen)
{
	uint64_t t0 = gm_now_ns(), limit = (uint64_t)GM_COEF_DEVICE_WAIT_S * 1000000000u;
	for (unsigned k = 0;; k++) {
		int r = query(d->g);
		if (r < 0) {
			gm_errf(err, errlen, "the device failed while %s (a CUDA error)", what);
			return -EIO;
		}
		if (r)
			return 0;
		if (gm_now_ns() - t0 > limit) {
			gm_errf(err, errlen, "the device took over %d s %s: is it hung or lost?",
				GM_COEF_DEVICE_WAIT_S, what);
			return -ETIMEDOUT;
		}
		if (k >= 100) { /* past the first tens of microseconds: sleep between polls */
			struct timespec ts = {0, 20000};
			nanosleep(&ts, NULL);
		}
	}
}

int gm_coef_device_finish(struct gm_coef_device *d, struct gm_aug *a, const uint8_t *data,
			  uint32_t n, size_t slot_bytes, void *d_out, size_t out_bytes,
			  void *stream, bool sync, char *err, size_t errlen)
{
	struct gm_coef_cuda_batch b = {
	    .d_out = d_out, .out_bytes = out_bytes, .ordered = true, .stream = stream};
	int ret = host_part(d, a, data, n, slot_bytes, &b, err, errlen);
	if (ret)
		return ret;
	if (!d->ops && !(d->ops = plugin(err, errlen)))
		return -ENODEV;
	if ((ret = handle_for(d, d_out, err, errlen)) ||
	    (ret = d->ops->run(d->g, &b, err, errlen)) ||
	    (ret = wait_event(d, d->ops->released, "copying the slots", err, errlen)))
		return ret;
	return sync ? wait_event(d, d->ops->done, "finishing the samples", err, errlen) : 0;
}
