/*
 * cmd.h - the subcommands of the `goldminer` binary and the option parser they
 * share (all but run: cmd/run.c). Nothing here is part of libgoldminer: the
 * commands are clients of the library's public headers, like any user program.
 *
 * Every command returns the process exit status (0 ok, 1 runtime error, 2 usage
 * error) and prints its own errors through cmd_err: "goldminer COMMAND: ...".
 */
#ifndef GOLDMINER_CMD_H
#define GOLDMINER_CMD_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

int gm_cmd_bench(int argc, char **argv);   /* cmd/bench.c */
int gm_cmd_node(int argc, char **argv);	   /* cmd/node.c */
int gm_cmd_pack(int argc, char **argv);	   /* cmd/pack.c */
int gm_cmd_plan(int argc, char **argv);	   /* cmd/plan.c */
int gm_cmd_profile(int argc, char **argv); /* cmd/profile.c */
int gm_cmd_run(int argc, char **argv);	   /* cmd/run.c */
int gm_cmd_sim(int argc, char **argv);	   /* cmd/sim.c */
int gm_cmd_synth(int argc, char **argv);   /* cmd/synth.c */

/*
 * One option of a command: "--name ARG" (arg names the value in the help; NULL
 * for a flag), a one-letter alias or 0, and the help line. A command declares a
 * table of them; the help text and the parsing both come from that table.
 */
struct cmd_opt {
	const char *name;
	const char *arg;
	char alias;
	const char *help;
};

struct cmd_args {
	const char **val; /* val[i]: the last value given for option i, "" for a flag
			   * given, NULL when absent (caller's array, n entries) */
	char **pos;	  /* positional arguments, in order (points into argv) */
	int npos;
};

/*
 * Parse argv[1..argc) against opts[0..n): "--name V", "--name=V", unique prefixes
 * of a name, and "-a V" for an alias (getopt_long rules: options and positional
 * arguments may be mixed, and argv is permuted so that the positional ones come
 * last, in their order; "--" ends options). a->val must have n entries and a->pos
 * room for argc pointers. Returns 0, or 2 after printing on stderr
 * "goldminer CMD: " and what was wrong (unknown option, ambiguous prefix and its
 * candidates, a value missing, a value given to a flag), then a hint to --help.
 * No state is kept between calls: commands may be run in-process one after another.
 */
int cmd_parse(const char *cmd, const struct cmd_opt *opts, int n, int argc, char **argv,
	      struct cmd_args *a);
/* cmd_parse, and each(arg, i, value) called for every option given, in order,
 * with its value as in a->val: how an option that may be repeated collects its
 * values. A non-zero return stops the parse with that status (each says why). */
int cmd_parse_each(const char *cmd, const struct cmd_opt *opts, int n, int argc, char **argv,
		   struct cmd_args *a, int (*each)(void *arg, int opt, const char *value),
		   void *arg);

/*
 * The one way a command reports an error (cmd/err.c says why there is one):
 * "goldminer CMD: WHAT: WHY (HINT)" and a newline on stderr. cmd NULL or "": plain
 * "goldminer: " (main, before a command is chosen). what: the thing at fault (an
 * option "--on-error", a path), NULL or "" to leave out. fmt...: the cause. hint:
 * the fix, in words, NULL when there is none to name; written in parentheses.
 */
void cmd_err(const char *cmd, const char *what, const char *hint, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* An informative line that is not an error ("metrics on port N", a summary):
 * "goldminer CMD: " then fmt... and a newline, on stderr. */
void cmd_note(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Print "usage: SYNOPSIS" then one aligned line per option of the table. */
void cmd_usage(FILE *f, const char *synopsis, const struct cmd_opt *opts, int n);

/*
 * Number conversions with the command's error message: an unsigned integer in
 * lo..hi (decimal or 0x hex, never octal; no sign), or a finite double >= lo.
 * 0, or -EINVAL after printing "goldminer CMD: --what must be ...".
 */
int cmd_u64(const char *cmd, const char *what, const char *s, uint64_t lo, uint64_t hi,
	    uint64_t *out);
int cmd_double(const char *cmd, const char *what, const char *s, double lo, double *out);

#endif
