/*
 * plugin.c - the remote-workers plugin's entry (remote.h): gm_remote_plugin, the
 * one symbol libgoldminer-remote.so exports (remote.map), and the ops it
 * returns: create and destroy an agent's remote side, its status.
 *
 * The idea: the node agent dlopen()s this plugin (remote_load.c) only when
 * --listen or --peers is given, so UCX's memory hooks and signal handlers never
 * reach a trainer or an agent that does not use it; the ops table is the whole
 * interface, checked by ABI number and goldminer version at load. The plugin is
 * built from core/remote/: ctl.c (the control port, the handshake), conn.c
 * (connections, the message checks; msg.h the messages), agent.c (accepting,
 * peers, dispatch, tick),
 * home.c (leases for remote workers), lender.c (lent jobs and their worker
 * processes), worker.c (the remote worker process), auth.c (the secret).
 *
 * Not here: the protocol, leases or lending: every op but create, destroy and
 * the status JSON is a call into those files.
 */

#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "agent.h"
#include "auth.h"
#include "conn.h"
#include "goldminer/remote.h"
#include "goldminer/ring.h"
#include "goldminer/util.h"
#include "goldminer/version.h"
#include "ratelog.h"
#include "tls.h"
#include "worker.h"

static void r_destroy(struct gm_remote *r);

/* How agents authenticate: the secret (0) or certificates (3: all three
 * options), else -EINVAL with err saying which option is missing or extra. */
static int auth_opts(const struct gm_remote_cfg *c, char *err, size_t errlen)
{
	int ncert = !!c->tls_cert + !!c->tls_key + !!c->tls_ca;
	if (ncert && ncert < 3) {
		gm_errf(err, errlen,
			"--tls-cert, --tls-key and --tls-ca go together (given: %s%s%s): the "
			"agent's certificate, its key and the CA its peers' certificates "
			"chain to",
			c->tls_cert ? "--tls-cert " : "", c->tls_key ? "--tls-key " : "",
			c->tls_ca ? "--tls-ca" : "");
		return -EINVAL;
	}
	if (ncert && c->secret) {
		gm_errf(err, errlen,
			"--secret and --tls-cert are two ways for agents to authenticate each "
			"other: give one (every agent of a group the same)");
		return -EINVAL;
	}
	if (!ncert && !c->secret) {
		gm_errf(err, errlen,
			"--secret FILE (or --tls-cert, --tls-key, --tls-ca) is required with "
			"--listen or --peers: the agents prove to each other who they are");
		return -EINVAL;
	}
	return ncert;
}

