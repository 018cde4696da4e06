/*
 * test_bind.c - the ring's protocol for bindings (core/bind.c) with real exec'd
 * workers: this binary runs itself as the worker ("--worker MODE"), a C stand-in
 * for python/goldminer/_worker.py that speaks only bind.h.
 *
 * What the contract promises and each test shows: the consumer's indices reach
 * the claimer of their task, before the workers start and after each release;
 * a task of the first window given after the start reaches the workers, and no
 * worker claims a slot before its task is given;
 * the payload a worker writes is what the consumer reads; a worker SIGKILLed
 * mid-batch loses nothing (its batch is claimed again and arrives the same); a
 * stopped lease holder loses its lease at the deadline; a sample that crashes two
 * workers is quarantined and reported as a bad sample; a worker's fatal error
 * and a command that cannot run reach the consumer as -EIO with why; a status,
 * a position or a count out of range is refused; a process forked from a worker
 * cannot claim or publish its lease, nor can a worker whose lease was taken back,
 * and what a worker forked ends with the worker;
 * a node agent of another
 * protocol version is named as such.
 *
 * The worker's "sample" is a number: value(id) = id * K + 1 in 8 bytes; MODE
 * makes it slow, stop itself, crash, or give up at start.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "goldminer/bind.h"
#include "goldminer/ring.h"
#include "goldminer/wire.h"
#include "testutil.h"

#define K 2654435761ull

static char self[4096], dir[64], marker[160];
static const char *command; /* argv[0] of the workers: self unless a test says */
static volatile sig_atomic_t retire;

static uint64_t value(uint32_t id)
{
	return id * K + 1;
}

static void on_usr1(int sig)
{
	(void)sig;
	retire = 1;
}

/* A dataset's helper: fork a child that sleeps a minute holding what the worker
 * holds (the ring's memfd, stdio), say its pid in dir/.helper, and die. */
static void fork_helper_and_die(void)
{
	char path[160], tmp[160];
	pid_t h = fork();

	if (h == 0) {
		sleep(60);
		_exit(0);
	}
	snprintf(tmp, sizeof(tmp), "%s/.helper.tmp", getenv("GM_TEST_BIND_DIR"));
	snprintf(path, sizeof(path), "%s/.helper", getenv("GM_TEST_BIND_DIR"));
	FILE *f = fopen(tmp, "w");
	if (f) {
		fprintf(f, "%d", (int)h);
		fclose(f);
		rename(tmp, path);
	}
	_exit(3);
}

/* What MODE does to sample id before it is computed. */
static void behave(const char *mode, uint32_t id)
{
	unsigned want;
	char path[128];

	if (!strcmp(mode, "slow"))
		usleep(20000);
	if (sscanf(mode, "stop:%u:%127s", &want, path) == 2 && id == want && !unlink(path))
		raise(SIGSTOP); /* once: the marker is gone for the next worker */
	if (sscanf(mode, "helper:%u:%127s", &want, path) == 2 && id == want && !unlink(path))
		fork_helper_and_die(); /* once, as "stop" */
	if (sscanf(mode, "crash:%u", &want) == 1 && id == want) {
		struct rlimit none = {0, 0};
		setrlimit(RLIMIT_CORE, &none);
		signal(SIGSEGV, SIG_DFL); /* the default death, not a sanitizer's report */
		raise(SIGSEGV);
	}
}

static void produce(struct gm_bind *b, uint32_t slot, const char *mode)
{
	const uint32_t *idx;
	uint64_t cap;
	uint32_t epoch, batch;
	uint32_t n = gm_bind_indices(b, slot, &idx, &epoch, &batch);
	uint64_t *out = gm_bind_payload(b, slot, &cap);

	out[3] = (uint64_t)epoch << 32 | batch; /* where the consumer said it is */

	for (uint32_t i = 0; i < n && (i + 1) * 8 <= cap; i++) {
		uint32_t id = idx[i];
		gm_bind_sample(b, slot, id);
		if (gm_bind_quarantined(b, id)) {
			gm_bind_error(b, slot, i, id, -EIO, "quarantined");
			out[i] = 0;
		} else {
			behave(mode, id);
			out[i] = value(id);
		}
		gm_bind_done(b, slot, i);
	}
	gm_bind_sample(b, slot, UINT32_MAX);
	gm_bind_publish(b, slot, 0);
}

static int worker_main(const char *mode)
{
	struct gm_bind *b;
	uint64_t task;

	/* before the attach opens anything: fd 5 is the spec, nothing above it is open */
	char spec[16] = "";
	bool spec_bad =
	    !strcmp(mode, "spec") && (pread(5, spec, sizeof(spec) - 1, 0) != 7 ||
				      strcmp(spec, "spec-ok") || fcntl(6, F_GETFD) != -1);
	if (gm_bind_attach(&b, 3))
		return 2;
	if (spec_bad) {
		gm_bind_fatal(b, "fd 5 is not the spec, or fd 6 is open");
		gm_bind_detach(b);
		return 1;
	}
	char path[128];
	snprintf(path, sizeof(path), "%s/%d%s", getenv("GM_TEST_BIND_DIR"), (int)getpid(),
		 getenv("GM_TEST_FROM_ZYGOTE") ? ".z" : "");
	/* the test finds its workers' pids (and ids) here: written whole, then named */
	char tmp[160];
	snprintf(tmp, sizeof(tmp), "%s/.%d", getenv("GM_TEST_BIND_DIR"), (int)getpid());
	FILE *f = fopen(tmp, "w");
	if (f) {
		fputs(getenv("GM_WORKER_ID") ? getenv("GM_WORKER_ID") : "none", f);
		fclose(f);
		rename(tmp, path);
	}
	if (!strcmp(mode, "fatal")) {
		gm_bind_fatal(b, "no dataset here");
		gm_bind_detach(b);
		return 1;
	}
	signal(SIGUSR1, on_usr1);
	while (!retire) {
		int slot = gm_bind_claim(b, 200, &task);
		if (slot == -ENODATA)
			break;
		if (slot >= 0)
			produce(b, (uint32_t)slot, mode);
	}
	gm_bind_detach(b);
	return 0;
}

/* The zygote protocol of pool.c (what python/goldminer/_worker.py's zygote does):
 * "R" once ready, then a worker forked twice (orphaned to the pool's process, a
 * subreaper) for each request ("F" and the worker's id), its pid the answer.
 * MODE "dies": exit before ready. */
static pid_t zygote_fork(pid_t trainer, int32_t id)
{
	int pfd[2];
	int32_t v = -1;
	if (pipe(pfd))
		return -1;
	pid_t mid = fork();
	if (mid == 0) {
		pid_t pid = fork();
		if (pid == 0) {
			close(4);
			close(pfd[0]);
			close(pfd[1]);
			while (getppid() != trainer)
				if (kill(trainer, 0) < 0)
					_exit(0); /* the pool's process is gone */
				else
					usleep(1000);
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			setenv("GM_TEST_FROM_ZYGOTE", "1", 1);
			char idtext[16];
			snprintf(idtext, sizeof(idtext), "%d", (int)id);
			setenv("GM_WORKER_ID", idtext, 1);
			_exit(worker_main("slow"));
		}
		v = pid;
		_exit(write(pfd[1], &v, sizeof(v)) == sizeof(v) ? 0 : 1);
	}
	close(pfd[1]);
	if (read(pfd[0], &v, sizeof(v)) != sizeof(v))
		v = -1;
	close(pfd[0]);
	waitpid(mid, NULL, 0);
	return v;
}

