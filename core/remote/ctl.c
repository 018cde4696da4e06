/*
 * ctl.c - the remote plugin's control port (ctl.h): a plain TCP listener of
 * ours on --listen, TLS 1.3 with per-pair pre-shared keys over it (tls.h), the
 * exchange of UCX worker addresses inside TLS that follows, and the guard on
 * UCX's own listening sockets.
 *
 * The idea: nothing of UCX is reachable before a peer has proved the secret,
 * by a standard protocol. A connection is a small state machine driven by its
 * socket's readiness (never blocking): a server first looks at one byte (TLS,
 * or an older goldminer's frame: refused in words), then OpenSSL runs the
 * handshake, asking server_psk for the key of the identity the client
 * presents (who may connect is decided there, before any key is used); inside
 * TLS each frame's header is checked (the type the state waits for, the
 * length) before its body is read into a fixed buffer, and the whole exchange
 * must end within AUTH_MS of the connection's start, so a silent or
 * slow-dripping connection is closed whatever it sends.
 *
 * Not here: the source-address check and the limits on connections (agent.c,
 * which knows --peers and counts them), what a connection carries afterwards
 * (conn.c).
 */

#include "ctl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/err.h>

#include "auth.h"
#include "check.h"
#include "goldminer/util.h"
#include "goldminer/version.h"
#include "msg.h"

/* ---- the listener and the connections ---------------------------------------- */

int gm_remote_ctl_listen(const char *addr, int *fd, uint16_t *port, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	int one = 1, s = -1, rc;
	if (gm_remote_parse_addr(addr, &ss, &sl, NULL, 0)) {
		gm_errf(err, errlen, "--listen: '%s' is not ADDR:PORT", addr);
		return -EINVAL;
	}
	s = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s < 0 || setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(s, (struct sockaddr *)&ss, sl) || listen(s, SOMAXCONN) ||
	    getsockname(s, (struct sockaddr *)&ss, &sl)) {
		rc = -errno;
		gm_errf(err, errlen,
			"--listen %s: %s (is it an address of this host, and the port free?)", addr,
			strerror(-rc));
		if (s >= 0)
			close(s);
		return rc;
	}
	*fd = s;
	*port = ntohs(((struct sockaddr_in *)&ss)->sin_port); /* same offset in v6 */
	return 0;
}

static struct ctl *ctl_new(int fd, const char *ip)
{
	struct ctl *x = calloc(1, sizeof(*x));
	int one = 1;
	if (!x)
		return NULL;
	/* the handshake's small records leave at once, not after a delayed ACK */
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	x->fd = fd;
	x->peer = -1;
	x->since_ms = gm_now_ms();
	copy_str(x->ip, sizeof(x->ip), ip);
	return x;
}

static int server_psk(struct tls_side *t, const char *id, struct gm_auth_key *key);

struct ctl *gm_remote_ctl_accepted(int fd, const char *ip)
{
	struct ctl *x = ctl_new(fd, ip);
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	if (!x) {
		close(fd);
		return NULL;
	}
	/* who this agent is to the client: the address it connected to (our
	 * identity in the pair's key, and the one a client must not present) */
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) ||
	    gm_remote_tls_agent_id(x->self_id, sizeof(x->self_id), (struct sockaddr *)&ss,
				   ntohs(((struct sockaddr_in *)&ss)->sin_port)) < 0)
		x->self_id[0] = '\0'; /* (not an IP socket: no agent can be admitted) */
	x->tls.psk = server_psk;
	return x;
}

void gm_remote_ctl_free(struct ctl *x)
{
	if (!x)
		return;
	SSL_free(x->ssl);
	if (x->fd >= 0)
		close(x->fd);
	if (x->own_w && x->w)
		ucp_worker_destroy(x->w);
	gm_auth_wipe(&x->tls.key);
	OPENSSL_cleanse(x->xs, sizeof(x->xs));
	free(x);
}

int gm_remote_ctl_dial(const char *addr, int role, uint64_t token, ucp_worker_h w, struct ctl **out)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	char ip[INET6_ADDRSTRLEN];
	*out = NULL;
	if (gm_remote_parse_addr(addr, &ss, &sl, ip, sizeof(ip)))
		return -EINVAL;
	int s = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	if (connect(s, (struct sockaddr *)&ss, sl) && errno != EINPROGRESS) {
		int rc = -errno;
		close(s);
		return rc;
	}
	struct ctl *x = ctl_new(s, ip);
	if (!x) {
		close(s);
		return -ENOMEM;
	}
	x->client = true;
	x->connecting = true;
	x->role = role;
	x->token = token;
	x->w = w;
	*out = x;
	return 0;
}

