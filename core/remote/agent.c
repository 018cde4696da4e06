/*
 * agent.c - the node agent's network side of the remote plugin (agent.h): the
 * listener on --listen, the connections to the agents of --peers, the
 * dispatch of their messages and the tick that runs after every poll.
 *
 * The idea: a connection request is checked against the addresses of --peers
 * before an endpoint exists (a host not named never gets one); the handshake
 * then runs in conn.c within AUTH_MS. Every tick closes the dead connections
 * in one place and in one order (endpoint closed first, so nothing of the dead
 * writer lands anywhere; then its lease back; then its lent jobs ended),
 * reconnects the peers every RETRY_MS and runs the home's (which ends the
 * leases past their deadline or bound) and the lender's ticks.
 *
 * Not here: what a lease or a lent job is (home.c, lender.c), the handshake
 * (conn.c), the ops table (plugin.c).
 */

#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ucp/api/ucp.h>

#include "agent.h"
#include "conn.h"
#include "msg.h"

/* ---- the listener ------------------------------------------------------------ */

static void conn_req_cb(ucp_conn_request_h req, void *arg)
{
	struct gm_remote *r = arg;
	if (r->nqueue == CONN_QUEUE) {
		ucp_listener_reject(r->l, req);
		return;
	}
	r->queue[r->nqueue++] = req;
}

void gm_remote_agent_unlisten(void *owner)
{
	struct gm_remote *r = owner;
	for (unsigned i = 0; i < r->nqueue; i++)
		ucp_listener_reject(r->l, r->queue[i]);
	r->nqueue = 0;
	if (r->l)
		ucp_listener_destroy(r->l);
	r->l = NULL;
}

static bool allowed(const struct gm_remote *r, const char *ip)
{
	for (int i = 0; i < r->nallowed; i++)
		if (!strcmp(r->allowed[i], ip))
			return true;
	return false;
}

/* Connections that arrived: only from the hosts of --peers. */
static void accept_queued(struct gm_remote *r)
{
	while (r->nqueue) {
		ucp_conn_request_h req = r->queue[0];
		memmove(r->queue, r->queue + 1, --r->nqueue * sizeof(r->queue[0]));
		ucp_conn_request_attr_t a = {.field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR};
		char ip[INET6_ADDRSTRLEN] = "?";
		if (ucp_conn_request_query(req, &a) == UCS_OK)
			getnameinfo((struct sockaddr *)&a.client_address,
				    a.client_address.ss_family == AF_INET6
					? sizeof(struct sockaddr_in6)
					: sizeof(struct sockaddr_in),
				    ip, sizeof(ip), NULL, 0, NI_NUMERICHOST);
		struct conn *c = allowed(r, ip) ? gm_remote_conn_new(&r->net, false, ip) : NULL;
		if (!c) {
			/* said once a minute per address: a peer retries every 2 s */
			int64_t now = now_ms();
			if (strcmp(r->refused_ip, ip) || now - r->refused_ms >= 60000) {
				gm_remote_logf(&r->net, "refused a connection from %s: %s", ip,
					       allowed(r, ip) ? "too many connections"
							      : "not a host in --peers");
				snprintf(r->refused_ip, sizeof(r->refused_ip), "%s", ip);
				r->refused_ms = now;
			}
			ucp_listener_reject(r->l, req);
			continue;
		}
		ucp_ep_params_t p = {
		    .field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST |
				  UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
				  UCP_EP_PARAM_FIELD_ERR_HANDLER,
		    .conn_request = req,
		    .err_mode = UCP_ERR_HANDLING_MODE_PEER,
		    .err_handler = {.cb = gm_remote_conn_lost, .arg = c},
		};
		if (ucp_ep_create(r->net.w, &p, &c->ep) != UCS_OK) {
			c->ep = NULL;
			gm_remote_conn_free(&r->net, c);
		}
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
		if (c->st != C_OK && c->st != C_DEAD && now - c->since_ms >= AUTH_MS)
			gm_remote_conn_kill(c, "%s did not authenticate within %d ms", c->ip,
					    AUTH_MS);
		if (c->st != C_DEAD)
			continue;
		gm_remote_conn_close(&r->net,
				     c); /* first: then nothing of it can land in the slot */
		gm_remote_home_revoke(r, c, c->why);
		if (c->peer >= 0) {
			struct peer *p = &r->peers[c->peer];
			if (strcmp(p->last_err, c->why))
				gm_remote_logf(&r->net, "peer %s: %s", p->addr, c->why);
			snprintf(p->last_err, sizeof(p->last_err), "%s", c->why);
			p->c = NULL;
			p->retry_ms = now + RETRY_MS;
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
		if (pe->c || now < pe->retry_ms)
			continue;
		struct conn *c;
		int rc = gm_remote_conn_connect(&r->net, pe->addr, &c);
		if (!rc)
			rc = gm_remote_conn_hello(c, ROLE_AGENT, 0);
		if (rc) {
			snprintf(pe->last_err, sizeof(pe->last_err), "cannot connect: %s",
				 strerror(-rc));
			pe->retry_ms = now + RETRY_MS;
			continue;
		}
		c->peer = p;
		pe->c = c;
	}
}

void gm_remote_agent_service(struct gm_remote *r)
{
	int64_t now = now_ms();
	for (int round = 0; round < 64; round++) {
		while (ucp_worker_progress(r->net.w))
			;
		accept_queued(r);
		if (round == 0) {
			gm_remote_lend_tick(r, now);
			conns_tick(r, now);
			peers_tick(r, now);
			gm_remote_home_tick(r, now);
			continue;
		}
		if (ucp_worker_arm(r->net.w) != UCS_ERR_BUSY)
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
			snprintf(err, errlen, "--peers: at most %d peers", MAX_PEERS);
			return -EINVAL;
		}
		struct peer *p = &r->peers[r->npeers++];
		snprintf(p->addr, sizeof(p->addr), "%s", t);
		struct sockaddr_storage ss;
		socklen_t sl;
		if (gm_remote_parse_addr(t, &ss, &sl, r->allowed[r->nallowed],
					 sizeof(r->allowed[0]))) {
			snprintf(err, errlen,
				 "--peers: '%s' is not HOST:PORT (a host this machine can resolve)",
				 t);
			return -EINVAL;
		}
		r->nallowed++;
	}
	return 0;
}

