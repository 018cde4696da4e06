/*
 * reader.c - batch whole-file reader: io_uring, or pread where io_uring cannot run (see reader.h).
 *
 * Purpose: read the n files of a batch with as few system calls as possible and
 * hand each one to the caller the moment its data is in memory, so decoding the
 * first files overlaps the I/O of the rest.
 *
 * Design:
 *  - One ring per reader, a sparse registered file table of `depth` slots and one
 *    reusable buffer per slot. A file in flight owns a slot: its chain is
 *      OPENAT(direct, into the slot) -IO_LINK-> READ(fixed file, slot buffer)
 *        -IO_HARDLINK-> CLOSE(direct slot).
 *    IO_LINK after the open cancels read and close when the open fails (they then
 *    complete with -ECANCELED; the file's error is delivered once). The read ->
 *    close link is a hard link because the kernel treats a short read (every file
 *    smaller than the buffer) as a failure that would otherwise cancel the close.
 *  - A rolling window, not lock-step waves: the window starts with min(n, depth)
 *    chains; every time a slot's chain has fully completed (three CQEs) the next file
 *    is queued into it, and everything queued is submitted together with the wait for
 *    the next completion: one io_uring_submit_and_wait() per loop turn.
 *  - The callback runs on the READ completion (the close may still be pending).
 *  - Buffers are mmap'd with MAP_POPULATE (first touch of a page costs ~25 us on our
 *    VMs), sized from the hint plus one page, and grown with mremap only when a
 *    larger file arrives. A read that fills the buffer may mean the file grew since
 *    indexing: the buffer grows and a further chain (open, read at the offset,
 *    close) fetches the rest. A read that stops before the hinted size is continued
 *    the same way, until it reaches the hint or returns 0 (end of file), so a short
 *    read is never taken for the end of the file while more was expected.
 *  - -EAGAIN/-EINTR from open or read re-issue the chain (bounded retries).
 *  - The CQ is twice the SQ (3 * depth rounded up): at most 3 * depth CQEs are ever
 *    outstanding, so the CQ cannot overflow; -EBUSY from submit (an overflow backlog
 *    on old kernels) is handled by reaping first.
 *  - Setup flags are probed at run time: SINGLE_ISSUER|DEFER_TASKRUN (6.1+), else
 *    COOP_TASKRUN (5.19+), else none. With SINGLE_ISSUER the kernel binds the ring
 *    to the creating thread: create the reader in the thread (and, after a fork, the
 *    process) that reads with it; any other gets -EEXIST.
 *
 * Registered buffers (READ_FIXED) are not used: on page-cache-warm JPEG-sized files
 * the cost is dominated by open/close and the copy, and registration would have to
 * be redone whenever a buffer grows (see the report in tests/bench/reader_bench.c).
 *
 * Byte ranges (gm_reader_read_at, for tar shards): the same chain, the READ at the
 * member's offset for exactly its length; continued while short, and an end of file
 * before the range's end is the file's -ENODATA (a truncated shard). Each range
 * opens and closes its shard like a whole file: on a warm page cache that costs what
 * an ImageFolder read costs. Shards registered with gm_reader_create_files (kept
 * open in the file table after the depth slots) are read with one READ per range
 * instead: no open or close, one CQE (gm_reader_read_fixed).
 *
 * Without io_uring (the kernel lacks it or the ops used, a container's seccomp
 * profile blocks it, gVisor) the reader falls back to open/pread/close file by file
 * in the caller's thread, with the same callbacks and results: slower, never
 * broken. gm_reader_mode/gm_reader_why say so; GM_READER=io_uring forbids it.
 *
 * One file, both backends: the pread fallback (open_fixed_sync, sync_one,
 * sync_batch) is about a hundred lines that share the handle, the slot buffers,
 * the batch and the callback contract with the io_uring path, and read_batch
 * chooses between them per call; apart, they would need an internal header
 * exposing all of that, for no gain in clarity.
 *
 * Only regular files are read: a path is stat'ed before its chain is queued (an
 * io_uring OPENAT of a FIFO would wait for a writer for ever, a device may never
 * end), and the descriptors opened here (pread, registered shards) are opened
 * O_NONBLOCK, checked with fstat and made blocking again. Anything else is the
 * file's -ESPIPE (-EISDIR for a directory). A file swapped for a FIFO between the
 * stat and the OPENAT still blocks that read: the pool's lease deadline ends it.
 *
 * What it does not do: O_DIRECT, thread safety.
 * After a ring failure (-errno from gm_reader_read that is not a callback value) the
 * reader is broken: later reads fail fast with the same error; destroy it.
 */