short gm_remote_ctl_events(const struct ctl *x)
{
	return (short)(x->connecting || x->want_write || x->outoff < x->outlen ? POLLOUT : POLLIN);
}

static void ctl_fail(struct ctl *x, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void ctl_fail(struct ctl *x, int rc, const char *fmt, ...)
{
	if (x->status)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(x->why, sizeof(x->why), fmt, ap);
	va_end(ap);
	x->status = rc;
}

/* Queue one frame (the last one sent has left: one frame in flight at a time). */
static void ctl_put(struct ctl *x, enum ctl_type type, const void *m, size_t mlen, const void *addr,
		    size_t alen)
{
	uint32_t hdr[2] = {(uint32_t)type, (uint32_t)(mlen + alen)};
	memcpy(x->out, hdr, sizeof(hdr));
	memcpy(x->out + sizeof(hdr), m, mlen);
	if (alen)
		memcpy(x->out + sizeof(hdr) + mlen, addr, alen);
	x->outlen = sizeof(hdr) + mlen + alen;
	x->outoff = 0;
}

/* ---- who may connect: the server's choice of key -------------------------------- */

/* The live agent connection of session sid from ip (a remote worker's lender). */
static struct conn *session_of(struct gm_remote_net *n, const uint8_t sid[SESSION_ID],
			       const char *ip)
{
	for (int i = 0; i < MAX_CONNS; i++) {
		struct conn *c = n->conns[i];
		if (c && c->st == C_OK && c->role == ROLE_AGENT && !strcmp(c->ip, ip) &&
		    !CRYPTO_memcmp(c->sid, sid, SESSION_ID))
			return c;
	}
	return NULL;
}

/* The key for a client that names itself id (tls.h), or a refusal in t->why:
 * another version; an agent whose identity is not its connection's source, is
 * this agent's own (a reflected handshake) or is not one of --peers; a remote
 * worker for a session this agent does not have with that address. */
static int server_psk(struct tls_side *t, const char *id, struct gm_auth_key *key)
{
	struct ctl *x = (struct ctl *)((char *)t - offsetof(struct ctl, tls));
	struct gm_remote_net *n = x->n;
	struct tls_id who;
	const char *why = NULL;
	int rc = gm_remote_tls_parse_id(id, strlen(id), &who);
	memset(key, 0, sizeof(*key));
	if (rc == -EPROTONOSUPPORT) {
		t->status = -EPROTO;
		gm_errf(t->why, sizeof(t->why),
			"refused %s: another goldminer version (it speaks the remote protocol %u, "
			"this agent %u: goldminer %s): run the same goldminer on every host",
			x->ip, who.version, MSG_VERSION, gm_version());
		return t->status;
	}
	if (rc)
		why = "not a goldminer peer (its TLS identity is not ours)";
	else if (who.role == ROLE_AGENT && n->certs)
		why = "it offers a key from the group secret (--secret), and this agent "
		      "takes agents by certificate (--tls-cert): give every agent the same kind";
	else if (who.role == ROLE_AGENT && strcmp(who.ip, x->ip))
		why = "its identity names another address";
	else if (who.role == ROLE_AGENT && (!x->self_id[0] || !strcmp(id, x->self_id)))
		why = "its identity is this agent's own (its own handshake sent back to it)";
	else if (who.role == ROLE_AGENT && n->admit && !n->admit(n->owner, who.ip, who.port))
		why = "its address and port are not one of --peers";
	else if (who.role == ROLE_WORKER && !session_of(n, who.sid, x->ip))
		why = "a remote worker for a session this agent does not have with that host "
		      "(its lender reconnected or is gone)";
	if (why) {
		t->status = -EACCES;
		gm_errf(t->why, sizeof(t->why), "refused %s: %s (it names itself '%s')", x->ip, why,
			id);
		return t->status;
	}
	x->role = who.role;
	if (who.role == ROLE_WORKER) {
		x->token = who.token;
		memcpy(x->sid, who.sid, sizeof(x->sid));
		rc = gm_remote_tls_worker_key(session_of(n, who.sid, x->ip)->xs, id, key);
	} else {
		x->port = who.port;
		rc = gm_remote_tls_agent_key(&n->key, id, x->self_id, key);
	}
	if (rc) {
		t->status = rc;
		gm_errf(t->why, sizeof(t->why), "refused %s: no key (%s)", x->ip, strerror(-rc));
	}
	return rc;
}

/* ---- the handshake ------------------------------------------------------------ */

/* Our worker's address after a message m into x->out (0 or -errno). */
static int put_with_address(struct ctl *x, enum ctl_type type, const void *m, size_t mlen)
{
	ucp_address_t *a = NULL;
	size_t alen = 0;
	ucs_status_t st = ucp_worker_get_address(x->w, &a, &alen);
	if (st != UCS_OK)
		return gm_remote_st_errno(st);
	if (alen > CTL_ADDR_MAX) {
		ucp_worker_release_address(x->w, a);
		return -E2BIG;
	}
	ctl_put(x, type, m, mlen, a, alen);
	ucp_worker_release_address(x->w, a);
	return 0;
}

/* The client's HELLO, once TLS has authenticated the server (our worker made
 * first when the connection is to have its own). */
static void send_hello(struct gm_remote_net *n, struct ctl *x)
{
	char err[256];
	struct m_hello h = {.magic = MSG_MAGIC,
			    .version = MSG_VERSION,
			    .role = (uint32_t)x->role,
			    .port = x->port,
			    .token = x->token};
	if (!x->w) { /* an agent's connection to a peer: a worker of its own */
		int rc = gm_remote_net_worker(n, &x->w, err, sizeof(err));
		if (rc) {
			ctl_fail(x, rc, "%s", err);
			return;
		}
		x->own_w = true;
	}
	int rc = put_with_address(x, CTL_HELLO, &h, sizeof(h));
	if (rc)
		ctl_fail(x, rc, "our UCX worker address: %s", strerror(-rc));
	x->want = CTL_WELCOME;
}

/* The connection x becomes, its endpoint made to the address it sent. */
static struct conn *make_conn(struct gm_remote_net *n, struct ctl *x, const void *addr, size_t alen,
			      char *why, size_t wl)
{
	struct conn *c = gm_remote_conn_new(n, x->client, x->ip);
	if (!c) {
		gm_errf(why, wl, "too many connections");
		return NULL;
	}
	c->role = x->role;
	c->token = x->token;
	c->peer = x->peer;
	c->port = x->client ? 0 : x->port;
	c->w = x->w;
	memcpy(c->sid, x->sid, sizeof(c->sid));
	memcpy(c->xs, x->xs, sizeof(c->xs));
	int rc = gm_remote_conn_ep(n, c, addr, alen);
	if (rc) {
		gm_errf(why, wl, "no UCX endpoint to its worker address: %s", strerror(-rc));
		gm_remote_conn_free(n, c);
		return NULL;
	}
	c->own_w = x->own_w; /* the worker is the connection's from now on */
	x->own_w = false;
	c->st = C_OK;
	return c;
}

/* An agent's HELLO after its certificate: the port it names and its address
 * one of --peers, its certificate naming that address or that peer's name. */
static int cert_refusal(struct ctl *x, const struct m_hello *h, struct m_welcome *wm)
{
	struct gm_remote_net *n = x->n;
	const char *name = n->peer_name ? n->peer_name(n->owner, x->ip, h->port) : NULL;
	x->port = h->port;
	if (n->admit && !n->admit(n->owner, x->ip, h->port)) {
		snprintf(wm->msg, sizeof(wm->msg),
			 "refused: its address and port (%s:%u) are not one of --peers", x->ip,
			 h->port);
		return -EACCES;
	}
	if (!gm_remote_tls_cert_names(SSL_get0_peer_certificate(x->ssl), x->ip, name)) {
		snprintf(wm->msg, sizeof(wm->msg),
			 "refused: its certificate names neither %s nor '%s' (its address, its "
			 "--peers name)",
			 x->ip, name ? name : "");
		return -EACCES;
	}
	return 0;
}

/* A HELLO inside TLS: its version, its role against the identity's. */
static int hello_refusal(struct ctl *x, const struct m_hello *h, struct m_welcome *wm)
{
	if (h->magic != MSG_MAGIC || h->version != MSG_VERSION) {
		snprintf(
		    wm->msg, sizeof(wm->msg),
		    "refused: another goldminer version (remote protocol %u here, goldminer %s)",
		    MSG_VERSION, gm_version());
		return -EPROTO;
	}
	if (h->role != (uint32_t)x->role || (x->role == ROLE_WORKER && h->token != x->token)) {
		snprintf(wm->msg, sizeof(wm->msg), "refused: its hello contradicts its identity");
		return -EPROTO;
	}
	if (x->certd)
		return cert_refusal(x, h, wm);
	if (x->role == ROLE_AGENT && h->port != x->port) {
		snprintf(wm->msg, sizeof(wm->msg), "refused: its hello names another port");
		return -EPROTO;
	}
	return 0;
}

static void on_hello(struct gm_remote_net *n, struct ctl *x, const unsigned char *body, size_t len)
{
	struct m_hello h;
	struct m_welcome wm = {0};
	memcpy(&h, body, sizeof(h));
	x->want = 0; /* nothing more is read */
	struct hjob *job = NULL;
	wm.status = hello_refusal(x, &h, &wm);
	if (!wm.status && x->role == ROLE_WORKER) {
		job = n->job_of ? n->job_of(n->owner, x->token) : NULL;
		if (!job) {
			wm.status = -ENOENT;
			snprintf(wm.msg, sizeof(wm.msg), "no such job here (it ended)");
		}
	}
	if (x->role == ROLE_WORKER)
		x->port = h.port; /* (a number only: its lender's, as the lender said) */
	x->w = n->w;
	if (!wm.status &&
	    !(x->c = make_conn(n, x, body + sizeof(h), len - sizeof(h), wm.msg, sizeof(wm.msg))))
		wm.status = -EAGAIN;
	if (wm.status) {
		ctl_put(x, CTL_WELCOME, &wm, sizeof(wm), NULL, 0);
		ctl_fail(x, wm.status, "%s at %s: %s",
			 x->role == ROLE_AGENT ? "agent" : "remote worker", x->ip, wm.msg);
		return;
	}
	x->c->job = job;
	int rc = put_with_address(x, CTL_WELCOME, &wm, sizeof(wm));
	if (rc) { /* the endpoint exists: UCX tells the peer when it closes */
		gm_remote_conn_kill(x->c, "our UCX worker address: %s", strerror(-rc));
		ctl_fail(x, rc, "our UCX worker address: %s", strerror(-rc));
		return;
	}
	x->close_when_sent = true;
	gm_remote_logf(n, "%s at %s authenticated",
		       x->role == ROLE_AGENT ? "agent" : "remote worker", x->ip);
}

static void on_welcome(struct gm_remote_net *n, struct ctl *x, const unsigned char *body,
		       size_t len)
{
	struct m_welcome wm;
	char why[256], words[sizeof(wm.msg) + 1];
	memcpy(&wm, body, sizeof(wm));
	x->want = 0;
	if (wm.status) { /* its words are logged: only what prints */
		gm_remote_check_words(words, wm.msg, sizeof(wm.msg));
		ctl_fail(x, wm.status < 0 && wm.status > -4096 ? wm.status : -EPROTO, "%s %s",
			 x->ip, words);
		return;
	}
	if (len == sizeof(wm)) {
		ctl_fail(x, -EPROTO, "%s: a welcome without an address", x->ip);
		return;
	}
	x->c = make_conn(n, x, body + sizeof(wm), len - sizeof(wm), why, sizeof(why));
	if (!x->c) {
		ctl_fail(x, -ECONNREFUSED, "%s: %s", x->ip, why);
		return;
	}
	x->status = 1;
}

/* ---- reading and writing ----------------------------------------------------- */

/* A frame's exact length range for the type the state waits for. */
static bool frame_ok(const struct ctl *x, uint32_t type, uint32_t len)
{
	if (type != (uint32_t)x->want)
		return false;
	switch (type) {
	case CTL_HELLO:
		return len > sizeof(struct m_hello) && len <= sizeof(struct m_hello) + CTL_ADDR_MAX;
	case CTL_WELCOME:
		return len >= sizeof(struct m_welcome) &&
		       len <= sizeof(struct m_welcome) + CTL_ADDR_MAX;
	default:
		return false;
	}
}

static void on_frame(struct gm_remote_net *n, struct ctl *x)
{
	size_t len = x->hdr[1];
	x->got = 0;
	if (x->want == CTL_HELLO)
		on_hello(n, x, x->in, len);
	else if (x->want == CTL_WELCOME)
		on_welcome(n, x, x->in, len);
}

static void ctl_closed(struct ctl *x)
{
	char tls[200];
	gm_remote_tls_why(x->ssl, tls, sizeof(tls), x->client,
			  x->n && x->n->certs && x->role != ROLE_WORKER);
	if (x->tls.status)
		ctl_fail(x, x->tls.status, "%s", x->tls.why);
	else if (tls[0])
		ctl_fail(x, x->client ? -EACCES : -EPROTO, "%s %s: %s",
			 x->client ? "handshake with" : "refused", x->ip, tls);
	else
		ctl_fail(x, -ECONNRESET, "%s closed the connection during the handshake", x->ip);
}

/* Read what has come, one frame at a time: the header, checked, then its body. */
static void ctl_read(struct gm_remote_net *n, struct ctl *x)
{
	while (!x->status && x->want && x->outoff == x->outlen) {
		bool in_hdr = x->got < sizeof(x->hdr);
		size_t need =
		    in_hdr ? sizeof(x->hdr) - x->got : sizeof(x->hdr) + x->hdr[1] - x->got;
		unsigned char *dst =
		    in_hdr ? (unsigned char *)x->hdr + x->got : x->in + (x->got - sizeof(x->hdr));
		ERR_clear_error();
		int k = gm_remote_tls_io(x->ssl, SSL_read(x->ssl, dst, (int)need), &x->want_write);
		if (k < 0) {
			ctl_closed(x);
			return;
		}
		if (k == 0)
			return;
		x->got += (size_t)k;
		if (in_hdr && x->got == sizeof(x->hdr) && !frame_ok(x, x->hdr[0], x->hdr[1])) {
			ctl_fail(x, -EPROTO,
				 "refused %s: not a goldminer %s peer (frame %u of %u bytes)",
				 x->ip, gm_version(), x->hdr[0], x->hdr[1]);
			return;
		}
		if (!in_hdr && x->got == sizeof(x->hdr) + x->hdr[1])
			on_frame(n, x);
	}
}

/* Send what is queued; a frame that has left may end the connection's part. */
static void ctl_write(struct ctl *x)
{
	while (x->outoff < x->outlen) {
		ERR_clear_error();
		int k = gm_remote_tls_io(
		    x->ssl, SSL_write(x->ssl, x->out + x->outoff, (int)(x->outlen - x->outoff)),
		    &x->want_write);
		if (k == 0)
			return;
		if (k < 0) {
			if (x->close_when_sent) /* the endpoint exists: UCX takes it from here */
				x->status = 1;
			ctl_closed(x);
			return;
		}
		x->outoff += (size_t)k;
	}
	x->want_write = false;
	if (x->close_when_sent)
		x->status = 1;
}

/* A client's connect() completed: its identity and key, then its TLS. */
static void ctl_connected(struct gm_remote_net *n, struct ctl *x)
{
	struct pollfd p = {.fd = x->fd, .events = POLLOUT};
	struct sockaddr_storage me, them;
	socklen_t ml = sizeof(me), tl = sizeof(them);
	char peer_id[TLS_ID_MAX];
	int e = 0, rc;
	socklen_t el = sizeof(e);
	if (poll(&p, 1, 0) <= 0)
		return;
	if (getsockopt(x->fd, SOL_SOCKET, SO_ERROR, &e, &el) || e) {
		ctl_fail(x, -(e ? e : errno), "cannot connect: %s", strerror(e ? e : errno));
		return;
	}
	x->connecting = false;
	if (x->role == ROLE_WORKER) { /* its key is n's: its lender derived it */
		rc = gm_remote_tls_worker_id(x->tls.id, sizeof(x->tls.id), x->sid, x->token);
		x->tls.key = n->key;
	} else {
		rc = getsockname(x->fd, (struct sockaddr *)&me, &ml) ||
			     getpeername(x->fd, (struct sockaddr *)&them, &tl)
			 ? -errno
			 : 0;
		if (!rc)
			rc = gm_remote_tls_agent_id(x->tls.id, sizeof(x->tls.id),
						    (struct sockaddr *)&me, x->port);
		if (rc >= 0)
			rc = gm_remote_tls_agent_id(peer_id, sizeof(peer_id),
						    (struct sockaddr *)&them,
						    ntohs(((struct sockaddr_in *)&them)->sin_port));
		if (rc >= 0 && !n->certs) /* (with certificates: no key offered) */
			rc = gm_remote_tls_agent_key(&n->key, x->tls.id, peer_id, &x->tls.key);
	}
	copy_str(x->self_id, sizeof(x->self_id), x->tls.id);
	x->ssl = rc < 0 ? NULL : gm_remote_tls_new(n->tls_cli, x->fd, true, &x->tls);
	if (!x->ssl)
		ctl_fail(x, rc < 0 ? rc : -ENOMEM, "cannot start TLS: %s",
			 strerror(rc < 0 ? -rc : ENOMEM));
}

/* A server's first byte: a TLS record (0x16), or not. An agent of a version
 * before TLS starts with its HELLO frame's type, 1. */
static void server_peek(struct ctl *x)
{
	unsigned char b;
	ssize_t k = recv(x->fd, &b, 1, MSG_PEEK);
	if (k < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (k <= 0) {
		ctl_fail(x, -ECONNRESET, "%s closed the connection during the handshake", x->ip);
		return;
	}
	if (b == 1)
		ctl_fail(x, -EPROTO,
			 "refused %s: another goldminer version (an older one, whose control "
			 "port speaks no TLS; this agent: goldminer %s): run the same goldminer "
			 "on every host",
			 x->ip, gm_version());
	else if (b != 0x16)
		ctl_fail(x, -EPROTO, "refused %s: not a goldminer %s peer (not TLS)", x->ip,
			 gm_version());
	else if (!(x->ssl = gm_remote_tls_new(x->n->tls_srv, x->fd, false, &x->tls)))
		ctl_fail(x, -ENOMEM, "no memory for TLS");
	x->peeked = true;
}

/* A finished handshake's kind r (1 a PSK, 2 a certificate: tls.h) against
 * what this end takes. With certificates an agent shows one and a remote
 * worker a PSK; the certificate must not be this agent's own (its handshake
 * sent back to it), and (a client) must name the address or the --peers name
 * it dialed; the server checks the name once the HELLO says the client's
 * port (cert_refusal). */
static bool authenticated_as_expected(struct gm_remote_net *n, struct ctl *x, int r)
{
	X509 *cert = SSL_get0_peer_certificate(x->ssl);
	const char *who = x->client ? "handshake with" : "refused";
	if (r == 2 && !(n->certs && (!x->client || x->role == ROLE_AGENT)))
		ctl_fail(x, -EACCES, "%s %s: a certificate where a pre-shared key was due", who,
			 x->ip);
	else if (r == 1 && n->certs && x->client && x->role == ROLE_AGENT)
		ctl_fail(x, -EACCES, "%s %s: a pre-shared key where a certificate was due", who,
			 x->ip);
	else if (r == 2 && gm_remote_tls_own_cert(x->ssl))
		ctl_fail(x, -EACCES,
			 "%s %s: its certificate is this agent's own (its own handshake sent back "
			 "to it, or the agents share one certificate: give each its own)",
			 who, x->ip);
	else if (r == 2 && x->client && !gm_remote_tls_cert_names(cert, x->ip, x->name))
		ctl_fail(x, -EACCES,
			 "handshake with %s: its certificate names neither %s nor '%s' (the "
			 "address or name in --peers)",
			 x->ip, x->ip, x->name);
	else if (r == 2 && !x->client) {
		x->role = ROLE_AGENT;
		x->certd = true;
	}
	return !x->status;
}

/* The TLS handshake's step; once done, the session's secret, then (a client)
 * the HELLO or (a server) the wait for it. */
static void ctl_tls(struct gm_remote_net *n, struct ctl *x)
{
	int r = gm_remote_tls_handshake(x->ssl, &x->want_write);
	if (r == 0)
		return;
	if (r < 0) {
		ctl_closed(x);
		if (x->status == -ECONNRESET && x->client)
			copy_str(x->why + strlen(x->why), sizeof(x->why) - strlen(x->why),
				 " (another goldminer version, or it does not take this host as "
				 "a peer: its log says which)");
		return;
	}
	if (!authenticated_as_expected(n, x, r))
		return;
	if (gm_remote_tls_export(x->ssl, x->sid, x->xs)) {
		ctl_fail(x, -EIO, "%s: TLS exported no session secret", x->ip);
		return;
	}
	x->want_write = false;
	if (x->client)
		send_hello(n, x);
	else
		x->want = CTL_HELLO;
}

void gm_remote_ctl_step(struct gm_remote_net *n, struct ctl *x)
{
	x->n = n;
	if (!x->status && gm_now_ms() - x->since_ms >= AUTH_MS && x->connecting)
		ctl_fail(x, -ETIMEDOUT, "cannot connect: no answer within %d ms", AUTH_MS);
	if (!x->status && gm_now_ms() - x->since_ms >= AUTH_MS)
		ctl_fail(x, -ETIMEDOUT, "%s did not authenticate within %d ms", x->ip, AUTH_MS);
	if (!x->status && x->connecting)
		ctl_connected(n, x);
	if (!x->status && !x->client && !x->peeked)
		server_peek(x);
	if (!x->status && x->ssl && !x->want && !x->outlen)
		ctl_tls(n, x);
	for (int round = 0; round < 4 && !x->status && x->ssl && (x->want || x->outlen); round++) {
		ctl_write(x);
		if (x->status || x->outoff < x->outlen)
			break;
		ctl_read(n, x);
		if (x->outoff == x->outlen)
			break;
	}
	/* a refusal's WELCOME: sent if it can leave now (best effort), then closed */
	if (x->status < 0 && !x->client && x->ssl && x->outoff < x->outlen) {
		ERR_clear_error();
		(void)SSL_write(x->ssl, x->out + x->outoff, (int)(x->outlen - x->outoff));
		ERR_clear_error();
	}
}

int gm_remote_ctl_connect(struct gm_remote_net *n, const char *addr, uint64_t token, uint32_t lport,
			  const uint8_t sid[SESSION_ID], struct conn **out, char *err,
			  size_t errlen)
{
	struct ctl *x;
	*out = NULL;
	int rc = gm_remote_ctl_dial(addr, ROLE_WORKER, token, n->w, &x);
	if (rc) {
		gm_errf(err, errlen, "cannot connect: %s", strerror(-rc));
		return rc;
	}
	x->port = lport;
	memcpy(x->sid, sid, sizeof(x->sid));
	while (!x->status) { /* ctl_step ends it after AUTH_MS */
		struct pollfd p = {.fd = x->fd, .events = gm_remote_ctl_events(x)};
		poll(&p, 1, 100);
		gm_remote_ctl_step(n, x);
	}
	rc = x->status < 0 ? x->status : 0;
	if (rc)
		gm_errf(err, errlen, "%s", x->why);
	*out = x->c;
	gm_remote_ctl_free(x);
	return rc;
}

/* ---- the guard on UCX's own listening sockets -------------------------------- */

/* Is the /proc/self/fd entry e (of d) a listening IPv4 or IPv6 socket? Its fd and
 * inode in *fd and *ino when it is. */
static bool inet_listener(DIR *d, const struct dirent *e, int *fd, unsigned long *ino)
{
	int acc = 0, dom = 0;
	socklen_t l = sizeof(int);
	struct stat st;

	*fd = atoi(e->d_name);
	if (e->d_name[0] == '.' || *fd == dirfd(d) || fstat(*fd, &st) || !S_ISSOCK(st.st_mode))
		return false;
	if (getsockopt(*fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &l) || !acc)
		return false;
	l = sizeof(int);
	if (getsockopt(*fd, SOL_SOCKET, SO_DOMAIN, &dom, &l) || (dom != AF_INET && dom != AF_INET6))
		return false;
	*ino = (unsigned long)st.st_ino;
	return true;
}

int gm_remote_ctl_listeners(unsigned long *ino, int max)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0, fd;
	if (!d)
		return -errno;
	for (struct dirent *e; (e = readdir(d)) && n < max;)
		if (inet_listener(d, e, &fd, &ino[n]))
			n++;
	closedir(d);
	return n;
}

int gm_remote_ctl_ports(const unsigned long *before, int nbefore, uint16_t *port, int max)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0, fd;
	if (!d)
		return -errno;
	for (struct dirent *e; (e = readdir(d)) && n < max;) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		unsigned long ino;
		bool old = false;
		if (!inet_listener(d, e, &fd, &ino) || getsockname(fd, (struct sockaddr *)&ss, &sl))
			continue;
		for (int i = 0; i < nbefore && !old; i++)
			old = before[i] == ino;
		if (!old)
			port[n++] = ntohs(ss.ss_family == AF_INET
					      ? ((struct sockaddr_in *)&ss)->sin_port
					      : ((struct sockaddr_in6 *)&ss)->sin6_port);
	}
	closedir(d);
	return n;
}

