/*
 * msg.h - the remote plugin's wire messages (core/remote/, remote.h): what node
 * agents and remote worker processes say to each other over UCX, in one place.
 *
 * The idea: every message is a UCX active message whose id is its type and whose
 * header is one fixed-size struct below, preceded by its layout stamp (struct
 * m_stamp); the receiver checks the stamp and the exact size, and that only
 * LEND, LEASE, SAMPLE, PUBLISH, PYLEND and BATCH carry a payload: check.c's
 * table, which conn.c applies. The structs are copied byte for byte, so both
 * ends must be the same build: HELLO carries MSG_MAGIC and MSG_VERSION (and so
 * does the TLS identity, tls.h) and an agent refuses any other version in
 * words. HELLO and WELCOME are the control port's (ctl.h): frames inside TLS
 * before any endpoint exists, never UCX messages (each then carries a UCX
 * worker address). The worker blob (struct wblob) is not a
 * message: it is what a lending agent hands the remote worker process it execs
 * (a memfd on its fd 3).
 *
 * Not here: sending and receiving (conn.c), and what each side does with a
 * message (home.c, lender.c, worker.c). No value here is checked here: each is
 * checked where it lands (conn.c the sizes; home.c with check.c every field a
 * remote worker sends, against what the home computed for its lease; worker.c
 * a lease; lender.c a lend request).
 */
#ifndef GM_REMOTE_MSG_H
#define GM_REMOTE_MSG_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include "auth.h"
#include "goldminer/ring.h"
#include "goldminer/wire.h"

#define MSG_MAGIC 0x4d524d47u /* "GMRM" */
/* 3: the control port (ctl.c), the lease checks (check.c); 4: BEAT; 5: a
 * remote worker claims its next lease while it makes one (home.c); PYLEND,
 * BATCH (Python jobs' workers on peers); 6: the control port speaks TLS 1.3
 * with per-pair keys (tls.h), HELLO and WELCOME inside it, CHALLENGE and AUTH
 * gone; every UCX message stamped with its layout; a PYLEND names its spec by
 * hash; 7: BYE (a home tells a remote worker it ends, and why) */
#define MSG_VERSION 7u
/* What a TLS session between two agents exports to both (tls.h): an id the
 * home knows the session by, and a secret only the two hold, from which each
 * remote worker's key is derived. */
#define SESSION_ID  8
#define SESSION_KEY 32

enum am_id {
	AM_HELLO = 1, /* client -> server (control port): role, token */
	AM_CHALLENGE, /* unused since version 6 (the TLS handshake's) */
	AM_AUTH,      /* unused since version 6 */
	AM_WELCOME,   /* server -> client (control port): status (0 or refusal) + words */
	AM_LEND,      /* home agent -> peer agent: workers for a job (+ its request) */
	AM_LENT,      /* peer agent -> home agent: how many it runs */
	AM_CLAIM,     /* remote worker -> home: a task, please (one ahead at most) */
	AM_LEASE,     /* home -> remote worker: the lease (+ done bits), or none */
	AM_SAMPLE,    /* remote worker -> home: one sample (+ its pixels) */
	AM_PUBLISH,   /* remote worker -> home: the batch is complete (+ err bits, records) */
	AM_BEAT,      /* agent -> agent, every BEAT_MS: alive, and what it can lend */
	AM_PYLEND,    /* home agent -> peer agent: Python workers for a job (+ request, spec) */
	AM_BATCH, /* remote Python worker -> home: a whole batch (+ err bits, records, payload) */
	AM_BYE,	  /* home -> remote worker: its connection ends now, and why */
	AM_N
};

enum role { ROLE_AGENT = 1, ROLE_WORKER = 2 };

/*
 * Version skew. Every struct that crosses the network after the handshake says
 * which layout it is in, so that a peer of another build is refused in words
 * ("another goldminer version: ...", naming it), never read as garbage:
 *  - each UCX message's header is preceded by a stamp: MSG_STAMP_MARK, the
 *    layout number of its message's row in check.c's table and the size of its
 *    struct in the sender's build (conn.c fills it from the table and the
 *    receiver checks it against the same table: gm_remote_check_msg);
 *  - the request a LEND or PYLEND carries (struct gm_node_req, the node
 *    protocol's, wire.h) carries its own magic and GM_NODE_VERSION, and its size
 *    is the payload's (LEND) or the payload's less spec_len (PYLEND): checked by
 *    the rule the agent's Unix socket applies (gm_wire_request_take);
 *  - the worker blob carries MSG_MAGIC, MSG_VERSION and its size (worker.c).
 * The rule for whoever changes a struct here (or struct gm_node_req, or a
 * struct they hold: gm_slot_err, gm_aug_spec): bump its row's layout in
 * check.c (GM_NODE_VERSION for the request). The size check catches a
 * forgotten bump only when the size changed; the layout number is for the
 * rest (a field that changes meaning or place). tests/test_remote_check.c
 * builds messages in other builds' layouts (older, and a future larger one).
 */
