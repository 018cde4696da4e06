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
 * a status a Python worker publishes and records naming indices marked bad.
 * Each refusal says the rule in words.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <string.h>

#include "../core/remote/check.h" /* the plugin's, not installed */
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

static void test_message_table_knows_the_heartbeat(void **state)
{
	(void)state;
	char why[200];
	assert_true(
	    gm_remote_check_msg(AM_BEAT, sizeof(struct m_beat), 0, false, true, why, sizeof(why)));
	assert_false(gm_remote_check_msg(AM_BEAT, sizeof(struct m_beat), 8, false, true, why,
					 sizeof(why))); /* no payload */
	assert_false(gm_remote_check_msg(AM_BEAT, sizeof(struct m_beat) - 1, 0, false, true, why,
					 sizeof(why)));
	assert_false(gm_remote_check_msg(AM_BEAT, sizeof(struct m_beat), 0, true, true, why,
					 sizeof(why))); /* not by rendezvous */
	assert_false(gm_remote_check_msg(AM_BEAT, sizeof(struct m_beat), 0, false, false, why,
					 sizeof(why))); /* not before the handshake */
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
	struct gm_node_req req;
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
	assert_true(gm_remote_check_pylend(&m, buf, sizeof(buf), &req, why, sizeof(why)));
	assert_false(gm_remote_check_pylend(&m, buf, sizeof(buf) - 1, &req, why, sizeof(why)));
	assert_non_null(strstr(why, "spec of 64 bytes"));
	/* the spec named by its hash only: the request alone (a lender that does
	 * not hold it asks for it), never a part of the spec */
	assert_true(gm_remote_check_pylend(&m, buf, sizeof(req), &req, why, sizeof(why)));
	assert_false(gm_remote_check_pylend(&m, buf, sizeof(req) + 1, &req, why, sizeof(why)));
	struct m_pylend none = m;
	none.spec_len = 0; /* workers asked for, no spec to name */
	assert_false(gm_remote_check_pylend(&none, buf, sizeof(req), &req, why, sizeof(why)));
	struct m_pylend big = m;
	big.spec_len = PY_SPEC_MAX + 1ull;
	assert_false(gm_remote_check_pylend(&big, buf, sizeof(buf), &req, why, sizeof(why)));
	struct m_pylend rows = m;
	rows.rows = GM_BIND_IDS_HDR; /* no room for an index */
	assert_false(gm_remote_check_pylend(&rows, buf, sizeof(buf), &req, why, sizeof(why)));
	assert_non_null(strstr(why, "rows"));
	struct m_pylend many = m;
	many.workers = GM_MAX_WORKERS + 1;
	assert_false(gm_remote_check_pylend(&many, buf, sizeof(buf), &req, why, sizeof(why)));
	struct m_pylend gm = m;
	memset(gm.gm, 'x', sizeof(gm.gm)); /* not NUL-terminated */
	assert_false(gm_remote_check_pylend(&gm, buf, sizeof(buf), &req, why, sizeof(why)));
	struct m_pylend end = m; /* the job ends there: a request, no spec */
	end.workers = 0;
	end.spec_len = 0;
	assert_true(gm_remote_check_pylend(&end, buf, sizeof(req), &req, why, sizeof(why)));
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

static void test_message_table_knows_the_python_messages(void **state)
{
	(void)state;
	char why[200];
	assert_true(gm_remote_check_msg(AM_PYLEND, sizeof(struct m_pylend), 100, false, true, why,
					sizeof(why)));
	assert_true(gm_remote_check_msg(AM_BATCH, sizeof(struct m_batch), 100, false, true, why,
					sizeof(why)));
	assert_true(gm_remote_check_msg(AM_BATCH, sizeof(struct m_batch), 100, true, true, why,
					sizeof(why))); /* by rendezvous: straight into the slot */
	assert_false(gm_remote_check_msg(AM_PYLEND, sizeof(struct m_pylend), 100, true, true, why,
					 sizeof(why))); /* a lend never so */
	assert_false(gm_remote_check_msg(AM_BATCH, sizeof(struct m_batch) + 1, 0, false, true, why,
					 sizeof(why)));
	assert_false(gm_remote_check_msg(AM_PYLEND, sizeof(struct m_pylend), 0, false, false, why,
					 sizeof(why))); /* not before the handshake */
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
	    cmocka_unit_test(test_python_lend_one_request_and_a_bounded_spec_or_its_name),
	    cmocka_unit_test(test_python_facts_name_command_python_and_roots),
	    cmocka_unit_test(test_python_lease_carries_exactly_the_slots_ids),
	    cmocka_unit_test(test_python_batch_within_the_slot_and_its_records),
	    cmocka_unit_test(test_message_table_knows_the_python_messages),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
