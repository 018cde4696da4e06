/*
 * conn.h - the remote plugin's connections (conn.c): one UCP context and its
 * workers per process, a table of connections to other agents or remote
 * workers, and the sending and receiving of messages (msg.h).
 *
 * The idea: both processes that speak the protocol, the node agent (agent.h)
 * and a remote worker process (worker.c), own one struct gm_remote_net and
 * nothing else of each other's state. A connection exists only once the
 * handshake on the control port succeeded (ctl.h): its UCX endpoint is made
 * then, to the worker address the other side sent there. The layer hands every
 * message, checked against the message table (exact header size, payload only
 * where allowed; the handshake's own never come over UCX), to its owner's
 * on_msg.
 *
 * Not here: the control port and the handshake (ctl.c), accepting and --peers
 * (agent.c), leases (home.c), lent jobs (lender.c). Threads: one, the owner's
 * loop (UCS_THREAD_MODE_SINGLE).
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
#include "goldminer/util.h"

#define MAX_CONNS   256
#define AUTH_MS	    5000 /* a connection must finish its handshake within this */
#define NET_ALLOWED 64	 /* addresses UCX's own listening sockets admit */
#define NET_GUARDED 64	 /* UCX listening sockets remembered, to guard them again */

/* made (its endpoint not yet), working (the handshake on the control port came
 * first: ctl.h), dead (the owner's tick closes it) */
enum cstate { C_NEW, C_OK, C_DEAD };

struct hjob;

struct conn {
	ucp_ep_h ep;
	ucp_worker_h w; /* the worker ep lives on */
	bool own_w;	/* w is this connection's own (an agent's to a peer: ctl.h) */
	enum cstate st;
	bool outgoing; /* we connected (to a peer agent, or a worker to its home) */
	int role;      /* the other side's, as its HELLO said */
	char ip[INET6_ADDRSTRLEN];
	int64_t since_ms;
	int64_t heard_ms;   /* its last message (or its making): its liveness (agent.c) */
	uint32_t port;	    /* the other agent's control port (a worker's: its lender's) */
	struct m_beat beat; /* an agent's last heartbeat (seq 0: none yet) */
	/* the TLS session it was made in (tls.h): its id and exported secret
	 * (an agent's: the remote workers it lends for us, or we for it, prove it) */
	uint8_t sid[SESSION_ID], xs[SESSION_KEY];
	char why[256]; /* why it died */
	int peer;      /* index in peers[] for an outgoing agent connection, else -1 */
	/* a remote worker's connection at its home */
	uint64_t token;
	struct hjob *job;
	uint32_t vpid, slot, nb; /* the lease it holds (vpid 0: none) */
	uint64_t task;
	int64_t lease_ms;	/* last progress on the lease (a sample at a new position) */
	int64_t lease_since_ms; /* when it got the lease (its bound: home.c) */
	bool resent_said;	/* a sample sent again in this lease was logged */
	/* the lease it asked for ahead while it makes the one above (vpid 0:
	 * none): it takes that one's place at its publish (home.c) */
	struct {
		uint32_t vpid, slot, nb;
		uint64_t task;
	} ahead;
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
	ucp_worker_h w; /* the main one: every incoming connection's */
	int efd;	/* its event fd, -1: none */
	int epfd;	/* an epoll set every worker's event fd joins (-1: none; the agent's) */
	struct gm_auth_key key; /* the group secret's (an agent), its own (a remote worker) */
	struct ssl_ctx_st *tls_cli, *tls_srv; /* the control port's TLS contexts (tls.h) */
	/* the only sources UCX's own listening sockets admit (ctl.h, the guard) */
	char allowed[NET_ALLOWED][INET6_ADDRSTRLEN];
	int nallowed;
	unsigned long guarded[NET_GUARDED]; /* the inodes of the sockets guarded */
	int nguarded;
	/* the operator's --unguarded-ucx: where the kernel refuses the socket
	 * filter (EPERM, EACCES: it wants CAP_NET_ADMIN), UCX's ports are left
	 * open (a firewall's job) instead of the worker failing */
	bool unguarded_ok;
	/* the guard in force on UCX's ports (UNSET until the main worker is
	 * made; NO_PORTS: UCX listens on none, no tcp in UCX_TLS; ACCEPT: the
	 * kernel refused the filter and the goldminer program's accept closes a
	 * stranger's connection before UCX reads it, cmd/accept_guard.c), the
	 * errno the filter was refused with (OPEN, ACCEPT), and the ports the main
	 * worker listens on */
	enum net_guard {
		GUARD_UNSET,
		GUARD_FILTER,
		GUARD_NO_PORTS,
		GUARD_OPEN,
		GUARD_ACCEPT
	} guard;
	int guard_errno;
	uint16_t ucx_ports[8];
	int nucx_ports;
	struct conn *conns[MAX_CONNS];
	struct am_arg am[AM_N];
	int verbose;
	void (*log)(void *arg, const char *line);
	void *log_arg;
	/* the owner's: every message after the handshake, and (a home) the job a
	 * remote worker names in its HELLO (NULL: none here) */
	gm_remote_on_msg_fn *on_msg;
	struct hjob *(*job_of)(void *owner, uint64_t token);
	void (*unlisten)(void *owner); /* close the owner's listener, if it has one */
	/* whether the agent at ip with control port port is one of --peers (NULL:
	 * any; an agent's own handshake checks the rest, ctl.h) */
	bool (*admit)(void *owner, const char *ip, uint32_t port);
	/* agents authenticate by certificates (--tls-cert, tls.h) instead of
	 * keys from the group secret; then the name --peers gives the agent at
	 * ip with control port port ("" or NULL: none but its address), which its
	 * certificate may name instead of the address */
	bool certs;
	const char *(*peer_name)(void *owner, const char *ip, uint32_t port);
	void *owner;
	/* the lines a remote party can cause, limited per address (ratelog.h;
	 * NULL: every line said): gm_remote_logf_from */
	struct gm_ratelog *ratelog;
};

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
/* A line a remote party at addr can cause (a refusal, a failed handshake, a
 * bad frame or message): through n->ratelog, a few per address per window,
 * then one "N more like this from ADDR" line when the window ends (said by
 * the next line or gm_remote_logs_flush). */
