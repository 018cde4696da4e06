/*
 * rng.c - counter-based generator (see rng.h).
 *
 * Output i of key k is mix(k + (i+1) * golden), with mix the SplitMix64 finaliser;
 * the key itself is a mix of (seed, stream, a, b). Statistically good enough for
 * augmentation parameters and shuffles; not for cryptography.
 */
#include "goldminer/rng.h"

static uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

#define GOLDEN 0x9e3779b97f4a7c15ull

void gm_rng_init(struct gm_rng *r, uint64_t seed, uint64_t stream, uint64_t a, uint64_t b)
{
	uint64_t k = mix64(seed + GOLDEN);
	k = mix64(k ^ (stream + GOLDEN * 2));
	k = mix64(k ^ (a + GOLDEN * 3));
	k = mix64(k ^ (b + GOLDEN * 5));
	r->key = k;
	r->ctr = 0;
}

uint64_t gm_rng_next(struct gm_rng *r)
{
	r->ctr++;
	return mix64(r->key + r->ctr * GOLDEN);
}

double gm_rng_uniform(struct gm_rng *r)
{
	return (double)(gm_rng_next(r) >> 11) * 0x1.0p-53;
}

uint64_t gm_rng_below(struct gm_rng *r, uint64_t n)
{
	/* Rejection sampling: draw until the value falls below the largest multiple of n. */
	uint64_t limit = UINT64_MAX - UINT64_MAX % n;
	uint64_t v;
	do
		v = gm_rng_next(r);
	while (v >= limit);
	return v % n;
}

void gm_rng_permutation(uint32_t *perm, uint32_t n, uint64_t seed, uint64_t epoch)
{
	struct gm_rng r;
	gm_rng_init(&r, seed, GM_RNG_STREAM_PERM, epoch, n);
	for (uint32_t i = 0; i < n; i++)
		perm[i] = i;
	for (uint32_t i = n; i > 1; i--) {
		uint32_t j = (uint32_t)gm_rng_below(&r, i);
		uint32_t t = perm[i - 1];
		perm[i - 1] = perm[j];
		perm[j] = t;
	}
}
