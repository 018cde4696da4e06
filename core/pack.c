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
 * Restart markers (gm_pack_ex with restart N): each JPEG is rewritten with a
 * restart marker every N MCUs by libjpeg's coefficient API (jpeg.c), so that a
 * decoder can later start at a marker; the coefficients are the same, and pack
 * decodes both files in full and compares the pixels, writing the original bytes
 * when they would differ (or the file does not transcode). The output is shards
 * or, with tree, the same ImageFolder tree elsewhere, written under a temporary
 * name, indexed and compared, then renamed. The default interval, 4 MCUs, was
 * measured on the 2,900-photo set (500x375, 4:2:0, q90 baseline; bytes against the
 * originals, and the decode stage of train crops, us/img, with jpeg.c's splice):
 * every MCU +3.9% (356), 2 MCUs +0.8% (305), 4 MCUs -1.0% (314-328), 8 -1.9%
 * (331), 16 -2.4% (365), the originals 377-379. (Optimal Huffman tables alone make
 * the files 2.9% smaller.) 4 divides the 32 and 24 MCUs of a row of these photos,
 * so the splice can cut rows as well as columns; for other widths (280 of the
 * 2,900) pack takes the largest divisor of the MCUs of a row up to N
 * (gm_jpeg_fit_restart): with 5 MCUs, which divides neither, the splice could only
 * leave out rows, and the decode stage was the originals' (371 vs 372). With that
 * fit, `pack --restart` makes the set 0.83% smaller.
 *
 * Into shards (not with tree), a restart-marked file also gets the row index
 * (gm_jpeg_add_row_index: a copy of its tables and the offset of each MCU row in
 * an APP15 segment after SOI), so that a worker reads a prefix of the member and
 * then only the bytes of the rows its crop needs (worker.c). A tree's files are
 * read whole: they get no index. A reader checks the index against the member
 * (jpeg.c) and decodes a member whose index does not match whole, so a shard
 * changed after pack gives the pixels of its bytes, never those of a stale index.
 *
 * What it does not do: the tar format (tar.c), resize or re-encode pixels, pack
 * anything but an ImageFolder tree, or append to existing shards.
 */
#include "goldminer/pack.h"

#include <dirent.h>
#include <ftw.h>
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
#include "goldminer/jpeg.h"
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
	gm_errf(err, errlen, "gm_pack: %s: %s%s", path,
		gm_write_cause(ret, dst, cause, sizeof(cause)), hint);
}

/* Path of sample id relative to the dataset's root. */
static const char *rel_path(const struct gm_dataset *ds, uint32_t id)
{
	size_t skip = strlen(gm_dataset_root(ds));
	if (skip > 1 || gm_dataset_root(ds)[0] != '/')
		skip++; /* the '/' after the root */
	return gm_dataset_path(ds, id) + skip;
}

/* One pack run: the options, the decoder that checks transcodes, the sizes written. */
struct pack_run {
	const struct gm_pack_opts *o;
	struct gm_jpeg *dec;
	uint8_t *ref; /* the original's pixels while the transcode is decoded */
	size_t ref_cap;
	uint8_t *tc;	 /* the last transcode (malloc'ed by jpeg.c) */
	uint64_t *sizes; /* bytes written per sample id */
	struct gm_pack_stats st;
};

/* Decode data in full into *img (the decoder's buffer). false if it does not decode. */
static bool decode_all(struct gm_jpeg *dec, const void *data, size_t len, struct gm_jpeg_image *img)
{
	return gm_jpeg_open(dec, data, len, NULL) == 0 && gm_jpeg_decode_full(dec, 8, img) == 0;
}

/* Whether a and b (a's pixels copied to r->ref first) decode to the same pixels. */
static bool same_pixels(struct pack_run *r, const void *a, size_t alen, const void *b, size_t blen)
{
	struct gm_jpeg_image ia, ib;
	if (!decode_all(r->dec, a, alen, &ia))
		return false;
	size_t row = (size_t)ia.width * 3;
	uint32_t w = ia.width, h = ia.height;
	if (gm_grow_scratch((void **)&r->ref, &r->ref_cap, row * h, 1 << 16))
		return false;
	for (uint32_t y = 0; y < h; y++)
		memcpy(r->ref + y * row, ia.pixels + y * ia.stride, row);
	if (!decode_all(r->dec, b, blen, &ib) || ib.width != w || ib.height != h)
		return false;
	for (uint32_t y = 0; y < h; y++)
		if (memcmp(r->ref + y * row, ib.pixels + y * ib.stride, row))
			return false;
	return true;
}

