/*
 * pack.c - WebDataset tar shards from an ImageFolder tree (see pack.h).
 *
 * Why: a dataset of millions of small JPEGs costs an open/close per sample and a
 * metadata lookup per file on network file systems; a few hundred shards read at
 * offsets do not. `goldminer pack` converts a tree once; the loader then takes the
 * shard directory as its root and delivers the same samples, labels and ids as
 * from the tree (the order is the tree's), so batches are byte-identical.
 *
 * The tar writer is a few lines (ustar headers, GNU long names), written here
 * rather than through libarchive: what is written must match what dataset.c's
 * reader indexes, and the format is small and fixed.
 */
#include "goldminer/pack.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "goldminer/cli.h"
#include "goldminer/dataset.h"
#include "goldminer/util.h"

#define TAR_MAX_NAME 4095u

static int put_header(FILE *f, const char *name, size_t namelen, char type, uint64_t size)
{
	unsigned char h[512] = {0};
	unsigned sum = 0;

	memcpy(h, name, namelen < 100 ? namelen : 100);
	memcpy(h + 100, "0000644", 8);
	memcpy(h + 108, "0000000", 8);
	memcpy(h + 116, "0000000", 8);
	snprintf((char *)h + 124, 12, "%011llo", (unsigned long long)size);
	memcpy(h + 136, "00000000000", 12);
	memset(h + 148, ' ', 8);
	h[156] = (unsigned char)type;
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	for (int k = 0; k < 512; k++)
		sum += h[k];
	snprintf((char *)h + 148, 8, "%06o", sum);
	return fwrite(h, 1, 512, f) == 512 ? 0 : -EIO;
}

static int put_data(FILE *f, const void *data, size_t len)
{
	static const unsigned char zeros[512];
	size_t pad = (512 - len % 512) % 512;
	if (fwrite(data, 1, len, f) != len || fwrite(zeros, 1, pad, f) != pad)
		return -EIO;
	return 0;
}

int gm_tar_write_member(FILE *f, const char *name, const void *data, size_t len)
{
	size_t nl = strlen(name);
	int ret;

	if (nl > TAR_MAX_NAME)
		return -ENAMETOOLONG;
	if (nl >= 100) {
		/* GNU long name: a 'L' member holding the name, then the header */
		if ((ret = put_header(f, "././@LongLink", 13, 'L', nl + 1)) ||
		    (ret = put_data(f, name, nl + 1)))
			return ret;
	}
	if ((ret = put_header(f, name, nl, '0', len)))
		return ret;
	return put_data(f, data, len);
}

int gm_tar_write_end(FILE *f)
{
	static const unsigned char zeros[1024];
	return fwrite(zeros, 1, sizeof(zeros), f) == sizeof(zeros) ? 0 : -EIO;
}

/* Whole file into *buf (grown to its size + 1). 0 or -errno (-EAGAIN: it grew). */
static int slurp(const char *path, char **buf, size_t *cap, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	int ret = 0;
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) != 0) {
		ret = -errno;
		goto out;
	}
	if ((ret = gm_grow_scratch((void **)buf, cap, (size_t)st.st_size + 1, 1 << 16)))
		goto out;
	*len = 0;
	for (;;) {
		if (*len == *cap) {
			ret = -EAGAIN; /* it grew since the fstat: being written to? */
			goto out;
		}
		ssize_t r = read(fd, *buf + *len, *cap - *len);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			ret = -errno;
			goto out;
		}
		if (r == 0)
			break;
		*len += (size_t)r;
	}
out:
	close(fd);
	return ret;
}

struct gm_shard_writer {
	char *dir, *path; /* path: the shard being written, for messages */
	uint32_t per_shard, in_shard, shards;
	bool exclusive;
	FILE *f;
	char *name;
};

int gm_shard_writer_open(struct gm_shard_writer **out, const char *dir, uint32_t per_shard,
			 bool exclusive)
{
	struct gm_shard_writer *w = calloc(1, sizeof(*w));
	*out = NULL;
	if (!w)
		return -ENOMEM;
	w->per_shard = per_shard ? per_shard : 1;
	w->exclusive = exclusive;
	w->dir = strdup(dir);
	w->path = malloc(strlen(dir) + 32);
	w->name = malloc(TAR_MAX_NAME + 32);
	if (!w->dir || !w->path || !w->name) {
		gm_shard_writer_close(w);
		return -ENOMEM;
	}
	snprintf(w->path, strlen(dir) + 32, "%s", dir);
	*out = w;
	return 0;
}

