/*
 * test_reader.c - the io_uring batch reader: whole-file contents for files of every
 * size class (0 bytes, page boundaries, larger and smaller than their hint), per-file
 * errors, more files than depth, streaming delivery, early stop, and ring failures
 * injected by link-time wrapping. Skips when io_uring is unavailable.
 */
// clang-format off
// LDFLAGS: -Wl,--wrap=io_uring_submit_and_wait -Wl,--wrap=io_uring_queue_init_params -Wl,--wrap=io_uring_register_files_sparse
// clang-format on
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "goldminer/reader.h"

/* ---- fault injection: each counter > 0 fails that many upcoming calls ---- */
int __real_io_uring_submit_and_wait(struct io_uring *ring, unsigned wait_nr);
int __wrap_io_uring_submit_and_wait(struct io_uring *ring, unsigned wait_nr);
int __real_io_uring_queue_init_params(unsigned entries, struct io_uring *ring,
				      struct io_uring_params *p);
int __wrap_io_uring_queue_init_params(unsigned entries, struct io_uring *ring,
				      struct io_uring_params *p);
int __real_io_uring_register_files_sparse(struct io_uring *ring, unsigned nr);
int __wrap_io_uring_register_files_sparse(struct io_uring *ring, unsigned nr);

static int fail_submit_n, fail_submit_err;
static int fail_init_n, fail_init_err, init_calls;
static int fail_reg_n, fail_reg_err;

int __wrap_io_uring_submit_and_wait(struct io_uring *ring, unsigned wait_nr)
{
	if (fail_submit_n > 0) {
		fail_submit_n--;
		return fail_submit_err;
	}
	return __real_io_uring_submit_and_wait(ring, wait_nr);
}

int __wrap_io_uring_queue_init_params(unsigned entries, struct io_uring *ring,
				      struct io_uring_params *p)
{
	init_calls++;
	if (fail_init_n > 0) {
		fail_init_n--;
		return fail_init_err;
	}
	return __real_io_uring_queue_init_params(entries, ring, p);
}

int __wrap_io_uring_register_files_sparse(struct io_uring *ring, unsigned nr)
{
	if (fail_reg_n > 0) {
		fail_reg_n--;
		return fail_reg_err;
	}
	return __real_io_uring_register_files_sparse(ring, nr);
}

/* ---- test files ---- */
static char dir[64];
static int uring_ok; /* 0 when io_uring works here, else the -errno that says why not */

static unsigned char byte_at(unsigned file, size_t k)
{
	return (unsigned char)(file * 131u + k * 7u + (k >> 9) + (k >> 17));
}

static void write_file(const char *path, unsigned id, size_t size)
{
	unsigned char *b = malloc(size ? size : 1);
	int fd;

	assert_non_null(b);
	for (size_t k = 0; k < size; k++)
		b[k] = byte_at(id, k);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, b, size), (ssize_t)size);
	close(fd);
	free(b);
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(p);
}

