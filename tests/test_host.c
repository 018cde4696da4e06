/*
 * test_host.c - what the host's CPUs can deliver (core/host.c) on fake /proc and
 * /sys trees: a v1 quota of a quarter core, a v2 cpu.max, a cpuset of 3 CPUs
 * (v2 effective and v1), --cpus smaller than all of them, and a tree with no
 * limit at all; the least one binds, fractions kept, and the binding one is
 * named. Also the CPU list parser the cpuset and online files go through, and
 * a process's stopped state and CPU time as /proc/PID/stat says them, and the
 * CPU a host under half a core confines its workers to (gm_host_pick_cpu).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "goldminer/cgroup.h"
#include "goldminer/host.h"
#include "testutil.h"

static char root[256];

/* A fresh fake tree with 8 CPUs online and nothing else. */
static int fresh(void **state)
{
	char p[512];
	(void)state;
	if (gm_test_tmpdir(root, sizeof(root), "gm-test-host"))
		return -1;
	const char *dirs[] = {"proc",	     "proc/self",	   "sys",
			      "sys/devices", "sys/devices/system", "sys/devices/system/cpu"};
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", root, dirs[i]);
		if (mkdir(p, 0700))
			return -1;
	}
	snprintf(p, sizeof(p), "%s/sys/devices/system/cpu/online", root);
	FILE *f = fopen(p, "w");
	if (!f)
		return -1;
	fputs("0-7\n", f);
	fclose(f);
	return 0;
}

static int gone(void **state)
{
	(void)state;
	gm_test_rm_tree(root);
	return 0;
}

/* root/REL := text, creating the directories on the way. */
#define put(rel, text) assert_int_equal(gm_test_put(root, (rel), (text)), 0)

static void test_v1_quota_of_a_quarter_core_binds(void **state)
{
	struct gm_host_cpu h;
	(void)state;
	put("proc/self/cgroup", "4:cpu,cpuacct:/hostA\n");
	put("sys/fs/cgroup/cpu/hostA/cpu.cfs_quota_us", "25000\n");
	put("sys/fs/cgroup/cpu/hostA/cpu.cfs_period_us", "100000\n");
	gm_host_cpu(root, 0, &h);
	assert_true(h.online == 8);
	assert_true(h.quota == 0.25);
	assert_true(h.cores == 0.25);
	assert_string_equal(h.src, "cgroup CPU quota 0.25");
}

static void test_v2_cpu_max_binds(void **state)
{
	struct gm_host_cpu h;
	(void)state;
	put("proc/self/cgroup", "0::/jobs/b\n");
	put("sys/fs/cgroup/jobs/b/cpu.max", "75000 100000\n");
	put("sys/fs/cgroup/jobs/cpu.max", "max 100000\n");
	gm_host_cpu(root, 0, &h);
	assert_true(h.cores == 0.75);
	assert_string_equal(h.src, "cgroup CPU quota 0.75");
}

static void test_a_cpuset_of_three_cpus_binds_below_the_quota(void **state)
{
	struct gm_host_cpu h;
	(void)state;
	put("proc/self/cgroup", "0::/c\n");
	put("sys/fs/cgroup/c/cpu.max", "400000 100000\n");	 /* 4 cores */
	put("sys/fs/cgroup/c/cpuset.cpus", "0-7\n");		 /* asked for */
	put("sys/fs/cgroup/c/cpuset.cpus.effective", "2-3,6\n"); /* given */
	gm_host_cpu(root, 0, &h);
	assert_true(h.quota == 4);
	assert_true(h.cpuset == 3);
	assert_true(h.cores == 3);
	assert_string_equal(h.src, "cpuset 3.00");
	/* v1: cpuset.cpus in the cpuset hierarchy, tighter than the v2 one */
	put("proc/self/cgroup", "3:cpuset:/v1\n0::/c\n");
	put("sys/fs/cgroup/cpuset/v1/cpuset.cpus", "5,7\n");
	gm_host_cpu(root, 0, &h);
	assert_true(h.cpuset == 2 && h.cores == 2);
	/* the least set on the path binds: a parent of one CPU above */
	put("sys/fs/cgroup/cpuset/cpuset.cpus", "4\n");
	gm_host_cpu(root, 0, &h);
	assert_true(h.cpuset == 1 && h.cores == 1);
}

