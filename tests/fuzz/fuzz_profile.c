/*
 * fuzz_profile.c - fuzz target: arbitrary bytes as a profile TSV through
 * gm_profile_load. Checks: 0 with positive finite rates and terminated strings,
 * or an error naming the file.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "goldminer/profile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[64], err[512];
	static struct gm_profile p;
	int fd = gm_fuzz_memfile(data, size, path, sizeof(path));
	if (fd < 0)
		return 0;
	int rc = gm_profile_load(&p, path, err, sizeof(err));
	close(fd);
	if (rc) {
		gm_fuzz_check_msg(err, sizeof(err));
		if (!strstr(err, path))
			abort();
		return 0;
	}
	if (p.n < 1 || p.n > GM_PROFILE_MAX)
		abort();
	for (int i = 0; i < p.n; i++) {
		const struct gm_profile_class *c = &p.c[i];
		if (!(c->gpu_rate > 0) || !isfinite(c->gpu_rate) || !(c->cpu_rate > 0) ||
		    !isfinite(c->cpu_rate) || !(c->share >= 0) || !isfinite(c->share) ||
		    !memchr(c->name, 0, sizeof(c->name)) ||
		    !memchr(c->gpu_source, 0, sizeof(c->gpu_source)) ||
		    !memchr(c->cpu_source, 0, sizeof(c->cpu_source)))
			abort();
	}
	return 0;
}