void gm_remote_logf_from(struct gm_remote_net *n, const char *addr, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The summaries of the windows ended by now (INT64_MAX: all, at the stop). */
void gm_remote_logs_flush(struct gm_remote_net *n, int64_t now);
/* A UCX status as -errno. */
int gm_remote_st_errno(ucs_status_t st);
/* "host:port" -> a socket address (numeric ip into ip when not NULL). 0 or -EINVAL. */
int gm_remote_parse_addr(const char *s, struct sockaddr_storage *ss, socklen_t *sl, char *ip,
			 size_t iplen);

/* The UCP context and the main worker (wakeup: with an event fd), set
 * n->allowed first (the guard). 0 or -errno with err. fini frees every
 * connection, then (unlisten) the owner's listener, then the worker and the
 * context. */
int gm_remote_net_init(struct gm_remote_net *n, bool wakeup, char *err, size_t errlen);
void gm_remote_net_fini(struct gm_remote_net *n);
/* A UCP worker on n's context: every message's handler registered, its event
 * fd in n->epfd (when there is one), and the guard on the sockets it listens
 * on (only n->allowed may connect). A kernel that refuses the guard (EPERM,
 * EACCES) fails it, naming the fixes, unless n->unguarded_ok: then its ports
 * stay open (n->guard GUARD_OPEN). 0 or -errno with err. */
int gm_remote_net_worker(struct gm_remote_net *n, ucp_worker_h *w, char *err, size_t errlen);
/* The guard again on every UCX listening socket of n's workers, with
 * n->allowed as it is now (it changed). The number filtered (0 where UCX's
 * ports are left open: GUARD_OPEN), or -errno. */
int gm_remote_net_reguard(struct gm_remote_net *n);
/* The one line that says which guard is in force on n's UCX ports and why,
 * into buf (the agent logs it at start). */
void gm_remote_net_guard_line(const struct gm_remote_net *n, char *buf, size_t len);
/* Progress every worker (the main one and the connections' own) until none has
 * more to do, or 10 ms have gone (each at least once: the caller's loop beats
 * between calls); arm them all for the event fds. arm: false when one is busy
 * (progress again before sleeping). */
void gm_remote_net_progress(struct gm_remote_net *n);
bool gm_remote_net_arm(struct gm_remote_net *n);
/* Nothing left to progress on n's main worker: block on its event fd (a net
 * made with wakeup) until its next event or ms (at most 20) pass; a net
 * without one sleeps 50 us. */
void gm_remote_net_idle(struct gm_remote_net *n, int ms);
/* A remote worker's wait on its one connection c: progress n's main worker
 * (gm_remote_net_idle when it had nothing to do) until done(arg) holds (0), c is
 * dead (-ECONNRESET) or ms passed (-ETIMEDOUT; ms < 0: no limit). done is
 * asked first, so what completed as c died counts as done. */
int gm_remote_net_wait(struct gm_remote_net *n, const struct conn *c, bool (*done)(const void *),
		       const void *arg, int ms);

/* A connection in the table (NULL: full or no memory); its endpoint is made by
 * gm_remote_conn_ep, on c->w (set it first), to a worker address the other side
 * sent on the control port (len bytes; UCX reads it). 0 or -errno. */
struct conn *gm_remote_conn_new(struct gm_remote_net *n, bool outgoing, const char *ip);
int gm_remote_conn_ep(struct gm_remote_net *n, struct conn *c, const void *addr, size_t len);
void gm_remote_conn_lost(void *arg, ucp_ep_h ep, ucs_status_t status);
/* Mark c dead with why (the owner's tick closes it); nothing if it is already. */
void gm_remote_conn_kill(struct conn *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Tell the remote worker at the other end of c that its connection ends, and
 * why (c->why: call it after gm_remote_conn_kill, before gm_remote_conn_close,
 * which would drop the message), waiting BYE_MS at most for the send. */
void gm_remote_conn_bye(struct conn *c);
/* Close c's endpoint by force and wait (200 ms at most) until UCX has. */
void gm_remote_conn_close(struct gm_remote_net *n, struct conn *c);
/* Close the endpoint by force and free c (and its own worker). */
void gm_remote_conn_free(struct gm_remote_net *n, struct conn *c);
/* Send a message (header and payload copied). 0 or -errno (c is then dead). */
int gm_remote_conn_send(struct conn *c, int id, const void *hdr, size_t hlen, const void *data,
			size_t dlen);

#endif
