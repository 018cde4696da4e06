/*
 * replay.c - run a fuzz target over files without libFuzzer (make test).
 *
 *   fuzz_X FILE|DIR...      each file (or each file in DIR) goes through
 *                           LLVMFuzzerTestOneInput once; prints TAP.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int n_run;

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		printf("not ok %d - %s: cannot open\n", ++n_run, path);
		return 1;
	}
	uint8_t *buf = NULL;
	size_t len = 0, cap = 0;
	for (;;) {
		if (len == cap) {
			cap = cap ? cap * 2 : 4096;
			uint8_t *nb = realloc(buf, cap);
			if (!nb) {
				free(buf);
				fclose(f);
				return 1;
			}
			buf = nb;
		}
		size_t r = fread(buf + len, 1, cap - len, f);
		if (!r)
			break;
		len += r;
	}
	fclose(f);
	LLVMFuzzerTestOneInput(buf, len); /* a crash or sanitizer report is the failure */
	free(buf);
	printf("ok %d - %s\n", ++n_run, path);
	return 0;
}

static int cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int run_path(const char *path)
{
	struct stat st;
	if (stat(path, &st) != 0) {
		printf("not ok %d - %s: missing\n", ++n_run, path);
		return 1;
	}
	if (!S_ISDIR(st.st_mode))
		return run_file(path);
	DIR *d = opendir(path);
	if (!d)
		return 1;
	char **names = NULL;
	size_t n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char **nn = realloc(names, (n + 1) * sizeof(*names));
		if (!nn || asprintf(&nn[n], "%s/%s", path, e->d_name) < 0)
			abort();
		names = nn;
		n++;
	}
	closedir(d);
	qsort(names, n, sizeof(*names), cmp);
	int rc = 0;
	for (size_t i = 0; i < n; i++) {
		rc |= run_file(names[i]);
		free(names[i]);
	}
	free(names);
	return rc;
}

int main(int argc, char **argv)
{
	int rc = 0;
	for (int i = 1; i < argc; i++)
		rc |= run_path(argv[i]);
	printf("1..%d\n", n_run);
	return rc;
}
