/*
 * spawn.c - the making of a pool's worker processes (pool_impl.h): fork from the
 * coordinator thread, then the C worker loop or exec of the pool's command; the
 * zygote that exec'd workers are forked from once it has loaded (from the
 * trainer's zygote server, python/goldminer/_zserver.py, when there is one), the
 * adoption window that makes a zygote's worker the trainer's child, and the
 * process groups that end what a worker leaves behind. The coordinator (pool.c)
 * decides when; this file only makes and ends processes.
 *
 * Workers are forked from the coordinator thread so that PR_SET_PDEATHSIG (tied
 * to the forking thread) kills them if the coordinator's process dies. A worker
 * inherits the index and the spec; it keeps only its own ring's fd and maps it
 * afresh (rings are MADV_DONTFORK), so no worker pins another job's ring, socket
 * or pidfd.
 */
#include "pool_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "goldminer/coef.h"
#include "goldminer/dataset.h"
#include "goldminer/elastic.h"
#include "goldminer/host.h"
#include "goldminer/limits.h"
#include "goldminer/ring.h"
#include "goldminer/util.h"

/* exec argv with GM_WORKER_ID=id in its environment (id < 0: none, and none
 * inherited). In the child of fork(): no allocation, the array is on the stack. */
static void exec_with_id(char *const *argv, int id)
{
	static const char var[] = "GM_WORKER_ID=";
	char val[sizeof(var) + 12], *digits = val + sizeof(var) + 11;
	size_t n = 0, k = 0;

	while (n < 4096 && environ[n])
		n++;
	char *envp[n + 2];
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], var, sizeof(var) - 1))
			envp[k++] = environ[i];
	if (id >= 0) { /* the digits backwards from the end, then the name before them */
		*digits = '\0';
		do
			*--digits = (char)('0' + id % 10);
		while ((id /= 10) > 0);
		digits -= sizeof(var) - 1;
		memcpy(digits, var, sizeof(var) - 1);
		envp[k++] = digits;
	}
	envp[k] = NULL;
	execvpe(argv[0], argv, envp);
	_exit(127); /* as a shell says "command not found" */
}

/* In the child of fork(): the ring's memfd as fd 3 and nothing else beyond stdio,
 * then the C worker loop, or exec of c.exec_argv (only async-signal-safe calls
 * before exec: the coordinator's process has other threads). */
