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
 * What it does not do: tar shards (WebDataset), other image extensions, watching
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
	size_t path;   /* offset of the full path in the arena */
	uint64_t size; /* bytes, from stat at indexing time */
	uint32_t label;
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
	size_t skip = ds->root_len + (ds->root[ds->root_len - 1] != '/');

	for (uint32_t i = 0; i < ds->count; i++) {
		const struct gm_sample *s = &ds->samples[i];
		const char *rel = ds->arena + s->path + skip;
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
	if (rfd < 0) {
		ret = -errno;
		gm_errf(err, errlen, "gm_dataset_open: %s: %s", ds->root, strerror(-ret));
		goto out_free;
	}
	ret = find_classes(ds, rfd, err, errlen);
	if (ret)
		goto out_close_root;
	if (!ds->nclasses) {
		ret = -ENODATA;
		gm_errf(err, errlen, "gm_dataset_open: %s: no class directories", ds->root);
		goto out_close_root;
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
	free(d);
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
