/*
 * test_tar.c - the tar format (core/tar.c): what the shard writer writes, the
 * indexer reads back (offsets, sizes, labels, long names, key grouping), and
 * malformed shards are refused with a message naming the shard and the fault.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "goldminer/tar.h"
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

static int setup(void **state)
{
	(void)state;
	return gm_test_tmpdir(base, sizeof(base), "gm-test-tar");
}

static int teardown(void **state)
{
	(void)state;
	gm_test_rm_tree(base);
	return 0;
}

#define MAX_SEEN 16

/* What gm_tar_index handed out, copied. */
struct seen {
	int n;
	char key[MAX_SEEN][300], member[MAX_SEEN][300];
	uint64_t offset[MAX_SEEN], size[MAX_SEEN];
	uint32_t label[MAX_SEEN];
};

static int record(void *ctx, const struct gm_tar_sample *s)
{
	struct seen *v = ctx;
	if (v->n == MAX_SEEN)
		return -ERANGE;
	snprintf(v->key[v->n], sizeof(v->key[0]), "%s", s->key);
	snprintf(v->member[v->n], sizeof(v->member[0]), "%s", s->member);
	v->offset[v->n] = s->offset;
	v->size[v->n] = s->size;
	v->label[v->n] = s->label;
	v->n++;
	return 0;
}

/* The bytes of the shard at path from offset off, len of them, equal data? */
static void assert_bytes_at(const char *path, uint64_t off, const void *data, size_t len)
{
	FILE *f = fopen(path, "rb");
	char buf[256];
	assert_non_null(f);
	assert_true(len <= sizeof(buf));
	assert_int_equal(fseek(f, (long)off, SEEK_SET), 0);
	assert_int_equal(fread(buf, 1, len, f), len);
	fclose(f);
	assert_memory_equal(buf, data, len);
}

static void test_written_samples_index_back_at_their_offsets(void **state)
{
	(void)state;
	struct gm_tar_writer *w = NULL;
	char longkey[200], err[1024];
	struct seen v = {0};

	memset(longkey, 'k', sizeof(longkey) - 1); /* > 100 chars: a GNU long name */
	longkey[sizeof(longkey) - 1] = 0;
	assert_int_equal(gm_tar_writer_open(&w, base, 2, true), 0);
	assert_int_equal(gm_tar_writer_add(w, "a/one", "jpg", "JPEG-1", 6, 3), 0);
	assert_int_equal(gm_tar_writer_add(w, longkey, "jpeg", "J2", 2, 0), 0);
	assert_int_equal(gm_tar_writer_add(w, "b/three", "jpg", "third!", 6, 7), 0);
	assert_int_equal(gm_tar_writer_shards(w), 2);
	assert_non_null(strstr(gm_tar_writer_path(w), ".shard-000001.tar.tmp"));
	/* nothing has its name before the commit */
	FILE *f = fopen(at("shard-000000.tar"), "rb");
	assert_null(f);
	assert_int_equal(gm_tar_writer_commit(w), 0);
	assert_int_equal(gm_tar_writer_close(w), 0);
	/* exclusive: the shards exist now */
	assert_int_equal(gm_tar_writer_open(&w, base, 2, true), 0);
	assert_int_equal(gm_tar_writer_add(w, "x", "jpg", "x", 1, 0), -EEXIST);
	assert_int_equal(gm_tar_writer_close(w), 0);

	assert_int_equal(gm_tar_index(at("shard-000000.tar"), "t", record, &v, err, sizeof(err)),
			 0);
	assert_int_equal(v.n, 2);
	assert_string_equal(v.key[0], "a/one");
	assert_string_equal(v.member[0], "a/one.jpg");
	assert_int_equal(v.size[0], 6);
	assert_int_equal(v.label[0], 3);
	assert_int_equal(v.offset[0] % 512, 0);
	assert_bytes_at(at("shard-000000.tar"), v.offset[0], "JPEG-1", 6);
	assert_string_equal(v.key[1], longkey);
	assert_int_equal(v.size[1], 2);
	assert_int_equal(v.label[1], 0);
	assert_bytes_at(at("shard-000000.tar"), v.offset[1], "J2", 2);

	v.n = 0;
	assert_int_equal(gm_tar_index(at("shard-000001.tar"), "t", record, &v, err, sizeof(err)),
			 0);
	assert_int_equal(v.n, 1);
	assert_string_equal(v.member[0], "b/three.jpg");
	assert_int_equal(v.label[0], 7);
	assert_bytes_at(at("shard-000001.tar"), v.offset[0], "third!", 6);
}