static void test_cpus_option_below_every_limit_binds_with_its_fraction(void **state)
{
	struct gm_host_cpu h;
	(void)state;
	put("proc/self/cgroup", "4:cpu:/a\n0::/c\n");
	put("sys/fs/cgroup/cpu/a/cpu.cfs_quota_us", "75000\n");
	put("sys/fs/cgroup/cpu/a/cpu.cfs_period_us", "100000\n");
	put("sys/fs/cgroup/c/cpuset.cpus.effective", "0-2\n");
	gm_host_cpu(root, 0.5, &h);
	assert_true(h.cpus == 0.5 && h.quota == 0.75 && h.cpuset == 3);
	assert_true(h.cores == 0.5);
	assert_string_equal(h.src, "--cpus 0.50");
	gm_host_cpu(root, 1.5, &h); /* above the quota: the quota binds */
	assert_true(h.cores == 0.75);
}

static void test_no_limit_is_the_online_cpus(void **state)
{
	struct gm_host_cpu h;
	(void)state;
	gm_host_cpu(root, 0, &h); /* no /proc/self/cgroup at all */
	assert_true(h.quota == 0 && h.cpuset == 0 && h.cpus == 0);
	assert_true(h.cores == 8);
	assert_string_equal(h.src, "online CPUs 8.00");
	put("sys/devices/system/cpu/online", "garbage\n"); /* nothing known: one core */
	gm_host_cpu(root, 0, &h);
	assert_true(h.cores == 1);
	assert_non_null(strstr(h.src, "1 assumed"));
	gm_host_cpu(NULL, 0, &h); /* the real host: at least what affinity gives */
	assert_true(h.cores > 0 && h.online >= 1 && h.cpuset >= 1);
}

static void test_cpu_lists_are_counted_and_malformed_ones_are_none(void **state)
{
	(void)state;
	assert_int_equal(gm_cgroup_cpu_list("0-3,8,10-11\n"), 7);
	assert_int_equal(gm_cgroup_cpu_list("5"), 1);
	assert_int_equal(gm_cgroup_cpu_list(""), 0);
	assert_int_equal(gm_cgroup_cpu_list("\n"), 0);
	assert_int_equal(gm_cgroup_cpu_list("3-1"), 0);
	assert_int_equal(gm_cgroup_cpu_list("0-"), 0);
	assert_int_equal(gm_cgroup_cpu_list("a"), 0);
	assert_int_equal(gm_cgroup_cpu_list("1,,2"), 0);
	assert_int_equal(gm_cgroup_cpu_list("-1"), 0);
	assert_int_equal(gm_cgroup_cpu_list("1 2"), 0);
}

/* /proc/PID/stat's state after the name's last ')': T is stopped by a signal;
 * t (a tracer's stop), S, R are not; a name holding ") T" does not fool it; no
 * file or no parenthesis is not stopped. */
static void test_a_process_stopped_by_a_signal_is_state_T(void **state)
{
	(void)state;
	put("/proc/100/stat", "100 (goldminer) T 1 100 100 0 -1 4194560 ...\n");
	put("/proc/101/stat", "101 (goldminer) t 1 101 101 0 -1\n");
	put("/proc/102/stat", "102 (x) T (y) S 1 102 102 0 -1\n");
	put("/proc/103/stat", "103 (goldminer) R 1 103\n");
	put("/proc/104/stat", "104 goldminer T 1\n");
	put("/proc/105/stat", "105 (a)T 1\n");
	put("/proc/106/stat", "106 (a) Tx 1\n");
	assert_true(gm_host_stopped(root, 100));
	assert_false(gm_host_stopped(root, 101));
	assert_false(gm_host_stopped(root, 102));
	assert_false(gm_host_stopped(root, 103));
	assert_false(gm_host_stopped(root, 104));
	assert_false(gm_host_stopped(root, 105));
	assert_false(gm_host_stopped(root, 106));
	assert_false(gm_host_stopped(root, 107));      /* no such process */
	assert_false(gm_host_stopped(NULL, getpid())); /* this one runs */
	assert_int_equal(gm_host_proc_state(root, 101), 't');
	assert_int_equal(gm_host_proc_state(root, 103), 'R');
	assert_int_equal(gm_host_proc_state(root, 105), 0);
	assert_int_equal(gm_host_proc_state(root, 107), 0);
}

/* /proc/PID/stat's utime + stime (fields 14 and 15) in ns, at this machine's
 * clock ticks; a name holding ") R 1 2" does not shift them; too few fields,
 * no parenthesis or no file: UINT64_MAX (not known). This process's own, read
 * twice around a spin of 30 ms of CPU, grows. */