/* End the shard being written (two zero blocks) and close it. 0 or -EIO. */
static int end_shard(struct gm_shard_writer *w)
{
	int ret = gm_tar_write_end(w->f);
	if (fclose(w->f) && !ret)
		ret = -EIO;
	w->f = NULL;
	return ret;
}

int gm_shard_writer_add(struct gm_shard_writer *w, const char *key, const char *ext,
			const void *data, size_t len, uint32_t label)
{
	int ret;
	if (strlen(key) + strlen(ext) + 2 > TAR_MAX_NAME)
		return -ENAMETOOLONG;
	if (w->f && w->in_shard == w->per_shard && (ret = end_shard(w)))
		return ret;
	if (!w->f) {
		sprintf(w->path, "%s/shard-%06u.tar", w->dir, w->shards);
		if (!(w->f = fopen(w->path, w->exclusive ? "wbx" : "wb")))
			return -errno;
		w->shards++;
		w->in_shard = 0;
	}
	char cls[16];
	int cl = snprintf(cls, sizeof(cls), "%u\n", label);
	sprintf(w->name, "%s.%s", key, ext);
	if ((ret = gm_tar_write_member(w->f, w->name, data, len)))
		return ret;
	sprintf(w->name, "%s.cls", key);
	if ((ret = gm_tar_write_member(w->f, w->name, cls, (size_t)cl)))
		return ret;
	w->in_shard++;
	return 0;
}

const char *gm_shard_writer_path(const struct gm_shard_writer *w)
{
	return w->path;
}

uint32_t gm_shard_writer_shards(const struct gm_shard_writer *w)
{
	return w->shards;
}

int gm_shard_writer_close(struct gm_shard_writer *w)
{
	int ret = 0;
	if (!w)
		return 0;
	if (w->f)
		ret = end_shard(w);
	free(w->dir);
	free(w->path);
	free(w->name);
	free(w);
	return ret;
}

