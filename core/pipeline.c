/*
 * pipeline.c - parse a textual pipeline spec, check it, and split it between the
 * workers and the consumer (see pipeline.h). `goldminer plan` (cmd/plan.c) is a
 * thin client of gm_pipeline_describe and gm_pipeline_list_ops.
 *
 * Design: every op is one row of `ops[]` - name, argument grammar (type, range,
 * default given as text and parsed by the same code as user input), kind, and why
 * it has that kind. Parsing is two passes over that table: pass 1 splits stages at
 * '|' and arguments at blanks, remembering each token's column, and checks names and
 * values; pass 2 walks the ops in order and checks that the order makes sense
 * (read first, decode before pixels, one geometry, layout/normalize agree, nothing
 * per-sample after batch). The planner is then one line: the workers get every op
 * before the first stateful one.
 *
 * Not here: executing ops, and any notion of cost (the split is decided by kinds
 * alone, never by timing, so it is the same on every machine).
 */
#include "goldminer/pipeline.h"
#include "goldminer/util.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "goldminer/jpeg.h" /* GM_JPEG_MAX_MAX_PIXELS: decode's range */

#define MAX_ARGS 4
#define TOK_MAX	 64   /* longest argument token we accept */
#define SPEC_MAX 4096 /* longest spec we accept */

enum op_id {
	OP_READ,
	OP_DECODE,
	OP_RRC,
	OP_RESIZE,
	OP_CENTER_CROP,
	OP_FLIP,
	OP_COLOR_JITTER,
	OP_NORMALIZE,
	OP_TO_CHW_F32,
	OP_TO_CHW_F16,
	OP_TO_HWC_U8,
	OP_BATCH,
	OP_SHUFFLE_BUFFER,
	OP_CACHE,
	OP_COUNT
};

enum arg_type {
	ARG_UINT,  /* whole number */
	ARG_FLOAT, /* number or fraction a/b */
	ARG_RANGE, /* MIN,MAX: two numbers/fractions, MIN <= MAX */
	ARG_NORM,  /* imagenet | M0,M1,M2/S0,S1,S2 */
};

struct arg_def {
	const char *name; /* lower case; NAME=VALUE form and messages */
	enum arg_type type;
	const char *def; /* default as text; NULL = required */
	double min, max; /* allowed values, inclusive (min exclusive when min_open) */
	bool min_open;
};

struct op_def {
	const char *name;
	enum gm_pipeline_kind kind;
	bool pixels; /* works on decoded pixels of one sample (needs decode, before batch) */
	int nargs;
	struct arg_def args[MAX_ARGS];
	const char *does; /* one line: what it does */
	const char *why;  /* one line: why it has its kind */
};

/* The one table of ops. Defaults are text so that they read like user input. */
// clang-format off
static const struct op_def ops[OP_COUNT] = {
	[OP_READ] = {"read", GM_PIPELINE_PER_SAMPLE, false, 0, {{0}},
		     "read one sample's encoded bytes by dataset index",
		     "depends only on the sample id"},
	[OP_DECODE] = {"decode", GM_PIPELINE_PER_SAMPLE, false, 1,
		       {{"max_pixels", ARG_UINT, "64000000", 1,
			(double)GM_JPEG_MAX_MAX_PIXELS, false}},
		       "JPEG -> RGB pixels; refuses images over max_pixels (w*h)",
		       "a pure function of the file bytes"},
	[OP_RRC] = {"random_resized_crop", GM_PIPELINE_PER_SAMPLE, true, 3,
		    {{"size", ARG_UINT, NULL, 1, 8192, false},
		     {"scale", ARG_RANGE, "0.08,1", 0, 1, true},
		     {"ratio", ARG_RANGE, "3/4,4/3", 0, 100, true}},
		    "random window (area fraction scale, aspect ratio) resized to SIZE x SIZE",
		    "its window is drawn from the sample's own RNG key (seed, epoch, id)"},
	[OP_RESIZE] = {"resize", GM_PIPELINE_PER_SAMPLE, true, 1,
		       {{"n", ARG_UINT, NULL, 1, 16384, false}},
		       "scale the shorter side to N (eval)", "a pure function of the pixels"},
	[OP_CENTER_CROP] = {"center_crop", GM_PIPELINE_PER_SAMPLE, true, 1,
			    {{"n", ARG_UINT, NULL, 1, 8192, false}},
			    "cut the central N x N window (eval; after resize; no flip)",
			    "a pure function of the pixels"},
	[OP_FLIP] = {"flip", GM_PIPELINE_PER_SAMPLE, true, 1,
		     {{"p", ARG_FLOAT, "0.5", 0, 1, false}},
		     "mirror left-right with probability P",
		     "its coin is drawn from the sample's own RNG key"},
	[OP_COLOR_JITTER] = {"color_jitter", GM_PIPELINE_PER_SAMPLE, true, 4,
			     {{"brightness", ARG_RANGE, "1,1", 0, 1000, false},
			      {"contrast", ARG_RANGE, "1,1", 0, 1000, false},
			      {"saturation", ARG_RANGE, "1,1", 0, 1000, false},
			      {"hue", ARG_RANGE, "0,0", -0.5, 0.5, false}},
			     "factors drawn uniform in LO,HI, the ops in random order, on [0,1] "
			     "pixels after the resize (torchvision's ColorJitter)",
			     "its factors and order are drawn from the sample's own RNG key"},
	[OP_NORMALIZE] = {"normalize", GM_PIPELINE_PER_SAMPLE, true, 1,
			  {{"stats", ARG_NORM, "imagenet", 0, 1, false}},
			  "(x/255 - mean) / std per channel; imagenet or M0,M1,M2/S0,S1,S2 in "
			  "[0,1] units",
			  "a per-pixel affine map"},
	[OP_TO_CHW_F32] = {"to_chw_f32", GM_PIPELINE_PER_SAMPLE, true, 0, {{0}},
			   "output float32, 3 x H x W (x/255 unless normalize)",
			   "a layout change of one sample"},
	[OP_TO_CHW_F16] = {"to_chw_f16", GM_PIPELINE_PER_SAMPLE, true, 0, {{0}},
			   "output float16, 3 x H x W (to_chw_f32's values rounded to nearest "
			   "even; half the bytes)",
			   "a layout change of one sample"},
	[OP_TO_HWC_U8] = {"to_hwc_u8", GM_PIPELINE_PER_SAMPLE, true, 0, {{0}},
			  "output uint8, H x W x 3 (the default layout)",
			  "a layout change of one sample"},
	[OP_BATCH] = {"batch", GM_PIPELINE_PER_BATCH, false, 1,
		      {{"n", ARG_UINT, NULL, 1, 65536, false}},
		      "group N consecutive samples of the epoch's permutation",
		      "batch k is a function of (seed, epoch, k) only"},
	[OP_SHUFFLE_BUFFER] = {"shuffle_buffer", GM_PIPELINE_STATEFUL, false, 1,
			       {{"n", ARG_UINT, NULL, 1, 1u << 24, false}}, /* the loader's pool limit */
			       "emit a random element of a buffer of the last N inputs",
			       "it reads earlier samples: its output depends on what passed "
			       "through the buffer before"},
	[OP_CACHE] = {"cache", GM_PIPELINE_STATEFUL, false, 0, {{0}},
		      "keep the inputs of the first epoch and replay them later",
		      "it keeps samples across epochs: later epochs read what earlier ones "
		      "stored"},
};
// clang-format on

