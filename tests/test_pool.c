/*
 * test_pool.c - the worker pool (core/pool.c) on its own: a pool made here and
 * its ring read directly, no loader.
 *
 * What its contract promises: gm_pool_check and gm_pool_tasks refuse a job that
 * cannot run or delivers nothing, with a message; gm_pool_cfg_init takes the
 * options (and the default lease); gm_pool_create sizes the ring and refuses bad
 * slots and a ring that does not fit in memory; gm_pool_start returns once the
 * first workers are forked, or -errno with why; the size follows set_target/fix
 * (clamped), a smaller size retires workers (counted by gm_pool_retiring until
 * reaped); a SIGKILLed worker is reaped, its lease re-issued and it is replaced,
 * and the batch it held arrives with the bytes gm_worker_produce makes; stop
 * reaps every worker and keeps the ring; hand_over retires them without stopping
 * the ring, gives a killed straggler's lease back, and another pool over the
 * same ring goes on; destroy(NULL) does nothing.
 * A sample can be made to stall a worker once (a marker file, gm_aug_sample
 * wrapped), so that a worker holds a lease when the test wants one.
 * The end-to-end properties (chaos, lease deadline, elastic sizing) are
 * test_chaos', test_lease's and test_elastic's.
 */
// LDFLAGS: -Wl,--wrap=gm_aug_sample -Wl,--wrap=gm_ring_attach
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
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "goldminer/dataset.h"
#include "goldminer/limits.h"
#include "goldminer/loader.h" /* gm_loader_opts_default */
#include "goldminer/pool.h"
#include "goldminer/ring.h"
#include "goldminer/synth.h"
#include "goldminer/worker.h"
#include "testutil.h"

#define N     22
#define BATCH 4

static char base[64], data[128], marker[128];
static uint32_t stall_id = UINT32_MAX; /* the sample that stalls a worker once */

/* While the marker file exists, the first worker to reach stall_id removes it
 * and stops there for good (it still takes SIGUSR1; only SIGKILL ends it). */
int __real_gm_aug_sample(struct gm_aug *a, const void *jpeg, size_t len, uint64_t seed,
			 uint64_t epoch, uint64_t sample_id, void *out, struct gm_aug_times *t);
int __wrap_gm_aug_sample(struct gm_aug *a, const void *jpeg, size_t len, uint64_t seed,
			 uint64_t epoch, uint64_t sample_id, void *out, struct gm_aug_times *t);
int __wrap_gm_aug_sample(struct gm_aug *a, const void *jpeg, size_t len, uint64_t seed,
			 uint64_t epoch, uint64_t sample_id, void *out, struct gm_aug_times *t)
{
	if (sample_id == stall_id && unlink(marker) == 0)
		for (;;)
			pause();
	return __real_gm_aug_sample(a, jpeg, len, seed, epoch, sample_id, out, t);
}

/* While the hang marker exists, the first worker to attach its ring removes it and
 * never gets made (as a child that inherited a lock held at fork would). */
static char hang[128];
int __real_gm_ring_attach(struct gm_ring **out, int fd);
int __wrap_gm_ring_attach(struct gm_ring **out, int fd);
int __wrap_gm_ring_attach(struct gm_ring **out, int fd)
{
	if (hang[0] && unlink(hang) == 0)
		for (;;)
			pause();
	return __real_gm_ring_attach(out, fd);
}

static int setup(void **state)
{
	char err[256];
	(void)state;
	if (gm_test_tmpdir(base, sizeof(base), "gm-pool"))
		return -1;
	snprintf(data, sizeof(data), "%s/data", base);
	snprintf(marker, sizeof(marker), "%s/stall", base);
	snprintf(hang, sizeof(hang), "%s/hang", base);
	return gm_synth_write(data, N, 2, 21, 60, NULL, err, sizeof(err)) ? -1 : 0;
}

static int teardown(void **state)
{
	(void)state;
	gm_test_rm_tree(base);
	return 0;
}

