/*
 * node.c - `goldminer node`: run the node agent (gm_node_run, core/node.c) until
 * SIGINT/SIGTERM (SIGHUP: its --peers-file read again), or ask a running one for its status or to
 * fix a job's pool.
 *
 * It only reads the command line, installs the signal handlers and prints: the
 * agent, its protocol and its decisions are the library's.
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "cmd.h"
#include "metrics.h"
#include "goldminer/host.h"
#include "goldminer/limits.h"
#include "goldminer/node.h"
#include "goldminer/remote.h"
#include "goldminer/util.h"

#define CMD "node"

enum {
	O_CPUS,
	O_MEM,
	O_IDLE,
	O_CONNS,
	O_SOCKET,
	O_METRICS,
	O_STATUS,
	O_SCALE,
	O_QUIET,
	O_LISTEN,
	O_PEERS,
	O_PEERS_FILE,
	O_PEERS_MS,
	O_SECRET,
	O_TLS_CERT,
	O_TLS_KEY,
	O_TLS_CA,
	O_LEND_ROOT,
	O_LEND_MS,
	O_LEND_FILES,
	O_LEND_WORKERS,
	O_LEND_PYTHON,
	O_UNGUARDED,
	O_RWORKER,
	O_LCHECK,
	O_AGENT_PID,
	O_HELP,
	O_N
};

static const struct cmd_opt opts[O_N] = {
    [O_CPUS] = {"cpus", "N", 0,
		"cores shared by all jobs, fractions allowed (0.25); the worker budget "
		"is N rounded up (default: online CPUs)"},
    [O_MEM] = {"mem", "SIZE", 0,
	       "memory budget of all jobs' rings, e.g. 8G (default: half "
	       "of MemTotal or of the cgroup's limit)"},
    [O_IDLE] = {"idle-ms", "N", 0, "close a connection that sends no request for N ms (5000)"},
    [O_CONNS] = {"max-conns", "N", 0, "connections (each job is one) held at once (64)"},
    [O_SOCKET] = {"socket", "PATH", 0, "the agent's socket (default below)"},
    [O_METRICS] = {"metrics", "ADDR", 0,
		   "serve Prometheus metrics at http://ADDR/metrics: PORT (127.0.0.1), "
		   "HOST:PORT; off by default"},
    [O_STATUS] = {"status", NULL, 0, "print a running agent's status (one JSON line)"},
    [O_SCALE] = {"scale", "PID=N", 0, "fix the pool of consumer PID at N (0: policy again)"},
    [O_QUIET] = {"quiet", NULL, 0, "no attach/detach/rebalance lines on stderr"},
    [O_LISTEN] = {"listen", "ADDR:PORT", 0,
		  "accept peer agents and remote workers here (UCX; PORT 0: any)"},
    [O_PEERS] = {"peers", "HOST[:PORT],...", 0,
		 "the other agents: ask them for workers (lend them ours: --lend-root); a "
		 "DNS name stands for every address it resolves to; no PORT: --listen's"},
    [O_PEERS_FILE] = {"peers-file", "FILE", 0,
		      "more peers, one HOST[:PORT] a line (# comments), read again on SIGHUP"},
    [O_PEERS_MS] = {"peers-refresh-ms", "N", 0,
		    "look the peers' DNS names up again every N ms (30000)"},
    [O_SECRET] = {"secret", "FILE", 0,
		  "shared secret of all agents (mode 0600), required with --listen/--peers"},
    [O_TLS_CERT] = {"tls-cert", "FILE", 0,
		    "instead of --secret: this agent's certificate chain (PEM), naming its "
		    "address or its name in the peers' --peers"},
    [O_TLS_KEY] = {"tls-key", "FILE", 0, "the private key of --tls-cert (PEM, mode 0600)"},
    [O_TLS_CA] = {"tls-ca", "FILE", 0, "the CA (PEM) every agent's certificate chains to"},
    [O_LEND_ROOT] = {"lend-root", "DIR", 0,
		     "lend workers to peers for datasets below DIR (repeat for more; "
		     "default: none, nothing is lent)"},
    [O_LEND_MS] = {"lend-index-ms", "N", 0,
		   "refuse a peer's dataset not indexed within N ms (120000)"},
    [O_LEND_FILES] = {"lend-max-files", "N", 0,
		      "refuse a peer's dataset of more than N entries (16777216)"},
    [O_LEND_WORKERS] = {"lend-max-workers", "N", 0,
			"run at most N workers for peers' jobs (default: what the idle "
			"cores make, a worker per quarter core)"},
    [O_LEND_PYTHON] = {"lend-python", NULL, 0,
		       "run peers' Python jobs' workers here: their pickles are code "
		       "(their roots still below a --lend-root; default: off)"},
    [O_UNGUARDED] = {"unguarded-ucx", NULL, 0,
		     "where the kernel refuses the socket filter on UCX's ports (no "
		     "CAP_NET_ADMIN), start anyway: a firewall must admit only the peers there"},
    [O_RWORKER] = {"remote-worker", "FD", 0, "(internal) a remote worker the agent starts"},
    [O_LCHECK] = {"lend-check", "FD", 0, "(internal) checks a peer's dataset for the agent"},
    [O_AGENT_PID] = {"agent-pid", "PID", 0, "(internal) the agent that started this process"},
    [O_HELP] = {"help", NULL, 'h', "this help"},
};

static void node_usage(FILE *f)
{
	cmd_usage(f,
		  "goldminer node [--cpus N] [--mem SIZE] [--socket PATH] [--quiet]\n"
		  "       goldminer node --listen ADDR:PORT --peers HOST[:PORT],... --secret FILE\n"
		  "                      (or --tls-cert FILE --tls-key FILE --tls-ca FILE)\n"
		  "                      [--peers-file FILE] [--lend-root DIR]... [--lend-python]\n"
		  "                      [--unguarded-ucx]\n"
		  "       goldminer node --status [--socket PATH]\n"
		  "       goldminer node --scale PID=N [--socket PATH]\n"
		  "Run the node agent: loaders started with --node PATH (C: opts.node)\n"
		  "attach to it and share its N cores (default: online CPUs; 0.25 is a\n"
		  "quarter core) and its memory budget: a job whose ring does not fit\n"
		  "is refused. A job asks the peers for workers when its local capacity\n"
		  "(the cores the host delivers: --cpus, CPU quota, cpuset) or its\n"
		  "delivery falls short of its trainer's demand.",
		  opts, O_N);
	fprintf(f,
		"\nDefault socket: %s\n(in a directory of the agent's uid with mode 0700; "
		"clients accept only an agent\nof their own uid, or root with "
		"GM_NODE_TRUST_ROOT=1)\n",
		gm_node_default_socket());
}

static volatile sig_atomic_t node_stop, node_reload;

static void on_term(int sig)
{
	(void)sig;
	node_stop = 1;
}

static void on_hup(int sig)
{
	(void)sig;
	node_reload = 1;
}

static void publish(void *arg, const char *text, size_t len)
{
	gm_metrics_publish(arg, text, len); /* -ENOMEM keeps the last snapshot */
}