struct arg_val {
	double v[6];	    /* FLOAT: v[0]; RANGE: v[0..1]; NORM: mean v[0..2], std v[3..5] */
	uint64_t u;	    /* UINT */
	bool given;	    /* by the user (else the default) */
	char text[TOK_MAX]; /* the value as written (lower case), for the canonical form */
};

struct op_inst {
	enum op_id id;
	size_t col; /* 1-based column of the op name */
	struct arg_val a[MAX_ARGS];
	char text[256]; /* canonical form */
};

struct gm_pipeline {
	size_t n, n_worker;
	struct op_inst op[OP_COUNT]; /* each op at most once, so OP_COUNT bounds n */
	struct gm_aug_spec aug;
	uint32_t batch;
	char cut_reason[320];
	char canonical[OP_COUNT * 260];
};

/* Parser state: the spec and where to put a message. */
struct parse {
	const char *spec;
	size_t len;
	char *err;
	size_t errlen;
};

static const float imagenet_mean[3] = {0.485f, 0.456f, 0.406f};
static const float imagenet_std[3] = {0.229f, 0.224f, 0.225f};

static bool is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* Format "pipeline:OPNO (col COL): ..." into the caller's buffer; returns -EINVAL. */
__attribute__((format(printf, 4, 5))) static int fail(struct parse *ps, size_t opno, size_t col,
						      const char *fmt, ...)
{
	if (ps->err && ps->errlen) {
		char why[1024];
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(why, sizeof(why), fmt, ap);
		va_end(ap);
		gm_errf(ps->err, ps->errlen, "pipeline:%zu (col %zu): %s", opno, col, why);
	}
	return -EINVAL;
}

/* Lower-case copy of a token into buf (bufsz bytes); false if it does not fit. */
static bool tok_copy(char *buf, size_t bufsz, const char *s, size_t n)
{
	if (n >= bufsz)
		return false;
	for (size_t i = 0; i < n; i++)
		buf[i] = (char)tolower((unsigned char)s[i]);
	buf[n] = '\0';
	return true;
}

static bool tok_eq(const char *s, size_t n, const char *name)
{
	return strlen(name) == n && !strncasecmp(s, name, n);
}

/* Edit distance between a token and a name (both short), for "did you mean". */
static size_t edit_distance(const char *a, size_t na, const char *b)
{
	size_t nb = strlen(b), row[64];
	if (na >= 63 || nb >= 63)
		return SIZE_MAX;
	for (size_t j = 0; j <= nb; j++)
		row[j] = j;
	for (size_t i = 1; i <= na; i++) {
		size_t diag = row[0];
		row[0] = i;
		for (size_t j = 1; j <= nb; j++) {
			size_t up = row[j];
			size_t sub = diag + (tolower((unsigned char)a[i - 1]) != b[j - 1]);
			size_t best = sub < up + 1 ? sub : up + 1;
			row[j] = best < row[j - 1] + 1 ? best : row[j - 1] + 1;
			diag = up;
		}
	}
	return row[nb];
}

/* The op a mistyped name most likely meant, or NULL. */
static const char *suggest(const char *s, size_t n)
{
	const char *best = NULL;
	size_t best_d = SIZE_MAX;
	for (int i = 0; i < OP_COUNT; i++) {
		size_t d = edit_distance(s, n, ops[i].name), pre = 0;
		while (pre < n && ops[i].name[pre] &&
		       tolower((unsigned char)s[pre]) == ops[i].name[pre])
			pre++;
		if (pre >= 4 && d > 3)
			d = 3; /* a shared prefix is a strong hint ("random_crop", "shuffle") */
		if (d < best_d) {
			best_d = d;
			best = ops[i].name;
		}
	}
	return best_d <= 3 ? best : NULL;
}

static void known_ops(char *buf, size_t len)
{
	size_t k = 0;
	buf[0] = '\0';
	for (int i = 0; i < OP_COUNT && k < len; i++) {
		int w = snprintf(buf + k, len - k, "%s%s", i ? ", " : "", ops[i].name);
		if (w < 0)
			break;
		k += (size_t)w;
	}
}

/* The grammar of an op: "random_resized_crop SIZE [scale=0.08,1] [ratio=3/4,4/3]". */
static void op_grammar(const struct op_def *d, char *buf, size_t len)
{
	size_t k = 0;
	int w = snprintf(buf, len, "%s", d->name);
	for (int i = 0; i < d->nargs && w >= 0 && (k += (size_t)w) < len; i++) {
		const struct arg_def *a = &d->args[i];
		if (!a->def) {
			char up[32];
			size_t j;
			for (j = 0; j < sizeof(up) - 1 && a->name[j]; j++)
				up[j] = (char)toupper((unsigned char)a->name[j]);
			up[j] = '\0';
			w = snprintf(buf + k, len - k, " %s", up);
		} else {
			w = snprintf(buf + k, len - k, " [%s=%s]", a->name, a->def);
		}
	}
}

static void range_text(const struct arg_def *a, char *buf, size_t len)
{
	if (a->type == ARG_UINT)
		snprintf(buf, len, "[%.0f, %.0f]", a->min, a->max);
	else
		snprintf(buf, len, "%c%g, %g]", a->min_open ? '(' : '[', a->min, a->max);
}

