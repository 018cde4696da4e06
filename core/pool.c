/*
 * pool.c - the worker pool of one job (see pool.h): its ring, and the coordinator
 * thread that forks, watches, reaps and replaces the job's workers.
 *
 * The worker processes themselves are made in spawn.c (fork, exec, the zygote;
 * pool_impl.h is the state both files share). The coordinator sleeps in poll() on the workers'
 * pidfds and an eventfd (target changes, close), waking for the elastic controller's tick or a
 * chaos kill only when they are on. A worker's death re-issues its leased tasks
 * at once (contract 2); a sample that crashed two workers is quarantined
 * (contract 9); a storm of deaths without progress becomes the pool's fatal error.
 * A lease that makes no progress for lease_timeout_ms (a stopped or stuck worker)
 * is ended the same way: the holder is SIGKILLed and its batch re-issued (see
 * "the lease watch" below); a sample that stalls workers twice is quarantined.
 * A worker stopped while it holds no lease is SIGKILLed and replaced too ("the
 * idle watch").
 *
 * Each worker (and the zygote) leads its own process group, and when it ends the
 * coordinator SIGKILLs that group before reaping it (its pid, still held by the
 * unreaped worker, cannot name another group), at close too: what a worker's
 * code forked and left running (a Python dataset's helper) does not outlive it,
 * holding the ring's memfd, the spec or the consumer's stdout. A group, not a
 * child subreaper here: the subreaper flag is the whole process's (the trainer's,
 * or the node agent's), and would bring it the orphans of everything it runs
 * (see "the adoption window"); a Python worker is itself a subreaper for its own
 * descendants (_worker.py). What leaves the group (setsid) and outlives a worker
 * that was SIGKILLed is beyond this.
 *
 * It does not read batches (loader.c), decode (worker.c), move leases (ring.c) or
 * decide pool sizes (elastic.c, policy.c): it applies the target it is given.
 */
#include "goldminer/pool.h"

#include <errno.h>
#include <fcntl.h>
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
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "goldminer/coef.h"
#include "goldminer/dataset.h"
#include "goldminer/elastic.h"
#include "goldminer/host.h"
#include "goldminer/limits.h"
#include "goldminer/ring.h"
#include "goldminer/util.h"

#include "pool_impl.h"

/* ---- the coordinator ------------------------------------------------------------ */

