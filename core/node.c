/*
 * node.c - the node agent daemon (see node.h).
 *
 * One thread, one poll loop: the listening socket, one connection per job, and a
 * GM_ELASTIC_TICK_MS tick that re-divides the CPU budget. Each job is a worker
 * pool (pool.h: its own coordinator thread forks, watches and replaces its
 * workers) over the job's own index; the agent only decides how many workers each
 * job gets, with the elastic controller's division (gm_elastic_divide: the shared
 * policy with the measured demand in place of the GPU-bound rate). A job not yet
 * measured keeps what it has (at least one worker).
 *
 * The budget holds at every moment, not only once pools have settled. A division
 * is a wish (job.want); apply_grants moves the pools towards it: shrinks at once,
 * growth only into CPUs no worker holds any more (gm_elastic_grant). A retired
 * worker finishes its batch before it exits, so a newcomer that arrives while the
 * others hold the whole budget starts with no worker and gets its first one when
 * a retiree has been reaped (within one batch of the others'; the agent looks
 * every GRANT_POLL_MS while a job is short, and the lease watch bounds a stuck
 * retiree). Invariant: the worker processes of all pools (p_alive) never number
 * more than max(budget, jobs attached): every job holds at least one worker, so
 * with more jobs than the budget each has exactly one. The one exception is a
 * worker the lease watch kills between two looks of the agent: its replacement
 * starts at once (pool.c), and the two overlap until the killed one is reaped.
 *
 * No client can stall the loop or lock others out: sockets are non-blocking (a
 * request is one packet, read only when poll says it is there; replies are sent
 * with MSG_DONTWAIT), a connection without a job that sends nothing for idle_ms
 * is closed, and when the table is full the oldest job-less connection is closed
 * to make room; only a table full of jobs refuses a newcomer, in words.
 *
 * Memory: every job's ring is counted against one budget (--mem, default half of
 * the machine or of the cgroup's limit); a job whose ring does not fit is refused
 * before anything is allocated, and the others are not touched. The ring's own
 * admission (gm_ring_admit) still compares it with what the machine has left.
 *
 * A job may also bring its own ring and command (CMDJOB, a binding's: Python
 * workers, see "a job of the client's command" below): the agent then runs those
 * workers over that ring, sized like any job's; with peers, Python workers on
 * peers that lend them may make its batches too (core/remote/pyhome.c).
 *
 * It does not authenticate beyond uid (SO_PEERCRED), it does not persist anything
 * (a restarted agent starts with no jobs), and it does not parse command lines
 * (cmd/node.c) or encode messages (wire.c).
 */
#include "goldminer/node.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "goldminer/coef.h"
#include "goldminer/dataset.h"
#include "goldminer/elastic.h"
#include "goldminer/host.h"
#include "goldminer/limits.h"
#include "goldminer/policy.h"
#include "goldminer/pool.h"
#include "goldminer/remote.h"
#include "goldminer/ring.h"
#include "goldminer/util.h"

#define MAX_JOBS GM_NODE_MAX_CONNS
_Static_assert(GM_NODE_MAX_CONNS <= GM_ELASTIC_MAX_JOBS, "the division sizes every job");

struct job {
	int fd;		       /* connection; -1 = free entry */
	int64_t last_ms;       /* accept or last request (monotonic): the idle clock */
	uint64_t ring_bytes;   /* counted against the memory budget while attached */
	struct gm_pool *pool;  /* NULL until attached */
	struct gm_dataset *ds; /* the job's index (the pool's workers read it) */
	uint32_t bpe;	       /* batches per epoch */
	uint32_t batch_size;
	pid_t pid;	     /* the consumer's pid (SO_PEERCRED) */
	uint32_t cap;	     /* most workers (0: budget) */
	uint32_t fixed;	     /* pool size fixed by SCALE (0: policy) */
	uint32_t want;	     /* what the division last gave it (the agent's wish) */
	uint32_t workers;    /* what its pool is sized to: want, or less while the
			      * budget is still held by other jobs' workers */
	double demand, rate; /* last measurement (0 = none yet) */
	/* metrics: the ring's consumer counters at the previous tick */
	uint64_t m_samples, m_wait_ns;
	int64_t m_ms;
	double m_rate, m_stall;	  /* delivered img/s and blocked share over that tick */
	uint64_t token;		  /* its remote side (remote.h), 0: none */
	struct gm_policy_ask ask; /* its remote ask, held steady (gm_policy_ask_next) */
	int64_t ask_ms;		  /* when it was last decided (0: never) */
	uint32_t rwant;		  /* remote workers it asks the peers for */
	double local_alone;	  /* what its local workers alone delivered (img/s, smoothed; 0:
				   * not measured), against which remote workers must do better */
	double alone_short;	  /* ... over the windows its consumer waited (gm_policy_borrow_in's
				   * alone) */
	uint32_t windows;	  /* its measured windows (gm_pool_measure), up to 3 */
	uint64_t none_seen;	  /* its remote workers' claims refused as its trainer waited,
				   * at the last borrow (gm_remote_job_info none_starved) */
	/* its local workers' CPU time (/proc: cpu_rate): the pids last seen, their
	 * time then, and the time of those gone since */
	int cpu_pid[GM_MAX_WORKERS];
	uint64_t cpu_last[GM_MAX_WORKERS];
	int cpu_n;
	uint64_t cpu_gone;
	/* at the last reading: that CPU time in all (s), and the local samples
	 * its consumer took (--status: a line through them meets the samples'
	 * zero at the CPU of the batches made ahead of the consumer, its ring's
	 * lead, which the reading counts as the taken images') */
	double cpu_s;
	uint64_t cpu_samples;
	bool fed; /* it runs no local worker: remote ones feed it (fed_remotely) */
	struct gm_elastic_remote remote; /* what its remote workers deliver (update_fed) */
	double local_model; /* its local workers' capacity by the model (while they ran) */
	double both;	    /* what it was given while local and remote workers ran (smoothed) */
	double both_remote; /* ... of it, what its remote workers delivered (smoothed) */
	int64_t fed_ms;	    /* when it went fed (0: not fed) */
	bool fed_worse;	    /* fed, it got measurably less than both: never fed again */
	double remote_per;  /* one remote worker's img/s to it while it waited (policy.h) */
	/* borrowing: the consumer's counters at the last measurement (the window of
	 * gm_pool_measure), what it was given and waited over it, and the policy's
	 * last decision (gm_policy_borrow) */
	uint64_t b_samples, b_wait_ns;
	int64_t b_ms;
	double delivered, stall;
	struct gm_policy_borrow_in bin;
	struct gm_policy_borrow_out bout;
	bool told; /* its first decision has been logged */
	/* its pipeline, for the rate its like read (known_rate): the dataset's
	 * fingerprint (0: none, a command's job) and the transform */
	uint64_t fp;
	struct gm_aug_spec aug;
	char root[4096];
	uid_t uid; /* the client's (SO_PEERCRED) */
	/* a CMDJOB (wire.h): workers run the client's command over the client's ring */
	bool cmd_job;
	char rnone[256]; /* ... and why no peer makes its batches (token 0) */
	int spec_fd;	 /* their fd 5 (ours: closed at detach) */
	char cmd[4096];	 /* the command's arguments, NUL-separated */
	const char *argv[GM_NODE_CMD_ARGS + 1];	 /* into cmd */
	const char *zargv[GM_NODE_CMD_ARGS + 2]; /* the same and "--zygote" */
	/* ... run by the trainer itself (wire.h, GM_NODE_TRAINER_WORKERS): the
	 * agent's pool over the ring is never started; the division's size for
	 * it goes into the ring header's a_target, which the trainer's pool
	 * takes; why in trainer_why */
	bool trainer_runs;
	char trainer_why[512];
	/* an ATTACH that brought its running ring (a loader whose agent went away
	 * and whose own workers went on with it): adopted at this task + 1 (0: a
	 * ring made here) */
	uint64_t adopted;
};

struct agent {
	int lfd;
	uint32_t budget;
	int verbose;
	uid_t uid;
	uint64_t mem;	    /* memory budget of all rings, bytes */
	uint32_t idle_ms;   /* close a job-less connection silent this long */
	uint32_t max_conns; /* entries of jobs[] in use at most */
	bool short_;	    /* a job has fewer workers than its wish: look often */
	void (*on_tick)(void *arg, const char *text, size_t len);
	void *tick_arg;
	struct gm_host_cpu host;    /* cores the host can deliver (host.h) */
	struct gm_policy_lend lend; /* what it lends, over time (gm_policy_lend_next) */
	uint32_t lend_most;	    /* --lend-max-workers (0: no bound) */
	int64_t lend_ms;	    /* when that was last decided (0: never) */
	double idle_settled;	    /* the idle cores its guests had, no own job fresh */
	/* what each pipeline's local workers last read by their CPU accounting
	 * (cpu_rate), for a new job of the same one (known_rate), the oldest
	 * replaced first */
	struct known {
		uint64_t fp;
		struct gm_aug_spec aug;
		double rate;
	} known[8];
	uint32_t nknown;
	/* pacing of the local workers (pace_local): this process's CPU at the
	 * last look, its share of a core since (smoothed), the pace set */
	int64_t self_ms;
	uint64_t self_cpu_ns;
	double remote_per; /* one remote worker's img/s to a job that waited (policy.h) */
	double self_cores;
	uint32_t pace_milli;
	const struct gm_remote_ops *rops; /* the remote-workers plugin, NULL: none */
	struct gm_remote *rem;
	struct job jobs[MAX_JOBS];
	/* the interpreters probed (can_run), newest last: a file is probed once */
	struct probe {
		char path[256];
		dev_t dev;
		ino_t ino;
		struct timespec mtime;
		bool ok;
	} probes[8];
	uint32_t nprobes;
};

const char *gm_node_default_socket(void)
{
	static char path[4200];
	return gm_wire_default_socket(path, sizeof(path));
}

