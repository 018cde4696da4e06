/*
 * test_ring.c - the shared-memory ring protocol: layout validation, claim order,
 * backpressure, lease reclaim, end of tasks, and a real second process; the seals
 * that keep a ring's size fixed, and admission against the memory left (an
 * injected GM_MEM_LIMIT, and a real small memory cgroup when root).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "goldminer/host.h"
#include "goldminer/ring.h"
#include "goldminer/util.h"

static void test_create_validates(void **state)
{
	(void)state;
	struct gm_ring *r;
	assert_int_equal(gm_ring_create(&r, 3, 4, 16, 0, 10), -EINVAL);	 /* not pow2 */
	assert_int_equal(gm_ring_create(&r, 4, 0, 16, 0, 10), -EINVAL);	 /* batch 0 */
	assert_int_equal(gm_ring_create(&r, 4, 4, 0, 0, 10), -EINVAL);	 /* sample 0 */
	assert_int_equal(gm_ring_create(&r, 4, 4, 16, 10, 10), -EINVAL); /* no task */
	assert_null(r);
	assert_int_equal(gm_ring_create(&r, 4, 8, 100, 0, 10), 0);
	struct gm_ring_hdr *h = gm_ring_hdr(r);
	assert_int_equal(h->nslots, 4);
	assert_int_equal(h->batch_size, 8);
	/* slots do not overlap and data is page aligned */
	assert_true((uintptr_t)gm_ring_data(r, 1) % 4096 == 0);
	assert_true((char *)gm_ring_data(r, 0) + 8 * 100 <= (char *)gm_ring_ctl(r, 1));
	assert_true((char *)(gm_ring_ids(r, 0) + 8) <= (char *)gm_ring_data(r, 0));
	gm_ring_destroy(r);
	gm_ring_destroy(NULL);
}

/* Bytes of the memfd's pages that are allocated. */
static uint64_t allocated(int fd)
{
	struct stat st;
	assert_int_equal(fstat(fd, &st), 0);
	return (uint64_t)st.st_blocks * 512;
}

static void test_sparse_ring_costs_only_the_pages_written(void **state)
{
	(void)state;
	struct gm_ring *r, *a;
	/* 4 slots of 8 MiB: 32 MiB mapped, by the creator and by an attacher */
	assert_int_equal(gm_ring_create_sparse(&r, 4, 1, 8 << 20, 0, 100), 0);
	uint64_t total = gm_ring_hdr(r)->total_bytes;
	assert_true(allocated(gm_ring_fd(r)) < total / 16); /* the header and ctl pages */
	assert_int_equal(gm_ring_attach(&a, gm_ring_fd(r)), 0);
	uint64_t before = allocated(gm_ring_fd(r));
	assert_true(before < total / 16);	/* the attacher did not pre-fault it either */
	memset(gm_ring_data(a, 2), 7, 1 << 20); /* a worker writes 1 MiB */
	assert_in_range(allocated(gm_ring_fd(r)) - before, 1 << 20, (1 << 20) + 4096);
	assert_int_equal(((char *)gm_ring_data(r, 2))[4095], 7);
	gm_ring_destroy(a);
	gm_ring_destroy(r);
	/* the reserved ring: every page allocated before anyone writes one */
	assert_int_equal(gm_ring_create(&r, 4, 1, 8 << 20, 0, 100), 0);
	assert_true(allocated(gm_ring_fd(r)) >= gm_ring_hdr(r)->total_bytes);
	gm_ring_destroy(r);
	assert_int_equal(gm_ring_create_sparse(&r, 3, 1, 4096, 0, 10), -EINVAL); /* not pow2 */
	assert_null(r);
}

