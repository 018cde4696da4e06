/*
 * node.c - the node agent daemon (see node.h) and `goldminer node`.
 *
 * One thread, one poll loop: the listening socket, one connection per job, and a
 * 250 ms tick that re-divides the CPU budget. Each job is a gm_loader in serve
 * mode (its own coordinator thread forks, watches and replaces its workers); the
 * agent only decides how many workers each job gets. The division is the shared
 * policy (core/policy.c) with, per job, the GPU-bound rate replaced by the
 * consumer's measured demand D (+10% headroom), d = one worker's measured rate and
 * weight 1/D, so one worker is worth "the fraction of this trainer's demand it
 * covers": the budget goes first to the jobs that are furthest from being fed.
 * A job not yet measured keeps what it has (at least one worker).
 *
 * It does not authenticate beyond uid (SO_PEERCRED), and it does not persist
 * anything: a restarted agent starts with no jobs.
 */
#include "goldminer/node.h"

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "goldminer/cli.h"
#include "goldminer/loader.h"
#include "goldminer/policy.h"

#define MAX_JOBS 64
#define TICK_MS 250
#define HEADROOM 1.10

struct job {
	int fd;			/* connection; -1 = free entry */
	struct gm_loader *l;	/* NULL until attached */
	pid_t pid;		/* the consumer's pid (SO_PEERCRED) */
	uint32_t cap;		/* most workers (0: budget) */
	uint32_t fixed;		/* pool size fixed by SCALE (0: policy) */
	uint32_t workers;	/* what the agent last gave it */
	double demand, rate;	/* last measurement (0 = none yet) */
	char root[4096];
};

struct agent {
	int lfd;
	uint32_t budget;
	int verbose;
	uid_t uid;
	struct job jobs[MAX_JOBS];
};

const char *gm_node_default_socket(void)
{
	static char path[108];
	const char *rt = getenv("XDG_RUNTIME_DIR");
	if (rt && *rt && strlen(rt) + sizeof("/goldminer.sock") <= sizeof(path))
		snprintf(path, sizeof(path), "%s/goldminer.sock", rt);
	else
		snprintf(path, sizeof(path), "/tmp/goldminer-%u.sock", (unsigned)getuid());
	return path;
}

