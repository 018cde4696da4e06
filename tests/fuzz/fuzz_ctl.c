/*
 * fuzz_ctl.c - fuzz target: the remote plugin's control-port handshake
 * (core/remote/ctl.c) from either side, over a socket pair. The other end is
 * the fuzzer: arbitrary bytes written as a would-be peer into an accepted
 * connection (the server's state machine, with a real secret), or as a
 * would-be server into a connection this side dialled (the client's parse of
 * CHALLENGE and WELCOME). UCX is a fake (ucx_stub.c): the handshake runs whole,
 * up to the endpoint it makes.
 *
 * Input: two flag bytes, then the peer's bytes.
 *   byte 0: 1 client side (else server); 2 the peer knows the secret: the
 *   harness writes the right proof into each AUTH (server side) or CHALLENGE
 *   (client side) frame, the input then read as frames {type, len, body};
 *   4 a job exists for a remote worker's token (server) / the client dials on
 *   the main worker (else one of its own); 8 ucp_worker_get_address fails;
 *   16 ucp_ep_create fails; 0x60 the peer's bytes in pieces of 1, 7, 64 or
 *   whole frames; 0x80 the client dials as a remote worker (else an agent).
 *   byte 1: 1 the peer hangs up after its last byte; 2 ... before this side
 *   has read it (this side's answer to it cannot be sent).
 * Steps are bounded (one per piece, a few more, then AUTH_MS has passed).
 *
 * Checks (abort): the handshake ends (done or refused) once AUTH_MS has
 * passed; a refusal says why in printable words and leaves no connection
 * behind (none in the table, or one already dead that the agent's tick
 * closes); a success leaves exactly one connection, its endpoint made to the
 * address bytes of the peer's frame (a remote worker: only for a job here);
 * what this side sends is well formed (the frame it owes in the state it is in;
 * a client's AUTH proves the secret and carries its worker's address); every
 * fake UCX worker and endpoint is destroyed at the end.
 *
 * Built with -DGM_FUZZ_SEEDS, main(DIR) writes the seed corpus instead.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../core/remote/auth.h" /* the plugin's, not installed */
#include "../../core/remote/ctl.h"
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
#define TOKEN 42u

static struct gm_remote_net net;
static int dummy_job;

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

static void net_init(void)
{
	if (net.w)
		return;
	net.efd = net.epfd = -1;
	memset(net.key.key, 0x5a, 32);
	net.key.len = 32;
	if (ucp_worker_create(NULL, NULL, &net.w) != UCS_OK)
		abort();
}

static int nconns(void)
{
	int k = 0;
	for (int i = 0; i < MAX_CONNS; i++)
		k += net.conns[i] != NULL;
	return k;
}

/* What this side has sent, read from the peer's end and checked frame by frame:
 * each one the frame this side owes, of its exact size. *welcome: the status
 * of a WELCOME (server side). */
struct sent {
	unsigned char buf[8 + CTL_FRAME];
	size_t got;
	int frames;
	bool welcome;
	int32_t welcome_status;
	size_t welcome_len;
};

static void check_sent(struct ctl *x, int peer, struct sent *s)
{
	for (;;) {
		ssize_t k = recv(peer, s->buf + s->got, sizeof(s->buf) - s->got, MSG_DONTWAIT);
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
			if (!x->client && s->frames == 1 && hdr[0] == CTL_CHALLENGE) {
				if (hdr[1] != sizeof(struct m_challenge))
					abort();
			} else if (!x->client && hdr[0] == CTL_WELCOME && !s->welcome) {
				struct m_welcome wm;
				if (hdr[1] < sizeof(wm))
					abort();
				memcpy(&wm, body, sizeof(wm));
				if (!memchr(wm.msg, '\0', sizeof(wm.msg)))
					abort();
				s->welcome = true;
				s->welcome_status = wm.status;
				s->welcome_len = hdr[1];
				if (wm.status == 0 &&
				    (hdr[1] != sizeof(wm) + FAKE_ADDR_LEN ||
				     memcmp(body + sizeof(wm), gm_fuzz_fake_addr, FAKE_ADDR_LEN)))
					abort();
			} else if (x->client && s->frames == 1 && hdr[0] == CTL_HELLO) {
				struct m_hello h;
				if (hdr[1] != sizeof(h))
					abort();
				memcpy(&h, body, sizeof(h));
				if (h.magic != MSG_MAGIC || h.version != MSG_VERSION ||
				    h.role != (uint32_t)x->role || h.token != x->token ||
				    memcmp(h.nonce, x->mine, GM_AUTH_NONCE))
					abort();
			} else if (x->client && s->frames == 2 && hdr[0] == CTL_AUTH) {
				uint8_t proof[GM_AUTH_PROOF];
				if (hdr[1] != sizeof(struct m_auth) + FAKE_ADDR_LEN ||
				    gm_auth_proof(&net.key, CLIENT_ROLE, x->theirs, x->mine,
						  proof) ||
				    memcmp(proof, body, GM_AUTH_PROOF) ||
				    memcmp(body + GM_AUTH_PROOF, gm_fuzz_fake_addr, FAKE_ADDR_LEN))
					abort();
			} else {
				abort(); /* a frame this side does not owe now */
			}
			memmove(s->buf, s->buf + 8 + hdr[1], s->got - 8 - hdr[1]);
			s->got -= 8 + hdr[1];
		}
	}
}

