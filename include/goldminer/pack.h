/*
 * pack.h - convert an ImageFolder tree into WebDataset tar shards (`goldminer
 * pack`). The shard writer itself (also used by synth --shards) is tar.h's.
 */
#ifndef GOLDMINER_PACK_H
#define GOLDMINER_PACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/* What gm_pack_ex writes. */
struct gm_pack_opts {
	uint32_t per_shard; /* samples a shard (not with tree) */
	uint32_t restart;   /* 0: the files' bytes; N: each JPEG rewritten losslessly with
			     * a restart marker every N MCUs at most: the largest divisor
			     * of its MCUs per row up to N (gm_jpeg_fit_restart) */
	bool tree;	    /* an ImageFolder tree at dst, not shards */
};

/* Default restart interval, in MCUs: measured on the photo set (DESIGN.md). */
#define GM_PACK_RESTART_DEFAULT 4u

/* What gm_pack_ex did. */
struct gm_pack_stats {
	uint64_t bytes_in, bytes_out; /* the images' bytes read, and written */
	uint32_t files;		      /* images written */
	uint32_t kept;		      /* restart: written as they were (see gm_pack_ex) */
	uint32_t shards;	      /* shards written (0 for a tree) */
};

/*
 * gm_pack with options. restart N: every image is transcoded losslessly with a
 * restart marker every N MCUs (1..65535), then both files are decoded in full and
 * compared; an image that does not transcode (corrupt, or not a JPEG) or whose
 * pixels would differ is written as it was and counted in kept. tree: write the
 * same ImageFolder tree (same class directories, relative paths and names) at
 * dst, which must not exist or be an empty directory; it is written under
 * dst.tmp-PID beside it, indexed and compared with src (same samples, labels and
 * the sizes written), and renamed to dst only then; on failure nothing is left.
 * Shards as gm_pack's, checked against the sizes written. st may be NULL.
 * Returns 0 or -errno with a message naming the file in err.
 */
int gm_pack_ex(const char *src, const char *dst, const struct gm_pack_opts *o,
	       struct gm_pack_stats *st, char *err, size_t errlen);

#endif