static int stop(void *ctx, const struct gm_tar_sample *s)
{
	(void)ctx;
	(void)s;
	return -ECANCELED;
}

static void test_callback_value_ends_the_index(void **state)
{
	(void)state;
	struct gm_tar_writer *w = NULL;
	char err[64] = "";
	assert_int_equal(gm_tar_writer_open(&w, base, 10, false), 0);
	assert_int_equal(gm_tar_writer_add(w, "s", "jpg", "s", 1, 1), 0);
	assert_int_equal(gm_tar_writer_commit(w), 0);
	assert_int_equal(gm_tar_writer_close(w), 0);
	assert_int_equal(gm_tar_index(at("shard-000000.tar"), "t", stop, NULL, err, sizeof(err)),
			 -ECANCELED);
	assert_string_equal(err, ""); /* the callback's own value, no message */
}

static void test_malformed_shards_name_the_fault(void **state)
{
	(void)state;
	char err[1024];
	struct seen v = {0};
	FILE *f;

	/* not a tar: shorter than one header */
	f = fopen(at("short.tar"), "wb");
	assert_non_null(f);
	fputs("hello", f);
	fclose(f);
	assert_int_equal(gm_tar_index(at("short.tar"), "who", record, &v, err, sizeof(err)),
			 -EBADMSG);
	assert_non_null(strstr(err, "who: "));
	assert_non_null(strstr(err, at("short.tar")));
	assert_non_null(strstr(err, "not a tar file"));

	/* an image without its .cls member */
	f = fopen(at("nocls.tar"), "wb");
	assert_non_null(f);
	assert_int_equal(gm_tar_write_member(f, "k/img.jpg", "abc", 3), 0);
	assert_int_equal(gm_tar_write_end(f), 0);
	fclose(f);
	assert_int_equal(gm_tar_index(at("nocls.tar"), "who", record, &v, err, sizeof(err)),
			 -EBADMSG);
	assert_non_null(strstr(err, "has no .cls member"));

	/* a label out of range */
	f = fopen(at("badcls.tar"), "wb");
	assert_non_null(f);
	assert_int_equal(gm_tar_write_member(f, "k.jpg", "abc", 3), 0);
	assert_int_equal(gm_tar_write_member(f, "k.cls", "-1\n", 3), 0);
	assert_int_equal(gm_tar_write_end(f), 0);
	fclose(f);
	assert_int_equal(gm_tar_index(at("badcls.tar"), "who", record, &v, err, sizeof(err)),
			 -EBADMSG);
	assert_non_null(strstr(err, "is not a class number"));

	/* a corrupt header checksum after the first member */
	f = fopen(at("corrupt.tar"), "wb");
	assert_non_null(f);
	assert_int_equal(gm_tar_write_member(f, "k.jpg", "abc", 3), 0);
	assert_int_equal(gm_tar_write_member(f, "k.cls", "1\n", 2), 0);
	assert_int_equal(gm_tar_write_end(f), 0);
	fclose(f);
	f = fopen(at("corrupt.tar"), "r+b");
	assert_non_null(f);
	assert_int_equal(fseek(f, 1024, SEEK_SET), 0); /* the .cls header's name */
	fputc('X', f);
	fclose(f);
	assert_int_equal(gm_tar_index(at("corrupt.tar"), "who", record, &v, err, sizeof(err)),
			 -EBADMSG);
	assert_non_null(strstr(err, "offset 1024: bad tar header checksum"));

	/* names too long for the writer */
	char name[GM_TAR_MAX_NAME + 2];
	memset(name, 'n', sizeof(name) - 1);
	name[sizeof(name) - 1] = 0;
	f = fopen(at("long.tar"), "wb");
	assert_non_null(f);
	assert_int_equal(gm_tar_write_member(f, name, "", 0), -ENAMETOOLONG);
	fclose(f);
}