#include "goldminer/reader.h"

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define OP_OPEN	     0u
#define OP_READ	     1u
#define OP_CLOSE     2u
#define UD(slot, op) (((uint64_t)(slot) << 2) | (op))

#define PAGE	    4096u
#define MIN_BUF	    (64u * 1024u)     /* smallest buffer, hint or not */
#define MAX_FILE    ((size_t)1 << 30) /* a larger file is delivered as -EFBIG */
#define MAX_READ    ((size_t)1 << 30) /* bytes asked of one READ */
#define MAX_RETRIES 16		      /* for -EAGAIN / -EINTR chains */

struct slot {
	char *buf; /* mmap'd, cap bytes; NULL until first use */
	size_t cap;
	size_t len;	  /* bytes read so far */
	uint64_t hint;	  /* expected size (exact: the range's length) */
	uint64_t base;	  /* file offset of byte 0 of the buffer */
	bool exact;	  /* a byte range: read exactly hint bytes from base */
	unsigned file;	  /* index into the paths array */
	unsigned pending; /* CQEs still to come for the current chain */
	int err;	  /* first real error of the file (not -ECANCELED) */
	bool cancelled;	  /* some op of the chain was cancelled */
	bool need_more;	  /* the read was short of the hint, or filled the buffer */
	bool delivered;
	unsigned retries;
};

struct gm_reader {
	struct io_uring ring;
	unsigned depth;
	unsigned setup_flags; /* what the ring was created with */
	struct slot *slots;
	unsigned *free_slots; /* stack */
	unsigned nfree;
	int broken;	 /* 0, or the -errno of a ring failure */
	bool busy;	 /* inside gm_reader_read: a callback may not re-enter */
	unsigned nfixed; /* files registered after the depth slots (shards), or 0 */
	int *fixed_err;	 /* per registered file: 0, or the -errno its open gave */
	bool sync;	 /* no io_uring here: plain open/pread/close, file by file */
	int *fds;	 /* sync: the registered files' descriptors (-1: failed) */
	char why[256];	 /* sync: why io_uring is not used */
	char msg[256];
};

/* Only regular files are read: a FIFO would block the reader (an io_uring OPENAT
 * of a FIFO waits for a writer, in the kernel, for ever), a device could be
 * endless. 0, -ESPIPE for any other type (-EISDIR for a directory), or the
 * stat's -errno. By path before a chain is queued; the file could still be
 * swapped between this look and the OPENAT: the pool's lease deadline covers
 * that window (a worker stuck there is killed and its batch re-issued). */
static int regular_type(mode_t m)
{
	return S_ISREG(m) ? 0 : S_ISDIR(m) ? -EISDIR : -ESPIPE;
}

static int check_regular_path(const char *path)
{
	struct stat st;
	return stat(path, &st) ? -errno : regular_type(st.st_mode);
}

/* open() that never blocks on a FIFO and refuses what is not a regular file; the
 * descriptor it returns is blocking again (io_uring must not see O_NONBLOCK on a
 * regular file: some file systems then fail reads with -EAGAIN). fd or -errno. */
static int open_regular(const char *path)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	int err = fstat(fd, &st) ? -errno : regular_type(st.st_mode);
	if (!err && fcntl(fd, F_SETFL, 0) < 0)
		err = -errno;
	if (err) {
		close(fd);
		return err;
	}
	return fd;
}

/* Message of the last failed gm_reader_create in this thread (no handle exists). */
static _Thread_local char create_msg[256];

static void set_msg(char *buf, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, 256, fmt, ap);
	va_end(ap);
}

static size_t round_up(size_t v, size_t to)
{
	return (v + to - 1) / to * to;
}

int gm_reader_create(struct gm_reader **out, unsigned depth)
{
	return gm_reader_create_files(out, depth, NULL, 0);
}

/* Open files[] and put them in the table after the depth slots. 0, or -errno of the
 * table update (the reader then reads by path); a file that cannot be opened only
 * records its error, delivered with each of its reads. */
