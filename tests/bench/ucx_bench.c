/*
 * ucx_bench.c - the remote cost of writing into a peer's ring over UCX
 * (ucx.h): put throughput into a forked target's registered memfd for 64 KiB,
 * 1 MiB and a 9.6 MB batch (64 images of 224x224x3), streamed (local
 * completion, one flush at the end) and delivered one by one (put + flush),
 * each with memcpy of the same sizes into a local memfd mapping in the same
 * run and the ratio; then the round trip of an 8-byte put + flush (us).
 * Transports from the environment (bench-ucx.sh sets UCX_TLS=tcp).
 *
 *   ucx_bench [--mb TOTAL_MB_PER_SIZE]
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef GM_HAVE_UCX
int main(void)
{
	printf("ucx_bench: skipped (built without UCX: install libucx-dev, make UCX=1)\n");
	return 0;
}
#else
#include "ucx/ucx.h"

#define TARGET (16u << 20)
#define TMO    10000 /* ms */
#define RTT_N  2000

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *memfd_map(size_t len)
{
	int fd = memfd_create("gm-ucx-bench", 0);
	if (fd < 0 || ftruncate(fd, (off_t)len) != 0)
		return NULL;
	void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	return m == MAP_FAILED ? NULL : m;
}

/* The target: register a memfd, serve puts until the parent closes the pipe. */
static int target_main(int out_fd, int in_fd)
{
	void *m = memfd_map(TARGET);
	struct gm_ucx *u;
	char err[256];
	if (!m || gm_ucx_create(&u, err, sizeof(err)) != 0) {
		fprintf(stderr, "ucx_bench target: %s\n", m ? err : "memfd_map failed");
		return 1;
	}
	uint16_t port;
	struct gm_ucx_region *r;
	struct gm_ucx_ep *ep;
	void *blob;
	size_t bl;
	if (gm_ucx_listen(u, "127.0.0.1:0", &port) || gm_ucx_mem_map(u, m, TARGET, &r) ||
	    gm_ucx_region_pack(r, &blob, &bl)) {
		fprintf(stderr, "ucx_bench target: %s\n", gm_ucx_errmsg(u));
		return 1;
	}
	uint32_t l = (uint32_t)bl;
	if (write(out_fd, &port, 2) != 2 || write(out_fd, &l, 4) != 4 ||
	    write(out_fd, blob, bl) != (ssize_t)bl)
		return 1;
	free(blob);
	if (gm_ucx_accept(u, &ep, TMO)) {
		fprintf(stderr, "ucx_bench target: %s\n", gm_ucx_errmsg(u));
		return 1;
	}
	for (;;) { /* until the parent is done (pipe closed) */
		struct pollfd p = {.fd = in_fd, .events = POLLIN};
		for (int i = 0; i < 256; i++)
			gm_ucx_progress(u);
		if (poll(&p, 1, 0) == 1)
			break;
	}
	gm_ucx_ep_close(ep, 1000);
	gm_ucx_mem_unmap(r);
	gm_ucx_destroy(u);
	return 0;
}

static int read_full(int fd, void *buf, size_t n)
{
	size_t got = 0;
	while (got < n) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, TMO) <= 0)
			return -1;
		ssize_t r = read(fd, (char *)buf + got, n - got);
		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return 0;
}

