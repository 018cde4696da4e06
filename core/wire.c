/*
 * wire.c - the node wire protocol (see wire.h): connect, the request/reply codec
 * and the table that carries a job's options.
 *
 * Everything that crosses the socket is checked on arrival before use (size,
 * magic, version; the option values later by gm_pool_check, the ring by
 * gm_ring_attach): the peer is another process. A reply's fd is taken with
 * MSG_CMSG_CLOEXEC and closed whenever the reply is refused, so a bad peer cannot
 * leak descriptors into a loader.
 *
 * Who is at the other end is checked here for the client (SO_PEERCRED of the
 * agent, before a request is sent), and the default socket's directory is
 * checked (and made) here for both sides.
 *
 * It does not listen or accept (node.c), and it holds no state.
 */
#include "goldminer/wire.h"
#include "goldminer/util.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* The agent writes every batch this process reads: it must be this uid (or root,
 * when the user said so). SO_PEERCRED gives the uid the agent had at listen(). */
static int check_agent(int fd, const char *path, char *err, size_t errlen)
{
	struct ucred cr;
	socklen_t cl = sizeof(cr);
	uid_t me = geteuid();
	const char *trust = getenv(GM_NODE_TRUST_ROOT_ENV);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0) {
		int e = -errno;
		gm_errf(err, errlen, "node agent at %s: cannot read its credentials: %s", path,
			strerror(-e));
		return e;
	}
	if (cr.uid == me || (cr.uid == 0 && trust && !strcmp(trust, "1")))
		return 0;
	if (cr.uid == 0)
		gm_errf(err, errlen,
			"refusing the node agent at %s: it runs as root (uid 0, pid %d), this "
			"process as uid %u; set " GM_NODE_TRUST_ROOT_ENV "=1 to trust an agent "
			"run by root",
			path, (int)cr.pid, (unsigned)me);
	else
		gm_errf(err, errlen,
			"refusing the node agent at %s: it runs as uid %u (pid %d), not as this "
			"process's uid %u, and it would write every batch this process reads; "
			"start your own with 'goldminer node'",
			path, (unsigned)cr.uid, (int)cr.pid, (unsigned)me);
	return -EACCES;
}

int gm_wire_socket(const char *path, struct sockaddr_un *sa, char *err, size_t errlen)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sa->sun_path)) {
		gm_errf(err, errlen, "socket path too long: %s", path);
		return -ENAMETOOLONG;
	}
	strcpy(sa->sun_path, path);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		int e = -errno;
		gm_errf(err, errlen, "socket: %s", strerror(-e));
		return e;
	}
	return fd;
}

int gm_wire_connect(const char *path, char *err, size_t errlen)
{
	struct sockaddr_un sa;
	int fd = gm_wire_socket(path, &sa, err, errlen);
	if (fd < 0)
		return fd;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = -errno;
		close(fd);
		gm_errf(err, errlen,
			"cannot reach the node agent at %s: %s (start one with 'goldminer node')",
			path, strerror(-e));
		return e;
	}
	int rc = check_agent(fd, path, err, errlen);
	if (rc) {
		close(fd);
		return rc;
	}
	return fd;
}

const char *gm_wire_default_socket(char *buf, size_t len)
{
	const char *rt = getenv("XDG_RUNTIME_DIR");
	if (rt && *rt == '/')
		snprintf(buf, len, "%s/goldminer/goldminer.sock", rt);
	else
		snprintf(buf, len, "/run/goldminer-%u/goldminer.sock", (unsigned)geteuid());
	return buf;
}

