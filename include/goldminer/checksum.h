/*
 * checksum.h - the checksum of delivered batch bytes (`bench --checksum`, the
 * Python binding's checksum64, the tests' byte-equality checks).
 *
 * It is FNV-1a's step (xor, multiply by the 64-bit FNV prime, from the FNV offset
 * basis) applied to 8-byte little-endian words, then to the tail bytes one by
 * one: 8x fewer multiplies than byte-wise FNV-1a over megabytes of batch, and so
 * NOT equal to FNV-1a of the same bytes. (The dataset fingerprint, dataset.c, is
 * true byte-wise FNV-1a; the two are not interchangeable.) Not cryptographic.
 */
#ifndef GOLDMINER_CHECKSUM_H
#define GOLDMINER_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

/* Start value of a chain of gm_checksum64 calls (the FNV-1a offset basis). */
#define GM_CHECKSUM_INIT 0xcbf29ce484222325ull

/* h updated with [p, p+n); chain calls to hash a sequence of buffers. Pure. */
uint64_t gm_checksum64(uint64_t h, const void *p, size_t n);

#endif