static bool in_range(const struct arg_def *a, double v)
{
	if (a->min_open ? !(v > a->min) : !(v >= a->min))
		return false;
	return v <= a->max;
}

/* A number: decimal or a fraction "a/b". Whole string, finite. */
static bool parse_num(const char *s, double *v)
{
	char *end;
	if (!*s || is_blank(*s))
		return false;
	errno = 0;
	double x = strtod(s, &end);
	if (end == s || errno)
		return false;
	if (*end == '/') {
		const char *d = end + 1;
		if (!*d || is_blank(*d))
			return false;
		double y = strtod(d, &end);
		if (end == d || errno || y == 0)
			return false;
		x /= y;
	}
	if (*end || !isfinite(x))
		return false;
	*v = x;
	return true;
}

/* Parse numbers separated by `sep` into v[0..n-1]; the whole string must be used. */
static bool parse_list(char *s, char sep, double *v, int n)
{
	for (int i = 0; i < n; i++) {
		char *e = i < n - 1 ? strchr(s, sep) : NULL;
		if (i < n - 1 && !e)
			return false;
		if (e)
			*e = '\0';
		bool ok = parse_num(s, &v[i]);
		if (e)
			*e = sep;
		if (!ok)
			return false;
		s = e ? e + 1 : s;
	}
	return true;
}

/*
 * Parse one argument value (token tok of length n at column col of op number opno)
 * into *out; 0 or -EINVAL with a message. The table's defaults go through here too.
 */
static int parse_value(struct parse *ps, size_t opno, size_t col, const struct op_def *d,
		       const struct arg_def *a, const char *tok, size_t n, struct arg_val *out)
{
	char buf[TOK_MAX], rng[64];
	if (!tok_copy(buf, sizeof(buf), tok, n))
		return fail(ps, opno, col, "%s %s '%.*s...' is too long", d->name, a->name, 20,
			    tok);
	range_text(a, rng, sizeof(rng));
	memcpy(out->text, buf, n + 1);
	switch (a->type) {
	case ARG_UINT: {
		char *end;
		if (!isdigit((unsigned char)buf[0]))
			return fail(ps, opno, col, "%s %s '%s' is not a whole number", d->name,
				    a->name, buf);
		errno = 0;
		unsigned long long u = strtoull(buf, &end, 10);
		if (*end)
			return fail(ps, opno, col, "%s %s '%s' is not a whole number", d->name,
				    a->name, buf);
		if (errno || (double)u < a->min || (double)u > a->max)
			return fail(ps, opno, col, "%s %s '%s' is out of range %s", d->name,
				    a->name, buf, rng);
		out->u = u;
		break;
	}
	case ARG_FLOAT:
		if (!parse_num(buf, &out->v[0]))
			return fail(ps, opno, col, "%s %s '%s' is not a number", d->name, a->name,
				    buf);
		if (!in_range(a, out->v[0]))
			return fail(ps, opno, col, "%s %s '%s' is out of range %s", d->name,
				    a->name, buf, rng);
		break;
	case ARG_RANGE:
		if (!parse_list(buf, ',', out->v, 2))
			return fail(ps, opno, col, "%s %s '%s' is not MIN,MAX (two numbers)",
				    d->name, a->name, buf);
		if (!in_range(a, out->v[0]) || !in_range(a, out->v[1]))
			return fail(ps, opno, col, "%s %s '%s' is out of range %s", d->name,
				    a->name, buf, rng);
		if (out->v[0] > out->v[1])
			return fail(ps, opno, col, "%s %s '%s': MIN %g > MAX %g", d->name, a->name,
				    buf, out->v[0], out->v[1]);
		break;
	case ARG_NORM: {
		if (!strcmp(buf, "imagenet")) {
			for (int c = 0; c < 3; c++) {
				out->v[c] = imagenet_mean[c];
				out->v[3 + c] = imagenet_std[c];
			}
			break;
		}
		char *slash = strchr(buf, '/');
		bool ok = slash != NULL;
		if (ok) {
			*slash = '\0';
			ok = parse_list(buf, ',', out->v, 3) &&
			     parse_list(slash + 1, ',', out->v + 3, 3);
			*slash = '/';
		}
		if (!ok)
			return fail(ps, opno, col,
				    "%s '%s' is neither 'imagenet' nor M0,M1,M2/S0,S1,S2", d->name,
				    buf);
		for (int c = 0; c < 3; c++)
			if (out->v[c] < 0 || out->v[c] > 1 || !(out->v[3 + c] > 0) ||
			    out->v[3 + c] > 1)
				return fail(ps, opno, col,
					    "%s '%s': mean must be in [0, 1] and std in (0, 1] "
					    "([0,1] units: divide 0..255 values by 255)",
					    d->name, buf);
		break;
	}
	}
	return 0;
}

/* Fill an op's arguments with their defaults (required ones stay zero). */
static void set_defaults(struct op_inst *o)
{
	const struct op_def *d = &ops[o->id];
	memset(o->a, 0, sizeof(o->a));
	for (int i = 0; i < d->nargs; i++)
		if (d->args[i].def) {
			struct parse quiet = {0};
			/* Trusted text: cannot fail (a unit test parses every default). */
			(void)parse_value(&quiet, 0, 0, d, &d->args[i], d->args[i].def,
					  strlen(d->args[i].def), &o->a[i]);
		}
}

/* In the canonical text an argument is written bare when that cannot confuse a
 * reader: required ones, and a lone self-describing one ("flip 0.5",
 * "normalize imagenet"); the others as NAME=VALUE ("decode max_pixels=64000000"). */
static bool positional(const struct op_def *d, int i)
{
	const struct arg_def *a = &d->args[i];
	return !a->def || (d->nargs == 1 && (a->type == ARG_FLOAT || a->type == ARG_NORM));
}

static void make_text(struct op_inst *o)
{
	const struct op_def *d = &ops[o->id];
	char buf[sizeof(o->text)]; /* built apart: o->text and o->a[] share *o */
	size_t k = 0, len = sizeof(buf);
	int w = snprintf(buf, len, "%s", d->name);
	for (int i = 0; i < d->nargs && w >= 0 && (k += (size_t)w) < len; i++)
		w = positional(d, i)
			? snprintf(buf + k, len - k, " %s", o->a[i].text)
			: snprintf(buf + k, len - k, " %s=%s", d->args[i].name, o->a[i].text);
	memcpy(o->text, buf, sizeof(buf));
}