int gm_wire_socket_dir(const char *path, bool create, char *err, size_t errlen)
{
	char dir[PATH_MAX];
	struct stat st;
	uid_t me = geteuid();

	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	if (!slash || slash == dir) {
		gm_errf(err, errlen, "%s: the socket needs a directory of its own", path);
		return -EINVAL;
	}
	*slash = 0;
	if (create && mkdir(dir, 0700) < 0 && errno != EEXIST) {
		int e = -errno;
		gm_errf(err, errlen,
			"cannot create the socket directory %s: %s (set XDG_RUNTIME_DIR to a "
			"directory of yours, or pass --socket PATH in a directory only you can "
			"write)",
			dir, strerror(-e));
		return e;
	}
	if (lstat(dir, &st) < 0) {
		int e = -errno;
		gm_errf(err, errlen,
			"socket directory %s: %s (start the agent first: "
			"'goldminer node' creates it)",
			dir, strerror(-e));
		return e;
	}
	if (!S_ISDIR(st.st_mode)) {
		gm_errf(err, errlen,
			"socket directory %s is not a directory (a symlink or a file); remove it "
			"and let 'goldminer node' create it",
			dir);
		return -ENOTDIR;
	}
	if (st.st_uid != me) {
		gm_errf(err, errlen,
			"socket directory %s belongs to uid %u, not to uid %u: someone else "
			"could serve its socket; remove it, or set XDG_RUNTIME_DIR to a "
			"directory of yours",
			dir, (unsigned)st.st_uid, (unsigned)me);
		return -EPERM;
	}
	if (st.st_mode & 077) {
		gm_errf(err, errlen,
			"socket directory %s has mode %04o: others may enter it; run "
			"'chmod 700 %s'",
			dir, (unsigned)(st.st_mode & 07777), dir);
		return -EPERM;
	}
	return 0;
}

void gm_wire_request(struct gm_node_req *req, enum gm_node_msg type)
{
	memset(req, 0, sizeof(*req));
	req->magic = GM_NODE_MAGIC;
	req->version = GM_NODE_VERSION;
	req->type = type;
}

/*
 * The options a job sends: one row per field, named alike in struct
 * gm_loader_opts and struct gm_node_req. The root travels apart (it is made
 * absolute); pipeline, no_pin, max_workers and node are the client's own.
 */
enum kind {
	K_I32,	    /* int <-> int32_t */
	K_U32,	    /* uint32_t */
	K_U64,	    /* uint64_t */
	K_BOOL,	    /* bool <-> uint32_t 0/1 */
	K_ON_ERROR, /* enum gm_on_error <-> uint32_t; anything but 0 is FAIL */
	K_AUG,	    /* struct gm_aug_spec, as bytes (checked by the agent) */
};

// clang-format off
#define ROW(f, k) {offsetof(struct gm_loader_opts, f), offsetof(struct gm_node_req, f), k}
static const struct {
	size_t opt, req;
	enum kind kind;
} fields[] = {
	ROW(workers, K_I32),
	ROW(aug, K_AUG),
	ROW(seed, K_U64),
	ROW(start_batch, K_U64),
	ROW(batch_size, K_U32),
	ROW(epoch, K_U32),
	ROW(epochs, K_U32),
	ROW(slots, K_U32),
	ROW(on_error, K_ON_ERROR),
	ROW(shuffle, K_BOOL),
	ROW(drop_last, K_BOOL),
	ROW(chaos_kill_ms, K_U32),
	ROW(lease_timeout_ms, K_U32),
};
// clang-format on
#undef ROW

/* One field from the options (to_req) or into them. */
static void carry(enum kind k, void *opt, void *req, bool to_req)
{
	uint32_t u;
	int32_t i;
	int v;
	bool b;
	enum gm_on_error e;

	switch (k) {
	case K_I32:
		if (to_req) {
			memcpy(&v, opt, sizeof(v));
			i = v;
			memcpy(req, &i, sizeof(i));
		} else {
			memcpy(&i, req, sizeof(i));
			v = i;
			memcpy(opt, &v, sizeof(v));
		}
		break;
	case K_U32:
		memcpy(to_req ? req : opt, to_req ? opt : req, sizeof(uint32_t));
		break;
	case K_U64:
		memcpy(to_req ? req : opt, to_req ? opt : req, sizeof(uint64_t));
		break;
	case K_AUG:
		memcpy(to_req ? req : opt, to_req ? opt : req, sizeof(struct gm_aug_spec));
		break;
	case K_BOOL:
		if (to_req) {
			memcpy(&b, opt, sizeof(b));
			u = b;
			memcpy(req, &u, sizeof(u));
		} else {
			memcpy(&u, req, sizeof(u));
			b = u != 0;
			memcpy(opt, &b, sizeof(b));
		}
		break;
	case K_ON_ERROR:
		if (to_req) {
			memcpy(&e, opt, sizeof(e));
			u = (uint32_t)e;
			memcpy(req, &u, sizeof(u));
		} else {
			memcpy(&u, req, sizeof(u));
			e = u ? GM_ON_ERROR_FAIL : GM_ON_ERROR_SKIP;
			memcpy(opt, &e, sizeof(e));
		}
		break;
	}
}