static void test_attach_validates_header(void **state)
{
	(void)state;
	struct gm_ring *r, *a;
	assert_int_equal(gm_ring_create(&r, 4, 2, 64, 0, 100), 0);
	int fd = gm_ring_fd(r);
	assert_int_equal(gm_ring_attach(&a, fd), 0);
	/* the attached view sees the same memory */
	((char *)gm_ring_data(r, 2))[5] = 42;
	assert_int_equal(((char *)gm_ring_data(a, 2))[5], 42);
	gm_ring_destroy(a);

	struct gm_ring_hdr *h = gm_ring_hdr(r);
	uint64_t magic = h->magic;
	h->magic ^= 1;
	assert_int_equal(gm_ring_attach(&a, fd), -EBADMSG);
	h->magic = magic;
	uint64_t sb = h->slot_bytes;
	h->slot_bytes = 4096; /* inconsistent with batch x sample bytes */
	assert_int_equal(gm_ring_attach(&a, fd), -EBADMSG);
	h->slot_bytes = sb;
	uint32_t ns = h->nslots;
	h->nslots = 1024; /* claims more memory than the fd holds */
	assert_int_equal(gm_ring_attach(&a, fd), -EBADMSG);
	h->nslots = ns;
	assert_int_equal(gm_ring_attach(&a, fd), 0);
	gm_ring_destroy(a);

	/* an fd that is not a ring at all */
	int mfd = memfd_create("x", 0);
	assert_true(mfd >= 0);
	assert_int_equal(gm_ring_attach(&a, mfd), -EBADMSG);
	assert_int_equal(ftruncate(mfd, 8192), 0);
	assert_int_equal(gm_ring_attach(&a, mfd), -EBADMSG);
	close(mfd);
	gm_ring_destroy(r);
}

static void test_claim_order_backpressure_release(void **state)
{
	(void)state;
	struct gm_ring *r;
	uint64_t t;
	assert_int_equal(gm_ring_create(&r, 4, 1, 8, 10, 100), 0);
	/* tasks come lowest first, 10..13, then nothing until the consumer releases */
	for (uint64_t want = 10; want < 14; want++) {
		int s = gm_ring_claim(r, 1234, &t);
		assert_true(s >= 0);
		assert_int_equal(t, want);
		assert_int_equal(s, want & 3);
		struct gm_slot_ctl *c = gm_ring_ctl(r, (uint32_t)s);
		assert_int_equal(GM_SLOT_STATE(atomic_load(&c->state)), GM_SLOT_CLAIMED);
		assert_int_equal(GM_SLOT_PID(atomic_load(&c->state)), 1234);
	}
	assert_int_equal(gm_ring_claim(r, 1234, &t), -EAGAIN);
	/* publish 11 first: the consumer still waits for 10 */
	gm_ring_publish(r, 11 & 3);
	assert_int_equal(gm_ring_wait_ready(r, 10, 20), -ETIMEDOUT);
	assert_int_equal(gm_ring_wait_ready(r, 11, 20), 0);
	gm_ring_publish(r, 10 & 3);
	assert_int_equal(gm_ring_wait_ready(r, 10, 20), 0);
	gm_ring_release(r, 10 & 3);
	assert_int_equal(atomic_load(&gm_ring_hdr(r)->consumed), 11);
	int s = gm_ring_claim(r, 1234, &t);
	assert_int_equal(t, 14);
	assert_int_equal(s, 14 & 3);
	gm_ring_destroy(r);
}

static void test_reclaim_reissues_only_that_pid(void **state)
{
	(void)state;
	struct gm_ring *r;
	uint64_t t;
	uint32_t crash;
	assert_int_equal(gm_ring_create(&r, 4, 1, 8, 0, 100), 0);
	assert_int_equal(gm_ring_claim(r, 111, &t), 0);
	atomic_store(&gm_ring_ctl(r, 0)->cur_sample, 77);
	assert_int_equal(gm_ring_claim(r, 222, &t), 1);
	assert_int_equal(gm_ring_reclaim(r, 333, &crash), 0);
	assert_int_equal(crash, UINT32_MAX);
	assert_int_equal(gm_ring_reclaim(r, 111, &crash), 1);
	assert_int_equal(crash, 77);
	assert_int_equal(gm_ring_ctl(r, 0)->attempts, 1);
	/* task 0 is the lowest free task again */
	assert_int_equal(gm_ring_claim(r, 222, &t), 0);
	assert_int_equal(t, 0);
	gm_ring_destroy(r);
}

