/*
 * test_coef_device.c - the GPU decode finished on a device through the loader
 * (gm_loader_finish_device, core/coef_device.c): what it refuses on the host,
 * before any device is touched (a slot neither COEFS nor PIXELS, a size or batch
 * unlike the loader's, an unknown flag, a loader without gpu_decode); why it cannot
 * run, in words (the plugin not built; no device); the plugin libgoldminer-cuda.so
 * loading and its table resolving (when the build made it). With a device and the
 * plugin, every batch finished on the device must be gm_loader_finish's bytes.
 * Env: B, the build folder holding libgoldminer-cuda.so (default build).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "goldminer/coef.h"
#include "goldminer/cuda.h"
#include "goldminer/loader.h"
#include "goldminer/version.h"
#include "testutil.h"

#include "../core/coef_cuda.h"

static char dir[64];
static char plugin[512]; /* $B/libgoldminer-cuda.so */

static int setup(void **state)
{
	(void)state;
	char err[256];
	const char *b = getenv("B");
	snprintf(plugin, sizeof(plugin), "%s/%s", b && *b ? b : "build", GM_COEF_CUDA_PLUGIN);
	if (gm_test_tmpdir(dir, sizeof(dir), "gm-coefdev") ||
	    gm_synth_write(dir, 24, 2, 5, 0, NULL, err, sizeof(err)))
		return -1;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	gm_test_rm_tree(dir);
	unsetenv(GM_COEF_CUDA_PLUGIN_ENV);
	return 0;
}

/* A loader over the synthetic set, gpu_decode as given, and its first batch. */
static struct gm_loader *open_first(bool gpu_decode, enum gm_out_type out, struct gm_batch *b)
{
	struct gm_loader_opts o;
	struct gm_loader *l;
	char err[256];
	gm_loader_opts_default(&o);
	o.root = dir;
	o.workers = 1;
	o.batch_size = 8;
	o.epochs = 1;
	o.aug.size = 32;
	o.aug.out = out;
	o.gpu_decode = gpu_decode;
	assert_int_equal(gm_loader_open(&l, &o, err, sizeof(err)), 0);
	assert_int_equal(gm_loader_next(l, b), 0);
	return l;
}

static size_t out_bytes(const struct gm_loader *l)
{
	struct gm_loader_stats st;
	gm_loader_stats(l, &st);
	return (size_t)st.size * st.size * 3 *
	       (st.out == GM_OUT_U8_HWC	   ? 1
		: st.out == GM_OUT_F32_CHW ? 4
					   : 2);
}

static void test_a_slot_neither_coefs_nor_pixels_is_refused_before_the_device(void **state)
{
	(void)state;
	struct gm_batch b, fake;
	struct gm_loader *l = open_first(true, GM_OUT_F32_CHW, &b);
	size_t len = (size_t)b.size * b.sample_bytes, ob = out_bytes(l);
	uint8_t *copy = malloc(len), out[64];
	assert_non_null(copy);
	memcpy(copy, b.data, len);
	fake = b;
	fake.data = copy;
	struct gm_coef_slot *s = (void *)(copy + 3 * b.sample_bytes);
	s->kind = 7;
	/* out is host memory: never reached, the slot is refused first */
	assert_int_equal(gm_loader_finish_device(l, &fake, out, b.size * ob, NULL, 0), -EBADMSG);
	const char *m = gm_loader_errmsg(l);
	assert_non_null(strstr(m, "gm_loader_finish_device: batch 0: slot 3: "));
	assert_non_null(strstr(m, "kind 7"));
	s->kind = GM_COEF_KIND_COEFS;
	s->bytes = (uint32_t)b.sample_bytes + 1; /* past its slot */
	assert_int_equal(gm_loader_finish_device(l, &fake, out, b.size * ob, NULL, 0), -EBADMSG);
	assert_non_null(strstr(gm_loader_errmsg(l), "slot 3: "));
	s->kind = GM_COEF_KIND_PIXELS; /* a fallback slot too short for its sample */
	s->bytes = (uint32_t)(GM_COEF_HDR_BYTES + ob - 1);
	assert_int_equal(gm_loader_finish_device(l, &fake, out, b.size * ob, NULL, 0), -EBADMSG);
	assert_non_null(strstr(gm_loader_errmsg(l), "slot 3: "));
	assert_non_null(strstr(gm_loader_errmsg(l), "sample slot"));
	free(copy);
	gm_loader_close(l);
}

static void test_a_size_or_batch_unlike_the_loaders_is_refused(void **state)
{
	(void)state;
	struct gm_batch b, fake;
	uint8_t out[64];
	struct gm_loader *l = open_first(true, GM_OUT_U8_HWC, &b);
	size_t ob = out_bytes(l);
	assert_int_equal(gm_loader_finish_device(l, &b, out, b.size * ob - 1, NULL, 0), -EINVAL);
	assert_non_null(strstr(gm_loader_errmsg(l), "gm_loader_finish_device: out must hold the "
						    "batch's 8 samples of 3072 bytes (24576), "
						    "not 24575"));
	assert_int_equal(gm_loader_finish_device(l, &b, NULL, b.size * ob, NULL, 0), -EINVAL);
	fake = b;
	fake.sample_bytes = ob; /* finished samples, not this loader's slots */
	assert_int_equal(gm_loader_finish_device(l, &fake, out, b.size * ob, NULL, 0), -EINVAL);
	assert_non_null(strstr(gm_loader_errmsg(l), "not this loader's"));
	assert_int_equal(gm_loader_finish_device(l, &b, out, b.size * ob, NULL, 6), -EINVAL);
	assert_non_null(strstr(gm_loader_errmsg(l), "flags 0x6"));
	gm_loader_close(l);

	l = open_first(false, GM_OUT_U8_HWC, &b);
	assert_int_equal(gm_loader_finish_device(l, &b, out, b.size * ob, NULL, 0), -EINVAL);
	assert_non_null(strstr(gm_loader_errmsg(l), "opened without gpu_decode"));
	gm_loader_close(l);
}