int gm_pack(const char *src, const char *dst, uint32_t per_shard, uint64_t *bytes_out,
	    uint32_t *shards_out, char *err, size_t errlen)
{
	struct gm_dataset *ds = NULL, *chk = NULL;
	struct gm_shard_writer *sw = NULL;
	char *buf = NULL, *key = NULL, *prev = NULL;
	size_t cap = 0;
	uint64_t total = 0;
	int ret;

	if (err && errlen)
		err[0] = 0;
	if (!per_shard) {
		gm_errf(err, errlen, "pack: the shard size must be at least 1 sample");
		return -EINVAL;
	}
	if ((ret = gm_dataset_open(&ds, src, err, errlen)))
		return ret;
	if (gm_dataset_sharded(ds)) {
		gm_errf(err, errlen, "pack: %s is tar shards already", src);
		ret = -EINVAL;
		goto out;
	}
	if (mkdir(dst, 0755) != 0 && errno != EEXIST) {
		ret = -errno;
		gm_errf(err, errlen, "pack: %s: %s", dst, strerror(-ret));
		goto out;
	}
	size_t skip = strlen(gm_dataset_root(ds));
	if (skip > 1 || gm_dataset_root(ds)[0] != '/')
		skip++; /* the '/' after the root */
	key = malloc(TAR_MAX_NAME + 1);
	prev = calloc(1, TAR_MAX_NAME + 1);
	if (!key || !prev || (ret = gm_shard_writer_open(&sw, dst, per_shard, true))) {
		ret = -ENOMEM;
		goto out;
	}
	uint32_t n = gm_dataset_count(ds);
	for (uint32_t id = 0; id < n; id++) {
		const char *file = gm_dataset_path(ds, id);
		/* KEY = relative path without extension, dots of the file name -> '_' */
		const char *rel = file + skip, *dot = strrchr(rel, '.');
		const char *base = strrchr(rel, '/');
		size_t klen = (size_t)(dot - rel);
		if (klen > TAR_MAX_NAME - 24) {
			ret = -ENAMETOOLONG;
			gm_errf(err, errlen, "pack: %s: name too long for a tar member", file);
			goto out;
		}
		memcpy(key, rel, klen);
		key[klen] = 0;
		for (char *p = key + (base ? (size_t)(base - rel) + 1 : 0); *p; p++)
			if (*p == '.')
				*p = '_';
		if (!strcmp(key, prev)) /* "a.b.jpg" after "a_b.jpg": keep keys apart */
			snprintf(key + klen, 24, "_%u", id);
		strcpy(prev, key);
		size_t len = 0;
		if ((ret = slurp(file, &buf, &cap, &len))) {
			gm_errf(err, errlen, "pack: %s: %s", file, strerror(-ret));
			goto out;
		}
		if ((ret = gm_shard_writer_add(sw, key, dot + 1, buf, len,
					       gm_dataset_label(ds, id)))) {
			gm_errf(err, errlen, "pack: %s: %s%s", gm_shard_writer_path(sw),
				strerror(-ret),
				ret == -EEXIST ? " (pack into an empty directory)" : "");
			goto out;
		}
		total += len;
	}
	uint32_t nshards = gm_shard_writer_shards(sw);
	ret = gm_shard_writer_close(sw);
	sw = NULL;
	if (ret) {
		gm_errf(err, errlen, "pack: %s: write failed (%s)", dst, strerror(-ret));
		goto out;
	}
	/* Check what was written: same samples, labels, sizes, in the same order. */
	if ((ret = gm_dataset_open(&chk, dst, err, errlen)))
		goto out;
	if (gm_dataset_count(chk) != n) {
		gm_errf(err, errlen, "pack: %s indexes %u samples, not %u (other .tar files there?)",
			dst, gm_dataset_count(chk), n);
		ret = -EIO;
		goto out;
	}
	for (uint32_t id = 0; id < n; id++)
		if (gm_dataset_label(chk, id) != gm_dataset_label(ds, id) ||
		    gm_dataset_file_size(chk, id) != gm_dataset_file_size(ds, id)) {
			gm_errf(err, errlen, "pack: %s does not index %s as written", dst,
				gm_dataset_path(ds, id));
			ret = -EIO;
			goto out;
		}
	if (bytes_out)
		*bytes_out = total;
	if (shards_out)
		*shards_out = nshards;
out:
	gm_shard_writer_close(sw);
	gm_dataset_close(chk);
	gm_dataset_close(ds);
	free(buf);
	free(key);
	free(prev);
	return ret;
}

static void pack_usage(FILE *f)
{
	fprintf(f, "usage: goldminer pack SRC DST [--per-shard N]\n"
		   "  Pack the ImageFolder tree SRC into WebDataset tar shards\n"
		   "  DST/shard-NNNNNN.tar (KEY.jpg + KEY.cls, in the tree's order), then\n"
		   "  check them. Loading DST then gives the same batches as loading SRC.\n"
		   "  --per-shard N  samples per shard (default 1000)\n");
}

int gm_cli_pack(int argc, char **argv)
{
	static const struct option lo[] = {{"per-shard", required_argument, NULL, 'n'},
					   {"help", no_argument, NULL, 'h'},
					   {NULL, 0, NULL, 0}};
	unsigned long per = 1000;
	int c;
	char err[1024], *end;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case 'n':
			errno = 0;
			per = strtoul(optarg, &end, 10);
			if (errno || *end || !per || per > UINT32_MAX || optarg[0] == '-') {
				fprintf(stderr, "goldminer pack: --per-shard wants 1..%u, not '%s'\n",
					UINT32_MAX, optarg);
				return 2;
			}
			break;
		case 'h':
			pack_usage(stdout);
			return 0;
		default:
			pack_usage(stderr);
			return 2;
		}
	}
	if (argc - optind != 2) {
		pack_usage(stderr);
		return 2;
	}
	struct timespec t0, t1;
	uint64_t bytes = 0;
	uint32_t shards = 0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int ret = gm_pack(argv[optind], argv[optind + 1], (uint32_t)per, &bytes, &shards, err,
			  sizeof(err));
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (ret) {
		fprintf(stderr, "goldminer %s\n", err);
		return 1;
	}
	printf("pack: %s -> %s: %u shards, %.1f MB of images, checked, %.2f s\n", argv[optind],
	       argv[optind + 1], shards, (double)bytes / 1e6,
	       (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9);
	return 0;
}
