/*
 * agent.c - the node agent's network side of the remote plugin (agent.h): the
 * control port on --listen, the connections to the agents of --peers, the
 * dispatch of their messages and the tick that runs after every poll.
 *
 * The idea: a connection to the control port (ctl.h) is checked against the
 * addresses of --peers as it is accepted (a host not named is reset before a
 * byte is read, and never reaches UCX); a peer's may then run its handshake
 * (ctl.c, AUTH_MS in all), at most CTL_PER_ADDR from one address and CTL_MAX
 * in all at a time; only then does it get a UCX endpoint. Everything the agent
 * polls (the control sockets, every UCP worker's event fd) is in one epoll set,
 * the fd the node's loop polls. Every tick closes the dead connections
 * in one place and in one order (endpoint closed first, so nothing of the dead
 * writer lands anywhere; then its lease back; then its lent jobs ended),
 * reconnects the peers every RETRY_MS and runs the home's (which ends the
 * leases past their deadline or bound) and the lender's ticks. Liveness:
 * every BEAT_MS a heartbeat (msg.h: what this agent can lend) goes to every
 * agent connected, both ways; a peer not heard from for DOWN_MS is down, and
 * the home takes back what its workers hold at once (home.c), not at the
 * lease deadline; heard again, it is up and asked again.
 *
 * Not here: what a lease or a lent job is (home.c, lender.c), the handshake
 * (ctl.c), the ops table (plugin.c).
 */

#include <errno.h>
#include <ifaddrs.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <ucp/api/ucp.h>

#include "agent.h"
#include "check.h"
#include "conn.h"
#include "ctl.h"
#include "msg.h"
#include "peers.h"
#include "goldminer/util.h"

/* ---- the control port ---------------------------------------------------- */

/* fd in the epoll set the node's loop polls (op: EPOLL_CTL_ADD or _MOD). */
static void watch(struct gm_remote *r, int fd, int op, short events)
{
	struct epoll_event ev = {.events = ((events & POLLOUT) ? EPOLLOUT : 0) |
					   ((events & POLLIN) ? EPOLLIN : 0),
				 .data.fd = fd};
	epoll_ctl(r->net.epfd, op, fd, &ev);
}

void gm_remote_agent_unlisten(void *owner)
{
	struct gm_remote *r = owner;
	for (int i = 0; i < CTL_MAX; i++) {
		gm_remote_ctl_free(r->ctls[i]);
		r->ctls[i] = NULL;
	}
	for (int p = 0; p < r->npeers; p++) {
		gm_remote_ctl_free(r->peers[p].dial);
		r->peers[p].dial = NULL;
	}
	if (r->lfd >= 0)
		close(r->lfd);
	r->lfd = -1;
}

static bool allowed(const struct gm_remote *r, const char *ip)
{
	for (int i = 0; i < r->nallowed; i++)
		if (!strcmp(r->allowed[i], ip))
			return true;
	return false;
}

/* Why a connection from ip is refused at once (NULL: it may start the handshake). */
static const char *refusal(const struct gm_remote *r, const char *ip, int *slot)
{
	int from = 0;
	*slot = -1;
	if (!allowed(r, ip))
		return "not a host in --peers";
	for (int i = 0; i < CTL_MAX; i++) {
		if (!r->ctls[i])
			*slot = *slot < 0 ? i : *slot;
		else if (!strcmp(r->ctls[i]->ip, ip))
			from++;
	}
	if (from >= CTL_PER_ADDR)
		return "too many connections from it still in their handshake";
	return *slot < 0 ? "too many connections in their handshake" : NULL;
}

/* Reset (no read, no TIME_WAIT here); said through the per-address limiter
 * (gm_remote_logf_from: a flood from one address or many does not flood the
 * log; the status counts them all). */
static void refuse(struct gm_remote *r, int fd, const char *ip, const char *why)
{
	struct linger lg = {1, 0};
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(fd);
	r->refused++;
	gm_remote_logf_from(&r->net, ip, "refused a connection from %s: %s", ip, why);
}

/* The numeric address of a peer socket (an IPv4-mapped IPv6 one as IPv4). */
static void ip_of(struct sockaddr_storage *ss, socklen_t sl, char *ip, size_t len)
{
	struct sockaddr_in v4;
	struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
	if (ss->ss_family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&v6->sin6_addr)) {
		v4 = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = v6->sin6_port};
		memcpy(&v4.sin_addr, &v6->sin6_addr.s6_addr[12], 4);
		memcpy(ss, &v4, sizeof(v4));
		sl = sizeof(v4);
	}
	if (getnameinfo((struct sockaddr *)ss, sl, ip, (socklen_t)len, NULL, 0, NI_NUMERICHOST))
		copy_str(ip, len, "?");
}