static void options(struct gm_loader_opts *o)
{
	gm_loader_opts_default(o);
	o->root = data;
	o->batch_size = BATCH;
	o->aug.size = 32;
	o->seed = 9;
	o->shuffle = false;
	o->epochs = 1;
}

/* This process's children (the workers the coordinator thread forked). */
static int children(pid_t *out, int max)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	int n = 0;
	char path[64], buf[512];
	assert_non_null(d);
	while ((e = readdir(d))) {
		int pid = atoi(e->d_name), ppid = 0;
		if (pid <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/stat", pid);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		size_t len = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[len] = 0;
		char *rp = strrchr(buf, ')'); /* after the command name: " S ppid" */
		if (rp && sscanf(rp + 1, " %*c %d", &ppid) == 1 && ppid == getpid() && n < max)
			out[n++] = pid;
	}
	closedir(d);
	return n;
}

/* Wait (60 s at most: a loaded machine) until *v == want. */
static void wait_u32(_Atomic uint32_t *v, uint32_t want, const char *what)
{
	for (int k = 0; k < 6000; k++) {
		if (atomic_load(v) == want)
			return;
		usleep(10000);
	}
	fail_msg("%s: %u, not %u, after 60 s", what, atomic_load(v), want);
}

static void wait_u64(_Atomic uint64_t *v, uint64_t want, const char *what)
{
	for (int k = 0; k < 6000; k++) {
		if (atomic_load(v) == want)
			return;
		usleep(10000);
	}
	fail_msg("%s: %llu, not %llu, after 60 s", what, (unsigned long long)atomic_load(v),
		 (unsigned long long)want);
}

/* A pool of the job o over ds, created (not started). */
static struct gm_pool *pool_of(const struct gm_loader_opts *o, struct gm_dataset *ds, int workers)
{
	struct gm_pool_cfg c;
	struct gm_pool *p;
	uint32_t bpe;
	uint64_t first, end;
	char err[512];
	if (gm_pool_tasks(o, ds, &bpe, &first, &end, err, sizeof(err)))
		fail_msg("%s", err);
	gm_pool_cfg_init(&c, o, ds, bpe, first, end);
	c.workers = workers;
	c.lease_timeout_ms = 0; /* a stalled worker stays stalled */
	if (gm_pool_create(&p, &c, err, sizeof(err)))
		fail_msg("%s", err);
	return p;
}

static struct gm_dataset *open_data(void)
{
	struct gm_dataset *ds;
	char err[256];
	if (gm_dataset_open(&ds, data, err, sizeof(err)))
		fail_msg("%s", err);
	return ds;
}

/* The checks that need no index refuse each bad option with a message. */
static void test_check_refuses_what_no_worker_can_make(void **state)
{
	struct gm_loader_opts o;
	char err[512];
	(void)state;
	options(&o);
	assert_int_equal(gm_pool_check(&o, err, sizeof(err)), 0);
	o.batch_size = 0;
	err[0] = 0;
	assert_int_equal(gm_pool_check(&o, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "batch_size"));
	o.batch_size = GM_MAX_BATCH + 1;
	assert_int_equal(gm_pool_check(&o, err, sizeof(err)), -EINVAL);
	o.batch_size = GM_MAX_BATCH;
	assert_int_equal(gm_pool_check(&o, err, sizeof(err)), 0);
	options(&o);
	o.aug.size = 0;
	err[0] = 0;
	assert_int_equal(gm_pool_check(&o, err, sizeof(err)), -EINVAL);
	assert_true(err[0] != 0);
	options(&o);
	o.lease_timeout_ms = GM_MAX_LEASE_MS + 1;
	err[0] = 0;
	assert_int_equal(gm_pool_check(&o, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "lease_timeout_ms"));
	o.lease_timeout_ms = GM_MAX_LEASE_MS;
	assert_int_equal(gm_pool_check(&o, err, sizeof(err)), 0);
}

/* A job's lease deadline: 0 is the default, anything else itself; the range
 * check's words name the default and the bound (the pool's and the node agent's). */