static void logf_(struct agent *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void logf_(struct agent *a, const char *fmt, ...)
{
	if (!a->verbose)
		return;
	va_list ap;
	va_start(ap, fmt);
	gm_vlog("node", fmt, ap);
	va_end(ap);
}

/* The host's jobs changed (one came or went): a fed job's trial is no longer
 * judged against what its local and remote workers made together before
 * (fed_failed): that was measured beside other jobs. A 0.15-core home's job
 * fed by peers at 792 img/s fell to 430 when a second job's local worker
 * started beside it, and took its own local worker back "for good" against
 * the 610 it had made before; remote workers still beat its local ones alone
 * (335), which gm_policy_fed_remotely goes on checking. Nor does a failed
 * trial hold in the new mix ("for good": fed_worse): its local worker added
 * to what its remote ones made while it had the host to itself, but beside a
 * new job it takes that job's share, the receive path already holding part
 * of the host (seed 1: a 0.15-core home's 180 img/s job ran 22.5 s with
 * lending off and 25.9 s on, beside a job that had taken its local worker
 * back for good before it came and whose remote batches cost the agent 0.065
 * of a core). */
static void host_changed(struct agent *a, const struct job *except)
{
	for (int i = 0; i < MAX_JOBS; i++) {
		struct job *j = &a->jobs[i];
		if (j == except || !j->pool)
			continue;
		if (j->fed)
			j->both = 0;
		j->fed_worse = false;
	}
}

static void detach(struct agent *a, struct job *j, const char *why)
{
	if (j->pool) {
		logf_(a, "job pid %d (%s) detached: %s; its workers stop", (int)j->pid, j->root,
		      why);
		if (a->rem && j->token) {
			struct gm_remote_job_info ri;
			a->rops->job_info(a->rem, j->token, &ri);
			logf_(a,
			      "job pid %d: remote workers delivered %" PRIu64 " samples (%" PRIu64
			      " bytes); %" PRIu64 " remote leases taken back, %" PRIu64
			      " messages of taken-back leases dropped",
			      (int)j->pid, ri.samples, ri.bytes, ri.revoked, ri.fenced);
			a->rops->job_remove(a->rem, j->token); /* remote leases back first */
		}
		gm_pool_destroy(
		    j->pool); /* stops workers, unmaps; the memfd dies with the client's map */
		gm_dataset_close(j->ds);
		host_changed(a, j);
	}
	if (j->cmd_job)
		close(j->spec_fd);
	close(j->fd);
	memset(j, 0, sizeof(*j));
	j->fd = -1;
}

#define GRANT_POLL_MS  5  /* how often the agent looks while a job is short of workers */
#define REMOTE_POLL_MS 50 /* ... and at least, with peers (remote.h: heartbeats) */

/* The budget less the workers this agent runs for other hosts' jobs. */
static uint32_t local_budget(const struct agent *a)
{
	uint32_t lent = a->rem ? a->rops->lent(a->rem) : 0;
	return a->budget > lent ? a->budget - lent : 0;
}

/* A job that remote workers are feeding, on a host that can deliver the agent
 * less than GM_NODE_FED_CORES (its CPU cgroup's quota, or --cpus): it runs no local
 * worker. On such a host the CPU is worth far more receiving remote workers'
 * batches than decoding (measured: tests/bench/bench-remote.sh; a local worker
 * on a quarter core burns the quota that the agent's receive path needs, and
 * the cgroup is throttled for the rest of each period). But only once its
 * remote workers measurably deliver more than its local workers alone did
 * (gm_policy_fed_remotely; decided each tick by update_fed): a 0.25-core
 * host's job fed by peers that sent less than its own worker made ran 15.7 s
 * with lending off and 22.2 s on. At 0.75 of a core the rule cost more than it
 * gave: a job there lost its local worker to one flaky remote one and its
 * local delivery fell to 87 img/s (docs/MEASUREMENTS.md, "Cluster
 * experiment"). */
static bool fed_remotely(const struct agent *a, const struct job *j)
{
	return a->rem && j->token && j->fed;
}

/* Whether a fed job's trial failed: a window of its remote workers' opened
 * after it went fed has closed (not the one that straddles), and they alone
 * delivered measurably less than local and remote together did
 * (gm_policy_fed_worse). */
static bool fed_failed(const struct job *j)
{
	return j->fed && j->remote.rate_from_ms >= j->fed_ms &&
	       gm_policy_fed_worse(j->both, j->remote.rate);
}

/* What the job's local workers alone deliver (over measurements in which no
 * remote sample landed; the model's capacity until then), and whether its
 * remote workers, measured from their first landed batch
 * (gm_elastic_remote_add), now feed it alone (fed_remotely), or failed to. */
static void update_fed(struct agent *a, struct job *j, int64_t now)
{
	struct gm_remote_job_info ri = {0};
	if (a->rem && j->token)
		a->rops->job_info(a->rem, j->token, &ri);
	gm_elastic_remote_add(&j->remote, ri.samples, ri.workers, j->batch_size, now);
	bool none = gm_elastic_remote_none(&j->remote);
	if (!j->fed && j->workers && j->delivered > 0) {
		double *m = none ? &j->local_alone : &j->both;
		*m = *m > 0 ? 0.7 * *m + 0.3 * j->delivered : j->delivered;
		if (!none && j->remote.rate > 0)
			j->both_remote = j->both_remote > 0
					     ? 0.7 * j->both_remote + 0.3 * j->remote.rate
					     : j->remote.rate;
		gm_policy_alone_add(&j->alone_short, none, j->windows, j->stall, j->delivered,
				    j->demand, j->remote.rate);
	}
	if (!j->fed && j->workers && j->rate > 0) { /* the model's, until measured */
		double units =
		    j->bin.cores > 0 && j->bin.cores < j->workers ? j->bin.cores : j->workers;
		j->local_model = units * j->rate;
	}
	double alone = j->local_alone > 0 ? j->local_alone : j->local_model;
	bool small = a->rem && j->token && a->host.cores < GM_NODE_FED_CORES;
	double remote = j->remote.rate;
	bool fed = !j->fed_worse && gm_policy_fed_remotely(small, alone, remote, j->demand, j->fed);
	if (fed_failed(j)) {
		fed = false;
		j->fed_worse = !gm_policy_fed_retry(remote, j->both_remote);
		logf_(a,
		      "job pid %d: runs its local workers again%s: remote workers alone "
		      "deliver %.0f img/s, with its local workers it got %.0f (%.0f of it "
		      "remote)",
		      (int)j->pid, j->fed_worse ? ", for good" : " until they deliver more", remote,
		      j->both, j->both_remote);
	} else if (fed != j->fed) {
		logf_(a,
		      "job pid %d: %s (remote workers deliver %.0f img/s, its local workers "
		      "alone %.0f)",
		      (int)j->pid,
		      fed ? "runs no local worker, remote workers feed it"
			  : "runs its local workers again",
		      remote, alone);
	}
	if (fed && !j->fed)
		j->fed_ms = now;
	j->fed = fed;
}

/* Move every pool towards the division within the budget (see the file comment):
 * true while some job still has fewer workers than it was given. */
static bool apply_grants(struct agent *a)
{
	uint32_t want[MAX_JOBS], retiring[MAX_JOBS], alive[MAX_JOBS], target[MAX_JOBS];
	int idx[MAX_JOBS], n = 0;
	bool short_ = false;

	for (int i = 0; i < MAX_JOBS; i++) {
		struct job *j = &a->jobs[i];
		if (!j->pool)
			continue;
		want[n] = fed_remotely(a, j) ? 0 : j->want;
		target[n] = j->workers;
		/* retiring first, then p_alive (pool.h: a worker counted twice at worst) */
		retiring[n] = gm_pool_retiring(j->pool);
		alive[n] = atomic_load(&gm_ring_hdr(gm_pool_ring(j->pool))->p_alive);
		idx[n++] = i;
	}
	uint32_t cap = local_budget(a) > (uint32_t)n ? local_budget(a) : (uint32_t)n;
	gm_elastic_grant(want, retiring, alive, (size_t)n, cap, target);
	for (int k = 0; k < n; k++) {
		struct job *j = &a->jobs[idx[k]];
		if (target[k] != j->workers) {
			j->workers = target[k];
			if (j->trainer_runs) /* the trainer's pool takes it (ring.h) */
				atomic_store(&gm_ring_hdr(gm_pool_ring(j->pool))->a_target,
					     j->workers);
			else
				gm_pool_set_target(j->pool, (int)j->workers);
		}
		short_ |= j->workers < j->want;
	}
	return short_;
}

static uint32_t used_workers(const struct agent *a)
{
	uint32_t n = 0;
	for (int i = 0; i < MAX_JOBS; i++)
		if (a->jobs[i].pool)
			n += a->jobs[i].workers;
	return n;
}

static uint32_t wanted_workers(const struct agent *a)
{
	uint32_t n = 0;
	for (int i = 0; i < MAX_JOBS; i++)
		if (a->jobs[i].pool)
			n += a->jobs[i].want;
	return n;
}

static bool divide(struct agent *a);
static void lend_capacity(struct agent *a);

static uint64_t used_mem(const struct agent *a, int *njobs)
{
	uint64_t m = 0;
	*njobs = 0;
	for (int i = 0; i < MAX_JOBS; i++)
		if (a->jobs[i].pool) {
			m += a->jobs[i].ring_bytes;
			++*njobs;
		}
	return m;
}

/* A sample's bytes in the job's ring: its finished pixels, or with
 * gpu_decode (wire.h's GM_NODE_COEF) the coefficient slot that holds them. */
static uint64_t sample_bytes(const struct gm_loader_opts *o)
{
	uint64_t sb = gm_aug_out_bytes(&o->aug);
	return o->gpu_decode ? gm_coef_slot_bytes(sb) : sb;
}

/* Does the job's ring fit in what the budget has left? 0, or -ENOMEM with why.
 * Sizes the pool would refuse (gm_ring_size 0) are left to it. */
static int admit_job(struct agent *a, struct job *j, const struct gm_loader_opts *o, char *why,
		     size_t len)
{
	uint64_t sb = sample_bytes(o);
	int n;
	uint64_t used = used_mem(a, &n);

	j->ring_bytes = gm_ring_size(o->slots, o->batch_size, sb);
	if (!j->ring_bytes || (used <= a->mem && j->ring_bytes <= a->mem - used))
		return 0;
	char need[32], have[32], busy[32];
	gm_fmt_bytes(need, sizeof(need), j->ring_bytes);
	gm_fmt_bytes(have, sizeof(have), a->mem);
	gm_fmt_bytes(busy, sizeof(busy), used);
	snprintf(why, len,
		 "the ring of %u slots x %u samples x %" PRIu64 " bytes needs %s; the node "
		 "agent's memory budget is %s, %s of it taken by %d job%s; lower the batch "
		 "size, the image size or the slots (--batch, --size, --slots), or start "
		 "the agent with a larger --mem",
		 o->slots, o->batch_size, sb, need, have, busy, n, n == 1 ? "" : "s");
	j->ring_bytes = 0;
	return -ENOMEM;
}

/* A ring of need bytes a client brought against the memory budget: what (the
 * ring, as the message names it) and fix (the rest of the message) say why not.
 * 0 with j->ring_bytes set, or -ENOMEM. */
static int admit_bytes(struct agent *a, struct job *j, uint64_t need, const char *what,
		       const char *fix, char *why, size_t len)
{
	int n;
	uint64_t used = used_mem(a, &n);
	if (used > a->mem || need > a->mem - used) {
		char h_need[32], h_have[32];
		gm_fmt_bytes(h_need, sizeof(h_need), need);
		gm_fmt_bytes(h_have, sizeof(h_have), a->mem > used ? a->mem - used : 0);
		snprintf(why, len, "%s needs %s, the node agent's memory budget has %s left%s",
			 what, h_need, h_have, fix);
		return -ENOMEM;
	}
	j->ring_bytes = need;
	return 0;
}

/* A running ring a client brought (ATTACH with its memfd): its bytes against the
 * memory budget, as a ring made here would be. 0, or -errno with why. */
static int admit_ring(struct agent *a, struct job *j, int ring_fd, char *why, size_t len)
{
	struct stat st;
	if (fstat(ring_fd, &st) || !S_ISREG(st.st_mode)) {
		snprintf(why, len, "the running ring sent with the request is not a memfd");
		return -EINVAL;
	}
	return admit_bytes(a, j, (uint64_t)st.st_size, "the job's running ring",
			   " (its workers stay in the client); start the agent with a larger --mem",
			   why, len);
}

/* An adopted ring must be the one these options make: same batch, sample size
 * and tasks (gm_ring_attach validated the rest). 0 or -EINVAL with why. */
static int check_adopted(const struct job *j, const struct gm_loader_opts *o, uint64_t first,
			 uint64_t end, char *why, size_t len)
{
	const struct gm_ring_hdr *h = gm_ring_hdr(gm_pool_ring(j->pool));
	if (h->batch_size == o->batch_size && h->sample_bytes == sample_bytes(o) &&
	    h->first_task == first && h->end_task == end)
		return 0;
	snprintf(why, len,
		 "the running ring sent is not this job's (batch %u, %" PRIu64
		 " bytes a sample, tasks %" PRIu64 "..%" PRIu64 "; the options make batch %u, "
		 "%zu bytes, tasks %" PRIu64 "..%" PRIu64 ")",
		 h->batch_size, h->sample_bytes, h->first_task, h->end_task, o->batch_size,
		 (size_t)sample_bytes(o), first, end);
	return -EINVAL;
}

/* The job's index and pool, as a local loader would make them (messages are the
 * client's: they start "gm_loader_open: "); ring_fd >= 0: over that running ring
 * (adopted) instead of a new one. 0 or -errno with err filled. */
static int open_job(struct agent *a, struct job *j, const struct gm_loader_opts *o, int ring_fd,
		    char *err, size_t errlen)
{
	struct gm_pool_cfg c;
	uint64_t first, end;
	char why[768];
	int rc;

	if (!o->root || !*o->root) {
		gm_errf(err, errlen, "gm_loader_open: no dataset root given");
		return -EINVAL;
	}
	rc = gm_pool_check(o, why, sizeof(why));
	if (!rc)
		rc = ring_fd >= 0 ? admit_ring(a, j, ring_fd, why, sizeof(why))
				  : admit_job(a, j, o, why, sizeof(why));
	if (!rc)
		rc = gm_dataset_open(&j->ds, o->root, why, sizeof(why));
	if (rc)
		goto out;
	rc = gm_pool_tasks(o, j->ds, &j->bpe, &first, &end, why, sizeof(why));
	if (rc)
		goto out_dataset;
	gm_pool_cfg_init(&c, o, j->ds, j->bpe, first, end);
	c.workers = 0; /* the agent sizes the pool (apply_grants), within its budget */
	c.nice = GM_NODE_WORKER_NICE;
	c.ring_fd = ring_fd >= 0 ? ring_fd : 0;
	rc = gm_pool_create(&j->pool, &c, why, sizeof(why));
	if (rc)
		goto out_dataset;
	if (ring_fd >= 0)
		rc = check_adopted(j, o, first, end, why, sizeof(why));
	if (!rc)
		rc = gm_pool_start(j->pool, why, sizeof(why));
	if (rc)
		goto out_pool;
	j->batch_size = o->batch_size;
	return 0;

out_pool:
	gm_pool_destroy(j->pool);
	j->pool = NULL;
out_dataset:
	gm_dataset_close(j->ds);
	j->ds = NULL;
out:
	j->ring_bytes = 0;
	gm_errf(err, errlen, "gm_loader_open: %s", why);
	return rc;
}

/* A job's ring slots when its client named none. Locally two per worker it may
 * get (one being made, one the consumer holds). Where remote workers may join,
 * eight per worker of all it may get, local and remote, and two more (two on
 * a host under half a core: gm_policy_ring_slots says why): each
 * remote worker holds a lease ahead, claimed while it makes the one before
 * (home.c's room_ahead; without it a 0.5-core peer's worker waited for its
 * next lease 12-15% of its time), and the batches of workers on another host
 * come back late and out of order, which the in-order give-back must absorb
 * (tests/bench/bench-remote.sh, a 0.25-core home fed by 2 remote workers:
 * 8 slots 1,464-1,943 img/s, 16 slots 963-2,540, 32 slots 2,593-2,623). All it may get is the job's
 * --workers, or the budget and what the live peers can lend now by their heartbeats (none heard
 * yet: never fewer slots than before, four per worker of the budget; none on a host that runs
 * guests now, gm_policy_ring_peers). A ring that size that the
 * memory budget cannot hold is halved, down to that size, which admit_job then refuses in words if
 * it does not fit either. A
 * --workers cap cuts these counts and never raises them
 * (gm_policy_ring_workers): --workers 8 sizes the ring as auto does. */
static uint32_t ring_slots(const struct agent *a, const struct gm_node_req *req,
			   const struct gm_loader_opts *o)
{
	uint32_t cap = req->workers > 0 ? (uint32_t)req->workers : 0;
	if (!a->rem)
		return gm_policy_pow2_slots(2 * gm_policy_ring_workers(cap, a->budget, 0));
	uint32_t floor = gm_policy_pow2_slots(2 * gm_policy_ring_workers(cap, 2 * a->budget, 0));
	uint32_t all = gm_policy_ring_workers(
	    cap, a->budget,
	    gm_policy_ring_peers(a->rops->peers_lendable(a->rem), a->rops->lent(a->rem)));
	uint32_t slots = gm_policy_ring_slots(a->host.cores, all);
	uint64_t sb = sample_bytes(o);
	int n;
	uint64_t used = used_mem(a, &n);
	while (slots > floor) {
		uint64_t bytes = gm_ring_size(slots, o->batch_size, sb);
		if (bytes && used <= a->mem && bytes <= a->mem - used)
			break;
		slots /= 2;
	}
	return slots > floor ? slots : floor;
}

/* ATTACH: a job whose ring is made here; or, with one fd, the job's running ring
 * (a loader whose agent went away, re-attaching: its own workers made batches
 * meanwhile): adopted as it is, its leases and the tasks already consumed kept,
 * and no ring sent back. */
static void attach(struct agent *a, struct job *j, struct gm_node_req *req, const int *fds,
		   int nfds)
{
	struct gm_loader_opts o;
	char err[1024];

	if (j->pool) {
		gm_wire_reply(j->fd, -EISCONN, -1, 0, 0, "this connection already has a job");
		return;
	}
	if (nfds > 1) {
		gm_wire_reply(j->fd, -EINVAL, -1, 0, 0,
			      "an ATTACH carries no fd, or the job's running ring alone");
		return;
	}
	if (req->flags & ~GM_NODE_COEF) {
		gm_wire_reply(j->fd, -EINVAL, -1, 0, 0,
			      "unknown request flags 0x%x (another goldminer build?)", req->flags);
		return;
	}
	gm_wire_request_opts(req, &o);
	if (!o.slots)
		o.slots = ring_slots(a, req, &o);
	int rc = open_job(a, j, &o, nfds ? fds[0] : -1, err, sizeof(err));
	if (rc) {
		gm_wire_reply(j->fd, rc, -1, 0, 0, "%s", err);
		return;
	}
	if (nfds) /* + 1: 0 says "made here" */
		j->adopted = 1 + atomic_load(&gm_ring_hdr(gm_pool_ring(j->pool))->consumed);
	j->cap = req->workers > 0 ? (uint32_t)req->workers : 0;
	/* Wish for the idle part of the budget (at least one worker), so a job does
	 * not ramp up from one worker; the next rebalance corrects it by measurement.
	 * The division makes room for it now (the others shrink), and its pool grows
	 * only as the others' retired workers exit: it may start with none. */
	uint32_t used = wanted_workers(a), idle = used < a->budget ? a->budget - used : 0;
	j->want = idle ? idle : 1;
	if (j->cap && j->want > j->cap)
		j->want = j->cap;
	j->workers = 0;
	a->short_ = divide(a);
	snprintf(j->root, sizeof(j->root), "%s", req->root);
	j->fp = gm_dataset_fingerprint(j->ds);
	j->aug = o.aug;
	if (a->rem && o.gpu_decode) {
		logf_(a,
		      "job pid %d: no remote workers: its samples are coefficient slots "
		      "(gpu_decode), made by this host's workers only",
		      (int)j->pid);
	} else if (a->rem) {
		uint32_t lease = gm_lease_ms(o.lease_timeout_ms);
		if (a->rops->job_add(a->rem, gm_ring_fd(gm_pool_ring(j->pool)), req, j->ds, j->bpe,
				     lease, &j->token, err, sizeof(err)))
			logf_(a, "job pid %d: no remote workers: %s", (int)j->pid, err);
		lend_capacity(a);
	}
	gm_wire_reply_attach(j->fd, j->adopted ? -1 : gm_ring_fd(gm_pool_ring(j->pool)), j->bpe,
			     gm_dataset_fingerprint(j->ds), o.gpu_decode ? GM_NODE_COEF : 0, "ok");
	if (j->adopted) {
		logf_(a,
		      "job pid %d re-attached: %s, its running ring adopted at task %" PRIu64
		      " (its own workers made the batches meanwhile); %u of %u workers in use",
		      (int)j->pid, j->root, j->adopted - 1, used_workers(a), a->budget);
		return;
	}
	host_changed(a, j);
	int n;
	char mem[32];
	gm_fmt_bytes(mem, sizeof(mem), used_mem(a, &n));
	char ring[32];
	gm_fmt_bytes(ring, sizeof(ring), j->ring_bytes);
	logf_(a,
	      "job pid %d attached: %s, batch %u, a ring of %u slots (%s); %u of %u workers in "
	      "use (%u given to it so far), %s of memory in use",
	      (int)j->pid, j->root, j->batch_size, o.slots, ring, used_workers(a), a->budget,
	      j->workers, mem);
}

/* ---- a job of the client's command (CMDJOB, wire.h): Python workers ---------------
 *
 * The client (goldminer.torch.DataLoader with node=) made the ring and wrote the
 * first batches' indices into it (bind.h); the agent runs the workers: a pool
 * over that ring whose workers exec the client's command (the client's
 * interpreter) with what they load as fd 5, sized by the division like any job.
 * The agent runs the client's command with its own uid, so only a client of that
 * uid may ask (root too is refused: root's command would run as another user).
 * With peers, Python workers on peers that lend them (--lend-python) may make
 * its batches too, when the request names its Python and dataset roots after
 * the command (pyhome.c, DESIGN.md section 9).
 */

/* The command of req (root: NUL-terminated arguments, then an empty one) into
 * j->argv and j->zargv, checked: 1..GM_NODE_CMD_ARGS arguments, the first an
 * absolute path this agent may execute. 0, or -EINVAL with why. */
static int parse_cmd(struct job *j, const struct gm_node_req *req, char *why, size_t len)
{
	size_t off = 0;
	int n = 0;

	memcpy(j->cmd, req->root, sizeof(j->cmd));
	while (off < sizeof(j->cmd) && j->cmd[off] && n < GM_NODE_CMD_ARGS) {
		j->argv[n++] = j->cmd + off;
		off += strnlen(j->cmd + off, sizeof(j->cmd) - off) + 1;
	}
	if (off >= sizeof(j->cmd) || j->cmd[off] || n == 0) {
		snprintf(why, len,
			 "the workers' command must be 1..%d NUL-terminated arguments and an "
			 "empty one, in %zu bytes",
			 GM_NODE_CMD_ARGS, sizeof(j->cmd));
		return -EINVAL;
	}
	if (j->argv[0][0] != '/') {
		snprintf(why, len, "%.512s is not an absolute path", j->argv[0]);
		return -EINVAL;
	}
	for (int k = 0; k < n; k++)
		j->zargv[k] = j->argv[k];
	j->argv[n] = NULL;
	j->zargv[n] = "--zygote";
	j->zargv[n + 1] = NULL;
	return 0;
}

/* Can the job run: the agent's uid, the two fds, a command, a deadline, a ring
 * that fits the memory budget? 0, or -errno with why. */
static int check_cmd_job(struct agent *a, struct job *j, const struct gm_node_req *req,
			 const int *fds, int nfds, char *why, size_t len)
{
	struct stat rs, ss;

	if (j->uid != a->uid) {
		snprintf(why, len,
			 "refused: workers that run the client's own command need the agent's "
			 "uid %u (this client runs as uid %u)",
			 (unsigned)a->uid, (unsigned)j->uid);
		return -EACCES;
	}
	if (nfds != 2 || fstat(fds[0], &rs) || fstat(fds[1], &ss) || !S_ISREG(rs.st_mode) ||
	    !S_ISREG(ss.st_mode)) {
		snprintf(why, len,
			 "a job of Python workers sends the ring's and the spec's memfds");
		return -EINVAL;
	}
	if (gm_pool_lease_check(req->lease_timeout_ms, why, len))
		return -EINVAL;
	int rc = admit_bytes(a, j, (uint64_t)rs.st_size, "the ring",
			     "; lower slot_bytes= or the batch size, or start the agent with a "
			     "larger --mem",
			     why, len);
	return rc ? rc : parse_cmd(j, req, why, len);
}

/* ---- who runs a CMDJOB's workers (wire.h, GM_NODE_TRAINER_WORKERS) ----------------
 *
 * The agent runs the client's command when its first argument is a file here
 * that the agent may execute and a probe of it passes: the command with
 * "--probe" appended (python/goldminer/_worker.py loads goldminer's library,
 * finds torch without importing it, and exits 0), no input, its output dropped,
 * PROBE_MS at most (measured: 0.8 s on a loaded 2-core host). A probe's
 * answer is remembered per file (path, device, inode, mtime): one probe per
 * interpreter for the agent's life, unless the file changes. The probe blocks
 * the agent's loop for its time (an interpreter's start, once). Otherwise (a
 * container whose image has not the trainer's interpreter, or not torch) the
 * trainer runs them (can_run false, why in j->trainer_why). */
#define PROBE_MS 10000

/* Run the command of j with "--probe": true when it exits 0 within PROBE_MS. */
static bool probe_cmd(const struct job *j, char *why, size_t len)
{
	const char *argv[GM_NODE_CMD_ARGS + 2];
	int n = 0, st = 0;

	while (j->argv[n]) {
		argv[n] = j->argv[n];
		n++;
	}
	argv[n] = "--probe";
	argv[n + 1] = NULL;
	pid_t pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);
		if (null >= 0) {
			dup2(null, 0);
			dup2(null, 1);
			dup2(null, 2);
		}
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	if (pid < 0) {
		snprintf(why, len, "the probe of %.200s could not start: %s", argv[0],
			 strerror(errno));
		return false;
	}
	int64_t end = gm_now_ms() + PROBE_MS;
	pid_t w;
	while ((w = waitpid(pid, &st, WNOHANG)) == 0 && gm_now_ms() < end)
		usleep(5000);
	if (w == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
		snprintf(why, len, "%.200s --probe did not end within %d s", argv[0],
			 PROBE_MS / 1000);
		return false;
	}
	if (w < 0 || !WIFEXITED(st) || WEXITSTATUS(st)) {
		snprintf(why, len,
			 "%.160s --probe failed (exit %d): this interpreter here cannot import "
			 "goldminer's worker or torch",
			 argv[0], w > 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1);
		return false;
	}
	return true;
}

