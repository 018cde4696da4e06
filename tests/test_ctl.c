/*
 * test_ctl.c - the remote plugin's control port (core/remote/ctl.h): the guard
 * on UCX's listening sockets admits only the named addresses (IPv4, IPv6, a
 * v4-mapped one, the longest list) and leaves older listeners alone; the
 * server's side of the handshake refuses a frame of the wrong type or length
 * before reading its body, another protocol version in words, a wrong proof
 * (answering with a refusal), silence past AUTH_MS and a peer that hangs up;
 * the client refuses a server without the secret; a whole handshake between
 * two UCP workers makes one endpoint each side, over which a message arrives,
 * and a remote worker for a job the home does not have is refused in words;
 * an authenticated server's refusal words reach the log without control bytes.
 * Skipped without UCX (the plugin is not built then).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#ifdef GM_HAVE_UCX
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "../core/remote/ctl.h" /* the plugin's, not installed */

/* ---- the guard ---------------------------------------------------------------- */

/* A listening socket on addr (port any); its port into *port. -1: no such family. */
static int listener(int family, const char *addr, uint16_t *port, int v6only)
{
	struct sockaddr_storage ss = {0};
	socklen_t sl = family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
	int s = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -1;
	if (family == AF_INET6)
		setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof(v6only));
	ss.ss_family = (sa_family_t)family;
	void *a = family == AF_INET ? (void *)&((struct sockaddr_in *)&ss)->sin_addr
				    : (void *)&((struct sockaddr_in6 *)&ss)->sin6_addr;
	if (inet_pton(family, addr, a) != 1 || bind(s, (struct sockaddr *)&ss, sl) ||
	    listen(s, 16) || getsockname(s, (struct sockaddr *)&ss, &sl)) {
		close(s);
		return -1;
	}
	*port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
	return s;
}

/* Whether a connection from this host to addr:port completes within ms. */
static bool connects(int family, const char *addr, uint16_t port, int ms)
{
	struct sockaddr_storage ss = {0};
	socklen_t sl = family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
	int e = 0;
	socklen_t el = sizeof(e);
	ss.ss_family = (sa_family_t)family;
	if (family == AF_INET) {
		((struct sockaddr_in *)&ss)->sin_port = htons(port);
		inet_pton(AF_INET, addr, &((struct sockaddr_in *)&ss)->sin_addr);
	} else {
		((struct sockaddr_in6 *)&ss)->sin6_port = htons(port);
		inet_pton(AF_INET6, addr, &((struct sockaddr_in6 *)&ss)->sin6_addr);
	}
	int s = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	assert_true(s >= 0);
	if (connect(s, (struct sockaddr *)&ss, sl) && errno != EINPROGRESS) {
		close(s);
		return false;
	}
	struct pollfd p = {.fd = s, .events = POLLOUT};
	bool ok = poll(&p, 1, ms) == 1 && !getsockopt(s, SOL_SOCKET, SO_ERROR, &e, &el) && !e;
	close(s);
	return ok;
}

/* A listener made now, guarded to admit only ips: 1 socket filtered. */
static int guarded(int family, const char *addr, uint16_t *port, int v6only,
		   const char (*ips)[INET6_ADDRSTRLEN], int nips)
{
	unsigned long before[256];
	int nb = gm_remote_ctl_listeners(before, 256);
	assert_true(nb >= 0);
	int s = listener(family, addr, port, v6only);
	if (s < 0)
		return -1;
	assert_int_equal(gm_remote_ctl_guard(before, nb, ips, nips), 1);
	return s;
}

static void test_guard_admits_only_the_named_ipv4_addresses(void **state)
{
	(void)state;
	static const char other[][INET6_ADDRSTRLEN] = {"127.0.0.2", "::1"};
	static const char self[][INET6_ADDRSTRLEN] = {"127.0.0.3", "127.0.0.1"};
	uint16_t po, pb, pa;
	int old = listener(AF_INET, "127.0.0.1", &po, 0);
	int blocked = guarded(AF_INET, "127.0.0.1", &pb, 0, other, 2);
	int admitted = guarded(AF_INET, "127.0.0.1", &pa, 0, self, 2);
	assert_true(old >= 0 && blocked >= 0 && admitted >= 0);
	assert_false(connects(AF_INET, "127.0.0.1", pb, 300));
	assert_true(connects(AF_INET, "127.0.0.1", pa, 2000));
	assert_true(connects(AF_INET, "127.0.0.1", po, 2000)); /* made before: not filtered */
	close(old);
	close(blocked);
	close(admitted);
}

/* The addresses change (discovery): the same sockets get the new set, and only
 * the ones named; a socket not named keeps its filter, one never filtered none. */
static void test_guard_again_with_a_new_set_of_addresses(void **state)
{
	(void)state;
	static const char other[][INET6_ADDRSTRLEN] = {"127.0.0.2"};
	static const char self[][INET6_ADDRSTRLEN] = {"127.0.0.1"};
	uint16_t pa, pb, po;
	int old = listener(AF_INET, "127.0.0.1", &po, 0);
	int a = guarded(AF_INET, "127.0.0.1", &pa, 0, other, 1);
	int b = guarded(AF_INET, "127.0.0.1", &pb, 0, other, 1);
	assert_true(old >= 0 && a >= 0 && b >= 0);
	assert_false(connects(AF_INET, "127.0.0.1", pa, 300));
	struct stat st;
	assert_int_equal(fstat(a, &st), 0);
	unsigned long ino[2] = {(unsigned long)st.st_ino, 12345678ul}; /* one gone */
	assert_int_equal(gm_remote_ctl_reguard(ino, 2, self, 1), 1);
	assert_true(connects(AF_INET, "127.0.0.1", pa, 2000));
	assert_false(connects(AF_INET, "127.0.0.1", pb, 300)); /* not named: as it was */
	assert_true(connects(AF_INET, "127.0.0.1", po, 2000));
	assert_int_equal(gm_remote_ctl_reguard(ino, 1, other, 1), 1); /* and back */
	assert_false(connects(AF_INET, "127.0.0.1", pa, 300));
	assert_int_equal(gm_remote_ctl_reguard(ino, 1, other, 0), 1); /* none: all dropped */
	assert_false(connects(AF_INET, "127.0.0.1", pa, 300));
	close(old);
	close(a);
	close(b);
}

static void test_guard_admits_only_the_named_ipv6_addresses(void **state)
{
	(void)state;
	static const char other[][INET6_ADDRSTRLEN] = {"::2", "127.0.0.1"};
	static const char self[][INET6_ADDRSTRLEN] = {"::1"};
	uint16_t pb, pa;
	int blocked = guarded(AF_INET6, "::1", &pb, 1, other, 2);
	if (blocked < 0)
		skip(); /* no IPv6 on this machine */
	int admitted = guarded(AF_INET6, "::1", &pa, 1, self, 1);
	assert_true(admitted >= 0);
	assert_false(connects(AF_INET6, "::1", pb, 300));
	assert_true(connects(AF_INET6, "::1", pa, 2000));
	close(blocked);
	close(admitted);
}

