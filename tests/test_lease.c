/*
 * test_lease.c - no stuck run: a worker that holds a lease and stops
 * making progress (SIGSTOP) is killed after the lease deadline and its batch made
 * again with the same bytes; a sample that stalls workers twice is quarantined; a
 * worker killed between its claim and the start of its batch does not let the
 * next one trust the slot's previous batch; a transient read error is read again,
 * not substituted; a worker stopped while it holds no lease (the ring full) is
 * killed and replaced after the deadline (an idle stopped worker), while the whole job stopped
 * and continued (Ctrl-Z, fg) loses no worker; and `goldminer bench`
 * interrupted while its workers are stuck ends with 130 (SIGINT) or 143
 * (SIGTERM), its workers gone.
 *
 * The stops and kills happen inside the workers (forked from this binary) through
 * link-time wrapping, at a chosen sample or task, so each test is deterministic.
 * A hook that should fire once creates a marker file with O_EXCL: the first
 * worker to get there wins, across processes.
 */
// LDFLAGS: -Wl,--wrap=gm_aug_sample -Wl,--wrap=gm_ring_claim -Wl,--wrap=gm_reader_read_at
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "goldminer/aug.h"
#include "goldminer/checksum.h"
#include "goldminer/loader.h"
#include "goldminer/reader.h"
#include "goldminer/ring.h"
#include "goldminer/synth.h"
#include "testutil.h"

#define N_IMAGES 96
#define BATCH	 8
#define DEADLINE 60 /* s: a test that is not done by then has hung (SIGALRM) */

static char dir[64];
static char marker[128]; /* a hook meant to fire once fires for whoever creates it */

/* Hooks, set before the loader forks so the workers inherit them. */
static uint64_t stop_id = UINT64_MAX;	/* SIGSTOP the worker decoding this sample */
static bool stop_once;			/* ... the first time only */
static uint64_t kill_task = UINT64_MAX; /* SIGKILL the worker right after claiming it */
static const char *enomem_path;		/* deliver this file's first read as -ENOMEM */
static bool stop_when_full;		/* SIGSTOP the first worker that finds no free slot */
static uint64_t spin_id = UINT64_MAX;	/* spend 1.5 s running on this sample, once */

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static bool first_time(void)
{
	int fd = open(marker, O_CREAT | O_EXCL | O_WRONLY, 0600);
	if (fd < 0)
		return false;
	close(fd);
	return true;
}

int __real_gm_aug_sample(struct gm_aug *a, const void *jpeg, size_t len, uint64_t seed,
			 uint64_t epoch, uint64_t sample_id, void *out, struct gm_aug_times *t);
int __wrap_gm_aug_sample(struct gm_aug *a, const void *jpeg, size_t len, uint64_t seed,
			 uint64_t epoch, uint64_t sample_id, void *out, struct gm_aug_times *t);
int __wrap_gm_aug_sample(struct gm_aug *a, const void *jpeg, size_t len, uint64_t seed,
			 uint64_t epoch, uint64_t sample_id, void *out, struct gm_aug_times *t)
{
	if (sample_id == stop_id && (!stop_once || first_time()))
		raise(SIGSTOP); /* stuck while holding the lease, as a kill -STOP leaves it */
	if (sample_id == spin_id && first_time()) {
		/* A slow sample: 1.5 s of its own running time. Not CPU time, which a
		 * loaded machine hands out slowly (on 2 busy cores the rest of the sample
		 * outlasted the deadline after the stop); wall time in 10-ms sleeps, where
		 * a gap over 200 ms is time stopped and does not count. */
		uint64_t ran = 0, prev = mono_ms();
		while (ran < 1500) {
			sleep_ms(10);
			uint64_t now = mono_ms();
			if (now - prev < 200)
				ran += now - prev;
			prev = now;
		}
	}
	return __real_gm_aug_sample(a, jpeg, len, seed, epoch, sample_id, out, t);
}

int __real_gm_ring_claim(struct gm_ring *r, uint32_t pid, uint64_t *task);
int __wrap_gm_ring_claim(struct gm_ring *r, uint32_t pid, uint64_t *task);
int __wrap_gm_ring_claim(struct gm_ring *r, uint32_t pid, uint64_t *task)
{
	int slot = __real_gm_ring_claim(r, pid, task);
	if (slot >= 0 && *task == kill_task && first_time())
		raise(SIGKILL); /* leased, but the batch not begun */
	if (slot == -EAGAIN && stop_when_full && first_time())
		raise(SIGSTOP); /* idle: every slot is published, none is leased to it */
	return slot;
}

