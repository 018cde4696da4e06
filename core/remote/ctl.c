/*
 * ctl.c - the remote plugin's control port (ctl.h): a plain TCP listener of
 * ours on --listen, the handshake over it (auth.h's proofs), the exchange of
 * UCX worker addresses that follows, and the guard on UCX's own listening
 * sockets.
 *
 * The idea: nothing of UCX is reachable before a peer has proved the secret.
 * A connection is a small state machine driven by its socket's readiness
 * (never blocking): each frame's header is checked (the type the state waits
 * for, the exact length) before its body is read into a fixed buffer, and
 * the whole exchange must end within AUTH_MS of the connection's start, so a
 * silent or slow-dripping connection is closed whatever it sends.
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
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

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
	if (!x)
		return NULL;
	x->fd = fd;
	x->peer = -1;
	x->since_ms = now_ms();
	copy_str(x->ip, sizeof(x->ip), ip);
	return x;
}

struct ctl *gm_remote_ctl_accepted(int fd, const char *ip)
{
	struct ctl *x = ctl_new(fd, ip);
	if (!x) {
		close(fd);
		return NULL;
	}
	x->want = CTL_HELLO;
	return x;
}

void gm_remote_ctl_free(struct ctl *x)
{
	if (!x)
		return;
	if (x->fd >= 0)
		close(x->fd);
	if (x->own_w && x->w)
		ucp_worker_destroy(x->w);
	memset(x->mine, 0, sizeof(x->mine));
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
	x->want = CTL_CHALLENGE;
	*out = x;
	return 0;
}

short gm_remote_ctl_events(const struct ctl *x)
{
	return (short)(x->connecting || x->outoff < x->outlen ? POLLOUT : POLLIN);
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

/* ---- the handshake's frames -------------------------------------------------- */

static void on_hello(struct gm_remote_net *n, struct ctl *x, const struct m_hello *h)
{
	struct m_challenge ch;
	if (h->magic == MSG_MAGIC && h->version != MSG_VERSION) {
		ctl_fail(x, -EPROTO,
			 "refused %s: it speaks the remote protocol version %u, this agent %u "
			 "(goldminer %s): run the same goldminer on every host",
			 x->ip, h->version, MSG_VERSION, gm_version());
		return;
	}
	if (h->magic != MSG_MAGIC || (h->role != ROLE_AGENT && h->role != ROLE_WORKER)) {
		ctl_fail(x, -EPROTO, "refused %s: not a goldminer %s peer (bad hello)", x->ip,
			 gm_version());
		return;
	}
	x->role = (int)h->role;
	x->token = h->token;
	x->port = h->port; /* (a number only: matched against the peers' ports) */
	memcpy(x->theirs, h->nonce, sizeof(x->theirs));
	if (gm_auth_nonce(x->mine) ||
	    gm_auth_proof(&n->key, SERVER_ROLE, x->theirs, x->mine, ch.proof)) {
		ctl_fail(x, -EIO, "no randomness for a nonce");
		return;
	}
	memcpy(ch.nonce, x->mine, sizeof(ch.nonce));
	ctl_put(x, CTL_CHALLENGE, &ch, sizeof(ch), NULL, 0);
	x->want = CTL_AUTH;
}

/* Our worker's address after a message m into x->out (0 or -errno). */
static int put_with_address(struct gm_remote_net *n, struct ctl *x, enum ctl_type type,
			    const void *m, size_t mlen)
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
	(void)n;
	return 0;
}

static void on_challenge(struct gm_remote_net *n, struct ctl *x, const struct m_challenge *ch)
{
	struct m_auth a;
	char err[256];
	int rc;
	if (!gm_auth_verify(&n->key, SERVER_ROLE, x->mine, ch->nonce, ch->proof)) {
		ctl_fail(x, -EACCES,
			 "%s does not know the secret (its proof is wrong): check --secret on "
			 "both hosts",
			 x->ip);
		return;
	}
	memcpy(x->theirs, ch->nonce, sizeof(x->theirs));
	if (gm_auth_proof(&n->key, CLIENT_ROLE, x->theirs, x->mine, a.proof)) {
		ctl_fail(x, -EIO, "cannot compute a proof");
		return;
	}
	if (!x->w) { /* an agent's connection to a peer: a worker of its own */
		rc = gm_remote_net_worker(n, &x->w, err, sizeof(err));
		if (rc) {
			ctl_fail(x, rc, "%s", err);
			return;
		}
		x->own_w = true;
	}
	rc = put_with_address(n, x, CTL_AUTH, &a, sizeof(a));
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

static void on_auth(struct gm_remote_net *n, struct ctl *x, const unsigned char *body, size_t len)
{
	struct m_auth a;
	struct m_welcome wm = {0};
	memcpy(&a, body, sizeof(a));
	x->want = 0; /* nothing more is read */
	if (!gm_auth_verify(&n->key, CLIENT_ROLE, x->mine, x->theirs, a.proof)) {
		wm.status = -EACCES;
		snprintf(wm.msg, sizeof(wm.msg), "refused: wrong secret");
		ctl_put(x, CTL_WELCOME, &wm, sizeof(wm), NULL, 0);
		ctl_fail(x, -EACCES, "refused %s: it does not know the secret", x->ip);
		return;
	}
	struct hjob *job = NULL;
	if (x->role == ROLE_WORKER) {
		job = n->job_of ? n->job_of(n->owner, x->token) : NULL;
		if (!job) {
			wm.status = -ENOENT;
			snprintf(wm.msg, sizeof(wm.msg), "no such job here (it ended)");
		}
	}
	x->w = n->w;
	if (!wm.status &&
	    !(x->c = make_conn(n, x, body + sizeof(a), len - sizeof(a), wm.msg, sizeof(wm.msg))))
		wm.status = -EAGAIN;
	if (wm.status) {
		ctl_put(x, CTL_WELCOME, &wm, sizeof(wm), NULL, 0);
		ctl_fail(x, wm.status, "%s at %s: %s",
			 x->role == ROLE_AGENT ? "agent" : "remote worker", x->ip, wm.msg);
		return;
	}
	x->c->job = job;
	int rc = put_with_address(n, x, CTL_WELCOME, &wm, sizeof(wm));
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
		return len == sizeof(struct m_hello);
	case CTL_CHALLENGE:
		return len == sizeof(struct m_challenge);
	case CTL_AUTH:
		return len > sizeof(struct m_auth) && len <= sizeof(struct m_auth) + CTL_ADDR_MAX;
	case CTL_WELCOME:
		return len >= sizeof(struct m_welcome) &&
		       len <= sizeof(struct m_welcome) + CTL_ADDR_MAX;
	default:
		return false;
	}
}