static void fatal(struct gm_pool *p, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fatal(struct gm_pool *p, int err, const char *fmt, ...)
{
	va_list ap;
	if (atomic_load(&p->h->p_fatal))
		return;
	va_start(ap, fmt);
	gm_verrf(p->h->p_fatal_msg, sizeof(p->h->p_fatal_msg), fmt, ap);
	va_end(ap);
	/* pairs with the acquire load in gm_loader_next (loader.c, ring_next) */
	atomic_store_explicit(&p->h->p_fatal, err, memory_order_release);
}

/* One more strike for sample in table t (64 entries): its count now (0 when
 * the table is full). */
static uint32_t strike(struct strikes *t, uint32_t sample)
{
	for (int k = 0; k < 64; k++) {
		if (t[k].count == 0 || t[k].sample == sample) {
			t[k].sample = sample;
			return ++t[k].count;
		}
	}
	return 0;
}

/* Note who sample took down, then quarantine it. */
static void quarantine(struct gm_pool *p, uint32_t sample, int pid, int sig)
{
	for (int k = 0; k < 64; k++) {
		struct culprit *c = &p->culprits[k];
		uint32_t cur = atomic_load_explicit(&c->sample1, memory_order_relaxed);
		if (cur == sample + 1)
			break;
		if (cur == 0) {
			c->pid = pid;
			c->sig = sig;
			/* pairs with the acquire load in gm_pool_culprit */
			atomic_store_explicit(&c->sample1, sample + 1, memory_order_release);
			break;
		}
	}
	gm_ring_quarantine(p->ring, sample);
}

static bool crash_signal(int sig)
{
	return sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE || sig == SIGABRT;
}

/* A mark that changes whenever the workers make progress: batches consumed, and
 * the samples finished in the slots (a re-issued batch resumes after them, so
 * killed workers that each finish some of a long batch make progress too: under
 * kills every few hundred ms and a loaded machine, whole batches may take
 * several lives). */
static uint64_t progress(const struct gm_pool *p)
{
	uint64_t done = 0;
	uint32_t words = (p->c.w.batch_size + 63) / 64;
	for (uint32_t s = 0; s < p->h->nslots; s++) {
		_Atomic uint64_t *bits = gm_ring_done_bits(p->ring, s);
		for (uint32_t q = 0; q < words; q++) /* relaxed: a hint, as the lease watch's */
			done += (uint64_t)__builtin_popcountll(
			    atomic_load_explicit(&bits[q], memory_order_relaxed));
	}
	return atomic_load(&p->h->consumed) * 1000003u + done;
}

/* A worker exited: reap it, re-issue its tasks, decide about a replacement. */
static void on_exit_of(struct gm_pool *p, int i)
{
	struct wk w = p->wk[i];
	bool chaos = w.pid == p->chaos_victim;
	if (chaos) {
		uint64_t d = gm_now_ns() - p->chaos_t;
		atomic_fetch_add(&p->h->p_detect_sum, d);
		if (d > atomic_load(&p->h->p_detect_max))
			atomic_store(&p->h->p_detect_max, d);
		p->chaos_victim = 0;
	}
	siginfo_t si;
	memset(&si, 0, sizeof(si));
	gm_pool_kill_group(w.pid);
	waitid(P_PID, (id_t)w.pid, &si, WEXITED);
	gm_pool_reap_group(w.pid);
	close(w.pidfd);
	if (w.ready_fd >= 0)
		close(w.ready_fd);
	p->wk[i] = p->wk[--p->nwk];
	int32_t was = (int32_t)w.pid;
	if (w.id >= 0 && w.id < GM_MAX_WORKERS)
		atomic_compare_exchange_strong(&p->pid_of[w.id], &was, 0);
	/* p_alive goes down before retiring: a reader that loads retiring first, then
	 * p_alive (node.c, apply_grants) may count a worker twice, never not at all */
	atomic_fetch_sub(&p->h->p_alive, 1);
	if (w.retiring)
		atomic_fetch_sub(&p->retiring, 1);

	uint32_t crash_sample;
	uint32_t n = gm_ring_reclaim(p->ring, (uint32_t)w.pid, &crash_sample);
	atomic_fetch_add(&p->h->p_reissued, n);
	bool clean = si.si_code == CLD_EXITED && si.si_status == 0;
	if (w.retiring && clean)
		return;
	if (clean && atomic_load(&gm_ring_hdr(p->ring)->stop))
		return;
	atomic_fetch_add(&p->h->p_deaths, 1);

	/* A sample that crashed two workers is quarantined (SIGKILL is not a crash:
	 * chaos tests and the OOM killer kill without the sample being at fault). */
	if (si.si_code != CLD_EXITED && crash_signal(si.si_status) && crash_sample != UINT32_MAX &&
	    strike(p->crash, crash_sample) >= 2)
		quarantine(p, crash_sample, (int)w.pid, si.si_status);
	if (chaos)
		return; /* deliberate: not a sign that workers cannot run */
	/* said, so that a death nobody asked for has a cause in the log (a stalled
	 * worker's was said when it was killed) */
	if (!w.stalled && si.si_code == CLD_EXITED)
		gm_log("pool", "worker %d exited unasked (status %d); its tasks are made again",
		       (int)w.pid, si.si_status);
	else if (!w.stalled)
		gm_log("pool", "worker %d died of signal %d (%s); its tasks are made again",
		       (int)w.pid, si.si_status, strsignal(si.si_status));
	/* Progress since the last death resets the storm counter. */
	uint64_t c = progress(p);
	if (c != p->consumed_at_last_death)
		p->consecutive_deaths = 0;
	p->consumed_at_last_death = c;
	if (++p->consecutive_deaths >= MAX_CONSECUTIVE_DEATHS) {
		struct gm_ring_hdr *h = gm_ring_hdr(p->ring);
		/* pairs with the release store in the worker's set_fatal */
		if (w.stalled)
			fatal(p, -EIO, "workers keep stalling (the last: %s)", p->last_stall);
		else if (atomic_load_explicit(&h->fatal_set, memory_order_acquire) == 2)
			fatal(p, -EIO, "workers cannot run: %s", h->fatal);
		else if (si.si_code == CLD_EXITED && si.si_status == 127 && p->c.exec_argv)
			fatal(p, -EIO, "workers cannot run: %s could not be executed",
			      p->c.exec_argv[0]);
		else if (si.si_code == CLD_EXITED)
			fatal(p, -EIO, "workers keep dying (last exit status %d)", si.si_status);
		else
			fatal(p, -EIO, "workers keep dying (last killed by signal %d, %s)",
			      si.si_status, strsignal(si.si_status));
	}
}

static void adjust_pool(struct gm_pool *p, int target)
{
	int active = 0;
	for (int i = 0; i < p->nwk; i++)
		active += !p->wk[i].retiring;
	/* a zygote that is loading: its workers will share its pages (see "the
	 * zygote"), fresh processes would each load everything again */
	bool wait_zygote = p->zpid && !p->zready && gm_now_ns() < p->zwait;
	while (active < target && !wait_zygote && !atomic_load(&p->h->p_fatal)) {
		int err = gm_pool_spawn(p);
		if (err) {
			fatal(p, err, "cannot start a worker process: %s", strerror(-err));
			break;
		}
		active++;
	}
	while (active > target) { /* the highest ids go: those left stay 0..target-1 */
		int top = -1;
		for (int i = 0; i < p->nwk; i++)
			if (!p->wk[i].retiring && (top < 0 || p->wk[i].id > p->wk[top].id))
				top = i;
		if (top < 0)
			break;
		p->wk[top].retiring = true;
		atomic_fetch_add(&p->retiring, 1);
		kill(p->wk[top].pid, SIGUSR1);
		active--;
	}
}

static void poke(struct gm_pool *p)
{
	uint64_t one = 1;
	if (write(p->evfd, &one, sizeof(one)) < 0) {
		/* eventfd counter full: the coordinator is awake anyway */
	}
}

static void set_target_locked(struct gm_pool *p, int n)
{
	p->target = n;
	atomic_store(&p->h->p_target, (uint32_t)n);
}

/* A pool size within 0..GM_MAX_WORKERS. */
static int clamp_workers(int workers)
{
	return workers < 0 ? 0 : workers > GM_MAX_WORKERS ? GM_MAX_WORKERS : workers;
}

void gm_pool_set_target(struct gm_pool *p, int workers)
{
	workers = clamp_workers(workers);
	pthread_mutex_lock(&p->mu);
	set_target_locked(p, workers);
	pthread_mutex_unlock(&p->mu);
	poke(p);
}
/* workers = auto: one window of the elastic controller (elastic.h). */
static void controller_tick(struct gm_pool *p)
{
	double demand, per_worker;
	uint32_t want;
	if (!gm_elastic_measure(&p->meter, p->h, p->c.w.batch_size, &demand, &per_worker))
		return;
	if (gm_elastic_want(demand, per_worker, p->c.budget, &want) < 0)
		return;
	pthread_mutex_lock(&p->mu);
	int next = gm_elastic_next(&p->ctl, (int)want, p->target);
	if (next != p->target)
		set_target_locked(p, next);
	pthread_mutex_unlock(&p->mu);
}

/* Chaos testing: SIGKILL one live worker chosen by a seeded generator. The kill
 * lands wherever the worker is: decoding, half-way through writing a slot, idle. */
static void chaos_kill(struct gm_pool *p)
{
	p->chaos_t = gm_now_ns();
	gm_elastic_meter_restart(&p->meter); /* as always: a kill restarts the window clock */
	if (p->nwk == 0 || p->chaos_victim)
		return;
	p->chaos_state = p->chaos_state * 6364136223846793005ull + 1442695040888963407ull;
	int i = (int)((p->chaos_state >> 33) % (uint64_t)p->nwk);
	if (p->wk[i].retiring)
		return;
	if (kill(p->wk[i].pid, SIGKILL) == 0) {
		p->chaos_victim = p->wk[i].pid;
		atomic_fetch_add(&p->h->p_chaos_kills, 1);
	}
}

/* ---- the lease watch: a leased batch must make progress ---------------------------
 *
 * A worker that holds a lease and finishes no sample for lease_ns (SIGSTOPped, a
 * hung network file system, a file swapped for a FIFO after the reader looked at
 * it) would stall the run for ever: the consumer waits for batches in order. The
 * coordinator looks at every leased slot at least four times a deadline; when
 * neither its done bits nor the sample being decoded changed for a deadline, it
 * SIGKILLs the holder and says which sample it was stuck on; the death re-issues
 * the batch (contract 2: same bytes). A sample that stalls workers twice is
 * quarantined, like one that crashes them. A killed worker that is still not gone
 * a deadline later (stuck in the kernel) can no longer write: its leases are
 * taken back then without waiting for its exit.
 */

/* The sample a stuck batch waits on: the one being decoded, else the only one of
 * the batch not finished; UINT32_MAX when that is not known (several reads in
 * flight). *left: samples of the batch not finished. */
static uint32_t stuck_sample(const struct gm_pool *p, uint32_t slot, uint64_t task, uint32_t *left)
{
	struct gm_slot_ctl *ctl = gm_ring_ctl(p->ring, slot);
	_Atomic uint64_t *done = gm_ring_done_bits(p->ring, slot);
	const uint32_t *ids = gm_ring_ids(p->ring, slot);
	/* a pool of exec'd workers has no index: ids[] are the consumer's sample indices */
	uint32_t count = p->c.w.ds ? gm_dataset_count(p->c.w.ds) : UINT32_MAX;
	uint32_t n = ctl->n < p->c.w.batch_size ? ctl->n : p->c.w.batch_size, last = 0;

	*left = n;
	/* pairs with the release store in begin_task (worker.c): the bits are this task's */
	if (atomic_load_explicit(&ctl->bits_task, memory_order_acquire) != task + 1)
		return UINT32_MAX; /* stuck before the batch began */
	*left = 0;
	for (uint32_t i = 0; i < n; i++) {
		/* pairs with set_bit in worker.c (relaxed is enough: a hint, re-read later) */
		if (!(atomic_load_explicit(&done[i / 64], memory_order_relaxed) >> (i % 64) & 1)) {
			(*left)++;
			last = i;
		}
	}
	uint32_t cur = atomic_load_explicit(&ctl->cur_sample, memory_order_relaxed);
	/* a binding's ids[] start with its batch's place (bind.h): only cur names one */
	uint32_t id = cur != UINT32_MAX ? cur : *left == 1 && p->c.w.ds ? ids[last] : UINT32_MAX;
	return id < count ? id : UINT32_MAX;
}

/* What a stall message calls sample id: its file, or "sample ID" without an index
 * (a binding's pool; the buffer is the coordinator thread's own). */
static const char *sample_name(const struct gm_pool *p, uint32_t id)
{
	static _Thread_local char buf[32];
	if (p->c.w.ds)
		return gm_dataset_name(p->c.w.ds, id);
	snprintf(buf, sizeof(buf), "sample %u", id);
	return buf;
}

/* Kill a stuck worker; its replacement starts now, not when it is reaped. */
static void replace(struct gm_pool *p, struct wk *w, uint64_t now)
{
	kill(w->pid, SIGKILL);
	w->stalled = true;
	w->stall_ns = now;
	if (!w->retiring)
		atomic_fetch_add(&p->retiring, 1);
	w->retiring = true;
}

/* The holder of slot's lease, pid, made no progress for a deadline: kill it. */
static void stall(struct gm_pool *p, uint32_t slot, pid_t pid, uint64_t now)
{
	int i = 0;
	while (i < p->nwk && p->wk[i].pid != pid)
		i++;
	if (i == p->nwk)
		return; /* not (or no longer) ours */
	struct wk *w = &p->wk[i];
	if (w->stalled) {
		if (!w->reclaimed) {
			uint32_t n = gm_ring_reclaim(p->ring, (uint32_t)pid, NULL);
			atomic_fetch_add(&p->h->p_reissued, n);
			w->reclaimed = true;
		}
		return;
	}
	uint64_t task = atomic_load(&gm_ring_ctl(p->ring, slot)->task), k;
	uint32_t epoch, left, id = stuck_sample(p, slot, task, &left);
	char what[320];
	gm_worker_task_pos(&p->c.w, task, &epoch, &k);
	if (!p->c.w.ds) { /* a binding's slot says where its batch is (bind.h) */
		const uint32_t *ids = gm_ring_ids(p->ring, slot);
		epoch = ids[0];
		k = ids[1];
	}
	if (id != UINT32_MAX && p->c.w.ds)
		snprintf(what, sizeof(what), "stuck on %s (sample %u)", sample_name(p, id), id);
	else if (id != UINT32_MAX)
		snprintf(what, sizeof(what), "stuck on %s", sample_name(p, id));
	else
		snprintf(what, sizeof(what), "%u of its samples not read", left);
	snprintf(p->last_stall, sizeof(p->last_stall),
		 "worker %d made no progress on batch %llu of epoch %u for %llu ms, %s", (int)pid,
		 (unsigned long long)k, epoch, (unsigned long long)(p->lease_ns / 1000000), what);
	gm_log("pool", "%s: killed it, the batch is made again", p->last_stall);
	if (id != UINT32_MAX && strike(p->stall, id) == 2) {
		quarantine(p, id, (int)pid, 0);
		gm_log("pool",
		       "%s stalled workers twice: quarantined, it is replaced like a bad file",
		       sample_name(p, id));
	}
	replace(p, w, now);
}

/* Look at every leased slot: progress since the last look, or a stall. */
static void watch_leases(struct gm_pool *p, uint64_t now)
{
	uint32_t words = (p->c.w.batch_size + 63) / 64;
	for (int i = 0; i < p->nwk; i++)
		p->wk[i].leased = false;
	for (uint32_t s = 0; s < p->h->nslots; s++) {
		struct gm_slot_ctl *ctl = gm_ring_ctl(p->ring, s);
		struct lease_seen *e = &p->seen[s];
		/* pairs with the CAS in gm_ring_claim */
		uint32_t word = atomic_load_explicit(&ctl->state, memory_order_acquire);
		if (GM_SLOT_STATE(word) != GM_SLOT_CLAIMED) {
			e->word = word;
			continue;
		}
		for (int i = 0; i < p->nwk; i++)
			if ((uint32_t)p->wk[i].pid == GM_SLOT_PID(word))
				p->wk[i].leased = true;
		struct lease_seen now_seen = {
		    .word = word,
		    .task = atomic_load_explicit(&ctl->task, memory_order_relaxed),
		    .cur = atomic_load_explicit(&ctl->cur_sample, memory_order_relaxed),
		    .since = now,
		};
		_Atomic uint64_t *done = gm_ring_done_bits(p->ring, s);
		for (uint32_t q = 0; q < words; q++)
			now_seen.done += (uint64_t)__builtin_popcountll(
			    atomic_load_explicit(&done[q], memory_order_relaxed));
		if (now_seen.word != e->word || now_seen.task != e->task ||
		    now_seen.done != e->done || now_seen.cur != e->cur) {
			*e = now_seen;
			continue;
		}
		if (now - e->since < p->lease_ns)
			continue;
		e->since = now; /* the next look at this lease is a deadline from now */
		stall(p, s, (pid_t)GM_SLOT_PID(word), now);
	}
}

/* ---- the idle watch: a worker without a lease must not be stopped ------------------
 *
 * A worker that waits for a free slot (the ring full, the consumer slow) holds no
 * lease, so the lease watch never looks at it. Stopped there (kill -STOP, a
 * debugger), it would count as a live worker for ever: the pool runs one worker
 * short, and with --workers 1 the job hangs once the consumer frees a slot. An
 * idle worker does no I/O and wakes every 200 ms, so the only way it stops
 * making progress is to be stopped; the coordinator therefore reads the state
 * letter of each worker that held no lease at this look from /proc/PID/stat ('T'
 * stopped by a signal, 't' by a tracer), and one seen stopped at every look for
 * a whole deadline is SIGKILLed and replaced, like a stalled holder. The PID
 * cannot name another process: the worker is our child, not yet reaped (we reap
 * it ourselves through its pidfd). One small read per idle worker per look (four
 * looks a deadline) is all it costs. A heartbeat word per worker in the ring was
 * the other way: it would change the ring's format, wake every idle worker on a
 * timer to write it, and tell no more (an idle worker has nothing else to be
 * stuck on). Where /proc cannot be read the watch sees nothing, as before.
 */

/* Is pid stopped (by a signal or a tracer)? false when it cannot be read. */
static bool proc_stopped(pid_t pid)
{
	char state = gm_host_proc_state(NULL, pid);
	return state == 'T' || state == 't';
}

/* Every worker that held no lease at this look: running, or stopped since when. */
static void watch_idle(struct gm_pool *p, uint64_t now)
{
	for (int i = 0; i < p->nwk; i++) {
		struct wk *w = &p->wk[i];
		if (w->stalled || w->leased || !proc_stopped(w->pid)) {
			w->stopped = 0;
			continue;
		}
		if (!w->stopped)
			w->stopped = now;
		if (now - w->stopped < p->lease_ns)
			continue;
		snprintf(p->last_stall, sizeof(p->last_stall),
			 "worker %d was stopped for %llu ms without a lease", (int)w->pid,
			 (unsigned long long)(p->lease_ns / 1000000));
		gm_log("pool", "%s: killed it, a new worker takes its place", p->last_stall);
		replace(p, w, now);
	}
}

/* ---- the start watch: a worker must get made ------------------------------------
 *
 * A forked worker signals once it is made (gm_worker_main writes a byte to its
 * end of a pipe); one that has not within start_timeout_ms of its fork never
 * will: a fork copies the parent's memory, locks included, and a lock another
 * thread of the parent held at that moment (GCC 12's ASan allocator keeps its
 * locks across fork, seen in the node agent under make sanitize) is never
 * released in the child. It is SIGKILLed and replaced, like a stalled worker.
 */
static void watch_start(struct gm_pool *p, uint64_t now)
{
	uint64_t limit = p->c.start_timeout_ms * 1000000ull; /* never 0: gm_pool_create */
	for (int i = 0; i < p->nwk; i++) {
		struct wk *w = &p->wk[i];
		char c;
		if (w->ready_fd < 0 || w->stalled)
			continue;
		ssize_t n = read(w->ready_fd, &c, 1);
		if (n >= 0 || errno != EAGAIN) { /* made (a byte), or gone (EOF: reaped soon) */
			close(w->ready_fd);
			w->ready_fd = -1;
			continue;
		}
		if (now - w->born < limit)
			continue;
		snprintf(p->last_stall, sizeof(p->last_stall),
			 "worker %d was not made within %llu ms of its start", (int)w->pid,
			 (unsigned long long)(limit / 1000000));
		gm_log("pool", "%s: killed it, a new worker takes its place", p->last_stall);
		replace(p, w, now);
	}
}

/* The coordinator did not look for a whole deadline (the whole process was
 * stopped, by Ctrl-Z say, or starved): nothing it saw before says a worker was
 * stuck for a deadline, and a worker continued with it may not have moved yet.
 * Every clock starts again. */
static void watch_restart(struct gm_pool *p, uint64_t now)
{
	for (uint32_t s = 0; s < p->h->nslots; s++)
		p->seen[s].since = now;
	for (int i = 0; i < p->nwk; i++)
		p->wk[i].stopped = 0;
}

/* How long the coordinator may sleep: until the controller's tick, the next
 * chaos kill or the next look at the leases, or until a worker exits or the
 * eventfd is poked (-1). */
static int poll_timeout(const struct gm_pool *p, bool autoscale)
{
	int timeout = autoscale ? GM_ELASTIC_TICK_MS : -1;
	if (p->lease_ns) {
		int look = (int)(p->lease_ns / 4000000);
		look = look < 10 ? 10 : look;
		timeout = timeout < 0 || look < timeout ? look : timeout;
	}
	uint64_t now = gm_now_ns();
	if (p->zpid && !p->zready && p->zwait > now) { /* (then workers start fresh) */
		int z = (int)((p->zwait - now) / 1000000) + 1;
		timeout = timeout < 0 || z < timeout ? z : timeout;
	}
	if (p->c.chaos_kill_ms) {
		uint64_t due = p->chaos_t + p->c.chaos_kill_ms * 1000000ull;
		int c = due > now ? (int)((due - now) / 1000000) : 0;
		timeout = timeout < 0 || c < timeout ? c : timeout;
	}
	return timeout;
}

/* Shut down: ask, then insist. Handing the ring on (another pool's workers go on
 * with it), the ring is not stopped: each worker is retired (it finishes its
 * batch, then exits) and whatever lease a worker killed at the deadline still
 * held goes back to FREE for the other pool. */
static void reap_all(struct gm_pool *p, struct pollfd *pfd, bool handing)
{
	if (!handing)
		gm_ring_stop(p->ring);
	for (int i = 0; handing && i < p->nwk; i++)
		kill(p->wk[i].pid, SIGUSR1);
	gm_pool_zygote_end(p, true); /* it holds no lease: nothing to finish */
	uint64_t deadline = gm_now_ns() + 2000000000ull;
	while (p->nwk > 0) {
		for (int i = 0; i < p->nwk; i++) {
			pfd[i].fd = p->wk[i].pidfd;
			pfd[i].events = POLLIN;
		}
		int left = (int)((deadline > gm_now_ns() ? deadline - gm_now_ns() : 0) / 1000000);
		int n = poll(pfd, (nfds_t)p->nwk, left);
		if (n <= 0) {
			for (int i = 0; i < p->nwk; i++) {
				kill(p->wk[i].pid, SIGKILL);
				gm_pool_kill_group(p->wk[i].pid);
			}
			deadline = gm_now_ns() + 5000000000ull;
			continue;
		}
		for (int i = p->nwk - 1; i >= 0; i--) {
			if (pfd[i].revents) {
				gm_pool_kill_group(p->wk[i].pid);
				waitpid(p->wk[i].pid, NULL, 0);
				gm_pool_reap_group(p->wk[i].pid);
				close(p->wk[i].pidfd);
				if (p->wk[i].ready_fd >= 0)
					close(p->wk[i].ready_fd);
				bool retiring = p->wk[i].retiring;
				if (handing)
					atomic_fetch_add(
					    &p->h->p_reissued,
					    gm_ring_reclaim(p->ring, (uint32_t)p->wk[i].pid, NULL));
				p->wk[i] = p->wk[--p->nwk];
				atomic_fetch_sub(&p->h->p_alive, 1);
				if (retiring)
					atomic_fetch_sub(&p->retiring, 1);
			}
		}
	}
}

static void *coordinator(void *arg)
{
	struct gm_pool *p = arg;
	struct pollfd pfd[GM_MAX_WORKERS + 3]; /* eventfd, workers, the zygote's two */
	bool first = true;

	for (;;) {
		pthread_mutex_lock(&p->mu);
		int target = p->target;
		bool closing = p->closing, handing = p->handing;
		bool autoscale = p->autoscale;
		pthread_mutex_unlock(&p->mu);
		if (closing) {
			reap_all(p, pfd, handing);
			return NULL;
		}
		/* A zygote the server makes (two forks of a large interpreter, tens of
		 * ms on a busy host): the owner goes on meanwhile, the first workers
		 * wait for the zygote anyway and their errors are the pool's fatal
		 * error, as any later worker's. */
		if (first && p->c.zygote_argv && p->c.zygote_server > 2 && p->c.exec_fd > 2)
			atomic_store(&p->started, 1);
		if (first)
			gm_pool_zygote_start(p);
		adjust_pool(p, target);
		if (first) {
			if (!atomic_load(&p->started))
				atomic_store(&p->started, atomic_load(&p->h->p_fatal) ? -1 : 1);
			first = false;
		}
		pfd[0].fd = p->evfd;
		pfd[0].events = POLLIN;
		for (int i = 0; i < p->nwk; i++) {
			pfd[i + 1].fd = p->wk[i].pidfd;
			pfd[i + 1].events = POLLIN;
		}
		int nz = p->nwk + 1; /* where the zygote's fds are, if any */
		pfd[nz] = (struct pollfd){.fd = p->zpidfd, .events = POLLIN};
		pfd[nz + 1] = (struct pollfd){.fd = p->zsock, .events = POLLIN};
		int n = poll(pfd, (nfds_t)nz + (p->zpid ? 2 : 0), poll_timeout(p, autoscale));
		if (n < 0)
			continue;
		gm_pool_zygote_look(p, &pfd[nz]);
		uint64_t now = gm_now_ns();
		if (p->c.chaos_kill_ms && now >= p->chaos_t + p->c.chaos_kill_ms * 1000000ull)
			chaos_kill(p);
		if (autoscale && now >= p->meter.t + GM_ELASTIC_TICK_MS * 1000000ull)
			controller_tick(p);
		if (p->lease_ns) {
			if (p->last_look && now - p->last_look > p->lease_ns)
				watch_restart(p, now);
			p->last_look = now;
			watch_leases(p, now);
			watch_idle(p, now);
			watch_start(p, now);
		}
		if (pfd[0].revents & POLLIN) {
			uint64_t v;
			if (read(p->evfd, &v, sizeof(v)) < 0) {
				/* nothing to do: the next loop re-reads the target */
			}
		}
		/* Walk backwards: on_exit_of moves the last worker into slot i. */
		for (int i = p->nwk - 1; i >= 0; i--)
			if (pfd[i + 1].revents & (POLLIN | POLLHUP | POLLERR))
				on_exit_of(p, i);
	}
}

/* ---- set-up and the owner's controls ------------------------------------------ */

int gm_pool_lease_check(uint32_t ms, char *err, size_t errlen)
{
	if (ms <= GM_MAX_LEASE_MS)
		return 0;
	gm_errf(err, errlen, "lease_timeout_ms must be 0 (default %u) .. %u, not %u",
		GM_LEASE_TIMEOUT_MS, GM_MAX_LEASE_MS, ms);
	return -EINVAL;
}

int gm_pool_check(const struct gm_loader_opts *o, char *err, size_t errlen)
{
	struct gm_aug *probe;
	int rc;

	if (!o->batch_size || o->batch_size > GM_MAX_BATCH) {
		gm_errf(err, errlen, "batch_size must be 1..%d, not %u", GM_MAX_BATCH,
			o->batch_size);
		return -EINVAL;
	}
	rc = gm_aug_spec_check(&o->aug, err, errlen); /* names the field and its range */
	if (rc)
		return rc;
	rc = gm_pool_lease_check(o->lease_timeout_ms, err, errlen);
	if (rc)
		return rc;
	rc = gm_aug_create(&probe, &o->aug);
	if (rc) {
		gm_errf(err, errlen, "invalid transform spec (size %u)", o->aug.size);
		return rc;
	}
	gm_aug_destroy(probe);
	return 0;
}

int gm_pool_tasks(const struct gm_loader_opts *o, const struct gm_dataset *ds, uint32_t *bpe,
		  uint64_t *first, uint64_t *end, char *err, size_t errlen)
{
	uint32_t n = o->order ? o->order_len : gm_dataset_count(ds);
	*bpe = o->drop_last ? n / o->batch_size : (n + o->batch_size - 1) / o->batch_size;
	if (*bpe == 0) {
		gm_errf(err, errlen, "%s: %u samples make no full batch of %u (drop_last)", o->root,
			n, o->batch_size);
		return -EINVAL;
	}
	if (o->start_batch >= *bpe) {
		gm_errf(err, errlen, "start_batch %llu >= %u batches per epoch",
			(unsigned long long)o->start_batch, *bpe);
		return -EINVAL;
	}
	*first = o->start_batch;
	*end = o->epochs ? (uint64_t)o->epochs * *bpe : GM_RING_NO_END;
	if (*end <= *first) {
		gm_errf(err, errlen, "nothing to deliver");
		return -EINVAL;
	}
	return 0;
}

void gm_pool_cfg_init(struct gm_pool_cfg *c, const struct gm_loader_opts *o,
		      const struct gm_dataset *ds, uint32_t bpe, uint64_t first, uint64_t end)
{
	memset(c, 0, sizeof(*c));
	c->w.ds = ds;
	c->w.aug = o->aug;
	c->w.seed = o->seed;
	c->w.epoch0 = o->epoch;
	c->w.batch_size = o->batch_size;
	c->w.batches_per_epoch = bpe;
	c->w.shuffle = o->shuffle;
	c->w.on_error = o->on_error;
	c->w.order = o->order;
	c->w.order_len = o->order_len;
	c->w.coef = o->gpu_decode;
	c->first_task = first;
	c->end_task = end;
	c->slots = o->slots;
	c->workers = o->workers;
	c->chaos_kill_ms = o->chaos_kill_ms;
	c->lease_timeout_ms = gm_lease_ms(o->lease_timeout_ms);
}

static uint32_t pow2_at_least(uint32_t v)
{
	uint32_t p = 1;
	while (p < v)
		p <<= 1;
	return p;
}

/* The ring of c->ring_fd, and the configuration it implies (c's geometry and
 * tasks replaced by the ring's). 0, or gm_ring_attach's -errno with a message. */
static int adopt_ring(struct gm_ring **ring, struct gm_pool_cfg *c, char *err, size_t errlen)
{
	int rc = gm_ring_attach(ring, c->ring_fd);
	if (rc) {
		gm_errf(err, errlen, "the consumer's ring cannot be used: %s",
			rc == -EPERM ? "it is not sealed" : strerror(-rc));
		return rc;
	}
	const struct gm_ring_hdr *h = gm_ring_hdr(*ring);
	c->w.batch_size = h->batch_size;
	c->sample_bytes = h->sample_bytes;
	c->slots = h->nslots;
	c->first_task = h->first_task;
	c->end_task = h->end_task;
	return 0;
}

/* The pool's ring: a new one of c's geometry, or the one of c->ring_fd (adopt_ring);
 * c's slots and sample_bytes are set to the ring's. 0 or -errno with a message. */
static int pool_ring(struct gm_ring **ring, struct gm_pool_cfg *c, char *err, size_t errlen)
{
	size_t sample_bytes = c->sample_bytes ? c->sample_bytes
			      : c->w.coef     ? gm_coef_slot_bytes(gm_aug_out_bytes(&c->w.aug))
					      : gm_aug_out_bytes(&c->w.aug);
	int rc;

	if (c->ring_fd > 0)
		return adopt_ring(ring, c, err, errlen);
	uint32_t slots =
	    c->slots ? c->slots : pow2_at_least((uint32_t)(c->workers ? c->workers : 2) * 2);
	if (slots < GM_MIN_SLOTS)
		slots = GM_MIN_SLOTS;
	if (slots & (slots - 1) || slots > GM_MAX_SLOTS) {
		gm_errf(err, errlen, "slots must be a power of two <= %d", GM_MAX_SLOTS);
		return -EINVAL;
	}
	/* the ring's bytes against the memory left, with the sizes in the message */
	rc = gm_ring_admit(slots, c->w.batch_size, sample_bytes, err, errlen);
	if (rc)
		return rc;
	rc = (c->sparse ? gm_ring_create_sparse : gm_ring_create)(
	    ring, slots, c->w.batch_size, sample_bytes, c->first_task, c->end_task);
	if (rc)
		gm_errf(err, errlen, "ring of %u slots x %u x %zu bytes: %s", slots,
			c->w.batch_size, sample_bytes, strerror(-rc));
	c->slots = slots;
	c->sample_bytes = sample_bytes;
	return rc;
}

/* The start watch's limit when the config leaves it 0: GM_POOL_START_MS, or
 * $GM_POOL_START_MS, a number of ms from 100 to GM_POOL_START_MS (anything else
 * is refused, as GM_MEM_LIMIT is). make sanitize's test_remote.sh sets 5000: a
 * worker that GCC 12's ASan allocator hangs at its fork (see the start watch)
 * then costs its job 5 s, not 30 (an ASan'ed worker is made in well under 1 s).
 * 0 or -EINVAL with a message. */
static int start_ms_default(uint32_t *ms, char *err, size_t errlen)
{
	const char *s = getenv("GM_POOL_START_MS");
	char *end;
	unsigned long v;

	*ms = GM_POOL_START_MS;
	if (!s)
		return 0;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v < 100 || v > GM_POOL_START_MS) {
		gm_errf(err, errlen, "GM_POOL_START_MS=%s is not a number of ms from 100 to %d", s,
			GM_POOL_START_MS);
		return -EINVAL;
	}
	*ms = (uint32_t)v;
	return 0;
}

