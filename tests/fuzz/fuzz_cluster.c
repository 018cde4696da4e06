/*
 * fuzz_cluster.c - fuzz target: gm_cluster_load on a spec string (first byte even)
 * or on a node-list file (first byte odd). Checks: 0 with consistent totals, or an
 * error with a message.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "goldminer/cluster.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[64], err[512];
	struct gm_cluster *c = NULL;
	int rc, fd = -1;

	if (size < 1)
		return 0;
	if (data[0] % 2 == 0) {
		char *spec = malloc(size);
		if (!spec)
			return 0;
		memcpy(spec, data + 1, size - 1);
		spec[size - 1] = 0;
		if (!spec[0] || strchr(spec, '/')) { /* a path: not what this branch fuzzes */
			free(spec);
			return 0;
		}
		rc = gm_cluster_load(&c, spec, err, sizeof(err));
		free(spec);
	} else {
		fd = gm_fuzz_memfile(data + 1, size - 1, path, sizeof(path));
		if (fd < 0)
			return 0;
		rc = gm_cluster_load(&c, path, err, sizeof(err));
		close(fd);
	}
	if (rc) {
		if (c)
			abort();
		gm_fuzz_check_msg(err, sizeof(err));
		return 0;
	}
	uint64_t g = 0, p = 0;
	uint32_t mx = 0;
	for (uint32_t i = 0; i < c->n; i++) {
		g += c->gpus[i];
		p += c->cpus[i];
		mx = c->gpus[i] > mx ? c->gpus[i] : mx;
	}
	if (c->n == 0 || g != c->total_gpus || p != c->total_cpus || mx != c->max_gpus)
		abort();
	gm_cluster_destroy(c);
	return 0;
}
