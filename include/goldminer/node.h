/*
 * node.h - the node agent: one daemon per host that owns the data workers of
 * every training job on it and divides the host's CPUs between them.
 *
 * Loaders in other processes attach over a Unix SOCK_SEQPACKET socket (mode 0600;
 * the peer's uid is checked with SO_PEERCRED: only the agent's own uid and root
 * are served). Each attach creates the job's ring and workers in the agent; the
 * ring travels back as a memfd over SCM_RIGHTS and the loader maps and validates
 * it. Every GM_ELASTIC_TICK_MS (250 ms) the agent measures each job's demand and
 * per-worker rate from its ring and sizes all pools with the elastic controller
 * (elastic.h, over the shared policy of core/policy.c) under one CPU budget. A
 * job whose connection closes (detach, exit, crash) loses its workers and its
 * ring at once. Each job is a worker pool (pool.h); the messages are wire.h's.
 */
#ifndef GOLDMINER_NODE_H
#define GOLDMINER_NODE_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "goldminer/wire.h" /* the request and reply structs */

struct gm_node_opts {
	const char *socket_path; /* NULL: gm_node_default_socket() */
	uint32_t cpus;		 /* worker budget; 0 = online CPUs */
	int verbose;		 /* log attach/detach/rebalance lines to stderr */
};

/* $XDG_RUNTIME_DIR/goldminer.sock, else /tmp/goldminer-<uid>.sock (static buffer). */
const char *gm_node_default_socket(void);

/*
 * Run the agent until *stop becomes non-zero (e.g. set by a SIGTERM handler) or an
 * unrecoverable error. Returns 0, or -errno with a message in err: -EADDRINUSE when
 * another agent answers on the socket, bind/listen errors naming the path.
 */
int gm_node_run(const struct gm_node_opts *o, volatile sig_atomic_t *stop, char *err,
		size_t errlen);

/* Client side: one request/reply exchange on a fresh connection. STATUS writes the
 * agent's JSON line into out; SCALE fixes the pool of the job whose consumer is
 * `pid` to `workers` (0: back to the policy). 0 or -errno (message in out). */
int gm_node_status(const char *socket_path, char *out, size_t outlen);
int gm_node_scale(const char *socket_path, int pid, int workers, char *out, size_t outlen);

#endif
