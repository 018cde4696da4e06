/*
 * remote.c - data workers on other hosts over UCX active messages (remote.h).
 *
 * One struct gm_remote per agent: a UCP context and worker (single thread: the
 * agent's loop), a listener, a table of connections and the jobs on both sides:
 * home jobs (attached here; remote workers write into their rings) and lent jobs
 * (a peer's jobs whose workers run here). Remote worker processes are forked
 * from the agent and make their own UCP context after the fork (worker_main).
 *
 * Messages are UCX active messages with a fixed-size header per type (checked
 * for exact size) and, for LEND, SAMPLE, LEASE and PUBLISH, a payload. All are
 * sent eager: the receiver gets each whole message inside its handler and copies
 * a sample into the slot there, after checking the lease, so nothing of a
 * message outlives its handler and a revoked lease leaves nothing in flight
 * (UCX's rendezvous would let the NIC write into the slot without a copy; it
 * needs a lease to outlive its messages and is left for a later change).
 * Nothing here is a transport of our own: framing, wire-up, retransmission and
 * peer-failure detection are UCX's.
 */

#include "goldminer/remote.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <netdb.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <ucp/api/ucp.h>

#include "remote/auth.h"
#include "goldminer/dataset.h"
#include "goldminer/limits.h"
#include "goldminer/loader.h"
#include "goldminer/node.h"
#include "goldminer/pool.h"
#include "goldminer/ring.h"
#include "goldminer/version.h"
#include "goldminer/wire.h"
#include "goldminer/worker.h"

#define MAX_CONNS    256
#define MAX_PEERS    16
#define MAX_HJOBS    64
#define MAX_LJOBS    64
#define CONN_QUEUE   32
#define AUTH_MS	     5000 /* a connection must prove the secret within this */
#define RETRY_MS     2000 /* reconnect to a peer, ask again for workers */
#define REPLY_MS     10000
#define NONE_WAIT_MS 4		 /* a remote worker asks again this soon when no task is free */
#define MSG_MAGIC    0x4d524d47u /* "GMRM" */
#define MSG_VERSION  2u
#define SERVER_ROLE  "goldminer-remote server"
#define CLIENT_ROLE  "goldminer-remote client"

enum am_id {
	AM_HELLO = 1, /* client -> server: nonce, role, token */
	AM_CHALLENGE, /* server -> client: nonce, proof */
	AM_AUTH,      /* client -> server: proof */
	AM_WELCOME,   /* server -> client: status (0 or refusal) + words */
	AM_LEND,      /* home agent -> peer agent: workers for a job (+ its request) */
	AM_LENT,      /* peer agent -> home agent: how many it runs */
	AM_CLAIM,     /* remote worker -> home: a task, please */
	AM_LEASE,     /* home -> remote worker: the lease (+ done bits), or none */
	AM_SAMPLE,    /* remote worker -> home: one sample (+ its pixels) */
	AM_PUBLISH,   /* remote worker -> home: the batch is complete (+ err bits, records) */
	AM_N
};

enum role { ROLE_AGENT = 1, ROLE_WORKER = 2 };

struct m_hello {
	uint32_t magic, version, role, pad;
	uint64_t token; /* worker: the job it serves */
	uint8_t nonce[GM_AUTH_NONCE];
};
struct m_challenge {
	uint8_t nonce[GM_AUTH_NONCE], proof[GM_AUTH_PROOF];
};
struct m_auth {
	uint8_t proof[GM_AUTH_PROOF];
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

enum cstate { C_NEW, C_HELLO, C_CHALLENGED, C_OK, C_DEAD };

struct conn {
	ucp_ep_h ep;
	enum cstate st;
	bool outgoing; /* we connected (to a peer agent, or a worker to its home) */
	int role;      /* the other side's, once it said HELLO */
	uint8_t mine[GM_AUTH_NONCE], theirs[GM_AUTH_NONCE];
	char ip[INET6_ADDRSTRLEN];
	int64_t since_ms;
	char why[256]; /* why it died */
	int peer;      /* index in peers[] for an outgoing agent connection, else -1 */
	/* a remote worker's connection at its home */
	uint64_t token;
	struct hjob *job;
	uint32_t vpid, slot, nb; /* the lease it holds (vpid 0: none) */
	uint64_t task;
	int64_t lease_ms;	 /* last progress on the lease */
	uint64_t samples;	 /* delivered in the current tick */
	unsigned inflight;	 /* samples still being received into the slot (rendezvous) */
	struct m_publish pub;	 /* a publish that came before its samples had landed */
	unsigned char *pub_data; /* ... its payload (malloc'd), NULL: none pending */
	size_t pub_len;
	bool claim_pending; /* a claim that came behind that publish */
};

struct peer {
	char addr[300]; /* host:port as given */
	struct conn *c;
	int64_t retry_ms;
	char last_err[256];
	double rate;	  /* img/s its workers delivered here over the last second */
	uint32_t workers; /* its workers connected here */
};

struct hjob {
	bool used;
	uint64_t token;
	struct gm_ring *ring;
	struct gm_node_req req;
	uint64_t fingerprint, nsamples, sb;
	uint32_t bpe, lease_ms, batch, words, want;
	uint32_t asked[MAX_PEERS], granted[MAX_PEERS];
	int64_t ask_ms[MAX_PEERS];
	uint64_t samples, bytes, revoked, fenced;
	uint64_t tick_samples;
	int64_t tick_ms;
	double rate, per_worker;
};

/* What a remote worker process is started with (a memfd on its fd 3): it execs
 * afresh (UCX's process-wide state does not survive a fork), indexes the dataset
 * itself and checks the fingerprint before it writes anything. */
struct wblob {
	uint32_t magic, version;
	uint64_t token, fingerprint, nsamples;
	uint32_t bpe, lease_ms;
	char home_addr[300];
	struct gm_auth_key key;
	struct gm_node_req req;
};

struct ljob {
	bool used;
	uint64_t token;
	struct conn *home; /* the home agent's connection to us */
	char home_addr[300];
	struct wblob blob;
	struct gm_dataset *ds;
	struct gm_pool_cfg pc;
	uint32_t target;
	pid_t pid[GM_MAX_WORKERS];
	uint32_t n;
	int64_t spawn_ms;
};

struct am_arg {
	struct gm_remote *r;
	int id;
};

struct gm_remote {
	ucp_context_h ctx;
	ucp_worker_h w;
	ucp_listener_h l;
	int efd;
	uint16_t port;
	struct gm_auth_key key;
	ucp_conn_request_h queue[CONN_QUEUE];
	unsigned nqueue;
	struct conn *conns[MAX_CONNS];
	struct peer peers[MAX_PEERS];
	int npeers;
	char allowed[MAX_PEERS * 4][INET6_ADDRSTRLEN]; /* peer addresses */
	int nallowed;
	struct hjob hjobs[MAX_HJOBS];
	struct ljob ljobs[MAX_LJOBS];
	uint32_t budget, lendable, next_vpid;
	char exe[4096];			   /* this program: remote workers are it, exec'ed afresh */
	char refused_ip[INET6_ADDRSTRLEN]; /* the last address refused, and when */
	int64_t refused_ms;
	int verbose;
	void (*log)(void *arg, const char *line);
	void *log_arg;
	struct am_arg am[AM_N];
	/* in a remote worker process: its one connection and current lease */
	bool is_worker;
	struct m_lease lease;
	bool lease_in;
	char welcome[256];
	/* aligned copies of a message's payload (done words; err words + records) */
	uint64_t scratch[GM_MAX_BATCH / 64];
	uint64_t
	    scratch2[GM_MAX_BATCH / 64 + GM_RING_MAX_ERRS * sizeof(struct gm_slot_err) / 8 + 1];
};

/* ---- small helpers ---------------------------------------------------------- */

static int64_t now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void logf_(struct gm_remote *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void logf_(struct gm_remote *r, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (r->log)
		r->log(r->log_arg, line);
	else if (r->verbose)
		fprintf(stderr, "goldminer remote: %s\n", line);
}

static int st_errno(ucs_status_t st)
{
	switch (st) {
	case UCS_OK:
		return 0;
	case UCS_ERR_NO_MEMORY:
		return -ENOMEM;
	case UCS_ERR_BUSY:
		return -EADDRINUSE;
	case UCS_ERR_UNREACHABLE:
		return -EHOSTUNREACH;
	case UCS_ERR_TIMED_OUT:
	case UCS_ERR_ENDPOINT_TIMEOUT:
		return -ETIMEDOUT;
	case UCS_ERR_INVALID_PARAM:
	case UCS_ERR_INVALID_ADDR:
		return -EINVAL;
	default:
		return UCS_IS_ENDPOINT_ERROR(st) || UCS_IS_LINK_ERROR(st) ? -ECONNRESET : -EIO;
	}
}

/* "host:port" -> a socket address (numeric ip into ip when not NULL). */
static int parse_addr(const char *s, struct sockaddr_storage *ss, socklen_t *sl, char *ip,
		      size_t iplen)
{
	char host[256];
	const char *colon = s ? strrchr(s, ':') : NULL;
	size_t hl = colon ? (size_t)(colon - s) : 0;
	if (!colon || !hl || hl >= sizeof(host) || !colon[1])
		return -EINVAL;
	memcpy(host, s, hl);
	host[hl] = '\0';
	if (host[0] == '[' && host[hl - 1] == ']') {
		memmove(host, host + 1, hl - 2);
		host[hl - 2] = '\0';
	}
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
	struct addrinfo *ai = NULL;
	if (getaddrinfo(host, colon + 1, &hints, &ai) || !ai)
		return -EINVAL;
	memcpy(ss, ai->ai_addr, ai->ai_addrlen);
	*sl = ai->ai_addrlen;
	freeaddrinfo(ai);
	if (ip &&
	    getnameinfo((struct sockaddr *)ss, *sl, ip, (socklen_t)iplen, NULL, 0, NI_NUMERICHOST))
		return -EINVAL;
	return 0;
}

/* ---- connections and sending -------------------------------------------------- */

/* dst = src, cut to len (no format: the cut is meant) */
static void copy_str(char *dst, size_t len, const char *src)
{
	size_t n = strnlen(src, len - 1);
	memcpy(dst, src, n);
	dst[n] = '\0';
}

static void ep_err_cb(void *arg, ucp_ep_h ep, ucs_status_t status)
{
	struct conn *c = arg;
	(void)ep;
	if (c->st != C_DEAD)
		snprintf(c->why, sizeof(c->why), "connection lost: %s", ucs_status_string(status));
	c->st = C_DEAD;
}

static struct conn *conn_new(struct gm_remote *r, bool outgoing, const char *ip)
{
	for (int i = 0; i < MAX_CONNS; i++) {
		if (r->conns[i])
			continue;
		struct conn *c = calloc(1, sizeof(*c));
		if (!c)
			return NULL;
		c->outgoing = outgoing;
		c->peer = -1;
		c->since_ms = now_ms();
		snprintf(c->ip, sizeof(c->ip), "%s", ip ? ip : "?");
		r->conns[i] = c;
		return c;
	}
	return NULL;
}

static struct conn *conn_of(struct gm_remote *r, ucp_ep_h ep)
{
	if (!ep)
		return NULL;
	for (int i = 0; i < MAX_CONNS; i++)
		if (r->conns[i] && r->conns[i]->ep == ep && r->conns[i]->st != C_DEAD)
			return r->conns[i];
	return NULL;
}

static void kill_conn(struct conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void kill_conn(struct conn *c, const char *fmt, ...)
{
	if (c->st == C_DEAD)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->why, sizeof(c->why), fmt, ap);
	va_end(ap);
	c->st = C_DEAD;
}

/* Close c's endpoint by force and wait (200 ms at most) until UCX has: from then
 * on nothing of this peer lands anywhere (its transfers into a slot included),
 * so its lease may be given to someone else. */
static void conn_close_ep(struct gm_remote *r, struct conn *c)
{
	if (!c->ep)
		return;
	ucp_request_param_t rp = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
				  .flags = UCP_EP_CLOSE_FLAG_FORCE};
	void *p = ucp_ep_close_nbx(c->ep, &rp);
	c->ep = NULL;
	if (!UCS_PTR_IS_PTR(p))
		return;
	int64_t end = now_ms() + 200;
	while (ucp_request_check_status(p) == UCS_INPROGRESS && now_ms() < end)
		ucp_worker_progress(r->w);
	ucp_request_free(p); /* (UCX completes it on its own if it has not) */
}

/* Close the endpoint by force (its messages stop being delivered) and free c. */
static void conn_free(struct gm_remote *r, struct conn *c)
{
	conn_close_ep(r, c);
	for (int i = 0; i < MAX_CONNS; i++)
		if (r->conns[i] == c)
			r->conns[i] = NULL;
	free(c->pub_data);
	free(c);
}

static void send_done(void *req, ucs_status_t st, void *user)
{
	(void)st;
	free(user);
	ucp_request_free(req);
}

/* Send an active message: header and payload are copied, so the caller's buffers
 * are free on return. 0 or -errno (the connection is then dead). */
static int send_msg(struct conn *c, int id, const void *hdr, size_t hlen, const void *data,
		    size_t dlen)
{
	if (c->st == C_DEAD || !c->ep)
		return -ECONNRESET;
	unsigned char *buf = malloc(hlen + dlen + 1);
	if (!buf) {
		kill_conn(c, "out of memory sending a message");
		return -ENOMEM;
	}
	memcpy(buf, hdr, hlen);
	if (dlen)
		memcpy(buf + hlen, data, dlen);
	ucp_request_param_t rp = {
	    .op_attr_mask =
		UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
	    .flags = UCP_AM_SEND_FLAG_REPLY | UCP_AM_SEND_FLAG_EAGER,
	    .cb.send = send_done,
	    .user_data = buf,
	};
	void *p = ucp_am_send_nbx(c->ep, (unsigned)id, buf, hlen, buf + hlen, dlen, &rp);
	if (p == NULL) {
		free(buf);
		return 0;
	}
	if (UCS_PTR_IS_ERR(p)) {
		free(buf);
		kill_conn(c, "send failed: %s", ucs_status_string(UCS_PTR_STATUS(p)));
		return st_errno(UCS_PTR_STATUS(p));
	}
	return 0; /* send_done frees buf */
}

static int connect_to(struct gm_remote *r, const char *addr, struct conn **out)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	char ip[INET6_ADDRSTRLEN];
	*out = NULL;
	if (parse_addr(addr, &ss, &sl, ip, sizeof(ip)))
		return -EINVAL;
	struct conn *c = conn_new(r, true, ip);
	if (!c)
		return -EMFILE;
	ucp_ep_params_t p = {
	    .field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
			  UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER,
	    .flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER,
	    .sockaddr = {.addr = (const struct sockaddr *)&ss, .addrlen = sl},
	    .err_mode = UCP_ERR_HANDLING_MODE_PEER,
	    .err_handler = {.cb = ep_err_cb, .arg = c},
	};
	ucs_status_t st = ucp_ep_create(r->w, &p, &c->ep);
	if (st != UCS_OK) {
		c->ep = NULL;
		conn_free(r, c);
		return st_errno(st);
	}
	*out = c;
	return 0;
}

