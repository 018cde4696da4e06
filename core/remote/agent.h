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
#include "goldminer/worker.h"
#include "msg.h"
#include "peers.h"

#define MAX_PEERS	16 /* peers dialed; more addresses: the first in address order */
#define MAX_HJOBS	64
#define MAX_LJOBS	64
#define RETRY_MS	2000 /* reconnect to a peer, ask again for workers */
#define LEND_CHECKS	4    /* peers' datasets indexed at once (lender.c) */
#define SPEC_KEPT	8    /* Python jobs' specs a lender keeps after their job ends there */
#define SPEC_KEPT_BYTES (256ull << 20) /* ... their bytes in all (one PY_SPEC_MAX) */
#define SPREAD_MS	1000	       /* a job's remote workers spread again over the peers */
#define SHORT_MS	1500	       /* a lender runs fewer workers than it granted: ask again */
#define STOP_MS		700	       /* a lent worker stopped this long is killed and replaced */
/* A job a peer refused is asked again after RETRY_MS, then after twice as
 * long each time it refuses again, up to BACKOFF_MAX_MS (home.c). */
#define BACKOFF_MAX_MS 32000
/* The log lines a remote party can cause (ratelog.h, gm_remote_logf_from):
 * LOG_LINES per address per LOG_WINDOW_MS, LOG_TOTAL in all, LOG_ADDRS
 * addresses counted apart (--peers' 64, and the rest as one). */
#define LOG_LINES     5
#define LOG_TOTAL     60
#define LOG_WINDOW_MS 10000
#define LOG_ADDRS     64

/* A peer this agent dials: a slot that --peers' names and --peers-file fill
 * and empty as their answers change (agent.c); its index is what jobs count
 * their asks by, so a slot keeps its peer while it stays. */
struct peer {
	bool used;
	char addr[300];		   /* IP:PORT ([IP]:PORT for IPv6) */
	char ip[INET6_ADDRSTRLEN]; /* its address: its remote workers come from it */
	char from[256];		   /* the entry it came from: a name, or the address */
	uint16_t port;		   /* its control port */
	bool down;		   /* connected, but not heard from for DOWN_MS */
	int64_t down_ms;	   /* since when */
	struct conn *c;
	struct ctl *dial; /* our connection to it while its handshake runs */
	int64_t retry_ms;
	char last_err[256];
	double rate;	  /* img/s its workers delivered here over the last second */
	uint32_t workers; /* its workers connected here */
	int64_t short_ms; /* since when its heartbeats say it runs fewer workers for
			   * our jobs than it granted them (0: it does not) */
	/* its state, new each time it connects, comes back up or its heartbeat
	 * says it can lend again after it could not: a job it refused in an
	 * older state is asked again without the doubled wait (home.c) */
	uint32_t gen;
};

/* A job attached here that remote workers may fill (home.c). */
struct hjob {
	bool used;
	uint64_t token;
	struct gm_ring *ring;
	struct gm_node_req req;
	uint64_t fingerprint, nsamples, sb;
	uint32_t bpe, lease_ms, batch, words, want;
	/* what each lease must carry (check.h): the job's batches over the home's
	 * index (the agent's: it outlives the job here), the epoch permutation
	 * they come from (NULL: no shuffle; perm_epoch's, cached), and per slot
	 * the expected ids and labels (batch + nsub each), the positions that
	 * arrived in the current lease (words each) and a bound of its bytes read */
	struct gm_worker_cfg wc;
	uint32_t *perm, perm_epoch, nsub, nslots;
	bool perm_valid;
	uint32_t *exp_id;
	int32_t *exp_label;
	uint64_t *seen, *read_cap;
	/* per peer: asked (the last LEND's), granted (its answer's), answered
	 * (the answer to the last ask came), when asked, its refusal (the LENT's
	 * status, 0: none) and when; the spread (gm_policy_spread) last made, of
	 * the wish spread_want, and the workers it placed nowhere (capacity) */
	uint32_t asked[MAX_PEERS], granted[MAX_PEERS], said[MAX_PEERS];
	bool answered[MAX_PEERS];
	int64_t ask_ms[MAX_PEERS];
	int32_t refused[MAX_PEERS];
	int64_t refused_ms[MAX_PEERS];
	uint32_t spread[MAX_PEERS], spread_want, unplaced;
	int64_t spread_ms;
	/* per peer, after a refusal: not asked again before next_ms; the wait
	 * (backoff_ms, 0: none) doubles from RETRY_MS to BACKOFF_MAX_MS with each
	 * refusal in the same state of the peer (backoff_gen: its gen then) */
	int64_t backoff_ms[MAX_PEERS], next_ms[MAX_PEERS];
	uint32_t backoff_gen[MAX_PEERS];
	uint64_t lends, refusals; /* LENDs sent, refusals received */
	uint64_t samples, bytes, revoked, fenced;
	/* claims answered "no batch free" (the ring's tasks ahead all taken):
	 * in all, while its trainer waited, and of those with the batch it waits
	 * for (the ring's head) being made by a remote worker, by a local one */
	uint64_t none, none_starved, none_head_remote, none_head_local;
	uint64_t head_revoked; /* leases of the head revoked (home.c, HEAD_MS) */
	uint64_t tick_samples;
	int64_t tick_ms;
	double rate, per_worker;
	/* a Python job (pyhome.c): its batches come whole; the spec its workers
	 * load and its SHA-256, which each PYLEND names; the spec itself goes
	 * with one only where the peer said it does not hold it (spec_wanted),
	 * and when it last went (spec_sent_ms) */
	bool py;
	unsigned char *spec;
	uint64_t spec_len;
	uint8_t spec_hash[PY_SPEC_HASH];
	bool spec_wanted[MAX_PEERS];
	int64_t spec_sent_ms[MAX_PEERS];
};

