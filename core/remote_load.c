/*
 * remote_load.c - find and load the remote-workers plugin (remote.h) for the
 * node agent. The plugin carries UCX; the library and the trainers never link it.
 */

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "goldminer/remote.h"
#include "goldminer/util.h"
#include "goldminer/version.h"

static void *try_open(const char *path, char *err, size_t errlen)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h && err[0] == '\0')
		gm_errf(err, errlen, "%s", dlerror());
	return h;
}

const struct gm_remote_ops *gm_remote_load(char *err, size_t errlen)
{
	char exe[PATH_MAX], path[PATH_MAX + 64];
	const char *env = getenv(GM_REMOTE_PLUGIN_ENV);
	void *h = NULL;

	err[0] = '\0';
	if (env && *env) {
		h = try_open(env, err, errlen);
	} else {
		ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		if (n > 0) {
			exe[n] = '\0';
			char *slash = strrchr(exe, '/');
			if (slash)
				*slash = '\0';
			/* beside the program (the build tree), then ../lib (installed) */
			snprintf(path, sizeof(path), "%s/%s", exe, GM_REMOTE_PLUGIN);
			h = try_open(path, err, errlen);
			if (!h) {
				snprintf(path, sizeof(path), "%s/../lib/%s", exe, GM_REMOTE_PLUGIN);
				h = try_open(path, err, errlen);
			}
		}
		if (!h) /* the loader's own search: LD_LIBRARY_PATH, ld.so.cache */
			h = try_open(GM_REMOTE_PLUGIN, err, errlen);
	}
	if (!h) {
		char why[512];
		snprintf(why, sizeof(why), "%s", err);
		gm_errf(err, errlen,
			"remote workers need %s (built when UCX is installed: make deps && make), "
			"or $%s naming it: %s",
			GM_REMOTE_PLUGIN, GM_REMOTE_PLUGIN_ENV, why);
		return NULL;
	}
	const struct gm_remote_ops *(*get)(void) =
	    (const struct gm_remote_ops *(*)(void))dlsym(h, "gm_remote_plugin");
	const struct gm_remote_ops *ops = get ? get() : NULL;
	if (!ops || ops->abi != GM_REMOTE_ABI || strcmp(ops->version, gm_version())) {
		gm_errf(err, errlen, "%s is not the plugin of goldminer %s (abi %u, version %s)",
			GM_REMOTE_PLUGIN, gm_version(), ops ? ops->abi : 0,
			ops ? ops->version : "?");
		dlclose(h);
		return NULL;
	}
	return ops; /* stays loaded for the life of the process */
}
