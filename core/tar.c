/*
 * tar.c - WebDataset tar shards, read and written (see tar.h).
 *
 * Reading: a shard is walked header by header with pread (a header is 512 bytes;
 * the data is never read, except pax records, GNU long names and .cls labels).
 * Members are grouped into samples by key, members of one sample being
 * consecutive, as WebDataset writes them. A sample is kept when it has a
 * .jpg/.jpeg member; its label is the decimal integer in its .cls member
 * (required). Other members (.json, .txt, ...) are ignored, and so are keys with
 * no image. Samples keep shard order.
 *
 * The tar headers are parsed here rather than through libarchive because the index
 * needs each member's byte offset in the shard, for the workers' io_uring reads at
 * offsets; a streaming extractor hands out bytes, not offsets. Each header's checksum
 * is verified, so a file that is not a tar (or a corrupt header) is an error naming
 * the shard and the offset, never a garbage index.
 *
 * Writing is a few lines (ustar headers, GNU long names), for the same reason: what
 * is written must match what the reader indexes, and the format is small and fixed.
 *
 * What it does not do: compressed shards (.tar.gz), sparse files, keeping anything
 * of a shard (the caller's on_sample stores what it needs), writing pax headers.
 */
#include "goldminer/tar.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "goldminer/util.h"

#define TAR_BLOCK    512u
#define TAR_MAX_NAME (GM_TAR_MAX_NAME + 1) /* longest member path read (GNU 'L' / pax) */
#define TAR_MAX_PAX  (1u << 20)		   /* largest pax header read */
#define MAX_LABEL    (1u << 20)		   /* largest class number in a .cls member */

/* ---- reading: header fields --------------------------------------------------- */

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

/* ---- reading: one shard ------------------------------------------------------- */

/* The sample being assembled from consecutive members of one key. */
struct tar_sample {
	char key[TAR_MAX_NAME + 1];
	char img[TAR_MAX_NAME + 1]; /* member name of the image, "" if none yet */
	uint64_t img_off, img_size;
	int64_t label; /* -1: no .cls yet */
};

/* The state of one gm_tar_index call. */
struct tar_reader {
	const char *shard, *who;
	int fd;
	uint64_t file_size;
	uint64_t off; /* of the header being read; past it once the member is taken */
	char *name, *longname, *pax;
	bool have_long, pax_have_size; /* metadata from 'L' / 'x' for the next member */
	uint64_t pax_size;
	struct tar_sample *ts;
	int (*on_sample)(void *ctx, const struct gm_tar_sample *s);
	void *ctx;
	char *err;
	size_t errlen;
};

/* A malformed shard: "WHO: SHARD: offset N: what". Returns -EBADMSG. */
__attribute__((format(printf, 2, 3))) static int bad(struct tar_reader *t, const char *fmt, ...)
{
	char what[700];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	gm_errf(t->err, t->errlen, "%s: %s: offset %llu: %s", t->who, t->shard,
		(unsigned long long)t->off, what);
	return -EBADMSG;
}

/* A failed system call on the shard: "WHO: SHARD: strerror". Returns ret. */
static int io_error(struct tar_reader *t, int ret)
{
	gm_errf(t->err, t->errlen, "%s: %s: %s", t->who, t->shard, strerror(-ret));
	return ret;
}

/*
 * A zero block at t->off: the end-of-archive marker, provided that nothing but
 * zeros follows it to the end of the file. POSIX ends an archive with two zero
 * blocks; GNU tar stops at the first one (warning "A lone zero block" when the
 * second is missing or not zero) and ignores the rest, and writers pad the last
 * record with zeros. So zeros to EOF (one zero block or two, and any record
 * padding) end the archive: 1. Anything else after a zero block is a member that
 * would be dropped without a word (a zeroed header, or tars concatenated with cat),
 * so it is refused with its offset: -EBADMSG.
 */
