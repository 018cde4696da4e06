/*
 * synth.h - synthetic JPEG datasets and deliberately bad files for tests.
 *
 * gm_synth_write() writes an ImageFolder tree DIR/class_XX/img_XXXXXX.jpg of real
 * JPEGs (libjpeg-turbo compression) whose sizes, content and encodings resemble
 * ImageNet: mostly ~500x375 4:2:0 baseline at quality 90 with photo-like entropy
 * (30-80 KB), some portrait, a few grayscale, progressive, 4:4:4 and CMYK. The
 * bytes of every file depend only on (seed, image index, quality).
 *
 * The single-file helpers give tests exact control: a JPEG of a given size and
 * kind in memory or on disk, and bad files (empty, truncated, corrupt header, not
 * a JPEG, decompression bomb).
 */
#ifndef GOLDMINER_SYNTH_H
#define GOLDMINER_SYNTH_H

#include <stddef.h>
#include <stdint.h>

/* Flags for gm_synth_jpeg_mem() / gm_synth_write_jpeg(). Default: YCbCr 4:2:0 baseline. */
#define GM_SYNTH_GRAY	     0x1u  /* one grayscale component */
#define GM_SYNTH_PROGRESSIVE 0x2u  /* progressive scan script */
#define GM_SYNTH_CMYK	     0x4u  /* 4 components, Adobe (inverted) CMYK, no transform */
#define GM_SYNTH_444	     0x8u  /* no chroma subsampling */
#define GM_SYNTH_422	     0x10u /* 2x1 chroma subsampling */
#define GM_SYNTH_FLAT	     0x20u /* smooth content only (no noise): compresses small */

/* Kinds of bad file for gm_synth_write_bad(). */
enum gm_synth_bad {
	GM_SYNTH_BAD_EMPTY = 0,	    /* zero bytes */
	GM_SYNTH_BAD_TRUNCATED = 1, /* headers + the first 16 bytes of entropy data */
	GM_SYNTH_BAD_CORRUPT = 2,   /* a valid file whose Huffman table is garbage */
	GM_SYNTH_BAD_NOT_JPEG = 3,  /* a PNG signature and some bytes */
	GM_SYNTH_BAD_BOMB = 4,	    /* tiny valid JPEG whose SOF says 30000x30000 */
};

/*
 * Encode a w x h synthetic image (content from seed) as a JPEG in memory.
 * quality 1..100 (0 means 90). *out is malloc'ed: the caller free()s it.
 * Returns 0, -EINVAL (w or h 0 or over 65500, bad quality), -ENOMEM.
 */
int gm_synth_jpeg_mem(uint32_t w, uint32_t h, uint64_t seed, unsigned flags, int quality,
		      uint8_t **out, size_t *len);

/* Same as gm_synth_jpeg_mem() at quality 90, written to path (created/truncated). */
int gm_synth_write_jpeg(const char *path, uint32_t w, uint32_t h, uint64_t seed, unsigned flags);

/*
 * A JPEG whose header claims w x h but that holds only a 16x16 image: decoders
 * that allocate from the header before checking a limit blow up on it.
 * *out is malloc'ed (caller frees). Returns 0, -EINVAL (w/h 0 or > 65500), -ENOMEM.
 */
int gm_synth_bomb_mem(uint32_t w, uint32_t h, uint8_t **out, size_t *len);

/* Write a bad file of the given kind to path. 0 or -errno (-EINVAL: unknown kind). */
int gm_synth_write_bad(const char *path, enum gm_synth_bad kind, uint64_t seed);

/*
 * Write n images into dir (created if missing, parents too) as
 * dir/class_<c>/img_<i>.jpg, image i in class i % classes, class numbers padded
 * to at least 2 digits so the directories sort numerically. Files with those
 * names are overwritten; anything else in dir is left alone. quality 0 means 90.
 * If bytes_out is not NULL it receives the total bytes written.
 * Returns 0 or -errno with a message naming the path in errbuf (if errlen > 0).
 */
int gm_synth_write(const char *dir, uint32_t n, uint32_t classes, uint64_t seed, int quality,
		   uint64_t *bytes_out, char *errbuf, size_t errlen);

/*
 * The same n images as gm_synth_write (same bytes), as WebDataset tar shards:
 * dir/shard-NNNNNN.tar, per_shard samples each, members class_XX/img_XXXXXX.jpg and
 * .cls (the class number), in the ImageFolder order of gm_synth_write's tree, so
 * both layouts index to the same samples, labels and ids.
 */
int gm_synth_write_shards(const char *dir, uint32_t n, uint32_t classes, uint64_t seed, int quality,
			  uint32_t per_shard, uint64_t *bytes_out, char *errbuf, size_t errlen);

#endif