/* Connections that arrived: a stranger is reset before a byte is read; a peer's
 * starts its handshake, within the limits on connections. */
static void ctl_accept(struct gm_remote *r)
{
	for (int k = 0; r->lfd >= 0 && k < CTL_ACCEPTS; k++) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		char ip[INET6_ADDRSTRLEN];
		int slot,
		    fd = accept4(r->lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			break; /* EAGAIN; or out of descriptors: the next round */
		ip_of(&ss, sl, ip, sizeof(ip));
		const char *why = refusal(r, ip, &slot);
		if (why) {
			refuse(r, fd, ip, why);
			continue;
		}
		r->ctls[slot] = gm_remote_ctl_accepted(fd, ip);
		if (r->ctls[slot])
			watch(r, fd, EPOLL_CTL_ADD, POLLIN);
	}
}

/* A peer we could not reach or that refused us: said when the reason changes. */
static void peer_failed(struct gm_remote *r, struct peer *p, const char *why, int64_t now)
{
	if (strcmp(p->last_err, why))
		gm_remote_logf_from(&r->net, p->ip, "peer %s: %s", p->addr, why);
	copy_str(p->last_err, sizeof(p->last_err), why);
	p->retry_ms = now + RETRY_MS;
}

/* Peer p's agent connected to us: it is up (a restarted agent dials its peers
 * as it starts), so ours to it is made now, not at the end of the RETRY_MS
 * since our last one failed (a restarted peer lent again after 3.4 s, 2 of
 * them waiting here; test_remote's restart case and bench-single.sh time it). */
static void peer_back(struct gm_remote *r, int p, int64_t now)
{
	struct peer *pe = p >= 0 ? &r->peers[p] : NULL;
	if (!pe || pe->c || pe->dial || pe->retry_ms <= now)
		return;
	gm_remote_logf_from(&r->net, pe->ip,
			    "peer %s: its agent connected to us: connecting to it now", pe->addr);
	pe->retry_ms = now;
}

/* One step of a handshake; true when it ended (x is then to be freed). */
static bool ctl_run(struct gm_remote *r, struct ctl *x)
{
	short before = gm_remote_ctl_events(x);
	gm_remote_ctl_step(&r->net, x);
	if (!x->status && gm_remote_ctl_events(x) != before)
		watch(r, x->fd, EPOLL_CTL_MOD, gm_remote_ctl_events(x));
	return x->status != 0;
}

static void ctl_service(struct gm_remote *r, int64_t now)
{
	ctl_accept(r);
	for (int i = 0; i < CTL_MAX; i++) {
		struct ctl *x = r->ctls[i];
		if (!x || !ctl_run(r, x))
			continue;
		if (x->status < 0 && x->role != ROLE_WORKER) /* a failed handshake */
			gm_remote_logf_from(&r->net, x->ip, "connection from %s closed: %s", x->ip,
					    x->why);
		if (x->status < 0 && !x->client && strstr(x->why, "another goldminer version"))
			for (int p = 0; p < r->npeers; p++) /* --status says it of that peer */
				if (!strcmp(r->peers[p].ip, x->ip) && !r->peers[p].c)
					copy_str(r->peers[p].last_err, sizeof(r->peers[p].last_err),
						 x->why);
		if (x->status > 0 && x->role == ROLE_AGENT && x->c)
			peer_back(r, gm_remote_peer_of(r, x->c), now);
		gm_remote_ctl_free(x);
		r->ctls[i] = NULL;
	}
	for (int p = 0; p < r->npeers; p++) {
		struct peer *pe = &r->peers[p];
		if (!pe->dial || !ctl_run(r, pe->dial))
			continue;
		if (pe->dial->status > 0) {
			pe->c = pe->dial->c;
			pe->c->port = pe->port;
			pe->down = false;
			pe->gen = ++r->peer_gen; /* a new state: refusals' waits start afresh */
		} else
			peer_failed(r, pe, pe->dial->why, now);
		gm_remote_ctl_free(pe->dial);
		pe->dial = NULL;
	}
}

/* ---- the tick ---------------------------------------------------------------- */

static void discover_tick(struct gm_remote *r);