static int zygote_main(const char *mode)
{
	pid_t trainer = getppid();
	char req[8];
	int32_t id;
	if (!strcmp(mode, "dies"))
		return 3;
	if (write(4, "R", 1) != 1)
		return 1;
	while (read(4, req, sizeof(req)) == 5 && req[0] == 'F') {
		memcpy(&id, req + 1, sizeof(id));
		int32_t pid = zygote_fork(trainer, id);
		if (write(4, &pid, sizeof(pid)) != sizeof(pid))
			return 1;
	}
	return 0;
}

/* Task t: batch t % 5 of epoch 7 + t / 5, 3 samples, 10t .. 10t+2 (idx: room for 3). */
static struct gm_bind_batch *indices(uint64_t t, uint32_t *idx)
{
	static struct gm_bind_batch b;
	for (uint32_t j = 0; j < 3; j++)
		idx[j] = (uint32_t)(10 * t + j);
	b = (struct gm_bind_batch){
	    .epoch = 7 + (uint32_t)(t / 5), .batch = (uint32_t)(t % 5), .idx = idx, .n = 3};
	return &b;
}

static uint32_t budget;	   /* > 0: open_pool's pool is elastic within this many */
static int spec_fd;	   /* open_pool's spec_fd (0: none) */
static const char *zygote; /* open_pool's zygote mode (NULL: none) */
static bool sparse;	   /* open_pool's ring is sparse, with 8 MiB payloads */
static uint64_t given = 4; /* open_pool gives the first this many tasks before start */

static struct gm_bind_pool *open_pool(const char *mode, uint32_t workers, uint64_t tasks,
				      uint32_t lease_ms, char *err, int *rc)
{
	static const char *argv[4], *zargv[4];
	struct gm_bind_pool *p;
	struct gm_bind_pool_cfg c = {.argv = argv,
				     .workers = workers,
				     .slots = 4,
				     .batch_max = 3,
				     .payload_bytes = sparse ? 8 << 20 : 4 * 8,
				     .end_task = tasks,
				     .lease_timeout_ms = lease_ms,
				     .budget = budget,
				     .zygote_argv = zygote ? zargv : NULL,
				     .spec_fd = spec_fd,
				     .sparse = sparse};
	uint32_t idx[3];

	argv[0] = command ? command : self;
	gm_test_rm_tree(dir); /* the pid files of earlier tests' workers */
	mkdir(dir, 0700);
	argv[1] = "--worker";
	argv[2] = mode;
	argv[3] = NULL;
	zargv[0] = self;
	zargv[1] = "--zygote";
	zargv[2] = zygote;
	zargv[3] = NULL;
	*rc = gm_bind_pool_create(&p, &c, err, 512);
	if (*rc)
		return NULL;
	for (uint64_t t = 0; t < given && t < tasks; t++)
		assert_int_equal(gm_bind_pool_give(p, t, indices(t, idx)), 0);
	*rc = gm_bind_pool_start(p, err, 512);
	return p;
}

/* Take every task in order, check each sample's value, release with the next
 * indices; returns the bad samples seen (their ids in bad[], up to 4). */
static uint32_t drain(struct gm_bind_pool *p, uint64_t tasks, uint32_t *bad)
{
	char err[512];
	uint32_t nbad = 0, idx[3];

	for (uint64_t t = 0; t < tasks; t++) {
		int slot = gm_bind_pool_next(p, t, 20000, err, sizeof(err));
		if (slot < 0)
			fail_msg("batch %llu: %s", (unsigned long long)t, err);
		assert_int_equal(gm_bind_pool_status(p, (uint32_t)slot), 0);
		uint64_t cap;
		const uint64_t *v = gm_bind_pool_payload(p, (uint32_t)slot, &cap);
		assert_true(cap >= 32);
		assert_true(v[3] == ((7 + t / 5) << 32 | t % 5));
		uint32_t ne = gm_bind_pool_errors(p, (uint32_t)slot);
		for (uint32_t r = 0; r < ne; r++) {
			uint32_t s;
			int32_t e;
			assert_non_null(gm_bind_pool_error(p, (uint32_t)slot, r, &s, &e));
			assert_int_equal(e, -EIO);
			if (nbad < 4)
				bad[nbad] = s;
			nbad++;
		}
		for (uint32_t j = 0; j < 3; j++) {
			uint32_t id = (uint32_t)(10 * t + j);
			bool was_bad = false;
			for (uint32_t r = 0; r < nbad && r < 4; r++)
				was_bad |= bad[r] == id;
			assert_true(v[j] == (was_bad ? 0 : value(id)));
		}
		assert_int_equal(gm_bind_pool_release(p, (uint32_t)slot, indices(t + 4, idx)), 0);
	}
	return nbad;
}

static void test_indices_reach_workers_and_payloads_come_back(void **state)
{
	(void)state;
	char err[512];
	int rc;
	uint32_t bad[4];
	uint64_t st[5];
	struct gm_bind_pool *p = open_pool("plain", 2, 24, 0, err, &rc);
	assert_int_equal(rc, 0);
	assert_int_equal(drain(p, 24, bad), 0);
	gm_bind_pool_stats(p, st);
	assert_int_equal(st[1], 0); /* no death */
	gm_bind_pool_destroy(p);
}

/* The pid of a worker that has started (its file in dir), waiting up to 5 s. */
static pid_t a_worker(void)
{
	for (int i = 0; i < 500; i++) {
		DIR *d = opendir(dir);
		struct dirent *e;
		pid_t pid = 0;
		while (d && (e = readdir(d)))
			if (e->d_name[0] != '.')
				pid = (pid_t)atoi(e->d_name);
		if (d)
			closedir(d);
		if (pid > 0)
			return pid;
		usleep(10000);
	}
	fail_msg("no worker started");
	return 0;
}

static void test_sigkilled_worker_mid_batch_loses_nothing(void **state)
{
	(void)state;
	char err[512];
	int rc;
	uint32_t bad[4];
	uint64_t st[5];
	struct gm_bind_pool *p = open_pool("slow", 1, 6, 0, err, &rc);
	assert_int_equal(rc, 0);
	pid_t victim = a_worker();
	usleep(30000); /* 20 ms a sample: inside its first batch */
	assert_int_equal(kill(victim, SIGKILL), 0);
	assert_int_equal(drain(p, 6, bad), 0); /* every value, the killed batch's too */
	gm_bind_pool_stats(p, st);
	assert_true(st[1] >= 1);
	assert_true(st[2] >= 1); /* its batch was re-issued */
	gm_bind_pool_destroy(p);
}

/* Take n batches from task *t on, sleeping pause_us after each; the pool's
 * largest target meanwhile. */
