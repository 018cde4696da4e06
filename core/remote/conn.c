/*
 * conn.c - the remote plugin's connections (conn.h): a UCP context and worker,
 * the table of connections, sending, the shared-secret handshake (auth.h) and
 * the receiving side's checks of every message (msg.h).
 *
 * The idea: one layer that both processes of the protocol use, the node agent
 * and a remote worker process, so that the handshake and the message checks
 * are written once. Messages are UCX active messages with a fixed-size header
 * per type (checked for exact size against the table below) and, for LEND,
 * SAMPLE, LEASE and PUBLISH, a payload. Every message but SAMPLE is sent eager
 * (gm_remote_conn_send): the receiver gets it whole inside its handler, so
 * nothing of it outlives the handler. A SAMPLE goes eager by default too, or
 * by rendezvous when the worker is told so (GOLDMINER_REMOTE_RNDV=1, worker.c):
 * the home then receives it straight into the slot (home.c): a PUBLISH that
 * comes while its samples are still landing waits for them, and a lease is
 * revoked only once its endpoint is closed (then nothing of it lands).
 * Nothing here is a transport of our own: framing, wire-up, retransmission and
 * peer-failure detection are UCX's.
 *
 * Not here: listening and accepting (the agent's: agent.c, which checks the
 * address against --peers before an endpoint exists), and what a message after
 * the handshake means (the owner's on_msg).
 */

#include "conn.h"

#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "auth.h"
#include "goldminer/version.h"
#include "msg.h"

/* ---- small helpers ----------------------------------------------------------- */

void gm_remote_logf(struct gm_remote_net *n, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n->log)
		n->log(n->log_arg, line);
	else if (n->verbose)
		fprintf(stderr, "goldminer remote: %s\n", line);
}

int gm_remote_st_errno(ucs_status_t st)
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
int gm_remote_parse_addr(const char *s, struct sockaddr_storage *ss, socklen_t *sl, char *ip,
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

/* ---- connections and sending ------------------------------------------------- */

void gm_remote_conn_lost(void *arg, ucp_ep_h ep, ucs_status_t status)
{
	struct conn *c = arg;
	(void)ep;
	if (c->st != C_DEAD)
		snprintf(c->why, sizeof(c->why), "connection lost: %s", ucs_status_string(status));
	c->st = C_DEAD;
}

struct conn *gm_remote_conn_new(struct gm_remote_net *n, bool outgoing, const char *ip)
{
	for (int i = 0; i < MAX_CONNS; i++) {
		if (n->conns[i])
			continue;
		struct conn *c = calloc(1, sizeof(*c));
		if (!c)
			return NULL;
		c->outgoing = outgoing;
		c->peer = -1;
		c->since_ms = now_ms();
		snprintf(c->ip, sizeof(c->ip), "%s", ip ? ip : "?");
		n->conns[i] = c;
		return c;
	}
	return NULL;
}

static struct conn *conn_of(struct gm_remote_net *n, ucp_ep_h ep)
{
	if (!ep)
		return NULL;
	for (int i = 0; i < MAX_CONNS; i++)
		if (n->conns[i] && n->conns[i]->ep == ep && n->conns[i]->st != C_DEAD)
			return n->conns[i];
	return NULL;
}

void gm_remote_conn_kill(struct conn *c, const char *fmt, ...)
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
void gm_remote_conn_close(struct gm_remote_net *n, struct conn *c)
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
		ucp_worker_progress(n->w);
	ucp_request_free(p); /* (UCX completes it on its own if it has not) */
}

