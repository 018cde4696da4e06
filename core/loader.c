/*
 * loader.c - consumer API and the embedded coordinator (see loader.h).
 *
 * The consumer reads batches from the ring in task order; the coordinator is a
 * private thread that forks the worker processes, watches them through pidfds
 * (poll, no polling loop), and when one dies re-issues its leased tasks
 * (gm_ring_reclaim) and starts a replacement. Workers are forked from that thread
 * so that PR_SET_PDEATHSIG (tied to the forking thread) kills them if the
 * coordinator's process dies. A worker inherits the index and the spec; it keeps
 * only its own ring's fd and maps it afresh (rings are MADV_DONTFORK), so no
 * worker pins another job's ring, socket or pidfd.
 *
 * Three modes share this code: local (consumer, coordinator and workers here),
 * client (consumer here, the rest in the node agent, ring received as a memfd) and
 * serve (the agent's side of a client). Task t is batch
 * (epoch0 + t / batches_per_epoch, t % batches_per_epoch). A shuffle_buffer op is
 * run here, in the consumer, on copies (contract 4).
 * It does not decode (worker.c), move leases (ring.c) or parse pipelines.
 */
#include "goldminer/loader.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "goldminer/cuda.h"
#include "goldminer/dataset.h"
#include "goldminer/node.h"
#include "goldminer/pipeline.h"
#include "goldminer/policy.h"
#include "goldminer/ring.h"
#include "goldminer/rng.h"
#include "goldminer/worker.h"

#define MAX_WORKERS 256
#define WAIT_SLICE_MS 100
#define MAX_CONSECUTIVE_DEATHS 8

struct wk {
	pid_t pid;
	int pidfd;
	bool retiring;
};

struct err_rec {
	uint32_t sample;
	char msg[GM_RING_MSG];
};

enum mode {
	MODE_LOCAL,  /* consumer + coordinator + workers of this process */
	MODE_CLIENT, /* consumer here; coordinator and workers in the node agent */
	MODE_SERVE,  /* coordinator + workers for a consumer in another process */
};

struct gm_loader {
	struct gm_loader_opts o;
	enum mode mode;
	int sock; /* MODE_CLIENT: connection to the agent, else -1 */
	char errmsg[512];
	struct gm_dataset *ds;
	struct gm_ring *ring;
	struct gm_worker_cfg wcfg;
	size_t sample_bytes;
	uint32_t bpe;	   /* batches per epoch */
	uint64_t next;	   /* next task to deliver */
	uint64_t end;	   /* GM_RING_NO_END or one past the last task */
	int held;	   /* slot of the batch the user holds, or -1 */
	bool stopped;	   /* gm_loader_stop: no workers, mapping kept */

	/* shuffle_buffer N in the consumer (contract 4: stateful ops stay here) */
	uint32_t shuf_cap;	/* N; 0 = no shuffle buffer */
	uint32_t shuf_n;	/* samples in the pool */
	uint8_t *shuf_px;	/* pool: shuf_cap samples, then labels and ids */
	int32_t *shuf_lab;
	uint32_t *shuf_id;
	uint8_t *out_px;	/* the delivered batch (a copy: the pool reorders) */
	int32_t *out_lab;
	uint32_t *out_id;
	size_t shuf_bytes;	/* mapping size of shuf_px + out_px */
	struct gm_batch up;	/* upstream ring batch being drained */
	uint32_t up_pos;	/* next sample of `up` to take */
	bool up_valid, up_epoch_done, up_end, shuf_eoe;
	uint64_t out_k, out_epoch, out_draws;
	bool eoe_pending;  /* END_OF_EPOCH owed before the next batch */
	bool pinned;

	/* counters (consumer thread) */
	uint64_t batches, samples, first_samples;
	uint64_t t_first, t_last;
	uint64_t read_ns, decode_ns, augment_ns, write_ns, wait_ns;
	struct err_rec *errs;
	uint64_t n_errs, cap_errs;
	uint64_t errors; /* exact count; the listing keeps GM_RING_MAX_ERRS a batch */

	/* coordinator */
	pthread_t coord;
	bool coord_started;
	int evfd;
	pthread_mutex_t mu;
	int target;	      /* wanted workers (under mu) */
	bool closing;	      /* under mu */
	struct wk wk[MAX_WORKERS];
	int nwk;	      /* coordinator thread only */
	struct gm_ring_hdr *h; /* shared counters and the pool's fatal error */
	int consecutive_deaths;
	uint64_t consumed_at_last_death;
	struct {
		uint32_t sample, count;
	} crash[64];
	_Atomic int started;  /* coordinator spawned its first workers: 1 ok, <0 err */
	/* chaos testing (coordinator thread writes, stats reads) */
	uint64_t chaos_state;
	pid_t chaos_victim;
	uint64_t chaos_t;
	/* elastic controller (workers = auto) */
	bool autoscale;
	uint32_t budget;
	uint64_t ctl_t, ctl_samples, ctl_wait, ctl_work;
	int ctl_want, ctl_streak;
};

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int set_err(struct gm_loader *l, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int set_err(struct gm_loader *l, int err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(l->errmsg, sizeof(l->errmsg), fmt, ap);
	va_end(ap);
	return err;
}

void gm_loader_opts_default(struct gm_loader_opts *o)
{
	memset(o, 0, sizeof(*o));
	gm_aug_spec_default(&o->aug);
	o->batch_size = 64;
	o->workers = 2;
	o->shuffle = true;
	o->on_error = GM_ON_ERROR_SKIP;
}

/* ---- coordinator ------------------------------------------------------------ */

static void fatal(struct gm_loader *l, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void fatal(struct gm_loader *l, int err, const char *fmt, ...)
{
	va_list ap;
	if (atomic_load(&l->h->p_fatal))
		return;
	va_start(ap, fmt);
	vsnprintf(l->h->p_fatal_msg, sizeof(l->h->p_fatal_msg), fmt, ap);
	va_end(ap);
	/* pairs with the acquire load in gm_loader_next */
	atomic_store_explicit(&l->h->p_fatal, err, memory_order_release);
}

static int spawn(struct gm_loader *l)
{
	pid_t parent = getpid();
	pid_t pid;
	int pidfd;

	if (l->nwk >= MAX_WORKERS)
		return -EAGAIN;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		/* Child: die with the coordinator thread; Ctrl-C is the consumer's. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(0);
		signal(SIGINT, SIG_IGN);
		signal(SIGPIPE, SIG_IGN);
		sigset_t all;
		sigemptyset(&all);
		pthread_sigmask(SIG_SETMASK, &all, NULL);
		/* Keep stdio and the ring only: no other job's ring, socket or pidfd
		 * stays alive because a worker inherited it. Rings are MADV_DONTFORK,
		 * so the worker maps its own ring afresh from the fd. */
		if (dup2(gm_ring_fd(l->ring), 3) < 0)
			_exit(1);
		syscall(SYS_close_range, 4, ~0u, 0);
		struct gm_ring *mine;
		if (gm_ring_attach(&mine, 3) < 0)
			_exit(1);
		struct gm_worker_cfg c = l->wcfg;
		c.ring = mine;
		_exit(gm_worker_main(&c) ? 1 : 0);
	}
	pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0) {
		int err = -errno;
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return err;
	}
	l->wk[l->nwk].pid = pid;
	l->wk[l->nwk].pidfd = pidfd;
	l->wk[l->nwk].retiring = false;
	l->nwk++;
	atomic_fetch_add(&l->h->p_alive, 1);
	return 0;
}