static uint64_t take(struct gm_bind_pool *p, uint64_t *t, uint64_t n, int pause_us)
{
	char err[512];
	uint32_t idx[3];
	uint64_t st[5], most = 0;
	for (uint64_t end = *t + n; *t < end; (*t)++) {
		int slot = gm_bind_pool_next(p, *t, 20000, err, sizeof(err));
		if (slot < 0)
			fail_msg("batch %llu: %s", (unsigned long long)*t, err);
		assert_int_equal(gm_bind_pool_release(p, (uint32_t)slot, indices(*t + 4, idx)), 0);
		gm_bind_pool_stats(p, st);
		most = st[4] > most ? st[4] : most;
		usleep((useconds_t)pause_us);
	}
	return most;
}

static void test_budget_grows_the_pool_for_a_hungry_consumer_and_shrinks_it(void **state)
{
	(void)state;
	char err[512];
	int rc;
	uint64_t t = 0, st[5];
	budget = 3;
	struct gm_bind_pool *p = open_pool("slow", 1, 100000, 0, err, &rc);
	budget = 0;
	assert_int_equal(rc, 0);
	/* 60 ms a batch per worker, a consumer that waits for each: it wants more */
	assert_int_equal(take(p, &t, 40, 0), 3);
	/* a consumer that takes a batch every 400 ms needs one worker */
	int i = 0;
	for (; i < 80; i++) {
		take(p, &t, 1, 400000);
		gm_bind_pool_stats(p, st);
		if (st[4] == 1)
			break;
	}
	print_message("# shrank to %llu after %d batches\n", (unsigned long long)st[4], i);
	assert_int_equal(st[4], 1);
	gm_bind_pool_destroy(p);
}

static void test_stopped_lease_holder_loses_its_lease_at_the_deadline(void **state)
{
	(void)state;
	char err[512], mode[256];
	int rc;
	uint32_t bad[4];
	uint64_t st[5];
	FILE *f = fopen(marker, "w");
	assert_non_null(f);
	fclose(f);
	snprintf(mode, sizeof(mode), "stop:11:%s", marker);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	struct gm_bind_pool *p = open_pool(mode, 1, 6, 300, err, &rc);
	assert_int_equal(rc, 0);
	assert_int_equal(drain(p, 6, bad), 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	assert_int_equal(access(marker, F_OK), -1); /* a worker did stop on sample 11 */
	gm_bind_pool_stats(p, st);
	assert_true(st[1] >= 1 && st[2] >= 1);
	assert_int_equal(st[3], 0); /* one stall is not a quarantine */
	assert_true(t1.tv_sec - t0.tv_sec < 10);
	gm_bind_pool_destroy(p);
}

/* Is pid there and not a zombie? */
static bool running(pid_t pid)
{
	char path[64], buf[512], *end;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
	if (f)
		fclose(f);
	buf[n] = '\0';
	end = strrchr(buf, ')');
	return end && end[1] == ' ' && end[2] != 'Z';
}

/* What a worker forks (a dataset's helper) ends with it: the pool kills the
 * worker's process group when it ends, here a worker that dies right after it
 * forked a helper that would sleep a minute holding the ring's memfd and stdio. */
static void test_what_a_worker_forked_ends_with_the_worker(void **state)
{
	(void)state;
	char err[512], mode[256], path[160];
	int rc;
	uint32_t bad[4];
	uint64_t st[5];
	pid_t h = 0;
	FILE *f = fopen(marker, "w");
	assert_non_null(f);
	fclose(f);
	snprintf(mode, sizeof(mode), "helper:11:%s", marker);
	struct gm_bind_pool *p = open_pool(mode, 1, 6, 0, err, &rc);
	assert_int_equal(rc, 0);
	assert_int_equal(drain(p, 6, bad), 0); /* batch 1 re-issued after the death */
	gm_bind_pool_stats(p, st);
	assert_true(st[1] >= 1);
	snprintf(path, sizeof(path), "%s/.helper", dir);
	f = fopen(path, "r");
	assert_non_null(f);
	assert_int_equal(fscanf(f, "%d", &h), 1);
	fclose(f);
	assert_true(h > 0);
	for (int i = 0; i < 500 && running(h); i++)
		usleep(10000);
	bool left = running(h);
	kill(h, SIGKILL); /* (a failing run leaves nothing either) */
	assert_false(left);
	gm_bind_pool_destroy(p);
}

/* A worker the zygote forked (its pid file ends in ".z"), not `but`, looking
 * `tries` times 10 ms apart (0 if none). */
static pid_t forked_worker_within(pid_t but, int tries)
{
	for (int i = 0; i < tries; i++) {
		DIR *d = opendir(dir);
		struct dirent *e;
		pid_t pid = 0;
		while (d && (e = readdir(d)))
			if (strstr(e->d_name, ".z") && atoi(e->d_name) != but)
				pid = (pid_t)atoi(e->d_name);
		if (d)
			closedir(d);
		if (pid > 0)
			return pid;
		usleep(10000);
	}
	return 0;
}

/* ... waiting up to 10 s for one. */
static pid_t a_forked_worker(pid_t but)
{
	return forked_worker_within(but, 1000);
}

/* The parent of pid, from /proc/PID/stat (0 when gone). */
static pid_t parent_of(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	int ppid = 0;
	char *close_paren = strrchr(buf, ')');
	if (!close_paren || sscanf(close_paren + 2, "%*c %d", &ppid) != 1)
		return 0;
	return (pid_t)ppid;
}

/* The id worker pid wrote into its pid file ("none": none; -1: no file). */
static int id_of(pid_t pid, bool forked)
{
	char path[160], text[16] = "";
	snprintf(path, sizeof(path), "%s/%d%s", dir, (int)pid, forked ? ".z" : "");
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	if (!fgets(text, sizeof(text), f))
		text[0] = '\0';
	fclose(f);
	return strcmp(text, "none") && text[0] ? atoi(text) : -2;
}

static void test_replacements_fork_from_the_zygote_as_our_children(void **state)
{
	(void)state;
	char err[512];
	int rc;
	uint32_t bad[4];
	uint64_t st[5];
	zygote = "ok";
	struct gm_bind_pool *p = open_pool("slow", 1, 40, 0, err, &rc);
	zygote = NULL;
	assert_int_equal(rc, 0);
	pid_t first = a_forked_worker(0); /* the first workers too wait for the zygote */
	assert_true(first > 0);
	assert_int_equal(kill(first, SIGKILL), 0);
	pid_t forked = a_forked_worker(first);
	assert_true(forked > 0);
	assert_int_equal(id_of(first, true), 0);       /* the id, through the zygote's request */
	assert_int_equal(id_of(forked, true), 0);      /* the dead worker's */
	assert_int_equal(parent_of(forked), getpid()); /* orphaned to us: we reap it */
	int on = -1;
	assert_int_equal(prctl(PR_GET_CHILD_SUBREAPER, &on), 0);
	assert_int_equal(on, 0); /* a subreaper only while a fork is in flight */
	assert_int_equal(drain(p, 40, bad), 0);
	gm_bind_pool_stats(p, st);
	assert_true(st[1] >= 1); /* (the worker was idle: 4 slots filled, none taken) */
	gm_bind_pool_destroy(p);
	assert_int_equal(parent_of(forked), 0); /* reaped */
}

/* An orphan of a process this one started (a node agent it ran, killed, with
 * workers) goes to init, not to us: we would never reap it. Someone else's
 * subreaper flag is left as it was. */
static void test_orphans_of_others_do_not_become_our_zombies(void **state)
{
	(void)state;
	char err[512];
	int rc, on = -1, pfd[2], hold[2];
	uint32_t bad[4];
	zygote = "ok";
	struct gm_bind_pool *p = open_pool("slow", 1, 40, 0, err, &rc);
	zygote = NULL;
	assert_int_equal(rc, 0);
	assert_true(a_forked_worker(0) > 0); /* the zygote forked, so the window was open */
	assert_int_equal(pipe(pfd), 0);
	assert_int_equal(pipe(hold), 0);
	pid_t mid = fork();
	if (mid == 0) { /* forks g, says its pid, exits: g is an orphan */
		pid_t g = fork();
		if (g == 0) {
			char c;
			close(hold[1]);
			_exit(read(hold[0], &c, 1) < 0); /* until the test is done with it */
		}
		_exit(write(pfd[1], &g, sizeof(g)) != sizeof(g));
	}
	assert_true(mid > 0);
	int st;
	pid_t g = 0;
	assert_int_equal(waitpid(mid, &st, 0), mid);
	assert_int_equal(read(pfd[0], &g, sizeof(g)), sizeof(g));
	assert_true(g > 0);
	assert_true(parent_of(g) != getpid()); /* init's (or an outer subreaper's), not ours */
	close(pfd[0]);
	close(pfd[1]);
	close(hold[0]);
	close(hold[1]); /* g ends */
	assert_int_equal(drain(p, 40, bad), 0);
	gm_bind_pool_destroy(p);
	/* set by someone else before the pool: still set after it */
	assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
	zygote = "ok";
	p = open_pool("slow", 1, 40, 0, err, &rc);
	zygote = NULL;
	assert_int_equal(rc, 0);
	assert_true(a_forked_worker(0) > 0);
	assert_int_equal(drain(p, 40, bad), 0);
	gm_bind_pool_destroy(p);
	assert_int_equal(prctl(PR_GET_CHILD_SUBREAPER, &on), 0);
	assert_int_equal(on, 1);
	assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 0), 0);
}