/* Dead connections: their lease back, their peer slot free, then the endpoint. */
static void conns_tick(struct gm_remote *r, int64_t now)
{
	for (int i = 0; i < MAX_CONNS; i++) {
		struct conn *c = r->net.conns[i];
		if (!c)
			continue;
		if (c->st != C_DEAD)
			continue;
		gm_remote_conn_close(&r->net,
				     c); /* first: then nothing of it can land in the slot */
		gm_remote_home_revoke(r, c, c->why);
		if (c->peer >= 0) {
			struct peer *p = &r->peers[c->peer];
			peer_failed(r, p, c->why, now);
			p->c = NULL;
		} else if (c->role == ROLE_AGENT || !c->role) {
			gm_remote_logf_from(&r->net, c->ip, "connection from %s closed: %s", c->ip,
					    c->why);
		}
		for (int k = 0; k < MAX_LJOBS; k++)
			if (r->ljobs[k].used && r->ljobs[k].home == c) {
				gm_remote_logf_from(&r->net, c->ip,
						    "job %016" PRIx64
						    ": its home agent is gone; its remote "
						    "workers stop",
						    r->ljobs[k].token);
				gm_remote_lend_end(&r->ljobs[k]);
			}
		gm_remote_lend_forget(r, c);
		gm_remote_conn_free(&r->net, c);
	}
}

static void peers_tick(struct gm_remote *r, int64_t now)
{
	for (int p = 0; p < r->npeers; p++) {
		struct peer *pe = &r->peers[p];
		if (!pe->used || pe->c || pe->dial || now < pe->retry_ms)
			continue;
		int rc = gm_remote_ctl_dial(pe->addr, ROLE_AGENT, 0, NULL, &pe->dial);
		if (rc) {
			snprintf(pe->last_err, sizeof(pe->last_err), "cannot connect: %s",
				 strerror(-rc));
			pe->retry_ms = now + RETRY_MS;
			continue;
		}
		pe->dial->peer = p;
		copy_str(pe->dial->name, sizeof(pe->dial->name), pe->from);
		pe->dial->port = r->port; /* its HELLO says ours: the peer knows us by it */
		watch(r, pe->dial->fd, EPOLL_CTL_ADD, gm_remote_ctl_events(pe->dial));
	}
}

/* ---- liveness: heartbeats ----------------------------------------------------- */

bool gm_remote_same_agent(const struct conn *a, const struct conn *b)
{
	return a->port && a->port == b->port && !strcmp(a->ip, b->ip);
}

bool gm_remote_agent_admit(void *owner, const char *ip, uint32_t port)
{
	const struct gm_remote *r = owner;
	for (int p = 0; p < r->npeers; p++)
		if (r->peers[p].used && r->peers[p].port == port && !strcmp(r->peers[p].ip, ip))
			return true;
	return false;
}

const char *gm_remote_agent_peer_name(void *owner, const char *ip, uint32_t port)
{
	const struct gm_remote *r = owner;
	for (int p = 0; p < r->npeers; p++)
		if (r->peers[p].used && r->peers[p].port == port && !strcmp(r->peers[p].ip, ip))
			return r->peers[p].from;
	return NULL;
}

int gm_remote_peer_of(const struct gm_remote *r, const struct conn *c)
{
	if (c->peer >= 0)
		return c->peer;
	for (int p = 0; p < r->npeers; p++)
		if (r->peers[p].used && c->port && r->peers[p].port == c->port &&
		    !strcmp(r->peers[p].ip, c->ip))
			return p;
	return -1;
}

/* A beat to every agent connected (both ways: the home hears its lender on
 * the connection it asks on, the lender its home on the one it answers on):
 * what this agent can lend, and how many workers it runs for that agent. */
