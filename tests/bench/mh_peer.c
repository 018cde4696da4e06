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
 * And a stranger's attacks on a port (each prints one line of counts):
 *   mh_peer tcp-flood ADDR PORT COUNT SECONDS  COUNT connections (256 at a time,
 *           1 s each to connect), each reset as soon as it connects
 *   mh_peer tcp-hold ADDR PORT COUNT SECONDS   COUNT connections held idle until
 *           SECONDS; then how many the other end closed and how many are open
 *   mh_peer tcp-drip ADDR PORT SECONDS         one connection sending a plausible
 *           TLS record header, then a byte every 200 ms: exit 0 iff the other end
 *           closed it within SECONDS (it says after how long)
 *   mh_peer ucx-churn ADDR PORT N SECONDS      N UCX client endpoints (sockaddr)
 *           to ADDR:PORT, each made again as soon as it fails, for SECONDS
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
#include <stdbool.h>
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
#include <ucp/api/ucp.h>

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

/* ---- a stranger's attacks ---------------------------------------------------- */

/* A non-blocking connect to sa: the socket (connected or in progress), or -1. */
static int open_nb(const struct sockaddr_in *sa)
{
	int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s >= 0 && connect(s, (const struct sockaddr *)sa, sizeof(*sa)) &&
	    errno != EINPROGRESS) {
		close(s);
		s = -1;
	}
	return s;
}

/* Close with a reset (no TIME_WAIT on either side: 30,000 connections from one
 * address would otherwise run out of ports). */