/* Can this agent run the workers' command of j (see above)? why when not. */
static bool can_run(struct agent *a, const struct job *j, char *why, size_t len)
{
	struct stat st;
	const char *path = j->argv[0];

	if (stat(path, &st) || !S_ISREG(st.st_mode) || access(path, X_OK)) {
		snprintf(why, len, "%.160s is not an executable file on the agent's host: %s", path,
			 errno ? strerror(errno) : "not a regular file");
		return false;
	}
	for (uint32_t k = 0; k < a->nprobes; k++) {
		struct probe *pr = &a->probes[k];
		if (!strcmp(pr->path, path) && pr->dev == st.st_dev && pr->ino == st.st_ino &&
		    pr->mtime.tv_sec == st.st_mtim.tv_sec &&
		    pr->mtime.tv_nsec == st.st_mtim.tv_nsec) {
			if (!pr->ok)
				snprintf(why, len, "%.200s failed its probe here", path);
			return pr->ok;
		}
	}
	bool ok = probe_cmd(j, why, len);
	if (strlen(path) < sizeof(a->probes[0].path)) {
		if (a->nprobes == sizeof(a->probes) / sizeof(a->probes[0])) /* drop the oldest */
			memmove(a->probes, a->probes + 1, sizeof(a->probes) - sizeof(a->probes[0]));
		else
			a->nprobes++;
		struct probe *pr = &a->probes[a->nprobes - 1];
		snprintf(pr->path, sizeof(pr->path), "%s", path);
		pr->dev = st.st_dev;
		pr->ino = st.st_ino;
		pr->mtime = st.st_mtim;
		pr->ok = ok;
	}
	logf_(a, "%s: %s", path,
	      ok ? "probed: the agent runs the Python workers of its jobs" : why);
	return ok;
}