static void test_end_of_tasks(void **state)
{
	(void)state;
	struct gm_ring *r;
	uint64_t t;
	assert_int_equal(gm_ring_create(&r, 8, 1, 8, 0, 3), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(gm_ring_claim(r, 5, &t), i);
	assert_int_equal(gm_ring_claim(r, 5, &t), -EAGAIN);
	for (uint32_t i = 0; i < 3; i++) {
		gm_ring_publish(r, i);
		gm_ring_release(r, i);
	}
	assert_int_equal(gm_ring_claim(r, 5, &t), -ENODATA);
	gm_ring_destroy(r);
}

static void test_quarantine_and_stop(void **state)
{
	(void)state;
	struct gm_ring *r;
	uint64_t t;
	assert_int_equal(gm_ring_create(&r, 4, 1, 8, 0, 100), 0);
	assert_false(gm_ring_quarantined(r, 9));
	gm_ring_quarantine(r, 9);
	gm_ring_quarantine(r, 9);
	assert_true(gm_ring_quarantined(r, 9));
	assert_int_equal(atomic_load(&gm_ring_hdr(r)->quarantine_n), 1);
	gm_ring_stop(r);
	assert_int_equal(gm_ring_claim(r, 5, &t), -ENODATA);
	gm_ring_destroy(r);
}

/* A child process produces every task; the parent consumes in order. */
static void test_two_processes(void **state)
{
	(void)state;
	struct gm_ring *r;
	const uint64_t n = 200;
	assert_int_equal(gm_ring_create(&r, 4, 1, 8, 0, n), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		for (;;) {
			uint32_t seq = atomic_load(&gm_ring_hdr(r)->work_seq);
			uint64_t t;
			int s = gm_ring_claim(r, (uint32_t)getpid(), &t);
			if (s == -ENODATA)
				_exit(0);
			if (s < 0) {
				gm_ring_wait_work(r, seq, 100);
				continue;
			}
			memcpy(gm_ring_data(r, (uint32_t)s), &t, sizeof(t));
			gm_ring_publish(r, (uint32_t)s);
		}
	}
	for (uint64_t t = 0; t < n; t++) {
		assert_int_equal(gm_ring_wait_ready(r, t, 5000), 0);
		uint64_t got;
		memcpy(&got, gm_ring_data(r, (uint32_t)(t & 3)), sizeof(got));
		assert_int_equal(got, t);
		gm_ring_release(r, (uint32_t)(t & 3));
	}
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	gm_ring_destroy(r);
}

/* The size of a ring's region is fixed for good, and attach refuses one that is not. */
static void test_ring_is_sealed_and_unsealed_rings_are_refused(void **state)
{
	(void)state;
	struct gm_ring *r, *a;
	assert_int_equal(gm_ring_create(&r, 4, 2, 64, 0, 100), 0);
	int fd = gm_ring_fd(r);
	int seals = fcntl(fd, F_GET_SEALS);
	assert_true(seals >= 0);
	assert_int_equal(seals & (F_SEAL_SHRINK | F_SEAL_GROW), F_SEAL_SHRINK | F_SEAL_GROW);
	size_t bytes = gm_ring_bytes(r);
	assert_int_equal(ftruncate(fd, 4096), -1); /* the SIGBUS an agent could cause */
	assert_int_equal(errno, EPERM);
	assert_int_equal(ftruncate(fd, (off_t)bytes * 2), -1);

	/* the same header and size in a memfd that is not sealed */
	int mfd = memfd_create("unsealed", MFD_ALLOW_SEALING);
	assert_true(mfd >= 0);
	assert_int_equal(ftruncate(mfd, (off_t)bytes), 0);
	assert_int_equal(pwrite(mfd, gm_ring_base(r), 4096, 0), 4096);
	assert_int_equal(gm_ring_attach(&a, mfd), -EPERM);
	assert_null(a);
	assert_int_equal(fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
	assert_int_equal(gm_ring_attach(&a, mfd), -EPERM); /* growing is not enough either */
	assert_int_equal(fcntl(mfd, F_ADD_SEALS, F_SEAL_GROW), 0);
	assert_int_equal(gm_ring_attach(&a, mfd), 0); /* now it is a ring as created */
	gm_ring_destroy(a);
	close(mfd);
	/* a memfd that cannot be sealed at all */
	mfd = memfd_create("no-sealing", 0);
	assert_int_equal(ftruncate(mfd, (off_t)bytes), 0);
	assert_int_equal(pwrite(mfd, gm_ring_base(r), 4096, 0), 4096);
	assert_int_equal(gm_ring_attach(&a, mfd), -EPERM);
	close(mfd);
	gm_ring_destroy(r);
}

static void test_size_and_parse_bytes(void **state)
{
	(void)state;
	uint64_t v;
	/* header page + 4 x (control page, labels/ids/bits page, 2 x 64 bytes -> 1 page) */
	assert_int_equal(gm_ring_size(4, 2, 64), 4096 + 4 * 3 * 4096);
	assert_int_equal(gm_ring_size(3, 2, 64), 0);
	assert_int_equal(gm_ring_size(4, 0, 64), 0);
	assert_int_equal(gm_parse_bytes("123", &v), 0);
	assert_int_equal(v, 123);
	assert_int_equal(gm_parse_bytes("64M", &v), 0);
	assert_int_equal(v, 64ull << 20);
	assert_int_equal(gm_parse_bytes("2GiB", &v), 0);
	assert_int_equal(v, 2ull << 30);
	assert_int_equal(gm_parse_bytes("1t", &v), 0);
	assert_int_equal(v, 1ull << 40);
	assert_int_equal(gm_parse_bytes("", &v), -EINVAL);
	assert_int_equal(gm_parse_bytes("-1G", &v), -EINVAL);
	assert_int_equal(gm_parse_bytes("12Q", &v), -EINVAL);
	assert_int_equal(gm_parse_bytes("99999999999T", &v), -EINVAL);
}

/* A ring larger than the memory left is refused before anything is allocated. */
static void test_ring_larger_than_the_limit_is_refused(void **state)
{
	(void)state;
	struct gm_ring *r;
	char err[1024];
	assert_int_equal(setenv("GM_MEM_LIMIT", "1M", 1), 0);
	assert_int_equal(gm_ring_create(&r, 4, 8, 65536, 0, 100), -ENOMEM);
	assert_null(r);
	assert_int_equal(gm_ring_admit(4, 8, 65536, err, sizeof(err)), -ENOMEM);
	assert_non_null(strstr(err, "4 slots x 8 samples x 65536 bytes needs 2.0 MiB"));
	assert_non_null(strstr(err, "GM_MEM_LIMIT=1M"));
	assert_non_null(strstr(err, "--batch, --size, --slots"));
	assert_true(gm_host_mem_total() <= (1u << 20));
	/* one that fits is made */
	assert_int_equal(gm_ring_admit(4, 1, 64, err, sizeof(err)), 0);
	assert_int_equal(gm_ring_create(&r, 4, 1, 64, 0, 100), 0);
	gm_ring_destroy(r);
	assert_int_equal(unsetenv("GM_MEM_LIMIT"), 0);
	assert_int_equal(gm_ring_admit(4, 8, 65536, err, sizeof(err)), 0);
}

/* A GM_MEM_LIMIT that is not a size (what `node --mem` refuses) is refused by the
 * admission naming the variable and its value, not ignored; unset or empty is no cap. */
static void test_mem_limit_that_is_not_a_size_is_refused(void **state)
{
	(void)state;
	static const char *bad[] = {"-1", "abc", "1e30", "99999999999T", "1M2"};
	struct gm_ring *r;
	char err[512], want[64];
	uint64_t v;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(setenv("GM_MEM_LIMIT", bad[i], 1), 0);
		assert_int_equal(gm_host_mem_limit(&v, err, sizeof(err)), -EINVAL);
		assert_int_equal(gm_ring_admit(4, 1, 64, err, sizeof(err)), -EINVAL);
		snprintf(want, sizeof(want), "GM_MEM_LIMIT='%s' is not a size", bad[i]);
		assert_non_null(strstr(err, want));
		assert_non_null(strstr(err, "like 512M or 8G"));
		assert_int_equal(gm_ring_create(&r, 4, 1, 64, 0, 100), -EINVAL);
		assert_null(r);
	}
	assert_int_equal(setenv("GM_MEM_LIMIT", "64M", 1), 0);
	assert_int_equal(gm_host_mem_limit(&v, err, sizeof(err)), 0);
	assert_int_equal(v, 64u << 20);
	assert_int_equal(setenv("GM_MEM_LIMIT", "", 1), 0);
	assert_int_equal(gm_host_mem_limit(&v, err, sizeof(err)), 0);
	assert_true(v == UINT64_MAX);
	assert_int_equal(unsetenv("GM_MEM_LIMIT"), 0);
	assert_int_equal(gm_ring_admit(4, 1, 64, err, sizeof(err)), 0);
}

/* In a child moved into a new 32 MiB memory cgroup (v1) under this process's own:
 * a 64 MiB ring is refused, naming the cgroup and its limit; the machine's OOM
 * killer is never involved because nothing is allocated. Exit status = result. */
static int admit_in_cgroup(const char *cg)
{
	char path[512], err[1024];
	struct gm_ring *r;
	FILE *f;

	snprintf(path, sizeof(path), "%s/cgroup.procs", cg);
	f = fopen(path, "w");
	if (!f || fprintf(f, "%d\n", (int)getpid()) < 0 || fclose(f))
		return 2;
	if (gm_ring_admit(16, 64, 65536, err, sizeof(err)) != -ENOMEM)
		return 3;
	if (!strstr(err, "needs 64.1 MiB") || !strstr(err, "memory.limit_in_bytes 32.0 MiB") ||
	    !strstr(err, "/gm-test-ring-"))
		return 4;
	if (gm_ring_create(&r, 16, 64, 65536, 0, 100) != -ENOMEM)
		return 5;
	return gm_ring_admit(4, 1, 64, err, sizeof(err)) == 0 ? 0 : 6;
}

static void test_ring_larger_than_the_cgroup_is_refused(void **state)
{
	(void)state;
	char own[512] = "", line[1024], cg[768];
	FILE *f = fopen("/proc/self/cgroup", "r");
	struct stat st;

	if (geteuid() != 0 || !f)
		skip(); /* needs root to make a memory cgroup */
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%*d:memory:%511s", own) == 1)
			break;
	fclose(f);
	snprintf(cg, sizeof(cg), "/sys/fs/cgroup/memory%s", strcmp(own, "/") ? own : "");
	if (!own[0] || stat(cg, &st) < 0)
		skip(); /* no cgroup v1 memory hierarchy here */
	snprintf(cg + strlen(cg), sizeof(cg) - strlen(cg), "/gm-test-ring-%d", (int)getpid());
	if (mkdir(cg, 0755) < 0)
		skip(); /* cannot make a child cgroup (read-only, delegated elsewhere) */
	char lim[800];
	snprintf(lim, sizeof(lim), "%s/memory.limit_in_bytes", cg);
	f = fopen(lim, "w");
	int ok = f && fprintf(f, "%d\n", 32 << 20) > 0;
	if (f)
		ok = !fclose(f) && ok;
	pid_t pid = ok ? fork() : -1;
	if (pid == 0)
		_exit(admit_in_cgroup(cg));
	int status = -1;
	if (pid > 0)
		waitpid(pid, &status, 0);
	rmdir(cg); /* the child has exited: the cgroup is empty */
	assert_true(ok);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_attach_validates_header),
	    cmocka_unit_test(test_claim_order_backpressure_release),
	    cmocka_unit_test(test_create_validates),
	    cmocka_unit_test(test_end_of_tasks),
	    cmocka_unit_test(test_quarantine_and_stop),
	    cmocka_unit_test(test_reclaim_reissues_only_that_pid),
	    cmocka_unit_test(test_ring_is_sealed_and_unsealed_rings_are_refused),
	    cmocka_unit_test(test_ring_larger_than_the_cgroup_is_refused),
	    cmocka_unit_test(test_ring_larger_than_the_limit_is_refused),
	    cmocka_unit_test(test_mem_limit_that_is_not_a_size_is_refused),
	    cmocka_unit_test(test_size_and_parse_bytes),
	    cmocka_unit_test(test_sparse_ring_costs_only_the_pages_written),
	    cmocka_unit_test(test_two_processes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
