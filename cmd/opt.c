/*
 * opt.c - the option parser of every command but run, which reads only --help
 * and --node before handing the rest to python3 -m goldminer run (see cmd.h).
 *
 * A command declares its options as a table; this file turns the table into
 * getopt_long's struct option array (glibc's parser: unique prefixes,
 * --name=value, options mixed with positional arguments) and into the help text,
 * so that the two never disagree. When getopt_long refuses an argument, the
 * message is written here from the table, naming the command, the option and
 * what was wrong (unknown, ambiguous with its candidates, a value missing or not
 * allowed), instead of getopt's own.
 *
 * It does not interpret values beyond the two number conversions every command
 * needs, and keeps no state between calls (each call restarts getopt), so a test
 * may run several commands in one process.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"

#define MAX_OPTS 64

/* Options of the table whose name starts with the n bytes of s; *exact: the one
 * whose name is exactly those bytes, or -1. Returns the number of matches. */
static int prefix_matches(const struct cmd_opt *opts, int n, const char *s, size_t len, int *exact,
			  int *first)
{
	int k = 0;
	*exact = -1;
	*first = -1;
	for (int i = 0; i < n; i++) {
		if (strncmp(opts[i].name, s, len))
			continue;
		if (opts[i].name[len] == '\0')
			*exact = i;
		if (k++ == 0)
			*first = i;
	}
	return k;
}

/* The message for an argument getopt_long refused (c is '?' or ':'); arg is the
 * argument getopt_long last stepped over, the refused one for a long option. */
static void refused(const char *cmd, const struct cmd_opt *opts, int n, int c, const char *arg)
{
	char hint[96], what[80], cand[512] = "";

	snprintf(hint, sizeof(hint), "goldminer %s --help lists the options", cmd);
	if (optopt > 0 && optopt < 256) {
		/* a short option: "-x", or a letter inside a cluster "-qx" (glibc sets
		 * optopt to the letter; to 0 or the option's val for a long one) */
		snprintf(what, sizeof(what), "-%c", optopt);
		cmd_err(cmd, what, hint, c == ':' ? "needs a value" : "unknown option");
		return;
	}
	const char *name = arg + 2, *eq = strchr(name, '=');
	size_t len = eq ? (size_t)(eq - name) : strlen(name);
	int exact, first, k = prefix_matches(opts, n, name, len, &exact, &first);
	int i = exact >= 0 ? exact : first;
	if (c == ':' && i >= 0) {
		snprintf(what, sizeof(what), "--%s", opts[i].name);
		cmd_err(cmd, what, hint, "needs a value");
	} else if (k == 0) {
		cmd_err(cmd, arg, hint, "unknown option");
	} else if (exact < 0 && k > 1) {
		size_t at = 0;
		for (int j = 0; j < n && at < sizeof(cand); j++)
			if (!strncmp(opts[j].name, name, len))
				at += (size_t)snprintf(cand + at, sizeof(cand) - at, " --%s",
						       opts[j].name);
		snprintf(what, sizeof(what), "%.*s", (int)(len + 2), arg);
		cmd_err(cmd, what, hint, "ambiguous option (could be%s)", cand);
	} else if (eq && !opts[i].arg) {
		snprintf(what, sizeof(what), "--%s", opts[i].name);
		cmd_err(cmd, what, hint, "takes no value");
	} else {
		cmd_err(cmd, arg, hint, "bad option");
	}
}

int cmd_parse(const char *cmd, const struct cmd_opt *opts, int n, int argc, char **argv,
	      struct cmd_args *a)
{
	return cmd_parse_each(cmd, opts, n, argc, argv, a, NULL, NULL);
}

int cmd_parse_each(const char *cmd, const struct cmd_opt *opts, int n, int argc, char **argv,
		   struct cmd_args *a, int (*each)(void *arg, int opt, const char *value),
		   void *arg)
{
	struct option lo[MAX_OPTS + 1];
	/* leading ':': a missing value is reported as ':', not '?' */
	char shorts[3 * MAX_OPTS + 2] = ":", *sp = shorts + 1;
	int c, idx;

	if (n > MAX_OPTS) {
		cmd_err(cmd, NULL, NULL, "option table too large (%d options, at most %d)", n,
			MAX_OPTS);
		return 2;
	}
	for (int i = 0; i < n; i++) {
		/* an arg written "[=N]" is optional: --name or --name=N */
		bool opt = opts[i].arg && opts[i].arg[0] == '[';
		lo[i] = (struct option){opts[i].name,
					opt	      ? optional_argument
					: opts[i].arg ? required_argument
						      : no_argument,
					NULL, 256 + i};
		if (opts[i].alias) {
			*sp++ = opts[i].alias;
			if (opts[i].arg)
				*sp++ = ':';
			if (opt)
				*sp++ = ':';
		}
		a->val[i] = NULL;
	}
	*sp = 0;
	lo[n] = (struct option){0};
	a->npos = 0;
	/* 0, not 1: glibc then forgets the rest of an earlier parse (a half-read
	 * cluster of short options), which matters when tests run commands in-process */
	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, shorts, lo, &idx)) != -1) {
		int k = -1;
		if (c >= 256 && c < 256 + n) {
			k = c - 256;
		} else if (c == '?' || c == ':') {
			refused(cmd, opts, n, c, argv[optind - 1]);
			return 2;
		} else {
			for (int i = 0; i < n; i++)
				if (opts[i].alias == c)
					k = i;
		}
		if (k < 0)
			return 2;
		a->val[k] = opts[k].arg && optarg ? optarg : "";
		int rc = each ? each(arg, k, a->val[k]) : 0;
		if (rc)
			return rc;
	}
	while (optind < argc)
		a->pos[a->npos++] = argv[optind++];
	return 0;
}

void cmd_usage(FILE *f, const char *synopsis, const struct cmd_opt *opts, int n)
{
	fprintf(f, "usage: %s\n\n", synopsis);
	for (int i = 0; i < n; i++) {
		char lhs[64], al[8] = "";
		if (!opts[i].help)
			continue;
		if (opts[i].alias)
			snprintf(al, sizeof(al), "-%c, ", opts[i].alias);
		snprintf(lhs, sizeof(lhs), "%s--%s%s%s", al, opts[i].name,
			 opts[i].arg && opts[i].arg[0] != '[' ? " " : "",
			 opts[i].arg ? opts[i].arg : "");
		fprintf(f, "  %-24s %s\n", lhs, opts[i].help);
	}
}
int cmd_u64(const char *cmd, const char *what, const char *s, uint64_t lo, uint64_t hi,
	    uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	/* decimal, or hex after 0x; never octal: "010" is ten, as a user means it */
	v = s ? strtoull(s, &end, (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) ? 16 : 10) : 0;
	if (!s || errno || end == s || *end || v < lo || v > hi || *s == '-' || *s == '+') {
		cmd_err(cmd, what, NULL, "must be an integer in %" PRIu64 "..%" PRIu64 ", not '%s'",
			lo, hi, s ? s : "");
		return -EINVAL;
	}
	*out = v;
	return 0;
}

int cmd_double(const char *cmd, const char *what, const char *s, double lo, double *out)
{
	char *end;
	double x = s ? strtod(s, &end) : NAN;
	if (!s || !*s || *end || !isfinite(x) || x < lo) {
		char hint[48];
		snprintf(hint, sizeof(hint), "a number >= %g", lo);
		cmd_err(cmd, what, hint, "bad value '%s'", s ? s : "");
		return -EINVAL;
	}
	*out = x;
	return 0;
}
