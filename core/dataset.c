/*
 * dataset.c - ImageFolder sample index (see dataset.h).
 *
 * Purpose: map sample id -> (full path, size hint, label) for a tree laid out as
 * root/CLASS/[SUBDIRS/]NAME.jpg, in exactly the order torchvision's ImageFolder lists it, so
 * that labels and sample ids agree with a model trained through PyTorch.
 *
 * Order, as torchvision builds it:
 *  - classes are the entries of root that are directories (symlinks followed),
 *    sorted by byte order (strcmp; Python's sorted() on str gives the same order
 *    for UTF-8 names); label = position in that list;
 *  - within a class, torchvision sorts the tuples of os.walk(class, followlinks=True),
 *    i.e. directories by their full path string, and the file names of each
 *    directory. That is NOT the order of sorting whole file paths ("a/z.jpg" comes
 *    before "a/b/x.jpg", and "a-b/" before "a/b/" because '-' < '/'), so the walk
 *    records each directory with its relative path and its sorted files, then sorts
 *    the directories and emits their files;
 *  - a file is kept when its name ends in .jpg or .jpeg, case-insensitive.
 *
 * Design: no per-sample allocation. Full paths live in one string arena in sample
 * order; a sample is (arena offset, size, label) in one array. The walk uses
 * openat/fdopendir/fstatat relative to directory fds (no path re-resolution), d_type
 * to avoid a stat for plain directories, and one fstatat per JPEG for its size.
 *
 * Decisions that differ from (or sharpen) torchvision, deliberately:
 *  - hidden files and directories (".name") are NOT skipped, as in torchvision, so
 *    labels stay identical to a torchvision-built index (a stray ".ipynb_checkpoints"
 *    class dir therefore counts as a class, and an empty one is an error, as there);
 *  - a class directory with no JPEG is an error (-ENODATA naming it), as torchvision
 *    raises FileNotFoundError for empty classes;
 *  - an unreadable directory anywhere is an error (-EACCES naming it), where
 *    os.walk would silently skip it: silently losing data is worse;
 *  - entries with a JPEG name that are not regular files after following symlinks
 *    (broken symlinks, FIFOs, sockets) are skipped: they cannot be read as images;
 *  - symlink cycles (a directory that is its own ancestor) are not re-entered.
 *
 * Tar shards (WebDataset): see the section before gm_dataset_open.
 *
 * What it does not do: compressed shards (.tar.gz), other image extensions, watching
 * the tree for changes. The index is built once and then only read.
 */
#include "goldminer/dataset.h"
#include "goldminer/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

struct gm_sample {
	size_t path;	 /* offset of the full path in the arena (a shard: the .tar file) */
	size_t name;	 /* offset of the display name ("SHARD.tar:member" for shards) */
	uint64_t offset; /* of the bytes in that file (0 for whole files) */
	uint64_t size;	 /* bytes, from stat / the tar header at indexing time */
	uint32_t label;
	uint32_t shard; /* index of its shard (sharded datasets) */
};

struct gm_dataset {
	char *root; /* as given, trailing '/' removed (except for "/") */
	size_t root_len;
	char *arena; /* full paths, NUL-terminated, in sample order */
	size_t arena_len, arena_cap;
	struct gm_sample *samples;
	uint32_t count;
	size_t samples_cap;
	char *class_names; /* NUL-terminated names, back to back */
	size_t *class_off; /* offset of class c's name in class_names */
	uint32_t nclasses;
	uint64_t max_size;
	uint64_t fingerprint;
	size_t rel_skip; /* chars of a display name before its root-relative part */
	bool sharded;
	size_t *shard_off; /* arena offsets of the shard paths */
	uint32_t nshards;
};

/* Scratch state of one class walk: reused across classes, freed at the end. */
struct walk_file {
	size_t name; /* offset in tmp */
	uint64_t size;
};

struct walk_dir {
	size_t rel; /* offset in tmp of "" (class root) or "/sub/dir" */
	uint32_t first, nfiles;
};

struct walker {
	char *tmp; /* names and relative dir paths */
	size_t tmp_len, tmp_cap;
	struct walk_file *files;
	uint32_t nfiles;
	size_t files_cap;
	struct walk_dir *dirs;
	uint32_t ndirs;
	size_t dirs_cap;
	struct {
		dev_t dev;
		ino_t ino;
	} * anc; /* ancestors, for cycle detection */
	size_t nanc, anc_cap;
	const char *class_path; /* full path of the class dir, for messages */
	char *err;
	size_t errlen;
};

/* Grow *p (elements of size sz) so that it can hold need elements. 0 or -ENOMEM. */
static int grow(void **p, size_t *cap, size_t need, size_t sz)
{
	size_t n = *cap ? *cap : 64;
	void *q;

	if (need <= *cap)
		return 0;
	while (n < need)
		n *= 2;
	q = realloc(*p, n * sz);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = n;
	return 0;
}

/* Append len bytes plus a NUL to the tmp arena; returns the offset or (size_t)-1. */
static size_t tmp_put(struct walker *w, const char *s, size_t len)
{
	size_t off = w->tmp_len;

	if (grow((void **)&w->tmp, &w->tmp_cap, w->tmp_len + len + 1, 1))
		return (size_t)-1;
	memcpy(w->tmp + off, s, len);
	w->tmp[off + len] = '\0';
	w->tmp_len += len + 1;
	return off;
}

