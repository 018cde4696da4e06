/*
 * test_wire.c - the node wire protocol (core/wire.c) on its own: the codec over a
 * socketpair made here, no agent.
 *
 * What its contract promises: an ATTACH request carries every option of the table
 * (and only those) and an absolute root, and decodes to the same options; a
 * packet is a request only with the exact size, magic and version; a reply is
 * refused (-EPROTO) for the same faults and the descriptor it carried is closed,
 * no reply at all is -EPIPE, a reply's message always ends inside it; a reply
 * never blocks the agent nor raises SIGPIPE; the client refuses an agent of
 * another uid, and one run by root unless GM_NODE_TRUST_ROOT=1; the socket's
 * directory must be the user's own, 0700, not a symlink. The peer's credentials
 * and this process's uid are faked by link-time wrapping, so every branch runs
 * as any user. The agent side (what node.c does with requests: unknown types,
 * limits, the agent's own uid check) is test_node's.
 */
// LDFLAGS: -Wl,--wrap=getsockopt -Wl,--wrap=geteuid
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "goldminer/aug.h"
#include "goldminer/job.h"
#include "goldminer/wire.h"
#include "testutil.h"

/* ---- the peer's credentials and our uid, as a test wants them -------------------- */

static int fake_peer_uid = -1; /* SO_PEERCRED says this uid (-1: the real answer) */
static int fake_peer_errno;    /* SO_PEERCRED fails with this errno (0: it does not) */
static int fake_euid = -1;     /* geteuid() says this (-1: the real one) */

int __real_getsockopt(int fd, int level, int name, void *val, socklen_t *len);
int __wrap_getsockopt(int fd, int level, int name, void *val, socklen_t *len);
int __wrap_getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	if (level == SOL_SOCKET && name == SO_PEERCRED) {
		if (fake_peer_errno) {
			errno = fake_peer_errno;
			return -1;
		}
		if (fake_peer_uid >= 0) {
			struct ucred cr = {.pid = 4242, .uid = (uid_t)fake_peer_uid, .gid = 0};
			memcpy(val, &cr, sizeof(cr));
			*len = sizeof(cr);
			return 0;
		}
	}
	return __real_getsockopt(fd, level, name, val, len);
}

uid_t __real_geteuid(void);
uid_t __wrap_geteuid(void);
uid_t __wrap_geteuid(void)
{
	return fake_euid >= 0 ? (uid_t)fake_euid : __real_geteuid();
}

static char base[64];

static int setup(void **state)
{
	(void)state;
	signal(SIGPIPE, SIG_DFL); /* a send that raised it would end the test */
	return gm_test_tmpdir(base, sizeof(base), "gm-wire");
}

static int teardown(void **state)
{
	(void)state;
	gm_test_rm_tree(base);
	return 0;
}

static int reset(void **state)
{
	(void)state;
	fake_peer_uid = -1;
	fake_peer_errno = 0;
	fake_euid = -1;
	unsetenv(GM_NODE_TRUST_ROOT_ENV);
	return 0;
}

