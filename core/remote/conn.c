/*
 * conn.c - the remote plugin's connections (conn.h): a UCP context and worker,
 * the table of connections, sending, and the receiving side's checks of every
 * message (msg.h; the table they check against is check.c's).
 *
 * The idea: one layer that both processes of the protocol use, the node agent
 * and a remote worker process, so that the message checks are written once. Messages are UCX active
 * messages with a fixed-size header per type (checked for exact size against check.c's table)
 * and, for LEND, SAMPLE, LEASE and PUBLISH, a payload. Every message but SAMPLE is sent eager
 * (gm_remote_conn_send): the receiver gets it whole inside its handler, so
 * nothing of it outlives the handler. A SAMPLE goes eager by default too, or
 * by rendezvous when the worker is told so (GOLDMINER_REMOTE_RNDV=1, worker.c):
 * the home then receives it straight into the slot (home.c): a PUBLISH that
 * comes while its samples are still landing waits for them, and a lease is
 * revoked only once its endpoint is closed (then nothing of it lands).
 * Nothing here is a transport of our own: framing, wire-up, retransmission and
 * peer-failure detection are UCX's.
 *
 * A connection's endpoint is made only after the handshake on the control port
 * (ctl.c, TLS with a pre-shared key), to the worker address the other side
 * sent inside TLS: no UCX listener exists, and nothing arrives over UCX from
 * an endpoint that was not made so (the handshake's messages themselves are
 * refused if they come over UCX).
 *
 * The log: gm_remote_logf says a line; gm_remote_logf_from says one that a
 * remote party can cause, through the owner's per-address limiter
 * (ratelog.h: a few per address per window, then a count).
 *
 * Not here: the control port and the handshake (ctl.c), accepting and --peers
 * (agent.c), what a message means (the owner's on_msg).
 */

#include "conn.h"

#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include <arpa/inet.h>
#include <sys/epoll.h>
#include <sys/stat.h>

#include <openssl/crypto.h>

#include "check.h"
#include "ctl.h"
#include "msg.h"
#include "ratelog.h"
#include "tls.h"
#include "goldminer/util.h"

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
		gm_log("remote", "%s", line);
}

static void say_more(void *arg, const char *addr, uint64_t n)
{
	gm_remote_logf(arg, "%" PRIu64 " more like this from %s", n, addr);
}

void gm_remote_logs_flush(struct gm_remote_net *n, int64_t now)
{
	if (n->ratelog)
		gm_ratelog_flush(n->ratelog, now, say_more, n);
}