/* The reader's callback, with one file's first delivery replaced by -ENOMEM. */
struct shim {
	gm_reader_fn fn;
	void *arg;
	const char *const *paths;
};

static int shim_cb(void *arg, unsigned i, const void *data, size_t len, int err)
{
	struct shim *s = arg;
	if (!err && enomem_path && !strcmp(s->paths[i], enomem_path) && first_time())
		return s->fn(s->arg, i, NULL, 0, -ENOMEM);
	return s->fn(s->arg, i, data, len, err);
}

int __real_gm_reader_read_at(struct gm_reader *r, const char *const *paths, const uint64_t *offsets,
			     const uint64_t *lengths, unsigned n, gm_reader_fn fn, void *arg);
int __wrap_gm_reader_read_at(struct gm_reader *r, const char *const *paths, const uint64_t *offsets,
			     const uint64_t *lengths, unsigned n, gm_reader_fn fn, void *arg);
int __wrap_gm_reader_read_at(struct gm_reader *r, const char *const *paths, const uint64_t *offsets,
			     const uint64_t *lengths, unsigned n, gm_reader_fn fn, void *arg)
{
	struct shim s = {fn, arg, paths};
	return __real_gm_reader_read_at(r, paths, offsets, lengths, n, shim_cb, &s);
}

static int setup(void **state)
{
	(void)state;
	char err[256];
	if (gm_test_tmpdir(dir, sizeof(dir), "gm-lease"))
		return -1;
	snprintf(marker, sizeof(marker), "%s/marker", dir);
	return gm_synth_write(dir, N_IMAGES, 3, 13, 0, NULL, err, sizeof(err)) ? -1 : 0;
}

static int teardown(void **state)
{
	(void)state;
	gm_test_rm_tree(dir);
	return 0;
}

/* Each test: no hook armed, no marker, and a deadline. */
static int arm(void **state)
{
	(void)state;
	stop_id = kill_task = spin_id = UINT64_MAX;
	stop_once = false;
	enomem_path = NULL;
	stop_when_full = false;
	unlink(marker);
	alarm(DEADLINE);
	return 0;
}

static int disarm(void **state)
{
	(void)state;
	alarm(0);
	stop_id = kill_task = spin_id = UINT64_MAX;
	enomem_path = NULL;
	stop_when_full = false;
	return 0;
}

static void opts(struct gm_loader_opts *o, int workers)
{
	gm_loader_opts_default(o);
	o->root = dir;
	o->workers = workers;
	o->batch_size = BATCH;
	o->aug.size = 32;
	o->seed = 3;
	o->epochs = 2;
	o->no_pin = true;
	o->slots = 4;
	o->lease_timeout_ms = 300;
}

/* Every batch's hash (data, labels, ids) in order; the stats; rc of the run. */
static int run(const struct gm_loader_opts *o, uint64_t *h, int max, int *n,
	       struct gm_loader_stats *st)
{
	struct gm_loader *l;
	char err[512];
	int rc = gm_loader_open(&l, o, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "open: %s\n", err);
		return rc;
	}
	struct gm_batch b;
	*n = 0;
	while ((rc = gm_loader_next(l, &b)) != GM_LOADER_END) {
		if (rc == GM_LOADER_END_OF_EPOCH)
			continue;
		if (rc < 0)
			break;
		uint64_t x = gm_test_batch_hash(&b);
		if (*n < max)
			h[*n] = x;
		(*n)++;
	}
	gm_loader_stats(l, st);
	gm_loader_close(l);
	return rc < 0 ? rc : 0;
}

/* Run with stderr into a file; its text (first bytes) into text. */
static int run_capturing(const struct gm_loader_opts *o, uint64_t *h, int max, int *n,
			 struct gm_loader_stats *st, char *text, size_t len)
{
	char path[128];
	snprintf(path, sizeof(path), "%s/stderr", dir);
	fflush(stderr);
	int saved = dup(2), fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0600);
	assert_true(saved >= 0 && fd >= 0);
	dup2(fd, 2);
	int rc = run(o, h, max, n, st);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	ssize_t got = pread(fd, text, len - 1, 0);
	text[got > 0 ? got : 0] = '\0';
	close(fd);
	fputs(text, stderr); /* still shown */
	return rc;
}

