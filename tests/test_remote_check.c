/*
 * test_remote_check.c - the rules a remote worker's values meet before they
 * land at the home (core/remote/check.h): a publish's status is one its job's
 * workers write (never END or END_OF_EPOCH, never a foreign errno); a good
 * sample carries exactly its position's id and that sample's label, a bad one
 * its id or a substitute's from the window after it; an error record comes
 * only with a bad sample, names its position's own sample and carries a
 * -errno; a publish's err bits stay inside the batch and its records name
 * positions it marks bad; a peer's heartbeat comes in order, within its
 * limits, never lending us more than it lends in all. A Python job's lend
 * request carries one request and a bounded spec for a ring that can be made,
 * its facts name an absolute command, its Python and its roots; its leases
 * carry exactly the slot's ids; its batches are at most the slot's bytes, with
 * a status a Python worker publishes and records naming indices marked bad,
 * and their container (_slot.py's header) is the lease's: one test per rule
 * (a failed batch carries a record; the header fits; total is the size; the
 * status's magic; the tree inside; the lease's batch; the lease's digest).
 * Version skew: a message of another build's layout (one from before the
 * layout stamps, an older smaller one, a future larger one, one of this size
 * but another layout number) and a lend request of another node protocol
 * version or size are refused as "another goldminer version", with both
 * builds' layouts, never read. Each refusal says the rule in words.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "../core/remote/check.h" /* the plugin's, not installed */
#include "goldminer/checksum.h"
#include "goldminer/limits.h"

/* A lease of 5 positions (ids 10..14) and 3 substitutes after the last (15..17);
 * the label of id i is i % 4. */
#define NB   5
#define NSUB 3
static const uint32_t ids[NB + NSUB] = {10, 11, 12, 13, 14, 15, 16, 17};
static const int32_t labels[NB + NSUB] = {2, 3, 0, 1, 2, 3, 0, 1};

static struct gm_remote_expect lease(enum gm_on_error oe)
{
	return (struct gm_remote_expect){
	    .id = ids, .label = labels, .nb = NB, .nsub = NSUB, .on_error = oe};
}

static struct m_sample sample(uint32_t pos, uint32_t id, int32_t label, uint32_t bad)
{
	return (struct m_sample){.pos = pos, .id = id, .label = label, .bad = bad};
}

static void test_status_only_what_the_jobs_workers_publish(void **state)
{
	(void)state;
	struct gm_remote_expect skip = lease(GM_ON_ERROR_SKIP), fail = lease(GM_ON_ERROR_FAIL);
	char why[200] = "";
	assert_true(gm_remote_check_status(&skip, 0, why, sizeof(why)));
	assert_true(gm_remote_check_status(&skip, -ENODATA, why, sizeof(why)));
	assert_true(gm_remote_check_status(&fail, 0, why, sizeof(why)));
	assert_true(gm_remote_check_status(&fail, -EBADMSG, why, sizeof(why)));
	const int32_t refused[] = {1, 2, -5, INT_MIN, INT_MAX, -EBADMSG};
	for (size_t k = 0; k < sizeof(refused) / sizeof(refused[0]); k++) {
		why[0] = '\0';
		assert_false(gm_remote_check_status(&skip, refused[k], why, sizeof(why)));
		assert_non_null(strstr(why, "is not one its job's workers publish"));
	}
	assert_false(gm_remote_check_status(&fail, -ENODATA, why, sizeof(why)));
	assert_non_null(strstr(why, "on_error=fail"));
	assert_false(gm_remote_check_status(&skip, 2, why, sizeof(why)));
	assert_non_null(strstr(why, "status 2 "));
}

static void test_good_sample_carries_its_positions_id_and_label(void **state)
{
	(void)state;
	struct gm_remote_expect e = lease(GM_ON_ERROR_SKIP);
	char why[200];
	for (uint32_t p = 0; p < NB; p++) {
		struct m_sample s = sample(p, ids[p], labels[p], 0);
		assert_true(gm_remote_check_sample(&e, &s, why, sizeof(why)));
	}
	struct m_sample s = sample(1, 12, labels[2], 0); /* the next position's sample */
	assert_false(gm_remote_check_sample(&e, &s, why, sizeof(why)));
	assert_non_null(strstr(why, "sample id 12 at position 1 is not its lease's (11)"));
	s = sample(4, 15, labels[5], 0); /* a substitute, but the sample is not bad */
	assert_false(gm_remote_check_sample(&e, &s, why, sizeof(why)));
	s = sample(1, 11, 999999, 0);
	assert_false(gm_remote_check_sample(&e, &s, why, sizeof(why)));
	assert_non_null(strstr(why, "label 999999 of sample 11 is not its label 3"));
	s = sample(NB, 15, labels[5], 0); /* past the batch */
	assert_false(gm_remote_check_sample(&e, &s, why, sizeof(why)));
	assert_non_null(strstr(why, "position 5 of a batch of 5"));
	s = sample(0, 10, labels[0], 2); /* bad is a flag */
	assert_false(gm_remote_check_sample(&e, &s, why, sizeof(why)));
}

