/*
 * fuzz_pipeline.c - fuzz target: arbitrary text as a pipeline spec through
 * gm_pipeline_parse. Checks: an error has a message; an accepted pipeline
 * describes itself, and its canonical text parses again to the same canonical
 * text (round trip).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "goldminer/pipeline.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[512];
	char *spec = malloc(size + 1);
	if (!spec)
		return 0;
	memcpy(spec, data, size);
	spec[size] = 0;
	struct gm_pipeline *p = NULL;
	int rc = gm_pipeline_parse(spec, &p, err, sizeof(err));
	free(spec);
	if (rc) {
		if (p)
			abort();
		gm_fuzz_check_msg(err, sizeof(err));
		return 0;
	}
	FILE *null = fopen("/dev/null", "w");
	if (null) {
		gm_pipeline_describe(p, null);
		gm_pipeline_describe_json(p, null);
		fclose(null);
	}
	if (gm_pipeline_n_worker_ops(p) + gm_pipeline_n_consumer_ops(p) != gm_pipeline_n_ops(p))
		abort();
	for (size_t i = 0; i < gm_pipeline_n_ops(p); i++)
		if (!gm_pipeline_op_name(p, i) || !gm_pipeline_op_text(p, i))
			abort();
	char *canon = strdup(gm_pipeline_canonical(p));
	struct gm_pipeline *q = NULL;
	if (!canon || gm_pipeline_parse(canon, &q, err, sizeof(err)) != 0)
		abort(); /* the canonical form of an accepted spec must be accepted */
	if (strcmp(canon, gm_pipeline_canonical(q)) != 0)
		abort();
	free(canon);
	gm_pipeline_free(q);
	gm_pipeline_free(p);
	return 0;
}