static int end_of_archive(struct tar_reader *t)
{
	unsigned char buf[16 * TAR_BLOCK];
	uint64_t zero = t->off;
	int ret;

	for (uint64_t off = zero + TAR_BLOCK; off < t->file_size;) {
		size_t n =
		    t->file_size - off < sizeof(buf) ? (size_t)(t->file_size - off) : sizeof(buf);
		if ((ret = pread_all(t->fd, buf, n, off)))
			return io_error(t, ret);
		for (size_t i = 0; i < n; i++)
			if (buf[i]) {
				t->off = (off + i) / TAR_BLOCK * TAR_BLOCK;
				return bad(t,
					   "data after the zero block at offset %llu: only zeros "
					   "may follow an end-of-archive block, and members past "
					   "it would be lost (a zeroed header, or tars joined with "
					   "cat? repack the shard)",
					   (unsigned long long)zero);
			}
		off += n;
	}
	return 1;
}

/*
 * Read and check the header at t->off into h, with its member's size (a pax size
 * overrides the header's). 0, 1 at the end of the archive, or -errno.
 */
static int read_header(struct tar_reader *t, unsigned char *h, uint64_t *size)
{
	int ret;

	if (t->off + TAR_BLOCK > t->file_size) {
		if (t->off == t->file_size && t->off > 0)
			return 1; /* no end-of-archive blocks: accepted */
		return bad(t, "%s",
			   t->off ? "truncated tar header (shard cut short?)"
				  : "not a tar file (shorter than one header)");
	}
	if ((ret = pread_all(t->fd, h, TAR_BLOCK, t->off)))
		return io_error(t, ret);
	if (all_zero(h))
		return end_of_archive(t);
	if (!tar_checksum_ok(h))
		return bad(t, "%s",
			   t->off ? "bad tar header checksum (corrupt shard?)"
				  : "not a tar file (bad header checksum)");
	if (!tar_octal(h + 124, 12, size))
		return bad(t, "bad size field in the tar header");
	if (t->pax_have_size)
		*size = t->pax_size;
	return 0;
}