static void test_guard_takes_a_v4_mapped_address_for_ipv4(void **state)
{
	(void)state;
	static const char other[][INET6_ADDRSTRLEN] = {"::ffff:127.0.0.2"};
	static const char self[][INET6_ADDRSTRLEN] = {"::ffff:127.0.0.1"};
	uint16_t pb, pa;
	int blocked = guarded(AF_INET6, "::", &pb, 0, other, 1); /* dual-stack */
	if (blocked < 0)
		skip();
	int admitted = guarded(AF_INET6, "::", &pa, 0, self, 1);
	assert_true(admitted >= 0);
	assert_false(connects(AF_INET, "127.0.0.1", pb, 300));
	assert_true(connects(AF_INET, "127.0.0.1", pa, 2000));
	close(blocked);
	close(admitted);
}

/* NET_ALLOWED addresses, the one that matters last: every jump stays in range. */
static void test_guard_takes_the_longest_list(void **state)
{
	(void)state;
	static char v4[NET_ALLOWED][INET6_ADDRSTRLEN], v6[NET_ALLOWED][INET6_ADDRSTRLEN];
	for (int i = 0; i < NET_ALLOWED; i++) {
		snprintf(v4[i], sizeof(v4[i]), "10.9.8.%d", i);
		snprintf(v6[i], sizeof(v6[i]), "fd00::%x", i + 16);
	}
	snprintf(v4[NET_ALLOWED - 1], sizeof(v4[0]), "127.0.0.1");
	uint16_t p4, p6;
	int s4 =
	    guarded(AF_INET, "127.0.0.1", &p4, 0, (const char(*)[INET6_ADDRSTRLEN])v4, NET_ALLOWED);
	assert_true(s4 >= 0);
	assert_true(connects(AF_INET, "127.0.0.1", p4, 2000));
	snprintf(v6[NET_ALLOWED - 1], sizeof(v6[0]), "::1");
	int s6 = guarded(AF_INET6, "::1", &p6, 1, (const char(*)[INET6_ADDRSTRLEN])v6, NET_ALLOWED);
	if (s6 >= 0) {
		assert_true(connects(AF_INET6, "::1", p6, 2000));
		close(s6);
	}
	close(s4);
}

/* ---- the handshake ------------------------------------------------------------ */

/* Agent "srv" listens; agents "cli" (the same secret) and "bad" (another) dial
 * it; "wk" is a remote worker process (its key set per test). UCX over TCP on
 * loopback; the server admits the agents whose address and port are in
 * admitted[] (its --peers). */
static struct gm_remote_net srv, cli, bad, wk;
static int received, dummy_job;
static char logged[4096];
static uint32_t admitted[4];

static void on_msg(void *owner, struct conn *c, int id, const void *hdr, const void *data,
		   size_t len, bool rndv)
{
	(void)owner, (void)hdr, (void)data, (void)len, (void)rndv;
	received += id == AM_CLAIM && c->role == ROLE_WORKER && c->token == 42;
}

static struct hjob *job_of(void *owner, uint64_t token)
{
	(void)owner;
	return token == 42 ? (struct hjob *)&dummy_job : NULL;
}

static bool admit(void *owner, const char *ip, uint32_t port)
{
	(void)owner;
	for (int i = 0; i < 4; i++)
		if (admitted[i] && admitted[i] == port && !strcmp(ip, "127.0.0.1"))
			return true;
	return false;
}

static void log_line(void *arg, const char *line)
{
	(void)arg;
	size_t n = strlen(logged);
	snprintf(logged + n, sizeof(logged) - n, "%s\n", line);
}

static int nets_setup(void **state)
{
	char err[256];
	(void)state;
	setenv("UCX_TLS", "tcp", 1);
	setenv("UCX_NET_DEVICES", "lo", 1);
	struct gm_remote_net *nets[4] = {&srv, &cli, &bad, &wk};
	for (int i = 0; i < 4; i++) {
		struct gm_remote_net *n = nets[i];
		memset(n, 0, sizeof(*n));
		memset(n->key.key, n == &bad ? 0x44 : 0x33, 32);
		n->key.len = 32;
		n->efd = n->epfd = -1;
		n->on_msg = on_msg;
		n->job_of = job_of;
		n->admit = admit;
		n->log = log_line;
		snprintf(n->allowed[0], sizeof(n->allowed[0]), "127.0.0.1");
		n->nallowed = 1;
		if (gm_remote_net_init(n, false, err, sizeof(err))) {
			print_message("no UCX here: %s\n", err);
			return -1;
		}
	}
	return 0;
}

static int nets_teardown(void **state)
{
	(void)state;
	gm_remote_net_fini(&wk);
	gm_remote_net_fini(&bad);
	gm_remote_net_fini(&cli);
	gm_remote_net_fini(&srv);
	return 0;
}

/* The server's control port, and a connection accepted on it (from 127.0.0.1). */
static int ctl_port(uint16_t *port)
{
	char err[256];
	int l;
	assert_int_equal(gm_remote_ctl_listen("127.0.0.1:0", &l, port, err, sizeof(err)), 0);
	return l;
}

static struct ctl *accepted(int l)
{
	int s = -1;
	for (int k = 0; k < 500 && s < 0; k++) {
		s = accept4(l, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (s < 0)
			poll(NULL, 0, 2);
	}
	assert_true(s >= 0);
	struct ctl *x = gm_remote_ctl_accepted(s, "127.0.0.1");
	assert_non_null(x);
	return x;
}

/* Both ends stepped until both ended (a bounded number of rounds). */
static void run(struct gm_remote_net *sn, struct ctl *sx, struct gm_remote_net *cn, struct ctl *cx)
{
	for (int k = 0; k < 3000 && (!sx->status || !cx->status); k++) {
		if (!sx->status)
			gm_remote_ctl_step(sn, sx);
		if (!cx->status)
			gm_remote_ctl_step(cn, cx);
		poll(NULL, 0, 1);
	}
}

/* n dials srv's port p as an agent with control port me. */
static struct ctl *dial_agent(uint16_t p, uint32_t me)
{
	char addr[64];
	struct ctl *x;
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", p);
	assert_int_equal(gm_remote_ctl_dial(addr, ROLE_AGENT, 0, NULL, &x), 0);
	x->port = me;
	return x;
}

/* An agent handshake cli -> srv (cli's control port 7001, admitted): both
 * connections made, the same session on both. */
static void agents(struct conn **sc, struct conn **cc)
{
	uint16_t p;
	int l = ctl_port(&p);
	admitted[0] = 7001;
	struct ctl *cx = dial_agent(p, 7001);
	struct ctl *sx = accepted(l);
	run(&srv, sx, &cli, cx);
	if (sx->status != 1 || cx->status != 1)
		fail_msg("server: '%s', client: '%s'", sx->why, cx->why);
	*sc = sx->c;
	*cc = cx->c;
	gm_remote_ctl_free(sx);
	gm_remote_ctl_free(cx);
	close(l);
}

/* ---- a client of our own making: what a stranger or an old agent sends ------------ */

static int tcp_to(uint16_t p)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(p)};
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_int_equal(connect(s, (struct sockaddr *)&a, sizeof(a)), 0);
	return s;
}

