/*
 * fuzz_ctl.c - fuzz target: the remote plugin's control-port handshake
 * (core/remote/ctl.c) from either side, over a TCP connection on the loopback.
 * The other end is the fuzzer: arbitrary bytes written as a would-be peer into
 * an accepted connection (the server's state machine, with a real secret), or
 * as a would-be server into a connection this side dialled (the client's
 * parse of WELCOME). When the fuzzer "knows the secret" the harness first runs
 * a real TLS 1.3 handshake as that peer (OpenSSL, the pair's key derived as an
 * agent would) and the input's bytes then travel inside TLS as frames; else
 * they are written raw, as a stranger's. UCX is a fake (ucx_stub.c): the
 * handshake runs whole, up to the endpoint it makes.
 *
 * Input: two flag bytes, then the peer's bytes.
 *   byte 0: 1 client side (else server); 2 the peer speaks TLS with a key
 *   (else raw bytes); 4 a job exists for a remote worker's token (server) /
 *   the client dials on the main worker (else one of its own); 8
 *   ucp_worker_get_address fails; 16 ucp_ep_create fails; 0x60 the peer's
 *   bytes in pieces of 1, 7, 64 or whole; 0x80 the remote-worker role (the
 *   peer's identity at a server, this side's at a client) (else an agent).
 *   byte 1: 1 the peer hangs up after its last byte; 2 ... before this side
 *   has read it; 4 the peer's key is wrong; 8 the peer presents the server's
 *   own identity; 16 an identity of another version; 32 an identity naming
 *   another address.
 * Steps are bounded (one per piece, a few more, then AUTH_MS has passed).
 *
 * Checks (abort): the handshake ends (done or refused) once AUTH_MS has
 * passed; a refusal says why in printable words and leaves no connection
 * behind (none in the table, or one already dead that the agent's tick
 * closes); a success leaves exactly one new connection, its endpoint made to
 * the address bytes of the peer's frame (a remote worker: only for a job
 * here), and only after a TLS handshake with the right key and an admissible
 * identity; what this side sends inside TLS is well formed (a client's HELLO
 * names its role, port, token and worker address; a server's WELCOME ends its
 * words with a NUL, a welcome carries the worker address); every fake UCX
 * worker and endpoint is destroyed at the end.
 *
 * Built with -DGM_FUZZ_SEEDS, main(DIR) writes the seed corpus instead.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>

#include "../../core/remote/auth.h" /* the plugin's, not installed */
#include "../../core/remote/ctl.h"
#include "../../core/remote/tls.h"
#include "fuzz.h"
#include "ucx_stub.h"

enum {
	F_CLIENT = 1,
	F_SECRET = 2,
	F_JOB = 4,
	F_NO_ADDR = 8,
	F_NO_EP = 16,
	F_PIECES = 0x60,
	F_WORKER = 0x80
};
enum { G_HANGUP = 1, G_EARLY = 2, G_WRONG_KEY = 4, G_OWN_ID = 8, G_OLD_ID = 16, G_OTHER_IP = 32 };
#define TOKEN	  42u
#define PEER_PORT 7001u /* the peer agent's control port (its identity) */

static struct gm_remote_net net;
static int dummy_job, listener = -1;
static uint16_t lport;
static SSL_CTX *peer_cli, *peer_srv; /* the harness's own TLS contexts */
static const uint8_t session_id[SESSION_ID] = {1, 2, 3, 4, 5, 6, 7, 8};
static uint8_t session_xs[SESSION_KEY];

static struct hjob *job_of(void *owner, uint64_t token)
{
	(void)owner;
	return token == TOKEN ? (struct hjob *)&dummy_job : NULL;
}

static struct hjob *no_job(void *owner, uint64_t token)
{
	(void)owner, (void)token;
	return NULL;
}

static bool admit_all(void *owner, const char *ip, uint32_t port)
{
	(void)owner, (void)ip;
	return port == PEER_PORT;
}