static void test_lease_deadline_default_and_range(void **state)
{
	char err[128];
	(void)state;
	assert_int_equal(gm_lease_ms(0), GM_LEASE_TIMEOUT_MS);
	assert_int_equal(gm_lease_ms(7), 7);
	assert_int_equal(gm_lease_ms(GM_MAX_LEASE_MS), GM_MAX_LEASE_MS);
	assert_int_equal(gm_pool_lease_check(0, err, sizeof(err)), 0);
	assert_int_equal(gm_pool_lease_check(GM_MAX_LEASE_MS, err, sizeof(err)), 0);
	assert_int_equal(gm_pool_lease_check(GM_MAX_LEASE_MS + 1, err, sizeof(err)), -EINVAL);
	assert_string_equal(err,
			    "lease_timeout_ms must be 0 (default 5000) .. 86400000, not 86400001");
}

/* Batches per epoch with and without drop_last, the first and the end task; a job
 * that delivers nothing is refused. */
static void test_tasks_of_a_job(void **state)
{
	struct gm_loader_opts o;
	struct gm_dataset *ds = open_data();
	uint32_t bpe;
	uint64_t first, end;
	char err[512];
	(void)state;
	options(&o);
	o.epochs = 3;
	o.start_batch = 2;
	assert_int_equal(gm_pool_tasks(&o, ds, &bpe, &first, &end, err, sizeof(err)), 0);
	assert_int_equal(bpe, (N + BATCH - 1) / BATCH);
	assert_true(first == 2 && end == 3ull * bpe);
	o.drop_last = true;
	assert_int_equal(gm_pool_tasks(&o, ds, &bpe, &first, &end, err, sizeof(err)), 0);
	assert_int_equal(bpe, N / BATCH);
	o.epochs = 0;
	assert_int_equal(gm_pool_tasks(&o, ds, &bpe, &first, &end, err, sizeof(err)), 0);
	assert_true(end == GM_RING_NO_END);
	o.start_batch = N / BATCH; /* past the last batch of the epoch */
	err[0] = 0;
	assert_int_equal(gm_pool_tasks(&o, ds, &bpe, &first, &end, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "start_batch"));
	o.start_batch = 0;
	o.batch_size = N + 1; /* drop_last: no full batch */
	err[0] = 0;
	assert_int_equal(gm_pool_tasks(&o, ds, &bpe, &first, &end, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, data));
	o.drop_last = false; /* one short batch */
	assert_int_equal(gm_pool_tasks(&o, ds, &bpe, &first, &end, err, sizeof(err)), 0);
	assert_int_equal(bpe, 1);
	gm_dataset_close(ds);
}

/* The configuration takes the job's options; a lease of 0 is the default. */
static void test_cfg_init_takes_the_options(void **state)
{
	struct gm_loader_opts o;
	struct gm_pool_cfg c;
	struct gm_dataset *ds = open_data();
	(void)state;
	options(&o);
	o.seed = 77;
	o.epoch = 4;
	o.shuffle = true;
	o.on_error = GM_ON_ERROR_FAIL;
	o.slots = 8;
	o.workers = 3;
	o.chaos_kill_ms = 50;
	o.lease_timeout_ms = 0;
	gm_pool_cfg_init(&c, &o, ds, 6, 2, 18);
	assert_ptr_equal(c.w.ds, ds);
	assert_null(c.w.ring);
	assert_memory_equal(&c.w.aug, &o.aug, sizeof(o.aug));
	assert_true(c.w.seed == 77 && c.w.epoch0 == 4 && c.w.batch_size == BATCH);
	assert_true(c.w.batches_per_epoch == 6 && c.w.shuffle && c.w.on_error == GM_ON_ERROR_FAIL);
	assert_true(c.first_task == 2 && c.end_task == 18);
	assert_true(c.slots == 8 && c.workers == 3 && c.chaos_kill_ms == 50);
	assert_false(c.autoscale);
	assert_int_equal(c.lease_timeout_ms, GM_LEASE_TIMEOUT_MS);
	o.lease_timeout_ms = 1234;
	gm_pool_cfg_init(&c, &o, ds, 6, 2, 18);
	assert_int_equal(c.lease_timeout_ms, 1234);
	gm_dataset_close(ds);
}

