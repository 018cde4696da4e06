/*
 * fuzz_trace.c - fuzz target: arbitrary bytes as a trace file (openb, Philly or the
 * project's TSV, picked by the header) through gm_trace_load. Checks: 0 with a
 * sane, sorted trace, or an error whose message names the file.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "goldminer/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[64], err[512];
	int fd = gm_fuzz_memfile(data, size, path, sizeof(path));
	if (fd < 0)
		return 0;
	struct gm_trace *t = NULL;
	int rc = gm_trace_load(&t, path, err, sizeof(err));
	close(fd);
	if (rc) {
		if (t)
			abort();
		gm_fuzz_check_msg(err, sizeof(err));
		if (!strstr(err, path))
			abort(); /* an error names the file */
		return 0;
	}
	for (size_t i = 0; i < t->n; i++) {
		const struct gm_job *j = &t->jobs[i];
		if (!isfinite(j->submit) || !isfinite(j->duration) || j->duration <= 0 ||
		    j->gpus < 1 || !(j->vcpu >= 0) || (i && j->submit < t->jobs[i - 1].submit))
			abort();
	}
	gm_trace_destroy(t);
	return 0;
}
