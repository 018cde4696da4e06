/*
 * test_cgroup.c - the cgroup reader (core/cgroup.c) on fake /proc and /sys trees
 * built in a scratch directory: the v2 and v1 layouts, every level up to the root,
 * "max" and v1's "no limit", a cgroup namespace, missing files and malformed
 * lines, each of which must read as "no limit" rather than as a number.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "goldminer/cgroup.h"
#include "testutil.h"

#define MIB (UINT64_C(1) << 20)

static char root[256];

/* A fresh fake tree for one test: root/proc/self/ exists, nothing else. */
static int fresh(void **state)
{
	char p[512];
	(void)state;
	if (gm_test_tmpdir(root, sizeof(root), "gm-test-cgroup"))
		return -1;
	snprintf(p, sizeof(p), "%s/proc", root);
	mkdir(p, 0700);
	snprintf(p, sizeof(p), "%s/proc/self", root);
	return mkdir(p, 0700);
}

static int gone(void **state)
{
	(void)state;
	gm_test_rm_tree(root);
	return 0;
}

/* root/REL := text, creating the directories on the way. */
#define put(rel, text) assert_int_equal(gm_test_put(root, (rel), (text)), 0)

static void test_v2_takes_the_least_room_of_every_level(void **state)
{
	struct gm_cgroup_mem m;
	(void)state;
	put("proc/self/cgroup", "0::/a/b\n");
	put("sys/fs/cgroup/a/b/memory.max", "max\n");
	put("sys/fs/cgroup/a/b/memory.current", "1048576\n");
	put("sys/fs/cgroup/a/memory.max", "104857600\n");    /* 100 MiB */
	put("sys/fs/cgroup/a/memory.current", "41943040\n"); /* 40 MiB */
	put("sys/fs/cgroup/memory.max", "209715200\n");	     /* 200 MiB, 190 in use */
	put("sys/fs/cgroup/memory.current", "199229440\n");
	gm_cgroup_mem(root, &m);
	assert_int_equal(m.limit, 100 * MIB);
	assert_int_equal(m.room, 10 * MIB); /* the root's, not the tighter limit's */
	assert_string_equal(m.src, "memory cgroup /: memory.max 200.0 MiB, 190.0 MiB in use");
	put("sys/fs/cgroup/a/b/cpu.max", "50000 100000\n");
	put("sys/fs/cgroup/a/cpu.max", "max 100000\n");
	put("sys/fs/cgroup/cpu.max", "300000 100000\n");
	assert_true(gm_cgroup_cpu_quota(root) == 0.5);
}