/* Write k.jpg + k.cls for each key in keys to f (no end marker). */
static void put_samples(FILE *f, const char *const *keys, int n)
{
	char name[64];
	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "%s.jpg", keys[i]);
		assert_int_equal(gm_tar_write_member(f, name, "img", 3), 0);
		snprintf(name, sizeof(name), "%s.cls", keys[i]);
		assert_int_equal(gm_tar_write_member(f, name, "2\n", 2), 0);
	}
}

static void put_zero_blocks(FILE *f, int n)
{
	static const unsigned char zero[512];
	for (int i = 0; i < n; i++)
		assert_int_equal(fwrite(zero, 1, sizeof(zero), f), sizeof(zero));
}

static void test_zero_block_mid_archive_is_refused_with_its_offset(void **state)
{
	(void)state;
	static const char *const before[] = {"a", "b"}, *const after[] = {"c", "d"};
	char err[1024];
	struct seen v = {0};
	FILE *f;

	/* a, b, one zero block at 4 * 1024 = 4096, then c, d: c and d would be lost */
	f = fopen(at("hole.tar"), "wb");
	assert_non_null(f);
	put_samples(f, before, 2);
	put_zero_blocks(f, 1);
	put_samples(f, after, 2);
	assert_int_equal(gm_tar_write_end(f), 0);
	fclose(f);
	assert_int_equal(gm_tar_index(at("hole.tar"), "who", record, &v, err, sizeof(err)),
			 -EBADMSG);
	assert_non_null(strstr(err, at("hole.tar")));
	assert_non_null(strstr(err, "offset 4608: data after the zero block at offset 4096"));

	/* two zero blocks, then another tar (cat a.tar b.tar): refused too */
	f = fopen(at("joined.tar"), "wb");
	assert_non_null(f);
	put_samples(f, before, 2);
	assert_int_equal(gm_tar_write_end(f), 0);
	put_samples(f, after, 2);
	assert_int_equal(gm_tar_write_end(f), 0);
	fclose(f);
	assert_int_equal(gm_tar_index(at("joined.tar"), "who", record, &v, err, sizeof(err)),
			 -EBADMSG);
	assert_non_null(strstr(err, "offset 5120: data after the zero block at offset 4096"));

	/* the end marker written as it should be, with a record's zero padding, or
	 * cut after its first block: the same two samples */
	const int zeros[] = {2, 18, 1};
	for (int k = 0; k < 3; k++) {
		f = fopen(at("ok.tar"), "wb");
		assert_non_null(f);
		put_samples(f, before, 2);
		put_zero_blocks(f, zeros[k]);
		fclose(f);
		memset(&v, 0, sizeof(v));
		assert_int_equal(gm_tar_index(at("ok.tar"), "who", record, &v, err, sizeof(err)),
				 0);
		assert_int_equal(v.n, 2);
		assert_string_equal(v.member[0], "a.jpg");
		assert_string_equal(v.member[1], "b.jpg");
		assert_int_equal(v.offset[1], 2048 + 512);
	}
}

static void test_shard_from_gnu_tar_indexes(void **state)
{
	(void)state;
	char err[1024], cmd[2048];
	struct seen v = {0};
	FILE *f;

	/* GNU tar pads to a 10 KiB record after its two zero blocks */
	const char *files[] = {"g/x1.jpg", "g/x1.cls", "g/x2.jpg", "g/x2.cls"};
	assert_int_equal(mkdir(at("g"), 0755), 0);
	for (int i = 0; i < 4; i++) {
		f = fopen(at(files[i]), "wb");
		assert_non_null(f);
		fputs(strstr(files[i], "cls") ? "5\n" : "JPEGDATA", f);
		fclose(f);
	}
	snprintf(cmd, sizeof(cmd),
		 "cd %s && tar --format=gnu -cf gnu.tar g/x1.jpg g/x1.cls g/x2.jpg g/x2.cls "
		 "2>/dev/null",
		 base);
	if (system(cmd) != 0)
		skip(); /* no GNU tar on this machine */
	assert_int_equal(gm_tar_index(at("gnu.tar"), "who", record, &v, err, sizeof(err)), 0);
	assert_int_equal(v.n, 2);
	assert_string_equal(v.key[0], "g/x1");
	assert_string_equal(v.key[1], "g/x2");
	assert_int_equal(v.label[1], 5);
	assert_bytes_at(at("gnu.tar"), v.offset[1], "JPEGDATA", 8);
}

static bool exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0;
}