static void test_a_processs_cpu_time_is_its_user_and_system_ticks(void **state)
{
	(void)state;
	uint64_t tick = 1000000000u / (uint64_t)sysconf(_SC_CLK_TCK);
	put("/proc/200/stat", "200 (goldminer) S 1 200 200 0 -1 4194560 10 0 0 0 150 25 0 0\n");
	put("/proc/201/stat", "201 (a) R 1 2) S 1 201 201 0 -1 0 0 0 0 0 7 3 0 0\n");
	put("/proc/202/stat", "202 (goldminer) S 1 202 202 0 -1 0 0 0 0 0 7\n");
	put("/proc/203/stat", "203 goldminer S 1 202 202 0 -1 0 0 0 0 0 7 3\n");
	assert_int_equal(gm_host_proc_cpu_ns(root, 200), 175 * tick);
	assert_int_equal(gm_host_proc_cpu_ns(root, 201), 10 * tick);
	assert_int_equal(gm_host_proc_cpu_ns(root, 202), UINT64_MAX);
	assert_int_equal(gm_host_proc_cpu_ns(root, 203), UINT64_MAX);
	assert_int_equal(gm_host_proc_cpu_ns(root, 204), UINT64_MAX);
	uint64_t a = gm_host_proc_cpu_ns(NULL, getpid());
	assert_true(a != UINT64_MAX);
	struct timespec t0, t;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
	do
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 30000000L);
	uint64_t b = gm_host_proc_cpu_ns(NULL, getpid());
	assert_true(b != UINT64_MAX && b > a);
}

/* /proc/PID/schedstat's second field (the run-queue wait) in ns; fewer than
 * three fields or no file: UINT64_MAX. This process's own, read around a
 * spin of 30 ms beside a busy child on this CPU alone, grows. */
static void test_a_processs_wait_for_a_cpu_is_its_schedstat_run_delay(void **state)
{
	(void)state;
	put("/proc/300/schedstat", "221152501 1787118333 34\n");
	put("/proc/301/schedstat", "221152501 1787118333\n");
	put("/proc/302/schedstat", "x y z\n");
	assert_int_equal(gm_host_proc_wait_ns(root, 300), 1787118333ull);
	assert_int_equal(gm_host_proc_wait_ns(root, 301), UINT64_MAX);
	assert_int_equal(gm_host_proc_wait_ns(root, 302), UINT64_MAX);
	assert_int_equal(gm_host_proc_wait_ns(root, 303), UINT64_MAX);
	uint64_t a = gm_host_proc_wait_ns(NULL, getpid());
	assert_true(a != UINT64_MAX);
	cpu_set_t one, was;
	assert_int_equal(sched_getaffinity(0, sizeof(was), &was), 0);
	CPU_ZERO(&one);
	CPU_SET(sched_getcpu(), &one);
	assert_int_equal(sched_setaffinity(0, sizeof(one), &one), 0);
	pid_t busy = fork(); /* shares the CPU: each waits while the other runs */
	if (busy == 0)
		for (;;)
			;
	assert_true(busy > 0);
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do
		clock_gettime(CLOCK_MONOTONIC, &t);
	while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 100000000L);
	kill(busy, SIGKILL);
	waitpid(busy, NULL, 0);
	assert_int_equal(sched_setaffinity(0, sizeof(was), &was), 0);
	uint64_t b = gm_host_proc_wait_ns(NULL, getpid());
	assert_true(b != UINT64_MAX && b > a);
}

/* CPUs 0..n-1 as a set */
static cpu_set_t cpus(int n)
{
	cpu_set_t s;
	CPU_ZERO(&s);
	for (int c = 0; c < n; c++)
		CPU_SET(c, &s);
	return s;
}

static void test_a_quota_under_half_a_core_confines_the_workers_to_the_cpu_it_runs_on(void **state)
{
	(void)state;
	cpu_set_t two = cpus(2), one = cpus(1), odd;
	char why[200] = "";
	assert_int_equal(gm_host_pick_cpu(0.2, NULL, 1, &two, why, sizeof(why)), 1);
	assert_int_equal(gm_host_pick_cpu(0.45, "", 0, &two, why, sizeof(why)), 0);
	assert_int_equal(gm_host_pick_cpu(0.25, "auto", 1, &two, why, sizeof(why)), 1);
	/* a CPU it may not run on now (a stale reading): its first allowed one */
	CPU_ZERO(&odd);
	CPU_SET(3, &odd);
	CPU_SET(5, &odd);
	assert_int_equal(gm_host_pick_cpu(0.2, NULL, 1, &odd, why, sizeof(why)), 3);
	assert_int_equal(gm_host_pick_cpu(0.2, NULL, -1, &odd, why, sizeof(why)), 3);
	assert_int_equal(gm_host_pick_cpu(0.2, NULL, 5, &odd, why, sizeof(why)), 5);
	/* half a core and more, no quota, one CPU only, or off: not confined */
	assert_int_equal(gm_host_pick_cpu(GM_HOST_PIN_CORES, NULL, 0, &two, why, sizeof(why)), -1);
	assert_int_equal(gm_host_pick_cpu(0.75, NULL, 0, &two, why, sizeof(why)), -1);
	assert_int_equal(gm_host_pick_cpu(0, NULL, 0, &two, why, sizeof(why)), -1);
	assert_int_equal(gm_host_pick_cpu(0.2, NULL, 0, &one, why, sizeof(why)), -1);
	assert_int_equal(gm_host_pick_cpu(0.2, "off", 0, &two, why, sizeof(why)), -1);
	assert_string_equal(why, "");
	/* a CPU named: that one, quota or not */
	assert_int_equal(gm_host_pick_cpu(0, "1", 0, &two, why, sizeof(why)), 1);
	assert_int_equal(gm_host_pick_cpu(0.2, "5", 3, &odd, why, sizeof(why)), 5);
}