/* The pool of a CMDJOB over the client's ring, started with no worker; never
 * started when the trainer runs the workers (the agent only sizes it). */
static int open_cmd_pool(struct job *j, const struct gm_node_req *req, int ring_fd, char *why,
			 size_t len)
{
	struct gm_pool_cfg c;
	int rc;

	memset(&c, 0, sizeof(c));
	c.ring_fd = ring_fd;
	c.exec_argv = j->argv;
	c.zygote_argv = j->zargv;
	c.exec_fd = j->spec_fd;
	c.nice = GM_NODE_WORKER_NICE;
	c.w.batches_per_epoch = UINT32_MAX; /* a slot says its epoch (bind.h) */
	c.lease_timeout_ms = gm_lease_ms(req->lease_timeout_ms);
	rc = gm_pool_create(&j->pool, &c, why, len);
	if (rc || j->trainer_runs)
		return rc;
	rc = gm_pool_start(j->pool, why, len);
	if (rc) {
		gm_pool_destroy(j->pool);
		j->pool = NULL;
	}
	return rc;
}

/* With peers: the job's batches may be made by Python workers on peers that
 * lend them (pyhome.c), when its request names its Python and its dataset's
 * roots; else j->rnone says why they stay here. */
static void cmd_job_remote(struct agent *a, struct job *j, const struct gm_node_req *req,
			   int ring_fd)
{
	char why[512];
	snprintf(j->rnone, sizeof(j->rnone), "none: no peers (goldminer node --peers)");
	if (!a->rem)
		return;
	uint32_t lease = gm_lease_ms(req->lease_timeout_ms);
	if (a->rops->pyjob_add(a->rem, ring_fd, j->spec_fd, req, lease, &j->token, why,
			       sizeof(why))) {
		j->token = 0;
		snprintf(j->rnone, sizeof(j->rnone), "none: %.200s", why);
		logf_(a, "job pid %d: no remote Python workers: %s", (int)j->pid, why);
		return;
	}
	lend_capacity(a);
}

static void cmd_job(struct agent *a, struct job *j, struct gm_node_req *req, const int *fds,
		    int nfds)
{
	char why[768];
	int rc;

	if (j->pool) {
		gm_wire_reply(j->fd, -EISCONN, -1, 0, 0, "this connection already has a job");
		return;
	}
	if (req->flags & ~GM_NODE_TRAINER_WORKERS) {
		gm_wire_reply(j->fd, -EINVAL, -1, 0, 0,
			      "unknown request flags 0x%x (another goldminer build?)", req->flags);
		return;
	}
	rc = check_cmd_job(a, j, req, fds, nfds, why, sizeof(why));
	if (!rc && (req->flags & GM_NODE_TRAINER_WORKERS)) {
		j->trainer_runs = true;
		snprintf(j->trainer_why, sizeof(j->trainer_why),
			 "the trainer asked (GOLDMINER_NODE_WORKERS=trainer)");
	} else if (!rc) {
		j->trainer_runs = !can_run(a, j, j->trainer_why, sizeof(j->trainer_why));
	}
	if (!rc) {
		j->spec_fd = fcntl(fds[1], F_DUPFD_CLOEXEC, 3);
		rc = j->spec_fd < 0 ? -errno : 0;
		j->cmd_job = !rc;
	}
	if (!rc)
		rc = open_cmd_pool(j, req, fds[0], why, sizeof(why));
	if (rc && j->cmd_job) { /* the connection may ask again */
		close(j->spec_fd);
		j->cmd_job = false;
	}
	if (rc) {
		j->ring_bytes = 0;
		j->trainer_runs = false;
		gm_wire_reply(j->fd, rc, -1, 0, 0, "%s", why);
		return;
	}
	for (char *c = j->trainer_why; *c; c++) /* it goes into --status's JSON */
		*c = *c == '"' || *c == '\\' || (unsigned char)*c < ' ' ? '\'' : *c;
	if (j->trainer_runs) /* sized afresh (an agent before this one may have sized it) */
		atomic_store(&gm_ring_hdr(gm_pool_ring(j->pool))->a_target, 0);
	j->cap = req->workers > 0 ? (uint32_t)req->workers : 0;
	uint32_t used = wanted_workers(a), idle = used < a->budget ? a->budget - used : 0;
	j->want = idle ? idle : 1; /* as attach: the idle part, corrected by measurement */
	if (j->cap && j->want > j->cap)
		j->want = j->cap;
	a->short_ = divide(a);
	snprintf(j->root, sizeof(j->root), "workers of %s%s", j->argv[0],
		 j->trainer_runs ? ", run by the trainer" : "");
	cmd_job_remote(a, j, req, fds[0]);
	host_changed(a, j);
	gm_wire_reply_flags(j->fd, j->trainer_runs ? GM_NODE_TRAINER_WORKERS : 0, "ok");
	logf_(a, "job pid %d attached: %s (%s), cap %u; %u of %u workers in use%s%s", (int)j->pid,
	      j->root, j->token ? "peers that lend Python workers may help" : j->rnone, j->cap,
	      used_workers(a), a->budget, j->trainer_runs ? "; the trainer runs them: " : "",
	      j->trainer_runs ? j->trainer_why : "");
}

/* A Python job's part of its --status entry: who runs its workers and why,
 * and what its peers do for it (pyhome.c). The bytes written (snprintf's). */
static size_t python_json(const struct job *j, char *buf, size_t len)
{
	char by[64], why[512], remote[512];
	gm_json_quote(by, sizeof(by),
		      j->trainer_runs ? "workers run by the trainer" : "workers run by the agent");
	gm_json_quote(why, sizeof(why), j->trainer_runs ? j->trainer_why : "");
	gm_json_quote(remote, sizeof(remote),
		      j->token ? "peers that lend Python workers" : j->rnone);
	return (size_t)snprintf(buf, len,
				", \"python_workers\": true, \"run_by\": %s, \"run_why\": %s, "
				"\"remote\": %s",
				by, why, remote);
}

/* The --status text (one JSON object) into buf[len]; every string in it through
 * gm_json_quote (a reason or a path may hold any byte). */
static void status_json(struct agent *a, char *buf, size_t len)
{
	static char q[6 * sizeof(a->jobs[0].root) + 3], qw[6 * 512 + 3]; /* the loop thread's */
	size_t off = 0;
	int n = 0;
	for (int i = 0; i < MAX_JOBS; i++)
		n += a->jobs[i].pool != NULL;
	int nj;
	uint64_t mem = used_mem(a, &nj);
	uint32_t all = 0;
	for (int i = 0; i < MAX_JOBS; i++)
		if (a->jobs[i].pool)
			all += atomic_load(&gm_ring_hdr(gm_pool_ring(a->jobs[i].pool))->p_alive);
	off +=
	    (size_t)snprintf(buf + off, len - off,
			     "{\"budget\": %u, \"jobs\": %d, \"workers\": %u, \"alive\": %u, "
			     "\"mem_budget\": %" PRIu64 ", \"mem_used\": %" PRIu64 ", \"job\": [",
			     a->budget, n, used_workers(a), all, a->mem, mem);
	int k = 0;
	for (int i = 0; i < MAX_JOBS && off < len; i++) {
		struct job *j = &a->jobs[i];
		if (!j->pool)
			continue;
		uint32_t alive = atomic_load(&gm_ring_hdr(gm_pool_ring(j->pool))->p_alive);
		char why[256];
		gm_policy_borrow_why(&j->bin, &j->bout, why, sizeof(why));
		gm_json_quote(qw, sizeof(qw), why);
		gm_json_quote(q, sizeof(q), j->root);
		off += (size_t)snprintf(
		    buf + off, len - off,
		    "%s{\"pid\": %d, \"workers\": %u, \"alive\": %u, \"demand_img_per_s\": %.1f, "
		    "\"worker_img_per_s\": %.1f, \"local_capacity_img_per_s\": %.1f, "
		    "\"delivered_img_per_s\": %.1f, \"stall_ratio\": %.3f, \"rwant\": %u, "
		    "\"rwant_why\": %s, \"workers_cap\": %u, \"remote_capped\": %s, "
		    "\"worker_cpu_s\": %.4f, \"local_samples\": %" PRIu64 ", \"root\": %s",
		    k++ ? ", " : "", (int)j->pid, j->workers, alive, j->demand, j->rate,
		    j->bout.capacity, j->delivered, j->stall, j->rwant, qw, j->cap,
		    j->bout.capped ? "true" : "false", j->cpu_s, j->cpu_samples, q);
		if (a->rem && j->token && off < len) {
			struct gm_remote_job_info ri;
			a->rops->job_info(a->rem, j->token, &ri);
			gm_json_quote(qw, sizeof(qw), ri.why);
			off += (size_t)snprintf(
			    buf + off, len - off,
			    ", \"remote_workers\": %u, \"remote_asked\": %u, \"remote_granted\": "
			    "%u, "
			    "\"remote_img_per_s\": %.1f, \"remote_worker_img_per_s\": %.1f, "
			    "\"remote_samples\": %" PRIu64 ", \"remote_bytes\": %" PRIu64
			    ", \"remote_revoked\": %" PRIu64 ", \"remote_fenced\": %" PRIu64
			    ", \"remote_lends\": %" PRIu64 ", \"remote_refusals\": %" PRIu64
			    ", \"remote_refused\": {\"busy\": %u, \"no_root\": %u, \"dataset\": %u}"
			    ", \"remote_short_capacity\": %u, \"remote_why\": %s",
			    ri.workers, ri.asked, ri.granted, ri.rate, ri.per_worker, ri.samples,
			    ri.bytes, ri.revoked, ri.fenced, ri.lends, ri.refusals, ri.refused_busy,
			    ri.refused_root, ri.refused_dataset, ri.short_capacity, qw);
		}
		if (j->cmd_job && off < len)
			off += python_json(j, buf + off, len - off);
		if (j->adopted && off < len) /* re-attached with its running ring */
			off += (size_t)snprintf(buf + off, len - off,
						", \"adopted_at_task\": %" PRIu64, j->adopted - 1);
		if (off < len)
			off += (size_t)snprintf(buf + off, len - off, "}");
	}
	if (off < len)
		off += (size_t)snprintf(buf + off, len - off, "]");
	if (a->rem && off + 2 < len) {
		buf[off++] = ',';
		buf[off++] = ' ';
		a->rops->status_json(a->rem, buf + off, len - off);
		off += strlen(buf + off);
	}
	if (off < len)
		snprintf(buf + off, len - off, "}");
}