/* Every worker's pid file, once there are n (up to 10 s): their pids and ids. */
static void workers_and_ids(int n, pid_t *pids, int *ids)
{
	for (int tries = 0; tries < 1000; tries++) {
		DIR *d = opendir(dir);
		struct dirent *e;
		int k = 0;
		while (d && (e = readdir(d)))
			if (e->d_name[0] != '.' && k < n) {
				pids[k] = atoi(e->d_name);
				ids[k] = id_of(pids[k], strstr(e->d_name, ".z"));
				k++;
			}
		if (d)
			closedir(d);
		if (k == n)
			return;
		usleep(10000);
	}
	fail_msg("not %d workers", n);
}

/* Exec'd workers (GM_WORKER_ID; the zygote's are checked with it below). */
static void test_workers_have_ids_0_to_n_and_a_replacement_takes_the_dead_ones(void **state)
{
	(void)state;
	char err[512];
	int rc, ids[4], seen = 0;
	pid_t pids[4], victim = 0;
	struct gm_bind_pool *p = open_pool("slow", 3, 100000, 0, err, &rc);
	assert_int_equal(rc, 0);
	workers_and_ids(3, pids, ids);
	for (int k = 0; k < 3; k++) {
		assert_in_range(ids[k], 0, 2);
		seen |= 1 << ids[k];
		victim = ids[k] == 1 ? pids[k] : victim;
	}
	assert_int_equal(seen, 7); /* 0, 1 and 2, each once */
	assert_int_equal(kill(victim, SIGKILL), 0);
	workers_and_ids(4, pids, ids); /* the three and the replacement */
	int newcomer = -1;
	for (int k = 0; k < 4; k++)
		if (pids[k] != victim && ids[k] == 1)
			newcomer = k;
	assert_true(newcomer >= 0); /* a live worker other than the victim has id 1 */
	gm_bind_pool_destroy(p);
}

static void test_zygote_that_cannot_start_leaves_fresh_workers(void **state)
{
	(void)state;
	char err[512];
	int rc;
	uint32_t bad[4];
	zygote = "dies";
	struct gm_bind_pool *p = open_pool("slow", 1, 12, 0, err, &rc);
	zygote = NULL;
	assert_int_equal(rc, 0);
	pid_t first = a_worker();
	usleep(200000);
	assert_int_equal(kill(first, SIGKILL), 0);
	assert_int_equal(drain(p, 12, bad), 0); /* a fresh process replaced it */
	/* none was forked: every worker writes its pid file as it starts, and every
	 * batch is made, so one look is enough (waiting 10 s for none cost 10 s) */
	assert_int_equal(forked_worker_within(0, 1), 0);
	gm_bind_pool_destroy(p);
}

static void test_sample_that_crashes_two_workers_is_quarantined(void **state)
{
	(void)state;
	char err[512];
	int rc;
	uint32_t bad[4];
	uint64_t st[5];
	struct gm_bind_pool *p = open_pool("crash:21", 1, 6, 0, err, &rc);
	assert_int_equal(rc, 0);
	assert_int_equal(drain(p, 6, bad), 1);
	assert_int_equal(bad[0], 21);
	gm_bind_pool_stats(p, st);
	assert_int_equal(st[1], 2);
	assert_int_equal(st[3], 1);
	gm_bind_pool_destroy(p);
}

static void test_spec_fd_reaches_each_worker_as_fd_5_and_nothing_else(void **state)
{
	(void)state;
	char err[512];
	int rc;
	uint32_t bad[4];
	int fd = memfd_create("gm-test-spec", MFD_CLOEXEC);
	assert_true(fd > 2);
	assert_int_equal(write(fd, "spec-ok", 7), 7);
	int other = dup(fd); /* an fd of ours that no worker may inherit */
	spec_fd = fd;
	struct gm_bind_pool *p = open_pool("spec", 2, 12, 0, err, &rc);
	spec_fd = 0;
	assert_int_equal(rc, 0);
	assert_int_equal(drain(p, 12, bad), 0); /* a worker that did not find it is fatal */
	gm_bind_pool_destroy(p);
	close(other);
	close(fd);
}

/* An agent of the previous protocol version at path that answers one request, as
 * a version-3 agent answered a CMDJOB; in a child, returned. */
static pid_t old_agent(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	static struct gm_node_req req;
	static struct gm_node_reply rep;
	strcpy(sa.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, 1), 0);
	pid_t pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		alarm(20);
		int c = accept(fd, NULL, NULL);
		if (recv(c, &req, sizeof(req), 0) > 0) {
			rep.magic = GM_NODE_MAGIC;
			rep.version = GM_NODE_VERSION - 1;
			rep.status = -EINVAL;
			snprintf(rep.msg, sizeof(rep.msg), "unknown request type %u", req.type);
			send(c, &rep, sizeof(rep), 0);
		}
		_exit(0);
	}
	close(fd);
	return pid;
}