/* The server's side of a connection from a plain socket to srv's port p. */
static struct ctl *plain_to(uint16_t p, int l, int *fd)
{
	*fd = tcp_to(p);
	return accepted(l);
}

static void step_until_done(struct ctl *sx, int ms)
{
	for (int k = 0; k < ms && !sx->status; k++) {
		gm_remote_ctl_step(&srv, sx);
		poll(NULL, 0, 1);
	}
}

static void test_older_version_and_strangers_refused_in_words(void **state)
{
	(void)state;
	uint16_t p;
	int l = ctl_port(&p), fd;
	uint32_t old_hello[2] = {1, 56}; /* an agent before TLS: its HELLO frame */
	struct ctl *sx = plain_to(p, l, &fd);
	assert_int_equal(send(fd, old_hello, sizeof(old_hello), 0), (ssize_t)sizeof(old_hello));
	step_until_done(sx, 1000);
	assert_int_equal(sx->status, -EPROTO);
	assert_non_null(strstr(sx->why, "another goldminer version"));
	gm_remote_ctl_free(sx);
	close(fd);
	sx = plain_to(p, l, &fd);
	assert_int_equal(send(fd, "GET / HTTP/1.0\r\n\r\n", 18, 0), 18);
	step_until_done(sx, 1000);
	assert_int_equal(sx->status, -EPROTO);
	assert_non_null(strstr(sx->why, "not TLS"));
	gm_remote_ctl_free(sx);
	close(fd);
	/* a TLS record's first byte, then garbage */
	sx = plain_to(p, l, &fd);
	unsigned char junk[64];
	memset(junk, 0xee, sizeof(junk));
	junk[0] = 0x16;
	assert_int_equal(send(fd, junk, sizeof(junk), 0), (ssize_t)sizeof(junk));
	step_until_done(sx, 1000);
	assert_true(sx->status < 0);
	assert_null(sx->c);
	gm_remote_ctl_free(sx);
	close(fd);
	close(l);
}

static void test_silence_and_hangups_end_the_handshake(void **state)
{
	(void)state;
	uint16_t p;
	int l = ctl_port(&p), fd;
	struct ctl *sx = plain_to(p, l, &fd);
	assert_int_equal(send(fd, "\x16", 1, 0), 1); /* a first byte, then silence */
	gm_remote_ctl_step(&srv, sx);
	assert_int_equal(sx->status, 0);
	sx->since_ms -= AUTH_MS; /* as if AUTH_MS had passed */
	gm_remote_ctl_step(&srv, sx);
	assert_int_equal(sx->status, -ETIMEDOUT);
	assert_non_null(strstr(sx->why, "did not authenticate within"));
	gm_remote_ctl_free(sx);
	close(fd);
	sx = plain_to(p, l, &fd);
	close(fd);
	step_until_done(sx, 1000);
	assert_int_equal(sx->status, -ECONNRESET);
	gm_remote_ctl_free(sx);
	close(l);
}

/* A TLS client made by hand with identity id (NULL: its true agent identity
 * with control port 7001) and the pair key from key. */
struct raw {
	int fd;
	SSL *ssl;
	struct tls_side t;
};

static void raw_client(struct raw *r, uint16_t p, const char *id, const struct gm_auth_key *key)
{
	struct sockaddr_storage me;
	socklen_t ml = sizeof(me);
	char server_id[TLS_ID_MAX];
	memset(r, 0, sizeof(*r));
	r->fd = tcp_to(p);
	assert_int_equal(fcntl(r->fd, F_SETFL, O_NONBLOCK), 0);
	assert_int_equal(getsockname(r->fd, (struct sockaddr *)&me, &ml), 0);
	if (id)
		snprintf(r->t.id, sizeof(r->t.id), "%s", id);
	else
		assert_true(gm_remote_tls_agent_id(r->t.id, sizeof(r->t.id), (struct sockaddr *)&me,
						   7001) > 0);
	snprintf(server_id, sizeof(server_id), "goldminer/%u agent 127.0.0.1:%u", MSG_VERSION, p);
	assert_int_equal(gm_remote_tls_agent_key(key, r->t.id, server_id, &r->t.key), 0);
	r->ssl = gm_remote_tls_new(cli.tls_cli, r->fd, true, &r->t);
	assert_non_null(r->ssl);
}

/* The raw client's handshake against sx: 1 done, -1 refused. */
static int raw_handshake(struct raw *r, struct ctl *sx)
{
	bool ww;
	for (int k = 0; k < 2000; k++) {
		int h = gm_remote_tls_handshake(r->ssl, &ww);
		if (h)
			return h;
		if (!sx->status)
			gm_remote_ctl_step(&srv, sx);
		poll(NULL, 0, 1);
	}
	return 0;
}

static void raw_free(struct raw *r)
{
	SSL_free(r->ssl);
	close(r->fd);
}

/* Identities a peer with the secret could forge, each refused naming the
 * address: another address than the connection's, another version, not ours. */
static void test_forged_identities_refused(void **state)
{
	(void)state;
	static const struct {
		const char *id, *why;
	} cases[] = {
	    {"goldminer/7 agent 10.9.9.9:7001", "names another address"},
	    {"goldminer/6 agent 127.0.0.1:7001", "another goldminer version"},
	    {"goldminer/7 agent 127.0.0.1", "not a goldminer peer"},
	    {"goldminer/7 worker 00112233445566778899aabbccddeeff", "not a goldminer peer"},
	    {"goldminer/7 worker 0011223344556677 0000000000000042", "does not have"},
	    {"someone else", "not a goldminer peer"},
	};
	uint16_t p;
	int l = ctl_port(&p);
	admitted[0] = 7001;
	assert_int_equal(MSG_VERSION, 7); /* (the cases' version words) */
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct raw r;
		raw_client(&r, p, cases[i].id, &cli.key);
		struct ctl *sx = accepted(l);
		assert_int_equal(raw_handshake(&r, sx), -1);
		step_until_done(sx, 1000);
		assert_true(sx->status < 0);
		if (!strstr(sx->why, cases[i].why))
			fail_msg("'%s': %s", cases[i].id, sx->why);
		assert_non_null(strstr(sx->why, "127.0.0.1"));
		assert_null(sx->c);
		gm_remote_ctl_free(sx);
		raw_free(&r);
	}
	close(l);
}

/* Inside TLS, a frame of the wrong type or length is refused before its body
 * is read. */