/* The member's name into t->name: GNU long name or pax path, else ustar prefix/name. */
static void member_name(struct tar_reader *t, const unsigned char *h)
{
	char *name = t->name;

	if (t->have_long) {
		memcpy(name, t->longname, TAR_MAX_NAME + 1);
		return;
	}
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

/* A GNU long name ('L') or pax header ('x') at data: metadata for the next member. */
static int read_meta(struct tar_reader *t, char type, uint64_t size, uint64_t data)
{
	char *buf = t->longname;
	int ret;

	if (type == 'L' && (size == 0 || size > TAR_MAX_NAME))
		return bad(t, "GNU long name of %llu bytes", (unsigned long long)size);
	if (type == 'x' && size > TAR_MAX_PAX)
		return bad(t, "pax header of %llu bytes", (unsigned long long)size);
	if (type == 'x') {
		char *np = realloc(t->pax, size + 1);
		if (!np)
			return -ENOMEM;
		buf = t->pax = np;
	}
	if ((ret = pread_all(t->fd, buf, size, data)))
		return io_error(t, ret);
	buf[size] = 0;
	if (type == 'L') {
		t->longname[strnlen(t->longname, size)] = 0;
		t->have_long = true;
	} else {
		bool hp = false;
		if (!pax_parse(t->pax, size, t->longname, &hp, &t->pax_size, &t->pax_have_size))
			return bad(t, "malformed pax extended header");
		t->have_long = t->have_long || hp;
	}
	return 0;
}

/* Hand the sample assembled in t->ts (if it has an image) to on_sample. */
static int flush(struct tar_reader *t)
{
	struct tar_sample *ts = t->ts;

	if (!ts->img[0])
		return 0; /* a key with no image (other modalities): not a sample */
	if (ts->label < 0) {
		gm_errf(t->err, t->errlen,
			"%s: %s: sample '%s' (%s) has no .cls member: WebDataset "
			"shards need one holding the class number",
			t->who, t->shard, ts->key, ts->img);
		return -EBADMSG;
	}
	struct gm_tar_sample s = {.key = ts->key,
				  .member = ts->img,
				  .offset = ts->img_off,
				  .size = ts->img_size,
				  .label = (uint32_t)ts->label};
	return t->on_sample(t->ctx, &s);
}

/* The decimal class number of the .cls member t->name (size bytes at data). */
static int read_label(struct tar_reader *t, uint64_t size, uint64_t data)
{
	char num[32], *e;
	size_t n = size < sizeof(num) - 1 ? (size_t)size : sizeof(num) - 1;
	int ret;

	if ((ret = pread_all(t->fd, num, n, data)))
		return io_error(t, ret);
	num[n] = 0;
	errno = 0;
	long v = strtol(num, &e, 10);
	while (*e == ' ' || *e == '\n' || *e == '\r' || *e == '\t')
		e++;
	if (size >= sizeof(num) - 1 || e == num || *e || errno || v < 0 || v >= (long)MAX_LABEL)
		return bad(t, "'%.200s': label '%.31s' is not a class number 0..%u", t->name, num,
			   MAX_LABEL - 1);
	t->ts->label = v;
	return 0;
}

/* A regular-file member named t->name (size bytes at data): group it by key. */
static int add_member(struct tar_reader *t, uint64_t size, uint64_t data)
{
	struct tar_sample *ts = t->ts;
	char *name = t->name;
	int ret;

	/* key = path up to the first '.' of the file name; ext = the rest */
	char *base = strrchr(name, '/');
	base = base ? base + 1 : name;
	char *dot = strchr(base, '.');
	const char *ext = dot ? dot + 1 : "";
	size_t klen = dot ? (size_t)(dot - name) : strlen(name);
	if (klen != strlen(ts->key) || memcmp(ts->key, name, klen)) {
		if ((ret = flush(t)))
			return ret;
		memcpy(ts->key, name, klen);
		ts->key[klen] = 0;
		ts->img[0] = 0;
		ts->label = -1;
	}
	if (!strcasecmp(ext, "jpg") || !strcasecmp(ext, "jpeg")) {
		if (ts->img[0])
			return bad(t, "sample '%.200s' has two images ('%.200s' and '%.200s')",
				   ts->key, ts->img, name);
		strcpy(ts->img, name);
		ts->img_off = data;
		ts->img_size = size;
	} else if (!strcmp(ext, "cls")) {
		return read_label(t, size, data);
	}
	return 0;
}

/* Walk the headers of t's shard to the end of the archive. 0 or -errno. */
static int walk_members(struct tar_reader *t)
{
	unsigned char h[TAR_BLOCK];
	uint64_t size;
	int ret;

	while (!(ret = read_header(t, h, &size))) {
		char type = (char)h[156];
		member_name(t, h);
		uint64_t data = t->off + TAR_BLOCK;
		if (size > t->file_size - data)
			return bad(t,
				   "member '%.200s' of %llu bytes runs past the end of the shard"
				   " (truncated?)",
				   t->name, (unsigned long long)size);
		uint64_t next = data + (size + TAR_BLOCK - 1) / TAR_BLOCK * TAR_BLOCK;
		if (type == 'L' || type == 'x') {
			if ((ret = read_meta(t, type, size, data)))
				return ret;
			t->off = next;
			continue;
		}
		t->have_long = false;
		t->pax_have_size = false;
		/* from here on, messages name the offset of the next header (as they did) */
		t->off = next;
		if (type != '0' && type != '\0' && type != '7')
			continue; /* directories, links, global pax headers, ... */
		if ((ret = add_member(t, size, data)))
			return ret;
	}
	return ret < 0 ? ret : flush(t);
}

int gm_tar_index(const char *path, const char *who,
		 int (*on_sample)(void *ctx, const struct gm_tar_sample *s), void *ctx, char *err,
		 size_t errlen)
{
	struct tar_reader t = {.shard = path,
			       .who = who,
			       .on_sample = on_sample,
			       .ctx = ctx,
			       .err = err,
			       .errlen = errlen};
	struct stat st;
	int ret;

	t.ts = calloc(1, sizeof(*t.ts));
	t.name = malloc(TAR_MAX_NAME + 1);
	t.longname = malloc(TAR_MAX_NAME + 1);
	t.fd = open(path, O_RDONLY | O_CLOEXEC);
	if (!t.ts || !t.name || !t.longname) {
		ret = -ENOMEM;
		goto out;
	}
	if (t.fd < 0 || fstat(t.fd, &st) != 0) {
		ret = io_error(&t, -errno);
		goto out;
	}
	t.file_size = (uint64_t)st.st_size;
	t.ts->label = -1;
	ret = walk_members(&t);
out:
	if (t.fd >= 0)
		close(t.fd);
	free(t.ts);
	free(t.name);
	free(t.longname);
	free(t.pax);
	return ret;
}

/* ---- writing ------------------------------------------------------------------ */

/* The error of a failed stdio write: errno when it says (ENOSPC, EDQUOT, ...),
 * else -EIO. */
static int stdio_error(void)
{
	return errno > 0 ? -errno : -EIO;
}

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
	return fwrite(h, 1, 512, f) == 512 ? 0 : stdio_error();
}

