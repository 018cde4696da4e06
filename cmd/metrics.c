/*
 * metrics.c - GET /metrics over libmicrohttpd (see metrics.h).
 *
 * One mutex guards one heap buffer: publish swaps in a fresh copy, the request
 * handler copies it into the response (MHD_RESPMEM_MUST_COPY) while holding the
 * mutex. Parsing HTTP is the library's. It does not know what the metrics mean:
 * the agent formats them.
 *
 * Slow clients (slowloris). One thread of ours runs the library's event loop
 * (epoll, MHD_run_wait): every connection is a non-blocking socket in one
 * epoll set, so a client that sends nothing, or its request a byte at a time,
 * costs a socket and a little memory, never a thread, and never delays the
 * others. What it could still do is hold sockets until none is left for a
 * scraper, and a library idle timeout does not stop a client that sends a byte
 * a second. So the same thread keeps a table of the connections (the
 * library's connection notifications) and holds each to two rules:
 *  - a request must arrive whole within REQUEST_S of its connection's opening
 *    (or of the reply before it, for a kept-alive one); one that has not is
 *    closed, however busily it trickles (the sweep after each round of the
 *    loop, every TICK_MS at most);
 *  - at most MAX_CONNS are held: a newcomer past that closes the connection
 *    that has waited longest for its request. The newcomer is never the one
 *    refused, so a scraper on the same address as a flood of slow clients
 *    (127.0.0.1 for both, the usual case) is still answered: its request
 *    comes in its first packet, theirs never does.
 * Closing is shutdown() of the socket: the library sees the end of the stream
 * on its next round and closes the connection as if the client had (it tells
 * us, before it closes the fd, so the table never names a closed socket). The
 * library's own caps (HARD_CONNS, IDLE_TIMEOUT_S) stay as a backstop. There
 * is no cap per client address: on a host every local user has all of
 * 127.0.0.0/8, and a cap that refuses newcomers is what let slow clients on
 * 127.0.0.1 shut a scraper on 127.0.0.1 out.
 *
 * Not a defence against a flood of new connections faster than one thread
 * accepts them (that is the kernel's backlog's), nor against a client that
 * reads its reply slowly (a reply is a few KiB: it fits in the socket's
 * buffer).
 */
#include "metrics.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "goldminer/util.h"

#define MAX_CONNS      128		/* held at once; a newcomer past it evicts */
#define HARD_CONNS     (MAX_CONNS + 64) /* the library's cap: evicted ones close a round later */
#define REQUEST_S      3		/* a whole request within this of the opening */
#define IDLE_TIMEOUT_S 5		/* the library's idle timeout (a backstop) */
#define TICK_MS	       100		/* the loop's longest wait: the sweep's period */

/* A connection of the table: its socket, since when it waits for a request,
 * whether it has one now (the handler runs or its reply goes out) and whether
 * it was told to go (shutdown, not yet closed by the library). */
struct conn {
	int fd;
	bool busy, evicted;
	uint64_t since_ms;
};

struct gm_metrics {
	struct MHD_Daemon *d;
	pthread_t loop;
	atomic_bool stop; /* set by gm_metrics_stop, read by the loop each round */
	pthread_mutex_t mu;
	char *text; /* the last snapshot (NUL-terminated), or NULL */
	size_t len;
	unsigned port;
	/* The table: only the loop's thread touches it (the library calls every
	 * callback from inside MHD_run_wait). */
	struct conn *conns[HARD_CONNS];
	unsigned n, held; /* in the table; ... of them not evicted */
};

/* Tell c to go: the library closes it on its next round (and notifies). */
static void evict(struct gm_metrics *m, struct conn *c)
{
	shutdown(c->fd, SHUT_RDWR);
	c->evicted = true;
	m->held--;
}

/* The connection that has waited longest for its request, or NULL. */
static struct conn *oldest_waiting(struct gm_metrics *m)
{
	struct conn *old = NULL;
	for (unsigned k = 0; k < m->n; k++) {
		struct conn *c = m->conns[k];
		if (!c->busy && !c->evicted && (!old || c->since_ms < old->since_ms))
			old = c;
	}
	return old;
}

/* Close every connection whose request is later than REQUEST_S. */
static void sweep(struct gm_metrics *m)
{
	uint64_t now = (uint64_t)gm_now_ms();
	for (unsigned k = 0; k < m->n; k++) {
		struct conn *c = m->conns[k];
		if (!c->busy && !c->evicted && now - c->since_ms >= REQUEST_S * 1000u)
			evict(m, c);
	}
}

static void on_connection(void *cls, struct MHD_Connection *mc, void **ctx,
			  enum MHD_ConnectionNotificationCode what)
{
	struct gm_metrics *m = cls;
	struct conn *c = *ctx;

	if (what == MHD_CONNECTION_NOTIFY_CLOSED) {
		if (!c)
			return;
		for (unsigned k = 0; k < m->n; k++)
			if (m->conns[k] == c) {
				m->conns[k] = m->conns[--m->n];
				break;
			}
		if (!c->evicted)
			m->held--;
		free(c);
		*ctx = NULL;
		return;
	}
	const union MHD_ConnectionInfo *fd =
	    MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
	if (!fd || m->n == HARD_CONNS || !(c = calloc(1, sizeof(*c))))
		return; /* not in the table: the library's timeout is its only limit */
	if (m->held >= MAX_CONNS) {
		struct conn *old = oldest_waiting(m);
		if (old)
			evict(m, old);
	}
	c->fd = fd->connect_fd;
	c->since_ms = (uint64_t)gm_now_ms();
	m->conns[m->n++] = c;
	m->held++;
	*ctx = c;
}

/* A request is done (its reply sent, or it failed): a kept-alive connection
 * waits for its next one from now. */