/* Tokens of stage [s, e): maximal runs of non-blanks, as (start, length). An op
 * takes at most MAX_ARGS arguments, and each token past them is an error reported
 * by parse_args, so tokens beyond 2 + MAX_ARGS are never looked at. */
static size_t tokenize(const char *t, size_t s, size_t e, size_t tok[][2], size_t max)
{
	size_t ntok = 0;
	for (size_t i = s; i < e;) {
		while (i < e && is_blank(t[i]))
			i++;
		if (i >= e)
			break;
		size_t b = i;
		while (i < e && !is_blank(t[i]))
			i++;
		if (ntok < max) {
			tok[ntok][0] = b;
			tok[ntok][1] = i - b;
			ntok++;
		}
	}
	return ntok;
}

/* The op named by the nlen bytes at name (column col): its index in ops[], or
 * -EINVAL with "unknown op" and a suggestion. */
static int find_op(struct parse *ps, size_t opno, size_t col, const char *name, size_t nlen)
{
	int id = -1;
	for (int i = 0; i < OP_COUNT; i++)
		if (tok_eq(name, nlen, ops[i].name))
			id = i;
	if (id >= 0)
		return id;
	char known[512];
	const char *hint = suggest(name, nlen);
	known_ops(known, sizeof(known));
	if (hint)
		return fail(ps, opno, col, "unknown op '%.*s' (did you mean '%s'?); known: %s",
			    (int)(nlen > 40 ? 40 : nlen), name, hint, known);
	return fail(ps, opno, col, "unknown op '%.*s'; known: %s", (int)(nlen > 40 ? 40 : nlen),
		    name, known);
}

/* The argument tokens tok[1..ntok) of op o: positional or NAME=VALUE, each parsed
 * into its slot; then every required argument must have been given. */
static int parse_args(struct parse *ps, size_t opno, struct op_inst *o, size_t tok[][2],
		      size_t ntok)
{
	const struct op_def *d = &ops[o->id];
	char gram[160];
	op_grammar(d, gram, sizeof(gram));
	int pos = 0;
	for (size_t k = 1; k < ntok; k++) {
		const char *a = ps->spec + tok[k][0];
		size_t alen = tok[k][1], acol = tok[k][0] + 1;
		const char *eq = memchr(a, '=', alen);
		int slot;
		if (eq) {
			size_t keylen = (size_t)(eq - a);
			slot = -1;
			for (int j = 0; j < d->nargs; j++)
				if (tok_eq(a, keylen, d->args[j].name))
					slot = j;
			if (slot < 0)
				return fail(ps, opno, acol, "%s has no argument '%.*s'; usage: %s",
					    d->name, (int)(keylen > 40 ? 40 : keylen), a, gram);
			if (o->a[slot].given)
				return fail(ps, opno, acol, "%s %s given twice; usage: %s", d->name,
					    d->args[slot].name, gram);
			acol += keylen + 1;
			alen -= keylen + 1;
			a = eq + 1;
			if (!alen)
				return fail(ps, opno, acol - 1, "%s %s= has no value; usage: %s",
					    d->name, d->args[slot].name, gram);
		} else {
			while (pos < d->nargs && o->a[pos].given)
				pos++;
			if (pos >= d->nargs)
				return fail(ps, opno, acol,
					    "%s takes %d argument%s; extra '%.*s'; usage: %s",
					    d->name, d->nargs, d->nargs == 1 ? "" : "s",
					    (int)(alen > 40 ? 40 : alen), a, gram);
			slot = pos++;
		}
		int r = parse_value(ps, opno, acol, d, &d->args[slot], a, alen, &o->a[slot]);
		if (r)
			return r;
		o->a[slot].given = true;
	}
	for (int j = 0; j < d->nargs; j++)
		if (!d->args[j].def && !o->a[j].given)
			return fail(ps, opno, o->col, "'%s' is missing its %s argument; usage: %s",
				    d->name, d->args[j].name, gram);
	return 0;
}

/* Pass 1 for one stage [s, e): op name and arguments. */
static int parse_stage(struct parse *ps, struct gm_pipeline *p, size_t s, size_t e, const int *seen)
{
	size_t opno = p->n + 1;
	size_t tok[2 + MAX_ARGS][2];
	size_t ntok = tokenize(ps->spec, s, e, tok, sizeof(tok) / sizeof(tok[0]));
	if (!ntok)
		return fail(ps, opno, s + 1, "empty stage (nothing between '|' separators)");

	size_t col = tok[0][0] + 1;
	int id = find_op(ps, opno, col, ps->spec + tok[0][0], tok[0][1]);
	if (id < 0)
		return id;
	if (seen[id] >= 0)
		return fail(ps, opno, col, "'%s' given twice (first at op %d)", ops[id].name,
			    seen[id] + 1);

	struct op_inst *o = &p->op[p->n];
	o->id = (enum op_id)id;
	o->col = col;
	set_defaults(o);
	int r = parse_args(ps, opno, o, tok, ntok);
	if (r)
		return r;
	make_text(o);
	p->n++;
	return 0;
}

/*
 * Pass 2: does the order make sense? Each check_* below looks at op i given at[],
 * the index of each op in the spec (-1 if absent), and returns 0 or fails at that
 * op; check_missing then reports what is found missing only at the end.
 */

/* Rules for every op: read first, decoded pixels before pixel ops, nothing
 * per-sample after batch. */
static int check_common(struct parse *ps, const struct gm_pipeline *p, const int *at, size_t i)
{
	const struct op_inst *o = &p->op[i];
	const struct op_def *d = &ops[o->id];
	size_t opno = i + 1;
	if (i == 0 && o->id != OP_READ) {
		if (at[OP_READ] >= 0)
			return fail(ps, opno, o->col,
				    "'%s' before 'read' (op %d): 'read' must be the first op",
				    d->name, at[OP_READ] + 1);
		return fail(ps, opno, o->col, "the first op must be 'read', got '%s'", d->name);
	}
	if (d->pixels && (at[OP_DECODE] < 0 || at[OP_DECODE] > (int)i))
		return fail(ps, opno, o->col,
			    "'%s' needs decoded pixels: 'decode' must come before it", d->name);
	if ((d->pixels || o->id == OP_DECODE) && at[OP_BATCH] >= 0 && at[OP_BATCH] < (int)i)
		return fail(ps, opno, o->col,
			    "per-sample op '%s' after 'batch' (op %d): samples are already "
			    "batched; move it before 'batch'",
			    d->name, at[OP_BATCH] + 1);
	return 0;
}