void gm_remote_logf_from(struct gm_remote_net *n, const char *addr, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	if (n->ratelog) {
		int64_t now = gm_now_ms();
		gm_ratelog_flush(n->ratelog, now, say_more, n);
		if (!gm_ratelog_line(n->ratelog, addr, now))
			return;
	}
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	gm_remote_logf(n, "%s", line);
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
		c->since_ms = c->heard_ms = gm_now_ms();
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

/* How long gm_remote_conn_bye waits for its send (an eager message of 136 bytes
 * completes at once unless the socket's buffer is full: a worker that does not
 * read is not waited for). */
#define BYE_MS 20

/* An eager active message of hlen header bytes at buf and dlen payload bytes
 * after them; cb(user) once it completes, where it does not at once (NULL). */
static void *am_send(ucp_ep_h ep, unsigned id, unsigned char *buf, size_t hlen, size_t dlen,
		     ucp_send_nbx_callback_t cb, void *user)
{
	ucp_request_param_t rp = {
	    .op_attr_mask =
		UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
	    .flags = UCP_AM_SEND_FLAG_REPLY | UCP_AM_SEND_FLAG_EAGER,
	    .cb.send = cb,
	    .user_data = user,
	};
	return ucp_am_send_nbx(ep, id, buf, hlen, buf + hlen, dlen, &rp);
}

/* A BYE on its way: the send's callback and gm_remote_conn_bye's wait both hold
 * it, the last to let go frees it (one thread: both run in it). */
struct bye_out {
	int refs;
	bool done;
	unsigned char bytes[sizeof(struct m_stamp) + sizeof(struct m_bye)];
};

static void bye_sent(void *req, ucs_status_t st, void *user)
{
	struct bye_out *o = user;
	(void)st;
	o->done = true;
	if (--o->refs == 0)
		free(o);
	ucp_request_free(req);
}

void gm_remote_conn_bye(struct conn *c)
{
	if (!c->ep)
		return;
	struct bye_out *o = calloc(1, sizeof(*o));
	if (!o)
		return; /* (the worker finds out when its next claim goes unanswered) */
	struct m_stamp st;
	struct m_bye b;
	memset(&b, 0, sizeof(b));
	const char *why = c->why[0] ? c->why : "closed by its home";
	memcpy(b.why, why, strnlen(why, sizeof(b.why) - 1)); /* (cut short, NUL-ended) */
	gm_remote_msg_stamp(AM_BYE, &st);
	memcpy(o->bytes, &st, sizeof(st));
	memcpy(o->bytes + sizeof(st), &b, sizeof(b));
	o->refs = 2;
	void *p = am_send(c->ep, AM_BYE, o->bytes, sizeof(o->bytes), 0, bye_sent, o);
	if (p == NULL || UCS_PTR_IS_ERR(p)) { /* sent at once, or not at all */
		free(o);
		return;
	}
	int64_t end = gm_now_ms() + BYE_MS;
	while (!o->done && gm_now_ms() < end)
		ucp_worker_progress(c->w);
	if (--o->refs == 0)
		free(o);
}

/* Close c's endpoint by force and wait (200 ms at most) until UCX has: from then
 * on nothing of this peer lands anywhere (its transfers into a slot included),
 * so its lease may be given to someone else. */
void gm_remote_conn_close(struct gm_remote_net *n, struct conn *c)
{
	(void)n;
	if (!c->ep)
		return;
	ucp_request_param_t rp = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
				  .flags = UCP_EP_CLOSE_FLAG_FORCE};
	void *p = ucp_ep_close_nbx(c->ep, &rp);
	c->ep = NULL;
	if (!UCS_PTR_IS_PTR(p))
		return;
	int64_t end = gm_now_ms() + 200;
	while (ucp_request_check_status(p) == UCS_INPROGRESS && gm_now_ms() < end)
		ucp_worker_progress(c->w);
	ucp_request_free(p); /* (UCX completes it on its own if it has not) */
}

/* Close the endpoint by force (its messages stop being delivered) and free c,
 * and its own worker. */
