/*
 * gen-jpeg-seeds.c - writes seed corpora for the JPEG fuzz targets into DIR.
 *   gen-jpeg-seeds DIR        fuzz_jpeg: small synthetic images of every colour
 *                             layout synth can make (gray, 4:2:0, 4:2:2, 4:4:4,
 *                             CMYK, progressive) plus the bad-file kinds
 *   gen-jpeg-seeds DIR huff   fuzz_huff: baseline images of those layouts at
 *                             qualities 30..100 (one big enough for libjpeg's fast
 *                             path), and restart-marked copies (1 and 2 MCUs)
 * Run by `make fuzz-seeds`; the output is committed in tests/fuzz/corpus/jpeg/ and
 * tests/fuzz/corpus/huff/.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "goldminer/jpeg.h"
#include "goldminer/synth.h"

static int write_file(const char *path, const uint8_t *b, size_t n)
{
	FILE *f = fopen(path, "wb");
	if (!f)
		return 1;
	int rc = fwrite(b, 1, n, f) != n;
	return fclose(f) != 0 || rc;
}

/* fuzz_huff's seeds: baseline files and their restart-marked transcodes. */
static int huff_seeds(const char *dir)
{
	static const struct {
		const char *name;
		unsigned w, h, flags;
		int quality;
	} s[] = {
	    {"420_q90", 48, 32, 0, 90},
	    {"420_q100", 40, 24, 0, 100},
	    {"gray_q30", 33, 17, GM_SYNTH_GRAY, 30},
	    {"422_q75", 24, 40, GM_SYNTH_422, 75},
	    {"444_q100", 17, 9, GM_SYNTH_444, 100},
	    {"cmyk_q90", 20, 20, GM_SYNTH_CMYK, 90},
	    {"1x1", 1, 1, 0, 90},
	    {"420_big", 160, 120, 0, 95},
	};
	static const uint32_t intervals[] = {1, 2};
	char path[4096], err[256];
	int rc = 0;
	for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++) {
		uint8_t *b = NULL, *t = NULL;
		size_t n, tn;
		if (gm_synth_jpeg_mem(s[i].w, s[i].h, 40 + i, s[i].flags, s[i].quality, &b, &n))
			return 1;
		snprintf(path, sizeof(path), "%s/%s", dir, s[i].name);
		rc |= write_file(path, b, n);
		for (size_t k = 0; k < sizeof(intervals) / sizeof(intervals[0]); k++) {
			if (gm_jpeg_restart_transcode(b, n, intervals[k], 0, &t, &tn, err,
						      sizeof(err))) {
				fprintf(stderr, "gen-jpeg-seeds: %s\n", err);
				rc = 1;
				continue;
			}
			snprintf(path, sizeof(path), "%s/%s_r%u", dir, s[i].name, intervals[k]);
			rc |= write_file(path, t, tn);
			free(t);
		}
		free(b);
	}
	return rc;
}

int main(int argc, char **argv)
{
	if (argc != 2 && !(argc == 3 && !strcmp(argv[2], "huff"))) {
		fprintf(stderr, "usage: gen-jpeg-seeds DIR [huff]\n");
		return 2;
	}
	if (argc == 3)
		return huff_seeds(argv[1]);
	static const struct {
		const char *name;
		unsigned w, h, flags;
	} s[] = {
	    {"420.jpg", 40, 30, 0},
	    {"gray.jpg", 33, 17, GM_SYNTH_GRAY},
	    {"422.jpg", 24, 40, GM_SYNTH_422},
	    {"444.jpg", 17, 9, GM_SYNTH_444},
	    {"cmyk.jpg", 20, 20, GM_SYNTH_CMYK},
	    {"prog.jpg", 48, 32, GM_SYNTH_PROGRESSIVE},
	    {"1x1.jpg", 1, 1, 0},
	};
	char path[4096];
	int rc = 0;
	for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", argv[1], s[i].name);
		rc |= gm_synth_write_jpeg(path, s[i].w, s[i].h, 11 + i, s[i].flags) != 0;
	}
	static const char *bad[] = {"bad-empty", "bad-truncated.jpg", "bad-corrupt.jpg",
				    "bad-notjpeg.png", "bad-bomb.jpg"};
	for (int k = 0; k < 5; k++) {
		snprintf(path, sizeof(path), "%s/%s", argv[1], bad[k]);
		rc |= gm_synth_write_bad(path, (enum gm_synth_bad)k, 5) != 0;
	}
	return rc;
}
