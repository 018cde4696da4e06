/*
 * reader.h - batch file reader on io_uring, one per worker.
 *
 * For a batch, every file read is submitted at once as a linked chain
 * OPENAT(direct) -> READ(fixed file, into a reused buffer) -> CLOSE(direct),
 * and the caller's callback runs for each file as soon as its read completes, so
 * decoding of early completions overlaps the I/O of the rest. Buffers are owned by
 * the reader, allocated once (grown only when a larger file appears) and reused.
 * Not thread-safe per handle.
 */
#ifndef GOLDMINER_URING_H
#define GOLDMINER_URING_H

#include <stddef.h>
#include <stdint.h>

struct gm_reader;

/*
 * Called once per file, in completion order. i: index into the paths array.
 * data/len: the whole file contents (valid only during the call); err: 0 or -errno
 * of the failed open/read (data NULL then); -ESPIPE for a path that is not a
 * regular file (a FIFO, socket or device: refused without being opened for
 * reading, so it never blocks), -EISDIR for a directory. A non-zero return stops the batch
 * (remaining completions are drained, not delivered) and is returned by
 * gm_reader_read().
 */
typedef int (*gm_reader_fn)(void *arg, unsigned i, const void *data, size_t len, int err);

/* Create a reader able to have up to `depth` (1..4096) files in flight. 0 or
 * -errno (-EINVAL: bad depth; with GM_READER=io_uring also the io_uring setup's
 * error, e.g. -ENOSYS, instead of falling back to pread); the message, naming the
 * failing call, is then gm_reader_errmsg(NULL) (per thread). */
int gm_reader_create(struct gm_reader **out, unsigned depth);

/*
 * gm_reader_create, plus files[] (tar shards) opened now and kept in the ring's
 * registered file table, so that gm_reader_read_fixed reads them at offsets with one
 * READ each, no open or close. If the kernel or RLIMIT_NOFILE refuses a table that
 * large, the reader is created without them (gm_reader_fixed_files() == 0: read by
 * path). A file that cannot be opened here fails each of its reads with its errno.
 */
int gm_reader_create_files(struct gm_reader **out, unsigned depth, const char *const *files,
			   unsigned nfiles);

/*
 * How this reader reads: "io_uring", or "pread" when io_uring could not be set up
 * here (no io_uring in the kernel, blocked by a container's seccomp profile, gVisor,
 * a kernel too old for the ops used; gm_reader_why says which call failed and how)
 * or GM_READER=pread is set. Same results either way; pread reads file by file.
 * GM_READER=io_uring makes the io_uring failure an error of gm_reader_create.
 */
const char *gm_reader_mode(const struct gm_reader *r);
const char *gm_reader_why(const struct gm_reader *r);

/* Files registered by gm_reader_create_files (0: none, read by path). */
unsigned gm_reader_fixed_files(const struct gm_reader *r);

/* Destroy; NULL is a no-op. */
void gm_reader_destroy(struct gm_reader *r);

/*
 * Read n whole files (n may exceed depth: they go in waves). size_hint[i] (may be
 * NULL) is the expected size; a file larger than its hint is still read whole.
 * Returns 0 when every file was delivered to fn (with data or with err), a
 * non-zero fn return, or -errno for a ring failure (gm_reader_errmsg says which).
 */
int gm_reader_read(struct gm_reader *r, const char *const *paths, const uint64_t *size_hint,
		   unsigned n, gm_reader_fn fn, void *arg);

/*
 * Read byte ranges: file i's lengths[i] bytes from offsets[i] (tar shard members).
 * offsets NULL: whole files, lengths being size hints, as gm_reader_read. A file
 * that ends inside its range is delivered with -ENODATA. Same returns otherwise.
 */
int gm_reader_read_at(struct gm_reader *r, const char *const *paths, const uint64_t *offsets,
		      const uint64_t *lengths, unsigned n, gm_reader_fn fn, void *arg);

/*
 * Byte ranges of registered files: range i is lengths[i] bytes at offsets[i] of
 * registered file files[i]. As gm_reader_read_at otherwise; -ENOTSUP when the
 * reader has no registered files.
 */
int gm_reader_read_fixed(struct gm_reader *r, const unsigned *files, const uint64_t *offsets,
			 const uint64_t *lengths, unsigned n, gm_reader_fn fn, void *arg);

/* Message of the last error ("" if none); NULL: this thread's last failed create.
 * Other returns of gm_reader_read: -EBUSY when called from its own callback; a
 * file over 1 GiB is delivered with -EFBIG; after a ring failure the reader is
 * broken (every later read fails the same way) and must be destroyed. */
const char *gm_reader_errmsg(const struct gm_reader *r);

#endif
