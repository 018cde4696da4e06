/*
 * dataset.c - the sample index of an ImageFolder tree or of WebDataset tar shards
 * (see dataset.h).
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
 * Tar shards (WebDataset): root is one .tar file (a regular file: a FIFO or device
 * named there is refused before anything opens it), or a directory of them with no
 * class directory. tar.c reads the format and hands out each sample (its member
 * name, offset, size and label); this file stores them like the files of a tree.
 *
 * The fingerprint (compute_fingerprint) is a byte-wise FNV-1a over every sample's
 * relative path, size and label, defined so that any language can recompute it.
 *
 * Bounded opens (gm_dataset_open_bounded, for an agent indexing a tree a peer
 * named): every directory entry read and every tar member indexed spends one
 * of max_entries (-EFBIG past it), and a confined index refuses (-EXDEV) any
 * symlink that does not resolve beneath the root: each symlink met (d_type
 * DT_LNK or DT_UNKNOWN) is first opened with openat2(RESOLVE_BENEATH) from the
 * root's fd, which fails on an absolute target or a ".." above the root without
 * looking outside it. The index of a tree that passes is the unconfined one.
 *
 * What it does not do: parse tar (tar.c does), compressed shards (.tar.gz), other
 * image extensions, watching the tree for changes. The index is built once and then
 * only read.
 */
#include "goldminer/dataset.h"
#include "goldminer/tar.h"
#include "goldminer/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/syscall.h>
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
	uint64_t left; /* entries this index may still read (gm_dataset_open_bounded) */
	int beneath;   /* the root's fd when symlinks must stay below it, else -1 */
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
	const char *class_name; /* the same relative to the root */
	struct gm_dataset *ds;
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

static int path_error(struct walker *w, size_t rel, int ret);

/* One more entry read: 0, or -EFBIG when the index's bound is spent. */
static int spend(struct gm_dataset *ds)
{
	if (!ds->left)
		return -EFBIG;
	ds->left--;
	return 0;
}

/*
 * A confined index: does the entry at rel (relative to the root; a symlink or
 * an entry of unknown type) resolve beneath the root? 0 (yes, or it is gone or
 * broken: the caller skips those as before), -EXDEV (it leads out, message in
 * err naming full), or -errno. Unconfined: 0 at once.
 */
static int stays_inside(struct gm_dataset *ds, const char *rel, const char *full, char *err,
			size_t errlen)
{
	struct open_how how = {.flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_BENEATH};
	long fd;

	if (ds->beneath < 0)
		return 0;
	fd = syscall(SYS_openat2, ds->beneath, rel, &how, sizeof(how));
	if (fd >= 0) {
		close((int)fd);
		return 0;
	}
	if (errno == ENOENT || errno == ELOOP)
		return 0;
	if (errno == EXDEV) {
		gm_errf(err, errlen,
			"gm_dataset_open: %s: a symbolic link that leads out of %s (this index "
			"is confined to its root)",
			full, ds->root);
		return -EXDEV;
	}
	int ret = -errno;
	gm_errf(err, errlen, "gm_dataset_open: %s: %s%s", full, strerror(-ret),
		ret == -ENOSYS ? " (a confined index needs openat2, Linux 5.6)" : "");
	return ret;
}