static uint64_t ref[64];
static int nref;

static void reference(void)
{
	struct gm_loader_opts o;
	struct gm_loader_stats st;
	if (nref)
		return;
	opts(&o, 2);
	assert_int_equal(run(&o, ref, 64, &nref, &st), 0);
	assert_int_equal(nref, 2 * N_IMAGES / BATCH);
	assert_int_equal(st.errors, 0);
}

static void test_stopped_worker_is_killed_and_its_batch_made_again(void **state)
{
	(void)state;
	struct gm_loader_opts o;
	struct gm_loader_stats st;
	uint64_t h[64];
	int n;
	char text[4096];
	reference();
	opts(&o, 2);
	stop_id = 21;
	stop_once = true;
	assert_int_equal(run_capturing(&o, h, 64, &n, &st, text, sizeof(text)), 0);
	assert_int_equal(n, nref);
	assert_memory_equal(h, ref, sizeof(ref[0]) * (size_t)n); /* same bytes, exactly once */
	assert_int_equal(st.errors, 0);
	assert_true(st.worker_deaths >= 1);
	assert_true(st.reissued >= 1);
	/* the user is told which sample it was stuck on */
	assert_non_null(strstr(text, "made no progress"));
	assert_non_null(strstr(text, "(sample 21)"));
	assert_non_null(strstr(text, dir));
}

static void test_sample_that_stalls_twice_is_quarantined(void **state)
{
	(void)state;
	struct gm_loader_opts o;
	struct gm_loader_stats st;
	struct gm_loader *l;
	struct gm_batch b;
	char err[512];
	opts(&o, 2);
	o.epochs = 1;
	stop_id = 21; /* every time */
	assert_int_equal(gm_loader_open(&l, &o, err, sizeof(err)), 0);
	int rc, seen = 0;
	uint32_t total = 0;
	while ((rc = gm_loader_next(l, &b)) == 0) {
		total += b.size;
		for (uint32_t i = 0; i < b.size; i++)
			seen |= b.sample_ids[i] == 21;
	}
	assert_int_equal(rc, GM_LOADER_END_OF_EPOCH);
	assert_int_equal(total, N_IMAGES);
	assert_false(seen); /* replaced like a bad file */
	gm_loader_stats(l, &st);
	assert_int_equal(st.errors, 1);
	assert_true(st.worker_deaths >= 2);
	const char *path, *msg;
	assert_int_equal(gm_loader_error(l, 0, &path, &msg), 0);
	assert_non_null(strstr(msg, "stalled"));
	assert_non_null(strstr(path, dir));
	gm_loader_close(l);
}

/* The slot of task 5 (4 slots) still holds the done bits of task 1: the worker
 * that takes task 5 over from one killed before it began must not trust them. */
static void test_kill_between_claim_and_start_loses_nothing(void **state)
{
	(void)state;
	struct gm_loader_opts o;
	struct gm_loader_stats st;
	uint64_t h[64];
	int n;
	reference();
	opts(&o, 2);
	kill_task = 5;
	assert_int_equal(run(&o, h, 64, &n, &st), 0);
	assert_true(access(marker, F_OK) == 0); /* the hook fired */
	assert_int_equal(n, nref);
	assert_memory_equal(h, ref, sizeof(ref[0]) * (size_t)n);
	assert_true(st.worker_deaths >= 1);
}

/* -ENOMEM says nothing about the file: it is read again, not substituted. */
static void test_transient_read_error_is_read_again(void **state)
{
	(void)state;
	struct gm_loader_opts o;
	struct gm_loader_stats st;
	uint64_t h[64];
	int n;
	char path[128];
	reference();
	opts(&o, 2);
	snprintf(path, sizeof(path), "%s/class_01/img_000034.jpg", dir);
	assert_int_equal(access(path, R_OK), 0);
	enomem_path = path;
	assert_int_equal(run(&o, h, 64, &n, &st), 0);
	assert_true(access(marker, F_OK) == 0); /* the hook fired */
	assert_int_equal(st.errors, 0);
	assert_int_equal(n, nref);
	assert_memory_equal(h, ref, sizeof(ref[0]) * (size_t)n);
}

