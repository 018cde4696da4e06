/*
 * test_node.c - the node agent: loaders in other processes attach over the Unix
 * socket and get the same bytes as a local loader; several jobs share the budget;
 * a job that detaches or dies frees its workers; other uids are refused, both
 * ways (an agent of another uid is refused by the client), and an agent run as
 * nobody refuses root's job of its own command and a third uid's ATTACH and job,
 * starting nothing; the default socket's directory is checked; idle connections
 * cannot lock clients out; a refusal for a limit is said in words; the memory
 * budget refuses a job without disturbing the others; a job that attaches while
 * another holds the whole budget starts within it (the worker processes never
 * outnumber the budget, polled every 2 ms), and `bench --node` reports the
 * workers the agent granted; a request of another protocol version is refused in
 * words, and so is an agent of another version by its clients; a loader whose
 * agent is SIGKILLed goes on with the same bytes and is adopted by the next
 * agent on the socket, whose ATTACH refuses a ring that is not the job's; a
 * job's command the agent cannot run (not on its host, its probe fails, or the
 * trainer asks) is the trainer's to run, sized by the agent.
 */
// LDFLAGS: -Wl,--wrap=recvmsg
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "goldminer/checksum.h"
#include "goldminer/loader.h"
#include "goldminer/node.h"
#include "goldminer/policy.h"
#include "goldminer/ring.h"
#include "goldminer/synth.h"
#include "goldminer/wire.h"
#include "testutil.h"

static char dir[64];
static char sock[96];
static pid_t agent;
static volatile sig_atomic_t agent_stop;

static void on_term(int sig)
{
	(void)sig;
	agent_stop = 1;
}

#define IDLE_MS 1000 /* the test agent's idle deadline */

/* An agent with options o (o->socket_path set), answering once this returns. */
static pid_t start_agent_with(struct gm_node_opts *o)
{
	pid_t pid = fork();
	if (pid == 0) {
		struct sigaction sa;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_term;
		sigaction(SIGTERM, &sa, NULL);
		signal(SIGPIPE, SIG_IGN);
		prctl(PR_SET_PDEATHSIG, SIGTERM); /* a failed test leaves no agent behind */
		o->verbose = getenv("GM_TEST_VERBOSE") != NULL;
		char err[256];
		_exit(gm_node_run(o, &agent_stop, err, sizeof(err)) ? 1 : 0);
	}
	/* wait until it answers */
	char buf[2048];
	for (int i = 0; i < 500; i++) {
		if (gm_node_status(o->socket_path, buf, sizeof(buf)) == 0)
			break;
		usleep(10000);
	}
	return pid;
}

static pid_t start_agent(uint32_t cpus)
{
	struct gm_node_opts o = {.socket_path = sock, .cpus = cpus, .idle_ms = IDLE_MS};
	return start_agent_with(&o);
}

static void stop_agent(pid_t pid)
{
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
}

static int setup(void **state)
{
	(void)state;
	char err[256];
	if (gm_test_tmpdir(dir, sizeof(dir), "gm-node"))
		return -1;
	if (gm_synth_write(dir, 60, 3, 21, 0, NULL, err, sizeof(err)))
		return -1;
	snprintf(sock, sizeof(sock), "%s/agent.sock", dir);
	agent = start_agent(3);
	return agent > 0 ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	stop_agent(agent);
	gm_test_rm_tree(dir);
	return 0;
}

static void opts(struct gm_loader_opts *o, const char *node)
{
	gm_loader_opts_default(o);
	o->root = dir;
	o->batch_size = 12;
	o->aug.size = 40;
	o->seed = 8;
	o->epochs = 1;
	o->no_pin = true;
	o->node = node;
}

static uint64_t epoch_sum(const struct gm_loader_opts *o)
{
	struct gm_loader *l;
	char err[512];
	int rc = gm_loader_open(&l, o, err, sizeof(err));
	if (rc)
		fprintf(stderr, "# %s\n", err);
	assert_int_equal(rc, 0);
	struct gm_batch b;
	uint64_t h = GM_CHECKSUM_INIT, k = 0;
	while ((rc = gm_loader_next(l, &b)) == 0) {
		assert_int_equal(b.index, k++);
		h = gm_checksum64(h, b.data, (size_t)b.size * b.sample_bytes);
		h = gm_checksum64(h, b.labels, b.size * sizeof(int32_t));
	}
	assert_int_equal(rc, GM_LOADER_END_OF_EPOCH);
	assert_int_equal(k, 5);
	gm_loader_close(l);
	return h;
}

static int jobs_now(void)
{
	char buf[2048];
	if (gm_node_status(sock, buf, sizeof(buf)))
		return -1;
	const char *p = strstr(buf, "\"jobs\": ");
	return p ? atoi(p + 8) : -1;
}

static int wait_jobs(int want)
{
	int n = -1;
	for (int i = 0; i < 300 && (n = jobs_now()) != want; i++)
		usleep(10000);
	return n;
}

/* The status line of the agent at path, or "" (2 s at most). */
static void status_of(const char *path, char *buf, size_t len)
{
	buf[0] = 0;
	for (int i = 0; i < 200 && gm_node_status(path, buf, len); i++)
		usleep(10000);
}

/*
 * A loader outlives its agent: the agent SIGKILLed after two batches, the loader's
 * own workers make the rest of the epoch and the next ones (the same bytes as a
 * local loader's); an agent started again on the socket adopts the running ring
 * (--status: adopted_at_task) and its workers make the rest.
 */
static void test_loader_outlives_its_agent_and_is_adopted_again(void **state)
{
	(void)state;
#ifdef __SANITIZE_THREAD__
	/* the agents here are forked from this multi-threaded test, and TSan ends a
	 * child that starts threads after such a fork; tests/test_agent_gone.sh runs
	 * the same with real agent processes */
	skip();
#endif
	struct gm_loader_opts o;
	struct gm_loader *l;
	struct gm_batch b;
	char path[128], err[512], st[4096];
	uint64_t want[4], got[4];
	int rc;

	opts(&o, NULL);
	o.epochs = 4;
	assert_int_equal(gm_loader_open(&l, &o, err, sizeof(err)), 0);
	for (int e = 0; e < 4; e++) {
		want[e] = GM_CHECKSUM_INIT;
		while ((rc = gm_loader_next(l, &b)) == 0)
			want[e] = gm_checksum64(want[e], b.data, (size_t)b.size * b.sample_bytes);
		assert_int_equal(rc, GM_LOADER_END_OF_EPOCH);
	}
	gm_loader_close(l);

	snprintf(path, sizeof(path), "%s/gone.sock", dir);
	struct gm_node_opts ao = {.socket_path = path, .cpus = 2, .idle_ms = IDLE_MS};
	pid_t a = start_agent_with(&ao);
	opts(&o, path);
	o.epochs = 4;
	rc = gm_loader_open(&l, &o, err, sizeof(err));
	if (rc)
		fail_msg("%s", err);
	bool adopted = false;
	for (int e = 0, k = 0; e < 4; e++) {
		got[e] = GM_CHECKSUM_INIT;
		while ((rc = gm_loader_next(l, &b)) == 0) {
			got[e] = gm_checksum64(got[e], b.data, (size_t)b.size * b.sample_bytes);
			if (++k == 2) { /* the agent dies with batches to go */
				kill(a, SIGKILL);
				waitpid(a, NULL, 0);
				unlink(path);
			} else if (k == 8) { /* another on the socket */
				a = start_agent_with(&ao);
			} else if (k > 8 && !adopted) { /* ask at most every 0.5 s */
				usleep(100000);
				status_of(path, st, sizeof(st));
				adopted = strstr(st, "\"adopted_at_task\": ") != NULL;
			}
		}
		if (rc != GM_LOADER_END_OF_EPOCH)
			fail_msg("epoch %d: %d: %s", e, rc, gm_loader_errmsg(l));
	}
	gm_loader_close(l);
	stop_agent(a);
	assert_memory_equal(got, want, sizeof(want));
	assert_true(adopted);
}

/* An ATTACH's ring must be the job's: one of another batch size is refused in
 * words, and so is an ATTACH with two fds; no job is left attached. */