/* stays_inside for entry name of the directory tmp[rel] of the walked class. */
static int entry_inside(struct walker *w, size_t rel, const char *name)
{
	char r[PATH_MAX], f[PATH_MAX];

	if (w->ds->beneath < 0)
		return 0;
	if ((size_t)snprintf(r, sizeof(r), "%s%s/%s", w->class_name, w->tmp + rel, name) >=
		sizeof(r) ||
	    (size_t)snprintf(f, sizeof(f), "%s%s/%s", w->class_path, w->tmp + rel, name) >=
		sizeof(f))
		return path_error(w, rel, -ENAMETOOLONG);
	return stays_inside(w->ds, r, f, w->err, w->errlen);
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

/* A directory error, naming the directory (tmp[rel], relative to the class). */
static int path_error(struct walker *w, size_t rel, int ret)
{
	gm_errf(w->err, w->errlen, "gm_dataset_open: %s%s: %s", w->class_path, w->tmp + rel,
		strerror(-ret));
	return ret;
}

/*
 * Enter the directory open at fd: push it on the ancestor stack unless it is already
 * there (a symlink cycle). 0 (pushed), 1 (a cycle: fd closed, skip it), or -errno
 * (fd closed).
 */
static int enter_dir(struct walker *w, int fd, size_t rel)
{
	struct stat st;

	if (fstat(fd, &st)) {
		int ret = -errno;
		close(fd);
		return path_error(w, rel, ret);
	}
	for (unsigned i = 0; i < w->nanc; i++)
		if (w->anc[i].dev == st.st_dev && w->anc[i].ino == st.st_ino) {
			close(fd); /* a symlink cycle: already being walked above */
			return 1;
		}
	if (grow((void **)&w->anc, &w->anc_cap, w->nanc + 1, sizeof(*w->anc))) {
		close(fd);
		return -ENOMEM;
	}
	w->anc[w->nanc].dev = st.st_dev;
	w->anc[w->nanc].ino = st.st_ino;
	w->nanc++;
	return 0;
}

enum entry_kind { ENTRY_SKIP, ENTRY_DIR, ENTRY_JPEG };

/*
 * What entry de of directory d is: a subdirectory, a JPEG regular file (*size set)
 * or something to skip, symlinks followed. d_type saves a stat for plain
 * directories and for regular files that are not JPEGs. 0 or -errno.
 */
static int classify(DIR *d, const struct dirent *de, size_t len, enum entry_kind *kind,
		    uint64_t *size)
{
	const char *name = de->d_name;
	struct stat fst;

	*kind = ENTRY_SKIP;
	if (de->d_type == DT_DIR) {
		*kind = ENTRY_DIR;
		return 0;
	}
	if (de->d_type == DT_REG && !is_jpeg_name(name, len))
		return 0;
	if (de->d_type != DT_REG && de->d_type != DT_LNK && de->d_type != DT_UNKNOWN)
		return 0; /* FIFO, socket, device: never an image */
	if (fstatat(dirfd(d), name, &fst, 0)) {
		if (errno == ENOENT || errno == ELOOP)
			return 0; /* broken symlink, or raced away */
		return -errno;
	}
	if (S_ISDIR(fst.st_mode))
		*kind = ENTRY_DIR;
	else if (S_ISREG(fst.st_mode) && is_jpeg_name(name, len))
		*kind = ENTRY_JPEG;
	*size = (uint64_t)fst.st_size;
	return 0;
}

/* Subdirectory names of one directory, as offsets in the walker's tmp. */
struct subdirs {
	size_t *off;
	size_t n, cap;
};

/*
 * Read directory d (tmp[rel]): its JPEG files appended to w->files, its
 * subdirectories to subs. 0 or -errno (a read error names the directory).
 */
static int read_entries(struct walker *w, DIR *d, size_t rel, struct subdirs *subs)
{
	struct dirent *de;

	for (;;) {
		enum entry_kind kind;
		uint64_t size = 0;
		size_t len, off;
		int ret;

		errno = 0;
		de = readdir(d);
		if (!de)
			return errno ? path_error(w, rel, -errno) : 0;
		if (de->d_name[0] == '.' &&
		    (!de->d_name[1] || (de->d_name[1] == '.' && !de->d_name[2])))
			continue;
		if ((ret = spend(w->ds)))
			return ret;
		if ((de->d_type == DT_LNK || de->d_type == DT_UNKNOWN) &&
		    (ret = entry_inside(w, rel, de->d_name)))
			return ret;
		len = strlen(de->d_name);
		if ((ret = classify(d, de, len, &kind, &size)))
			return path_error(w, rel, ret);
		if (kind == ENTRY_SKIP)
			continue;
		off = tmp_put(w, de->d_name, len);
		if (off == (size_t)-1)
			return -ENOMEM;
		if (kind == ENTRY_DIR) {
			if (grow((void **)&subs->off, &subs->cap, subs->n + 1, sizeof(*subs->off)))
				return -ENOMEM;
			subs->off[subs->n++] = off;
			continue;
		}
		if (grow((void **)&w->files, &w->files_cap, (size_t)w->nfiles + 1,
			 sizeof(*w->files)))
			return -ENOMEM;
		w->files[w->nfiles].name = off;
		w->files[w->nfiles].size = size;
		w->nfiles++;
	}
}

/* Record directory tmp[rel] with its files w->files[first..], sorted. 0 or -ENOMEM. */
static int record_dir(struct walker *w, size_t rel, uint32_t first)
{
	struct walk_dir *dir;

	sort_base = w->tmp;
	if (w->nfiles - first > 1)
		qsort(w->files + first, w->nfiles - first, sizeof(*w->files), cmp_file);
	if (grow((void **)&w->dirs, &w->dirs_cap, (size_t)w->ndirs + 1, sizeof(*w->dirs)))
		return -ENOMEM;
	dir = &w->dirs[w->ndirs++];
	dir->rel = rel;
	dir->first = first;
	dir->nfiles = w->nfiles - first;
	return 0;
}

static int walk(struct walker *w, int fd, size_t rel);

/* Walk the subdirectories of d (tmp[rel]) in sorted order, so that errors are
 * reported deterministically. 0 or -errno. */
static int walk_subdirs(struct walker *w, DIR *d, size_t rel, struct subdirs *subs)
{
	sort_base = w->tmp;
	if (subs->n > 1)
		qsort(subs->off, subs->n, sizeof(*subs->off), cmp_off);
	for (size_t i = 0; i < subs->n; i++) {
		size_t rl = strlen(w->tmp + rel), nl = strlen(w->tmp + subs->off[i]);
		size_t sub_rel;
		char *p;
		int sfd, ret;

		/* Build "<rel>/<name>" at the end of tmp (tmp may move: offsets only). */
		if (grow((void **)&w->tmp, &w->tmp_cap, w->tmp_len + rl + nl + 2, 1))
			return -ENOMEM;
		sub_rel = w->tmp_len;
		p = w->tmp + sub_rel;
		memcpy(p, w->tmp + rel, rl);
		p[rl] = '/';
		memcpy(p + rl + 1, w->tmp + subs->off[i], nl + 1);
		w->tmp_len += rl + nl + 2;

		sfd = openat(dirfd(d), w->tmp + subs->off[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (sfd < 0) {
			if (errno == ENOENT)
				continue; /* raced away */
			return path_error(w, sub_rel, -errno);
		}
		if ((ret = walk(w, sfd, sub_rel)))
			return ret;
	}
	return 0;
}

/*
 * Walk the directory open at fd (ownership taken), whose path relative to the class
 * dir is tmp[rel] ("" for the class dir itself). Records the directory, its sorted
 * JPEG files, then recurses into its subdirectories.
 */
static int walk(struct walker *w, int fd, size_t rel)
{
	struct subdirs subs = {0};
	uint32_t first = w->nfiles;
	int ret;
	DIR *d;

	ret = enter_dir(w, fd, rel);
	if (ret)
		return ret > 0 ? 0 : ret;
	d = fdopendir(fd);
	if (!d) {
		ret = path_error(w, rel, -errno);
		close(fd);
	} else {
		ret = read_entries(w, d, rel, &subs);
		if (!ret)
			ret = record_dir(w, rel, first);
		if (!ret)
			ret = walk_subdirs(w, d, rel, &subs);
		closedir(d);
	}
	free(subs.off);
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

/*
 * The standard 64-bit FNV-1a, byte by byte, over the bytes given; h is the running
 * state. Used for the dataset fingerprint only. (The batch checksum is another hash,
 * word-wise and not FNV-1a: gm_checksum64 in checksum.c.)
 */
static uint64_t fingerprint_fnv1a64(uint64_t h, const void *p, size_t n)
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
		h = fingerprint_fnv1a64(h, rel,
					strlen(rel) + 1); /* the NUL separates path from numbers */
		h = fingerprint_fnv1a64(h, num, sizeof(num));
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
		if ((ret = spend(ds)))
			break;
		isdir = de->d_type == DT_DIR;
		if (de->d_type == DT_LNK || de->d_type == DT_UNKNOWN) {
			struct stat st;
			char f[PATH_MAX];

			snprintf(f, sizeof(f), "%s/%s", ds->root, name);
			if ((ret = stays_inside(ds, name, f, err, errlen)))
				break;
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
 * The tar format (headers, long names, grouping members into samples by key, .cls
 * labels) is tar.c's; this section keeps what the index needs from each sample:
 * "SHARD:member" as its name, the shard as its path, its offset and size. Samples
 * keep shard order, shards sort by name; classes are 0..max label.
 */

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The shard being indexed, for add_shard_sample. */
struct shard_ctx {
	struct gm_dataset *ds;
	const char *shard; /* its full path */
	size_t shard_path; /* the same, in the arena */
	uint32_t *max_label;
};

/* gm_tar_index's callback: append "SHARD:member" and the sample. 0 or -errno. */
static int add_shard_sample(void *ctx, const struct gm_tar_sample *ts)
{
	struct shard_ctx *c = ctx;
	struct gm_dataset *ds = c->ds;
	size_t slen = strlen(c->shard), mlen = strlen(ts->member), need = slen + 1 + mlen + 1;

	if (ds->count == UINT32_MAX)
		return -EOVERFLOW;
	if (spend(ds))
		return -EFBIG;
	if (grow((void **)&ds->arena, &ds->arena_cap, ds->arena_len + need, 1) ||
	    grow((void **)&ds->samples, &ds->samples_cap, (size_t)ds->count + 1,
		 sizeof(*ds->samples)))
		return -ENOMEM;
	char *p = ds->arena + ds->arena_len;
	memcpy(p, c->shard, slen);
	p[slen] = ':';
	memcpy(p + slen + 1, ts->member, mlen + 1);
	struct gm_sample *s = &ds->samples[ds->count++];
	s->path = c->shard_path;
	s->name = ds->arena_len;
	s->offset = ts->offset;
	s->size = ts->size;
	s->label = ts->label;
	s->shard = ds->nshards - 1;
	ds->arena_len += need;
	if (s->size > ds->max_size)
		ds->max_size = s->size;
	if (s->label > *c->max_label)
		*c->max_label = s->label;
	return 0;
}

/*
 * The shard paths (malloc'd, *names, *n): root itself when rfd < 0 (root is one
 * .tar file), else every *.tar regular file directly in the root directory open at
 * rfd, in name order. Sets ds->rel_skip. 0 or -errno.
 */
static int list_shards(struct gm_dataset *ds, int rfd, char ***names, size_t *n, char *err,
		       size_t errlen)
{
	size_t cap = 0;
	int ret = 0;

	if (rfd < 0) {
		/* Before anything opens it: opening a FIFO for reading blocks until
		 * someone writes, a device may never end. */
		struct stat st;
		if (stat(ds->root, &st) == 0 && !S_ISREG(st.st_mode)) {
			gm_errf(err, errlen,
				"gm_dataset_open: %s: not a regular file (%s); a .tar shard must "
				"be a regular file",
				ds->root,
				S_ISFIFO(st.st_mode)   ? "a FIFO"
				: S_ISSOCK(st.st_mode) ? "a socket"
						       : "a device or other special file");
			return -EINVAL;
		}
		const char *slash = strrchr(ds->root, '/');
		ds->rel_skip = slash ? (size_t)(slash - ds->root) + 1 : 0;
		*names = malloc(sizeof(**names));
		if (!*names || !((*names)[0] = strdup(ds->root)))
			return -ENOMEM;
		*n = 1;
		return 0;
	}
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
		/* a confined index checked every link here in find_classes */
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") && (ret = spend(ds)))
			break;
		if (len < 5 || strcasecmp(de->d_name + len - 4, ".tar") ||
		    fstatat(dirfd(d), de->d_name, &st, 0) || !S_ISREG(st.st_mode))
			continue;
		if (grow((void **)names, &cap, *n + 1, sizeof(**names)) ||
		    asprintf(&(*names)[*n], "%s%s%s", ds->root,
			     ds->root[ds->root_len - 1] == '/' ? "" : "/", de->d_name) < 0)
			ret = -ENOMEM;
		else
			(*n)++;
	}
	closedir(d);
	if (*n > 1)
		qsort(*names, *n, sizeof(**names), cmp_str);
	ds->rel_skip = ds->root_len + (ds->root[ds->root_len - 1] != '/');
	return ret;
}

/* Index the n shards in order, each path copied into the arena. 0 or -errno. */
static int index_shards(struct gm_dataset *ds, char **names, size_t n, uint32_t *max_label,
			char *err, size_t errlen)
{
	int ret = 0;

	for (size_t i = 0; !ret && i < n; i++) {
		size_t len = strlen(names[i]);
		if (grow((void **)&ds->arena, &ds->arena_cap, ds->arena_len + len + 1, 1))
			return -ENOMEM;
		size_t at = ds->arena_len;
		memcpy(ds->arena + at, names[i], len + 1);
		ds->arena_len += len + 1;
		if (!ds->shard_off && !(ds->shard_off = malloc(n * sizeof(*ds->shard_off))))
			return -ENOMEM;
		ds->shard_off[ds->nshards++] = at;
		uint32_t before = ds->count;
		struct shard_ctx c = {ds, names[i], at, max_label};
		ret = gm_tar_index(names[i], "gm_dataset_open", add_shard_sample, &c, err, errlen);
		if (!ret && ds->count == before && n == 1) {
			ret = -ENODATA;
			gm_errf(err, errlen, "gm_dataset_open: %s: no .jpg/.jpeg members",
				names[i]);
		}
	}
	return ret;
}

/* Classes of a sharded dataset: 0 .. max_label, named by their number. */
static int number_classes(struct gm_dataset *ds, uint32_t max_label)
{
	size_t names_cap = 0, len = 0;

	ds->nclasses = max_label + 1;
	ds->class_off = malloc(ds->nclasses * sizeof(*ds->class_off));
	if (!ds->class_off)
		return -ENOMEM;
	for (uint32_t c = 0; c < ds->nclasses; c++) {
		char num[16];
		int k = snprintf(num, sizeof(num), "%u", c);
		if (grow((void **)&ds->class_names, &names_cap, len + (size_t)k + 1, 1))
			return -ENOMEM;
		memcpy(ds->class_names + len, num, (size_t)k + 1);
		ds->class_off[c] = len;
		len += (size_t)k + 1;
	}
	return 0;
}

/*
 * Index the shards: root itself (one .tar file) or every *.tar file directly in
 * the root directory (rfd >= 0), in name order. -ENODATA when there is none.
 */
static int open_shards(struct gm_dataset *ds, int rfd, char *err, size_t errlen)
{
	char **names = NULL;
	size_t n = 0;
	uint32_t max_label = 0;
	int ret;

	ret = list_shards(ds, rfd, &names, &n, err, errlen);
	if (!ret && !n) {
		ret = -ENODATA;
		gm_errf(err, errlen,
			"gm_dataset_open: %s: no class directories (ImageFolder) and no .tar "
			"shards (WebDataset)",
			ds->root);
	}
	if (!ret)
		ret = index_shards(ds, names, n, &max_label, err, errlen);
	if (!ret && !ds->count) {
		ret = -ENODATA;
		gm_errf(err, errlen, "gm_dataset_open: %s: no .jpg/.jpeg members in any shard",
			ds->root);
	}
	if (!ret)
		ret = number_classes(ds, max_label);
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	if (!ret)
		ds->sharded = true;
	return ret;
}

/* --- ImageFolder trees ------------------------------------------------------------ */

/*
 * Walk class c (root/CLASS, root open at rfd) and append its files to the index.
 * *class_path: the class's full path (replaced; the caller frees). 0 or -errno.
 */
static int walk_class(struct gm_dataset *ds, struct walker *w, int rfd, uint32_t c,
		      char **class_path, char *err, size_t errlen)
{
	const char *cname = ds->class_names + ds->class_off[c];
	size_t rel;
	int cfd, ret;

	free(*class_path);
	if (asprintf(class_path, "%s%s%s", ds->root, ds->root[ds->root_len - 1] == '/' ? "" : "/",
		     cname) < 0) {
		*class_path = NULL;
		return -ENOMEM;
	}
	w->class_path = *class_path;
	w->class_name = cname;
	w->tmp_len = 0;
	w->nfiles = 0;
	w->ndirs = 0;
	rel = tmp_put(w, "", 0);
	if (rel == (size_t)-1)
		return -ENOMEM;
	cfd = openat(rfd, cname, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (cfd < 0) {
		ret = -errno;
		gm_errf(err, errlen, "gm_dataset_open: %s: %s", *class_path, strerror(-ret));
		return ret;
	}
	ret = walk(w, cfd, rel);
	if (ret)
		return ret;
	ret = emit_class(ds, w, c);
	if (ret)
		gm_errf(err, errlen, "gm_dataset_open: %s: %s", *class_path, strerror(-ret));
	return ret;
}

/*
 * Index the classes found by find_classes, in label order. -ENODATA when there is
 * no JPEG at all or a class has none (torchvision raises for empty classes too).
 */
static int walk_classes(struct gm_dataset *ds, int rfd, char *err, size_t errlen)
{
	struct walker w = {.err = err, .errlen = errlen, .ds = ds};
	char *class_path = NULL;
	uint32_t first_empty = UINT32_MAX, nempty = 0;
	int ret = 0;

	for (uint32_t c = 0; !ret && c < ds->nclasses; c++) {
		uint32_t before = ds->count;
		ret = walk_class(ds, &w, rfd, c, &class_path, err, errlen);
		if (!ret && ds->count == before) {
			if (first_empty == UINT32_MAX)
				first_empty = c;
			nempty++;
		}
	}
	if (!ret && !ds->count) {
		ret = -ENODATA;
		gm_errf(err, errlen, "gm_dataset_open: %s: no .jpg/.jpeg files in any class",
			ds->root);
	} else if (!ret && nempty) {
		ret = -ENODATA;
		gm_errf(err, errlen,
			"gm_dataset_open: %s%s%s: class directory has no .jpg/.jpeg files"
			" (%u empty class%s)",
			ds->root, ds->root[ds->root_len - 1] == '/' ? "" : "/",
			ds->class_names + ds->class_off[first_empty], nempty,
			nempty == 1 ? "" : "es");
	}
	ds->rel_skip = ds->root_len + (ds->root[ds->root_len - 1] != '/');
	free(class_path);
	free(w.tmp);
	free(w.files);
	free(w.dirs);
	free(w.anc);
	return ret;
}

int gm_dataset_open(struct gm_dataset **out, const char *root, char *err, size_t errlen)
{
	return gm_dataset_open_bounded(out, root, NULL, err, errlen);
}

int gm_dataset_open_bounded(struct gm_dataset **out, const char *root,
			    const struct gm_dataset_bounds *b, char *err, size_t errlen)
{
	struct gm_dataset *ds;
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
	ds->left = b && b->max_entries ? b->max_entries : UINT64_MAX;
	ds->beneath = -1;
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
	} else if (rfd < 0) {
		ret = -errno;
		gm_errf(err, errlen, "gm_dataset_open: %s: %s%s", ds->root, strerror(-ret),
			ret == -ENOTDIR ? " (want an ImageFolder directory, a directory of .tar"
					  " shards, or one .tar shard)"
					: "");
	} else {
		ds->beneath = b && b->confined ? rfd : -1;
		ret = find_classes(ds, rfd, err, errlen);
		/* no class directories: a directory of WebDataset shards? */
		if (!ret)
			ret = ds->nclasses ? walk_classes(ds, rfd, err, errlen)
					   : open_shards(ds, rfd, err, errlen);
		close(rfd);
		ds->beneath = -1;
	}
	if (ret == -EFBIG)
		gm_errf(err, errlen,
			"gm_dataset_open: %s: more than %" PRIu64 " directory entries and shard "
			"members (the bound of this index)",
			ds->root, b ? b->max_entries : 0);
	if (ret)
		goto out_free;
	ds->fingerprint = compute_fingerprint(ds);
	*out = ds;
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