static void test_bad_sample_may_carry_a_substitute_from_its_window(void **state)
{
	(void)state;
	struct gm_remote_expect e = lease(GM_ON_ERROR_SKIP);
	char why[200];
	/* position 2's window: itself (the batch failed on it), then 13, 14, 15 */
	for (uint32_t q = 2; q <= 2 + NSUB; q++) {
		struct m_sample s = sample(2, ids[q], labels[q], 1);
		assert_true(gm_remote_check_sample(&e, &s, why, sizeof(why)));
	}
	struct m_sample s = sample(2, 16, labels[6], 1); /* one past the window */
	assert_false(gm_remote_check_sample(&e, &s, why, sizeof(why)));
	assert_non_null(strstr(why, "or a substitute of it"));
	s = sample(2, 11, labels[1], 1); /* before it */
	assert_false(gm_remote_check_sample(&e, &s, why, sizeof(why)));
	s = sample(2, 14, labels[2], 1); /* the substitute with the bad one's label */
	assert_false(gm_remote_check_sample(&e, &s, why, sizeof(why)));
	assert_non_null(strstr(why, "label 0 of sample 14 is not its label 2"));
}

static void test_record_only_with_a_bad_sample_naming_its_position(void **state)
{
	(void)state;
	struct gm_remote_expect e = lease(GM_ON_ERROR_SKIP);
	char why[200];
	struct m_sample s = sample(3, 14, labels[4], 1);
	s.has_rec = 1;
	s.rec.sample = 13; /* the bad file at position 3 */
	s.rec.err = -EBADMSG;
	assert_true(gm_remote_check_sample(&e, &s, why, sizeof(why)));
	s.rec.err = 0; /* no error */
	assert_false(gm_remote_check_sample(&e, &s, why, sizeof(why)));
	assert_non_null(strstr(why, "with error 0 (not a -errno)"));
	s.rec.err = -4096;
	assert_false(gm_remote_check_sample(&e, &s, why, sizeof(why)));
	s.rec.err = -EIO;
	s.rec.sample = 12; /* another position's file */
	assert_false(gm_remote_check_sample(&e, &s, why, sizeof(why)));
	assert_non_null(strstr(why, "an error record for sample 12 with position 3"));
	s.rec.sample = 1000000; /* past the dataset */
	assert_false(gm_remote_check_sample(&e, &s, why, sizeof(why)));
	s = sample(3, 13, labels[3], 0); /* a good sample with a record */
	s.has_rec = 1;
	s.rec.sample = 13;
	assert_false(gm_remote_check_sample(&e, &s, why, sizeof(why)));
	assert_non_null(strstr(why, "(a good sample 13)"));
	s.has_rec = 2;
	s.bad = 1;
	assert_false(gm_remote_check_sample(&e, &s, why, sizeof(why)));
}

static void test_publish_records_name_positions_it_marks_bad(void **state)
{
	(void)state;
	struct gm_remote_expect e = lease(GM_ON_ERROR_SKIP);
	char why[200];
	uint64_t err[2] = {1u << 1 | 1u << 4, 0}; /* positions 1 and 4 bad */
	struct gm_slot_err recs[2] = {{.sample = 14, .err = -EIO}, {.sample = 11, .err = -EBADMSG}};
	assert_true(gm_remote_check_records(&e, err, 2, recs, 2, why, sizeof(why)));
	assert_true(gm_remote_check_records(&e, err, 2, recs, 0, why, sizeof(why)));
	recs[1].err = 5; /* not a -errno */
	assert_false(gm_remote_check_records(&e, err, 2, recs, 2, why, sizeof(why)));
	assert_non_null(strstr(why, "with error 5 (not a -errno)"));
	recs[1].err = -EIO;
	recs[1].sample = 12; /* in the lease, but not marked bad */
	assert_false(gm_remote_check_records(&e, err, 2, recs, 2, why, sizeof(why)));
	assert_non_null(strstr(why, "an error record for sample 12"));
	recs[1].sample = 15; /* a substitute, not a position */
	assert_false(gm_remote_check_records(&e, err, 2, recs, 2, why, sizeof(why)));
	recs[1].sample = 99; /* outside the lease */
	assert_false(gm_remote_check_records(&e, err, 2, recs, 2, why, sizeof(why)));
	recs[1].sample = UINT32_MAX; /* past any dataset */
	assert_false(gm_remote_check_records(&e, err, 2, recs, 2, why, sizeof(why)));
}

static void test_publish_err_bits_stay_inside_the_batch(void **state)
{
	(void)state;
	struct gm_remote_expect e = lease(GM_ON_ERROR_SKIP);
	char why[200];
	uint64_t err[2] = {1u << NB, 0}; /* position 5 of a batch of 5 */
	assert_false(gm_remote_check_records(&e, err, 2, NULL, 0, why, sizeof(why)));
	assert_non_null(strstr(why, "err bits past the batch's 5 positions"));
	err[0] = 0;
	err[1] = 1; /* position 64 */
	assert_false(gm_remote_check_records(&e, err, 2, NULL, 0, why, sizeof(why)));
	err[1] = 0;
	err[0] = (1u << NB) - 1; /* every position */
	assert_true(gm_remote_check_records(&e, err, 2, NULL, 0, why, sizeof(why)));
	/* a full word: a batch of 64 has no bit past it in its one word */
	uint32_t many[64 + NSUB] = {0};
	int32_t lab[64 + NSUB] = {0};
	struct gm_remote_expect e64 = {.id = many, .label = lab, .nb = 64, .nsub = NSUB};
	uint64_t all = UINT64_MAX;
	assert_true(gm_remote_check_records(&e64, &all, 1, NULL, 0, why, sizeof(why)));
}