static void test_attach_with_a_ring_not_the_jobs_is_refused(void **state)
{
	(void)state;
	struct gm_loader_opts o;
	struct gm_ring *r;
	static struct gm_node_req req;
	static struct gm_node_reply rep;
	char why[512];

	opts(&o, NULL);
	assert_int_equal(gm_ring_create(&r, 4, 7, gm_aug_out_bytes(&o.aug), 0, 5), 0);
	int fds[2] = {gm_ring_fd(r), gm_ring_fd(r)};
	assert_int_equal(gm_wire_attach_request(&req, &o), 0);
	for (int nfds = 1; nfds <= 2; nfds++) {
		int fd = gm_wire_connect(sock, why, sizeof(why));
		assert_true(fd >= 0);
		int got = -1;
		assert_int_equal(gm_wire_call_fds(fd, &req, fds, nfds, &rep, &got), 0);
		assert_int_equal(rep.status, -EINVAL);
		assert_int_equal(got, -1);
		assert_non_null(
		    strstr(rep.msg, nfds == 1 ? "is not this job's" : "running ring alone"));
		close(fd);
	}
	assert_int_equal(wait_jobs(0), 0);
	gm_ring_destroy(r);
}

static void test_same_bytes_as_a_local_loader(void **state)
{
	(void)state;
	struct gm_loader_opts o;
	opts(&o, NULL);
	uint64_t local = epoch_sum(&o);
	opts(&o, sock);
	assert_int_equal(epoch_sum(&o), local);
	assert_int_equal(wait_jobs(0), 0);
}

/* Coefficient slots (gpu_decode) made by the agent's workers: the same bytes as
 * a local loader's coefficient slots, not the pixels' (its ring sized for
 * them); an ATTACH with a flag this build does not know is refused in words. */
static void test_coefficient_slots_through_the_agent(void **state)
{
	(void)state;
	struct gm_loader_opts o;
	opts(&o, NULL);
	uint64_t pixels = epoch_sum(&o);
	o.gpu_decode = true;
	uint64_t local = epoch_sum(&o);
	assert_true(local != pixels);
	opts(&o, sock);
	o.gpu_decode = true;
	assert_int_equal(epoch_sum(&o), local);
	assert_int_equal(wait_jobs(0), 0);

	static struct gm_node_req req;
	static struct gm_node_reply rep;
	int got = -1;
	opts(&o, sock);
	assert_int_equal(gm_wire_attach_request(&req, &o), 0);
	req.flags |= 4u;
	char why[256];
	int fd = gm_wire_connect(sock, why, sizeof(why));
	assert_true(fd >= 0);
	assert_int_equal(gm_wire_call(fd, &req, &rep, &got), 0);
	assert_int_equal(rep.status, -EINVAL);
	assert_int_equal(got, -1);
	assert_non_null(strstr(rep.msg, "unknown request flags 0x4"));
	close(fd);
	assert_int_equal(wait_jobs(0), 0);
}

