/*
 * test_profile.c - the profile table: `goldminer profile` (cmd/profile.c) measures
 * a rate and gm_profile_write (sim/profile.c) lands it in the chosen classes of a
 * profile the simulator loads (gm_profile_load); the non-image classes through
 * python/goldminer/tools/profile_classes.py (skipped where /usr/bin/python3 has no NumPy).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "goldminer/profile.h"
#include "goldminer/synth.h"
#include "testutil.h"

static char base[64];

static char *at(const char *rel)
{
	static char buf[4][256];
	static int k;
	k = (k + 1) % 4;
	snprintf(buf[k], sizeof(buf[k]), "%s/%s", base, rel);
	return buf[k];
}

static int setup(void **state)
{
	(void)state;
	char err[256];
	if (gm_test_tmpdir(base, sizeof(base), "gm-profile"))
		return -1;
	return gm_synth_write(at("data"), 24, 2, 3, 50, NULL, err, sizeof(err)) ? -1 : 0;
}

static int teardown(void **state)
{
	(void)state;
	gm_test_rm_tree(base);
	return 0;
}

static void test_profile_writes_measured_rate(void **state)
{
	(void)state;
	char err[512];
	struct gm_profile def, got;
	gm_profile_default(&def);
	char *argv[] = {"profile", at("data"), "--class", "resnet50", "--images",
			"30",	   "--batch",  "8",	  "--out",    at("p.tsv")};
	assert_int_equal(gm_cmd_profile(10, argv), 0);
	if (gm_profile_load(&got, at("p.tsv"), err, sizeof(err)))
		fail_msg("%s", err);
	assert_int_equal(got.n, def.n);
	int r = gm_profile_find(&got, "resnet50");
	assert_true(r >= 0);
	assert_true(got.c[r].cpu_rate > 0);
	assert_true(got.c[r].cpu_rate != def.c[r].cpu_rate);
	assert_non_null(strstr(got.c[r].cpu_source, "measured: goldminer profile"));
	assert_non_null(strstr(got.c[r].cpu_source, "48 samples (2 of 24)")); /* whole epochs */
	assert_true(got.c[r].gpu_rate == def.c[r].gpu_rate);
	for (int i = 0; i < def.n; i++) {
		if (i == r)
			continue;
		assert_string_equal(got.c[i].name, def.c[i].name);
		assert_true(got.c[i].cpu_rate == def.c[i].cpu_rate);
		assert_true(got.c[i].share == def.c[i].share);
		assert_string_equal(got.c[i].cpu_source, def.c[i].cpu_source);
	}
	/* from a base file: only that file's classes */
	char *argv2[] = {"profile", at("data"), "--base",   "traces/samples/tiny-profile.tsv",
			 "--class", "a,b",	"--images", "1",
			 "--out",   at("q.tsv")};
	assert_int_equal(gm_cmd_profile(10, argv2), 0);
	assert_int_equal(gm_profile_load(&got, at("q.tsv"), err, sizeof(err)), 0);
	assert_int_equal(got.n, 2);
	assert_true(got.c[0].cpu_rate == got.c[1].cpu_rate && got.c[0].cpu_rate != 10);
}

/* --class NEW=BASE: a new row after the others, measured, share 0, the GPU rate an
 * assumption; the base rows untouched; bad names refused before any work. */
static void test_profile_new_class(void **state)
{
	(void)state;
	char err[512];
	struct gm_profile def, got;
	gm_profile_default(&def);
	char *argv[] = {"profile",    at("data"),
			"--class",    "cv-light,cv-light-128=cv-light",
			"--pipeline", "read | decode | random_resized_crop 128 | to_hwc_u8",
			"--images",   "24",
			"--out",      at("n.tsv")};
	assert_int_equal(gm_cmd_profile(10, argv), 0);
	if (gm_profile_load(&got, at("n.tsv"), err, sizeof(err)))
		fail_msg("%s", err);
	assert_int_equal(got.n, def.n + 1);
	int b = gm_profile_find(&def, "cv-light"), k = gm_profile_find(&got, "cv-light-128");
	assert_int_equal(k, def.n);
	assert_true(got.c[k].share == 0);
	assert_true(got.c[k].gpu_rate == def.c[b].gpu_rate);
	assert_true(got.c[k].cpu_rate == got.c[b].cpu_rate &&
		    got.c[k].cpu_rate != def.c[b].cpu_rate);
	assert_true(!strncmp(got.c[k].gpu_source, "assumption: cv-light's gpu_rate", 31));
	assert_non_null(strstr(got.c[k].cpu_source, "random_resized_crop 128"));
	for (int i = 0; i < def.n; i++)
		assert_true(got.c[i].share == def.c[i].share);
	char *dup[] = {"profile", at("data"), "--class", "nlp=resnet50"};
	assert_int_equal(gm_cmd_profile(4, dup), 2);
	char *nobase[] = {"profile", at("data"), "--class", "x=nosuch"};
	assert_int_equal(gm_cmd_profile(4, nobase), 2);
	char *blank[] = {"profile", at("data"), "--class", "a b=resnet50"};
	assert_int_equal(gm_cmd_profile(4, blank), 2);
	char *empty[] = {"profile", at("data"), "--class", "=resnet50"};
	assert_int_equal(gm_cmd_profile(4, empty), 2);
}

