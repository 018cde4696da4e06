/*
 * ratelog.h - how many log lines a remote party may cause (ratelog.c): a
 * per-address rate limiter for the node agent's log, with a summary of what
 * it held back.
 *
 * The idea: a line a peer (or anyone at an address) can cause, such as a
 * refusal, a failed handshake or a bad message, is said at most `lines`
 * times per address in a window of `window_ms`, and at most `total` times
 * in all addresses together; the rest are counted, and when the address's
 * window ends its count comes back once, for one "N more like this from
 * ADDR" line. A flood from one address then costs the log a few lines and a
 * count per window, a flood from many addresses at most `total` lines and a
 * count per address the table holds (`slots`; the addresses beyond share
 * one entry, named GM_RATELOG_OTHERS).
 *
 * Pure: no clock (the caller passes the time), no I/O, no globals; the
 * caller says the lines and the summaries. Not here: what a line says, or
 * which lines are a remote party's (conn.c's gm_remote_logf_from).
 * Threads: one handle, one thread.
 */
#ifndef GM_REMOTE_RATELOG_H
#define GM_REMOTE_RATELOG_H

#include <stdbool.h>
#include <stdint.h>

#define GM_RATELOG_ADDR	  64		    /* bytes of an address kept, with its NUL */
#define GM_RATELOG_OTHERS "other addresses" /* the entry of those beyond the table */

struct gm_ratelog;

struct gm_ratelog_cfg {
	uint32_t lines;	    /* lines said per address per window (>= 1) */
	uint32_t total;	    /* lines said in all per window (>= lines) */
	uint32_t window_ms; /* the window (>= 1) */
	uint32_t slots;	    /* addresses counted apart (1..4096) */
};

/* A limiter of cfg's figures into *out. 0, -EINVAL (a figure out of its
 * range) or -ENOMEM. The caller destroys it; destroy(NULL) does nothing. */
int gm_ratelog_create(struct gm_ratelog **out, const struct gm_ratelog_cfg *cfg);
void gm_ratelog_destroy(struct gm_ratelog *rl);

/* A line about addr (NULL or "": counted under GM_RATELOG_OTHERS; longer
 * than GM_RATELOG_ADDR - 1 bytes: its first ones) at time now (ms, not
 * going back): true, say it; false, it is counted for addr's summary. An
 * address's window opens at its first line, and one whose window ended is
 * summarised by gm_ratelog_flush: call that first, so that a summary comes
 * before the next window's lines. */
bool gm_ratelog_line(struct gm_ratelog *rl, const char *addr, int64_t now);

/* Each address whose window ended by now: say(arg, addr, n) when n of its
 * lines were held back (n >= 1), then it is forgotten (its next line opens a
 * new window). now INT64_MAX: every address, ended or not (the owner stops).
 * The number of summaries said. */
typedef void gm_ratelog_say_fn(void *arg, const char *addr, uint64_t n);
unsigned gm_ratelog_flush(struct gm_ratelog *rl, int64_t now, gm_ratelog_say_fn *say, void *arg);

/* Lines held back since the limiter was made (all addresses). */
uint64_t gm_ratelog_held(const struct gm_ratelog *rl);

#endif