static void net_init(void)
{
	char err[256];
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t al = sizeof(a);
	if (net.w)
		return;
	/* as every process that runs ctl.c does (cmd/node.c): OpenSSL writes to
	 * the socket with write(), and a peer that closed first would end this
	 * one by SIGPIPE (rc 141 here, no report), not with an error */
	signal(SIGPIPE, SIG_IGN);
	net.efd = net.epfd = -1;
	memset(net.key.key, 0x5a, 32);
	net.key.len = 32;
	memset(session_xs, 0x77, sizeof(session_xs));
	net.admit = admit_all;
	if (ucp_worker_create(NULL, NULL, &net.w) != UCS_OK ||
	    gm_remote_tls_init(&net.tls_cli, &net.tls_srv, err, sizeof(err)) ||
	    gm_remote_tls_init(&peer_cli, &peer_srv, err, sizeof(err)))
		abort();
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (listener < 0 || bind(listener, (struct sockaddr *)&a, sizeof(a)) ||
	    listen(listener, 16) || getsockname(listener, (struct sockaddr *)&a, &al))
		abort();
	lport = ntohs(a.sin_port);
}

static int nconns(void)
{
	int k = 0;
	for (int i = 0; i < MAX_CONNS; i++)
		k += net.conns[i] != NULL;
	return k;
}

/* ---- the fuzzer's end ----------------------------------------------------------- */

struct peer {
	int fd;
	SSL *ssl; /* NULL: raw bytes */
	bool done, failed;
	struct tls_side t;
	uint8_t fl, fl2;
	char server_id[TLS_ID_MAX]; /* the server's identity (the peer a client) */
};

static struct peer P;

/* The key the fuzzer's server uses for the identity this side presents. */
static int peer_psk(struct tls_side *t, const char *id, struct gm_auth_key *key)
{
	struct tls_id who;
	int rc = gm_remote_tls_parse_id(id, strlen(id), &who);
	if (rc)
		return rc;
	if (who.role == ROLE_WORKER) /* the worker's key is net's: its lender derived it */
		*key = net.key;
	else
		rc = gm_remote_tls_agent_key(&net.key, id, P.server_id, key);
	if (!rc && (P.fl2 & G_WRONG_KEY))
		key->key[0] ^= 1;
	(void)t;
	return rc;
}

/* The fuzzer as a TLS client (it dials the server under test): its identity
 * and key as the flags say. */
static void peer_client(const char *server_self)
{
	struct sockaddr_in me;
	socklen_t ml = sizeof(me);
	struct tls_side *t = &P.t;
	if (getsockname(P.fd, (struct sockaddr *)&me, &ml))
		abort();
	if (P.fl & F_WORKER)
		gm_remote_tls_worker_id(t->id, sizeof(t->id), session_id, TOKEN);
	else if (P.fl2 & G_OWN_ID)
		snprintf(t->id, sizeof(t->id), "%s", server_self);
	else if (P.fl2 & G_OTHER_IP)
		snprintf(t->id, sizeof(t->id), "goldminer/%u agent 127.0.0.9:%u", MSG_VERSION,
			 PEER_PORT);
	else
		gm_remote_tls_agent_id(t->id, sizeof(t->id), (struct sockaddr *)&me, PEER_PORT);
	if (P.fl2 & G_OLD_ID)
		t->id[10] = t->id[10] == '9' ? '8' : '9'; /* "goldminer/N": another N */
	if (P.fl & F_WORKER)
		gm_remote_tls_worker_key(session_xs, t->id, &t->key);
	else
		gm_remote_tls_agent_key(&net.key, t->id, server_self, &t->key);
	if (P.fl2 & G_WRONG_KEY)
		t->key.key[0] ^= 1;
	if (!(P.ssl = gm_remote_tls_new(peer_cli, P.fd, true, t)))
		abort();
}

/* One step of the fuzzer's TLS handshake. */
static void peer_handshake(void)
{
	bool ww;
	if (!P.ssl || P.done || P.failed)
		return;
	int r = gm_remote_tls_handshake(P.ssl, &ww);
	P.done = r > 0;
	P.failed = r < 0;
}

/* What this side has sent inside TLS, read by the fuzzer's end and checked
 * frame by frame: each one the frame this side owes, of its exact size.
 * (Raw, it is the TLS handshake: read and dropped.) */
struct sent {
	unsigned char buf[8 + CTL_FRAME];
	size_t got;
	int frames;
	bool welcome;
	int32_t welcome_status;
};