/* Run the agent in the foreground until SIGINT or SIGTERM; with metrics_addr,
 * its state is served over HTTP from a snapshot taken every tick. */
static int run_agent(struct gm_node_opts *o, const char *metrics_addr)
{
	char err[2048];
	struct sigaction sa;
	struct gm_metrics *m = NULL;
	int rc = 0;

	if (metrics_addr) {
		if (gm_metrics_start(&m, metrics_addr, err, sizeof(err))) {
			cmd_err(CMD, "--metrics", NULL, "%s", err);
			return 1;
		}
		o->on_tick = publish;
		o->tick_arg = m;
		cmd_note(CMD, "metrics on port %u (GET /metrics)", gm_metrics_port(m));
	}

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_term;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sa.sa_handler = on_hup; /* --peers-file read again; never the default (end) */
	sigaction(SIGHUP, &sa, NULL);
	o->reload = &node_reload;
	signal(SIGPIPE, SIG_IGN);
	if (gm_node_run(o, &node_stop, err, sizeof(err))) {
		cmd_err(CMD, NULL, NULL, "%s", err);
		rc = 1;
	}
	gm_metrics_stop(m);
	return rc;
}

/* --status or --scale: one exchange with a running agent. */
static int ask_agent(const char *socket_path, bool status, int pid, int n)
{
	static char out[GM_NODE_MSG];
	int rc = status ? gm_node_status(socket_path, out, sizeof(out))
			: gm_node_scale(socket_path, pid, n, out, sizeof(out));
	if (rc) {
		cmd_err(CMD, NULL, NULL, "%s", out);
		return 1;
	}
	if (status)
		printf("%s\n", out);
	return 0;
}