static void test_heartbeat_in_order_within_limits(void **state)
{
	(void)state;
	char why[200] = "";
	struct m_beat b = {
	    .seq = 7, .mcores = 750, .slots = 1, .lent = 2, .for_you = 2, .rate = 640};
	assert_true(gm_remote_check_beat(&b, 0, why, sizeof(why)));
	assert_true(gm_remote_check_beat(&b, 6, why, sizeof(why)));
	assert_false(gm_remote_check_beat(&b, 7, why, sizeof(why))); /* again */
	assert_non_null(strstr(why, "a heartbeat numbered 7 after 7"));
	assert_false(gm_remote_check_beat(&b, 9, why, sizeof(why))); /* an old one */
	b.for_you = 3;
	assert_false(gm_remote_check_beat(&b, 0, why, sizeof(why)));
	assert_non_null(strstr(why, "3 of 2 lent workers for us"));
	b.for_you = 0;
	b.pad = 1;
	assert_false(gm_remote_check_beat(&b, 0, why, sizeof(why)));
	assert_non_null(strstr(why, "padding not zero"));
	b.pad = 0;
	b.seq = 0; /* the first is 1 */
	assert_false(gm_remote_check_beat(&b, 0, why, sizeof(why)));
	b.seq = 1;
	const struct m_beat over[] = {
	    {.seq = 1, .mcores = BEAT_MAX_MCORES + 1},
	    {.seq = 1, .slots = BEAT_MAX_WORKERS + 1},
	    {.seq = 1, .lent = BEAT_MAX_WORKERS + 1},
	    {.seq = 1, .rate = BEAT_MAX_RATE + 1},
	};
	for (size_t k = 0; k < sizeof(over) / sizeof(over[0]); k++) {
		why[0] = '\0';
		assert_false(gm_remote_check_beat(&over[k], 0, why, sizeof(why)));
		assert_non_null(strstr(why, "a heartbeat beyond the limits"));
	}
	b = (struct m_beat){.seq = 1,
			    .mcores = BEAT_MAX_MCORES,
			    .slots = BEAT_MAX_WORKERS,
			    .lent = BEAT_MAX_WORKERS,
			    .for_you = BEAT_MAX_WORKERS,
			    .rate = BEAT_MAX_RATE};
	assert_true(gm_remote_check_beat(&b, 0, why, sizeof(why))); /* at the limits */
}

/* A header of message id as a build whose struct has size bytes in layout
 * would send it (after its stamp): into hdr, its length back. */
static unsigned char hdr[sizeof(struct m_stamp) + sizeof(union m_any) + 64];
static size_t stamped_as(int id, uint16_t layout, uint32_t size)
{
	struct m_stamp st;
	gm_remote_msg_stamp(id, &st);
	st.layout = layout;
	st.size = size;
	memset(hdr, 0, sizeof(hdr));
	memcpy(hdr, &st, sizeof(st));
	return sizeof(st) + size;
}

/* ... as this build sends it. */
static size_t stamped(int id, size_t size)
{
	struct m_stamp st;
	gm_remote_msg_stamp(id, &st);
	assert_int_equal(st.size, size);
	return stamped_as(id, st.layout, st.size);
}

static bool msg_ok(int id, size_t hlen, size_t len, bool rndv, bool handshaken, char *why,
		   size_t wl)
{
	return gm_remote_check_msg(id, hdr, hlen, len, rndv, handshaken, why, wl);
}

static void test_message_table_knows_the_heartbeat(void **state)
{
	(void)state;
	char why[200];
	size_t h = stamped(AM_BEAT, sizeof(struct m_beat));
	assert_true(msg_ok(AM_BEAT, h, 0, false, true, why, sizeof(why)));
	assert_false(msg_ok(AM_BEAT, h, 8, false, true, why, sizeof(why))); /* no payload */
	assert_false(msg_ok(AM_BEAT, h - 1, 0, false, true, why, sizeof(why)));
	assert_false(msg_ok(AM_BEAT, h, 0, true, true, why, sizeof(why))); /* not by rendezvous */
	assert_false(
	    msg_ok(AM_BEAT, h, 0, false, false, why, sizeof(why))); /* not before the handshake */
}

/* A home's BYE: its header alone, after the handshake, not by rendezvous; its
 * words print as the worker logs them whatever bytes came (no NUL, control
 * bytes). */
static void test_message_table_knows_the_bye(void **state)
{
	(void)state;
	char why[200];
	size_t h = stamped(AM_BYE, sizeof(struct m_bye));
	assert_true(msg_ok(AM_BYE, h, 0, false, true, why, sizeof(why)));
	assert_false(msg_ok(AM_BYE, h, 1, false, true, why, sizeof(why))); /* no payload */
	assert_false(msg_ok(AM_BYE, h + 1, 0, false, true, why, sizeof(why)));
	assert_false(msg_ok(AM_BYE, h, 0, true, true, why, sizeof(why)));
	assert_false(msg_ok(AM_BYE, h, 0, false, false, why, sizeof(why)));
	struct m_bye b;
	memset(&b, 'z', sizeof(b));
	memcpy(b.why, "lease\n\x1b[2J", 10);
	char out[GM_BYE_WORDS];
	gm_remote_check_bye(&b, out);
	assert_int_equal(strlen(out), sizeof(b.why)); /* no NUL of its own: cut */
	assert_memory_equal(out, "lease??[2J", 10);
	memcpy(b.why, "its job ended", 14);
	gm_remote_check_bye(&b, out);
	assert_string_equal(out, "its job ended");
}

/* ---- version skew: two builds' layouts ---- */