static void test_a_bad_worker_cpu_variable_is_refused_with_its_value(void **state)
{
	(void)state;
	cpu_set_t two = cpus(2);
	char why[200];
	const char *bad[] = {"x", "-1", "1.5", "2k", " 1", "99999999999999999999"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why[0] = 0;
		assert_int_equal(gm_host_pick_cpu(0.2, bad[i], 0, &two, why, sizeof(why)), -EINVAL);
		assert_non_null(strstr(why, "GM_WORKER_CPU"));
		assert_non_null(strstr(why, bad[i]));
		assert_non_null(strstr(why, "auto, off or a CPU number"));
	}
	why[0] = 0;
	assert_int_equal(gm_host_pick_cpu(0.2, "7", 0, &two, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "GM_WORKER_CPU=7: this process may not run on CPU 7"));
	assert_non_null(strstr(why, "on 2 CPUs"));
}

static void test_pinning_confines_a_process_and_a_negative_cpu_leaves_it(void **state)
{
	(void)state;
	cpu_set_t was, now;
	assert_int_equal(sched_getaffinity(0, sizeof(was), &was), 0);
	int c = sched_getcpu();
	assert_true(c >= 0);
	pid_t kid = fork();
	if (kid == 0) {
		pause();
		_exit(0);
	}
	assert_true(kid > 0);
	assert_int_equal(gm_host_pin(kid, -1), 0);
	assert_int_equal(sched_getaffinity(kid, sizeof(now), &now), 0);
	assert_true(CPU_EQUAL(&now, &was));
	assert_int_equal(gm_host_pin(kid, c), 0);
	assert_int_equal(sched_getaffinity(kid, sizeof(now), &now), 0);
	assert_int_equal(CPU_COUNT(&now), 1);
	assert_true(CPU_ISSET(c, &now));
	assert_int_equal(gm_host_pin(kid, CPU_SETSIZE - 1), -EINVAL); /* no such CPU */
	kill(kid, SIGKILL);
	waitpid(kid, NULL, 0);
	assert_true(gm_host_pin(kid, c) == -ESRCH);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_v1_quota_of_a_quarter_core_binds, fresh, gone),
	    cmocka_unit_test_setup_teardown(test_v2_cpu_max_binds, fresh, gone),
	    cmocka_unit_test_setup_teardown(test_a_cpuset_of_three_cpus_binds_below_the_quota,
					    fresh, gone),
	    cmocka_unit_test_setup_teardown(
		test_cpus_option_below_every_limit_binds_with_its_fraction, fresh, gone),
	    cmocka_unit_test_setup_teardown(test_no_limit_is_the_online_cpus, fresh, gone),
	    cmocka_unit_test(test_cpu_lists_are_counted_and_malformed_ones_are_none),
	    cmocka_unit_test_setup_teardown(test_a_process_stopped_by_a_signal_is_state_T, fresh,
					    gone),
	    cmocka_unit_test_setup_teardown(test_a_processs_cpu_time_is_its_user_and_system_ticks,
					    fresh, gone),
	    cmocka_unit_test_setup_teardown(
		test_a_processs_wait_for_a_cpu_is_its_schedstat_run_delay, fresh, gone),
	    cmocka_unit_test(
		test_a_quota_under_half_a_core_confines_the_workers_to_the_cpu_it_runs_on),
	    cmocka_unit_test(test_a_bad_worker_cpu_variable_is_refused_with_its_value),
	    cmocka_unit_test(test_pinning_confines_a_process_and_a_negative_cpu_leaves_it),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
