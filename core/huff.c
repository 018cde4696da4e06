/*
 * huff.c - a baseline Huffman entropy decoder that takes the place of libjpeg's
 * (libjpeg-turbo 2.1's jdhuff.c) inside a running decompressor (see huff.h).
 *
 * Why by hand: on the photo set, libjpeg's Huffman decoding is about 70% of a
 * crop decode's time (the IDCT, upsampling and colour conversion at the scaled
 * sizes the crops use are the other 30%), and libjpeg has no faster entry point.
 * This decoder produces the same coefficients from the same bits (the tests decode
 * every test image both ways and compare), faster, because:
 *   - one table lookup gives a whole AC symbol when its code and its magnitude
 *     bits fit in GM_HUFF_FAST bits: the run, the sign-extended value and the
 *     bits to drop (libjpeg looks up the code, then reads and extends the value);
 *   - the bit buffer is refilled 7 bytes at a time with one unaligned load when
 *     none of those bytes is 0xFF (before the next 0xFF byte, which memchr finds
 *     once: the byte-stuffing check), byte by byte only
 *     near a stuffed 0xFF, a marker or the end of the data; where the data ends
 *     with a marker, topped up before every 4 symbols rather than checked before
 *     each (TOP_UP);
 *   - EOB and ZRL go through the same step as a coefficient (a store of 0 at a
 *     position not yet written, into a block libjpeg zeroed), so the inner loop
 *     has one branch for the common case;
 *   - tables are kept across files: most photos share their encoder's tables;
 *   - where libjpeg skips an MCU (decode_mcu(NULL): rows above a window), where it
 *     asks for one it will not transform (the columns beside a crop: mcu_body)
 *     and where coefficient output needs none (beside its window) the AC symbols
 *     are passed over, not decoded: one lookup of GM_HUFF_SKIP bits gives the bits
 *     and the positions of all the whole symbols in them (1.7 on the photo set)
 *     (skip_ac). Coefficient mode passes over four in ten of its symbols;
 *   - coefficient output (gm_huff_decode_run) writes each block as it decodes it
 *     into the sparse form the slot carries, a row of MCUs a call;
 *   - the decode is compiled for the baseline x86-64 and for BMI2 (gm_huff_init
 *     picks): every symbol's chain has shifts by a register, one operation with
 *     BMI2's shlx/shrx, three without.
 *
 * Measured and not kept (coef_bench, the photo set): two AC symbols with their
 * values in one lookup where the coefficients are wanted (a pair table of 9 or 11
 * bits): 5-10% slower, the branch between one and two symbols mispredicted; a
 * refill without a branch before every symbol (a masked or-in): slower (before
 * every 4, TOP_UP: faster); lookups of 11 bits rather than 10, skip tables of 12
 * or 13 bits rather than 11: no change. The decode is bound by its chain lookup -> shift -> lookup
 * and by mispredicted branches (a block's end, one per block), not by its stores.
 *
 * Everything around the entropy data stays libjpeg's: the header, the tables'
 * validation (libjpeg's start_pass has built and checked them before this is
 * installed), restart markers (read by libjpeg's marker reader, with its warnings
 * and resynchronisation), and the messages: running out of data or meeting a bad
 * code emits the same warnings libjpeg's decoder emits, at the same point of the
 * decode (per MCU), and the decode goes on the same way (zeros; an MCU after the
 * data ran out is left as libjpeg leaves it, zeroed). Where libjpeg-turbo's fast
 * and slow paths disagree on a corrupt file (the fast path takes a bad code as 0
 * without a warning, and leaves stale coefficients after FF FF .. FF 00), this does
 * what the slow path does (tests/fuzz/huffdiff.h lists the cases the tests allow).
 */
#include "huff.h"

#if GM_OWN_HUFFMAN /* the build's probe passed (huff.h) */
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__clang__) || __GNUC__ >= 5)
#define GM_HUFF_BMI2 1 /* decode_mcu_bmi2, decode_run_bmi2 compiled */
#else
#define GM_HUFF_BMI2 0
#endif

#include <jerror.h>

/* Zigzag position -> natural (row-major) position; positions past 63 (a run that
 * overshoots in a corrupt file, or EOB's run of 64 below) all land on 63. */
static const uint8_t natural[64 + 80] = {
    0,	1,  8,	16, 9,	2,  3,	10, 17, 24, 32, 25, 18, 11, 4,	5,  12, 19, 26, 33, 40, 48, 41, 34,
    27, 20, 13, 6,  7,	14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51,
    58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63, 63, 63, 63, 63, 63, 63, 63, 63,
    63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
    63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
    63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63};

/* The run an entry carries for EOB (and for (r, 0) with r != 15, which libjpeg
 * also takes as the end of the block): past the end of any block. */
#define RUN_EOB 64
/* In an entry's bits byte: only the code's bits are counted; the value field holds
 * the number of magnitude bits that follow it. */
#define PARTIAL 0x80

static inline int extend(uint32_t v, int s)
{
	return s && v < (1u << (s - 1)) ? (int)v - (1 << s) + 1 : (int)v;
}