static void test_message_of_a_build_before_the_stamps_is_another_version(void **state)
{
	(void)state;
	char why[300];
	/* what a build before the layout stamps sent: the struct alone */
	struct m_lend old = {.token = 0x1122334455667788ull, .workers = 2, .port = 7001};
	memset(hdr, 0, sizeof(hdr));
	memcpy(hdr, &old, sizeof(old));
	assert_false(msg_ok(AM_LEND, sizeof(old), sizeof(struct gm_node_req), false, true, why,
			    sizeof(why)));
	assert_non_null(strstr(why, "another goldminer version: message LEND"));
	assert_non_null(strstr(why, "run one goldminer version on every host"));
}

static void test_message_in_another_builds_layout_is_another_version(void **state)
{
	(void)state;
	char why[300], want[300];
	struct m_stamp st;
	gm_remote_msg_stamp(AM_LEND, &st);
	/* a future build whose LEND grew by 16 bytes (and bumped its layout) */
	size_t h = stamped_as(AM_LEND, (uint16_t)(st.layout + 1), st.size + 16);
	assert_false(msg_ok(AM_LEND, h, sizeof(struct gm_node_req), false, true, why, sizeof(why)));
	snprintf(want, sizeof(want),
		 "another goldminer version: message LEND in layout %u of %u bytes (this build's: "
		 "layout %u, %u bytes)",
		 (unsigned)st.layout + 1, st.size + 16, (unsigned)st.layout, st.size);
	assert_non_null(strstr(why, want));
	/* an older build whose BEAT was 8 bytes smaller, its layout not bumped */
	gm_remote_msg_stamp(AM_BEAT, &st);
	h = stamped_as(AM_BEAT, st.layout, st.size - 8);
	assert_false(msg_ok(AM_BEAT, h, 0, false, true, why, sizeof(why)));
	assert_non_null(strstr(why, "another goldminer version: message BEAT"));
	/* one of this size whose fields moved (its layout bumped, its size not) */
	h = stamped_as(AM_SAMPLE, 2, sizeof(struct m_sample));
	assert_false(msg_ok(AM_SAMPLE, h, 4, false, true, why, sizeof(why)));
	assert_non_null(strstr(why, "another goldminer version: message SAMPLE in layout 2"));
	/* a stamp that does not match its own header's length: malformed */
	h = stamped(AM_LEND, sizeof(struct m_lend));
	assert_false(msg_ok(AM_LEND, h + 4, 0, false, true, why, sizeof(why)));
	assert_non_null(strstr(why, "malformed message LEND"));
}

/* A request as a build of node protocol version ver with requests of size
 * bytes would send it: magic and version first, as in every version. */
static unsigned char other_req[sizeof(struct gm_node_req) + 64];
static size_t request_as(uint32_t ver, size_t size)
{
	struct gm_node_req req;
	gm_wire_request(&req, GM_NODE_ATTACH);
	strcpy(req.root, "/data/imagenet/train");
	memset(other_req, 0, sizeof(other_req));
	memcpy(other_req, &req, size < sizeof(req) ? size : sizeof(req));
	memcpy(other_req + 4, &ver, sizeof(ver));
	return size;
}

static void test_lend_request_of_another_version_is_refused_in_words(void **state)
{
	(void)state;
	char why[300], want[300];
	struct gm_node_req req;
	struct m_lend m = {.token = 42, .workers = 2, .port = 7001};
	size_t n = request_as(GM_NODE_VERSION, sizeof(req));
	assert_int_equal(gm_remote_check_lend(&m, other_req, n, &req, why, sizeof(why)), 0);
	assert_string_equal(req.root, "/data/imagenet/train");
	/* the previous version, 16 bytes smaller (gm_aug_spec before it grew) */
	n = request_as(GM_NODE_VERSION - 1, sizeof(req) - 16);
	assert_int_equal(gm_remote_check_lend(&m, other_req, n, &req, why, sizeof(why)),
			 -EPROTONOSUPPORT);
	snprintf(want, sizeof(want),
		 "another goldminer version: a job request of node protocol version %d in %zu "
		 "bytes (this build's: version %d, %zu bytes)",
		 GM_NODE_VERSION - 1, sizeof(req) - 16, GM_NODE_VERSION, sizeof(req));
	assert_string_equal(why, want);
	/* the previous version at this size: its fields would be read as garbage */
	n = request_as(GM_NODE_VERSION - 1, sizeof(req));
	assert_int_equal(gm_remote_check_lend(&m, other_req, n, &req, why, sizeof(why)),
			 -EPROTONOSUPPORT);
	/* a future build whose request grew without a version bump */
	n = request_as(GM_NODE_VERSION, sizeof(req) + 16);
	assert_int_equal(gm_remote_check_lend(&m, other_req, n, &req, why, sizeof(why)),
			 -EPROTONOSUPPORT);
	assert_non_null(strstr(why, "another goldminer version"));
	/* not a request at all: malformed, not a version */
	memset(other_req, 0, sizeof(req));
	assert_int_equal(gm_remote_check_lend(&m, other_req, sizeof(req), &req, why, sizeof(why)),
			 -EBADMSG);
	assert_null(strstr(why, "another goldminer version"));
}