static void test_node_pool_says_why_it_cannot_reach_the_agent(void **state)
{
	(void)state;
	char err[512], nowhere[96];
	int rc;
	struct gm_bind_pool *p = open_pool("plain", 1, 6, 0, err, &rc); /* (started) */
	assert_int_equal(rc, 0);
	assert_int_equal(gm_bind_pool_node(p, NULL, 0, err, sizeof(err)), -EBUSY);
	gm_bind_pool_destroy(p);
	const char *nine[] = {self, "1", "2", "3", "4", "5", "6", "7", "8", NULL};
	int fd = memfd_create("gm-test-spec", MFD_CLOEXEC);
	struct gm_bind_pool_cfg c = {
	    .argv = nine, .workers = 1, .batch_max = 3, .payload_bytes = 24, .end_task = 6};
	assert_int_equal(gm_bind_pool_create(&p, &c, err, sizeof(err)), 0);
	assert_int_equal(gm_bind_pool_node(p, NULL, 0, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "spec_fd")); /* the workers would have nothing to load */
	gm_bind_pool_destroy(p);
	c.spec_fd = fd;
	assert_int_equal(gm_bind_pool_create(&p, &c, err, sizeof(err)), 0);
	assert_int_equal(gm_bind_pool_node(p, NULL, 0, err, sizeof(err)), -E2BIG);
	assert_non_null(strstr(err, "too long for the node agent"));
	gm_bind_pool_destroy(p);
	nine[2] = NULL; /* two arguments: the agent is what is missing now */
	snprintf(nowhere, sizeof(nowhere), "%s/no-agent.sock", dir);
	assert_int_equal(gm_bind_pool_create(&p, &c, err, sizeof(err)), 0);
	assert_true(gm_bind_pool_node(p, nowhere, 0, err, sizeof(err)) < 0);
	assert_non_null(strstr(err, nowhere));
	/* an agent of another build: named by its protocol version */
	char want[96];
	pid_t old = old_agent(nowhere);
	assert_int_equal(gm_bind_pool_node(p, nowhere, 0, err, sizeof(err)), -EPROTONOSUPPORT);
	snprintf(want, sizeof(want),
		 "speaks goldminer node protocol version %d, this process version %d",
		 GM_NODE_VERSION - 1, GM_NODE_VERSION);
	if (!strstr(err, want))
		fail_msg("%s", err);
	waitpid(old, NULL, 0);
	unlink(nowhere);
	gm_bind_pool_destroy(p);
	close(fd);
}

static void test_worker_fatal_error_reaches_the_consumer(void **state)
{
	(void)state;
	char err[512];
	int rc;
	struct gm_bind_pool *p = open_pool("fatal", 1, 6, 0, err, &rc);
	assert_int_equal(rc, 0);
	assert_int_equal(gm_bind_pool_next(p, 0, 20000, err, sizeof(err)), -EIO);
	assert_non_null(strstr(err, "no dataset here"));
	gm_bind_pool_destroy(p);
}

static void test_command_that_cannot_run_is_an_error_naming_it(void **state)
{
	(void)state;
	char err[512];
	int rc;
	command = "/nonexistent/goldminer-worker";
	struct gm_bind_pool *p = open_pool("plain", 1, 6, 0, err, &rc);
	command = NULL;
	assert_int_equal(rc, 0);
	assert_int_equal(gm_bind_pool_next(p, 0, 20000, err, sizeof(err)), -EIO);
	assert_non_null(strstr(err, "/nonexistent/goldminer-worker could not be executed"));
	gm_bind_pool_destroy(p);
}

/* Wait for task t and check its three values and its place. The slot. */
static int take_one(struct gm_bind_pool *p, uint64_t t)
{
	char err[512];
	uint64_t cap;
	int slot = gm_bind_pool_next(p, t, 20000, err, sizeof(err));
	if (slot < 0)
		fail_msg("batch %llu: %s", (unsigned long long)t, err);
	const uint64_t *v = gm_bind_pool_payload(p, (uint32_t)slot, &cap);
	for (uint32_t j = 0; j < 3; j++)
		assert_true(v[j] == value((uint32_t)(10 * t + j)));
	assert_true(v[3] == ((7 + t / 5) << 32 | t % 5));
	return slot;
}

/* A consumer that knows fewer batches than the ring has slots (a persistent
 * DataLoader's short first epoch) gives the rest of the window once it knows
 * them, with the workers running; until then no worker claims those slots. */
static void test_tasks_given_after_start_reach_workers_and_none_is_claimed_empty(void **state)
{
	(void)state;
	char err[512];
	int rc;
	uint32_t idx[3];
	given = 1;
	struct gm_bind_pool *p = open_pool("plain", 2, GM_RING_NO_END, 0, err, &rc);
	given = 4;
	assert_int_equal(rc, 0);
	struct gm_ring *r = gm_bind_pool_ring(p);
	int slot0 = take_one(p, 0);
	usleep(200000); /* two idle workers that would claim an empty slot have done so */
	for (uint32_t s = 1; s < 4; s++) /* never claimed: no task's bits in them */
		assert_true(atomic_load(&gm_ring_ctl(r, s)->bits_task) == 0);
	assert_int_equal(gm_bind_pool_next(p, 1, 100, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "never given"));
	assert_int_equal(gm_bind_pool_release(p, 2, indices(6, idx)), -EINVAL); /* parked */
	assert_int_equal(gm_bind_pool_give(p, 1, indices(1, idx)), 0); /* workers running */
	assert_int_equal(gm_bind_pool_give(p, 1, indices(1, idx)), -EBUSY);
	assert_int_equal(gm_bind_pool_give(p, 4, indices(4, idx)), -EINVAL); /* past the window */
	assert_int_equal(gm_bind_pool_release(p, (uint32_t)slot0, indices(4, idx)), 0);
	assert_int_equal(gm_bind_pool_give(p, 2, indices(2, idx)), 0);
	assert_int_equal(gm_bind_pool_give(p, 3, indices(3, idx)), 0);
	for (uint64_t t = 1; t < 10; t++) {
		int slot = take_one(p, t);
		assert_int_equal(gm_bind_pool_release(p, (uint32_t)slot, indices(t + 4, idx)), 0);
	}
	gm_bind_pool_destroy(p);
}

/* A kept payload (gm_bind_pool_keep) holds its slot past its release until it is
 * dropped; later slots released meanwhile wait for it (task order); a batch kept
 * while the workers would have fewer than 2 slots is detached with its bytes at
 * its address; a stopped pool keeps kept batches readable. */