/*
 * The bytes to write for the file buf[0..len): the restart-marked transcode when
 * asked for and its pixels are the original's, else buf itself (counted in kept).
 */
static void pack_bytes(struct pack_run *r, const char *buf, size_t len, const void **data,
		       size_t *dlen)
{
	uint8_t *t = NULL;
	size_t tlen = 0;
	char msg[256];

	free(r->tc);
	r->tc = NULL;
	*data = buf;
	*dlen = len;
	if (!r->o->restart)
		return;
	uint32_t every = gm_jpeg_fit_restart(r->dec, buf, len, r->o->restart);
	if (gm_jpeg_restart_transcode(buf, len, every, 0, &t, &tlen, msg, sizeof(msg)) ||
	    !same_pixels(r, buf, len, t, tlen)) {
		free(t);
		r->st.kept++;
		return;
	}
	uint8_t *ix;
	size_t ixlen;
	if (!r->o->tree && gm_jpeg_add_row_index(r->dec, t, tlen, &ix, &ixlen) == 0) {
		free(t);
		t = ix;
		tlen = ixlen;
	}
	r->tc = t;
	*data = t;
	*dlen = tlen;
}

/* Write every sample of ds, in id order, through sw. 0 or -errno with a message. */
static int pack_samples(const struct gm_dataset *ds, struct pack_run *r, struct gm_tar_writer *sw,
			const char *dst, char *err, size_t errlen)
{
	char *buf = NULL, *key = malloc(GM_TAR_MAX_NAME + 1),
	     *prev = calloc(1, GM_TAR_MAX_NAME + 1);
	size_t cap = 0;
	uint32_t n = gm_dataset_count(ds);
	int ret = 0;

	if (!key || !prev)
		ret = -ENOMEM;
	for (uint32_t id = 0; !ret && id < n; id++) {
		const char *file = gm_dataset_path(ds, id), *rel = rel_path(ds, id);
		size_t len = 0, dlen;
		const void *data;
		if ((ret = pack_key(key, prev, rel, id))) {
			gm_errf(err, errlen, "gm_pack: %s: name too long for a tar member", file);
		} else if ((ret = slurp(file, &buf, &cap, &len))) {
			gm_errf(err, errlen, "gm_pack: %s: %s", file, strerror(-ret));
		} else if (pack_bytes(r, buf, len, &data, &dlen),
			   (ret = gm_tar_writer_add(sw, key, strrchr(rel, '.') + 1, data, dlen,
						    gm_dataset_label(ds, id)))) {
			write_failed(sw, dst, ret, err, errlen);
		} else {
			r->sizes[id] = dlen;
			r->st.bytes_in += len;
			r->st.bytes_out += dlen;
			r->st.files++;
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
	const uint64_t *sizes; /* written per id */
	uint32_t next;	       /* the id the next sample must match */
	bool bad;
};

static int check_sample(void *ctx, const struct gm_tar_sample *s)
{
	struct pack_check *c = ctx;
	uint32_t id = c->next++;

	if (id >= gm_dataset_count(c->ds) || s->label != gm_dataset_label(c->ds, id) ||
	    s->size != c->sizes[id]) {
		c->bad = true;
		return -EIO;
	}
	return 0;
}

/* Index what was written (the temporaries, before they get their names): the
 * same samples, labels and sizes as the tree, in the same order. */
static int pack_check(const struct gm_dataset *ds, const uint64_t *sizes, struct gm_tar_writer *sw,
		      char *err, size_t errlen)
{
	struct pack_check c = {ds, sizes, 0, false};
	uint32_t n = gm_dataset_count(ds);
	int ret = 0;

	for (uint32_t i = 0; !ret && i < gm_tar_writer_shards(sw); i++)
		ret =
		    gm_tar_index(gm_tar_writer_shard(sw, i), "pack", check_sample, &c, err, errlen);
	if (c.bad || (!ret && c.next != n)) {
		gm_errf(err, errlen, "gm_pack: %s does not index as written (sample %u of %u: %s)",
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
		gm_errf(err, errlen, "gm_pack: %s: %s", dst, strerror(-ret));
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
			"gm_pack: %s/%s: %s holds .tar files already, which would load with the "
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
		gm_errf(err, errlen, "gm_pack: %s: %s", dst, strerror(-ret));
		return ret;
	}
	return *made ? 0 : pack_dst_empty(dst, err, errlen);
}

/* Shards of ds's samples into dst (gm_pack's contract). 0 or -errno with a message. */
static int pack_shards(const struct gm_dataset *ds, struct pack_run *r, const char *dst, char *err,
		       size_t errlen)
{
	struct gm_tar_writer *sw = NULL;
	bool made = false;
	int ret;

	if ((ret = pack_dst(dst, &made, err, errlen)))
		return ret;
	if ((ret = gm_tar_writer_open(&sw, dst, r->o->per_shard, true))) {
		gm_errf(err, errlen, "gm_pack: out of memory");
		goto out;
	}
	if ((ret = pack_samples(ds, r, sw, dst, err, errlen)))
		goto out;
	if ((ret = gm_tar_writer_end(sw))) {
		write_failed(sw, dst, ret, err, errlen);
		goto out;
	}
	if ((ret = pack_check(ds, r->sizes, sw, err, errlen)))
		goto out;
	if ((ret = gm_tar_writer_commit(sw))) {
		write_failed(sw, dst, ret, err, errlen);
		goto out;
	}
	r->st.shards = gm_tar_writer_shards(sw);
out:
	gm_tar_writer_close(sw); /* not committed: removes what it wrote */
	if (ret && made)
		rmdir(dst); /* leave nothing; fails harmlessly if not empty */
	return ret;
}

/* ---- tree to tree ---------------------------------------------------------------- */

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)ftw;
	return flag == FTW_DP ? rmdir(path) : unlink(path);
}

/* Write len bytes to the new file path. 0 or -errno. */
static int write_file(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644), ret = 0;
	if (fd < 0)
		return -errno;
	for (size_t off = 0; off < len;) {
		ssize_t w = write(fd, (const char *)data + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			ret = w < 0 ? -errno : -EIO;
			break;
		}
		off += (size_t)w;
	}
	if (close(fd) && !ret)
		ret = -errno;
	return ret;
}