static void test_python_lend_request_of_another_version_is_refused_in_words(void **state)
{
	(void)state;
	char why[300];
	struct gm_node_req req;
	struct m_pylend m = {.token = 1,
			     .workers = 2,
			     .lease_ms = 5000,
			     .port = 4000,
			     .rows = 18,
			     .sample_bytes = 4096,
			     .spec_len = 32};
	strcpy(m.gm, "1.0");
	/* the older request, then this build's spec: the request is 16 bytes short */
	size_t n = request_as(GM_NODE_VERSION - 1, sizeof(req) - 16);
	assert_int_equal(gm_remote_check_pylend(&m, other_req, n + 32, &req, why, sizeof(why)),
			 -EPROTONOSUPPORT);
	assert_non_null(strstr(why, "another goldminer version: a job request"));
	n = request_as(GM_NODE_VERSION, sizeof(req));
	assert_int_equal(gm_remote_check_pylend(&m, other_req, n + 32, &req, why, sizeof(why)), 0);
}

/* ---- Python jobs ---- */

/* A request whose root holds argv (NUL-separated, then an empty one), then
 * the facts (the same), into req. */
static void py_request(struct gm_node_req *req, const char *words, size_t len)
{
	memset(req, 0, sizeof(*req));
	memcpy(req->root, words, len);
}

static void test_python_lend_one_request_and_a_bounded_spec_or_its_name(void **state)
{
	(void)state;
	static unsigned char buf[sizeof(struct gm_node_req) + 64];
	struct gm_node_req req, r0;
	char why[200];
	struct m_pylend m = {.token = 1,
			     .workers = 2,
			     .lease_ms = 5000,
			     .port = 4000,
			     .rows = 18,
			     .sample_bytes = 4096,
			     .spec_len = 64};
	strcpy(m.gm, "1.0");
	memset(buf, 0, sizeof(buf));
	gm_wire_request(&r0, GM_NODE_CMDJOB);
	memcpy(buf, &r0, sizeof(r0));
	assert_int_equal(gm_remote_check_pylend(&m, buf, sizeof(buf), &req, why, sizeof(why)), 0);
	assert_true(gm_remote_check_pylend(&m, buf, 63, &req, why, sizeof(why)));
	assert_non_null(strstr(why, "spec of 64 bytes"));
	/* the spec named by its hash only: the request alone (a lender that does
	 * not hold it asks for it), never a part of the spec */
	assert_int_equal(gm_remote_check_pylend(&m, buf, sizeof(req), &req, why, sizeof(why)), 0);
	assert_int_not_equal(
	    gm_remote_check_pylend(&m, buf, sizeof(req) + 1, &req, why, sizeof(why)), 0);
	struct m_pylend none = m;
	none.spec_len = 0; /* workers asked for, no spec to name */
	assert_int_equal(gm_remote_check_pylend(&none, buf, sizeof(req), &req, why, sizeof(why)),
			 -EBADMSG);
	struct m_pylend big = m;
	big.spec_len = PY_SPEC_MAX + 1ull;
	assert_int_equal(gm_remote_check_pylend(&big, buf, sizeof(buf), &req, why, sizeof(why)),
			 -EBADMSG);
	struct m_pylend rows = m;
	rows.rows = GM_BIND_IDS_HDR; /* no room for an index */
	assert_int_equal(gm_remote_check_pylend(&rows, buf, sizeof(buf), &req, why, sizeof(why)),
			 -EBADMSG);
	assert_non_null(strstr(why, "rows"));
	struct m_pylend many = m;
	many.workers = GM_MAX_WORKERS + 1;
	assert_int_equal(gm_remote_check_pylend(&many, buf, sizeof(buf), &req, why, sizeof(why)),
			 -EBADMSG);
	struct m_pylend gm = m;
	memset(gm.gm, 'x', sizeof(gm.gm)); /* not NUL-terminated */
	assert_int_equal(gm_remote_check_pylend(&gm, buf, sizeof(buf), &req, why, sizeof(why)),
			 -EBADMSG);
	struct m_pylend end = m; /* the job ends there: a request, no spec */
	end.workers = 0;
	end.spec_len = 0;
	assert_int_equal(gm_remote_check_pylend(&end, buf, sizeof(req), &req, why, sizeof(why)), 0);
}

static void test_python_facts_name_command_python_and_roots(void **state)
{
	(void)state;
	struct gm_node_req req;
	struct gm_remote_py_facts f;
	char why[200];
	static const char ok[] = "/usr/bin/python3\0-c\0code\0\0py=3.11.2\0root=/data\0"
				 "root=/more\0";
	py_request(&req, ok, sizeof(ok));
	assert_int_equal(gm_remote_py_facts(req.root, sizeof(req.root), &f, why, sizeof(why)), 0);
	assert_int_equal(f.argc, 3);
	assert_string_equal(f.argv[0], "/usr/bin/python3");
	assert_string_equal(f.py, "3.11.2");
	assert_int_equal(f.nroots, 2);
	assert_string_equal(f.roots[1], "/more");
	static const char noroot[] = "/usr/bin/python3\0\0py=3.11.2\0";
	py_request(&req, noroot, sizeof(noroot));
	assert_int_equal(gm_remote_py_facts(req.root, sizeof(req.root), &f, why, sizeof(why)),
			 -ENOENT);
	static const char nothing[] = "/usr/bin/python3\0-c\0code\0"; /* an older trainer */
	py_request(&req, nothing, sizeof(nothing));
	assert_int_equal(gm_remote_py_facts(req.root, sizeof(req.root), &f, why, sizeof(why)),
			 -ENOENT);
	assert_non_null(strstr(why, "no dataset root"));
	static const char relative[] = "python3\0\0py=3\0root=/d\0";
	py_request(&req, relative, sizeof(relative));
	assert_int_equal(gm_remote_py_facts(req.root, sizeof(req.root), &f, why, sizeof(why)),
			 -EINVAL);
	static const char other[] = "/p\0\0py=3\0env=X\0";
	py_request(&req, other, sizeof(other));
	assert_int_equal(gm_remote_py_facts(req.root, sizeof(req.root), &f, why, sizeof(why)),
			 -EINVAL);
	static const char nopy[] = "/p\0\0root=/d\0";
	py_request(&req, nopy, sizeof(nopy));
	assert_int_equal(gm_remote_py_facts(req.root, sizeof(req.root), &f, why, sizeof(why)),
			 -EINVAL);
	memset(req.root, 'a', sizeof(req.root)); /* no NUL at all */
	req.root[0] = '/';
	assert_int_equal(gm_remote_py_facts(req.root, sizeof(req.root), &f, why, sizeof(why)),
			 -EINVAL);
}