static void test_kept_payloads_hold_their_slots_until_dropped(void **state)
{
	(void)state;
	char err[512];
	int rc;
	uint32_t idx[3];
	void *a[3];
	struct gm_bind_pool *p = open_pool("plain", 2, 40, 0, err, &rc);
	assert_int_equal(rc, 0);
	struct gm_ring_hdr *h = gm_ring_hdr(gm_bind_pool_ring(p));
	for (uint64_t t = 0; t < 3; t++) {
		int slot = take_one(p, t);
		assert_int_equal(gm_bind_pool_keep(p, (uint32_t)slot, 32, &a[t]), 0);
		assert_int_equal(gm_bind_pool_keep(p, (uint32_t)slot, 32, &a[t]), -EINVAL);
		assert_int_equal(gm_bind_pool_release(p, (uint32_t)slot, indices(t + 4, idx)), 0);
	}
	assert_int_equal(atomic_load(&h->consumed), 0); /* all three kept */
	assert_int_equal(gm_bind_pool_drop(p, a[1]), 0);
	assert_int_equal(atomic_load(&h->consumed), 0); /* task 0 still kept */
	/* task 3: the workers would have 1 slot: task 0 is detached, same bytes */
	int slot = take_one(p, 3);
	assert_int_equal(gm_bind_pool_detached(p), 1);
	assert_int_equal(atomic_load(&h->consumed), 2);
	assert_true(((uint64_t *)a[0])[0] == value(0) && ((uint64_t *)a[0])[2] == value(2));
	assert_int_equal(gm_bind_pool_release(p, (uint32_t)slot, indices(7, idx)), 0);
	for (uint64_t t = 4; t < 8; t++) { /* task 4 refilled task 0's slot */
		slot = take_one(p, t);
		assert_int_equal(gm_bind_pool_release(p, (uint32_t)slot, indices(t + 4, idx)), 0);
	}
	assert_true(((uint64_t *)a[0])[0] == value(0));
	assert_int_equal(gm_bind_pool_drop(p, a[0]), 0);
	gm_bind_pool_stop(p);
	assert_true(((uint64_t *)a[2])[1] == value(21)); /* kept: readable after stop */
	assert_int_equal(gm_bind_pool_drop(p, (char *)a[2] + 8), 0);
	assert_int_equal(gm_bind_pool_drop(p, a[2]), -ENOENT);
	gm_bind_pool_destroy(p);
}

static void test_consumer_refuses_what_is_out_of_range(void **state)
{
	(void)state;
	char err[512];
	int rc;
	uint32_t idx[4] = {1, 2, 3, 4};
	struct gm_bind_batch four = {.idx = idx, .n = 4};
	const char *argv[] = {self, NULL};
	struct gm_bind_pool_cfg c = {
	    .argv = argv, .workers = 0, .batch_max = 3, .payload_bytes = 24, .end_task = 6};
	struct gm_bind_pool *p;
	assert_int_equal(gm_bind_pool_create(&p, &c, err, sizeof(err)), -EINVAL);
	assert_null(p);
	assert_non_null(strstr(err, "workers"));
	c.workers = 1;
	c.end_task = 0;
	assert_int_equal(gm_bind_pool_create(&p, &c, err, sizeof(err)), -EINVAL);
	c.end_task = 6; /* a lease deadline past the one every job is held to */
	c.lease_timeout_ms = GM_MAX_LEASE_MS + 1;
	assert_int_equal(gm_bind_pool_create(&p, &c, err, sizeof(err)), -EINVAL);
	assert_null(p);
	assert_non_null(strstr(err, "lease_timeout_ms must be 0"));
	p = open_pool("plain", 1, 6, 0, err, &rc);
	assert_int_equal(rc, 0);
	assert_int_equal(gm_bind_pool_give(p, 0, indices(0, idx)), -EBUSY); /* given already */
	assert_int_equal(gm_bind_pool_slots(p), 4);
	int slot = gm_bind_pool_next(p, 0, 20000, err, sizeof(err));
	assert_true(slot >= 0);
	assert_int_equal(gm_bind_pool_release(p, (uint32_t)slot, &four), -EINVAL);
	assert_int_equal(gm_bind_pool_release(p, (uint32_t)slot, NULL), -EINVAL); /* 4 < 6 */
	gm_bind_pool_destroy(p);
	gm_bind_pool_destroy(NULL);
}

static void test_pin_registers_the_ring_or_says_there_is_no_gpu(void **state)
{
	(void)state;
	char err[512];
	int rc;
	struct gm_bind_pool *p = open_pool("plain", 1, 6, 0, err, &rc);
	assert_int_equal(rc, 0);
	rc = gm_bind_pool_pin(p);
	if (rc == -ENODEV) {
		gm_bind_pool_destroy(p);
		skip();
	}
	assert_int_equal(rc, 0);
	assert_int_equal(gm_bind_pool_pin(p), 0); /* once is enough */
	uint32_t bad[4];
	assert_int_equal(drain(p, 6, bad), 0); /* workers write into registered pages */
	gm_bind_pool_destroy(p);
}

/* Whether the page at addr is in memory (allocated, for a memfd's page). */
static bool resident(const void *addr)
{
	unsigned char in = 0;
	uintptr_t page = (uintptr_t)addr & ~(uintptr_t)4095;
	assert_int_equal(mincore((void *)page, 4096, &in), 0);
	return in & 1;
}

static void test_sparse_pool_allocates_only_what_workers_write_and_is_not_pinned(void **state)
{
	(void)state;
	char err[512];
	int rc;
	uint32_t bad[4];
	uint64_t cap;

	sparse = true;
	struct gm_bind_pool *p = open_pool("plain", 2, 12, 0, err, &rc);
	sparse = false;
	assert_int_equal(rc, 0);
	assert_int_equal(gm_bind_pool_pin(p), -EINVAL); /* would fault every page in */
	assert_int_equal(drain(p, 12, bad), 0);		/* 32 bytes a batch, written */
	for (uint32_t s = 0; s < 4; s++) {
		const char *v = gm_bind_pool_payload(p, s, &cap);
		assert_true(cap >= 8 << 20);
		assert_true(resident(v));		/* what the workers wrote */
		assert_false(resident(v + cap - 4096)); /* never written: never allocated */
	}
	gm_bind_pool_destroy(p);
	p = open_pool("plain", 1, 4, 0, err, &rc); /* the reserved ring: every page */
	assert_int_equal(rc, 0);
	const char *v = gm_bind_pool_payload(p, 3, &cap);
	assert_true(resident(v + cap - 1));
	gm_bind_pool_destroy(p);
}

static void test_give_refuses_tasks_outside_the_window(void **state)
{
	(void)state;
	char err[512];
	uint32_t idx[4] = {1, 2, 3, 4};
	const char *argv[] = {self, NULL};
	struct gm_bind_pool_cfg c = {.argv = argv,
				     .workers = 1,
				     .slots = 4,
				     .batch_max = 3,
				     .payload_bytes = 24,
				     .first_task = 2,
				     .end_task = 5};
	struct gm_bind_pool *p;
	assert_int_equal(gm_bind_pool_create(&p, &c, err, sizeof(err)), 0);
	struct gm_bind_batch three = {.idx = idx, .n = 3}, none = {.idx = idx, .n = 0},
			     four = {.idx = idx, .n = 4};
	assert_int_equal(gm_bind_pool_give(p, 1, &three), -EINVAL); /* before first */
	assert_int_equal(gm_bind_pool_give(p, 5, &three), -EINVAL); /* at end */
	assert_int_equal(gm_bind_pool_give(p, 2, &none), -EINVAL);
	assert_int_equal(gm_bind_pool_give(p, 2, &four), -EINVAL);
	assert_int_equal(gm_bind_pool_give(p, 2, NULL), -EINVAL);
	assert_int_equal(gm_bind_pool_give(p, 4, &three), 0);
	gm_bind_pool_destroy(p); /* never started */
}

/* The epoch table: a worker mapping the pool's ring reads each epoch's seed the
 * consumer wrote, nothing for an epoch it did not write (nor for the one whose
 * entry a later epoch took), and waits for the first one (or the stop). */
