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

/* ---- the handshake's frames --------------------------------------------------- */

static struct gm_remote_net net0; /* a key, no UCX: enough until AUTH */

static int frames_setup(void **state)
{
	(void)state;
	memset(&net0, 0, sizeof(net0));
	memset(net0.key.key, 0x5a, 32);
	net0.key.len = 32;
	net0.efd = net0.epfd = -1;
	return 0;
}

static void put_frame(int fd, uint32_t type, uint32_t len, const void *body, size_t blen)
{
	uint32_t hdr[2] = {type, len};
	assert_int_equal(send(fd, hdr, sizeof(hdr), MSG_NOSIGNAL), (ssize_t)sizeof(hdr));
	if (blen)
		assert_int_equal(send(fd, body, blen, MSG_NOSIGNAL), (ssize_t)blen);
}

/* A frame from fd of the given type into body (its length returned). */
static size_t get_frame(int fd, uint32_t type, void *body, size_t cap)
{
	uint32_t hdr[2];
	assert_int_equal(recv(fd, hdr, sizeof(hdr), MSG_WAITALL), (ssize_t)sizeof(hdr));
	assert_int_equal(hdr[0], type);
	assert_true(hdr[1] <= cap);
	assert_int_equal(recv(fd, body, hdr[1], MSG_WAITALL), (ssize_t)hdr[1]);
	return hdr[1];
}

/* A server's connection on one end of a socket pair; the other end into *peer. */
static struct ctl *server(int *peer)
{
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(fcntl(sv[0], F_SETFL, O_NONBLOCK), 0); /* as accepted ones are */
	struct ctl *x = gm_remote_ctl_accepted(sv[0], "10.0.0.2");
	assert_non_null(x);
	*peer = sv[1];
	return x;
}

static struct m_hello hello(uint32_t version)
{
	struct m_hello h = {.magic = MSG_MAGIC, .version = version, .role = ROLE_AGENT};
	memset(h.nonce, 7, sizeof(h.nonce));
	return h;
}

static int unread(int fd)
{
	int k = -1;
	assert_int_equal(ioctl(fd, FIONREAD, &k), 0);
	return k;
}

static void test_server_refuses_a_wrong_frame_before_reading_its_body(void **state)
{
	(void)state;
	int peer;
	unsigned char body[sizeof(struct m_auth) + 8] = {0};
	struct ctl *x = server(&peer);
	put_frame(peer, CTL_AUTH, sizeof(body), body, sizeof(body)); /* AUTH first */
	gm_remote_ctl_step(&net0, x);
	assert_int_equal(x->status, -EPROTO);
	assert_non_null(strstr(x->why, "not a goldminer"));
	assert_int_equal(unread(x->fd), (int)sizeof(body)); /* its body never read */
	gm_remote_ctl_free(x);
	close(peer);
	struct m_hello h = hello(MSG_VERSION);
	x = server(&peer);
	put_frame(peer, CTL_HELLO, sizeof(h) + 1, &h, sizeof(h)); /* one byte long */
	gm_remote_ctl_step(&net0, x);
	assert_int_equal(x->status, -EPROTO);
	assert_int_equal(unread(x->fd), (int)sizeof(h));
	gm_remote_ctl_free(x);
	close(peer);
}

static void test_server_refuses_an_oversized_address(void **state)
{
	(void)state;
	int peer;
	struct m_challenge ch;
	struct m_hello h = hello(MSG_VERSION);
	struct ctl *x = server(&peer);
	put_frame(peer, CTL_HELLO, sizeof(h), &h, sizeof(h));
	gm_remote_ctl_step(&net0, x);
	assert_int_equal(x->status, 0);
	get_frame(peer, CTL_CHALLENGE, &ch, sizeof(ch));
	put_frame(peer, CTL_AUTH, sizeof(struct m_auth) + CTL_ADDR_MAX + 1, NULL, 0);
	gm_remote_ctl_step(&net0, x);
	assert_int_equal(x->status, -EPROTO);
	gm_remote_ctl_free(x);
	close(peer);
}

static void test_server_refuses_another_version_in_words(void **state)
{
	(void)state;
	int peer;
	struct m_hello h = hello(MSG_VERSION + 1);
	struct ctl *x = server(&peer);
	put_frame(peer, CTL_HELLO, sizeof(h), &h, sizeof(h));
	gm_remote_ctl_step(&net0, x);
	assert_int_equal(x->status, -EPROTO);
	assert_non_null(strstr(x->why, "run the same goldminer on every host"));
	gm_remote_ctl_free(x);
	close(peer);
}