/* A peer's job whose remote workers run here (lender.c); while checking, its
 * dataset is being indexed by the check process check_pid (answer in check_fd)
 * and the LEND is answered when that ends or at check_end. */
struct ljob {
	bool used, checking;
	pid_t check_pid;
	int check_fd;
	int64_t check_end;
	uint32_t want; /* workers the home asked for while checking */
	uint64_t token;
	struct conn *home; /* the home agent's connection to us */
	char home_addr[300];
	struct wblob blob;
	/* the memfd holding blob (and spec) that its workers share on their fd 3,
	 * plus one (0: none yet): their pace, blob.pace_milli, is written there */
	int bfd1;
	struct gm_dataset *ds;
	struct gm_pool_cfg pc;
	uint32_t target;
	pid_t pid[GM_MAX_WORKERS];
	int64_t stopped_ms[GM_MAX_WORKERS]; /* pid[k] seen stopped since (0: running) */
	uint32_t n;
	int64_t spawn_ms;
	/* its workers' CPU time (gm_host_proc_cpu_ns) and the time they waited
	 * for a CPU (gm_host_proc_wait_ns; UINT64_MAX: not known) at cpu_ms, with
	 * cpu_n of them; used_cores: the cores they used or waited for over the
	 * last window (-1: not measured) */
	uint64_t cpu_ns, wait_ns;
	int64_t cpu_ms;
	uint32_t cpu_n;
	double used_cores;
	unsigned char *spec; /* a Python job's (blob.py): after the blob in each worker's memfd */
	uint8_t spec_hash[PY_SPEC_HASH]; /* ... its SHA-256, as the home named it */
};

/* A Python job's spec a lender holds after its job ended there (lender.c): a
 * home that asks again (a share back from 0) names it by hash only. Per home
 * connection (forgotten when it closes) and job. */
struct spec_kept {
	struct conn *home; /* NULL: a free entry */
	uint64_t token;
	uint8_t hash[PY_SPEC_HASH];
	unsigned char *spec;
	uint64_t len;
	int64_t used_ms;
};