/* Delivered img/s and the consumer's blocked share since the last tick, from the
 * ring's consumer counters (relaxed: a tick's figures, not a transaction). */
static void sample_rates(struct job *j, int64_t now)
{
	struct gm_ring_hdr *h = gm_ring_hdr(gm_pool_ring(j->pool));
	uint64_t s = atomic_load_explicit(&h->c_samples, memory_order_relaxed);
	uint64_t w = atomic_load_explicit(&h->c_wait_ns, memory_order_relaxed);
	if (j->m_ms && now > j->m_ms) {
		double dt = (double)(now - j->m_ms) / 1e3;
		j->m_rate = (double)(s - j->m_samples) / dt;
		j->m_stall = (double)(w - j->m_wait_ns) / 1e9 / dt;
		j->m_stall = j->m_stall < 0 ? 0 : j->m_stall > 1 ? 1 : j->m_stall;
	}
	j->m_samples = s;
	j->m_wait_ns = w;
	j->m_ms = now;
}

/* Append to buf[*off..len) like snprintf; *off stays <= len. */
static void put(char *buf, size_t len, size_t *off, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void put(char *buf, size_t len, size_t *off, const char *fmt, ...)
{
	va_list ap;
	if (*off >= len)
		return;
	va_start(ap, fmt);
	int n = vsnprintf(buf + *off, len - *off, fmt, ap);
	va_end(ap);
	*off = n < 0 ? len : (size_t)n >= len - *off ? len : *off + (size_t)n;
}

struct family {
	const char *name, *type, *help;
};

static void put_family(char *buf, size_t len, size_t *off, const struct family *f)
{
	put(buf, len, off, "# HELP %s %s\n# TYPE %s %s\n", f->name, f->help, f->name, f->type);
}

/* One value of a per-job family (index into job_families). */
static double job_value(const struct job *j, int what)
{
	struct gm_ring_hdr *h = gm_ring_hdr(gm_pool_ring(j->pool));
	switch (what) {
	case 0:
		return j->m_rate;
	case 1:
		return j->m_stall;
	case 2:
		return (double)atomic_load(&h->c_samples);
	case 3:
		return j->workers;
	case 4:
		return atomic_load(&h->p_alive);
	case 5:
		return (double)atomic_load(&h->p_deaths);
	case 6:
		return (double)atomic_load(&h->c_errors);
	case 7:
		return j->demand;
	case 8:
		return j->bout.capacity;
	default:
		return j->rwant;
	}
}

static const struct family job_families[] = {
    {"goldminer_job_img_per_s", "gauge", "Samples delivered per second over the last tick."},
    {"goldminer_job_stall_ratio", "gauge",
     "Share of the last tick the consumer spent waiting for a batch."},
    {"goldminer_job_samples_total", "counter", "Samples delivered to the consumer."},
    {"goldminer_job_workers_granted", "gauge", "Workers the agent gives the job."},
    {"goldminer_job_workers_alive", "gauge", "Worker processes of the job alive now."},
    {"goldminer_job_worker_deaths_total", "counter", "Workers that died without being asked to."},
    {"goldminer_job_bad_samples_total", "counter", "Bad samples met in delivered batches."},
    {"goldminer_job_demand_img_per_s", "gauge", "What the consumer takes when fed (measured)."},
    {"goldminer_job_local_capacity_img_per_s", "gauge",
     "What the job's local workers can deliver on the cores they may use."},
    {"goldminer_job_remote_workers_asked", "gauge", "Remote workers the job asks the peers for."},
};

/* The remote side of each job (with peers only): what the peers granted and,
 * per reason, what they did not: peers refusing it (busy, no --lend-root for
 * its dataset, the dataset refused there), workers no peer had room for
 * (capacity), and whether its --workers cap cut what it asks for (cap). */
static void remote_metrics(struct agent *a, char *buf, size_t len, size_t *off)
{
	static const char *const reasons[] = {"busy", "no_root", "dataset", "capacity", "cap"};
	static const struct family f[] = {
	    {"goldminer_job_remote_workers_granted", "gauge",
	     "Remote workers the peers said they run for the job."},
	    {"goldminer_job_remote_refusals_total", "counter", "Refusals of the job's asks."},
	    {"goldminer_job_remote_shortfall", "gauge",
	     "Why the job has fewer remote workers than it asks for: peers refusing it "
	     "(busy, no_root, dataset), workers no peer has room for (capacity), its "
	     "--workers cap reached (cap: 1)."},
	};
	for (size_t k = 0; k < sizeof(f) / sizeof(f[0]); k++) {
		put_family(buf, len, off, &f[k]);
		for (int i = 0; i < MAX_JOBS; i++) {
			struct job *j = &a->jobs[i];
			struct gm_remote_job_info ri;
			if (!j->pool || !j->token)
				continue;
			a->rops->job_info(a->rem, j->token, &ri);
			uint32_t v[] = {ri.refused_busy, ri.refused_root, ri.refused_dataset,
					ri.short_capacity, j->bout.capped};
			if (k == 0)
				put(buf, len, off, "%s{pid=\"%d\"} %u\n", f[k].name, (int)j->pid,
				    ri.granted);
			else if (k == 1)
				put(buf, len, off, "%s{pid=\"%d\"} %" PRIu64 "\n", f[k].name,
				    (int)j->pid, ri.refusals);
			for (size_t r = 0; k == 2 && r < sizeof(v) / sizeof(v[0]); r++)
				put(buf, len, off, "%s{pid=\"%d\",reason=\"%s\"} %u\n", f[k].name,
				    (int)j->pid, reasons[r], v[r]);
		}
	}
}

static const struct family node_families[] = {
    {"goldminer_node_cpu_budget", "gauge", "Worker processes the agent may run (its CPU budget)."},
    {"goldminer_node_workers_granted", "gauge", "Workers granted to jobs now (CPU use)."},
    {"goldminer_node_workers_alive", "gauge", "Worker processes alive now."},
    {"goldminer_node_jobs", "gauge", "Jobs attached."},
    {"goldminer_node_mem_budget_bytes", "gauge", "Memory budget of all rings."},
    {"goldminer_node_mem_used_bytes", "gauge", "Memory of the rings of attached jobs."},
};

/* The agent's state in the Prometheus text format: node families, then one
 * sample per job of each job family (label pid = the consumer's pid). */
static size_t metrics_text(struct agent *a, char *buf, size_t len)
{
	int nj;
	uint64_t mem = used_mem(a, &nj);
	uint32_t alive = 0;
	size_t off = 0;
	for (int i = 0; i < MAX_JOBS; i++)
		if (a->jobs[i].pool)
			alive += atomic_load(&gm_ring_hdr(gm_pool_ring(a->jobs[i].pool))->p_alive);
	double node[] = {a->budget, used_workers(a), alive, nj, (double)a->mem, (double)mem};
	for (size_t f = 0; f < sizeof(node_families) / sizeof(node_families[0]); f++) {
		put_family(buf, len, &off, &node_families[f]);
		put(buf, len, &off, "%s %.17g\n", node_families[f].name, node[f]);
	}
	for (size_t f = 0; f < sizeof(job_families) / sizeof(job_families[0]); f++) {
		put_family(buf, len, &off, &job_families[f]);
		for (int i = 0; i < MAX_JOBS; i++)
			if (a->jobs[i].pool)
				put(buf, len, &off, "%s{pid=\"%d\"} %.6g\n", job_families[f].name,
				    (int)a->jobs[i].pid, job_value(&a->jobs[i], (int)f));
	}
	if (a->rem) {
		remote_metrics(a, buf, len, &off);
		if (off < len)
			off += a->rops->metrics_text(a->rem, buf + off, len - off);
	}
	return off;
}

static void publish_metrics(struct agent *a)
{
	static char buf[64 * 1024];
	int64_t now = gm_now_ms();
	if (!a->on_tick)
		return;
	for (int i = 0; i < MAX_JOBS; i++)
		if (a->jobs[i].pool)
			sample_rates(&a->jobs[i], now);
	size_t n = metrics_text(a, buf, sizeof(buf));
	a->on_tick(a->tick_arg, buf, n);
}

/* SCALE: fix a job's pool (this connection's, or the one of consumer req->pid). */
static void scale(struct agent *a, struct job *j, const struct gm_node_req *req)
{
	struct job *t = j;
	if (req->pid) {
		t = NULL;
		for (int i = 0; i < MAX_JOBS; i++)
			if (a->jobs[i].pool && a->jobs[i].pid == req->pid)
				t = &a->jobs[i];
		if (!t) {
			gm_wire_reply(j->fd, -ESRCH, -1, 0, 0, "no job with consumer pid %d",
				      req->pid);
			return;
		}
	}
	if (!t->pool || req->workers < 0 || (uint32_t)req->workers > a->budget) {
		gm_wire_reply(j->fd, -EINVAL, -1, 0, 0,
			      "scale needs an attached job and 0..%u workers", a->budget);
		return;
	}
	t->fixed = (uint32_t)req->workers;
	logf_(a, "job pid %d: pool %s %d by request", (int)t->pid,
	      req->workers ? "fixed at" : "back to the policy, was", req->workers);
	gm_wire_reply(j->fd, 0, -1, 0, 0, "ok");
}

static void serve_request(struct agent *a, struct job *j, struct gm_node_req *req, ssize_t n,
			  const int *fds, int nfds);

static void on_request(struct agent *a, struct job *j)
{
	struct gm_node_req req = {0}; /* a short message leaves zeros, not stack bytes */
	int fds[GM_WIRE_MAX_FDS], nfds;
	ssize_t n = gm_wire_recv(j->fd, &req, fds, &nfds);
	if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
		detach(a, j, n == 0 ? "connection closed" : strerror(errno));
		return;
	}
	if (n < 0)
		return;
	serve_request(a, j, &req, n, fds, nfds);
	for (int k = 0; k < nfds; k++)
		close(fds[k]); /* what a request kept, it dup'ed */
}

static void serve_request(struct agent *a, struct job *j, struct gm_node_req *req, ssize_t n,
			  const int *fds, int nfds)
{
	j->last_ms = gm_now_ms();
	/* Validate everything a client sent before using it. */
	if (n >= 8 && req->magic == GM_NODE_MAGIC && req->version != GM_NODE_VERSION) {
		gm_wire_reply(j->fd, -EPROTO, -1, 0, 0,
			      "refused: a request of goldminer node protocol version %u; this "
			      "agent speaks version %d (client and agent are different "
			      "goldminer builds: run the agent of the client's build)",
			      req->version, GM_NODE_VERSION);
		detach(a, j, "another protocol version");
		return;
	}
	if (!gm_wire_request_valid(req, n)) {
		gm_wire_reply(j->fd, -EPROTO, -1, 0, 0,
			      "malformed request (%zd bytes; expected a goldminer %d request)", n,
			      GM_NODE_VERSION);
		detach(a, j, "malformed request");
		return;
	}
	switch (req->type) {
	case GM_NODE_ATTACH:
		attach(a, j, req, fds, nfds);
		break;
	case GM_NODE_CMDJOB:
		cmd_job(a, j, req, fds, nfds);
		break;
	case GM_NODE_SCALE:
		scale(a, j, req);
		break;
	case GM_NODE_STATUS: {
		static char buf[GM_NODE_MSG]; /* the agent's one loop thread */
		status_json(a, buf, sizeof(buf));
		gm_wire_reply(j->fd, 0, -1, 0, 0, "%s", buf);
		break;
	}
	default:
		gm_wire_reply(j->fd, -EINVAL, -1, 0, 0, "unknown request type %u", req->type);
	}
}