static inline uint32_t entry(int bits, int run, int value)
{
	return (uint32_t)bits | (uint32_t)run << 8 | (uint32_t)(uint16_t)(int16_t)value << 16;
}

/* n entries e, e + step, e + 2 step, ... (the value field counts up) */
static inline void fill(uint32_t *w, uint32_t n, uint32_t e, uint32_t step)
{
	for (uint32_t i = 0; i < n; i++)
		w[i] = e + i * step;
}

/* n values counting up from e's, each repeated sub times */
static void ramp(uint32_t *w, uint32_t n, uint32_t sub, uint32_t e)
{
	if (sub == 1) {
		fill(w, n, e, 1u << 16);
		return;
	}
	for (uint32_t v = 0; v < n; v++)
		fill(w + v * sub, sub, e + (v << 16), 0);
}

/* A skip entry's fields (struct gm_huff_tab.skip): the bits of its symbols, the
 * positions they advance a block by (EOB: RUN_EOB; 64 or more, the block ends), and
 * both for all of them but the last. */
#define SK_BITS(e)  ((int)((e)&0xFF))
#define SK_ADV(e)   ((int)(((e) >> 8) & 0xFF))
#define SK_ADV1(e)  ((int)(((e) >> 16) & 0xFF))
#define SK_BITS1(e) ((int)((e) >> 24))

/* The AC symbol whose code starts at the top of the n-bit word x, by the canonical
 * search (maxcode, valoff set): false when its code and magnitude bits do not all
 * lie within the n bits (or no code does); else its bits and the positions it
 * advances a block by. */
static bool whole_symbol(const struct gm_huff_tab *t, uint32_t x, int n, int *len, int *adv)
{
	for (int l = 1; l <= n && l <= 16; l++) {
		int32_t code = (int32_t)(x >> (n - l));
		if (code <= t->maxcode[l]) {
			int sym = t->vals[code + t->valoff[l]], s = sym & 15, r = sym >> 4;
			*len = l + s;
			*adv = s == 0 && r != 15 ? RUN_EOB : r + 1;
			return l + s <= n;
		}
	}
	return false;
}

/* t's skip table (maxcode, valoff and vals set): from each GM_HUFF_SKIP-bit
 * index, the whole symbols it holds, up to the first that ends any block. */
static void build_skip(struct gm_huff_tab *t)
{
	for (uint32_t i = 0; i < (1u << GM_HUFF_SKIP); i++) {
		int used = 0, adv = 0, used1 = 0, adv1 = 0, len, a;
		while (adv < 64 && whole_symbol(t, i & ((1u << (GM_HUFF_SKIP - used)) - 1),
						GM_HUFF_SKIP - used, &len, &a)) {
			used1 = used, adv1 = adv;
			used += len, adv += a;
		}
		t->skip[i] = used ? (uint32_t)used | (uint32_t)adv << 8 | (uint32_t)adv1 << 16 |
					(uint32_t)used1 << 24
				  : 0;
	}
}

/*
 * Build t from a DHT (bits[1..16] code counts, vals the symbols). false on a
 * table libjpeg would not have accepted (then nothing is installed).
 */
static bool build(struct gm_huff_tab *t, const JHUFF_TBL *ht, bool ac)
{
	uint32_t code = 0, n = 0;
	uint8_t lens[256] = {0};

	for (int l = 1; l <= 16; l++) {
		t->valoff[l] = (int32_t)n - (int32_t)code;
		for (int i = 0; i < ht->bits[l]; i++) {
			if (n >= 256 || code >= (1u << l))
				return false;
			code++;
			lens[n++] = (uint8_t)l;
		}
		t->maxcode[l] = ht->bits[l] ? (int32_t)code - 1 : -1;
		code <<= 1;
	}
	memcpy(t->vals, ht->huffval, 256);
	/* canonical codes are in increasing order: the entries are written front to back */
	uint32_t *w = t->full;
	for (uint32_t k = 0; k < n && lens[k] <= GM_HUFF_FAST; k++) {
		int l = lens[k], sym = ht->huffval[k];
		uint32_t span = 1u << (GM_HUFF_FAST - l);
		int s = ac ? sym & 15 : sym, r = ac ? sym >> 4 : 0;
		if (s > 15)
			return false; /* a DC category libjpeg rejects */
		if (s == 0) {
			fill(w, span, entry(l, ac && r != 15 ? RUN_EOB : r, 0), 0);
		} else if (l + s <= GM_HUFF_FAST) {
			/* values -(2^s - 1).. -2^(s-1), then 2^(s-1)..2^s - 1: two ramps */
			uint32_t sub = 1u << (GM_HUFF_FAST - l - s), half = 1u << (s - 1);
			ramp(w, half, sub, entry(l + s, r, 1 - (int)(2 * half)));
			ramp(w + half * sub, half, sub, entry(l + s, r, (int)half));
		} else {
			/* the code fits, its magnitude bits do not: read them after */
			fill(w, span, entry(l | PARTIAL, r, s), 0);
		}
		w += span;
	}
	fill(w, (uint32_t)(t->full + (1u << GM_HUFF_FAST) - w), 0, 0); /* longer codes, none */
	if (ac)
		build_skip(t);
	memcpy(t->key_bits, ht->bits, sizeof(t->key_bits));
	memcpy(t->key_vals, ht->huffval, sizeof(t->key_vals));
	t->ac = ac;
	return true;
}

