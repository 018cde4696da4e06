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
#include <stdbool.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd.h"
#include "goldminer/aug.h"
#include "goldminer/dataset.h"
#include "goldminer/jpeg.h"
#include "goldminer/loader.h"
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

/* Write a synthetic JPEG at rtree/rel. 0 or -1. */
static int put_jpeg(const char *rel, uint32_t w, uint32_t h, uint64_t seed, unsigned flags)
{
	uint8_t *buf;
	size_t len;
	if (gm_synth_jpeg_mem(w, h, seed, flags, 90, &buf, &len))
		return -1;
	FILE *f = fopen(at(rel), "wb");
	int ret = f && fwrite(buf, 1, len, f) == len ? 0 : -1;
	if (f)
		fclose(f);
	free(buf);
	return ret;
}

/*
 * rtree: JPEGs of every kind the transcode meets (4:2:0, 4:2:2, 4:4:4, grey,
 * progressive, CMYK; odd sizes, a partial last MCU, nested directories), a file
 * that is no JPEG and a corrupt one.
 */
static int make_rtree(void)
{
	static const struct {
		const char *rel;
		uint32_t w, h;
		unsigned flags;
	} f[] = {
	    {"rtree/a/420.jpg", 333, 251, 0},
	    {"rtree/a/422.jpg", 97, 61, GM_SYNTH_422},
	    {"rtree/a/444.jpg", 64, 48, GM_SYNTH_444},
	    {"rtree/b/gray.jpg", 130, 77, GM_SYNTH_GRAY},
	    {"rtree/b/prog.jpg", 301, 199, GM_SYNTH_PROGRESSIVE},
	    {"rtree/b/sub/cmyk.jpg", 75, 90, GM_SYNTH_CMYK},
	    {"rtree/d/tiny.jpg", 9, 7, 0},
	};
	if (mkdir(at("rtree"), 0755) || mkdir(at("rtree/a"), 0755) || mkdir(at("rtree/b"), 0755) ||
	    mkdir(at("rtree/b/sub"), 0755) || mkdir(at("rtree/d"), 0755))
		return -1;
	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
		if (put_jpeg(f[i].rel, f[i].w, f[i].h, 100 + i, f[i].flags))
			return -1;
	put("rtree/d/not_a_jpeg.jpg", "text, not a JPEG");
	return gm_synth_write_bad(at("rtree/d/corrupt.jpg"), GM_SYNTH_BAD_CORRUPT, 7);
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
	return make_rtree();
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

/* The restart interval of the JPEG in b[0..n) (its DRI), or -1. */
static int dri_of(const char *c, size_t n)
{
	const uint8_t *b = (const uint8_t *)c;
	for (size_t i = 2; i + 5 < n; i++)
		if (b[i] == 0xff && b[i + 1] == 0xdd)
			return b[i + 4] << 8 | b[i + 5];
	return -1;
}

/* Whether the JPEG in b[0..n) has a DRI marker and an RSTn marker, and its SOF. */
static void markers(const uint8_t *b, size_t n, bool *dri, bool *rst, int *sof)
{
	*dri = *rst = false;
	*sof = -1;
	for (size_t i = 2; i + 1 < n; i++) {
		if (b[i] != 0xFF)
			continue;
		if (b[i + 1] == 0xDD)
			*dri = true;
		if (b[i + 1] >= 0xD0 && b[i + 1] <= 0xD7)
			*rst = true;
		if (*sof < 0 && b[i + 1] >= 0xC0 && b[i + 1] <= 0xC2)
			*sof = b[i + 1] - 0xC0;
	}
}

/* A 40-pixel handle of mode and output type out (0..2), its sample size in *n. */
static struct gm_aug *small_aug(int mode, int out, size_t *n)
{
	struct gm_aug_spec sp;
	struct gm_aug *g;
	gm_aug_spec_default(&sp);
	sp.mode = (enum gm_aug_mode)mode;
	sp.out = (enum gm_out_type)out;
	sp.size = 40;
	sp.resize = 48;
	assert_int_equal(gm_aug_create(&g, &sp), 0);
	*n = gm_aug_out_bytes(&sp);
	return g;
}

/*
 * Item 4 of the restart work, on the small tree: the batch bytes of each
 * restart-marked file equal the original's, for 20 random crops each, train and
 * eval, uint8/float16/float32 (all that depends on the file is the decode).
 */
static void same_samples(const char *a, size_t la, const char *b, size_t lb)
{
	for (int mode = 0; mode < 2; mode++)
		for (int out = 0; out < 3; out++) {
			size_t n;
			struct gm_aug *g = small_aug(mode, out, &n);
			uint8_t *x = malloc(n), *y = malloc(n);
			for (uint64_t id = 0; id < 20; id++) {
				int ra = gm_aug_sample(g, a, la, 9, 0, id, x, NULL);
				int rb = gm_aug_sample(g, b, lb, 9, 0, id, y, NULL);
				assert_int_equal(ra, rb);
				if (!ra)
					assert_memory_equal(x, y, n);
			}
			free(x);
			free(y);
			gm_aug_destroy(g);
		}
}

/*
 * Ranged reads of a shard member m[0..lm) (restart-marked with a row index) give
 * the bytes gm_aug_sample gives from the tree's file t[0..lt): 20 crops each,
 * train and eval, uint8/float16/float32, from the prefix a ranged open needs (the
 * index and the member's own header, which it is checked against) and the bytes
 * gm_aug_range names. Adds the bytes read (prefix + range) to *bytes and the
 * whole member to *whole, per crop.
 */
static void same_ranged(const char *t, size_t lt, const char *m, size_t lm, uint64_t *bytes,
			uint64_t *whole)
{
	size_t plen = gm_jpeg_index_bytes(m, lm);
	assert_true(plen > 0 && plen < lm);
	for (int mode = 0; mode < 2; mode++)
		for (int out = 0; out < 3; out++) {
			size_t n;
			struct gm_aug *g = small_aug(mode, out, &n);
			uint8_t *x = malloc(n), *y = malloc(n);
			for (uint64_t id = 0; id < 20; id++) {
				uint64_t off, len;
				assert_int_equal(gm_aug_sample(g, t, lt, 9, 0, id, x, NULL), 0);
				assert_int_equal(gm_aug_range(g, m, plen, lm, 9, 0, id, &off, &len),
						 0);
				assert_true(off + len <= lm);
				memset(y, 0xAB, n);
				assert_int_equal(gm_aug_sample_range(g, m, plen, lm, m + off, off,
								     len, 9, 0, id, y, NULL),
						 0);
				assert_memory_equal(x, y, n);
				*bytes += plen + len;
				*whole += lm;
				/* bytes that miss the rows named are refused, not decoded */
				if (off > plen + 8) {
					int rc = gm_aug_sample_range(g, m, plen, lm, m + off + 2,
								     off + 2, len - 2, 9, 0, id, y,
								     NULL);
					assert_int_equal(rc, -EBADMSG);
				}
			}
			free(x);
			free(y);
			gm_aug_destroy(g);
		}
}

/* The JPEG m[0..lm) less its row index (an APP15 "GMRIDX1" after SOI/APP0). */
static size_t strip_index(const char *m, size_t lm, char *o)
{
	if (!gm_jpeg_index_bytes(m, lm)) {
		memcpy(o, m, lm);
		return lm;
	}
	const uint8_t *u = (const uint8_t *)m;
	/* the segment starts at 2, or after the JFIF APP0 */
	size_t p = (u[2] == 0xFF && u[3] == 0xE0) ? 4 + ((size_t)u[4] << 8 | u[5]) : 2;
	size_t end = p + 2 + ((size_t)u[p + 2] << 8 | u[p + 3]);
	memcpy(o, m, p);
	memcpy(o + p, m + end, lm - end);
	return lm - (end - p);
}

/* Every batch of the loader over root (1 worker, 2 epochs; eval: small_aug's)
 * hashed into one value; *bytes: what the workers read; *stale (may be NULL): the
 * samples whose row index did not match their member. */
static uint64_t loader_hash_ex(const char *root, bool eval, uint64_t *bytes, uint64_t *stale)
{
	struct gm_loader_opts o;
	struct gm_loader *l;
	struct gm_batch b;
	char err[512];
	uint64_t h = 0;
	int rc;
	gm_loader_opts_default(&o);
	o.root = root;
	o.workers = 1;
	o.batch_size = 4;
	o.aug.size = 40;
	if (eval) { /* small_aug's crop */
		o.aug.mode = GM_AUG_EVAL;
		o.aug.resize = 48;
	}
	o.seed = 5;
	o.epochs = 2;
	o.no_pin = true;
	assert_int_equal(gm_loader_open(&l, &o, err, sizeof(err)), 0);
	while ((rc = gm_loader_next(l, &b)) != GM_LOADER_END) {
		assert_true(rc >= 0);
		if (rc == 0)
			h = h * 31 + gm_test_batch_hash(&b);
	}
	*bytes = gm_loader_read_bytes(l);
	if (stale)
		*stale = gm_loader_stale_index(l);
	gm_loader_close(l);
	return h;
}

static uint64_t loader_hash(const char *root, uint64_t *bytes)
{
	return loader_hash_ex(root, false, bytes, NULL);
}

static void test_pack_restart_tree(void **state)
{
	(void)state;
	char err[512];
	struct gm_pack_opts o = {.restart = 4, .tree = true};
	struct gm_pack_stats st;
	struct gm_dataset *a, *b;
	int pr = gm_pack_ex(at("rtree"), at("rtree-out"), &o, &st, err, sizeof(err));
	if (pr)
		print_message("%s\n", err);
	assert_int_equal(pr, 0);
	assert_int_equal(st.files, 9);
	assert_int_equal(st.kept, 2); /* not_a_jpeg and corrupt: as they were */
	assert_int_equal(st.shards, 0);
	assert_int_equal(gm_dataset_open(&a, at("rtree"), err, sizeof(err)), 0);
	assert_int_equal(gm_dataset_open(&b, at("rtree-out"), err, sizeof(err)), 0);
	assert_int_equal(gm_dataset_count(b), 9);
	assert_int_equal(gm_dataset_num_classes(b), gm_dataset_num_classes(a));
	uint64_t in = 0, outb = 0;
	for (uint32_t i = 0; i < 9; i++) {
		size_t la, lb;
		char *x = slurp(gm_dataset_path(a, i), &la), *y = slurp(gm_dataset_path(b, i), &lb);
		bool dri, rst, orig_dri, orig_rst;
		int sof, orig_sof;
		const char *nm = gm_dataset_path(a, i);
		assert_int_equal(gm_dataset_label(a, i), gm_dataset_label(b, i));
		in += la;
		outb += lb;
		markers((uint8_t *)x, la, &orig_dri, &orig_rst, &orig_sof);
		markers((uint8_t *)y, lb, &dri, &rst, &sof);
		if (strstr(nm, "not_a_jpeg") || strstr(nm, "corrupt")) {
			assert_int_equal(la, lb); /* kept byte for byte */
			assert_memory_equal(x, y, la);
		} else {
			assert_false(orig_dri);
			assert_true(dri);
			assert_true(rst || strstr(nm, "tiny")); /* tiny: 1 MCU, no RST */
			assert_true(sof == 0 || sof == 1);	/* progressive became baseline */
			if (strstr(nm, "prog"))
				assert_int_equal(orig_sof, 2);
			if (strstr(nm, "420.jpg")) /* 21 MCUs a row: every 3, not 4 */
				assert_int_equal(dri_of(y, lb), 3);
			same_samples(x, la, y, lb);
		}
		free(x);
		free(y);
	}
	assert_int_equal(st.bytes_in, in);
	assert_int_equal(st.bytes_out, outb);
	gm_dataset_close(a);
	gm_dataset_close(b);
	/* the same bytes as shards (deterministic), checked against the sizes written */
	struct gm_pack_opts os = {.per_shard = 4, .restart = 4};
	assert_int_equal(gm_pack_ex(at("rtree"), at("rtree-wds"), &os, &st, err, sizeof(err)), 0);
	assert_int_equal(st.shards, 3);
	assert_true(st.bytes_out > outb); /* the row indexes */
	assert_int_equal(gm_dataset_open(&b, at("rtree-wds"), err, sizeof(err)), 0);
	assert_int_equal(gm_dataset_open(&a, at("rtree-out"), err, sizeof(err)), 0);
	uint64_t rbytes = 0, wbytes = 0;
	for (uint32_t i = 0; i < 9; i++) {
		size_t la, lb;
		char *x = slurp(gm_dataset_path(a, i), &la), *y = slurp(gm_dataset_path(b, i), &lb);
		const char *m = y + gm_dataset_offset(b, i), *nm = gm_dataset_path(a, i);
		size_t lm = gm_dataset_file_size(b, i);
		char *z = malloc(lm);
		/* the tree's file plus the row index (none in the files kept as they were) */
		assert_int_equal(strip_index(m, lm, z), la);
		assert_memory_equal(x, z, la);
		if (strstr(nm, "not_a_jpeg") || strstr(nm, "corrupt")) {
			assert_int_equal(lm, la);
		} else {
			assert_true(lm > la);
			same_ranged(x, la, m, lm, &rbytes, &wbytes);
		}
		free(z);
		free(x);
		free(y);
	}
	assert_true(rbytes < wbytes);
	print_message("ranged reads: %llu of %llu bytes\n", (unsigned long long)rbytes,
		      (unsigned long long)wbytes);
	gm_dataset_close(a);
	gm_dataset_close(b);
	/* through the loader's workers: the same batches read ranged and whole, fewer
	 * bytes read ranged, and the same as the tree's batches */
	uint64_t br, bw, bt;
	uint64_t hr = loader_hash(at("rtree-wds"), &br);
	setenv("GM_NO_RANGE", "1", 1);
	uint64_t hw = loader_hash(at("rtree-wds"), &bw);
	unsetenv("GM_NO_RANGE");
	uint64_t ht = loader_hash(at("rtree-out"), &bt);
	assert_true(hr == hw && hr == ht);
	assert_true(br < bw);
	print_message("loader: ranged %llu bytes, whole members %llu, tree %llu\n",
		      (unsigned long long)br, (unsigned long long)bw, (unsigned long long)bt);
}

/* ---- row indexes that lie ---------------------------------------------------- */

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* Where the index of member m lies (jpeg.c's layout): the header copy
 * [hdr, hdr + hlen), the row table (nrows + 1 offsets) at rows, the index's end. */
struct ix_at {
	size_t hdr, hlen, rows, end;
	uint32_t nrows;
};

static void ix_locate(const uint8_t *m, struct ix_at *x)
{
	size_t p = (m[2] == 0xFF && m[3] == 0xE0) ? 4 + ((size_t)m[4] << 8 | m[5]) : 2;
	assert_int_equal(m[p + 1], 0xEF);
	assert_memory_equal(m + p + 4, "GMRIDX1", 8);
	x->end = p + 2 + ((size_t)m[p + 2] << 8 | m[p + 3]);
	x->hlen = (size_t)m[p + 12] << 8 | m[p + 13];
	x->hdr = p + 14;
	x->nrows = get32(m + x->hdr + x->hlen);
	x->rows = x->hdr + x->hlen + 4;
}

/* The first marker (FF then a byte neither 00 nor FF) at or after q. */
static size_t next_marker(const uint8_t *m, size_t lm, size_t q)
{
	while (q + 1 < lm && !(m[q] == 0xFF && m[q + 1] != 0 && m[q + 1] != 0xFF))
		q++;
	return q;
}

enum lie {
	LIE_DQT,     /* the header copy's DQT, one byte changed */
	LIE_SOF,     /* the header copy's SOF: another height */
	LIE_OWN,     /* the member's own DQT changed (the copy as packed) */
	LIE_ROW0,    /* row 0 one byte into the entropy data */
	LIE_PLUS1,   /* row y shifted by +1 */
	LIE_MINUS1,  /* ... by -1 */
	LIE_NEXTRST, /* row y at the segment after its own (another RSTn before it) */
	LIE_OUT,     /* the EOI offset past the member */
	LIE_FAR,     /* row y far out of the member (and so not rising) */
	LIE_DOWN,    /* rows y and y + 1 swapped (decreasing) */
	NLIES
};

static const char *const lie_name[NLIES] = {"dqt", "sof",  "own-dqt", "row0", "+1",
					    "-1",  "nrst", "out",     "far",  "down"};

/* Make the index of v[0..lm) (a copy of member m) lie as kind says, about row y. */
static void lie(uint8_t *v, size_t lm, enum lie kind, uint32_t y)
{
	struct ix_at x;
	ix_locate(v, &x);
	uint8_t *row = v + x.rows + 4 * (size_t)y, *sof = NULL, *dqt = NULL, *own = NULL;
	for (size_t q = x.hdr; q + 1 < x.hdr + x.hlen; q++) {
		if (v[q] == 0xFF && v[q + 1] == 0xDB && !dqt)
			dqt = v + q;
		if (v[q] == 0xFF && v[q + 1] == 0xC0 && !sof)
			sof = v + q;
	}
	for (size_t q = x.end; q + 1 < lm && !own; q++)
		if (v[q] == 0xFF && v[q + 1] == 0xDB)
			own = v + q;
	assert_true(dqt && sof && own);
	switch (kind) {
	case LIE_DQT:
		dqt[5] ^= 1;
		break;
	case LIE_SOF:
		sof[6] = (uint8_t)(sof[6] - 1); /* the height's low byte */
		break;
	case LIE_OWN:
		own[5] ^= 1;
		break;
	case LIE_ROW0:
		put32(v + x.rows, get32(v + x.rows) + 1);
		break;
	case LIE_PLUS1:
		put32(row, get32(row) + 1);
		break;
	case LIE_MINUS1:
		put32(row, get32(row) - 1);
		break;
	case LIE_NEXTRST:
		put32(row, (uint32_t)next_marker(v, lm, get32(row)) + 2);
		break;
	case LIE_OUT:
		put32(v + x.rows + 4 * (size_t)x.nrows, (uint32_t)lm);
		break;
	case LIE_FAR:
		put32(row, 0x7FFFFFF0u);
		break;
	case LIE_DOWN: {
		uint32_t a = get32(row), b = get32(row + 4);
		put32(row, b);
		put32(row + 4, a);
		break;
	}
	case NLIES:
		break;
	}
}

/*
 * One crop (eval, uint8, sample id 0) of the lying member v[0..lm), whole and
 * ranged as a worker reads it: the output bytes of ref[0..lref) (the honest
 * member, or v without its index when the member's own header changed); the lie
 * is seen (whole: gm_aug_index_stale; ranged: -ESTALE from gm_aug_range or
 * gm_aug_sample_range, after which a worker reads the member whole).
 */
static void lie_same_crop(struct gm_aug *g, size_t n, const uint8_t *ref, size_t lref,
			  const uint8_t *v, size_t lm, const char *what)
{
	uint8_t *x = malloc(n), *y = malloc(n);
	uint64_t off, len;
	assert_int_equal(gm_aug_sample(g, ref, lref, 9, 0, 0, x, NULL), 0);
	assert_false(gm_aug_index_stale(g));
	assert_int_equal(gm_aug_sample(g, v, lm, 9, 0, 0, y, NULL), 0);
	if (!gm_aug_index_stale(g) || memcmp(x, y, n))
		fail_msg("%s: whole: stale %d, same bytes %d", what, gm_aug_index_stale(g),
			 !memcmp(x, y, n));
	size_t plen = 2048 < lm ? 2048 : lm, need = gm_jpeg_index_bytes(v, plen);
	plen = need > plen && need <= lm ? need : plen;
	int rc = gm_aug_range(g, v, plen, lm, 9, 0, 0, &off, &len);
	if (rc == 0) {
		assert_true(off + len <= lm);
		rc = gm_aug_sample_range(g, v, plen, lm, v + off, off, len, 9, 0, 0, y, NULL);
	}
	if (rc != -ESTALE)
		fail_msg("%s: ranged: %d, not -ESTALE", what, rc);
	free(x);
	free(y);
}

/* Lines of file path that hold s. */
static int lines_with(const char *path, const char *s)
{
	char line[1024];
	int k = 0;
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		k += strstr(line, s) != NULL;
	fclose(f);
	return k;
}

/*
 * A shard's row index is checked, not trusted: a header copy or row offsets unlike
 * the member (each lie of enum lie, the row ones at the first, a middle and the
 * last row of the crop's window) decode to the bytes of the honest shard (a
 * changed own header: to those of the member without its index), the lie is seen
 * both whole and ranged, and the loader counts it (stale_index) and names the
 * member once a run, read ranged or whole.
 */
static void test_pack_restart_lying_index(void **state)
{
	(void)state;
	char err[512];
	struct gm_pack_opts o = {.per_shard = 100, .restart = 4};
	struct gm_dataset *ds;
	assert_int_equal(gm_pack_ex(at("rtree"), at("lie"), &o, NULL, err, sizeof(err)), 0);
	assert_int_equal(gm_dataset_open(&ds, at("lie"), err, sizeof(err)), 0);
	uint32_t id = UINT32_MAX;
	for (uint32_t i = 0; i < gm_dataset_count(ds); i++)
		if (strstr(gm_dataset_name(ds, i), "420.jpg"))
			id = i;
	assert_true(id != UINT32_MAX);
	char name[512];
	snprintf(name, sizeof(name), "%s", gm_dataset_name(ds, id));
	const char *nm = strrchr(name, '/') ? strrchr(name, '/') + 1 : name;
	size_t ls, lm = gm_dataset_file_size(ds, id);
	uint64_t mo = gm_dataset_offset(ds, id);
	uint8_t *shard = (uint8_t *)slurp(gm_dataset_path(ds, id), &ls), *v = malloc(ls),
		*own = malloc(lm);
	const uint8_t *m = shard + mo;
	gm_dataset_close(ds);

	/* the rows of the crop's window (eval, sample 0): its first, a middle, its last */
	size_t n;
	struct gm_aug *g = small_aug(GM_AUG_EVAL, GM_OUT_U8_HWC, &n);
	struct ix_at x;
	uint64_t off, len;
	ix_locate(m, &x);
	assert_int_equal(gm_aug_range(g, m, gm_jpeg_index_bytes(m, lm), lm, 9, 0, 0, &off, &len),
			 0);
	uint32_t r0 = 0, r1 = 0;
	for (uint32_t y = 0; y <= x.nrows; y++) {
		uint32_t r = get32(m + x.rows + 4 * (size_t)y);
		r0 = r - 2 == off ? y : r0;
		r1 = r + 2 == off + len ? y : r1;
	}
	assert_true(r0 > 0 && r1 > r0 + 1 && r1 < x.nrows); /* rows left out both sides */
	uint32_t rows[3] = {r0, (r0 + r1) / 2, r1};

	/* the honest shard's batches */
	uint64_t bytes, stale, honest = loader_hash_ex(at("lie"), true, &bytes, &stale), expect;
	assert_int_equal(stale, 0);
	int lies = 0;
	for (int k = 0; k < NLIES; k++)
		for (int r = 0; r < 3; r++) {
			bool per_row = k >= LIE_PLUS1 && k <= LIE_DOWN && k != LIE_OUT;
			if (r > 0 && !per_row)
				continue;
			if (k == LIE_DOWN && r == 2)
				continue; /* swapped with the row after the window */
			char what[64];
			snprintf(what, sizeof(what), "%s (row %u)", lie_name[k], rows[r]);
			memcpy(v, shard, ls);
			lie(v + mo, lm, (enum lie)k, rows[r]);
			assert_memory_not_equal(v + mo, m, lm);
			size_t lref = lm;
			const uint8_t *ref = m;
			if (k == LIE_OWN) {
				lref = strip_index((const char *)v + mo, lm, (char *)own);
				ref = own;
			}
			lie_same_crop(g, n, ref, lref, v + mo, lm, what);
			/* through the loader, ranged and whole, once each */
			char dir[64], path[600];
			snprintf(dir, sizeof(dir), "lie-%d", lies++);
			assert_int_equal(mkdir(at(dir), 0755), 0);
			snprintf(path, sizeof(path), "%s/shard-000000.tar", at(dir));
			FILE *f = fopen(path, "wb");
			assert_non_null(f);
			assert_int_equal(fwrite(v, 1, ls, f), ls);
			fclose(f);
			expect = honest;
			for (int whole = 0; whole < 2; whole++) {
				if (whole)
					setenv("GM_NO_RANGE", "1", 1);
				fflush(stderr);
				int saved = dup(2),
				    lf = open(at("lie.log"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
				assert_true(saved >= 0 && lf >= 0);
				dup2(lf, 2);
				uint64_t h = loader_hash_ex(at(dir), true, &bytes, &stale);
				fflush(stderr);
				dup2(saved, 2);
				close(saved);
				close(lf);
				unsetenv("GM_NO_RANGE");
				if (k == LIE_OWN && !whole)
					expect = h; /* other pixels: the same read whole */
				if (h != expect || stale != 2 || lines_with(at("lie.log"), nm) != 1)
					fail_msg("%s, %s: same batches %d, stale_index %llu, "
						 "lines naming it %d",
						 what, whole ? "whole" : "ranged", h == expect,
						 (unsigned long long)stale,
						 lines_with(at("lie.log"), nm));
			}
		}
	gm_aug_destroy(g);
	free(own);
	free(v);
	free(shard);
}

static void test_pack_restart_errors(void **state)
{
	(void)state;
	char err[512];
	struct stat sb;
	struct gm_pack_opts o = {.restart = 4, .tree = true};
	/* a tree goes to a new or empty directory; nothing is left beside it */
	assert_int_equal(mkdir(at("full"), 0755), 0);
	put("full/x", "x");
	assert_int_equal(gm_pack_ex(at("rtree"), at("full"), &o, NULL, err, sizeof(err)),
			 -ENOTEMPTY);
	assert_non_null(strstr(err, at("full")));
	assert_int_equal(entries(at("full")), 1);
	assert_int_equal(mkdir(at("empty"), 0755), 0);
	assert_int_equal(gm_pack_ex(at("rtree"), at("empty"), &o, NULL, err, sizeof(err)), 0);
	assert_int_equal(stat(at("empty/a/420.jpg"), &sb), 0);
	o.restart = 65536;
	assert_int_equal(gm_pack_ex(at("rtree"), at("e2"), &o, NULL, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "restart interval"));
	/* the command line: --restart[=N], --tree */
	char *bad0[] = {"pack", at("rtree"), at("o6"), "--restart=0"};
	assert_int_equal(gm_cmd_pack(4, bad0), 2);
	char *badx[] = {"pack", at("rtree"), at("o6"), "--restart=x"};
	assert_int_equal(gm_cmd_pack(4, badx), 2);
	char *def[] = {"pack", at("rtree"), at("o7"), "--restart", "--tree"};
	assert_int_equal(gm_cmd_pack(5, def), 0);
	char *n2[] = {"pack", at("rtree"), at("o8"), "--restart=2", "--per-shard", "5"};
	assert_int_equal(gm_cmd_pack(6, n2), 0);
	assert_int_equal(stat(at("o8/shard-000001.tar"), &sb), 0);
	assert_int_equal(stat(at("o7/b/sub/cmyk.jpg"), &sb), 0);
	/* no temporaries anywhere */
	DIR *d = opendir(base);
	struct dirent *de;
	while ((de = readdir(d)))
		assert_null(strstr(de->d_name, ".tmp-"));
	closedir(d);
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
	    cmocka_unit_test(test_pack_restart_tree),
	    cmocka_unit_test(test_pack_restart_errors),
	    cmocka_unit_test(test_pack_restart_lying_index),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