static void logf_(struct agent *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void logf_(struct agent *a, const char *fmt, ...)
{
	if (!a->verbose)
		return;
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "goldminer node: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static void reply(int fd, int status, int ring_fd, uint32_t bpe, uint64_t fp, const char *fmt, ...)
	__attribute__((format(printf, 6, 7)));
static void reply(int fd, int status, int ring_fd, uint32_t bpe, uint64_t fp, const char *fmt, ...)
{
	struct gm_node_reply r;
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {&r, sizeof(r)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	va_list ap;

	memset(&r, 0, sizeof(r));
	r.magic = GM_NODE_MAGIC;
	r.version = GM_NODE_VERSION;
	r.status = status;
	r.batches_per_epoch = bpe;
	r.fingerprint = fp;
	va_start(ap, fmt);
	vsnprintf(r.msg, sizeof(r.msg), fmt, ap);
	va_end(ap);
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
	if (sendmsg(fd, &mh, MSG_NOSIGNAL) < 0) {
		/* the client is gone: its hang-up is handled by the poll loop */
	}
}

static void detach(struct agent *a, struct job *j, const char *why)
{
	if (j->l) {
		logf_(a, "job pid %d (%s) detached: %s; its workers stop", (int)j->pid, j->root, why);
		gm_loader_close(j->l); /* stops workers, unmaps; the memfd dies with the client's map */
	}
	close(j->fd);
	memset(j, 0, sizeof(*j));
	j->fd = -1;
}

static uint32_t used_workers(const struct agent *a)
{
	uint32_t n = 0;
	for (int i = 0; i < MAX_JOBS; i++)
		if (a->jobs[i].l)
			n += a->jobs[i].workers;
	return n;
}

static void attach(struct agent *a, struct job *j, struct gm_node_req *req)
{
	struct gm_loader_opts o;
	char err[512];

	if (j->l) {
		reply(j->fd, -EISCONN, -1, 0, 0, "this connection already has a job");
		return;
	}
	req->root[sizeof(req->root) - 1] = 0;
	gm_loader_opts_default(&o);
	o.root = req->root;
	o.aug = req->aug;
	o.seed = req->seed;
	o.start_batch = req->start_batch;
	o.batch_size = req->batch_size;
	o.epoch = req->epoch;
	o.epochs = req->epochs;
	/* Enough slots for every worker the job may get (two in flight each). */
	uint32_t most = req->workers > 0 && (uint32_t)req->workers < a->budget ? (uint32_t)req->workers
										: a->budget;
	o.slots = req->slots;
	if (!o.slots) {
		o.slots = 4;
		while (o.slots < 2 * most && o.slots < 64)
			o.slots *= 2;
	}
	o.on_error = req->on_error ? GM_ON_ERROR_FAIL : GM_ON_ERROR_SKIP;
	o.shuffle = req->shuffle != 0;
	o.drop_last = req->drop_last != 0;
	o.chaos_kill_ms = req->chaos_kill_ms;
	o.no_pin = true; /* the consumer pins its own mapping */
	int rc = gm_loader_serve(&j->l, &o, err, sizeof(err));
	if (rc) {
		reply(j->fd, rc, -1, 0, 0, "%s", err);
		j->l = NULL;
		return;
	}
	j->cap = req->workers > 0 ? (uint32_t)req->workers : 0;
	/* Start with the idle part of the budget (at least one worker), so a job does
	 * not ramp up from one worker; the next rebalance corrects it by measurement. */
	uint32_t used = used_workers(a), idle = used < a->budget ? a->budget - used : 0;
	j->workers = idle ? idle : 1;
	if (j->cap && j->workers > j->cap)
		j->workers = j->cap;
	gm_loader_set_target(j->l, (int)j->workers);
	snprintf(j->root, sizeof(j->root), "%s", req->root);
	struct gm_loader_stats st;
	gm_loader_stats(j->l, &st);
	reply(j->fd, 0, gm_loader_ring_fd(j->l), st.batches_per_epoch, gm_loader_fingerprint(j->l),
	      "ok");
	logf_(a, "job pid %d attached: %s, batch %u; %u of %u workers in use", (int)j->pid,
	      j->root, st.batch_size, used_workers(a), a->budget);
}

static void status_json(struct agent *a, char *buf, size_t len)
{
	size_t off = 0;
	int n = 0;
	for (int i = 0; i < MAX_JOBS; i++)
		n += a->jobs[i].l != NULL;
	off += (size_t)snprintf(buf + off, len - off,
				"{\"budget\": %u, \"jobs\": %d, \"workers\": %u, \"job\": [", a->budget,
				n, used_workers(a));
	int k = 0;
	for (int i = 0; i < MAX_JOBS && off < len; i++) {
		struct job *j = &a->jobs[i];
		if (!j->l)
			continue;
		struct gm_loader_stats st;
		gm_loader_stats(j->l, &st);
		off += (size_t)snprintf(buf + off, len - off,
					"%s{\"pid\": %d, \"workers\": %u, \"alive\": %u, "
					"\"demand_img_per_s\": %.1f, \"worker_img_per_s\": %.1f}",
					k++ ? ", " : "", (int)j->pid, j->workers, st.workers,
					j->demand, j->rate);
	}
	if (off < len)
		snprintf(buf + off, len - off, "]}");
}

static void on_request(struct agent *a, struct job *j)
{
	struct gm_node_req req;
	ssize_t n = recv(j->fd, &req, sizeof(req), 0);
	if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
		detach(a, j, n == 0 ? "connection closed" : strerror(errno));
		return;
	}
	if (n < 0)
		return;
	/* Validate everything a client sent before using it. */
	if (n != (ssize_t)sizeof(req) || req.magic != GM_NODE_MAGIC ||
	    req.version != GM_NODE_VERSION) {
		reply(j->fd, -EPROTO, -1, 0, 0,
		      "malformed request (%zd bytes; expected a goldminer %d request)", n,
		      GM_NODE_VERSION);
		detach(a, j, "malformed request");
		return;
	}
	switch (req.type) {
	case GM_NODE_ATTACH:
		attach(a, j, &req);
		break;
	case GM_NODE_SCALE: {
		struct job *t = j;
		if (req.pid) {
			t = NULL;
			for (int i = 0; i < MAX_JOBS; i++)
				if (a->jobs[i].l && a->jobs[i].pid == req.pid)
					t = &a->jobs[i];
			if (!t) {
				reply(j->fd, -ESRCH, -1, 0, 0, "no job with consumer pid %d", req.pid);
				break;
			}
		}
		if (!t->l || req.workers < 0 || (uint32_t)req.workers > a->budget) {
			reply(j->fd, -EINVAL, -1, 0, 0, "scale needs an attached job and 0..%u workers",
			      a->budget);
			break;
		}
		t->fixed = (uint32_t)req.workers;
		logf_(a, "job pid %d: pool %s %d by request", (int)t->pid,
		      req.workers ? "fixed at" : "back to the policy, was", req.workers);
		reply(j->fd, 0, -1, 0, 0, "ok");
		break;
	}
	case GM_NODE_STATUS: {
		char buf[2048];
		status_json(a, buf, sizeof(buf));
		reply(j->fd, 0, -1, 0, 0, "%s", buf);
		break;
	}
	default:
		reply(j->fd, -EINVAL, -1, 0, 0, "unknown request type %u", req.type);
	}
}

static void on_accept(struct agent *a)
{
	int fd = accept4(a->lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return;
	struct ucred cr;
	socklen_t cl = sizeof(cr);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0) {
		close(fd);
		return;
	}
	if (cr.uid != a->uid && cr.uid != 0) {
		logf_(a, "refused pid %d: uid %u is not the agent's uid %u", (int)cr.pid,
		      (unsigned)cr.uid, (unsigned)a->uid);
		reply(fd, -EACCES, -1, 0, 0,
		      "refused: uid %u may not use this agent (it serves uid %u and root)",
		      (unsigned)cr.uid, (unsigned)a->uid);
		close(fd);
		return;
	}
	for (int i = 0; i < MAX_JOBS; i++) {
		if (a->jobs[i].fd < 0) {
			a->jobs[i].fd = fd;
			a->jobs[i].pid = cr.pid;
			return;
		}
	}
	reply(fd, -EBUSY, -1, 0, 0, "the agent already serves %d connections", MAX_JOBS);
	close(fd);
}

/* Re-divide the budget among the attached jobs (see the file comment). */
static void rebalance(struct agent *a)
{
	struct gm_policy_job pj[MAX_JOBS];
	uint32_t w[MAX_JOBS];
	int idx[MAX_JOBS], n = 0;
	uint64_t budget = a->budget;

	for (int i = 0; i < MAX_JOBS; i++) {
		struct job *j = &a->jobs[i];
		if (!j->l)
			continue;
		double d, r;
		if (gm_loader_measure(j->l, &d, &r)) {
			j->demand = d;
			j->rate = r;
		}
		uint32_t cap = j->cap && j->cap < a->budget ? j->cap : a->budget;
		pj[n].tag = (uint64_t)i;
		if (j->fixed) {
			pj[n].min_workers = pj[n].max_workers = j->fixed;
			pj[n].gpu_rate = 1;
			pj[n].worker_rate = 1;
			pj[n].weight = 1;
		} else if (!j->rate) {
			/* Not measured yet: it may keep what it has, but only from what the
			 * measured jobs leave (tiny weight), and never less than one. */
			pj[n].min_workers = 1;
			pj[n].max_workers = j->workers > 1 ? (j->workers < cap ? j->workers : cap) : 1;
			pj[n].gpu_rate = 1e9;
			pj[n].worker_rate = 1;
			pj[n].weight = 1e-12;
		} else {
			double demand = j->demand > 1e9 ? 1e9 : j->demand;
			pj[n].gpu_rate = demand * HEADROOM;
			pj[n].worker_rate = j->rate;
			pj[n].weight = 1.0 / (demand > 1 ? demand : 1);
			pj[n].min_workers = 1;
			pj[n].max_workers = cap;
		}
		idx[n++] = i;
	}
	if (!n)
		return;
	gm_policy_allocate(pj, (size_t)n, budget, w); /* -ENOSPC still fills the minimums */
	for (int k = 0; k < n; k++) {
		struct job *j = &a->jobs[idx[k]];
		uint32_t want = w[k] ? w[k] : 1;
		if (want != j->workers) {
			if (j->rate)
				logf_(a, "job pid %d: %u -> %u workers (demand %.0f img/s, one worker "
					 "%.0f img/s)",
				      (int)j->pid, j->workers, want, j->demand, j->rate);
			else
				logf_(a, "job pid %d: %u -> %u workers (not measured yet)", (int)j->pid,
				      j->workers, want);
			j->workers = want;
		}
		gm_loader_set_target(j->l, (int)want);
	}
}

static int listen_on(const char *path, char *err, size_t errlen)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(sa.sun_path)) {
		snprintf(err, errlen, "socket path too long: %s", path);
		return -ENAMETOOLONG;
	}
	strcpy(sa.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -errno;
	}
	/* A live agent answers; a dead one left a stale file we may replace. */
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
		close(fd);
		snprintf(err, errlen, "%s: another goldminer node agent is running there", path);
		return -EADDRINUSE;
	}
	close(fd);
	struct stat st;
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			snprintf(err, errlen, "%s exists and is not a socket; not touching it", path);
			return -EEXIST;
		}
		unlink(path);
	}
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -errno;
	}
	mode_t old = umask(0177); /* the socket file is created 0600 */
	int rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (rc < 0 || listen(fd, 64) < 0) {
		int e = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		close(fd);
		return e;
	}
	return fd;
}