/* The table for ht: from the cache, or built into its oldest slot. */
static const struct gm_huff_tab *table(struct gm_huff *h, const JHUFF_TBL *ht, bool ac)
{
	struct gm_huff_tab *t, *old = &h->cache[0];
	h->clock++;
	for (int i = 0; i < GM_HUFF_CACHE; i++) {
		t = &h->cache[i];
		if (t->used && t->ac == ac && !memcmp(t->key_bits, ht->bits, sizeof(t->key_bits)) &&
		    !memcmp(t->key_vals, ht->huffval, sizeof(t->key_vals))) {
			t->age = h->clock;
			return t;
		}
		if (!t->used || (old->used && t->age < old->age))
			old = t;
	}
	old->used = false;
	if (!build(old, ht, ac))
		return NULL;
	old->used = true;
	old->age = h->clock;
	return old;
}

/* ---- the bit reader ------------------------------------------------------------- */

/* Warn as libjpeg's decoder does (the handler may longjmp out of the decode). */
static void warn(j_decompress_ptr cinfo, int code)
{
	cinfo->err->msg_code = code;
	(*cinfo->err->emit_message)((j_common_ptr)cinfo, -1);
}

/*
 * Byte by byte, with libjpeg's reading of 0xFF: fill bytes (FF FF ...) are skipped,
 * FF 00 is a data byte 0xFF, FF then anything else is a marker, where the data
 * ends (the marker is left unread for libjpeg's marker reader). After the data:
 * zeros, counted in pad. At the buffer's end libjpeg's memory source warns of a
 * premature end (JWRN_JPEG_EOF) and inserts an EOI: the same here.
 */
/* h->ffn for h->p */
static void next_ff(struct gm_huff *h)
{
	const uint8_t *f = h->at_marker ? NULL : memchr(h->p, 0xFF, (size_t)(h->end - h->p));
	h->ffn = h->at_marker ? h->p : f ? f : h->end;
}

/* 64-byte aligned, as decode_mcu (below): its refill near every 0xFF byte */
static __attribute__((noinline, aligned(64))) void refill_slow(struct gm_huff *h,
							       j_decompress_ptr cinfo)
{
	/* bits past nbits may hold the next bytes (refill_fast); clear them */
	h->acc = h->nbits ? h->acc & (~0ull << (64 - h->nbits)) : 0;
	while (h->nbits <= 56) {
		uint32_t c = 0;
		if (!h->at_marker) {
			const uint8_t *q = h->p;
			if (q >= h->end) {
				h->at_marker = true;
				warn(cinfo, JWRN_JPEG_EOF);
			} else if (*q != 0xFF) {
				c = *q;
				h->p = q + 1;
			} else {
				while (q < h->end && *q == 0xFF)
					q++;
				if (q < h->end && *q == 0) {
					c = 0xFF;
					h->p = q + 1;
				} else {
					h->at_marker = true;
				}
			}
		}
		if (h->at_marker)
			h->pad += 8;
		h->acc |= (uint64_t)c << (56 - h->nbits);
		h->nbits += 8;
	}
	next_ff(h);
}

static inline uint32_t peek(const struct gm_huff *h, int n)
{
	return (uint32_t)(h->acc >> (64 - n));
}

static inline void drop(struct gm_huff *h, int n)
{
	h->acc <<= n;
	h->nbits -= n;
}

/*
 * A symbol whose code is longer than the lookup: the canonical search. Sets *run (AC) and returns
 * the value. At least 32 bits are in acc (the caller refilled).
 */
/* 64-byte aligned, as decode_mcu (below): its path for codes over GM_HUFF_FAST bits */
static __attribute__((noinline, aligned(64))) int
slow_symbol(struct gm_huff *h, j_decompress_ptr cinfo, const struct gm_huff_tab *t, int *run)
{
	uint32_t look = peek(h, 16);
	int l, sym;
	/* no code of GM_HUFF_FAST bits or fewer starts here (its entry would not be 0) */
	for (l = GM_HUFF_FAST + 1; l <= 16; l++)
		if ((int32_t)(look >> (16 - l)) <= t->maxcode[l])
			break;
	if (l > 16) {
		/* libjpeg: the search reads a 17th bit before it gives up; if those bits
		 * run past the data it warns of that first; then it warns of the code and
		 * takes the symbol as 0 */
		drop(h, 17);
		if (h->pad && h->nbits < h->pad && !h->pub.insufficient_data) {
			h->pub.insufficient_data = TRUE;
			warn(cinfo, JWRN_HIT_MARKER);
		}
		warn(cinfo, JWRN_HUFF_BAD_CODE);
		*run = t->ac ? RUN_EOB : 0;
		return 0;
	}
	sym = t->vals[(int32_t)(look >> (16 - l)) + t->valoff[l]];
	drop(h, l);
	int s = t->ac ? sym & 15 : sym, r = t->ac ? sym >> 4 : 0;
	if (s == 0) {
		*run = t->ac && r != 15 ? RUN_EOB : r;
		return 0;
	}
	uint32_t v = peek(h, s);
	drop(h, s);
	*run = r;
	return extend(v, s);
}