/* Start the handshake on an outgoing connection (role: what we are). */
static int say_hello(struct conn *c, int role, uint64_t token)
{
	struct m_hello h = {
	    .magic = MSG_MAGIC, .version = MSG_VERSION, .role = (uint32_t)role, .token = token};
	if (gm_auth_nonce(c->mine))
		return -EIO;
	memcpy(h.nonce, c->mine, sizeof(h.nonce));
	c->st = C_HELLO;
	return send_msg(c, AM_HELLO, &h, sizeof(h), NULL, 0);
}

/* ---- the handshake -------------------------------------------------------------- */

static void on_hello(struct gm_remote *r, struct conn *c, const struct m_hello *h)
{
	struct m_challenge ch;
	if (!c->outgoing && c->st == C_NEW && h->magic == MSG_MAGIC && h->version != MSG_VERSION) {
		kill_conn(c,
			  "refused %s: it speaks the remote protocol version %u, this agent %u "
			  "(goldminer %s): run the same goldminer on every host",
			  c->ip, h->version, MSG_VERSION, gm_version());
		return;
	}
	if (c->outgoing || c->st != C_NEW || h->magic != MSG_MAGIC ||
	    (h->role != ROLE_AGENT && h->role != ROLE_WORKER)) {
		kill_conn(c, "refused %s: not a goldminer %s peer (bad hello)", c->ip,
			  gm_version());
		return;
	}
	c->role = (int)h->role;
	c->token = h->token;
	memcpy(c->theirs, h->nonce, sizeof(c->theirs));
	if (gm_auth_nonce(c->mine) ||
	    gm_auth_proof(&r->key, SERVER_ROLE, c->theirs, c->mine, ch.proof)) {
		kill_conn(c, "no randomness for a nonce");
		return;
	}
	memcpy(ch.nonce, c->mine, sizeof(ch.nonce));
	c->st = C_CHALLENGED;
	send_msg(c, AM_CHALLENGE, &ch, sizeof(ch), NULL, 0);
}

static void on_challenge(struct gm_remote *r, struct conn *c, const struct m_challenge *ch)
{
	struct m_auth a;
	if (!c->outgoing || c->st != C_HELLO) {
		kill_conn(c, "%s: unexpected challenge", c->ip);
		return;
	}
	if (!gm_auth_verify(&r->key, SERVER_ROLE, c->mine, ch->nonce, ch->proof)) {
		kill_conn(c,
			  "%s does not know the secret (its proof is wrong): check --secret on "
			  "both hosts",
			  c->ip);
		return;
	}
	memcpy(c->theirs, ch->nonce, sizeof(c->theirs));
	if (gm_auth_proof(&r->key, CLIENT_ROLE, c->theirs, c->mine, a.proof)) {
		kill_conn(c, "cannot compute a proof");
		return;
	}
	c->st = C_CHALLENGED;
	send_msg(c, AM_AUTH, &a, sizeof(a), NULL, 0);
}

static struct hjob *hjob_of(struct gm_remote *r, uint64_t token);

static void on_auth(struct gm_remote *r, struct conn *c, const struct m_auth *a)
{
	struct m_welcome wm = {0};
	if (c->outgoing || c->st != C_CHALLENGED) {
		kill_conn(c, "%s: unexpected auth", c->ip);
		return;
	}
	if (!gm_auth_verify(&r->key, CLIENT_ROLE, c->mine, c->theirs, a->proof)) {
		wm.status = -EACCES;
		snprintf(wm.msg, sizeof(wm.msg), "refused: wrong secret");
		send_msg(c, AM_WELCOME, &wm, sizeof(wm), NULL, 0);
		ucp_worker_progress(r->w); /* let the refusal leave (best effort) */
		kill_conn(c, "refused %s: it does not know the secret", c->ip);
		return;
	}
	if (c->role == ROLE_WORKER) {
		c->job = hjob_of(r, c->token);
		if (!c->job) {
			wm.status = -ENOENT;
			snprintf(wm.msg, sizeof(wm.msg), "no such job here (it ended)");
		}
	}
	send_msg(c, AM_WELCOME, &wm, sizeof(wm), NULL, 0);
	if (wm.status) {
		kill_conn(c, "worker at %s: %s", c->ip, wm.msg);
		return;
	}
	c->st = C_OK;
	logf_(r, "%s at %s authenticated", c->role == ROLE_AGENT ? "agent" : "remote worker",
	      c->ip);
}

static void on_welcome(struct gm_remote *r, struct conn *c, const struct m_welcome *wm)
{
	if (!c->outgoing || c->st != C_CHALLENGED) {
		kill_conn(c, "%s: unexpected welcome", c->ip);
		return;
	}
	if (wm->status) {
		kill_conn(c, "%s %.*s", c->ip, (int)sizeof(wm->msg), wm->msg);
		copy_str(r->welcome, sizeof(r->welcome), c->why);
		return;
	}
	c->st = C_OK;
}

/* ---- home side: leases for remote workers --------------------------------------- */

static struct hjob *hjob_of(struct gm_remote *r, uint64_t token)
{
	for (int i = 0; i < MAX_HJOBS; i++)
		if (r->hjobs[i].used && r->hjobs[i].token == token)
			return &r->hjobs[i];
	return NULL;
}