static int register_fixed(struct gm_reader *r, const char *const *files, unsigned nfiles)
{
	r->fixed_err = calloc(nfiles ? nfiles : 1, sizeof(*r->fixed_err));
	if (!r->fixed_err)
		return -ENOMEM;
	for (unsigned i = 0; i < nfiles; i++) {
		int fd = open_regular(files[i]);
		if (fd < 0) {
			r->fixed_err[i] = fd;
			continue;
		}
		int ret = io_uring_register_files_update(&r->ring, r->depth + i, &fd, 1);
		close(fd); /* the table holds its own reference */
		if (ret < 0) {
			free(r->fixed_err);
			r->fixed_err = NULL;
			return ret;
		}
	}
	r->nfixed = nfiles;
	return 0;
}

/* The io_uring part of creation: ring, flags, file table. 0 or -errno with the
 * message in create_msg; on failure nothing of the ring is left. */
static int setup_ring(struct gm_reader *r, const char *const *files, unsigned nfiles)
{
	static const unsigned flag_sets[] = {
	    IORING_SETUP_SUBMIT_ALL | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
	    IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN,
	    0,
	};
	struct io_uring_params p;
	unsigned entries = 1, depth = r->depth;
	int ret = -EINVAL;

	while (entries < 3 * depth)
		entries *= 2;
	/* Newest flags first; -EINVAL means "this kernel does not know a flag". */
	for (size_t i = 0; i < sizeof(flag_sets) / sizeof(flag_sets[0]); i++) {
		memset(&p, 0, sizeof(p));
		p.flags = flag_sets[i];
		ret = io_uring_queue_init_params(entries, &r->ring, &p);
		if (ret != -EINVAL)
			break;
	}
	if (ret) {
		set_msg(create_msg, "gm_reader_create: io_uring_queue_init_params(%u): %s%s",
			entries, strerror(-ret),
			ret == -ENOSYS || ret == -EPERM ? " (io_uring unavailable or disabled)"
							: "");
		return ret;
	}
	r->setup_flags = p.flags;
	/* Room for the registered files too; a kernel or RLIMIT_NOFILE that refuses
	 * that many gets the plain table, and the files are read by path. */
	if (nfiles && nfiles <= (1u << 20) &&
	    !io_uring_register_files_sparse(&r->ring, depth + nfiles)) {
		if (register_fixed(r, files, nfiles)) {
			io_uring_unregister_files(&r->ring);
			ret = io_uring_register_files_sparse(&r->ring, depth);
		} else {
			ret = 0;
		}
	} else {
		ret = io_uring_register_files_sparse(&r->ring, depth);
	}
	if (ret) {
		set_msg(create_msg, "gm_reader_create: io_uring_register_files_sparse(%u): %s",
			depth, strerror(-ret));
		free(r->fixed_err);
		r->fixed_err = NULL;
		r->nfixed = 0;
		io_uring_queue_exit(&r->ring);
	}
	return ret;
}

/* Sync mode's "registered" files: descriptors kept open. Running out of
 * descriptors means none are kept (read by path), as a refused table does. */
static int open_fixed_sync(struct gm_reader *r, const char *const *files, unsigned nfiles)
{
	r->fds = malloc((nfiles ? nfiles : 1) * sizeof(*r->fds));
	r->fixed_err = calloc(nfiles ? nfiles : 1, sizeof(*r->fixed_err));
	if (!r->fds || !r->fixed_err)
		return -ENOMEM;
	for (unsigned i = 0; i < nfiles; i++) {
		r->fds[i] = open_regular(files[i]);
		if (r->fds[i] >= 0)
			continue;
		r->fixed_err[i] = r->fds[i];
		if (r->fds[i] == -EMFILE || r->fds[i] == -ENFILE) {
			for (unsigned k = 0; k < i; k++)
				if (r->fds[k] >= 0)
					close(r->fds[k]);
			free(r->fds);
			free(r->fixed_err);
			r->fds = NULL;
			r->fixed_err = NULL;
			return 0;
		}
	}
	r->nfixed = nfiles;
	return 0;
}