/* libjpeg's restart: drop the rest of the segment's bits, let libjpeg's marker
 * reader read the RSTn (warnings, resync), reset the DC predictions. */
static void restart(struct gm_huff *h, j_decompress_ptr cinfo)
{
	int valid = h->nbits - h->pad;
	cinfo->marker->discarded_bytes += (unsigned)(valid > 0 ? valid / 8 : 0);
	cinfo->src->next_input_byte = h->p;
	cinfo->src->bytes_in_buffer = (size_t)(h->end - h->p);
	(*cinfo->marker->read_restart_marker)(cinfo);
	const uint8_t *q = cinfo->src->next_input_byte;
	if (q >= h->start && q <= h->end) {
		h->p = q;
		h->at_marker = false;
	} else {
		h->p = h->end; /* libjpeg's source moved to its fake EOI: no more data */
		h->at_marker = true;
	}
	h->acc = 0;
	h->nbits = 0;
	h->pad = 0;
	next_ff(h);
	memset(h->last_dc, 0, sizeof(h->last_dc));
	h->restarts_to_go = h->restart_interval;
	/* as libjpeg: decode again unless the marker reader stopped at another marker */
	if (cinfo->unread_marker == 0)
		h->pub.insufficient_data = FALSE;
}

/*
 * The bit reader's hot state lives in locals (registers) inside the decode
 * functions; the out-of-line parts (refill_slow, slow_symbol, warn, restart) see
 * it in h. SAVE/LOAD move it across those calls.
 *
 * Two ways to refill. REFILL: before each symbol, when fewer than 32 bits are left
 * (16 of code and 15 of magnitude at most): where libjpeg's reader would refill,
 * so that a buffer cut short is found, and warned of, in the same MCU. TOP_UP:
 * when the buffer ends with a marker (ends_marked, every whole file), where
 * nothing shows when the reader refilled (it stops at a marker before the
 * buffer's end; bits read past the data are counted by consumption, at the MCU's
 * end; at a restart the bytes left unread are counted as libjpeg counts them):
 * to at least 54 bits before every few symbols (PER_TOP_UP_*), which then read
 * without a check where their lookup entry holds the whole symbol. REFILL's
 * branch, taken every third symbol or so in no pattern, is mispredicted often:
 * TOP_UP took coefficient mode from 0.50-0.51 of the CPU path's time to 0.49
 * (coef_bench, the photo set; with 2 symbols a TOP_UP, 0.50-0.51).
 */
#define SAVE() (h->acc = acc, h->nbits = nbits, h->p = p)
#define LOAD() (acc = h->acc, nbits = h->nbits, p = h->p)
/* the 8 bytes at p in acc when none is 0xFF (7 of them counted; ffn, the next
 * 0xFF's place, found by memchr once per 0xFF byte rather than checked in every 8
 * bytes loaded: 1% off coefficient mode); true if so */
#define REFILL_FAST()                                                                              \
	(h->ffn - p >= 8 && (memcpy(&w_, p, 8), true) &&                                           \
	 (acc |= __builtin_bswap64(w_) >> nbits, p += (63 - nbits) >> 3, nbits |= 56, true))
#define REFILL()                                                                                   \
	do {                                                                                       \
		uint64_t w_;                                                                       \
		if (nbits < 32 && !REFILL_FAST()) {                                                \
			SAVE();                                                                    \
			refill_slow(h, cinfo);                                                     \
			LOAD();                                                                    \
		}                                                                                  \
	} while (0)
#define TOP_UP()                                                                                   \
	do {                                                                                       \
		uint64_t w_;                                                                       \
		if (nbits < 56 && !REFILL_FAST() && nbits < 54) {                                  \
			SAVE();                                                                    \
			refill_slow(h, cinfo);                                                     \
			LOAD();                                                                    \
		}                                                                                  \
	} while (0)
/* Symbols read after a TOP_UP. A lookup needs its width in acc: GM_HUFF_FAST bits
 * for a symbol, GM_HUFF_SKIP for a skip-table step, which then take that many at
 * most; any symbol not whole in its entry refills to 32 bits before it and after it
 * (ac_symbol). So: 4 AC symbols (after a 1st that refilled, 32 bits for the 2nd and
 * 3rd and the 4th's lookup), 4 skip-table steps (54 bits for 3 steps and the 4th
 * step's lookup, or the one-at-a-time symbol's after 3). */