/* Slots: automatic (twice the first pool, a power of two, at least
 * GM_MIN_SLOTS), or a power of two up to GM_MAX_SLOTS; a ring that does not fit
 * in memory is refused before it is made; destroy(NULL) does nothing. */
static void test_create_sizes_the_ring_and_refuses_bad_sizes(void **state)
{
	struct gm_loader_opts o;
	struct gm_pool_cfg c;
	struct gm_pool *p = (struct gm_pool *)1;
	struct gm_dataset *ds = open_data();
	char err[512];
	(void)state;
	options(&o);
	gm_pool_cfg_init(&c, &o, ds, 6, 0, 6);
	c.slots = 0;
	c.workers = 3;
	assert_int_equal(gm_pool_create(&p, &c, err, sizeof(err)), 0);
	assert_int_equal(gm_ring_hdr(gm_pool_ring(p))->nslots, 8);
	assert_int_equal(gm_ring_hdr(gm_pool_ring(p))->batch_size, BATCH);
	gm_pool_destroy(p);
	c.workers = 1;
	assert_int_equal(gm_pool_create(&p, &c, err, sizeof(err)), 0);
	assert_int_equal(gm_ring_hdr(gm_pool_ring(p))->nslots, GM_MIN_SLOTS);
	gm_pool_destroy(p);
	c.slots = 6;
	err[0] = 0;
	assert_int_equal(gm_pool_create(&p, &c, err, sizeof(err)), -EINVAL);
	assert_null(p);
	assert_non_null(strstr(err, "slots"));
	c.slots = GM_MAX_SLOTS * 2;
	assert_int_equal(gm_pool_create(&p, &c, err, sizeof(err)), -EINVAL);
	c.slots = 4;
	setenv("GM_MEM_LIMIT", "64K", 1);
	err[0] = 0;
	assert_int_equal(gm_pool_create(&p, &c, err, sizeof(err)), -ENOMEM);
	unsetenv("GM_MEM_LIMIT");
	assert_null(p);
	assert_true(err[0] != 0);
	gm_pool_destroy(NULL);
	gm_dataset_close(ds);
}

/*
 * Start forks the first workers before it returns; the size follows
 * set_target and fix, clamped to 0..GM_MAX_WORKERS; a smaller size retires
 * workers cleanly (no death counted); stop reaps every one and keeps the ring.
 */
static void test_size_follows_the_target(void **state)
{
	struct gm_loader_opts o;
	struct gm_dataset *ds = open_data();
	pid_t kids[16];
	char err[512];
	(void)state;
	options(&o);
	o.epochs = 0;
	struct gm_pool *p = pool_of(&o, ds, 2);
	struct gm_ring_hdr *h = gm_ring_hdr(gm_pool_ring(p));
	/* not started: the target is only recorded, and clamped */
	gm_pool_set_target(p, -4);
	assert_int_equal(atomic_load(&h->p_target), 0);
	gm_pool_fix(p, GM_MAX_WORKERS + 100);
	assert_int_equal(atomic_load(&h->p_target), GM_MAX_WORKERS);
	gm_pool_set_target(p, GM_MAX_WORKERS + 1);
	assert_int_equal(atomic_load(&h->p_target), GM_MAX_WORKERS);
	gm_pool_fix(p, 2);
	assert_int_equal(children(kids, 16), 0);

	assert_int_equal(gm_pool_start(p, err, sizeof(err)), 0);
	assert_int_equal(atomic_load(&h->p_alive), 2);
	assert_int_equal(children(kids, 16), 2);
	gm_pool_set_target(p, 3);
	wait_u32(&h->p_alive, 3, "p_alive after set_target(3)");
	gm_pool_set_target(p, 1);
	wait_u32(&h->p_alive, 1, "p_alive after set_target(1)");
	assert_int_equal(gm_pool_retiring(p), 0);
	gm_pool_fix(p, 0); /* parked */
	wait_u32(&h->p_alive, 0, "p_alive after fix(0)");
	assert_int_equal(atomic_load(&h->p_deaths), 0);
	gm_pool_fix(p, 2);
	wait_u32(&h->p_alive, 2, "p_alive after fix(2)");
	gm_pool_stop(p);
	gm_pool_stop(p); /* idempotent */
	assert_int_equal(atomic_load(&h->p_alive), 0);
	assert_int_equal(children(kids, 16), 0);
	assert_true(gm_ring_hdr(gm_pool_ring(p))->magic == GM_RING_MAGIC); /* still mapped */
	gm_pool_destroy(p);
	gm_dataset_close(ds);
}