static void beats_tick(struct gm_remote *r, int64_t now)
{
	if (now - r->beat_ms < BEAT_MS)
		return;
	r->beat_ms = now;
	double cores = r->lend_cores * 1000.0, rate = r->lend_rate;
	struct m_beat b = {.mcores = cores <= 0			? 0
				     : cores >= BEAT_MAX_MCORES ? BEAT_MAX_MCORES
								: (uint32_t)cores,
			   .slots = r->lendable < BEAT_MAX_WORKERS ? r->lendable : BEAT_MAX_WORKERS,
			   .lent = gm_remote_lend_total(r),
			   .rate = rate <= 0		   ? 0
				   : rate >= BEAT_MAX_RATE ? BEAT_MAX_RATE
							   : (uint32_t)rate};
	b.lent = b.lent < BEAT_MAX_WORKERS ? b.lent : BEAT_MAX_WORKERS;
	for (int i = 0; i < MAX_CONNS; i++) {
		struct conn *c = r->net.conns[i];
		if (!c || c->st != C_OK || c->role != ROLE_AGENT)
			continue;
		b.for_you = 0;
		for (int k = 0; k < MAX_LJOBS; k++)
			if (r->ljobs[k].used && r->ljobs[k].home &&
			    gm_remote_same_agent(r->ljobs[k].home, c))
				b.for_you += r->ljobs[k].n;
		b.for_you = b.for_you < b.lent ? b.for_you : b.lent;
		b.seq = ++r->beat_seq;
		gm_remote_conn_send(c, AM_BEAT, &b, sizeof(b), NULL, 0);
	}
}

/* A peer's heartbeat: checked (check.h), then kept on its connection. */
static void on_beat(struct gm_remote *r, struct conn *c, const struct m_beat *b)
{
	char why[200];
	if (c->role != ROLE_AGENT) {
		gm_remote_conn_kill(c, "%s: a heartbeat from a connection that is not an agent",
				    c->ip);
		return;
	}
	if (!gm_remote_check_beat(b, c->beat.seq, why, sizeof(why))) {
		gm_remote_conn_kill(c, "%s: refused its heartbeat: %s", c->ip, why);
		return;
	}
	/* a peer that can lend again after it could not: a new state (home.c
	 * asks it again the jobs it refused, without their doubled waits) */
	if (c->peer >= 0 && c->peer < r->npeers && b->slots && !c->beat.slots)
		r->peers[c->peer].gen = ++r->peer_gen;
	c->beat = *b;
}

/* A connected peer not heard from for DOWN_MS is down: what its workers hold
 * is taken back now (home.c), not at the lease deadline; heard again, it is
 * up and asked again. */
static void liveness_tick(struct gm_remote *r, int64_t now)
{
	char why[128];
	for (int p = 0; p < r->npeers; p++) {
		struct peer *pe = &r->peers[p];
		if (!pe->used || !pe->c || pe->c->st != C_OK)
			continue;
		int64_t age = now - pe->c->heard_ms;
		if (age >= DOWN_MS && !pe->down) {
			pe->down = true;
			pe->down_ms = now;
			snprintf(why, sizeof(why), "not heard from for %" PRId64 " ms", age);
			gm_remote_logf_from(&r->net, pe->ip, "peer %s is down: %s", pe->addr, why);
			copy_str(pe->last_err, sizeof(pe->last_err), why);
			gm_remote_home_peer_down(r, p, why);
		} else if (age < DOWN_MS && pe->down) {
			pe->down = false;
			pe->gen = ++r->peer_gen;
			gm_remote_logf_from(&r->net, pe->ip,
					    "peer %s is up again (down for %" PRId64 " ms)",
					    pe->addr, now - pe->down_ms);
			pe->last_err[0] = '\0';
		}
	}
}

/* A step of the service that took HELD_MS or more is logged by name (node.c
 * logs the whole of it too): the next one to look for when a peer took this
 * agent for down, or the lease deadlines ran late. *t0: the step's start. */
#define HELD_MS 500
static void held(struct gm_remote *r, const char *step, int64_t *t0)
{
	int64_t now = gm_now_ms();
	if (now - *t0 >= HELD_MS)
		gm_remote_logf(&r->net, "remote workers: %s took %" PRId64 " ms", step, now - *t0);
	*t0 = now;
}

/* The most one service runs on before the node's loop answers its jobs (and
 * calls again at once: r->again is written) */
#define SERVICE_SLICE_MS 50