/* A free entry of the table, else the one of the oldest connection without a job
 * (closed, told why); NULL when every entry holds a job. */
static struct job *free_entry(struct agent *a)
{
	struct job *oldest = NULL;
	for (uint32_t i = 0; i < a->max_conns; i++) {
		struct job *j = &a->jobs[i];
		if (j->fd < 0)
			return j;
		if (!j->pool && (!oldest || j->last_ms < oldest->last_ms))
			oldest = j;
	}
	if (oldest) {
		gm_wire_reply(oldest->fd, -ETIMEDOUT, -1, 0, 0,
			      "closed: no request yet, and a newer connection needed the place "
			      "(the agent holds %u connections)",
			      a->max_conns);
		detach(a, oldest, "idle connection evicted for a newcomer");
	}
	return oldest;
}

static void on_accept(struct agent *a)
{
	int fd = accept4(a->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (fd < 0)
		return;
	struct ucred cr;
	socklen_t cl = sizeof(cr);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0) {
		close(fd);
		return;
	}
	if (cr.uid != a->uid && cr.uid != 0) {
		logf_(a, "refused pid %d: uid %u is not the agent's uid %u", (int)cr.pid,
		      (unsigned)cr.uid, (unsigned)a->uid);
		gm_wire_reply(fd, -EACCES, -1, 0, 0,
			      "refused: uid %u may not use this agent (it serves uid %u and root)",
			      (unsigned)cr.uid, (unsigned)a->uid);
		close(fd);
		return;
	}
	struct job *j = free_entry(a);
	if (!j) {
		logf_(a, "refused pid %d: %u jobs already attached", (int)cr.pid, a->max_conns);
		gm_wire_reply(fd, -EBUSY, -1, 0, 0,
			      "refused: the agent already serves %u jobs, its most; wait for one "
			      "to end, or start it with a larger --max-conns (at most %d)",
			      a->max_conns, GM_NODE_MAX_CONNS);
		close(fd);
		return;
	}
	j->fd = fd;
	j->pid = cr.pid;
	j->uid = cr.uid;
	j->last_ms = gm_now_ms();
}

/* Close the connections without a job that have been silent for idle_ms; the ms
 * until the next one would be due (at most `cap`). */
static int close_idle(struct agent *a, int cap)
{
	int64_t now = gm_now_ms(), next = cap;
	for (int i = 0; i < MAX_JOBS; i++) {
		struct job *j = &a->jobs[i];
		if (j->fd < 0 || j->pool)
			continue;
		int64_t left = j->last_ms + a->idle_ms - now;
		if (left <= 0) {
			gm_wire_reply(j->fd, -ETIMEDOUT, -1, 0, 0,
				      "closed: no request within %u ms", a->idle_ms);
			detach(a, j, "idle");
		} else if (left < next) {
			next = left;
		}
	}
	return (int)next;
}

/* Re-divide the budget among the attached jobs with their last measurements
 * (see the file comment), then apply what the budget allows: true while a job is
 * short of its share. */
static bool divide(struct agent *a)
{
	struct gm_elastic_share sh[MAX_JOBS];
	uint32_t w[MAX_JOBS];
	int idx[MAX_JOBS], n = 0;

	for (int i = 0; i < MAX_JOBS; i++) {
		struct job *j = &a->jobs[i];
		if (!j->pool)
			continue;
		sh[n] = (struct gm_elastic_share){.fixed = j->fixed,
						  .cap = j->cap,
						  .workers = j->want,
						  .demand = j->demand,
						  .rate = j->rate};
		idx[n++] = i;
	}
	if (!n)
		return false;
	gm_elastic_divide(sh, (size_t)n, a->budget, w);
	for (int k = 0; k < n; k++) {
		struct job *j = &a->jobs[idx[k]];
		uint32_t want = w[k];
		if (want != j->want) {
			if (j->rate)
				logf_(a,
				      "job pid %d: %u -> %u workers (demand %.0f img/s, one worker "
				      "%.0f img/s)",
				      (int)j->pid, j->want, want, j->demand, j->rate);
			else
				logf_(a, "job pid %d: %u -> %u workers (not measured yet)",
				      (int)j->pid, j->want, want);
			j->want = want;
		}
	}
	return apply_grants(a);
}

/* What the consumer was given (img/s) and the share of the time it waited since
 * the job's last measurement, from the ring's consumer counters. */
static void measure_window(struct job *j, int64_t now)
{
	struct gm_ring_hdr *h = gm_ring_hdr(gm_pool_ring(j->pool));
	uint64_t s = atomic_load_explicit(&h->c_samples, memory_order_relaxed);
	uint64_t w = atomic_load_explicit(&h->c_wait_ns, memory_order_relaxed);
	if (j->b_ms && now > j->b_ms) {
		double dt = (double)(now - j->b_ms) / 1e3;
		j->delivered = (double)(s - j->b_samples) / dt;
		j->stall = (double)(w - j->b_wait_ns) / 1e9 / dt;
		j->stall = j->stall < 0 ? 0 : j->stall > 1 ? 1 : j->stall;
	}
	j->b_samples = s;
	j->b_wait_ns = w;
	j->b_ms = now;
}

/* Log a job's borrowing decision: its first one, and each change of what it asks. */
static void tell_borrow(struct agent *a, struct job *j, uint32_t next)
{
	char why[384];
	if (!a->rem || (j->told && next == j->rwant) || j->bout.why == GM_BORROW_UNMEASURED)
		return;
	gm_policy_borrow_why(&j->bin, &j->bout, why, sizeof(why));
	if (next > j->rwant)
		logf_(a, "job pid %d: asks the peers for %u remote workers (was %u): %s",
		      (int)j->pid, next, j->rwant, why);
	else if (next < j->rwant && next)
		logf_(a, "job pid %d: asks the peers for %u remote workers, one fewer: %s",
		      (int)j->pid, next, why);
	else if (next < j->rwant)
		logf_(a, "job pid %d: stops asking the peers for remote workers: %s", (int)j->pid,
		      why);
	else
		logf_(a, "job pid %d: does not ask the peers for remote workers: %s", (int)j->pid,
		      why);
	j->told = true;
}

/* The cores a job's local workers can use: its share of the host's
 * (gm_policy_job_cores), at most their pace while they are paced (pace_local). */
static double job_cores(const struct agent *a, const struct job *j, uint32_t local, uint32_t fed)
{
	double c = gm_policy_job_cores(a->host.cores, j->workers, local, fed);
	double paced = a->pace_milli / 1000.0 * j->workers;
	return a->pace_milli && paced < c ? paced : c;
}

/* Remote workers a job should ask the peers for: the shared policy's answer
 * (gm_policy_borrow) from its local capacity (its workers' on-CPU rate, within
 * its share of the cores the host can deliver: gm_policy_job_cores, the host's
 * cores x its workers / all local workers and the fed jobs' receive paths) and its measured
 * delivery against its demand, counted in what one remote worker measurably delivers (a local
 * worker's rate until measured), up to the job's cap and what the live peers can lend it (their
 * heartbeats: a remote rate measured at a worker's first batches, a few
 * img/s, once asked for 239). Decided at once on its first measurement, then
 * held until the gap moves by more than a worker for a settled interval
 * (gm_policy_ask_next). Decided without peers too (--status shows it). */
static void borrow(struct agent *a, struct job *j, uint32_t local, uint32_t fed, uint32_t share,
		   int64_t now)
{
	struct gm_remote_job_info ri = {0};
	uint32_t most = GM_MAX_WORKERS;

	if (a->rem && j->token)
		a->rops->job_info(a->rem, j->token, &ri);
	if (ri.workers) {
		gm_policy_remote_per_add(&a->remote_per, ri.per_worker, j->stall);
		gm_policy_remote_per_add(&j->remote_per, ri.per_worker, j->stall);
	}
	if (j->cap)
		most = j->cap > j->workers ? j->cap - j->workers : 0;
	if (j->fixed || (j->cmd_job && !j->token))
		most = 0; /* a pool fixed by request, or a command's no peer can run, borrows
			     nothing */
	if (a->rem && a->rops->lent(a->rem))
		most = 0; /* its own CPUs back first: lend_capacity preempts the guests */
	j->bin = (struct gm_policy_borrow_in){
	    .demand = j->demand,
	    .headroom = GM_ELASTIC_HEADROOM,
	    .delivered = j->delivered,
	    .stall = j->stall,
	    .worker_rate = j->rate,
	    .cores = job_cores(a, j, local, fed),
	    .remote_rate = ri.rate,
	    .remote_worker_rate =
		gm_policy_remote_worker_rate(j->remote_per, a->remote_per, ri.per_worker),
	    .alone = j->alone_short,
	    .workers = j->workers,
	    .most = most,
	    .bounded = a->rem && j->token,
	    .lendable = ri.lendable < share ? ri.lendable : share,
	    .ring_bound = ri.none_starved > j->none_seen &&
			  ri.none_starved - j->none_seen >= GM_POLICY_RING_BOUND_CLAIMS};
	j->none_seen = ri.none_starved;
	double dt = j->ask_ms && now > j->ask_ms ? (double)(now - j->ask_ms) / 1e3 : 0;
	uint32_t next = gm_policy_ask_next(&j->ask, &j->bin, dt, &j->bout);
	j->ask_ms = now;
	tell_borrow(a, j, next);
	j->rwant = next;
	if (a->rem && j->token)
		a->rops->job_want(a->rem, j->token, next);
}

/* What this host can lend, for its heartbeats (remote.h) and its lenders
 * (set_lendable): the cores its own jobs leave idle (each measured job needs
 * demand x headroom / one worker's on-CPU rate cores, at most its workers;
 * one not measured yet (no window) holds the count where it is, fresh in
 * gm_policy_lend_next, its guests paced meanwhile to
 * gm_policy_fresh_guest_cores; one at its first window holds it too; one
 * whose consumer waits, or that remote workers feed on a host under
 * GM_NODE_FED_CORES (its receive path needs them), all of them: its guests
 * go first, lender.c's preempt); the workers that makes (gm_policy_lend_next:
 * none while an own job is starved, and until its own jobs have gone
 * unstarved for a settled interval, or under a quarter core is idle; else the
 * free budget, or a worker per idle quarter core begun, e.g. the half core
 * beside a --cpus 0.75 host's own job); the idle cores, at most one per
 * lendable worker; and what one core makes of the images (the jobs' workers'
 * on-CPU rate; 0 with no measured job). At most --lend-max-workers. */
static void lend_capacity(struct agent *a)
{
	double need = 0, rate = 0, weight = 0;
	bool starved = false, own = false, fresh = false, first = false;
	uint32_t wished = 0;
	for (int i = 0; i < MAX_JOBS; i++) {
		const struct job *j = &a->jobs[i];
		if (!j->pool)
			continue;
		own = true;
		if (!j->windows && !fed_remotely(a, j)) {
			fresh = true; /* its need is not measured yet (gm_policy_lend_next) */
			continue;
		}
		first |= j->windows == 1 && !fed_remotely(a, j);
		wished += j->want;
		double n = j->want;
		if (j->rate > 0) {
			n = j->demand * GM_ELASTIC_HEADROOM / j->rate;
			n = n < j->workers ? n : j->workers;
			rate += j->rate * (j->workers ? j->workers : 1);
			weight += j->workers ? j->workers : 1;
		}
		bool waits = j->stall > GM_POLICY_STALL && j->delivered < j->demand;
		starved |= waits;
		if (waits || fed_remotely(a, j))
			n = a->host.cores; /* its consumer waits, or receiving takes the host */
		need += n;
	}
	double idle = a->host.cores - need;
	idle = idle < 0 ? 0 : idle;
	int64_t now = gm_now_ms();
	double dt = a->lend_ms && now > a->lend_ms ? (double)(now - a->lend_ms) / 1e3 : 0;
	uint32_t slots =
	    gm_policy_lend_next(&a->lend, a->budget, wished, a->host.cores, idle, starved,
				fresh	? GM_POLICY_LEND_FRESH
				: first ? GM_POLICY_LEND_FIRST
					: GM_POLICY_LEND_SETTLED,
				dt);
	a->lend_ms = now;
	slots = a->lend_most && slots > a->lend_most ? a->lend_most : slots;
	idle = idle > slots ? slots : idle;
	a->rops->set_lendable(a->rem, slots);
	/* a new job's need not measured yet: its guests kept, paced to a share of
	 * what they had (gm_policy_fresh_guest_cores) until it is */
	if (!fresh)
		a->idle_settled = idle;
	a->rops->set_capacity(a->rem,
			      fresh ? gm_policy_fresh_guest_cores(idle, a->idle_settled) : idle,
			      weight > 0 ? rate / weight : 0, own);
}