/* Create the marker: the next worker to reach sample id stalls there. */
static void stall_once(uint32_t id)
{
	int fd = open(marker, O_CREAT | O_WRONLY, 0600);
	assert_true(fd >= 0);
	close(fd);
	stall_id = id;
}

/* The pid that holds slot's lease, once one does (60 s at most). */
static pid_t lease_holder(struct gm_ring *r, uint32_t slot)
{
	struct gm_slot_ctl *ctl = gm_ring_ctl(r, slot);
	for (int k = 0; k < 6000; k++) {
		uint32_t w = atomic_load(&ctl->state);
		if (GM_SLOT_STATE(w) == GM_SLOT_CLAIMED && access(marker, F_OK) != 0)
			return (pid_t)GM_SLOT_PID(w);
		usleep(10000);
	}
	fail_msg("no worker holds slot %u", slot);
	return -1;
}

/*
 * A worker SIGKILLed while it holds a lease (stalled in a sample of task 1): the
 * pool reaps it, re-issues its task (p_reissued), counts the death and starts
 * another, which makes the batch: every task arrives with the bytes
 * gm_worker_produce makes in this process.
 */
static void test_sigkilled_worker_is_replaced_and_its_lease_reissued(void **state)
{
	struct gm_loader_opts o;
	struct gm_dataset *ds = open_data();
	pid_t kids[16];
	char err[512];
	(void)state;
	options(&o);
	struct gm_pool *p = pool_of(&o, ds, 1);
	struct gm_ring *r = gm_pool_ring(p);
	struct gm_ring_hdr *h = gm_ring_hdr(r);
	stall_once(BATCH + 1); /* unshuffled: task 1, position 1 */
	assert_int_equal(gm_pool_start(p, err, sizeof(err)), 0);
	pid_t victim = lease_holder(r, 1);
	assert_int_equal(children(kids, 16), 1);
	assert_int_equal(kids[0], victim);
	assert_int_equal(kill(victim, SIGKILL), 0);
	wait_u64(&h->p_deaths, 1, "p_deaths");
	wait_u32(&h->p_alive, 1, "p_alive");
	assert_int_equal(atomic_load(&h->p_reissued), 1);
	assert_int_equal(children(kids, 16), 1);
	assert_true(kids[0] != victim);

	/* the batches, against a worker of this process */
	struct gm_pool_cfg c;
	struct gm_ring *mine;
	struct gm_worker *w;
	uint32_t bpe;
	uint64_t first, end;
	assert_int_equal(gm_pool_tasks(&o, ds, &bpe, &first, &end, err, sizeof(err)), 0);
	gm_pool_cfg_init(&c, &o, ds, bpe, first, end);
	size_t sb = gm_aug_out_bytes(&o.aug);
	assert_int_equal(gm_ring_create(&mine, 4, BATCH, sb, 0, end), 0);
	c.w.ring = mine;
	if (gm_worker_create(&w, &c.w, err, sizeof(err)))
		fail_msg("%s", err);
	for (uint64_t t = 0; t < end; t++) {
		uint32_t slot = (uint32_t)(t & (h->nslots - 1));
		assert_int_equal(gm_ring_wait_ready(r, t, 20000), 0);
		assert_int_equal(gm_worker_produce(w, 0, t), 0);
		uint32_t n = gm_ring_ctl(r, slot)->n;
		assert_int_equal(n, gm_ring_ctl(mine, 0)->n);
		assert_memory_equal(gm_ring_data(r, slot), gm_ring_data(mine, 0), n * sb);
		assert_memory_equal(gm_ring_ids(r, slot), gm_ring_ids(mine, 0), n * 4);
		assert_memory_equal(gm_ring_labels(r, slot), gm_ring_labels(mine, 0), n * 4);
		gm_ring_release(r, slot);
	}
	gm_worker_destroy(w);
	gm_ring_destroy(mine);
	gm_pool_destroy(p);
	assert_int_equal(children(kids, 16), 0);
	gm_dataset_close(ds);
}

