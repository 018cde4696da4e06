/*
 * remote.h - data workers on other hosts: node agents that lend their
 * idle CPUs to each other's jobs over UCX.
 *
 * Roles. Every agent started with --listen has one UCX listener. The agent a
 * trainer attaches to (the job's "home") asks the agents named in its --peers for
 * workers (LEND: the job's ATTACH request, its dataset fingerprint and the home's
 * port); a peer that has idle workers in its budget opens the same dataset path,
 * checks the fingerprint and forks stateless remote workers. Each remote worker
 * connects back to the home agent with its own UCX endpoint and then loops:
 * CLAIM (the home claims a task in the ring for a virtual lease id with the same
 * CAS the local workers use) -> decode the batch into a private two-slot ring ->
 * one active message per sample (header: lease, position, label, id; data: the
 * pixels) -> PUBLISH (error records, timings). The home checks every message
 * against the lease it holds for that endpoint, and only then copies the sample
 * into the slot position the lease covers and sets its done bit; PUBLISH stores
 * READY once every position is done. The home, not the writer, decides where bytes
 * land: a peer cannot write outside the slot it leased, and a writer whose lease
 * was taken back is fenced by construction (its messages no longer match).
 *
 * Faults. The home watches every remote lease: an endpoint error (peer process
 * or host dead, link lost: UCX's err_mode PEER) or no sample within the job's
 * lease deadline closes that endpoint by force and moves the lease back to FREE
 * (gm_ring_reclaim), so a local or another remote worker makes the batch again,
 * resuming after the samples whose done bits are set (contract 1: same bytes).
 *
 * Trust. A connection is accepted only from an address of a host named in
 * --peers; both sides then prove they know the shared secret (--secret FILE,
 * mode 0600) by a challenge-response (auth.h) before any other message is
 * handled. The secret grants a peer this: workers run here that read the
 * datasets below this agent's --lend-root directories (none by default: then
 * every LEND is refused) and use the CPUs its own jobs leave idle. A LEND's
 * root is matched by its words before anything is opened; a refusal says
 * nothing about the path (lender.c). Virtual lease ids are >=
 * GM_REMOTE_VPID_MIN, above every real pid (PID_MAX_LIMIT is 2^22), so the
 * pool never signals them.
 *
 * This module is a plugin (libgoldminer-remote.so) that the node agent loads only
 * when --listen or --peers is given: UCX's memory hooks and signal handlers never
 * reach a trainer or an agent that does not use it. Threads: everything runs on
 * the agent's loop thread (gm_remote_service after poll on gm_remote_fd); a
 * peer's dataset is indexed in a child process, never on that thread.
 */
#ifndef GOLDMINER_REMOTE_H
#define GOLDMINER_REMOTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* 5: peers_lendable, pyjob_add, lend_python; 6: unguarded_ucx; 7: the order of
 * gm_loader_opts and gm_worker_cfg (their layouts, which the plugin shares);
 * 8: their coefficient mode (gpu_decode, coef); 9: gm_remote_job_info's
 * none_starved */
#define GM_REMOTE_ABI	     9
#define GM_REMOTE_VPID_MIN   0x400000u /* PID_MAX_LIMIT: no real pid is this large */
#define GM_REMOTE_PLUGIN     "libgoldminer-remote.so"
#define GM_REMOTE_PLUGIN_ENV "GOLDMINER_REMOTE_LIB" /* path of the plugin, overrides */

struct gm_remote;
struct gm_node_req;
struct gm_dataset;

struct gm_remote_cfg {
	const char *listen; /* "ADDR:PORT" (PORT 0: any), NULL: do not listen */
	/* "HOST[:PORT],..." or NULL: each HOST a DNS name (every address it
	 * resolves to is a peer, looked up again every peers_refresh_ms, 0:
	 * 30000) or an address; no PORT: listen's. peers_file: more, one a line
	 * ('#' comments), read again by reload. */
	const char *peers;
	const char *peers_file;
	uint32_t peers_refresh_ms;
	const char *secret; /* path of the shared secret file (or the three below) */
	/* an operator's PKI instead: the agent's certificate chain (PEM), its
	 * private key and the CA its peers' certificates chain to (all or none) */
	const char *tls_cert, *tls_key, *tls_ca;
	uint32_t budget; /* the agent's worker budget */
	/* --lend-root: the only dataset roots opened for peers (none: lend nothing);
	 * a peer's dataset is indexed within lend_index_ms reading at most
	 * lend_max_files entries (0: GM_LEND_INDEX_MS, GM_LEND_FILES; limits.h) */
	const char *const *lend_roots;
	uint32_t nlend_roots, lend_index_ms;
	uint64_t lend_max_files;
	/* --lend-python: peers' Python jobs may run their workers here (their
	 * pickles are code: off by default); each root still below a lend root */
	bool lend_python;
	/* --unguarded-ucx: where the kernel refuses the socket filter on UCX's
	 * ports (EPERM, EACCES: no CAP_NET_ADMIN), leave them open instead of
	 * failing (the operator's firewall admits only the peers there) */
	bool unguarded_ucx;
	int verbose;
	void (*log)(void *arg, const char *line); /* one line, no newline */
	void *log_arg;
};

