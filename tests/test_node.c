/*
 * test_node.c - the node agent: loaders in other processes attach over the Unix
 * socket and get the same bytes as a local loader; several jobs share the budget;
 * a job that detaches or dies frees its workers; other uids are refused.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "goldminer/checksum.h"
#include "goldminer/loader.h"
#include "goldminer/node.h"
#include "goldminer/synth.h"
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

static pid_t start_agent(uint32_t cpus)
{
	pid_t pid = fork();
	if (pid == 0) {
		struct sigaction sa;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_term;
		sigaction(SIGTERM, &sa, NULL);
		signal(SIGPIPE, SIG_IGN);
		struct gm_node_opts o = {.socket_path = sock,
					 .cpus = cpus,
					 .verbose = getenv("GM_TEST_VERBOSE") != NULL};
		char err[256];
		_exit(gm_node_run(&o, &agent_stop, err, sizeof(err)) ? 1 : 0);
	}
	/* wait until it answers */
	char buf[2048];
	for (int i = 0; i < 500; i++) {
		if (gm_node_status(sock, buf, sizeof(buf)) == 0)
			break;
		usleep(10000);
	}
	return pid;
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
	int st;
	kill(agent, SIGTERM);
	waitpid(agent, &st, 0);
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

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_dead_client_frees_its_job),
	    cmocka_unit_test(test_idle_job_yields_to_a_newcomer),
	    cmocka_unit_test(test_malformed_request_and_missing_agent),
	    cmocka_unit_test(test_other_uid_refused),
	    cmocka_unit_test(test_same_bytes_as_a_local_loader),
	    cmocka_unit_test(test_socket_is_private),
	    cmocka_unit_test(test_two_jobs_share_the_budget),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