#define NET(k)	  (SKF_NET_OFF + (k))
#define GUARD_MAX (8 + NET_ALLOWED * 10)

/* An address as the filter compares it: IPv4 as one word, IPv6 as four (a
 * v4-mapped IPv6 address also as its IPv4 word: packets to a dual-stack socket). */
static void guard_addrs(const char (*ips)[INET6_ADDRSTRLEN], int nips, uint32_t *a4, int *v4,
			uint32_t (*a6)[4], int *v6)
{
	static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	*v4 = *v6 = 0;
	for (int i = 0; i < nips && i < NET_ALLOWED; i++) {
		unsigned char b[16];
		if (inet_pton(AF_INET, ips[i], b) == 1) {
			a4[(*v4)++] = (uint32_t)b[0] << 24 | b[1] << 16 | b[2] << 8 | b[3];
			continue;
		}
		if (inet_pton(AF_INET6, ips[i], b) != 1)
			continue;
		if (!memcmp(b, mapped, 12))
			a4[(*v4)++] = (uint32_t)b[12] << 24 | b[13] << 16 | b[14] << 8 | b[15];
		for (int w = 0; w < 4; w++)
			a6[*v6][w] = (uint32_t)b[4 * w] << 24 | b[4 * w + 1] << 16 |
				     b[4 * w + 2] << 8 | b[4 * w + 3];
		(*v6)++;
	}
}