/* mkdir of every directory of rel's path under root (rel's last part is a file). */
static int make_parents(const char *root, const char *rel, char *path, size_t cap)
{
	for (const char *p = strchr(rel, '/'); p; p = strchr(p + 1, '/')) {
		if ((size_t)snprintf(path, cap, "%s/%.*s", root, (int)(p - rel), rel) >= cap)
			return -ENAMETOOLONG;
		if (mkdir(path, 0755) && errno != EEXIST)
			return -errno;
	}
	return 0;
}

/* Every sample of ds written under tmp at its relative path. 0 or -errno + message. */
static int tree_samples(const struct gm_dataset *ds, struct pack_run *r, const char *tmp, char *err,
			size_t errlen)
{
	size_t cap = 0, plen = strlen(tmp) + GM_TAR_MAX_NAME + 4096;
	char *buf = NULL, *path = malloc(plen);
	int ret = path ? 0 : -ENOMEM;

	for (uint32_t c = 0; !ret && c < gm_dataset_num_classes(ds); c++) {
		snprintf(path, plen, "%s/%s", tmp, gm_dataset_class_name(ds, c));
		if (mkdir(path, 0755) && errno != EEXIST) /* every class directory of src */
			ret = -errno;
		if (ret)
			gm_errf(err, errlen, "gm_pack: %s: %s", path, strerror(-ret));
	}
	for (uint32_t id = 0; !ret && id < gm_dataset_count(ds); id++) {
		const char *file = gm_dataset_path(ds, id), *rel = rel_path(ds, id);
		const void *data;
		size_t len = 0, dlen;
		if ((ret = slurp(file, &buf, &cap, &len))) {
			gm_errf(err, errlen, "gm_pack: %s: %s", file, strerror(-ret));
			break;
		}
		pack_bytes(r, buf, len, &data, &dlen);
		if (!(ret = make_parents(tmp, rel, path, plen)) &&
		    (size_t)snprintf(path, plen, "%s/%s", tmp, rel) >= plen)
			ret = -ENAMETOOLONG;
		if (!ret)
			ret = write_file(path, data, dlen);
		if (ret) {
			char cause[200];
			gm_errf(err, errlen, "gm_pack: %s: %s", path,
				gm_write_cause(ret, tmp, cause, sizeof(cause)));
			break;
		}
		r->sizes[id] = dlen;
		r->st.bytes_in += len;
		r->st.bytes_out += dlen;
		r->st.files++;
	}
	free(buf);
	free(path);
	return ret;
}