static void test_epoch_table_gives_workers_each_epochs_seed_and_nothing_else(void **state)
{
	(void)state;
	char err[512];
	const char *argv[] = {self, NULL};
	struct gm_bind_pool_cfg c = {.argv = argv,
				     .workers = 1,
				     .slots = 4,
				     .batch_max = 3,
				     .payload_bytes = 24,
				     .first_task = 0,
				     .end_task = GM_RING_NO_END};
	struct gm_bind_pool *p;
	struct gm_bind *b;
	uint64_t seed = 0;
	uint32_t epoch = 0;
	assert_int_equal(gm_bind_pool_create(&p, &c, err, sizeof(err)), 0);
	assert_int_equal(gm_bind_attach(&b, gm_ring_fd(gm_bind_pool_ring(p))), 0);
	assert_int_equal(gm_bind_epoch_seed(b, 0, &seed), -ENOENT);
	assert_int_equal(gm_bind_first_epoch(b, 20, &epoch, &seed), -EAGAIN); /* none yet */
	gm_bind_pool_seed(p, 7, 0xfeedfacecafebeefull);
	gm_bind_pool_seed(p, 8, 0); /* a seed of 0 is a seed */
	assert_int_equal(gm_bind_first_epoch(b, 0, &epoch, &seed), 0);
	assert_int_equal(epoch, 7);
	assert_true(seed == 0xfeedfacecafebeefull);
	assert_int_equal(gm_bind_epoch_seed(b, 8, &seed), 0);
	assert_true(seed == 0);
	assert_int_equal(gm_bind_epoch_seed(b, 9, &seed), -ENOENT);
	gm_bind_pool_seed(p, 7 + GM_BIND_EPOCHS, 5); /* takes epoch 7's entry */
	assert_int_equal(gm_bind_epoch_seed(b, 7, &seed), -ENOENT);
	assert_int_equal(gm_bind_epoch_seed(b, 7 + GM_BIND_EPOCHS, &seed), 0);
	assert_true(seed == 5);
	assert_int_equal(gm_bind_first_epoch(b, 0, &epoch, &seed), 0);
	assert_int_equal(epoch, 8); /* the lowest epoch the table holds */
	gm_ring_stop(gm_bind_pool_ring(p));
	assert_int_equal(gm_bind_first_epoch(b, 1000, &epoch, &seed), -ENODATA);
	gm_bind_detach(b);
	gm_bind_pool_destroy(p); /* never started */
}

static void test_worker_side_refuses_what_is_out_of_range(void **state)
{
	(void)state;
	struct gm_ring *r;
	struct gm_bind *b;
	const uint32_t *idx;
	uint64_t task, cap;
	uint32_t epoch, batch;
	assert_int_equal(gm_ring_create(&r, 4, 3 + GM_BIND_IDS_HDR, 8, 0, 2), 0);
	assert_int_equal(gm_bind_attach(&b, gm_ring_fd(r)), 0);
	gm_ring_ctl(r, 0)->n = 4; /* a consumer that wrote nonsense: 4 > 3 */
	gm_ring_ids(r, 0)[0] = 9;
	gm_ring_ids(r, 0)[1] = 2;
	gm_ring_ids(r, 0)[2] = 55;
	int slot = gm_bind_claim(b, 0, &task);
	assert_int_equal(slot, 0);
	assert_int_equal(task, 0);
	assert_int_equal(GM_SLOT_PID(atomic_load(&gm_ring_ctl(r, 0)->state)),
			 (uint32_t)getpid() & 0xffffff); /* the lease is ours */
	assert_int_equal(gm_bind_indices(b, 0, &idx, &epoch, &batch), 0);
	gm_ring_ctl(r, 0)->n = 3;
	assert_int_equal(gm_bind_indices(b, 0, &idx, &epoch, &batch), 3);
	assert_int_equal(epoch, 9);
	assert_int_equal(batch, 2);
	assert_int_equal(idx[0], 55); /* the third word (another mapping of the ring) */
	assert_int_equal(gm_bind_done_count(b, 0), 0); /* a fresh task */
	assert_non_null(gm_bind_payload(b, 0, &cap));
	assert_int_equal(cap, 40);
	assert_int_equal(gm_bind_error(b, 0, 3, 7, -EIO, "x"), -EINVAL);
	assert_int_equal(gm_bind_error(b, 0, 2, 7, -EIO, "bad"), 0);
	assert_int_equal(gm_ring_ctl(r, 0)->n_errors, 1);
	assert_int_equal(atomic_load(gm_ring_err_bits(r, 0)), 4);
	/* the holder dies after position 0: the task's next holder resumes after it */
	gm_bind_done(b, 0, 0);
	assert_int_equal(gm_ring_reclaim(r, (uint32_t)getpid(), NULL), 1);
	assert_int_equal(gm_bind_claim(b, 0, &task), 0);
	assert_true(gm_bind_is_done(b, 0, 0));
	assert_false(gm_bind_is_done(b, 0, 1));
	assert_int_equal(gm_bind_done_count(b, 0), 1); /* a re-issue: one to resume after */
	assert_false(gm_bind_sample(b, 0, 55));
	gm_ring_quarantine(r, 55);
	assert_true(gm_bind_sample(b, 0, 55)); /* it says when a sample is quarantined */
	assert_false(gm_bind_sample(b, 0, UINT32_MAX));
	assert_false(gm_bind_is_done(b, 0, 3));		  /* beyond the batch */
	assert_int_equal(gm_ring_ctl(r, 0)->n_errors, 1); /* its records too */
	assert_int_equal(gm_bind_publish(b, 0, -EPERM), -EINVAL);
	assert_int_equal(GM_SLOT_STATE(atomic_load(&gm_ring_ctl(r, 0)->state)),
			 GM_SLOT_CLAIMED); /* nothing published */
	assert_int_equal(gm_bind_publish(b, 0, -EMSGSIZE), 0);
	assert_int_equal(gm_ring_wait_ready(r, 0, 0), 0);
	assert_int_equal(gm_bind_claim(b, 0, &task), 1);
	assert_int_equal(gm_bind_claim(b, 10, &task), -EAGAIN); /* both held, none free */
	gm_ring_release(r, 0);
	gm_ring_release(r, 1);
	assert_int_equal(gm_bind_claim(b, 10, &task), -ENODATA); /* tasks 0, 1 only */
	gm_bind_detach(b);
	gm_bind_detach(NULL);
	gm_ring_destroy(r);
}

/* Dealt claims (torch's round robin): worker w of n claims only the batches whose
 * number in their epoch (the slot's ids header) is w mod n, the next free one of
 * those; the others wait for their own worker, even when free. */