static int put_data(FILE *f, const void *data, size_t len)
{
	static const unsigned char zeros[512];
	size_t pad = (512 - len % 512) % 512;
	if (fwrite(data, 1, len, f) != len || fwrite(zeros, 1, pad, f) != pad)
		return stdio_error();
	return 0;
}

int gm_tar_write_member(FILE *f, const char *name, const void *data, size_t len)
{
	size_t nl = strlen(name);
	int ret;

	if (nl > GM_TAR_MAX_NAME)
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
	return fwrite(zeros, 1, sizeof(zeros), f) == sizeof(zeros) ? 0 : stdio_error();
}

/*
 * The shard writer. Each shard is written as DIR/.shard-NNNNNN.tar.tmp (a name the
 * dataset index never reads: it takes *.tar only) and renamed to shard-NNNNNN.tar
 * by commit, all of them, only once every one is complete and on disk. Until then
 * a failure (a full disk half-way, a killed pack) leaves no shard that would load
 * as a smaller dataset; close without commit removes the temporaries.
 */
struct gm_tar_writer {
	char *dir, *path; /* path: the file named by messages */
	size_t path_cap;
	uint32_t per_shard, in_shard, shards;
	bool exclusive, ended, committed;
	FILE *f;
	char *name;
};

int gm_tar_writer_open(struct gm_tar_writer **out, const char *dir, uint32_t per_shard,
		       bool exclusive)
{
	struct gm_tar_writer *w = calloc(1, sizeof(*w));
	*out = NULL;
	if (!w)
		return -ENOMEM;
	w->per_shard = per_shard ? per_shard : 1;
	w->exclusive = exclusive;
	w->dir = strdup(dir);
	w->path_cap = strlen(dir) + 32;
	w->path = malloc(w->path_cap);
	w->name = malloc(GM_TAR_MAX_NAME + 32);
	if (!w->dir || !w->path || !w->name) {
		gm_tar_writer_close(w);
		return -ENOMEM;
	}
	snprintf(w->path, w->path_cap, "%s", dir);
	*out = w;
	return 0;
}

/* Shard i's temporary (tmp) or final name into w->path; returns w->path. */
static const char *shard_name(struct gm_tar_writer *w, uint32_t i, bool tmp)
{
	snprintf(w->path, w->path_cap, tmp ? "%s/.shard-%06u.tar.tmp" : "%s/shard-%06u.tar", w->dir,
		 i);
	return w->path;
}

/* End the shard being written (two zero blocks), flush it to the disk and close
 * it: a full disk or quota shows here at the latest. 0 or -errno. */
static int end_shard(struct gm_tar_writer *w)
{
	int ret = gm_tar_write_end(w->f);
	if (!ret && fflush(w->f) != 0)
		ret = stdio_error();
	if (!ret && fsync(fileno(w->f)) != 0)
		ret = -errno;
	if (fclose(w->f) != 0 && !ret)
		ret = stdio_error();
	w->f = NULL;
	shard_name(w, w->shards - 1, true);
	return ret;
}

/* Start shard w->shards: its temporary file, created. 0 or -errno (-EEXIST: an
 * exclusive writer found the final name taken, or a temporary of another pack). */