void gm_remote_conn_free(struct gm_remote_net *n, struct conn *c)
{
	gm_remote_conn_close(n, c);
	if (c->own_w && c->w)
		ucp_worker_destroy(c->w);
	for (int i = 0; i < MAX_CONNS; i++)
		if (n->conns[i] == c)
			n->conns[i] = NULL;
	free(c->pub_data);
	OPENSSL_cleanse(c->xs, sizeof(c->xs));
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
	struct m_stamp st; /* the header's layout, before it (msg.h) */
	unsigned char *buf = malloc(sizeof(st) + hlen + dlen + 1);
	if (!buf) {
		gm_remote_conn_kill(c, "out of memory sending a message");
		return -ENOMEM;
	}
	gm_remote_msg_stamp(id, &st);
	memcpy(buf, &st, sizeof(st));
	memcpy(buf + sizeof(st), hdr, hlen);
	hlen += sizeof(st);
	if (dlen)
		memcpy(buf + hlen, data, dlen);
	void *p = am_send(c->ep, (unsigned)id, buf, hlen, dlen, send_done, buf);
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

int gm_remote_conn_ep(struct gm_remote_net *n, struct conn *c, const void *addr, size_t len)
{
	(void)n;
	(void)len; /* (its length was bounded where it landed: ctl.c) */
	ucp_ep_params_t p = {
	    .field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
			  UCP_EP_PARAM_FIELD_ERR_HANDLER,
	    .address = addr,
	    .err_mode = UCP_ERR_HANDLING_MODE_PEER,
	    .err_handler = {.cb = gm_remote_conn_lost, .arg = c},
	};
	ucs_status_t st = ucp_ep_create(c->w, &p, &c->ep);
	if (st != UCS_OK) {
		c->ep = NULL;
		return gm_remote_st_errno(st);
	}
	return 0;
}

/* ---- receiving --------------------------------------------------------------- */

/* A message to the owner, its header copied to aligned memory. */
static void dispatch(struct gm_remote_net *n, struct conn *c, int id, const void *hp, size_t hlen,
		     const void *data, size_t len, bool rndv)
{
	union m_any h; /* (checked: the stamp, then its message's exact size) */
	memcpy(&h, (const unsigned char *)hp + sizeof(struct m_stamp),
	       hlen - sizeof(struct m_stamp));
	n->on_msg(n->owner, c, id, &h, data, len, rndv);
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
	char why[256];
	if (!gm_remote_check_msg(a->id, header, hlen, len, rndv, c->st == C_OK, why, sizeof(why))) {
		gm_remote_conn_kill(c, "%s: %s", c->ip, why);
		return UCS_OK;
	}
	c->heard_ms = gm_now_ms();
	dispatch(n, c, a->id, header, hlen, data, len, rndv);
	return UCS_OK;
}

/* ---- the context ------------------------------------------------------------- */

int gm_remote_net_init(struct gm_remote_net *n, bool wakeup, char *err, size_t errlen)
{
	ucp_config_t *cfg;
	n->efd = -1;
	/* A sample is ~150 KB: TCP segments of 64 KB instead of UCX's 8 KB cut the
	 * fragments each one is split into (and the home's work per sample); the
	 * user's own UCX_* settings win (overwrite 0). */
	setenv("UCX_TCP_TX_SEG_SIZE", "64k", 0);
	setenv("UCX_TCP_RX_SEG_SIZE", "256k", 0);
	/* UCX's TCP connects block by default (UCX_TCP_CONN_NB=n): an endpoint
	 * made to a remote worker whose link was cut as its handshake ended held
	 * the agent's loop in connect() 134.6 s ("remote workers: the control
	 * port took 134592 ms"; test_remote 34), no heartbeat or lease deadline
	 * looked at meanwhile. Never block the loop. */
	setenv("UCX_TCP_CONN_NB", "y", 0);
	int rc = gm_remote_tls_init(&n->tls_cli, &n->tls_srv, err, errlen);
	if (rc)
		return rc;
	ucs_status_t st = ucp_config_read(NULL, NULL, &cfg);
	if (st != UCS_OK) {
		gm_remote_tls_fini(&n->tls_cli, &n->tls_srv);
		gm_errf(err, errlen, "UCX configuration (UCX_* environment): %s",
			ucs_status_string(st));
		return gm_remote_st_errno(st);
	}
	ucp_params_t p = {.field_mask = UCP_PARAM_FIELD_FEATURES,
			  .features = UCP_FEATURE_AM | (wakeup ? UCP_FEATURE_WAKEUP : 0)};
	st = ucp_init(&p, cfg, &n->ctx);
	ucp_config_release(cfg);
	if (st != UCS_OK) {
		gm_remote_tls_fini(&n->tls_cli, &n->tls_srv);
		gm_errf(err, errlen, "ucp_init: %s (check UCX_TLS and UCX_NET_DEVICES)",
			ucs_status_string(st));
		return gm_remote_st_errno(st);
	}
	rc = gm_remote_net_worker(n, &n->w, err, errlen);
	if (!rc && wakeup && ucp_worker_get_efd(n->w, &n->efd) != UCS_OK)
		rc = -EIO;
	if (rc) {
		if (rc == -EIO)
			gm_errf(err, errlen, "UCX worker: no event fd");
		gm_remote_net_fini(n);
	}
	return rc;
}

/* The AM handlers of every message on w. */
static ucs_status_t set_handlers(struct gm_remote_net *n, ucp_worker_h w)
{
	ucs_status_t st = UCS_OK;
	for (int id = 1; st == UCS_OK && id < AM_N; id++) {
		n->am[id] = (struct am_arg){n, id};
		ucp_am_handler_param_t hp = {
		    .field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
				  UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS,
		    .id = (unsigned)id,
		    .flags = UCP_AM_FLAG_WHOLE_MSG,
		    .cb = am_cb,
		    .arg = &n->am[id]};
		st = ucp_worker_set_am_recv_handler(w, &hp);
	}
	return st;
}

/* The listening sockets not in before[] (a new worker's), remembered for
 * gm_remote_net_reguard; when the list is full, the ones gone leave it first. */
static void remember_guarded(struct gm_remote_net *n, const unsigned long *before, int nb)
{
	unsigned long now[256];
	int k = gm_remote_ctl_listeners(now, 256);
	if (n->nguarded + k > NET_GUARDED) { /* keep those that still listen */
		int kept = 0;
		for (int i = 0; i < n->nguarded; i++)
			for (int j = 0; j < k; j++)
				if (now[j] == n->guarded[i]) {
					n->guarded[kept++] = n->guarded[i];
					break;
				}
		n->nguarded = kept;
	}
	for (int j = 0; j < k && n->nguarded < NET_GUARDED; j++) {
		bool old = false;
		for (int i = 0; i < nb && !old; i++)
			old = before[i] == now[j];
		for (int i = 0; i < n->nguarded && !old; i++)
			old = n->guarded[i] == now[j];
		if (!old)
			n->guarded[n->nguarded++] = now[j];
	}
}

int gm_remote_net_reguard(struct gm_remote_net *n)
{
	/* the kernel refused the filter: nothing to set again (at accept, the
	 * addresses are read as each connection comes) */
	if (n->guard == GUARD_OPEN || n->guard == GUARD_ACCEPT)
		return 0;
	return gm_remote_ctl_reguard(n->guarded, n->nguarded, n->allowed, n->nallowed);
}

/* Does the kernel refuse socket filters to this process (it lacks
 * CAP_NET_ADMIN where the kernel asks for it)? Anything else is a fault. */
static bool refused(int rc)
{
	return rc == -EPERM || rc == -EACCES;
}

/* ---- the guard at accept (where the kernel refuses the filter) ---------------- */

/* The net whose UCX listeners the program's accept guards (one a process: an
 * agent's, or a remote worker's). */
static struct gm_remote_net *accept_net;

/* gm_accept_hook (cmd/accept_guard.c): a connection accepted on one of
 * accept_net's guarded listeners stays only when it comes from an admitted
 * address (IPv4-mapped IPv6 read as IPv4); any other listener's stays. */
static int accept_check(int lfd, const struct sockaddr *sa, socklen_t len)
{
	struct gm_remote_net *n = accept_net;
	struct stat st;
	char ip[INET6_ADDRSTRLEN] = "?";
	bool ours = false;
	if (!n || fstat(lfd, &st))
		return 1;
	for (int i = 0; i < n->nguarded && !ours; i++)
		ours = n->guarded[i] == (unsigned long)st.st_ino;
	if (!ours)
		return 1;
	const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)sa;
	if (sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in))
		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, ip, sizeof(ip));
	else if (sa->sa_family == AF_INET6 && len >= sizeof(*v6))
		inet_ntop(IN6_IS_ADDR_V4MAPPED(&v6->sin6_addr) ? AF_INET : AF_INET6,
			  IN6_IS_ADDR_V4MAPPED(&v6->sin6_addr)
			      ? (const void *)&v6->sin6_addr.s6_addr[12]
			      : (const void *)&v6->sin6_addr,
			  ip, sizeof(ip));
	for (int i = 0; i < n->nallowed; i++)
		if (!strcmp(n->allowed[i], ip))
			return 1;
	gm_remote_logf_from(n, ip,
			    "refused %s at accept on a UCX port: not one of --peers' addresses "
			    "(closed before UCX read a byte)",
			    ip);
	return 0;
}

