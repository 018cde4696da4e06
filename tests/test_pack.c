/*
 * test_pack.c - `goldminer pack` (core/pack.c, cmd/pack.c): ImageFolder -> WebDataset shards
 * that index to the same samples; awkward names; errors; byte-identical reruns.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd.h"
#include "goldminer/dataset.h"
#include "goldminer/pack.h"
#include "goldminer/synth.h"
#include "testutil.h"

static char base[64];

static char *at(const char *rel)
{
	static char buf[4][800];
	static int k;
	k = (k + 1) % 4;
	snprintf(buf[k], sizeof(buf[k]), "%s/%s", base, rel);
	return buf[k];
}

static void put(const char *rel, const char *text)
{
	FILE *f = fopen(at(rel), "wb");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	*len = (size_t)ftell(f);
	fseek(f, 0, SEEK_SET);
	char *b = malloc(*len + 1);
	assert_int_equal(fread(b, 1, *len, f), *len);
	fclose(f);
	return b;
}

static int setup(void **state)
{
	(void)state;
	char err[256];
	if (gm_test_tmpdir(base, sizeof(base), "gm-pack"))
		return -1;
	if (gm_synth_write(at("tree"), 30, 3, 2, 40, NULL, err, sizeof(err)))
		return -1;
	/* names a WebDataset key cannot take as they are */
	char lng[300];
	memset(lng, 'L', 180);
	strcpy(lng + 180, ".jpg");
	char p[600];
	snprintf(p, sizeof(p), "tree/class_01/%s", lng);
	put(p, "long");
	put("tree/class_01/a.b.jpg", "dotted");
	put("tree/class_01/a_b.jpg", "underscore");
	put("tree/class_02/UP.JPEG", "upper");
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	gm_test_rm_tree(base);
	return 0;
}

static void test_pack_indexes_the_same(void **state)
{
	(void)state;
	char err[512];
	uint64_t bytes = 0;
	uint32_t shards = 0;
	struct gm_dataset *a, *b;
	assert_int_equal(gm_pack(at("tree"), at("wds"), 7, &bytes, &shards, err, sizeof(err)), 0);
	assert_int_equal(gm_dataset_open(&a, at("tree"), err, sizeof(err)), 0);
	assert_int_equal(gm_dataset_open(&b, at("wds"), err, sizeof(err)), 0);
	uint32_t n = gm_dataset_count(a);
	assert_int_equal(n, 34);
	assert_int_equal(shards, (n + 6) / 7);
	assert_int_equal(gm_dataset_count(b), n);
	uint64_t sum = 0;
	for (uint32_t i = 0; i < n; i++) {
		assert_int_equal(gm_dataset_label(a, i), gm_dataset_label(b, i));
		size_t la, lb;
		char *x = slurp(gm_dataset_path(a, i), &la);
		char *y = slurp(gm_dataset_path(b, i), &lb);
		assert_int_equal(gm_dataset_file_size(b, i), la);
		assert_memory_equal(x, y + gm_dataset_offset(b, i), la);
		sum += la;
		free(x);
		free(y);
	}
	assert_int_equal(bytes, sum);
	/* the awkward names: dots turned into '_', a repeated key kept apart, long
	 * names through GNU long-name records, the extension kept as it was */
	int seen = 0;
	for (uint32_t i = 0; i < n; i++) {
		const char *nm = strchr(gm_dataset_name(b, i), ':') + 1;
		if (!strcmp(nm, "class_01/a_b.jpg") || !strncmp(nm, "class_01/a_b_", 13) ||
		    !strcmp(nm, "class_02/UP.JPEG"))
			seen++;
		if (strlen(nm) > 180 && !strncmp(nm, "class_01/LLLL", 13))
			seen += 10;
	}
	assert_int_equal(seen, 13);
	/* GNU tar reads what was written */
	char cmd[700];
	snprintf(cmd, sizeof(cmd), "tar -tf %s/shard-000000.tar >/dev/null 2>&1", at("wds"));
	assert_int_equal(system(cmd), 0);
	gm_dataset_close(b);
	gm_dataset_close(a);
}

static void test_pack_is_deterministic(void **state)
{
	(void)state;
	char err[512];
	assert_int_equal(gm_pack(at("tree"), at("wds2"), 7, NULL, NULL, err, sizeof(err)), 0);
	for (int k = 0; k < 5; k++) {
		char r1[64], r2[64];
		size_t l1, l2;
		snprintf(r1, sizeof(r1), "wds/shard-%06d.tar", k);
		snprintf(r2, sizeof(r2), "wds2/shard-%06d.tar", k);
		char *x = slurp(at(r1), &l1), *y = slurp(at(r2), &l2);
		assert_int_equal(l1, l2);
		assert_memory_equal(x, y, l1);
		free(x);
		free(y);
	}
}