static bool crash_signal(int sig)
{
	return sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE || sig == SIGABRT;
}

/* A worker exited: reap it, re-issue its tasks, decide about a replacement. */
static void on_exit_of(struct gm_loader *l, int i)
{
	struct wk w = l->wk[i];
	bool chaos = w.pid == l->chaos_victim;
	if (chaos) {
		uint64_t d = now_ns() - l->chaos_t;
		atomic_fetch_add(&l->h->p_detect_sum, d);
		if (d > atomic_load(&l->h->p_detect_max))
			atomic_store(&l->h->p_detect_max, d);
		l->chaos_victim = 0;
	}
	siginfo_t si;
	memset(&si, 0, sizeof(si));
	waitid(P_PID, (id_t)w.pid, &si, WEXITED);
	close(w.pidfd);
	l->wk[i] = l->wk[--l->nwk];
	atomic_fetch_sub(&l->h->p_alive, 1);

	uint32_t crash_sample;
	uint32_t n = gm_ring_reclaim(l->ring, (uint32_t)w.pid, &crash_sample);
	atomic_fetch_add(&l->h->p_reissued, n);
	bool clean = si.si_code == CLD_EXITED && si.si_status == 0;
	if (w.retiring && clean)
		return;
	if (clean && atomic_load(&gm_ring_hdr(l->ring)->stop))
		return;
	atomic_fetch_add(&l->h->p_deaths, 1);

	/* A sample that crashed two workers is quarantined (SIGKILL is not a crash:
	 * chaos tests and the OOM killer kill without the sample being at fault). */
	if (si.si_code != CLD_EXITED && crash_signal(si.si_status) && crash_sample != UINT32_MAX) {
		for (int k = 0; k < 64; k++) {
			if (l->crash[k].count == 0 || l->crash[k].sample == crash_sample) {
				l->crash[k].sample = crash_sample;
				if (++l->crash[k].count >= 2)
					gm_ring_quarantine(l->ring, crash_sample);
				break;
			}
		}
	}
	if (chaos)
		return; /* deliberate: not a sign that workers cannot run */
	/* Progress since the last death resets the storm counter. */
	uint64_t c = atomic_load(&gm_ring_hdr(l->ring)->consumed);
	if (c != l->consumed_at_last_death)
		l->consecutive_deaths = 0;
	l->consumed_at_last_death = c;
	if (++l->consecutive_deaths >= MAX_CONSECUTIVE_DEATHS) {
		struct gm_ring_hdr *h = gm_ring_hdr(l->ring);
		/* pairs with the release store in the worker's set_fatal */
		if (atomic_load_explicit(&h->fatal_set, memory_order_acquire) == 2)
			fatal(l, -EIO, "workers cannot run: %s", h->fatal);
		else if (si.si_code == CLD_EXITED)
			fatal(l, -EIO, "workers keep dying (last exit status %d)", si.si_status);
		else
			fatal(l, -EIO, "workers keep dying (last killed by signal %d, %s)",
			      si.si_status, strsignal(si.si_status));
	}
}

static void adjust_pool(struct gm_loader *l, int target)
{
	int active = 0;
	for (int i = 0; i < l->nwk; i++)
		active += !l->wk[i].retiring;
	while (active < target && !atomic_load(&l->h->p_fatal)) {
		int err = spawn(l);
		if (err) {
			fatal(l, err, "cannot start a worker process: %s", strerror(-err));
			break;
		}
		active++;
	}
	for (int i = l->nwk - 1; i >= 0 && active > target; i--) {
		if (l->wk[i].retiring)
			continue;
		l->wk[i].retiring = true;
		kill(l->wk[i].pid, SIGUSR1);
		active--;
	}
}

/*
 * Elastic controller, every CTL_PERIOD: from the last window's numbers
 *   demand  D = samples / (window - consumer wait)   (how fast the trainer would eat)
 *   worker  d = samples / worker time                 (one worker's rate)
 * ask the shared policy (the one the simulator evaluates) how many workers this
 * job deserves within the CPU budget, with 10% headroom on D so the consumer's
 * stall stays under ~5%. Grow at once, shrink only after two windows agree, one
 * worker at a time: a retired worker finishes its batch first, nothing is lost.
 */
#define CTL_PERIOD_MS 250
#define CTL_HEADROOM 1.10

static void poke(struct gm_loader *l)
{
	uint64_t one = 1;
	if (write(l->evfd, &one, sizeof(one)) < 0) {
		/* eventfd counter full: the coordinator is awake anyway */
	}
}