/* One geometry: train (random_resized_crop) or eval (resize + center_crop). */
static int check_geometry(struct parse *ps, const struct gm_pipeline *p, const int *at, size_t i)
{
	const struct op_inst *o = &p->op[i];
	const struct op_def *d = &ops[o->id];
	size_t opno = i + 1;
	if (o->id == OP_RRC) {
		if ((at[OP_RESIZE] >= 0 && at[OP_RESIZE] < (int)i) ||
		    (at[OP_CENTER_CROP] >= 0 && at[OP_CENTER_CROP] < (int)i)) {
			/* the first of them; a later one is reported at its own op */
			int other = at[OP_RESIZE] >= 0 && at[OP_RESIZE] < (int)i
					? at[OP_RESIZE]
					: at[OP_CENTER_CROP];
			return fail(ps, opno, o->col,
				    "'random_resized_crop' with '%s' (op %d): choose train "
				    "(random_resized_crop) or eval (resize + center_crop)",
				    ops[p->op[other].id].name, other + 1);
		}
		return 0;
	}
	if (at[OP_RRC] >= 0 && at[OP_RRC] < (int)i)
		return fail(ps, opno, o->col,
			    "'%s' with 'random_resized_crop' (op %d): choose train "
			    "(random_resized_crop) or eval (resize + center_crop)",
			    d->name, at[OP_RRC] + 1);
	if (o->id == OP_CENTER_CROP) {
		if (at[OP_RESIZE] < 0 || at[OP_RESIZE] > (int)i)
			return fail(ps, opno, o->col, "'center_crop' needs 'resize N' before it");
		uint64_t r = p->op[at[OP_RESIZE]].a[0].u;
		if (o->a[0].u > r)
			return fail(ps, opno, o->col, "center_crop '%s' is larger than resize %llu",
				    o->a[0].text, (unsigned long long)r);
	}
	return 0;
}

/* One output layout, and normalize only with a float one. */
static int check_layout(struct parse *ps, const struct gm_pipeline *p, const int *at, size_t i)
{
	static const enum op_id outs[] = {OP_TO_HWC_U8, OP_TO_CHW_F32, OP_TO_CHW_F16};
	const struct op_inst *o = &p->op[i];
	size_t opno = i + 1;
	if (at[OP_NORMALIZE] >= 0 && at[OP_TO_HWC_U8] >= 0 &&
	    (int)i == (at[OP_NORMALIZE] > at[OP_TO_HWC_U8] ? at[OP_NORMALIZE] : at[OP_TO_HWC_U8]))
		return fail(ps, opno, o->col,
			    "'normalize' (op %d) with 'to_hwc_u8' (op %d): uint8 "
			    "output cannot hold normalised values; use 'to_chw_f32' or "
			    "'to_chw_f16'",
			    at[OP_NORMALIZE] + 1, at[OP_TO_HWC_U8] + 1);
	if (o->id == OP_NORMALIZE)
		return 0;
	for (size_t k = 0; k < 3; k++)
		if (outs[k] != o->id && at[outs[k]] >= 0 && at[outs[k]] < (int)i)
			return fail(ps, opno, o->col, "two output layouts: '%s' (op %d) and '%s'",
				    ops[outs[k]].name, at[outs[k]] + 1, ops[o->id].name);
	return 0;
}

/* color_jitter works on the resized pixels, before they are normalised. */
static int check_jitter(struct parse *ps, const struct gm_pipeline *p, const int *at, size_t i)
{
	const struct op_inst *o = &p->op[i];
	int geo = at[OP_RRC] >= 0 ? at[OP_RRC] : at[OP_CENTER_CROP];
	if (geo > (int)i)
		return fail(ps, i + 1, o->col,
			    "'color_jitter' before '%s' (op %d): it works on the resized "
			    "sample; move it after",
			    ops[p->op[geo].id].name, geo + 1);
	if (at[OP_NORMALIZE] >= 0 && at[OP_NORMALIZE] < (int)i)
		return fail(ps, i + 1, o->col,
			    "'color_jitter' after 'normalize' (op %d): it works on [0,1] "
			    "pixels; move it before",
			    at[OP_NORMALIZE] + 1);
	return 0;
}

/* What is found missing only at the end of the spec. */
static int check_missing(struct parse *ps, const struct gm_pipeline *p, const int *at)
{
	size_t end_op = p->n + 1, end_col = ps->len + 1;
	if (at[OP_DECODE] < 0)
		return fail(ps, end_op, end_col, "no 'decode': add it after 'read'");
	if (at[OP_RESIZE] >= 0 && at[OP_CENTER_CROP] < 0)
		return fail(ps, (size_t)at[OP_RESIZE] + 1, p->op[at[OP_RESIZE]].col,
			    "'resize' needs 'center_crop N' after it (samples must have one size)");
	if (at[OP_RRC] < 0 && at[OP_CENTER_CROP] < 0)
		return fail(ps, end_op, end_col,
			    "no op fixes the sample size: add 'random_resized_crop N' or "
			    "'resize N | center_crop N'");
	if (at[OP_FLIP] >= 0 && at[OP_RRC] < 0)
		return fail(ps, (size_t)at[OP_FLIP] + 1, p->op[at[OP_FLIP]].col,
			    "'flip' needs 'random_resized_crop': the eval transform (resize + "
			    "center_crop) never flips");
	if (at[OP_NORMALIZE] >= 0 && at[OP_TO_CHW_F32] < 0 && at[OP_TO_CHW_F16] < 0)
		return fail(ps, (size_t)at[OP_NORMALIZE] + 1, p->op[at[OP_NORMALIZE]].col,
			    "'normalize' needs 'to_chw_f32' or 'to_chw_f16' (uint8 output "
			    "cannot hold normalised values)");
	return 0;
}

