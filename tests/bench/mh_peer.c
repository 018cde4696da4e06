/*
 * mh_peer.c - the two ends of a connection between two "hosts" of the
 * multi-host harness (tests/multihost.sh), one process in each: a TCP probe
 * (a listener that answers every connection with "ok\n", and a connect with
 * a deadline, the harness's ping) and UCX RMA puts from one host into memory
 * registered by the other (ucx.h), with the region's blob handed over in a
 * file (both hosts share the file system, as on a cluster).
 *
 *   mh_peer tcp-listen ADDR PORT SECONDS     answer connections for SECONDS
 *   mh_peer tcp-connect ADDR PORT MS         exit 0 iff "ok\n" came within MS
 *   mh_peer ucx-serve ADDR BYTES FILE SECONDS  register BYTES, listen on ADDR,
 *           write "PORT\n" + blob to FILE, wait for the bytes, check them
 *   mh_peer ucx-put ADDR BYTES FILE SECONDS  read FILE, connect, put BYTES
 *
 * The last 8 bytes of the region are a marker put after a flush of the data,
 * so the server knows every byte before it has landed; it then checks the
 * pattern byte by byte. Transports come from UCX_* (UCX_TLS=tcp,
 * UCX_NET_DEVICES=gm0 in the harness). Every wait has a deadline. It lives in
 * tests/bench/ so the build makes it with the benchmarks (it is not one).
 * Without UCX the ucx-* modes say so and exit 77.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int sockaddr_of(struct sockaddr_in *sa, const char *addr, const char *port)
{
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons((uint16_t)atoi(port));
	if (inet_pton(AF_INET, addr, &sa->sin_addr) != 1) {
		fprintf(stderr, "mh_peer: bad IPv4 address '%s'\n", addr);
		return -1;
	}
	return 0;
}

static int tcp_listen(const char *addr, const char *port, double seconds)
{
	struct sockaddr_in sa;
	int one = 1, s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0 || sockaddr_of(&sa, addr, port))
		return 1;
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(s, (struct sockaddr *)&sa, sizeof(sa)) || listen(s, 16)) {
		fprintf(stderr, "mh_peer tcp-listen %s:%s: %s\n", addr, port, strerror(errno));
		return 1;
	}
	printf("listening\n");
	fflush(stdout);
	double end = now_s() + seconds;
	while (now_s() < end) {
		struct pollfd p = {.fd = s, .events = POLLIN};
		if (poll(&p, 1, 100) != 1)
			continue;
		int c = accept(s, NULL, NULL);
		if (c < 0)
			continue;
		if (write(c, "ok\n", 3) != 3)
			fprintf(stderr, "mh_peer tcp-listen: write: %s\n", strerror(errno));
		close(c);
	}
	close(s);
	return 0;
}

static int tcp_connect(const char *addr, const char *port, int ms)
{
	struct sockaddr_in sa;
	char buf[4] = "";
	const char *why = "timed out";
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s < 0 || sockaddr_of(&sa, addr, port))
		return 1;
	if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) && errno != EINPROGRESS) {
		why = strerror(errno);
		goto out_fail;
	}
	/* POLLIN: the answer arrived, or the connection failed (read says which). */
	struct pollfd p = {.fd = s, .events = POLLIN};
	if (poll(&p, 1, ms) != 1)
		goto out_fail;
	ssize_t r = read(s, buf, 3);
	if (r != 3 || memcmp(buf, "ok\n", 3) != 0) {
		why = r < 0 ? strerror(errno) : "no \"ok\" answer";
		goto out_fail;
	}
	close(s);
	return 0;
out_fail:
	fprintf(stderr, "mh_peer tcp-connect %s:%s: failed within %d ms (%s)\n", addr, port, ms,
		why);
	close(s);
	return 1;
}

#ifdef GM_HAVE_UCX
#include "ucx/ucx.h"

#define MARK  0x676d2d6d682d6f6bull /* "gm-mh-ok" */
#define CHUNK (1u << 20)

static uint8_t pattern(size_t i)
{
	return (uint8_t)(i * 131u + 7u);
}

/* Serve one writer: see the file's header. */
static int ucx_serve(const char *addr, size_t bytes, const char *file, double seconds)
{
	char err[256], ap[64], tmp[4096];
	struct gm_ucx *u = NULL;
	struct gm_ucx_region *r = NULL;
	struct gm_ucx_ep *ep = NULL;
	void *blob = NULL;
	size_t bl;
	uint16_t port;
	int rc = 1;
	double end = now_s() + seconds;
	uint8_t *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED || gm_ucx_create(&u, err, sizeof(err))) {
		fprintf(stderr, "mh_peer ucx-serve: %s\n", m == MAP_FAILED ? strerror(errno) : err);
		return 1;
	}
	snprintf(ap, sizeof(ap), "%s:0", addr);
	if (gm_ucx_listen(u, ap, &port) || gm_ucx_mem_map(u, m, bytes, &r) ||
	    gm_ucx_region_pack(r, &blob, &bl))
		goto out_msg;
	/* Written under a temporary name, then renamed: the writer never sees half. */
	snprintf(tmp, sizeof(tmp), "%s.tmp", file);
	FILE *f = fopen(tmp, "w");
	if (!f || fprintf(f, "%u\n", port) < 0 || fwrite(blob, 1, bl, f) != bl || fclose(f) ||
	    rename(tmp, file)) {
		fprintf(stderr, "mh_peer ucx-serve: writing '%s': %s\n", file, strerror(errno));
		goto out;
	}
	if (gm_ucx_accept(u, &ep, (int)(seconds * 1000)))
		goto out_msg;
	volatile uint64_t *mark = (volatile uint64_t *)(m + bytes - 8);
	while (*mark != MARK && now_s() < end)
		for (int i = 0; i < 64; i++)
			gm_ucx_progress(u);
	if (*mark != MARK) {
		fprintf(stderr,
			"mh_peer ucx-serve: the writer's bytes did not arrive within %.0f s\n",
			seconds);
		goto out;
	}
	for (size_t i = 0; i < bytes - 8; i++)
		if (m[i] != pattern(i)) {
			fprintf(stderr, "mh_peer ucx-serve: byte %zu is %u, not %u\n", i, m[i],
				pattern(i));
			goto out;
		}
	printf("mh_peer ucx-serve: %zu bytes arrived on %s, every byte as sent\n", bytes - 8, ap);
	rc = 0;
	goto out;