static int r_create(struct gm_remote **out, const struct gm_remote_cfg *c, char *err, size_t errlen)
{
	*out = NULL;
	int ncert = auth_opts(c, err, errlen);
	if (ncert < 0)
		return ncert;
	struct gm_remote *r = calloc(1, sizeof(*r));
	if (!r) {
		gm_errf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	r->net.efd = -1;
	r->lfd = -1;
	r->net.epfd = epoll_create1(EPOLL_CLOEXEC); /* what the node's loop polls */
	r->again = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	struct epoll_event ev = {.events = EPOLLIN, .data.fd = r->again};
	if (r->net.epfd < 0 || r->again < 0 ||
	    epoll_ctl(r->net.epfd, EPOLL_CTL_ADD, r->again, &ev)) {
		int rc = -errno;
		gm_errf(err, errlen, "epoll: %s", strerror(-rc));
		if (r->net.epfd >= 0)
			close(r->net.epfd);
		if (r->again >= 0)
			close(r->again);
		free(r);
		return rc;
	}
	ssize_t xl = readlink("/proc/self/exe", r->exe, sizeof(r->exe) - 1);
	r->exe[xl > 0 ? xl : 0] = '\0';
	r->budget = c->budget;
	r->net.verbose = c->verbose;
	r->net.log = c->log;
	r->net.log_arg = c->log_arg;
	r->net.on_msg = gm_remote_agent_on_msg;
	r->net.job_of = gm_remote_home_job;
	r->net.unlisten = gm_remote_agent_unlisten;
	r->net.admit = gm_remote_agent_admit;
	r->net.peer_name = gm_remote_agent_peer_name;
	r->net.certs = ncert == 3;
	r->net.owner = r;
	r->lend_index_ms = c->lend_index_ms ? c->lend_index_ms : GM_LEND_INDEX_MS;
	r->lend_max_files = c->lend_max_files ? c->lend_max_files : GM_LEND_FILES;
	r->lend_python = c->lend_python;
	r->net.unguarded_ok = c->unguarded_ucx;
	struct gm_ratelog_cfg rc_ = {
	    .lines = LOG_LINES, .total = LOG_TOTAL, .window_ms = LOG_WINDOW_MS, .slots = LOG_ADDRS};
	int rc = gm_ratelog_create(&r->net.ratelog, &rc_);
	if (rc)
		gm_errf(err, errlen, "out of memory");
	for (uint32_t i = 0; !rc && i < c->nlend_roots; i++)
		rc = gm_remote_lend_root(r, c->lend_roots[i], err, errlen);
	if (!rc && c->secret)
		rc = gm_auth_load(&r->net.key, c->secret, err, errlen);
	if (!rc)
		rc = gm_remote_agent_peers(r, c->peers, c->peers_file, c->listen, err, errlen);
	if (!rc)
		rc = gm_remote_net_init(&r->net, true, err, errlen);
	if (!rc && r->net.certs)
		rc = gm_remote_tls_certs(r->net.tls_cli, r->net.tls_srv, c->tls_cert, c->tls_key,
					 c->tls_ca, err, errlen);
	if (!rc) { /* which guard UCX's ports have, and why: said once */
		char line[768];
		gm_remote_net_guard_line(&r->net, line, sizeof(line));
		gm_remote_logf(&r->net, "%s", line);
	}
	if (!rc && c->listen)
		rc = gm_remote_agent_listen(r, c->listen, err, errlen);
	if (!rc)
		rc = gm_remote_agent_discover(r, c->peers_refresh_ms, err, errlen);
	if (rc) {
		r_destroy(r);
		return rc;
	}
	*out = r;
	return 0;
}

static void r_destroy(struct gm_remote *r)
{
	if (!r)
		return;
	for (int i = 0; i < MAX_LJOBS; i++)
		if (r->ljobs[i].used)
			gm_remote_lend_end(&r->ljobs[i]);
	for (int i = 0; i < MAX_CONNS; i++)
		if (r->net.conns[i]) {
			gm_remote_conn_close(&r->net, r->net.conns[i]);
			gm_remote_home_revoke(r, r->net.conns[i], "the agent stops");
		}
	for (int i = 0; i < MAX_HJOBS; i++)
		if (r->hjobs[i].used)
			gm_remote_home_drop(&r->hjobs[i]);
	gm_peers_resolver_stop(r->res); /* never waits for a lookup in flight */
	gm_remote_net_fini(&r->net);
	gm_remote_logs_flush(&r->net, INT64_MAX); /* every count held back, said */
	gm_ratelog_destroy(r->net.ratelog);
	gm_remote_lend_reap_all();
	gm_remote_lend_fini(r);
	if (r->net.epfd >= 0)
		close(r->net.epfd);
	if (r->again >= 0)
		close(r->again);
	free(r);
}

static int r_fd(struct gm_remote *r)
{
	return r->net.epfd;
}

static uint16_t r_port(struct gm_remote *r)
{
	return r->port;
}

static void r_set_lendable(struct gm_remote *r, uint32_t n)
{
	r->lendable = n;
}

static void r_set_capacity(struct gm_remote *r, double cores, double img_per_core, bool own_jobs)
{
	r->lend_cores = cores > 0 ? cores : 0;
	r->lend_rate = img_per_core > 0 ? img_per_core : 0;
	r->own_jobs = own_jobs;
}

static uint32_t r_lent(struct gm_remote *r)
{
	return gm_remote_lend_total(r);
}

/* A JSON text being written into buf[len]; off may pass len (then cut). */
struct jout {
	char *buf;
	size_t len, off;
};

static void putf(struct jout *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(struct jout *o, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int k = vsnprintf(o->buf + o->off, o->off < o->len ? o->len - o->off : 0, fmt, ap);
	va_end(ap);
	o->off += k > 0 ? (size_t)k : 0;
}

/* before, then s as a JSON string literal (gm_json_quote): every string here is
 * under 300 bytes, and 6 * 300 + 3 holds the longest escaped. */
static void putq(struct jout *o, const char *before, const char *s)
{
	char q[6 * 300 + 3];
	gm_json_quote(q, sizeof(q), s);
	putf(o, "%s%s", before, q);
}

/* One peer: its state (connected, down: connected but not heard from for
 * DOWN_MS, connecting), the workers each side runs for the other's jobs, its
 * liveness age and its last heartbeat's lendable capacity. */
static void peer_json(const struct gm_remote *r, int p, int64_t now, struct jout *o)
{
	const struct peer *pe = &r->peers[p];
	bool up = pe->c && pe->c->st == C_OK;
	const char *st = up && !pe->down	      ? "connected"
			 : up || !(pe->dial || pe->c) ? "down"
						      : "connecting";
	uint32_t granted = 0; /* its workers serving our jobs, as it said */
	for (int i = 0; i < MAX_HJOBS; i++)
		granted += r->hjobs[i].used ? r->hjobs[i].granted[p] : 0;
	uint32_t by_us = 0; /* ours serving its jobs */
	for (int i = 0; i < MAX_LJOBS; i++)
		if (r->ljobs[i].used && r->ljobs[i].home &&
		    gm_remote_peer_of(r, r->ljobs[i].home) == p)
			by_us += r->ljobs[i].n;
	putq(o, "{\"addr\": ", pe->addr);
	putf(o,
	     ", \"state\": \"%s\", \"workers_for_us\": %u, "
	     "\"workers_connected\": %u, \"img_per_s\": %.1f, \"workers_lent_by_us\": %u",
	     st, granted, pe->workers, pe->rate, by_us);
	if (up && pe->c->beat.seq) { /* its liveness and its last heartbeat */
		const struct m_beat *b = &pe->c->beat;
		putf(o,
		     ", \"heard_ms_ago\": %" PRId64 ", \"lendable_cores\": %.3f, "
		     "\"lendable_workers\": %u, \"lendable_img_per_s\": %.1f, "
		     "\"workers_lent_to_us\": %u",
		     now - pe->c->heard_ms, b->mcores / 1000.0, b->slots,
		     b->mcores / 1000.0 * b->rate, b->for_you);
	}
	if (strcmp(pe->from, pe->ip)) /* a name's (a name is [A-Za-z0-9._-]) */
		putq(o, ", \"from\": ", pe->from);
	if (pe->last_err[0] && !(up && !pe->down))
		putq(o, ", \"error\": ", pe->last_err);
	putf(o, "}");
}

static void r_status_json(struct gm_remote *r, char *buf, size_t len)
{
	struct jout o = {.buf = buf, .len = len};
	int64_t now = gm_now_ms();
	putf(&o,
	     "\"remote\": {\"port\": %u, \"lendable\": %u, \"lendable_cores\": %.3f, "
	     "\"lend_img_per_core\": %.1f, \"lent\": %u, \"refused\": %" PRIu64 ", \"peers\": [",
	     r->port, r->lendable, r->lend_cores, r->lend_rate, gm_remote_lend_total(r),
	     r->refused);
	int first = 1;
	for (int p = 0; p < r->npeers; p++) {
		if (!r->peers[p].used)
			continue;
		putf(&o, "%s", first ? "" : ", ");
		peer_json(r, p, now, &o);
		first = 0;
	}
	putf(&o, "]");
	/* the names of --peers and --peers-file (only when there are names, their
	 * error only when there is one) */
	for (int i = 0; i < r->nanswers; i++) {
		const struct peer_answer *a = &r->answers[i];
		putf(&o, "%s", i ? ", " : ", \"peer_names\": [");
		putq(&o, "{\"name\": ", a->host);
		putf(&o, ", \"addresses\": %d", a->n);
		if (a->gai)
			putq(&o, ", \"error\": ", gai_strerror(a->gai));
		putf(&o, "}%s", i == r->nanswers - 1 ? "]" : "");
	}
	putf(&o, ", \"lent_jobs\": [");
	first = 1;
	for (int i = 0; i < MAX_LJOBS; i++) {
		const struct ljob *l = &r->ljobs[i];
		if (!l->used)
			continue;
		putf(&o, "%s{\"job\": \"%016" PRIx64 "\"", first ? "" : ", ", l->token);
		putq(&o, ", \"home\": ", l->home_addr);
		putf(&o, ", \"workers\": %u}", l->n);
		first = 0;
	}
	putf(&o, "]}");
}

/* The peers' families (Prometheus text): one sample per peer of each. */
static size_t r_metrics_text(struct gm_remote *r, char *buf, size_t len)
{
	static const char *const fam[][2] = {
	    {"goldminer_peer_up", "1 while the peer is connected and heard from within 1 s."},
	    {"goldminer_peer_heard_ms_ago", "Milliseconds since the peer's last message."},
	    {"goldminer_peer_lendable_cores", "Cores the peer says it can lend (its heartbeat)."},
	    {"goldminer_peer_lendable_img_per_s",
	     "Images/s the peer says it can lend (0: it has no job to measure)."},
	    {"goldminer_peer_workers_lent_to_us", "Workers the peer says it runs for our jobs."},
	    {"goldminer_peer_workers_lent_by_us", "Workers this agent runs for the peer's jobs."},
	};
	struct jout o = {.buf = buf, .len = len};
	int64_t now = gm_now_ms();
	for (size_t f = 0; f < sizeof(fam) / sizeof(fam[0]); f++) {
		putf(&o, "# HELP %s %s\n# TYPE %s gauge\n", fam[f][0], fam[f][1], fam[f][0]);
		for (int p = 0; p < r->npeers; p++) {
			const struct peer *pe = &r->peers[p];
			if (!pe->used)
				continue;
			bool up = pe->c && pe->c->st == C_OK;
			struct m_beat b = up ? pe->c->beat : (struct m_beat){0};
			uint32_t by_us = 0;
			for (int i = 0; i < MAX_LJOBS; i++)
				if (r->ljobs[i].used && r->ljobs[i].home &&
				    gm_remote_peer_of(r, r->ljobs[i].home) == p)
					by_us += r->ljobs[i].n;
			double v[] = {up && !pe->down,	 up ? (double)(now - pe->c->heard_ms) : -1,
				      b.mcores / 1000.0, b.mcores / 1000.0 * b.rate,
				      b.for_you,	 by_us};
			putf(&o, "%s{peer=\"%s\"} %.6g\n", fam[f][0], pe->addr, v[f]);
		}
	}
	return o.off < len ? o.off : len;
}

static const struct gm_remote_ops ops = {
    .abi = GM_REMOTE_ABI,
    .version = GM_VERSION,
    .create = r_create,
    .destroy = r_destroy,
    .fd = r_fd,
    .service = gm_remote_agent_service,
    .port = r_port,
    .job_add = gm_remote_home_add,
    .job_remove = gm_remote_home_remove,
    .job_want = gm_remote_home_want,
    .job_info = gm_remote_home_info,
    .peers_lendable = gm_remote_home_lendable,
    .set_lendable = r_set_lendable,
    .set_capacity = r_set_capacity,
    .lent = r_lent,
    .status_json = r_status_json,
    .metrics_text = r_metrics_text,
    .worker_main = gm_remote_worker_main,
    .lend_check_main = gm_remote_lend_check_main,
    .reload = gm_remote_agent_reload,
    .pyjob_add = gm_remote_pyhome_add,
};

const struct gm_remote_ops *gm_remote_plugin(void)
{
	return &ops;
}