static void test_wrong_frame_inside_tls_refused_before_its_body(void **state)
{
	(void)state;
	static const uint32_t frames[][2] = {
	    {CTL_WELCOME, sizeof(struct m_welcome) + 8},	    /* not the one it waits for */
	    {CTL_HELLO, sizeof(struct m_hello)},		    /* no address */
	    {CTL_HELLO, sizeof(struct m_hello) + CTL_ADDR_MAX + 1}, /* too long */
	};
	uint16_t p;
	int l = ctl_port(&p);
	admitted[0] = 7001;
	for (size_t i = 0; i < 3; i++) {
		struct raw r;
		raw_client(&r, p, NULL, &cli.key);
		struct ctl *sx = accepted(l);
		assert_int_equal(raw_handshake(&r, sx), 1);
		assert_int_equal(SSL_write(r.ssl, frames[i], sizeof(frames[i])), 8);
		step_until_done(sx, 1000);
		assert_int_equal(sx->status, -EPROTO);
		assert_non_null(strstr(sx->why, "not a goldminer"));
		assert_null(sx->c);
		gm_remote_ctl_free(sx);
		raw_free(&r);
	}
	close(l);
}

/* A HELLO inside TLS of another version, or whose port or role contradicts
 * the identity: refused with a WELCOME in words. */
static void test_hello_contradicting_its_identity_refused_in_words(void **state)
{
	(void)state;
	struct m_hello hellos[3] = {
	    {.magic = MSG_MAGIC, .version = MSG_VERSION + 1, .role = ROLE_AGENT, .port = 7001},
	    {.magic = MSG_MAGIC, .version = MSG_VERSION, .role = ROLE_AGENT, .port = 7002},
	    {.magic = MSG_MAGIC, .version = MSG_VERSION, .role = ROLE_WORKER, .port = 7001},
	};
	const char *words[3] = {"another goldminer version", "another port", "contradicts"};
	uint16_t p;
	int l = ctl_port(&p);
	admitted[0] = 7001;
	for (int i = 0; i < 3; i++) {
		struct raw r;
		unsigned char frame[8 + sizeof(struct m_hello) + 16] = {0};
		uint32_t hdr[2] = {CTL_HELLO, sizeof(struct m_hello) + 16};
		memcpy(frame, hdr, 8);
		memcpy(frame + 8, &hellos[i], sizeof(hellos[i]));
		raw_client(&r, p, NULL, &cli.key);
		struct ctl *sx = accepted(l);
		assert_int_equal(raw_handshake(&r, sx), 1);
		assert_int_equal(SSL_write(r.ssl, frame, sizeof(frame)), (int)sizeof(frame));
		step_until_done(sx, 1000);
		assert_int_equal(sx->status, -EPROTO);
		assert_non_null(strstr(sx->why, words[i]));
		struct m_welcome wm;
		uint32_t got[2];
		int k = -1;
		for (int t = 0; t < 1000 && k <= 0; t++) {
			k = SSL_read(r.ssl, got, sizeof(got));
			poll(NULL, 0, 1);
		}
		assert_int_equal(k, 8);
		assert_int_equal(got[0], CTL_WELCOME);
		assert_int_equal(SSL_read(r.ssl, &wm, sizeof(wm)), (int)sizeof(wm));
		assert_int_equal(wm.status, -EPROTO);
		assert_null(sx->c);
		gm_remote_ctl_free(sx);
		raw_free(&r);
	}
	close(l);
}

/* A server of our own making, with the secret, that refuses in words with
 * control bytes: the client prints them as '?'. */
static int raw_server_psk(struct tls_side *t, const char *id, struct gm_auth_key *key)
{
	return gm_remote_tls_agent_key(&cli.key, id, t->why, key); /* why: its own id */
}