/* Open descriptors of this process. */
static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;
	assert_non_null(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

static void pair(int sv[2])
{
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
}

/* Send len bytes of buf on fd with the descriptors fds[0..nfd) attached. */
static void send_raw(int fd, const void *buf, size_t len, const int *fds, int nfd)
{
	char cbuf[CMSG_SPACE(3 * sizeof(int))];
	struct iovec iov = {(void *)buf, len};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	memset(cbuf, 0, sizeof(cbuf));
	if (nfd) {
		mh.msg_control = cbuf;
		mh.msg_controllen = CMSG_SPACE((size_t)nfd * sizeof(int));
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN((size_t)nfd * sizeof(int));
		memcpy(CMSG_DATA(c), fds, (size_t)nfd * sizeof(int));
	}
	assert_int_equal(sendmsg(fd, &mh, 0), (ssize_t)len);
}

/* ---- the request codec ------------------------------------------------------------ */

/* Options with a value of their own in every field the table carries. */
static void odd_options(struct gm_loader_opts *o, const char *root)
{
	memset(o, 0, sizeof(*o));
	o->root = root;
	gm_aug_spec_default(&o->aug);
	o->aug.size = 99;
	o->aug.flip_p = 0.25f;
	o->aug.out = GM_OUT_F16_CHW;
	o->batch_size = 33;
	o->workers = -3;
	o->seed = 0x1122334455667788ull;
	o->epoch = 5;
	o->epochs = 6;
	o->start_batch = 1ull << 40;
	o->slots = 16;
	o->on_error = GM_ON_ERROR_FAIL;
	o->drop_last = true;
	o->shuffle = false;
	o->chaos_kill_ms = 77;
	o->lease_timeout_ms = 1234;
	/* the client's own: not sent */
	o->pipeline = "resize 64";
	o->no_pin = true;
	o->max_workers = 9;
	o->node = "/elsewhere.sock";
}

/* Every option of the table arrives as sent; the client's own do not travel; the
 * root arrives absolute; the booleans and on_error both ways. */
static void test_attach_request_carries_every_option(void **state)
{
	struct gm_loader_opts o, back;
	static struct gm_node_req req;
	char cwd[PATH_MAX];
	(void)state;
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	odd_options(&o, ".");
	assert_int_equal(gm_wire_attach_request(&req, &o), 0);
	assert_int_equal(req.magic, GM_NODE_MAGIC);
	assert_int_equal(req.version, GM_NODE_VERSION);
	assert_int_equal(req.type, GM_NODE_ATTACH);
	assert_true(gm_wire_request_valid(&req, (ssize_t)sizeof(req)));
	gm_wire_request_opts(&req, &back);
	assert_string_equal(back.root, cwd);
	assert_memory_equal(&back.aug, &o.aug, sizeof(o.aug));
	assert_int_equal(back.batch_size, 33);
	assert_int_equal(back.workers, -3);
	assert_true(back.seed == o.seed);
	assert_int_equal(back.epoch, 5);
	assert_int_equal(back.epochs, 6);
	assert_true(back.start_batch == 1ull << 40);
	assert_int_equal(back.slots, 16);
	assert_int_equal(back.on_error, GM_ON_ERROR_FAIL);
	assert_true(back.drop_last);
	assert_false(back.shuffle);
	assert_int_equal(back.chaos_kill_ms, 77);
	assert_int_equal(back.lease_timeout_ms, 1234);
	assert_null(back.pipeline);
	assert_false(back.no_pin);
	assert_int_equal(back.max_workers, 0);
	assert_null(back.node);

	/* the other values of the booleans and of on_error */
	o.drop_last = false;
	o.shuffle = true;
	o.on_error = GM_ON_ERROR_SKIP;
	assert_int_equal(gm_wire_attach_request(&req, &o), 0);
	gm_wire_request_opts(&req, &back);
	assert_false(back.drop_last);
	assert_true(back.shuffle);
	assert_int_equal(back.on_error, GM_ON_ERROR_SKIP);
	/* from another process, anything but 0 is "fail", anything but 0 is true */
	req.on_error = 7;
	req.shuffle = 2;
	gm_wire_request_opts(&req, &back);
	assert_int_equal(back.on_error, GM_ON_ERROR_FAIL);
	assert_true(back.shuffle);
	/* a root that does not exist travels as given (the agent says it is missing) */
	odd_options(&o, "no/such/dir");
	assert_int_equal(gm_wire_attach_request(&req, &o), 0);
	assert_string_equal(req.root, "no/such/dir");
}

/* A root that does not fit in the packet is refused, not cut. */
static void test_attach_request_refuses_a_root_too_long(void **state)
{
	struct gm_loader_opts o;
	static struct gm_node_req req;
	static char root[sizeof(req.root) + 1];
	(void)state;
	memset(root, 'r', sizeof(root) - 1);
	odd_options(&o, root);
	assert_int_equal(gm_wire_attach_request(&req, &o), -ENAMETOOLONG);
	root[sizeof(req.root) - 1] = 0; /* 4095 bytes: fits */
	assert_int_equal(gm_wire_attach_request(&req, &o), 0);
}

/* The agent's decoder ends a root that another process left unterminated. */
static void test_request_opts_ends_the_root_inside_the_packet(void **state)
{
	static struct gm_node_req req;
	struct gm_loader_opts o;
	(void)state;
	gm_wire_request(&req, GM_NODE_ATTACH);
	memset(req.root, 'a', sizeof(req.root));
	gm_wire_request_opts(&req, &o);
	assert_int_equal(strlen(o.root), sizeof(req.root) - 1);
	assert_ptr_equal(o.root, req.root);
}

/* A packet is a request of this version only with the exact size, magic and
 * version; its type is the agent's to judge. */
static void test_request_valid_checks_size_magic_and_version(void **state)
{
	static struct gm_node_req req;
	ssize_t n = (ssize_t)sizeof(req);
	(void)state;
	gm_wire_request(&req, GM_NODE_STATUS);
	assert_int_equal(req.workers, 0);
	assert_true(gm_wire_request_valid(&req, n));
	assert_false(gm_wire_request_valid(&req, n - 1));
	assert_false(gm_wire_request_valid(&req, n + 1));
	assert_false(gm_wire_request_valid(&req, 0));
	assert_false(gm_wire_request_valid(&req, -1));
	req.magic ^= 1;
	assert_false(gm_wire_request_valid(&req, n));
	req.magic ^= 1;
	req.version = GM_NODE_VERSION - 1;
	assert_false(gm_wire_request_valid(&req, n));
	req.version = GM_NODE_VERSION + 1;
	assert_false(gm_wire_request_valid(&req, n));
	req.version = GM_NODE_VERSION;
	req.type = 99;
	assert_true(gm_wire_request_valid(&req, n));
}

/* ---- a call and its reply --------------------------------------------------------- */

/* A reply with a ring: the client gets status, counts, message and the fd (the
 * same file); the agent got the request as sent. */
static void test_call_gets_the_reply_and_its_fd(void **state)
{
	int sv[2], fd = -2, ring = memfd_create("ring", MFD_CLOEXEC);
	static struct gm_node_req req, got;
	static struct gm_node_reply rep;
	struct stat a, b;
	(void)state;
	assert_true(ring >= 0);
	pair(sv);
	gm_wire_request(&req, GM_NODE_SCALE);
	req.workers = 3;
	gm_wire_reply(sv[1], -EBUSY, ring, 6, 0xfeedull, "busy %d", 5);
	assert_int_equal(gm_wire_call(sv[0], &req, &rep, &fd), 0);
	assert_int_equal(rep.status, -EBUSY);
	assert_int_equal(rep.batches_per_epoch, 6);
	assert_true(rep.fingerprint == 0xfeedull);
	assert_string_equal(rep.msg, "busy 5");
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &a), 0);
	assert_int_equal(fstat(ring, &b), 0);
	assert_true(a.st_ino == b.st_ino && a.st_dev == b.st_dev);
	assert_int_equal(recv(sv[1], &got, sizeof(got), 0), (ssize_t)sizeof(got));
	assert_memory_equal(&got, &req, sizeof(req));
	close(fd);

	/* no fd in the reply: -1; a caller that wants none: the fd is closed */
	gm_wire_reply(sv[1], 0, -1, 0, 0, "ok");
	assert_int_equal(gm_wire_call(sv[0], &req, &rep, &fd), 0);
	assert_int_equal(fd, -1);
	int before = open_fds();
	gm_wire_reply(sv[1], 0, ring, 0, 0, "ok");
	assert_int_equal(gm_wire_call(sv[0], &req, &rep, NULL), 0);
	assert_int_equal(open_fds(), before);
	/* two or three fds: the first is the reply's, the others closed */
	static struct gm_node_reply raw;
	memset(&raw, 0, sizeof(raw));
	raw.magic = GM_NODE_MAGIC;
	raw.version = GM_NODE_VERSION;
	int more[3] = {ring, ring, ring};
	for (int n = 2; n <= 3; n++) {
		send_raw(sv[1], &raw, sizeof(raw), more, n);
		assert_int_equal(gm_wire_call(sv[0], &req, &rep, &fd), 0);
		assert_true(fd >= 0);
		assert_int_equal(open_fds(), before + 1);
		close(fd);
		assert_int_equal(open_fds(), before);
	}
	close(sv[0]);
	close(sv[1]);
	close(ring);
}

