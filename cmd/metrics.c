/*
 * metrics.c - GET /metrics over libmicrohttpd (see metrics.h).
 *
 * One mutex guards one heap buffer: publish swaps in a fresh copy, the request
 * handler copies it into the response (MHD_RESPMEM_MUST_COPY) while holding the
 * mutex. Everything else (parsing HTTP, connection limits, timeouts) is the
 * library's. It does not know what the metrics mean: the agent formats them.
 *
 * Limits: a scrape takes one short connection, so one address may hold
 * PER_ADDR_CONNS at once and the rest of that address's are closed as they come;
 * a connection silent for IDLE_TIMEOUT_S is closed. A client that trickles its
 * request a byte at a time from one address thus holds at most PER_ADDR_CONNS,
 * and a scraper from another address still gets its answer (tests/test_metrics.sh
 * holds 40 such connections). Not a defence against many addresses: a local user
 * has all of 127.0.0.0/8, and MAX_CONNS is what they share.
 */
#include "metrics.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CONNS      64 /* connections at once; more are refused by the library */
#define PER_ADDR_CONNS 4  /* ... of them from one client address */
#define IDLE_TIMEOUT_S 5  /* a connection silent this long is closed */

struct gm_metrics {
	struct MHD_Daemon *d;
	pthread_mutex_t mu;
	char *text; /* the last snapshot (NUL-terminated), or NULL */
	size_t len;
	unsigned port;
};

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
	m->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL, 0, NULL, NULL,
				on_request, m,
				MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
				MHD_OPTION_CONNECTION_LIMIT, (unsigned)MAX_CONNS,
				MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)PER_ADDR_CONNS,
				MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)IDLE_TIMEOUT_S,
				MHD_OPTION_END);
	// clang-format on
	if (!m->d) {
		int e = errno ? errno : EADDRINUSE;
		snprintf(err, errlen, "cannot listen on %s: %s", addr, strerror(e));
		pthread_mutex_destroy(&m->mu);
		free(m);
		return -e;
	}
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(m->d, MHD_DAEMON_INFO_BIND_PORT);
	m->port = info ? info->port : ntohs(sa.sin_port);
	*out = m;
	return 0;
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
	MHD_stop_daemon(m->d);
	pthread_mutex_destroy(&m->mu);
	free(m->text);
	free(m);
}