static void test_python_lease_carries_exactly_the_slots_ids(void **state)
{
	(void)state;
	struct m_lease l = {.status = 0, .nb = 16};
	assert_true(gm_remote_check_pylease(&l, (16 + GM_BIND_IDS_HDR) * 4, 18));
	assert_false(gm_remote_check_pylease(&l, 16 * 4, 18)); /* no epoch, batch */
	assert_false(gm_remote_check_pylease(&l, (16 + GM_BIND_IDS_HDR) * 4, 17)); /* > rows */
	l.nb = 0;
	assert_false(gm_remote_check_pylease(&l, GM_BIND_IDS_HDR * 4, 18));
	struct m_lease none = {.status = -EAGAIN};
	assert_true(gm_remote_check_pylease(&none, 0, 18));
	assert_false(gm_remote_check_pylease(&none, 4, 18));
	struct m_lease odd = {.status = 1, .nb = 1};
	assert_false(gm_remote_check_pylease(&odd, (1 + GM_BIND_IDS_HDR) * 4, 18));
}

static void test_python_batch_within_the_slot_and_its_records(void **state)
{
	(void)state;
	static const uint32_t idx[3] = {7, 8, 9};
	uint64_t d[1 + sizeof(struct gm_slot_err) / 8 + 8];
	struct gm_slot_err *rec = (struct gm_slot_err *)(d + 1);
	char why[300];
	memset(d, 0, sizeof(d));
	struct m_batch b = {.nb = 3, .words = 1, .size = 64};
	size_t len = 8 + 64;
	assert_true(gm_remote_check_batch(&b, idx, 3, 1, 1024, len, d, why, sizeof(why)));
	assert_false(gm_remote_check_batch(&b, idx, 3, 1, 32, len, d, why, sizeof(why)));
	assert_non_null(strstr(why, "32 bytes")); /* more than the slot holds */
	assert_false(gm_remote_check_batch(&b, idx, 3, 1, 1024, len + 1, d, why, sizeof(why)));
	assert_false(gm_remote_check_batch(&b, idx, 2, 1, 1024, len, d, why, sizeof(why)));
	struct m_batch st = b;
	st.status = 1; /* END_OF_EPOCH: never */
	assert_false(gm_remote_check_batch(&st, idx, 3, 1, 1024, len, d, why, sizeof(why)));
	assert_non_null(strstr(why, "status 1"));
	st.status = -EMSGSIZE;
	st.size = 8;
	assert_true(gm_remote_check_batch(&st, idx, 3, 1, 1024, 16, d, why, sizeof(why)));
	struct m_batch small = b;
	small.size = 4; /* no room for its own size */
	assert_false(gm_remote_check_batch(&small, idx, 3, 1, 1024, 12, d, why, sizeof(why)));
	/* a record names an index of a position marked bad */
	struct m_batch bad = b;
	bad.status = -EBADMSG;
	bad.n_recs = 1;
	size_t blen = 8 + sizeof(*rec) + 64;
	d[0] = 1u << 1;
	rec->sample = 8;
	rec->err = -EIO;
	assert_true(gm_remote_check_batch(&bad, idx, 3, 1, 1024, blen, d, why, sizeof(why)));
	rec->sample = 9; /* position 2 is not marked bad */
	assert_false(gm_remote_check_batch(&bad, idx, 3, 1, 1024, blen, d, why, sizeof(why)));
	rec->sample = 8;
	d[0] = 1u << 3; /* an err bit past the batch */
	assert_false(gm_remote_check_batch(&bad, idx, 3, 1, 1024, blen, d, why, sizeof(why)));
	struct m_batch tail = b;
	tail.tail = 2; /* records before (0) or after (1) the payload, nothing else */
	assert_false(gm_remote_check_batch(&tail, idx, 3, 1, 1024, len, d, why, sizeof(why)));
	struct m_batch many = bad;
	many.n_recs = GM_RING_MAX_ERRS + 1;
	assert_false(gm_remote_check_batch(&many, idx, 3, 1, 1024, blen, d, why, sizeof(why)));
}

/* A Python batch's container (_slot.py's header) for the lease of batch 7 of
 * epoch 3, indices 20, 21, 22, in a slot of 4096 bytes: total and size 256. */
static const uint32_t pyids[GM_BIND_IDS_HDR + 3] = {3, 7, 20, 21, 22};
#define PY_CAP 4096

static struct m_batch pybatch(int32_t status, uint32_t n_recs)
{
	return (struct m_batch){
	    .nb = 3, .words = 1, .status = status, .n_recs = n_recs, .size = 256};
}