/*
 * On a host under GM_POLICY_LEND_HOST_CORES while remote workers' batches land
 * for one of its jobs, each local worker may spend gm_policy_local_pace's share
 * of a core (ring.h a_pace_milli; worker.c sleeps out the rest), the agent's
 * own CPU measured over windows of at least half a second (gm_cpu_ns: this
 * process, its threads, not the workers). Else no limit.
 */
static void pace_local(struct agent *a, int64_t now)
{
	uint64_t cpu = gm_cpu_ns();
	if (!a->self_ms || cpu < a->self_cpu_ns || now < a->self_ms) {
		a->self_ms = now;
		a->self_cpu_ns = cpu;
	} else if (now - a->self_ms >= 500) {
		double c = (double)(cpu - a->self_cpu_ns) / 1e6 / (double)(now - a->self_ms);
		a->self_cores = a->self_cores > 0 ? 0.5 * a->self_cores + 0.5 * c : c;
		a->self_ms = now;
		a->self_cpu_ns = cpu;
	}
	uint32_t landing = 0, own = 0;
	double took = 0; /* the cores the landing jobs' demand takes decoding locally */
	for (int i = 0; a->rem && i < MAX_JOBS; i++) {
		const struct job *j = &a->jobs[i];
		struct gm_remote_job_info ri = {0};
		if (j->pool && j->token) {
			a->rops->job_info(a->rem, j->token, &ri);
			if (ri.workers > 0) {
				landing++;
				own += j->workers;
				took +=
				    j->rate > 0 && j->demand > 0 ? j->demand / j->rate : INFINITY;
			}
		}
	}
	double per =
	    gm_policy_local_pace(a->host.cores, a->self_cores, used_workers(a), landing, took, own);
	uint32_t milli = per > 0 ? (uint32_t)(per * 1000 + 0.5) : 0;
	milli = per > 0 && milli < 1 ? 1 : milli > 999 ? 0 : milli;
	if ((milli == 0) != (a->pace_milli == 0)) {
		if (milli)
			logf_(a,
			      "paces each local worker to %.3f of a core while remote workers' "
			      "batches land (the agent spends %.3f of this host's %.2f)",
			      milli / 1000.0, a->self_cores, a->host.cores);
		else
			logf_(a, "local workers unpaced: %s",
			      landing ? "none runs" : "no remote worker's batches land now");
	}
	a->pace_milli = milli;
	for (int i = 0; i < MAX_JOBS; i++)
		if (a->jobs[i].pool)
			atomic_store_explicit(
			    &gm_ring_hdr(gm_pool_ring(a->jobs[i].pool))->a_pace_milli, milli,
			    memory_order_relaxed);
}

/*
 * One local worker's rate by the CPU accounting: the local samples its
 * consumer took (remote workers' and resumed batches left out) over the CPU
 * time its local workers spent (/proc/PID/stat, gm_host_proc_cpu_ns; those
 * gone counted at their last reading), since its attach (gm_policy_cpu_rate;
 * 0: too little yet). A bound on the stage-timed rate, which read 15,700 and
 * 20,900 img/s per core on a 0.25-core home (seed 105, "local capacity
 * covers demand (5223 >= 394 img/s)") where its worker made 2,600, and the
 * job gave its remote workers back.
 */
static double cpu_rate(struct job *j)
{
	int now[GM_MAX_WORKERS];
	uint64_t last[GM_MAX_WORKERS] = {0};
	int n = gm_pool_pids(j->pool, now, GM_MAX_WORKERS);
	for (int k = 0; k < j->cpu_n; k++) {
		bool still = false;
		for (int i = 0; i < n && !still; i++)
			still = now[i] == j->cpu_pid[k];
		if (!still)
			j->cpu_gone += j->cpu_last[k];
	}
	uint64_t sum = j->cpu_gone;
	for (int i = 0; i < n; i++) {
		uint64_t was = 0, c = gm_host_proc_cpu_ns(NULL, now[i]);
		for (int k = 0; k < j->cpu_n; k++)
			if (j->cpu_pid[k] == now[i])
				was = j->cpu_last[k];
		last[i] = c != UINT64_MAX && c >= was ? c : was;
		sum += last[i];
	}
	memcpy(j->cpu_pid, now, (size_t)n * sizeof(now[0]));
	memcpy(j->cpu_last, last, (size_t)n * sizeof(last[0]));
	j->cpu_n = n;
	struct gm_ring_hdr *h = gm_ring_hdr(gm_pool_ring(j->pool));
	uint64_t s = atomic_load_explicit(&h->c_samples, memory_order_relaxed);
	uint64_t rs = atomic_load_explicit(&h->c_remote_samples, memory_order_relaxed);
	j->cpu_s = (double)sum / 1e9;
	j->cpu_samples = s > rs ? s - rs : 0;
	return gm_policy_cpu_rate((double)j->cpu_samples, j->cpu_s, j->batch_size);
}

/* Whether two transforms cost the same per image (gm_aug_spec's fields that
 * decide the work; compared one by one, its padding left out). */
static bool same_aug(const struct gm_aug_spec *x, const struct gm_aug_spec *y)
{
	return x->mode == y->mode && x->size == y->size && x->out == y->out &&
	       x->resize == y->resize && x->scale_min == y->scale_min &&
	       x->scale_max == y->scale_max && x->ratio_min == y->ratio_min &&
	       x->ratio_max == y->ratio_max && x->flip_p == y->flip_p &&
	       !memcmp(x->mean, y->mean, sizeof(x->mean)) &&
	       !memcmp(x->std, y->std, sizeof(x->std)) &&
	       !memcmp(x->jitter, y->jitter, sizeof(x->jitter));
}

/* The rate job j's pipeline last read on this host by its workers' CPU
 * accounting (0: none); with cpu > 0, j's own reading, kept as that. */
static double known_rate(struct agent *a, const struct job *j, double cpu)
{
	if (!j->fp || j->cmd_job)
		return 0; /* a command's workers: no pipeline to know them by */
	uint32_t n = a->nknown < 8 ? a->nknown : 8;
	for (uint32_t i = 0; i < n; i++) {
		struct known *k = &a->known[i];
		if (k->fp == j->fp && same_aug(&k->aug, &j->aug)) {
			if (cpu > 0)
				k->rate = cpu;
			return k->rate;
		}
	}
	if (cpu > 0)
		a->known[a->nknown++ % 8] = (struct known){.fp = j->fp, .aug = j->aug, .rate = cpu};
	return cpu;
}

/* A fed job whose remote workers are all gone (their lenders took them back
 * for their own jobs, or their links died) runs its local workers again at
 * once, not at its next measured window: seed 105's 258 img/s job on a
 * 0.25-core home had no worker at all for a second after its last lender
 * preempted its guest. True if one did. */
static bool fed_gone(struct agent *a)
{
	bool any = false;
	for (int i = 0; i < MAX_JOBS; i++) {
		struct job *j = &a->jobs[i];
		if (!j->pool || !fed_remotely(a, j))
			continue;
		struct gm_remote_job_info ri = {0};
		a->rops->job_info(a->rem, j->token, &ri);
		if (ri.workers)
			continue;
		logf_(a, "job pid %d: runs its local workers again: its remote workers are gone",
		      (int)j->pid);
		j->fed = false;
		any = true;
	}
	return any;
}

/* Measure every job, then re-divide (the tick). */
static void rebalance(struct agent *a)
{
	int64_t now = gm_now_ms();
	for (int i = 0; i < MAX_JOBS; i++) {
		struct job *j = &a->jobs[i];
		double d, r;
		if (j->pool && gm_pool_measure(j->pool, &d, &r)) {
			double c = cpu_rate(j);
			j->demand = d;
			j->rate = gm_policy_worker_rate(r, c, known_rate(a, j, c));
			j->windows += j->windows < 3;
			measure_window(j, now);
			update_fed(a, j, now);
		}
	}
	a->short_ = divide(a);
	uint32_t local = used_workers(a), fed = 0;
	for (int i = 0; i < MAX_JOBS; i++) /* a fed job's receive path holds a share */
		fed += a->jobs[i].pool && fed_remotely(a, &a->jobs[i]);
	/* the peers' workers this home may get, divided between its jobs */
	uint32_t ask[MAX_JOBS], held[MAX_JOBS], share[MAX_JOBS];
	size_t n = 0;
	for (int i = 0; i < MAX_JOBS; i++) {
		struct job *j = &a->jobs[i];
		struct gm_remote_job_info ri = {0};
		if (!j->pool)
			continue;
		if (a->rem && j->token)
			a->rops->job_info(a->rem, j->token, &ri);
		ask[n] = !j->token || j->fixed ? 0 : j->ask.decided ? j->ask.count : UINT32_MAX;
		held[n++] = ri.granted;
	}
	gm_policy_home_share(ask, held, n, a->rem ? a->rops->peers_lendable(a->rem) : 0, share);
	n = 0;
	for (int i = 0; i < MAX_JOBS; i++)
		if (a->jobs[i].pool)
			borrow(a, &a->jobs[i], local, fed, share[n++], now);
	if (!a->rem)
		return;
	pace_local(a, now);
	/* what no local job wants, or its idle cores, may run other hosts' workers */
	lend_capacity(a);
}

static int listen_on(const char *path, char *err, size_t errlen)
{
	struct sockaddr_un sa;
	int fd = gm_wire_socket(path, &sa, err, errlen);
	if (fd < 0)
		return fd;
	/* A live agent answers; a dead one left a stale file we may replace. (Under
	 * this uid's own directory, or a path the user chose.) */
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
		close(fd);
		gm_errf(err, errlen, "%s: another goldminer node agent is running there", path);
		return -EADDRINUSE;
	}
	close(fd);
	struct stat st;
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			gm_errf(err, errlen, "%s exists and is not a socket; not touching it",
				path);
			return -EEXIST;
		}
		unlink(path);
	}
	/* non-blocking: a client that hung up before accept cannot stall the loop */
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		gm_errf(err, errlen, "socket: %s", strerror(errno));
		return -errno;
	}
	mode_t old = umask(0177); /* the socket file is created 0600 */
	int rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (rc < 0 || listen(fd, 64) < 0) {
		int e = -errno;
		gm_errf(err, errlen, "%s: %s", path, strerror(errno));
		close(fd);
		return e;
	}
	return fd;
}

/* The agent's state from its options (budgets, limits, defaults). 0 or -errno
 * with err filled. */
