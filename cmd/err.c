/*
 * err.c - how a command speaks on stderr (see cmd.h): one line per event, always
 * "goldminer CMD: " first, so a user (or a grep) can tell which command said it.
 *
 * How errors reach a user (the survey of every message behind this file):
 *  - the library never prints: a constructor fills a `char *err` out-parameter and
 *    a long-lived handle keeps a per-handle message (gm_loader_errmsg,
 *    gm_aug_errmsg, gm_jpeg_errmsg), both formatted by gm_errf (util.h), starting
 *    with the function or the thing that failed. The commands print that message
 *    as the WHY of their own line, unchanged.
 *  - the only library code that writes to stderr is the long-running agent's event
 *    log (node.c: attach, detach, refusals; pool.c: a stalled worker killed), and
 *    it does so through gm_log (util.h): "goldminer MODULE: EVENT".
 *  - the simulator never stops the process: a malformed trace, cluster or
 *    profile file comes back from its loader as -EBADMSG/-EINVAL with
 *    "PATH:LINE: why" in err (one gm_errf per reader, sim/trace.c's row loop for
 *    traces), a failed run through sim_fail (sim/sim.c: the first failure wins,
 *    gm_sim_run returns it), and `goldminer sim` prints either through cmd_err.
 *  - a command's own errors (bad options, missing arguments, failed writes) go
 *    through cmd_err below: "goldminer CMD: WHAT: WHY (HINT)". WHAT names the
 *    thing (an option, a path); WHY says what is wrong, strerror text included
 *    when the cause is an errno; HINT names the fix when it is known.
 *  - informative lines (the agent's "metrics on port N", profile's summary,
 *    "pinning skipped") go through cmd_note: the same prefix, no WHAT/HINT
 *    structure, because they report a state rather than a fault, and keeping them
 *    apart means every cmd_err line is something the user must act on.
 *  - the usage text (cmd_usage) and bench's progress line are not messages and
 *    keep their own form.
 */
#include <stdarg.h>
#include <stdio.h>

#include "cmd.h"

static void prefix(const char *cmd)
{
	if (cmd && *cmd)
		fprintf(stderr, "goldminer %s: ", cmd);
	else
		fputs("goldminer: ", stderr);
}

void cmd_err(const char *cmd, const char *what, const char *hint, const char *fmt, ...)
{
	va_list ap;

	prefix(cmd);
	if (what && *what)
		fprintf(stderr, "%s: ", what);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	if (hint && *hint)
		fprintf(stderr, " (%s)", hint);
	fputc('\n', stderr);
}

void cmd_note(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	prefix(cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}
