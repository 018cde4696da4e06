/*
 * conn.h - the remote plugin's connections (conn.c): one UCP context and worker
 * per process, a table of connections to other agents or remote workers, the
 * shared-secret handshake and the sending and receiving of messages (msg.h).
 *
 * The idea: both processes that speak the protocol, the node agent (agent.h)
 * and a remote worker process (worker.c), own one struct gm_remote_net and
 * nothing else of each other's state. The connection layer handles the
 * handshake itself and hands every later message, checked against the message
 * table (exact header size, payload only where allowed, nothing before the
 * handshake succeeded), to its owner's on_msg.
 *
 * Not here: listening and accepting (the agent's, agent.c), leases (home.c),
 * lent jobs (lender.c). Threads: one, the owner's loop (UCS_THREAD_MODE_SINGLE).
 */
#ifndef GM_REMOTE_CONN_H
#define GM_REMOTE_CONN_H

#include <arpa/inet.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <ucp/api/ucp.h>

#include "auth.h"
#include "msg.h"

#define MAX_CONNS 256
#define AUTH_MS	  5000 /* a connection must prove the secret within this */

enum cstate { C_NEW, C_HELLO, C_CHALLENGED, C_OK, C_DEAD };

struct hjob;

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
	int64_t lease_ms;	 /* last progress on the lease (a sample at a new position) */
	int64_t lease_since_ms;	 /* when it got the lease (its bound: home.c) */
	bool resent_said;	 /* a sample sent again in this lease was logged */
	uint64_t samples;	 /* delivered in the current tick */
	unsigned inflight;	 /* samples still being received into the slot (rendezvous) */
	struct m_publish pub;	 /* a publish that came before its samples had landed */
	unsigned char *pub_data; /* ... its payload (malloc'd), NULL: none pending */
	size_t pub_len;
	bool claim_pending; /* a claim that came behind that publish */
};

struct gm_remote_net;

struct am_arg {
	struct gm_remote_net *n;
	int id;
};

/* A message after the handshake, its header copied to aligned memory (hdr) and
 * its payload (data, len) UCX's until the handler returns; rndv: a rendezvous
 * SAMPLE, whose data is a descriptor for ucp_am_recv_data_nbx. */
typedef void gm_remote_on_msg_fn(void *owner, struct conn *c, int id, const void *hdr,
				 const void *data, size_t len, bool rndv);

struct gm_remote_net {
	ucp_context_h ctx;
	ucp_worker_h w;
	int efd; /* its event fd (the agent polls it), -1: none */
	struct gm_auth_key key;
	struct conn *conns[MAX_CONNS];
	struct am_arg am[AM_N];
	int verbose;
	void (*log)(void *arg, const char *line);
	void *log_arg;
	char welcome[256]; /* the last refusal a server sent us */
	/* the owner's: every message after the handshake, and (a home) the job a
	 * remote worker names in its HELLO (NULL: none here) */
	gm_remote_on_msg_fn *on_msg;
	struct hjob *(*job_of)(void *owner, uint64_t token);
	void (*unlisten)(void *owner); /* close the owner's listener, if it has one */
	void *owner;
};

static inline int64_t now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* dst = src, cut to len (no format: the cut is meant) */
static inline void copy_str(char *dst, size_t len, const char *src)
{
	size_t n = strnlen(src, len - 1);
	memcpy(dst, src, n);
	dst[n] = '\0';
}

/* One line to the owner's log (or stderr when verbose and it has none). */
void gm_remote_logf(struct gm_remote_net *n, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* A UCX status as -errno. */
int gm_remote_st_errno(ucs_status_t st);
/* "host:port" -> a socket address (numeric ip into ip when not NULL). 0 or -EINVAL. */
int gm_remote_parse_addr(const char *s, struct sockaddr_storage *ss, socklen_t *sl, char *ip,
			 size_t iplen);

/* The UCP context and worker (wakeup: with an event fd), every message's handler
 * registered. 0 or -errno with err. fini frees every connection, then (unlisten)
 * the owner's listener, then the worker and the context. */
int gm_remote_net_init(struct gm_remote_net *n, bool wakeup, char *err, size_t errlen);
void gm_remote_net_fini(struct gm_remote_net *n);

/* A connection in the table (NULL: full or no memory); its endpoint is the
 * caller's to make, with gm_remote_conn_lost as its error handler. */
struct conn *gm_remote_conn_new(struct gm_remote_net *n, bool outgoing, const char *ip);
void gm_remote_conn_lost(void *arg, ucp_ep_h ep, ucs_status_t status);
/* Mark c dead with why (the owner's tick closes it); nothing if it is already. */
void gm_remote_conn_kill(struct conn *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Close c's endpoint by force and wait (200 ms at most) until UCX has. */
void gm_remote_conn_close(struct gm_remote_net *n, struct conn *c);
/* Close the endpoint by force and free c. */
void gm_remote_conn_free(struct gm_remote_net *n, struct conn *c);
/* Send a message (header and payload copied). 0 or -errno (c is then dead). */
int gm_remote_conn_send(struct conn *c, int id, const void *hdr, size_t hlen, const void *data,
			size_t dlen);
/* Connect to "host:port"; then say HELLO as role. 0 or -errno. */
int gm_remote_conn_connect(struct gm_remote_net *n, const char *addr, struct conn **out);
int gm_remote_conn_hello(struct conn *c, int role, uint64_t token);

#endif