static bool is_jpeg_name(const char *name, size_t len)
{
	return (len >= 4 && !strcasecmp(name + len - 4, ".jpg")) ||
	       (len >= 5 && !strcasecmp(name + len - 5, ".jpeg"));
}

/* Sorting helpers: qsort has no context argument in C11, so the walker being
 * sorted is published here for the duration of one qsort call (single-threaded
 * use per call; the index build is not meant to run concurrently with itself). */
static _Thread_local const char *sort_base;

static int cmp_file(const void *a, const void *b)
{
	const struct walk_file *x = a, *y = b;
	return strcmp(sort_base + x->name, sort_base + y->name);
}

static int cmp_dir(const void *a, const void *b)
{
	const struct walk_dir *x = a, *y = b;
	return strcmp(sort_base + x->rel, sort_base + y->rel);
}

static int cmp_off(const void *a, const void *b)
{
	const size_t *x = a, *y = b;
	return strcmp(sort_base + *x, sort_base + *y);
}

/*
 * Walk the directory open at fd (ownership taken), whose path relative to the class
 * dir is tmp[rel] ("" for the class dir itself). Records the directory, its sorted
 * JPEG files, then recurses into its subdirectories.
 */
static int walk(struct walker *w, int fd, size_t rel)
{
	size_t *subs = NULL, nsubs = 0, subs_cap = 0;
	struct walk_dir *dir;
	struct dirent *de;
	struct stat st;
	uint32_t first = w->nfiles;
	int ret = 0;
	DIR *d;

	if (fstat(fd, &st)) {
		ret = -errno;
		close(fd);
		gm_errf(w->err, w->errlen, "gm_dataset_open: %s%s: %s", w->class_path, w->tmp + rel,
			strerror(-ret));
		return ret;
	}
	for (unsigned i = 0; i < w->nanc; i++)
		if (w->anc[i].dev == st.st_dev && w->anc[i].ino == st.st_ino) {
			close(fd); /* a symlink cycle: already being walked above */
			return 0;
		}
	if (grow((void **)&w->anc, &w->anc_cap, w->nanc + 1, sizeof(*w->anc))) {
		close(fd);
		return -ENOMEM;
	}
	w->anc[w->nanc].dev = st.st_dev;
	w->anc[w->nanc].ino = st.st_ino;
	w->nanc++;

	d = fdopendir(fd);
	if (!d) {
		ret = -errno;
		close(fd);
		goto out_err_path;
	}
	for (;;) {
		const char *name;
		size_t len, off;
		bool isdir = false, isreg = false, have_size = false;
		uint64_t size = 0;

		errno = 0;
		de = readdir(d);
		if (!de) {
			if (errno) {
				ret = -errno;
				goto out_err_path_closedir;
			}
			break;
		}
		name = de->d_name;
		if (name[0] == '.' && (!name[1] || (name[1] == '.' && !name[2])))
			continue;
		len = strlen(name);
		if (de->d_type == DT_DIR) {
			isdir = true;
		} else if (de->d_type == DT_REG && !is_jpeg_name(name, len)) {
			continue;
		} else if (de->d_type == DT_REG || de->d_type == DT_LNK ||
			   de->d_type == DT_UNKNOWN) {
			struct stat fst;

			if (fstatat(dirfd(d), name, &fst, 0)) {
				if (errno == ENOENT || errno == ELOOP)
					continue; /* broken symlink, or raced away */
				ret = -errno;
				goto out_err_path_closedir;
			}
			isdir = S_ISDIR(fst.st_mode);
			isreg = S_ISREG(fst.st_mode);
			size = (uint64_t)fst.st_size;
			have_size = true;
		} else {
			continue; /* FIFO, socket, device: never an image */
		}
		if (isdir) {
			off = tmp_put(w, name, len);
			if (off == (size_t)-1 ||
			    grow((void **)&subs, &subs_cap, nsubs + 1, sizeof(*subs))) {
				ret = -ENOMEM;
				goto out_closedir;
			}
			subs[nsubs++] = off;
			continue;
		}
		if (!isreg || !is_jpeg_name(name, len) || !have_size)
			continue;
		off = tmp_put(w, name, len);
		if (off == (size_t)-1 || grow((void **)&w->files, &w->files_cap,
					      (size_t)w->nfiles + 1, sizeof(*w->files))) {
			ret = -ENOMEM;
			goto out_closedir;
		}
		w->files[w->nfiles].name = off;
		w->files[w->nfiles].size = size;
		w->nfiles++;
	}

	sort_base = w->tmp;
	if (w->nfiles - first > 1)
		qsort(w->files + first, w->nfiles - first, sizeof(*w->files), cmp_file);
	if (grow((void **)&w->dirs, &w->dirs_cap, (size_t)w->ndirs + 1, sizeof(*w->dirs))) {
		ret = -ENOMEM;
		goto out_closedir;
	}
	dir = &w->dirs[w->ndirs++];
	dir->rel = rel;
	dir->first = first;
	dir->nfiles = w->nfiles - first;

	/* Subdirectories in sorted order, so errors are reported deterministically. */
	sort_base = w->tmp;
	if (nsubs > 1)
		qsort(subs, nsubs, sizeof(*subs), cmp_off);
	for (size_t i = 0; i < nsubs; i++) {
		size_t rl = strlen(w->tmp + rel), nl = strlen(w->tmp + subs[i]);
		size_t sub_rel;
		char *p;
		int sfd;

		/* Build "<rel>/<name>" at the end of tmp (tmp may move: offsets only). */
		if (grow((void **)&w->tmp, &w->tmp_cap, w->tmp_len + rl + nl + 2, 1)) {
			ret = -ENOMEM;
			goto out_closedir;
		}
		sub_rel = w->tmp_len;
		p = w->tmp + sub_rel;
		memcpy(p, w->tmp + rel, rl);
		p[rl] = '/';
		memcpy(p + rl + 1, w->tmp + subs[i], nl + 1);
		w->tmp_len += rl + nl + 2;

		sfd = openat(dirfd(d), w->tmp + subs[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (sfd < 0) {
			if (errno == ENOENT)
				continue; /* raced away */
			ret = -errno;
			gm_errf(w->err, w->errlen, "gm_dataset_open: %s%s: %s", w->class_path,
				w->tmp + sub_rel, strerror(-ret));
			goto out_closedir;
		}
		ret = walk(w, sfd, sub_rel);
		if (ret)
			goto out_closedir;
	}
	goto out_closedir;

out_err_path_closedir:
	closedir(d);
	d = NULL;
out_err_path:
	gm_errf(w->err, w->errlen, "gm_dataset_open: %s%s: %s", w->class_path, w->tmp + rel,
		strerror(-ret));
out_closedir:
	if (d)
		closedir(d);
	free(subs);
	w->nanc--;
	return ret;
}

/* Append the files of the walked class (in torchvision order) to the index. */
static int emit_class(struct gm_dataset *ds, struct walker *w, uint32_t label)
{
	const char *cname = ds->class_names + ds->class_off[label];
	size_t clen = strlen(cname);
	bool sep = ds->root_len && ds->root[ds->root_len - 1] != '/';

	sort_base = w->tmp;
	if (w->ndirs > 1)
		qsort(w->dirs, w->ndirs, sizeof(*w->dirs), cmp_dir);
	for (uint32_t di = 0; di < w->ndirs; di++) {
		const struct walk_dir *dir = &w->dirs[di];
		const char *rel = w->tmp + dir->rel;
		size_t rlen = strlen(rel);

		for (uint32_t k = 0; k < dir->nfiles; k++) {
			const struct walk_file *f = &w->files[dir->first + k];
			const char *name = w->tmp + f->name;
			size_t nlen = strlen(name);
			size_t need = ds->root_len + sep + clen + rlen + 1 + nlen + 1;
			char *p;

			if (ds->count == UINT32_MAX)
				return -EOVERFLOW;
			if (grow((void **)&ds->arena, &ds->arena_cap, ds->arena_len + need, 1))
				return -ENOMEM;
			if (grow((void **)&ds->samples, &ds->samples_cap, (size_t)ds->count + 1,
				 sizeof(*ds->samples)))
				return -ENOMEM;
			p = ds->arena + ds->arena_len;
			memcpy(p, ds->root, ds->root_len);
			p += ds->root_len;
			if (sep)
				*p++ = '/';
			memcpy(p, cname, clen);
			p += clen;
			memcpy(p, rel, rlen);
			p += rlen;
			*p++ = '/';
			memcpy(p, name, nlen + 1);
			ds->samples[ds->count].path = ds->arena_len;
			ds->samples[ds->count].name = ds->arena_len;
			ds->samples[ds->count].offset = 0;
			ds->samples[ds->count].size = f->size;
			ds->samples[ds->count].label = label;
			if (f->size > ds->max_size)
				ds->max_size = f->size;
			ds->count++;
			ds->arena_len += need;
		}
	}
	return 0;
}

/* FNV-1a, 64-bit, over the bytes given; h is the running state. */
static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

/*
 * The fingerprint, defined so that any language can recompute it: 64-bit FNV-1a
 * (offset basis 0xcbf29ce484222325, prime 0x100000001b3) over, for each sample in
 * id order, its path relative to root (e.g. "cls/sub/x.jpg") with its terminating
 * NUL, then its size as 8 bytes little-endian, then its label as 4 bytes
 * little-endian. The root itself is not hashed, so a moved tree keeps its value.
 */
static uint64_t compute_fingerprint(const struct gm_dataset *ds)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (uint32_t i = 0; i < ds->count; i++) {
		const struct gm_sample *s = &ds->samples[i];
		const char *rel = ds->arena + s->name + ds->rel_skip;
		unsigned char num[12];

		/* Fixed little-endian encoding so the hash is the same on every host. */
		for (int k = 0; k < 8; k++)
			num[k] = (unsigned char)(s->size >> (8 * k));
		for (int k = 0; k < 4; k++)
			num[8 + k] = (unsigned char)(s->label >> (8 * k));
		h = fnv1a(h, rel, strlen(rel) + 1); /* the NUL separates path from numbers */
		h = fnv1a(h, num, sizeof(num));
	}
	return h;
}

/* Collect the class directories of root (open at rfd) into ds->class_names. */
static int find_classes(struct gm_dataset *ds, int rfd, char *err, size_t errlen)
{
	size_t names_len = 0, names_cap = 0, offs_cap = 0;
	struct dirent *de;
	int ret = 0, fd;
	DIR *d;

	fd = dup(rfd);
	if (fd < 0 || !(d = fdopendir(fd))) {
		ret = -errno;
		if (fd >= 0)
			close(fd);
		gm_errf(err, errlen, "gm_dataset_open: %s: %s", ds->root, strerror(-ret));
		return ret;
	}
	for (;;) {
		const char *name;
		size_t len;
		bool isdir;

		errno = 0;
		de = readdir(d);
		if (!de) {
			if (errno) {
				ret = -errno;
				gm_errf(err, errlen, "gm_dataset_open: %s: %s", ds->root,
					strerror(-ret));
			}
			break;
		}
		name = de->d_name;
		if (name[0] == '.' && (!name[1] || (name[1] == '.' && !name[2])))
			continue;
		isdir = de->d_type == DT_DIR;
		if (de->d_type == DT_LNK || de->d_type == DT_UNKNOWN) {
			struct stat st;

			isdir = !fstatat(dirfd(d), name, &st, 0) && S_ISDIR(st.st_mode);
		}
		if (!isdir)
			continue;
		len = strlen(name);
		if (ds->nclasses == UINT32_MAX) {
			ret = -EOVERFLOW;
			break;
		}
		if (grow((void **)&ds->class_names, &names_cap, names_len + len + 1, 1) ||
		    grow((void **)&ds->class_off, &offs_cap, (size_t)ds->nclasses + 1,
			 sizeof(*ds->class_off))) {
			ret = -ENOMEM;
			break;
		}
		memcpy(ds->class_names + names_len, name, len + 1);
		ds->class_off[ds->nclasses++] = names_len;
		names_len += len + 1;
	}
	closedir(d);
	if (!ret && ds->nclasses > 1) {
		sort_base = ds->class_names;
		qsort(ds->class_off, ds->nclasses, sizeof(*ds->class_off), cmp_off);
	}
	return ret;
}

/* --- WebDataset tar shards ---------------------------------------------------------
 *
 * A shard is a POSIX tar (ustar, GNU or pax) whose members are grouped into samples
 * by key: the member's path up to the first '.' of its file name ("a/000017.jpg" and
 * "a/000017.cls" are sample "a/000017"), members of one sample being consecutive, as
 * WebDataset writes them. A sample is kept when it has a .jpg/.jpeg member; its label
 * is the decimal integer in its .cls member (required). Other members (.json, .txt,
 * ...) are ignored, and so are keys with no image. Samples keep shard order, shards
 * sort by name.
 *
 * The tar headers are parsed here rather than through libarchive because the index
 * needs each member's byte offset in the shard, for the workers' io_uring reads at
 * offsets; a streaming extractor hands out bytes, not offsets. Each header's checksum
 * is verified, so a file that is not a tar (or a corrupt header) is an error naming
 * the shard and the offset, never a garbage index.
 */
#define TAR_BLOCK 512u
#define TAR_MAX_NAME 4096u     /* longest member path accepted (GNU 'L' / pax path) */
#define TAR_MAX_PAX (1u << 20) /* largest pax header read */
#define MAX_LABEL (1u << 20)   /* largest class number in a .cls member */

static bool tar_octal(const unsigned char *f, size_t n, uint64_t *v)
{
	size_t i = 0;
	uint64_t x = 0;

	if (f[0] & 0x80) { /* GNU base-256: big-endian, first byte's top bit set */
		if (f[0] != 0x80)
			return false; /* negative or > 2^56: not a size we accept */
		for (i = 1; i < n; i++) {
			if (x >> 56)
				return false;
			x = (x << 8) | f[i];
		}
		*v = x;
		return true;
	}
	while (i < n && f[i] == ' ')
		i++;
	if (i == n || f[i] < '0' || f[i] > '7')
		return false;
	for (; i < n && f[i] >= '0' && f[i] <= '7'; i++) {
		if (x >> 60)
			return false;
		x = x * 8 + (uint64_t)(f[i] - '0');
	}
	for (; i < n; i++)
		if (f[i] != ' ' && f[i] != 0)
			return false;
	*v = x;
	return true;
}

static bool tar_checksum_ok(const unsigned char *h)
{
	uint64_t want, sum = 0;

	if (!tar_octal(h + 148, 8, &want))
		return false;
	for (unsigned i = 0; i < TAR_BLOCK; i++)
		sum += (i >= 148 && i < 156) ? ' ' : h[i];
	return sum == want;
}

static bool all_zero(const unsigned char *h)
{
	for (unsigned i = 0; i < TAR_BLOCK; i++)
		if (h[i])
			return false;
	return true;
}

/* pread exactly n bytes; 0, -errno, or -ENODATA at end of file. */
static int pread_all(int fd, void *buf, size_t n, uint64_t off)
{
	size_t got = 0;
	while (got < n) {
		ssize_t r = pread(fd, (char *)buf + got, n - got, (off_t)(off + got));
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			return -ENODATA;
		got += (size_t)r;
	}
	return 0;
}

/* The sample being assembled from consecutive members of one key. */
struct tar_sample {
	char key[TAR_MAX_NAME + 1];
	char img[TAR_MAX_NAME + 1]; /* member name of the image, "" if none yet */
	uint64_t img_off, img_size;
	int64_t label; /* -1: no .cls yet */
};

/* Append "SHARD:member" and the sample for ts (if it has an image). */
static int tar_flush(struct gm_dataset *ds, struct tar_sample *ts, size_t shard_path,
		     const char *shard, uint32_t *max_label, char *err, size_t errlen)
{
	if (!ts->img[0])
		return 0; /* a key with no image (other modalities): not a sample */
	if (ts->label < 0) {
		gm_errf(err, errlen,
			"gm_dataset_open: %s: sample '%s' (%s) has no .cls member: WebDataset "
			"shards need one holding the class number",
			shard, ts->key, ts->img);
		return -EBADMSG;
	}
	size_t slen = strlen(shard), mlen = strlen(ts->img), need = slen + 1 + mlen + 1;
	if (ds->count == UINT32_MAX)
		return -EOVERFLOW;
	if (grow((void **)&ds->arena, &ds->arena_cap, ds->arena_len + need, 1) ||
	    grow((void **)&ds->samples, &ds->samples_cap, (size_t)ds->count + 1,
		 sizeof(*ds->samples)))
		return -ENOMEM;
	char *p = ds->arena + ds->arena_len;
	memcpy(p, shard, slen);
	p[slen] = ':';
	memcpy(p + slen + 1, ts->img, mlen + 1);
	struct gm_sample *s = &ds->samples[ds->count++];
	s->path = shard_path;
	s->name = ds->arena_len;
	s->offset = ts->img_off;
	s->size = ts->img_size;
	s->label = (uint32_t)ts->label;
	s->shard = ds->nshards - 1;
	ds->arena_len += need;
	if (s->size > ds->max_size)
		ds->max_size = s->size;
	if (s->label > *max_label)
		*max_label = s->label;
	return 0;
}

/* Pull "path" and "size" out of a pax extended header's records. */
static bool pax_parse(char *rec, size_t n, char *path, bool *have_path, uint64_t *size,
		      bool *have_size)
{
	size_t i = 0;
	while (i < n) {
		size_t len = 0, j = i;
		while (j < n && rec[j] >= '0' && rec[j] <= '9' && len < n)
			len = len * 10 + (size_t)(rec[j++] - '0');
		if (j >= n || rec[j] != ' ' || len <= j - i + 1 || len > n - i ||
		    rec[i + len - 1] != '\n')
			return false;
		char *kv = rec + j + 1, *end = rec + i + len - 1; /* end: the '\n' */
		char *eq = memchr(kv, '=', (size_t)(end - kv));
		if (!eq)
			return false;
		size_t klen = (size_t)(eq - kv), vlen = (size_t)(end - eq - 1);
		if (klen == 4 && !memcmp(kv, "path", 4)) {
			if (vlen == 0 || vlen > TAR_MAX_NAME)
				return false;
			memcpy(path, eq + 1, vlen);
			path[vlen] = 0;
			*have_path = true;
		} else if (klen == 4 && !memcmp(kv, "size", 4)) {
			uint64_t v = 0;
			if (vlen == 0 || vlen > 19)
				return false;
			for (size_t k = 0; k < vlen; k++) {
				char c = eq[1 + k];
				if (c < '0' || c > '9')
					return false;
				v = v * 10 + (uint64_t)(c - '0');
			}
			*size = v;
			*have_size = true;
		}
		i += len;
	}
	return true;
}

/* Index one shard (full path `shard`, already in the arena at shard_path). */
static int tar_index(struct gm_dataset *ds, const char *shard, size_t shard_path,
		     uint32_t *max_label, char *err, size_t errlen)
{
	unsigned char h[TAR_BLOCK];
	struct tar_sample *ts = calloc(1, sizeof(*ts));
	char *name = malloc(TAR_MAX_NAME + 1), *longname = malloc(TAR_MAX_NAME + 1);
	char *pax = NULL;
	bool have_long = false, pax_have_size = false;
	uint64_t pax_size = 0, off = 0;
	int ret = 0;
	struct stat st;

	int fd = open(shard, O_RDONLY | O_CLOEXEC);
	if (!ts || !name || !longname) {
		ret = -ENOMEM;
		goto out;
	}
	if (fd < 0 || fstat(fd, &st) != 0) {
		ret = -errno;
		gm_errf(err, errlen, "gm_dataset_open: %s: %s", shard, strerror(-ret));
		goto out;
	}
	ts->label = -1;
#define TAR_BAD(...)                                                                       \
	do {                                                                               \
		char what_[700];                                                           \
		snprintf(what_, sizeof(what_), __VA_ARGS__);                               \
		gm_errf(err, errlen, "gm_dataset_open: %s: offset %llu: %s", shard,        \
			(unsigned long long)off, what_);                                   \
		ret = -EBADMSG;                                                            \
		goto out;                                                                  \
	} while (0)
	for (;;) {
		if (off + TAR_BLOCK > (uint64_t)st.st_size) {
			if (off == (uint64_t)st.st_size && off > 0)
				break; /* no end-of-archive blocks: accepted */
			TAR_BAD("%s", off ? "truncated tar header (shard cut short?)"
					  : "not a tar file (shorter than one header)");
		}
		if ((ret = pread_all(fd, h, TAR_BLOCK, off))) {
			gm_errf(err, errlen, "gm_dataset_open: %s: %s", shard, strerror(-ret));
			goto out;
		}
		if (all_zero(h))
			break; /* end of archive */
		if (!tar_checksum_ok(h))
			TAR_BAD("%s", off ? "bad tar header checksum (corrupt shard?)"
					  : "not a tar file (bad header checksum)");
		uint64_t size;
		if (!tar_octal(h + 124, 12, &size))
			TAR_BAD("bad size field in the tar header");
		if (pax_have_size)
			size = pax_size;
		char type = (char)h[156];
		/* the member's name: GNU long name or pax path, else ustar prefix/name */
		if (have_long) {
			memcpy(name, longname, TAR_MAX_NAME + 1);
		} else {
			size_t nl = strnlen((const char *)h, 100), pl = 0;
			name[0] = 0;
			if (!memcmp(h + 257, "ustar", 5) && h[345]) {
				pl = strnlen((const char *)h + 345, 155);
				memcpy(name, h + 345, pl);
				name[pl++] = '/';
			}
			memcpy(name + pl, h, nl);
			name[pl + nl] = 0;
		}
		uint64_t data = off + TAR_BLOCK;
		if (size > (uint64_t)st.st_size - data)
			TAR_BAD("member '%.200s' of %llu bytes runs past the end of the shard"
				" (truncated?)",
				name, (unsigned long long)size);
		uint64_t next = data + (size + TAR_BLOCK - 1) / TAR_BLOCK * TAR_BLOCK;
		if (type == 'L' || type == 'x') {
			/* metadata for the next member */
			if (type == 'L' && (size == 0 || size > TAR_MAX_NAME))
				TAR_BAD("GNU long name of %llu bytes", (unsigned long long)size);
			if (type == 'x' && size > TAR_MAX_PAX)
				TAR_BAD("pax header of %llu bytes", (unsigned long long)size);
			char *buf = longname;
			if (type == 'x') {
				char *np = realloc(pax, size + 1);
				if (!np) {
					ret = -ENOMEM;
					goto out;
				}
				buf = pax = np;
			}
			if ((ret = pread_all(fd, buf, size, data))) {
				gm_errf(err, errlen, "gm_dataset_open: %s: %s", shard,
					strerror(-ret));
				goto out;
			}
			buf[size] = 0;
			if (type == 'L') {
				longname[strnlen(longname, size)] = 0;
				have_long = true;
			} else {
				bool hp = false;
				if (!pax_parse(pax, size, longname, &hp, &pax_size, &pax_have_size))
					TAR_BAD("malformed pax extended header");
				have_long = have_long || hp;
			}
			off = next;
			continue;
		}
		have_long = false;
		pax_have_size = false;
		off = next;
		if (type != '0' && type != '\0' && type != '7')
			continue; /* directories, links, global pax headers, ... */
		/* key = path up to the first '.' of the file name; ext = the rest */
		char *base = strrchr(name, '/');
		base = base ? base + 1 : name;
		char *dot = strchr(base, '.');
		const char *ext = dot ? dot + 1 : "";
		size_t klen = dot ? (size_t)(dot - name) : strlen(name);
		if (klen != strlen(ts->key) || memcmp(ts->key, name, klen)) {
			if ((ret = tar_flush(ds, ts, shard_path, shard, max_label, err, errlen)))
				goto out;
			memcpy(ts->key, name, klen);
			ts->key[klen] = 0;
			ts->img[0] = 0;
			ts->label = -1;
		}
		if (!strcasecmp(ext, "jpg") || !strcasecmp(ext, "jpeg")) {
			if (ts->img[0])
				TAR_BAD("sample '%.200s' has two images ('%.200s' and '%.200s')",
					ts->key, ts->img, name);
			strcpy(ts->img, name);
			ts->img_off = data;
			ts->img_size = size;
		} else if (!strcmp(ext, "cls")) {
			char num[32];
			size_t n = size < sizeof(num) - 1 ? (size_t)size : sizeof(num) - 1;
			if ((ret = pread_all(fd, num, n, data))) {
				gm_errf(err, errlen, "gm_dataset_open: %s: %s", shard,
					strerror(-ret));
				goto out;
			}
			num[n] = 0;
			char *e;
			errno = 0;
			long v = strtol(num, &e, 10);
			while (*e == ' ' || *e == '\n' || *e == '\r' || *e == '\t')
				e++;
			if (size >= sizeof(num) - 1 || e == num || *e || errno || v < 0 ||
			    v >= (long)MAX_LABEL)
				TAR_BAD("'%.200s': label '%.31s' is not a class number 0..%u", name,
					num, MAX_LABEL - 1);
			ts->label = v;
		}
	}
#undef TAR_BAD
	ret = tar_flush(ds, ts, shard_path, shard, max_label, err, errlen);
out:
	if (fd >= 0)
		close(fd);
	free(ts);
	free(name);
	free(longname);
	free(pax);
	return ret;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * Index the shards: root itself (one .tar file) or every *.tar file directly in
 * the root directory (rfd >= 0), in name order. -ENODATA when there is none.
 */
static int open_shards(struct gm_dataset *ds, int rfd, char *err, size_t errlen)
{
	char **names = NULL;
	size_t n = 0, cap = 0;
	int ret = 0;
	uint32_t max_label = 0;

	if (rfd < 0) {
		names = malloc(sizeof(*names));
		if (!names || !(names[0] = strdup(ds->root)))
			ret = -ENOMEM;
		else
			n = 1;
		const char *slash = strrchr(ds->root, '/');
		ds->rel_skip = slash ? (size_t)(slash - ds->root) + 1 : 0;
	} else {
		int fd = dup(rfd);
		DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
		if (!d) {
			ret = -errno;
			if (fd >= 0)
				close(fd);
			gm_errf(err, errlen, "gm_dataset_open: %s: %s", ds->root, strerror(-ret));
			return ret;
		}
		struct dirent *de;
		rewinddir(d); /* the fd's offset is shared with find_classes' dup */
		while (!ret && (de = readdir(d))) {
			size_t len = strlen(de->d_name);
			struct stat st;
			if (len < 5 || strcasecmp(de->d_name + len - 4, ".tar") ||
			    fstatat(dirfd(d), de->d_name, &st, 0) || !S_ISREG(st.st_mode))
				continue;
			if (grow((void **)&names, &cap, n + 1, sizeof(*names)) ||
			    asprintf(&names[n], "%s%s%s", ds->root,
				     ds->root[ds->root_len - 1] == '/' ? "" : "/", de->d_name) < 0)
				ret = -ENOMEM;
			else
				n++;
		}
		closedir(d);
		if (n > 1)
			qsort(names, n, sizeof(*names), cmp_str);
		ds->rel_skip = ds->root_len + (ds->root[ds->root_len - 1] != '/');
	}
	if (!ret && !n) {
		ret = -ENODATA;
		gm_errf(err, errlen,
			"gm_dataset_open: %s: no class directories (ImageFolder) and no .tar "
			"shards (WebDataset)",
			ds->root);
	}
	for (size_t i = 0; !ret && i < n; i++) {
		size_t len = strlen(names[i]);
		if (grow((void **)&ds->arena, &ds->arena_cap, ds->arena_len + len + 1, 1)) {
			ret = -ENOMEM;
			break;
		}
		size_t at = ds->arena_len;
		memcpy(ds->arena + at, names[i], len + 1);
		ds->arena_len += len + 1;
		if (!ds->shard_off && !(ds->shard_off = malloc(n * sizeof(*ds->shard_off)))) {
			ret = -ENOMEM;
			break;
		}
		ds->shard_off[ds->nshards++] = at;
		uint32_t before = ds->count;
		ret = tar_index(ds, names[i], at, &max_label, err, errlen);
		if (!ret && ds->count == before && n == 1) {
			ret = -ENODATA;
			gm_errf(err, errlen, "gm_dataset_open: %s: no .jpg/.jpeg members", names[i]);
		}
	}
	if (!ret && !ds->count) {
		ret = -ENODATA;
		gm_errf(err, errlen, "gm_dataset_open: %s: no .jpg/.jpeg members in any shard",
			ds->root);
	}
	/* classes: 0 .. max label, named by their number */
	if (!ret) {
		size_t names_cap = 0, len = 0;
		ds->nclasses = max_label + 1;
		ds->class_off = malloc(ds->nclasses * sizeof(*ds->class_off));
		if (!ds->class_off)
			ret = -ENOMEM;
		for (uint32_t c = 0; !ret && c < ds->nclasses; c++) {
			char num[16];
			int k = snprintf(num, sizeof(num), "%u", c);
			if (grow((void **)&ds->class_names, &names_cap, len + (size_t)k + 1, 1)) {
				ret = -ENOMEM;
				break;
			}
			memcpy(ds->class_names + len, num, (size_t)k + 1);
			ds->class_off[c] = len;
			len += (size_t)k + 1;
		}
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	if (!ret)
		ds->sharded = true;
	return ret;
}

int gm_dataset_open(struct gm_dataset **out, const char *root, char *err, size_t errlen)
{
	struct walker w = {.err = err, .errlen = errlen};
	struct gm_dataset *ds;
	char *class_path = NULL;
	uint32_t first_empty = UINT32_MAX, nempty = 0;
	int ret, rfd;

	if (err && errlen)
		err[0] = '\0';
	if (out)
		*out = NULL;
	if (!out || !root || !root[0]) {
		gm_errf(err, errlen, "gm_dataset_open: empty root path");
		return -EINVAL;
	}
	ds = calloc(1, sizeof(*ds));
	if (!ds)
		return -ENOMEM;
	ds->root = strdup(root);
	if (!ds->root) {
		ret = -ENOMEM;
		goto out_free;
	}
	ds->root_len = strlen(ds->root);
	while (ds->root_len > 1 && ds->root[ds->root_len - 1] == '/')
		ds->root[--ds->root_len] = '\0';

	rfd = open(ds->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rfd < 0 && errno == ENOTDIR && ds->root_len > 4 &&
	    !strcasecmp(ds->root + ds->root_len - 4, ".tar")) {
		ret = open_shards(ds, -1, err, errlen); /* root is one shard */
		if (ret)
			goto out_free;
		ds->fingerprint = compute_fingerprint(ds);
		*out = ds;
		return 0;
	}
	if (rfd < 0) {
		ret = -errno;
		gm_errf(err, errlen, "gm_dataset_open: %s: %s%s", ds->root, strerror(-ret),
			ret == -ENOTDIR ? " (want an ImageFolder directory, a directory of .tar"
					  " shards, or one .tar shard)"
					: "");
		goto out_free;
	}
	ret = find_classes(ds, rfd, err, errlen);
	if (ret)
		goto out_close_root;
	if (!ds->nclasses) {
		/* no class directories: a directory of WebDataset shards? */
		ret = open_shards(ds, rfd, err, errlen);
		if (ret)
			goto out_close_root;
		ds->fingerprint = compute_fingerprint(ds);
		close(rfd);
		*out = ds;
		return 0;
	}

	for (uint32_t c = 0; c < ds->nclasses; c++) {
		const char *cname = ds->class_names + ds->class_off[c];
		uint32_t before = ds->count;
		size_t rel;
		int cfd;

		free(class_path);
		if (asprintf(&class_path, "%s%s%s", ds->root,
			     ds->root[ds->root_len - 1] == '/' ? "" : "/", cname) < 0) {
			class_path = NULL;
			ret = -ENOMEM;
			goto out_walker;
		}
		w.class_path = class_path;
		w.tmp_len = 0;
		w.nfiles = 0;
		w.ndirs = 0;
		rel = tmp_put(&w, "", 0);
		if (rel == (size_t)-1) {
			ret = -ENOMEM;
			goto out_walker;
		}
		cfd = openat(rfd, cname, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (cfd < 0) {
			ret = -errno;
			gm_errf(err, errlen, "gm_dataset_open: %s: %s", class_path, strerror(-ret));
			goto out_walker;
		}
		ret = walk(&w, cfd, rel);
		if (ret)
			goto out_walker;
		ret = emit_class(ds, &w, c);
		if (ret) {
			gm_errf(err, errlen, "gm_dataset_open: %s: %s", class_path, strerror(-ret));
			goto out_walker;
		}
		if (ds->count == before) {
			if (first_empty == UINT32_MAX)
				first_empty = c;
			nempty++;
		}
	}
	if (!ds->count) {
		ret = -ENODATA;
		gm_errf(err, errlen, "gm_dataset_open: %s: no .jpg/.jpeg files in any class",
			ds->root);
		goto out_walker;
	}
	if (nempty) {
		ret = -ENODATA;
		gm_errf(err, errlen,
			"gm_dataset_open: %s%s%s: class directory has no .jpg/.jpeg files"
			" (%u empty class%s)",
			ds->root, ds->root[ds->root_len - 1] == '/' ? "" : "/",
			ds->class_names + ds->class_off[first_empty], nempty,
			nempty == 1 ? "" : "es");
		goto out_walker;
	}
	ds->rel_skip = ds->root_len + (ds->root[ds->root_len - 1] != '/');
	ds->fingerprint = compute_fingerprint(ds);
	*out = ds;
	ret = 0;

out_walker:
	free(class_path);
	free(w.tmp);
	free(w.files);
	free(w.dirs);
	free(w.anc);
out_close_root:
	close(rfd);
	if (!ret)
		return 0;
out_free:
	if (ret == -ENOMEM && err && errlen && !err[0])
		gm_errf(err, errlen, "gm_dataset_open: %s: out of memory", root);
	gm_dataset_close(ds);
	return ret;
}

void gm_dataset_close(struct gm_dataset *d)
{
	if (!d)
		return;
	free(d->root);
	free(d->arena);
	free(d->samples);
	free(d->class_names);
	free(d->class_off);
	free(d->shard_off);
	free(d);
}

uint32_t gm_dataset_num_shards(const struct gm_dataset *d)
{
	return d->nshards;
}

const char *gm_dataset_shard_path(const struct gm_dataset *d, uint32_t k)
{
	return k < d->nshards ? d->arena + d->shard_off[k] : NULL;
}

uint32_t gm_dataset_shard(const struct gm_dataset *d, uint32_t id)
{
	return id < d->count && d->sharded ? d->samples[id].shard : UINT32_MAX;
}

bool gm_dataset_sharded(const struct gm_dataset *d)
{
	return d->sharded;
}

const char *gm_dataset_name(const struct gm_dataset *d, uint32_t id)
{
	return id < d->count ? d->arena + d->samples[id].name : NULL;
}

uint64_t gm_dataset_offset(const struct gm_dataset *d, uint32_t id)
{
	return id < d->count ? d->samples[id].offset : 0;
}

uint32_t gm_dataset_count(const struct gm_dataset *d)
{
	return d->count;
}

uint32_t gm_dataset_num_classes(const struct gm_dataset *d)
{
	return d->nclasses;
}

const char *gm_dataset_class_name(const struct gm_dataset *d, uint32_t cls)
{
	return cls < d->nclasses ? d->class_names + d->class_off[cls] : NULL;
}

const char *gm_dataset_root(const struct gm_dataset *d)
{
	return d->root;
}

const char *gm_dataset_path(const struct gm_dataset *d, uint32_t id)
{
	return id < d->count ? d->arena + d->samples[id].path : NULL;
}

uint64_t gm_dataset_file_size(const struct gm_dataset *d, uint32_t id)
{
	return id < d->count ? d->samples[id].size : 0;
}

uint32_t gm_dataset_label(const struct gm_dataset *d, uint32_t id)
{
	return id < d->count ? d->samples[id].label : UINT32_MAX;
}

uint64_t gm_dataset_max_file_size(const struct gm_dataset *d)
{
	return d->max_size;
}

uint64_t gm_dataset_fingerprint(const struct gm_dataset *d)
{
	return d->fingerprint;
}