/*
 * gm_pool_hand_over: the ring goes on with another pool's workers (a loader
 * handing its job back to a node agent that adopted its ring). The worker stuck
 * in task 1 takes the retirement but cannot finish its batch: it is SIGKILLed
 * at the 2 s deadline and its lease goes back to FREE; the ring is not stopped;
 * then a second pool over the same ring (ring_fd) makes every batch, task 1
 * included.
 */
static void test_hand_over_leaves_the_ring_to_another_pool(void **state)
{
	struct gm_loader_opts o;
	struct gm_dataset *ds = open_data();
	struct gm_pool_cfg c;
	struct gm_pool *b;
	uint32_t bpe;
	uint64_t first, end;
	pid_t kids[16];
	char err[512];
	(void)state;
	options(&o);
	struct gm_pool *a = pool_of(&o, ds, 1);
	struct gm_ring *r = gm_pool_ring(a);
	struct gm_ring_hdr *h = gm_ring_hdr(r);
	stall_once(BATCH + 1); /* unshuffled: task 1, position 1 */
	assert_int_equal(gm_pool_start(a, err, sizeof(err)), 0);
	lease_holder(r, 1);
	gm_pool_hand_over(a);
	assert_int_equal(children(kids, 16), 0);
	assert_int_equal(atomic_load(&h->stop), 0);
	assert_int_equal(GM_SLOT_STATE(atomic_load(&gm_ring_ctl(r, 1)->state)), GM_SLOT_FREE);
	assert_true(atomic_load(&h->p_reissued) >= 1);

	assert_int_equal(gm_pool_tasks(&o, ds, &bpe, &first, &end, err, sizeof(err)), 0);
	gm_pool_cfg_init(&c, &o, ds, bpe, first, end);
	c.workers = 1;
	c.ring_fd = gm_ring_fd(r);
	assert_int_equal(gm_pool_create(&b, &c, err, sizeof(err)), 0);
	assert_int_equal(gm_pool_start(b, err, sizeof(err)), 0);
	for (uint64_t t = 0; t < end; t++) {
		assert_int_equal(gm_ring_wait_ready(r, t, 20000), 0);
		assert_int_equal(gm_ring_ctl(r, (uint32_t)(t & (h->nslots - 1)))->task, t);
		gm_ring_release(r, (uint32_t)(t & (h->nslots - 1)));
	}
	gm_pool_destroy(b);
	gm_pool_destroy(a); /* handed over: nothing left to stop */
	assert_int_equal(children(kids, 16), 0);
	gm_dataset_close(ds);
}

/*
 * A worker that is never made (stuck before gm_worker_main has made it, as a fork
 * that inherited a held lock is) is killed start_timeout_ms after its fork and
 * another started: the job does not wait for ever, and every batch arrives.
 */