void gm_remote_agent_service(struct gm_remote *r)
{
	int64_t now = gm_now_ms(), t0 = now;
	uint64_t one = 1;
	(void)!read(r->again, &one, sizeof(one)); /* (drained: this is the call) */
	for (int round = 0; round < 64; round++) {
		gm_remote_net_progress(&r->net);
		held(r, "UCX's progress", &t0);
		ctl_service(r, now);
		held(r, "the control port", &t0);
		if (round) /* a home receiving a flood of samples still beats on time:
			      its lenders take it for down after DOWN_MS */
			beats_tick(r, gm_now_ms());
		if (round == 0) {
			discover_tick(r);
			held(r, "discovering peers by DNS", &t0);
			beats_tick(r, now);
			held(r, "sending heartbeats", &t0);
			liveness_tick(r, now);
			gm_remote_lend_tick(r, now);
			held(r, "lending", &t0);
			conns_tick(r, now);
			held(r, "closing dead connections", &t0);
			peers_tick(r, now);
			held(r, "connecting to peers", &t0);
			gm_remote_home_tick(r, now);
			held(r, "the home's leases and asks", &t0);
			gm_remote_logs_flush(&r->net, now);
			continue;
		}
		if (gm_remote_net_arm(&r->net))
			break;
		if (round == 63 || gm_now_ms() - now >= SERVICE_SLICE_MS) {
			one = 1; /* work left: the node's poll returns at once */
			(void)!write(r->again, &one, sizeof(one));
			break;
		}
	}
}

/* ---- the peers: --peers, --peers-file, their names' answers ----------------- */

int gm_remote_agent_peers(struct gm_remote *r, const char *list, const char *file,
			  const char *listen, char *err, size_t errlen)
{
	const char *colon = listen ? strrchr(listen, ':') : NULL;
	unsigned long port = colon ? strtoul(colon + 1, NULL, 10) : 0;
	r->dport = port <= 65535 ? (uint16_t)port : 0;
	int rc = gm_peers_list(list, r->dport, r->entries, PEER_ENTRIES, &r->nentries, err, errlen);
	r->ncli = r->nentries;
	if (!rc && file) {
		copy_str(r->peers_file, sizeof(r->peers_file), file);
		rc = gm_peers_file(file, r->dport, r->entries, PEER_ENTRIES, &r->nentries, err,
				   errlen);
	}
	/* an agent of no peer admits nobody: said even under --quiet, since its
	 * lending (what --listen is for) silently does nothing */
	if (!rc && r->nentries == 0)
		gm_log("node",
		       "peers: none (%s%s%s): this agent lends to nobody and asks nobody, and "
		       "every agent that dials it is refused; name the other agents in --peers%s",
		       file ? "--peers-file " : "no --peers nor --peers-file", file ? file : "",
		       file ? " names no host" : "", file ? " or that file (then SIGHUP)" : "");
	return rc;
}

/* A candidate: an address of an entry, with the entry's port. */
struct cand {
	char ip[INET6_ADDRSTRLEN];
	uint16_t port;
	const char *from;
};

static int cand_cmp(const void *a, const void *b)
{
	const struct cand *x = a, *y = b;
	int c = gm_peers_ipcmp(x->ip, y->ip);
	return c ? c : (int)x->port - (int)y->port;
}

static const struct peer_answer *answer_of(const struct gm_remote *r, const char *host)
{
	for (int i = 0; i < r->nanswers; i++)
		if (!strcmp(r->answers[i].host, host))
			return &r->answers[i];
	return NULL;
}

/* Every address of every entry (numeric ones as they are, names by their last
 * answer), sorted and unique; count, into c[max] (malloc'd by the caller). */
static int candidates(struct gm_remote *r, struct cand *c, int max)
{
	int n = 0;
	struct peer_answer num;
	for (int e = 0; e < r->nentries; e++) {
		const struct peer_entry *pe = &r->entries[e];
		const struct peer_answer *a = answer_of(r, pe->host);
		if (pe->numeric)
			a = gm_peers_lookup(pe->host, true, &num) ? NULL : &num;
		for (int i = 0; a && i < a->n && n < max; i++) {
			copy_str(c[n].ip, sizeof(c[n].ip), a->ip[i]);
			c[n].port = pe->port;
			c[n++].from = pe->host;
		}
	}
	qsort(c, (size_t)n, sizeof(*c), cand_cmp);
	int k = 0;
	for (int i = 0; i < n; i++)
		if (!k || cand_cmp(&c[k - 1], &c[i]))
			c[k++] = c[i];
	return k;
}

/* This agent itself: an address of one of its interfaces, on its port. */
static bool is_self(const struct gm_remote *r, const struct cand *c, struct ifaddrs *ifs)
{
	if (c->port != r->port)
		return false;
	for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
		char ip[INET6_ADDRSTRLEN];
		if (!i->ifa_addr ||
		    (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6))
			continue;
		socklen_t sl = i->ifa_addr->sa_family == AF_INET ? sizeof(struct sockaddr_in)
								 : sizeof(struct sockaddr_in6);
		if (!getnameinfo(i->ifa_addr, sl, ip, sizeof(ip), NULL, 0, NI_NUMERICHOST) &&
		    !gm_peers_ipcmp(ip, c->ip))
			return true;
	}
	return false;
}

