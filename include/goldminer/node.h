/*
 * node.h - the node agent: one daemon per host that owns the data workers of
 * every training job on it and divides the host's CPUs between them.
 *
 * Loaders in other processes attach over a Unix SOCK_SEQPACKET socket (mode 0600,
 * by default in a directory of its own with mode 0700; the peer's uid is checked
 * with SO_PEERCRED: only the agent's own uid and root are served, and the client
 * checks the agent's uid the same way). Each attach creates the job's ring and
 * workers in the agent, if the ring fits in the agent's memory budget; the ring
 * travels back as a sealed memfd over SCM_RIGHTS and the loader maps and
 * validates it. A connection that sends no request for idle_ms without holding a
 * job is closed, and when the table is full the oldest such one makes room: idle
 * connections cannot lock clients out. Every GM_ELASTIC_TICK_MS (250 ms) the agent measures each
 * job's demand and per-worker rate from its ring and sizes all pools with the elastic controller
 * (elastic.h, over the shared policy of core/policy.c) under one CPU budget. With
 * peers, a job asks them for remote workers when its local capacity (its workers'
 * on-CPU rate times the cores the host can deliver them, host.h) or its measured
 * delivery falls short of its demand (gm_policy_borrow), and gives them back when
 * local capacity covers the demand again. A
 * job whose connection closes (detach, exit, crash) loses its workers and its
 * ring at once. An ATTACH may bring the job's running ring (a loader whose
 * agent went away and whose own workers went on with it): it is adopted as it
 * is (wire.h). Each job is a worker pool (pool.h); the messages are wire.h's.
 */
#ifndef GOLDMINER_NODE_H
#define GOLDMINER_NODE_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "goldminer/wire.h" /* the request and reply structs */

#define GM_NODE_IDLE_MS	  5000 /* default: close a connection silent this long */
#define GM_NODE_MAX_CONNS 64   /* connections (each job is one) held at once */
/* The agent's workers run at this nice value: a trainer on the same host, and
 * the agent's own loop (which receives remote workers' batches), get the CPU
 * first when it is short; idle CPUs are used all the same. Workers lent to
 * other hosts' jobs run at GM_NODE_LENT_NICE, far below this host's own
 * (core/remote/lender.c says why 19 and not SCHED_IDLE). */
#define GM_NODE_WORKER_NICE 5
#define GM_NODE_LENT_NICE   19
/* A job that remote workers feed runs no local worker on a host that delivers
 * less than this many cores (node.c's fed_remotely; the simulator's model of
 * it, sim/scenario.c): there its CPU is worth more receiving than decoding. */
#define GM_NODE_FED_CORES 0.5

struct gm_node_opts {
	const char *socket_path; /* NULL: gm_node_default_socket(), directory made 0700 */
	double cpus;		 /* cores the agent may use, fractions allowed (0.25: a
				    quarter core); its worker budget is ceil(cpus), the
				    cores count in each job's local capacity (host.h).
				    0 = online CPUs (the budget) and no limit of its own */
	const char *host_root;	 /* prefix of /proc and /sys for host.h (tests: a fake
				    tree with a CPU quota); NULL: the real ones */
	int verbose;		 /* log attach/detach/rebalance lines to stderr */
	uint64_t mem;		 /* memory budget of all rings, bytes; 0 = half of
				    gm_host_mem_total() (MemTotal or the cgroup limit) */
	uint32_t idle_ms;	 /* close a job-less connection silent this long;
				    0 = GM_NODE_IDLE_MS */
	uint32_t max_conns;	 /* 1..GM_NODE_MAX_CONNS; 0 = GM_NODE_MAX_CONNS */
	/* Called from the agent's loop after every tick (GM_ELASTIC_TICK_MS) with the
	 * agent's state in the Prometheus text format (text[len], valid during the
	 * call); NULL: not formatted. `goldminer node --metrics` serves it over HTTP. */
	void (*on_tick)(void *arg, const char *text, size_t len);
	void *tick_arg;
	/* Remote workers (remote.h): listen for peers on "ADDR:PORT", ask the agents
	 * at "HOST:PORT,..." for workers and lend them ours; both need the shared
	 * secret file. All NULL: this host only (the plugin is not loaded). */
	const char *listen, *peers, *secret;
	/* --tls-cert, --tls-key, --tls-ca: agents authenticate by certificates
	 * from an operator's CA instead of the secret (all three, no --secret) */
	const char *tls_cert, *tls_key, *tls_ca;
	/* --peers-file: more peers, one a line, read again on SIGHUP;
	 * peers_refresh_ms: the peers' DNS names looked up again this often (0:
	 * 30000); reload: set by a SIGHUP handler, the agent reads the file and
	 * looks the names up again (and clears it); NULL: no such handler */
	const char *peers_file;
	uint32_t peers_refresh_ms;
	volatile sig_atomic_t *reload;
	/* --lend-root DIR...: the only dataset roots lent to peers (none: lend
	 * nothing), and the bounds of indexing one for a peer (0: limits.h's) */
	const char *const *lend_roots;
	uint32_t nlend_roots, lend_index_ms;
	uint64_t lend_max_files;
	/* --lend-max-workers N: the most workers run for peers' jobs at once
	 * (0: what gm_policy_lend_next gives, unbounded) */
	uint32_t lend_max_workers;
	/* --lend-python: peers' Python jobs' workers may run here (their pickles
	 * are code: off by default); their roots still below a --lend-root */
	bool lend_python;
	/* --unguarded-ucx: where the kernel refuses the socket filter on UCX's
	 * ports (it wants CAP_NET_ADMIN), start with them open (a firewall's job)
	 * instead of refusing to */
	bool unguarded_ucx;
};

/* $XDG_RUNTIME_DIR/goldminer/goldminer.sock, else /run/goldminer-<euid>/goldminer.sock
 * (gm_wire_default_socket; a static buffer). */
const char *gm_node_default_socket(void);

/*
 * Run the agent until *stop becomes non-zero (e.g. set by a SIGTERM handler) or an
 * unrecoverable error. Returns 0, or -errno with a message in err: -EADDRINUSE when
 * another agent answers on the socket, bind/listen errors naming the path, the
 * default socket directory's check (gm_wire_socket_dir), -EINVAL for options out
 * of range.
 */
int gm_node_run(const struct gm_node_opts *o, volatile sig_atomic_t *stop, char *err,
		size_t errlen);

/* Client side: one request/reply exchange on a fresh connection (socket_path NULL:
 * the default, whose directory is checked first; the agent's uid is checked by
 * gm_wire_connect). STATUS writes the agent's JSON line into out; SCALE fixes the
 * pool of the job whose consumer is `pid` to `workers` (0: back to the policy).
 * 0 or -errno (message in out). */
int gm_node_status(const char *socket_path, char *out, size_t outlen);
int gm_node_scale(const char *socket_path, int pid, int workers, char *out, size_t outlen);

#endif
