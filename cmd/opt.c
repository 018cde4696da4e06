/*
 * opt.c - the option parser every command shares (see cmd.h).
 *
 * A command declares its options as a table; this file turns the table into
 * getopt_long's struct option array (glibc's parser: prefixes, --name=value,
 * options mixed with positional arguments) and into the help text, so that the
 * two never disagree. It does not interpret values beyond the two number
 * conversions every command needs.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"

#define MAX_OPTS 64

int cmd_parse(const char *cmd, const struct cmd_opt *opts, int n, int argc, char **argv,
	      struct cmd_args *a)
{
	struct option lo[MAX_OPTS + 1];
	/* leading ':': a missing value is reported as ':', not '?' */
	char shorts[3 * MAX_OPTS + 2] = ":", *sp = shorts + 1;
	int c, idx;

	if (n > MAX_OPTS) {
		fprintf(stderr, "goldminer %s: option table too large\n", cmd);
		return 2;
	}
	for (int i = 0; i < n; i++) {
		lo[i] = (struct option){opts[i].name, opts[i].arg ? required_argument : no_argument,
					NULL, 256 + i};
		if (opts[i].alias) {
			*sp++ = opts[i].alias;
			if (opts[i].arg)
				*sp++ = ':';
		}
		a->val[i] = NULL;
	}
	*sp = 0;
	lo[n] = (struct option){0};
	a->npos = 0;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, shorts, lo, &idx)) != -1) {
		int k = -1;
		if (c >= 256 && c < 256 + n) {
			k = c - 256;
		} else if (c == '?' || c == ':') {
			const char *what = argv[optind - 1];
			if (c == ':')
				fprintf(stderr, "goldminer %s: %s needs a value\n", cmd, what);
			else
				fprintf(stderr, "goldminer %s: unknown or ambiguous option '%s'\n", cmd,
					what);
			fprintf(stderr, "(goldminer %s --help lists the options)\n", cmd);
			return 2;
		} else {
			for (int i = 0; i < n; i++)
				if (opts[i].alias == c)
					k = i;
		}
		if (k < 0)
			return 2;
		a->val[k] = opts[k].arg ? optarg : "";
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
		snprintf(lhs, sizeof(lhs), "%s--%s%s%s", al, opts[i].name, opts[i].arg ? " " : "",
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
	v = s ? strtoull(s, &end, 0) : 0;
	if (!s || errno || end == s || *end || v < lo || v > hi || *s == '-' || *s == '+') {
		fprintf(stderr,
			"goldminer %s: %s must be an integer in %" PRIu64 "..%" PRIu64 ", not '%s'\n",
			cmd, what, lo, hi, s ? s : "");
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
		fprintf(stderr, "goldminer %s: %s: bad value '%s' (a number >= %g)\n", cmd, what,
			s ? s : "", lo);
		return -EINVAL;
	}
	*out = x;
	return 0;
}