/* A reply of the wrong size or magic is -EPROTO, one of another version
 * -EPROTONOSUPPORT with that version, and the fd it carried is closed (a bad peer
 * cannot leak descriptors into the client). */
static void test_call_refuses_a_bad_reply_and_closes_its_fd(void **state)
{
	int sv[2], fd, ring = memfd_create("ring", MFD_CLOEXEC);
	static struct gm_node_req req;
	static struct gm_node_reply rep, raw;
	(void)state;
	pair(sv);
	gm_wire_request(&req, GM_NODE_STATUS);
	int before = open_fds();
	for (int k = 0; k < 4; k++) {
		memset(&raw, 0, sizeof(raw));
		raw.magic = k == 1 ? GM_NODE_MAGIC + 1 : GM_NODE_MAGIC;
		raw.version = k == 2 ? GM_NODE_VERSION + 1 : GM_NODE_VERSION;
		size_t len = k == 0 ? sizeof(raw) - 1 : k == 3 ? 8 : sizeof(raw);
		int fds[2] = {ring, ring};
		send_raw(sv[1], &raw, len, fds, 1 + k % 2);
		fd = -2;
		assert_int_equal(gm_wire_call(sv[0], &req, &rep, &fd),
				 k == 2 ? -EPROTONOSUPPORT : -EPROTO);
		if (k == 2)
			assert_int_equal(rep.version, GM_NODE_VERSION + 1);
		assert_int_equal(fd, -1);
		assert_int_equal(open_fds(), before);
	}
	close(sv[0]);
	close(sv[1]);
	close(ring);
}