#define MSG_STAMP_MARK 0x4d4cu /* "LM" */
struct m_stamp {
	uint16_t mark;	 /* MSG_STAMP_MARK */
	uint16_t layout; /* its message's layout (check.c's table) */
	uint32_t size;	 /* the bytes of its header struct that follow */
};

/* The control port's two frames, inside TLS (ctl.h): the client's HELLO
 * (then its UCX worker address) and the server's WELCOME (then its own, when
 * the status is 0). Who the client is comes from its TLS identity, not from
 * here: a HELLO's role and token must agree with it. */
struct m_hello {
	uint32_t magic, version, role;
	uint32_t port;	/* an agent: its control port; a remote worker: its lender's */
	uint64_t token; /* worker: the job it serves */
};
struct m_welcome {
	int32_t status;
	char msg[252];
};
struct m_lend {
	uint64_t token, fingerprint, nsamples;
	uint32_t workers, bpe, lease_ms, port;
};
struct m_lent {
	uint64_t token;
	uint32_t granted;
	int32_t status;
	char msg[240];
};
struct m_claim {
	uint64_t pad;
};
struct m_lease {
	int32_t status; /* 0: a lease; -EAGAIN: none free now; -ENODATA: no more */
	uint32_t vpid, slot, nb;
	uint64_t task;
};
struct m_sample {
	uint64_t task;
	uint32_t vpid, pos, id, bad;
	int32_t label;
	uint32_t has_rec;	/* a bad sample: rec is its error record (the bad file's) */
	struct gm_slot_err rec; /* it lands with the sample, so a writer that dies before
				   its publish loses no record of what it delivered */
};
struct m_publish {
	uint64_t task;
	uint32_t vpid, nb;
	int32_t status;
	uint32_t n_recs, words, pad;
	uint64_t ns[4]; /* read, decode, augment, write */
	uint64_t read_bytes, preempt_ns;
};

/* A Python job's LEND (a binding's ring, bind.h): the lender checks that it
 * lends Python workers (--lend-python), that every root of the request's
 * facts lies below a --lend-root, and that the interpreter (the request's
 * first argument) reports python; gm is the home's goldminer version. The
 * payload is the request (its root: the command's arguments, an empty one,
 * then the facts "py=...", "root=..." and an empty one), then, only where
 * the lender asked for it, the spec_len bytes of spec (what the workers
 * load, their fd 5), whose SHA-256 is spec_hash. A PYLEND without it names
 * the spec: a lender that lends the job holds it already, and one that
 * would lend a new job answers PY_SPEC_WANTED (a LENT's status: not a
 * refusal), so the spec crosses the wire once per job and peer, and never
 * to a peer that refuses the job. rows and sample_bytes are the ring's (the
 * staging ring on the peer is made the same). */
#define PY_SPEC_MAX    (256u << 20) /* bytes of a spec a lender takes */
#define PY_SPEC_HASH   32	    /* SHA-256 */
#define PY_SPEC_WANTED (-ENOKEY)    /* "send the spec" */
struct m_pylend {
	uint64_t token;
	uint32_t workers, lease_ms, port, rows;
	uint64_t sample_bytes, spec_len;
	char gm[32];
	uint8_t spec_hash[PY_SPEC_HASH];
};
/* A Python batch, whole: the lease's task and vpid, its sample count, the
 * status a Python worker published (0, -EBADMSG, -ENODATA, -EMSGSIZE), its
 * payload's bytes (at most the slot's data bytes), its error records. The
 * payload of the message: words err words, n_recs records, then size bytes;
 * with tail 1 (a rendezvous BATCH, received straight into the slot) the size
 * bytes first, then the err words and records (in the slot's bytes after the
 * payload, which must hold them). */
struct m_batch {
	uint64_t task;
	uint32_t vpid, nb;
	int32_t status;
	uint32_t n_recs, words, tail;
	uint64_t size;
};

/* An agent's heartbeat, sent to every agent it is connected to every BEAT_MS
 * (agent.c): a peer not heard from for DOWN_MS is down. What it can lend is
 * in thousandths of a core (the cores its own jobs leave idle, whatever it
 * lends now) and in workers (its idle budget); rate is what one core of it
 * makes of its own jobs' images (0: not measured there). */
