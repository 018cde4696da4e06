/*
 * test_pipeline.c - the pipeline spec parser, its checks and the planner's split,
 * `goldminer plan`, and the failure paths (allocation failures by link-time wraps).
 */
// LDFLAGS: -Wl,--wrap=calloc -Wl,--wrap=open_memstream -Wl,-u,gm_aug_spec_default
// -Wl,-u,gm_aug_create
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "goldminer/aug.h"
#include "goldminer/loader.h"
#include "goldminer/pipeline.h"

/* --- fault injection ----------------------------------------------------------- */

void *__real_calloc(size_t n, size_t size);
void *__wrap_calloc(size_t n, size_t size);
FILE *__real_open_memstream(char **buf, size_t *len);
FILE *__wrap_open_memstream(char **buf, size_t *len);

static int fail_calloc, fail_memstream;

void *__wrap_calloc(size_t n, size_t size)
{
	if (fail_calloc) {
		errno = ENOMEM;
		return NULL;
	}
	return __real_calloc(n, size);
}

FILE *__wrap_open_memstream(char **buf, size_t *len)
{
	if (fail_memstream) {
		errno = ENOMEM;
		return NULL;
	}
	return __real_open_memstream(buf, len);
}

/* gm_aug_spec_default lives in aug.c; compare against it when it is linked. */
#pragma weak gm_aug_spec_default
#pragma weak gm_aug_out_bytes
#pragma weak gm_aug_create
#pragma weak gm_aug_destroy

/* --- helpers ------------------------------------------------------------------- */

#define PFX "read | decode | " /* 16 characters: op 3 starts at column 17 */

static struct gm_pipeline *parse_ok(const char *spec)
{
	struct gm_pipeline *p = NULL;
	char err[1024];
	int r = gm_pipeline_parse(spec, &p, err, sizeof(err));
	if (r)
		print_error("spec '%s' failed: %s\n", spec, err);
	assert_int_equal(r, 0);
	assert_non_null(p);
	return p;
}

/* The spec must fail with -EINVAL, and the message must start with `where` (the
 * "pipeline:OP (col C): " prefix) and contain `what` (which quotes the token). */
static void expect_error(const char *spec, const char *where, const char *what)
{
	struct gm_pipeline *p = (struct gm_pipeline *)1;
	char err[1024];
	memset(err, 'x', sizeof(err));
	int r = gm_pipeline_parse(spec, &p, err, sizeof(err));
	if (r != -EINVAL || strncmp(err, where, strlen(where)) || !strstr(err, what))
		print_error("spec '%s'\n  got: %d '%s'\n  want: '%s' ... '%s'\n", spec, r, err,
			    where, what);
	assert_int_equal(r, -EINVAL);
	assert_null(p);
	assert_int_equal(strncmp(err, where, strlen(where)), 0);
	assert_non_null(strstr(err, what));
}