int gm_loader_measure(struct gm_loader *l, double *demand_out, double *worker_out)
{
	uint64_t now = now_ns();
	uint64_t samples = atomic_load_explicit(&l->h->c_samples, memory_order_relaxed);
	uint64_t wait = atomic_load_explicit(&l->h->c_wait_ns, memory_order_relaxed);
	uint64_t work = atomic_load_explicit(&l->h->c_work_ns, memory_order_relaxed);
	uint64_t dt = now - l->ctl_t, ds = samples - l->ctl_samples;
	uint64_t dw = wait - l->ctl_wait, dk = work - l->ctl_work;

	if (ds < 2 * l->o.batch_size && dt < 4000000000ull)
		return 0; /* too little evidence yet; keep accumulating */
	l->ctl_t = now;
	l->ctl_samples = samples;
	l->ctl_wait = wait;
	l->ctl_work = work;
	if (!ds && !atomic_load_explicit(&l->h->c_waiting, memory_order_relaxed) &&
	    dt >= 4000000000ull) {
		/* Nothing taken for 4 s and nobody waiting: the trainer is idle (eval,
		 * checkpointing). Its demand is 0; one worker's rate is as last seen. */
		atomic_store(&l->h->p_demand_mrate, 0);
		*demand_out = 0;
		*worker_out = (double)atomic_load(&l->h->p_worker_mrate) / 1000;
		return *worker_out > 0;
	}
	if (!ds || !dk)
		return 0; /* starving (waiting for a first batch): no estimate */
	double busy = (double)(dt > dw ? dt - dw : 0) / 1e9;
	double demand = busy > 1e-3 ? (double)ds / busy : 1e12;
	double per_worker = (double)ds / ((double)dk / 1e9);
	atomic_store(&l->h->p_demand_mrate, (uint64_t)(demand < 1e12 ? demand * 1000 : 0));
	atomic_store(&l->h->p_worker_mrate, (uint64_t)(per_worker * 1000));
	*demand_out = demand;
	*worker_out = per_worker;
	return 1;
}

static void set_target_locked(struct gm_loader *l, int n)
{
	l->target = n;
	atomic_store(&l->h->p_target, (uint32_t)n);
}

void gm_loader_set_target(struct gm_loader *l, int workers)
{
	if (workers < 1)
		workers = 1;
	if (workers > MAX_WORKERS)
		workers = MAX_WORKERS;
	pthread_mutex_lock(&l->mu);
	set_target_locked(l, workers);
	pthread_mutex_unlock(&l->mu);
	poke(l);
}

static void controller_tick(struct gm_loader *l)
{
	double demand, per_worker;
	if (!gm_loader_measure(l, &demand, &per_worker))
		return;

	struct gm_policy_job job = {
		.gpu_rate = demand * CTL_HEADROOM,
		.worker_rate = per_worker,
		.weight = 1,
		.min_workers = 1,
		.max_workers = l->budget,
		.tag = 0,
	};
	uint32_t want = 1;
	if (gm_policy_allocate(&job, 1, l->budget, &want) < 0)
		return;
	pthread_mutex_lock(&l->mu);
	int cur = l->target;
	if ((int)want > cur) {
		set_target_locked(l, (int)want);
		l->ctl_streak = 0;
	} else if ((int)want < cur) {
		if (l->ctl_want == (int)want && ++l->ctl_streak >= 2) {
			set_target_locked(l, cur - 1);
			l->ctl_streak = 0;
		} else if (l->ctl_want != (int)want) {
			l->ctl_streak = 1;
		}
	} else {
		l->ctl_streak = 0;
	}
	l->ctl_want = (int)want;
	pthread_mutex_unlock(&l->mu);
}

/* Chaos testing: SIGKILL one live worker chosen by a seeded generator. The kill
 * lands wherever the worker is: decoding, half-way through writing a slot, idle. */
static void chaos_kill(struct gm_loader *l)
{
	l->chaos_t = now_ns();
	l->ctl_t = now_ns();
	if (l->nwk == 0 || l->chaos_victim)
		return;
	l->chaos_state = l->chaos_state * 6364136223846793005ull + 1442695040888963407ull;
	int i = (int)((l->chaos_state >> 33) % (uint64_t)l->nwk);
	if (l->wk[i].retiring)
		return;
	if (kill(l->wk[i].pid, SIGKILL) == 0) {
		l->chaos_victim = l->wk[i].pid;
		atomic_fetch_add(&l->h->p_chaos_kills, 1);
	}
}

static void *coordinator(void *arg)
{
	struct gm_loader *l = arg;
	struct pollfd pfd[MAX_WORKERS + 1];
	bool first = true;

	for (;;) {
		pthread_mutex_lock(&l->mu);
		int target = l->target;
		bool closing = l->closing;
		bool autoscale = l->autoscale;
		pthread_mutex_unlock(&l->mu);
		if (closing)
			break;
		adjust_pool(l, target);
		if (first) {
			atomic_store(&l->started, atomic_load(&l->h->p_fatal) ? -1 : 1);
			first = false;
		}
		pfd[0].fd = l->evfd;
		pfd[0].events = POLLIN;
		for (int i = 0; i < l->nwk; i++) {
			pfd[i + 1].fd = l->wk[i].pidfd;
			pfd[i + 1].events = POLLIN;
		}
		int timeout = autoscale ? CTL_PERIOD_MS : -1;
		uint64_t now = now_ns();
		if (l->o.chaos_kill_ms) {
			uint64_t due = l->chaos_t + l->o.chaos_kill_ms * 1000000ull;
			int c = due > now ? (int)((due - now) / 1000000) : 0;
			timeout = timeout < 0 || c < timeout ? c : timeout;
		}
		int n = poll(pfd, (nfds_t)l->nwk + 1, timeout);
		if (n < 0)
			continue;
		now = now_ns();
		if (l->o.chaos_kill_ms && now >= l->chaos_t + l->o.chaos_kill_ms * 1000000ull)
			chaos_kill(l);
		if (autoscale && now >= l->ctl_t + CTL_PERIOD_MS * 1000000ull)
			controller_tick(l);
		if (pfd[0].revents & POLLIN) {
			uint64_t v;
			if (read(l->evfd, &v, sizeof(v)) < 0) {
				/* nothing to do: the next loop re-reads the target */
			}
		}
		/* Walk backwards: on_exit_of moves the last worker into slot i. */
		for (int i = l->nwk - 1; i >= 0; i--)
			if (pfd[i + 1].revents & (POLLIN | POLLHUP | POLLERR))
				on_exit_of(l, i);
	}
	/* Shut down: ask, then insist. */
	gm_ring_stop(l->ring);
	uint64_t deadline = now_ns() + 2000000000ull;
	while (l->nwk > 0) {
		for (int i = 0; i < l->nwk; i++) {
			pfd[i].fd = l->wk[i].pidfd;
			pfd[i].events = POLLIN;
		}
		int left = (int)((deadline > now_ns() ? deadline - now_ns() : 0) / 1000000);
		int n = poll(pfd, (nfds_t)l->nwk, left);
		if (n <= 0) {
			for (int i = 0; i < l->nwk; i++)
				kill(l->wk[i].pid, SIGKILL);
			deadline = now_ns() + 5000000000ull;
			continue;
		}
		for (int i = l->nwk - 1; i >= 0; i--) {
			if (pfd[i].revents) {
				waitpid(l->wk[i].pid, NULL, 0);
				close(l->wk[i].pidfd);
				l->wk[i] = l->wk[--l->nwk];
				atomic_fetch_sub(&l->h->p_alive, 1);
			}
		}
	}
	return NULL;
}