int main(int argc, char **argv)
{
	double total_mb = 192;
	if (argc == 3 && strcmp(argv[1], "--mb") == 0)
		total_mb = atof(argv[2]);
	int a[2], b[2];
	if (pipe(a) || pipe(b))
		return 1;
	pid_t pid = fork();
	if (pid == 0) {
		close(a[0]);
		close(b[1]);
		_exit(target_main(a[1], b[0]));
	}
	close(a[1]);
	close(b[0]);
	int rc = 1;
	uint16_t port;
	uint32_t bl;
	unsigned char blob[4096];
	struct gm_ucx *u = NULL;
	struct gm_ucx_ep *ep = NULL;
	struct gm_ucx_rkey *k = NULL;
	char err[256], addr[32];
	if (read_full(a[0], &port, 2) || read_full(a[0], &bl, 4) || bl > sizeof(blob) ||
	    read_full(a[0], blob, bl)) {
		fprintf(stderr, "ucx_bench: the target did not start\n");
		goto out;
	}
	if (gm_ucx_create(&u, err, sizeof(err))) {
		fprintf(stderr, "ucx_bench: %s\n", err);
		goto out;
	}
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);
	if (gm_ucx_connect(u, addr, &ep, TMO) || gm_ucx_rkey_unpack(ep, blob, bl, &k))
		goto out_msg;

	const size_t sizes[] = {64u << 10, 1u << 20, 64u * 224 * 224 * 3};
	uint8_t *src = malloc(TARGET), *local = memfd_map(TARGET);
	if (!src || !local)
		goto out;
	for (size_t i = 0; i < TARGET; i++)
		src[i] = (uint8_t)(i * 131u + 7u);
	const char *tls = getenv("UCX_TLS");
	printf("ucx_bench: UCX_TLS=%s, target a forked process over 127.0.0.1, %.0f MB per size\n",
	       tls ? tls : "(UCX default)", total_mb);
	printf("%10s %14s %14s %14s %10s %10s\n", "bytes", "put MB/s", "put+flush MB/s",
	       "memcpy MB/s", "put/cpy", "p+f/cpy");
	for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
		size_t s = sizes[si];
		int n = (int)(total_mb * 1e6 / (double)s);
		if (n < 8)
			n = 8;
		/* Warm-up (registration caches, TCP windows). */
		if (gm_ucx_put(ep, k, 0, src, s, 0, TMO))
			goto out_msg;
		double t0 = now_s();
		for (int i = 0; i < n; i++)
			if (gm_ucx_put(ep, k, 0, src, s, GM_UCX_PUT_LOCAL, TMO))
				goto out_msg;
		if (gm_ucx_flush(ep, TMO))
			goto out_msg;
		double t_stream = now_s() - t0;
		t0 = now_s();
		for (int i = 0; i < n; i++)
			if (gm_ucx_put(ep, k, 0, src, s, 0, TMO))
				goto out_msg;
		double t_deliv = now_s() - t0;
		memcpy(local, src, s); /* warm-up */
		t0 = now_s();
		for (int i = 0; i < n; i++) {
			memcpy(local, src, s);
			__asm__ volatile("" ::"r"(local) : "memory"); /* keep every copy */
		}
		double t_cpy = now_s() - t0;
		double mb = (double)s * n / 1e6;
		printf("%10zu %14.0f %14.0f %14.0f %10.3f %10.3f\n", s, mb / t_stream, mb / t_deliv,
		       mb / t_cpy, t_cpy / t_stream, t_cpy / t_deliv);
	}
	/* Round trip: an 8-byte put delivered (put + flush), one at a time. */
	for (int i = 0; i < 100; i++)
		if (gm_ucx_put(ep, k, 0, src, 8, 0, TMO))
			goto out_msg;
	double t0 = now_s();
	for (int i = 0; i < RTT_N; i++)
		if (gm_ucx_put(ep, k, 0, src, 8, 0, TMO))
			goto out_msg;
	double rtt = (now_s() - t0) / RTT_N * 1e6;
	t0 = now_s();
	for (int i = 0; i < RTT_N; i++) {
		memcpy(local, src, 8);
		__asm__ volatile("" ::"r"(local) : "memory");
	}
	double cpy8 = (now_s() - t0) / RTT_N * 1e6;
	printf("8-byte put+flush round trip: %.1f us (memcpy of 8 bytes: %.3f us, ratio %.0fx)\n",
	       rtt, cpy8, rtt / cpy8);
	free(src);
	munmap(local, TARGET);
	rc = 0;
	goto out;
out_msg:
	fprintf(stderr, "ucx_bench: %s\n", gm_ucx_errmsg(u));
out:
	gm_ucx_rkey_destroy(k);
	gm_ucx_ep_close(ep, 1000);
	gm_ucx_destroy(u);
	close(b[1]); /* the target stops */
	for (int i = 0; i < 300; i++) {
		if (waitpid(pid, NULL, WNOHANG) == pid)
			return rc;
		usleep(10000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return rc;
}
#endif