static void child(struct gm_pool *p, pid_t parent, char *const *argv, int sock, int ready, int id)
{
	/* Die with the coordinator thread (it survives exec); Ctrl-C is the consumer's. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(0);
	/* its own process group, killed when it ends (see the top of this file); a
	 * terminal's Ctrl-C and Ctrl-Z are the consumer's, as SIGINT below is */
	(void)setpgid(0, 0);
	signal(SIGINT, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	/* Every signal; a C worker's SIGUSR1 (retire) stays pending until
	 * gm_worker_main has its handler: a worker asked to retire as it starts
	 * retires, rather than dying of the default action (a death). An exec'd
	 * worker gets an empty mask (exec keeps the mask). */
	sigset_t mask;
	sigemptyset(&mask);
	if (!argv)
		sigaddset(&mask, SIGUSR1);
	pthread_sigmask(SIG_SETMASK, &mask, NULL);
	/* Keep stdio and the ring only: no other job's ring, socket or pidfd
	 * stays alive because a worker inherited it. Rings are MADV_DONTFORK,
	 * so the worker maps its own ring afresh from the fd (dup2 clears
	 * FD_CLOEXEC, or the fcntl below does: an exec'd worker finds it as fd 3). */
	/* first out of the way of 3, 4 and 5, then into place */
	int rfd = ready >= 0 ? fcntl(ready, F_DUPFD, 10) : -1;
	int zfd = sock >= 0 ? fcntl(sock, F_DUPFD, 10) : -1;
	int xfd = argv && p->c.exec_fd > 2 ? fcntl(p->c.exec_fd, F_DUPFD, 10) : -1;
	if ((ready >= 0 && rfd < 0) || (sock >= 0 && zfd < 0) ||
	    (argv && p->c.exec_fd > 2 && xfd < 0) || dup2(gm_ring_fd(p->ring), 3) < 0)
		_exit(1);
	/* the start watch's pipe (a C worker's), or a zygote's socket, as fd 4 */
	if ((rfd >= 0 && dup2(rfd, 4) < 0) || (zfd >= 0 && dup2(zfd, 4) < 0))
		_exit(1);
	/* dup2 onto itself (the ring was fd 3) keeps the flag: clear it */
	if (argv && fcntl(3, F_SETFD, 0) < 0)
		_exit(1);
	if (zfd >= 0 && fcntl(4, F_SETFD, 0) < 0)
		_exit(1);
	/* the owner's exec_fd as fd 5 */
	if (xfd >= 0 && dup2(xfd, 5) < 0)
		_exit(1);
	if (xfd >= 0 && zfd < 0 && rfd < 0)
		close(4); /* nothing as fd 4 but a zygote's socket */
	syscall(SYS_close_range, xfd >= 0 ? 6 : zfd >= 0 || rfd >= 0 ? 5 : 4, ~0u, 0);
	if (p->c.nice)
		(void)setpriority(PRIO_PROCESS, 0, p->c.nice);
	if (argv)
		exec_with_id(argv, id);
	struct gm_ring *mine;
	if (gm_ring_attach(&mine, 3) < 0)
		_exit(1);
	struct gm_worker_cfg c = p->c.w;
	c.ring = mine;
	c.ready_fd = rfd >= 0 ? 4 : 0;
	_exit(gm_worker_main(&c) ? 1 : 0);
}

/* The adoption window (see "the zygote"): this process is a child subreaper only
 * while a zygote's fork is in flight in one of its pools, so the orphans of its
 * other descendants (a node agent it started and that was killed: that agent's
 * workers) go to init as before, not to us, where no one would reap them. A
 * subreaper flag that someone else set (it was on when no window was open) is
 * left on. adopt_n counts the windows open in this process (several pools). */
static pthread_mutex_t adopt_mu = PTHREAD_MUTEX_INITIALIZER;
static int adopt_n;
static bool adopt_theirs;

static int adopt_begin(void)
{
	int rc = 0, on = 0;

	pthread_mutex_lock(&adopt_mu);
	if (adopt_n == 0) {
		adopt_theirs = prctl(PR_GET_CHILD_SUBREAPER, &on) == 0 && on;
		if (!adopt_theirs && prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
			rc = -errno;
	}
	if (!rc)
		adopt_n++;
	pthread_mutex_unlock(&adopt_mu);
	return rc;
}

static void adopt_end(void)
{
	pthread_mutex_lock(&adopt_mu);
	if (--adopt_n == 0 && !adopt_theirs)
		(void)prctl(PR_SET_CHILD_SUBREAPER, 0);
	pthread_mutex_unlock(&adopt_mu);
}

/* A worker forked by the zygote: our child once the zygote's own child that
 * forked it has exited, which the zygote waits for before it answers; the window
 * is open until then. Its pid, or -errno. */
static pid_t from_zygote(struct gm_pool *p, int id)
{
	struct pollfd pf = {.fd = p->zsock, .events = POLLIN};
	int32_t pid = -EIO;
	char req[5] = {'F'};
	int rc = adopt_begin();

	if (rc)
		return rc;
	memcpy(req + 1, &(int32_t){id}, sizeof(int32_t)); /* the worker's id, host order */
	/* a fork of a loaded interpreter: milliseconds; 5 s means it is stuck (its
	 * worker, orphaned to init after the window, ends itself: _worker.py) */
	if (send(p->zsock, req, sizeof(req), MSG_NOSIGNAL) != (ssize_t)sizeof(req) ||
	    poll(&pf, 1, 5000) != 1 || recv(p->zsock, &pid, sizeof(pid), 0) != sizeof(pid))
		pid = -EIO;
	adopt_end();
	return pid > 0 ? pid : -EIO;
}

/* The lowest worker id no live worker holds (a stalled one, killed, holds none):
 * ids stay 0..workers-1, as torch's workers' do, and a replacement takes the id
 * of the worker it replaces. */
static int worker_id(const struct gm_pool *p)
{
	for (int id = 0;; id++) {
		int i = 0;
		while (i < p->nwk && (p->wk[i].stalled || p->wk[i].id != id))
			i++;
		if (i == p->nwk)
			return id;
	}
}

int gm_pool_spawn(struct gm_pool *p)
{
	pid_t parent = getpid();
	pid_t pid = -1;
	int pidfd, id = worker_id(p);

	if (p->nwk >= GM_MAX_WORKERS)
		return -EAGAIN;
	int ready[2] = {-1, -1}; /* the start watch (C workers): a byte once made */
	if (p->zready)
		pid = from_zygote(p, id);
	if (pid <= 0) { /* no zygote (yet), or one that failed: a fresh process */
		if (!p->c.exec_argv && pipe2(ready, O_CLOEXEC | O_NONBLOCK))
			return -errno;
		pid = fork();
		if (pid < 0) {
			int err = -errno;
			if (ready[0] >= 0) {
				close(ready[0]);
				close(ready[1]);
			}
			return err;
		}
		if (pid == 0)
			child(p, parent, (char *const *)p->c.exec_argv, -1, ready[1], id);
		if (ready[1] >= 0)
			close(ready[1]);
	}
	/* as child() does (and _worker.py for the zygote's): a group of its own
	 * before it runs the user's code, whichever of us is first */
	(void)setpgid(pid, pid);
	/* best effort: unconfined, it only shares the CPU quota less fairly */
	(void)gm_host_pin(pid, p->cpu);
	pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0) {
		int err = -errno;
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		if (ready[0] >= 0)
			close(ready[0]);
		return err;
	}
	/* the whole entry: the one reaped from here last may have been stalled */
	p->wk[p->nwk] = (struct wk){
	    .pid = pid, .pidfd = pidfd, .ready_fd = ready[0], .born = gm_now_ns(), .id = id};
	p->nwk++;
	if (id >= 0 && id < GM_MAX_WORKERS)
		atomic_store(&p->pid_of[id], (int32_t)pid);
	atomic_fetch_add(&p->h->p_alive, 1);
	return 0;
}

/* pid exited (or must), unreaped: SIGKILL its process group, what it forked and
 * left (its pid, held until the waitpid, names no other group). */
void gm_pool_kill_group(pid_t pid)
{
	(void)kill(-pid, SIGKILL);
}

/* After pid is reaped: reap those of its group that came to us (orphaned while
 * this process was a subreaper, the adoption window) and are dead by now. */
void gm_pool_reap_group(pid_t pid)
{
	siginfo_t si;

	for (int k = 0; k < 64; k++) {
		memset(&si, 0, sizeof(si));
		if (waitid(P_PGID, (id_t)pid, &si, WEXITED | WNOHANG) < 0 || !si.si_pid)
			break;
	}
}

/* ---- the zygote ------------------------------------------------------------------
 *
 * An exec'd worker (a Python interpreter that imports torch and unpickles the
 * dataset) takes a second or more to start; killed more often than that, no worker
 * would ever finish a batch. With c.zygote_argv the coordinator starts one more
 * process, the zygote: it loads what a worker loads, says "R" on its socket (fd 4),
 * and then forks a worker for each "F" it reads, answering with the worker's pid.
 * It forks twice (its child forks the worker and exits), and this process is a
 * child subreaper (PR_SET_CHILD_SUBREAPER) while it waits for the answer (the
 * adoption window, from_zygote), so the worker, orphaned, becomes our child:
 * reaped, watched and attributed like any other.
 * Workers wait for the zygote to be ready, the first ones too: forked from it,
 * they share the pages of what it loaded (an interpreter, torch, the dataset)
 * instead of each holding its own copy, and they start as soon as fresh
 * processes would (those would load the same things); a zygote not ready within
 * ZYGOTE_WAIT_MS is waited for no longer. Whenever the zygote is
 * gone, workers start as fresh processes; a zygote that dies is restarted, up to
 * 3 that die before they are ready (then fresh processes for good). The zygote
 * is not a worker: it holds no lease and takes no task.
 * With c.zygote_server the zygote is not exec'd but made by that server (the
 * trainer's fork, python/goldminer/_zserver.py) with torch loaded already
 * (zygote_from_server); a server that fails once is not asked again by this pool.
 */

/* A zygote made by the process's zygote server (c.zygote_server: pool.h): the
 * ring, the zygote's end of its socket (zs) and the spec go to the server with
 * "Z"; the server forks the zygote twice, so that it is orphaned to us while the
 * adoption window is open, and says "P" and its pid on the zygote's socket once
 * its middle process has exited. The zygote may say "R" before that (*ready).
 * Its pid, our child (checked: waitid finds it), or -errno. */
static pid_t zygote_from_server(struct gm_pool *p, int zs, bool *ready)
{
	int fds[3] = {gm_ring_fd(p->ring), zs, p->c.exec_fd};
	union {
		char buf[CMSG_SPACE(sizeof(fds))];
		struct cmsghdr align;
	} u;
	struct iovec iov = {.iov_base = "Z", .iov_len = 1};
	struct msghdr m = {.msg_iov = &iov,
			   .msg_iovlen = 1,
			   .msg_control = u.buf,
			   .msg_controllen = sizeof(u.buf)};
	struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
	uint64_t end = gm_now_ns() + 5000 * 1000000ull; /* a fork: milliseconds */
	pid_t pid = -EIO;
	char msg[8];

	memset(u.buf, 0, sizeof(u.buf));
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(fds));
	memcpy(CMSG_DATA(cm), fds, sizeof(fds));
	int rc = adopt_begin();
	if (rc)
		return rc;
	if (sendmsg(p->c.zygote_server, &m, MSG_NOSIGNAL | MSG_DONTWAIT) != 1)
		end = 0; /* the server is gone (or stuck with a full socket) */
	for (bool answered = false; !answered && gm_now_ns() < end;) {
		struct pollfd pf = {.fd = p->zsock, .events = POLLIN};
		int ms = (int)((end - gm_now_ns()) / 1000000) + 1;
		if (poll(&pf, 1, ms) != 1)
			continue;
		ssize_t n = recv(p->zsock, msg, sizeof(msg), MSG_DONTWAIT);
		if (n == 1 && msg[0] == 'R') {
			*ready = true;
		} else if (n == 5 && msg[0] == 'P') {
			int32_t got;
			memcpy(&got, msg + 1, sizeof(got));
			pid = got > 0 ? (pid_t)got : -EIO; /* -1: the server's fork failed */
			answered = true;
		} else if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
			break; /* the zygote's socket closed: the server failed it */
		}
	}
	/* orphaned to us when the answer came; checked (a window closed too early
	 * would leave it to init, which the zygote sees: it ends itself) */
	siginfo_t si;
	while (pid > 0) {
		memset(&si, 0, sizeof(si));
		if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0)
			break;
		if (errno != ECHILD || gm_now_ns() >= end)
			pid = -EIO;
		else
			usleep(1000);
	}
	adopt_end();
	return pid;
}