static void carry_all(struct gm_loader_opts *o, struct gm_node_req *req, bool to_req)
{
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
		carry(fields[i].kind, (char *)o + fields[i].opt, (char *)req + fields[i].req,
		      to_req);
}

int gm_wire_attach_request(struct gm_node_req *req, const struct gm_loader_opts *o)
{
	struct gm_loader_opts copy = *o;

	if (strlen(o->root) >= sizeof(req->root))
		return -ENAMETOOLONG;
	gm_wire_request(req, GM_NODE_ATTACH);
	/* an absolute root, so the agent (another cwd) indexes the same tree */
	if (!realpath(o->root, req->root))
		snprintf(req->root, sizeof(req->root), "%s", o->root);
	carry_all(&copy, req, true);
	if (o->gpu_decode)
		req->flags |= GM_NODE_COEF;
	return 0;
}

void gm_wire_request_opts(struct gm_node_req *req, struct gm_loader_opts *o)
{
	memset(o, 0, sizeof(*o));
	req->root[sizeof(req->root) - 1] = 0;
	o->root = req->root;
	carry_all(o, req, false);
	o->gpu_decode = req->type == GM_NODE_ATTACH && (req->flags & GM_NODE_COEF);
}

bool gm_wire_request_valid(const struct gm_node_req *req, ssize_t n)
{
	return n >= 0 && gm_wire_request_take(NULL, req, (size_t)n, NULL, 0) == 0;
}

int gm_wire_request_take(struct gm_node_req *req, const void *data, size_t n, char *why, size_t wl)
{
	uint32_t head[2]; /* magic, version: where every version of the request has them */
	if (n < sizeof(head)) {
		gm_errf(why, wl, "a job request of %zu bytes", n);
		return -EBADMSG;
	}
	memcpy(head, data, sizeof(head));
	if (head[0] != GM_NODE_MAGIC) {
		gm_errf(why, wl, "a job request without its magic (%zu bytes)", n);
		return -EBADMSG;
	}
	if (head[1] != GM_NODE_VERSION || n != sizeof(*req)) {
		gm_errf(why, wl,
			"another goldminer version: a job request of node protocol version %u in "
			"%zu bytes (this build's: version %d, %zu bytes)",
			head[1], n, GM_NODE_VERSION, sizeof(*req));
		return -EPROTONOSUPPORT;
	}
	if (req) {
		memcpy(req, data, sizeof(*req));
		req->root[sizeof(req->root) - 1] = '\0';
	}
	return 0;
}

/* The fds of a received message: the first into *fd_out (if wanted), the rest closed.
 * One SCM_RIGHTS message may carry several (two fit in the room of one, padded):
 * each is taken, so a peer that sends more cannot leak them into this process. */
static void take_fds(struct msghdr *mh, int *fd_out)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t k = 0; k < n; k++) {
			int got;
			memcpy(&got, CMSG_DATA(c) + k * sizeof(int), sizeof(got));
			if (fd_out && *fd_out < 0)
				*fd_out = got;
			else
				close(got);
		}
	}
}

/* Send req with nfds fds (0: a plain send). */
static ssize_t send_req(int fd, const struct gm_node_req *req, const int *fds, int nfds)
{
	char cbuf[CMSG_SPACE(GM_WIRE_MAX_FDS * sizeof(int))];
	struct iovec iov = {(void *)req, sizeof(*req)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};

	if (nfds > 0) {
		memset(cbuf, 0, sizeof(cbuf));
		mh.msg_control = cbuf;
		mh.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
		memcpy(CMSG_DATA(c), fds, (size_t)nfds * sizeof(int));
	}
	return sendmsg(fd, &mh, MSG_NOSIGNAL);
}

ssize_t gm_wire_recv(int fd, struct gm_node_req *req, int *fds, int *nfds)
{
	char cbuf[CMSG_SPACE(GM_WIRE_MAX_FDS * sizeof(int))];
	struct iovec iov = {req, sizeof(*req)};
	struct msghdr mh = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
	ssize_t n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);

	*nfds = 0;
	if (n < 0)
		return n;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int got;
			memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof(got));
			if (*nfds < GM_WIRE_MAX_FDS)
				fds[(*nfds)++] = got;
			else
				close(got); /* more than a request carries: not kept */
		}
	}
	return n;
}