static void test_socket_is_private(void **state)
{
	(void)state;
	struct stat st;
	assert_int_equal(stat(sock, &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0600);
	/* a second agent on the same path refuses to start */
	struct gm_node_opts o = {.socket_path = sock, .cpus = 1, .verbose = 0};
	volatile sig_atomic_t stop = 1;
	char err[256];
	assert_int_equal(gm_node_run(&o, &stop, err, sizeof(err)), -EADDRINUSE);
	assert_non_null(strstr(err, "another goldminer node agent"));
	/* a path that holds something else is never replaced */
	char file[128];
	snprintf(file, sizeof(file), "%s/not-a-socket", dir);
	FILE *f = fopen(file, "w");
	assert_non_null(f);
	fclose(f);
	o.socket_path = file;
	assert_int_equal(gm_node_run(&o, &stop, err, sizeof(err)), -EEXIST);
	assert_non_null(strstr(err, "not a socket"));
	struct stat fst;
	assert_int_equal(stat(file, &fst), 0);
	assert_true(S_ISREG(fst.st_mode));
	/* a stale socket file (no agent behind it) is replaced */
	char stale[128];
	snprintf(stale, sizeof(stale), "%s/stale.sock", dir);
	int sfd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	strcpy(sa.sun_path, stale);
	assert_int_equal(bind(sfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(sfd);
	o.socket_path = stale;
	assert_int_equal(gm_node_run(&o, &stop, err, sizeof(err)), 0); /* stop is set: returns */
}

static void test_two_jobs_share_the_budget(void **state)
{
	(void)state;
	struct gm_loader_opts o;
	struct gm_loader *a, *b;
	char err[512];
	struct gm_batch x;
	opts(&o, sock);
	o.epochs = 0;
	assert_int_equal(gm_loader_open(&a, &o, err, sizeof(err)), 0);
	assert_int_equal(gm_loader_open(&b, &o, err, sizeof(err)), 0);
	assert_int_equal(wait_jobs(2), 2);
	/* both consume; the agent's tick (250 ms) brings the pools within its budget */
	struct gm_loader_stats sa, sb;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0;; i++) {
		assert_int_equal(gm_loader_next(a, &x), i % 6 == 5 ? GM_LOADER_END_OF_EPOCH : 0);
		assert_int_equal(gm_loader_next(b, &x), i % 6 == 5 ? GM_LOADER_END_OF_EPOCH : 0);
		gm_loader_stats(a, &sa);
		gm_loader_stats(b, &sb);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		if ((i > 30 && sa.target_workers + sb.target_workers <= 3) ||
		    t1.tv_sec - t0.tv_sec > 20)
			break;
	}
	assert_true(sa.target_workers >= 1 && sb.target_workers >= 1);
	assert_true(sa.target_workers + sb.target_workers <= 3); /* the agent's budget */
	/* a fixed size asked by one job */
	assert_int_equal(gm_loader_scale(a, 1), 0);
	assert_int_equal(gm_loader_scale(a, 99), -EINVAL);
	assert_non_null(strstr(gm_loader_errmsg(a), "node agent"));
	gm_loader_close(a);
	assert_int_equal(wait_jobs(1), 1);
	/* the CLI path: fix the remaining job's pool by its consumer pid */
	char msg[2048];
	assert_int_equal(gm_node_scale(sock, 999999, 1, msg, sizeof(msg)), -ESRCH);
	assert_non_null(strstr(msg, "999999"));
	assert_int_equal(gm_node_scale(sock, getpid(), 3, msg, sizeof(msg)), 0);
	for (int i = 0; i < 200; i++) {
		assert_true(gm_loader_next(b, &x) >= 0);
		gm_loader_stats(b, &sb);
		if (sb.target_workers == 3 && sb.workers == 3)
			break;
		usleep(10000);
	}
	assert_int_equal(sb.target_workers, 3);
	assert_int_equal(sb.workers, 3);
	gm_loader_close(b);
	assert_int_equal(wait_jobs(0), 0);
}

/* A job that attached and then sits idle cannot keep the budget from a newcomer. */
static void test_idle_job_yields_to_a_newcomer(void **state)
{
	(void)state;
	struct gm_loader_opts o;
	struct gm_loader *idle, *busy;
	struct gm_loader_stats si, sb;
	struct gm_batch x;
	char err[512];
	opts(&o, sock);
	o.epochs = 0;
	o.workers = 0; /* no cap: the agent decides (a client's N is its cap) */
	assert_int_equal(gm_loader_open(&idle, &o, err, sizeof(err)), 0);
	gm_loader_stats(idle, &si);
	assert_int_equal(si.target_workers, 3); /* the whole idle budget at attach */
	assert_int_equal(gm_loader_open(&busy, &o, err, sizeof(err)), 0);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		assert_true(gm_loader_next(busy, &x) >= 0);
		gm_loader_stats(idle, &si);
		gm_loader_stats(busy, &sb);
		clock_gettime(CLOCK_MONOTONIC, &t1);
	} while ((si.target_workers + sb.target_workers > 3 || sb.target_workers < 2) &&
		 t1.tv_sec - t0.tv_sec < 20);
	assert_true(si.target_workers >= 1);
	assert_true(si.target_workers + sb.target_workers <= 3);
	assert_true(sb.target_workers >= 2); /* the consuming job got the spare workers */
	gm_loader_close(busy);
	gm_loader_close(idle);
	assert_int_equal(wait_jobs(0), 0);
}

static void test_dead_client_frees_its_job(void **state)
{
	(void)state;
	int p[2];
	assert_int_equal(pipe(p), 0);
	pid_t pid = fork();
	if (pid == 0) {
		struct gm_loader_opts o;
		struct gm_loader *l;
		struct gm_batch b;
		char err[256];
		opts(&o, sock);
		o.epochs = 0;
		if (gm_loader_open(&l, &o, err, sizeof(err)) || gm_loader_next(l, &b))
			_exit(1);
		if (write(p[1], "x", 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	char c;
	assert_int_equal(read(p[0], &c, 1), 1);
	assert_int_equal(wait_jobs(1), 1);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	assert_int_equal(wait_jobs(0), 0);
	close(p[0]);
	close(p[1]);
}

static void test_other_uid_refused(void **state)
{
	(void)state;
	if (geteuid() != 0)
		skip(); /* needs root to become another uid */
	/* let the connect through so that SO_PEERCRED decides */
	chmod(dir, 0711);
	chmod(sock, 0666);
	pid_t pid = fork();
	if (pid == 0) {
		if (setgid(65534) || setuid(65534))
			_exit(3);
		struct sockaddr_un sa = {.sun_family = AF_UNIX};
		strcpy(sa.sun_path, sock);
		int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
			_exit(4);
		struct gm_node_reply rep;
		ssize_t n = recv(fd, &rep, sizeof(rep), 0);
		_exit(n == (ssize_t)sizeof(rep) && rep.status == -EACCES &&
			      strstr(rep.msg, "refused: uid 65534")
			  ? 0
			  : 1);
	}
	int st;
	waitpid(pid, &st, 0);
	chmod(sock, 0600);
	chmod(dir, 0700);
	if (WIFEXITED(st) && WEXITSTATUS(st) == 3)
		skip(); /* this sandbox cannot switch uid */
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

/* A CMDJOB (wire.h) with root = args (NUL-separated, len bytes) and nfds of
 * fds: the agent's status, its words in msg (128 bytes). */
static int cmd_job(const char *args, size_t len, const int *fds, int nfds, char *msg)
{
	struct gm_node_req req;
	static struct gm_node_reply rep;
	char err[256];
	int fd = gm_wire_connect(sock, err, sizeof(err));
	assert_true(fd >= 0);
	gm_wire_request(&req, GM_NODE_CMDJOB);
	memcpy(req.root, args, len < sizeof(req.root) ? len : sizeof(req.root));
	req.workers = 1;
	assert_int_equal(gm_wire_call_fds(fd, &req, fds, nfds, &rep, NULL), 0);
	close(fd);
	memcpy(msg, rep.msg, 127);
	msg[127] = '\0';
	return rep.status;
}

static void test_command_job_is_checked_before_anything_runs(void **state)
{
	(void)state;
	struct gm_ring *r;
	char msg[128], full[4096];
	static const char ok[] = "/bin/true\0--worker\0";
	assert_int_equal(gm_ring_create(&r, 4, 5, 64, 0, 10), 0);
	int spec = memfd_create("gm-test-spec", MFD_CLOEXEC);
	int fds[2] = {gm_ring_fd(r), spec}, bad[2] = {spec, spec};
	assert_true(spec > 2);
	assert_int_equal(cmd_job(ok, sizeof(ok), fds, 1, msg), -EINVAL); /* one fd */
	assert_non_null(strstr(msg, "memfds"));
	assert_int_equal(cmd_job("bin/true\0", 10, fds, 2, msg), -EINVAL);
	assert_non_null(strstr(msg, "bin/true is not an absolute path"));
	memset(full, 'a', sizeof(full)); /* no end to the arguments */
	assert_int_equal(cmd_job(full, sizeof(full), fds, 2, msg), -EINVAL);
	assert_non_null(strstr(msg, "NUL-terminated"));
	assert_int_equal(cmd_job(ok, sizeof(ok), bad, 2, msg), -EBADMSG); /* not a ring */
	assert_non_null(strstr(msg, "ring cannot be used"));
	assert_int_equal(ftruncate(spec, 1ll << 50), 0); /* a ring of 1 PiB: over --mem */
	bad[0] = spec;
	assert_int_equal(cmd_job(ok, sizeof(ok), bad, 2, msg), -ENOMEM);
	assert_non_null(strstr(msg, "memory budget"));
	char st[4096];
	assert_int_equal(gm_node_status(sock, st, sizeof(st)), 0);
	assert_non_null(strstr(st, "\"jobs\": 0")); /* none of them became a job */
	close(spec);
	gm_ring_destroy(r);
}

/* A CMDJOB of args (as cmd_job) with request flags, on a connection left open
 * (*fd, the job lives while it does): the status, the reply's flags in *rflags. */
static int cmd_job_open(const char *args, size_t len, uint32_t flags, const int *fds, int *fd,
			uint32_t *rflags, char *msg)
{
	struct gm_node_req req;
	static struct gm_node_reply rep;
	char err[256];
	*fd = gm_wire_connect(sock, err, sizeof(err));
	assert_true(*fd >= 0);
	gm_wire_request(&req, GM_NODE_CMDJOB);
	memcpy(req.root, args, len);
	req.workers = 2;
	req.flags = flags;
	assert_int_equal(gm_wire_call_fds(*fd, &req, fds, 2, &rep, NULL), 0);
	snprintf(msg, 256, "%.255s", rep.msg);
	*rflags = rep.flags;
	return rep.status;
}

/* The agent runs a job's command only when it can: one it cannot execute (not
 * on its host, as the trainer's interpreter in a container's agent), one whose
 * probe fails, or a request that asks it, is the trainer's to run: the reply
 * says so, the agent sizes it in the ring header (a_target) and its status says
 * "workers run by the trainer"; a command it can run stays its own; unknown
 * request flags are refused. */
static void test_command_job_the_agent_cannot_run_is_the_trainers(void **state)
{
	(void)state;
	static const char gone[] = "/nonexistent/python3\0-c\0";
	static const char fails[] = "/bin/false\0";
	static const char runs[] = "/bin/true\0--worker\0";
	struct {
		const char *args;
		size_t len;
		uint32_t flags;
		bool trainer;
	} c[] = {{gone, sizeof(gone), 0, true},
		 {fails, sizeof(fails), 0, true},
		 {runs, sizeof(runs), GM_NODE_TRAINER_WORKERS, true},
		 {runs, sizeof(runs), 0, false}};
	char msg[256], st[GM_NODE_MSG];

	for (size_t k = 0; k < sizeof(c) / sizeof(c[0]); k++) {
		struct gm_ring *r;
		uint32_t rflags = 0;
		int fd;
		assert_int_equal(gm_ring_create(&r, 4, 5, 64, 0, 10), 0);
		int spec = memfd_create("gm-test-spec", MFD_CLOEXEC);
		int fds[2] = {gm_ring_fd(r), spec};
		assert_int_equal(
		    cmd_job_open(c[k].args, c[k].len, c[k].flags, fds, &fd, &rflags, msg), 0);
		assert_int_equal(rflags, c[k].trainer ? GM_NODE_TRAINER_WORKERS : 0);
		assert_int_equal(gm_node_status(sock, st, sizeof(st)), 0);
		assert_non_null(strstr(st, c[k].trainer ? "\"workers run by the trainer\""
							: "\"workers run by the agent\""));
		if (c[k].trainer) /* the agent's size for the trainer's pool */
			assert_true(atomic_load(&gm_ring_hdr(r)->a_target) >= 1);
		close(fd);
		close(spec);
		gm_ring_destroy(r);
	}
	struct gm_ring *r;
	uint32_t rflags;
	int fd;
	assert_int_equal(gm_ring_create(&r, 4, 5, 64, 0, 10), 0);
	int spec = memfd_create("gm-test-spec", MFD_CLOEXEC);
	int fds[2] = {gm_ring_fd(r), spec};
	assert_int_equal(cmd_job_open(runs, sizeof(runs), 2, fds, &fd, &rflags, msg), -EINVAL);
	assert_non_null(strstr(msg, "unknown request flags"));
	close(fd);
	close(spec);
	gm_ring_destroy(r);
}

static void test_malformed_request_and_missing_agent(void **state)
{
	(void)state;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	strcpy(sa.sun_path, sock);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(send(fd, "hello", 5, 0), 5);
	struct gm_node_reply rep;
	assert_int_equal(recv(fd, &rep, sizeof(rep), 0), (ssize_t)sizeof(rep));
	assert_int_equal(rep.status, -EPROTO);
	assert_non_null(strstr(rep.msg, "malformed"));
	close(fd);
	/* a client of another build: its protocol version, refused in words */
	static struct gm_node_req old;
	char want[128];
	gm_wire_request(&old, GM_NODE_STATUS);
	old.version = GM_NODE_VERSION - 1;
	fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(send(fd, &old, sizeof(old), 0), (ssize_t)sizeof(old));
	assert_int_equal(recv(fd, &rep, sizeof(rep), 0), (ssize_t)sizeof(rep));
	assert_int_equal(rep.status, -EPROTO);
	snprintf(want, sizeof(want), "protocol version %d; this agent speaks version %d",
		 GM_NODE_VERSION - 1, GM_NODE_VERSION);
	assert_non_null(strstr(rep.msg, want));
	assert_int_equal(recv(fd, &rep, sizeof(rep), 0), 0); /* and hung up */
	close(fd);

	struct gm_loader_opts o;
	struct gm_loader *l;
	char err[512];
	opts(&o, "/tmp/no-such-goldminer-agent.sock");
	assert_int_equal(gm_loader_open(&l, &o, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "cannot reach the node agent at /tmp/no-such"));
	/* a bad dataset is reported through the agent, naming the path */
	opts(&o, sock);
	o.root = "/nonexistent/data";
	assert_true(gm_loader_open(&l, &o, err, sizeof(err)) < 0);
	assert_non_null(strstr(err, "/nonexistent/data"));
}

/* A raw connection to the agent that sends nothing. */
static int idle_connection(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	strcpy(sa.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

/* Has the agent closed fd (EOF, or its "closed: ..." reply then EOF)? Waits up to
 * deadline_ms for it. */
static bool closed_by_agent(int fd, int deadline_ms)
{
	struct pollfd p = {fd, POLLIN, 0};
	struct gm_node_reply rep;
	if (poll(&p, 1, deadline_ms) != 1)
		return false;
	ssize_t n = recv(fd, &rep, sizeof(rep), MSG_DONTWAIT);
	if (n == (ssize_t)sizeof(rep))
		return rep.status == -ETIMEDOUT && strstr(rep.msg, "closed: ") &&
		       recv(fd, &rep, sizeof(rep), 0) == 0;
	return n == 0;
}

/* Fifty silent connections: a real client still attaches and gets its batches,
 * and the silent ones are closed after the idle deadline. */
static void test_idle_connections_do_not_lock_others_out(void **state)
{
	(void)state;
	int idle[50];
	for (int i = 0; i < 50; i++)
		idle[i] = idle_connection(sock);
	struct gm_loader_opts o;
	opts(&o, NULL);
	uint64_t local = epoch_sum(&o);
	opts(&o, sock);
	assert_int_equal(epoch_sum(&o), local); /* attached, five batches */
	for (int i = 0; i < 50; i++) {
		assert_true(closed_by_agent(idle[i], 10 * IDLE_MS));
		close(idle[i]);
	}
	/* a full table of silent connections: the oldest makes room for a newcomer */
	int full[GM_NODE_MAX_CONNS];
	for (int i = 0; i < GM_NODE_MAX_CONNS; i++)
		full[i] = idle_connection(sock);
	char buf[2048];
	assert_int_equal(gm_node_status(sock, buf, sizeof(buf)), 0);
	assert_true(closed_by_agent(full[0], 10 * IDLE_MS)); /* the one evicted */
	for (int i = 0; i < GM_NODE_MAX_CONNS; i++)
		close(full[i]);
}

/* At its connection limit, every slot holding a job, the agent says so in words;
 * the job it serves goes on. */
static void test_refusal_at_the_limit_is_said_in_words(void **state)
{
	(void)state;
	char path[128], err[1024];
	struct gm_loader *a, *b;
	struct gm_loader_opts o;
	struct gm_batch x;
	snprintf(path, sizeof(path), "%s/one.sock", dir);
	struct gm_node_opts no = {.socket_path = path, .cpus = 1, .max_conns = 1};
	pid_t pid = start_agent_with(&no);
	opts(&o, path);
	o.epochs = 0;
	assert_int_equal(gm_loader_open(&a, &o, err, sizeof(err)), 0);
	for (int i = 0; i < 20; i++) { /* the refusal races the request: both orders */
		assert_int_equal(gm_loader_open(&b, &o, err, sizeof(err)), -EBUSY);
		assert_non_null(strstr(err, "refused: the agent already serves 1 jobs, its most"));
		assert_null(strstr(err, "malformed"));
		assert_int_equal(gm_loader_next(a, &x), i % 6 == 5 ? GM_LOADER_END_OF_EPOCH : 0);
	}
	char msg[2048];
	assert_int_equal(gm_node_status(path, msg, sizeof(msg)), -EBUSY);
	assert_non_null(strstr(msg, "already serves 1 jobs"));
	gm_loader_close(a);
	stop_agent(pid);
}

/* Fault injection: the agent's end of a socket pair, closed just before the
 * client's next recvmsg (after its request was sent), as an agent that refuses a
 * connection may do. */
static int hang_up_before_recv = -1;
ssize_t __real_recvmsg(int fd, struct msghdr *m, int flags);
ssize_t __wrap_recvmsg(int fd, struct msghdr *m, int flags);
ssize_t __wrap_recvmsg(int fd, struct msghdr *m, int flags)
{
	if (hang_up_before_recv >= 0) {
		close(hang_up_before_recv);
		hang_up_before_recv = -1;
	}
	return __real_recvmsg(fd, m, flags);
}

/* The two orders in which an agent's refusal meets the request, made
 * deterministic on a socket pair: the agent replied and hung up before the
 * request came (the send fails), or after it came but unread (the kernel reports
 * a reset before the reply). Either way the client reads the refusal's words. */
static void test_refusal_is_read_whatever_the_order(void **state)
{
	(void)state;
	for (int unread = 0; unread < 2; unread++) {
		int sv[2];
		struct gm_node_req req;
		struct gm_node_reply rep = {0};
		assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
		gm_wire_reply(sv[1], -EBUSY, -1, 0, 0, "refused: busy");
		if (unread) /* hang up with the request unread */
			hang_up_before_recv = sv[1];
		else
			close(sv[1]);
		gm_wire_request(&req, GM_NODE_STATUS);
		assert_int_equal(gm_wire_call(sv[0], &req, &rep, NULL), 0);
		assert_int_equal(rep.status, -EBUSY);
		assert_string_equal(rep.msg, "refused: busy");
		/* and with nothing left to read, a hang-up is said as one */
		assert_int_equal(gm_wire_call(sv[0], &req, &rep, NULL), -EPIPE);
		close(sv[0]);
	}
}

/* An agent with room for one job's ring refuses a second, in words, and keeps
 * serving the first to the end of its epoch with the same bytes. */
static void test_memory_budget_refuses_a_job_and_keeps_the_others(void **state)
{
	(void)state;
	char path[128], err[1024], msg[2048];
	struct gm_loader *a, *b;
	struct gm_loader_opts o;
	struct gm_batch x;
	opts(&o, NULL);
	uint64_t local = epoch_sum(&o);
	/* cpus 1: the agent gives a job 4 slots; 12 x 40x40x3 bytes per slot */
	uint64_t one = gm_ring_size(4, 12, 40 * 40 * 3);
	assert_true(one > 0);
	snprintf(path, sizeof(path), "%s/small.sock", dir);
	struct gm_node_opts no = {.socket_path = path, .cpus = 1, .mem = one + one / 2};
	pid_t pid = start_agent_with(&no);
	opts(&o, path);
	assert_int_equal(gm_loader_open(&a, &o, err, sizeof(err)), 0);
	assert_int_equal(gm_loader_open(&b, &o, err, sizeof(err)), -ENOMEM);
	assert_non_null(strstr(err, "the node agent's memory budget is"));
	assert_non_null(strstr(err, "taken by 1 job;"));
	assert_non_null(strstr(err, "--batch, --size, --slots"));
	assert_non_null(strstr(err, "larger --mem"));
	/* the first job is untouched: a whole epoch, the same bytes as a local loader */
	uint64_t h = GM_CHECKSUM_INIT, k = 0;
	int rc;
	while ((rc = gm_loader_next(a, &x)) == 0) {
		assert_int_equal(x.index, k++);
		h = gm_checksum64(h, x.data, (size_t)x.size * x.sample_bytes);
		h = gm_checksum64(h, x.labels, x.size * sizeof(int32_t));
	}
	assert_int_equal(rc, GM_LOADER_END_OF_EPOCH);
	assert_int_equal(h, local);
	assert_int_equal(gm_node_status(path, msg, sizeof(msg)), 0);
	assert_non_null(strstr(msg, "\"jobs\": 1,"));
	gm_loader_close(a);
	/* its memory is given back: another job fits now */
	for (int i = 0; i < 300; i++) {
		rc = gm_loader_open(&b, &o, err, sizeof(err));
		if (rc != -ENOMEM)
			break;
		usleep(10000); /* the agent sees the first hang up */
	}
	assert_int_equal(rc, 0);
	gm_loader_close(b);
	stop_agent(pid);
}

/* A fake agent: listens at path as uid 65534 and accepts one connection. Exits 3
 * when this sandbox cannot switch uid. */
static pid_t fake_agent(const char *path, int ready)
{
	pid_t pid = fork();
	if (pid)
		return pid;
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	strcpy(sa.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)))
		_exit(2);
	/* SO_PEERCRED reports the uid at listen() */
	if (setgid(65534) || setuid(65534))
		_exit(3);
	if (listen(fd, 4) || write(ready, "x", 1) != 1)
		_exit(2);
	struct pollfd p = {fd, POLLIN, 0};
	while (poll(&p, 1, 10000) == 1) /* until killed, or 10 s without a client */
		close(accept(fd, NULL, NULL));
	_exit(0);
}

static void test_agent_of_another_uid_is_refused_by_the_client(void **state)
{
	(void)state;
	char path[128], err[1024], c;
	int p[2], st;
	if (geteuid() != 0)
		skip(); /* needs root to become another uid */
	snprintf(path, sizeof(path), "%s/fake.sock", dir);
	assert_int_equal(pipe(p), 0);
	pid_t pid = fake_agent(path, p[1]);
	close(p[1]);
	if (read(p[0], &c, 1) != 1) {
		close(p[0]);
		waitpid(pid, &st, 0);
		unlink(path);
		if (WIFEXITED(st) && WEXITSTATUS(st) == 3)
			skip(); /* this sandbox cannot switch uid */
		fail_msg("the fake agent did not start");
	}
	close(p[0]);
	assert_int_equal(gm_wire_connect(path, err, sizeof(err)), -EACCES);
	assert_non_null(strstr(err, "refusing the node agent at"));
	assert_non_null(strstr(err, "it runs as uid 65534"));
	struct gm_loader_opts o;
	struct gm_loader *l;
	opts(&o, path);
	assert_int_equal(gm_loader_open(&l, &o, err, sizeof(err)), -EACCES);
	assert_non_null(strstr(err, "uid 65534"));
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	unlink(path);

	/* the other way round: a client of uid 65534 and an agent run by root */
	chmod(dir, 0711);
	chmod(sock, 0666);
	pid = fork();
	if (pid == 0) {
		if (setgid(65534) || setuid(65534))
			_exit(3);
		int fd = gm_wire_connect(sock, err, sizeof(err));
		if (fd != -EACCES || !strstr(err, "it runs as root (uid 0") ||
		    !strstr(err, GM_NODE_TRUST_ROOT_ENV "=1"))
			_exit(1);
		setenv(GM_NODE_TRUST_ROOT_ENV, "1", 1); /* asked for explicitly */
		fd = gm_wire_connect(sock, err, sizeof(err));
		_exit(fd >= 0 ? 0 : 2);
	}
	waitpid(pid, &st, 0);
	chmod(sock, 0600);
	chmod(dir, 0700);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

/* The default socket's directory: made 0700 when absent; refused, saying which
 * check failed and the fix, when its mode, owner or type is wrong. */
static void test_default_socket_directory_is_checked(void **state)
{
	(void)state;
	char top[64], xdg[128], gdir[160], err[1024], msg[2048];
	const char *old = getenv("XDG_RUNTIME_DIR");
	char *saved = old ? strdup(old) : NULL;
	volatile sig_atomic_t stop = 1;
	struct gm_node_opts o = {.socket_path = NULL, .cpus = 1};
	struct stat st;

	assert_int_equal(gm_test_tmpdir(top, sizeof(top), "gm-node-xdg"),
			 0); /* not in the dataset */
	snprintf(xdg, sizeof(xdg), "%s/xdg", top);
	snprintf(gdir, sizeof(gdir), "%s/goldminer", xdg);
	assert_int_equal(mkdir(xdg, 0700), 0);
	assert_int_equal(setenv("XDG_RUNTIME_DIR", xdg, 1), 0);
	assert_non_null(strstr(gm_node_default_socket(), "/xdg/goldminer/goldminer.sock"));
	assert_int_equal(gm_node_run(&o, &stop, err, sizeof(err)), 0); /* stop set: returns */
	assert_int_equal(lstat(gdir, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0700);

	assert_int_equal(chmod(gdir, 0755), 0);
	assert_int_equal(gm_node_run(&o, &stop, err, sizeof(err)), -EPERM);
	assert_non_null(strstr(err, "has mode 0755"));
	assert_non_null(strstr(err, "chmod 700"));
	assert_int_equal(gm_node_status(NULL, msg, sizeof(msg)), -EPERM); /* the client too */
	assert_non_null(strstr(msg, "has mode 0755"));
	assert_int_equal(chmod(gdir, 0700), 0);
	if (geteuid() == 0) { /* another owner */
		assert_int_equal(chown(gdir, 65534, 65534), 0);
		assert_int_equal(gm_node_run(&o, &stop, err, sizeof(err)), -EPERM);
		assert_non_null(strstr(err, "belongs to uid 65534"));
		assert_int_equal(chown(gdir, 0, 0), 0);
	}
	/* a symlink to a good directory is not the directory */
	char real[160];
	snprintf(real, sizeof(real), "%s/real", top);
	assert_int_equal(mkdir(real, 0700), 0);
	assert_int_equal(rmdir(gdir), 0);
	assert_int_equal(symlink(real, gdir), 0);
	assert_int_equal(gm_node_run(&o, &stop, err, sizeof(err)), -ENOTDIR);
	assert_non_null(strstr(err, "is not a directory"));
	if (saved)
		setenv("XDG_RUNTIME_DIR", saved, 1);
	else
		unsetenv("XDG_RUNTIME_DIR");
	free(saved);
	gm_test_rm_tree(top);
}

/* The worker processes of all jobs in one --status snapshot (the sum of the jobs'
 * "alive", read by the agent's thread in one pass), and the jobs; -1 on error. */
static int alive_now(const char *path, int *jobs)
{
	char buf[2048];
	if (gm_node_status(path, buf, sizeof(buf)))
		return -1;
	const char *p = strstr(buf, "\"jobs\": "), *q = strstr(buf, "\"job\": [");
	if (!p || !q)
		return -1;
	*jobs = atoi(p + 8);
	int n = 0;
	while ((q = strstr(q, "\"alive\": ")))
		n += atoi(q += 9);
	return n;
}

/* Job A holds the whole budget (2) when job B attaches: at no moment may the
 * worker processes of both outnumber it (the agent used to start B's pool with
 * one worker before A's shrank: "3 of 2 workers in use"); B still gets a worker,
 * once A's retiree has finished its batch, and delivers. */
static void test_newcomer_starts_within_the_budget(void **state)
{
	(void)state;
	char path[128], err[1024];
	struct gm_loader *a, *b;
	struct gm_loader_opts o;
	struct gm_batch x;
	int jobs, p[2];
	snprintf(path, sizeof(path), "%s/two.sock", dir);
	struct gm_node_opts no = {.socket_path = path, .cpus = 2, .idle_ms = IDLE_MS};
	pid_t pid = start_agent_with(&no);
	opts(&o, path);
	o.epochs = 0;
	o.workers = 0; /* no cap: A takes the whole idle budget */
	assert_int_equal(gm_loader_open(&a, &o, err, sizeof(err)), 0);
	for (int i = 0; i < 300 && alive_now(path, &jobs) != 2; i++)
		usleep(10000);
	assert_int_equal(alive_now(path, &jobs), 2);

	/* the watcher: --status every 2 ms for 3 s; the most alive seen, and how
	 * often both jobs were attached with 2 alive (B got its worker) */
	assert_int_equal(pipe(p), 0);
	pid_t w = fork();
	if (w == 0) {
		int most = 0, both = 0, polls = 0;
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		do {
			int n = alive_now(path, &jobs);
			most = n > most ? n : most;
			both += jobs == 2 && n == 2;
			polls++;
			usleep(2000);
			clock_gettime(CLOCK_MONOTONIC, &t1);
		} while (t1.tv_sec - t0.tv_sec < 3);
		int r[3] = {most, both, polls};
		_exit(write(p[1], r, sizeof(r)) == sizeof(r) ? 0 : 1);
	}
	usleep(100000);
	alarm(30); /* the deadline of the waits below: B must get a worker */
	assert_int_equal(gm_loader_open(&b, &o, err, sizeof(err)), 0);
	for (int i = 0; i < 12; i++) {
		assert_true(gm_loader_next(b, &x) >= 0);
		assert_true(gm_loader_next(a, &x) >= 0);
	}
	alarm(0);
	int r[3];
	assert_int_equal(read(p[0], r, sizeof(r)), sizeof(r));
	waitpid(w, NULL, 0);
	close(p[0]);
	close(p[1]);
	printf("# %d polls in 3 s: at most %d workers alive (budget 2); both jobs with 2 "
	       "alive in %d\n",
	       r[2], r[0], r[1]);
	assert_true(r[2] > 100);
	assert_in_range(r[0], 1, 2); /* the invariant */
	assert_true(r[1] > 0);	     /* B did get its worker within the budget */
	gm_loader_close(b);
	gm_loader_close(a);
	stop_agent(pid);
}

/* A fresh scratch directory root (outside the dataset): a fake /proc and /sys
 * with 4 CPUs online and, when quota is given, a v2 cpu.max of "QUOTA 100000" on
 * the process's cgroup (host.h). */
static void fake_host(char *root, size_t len, const char *quota)
{
	char p[512];
	assert_int_equal(gm_test_tmpdir(root, len, "gm-node-host"), 0);
	const char *dirs[] = {"/proc",	      "/proc/self",	     "/sys",
			      "/sys/devices", "/sys/devices/system", "/sys/devices/system/cpu",
			      "/sys/fs",      "/sys/fs/cgroup",	     "/sys/fs/cgroup/job"};
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(p, sizeof(p), "%s%s", root, dirs[i]);
		assert_int_equal(mkdir(p, 0700), 0);
	}
	char max[64];
	snprintf(max, sizeof(max), "%s 100000\n", quota ? quota : "max");
	const char *files[][2] = {{"/sys/devices/system/cpu/online", "0-3\n"},
				  {"/proc/self/cgroup", "0::/job\n"},
				  {"/sys/fs/cgroup/job/cpu.max", max}};
	for (size_t i = 0; i < 3; i++) {
		snprintf(p, sizeof(p), "%s%s", root, files[i][0]);
		FILE *f = fopen(p, "w");
		assert_non_null(f);
		fputs(files[i][1], f);
		fclose(f);
	}
}

/* The number after "KEY": in an agent's status line (-1 when absent). */
static double status_num(const char *buf, const char *key)
{
	char k[64];
	snprintf(k, sizeof(k), "\"%s\": ", key);
	const char *p = strstr(buf, k);
	return p ? atof(p + strlen(k)) : -1;
}

/* A trainer at 240 img/s (a batch of 12 every 50 ms) on an agent whose host root
 * is root: the agent's status once it has decided (rwant_why measured) and, for a
 * job that asks no peer, once its workers' CPU is enough to bound their rate
 * (GM_POLICY_CPU_RATE_MIN_S: a busy machine's 600 samples in 0.24 s were not), in buf. */
static void paced_job_status(const char *root, const char *name, char *buf, size_t len)
{
	char path[128], err[1024];
	struct gm_loader *l;
	struct gm_loader_opts o;
	struct gm_batch x;
	snprintf(path, sizeof(path), "%s/%s.sock", dir, name);
	struct gm_node_opts no = {
	    .socket_path = path, .cpus = 2, .idle_ms = IDLE_MS, .host_root = root};
	pid_t pid = start_agent_with(&no);
	opts(&o, path);
	o.epochs = 0;
	assert_int_equal(gm_loader_open(&l, &o, err, sizeof(err)), 0);
	buf[0] = 0;
	for (int i = 0; i < 200; i++) { /* 10 s at most */
		assert_true(gm_loader_next(l, &x) >= 0);
		usleep(50000);
		if (i % 5 == 4 && !gm_node_status(path, buf, len) &&
		    status_num(buf, "local_capacity_img_per_s") > 0 &&
		    status_num(buf, "demand_img_per_s") > 0 &&
		    status_num(buf, "delivered_img_per_s") > 0 &&
		    (status_num(buf, "rwant") > 0 ||
		     (i > 60 && status_num(buf, "worker_cpu_s") >= GM_POLICY_CPU_RATE_MIN_S)))
			break;
	}
	printf("# %s: %s\n", name, buf);
	gm_loader_close(l);
	stop_agent(pid);
}

/* The same paced trainer: on a host of 4 unlimited CPUs one worker covers it and
 * the agent would ask no peer; under a fake CPU quota of a thousandth of a core
 * its local capacity is a thousandth of a worker's on-CPU rate, below 240 img/s,
 * and it would ask the peers for remote workers, saying why. */
static void test_a_cpu_quota_makes_a_job_borrow(void **state)
{
	(void)state;
	char root[256], buf[8192];
	double rate;
	fake_host(root, sizeof(root), NULL);
	paced_job_status(root, "free", buf, sizeof(buf));
	gm_test_rm_tree(root);
	rate = status_num(buf, "worker_img_per_s");
	assert_true(rate > 264); /* one worker covers 240 with its headroom */
	/* the CPU reading it shows: its workers' CPU and local samples, their
	 * ratio a bound on the rate (gm_policy_worker_rate) */
	double cpu_s = status_num(buf, "worker_cpu_s"), seen = status_num(buf, "local_samples");
	assert_true(cpu_s >= GM_POLICY_CPU_RATE_MIN_S && cpu_s < 20); /* (below: no bound yet) */
	assert_true(seen >= 48 && seen <= 12 * 200 + 12 * 64);
	assert_true(seen / cpu_s >= rate * 0.999);
	assert_true(status_num(buf, "local_capacity_img_per_s") >= rate);
	assert_true(status_num(buf, "rwant") == 0);
	assert_non_null(strstr(buf, "\"rwant_why\": \"local capacity covers demand ("));

	fake_host(root, sizeof(root), "100"); /* 0.001 core */
	paced_job_status(root, "quota", buf, sizeof(buf));
	gm_test_rm_tree(root);
	rate = status_num(buf, "worker_img_per_s");
	double cap = status_num(buf, "local_capacity_img_per_s");
	assert_true(cap > 0 && fabs(cap - rate * 0.001) <= 0.1 + rate * 1e-4);
	assert_true(status_num(buf, "rwant") >= 1);
	assert_non_null(strstr(buf, "\"rwant_why\": \"local capacity "));
	assert_non_null(strstr(buf, " img/s < demand "));
	double demand = status_num(buf, "demand_img_per_s");
	assert_in_range((long)demand, 100, 480); /* the trainer's pace, 240 */
	assert_in_range((long)status_num(buf, "delivered_img_per_s"), 100, 480);
}

/* `bench --node` reports what the agent granted (2, its budget), not the 3 asked,
 * which it reports apart. */
static void test_bench_reports_the_workers_granted(void **state)
{
	(void)state;
	char path[128], out[128], buf[4096] = "";
	snprintf(path, sizeof(path), "%s/bench.sock", dir);
	snprintf(out, sizeof(out), "%s/bench.json", dir);
	struct gm_node_opts no = {.socket_path = path, .cpus = 2, .idle_ms = IDLE_MS};
	pid_t pid = start_agent_with(&no);
	pid_t c = fork();
	if (c == 0) {
		int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd < 0 || dup2(fd, 1) < 0)
			_exit(1);
		char *argv[] = {"bench",   dir,	 "--node", path, "--workers", "3", "--epochs", "1",
				"--batch", "12", "--size", "40", "--quiet",   NULL};
		_exit(gm_cmd_bench(13, argv));
	}
	int st;
	assert_int_equal(waitpid(c, &st, 0), c);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	FILE *f = fopen(out, "r");
	assert_non_null(f);
	assert_non_null(fgets(buf, sizeof(buf), f));
	fclose(f);
	printf("# %s", buf);
	const char *w = strstr(buf, "\"workers\": "), *q = strstr(buf, "\"workers_requested\": ");
	assert_non_null(w);
	assert_non_null(q);
	assert_in_range(atoi(w + 11), 1, 2);
	assert_int_equal(atoi(q + 21), 3);
	stop_agent(pid);
}

/* Every loader option the agent needs crosses the wire and comes back equal (one
 * table in wire.c maps both ways; lease_timeout_ms was not carried before). */
static void test_options_survive_the_wire(void **state)
{
	struct gm_loader_opts o, back;
	struct gm_node_req req;
	(void)state;
	gm_loader_opts_default(&o);
	o.root = "/nonexistent/root";
	o.workers = 3;
	o.seed = 0x1234567890abcdefull;
	o.start_batch = 7;
	o.batch_size = 48;
	o.epoch = 2;
	o.epochs = 5;
	o.slots = 8;
	o.on_error = GM_ON_ERROR_FAIL;
	o.shuffle = false;
	o.drop_last = true;
	o.chaos_kill_ms = 11;
	o.lease_timeout_ms = 1234;
	o.aug.size = 96;
	assert_int_equal(gm_wire_attach_request(&req, &o), 0);
	assert_true(gm_wire_request_valid(&req, (ssize_t)sizeof(req)));
	gm_wire_request_opts(&req, &back);
	assert_string_equal(back.root, "/nonexistent/root");
	assert_int_equal(back.workers, 3);
	assert_true(back.seed == o.seed);
	assert_int_equal(back.start_batch, 7);
	assert_int_equal(back.batch_size, 48);
	assert_int_equal(back.epoch, 2);
	assert_int_equal(back.epochs, 5);
	assert_int_equal(back.slots, 8);
	assert_int_equal(back.on_error, GM_ON_ERROR_FAIL);
	assert_false(back.shuffle);
	assert_true(back.drop_last);
	assert_int_equal(back.chaos_kill_ms, 11);
	assert_int_equal(back.lease_timeout_ms, 1234);
	assert_memory_equal(&back.aug, &o.aug, sizeof(o.aug));
}

/* ---- an agent of an unprivileged uid, clients of two other uids ------------------ */

#define AGENT_UID 65534 /* nobody */
#define OTHER_UID 65533 /* a third uid: neither root nor the agent's */

/* An agent run as AGENT_UID at path (in adir, handed to that uid), accepting
 * connections once this returns 0; 3 when this sandbox cannot switch uid. */
static int start_unprivileged_agent(const char *adir, const char *path, pid_t *pid)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int st;

	assert_int_equal(chown(adir, AGENT_UID, AGENT_UID), 0);
	*pid = fork();
	if (*pid == 0) {
		struct gm_node_opts o = {.socket_path = path, .cpus = 1, .idle_ms = IDLE_MS};
		if (setgroups(0, NULL) || setgid(AGENT_UID) || setuid(AGENT_UID))
			_exit(3);
		/* after setuid, which clears it: a failed test leaves no agent behind
		 * (the agent's own PDEATHSIG ends it with this process) */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		pid_t agent_pid = start_agent_with(&o); /* the agent is its child */
		waitpid(agent_pid, NULL, 0);
		_exit(0);
	}
	strcpy(sa.sun_path, path);
	for (int i = 0; i < 500; i++) {
		if (waitpid(*pid, &st, WNOHANG) == *pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 2;
		int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
		int ok = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
		close(fd);
		if (ok)
			return 0;
		usleep(10000);
	}
	return 2;
}

/* A request of type over a fresh connection to path, with nfds of fds and (for a
 * CMDJOB) the command args of len bytes: the agent's status, its words in msg (256). */
static int raw_call(const char *path, uint32_t type, const char *args, size_t len, const int *fds,
		    int nfds, char *msg)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	static struct gm_node_req req;
	static struct gm_node_reply rep;

	strcpy(sa.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		snprintf(msg, 256, "connect: %s", strerror(errno));
		close(fd);
		return -ECONNREFUSED;
	}
	gm_wire_request(&req, type);
	memcpy(req.root, args, len < sizeof(req.root) ? len : sizeof(req.root));
	req.workers = 1;
	int rc = gm_wire_call_fds(fd, &req, fds, nfds, &rep, NULL);
	close(fd);
	snprintf(msg, 256, "%.255s", rc ? "no reply" : rep.msg);
	return rc ? rc : rep.status;
}

/* The first child of pid (the agent, under start_unprivileged_agent's process). */
static pid_t first_child(pid_t pid)
{
	char p[96];
	pid_t kid = -1;
	snprintf(p, sizeof(p), "/proc/%d/task/%d/children", (int)pid, (int)pid);
	FILE *f = fopen(p, "r");
	if (!f || fscanf(f, "%d", &kid) != 1)
		kid = -1;
	if (f)
		fclose(f);
	return kid;
}

/* The processes the agent has started, listed in list: 0 when none. */
static int agent_children(pid_t agent_pid, char *list, size_t len)
{
	char p[96];
	snprintf(p, sizeof(p), "/proc/%d/task/%d/children", (int)agent_pid, (int)agent_pid);
	FILE *f = fopen(p, "r");
	assert_non_null(f);
	size_t n = fread(list, 1, len - 1, f);
	list[n] = '\0';
	fclose(f);
	return (int)strspn(list, " \n") == (int)n ? 0 : 1;
}

/* Run in a child as uid, the exit status of fn(path) (0: as expected). */
static int as_uid(uid_t uid, int (*fn)(const char *), const char *path)
{
	int st;
	pid_t pid = fork();
	if (pid == 0) {
		if (setgroups(0, NULL) || setgid(uid) || setuid(uid))
			_exit(3);
		_exit(fn(path));
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static const char worker_cmd[] = "/bin/true\0--worker\0";

/* A third uid: refused at the door, for an ATTACH and for a CMDJOB alike. */
static int third_uid_is_refused(const char *path)
{
	char msg[256], want[128];
	int spec = memfd_create("gm-test-spec", MFD_CLOEXEC), fds[2] = {spec, spec};
	snprintf(want, sizeof(want),
		 "refused: uid %d may not use this agent (it serves uid %d and root)", OTHER_UID,
		 AGENT_UID);
	if (raw_call(path, GM_NODE_ATTACH, "/tmp", 5, NULL, 0, msg) != -EACCES ||
	    !strstr(msg, want))
		return fprintf(stderr, "# ATTACH of uid %d: %s\n", OTHER_UID, msg), 1;
	if (raw_call(path, GM_NODE_CMDJOB, worker_cmd, sizeof(worker_cmd), fds, 2, msg) !=
		-EACCES ||
	    !strstr(msg, want))
		return fprintf(stderr, "# CMDJOB of uid %d: %s\n", OTHER_UID, msg), 1;
	return 0;
}

/* The agent's own uid gets past the uid rule, to the next check (the fds). */
static int own_uid_passes_the_uid_rule(const char *path)
{
	char msg[256];
	int spec = memfd_create("gm-test-spec", MFD_CLOEXEC);
	if (raw_call(path, GM_NODE_CMDJOB, worker_cmd, sizeof(worker_cmd), &spec, 1, msg) !=
		-EINVAL ||
	    !strstr(msg, "memfds"))
		return fprintf(stderr, "# CMDJOB of the agent's uid: %s\n", msg), 1;
	return 0;
}

/* Two real uids besides root: an agent run as nobody, whose socket everyone may
 * reach. Root's job of its own command is refused in words (the command would run
 * as nobody) and starts nothing; a third uid is refused for an ATTACH (C workers)
 * and a CMDJOB (Python workers) alike; nobody itself passes the uid rule. */
static void test_unprivileged_agent_refuses_jobs_of_other_uids(void **state)
{
	(void)state;
	char adir[64], path[96], msg[256], kids[256], want[160];
	pid_t pid;
	if (geteuid() != 0) {
		print_message("skipped: needs root to run an agent and clients as other uids\n");
		skip();
	}
	assert_int_equal(gm_test_tmpdir(adir, sizeof(adir), "gm-node-uid"), 0);
	snprintf(path, sizeof(path), "%s/agent.sock", adir);
	int rc = start_unprivileged_agent(adir, path, &pid);
	if (rc == 3) {
		gm_test_rm_tree(adir);
		print_message("skipped: this sandbox cannot switch to uid %d\n", AGENT_UID);
		skip();
	}
	assert_int_equal(rc, 0);
	pid_t agent_pid = first_child(pid);
	assert_true(agent_pid > 0);
	assert_int_equal(chmod(adir, 0711), 0); /* reachable by every uid: the uid rule decides */
	assert_int_equal(chmod(path, 0666), 0);

	/* root: let in (the agent serves root), but not for a command of its own */
	struct gm_ring *r;
	assert_int_equal(gm_ring_create(&r, 4, 5, 64, 0, 10), 0);
	int spec = memfd_create("gm-test-spec", MFD_CLOEXEC);
	int fds[2] = {gm_ring_fd(r), spec};
	snprintf(want, sizeof(want),
		 "refused: workers that run the client's own command need the agent's uid %d "
		 "(this client runs as uid 0)",
		 AGENT_UID);
	assert_int_equal(
	    raw_call(path, GM_NODE_CMDJOB, worker_cmd, sizeof(worker_cmd), fds, 2, msg), -EACCES);
	if (!strstr(msg, want))
		fail_msg("root's CMDJOB: %s", msg);
	assert_int_equal(raw_call(path, GM_NODE_STATUS, "", 0, NULL, 0, msg), 0);
	assert_non_null(strstr(msg, "\"jobs\": 0"));
	if (agent_children(agent_pid, kids, sizeof(kids)))
		fail_msg("the agent started processes: %s", kids);

	assert_int_equal(as_uid(OTHER_UID, third_uid_is_refused, path), 0);
	assert_int_equal(as_uid(AGENT_UID, own_uid_passes_the_uid_rule, path), 0);
	assert_int_equal(agent_children(agent_pid, kids, sizeof(kids)), 0);

	close(spec);
	gm_ring_destroy(r);
	kill(agent_pid, SIGTERM);
	waitpid(pid, NULL, 0); /* its parent ends with it */
	gm_test_rm_tree(adir);
}

/* An agent of the previous protocol version at path: answers every request as
 * a version-3 agent answered a CMDJOB, until killed or 10 s without a client. */
static pid_t old_agent(const char *path, int ready)
{
	pid_t pid = fork();
	if (pid)
		return pid;
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	static struct gm_node_req req;
	static struct gm_node_reply rep;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	strcpy(sa.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(fd, 4) ||
	    write(ready, "x", 1) != 1)
		_exit(2);
	struct pollfd p = {fd, POLLIN, 0};
	while (poll(&p, 1, 10000) == 1) {
		int c = accept(fd, NULL, NULL);
		if (recv(c, &req, sizeof(req), 0) > 0) {
			memset(&rep, 0, sizeof(rep));
			rep.magic = GM_NODE_MAGIC;
			rep.version = GM_NODE_VERSION - 1;
			rep.status = -EINVAL;
			snprintf(rep.msg, sizeof(rep.msg), "unknown request type %u", req.type);
			send(c, &rep, sizeof(rep), 0);
		}
		close(c);
	}
	_exit(0);
}

/* Against an agent of the previous version, every client says so in words. */
static void test_agent_of_another_version_is_named(void **state)
{
	(void)state;
	char path[128], err[1024], want[96], c;
	int p[2];
	snprintf(path, sizeof(path), "%s/old.sock", dir);
	assert_int_equal(pipe(p), 0);
	pid_t pid = old_agent(path, p[1]);
	assert_int_equal(read(p[0], &c, 1), 1);
	close(p[0]);
	close(p[1]);
	snprintf(want, sizeof(want),
		 "speaks goldminer node protocol version %d, this process version %d",
		 GM_NODE_VERSION - 1, GM_NODE_VERSION);
	assert_int_equal(gm_node_status(path, err, sizeof(err)), -EPROTONOSUPPORT);
	if (!strstr(err, want))
		fail_msg("status: %s", err);
	struct gm_loader_opts o;
	struct gm_loader *l;
	opts(&o, path);
	assert_int_equal(gm_loader_open(&l, &o, err, sizeof(err)), -EPROTONOSUPPORT);
	if (!strstr(err, want))
		fail_msg("loader: %s", err);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	unlink(path);
}

int main(void)
{
	if (getenv("GM_TEST_ONLY")) /* one test by name (a glob), e.g. "test_a_cpu*" */
		cmocka_set_test_filter(getenv("GM_TEST_ONLY"));
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_a_cpu_quota_makes_a_job_borrow),
	    cmocka_unit_test(test_agent_of_another_uid_is_refused_by_the_client),
	    cmocka_unit_test(test_bench_reports_the_workers_granted),
	    cmocka_unit_test(test_options_survive_the_wire),
	    cmocka_unit_test(test_command_job_is_checked_before_anything_runs),
	    cmocka_unit_test(test_command_job_the_agent_cannot_run_is_the_trainers),
	    cmocka_unit_test(test_dead_client_frees_its_job),
	    cmocka_unit_test(test_default_socket_directory_is_checked),
	    cmocka_unit_test(test_idle_connections_do_not_lock_others_out),
	    cmocka_unit_test(test_idle_job_yields_to_a_newcomer),
	    cmocka_unit_test(test_malformed_request_and_missing_agent),
	    cmocka_unit_test(test_memory_budget_refuses_a_job_and_keeps_the_others),
	    cmocka_unit_test(test_newcomer_starts_within_the_budget),
	    cmocka_unit_test(test_other_uid_refused),
	    cmocka_unit_test(test_unprivileged_agent_refuses_jobs_of_other_uids),
	    cmocka_unit_test(test_agent_of_another_version_is_named),
	    cmocka_unit_test(test_refusal_at_the_limit_is_said_in_words),
	    cmocka_unit_test(test_refusal_is_read_whatever_the_order),
	    cmocka_unit_test(test_same_bytes_as_a_local_loader),
	    cmocka_unit_test(test_coefficient_slots_through_the_agent),
	    cmocka_unit_test(test_loader_outlives_its_agent_and_is_adopted_again),
	    cmocka_unit_test(test_attach_with_a_ring_not_the_jobs_is_refused),
	    cmocka_unit_test(test_socket_is_private),
	    cmocka_unit_test(test_two_jobs_share_the_budget),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
