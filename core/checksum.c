/*
 * checksum.c - the word-wise FNV-1a-style checksum of batch bytes (checksum.h).
 */
#include "goldminer/checksum.h"

#include <string.h>

#define PRIME 0x100000001b3ull /* the 64-bit FNV prime */

uint64_t gm_checksum64(uint64_t h, const void *p, size_t n)
{
	const unsigned char *s = p;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t w;
		memcpy(&w, s + i, 8); /* little-endian hosts only (x86-64, arm64) */
		h ^= w;
		h *= PRIME;
	}
	for (; i < n; i++) {
		h ^= s[i];
		h *= PRIME;
	}
	return h;
}