/* The slot's lease is still c's (the ring's state word says so). */
static bool lease_held(const struct conn *c, uint32_t vpid, uint64_t task)
{
	if (!c->job || !c->vpid || c->vpid != vpid || c->task != task)
		return false;
	struct gm_slot_ctl *ctl = gm_ring_ctl(c->job->ring, c->slot);
	/* pairs with the CAS of gm_ring_claim / gm_ring_reclaim */
	return atomic_load_explicit(&ctl->state, memory_order_acquire) ==
		   GM_SLOT_WORD(GM_SLOT_CLAIMED, vpid) &&
	       atomic_load_explicit(&ctl->task, memory_order_relaxed) == task;
}

/* Take c's lease back: the batch is made again by whoever claims it next. */
static void revoke_lease(struct gm_remote *r, struct conn *c, const char *why)
{
	if (!c->vpid || !c->job)
		return;
	struct hjob *j = c->job;
	uint32_t n = gm_ring_reclaim(j->ring, c->vpid, NULL);
	atomic_fetch_add(&gm_ring_hdr(j->ring)->p_reissued, n);
	j->revoked++;
	logf_(r, "remote worker at %s: %s; its batch %" PRIu64 " is made again", c->ip, why,
	      c->task % j->bpe);
	c->vpid = 0;
}

static uint32_t next_vpid(struct gm_remote *r)
{
	if (r->next_vpid < GM_REMOTE_VPID_MIN || r->next_vpid >= 0xffffffu)
		r->next_vpid = GM_REMOTE_VPID_MIN;
	return r->next_vpid++;
}

static void on_claim(struct gm_remote *r, struct conn *c)
{
	struct hjob *j = c->job;
	struct m_lease l = {0};
	uint64_t words[GM_MAX_BATCH / 64];
	size_t dlen = 0;

	if (c->role != ROLE_WORKER || !j) {
		kill_conn(c, "%s: a claim from a connection that is not a remote worker", c->ip);
		return;
	}
	if (c->vpid && c->pub_data) { /* its publish waits for its last samples: then */
		c->claim_pending = true;
		return;
	}
	if (c->vpid) { /* a worker holds one lease at a time */
		revoke_lease(r, c, "claimed again while holding a lease (protocol error)");
		kill_conn(c, "protocol error");
		return;
	}
	uint32_t vpid = next_vpid(r);
	uint64_t task;
	int slot = gm_ring_claim(j->ring, vpid, &task);
	if (slot < 0) {
		l.status = slot == -EAGAIN ? -EAGAIN : -ENODATA;
	} else {
		uint64_t first = (task % j->bpe) * j->batch;
		uint32_t nb =
		    (uint32_t)(j->nsamples - first < j->batch ? j->nsamples - first : j->batch);
		gm_ring_begin_task(j->ring, (uint32_t)slot, task, nb);
		_Atomic uint64_t *done = gm_ring_done_bits(j->ring, (uint32_t)slot);
		for (uint32_t q = 0; q < j->words; q++)
			words[q] = atomic_load_explicit(&done[q], memory_order_acquire);
		dlen = j->words * sizeof(uint64_t);
		c->vpid = vpid;
		c->slot = (uint32_t)slot;
		c->task = task;
		c->nb = nb;
		c->lease_ms = now_ms();
		l = (struct m_lease){.vpid = vpid, .slot = (uint32_t)slot, .nb = nb, .task = task};
	}
	send_msg(c, AM_LEASE, &l, sizeof(l), words, dlen);
}

/* Error records (a published batch's, or a sample's), merged once per sample into the
 * slot's. */
static void merge_recs(struct gm_slot_ctl *ctl, const struct gm_slot_err *e, uint32_t n)
{
	for (uint32_t k = 0; k < n; k++) {
		bool seen = false;
		for (uint32_t q = 0; q < ctl->n_recs && !seen; q++)
			seen = ctl->errs[q].sample == e[k].sample;
		if (!seen && ctl->n_recs < GM_RING_MAX_ERRS) {
			ctl->errs[ctl->n_recs] = e[k];
			ctl->errs[ctl->n_recs].msg[GM_RING_MSG - 1] = '\0';
			ctl->n_recs++;
		}
	}
}

/* A sample's bytes are in the slot: its label, id and done bit (the lease was
 * checked when it came, and is checked again: it may have been taken back). */
static void sample_landed(struct hjob *j, struct conn *c, uint32_t slot, const struct m_sample *s)
{
	gm_ring_labels(j->ring, slot)[s->pos] = s->label;
	gm_ring_ids(j->ring, slot)[s->pos] = s->id;
	if (s->bad)
		atomic_fetch_or_explicit(&gm_ring_err_bits(j->ring, slot)[s->pos / 64],
					 1ull << (s->pos % 64), memory_order_relaxed);
	if (s->bad && s->has_rec && s->rec.sample < j->nsamples)
		merge_recs(gm_ring_ctl(j->ring, slot), &s->rec, 1);
	/* pairs with the acquire loads of whoever resumes or publishes the task */
	atomic_fetch_or_explicit(&gm_ring_done_bits(j->ring, slot)[s->pos / 64],
				 1ull << (s->pos % 64), memory_order_release);
	c->lease_ms = now_ms();
	c->samples++;
	j->samples++;
	j->tick_samples++;
	j->bytes += j->sb;
}

/* A rendezvous receive in flight: what it is for (its connection may be gone
 * when it completes, so it names the job and the lease, not the connection). */
struct rx {
	struct gm_remote *r;
	uint64_t token;
	struct m_sample s;
};

static void publish_now(struct gm_remote *r, struct conn *c, const struct m_publish *p,
			const void *data, size_t len);
static void on_claim(struct gm_remote *r, struct conn *c);

static void rx_done(void *req, ucs_status_t st, size_t length, void *user)
{
	struct rx *x = user;
	struct gm_remote *r = x->r;
	struct hjob *j = hjob_of(r, x->token);
	struct conn *c = NULL;
	for (int i = 0; j && i < MAX_CONNS && !c; i++)
		if (r->conns[i] && r->conns[i]->job == j && r->conns[i]->vpid == x->s.vpid)
			c = r->conns[i];
	if (c) {
		c->inflight--;
		if (st == UCS_OK && length == j->sb && lease_held(c, x->s.vpid, x->s.task))
			sample_landed(j, c, c->slot, &x->s);
		else if (st != UCS_OK)
			kill_conn(c, "%s: a sample's transfer failed: %s", c->ip,
				  ucs_status_string(st));
		if (!c->inflight && c->pub_data && c->st != C_DEAD) {
			unsigned char *d = c->pub_data;
			c->pub_data = NULL;
			publish_now(r, c, &c->pub, d, c->pub_len);
			free(d);
			if (c->claim_pending && c->st != C_DEAD) {
				c->claim_pending = false;
				on_claim(r, c);
			}
		}
	}
	if (req)
		ucp_request_free(req);
	free(x);
}

/* A sample: checked against the lease before any byte of it lands. Eager ones
 * are copied now; rendezvous ones are received straight into the slot (no copy
 * of ours; UCX's zero-copy where the transport has it). */
static void on_sample(struct gm_remote *r, struct conn *c, const struct m_sample *s, void *data,
		      size_t len, bool rndv)
{
	struct hjob *j = c->job;
	if (c->role != ROLE_WORKER || !j) {
		kill_conn(c, "%s: a sample from a connection that is not a remote worker", c->ip);
		return;
	}
	if (!lease_held(c, s->vpid, s->task)) {
		j->fenced++; /* a lease taken back: its writer is fenced */
		return;
	}
	if (s->pos >= c->nb || len != j->sb || s->id >= j->nsamples) {
		revoke_lease(r, c, "sent a sample outside its lease (refused)");
		kill_conn(c, "%s: sample outside its lease", c->ip);
		return;
	}
	uint8_t *dst = (uint8_t *)gm_ring_data(j->ring, c->slot) + (uint64_t)s->pos * j->sb;
	if (!rndv) {
		memcpy(dst, data, len);
		sample_landed(j, c, c->slot, s);
		return;
	}
	struct rx *x = malloc(sizeof(*x));
	if (!x) {
		kill_conn(c, "out of memory receiving a sample");
		return;
	}
	*x = (struct rx){.r = r, .token = j->token, .s = *s};
	ucp_request_param_t rp = {.op_attr_mask =
				      UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
				  .cb.recv_am = rx_done,
				  .user_data = x};
	c->inflight++;
	void *p = ucp_am_recv_data_nbx(r->w, data, dst, len, &rp);
	if (UCS_PTR_IS_ERR(p)) {
		c->inflight--;
		kill_conn(c, "%s: receiving a sample: %s", c->ip,
			  ucs_status_string(UCS_PTR_STATUS(p)));
		free(x);
	} else if (p == NULL) {
		rx_done(NULL, UCS_OK, len, x); /* landed already */
	}
}

static void on_publish(struct gm_remote *r, struct conn *c, const struct m_publish *p,
		       const void *data, size_t len)
{
	struct hjob *j = c->job;
	if (c->role != ROLE_WORKER || !j) {
		kill_conn(c, "%s: a publish from a connection that is not a remote worker", c->ip);
		return;
	}
	if (!lease_held(c, p->vpid, p->task)) {
		j->fenced++;
		return;
	}
	if (c->inflight) { /* its last samples are still landing: publish after them */
		free(c->pub_data);
		c->pub_data = malloc(len ? len : 1);
		if (!c->pub_data) {
			kill_conn(c, "out of memory");
			return;
		}
		memcpy(c->pub_data, data, len);
		c->pub_len = len;
		c->pub = *p;
		return;
	}
	publish_now(r, c, p, data, len);
}