static void test_server_proves_the_secret_and_refuses_a_wrong_proof(void **state)
{
	(void)state;
	int peer;
	struct m_challenge ch;
	struct m_welcome wm;
	unsigned char auth[sizeof(struct m_auth) + 8] = {0};
	struct m_hello h = hello(MSG_VERSION);
	struct ctl *x = server(&peer);
	put_frame(peer, CTL_HELLO, sizeof(h), &h, sizeof(h));
	gm_remote_ctl_step(&net0, x);
	get_frame(peer, CTL_CHALLENGE, &ch, sizeof(ch));
	assert_true(gm_auth_verify(&net0.key, SERVER_ROLE, h.nonce, ch.nonce, ch.proof));
	put_frame(peer, CTL_AUTH, sizeof(auth), auth, sizeof(auth));
	gm_remote_ctl_step(&net0, x);
	assert_int_equal(x->status, -EACCES);
	assert_non_null(strstr(x->why, "does not know the secret"));
	assert_int_equal(get_frame(peer, CTL_WELCOME, &wm, sizeof(wm)), sizeof(wm));
	assert_int_equal(wm.status, -EACCES);
	assert_non_null(strstr(wm.msg, "wrong secret"));
	gm_remote_ctl_free(x);
	close(peer);
}

static void test_silence_and_hangups_end_the_handshake(void **state)
{
	(void)state;
	int peer;
	struct ctl *x = server(&peer);
	put_frame(peer, CTL_HELLO, sizeof(struct m_hello), NULL, 0); /* a header, then silence */
	gm_remote_ctl_step(&net0, x);
	assert_int_equal(x->status, 0);
	x->since_ms -= AUTH_MS; /* as if AUTH_MS had passed */
	gm_remote_ctl_step(&net0, x);
	assert_int_equal(x->status, -ETIMEDOUT);
	assert_non_null(strstr(x->why, "did not authenticate within"));
	gm_remote_ctl_free(x);
	close(peer);
	x = server(&peer);
	close(peer);
	gm_remote_ctl_step(&net0, x);
	assert_int_equal(x->status, -ECONNRESET);
	gm_remote_ctl_free(x);
}

static void test_client_refuses_a_server_without_the_secret(void **state)
{
	(void)state;
	uint16_t port;
	char addr[64];
	struct m_hello h;
	struct m_challenge ch;
	struct ctl *x;
	int l = listener(AF_INET, "127.0.0.1", &port, 0);
	assert_true(l >= 0);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);
	assert_int_equal(gm_remote_ctl_dial(addr, ROLE_AGENT, 0, NULL, &x), 0);
	int s = accept(l, NULL, NULL);
	assert_true(s >= 0);
	for (int k = 0; k < 100 && x->connecting; k++) {
		poll(NULL, 0, 10);
		gm_remote_ctl_step(&net0, x);
	}
	get_frame(s, CTL_HELLO, &h, sizeof(h));
	assert_int_equal(h.role, ROLE_AGENT);
	memset(&ch, 1, sizeof(ch)); /* a proof made without the key */
	put_frame(s, CTL_CHALLENGE, sizeof(ch), &ch, sizeof(ch));
	gm_remote_ctl_step(&net0, x);
	assert_int_equal(x->status, -EACCES);
	assert_non_null(strstr(x->why, "does not know the secret"));
	gm_remote_ctl_free(x);
	close(s);
	close(l);
}

/* ---- a whole handshake, two UCP workers --------------------------------------- */

static struct gm_remote_net srv, cli;
static int received, dummy_job;

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

