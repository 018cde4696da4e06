/*
 * pool_impl.h - what the worker pool's two files share, inside the library only
 * (not installed): the pool's state (struct gm_pool and its parts), and the calls
 * between the coordinator (pool.c: watch, reap, replace, size) and the making of
 * worker processes (spawn.c: fork, the C worker or exec, the zygote).
 */
#ifndef GOLDMINER_POOL_IMPL_H
#define GOLDMINER_POOL_IMPL_H

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "goldminer/elastic.h"
#include "goldminer/limits.h"
#include "goldminer/pool.h"
#include "goldminer/ring.h"

#define MAX_CONSECUTIVE_DEATHS 8

struct wk {
	pid_t pid;
	int pidfd;
	bool retiring;
	bool stalled;	   /* killed by the lease or the idle watch */
	bool reclaimed;	   /* ... and its leases taken back before it was reaped */
	uint64_t stall_ns; /* when it was killed */
	bool leased;	   /* held a lease at the last look (the lease watch's) */
	uint64_t stopped;  /* idle watch: first look that saw it stopped (0: running) */
	int ready_fd;	   /* start watch: its end of the pipe until it is made (-1: made) */
	uint64_t born;	   /* when it was forked */
	int id;		   /* its worker id (see worker_id), kept while it is not stalled */
};

/* How often a sample was the culprit (quarantined at 2). */
struct strikes {
	uint32_t sample, count;
};

/* The last worker a quarantined sample took down (gm_pool_culprit): written once
 * by the coordinator before it quarantines the sample, read by the trainer's
 * thread, which learns of the quarantine from the batch that reports it. */
struct culprit {
	_Atomic uint32_t sample1; /* sample + 1; 0: free */
	int pid, sig;		  /* sig 0: it stalled the worker */
};

/* What the lease watch saw of one slot, and since when it has not changed. */
struct lease_seen {
	uint32_t word;	/* state word (CLAIMED|pid) */
	uint64_t task;	/* its task */
	uint64_t done;	/* samples finished (popcount of the done bits) */
	uint32_t cur;	/* sample being decoded */
	uint64_t since; /* when this was first seen */
};

struct gm_pool {
	struct gm_pool_cfg c;
	struct gm_ring *ring;
	struct gm_ring_hdr *h; /* shared counters and the pool's fatal error */
	pthread_t coord;
	bool coord_started;
	int evfd;
	pthread_mutex_t mu;
	int target;	/* wanted workers (under mu) */
	bool closing;	/* under mu */
	bool handing;	/* under mu: closing hands the ring on (gm_pool_hand_over) */
	bool autoscale; /* under mu: the elastic controller sizes the pool */
	int cpu;	/* the CPU its workers are confined to (gm_host_worker_cpu), -1: none */
	struct wk wk[GM_MAX_WORKERS];
	int nwk; /* coordinator thread only */
	/* workers asked to go (retired, or killed by the lease watch) and not yet
	 * reaped: written by the coordinator, read by gm_pool_retiring */
	_Atomic uint32_t retiring;
	int consecutive_deaths;
	uint64_t consumed_at_last_death;
	struct strikes crash[64], stall[64]; /* samples that crashed / stalled workers */
	struct culprit culprits[64];	     /* who each quarantined sample took down */
	/* the pid of the worker of each id now running (0: none): written by the
	 * coordinator, read by gm_pool_pids from any thread */
	_Atomic int32_t pid_of[GM_MAX_WORKERS];
	uint64_t lease_ns;	 /* progress deadline of a lease (0: not watched) */
	struct lease_seen *seen; /* per slot */
	char last_stall[512];	 /* the last stall, for the storm message */
	uint64_t last_look;	 /* when the watches last looked */
	_Atomic int started;	 /* coordinator spawned its first workers: 1 ok, <0 err */
	/* chaos testing (coordinator thread writes, stats read the ring header) */
	uint64_t chaos_state;
	pid_t chaos_victim;
	uint64_t chaos_t;
	/* elastic controller: the coordinator's (autoscale) or the owner's (measure) */
	struct gm_elastic_meter meter;
	struct gm_elastic ctl;
	/* the zygote of exec'd workers (coordinator thread only; zpid 0: none) */
	pid_t zpid;
	int zpidfd, zsock;
	bool zready;	     /* it said it is loaded: workers are forked from it */
	int zfails;	     /* zygotes that died before they were ready */
	bool zserver_failed; /* the zygote server failed once: zygotes are exec'd */
	uint64_t zwait;	     /* workers wait for it until then (ns), then start fresh */
};

/* spawn.c: start one worker (forked from the zygote when it is ready, else fresh)
 * into p->wk[p->nwk]; 0 or -errno. */
int gm_pool_spawn(struct gm_pool *p);
/* SIGKILL a worker's process group (its pid, unreaped, names it); reap it. */
void gm_pool_kill_group(pid_t pid);
void gm_pool_reap_group(pid_t pid);
/* The zygote of exec'd workers: start it (from the trainer's zygote server when
 * there is one, else exec'd), end it (kill_it: SIGKILL its group first), and act
 * on what its pidfd and socket say (pz[0], pz[1]: their poll entries). */
void gm_pool_zygote_start(struct gm_pool *p);
void gm_pool_zygote_end(struct gm_pool *p, bool kill_it);
void gm_pool_zygote_look(struct gm_pool *p, const struct pollfd *pz);

#endif