/* ---- open / close -------------------------------------------------------------- */

static uint32_t pow2_at_least(uint32_t v)
{
	uint32_t p = 1;
	while (p < v)
		p <<= 1;
	return p;
}

static int client_attach(struct gm_loader *l);

/* Pool and output batch, allocated once and pre-faulted (contract 7). */
static int shuf_alloc(struct gm_loader *l)
{
	size_t sb = l->sample_bytes, B = l->o.batch_size, N = l->shuf_cap;
	size_t meta = sizeof(int32_t) + sizeof(uint32_t);
	l->shuf_bytes = (N + B) * (sb + meta);
	void *p = mmap(NULL, l->shuf_bytes, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (p == MAP_FAILED) {
		l->shuf_bytes = 0;
		return set_err(l, -ENOMEM, "gm_loader_open: shuffle_buffer %u x %zu bytes: %s", l->shuf_cap,
			       sb, strerror(errno));
	}
	l->shuf_px = p;
	l->out_px = l->shuf_px + N * sb;
	l->shuf_lab = (int32_t *)(l->out_px + B * sb);
	l->out_lab = l->shuf_lab + N;
	l->shuf_id = (uint32_t *)(l->out_lab + B);
	l->out_id = l->shuf_id + N;
	return 0;
}

static void shuf_free(struct gm_loader *l)
{
	if (l->shuf_bytes)
		munmap(l->shuf_px, l->shuf_bytes);
	l->shuf_bytes = 0;
}

static int do_open(struct gm_loader **out, const struct gm_loader_opts *opts, enum mode mode,
		   char *errbuf, size_t errlen)
{
	struct gm_loader *l;
	char why[512];
	int err;

	*out = NULL;
	l = calloc(1, sizeof(*l));
	if (!l) {
		if (errbuf && errlen)
			snprintf(errbuf, errlen, "gm_loader_open: out of memory");
		return -ENOMEM;
	}
	l->o = *opts;
	l->mode = mode;
	l->held = -1;
	l->evfd = -1;
	l->sock = -1;
	pthread_mutex_init(&l->mu, NULL);

	if (!opts->root || !*opts->root) {
		err = set_err(l, -EINVAL, "gm_loader_open: no dataset root given");
		goto out_free;
	}
	if (opts->pipeline && *opts->pipeline) {
		struct gm_pipeline *p;
		err = gm_pipeline_parse(opts->pipeline, &p, why, sizeof(why));
		if (err) {
			err = set_err(l, err, "gm_loader_open: %s", why);
			goto out_free;
		}
		/* The consumer runs shuffle_buffer (and the batch op after it) itself;
		 * anything else past the cut has no consumer implementation. */
		for (size_t i = gm_pipeline_n_worker_ops(p); i < gm_pipeline_n_ops(p); i++) {
			const char *name = gm_pipeline_op_name(p, i);
			if (!strcmp(name, "shuffle_buffer")) {
				uint64_t n = gm_pipeline_op_arg(p, i);
				l->shuf_cap = n > 0 && n <= (1u << 24) ? (uint32_t)n : 1;
			} else if (strcmp(name, "batch")) {
				err = set_err(l, -EOPNOTSUPP,
					      "gm_loader_open: op %zu '%s' would run in the consumer "
					      "(%s); the consumer runs only shuffle_buffer and batch: "
					      "move '%s' before the stateful op or drop it",
					      i + 1, name, gm_pipeline_cut_reason(p), name);
				gm_pipeline_free(p);
				goto out_free;
			}
		}
		l->o.aug = *gm_pipeline_aug(p);
		if (gm_pipeline_batch_size(p))
			l->o.batch_size = gm_pipeline_batch_size(p);
		gm_pipeline_free(p);
	}
	if (l->o.workers < 0 || l->o.workers > MAX_WORKERS) {
		err = set_err(l, -EINVAL, "gm_loader_open: workers must be 0..%d, not %d",
			      MAX_WORKERS, l->o.workers);
		goto out_free;
	}
	l->budget = l->o.max_workers;
	if (!l->budget) {
		long c = sysconf(_SC_NPROCESSORS_ONLN);
		l->budget = c > 0 ? (uint32_t)c : 1;
	}
	if (l->budget > MAX_WORKERS)
		l->budget = MAX_WORKERS;
	if (l->o.workers == 0 && mode == MODE_LOCAL) {
		l->autoscale = true;
		l->o.workers = l->budget < 2 ? (int)l->budget : 2; /* then measured */
	}
	if (mode == MODE_SERVE)
		l->o.workers = 1; /* the agent sizes the pool */
	if (!l->o.batch_size || l->o.batch_size > 65536) {
		err = set_err(l, -EINVAL, "gm_loader_open: batch_size must be 1..65536, not %u",
			      l->o.batch_size);
		goto out_free;
	}
	l->sample_bytes = gm_aug_out_bytes(&l->o.aug);
	{
		struct gm_aug *probe;
		err = gm_aug_create(&probe, &l->o.aug);
		if (err) {
			err = set_err(l, err, "gm_loader_open: invalid transform spec (size %u)",
				      l->o.aug.size);
			goto out_free;
		}
		gm_aug_destroy(probe);
	}

	err = gm_dataset_open(&l->ds, l->o.root, why, sizeof(why));
	if (err) {
		err = set_err(l, err, "gm_loader_open: %s", why);
		goto out_free;
	}
	uint32_t n = gm_dataset_count(l->ds);
	l->bpe = l->o.drop_last ? n / l->o.batch_size : (n + l->o.batch_size - 1) / l->o.batch_size;
	if (l->bpe == 0) {
		err = set_err(l, -EINVAL,
			      "gm_loader_open: %s: %u samples make no full batch of %u (drop_last)",
			      l->o.root, n, l->o.batch_size);
		goto out_dataset;
	}
	if (l->o.start_batch >= l->bpe) {
		err = set_err(l, -EINVAL, "gm_loader_open: start_batch %llu >= %u batches per epoch",
			      (unsigned long long)l->o.start_batch, l->bpe);
		goto out_dataset;
	}
	l->next = l->o.start_batch;
	l->end = l->o.epochs ? (uint64_t)l->o.epochs * l->bpe : GM_RING_NO_END;
	if (l->end <= l->next) {
		err = set_err(l, -EINVAL, "gm_loader_open: nothing to deliver");
		goto out_dataset;
	}

	/* The pool drains every epoch: more than an epoch's samples would never fill. */
	if (l->shuf_cap > n)
		l->shuf_cap = n;
	if (l->shuf_cap && mode != MODE_SERVE) {
		if (l->o.start_batch) {
			err = set_err(l, -EINVAL, "gm_loader_open: with shuffle_buffer a loader "
						  "resumes at an epoch start only (start_batch 0)");
			goto out_dataset;
		}
		err = shuf_alloc(l);
		if (err)
			goto out_dataset;
	}
	if (mode == MODE_CLIENT) {
		err = client_attach(l);
		if (err)
			goto out_dataset;
		*out = l;
		return 0;
	}
	uint32_t slots = l->o.slots ? l->o.slots
				    : pow2_at_least((uint32_t)(l->o.workers ? l->o.workers : 2) * 2);
	if (slots < 4)
		slots = 4;
	if (slots & (slots - 1) || slots > 1024) {
		err = set_err(l, -EINVAL, "gm_loader_open: slots must be a power of two <= 1024");
		goto out_dataset;
	}
	err = gm_ring_create(&l->ring, slots, l->o.batch_size, l->sample_bytes, l->next, l->end);
	if (err) {
		err = set_err(l, err, "gm_loader_open: ring of %u slots x %u x %zu bytes: %s", slots,
			      l->o.batch_size, l->sample_bytes, strerror(-err));
		goto out_dataset;
	}
	l->h = gm_ring_hdr(l->ring);
	/* Workers map their own ring afresh (see spawn): no child inherits rings. */
	madvise(gm_ring_base(l->ring), gm_ring_bytes(l->ring), MADV_DONTFORK);
	if (mode == MODE_LOCAL && !l->o.no_pin && gm_cuda_available(NULL, 0))
		l->pinned = gm_cuda_host_register(gm_ring_base(l->ring), gm_ring_bytes(l->ring)) == 0;

	l->wcfg.ring = l->ring;
	l->wcfg.ds = l->ds;
	l->wcfg.aug = l->o.aug;
	l->wcfg.seed = l->o.seed;
	l->wcfg.epoch0 = l->o.epoch;
	l->wcfg.batch_size = l->o.batch_size;
	l->wcfg.batches_per_epoch = l->bpe;
	l->wcfg.shuffle = l->o.shuffle;
	l->wcfg.on_error = l->o.on_error;

	l->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (l->evfd < 0) {
		err = set_err(l, -errno, "gm_loader_open: eventfd: %s", strerror(errno));
		goto out_ring;
	}
	set_target_locked(l, l->o.workers);
	l->chaos_state = l->o.seed ^ 0x9e3779b97f4a7c15ull;
	l->chaos_t = now_ns();
	l->ctl_t = now_ns();
	/* The coordinator runs with all signals blocked; workers unblock them. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = -pthread_create(&l->coord, NULL, coordinator, l);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		set_err(l, err, "gm_loader_open: pthread_create: %s", strerror(-err));
		goto out_evfd;
	}
	l->coord_started = true;
	while (!atomic_load(&l->started))
		usleep(200);
	if (atomic_load(&l->started) < 0) {
		err = set_err(l, atomic_load(&l->h->p_fatal), "gm_loader_open: %s", l->h->p_fatal_msg);
		goto out_close;
	}
	*out = l;
	return 0;

out_close:
	if (errbuf && errlen)
		snprintf(errbuf, errlen, "%s", l->errmsg);
	gm_loader_close(l);
	return err;
out_evfd:
	close(l->evfd);
out_ring:
	if (l->pinned)
		gm_cuda_host_unregister(gm_ring_base(l->ring));
	gm_ring_destroy(l->ring);
out_dataset:
	shuf_free(l);
	gm_dataset_close(l->ds);
out_free:
	if (errbuf && errlen)
		snprintf(errbuf, errlen, "%s", l->errmsg);
	pthread_mutex_destroy(&l->mu);
	free(l);
	return err;
}


int gm_loader_open(struct gm_loader **out, const struct gm_loader_opts *o, char *errbuf,
		   size_t errlen)
{
	return do_open(out, o, o->node && *o->node ? MODE_CLIENT : MODE_LOCAL, errbuf, errlen);
}

int gm_loader_serve(struct gm_loader **out, const struct gm_loader_opts *o, char *errbuf,
		    size_t errlen)
{
	return do_open(out, o, MODE_SERVE, errbuf, errlen);
}

int gm_loader_ring_fd(const struct gm_loader *l)
{
	return gm_ring_fd(l->ring);
}

uint64_t gm_loader_fingerprint(const struct gm_loader *l)
{
	return gm_dataset_fingerprint(l->ds);
}

/* ---- client of a node agent --------------------------------------------------- */

static int node_connect(struct gm_loader *l, const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(sa.sun_path))
		return set_err(l, -ENAMETOOLONG, "gm_loader_open: socket path too long: %s", path);
	strcpy(sa.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return set_err(l, -errno, "gm_loader_open: socket: %s", strerror(errno));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = -errno;
		close(fd);
		return set_err(l, e,
			       "gm_loader_open: cannot reach the node agent at %s: %s (start one "
			       "with 'goldminer node')",
			       path, strerror(-e));
	}
	return fd;
}

/* Send req, receive the reply and at most one fd. */
static int node_call(struct gm_loader *l, int fd, const struct gm_node_req *req,
		     struct gm_node_reply *rep, int *fd_out)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {rep, sizeof(*rep)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	ssize_t n;

	if (fd_out)
		*fd_out = -1;
	if (send(fd, req, sizeof(*req), MSG_NOSIGNAL) != (ssize_t)sizeof(*req))
		return set_err(l, -EPIPE, "%s: the node agent closed the connection",
			       req->type == GM_NODE_SCALE ? "gm_loader_scale" : "gm_loader_open");
	mh.msg_control = cbuf;
	mh.msg_controllen = sizeof(cbuf);
	do
		n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
			int got;
			memcpy(&got, CMSG_DATA(c), sizeof(got));
			if (fd_out && *fd_out < 0)
				*fd_out = got;
			else
				close(got);
		}
	}
	/* Validate what the other process sent before trusting any of it. */
	if (n != (ssize_t)sizeof(*rep) || rep->magic != GM_NODE_MAGIC ||
	    rep->version != GM_NODE_VERSION) {
		if (fd_out && *fd_out >= 0)
			close(*fd_out);
		return set_err(l, -EPROTO, "gm_loader_open: malformed reply from the node agent");
	}
	rep->msg[sizeof(rep->msg) - 1] = 0;
	return 0;
}