static int nets_setup(void **state)
{
	char err[256];
	(void)state;
	setenv("UCX_TLS", "tcp", 1);
	setenv("UCX_NET_DEVICES", "lo", 1);
	struct gm_remote_net *nets[2] = {&srv, &cli};
	for (int i = 0; i < 2; i++) {
		struct gm_remote_net *n = nets[i];
		memset(n, 0, sizeof(*n));
		memset(n->key.key, 0x33, 32);
		n->key.len = 32;
		n->efd = n->epfd = -1;
		n->on_msg = on_msg;
		n->job_of = job_of;
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
	gm_remote_net_fini(&cli);
	gm_remote_net_fini(&srv);
	return 0;
}

/* A worker's handshake with token against srv; both ends run until they end. */
static void handshake(uint64_t token, struct ctl **sx, struct ctl **cx)
{
	uint16_t port;
	int l;
	char addr[64], err[256];
	assert_int_equal(gm_remote_ctl_listen("127.0.0.1:0", &l, &port, err, sizeof(err)), 0);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);
	assert_int_equal(gm_remote_ctl_dial(addr, ROLE_WORKER, token, cli.w, cx), 0);
	int s = -1;
	for (int k = 0; k < 500 && s < 0; k++) {
		s = accept4(l, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		poll(NULL, 0, 2);
	}
	assert_true(s >= 0);
	*sx = gm_remote_ctl_accepted(s, "127.0.0.1");
	for (int k = 0; k < 2000 && (!(*sx)->status || !(*cx)->status); k++) {
		gm_remote_ctl_step(&srv, *sx);
		gm_remote_ctl_step(&cli, *cx);
		poll(NULL, 0, 2);
	}
	close(l);
}

static void test_handshake_makes_one_endpoint_each_side(void **state)
{
	(void)state;
	struct ctl *sx, *cx;
	struct m_claim m = {0};
	handshake(42, &sx, &cx);
	assert_int_equal(sx->status, 1);
	assert_int_equal(cx->status, 1);
	struct conn *sc = sx->c, *cc = cx->c;
	assert_int_equal(sc->role, ROLE_WORKER);
	assert_true(sc->job == (struct hjob *)&dummy_job);
	assert_int_equal(cc->st, C_OK);
	assert_true(cc->outgoing && !sc->outgoing);
	gm_remote_ctl_free(sx);
	gm_remote_ctl_free(cx);
	assert_int_equal(gm_remote_conn_send(cc, AM_CLAIM, &m, sizeof(m), NULL, 0), 0);
	for (int k = 0; k < 4000 && !received; k++) {
		gm_remote_net_progress(&cli);
		gm_remote_net_progress(&srv);
		poll(NULL, 0, 1);
	}
	assert_int_equal(received, 1);
	gm_remote_conn_free(&cli, cc);
	gm_remote_conn_free(&srv, sc);
}

static void test_worker_for_an_unknown_job_refused_in_words(void **state)
{
	(void)state;
	struct ctl *sx, *cx;
	handshake(7, &sx, &cx);
	assert_int_equal(sx->status, -ENOENT);
	assert_int_equal(cx->status, -ENOENT);
	assert_non_null(strstr(cx->why, "no such job here"));
	assert_null(cx->c);
	gm_remote_ctl_free(sx);
	gm_remote_ctl_free(cx);
}

/* An authenticated server's refusal words reach the agent's log: control bytes
 * (a forged line, a terminal's escapes) are printed as '?'. */
static void test_client_prints_a_refusal_without_control_bytes(void **state)
{
	(void)state;
	uint16_t port;
	char addr[64];
	unsigned char body[sizeof(struct m_auth) + CTL_ADDR_MAX];
	struct m_hello h;
	struct m_challenge ch;
	struct m_welcome wm = {.status = -EPERM};
	struct ctl *x;
	int l = listener(AF_INET, "127.0.0.1", &port, 0);
	assert_true(l >= 0);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);
	assert_int_equal(gm_remote_ctl_dial(addr, ROLE_WORKER, 42, cli.w, &x), 0);
	int s = accept(l, NULL, NULL);
	assert_true(s >= 0);
	for (int k = 0; k < 100 && x->connecting; k++) {
		poll(NULL, 0, 10);
		gm_remote_ctl_step(&cli, x);
	}
	get_frame(s, CTL_HELLO, &h, sizeof(h));
	memset(ch.nonce, 3, sizeof(ch.nonce));
	assert_int_equal(gm_auth_proof(&cli.key, SERVER_ROLE, h.nonce, ch.nonce, ch.proof), 0);
	put_frame(s, CTL_CHALLENGE, sizeof(ch), &ch, sizeof(ch));
	for (int k = 0; k < 100 && x->want != CTL_WELCOME; k++)
		gm_remote_ctl_step(&cli, x);
	assert_true(get_frame(s, CTL_AUTH, body, sizeof(body)) > sizeof(struct m_auth));
	snprintf(wm.msg, sizeof(wm.msg), "no\ngoldminer node: forged\033[2J");
	put_frame(s, CTL_WELCOME, sizeof(wm), &wm, sizeof(wm));
	for (int k = 0; k < 100 && !x->status; k++) {
		poll(NULL, 0, 2);
		gm_remote_ctl_step(&cli, x);
	}
	assert_int_equal(x->status, -EPERM);
	assert_non_null(strstr(x->why, "no?goldminer node: forged?[2J"));
	assert_null(x->c);
	gm_remote_ctl_free(x);
	close(s);
	close(l);
}

int main(void)
{
	const struct CMUnitTest guard[] = {
	    cmocka_unit_test(test_guard_admits_only_the_named_ipv4_addresses),
	    cmocka_unit_test(test_guard_admits_only_the_named_ipv6_addresses),
	    cmocka_unit_test(test_guard_again_with_a_new_set_of_addresses),
	    cmocka_unit_test(test_guard_takes_a_v4_mapped_address_for_ipv4),
	    cmocka_unit_test(test_guard_takes_the_longest_list),
	    cmocka_unit_test(test_server_refuses_a_wrong_frame_before_reading_its_body),
	    cmocka_unit_test(test_server_refuses_an_oversized_address),
	    cmocka_unit_test(test_server_refuses_another_version_in_words),
	    cmocka_unit_test(test_server_proves_the_secret_and_refuses_a_wrong_proof),
	    cmocka_unit_test(test_silence_and_hangups_end_the_handshake),
	    cmocka_unit_test(test_client_refuses_a_server_without_the_secret),
	};
	const struct CMUnitTest whole[] = {
	    cmocka_unit_test(test_handshake_makes_one_endpoint_each_side),
	    cmocka_unit_test(test_worker_for_an_unknown_job_refused_in_words),
	    cmocka_unit_test(test_client_prints_a_refusal_without_control_bytes),
	};
	int rc = cmocka_run_group_tests(guard, frames_setup, NULL);
	return rc | cmocka_run_group_tests(whole, nets_setup, nets_teardown);
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