/* Close what an address no longer allowed holds here: its connections in
 * their handshake, and its connections (an agent's, its remote workers': their
 * leases are taken back by the tick, as on a cut link). */
static void disallow(struct gm_remote *r, const char *ip)
{
	for (int i = 0; i < CTL_MAX; i++)
		if (r->ctls[i] && !strcmp(r->ctls[i]->ip, ip)) {
			gm_remote_ctl_free(r->ctls[i]);
			r->ctls[i] = NULL;
		}
	for (int i = 0; i < MAX_CONNS; i++)
		if (r->net.conns[i] && !strcmp(r->net.conns[i]->ip, ip))
			gm_remote_conn_kill(r->net.conns[i], "%s is no longer a peer", ip);
}

/* The allowed addresses become ips[0..n): the ones that left are closed out,
 * and UCX's listening sockets admit the new set. */
static void allow(struct gm_remote *r, char (*ips)[INET6_ADDRSTRLEN], int n)
{
	bool same = n == r->nallowed;
	for (int i = 0; same && i < n; i++)
		same = !strcmp(ips[i], r->allowed[i]);
	if (same)
		return;
	for (int i = 0; i < r->nallowed; i++) {
		bool stays = false;
		for (int k = 0; k < n && !stays; k++)
			stays = !strcmp(ips[k], r->allowed[i]);
		if (!stays)
			disallow(r, r->allowed[i]);
	}
	for (int i = 0; i < n; i++) {
		copy_str(r->allowed[i], sizeof(r->allowed[0]), ips[i]);
		copy_str(r->net.allowed[i], sizeof(r->net.allowed[0]), ips[i]);
	}
	r->nallowed = r->net.nallowed = n;
	int rc = gm_remote_net_reguard(&r->net);
	if (rc < 0)
		gm_remote_logf(&r->net, "peers: cannot set the addresses UCX's ports admit: %s",
			       strerror(-rc));
}

/* A peer that is no longer one: its connection closes (the tick takes back
 * what it held), its slot is free. */
static void peer_drop(struct gm_remote *r, int p)
{
	struct peer *pe = &r->peers[p];
	if (r->started)
		gm_remote_logf(&r->net, "peer %s (%s) is no longer a peer: its connection closes",
			       pe->addr, pe->from);
	gm_remote_ctl_free(pe->dial);
	if (pe->c) {
		pe->c->peer = -1;
		gm_remote_conn_kill(pe->c, "no longer a peer");
	}
	for (int i = 0; i < MAX_HJOBS; i++) {
		r->hjobs[i].asked[p] = r->hjobs[i].granted[p] = r->hjobs[i].said[p] = 0;
		r->hjobs[i].ask_ms[p] = 0;
	}
	memset(pe, 0, sizeof(*pe));
}

static void peer_add(struct gm_remote *r, const struct cand *c)
{
	int p = 0;
	while (r->peers[p].used)
		p++; /* a free one exists: at most MAX_PEERS are dialed */
	struct peer *pe = &r->peers[p];
	memset(pe, 0, sizeof(*pe));
	pe->used = true;
	copy_str(pe->ip, sizeof(pe->ip), c->ip);
	copy_str(pe->from, sizeof(pe->from), c->from);
	pe->port = c->port;
	snprintf(pe->addr, sizeof(pe->addr), strchr(c->ip, ':') ? "[%s]:%u" : "%s:%u", c->ip,
		 c->port);
	if (r->started)
		gm_remote_logf(&r->net, "peer %s (%s) joins: connecting to it", pe->addr, pe->from);
	if (p >= r->npeers)
		r->npeers = p + 1;
}

/* The set of peers made again from the entries and the last answers, in one
 * step of the loop: the allowed addresses, then the peers dialed (the first
 * MAX_PEERS in address order, never this agent itself). */
