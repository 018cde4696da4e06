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
 * are indexed again and compared with the tree, sample by sample, while they still
 * have their temporary names; only then does the writer rename them. A pack that
 * fails (a full disk, a quota, no inodes left) removes what it wrote, and the
 * directory if it made it: it never leaves shards that would load as a smaller
 * dataset. dst must hold no .tar file beforehand, for the same reason.
 *
 * What it does not do: the tar format (tar.c), re-encode or resize images, pack
 * anything but an ImageFolder tree, or append to existing shards.
 */
#include "goldminer/pack.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
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

/* The message for a failed write of the shard writer sw into dst. */
static void write_failed(struct gm_tar_writer *sw, const char *dst, int ret, char *err,
			 size_t errlen)
{
	const char *path = gm_tar_writer_path(sw), *hint = "";
	char cause[200];

	if (ret == -EEXIST)
		hint = strstr(path, "/.shard-") ? " (another pack writing there, or one killed"
						  " half-way? remove the .tmp files)"
						: " (pack into an empty directory)";
	gm_errf(err, errlen, "pack: %s: %s%s", path, gm_write_cause(ret, dst, cause, sizeof(cause)),
		hint);
}

/* Write every sample of ds, in id order, through sw. 0 or -errno with a message. */
static int pack_samples(const struct gm_dataset *ds, struct gm_tar_writer *sw, const char *dst,
			uint64_t *total, char *err, size_t errlen)
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
			write_failed(sw, dst, ret, err, errlen);
		} else {
			*total += len;
		}
	}
	free(buf);
	free(key);
	free(prev);
	return ret;
}

/* The check of the written shards against the tree, sample by sample. */
struct pack_check {
	const struct gm_dataset *ds;
	uint32_t next; /* the id the next sample must match */
	bool bad;
};

static int check_sample(void *ctx, const struct gm_tar_sample *s)
{
	struct pack_check *c = ctx;
	uint32_t id = c->next++;

	if (id >= gm_dataset_count(c->ds) || s->label != gm_dataset_label(c->ds, id) ||
	    s->size != gm_dataset_file_size(c->ds, id)) {
		c->bad = true;
		return -EIO;
	}
	return 0;
}

/* Index what was written (the temporaries, before they get their names): the
 * same samples, labels and sizes as the tree, in the same order. */
static int pack_check(const struct gm_dataset *ds, struct gm_tar_writer *sw, char *err,
		      size_t errlen)
{
	struct pack_check c = {ds, 0, false};
	uint32_t n = gm_dataset_count(ds);
	int ret = 0;

	for (uint32_t i = 0; !ret && i < gm_tar_writer_shards(sw); i++)
		ret =
		    gm_tar_index(gm_tar_writer_shard(sw, i), "pack", check_sample, &c, err, errlen);
	if (c.bad || (!ret && c.next != n)) {
		gm_errf(err, errlen, "pack: %s does not index as written (sample %u of %u: %s)",
			gm_tar_writer_path(sw), c.next ? c.next - 1 : 0, n,
			c.next > n ? "extra"
			: c.bad	   ? "label or size differ"
				   : "missing");
		ret = -EIO;
	}
	return ret;
}

/*
 * dst must hold no .tar file: the dataset made of dst would index it with the
 * shards (names compared as the dataset index does). 0, -EEXIST naming the first
 * one, or -errno.
 */
static int pack_dst_empty(const char *dst, char *err, size_t errlen)
{
	DIR *d = opendir(dst);
	struct dirent *de;
	char *first = NULL;
	int ret = 0;

	if (!d) {
		ret = -errno;
		gm_errf(err, errlen, "pack: %s: %s", dst, strerror(-ret));
		return ret;
	}
	while ((de = readdir(d))) {
		size_t len = strlen(de->d_name);
		if (len >= 5 && !strcasecmp(de->d_name + len - 4, ".tar") &&
		    (!first || strcmp(de->d_name, first) < 0)) {
			free(first);
			if (!(first = strdup(de->d_name))) {
				ret = -ENOMEM;
				break;
			}
		}
	}
	closedir(d);
	if (!ret && first) {
		gm_errf(err, errlen,
			"pack: %s/%s: %s holds .tar files already, which would load with the "
			"shards (pack into an empty directory)",
			dst, first, dst);
		ret = -EEXIST;
	}
	free(first);
	return ret;
}

/* dst, created if missing (*made: by us). 0 or -errno with a message. */
static int pack_dst(const char *dst, bool *made, char *err, size_t errlen)
{
	*made = mkdir(dst, 0755) == 0;
	if (!*made && errno != EEXIST) {
		int ret = -errno;
		gm_errf(err, errlen, "pack: %s: %s", dst, strerror(-ret));
		return ret;
	}
	return *made ? 0 : pack_dst_empty(dst, err, errlen);
}

int gm_pack(const char *src, const char *dst, uint32_t per_shard, uint64_t *bytes_out,
	    uint32_t *shards_out, char *err, size_t errlen)
{
	struct gm_dataset *ds = NULL;
	struct gm_tar_writer *sw = NULL;
	uint64_t total = 0;
	bool made = false;
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
	if ((ret = pack_dst(dst, &made, err, errlen)))
		goto out;
	if ((ret = gm_tar_writer_open(&sw, dst, per_shard, true))) {
		gm_errf(err, errlen, "pack: out of memory");
		goto out;
	}
	if ((ret = pack_samples(ds, sw, dst, &total, err, errlen)))
		goto out;
	if ((ret = gm_tar_writer_end(sw))) {
		write_failed(sw, dst, ret, err, errlen);
		goto out;
	}
	if ((ret = pack_check(ds, sw, err, errlen)))
		goto out;
	if ((ret = gm_tar_writer_commit(sw))) {
		write_failed(sw, dst, ret, err, errlen);
		goto out;
	}
	if (bytes_out)
		*bytes_out = total;
	if (shards_out)
		*shards_out = gm_tar_writer_shards(sw);
out:
	gm_tar_writer_close(sw); /* not committed: removes what it wrote */
	if (ret && made)
		rmdir(dst); /* leave nothing; fails harmlessly if not empty */
	gm_dataset_close(ds);
	return ret;
}