static void pyhead(unsigned char *h, uint64_t total, uint64_t tree, const char *magic)
{
	uint64_t digest = gm_checksum64(GM_CHECKSUM_INIT, pyids, sizeof(pyids));
	memset(h, 0, GM_REMOTE_PY_HDR);
	memcpy(h, &total, 8);
	memcpy(h + 8, &tree, 8);
	memcpy(h + 16, magic, 8);
	memcpy(h + 24, &pyids[0], 4);
	memcpy(h + 28, &pyids[1], 4);
	memcpy(h + 32, &digest, 8);
}

static bool pyslot(const struct m_batch *b, const unsigned char *h, char *why)
{
	return gm_remote_check_pyslot(b, h, pyids, PY_CAP, why, 300);
}

static void test_python_container_of_its_lease_passes(void **state)
{
	(void)state;
	unsigned char h[GM_REMOTE_PY_HDR];
	char why[300];
	struct m_batch ok = pybatch(0, 0), failed = pybatch(-EBADMSG, 1),
		       big = pybatch(-EMSGSIZE, 0);
	pyhead(h, 256, 100, "GMPYSLOT");
	assert_true(pyslot(&ok, h, why));
	pyhead(h, 256, 192, "GMPYFAIL"); /* the pickled exception, to its last byte */
	assert_true(pyslot(&failed, h, why));
	failed.status = -ENODATA; /* on_error=skip, no substitute left */
	assert_true(pyslot(&failed, h, why));
	big.size = 8; /* -EMSGSIZE: the bytes it needs, nothing else */
	uint64_t need = PY_CAP + 1;
	memcpy(h, &need, 8);
	assert_true(pyslot(&big, h, why));
	/* the digest is gm_checksum64's over the ids as u32 little-endian: the
	 * value goldminer.checksum computes in Python over the same words */
	assert_int_equal(gm_checksum64(GM_CHECKSUM_INIT, pyids, sizeof(pyids)),
			 0x1199257a80e5eae4ull);
}

static void test_python_failed_batch_without_a_record_is_refused(void **state)
{
	(void)state;
	unsigned char h[GM_REMOTE_PY_HDR];
	char why[300];
	pyhead(h, 256, 100, "GMPYFAIL");
	for (int k = 0; k < 2; k++) {
		struct m_batch b = pybatch(k ? -ENODATA : -EBADMSG, 0);
		assert_false(pyslot(&b, h, why));
		assert_non_null(strstr(why, "rule record: a failed batch"));
		assert_non_null(strstr(why, "without an error record"));
	}
	struct m_batch fine = pybatch(0, 0); /* a complete batch needs none */
	pyhead(h, 256, 100, "GMPYSLOT");
	assert_true(pyslot(&fine, h, why));
}

static void test_python_container_fits_its_payload(void **state)
{
	(void)state;
	unsigned char h[GM_REMOTE_PY_HDR];
	char why[300];
	struct m_batch b = pybatch(0, 0), big = pybatch(-EMSGSIZE, 0);
	b.size = GM_REMOTE_PY_HDR - 1;
	pyhead(h, b.size, 0, "GMPYSLOT");
	assert_false(pyslot(&b, h, why));
	assert_non_null(strstr(why, "rule size: a container of 63 bytes"));
	big.size = 16; /* -EMSGSIZE carries its size alone */
	uint64_t need = PY_CAP + 1;
	memcpy(h, &need, 8);
	assert_false(pyslot(&big, h, why));
	assert_non_null(strstr(why, "rule size:"));
}

static void test_python_container_total_is_its_size(void **state)
{
	(void)state;
	unsigned char h[GM_REMOTE_PY_HDR];
	char why[300];
	struct m_batch b = pybatch(0, 0), big = pybatch(-EMSGSIZE, 0);
	pyhead(h, 320, 100, "GMPYSLOT");
	assert_false(pyslot(&b, h, why));
	assert_non_null(strstr(why, "rule total: a container whose total 320 is not its 256"));
	pyhead(h, 255, 100, "GMPYSLOT");
	assert_false(pyslot(&b, h, why));
	big.size = 8; /* a batch "too big" for a slot it fits */
	uint64_t need = PY_CAP;
	memcpy(h, &need, 8);
	assert_false(pyslot(&big, h, why));
	assert_non_null(strstr(why, "rule total: a batch too big for the slot of 4096"));
}

static void test_python_container_magic_of_its_status(void **state)
{
	(void)state;
	unsigned char h[GM_REMOTE_PY_HDR];
	char why[300];
	struct m_batch ok = pybatch(0, 0), failed = pybatch(-EBADMSG, 1);
	pyhead(h, 256, 100, "GMPYSLOt");
	assert_false(pyslot(&ok, h, why));
	assert_non_null(strstr(why, "rule magic: a container whose magic \"GMPYSLOt\""));
	pyhead(h, 256, 100, "GMPYFAIL"); /* a failure's container for a complete batch */
	assert_false(pyslot(&ok, h, why));
	pyhead(h, 256, 100, "GMPYSLOT"); /* and a batch's for a failure */
	assert_false(pyslot(&failed, h, why));
	assert_non_null(strstr(why, "is not GMPYFAIL"));
	pyhead(h, 256, 100, "GM\nY\1LOT"); /* printed as this side prints a peer's words */
	assert_false(pyslot(&ok, h, why));
	assert_non_null(strstr(why, "\"GM?Y?LOT\""));
}