static void publish_now(struct gm_remote *r, struct conn *c, const struct m_publish *p,
			const void *data, size_t len)
{
	struct hjob *j = c->job;
	if (!j || !lease_held(c, p->vpid, p->task))
		return;
	size_t need = (size_t)j->words * 8 + (size_t)p->n_recs * sizeof(struct gm_slot_err);
	if (p->words != j->words || p->n_recs > GM_RING_MAX_ERRS || len != need || p->nb != c->nb) {
		revoke_lease(r, c, "sent a malformed publish (refused)");
		kill_conn(c, "%s: malformed publish", c->ip);
		return;
	}
	struct gm_slot_ctl *ctl = gm_ring_ctl(j->ring, c->slot);
	_Atomic uint64_t *done = gm_ring_done_bits(j->ring, c->slot);
	_Atomic uint64_t *err = gm_ring_err_bits(j->ring, c->slot);
	const uint64_t *ew = data;
	uint32_t ndone = 0, nerr = 0;
	for (uint32_t q = 0; q < j->words; q++) {
		uint64_t e = atomic_fetch_or_explicit(&err[q], ew[q], memory_order_relaxed) | ew[q];
		nerr += (uint32_t)__builtin_popcountll(e);
		ndone += (uint32_t)__builtin_popcountll(
		    atomic_load_explicit(&done[q], memory_order_acquire));
	}
	if (p->status == 0 && ndone != c->nb) {
		revoke_lease(r, c, "published a batch with samples missing (refused)");
		kill_conn(c, "%s: incomplete publish", c->ip);
		return;
	}
	merge_recs(ctl, (const struct gm_slot_err *)(ew + j->words), p->n_recs);
	ctl->n_errors = nerr;
	ctl->status = p->status;
	ctl->read_ns += p->ns[0];
	ctl->decode_ns += p->ns[1];
	ctl->augment_ns += p->ns[2];
	ctl->write_ns += p->ns[3];
	ctl->read_bytes += p->read_bytes;
	ctl->preempt_ns += p->preempt_ns;
	c->vpid = 0;
	gm_ring_publish(j->ring, c->slot);
	(void)r;
}

/* ---- home side: asking peers for workers ---------------------------------------- */

static void ask_peer(struct gm_remote *r, struct hjob *j, int p, uint32_t n)
{
	struct m_lend m = {.token = j->token,
			   .fingerprint = j->fingerprint,
			   .nsamples = j->nsamples,
			   .workers = n,
			   .bpe = j->bpe,
			   .lease_ms = j->lease_ms,
			   .port = r->port};
	if (send_msg(r->peers[p].c, AM_LEND, &m, sizeof(m), &j->req, sizeof(j->req)) == 0) {
		j->asked[p] = n;
		j->ask_ms[p] = now_ms();
	}
}

/* Spread the job's wish over the connected peers, in --peers order; ask again
 * every RETRY_MS while a peer gives less than asked (its idle CPUs change). */
static void lend_tick(struct gm_remote *r, struct hjob *j, int64_t now)
{
	uint32_t left = j->want;
	for (int p = 0; p < r->npeers; p++) {
		struct conn *c = r->peers[p].c;
		if (!c || c->st != C_OK) {
			j->granted[p] = 0;
			j->asked[p] = 0;
			continue;
		}
		uint32_t n = left;
		bool changed = n != j->asked[p];
		bool short_ = j->granted[p] < j->asked[p] && now - j->ask_ms[p] >= RETRY_MS;
		if (changed || short_)
			ask_peer(r, j, p, n);
		uint32_t g = j->granted[p] < n ? j->granted[p] : n;
		left -= g;
	}
}

static void on_lent(struct gm_remote *r, struct conn *c, const struct m_lent *m)
{
	struct hjob *j = hjob_of(r, m->token);
	if (c->peer < 0 || !j)
		return; /* an answer about a job that has ended */
	if (m->status)
		logf_(r, "peer %s lends no workers: %.*s", r->peers[c->peer].addr,
		      (int)sizeof(m->msg), m->msg);
	else if (m->granted != j->granted[c->peer])
		logf_(r, "peer %s runs %u remote workers for job %016" PRIx64,
		      r->peers[c->peer].addr, m->granted, j->token);
	j->granted[c->peer] = m->status ? 0 : m->granted;
}

/* ---- peer side: lent jobs and their worker processes ------------------------- */

static uint32_t lent_total(const struct gm_remote *r)
{
	uint32_t n = 0;
	for (int i = 0; i < MAX_LJOBS; i++)
		if (r->ljobs[i].used)
			n += r->ljobs[i].n;
	return n;
}

static pid_t retired[GM_MAX_WORKERS * 4];
static unsigned nretired;

/* Reap the retired and killed workers that have exited (no zombies). */
static void reap_retired(void)
{
	for (unsigned k = 0; k < nretired;) {
		pid_t pid = waitpid(retired[k], NULL, WNOHANG);
		if (pid == retired[k] || (pid < 0 && errno == ECHILD))
			retired[k] = retired[--nretired];
		else
			k++;
	}
}

static void forget(pid_t pid)
{
	if (nretired < sizeof(retired) / sizeof(retired[0]))
		retired[nretired++] = pid;
}

static void retire_one(struct ljob *l)
{
	if (!l->n)
		return;
	l->n--;
	kill(l->pid[l->n], SIGUSR1); /* finishes its batch, then exits; reaped later */
	forget(l->pid[l->n]);
	l->pid[l->n] = 0;
}

static void ljob_end(struct ljob *l)
{
	for (uint32_t i = 0; i < l->n; i++) {
		kill(l->pid[i], SIGKILL);
		forget(l->pid[i]);
	}
	l->n = 0;
	gm_dataset_close(l->ds);
	memset(l, 0, sizeof(*l));
}

static void spawn(struct gm_remote *r, struct ljob *l)
{
	int fd = memfd_create("goldminer-remote-worker", MFD_CLOEXEC);
	if (fd < 0 || pwrite(fd, &l->blob, sizeof(l->blob), 0) != (ssize_t)sizeof(l->blob)) {
		logf_(r, "cannot start a remote worker: memfd: %s", strerror(errno));
		if (fd >= 0)
			close(fd);
		return;
	}
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* survives the exec */
		if (getppid() != parent || dup2(fd, 3) != 3)
			_exit(127);
		close_range(4, ~0u, 0); /* not the agent's sockets */
		(void)setpriority(PRIO_PROCESS, 0, GM_NODE_LENT_NICE);
		char *argv[] = {"goldminer", "node", "--remote-worker", "3", NULL};
		execv(r->exe, argv);
		_exit(127);
	}
	close(fd);
	if (pid > 0)
		l->pid[l->n++] = pid;
	else
		logf_(r, "fork of a remote worker failed: %s", strerror(errno));
}

/* Reap exited workers; keep each lent job at its target within what may be lent. */
static void ljobs_tick(struct gm_remote *r, int64_t now)
{
	reap_retired();
	/* only our own children: the pools' workers are reaped by their pidfds */
	for (int i = 0; i < MAX_LJOBS; i++) {
		struct ljob *l = &r->ljobs[i];
		for (uint32_t k = 0; l->used && k < l->n;) {
			int st;
			pid_t pid = waitpid(l->pid[k], &st, WNOHANG);
			if (pid != l->pid[k] && !(pid < 0 && errno == ECHILD)) {
				k++;
				continue;
			}
			if (pid > 0 && (!WIFEXITED(st) || WEXITSTATUS(st)))
				logf_(r,
				      "remote worker %d for job %016" PRIx64 " ended (status %#x)",
				      (int)l->pid[k], l->token, st);
			else if (pid > 0 && l->target) /* no task left: not started again */
				l->target--;
			l->pid[k] = l->pid[--l->n];
		}
	}
	uint32_t total = lent_total(r);
	for (int i = 0; i < MAX_LJOBS; i++) {
		struct ljob *l = &r->ljobs[i];
		if (!l->used)
			continue;
		if (!l->home || l->home->st == C_DEAD) {
			logf_(r,
			      "job %016" PRIx64 ": its home agent is gone; its remote workers stop",
			      l->token);
			ljob_end(l);
			continue;
		}
		while (l->n > l->target || (total > r->lendable && l->n)) {
			retire_one(l);
			total--;
		}
		/* (re)spawn at most every 200 ms: a worker that cannot start must not spin */
		if (l->n < l->target && total < r->lendable && now - l->spawn_ms >= 200) {
			while (l->n < l->target && total < r->lendable) {
				uint32_t before = l->n;
				spawn(r, l);
				if (l->n == before)
					break;
				total++;
			}
			l->spawn_ms = now;
		}
	}
}

static struct ljob *ljob_for(struct gm_remote *r, struct conn *c, uint64_t token, bool make)
{
	struct ljob *free_ = NULL;
	for (int i = 0; i < MAX_LJOBS; i++) {
		struct ljob *l = &r->ljobs[i];
		if (l->used && l->home == c && l->token == token)
			return l;
		if (!l->used && !free_)
			free_ = l;
	}
	return make ? free_ : NULL;
}

/* The job's worker configuration from a blob: the same dataset path here, its
 * fingerprint equal to the home's. 0 or -errno with why. */
static int job_cfg(struct ljob *l, const struct wblob *b, char *why, size_t wl)
{
	struct gm_loader_opts o;
	struct gm_node_req req = b->req;
	uint64_t first, end;
	uint32_t bpe;
	char e[768];
	req.root[sizeof(req.root) - 1] = '\0';
	gm_wire_request_opts(&req, &o);
	int rc = gm_pool_check(&o, e, sizeof(e));
	if (!rc)
		rc = gm_dataset_open(&l->ds, o.root, e, sizeof(e));
	if (rc) {
		copy_str(why, wl, e);
		return rc;
	}
	if (gm_dataset_fingerprint(l->ds) != b->fingerprint ||
	    gm_dataset_count(l->ds) != b->nsamples) {
		snprintf(why, wl,
			 "the dataset at %.80s differs on this host (fingerprint %016" PRIx64
			 ", %u samples; the job's: %016" PRIx64 ", %" PRIu64 "): every host needs "
			 "the same files at the same path",
			 o.root, gm_dataset_fingerprint(l->ds), gm_dataset_count(l->ds),
			 b->fingerprint, b->nsamples);
		rc = -ESTALE;
	} else {
		rc = gm_pool_tasks(&o, l->ds, &bpe, &first, &end, e, sizeof(e));
		if (rc || bpe != b->bpe) {
			copy_str(why, wl, rc ? e : "the job's batches differ here");
			rc = rc ? rc : -ESTALE;
		}
	}
	if (rc) {
		gm_dataset_close(l->ds);
		l->ds = NULL;
		return rc;
	}
	gm_pool_cfg_init(&l->pc, &o, l->ds, bpe, first, end);
	l->pc.lease_timeout_ms = b->lease_ms;
	l->token = b->token;
	snprintf(l->home_addr, sizeof(l->home_addr), "%s", b->home_addr);
	return 0;
}