struct gm_remote {
	struct gm_remote_net net; /* the UCP worker, the connections, the log */
	int lfd;		  /* the control port (ctl.h), -1: none */
	uint16_t port;
	struct ctl *ctls[CTL_MAX]; /* accepted, their handshake running */
	uint64_t refused;	   /* connections refused at accept (strangers, over limits) */
	struct peer peers[MAX_PEERS];
	int npeers; /* slots in use are below it (some may be free) */
	/* every address of the peers' entries, dialed or not (also net.allowed) */
	char allowed[NET_ALLOWED][INET6_ADDRSTRLEN];
	int nallowed;
	/* discovery (peers.h): the entries of --peers (the first ncli) and of
	 * --peers-file, the last answer per name, the resolver (NULL: no name) */
	struct peer_entry entries[PEER_ENTRIES];
	int nentries, ncli;
	char peers_file[4096];
	uint16_t dport; /* --listen's port: an entry's without one */
	struct peer_answer answers[PEER_ENTRIES];
	int nanswers;
	struct peers_resolver *res;
	uint32_t peer_gen; /* the last struct peer's gen given */
	uint32_t refresh_ms;
	bool started;		/* the first set is made: later changes are logged */
	int said_over, said_np; /* the counts last said to be over the limits */
	struct hjob hjobs[MAX_HJOBS];
	struct ljob ljobs[MAX_LJOBS];
	uint32_t budget, lendable, next_vpid;
	/* what this agent can lend (its heartbeats): cores in all, img/s per core
	 * (0: not measured); when the last beat went, and its number */
	double lend_cores, lend_rate;
	bool own_jobs; /* this host runs jobs of its own (its guests are paced) */
	int again;     /* an eventfd in net.epfd: written when a service stopped
			  at its time slice with work left (the loop comes back) */
	int64_t beat_ms;
	uint64_t beat_seq;
	char exe[4096]; /* this program: remote workers are it, exec'ed afresh */
	/* --lend-root: lend_canon[i] canonical; lend_words[k] the words a LEND's
	 * root is matched against (each root canonical and as given), of root
	 * lend_of[k] */
	char *lend_canon[GM_LEND_MAX_ROOTS];
	char *lend_words[2 * GM_LEND_MAX_ROOTS];
	int lend_of[2 * GM_LEND_MAX_ROOTS];
	int nlend_canon, nlend_words;
	uint32_t lend_index_ms;
	uint64_t lend_max_files;
	bool lend_python; /* --lend-python: peers' Python jobs may run here */
	struct spec_kept specs[SPEC_KEPT];
	/* an aligned copy of a PUBLISH's payload (err words + records) */
	uint64_t
	    scratch2[GM_MAX_BATCH / 64 + GM_RING_MAX_ERRS * sizeof(struct gm_slot_err) / 8 + 1];
};

/* agent.c: the connections of --peers, the control port on --listen, the tick.
 * peers: parse --peers and --peers-file (listen: --listen, its port the one of
 * an entry without one); discover (after listen): the numeric entries' peers at
 * once, the names' through the resolver thread; reload (SIGHUP): the file read
 * again (a bad one leaves the peers as they are) and the names looked up now. */
int gm_remote_agent_peers(struct gm_remote *r, const char *list, const char *file,
			  const char *listen, char *err, size_t errlen);
int gm_remote_agent_discover(struct gm_remote *r, uint32_t refresh_ms, char *err, size_t errlen);
void gm_remote_agent_reload(struct gm_remote *r);
int gm_remote_agent_listen(struct gm_remote *r, const char *addr, char *err, size_t errlen);
void gm_remote_agent_unlisten(void *owner);
/* Whether the agent at ip (numeric) with control port port is one of --peers
 * (the control port's admission of an agent's TLS identity, ctl.h). */
bool gm_remote_agent_admit(void *owner, const char *ip, uint32_t port);
/* The entry of --peers (a name, or the address) of that agent; NULL: none. */
const char *gm_remote_agent_peer_name(void *owner, const char *ip, uint32_t port);
void gm_remote_agent_on_msg(void *owner, struct conn *c, int id, const void *hdr, const void *data,
			    size_t len, bool rndv);
void gm_remote_agent_service(struct gm_remote *r);

/* The peer a connection is from (its outgoing one, or an agent's or remote
 * worker's whose address and control port are the peer's), -1: none. */
int gm_remote_peer_of(const struct gm_remote *r, const struct conn *c);
/* The same agent at both ends (address and control port). */
bool gm_remote_same_agent(const struct conn *a, const struct conn *b);

/* home.c: jobs attached here, the leases of their remote workers */
struct hjob *gm_remote_home_job(void *owner, uint64_t token);
void gm_remote_home_revoke(struct gm_remote *r, struct conn *c, const char *why);
void gm_remote_home_on_claim(struct gm_remote *r, struct conn *c);
void gm_remote_home_on_sample(struct gm_remote *r, struct conn *c, const struct m_sample *s,
			      void *data, size_t len, bool rndv);
void gm_remote_home_on_publish(struct gm_remote *r, struct conn *c, const struct m_publish *p,
			       const void *data, size_t len);
void gm_remote_home_on_lent(struct gm_remote *r, struct conn *c, const struct m_lent *m);
/* Peer p went down (no heartbeat for DOWN_MS): its remote workers' connections
 * end now (their leases back at once), its asks are forgotten (asked again
 * when it is back). */