static void test_v1_reads_the_memory_and_cpu_hierarchies(void **state)
{
	struct gm_cgroup_mem m;
	(void)state;
	put("proc/self/cgroup", "12:memory:/job\n"
				"5:cpu,cpuacct:/job/x\n"
				"1:name=systemd:/user.slice\n"
				"0::/user.slice\n");
	put("sys/fs/cgroup/memory/job/memory.limit_in_bytes", "67108864\n");
	put("sys/fs/cgroup/memory/job/memory.usage_in_bytes", "16777216\n");
	put("sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
	put("sys/fs/cgroup/cpu/job/x/cpu.cfs_quota_us", "-1\n");
	put("sys/fs/cgroup/cpu/job/x/cpu.cfs_period_us", "100000\n");
	put("sys/fs/cgroup/cpu/job/cpu.cfs_quota_us", "200000\n");
	put("sys/fs/cgroup/cpu/job/cpu.cfs_period_us", "100000\n");
	gm_cgroup_mem(root, &m);
	assert_int_equal(m.limit, 64 * MIB); /* the root's "no limit" is none */
	assert_int_equal(m.room, 48 * MIB);
	assert_non_null(strstr(m.src, "memory cgroup /job: memory.limit_in_bytes 64.0 MiB"));
	assert_true(gm_cgroup_cpu_quota(root) == 2.0);
}

static void test_nothing_to_read_is_no_limit(void **state)
{
	struct gm_cgroup_mem m;
	(void)state;
	gm_cgroup_mem(root, &m); /* no /proc/self/cgroup */
	assert_true(m.limit == UINT64_MAX && m.room == UINT64_MAX);
	assert_string_equal(m.src, "");
	assert_true(gm_cgroup_cpu_quota(root) == 0);
	put("proc/self/cgroup", "0::/a\n"); /* named, but no files under /sys */
	gm_cgroup_mem(root, &m);
	assert_true(m.limit == UINT64_MAX && m.room == UINT64_MAX);
	assert_true(gm_cgroup_cpu_quota(root) == 0);
	gm_cgroup_mem("/nonexistent/gm-test-root", &m);
	assert_true(m.limit == UINT64_MAX && gm_cgroup_cpu_quota("/nonexistent/x") == 0);
}

/* A path that does not exist under the mount (a cgroup namespace): the mount's
 * root is the process's cgroup. */
static void test_a_namespaced_path_reads_the_mount_root(void **state)
{
	struct gm_cgroup_mem m;
	(void)state;
	put("proc/self/cgroup", "0::/outside/of/the/namespace\n");
	put("sys/fs/cgroup/memory.max", "33554432\n");
	put("sys/fs/cgroup/memory.current", "0\n");
	put("sys/fs/cgroup/cpu.max", "150000 100000\n");
	gm_cgroup_mem(root, &m);
	assert_int_equal(m.limit, 32 * MIB);
	assert_int_equal(m.room, 32 * MIB);
	assert_true(gm_cgroup_cpu_quota(root) == 1.5);
}

/* Malformed lines and values are skipped, never read as numbers; the well-formed
 * line after them still counts. */
static void test_malformed_lines_and_values_are_no_limit(void **state)
{
	struct gm_cgroup_mem m;
	(void)state;
	put("proc/self/cgroup", "garbage\n"
				"7:\n"
				"3:memoryx:/wrong\n"
				"0::/a\n");
	put("sys/fs/cgroup/a/memory.max", "12abc\n");
	put("sys/fs/cgroup/memory.max", "-1\n");
	put("sys/fs/cgroup/a/cpu.max", "50000\n");			   /* no period */
	put("sys/fs/cgroup/cpu.max", "0 100000\n");			   /* no quota */
	put("sys/fs/cgroup/memory/wrong/memory.limit_in_bytes", "1024\n"); /* not "memory" */
	gm_cgroup_mem(root, &m);
	assert_true(m.limit == UINT64_MAX && m.room == UINT64_MAX);
	assert_true(gm_cgroup_cpu_quota(root) == 0);
	/* usage unreadable: the whole limit is room */
	put("sys/fs/cgroup/a/memory.max", "8388608\n");
	put("sys/fs/cgroup/a/memory.current", "lots\n");
	gm_cgroup_mem(root, &m);
	assert_int_equal(m.room, 8 * MIB);
	/* over the limit: no room, not a wrapped huge number */
	put("sys/fs/cgroup/a/memory.current", "9437184\n");
	gm_cgroup_mem(root, &m);
	assert_int_equal(m.room, 0);
	put("sys/fs/cgroup/a/cpu.max", "50000 100000 7\n"); /* a third field */
	assert_true(gm_cgroup_cpu_quota(root) == 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_v2_takes_the_least_room_of_every_level, fresh,
					    gone),
	    cmocka_unit_test_setup_teardown(test_v1_reads_the_memory_and_cpu_hierarchies, fresh,
					    gone),
	    cmocka_unit_test_setup_teardown(test_nothing_to_read_is_no_limit, fresh, gone),
	    cmocka_unit_test_setup_teardown(test_a_namespaced_path_reads_the_mount_root, fresh,
					    gone),
	    cmocka_unit_test_setup_teardown(test_malformed_lines_and_values_are_no_limit, fresh,
					    gone),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
