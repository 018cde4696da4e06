/*
 * ctl.h - the remote plugin's control port (ctl.c): where agents and remote
 * workers meet before any UCX endpoint exists between them, and the guard on
 * the ports UCX itself listens on.
 *
 * The idea: UCX's own connection listener (ucp_listener, its TCP sockaddr
 * connection manager) must not face the network: any host that reaches it can
 * abort the agent (UCX 1.13, tcp_sockcm_ep.c) or hold its descriptors. So the
 * --listen port is a plain TCP socket of ours. A connection is accepted, its
 * source address checked against --peers at once (a stranger is reset before
 * a byte is read), then it has AUTH_MS in all to finish:
 *
 *   1. a TLS 1.3 handshake with a pre-shared key (tls.h): the client's PSK
 *      identity says who it is ("goldminer/V agent IP:PORT", or a remote
 *      worker's "goldminer/V worker SESSION JOB"); the server admits an agent
 *      only if IP is the connection's source, IP:PORT is one of --peers (the
 *      owner's admit) and it is not the server's own identity, and a worker
 *      only for a live session with that source; the key is derived for that
 *      ordered pair, so a handshake relayed back to the agent that started it
 *      never verifies;
 *   2. inside TLS, HELLO (magic, version, role, port, token) and the client's
 *      UCX worker address -> WELCOME (status + the server's worker address).
 *
 * Only then does each side make one UCX endpoint to the other's worker address
 * (ucp_ep_create with UCP_EP_PARAM_FIELD_REMOTE_ADDRESS) and the TCP
 * connection is closed: every later message goes over UCX (conn.h), so RDMA
 * transports keep working. The session's exported secret stays with the
 * connection (conn.h): the remote workers a lender starts for the home prove
 * it (tls.h).
 *
 * Frames inside TLS: a header {type, len} (two uint32) and len bytes; the type
 * must be the one the state waits for and len the message plus 1..CTL_ADDR_MAX
 * address bytes (a refusing WELCOME: none), checked before the body is read.
 * Unauthenticated connections are bounded: CTL_MAX in all, CTL_PER_ADDR from
 * one address, each with fixed buffers.
 *
 * One UCX endpoint pair per pair of UCP workers: UCX pairs the endpoints two
 * workers make to each other in the order they make them, so two logical
 * connections between the same two workers could be crossed. An agent's
 * connection to a peer therefore gets a UCP worker of its own (made when the
 * handshake reaches AUTH, destroyed with the connection); incoming connections
 * share the agent's main worker, and each remote worker process has its own.
 *
 * The guard: UCX's TCP transport listens on its own ports (one per device of
 * UCX_NET_DEVICES, bound to that device's address; connections between
 * workers come there). UCX 1.13 has no setting that restricts who may connect,
 * so every listening socket a UCP worker opened gets a socket filter (classic
 * BPF, SO_ATTACH_FILTER) that drops any packet whose source is not a --peers
 * address (for a remote worker process: its home's): a stranger's SYN never
 * makes a connection, UCX never sees it. A kernel may refuse the filter to a
 * process without CAP_NET_ADMIN (EPERM): conn.c then fails the worker, or,
 * under --unguarded-ucx, leaves the ports to the operator's firewall; there
 * is no guard without privilege (UCX accepts on these sockets itself).
 *
 * Not here: what a connection carries after the handshake (conn.c), --peers
 * and the tick (agent.c). Threads: the owner's loop only.
 */
#ifndef GM_REMOTE_CTL_H
#define GM_REMOTE_CTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "conn.h"
#include "tls.h"

#define CTL_MAX	     128  /* unauthenticated control connections, in all */
#define CTL_PER_ADDR 32	  /* ... from one address */
#define CTL_ADDR_MAX 4096 /* the longest UCX worker address taken from the wire */
#define CTL_ACCEPTS  512  /* connections accepted per service round, at most */
#define CTL_FRAME    (sizeof(struct m_welcome) + CTL_ADDR_MAX) /* the longest body */

enum ctl_type { CTL_HELLO = 1, CTL_WELCOME };