static int check_order(struct parse *ps, const struct gm_pipeline *p)
{
	int at[OP_COUNT], r = 0;
	for (int i = 0; i < OP_COUNT; i++)
		at[i] = -1;
	for (size_t i = 0; i < p->n; i++)
		at[p->op[i].id] = (int)i;

	for (size_t i = 0; i < p->n && !r; i++) {
		const struct op_inst *o = &p->op[i];
		r = check_common(ps, p, at, i);
		if (r)
			break;
		switch (o->id) {
		case OP_RESIZE:
		case OP_CENTER_CROP:
		case OP_RRC:
			r = check_geometry(ps, p, at, i);
			break;
		case OP_NORMALIZE:
		case OP_TO_HWC_U8:
		case OP_TO_CHW_F32:
		case OP_TO_CHW_F16:
			r = check_layout(ps, p, at, i);
			break;
		case OP_COLOR_JITTER:
			r = check_jitter(ps, p, at, i);
			break;
		case OP_BATCH:
			if (at[OP_RRC] < 0 && at[OP_CENTER_CROP] < 0)
				r = fail(ps, i + 1, o->col,
					 "'batch' needs fixed-size samples: put "
					 "'random_resized_crop N' or 'resize N | center_crop N' "
					 "before it");
			break;
		default:
			break;
		}
	}
	return r ? r : check_missing(ps, p, at);
}

/* The per-sample transform of the whole spec (see gm_pipeline_aug). */
static void build_aug(struct gm_pipeline *p)
{
	struct op_inst def[OP_COUNT];
	const struct op_inst *o[OP_COUNT];
	for (int i = 0; i < OP_COUNT; i++) {
		def[i].id = (enum op_id)i;
		set_defaults(&def[i]);
		o[i] = &def[i];
	}
	bool have[OP_COUNT] = {false};
	for (size_t i = 0; i < p->n; i++) {
		o[p->op[i].id] = &p->op[i];
		have[p->op[i].id] = true;
	}
	struct gm_aug_spec *s = &p->aug;
	memset(s, 0, sizeof(*s));
	s->mode = have[OP_RRC] ? GM_AUG_TRAIN : GM_AUG_EVAL;
	s->size = (uint32_t)(have[OP_RRC] ? o[OP_RRC]->a[0].u : o[OP_CENTER_CROP]->a[0].u);
	s->scale_min = (float)o[OP_RRC]->a[1].v[0];
	s->scale_max = (float)o[OP_RRC]->a[1].v[1];
	s->ratio_min = (float)o[OP_RRC]->a[2].v[0];
	s->ratio_max = (float)o[OP_RRC]->a[2].v[1];
	s->flip_p = have[OP_FLIP] ? (float)o[OP_FLIP]->a[0].v[0] : 0.0f;
	s->resize = have[OP_RESIZE] ? (uint32_t)o[OP_RESIZE]->a[0].u : 256;
	s->out = have[OP_TO_CHW_F32]   ? GM_OUT_F32_CHW
		 : have[OP_TO_CHW_F16] ? GM_OUT_F16_CHW
				       : GM_OUT_U8_HWC;
	for (int c = 0; c < 3; c++) {
		if (have[OP_NORMALIZE]) {
			s->mean[c] = (float)o[OP_NORMALIZE]->a[0].v[c];
			s->std[c] = (float)o[OP_NORMALIZE]->a[0].v[3 + c];
		} else if (have[OP_TO_CHW_F32] || have[OP_TO_CHW_F16]) {
			s->mean[c] = 0.0f; /* plain x/255 */
			s->std[c] = 1.0f;
		} else {
			s->mean[c] = imagenet_mean[c]; /* unused by uint8 output */
			s->std[c] = imagenet_std[c];
		}
	}
	s->max_pixels = o[OP_DECODE]->a[0].u;
	for (int k = 0; have[OP_COLOR_JITTER] && k < 4; k++) {
		const double *v = o[OP_COLOR_JITTER]->a[k].v;
		if (k < 3 && v[0] == 1 && v[1] == 1)
			continue; /* factor 1: the op leaves the pixels as they are */
		s->jitter[k][0] = (float)v[0];
		s->jitter[k][1] = (float)v[1];
	}
	p->batch = have[OP_BATCH] ? (uint32_t)o[OP_BATCH]->a[0].u : 0;
}

/* The split: workers take everything before the first stateful op. */
static void plan(struct gm_pipeline *p)
{
	size_t k = 0;
	while (k < p->n && ops[p->op[k].id].kind != GM_PIPELINE_STATEFUL)
		k++;
	p->n_worker = k;
	if (k == p->n) {
		snprintf(p->cut_reason, sizeof(p->cut_reason),
			 "no stateful op: the whole pipeline runs in the workers");
	} else {
		const struct op_def *d = &ops[p->op[k].id];
		snprintf(p->cut_reason, sizeof(p->cut_reason),
			 "op %zu '%s' is stateful (%s), so it and every op after it run in the "
			 "consumer",
			 k + 1, d->name, d->why);
	}
	size_t w = 0, len = sizeof(p->canonical);
	p->canonical[0] = '\0';
	for (size_t i = 0; i < p->n && w < len; i++) {
		int r = snprintf(p->canonical + w, len - w, "%s%s", i ? " | " : "", p->op[i].text);
		if (r < 0)
			break;
		w += (size_t)r;
	}
}

int gm_pipeline_parse(const char *spec, struct gm_pipeline **out, char *err, size_t errlen)
{
	struct parse ps = {spec, 0, err, errlen};
	struct gm_pipeline *p = NULL;
	int seen[OP_COUNT], r;

	if (err && errlen)
		err[0] = '\0';
	if (!out)
		return fail(&ps, 0, 0, "no output pointer");
	*out = NULL;
	if (!spec)
		return fail(&ps, 0, 0, "no spec (NULL)");
	ps.len = strnlen(spec, SPEC_MAX + 1);
	if (ps.len > SPEC_MAX)
		return fail(&ps, 1, 1, "spec longer than %d characters", SPEC_MAX);
	p = calloc(1, sizeof(*p));
	if (!p) {
		fail(&ps, 0, 0, "out of memory");
		return -ENOMEM;
	}
	for (int i = 0; i < OP_COUNT; i++)
		seen[i] = -1;

	size_t s = 0;
	bool blank = true;
	for (size_t i = 0; i < ps.len; i++)
		blank = blank && is_blank(spec[i]);
	if (blank) {
		r = fail(&ps, 1, 1, "empty pipeline; e.g. '%s'", GM_PIPELINE_TRAIN_DEFAULT);
		goto out_free;
	}
	for (;;) {
		const char *bar = memchr(spec + s, '|', ps.len - s);
		size_t e = bar ? (size_t)(bar - spec) : ps.len;
		r = parse_stage(&ps, p, s, e, seen);
		if (r)
			goto out_free;
		seen[p->op[p->n - 1].id] = (int)(p->n - 1);
		if (!bar)
			break;
		s = e + 1;
	}
	r = check_order(&ps, p);
	if (r)
		goto out_free;
	build_aug(p);
	plan(p);
	*out = p;
	return 0;

out_free:
	free(p);
	return r;
}

