/*
 * pack.h - write WebDataset tar shards (`goldminer pack`, and synth --shards).
 */
#ifndef GOLDMINER_PACK_H
#define GOLDMINER_PACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/*
 * Append one regular-file member to a tar stream: a ustar header (mode 0644, owner
 * 0, mtime 0, so the same input gives the same bytes), preceded by a GNU long-name
 * record when name has 100 characters or more, then data padded to 512 bytes.
 * 0 or -EIO / -ENAMETOOLONG (name over 4095 characters).
 */
int gm_tar_write_member(FILE *f, const char *name, const void *data, size_t len);

/* End a tar stream (two zero blocks). 0 or -EIO. */
int gm_tar_write_end(FILE *f);

/*
 * Writes samples into dir/shard-000000.tar, shard-000001.tar, ..., per_shard
 * samples a shard: KEY.EXT (the bytes) then KEY.cls (the label), the layout
 * dataset.c indexes. exclusive: an existing shard file is -EEXIST rather than
 * overwritten. Functions return 0 or -errno; gm_shard_writer_path names the shard
 * being written, for messages. close ends the last shard and frees (NULL: 0).
 */
struct gm_shard_writer;
int gm_shard_writer_open(struct gm_shard_writer **out, const char *dir, uint32_t per_shard,
			 bool exclusive);
int gm_shard_writer_add(struct gm_shard_writer *w, const char *key, const char *ext,
			const void *data, size_t len, uint32_t label);
const char *gm_shard_writer_path(const struct gm_shard_writer *w);
uint32_t gm_shard_writer_shards(const struct gm_shard_writer *w);
int gm_shard_writer_close(struct gm_shard_writer *w);

/*
 * Pack the ImageFolder tree src into dst/shard-NNNNNN.tar, per_shard samples a
 * shard, in the tree's sample order: member KEY.<ext> (the file's bytes) and
 * KEY.cls (the class index), KEY = CLASS/relative path without its extension,
 * dots in the file name turned into '_' (a WebDataset key ends at the first dot).
 * Then re-indexes dst and checks that it has the same samples, labels and sizes.
 * Returns 0 or -errno with a message naming the file in err.
 */
int gm_pack(const char *src, const char *dst, uint32_t per_shard, uint64_t *bytes_out,
	    uint32_t *shards_out, char *err, size_t errlen);

#endif