int gm_reader_create_files(struct gm_reader **out, unsigned depth, const char *const *files,
			   unsigned nfiles)
{
	struct gm_reader *r;
	int ret = -EINVAL;
	const char *mode = getenv("GM_READER"); /* io_uring | pread | unset: auto */

	create_msg[0] = '\0';
	if (!out || !depth || depth > 4096) {
		set_msg(create_msg, "gm_reader_create: depth %u out of range 1..4096", depth);
		return -EINVAL;
	}
	*out = NULL;
	r = calloc(1, sizeof(*r));
	if (!r) {
		set_msg(create_msg, "gm_reader_create: out of memory");
		return -ENOMEM;
	}
	r->depth = depth;
	r->slots = calloc(depth, sizeof(*r->slots));
	r->free_slots = calloc(depth, sizeof(*r->free_slots));
	if (!r->slots || !r->free_slots) {
		ret = -ENOMEM;
		set_msg(create_msg, "gm_reader_create: out of memory");
		goto out_free;
	}
	for (unsigned i = 0; i < depth; i++)
		r->free_slots[i] = depth - 1 - i;
	r->nfree = depth;

	if (mode && !strcmp(mode, "pread")) {
		ret = -ENOTSUP;
		set_msg(create_msg, "GM_READER=pread");
	} else {
		ret = setup_ring(r, files, nfiles);
	}
	if (ret && mode && !strcmp(mode, "io_uring"))
		goto out_free; /* io_uring required: its error */
	if (ret) {
		/*
		 * No io_uring here (a kernel without it, a container whose seccomp profile
		 * blocks it, as Docker's default does since 25.0, gVisor, a kernel too old
		 * for the ops used): read with open/pread/close, file by file. Same
		 * results, more system calls, no overlap of I/O with decoding.
		 */
		r->sync = true;
		snprintf(r->why, sizeof(r->why), "%s", create_msg);
		create_msg[0] = '\0';
		if (nfiles && (ret = open_fixed_sync(r, files, nfiles))) {
			set_msg(create_msg, "gm_reader_create: out of memory");
			free(r->fds);
			free(r->fixed_err);
			goto out_free;
		}
	}
	*out = r;
	return 0;

out_free:
	free(r->free_slots);
	free(r->slots);
	free(r);
	return ret;
}

const char *gm_reader_mode(const struct gm_reader *r)
{
	return r && r->sync ? "pread" : "io_uring";
}

const char *gm_reader_why(const struct gm_reader *r)
{
	return r && r->sync ? r->why : "";
}

void gm_reader_destroy(struct gm_reader *r)
{
	if (!r)
		return;
	/* Exiting the ring first: no request can still target a buffer we unmap. */
	if (!r->sync)
		io_uring_queue_exit(&r->ring);
	if (r->fds)
		for (unsigned i = 0; i < r->nfixed; i++)
			if (r->fds[i] >= 0)
				close(r->fds[i]);
	free(r->fds);
	free(r->fixed_err);
	for (unsigned i = 0; i < r->depth; i++)
		if (r->slots[i].buf)
			munmap(r->slots[i].buf, r->slots[i].cap);
	free(r->free_slots);
	free(r->slots);
	free(r);
}

const char *gm_reader_errmsg(const struct gm_reader *r)
{
	return r ? r->msg : create_msg;
}

