/*
 * tar.h - WebDataset tar shards: the format, read and written.
 *
 * A shard is a POSIX tar (ustar, GNU or pax) whose members are grouped into samples
 * by key: the member's path up to the first '.' of its file name ("a/000017.jpg" and
 * "a/000017.cls" are sample "a/000017"), the members of one sample consecutive, as
 * WebDataset writes them. A sample is its .jpg/.jpeg member, labelled by the decimal
 * number in its .cls member.
 *
 * Reading hands out each sample's byte offset and length in the shard (the workers
 * read members at offsets); it keeps nothing. Writing produces the same layout
 * (KEY.EXT then KEY.cls) with fixed header fields, so the same input gives the same
 * bytes. dataset.c builds its index from gm_tar_index; pack.c and synth.c write
 * through the shard writer.
 */
#ifndef GOLDMINER_TAR_H
#define GOLDMINER_TAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Longest member name the writer accepts (the reader takes one more: 4096). */
#define GM_TAR_MAX_NAME 4095u

/* ---- reading ------------------------------------------------------------------ */

/* One sample of a shard, as gm_tar_index hands it out (valid during the call). */
struct gm_tar_sample {
	const char *key;    /* the member path up to the first '.' of its file name */
	const char *member; /* the image member's full name */
	uint64_t offset;    /* of the image bytes in the shard */
	uint64_t size;	    /* of the image, exact */
	uint32_t label;	    /* from KEY.cls, below 2^20 */
};

/*
 * Index the shard at path: for every sample with an image, in shard order, call
 * on_sample(ctx, sample). Keys without an image (other modalities) are skipped;
 * members other than .jpg/.jpeg/.cls (.json, .txt, ...), directories, links and
 * global pax headers are ignored. Every header's checksum is verified.
 * Returns 0, the first nonzero value on_sample returns (no message is written for
 * it), -errno from open/read, or -EBADMSG for a malformed shard (not a tar,
 * truncated, two images under one key, a sample without .cls, a bad label, or
 * anything but zeros after a zero block: only an end-of-archive marker, one or two
 * zero blocks then zeros to the end of the file, may end the archive); then
 * err gets "WHO: SHARD: ..." (who: the caller's name, for the message) naming the
 * offset of the fault.
 */
int gm_tar_index(const char *path, const char *who,
		 int (*on_sample)(void *ctx, const struct gm_tar_sample *s), void *ctx, char *err,
		 size_t errlen);

/* ---- writing ------------------------------------------------------------------ */

/*
 * Append one regular-file member to a tar stream: a ustar header (mode 0644, owner
 * 0, mtime 0, so the same input gives the same bytes), preceded by a GNU long-name
 * record when name has 100 characters or more, then data padded to 512 bytes.
 * 0, -errno of the failed write (-ENOSPC, -EDQUOT, ...; -EIO when stdio does not
 * say) or -ENAMETOOLONG (name over GM_TAR_MAX_NAME characters).
 */
int gm_tar_write_member(FILE *f, const char *name, const void *data, size_t len);

/* End a tar stream (two zero blocks). 0 or -errno as above. */
int gm_tar_write_end(FILE *f);

/*
 * Writes samples into dir/shard-000000.tar, shard-000001.tar, ..., per_shard
 * samples a shard: KEY.EXT (the bytes) then KEY.cls (the label), the layout
 * gm_tar_index reads. All or nothing: each shard is written under a temporary
 * name, dir/.shard-NNNNNN.tar.tmp (not *.tar, so no index reads it), and only
 * gm_tar_writer_commit gives the shards their names, all of them at once; close
 * without a successful commit removes every temporary, so a failure half-way (a
 * full disk) never leaves shards that load as a smaller dataset.
 *
 * open: exclusive: an existing dir/shard-NNNNNN.tar (or a temporary of another
 *   writer) is -EEXIST rather than replaced, at add and again at commit.
 * add: append one sample. end: finish the last shard (end-of-archive blocks,
 *   flushed and fsync'ed); no add after it. shard(i): the path of shard i as it
 *   is now (the temporary before commit, for checking it; NULL if i is past the
 *   last), valid until the next call. commit: end, then rename every temporary
 *   (on failure the ones renamed already are removed again). close: free, and
 *   remove the temporaries unless committed (NULL: 0); returns 0.
 * Functions return 0 or -errno: ENOSPC, EDQUOT and the like as the system gave
 * them; gm_tar_writer_path then names the file they concern.
 * Not thread-safe: one writer, one thread.
 */
struct gm_tar_writer;
int gm_tar_writer_open(struct gm_tar_writer **out, const char *dir, uint32_t per_shard,
		       bool exclusive);
int gm_tar_writer_add(struct gm_tar_writer *w, const char *key, const char *ext, const void *data,
		      size_t len, uint32_t label);
int gm_tar_writer_end(struct gm_tar_writer *w);
const char *gm_tar_writer_shard(struct gm_tar_writer *w, uint32_t i);
int gm_tar_writer_commit(struct gm_tar_writer *w);
const char *gm_tar_writer_path(const struct gm_tar_writer *w);
uint32_t gm_tar_writer_shards(const struct gm_tar_writer *w);
int gm_tar_writer_close(struct gm_tar_writer *w);

#endif