#define BEAT_MS 250
#define DOWN_MS 1000
/* A lender stops a home's lent workers once it has not heard the home for
 * QUIET_MS, not DOWN_MS (lender.c): a home on a CPU-starved host beats late
 * while its workers' own connections to it still deliver (seed 107's P1,
 * 0.15 core and four trainers: its two lenders took it for down 8-9 times a
 * run, each time killing its workers, started again 1.3 s later). A home that
 * is gone closes its connection, and its lent jobs end at once. */
#define QUIET_MS	 3000
#define BEAT_MAX_MCORES	 (4096u * 1000u)	/* a host of 4,096 cores */
#define BEAT_MAX_WORKERS (64u * 256u)		/* MAX_LJOBS x GM_MAX_WORKERS */
#define BEAT_MAX_RATE	 (100u * 1000u * 1000u) /* img/s of one core */
struct m_beat {
	uint64_t seq;	  /* from 1, larger in each beat on a connection */
	uint32_t mcores;  /* cores it can lend in all, x 1000 */
	uint32_t slots;	  /* workers it can lend in all */
	uint32_t lent;	  /* remote workers it runs now, for every home */
	uint32_t for_you; /* ... of them for the receiver's jobs */
	uint32_t rate;	  /* img/s per core (its own jobs' workers), 0: unknown */
	uint32_t pad;	  /* 0 */
};

/* A SAMPLE's and a BATCH's header as they go on the wire, after their stamp,
 * for the senders that keep a header until its send completes (worker.c,
 * pywork.c; every other message goes through conn.c, which stamps it). */
struct m_sample_out {
	struct m_stamp st;
	struct m_sample h;
};
struct m_batch_out {
	struct m_stamp st;
	struct m_batch h;
};
_Static_assert(offsetof(struct m_sample_out, h) == sizeof(struct m_stamp) &&
		   offsetof(struct m_batch_out, h) == sizeof(struct m_stamp),
	       "a header right after its stamp, as conn.c sends the others");

/* A home ends a remote worker's connection (its lease deadline passed, it held
 * the batch the trainer waited for, its job ended): it says so and why before
 * it closes the endpoint. A force close tells the worker nothing it would see
 * soon: seed 107's workers ended that way waited REPLY_MS (10 s) for the
 * answer to their next claim, holding a slot their lender could not give
 * again, while their job ran on its local workers alone. The words are
 * printable ASCII once they land (check.c, gm_remote_check_words). */
struct m_bye {
	char why[128];
};

/* The header of any message that comes over UCX: a received one is copied into
 * it, at its message's exact size (conn.c; the fuzzer as conn.c does), so the
 * handlers read it aligned. */
union m_any {
	struct m_lend lend;
	struct m_lent lent;
	struct m_claim claim;
	struct m_lease lease;
	struct m_sample sample;
	struct m_publish pub;
	struct m_beat beat;
	struct m_pylend pylend;
	struct m_batch batch;
	struct m_bye bye;
};

/* What a remote worker process is started with (a memfd on its fd 3): it execs
 * afresh (UCX's process-wide state does not survive a fork), indexes the dataset
 * itself and checks the fingerprint before it writes anything. */
struct wblob {
	uint32_t magic, version; /* MSG_MAGIC, MSG_VERSION */
	uint64_t size;		 /* sizeof(struct wblob) in the writer's build */
	uint64_t token, fingerprint, nsamples;
	uint32_t bpe, lease_ms;
	uint32_t lport;	    /* the lending agent's control port (its HELLO says it) */
	uint32_t unguarded; /* 1: the agent's --unguarded-ucx (the worker's UCX ports too) */
	char home_addr[300];
	/* the session between the lending agent and the home (tls.h) and the key
	 * this worker's own TLS handshake with the home uses, derived from that
	 * session's secret and the job: never the group secret */
	uint8_t sid[SESSION_ID];
	struct gm_auth_key key;
	struct gm_node_req req;
	/* a Python job's (AM_PYLEND): the ring's rows and sample bytes, and the
	 * bytes of the spec that follow this struct in the memfd (0: a C job) */
	uint32_t py, rows;
	/* the share of a core the worker may spend, in thousandths (its mirror
	 * ring's a_pace_milli: worker.c's pacing), 0: no bound */
	uint32_t pace_milli, pad;
	uint64_t sample_bytes, spec_len;
};

#endif