/* The program's accept hook, where it has one (the goldminer program). */
static bool accept_guard_on(struct gm_remote_net *n)
{
	int (**hook)(int, const struct sockaddr *, socklen_t) =
	    dlsym(RTLD_DEFAULT, "gm_accept_hook");
	if (!hook)
		return false;
	accept_net = n;
	*hook = accept_check;
	return true;
}

/* The guard on the sockets w's making opened (not in before[0..nb)): the
 * filter; where the kernel refuses it, the program's accept (GUARD_ACCEPT),
 * or none when the operator said so (GUARD_OPEN). The first worker's outcome
 * is n's guard. 0 or -errno with err. */
static int guard_new(struct gm_remote_net *n, const unsigned long *before, int nb, char *err,
		     size_t errlen)
{
	bool first = n->guard == GUARD_UNSET;
	int g = nb < 0 ? nb : gm_remote_ctl_guard(before, nb, n->allowed, n->nallowed);
	if (g >= 0) {
		remember_guarded(n, before, nb);
		if (n->guard == GUARD_UNSET)
			n->guard = g ? GUARD_FILTER : GUARD_NO_PORTS;
	} else if (refused(g) && n->unguarded_ok && n->guard != GUARD_FILTER) {
		n->guard = GUARD_OPEN;
		n->guard_errno = -g;
		g = 0;
	} else if (refused(g) && n->guard != GUARD_FILTER && nb >= 0 && accept_guard_on(n)) {
		remember_guarded(n, before, nb);
		n->guard = GUARD_ACCEPT;
		n->guard_errno = -g;
		g = 0;
	} else if (refused(g)) {
		gm_errf(
		    err, errlen,
		    "UCX worker: cannot guard its listening sockets: SO_ATTACH_FILTER: %s (this "
		    "kernel lets only a process with CAP_NET_ADMIN filter its sockets): give "
		    "the agent CAP_NET_ADMIN (systemd: AmbientCapabilities=CAP_NET_ADMIN; "
		    "not setcap), or run it with --unguarded-ucx behind a firewall that "
		    "admits only the peers to UCX's ports (docs/USAGE.md, Security and limits)",
		    strerror(-g));
	} else {
		gm_errf(err, errlen, "UCX worker: cannot guard its listening sockets: %s%s",
			nb < 0 ? "/proc/self/fd: " : "SO_ATTACH_FILTER: ", strerror(-g));
	}
	if (g >= 0 && first) /* the main worker's: the ports the log line names */
		n->nucx_ports =
		    gm_remote_ctl_ports(before, nb < 0 ? 0 : nb, n->ucx_ports,
					(int)(sizeof(n->ucx_ports) / sizeof(n->ucx_ports[0])));
	return g < 0 ? g : 0;
}