/* A message that fills the reply ends inside it, on both sides. */
static void test_reply_message_ends_inside_the_reply(void **state)
{
	int sv[2];
	static struct gm_node_req req;
	static struct gm_node_reply rep, raw;
	static char longer[GM_NODE_MSG + 1000];
	(void)state;
	pair(sv);
	gm_wire_request(&req, GM_NODE_STATUS);
	memset(longer, 'm', sizeof(longer) - 1);
	gm_wire_reply(sv[1], 0, -1, 0, 0, "%s", longer);
	assert_int_equal(gm_wire_call(sv[0], &req, &rep, NULL), 0);
	assert_int_equal(strlen(rep.msg), sizeof(rep.msg) - 1);
	/* a peer that sends no terminator */
	memset(&raw, 0, sizeof(raw));
	raw.magic = GM_NODE_MAGIC;
	raw.version = GM_NODE_VERSION;
	memset(raw.msg, 'x', sizeof(raw.msg));
	send_raw(sv[1], &raw, sizeof(raw), NULL, 0);
	assert_int_equal(gm_wire_call(sv[0], &req, &rep, NULL), 0);
	assert_int_equal(strlen(rep.msg), sizeof(rep.msg) - 1);
	close(sv[0]);
	close(sv[1]);
}

/* A request's fds reach the agent's side (gm_wire_recv), GM_WIRE_MAX_FDS at most:
 * one more is closed on arrival, so a client cannot leak fds into the agent. */
