/*
 * test_chaos.c - crash safety (DESIGN.md contract 2): workers SIGKILLed at random
 * every few tens of ms, also half-way through writing a slot, lose nothing: every
 * batch arrives once, in order, with the bytes of a run without kills. And a
 * sample that crashes workers is quarantined instead of killing them forever.
 */
// LDFLAGS: -Wl,--wrap=gm_aug_sample -Wl,--wrap=gm_reader_create
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
#include <sys/stat.h>
#include <unistd.h>

#include "goldminer/checksum.h"
#include "goldminer/loader.h"
#include "goldminer/aug.h"
#include "goldminer/synth.h"
#include "goldminer/reader.h"
#include "testutil.h"

static char dir[64];
/* The sample whose decode segfaults (UINT64_MAX: none). Set before the loader
 * forks, so the workers inherit it. */
static uint64_t crash_id = UINT64_MAX;
/* When set, a worker's io_uring cannot be created (as where io_uring is off). */
static int reader_fails;

int __real_gm_reader_create(struct gm_reader **out, unsigned depth);
int __wrap_gm_reader_create(struct gm_reader **out, unsigned depth);
int __wrap_gm_reader_create(struct gm_reader **out, unsigned depth)
{
	if (reader_fails) {
		*out = NULL;
		return -ENOSYS;
	}
	return __real_gm_reader_create(out, depth);
}

int __real_gm_aug_sample(struct gm_aug *a, const void *jpeg, size_t len, uint64_t seed,
			 uint64_t epoch, uint64_t sample_id, void *out, struct gm_aug_times *t);
int __wrap_gm_aug_sample(struct gm_aug *a, const void *jpeg, size_t len, uint64_t seed,
			 uint64_t epoch, uint64_t sample_id, void *out, struct gm_aug_times *t);
int __wrap_gm_aug_sample(struct gm_aug *a, const void *jpeg, size_t len, uint64_t seed,
			 uint64_t epoch, uint64_t sample_id, void *out, struct gm_aug_times *t)
{
	if (sample_id == crash_id) {
		signal(SIGSEGV, SIG_DFL);
		raise(SIGSEGV); /* a decoder bug, as the coordinator sees it */
	}
	return __real_gm_aug_sample(a, jpeg, len, seed, epoch, sample_id, out, t);
}

static int setup(void **state)
{
	(void)state;
	char err[256];
	if (gm_test_tmpdir(dir, sizeof(dir), "gm-chaos"))
		return -1;
	return gm_synth_write(dir, 120, 4, 11, 0, NULL, err, sizeof(err)) ? -1 : 0;
}

static int teardown(void **state)
{
	(void)state;
	gm_test_rm_tree(dir);
	return 0;
}

static void opts(struct gm_loader_opts *o, int workers)
{
	gm_loader_opts_default(o);
	o->root = dir;
	o->workers = workers;
	o->batch_size = 24;
	o->aug.size = 64;
	o->seed = 5;
	o->epochs = 1;
	o->no_pin = true;
}

/* Checksum of the epoch; every batch must come in order. */
static int epoch_sum(const struct gm_loader_opts *o, uint64_t *sum, struct gm_loader_stats *st)
{
	struct gm_loader *l;
	char err[512];
	int rc = gm_loader_open(&l, o, err, sizeof(err));
	if (rc)
		return rc;
	struct gm_batch b;
	uint64_t h = GM_CHECKSUM_INIT, k = 0;
	while ((rc = gm_loader_next(l, &b)) == 0) {
		assert_int_equal(b.index, k);
		k++;
		h = gm_checksum64(h, b.data, (size_t)b.size * b.sample_bytes);
		h = gm_checksum64(h, b.labels, b.size * sizeof(int32_t));
		h = gm_checksum64(h, b.sample_ids, b.size * sizeof(uint32_t));
	}
	gm_loader_stats(l, st);
	assert_int_equal(k, st->batches_per_epoch);
	gm_loader_close(l);
	*sum = h;
	return rc == GM_LOADER_END_OF_EPOCH ? 0 : rc;
}