static int ljob_open(struct gm_remote *r, struct ljob *l, struct conn *c, const struct m_lend *m,
		     const struct gm_node_req *req, char *why, size_t wl)
{
	struct wblob *b = &l->blob;
	*b = (struct wblob){.magic = MSG_MAGIC,
			    .version = MSG_VERSION,
			    .token = m->token,
			    .fingerprint = m->fingerprint,
			    .nsamples = m->nsamples,
			    .bpe = m->bpe,
			    .lease_ms = m->lease_ms,
			    .key = r->key,
			    .req = *req};
	snprintf(b->home_addr, sizeof(b->home_addr), strchr(c->ip, ':') ? "[%s]:%u" : "%s:%u",
		 c->ip, m->port);
	int rc = job_cfg(l, b, why, wl);
	if (rc)
		return rc;
	l->home = c;
	l->used = true;
	return 0;
}

static void on_lend(struct gm_remote *r, struct conn *c, const struct m_lend *m, const void *data,
		    size_t len)
{
	struct m_lent a = {.token = m->token};
	struct gm_node_req req;
	if (c->role != ROLE_AGENT || len != sizeof(req) || m->workers > GM_MAX_WORKERS ||
	    !m->port || m->port > 65535) {
		kill_conn(c, "%s: malformed lend request", c->ip);
		return;
	}
	memcpy(&req, data, sizeof(req));
	req.root[sizeof(req.root) - 1] = '\0';
	struct ljob *l = ljob_for(r, c, m->token, m->workers > 0);
	if (!l) {
		send_msg(c, AM_LENT, &a, sizeof(a), NULL, 0);
		return;
	}
	if (!l->used) {
		int rc = ljob_open(r, l, c, m, &req, a.msg, sizeof(a.msg));
		if (rc) {
			a.status = rc;
			logf_(r, "job %016" PRIx64 " from %s: %s", m->token, c->ip, a.msg);
			send_msg(c, AM_LENT, &a, sizeof(a), NULL, 0);
			return;
		}
		logf_(r, "job %016" PRIx64 " from %s: %s, up to %u workers", m->token, c->ip,
		      req.root, m->workers);
	}
	uint32_t others = lent_total(r) - l->n;
	uint32_t room = r->lendable > others ? r->lendable - others : 0;
	l->target = m->workers < room ? m->workers : room;
	ljobs_tick(r, now_ms());
	a.granted = l->target;
	send_msg(c, AM_LENT, &a, sizeof(a), NULL, 0);
	if (!m->workers)
		ljob_end(l);
}

/* ---- a remote worker process ------------------------------------------------------- */

static volatile sig_atomic_t w_retire;

static void on_usr1(int sig)
{
	(void)sig;
	w_retire = 1;
}

static int net_init(struct gm_remote *r, bool wakeup, char *err, size_t errlen);
static void net_fini(struct gm_remote *r);

/* What the worker's lease reply said (its done words are in r->scratch). */
static void on_lease(struct gm_remote *r, struct conn *c, const struct m_lease *l, const void *data,
		     size_t len)
{
	if (!r->is_worker || !c->outgoing) {
		kill_conn(c, "%s: unexpected lease", c->ip);
		return;
	}
	if (len > sizeof(r->scratch) || (l->status == 0 && l->nb > GM_MAX_BATCH)) {
		kill_conn(c, "%s: malformed lease", c->ip);
		return;
	}
	memcpy(r->scratch, data, len);
	r->lease = *l;
	r->lease_in = true;
}

static void wprogress(void *arg)
{
	struct gm_remote *r = arg;
	ucp_worker_progress(r->w);
}

/* Progress until *flag is set, c dies or ms pass. 0, -ECONNRESET, -ETIMEDOUT. */
static int wait_for(struct gm_remote *r, struct conn *c, volatile bool *flag, int ms)
{
	int64_t end = now_ms() + ms;
	while (!*flag) {
		if (c->st == C_DEAD)
			return -ECONNRESET;
		if (now_ms() >= end)
			return -ETIMEDOUT;
		if (!ucp_worker_progress(r->w)) {
			struct timespec ts = {0, 100000};
			nanosleep(&ts, NULL);
		}
	}
	return 0;
}

struct wsend {
	unsigned inflight[2]; /* sends of each mirror slot not yet completed */
	struct m_sample *hdr[2];
};

/* Samples go eager (the home copies each one from UCX's buffer: over TCP the
 * fastest, measured by tests/bench/bench-remote.sh: 2,045-2,197 img/s against
 * 1,147-1,541 by rendezvous, whose handshake per sample costs a round trip to
 * a CPU-poor home) unless $GOLDMINER_REMOTE_RNDV=1: then by rendezvous, received
 * straight into the slot (what an RDMA fabric wants: no copy at the home). */
static bool rndv_samples(void)
{
	static int on = -1;
	if (on < 0) {
		const char *e = getenv("GOLDMINER_REMOTE_RNDV");
		on = e && !strcmp(e, "1");
	}
	return on;
}

static void sample_done(void *req, ucs_status_t st, void *user)
{
	(void)st;
	(*(unsigned *)user)--;
	ucp_request_free(req);
}

static int send_sample(struct conn *c, struct m_sample *h, const void *px, size_t len,
		       unsigned *inflight)
{
	ucp_request_param_t rp = {
	    .op_attr_mask =
		UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
	    .flags = UCP_AM_SEND_FLAG_REPLY |
		     (rndv_samples() ? UCP_AM_SEND_FLAG_RNDV : UCP_AM_SEND_FLAG_EAGER),
	    .cb.send = sample_done,
	    .user_data = inflight,
	};
	void *p = ucp_am_send_nbx(c->ep, AM_SAMPLE, h, sizeof(*h), px, len, &rp);
	if (UCS_PTR_IS_ERR(p)) {
		kill_conn(c, "send failed: %s", ucs_status_string(UCS_PTR_STATUS(p)));
		return -ECONNRESET;
	}
	if (p)
		(*inflight)++;
	return 0;
}

/* Send the samples this worker made (not those the lease said were done) and the
 * publish; the mirror slot stays untouched until its sends complete. */
static int ship(struct gm_remote *r, struct conn *c, struct gm_ring *m, uint32_t slot,
		struct wsend *ws, size_t sb)
{
	const struct m_lease *l = &r->lease;
	uint32_t words = (gm_ring_hdr(m)->batch_size + 63) / 64;
	_Atomic uint64_t *done = gm_ring_done_bits(m, slot), *err = gm_ring_err_bits(m, slot);
	struct gm_slot_ctl *ctl = gm_ring_ctl(m, slot);
	const uint8_t *px = gm_ring_data(m, slot);
	uint32_t nbad = 0;
	for (uint32_t i = 0; i < l->nb; i++) {
		uint64_t bit = 1ull << (i % 64);
		if (!(atomic_load(&done[i / 64]) & bit) || (r->scratch[i / 64] & bit))
			continue;
		struct m_sample *h = &ws->hdr[slot][i];
		*h = (struct m_sample){.task = l->task,
				       .vpid = l->vpid,
				       .pos = i,
				       .id = gm_ring_ids(m, slot)[i],
				       .bad = !!(atomic_load(&err[i / 64]) & bit),
				       .label = gm_ring_labels(m, slot)[i]};
		/* the worker recorded its bad samples in position order (handle_bad), so
		 * the k-th bad one it made has the k-th record (keyed by the bad file's
		 * id: the slot holds the substitute's); past GM_RING_MAX_ERRS, none */
		if (h->bad && nbad < ctl->n_recs) {
			h->rec = ctl->errs[nbad];
			h->has_rec = 1;
		}
		nbad += h->bad;
		if (send_sample(c, h, px + (uint64_t)i * sb, sb, &ws->inflight[slot]))
			return -ECONNRESET;
	}
	struct m_publish p = {.task = l->task,
			      .vpid = l->vpid,
			      .nb = l->nb,
			      .status = ctl->status,
			      .n_recs = ctl->n_recs,
			      .words = words,
			      .ns = {ctl->read_ns, ctl->decode_ns, ctl->augment_ns, ctl->write_ns},
			      .read_bytes = ctl->read_bytes,
			      .preempt_ns = ctl->preempt_ns};
	unsigned char *buf = (unsigned char *)r->scratch2;
	for (uint32_t q = 0; q < words; q++) {
		uint64_t e = atomic_load(&err[q]);
		memcpy(buf + q * 8, &e, 8);
	}
	memcpy(buf + words * 8, ctl->errs, ctl->n_recs * sizeof(struct gm_slot_err));
	return send_msg(c, AM_PUBLISH, &p, sizeof(p), buf,
			words * 8 + ctl->n_recs * sizeof(struct gm_slot_err));
}

/* The mirror slot starts from what the home already has of the task. */
static void preset(struct gm_remote *r, struct gm_ring *m, uint32_t slot)
{
	const struct m_lease *l = &r->lease;
	uint32_t words = (gm_ring_hdr(m)->batch_size + 63) / 64;
	struct gm_slot_ctl *ctl = gm_ring_ctl(m, slot);
	for (uint32_t q = 0; q < words; q++) {
		atomic_store(&gm_ring_done_bits(m, slot)[q], r->scratch[q]);
		atomic_store(&gm_ring_err_bits(m, slot)[q], 0);
	}
	ctl->n_errors = ctl->n_recs = 0;
	ctl->read_ns = ctl->decode_ns = ctl->augment_ns = ctl->write_ns = 0;
	ctl->read_bytes = 0;
	ctl->preempt_ns = 0;
	atomic_store(&ctl->bits_task, l->task + 1);
}

static int drain(struct gm_remote *r, struct conn *c, unsigned *inflight)
{
	int64_t end = now_ms() + REPLY_MS;
	while (*inflight) {
		if (c->st == C_DEAD)
			return -ECONNRESET;
		if (now_ms() >= end)
			return -ETIMEDOUT;
		if (!ucp_worker_progress(r->w)) {
			struct timespec ts = {0, 50000};
			nanosleep(&ts, NULL);
		}
	}
	return 0;
}