/* The filter (classic BPF; SKF_NET_OFF reads the IP header): the version, then
 * IPv4: its source word against each address, accept on a match, else drop;
 * IPv6: one block of 9 per address (four words compared, a mismatch skips to the
 * next block, then accept), drop after the last. Every jump is short (< 256). */
static int guard_prog(struct sock_filter *f, const char (*ips)[INET6_ADDRSTRLEN], int nips)
{
	uint32_t a4[NET_ALLOWED], a6[NET_ALLOWED][4];
	int n = 0, v4, v6;
	guard_addrs(ips, nips, a4, &v4, a6, &v6);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_B | BPF_ABS, NET(0));
	f[n++] = (struct sock_filter)BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 0xf0);
	f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x40, 1, 0);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_JMP | BPF_JA, (uint32_t)(3 + v4)); /* to IPv6 */
	f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, NET(12));
	for (int i = 0; i < v4; i++)
		f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, a4[i],
						      (uint8_t)(v4 - i), 0);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, 0);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, 0xffffffffu);
	for (int i = 0; i < v6; i++) {
		for (int w = 0; w < 4; w++) {
			f[n++] =
			    (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, NET(8 + 4 * w));
			f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, a6[i][w],
							      0, (uint8_t)(7 - 2 * w));
		}
		f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, 0xffffffffu);
	}
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, 0);
	return n;
}