static void test_profile_errors(void **state)
{
	(void)state;
	char *unknown[] = {"profile", at("data"), "--class", "nosuch"};
	assert_int_equal(gm_cmd_profile(4, unknown), 2);
	char *nodata[] = {"profile", at("missing"), "--out", at("x.tsv")};
	assert_int_equal(gm_cmd_profile(4, nodata), 1);
	assert_int_not_equal(access(at("x.tsv"), F_OK), 0); /* nothing written */
	char *zero[] = {"profile", at("data"), "--images", "0"};
	assert_int_equal(gm_cmd_profile(4, zero), 2);
	char *nobase[] = {"profile", at("data"), "--base", at("none.tsv")};
	assert_int_equal(gm_cmd_profile(4, nobase), 1);
	char *noarg[] = {"profile"};
	assert_int_equal(gm_cmd_profile(1, noarg), 2);
	char *badout[] = {"profile", at("data"), "--images", "1", "--out", at("no/dir/p.tsv")};
	assert_int_equal(gm_cmd_profile(6, badout), 1);
}

/* Run gm_cmd_profile with its stderr in a file; the exit status, the text in out. */
static int profile_captured(int argc, char **argv, char *out, size_t len)
{
	int keep = dup(2), fd = open(at("stderr.txt"), O_WRONLY | O_CREAT | O_TRUNC, 0600);
	fflush(stderr);
	dup2(fd, 2);
	close(fd);
	int rc = gm_cmd_profile(argc, argv);
	fflush(stderr);
	dup2(keep, 2);
	close(keep);
	FILE *f = fopen(at("stderr.txt"), "r");
	size_t n = f ? fread(out, 1, len - 1, f) : 0;
	out[n] = 0;
	if (f)
		fclose(f);
	return rc;
}

static bool have_numpy(void)
{
	return system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0;
}

/* nlp and recsys: their Python pipelines on small inputs land a measured rate in
 * their rows only, with a source naming the command and the data. */
static void test_profile_python_classes_measured(void **state)
{
	(void)state;
	char err[512];
	struct gm_profile def, got;
	if (!have_numpy())
		skip(); /* /usr/bin/python3 without NumPy (apt-get install python3-numpy) */
	gm_profile_default(&def);
	assert_int_equal(gm_test_put(base, "corpus/a.txt",
				     "The quick brown fox jumps over the lazy dog.\n\nSecond, "
				     "a paragraph with punctuation; and accents: caf\xc3\xa9.\n"),
			 0);
	char *nlp[] = {"profile",  "--class", "nlp",   "--input",    at("corpus"),
		       "--images", "50",      "--out", at("nlp.tsv")};
	assert_int_equal(gm_cmd_profile(9, nlp), 0);
	if (gm_profile_load(&got, at("nlp.tsv"), err, sizeof(err)))
		fail_msg("%s", err);
	int k = gm_profile_find(&got, "nlp");
	assert_true(got.c[k].cpu_rate != def.c[k].cpu_rate && got.c[k].cpu_rate > 0);
	assert_non_null(strstr(got.c[k].cpu_source, "measured: goldminer profile --class nlp"));
	assert_non_null(strstr(got.c[k].cpu_source, "profile_classes text"));
	assert_non_null(strstr(got.c[k].cpu_source, at("corpus")));
	for (int i = 0; i < def.n; i++)
		if (i != k)
			assert_true(got.c[i].cpu_rate == def.c[i].cpu_rate);
	/* recsys on a two-row Criteo TSV, and a row with a field missing */
	char row[512] = "1", bad[600];
	for (int f = 0; f < 13; f++)
		strcat(row, f % 3 ? "\t5" : "\t");
	for (int f = 0; f < 26; f++)
		strcat(row, f % 4 ? "\t68fd1e64" : "\t");
	snprintf(bad, sizeof(bad), "%s\n%s\n", row, row);
	assert_int_equal(gm_test_put(base, "rows.tsv", bad), 0);
	char *rec[] = {"profile",  "--class", "recsys", "--input",    at("rows.tsv"),
		       "--images", "10",      "--out",	at("rec.tsv")};
	assert_int_equal(gm_cmd_profile(9, rec), 0);
	assert_int_equal(gm_profile_load(&got, at("rec.tsv"), err, sizeof(err)), 0);
	k = gm_profile_find(&got, "recsys");
	assert_non_null(strstr(got.c[k].cpu_source, "profile_classes criteo"));
	snprintf(bad, sizeof(bad), "%s\n0\t1\t2\n", row); /* line 2: 3 fields */
	assert_int_equal(gm_test_put(base, "bad.tsv", bad), 0);
	char msg[4096];
	char *brec[] = {"profile",     "--class", "recsys",	 "--input",
			at("bad.tsv"), "--out",	  at("brec.tsv")};
	assert_int_equal(profile_captured(7, brec, msg, sizeof(msg)), 1);
	assert_non_null(strstr(msg, "bad.tsv:2: 3 fields, a Criteo row has 40"));
	assert_int_not_equal(access(at("brec.tsv"), F_OK), 0); /* nothing written */
}