static void test_request_fds_arrive_and_extra_ones_are_closed(void **state)
{
	(void)state;
	int sv[2], fds[GM_WIRE_MAX_FDS], nfds, three[3];
	struct gm_node_req req, got = {0};
	char cbuf[CMSG_SPACE(3 * sizeof(int))];
	struct iovec iov = {&req, sizeof(req)};
	struct msghdr mh = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
	pair(sv);
	gm_wire_request(&req, GM_NODE_CMDJOB);
	for (int k = 0; k < 3; k++)
		three[k] = memfd_create("gm-test-wire", MFD_CLOEXEC);
	memset(cbuf, 0, sizeof(cbuf));
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(3 * sizeof(int));
	memcpy(CMSG_DATA(c), three, sizeof(three));
	assert_int_equal(sendmsg(sv[0], &mh, 0), (ssize_t)sizeof(req));
	int before = open_fds();
	assert_int_equal(gm_wire_recv(sv[1], &got, fds, &nfds), (ssize_t)sizeof(got));
	assert_int_equal(nfds, GM_WIRE_MAX_FDS);
	assert_int_equal(open_fds(), before + GM_WIRE_MAX_FDS); /* the third was closed */
	assert_int_equal(got.type, GM_NODE_CMDJOB);
	for (int k = 0; k < nfds; k++) {
		assert_true(fcntl(fds[k], F_GETFD) & FD_CLOEXEC);
		close(fds[k]);
	}
	struct gm_node_reply *rep = malloc(sizeof(*rep));
	assert_non_null(rep); /* more fds than a request carries: refused, nothing sent */
	assert_int_equal(gm_wire_call_fds(sv[0], &req, three, 3, rep, NULL), -EINVAL);
	free(rep);
	for (int k = 0; k < 3; k++)
		close(three[k]);
	close(sv[0]);
	close(sv[1]);
}

/* An agent that hangs up without a reply: -EPIPE, and no SIGPIPE for the send. */
static void test_call_without_a_reply_is_epipe(void **state)
{
	int sv[2];
	static struct gm_node_req req;
	static struct gm_node_reply rep;
	int fd = -2;
	(void)state;
	pair(sv);
	close(sv[1]);
	gm_wire_request(&req, GM_NODE_STATUS);
	assert_int_equal(gm_wire_call(sv[0], &req, &rep, &fd), -EPIPE);
	assert_int_equal(fd, -1);
	close(sv[0]);
}

/* The agent's reply never blocks on a client that does not read, and a client
 * that is gone raises no SIGPIPE in the agent. */
static void test_reply_never_blocks_nor_raises_sigpipe(void **state)
{
	int sv[2];
	(void)state;
	pair(sv);
	for (int k = 0; k < 2000; k++) /* far more than the socket buffer holds */
		gm_wire_reply(sv[1], 0, -1, 0, 0, "unread %d", k);
	close(sv[0]);
	gm_wire_reply(sv[1], 0, -1, 0, 0, "to no one");
	close(sv[1]);
}

/* ---- sockets and who is at the other end ------------------------------------------ */

/* A listening agent socket at path (what node.c makes); its fd. */
static int listener(const char *path)
{
	struct sockaddr_un sa;
	char err[256];
	int fd = gm_wire_socket(path, &sa, err, sizeof(err));
	assert_true(fd >= 0);
	unlink(path);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, 64), 0); /* never accepted: room for every connect */
	return fd;
}

/* A socket path longer than sun_path is refused, naming it. */
static void test_socket_refuses_a_path_too_long(void **state)
{
	struct sockaddr_un sa;
	char path[sizeof(sa.sun_path) + 8], err[512];
	(void)state;
	memset(path, 'p', sizeof(path) - 1);
	path[0] = '/';
	path[sizeof(path) - 1] = 0;
	err[0] = 0;
	assert_int_equal(gm_wire_socket(path, &sa, err, sizeof(err)), -ENAMETOOLONG);
	assert_non_null(strstr(err, "pppp"));
	assert_int_equal(gm_wire_connect(path, err, sizeof(err)), -ENAMETOOLONG);
	path[sizeof(sa.sun_path) - 1] = 0; /* 107 bytes: fits */
	int fd = gm_wire_socket(path, &sa, err, sizeof(err));
	assert_true(fd >= 0);
	assert_string_equal(sa.sun_path, path);
	close(fd);
}

