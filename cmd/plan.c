/*
 * plan.c - `goldminer plan`: show how a pipeline spec splits between the workers
 * and the consumer, and why (gm_pipeline_describe / _describe_json), or list the
 * op table.
 *
 * The spec is every positional word joined by spaces, so that both
 * `plan "read | decode | ..."` and an unquoted spec work; --train and --eval name
 * the default specs. All the knowledge is in core/pipeline.c: this file only reads
 * the command line and maps the parser's result to an exit status (2 for a bad
 * spec, like any usage error; 1 for a runtime error).
 *
 * It does not open a dataset or start workers.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "goldminer/pipeline.h"
#include "goldminer/util.h"

#define CMD "plan"

enum { O_JSON, O_OPS, O_TRAIN, O_EVAL, O_HELP, O_N };

static const struct cmd_opt opts[O_N] = {
    [O_JSON] = {"json", NULL, 0, "one JSON object instead of text"},
    [O_OPS] = {"ops", NULL, 0, "list the op table (grammar, kind, ranges, why)"},
    [O_TRAIN] = {"train", NULL, 0, "plan the default train spec"},
    [O_EVAL] = {"eval", NULL, 0, "plan the default eval spec"},
    [O_HELP] = {"help", NULL, 'h', "this help"},
};

static void plan_usage(FILE *f)
{
	cmd_usage(f,
		  "goldminer plan [--json] SPEC...   (the words are joined by spaces)\n"
		  "       goldminer plan [--json] --train | --eval   (the default specs)\n"
		  "       goldminer plan --ops                      (the op table)\n"
		  "Shows which ops run in the workers and which in the consumer, and why.\n"
		  "Exit status: 0 ok, 2 bad spec or usage, 1 runtime error.",
		  opts, O_N);
	fprintf(f,
		"\ndefault train: %s\n"
		"default eval:  %s\n",
		GM_PIPELINE_TRAIN_DEFAULT, GM_PIPELINE_EVAL_DEFAULT);
}

/* The words joined by spaces, malloc'ed; NULL when there are none or on ENOMEM
 * (*oom set). */
static char *join_words(char **w, int n, bool *oom)
{
	size_t len = 1, k = 0;
	char *spec;
	*oom = false;
	if (n <= 0)
		return NULL;
	for (int i = 0; i < n; i++)
		len += strlen(w[i]) + 1;
	spec = malloc(len);
	if (!spec) {
		*oom = true;
		return NULL;
	}
	for (int i = 0; i < n; i++) {
		size_t m = strlen(w[i]);
		if (i)
			spec[k++] = ' ';
		memcpy(spec + k, w[i], m);
		k += m;
	}
	spec[k] = '\0';
	return spec;
}

/* Parse, plan and print one spec. The exit status. */
static int plan_spec(const char *spec, bool json)
{
	struct gm_pipeline *p = NULL;
	char err[1024];
	int r = gm_pipeline_parse(spec, &p, err, sizeof(err));
	if (r) {
		cmd_err(CMD, NULL, NULL, "%s", err);
		if (json) {
			fputs("{\"error\":", stdout);
			gm_json_str(stdout, err);
			fputs("}\n", stdout);
		}
		return r == -EINVAL ? 2 : 1;
	}
	r = json ? gm_pipeline_describe_json(p, stdout) : gm_pipeline_describe(p, stdout);
	gm_pipeline_free(p);
	return r ? 1 : 0;
}

int gm_cmd_plan(int argc, char **argv)
{
	const char *val[O_N], *preset = NULL;
	char *pos[argc > 0 ? argc : 1];
	struct cmd_args a = {val, pos, 0};
	bool oom;
	int rc;

	if (cmd_parse(CMD, opts, O_N, argc, argv, &a))
		return 2;
	if (val[O_HELP]) {
		plan_usage(stdout);
		return 0;
	}
	if (val[O_OPS])
		return gm_pipeline_list_ops(stdout) ? 1 : 0;
	if (val[O_TRAIN])
		preset = GM_PIPELINE_TRAIN_DEFAULT;
	if (val[O_EVAL])
		preset = val[O_TRAIN] ? NULL : GM_PIPELINE_EVAL_DEFAULT;
	char *spec = join_words(a.pos, a.npos, &oom);
	if (oom) {
		cmd_err(CMD, NULL, NULL, "out of memory");
		return 1;
	}
	if ((spec != NULL) == (preset != NULL) || (val[O_TRAIN] && val[O_EVAL])) {
		cmd_err(CMD, NULL, NULL, "give one SPEC, or --train, or --eval");
		plan_usage(stderr);
		rc = 2;
	} else {
		rc = plan_spec(spec ? spec : preset, val[O_JSON] != NULL);
	}
	free(spec);
	return rc;
}