static bool hangup_early; /* the peer hangs up as soon as its last byte is written */

/* Write n bytes to the peer's end in pieces of `piece` (0: whole), one step of
 * x after each (last: they are the peer's last); false once the handshake ended. */
static bool feed(struct ctl *x, int peer, const uint8_t *p, size_t n, size_t piece, bool last,
		 struct sent *s)
{
	size_t off = 0;
	while (off < n && !x->status) {
		size_t k = piece && n - off > piece ? piece : n - off;
		ssize_t w = send(peer, p + off, k, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w > 0)
			off += (size_t)w;
		if (last && off == n && hangup_early)
			shutdown(peer, SHUT_RDWR);
		gm_remote_ctl_step(&net, x);
		check_sent(x, peer, s);
		if (w <= 0 && !x->status)
			return false; /* the socket is full and the state machine reads no more */
	}
	return !x->status;
}

/* The peer's bytes as frames, the proof it could make written in (it knows the
 * secret); what does not parse as a frame is written as it is. */
static void feed_frames(struct ctl *x, int peer, const uint8_t *p, size_t n, size_t piece,
			struct sent *s)
{
	unsigned char *f = malloc(n ? n : 1);
	if (!f)
		abort();
	while (n >= 8 && !x->status) {
		uint32_t hdr[2];
		memcpy(hdr, p, 8);
		size_t blen = hdr[1] < n - 8 ? hdr[1] : n - 8;
		memcpy(f, p, 8 + blen);
		if (!x->client && hdr[0] == CTL_AUTH && blen >= GM_AUTH_PROOF)
			gm_auth_proof(&net.key, CLIENT_ROLE, x->mine, x->theirs, f + 8);
		if (x->client && hdr[0] == CTL_CHALLENGE && blen >= sizeof(struct m_challenge))
			gm_auth_proof(&net.key, SERVER_ROLE, x->mine, f + 8, f + 8 + GM_AUTH_NONCE);
		if (!feed(x, peer, f, 8 + blen, piece, 8 + blen == n, s))
			break;
		p += 8 + blen;
		n -= 8 + blen;
	}
	if (!x->status)
		feed(x, peer, p, n, piece, true, s);
	free(f);
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const size_t pieces[4] = {0, 1, 7, 64};
	struct sent s = {0};
	int sv[2];
	if (size < 2)
		return 0;
	uint8_t fl = data[0], fl2 = data[1];
	hangup_early = fl2 & 2;
	net_init();
	net.job_of = fl & F_JOB ? job_of : no_job;
	gm_fuzz_ucx = (struct gm_fuzz_ucx){.fail_address = fl & F_NO_ADDR,
					   .fail_ep = fl & F_NO_EP,
					   .workers = gm_fuzz_ucx.workers,
					   .eps = gm_fuzz_ucx.eps};
	int workers0 = gm_fuzz_ucx.workers;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return 0;
	fcntl(sv[0], F_SETFL, O_NONBLOCK);
	struct ctl *x = gm_remote_ctl_accepted(sv[0], fl & F_CLIENT ? "10.0.0.1" : "10.0.0.2");
	if (!x)
		abort();
	if (fl & F_CLIENT) { /* as gm_remote_ctl_dial leaves it, its connect() under way */
		x->client = true;
		x->connecting = true;
		x->role = fl & F_WORKER ? ROLE_WORKER : ROLE_AGENT;
		x->token = TOKEN;
		x->w = fl & F_JOB ? net.w : NULL;
		x->want = CTL_CHALLENGE;
		gm_remote_ctl_step(&net, x); /* connected: its HELLO */
		check_sent(x, sv[1], &s);
	}
	size_t piece = pieces[(fl & F_PIECES) >> 5];
	if (fl & F_SECRET)
		feed_frames(x, sv[1], data + 2, size - 2, piece, &s);
	else
		feed(x, sv[1], data + 2, size - 2, piece, true, &s);
	if (fl2 & 1)
		shutdown(sv[1], SHUT_WR);
	for (int k = 0; k < 4 && !x->status; k++) {
		gm_remote_ctl_step(&net, x);
		check_sent(x, sv[1], &s);
	}
	if (!x->status) {
		x->since_ms -= AUTH_MS; /* as if AUTH_MS had passed */
		gm_remote_ctl_step(&net, x);
		check_sent(x, sv[1], &s);
	}
	if (!x->status)
		abort(); /* a handshake that never ends */
	struct conn *c = x->c;
	if (x->status < 0) {
		if (!printable(x->why, sizeof(x->why)))
			abort();
		/* a refusal leaves nothing, or (the server's WELCOME could not be made
		 * after its endpoint was) one dead connection the agent's tick closes */
		if (nconns() != (c ? 1 : 0) || (c && c->st != C_DEAD) || (c && x->client))
			abort();
		if (!x->client && s.welcome && s.welcome_status == 0)
			abort(); /* told welcome, then refused */
	} else {
		/* done: one connection, its endpoint to the frame's address bytes */
		const unsigned char *a = gm_fuzz_ucx.ep_address;
		size_t at = x->client ? sizeof(struct m_welcome) : sizeof(struct m_auth);
		if (x->status != 1 || !c || c->st != C_OK || !c->ep || nconns() != 1 ||
		    a != x->in + at || x->hdr[1] <= at || c->outgoing != x->client)
			abort();
		if (!x->client && c->role == ROLE_WORKER && c->job != (struct hjob *)&dummy_job)
			abort();
		if (!x->client && c->role != ROLE_WORKER && c->role != ROLE_AGENT)
			abort();
	}
	gm_remote_ctl_free(x);
	if (c)
		gm_remote_conn_free(&net, c);
	close(sv[1]);
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

static void frame(struct seedbuf *s, uint32_t type, const void *body, size_t len)
{
	uint32_t hdr[2] = {type, (uint32_t)len};
	put(s, hdr, sizeof(hdr));
	put(s, body, len);
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
	struct m_hello h = {.magic = MSG_MAGIC, .version = MSG_VERSION, .role = ROLE_AGENT};
	memset(h.nonce, 7, sizeof(h.nonce));
	unsigned char auth[sizeof(struct m_auth) + FAKE_ADDR_LEN] = {0};
	memcpy(auth + sizeof(struct m_auth), gm_fuzz_fake_addr, FAKE_ADDR_LEN);
	struct m_challenge ch;
	memset(&ch, 9, sizeof(ch));
	unsigned char welcome[sizeof(struct m_welcome) + FAKE_ADDR_LEN] = {0};
	memcpy(welcome + sizeof(struct m_welcome), gm_fuzz_fake_addr, FAKE_ADDR_LEN);
	struct m_welcome no = {.status = -ENOENT};
	snprintf(no.msg, sizeof(no.msg), "no such job here (it ended)");
	static const struct {
		const char *name;
		uint8_t fl, fl2;
		bool client;
		uint32_t role;
		int last; /* 1: hello only, 2: hello + auth (server); challenge, welcome */
	} seeds[] = {
	    {"server-agent", F_SECRET, 0, false, ROLE_AGENT, 2},
	    {"server-worker-job", F_SECRET | F_JOB, 0, false, ROLE_WORKER, 2},
	    {"server-worker-no-job", F_SECRET, 0, false, ROLE_WORKER, 2},
	    {"server-wrong-proof", 0, 0, false, ROLE_AGENT, 2},
	    {"server-hello-bytes", 0x20, 0, false, ROLE_AGENT, 1},
	    {"server-hello-hangup", 0x40, 1, false, ROLE_AGENT, 1},
	    {"server-no-address", F_SECRET | F_NO_ADDR, 0, false, ROLE_AGENT, 2},
	    {"server-no-ep", F_SECRET | F_NO_EP | 0x60, 0, false, ROLE_AGENT, 2},
	    {"server-gone-before-welcome", F_SECRET, 2, false, ROLE_AGENT, 2},
	    {"server-gone-before-refusal", 0, 2, false, ROLE_AGENT, 2},
	    {"client-agent", F_CLIENT | F_SECRET, 0, true, ROLE_AGENT, 2},
	    {"client-worker", F_CLIENT | F_SECRET | F_JOB | F_WORKER, 0, true, ROLE_WORKER, 2},
	    {"client-refused", F_CLIENT | F_SECRET | 0x20, 0, true, ROLE_AGENT, 3},
	    {"client-wrong-proof", F_CLIENT, 0, true, ROLE_AGENT, 2},
	    {"client-no-ep", F_CLIENT | F_SECRET | F_NO_EP, 0, true, ROLE_AGENT, 2},
	};
	for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++) {
		struct seedbuf s = {.n = 0};
		uint8_t fl[2] = {seeds[i].fl, seeds[i].fl2};
		put(&s, fl, 2);
		if (!seeds[i].client) {
			h.role = seeds[i].role;
			h.token = TOKEN;
			frame(&s, CTL_HELLO, &h, sizeof(h));
			if (seeds[i].last >= 2)
				frame(&s, CTL_AUTH, auth, sizeof(auth));
		} else {
			frame(&s, CTL_CHALLENGE, &ch, sizeof(ch));
			if (seeds[i].last == 3)
				frame(&s, CTL_WELCOME, &no, sizeof(no));
			else
				frame(&s, CTL_WELCOME, welcome, sizeof(welcome));
		}
		write_seed(seeds[i].name, &s);
	}
	return 0;
}
#endif
