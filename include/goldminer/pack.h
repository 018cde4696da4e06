/*
 * pack.h - convert an ImageFolder tree into WebDataset tar shards (`goldminer
 * pack`). The shard writer itself (also used by synth --shards) is tar.h's.
 */
#ifndef GOLDMINER_PACK_H
#define GOLDMINER_PACK_H

#include <stdint.h>
#include <stddef.h>

/*
 * Pack the ImageFolder tree src into dst/shard-NNNNNN.tar, per_shard samples a
 * shard, in the tree's sample order: member KEY.<ext> (the file's bytes) and
 * KEY.cls (the class index), KEY = CLASS/relative path without its extension,
 * dots in the file name turned into '_' (a WebDataset key ends at the first dot).
 * The shards are re-indexed and checked (same samples, labels and sizes) under
 * temporary names, and renamed only when all of them are complete and checked.
 * dst (created if missing) must hold no .tar file: -EEXIST.
 * Returns 0 or -errno with a message naming the file and the cause in err (for a
 * full file system: ENOSPC, and whether blocks or inodes ran out; EDQUOT); on
 * failure nothing is left in dst (and dst is removed if pack created it).
 */
int gm_pack(const char *src, const char *dst, uint32_t per_shard, uint64_t *bytes_out,
	    uint32_t *shards_out, char *err, size_t errlen);

#endif
