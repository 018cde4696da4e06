/*
 * util.h - small helpers shared by core/, sim/ and cmd/ (internal; not part of the
 * public API, no stability promise).
 */
#ifndef GOLDMINER_UTIL_H
#define GOLDMINER_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

/* CLOCK_MONOTONIC in ns, ms and s: the one clock of deadlines, rates, timeouts
 * and durations in core/, cmd/ and sim/ (wall time only where a date is
 * printed; an absolute timespec only for pthread_cond_timedwait). */
static inline uint64_t gm_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline int64_t gm_now_ms(void)
{
	return (int64_t)(gm_now_ns() / 1000000u);
}

static inline double gm_now_s(void)
{
	return (double)gm_now_ns() * 1e-9;
}

/* The CPU this process has spent (all its threads, not its children), in ns:
 * the one CPU clock of measured costs (a worker's pace, a remote worker's
 * making, the node agent's receive path). */
static inline uint64_t gm_cpu_ns(void)
{
	struct timespec ts;
	if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts))
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * How the library reports (the commands' side is in cmd/err.c):
 *  - every message goes into a caller's buffer, never to stderr: a `char *err,
 *    size_t errlen` out-parameter of a constructor or a one-shot call, or a
 *    long-lived handle's own message (gm_loader_errmsg, gm_aug_errmsg), always
 *    written through gm_errf/gm_verrf, so a message too long for its buffer keeps
 *    its start and its cause. A message an application gets begins with the
 *    entry point it called ("gm_loader_open: ", "gm_node_run: ", "gm_pack: ");
 *    the parts the entry points are built of (pool, wire, ring admission, the
 *    worker's per-sample messages) write only the cause, and their caller puts
 *    its own name before it. The simulator's file readers begin with
 *    "PATH:LINE: " or "SPEC: " instead (the file and the line are what a user
 *    fixes). A message names the fix when it is known.
 *  - the one exception is the event log of long-running work (the node agent's
 *    attach/detach/refusals, a pool killing a stalled worker, the loader naming
 *    once a shard member whose row index does not match it): gm_log, one line
 *    "goldminer MODULE: EVENT" on stderr. Nothing else in the library writes to
 *    stderr, and nothing calls exit() or abort() (a forked worker ends with
 *    _exit(), pool.c).
 */

/*
 * printf into err[errlen] when err is non-NULL and errlen > 0; else nothing. A
 * message too long for err loses its middle, not its end: the first fifth, "...",
 * then the end, so that "WHO: /a/very/long/path/file: CAUSE" keeps the function,
 * the file name and the cause. gm_verrf: the same with a va_list.
 */
void gm_errf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void gm_verrf(char *err, size_t errlen, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

/* One line of a long-running module's event log on stderr: "goldminer WHO: " then
 * fmt... and a newline, written with one call so that lines of several threads or
 * processes do not interleave. gm_vlog: the same with a va_list. */
void gm_log(const char *who, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void gm_vlog(const char *who, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

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

/* "123", "64K", "512M", "2G", "1T" (powers of 1024; "64MiB", "2GB" too) ->
 * bytes: the parser of every size an operator gives (node --mem, GM_MEM_LIMIT). 0,
 * or -EINVAL for anything else (empty, negative, trailing junk, overflow). */
int gm_parse_bytes(const char *s, uint64_t *out);

/*
 * A byte count for a message, in the largest binary unit it reaches: "512
 * bytes", "1.5 KiB", "64.1 MiB", "11.8 GiB" (one decimal; up to EiB), into
 * buf[len], NUL-terminated; returns buf. 32 bytes always hold it. The one byte
 * formatter of the library's and the commands' messages.
 */
const char *gm_fmt_bytes(char *buf, size_t len, uint64_t v);

/*
 * The one JSON string writer of the binaries (--status, plan --json, the
 * pipeline's description): s as a JSON string literal. '"' and '\\' escaped,
 * control characters as \\n \\t \\r or \\u00XX, valid UTF-8 as it is, and each
 * byte of invalid UTF-8 as \\udcXX (a lone surrogate, as Python's
 * surrogateescape writes it: json.loads then os.fsencode gives the exact bytes
 * of a path back; strict parsers read U+FFFD there). So any C string (a path,
 * a peer's error) yields valid JSON.
 * gm_json_quote: into buf[len], NUL-terminated; a literal too long for buf is cut
 * at a whole character or escape and still closed; returns its length (0, and
 * buf "" when len < 3). A buffer of 6 * strlen(s) + 3 bytes always holds it.
 * gm_json_str: the same on f, never cut.
 */
size_t gm_json_quote(char *buf, size_t len, const char *s);
void gm_json_str(FILE *f, const char *s);

#endif