static void test_client_prints_a_refusal_without_control_bytes(void **state)
{
	(void)state;
	uint16_t port;
	struct tls_side side = {.psk = raw_server_psk};
	struct m_welcome wm = {.status = -EPERM};
	unsigned char body[8 + sizeof(struct m_hello) + CTL_ADDR_MAX];
	int l = listener(AF_INET, "127.0.0.1", &port, 0);
	assert_true(l >= 0);
	snprintf(side.why, sizeof(side.why), "goldminer/%u agent 127.0.0.1:%u", MSG_VERSION, port);
	struct ctl *x = dial_agent(port, 7001);
	int s = -1;
	for (int k = 0; k < 500 && s < 0; k++) {
		gm_remote_ctl_step(&cli, x);
		s = accept4(l, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		poll(NULL, 0, 2);
	}
	assert_true(s >= 0);
	SSL *ssl = gm_remote_tls_new(srv.tls_srv, s, false, &side);
	bool ww;
	int h = 0, got = 0;
	for (int k = 0; k < 2000 && h != 1; k++) {
		h = gm_remote_tls_handshake(ssl, &ww);
		assert_true(h >= 0);
		gm_remote_ctl_step(&cli, x);
		poll(NULL, 0, 1);
	}
	for (int k = 0; k < 2000 && got < 8; k++) {
		int r = SSL_read(ssl, body, sizeof(body));
		got = r > 0 ? r : got;
		gm_remote_ctl_step(&cli, x);
		poll(NULL, 0, 1);
	}
	assert_int_equal(((uint32_t *)body)[0], CTL_HELLO);
	snprintf(wm.msg, sizeof(wm.msg), "no\ngoldminer node: forged\033[2J");
	uint32_t hdr[2] = {CTL_WELCOME, sizeof(wm)};
	assert_int_equal(SSL_write(ssl, hdr, sizeof(hdr)), 8);
	assert_int_equal(SSL_write(ssl, &wm, sizeof(wm)), (int)sizeof(wm));
	for (int k = 0; k < 2000 && !x->status; k++) {
		poll(NULL, 0, 1);
		gm_remote_ctl_step(&cli, x);
	}
	assert_int_equal(x->status, -EPERM);
	assert_non_null(strstr(x->why, "no?goldminer node: forged?[2J"));
	assert_null(x->c);
	gm_remote_ctl_free(x);
	SSL_free(ssl);
	close(s);
	close(l);
}

static void test_agents_authenticate_and_share_a_session(void **state)
{
	(void)state;
	struct conn *sc, *cc;
	agents(&sc, &cc);
	assert_int_equal(sc->role, ROLE_AGENT);
	assert_int_equal(sc->port, 7001); /* from its identity */
	assert_true(cc->outgoing && !sc->outgoing);
	assert_memory_equal(sc->sid, cc->sid, SESSION_ID);
	assert_memory_equal(sc->xs, cc->xs, SESSION_KEY);
	uint8_t zero[SESSION_KEY] = {0};
	assert_memory_not_equal(sc->xs, zero, SESSION_KEY);
	/* a second session: another id and secret */
	struct conn *sc2, *cc2;
	agents(&sc2, &cc2);
	assert_memory_not_equal(sc->sid, sc2->sid, SESSION_ID);
	assert_memory_not_equal(sc->xs, sc2->xs, SESSION_KEY);
	gm_remote_conn_free(&cli, cc2);
	gm_remote_conn_free(&srv, sc2);
	gm_remote_conn_free(&cli, cc);
	gm_remote_conn_free(&srv, sc);
}

/* A remote worker with the key its lender derives (lender.c) for token. */
static struct ctl *dial_worker(uint16_t p, const struct conn *lender_side, uint64_t token,
			       const uint8_t *sid)
{
	char addr[64], id[TLS_ID_MAX];
	struct ctl *x;
	assert_true(gm_remote_tls_worker_id(id, sizeof(id), lender_side->sid, token) > 0);
	assert_int_equal(gm_remote_tls_worker_key(lender_side->xs, id, &wk.key), 0);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", p);
	assert_int_equal(gm_remote_ctl_dial(addr, ROLE_WORKER, token, wk.w, &x), 0);
	x->port = 7001;
	memcpy(x->sid, sid ? sid : lender_side->sid, SESSION_ID);
	return x;
}

static void test_worker_of_a_live_session_connects_and_its_message_arrives(void **state)
{
	(void)state;
	struct conn *sc, *cc;
	struct m_claim m = {0};
	uint16_t p;
	agents(&sc, &cc);
	int l = ctl_port(&p);
	struct ctl *cx = dial_worker(p, cc, 42, NULL);
	struct ctl *sx = accepted(l);
	run(&srv, sx, &wk, cx);
	assert_int_equal(sx->status, 1);
	assert_int_equal(cx->status, 1);
	struct conn *ws = sx->c, *wc = cx->c;
	assert_int_equal(ws->role, ROLE_WORKER);
	assert_true(ws->token == 42 && ws->job == (struct hjob *)&dummy_job);
	gm_remote_ctl_free(sx);
	gm_remote_ctl_free(cx);
	received = 0;
	assert_int_equal(gm_remote_conn_send(wc, AM_CLAIM, &m, sizeof(m), NULL, 0), 0);
	for (int k = 0; k < 4000 && !received; k++) {
		gm_remote_net_progress(&wk);
		gm_remote_net_progress(&srv);
		poll(NULL, 0, 1);
	}
	assert_int_equal(received, 1);
	gm_remote_conn_free(&wk, wc);
	gm_remote_conn_free(&srv, ws);
	/* the lender's session gone (it reconnected): a worker of it is refused */
	uint8_t sid[SESSION_ID];
	memcpy(sid, cc->sid, SESSION_ID);
	gm_remote_conn_free(&srv, sc);
	cx = dial_worker(p, cc, 42, sid);
	sx = accepted(l);
	run(&srv, sx, &wk, cx);
	assert_true(sx->status < 0 && cx->status < 0);
	assert_non_null(strstr(sx->why, "a session this agent does not have"));
	assert_null(sx->c);
	assert_null(cx->c);
	gm_remote_ctl_free(sx);
	gm_remote_ctl_free(cx);
	gm_remote_conn_free(&cli, cc);
	close(l);
}

static void test_worker_for_an_unknown_job_refused_in_words(void **state)
{
	(void)state;
	struct conn *sc, *cc;
	uint16_t p;
	agents(&sc, &cc);
	int l = ctl_port(&p);
	struct ctl *cx = dial_worker(p, cc, 7, NULL);
	struct ctl *sx = accepted(l);
	run(&srv, sx, &wk, cx);
	assert_int_equal(sx->status, -ENOENT);
	assert_int_equal(cx->status, -ENOENT);
	assert_non_null(strstr(cx->why, "no such job here"));
	assert_null(cx->c);
	gm_remote_ctl_free(sx);
	gm_remote_ctl_free(cx);
	gm_remote_conn_free(&cli, cc);
	gm_remote_conn_free(&srv, sc);
	close(l);
}

static void test_wrong_secret_refused_on_both_sides(void **state)
{
	(void)state;
	uint16_t p;
	int l = ctl_port(&p);
	admitted[0] = 7001;
	struct ctl *cx = dial_agent(p, 7001);
	struct ctl *sx = accepted(l);
	run(&srv, sx, &bad, cx);
	assert_true(sx->status < 0);
	assert_true(cx->status < 0);
	assert_non_null(strstr(sx->why, "does not know the secret"));
	if (!strstr(cx->why, "secrets differ"))
		fail_msg("client: %s", cx->why);
	assert_null(sx->c);
	assert_null(cx->c);
	gm_remote_ctl_free(sx);
	gm_remote_ctl_free(cx);
	close(l);
}

static void test_agent_not_in_peers_refused(void **state)
{
	(void)state;
	uint16_t p;
	int l = ctl_port(&p);
	admitted[0] = 7001;
	struct ctl *cx = dial_agent(p, 7002); /* its port is not one of --peers */
	struct ctl *sx = accepted(l);
	run(&srv, sx, &cli, cx);
	assert_int_equal(sx->status, -EACCES);
	assert_non_null(strstr(sx->why, "not one of --peers"));
	assert_non_null(strstr(sx->why, "127.0.0.1"));
	assert_true(cx->status < 0);
	assert_non_null(strstr(cx->why, "does not take this host as a peer"));
	gm_remote_ctl_free(sx);
	gm_remote_ctl_free(cx);
	close(l);
}

/* An agent that names itself with the server's own identity (a peer that
 * holds the secret, or the agent's own dial led back to it) is refused. */
static void test_own_identity_refused(void **state)
{
	(void)state;
	uint16_t p;
	int l = ctl_port(&p);
	admitted[0] = p;
	struct ctl *cx = dial_agent(p, p); /* "agent 127.0.0.1:<the server's port>" */
	struct ctl *sx = accepted(l);
	run(&srv, sx, &cli, cx);
	assert_int_equal(sx->status, -EACCES);
	assert_non_null(strstr(sx->why, "this agent's own"));
	assert_true(cx->status < 0);
	assert_null(cx->c);
	gm_remote_ctl_free(sx);
	gm_remote_ctl_free(cx);
	close(l);
}

/* ---- a man in the middle: relays and replays -------------------------------------- */

/* Move what is readable from a to b (recorded into rec when given). */
static void pump(int a, int b, unsigned char *rec, size_t *reclen, size_t cap)
{
	unsigned char buf[16384];
	ssize_t k = recv(a, buf, sizeof(buf), MSG_DONTWAIT);
	if (k <= 0)
		return;
	if (rec && *reclen + (size_t)k <= cap) {
		memcpy(rec + *reclen, buf, (size_t)k);
		*reclen += (size_t)k;
	}
	assert_int_equal(send(b, buf, (size_t)k, MSG_NOSIGNAL), k);
}

/*
 * Reflection: the agent srv (control port P) dials a peer's address where an
 * attacker listens (a peer that is down, a recycled address); the attacker
 * opens its own connection to srv's control port from the peer's address and
 * relays srv's own handshake back to it, both directions. srv's server side
 * refuses it (its own identity; and the key of the pair A->A is not the one
 * A->B its client used), srv's client side never gets a connection, no
 * connection exists afterwards.
 */
static void test_own_handshake_relayed_back_refused(void **state)
{
	(void)state;
	uint16_t p, ap;
	int l = ctl_port(&p);
	int al = listener(AF_INET, "127.0.0.1", &ap, 0); /* the attacker, at the peer's address */
	admitted[0] = ap;
	admitted[1] = p;
	struct ctl *cx = dial_agent(ap, p); /* srv's client: "agent 127.0.0.1:P" */
	int from_victim = -1;
	for (int k = 0; k < 500 && from_victim < 0; k++) {
		gm_remote_ctl_step(&srv, cx);
		from_victim = accept4(al, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		poll(NULL, 0, 2);
	}
	assert_true(from_victim >= 0);
	int to_victim = tcp_to(p);
	struct ctl *sx = accepted(l);
	for (int k = 0; k < 2000 && (!sx->status || !cx->status); k++) {
		if (!cx->status)
			gm_remote_ctl_step(&srv, cx);
		if (!sx->status)
			gm_remote_ctl_step(&srv, sx);
		pump(from_victim, to_victim, NULL, NULL, 0);
		pump(to_victim, from_victim, NULL, NULL, 0);
		poll(NULL, 0, 1);
	}
	assert_true(sx->status < 0);
	assert_true(cx->status < 0);
	assert_null(sx->c);
	assert_null(cx->c);
	assert_non_null(strstr(sx->why, "127.0.0.1"));
	assert_non_null(strstr(sx->why, "this agent's own"));
	for (int i = 0; i < MAX_CONNS; i++)
		assert_null(srv.conns[i]);
	gm_remote_ctl_free(sx);
	gm_remote_ctl_free(cx);
	close(from_victim);
	close(to_victim);
	close(al);
	close(l);
}

/* Replay: the bytes a remote worker's client sent in a handshake that
 * succeeded through a relay on the path (a worker's key does not name the
 * server's address, so the relay is transparent to it), sent again on a new
 * connection: refused, no connection made. */
static void test_recorded_handshake_replayed_refused(void **state)
{
	(void)state;
	static unsigned char rec[65536];
	size_t reclen = 0;
	uint16_t p, ap;
	struct conn *sc, *cc;
	agents(&sc, &cc);
	int l = ctl_port(&p);
	int al = listener(AF_INET, "127.0.0.1", &ap, 0);
	struct ctl *cx = dial_worker(ap, cc, 42, NULL);
	int a = -1;
	for (int k = 0; k < 500 && a < 0; k++) {
		gm_remote_ctl_step(&wk, cx);
		a = accept4(al, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		poll(NULL, 0, 2);
	}
	assert_true(a >= 0);
	int b = tcp_to(p);
	struct ctl *sx = accepted(l);
	for (int k = 0; k < 3000 && (!sx->status || !cx->status); k++) {
		if (!cx->status)
			gm_remote_ctl_step(&wk, cx);
		if (!sx->status)
			gm_remote_ctl_step(&srv, sx);
		pump(a, b, rec, &reclen, sizeof(rec));
		pump(b, a, NULL, NULL, 0);
		poll(NULL, 0, 1);
	}
	assert_int_equal(sx->status, 1); /* the recorded handshake succeeded */
	assert_int_equal(cx->status, 1);
	gm_remote_conn_free(&srv, sx->c);
	gm_remote_conn_free(&wk, cx->c);
	gm_remote_ctl_free(sx);
	gm_remote_ctl_free(cx);
	close(a);
	close(b);
	close(al);
	assert_true(reclen > 0);
	b = tcp_to(p);
	sx = accepted(l);
	assert_int_equal(send(b, rec, reclen, MSG_NOSIGNAL), (ssize_t)reclen);
	for (int k = 0; k < 2000 && !sx->status; k++) {
		unsigned char sink[16384];
		gm_remote_ctl_step(&srv, sx);
		(void)!recv(b, sink, sizeof(sink), MSG_DONTWAIT);
		poll(NULL, 0, 1);
	}
	assert_true(sx->status < 0);
	assert_null(sx->c);
	for (int i = 0; i < MAX_CONNS; i++)
		assert_true(!srv.conns[i] || srv.conns[i] == sc);
	gm_remote_ctl_free(sx);
	close(b);
	gm_remote_conn_free(&cli, cc);
	gm_remote_conn_free(&srv, sc);
	close(l);
}

/* ---- certificates instead of the secret (--tls-cert, --tls-key, --tls-ca) -------- */

/* An operator's PKI made for the tests in pki_dir: CA "ca" and another CA
 * "ca2"; "srv" and "cli" (127.0.0.1, by ca), "far" (10.9.9.9 and the name
 * agent-b, by ca), "stranger" (127.0.0.1, by ca2); "both.crt" holds both CAs. */
static char pki_dir[64];
static long serial = 1;
static const char *peer_name_is; /* what srv's --peers calls 127.0.0.1 */

static const char *peer_name(void *owner, const char *ip, uint32_t port)
{
	(void)owner, (void)ip, (void)port;
	return peer_name_is;
}

static void add_ext(X509 *x, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX v;
	X509V3_set_ctx(&v, issuer ? issuer : x, x, NULL, NULL, 0);
	X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, &v, nid, value);
	assert_non_null(e);
	assert_int_equal(X509_add_ext(x, e, -1), 1);
	X509_EXTENSION_free(e);
}

/* A certificate for key named cn with subjectAltName san (NULL: a CA's),
 * signed by ca (NULL: by itself). */
static X509 *issue(EVP_PKEY *key, const char *cn, const char *san, X509 *ca, EVP_PKEY *ca_key)
{
	X509 *x = X509_new();
	assert_non_null(x);
	X509_set_version(x, 2);
	ASN1_INTEGER_set(X509_get_serialNumber(x), serial++);
	X509_gmtime_adj(X509_getm_notBefore(x), -60);
	X509_gmtime_adj(X509_getm_notAfter(x), 3600);
	X509_set_pubkey(x, key);
	X509_NAME *nm = X509_get_subject_name(x);
	X509_NAME_add_entry_by_txt(nm, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
	X509_set_issuer_name(x, ca ? X509_get_subject_name(ca) : nm);
	add_ext(x, ca, NID_basic_constraints, san ? "critical,CA:FALSE" : "critical,CA:TRUE");
	if (san)
		add_ext(x, ca, NID_subject_alt_name, san);
	assert_true(X509_sign(x, ca ? ca_key : key, EVP_sha256()) > 0);
	return x;
}

static void write_pem(const char *name, X509 *x, EVP_PKEY *key)
{
	char path[128];
	snprintf(path, sizeof(path), "%s/%s.crt", pki_dir, name);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(PEM_write_X509(f, x), 1);
	fclose(f);
	if (!key)
		return;
	snprintf(path, sizeof(path), "%s/%s.key", pki_dir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL), 1);
	fclose(f);
	chmod(path, 0600);
}

static void make_pki(void)
{
	struct {
		const char *name, *san;
		int by;
	} leaf[] = {{"srv", "IP:127.0.0.1", 0},
		    {"cli", "IP:127.0.0.1", 0},
		    {"far", "IP:10.9.9.9,DNS:agent-b", 0},
		    {"stranger", "IP:127.0.0.1", 1}};
	EVP_PKEY *cak[2] = {EVP_EC_gen("P-256"), EVP_EC_gen("P-256")};
	X509 *ca[2] = {issue(cak[0], "goldminer test CA", NULL, NULL, NULL),
		       issue(cak[1], "another CA", NULL, NULL, NULL)};
	char path[128];
	snprintf(pki_dir, sizeof(pki_dir), "/tmp/gm-pki-XXXXXX");
	assert_non_null(mkdtemp(pki_dir));
	write_pem("ca", ca[0], NULL);
	write_pem("ca2", ca[1], NULL);
	snprintf(path, sizeof(path), "%s/both.crt", pki_dir);
	FILE *f = fopen(path, "w");
	PEM_write_X509(f, ca[0]);
	PEM_write_X509(f, ca[1]);
	fclose(f);
	for (size_t i = 0; i < sizeof(leaf) / sizeof(leaf[0]); i++) {
		EVP_PKEY *k = EVP_EC_gen("P-256");
		X509 *x = issue(k, leaf[i].name, leaf[i].san, ca[leaf[i].by], cak[leaf[i].by]);
		write_pem(leaf[i].name, x, k);
		X509_free(x);
		EVP_PKEY_free(k);
	}
	for (int i = 0; i < 2; i++) {
		X509_free(ca[i]);
		EVP_PKEY_free(cak[i]);
	}
}

/* Load pki's cert NAME (trusting ca file CA) into n's contexts: 0 or -errno. */
static int use_cert(struct gm_remote_net *n, const char *name, const char *ca, char *err,
		    size_t errlen)
{
	char c[128], k[128], a[128];
	snprintf(c, sizeof(c), "%s/%s.crt", pki_dir, name);
	snprintf(k, sizeof(k), "%s/%s.key", pki_dir, name);
	snprintf(a, sizeof(a), "%s/%s.crt", pki_dir, ca);
	n->certs = true;
	return gm_remote_tls_certs(n->tls_cli, n->tls_srv, c, k, a, err, errlen);
}

static struct gm_remote_net odd; /* an agent with a certificate of a test's choosing */

static void odd_agent(const char *name, const char *ca)
{
	char err[256];
	memset(&odd, 0, sizeof(odd));
	odd.efd = odd.epfd = -1;
	odd.on_msg = on_msg;
	odd.job_of = job_of;
	odd.admit = admit;
	odd.log = log_line;
	snprintf(odd.allowed[0], sizeof(odd.allowed[0]), "127.0.0.1");
	odd.nallowed = 1;
	assert_int_equal(gm_remote_net_init(&odd, false, err, sizeof(err)), 0);
	if (use_cert(&odd, name, ca, err, sizeof(err)))
		fail_msg("%s", err);
}

static int certs_setup(void **state)
{
	char err[256];
	if (nets_setup(state))
		return -1;
	make_pki();
	if (use_cert(&srv, "srv", "ca", err, sizeof(err)) ||
	    use_cert(&cli, "cli", "ca", err, sizeof(err))) {
		print_message("%s\n", err);
		return -1;
	}
	srv.peer_name = cli.peer_name = peer_name;
	return 0;
}

static int certs_teardown(void **state)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", pki_dir);
	if (system(cmd))
		print_message("could not remove %s\n", pki_dir);
	return nets_teardown(state);
}

/* cn's agent dials srv (its control port 7001, admitted); both ends run. */
static void cert_handshake(struct gm_remote_net *cn, const char *name, struct ctl **sx,
			   struct ctl **cx, int *l)
{
	uint16_t p;
	*l = ctl_port(&p);
	admitted[0] = 7001;
	*cx = dial_agent(p, 7001);
	snprintf((*cx)->name, sizeof((*cx)->name), "%s", name);
	*sx = accepted(*l);
	run(&srv, *sx, cn, *cx);
}

static void test_certs_authenticate_agents_and_workers_keep_their_keys(void **state)
{
	(void)state;
	struct conn *sc, *cc;
	agents(&sc, &cc);
	assert_int_equal(sc->role, ROLE_AGENT);
	assert_int_equal(sc->port, 7001); /* from its HELLO */
	assert_memory_equal(sc->sid, cc->sid, SESSION_ID);
	assert_memory_equal(sc->xs, cc->xs, SESSION_KEY);
	/* a remote worker of that session: its PSK, no certificate of its own */
	uint16_t p;
	int l = ctl_port(&p);
	struct ctl *cx = dial_worker(p, cc, 42, NULL);
	struct ctl *sx = accepted(l);
	run(&srv, sx, &wk, cx);
	if (sx->status != 1 || cx->status != 1)
		fail_msg("worker: server '%s', client '%s'", sx->why, cx->why);
	assert_int_equal(sx->c->role, ROLE_WORKER);
	gm_remote_conn_free(&wk, cx->c);
	gm_remote_conn_free(&srv, sx->c);
	gm_remote_ctl_free(sx);
	gm_remote_ctl_free(cx);
	gm_remote_conn_free(&cli, cc);
	gm_remote_conn_free(&srv, sc);
	close(l);
}

static void test_certificate_of_another_ca_refused(void **state)
{
	(void)state;
	struct ctl *sx, *cx;
	int l;
	odd_agent("stranger", "both"); /* it trusts srv's CA; srv does not trust its */
	cert_handshake(&odd, "", &sx, &cx, &l);
	assert_true(sx->status < 0 && cx->status < 0);
	assert_null(sx->c);
	if (!strstr(sx->why, "127.0.0.1") || !strstr(sx->why, "does not verify against --tls-ca"))
		fail_msg("server: %s", sx->why);
	if (!strstr(cx->why, "refused our certificate"))
		fail_msg("client: %s", cx->why);
	gm_remote_ctl_free(sx);
	gm_remote_ctl_free(cx);
	gm_remote_net_fini(&odd);
	close(l);
}

static void test_certificate_naming_another_host_refused_unless_peers_name_it(void **state)
{
	(void)state;
	struct ctl *sx, *cx;
	int l;
	odd_agent("far", "ca"); /* 10.9.9.9, agent-b: it dials from 127.0.0.1 */
	peer_name_is = NULL;
	cert_handshake(&odd, "", &sx, &cx, &l);
	assert_int_equal(sx->status, -EACCES);
	if (!strstr(sx->why, "names neither 127.0.0.1"))
		fail_msg("server: %s", sx->why);
	assert_true(cx->status < 0);
	assert_non_null(strstr(cx->why, "names neither"));
	gm_remote_ctl_free(sx);
	gm_remote_ctl_free(cx);
	close(l);
	peer_name_is = "agent-b"; /* srv's --peers calls that address agent-b */
	cert_handshake(&odd, "", &sx, &cx, &l);
	if (sx->status != 1)
		fail_msg("server: %s", sx->why);
	gm_remote_conn_free(&srv, sx->c);
	gm_remote_conn_free(&odd, cx->c);
	gm_remote_ctl_free(sx);
	gm_remote_ctl_free(cx);
	close(l);
	peer_name_is = NULL;
	/* the client's side: srv's client dials a server whose certificate names
	 * 10.9.9.9 and agent-b, at 127.0.0.1: refused, unless it dialed agent-b */
	uint16_t p;
	for (int named = 0; named < 2; named++) {
		l = ctl_port(&p);
		admitted[0] = 7001;
		cx = dial_agent(p, 7001);
		snprintf(cx->name, sizeof(cx->name), "%s", named ? "agent-b" : "127.0.0.1");
		sx = accepted(l);
		run(&odd, sx, &cli, cx);
		if (named) {
			assert_int_equal(cx->status, 1);
			gm_remote_conn_free(&cli, cx->c);
			gm_remote_conn_free(&odd, sx->c);
		} else {
			assert_int_equal(cx->status, -EACCES);
			if (!strstr(cx->why, "names neither 127.0.0.1 nor '127.0.0.1'"))
				fail_msg("client: %s", cx->why);
			assert_null(cx->c);
		}
		gm_remote_ctl_free(sx);
		gm_remote_ctl_free(cx);
		close(l);
	}
	gm_remote_net_fini(&odd);
}

static void test_own_certificate_refused(void **state)
{
	(void)state;
	struct ctl *sx, *cx;
	int l;
	odd_agent("srv", "ca"); /* srv's own certificate and key, elsewhere */
	cert_handshake(&odd, "", &sx, &cx, &l);
	assert_int_equal(sx->status, -EACCES);
	assert_non_null(strstr(sx->why, "this agent's own"));
	assert_true(cx->status < 0);
	assert_null(sx->c);
	assert_null(cx->c);
	gm_remote_ctl_free(sx);
	gm_remote_ctl_free(cx);
	gm_remote_net_fini(&odd);
	close(l);
}

static void test_certificate_and_secret_agents_refuse_each_other_in_words(void **state)
{
	(void)state;
	struct ctl *sx, *cx;
	int l;
	cert_handshake(&bad, "", &sx, &cx, &l); /* bad: --secret's key, srv certificates */
	assert_true(sx->status < 0 && cx->status < 0);
	if (!strstr(sx->why, "takes agents by certificate"))
		fail_msg("server: %s", sx->why);
	gm_remote_ctl_free(sx);
	gm_remote_ctl_free(cx);
	close(l);
	/* the other way: a certificate to an agent of the secret */
	uint16_t p;
	l = ctl_port(&p);
	admitted[0] = 7001;
	cx = dial_agent(p, 7001);
	sx = accepted(l);
	run(&bad, sx, &cli, cx);
	assert_true(sx->status < 0 && cx->status < 0);
	if (!strstr(sx->why, "--tls-cert"))
		fail_msg("server: %s", sx->why);
	if (!strstr(cx->why, "--secret"))
		fail_msg("client: %s", cx->why);
	gm_remote_ctl_free(sx);
	gm_remote_ctl_free(cx);
	close(l);
}

/* What an operator gets wrong is said at start, naming the file. */
static void test_certificate_files_checked_at_start(void **state)
{
	(void)state;
	struct {
		const char *cert, *key, *ca, *says;
	} bad_cfg[] = {
	    {"nothere.crt", "srv.key", "ca.crt", "--tls-cert"},
	    {"srv.crt", "cli.key", "ca.crt", "not the key of --tls-cert"},
	    {"srv.crt", "srv.key", "ca2.crt", "does not verify against --tls-ca"},
	    {"srv.crt", "srv.key", "srv.key", "--tls-ca"},
	    {"srv.crt", "loose.key", "ca.crt", "chmod 600"},
	    {"ca.crt", "srv.key", "ca.crt", "not the key of --tls-cert"},
	};
	char cmd[256], c[128], k[128], a[128], err[512];
	snprintf(cmd, sizeof(cmd), "cp %s/srv.key %s/loose.key && chmod 644 %s/loose.key", pki_dir,
		 pki_dir, pki_dir);
	assert_int_equal(system(cmd), 0);
	for (size_t i = 0; i < sizeof(bad_cfg) / sizeof(bad_cfg[0]); i++) {
		SSL_CTX *tc, *ts;
		assert_int_equal(gm_remote_tls_init(&tc, &ts, err, sizeof(err)), 0);
		snprintf(c, sizeof(c), "%s/%s", pki_dir, bad_cfg[i].cert);
		snprintf(k, sizeof(k), "%s/%s", pki_dir, bad_cfg[i].key);
		snprintf(a, sizeof(a), "%s/%s", pki_dir, bad_cfg[i].ca);
		err[0] = '\0';
		assert_true(gm_remote_tls_certs(tc, ts, c, k, a, err, sizeof(err)) < 0);
		if (!strstr(err, bad_cfg[i].says) || !strstr(err, pki_dir))
			fail_msg("case %zu: '%s'", i, err);
		gm_remote_tls_fini(&tc, &ts);
	}
}

int main(void)
{
	const struct CMUnitTest guard[] = {
	    cmocka_unit_test(test_guard_admits_only_the_named_ipv4_addresses),
	    cmocka_unit_test(test_guard_admits_only_the_named_ipv6_addresses),
	    cmocka_unit_test(test_guard_again_with_a_new_set_of_addresses),
	    cmocka_unit_test(test_guard_takes_a_v4_mapped_address_for_ipv4),
	    cmocka_unit_test(test_guard_takes_the_longest_list),
	};
	const struct CMUnitTest whole[] = {
	    cmocka_unit_test(test_older_version_and_strangers_refused_in_words),
	    cmocka_unit_test(test_silence_and_hangups_end_the_handshake),
	    cmocka_unit_test(test_agents_authenticate_and_share_a_session),
	    cmocka_unit_test(test_worker_of_a_live_session_connects_and_its_message_arrives),
	    cmocka_unit_test(test_worker_for_an_unknown_job_refused_in_words),
	    cmocka_unit_test(test_wrong_secret_refused_on_both_sides),
	    cmocka_unit_test(test_agent_not_in_peers_refused),
	    cmocka_unit_test(test_own_identity_refused),
	    cmocka_unit_test(test_forged_identities_refused),
	    cmocka_unit_test(test_wrong_frame_inside_tls_refused_before_its_body),
	    cmocka_unit_test(test_hello_contradicting_its_identity_refused_in_words),
	    cmocka_unit_test(test_own_handshake_relayed_back_refused),
	    cmocka_unit_test(test_recorded_handshake_replayed_refused),
	    cmocka_unit_test(test_client_prints_a_refusal_without_control_bytes),
	};
	const struct CMUnitTest certs[] = {
	    cmocka_unit_test(test_certs_authenticate_agents_and_workers_keep_their_keys),
	    cmocka_unit_test(test_certificate_of_another_ca_refused),
	    cmocka_unit_test(test_certificate_naming_another_host_refused_unless_peers_name_it),
	    cmocka_unit_test(test_own_certificate_refused),
	    cmocka_unit_test(test_own_handshake_relayed_back_refused),
	    cmocka_unit_test(test_certificate_and_secret_agents_refuse_each_other_in_words),
	    cmocka_unit_test(test_certificate_files_checked_at_start),
	};
	int rc = cmocka_run_group_tests(guard, NULL, NULL);
	rc |= cmocka_run_group_tests(whole, nets_setup, nets_teardown);
	return rc | cmocka_run_group_tests(certs, certs_setup, certs_teardown);
}
#else
static void test_skipped_without_ucx(void **state)
{
	(void)state;
	skip();
}

int main(void)
{
	const struct CMUnitTest tests[] = {cmocka_unit_test(test_skipped_without_ucx)};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