int gm_node_run(const struct gm_node_opts *o, volatile sig_atomic_t *stop, char *err,
		size_t errlen)
{
	struct agent *a;
	const char *path = o->socket_path ? o->socket_path : gm_node_default_socket();
	struct pollfd pfd[MAX_JOBS + 1];
	int map[MAX_JOBS + 1];

	a = calloc(1, sizeof(*a));
	if (!a) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (int i = 0; i < MAX_JOBS; i++)
		a->jobs[i].fd = -1;
	a->uid = geteuid();
	a->verbose = o->verbose;
	a->budget = o->cpus;
	if (!a->budget) {
		long c = sysconf(_SC_NPROCESSORS_ONLN);
		a->budget = c > 0 ? (uint32_t)c : 1;
	}
	a->lfd = listen_on(path, err, errlen);
	if (a->lfd < 0) {
		int e = a->lfd;
		free(a);
		return e;
	}
	logf_(a, "listening on %s (mode 0600), budget %u workers", path, a->budget);
	struct timespec last;
	clock_gettime(CLOCK_MONOTONIC, &last);
	while (!*stop) {
		int n = 0;
		pfd[n].fd = a->lfd;
		pfd[n].events = POLLIN;
		map[n++] = -1;
		for (int i = 0; i < MAX_JOBS; i++) {
			if (a->jobs[i].fd < 0)
				continue;
			pfd[n].fd = a->jobs[i].fd;
			pfd[n].events = POLLIN;
			map[n++] = i;
		}
		int r = poll(pfd, (nfds_t)n, TICK_MS);
		if (r > 0) {
			for (int k = 1; k < n; k++)
				if (pfd[k].revents & (POLLIN | POLLHUP | POLLERR))
					on_request(a, &a->jobs[map[k]]);
			if (pfd[0].revents & POLLIN)
				on_accept(a);
		}
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if ((now.tv_sec - last.tv_sec) * 1000 + (now.tv_nsec - last.tv_nsec) / 1000000 >=
		    TICK_MS) {
			rebalance(a);
			last = now;
		}
	}
	for (int i = 0; i < MAX_JOBS; i++)
		if (a->jobs[i].fd >= 0)
			detach(a, &a->jobs[i], "agent stopping");
	close(a->lfd);
	unlink(path);
	logf_(a, "stopped");
	free(a);
	return 0;
}