/* A home job's remote side, for status and the controller. */
struct gm_remote_job_info {
	uint32_t workers;      /* remote workers connected for it now */
	uint32_t asked;	       /* remote workers it wants */
	uint32_t granted;      /* remote workers the peers said they started */
	uint64_t samples;      /* samples remote workers delivered (all time) */
	uint64_t bytes;	       /* pixel bytes received from them */
	uint64_t revoked;      /* remote leases taken back (dead or stalled writers) */
	uint64_t fenced;       /* messages of a lease no longer held, dropped */
	uint64_t none_starved; /* remote workers' claims answered "no batch free"
				* while its trainer waited (all time) */
	double rate;	       /* img/s delivered by remote workers over the last tick */
	double per_worker;     /* ... per remote worker (0: not measured) */
	uint32_t lendable;     /* workers the live peers can lend it in all, by their
				* last heartbeats (what they lend it now included) */
	/* why it has fewer than it asked for, now: peers that refuse the job
	 * (busy indexing others; no --lend-root covers its dataset; the dataset
	 * refused there: differs, too large, slow, its options), workers peers
	 * granted short of their share or no peer has room for (capacity) */
	uint32_t refused_busy, refused_root, refused_dataset, short_capacity;
	uint64_t lends, refusals; /* LENDs sent, refusals received (all time) */
	char why[512];		  /* the same in words, per peer ("" when it has all) */
};

/* The plugin's functions (dlsym "gm_remote_plugin"). */
struct gm_remote_ops {
	uint32_t abi;	     /* GM_REMOTE_ABI */
	const char *version; /* goldminer's version: must equal the agent's */
	int (*create)(struct gm_remote **out, const struct gm_remote_cfg *c, char *err,
		      size_t errlen);
	void (*destroy)(struct gm_remote *r);
	int (*fd)(struct gm_remote *r);	      /* poll it for POLLIN */
	void (*service)(struct gm_remote *r); /* after poll, and at every tick */
	uint16_t (*port)(struct gm_remote *r);
	/* home side: a job attached here (ring_fd: its memfd, mapped again by the
	 * plugin; ds: its index, which the plugin reads to check what remote
	 * workers send, and which must outlive job_remove). 0 or -errno with err. */
	int (*job_add)(struct gm_remote *r, int ring_fd, const struct gm_node_req *req,
		       const struct gm_dataset *ds, uint32_t bpe, uint32_t lease_ms,
		       uint64_t *token, char *err, size_t errlen);
	void (*job_remove)(struct gm_remote *r, uint64_t token);
	void (*job_want)(struct gm_remote *r, uint64_t token, uint32_t workers);
	void (*job_info)(struct gm_remote *r, uint64_t token, struct gm_remote_job_info *out);
	/* workers the live peers can lend this agent's jobs in all now, by their
	 * last heartbeats (0 before any peer was heard): what sizes a new job's
	 * ring */
	uint32_t (*peers_lendable)(struct gm_remote *r);
	/* peer side: how many workers this agent may lend now (its idle budget) */
	void (*set_lendable)(struct gm_remote *r, uint32_t workers);
	/* ... and what that is worth, told to the peers in every heartbeat: the
	 * cores its own jobs leave idle (whatever it lends now) and what one core
	 * makes of their images (img/s, 0: not measured); and whether it runs
	 * jobs of its own (then its lent workers share those cores: lender.c) */
	void (*set_capacity)(struct gm_remote *r, double cores, double img_per_core, bool own_jobs);
	uint32_t (*lent)(struct gm_remote *r); /* remote worker processes running here */
	/* the peers and lent jobs as JSON members (no braces), into buf */
	void (*status_json)(struct gm_remote *r, char *buf, size_t len);
	/* the peers in the Prometheus text format (families goldminer_peer_*, label
	 * peer="ADDR:PORT"), into buf; the bytes written (at most len) */
	size_t (*metrics_text)(struct gm_remote *r, char *buf, size_t len);
	/* `goldminer node --remote-worker FD`: run one remote worker (a process the
	 * agent exec'ed) until retired or cut off. 0, or -errno (said on stderr). */
	int (*worker_main)(int fd);
	/* `goldminer node --lend-check FD`: check a peer's dataset for the agent that
	 * exec'ed it (lender.c) and write the answer into fd. 0 or -errno. */
	int (*lend_check_main)(int fd);
	/* SIGHUP: --peers-file read again (a bad file is said, naming its line,
	 * and the peers stay as they were) and --peers' names looked up now */
	void (*reload)(struct gm_remote *r);
	/* home side: a Python job (CMDJOB, a binding's ring, bind.h) whose request
	 * carries its facts after the command (the trainer's Python, its dataset's
	 * roots): peers that lend Python workers make whole batches of it
	 * (pyhome.c). ring_fd, spec_fd: its memfds (the spec is read now). 0 or
	 * -errno with err (-ENOENT: no root named, so no peer can check it). */
	int (*pyjob_add)(struct gm_remote *r, int ring_fd, int spec_fd,
			 const struct gm_node_req *req, uint32_t lease_ms, uint64_t *token,
			 char *err, size_t errlen);
};

/* The plugin's one export. */
const struct gm_remote_ops *gm_remote_plugin(void);

/* Node agent side (in libgoldminer): load the plugin: $GOLDMINER_REMOTE_LIB, else
 * libgoldminer-remote.so beside the running executable or in ../lib from it.
 * The ops, or NULL with the reason in err (not built: UCX missing, ...). */
const struct gm_remote_ops *gm_remote_load(char *err, size_t errlen);

#endif
