/*
 * fuzz_shard.c - fuzz target: arbitrary bytes as a WebDataset tar shard through
 * gm_dataset_open (tar headers, GNU long names, pax records, key grouping, .cls
 * labels). Checks: 0 with every sample inside the file and a label below the class
 * count, or an error naming the shard.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "goldminer/dataset.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char path[64];
	char err[1024];
	if (!path[0])
		snprintf(path, sizeof(path), "/tmp/gm-fuzz-shard-%d.tar", (int)getpid());
	FILE *f = fopen(path, "wb");
	if (!f)
		return 0;
	size_t w = fwrite(data, 1, size, f);
	fclose(f);
	if (w != size)
		return 0;
	struct gm_dataset *d = NULL;
	int rc = gm_dataset_open(&d, path, err, sizeof(err));
	if (rc) {
		if (d || (rc != -EBADMSG && rc != -ENODATA && rc != -ENOMEM))
			abort();
		gm_fuzz_check_msg(err, sizeof(err));
		if (!strstr(err, path))
			abort();
		unlink(path);
		return 0;
	}
	if (!gm_dataset_sharded(d) || gm_dataset_count(d) == 0)
		abort();
	for (uint32_t i = 0; i < gm_dataset_count(d); i++) {
		uint64_t off = gm_dataset_offset(d, i), len = gm_dataset_file_size(d, i);
		if (off > size || len > size - off || off % 512 ||
		    gm_dataset_label(d, i) >= gm_dataset_num_classes(d) ||
		    strncmp(gm_dataset_name(d, i), path, strlen(path)))
			abort();
	}
	gm_dataset_close(d);
	unlink(path);
	return 0;
}