int gm_pool_create(struct gm_pool **out, const struct gm_pool_cfg *c, char *err, size_t errlen)
{
	struct gm_pool *p;
	int rc;

	*out = NULL;
	p = calloc(1, sizeof(*p));
	if (!p) {
		gm_errf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	p->c = *c;
	p->evfd = -1;
	p->zpidfd = p->zsock = -1;
	rc = p->c.start_timeout_ms ? 0 : start_ms_default(&p->c.start_timeout_ms, err, errlen);
	if (rc)
		goto out_free;
	p->cpu = gm_host_worker_cpu(err, errlen); /* a bad $GM_WORKER_CPU: said here */
	if (p->cpu < -1) {
		rc = p->cpu;
		goto out_free;
	}
	rc = pool_ring(&p->ring, &p->c, err, errlen);
	if (rc)
		goto out_free;
	p->h = gm_ring_hdr(p->ring);
	p->lease_ns = (uint64_t)p->c.lease_timeout_ms * 1000000ull;
	p->seen = calloc(p->h->nslots, sizeof(*p->seen));
	if (!p->seen) {
		gm_errf(err, errlen, "out of memory");
		rc = -ENOMEM;
		goto out_ring;
	}
	pthread_mutex_init(&p->mu, NULL);
	/* Workers map their own ring afresh (see spawn): no child inherits rings. */
	madvise(gm_ring_base(p->ring), gm_ring_bytes(p->ring), MADV_DONTFORK);
	p->c.w.ring = p->ring;
	gm_elastic_meter_restart(&p->meter); /* gm_pool_measure of a pool never started */
	*out = p;
	return 0;

out_ring:
	gm_ring_destroy(p->ring);
out_free:
	free(p);
	return rc;
}

struct gm_ring *gm_pool_ring(const struct gm_pool *p)
{
	return p->ring;
}

int gm_pool_start(struct gm_pool *p, char *err, size_t errlen)
{
	int rc;

	p->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (p->evfd < 0) {
		rc = -errno;
		gm_errf(err, errlen, "eventfd: %s", strerror(errno));
		return rc;
	}
	set_target_locked(p, p->c.workers);
	p->autoscale = p->c.autoscale;
	p->chaos_state = p->c.w.seed ^ 0x9e3779b97f4a7c15ull;
	p->chaos_t = gm_now_ns();
	gm_elastic_meter_restart(&p->meter);
	/* The coordinator runs with all signals blocked; workers unblock them. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = -pthread_create(&p->coord, NULL, coordinator, p);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		gm_errf(err, errlen, "pthread_create: %s", strerror(-rc));
		return rc;
	}
	p->coord_started = true;
	while (!atomic_load(&p->started))
		usleep(200);
	if (atomic_load(&p->started) < 0) {
		gm_errf(err, errlen, "%s", p->h->p_fatal_msg);
		return atomic_load(&p->h->p_fatal);
	}
	return 0;
}

void gm_pool_fix(struct gm_pool *p, int workers)
{
	pthread_mutex_lock(&p->mu);
	set_target_locked(p, clamp_workers(workers));
	p->autoscale = false; /* an explicit size wins over the controller */
	pthread_mutex_unlock(&p->mu);
	poke(p);
}

int gm_pool_culprit(struct gm_pool *p, uint32_t sample, int *pid, int *sig)
{
	for (int k = 0; k < 64; k++) {
		struct culprit *c = &p->culprits[k];
		/* pairs with the release store in quarantine */
		uint32_t cur = atomic_load_explicit(&c->sample1, memory_order_acquire);
		if (cur == 0)
			break;
		if (cur == sample + 1) {
			*pid = c->pid;
			*sig = c->sig;
			return 0;
		}
	}
	return -ENOENT;
}

int gm_pool_pids(struct gm_pool *p, int *pids, int max)
{
	int n = 0;
	for (int id = 0; id < GM_MAX_WORKERS && n < max; id++) {
		int32_t pid = atomic_load(&p->pid_of[id]);
		if (pid > 0)
			pids[n++] = pid;
	}
	return n;
}

uint32_t gm_pool_retiring(struct gm_pool *p)
{
	return atomic_load(&p->retiring);
}

int gm_pool_measure(struct gm_pool *p, double *demand, double *worker_rate)
{
	return gm_elastic_measure(&p->meter, p->h, p->c.w.batch_size, demand, worker_rate);
}

void gm_pool_stop(struct gm_pool *p)
{
	if (!p->coord_started)
		return;
	pthread_mutex_lock(&p->mu);
	p->closing = true;
	pthread_mutex_unlock(&p->mu);
	poke(p);
	pthread_join(p->coord, NULL);
	p->coord_started = false;
}

void gm_pool_hand_over(struct gm_pool *p)
{
	if (!p->coord_started)
		return;
	pthread_mutex_lock(&p->mu);
	p->handing = true;
	pthread_mutex_unlock(&p->mu);
	gm_pool_stop(p);
}

void gm_pool_destroy(struct gm_pool *p)
{
	if (!p)
		return;
	gm_pool_stop(p);
	if (p->evfd >= 0)
		close(p->evfd);
	gm_ring_destroy(p->ring);
	pthread_mutex_destroy(&p->mu);
	free(p->seen);
	free(p);
}