static int call(const char *socket_path, struct gm_node_req *req, char *out, size_t outlen)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct gm_node_reply rep;
	const char *path = socket_path ? socket_path : gm_node_default_socket();
	if (strlen(path) >= sizeof(sa.sun_path)) {
		snprintf(out, outlen, "socket path too long: %s", path);
		return -ENAMETOOLONG;
	}
	strcpy(sa.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = -errno;
		snprintf(out, outlen, "cannot reach the node agent at %s: %s", path, strerror(-e));
		close(fd);
		return e;
	}
	req->magic = GM_NODE_MAGIC;
	req->version = GM_NODE_VERSION;
	ssize_t n = -1;
	if (send(fd, req, sizeof(*req), MSG_NOSIGNAL) == (ssize_t)sizeof(*req))
		n = recv(fd, &rep, sizeof(rep), 0);
	close(fd);
	if (n != (ssize_t)sizeof(rep) || rep.magic != GM_NODE_MAGIC) {
		snprintf(out, outlen, "no valid reply from the node agent at %s", path);
		return -EPROTO;
	}
	rep.msg[sizeof(rep.msg) - 1] = 0;
	snprintf(out, outlen, "%s", rep.msg);
	return rep.status;
}

int gm_node_status(const char *socket_path, char *out, size_t outlen)
{
	struct gm_node_req req;
	memset(&req, 0, sizeof(req));
	req.type = GM_NODE_STATUS;
	return call(socket_path, &req, out, outlen);
}