/* No agent: the errno of connect, with the path in the message. */
static void test_connect_to_no_agent_names_the_path(void **state)
{
	char path[128], err[512];
	(void)state;
	snprintf(path, sizeof(path), "%s/none.sock", base);
	err[0] = 0;
	assert_int_equal(gm_wire_connect(path, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, path));
	/* a socket file nobody listens on */
	int l = listener(path);
	close(l);
	err[0] = 0;
	assert_int_equal(gm_wire_connect(path, err, sizeof(err)), -ECONNREFUSED);
	assert_non_null(strstr(err, path));
	unlink(path);
}

/* The client accepts an agent of its own uid; refuses one of another uid, and one
 * run by root unless GM_NODE_TRUST_ROOT is exactly "1"; and says so when it cannot
 * read the agent's credentials. */
static void test_connect_checks_who_the_agent_is(void **state)
{
	char path[128], err[512];
	int fd;
	(void)state;
	snprintf(path, sizeof(path), "%s/agent.sock", base);
	int l = listener(path);
	fake_euid = 1000;

	fake_peer_uid = 1000;
	fd = gm_wire_connect(path, err, sizeof(err));
	assert_true(fd >= 0);
	close(fd);

	fake_peer_uid = 1001;
	err[0] = 0;
	assert_int_equal(gm_wire_connect(path, err, sizeof(err)), -EACCES);
	assert_non_null(strstr(err, "1001"));
	assert_non_null(strstr(err, path));

	fake_peer_uid = 0;
	err[0] = 0;
	assert_int_equal(gm_wire_connect(path, err, sizeof(err)), -EACCES);
	assert_non_null(strstr(err, GM_NODE_TRUST_ROOT_ENV));
	setenv(GM_NODE_TRUST_ROOT_ENV, "yes", 1);
	assert_int_equal(gm_wire_connect(path, err, sizeof(err)), -EACCES);
	setenv(GM_NODE_TRUST_ROOT_ENV, "1", 1);
	fd = gm_wire_connect(path, err, sizeof(err));
	assert_true(fd >= 0);
	close(fd);
	/* trusting root does not trust anyone else */
	fake_peer_uid = 1001;
	assert_int_equal(gm_wire_connect(path, err, sizeof(err)), -EACCES);

	fake_peer_errno = ENOBUFS;
	err[0] = 0;
	assert_int_equal(gm_wire_connect(path, err, sizeof(err)), -ENOBUFS);
	assert_non_null(strstr(err, path));
	int before = open_fds();
	assert_int_equal(gm_wire_connect(path, err, sizeof(err)), -ENOBUFS);
	assert_int_equal(open_fds(), before); /* the refused socket is closed */
	close(l);
	unlink(path);
}

/* $XDG_RUNTIME_DIR/goldminer/goldminer.sock when it is an absolute path, else
 * /run/goldminer-<euid>/goldminer.sock. */
static void test_default_socket_follows_xdg_runtime_dir(void **state)
{
	char buf[256], want[64];
	const char *old = getenv("XDG_RUNTIME_DIR");
	char *saved = old ? strdup(old) : NULL;
	(void)state;
	fake_euid = 1234;
	snprintf(want, sizeof(want), "/run/goldminer-1234/goldminer.sock");
	setenv("XDG_RUNTIME_DIR", "/run/user/7", 1);
	assert_ptr_equal(gm_wire_default_socket(buf, sizeof(buf)), buf);
	assert_string_equal(buf, "/run/user/7/goldminer/goldminer.sock");
	setenv("XDG_RUNTIME_DIR", "relative/dir", 1);
	assert_string_equal(gm_wire_default_socket(buf, sizeof(buf)), want);
	setenv("XDG_RUNTIME_DIR", "", 1);
	assert_string_equal(gm_wire_default_socket(buf, sizeof(buf)), want);
	unsetenv("XDG_RUNTIME_DIR");
	assert_string_equal(gm_wire_default_socket(buf, sizeof(buf)), want);
	if (saved)
		setenv("XDG_RUNTIME_DIR", saved, 1);
	free(saved);
}

/*
 * The socket's directory: made 0700 when asked and absent; refused (-errno and
 * the check that failed) when there is none in the path, when it is missing,
 * not a directory, a symlink, open to others or someone else's.
 */