static void peers_apply(struct gm_remote *r)
{
	int max = PEER_ENTRIES * PEER_ADDRS;
	struct cand *c = malloc(sizeof(*c) * (size_t)max);
	char(*ips)[INET6_ADDRSTRLEN] = malloc(sizeof(*ips) * NET_ALLOWED);
	struct ifaddrs *ifs = NULL;
	if (!c || !ips) {
		gm_remote_logf(&r->net, "peers: out of memory: the peers stay as they were");
		goto out;
	}
	int n = candidates(r, c, max), nips = 0, over = 0;
	for (int i = 0; i < n; i++) {
		if (nips && !strcmp(ips[nips - 1], c[i].ip))
			continue;
		if (nips == NET_ALLOWED) {
			over++;
			continue;
		}
		copy_str(ips[nips++], sizeof(ips[0]), c[i].ip);
	}
	if (over != r->said_over && over)
		gm_remote_logf(&r->net,
			       "peers: %d addresses more than the %d this agent admits: the first "
			       "%d in address order are admitted",
			       over, NET_ALLOWED, NET_ALLOWED);
	r->said_over = over;
	allow(r, ips, nips);
	getifaddrs(&ifs); /* none: nothing is taken for this agent itself */
	bool want[PEER_ENTRIES * PEER_ADDRS];
	int nw = 0, extra = 0;
	for (int i = 0; i < n; i++) {
		bool admitted = false;
		for (int k = 0; k < nips && !admitted; k++)
			admitted = !strcmp(ips[k], c[i].ip);
		want[i] = admitted && !is_self(r, &c[i], ifs);
		if (want[i] && nw == MAX_PEERS) {
			want[i] = false;
			extra++;
		}
		nw += want[i];
	}
	if (extra && extra != r->said_np)
		gm_remote_logf(&r->net,
			       "peers: %d more than the %d peers an agent connects to: it connects "
			       "to the first %d in address order (the others may connect to it)",
			       extra, MAX_PEERS, MAX_PEERS);
	r->said_np = extra;
	for (int p = 0; p < r->npeers; p++) {
		if (!r->peers[p].used)
			continue;
		bool stays = false;
		for (int i = 0; i < n && !stays; i++) {
			char a[300];
			snprintf(a, sizeof(a), strchr(c[i].ip, ':') ? "[%s]:%u" : "%s:%u", c[i].ip,
				 c[i].port);
			stays = want[i] && !strcmp(a, r->peers[p].addr);
			if (stays)
				want[i] = false; /* has its slot */
		}
		if (!stays)
			peer_drop(r, p);
	}
	for (int i = 0; i < n; i++)
		if (want[i])
			peer_add(r, &c[i]);
	while (r->npeers > 0 && !r->peers[r->npeers - 1].used)
		r->npeers--;
	r->started = true;
out:
	if (ifs)
		freeifaddrs(ifs);
	free(ips);
	free(c);
}

/* A name's answer, said when it differs from the last one. */
static void say_answer(struct gm_remote *r, const struct peer_answer *a,
		       const struct peer_answer *was)
{
	if (was && was->n == a->n && was->gai == a->gai && was->kept == a->kept &&
	    !memcmp(was->ip, a->ip, sizeof(a->ip[0]) * (size_t)a->n))
		return;
	if (a->kept)
		gm_remote_logf(&r->net,
			       "peers: %s: no answer from the DNS (%s): its last %d "
			       "address%s stand",
			       a->host, gai_strerror(a->gai), a->n, a->n == 1 ? "" : "es");
	else if (!a->n)
		gm_remote_logf(&r->net,
			       "peers: %s resolves to no address (%s): no peer from it for now; "
			       "asked again every %u ms",
			       a->host, gai_strerror(a->gai), r->refresh_ms);
	else
		gm_remote_logf(&r->net, "peers: %s resolves to %d address%s%s", a->host, a->total,
			       a->total == 1 ? "" : "es",
			       a->total > a->n ? " (the first 64 in address order are taken)" : "");
}

/* The resolver's answers, if a round ended: kept per name, then applied. */
static void discover_tick(struct gm_remote *r)
{
	if (!r->res || !gm_peers_resolver_pending(r->res))
		return;
	struct peer_answer *got = malloc(sizeof(*got) * PEER_ENTRIES);
	int n = got ? gm_peers_resolver_take(r->res, got, PEER_ENTRIES) : -1;
	for (int i = 0; i < n; i++) {
		const struct peer_answer *was = answer_of(r, got[i].host);
		say_answer(r, &got[i], was);
	}
	if (n >= 0) {
		memcpy(r->answers, got, sizeof(*got) * (size_t)n);
		r->nanswers = n;
		peers_apply(r);
	}
	free(got);
}

static int names_of(const struct gm_remote *r)
{
	int k = 0;
	for (int i = 0; i < r->nentries; i++)
		k += !r->entries[i].numeric;
	return k;
}