/* The pids of the children of pid's threads (its workers), up to max. */
static int workers_of(pid_t pid, pid_t *out, int max)
{
	char p[96];
	int n = 0;
	snprintf(p, sizeof(p), "/proc/%d/task", (int)pid);
	DIR *d = opendir(p);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char cp[320];
		snprintf(cp, sizeof(cp), "/proc/%d/task/%s/children", (int)pid, e->d_name);
		FILE *f = fopen(cp, "r");
		int c;
		while (f && n < max && fscanf(f, "%d", &c) == 1)
			out[n++] = c;
		if (f)
			fclose(f);
	}
	if (d)
		closedir(d);
	return n;
}

/* Is pid's main thread asleep in a futex (the consumer's wait)? */
static bool in_futex(pid_t pid)
{
	char p[64], w[64] = "";
	snprintf(p, sizeof(p), "/proc/%d/wchan", (int)pid);
	FILE *f = fopen(p, "r");
	if (f) {
		if (!fgets(w, sizeof(w), f))
			w[0] = '\0';
		fclose(f);
	}
	return strstr(w, "futex") != NULL;
}

/* Is pid stopped (state 'T' in /proc/PID/stat)? */
static bool is_stopped(pid_t pid)
{
	char p[64], buf[512];
	snprintf(p, sizeof(p), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(p, "r");
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
	if (f)
		fclose(f);
	buf[n] = '\0';
	const char *c = strrchr(buf, ')');
	return c && c[1] == ' ' && c[2] == 'T';
}

/* The only worker stops itself when it finds the ring full, holding no lease, and
 * the consumer takes nothing for a while: the pool kills and replaces it within a
 * few deadlines, and the run then delivers the same bytes as a clean one. */
static void test_worker_stopped_without_a_lease_is_replaced(void **state)
{
	(void)state;
	struct gm_loader_opts o;
	struct gm_loader *l;
	struct gm_loader_stats st;
	struct gm_batch b;
	uint64_t h[64];
	char err[512], path[128], text[4096];
	int n = 0, rc;
	pid_t wk[4];
	reference();
	opts(&o, 1);
	stop_when_full = true;
	snprintf(path, sizeof(path), "%s/stderr", dir);
	fflush(stderr);
	int saved = dup(2), fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0600);
	assert_true(saved >= 0 && fd >= 0);
	dup2(fd, 2);
	rc = gm_loader_open(&l, &o, err, sizeof(err));
	/* the worker fills the 4 slots, then stops itself: no lease, the ring full */
	int nw = 0;
	for (int i = 0; i < 500 && !(nw == 1 && is_stopped(wk[0])); i++) {
		sleep_ms(10);
		nw = workers_of(getpid(), wk, 4);
	}
	pid_t stopped = nw == 1 && is_stopped(wk[0]) ? wk[0] : 0;
	/* replaced within 5 s (the deadline is 300 ms): the stopped one is gone */
	uint64_t t0 = mono_ms();
	bool gone = false;
	while (stopped && !gone && mono_ms() - t0 < 5000) {
		sleep_ms(10);
		gone = kill(stopped, 0) < 0 && errno == ESRCH;
	}
	if (stopped && !gone)
		kill(stopped, SIGKILL); /* leave no stopped process behind the failure */
	bool opened = rc == 0;
	while (opened && (rc = gm_loader_next(l, &b)) != GM_LOADER_END) {
		if (rc == GM_LOADER_END_OF_EPOCH)
			continue;
		if (rc < 0)
			break;
		if (n < 64)
			h[n] = gm_test_batch_hash(&b);
		n++;
	}
	if (rc != GM_LOADER_END)
		fprintf(stderr, "next: %d %s\n", rc, gm_loader_errmsg(l));
	gm_loader_stats(l, &st);
	gm_loader_close(l);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	ssize_t got = pread(fd, text, sizeof(text) - 1, 0);
	text[got > 0 ? got : 0] = '\0';
	close(fd);
	fputs(text, stderr);
	assert_int_not_equal(stopped, 0); /* the hook fired where it should */
	assert_true(gone);
	assert_int_equal(rc, GM_LOADER_END);
	assert_int_equal(n, nref);
	assert_memory_equal(h, ref, sizeof(ref[0]) * (size_t)n);
	assert_true(st.worker_deaths >= 1);
	assert_int_equal(st.reissued, 0); /* it held nothing */
	assert_non_null(strstr(text, "was stopped for 300 ms without a lease"));
}

/* The whole job stopped (Ctrl-Z: its process group) for longer than the lease
 * deadline while a worker is in the middle of a slow sample (1.5 s of running; the
 * deadline is 3 s and the pool has looked at the lease before the stop), then
 * continued: the pool did not run either, so no deadline passed, and no worker
 * is killed. */