static void check_sent(struct ctl *x, struct sent *s)
{
	peer_handshake();
	for (;;) {
		ssize_t k;
		if (P.ssl && P.done) {
			ERR_clear_error();
			int r = SSL_read(P.ssl, s->buf + s->got, (int)(sizeof(s->buf) - s->got));
			k = r > 0 ? r : -1;
		} else if (P.ssl) {
			return;
		} else {
			unsigned char junk[4096];
			k = recv(P.fd, junk, sizeof(junk), MSG_DONTWAIT);
			if (k > 0)
				continue;
		}
		if (k <= 0)
			return;
		s->got += (size_t)k;
		while (s->got >= 8) {
			uint32_t hdr[2];
			memcpy(hdr, s->buf, 8);
			if (hdr[1] > CTL_FRAME)
				abort();
			if (s->got < 8 + hdr[1])
				break;
			const unsigned char *body = s->buf + 8;
			s->frames++;
			if (!x->client && hdr[0] == CTL_WELCOME && !s->welcome) {
				struct m_welcome wm;
				if (hdr[1] < sizeof(wm))
					abort();
				memcpy(&wm, body, sizeof(wm));
				if (!memchr(wm.msg, '\0', sizeof(wm.msg)))
					abort();
				s->welcome = true;
				s->welcome_status = wm.status;
				if (wm.status == 0 &&
				    (hdr[1] != sizeof(wm) + FAKE_ADDR_LEN ||
				     memcmp(body + sizeof(wm), gm_fuzz_fake_addr, FAKE_ADDR_LEN)))
					abort();
			} else if (x->client && s->frames == 1 && hdr[0] == CTL_HELLO) {
				struct m_hello h;
				if (hdr[1] != sizeof(h) + FAKE_ADDR_LEN)
					abort();
				memcpy(&h, body, sizeof(h));
				if (h.magic != MSG_MAGIC || h.version != MSG_VERSION ||
				    h.role != (uint32_t)x->role || h.token != x->token ||
				    h.port != x->port ||
				    memcmp(body + sizeof(h), gm_fuzz_fake_addr, FAKE_ADDR_LEN))
					abort();
			} else {
				abort(); /* a frame this side does not owe now */
			}
			memmove(s->buf, s->buf + 8 + hdr[1], s->got - 8 - hdr[1]);
			s->got -= 8 + hdr[1];
		}
	}
}

static void step(struct ctl *x, struct sent *s)
{
	gm_remote_ctl_step(&net, x);
	check_sent(x, s);
}

/* Write n bytes from the fuzzer's end (inside TLS once its handshake is done,
 * else raw) in pieces of `piece` (0: whole), one step of x after each (last:
 * they are the peer's last); false once the handshake ended or nothing more
 * can be written. */
static bool feed(struct ctl *x, const uint8_t *p, size_t n, size_t piece, bool last,
		 struct sent *s)
{
	size_t off = 0;
	while (off < n && !x->status) {
		size_t k = piece && n - off > piece ? piece : n - off;
		ssize_t w;
		if (P.ssl) {
			ERR_clear_error();
			int r = SSL_write(P.ssl, p + off, (int)k);
			w = r > 0 ? r : -1;
		} else {
			w = send(P.fd, p + off, k, MSG_NOSIGNAL | MSG_DONTWAIT);
		}
		if (w > 0)
			off += (size_t)w;
		if (last && off == n && (P.fl2 & G_EARLY))
			shutdown(P.fd, SHUT_RDWR);
		step(x, s);
		if (w <= 0 && !x->status)
			return false; /* the socket is full and the state machine reads no more */
	}
	return !x->status;
}

static bool printable(const char *m, size_t cap)
{
	size_t n = strnlen(m, cap);
	if (!n || n == cap)
		return false;
	for (size_t k = 0; k < n; k++)
		if ((unsigned char)m[k] < 0x20 || m[k] == 0x7f)
			return false;
	return true;
}

