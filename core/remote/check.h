/*
 * check.h - the rules every value a remote worker sends must meet before the
 * home lets it land (check.c; home.c calls them, tests/test_remote_check.c
 * tests them).
 *
 * The idea: the home knows everything a lease may carry without asking the
 * writer. At the claim it computes, from the job's (seed, epoch, batch) and
 * the same permutation the workers use, the dataset id of every position of
 * the batch and of the substitutes after it, with each one's label in the
 * dataset (struct gm_remote_expect). A sample's id, label and error record, a
 * publish's status, error bits and error records are then compared with that:
 * a writer can deliver the batch the home would have made, or nothing.
 *
 * Pure functions, no UCX, no I/O: each says true (the value may land) or false
 * with the rule it broke, in words, in why (the home logs it with the peer).
 * Not here: what the home does about a refusal (home.c revokes the lease).
 */
#ifndef GM_REMOTE_CHECK_H
#define GM_REMOTE_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "goldminer/job.h"
#include "goldminer/ring.h"
#include "msg.h"

/* What one lease must carry: id[q] and label[q] for q < nb are the batch's
 * positions; id[p + j], 1 <= j <= nsub, are the samples that may replace a bad
 * one at position p (worker.c: the next ones in epoch order). Both arrays hold
 * nb + nsub entries. */
struct gm_remote_expect {
	const uint32_t *id;
	const int32_t *label;
	uint32_t nb, nsub;
	enum gm_on_error on_error; /* the job's: which failed status it can publish */
};

/* A publish's status: 0; -EBADMSG only for a job with on_error=fail, -ENODATA
 * only for one that substitutes (what worker.c writes, nothing else: a positive
 * status would reach gm_loader_next as END or END_OF_EPOCH). */
bool gm_remote_check_status(const struct gm_remote_expect *e, int32_t status, char *why, size_t wl);

/* A SAMPLE: its position inside the lease; a good one carries exactly the id of
 * its position, a bad one (its err bit) that id or one of its substitutes; the
 * label is that sample's label in the dataset; an error record comes only with
 * a bad sample, names the position's own sample (the file that failed) and
 * carries a -errno. */
bool gm_remote_check_sample(const struct gm_remote_expect *e, const struct m_sample *s, char *why,
			    size_t wl);

/* A PUBLISH's err bits (words of 64, one per position: none at or past nb) and
 * its n error records: each names the sample of a position this publish marks
 * bad, with a -errno. */
bool gm_remote_check_records(const struct gm_remote_expect *e, const uint64_t *err_words,
			     uint32_t words, const struct gm_slot_err *recs, uint32_t n, char *why,
			     size_t wl);

#endif