int gm_node_scale(const char *socket_path, int pid, int workers, char *out, size_t outlen)
{
	struct gm_node_req req;
	memset(&req, 0, sizeof(req));
	req.type = GM_NODE_SCALE;
	req.pid = pid;
	req.workers = workers;
	return call(socket_path, &req, out, outlen);
}

static volatile sig_atomic_t node_stop;

static void on_term(int sig)
{
	(void)sig;
	node_stop = 1;
}

int gm_cli_node(int argc, char **argv)
{
	static const struct option lopts[] = {{"cpus", required_argument, NULL, 'c'},
					      {"socket", required_argument, NULL, 's'},
					      {"status", no_argument, NULL, 'S'},
					      {"scale", required_argument, NULL, 'k'},
					      {"quiet", no_argument, NULL, 'q'},
					      {"help", no_argument, NULL, 'h'},
					      {NULL, 0, NULL, 0}};
	struct gm_node_opts o = {.socket_path = NULL, .cpus = 0, .verbose = 1};
	bool status = false;
	int c, scale_pid = 0, scale_n = -1;
	char err[2048];

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", lopts, NULL)) != -1) {
		switch (c) {
		case 'c': {
			char *end;
			long v = strtol(optarg, &end, 10);
			if (*end || v < 1 || v > 256) {
				fprintf(stderr, "goldminer node: --cpus is 1..256, not '%s'\n", optarg);
				return 2;
			}
			o.cpus = (uint32_t)v;
			break;
		}
		case 's':
			o.socket_path = optarg;
			break;
		case 'S':
			status = true;
			break;
		case 'k':
			if (sscanf(optarg, "%d=%d", &scale_pid, &scale_n) != 2 || scale_pid <= 0 ||
			    scale_n < 0) {
				fprintf(stderr, "goldminer node: --scale takes PID=N (N = 0: the policy "
						"decides again), not '%s'\n",
					optarg);
				return 2;
			}
			break;
		case 'q':
			o.verbose = 0;
			break;
		case 'h':
			printf("usage: goldminer node [--cpus N] [--socket PATH] [--quiet]\n"
			       "       goldminer node --status [--socket PATH]\n"
			       "       goldminer node --scale PID=N [--socket PATH]\n"
			       "Run the node agent: loaders started with --node PATH (C: opts.node)\n"
			       "attach to it and share its N CPUs (default: online CPUs).\n"
			       "Default socket: %s\n",
			       gm_node_default_socket());
			return 0;
		default:
			return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "goldminer node: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (scale_n >= 0) {
		int rc = gm_node_scale(o.socket_path, scale_pid, scale_n, err, sizeof(err));
		if (rc) {
			fprintf(stderr, "goldminer node: %s\n", err);
			return 1;
		}
		return 0;
	}
	if (status) {
		int rc = gm_node_status(o.socket_path, err, sizeof(err));
		if (rc) {
			fprintf(stderr, "goldminer node: %s\n", err);
			return 1;
		}
		printf("%s\n", err);
		return 0;
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_term;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	int rc = gm_node_run(&o, &node_stop, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "goldminer node: %s\n", err);
		return 1;
	}
	return 0;
}
