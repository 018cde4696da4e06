/*
 * test_dataset.c - the ImageFolder index: torchvision's class and file order
 * (byte order, os.walk directory order), extension rules, labels, sizes, the
 * fingerprint, every error path (message names the path) and no fd leaks.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "goldminer/dataset.h"
#include "goldminer/synth.h"

static char base[64]; /* mkdtemp dir; each test works in its own subdirectory */

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	chmod(p, 0755); /* undo the permission tests */
	return remove(p);
}

static int group_setup(void **state)
{
	(void)state;
	strcpy(base, "/tmp/gm-test-dataset-XXXXXX");
	return mkdtemp(base) ? 0 : -1;
}

static int group_teardown(void **state)
{
	(void)state;
	return nftw(base, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* Create base/rel (and its parent directories) holding `size` bytes. */
static void mkfile(const char *rel, size_t size)
{
	char path[512];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", base, rel);
	for (char *p = path + strlen(base) + 1; (p = strchr(p, '/')); p++) {
		*p = '\0';
		assert_true(mkdir(path, 0755) == 0 || errno == EEXIST);
		*p = '/';
	}
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	for (size_t i = 0; i < size; i++)
		assert_int_equal(write(fd, "x", 1), 1);
	close(fd);
}

static void mkdir_rel(const char *rel)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", base, rel);
	assert_int_equal(mkdir(path, 0755), 0);
}

static char *full(const char *rel)
{
	static char buf[4][512];
	static int k;

	k = (k + 1) % 4;
	snprintf(buf[k], sizeof(buf[k]), "%s/%s", base, rel);
	return buf[k];
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	assert_non_null(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

static void test_class_byte_order(void **state)
{
	/* Byte order, not locale or natural order: "B" < "Z_x" < "a"; "class10" < "class2". */
	static const char *const want[] = {"B", "Z_x", "a", "class10", "class2"};
	struct gm_dataset *d;
	char err[256];

	(void)state;
	mkfile("order/class2/a.jpg", 1);
	mkfile("order/a/a.jpg", 2);
	mkfile("order/class10/a.jpg", 3);
	mkfile("order/B/a.jpg", 4);
	mkfile("order/Z_x/a.jpg", 5);
	mkfile("order/not-a-class.jpg", 1); /* files at the root are not classes */
	assert_int_equal(gm_dataset_open(&d, full("order"), err, sizeof(err)), 0);
	assert_int_equal(gm_dataset_num_classes(d), 5);
	assert_int_equal(gm_dataset_count(d), 5);
	for (uint32_t c = 0; c < 5; c++) {
		char rel[64];

		assert_string_equal(gm_dataset_class_name(d, c), want[c]);
		assert_int_equal(gm_dataset_label(d, c), c);
		snprintf(rel, sizeof(rel), "order/%s/a.jpg", want[c]);
		assert_string_equal(gm_dataset_path(d, c), full(rel));
	}
	/* Paths are root/class/file, and the label matches the class in the path. */
	assert_string_equal(gm_dataset_path(d, 0), full("order/B/a.jpg"));
	assert_string_equal(gm_dataset_path(d, 3), full("order/class10/a.jpg"));
	assert_string_equal(gm_dataset_path(d, 4), full("order/class2/a.jpg"));
	assert_int_equal(gm_dataset_file_size(d, 0), 4);
	assert_int_equal(gm_dataset_file_size(d, 4), 1);
	assert_int_equal(gm_dataset_max_file_size(d), 5);
	assert_string_equal(gm_dataset_root(d), full("order"));
	assert_null(gm_dataset_class_name(d, 5));
	assert_null(gm_dataset_path(d, 5));
	gm_dataset_close(d);
	gm_dataset_close(NULL);
}

static void test_nested_walk_order(void **state)
{
	/* torchvision sorts os.walk's directories by full path string, then the files
	 * of each: "cls" < "cls/a" < "cls/a-b" < "cls/a/b" ('-' < '/'), which is not
	 * the order of sorting the file paths themselves. */
	static const char *const want[] = {
	    "nest/cls/top.JPG",	   "nest/cls/zz.jpg",	 "nest/cls/a/z.jpg",
	    "nest/cls/a-b/y.jpeg", "nest/cls/a/b/x.jpg", "nest/cls/a/b/c/w.jpg",
	};
	struct gm_dataset *d;
	char err[256];

	(void)state;
	mkfile("nest/cls/a/b/x.jpg", 1);
	mkfile("nest/cls/a/b/c/w.jpg", 1);
	mkfile("nest/cls/a-b/y.jpeg", 1);
	mkfile("nest/cls/a/z.jpg", 1);
	mkfile("nest/cls/zz.jpg", 1);
	mkfile("nest/cls/top.JPG", 1);
	assert_int_equal(gm_dataset_open(&d, full("nest/"), err, sizeof(err)), 0);
	assert_string_equal(gm_dataset_root(d), full("nest")); /* trailing '/' dropped */
	assert_int_equal(gm_dataset_count(d), 6);
	for (uint32_t i = 0; i < 6; i++) {
		assert_string_equal(gm_dataset_path(d, i), full(want[i]));
		assert_int_equal(gm_dataset_label(d, i), 0);
	}
	gm_dataset_close(d);
}

static void test_extensions_and_special_entries(void **state)
{
	struct gm_dataset *d;
	char err[256];

	(void)state;
	mkfile("ext/c/a.jpg", 1);
	mkfile("ext/c/b.JPG", 1);
	mkfile("ext/c/c.jpeg", 1);
	mkfile("ext/c/d.JPEG", 1);
	mkfile("ext/c/e.JpEg", 1);
	mkfile("ext/c/.hidden.jpg", 1); /* kept, as torchvision keeps it */
	mkfile("ext/c/f.png", 1);
	mkfile("ext/c/g.jpg.txt", 1);
	mkfile("ext/c/hjpg", 1);
	mkfile("ext/c/i.jpe", 1);
	mkfile("ext/c/README", 1);
	mkfile("ext/c/dir.jpg/inner.jpg", 1); /* a directory with a JPEG name is walked */
	assert_int_equal(symlink("nowhere", full("ext/c/broken.jpg")), 0);
	assert_int_equal(symlink("a.jpg", full("ext/c/link.jpg")), 0);
	assert_int_equal(symlink("..", full("ext/c/loop")), 0); /* cycle: not re-entered */
	assert_int_equal(mkfifo(full("ext/c/fifo.jpg"), 0644), 0);
	assert_int_equal(gm_dataset_open(&d, full("ext"), err, sizeof(err)), 0);
	assert_int_equal(gm_dataset_count(d), 8);
	assert_string_equal(gm_dataset_path(d, 0), full("ext/c/.hidden.jpg"));
	assert_string_equal(gm_dataset_path(d, 1), full("ext/c/a.jpg"));
	assert_string_equal(gm_dataset_path(d, 2), full("ext/c/b.JPG"));
	assert_string_equal(gm_dataset_path(d, 3), full("ext/c/c.jpeg"));
	assert_string_equal(gm_dataset_path(d, 4), full("ext/c/d.JPEG"));
	assert_string_equal(gm_dataset_path(d, 5), full("ext/c/e.JpEg"));
	assert_string_equal(gm_dataset_path(d, 6), full("ext/c/link.jpg"));
	assert_string_equal(gm_dataset_path(d, 7), full("ext/c/dir.jpg/inner.jpg"));
	gm_dataset_close(d);
}

static void test_symlinked_class_and_dir(void **state)
{
	struct gm_dataset *d;
	char err[256];

	(void)state;
	mkfile("real/x/p.jpg", 7);
	mkfile("sym/k/q.jpg", 1);
	assert_int_equal(symlink(full("real/x"), full("sym/j")), 0);	 /* class dir */
	assert_int_equal(symlink(full("real/x"), full("sym/k/sub")), 0); /* nested */
	assert_int_equal(gm_dataset_open(&d, full("sym"), err, sizeof(err)), 0);
	assert_int_equal(gm_dataset_num_classes(d), 2);
	assert_int_equal(gm_dataset_count(d), 3);
	assert_string_equal(gm_dataset_path(d, 0), full("sym/j/p.jpg"));
	assert_int_equal(gm_dataset_file_size(d, 0), 7);
	assert_string_equal(gm_dataset_path(d, 1), full("sym/k/q.jpg"));
	assert_string_equal(gm_dataset_path(d, 2), full("sym/k/sub/p.jpg"));
	assert_int_equal(gm_dataset_label(d, 2), 1);
	gm_dataset_close(d);
}

/* The fingerprint, recomputed here from its definition: FNV-1a 64 over, per sample,
 * the path relative to root with its NUL, the size (8 bytes LE), the label (4 LE). */
static uint64_t ref_fingerprint(const struct gm_dataset *d)
{
	uint64_t h = 0xcbf29ce484222325ull;
	size_t skip = strlen(gm_dataset_root(d)) + 1;

	for (uint32_t i = 0; i < gm_dataset_count(d); i++) {
		const char *rel = gm_dataset_path(d, i) + skip;
		uint64_t size = gm_dataset_file_size(d, i);
		uint32_t label = gm_dataset_label(d, i);
		unsigned char b[12];

		for (size_t k = 0; k <= strlen(rel); k++) {
			h ^= (unsigned char)rel[k];
			h *= 0x100000001b3ull;
		}
		for (int k = 0; k < 8; k++)
			b[k] = (unsigned char)(size >> (8 * k));
		for (int k = 0; k < 4; k++)
			b[8 + k] = (unsigned char)(label >> (8 * k));
		for (int k = 0; k < 12; k++) {
			h ^= b[k];
			h *= 0x100000001b3ull;
		}
	}
	return h;
}

static void test_fingerprint(void **state)
{
	struct gm_dataset *d;
	uint64_t f0, f1, f2, f3;
	char err[256];

	(void)state;
	for (int c = 0; c < 3; c++)
		for (int i = 0; i < 4; i++) {
			char rel[64];

			snprintf(rel, sizeof(rel), "fp/c%d/%d.jpg", c, i);
			mkfile(rel, (size_t)(c * 4 + i));
		}
	assert_int_equal(gm_dataset_open(&d, full("fp"), err, sizeof(err)), 0);
	f0 = gm_dataset_fingerprint(d);
	assert_true(f0 == ref_fingerprint(d));
	gm_dataset_close(d);
	/* Same tree, same fingerprint (also through a different spelling of root). */
	assert_int_equal(gm_dataset_open(&d, full("fp//"), err, sizeof(err)), 0);
	assert_true(gm_dataset_fingerprint(d) == f0);
	gm_dataset_close(d);
	/* A file changing size changes it. */
	mkfile("fp/c1/2.jpg", 100);
	assert_int_equal(gm_dataset_open(&d, full("fp"), err, sizeof(err)), 0);
	f1 = gm_dataset_fingerprint(d);
	assert_true(f1 != f0);
	gm_dataset_close(d);
	/* A rename (same size) changes it. */
	assert_int_equal(rename(full("fp/c1/2.jpg"), full("fp/c1/2b.jpg")), 0);
	assert_int_equal(gm_dataset_open(&d, full("fp"), err, sizeof(err)), 0);
	f2 = gm_dataset_fingerprint(d);
	assert_true(f2 != f1 && f2 != f0);
	gm_dataset_close(d);
	/* A new class shifts labels: changes it. */
	mkfile("fp/b0/0.jpg", 0);
	assert_int_equal(gm_dataset_open(&d, full("fp"), err, sizeof(err)), 0);
	f3 = gm_dataset_fingerprint(d);
	assert_true(f3 != f2);
	assert_true(f3 == ref_fingerprint(d));
	gm_dataset_close(d);
}

static void test_many_files(void **state)
{
	struct gm_dataset *d;
	char err[256];

	(void)state;
	mkdir_rel("many");
	for (int c = 0; c < 20; c++) {
		char rel[64];

		for (int i = 0; i < 20; i++) {
			snprintf(rel, sizeof(rel), "many/n%02d/img_%03d.JPEG", 19 - c, 19 - i);
			mkfile(rel, 0);
		}
	}
	assert_int_equal(gm_dataset_open(&d, full("many"), err, sizeof(err)), 0);
	assert_int_equal(gm_dataset_count(d), 400);
	assert_int_equal(gm_dataset_num_classes(d), 20);
	for (uint32_t i = 0; i < 400; i++) {
		char rel[64];

		snprintf(rel, sizeof(rel), "many/n%02u/img_%03u.JPEG", i / 20, i % 20);
		assert_string_equal(gm_dataset_path(d, i), full(rel));
		assert_int_equal(gm_dataset_label(d, i), i / 20);
	}
	gm_dataset_close(d);
}

/* Expect gm_dataset_open(root) to fail with want and a message containing needle. */
static void expect_fail(const char *root, int want, const char *needle)
{
	struct gm_dataset *d = (struct gm_dataset *)1;
	char err[512];
	int fds = count_fds();

	assert_int_equal(gm_dataset_open(&d, root, err, sizeof(err)), want);
	assert_null(d);
	if (!strstr(err, needle))
		fail_msg("message \"%s\" does not name \"%s\"", err, needle);
	assert_non_null(strstr(err, "gm_dataset_open"));
	assert_int_equal(count_fds(), fds);
	/* A NULL message buffer is allowed. */
	assert_int_equal(gm_dataset_open(&d, root, NULL, 0), want);
}

/* --- WebDataset tar shards ----------------------------------------------------- */

/* Append one ustar member to an open file (the test's own writer). */
static void tar_member(FILE *f, const char *name, const void *data, size_t len)
{
	unsigned char h[512] = {0};
	unsigned sum = 0;
	snprintf((char *)h, 100, "%s", name);
	snprintf((char *)h + 100, 8, "%07o", 0644);
	snprintf((char *)h + 124, 12, "%011o", (unsigned)len);
	memset(h + 148, ' ', 8);
	h[156] = '0';
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	for (int k = 0; k < 512; k++)
		sum += h[k];
	snprintf((char *)h + 148, 8, "%06o", sum);
	assert_int_equal(fwrite(h, 1, 512, f), 512);
	assert_int_equal(fwrite(data, 1, len, f), len);
	static const char zeros[512];
	size_t pad = (512 - len % 512) % 512;
	assert_int_equal(fwrite(zeros, 1, pad, f), pad);
}

/* A shard at base/rel from (name, content) pairs; NULL name ends the list. */
static void mktar(const char *rel, const char *const *members)
{
	FILE *f = fopen(full(rel), "wb");
	assert_non_null(f);
	for (size_t i = 0; members[i]; i += 2)
		tar_member(f, members[i], members[i + 1], strlen(members[i + 1]));
	static const char end[1024];
	assert_int_equal(fwrite(end, 1, sizeof(end), f), sizeof(end));
	fclose(f);
}

static void test_shards_index_like_imagefolder(void **state)
{
	(void)state;
	char err[512], want[600];
	struct gm_dataset *a, *b, *one;
	assert_int_equal(gm_synth_write(full("wds-f"), 40, 3, 1, 50, NULL, err, sizeof(err)), 0);
	assert_int_equal(
	    gm_synth_write_shards(full("wds-s"), 40, 3, 1, 50, 16, NULL, err, sizeof(err)), 0);
	assert_int_equal(gm_dataset_open(&a, full("wds-f"), err, sizeof(err)), 0);
	assert_int_equal(gm_dataset_open(&b, full("wds-s"), err, sizeof(err)), 0);
	assert_false(gm_dataset_sharded(a));
	assert_true(gm_dataset_sharded(b));
	assert_int_equal(gm_dataset_count(b), 40);
	assert_int_equal(gm_dataset_num_classes(b), 3);
	assert_string_equal(gm_dataset_class_name(b, 2), "2");
	for (uint32_t i = 0; i < 40; i++) {
		assert_int_equal(gm_dataset_label(a, i), gm_dataset_label(b, i));
		assert_int_equal(gm_dataset_file_size(a, i), gm_dataset_file_size(b, i));
		/* the member's bytes at its offset are the ImageFolder file's bytes */
		size_t n = gm_dataset_file_size(a, i);
		char *x = malloc(n), *y = malloc(n);
		int fa = open(gm_dataset_path(a, i), O_RDONLY),
		    fb = open(gm_dataset_path(b, i), O_RDONLY);
		assert_int_equal(pread(fa, x, n, 0), (ssize_t)n);
		assert_int_equal(pread(fb, y, n, (off_t)gm_dataset_offset(b, i)), (ssize_t)n);
		assert_memory_equal(x, y, n);
		close(fa);
		close(fb);
		free(x);
		free(y);
	}
	assert_string_equal(gm_dataset_path(b, 17), full("wds-s/shard-000001.tar"));
	snprintf(want, sizeof(want), "%s:class_00/img_000000.jpg", full("wds-s/shard-000000.tar"));
	assert_string_equal(gm_dataset_name(b, 0), want);
	assert_string_equal(gm_dataset_name(a, 0), gm_dataset_path(a, 0));
	assert_int_equal(gm_dataset_offset(b, 0), 512);
	assert_int_equal(gm_dataset_offset(a, 0), 0);
	/* one shard as the root */
	assert_int_equal(gm_dataset_open(&one, full("wds-s/shard-000002.tar"), err, sizeof(err)),
			 0);
	assert_int_equal(gm_dataset_count(one), 8);
	assert_int_equal(gm_dataset_label(one, 0), gm_dataset_label(b, 32));
	assert_int_equal(gm_dataset_offset(one, 3), gm_dataset_offset(b, 35));
	/* a fingerprint that survives moving the shards, differs from the folder's */
	assert_int_not_equal(gm_dataset_fingerprint(a), gm_dataset_fingerprint(b));
	assert_int_equal(rename(full("wds-s"), full("wds-moved")), 0);
	struct gm_dataset *c;
	assert_int_equal(gm_dataset_open(&c, full("wds-moved"), err, sizeof(err)), 0);
	assert_int_equal(gm_dataset_fingerprint(c), gm_dataset_fingerprint(b));
	gm_dataset_close(c);
	gm_dataset_close(one);
	gm_dataset_close(b);
	gm_dataset_close(a);
}

/* GNU long names and pax path records, as GNU tar and Python's tarfile write them. */
static void test_shards_long_names(void **state)
{
	(void)state;
	char cmd[2048], err[512], lng[200];
	memset(lng, 'n', 150);
	lng[150] = 0;
	static const char *const fmts[] = {"gnu", "pax", "ustar"};
	for (int k = 0; k < 3; k++) {
		char dir[64], rel[300];
		snprintf(dir, sizeof(dir), "long-%s", fmts[k]);
		snprintf(rel, sizeof(rel), "%s/src/d/%s.jpg", dir, lng);
		mkfile(rel, 1000);
		snprintf(rel, sizeof(rel), "%s/src/d/%s.cls", dir, lng);
		mkfile(rel, 0);
		FILE *f = fopen(full(rel), "w");
		fputs(" 4\n", f);
		fclose(f);
		snprintf(cmd, sizeof(cmd),
			 "cd %s/src && tar --format=%s -cf ../a.tar d 2>/dev/null", full(dir),
			 fmts[k]);
		int rc = system(cmd);
		if (k == 2) { /* ustar cannot store a 150-character file name */
			if (rc == 0)
				fail_msg("tar --format=ustar stored a 150-character name");
			continue;
		}
		if (rc != 0)
			skip(); /* no GNU tar here */
		struct gm_dataset *d;
		snprintf(rel, sizeof(rel), "%s/a.tar", dir);
		if (gm_dataset_open(&d, full(rel), err, sizeof(err)))
			fail_msg("%s: %s", fmts[k], err);
		assert_int_equal(gm_dataset_count(d), 1);
		assert_int_equal(gm_dataset_label(d, 0), 4);
		assert_int_equal(gm_dataset_num_classes(d), 5);
		assert_int_equal(gm_dataset_file_size(d, 0), 1000);
		char want[600];
		snprintf(want, sizeof(want), "%s:d/%s.jpg", full(rel), lng);
		assert_string_equal(gm_dataset_name(d, 0), want);
		int fd = open(full(rel), O_RDONLY);
		char x[1000];
		assert_int_equal(pread(fd, x, 1000, (off_t)gm_dataset_offset(d, 0)), 1000);
		for (int i = 0; i < 1000; i++)
			assert_int_equal(x[i], 'x');
		close(fd);
		gm_dataset_close(d);
	}
}

static void test_shard_errors(void **state)
{
	(void)state;
	char path[600], err[512];
	struct gm_dataset *d;
	mkdir_rel("bad-shards");
	/* not a tar */
	mkfile("bad-shards/random.tar", 3000);
	expect_fail(full("bad-shards/random.tar"), -EBADMSG,
		    "not a tar file (bad header checksum)");
	mkfile("bad-shards/tiny.tar", 10);
	expect_fail(full("bad-shards/tiny.tar"), -EBADMSG, "shorter than one header");
	/* samples without a label, a bad label, two images under one key */
	mktar("bad-shards/nocls.tar", (const char *[]){"a.jpg", "JPEG", "a.txt", "hi", NULL});
	expect_fail(full("bad-shards/nocls.tar"), -EBADMSG, "sample 'a' (a.jpg) has no .cls");
	mktar("bad-shards/badcls.tar",
	      (const char *[]){"k/a.jpg", "JPEG", "k/a.cls", "seven", NULL});
	expect_fail(full("bad-shards/badcls.tar"), -EBADMSG,
		    "'k/a.cls': label 'seven' is not a class number");
	mktar("bad-shards/neg.tar", (const char *[]){"a.jpg", "J", "a.cls", "-1", NULL});
	expect_fail(full("bad-shards/neg.tar"), -EBADMSG, "label '-1' is not a class number");
	mktar("bad-shards/two.tar",
	      (const char *[]){"a.jpg", "J", "a.jpeg", "K", "a.cls", "1", NULL});
	expect_fail(full("bad-shards/two.tar"), -EBADMSG, "has two images ('a.jpg' and 'a.jpeg')");
	mktar("bad-shards/noimg.tar", (const char *[]){"a.txt", "x", "a.cls", "1", NULL});
	expect_fail(full("bad-shards/noimg.tar"), -ENODATA, "no .jpg/.jpeg members");
	/* a good shard, then cut short, then with a corrupt second header */
	mktar("bad-shards/good.tar", (const char *[]){"a.jpg", "JPEGDATA", "a.cls", "2", "b.JPEG",
						      "MORE", "b.cls", "0\n", NULL});
	assert_int_equal(gm_dataset_open(&d, full("bad-shards/good.tar"), err, sizeof(err)), 0);
	assert_int_equal(gm_dataset_count(d), 2);
	assert_int_equal(gm_dataset_label(d, 0), 2);
	assert_int_equal(gm_dataset_label(d, 1), 0);
	assert_int_equal(gm_dataset_file_size(d, 1), 4);
	gm_dataset_close(d);
	snprintf(path, sizeof(path), "cp %s %s && truncate -s 700 %s", full("bad-shards/good.tar"),
		 full("bad-shards/cut.tar"), full("bad-shards/cut.tar"));
	assert_int_equal(system(path), 0);
	expect_fail(full("bad-shards/cut.tar"), -EBADMSG, "offset 1024: truncated tar header");
	snprintf(path, sizeof(path), "cp %s %s && truncate -s 514 %s", full("bad-shards/good.tar"),
		 full("bad-shards/cut2.tar"), full("bad-shards/cut2.tar"));
	assert_int_equal(system(path), 0);
	expect_fail(full("bad-shards/cut2.tar"), -EBADMSG,
		    "offset 0: member 'a.jpg' of 8 bytes runs past the end");
	snprintf(path, sizeof(path),
		 "cp %s %s && printf Z | dd of=%s bs=1 seek=1030 conv=notrunc"
		 " 2>/dev/null",
		 full("bad-shards/good.tar"), full("bad-shards/flip.tar"),
		 full("bad-shards/flip.tar"));
	assert_int_equal(system(path), 0);
	expect_fail(full("bad-shards/flip.tar"), -EBADMSG, "offset 1024: bad tar header checksum");
	/* a directory of shards: the first bad one is named */
	mkdir_rel("shard-dir");
	assert_int_equal(rename(full("bad-shards/good.tar"), full("shard-dir/a.tar")), 0);
	assert_int_equal(rename(full("bad-shards/badcls.tar"), full("shard-dir/b.tar")), 0);
	expect_fail(full("shard-dir"), -EBADMSG, full("shard-dir/b.tar"));
}

/* A .tar named as the dataset that is a FIFO is refused before it is opened
 * (opening it would wait for a writer for ever); a deadline turns a hang into a
 * failure. */
static void test_fifo_tar_refused(void **state)
{
	(void)state;
	mkdir_rel("fifo");
	assert_int_equal(mkfifo(full("fifo/x.tar"), 0600), 0);
	alarm(20);
	expect_fail(full("fifo/x.tar"), -EINVAL, full("fifo/x.tar"));
	expect_fail(full("fifo/x.tar"), -EINVAL, "not a regular file (a FIFO)");
	alarm(0);
}

static void test_error_paths(void **state)
{
	(void)state;
	expect_fail(full("does-not-exist"), -ENOENT, full("does-not-exist"));
	mkfile("plainfile", 3);
	expect_fail(full("plainfile"), -ENOTDIR, full("plainfile"));
	mkfile("noclass/a.jpg", 3); /* only files at the root */
	expect_fail(full("noclass"), -ENODATA, full("noclass"));
	mkfile("nojpeg/a/x.png", 3);
	mkfile("nojpeg/b/y.txt", 3);
	expect_fail(full("nojpeg"), -ENODATA, full("nojpeg"));
	mkfile("oneempty/a/x.jpg", 3);
	mkfile("oneempty/b/y.png", 3);
	mkfile("oneempty/c/z.jpg", 3);
	expect_fail(full("oneempty"), -ENODATA, full("oneempty/b"));
	/* Hidden directories are classes, as in torchvision: an empty one is an error. */
	mkfile("hidden/a/x.jpg", 3);
	mkdir_rel("hidden/.ipynb_checkpoints");
	expect_fail(full("hidden"), -ENODATA, full("hidden/.ipynb_checkpoints"));
	expect_fail("", -EINVAL, "empty");
}

/* Run expect_fail for an unreadable directory. Root reads everything, so as root
 * this runs in a child that has dropped to an unprivileged uid. */
static void expect_eacces(const char *root, const char *needle)
{
	pid_t pid;
	int st;

	if (geteuid() != 0) {
		expect_fail(root, -EACCES, needle);
		return;
	}
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct gm_dataset *d;
		char err[512];
		int ret;

		if (setgid(65534) || setuid(65534))
			_exit(77);
		ret = gm_dataset_open(&d, root, err, sizeof(err));
		_exit(ret == -EACCES && strstr(err, needle) ? 0 : 1);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	if (WEXITSTATUS(st) == 77)
		skip(); /* cannot drop privileges here */
	assert_int_equal(WEXITSTATUS(st), 0);
}

/* A bounded open reads at most max_entries directory entries (and shard
 * members): exactly enough passes with the unbounded index, one fewer stops. */
static void test_bounded_open_stops_past_max_entries(void **state)
{
	struct gm_dataset *d, *u;
	char err[512];
	int fds = count_fds();

	(void)state;
	mkfile("bound/a/1.jpg", 3);
	mkfile("bound/a/2.jpg", 3);
	mkfile("bound/a/notes.txt", 3);
	mkfile("bound/b/sub/3.jpg", 3);
	/* entries: a, b (root); 1.jpg 2.jpg notes.txt (a); sub (b); 3.jpg (b/sub) */
	struct gm_dataset_bounds b = {.max_entries = 7};
	assert_int_equal(gm_dataset_open(&u, full("bound"), err, sizeof(err)), 0);
	assert_int_equal(gm_dataset_open_bounded(&d, full("bound"), &b, err, sizeof(err)), 0);
	assert_int_equal(gm_dataset_count(d), 3);
	assert_true(gm_dataset_fingerprint(d) == gm_dataset_fingerprint(u));
	gm_dataset_close(d);
	b.max_entries = 6;
	assert_int_equal(gm_dataset_open_bounded(&d, full("bound"), &b, err, sizeof(err)), -EFBIG);
	assert_null(d);
	assert_non_null(strstr(err, "more than 6 directory entries"));
	assert_non_null(strstr(err, full("bound")));
	gm_dataset_close(u);

	/* shard members count too: 40 members in 3 shards (plus the root's entries) */
	assert_int_equal(
	    gm_synth_write_shards(full("bound-wds"), 40, 3, 1, 50, 16, NULL, err, sizeof(err)), 0);
	b.max_entries = 20;
	assert_int_equal(gm_dataset_open_bounded(&d, full("bound-wds"), &b, err, sizeof(err)),
			 -EFBIG);
	b.max_entries = 100;
	assert_int_equal(gm_dataset_open_bounded(&d, full("bound-wds"), &b, err, sizeof(err)), 0);
	assert_int_equal(gm_dataset_count(d), 40);
	gm_dataset_close(d);
	assert_int_equal(count_fds(), fds);
}

/* Confined: a symlink that leads out of the root (absolute, or ".." above it)
 * is refused naming it, a class directory, a file or a shard alike; one that
 * stays inside is followed as gm_dataset_open follows it. */
static void test_confined_open_refuses_symlinks_out_of_root(void **state)
{
	struct gm_dataset *d, *u;
	char err[512];
	struct gm_dataset_bounds b = {.confined = true};
	int fds = count_fds();

	(void)state;
	mkfile("outside/x/private.jpg", 5);
	mkfile("conf/a/1.jpg", 3);
	mkfile("conf/pool/2.jpg", 4);
	/* inside: a relative link to a sibling class directory and to a file */
	assert_int_equal(symlink("../pool", full("conf/a/sub")), 0);
	assert_int_equal(symlink("../pool/2.jpg", full("conf/a/3.jpg")), 0);
	assert_int_equal(gm_dataset_open(&u, full("conf"), err, sizeof(err)), 0);
	assert_int_equal(gm_dataset_open_bounded(&d, full("conf"), &b, err, sizeof(err)), 0);
	assert_int_equal(gm_dataset_count(d), 4);
	assert_true(gm_dataset_fingerprint(d) == gm_dataset_fingerprint(u));
	gm_dataset_close(d);
	gm_dataset_close(u);

	/* out: an absolute class directory link */
	assert_int_equal(symlink(full("outside/x"), full("conf/x")), 0);
	assert_int_equal(gm_dataset_open(&u, full("conf"), err, sizeof(err)), 0);
	gm_dataset_close(u); /* unconfined: followed */
	assert_int_equal(gm_dataset_open_bounded(&d, full("conf"), &b, err, sizeof(err)), -EXDEV);
	assert_null(d);
	assert_non_null(strstr(err, full("conf/x")));
	assert_non_null(strstr(err, "leads out of"));
	assert_int_equal(unlink(full("conf/x")), 0);

	/* out: a relative file link climbing above the root */
	assert_int_equal(symlink("../../outside/x/private.jpg", full("conf/a/4.jpg")), 0);
	assert_int_equal(gm_dataset_open_bounded(&d, full("conf"), &b, err, sizeof(err)), -EXDEV);
	assert_non_null(strstr(err, full("conf/a/4.jpg")));
	assert_int_equal(unlink(full("conf/a/4.jpg")), 0);

	/* out: a nested directory link */
	assert_int_equal(symlink(full("outside"), full("conf/pool/deep")), 0);
	assert_int_equal(gm_dataset_open_bounded(&d, full("conf"), &b, err, sizeof(err)), -EXDEV);
	assert_non_null(strstr(err, full("conf/a/sub/deep"))); /* met first through a/sub */
	assert_int_equal(unlink(full("conf/pool/deep")), 0);

	/* out: a shard of a shard directory */
	assert_int_equal(
	    gm_synth_write_shards(full("out-wds"), 20, 2, 1, 50, 16, NULL, err, sizeof(err)), 0);
	mkdir_rel("conf-wds");
	assert_int_equal(symlink(full("out-wds/shard-000000.tar"), full("conf-wds/s.tar")), 0);
	assert_int_equal(gm_dataset_open(&u, full("conf-wds"), err, sizeof(err)), 0);
	gm_dataset_close(u);
	assert_int_equal(gm_dataset_open_bounded(&d, full("conf-wds"), &b, err, sizeof(err)),
			 -EXDEV);
	assert_non_null(strstr(err, full("conf-wds/s.tar")));
	assert_int_equal(count_fds(), fds);
}

static void test_unreadable(void **state)
{
	(void)state;
	assert_int_equal(chmod(base, 0755), 0); /* let an unprivileged child in */
	mkfile("perm/a/x.jpg", 1);
	mkfile("perm/b/sub/y.jpg", 1);
	mkfile("perm/c/z.jpg", 1);
	assert_int_equal(chmod(full("perm/b/sub"), 0), 0);
	expect_eacces(full("perm"), full("perm/b/sub"));
	assert_int_equal(chmod(full("perm/b/sub"), 0755), 0);
	assert_int_equal(chmod(full("perm/c"), 0), 0);
	expect_eacces(full("perm"), full("perm/c"));
	assert_int_equal(chmod(full("perm/c"), 0755), 0);
	assert_int_equal(chmod(full("perm"), 0), 0);
	expect_eacces(full("perm"), full("perm"));
	assert_int_equal(chmod(full("perm"), 0755), 0);
	assert_int_equal(chmod(base, 0700), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_class_byte_order),
	    cmocka_unit_test(test_nested_walk_order),
	    cmocka_unit_test(test_extensions_and_special_entries),
	    cmocka_unit_test(test_symlinked_class_and_dir),
	    cmocka_unit_test(test_fingerprint),
	    cmocka_unit_test(test_many_files),
	    cmocka_unit_test(test_error_paths),
	    cmocka_unit_test(test_fifo_tar_refused),
	    cmocka_unit_test(test_unreadable),
	    cmocka_unit_test(test_bounded_open_stops_past_max_entries),
	    cmocka_unit_test(test_confined_open_refuses_symlinks_out_of_root),
	    cmocka_unit_test(test_shards_index_like_imagefolder),
	    cmocka_unit_test(test_shards_long_names),
	    cmocka_unit_test(test_shard_errors),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
