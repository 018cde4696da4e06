/*
 * gen-jpeg-seeds.c - writes the JPEG seed corpus for fuzz_jpeg into DIR: small
 * synthetic images of every colour layout synth can make (gray, 4:2:0, 4:2:2,
 * 4:4:4, CMYK, progressive) plus the bad-file kinds. Run by `make fuzz-seeds`;
 * the output is committed in tests/fuzz/corpus/jpeg/.
 */
#include <stdio.h>
#include <stdlib.h>

#include "goldminer/synth.h"

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: gen-jpeg-seeds DIR\n");
		return 2;
	}
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
