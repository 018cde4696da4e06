/*
 * testutil.h - small helpers shared by the test binaries: a scratch directory
 * under /tmp and its removal. Header-only (static functions) so each test binary
 * stays one file plus the library.
 */
#ifndef GOLDMINER_TESTUTIL_H
#define GOLDMINER_TESTUTIL_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "goldminer/checksum.h"
#include "goldminer/loader.h"
#include "goldminer/synth.h"

static int gm_test_rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(p);
}

/* Remove a directory tree (no symlinks followed). */
static inline void gm_test_rm_tree(const char *dir)
{
	nftw(dir, gm_test_rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

/* mkdtemp("/tmp/<prefix>-XXXXXX") into buf; 0 or -1. */
/* root/rel := text, making the directories on the way (a fake /proc or /sys tree).
 * 0, or -1 when the file cannot be written. */
static inline int gm_test_put(const char *root, const char *rel, const char *text)
{
	char p[1024];
	snprintf(p, sizeof(p), "%s/%s", root, rel);
	for (char *s = p + strlen(root) + 1; (s = strchr(s, '/')); s++) {
		*s = 0;
		mkdir(p, 0700);
		*s = '/';
	}
	FILE *f = fopen(p, "w");
	if (!f)
		return -1;
	fputs(text, f);
	return fclose(f) ? -1 : 0;
}

static inline int gm_test_tmpdir(char *buf, size_t len, const char *prefix)
{
	snprintf(buf, len, "/tmp/%s-XXXXXX", prefix);
	return mkdtemp(buf) ? 0 : -1;
}

/* Hash of one delivered batch: its pixels, then its labels and sample ids (what the
 * loader, lease, chaos and node tests compare between runs). */
static inline uint64_t gm_test_batch_hash(const struct gm_batch *b)
{
	uint64_t h = gm_checksum64(GM_CHECKSUM_INIT, b->data, (size_t)b->size * b->sample_bytes);
	h = gm_checksum64(h, b->labels, b->size * sizeof(int32_t));
	return gm_checksum64(h, b->sample_ids, b->size * sizeof(uint32_t));
}

/* A synthetic JPEG (gm_synth_jpeg_mem, quality 90) in a malloc'd buffer, its length
 * in *len; NULL if it could not be made (what test_jpeg and test_huff decode). */
static inline uint8_t *gm_test_jpeg(uint32_t w, uint32_t h, uint64_t seed, unsigned flags,
				    size_t *len)
{
	uint8_t *buf = NULL;
	if (gm_synth_jpeg_mem(w, h, seed, flags, 90, &buf, len)) {
		free(buf);
		return NULL;
	}
	return buf;
}

/* The DRI interval of the JPEG in b[0..n), or -1 without one. */
static inline int gm_test_jpeg_dri(const uint8_t *b, size_t n)
{
	for (size_t i = 2; i + 5 < n; i++)
		if (b[i] == 0xff && b[i + 1] == 0xdd)
			return b[i + 4] << 8 | b[i + 5];
	return -1;
}

#endif