static void close_rst(int s)
{
	struct linger lg = {1, 0};
	setsockopt(s, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(s);
}

#define INFLIGHT 256

/* Connections to sa, INFLIGHT at a time, until count were started or end;
 * each that connects is handed to keep (which may close it), each that fails or
 * takes over 1 s is counted. */
struct opener {
	long started, connected, reset, refused, timedout;
};
static void open_many(struct opener *o, const struct sockaddr_in *sa, long count, double end,
		      void (*keep)(void *arg, int fd), void *arg)
{
	struct pollfd p[INFLIGHT];
	double t0[INFLIGHT];
	int live = 0;
	while ((o->started < count || live) && now_s() < end) {
		while (live < INFLIGHT && o->started < count) {
			int s = open_nb(sa);
			o->started++;
			if (s < 0) {
				o->refused++;
				continue;
			}
			p[live] = (struct pollfd){.fd = s, .events = POLLOUT};
			t0[live++] = now_s();
		}
		poll(p, (nfds_t)live, 20);
		for (int i = live - 1; i >= 0; i--) {
			int e = 0;
			socklen_t el = sizeof(e);
			bool late = now_s() - t0[i] > 1.0;
			if (!p[i].revents && !late)
				continue;
			if (p[i].revents && !getsockopt(p[i].fd, SOL_SOCKET, SO_ERROR, &e, &el) &&
			    !e) {
				o->connected++;
				keep(arg, p[i].fd);
			} else {
				if (!p[i].revents)
					o->timedout++;
				else if (e == ECONNRESET)
					o->reset++;
				else
					o->refused++;
				close_rst(p[i].fd);
			}
			p[i] = p[--live];
			t0[i] = t0[live];
		}
	}
	for (int i = 0; i < live; i++) {
		o->timedout++;
		close_rst(p[i].fd);
	}
}

static void drop(void *arg, int fd)
{
	(void)arg;
	close_rst(fd);
}

static int tcp_flood(const char *addr, const char *port, long count, double seconds)
{
	struct sockaddr_in sa;
	struct opener o = {0};
	if (sockaddr_of(&sa, addr, port))
		return 2;
	open_many(&o, &sa, count, now_s() + seconds, drop, NULL);
	printf("tcp-flood %s:%s: %ld started, %ld connected, %ld reset while connecting, %ld "
	       "refused, %ld timed out\n",
	       addr, port, o.started, o.connected, o.reset, o.refused, o.timedout);
	return 0;
}

struct held {
	int *fd;
	long n;
};
static void hold(void *arg, int fd)
{
	struct held *h = arg;
	h->fd[h->n++] = fd;
}

static int tcp_hold(const char *addr, const char *port, long count, double seconds)
{
	struct sockaddr_in sa;
	struct opener o = {0};
	double end = now_s() + seconds;
	struct held h = {calloc((size_t)count + 1, sizeof(int)), 0};
	long closed = 0;
	if (sockaddr_of(&sa, addr, port) || !h.fd)
		return 2;
	open_many(&o, &sa, count, end, hold, &h);
	while (now_s() < end)
		usleep(50000);
	for (long i = 0; i < h.n; i++) {
		char b;
		ssize_t k = recv(h.fd[i], &b, 1, MSG_DONTWAIT | MSG_PEEK);
		closed += k == 0 || (k < 0 && errno != EAGAIN);
		close_rst(h.fd[i]);
	}
	printf("tcp-hold %s:%s: %ld started, %ld connected, %ld closed by the other end, %ld "
	       "open, %ld reset while connecting, %ld never connected\n",
	       addr, port, o.started, o.connected, closed, h.n - closed, o.reset,
	       o.refused + o.timedout);
	free(h.fd);
	return 0;
}

static int tcp_drip(const char *addr, const char *port, double seconds)
{
	struct sockaddr_in sa;
	/* what a control port would take: a TLS handshake record of 512 bytes,
	 * a ClientHello of 508 inside it */
	unsigned char hdr[9] = {0x16, 3, 1, 2, 0, 1, 0, 1, 0xfc};
	double t0 = now_s();
	int s = sockaddr_of(&sa, addr, port) ? -1 : socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0 || connect(s, (struct sockaddr *)&sa, sizeof(sa))) {
		fprintf(stderr, "mh_peer tcp-drip: cannot connect to %s:%s\n", addr, port);
		return 2;
	}
	for (unsigned i = 0; now_s() - t0 < seconds; i++) {
		unsigned char b = i < sizeof(hdr) ? hdr[i] : 0;
		char r;
		if (send(s, &b, 1, MSG_NOSIGNAL) != 1 || recv(s, &r, 1, MSG_DONTWAIT) == 0 ||
		    (errno != EAGAIN && errno != EWOULDBLOCK)) {
			printf("tcp-drip %s:%s: closed by the other end after %.1f s\n", addr, port,
			       now_s() - t0);
			close(s);
			return 0;
		}
		usleep(200000);
	}
	printf("tcp-drip %s:%s: still open after %.1f s\n", addr, port, now_s() - t0);
	close(s);
	return 1;
}

#ifdef GM_HAVE_UCX
struct churn_ep {
	ucp_ep_h ep;
	int failed;
};

static void churn_err(void *arg, ucp_ep_h ep, ucs_status_t st)
{
	(void)ep;
	(void)st;
	((struct churn_ep *)arg)->failed = 1;
}

static void churn_close(ucp_worker_h w, struct churn_ep *e)
{
	ucp_request_param_t rp = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
				  .flags = UCP_EP_CLOSE_FLAG_FORCE};
	void *r = ucp_ep_close_nbx(e->ep, &rp);
	if (UCS_PTR_IS_PTR(r)) {
		double end = now_s() + 0.2;
		while (ucp_request_check_status(r) == UCS_INPROGRESS && now_s() < end)
			ucp_worker_progress(w);
		ucp_request_free(r);
	}
	e->ep = NULL;
}

/* Make endpoint e (again) to sa: 1 made, 0 failed. */
static int churn_open(ucp_worker_h w, struct churn_ep *e, const struct sockaddr_in *sa)
{
	ucp_ep_params_t ep = {
	    .field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
			  UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER,
	    .flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER,
	    .sockaddr = {.addr = (const struct sockaddr *)sa, .addrlen = sizeof(*sa)},
	    .err_mode = UCP_ERR_HANDLING_MODE_PEER,
	    .err_handler = {.cb = churn_err, .arg = e}};
	e->failed = 0;
	if (ucp_ep_create(w, &ep, &e->ep) == UCS_OK)
		return 1;
	e->ep = NULL;
	return 0;
}

