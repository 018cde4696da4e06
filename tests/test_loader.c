/*
 * test_loader.c - the consumer API end to end with real worker processes:
 * contract 1 (same bytes with 1, 2 and 4 workers), order and epoch boundaries,
 * bad files (skip and fail), a worker SIGKILLed mid-run, scaling, resume, errors;
 * batches kept past the next (gm_loader_keep) and given back out of order;
 * a slot whose status, size or error count no worker writes is refused (a ring
 * writer that misbehaves, injected by wrapping gm_ring_wait_ready).
 */
// LDFLAGS: -Wl,--wrap=gm_ring_wait_ready
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "goldminer/checksum.h"
#include "goldminer/loader.h"
#include "goldminer/ring.h"
#include "goldminer/synth.h"
#include "testutil.h"

#define N_IMAGES 90
#define BATCH	 16

static char good_dir[64];
static char bad_dir[64];

static int setup(void **state)
{
	(void)state;
	char err[256];
	if (gm_test_tmpdir(good_dir, sizeof(good_dir), "gm-loader"))
		return -1;
	if (gm_synth_write(good_dir, N_IMAGES, 3, 7, 0, NULL, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		return -1;
	}
	/* a dataset with one bad file of every kind among good ones */
	if (gm_test_tmpdir(bad_dir, sizeof(bad_dir), "gm-loaderbad"))
		return -1;
	if (gm_synth_write(bad_dir, 40, 2, 9, 0, NULL, err, sizeof(err)))
		return -1;
	static const char *names[] = {"empty", "truncated", "corrupt", "notjpeg", "bomb"};
	for (int k = 0; k < 5; k++) {
		char p[256];
		snprintf(p, sizeof(p), "%s/class_%02d/bad_%s.jpg", bad_dir, k % 2, names[k]);
		if (gm_synth_write_bad(p, (enum gm_synth_bad)k, 3))
			return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	gm_test_rm_tree(good_dir);
	gm_test_rm_tree(bad_dir);
	return 0;
}

static void small_opts(struct gm_loader_opts *o, const char *root, int workers)
{
	gm_loader_opts_default(o);
	o->root = root;
	o->workers = workers;
	o->batch_size = BATCH;
	o->aug.size = 48;
	o->seed = 42;
	o->epochs = 2;
	o->no_pin = true;
}

/* run_all: gm_loader_interrupt before every gm_loader_next, which then returns
 * -EINTR at its first wait and is called again. */
static bool interrupt_each;

static int next_batch(struct gm_loader *l, struct gm_batch *b)
{
	if (interrupt_each) {
		gm_loader_interrupt(l);
		int rc = gm_loader_next(l, b);
		if (rc != -EINTR)
			return rc; /* no wait in this call: the next one returns -EINTR */
		assert_non_null(strstr(gm_loader_errmsg(l), "interrupted by a signal"));
	}
	return gm_loader_next(l, b);
}

/* Hash of every batch (data + labels + ids) in delivery order; checks the order. */
static int run_all(const struct gm_loader_opts *o, uint64_t *hashes, int max, int *n_out,
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
	int n = 0, eoe = 0;
	uint64_t expect_k = o->start_batch;
	uint64_t expect_e = o->epoch;
	while ((rc = next_batch(l, &b)) != GM_LOADER_END) {
		if (rc == GM_LOADER_END_OF_EPOCH) {
			eoe++;
			expect_e++;
			expect_k = 0;
			continue;
		}
		if (rc < 0)
			break;
		assert_int_equal(b.epoch, expect_e);
		assert_int_equal(b.index, expect_k);
		expect_k++;
		uint64_t h = gm_test_batch_hash(&b);
		if (n < max)
			hashes[n] = h;
		n++;
	}
	if (st)
		gm_loader_stats(l, st);
	gm_loader_close(l);
	*n_out = n;
	return rc < 0 ? rc : 0;
}

static void test_same_bytes_with_1_2_4_workers(void **state)
{
	(void)state;
	struct gm_loader_opts o;
	uint64_t h1[32], h[32];
	int n1, n;
	small_opts(&o, good_dir, 1);
	assert_int_equal(run_all(&o, h1, 32, &n1, NULL), 0);
	assert_int_equal(n1, 2 * ((N_IMAGES + BATCH - 1) / BATCH));
	for (int w = 2; w <= 4; w *= 2) {
		small_opts(&o, good_dir, w);
		assert_int_equal(run_all(&o, h, 32, &n, NULL), 0);
		assert_int_equal(n, n1);
		assert_memory_equal(h, h1, (size_t)n * sizeof(h[0]));
	}
	/* another seed gives other bytes; the two epochs differ from each other */
	small_opts(&o, good_dir, 2);
	o.seed = 43;
	assert_int_equal(run_all(&o, h, 32, &n, NULL), 0);
	assert_memory_not_equal(h, h1, sizeof(h[0]) * 2);
	assert_true(h1[0] != h1[n1 / 2]);
}

static void test_epoch_contents_and_labels(void **state)
{
	(void)state;
	struct gm_loader_opts o;
	struct gm_loader *l;
	char err[256];
	small_opts(&o, good_dir, 2);
	o.epochs = 1;
	assert_int_equal(gm_loader_open(&l, &o, err, sizeof(err)), 0);
	struct gm_batch b;
	uint8_t seen[N_IMAGES] = {0};
	int total = 0, rc;
	while ((rc = gm_loader_next(l, &b)) == 0) {
		assert_true(b.size == BATCH || b.index == (N_IMAGES - 1) / BATCH);
		assert_int_equal(b.sample_bytes, 48 * 48 * 3);
		for (uint32_t i = 0; i < b.size; i++) {
			assert_true(b.sample_ids[i] < N_IMAGES);
			seen[b.sample_ids[i]]++;
			assert_in_range(b.labels[i], 0, 2);
		}
		total += (int)b.size;
	}
	assert_int_equal(rc, GM_LOADER_END_OF_EPOCH);
	assert_int_equal(gm_loader_next(l, &b), GM_LOADER_END);
	assert_int_equal(total, N_IMAGES);
	for (int i = 0; i < N_IMAGES; i++)
		assert_int_equal(seen[i], 1); /* every sample exactly once */
	struct gm_loader_stats st;
	gm_loader_stats(l, &st);
	assert_int_equal(st.samples, N_IMAGES);
	assert_int_equal(st.dataset_size, N_IMAGES);
	assert_int_equal(st.num_classes, 3);
	assert_int_equal(st.errors, 0);
	assert_true(st.decode_ns > 0);
	gm_loader_close(l);
}

static void test_float32_output(void **state)
{
	(void)state;
	struct gm_loader_opts o;
	struct gm_loader *l;
	char err[256];
	small_opts(&o, good_dir, 1);
	o.aug.out = GM_OUT_F32_CHW;
	assert_int_equal(gm_loader_open(&l, &o, err, sizeof(err)), 0);
	struct gm_batch b;
	assert_int_equal(gm_loader_next(l, &b), 0);
	assert_int_equal(b.sample_bytes, 48 * 48 * 3 * 4);
	const float *f = b.data;
	for (size_t i = 0; i < (size_t)b.size * 48 * 48 * 3; i++)
		assert_true(f[i] > -2.2f && f[i] < 2.7f); /* normalised ImageNet range */
	gm_loader_close(l);
}

/* float16 batches (2 workers) are float32 batches (1 worker) rounded to half. */
static void test_float16_output(void **state)
{
	(void)state;
	struct gm_loader_opts o;
	struct gm_loader *l32, *l16;
	char err[256];
	small_opts(&o, good_dir, 1);
	o.aug.out = GM_OUT_F32_CHW;
	assert_int_equal(gm_loader_open(&l32, &o, err, sizeof(err)), 0);
	small_opts(&o, good_dir, 2);
	o.aug.out = GM_OUT_F16_CHW;
	assert_int_equal(gm_loader_open(&l16, &o, err, sizeof(err)), 0);
	struct gm_loader_stats st;
	gm_loader_stats(l16, &st);
	assert_int_equal(st.out, GM_OUT_F16_CHW);
	for (int k = 0; k < 3; k++) {
		struct gm_batch a, b;
		assert_int_equal(gm_loader_next(l32, &a), 0);
		assert_int_equal(gm_loader_next(l16, &b), 0);
		assert_int_equal(b.sample_bytes, 48 * 48 * 3 * 2);
		assert_int_equal(a.size, b.size);
		const float *f = a.data;
		const uint16_t *h = b.data;
		for (size_t i = 0; i < (size_t)a.size * 48 * 48 * 3; i++)
			if (h[i] != gm_f32_to_f16(f[i]))
				fail_msg("batch %d value %zu: %04x, want %04x", k, i, h[i],
					 gm_f32_to_f16(f[i]));
		gm_loader_release(l32, &a);
		gm_loader_release(l16, &b);
	}
	gm_loader_close(l16);
	gm_loader_close(l32);
}

/* Tar shards of the same images: the same batches as the ImageFolder tree. */
static void test_shards_same_batches(void **state)
{
	(void)state;
	char dir[128], err[256];
	struct gm_loader_opts o;
	uint64_t h1[32], h2[32], h3[32];
	int n1, n2, n3;
	struct gm_loader_stats st;
	snprintf(dir, sizeof(dir), "%s-shards", good_dir);
	assert_int_equal(gm_synth_write_shards(dir, N_IMAGES, 3, 7, 0, 25, NULL, err, sizeof(err)),
			 0);
	small_opts(&o, good_dir, 1);
	assert_int_equal(run_all(&o, h1, 32, &n1, &st), 0);
	small_opts(&o, dir, 1);
	assert_int_equal(run_all(&o, h2, 32, &n2, &st), 0);
	small_opts(&o, dir, 3);
	assert_int_equal(run_all(&o, h3, 32, &n3, &st), 0);
	assert_int_equal(n1, n2);
	assert_int_equal(n1, n3);
	assert_memory_equal(h1, h2, (size_t)n1 * sizeof(h1[0]));
	assert_memory_equal(h1, h3, (size_t)n1 * sizeof(h1[0]));
	assert_int_equal(st.errors, 0);

	/* A shard cut short after indexing: its samples fail by name, the run goes on
	 * (skip) or stops naming "SHARD:member" (fail). */
	struct gm_loader *l, *lf;
	char shard[160];
	small_opts(&o, dir, 2);
	o.epochs = 1;
	o.shuffle = false; /* shard 3's samples come last, */
	o.slots = 1;	   /* and nothing gets that far before the cut */
	assert_int_equal(gm_loader_open(&l, &o, err, sizeof(err)), 0);
	o.on_error = GM_ON_ERROR_FAIL;
	assert_int_equal(gm_loader_open(&lf, &o, err, sizeof(err)), 0);
	snprintf(shard, sizeof(shard), "%s/shard-000003.tar", dir);
	assert_int_equal(truncate(shard, 1024), 0);
	struct gm_batch b;
	int rc;
	while ((rc = gm_loader_next(l, &b)) == 0)
		gm_loader_release(l, &b);
	assert_true(rc > 0); /* end of epoch / of the run */
	gm_loader_stats(l, &st);
	assert_int_equal(st.errors, 15); /* shard 3 held samples 75..89: none is left */
	const char *path, *msg;
	assert_int_equal(gm_loader_error(l, 0, &path, &msg), 0);
	assert_non_null(strstr(path, "shard-000003.tar:class_"));
	if (!strstr(msg, "shard ends inside this member"))
		fail_msg("message: %s", msg);
	gm_loader_close(l);
	while ((rc = gm_loader_next(lf, &b)) == 0)
		gm_loader_release(lf, &b);
	assert_int_equal(rc, -EBADMSG);
	assert_non_null(strstr(gm_loader_errmsg(lf), "shard-000003.tar:class_"));
	gm_loader_close(lf);
	/* opened now, the index itself refuses the cut shard */
	assert_int_equal(gm_loader_open(&l, &o, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "shard-000003.tar: offset 0: member 'class_"));
	gm_test_rm_tree(dir);
}

/* Workers that cannot use io_uring (GM_READER=pread forces what a seccomp profile
 * or gVisor would) deliver the same bytes, from a tree and from shards. */
static void test_pread_reader_same_batches(void **state)
{
	(void)state;
	char dir[128], err[256];
	struct gm_loader_opts o;
	uint64_t h1[32], h2[32];
	int n1, n2;
	struct gm_loader_stats st;
	snprintf(dir, sizeof(dir), "%s-pshards", good_dir);
	assert_int_equal(gm_synth_write_shards(dir, N_IMAGES, 3, 7, 0, 40, NULL, err, sizeof(err)),
			 0);
	const char *roots[] = {good_dir, dir};
	for (int k = 0; k < 2; k++) {
		small_opts(&o, roots[k], 2);
		unsetenv("GM_READER");
		assert_int_equal(run_all(&o, h1, 32, &n1, &st), 0);
		setenv("GM_READER", "pread", 1);
		assert_int_equal(run_all(&o, h2, 32, &n2, &st), 0);
		unsetenv("GM_READER");
		assert_int_equal(n1, n2);
		assert_memory_equal(h1, h2, (size_t)n1 * sizeof(h1[0]));
		assert_int_equal(st.errors, 0);
		assert_int_equal(st.worker_deaths, 0);
	}
	gm_test_rm_tree(dir);
}

/* An explicit order (a sampler's indices): every epoch is those ids in that order,
 * repeats kept, batch k order[k*B..]; the caller's array may change after open;
 * an id past the dataset, an empty order and a node agent are refused. */
static void test_explicit_order_is_every_epochs_ids(void **state)
{
	(void)state;
	struct gm_loader_opts o;
	struct gm_loader *l;
	char err[256];
	uint32_t order[] = {7, 3, 3, 0, N_IMAGES - 1, 12, 5, 40, 41, 9};
	const uint32_t n = sizeof(order) / sizeof(order[0]);
	uint32_t want[sizeof(order) / sizeof(order[0])];
	memcpy(want, order, sizeof(order));
	small_opts(&o, good_dir, 2);
	o.order = order;
	o.order_len = n;
	assert_int_equal(gm_loader_open(&l, &o, err, sizeof(err)), 0);
	memset(order, 0xff, sizeof(order)); /* the loader copied it */
	struct gm_batch b;
	int32_t label_of[N_IMAGES];
	uint32_t pos = 0, epochs = 0;
	int rc;
	while ((rc = gm_loader_next(l, &b)) != GM_LOADER_END) {
		assert_true(rc >= 0);
		if (rc == GM_LOADER_END_OF_EPOCH) {
			assert_int_equal(pos, n);
			pos = 0;
			epochs++;
			continue;
		}
		assert_int_equal(b.index, pos / BATCH);
		for (uint32_t i = 0; i < b.size; i++, pos++) {
			assert_int_equal(b.sample_ids[i], want[pos]);
			if (epochs == 0)
				label_of[want[pos]] = b.labels[i];
			assert_int_equal(b.labels[i], label_of[want[pos]]);
		}
	}
	assert_int_equal(epochs, 2);
	struct gm_loader_stats st;
	gm_loader_stats(l, &st);
	assert_int_equal(st.batches_per_epoch, (n + BATCH - 1) / BATCH);
	assert_int_equal(st.dataset_size, N_IMAGES); /* the dataset's, not the order's */
	gm_loader_close(l);

	uint32_t past[] = {1, N_IMAGES};
	o.order = past;
	o.order_len = 2;
	assert_int_equal(gm_loader_open(&l, &o, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "order[1]"));
	o.order_len = 0;
	assert_int_equal(gm_loader_open(&l, &o, err, sizeof(err)), -EINVAL);
	o.order_len = 1;
	o.node = "/nonexistent/agent.sock";
	assert_int_equal(gm_loader_open(&l, &o, err, sizeof(err)), -ENOTSUP);
	assert_non_null(strstr(err, "without node"));
}

static void test_bad_files_skip(void **state)
{
	(void)state;
	struct gm_loader_opts o;
	uint64_t h1[16], h2[16];
	int n1, n2;
	struct gm_loader_stats st;
	small_opts(&o, bad_dir, 1);
	o.epochs = 1;
	assert_int_equal(run_all(&o, h1, 16, &n1, &st), 0);
	assert_int_equal(st.errors, 5);
	assert_int_equal(st.samples, 45); /* every slot still filled */
	small_opts(&o, bad_dir, 3);
	o.epochs = 1;
	assert_int_equal(run_all(&o, h2, 16, &n2, &st), 0);
	assert_int_equal(n1, n2);
	assert_memory_equal(h1, h2, (size_t)n1 * sizeof(h1[0])); /* substitutes deterministic */

	/* the report names each bad file */
	struct gm_loader *l;
	char err[256];
	small_opts(&o, bad_dir, 2);
	o.epochs = 1;
	assert_int_equal(gm_loader_open(&l, &o, err, sizeof(err)), 0);
	struct gm_batch b;
	while (gm_loader_next(l, &b) == 0)
		for (uint32_t i = 0; i < b.size; i++)
			assert_in_range(b.labels[i], 0, 1);
	gm_loader_stats(l, &st);
	assert_int_equal(st.errors, 5);
	int found = 0;
	for (uint64_t i = 0; i < st.errors; i++) {
		const char *path, *msg;
		assert_int_equal(gm_loader_error(l, i, &path, &msg), 0);
		assert_non_null(strstr(path, "/bad_"));
		assert_true(strlen(msg) > 0);
		found |= strstr(path, "bomb") ? 1 : 0;
	}
	assert_true(found);
	const char *p, *m;
	assert_int_equal(gm_loader_error(l, 5, &p, &m), -ERANGE);
	gm_loader_close(l);
}

static void test_many_bad_files_in_one_batch_counted_exactly(void **state)
{
	(void)state;
	char dir[64], p[128], err[256];
	struct gm_loader_opts o;
	struct gm_loader_stats st;
	uint64_t h[4];
	int n;
	assert_int_equal(gm_test_tmpdir(dir, sizeof(dir), "gm-loadermany"), 0);
	assert_int_equal(gm_synth_write(dir, 6, 1, 4, 0, NULL, err, sizeof(err)), 0);
	for (int i = 0; i < 12; i++) {
		snprintf(p, sizeof(p), "%s/class_00/bad_%02d.jpg", dir, i);
		assert_int_equal(gm_synth_write_bad(p, GM_SYNTH_BAD_EMPTY, 0), 0);
	}
	small_opts(&o, dir, 2);
	o.batch_size = 18; /* all 18 files, 12 of them bad, in one batch */
	o.epochs = 1;
	assert_int_equal(run_all(&o, h, 4, &n, &st), 0);
	assert_int_equal(n, 1);
	assert_int_equal(st.errors, 12); /* exact, though 8 are listed */
	assert_int_equal(st.samples, 18);
	gm_test_rm_tree(dir);
}

static void test_bad_files_fail(void **state)
{
	(void)state;
	struct gm_loader_opts o;
	struct gm_loader *l;
	char err[256];
	small_opts(&o, bad_dir, 2);
	o.on_error = GM_ON_ERROR_FAIL;
	o.epochs = 1;
	assert_int_equal(gm_loader_open(&l, &o, err, sizeof(err)), 0);
	struct gm_batch b;
	int rc;
	while ((rc = gm_loader_next(l, &b)) == 0)
		;
	assert_int_equal(rc, -EBADMSG);
	assert_non_null(strstr(gm_loader_errmsg(l), "gm_loader_next: "));
	assert_non_null(strstr(gm_loader_errmsg(l), "/bad_"));
	gm_loader_close(l);
}

/* A file replaced by a FIFO after indexing is a per-sample error naming it, not a
 * worker blocked for ever on the open; the run finishes. A deadline turns a hang
 * into a failure. */
static void test_fifo_in_the_tree_is_a_per_sample_error(void **state)
{
	(void)state;
	char dir[64], p[160], q[160], err[512];
	struct gm_loader_opts o;
	struct gm_loader *l;
	struct gm_loader_stats st;
	struct gm_batch b;
	assert_int_equal(gm_test_tmpdir(dir, sizeof(dir), "gm-loaderfifo"), 0);
	assert_int_equal(gm_synth_write(dir, 30, 2, 4, 0, NULL, err, sizeof(err)), 0);
	small_opts(&o, dir, 2);
	/* The reader refuses the FIFO without opening it. Only a read that had looked
	 * at the file just before the swap opens the FIFO: the lease deadline ends
	 * that one (the batch is made again and then sees the FIFO). */
	o.lease_timeout_ms = 1000;
	alarm(60);
	assert_int_equal(gm_loader_open(&l, &o, err, sizeof(err)), 0);
	snprintf(p, sizeof(p), "%s/class_01/fifo", dir);
	assert_int_equal(mkfifo(p, 0600), 0);
	snprintf(q, sizeof(q), "%s/class_01/img_000007.jpg", dir);
	assert_int_equal(rename(p, q), 0); /* atomically: the reader sees a file or a FIFO */
	int rc, batches = 0;
	while ((rc = gm_loader_next(l, &b)) != GM_LOADER_END) {
		assert_true(rc >= 0);
		batches += rc == 0;
	}
	assert_int_equal(batches, 2 * 2); /* 30 samples, 16 a batch, 2 epochs */
	gm_loader_stats(l, &st);
	assert_true(st.errors >= 1); /* epoch 1 at least (epoch 0 may have read it before) */
	assert_in_range(st.worker_deaths, 0, 1);
	const char *path, *msg;
	int named = 0;
	for (uint64_t i = 0; gm_loader_error(l, i, &path, &msg) == 0; i++)
		named |= !strcmp(path, q) && strstr(msg, "not a regular file");
	gm_loader_close(l);
	assert_true(named);
	alarm(0);
	gm_test_rm_tree(dir);
}

/* The loader keeps copies of the option strings: the caller's buffer is
 * overwritten right after open (as a binding that frees its strings does), and the
 * "no good sample left" message still names the root it was given. */
static void test_option_strings_are_copied_at_open(void **state)
{
	(void)state;
	char dir[64], p[160], err[512];
	struct gm_loader_opts o;
	struct gm_loader *l;
	struct gm_batch b;
	assert_int_equal(gm_test_tmpdir(dir, sizeof(dir), "gm-loadercopy"), 0);
	snprintf(p, sizeof(p), "%s/class_0", dir);
	assert_int_equal(mkdir(p, 0755), 0);
	for (int i = 0; i < 4; i++) {
		snprintf(p, sizeof(p), "%s/class_0/bad_%d.jpg", dir, i);
		assert_int_equal(gm_synth_write_bad(p, (enum gm_synth_bad)(i % 5), 1), 0);
	}
	size_t rl = strlen(dir) + 1;
	const char *spec = "read | decode | random_resized_crop 32 | batch 4";
	char *buf = malloc(rl + strlen(spec) + 1);
	assert_non_null(buf);
	memcpy(buf, dir, rl);
	strcpy(buf + rl, spec);
	small_opts(&o, buf, 1);
	o.pipeline = buf + rl;
	assert_int_equal(gm_loader_open(&l, &o, err, sizeof(err)), 0);
	memset(buf, 'X', rl + strlen(spec)); /* the caller's strings are gone */
	assert_int_equal(gm_loader_next(l, &b), -ENODATA);
	char m[600];
	snprintf(m, sizeof(m), "%s", gm_loader_errmsg(l));
	gm_loader_close(l);
	free(buf);
	gm_test_rm_tree(dir);
	assert_non_null(strstr(m, "no good sample left"));
	char want[96];
	snprintf(want, sizeof(want), "is every file of %s bad?", dir);
	assert_non_null(strstr(m, want));
	assert_null(strstr(m, "XXXX"));
}

/* A dataset of only bad files is an error, not batches of zeros labelled -1:
 * gm_loader_next says so naming files, and bench exits non-zero. */
static void test_all_bad_dataset_is_an_error(void **state)
{
	(void)state;
	char dir[64], p[160];
	struct gm_loader_opts o;
	struct gm_loader *l;
	struct gm_batch b;
	assert_int_equal(gm_test_tmpdir(dir, sizeof(dir), "gm-loaderallbad"), 0);
	for (int c = 0; c < 2; c++) {
		snprintf(p, sizeof(p), "%s/class_%d", dir, c);
		assert_int_equal(mkdir(p, 0755), 0);
		for (int i = 0; i < 5; i++) {
			snprintf(p, sizeof(p), "%s/class_%d/bad_%d.jpg", dir, c, i);
			assert_int_equal(gm_synth_write_bad(p, (enum gm_synth_bad)(i % 5), 1), 0);
		}
	}
	small_opts(&o, dir, 2);
	o.batch_size = 4;
	assert_int_equal(gm_loader_open(&l, &o, p, sizeof(p)), 0);
	assert_int_equal(gm_loader_next(l, &b), -ENODATA);
	const char *m = gm_loader_errmsg(l);
	assert_non_null(strstr(m, "gm_loader_next: no good sample left"));
	assert_non_null(strstr(m, "/bad_"));
	assert_int_equal(gm_loader_next(l, &b), -ENODATA); /* it stays there */
	gm_loader_close(l);
	/* bench: non-zero */
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int fd = open("/dev/null", O_WRONLY);
		dup2(fd, 1);
		dup2(fd, 2);
		char *argv[] = {"bench", dir, "--batch", "4", "--size", "32", "--quiet", NULL};
		_exit(gm_cmd_bench(7, argv));
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 1);
	gm_test_rm_tree(dir);
}

/* An interrupted wait (-EINTR) loses nothing: called again, the loader goes on
 * with the same batches, with and without a consumer-side shuffle_buffer (whose
 * output batch may be half drawn when the wait is interrupted). */
static void test_interrupted_waits_lose_nothing(void **state)
{
	(void)state;
	static const char *specs[] = {NULL, "read | decode | random_resized_crop 48 | flip | "
					    "batch 16 | shuffle_buffer 40"};
	for (int k = 0; k < 2; k++) {
		struct gm_loader_opts o;
		uint64_t h1[32], h2[32];
		int n1, n2;
		small_opts(&o, good_dir, 2);
		o.pipeline = specs[k];
		assert_int_equal(run_all(&o, h1, 32, &n1, NULL), 0);
		interrupt_each = true;
		int rc = run_all(&o, h2, 32, &n2, NULL);
		interrupt_each = false;
		assert_int_equal(rc, 0);
		assert_int_equal(n1, n2);
		assert_memory_equal(h1, h2, (size_t)n1 * sizeof(h1[0]));
	}
}

static void test_open_errors(void **state)
{
	(void)state;
	struct gm_loader_opts o;
	struct gm_loader *l;
	char err[256];
	small_opts(&o, "/nonexistent/goldminer-data", 1);
	assert_int_equal(gm_loader_open(&l, &o, err, sizeof(err)), -ENOENT);
	assert_null(l);
	assert_non_null(strstr(err, "/nonexistent/goldminer-data"));
	small_opts(&o, good_dir, 1);
	o.batch_size = 0;
	assert_int_equal(gm_loader_open(&l, &o, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "batch_size"));
	small_opts(&o, good_dir, 1);
	o.slots = 6;
	assert_int_equal(gm_loader_open(&l, &o, err, sizeof(err)), -EINVAL);
	small_opts(&o, good_dir, 1);
	o.start_batch = 1000;
	assert_int_equal(gm_loader_open(&l, &o, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "start_batch"));
	small_opts(&o, good_dir, 1);
	o.aug.size = 0;
	assert_int_equal(gm_loader_open(&l, &o, err, sizeof(err)), -EINVAL);
	small_opts(&o, good_dir, 1);
	o.pipeline = "read | decode | bogus_op 3";
	assert_true(gm_loader_open(&l, &o, err, sizeof(err)) < 0);
	assert_non_null(strstr(err, "bogus_op"));
	gm_loader_close(NULL);
}

static int count_children(void)
{
	char path[320];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", getpid(), getpid());
	int n = 0;
	/* children of every thread of this process */
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	while (d && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/children", e->d_name);
		FILE *f = fopen(path, "r");
		int pid;
		while (f && fscanf(f, "%d", &pid) == 1)
			n++;
		if (f)
			fclose(f);
	}
	if (d)
		closedir(d);
	return n;
}

static void test_sigkill_worker_loses_nothing(void **state)
{
	(void)state;
	struct gm_loader_opts o;
	uint64_t ref[32];
	int nref;
	small_opts(&o, good_dir, 2);
	assert_int_equal(run_all(&o, ref, 32, &nref, NULL), 0);

	struct gm_loader *l;
	char err[256];
	assert_int_equal(gm_loader_open(&l, &o, err, sizeof(err)), 0);
	struct gm_batch b;
	int n = 0, rc, kills = 0;
	while ((rc = gm_loader_next(l, &b)) != GM_LOADER_END) {
		if (rc == GM_LOADER_END_OF_EPOCH)
			continue;
		assert_int_equal(rc, 0);
		uint64_t h = gm_test_batch_hash(&b);
		assert_true(n < nref);
		assert_int_equal(h, ref[n]);
		n++;
		if (n % 3 == 1) {
			/* kill some worker of ours */
			char path[320];
			snprintf(path, sizeof(path), "/proc/self/task");
			DIR *d = opendir(path);
			struct dirent *e;
			int victim = 0;
			while (d && !victim && (e = readdir(d))) {
				char cp[320];
				if (e->d_name[0] == '.')
					continue;
				snprintf(cp, sizeof(cp), "/proc/self/task/%s/children", e->d_name);
				FILE *f = fopen(cp, "r");
				if (f && fscanf(f, "%d", &victim) != 1)
					victim = 0;
				if (f)
					fclose(f);
			}
			if (d)
				closedir(d);
			if (victim > 0 && kill(victim, SIGKILL) == 0)
				kills++;
		}
	}
	assert_int_equal(n, nref);
	assert_true(kills > 0);
	struct gm_loader_stats st;
	gm_loader_stats(l, &st);
	assert_true(st.worker_deaths >= 1);
	gm_loader_close(l);
	assert_int_equal(count_children(), 0);
}

static void test_scale_and_close_reaps(void **state)
{
	(void)state;
	struct gm_loader_opts o;
	struct gm_loader *l;
	char err[256];
	struct gm_loader_stats st;
	small_opts(&o, good_dir, 1);
	o.epochs = 0; /* unlimited */
	assert_int_equal(gm_loader_open(&l, &o, err, sizeof(err)), 0);
	struct gm_batch b;
	assert_int_equal(gm_loader_next(l, &b), 0);
	assert_int_equal(gm_loader_scale(l, 0), -EINVAL);
	assert_non_null(strstr(gm_loader_errmsg(l), "gm_loader_scale"));
	assert_int_equal(gm_loader_scale(l, 3), 0);
	for (int i = 0; i < 200; i++) {
		gm_loader_stats(l, &st);
		if (st.workers == 3)
			break;
		usleep(10000);
	}
	assert_int_equal(st.workers, 3);
	assert_int_equal(count_children(), 3);
	for (int i = 0; i < 8; i++)
		assert_true(gm_loader_next(l, &b) >= 0);
	assert_int_equal(gm_loader_scale(l, 1), 0);
	for (int i = 0; i < 300; i++) {
		gm_loader_stats(l, &st);
		if (st.workers == 1)
			break;
		assert_true(gm_loader_next(l, &b) >= 0);
		usleep(10000);
	}
	assert_int_equal(st.workers, 1);
	assert_int_equal(st.worker_deaths, 0); /* retiring is not dying */
	gm_loader_close(l);
	assert_int_equal(count_children(), 0);
}

static void test_shuffle_buffer_in_the_consumer(void **state)
{
	(void)state;
	struct gm_loader_opts o;
	uint64_t plain[32], h1[32], h2[32];
	int np, n1, n2;
	struct gm_loader_stats st;
	const char *spec = "read | decode | random_resized_crop 48 | flip | batch 16 | "
			   "shuffle_buffer 40";
	small_opts(&o, good_dir, 2);
	o.pipeline = "read | decode | random_resized_crop 48 | flip | batch 16";
	assert_int_equal(run_all(&o, plain, 32, &np, NULL), 0);
	small_opts(&o, good_dir, 1);
	o.pipeline = spec;
	assert_int_equal(run_all(&o, h1, 32, &n1, &st), 0);
	small_opts(&o, good_dir, 3);
	o.pipeline = spec;
	assert_int_equal(run_all(&o, h2, 32, &n2, NULL), 0);
	assert_int_equal(n1, np); /* same batches per epoch, 2 epochs */
	assert_int_equal(n1, n2);
	assert_memory_equal(h1, h2, (size_t)n1 * sizeof(h1[0])); /* deterministic */
	assert_memory_not_equal(h1, plain, sizeof(h1[0]) * 2);	 /* but reordered */

	/* every sample once per epoch, labels travel with their samples */
	struct gm_loader *l, *ref;
	char err[256];
	struct gm_batch b;
	small_opts(&o, good_dir, 2);
	o.pipeline = spec;
	o.epochs = 1;
	assert_int_equal(gm_loader_open(&l, &o, err, sizeof(err)), 0);
	o.pipeline = "read | decode | random_resized_crop 48 | flip | batch 1";
	o.shuffle = false;
	assert_int_equal(gm_loader_open(&ref, &o, err, sizeof(err)), 0);
	int32_t label_of[N_IMAGES];
	struct gm_batch r;
	while (gm_loader_next(ref, &r) == 0)
		label_of[r.sample_ids[0]] = r.labels[0];
	gm_loader_close(ref);
	uint8_t seen[N_IMAGES] = {0};
	int rc, total = 0;
	uint64_t k = 0;
	while ((rc = gm_loader_next(l, &b)) == 0) {
		assert_int_equal(b.index, k++);
		assert_int_equal(gm_loader_release(l, &b), 0);
		for (uint32_t i = 0; i < b.size; i++) {
			seen[b.sample_ids[i]]++;
			assert_int_equal(b.labels[i], label_of[b.sample_ids[i]]);
		}
		total += (int)b.size;
	}
	assert_int_equal(rc, GM_LOADER_END_OF_EPOCH);
	assert_int_equal(gm_loader_next(l, &b), GM_LOADER_END);
	assert_int_equal(total, N_IMAGES);
	for (int i = 0; i < N_IMAGES; i++)
		assert_int_equal(seen[i], 1);
	gm_loader_close(l);

	/* mid-epoch resume is refused, other consumer ops too */
	small_opts(&o, good_dir, 1);
	o.pipeline = spec;
	o.start_batch = 2;
	assert_int_equal(gm_loader_open(&l, &o, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "epoch start"));
	small_opts(&o, good_dir, 1);
	o.pipeline = "read | decode | random_resized_crop 48 | cache | batch 16";
	assert_int_equal(gm_loader_open(&l, &o, err, sizeof(err)), -EOPNOTSUPP);
	assert_non_null(strstr(err, "'cache'"));
}

/* gm_loader_keep: kept batches stay unwritten while later ones come, however long
 * they are held (one held across N - 1 later batches is detached: a private copy at
 * the same addresses), go back in any order, and the stream's bytes are those of a
 * run that keeps nothing. */
static void test_kept_batches_stay_unwritten_and_go_back_in_any_order(void **state)
{
	(void)state;
	struct gm_loader_opts o;
	struct gm_loader *l;
	char err[256];
	uint64_t ref[32], kh[32];
	struct gm_batch b, kb[32];
	int nref, n = 0, rc;
	uint32_t slots;
	bool live[32] = {false};
	small_opts(&o, good_dir, 2);
	o.slots = 4;
	assert_int_equal(run_all(&o, ref, 32, &nref, NULL), 0);
	assert_int_equal(gm_loader_open(&l, &o, err, sizeof(err)), 0);
	assert_int_equal(gm_loader_kept(l, &slots), 0);
	assert_int_equal(slots, 4);
	while ((rc = gm_loader_next(l, &b)) != GM_LOADER_END) {
		if (rc == GM_LOADER_END_OF_EPOCH)
			continue;
		assert_int_equal(rc, 0);
		assert_true(n < nref);
		assert_int_equal(gm_test_batch_hash(&b), ref[n]);
		for (int i = 0; i < n; i++) /* no worker wrote a kept batch */
			if (live[i])
				assert_int_equal(gm_test_batch_hash(&kb[i]), kh[i]);
		void *in_ring = b.data;
		assert_int_equal(gm_loader_keep(l, &b), 0);
		assert_ptr_not_equal(b.data, in_ring); /* the slot's second mapping */
		assert_int_equal(gm_test_batch_hash(&b), ref[n]);
		assert_int_equal(gm_loader_keep(l, &b), -EINVAL); /* not held now */
		kb[n] = b;
		kh[n] = ref[n];
		live[n] = true;
		/* the workers always had 2 of the 4 slots: at most 3 are held here */
		assert_true(gm_loader_kept(l, NULL) <= 3);
		/* the first 6 are held to the end (so most are detached); later ones
		 * go back newest first, two at a time */
		if (n >= 7 && n % 2 == 1) {
			assert_int_equal(gm_loader_release(l, &kb[n]), 0);
			assert_int_equal(gm_loader_release(l, &kb[n]), -EINVAL); /* given back */
			assert_int_equal(gm_loader_release(l, &kb[n - 1]), 0);
			live[n] = live[n - 1] = false;
		}
		n++;
	}
	assert_int_equal(n, nref);
	struct gm_loader_stats st;
	gm_loader_stats(l, &st);
	assert_true(st.kept_copied >= 4); /* batches 0-5 held across the rest */
	assert_true(st.kept_copied <= 6);
	for (int i = 0; i < n; i++)
		if (live[i]) {
			assert_int_equal(gm_test_batch_hash(&kb[i]), kh[i]);
			assert_int_equal(gm_loader_release(l, &kb[i]), 0);
		}
	assert_int_equal(gm_loader_kept(l, NULL), 0);
	memset(&b, 0, sizeof(b));
	assert_int_equal(gm_loader_release(l, &b), -EINVAL);
	assert_non_null(strstr(gm_loader_errmsg(l), "no such batch"));
	gm_loader_close(l);

	/* a shuffle_buffer batch is a copy the next one overwrites: not kept */
	small_opts(&o, good_dir, 1);
	o.pipeline = "read | decode | random_resized_crop 48 | batch 16 | shuffle_buffer 20";
	assert_int_equal(gm_loader_open(&l, &o, err, sizeof(err)), 0);
	assert_int_equal(gm_loader_next(l, &b), 0);
	assert_int_equal(gm_loader_keep(l, &b), -ENOTSUP);
	assert_non_null(strstr(gm_loader_errmsg(l), "shuffle_buffer"));
	gm_loader_close(l);
}

static void test_stop_keeps_views_readable(void **state)
{
	(void)state;
	struct gm_loader_opts o;
	struct gm_loader *l;
	char err[256];
	struct gm_batch b;
	small_opts(&o, good_dir, 2);
	assert_int_equal(gm_loader_open(&l, &o, err, sizeof(err)), 0);
	assert_int_equal(gm_loader_next(l, &b), 0);
	uint64_t h = gm_checksum64(GM_CHECKSUM_INIT, b.data, (size_t)b.size * b.sample_bytes);
	gm_loader_stop(l);
	gm_loader_stop(l); /* idempotent */
	assert_int_equal(count_children(), 0);
	/* the view is still mapped and unchanged */
	assert_int_equal(gm_checksum64(GM_CHECKSUM_INIT, b.data, (size_t)b.size * b.sample_bytes),
			 h);
	assert_int_equal(gm_loader_next(l, &b), -ECANCELED);
	assert_non_null(strstr(gm_loader_errmsg(l), "stopped"));
	gm_loader_close(l);
}

static void test_resume_gives_same_remaining_batches(void **state)
{
	(void)state;
	struct gm_loader_opts o;
	uint64_t all[32], rest[32];
	int nall, nrest;
	small_opts(&o, good_dir, 2);
	assert_int_equal(run_all(&o, all, 32, &nall, NULL), 0);
	/* stop after batch 3 of epoch 0, remember the position, resume */
	struct gm_loader *l;
	char err[256];
	struct gm_batch b;
	assert_int_equal(gm_loader_open(&l, &o, err, sizeof(err)), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(gm_loader_next(l, &b), 0);
	uint32_t ep;
	uint64_t k;
	gm_loader_position(l, &ep, &k);
	assert_int_equal(ep, 0);
	assert_int_equal(k, 3);
	gm_loader_close(l);
	small_opts(&o, good_dir, 1);
	o.epoch = ep;
	o.start_batch = k;
	assert_int_equal(run_all(&o, rest, 32, &nrest, NULL), 0);
	assert_int_equal(nrest, nall - 3);
	assert_memory_equal(rest, all + 3, (size_t)nrest * sizeof(rest[0]));
}

/* A worker that shares its one CPU with a busy process is preempted, and that
 * time is counted (so the controller can leave it out of the worker's rate);
 * it is part of the stage times, never more. Linux keeps run delays in
 * /proc/self/schedstat (CONFIG_SCHED_INFO); where it does not, the test skips. */
static void test_preempted_time_is_counted(void **state)
{
	(void)state;
	if (access("/proc/self/schedstat", R_OK)) {
		skip();
		return;
	}
	cpu_set_t one, saved;
	sched_getaffinity(0, sizeof(saved), &saved);
	CPU_ZERO(&one);
	CPU_SET(sched_getcpu() >= 0 ? sched_getcpu() : 0, &one);
	assert_int_equal(sched_setaffinity(0, sizeof(one), &one), 0);
	pid_t hog = fork();
	if (hog == 0) { /* the busy neighbour, on the same CPU (inherited) */
		alarm(30);
		for (volatile unsigned long i = 0;; i++)
			;
	}
	assert_true(hog > 0);
	struct gm_loader_opts o;
	struct gm_loader *l;
	struct gm_batch b;
	struct gm_loader_stats st;
	char err[256];
	small_opts(&o, good_dir, 1); /* workers inherit the one-CPU affinity */
	o.epochs = 3;
	assert_int_equal(gm_loader_open(&l, &o, err, sizeof(err)), 0);
	while (gm_loader_next(l, &b) == 0)
		gm_loader_release(l, &b);
	gm_loader_stats(l, &st);
	uint64_t pre = gm_loader_preempt_ns(l);
	gm_loader_close(l);
	kill(hog, SIGKILL);
	waitpid(hog, NULL, 0);
	sched_setaffinity(0, sizeof(saved), &saved);
	assert_true(pre > 0);
	assert_true(pre <= st.read_ns + st.decode_ns + st.augment_ns + st.write_ns);
}

/* A ring writer that misbehaves: while corrupt is set, the slot the consumer
 * waited for gets these values once it is ready (the consumer reads them next). */
static bool corrupt;
static struct {
	int32_t status;
	uint32_t n_delta, n_errors;
} bad;
int __real_gm_ring_wait_ready(struct gm_ring *r, uint64_t task, int timeout_ms);
int __wrap_gm_ring_wait_ready(struct gm_ring *r, uint64_t task, int timeout_ms);
int __wrap_gm_ring_wait_ready(struct gm_ring *r, uint64_t task, int timeout_ms)
{
	int rc = __real_gm_ring_wait_ready(r, task, timeout_ms);
	if (rc == 0 && corrupt) {
		struct gm_slot_ctl *ctl =
		    gm_ring_ctl(r, (uint32_t)(task & (gm_ring_hdr(r)->nslots - 1)));
		ctl->status = bad.status;
		ctl->n += bad.n_delta;
		ctl->n_errors = bad.n_errors;
	}
	return rc;
}

static void test_a_slot_no_worker_writes_is_refused(void **state)
{
	(void)state;
	/* statuses 1 and 2 would read as END_OF_EPOCH and END; -5 and INT_MIN as a
	 * failure blaming some file; then a batch larger than the task's, and more
	 * bad samples than samples */
	const struct {
		int32_t status;
		uint32_t n_delta, n_errors;
	} cases[] = {{1, 0, 0}, {2, 0, 0}, {-5, 0, 0}, {INT32_MIN, 0, 0}, {0, 1, 0}, {0, 0, 99}};
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		struct gm_loader_opts o;
		struct gm_loader *l;
		struct gm_batch b;
		char err[256];
		small_opts(&o, good_dir, 1);
		assert_int_equal(gm_loader_open(&l, &o, err, sizeof(err)), 0);
		assert_int_equal(gm_loader_next(l, &b), 0); /* a good batch first */
		bad.status = cases[k].status;
		bad.n_delta = cases[k].n_delta;
		bad.n_errors = cases[k].n_errors;
		corrupt = true;
		int rc = gm_loader_next(l, &b);
		corrupt = false;
		assert_int_equal(rc, -EPROTO);
		assert_non_null(strstr(gm_loader_errmsg(l), "a writer of the ring misbehaves"));
		assert_int_equal(gm_loader_next(l, &b), -EPROTO); /* not delivered: it stays */
		gm_loader_close(l);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_a_slot_no_worker_writes_is_refused),
	    cmocka_unit_test(test_all_bad_dataset_is_an_error),
	    cmocka_unit_test(test_bad_files_fail),
	    cmocka_unit_test(test_bad_files_skip),
	    cmocka_unit_test(test_epoch_contents_and_labels),
	    cmocka_unit_test(test_explicit_order_is_every_epochs_ids),
	    cmocka_unit_test(test_fifo_in_the_tree_is_a_per_sample_error),
	    cmocka_unit_test(test_interrupted_waits_lose_nothing),
	    cmocka_unit_test(test_kept_batches_stay_unwritten_and_go_back_in_any_order),
	    cmocka_unit_test(test_float32_output),
	    cmocka_unit_test(test_float16_output),
	    cmocka_unit_test(test_shards_same_batches),
	    cmocka_unit_test(test_pread_reader_same_batches),
	    cmocka_unit_test(test_many_bad_files_in_one_batch_counted_exactly),
	    cmocka_unit_test(test_open_errors),
	    cmocka_unit_test(test_option_strings_are_copied_at_open),
	    cmocka_unit_test(test_preempted_time_is_counted),
	    cmocka_unit_test(test_resume_gives_same_remaining_batches),
	    cmocka_unit_test(test_same_bytes_with_1_2_4_workers),
	    cmocka_unit_test(test_scale_and_close_reaps),
	    cmocka_unit_test(test_shuffle_buffer_in_the_consumer),
	    cmocka_unit_test(test_stop_keeps_views_readable),
	    cmocka_unit_test(test_sigkill_worker_loses_nothing),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