static void test_without_the_plugin_the_reason_says_not_built(void **state)
{
	(void)state;
	char why[512];
	struct gm_batch b;
	uint8_t out[64];
	setenv(GM_COEF_CUDA_PLUGIN_ENV, "/nonexistent/libgoldminer-cuda.so", 1);
	assert_false(gm_loader_device_finish_ready(why, sizeof(why)));
	assert_non_null(strstr(why, "libgoldminer-cuda.so not built: no "
				    "/nonexistent/libgoldminer-cuda.so"));
	assert_non_null(strstr(why, "nvcc"));
	struct gm_loader *l = open_first(true, GM_OUT_U8_HWC, &b);
	size_t ob = out_bytes(l);
	assert_int_equal(gm_loader_finish_device(l, &b, out, b.size * ob, NULL, 0), -ENODEV);
	assert_non_null(strstr(gm_loader_errmsg(l), "libgoldminer-cuda.so not built"));
	gm_loader_close(l);
	unsetenv(GM_COEF_CUDA_PLUGIN_ENV);
}

/* Every batch of an epoch finished on the device and read back = the host path's. */
static void same_bytes_on_the_device(enum gm_out_type type)
{
	struct gm_batch b;
	struct gm_loader *l = open_first(true, type, &b);
	size_t ob = out_bytes(l), len = (size_t)b.size * ob;
	uint8_t *host = malloc(len), *back = malloc(len);
	void *d = NULL;
	assert_non_null(host);
	assert_non_null(back);
	assert_int_equal(gm_cuda_malloc(&d, len), 0);
	int rc = 0, batches = 0;
	for (; rc == 0; rc = gm_loader_next(l, &b), batches++) {
		size_t n = (size_t)b.size * ob;
		assert_int_equal(gm_loader_finish(l, &b, host, n), 0);
		memset(back, 0xa5, n);
		if (gm_loader_finish_device(l, &b, d, n, NULL, GM_LOADER_FINISH_SYNC))
			fail_msg("%s", gm_loader_errmsg(l));
		assert_int_equal(gm_cuda_memcpy_d2h(back, d, n), 0);
		assert_memory_equal(host, back, n);
	}
	assert_true(batches >= 3);
	gm_cuda_free(d);
	free(host);
	free(back);
	gm_loader_close(l);
}

static void test_with_the_plugin_a_device_gives_the_host_paths_bytes_or_none_is_said(void **state)
{
	(void)state;
	char why[512];
	if (access(plugin, R_OK))
		skip(); /* CUDA_KERNELS=0, or no nvcc: the test above covers the reason */
	setenv(GM_COEF_CUDA_PLUGIN_ENV, plugin, 1);
	if (!gm_loader_device_finish_ready(why, sizeof(why))) {
		/* the plugin's file is there: what is missing is the device */
		assert_non_null(strstr(why, "no CUDA device: "));
		struct gm_batch b;
		uint8_t out[64];
		struct gm_loader *l = open_first(true, GM_OUT_U8_HWC, &b);
		assert_int_equal(
		    gm_loader_finish_device(l, &b, out, b.size * out_bytes(l), NULL, 0), -ENODEV);
		assert_non_null(strstr(gm_loader_errmsg(l), "no CUDA device: "));
		gm_loader_close(l);
	} else {
		same_bytes_on_the_device(GM_OUT_U8_HWC);
		same_bytes_on_the_device(GM_OUT_F32_CHW);
		same_bytes_on_the_device(GM_OUT_F16_CHW);
	}
	unsetenv(GM_COEF_CUDA_PLUGIN_ENV);
}

static void test_the_plugin_loads_and_its_table_resolves(void **state)
{
	(void)state;
	if (access(plugin, R_OK))
		skip();
	void *h = dlopen(plugin, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		fail_msg("dlopen %s: %s", plugin, dlerror());
	const struct gm_coef_cuda_ops *(*get)(void) =
	    (const struct gm_coef_cuda_ops *(*)(void))dlsym(h, "gm_coef_cuda_plugin");
	assert_non_null(get);
	const struct gm_coef_cuda_ops *o = get();
	assert_non_null(o);
	assert_int_equal(o->abi, GM_COEF_CUDA_ABI);
	assert_string_equal(o->version, gm_version());
	assert_true(o->create && o->destroy && o->run && o->released && o->done && o->device_of);
	/* its only export: the kernels' functions are reached through the table */
	assert_null(dlsym(h, "gm_coef_cuda_finish"));
	dlclose(h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_a_slot_neither_coefs_nor_pixels_is_refused_before_the_device),
	    cmocka_unit_test(test_a_size_or_batch_unlike_the_loaders_is_refused),
	    cmocka_unit_test(test_without_the_plugin_the_reason_says_not_built),
	    cmocka_unit_test(
		test_with_the_plugin_a_device_gives_the_host_paths_bytes_or_none_is_said),
	    cmocka_unit_test(test_the_plugin_loads_and_its_table_resolves),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