/* A missing interpreter or module is an error naming what to install; usage
 * errors (DATA, --input) are refused before anything runs. */
static void test_profile_python_errors_name_the_fix(void **state)
{
	(void)state;
	char msg[4096];
	char *nlp[] = {"profile", "--class", "nlp", "--out", at("e.tsv")};
	setenv("GM_PYTHON", at("no-python"), 1);
	assert_int_equal(profile_captured(5, nlp, msg, sizeof(msg)), 1);
	assert_non_null(strstr(msg, "cannot run"));
	assert_non_null(strstr(msg, "GM_PYTHON"));
	unsetenv("GM_PYTHON");
	if (access("/usr/bin/python3", X_OK) == 0) {
		/* a NumPy that fails to import, first on PYTHONPATH */
		assert_int_equal(gm_test_put(base, "fake/numpy.py", "raise ImportError('no')\n"),
				 0);
		const char *old = getenv("PYTHONPATH");
		char *keep = old ? strdup(old) : NULL;
		setenv("PYTHONPATH", at("fake"), 1);
		int rc = profile_captured(5, nlp, msg, sizeof(msg));
		if (keep)
			setenv("PYTHONPATH", keep, 1);
		else
			unsetenv("PYTHONPATH");
		free(keep);
		assert_int_equal(rc, 1);
		assert_non_null(strstr(msg, "apt-get install python3-numpy"));
		assert_non_null(strstr(msg, "lacks a module"));
	}
	assert_int_not_equal(access(at("e.tsv"), F_OK), 0);
	char *vit[] = {"profile", "--class", "vit"};
	assert_int_equal(profile_captured(3, vit, msg, sizeof(msg)), 2);
	assert_non_null(strstr(msg, "DATA is needed"));
	char *two[] = {"profile", "--class", "nlp,recsys", "--input", at("x")};
	assert_int_equal(profile_captured(5, two, msg, sizeof(msg)), 2);
	assert_non_null(strstr(msg, "one at a time"));
	char *none[] = {"profile", at("data"), "--class", "resnet50", "--input", at("x")};
	assert_int_equal(gm_cmd_profile(6, none), 2);
}

static void test_profile_write_round_trip(void **state)
{
	(void)state;
	char err[512];
	struct gm_profile p, q;
	gm_profile_default(&p);
	snprintf(p.c[0].gpu_source, sizeof(p.c[0].gpu_source), "with\ta tab\nand a newline");
	p.c[1].cpu_rate = 1234.5678;
	assert_int_equal(gm_profile_write(&p, at("rt.tsv"), "two\nlines", err, sizeof(err)), 0);
	if (gm_profile_load(&q, at("rt.tsv"), err, sizeof(err)))
		fail_msg("%s", err);
	assert_int_equal(q.n, p.n);
	assert_string_equal(q.c[0].gpu_source, "with a tab and a newline");
	assert_true(q.c[1].cpu_rate == 1234.5678);
	for (int i = 0; i < p.n; i++) {
		assert_string_equal(q.c[i].name, p.c[i].name);
		assert_true(q.c[i].gpu_rate == p.c[i].gpu_rate);
	}
	assert_int_equal(gm_profile_write(&p, at("no/dir/x.tsv"), NULL, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "no/dir/x.tsv"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_profile_writes_measured_rate),
	    cmocka_unit_test(test_profile_new_class),
	    cmocka_unit_test(test_profile_errors),
	    cmocka_unit_test(test_profile_write_round_trip),
	    cmocka_unit_test(test_profile_python_classes_measured),
	    cmocka_unit_test(test_profile_python_errors_name_the_fix),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