static void test_pack_errors(void **state)
{
	(void)state;
	char err[512];
	assert_int_equal(gm_pack(at("missing"), at("o1"), 7, NULL, NULL, err, sizeof(err)),
			 -ENOENT);
	assert_non_null(strstr(err, at("missing")));
	assert_int_equal(gm_pack(at("wds"), at("o2"), 7, NULL, NULL, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "tar shards already"));
	assert_int_equal(gm_pack(at("tree"), at("wds"), 7, NULL, NULL, err, sizeof(err)), -EEXIST);
	assert_non_null(strstr(err, "shard-000000.tar"));
	assert_non_null(strstr(err, "pack into an empty directory"));
	assert_int_equal(gm_pack(at("tree"), at("o3"), 0, NULL, NULL, err, sizeof(err)), -EINVAL);
	put("notadir", "x");
	assert_true(gm_pack(at("tree"), at("notadir/x"), 5, NULL, NULL, err, sizeof(err)) < 0);
	assert_non_null(strstr(err, at("notadir/x")));
	/* the command line */
	char *usage[] = {"pack", at("tree")};
	assert_int_equal(gm_cmd_pack(2, usage), 2);
	char *badn[] = {"pack", at("tree"), at("o4"), "--per-shard", "0"};
	assert_int_equal(gm_cmd_pack(5, badn), 2);
	char *ok[] = {"pack", at("tree"), at("o5"), "--per-shard", "100"};
	assert_int_equal(gm_cmd_pack(5, ok), 0);
	char *again[] = {"pack", at("tree"), at("o5")};
	assert_int_equal(gm_cmd_pack(3, again), 1);
}

/* A tmpfs of the given options mounted at at(rel); 0, or -errno (-EPERM: not root). */
static int mount_tmpfs(const char *rel, const char *opts)
{
	if (mkdir(at(rel), 0755) != 0 && errno != EEXIST)
		return -errno;
	if (mount("tmpfs", at(rel), "tmpfs", MS_NOSUID | MS_NODEV, opts) != 0)
		return -errno;
	return 0;
}

static int unmount_small(void **state)
{
	(void)state;
	umount2(at("small"), MNT_DETACH);
	rmdir(at("small"));
	return 0;
}

/* Entries of the directory at path, "." and ".." aside. */
static int entries(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *de;
	int n = 0;
	assert_non_null(d);
	while ((de = readdir(d)))
		n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
	closedir(d);
	return n;
}

/* Pack the tree into small/wds on a file system too small for it: the error names
 * the cause (want in the message) and the file, and nothing is left behind. */
static void pack_runs_out(const char *want)
{
	char err[1024], msg[1100];
	struct gm_dataset *ds = NULL;

	assert_int_equal(gm_pack(at("tree"), at("small/wds"), 3, NULL, NULL, err, sizeof(err)),
			 -ENOSPC);
	snprintf(msg, sizeof(msg), "%s", err);
	assert_non_null(strstr(msg, "ENOSPC"));
	assert_non_null(strstr(msg, want));
	assert_non_null(strstr(msg, at("small/wds/.shard-"))); /* the file */
	assert_null(strstr(msg, "Input/output error"));
	/* nothing that indexes as a dataset, nor anything else, is left */
	assert_int_equal(entries(at("small")), 0);
	assert_true(gm_dataset_open(&ds, at("small/wds"), err, sizeof(err)) < 0);
	assert_null(ds);
	/* the command fails too */
	char *argv[] = {"pack", at("tree"), at("small/wds"), "--per-shard", "3"};
	assert_int_equal(gm_cmd_pack(5, argv), 1);
	assert_int_equal(entries(at("small")), 0);
}

static void test_pack_on_a_full_disk_leaves_nothing(void **state)
{
	(void)state;
	struct gm_dataset *ds = NULL;
	char err[512], opts[64];
	uint64_t bytes = 0;

	assert_int_equal(gm_dataset_open(&ds, at("tree"), err, sizeof(err)), 0);
	for (uint32_t i = 0; i < gm_dataset_count(ds); i++)
		bytes += gm_dataset_file_size(ds, i);
	gm_dataset_close(ds);
	/* room for about half of the images: the disk fills half-way */
	snprintf(opts, sizeof(opts), "size=%llu,nr_inodes=1000",
		 (unsigned long long)(bytes / 2 + 4095) / 4096 * 4096);
	int r = mount_tmpfs("small", opts);
	if (r == -EPERM)
		skip(); /* mounting a tmpfs needs root */
	assert_int_equal(r, 0);
	pack_runs_out("the file system is full");
}

static void test_pack_out_of_inodes_leaves_nothing(void **state)
{
	(void)state;
	/* the root, wds and two shards: the third shard finds no inode */
	int r = mount_tmpfs("small", "size=4m,nr_inodes=4");
	if (r == -EPERM)
		skip(); /* mounting a tmpfs needs root */
	assert_int_equal(r, 0);
	pack_runs_out("no free inodes");
}

static void test_pack_refuses_a_directory_with_tar_files(void **state)
{
	(void)state;
	char err[512];
	struct stat st;
	assert_int_equal(mkdir(at("other"), 0755), 0);
	put("other/mine.TAR", "x");
	assert_int_equal(gm_pack(at("tree"), at("other"), 7, NULL, NULL, err, sizeof(err)),
			 -EEXIST);
	assert_non_null(strstr(err, "other/mine.TAR"));
	assert_non_null(strstr(err, "pack into an empty directory"));
	assert_int_equal(stat(at("other/shard-000000.tar"), &st), -1);
	assert_int_equal(stat(at("other/.shard-000000.tar.tmp"), &st), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_pack_indexes_the_same),
	    cmocka_unit_test(test_pack_is_deterministic),
	    cmocka_unit_test(test_pack_errors),
	    cmocka_unit_test_teardown(test_pack_on_a_full_disk_leaves_nothing, unmount_small),
	    cmocka_unit_test_teardown(test_pack_out_of_inodes_leaves_nothing, unmount_small),
	    cmocka_unit_test(test_pack_refuses_a_directory_with_tar_files),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
