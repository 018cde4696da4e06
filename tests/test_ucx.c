/*
 * test_ucx.c - RMA puts into another process's memfd region over UCX (ucx.h),
 * two processes over TCP loopback (UCX_TLS=tcp): the bytes a parent puts land
 * in the child's mapping; a put outside the registered range is refused by
 * gm_ucx_put before UCX sees it (the bytes beside the region stay zero); a put
 * to a killed peer fails within its deadline, one to a stopped peer ends at
 * its deadline with the endpoint closed; a connect to a closed port and
 * a corrupt region blob are refused.
 *
 * The child (forked before either side creates UCX) maps a memfd, registers
 * the first REGION bytes of it, listens on 127.0.0.1:0 and sends its port and
 * region blob through a pipe; it progresses its worker until the parent says
 * "check" on a second pipe, then checks the bytes and exits 0 or the number
 * of the failed check. Skipped without UCX (make UCX=0 or no libucx-dev).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifdef GM_HAVE_UCX
#include "ucx/ucx.h"

#define MAPPING (1u << 20)   /* the child's memfd mapping */
#define REGION	(512u << 10) /* the part of it registered for puts */
#define PUT_OFF 4096u
#define PUT_LEN (64u << 10)
#define TMO	5000 /* ms: any single wait in these tests */

struct peer {
	pid_t pid;
	int from_child; /* port, blob length, blob */
	int to_child;	/* one byte: check now */
	uint16_t port;
	unsigned char blob[4096];
	size_t blob_len;
};