/* Close the endpoint by force (its messages stop being delivered) and free c. */
void gm_remote_conn_free(struct gm_remote_net *n, struct conn *c)
{
	gm_remote_conn_close(n, c);
	for (int i = 0; i < MAX_CONNS; i++)
		if (n->conns[i] == c)
			n->conns[i] = NULL;
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
int gm_remote_conn_send(struct conn *c, int id, const void *hdr, size_t hlen, const void *data,
			size_t dlen)
{
	if (c->st == C_DEAD || !c->ep)
		return -ECONNRESET;
	unsigned char *buf = malloc(hlen + dlen + 1);
	if (!buf) {
		gm_remote_conn_kill(c, "out of memory sending a message");
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
		gm_remote_conn_kill(c, "send failed: %s", ucs_status_string(UCS_PTR_STATUS(p)));
		return gm_remote_st_errno(UCS_PTR_STATUS(p));
	}
	return 0; /* send_done frees buf */
}

int gm_remote_conn_connect(struct gm_remote_net *n, const char *addr, struct conn **out)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	char ip[INET6_ADDRSTRLEN];
	*out = NULL;
	if (gm_remote_parse_addr(addr, &ss, &sl, ip, sizeof(ip)))
		return -EINVAL;
	struct conn *c = gm_remote_conn_new(n, true, ip);
	if (!c)
		return -EMFILE;
	ucp_ep_params_t p = {
	    .field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
			  UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER,
	    .flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER,
	    .sockaddr = {.addr = (const struct sockaddr *)&ss, .addrlen = sl},
	    .err_mode = UCP_ERR_HANDLING_MODE_PEER,
	    .err_handler = {.cb = gm_remote_conn_lost, .arg = c},
	};
	ucs_status_t st = ucp_ep_create(n->w, &p, &c->ep);
	if (st != UCS_OK) {
		c->ep = NULL;
		gm_remote_conn_free(n, c);
		return gm_remote_st_errno(st);
	}
	*out = c;
	return 0;
}

/* Start the handshake on an outgoing connection (role: what we are). */
int gm_remote_conn_hello(struct conn *c, int role, uint64_t token)
{
	struct m_hello h = {
	    .magic = MSG_MAGIC, .version = MSG_VERSION, .role = (uint32_t)role, .token = token};
	if (gm_auth_nonce(c->mine))
		return -EIO;
	memcpy(h.nonce, c->mine, sizeof(h.nonce));
	c->st = C_HELLO;
	return gm_remote_conn_send(c, AM_HELLO, &h, sizeof(h), NULL, 0);
}

/* ---- the handshake ----------------------------------------------------------- */

static void on_hello(struct gm_remote_net *n, struct conn *c, const struct m_hello *h)
{
	struct m_challenge ch;
	if (!c->outgoing && c->st == C_NEW && h->magic == MSG_MAGIC && h->version != MSG_VERSION) {
		gm_remote_conn_kill(
		    c,
		    "refused %s: it speaks the remote protocol version %u, this agent %u "
		    "(goldminer %s): run the same goldminer on every host",
		    c->ip, h->version, MSG_VERSION, gm_version());
		return;
	}
	if (c->outgoing || c->st != C_NEW || h->magic != MSG_MAGIC ||
	    (h->role != ROLE_AGENT && h->role != ROLE_WORKER)) {
		gm_remote_conn_kill(c, "refused %s: not a goldminer %s peer (bad hello)", c->ip,
				    gm_version());
		return;
	}
	c->role = (int)h->role;
	c->token = h->token;
	memcpy(c->theirs, h->nonce, sizeof(c->theirs));
	if (gm_auth_nonce(c->mine) ||
	    gm_auth_proof(&n->key, SERVER_ROLE, c->theirs, c->mine, ch.proof)) {
		gm_remote_conn_kill(c, "no randomness for a nonce");
		return;
	}
	memcpy(ch.nonce, c->mine, sizeof(ch.nonce));
	c->st = C_CHALLENGED;
	gm_remote_conn_send(c, AM_CHALLENGE, &ch, sizeof(ch), NULL, 0);
}