static int start_shard(struct gm_tar_writer *w)
{
	struct stat st;
	int fd;

	if (w->exclusive && stat(shard_name(w, w->shards, false), &st) == 0)
		return -EEXIST;
	fd = open(shard_name(w, w->shards, true),
		  O_WRONLY | O_CREAT | O_CLOEXEC | (w->exclusive ? O_EXCL : O_TRUNC), 0644);
	if (fd < 0)
		return -errno;
	if (!(w->f = fdopen(fd, "wb"))) {
		int ret = -errno;
		close(fd);
		unlink(w->path);
		return ret;
	}
	w->shards++;
	w->in_shard = 0;
	return 0;
}

int gm_tar_writer_add(struct gm_tar_writer *w, const char *key, const char *ext, const void *data,
		      size_t len, uint32_t label)
{
	int ret;
	if (w->ended)
		return -EINVAL;
	if (strlen(key) + strlen(ext) + 2 > GM_TAR_MAX_NAME)
		return -ENAMETOOLONG;
	if (w->f && w->in_shard == w->per_shard && (ret = end_shard(w)))
		return ret;
	if (!w->f && (ret = start_shard(w)))
		return ret;
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

int gm_tar_writer_end(struct gm_tar_writer *w)
{
	int ret = 0;
	if (w->ended)
		return 0;
	if (w->f)
		ret = end_shard(w);
	w->ended = true;
	return ret;
}

const char *gm_tar_writer_shard(struct gm_tar_writer *w, uint32_t i)
{
	return i < w->shards ? shard_name(w, i, !w->committed) : NULL;
}

/* Rename shard i from its temporary to its final name; an exclusive writer never
 * replaces a file that appeared meanwhile (-EEXIST). 0 or -errno, w->path naming
 * the file. */
static int rename_shard(struct gm_tar_writer *w, uint32_t i)
{
	char *tmp = strdup(shard_name(w, i, true));
	int ret = 0;

	if (!tmp)
		return -ENOMEM;
	shard_name(w, i, false);
	if (!w->exclusive) {
		if (rename(tmp, w->path) != 0)
			ret = -errno;
	} else if (renameat2(AT_FDCWD, tmp, AT_FDCWD, w->path, RENAME_NOREPLACE) != 0) {
		ret = -errno;
		/* a file system without RENAME_NOREPLACE: link() does not replace either */
		if ((ret == -EINVAL || ret == -ENOSYS) &&
		    (ret = link(tmp, w->path) ? -errno : 0) == 0)
			unlink(tmp);
	}
	free(tmp);
	return ret;
}

/* Make the renames durable: fsync the directory (best effort; some file systems
 * refuse it). */
static void sync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		(void)fsync(fd);
		close(fd);
	}
}

int gm_tar_writer_commit(struct gm_tar_writer *w)
{
	int ret;
	uint32_t i;

	if (w->committed)
		return 0;
	if ((ret = gm_tar_writer_end(w)))
		return ret;
	for (i = 0; i < w->shards; i++)
		if ((ret = rename_shard(w, i)))
			break;
	if (ret) {
		/* all or nothing: take back the shards renamed already */
		char *failed = strdup(w->path);
		for (uint32_t k = 0; k < i; k++)
			unlink(shard_name(w, k, false));
		if (failed)
			snprintf(w->path, w->path_cap, "%s", failed);
		free(failed);
		return ret;
	}
	sync_dir(w->dir);
	w->committed = true;
	return 0;
}

uint32_t gm_tar_writer_shards(const struct gm_tar_writer *w)
{
	return w->shards;
}

const char *gm_tar_writer_path(const struct gm_tar_writer *w)
{
	return w->path;
}

int gm_tar_writer_close(struct gm_tar_writer *w)
{
	if (!w)
		return 0;
	if (w->f)
		fclose(w->f);
	for (uint32_t i = 0; !w->committed && i < w->shards; i++)
		unlink(shard_name(w, i, true)); /* not committed: leave nothing */
	free(w->dir);
	free(w->path);
	free(w->name);
	free(w);
	return 0;
}