static void never_made_is_replaced(uint32_t start_timeout_ms)
{
	struct gm_loader_opts o;
	struct gm_dataset *ds = open_data();
	struct gm_pool_cfg c;
	struct gm_pool *p;
	uint32_t bpe;
	uint64_t first, end;
	pid_t kids[16];
	char err[512];
	options(&o);
	assert_int_equal(gm_pool_tasks(&o, ds, &bpe, &first, &end, err, sizeof(err)), 0);
	gm_pool_cfg_init(&c, &o, ds, bpe, first, end);
	c.workers = 1;
	c.lease_timeout_ms = 2000; /* the watches run */
	c.start_timeout_ms = start_timeout_ms;
	snprintf(hang, sizeof(hang), "%s/hang", base);
	assert_int_equal(gm_pool_create(&p, &c, err, sizeof(err)), 0);
	struct gm_ring *r = gm_pool_ring(p);
	struct gm_ring_hdr *h = gm_ring_hdr(r);
	int fd = open(hang, O_CREAT | O_WRONLY, 0600);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(gm_pool_start(p, err, sizeof(err)), 0);
	for (uint64_t t = 0; t < end; t++) {
		assert_int_equal(gm_ring_wait_ready(r, t, 20000), 0);
		gm_ring_release(r, (uint32_t)(t & (h->nslots - 1)));
	}
	assert_int_equal(access(hang, F_OK), -1); /* a worker did hang */
	wait_u64(&h->p_deaths, 1, "p_deaths");	  /* the stuck one, reaped */
	hang[0] = 0;
	gm_pool_destroy(p);
	assert_int_equal(children(kids, 16), 0);
	gm_dataset_close(ds);
}

static void test_worker_never_made_is_replaced(void **state)
{
	(void)state;
	never_made_is_replaced(300);
}

/* A config that leaves the limit 0 takes $GM_POOL_START_MS (make sanitize's
 * test_remote.sh sets it): at 300 ms the stuck worker is replaced well within the
 * batches' 20-s waits, which the 30-s default (GM_POOL_START_MS) would outlast.
 * A value that is not a number of ms from 100 to that default is refused. */
static void test_start_watch_limit_from_the_environment(void **state)
{
	static const char *const bad[] = {"", "50", "30001", "5s", "-1"};
	struct gm_loader_opts o;
	struct gm_dataset *ds = open_data();
	struct gm_pool_cfg c;
	struct gm_pool *p;
	uint32_t bpe;
	uint64_t first, end;
	char err[512];
	(void)state;
	assert_int_equal(setenv("GM_POOL_START_MS", "300", 1), 0);
	never_made_is_replaced(0);
	options(&o);
	assert_int_equal(gm_pool_tasks(&o, ds, &bpe, &first, &end, err, sizeof(err)), 0);
	gm_pool_cfg_init(&c, &o, ds, bpe, first, end);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(setenv("GM_POOL_START_MS", bad[i], 1), 0);
		assert_int_equal(gm_pool_create(&p, &c, err, sizeof(err)), -EINVAL);
		assert_null(p);
		assert_non_null(strstr(err, "GM_POOL_START_MS="));
	}
	c.start_timeout_ms = 300; /* the config's own limit: the variable is not read */
	assert_int_equal(gm_pool_create(&p, &c, err, sizeof(err)), 0);
	gm_pool_destroy(p);
	assert_int_equal(unsetenv("GM_POOL_START_MS"), 0);
	gm_dataset_close(ds);
}

/* A worker asked to go that has not exited yet (stalled in a sample) is counted
 * by gm_pool_retiring, and p_alive still counts it, until it is reaped. */