static int ucx_churn(const char *addr, const char *port, int n, double seconds)
{
	struct sockaddr_in sa;
	ucp_config_t *cfg = NULL;
	ucp_context_h ctx = NULL;
	ucp_worker_h w = NULL;
	long opened = 0, failed = 0;
	int rc = 2;
	struct churn_ep *e = calloc((size_t)n, sizeof(*e));
	ucp_params_t p = {.field_mask = UCP_PARAM_FIELD_FEATURES, .features = UCP_FEATURE_AM};
	ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
				  .thread_mode = UCS_THREAD_MODE_SINGLE};
	if (!e || sockaddr_of(&sa, addr, port) || ucp_config_read(NULL, NULL, &cfg) != UCS_OK)
		goto out_free;
	ucs_status_t st = ucp_init(&p, cfg, &ctx);
	ucp_config_release(cfg);
	if (st != UCS_OK)
		goto out_free;
	if (ucp_worker_create(ctx, &wp, &w) != UCS_OK)
		goto out_cleanup;
	for (double end = now_s() + seconds; now_s() < end;) {
		for (int i = 0; i < n; i++) {
			if (e[i].ep && !e[i].failed)
				continue;
			if (e[i].ep) { /* refused: closed, then made again */
				failed++;
				churn_close(w, &e[i]);
			}
			int made = churn_open(w, &e[i], &sa);
			opened += made;
			failed += !made;
		}
		for (int k = 0; k < 100; k++)
			ucp_worker_progress(w);
	}
	for (int i = 0; i < n; i++)
		if (e[i].ep)
			churn_close(w, &e[i]);
	printf("ucx-churn %s:%s: %ld endpoints opened, %ld failed\n", addr, port, opened, failed);
	rc = 0;
	ucp_worker_destroy(w);
out_cleanup:
	ucp_cleanup(ctx);
out_free:
	free(e);
	return rc;
}
#endif

static int usage(void)
{
	fprintf(stderr,
		"usage: mh_peer tcp-listen ADDR PORT SECONDS | tcp-connect ADDR PORT MS |\n"
		"       ucx-serve ADDR BYTES FILE SECONDS | ucx-put ADDR BYTES FILE SECONDS |\n"
		"       tcp-flood ADDR PORT COUNT SECONDS | tcp-hold ADDR PORT COUNT SECONDS |\n"
		"       tcp-drip ADDR PORT SECONDS | ucx-churn ADDR PORT N SECONDS\n");
	return 2;
}

int main(int argc, char **argv)
{
	if (argc == 5 && strcmp(argv[1], "tcp-listen") == 0)
		return tcp_listen(argv[2], argv[3], atof(argv[4]));
	if (argc == 5 && strcmp(argv[1], "tcp-connect") == 0)
		return tcp_connect(argv[2], argv[3], atoi(argv[4]));
	if (argc == 6 && strcmp(argv[1], "tcp-flood") == 0)
		return tcp_flood(argv[2], argv[3], atol(argv[4]), atof(argv[5]));
	if (argc == 6 && strcmp(argv[1], "tcp-hold") == 0)
		return tcp_hold(argv[2], argv[3], atol(argv[4]), atof(argv[5]));
	if (argc == 5 && strcmp(argv[1], "tcp-drip") == 0)
		return tcp_drip(argv[2], argv[3], atof(argv[4]));
	if (argc == 6 && strcmp(argv[1], "ucx-churn") == 0) {
#ifdef GM_HAVE_UCX
		return ucx_churn(argv[2], argv[3], atoi(argv[4]), atof(argv[5]));
#else
		fprintf(stderr, "mh_peer: built without UCX (install libucx-dev, make UCX=1)\n");
		return 77;
#endif
	}
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