/* Only connections in TCP TIME_WAIT hold the port (an agent on it stopped
 * moments ago; /proc/net/tcp and tcp6: some in state 06, none listening, 0A).
 * UCX 1.13's listener sets no SO_REUSEADDR and has no setting for it, and Linux
 * lets a port in TIME_WAIT be bound again only when both sockets had it. */
static bool held_by_time_wait(uint16_t port)
{
	const char *files[] = {"/proc/net/tcp", "/proc/net/tcp6"};
	bool waiting = false, listening = false;
	char line[512];
	for (int f = 0; f < 2; f++) {
		FILE *fp = fopen(files[f], "r");
		if (!fp)
			continue;
		while (fgets(line, sizeof(line), fp)) {
			char local[64];
			unsigned st, lport;
			if (sscanf(line, " %*u: %63s %*s %x", local, &st) != 2)
				continue;
			char *colon = strrchr(local, ':');
			if (!colon || sscanf(colon + 1, "%x", &lport) != 1 || lport != port)
				continue;
			waiting |= st == 0x06;
			listening |= st == 0x0A;
		}
		fclose(fp);
	}
	return waiting && !listening;
}

/* The UCX listener on "ADDR:PORT"; while the port is held only by TIME_WAIT
 * connections it tries again every second, 65 s at most (TIME_WAIT lasts 60 s
 * on Linux), saying so once; a signal ends the wait. 0 or -errno with err. */
int gm_remote_agent_listen(struct gm_remote *r, const char *addr, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	if (gm_remote_parse_addr(addr, &ss, &sl, NULL, 0)) {
		snprintf(err, errlen, "--listen: '%s' is not ADDR:PORT", addr);
		return -EINVAL;
	}
	ucp_listener_params_t lp = {
	    .field_mask =
		UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER,
	    .sockaddr = {.addr = (const struct sockaddr *)&ss, .addrlen = sl},
	    .conn_handler = {.cb = conn_req_cb, .arg = r}};
	ucp_listener_attr_t la = {.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR};
	ucs_status_t st;
	int64_t end = now_ms() + 65000;
	uint16_t port = ntohs(((struct sockaddr_in *)&ss)->sin_port); /* same offset in v6 */
	for (bool said = false; port && held_by_time_wait(port) && now_ms() < end; said = true) {
		if (!said)
			gm_remote_logf(
			    &r->net,
			    "--listen %s: the port is still held by the connections of an agent "
			    "that stopped moments ago (TCP TIME_WAIT, up to 60 s): waiting",
			    addr);
		struct timespec ts = {1, 0};
		if (nanosleep(&ts, NULL) && errno == EINTR) {
			snprintf(err, errlen,
				 "--listen %s: interrupted while the port was in TIME_WAIT", addr);
			return -EINTR;
		}
	}
	st = ucp_listener_create(r->net.w, &lp, &r->l);
	if (st == UCS_OK)
		st = ucp_listener_query(r->l, &la);
	if (st != UCS_OK) {
		snprintf(err, errlen,
			 "--listen %s: %s (is it an address of this host, and the port free?)",
			 addr, ucs_status_string(st));
		return gm_remote_st_errno(st);
	}
	const struct sockaddr *sa = (const struct sockaddr *)&la.sockaddr;
	r->port = ntohs(sa->sa_family == AF_INET6 ? ((const struct sockaddr_in6 *)sa)->sin6_port
						  : ((const struct sockaddr_in *)sa)->sin_port);
	return 0;
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