void gm_remote_home_peer_down(struct gm_remote *r, int p, const char *why);
void gm_remote_home_tick(struct gm_remote *r, int64_t now);
int gm_remote_home_add(struct gm_remote *r, int ring_fd, const struct gm_node_req *req,
		       const struct gm_dataset *ds, uint32_t bpe, uint32_t lease_ms,
		       uint64_t *token, char *err, size_t errlen);
void gm_remote_home_remove(struct gm_remote *r, uint64_t token);
/* Unmap a job's ring and free what its leases were checked with (the agent
 * stops; its connections are closed already). */
void gm_remote_home_drop(struct hjob *j);
void gm_remote_home_want(struct gm_remote *r, uint64_t token, uint32_t n);
void gm_remote_home_info(struct gm_remote *r, uint64_t token, struct gm_remote_job_info *o);
/* Workers the live peers can lend this agent's jobs in all, by their last
 * heartbeats (what they lend it now included): the ops' peers_lendable. */
uint32_t gm_remote_home_lendable(struct gm_remote *r);
/* home.c for pyhome.c: a free job entry of this agent, zeroed, with ring_fd's
 * ring attached (its shape: batch, sample bytes, slots), a new token, req and
 * lease_ms; the caller marks it used, or drops it (gm_remote_home_drop). 0 or
 * -errno with err (-EMFILE: every entry taken). */
int gm_remote_home_job_new(struct gm_remote *r, int ring_fd, const struct gm_node_req *req,
			   uint32_t lease_ms, struct hjob **out, char *err, size_t errlen);
/* home.c for pyhome.c: c still holds lease (vpid, task); error records merged */
bool gm_remote_home_lease_held(const struct conn *c, uint32_t vpid, uint64_t task);
/* home.c for pyhome.c: the connection of job j's remote worker holding lease
 * vpid (NULL: none now; j NULL: none). */
struct conn *gm_remote_home_worker(struct gm_remote *r, const struct hjob *j, uint32_t vpid);
/* home.c for pyhome.c: a rendezvous message's data (desc, len bytes) received
 * straight into dst for c, counted in c->inflight until done(user) runs (at
 * once where it landed already). Takes user: done frees it, or this does where
 * the receive cannot start (c killed: "receiving <what>: <UCX's words>"). */
void gm_remote_home_recv(struct gm_remote *r, struct conn *c, void *desc, void *dst, size_t len,
			 ucp_am_recv_data_nbx_callback_t done, void *user, const char *what);
void gm_remote_home_merge_recs(struct gm_slot_ctl *ctl, const struct gm_slot_err *e, uint32_t n);

/* pyhome.c: Python jobs (a binding's ring) whose remote workers send whole
 * batches: add (ring and spec memfds, the request with its facts), a PYLEND
 * of n workers to c (naming the spec by its hash; with_spec: carrying it), a
 * claim, a BATCH */
int gm_remote_pyhome_add(struct gm_remote *r, int ring_fd, int spec_fd,
			 const struct gm_node_req *req, uint32_t lease_ms, uint64_t *token,
			 char *err, size_t errlen);
int gm_remote_pyhome_send_lend(struct gm_remote *r, struct hjob *j, struct conn *c, uint32_t n,
			       bool with_spec);
void gm_remote_pyhome_claim(struct gm_remote *r, struct conn *c);
void gm_remote_pyhome_on_batch(struct gm_remote *r, struct conn *c, const struct m_batch *b,
			       void *data, size_t len, bool rndv);

/* lender.c: peers' jobs lent workers here, and their processes */
uint32_t gm_remote_lend_total(const struct gm_remote *r);
void gm_remote_lend_on_lend(struct gm_remote *r, struct conn *c, const struct m_lend *m,
			    const void *data, size_t len);
void gm_remote_lend_on_pylend(struct gm_remote *r, struct conn *c, const struct m_pylend *m,
			      const void *data, size_t len);
void gm_remote_lend_tick(struct gm_remote *r, int64_t now);
void gm_remote_lend_end(struct ljob *l);
/* The home connection c closes: the specs its jobs left here are freed. */
void gm_remote_lend_forget(struct gm_remote *r, const struct conn *c);
/* --lend-root DIR at create: canonical, a directory. 0 or -errno with err. */
int gm_remote_lend_root(struct gm_remote *r, const char *dir, char *err, size_t errlen);
void gm_remote_lend_fini(struct gm_remote *r);
/* `goldminer node --lend-check FD`: the check process's main */
int gm_remote_lend_check_main(int fd);
/* the workers retired or killed that have not exited yet: waited for, 1 s at most */
void gm_remote_lend_reap_all(void);

#endif