static int client_attach(struct gm_loader *l)
{
	struct gm_node_req req;
	struct gm_node_reply rep;
	int fd, ring_fd, err;

	if (strlen(l->o.root) >= sizeof(req.root))
		return set_err(l, -ENAMETOOLONG, "gm_loader_open: dataset path too long");
	fd = node_connect(l, l->o.node);
	if (fd < 0)
		return fd;
	memset(&req, 0, sizeof(req));
	req.magic = GM_NODE_MAGIC;
	req.version = GM_NODE_VERSION;
	req.type = GM_NODE_ATTACH;
	req.workers = l->o.workers;
	/* an absolute root, so the agent (another cwd) indexes the same tree */
	if (!realpath(l->o.root, req.root))
		snprintf(req.root, sizeof(req.root), "%s", l->o.root);
	req.aug = l->o.aug;
	req.seed = l->o.seed;
	req.start_batch = l->o.start_batch;
	req.batch_size = l->o.batch_size;
	req.epoch = l->o.epoch;
	req.epochs = l->o.epochs;
	req.slots = l->o.slots;
	req.on_error = l->o.on_error;
	req.shuffle = l->o.shuffle;
	req.drop_last = l->o.drop_last;
	req.chaos_kill_ms = l->o.chaos_kill_ms;
	err = node_call(l, fd, &req, &rep, &ring_fd);
	if (err)
		goto out_close;
	if (rep.status) {
		err = set_err(l, rep.status, "gm_loader_open: node agent: %s", rep.msg);
		goto out_ring_fd;
	}
	if (ring_fd < 0) {
		err = set_err(l, -EPROTO, "gm_loader_open: the node agent sent no ring");
		goto out_close;
	}
	err = gm_ring_attach(&l->ring, ring_fd);
	if (err) {
		err = set_err(l, err, "gm_loader_open: the ring from the node agent is invalid: %s",
			      strerror(-err));
		goto out_ring_fd;
	}
	close(ring_fd);
	ring_fd = -1;
	l->h = gm_ring_hdr(l->ring);
	if (l->h->batch_size != l->o.batch_size || l->h->sample_bytes != l->sample_bytes ||
	    l->h->first_task != l->next || l->h->end_task != l->end ||
	    rep.batches_per_epoch != l->bpe) {
		err = set_err(l, -EPROTO, "gm_loader_open: the node agent's ring does not match "
					  "the request (batch, sample size or range)");
		goto out_ring;
	}
	if (rep.fingerprint != gm_dataset_fingerprint(l->ds)) {
		err = set_err(l, -ESTALE,
			      "gm_loader_open: %s: the node agent sees other files than this "
			      "process (dataset changed, or another mount)",
			      l->o.root);
		goto out_ring;
	}
	l->wcfg.batch_size = l->o.batch_size;
	l->wcfg.batches_per_epoch = l->bpe;
	l->wcfg.epoch0 = l->o.epoch;
	if (!l->o.no_pin && gm_cuda_available(NULL, 0))
		l->pinned = gm_cuda_host_register(gm_ring_base(l->ring), gm_ring_bytes(l->ring)) == 0;
	l->sock = fd;
	return 0;

out_ring:
	gm_ring_destroy(l->ring);
	l->ring = NULL;
out_ring_fd:
	if (ring_fd >= 0)
		close(ring_fd);
out_close:
	close(fd);
	return err;
}