static void on_frame(struct gm_remote_net *n, struct ctl *x)
{
	union {
		struct m_hello hello;
		struct m_challenge ch;
	} m;
	size_t len = x->hdr[1];
	x->got = 0;
	switch (x->want) {
	case CTL_HELLO:
		memcpy(&m.hello, x->in, sizeof(m.hello));
		on_hello(n, x, &m.hello);
		break;
	case CTL_CHALLENGE:
		memcpy(&m.ch, x->in, sizeof(m.ch));
		on_challenge(n, x, &m.ch);
		break;
	case CTL_AUTH:
		on_auth(n, x, x->in, len);
		break;
	case CTL_WELCOME:
		on_welcome(n, x, x->in, len);
		break;
	}
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
		ssize_t k = recv(x->fd, dst, need, 0);
		if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR)) {
			ctl_fail(x, -ECONNRESET, "%s closed the connection during the handshake",
				 x->ip);
			return;
		}
		if (k < 0)
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
		ssize_t k = send(x->fd, x->out + x->outoff, x->outlen - x->outoff, MSG_NOSIGNAL);
		if (k < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (k <= 0) {
			if (x->close_when_sent) /* the endpoint exists: UCX takes it from here */
				x->status = 1;
			ctl_fail(x, -ECONNRESET, "%s closed the connection during the handshake",
				 x->ip);
			return;
		}
		x->outoff += (size_t)k;
	}
	if (x->close_when_sent)
		x->status = 1;
}

static void ctl_connected(struct gm_remote_net *n, struct ctl *x)
{
	struct pollfd p = {.fd = x->fd, .events = POLLOUT};
	int e = 0;
	socklen_t el = sizeof(e);
	if (poll(&p, 1, 0) <= 0)
		return;
	if (getsockopt(x->fd, SOL_SOCKET, SO_ERROR, &e, &el) || e) {
		ctl_fail(x, -(e ? e : errno), "cannot connect: %s", strerror(e ? e : errno));
		return;
	}
	x->connecting = false;
	struct m_hello h = {.magic = MSG_MAGIC,
			    .version = MSG_VERSION,
			    .role = (uint32_t)x->role,
			    .port = x->port,
			    .token = x->token};
	if (gm_auth_nonce(x->mine)) {
		ctl_fail(x, -EIO, "no randomness for a nonce");
		return;
	}
	memcpy(h.nonce, x->mine, sizeof(h.nonce));
	ctl_put(x, CTL_HELLO, &h, sizeof(h), NULL, 0);
	(void)n;
}

void gm_remote_ctl_step(struct gm_remote_net *n, struct ctl *x)
{
	if (!x->status && now_ms() - x->since_ms >= AUTH_MS && x->connecting)
		ctl_fail(x, -ETIMEDOUT, "cannot connect: no answer within %d ms", AUTH_MS);
	if (!x->status && now_ms() - x->since_ms >= AUTH_MS)
		ctl_fail(x, -ETIMEDOUT, "%s did not authenticate within %d ms", x->ip, AUTH_MS);
	if (!x->status && x->connecting)
		ctl_connected(n, x);
	for (int round = 0; round < 4 && !x->status && !x->connecting; round++) {
		ctl_write(x);
		if (x->status || x->outoff < x->outlen)
			break;
		ctl_read(n, x);
		if (x->outoff == x->outlen)
			break;
	}
	/* a refusal's WELCOME: sent if it can leave now (best effort), then closed */
	if (x->status < 0 && !x->client && x->outoff < x->outlen)
		(void)!send(x->fd, x->out + x->outoff, x->outlen - x->outoff, MSG_NOSIGNAL);
}

int gm_remote_ctl_connect(struct gm_remote_net *n, const char *addr, uint64_t token, uint32_t lport,
			  struct conn **out, char *err, size_t errlen)
{
	struct ctl *x;
	*out = NULL;
	int rc = gm_remote_ctl_dial(addr, ROLE_WORKER, token, n->w, &x);
	if (rc) {
		gm_errf(err, errlen, "cannot connect: %s", strerror(-rc));
		return rc;
	}
	x->port = lport;
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