/* Make s->buf hold at least need bytes, keeping its contents. 0 or -errno. */
static int slot_reserve(struct slot *s, size_t need)
{
	size_t cap;
	void *p;

	if (need <= s->cap)
		return 0;
	cap = round_up(need < MIN_BUF ? MIN_BUF : need, PAGE);
	if (s->cap && cap < s->cap + s->cap / 2)
		cap = round_up(s->cap + s->cap / 2, PAGE); /* geometric growth */
	if (!s->buf) {
		p = mmap(NULL, cap, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
		if (p == MAP_FAILED)
			return -errno;
	} else {
		p = mremap(s->buf, s->cap, cap, MREMAP_MAYMOVE);
		if (p == MAP_FAILED)
			return -errno;
#ifdef MADV_POPULATE_WRITE
		/* Pre-fault the new tail; an old kernel's -EINVAL just means lazily. */
		(void)madvise((char *)p + s->cap, cap - s->cap, MADV_POPULATE_WRITE);
#endif
	}
	s->buf = p;
	s->cap = cap;
	return 0;
}

/* Queue the open/read/close chain for slot si at its current offset. Cannot fail:
 * the SQ has room for 3 * depth entries and at most depth chains are queued. */
struct batch;
static void queue_chain(struct gm_reader *r, unsigned si, const struct batch *b);

/* Queue one READ of a registered file (a shard kept open): no open, no close. */
static void queue_fixed_read(struct gm_reader *r, unsigned si, unsigned file)
{
	struct slot *s = &r->slots[si];
	size_t want = (size_t)s->hint - s->len;
	struct io_uring_sqe *sqe;

	if (want > MAX_READ)
		want = MAX_READ;
	s->pending = 1;
	s->cancelled = false;
	s->need_more = false;
	sqe = io_uring_get_sqe(&r->ring);
	io_uring_prep_read(sqe, (int)(r->depth + file), s->buf + s->len, (unsigned)want,
			   s->base + s->len);
	sqe->flags |= IOSQE_FIXED_FILE;
	io_uring_sqe_set_data64(sqe, UD(si, OP_READ));
}

static void queue_path_chain(struct gm_reader *r, unsigned si, const char *path)
{
	struct slot *s = &r->slots[si];
	size_t want = s->exact ? (size_t)s->hint - s->len : s->cap - s->len;
	struct io_uring_sqe *sqe;

	if (want > MAX_READ)
		want = MAX_READ;
	s->pending = 3;
	s->cancelled = false;
	s->need_more = false;

	sqe = io_uring_get_sqe(&r->ring);
	io_uring_prep_openat_direct(sqe, AT_FDCWD, path, O_RDONLY, 0, si);
	sqe->flags |= IOSQE_IO_LINK;
	io_uring_sqe_set_data64(sqe, UD(si, OP_OPEN));

	sqe = io_uring_get_sqe(&r->ring);
	io_uring_prep_read(sqe, (int)si, s->buf + s->len, (unsigned)want, s->base + s->len);
	sqe->flags |= IOSQE_FIXED_FILE | IOSQE_IO_HARDLINK;
	io_uring_sqe_set_data64(sqe, UD(si, OP_READ));

	sqe = io_uring_get_sqe(&r->ring);
	io_uring_prep_close_direct(sqe, si);
	io_uring_sqe_set_data64(sqe, UD(si, OP_CLOSE));
}

/* Per-call state of gm_reader_read. */
struct batch {
	const char *const *paths;
	const uint64_t *hint;
	const uint64_t *off;  /* NULL: whole files */
	const unsigned *fidx; /* registered file of each range, or NULL: by path */
	unsigned n, next, inflight;
	gm_reader_fn fn;
	void *arg;
	int stop; /* non-zero callback return */
};

static void queue_chain(struct gm_reader *r, unsigned si, const struct batch *b)
{
	unsigned file = r->slots[si].file;
	if (b->fidx)
		queue_fixed_read(r, si, b->fidx[file]);
	else
		queue_path_chain(r, si, b->paths[file]);
}

/* Give slot si the next file of the batch, or return it to the free stack. */
static int start_file(struct gm_reader *r, struct batch *b, unsigned si)
{
	struct slot *s = &r->slots[si];
	uint64_t hint = b->hint ? b->hint[b->next] : 0;
	int ret;

	s->file = b->next++;
	s->len = 0;
	s->hint = hint;
	s->base = b->off ? b->off[s->file] : 0;
	s->exact = b->off != NULL;
	s->err = 0;
	s->delivered = false;
	s->retries = 0;
	/* A hint past the limit fails the file up front rather than mapping 1 GiB. */
	ret = hint >= MAX_FILE ? -EFBIG : slot_reserve(s, (size_t)hint + PAGE);
	if (!ret && b->fidx)
		ret = b->fidx[s->file] >= r->nfixed ? -EBADF : r->fixed_err[b->fidx[s->file]];
	else if (!ret)
		ret = check_regular_path(b->paths[s->file]);
	if (ret) {
		/* No memory for this file, or too large: its own error, the batch goes on. */
		r->free_slots[r->nfree++] = si;
		return b->fn(b->arg, s->file, NULL, 0, ret);
	}
	queue_chain(r, si, b);
	b->inflight++;
	return 0;
}

/* The chain of slot si has fully completed: deliver an error, continue, or free. */
static int chain_done(struct gm_reader *r, struct batch *b, unsigned si)
{
	struct slot *s = &r->slots[si];
	int err = s->err ? s->err : (s->cancelled ? -ECANCELED : 0);
	int ret = 0;

	if (!b->stop && !s->delivered) {
		if ((err == -EAGAIN || err == -EINTR) && s->retries < MAX_RETRIES) {
			s->retries++;
			s->err = 0;
			queue_chain(r, si, b);
			return 0;
		}
		if (!err && s->need_more) {
			if (s->len == s->cap) {
				err = s->cap >= MAX_FILE ? -EFBIG : slot_reserve(s, s->cap + 1);
			}
			if (!err) {
				queue_chain(r, si, b);
				return 0;
			}
		}
		/* Successful reads were delivered at their READ completion. */
		ret = b->fn(b->arg, s->file, NULL, 0, err ? err : -EIO);
	}
	b->inflight--;
	r->free_slots[r->nfree++] = si;
	return ret;
}

/* Handle one CQE. Returns a callback's non-zero value, else 0. */
static int handle_cqe(struct gm_reader *r, struct batch *b, const struct io_uring_cqe *cqe)
{
	uint64_t ud = io_uring_cqe_get_data64(cqe);
	unsigned si = (unsigned)(ud >> 2), op = (unsigned)(ud & 3);
	struct slot *s;
	int res = cqe->res;
	int ret = 0;

	if (si >= r->depth || !r->slots[si].pending)
		return 0; /* not ours (cannot happen); ignore rather than corrupt state */
	s = &r->slots[si];
	if (res == -ECANCELED)
		s->cancelled = true;
	else if (res < 0 && op != OP_CLOSE && !s->err)
		s->err = res;
	if (op == OP_READ && res >= 0 && !b->stop && s->exact) {
		s->len += (size_t)res;
		if (s->len >= s->hint) {
			s->delivered = true;
			ret = b->fn(b->arg, s->file, s->buf, (size_t)s->hint, 0);
		} else if (res > 0) {
			s->need_more = true;
		} else if (!s->err) {
			s->err = -ENODATA; /* the file ends inside the range */
		}
	} else if (op == OP_READ && res >= 0 && !b->stop) {
		s->len += (size_t)res;
		if (res > 0 && (s->len == s->cap || s->len < s->hint)) {
			s->need_more = true; /* may have more: continue after the close */
		} else {
			s->delivered = true;
			ret = b->fn(b->arg, s->file, s->buf, s->len, 0);
		}
	}
	if (--s->pending == 0) {
		int r2 = chain_done(r, b, si);

		if (!ret)
			ret = r2;
	}
	return ret;
}

/* Reap every CQE that is ready. */
static void reap(struct gm_reader *r, struct batch *b)
{
	struct io_uring_cqe *cqe;
	unsigned head, seen = 0;

	io_uring_for_each_cqe(&r->ring, head, cqe)
	{
		int ret = handle_cqe(r, b, cqe);

		if (ret && !b->stop)
			b->stop = ret;
		seen++;
	}
	io_uring_cq_advance(&r->ring, seen);
}

int gm_reader_read(struct gm_reader *r, const char *const *paths, const uint64_t *size_hint,
		   unsigned n, gm_reader_fn fn, void *arg)
{
	return gm_reader_read_at(r, paths, NULL, size_hint, n, fn, arg);
}

static int read_batch(struct gm_reader *r, struct batch b);

int gm_reader_read_at(struct gm_reader *r, const char *const *paths, const uint64_t *offsets,
		      const uint64_t *lengths, unsigned n, gm_reader_fn fn, void *arg)
{
	if (r && n && !paths) {
		set_msg(r->msg, "gm_reader_read: NULL paths");
		return -EINVAL;
	}
	struct batch b = {
	    .paths = paths, .hint = lengths, .off = offsets, .n = n, .fn = fn, .arg = arg};
	return read_batch(r, b);
}

unsigned gm_reader_fixed_files(const struct gm_reader *r)
{
	return r ? r->nfixed : 0;
}

int gm_reader_read_fixed(struct gm_reader *r, const unsigned *files, const uint64_t *offsets,
			 const uint64_t *lengths, unsigned n, gm_reader_fn fn, void *arg)
{
	if (r && (!r->nfixed || (n && (!files || !offsets)))) {
		set_msg(r->msg, r->nfixed ? "gm_reader_read_fixed: NULL files or offsets"
					  : "gm_reader_read_fixed: no registered files");
		return r->nfixed ? -EINVAL : -ENOTSUP;
	}
	struct batch b = {
	    .fidx = files, .hint = lengths, .off = offsets, .n = n, .fn = fn, .arg = arg};
	return read_batch(r, b);
}

/* ---- the pread fallback ------------------------------------------------------- */

/* One file (or range) the plain way into slot 0's buffer. 0 or -errno; *len set. */
static int sync_one(struct gm_reader *r, const struct batch *b, unsigned i, size_t *len)
{
	struct slot *s = &r->slots[0];
	uint64_t hint = b->hint ? b->hint[i] : 0, off = b->off ? b->off[i] : 0;
	int fd = -1, err = 0, tries = 0;
	bool own = false;

	*len = 0;
	if (hint >= MAX_FILE)
		return -EFBIG;
	if (b->fidx) {
		unsigned k = b->fidx[i];
		if (k >= r->nfixed)
			return -EBADF;
		if (r->fixed_err[k])
			return r->fixed_err[k];
		fd = r->fds[k];
	} else {
		fd = open_regular(b->paths[i]);
		if (fd < 0)
			return fd;
		own = true;
	}
	if (!b->off) { /* a whole file: its size now, as the ring path finds it */
		struct stat st;
		if (fstat(fd, &st) == 0 && (uint64_t)st.st_size > hint)
			hint = (uint64_t)st.st_size;
		if (hint >= MAX_FILE)
			err = -EFBIG;
	}
	if (!err)
		err = slot_reserve(s, (size_t)hint + PAGE);
	while (!err) {
		size_t want = b->off ? (size_t)hint - *len : s->cap - *len;
		if (b->off && !want)
			break;
		if (!b->off && !want) { /* grew since the fstat: make room */
			err = s->cap >= MAX_FILE ? -EFBIG : slot_reserve(s, s->cap + 1);
			continue;
		}
		ssize_t got = pread(fd, s->buf + *len, want > MAX_READ ? MAX_READ : want,
				    (off_t)(off + *len));
		if (got < 0) {
			if ((errno == EINTR || errno == EAGAIN) && tries++ < MAX_RETRIES)
				continue;
			err = -errno;
		} else if (got == 0) {
			if (b->off)
				err = -ENODATA; /* the file ends inside the range */
			break;
		} else {
			*len += (size_t)got;
		}
	}
	if (own)
		close(fd);
	return err;
}

static int read_batch(struct gm_reader *r, struct batch b);

static int sync_batch(struct gm_reader *r, const struct batch *b)
{
	for (unsigned i = 0; i < b->n; i++) {
		size_t len;
		int err = sync_one(r, b, i, &len);
		int ret = err ? b->fn(b->arg, i, NULL, 0, err)
			      : b->fn(b->arg, i, r->slots[0].buf, len, 0);
		if (ret)
			return ret;
	}
	return 0;
}

static int read_batch(struct gm_reader *r, struct batch b)
{
	int ret;

	if (!r)
		return -EINVAL;
	if (r->broken) {
		set_msg(r->msg,
			"gm_reader_read: reader broken by an earlier ring failure (%s);"
			" destroy it",
			strerror(-r->broken));
		return r->broken;
	}
	if ((b.n && (!b.fn || (b.off && !b.hint)))) {
		set_msg(r->msg, "gm_reader_read: NULL lengths or callback");
		return -EINVAL;
	}
	if (r->busy) {
		set_msg(r->msg, "gm_reader_read: called from its own callback");
		return -EBUSY;
	}
	r->msg[0] = '\0';
	r->busy = true;
	if (r->sync) {
		ret = sync_batch(r, &b);
		r->busy = false;
		return ret;
	}

	for (;;) {
		/* Fill free slots (all of them at the start: one submission per turn). */
		while (!b.stop && b.next < b.n && r->nfree) {
			ret = start_file(r, &b, r->free_slots[--r->nfree]);
			if (ret && !b.stop)
				b.stop = ret;
		}
		if (!b.inflight)
			break;
		ret = io_uring_submit_and_wait(&r->ring, 1);
		if (ret < 0 && ret != -EINTR && ret != -EAGAIN && ret != -EBUSY && ret != -ETIME) {
			r->broken = ret;
			r->busy = false;
			set_msg(r->msg, "gm_reader_read: io_uring_submit_and_wait: %s%s",
				strerror(-ret),
				ret == -EEXIST ? " (reader used by a thread or process other"
						 " than the one that created it)"
					       : "");
			return ret;
		}
		reap(r, &b);
	}
	r->busy = false;
	return b.stop;
}