/* The tree at tmp indexes as ds with the sizes written. 0, -EIO or -errno + message. */
static int tree_check(const struct gm_dataset *ds, const uint64_t *sizes, const char *tmp,
		      char *err, size_t errlen)
{
	struct gm_dataset *out = NULL;
	int ret = gm_dataset_open(&out, tmp, err, errlen);
	uint32_t n = gm_dataset_count(ds), id = 0;

	if (ret)
		return ret;
	if (gm_dataset_count(out) != n || gm_dataset_num_classes(out) != gm_dataset_num_classes(ds))
		ret = -EIO;
	for (; !ret && id < n; id++)
		if (gm_dataset_label(out, id) != gm_dataset_label(ds, id) ||
		    gm_dataset_file_size(out, id) != sizes[id] ||
		    strcmp(rel_path(out, id), rel_path(ds, id)))
			ret = -EIO;
	if (ret)
		gm_errf(err, errlen, "gm_pack: %s does not index as written (sample %u of %u)", tmp,
			id ? id - 1 : 0, n);
	gm_dataset_close(out);
	return ret;
}

/* 0 when dst does not exist or is an empty directory (rename replaces one), else -errno. */
static int tree_dst_free(const char *dst)
{
	struct dirent *de;
	DIR *d = opendir(dst);
	int ret = 0;

	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while (!ret && (de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			ret = -ENOTEMPTY;
	closedir(d);
	return ret;
}

/* The tree of ds at dst: written under dst.tmp-PID, checked, renamed. */
static int pack_tree(const struct gm_dataset *ds, struct pack_run *r, const char *dst, char *err,
		     size_t errlen)
{
	size_t tlen = strlen(dst) + 32;
	char *tmp = malloc(tlen);
	int ret = 0;

	if (!tmp)
		return -ENOMEM;
	snprintf(tmp, tlen, "%s.tmp-%ld", dst, (long)getpid());
	if ((ret = tree_dst_free(dst))) {
		gm_errf(err, errlen, "gm_pack: %s: %s (a tree goes to a new or empty directory)",
			dst, strerror(-ret));
		goto out_free;
	}
	if (mkdir(tmp, 0755)) {
		ret = -errno;
		gm_errf(err, errlen, "gm_pack: %s: %s", tmp, strerror(-ret));
		goto out_free;
	}
	if ((ret = tree_samples(ds, r, tmp, err, errlen)) ||
	    (ret = tree_check(ds, r->sizes, tmp, err, errlen)))
		goto out_remove;
	if (rename(tmp, dst)) {
		ret = -errno;
		gm_errf(err, errlen, "gm_pack: rename %s to %s: %s", tmp, dst, strerror(-ret));
		goto out_remove;
	}
	goto out_free;

out_remove:
	nftw(tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS); /* only what this run wrote */
out_free:
	free(tmp);
	return ret;
}

int gm_pack_ex(const char *src, const char *dst, const struct gm_pack_opts *o,
	       struct gm_pack_stats *st, char *err, size_t errlen)
{
	struct gm_dataset *ds = NULL;
	struct pack_run r = {.o = o};
	int ret;

	if (err && errlen)
		err[0] = 0;
	if (!o->tree && !o->per_shard) {
		gm_errf(err, errlen, "gm_pack: the shard size must be at least 1 sample");
		return -EINVAL;
	}
	if (o->restart > GM_JPEG_MAX_RESTART) {
		gm_errf(err, errlen, "gm_pack: the restart interval must be 1..65535 MCUs");
		return -EINVAL;
	}
	if ((ret = gm_dataset_open(&ds, src, err, errlen)))
		return ret;
	if (gm_dataset_sharded(ds)) {
		gm_errf(err, errlen, "gm_pack: %s is tar shards already", src);
		ret = -EINVAL;
		goto out;
	}
	if (!(r.sizes = calloc(gm_dataset_count(ds), sizeof(*r.sizes))) ||
	    (o->restart && (ret = gm_jpeg_create(&r.dec, 0)))) {
		ret = -ENOMEM;
		gm_errf(err, errlen, "gm_pack: out of memory");
		goto out;
	}
	ret = o->tree ? pack_tree(ds, &r, dst, err, errlen) : pack_shards(ds, &r, dst, err, errlen);
	if (!ret && st)
		*st = r.st;
out:
	free(r.tc);
	free(r.ref);
	free(r.sizes);
	gm_jpeg_destroy(r.dec);
	gm_dataset_close(ds);
	return ret;
}

int gm_pack(const char *src, const char *dst, uint32_t per_shard, uint64_t *bytes_out,
	    uint32_t *shards_out, char *err, size_t errlen)
{
	struct gm_pack_opts o = {.per_shard = per_shard};
	struct gm_pack_stats st;
	int ret = gm_pack_ex(src, dst, &o, &st, err, errlen);
	if (!ret && bytes_out)
		*bytes_out = st.bytes_out;
	if (!ret && shards_out)
		*shards_out = st.shards;
	return ret;
}
