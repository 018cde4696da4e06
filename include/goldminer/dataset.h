/*
 * dataset.h - the sample index: sample id -> (path, size, label).
 *
 * ImageFolder trees: root/<class>/[subdirs/]NAME.jpg|jpeg (case-insensitive extension),
 * classes sorted by byte order of their names as torchvision sorts them, files
 * sorted within a class, label = class index. Built once by the coordinator and
 * then only read (workers inherit it across fork). Deterministic: the same tree
 * gives the same index.
 *
 * WebDataset tar shards: root is one .tar file, or a directory with *.tar files and
 * no class directories (shards in name order). Members are grouped into samples by
 * key (path up to the first '.' of the file name); a sample is its .jpg/.jpeg member,
 * labelled by the decimal number in its .cls member. Classes are 0..max label, named
 * by their number. Workers read each member at its offset in the shard.
 */
#ifndef GOLDMINER_DATASET_H
#define GOLDMINER_DATASET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gm_dataset;

/*
 * Index the tree at root. 0, or -ENOENT (missing root), -ENOTDIR, -EACCES
 * (unreadable), -ENODATA (no class directory / no JPEG anywhere), -EBADMSG (a
 * malformed shard: not a tar, truncated, a sample without .cls), -ENOMEM; on error
 * err (errlen bytes, may be NULL) gets a message naming the offending path.
 */
int gm_dataset_open(struct gm_dataset **out, const char *root, char *err, size_t errlen);

/* What a bounded open may read (gm_dataset_open_bounded). */
struct gm_dataset_bounds {
	uint64_t max_entries; /* directory entries read plus shard members; 0: no bound */
	bool confined;	      /* every symlink must resolve beneath root */
};

/*
 * gm_dataset_open for a tree someone else named (a peer's LEND, remote.h): past
 * b->max_entries it stops with -EFBIG; confined, a symlink that leads out of
 * root (an absolute target, or ".." above it) is refused with -EXDEV naming it,
 * checked before the link is followed (openat2 RESOLVE_BENEATH: -ENOSYS before
 * Linux 5.6). The index of a tree that passes equals gm_dataset_open's. b NULL:
 * gm_dataset_open. Root itself is opened as given (its own path is the caller's
 * to check). Thread-safe as gm_dataset_open is.
 */
int gm_dataset_open_bounded(struct gm_dataset **out, const char *root,
			    const struct gm_dataset_bounds *b, char *err, size_t errlen);

/* Free the index; NULL is a no-op. */
void gm_dataset_close(struct gm_dataset *d);

uint32_t gm_dataset_count(const struct gm_dataset *d);	     /* samples */
uint32_t gm_dataset_num_classes(const struct gm_dataset *d); /* classes */
const char *gm_dataset_class_name(const struct gm_dataset *d, uint32_t cls);
const char *gm_dataset_root(const struct gm_dataset *d);

/* Full path of the file holding sample id (id < count): the JPEG, or its shard.
 * Valid until gm_dataset_close. */
const char *gm_dataset_path(const struct gm_dataset *d, uint32_t id);
/* The sample's name for messages: its path, or "SHARD.tar:member.jpg". */
const char *gm_dataset_name(const struct gm_dataset *d, uint32_t id);
/* Byte offset of the sample in gm_dataset_path (0 unless sharded). */
uint64_t gm_dataset_offset(const struct gm_dataset *d, uint32_t id);
/* true when the samples are members of tar shards (read at offsets). */
bool gm_dataset_sharded(const struct gm_dataset *d);
/* Sharded datasets: the shard files in order, and the shard of sample id
 * (UINT32_MAX for ImageFolder datasets, which have 0 shards). */
uint32_t gm_dataset_num_shards(const struct gm_dataset *d);
const char *gm_dataset_shard_path(const struct gm_dataset *d, uint32_t k);
uint32_t gm_dataset_shard(const struct gm_dataset *d, uint32_t id);
/* File size in bytes as seen when indexing (a hint for the reader's buffers; for a
 * shard member, its exact length). */
uint64_t gm_dataset_file_size(const struct gm_dataset *d, uint32_t id);
/* Class index of sample id. */
uint32_t gm_dataset_label(const struct gm_dataset *d, uint32_t id);
/* Largest file size in the index. */
uint64_t gm_dataset_max_file_size(const struct gm_dataset *d);
/* 64-bit hash of (relative path, size, label) of every sample, in order: identifies
 * the index for checkpoints and cross-process checks. */
uint64_t gm_dataset_fingerprint(const struct gm_dataset *d);

#endif
