/*
 * agent.h - the node agent's side of the remote plugin (core/remote/): the state
 * of struct gm_remote (remote.h's handle) and the functions its files share.
 *
 * The idea: one agent is both a *home* (jobs attached here, whose rings remote
 * workers fill through leases: home.c) and a *lender* (a peer's jobs whose
 * worker processes run here: lender.c); agent.c listens on the control port
 * (ctl.h), accepts, connects to the peers, dispatches their messages and runs
 * the tick; plugin.c is the ops
 * table remote.h names. A remote worker process shares none of this: it owns
 * only a struct gm_remote_net (conn.h) and its lease (worker.c).
 *
 * Not here: the protocol's messages (msg.h) and the connection layer (conn.h).
 * Threads: everything on the agent's loop thread.
 */
#ifndef GM_REMOTE_AGENT_H
#define GM_REMOTE_AGENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "conn.h"
#include "ctl.h"
#include "goldminer/limits.h"
#include "goldminer/pool.h"
#include "goldminer/remote.h"
#include "goldminer/ring.h"
#include "goldminer/wire.h"
#include "msg.h"

#define MAX_PEERS 16
#define MAX_HJOBS 64
#define MAX_LJOBS 64
#define RETRY_MS  2000 /* reconnect to a peer, ask again for workers */

struct peer {
	char addr[300]; /* host:port as given */
	struct conn *c;
	struct ctl *dial; /* our connection to it while its handshake runs */
	int64_t retry_ms;
	char last_err[256];
	double rate;	  /* img/s its workers delivered here over the last second */
	uint32_t workers; /* its workers connected here */
};

/* A job attached here that remote workers may fill (home.c). */
struct hjob {
	bool used;
	uint64_t token;
	struct gm_ring *ring;
	struct gm_node_req req;
	uint64_t fingerprint, nsamples, sb;
	uint32_t bpe, lease_ms, batch, words, want;
	uint32_t asked[MAX_PEERS], granted[MAX_PEERS];
	int64_t ask_ms[MAX_PEERS];
	uint64_t samples, bytes, revoked, fenced;
	uint64_t tick_samples;
	int64_t tick_ms;
	double rate, per_worker;
};

/* A peer's job whose remote workers run here (lender.c). */
struct ljob {
	bool used;
	uint64_t token;
	struct conn *home; /* the home agent's connection to us */
	char home_addr[300];
	struct wblob blob;
	struct gm_dataset *ds;
	struct gm_pool_cfg pc;
	uint32_t target;
	pid_t pid[GM_MAX_WORKERS];
	uint32_t n;
	int64_t spawn_ms;
};

struct gm_remote {
	struct gm_remote_net net; /* the UCP worker, the connections, the log */
	int lfd;		  /* the control port (ctl.h), -1: none */
	uint16_t port;
	struct ctl *ctls[CTL_MAX]; /* accepted, their handshake running */
	uint64_t refused;	   /* connections refused at accept (strangers, over limits) */
	struct peer peers[MAX_PEERS];
	int npeers;
	char allowed[MAX_PEERS * 4][INET6_ADDRSTRLEN]; /* peer addresses (also net.allowed) */
	int nallowed;
	struct hjob hjobs[MAX_HJOBS];
	struct ljob ljobs[MAX_LJOBS];
	uint32_t budget, lendable, next_vpid;
	char exe[4096];			   /* this program: remote workers are it, exec'ed afresh */
	char refused_ip[INET6_ADDRSTRLEN]; /* the last address refused, and when */
	int64_t refused_ms;
	/* an aligned copy of a PUBLISH's payload (err words + records) */
	uint64_t
	    scratch2[GM_MAX_BATCH / 64 + GM_RING_MAX_ERRS * sizeof(struct gm_slot_err) / 8 + 1];
};

/* agent.c: the connections of --peers, the control port on --listen, the tick */
int gm_remote_agent_peers(struct gm_remote *r, const char *list, char *err, size_t errlen);
int gm_remote_agent_listen(struct gm_remote *r, const char *addr, char *err, size_t errlen);
void gm_remote_agent_unlisten(void *owner);
void gm_remote_agent_on_msg(void *owner, struct conn *c, int id, const void *hdr, const void *data,
			    size_t len, bool rndv);
void gm_remote_agent_service(struct gm_remote *r);

/* home.c: jobs attached here, the leases of their remote workers */
struct hjob *gm_remote_home_job(void *owner, uint64_t token);
void gm_remote_home_revoke(struct gm_remote *r, struct conn *c, const char *why);
void gm_remote_home_on_claim(struct gm_remote *r, struct conn *c);
void gm_remote_home_on_sample(struct gm_remote *r, struct conn *c, const struct m_sample *s,
			      void *data, size_t len, bool rndv);
void gm_remote_home_on_publish(struct gm_remote *r, struct conn *c, const struct m_publish *p,
			       const void *data, size_t len);
void gm_remote_home_on_lent(struct gm_remote *r, struct conn *c, const struct m_lent *m);
void gm_remote_home_tick(struct gm_remote *r, int64_t now);
int gm_remote_home_add(struct gm_remote *r, int ring_fd, const struct gm_node_req *req,
		       uint64_t fingerprint, uint64_t nsamples, uint32_t bpe, uint32_t lease_ms,
		       uint64_t *token, char *err, size_t errlen);
void gm_remote_home_remove(struct gm_remote *r, uint64_t token);
void gm_remote_home_want(struct gm_remote *r, uint64_t token, uint32_t n);
void gm_remote_home_info(struct gm_remote *r, uint64_t token, struct gm_remote_job_info *o);

/* lender.c: peers' jobs lent workers here, and their processes */
uint32_t gm_remote_lend_total(const struct gm_remote *r);
void gm_remote_lend_on_lend(struct gm_remote *r, struct conn *c, const struct m_lend *m,
			    const void *data, size_t len);
void gm_remote_lend_tick(struct gm_remote *r, int64_t now);
void gm_remote_lend_end(struct ljob *l);
/* the workers retired or killed that have not exited yet: waited for, 1 s at most */
void gm_remote_lend_reap_all(void);

#endif