static void test_retiring_worker_is_counted_until_reaped(void **state)
{
	struct gm_loader_opts o;
	struct gm_dataset *ds = open_data();
	char err[512];
	(void)state;
	options(&o);
	struct gm_pool *p = pool_of(&o, ds, 1);
	struct gm_ring *r = gm_pool_ring(p);
	struct gm_ring_hdr *h = gm_ring_hdr(r);
	stall_once(2); /* task 0 */
	assert_int_equal(gm_pool_start(p, err, sizeof(err)), 0);
	pid_t stuck = lease_holder(r, 0);
	gm_pool_set_target(p, 0);
	for (int k = 0; k < 2000 && gm_pool_retiring(p) != 1; k++)
		usleep(10000);
	assert_int_equal(gm_pool_retiring(p), 1);
	usleep(200 * 1000);
	assert_int_equal(gm_pool_retiring(p), 1); /* it does not exit: still counted */
	assert_int_equal(atomic_load(&h->p_alive), 1);
	kill(stuck, SIGKILL);
	wait_u32(&h->p_alive, 0, "p_alive");
	assert_int_equal(gm_pool_retiring(p), 0);
	gm_pool_destroy(p);
	gm_dataset_close(ds);
}

/* In a child process with at most `nofile` descriptors: gm_pool_start's result,
 * written into the pipe as "rc message". */
static void start_with_fd_limit(int extra, int *rc, char *msg, size_t len)
{
	int pfd[2];
	assert_int_equal(pipe(pfd), 0);
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		struct gm_loader_opts o;
		struct gm_dataset *ds;
		struct gm_pool_cfg c;
		struct gm_pool *p;
		uint32_t bpe;
		uint64_t first, end;
		char err[512], out[600];
		close(pfd[0]);
		options(&o);
		if (gm_dataset_open(&ds, data, err, sizeof(err)) ||
		    gm_pool_tasks(&o, ds, &bpe, &first, &end, err, sizeof(err)))
			_exit(2);
		gm_pool_cfg_init(&c, &o, ds, bpe, first, end);
		c.workers = 1;
		if (gm_pool_create(&p, &c, err, sizeof(err)))
			_exit(3);
		int low = dup(0); /* the lowest free descriptor */
		close(low);
		struct rlimit rl;
		getrlimit(RLIMIT_NOFILE, &rl);
		rl.rlim_cur = (rlim_t)(low + extra);
		setrlimit(RLIMIT_NOFILE, &rl);
		err[0] = 0;
		int r = gm_pool_start(p, err, sizeof(err));
		int n = snprintf(out, sizeof(out), "%d %s", r, err);
		if (write(pfd[1], out, (size_t)n) != n)
			_exit(4);
		gm_pool_destroy(p);
		_exit(0);
	}
	close(pfd[1]);
	ssize_t n = read(pfd[0], msg, len - 1);
	close(pfd[0]);
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	assert_true(n > 0);
	msg[n] = 0;
	*rc = atoi(msg);
}

/* Start fails with -errno and says why: no descriptor for its eventfd, or none
 * for a worker's pidfd (the first workers could not be started). */
static void test_start_failure_says_why(void **state)
{
	int rc;
	char msg[600];
	(void)state;
	start_with_fd_limit(0, &rc, msg, sizeof(msg));
	assert_int_equal(rc, -EMFILE);
	assert_non_null(strstr(msg, "eventfd"));
	start_with_fd_limit(1, &rc, msg, sizeof(msg));
	assert_int_equal(rc, -EMFILE);
	assert_non_null(strchr(msg, ' '));
	assert_true(strlen(strchr(msg, ' ') + 1) > 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_check_refuses_what_no_worker_can_make),
	    cmocka_unit_test(test_lease_deadline_default_and_range),
	    cmocka_unit_test(test_tasks_of_a_job),
	    cmocka_unit_test(test_cfg_init_takes_the_options),
	    cmocka_unit_test(test_create_sizes_the_ring_and_refuses_bad_sizes),
	    cmocka_unit_test(test_size_follows_the_target),
	    cmocka_unit_test(test_sigkilled_worker_is_replaced_and_its_lease_reissued),
	    cmocka_unit_test(test_worker_never_made_is_replaced),
	    cmocka_unit_test(test_start_watch_limit_from_the_environment),
	    cmocka_unit_test(test_retiring_worker_is_counted_until_reaped),
	    cmocka_unit_test(test_start_failure_says_why),
	    cmocka_unit_test(test_hand_over_leaves_the_ring_to_another_pool),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