/* The names to the resolver (started on the first one). */
static int resolve_names(struct gm_remote *r, char *err, size_t errlen)
{
	if (!names_of(r) && !r->res)
		return 0;
	if (!r->res) {
		int efd, rc = gm_peers_resolver_start(&r->res, r->refresh_ms, &efd);
		if (rc) {
			gm_errf(err, errlen, "peers: no resolver thread: %s", strerror(-rc));
			return rc;
		}
		watch(r, efd, EPOLL_CTL_ADD, POLLIN);
	}
	gm_peers_resolver_names(r->res, r->entries, r->nentries);
	return 0;
}

int gm_remote_agent_discover(struct gm_remote *r, uint32_t refresh_ms, char *err, size_t errlen)
{
	r->refresh_ms = refresh_ms ? refresh_ms : PEERS_REFRESH_MS;
	peers_apply(r); /* the numeric entries at once */
	return resolve_names(r, err, errlen);
}

void gm_remote_agent_reload(struct gm_remote *r)
{
	char err[1024];
	struct peer_entry *e = malloc(sizeof(*e) * PEER_ENTRIES);
	int n = r->ncli;
	if (!e)
		return;
	if (!r->peers_file[0]) {
		gm_remote_logf(&r->net, "SIGHUP: no --peers-file to read again; the names of "
					"--peers are looked up again");
		goto out_kick;
	}
	memcpy(e, r->entries, sizeof(*e) * (size_t)r->ncli);
	if (gm_peers_file(r->peers_file, r->dport, e, PEER_ENTRIES, &n, err, sizeof(err))) {
		gm_remote_logf(&r->net, "SIGHUP: %s; the peers stay as they were", err);
		goto out;
	}
	memcpy(r->entries, e, sizeof(*e) * (size_t)n);
	r->nentries = n;
	gm_remote_logf(&r->net, "SIGHUP: %s read again: %d entr%s", r->peers_file, n - r->ncli,
		       n - r->ncli == 1 ? "y" : "ies");
	peers_apply(r); /* numeric entries and names already answered: at once */
out_kick:
	if (resolve_names(r, err, sizeof(err)))
		gm_remote_logf(&r->net, "SIGHUP: %s", err);
	else if (r->res)
		gm_peers_resolver_kick(r->res);
out:
	free(e);
}

/* The control port on "ADDR:PORT" (ctl.h); no UCX listener exists. */
int gm_remote_agent_listen(struct gm_remote *r, const char *addr, char *err, size_t errlen)
{
	int rc = gm_remote_ctl_listen(addr, &r->lfd, &r->port, err, errlen);
	if (!rc)
		watch(r, r->lfd, EPOLL_CTL_ADD, POLLIN);
	return rc;
}

/* ---- dispatch ---------------------------------------------------------------- */

/* The messages after the handshake (conn.c checked each one's size and that the
 * handshake succeeded): the lender's LEND, the home's others. */
void gm_remote_agent_on_msg(void *owner, struct conn *c, int id, const void *hdr, const void *data,
			    size_t len, bool rndv)
{
	struct gm_remote *r = owner;
	if (id == AM_PUBLISH) { /* an aligned copy of its small payload */
		if (len > sizeof(r->scratch2)) {
			gm_remote_conn_kill(c, "%s: oversized message", c->ip);
			return;
		}
		data = memcpy(r->scratch2, data, len);
	}
	switch (id) {
	case AM_LEND:
		gm_remote_lend_on_lend(r, c, hdr, data, len);
		break;
	case AM_LENT:
		gm_remote_home_on_lent(r, c, hdr);
		break;
	case AM_CLAIM:
		gm_remote_home_on_claim(r, c);
		break;
	case AM_LEASE: /* a remote worker's message, never an agent's */
		gm_remote_conn_kill(c, "%s: unexpected lease", c->ip);
		break;
	case AM_SAMPLE:
		gm_remote_home_on_sample(r, c, hdr, (void *)data, len, rndv);
		break;
	case AM_PUBLISH:
		gm_remote_home_on_publish(r, c, hdr, data, len);
		break;
	case AM_BEAT:
		on_beat(r, c, hdr);
		break;
	case AM_PYLEND:
		gm_remote_lend_on_pylend(r, c, hdr, data, len);
		break;
	case AM_BATCH:
		gm_remote_pyhome_on_batch(r, c, hdr, (void *)data, len, rndv);
		break;
	default:
		break;
	}
}