/* The filter on the listening sockets whose inode is in set[] (only) or not
 * in it (!only). */
static int guard_walk(const unsigned long *set, int nset, bool only,
		      const char (*ips)[INET6_ADDRSTRLEN], int nips)
{
	struct sock_filter code[GUARD_MAX];
	struct sock_fprog prog = {.len = (unsigned short)guard_prog(code, ips, nips),
				  .filter = code};
	DIR *d = opendir("/proc/self/fd");
	int n = 0, rc = 0;
	if (!d)
		return -errno;
	for (struct dirent *e; (e = readdir(d));) {
		unsigned long ino;
		bool old = false;
		int fd;
		if (!inet_listener(d, e, &fd, &ino))
			continue;
		for (int i = 0; i < nset && !old; i++)
			old = set[i] == ino;
		if (old != only)
			continue;
		if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog))) {
			rc = -errno;
			break;
		}
		n++;
	}
	closedir(d);
	return rc ? rc : n;
}

int gm_remote_ctl_guard(const unsigned long *before, int nbefore,
			const char (*ips)[INET6_ADDRSTRLEN], int nips)
{
	return guard_walk(before, nbefore, false, ips, nips);
}

int gm_remote_ctl_reguard(const unsigned long *ino, int nino, const char (*ips)[INET6_ADDRSTRLEN],
			  int nips)
{
	return guard_walk(ino, nino, true, ips, nips);
}