static void test_random_sigkill_every_20ms(void **state)
{
	(void)state;
	struct gm_loader_opts o;
	struct gm_loader_stats st;
	uint64_t ref, got;
	opts(&o, 2);
	assert_int_equal(epoch_sum(&o, &ref, &st), 0);
	assert_int_equal(st.worker_deaths, 0);
	uint64_t kills = 0, deaths = 0, rounds_killed = 0;
	/* rounds until enough kills landed (a fast machine finishes an epoch in few
	 * kill periods); every round must give the reference bytes */
	for (int round = 0; round < 12 && (round < 3 || kills < 3); round++) {
		opts(&o, 2 + round % 2);
		o.chaos_kill_ms = 20;
		o.seed = 5;
		assert_int_equal(epoch_sum(&o, &got, &st), 0);
		assert_int_equal(got, ref);
		assert_int_equal(st.samples, 120);
		assert_int_equal(st.errors, 0);
		kills += st.chaos_kills;
		if (st.chaos_kills) {
			/* every kill is a death, but the last of a round may not be reaped
			 * yet when the epoch's last batch arrives */
			assert_true(st.worker_deaths + 1 >= st.chaos_kills);
			deaths += st.worker_deaths;
			rounds_killed++;
			assert_true(st.detect_ns_max <
				    1000000000ull); /* a loose bound, not a timing test */
		}
	}
	assert_true(deaths + rounds_killed >= kills);
	printf("# chaos: %llu kills\n", (unsigned long long)kills);
	assert_true(kills >= 3);
}

static void test_crashing_sample_is_quarantined(void **state)
{
	(void)state;
	struct gm_loader_opts o;
	struct gm_loader *l;
	char err[512];
	opts(&o, 2);
	crash_id = 17;
	assert_int_equal(gm_loader_open(&l, &o, err, sizeof(err)), 0);
	struct gm_batch b;
	int rc, seen17 = 0;
	uint32_t total = 0;
	while ((rc = gm_loader_next(l, &b)) == 0) {
		total += b.size;
		for (uint32_t i = 0; i < b.size; i++)
			seen17 |= b.sample_ids[i] == 17;
	}
	assert_int_equal(rc, GM_LOADER_END_OF_EPOCH);
	assert_int_equal(total, 120);
	assert_false(seen17); /* replaced by the next sample */
	struct gm_loader_stats st;
	gm_loader_stats(l, &st);
	assert_int_equal(st.errors, 1);
	assert_int_equal(st.worker_deaths, 2);
	const char *path, *msg;
	assert_int_equal(gm_loader_error(l, 0, &path, &msg), 0);
	assert_non_null(strstr(msg, "quarantined"));
	assert_non_null(strstr(path, dir));
	gm_loader_close(l);
	crash_id = UINT64_MAX;
}

/* Workers that cannot start are a clear error from gm_loader_next, not a hang
 * and not an endless respawn. The consumer reads the first worker's fatal
 * error at once (consumer.c), so the deaths by then are any number; the pool
 * stops respawning after MAX_CONSECUTIVE_DEATHS (8), the other worker's death
 * on top (under ASan on a loaded machine, 8 were not yet reached when
 * gm_loader_next returned). */
static void test_workers_that_cannot_start(void **state)
{
	(void)state;
	struct gm_loader_opts o;
	struct gm_loader *l;
	struct gm_batch b;
	char err[512];
	opts(&o, 2);
	reader_fails = 1;
	int rc = gm_loader_open(&l, &o, err, sizeof(err));
	if (rc == 0) {
		rc = gm_loader_next(l, &b);
		snprintf(err, sizeof(err), "%s", gm_loader_errmsg(l));
		struct gm_loader_stats st;
		uint64_t before = UINT64_MAX;
		/* until the deaths stop: 0.25 s without one, 20 s at most */
		for (int k = 0; k < 80; k++) {
			gm_loader_stats(l, &st);
			if (st.worker_deaths == before && before >= 1)
				break;
			before = st.worker_deaths;
			usleep(250000);
		}
		assert_true(st.worker_deaths >= 1);
		assert_true(st.worker_deaths <= 8 + 2);
		gm_loader_close(l);
	}
	reader_fails = 0;
	assert_int_equal(rc, -EIO);
	assert_non_null(strstr(err, "workers cannot run"));
	assert_non_null(strstr(err, "io_uring reader"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_crashing_sample_is_quarantined),
	    cmocka_unit_test(test_random_sigkill_every_20ms),
	    cmocka_unit_test(test_workers_that_cannot_start),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