/* One control connection, until its UCX endpoint exists (then it is freed). */
struct ctl {
	int fd;
	bool client;
	bool connecting;      /* a client's connect() not completed yet */
	bool close_when_sent; /* the server's last frame (a WELCOME) */
	bool want_write;      /* TLS waits for the socket to take bytes */
	bool peeked;	      /* a server saw the first byte: a TLS record */
	enum ctl_type want;   /* the frame it waits for (0: the TLS handshake first) */
	int role, peer;	      /* the client's role; its peers[] index (agent's client) */
	uint64_t token;
	uint32_t port; /* the HELLO's port: a client's to send, a server's as received */
	bool certd; /* a server's client authenticated by a certificate (its port: the HELLO's) */
	char name[256]; /* an agent's client with certificates: the --peers name it dialed */
	SSL *ssl;
	struct tls_side tls;	  /* its identity and key (tls.h) */
	char self_id[TLS_ID_MAX]; /* this end's identity (a server: as the client sees it) */
	uint8_t sid[SESSION_ID];  /* the session (a worker's client: its lender's) */
	uint8_t xs[SESSION_KEY];  /* the session's exported secret, once done */
	struct gm_remote_net *n;  /* (for the server's PSK choice) */
	char ip[INET6_ADDRSTRLEN];
	int64_t since_ms;
	uint32_t hdr[2]; /* the frame being read: type, len */
	size_t got;	 /* bytes of it read (header first) */
	unsigned char in[CTL_FRAME];
	unsigned char out[8 + CTL_FRAME];
	size_t outlen, outoff;
	ucp_worker_h w; /* the worker its endpoint will be made on */
	bool own_w;	/* w is this connection's own (then destroyed with it) */
	int status;	/* 0 while it runs; 1 done (c made); -errno failed (why) */
	struct conn *c; /* the connection made, once done */
	char why[256];
};

/* Open the control port on addr ("ADDR:PORT", PORT 0: any; SO_REUSEADDR, so a
 * port left in TIME_WAIT by an agent that just stopped is taken at once).
 * 0 or -errno with err; *fd the listening socket, *port the port. */
int gm_remote_ctl_listen(const char *addr, int *fd, uint16_t *port, char *err, size_t errlen);

/* A connection accepted from ip (fd taken over, non-blocking): the server's
 * side of the handshake starts. NULL (fd closed) on no memory. */
struct ctl *gm_remote_ctl_accepted(int fd, const char *ip);

/* Connect to "host:port" (non-blocking) as role with token; w: the worker the
 * endpoint will live on, NULL: one of its own, made when the handshake gets
 * there and destroyed with the connection. An agent's client sets x->port (its
 * control port: its identity) before the first step; a worker's, x->sid. 0 or
 * -errno (*out NULL). */
int gm_remote_ctl_dial(const char *addr, int role, uint64_t token, ucp_worker_h w,
		       struct ctl **out);

/* A remote worker process's connection to its home (ROLE_WORKER, token: the
 * job, lport: its lender's control port, which the home knows it by, sid: the
 * session of its lender with the home; n->key is the worker's own key, tls.h),
 * on n's main worker: the whole handshake, waiting (AUTH_MS at most). 0 (*out
 * the connection) or -errno with err. */
int gm_remote_ctl_connect(struct gm_remote_net *n, const char *addr, uint64_t token, uint32_t lport,
			  const uint8_t sid[SESSION_ID], struct conn **out, char *err,
			  size_t errlen);

/* Move x on as far as its socket allows, without blocking; on success x->c is
 * the new connection (in n's table, endpoint made). x->status then: 0 still
 * running, 1 done, -errno failed (x->why says why). Past AUTH_MS since it
 * started it fails (-ETIMEDOUT). Afterwards free it. */
void gm_remote_ctl_step(struct gm_remote_net *n, struct ctl *x);
/* Which poll events x waits for (POLLIN, POLLOUT). */
short gm_remote_ctl_events(const struct ctl *x);
void gm_remote_ctl_free(struct ctl *x);

/* The guard. gm_remote_ctl_listeners(ino, max): the inodes of this process's
 * listening IPv4/IPv6 TCP sockets now (count). gm_remote_ctl_guard: a socket
 * filter on every such socket not in before[] that admits only packets from
 * the addresses ips[0..nips) (numeric; IPv4, IPv6 or v4-mapped IPv6): the
 * number filtered, or -errno. */
int gm_remote_ctl_listeners(unsigned long *ino, int max);
/* The local ports of this process's listening IPv4/IPv6 TCP sockets not in
 * before[] (count, at most max), or -errno. */
int gm_remote_ctl_ports(const unsigned long *before, int nbefore, uint16_t *port, int max);
int gm_remote_ctl_guard(const unsigned long *before, int nbefore,
			const char (*ips)[INET6_ADDRSTRLEN], int nips);
/* The same filter again, on the sockets ino[0..nino) that still exist (the
 * addresses changed: discovery, agent.c). The number filtered, or -errno. */
int gm_remote_ctl_reguard(const unsigned long *ino, int nino, const char (*ips)[INET6_ADDRSTRLEN],
			  int nips);

#endif