/* How long workers wait for a zygote that is loading before they start as fresh
 * processes (which load the same things: only a zygote stuck far longer than a
 * worker's own start is given up on). */
#define ZYGOTE_WAIT_MS 30000

void gm_pool_zygote_start(struct gm_pool *p)
{
	pid_t parent = getpid();
	int sv[2];

	if (!p->c.zygote_argv || p->zpid || p->zfails >= 3 ||
	    socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return;
	pid_t pid = -1;
	bool ready = false;
	p->zsock = sv[0];
	if (p->c.zygote_server > 2 && p->c.exec_fd > 2 && !p->zserver_failed) {
		pid = zygote_from_server(p, sv[1], &ready);
		if (pid > 0) {
			(void)setpgid(pid, pid); /* as child() does; the zygote does too */
		} else { /* exec'd from now; a fresh socket (the failed one may hold
			  * the server's words) */
			p->zserver_failed = true;
			close(sv[0]);
			close(sv[1]);
			p->zsock = -1;
			if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
				return;
			p->zsock = sv[0];
		}
	}
	if (pid <= 0)
		pid = fork();
	if (pid == 0)
		child(p, parent, (char *const *)p->c.zygote_argv, sv[1], -1, -1);
	close(sv[1]);
	if (pid > 0) /* what it forks starts there (each worker is pinned again) */
		(void)gm_host_pin(pid, p->cpu);
	int pidfd = pid > 0 ? (int)syscall(SYS_pidfd_open, pid, 0) : -1;
	if (pidfd < 0) {
		if (pid > 0) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
		}
		close(sv[0]);
		p->zsock = -1;
		p->zfails++;
		return;
	}
	p->zpid = pid;
	p->zpidfd = pidfd;
	p->zready = ready;
	p->zwait = gm_now_ns() + ZYGOTE_WAIT_MS * 1000000ull;
}

/* The zygote exited (or must): reap it, forget it. */
void gm_pool_zygote_end(struct gm_pool *p, bool kill_it)
{
	if (!p->zpid)
		return;
	if (kill_it)
		kill(p->zpid, SIGKILL);
	gm_pool_kill_group(p->zpid);
	waitpid(p->zpid, NULL, 0);
	gm_pool_reap_group(p->zpid);
	close(p->zpidfd);
	close(p->zsock);
	p->zfails += !p->zready;
	p->zpid = 0;
	p->zready = false;
}

/* What the zygote's fds said at this poll (pz: its pidfd, then its socket). */
void gm_pool_zygote_look(struct gm_pool *p, const struct pollfd *pz)
{
	char c;

	if (!p->zpid)
		return;
	if (pz[0].revents) {
		gm_pool_zygote_end(p, false);
		gm_pool_zygote_start(p);
		return;
	}
	if ((pz[1].revents & POLLIN) && recv(p->zsock, &c, 1, MSG_DONTWAIT) == 1 && c == 'R')
		p->zready = true;
	else if (pz[1].revents & (POLLHUP | POLLERR))
		gm_pool_zygote_end(p, true);
}