static void on_challenge(struct gm_remote_net *n, struct conn *c, const struct m_challenge *ch)
{
	struct m_auth a;
	if (!c->outgoing || c->st != C_HELLO) {
		gm_remote_conn_kill(c, "%s: unexpected challenge", c->ip);
		return;
	}
	if (!gm_auth_verify(&n->key, SERVER_ROLE, c->mine, ch->nonce, ch->proof)) {
		gm_remote_conn_kill(
		    c,
		    "%s does not know the secret (its proof is wrong): check --secret on "
		    "both hosts",
		    c->ip);
		return;
	}
	memcpy(c->theirs, ch->nonce, sizeof(c->theirs));
	if (gm_auth_proof(&n->key, CLIENT_ROLE, c->theirs, c->mine, a.proof)) {
		gm_remote_conn_kill(c, "cannot compute a proof");
		return;
	}
	c->st = C_CHALLENGED;
	gm_remote_conn_send(c, AM_AUTH, &a, sizeof(a), NULL, 0);
}

static void on_auth(struct gm_remote_net *n, struct conn *c, const struct m_auth *a)
{
	struct m_welcome wm = {0};
	if (c->outgoing || c->st != C_CHALLENGED) {
		gm_remote_conn_kill(c, "%s: unexpected auth", c->ip);
		return;
	}
	if (!gm_auth_verify(&n->key, CLIENT_ROLE, c->mine, c->theirs, a->proof)) {
		wm.status = -EACCES;
		snprintf(wm.msg, sizeof(wm.msg), "refused: wrong secret");
		gm_remote_conn_send(c, AM_WELCOME, &wm, sizeof(wm), NULL, 0);
		ucp_worker_progress(n->w); /* let the refusal leave (best effort) */
		gm_remote_conn_kill(c, "refused %s: it does not know the secret", c->ip);
		return;
	}
	if (c->role == ROLE_WORKER) {
		c->job = n->job_of ? n->job_of(n->owner, c->token) : NULL;
		if (!c->job) {
			wm.status = -ENOENT;
			snprintf(wm.msg, sizeof(wm.msg), "no such job here (it ended)");
		}
	}
	gm_remote_conn_send(c, AM_WELCOME, &wm, sizeof(wm), NULL, 0);
	if (wm.status) {
		gm_remote_conn_kill(c, "worker at %s: %s", c->ip, wm.msg);
		return;
	}
	c->st = C_OK;
	gm_remote_logf(n, "%s at %s authenticated",
		       c->role == ROLE_AGENT ? "agent" : "remote worker", c->ip);
}

static void on_welcome(struct gm_remote_net *n, struct conn *c, const struct m_welcome *wm)
{
	if (!c->outgoing || c->st != C_CHALLENGED) {
		gm_remote_conn_kill(c, "%s: unexpected welcome", c->ip);
		return;
	}
	if (wm->status) {
		gm_remote_conn_kill(c, "%s %.*s", c->ip, (int)sizeof(wm->msg), wm->msg);
		copy_str(n->welcome, sizeof(n->welcome), c->why);
		return;
	}
	c->st = C_OK;
}

/* ---- receiving --------------------------------------------------------------- */

/* What may arrive: one row per message, its header's exact size, whether a
 * payload may follow it and whether it may come before the handshake succeeded
 * (only the handshake's own). */
struct msg_row {
	size_t hlen;
	bool data, preauth;
};
// clang-format off
#define ROW(id, type, data, preauth) [id] = {sizeof(struct type), data, preauth}
static const struct msg_row msg_rows[AM_N] = {
	/*  message      header       payload  before the handshake */
	ROW(AM_HELLO,     m_hello,     false,   true),
	ROW(AM_CHALLENGE, m_challenge, false,   true),
	ROW(AM_AUTH,      m_auth,      false,   true),
	ROW(AM_WELCOME,   m_welcome,   false,   true),
	ROW(AM_LEND,      m_lend,      true,    false),
	ROW(AM_LENT,      m_lent,      false,   false),
	ROW(AM_CLAIM,     m_claim,     false,   false),
	ROW(AM_LEASE,     m_lease,     true,    false),
	ROW(AM_SAMPLE,    m_sample,    true,    false),
	ROW(AM_PUBLISH,   m_publish,   true,    false),
};
#undef ROW
// clang-format on

