/*
 * aug_bench.c - per-sample augment and decode time, one process, one core.
 *
 * Usage: aug_bench ROOT [N [PASSES [SLOTS [OUT]]]]
 *   ROOT: an ImageFolder tree; the first N images (default 300) are read into
 *   memory, about N/10 from each class directory, then decoded and augmented
 *   (gm_aug_sample, the default train spec at 224) PASSES times (default 5) for
 *   each output type, with the same crops every pass. The outputs go round SLOTS
 *   sample-sized places (default 64: a batch of the ring, 38 MB of float32 at
 *   224, more than the caches hold; 1 keeps the output hot). OUT: uint8, float32
 *   or float16 runs that type only (for perf), default all three.
 * Prints per output type the augment and decode time a sample, in us: the sum
 * over images of each image's minimum over the passes (what another process on
 * the core took is filtered out), and the mean; and a hash of the outputs, which
 * any two builds must share.
 *
 * Why: the augment stage of `goldminer bench` is wall time of two workers on a
 * shared machine; this isolates the kernels (compare builds in one session,
 * alternating). It does not read files in the timed loop or use the ring.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "goldminer/aug.h"

struct set {
	char **data;
	size_t *len;
	int n;
};

/* Read the file at path into s as its next image. 0, or -1 when it does not read. */
static int add_file(struct set *s, const char *path)
{
	FILE *f = fopen(path, "rb");
	long l = -1;
	if (!f)
		return -1;
	if (fseek(f, 0, SEEK_END) == 0)
		l = ftell(f);
	if (l <= 0 || fseek(f, 0, SEEK_SET) != 0 || !(s->data[s->n] = malloc((size_t)l))) {
		fclose(f);
		return -1;
	}
	s->len[s->n] = fread(s->data[s->n], 1, (size_t)l, f);
	fclose(f);
	s->n++;
	return 0;
}

/* The first max images of root, about max/10 from each class directory. */
static int load(struct set *s, const char *root, int max)
{
	DIR *d = opendir(root);
	struct dirent *e;
	char p[4096], q[8192];
	if (!d) {
		fprintf(stderr, "aug_bench: %s: cannot open the directory\n", root);
		return -1;
	}
	s->data = calloc((size_t)max, sizeof(*s->data));
	s->len = calloc((size_t)max, sizeof(*s->len));
	s->n = 0;
	while (s->data && s->len && s->n < max && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", root, e->d_name);
		DIR *c = opendir(p);
		struct dirent *f;
		for (int k = 0; c && s->n < max && k <= max / 10 && (f = readdir(c));) {
			if (f->d_name[0] == '.')
				continue;
			snprintf(q, sizeof(q), "%s/%s", p, f->d_name);
			k += add_file(s, q) == 0;
		}
		if (c)
			closedir(c);
	}
	closedir(d);
	return s->n > 0 ? 0 : -1;
}

/* One output type: PASSES over the set; prints its line. */
static int run(const struct set *s, enum gm_out_type out, int passes, size_t slots)
{
	static const char *names[] = {"uint8", "float32", "float16"};
	struct gm_aug_spec sp;
	struct gm_aug *a;
	gm_aug_spec_default(&sp);
	sp.out = out;
	if (gm_aug_create(&a, &sp))
		return -1;
	size_t sb = gm_aug_out_bytes(&sp);
	uint8_t *buf = mmap(NULL, sb * slots, PROT_READ | PROT_WRITE,
			    MAP_SHARED | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	uint64_t *mina = malloc(sizeof(uint64_t) * (size_t)s->n);
	uint64_t *mind = malloc(sizeof(uint64_t) * (size_t)s->n);
	uint64_t cnt = 0, h = 0, suma = 0, sumd = 0;
	if (buf == MAP_FAILED || !mina || !mind) {
		if (buf != MAP_FAILED)
			munmap(buf, sb * slots);
		free(mina);
		free(mind);
		gm_aug_destroy(a);
		return -1;
	}
	for (int i = 0; i < s->n; i++)
		mina[i] = mind[i] = UINT64_MAX;
	for (int p = 0; p < passes; p++)
		for (int i = 0; i < s->n; i++) {
			uint8_t *o = buf + (cnt % slots) * sb;
			struct gm_aug_times t = {0};
			if (gm_aug_sample(a, s->data[i], s->len[i], 1, 0, (uint64_t)i, o, &t))
				continue;
			cnt++;
			h = h * 31 + o[sb / 2] + o[sb - 1];
			mina[i] = t.augment_ns < mina[i] ? t.augment_ns : mina[i];
			mind[i] = t.decode_ns < mind[i] ? t.decode_ns : mind[i];
			suma += t.augment_ns;
			sumd += t.decode_ns;
		}
	double ma = 0, md = 0;
	int k = 0;
	for (int i = 0; i < s->n; i++)
		if (mina[i] != UINT64_MAX) {
			ma += (double)mina[i];
			md += (double)mind[i];
			k++;
		}
	printf("%-8s augment min %.1f mean %.1f us/img, decode min %.1f mean %.1f us/img"
	       " (%llu samples, hash %016llx)\n",
	       names[out], ma / 1e3 / k, (double)suma / 1e3 / (double)cnt, md / 1e3 / k,
	       (double)sumd / 1e3 / (double)cnt, (unsigned long long)cnt, (unsigned long long)h);
	free(mina);
	free(mind);
	munmap(buf, sb * slots);
	gm_aug_destroy(a);
	return 0;
}

int main(int argc, char **argv)
{
	struct set s;
	if (argc < 2) {
		fprintf(stderr, "usage: aug_bench ROOT [N [PASSES [SLOTS [OUT]]]]\n");
		return 2;
	}
	int n = argc > 2 ? atoi(argv[2]) : 300, passes = argc > 3 ? atoi(argv[3]) : 5;
	long slots = argc > 4 ? atol(argv[4]) : 64;
	if (n < 1 || passes < 1 || slots < 1) {
		fprintf(stderr, "aug_bench: N, PASSES and SLOTS must be positive\n");
		return 2;
	}
	static const char *outs[] = {"uint8", "float32", "float16"};
	int only = -1;
	for (int o = 0; argc > 5 && o < 3; o++)
		only = strcmp(argv[5], outs[o]) == 0 ? o : only;
	if (argc > 5 && only < 0) {
		fprintf(stderr, "aug_bench: OUT must be uint8, float32 or float16\n");
		return 2;
	}
	if (load(&s, argv[1], n))
		return 1;
	for (int out = 0; out < 3; out++)
		if ((only < 0 || out == only) &&
		    run(&s, (enum gm_out_type)out, passes, (size_t)slots)) {
			fprintf(stderr, "aug_bench: out of memory\n");
			return 1;
		}
	return 0;
}