int gm_wire_call(int fd, const struct gm_node_req *req, struct gm_node_reply *rep, int *fd_out)
{
	return gm_wire_call_fds(fd, req, NULL, 0, rep, fd_out);
}

int gm_wire_call_fds(int fd, const struct gm_node_req *req, const int *fds, int nfds,
		     struct gm_node_reply *rep, int *fd_out)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {rep, sizeof(*rep)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	ssize_t n;
	int flags = MSG_CMSG_CLOEXEC;

	if (fd_out)
		*fd_out = -1;
	if (nfds < 0 || nfds > GM_WIRE_MAX_FDS)
		return -EINVAL;
	do
		n = send_req(fd, req, fds, nfds);
	while (n < 0 && errno == EINTR);
	/* An agent that refused this connection (a limit) replied and hung up before
	 * reading: take the reply it left, which says why, without waiting. */
	if (n != (ssize_t)sizeof(*req))
		flags |= MSG_DONTWAIT;
	mh.msg_control = cbuf;
	mh.msg_controllen = sizeof(cbuf);
	for (int reset = 0;;) {
		n = recvmsg(fd, &mh, flags);
		if (n >= 0 || (errno != EINTR && errno != ECONNRESET) || reset)
			break;
		/* A peer that closes with our request unread resets the connection, and
		 * the kernel reports that before the reply it left: read that next. */
		if (errno == ECONNRESET) {
			reset = 1;
			flags |= MSG_DONTWAIT;
		}
	}
	if (n > 0)
		take_fds(&mh, fd_out);
	if (n <= 0) /* hung up (or reset) without a reply */
		return -EPIPE;
	/* Validate what the other process sent before trusting any of it. An agent
	 * of another version is said apart (its version left in rep) from garbage. */
	if (n != (ssize_t)sizeof(*rep) || rep->magic != GM_NODE_MAGIC ||
	    rep->version != GM_NODE_VERSION) {
		if (fd_out && *fd_out >= 0) {
			close(*fd_out);
			*fd_out = -1;
		}
		return n >= 8 && rep->magic == GM_NODE_MAGIC && rep->version != GM_NODE_VERSION
			   ? -EPROTONOSUPPORT
			   : -EPROTO;
	}
	rep->msg[sizeof(rep->msg) - 1] = 0;
	return 0;
}

static void vreply(int fd, int status, int ring_fd, uint32_t bpe, uint64_t fingerprint,
		   uint32_t flags, const char *fmt, va_list ap)
{
	struct gm_node_reply r;
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {&r, sizeof(r)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};

	memset(&r, 0, sizeof(r));
	r.magic = GM_NODE_MAGIC;
	r.version = GM_NODE_VERSION;
	r.status = status;
	r.batches_per_epoch = bpe;
	r.fingerprint = fingerprint;
	r.flags = flags;
	gm_verrf(r.msg, sizeof(r.msg), fmt, ap);
	if (ring_fd >= 0) {
		memset(cbuf, 0, sizeof(cbuf));
		mh.msg_control = cbuf;
		mh.msg_controllen = sizeof(cbuf);
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &ring_fd, sizeof(int));
	}
	if (sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
		/* the client is gone (its hang-up is handled by the poll loop) or does not
		 * read its replies (full buffer): either way the agent goes on */
	}
}

void gm_wire_reply(int fd, int status, int ring_fd, uint32_t bpe, uint64_t fingerprint,
		   const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vreply(fd, status, ring_fd, bpe, fingerprint, 0, fmt, ap);
	va_end(ap);
}

void gm_wire_reply_attach(int fd, int ring_fd, uint32_t bpe, uint64_t fingerprint, uint32_t flags,
			  const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vreply(fd, 0, ring_fd, bpe, fingerprint, flags, fmt, ap);
	va_end(ap);
}

void gm_wire_reply_flags(int fd, uint32_t flags, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vreply(fd, 0, -1, 0, 0, flags, fmt, ap);
	va_end(ap);
}
