/*
 * pack.c - WebDataset tar shards from an ImageFolder tree (see pack.h).
 *
 * Why: a dataset of millions of small JPEGs costs an open/close per sample and a
 * metadata lookup per file on network file systems; a few hundred shards read at
 * offsets do not. `goldminer pack` (cmd/pack.c) converts a tree once; the loader
 * then takes the shard directory as its root and delivers the same samples, labels
 * and ids as from the tree (the order is the tree's), so batches are byte-identical.
 *
 * Design: the tree's index (dataset.c) gives the order; each file goes through the
 * shard writer (tar.c) under a key made from its relative path; then the shards
 * are indexed again and compared with the tree, sample by sample.
 *
 * What it does not do: the tar format (tar.c), re-encode or resize images, pack
 * anything but an ImageFolder tree, or append to existing shards.
 */
#include "goldminer/pack.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "goldminer/dataset.h"
#include "goldminer/tar.h"
#include "goldminer/util.h"

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

/*
 * The member key of the tree file rel (path relative to root): rel without its
 * extension, dots of the file name turned into '_' (a WebDataset key ends at the
 * first dot), made unique against prev ("a.b.jpg" after "a_b.jpg") with "_ID".
 * key and prev hold GM_TAR_MAX_NAME + 1 bytes. 0 or -ENAMETOOLONG.
 */
static int pack_key(char *key, char *prev, const char *rel, uint32_t id)
{
	const char *dot = strrchr(rel, '.'), *base = strrchr(rel, '/');
	size_t klen = (size_t)(dot - rel);

	if (klen > GM_TAR_MAX_NAME - 24)
		return -ENAMETOOLONG;
	memcpy(key, rel, klen);
	key[klen] = 0;
	for (char *p = key + (base ? (size_t)(base - rel) + 1 : 0); *p; p++)
		if (*p == '.')
			*p = '_';
	if (!strcmp(key, prev)) /* "a.b.jpg" after "a_b.jpg": keep keys apart */
		snprintf(key + klen, 24, "_%u", id);
	strcpy(prev, key);
	return 0;
}

/* Write every sample of ds, in id order, through sw. 0 or -errno with a message. */
static int pack_samples(const struct gm_dataset *ds, struct gm_tar_writer *sw, uint64_t *total,
			char *err, size_t errlen)
{
	char *buf = NULL, *key = malloc(GM_TAR_MAX_NAME + 1),
	     *prev = calloc(1, GM_TAR_MAX_NAME + 1);
	size_t cap = 0, skip = strlen(gm_dataset_root(ds));
	uint32_t n = gm_dataset_count(ds);
	int ret = 0;

	if (skip > 1 || gm_dataset_root(ds)[0] != '/')
		skip++; /* the '/' after the root */
	if (!key || !prev)
		ret = -ENOMEM;
	for (uint32_t id = 0; !ret && id < n; id++) {
		const char *file = gm_dataset_path(ds, id), *rel = file + skip;
		size_t len = 0;
		if ((ret = pack_key(key, prev, rel, id))) {
			gm_errf(err, errlen, "pack: %s: name too long for a tar member", file);
		} else if ((ret = slurp(file, &buf, &cap, &len))) {
			gm_errf(err, errlen, "pack: %s: %s", file, strerror(-ret));
		} else if ((ret = gm_tar_writer_add(sw, key, strrchr(rel, '.') + 1, buf, len,
						    gm_dataset_label(ds, id)))) {
			gm_errf(err, errlen, "pack: %s: %s%s", gm_tar_writer_path(sw),
				strerror(-ret),
				ret == -EEXIST ? " (pack into an empty directory)" : "");
		} else {
			*total += len;
		}
	}
	free(buf);
	free(key);
	free(prev);
	return ret;
}

/* Check what was written to dst: same samples, labels, sizes, in the same order. */
static int pack_check(const struct gm_dataset *ds, const char *dst, char *err, size_t errlen)
{
	struct gm_dataset *chk = NULL;
	uint32_t n = gm_dataset_count(ds);
	int ret;

	if ((ret = gm_dataset_open(&chk, dst, err, errlen)))
		return ret;
	if (gm_dataset_count(chk) != n) {
		gm_errf(err, errlen,
			"pack: %s indexes %u samples, not %u (other .tar files there?)", dst,
			gm_dataset_count(chk), n);
		ret = -EIO;
	}
	for (uint32_t id = 0; !ret && id < n; id++)
		if (gm_dataset_label(chk, id) != gm_dataset_label(ds, id) ||
		    gm_dataset_file_size(chk, id) != gm_dataset_file_size(ds, id)) {
			gm_errf(err, errlen, "pack: %s does not index %s as written", dst,
				gm_dataset_path(ds, id));
			ret = -EIO;
		}
	gm_dataset_close(chk);
	return ret;
}

int gm_pack(const char *src, const char *dst, uint32_t per_shard, uint64_t *bytes_out,
	    uint32_t *shards_out, char *err, size_t errlen)
{
	struct gm_dataset *ds = NULL;
	struct gm_tar_writer *sw = NULL;
	uint64_t total = 0;
	uint32_t nshards;
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
	if (gm_tar_writer_open(&sw, dst, per_shard, true)) {
		ret = -ENOMEM;
		goto out;
	}
	if ((ret = pack_samples(ds, sw, &total, err, errlen)))
		goto out;
	nshards = gm_tar_writer_shards(sw);
	ret = gm_tar_writer_close(sw);
	sw = NULL;
	if (ret) {
		gm_errf(err, errlen, "pack: %s: write failed (%s)", dst, strerror(-ret));
		goto out;
	}
	if ((ret = pack_check(ds, dst, err, errlen)))
		goto out;
	if (bytes_out)
		*bytes_out = total;
	if (shards_out)
		*shards_out = nshards;
out:
	gm_tar_writer_close(sw);
	gm_dataset_close(ds);
	return ret;
}
