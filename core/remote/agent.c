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
 * leases past their deadline or bound) and the lender's ticks.
 *
 * Not here: what a lease or a lent job is (home.c, lender.c), the handshake
 * (ctl.c), the ops table (plugin.c).
 */

#include <errno.h>
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
#include "conn.h"
#include "ctl.h"
#include "msg.h"
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

/* Reset (no read, no TIME_WAIT here); said once a minute per address, and at
 * most once a second in all (a flood from many addresses does not flood the log;
 * the status counts them all). */
static void refuse(struct gm_remote *r, int fd, const char *ip, const char *why)
{
	struct linger lg = {1, 0};
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(fd);
	r->refused++;
	int64_t now = now_ms();
	if ((strcmp(r->refused_ip, ip) && now - r->refused_ms >= 1000) ||
	    now - r->refused_ms >= 60000) {
		gm_remote_logf(&r->net, "refused a connection from %s: %s", ip, why);
		copy_str(r->refused_ip, sizeof(r->refused_ip), ip);
		r->refused_ms = now;
	}
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
		gm_remote_logf(&r->net, "peer %s: %s", p->addr, why);
	copy_str(p->last_err, sizeof(p->last_err), why);
	p->retry_ms = now + RETRY_MS;
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
		if (x->status < 0 && x->role != ROLE_WORKER)
			gm_remote_logf(&r->net, "connection from %s closed: %s", x->ip, x->why);
		gm_remote_ctl_free(x);
		r->ctls[i] = NULL;
	}
	for (int p = 0; p < r->npeers; p++) {
		struct peer *pe = &r->peers[p];
		if (!pe->dial || !ctl_run(r, pe->dial))
			continue;
		if (pe->dial->status > 0)
			pe->c = pe->dial->c;
		else
			peer_failed(r, pe, pe->dial->why, now);
		gm_remote_ctl_free(pe->dial);
		pe->dial = NULL;
	}
}

/* ---- the tick ---------------------------------------------------------------- */

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
			gm_remote_logf(&r->net, "connection from %s closed: %s", c->ip, c->why);
		}
		for (int k = 0; k < MAX_LJOBS; k++)
			if (r->ljobs[k].used && r->ljobs[k].home == c) {
				gm_remote_logf(&r->net,
					       "job %016" PRIx64
					       ": its home agent is gone; its remote "
					       "workers stop",
					       r->ljobs[k].token);
				gm_remote_lend_end(&r->ljobs[k]);
			}
		gm_remote_conn_free(&r->net, c);
	}
}

static void peers_tick(struct gm_remote *r, int64_t now)
{
	for (int p = 0; p < r->npeers; p++) {
		struct peer *pe = &r->peers[p];
		if (pe->c || pe->dial || now < pe->retry_ms)
			continue;
		int rc = gm_remote_ctl_dial(pe->addr, ROLE_AGENT, 0, NULL, &pe->dial);
		if (rc) {
			snprintf(pe->last_err, sizeof(pe->last_err), "cannot connect: %s",
				 strerror(-rc));
			pe->retry_ms = now + RETRY_MS;
			continue;
		}
		pe->dial->peer = p;
		watch(r, pe->dial->fd, EPOLL_CTL_ADD, gm_remote_ctl_events(pe->dial));
	}
}

void gm_remote_agent_service(struct gm_remote *r)
{
	int64_t now = now_ms();
	for (int round = 0; round < 64; round++) {
		gm_remote_net_progress(&r->net);
		ctl_service(r, now);
		if (round == 0) {
			gm_remote_lend_tick(r, now);
			conns_tick(r, now);
			peers_tick(r, now);
			gm_remote_home_tick(r, now);
			continue;
		}
		if (gm_remote_net_arm(&r->net))
			break;
	}
}

/* ---- the options: --peers, --listen ------------------------------------------ */

int gm_remote_agent_peers(struct gm_remote *r, const char *list, char *err, size_t errlen)
{
	char buf[4096];
	snprintf(buf, sizeof(buf), "%s", list ? list : "");
	for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (r->npeers == MAX_PEERS) {
			gm_errf(err, errlen, "--peers: at most %d peers", MAX_PEERS);
			return -EINVAL;
		}
		struct peer *p = &r->peers[r->npeers++];
		snprintf(p->addr, sizeof(p->addr), "%s", t);
		struct sockaddr_storage ss;
		socklen_t sl;
		if (gm_remote_parse_addr(t, &ss, &sl, r->allowed[r->nallowed],
					 sizeof(r->allowed[0]))) {
			gm_errf(err, errlen,
				"--peers: '%s' is not HOST:PORT (a host this machine can resolve)",
				t);
			return -EINVAL;
		}
		copy_str(r->net.allowed[r->net.nallowed++], sizeof(r->net.allowed[0]),
			 r->allowed[r->nallowed++]);
	}
	return 0;
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
	default:
		break;
	}
}
