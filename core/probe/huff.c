/*
 * probe/huff.c - the build's check that the libjpeg found is one whose private
 * structs core/huff.c uses as it was written for: libjpeg-turbo 2.1 (libjpeg API
 * 62). huff.c takes the place of libjpeg's entropy decoder inside a running
 * decompressor, so it relies on more than the public API, and nothing else checks
 * it: libjpeg's own check (jpeg_CreateDecompress) covers the public struct's size.
 *
 * The Makefile compiles this file (syntax only, never linked) with the library's
 * flags before core/huff.c and core/jpeg.c. Every assumption below is a static
 * assertion whose message says what huff.c expects; the first that fails, with what
 * was found (GM_HUFF_PROBE_FOUND below), is the one line the build prints before it
 * goes on with GM_OWN_HUFFMAN 0: huff.c compiled out and libjpeg's own Huffman
 * decoder in jpeg.c (the same pixels, a slower decode). HUFF_PROBE_FAIL=1 (make)
 * fails it on purpose (tests/test_huff_fallback.sh).
 *
 * What huff.c relies on, and so what is asserted:
 *   - libjpeg-turbo 2.1.x with the libjpeg 6b API (62), 8-bit samples: huff.c
 *     follows 2.1's jdhuff.c (its warnings, when it emits them, where its fast and
 *     slow paths disagree), and was tested against 2.1.5; another version may
 *     be right too, but the tests (test_jpeg's, the fuzz_huff replay) say so
 *     first: then widen the range here;
 *   - struct jpeg_entropy_decoder as start_pass, decode_mcu, insufficient_data
 *     (struct gm_huff starts with one; libjpeg calls decode_mcu through
 *     cinfo->entropy and reads insufficient_data);
 *   - has_multiple_scans in struct jpeg_input_controller, read_restart_marker
 *     and discarded_bytes in struct jpeg_marker_reader, where and as declared
 *     below (huff.c reads the first, calls the second, adds to the third);
 *   - first_iMCU_col and last_iMCU_col in struct jpeg_decomp_master, as declared
 *     below (the crop's MCU columns: decode_mcu passes over the MCUs outside
 *     them, which libjpeg's one-pass coefficient controller does not transform);
 *   - 16-bit JCOEF, 64 of them a JBLOCK, DHT tables as bits[17] and huffval[256],
 *     D_MAX_BLOCKS_IN_MCU and MAX_COMPS_IN_SCAN as libjpeg-turbo builds them, and
 *     the three warnings huff.c emits.
 * Not checked here: that the libjpeg loaded at run time is the one these headers
 * describe (gm_huff_install checks that: its message count against theirs).
 */
#include <stddef.h>
#include <stdio.h> /* jpeglib.h needs FILE and size_t first */

#include <jpeglib.h>

#ifdef GM_HUFF_PROBE_FOUND
/* The Makefile's "found": this line, preprocessed (-E) and picked out. */
#ifndef LIBJPEG_TURBO_VERSION
#define LIBJPEG_TURBO_VERSION none
#endif
gm_huff_probe_found LIBJPEG_TURBO_VERSION JPEG_LIB_VERSION
#else

#include <jerror.h>
#if defined(__has_include)
#if __has_include(<jpegint.h>)
#define PROBE_JPEGINT 1
#endif
#endif
#ifdef PROBE_JPEGINT
#include <jpegint.h>
#endif

#ifdef GM_HUFF_PROBE_FAIL
_Static_assert(0, "a probe that passes (HUFF_PROBE_FAIL=1 fails it on purpose)");
#endif

#ifdef LIBJPEG_TURBO_VERSION_NUMBER
#define PROBE_TURBO LIBJPEG_TURBO_VERSION_NUMBER
#else
#define PROBE_TURBO 0
#endif
_Static_assert(PROBE_TURBO >= 2001000 && PROBE_TURBO < 2002000,
	       "libjpeg-turbo 2.1.x (LIBJPEG_TURBO_VERSION_NUMBER 2001000..2001999)");
_Static_assert(JPEG_LIB_VERSION == 62, "the libjpeg 6b API (JPEG_LIB_VERSION 62)");
#ifdef BITS_IN_JSAMPLE
_Static_assert(BITS_IN_JSAMPLE == 8, "8-bit samples (BITS_IN_JSAMPLE 8)");
#endif

#ifndef PROBE_JPEGINT
_Static_assert(0, "jpegint.h, the private header of libjpeg-turbo");
#else