/* MODE_CLIENT: has the agent gone away? (It never writes unasked.) */
static int client_check(struct gm_loader *l)
{
	if (l->sock < 0)
		return 0;
	struct pollfd p = {l->sock, POLLIN, 0};
	if (poll(&p, 1, 0) == 1 && (p.revents & (POLLIN | POLLHUP | POLLERR)))
		return set_err(l, -EPIPE, "gm_loader_next: the node agent went away");
	return 0;
}

void gm_loader_stop(struct gm_loader *l)
{
	if (!l || l->stopped)
		return;
	l->stopped = true;
	if (l->coord_started) {
		pthread_mutex_lock(&l->mu);
		l->closing = true;
		pthread_mutex_unlock(&l->mu);
		poke(l);
		pthread_join(l->coord, NULL);
		l->coord_started = false;
	}
	if (l->sock >= 0) {
		close(l->sock); /* the agent detaches the job and stops its workers */
		l->sock = -1;
	}
}

void gm_loader_close(struct gm_loader *l)
{
	if (!l)
		return;
	gm_loader_stop(l);
	if (l->evfd >= 0)
		close(l->evfd);
	if (l->pinned)
		gm_cuda_host_unregister(gm_ring_base(l->ring));
	gm_ring_destroy(l->ring);
	shuf_free(l);
	gm_dataset_close(l->ds);
	free(l->errs);
	pthread_mutex_destroy(&l->mu);
	free(l);
}

/* ---- consumer -------------------------------------------------------------------- */

static void keep_error(struct gm_loader *l, const struct gm_slot_err *e)
{
	if (l->n_errs == l->cap_errs) {
		uint64_t cap = l->cap_errs ? l->cap_errs * 2 : 16;
		struct err_rec *p = realloc(l->errs, cap * sizeof(*p));
		if (!p)
			return; /* the count in stats stays exact; only the listing is short */
		l->errs = p;
		l->cap_errs = cap;
	}
	l->errs[l->n_errs].sample = e->sample;
	snprintf(l->errs[l->n_errs].msg, sizeof(l->errs[l->n_errs].msg), "%s", e->msg);
	l->n_errs++;
}