/* Claim, make, ship until retired, told there is no more, or cut off. */
static int work_loop(struct gm_remote *r, struct conn *c, struct gm_worker *w, struct gm_ring *m,
		     struct wsend *ws, size_t sb)
{
	uint32_t slot = 0;
	struct m_claim cl = {0};
	int rc = 0;
	while (!w_retire && !rc) {
		r->lease_in = false;
		rc = send_msg(c, AM_CLAIM, &cl, sizeof(cl), NULL, 0);
		if (!rc)
			rc = wait_for(r, c, &r->lease_in, REPLY_MS);
		if (rc)
			break;
		if (r->lease.status == -ENODATA)
			break;
		if (r->lease.status) {
			int64_t end = now_ms() + NONE_WAIT_MS;
			while (now_ms() < end && c->st != C_DEAD && !w_retire)
				if (!ucp_worker_progress(r->w)) {
					struct timespec ts = {0, 200000};
					nanosleep(&ts, NULL);
				}
			continue;
		}
		slot ^= 1;
		rc = drain(r, c, &ws->inflight[slot]);
		if (rc)
			break;
		preset(r, m, slot);
		rc = gm_worker_produce(w, slot, r->lease.task);
		if (rc) {
			fprintf(stderr, "goldminer remote worker: batch %" PRIu64 ": %s\n",
				r->lease.task, strerror(-rc));
			break;
		}
		rc = ship(r, c, m, slot, ws, sb);
	}
	if (!rc)
		rc = drain(r, c, &ws->inflight[0]);
	if (!rc)
		rc = drain(r, c, &ws->inflight[1]);
	return rc;
}

static int worker_run(struct ljob *l, const struct gm_auth_key *key)
{
	struct sigaction sa = {.sa_handler = on_usr1};
	sigaction(SIGUSR1, &sa, NULL);
	char err[512];
	struct gm_remote *r = calloc(1, sizeof(*r));
	struct gm_ring *m = NULL;
	/* (r is large: its scratch buffers hold a whole batch's bits) */
	struct gm_worker *w = NULL;
	struct conn *c = NULL;
	struct wsend ws = {{0}, {NULL, NULL}};
	uint32_t b = l->pc.w.batch_size;
	size_t sb = gm_aug_out_bytes(&l->pc.w.aug);
	int rc;
	if (!r)
		return -ENOMEM;
	r->key = *key;
	r->is_worker = true;
	r->verbose = 1;
	rc = net_init(r, false, err, sizeof(err));
	if (!rc)
		rc = connect_to(r, l->home_addr, &c);
	if (!rc)
		rc = say_hello(c, ROLE_WORKER, l->token);
	while (!rc && c->st != C_OK) { /* the handshake, within AUTH_MS */
		if (c->st == C_DEAD)
			rc = -ECONNREFUSED;
		else if (now_ms() - c->since_ms >= AUTH_MS)
			rc = -ETIMEDOUT;
		else if (!ucp_worker_progress(r->w))
			usleep(100);
	}
	if (!rc)
		rc = gm_ring_create(&m, 2, b, sb, 0, GM_RING_NO_END);
	struct gm_worker_cfg cfg = l->pc.w;
	cfg.ring = m;
	cfg.on_sample = wprogress;
	cfg.sample_arg = r;
	ws.hdr[0] = calloc(b, sizeof(struct m_sample));
	ws.hdr[1] = calloc(b, sizeof(struct m_sample));
	if (!rc && (!ws.hdr[0] || !ws.hdr[1]))
		rc = -ENOMEM;
	if (!rc)
		rc = gm_worker_create(&w, &cfg, err, sizeof(err));
	if (!rc)
		rc = work_loop(r, c, w, m, &ws, sb);
	if (rc && rc != -ENODATA)
		fprintf(stderr, "goldminer remote worker for %s: %s%s%s\n", l->home_addr,
			strerror(-rc), c && c->why[0] ? ": " : "", c && c->why[0] ? c->why : "");
	gm_worker_destroy(w);
	gm_ring_destroy(m);
	free(ws.hdr[0]);
	free(ws.hdr[1]);
	if (c)
		conn_free(r, c);
	net_fini(r);
	free(r);
	return rc == -ENODATA ? 0 : rc;
}

/* The remote worker process (goldminer node --remote-worker FD): its blob, its own
 * index of the dataset (checked against the job's fingerprint), then the loop. */
static int r_worker_main(int fd)
{
	struct wblob *b = malloc(sizeof(*b));
	struct ljob l;
	char why[512];
	int rc = 0;
	memset(&l, 0, sizeof(l));
	if (!b)
		return -ENOMEM;
	if (pread(fd, b, sizeof(*b), 0) != (ssize_t)sizeof(*b) || b->magic != MSG_MAGIC ||
	    b->version != MSG_VERSION) {
		fprintf(stderr, "goldminer node --remote-worker: fd %d holds no worker blob\n", fd);
		rc = -EINVAL;
	}
	close(fd);
	b->home_addr[sizeof(b->home_addr) - 1] = '\0';
	if (!rc) {
		rc = job_cfg(&l, b, why, sizeof(why));
		if (rc)
			fprintf(stderr, "goldminer remote worker for %s: %s\n", b->home_addr, why);
	}
	if (!rc)
		rc = worker_run(&l, &b->key);
	gm_dataset_close(l.ds);
	memset(b, 0, sizeof(*b)); /* the secret's key */
	free(b);
	return rc;
}

/* ---- dispatch ------------------------------------------------------------------- */

static const size_t hdr_size[AM_N] = {
    [AM_HELLO] = sizeof(struct m_hello),   [AM_CHALLENGE] = sizeof(struct m_challenge),
    [AM_AUTH] = sizeof(struct m_auth),	   [AM_WELCOME] = sizeof(struct m_welcome),
    [AM_LEND] = sizeof(struct m_lend),	   [AM_LENT] = sizeof(struct m_lent),
    [AM_CLAIM] = sizeof(struct m_claim),   [AM_LEASE] = sizeof(struct m_lease),
    [AM_SAMPLE] = sizeof(struct m_sample), [AM_PUBLISH] = sizeof(struct m_publish),
};

static void dispatch(struct gm_remote *r, struct conn *c, int id, const void *hp, const void *data,
		     size_t len, bool rndv)
{
	union {
		struct m_hello hello;
		struct m_challenge ch;
		struct m_auth auth;
		struct m_welcome wm;
		struct m_lend lend;
		struct m_lent lent;
		struct m_lease lease;
		struct m_sample sample;
		struct m_publish pub;
	} h;
	memcpy(&h, hp, hdr_size[id]);
	if (id == AM_LEND || id == AM_PUBLISH) { /* aligned copies of small payloads */
		if (len > sizeof(r->scratch2) && id == AM_PUBLISH) {
			kill_conn(c, "%s: oversized message", c->ip);
			return;
		}
		if (id == AM_PUBLISH)
			data = memcpy(r->scratch2, data, len);
	}
	switch (id) {
	case AM_HELLO:
		on_hello(r, c, &h.hello);
		break;
	case AM_CHALLENGE:
		on_challenge(r, c, &h.ch);
		break;
	case AM_AUTH:
		on_auth(r, c, &h.auth);
		break;
	case AM_WELCOME:
		on_welcome(r, c, &h.wm);
		break;
	case AM_LEND:
		on_lend(r, c, &h.lend, data, len);
		break;
	case AM_LENT:
		on_lent(r, c, &h.lent);
		break;
	case AM_CLAIM:
		on_claim(r, c);
		break;
	case AM_LEASE:
		on_lease(r, c, &h.lease, data, len);
		break;
	case AM_SAMPLE:
		on_sample(r, c, &h.sample, (void *)data, len, rndv);
		break;
	case AM_PUBLISH:
		on_publish(r, c, &h.pub, data, len);
		break;
	default:
		break;
	}
}

static ucs_status_t am_cb(void *arg, const void *header, size_t hlen, void *data, size_t len,
			  const ucp_am_recv_param_t *param)
{
	struct am_arg *a = arg;
	struct gm_remote *r = a->r;
	struct conn *c = conn_of(
	    r, (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) ? param->reply_ep : NULL);
	if (!c)
		return UCS_OK; /* a connection closed or never known: dropped */
	bool rndv = param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV;
	if (rndv && a->id != AM_SAMPLE) {
		kill_conn(c, "%s: a rendezvous message %d (only samples come so)", c->ip, a->id);
		return UCS_OK;
	}
	if (hlen != hdr_size[a->id] || (len && a->id != AM_LEND && a->id != AM_LEASE &&
					a->id != AM_SAMPLE && a->id != AM_PUBLISH)) {
		kill_conn(c, "%s: malformed message %d (%zu+%zu bytes)", c->ip, a->id, hlen, len);
		return UCS_OK;
	}
	if (a->id > AM_WELCOME && c->st != C_OK) {
		kill_conn(c, "%s: message %d before authentication", c->ip, a->id);
		return UCS_OK;
	}
	dispatch(r, c, a->id, header, data, len, rndv);
	return UCS_OK;
}

/* ---- context, listener, service ------------------------------------------------ */

static void conn_req_cb(ucp_conn_request_h req, void *arg)
{
	struct gm_remote *r = arg;
	if (r->nqueue == CONN_QUEUE) {
		ucp_listener_reject(r->l, req);
		return;
	}
	r->queue[r->nqueue++] = req;
}

static int net_init(struct gm_remote *r, bool wakeup, char *err, size_t errlen)
{
	ucp_config_t *cfg;
	/* A sample is ~150 KB: TCP segments of 64 KB instead of UCX's 8 KB cut the
	 * fragments each one is split into (and the home's work per sample); the
	 * user's own UCX_* settings win (overwrite 0). */
	setenv("UCX_TCP_TX_SEG_SIZE", "64k", 0);
	setenv("UCX_TCP_RX_SEG_SIZE", "256k", 0);
	ucs_status_t st = ucp_config_read(NULL, NULL, &cfg);
	if (st != UCS_OK) {
		snprintf(err, errlen, "UCX configuration (UCX_* environment): %s",
			 ucs_status_string(st));
		return st_errno(st);
	}
	ucp_params_t p = {.field_mask = UCP_PARAM_FIELD_FEATURES,
			  .features = UCP_FEATURE_AM | (wakeup ? UCP_FEATURE_WAKEUP : 0)};
	st = ucp_init(&p, cfg, &r->ctx);
	ucp_config_release(cfg);
	if (st != UCS_OK) {
		snprintf(err, errlen, "ucp_init: %s (check UCX_TLS and UCX_NET_DEVICES)",
			 ucs_status_string(st));
		return st_errno(st);
	}
	ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
				  .thread_mode = UCS_THREAD_MODE_SINGLE};
	st = ucp_worker_create(r->ctx, &wp, &r->w);
	if (st == UCS_OK && wakeup)
		st = ucp_worker_get_efd(r->w, &r->efd);
	for (int id = 1; st == UCS_OK && id < AM_N; id++) {
		r->am[id] = (struct am_arg){r, id};
		ucp_am_handler_param_t hp = {
		    .field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
				  UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS,
		    .id = (unsigned)id,
		    .flags = UCP_AM_FLAG_WHOLE_MSG,
		    .cb = am_cb,
		    .arg = &r->am[id]};
		st = ucp_worker_set_am_recv_handler(r->w, &hp);
	}
	if (st != UCS_OK) {
		snprintf(err, errlen, "UCX worker: %s", ucs_status_string(st));
		net_fini(r);
		return st_errno(st);
	}
	return 0;
}

