/*
 * pipeline.h - the textual pipeline spec and the planner that splits it.
 *
 * One string describes the whole pre-processing pipeline, the same for the CLI,
 * the C API (gm_loader_opts.pipeline) and Python:
 *
 *   read | decode | random_resized_crop 224 | flip 0.5 | to_chw_f32 | batch 256
 *
 * Stages are separated by '|'; a stage is an op name and its arguments, separated
 * by blanks (spaces, tabs, newlines; any amount). Arguments are positional, or
 * NAME=VALUE for any of an op's arguments (`random_resized_crop 224 scale=0.2,1`).
 * Op names and keywords are case-insensitive. `goldminer plan --ops` prints the op
 * table (grammar, kind, and why the kind).
 *
 * Every op is declared once, with its kind: stateless per-sample, stateless
 * per-batch, or stateful (reads earlier samples or keeps state across calls). The
 * planner gives the workers the longest stateless prefix of the pipeline and keeps
 * the rest in the consumer: the first stateful op cuts the pipeline, and every op
 * after it stays in the consumer even when stateless (DESIGN.md contracts 3, 4).
 *
 * The per-sample ops become one struct gm_aug_spec (aug.h): random_resized_crop
 * selects train mode, resize + center_crop eval mode. The parser checks names,
 * arguments, ranges and order; every error names the op's position (1-based op
 * index and 1-based character column of the offending token) and quotes it:
 *
 *   pipeline:3 (col 17): unknown op 'random_crop' (did you mean 'random_resized_crop'?); ...
 *
 * Not here: running the ops (aug.c does the per-sample part, the loader the rest).
 */
#ifndef GOLDMINER_PIPELINE_H
#define GOLDMINER_PIPELINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "goldminer/aug.h"

/*
 * Default specs. Train: the usual ImageNet recipe. No shuffle_buffer: the
 * coordinator already draws a global per-epoch permutation, and a shuffle buffer
 * would pull work back into the consumer. Eval: resize the shorter side to 256,
 * center-crop 224.
 */
#define GM_PIPELINE_TRAIN_DEFAULT                                                                  \
	"read | decode | random_resized_crop 224 | flip 0.5 | normalize imagenet | to_chw_f32 | "  \
	"batch 256"
#define GM_PIPELINE_EVAL_DEFAULT                                                                   \
	"read | decode | resize 256 | center_crop 224 | normalize imagenet | to_chw_f32 | "        \
	"batch 256"

/* What an op may depend on, which decides where it can run. */
enum gm_pipeline_kind {
	GM_PIPELINE_PER_SAMPLE = 0, /* stateless: f(sample, its RNG key) */
	GM_PIPELINE_PER_BATCH = 1,  /* stateless: f(batch, its RNG key) */
	GM_PIPELINE_STATEFUL = 2,   /* reads earlier samples / keeps state between calls */
};

struct gm_pipeline;

/*
 * Parse and plan `spec`. On success *out is a new pipeline (free it with
 * gm_pipeline_free) and 0 is returned. On failure *out is NULL and the return is
 * -EINVAL (bad spec; also NULL spec/out) or -ENOMEM; if err is not NULL a message
 * of at most errlen-1 bytes is written there, of the form
 * "pipeline:OP (col COL): what is wrong with 'TOKEN'". A problem found only at the
 * end of the spec (a missing op) uses OP = number of ops + 1 and COL = length + 1.
 * Thread-safe (no shared state).
 */
int gm_pipeline_parse(const char *spec, struct gm_pipeline **out, char *err, size_t errlen);

/* Free a pipeline; NULL is a no-op. */
void gm_pipeline_free(struct gm_pipeline *p);

/*
 * The per-sample transform the spec asks for (every field is set by the parser:
 * mode, size, scale/ratio, flip_p (0 without flip), resize, out, mean/std (0/1 for
 * to_chw_f32 without normalize; ImageNet for uint8 output), max_pixels (decode's
 * argument)). It describes what the ops do, wherever they run: it is exactly the
 * workers' transform when gm_pipeline_worker_complete() is true. Valid until free.
 */
const struct gm_aug_spec *gm_pipeline_aug(const struct gm_pipeline *p);

/* Samples per batch from the `batch` op, or 0 when the spec has none. */
uint32_t gm_pipeline_batch_size(const struct gm_pipeline *p);

/* Bytes of one finished sample (gm_aug_out_bytes of the aug spec). */
size_t gm_pipeline_sample_bytes(const struct gm_pipeline *p);

/*
 * Ops, in spec order, are numbered 0 .. gm_pipeline_n_ops()-1. The workers run ops
 * 0 .. n_worker_ops-1, the consumer the rest (n_consumer_ops of them); the split is
 * always a prefix.
 */
size_t gm_pipeline_n_ops(const struct gm_pipeline *p);
size_t gm_pipeline_n_worker_ops(const struct gm_pipeline *p);
size_t gm_pipeline_n_consumer_ops(const struct gm_pipeline *p);

/* Op i's name ("flip"), or NULL when i is out of range. Valid until free. */
const char *gm_pipeline_op_name(const struct gm_pipeline *p, size_t i);

/* Op i in canonical form with every argument, defaults included
 * ("random_resized_crop 224 scale=0.08,1 ratio=0.75,1.33333"), or NULL. */
const char *gm_pipeline_op_text(const struct gm_pipeline *p, size_t i);

/* Op i's kind; -EINVAL (as an int) when i is out of range. */
int gm_pipeline_op_kind(const struct gm_pipeline *p, size_t i);

/* Op i's integer argument (batch and shuffle_buffer N, sizes, decode's pixel
 * limit), or 0 when it has none or i is out of range. */
uint64_t gm_pipeline_op_arg(const struct gm_pipeline *p, size_t i);

/*
 * True when every stateless op runs in the workers (the consumer holds only
 * stateful ops), so the workers deliver finished samples/batches. A loader that
 * cannot run image ops itself should refuse a pipeline where this is false.
 */
bool gm_pipeline_worker_complete(const struct gm_pipeline *p);

/* Why the pipeline is cut where it is (one line, no newline). */
const char *gm_pipeline_cut_reason(const struct gm_pipeline *p);

/* The whole spec in canonical form ("read | decode | ..."); parses to the same
 * pipeline. Valid until free. */
const char *gm_pipeline_canonical(const struct gm_pipeline *p);

/* Print, for people, the split: worker ops and consumer ops with their kind and
 * why, the reason for the cut, the sample's layout/shape/bytes and the batch bytes.
 * 0 or -EIO (write error). */
int gm_pipeline_describe(const struct gm_pipeline *p, FILE *f);

/* The same as one JSON object (one line plus newline). 0 or -EIO. */
int gm_pipeline_describe_json(const struct gm_pipeline *p, FILE *f);

/*
 * The describe output in a caller's buffer (for bindings without FILE *): json
 * selects the JSON form. Writes at most len bytes including the NUL (buf may be
 * NULL when len is 0) and returns the full length without the NUL, like snprintf,
 * or -ENOMEM.
 */
long gm_pipeline_format(const struct gm_pipeline *p, bool json, char *buf, size_t len);

/* Print the op table: each op's grammar, kind and why. 0 or -EIO. */
int gm_pipeline_list_ops(FILE *f);

/* "per-sample", "per-batch", "stateful", or "?" for anything else. */
const char *gm_pipeline_kind_name(int kind);

#endif