int gm_loader_release(struct gm_loader *l, struct gm_batch *b)
{
	if (b && b->slot == UINT32_MAX)
		return 0; /* a shuffled batch is a private copy: nothing to give back */
	if (l->held < 0 || (b && b->slot != (uint32_t)l->held))
		return set_err(l, -EINVAL, "gm_loader_release: no such batch is held");
	gm_ring_release(l->ring, (uint32_t)l->held);
	l->held = -1;
	return 0;
}

static int ring_next(struct gm_loader *l, struct gm_batch *b)
{
	uint64_t t0, t1;
	int fe;

	if (l->held >= 0)
		gm_loader_release(l, NULL);
	if (l->eoe_pending) {
		l->eoe_pending = false;
		return GM_LOADER_END_OF_EPOCH;
	}
	if (l->next >= l->end)
		return GM_LOADER_END;

	t0 = now_ns();
	atomic_store_explicit(&l->h->c_waiting, 1, memory_order_relaxed);
	for (;;) {
		int rc = gm_ring_wait_ready(l->ring, l->next, WAIT_SLICE_MS);
		if (rc == 0)
			break;
		/* pairs with the release store in fatal() */
		fe = atomic_load_explicit(&l->h->p_fatal, memory_order_acquire);
		if (fe) {
			atomic_store_explicit(&l->h->c_waiting, 0, memory_order_relaxed);
			return set_err(l, fe, "gm_loader_next: %s", l->h->p_fatal_msg);
		}
		fe = client_check(l); /* sets the message */
		if (fe) {
			atomic_store_explicit(&l->h->c_waiting, 0, memory_order_relaxed);
			return fe;
		}
	}
	atomic_store_explicit(&l->h->c_waiting, 0, memory_order_relaxed);
	t1 = now_ns();
	l->wait_ns += t1 - t0;
	atomic_fetch_add_explicit(&l->h->c_wait_ns, t1 - t0, memory_order_relaxed);

	uint32_t slot = (uint32_t)(l->next & (gm_ring_hdr(l->ring)->nslots - 1));
	struct gm_slot_ctl *ctl = gm_ring_ctl(l->ring, slot);
	uint32_t nerr = ctl->n_errors;
	for (uint32_t i = 0; i < ctl->n_recs && i < GM_RING_MAX_ERRS; i++)
		keep_error(l, &ctl->errs[i]);
	if (ctl->status) {
		/* on_error=fail: the batch is not delivered; the loader stays at it. */
		const struct gm_slot_err *e = &ctl->errs[0];
		int st = ctl->status;
		set_err(l, st, "gm_loader_next: %s: %s", gm_dataset_name(l->ds, e->sample), e->msg);
		return st;
	}

	uint32_t epoch;
	uint64_t k;
	gm_worker_task_pos(&l->wcfg, l->next, &epoch, &k);
	b->epoch = epoch;
	b->index = k;
	b->size = ctl->n;
	b->n_errors = nerr;
	l->errors += nerr;
	b->data = gm_ring_data(l->ring, slot);
	b->sample_bytes = l->sample_bytes;
	b->labels = gm_ring_labels(l->ring, slot);
	b->sample_ids = gm_ring_ids(l->ring, slot);
	b->slot = slot;
	l->held = (int)slot;

	l->read_ns += ctl->read_ns;
	l->decode_ns += ctl->decode_ns;
	l->augment_ns += ctl->augment_ns;
	l->write_ns += ctl->write_ns;
	if (l->batches == 0) {
		l->t_first = t1;
		l->first_samples = ctl->n;
	}
	l->t_last = t1;
	l->batches++;
	/* counters for the controller, which may run in another process (relaxed) */
	atomic_fetch_add_explicit(&l->h->c_work_ns,
				  ctl->read_ns + ctl->decode_ns + ctl->augment_ns + ctl->write_ns,
				  memory_order_relaxed);
	atomic_fetch_add_explicit(&l->h->c_samples, ctl->n, memory_order_relaxed);
	l->samples += ctl->n;
	l->next++;
	if (k == l->bpe - 1)
		l->eoe_pending = true;
	return 0;
}

/*
 * shuffle_buffer N: samples from the ring batches (already in epoch permutation
 * order) enter a pool of N; each output position takes a pool sample chosen by
 * the counter-based RNG keyed (seed, epoch, draw) and the last pool entry fills
 * its place. The pool drains at the end of each epoch, so epochs stay separate and
 * the output stays a pure function of (index, spec, seed, epoch) (contract 1).
 * Batches are copies here: the pool reorders samples across ring slots.
 */
static int shuf_next(struct gm_loader *l, struct gm_batch *b)
{
	size_t sb = l->sample_bytes;
	uint32_t k = 0, B = l->o.batch_size;

	if (l->shuf_eoe) {
		l->shuf_eoe = false;
		return GM_LOADER_END_OF_EPOCH;
	}
	if (l->up_end && !l->shuf_n)
		return GM_LOADER_END;
	while (k < B) {
		/* refill the pool from upstream until it is full or the epoch ends */
		while (l->shuf_n < l->shuf_cap && !l->up_epoch_done && !l->up_end) {
			if (!l->up_valid || l->up_pos == l->up.size) {
				int rc = ring_next(l, &l->up);
				if (rc == GM_LOADER_END_OF_EPOCH) {
					l->up_valid = false;
					l->up_epoch_done = true;
					break;
				}
				if (rc == GM_LOADER_END) {
					l->up_valid = false;
					l->up_end = true;
					break;
				}
				if (rc < 0)
					return rc;
				l->up_valid = true;
				l->up_pos = 0;
				l->out_epoch = l->up.epoch;
			}
			uint32_t n = l->shuf_n++;
			memcpy(l->shuf_px + n * sb, (uint8_t *)l->up.data + (size_t)l->up_pos * sb, sb);
			l->shuf_lab[n] = l->up.labels[l->up_pos];
			l->shuf_id[n] = l->up.sample_ids[l->up_pos];
			l->up_pos++;
		}
		if (!l->shuf_n)
			break;
		struct gm_rng r;
		gm_rng_init(&r, l->o.seed, GM_RNG_STREAM_SHUFFLE, l->out_epoch, l->out_draws++);
		uint32_t i = (uint32_t)gm_rng_below(&r, l->shuf_n), last = --l->shuf_n;
		memcpy(l->out_px + (size_t)k * sb, l->shuf_px + (size_t)i * sb, sb);
		l->out_lab[k] = l->shuf_lab[i];
		l->out_id[k] = l->shuf_id[i];
		if (i != last) {
			memcpy(l->shuf_px + (size_t)i * sb, l->shuf_px + (size_t)last * sb, sb);
			l->shuf_lab[i] = l->shuf_lab[last];
			l->shuf_id[i] = l->shuf_id[last];
		}
		k++;
	}
	if (k == 0) {
		/* epoch drained */
		l->up_epoch_done = false;
		l->out_k = 0;
		l->out_draws = 0;
		return l->up_end ? GM_LOADER_END : GM_LOADER_END_OF_EPOCH;
	}
	b->epoch = l->out_epoch;
	b->index = l->out_k++;
	b->size = k;
	b->n_errors = 0;
	b->data = l->out_px;
	b->sample_bytes = sb;
	b->labels = l->out_lab;
	b->sample_ids = l->out_id;
	b->slot = UINT32_MAX;
	/* the last output batch of an epoch: report the end right after it */
	if (l->up_epoch_done && !l->shuf_n) {
		l->up_epoch_done = false;
		l->out_k = 0;
		l->out_draws = 0;
		l->shuf_eoe = true;
	}
	return 0;
}