static void net_fini(struct gm_remote *r)
{
	for (int i = 0; i < MAX_CONNS; i++)
		if (r->conns[i])
			conn_free(r, r->conns[i]);
	for (unsigned i = 0; i < r->nqueue; i++)
		ucp_listener_reject(r->l, r->queue[i]);
	r->nqueue = 0;
	if (r->l)
		ucp_listener_destroy(r->l);
	if (r->w)
		ucp_worker_destroy(r->w);
	if (r->ctx)
		ucp_cleanup(r->ctx);
	r->l = NULL;
	r->w = NULL;
	r->ctx = NULL;
}

static bool allowed(const struct gm_remote *r, const char *ip)
{
	for (int i = 0; i < r->nallowed; i++)
		if (!strcmp(r->allowed[i], ip))
			return true;
	return false;
}

/* Connections that arrived: only from the hosts of --peers. */
static void accept_queued(struct gm_remote *r)
{
	while (r->nqueue) {
		ucp_conn_request_h req = r->queue[0];
		memmove(r->queue, r->queue + 1, --r->nqueue * sizeof(r->queue[0]));
		ucp_conn_request_attr_t a = {.field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR};
		char ip[INET6_ADDRSTRLEN] = "?";
		if (ucp_conn_request_query(req, &a) == UCS_OK)
			getnameinfo((struct sockaddr *)&a.client_address,
				    a.client_address.ss_family == AF_INET6
					? sizeof(struct sockaddr_in6)
					: sizeof(struct sockaddr_in),
				    ip, sizeof(ip), NULL, 0, NI_NUMERICHOST);
		struct conn *c = allowed(r, ip) ? conn_new(r, false, ip) : NULL;
		if (!c) {
			/* said once a minute per address: a peer retries every 2 s */
			int64_t now = now_ms();
			if (strcmp(r->refused_ip, ip) || now - r->refused_ms >= 60000) {
				logf_(r, "refused a connection from %s: %s", ip,
				      allowed(r, ip) ? "too many connections"
						     : "not a host in --peers");
				snprintf(r->refused_ip, sizeof(r->refused_ip), "%s", ip);
				r->refused_ms = now;
			}
			ucp_listener_reject(r->l, req);
			continue;
		}
		ucp_ep_params_t p = {
		    .field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST |
				  UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
				  UCP_EP_PARAM_FIELD_ERR_HANDLER,
		    .conn_request = req,
		    .err_mode = UCP_ERR_HANDLING_MODE_PEER,
		    .err_handler = {.cb = ep_err_cb, .arg = c},
		};
		if (ucp_ep_create(r->w, &p, &c->ep) != UCS_OK) {
			c->ep = NULL;
			conn_free(r, c);
		}
	}
}

/* Dead connections: their lease back, their peer slot free, then the endpoint. */
static void conns_tick(struct gm_remote *r, int64_t now)
{
	for (int i = 0; i < MAX_CONNS; i++) {
		struct conn *c = r->conns[i];
		if (!c)
			continue;
		if (c->st != C_OK && c->st != C_DEAD && now - c->since_ms >= AUTH_MS)
			kill_conn(c, "%s did not authenticate within %d ms", c->ip, AUTH_MS);
		if (c->st == C_OK && c->vpid && c->job &&
		    now - c->lease_ms >= (int64_t)c->job->lease_ms) {
			char why[96];
			snprintf(why, sizeof(why), "no sample for %u ms (lease deadline)",
				 c->job->lease_ms);
			revoke_lease(r, c, why);
			kill_conn(c, "%s: lease deadline passed", c->ip);
		}
		if (c->st != C_DEAD)
			continue;
		conn_close_ep(r, c); /* first: then nothing of it can land in the slot */
		revoke_lease(r, c, c->why);
		if (c->peer >= 0) {
			struct peer *p = &r->peers[c->peer];
			if (strcmp(p->last_err, c->why))
				logf_(r, "peer %s: %s", p->addr, c->why);
			snprintf(p->last_err, sizeof(p->last_err), "%s", c->why);
			p->c = NULL;
			p->retry_ms = now + RETRY_MS;
		} else if (c->role == ROLE_AGENT || !c->role) {
			logf_(r, "connection from %s closed: %s", c->ip, c->why);
		}
		for (int k = 0; k < MAX_LJOBS; k++)
			if (r->ljobs[k].used && r->ljobs[k].home == c) {
				logf_(r,
				      "job %016" PRIx64 ": its home agent is gone; its remote "
				      "workers stop",
				      r->ljobs[k].token);
				ljob_end(&r->ljobs[k]);
			}
		conn_free(r, c);
	}
}

static void peers_tick(struct gm_remote *r, int64_t now)
{
	for (int p = 0; p < r->npeers; p++) {
		struct peer *pe = &r->peers[p];
		if (pe->c || now < pe->retry_ms)
			continue;
		struct conn *c;
		int rc = connect_to(r, pe->addr, &c);
		if (!rc)
			rc = say_hello(c, ROLE_AGENT, 0);
		if (rc) {
			snprintf(pe->last_err, sizeof(pe->last_err), "cannot connect: %s",
				 strerror(-rc));
			pe->retry_ms = now + RETRY_MS;
			continue;
		}
		c->peer = p;
		pe->c = c;
	}
}

static int first_used(const struct gm_remote *r)
{
	for (int i = 0; i < MAX_HJOBS; i++)
		if (r->hjobs[i].used)
			return i;
	return -1;
}

/* Each peer's delivered rate over the window (its workers' connections come from
 * its address), then the connections' counts start again. */
static void peer_rates(struct gm_remote *r, int64_t window_ms)
{
	for (int p = 0; p < r->npeers; p++) {
		uint64_t n = 0;
		r->peers[p].workers = 0;
		for (int k = 0; k < MAX_CONNS; k++) {
			struct conn *c = r->conns[k];
			if (c && c->role == ROLE_WORKER && c->st == C_OK &&
			    !strcmp(c->ip, r->allowed[p])) {
				n += c->samples;
				c->samples = 0;
				r->peers[p].workers++;
			}
		}
		r->peers[p].rate = window_ms > 0 ? (double)n * 1000.0 / (double)window_ms : 0;
	}
}

static void hjobs_tick(struct gm_remote *r, int64_t now)
{
	for (int i = 0; i < MAX_HJOBS; i++) {
		struct hjob *j = &r->hjobs[i];
		if (!j->used)
			continue;
		lend_tick(r, j, now);
		if (now - j->tick_ms >= 1000) {
			if (i == first_used(r))
				peer_rates(r, now - j->tick_ms);
			uint32_t n = 0;
			for (int k = 0; k < MAX_CONNS; k++)
				n +=
				    r->conns[k] && r->conns[k]->job == j && r->conns[k]->st == C_OK;
			j->rate = (double)j->tick_samples * 1000.0 / (double)(now - j->tick_ms);
			j->per_worker = n ? j->rate / n : 0;
			j->tick_samples = 0;
			j->tick_ms = now;
		}
	}
}

static void service(struct gm_remote *r)
{
	int64_t now = now_ms();
	for (int round = 0; round < 64; round++) {
		while (ucp_worker_progress(r->w))
			;
		accept_queued(r);
		if (round == 0) {
			ljobs_tick(r, now);
			conns_tick(r, now);
			peers_tick(r, now);
			hjobs_tick(r, now);
			continue;
		}
		if (ucp_worker_arm(r->w) != UCS_ERR_BUSY)
			break;
	}
}

/* ---- the plugin's functions -------------------------------------------------- */

static int parse_peers(struct gm_remote *r, const char *list, char *err, size_t errlen)
{
	char buf[4096];
	snprintf(buf, sizeof(buf), "%s", list ? list : "");
	for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (r->npeers == MAX_PEERS) {
			snprintf(err, errlen, "--peers: at most %d peers", MAX_PEERS);
			return -EINVAL;
		}
		struct peer *p = &r->peers[r->npeers++];
		snprintf(p->addr, sizeof(p->addr), "%s", t);
		struct sockaddr_storage ss;
		socklen_t sl;
		if (parse_addr(t, &ss, &sl, r->allowed[r->nallowed], sizeof(r->allowed[0]))) {
			snprintf(err, errlen,
				 "--peers: '%s' is not HOST:PORT (a host this machine can resolve)",
				 t);
			return -EINVAL;
		}
		r->nallowed++;
	}
	return 0;
}

/* Only connections in TCP TIME_WAIT hold the port (an agent on it stopped
 * moments ago; /proc/net/tcp and tcp6: some in state 06, none listening, 0A).
 * UCX 1.13's listener sets no SO_REUSEADDR and has no setting for it, and Linux
 * lets a port in TIME_WAIT be bound again only when both sockets had it. */
static bool held_by_time_wait(uint16_t port)
{
	const char *files[] = {"/proc/net/tcp", "/proc/net/tcp6"};
	bool waiting = false, listening = false;
	char line[512];
	for (int f = 0; f < 2; f++) {
		FILE *fp = fopen(files[f], "r");
		if (!fp)
			continue;
		while (fgets(line, sizeof(line), fp)) {
			char local[64];
			unsigned st, lport;
			if (sscanf(line, " %*u: %63s %*s %x", local, &st) != 2)
				continue;
			char *colon = strrchr(local, ':');
			if (!colon || sscanf(colon + 1, "%x", &lport) != 1 || lport != port)
				continue;
			waiting |= st == 0x06;
			listening |= st == 0x0A;
		}
		fclose(fp);
	}
	return waiting && !listening;
}

/* The UCX listener on "ADDR:PORT"; while the port is held only by TIME_WAIT
 * connections it tries again every second, 65 s at most (TIME_WAIT lasts 60 s
 * on Linux), saying so once; a signal ends the wait. 0 or -errno with err. */