/* A remote worker (--remote-worker) or a dataset check (--lend-check) the agent
 * (--agent-pid) exec'ed with its work on fd (remote.h). It dies with the
 * agent: the agent set PR_SET_PDEATHSIG before the exec, but the exec of a
 * binary with file capabilities (setcap) clears it, so it is set again here,
 * then the parent checked (an agent that died before that left us to init or
 * a subreaper: we end). */
static int remote_child(const char *what, const char *fdarg, const char *agent)
{
	char err[1024];
	uint64_t fd, pid;
	if (cmd_u64(CMD, what, fdarg, 3, 1024, &fd) ||
	    (agent && cmd_u64(CMD, "--agent-pid", agent, 1, INT32_MAX, &pid)))
		return 2;
	if (agent && (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() != (pid_t)pid))
		return 1; /* its agent is gone (or this is no child of it): nothing to do */
	/* a remote worker speaks TLS to its home's control port (ctl.c: OpenSSL
	 * writes with write()): a home that closed first is an error it reports,
	 * not a SIGPIPE that kills it, as for the agent */
	signal(SIGPIPE, SIG_IGN);
	const struct gm_remote_ops *ops = gm_remote_load(err, sizeof(err));
	if (!ops) {
		cmd_err(CMD, what, NULL, "%s", err);
		return 1;
	}
	if (!strcmp(what, "--lend-check"))
		return ops->lend_check_main((int)fd) ? 1 : 0;
	return ops->worker_main((int)fd) ? 1 : 0;
}

/* --lend-root, repeatable: each DIR collected (cmd_args' each). */
struct lend_roots {
	const char *dir[GM_LEND_MAX_ROOTS];
	uint32_t n;
};

static int lend_root(void *arg, int opt, const char *value)
{
	struct lend_roots *lr = arg;
	if (opt != O_LEND_ROOT)
		return 0;
	if (lr->n == GM_LEND_MAX_ROOTS) {
		cmd_err(CMD, "--lend-root", "name a directory above them instead",
			"given more than %d times", GM_LEND_MAX_ROOTS);
		return 2;
	}
	lr->dir[lr->n++] = value;
	return 0;
}

/* The remote workers' options into o (remote.h); 2 on a bad value (said). */
static int remote_opts(const char **val, const struct lend_roots *lr, struct gm_node_opts *o)
{
	uint64_t v;
	if (val[O_LEND_MS]) {
		if (cmd_u64(CMD, "--lend-index-ms", val[O_LEND_MS], 1, GM_LEND_MAX_INDEX_MS, &v))
			return 2;
		o->lend_index_ms = (uint32_t)v;
	}
	if (val[O_PEERS_MS]) {
		if (cmd_u64(CMD, "--peers-refresh-ms", val[O_PEERS_MS], 100, 86400000, &v))
			return 2;
		o->peers_refresh_ms = (uint32_t)v;
	}
	if (val[O_LEND_FILES]) {
		if (cmd_u64(CMD, "--lend-max-files", val[O_LEND_FILES], 1, UINT32_MAX, &v))
			return 2;
		o->lend_max_files = v;
	}
	if (val[O_LEND_WORKERS]) {
		if (cmd_u64(CMD, "--lend-max-workers", val[O_LEND_WORKERS], 1, GM_MAX_WORKERS, &v))
			return 2;
		o->lend_max_workers = (uint32_t)v;
	}
	o->lend_roots = lr->dir;
	o->nlend_roots = lr->n;
	o->lend_python = val[O_LEND_PYTHON] != NULL;
	o->unguarded_ucx = val[O_UNGUARDED] != NULL;
	/* `--peers ''` (an unset variable, as in a unit without its environment
	 * file) is no list: refused, where leaving --peers out is said loudly */
	if (val[O_PEERS] && !val[O_PEERS][strspn(val[O_PEERS], ", \t")]) {
		cmd_err(CMD, "--peers",
			"an unset variable? GM_PEERS in /etc/goldminer/node.env for the systemd "
			"unit; leave --peers out to lend to nobody",
			"'%s' names no agent: give the other agents, HOST[:PORT],... or a DNS name "
			"that resolves to them",
			val[O_PEERS]);
		return 2;
	}
	o->listen = val[O_LISTEN];
	o->peers = val[O_PEERS];
	o->peers_file = val[O_PEERS_FILE];
	o->secret = val[O_SECRET];
	o->tls_cert = val[O_TLS_CERT];
	o->tls_key = val[O_TLS_KEY];
	o->tls_ca = val[O_TLS_CA];
	return 0;
}