#define PER_TOP_UP_AC	4
#define PER_TOP_UP_SKIP 4
_Static_assert(32 - (PER_TOP_UP_AC - 2) * GM_HUFF_FAST >= GM_HUFF_FAST, "AC symbols a TOP_UP");
_Static_assert(54 - (PER_TOP_UP_SKIP - 1) * GM_HUFF_SKIP >= GM_HUFF_SKIP &&
		   GM_HUFF_SKIP >= GM_HUFF_FAST,
	       "steps a TOP_UP");

/* A PARTIAL entry e: drop the code, read and extend its magnitude bits into v (at
 * least 32 bits are in acc: 16 of code at most, 15 of magnitude). */
#define PARTIAL_VALUE(v)                                                                           \
	do {                                                                                       \
		int l_ = (int)(e & 0x1F), s_ = (int)((e >> 16) & 0x1F);                            \
		acc <<= l_;                                                                        \
		(v) = extend((uint32_t)(acc >> (64 - s_)), s_);                                    \
		acc <<= s_;                                                                        \
		nbits -= l_ + s_;                                                                  \
	} while (0)

/*
 * One AC symbol of table t: its value (0 for EOB and ZRL), its run added to *k
 * (RUN_EOB for EOB: past the block's end). refill: REFILL first; else only where
 * the lookup entry does not hold the whole symbol (after a TOP_UP).
 */
static inline __attribute__((always_inline)) int
ac_symbol(struct gm_huff *h, j_decompress_ptr cinfo, const struct gm_huff_tab *t, int *k,
	  uint64_t *accp, int *nbitsp, const uint8_t **pp, bool refill)
{
	uint64_t acc = *accp;
	int nbits = *nbitsp, run, v;
	const uint8_t *p = *pp;
	if (refill)
		REFILL();
	uint32_t e = t->full[acc >> (64 - GM_HUFF_FAST)];
	if (__builtin_expect((int8_t)e > 0, 1)) {
		acc <<= e & 0xFF;
		nbits -= (int)(e & 0xFF);
		*k += (int)((e >> 8) & 0xFF);
		v = (int16_t)(e >> 16);
	} else {
		if (!refill) {
			REFILL();
			e = t->full[acc >> (64 - GM_HUFF_FAST)];
		}
		if (e) {
			PARTIAL_VALUE(v);
			*k += (int)((e >> 8) & 0xFF);
		} else {
			SAVE();
			v = slow_symbol(h, cinfo, t, &run);
			LOAD();
			*k += run;
		}
		if (!refill) /* TOP_UP's count of symbols holds after this one */
			REFILL();
	}
	*accp = acc, *nbitsp = nbits, *pp = p;
	return v;
}

/*
 * A block's AC symbols passed over, not stored (libjpeg skips the MCU): whole
 * symbols a skip-table step at a time, but one at a time (ac_symbol) where a step
 * would take in the block's end. Unless the buffer ends with a marker (marked:
 * TOP_UP), the step is also taken one symbol at a time where the one-at-a-time
 * reader would refill before a symbol of it (fewer than 32 bits), so that the bits
 * are read, and a premature end warned of, where they are one symbol at a time.
 */
static inline __attribute__((always_inline)) void skip_ac(struct gm_huff *h, j_decompress_ptr cinfo,
							  const struct gm_huff_tab *t,
							  uint64_t *accp, int *nbitsp,
							  const uint8_t **pp, bool marked)
{
	uint64_t acc = *accp;
	int nbits = *nbitsp;
	const uint8_t *p = *pp;
	for (int k = 1; k < 64;) {
		uint32_t e;
		int i = 0;
		if (marked) {
			TOP_UP();
			for (; i < PER_TOP_UP_SKIP && k < 64; i++) {
				e = t->skip[acc >> (64 - GM_HUFF_SKIP)];
				if (!__builtin_expect(e && k + SK_ADV1(e) < 64, 1))
					break;
				acc <<= SK_BITS(e);
				nbits -= SK_BITS(e);
				k += SK_ADV(e);
			}
		} else {
			REFILL();
			e = t->skip[acc >> (64 - GM_HUFF_SKIP)];
			if (__builtin_expect(e && k + SK_ADV1(e) < 64 && nbits - SK_BITS1(e) >= 32,
					     1)) {
				acc <<= SK_BITS(e);
				nbits -= SK_BITS(e);
				k += SK_ADV(e);
				continue;
			}
		}
		if (i == PER_TOP_UP_SKIP || k >= 64)
			continue;
		(void)ac_symbol(h, cinfo, t, &k, &acc, &nbits, &p, !marked);
		k++;
	}
	*accp = acc, *nbitsp = nbits, *pp = p;
}

/* Block b's DC: its difference decoded, added to its component's prediction; the
 * new DC. */