static void test_python_container_tree_inside_it(void **state)
{
	(void)state;
	unsigned char h[GM_REMOTE_PY_HDR];
	char why[300];
	struct m_batch b = pybatch(0, 0);
	pyhead(h, 256, 256 - GM_REMOTE_PY_HDR, "GMPYSLOT"); /* to the last byte */
	assert_true(pyslot(&b, h, why));
	pyhead(h, 256, 256 - GM_REMOTE_PY_HDR + 1, "GMPYSLOT");
	assert_false(pyslot(&b, h, why));
	assert_non_null(strstr(why, "rule tree: a container whose tree of 193 bytes ends past"));
	pyhead(h, 256, UINT64_MAX, "GMPYSLOT"); /* 64 + tree wraps: still past */
	assert_false(pyslot(&b, h, why));
	assert_non_null(strstr(why, "rule tree:"));
}

static void test_python_container_of_the_leases_batch(void **state)
{
	(void)state;
	unsigned char h[GM_REMOTE_PY_HDR];
	char why[300];
	struct m_batch b = pybatch(0, 0);
	uint32_t other = 8;
	pyhead(h, 256, 100, "GMPYSLOT");
	memcpy(h + 28, &other, 4); /* the next batch */
	assert_false(pyslot(&b, h, why));
	assert_non_null(strstr(why, "rule batch: a container of batch 8 of epoch 3 for the lease "
				    "of batch 7 of epoch 3"));
	pyhead(h, 256, 100, "GMPYSLOT");
	other = 4; /* the same batch of the next epoch */
	memcpy(h + 24, &other, 4);
	assert_false(pyslot(&b, h, why));
	assert_non_null(strstr(why, "rule batch:"));
}

static void test_python_container_digest_of_the_leases_samples(void **state)
{
	(void)state;
	unsigned char h[GM_REMOTE_PY_HDR];
	char why[300];
	struct m_batch b = pybatch(0, 0);
	/* batch 7 of epoch 3 of another job (another seed: other samples) */
	static const uint32_t theirs[GM_BIND_IDS_HDR + 3] = {3, 7, 20, 22, 21};
	uint64_t digest = gm_checksum64(GM_CHECKSUM_INIT, theirs, sizeof(theirs));
	pyhead(h, 256, 100, "GMPYSLOT");
	memcpy(h + 32, &digest, 8);
	assert_false(pyslot(&b, h, why));
	assert_non_null(strstr(why, "rule lease: a container whose lease digest"));
	assert_non_null(strstr(why, "(another job's, or other samples)"));
}

static void test_message_table_knows_the_python_messages(void **state)
{
	(void)state;
	char why[200];
	size_t pl = stamped(AM_PYLEND, sizeof(struct m_pylend));
	assert_true(msg_ok(AM_PYLEND, pl, 100, false, true, why, sizeof(why)));
	assert_false(
	    msg_ok(AM_PYLEND, pl, 100, true, true, why, sizeof(why))); /* a lend never so */
	assert_false(msg_ok(AM_PYLEND, pl, 0, false, false, why,
			    sizeof(why))); /* not before the handshake */
	size_t b = stamped(AM_BATCH, sizeof(struct m_batch));
	assert_true(msg_ok(AM_BATCH, b, 100, false, true, why, sizeof(why)));
	assert_true(msg_ok(AM_BATCH, b, 100, true, true, why,
			   sizeof(why))); /* by rendezvous: straight into the slot */
	assert_false(msg_ok(AM_BATCH, b + 1, 0, false, true, why, sizeof(why)));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_status_only_what_the_jobs_workers_publish),
	    cmocka_unit_test(test_good_sample_carries_its_positions_id_and_label),
	    cmocka_unit_test(test_bad_sample_may_carry_a_substitute_from_its_window),
	    cmocka_unit_test(test_record_only_with_a_bad_sample_naming_its_position),
	    cmocka_unit_test(test_publish_records_name_positions_it_marks_bad),
	    cmocka_unit_test(test_publish_err_bits_stay_inside_the_batch),
	    cmocka_unit_test(test_heartbeat_in_order_within_limits),
	    cmocka_unit_test(test_message_table_knows_the_heartbeat),
	    cmocka_unit_test(test_message_table_knows_the_bye),
	    cmocka_unit_test(test_message_of_a_build_before_the_stamps_is_another_version),
	    cmocka_unit_test(test_message_in_another_builds_layout_is_another_version),
	    cmocka_unit_test(test_lend_request_of_another_version_is_refused_in_words),
	    cmocka_unit_test(test_python_lend_request_of_another_version_is_refused_in_words),
	    cmocka_unit_test(test_python_lend_one_request_and_a_bounded_spec_or_its_name),
	    cmocka_unit_test(test_python_facts_name_command_python_and_roots),
	    cmocka_unit_test(test_python_lease_carries_exactly_the_slots_ids),
	    cmocka_unit_test(test_python_batch_within_the_slot_and_its_records),
	    cmocka_unit_test(test_python_container_of_its_lease_passes),
	    cmocka_unit_test(test_python_failed_batch_without_a_record_is_refused),
	    cmocka_unit_test(test_python_container_fits_its_payload),
	    cmocka_unit_test(test_python_container_total_is_its_size),
	    cmocka_unit_test(test_python_container_magic_of_its_status),
	    cmocka_unit_test(test_python_container_tree_inside_it),
	    cmocka_unit_test(test_python_container_of_the_leases_batch),
	    cmocka_unit_test(test_python_container_digest_of_the_leases_samples),
	    cmocka_unit_test(test_message_table_knows_the_python_messages),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