void gm_pipeline_free(struct gm_pipeline *p)
{
	free(p);
}

const struct gm_aug_spec *gm_pipeline_aug(const struct gm_pipeline *p)
{
	return &p->aug;
}

uint32_t gm_pipeline_batch_size(const struct gm_pipeline *p)
{
	return p->batch;
}

size_t gm_pipeline_sample_bytes(const struct gm_pipeline *p)
{
	/* Same formula as gm_aug_out_bytes; kept here so that the planner does not
	 * need the decoder linked in. */
	size_t px = (size_t)p->aug.size * p->aug.size * 3;
	return p->aug.out == GM_OUT_F32_CHW   ? px * sizeof(float)
	       : p->aug.out == GM_OUT_F16_CHW ? px * sizeof(uint16_t)
					      : px;
}

size_t gm_pipeline_n_ops(const struct gm_pipeline *p)
{
	return p->n;
}

size_t gm_pipeline_n_worker_ops(const struct gm_pipeline *p)
{
	return p->n_worker;
}

size_t gm_pipeline_n_consumer_ops(const struct gm_pipeline *p)
{
	return p->n - p->n_worker;
}

const char *gm_pipeline_op_name(const struct gm_pipeline *p, size_t i)
{
	return i < p->n ? ops[p->op[i].id].name : NULL;
}

const char *gm_pipeline_op_text(const struct gm_pipeline *p, size_t i)
{
	return i < p->n ? p->op[i].text : NULL;
}

int gm_pipeline_op_kind(const struct gm_pipeline *p, size_t i)
{
	return i < p->n ? (int)ops[p->op[i].id].kind : -EINVAL;
}

uint64_t gm_pipeline_op_arg(const struct gm_pipeline *p, size_t i)
{
	if (i >= p->n || !ops[p->op[i].id].nargs || ops[p->op[i].id].args[0].type != ARG_UINT)
		return 0;
	return p->op[i].a[0].u;
}

bool gm_pipeline_worker_complete(const struct gm_pipeline *p)
{
	for (size_t i = p->n_worker; i < p->n; i++)
		if (ops[p->op[i].id].kind != GM_PIPELINE_STATEFUL)
			return false;
	return true;
}

const char *gm_pipeline_cut_reason(const struct gm_pipeline *p)
{
	return p->cut_reason;
}

const char *gm_pipeline_canonical(const struct gm_pipeline *p)
{
	return p->canonical;
}

const char *gm_pipeline_kind_name(int kind)
{
	switch (kind) {
	case GM_PIPELINE_PER_SAMPLE:
		return "per-sample";
	case GM_PIPELINE_PER_BATCH:
		return "per-batch";
	case GM_PIPELINE_STATEFUL:
		return "stateful";
	default:
		return "?";
	}
}

/* Where op i runs and why, one line. */
static void op_reason(const struct gm_pipeline *p, size_t i, char *buf, size_t len)
{
	const struct op_def *d = &ops[p->op[i].id];
	if (i < p->n_worker || d->kind == GM_PIPELINE_STATEFUL)
		snprintf(buf, len, "%s", d->why);
	else
		snprintf(buf, len,
			 "%s; stateless, but after stateful op %zu '%s': stays in the consumer",
			 d->why, p->n_worker + 1, ops[p->op[p->n_worker].id].name);
}

static const char *layout_name(const struct gm_aug_spec *s)
{
	return s->out == GM_OUT_F32_CHW	  ? "float32 CHW"
	       : s->out == GM_OUT_F16_CHW ? "float16 CHW"
					  : "uint8 HWC";
}

int gm_pipeline_describe(const struct gm_pipeline *p, FILE *f)
{
	const struct gm_aug_spec *s = &p->aug;
	char why[512], hb[32];
	size_t sb = gm_pipeline_sample_bytes(p);

	fprintf(f, "pipeline: %s\n", p->canonical);
	fprintf(f, "workers (%zu op%s, stateless prefix):\n", p->n_worker,
		p->n_worker == 1 ? "" : "s");
	for (size_t i = 0; i < p->n; i++) {
		if (i == p->n_worker)
			fprintf(f, "consumer (%zu op%s):\n", p->n - p->n_worker,
				p->n - p->n_worker == 1 ? "" : "s");
		op_reason(p, i, why, sizeof(why));
		fprintf(f, "  %2zu %-10s %s\n       why: %s\n", i + 1,
			gm_pipeline_kind_name(ops[p->op[i].id].kind), p->op[i].text, why);
	}
	if (p->n_worker == p->n)
		fprintf(f, "consumer (0 ops): nothing\n");
	fprintf(f, "cut: %s\n", p->cut_reason);
	if (!gm_pipeline_worker_complete(p))
		fprintf(f, "note: stateless ops after the cut run in the consumer; move stateful "
			   "ops to the end to give them to the workers\n");
	if (s->mode == GM_AUG_TRAIN)
		fprintf(f,
			"mode: train (random_resized_crop %u, scale %g..%g, ratio %g..%g), "
			"flip p=%g\n",
			s->size, s->scale_min, s->scale_max, s->ratio_min, s->ratio_max, s->flip_p);
	else
		fprintf(f, "mode: eval (resize %u, center_crop %u), flip p=%g\n", s->resize,
			s->size, s->flip_p);
	if (s->jitter[0][1] > 0 || s->jitter[1][1] > 0 || s->jitter[2][1] > 0 ||
	    s->jitter[3][0] != 0 || s->jitter[3][1] != 0)
		fprintf(f,
			"color jitter: factors brightness %g..%g, contrast %g..%g, saturation "
			"%g..%g, hue %g..%g (0..0: off), in random order\n",
			s->jitter[0][0], s->jitter[0][1], s->jitter[1][0], s->jitter[1][1],
			s->jitter[2][0], s->jitter[2][1], s->jitter[3][0], s->jitter[3][1]);
	gm_fmt_bytes(hb, sizeof(hb), sb);
	if (s->out != GM_OUT_U8_HWC)
		fprintf(f, "sample: %s 3x%ux%u, mean %g,%g,%g std %g,%g,%g = %zu bytes (%s)\n",
			layout_name(s), s->size, s->size, s->mean[0], s->mean[1], s->mean[2],
			s->std[0], s->std[1], s->std[2], sb, hb);
	else
		fprintf(f, "sample: %s %ux%ux3 = %zu bytes (%s)\n", layout_name(s), s->size,
			s->size, sb, hb);
	if (p->batch) {
		uint64_t bb = (uint64_t)sb * p->batch;
		gm_fmt_bytes(hb, sizeof(hb), bb);
		fprintf(f, "batch: %u samples = %llu bytes (%s)\n", p->batch,
			(unsigned long long)bb, hb);
	} else {
		fprintf(f, "batch: none in the spec (the loader's batch_size applies)\n");
	}
	return ferror(f) ? -EIO : 0;
}