int gm_loader_next(struct gm_loader *l, struct gm_batch *b)
{
	if (l->stopped)
		return set_err(l, -ECANCELED, "gm_loader_next: the loader was stopped");
	return l->shuf_cap ? shuf_next(l, b) : ring_next(l, b);
}

void gm_loader_stats(const struct gm_loader *l, struct gm_loader_stats *s)
{
	memset(s, 0, sizeof(*s));
	s->batches = l->batches;
	s->samples = l->samples;
	s->elapsed_s = l->batches ? (double)(l->t_last - l->t_first) / 1e9 : 0;
	if (s->elapsed_s > 0)
		s->img_per_s = (double)(l->samples - l->first_samples) / s->elapsed_s;
	s->read_ns = l->read_ns;
	s->decode_ns = l->decode_ns;
	s->augment_ns = l->augment_ns;
	s->write_ns = l->write_ns;
	s->wait_ns = l->wait_ns;
	s->errors = l->errors;
	s->workers = atomic_load(&l->h->p_alive);
	s->worker_deaths = atomic_load(&l->h->p_deaths);
	s->reissued = atomic_load(&l->h->p_reissued);
	s->batches_per_epoch = l->bpe;
	s->dataset_size = gm_dataset_count(l->ds);
	s->num_classes = gm_dataset_num_classes(l->ds);
	s->pinned = l->pinned;
	s->chaos_kills = atomic_load(&l->h->p_chaos_kills);
	s->detect_ns_max = atomic_load(&l->h->p_detect_max);
	s->detect_ns_sum = atomic_load(&l->h->p_detect_sum);
	s->batch_size = l->o.batch_size;
	s->size = l->o.aug.size;
	s->out = l->o.aug.out;
	s->mode = l->o.aug.mode;
	s->sample_bytes = l->sample_bytes;
	s->target_workers = atomic_load(&l->h->p_target);
	s->demand_img_per_s = (double)atomic_load(&l->h->p_demand_mrate) / 1000;
	s->worker_img_per_s = (double)atomic_load(&l->h->p_worker_mrate) / 1000;
}

int gm_loader_error(const struct gm_loader *l, uint64_t i, const char **path, const char **msg)
{
	if (i >= l->n_errs)
		return -ERANGE;
	*path = gm_dataset_name(l->ds, l->errs[i].sample);
	*msg = l->errs[i].msg;
	return 0;
}

int gm_loader_scale(struct gm_loader *l, int workers)
{
	if (workers < 1 || workers > MAX_WORKERS)
		return set_err(l, -EINVAL, "gm_loader_scale: workers must be 1..%d, not %d",
			       MAX_WORKERS, workers);
	if (l->mode == MODE_CLIENT) {
		struct gm_node_req req;
		struct gm_node_reply rep;
		memset(&req, 0, sizeof(req));
		req.magic = GM_NODE_MAGIC;
		req.version = GM_NODE_VERSION;
		req.type = GM_NODE_SCALE;
		req.workers = workers;
		int err = node_call(l, l->sock, &req, &rep, NULL);
		if (err)
			return err;
		if (rep.status)
			return set_err(l, rep.status, "gm_loader_scale: node agent: %s", rep.msg);
		return 0;
	}
	pthread_mutex_lock(&l->mu);
	set_target_locked(l, workers);
	l->autoscale = false; /* an explicit size wins over the controller */
	pthread_mutex_unlock(&l->mu);
	poke(l);
	return 0;
}

void gm_loader_position(const struct gm_loader *l, uint32_t *epoch, uint64_t *batch)
{
	if (l->shuf_cap) {
		/* the pool holds samples of batches already taken from the ring */
		*epoch = (uint32_t)l->out_epoch + (l->shuf_eoe ? 1 : 0);
		*batch = l->shuf_eoe ? 0 : l->out_k;
		return;
	}
	uint64_t k;
	gm_worker_task_pos(&l->wcfg, l->next, epoch, &k);
	*batch = k;
}

int gm_loader_copy_to_device(struct gm_loader *l, const struct gm_batch *b, void *dst)
{
	int err = gm_cuda_memcpy_h2d(dst, b->data, (size_t)b->size * b->sample_bytes);
	if (err)
		return set_err(l, err, "gm_loader_copy_to_device: %s",
			       err == -ENODEV ? "no usable CUDA device" : strerror(-err));
	return 0;
}

size_t gm_loader_abi_size(int which)
{
	switch (which) {
	case 0:
		return sizeof(struct gm_aug_spec);
	case 1:
		return sizeof(struct gm_loader_opts);
	case 2:
		return sizeof(struct gm_batch);
	case 3:
		return sizeof(struct gm_loader_stats);
	default:
		return 0;
	}
}

const char *gm_loader_errmsg(const struct gm_loader *l)
{
	return l->errmsg;
}