out_msg:
	fprintf(stderr, "mh_peer ucx-serve: %s\n", gm_ucx_errmsg(u));
out:
	gm_ucx_ep_close(ep, 1000);
	free(blob);
	gm_ucx_mem_unmap(r);
	gm_ucx_destroy(u);
	munmap(m, bytes);
	return rc;
}

/* Read "PORT\n" + blob from file, waiting for it until end. 0 or -1. */
static int read_blob(const char *file, double end, unsigned *port, unsigned char *blob, size_t cap,
		     size_t *bl)
{
	for (;;) {
		FILE *f = fopen(file, "r");
		if (f) {
			int ok = fscanf(f, "%u", port) == 1 && fgetc(f) == '\n';
			*bl = ok ? fread(blob, 1, cap, f) : 0;
			fclose(f);
			if (ok)
				return 0;
		}
		if (now_s() >= end)
			return -1;
		usleep(20000);
	}
}

static int ucx_put(const char *addr, size_t bytes, const char *file, double seconds)
{
	char err[256], ap[64];
	unsigned char blob[4096];
	unsigned port;
	size_t bl;
	struct gm_ucx *u = NULL;
	struct gm_ucx_ep *ep = NULL;
	struct gm_ucx_rkey *k = NULL;
	int rc = 1, tmo = (int)(seconds * 1000);
	uint8_t *src = malloc(CHUNK);
	if (!src || read_blob(file, now_s() + seconds, &port, blob, sizeof(blob), &bl)) {
		fprintf(stderr, "mh_peer ucx-put: no region in '%s' within %.0f s\n", file,
			seconds);
		free(src);
		return 1;
	}
	if (gm_ucx_create(&u, err, sizeof(err))) {
		fprintf(stderr, "mh_peer ucx-put: %s\n", err);
		free(src);
		return 1;
	}
	snprintf(ap, sizeof(ap), "%s:%u", addr, port);
	if (gm_ucx_connect(u, ap, &ep, tmo) || gm_ucx_rkey_unpack(ep, blob, bl, &k))
		goto out_msg;
	double t0 = now_s();
	for (size_t off = 0; off < bytes - 8; off += CHUNK) {
		size_t n = bytes - 8 - off < CHUNK ? bytes - 8 - off : CHUNK;
		for (size_t i = 0; i < n; i++)
			src[i] = pattern(off + i);
		if (gm_ucx_put(ep, k, off, src, n, 0, tmo))
			goto out_msg;
	}
	uint64_t mark = MARK;
	if (gm_ucx_flush(ep, tmo) || gm_ucx_put(ep, k, bytes - 8, &mark, 8, 0, tmo))
		goto out_msg;
	double t = now_s() - t0;
	printf("mh_peer ucx-put: %zu bytes to %s in %.3f s (%.0f MB/s)\n", bytes - 8, ap, t,
	       (double)(bytes - 8) / 1e6 / t);
	rc = 0;
	goto out;
out_msg:
	fprintf(stderr, "mh_peer ucx-put: %s\n", gm_ucx_errmsg(u));
out:
	gm_ucx_rkey_destroy(k);
	gm_ucx_ep_close(ep, 1000);
	gm_ucx_destroy(u);
	free(src);
	return rc;
}
#endif

static int usage(void)
{
	fprintf(stderr,
		"usage: mh_peer tcp-listen ADDR PORT SECONDS | tcp-connect ADDR PORT MS |\n"
		"       ucx-serve ADDR BYTES FILE SECONDS | ucx-put ADDR BYTES FILE SECONDS\n");
	return 2;
}

int main(int argc, char **argv)
{
	if (argc == 5 && strcmp(argv[1], "tcp-listen") == 0)
		return tcp_listen(argv[2], argv[3], atof(argv[4]));
	if (argc == 5 && strcmp(argv[1], "tcp-connect") == 0)
		return tcp_connect(argv[2], argv[3], atoi(argv[4]));
	if (argc == 6 && (strcmp(argv[1], "ucx-serve") == 0 || strcmp(argv[1], "ucx-put") == 0)) {
#ifdef GM_HAVE_UCX
		size_t bytes = strtoull(argv[3], NULL, 10);
		if (bytes < 16) {
			fprintf(stderr, "mh_peer: BYTES '%s' must be at least 16\n", argv[3]);
			return 2;
		}
		if (argv[1][4] == 's')
			return ucx_serve(argv[2], bytes, argv[4], atof(argv[5]));
		return ucx_put(argv[2], bytes, argv[4], atof(argv[5]));
#else
		fprintf(stderr, "mh_peer: built without UCX (install libucx-dev, make UCX=1)\n");
		return 77;
#endif
	}
	return usage();
}