static inline __attribute__((always_inline)) int decode_dc(struct gm_huff *h,
							   j_decompress_ptr cinfo, int b,
							   uint64_t *accp, int *nbitsp,
							   const uint8_t **pp)
{
	const struct gm_huff_tab *t = h->dc[b];
	uint64_t acc = *accp;
	int nbits = *nbitsp, run, v;
	const uint8_t *p = *pp;
	REFILL();
	uint32_t e = t->full[acc >> (64 - GM_HUFF_FAST)];
	if ((int8_t)e > 0) {
		acc <<= e & 0xFF;
		nbits -= (int)(e & 0xFF);
		v = (int16_t)(e >> 16);
	} else if (e) {
		PARTIAL_VALUE(v);
	} else {
		SAVE();
		v = slow_symbol(h, cinfo, t, &run);
		LOAD();
	}
	*accp = acc, *nbitsp = nbits, *pp = p;
	/* unsigned: a corrupt file's repeated extreme differences wrap, not overflow */
	int *dc = &h->last_dc[h->comp[b]];
	*dc = (int)((unsigned)*dc + (unsigned)v);
	return *dc;
}

/*
 * A block's AC coefficients, each through put(k, v) (k its zigzag index; past 63
 * for EOB, whose value is 0, and for a corrupt run that overshoots: natural[k] is
 * 63 for those), PER_TOP_UP_AC symbols a TOP_UP where marked. The block ends at the
 * first symbol that takes k past 63.
 */
#define AC_BLOCK(marked, put)                                                                      \
	do {                                                                                       \
		for (int k = 1; k < 64; k++) {                                                     \
			int v_;                                                                    \
			if (!(marked)) {                                                           \
				v_ = ac_symbol(h, cinfo, t, &k, &acc, &nbits, &p, true);           \
				put(k, v_);                                                        \
				continue;                                                          \
			}                                                                          \
			TOP_UP();                                                                  \
			v_ = ac_symbol(h, cinfo, t, &k, &acc, &nbits, &p, false);                  \
			put(k, v_);                                                                \
			for (int i_ = 1; i_ < PER_TOP_UP_AC && ++k < 64; i_++) {                   \
				v_ = ac_symbol(h, cinfo, t, &k, &acc, &nbits, &p, false);          \
				put(k, v_);                                                        \
			}                                                                          \
		}                                                                                  \
	} while (0)

/* A block's AC coefficients into blk (zeroed by libjpeg's caller): EOB and ZRL go
 * through the same step as a coefficient, a store of 0 at a position not yet
 * written (or 63, the block's last). */
static inline __attribute__((always_inline)) void
dense_block(struct gm_huff *h, j_decompress_ptr cinfo, const struct gm_huff_tab *t, JCOEF *blk,
	    uint64_t *accp, int *nbitsp, const uint8_t **pp, bool marked)
{
	uint64_t acc = *accp;
	int nbits = *nbitsp;
	const uint8_t *p = *pp;
#define PUT_DENSE(k, v) (blk[natural[k]] = (JCOEF)(v))
	AC_BLOCK(marked, PUT_DENSE);
#undef PUT_DENSE
	*accp = acc, *nbitsp = nbits, *pp = p;
}

/*
 * A block's coefficients in the sparse form (huff.h: struct gm_huff_out), written
 * as decoded: the DC, then each AC symbol's value at its natural position, the
 * count advanced only past a non-zero one (EOB and ZRL write a 0 that the next
 * entry overwrites; a corrupt run past 63 lands on 63, as dense_block's store, and
 * ends the block, so no position repeats). val and pos have room for 64 entries.
 * The count.
 */
static inline __attribute__((always_inline)) unsigned
sparse_block(struct gm_huff *h, j_decompress_ptr cinfo, const struct gm_huff_tab *t, int dc,
	     int16_t *val, uint8_t *pos, uint64_t *accp, int *nbitsp, const uint8_t **pp,
	     bool marked)
{
	uint64_t acc = *accp;
	int nbits = *nbitsp;
	const uint8_t *p = *pp;
	unsigned n = 0;
	val[0] = (int16_t)dc;
	pos[0] = 0;
	n += dc != 0;
#define PUT_SPARSE(k, v) (val[n] = (int16_t)(v), pos[n] = natural[k], n += (v) != 0)
	AC_BLOCK(marked, PUT_SPARSE);
#undef PUT_SPARSE
	*accp = acc, *nbitsp = nbits, *pp = p;
	return n;
}

/*
 * libjpeg's decode_mcu, its body (mcu_body's callers: one per instruction set).
 * An MCU libjpeg asks for with blocks but will not transform (its one-pass
 * coefficient controller decodes every MCU of a row and inverse-transforms only
 * those in the crop's columns, first_iMCU_col..last_iMCU_col) is passed over as a
 * skipped one: its blocks stay as libjpeg zeroed them, unused. libjpeg calls this
 * for every MCU of the scan in order (jpeg_skip_scanlines with no blocks), so a
 * count gives the column. The CPU path's crop decode: 2-5% faster on the photos.
 */
