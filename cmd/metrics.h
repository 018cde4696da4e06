/*
 * metrics.h - (the goldminer binary, not the library) an HTTP endpoint that serves the latest text
 * snapshot of a set of metrics (the node agent's, in the Prometheus text format) at GET /metrics.
 *
 * The owner publishes a new snapshot whenever it likes (the agent: every tick);
 * the server thread only ever copies the last one out under a mutex, so a slow or
 * hostile scraper never touches the owner's state and never blocks it for longer
 * than a memcpy. HTTP is libmicrohttpd's, not hand-written, run by a thread of
 * this module that also holds slow clients to a deadline for their request and
 * a cap on connections where a newcomer evicts the longest-waiting (metrics.c).
 */
#ifndef GOLDMINER_METRICS_H
#define GOLDMINER_METRICS_H

#include <stddef.h>

struct gm_metrics;

/*
 * Listen on addr: "PORT" or ":PORT" (127.0.0.1, the default: metrics are for this
 * host unless asked), "HOST:PORT" with an IPv4 address ("0.0.0.0:9464" for every
 * interface). PORT 0 picks a free port (gm_metrics_port tells which). 0, or -EINVAL
 * (bad address, message in err) / -EADDRINUSE / -errno when the server cannot
 * start (message in err).
 */
int gm_metrics_start(struct gm_metrics **out, const char *addr, char *err, size_t errlen);

/* The TCP port listened on. */
unsigned gm_metrics_port(const struct gm_metrics *m);

/* Replace the snapshot with a copy of text[0..len). 0 or -ENOMEM (the old one is
 * kept). Thread-safe against the server; one publisher at a time. */
int gm_metrics_publish(struct gm_metrics *m, const char *text, size_t len);

/* Stop the server and free everything; NULL is a no-op. */
void gm_metrics_stop(struct gm_metrics *m);

#endif