static void test_dealt_workers_claim_only_their_batches(void **state)
{
	(void)state;
	struct gm_ring *r;
	struct gm_bind *b0, *b1;
	uint64_t task;
	assert_int_equal(gm_ring_create(&r, 4, 3 + GM_BIND_IDS_HDR, 8, 0, 6), 0);
	for (uint32_t s = 0; s < 4; s++) {
		gm_ring_ctl(r, s)->n = 1;
		gm_ring_ids(r, s)[1] = s; /* task s is batch s of its epoch */
	}
	assert_int_equal(gm_bind_attach(&b0, gm_ring_fd(r)), 0);
	assert_int_equal(gm_bind_attach(&b1, gm_ring_fd(r)), 0);
	assert_int_equal(gm_bind_deal(b0, 2, 2), -EINVAL); /* no worker 2 of 2 */
	assert_int_equal(gm_bind_deal(b0, 2, 0), 0);
	assert_int_equal(gm_bind_deal(b1, 2, 1), 0);
	assert_int_equal(gm_bind_claim(b0, 0, &task), 0);
	assert_int_equal(task, 0);
	assert_int_equal(gm_bind_claim(b0, 0, &task), 2); /* not 1: batch 1 is b1's */
	assert_int_equal(task, 2);
	assert_int_equal(gm_bind_claim(b0, 10, &task), -EAGAIN); /* 1 and 3 free, not its */
	assert_int_equal(gm_bind_claim(b1, 0, &task), 1);
	assert_int_equal(gm_bind_claim(b1, 0, &task), 3);
	assert_int_equal(gm_bind_publish(b0, 0, 0), 0);
	assert_int_equal(gm_ring_wait_ready(r, 0, 0), 0);
	gm_ring_ids(r, 0)[1] = 4; /* the consumer's next batch for the slot: task 4 */
	gm_ring_release(r, 0);
	assert_int_equal(gm_bind_claim(b1, 10, &task), -EAGAIN);
	assert_int_equal(gm_bind_claim(b0, 0, &task), 0);
	assert_int_equal(task, 4);
	assert_int_equal(gm_bind_deal(b1, 1, 7), 0); /* n 1: any batch, whatever w */
	gm_bind_detach(b0);
	gm_bind_detach(b1);
	gm_ring_destroy(r);
}

/* A process forked from a worker (a dataset that spawns a helper, which then
 * returns into the worker's loop) has a copy of its handle and mapping, and the
 * lease word names the worker: it can neither claim, mark, record nor publish;
 * the worker publishes its own lease, and nothing after the pool took it back. */
static void test_fork_of_a_worker_cannot_claim_or_publish_its_lease(void **state)
{
	(void)state;
	struct gm_ring *r;
	struct gm_bind *b;
	uint64_t task;
	int status;
	assert_int_equal(gm_ring_create(&r, 4, 3 + GM_BIND_IDS_HDR, 8, 0, 2), 0);
	assert_int_equal(gm_bind_attach(&b, gm_ring_fd(r)), 0);
	gm_ring_ctl(r, 0)->n = 3;
	gm_ring_ctl(r, 1)->n = 3;
	assert_int_equal(gm_bind_claim(b, 0, &task), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) { /* each refusal a bit of the exit status: 0 when all hold */
		int bad = 0;
		bad |= (gm_bind_claim(b, 0, &task) != -EPERM) << 0;
		bad |= (gm_bind_publish(b, 0, 0) != -EPERM) << 1;
		gm_bind_done(b, 0, 1);
		bad |= (atomic_load(gm_ring_done_bits(r, 0)) != 0) << 2;
		bad |= (gm_bind_error(b, 0, 1, 7, -EIO, "child") != -EPERM) << 3;
		bad |= (atomic_load(gm_ring_err_bits(r, 0)) != 0) << 4;
		gm_bind_sample(b, 0, 7);
		bad |= (atomic_load(&gm_ring_ctl(r, 0)->cur_sample) == 7) << 5;
		_exit(bad);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	/* the lease is still the worker's: slot 1 unclaimed, slot 0 not published */
	assert_int_equal(GM_SLOT_STATE(atomic_load(&gm_ring_ctl(r, 0)->state)), GM_SLOT_CLAIMED);
	assert_int_equal(GM_SLOT_STATE(atomic_load(&gm_ring_ctl(r, 1)->state)), GM_SLOT_FREE);
	assert_int_equal(gm_bind_publish(b, 0, 0), 0);
	assert_int_equal(gm_ring_wait_ready(r, 0, 0), 0);
	/* a lease the pool took back (its deadline passed): nothing published */
	assert_int_equal(gm_bind_claim(b, 0, &task), 1);
	assert_int_equal(gm_ring_reclaim(r, (uint32_t)getpid(), NULL), 1);
	assert_int_equal(gm_bind_publish(b, 1, 0), -EPERM);
	assert_int_equal(GM_SLOT_STATE(atomic_load(&gm_ring_ctl(r, 1)->state)), GM_SLOT_FREE);
	gm_bind_detach(b);
	gm_ring_destroy(r);
}

static int setup(void **state)
{
	(void)state;
	if (gm_test_tmpdir(dir, sizeof(dir), "gm-bind"))
		return -1;
	snprintf(marker, sizeof(marker), "%s.stop", dir);
	setenv("GM_TEST_BIND_DIR", dir, 1);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	gm_test_rm_tree(dir);
	unlink(marker);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "--worker"))
		return worker_main(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "--zygote"))
		return zygote_main(argv[2]);
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return 1;
	self[n] = '\0';
	if (getenv("GM_TEST_ONLY")) /* one test by name (a glob), e.g. "test_fork*" */
		cmocka_set_test_filter(getenv("GM_TEST_ONLY"));
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_indices_reach_workers_and_payloads_come_back),
	    cmocka_unit_test(test_epoch_table_gives_workers_each_epochs_seed_and_nothing_else),
	    cmocka_unit_test(test_sigkilled_worker_mid_batch_loses_nothing),
	    cmocka_unit_test(test_stopped_lease_holder_loses_its_lease_at_the_deadline),
	    cmocka_unit_test(test_budget_grows_the_pool_for_a_hungry_consumer_and_shrinks_it),
	    cmocka_unit_test(test_sample_that_crashes_two_workers_is_quarantined),
	    cmocka_unit_test(test_replacements_fork_from_the_zygote_as_our_children),
	    cmocka_unit_test(test_orphans_of_others_do_not_become_our_zombies),
	    cmocka_unit_test(test_zygote_that_cannot_start_leaves_fresh_workers),
	    cmocka_unit_test(test_workers_have_ids_0_to_n_and_a_replacement_takes_the_dead_ones),
	    cmocka_unit_test(test_worker_fatal_error_reaches_the_consumer),
	    cmocka_unit_test(test_spec_fd_reaches_each_worker_as_fd_5_and_nothing_else),
	    cmocka_unit_test(test_node_pool_says_why_it_cannot_reach_the_agent),
	    cmocka_unit_test(test_command_that_cannot_run_is_an_error_naming_it),
	    cmocka_unit_test(test_tasks_given_after_start_reach_workers_and_none_is_claimed_empty),
	    cmocka_unit_test(test_kept_payloads_hold_their_slots_until_dropped),
	    cmocka_unit_test(test_consumer_refuses_what_is_out_of_range),
	    cmocka_unit_test(test_give_refuses_tasks_outside_the_window),
	    cmocka_unit_test(test_pin_registers_the_ring_or_says_there_is_no_gpu),
	    cmocka_unit_test(test_sparse_pool_allocates_only_what_workers_write_and_is_not_pinned),
	    cmocka_unit_test(test_worker_side_refuses_what_is_out_of_range),
	    cmocka_unit_test(test_dealt_workers_claim_only_their_batches),
	    cmocka_unit_test(test_fork_of_a_worker_cannot_claim_or_publish_its_lease),
	    cmocka_unit_test(test_what_a_worker_forked_ends_with_the_worker),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
