/*
 * check.c - the rules a remote worker's values must meet before they land at
 * the home (check.h): a publish's status, a sample's position, id, label and
 * error record, a publish's err bits and error records.
 *
 * The idea: compare with what the home computed at the claim (the ids and
 * labels of the lease's positions and their substitutes), never with anything
 * else the writer says. A bad sample's slot holds its substitute (the first
 * good one after it in epoch order, or, when the batch fails, the last one
 * tried), so a bad sample may carry any id of its window; a good one, only
 * its own.
 *
 * Not here: the lease itself (slot state, task, vpid, sizes: home.c checks
 * them first), and what a refusal costs the writer (home.c).
 */

#include "check.h"
#include "goldminer/util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

bool gm_remote_check_status(const struct gm_remote_expect *e, int32_t status, char *why, size_t wl)
{
	bool fail = e->on_error == GM_ON_ERROR_FAIL;
	if (status == 0 || (status == -EBADMSG && fail) || (status == -ENODATA && !fail))
		return true;
	gm_errf(why, wl,
		"status %" PRId32 " is not one its job's workers publish (0 or %s, on_error=%s)",
		status, fail ? "-EBADMSG" : "-ENODATA", fail ? "fail" : "skip");
	return false;
}

/* A record's error is what a worker records: a -errno. */
static bool rec_err_ok(const struct gm_slot_err *r, char *why, size_t wl)
{
	if (r->err < 0 && r->err > -4096)
		return true;
	gm_errf(why, wl,
		"an error record for sample %" PRIu32 " with error %" PRId32 " (not a -errno)",
		r->sample, r->err);
	return false;
}

bool gm_remote_check_sample(const struct gm_remote_expect *e, const struct m_sample *s, char *why,
			    size_t wl)
{
	if (s->pos >= e->nb || s->bad > 1 || s->has_rec > 1) {
		gm_errf(why, wl, "a sample at position %" PRIu32 " of a batch of %" PRIu32, s->pos,
			e->nb);
		return false;
	}
	uint32_t last = s->bad ? s->pos + e->nsub : s->pos, q = s->pos;
	while (q <= last && e->id[q] != s->id)
		q++;
	if (q > last) {
		gm_errf(why, wl,
			"sample id %" PRIu32 " at position %" PRIu32 " is not its lease's (%" PRIu32
			"%s)",
			s->id, s->pos, e->id[s->pos], s->bad ? " or a substitute of it" : "");
		return false;
	}
	if (s->label != e->label[q]) {
		gm_errf(why, wl,
			"label %" PRId32 " of sample %" PRIu32 " is not its label %" PRId32,
			s->label, s->id, e->label[q]);
		return false;
	}
	if (s->has_rec && (!s->bad || s->rec.sample != e->id[s->pos])) {
		gm_errf(why, wl,
			"an error record for sample %" PRIu32 " with position %" PRIu32
			" (%s sample %" PRIu32 ")",
			s->rec.sample, s->pos, s->bad ? "its bad" : "a good", e->id[s->pos]);
		return false;
	}
	return !s->has_rec || rec_err_ok(&s->rec, why, wl);
}

/* The position < nb whose err bit is set and whose sample is id, or nb. */
static uint32_t bad_position_of(const struct gm_remote_expect *e, const uint64_t *err_words,
				uint32_t id)
{
	for (uint32_t q = 0; q < e->nb; q++)
		if ((err_words[q / 64] >> (q % 64) & 1) && e->id[q] == id)
			return q;
	return e->nb;
}

bool gm_remote_check_records(const struct gm_remote_expect *e, const uint64_t *err_words,
			     uint32_t words, const struct gm_slot_err *recs, uint32_t n, char *why,
			     size_t wl)
{
	for (uint32_t q = 0; q < words; q++) {
		uint64_t w = err_words[q];
		uint32_t first = q * 64;
		if (first >= e->nb ? w != 0 : (e->nb - first < 64 && w >> (e->nb - first))) {
			gm_errf(why, wl, "err bits past the batch's %" PRIu32 " positions", e->nb);
			return false;
		}
	}
	for (uint32_t k = 0; k < n; k++) {
		if (bad_position_of(e, err_words, recs[k].sample) == e->nb) {
			gm_errf(why, wl,
				"an error record for sample %" PRIu32
				", which no position it marks bad holds",
				recs[k].sample);
			return false;
		}
		if (!rec_err_ok(&recs[k], why, wl))
			return false;
	}
	return true;
}