/* The handshake's messages here, every other one to the owner. */
static void dispatch(struct gm_remote_net *n, struct conn *c, int id, const void *hp,
		     const void *data, size_t len, bool rndv)
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
	memcpy(&h, hp, msg_rows[id].hlen);
	switch (id) {
	case AM_HELLO:
		on_hello(n, c, &h.hello);
		break;
	case AM_CHALLENGE:
		on_challenge(n, c, &h.ch);
		break;
	case AM_AUTH:
		on_auth(n, c, &h.auth);
		break;
	case AM_WELCOME:
		on_welcome(n, c, &h.wm);
		break;
	default:
		n->on_msg(n->owner, c, id, &h, data, len, rndv);
		break;
	}
}

static ucs_status_t am_cb(void *arg, const void *header, size_t hlen, void *data, size_t len,
			  const ucp_am_recv_param_t *param)
{
	struct am_arg *a = arg;
	struct gm_remote_net *n = a->n;
	struct conn *c = conn_of(
	    n, (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) ? param->reply_ep : NULL);
	if (!c)
		return UCS_OK; /* a connection closed or never known: dropped */
	bool rndv = param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV;
	if (rndv && a->id != AM_SAMPLE) {
		gm_remote_conn_kill(c, "%s: a rendezvous message %d (only samples come so)", c->ip,
				    a->id);
		return UCS_OK;
	}
	if (hlen != msg_rows[a->id].hlen || (len && !msg_rows[a->id].data)) {
		gm_remote_conn_kill(c, "%s: malformed message %d (%zu+%zu bytes)", c->ip, a->id,
				    hlen, len);
		return UCS_OK;
	}
	if (!msg_rows[a->id].preauth && c->st != C_OK) {
		gm_remote_conn_kill(c, "%s: message %d before authentication", c->ip, a->id);
		return UCS_OK;
	}
	dispatch(n, c, a->id, header, data, len, rndv);
	return UCS_OK;
}

/* ---- the context ------------------------------------------------------------- */

int gm_remote_net_init(struct gm_remote_net *n, bool wakeup, char *err, size_t errlen)
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
		return gm_remote_st_errno(st);
	}
	ucp_params_t p = {.field_mask = UCP_PARAM_FIELD_FEATURES,
			  .features = UCP_FEATURE_AM | (wakeup ? UCP_FEATURE_WAKEUP : 0)};
	st = ucp_init(&p, cfg, &n->ctx);
	ucp_config_release(cfg);
	if (st != UCS_OK) {
		snprintf(err, errlen, "ucp_init: %s (check UCX_TLS and UCX_NET_DEVICES)",
			 ucs_status_string(st));
		return gm_remote_st_errno(st);
	}
	ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
				  .thread_mode = UCS_THREAD_MODE_SINGLE};
	st = ucp_worker_create(n->ctx, &wp, &n->w);
	if (st == UCS_OK && wakeup)
		st = ucp_worker_get_efd(n->w, &n->efd);
	for (int id = 1; st == UCS_OK && id < AM_N; id++) {
		n->am[id] = (struct am_arg){n, id};
		ucp_am_handler_param_t hp = {
		    .field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
				  UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS,
		    .id = (unsigned)id,
		    .flags = UCP_AM_FLAG_WHOLE_MSG,
		    .cb = am_cb,
		    .arg = &n->am[id]};
		st = ucp_worker_set_am_recv_handler(n->w, &hp);
	}
	if (st != UCS_OK) {
		snprintf(err, errlen, "UCX worker: %s", ucs_status_string(st));
		gm_remote_net_fini(n);
		return gm_remote_st_errno(st);
	}
	return 0;
}

void gm_remote_net_fini(struct gm_remote_net *n)
{
	for (int i = 0; i < MAX_CONNS; i++)
		if (n->conns[i])
			gm_remote_conn_free(n, n->conns[i]);
	if (n->unlisten)
		n->unlisten(n->owner);
	if (n->w)
		ucp_worker_destroy(n->w);
	if (n->ctx)
		ucp_cleanup(n->ctx);
	n->w = NULL;
	n->ctx = NULL;
}
