/*
 * check.h - the rules every value a peer sends must meet before it lands
 * (check.c): the message table every message passes first (conn.c), then
 * each message's own (home.c a remote worker's SAMPLE, PUBLISH and the LENT of
 * a peer agent, lender.c a LEND, worker.c a LEASE, agent.c a peer's BEAT);
 * tests/test_remote_check.c tests them, tests/fuzz/fuzz_peermsg.c feeds them arbitrary messages.
 *
 * The idea: the home knows everything a lease may carry without asking the
 * writer. At the claim it computes, from the job's (seed, epoch, batch) and
 * the same permutation the workers use, the dataset id of every position of
 * the batch and of the substitutes after it, with each one's label in the
 * dataset (struct gm_remote_expect). A sample's id, label and error record, a
 * publish's status, error bits and error records are then compared with that:
 * a writer can deliver the batch the home would have made, or nothing. A
 * Python job's batch is opaque (the trainer's pickles) but for its container's
 * header, compared with the lease's ids[] the trainer wrote.
 *
 * Pure functions, no UCX, no I/O: each says true (the value may land) or false
 * with the rule it broke, in words, in why (the home logs it with the peer).
 * Not here: what the receiver does about a refusal (the connection ends; home.c
 * revokes the lease), and the checks against state only the receiver holds
 * (home.c: the lease's slot word and task; lender.c: --lend-root).
 */
#ifndef GM_REMOTE_CHECK_H
#define GM_REMOTE_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "goldminer/bind.h"
#include "goldminer/job.h"
#include "goldminer/wire.h"
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

/* The message table (conn.c, for every message that arrives over UCX): id
 * (1 .. AM_N-1), none of the handshake's (the control port's, ctl.h) nor
 * anything before the handshake ended (handshaken false); a header (hdr, hlen
 * bytes) that is this build's stamp of the message (msg.h: its mark, its
 * layout, its size) and then exactly its struct (else "another goldminer
 * version: ..." in why, the layouts of both builds); a payload only for LEND,
 * LEASE, SAMPLE, PUBLISH, PYLEND and BATCH, rendezvous only for a SAMPLE or a
 * BATCH. */
bool gm_remote_check_msg(int id, const void *hdr, size_t hlen, size_t len, bool rndv,
			 bool handshaken, char *why, size_t wl);

/* The stamp a message id (1 .. AM_N-1) is sent with: this build's row. */
void gm_remote_msg_stamp(int id, struct m_stamp *st);

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

/* A SAMPLE's payload is exactly one sample of the job's (sb bytes), then
 * gm_remote_check_sample. */
bool gm_remote_check_sample_msg(const struct gm_remote_expect *e, const struct m_sample *s,
				size_t len, uint64_t sb, char *why, size_t wl);

/* A PUBLISH of a lease whose batch has words err words: its sizes (its words,
 * nb and n_recs the lease's, the payload (data, len; 8-aligned) exactly the err
 * words and the records), then its status and records (above); a complete
 * batch (status 0) has every position done (ndone: the slot's done bits set),
 * a failed one an error record (its own, or one of slot_recs the slot holds). */
bool gm_remote_check_publish(const struct gm_remote_expect *e, const struct m_publish *p,
			     const void *data, size_t len, uint32_t words, uint32_t ndone,
			     uint32_t slot_recs, char *why, size_t wl);

/* A LEND for at most GM_MAX_WORKERS workers, with a port, whose payload is one
 * request of this build's (gm_wire_request_take: copied into *req, its root
 * NUL-terminated). 0; -EPROTONOSUPPORT, a request of another goldminer version
 * (the lender refuses the job in words); -EBADMSG, malformed (the connection
 * ends); why says which. (Its root is then matched against --lend-root:
 * lendroot.h.) */
int gm_remote_check_lend(const struct m_lend *m, const void *data, size_t len,
			 struct gm_node_req *req, char *why, size_t wl);

/* A peer's words (at most n bytes of src, up to a NUL) as this side prints them:
 * control bytes as '?', into dst (n + 1 bytes), NUL-terminated. */
void gm_remote_check_words(char *dst, const char *src, size_t n);

/* A BYE's words, printable (control bytes as '?'), into why: GM_BYE_WORDS bytes. */
#define GM_BYE_WORDS (sizeof(((struct m_bye *)0)->why) + 1)
void gm_remote_check_bye(const struct m_bye *m, char *why);

/* A LENT's words, printable (control bytes as '?'; msg holds sizeof(m->msg) + 1),
 * and the workers granted, at most GM_MAX_WORKERS. */
uint32_t gm_remote_check_lent(const struct m_lent *m, char *msg);

/* A BEAT from a peer agent whose last one was numbered last_seq (0: none yet):
 * numbered after it, each figure within its BEAT_MAX_* (msg.h), no more lent
 * to the receiver than lent in all, its padding zero. */
