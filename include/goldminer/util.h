/*
 * util.h - small helpers shared by core/, sim/ and cmd/ (internal; not part of the
 * public API, no stability promise).
 */
#ifndef GOLDMINER_UTIL_H
#define GOLDMINER_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

/*
 * printf into err[errlen] when err is non-NULL and errlen > 0; else nothing. A
 * message too long for err loses its middle, not its end: the first fifth, "...",
 * then the end, so that "WHO: /a/very/long/path/file: CAUSE" keeps the function,
 * the file name and the cause. gm_verrf: the same with a va_list.
 */
void gm_errf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void gm_verrf(char *err, size_t errlen, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

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

/* s as a JSON string literal on f: quotes, backslash and control characters
 * escaped (\\u00XX); bytes >= 0x80 pass through (UTF-8 stays UTF-8). */
void gm_json_str(FILE *f, const char *s);

#endif