int gm_pipeline_describe_json(const struct gm_pipeline *p, FILE *f)
{
	const struct gm_aug_spec *s = &p->aug;
	char why[512];
	size_t sb = gm_pipeline_sample_bytes(p);

	fputs("{\"spec\":", f);
	gm_json_str(f, p->canonical);
	fputs(",\"ops\":[", f);
	for (size_t i = 0; i < p->n; i++) {
		op_reason(p, i, why, sizeof(why));
		fprintf(f, "%s{\"index\":%zu,\"op\":", i ? "," : "", i + 1);
		gm_json_str(f, ops[p->op[i].id].name);
		fputs(",\"text\":", f);
		gm_json_str(f, p->op[i].text);
		fprintf(f, ",\"kind\":\"%s\",\"where\":\"%s\",\"why\":",
			gm_pipeline_kind_name(ops[p->op[i].id].kind),
			i < p->n_worker ? "workers" : "consumer");
		gm_json_str(f, why);
		fputc('}', f);
	}
	fprintf(f, "],\"n_worker_ops\":%zu,\"n_consumer_ops\":%zu,\"cut\":", p->n_worker,
		p->n - p->n_worker);
	if (p->n_worker == p->n)
		fputs("null", f);
	else
		fprintf(f, "%zu", p->n_worker + 1);
	fputs(",\"cut_reason\":", f);
	gm_json_str(f, p->cut_reason);
	fprintf(f, ",\"worker_complete\":%s", gm_pipeline_worker_complete(p) ? "true" : "false");
	fprintf(f,
		",\"aug\":{\"mode\":\"%s\",\"size\":%u,\"scale\":[%.9g,%.9g],\"ratio\":[%.9g,%.9g],"
		"\"flip_p\":%.9g,\"resize\":%u,\"out\":\"%s\",\"mean\":[%.9g,%.9g,%.9g],"
		"\"std\":[%.9g,%.9g,%.9g],\"max_pixels\":%llu,\"jitter\":[[%.9g,%.9g],[%.9g,%.9g],"
		"[%.9g,%.9g],[%.9g,%.9g]]}",
		s->mode == GM_AUG_TRAIN ? "train" : "eval", s->size, s->scale_min, s->scale_max,
		s->ratio_min, s->ratio_max, s->flip_p, s->resize,
		s->out == GM_OUT_F32_CHW   ? "f32_chw"
		: s->out == GM_OUT_F16_CHW ? "f16_chw"
					   : "u8_hwc",
		s->mean[0], s->mean[1], s->mean[2], s->std[0], s->std[1], s->std[2],
		(unsigned long long)s->max_pixels, s->jitter[0][0], s->jitter[0][1],
		s->jitter[1][0], s->jitter[1][1], s->jitter[2][0], s->jitter[2][1], s->jitter[3][0],
		s->jitter[3][1]);
	if (s->out != GM_OUT_U8_HWC)
		fprintf(f, ",\"sample\":{\"dtype\":\"%s\",\"layout\":\"CHW\",\"shape\":[3,%u,%u]",
			s->out == GM_OUT_F16_CHW ? "float16" : "float32", s->size, s->size);
	else
		fprintf(f,
			",\"sample\":{\"dtype\":\"uint8\",\"layout\":\"HWC\",\"shape\":[%u,%u,3]",
			s->size, s->size);
	fprintf(f, ",\"bytes\":%zu},\"batch_size\":%u,\"batch_bytes\":%llu}\n", sb, p->batch,
		(unsigned long long)((uint64_t)sb * p->batch));
	return ferror(f) ? -EIO : 0;
}

long gm_pipeline_format(const struct gm_pipeline *p, bool json, char *buf, size_t len)
{
	char *m = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&m, &n);
	if (!f)
		return -ENOMEM;
	int r = json ? gm_pipeline_describe_json(p, f) : gm_pipeline_describe(p, f);
	if (fclose(f) || r) {
		free(m);
		return -ENOMEM;
	}
	if (len) {
		size_t c = n < len - 1 ? n : len - 1;
		memcpy(buf, m, c);
		buf[c] = '\0';
	}
	free(m);
	return (long)n;
}

int gm_pipeline_list_ops(FILE *f)
{
	char gram[160];
	for (int i = 0; i < OP_COUNT; i++) {
		const struct op_def *d = &ops[i];
		op_grammar(d, gram, sizeof(gram));
		fprintf(f, "%-52s %-10s %s\n", gram, gm_pipeline_kind_name(d->kind), d->does);
		for (int j = 0; j < d->nargs; j++) {
			char rng[64];
			if (d->args[j].type == ARG_NORM)
				continue;
			range_text(&d->args[j], rng, sizeof(rng));
			fprintf(f, "%-52s %-10s   %s in %s%s\n", "", "", d->args[j].name, rng,
				d->args[j].type == ARG_RANGE ? " (MIN,MAX; a/b fractions allowed)"
							     : "");
		}
		fprintf(f, "%-52s %-10s   why %s: %s\n", "", "", gm_pipeline_kind_name(d->kind),
			d->why);
	}
	return ferror(f) ? -EIO : 0;
}