bool gm_remote_check_beat(const struct m_beat *b, uint64_t last_seq, char *why, size_t wl);

/* A LEASE a remote worker receives, for a job of batch samples per batch,
 * bpe batches per epoch and nsamples: none free now or no more (no payload),
 * or a lease of its task's batch size with the done words of one batch (len
 * at most cap, the receiver's buffer). */
bool gm_remote_check_lease(const struct m_lease *l, size_t len, uint32_t batch, uint32_t bpe,
			   uint64_t nsamples, size_t cap);

/* ---- Python jobs (a binding's ring, bind.h) ---- */

/* A PYLEND: workers 1..GM_MAX_WORKERS (0: the job ends there, with a request
 * and no spec), a port, a spec of 1..PY_SPEC_MAX bytes (spec_len) after
 * exactly one request of this build's, or that request alone (the spec named
 * by its hash) (gm_wire_request_take: copied into *req, its root
 * NUL-terminated), rows and sample_bytes of a ring that can be made, gm
 * NUL-terminated. 0, -EPROTONOSUPPORT or -EBADMSG with why, as a LEND's. */
int gm_remote_check_pylend(const struct m_pylend *m, const void *data, size_t len,
			   struct gm_node_req *req, char *why, size_t wl);

/* The words of a Python job's request root (size bytes): the command (1..
 * GM_NODE_CMD_ARGS arguments, the first absolute, then an empty one), then its
 * facts ("py=VERSION" once, "root=DIR" up to GM_REMOTE_PY_ROOTS times, then an
 * empty one). 0; -EINVAL (malformed), -ENOENT (no root: nothing a lender can
 * check) with why. The pointers point into root. Pure. */
#define GM_REMOTE_PY_ROOTS 8
struct gm_remote_py_facts {
	const char *argv[GM_NODE_CMD_ARGS + 1];
	int argc;
	const char *py;
	const char *roots[GM_REMOTE_PY_ROOTS];
	int nroots;
};
int gm_remote_py_facts(const char *root, size_t size, struct gm_remote_py_facts *f, char *why,
		       size_t wl);

/* A LEASE of a Python job a remote worker receives: none (no payload), or
 * 1..rows - GM_BIND_IDS_HDR samples with exactly the slot's ids[] (epoch,
 * batch, then the indices) as payload. */
bool gm_remote_check_pylease(const struct m_lease *l, size_t len, uint32_t rows);

/* A BATCH of a lease of nb samples (idx: their indices), words err words, a
 * slot of cap data bytes: its sizes (len exactly the err words, n_recs <=
 * GM_RING_MAX_ERRS records and size <= cap bytes), a status a Python worker
 * publishes (0, -EBADMSG, -ENODATA, -EMSGSIZE; 0 and -EMSGSIZE with >= 8
 * bytes: the payload holds its size), err bits inside the batch and records
 * naming the index of a position marked bad. data: the err words and
 * records, 8-aligned (where they were in the message: tail). */
bool gm_remote_check_batch(const struct m_batch *b, const uint32_t *idx, uint32_t nb,
			   uint32_t words, uint64_t cap, size_t len, const void *data, char *why,
			   size_t wl);

/* The container of a Python batch's payload (python/goldminer/_slot.py), which
 * the trainer unpickles: at offset 0 u64 total (its bytes; -EMSGSIZE: the bytes
 * it needs), 8 u64 tree (the pickle's bytes, from offset 64), 16 the magic
 * ("GMPYSLOT"; "GMPYFAIL" for a failed batch: the pickled exception), 24 u32
 * epoch and 28 u32 batch (the lease's ids[0] and ids[1]), 32 u64 lease (the
 * lease's digest: gm_checksum64 from GM_CHECKSUM_INIT over its ids[], epoch,
 * batch and the sample indices, u32 each, little-endian). */
#define GM_REMOTE_PY_HDR 64

/* A BATCH that gm_remote_check_batch passed, against what the home holds for
 * its lease: ids (the slot's ids[]: epoch, batch, then b->nb indices, as the
 * trainer wrote them) and cap (the slot's data bytes); head: the payload's
 * first min(b->size, GM_REMOTE_PY_HDR) bytes. Its rules, each a row of
 * check.c's table: a failed status (-EBADMSG, -ENODATA) comes with an error
 * record; the container fits the payload (>= 64 bytes; -EMSGSIZE: its 8
 * bytes); total == size (-EMSGSIZE: more than cap); the magic of its status;
 * 64 + tree <= size; the lease's epoch and batch; the lease's digest. false
 * with the rule's name and the values in why. */
bool gm_remote_check_pyslot(const struct m_batch *b, const void *head, const uint32_t *ids,
			    uint64_t cap, char *why, size_t wl);

#endif