static int group_setup(void **state)
{
	struct gm_reader *r;

	(void)state;
	strcpy(dir, "/tmp/gm-test-uring-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	uring_ok = gm_reader_create(&r, 4);
	gm_reader_destroy(r);
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	return nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

#define NEED_URING()                                                                               \
	do {                                                                                       \
		if (uring_ok) {                                                                    \
			print_message("io_uring unavailable: %s\n", strerror(-uring_ok));          \
			skip();                                                                    \
		}                                                                                  \
	} while (0)

/* What the callback saw, per file. */
struct seen {
	unsigned n;
	unsigned calls[512];
	int err[512];
	size_t len[512];
	int bad[512]; /* content mismatch */
	size_t expect[512];
	unsigned ids[512];
	int stop_after;		   /* return 42 on this call number (1-based); 0 never */
	struct gm_reader *reenter; /* call gm_reader_read on this from the first callback */
	int reenter_ret;
	unsigned ncalls;
	char create_on_first[256]; /* create this file during the first callback */
};

static int check_cb(void *arg, unsigned i, const void *data, size_t len, int err)
{
	struct seen *s = arg;
	const unsigned char *p = data;

	assert_true(i < s->n);
	s->ncalls++;
	s->calls[i]++;
	s->err[i] = err;
	s->len[i] = len;
	if (!err) {
		assert_non_null(data);
		for (size_t k = 0; k < len; k++)
			if (p[k] != byte_at(s->ids[i], k)) {
				s->bad[i] = 1;
				break;
			}
	} else {
		assert_null(data);
	}
	if (s->ncalls == 1 && s->reenter)
		s->reenter_ret =
		    gm_reader_read(s->reenter, (const char *const *)&data, NULL, 0, check_cb, NULL);
	if (s->ncalls == 1 && s->create_on_first[0])
		write_file(s->create_on_first, s->ids[s->n - 1], s->expect[s->n - 1]);
	if (s->stop_after && (int)s->ncalls == s->stop_after)
		return 42;
	return 0;
}

/* Sizes around every boundary the reader cares about. */
static const size_t sizes[] = {0,     1,     100,   4095,   4096,    4097,  65535,
			       65536, 65537, 69632, 200000, 1048579, 38000, 12345};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static void make_set(struct seen *s, char (*paths)[128], const char **pp, uint64_t *hints,
		     unsigned n, const char *tag)
{
	memset(s, 0, sizeof(*s));
	s->n = n;
	for (unsigned i = 0; i < n; i++) {
		size_t size = sizes[i % NSIZES] + (i / NSIZES) * 3;

		snprintf(paths[i], 128, "%s/%s-%u.bin", dir, tag, i);
		write_file(paths[i], i, size);
		s->ids[i] = i;
		s->expect[i] = size;
		pp[i] = paths[i];
		/* Hints: exact, too small (file grew), too large (file shrank), none. */
		switch (i % 4) {
		case 0:
			hints[i] = size;
			break;
		case 1:
			hints[i] = size / 3;
			break;
		case 2:
			hints[i] = size * 2 + 10;
			break;
		default:
			hints[i] = 0;
			break;
		}
	}
}

static void test_read_many_sizes(void **state)
{
	static char paths[100][128];
	static const char *pp[100];
	static uint64_t hints[100];
	static struct seen s;
	struct gm_reader *r;

	(void)state;
	NEED_URING();
	make_set(&s, paths, pp, hints, 100, "many");
	assert_int_equal(gm_reader_create(&r, 8), 0); /* 100 files through 8 slots */
	for (int round = 0; round < 3; round++) {     /* reuse: buffers already grown */
		memset(s.calls, 0, sizeof(s.calls));
		s.ncalls = 0;
		assert_int_equal(
		    gm_reader_read(r, pp, round == 2 ? NULL : hints, 100, check_cb, &s), 0);
		assert_int_equal(s.ncalls, 100);
		for (unsigned i = 0; i < 100; i++) {
			assert_int_equal(s.calls[i], 1);
			assert_int_equal(s.err[i], 0);
			assert_int_equal(s.len[i], s.expect[i]);
			assert_int_equal(s.bad[i], 0);
		}
	}
	assert_string_equal(gm_reader_errmsg(r), "");
	gm_reader_destroy(r);
}

static void test_errors_per_file(void **state)
{
	static char paths[40][128];
	static const char *pp[40];
	static uint64_t hints[40];
	static struct seen s;
	struct gm_reader *r;

	(void)state;
	NEED_URING();
	make_set(&s, paths, pp, hints, 40, "err");
	/* Every 5th file is missing, file 7 is a directory, file 9 claims 2 GiB. */
	for (unsigned i = 0; i < 40; i += 5)
		assert_int_equal(unlink(paths[i]), 0);
	snprintf(paths[7], 128, "%s", dir);
	hints[9] = 2ull << 30;
	assert_int_equal(gm_reader_create(&r, 3), 0);
	assert_int_equal(gm_reader_read(r, pp, hints, 40, check_cb, &s), 0);
	assert_int_equal(s.ncalls, 40);
	for (unsigned i = 0; i < 40; i++) {
		assert_int_equal(s.calls[i], 1);
		if (i % 5 == 0) {
			assert_int_equal(s.err[i], -ENOENT);
		} else if (i == 7) {
			assert_int_equal(s.err[i], -EISDIR);
		} else if (i == 9) {
			assert_int_equal(s.err[i], -EFBIG);
		} else {
			assert_int_equal(s.err[i], 0);
			assert_int_equal(s.len[i], s.expect[i]);
			assert_int_equal(s.bad[i], 0);
		}
	}
	gm_reader_destroy(r);
}

/* Byte ranges of one big file (tar shard members): exact lengths at offsets, and a
 * range past the end of the file is -ENODATA. */
struct ranges {
	unsigned n, calls;
	int err[64];
	size_t len[64];
	uint64_t off[64];
	int bad[64];
};

static int range_cb(void *arg, unsigned i, const void *data, size_t len, int err)
{
	struct ranges *g = arg;
	const unsigned char *p = data;
	assert_true(i < g->n);
	g->calls++;
	g->err[i] = err;
	g->len[i] = len;
	for (size_t k = 0; !err && k < len; k++)
		if (p[k] != byte_at(5, g->off[i] + k)) {
			g->bad[i] = 1;
			break;
		}
	return 0;
}

static void test_read_ranges(void **state)
{
	static struct ranges g;
	static const char *pp[64];
	static uint64_t lens[64];
	char path[128];
	struct gm_reader *r;
	const size_t fsize = 3u << 20;
	(void)state;
	NEED_URING();
	snprintf(path, sizeof(path), "%s/shard.bin", dir);
	write_file(path, 5, fsize);
	memset(&g, 0, sizeof(g));
	g.n = 40;
	for (unsigned i = 0; i < g.n; i++) {
		pp[i] = path;
		g.off[i] = (uint64_t)i * 77777 % (fsize - 300000);
		lens[i] = sizes[i % NSIZES] > 250000 ? 250000 : sizes[i % NSIZES];
	}
	g.off[38] = fsize - 10; /* 10 bytes left: short */
	lens[38] = 4096;
	g.off[39] = fsize + 5; /* past the end */
	lens[39] = 10;
	assert_int_equal(gm_reader_create(&r, 4), 0);
	assert_int_equal(gm_reader_read_at(r, pp, g.off, lens, g.n, range_cb, &g), 0);
	assert_int_equal(g.calls, g.n);
	for (unsigned i = 0; i < 38; i++) {
		assert_int_equal(g.err[i], 0);
		assert_int_equal(g.len[i], lens[i]);
		assert_int_equal(g.bad[i], 0);
	}
	assert_int_equal(g.err[38], -ENODATA);
	assert_int_equal(g.err[39], -ENODATA);
	/* lengths are required with offsets */
	assert_int_equal(gm_reader_read_at(r, pp, g.off, NULL, 1, range_cb, &g), -EINVAL);
	gm_reader_destroy(r);
	unlink(path);
}

/* Registered files (shards kept open): ranges by file index, a file that could not
 * be opened fails its own reads, and a table RLIMIT_NOFILE refuses means by path. */
static void test_read_fixed(void **state)
{
	static struct ranges g;
	static uint64_t lens[64];
	static unsigned fi[64];
	char p0[128], p1[128], p2[128];
	struct gm_reader *r;
	const size_t fsize = 1u << 20;
	(void)state;
	NEED_URING();
	snprintf(p0, sizeof(p0), "%s/fixed0.bin", dir);
	snprintf(p1, sizeof(p1), "%s/fixed-missing.bin", dir);
	snprintf(p2, sizeof(p2), "%s/fixed2.bin", dir);
	write_file(p0, 5, fsize);
	write_file(p2, 5, fsize);
	const char *files[] = {p0, p1, p2};
	assert_int_equal(gm_reader_create_files(&r, 3, files, 3), 0);
	assert_int_equal(gm_reader_fixed_files(r), 3);
	memset(&g, 0, sizeof(g));
	g.n = 30;
	for (unsigned i = 0; i < g.n; i++) {
		fi[i] = i % 3;
		g.off[i] = (uint64_t)i * 30011 % (fsize - 70000);
		lens[i] = sizes[i % NSIZES] > 65537 ? 65537 : sizes[i % NSIZES];
	}
	g.off[29] = fsize - 100; /* in file 2: runs past its end */
	lens[29] = 4096;
	assert_int_equal(gm_reader_read_fixed(r, fi, g.off, lens, g.n, range_cb, &g), 0);
	assert_int_equal(g.calls, g.n);
	for (unsigned i = 0; i < 29; i++) {
		if (fi[i] == 1) {
			assert_int_equal(g.err[i], -ENOENT);
			continue;
		}
		assert_int_equal(g.err[i], 0);
		assert_int_equal(g.len[i], lens[i]);
		assert_int_equal(g.bad[i], 0);
	}
	assert_int_equal(g.err[29], -ENODATA);
	/* a truncated file is seen through the registered descriptor too */
	assert_int_equal(truncate(p0, 1000), 0);
	memset(&g, 0, sizeof(g));
	g.n = 1;
	fi[0] = 0;
	g.off[0] = 500;
	lens[0] = 600;
	assert_int_equal(gm_reader_read_fixed(r, fi, g.off, lens, 1, range_cb, &g), 0);
	assert_int_equal(g.err[0], -ENODATA);
	fi[0] = 7; /* not registered */
	assert_int_equal(gm_reader_read_fixed(r, fi, g.off, lens, 1, range_cb, &g), 0);
	assert_int_equal(g.err[0], -EBADF);
	gm_reader_destroy(r);
	/* without registered files */
	assert_int_equal(gm_reader_create(&r, 2), 0);
	assert_int_equal(gm_reader_fixed_files(r), 0);
	assert_int_equal(gm_reader_read_fixed(r, fi, g.off, lens, 1, range_cb, &g), -ENOTSUP);
	gm_reader_destroy(r);
	/* a table larger than RLIMIT_NOFILE: created anyway, reading by path */
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct rlimit rl = {32, 32};
		static const char *many[100];
		for (int i = 0; i < 100; i++)
			many[i] = p2;
		if (setrlimit(RLIMIT_NOFILE, &rl))
			_exit(3);
		if (gm_reader_create_files(&r, 2, many, 100))
			_exit(1);
		_exit(gm_reader_fixed_files(r) == 0 ? 0 : 2);
	}
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	unlink(p0);
	unlink(p2);
}

/* A FIFO (or a device) among the files is refused without being opened for
 * reading, which would wait for a writer for ever (an io_uring OPENAT as much as
 * open()): -ESPIPE for it, the other files read as usual. By path and as a
 * registered file. A deadline turns a hang into a failure. */
static void test_fifo_never_blocks(void **state)
{
	static struct seen s;
	static char paths[4][128];
	static const char *pp[4];
	static uint64_t hints[4];
	static struct ranges g;
	struct gm_reader *r;
	(void)state;
	NEED_URING();
	make_set(&s, paths, pp, hints, 4, "fifo");
	assert_int_equal(unlink(paths[1]), 0);
	assert_int_equal(mkfifo(paths[1], 0600), 0);
	pp[2] = "/dev/zero";
	alarm(20);
	assert_int_equal(gm_reader_create(&r, 4), 0);
	assert_int_equal(gm_reader_read(r, pp, hints, 4, check_cb, &s), 0);
	assert_int_equal(s.err[1], -ESPIPE);
	assert_int_equal(s.err[2], -ESPIPE);
	assert_int_equal(s.err[0], 0);
	assert_int_equal(s.err[3], 0);
	assert_int_equal(s.bad[3], 0);
	gm_reader_destroy(r);
	/* a shard kept open in the file table */
	const char *files[] = {paths[1], paths[0]};
	unsigned fi[2] = {0, 1};
	uint64_t lens[2] = {10, 10};
	memset(&g, 0, sizeof(g));
	g.n = 2;
	assert_int_equal(gm_reader_create_files(&r, 2, files, 2), 0);
	if (gm_reader_fixed_files(r)) {
		assert_int_equal(gm_reader_read_fixed(r, fi, g.off, lens, 2, range_cb, &g), 0);
		assert_int_equal(g.err[0], -ESPIPE);
	}
	gm_reader_destroy(r);
	alarm(0);
	unlink(paths[1]);
}

static void test_streaming_delivery(void **state)
{
	/* The last file does not exist when the batch starts; the first callback
	 * creates it. It can only be read if callbacks run while later files are
	 * still to be submitted, i.e. delivery is streamed, not after the batch. */
	static char paths[20][128];
	static const char *pp[20];
	static uint64_t hints[20];
	static struct seen s;
	struct gm_reader *r;

	(void)state;
	NEED_URING();
	make_set(&s, paths, pp, hints, 20, "stream");
	assert_int_equal(unlink(paths[19]), 0);
	snprintf(s.create_on_first, sizeof(s.create_on_first), "%s", paths[19]);
	assert_int_equal(gm_reader_create(&r, 4), 0);
	assert_int_equal(gm_reader_read(r, pp, hints, 20, check_cb, &s), 0);
	assert_int_equal(s.ncalls, 20);
	assert_int_equal(s.err[19], 0);
	assert_int_equal(s.len[19], s.expect[19]);
	assert_int_equal(s.bad[19], 0);
	gm_reader_destroy(r);
}

static void test_early_stop(void **state)
{
	static char paths[30][128];
	static const char *pp[30];
	static uint64_t hints[30];
	static struct seen s;
	struct gm_reader *r;

	(void)state;
	NEED_URING();
	make_set(&s, paths, pp, hints, 30, "stop");
	assert_int_equal(gm_reader_create(&r, 4), 0);
	s.stop_after = 5;
	assert_int_equal(gm_reader_read(r, pp, hints, 30, check_cb, &s), 42);
	assert_int_equal(s.ncalls, 5); /* nothing delivered after the stop */
	/* The reader drained and is reusable. */
	memset(s.calls, 0, sizeof(s.calls));
	s.ncalls = 0;
	s.stop_after = 0;
	assert_int_equal(gm_reader_read(r, pp, hints, 30, check_cb, &s), 0);
	assert_int_equal(s.ncalls, 30);
	for (unsigned i = 0; i < 30; i++) {
		assert_int_equal(s.calls[i], 1);
		assert_int_equal(s.bad[i], 0);
	}
	gm_reader_destroy(r);
}

static void test_empty_batch_and_bad_args(void **state)
{
	struct gm_reader *r;
	static struct seen s;
	const char *p = "x";

	(void)state;
	NEED_URING();
	assert_int_equal(gm_reader_create(&r, 0), -EINVAL);
	assert_non_null(strstr(gm_reader_errmsg(NULL), "gm_reader_create"));
	assert_int_equal(gm_reader_create(&r, 2), 0);
	memset(&s, 0, sizeof(s));
	assert_int_equal(gm_reader_read(r, NULL, NULL, 0, check_cb, &s), 0);
	assert_int_equal(s.ncalls, 0);
	assert_int_equal(gm_reader_read(r, &p, NULL, 1, NULL, &s), -EINVAL);
	assert_non_null(strstr(gm_reader_errmsg(r), "gm_reader_read"));
	/* A callback may not re-enter its reader; the outer batch is unharmed. */
	{
		char path[128];
		const char *pp = path;

		snprintf(path, sizeof(path), "%s/reenter.bin", dir);
		write_file(path, 0, 100);
		memset(&s, 0, sizeof(s));
		s.n = 1;
		s.expect[0] = 100;
		s.reenter = r;
		assert_int_equal(gm_reader_read(r, &pp, NULL, 1, check_cb, &s), 0);
		assert_int_equal(s.reenter_ret, -EBUSY);
		assert_int_equal(s.ncalls, 1);
		assert_int_equal(s.len[0], 100);
		assert_int_equal(s.bad[0], 0);
	}
	gm_reader_destroy(r);
	gm_reader_destroy(NULL);
}

static void test_init_failure(void **state)
{
	struct gm_reader *r = (struct gm_reader *)1;
	int errs[] = {-ENOSYS, -EPERM, -ENOMEM};

	(void)state;
	setenv("GM_READER", "io_uring", 1); /* required: no pread fallback */
	for (unsigned k = 0; k < 3; k++) {
		fail_init_n = 1;
		fail_init_err = errs[k];
		assert_int_equal(gm_reader_create(&r, 8), errs[k]);
		assert_null(r);
		assert_non_null(strstr(gm_reader_errmsg(NULL), "io_uring_queue_init_params"));
		assert_non_null(strstr(gm_reader_errmsg(NULL), strerror(-errs[k])));
	}
	fail_init_n = 0;
	unsetenv("GM_READER");
}

/* Where io_uring cannot be set up (a seccomp profile, gVisor, an old kernel), the
 * reader falls back to pread and says why; reads give the same results. */
static void test_pread_fallback(void **state)
{
	static char paths[12][128];
	static const char *pp[12];
	static uint64_t hints[12];
	static struct seen s;
	struct gm_reader *r;
	(void)state;
	unsetenv("GM_READER");
	fail_init_n = 1;
	fail_init_err = -EPERM;
	assert_int_equal(gm_reader_create(&r, 4), 0);
	fail_init_n = 0;
	assert_string_equal(gm_reader_mode(r), "pread");
	assert_non_null(strstr(gm_reader_why(r), "io_uring_queue_init_params"));
	assert_non_null(strstr(gm_reader_why(r), strerror(EPERM)));
	make_set(&s, paths, pp, hints, 12, "pfall");
	assert_int_equal(gm_reader_read(r, pp, hints, 12, check_cb, &s), 0);
	assert_int_equal(s.ncalls, 12);
	for (unsigned i = 0; i < 12; i++) {
		assert_int_equal(s.err[i], 0);
		assert_int_equal(s.len[i], s.expect[i]);
		assert_int_equal(s.bad[i], 0);
	}
	gm_reader_destroy(r);
	/* a file table the kernel refuses (too old for sparse tables): the same */
	fail_reg_n = 1;
	fail_reg_err = -EINVAL;
	assert_int_equal(gm_reader_create(&r, 4), 0);
	fail_reg_n = 0;
	assert_string_equal(gm_reader_mode(r), "pread");
	assert_non_null(strstr(gm_reader_why(r), "io_uring_register_files_sparse"));
	gm_reader_destroy(r);
	if (!uring_ok) {
		assert_int_equal(gm_reader_create(&r, 4), 0);
		assert_string_equal(gm_reader_mode(r), "io_uring");
		assert_string_equal(gm_reader_why(r), "");
		gm_reader_destroy(r);
	}
}

static void test_init_flag_fallback(void **state)
{
	struct gm_reader *r;
	static char paths[6][128];
	static const char *pp[6];
	static uint64_t hints[6];
	static struct seen s;

	(void)state;
	NEED_URING();
	/* A kernel that rejects the newer setup flags answers -EINVAL: fall back. */
	fail_init_n = 2;
	fail_init_err = -EINVAL;
	init_calls = 0;
	assert_int_equal(gm_reader_create(&r, 2), 0);
	assert_int_equal(init_calls, 3);
	make_set(&s, paths, pp, hints, 6, "fallback");
	assert_int_equal(gm_reader_read(r, pp, hints, 6, check_cb, &s), 0);
	assert_int_equal(s.ncalls, 6);
	gm_reader_destroy(r);
	/* -EINVAL for every flag set is a failure, not a loop (io_uring required). */
	setenv("GM_READER", "io_uring", 1);
	fail_init_n = 3;
	init_calls = 0;
	assert_int_equal(gm_reader_create(&r, 2), -EINVAL);
	assert_int_equal(init_calls, 3);
	fail_init_n = 0;
	unsetenv("GM_READER");
}

static void test_register_failure(void **state)
{
	struct gm_reader *r;

	(void)state;
	NEED_URING();
	setenv("GM_READER", "io_uring", 1);
	fail_reg_n = 1;
	fail_reg_err = -EMFILE;
	assert_int_equal(gm_reader_create(&r, 8), -EMFILE);
	assert_non_null(strstr(gm_reader_errmsg(NULL), "io_uring_register_files_sparse"));
	fail_reg_n = 0;
	unsetenv("GM_READER");
}

static void test_submit_failure(void **state)
{
	static char paths[10][128];
	static const char *pp[10];
	static uint64_t hints[10];
	static struct seen s;
	struct gm_reader *r;

	(void)state;
	NEED_URING();
	make_set(&s, paths, pp, hints, 10, "submit");
	assert_int_equal(gm_reader_create(&r, 4), 0);
	/* -EINTR is not a failure: the batch still completes. */
	fail_submit_n = 1;
	fail_submit_err = -EINTR;
	assert_int_equal(gm_reader_read(r, pp, hints, 10, check_cb, &s), 0);
	assert_int_equal(s.ncalls, 10);
	gm_reader_destroy(r);

	/* A real ring failure is -errno with a message, and the reader stays failed. */
	assert_int_equal(gm_reader_create(&r, 4), 0);
	fail_submit_n = 1;
	fail_submit_err = -EFAULT;
	s.ncalls = 0;
	assert_int_equal(gm_reader_read(r, pp, hints, 10, check_cb, &s), -EFAULT);
	assert_int_equal(s.ncalls, 0);
	assert_non_null(strstr(gm_reader_errmsg(r), "io_uring_submit_and_wait"));
	assert_int_equal(gm_reader_read(r, pp, hints, 10, check_cb, &s), -EFAULT);
	assert_non_null(strstr(gm_reader_errmsg(r), "broken"));
	gm_reader_destroy(r);
	fail_submit_n = 0;
}

/* The behaviour tests again with the pread reader (GM_READER=pread). */
#define PREAD_TWIN(name)                                                                           \
	static void name##_pread(void **state)                                                     \
	{                                                                                          \
		setenv("GM_READER", "pread", 1);                                                   \
		name(state);                                                                       \
		unsetenv("GM_READER");                                                             \
	}
PREAD_TWIN(test_read_many_sizes)
PREAD_TWIN(test_errors_per_file)
PREAD_TWIN(test_read_ranges)
PREAD_TWIN(test_read_fixed)
PREAD_TWIN(test_streaming_delivery)
PREAD_TWIN(test_early_stop)
PREAD_TWIN(test_empty_batch_and_bad_args)
PREAD_TWIN(test_fifo_never_blocks)

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_read_many_sizes),
	    cmocka_unit_test(test_errors_per_file),
	    cmocka_unit_test(test_read_ranges),
	    cmocka_unit_test(test_read_fixed),
	    cmocka_unit_test(test_streaming_delivery),
	    cmocka_unit_test(test_early_stop),
	    cmocka_unit_test(test_empty_batch_and_bad_args),
	    cmocka_unit_test(test_init_failure),
	    cmocka_unit_test(test_pread_fallback),
	    cmocka_unit_test(test_read_many_sizes_pread),
	    cmocka_unit_test(test_errors_per_file_pread),
	    cmocka_unit_test(test_read_ranges_pread),
	    cmocka_unit_test(test_read_fixed_pread),
	    cmocka_unit_test(test_streaming_delivery_pread),
	    cmocka_unit_test(test_early_stop_pread),
	    cmocka_unit_test(test_empty_batch_and_bad_args_pread),
	    cmocka_unit_test(test_fifo_never_blocks),
	    cmocka_unit_test(test_fifo_never_blocks_pread),
	    cmocka_unit_test(test_init_flag_fallback),
	    cmocka_unit_test(test_register_failure),
	    cmocka_unit_test(test_submit_failure),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