static void test_job_stopped_and_continued_as_a_whole_kills_no_worker(void **state)
{
	(void)state;
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct gm_loader_opts o;
		struct gm_loader_stats st;
		uint64_t h[64];
		int n;
		alarm(0);
		setpgid(0, 0); /* a job of its own, as a shell makes one */
		opts(&o, 2);
		o.lease_timeout_ms = 3000;
		spin_id = 21;
		int rc = run(&o, h, 64, &n, &st);
		_exit(rc ? 100 : st.worker_deaths > 99 ? 99 : (int)st.worker_deaths);
	}
	setpgid(pid, pid); /* (either side may be first) */
	for (int i = 0; i < 1000 && access(marker, F_OK); i++)
		sleep_ms(5); /* until a worker is in the slow sample */
	bool spun = access(marker, F_OK) == 0;
	sleep_ms(1000); /* the pool looks every 750 ms: it has seen the slow sample */
	kill(-pid, SIGSTOP);
	sleep_ms(4000); /* longer than the deadline */
	kill(-pid, SIGCONT);
	int status = 0;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(spun);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0); /* the run ended well, no worker died */
}

/* bench with every worker stopped (lease deadline far away), then sig: the exit
 * status is 128 + sig and no worker is left. */
static void bench_interrupted(int sig)
{
	char root[96];
	snprintf(root, sizeof(root), "%s", dir);
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		alarm(0);
		int fd = open("/dev/null", O_WRONLY);
		dup2(fd, 1);
		char *argv[] = {"bench",    root,     "--workers", "2",
				"--epochs", "100000", "--batch",   "8",
				"--size",   "32",     "--quiet",   "--lease-timeout-ms",
				"3600000",  NULL};
		_exit(gm_cmd_bench(13, argv));
	}
	pid_t wk[8];
	int n = 0;
	for (int i = 0; i < 400 && n < 2; i++) {
		sleep_ms(10);
		n = workers_of(pid, wk, 8);
	}
	assert_int_equal(n, 2);
	for (int i = 0; i < n; i++)
		kill(wk[i], SIGSTOP);
	/* the ring drains, then the consumer waits for a batch that cannot come */
	for (int i = 0; i < 500 && !in_futex(pid); i++)
		sleep_ms(10);
	sleep_ms(200);
	kill(pid, sig);
	int status = 0;
	pid_t got = 0;
	for (int i = 0; i < 2000 && got == 0; i++) { /* 20 s: never a timing claim */
		got = waitpid(pid, &status, WNOHANG);
		if (!got)
			sleep_ms(10);
	}
	if (got == 0) { /* the wait ignored the signal: clean up, then fail */
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		for (int i = 0; i < n; i++)
			kill(wk[i], SIGKILL);
	}
	assert_int_equal(got, pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 128 + sig);
	for (int i = 0; i < n; i++) {
		char p[64];
		snprintf(p, sizeof(p), "/proc/%d", (int)wk[i]);
		struct stat st;
		assert_int_not_equal(stat(p, &st), 0); /* reaped by bench, not left behind */
	}
}

static void test_bench_interrupted_while_workers_are_stuck_exits_130(void **state)
{
	(void)state;
	bench_interrupted(SIGINT);
}

static void test_bench_terminated_while_workers_are_stuck_exits_143(void **state)
{
	(void)state;
	bench_interrupted(SIGTERM);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(
		test_bench_interrupted_while_workers_are_stuck_exits_130, arm, disarm),
	    cmocka_unit_test_setup_teardown(test_bench_terminated_while_workers_are_stuck_exits_143,
					    arm, disarm),
	    cmocka_unit_test_setup_teardown(test_kill_between_claim_and_start_loses_nothing, arm,
					    disarm),
	    cmocka_unit_test_setup_teardown(test_sample_that_stalls_twice_is_quarantined, arm,
					    disarm),
	    cmocka_unit_test_setup_teardown(test_stopped_worker_is_killed_and_its_batch_made_again,
					    arm, disarm),
	    cmocka_unit_test_setup_teardown(test_transient_read_error_is_read_again, arm, disarm),
	    cmocka_unit_test_setup_teardown(test_worker_stopped_without_a_lease_is_replaced, arm,
					    disarm),
	    cmocka_unit_test_setup_teardown(
		test_job_stopped_and_continued_as_a_whole_kills_no_worker, arm, disarm),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