static void test_socket_dir_must_be_the_users_own(void **state)
{
	char dir[128], sock[160], err[512], real[128];
	struct stat st;
	(void)state;
	assert_int_equal(gm_wire_socket_dir("goldminer.sock", true, err, sizeof(err)), -EINVAL);
	assert_int_equal(gm_wire_socket_dir("/goldminer.sock", true, err, sizeof(err)), -EINVAL);

	snprintf(dir, sizeof(dir), "%s/d", base);
	snprintf(sock, sizeof(sock), "%s/goldminer.sock", dir);
	err[0] = 0;
	assert_int_equal(gm_wire_socket_dir(sock, false, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, dir));
	assert_int_equal(gm_wire_socket_dir(sock, true, err, sizeof(err)), 0);
	assert_int_equal(lstat(dir, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0700);
	assert_int_equal(gm_wire_socket_dir(sock, true, err, sizeof(err)), 0); /* it exists */
	assert_int_equal(gm_wire_socket_dir(sock, false, err, sizeof(err)), 0);

	/* open to the group */
	assert_int_equal(chmod(dir, 0750), 0);
	err[0] = 0;
	assert_int_equal(gm_wire_socket_dir(sock, false, err, sizeof(err)), -EPERM);
	assert_non_null(strstr(err, "0750"));
	assert_int_equal(chmod(dir, 0700), 0);
	/* someone else's (this process pretends to be uid 1000) */
	fake_euid = 1000;
	err[0] = 0;
	assert_int_equal(gm_wire_socket_dir(sock, false, err, sizeof(err)), -EPERM);
	assert_non_null(strstr(err, "1000"));
	fake_euid = -1;

	/* a symlink to a good directory, and a file */
	snprintf(real, sizeof(real), "%s/real", base);
	assert_int_equal(mkdir(real, 0700), 0);
	assert_int_equal(rmdir(dir), 0);
	assert_int_equal(symlink(real, dir), 0);
	assert_int_equal(gm_wire_socket_dir(sock, true, err, sizeof(err)), -ENOTDIR);
	assert_int_equal(unlink(dir), 0);
	FILE *f = fopen(dir, "w");
	assert_non_null(f);
	fclose(f);
	assert_int_equal(gm_wire_socket_dir(sock, true, err, sizeof(err)), -ENOTDIR);
	assert_int_equal(unlink(dir), 0);

	/* a parent that is missing is not made */
	snprintf(sock, sizeof(sock), "%s/no/parent/goldminer.sock", base);
	err[0] = 0;
	assert_int_equal(gm_wire_socket_dir(sock, true, err, sizeof(err)), -ENOENT);
	assert_true(err[0] != 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(test_attach_request_carries_every_option, reset),
	    cmocka_unit_test_setup(test_attach_request_refuses_a_root_too_long, reset),
	    cmocka_unit_test_setup(test_request_opts_ends_the_root_inside_the_packet, reset),
	    cmocka_unit_test_setup(test_request_valid_checks_size_magic_and_version, reset),
	    cmocka_unit_test_setup(test_call_gets_the_reply_and_its_fd, reset),
	    cmocka_unit_test_setup(test_call_refuses_a_bad_reply_and_closes_its_fd, reset),
	    cmocka_unit_test_setup(test_reply_message_ends_inside_the_reply, reset),
	    cmocka_unit_test_setup(test_request_fds_arrive_and_extra_ones_are_closed, reset),
	    cmocka_unit_test_setup(test_call_without_a_reply_is_epipe, reset),
	    cmocka_unit_test_setup(test_reply_never_blocks_nor_raises_sigpipe, reset),
	    cmocka_unit_test_setup(test_socket_refuses_a_path_too_long, reset),
	    cmocka_unit_test_setup(test_connect_to_no_agent_names_the_path, reset),
	    cmocka_unit_test_setup(test_connect_checks_who_the_agent_is, reset),
	    cmocka_unit_test_setup(test_default_socket_follows_xdg_runtime_dir, reset),
	    cmocka_unit_test_setup(test_socket_dir_must_be_the_users_own, reset),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