int gm_remote_net_worker(struct gm_remote_net *n, ucp_worker_h *w, char *err, size_t errlen)
{
	unsigned long before[256];
	int efd = -1;
	ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
				  .thread_mode = UCS_THREAD_MODE_SINGLE};
	int nb = gm_remote_ctl_listeners(before, 256);
	ucs_status_t st = ucp_worker_create(n->ctx, &wp, w);
	if (st != UCS_OK) {
		*w = NULL;
		gm_errf(err, errlen, "UCX worker: %s", ucs_status_string(st));
		return gm_remote_st_errno(st);
	}
	st = set_handlers(n, *w);
	if (st == UCS_OK && n->epfd >= 0)
		st = ucp_worker_get_efd(*w, &efd);
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
	int rc = st != UCS_OK ? gm_remote_st_errno(st) : 0;
	if (!rc && efd >= 0 && epoll_ctl(n->epfd, EPOLL_CTL_ADD, efd, &ev))
		rc = -errno;
	if (rc)
		gm_errf(err, errlen, "UCX worker: %s", strerror(-rc));
	/* UCX's own listening sockets (its TCP transport's) admit the peers only */
	if (!rc)
		rc = guard_new(n, before, nb, err, errlen);
	if (rc) {
		ucp_worker_destroy(*w);
		*w = NULL;
	}
	return rc;
}

