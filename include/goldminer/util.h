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

/*
 * A failed write's cause in words, for a message that also names the file: for
 * -ENOSPC whether blocks or inodes ran out on the file system holding dir (asked
 * with statvfs, so call it before removing anything), for -EDQUOT the quota, else
 * strerror. Written into buf[len]; returns buf.
 */
const char *gm_write_cause(int err, const char *dir, char *buf, size_t len);

#endif