static int listen_on(struct gm_remote *r, const char *addr, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	if (parse_addr(addr, &ss, &sl, NULL, 0)) {
		snprintf(err, errlen, "--listen: '%s' is not ADDR:PORT", addr);
		return -EINVAL;
	}
	ucp_listener_params_t lp = {
	    .field_mask =
		UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER,
	    .sockaddr = {.addr = (const struct sockaddr *)&ss, .addrlen = sl},
	    .conn_handler = {.cb = conn_req_cb, .arg = r}};
	ucp_listener_attr_t la = {.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR};
	ucs_status_t st;
	int64_t end = now_ms() + 65000;
	uint16_t port = ntohs(((struct sockaddr_in *)&ss)->sin_port); /* same offset in v6 */
	for (bool said = false; port && held_by_time_wait(port) && now_ms() < end; said = true) {
		if (!said)
			logf_(r,
			      "--listen %s: the port is still held by the connections of an agent "
			      "that stopped moments ago (TCP TIME_WAIT, up to 60 s): waiting",
			      addr);
		struct timespec ts = {1, 0};
		if (nanosleep(&ts, NULL) && errno == EINTR) {
			snprintf(err, errlen,
				 "--listen %s: interrupted while the port was in TIME_WAIT", addr);
			return -EINTR;
		}
	}
	st = ucp_listener_create(r->w, &lp, &r->l);
	if (st == UCS_OK)
		st = ucp_listener_query(r->l, &la);
	if (st != UCS_OK) {
		snprintf(err, errlen,
			 "--listen %s: %s (is it an address of this host, and the port free?)",
			 addr, ucs_status_string(st));
		return st_errno(st);
	}
	const struct sockaddr *sa = (const struct sockaddr *)&la.sockaddr;
	r->port = ntohs(sa->sa_family == AF_INET6 ? ((const struct sockaddr_in6 *)sa)->sin6_port
						  : ((const struct sockaddr_in *)sa)->sin_port);
	return 0;
}

static void r_destroy(struct gm_remote *r);

static int r_create(struct gm_remote **out, const struct gm_remote_cfg *c, char *err, size_t errlen)
{
	*out = NULL;
	if (!c->secret) {
		snprintf(err, errlen,
			 "--secret FILE is required with --listen or --peers: the "
			 "agents prove to each other that they know it");
		return -EINVAL;
	}
	struct gm_remote *r = calloc(1, sizeof(*r));
	if (!r) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	r->efd = -1;
	ssize_t xl = readlink("/proc/self/exe", r->exe, sizeof(r->exe) - 1);
	r->exe[xl > 0 ? xl : 0] = '\0';
	r->budget = c->budget;
	r->verbose = c->verbose;
	r->log = c->log;
	r->log_arg = c->log_arg;
	int rc = gm_auth_load(&r->key, c->secret, err, errlen);
	if (!rc)
		rc = parse_peers(r, c->peers, err, errlen);
	if (!rc)
		rc = net_init(r, true, err, errlen);
	if (!rc && c->listen)
		rc = listen_on(r, c->listen, err, errlen);
	if (rc) {
		r_destroy(r);
		return rc;
	}
	*out = r;
	return 0;
}

static void r_destroy(struct gm_remote *r)
{
	if (!r)
		return;
	for (int i = 0; i < MAX_LJOBS; i++)
		if (r->ljobs[i].used)
			ljob_end(&r->ljobs[i]);
	for (int i = 0; i < MAX_CONNS; i++)
		if (r->conns[i]) {
			conn_close_ep(r, r->conns[i]);
			revoke_lease(r, r->conns[i], "the agent stops");
		}
	for (int i = 0; i < MAX_HJOBS; i++)
		if (r->hjobs[i].used)
			gm_ring_destroy(r->hjobs[i].ring);
	net_fini(r);
	for (int t = 0; t < 100 && nretired; t++) { /* SIGKILLed: gone within moments */
		reap_retired();
		if (nretired)
			usleep(10000);
	}
	free(r);
}

static int r_fd(struct gm_remote *r)
{
	return r->efd;
}

static uint16_t r_port(struct gm_remote *r)
{
	return r->port;
}

static int r_job_add(struct gm_remote *r, int ring_fd, const struct gm_node_req *req,
		     uint64_t fingerprint, uint64_t nsamples, uint32_t bpe, uint32_t lease_ms,
		     uint64_t *token, char *err, size_t errlen)
{
	struct hjob *j = NULL;
	for (int i = 0; i < MAX_HJOBS && !j; i++)
		if (!r->hjobs[i].used)
			j = &r->hjobs[i];
	if (!j) {
		snprintf(err, errlen, "too many jobs");
		return -EMFILE;
	}
	memset(j, 0, sizeof(*j));
	int rc = gm_ring_attach(&j->ring, ring_fd);
	if (rc) {
		snprintf(err, errlen, "mapping the job's ring for remote workers: %s",
			 strerror(-rc));
		return rc;
	}
	struct gm_ring_hdr *h = gm_ring_hdr(j->ring);
	uint8_t rnd[GM_AUTH_NONCE];
	gm_auth_nonce(rnd);
	memcpy(&j->token, rnd, sizeof(j->token));
	j->req = *req;
	j->fingerprint = fingerprint;
	j->nsamples = nsamples;
	j->bpe = bpe;
	j->lease_ms = lease_ms;
	j->batch = h->batch_size;
	j->sb = h->sample_bytes;
	j->words = (h->batch_size + 63) / 64;
	j->tick_ms = now_ms();
	j->used = true;
	*token = j->token;
	return 0;
}

static void r_job_remove(struct gm_remote *r, uint64_t token)
{
	struct hjob *j = hjob_of(r, token);
	if (!j)
		return;
	for (int p = 0; p < r->npeers; p++)
		if (j->asked[p] && r->peers[p].c && r->peers[p].c->st == C_OK) {
			struct m_lend m = {.token = j->token, .workers = 0, .port = r->port};
			send_msg(r->peers[p].c, AM_LEND, &m, sizeof(m), &j->req, sizeof(j->req));
		}
	for (int i = 0; i < MAX_CONNS; i++) {
		struct conn *c = r->conns[i];
		if (c && c->job == j) {
			conn_close_ep(r, c); /* before the ring is unmapped */
			revoke_lease(r, c, "its job ended");
			c->job = NULL;
			kill_conn(c, "job ended");
		}
	}
	gm_ring_destroy(j->ring);
	memset(j, 0, sizeof(*j));
}

static void r_job_want(struct gm_remote *r, uint64_t token, uint32_t n)
{
	struct hjob *j = hjob_of(r, token);
	if (j)
		j->want = n > GM_MAX_WORKERS ? GM_MAX_WORKERS : n;
}

static void r_job_info(struct gm_remote *r, uint64_t token, struct gm_remote_job_info *o)
{
	struct hjob *j = hjob_of(r, token);
	memset(o, 0, sizeof(*o));
	if (!j)
		return;
	for (int k = 0; k < MAX_CONNS; k++)
		o->workers += r->conns[k] && r->conns[k]->job == j && r->conns[k]->st == C_OK;
	o->asked = j->want;
	for (int p = 0; p < r->npeers; p++)
		o->granted += j->granted[p];
	o->samples = j->samples;
	o->bytes = j->bytes;
	o->revoked = j->revoked;
	o->fenced = j->fenced;
	o->rate = j->rate;
	o->per_worker = j->per_worker;
}

static void r_set_lendable(struct gm_remote *r, uint32_t n)
{
	r->lendable = n;
}

static uint32_t r_lent(struct gm_remote *r)
{
	return lent_total(r);
}

static void r_status_json(struct gm_remote *r, char *buf, size_t len)
{
	size_t off = 0;
#define PUT(...)                                                                                   \
	do {                                                                                       \
		int k_ = snprintf(buf + off, off < len ? len - off : 0, __VA_ARGS__);              \
		off += k_ > 0 ? (size_t)k_ : 0;                                                    \
	} while (0)
	PUT("\"remote\": {\"port\": %u, \"lendable\": %u, \"lent\": %u, \"peers\": [", r->port,
	    r->lendable, lent_total(r));
	for (int p = 0; p < r->npeers; p++) {
		const struct peer *pe = &r->peers[p];
		const char *st = !pe->c ? "down" : pe->c->st == C_OK ? "connected" : "connecting";
		uint32_t granted = 0; /* its workers serving our jobs, as it said */
		for (int i = 0; i < MAX_HJOBS; i++)
			granted += r->hjobs[i].used ? r->hjobs[i].granted[p] : 0;
		PUT("%s{\"addr\": \"%s\", \"state\": \"%s\", \"workers_for_us\": %u, "
		    "\"workers_connected\": %u, \"img_per_s\": %.1f",
		    p ? ", " : "", pe->addr, st, granted, pe->workers, pe->rate);
		if (pe->last_err[0] && !(pe->c && pe->c->st == C_OK)) {
			PUT(", \"error\": ");
			char e[600];
			size_t n = 0;
			for (const char *s = pe->last_err; *s && n + 3 < sizeof(e); s++) {
				if (*s == '"' || *s == '\\')
					e[n++] = '\\';
				e[n++] = (char)((unsigned char)*s < 0x20 ? ' ' : *s);
			}
			e[n] = '\0';
			PUT("\"%s\"", e);
		}
		PUT("}");
	}
	PUT("], \"lent_jobs\": [");
	int first = 1;
	for (int i = 0; i < MAX_LJOBS; i++) {
		const struct ljob *l = &r->ljobs[i];
		if (!l->used)
			continue;
		PUT("%s{\"job\": \"%016" PRIx64 "\", \"home\": \"%s\", \"workers\": %u}",
		    first ? "" : ", ", l->token, l->home_addr, l->n);
		first = 0;
	}
	PUT("]}");
#undef PUT
}

static const struct gm_remote_ops ops = {
    .abi = GM_REMOTE_ABI,
    .version = GM_VERSION,
    .create = r_create,
    .destroy = r_destroy,
    .fd = r_fd,
    .service = service,
    .port = r_port,
    .job_add = r_job_add,
    .job_remove = r_job_remove,
    .job_want = r_job_want,
    .job_info = r_job_info,
    .set_lendable = r_set_lendable,
    .lent = r_lent,
    .status_json = r_status_json,
    .worker_main = r_worker_main,
};

const struct gm_remote_ops *gm_remote_plugin(void)
{
	return &ops;
}