void gm_remote_net_guard_line(const struct gm_remote_net *n, char *buf, size_t len)
{
	char ports[64] = "";
	size_t off = 0;
	for (int i = 0; i < n->nucx_ports && off < sizeof(ports); i++)
		off += (size_t)snprintf(ports + off, sizeof(ports) - off, "%s%u", i ? ", " : "",
					n->ucx_ports[i]);
	const char *range = getenv("UCX_TCP_PORT_RANGE");
	switch (n->guard) {
	case GUARD_FILTER:
		snprintf(buf, len,
			 "guard: a socket filter on UCX's listening sockets (port %s, and one "
			 "more per peer this agent dials): only --peers' addresses reach them",
			 ports);
		break;
	case GUARD_OPEN:
		snprintf(buf, len,
			 "guard: none on UCX's ports (port %s, and one more per peer this agent "
			 "dials; %s%s): the kernel refused the socket filter (SO_ATTACH_FILTER: "
			 "%s; it wants CAP_NET_ADMIN) and --unguarded-ucx was given: any host "
			 "that reaches them connects to UCX, so a firewall must admit only the "
			 "peers there; the control port still resets strangers",
			 ports,
			 range ? "UCX_TCP_PORT_RANGE="
			       : "any port the kernel picks: set "
				 "UCX_TCP_PORT_RANGE for the firewall's rule",
			 range ? range : "", strerror(n->guard_errno));
		break;
	case GUARD_ACCEPT:
		snprintf(buf, len,
			 "guard: at accept on UCX's listening sockets (port %s, and one more per "
			 "peer this agent dials): the kernel refused the socket filter "
			 "(SO_ATTACH_FILTER: %s; it wants CAP_NET_ADMIN), so a connection from an "
			 "address not in --peers is closed as UCX accepts it, before UCX reads a "
			 "byte (the kernel still completes its TCP handshake)",
			 ports, strerror(n->guard_errno));
		break;
	case GUARD_NO_PORTS:
		snprintf(buf, len, "guard: UCX listens on no TCP port here (UCX_TLS): none needed");
		break;
	default:
		snprintf(buf, len, "guard: not set up");
	}
}

/* The most one call of gm_remote_net_progress runs on: a flood of samples
 * kept a 0.25-core home's progress going for 1.7 s (seed 105 of the cluster
 * bench), no heartbeat went out meanwhile, and its lenders took it for down
 * (DOWN_MS) and ended their guests' connections. */
#define PROGRESS_SLICE_MS 10

void gm_remote_net_progress(struct gm_remote_net *n)
{
	int64_t end = gm_now_ms() + PROGRESS_SLICE_MS;
	while (ucp_worker_progress(n->w) && gm_now_ms() < end)
		;
	for (int i = 0; i < MAX_CONNS; i++) /* each at least once */
		if (n->conns[i] && n->conns[i]->own_w)
			while (ucp_worker_progress(n->conns[i]->w) && gm_now_ms() < end)
				;
}

/* The longest one idle wait blocks (a signal, a remote worker's retirement,
 * ends it sooner) */
#define IDLE_MAX_MS 20

/*
 * Nothing left to progress: block until the worker's next event, ms at most
 * (its event fd, armed; a net without one sleeps 50 us). A guest that polled
 * with 50 us sleeps while it waited for a lease or for its sends spent
 * 80-400 us of its lender's CPU per sample outside making it ("CPU per sample
 * 736 us, 468 us of it making", seed 107's lenders), a quarter or more of
 * what a lent core could make.
 */
void gm_remote_net_idle(struct gm_remote_net *n, int ms)
{
	if (n->efd < 0) {
		struct timespec ts = {0, 50000}; /* 50 us, short beside a transfer */
		nanosleep(&ts, NULL);
		return;
	}
	if (ucp_worker_arm(n->w) != UCS_OK)
		return; /* events pending (UCS_ERR_BUSY): progress them */
	struct pollfd p = {.fd = n->efd, .events = POLLIN};
	(void)poll(&p, 1, ms < 0 ? 0 : ms > IDLE_MAX_MS ? IDLE_MAX_MS : ms);
}

int gm_remote_net_wait(struct gm_remote_net *n, const struct conn *c, bool (*done)(const void *),
		       const void *arg, int ms)
{
	int64_t end = gm_now_ms() + ms;
	while (!done(arg)) {
		if (c->st == C_DEAD)
			return -ECONNRESET;
		int64_t now = gm_now_ms();
		if (ms >= 0 && now >= end)
			return -ETIMEDOUT;
		if (!ucp_worker_progress(n->w))
			gm_remote_net_idle(n, ms >= 0 ? (int)(end - now) : IDLE_MAX_MS);
	}
	return 0;
}

bool gm_remote_net_arm(struct gm_remote_net *n)
{
	bool armed = ucp_worker_arm(n->w) != UCS_ERR_BUSY;
	for (int i = 0; i < MAX_CONNS; i++)
		if (n->conns[i] && n->conns[i]->own_w &&
		    ucp_worker_arm(n->conns[i]->w) == UCS_ERR_BUSY)
			armed = false;
	return armed;
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
	gm_remote_tls_fini(&n->tls_cli, &n->tls_srv);
}