static inline __attribute__((always_inline)) boolean mcu_body(j_decompress_ptr cinfo,
							      JBLOCKROW *mcu)
{
	struct gm_huff *h = (struct gm_huff *)cinfo->entropy;
	unsigned col = h->mcu_col;

	if (++h->mcu_col == h->mcus_per_row)
		h->mcu_col = 0;
	if (mcu && (col < cinfo->master->first_iMCU_col || col > cinfo->master->last_iMCU_col))
		mcu = NULL;
	if (h->restart_interval) {
		if (h->restarts_to_go == 0)
			restart(h, cinfo);
		h->restarts_to_go--;
	}
	if (h->pub.insufficient_data)
		return TRUE;
	uint64_t acc = h->acc;
	int nbits = h->nbits;
	const uint8_t *p = h->p;
	for (int b = 0; b < h->blocks; b++) {
		int dc = decode_dc(h, cinfo, b, &acc, &nbits, &p);
		const struct gm_huff_tab *t = h->actab[b];
		if (!mcu) { /* libjpeg skips the MCU: the DC kept, the AC passed over */
			if (h->ends_marked)
				skip_ac(h, cinfo, t, &acc, &nbits, &p, true);
			else
				skip_ac(h, cinfo, t, &acc, &nbits, &p, false);
			continue;
		}
		JCOEF *blk = mcu[b][0];
		blk[0] = (JCOEF)dc;
		if (h->ends_marked)
			dense_block(h, cinfo, t, blk, &acc, &nbits, &p, true);
		else
			dense_block(h, cinfo, t, blk, &acc, &nbits, &p, false);
	}
	SAVE();
	if (h->pad && h->nbits < h->pad && !h->pub.insufficient_data) {
		/* this MCU used bits past the data: libjpeg warns, then decodes no more */
		warn(cinfo, JWRN_HIT_MARKER);
		h->pub.insufficient_data = TRUE;
	}
	return TRUE;
}

/* One MCU of gm_huff_decode_run: its blocks into o (store) or passed over. */
static inline __attribute__((always_inline)) void run_mcu(struct gm_huff *h, j_decompress_ptr cinfo,
							  bool store, struct gm_huff_out *o,
							  uint64_t *accp, int *nbitsp,
							  const uint8_t **pp)
{
	for (int b = 0; b < h->blocks; b++) {
		int dc = decode_dc(h, cinfo, b, accp, nbitsp, pp);
		const struct gm_huff_tab *t = h->actab[b];
		if (store) {
			int c = o->comp[b];
			int16_t *val = o->val[c] + o->nnz[c];
			uint8_t *pos = o->pos[c] + o->nnz[c];
			unsigned n =
			    h->ends_marked
				? sparse_block(h, cinfo, t, dc, val, pos, accp, nbitsp, pp, true)
				: sparse_block(h, cinfo, t, dc, val, pos, accp, nbitsp, pp, false);
			*o->cnt[c]++ = (uint8_t)n;
			o->nnz[c] += n;
		} else if (h->ends_marked) {
			skip_ac(h, cinfo, t, accp, nbitsp, pp, true);
		} else {
			skip_ac(h, cinfo, t, accp, nbitsp, pp, false);
		}
	}
}

/* gm_huff_decode_run's body (run_body's callers: one per instruction set) */
static inline __attribute__((always_inline)) void run_body(struct gm_huff *h,
							   j_decompress_ptr cinfo, uint32_t n,
							   uint32_t c0, uint32_t c1,
							   struct gm_huff_out *o)
{
	uint64_t acc = h->acc;
	int nbits = h->nbits;
	const uint8_t *p = h->p;

	for (uint32_t i = 0; i < n; i++) {
		bool store = i >= c0 && i < c1;
		if (h->restart_interval) {
			if (h->restarts_to_go == 0) {
				SAVE();
				restart(h, cinfo);
				LOAD();
			}
			h->restarts_to_go--;
		}
		if (h->pub.insufficient_data) { /* as decode_mcu: the blocks left zero */
			for (int b = 0; store && b < h->blocks; b++)
				*o->cnt[o->comp[b]]++ = 0;
			continue;
		}
		if (store)
			run_mcu(h, cinfo, true, o, &acc, &nbits, &p);
		else
			run_mcu(h, cinfo, false, o, &acc, &nbits, &p);
		if (h->pad && nbits < h->pad && !h->pub.insufficient_data) {
			SAVE();
			warn(cinfo, JWRN_HIT_MARKER);
			h->pub.insufficient_data = TRUE;
		}
	}
	SAVE();
}

/*
 * The decode compiled twice: for the baseline x86-64 and, where the CPU has BMI2
 * (gm_huff_install picks), with its shifts by a register (shlx, shrx: one
 * operation, not three, on every symbol's chain): 3-5% off coefficient mode's
 * time. Each 64-byte aligned: decode_mcu's offset in a cache line moved the
 * decode 2% (48 bytes past one vs 32).
 */
static __attribute__((aligned(64))) boolean decode_mcu(j_decompress_ptr cinfo, JBLOCKROW *mcu)
{
	return mcu_body(cinfo, mcu);
}