/* The TCP connection between this side (*mine) and the fuzzer's end (P.fd). */
static void connect_pair(bool client, struct ctl **x)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(lport)};
	char addr[32];
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	if (client) { /* this side dials the fuzzer's listener */
		snprintf(addr, sizeof(addr), "127.0.0.1:%u", lport);
		if (gm_remote_ctl_dial(addr, P.fl & F_WORKER ? ROLE_WORKER : ROLE_AGENT, TOKEN,
				       P.fl & F_JOB ? net.w : NULL, x))
			abort();
		P.fd = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
	} else {
		P.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (P.fd < 0 || connect(P.fd, (struct sockaddr *)&a, sizeof(a)))
			abort();
		int s = accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (s < 0 || !(*x = gm_remote_ctl_accepted(s, "127.0.0.1")))
			abort();
	}
	int one = 1; /* (no Nagle: a small write left waiting for a delayed ACK) */
	if (P.fd < 0 || fcntl(P.fd, F_SETFL, O_NONBLOCK) ||
	    setsockopt(P.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const size_t pieces[4] = {0, 1, 7, 64};
	struct sent s = {0};
	struct ctl *x;
	if (size < 2)
		return 0;
	net_init();
	P = (struct peer){.fl = data[0], .fl2 = data[1]};
	uint8_t fl = P.fl, fl2 = P.fl2;
	net.job_of = fl & F_JOB ? job_of : no_job;
	gm_fuzz_ucx = (struct gm_fuzz_ucx){.fail_address = fl & F_NO_ADDR,
					   .fail_ep = fl & F_NO_EP,
					   .workers = gm_fuzz_ucx.workers,
					   .eps = gm_fuzz_ucx.eps};
	int workers0 = gm_fuzz_ucx.workers;
	/* a live session with 127.0.0.1, whose remote workers a server admits */
	struct conn *lender = gm_remote_conn_new(&net, false, "127.0.0.1");
	if (!lender)
		abort();
	lender->st = C_OK;
	lender->role = ROLE_AGENT;
	memcpy(lender->sid, session_id, SESSION_ID);
	memcpy(lender->xs, session_xs, SESSION_KEY);
	connect_pair(fl & F_CLIENT, &x);
	if (fl & F_CLIENT) {
		x->port = PEER_PORT + 1;
		memcpy(x->sid, session_id, SESSION_ID);
		if (fl & F_SECRET) {
			struct sockaddr_in me;
			socklen_t ml = sizeof(me);
			getsockname(P.fd, (struct sockaddr *)&me, &ml);
			gm_remote_tls_agent_id(P.server_id, sizeof(P.server_id),
					       (struct sockaddr *)&me, lport);
			P.t.psk = peer_psk;
			if (!(P.ssl = gm_remote_tls_new(peer_srv, P.fd, false, &P.t)))
				abort();
		}
		step(x, &s); /* connected: its ClientHello */
	} else if (fl & F_SECRET) {
		peer_client(x->self_id);
	}
	for (int k = 0; k < 64 && P.ssl && !P.done && !P.failed && !x->status; k++)
		step(x, &s);
	size_t piece = pieces[(fl & F_PIECES) >> 5];
	if (!P.ssl || P.done)
		feed(x, data + 2, size - 2, piece, true, &s);
	if (fl2 & G_HANGUP)
		shutdown(P.fd, SHUT_WR);
	for (int k = 0; k < 4 && !x->status; k++)
		step(x, &s);
	if (!x->status) {
		x->since_ms -= AUTH_MS; /* as if AUTH_MS had passed */
		step(x, &s);
	}
	if (!x->status)
		abort(); /* a handshake that never ends */
	struct conn *c = x->c;
	int spoiled = fl & F_CLIENT ? G_WRONG_KEY
				    : G_WRONG_KEY | G_OWN_ID | G_OLD_ID | G_OTHER_IP;
	bool admissible = (fl & F_SECRET) && P.done && !(fl2 & spoiled);
	if (x->status < 0) {
		if (!printable(x->why, sizeof(x->why)))
			abort();
		/* a refusal leaves nothing, or (the server's WELCOME could not be made
		 * after its endpoint was) one dead connection the agent's tick closes */
		if (nconns() != (c ? 2 : 1) || (c && c->st != C_DEAD) || (c && x->client))
			abort();
		if (!x->client && s.welcome && s.welcome_status == 0)
			abort(); /* told welcome, then refused */
	} else {
		/* done: one connection, its endpoint to the frame's address bytes */
		const unsigned char *a = gm_fuzz_ucx.ep_address;
		size_t at = x->client ? sizeof(struct m_welcome) : sizeof(struct m_hello);
		if (x->status != 1 || !c || c->st != C_OK || !c->ep || nconns() != 2 ||
		    a != x->in + at || x->hdr[1] <= at || c->outgoing != x->client || !admissible)
			abort();
		if (!x->client && c->role == ROLE_WORKER && c->job != (struct hjob *)&dummy_job)
			abort();
		if (!x->client && c->role != ROLE_WORKER && c->role != ROLE_AGENT)
			abort();
		if (memcmp(c->sid, x->sid, SESSION_ID))
			abort(); /* the connection keeps its session */
	}
	gm_remote_ctl_free(x);
	if (c)
		gm_remote_conn_free(&net, c);
	gm_remote_conn_free(&net, lender);
	SSL_free(P.ssl);
	close(P.fd);
	if (nconns() || gm_fuzz_ucx.workers != workers0 || gm_fuzz_ucx.eps)
		abort(); /* a worker or an endpoint left behind */
	return 0;
}

#ifdef GM_FUZZ_SEEDS
/* ---- the seed corpus --------------------------------------------------------- */

static const char *seed_dir;

struct seedbuf {
	uint8_t b[8192];
	size_t n;
};

static void put(struct seedbuf *s, const void *p, size_t n)
{
	if (s->n + n > sizeof(s->b))
		abort();
	memcpy(s->b + s->n, p, n);
	s->n += n;
}

static void frame(struct seedbuf *s, uint32_t type, const void *body, size_t len, bool addr)
{
	uint32_t hdr[2] = {type, (uint32_t)(len + (addr ? FAKE_ADDR_LEN : 0))};
	put(s, hdr, sizeof(hdr));
	put(s, body, len);
	if (addr)
		put(s, gm_fuzz_fake_addr, FAKE_ADDR_LEN);
}

static void write_seed(const char *name, const struct seedbuf *s)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", seed_dir, name);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(s->b, 1, s->n, f) != s->n || fclose(f)) {
		perror(path);
		exit(1);
	}
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR (writes fuzz_ctl's seed corpus)\n", argv[0]);
		return 2;
	}
	seed_dir = argv[1];
	struct m_welcome no = {.status = -ENOENT};
	snprintf(no.msg, sizeof(no.msg), "no such job here (it ended)");
	struct m_welcome yes = {0};
	static const struct {
		const char *name;
		uint8_t fl, fl2;
		int what; /* 0 hello (server), 1 welcome (client), 2 refusal, 3 old HELLO, 4 junk */
	} seeds[] = {
	    {"server-agent", F_SECRET, 0, 0},
	    {"server-agent-pieces", F_SECRET | 0x20, 0, 0},
	    {"server-worker-job", F_SECRET | F_JOB | F_WORKER, 0, 0},
	    {"server-worker-no-job", F_SECRET | F_WORKER, 0, 0},
	    {"server-wrong-key", F_SECRET, G_WRONG_KEY, 0},
	    {"server-own-identity", F_SECRET, G_OWN_ID, 0},
	    {"server-other-version", F_SECRET, G_OLD_ID, 0},
	    {"server-other-address", F_SECRET, G_OTHER_IP, 0},
	    {"server-older-agent", 0, 0, 3},
	    {"server-not-tls", 0x40, G_HANGUP, 4},
	    {"server-no-address", F_SECRET | F_NO_ADDR, 0, 0},
	    {"server-no-ep", F_SECRET | F_NO_EP | 0x60, 0, 0},
	    {"server-gone-before-welcome", F_SECRET, G_EARLY, 0},
	    {"server-wrong-frame", F_SECRET, G_HANGUP, 1},
	    {"client-agent", F_CLIENT | F_SECRET, 0, 1},
	    {"client-worker", F_CLIENT | F_SECRET | F_JOB | F_WORKER, 0, 1},
	    {"client-refused", F_CLIENT | F_SECRET | 0x20, 0, 2},
	    {"client-wrong-key", F_CLIENT | F_SECRET, G_WRONG_KEY, 1},
	    {"client-no-ep", F_CLIENT | F_SECRET | F_NO_EP, 0, 1},
	    {"client-not-tls", F_CLIENT, G_HANGUP, 4},
	};
	for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++) {
		struct seedbuf s = {.n = 0};
		uint8_t fl[2] = {seeds[i].fl, seeds[i].fl2};
		struct m_hello h = {.magic = MSG_MAGIC,
				    .version = MSG_VERSION,
				    .role = seeds[i].fl & F_WORKER ? ROLE_WORKER : ROLE_AGENT,
				    .port = PEER_PORT,
				    .token = seeds[i].fl & F_WORKER ? TOKEN : 0};
		static const uint8_t junk[] = "GET / HTTP/1.0\r\n\r\n";
		uint32_t old[2] = {1, 56}; /* an agent before TLS: its HELLO frame's header */
		put(&s, fl, 2);
		switch (seeds[i].what) {
		case 0:
			frame(&s, CTL_HELLO, &h, sizeof(h), true);
			break;
		case 1:
			frame(&s, CTL_WELCOME, &yes, sizeof(yes), true);
			break;
		case 2:
			frame(&s, CTL_WELCOME, &no, sizeof(no), false);
			break;
		case 3:
			put(&s, old, sizeof(old));
			put(&s, junk, sizeof(junk));
			break;
		default:
			put(&s, junk, sizeof(junk));
		}
		write_seed(seeds[i].name, &s);
	}
	return 0;
}
#endif
