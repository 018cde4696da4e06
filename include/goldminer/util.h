/*
 * util.h - small helpers shared by core/ and sim/ (internal; not part of the
 * public API, no stability promise).
 */
#ifndef GOLDMINER_UTIL_H
#define GOLDMINER_UTIL_H

#include <stddef.h>

/* printf into err[errlen] when err is non-NULL and errlen > 0; else nothing. */
void gm_errf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Make the scratch buffer *p hold at least n bytes (doubling from min_cap; never
 * shrinks; old contents are NOT kept). 0, or -ENOMEM with *p and *cap unchanged. */
int gm_grow_scratch(void **p, size_t *cap, size_t n, size_t min_cap);

#endif