static __attribute__((aligned(64))) void decode_run(struct gm_huff *h, j_decompress_ptr cinfo,
						    uint32_t n, uint32_t c0, uint32_t c1,
						    struct gm_huff_out *o)
{
	run_body(h, cinfo, n, c0, c1, o);
}

#if GM_HUFF_BMI2
static __attribute__((target("bmi2"), aligned(64))) boolean decode_mcu_bmi2(j_decompress_ptr cinfo,
									    JBLOCKROW *mcu)
{
	return mcu_body(cinfo, mcu);
}

static __attribute__((target("bmi2"), aligned(64))) void
decode_run_bmi2(struct gm_huff *h, j_decompress_ptr cinfo, uint32_t n, uint32_t c0, uint32_t c1,
		struct gm_huff_out *o)
{
	run_body(h, cinfo, n, c0, c1, o);
}
#endif

void gm_huff_decode_run(struct gm_huff *h, j_decompress_ptr cinfo, uint32_t n, uint32_t c0,
			uint32_t c1, struct gm_huff_out *o)
{
#if GM_HUFF_BMI2
	if (h->bmi2) {
		decode_run_bmi2(h, cinfo, n, c0, c1, o);
		return;
	}
#endif
	decode_run(h, cinfo, n, c0, c1, o);
}

/* Whether this CPU runs the BMI2 decode, and GM_NO_SIMD / GM_SIMD_MAX (as aug.c
 * reads them: sse stops below the AVX2 generation, which brought BMI2) let it. */
static bool bmi2_ok(void)
{
#if GM_HUFF_BMI2
	const char *no = getenv("GM_NO_SIMD"), *cap = getenv("GM_SIMD_MAX");
	if ((no && no[0] == '1') || (cap && !strcmp(cap, "sse")))
		return false;
	__builtin_cpu_init();
	return __builtin_cpu_supports("bmi2");
#else
	return false;
#endif
}

static void start_pass(j_decompress_ptr cinfo)
{
	(void)cinfo; /* installed after libjpeg's start_pass; never called for a new scan */
}

void gm_huff_init(struct gm_huff *h)
{
	memset(h, 0, sizeof(*h));
	h->bmi2 = bmi2_ok();
}

bool gm_huff_install(struct gm_huff *h, j_decompress_ptr ci)
{
	/* the libjpeg loaded at run time, not only its headers, is the one the probe
	 * checked (a process may have loaded another libjpeg.so.62 before this
	 * library): its message list ends where theirs does; and it has installed
	 * the modules replaced or called here */
	if (!ci->err || ci->err->last_jpeg_message != (int)JMSG_LASTMSGCODE - 1 || !ci->entropy ||
	    !ci->entropy->decode_mcu || !ci->marker || !ci->marker->read_restart_marker ||
	    !ci->inputctl || !ci->master)
		return false;
	if (ci->progressive_mode || ci->arith_code || ci->data_precision != 8 ||
	    ci->inputctl->has_multiple_scans || ci->comps_in_scan != ci->num_components ||
	    ci->Ss != 0 || ci->Se != 63 || ci->Ah != 0 || ci->Al != 0 || ci->unread_marker != 0 ||
	    ci->blocks_in_MCU < 1 || ci->blocks_in_MCU > D_MAX_BLOCKS_IN_MCU || !ci->src ||
	    !ci->src->next_input_byte)
		return false;
	for (int b = 0; b < ci->blocks_in_MCU; b++) {
		int c = ci->MCU_membership[b];
		if (c < 0 || c >= ci->comps_in_scan)
			return false;
		const jpeg_component_info *cp = ci->cur_comp_info[c];
		const JHUFF_TBL *dt = ci->dc_huff_tbl_ptrs[cp->dc_tbl_no];
		const JHUFF_TBL *at = ci->ac_huff_tbl_ptrs[cp->ac_tbl_no];
		if (!dt || !at || !(h->dc[b] = table(h, dt, false)) ||
		    !(h->actab[b] = table(h, at, true)))
			return false;
		h->comp[b] = c;
	}
	h->blocks = ci->blocks_in_MCU;
	h->start = ci->src->next_input_byte;
	h->p = h->start;
	h->end = h->start + ci->src->bytes_in_buffer;
	h->acc = 0;
	h->nbits = 0;
	h->pad = 0;
	h->at_marker = false;
	next_ff(h);
	h->ends_marked = h->end - h->start >= 2 && h->end[-2] == 0xFF && h->end[-1] == 0xD9;
	memset(h->last_dc, 0, sizeof(h->last_dc));
	h->restart_interval = ci->restart_interval;
	h->mcu_col = 0;
	h->mcus_per_row = ci->MCUs_per_row;
	h->restarts_to_go = ci->restart_interval;
	h->pub.start_pass = start_pass;
	h->pub.decode_mcu = decode_mcu;
#if GM_HUFF_BMI2
	if (h->bmi2)
		h->pub.decode_mcu = decode_mcu_bmi2;
#endif
	h->pub.insufficient_data = FALSE;
	ci->entropy = &h->pub;
	return true;
}
#endif /* GM_OWN_HUFFMAN */
