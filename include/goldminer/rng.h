/*
 * rng.h - counter-based random numbers for deterministic augmentation.
 *
 * Every random decision about a sample (crop window, flip) is a pure function of
 * (seed, epoch, sample id, draw number), so a batch's bytes never depend on which
 * worker made it or how often it was re-made (DESIGN.md contract 1). The generator
 * is a keyed SplitMix64-style mixer over a counter: no hidden state but the counter.
 */
#ifndef GOLDMINER_RNG_H
#define GOLDMINER_RNG_H

#include <stdint.h>

/* A tiny value type (deliberately not opaque: it lives on the stack of hot loops). */
struct gm_rng {
	uint64_t key;
	uint64_t ctr;
};

/* Stream ids that keep independent uses of one seed apart. */
#define GM_RNG_STREAM_SAMPLE  0x53414d50ull /* per-sample augmentation */
#define GM_RNG_STREAM_PERM    0x5045524dull /* per-epoch permutation */
#define GM_RNG_STREAM_SHUFFLE 0x53485546ull /* consumer shuffle_buffer draws */
#define GM_RNG_STREAM_JITTER  0x4a495454ull /* per-sample colour jitter (jitter.h) */

/* Key the generator by (seed, stream, a, b); the counter starts at 0. */
void gm_rng_init(struct gm_rng *r, uint64_t seed, uint64_t stream, uint64_t a, uint64_t b);

/* Next 64 random bits (draw number r->ctr, then the counter advances). */
uint64_t gm_rng_next(struct gm_rng *r);

/* Uniform double in [0, 1) with 53 random bits. */
double gm_rng_uniform(struct gm_rng *r);

/* Uniform integer in [0, n), n > 0, without modulo bias. */
uint64_t gm_rng_below(struct gm_rng *r, uint64_t n);

/*
 * Fill perm[0..n) with a permutation of 0..n-1 that depends only on (seed, epoch).
 * Fisher-Yates driven by the GM_RNG_STREAM_PERM stream.
 */
void gm_rng_permutation(uint32_t *perm, uint32_t n, uint64_t seed, uint64_t epoch);

#endif