/* The private structs as huff.c declares its uses of them. */
typedef void start_pass_fn(j_decompress_ptr cinfo);
typedef boolean decode_mcu_fn(j_decompress_ptr cinfo, JBLOCKROW *mcu);
typedef int consume_fn(j_decompress_ptr cinfo);
struct want_entropy {
	start_pass_fn *start_pass;
	decode_mcu_fn *decode_mcu;
	boolean insufficient_data;
};
struct want_inputctl {
	consume_fn *consume_input;
	start_pass_fn *reset_input_controller, *start_input_pass, *finish_input_pass;
	boolean has_multiple_scans, eoi_reached;
};
struct want_master {
	start_pass_fn *prepare_for_output_pass, *finish_output_pass;
	boolean is_dummy_pass;
	JDIMENSION first_iMCU_col, last_iMCU_col;
};
struct want_marker {
	start_pass_fn *reset_marker_reader;
	consume_fn *read_markers;
	jpeg_marker_parser_method read_restart_marker;
	boolean saw_SOI, saw_SOF;
	int next_restart_num;
	unsigned int discarded_bytes;
};

/* never defined: only their members' types are looked at (_Generic) */
extern struct jpeg_entropy_decoder probe_entropy;
extern struct jpeg_input_controller probe_inputctl;
extern struct jpeg_marker_reader probe_marker;
extern struct jpeg_decomp_master probe_master;
extern struct jpeg_decompress_struct probe_cinfo;
extern JHUFF_TBL probe_tbl;
typedef int membership_t[D_MAX_BLOCKS_IN_MCU];
typedef UINT8 bits_t[17];
typedef UINT8 huffval_t[256];

/* lvalue x has type T */
#define IS(x, T)	      _Generic(&(x), T * : 1, default : 0)
/* member m of struct S where and as in struct W, of type T */
#define SAME(S, W, obj, m, T) (offsetof(struct S, m) == offsetof(struct W, m) && IS(obj.m, T))

_Static_assert(
    sizeof(struct jpeg_entropy_decoder) == sizeof(struct want_entropy) &&
	SAME(jpeg_entropy_decoder, want_entropy, probe_entropy, start_pass, start_pass_fn *) &&
	SAME(jpeg_entropy_decoder, want_entropy, probe_entropy, decode_mcu, decode_mcu_fn *) &&
	SAME(jpeg_entropy_decoder, want_entropy, probe_entropy, insufficient_data, boolean),
    "struct jpeg_entropy_decoder (jpegint.h) as start_pass, decode_mcu, insufficient_data");
_Static_assert(SAME(jpeg_input_controller, want_inputctl, probe_inputctl, has_multiple_scans,
		    boolean),
	       "has_multiple_scans after four methods in struct jpeg_input_controller (jpegint.h)");
_Static_assert(SAME(jpeg_marker_reader, want_marker, probe_marker, read_restart_marker,
		    jpeg_marker_parser_method) &&
		   SAME(jpeg_marker_reader, want_marker, probe_marker, discarded_bytes,
			unsigned int),
	       "read_restart_marker and discarded_bytes where 2.1 has them in struct "
	       "jpeg_marker_reader (jpegint.h)");
_Static_assert(SAME(jpeg_decomp_master, want_master, probe_master, first_iMCU_col, JDIMENSION) &&
		   SAME(jpeg_decomp_master, want_master, probe_master, last_iMCU_col, JDIMENSION),
	       "first_iMCU_col and last_iMCU_col where 2.1 has them in struct jpeg_decomp_master "
	       "(jpegint.h)");
_Static_assert(IS(probe_cinfo.entropy, struct jpeg_entropy_decoder *) &&
		   IS(probe_cinfo.inputctl, struct jpeg_input_controller *) &&
		   IS(probe_cinfo.marker, struct jpeg_marker_reader *) &&
		   IS(probe_cinfo.master, struct jpeg_decomp_master *) &&
		   IS(probe_cinfo.MCUs_per_row, JDIMENSION) &&
		   IS(probe_cinfo.MCU_membership, membership_t) &&
		   IS(probe_cinfo.restart_interval, unsigned int),
	       "jpeg_decompress_struct with entropy, inputctl, marker, master, MCUs_per_row, "
	       "MCU_membership and restart_interval as 2.1 declares them");
_Static_assert(sizeof(JCOEF) == 2 && sizeof(JBLOCK) == 64 * sizeof(JCOEF) && DCTSIZE2 == 64,
	       "16-bit coefficients, 64 a block");
_Static_assert(IS(probe_tbl.bits, bits_t) && IS(probe_tbl.huffval, huffval_t),
	       "JHUFF_TBL as bits[17] and huffval[256]");
_Static_assert(D_MAX_BLOCKS_IN_MCU == 10 && MAX_COMPS_IN_SCAN == 4,
	       "D_MAX_BLOCKS_IN_MCU 10 and MAX_COMPS_IN_SCAN 4");
_Static_assert(JWRN_JPEG_EOF > 0 && JWRN_HIT_MARKER > 0 && JWRN_HUFF_BAD_CODE > 0,
	       "the warnings JWRN_JPEG_EOF, JWRN_HIT_MARKER and JWRN_HUFF_BAD_CODE");

#endif /* PROBE_JPEGINT */
#endif /* GM_HUFF_PROBE_FOUND */