/* --cpus: cores, fractions allowed (0.01..GM_MAX_WORKERS). 0, or -EINVAL told. */
static int cpus_opt(const char *s, double *out)
{
	if (cmd_double(CMD, "--cpus", s, 0.01, out))
		return -EINVAL;
	if (*out > GM_MAX_WORKERS) {
		cmd_err(CMD, "--cpus", "cores, e.g. 0.25 or 8", "at most %d, not '%s'",
			GM_MAX_WORKERS, s);
		return -EINVAL;
	}
	return 0;
}

int gm_cmd_node(int argc, char **argv)
{
	const char *val[O_N];
	char *pos[argc > 0 ? argc : 1];
	struct lend_roots lr = {.n = 0};
	struct cmd_args a = {val, pos, 0};
	struct gm_node_opts o = {.socket_path = NULL, .cpus = 0, .verbose = 1};
	int scale_pid = 0, scale_n = -1;
	uint64_t v;

	if (cmd_parse_each(CMD, opts, O_N, argc, argv, &a, lend_root, &lr))
		return 2;
	if (val[O_HELP]) {
		node_usage(stdout);
		return 0;
	}
	if (val[O_CPUS] && cpus_opt(val[O_CPUS], &o.cpus))
		return 2;
	if (val[O_MEM] && (gm_parse_bytes(val[O_MEM], &o.mem) || o.mem < (1u << 20))) {
		cmd_err(CMD, "--mem", "like 512M or 8G", "takes a size of at least 1M, not '%s'",
			val[O_MEM]);
		return 2;
	}
	if (val[O_IDLE]) {
		if (cmd_u64(CMD, "--idle-ms", val[O_IDLE], 1, 86400000, &v))
			return 2;
		o.idle_ms = (uint32_t)v;
	}
	if (val[O_CONNS]) {
		if (cmd_u64(CMD, "--max-conns", val[O_CONNS], 1, GM_NODE_MAX_CONNS, &v))
			return 2;
		o.max_conns = (uint32_t)v;
	}
	if (remote_opts(val, &lr, &o))
		return 2;
	o.socket_path = val[O_SOCKET];
	o.verbose = !val[O_QUIET];
	if (val[O_SCALE] && (sscanf(val[O_SCALE], "%d=%d", &scale_pid, &scale_n) != 2 ||
			     scale_pid <= 0 || scale_n < 0)) {
		cmd_err(CMD, "--scale", "N = 0: the policy decides again", "takes PID=N, not '%s'",
			val[O_SCALE]);
		return 2;
	}
	if (a.npos) {
		cmd_err(CMD, pos[0], "goldminer node --help lists the options",
			"unexpected argument");
		return 2;
	}
	if (val[O_RWORKER])
		return remote_child("--remote-worker", val[O_RWORKER], val[O_AGENT_PID]);
	if (val[O_LCHECK])
		return remote_child("--lend-check", val[O_LCHECK], val[O_AGENT_PID]);
	if (scale_n >= 0)
		return ask_agent(o.socket_path, false, scale_pid, scale_n);
	if (val[O_STATUS])
		return ask_agent(o.socket_path, true, 0, 0);
	/* read by the same parser as --mem, and refused the same way */
	if (gm_host_mem_limit(&v, NULL, 0)) {
		cmd_err(CMD, "GM_MEM_LIMIT", "like 512M or 8G, or unset it",
			"takes a size, not '%s'", getenv("GM_MEM_LIMIT"));
		return 2;
	}
	return run_agent(&o, val[O_METRICS]);
}