static uint8_t pattern(size_t i)
{
	return (uint8_t)(i * 131u + 7u);
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Read exactly n bytes within timeout_ms. 0 or -1. */
static int read_full(int fd, void *buf, size_t n, int timeout_ms)
{
	double end = now_ms() + timeout_ms;
	size_t got = 0;
	while (got < n) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int left = (int)(end - now_ms());
		if (left <= 0 || poll(&p, 1, left) <= 0)
			return -1;
		ssize_t r = read(fd, (char *)buf + got, n - got);
		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return 0;
}

/* The child: serve a region until told to check it. Exit code = failed step. */
static int child_main(int out_fd, int in_fd)
{
	int fd = memfd_create("gm-ucx-test", 0);
	if (fd < 0 || ftruncate(fd, MAPPING) != 0)
		return 10;
	uint8_t *m = mmap(NULL, MAPPING, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		return 11;
	struct gm_ucx *u;
	char err[256];
	if (gm_ucx_create(&u, err, sizeof(err)) != 0) {
		fprintf(stderr, "child: %s\n", err);
		return 12;
	}
	uint16_t port;
	struct gm_ucx_region *r;
	void *blob;
	size_t blob_len;
	if (gm_ucx_listen(u, "127.0.0.1:0", &port) != 0 || gm_ucx_mem_map(u, m, REGION, &r) != 0 ||
	    gm_ucx_region_pack(r, &blob, &blob_len) != 0) {
		fprintf(stderr, "child: %s\n", gm_ucx_errmsg(u));
		return 13;
	}
	uint32_t bl = (uint32_t)blob_len;
	if (write(out_fd, &port, sizeof(port)) != sizeof(port) ||
	    write(out_fd, &bl, sizeof(bl)) != sizeof(bl) ||
	    write(out_fd, blob, blob_len) != (ssize_t)blob_len)
		return 14;
	free(blob);
	struct gm_ucx_ep *ep;
	if (gm_ucx_accept(u, &ep, TMO) != 0) {
		fprintf(stderr, "child: %s\n", gm_ucx_errmsg(u));
		return 15;
	}
	/* Progress (the target of a TCP put must) until the parent says check. */
	double end = now_ms() + 4 * TMO;
	for (;;) {
		struct pollfd p = {.fd = in_fd, .events = POLLIN};
		for (int i = 0; i < 64; i++)
			gm_ucx_progress(u);
		if (poll(&p, 1, 0) == 1)
			break;
		if (now_ms() > end)
			return 16;
	}
	for (size_t i = 0; i < MAPPING; i++) {
		bool in = i >= PUT_OFF && i < PUT_OFF + PUT_LEN;
		if (m[i] != (in ? pattern(i - PUT_OFF) : 0)) {
			fprintf(stderr, "child: byte %zu is %u\n", i, m[i]);
			return 17;
		}
	}
	gm_ucx_ep_close(ep, 1000);
	gm_ucx_mem_unmap(r);
	gm_ucx_destroy(u);
	return 0;
}

static pid_t live_child; /* killed by teardown when a test fails midway */

static void peer_start(struct peer *pe)
{
	int a[2], b[2];
	assert_int_equal(pipe(a), 0);
	assert_int_equal(pipe(b), 0);
	pe->pid = fork();
	assert_true(pe->pid >= 0);
	if (pe->pid == 0) {
		close(a[0]);
		close(b[1]);
		_exit(child_main(a[1], b[0]));
	}
	live_child = pe->pid;
	close(a[1]);
	close(b[0]);
	pe->from_child = a[0];
	pe->to_child = b[1];
	uint32_t bl;
	assert_int_equal(read_full(pe->from_child, &pe->port, sizeof(pe->port), TMO), 0);
	assert_int_equal(read_full(pe->from_child, &bl, sizeof(bl), TMO), 0);
	assert_in_range(bl, 1, sizeof(pe->blob));
	assert_int_equal(read_full(pe->from_child, pe->blob, bl, TMO), 0);
	pe->blob_len = bl;
}

/* Tell the child to check and return its exit status (-1 if it did not end). */
static int peer_finish(struct peer *pe)
{
	char c = 'c';
	int st = -1;
	if (write(pe->to_child, &c, 1) != 1)
		return -1;
	for (double end = now_ms() + 2 * TMO; now_ms() < end; usleep(10000)) {
		if (waitpid(pe->pid, &st, WNOHANG) == pe->pid) {
			live_child = 0;
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		}
	}
	return -1; /* teardown_child kills it */
}

static void connect_peer(struct peer *pe, struct gm_ucx **u, struct gm_ucx_ep **ep,
			 struct gm_ucx_rkey **k)
{
	char err[256], addr[32];
	int rc = gm_ucx_create(u, err, sizeof(err));
	if (rc)
		fail_msg("%s", err);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", pe->port);
	rc = gm_ucx_connect(*u, addr, ep, TMO);
	if (rc)
		fail_msg("%s", gm_ucx_errmsg(*u));
	rc = gm_ucx_rkey_unpack(*ep, pe->blob, pe->blob_len, k);
	if (rc)
		fail_msg("%s", gm_ucx_errmsg(*u));
	assert_int_equal(gm_ucx_rkey_length(*k), REGION);
}

/* Undo connect_peer (the endpoint closed with a 1 s deadline). */
static void disconnect_peer(struct gm_ucx *u, struct gm_ucx_ep *ep, struct gm_ucx_rkey *k)
{
	gm_ucx_rkey_destroy(k);
	gm_ucx_ep_close(ep, 1000);
	gm_ucx_destroy(u);
}

static void close_pipes(struct peer *pe)
{
	close(pe->from_child);
	close(pe->to_child);
}
#endif

static int setup(void **state)
{
	(void)state;
	setenv("UCX_TLS", "tcp", 1);
	return 0;
}

static void test_put_lands_in_peer_memfd(void **state)
{
	(void)state;
#ifndef GM_HAVE_UCX
	skip();
#else
	struct peer pe;
	struct gm_ucx *u;
	struct gm_ucx_ep *ep;
	struct gm_ucx_rkey *k;
	peer_start(&pe);
	connect_peer(&pe, &u, &ep, &k);
	uint8_t *src = malloc(PUT_LEN);
	assert_non_null(src);
	for (size_t i = 0; i < PUT_LEN; i++)
		src[i] = pattern(i);
	/* In two halves: one local-completion put, flushed by the second. */
	assert_int_equal(gm_ucx_put(ep, k, PUT_OFF, src, PUT_LEN / 2, GM_UCX_PUT_LOCAL, TMO), 0);
	int rc = gm_ucx_put(ep, k, PUT_OFF + PUT_LEN / 2, src + PUT_LEN / 2, PUT_LEN / 2, 0, TMO);
	if (rc)
		fail_msg("%s", gm_ucx_errmsg(u));
	assert_true(gm_ucx_ep_alive(ep));
	free(src);
	disconnect_peer(u, ep, k);
	assert_int_equal(peer_finish(&pe), 0);
	close_pipes(&pe);
#endif
}

static void test_put_outside_region_refused(void **state)
{
	(void)state;
#ifndef GM_HAVE_UCX
	skip();
#else
	struct peer pe;
	struct gm_ucx *u;
	struct gm_ucx_ep *ep;
	struct gm_ucx_rkey *k;
	peer_start(&pe);
	connect_peer(&pe, &u, &ep, &k);
	uint8_t junk[64];
	memset(junk, 0xee, sizeof(junk));
	/* Straddles the end of the region: UCX over TCP would write the bytes
	 * beside it (mapped, not registered); the child checks they stay 0. */
	assert_int_equal(gm_ucx_put(ep, k, REGION - 16, junk, sizeof(junk), 0, TMO), -ERANGE);
	assert_non_null(strstr(gm_ucx_errmsg(u), "outside the peer's region"));
	assert_int_equal(gm_ucx_put(ep, k, REGION, junk, 1, 0, TMO), -ERANGE);
	assert_int_equal(gm_ucx_put(ep, k, UINT64_MAX - 8, junk, 16, 0, TMO), -ERANGE);
	assert_true(gm_ucx_ep_alive(ep)); /* refused, not failed */
	/* The same endpoint still works: the pattern the child expects. */
	uint8_t *src = malloc(PUT_LEN);
	assert_non_null(src);
	for (size_t i = 0; i < PUT_LEN; i++)
		src[i] = pattern(i);
	assert_int_equal(gm_ucx_put(ep, k, PUT_OFF, src, PUT_LEN, 0, TMO), 0);
	free(src);
	disconnect_peer(u, ep, k);
	assert_int_equal(peer_finish(&pe), 0);
	close_pipes(&pe);
#endif
}

static void test_put_to_dead_peer_fails_in_deadline(void **state)
{
	(void)state;
#ifndef GM_HAVE_UCX
	skip();
#else
	struct peer pe;
	struct gm_ucx *u;
	struct gm_ucx_ep *ep;
	struct gm_ucx_rkey *k;
	peer_start(&pe);
	connect_peer(&pe, &u, &ep, &k);
	uint8_t buf[4096] = {1};
	assert_int_equal(gm_ucx_put(ep, k, 0, buf, sizeof(buf), 0, TMO), 0);
	kill(pe.pid, SIGKILL);
	int st;
	assert_int_equal(waitpid(pe.pid, &st, 0), pe.pid);
	live_child = 0;
	int tmo = 2000, rc = 0;
	double t0 = now_ms();
	/* A put may complete locally into the socket before the reset is seen;
	 * the delivered ones (flag 0) must fail, each within its deadline. */
	for (int i = 0; i < 4 && rc == 0; i++)
		rc = gm_ucx_put(ep, k, 0, buf, sizeof(buf), 0, tmo);
	double dt = now_ms() - t0;
	print_message("put to a killed peer: %d after %.0f ms: %s\n", rc, dt, gm_ucx_errmsg(u));
	assert_true(rc < 0);
	assert_true(rc == -ECONNRESET || rc == -ETIMEDOUT || rc == -EHOSTUNREACH);
	assert_true(dt < 4 * tmo + 500);
	assert_false(gm_ucx_ep_alive(ep));
	assert_non_null(strstr(gm_ucx_errmsg(u), "gm_ucx_put"));
	/* Dead for good: the next put fails at once, without UCX. */
	t0 = now_ms();
	assert_int_equal(gm_ucx_put(ep, k, 0, buf, 8, 0, tmo), rc == -ETIMEDOUT ? -ETIMEDOUT : rc);
	assert_true(now_ms() - t0 < tmo); /* not a wait for its deadline (no timing figure) */
	assert_non_null(strstr(gm_ucx_errmsg(u), "endpoint dead"));
	disconnect_peer(u, ep, k);
	close_pipes(&pe);
#endif
}

/* A peer that stops progressing (SIGSTOP): the delivered put cannot complete,
 * so it ends at its deadline, the endpoint closed by force (src free again). */
static void test_put_to_stopped_peer_times_out(void **state)
{
	(void)state;
#ifndef GM_HAVE_UCX
	skip();
#else
	struct peer pe;
	struct gm_ucx *u;
	struct gm_ucx_ep *ep;
	struct gm_ucx_rkey *k;
	peer_start(&pe);
	connect_peer(&pe, &u, &ep, &k);
	uint8_t *src = calloc(1, PUT_LEN);
	assert_non_null(src);
	assert_int_equal(gm_ucx_put(ep, k, 0, src, PUT_LEN, 0, TMO), 0);
	kill(pe.pid, SIGSTOP);
	int tmo = 500;
	double t0 = now_ms();
	int rc = gm_ucx_put(ep, k, 0, src, PUT_LEN, 0, tmo);
	double dt = now_ms() - t0;
	print_message("put to a stopped peer: %d after %.0f ms: %s\n", rc, dt, gm_ucx_errmsg(u));
	assert_int_equal(rc, -ETIMEDOUT);
	assert_in_range((long)dt, tmo - 5, tmo + 1500);
	assert_false(gm_ucx_ep_alive(ep));
	assert_non_null(strstr(gm_ucx_errmsg(u), "deadline passed"));
	memset(src, 0xab, PUT_LEN); /* ours again: UCX let go of it */
	free(src);
	disconnect_peer(u, ep, k);
	kill(pe.pid, SIGKILL);
	waitpid(pe.pid, NULL, 0);
	live_child = 0;
	close_pipes(&pe);
#endif
}

static void test_connect_refused_and_bad_blob(void **state)
{
	(void)state;
#ifndef GM_HAVE_UCX
	skip();
#else
	struct peer pe;
	struct gm_ucx *u;
	struct gm_ucx_ep *ep, *bad;
	struct gm_ucx_rkey *k;
	peer_start(&pe);
	connect_peer(&pe, &u, &ep, &k);
	/* A corrupt blob is refused before UCX sees it. */
	struct gm_ucx_rkey *k2;
	unsigned char b[4096];
	memcpy(b, pe.blob, pe.blob_len);
	b[0] ^= 0xff;
	assert_int_equal(gm_ucx_rkey_unpack(ep, b, pe.blob_len, &k2), -EBADMSG);
	assert_null(k2);
	assert_int_equal(gm_ucx_rkey_unpack(ep, pe.blob, pe.blob_len - 1, &k2), -EBADMSG);
	assert_int_equal(gm_ucx_rkey_unpack(ep, pe.blob, 8, &k2), -EBADMSG);
	/* Malformed address, and a port nobody listens on (within the deadline). */
	assert_int_equal(gm_ucx_connect(u, "127.0.0.1", &bad, TMO), -EINVAL);
	assert_non_null(strstr(gm_ucx_errmsg(u), "ADDR:PORT"));
	double t0 = now_ms();
	int rc = gm_ucx_connect(u, "127.0.0.1:1", &bad, 2000);
	print_message("connect to a closed port: %d after %.0f ms: %s\n", rc, now_ms() - t0,
		      gm_ucx_errmsg(u));
	assert_true(rc < 0);
	assert_null(bad);
	assert_true(now_ms() - t0 < 2500);
	assert_non_null(strstr(gm_ucx_errmsg(u), "127.0.0.1:1"));
	assert_true(gm_ucx_ep_alive(ep)); /* the other endpoint is untouched */
	uint8_t *src = malloc(PUT_LEN);
	assert_non_null(src);
	for (size_t i = 0; i < PUT_LEN; i++)
		src[i] = pattern(i);
	assert_int_equal(gm_ucx_put(ep, k, PUT_OFF, src, PUT_LEN, 0, TMO), 0);
	free(src);
	disconnect_peer(u, ep, k);
	assert_int_equal(peer_finish(&pe), 0);
	close_pipes(&pe);
#endif
}

static int teardown_child(void **state)
{
	(void)state;
#ifdef GM_HAVE_UCX
	if (live_child > 0) {
		kill(live_child, SIGKILL);
		waitpid(live_child, NULL, 0);
		live_child = 0;
	}
#endif
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_connect_refused_and_bad_blob, teardown_child),
	    cmocka_unit_test_teardown(test_put_lands_in_peer_memfd, teardown_child),
	    cmocka_unit_test_teardown(test_put_outside_region_refused, teardown_child),
	    cmocka_unit_test_teardown(test_put_to_dead_peer_fails_in_deadline, teardown_child),
	    cmocka_unit_test_teardown(test_put_to_stopped_peer_times_out, teardown_child),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