static char *describe(const struct gm_pipeline *p, bool json)
{
	long n = gm_pipeline_format(p, json, NULL, 0);
	assert_true(n > 0);
	char *buf = malloc((size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(gm_pipeline_format(p, json, buf, (size_t)n + 1), n);
	assert_int_equal(strlen(buf), (size_t)n);
	return buf;
}

static void assert_float_eq(float a, float b)
{
	if (a != b)
		print_error("%.9g != %.9g\n", a, b);
	assert_true(a == b);
}

/* --- the default specs ---------------------------------------------------------- */

static void test_default_train(void **state)
{
	(void)state;
	struct gm_pipeline *p = parse_ok(GM_PIPELINE_TRAIN_DEFAULT);
	const struct gm_aug_spec *s = gm_pipeline_aug(p);
	assert_int_equal(s->mode, GM_AUG_TRAIN);
	assert_int_equal(s->size, 224);
	assert_float_eq(s->scale_min, 0.08f);
	assert_float_eq(s->scale_max, 1.0f);
	assert_float_eq(s->ratio_min, 0.75f);
	assert_float_eq(s->ratio_max, (float)(4.0 / 3.0));
	assert_float_eq(s->flip_p, 0.5f);
	assert_int_equal(s->resize, 256);
	assert_int_equal(s->out, GM_OUT_F32_CHW);
	assert_float_eq(s->mean[0], 0.485f);
	assert_float_eq(s->mean[1], 0.456f);
	assert_float_eq(s->mean[2], 0.406f);
	assert_float_eq(s->std[0], 0.229f);
	assert_float_eq(s->std[1], 0.224f);
	assert_float_eq(s->std[2], 0.225f);
	assert_int_equal(s->max_pixels, 64000000);
	assert_int_equal(gm_pipeline_batch_size(p), 256);
	assert_int_equal(gm_pipeline_sample_bytes(p), 3 * 224 * 224 * 4);
	assert_int_equal(gm_pipeline_n_ops(p), 7);
	assert_int_equal(gm_pipeline_n_worker_ops(p), 7);
	assert_int_equal(gm_pipeline_n_consumer_ops(p), 0);
	assert_true(gm_pipeline_worker_complete(p));
	assert_string_equal(gm_pipeline_op_name(p, 2), "random_resized_crop");
	assert_int_equal(gm_pipeline_op_arg(p, 2), 224);
	assert_int_equal(gm_pipeline_op_arg(p, 6), 256);
	assert_int_equal(gm_pipeline_op_kind(p, 6), GM_PIPELINE_PER_BATCH);
	assert_int_equal(gm_pipeline_op_kind(p, 0), GM_PIPELINE_PER_SAMPLE);
	gm_pipeline_free(p);
}

static void test_default_eval(void **state)
{
	(void)state;
	struct gm_pipeline *p = parse_ok(GM_PIPELINE_EVAL_DEFAULT);
	const struct gm_aug_spec *s = gm_pipeline_aug(p);
	assert_int_equal(s->mode, GM_AUG_EVAL);
	assert_int_equal(s->size, 224);
	assert_int_equal(s->resize, 256);
	assert_float_eq(s->flip_p, 0.0f);
	assert_int_equal(s->out, GM_OUT_F32_CHW);
	assert_int_equal(gm_pipeline_batch_size(p), 256);
	assert_true(gm_pipeline_worker_complete(p));
	gm_pipeline_free(p);
}

/* The spec equivalent of gm_aug_spec_default() gives exactly that struct. */
static void test_matches_aug_default(void **state)
{
	(void)state;
	if (!gm_aug_spec_default)
		skip();
	struct gm_aug_spec want;
	gm_aug_spec_default(&want);
	struct gm_pipeline *p = parse_ok(PFX "random_resized_crop 224 | flip | batch 64");
	const struct gm_aug_spec *s = gm_pipeline_aug(p);
	assert_int_equal(s->mode, want.mode);
	assert_int_equal(s->size, want.size);
	assert_float_eq(s->scale_min, want.scale_min);
	assert_float_eq(s->scale_max, want.scale_max);
	assert_float_eq(s->ratio_min, want.ratio_min);
	assert_float_eq(s->ratio_max, want.ratio_max);
	assert_float_eq(s->flip_p, want.flip_p);
	assert_int_equal(s->resize, want.resize);
	assert_int_equal(s->out, want.out);
	for (int c = 0; c < 3; c++) {
		assert_float_eq(s->mean[c], want.mean[c]);
		assert_float_eq(s->std[c], want.std[c]);
	}
	assert_int_equal(s->max_pixels, want.max_pixels);
	assert_int_equal(gm_pipeline_sample_bytes(p), gm_aug_out_bytes(&want));
	gm_pipeline_free(p);
}

/* aug.c accepts every aug spec the parser produces, at the edges of the ranges too. */
static void test_aug_create_accepts(void **state)
{
	(void)state;
	if (!gm_aug_create)
		skip();
	static const char *specs[] = {
	    GM_PIPELINE_TRAIN_DEFAULT,
	    GM_PIPELINE_EVAL_DEFAULT,
	    PFX "random_resized_crop 1 scale=1,1 ratio=100,100 | flip 1 | to_chw_f32",
	    PFX "random_resized_crop 8192 scale=0.001,0.001 ratio=0.01,0.01 | flip 0",
	    PFX "resize 8192 | center_crop 8192 | to_hwc_u8",
	    PFX "resize 16384 | center_crop 1 | to_chw_f32 | normalize 0,1,0.5/1,0.001,0.5",
	};
	for (size_t i = 0; i < sizeof(specs) / sizeof(specs[0]); i++) {
		struct gm_pipeline *p = parse_ok(specs[i]);
		struct gm_aug *a = NULL;
		int r = gm_aug_create(&a, gm_pipeline_aug(p));
		if (r)
			print_error("gm_aug_create refused '%s': %d\n", specs[i], r);
		assert_int_equal(r, 0);
		gm_aug_destroy(a);
		gm_pipeline_free(p);
	}
}

/* --- the split ------------------------------------------------------------------- */

static void test_split_no_stateful(void **state)
{
	(void)state;
	struct gm_pipeline *p = parse_ok(PFX "random_resized_crop 160 | batch 32");
	assert_int_equal(gm_pipeline_n_worker_ops(p), 4);
	assert_int_equal(gm_pipeline_n_consumer_ops(p), 0);
	assert_non_null(strstr(gm_pipeline_cut_reason(p), "no stateful op"));
	assert_int_equal(gm_pipeline_aug(p)->out, GM_OUT_U8_HWC);
	assert_int_equal(gm_pipeline_sample_bytes(p), 160 * 160 * 3);
	char *d = describe(p, false);
	assert_non_null(strstr(d, "consumer (0 ops)"));
	free(d);
	d = describe(p, true);
	assert_non_null(strstr(d, "\"cut\":null"));
	assert_non_null(strstr(d, "\"batch_bytes\":2457600"));
	free(d);
	gm_pipeline_free(p);
}

static void test_split_stateful_last(void **state)
{
	(void)state;
	struct gm_pipeline *p = parse_ok(PFX "random_resized_crop 224 | flip 0.5 | "
					     "normalize imagenet | to_chw_f32 | batch 256 | "
					     "shuffle_buffer 8192");
	assert_int_equal(gm_pipeline_n_ops(p), 8);
	assert_int_equal(gm_pipeline_n_worker_ops(p), 7);
	assert_int_equal(gm_pipeline_n_consumer_ops(p), 1);
	assert_string_equal(gm_pipeline_op_name(p, 7), "shuffle_buffer");
	assert_int_equal(gm_pipeline_op_kind(p, 7), GM_PIPELINE_STATEFUL);
	assert_int_equal(gm_pipeline_op_arg(p, 7), 8192);
	assert_true(gm_pipeline_worker_complete(p)); /* only stateful ops in the consumer */
	const char *why = gm_pipeline_cut_reason(p);
	assert_non_null(strstr(why, "op 8 'shuffle_buffer' is stateful"));
	assert_non_null(strstr(why, "reads earlier samples"));
	gm_pipeline_free(p);
}

/* A stateful op early keeps every later op in the consumer, stateless or not. */
static void test_split_stateless_after_cut(void **state)
{
	(void)state;
	struct gm_pipeline *p =
	    parse_ok(PFX "cache | random_resized_crop 128 | flip | batch 8 | shuffle_buffer 4");
	assert_int_equal(gm_pipeline_n_worker_ops(p), 2);
	assert_int_equal(gm_pipeline_n_consumer_ops(p), 5);
	assert_false(gm_pipeline_worker_complete(p));
	assert_string_equal(gm_pipeline_op_name(p, 2), "cache");
	assert_int_equal(gm_pipeline_op_arg(p, 2), 0); /* no argument */
	assert_non_null(strstr(gm_pipeline_cut_reason(p), "op 3 'cache' is stateful"));
	char *d = describe(p, false);
	assert_non_null(strstr(d, "after stateful op 3 'cache': stays in the consumer"));
	assert_non_null(strstr(d, "consumer (5 ops)"));
	free(d);
	d = describe(p, true);
	assert_non_null(strstr(d, "\"worker_complete\":false"));
	assert_non_null(strstr(d, "\"cut\":3"));
	free(d);
	gm_pipeline_free(p);
}

/* shuffle_buffer before batch: batch is stateless but lands in the consumer. */
static void test_split_batch_after_shuffle(void **state)
{
	(void)state;
	struct gm_pipeline *p =
	    parse_ok(PFX "random_resized_crop 64 | shuffle_buffer 100 | batch 16");
	assert_int_equal(gm_pipeline_n_worker_ops(p), 3);
	assert_false(gm_pipeline_worker_complete(p));
	assert_int_equal(gm_pipeline_batch_size(p), 16);
	gm_pipeline_free(p);
}

/* The describe output holds the cut reason, both forms, and round-trips. */
static void test_describe_round_trip(void **state)
{
	(void)state;
	struct gm_pipeline *p = parse_ok(GM_PIPELINE_TRAIN_DEFAULT " | shuffle_buffer 8192");
	char *d = describe(p, false);
	assert_non_null(strstr(d, gm_pipeline_cut_reason(p)));
	assert_non_null(strstr(d, "workers (7 ops"));
	assert_non_null(strstr(d, "consumer (1 op)"));
	assert_non_null(strstr(d, "float32 CHW 3x224x224"));
	assert_non_null(strstr(d, "602112 bytes"));
	assert_non_null(strstr(d, "154140672 bytes"));
	/* The first line holds the canonical spec, which parses to the same thing. */
	char *nl = strchr(d, '\n');
	assert_non_null(nl);
	*nl = '\0';
	assert_int_equal(strncmp(d, "pipeline: ", 10), 0);
	struct gm_pipeline *q = parse_ok(d + 10);
	assert_memory_equal(gm_pipeline_aug(p), gm_pipeline_aug(q), sizeof(struct gm_aug_spec));
	assert_string_equal(gm_pipeline_canonical(p), gm_pipeline_canonical(q));
	assert_int_equal(gm_pipeline_n_worker_ops(q), 7);
	free(d);

	d = describe(p, true);
	assert_int_equal(d[0], '{');
	assert_non_null(strstr(d, "\"cut_reason\":\"op 8 'shuffle_buffer' is stateful"));
	assert_non_null(strstr(d, "\"cut\":8"));
	assert_non_null(strstr(d, "\"shape\":[3,224,224]"));
	assert_ptr_equal(strchr(d, '\n'), d + strlen(d) - 1); /* one line */
	free(d);

	/* A short buffer is truncated and NUL-terminated; the full length comes back. */
	char small[8];
	long n = gm_pipeline_format(p, false, small, sizeof(small));
	assert_true(n > 100);
	assert_string_equal(small, "pipelin");
	gm_pipeline_free(q);
	gm_pipeline_free(p);
}

/* Canonical text parses back to the same pipeline, for odd arguments too. */
static void test_canonical_round_trip(void **state)
{
	(void)state;
	static const char *specs[] = {
	    GM_PIPELINE_TRAIN_DEFAULT,
	    GM_PIPELINE_EVAL_DEFAULT,
	    ("read | decode 1000 | random_resized_crop 96 scale=1/3,0.9 ratio=0.5,2 | flip 0.1 "
	     "| normalize 0.5,0.5,0.5/0.25,0.25,0.25 | to_chw_f32 | batch 3 | cache"),
	    "read | cache | decode max_pixels=5 | resize 300 | center_crop 300 | to_hwc_u8",
	};
	for (size_t i = 0; i < sizeof(specs) / sizeof(specs[0]); i++) {
		struct gm_pipeline *p = parse_ok(specs[i]);
		struct gm_pipeline *q = parse_ok(gm_pipeline_canonical(p));
		assert_memory_equal(gm_pipeline_aug(p), gm_pipeline_aug(q),
				    sizeof(struct gm_aug_spec));
		assert_string_equal(gm_pipeline_canonical(p), gm_pipeline_canonical(q));
		assert_int_equal(gm_pipeline_n_worker_ops(p), gm_pipeline_n_worker_ops(q));
		assert_int_equal(gm_pipeline_batch_size(p), gm_pipeline_batch_size(q));
		gm_pipeline_free(q);
		gm_pipeline_free(p);
	}
}

/* --- arguments and syntax -------------------------------------------------------- */

static void test_whitespace_and_case(void **state)
{
	(void)state;
	struct gm_pipeline *a = parse_ok(PFX "random_resized_crop 224 | flip 0.5 | batch 8");
	struct gm_pipeline *b = parse_ok("\n\t  READ|Decode  |\n random_resized_crop\t224   "
					 "|FLIP|\r\n  batch\f 8 \t\n");
	assert_string_equal(gm_pipeline_canonical(a), gm_pipeline_canonical(b));
	assert_memory_equal(gm_pipeline_aug(a), gm_pipeline_aug(b), sizeof(struct gm_aug_spec));
	assert_int_equal(gm_pipeline_batch_size(b), 8);
	gm_pipeline_free(b);
	gm_pipeline_free(a);
}

static void test_named_args(void **state)
{
	(void)state;
	struct gm_pipeline *p = parse_ok(PFX "random_resized_crop ratio=1/2,2 size=160 "
					     "SCALE=0.25,0.5 | flip p=0.25 | batch n=4");
	const struct gm_aug_spec *s = gm_pipeline_aug(p);
	assert_int_equal(s->size, 160);
	assert_float_eq(s->scale_min, 0.25f);
	assert_float_eq(s->scale_max, 0.5f);
	assert_float_eq(s->ratio_min, 0.5f);
	assert_float_eq(s->ratio_max, 2.0f);
	assert_float_eq(s->flip_p, 0.25f);
	assert_int_equal(gm_pipeline_batch_size(p), 4);
	assert_string_equal(gm_pipeline_op_text(p, 2),
			    "random_resized_crop 160 scale=0.25,0.5 ratio=1/2,2");
	assert_null(gm_pipeline_op_text(p, 5));
	gm_pipeline_free(p);
}

static void test_layout_and_normalize(void **state)
{
	(void)state;
	/* to_chw_f32 alone: plain x/255. */
	struct gm_pipeline *p = parse_ok(PFX "random_resized_crop 32 | to_chw_f32");
	const struct gm_aug_spec *s = gm_pipeline_aug(p);
	assert_int_equal(s->out, GM_OUT_F32_CHW);
	for (int c = 0; c < 3; c++) {
		assert_float_eq(s->mean[c], 0.0f);
		assert_float_eq(s->std[c], 1.0f);
	}
	assert_int_equal(gm_pipeline_batch_size(p), 0);
	char *d = describe(p, false);
	assert_non_null(strstr(d, "none in the spec"));
	free(d);
	gm_pipeline_free(p);

	/* Custom statistics, normalize after the layout op (torchvision's order). */
	p = parse_ok(PFX "random_resized_crop 32 | to_chw_f32 | normalize 0.5,0.4,0.3/0.2,0.1,1");
	s = gm_pipeline_aug(p);
	assert_float_eq(s->mean[0], 0.5f);
	assert_float_eq(s->mean[2], 0.3f);
	assert_float_eq(s->std[1], 0.1f);
	assert_float_eq(s->std[2], 1.0f);
	gm_pipeline_free(p);

	/* Explicit uint8 layout. */
	p = parse_ok(PFX "random_resized_crop 32 | to_hwc_u8 | batch 2");
	assert_int_equal(gm_pipeline_aug(p)->out, GM_OUT_U8_HWC);
	d = describe(p, true);
	assert_non_null(strstr(d, "\"shape\":[32,32,3]"));
	free(d);
	gm_pipeline_free(p);
}

static void test_color_jitter_ranges_order_and_factor_one(void **state)
{
	(void)state;
	struct gm_pipeline *p =
	    parse_ok(PFX "random_resized_crop 32 | flip | color_jitter "
			 "0.6,1.4 saturation=0,2 hue=-0.2,0.1 | normalize | to_chw_f32");
	const struct gm_aug_spec *s = gm_pipeline_aug(p);
	assert_float_eq(s->jitter[0][0], 0.6f);
	assert_float_eq(s->jitter[0][1], 1.4f);
	assert_float_eq(s->jitter[1][0], 0.0f); /* contrast 1,1 (the default): left out */
	assert_float_eq(s->jitter[1][1], 0.0f);
	assert_float_eq(s->jitter[2][0], 0.0f);
	assert_float_eq(s->jitter[2][1], 2.0f);
	assert_non_null(
	    strstr(gm_pipeline_canonical(p),
		   "color_jitter brightness=0.6,1.4 contrast=1,1 saturation=0,2 hue=-0.2,0.1"));
	char *d = describe(p, false);
	assert_non_null(strstr(d, "color jitter: factors brightness 0.6..1.4, contrast 0..0, "
				  "saturation 0..2, hue -0.2..0.1"));
	free(d);
	d = describe(p, true);
	assert_non_null(strstr(
	    d, "\"jitter\":[[0.600000024,1.39999998],[0,0],[0,2],[-0.200000003,0.100000001]]"));
	free(d);
	gm_pipeline_free(p);
	p = parse_ok(PFX "resize 40 | center_crop 32 | color_jitter | to_hwc_u8");
	s = gm_pipeline_aug(p);
	for (int k = 0; k < 4; k++)
		assert_float_eq(s->jitter[k][1], 0.0f); /* every factor 1, hue 0: no jitter */
	gm_pipeline_free(p);
	expect_error(PFX "color_jitter 0.6,1.4 | random_resized_crop 32",
		     "pipeline:3 (col 17): ", "'color_jitter' before 'random_resized_crop' (op 4)");
	expect_error(PFX "random_resized_crop 32 | normalize | color_jitter 0.6,1.4 | to_chw_f32",
		     "pipeline:5 (col 54): ", "'color_jitter' after 'normalize' (op 4)");
	expect_error(PFX "random_resized_crop 32 | color_jitter 1.4,0.6",
		     "pipeline:4 (col 55): ", "MIN 1.4 > MAX 0.6");
}

/* --- errors: each kind, with its position ------------------------------------- */

static void test_error_unknown_op(void **state)
{
	(void)state;
	expect_error(PFX "random_crop 224", "pipeline:3 (col 17): ",
		     "unknown op 'random_crop' (did you mean 'random_resized_crop'?); known: read, "
		     "decode,");
	expect_error("read | decoed",
		     "pipeline:2 (col 8): ", "unknown op 'decoed' (did you mean 'decode'?)");
	expect_error(PFX "xyzzy", "pipeline:3 (col 17): ", "unknown op 'xyzzy'; known: ");
}

static void test_error_arguments(void **state)
{
	(void)state;
	/* missing */
	expect_error(PFX "random_resized_crop", "pipeline:3 (col 17): ",
		     "'random_resized_crop' is missing its size argument; usage: "
		     "random_resized_crop SIZE [scale=0.08,1] [ratio=3/4,4/3]");
	expect_error(PFX "random_resized_crop 224 | batch",
		     "pipeline:4 (col 43): ", "'batch' is missing its n argument");
	/* not a number */
	expect_error(PFX "random_resized_crop 22x", "pipeline:3 (col 37): ",
		     "random_resized_crop size '22x' is not a whole number");
	expect_error(PFX "random_resized_crop -5", "pipeline:3 (col 37): ", "'-5' is not a whole");
	expect_error(PFX "random_resized_crop 2.5",
		     "pipeline:3 (col 37): ", "'2.5' is not a whole");
	expect_error(PFX "random_resized_crop 224 | flip half",
		     "pipeline:4 (col 48): ", "flip p 'half' is not a number");
	expect_error(PFX "random_resized_crop 224 | flip nan",
		     "pipeline:4 (col 48): ", "flip p 'nan' is not a number");
	expect_error(PFX "random_resized_crop 224 scale=0.5",
		     "pipeline:3 (col 47): ", "scale '0.5' is not MIN,MAX");
	expect_error(PFX "random_resized_crop 224 scale=1/0,1",
		     "pipeline:3 (col 47): ", "scale '1/0,1' is not MIN,MAX");
	expect_error(PFX "random_resized_crop 224 | normalize foo | to_chw_f32",
		     "pipeline:4 (col 53): ", "normalize 'foo' is neither 'imagenet' nor");
	expect_error(PFX "random_resized_crop 224 | normalize 1,2,3/4,5 | to_chw_f32",
		     "pipeline:4 (col 53): ", "'1,2,3/4,5' is neither");
	/* extra / unknown named / twice / empty value */
	expect_error(PFX "random_resized_crop 224 | flip 0.5 0.3",
		     "pipeline:4 (col 52): ", "flip takes 1 argument; extra '0.3'");
	expect_error(PFX "random_resized_crop 224 | to_chw_f32 x",
		     "pipeline:4 (col 54): ", "to_chw_f32 takes 0 arguments; extra 'x'");
	expect_error(PFX "random_resized_crop 224 | flip q=0.3",
		     "pipeline:4 (col 48): ", "flip has no argument 'q'; usage: flip [p=0.5]");
	expect_error(PFX "random_resized_crop 224 | flip 0.2 p=0.3",
		     "pipeline:4 (col 52): ", "flip p given twice");
	expect_error(PFX "random_resized_crop 224 | flip p=", "pipeline:4 (col 49): ",
		     "flip p= has no value");
	/* too long a token */
	expect_error(PFX "random_resized_crop 224 | flip "
			 "0.50000000000000000000000000000000000000000000000000000000000000000001",
		     "pipeline:4 (col 48): ", "flip p '0.5000");
}

static void test_error_ranges(void **state)
{
	(void)state;
	expect_error(PFX "random_resized_crop 0", "pipeline:3 (col 37): ",
		     "random_resized_crop size '0' is out of range [1, 8192]");
	expect_error(PFX "random_resized_crop 9000", "pipeline:3 (col 37): ", "'9000' is out of");
	expect_error(PFX "random_resized_crop 224 | flip 1.5",
		     "pipeline:4 (col 48): ", "flip p '1.5' is out of range [0, 1]");
	expect_error(PFX "random_resized_crop 224 scale=0,1",
		     "pipeline:3 (col 47): ", "scale '0,1' is out of range (0, 1]");
	expect_error(PFX "random_resized_crop 224 scale=0.5,0.2",
		     "pipeline:3 (col 47): ", "scale '0.5,0.2': MIN 0.5 > MAX 0.2");
	expect_error(PFX "random_resized_crop 224 | batch 0",
		     "pipeline:4 (col 49): ", "batch n '0' is out of range [1, 65536]");
	expect_error(PFX "random_resized_crop 224 | batch 99999999999999999999999",
		     "pipeline:4 (col 49): ", "'99999999999999999999999' is out of range");
	expect_error(PFX "random_resized_crop 224 | shuffle_buffer 0",
		     "pipeline:4 (col 58): ", "shuffle_buffer n '0' is out of range");
	expect_error("read | decode 0 | random_resized_crop 8",
		     "pipeline:2 (col 15): ", "decode max_pixels '0' is out of range");
	expect_error("read | decode 1000000000001 | random_resized_crop 8",
		     "pipeline:2 (col 15): ", "'1000000000001' is out of range [1, 1000000000000]");
	expect_error("read | decode -1 | random_resized_crop 8",
		     "pipeline:2 (col 15): ", "decode max_pixels '-1' is not a whole number");
	/* the loader's pool holds at most 2^24 samples: more is refused, not made 1 */
	expect_error(PFX "random_resized_crop 224 | shuffle_buffer 16777217",
		     "pipeline:4 (col 58): ", "'16777217' is out of range [1, 16777216]");
	gm_pipeline_free(parse_ok(PFX "random_resized_crop 224 | shuffle_buffer 16777216"));
	expect_error(PFX "random_resized_crop 8 | normalize 123,116,103/58,57,57 | to_chw_f32",
		     "pipeline:4 (col 51): ",
		     "'123,116,103/58,57,57': mean must be in [0, 1] and std in (0, 1]");
	expect_error(PFX "random_resized_crop 8 | normalize 0.5,0.5,0.5/0.2,0,0.2 | to_chw_f32",
		     "pipeline:4 (col 51): ", "std in (0, 1]");
}

/* An empty spec given to the loader is an error, not "no spec" (the default). */
static void test_loader_refuses_an_empty_spec(void **state)
{
	(void)state;
	const char *specs[] = {"", "  \t"};
	for (int i = 0; i < 2; i++) {
		struct gm_loader_opts o;
		struct gm_loader *l = NULL;
		char err[512] = "";
		gm_loader_opts_default(&o);
		o.root = "/nonexistent/gm-root"; /* the spec is checked first */
		o.pipeline = specs[i];
		o.workers = 1;
		assert_int_equal(gm_loader_open(&l, &o, err, sizeof(err)), -EINVAL);
		assert_null(l);
		assert_non_null(strstr(err, "gm_loader_open: pipeline:1 (col 1): empty pipeline"));
	}
}

static void test_error_syntax(void **state)
{
	(void)state;
	expect_error("", "pipeline:1 (col 1): ", "empty pipeline");
	expect_error(" \t\n", "pipeline:1 (col 1): ", "empty pipeline");
	expect_error("read | | decode", "pipeline:2 (col 7): ", "empty stage");
	expect_error(PFX "random_resized_crop 8 |", "pipeline:4 (col 40): ", "empty stage");
	expect_error("| read", "pipeline:1 (col 1): ", "empty stage");
	char *big = malloc(5000);
	assert_non_null(big);
	memset(big, ' ', 4999);
	big[4999] = '\0';
	expect_error(big, "pipeline:1 (col 1): ", "longer than 4096");
	free(big);
}

static void test_error_order(void **state)
{
	(void)state;
	/* decode before read; no read at all */
	expect_error("decode | read | random_resized_crop 224", "pipeline:1 (col 1): ",
		     "'decode' before 'read' (op 2): 'read' must be the first op");
	expect_error("decode | random_resized_crop 224",
		     "pipeline:1 (col 1): ", "the first op must be 'read', got 'decode'");
	/* no decode */
	expect_error("read | random_resized_crop 224 | batch 8",
		     "pipeline:2 (col 8): ", "'random_resized_crop' needs decoded pixels");
	expect_error("read", "pipeline:2 (col 5): ", "no 'decode'");
	expect_error("read | cache", "pipeline:3 (col 13): ", "no 'decode'");
	expect_error("read | flip | decode", "pipeline:2 (col 8): ", "'flip' needs decoded");
	/* twice */
	expect_error("read | read", "pipeline:2 (col 8): ", "'read' given twice (first at op 1)");
	expect_error(PFX "random_resized_crop 8 | batch 8 | batch 16",
		     "pipeline:5 (col 51): ", "'batch' given twice (first at op 4)");
	/* train and eval geometry together, either order */
	expect_error(
	    PFX "random_resized_crop 224 | resize 256 | center_crop 224",
	    "pipeline:4 (col 43): ", "'resize' with 'random_resized_crop' (op 3): choose train");
	expect_error(PFX "random_resized_crop 224 | center_crop 224",
		     "pipeline:4 (col 43): ", "'center_crop' with 'random_resized_crop' (op 3)");
	expect_error(PFX "resize 256 | center_crop 224 | random_resized_crop 224",
		     "pipeline:5 (col 48): ", "'random_resized_crop' with 'resize' (op 3)");
	/* eval geometry incomplete or inconsistent */
	expect_error(PFX "center_crop 224",
		     "pipeline:3 (col 17): ", "'center_crop' needs 'resize N' before it");
	expect_error(PFX "center_crop 224 | resize 256",
		     "pipeline:3 (col 17): ", "'center_crop' needs 'resize N' before it");
	expect_error(PFX "resize 200 | center_crop 224",
		     "pipeline:4 (col 30): ", "center_crop '224' is larger than resize 200");
	expect_error(PFX "resize 256 | flip",
		     "pipeline:3 (col 17): ", "'resize' needs 'center_crop N' after it");
	expect_error(PFX "resize 256 | center_crop 224 | flip", "pipeline:5 (col 48): ",
		     "'flip' needs 'random_resized_crop': the eval transform");
	expect_error(PFX "resize 9000 | center_crop 8193",
		     "pipeline:4 (col 43): ", "center_crop n '8193' is out of range [1, 8192]");
	/* per-sample after batch */
	expect_error(PFX "random_resized_crop 8 | batch 8 | flip",
		     "pipeline:5 (col 51): ", "per-sample op 'flip' after 'batch' (op 4)");
	expect_error(PFX "random_resized_crop 8 | batch 8 | shuffle_buffer 2 | to_chw_f32",
		     "pipeline:6 (col 70): ", "per-sample op 'to_chw_f32' after 'batch' (op 4)");
	/* no geometry */
	expect_error(PFX "batch 8", "pipeline:3 (col 17): ", "'batch' needs fixed-size samples");
	expect_error(PFX "flip", "pipeline:4 (col 21): ", "no op fixes the sample size");
	/* layout and normalize */
	expect_error(PFX "random_resized_crop 8 | normalize | to_hwc_u8", "pipeline:5 (col 53): ",
		     "'normalize' (op 4) with 'to_hwc_u8' (op 5): uint8 output cannot hold");
	expect_error(PFX "random_resized_crop 8 | to_hwc_u8 | normalize",
		     "pipeline:5 (col 53): ", "'normalize' (op 5) with 'to_hwc_u8' (op 4)");
	expect_error(PFX "random_resized_crop 8 | normalize imagenet",
		     "pipeline:4 (col 41): ", "'normalize' needs 'to_chw_f32' or 'to_chw_f16'");
	expect_error(PFX "random_resized_crop 8 | to_chw_f32 | to_hwc_u8", "pipeline:5 (col 54): ",
		     "two output layouts: 'to_chw_f32' (op 4) and 'to_hwc_u8'");
	expect_error(PFX "random_resized_crop 8 | to_hwc_u8 | to_chw_f32", "pipeline:5 (col 53): ",
		     "two output layouts: 'to_hwc_u8' (op 4) and 'to_chw_f32'");
	expect_error(PFX "random_resized_crop 8 | to_chw_f32 | to_chw_f16", "pipeline:5 (col 54): ",
		     "two output layouts: 'to_chw_f32' (op 4) and 'to_chw_f16'");
	expect_error(PFX "random_resized_crop 8 | to_chw_f16 | to_hwc_u8", "pipeline:5 (col 54): ",
		     "two output layouts: 'to_chw_f16' (op 4) and 'to_hwc_u8'");
	expect_error(PFX "random_resized_crop 8 | to_hwc_u8 | normalize | to_chw_f16",
		     "pipeline:5 (col 53): ", "'normalize' (op 5) with 'to_hwc_u8' (op 4)");
}

/* float16 output: the float32 transform, stored as half. */
static void test_float16_output(void **state)
{
	(void)state;
	struct gm_pipeline *p = parse_ok(PFX "random_resized_crop 96 | normalize imagenet | "
					     "to_chw_f16 | batch 4");
	struct gm_pipeline *q = parse_ok(PFX "random_resized_crop 96 | normalize imagenet | "
					     "to_chw_f32 | batch 4");
	struct gm_aug_spec a = *gm_pipeline_aug(p), b = *gm_pipeline_aug(q);
	assert_int_equal(a.out, GM_OUT_F16_CHW);
	assert_int_equal(gm_pipeline_sample_bytes(p), 3 * 96 * 96 * 2);
	assert_int_equal(gm_pipeline_sample_bytes(p), gm_aug_out_bytes(&a));
	a.out = b.out;
	assert_memory_equal(&a, &b, sizeof(a)); /* same transform otherwise */
	gm_pipeline_free(q);
	gm_pipeline_free(p);
	/* without normalize: plain x/255, as to_chw_f32 */
	p = parse_ok(PFX "random_resized_crop 8 | to_chw_f16");
	assert_float_eq(gm_pipeline_aug(p)->mean[0], 0.0f);
	assert_float_eq(gm_pipeline_aug(p)->std[2], 1.0f);
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	assert_int_equal(gm_pipeline_describe_json(p, f), 0);
	fclose(f);
	assert_non_null(strstr(buf, "\"out\":\"f16_chw\""));
	assert_non_null(strstr(buf, "\"dtype\":\"float16\",\"layout\":\"CHW\""));
	free(buf);
	gm_pipeline_free(p);
}

static void test_error_api(void **state)
{
	(void)state;
	struct gm_pipeline *p = NULL;
	char err[256];
	assert_int_equal(gm_pipeline_parse(NULL, &p, err, sizeof(err)), -EINVAL);
	assert_null(p);
	assert_non_null(strstr(err, "no spec"));
	assert_int_equal(gm_pipeline_parse("read", NULL, err, sizeof(err)), -EINVAL);
	/* No message buffer is fine; a tiny one is cut (gm_errf keeps the message's
	 * end when nothing else fits), not overrun. */
	assert_int_equal(gm_pipeline_parse("nope", &p, NULL, 0), -EINVAL);
	char tiny[6] = "zzzzz", full[512];
	assert_int_equal(gm_pipeline_parse("nope", &p, tiny, 4), -EINVAL);
	assert_int_equal(gm_pipeline_parse("nope", &p, full, sizeof(full)), -EINVAL);
	assert_int_equal(strlen(tiny), 3);
	assert_string_equal(tiny, full + strlen(full) - 3);
	assert_int_equal(tiny[4], 'z');
	gm_pipeline_free(NULL);

	/* Accessors out of range. */
	p = parse_ok(GM_PIPELINE_TRAIN_DEFAULT);
	assert_null(gm_pipeline_op_name(p, 7));
	assert_int_equal(gm_pipeline_op_kind(p, 7), -EINVAL);
	assert_int_equal(gm_pipeline_op_arg(p, 7), 0);
	assert_int_equal(gm_pipeline_op_arg(p, 3), 0); /* flip: not an integer argument */
	assert_string_equal(gm_pipeline_kind_name(GM_PIPELINE_STATEFUL), "stateful");
	assert_string_equal(gm_pipeline_kind_name(GM_PIPELINE_PER_BATCH), "per-batch");
	assert_string_equal(gm_pipeline_kind_name(42), "?");

	/* A stream that cannot be written gives -EIO. */
	FILE *ro = fopen("/dev/null", "r");
	assert_non_null(ro);
	assert_int_equal(gm_pipeline_describe(p, ro), -EIO);
	clearerr(ro);
	assert_int_equal(gm_pipeline_describe_json(p, ro), -EIO);
	clearerr(ro);
	assert_int_equal(gm_pipeline_list_ops(ro), -EIO);
	fclose(ro);

	/* gm_pipeline_format without memory. */
	fail_memstream = 1;
	assert_int_equal(gm_pipeline_format(p, false, NULL, 0), -ENOMEM);
	fail_memstream = 0;
	gm_pipeline_free(p);
}

static void test_error_enomem(void **state)
{
	(void)state;
	struct gm_pipeline *p = (struct gm_pipeline *)1;
	char err[256];
	fail_calloc = 1;
	int r = gm_pipeline_parse(GM_PIPELINE_TRAIN_DEFAULT, &p, err, sizeof(err));
	fail_calloc = 0;
	assert_int_equal(r, -ENOMEM);
	assert_null(p);
	assert_non_null(strstr(err, "out of memory"));
}

/* Every default in the op table parses (else set_defaults would leave zeros). */
static void test_op_table(void **state)
{
	(void)state;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	assert_non_null(f);
	assert_int_equal(gm_pipeline_list_ops(f), 0);
	fclose(f);
	static const char *names[] = {"read",	     "decode", "random_resized_crop", "resize",
				      "center_crop", "flip",   "normalize",	      "to_chw_f32",
				      "to_hwc_u8",   "batch",  "shuffle_buffer",      "cache"};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		assert_non_null(strstr(buf, names[i]));
	assert_non_null(strstr(buf, "why stateful: it reads earlier samples"));
	free(buf);
	/* Defaults: a spec leaning on every one of them. */
	struct gm_pipeline *p = parse_ok(PFX "random_resized_crop 8 | flip | normalize | "
					     "to_chw_f32");
	const struct gm_aug_spec *s = gm_pipeline_aug(p);
	assert_int_equal(s->max_pixels, 64000000);
	assert_float_eq(s->scale_min, 0.08f);
	assert_float_eq(s->ratio_max, (float)(4.0 / 3.0));
	assert_float_eq(s->flip_p, 0.5f);
	assert_float_eq(s->std[2], 0.225f);
	gm_pipeline_free(p);
}

/* --- goldminer plan --------------------------------------------------------------- */

static char tmpdir[64];

static int setup(void **state)
{
	(void)state;
	strcpy(tmpdir, "/tmp/gm-test-pipeline-XXXXXX");
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	char path[128];
	snprintf(path, sizeof(path), "%s/out", tmpdir);
	unlink(path);
	return rmdir(tmpdir);
}

/* Run gm_cmd_plan with stdout+stderr captured into *text (malloc'd). */
static int run_plan(char **text, int argc, char **argv)
{
	char path[128];
	snprintf(path, sizeof(path), "%s/out", tmpdir);
	fflush(stdout);
	fflush(stderr);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	int o1 = dup(1), o2 = dup(2);
	dup2(fd, 1);
	dup2(fd, 2);
	int rc = gm_cmd_plan(argc, argv);
	fflush(stdout);
	fflush(stderr);
	dup2(o1, 1);
	dup2(o2, 2);
	close(o1);
	close(o2);
	off_t n = lseek(fd, 0, SEEK_END);
	*text = malloc((size_t)n + 1); /* not calloc: it may be failing on purpose */
	assert_non_null(*text);
	(*text)[n] = '\0';
	assert_int_equal(pread(fd, *text, (size_t)n, 0), n);
	close(fd);
	return rc;
}

static void test_cli_plan(void **state)
{
	(void)state;
	char *out;
	char *ok[] = {"plan", "read | decode | random_resized_crop 224 | batch 256",
		      "| shuffle_buffer 8192"};
	assert_int_equal(run_plan(&out, 3, ok), 0);
	assert_non_null(strstr(out, "op 5 'shuffle_buffer' is stateful"));
	assert_non_null(strstr(out, "uint8 HWC 224x224x3 = 150528 bytes"));
	assert_non_null(strstr(out, "38535168 bytes"));
	free(out);

	char *js[] = {"plan", "--json", "--train"};
	assert_int_equal(run_plan(&out, 3, js), 0);
	assert_int_equal(out[0], '{');
	assert_non_null(strstr(out, "\"batch_size\":256"));
	free(out);

	char *bad[] = {"plan", "read | decode | random_crop 224"};
	assert_int_equal(run_plan(&out, 2, bad), 2);
	assert_non_null(strstr(out, "pipeline:3 (col 17): unknown op 'random_crop'"));
	free(out);

	char *badj[] = {"plan", "--json", "read | decode | random_crop 224"};
	assert_int_equal(run_plan(&out, 3, badj), 2);
	assert_non_null(strstr(out, "{\"error\":\"pipeline:3 (col 17): unknown op"));
	free(out);

	char *none[] = {"plan"};
	assert_int_equal(run_plan(&out, 1, none), 2);
	assert_non_null(strstr(out, "usage"));
	free(out);

	char *both[] = {"plan", "--eval", "read"};
	assert_int_equal(run_plan(&out, 3, both), 2);
	free(out);

	char *opt[] = {"plan", "--frobnicate"};
	assert_int_equal(run_plan(&out, 2, opt), 2);
	assert_non_null(strstr(out, "goldminer plan: --frobnicate: unknown option"));
	free(out);

	char *help[] = {"plan", "--help"};
	assert_int_equal(run_plan(&out, 2, help), 0);
	assert_non_null(strstr(out, GM_PIPELINE_TRAIN_DEFAULT));
	free(out);

	char *list[] = {"plan", "--ops"};
	assert_int_equal(run_plan(&out, 2, list), 0);
	assert_non_null(strstr(out, "random_resized_crop SIZE [scale=0.08,1] [ratio=3/4,4/3]"));
	free(out);

	char *eval[] = {"plan", "--eval"};
	assert_int_equal(run_plan(&out, 2, eval), 0);
	assert_non_null(strstr(out, "mode: eval (resize 256, center_crop 224)"));
	free(out);

	fail_calloc = 1;
	char *oom[] = {"plan", "--train"};
	int rc = run_plan(&out, 2, oom);
	fail_calloc = 0;
	assert_int_equal(rc, 1);
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_default_train),
	    cmocka_unit_test(test_default_eval),
	    cmocka_unit_test(test_matches_aug_default),
	    cmocka_unit_test(test_aug_create_accepts),
	    cmocka_unit_test(test_split_no_stateful),
	    cmocka_unit_test(test_split_stateful_last),
	    cmocka_unit_test(test_split_stateless_after_cut),
	    cmocka_unit_test(test_split_batch_after_shuffle),
	    cmocka_unit_test(test_describe_round_trip),
	    cmocka_unit_test(test_canonical_round_trip),
	    cmocka_unit_test(test_whitespace_and_case),
	    cmocka_unit_test(test_named_args),
	    cmocka_unit_test(test_layout_and_normalize),
	    cmocka_unit_test(test_color_jitter_ranges_order_and_factor_one),
	    cmocka_unit_test(test_error_unknown_op),
	    cmocka_unit_test(test_error_arguments),
	    cmocka_unit_test(test_error_ranges),
	    cmocka_unit_test(test_loader_refuses_an_empty_spec),
	    cmocka_unit_test(test_error_syntax),
	    cmocka_unit_test(test_error_order),
	    cmocka_unit_test(test_float16_output),
	    cmocka_unit_test(test_error_api),
	    cmocka_unit_test(test_error_enomem),
	    cmocka_unit_test(test_op_table),
	    cmocka_unit_test(test_cli_plan),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