static void test_writer_is_all_or_nothing(void **state)
{
	(void)state;
	struct gm_tar_writer *w = NULL;

	/* closed without commit: the temporaries are removed, nothing is named */
	assert_int_equal(mkdir(at("aon"), 0755), 0);
	assert_int_equal(gm_tar_writer_open(&w, at("aon"), 1, true), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(gm_tar_writer_add(w, "k", "jpg", "x", 1, 0), 0);
	assert_int_equal(gm_tar_writer_end(w), 0);
	assert_int_equal(gm_tar_writer_add(w, "k", "jpg", "x", 1, 0), -EINVAL);
	assert_string_equal(gm_tar_writer_shard(w, 2), at("aon/.shard-000002.tar.tmp"));
	assert_true(exists(at("aon/.shard-000002.tar.tmp")));
	assert_null(gm_tar_writer_shard(w, 3));
	assert_int_equal(gm_tar_writer_close(w), 0);
	assert_false(exists(at("aon/.shard-000000.tar.tmp")));
	assert_false(exists(at("aon/.shard-000002.tar.tmp")));
	assert_false(exists(at("aon/shard-000000.tar")));

	/* a final name taken between add and commit: the commit takes back the
	 * shards it renamed already, and leaves the stranger's file alone */
	assert_int_equal(gm_tar_writer_open(&w, at("aon"), 1, true), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(gm_tar_writer_add(w, "k", "jpg", "x", 1, 0), 0);
	FILE *f = fopen(at("aon/shard-000001.tar"), "wb");
	assert_non_null(f);
	fclose(f);
	assert_int_equal(gm_tar_writer_commit(w), -EEXIST);
	assert_string_equal(gm_tar_writer_path(w), at("aon/shard-000001.tar"));
	assert_int_equal(gm_tar_writer_close(w), 0);
	assert_false(exists(at("aon/shard-000000.tar")));
	assert_true(exists(at("aon/shard-000001.tar")));
	assert_false(exists(at("aon/shard-000002.tar")));
	assert_false(exists(at("aon/.shard-000002.tar.tmp")));
}

/* A directory nested under base to a path of about 4000 characters, into buf. */
static void deep_dir(char *buf, size_t len)
{
	char part[241];
	memset(part, 'd', sizeof(part) - 1);
	part[sizeof(part) - 1] = 0;
	snprintf(buf, len, "%s", base);
	while (strlen(buf) + sizeof(part) + 20 < 4000) {
		size_t k = strlen(buf);
		snprintf(buf + k, len - k, "/%s", part);
		assert_true(mkdir(buf, 0755) == 0 || errno == EEXIST);
	}
}

static void test_long_path_keeps_the_cause_in_the_message(void **state)
{
	(void)state;
	char dir[4096], path[4200], err[512];
	struct seen v = {0};

	deep_dir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/corrupt.tar", dir);
	assert_in_range(strlen(path), 3800, 4000);
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(gm_tar_write_member(f, "k.jpg", "abc", 3), 0);
	assert_int_equal(gm_tar_write_member(f, "k.cls", "1\n", 2), 0);
	assert_int_equal(gm_tar_write_end(f), 0);
	assert_int_equal(fseek(f, 1024, SEEK_SET), 0);
	fputc('X', f);
	fclose(f);
	assert_int_equal(gm_tar_index(path, "who", record, &v, err, sizeof(err)), -EBADMSG);
	/* the function, the start of the path, the file name and the cause */
	assert_int_equal(strncmp(err, "who: /tmp/gm-test-tar-", 22), 0);
	assert_non_null(strstr(err, "..."));
	assert_non_null(strstr(err, "dd/corrupt.tar: offset 1024: bad tar header checksum"));
	assert_in_range(strlen(err), sizeof(err) - 8, sizeof(err) - 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_written_samples_index_back_at_their_offsets),
	    cmocka_unit_test(test_callback_value_ends_the_index),
	    cmocka_unit_test(test_malformed_shards_name_the_fault),
	    cmocka_unit_test(test_zero_block_mid_archive_is_refused_with_its_offset),
	    cmocka_unit_test(test_shard_from_gnu_tar_indexes),
	    cmocka_unit_test(test_writer_is_all_or_nothing),
	    cmocka_unit_test(test_long_path_keeps_the_cause_in_the_message),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
