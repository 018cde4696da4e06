/*
 * huff.h - goldminer's baseline Huffman entropy decoder, put in the place of
 * libjpeg's inside a running jpeg_decompress_struct (core/huff.c). Internal to
 * core/: jpeg.c installs it; the tests compare it with libjpeg's.
 *
 * GM_OWN_HUFFMAN is the build's verdict on the libjpeg found (core/probe/huff.c,
 * forced in by the Makefile): 1 when its private structs are as this decoder
 * expects; 0 when not, and then this header declares only struct gm_huff_out,
 * huff.c compiles to nothing and jpeg.c keeps libjpeg's decoder. A file compiled without the
 * verdict (make fuzz's libFuzzer targets, over a library built with it) gets 1.
 */
#ifndef GM_CORE_HUFF_H
#define GM_CORE_HUFF_H

#ifndef GM_OWN_HUFFMAN
#define GM_OWN_HUFFMAN 1
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h> /* jpeglib.h needs FILE and size_t first */

#include <jpeglib.h>

/* Where gm_huff_decode_run puts the blocks it stores: block b of an MCU belongs
 * to component comp[b]; its non-zero coefficients (quantised) are appended to
 * val[c] and pos[c] (natural positions 0..63, in the order decoded: zigzag) from
 * index nnz[c], which grows by their number, and that number goes to *cnt[c]++.
 * val[c] and pos[c] need room for 64 entries past nnz[c] for each block stored
 * (the decode writes entries it does not count). Declared in either build (jpeg.c's
 * coefficient output is compiled, never reached, without this decoder). */
struct gm_huff_out {
	int16_t *val[MAX_COMPS_IN_SCAN];
	uint8_t *pos[MAX_COMPS_IN_SCAN];
	uint8_t *cnt[MAX_COMPS_IN_SCAN];
	uint32_t nnz[MAX_COMPS_IN_SCAN];
	int comp[D_MAX_BLOCKS_IN_MCU];
};

#if GM_OWN_HUFFMAN
#include <jpegint.h> /* struct jpeg_entropy_decoder */

/* Lookup width: codes + magnitude bits of up to GM_HUFF_FAST bits decode in one step. */
#define GM_HUFF_FAST  10
#define GM_HUFF_CACHE 8
/* Skip-table width: an AC table's run of whole symbols within the next GM_HUFF_SKIP
 * bits is passed over in one step where the coefficients are not wanted. */
#define GM_HUFF_SKIP 11

struct gm_huff_tab {
	/* by the next GM_HUFF_FAST bits: bits | run << 8 | (uint16)value << 16, where bits
	 * are the code's and the magnitude's; with PARTIAL (huff.c) in bits, the code's
	 * only and value is the magnitude's size; 0: a longer code (or none) */
	uint32_t full[1u << GM_HUFF_FAST];
	/* AC tables, by the next GM_HUFF_SKIP bits: the whole symbols that start there
	 * (huff.c's SK_* fields: their bits, their positions advanced, those before the
	 * last one's); 0: not one whole symbol in those bits */
	uint32_t skip[1u << GM_HUFF_SKIP];
	int32_t maxcode[17]; /* longest code of each length, -1 if none */
	int32_t valoff[17];  /* symbol index of a code of that length = code + valoff */
	uint8_t vals[256];
	/* the DHT it was built from (the cache key) */
	uint8_t key_bits[17];
	uint8_t key_vals[256];
	bool ac, used;
	uint32_t age;
};

struct gm_huff {
	struct jpeg_entropy_decoder pub; /* first: libjpeg calls through cinfo->entropy */
	/* bit reader: acc holds nbits valid bits, most significant first */
	uint64_t acc;
	int nbits;
	int pad;	      /* zero bits appended after the data ended (at a marker / the end) */
	bool at_marker;	      /* the next bytes are a marker (or the buffer's end): no more data */
	bool ends_marked;     /* the buffer ends with a marker: no premature end (TOP_UP) */
	bool bmi2;	      /* the decode compiled for BMI2 runs here (huff.c) */
	const uint8_t *p;     /* next byte not yet in acc */
	const uint8_t *ffn;   /* the first 0xFF byte at or after p, or end (at a marker: p) */
	const uint8_t *start; /* the source buffer, [start, end) */
	const uint8_t *end;
	/* the scan */
	int blocks;
	const struct gm_huff_tab *dc[D_MAX_BLOCKS_IN_MCU], *actab[D_MAX_BLOCKS_IN_MCU];
	int comp[D_MAX_BLOCKS_IN_MCU];
	int last_dc[MAX_COMPS_IN_SCAN];
	unsigned restarts_to_go, restart_interval;
	unsigned mcu_col, mcus_per_row; /* the next MCU's column (decode_mcu counts) */
	/* tables built for earlier files, reused when a file has the same DHT */
	struct gm_huff_tab cache[GM_HUFF_CACHE];
	uint32_t clock; /* for the oldest-first replacement */
};

/* A new decoder (no tables cached), with the instruction set it decodes with
 * chosen: BMI2 where the CPU has it, unless GM_NO_SIMD=1 or GM_SIMD_MAX=sse. */
void gm_huff_init(struct gm_huff *h);

/*
 * Replace cinfo's entropy decoder with h, right after jpeg_start_decompress():
 * only for a single-scan baseline (sequential Huffman, 8-bit) image whose
 * entropy data has not been touched yet, read from a jpeg_mem_src buffer, and
 * only when the libjpeg loaded is the one the build compiled against (its message
 * count as its headers say: the probe checked those). Returns true when
 * installed; false leaves libjpeg's decoder in place.
 */
bool gm_huff_install(struct gm_huff *h, j_decompress_ptr cinfo);

/*
 * The next n MCUs of the scan h decodes (installed on cinfo), as n calls of its
 * decode_mcu would decode them (the same bits read, warnings, restarts and
 * premature end), in one call: MCUs c0..c1-1 of the n stored into o in the sparse
 * form above (an MCU decode_mcu would leave zero: counts of 0), the others passed
 * over as decode_mcu(NULL) passes them (their DC kept for the prediction).
 * libjpeg's error handler may longjmp out of it, as out of decode_mcu.
 */
void gm_huff_decode_run(struct gm_huff *h, j_decompress_ptr cinfo, uint32_t n, uint32_t c0,
			uint32_t c1, struct gm_huff_out *o);

#endif /* GM_OWN_HUFFMAN */
#endif