static void on_completed(void *cls, struct MHD_Connection *mc, void **con_cls,
			 enum MHD_RequestTerminationCode why)
{
	(void)cls;
	(void)con_cls;
	(void)why;
	const union MHD_ConnectionInfo *i =
	    MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	struct conn *c = i ? i->socket_context : NULL;
	if (c) {
		c->busy = false;
		c->since_ms = (uint64_t)gm_now_ms();
	}
}

static void *loop_main(void *arg)
{
	struct gm_metrics *m = arg;
	/* pairs with the store in gm_metrics_stop; nothing else is shared */
	while (!atomic_load_explicit(&m->stop, memory_order_relaxed)) {
		if (MHD_run_wait(m->d, TICK_MS) != MHD_YES)
			break; /* (only a daemon started wrongly: not ours) */
		sweep(m);
	}
	return NULL;
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *type,
			     const char *body, size_t len)
{
	struct MHD_Response *r =
	    MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	enum MHD_Result ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version, const char *upload,
				  size_t *upload_len, void **con_cls)
{
	struct gm_metrics *m = cls;
	static const char text_type[] = "text/plain; version=0.0.4; charset=utf-8";
	(void)version;
	(void)upload;
	(void)con_cls;
	const union MHD_ConnectionInfo *i =
	    MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	if (i && i->socket_context) /* a whole request: no longer a slow one */
		((struct conn *)i->socket_context)->busy = true;
	if (*upload_len)
		return MHD_NO; /* no request bodies here */
	if (strcmp(method, "GET") && strcmp(method, "HEAD"))
		return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain", "GET /metrics\n", 13);
	if (strcmp(url, "/metrics"))
		return reply(c, MHD_HTTP_NOT_FOUND, "text/plain", "try /metrics\n", 13);
	pthread_mutex_lock(&m->mu);
	enum MHD_Result ret =
	    m->text ? reply(c, MHD_HTTP_OK, text_type, m->text, m->len)
		    : reply(c, MHD_HTTP_SERVICE_UNAVAILABLE, "text/plain", "no snapshot yet\n", 16);
	pthread_mutex_unlock(&m->mu);
	return ret;
}

/* "PORT", ":PORT" or "IPV4:PORT" into sa; 0 or -EINVAL. */
static int parse_addr(const char *addr, struct sockaddr_in *sa)
{
	char host[64] = "127.0.0.1";
	const char *colon = strrchr(addr, ':');
	const char *port = colon ? colon + 1 : addr;
	char *end;
	unsigned long p;

	if (colon && colon > addr) {
		size_t n = (size_t)(colon - addr);
		if (n >= sizeof(host))
			return -EINVAL;
		memcpy(host, addr, n);
		host[n] = '\0';
	}
	errno = 0;
	p = strtoul(port, &end, 10);
	if (!*port || *end || errno || p > 65535)
		return -EINVAL;
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons((uint16_t)p);
	return inet_pton(AF_INET, host, &sa->sin_addr) == 1 ? 0 : -EINVAL;
}

int gm_metrics_start(struct gm_metrics **out, const char *addr, char *err, size_t errlen)
{
	struct sockaddr_in sa;
	struct gm_metrics *m;
	int rc;

	*out = NULL;
	if (!addr || parse_addr(addr, &sa)) {
		snprintf(err, errlen, "address '%s': expected PORT, :PORT or IPV4:PORT",
			 addr ? addr : "");
		return -EINVAL;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	pthread_mutex_init(&m->mu, NULL);
	errno = 0;
	/* one option and its value a line */
	// clang-format off
	m->d = MHD_start_daemon(MHD_USE_EPOLL, 0, NULL, NULL,
				on_request, m,
				MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
				MHD_OPTION_CONNECTION_LIMIT, (unsigned)HARD_CONNS,
				MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)IDLE_TIMEOUT_S,
				MHD_OPTION_NOTIFY_CONNECTION, on_connection, m,
				MHD_OPTION_NOTIFY_COMPLETED, on_completed, m,
				MHD_OPTION_END);
	// clang-format on
	if (!m->d) {
		rc = errno ? errno : EADDRINUSE;
		snprintf(err, errlen, "cannot listen on %s: %s", addr, strerror(rc));
		goto out_free;
	}
	rc = pthread_create(&m->loop, NULL, loop_main, m);
	if (rc) {
		snprintf(err, errlen, "cannot start the metrics thread: %s", strerror(rc));
		goto out_stop;
	}
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(m->d, MHD_DAEMON_INFO_BIND_PORT);
	m->port = info ? info->port : ntohs(sa.sin_port);
	*out = m;
	return 0;
out_stop:
	MHD_stop_daemon(m->d);
out_free:
	pthread_mutex_destroy(&m->mu);
	free(m);
	return -rc;
}

unsigned gm_metrics_port(const struct gm_metrics *m)
{
	return m->port;
}

int gm_metrics_publish(struct gm_metrics *m, const char *text, size_t len)
{
	char *copy = malloc(len + 1);
	if (!copy)
		return -ENOMEM;
	memcpy(copy, text, len);
	copy[len] = '\0';
	pthread_mutex_lock(&m->mu);
	char *old = m->text;
	m->text = copy;
	m->len = len;
	pthread_mutex_unlock(&m->mu);
	free(old);
	return 0;
}

void gm_metrics_stop(struct gm_metrics *m)
{
	if (!m)
		return;
	/* pairs with the load in loop_main: it returns within TICK_MS */
	atomic_store_explicit(&m->stop, true, memory_order_relaxed);
	pthread_join(m->loop, NULL);
	MHD_stop_daemon(m->d); /* closes what is left (each notified: the table empties) */
	pthread_mutex_destroy(&m->mu);
	free(m->text);
	free(m);
}