static int agent_new(struct agent **out, const struct gm_node_opts *o, char *err, size_t errlen)
{
	struct agent *a;

	*out = NULL;
	if (o->max_conns > GM_NODE_MAX_CONNS) {
		gm_errf(err, errlen, "max_conns must be 1..%d, not %u", GM_NODE_MAX_CONNS,
			o->max_conns);
		return -EINVAL;
	}
	if (!(o->cpus >= 0) || o->cpus > GM_MAX_WORKERS) {
		gm_errf(err, errlen, "cpus must be 0..%d, not %g", GM_MAX_WORKERS, o->cpus);
		return -EINVAL;
	}
	a = calloc(1, sizeof(*a));
	if (!a) {
		gm_errf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (int i = 0; i < MAX_JOBS; i++)
		a->jobs[i].fd = -1;
	a->uid = geteuid();
	a->verbose = o->verbose;
	/* whole workers: --cpus 0.25 is one worker, which the host's 0.25 core paces */
	a->budget = (uint32_t)ceil(o->cpus);
	if (!a->budget) {
		long c = sysconf(_SC_NPROCESSORS_ONLN);
		a->budget = c > 0 ? (uint32_t)c : 1;
	}
	gm_host_cpu(o->host_root, o->cpus, &a->host);
	a->mem = o->mem;
	if (!a->mem) {
		uint64_t total = gm_host_mem_total();
		a->mem = total == UINT64_MAX ? UINT64_MAX : total / 2;
	}
	a->idle_ms = o->idle_ms ? o->idle_ms : GM_NODE_IDLE_MS;
	a->max_conns = o->max_conns ? o->max_conns : GM_NODE_MAX_CONNS;
	a->on_tick = o->on_tick;
	a->tick_arg = o->tick_arg;
	*out = a;
	return 0;
}

static void remote_log(void *arg, const char *line)
{
	logf_(arg, "%s", line);
}

/* Load the remote-workers plugin and start its side when asked to (--listen,
 * --peers). 0 or -errno with err. */
static int remote_start(struct agent *a, const struct gm_node_opts *o, char *err, size_t errlen)
{
	if (!o->listen && !o->peers && !o->peers_file && !o->nlend_roots && !o->tls_cert &&
	    !o->tls_key && !o->tls_ca)
		return 0;
	if (o->nlend_roots && !o->listen) {
		gm_errf(err, errlen,
			"--lend-root needs --listen ADDR:PORT: it names what this agent lends "
			"to the peers that connect there");
		return -EINVAL;
	}
	if (!o->listen) {
		gm_errf(err, errlen,
			"%s needs --listen ADDR:PORT too: the peers' workers connect "
			"back to this agent, and the peers to it",
			o->peers	? "--peers"
			: o->peers_file ? "--peers-file"
					: "--tls-cert");
		return -EINVAL;
	}
	char why[1024];
	/* SIGHUP is the agent's (--peers-file): UCX takes it as its debug signal
	 * when it loads (UCX_DEBUG_SIGNO), so what was there is put back after */
	struct sigaction hup;
	sigaction(SIGHUP, NULL, &hup);
	a->rops = gm_remote_load(why, sizeof(why));
	if (!a->rops) {
		gm_errf(err, errlen, "%s", why);
		return -ENOTSUP;
	}
	struct gm_remote_cfg c = {.listen = o->listen,
				  .peers = o->peers,
				  .peers_file = o->peers_file,
				  .peers_refresh_ms = o->peers_refresh_ms,
				  .secret = o->secret,
				  .tls_cert = o->tls_cert,
				  .tls_key = o->tls_key,
				  .tls_ca = o->tls_ca,
				  .budget = a->budget,
				  .lend_roots = o->lend_roots,
				  .nlend_roots = o->nlend_roots,
				  .lend_index_ms = o->lend_index_ms,
				  .lend_python = o->lend_python,
				  .unguarded_ucx = o->unguarded_ucx,
				  .lend_max_files = o->lend_max_files,
				  .verbose = a->verbose,
				  .log = remote_log,
				  .log_arg = a};
	int rc = a->rops->create(&a->rem, &c, why, sizeof(why));
	sigaction(SIGHUP, &hup, NULL);
	if (rc) {
		gm_errf(err, errlen, "remote workers: %s", why);
		return rc;
	}
	a->lend_most = o->lend_max_workers;
	lend_capacity(a);
	if (a->host.cores < GM_NODE_FED_CORES)
		logf_(a,
		      "remote workers: this host delivers %.2f of a core (%s): a job runs no "
		      "local worker here once remote workers deliver it %.0f%% more than its "
		      "local ones did alone",
		      a->host.cores, a->host.src, (GM_POLICY_MEASURABLY - 1) * 100);
	logf_(a, "remote workers: listening for peers on %s (port %u; agents authenticate %s %s)",
	      o->listen, a->rops->port(a->rem),
	      o->tls_cert ? "by certificates that chain to" : "by the secret in",
	      o->tls_cert ? o->tls_ca : o->secret);
	if (o->nlend_roots)
		logf_(a,
		      "remote workers: peers %s; lending for the datasets below %u --lend-root "
		      "director%s the workers of its budget of %u its own jobs leave free, or "
		      "one per quarter core they leave idle",
		      o->peers ? o->peers : "none", o->nlend_roots,
		      o->nlend_roots == 1 ? "y" : "ies", a->budget);
	else
		logf_(a, "remote workers: peers %s; lending nothing (no --lend-root)",
		      o->peers ? o->peers : "none");
	return 0;
}

/* A step of the loop that held it LOOP_HELD_MS or more is logged, naming the
 * step: meanwhile no heartbeat went out, no peer's liveness or lease deadline
 * was looked at and --status waited (a peer takes this agent for down after
 * its DOWN_MS, remote.h). *t0: when the step began; then now. */
#define LOOP_HELD_MS 1000
static void held(struct agent *a, const char *step, int64_t *t0)
{
	int64_t now = gm_now_ms();
	if (now - *t0 >= LOOP_HELD_MS)
		logf_(a,
		      "the agent's loop was held %" PRId64 " ms by %s: no heartbeat, "
		      "liveness or lease deadline was looked at meanwhile",
		      now - *t0, step);
	*t0 = now;
}

/* One round of the loop: wait for a request, a connection or the next deadline. */
static void serve(struct agent *a, struct pollfd *pfd, int *map, int64_t *last)
{
	int n = 0;
	pfd[n].fd = a->lfd;
	pfd[n].events = POLLIN;
	map[n++] = -1;
	for (int i = 0; i < MAX_JOBS; i++) {
		if (a->jobs[i].fd < 0)
			continue;
		pfd[n].fd = a->jobs[i].fd;
		pfd[n].events = POLLIN;
		map[n++] = i;
	}
	if (a->rem) { /* the remote side's UCX events: last, not a job */
		pfd[n].fd = a->rops->fd(a->rem);
		pfd[n].events = POLLIN;
		map[n++] = -2;
	}
	int64_t t0 = gm_now_ms();
	int wait = close_idle(a, a->short_ ? GRANT_POLL_MS : GM_ELASTIC_TICK_MS);
	held(a, "closing idle jobs", &t0);
	if (a->rem && wait > REMOTE_POLL_MS) /* its heartbeats, its peers' liveness */
		wait = REMOTE_POLL_MS;
	if (poll(pfd, (nfds_t)n, wait) > 0) {
		t0 = gm_now_ms();
		for (int k = 1; k < n; k++)
			if (map[k] >= 0 && (pfd[k].revents & (POLLIN | POLLHUP | POLLERR)))
				on_request(a, &a->jobs[map[k]]);
		held(a, "answering its jobs", &t0);
		if (pfd[0].revents & POLLIN)
			on_accept(a);
		held(a, "accepting a connection", &t0);
	}
	t0 = gm_now_ms();
	if (a->rem)
		a->rops->service(a->rem);
	held(a, "the remote workers' network", &t0);
	int64_t now = gm_now_ms();
	if (a->rem && fed_gone(a))
		a->short_ = apply_grants(a);
	if (now - *last >= GM_ELASTIC_TICK_MS) {
		rebalance(a);
		publish_metrics(a);
		*last = now;
	} else if (a->short_) {
		a->short_ = apply_grants(a);
	}
	held(a, "sizing its jobs' workers", &t0);
}

/* rc; when it is an error, the message in err[errlen] is put after "fn: " (the
 * public function the caller called, util.h). */
static int named(int rc, const char *fn, char *err, size_t errlen)
{
	char why[2048];

	if (rc >= 0 || !err || !errlen)
		return rc;
	snprintf(why, sizeof(why), "%s", err);
	gm_errf(err, errlen, "%s: %s", fn, why);
	return rc;
}

static int node_run(const struct gm_node_opts *o, volatile sig_atomic_t *stop, char *err,
		    size_t errlen)
{
	struct agent *a;
	const char *path = o->socket_path ? o->socket_path : gm_node_default_socket();
	struct pollfd pfd[MAX_JOBS + 2];
	int map[MAX_JOBS + 2];
	char mem[32];
	int rc;

	rc = agent_new(&a, o, err, errlen);
	if (rc)
		return rc;
	/* Under a CPU quota too small to split across CPUs fairly (host.h,
	 * GM_HOST_PIN_CORES) the agent runs on one CPU; remote_start's threads, the
	 * lent workers and every job's workers inherit it (the pools pin theirs too). */
	int cpu = gm_host_worker_cpu(err, errlen);
	if (cpu < -1) {
		free(a);
		return cpu;
	}
	int pinned = gm_host_pin(0, cpu);
	/* the default socket's directory: this uid's own, 0700, made if absent */
	rc = o->socket_path ? 0 : gm_wire_socket_dir(path, true, err, errlen);
	if (!rc)
		rc = a->lfd = listen_on(path, err, errlen);
	if (rc < 0) {
		free(a);
		return rc;
	}
	rc = remote_start(a, o, err, errlen);
	if (rc) {
		close(a->lfd);
		unlink(path);
		free(a);
		return rc;
	}
	gm_fmt_bytes(mem, sizeof(mem), a->mem);
	logf_(a, "listening on %s (mode 0600), budget %u workers and %s of memory", path, a->budget,
	      mem);
	logf_(a, "the workers can use %.2f cores (%s): each job's local capacity counts them",
	      a->host.cores, a->host.src);
	if (cpu >= 0 && !pinned)
		logf_(a,
		      "the agent and its workers run on CPU %d only: a CPU quota of %.2f core "
		      "(under %.2f) is shared fairly between jobs on one CPU, not across several "
		      "(GM_WORKER_CPU=off: on any)",
		      cpu, a->host.quota, GM_HOST_PIN_CORES);
	else if (cpu >= 0)
		logf_(a,
		      "could not confine the agent to CPU %d (%s): its workers share the "
		      "CPU quota as the kernel places them",
		      cpu, strerror(-pinned));
	int64_t last = gm_now_ms();
	while (!*stop) {
		if (o->reload && *o->reload) { /* SIGHUP */
			*o->reload = 0;
			if (a->rem)
				a->rops->reload(a->rem);
			else
				logf_(a, "SIGHUP: nothing to read again (no --peers-file)");
		}
		serve(a, pfd, map, &last);
	}
	for (int i = 0; i < MAX_JOBS; i++)
		if (a->jobs[i].fd >= 0)
			detach(a, &a->jobs[i], "agent stopping");
	if (a->rem)
		a->rops->destroy(a->rem);
	close(a->lfd);
	unlink(path);
	logf_(a, "stopped");
	free(a);
	return 0;
}

int gm_node_run(const struct gm_node_opts *o, volatile sig_atomic_t *stop, char *err, size_t errlen)
{
	return named(node_run(o, stop, err, errlen), "gm_node_run", err, errlen);
}

/* One request/reply exchange on a fresh connection (STATUS, SCALE). */
static int call(const char *socket_path, struct gm_node_req *req, char *out, size_t outlen)
{
	struct gm_node_reply rep = {0};
	const char *path = socket_path ? socket_path : gm_node_default_socket();
	int fd = socket_path ? 0 : gm_wire_socket_dir(path, false, out, outlen);
	if (fd < 0)
		return fd;
	fd = gm_wire_connect(path, out, outlen);
	if (fd < 0)
		return fd;
	int rc = gm_wire_call(fd, req, &rep, NULL);
	close(fd);
	if (rc == -EPIPE) {
		gm_errf(out, outlen, "the node agent at %s closed the connection without a reply",
			path);
		return rc;
	}
	if (rc == -EPROTONOSUPPORT) {
		gm_errf(out, outlen,
			"the node agent at %s speaks goldminer node protocol version %u, this "
			"process version %d (different goldminer builds: run the agent of this "
			"build)",
			path, rep.version, GM_NODE_VERSION);
		return rc;
	}
	if (rc) {
		gm_errf(out, outlen, "no valid reply from the node agent at %s", path);
		return -EPROTO;
	}
	snprintf(out, outlen, "%s", rep.msg);
	return rep.status;
}

int gm_node_status(const char *socket_path, char *out, size_t outlen)
{
	struct gm_node_req req;
	gm_wire_request(&req, GM_NODE_STATUS);
	return named(call(socket_path, &req, out, outlen), "gm_node_status", out, outlen);
}

int gm_node_scale(const char *socket_path, int pid, int workers, char *out, size_t outlen)
{
	struct gm_node_req req;
	gm_wire_request(&req, GM_NODE_SCALE);
	req.pid = pid;
	req.workers = workers;
	return named(call(socket_path, &req, out, outlen), "gm_node_scale", out, outlen);
}
