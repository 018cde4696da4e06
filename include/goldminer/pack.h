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
 * Then re-indexes dst and checks that it has the same samples, labels and sizes.
 * Returns 0 or -errno with a message naming the file in err.
 */
int gm_pack(const char *src, const char *dst, uint32_t per_shard, uint64_t *bytes_out,
	    uint32_t *shards_out, char *err, size_t errlen);

#endif
