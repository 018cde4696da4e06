/*
 * lender.c - the lender's side of the remote plugin (agent.h): a peer's jobs
 * that this agent lends workers to, and the remote worker processes it runs
 * for them.
 *
 * The idea: the lender decides what it lends. A LEND names the job (its ATTACH
 * request, dataset fingerprint and the home's port); its root is matched by its
 * words against --lend-root (lendroot.h) before anything is touched, and a root
 * no --lend-root covers is refused at once. A covered one is checked by a check
 * process (this program exec'ed afresh with --lend-check, as a worker is):
 * realpath still below the lend root, the job's options, the dataset indexed
 * confined to its root within --lend-max-files entries (dataset.h's bounded
 * open), the fingerprint and the batches equal to the home's. The agent's loop
 * never indexes: it answers the LEND when the check process ends, or refuses it
 * at --lend-index-ms, killing the process. Refusals carry fixed words (lc_words)
 * and never a path, a fingerprint or a count: what the check found is said in
 * this agent's log only (through the per-address limiter: a home that asks
 * in a loop costs the log a few lines). A Python job's LEND names its spec by
 * hash: a job this agent would lend but does not hold is answered "send the
 * spec" (LC_SPEC), the spec is checked against its hash when it comes, and
 * kept with the job while it is lent. Then the lender keeps the job at min(asked, what its
 * idle budget allows) worker processes. Each is this program exec'ed afresh (UCX's process-wide
 * state does not survive a fork) with its blob on fd 3, at nice
 * GM_NODE_LENT_NICE (lent_priority), killed with the agent
 * (PR_SET_PDEATHSIG). Retiring is SIGUSR1 (the batch in hand is finished first); a job whose home
 * is gone, or silent for QUIET_MS (msg.h), ends at once (SIGKILL). Lent workers go first when this
 * host's own jobs need its CPUs (SIGKILL, and the home is told it has fewer), and one seen stopped
 * (/proc state T) for STOP_MS is killed and replaced: it held a lease and a slot while making
 * nothing.
 *
 * Not here: the worker process itself (worker.c), the connections (conn.c).
 */

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "agent.h"
#include "check.h"
#include "conn.h"
#include "goldminer/dataset.h"
#include "goldminer/host.h"
#include "goldminer/job.h"
#include "goldminer/node.h"
#include "goldminer/policy.h"
#include "goldminer/pool.h"
#include "goldminer/util.h"
#include "goldminer/version.h"
#include "lendroot.h"
#include "msg.h"
#include "tls.h"
#include "worker.h"

/* ---- lent jobs and their worker processes ------------------------------------ */

uint32_t gm_remote_lend_total(const struct gm_remote *r)
{
	uint32_t n = 0;
	for (int i = 0; i < MAX_LJOBS; i++)
		if (r->ljobs[i].used)
			n += r->ljobs[i].n;
	return n;
}

static pid_t retired[GM_MAX_WORKERS * 4];
static unsigned nretired;

/* Reap the retired and killed workers that have exited (no zombies). */
static void reap_retired(void)
{
	for (unsigned k = 0; k < nretired;) {
		pid_t pid = waitpid(retired[k], NULL, WNOHANG);
		if (pid == retired[k] || (pid < 0 && errno == ECHILD))
			retired[k] = retired[--nretired];
		else
			k++;
	}
}

void gm_remote_lend_reap_all(void)
{
	for (int t = 0; t < 100 && nretired; t++) { /* SIGKILLed: gone within moments */
		reap_retired();
		if (nretired)
			usleep(10000);
	}
}

static void forget(pid_t pid)
{
	if (nretired < sizeof(retired) / sizeof(retired[0]))
		retired[nretired++] = pid;
}

static void retire_one(struct ljob *l)
{
	if (!l->n)
		return;
	l->n--;
	kill(l->pid[l->n], SIGUSR1); /* finishes its batch, then exits; reaped later */
	forget(l->pid[l->n]);
	l->pid[l->n] = 0;
	l->stopped_ms[l->n] = 0;
}

void gm_remote_lend_end(struct ljob *l)
{
	if (l->checking && l->check_pid > 0) { /* 0: it ended and was reaped */
		kill(l->check_pid, SIGKILL);
		forget(l->check_pid);
	}
	if (l->checking)
		close(l->check_fd);
	for (uint32_t i = 0; i < l->n; i++) {
		kill(l->pid[i], SIGKILL);
		forget(l->pid[i]);
	}
	l->n = 0;
	if (l->bfd1)
		close(l->bfd1 - 1);
	gm_dataset_close(l->ds);
	free(l->spec);
	memset(l, 0, sizeof(*l));
}

/* This program exec'ed afresh as `goldminer node OPT 3 --agent-pid PID` with
 * fd on its fd 3, below every process of this host (lent_priority), killed
 * with the agent: here by
 * PR_SET_PDEATHSIG, and again after the exec by the child itself (cmd/node.c:
 * the exec of a binary with file capabilities clears the signal, and the
 * agent may die before it is set). Its pid, or -1 (errno). */
/* A lent worker takes little of the CPU this host's own processes want: nice
 * GM_NODE_LENT_NICE (19: a weight of 15 against a nice-5 worker's 335, about
 * 4% while both run; under nice 10, 110, a guest took a quarter of a core its
 * host's own job waited for inside the same CPU quota, and the host then
 * starved and preempted it in turn). Not SCHED_IDLE (a weight of 3): starved
 * that far behind a busy agent, a guest's UCX wire-up outlived its home's
 * patience, and UCX 1.13's TCP transport then failed an assertion
 * (wireup_ep.c: pending_count) in the guest: 2 of 4 runs of test_remote's
 * traced lend under a loaded machine. Kept across the exec and by the
 * worker's children (a Python job's). */
static void lent_priority(void)
{
	(void)setpriority(PRIO_PROCESS, 0, GM_NODE_LENT_NICE);
}

static pid_t exec_self(struct gm_remote *r, int fd, char *opt)
{
	pid_t parent = getpid();
	char ppid[24]; /* formatted before the fork: no allocation after it */
	snprintf(ppid, sizeof(ppid), "%d", (int)parent);
	pid_t pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent || dup2(fd, 3) != 3)
			_exit(127);
		close_range(4, ~0u, 0); /* not the agent's sockets */
		lent_priority();
		char *argv[] = {"goldminer", "node", opt, "3", "--agent-pid", ppid, NULL};
		execv(r->exe, argv);
		_exit(127);
	}
	return pid;
}

/* The pace of a lender's guests, in thousandths of a core (gm_policy_guest_cores:
 * beside its own jobs, guests of them all share the cores those leave; 0: no
 * bound). guests: those that will run. */
static uint32_t guest_pace(const struct gm_remote *r, uint32_t guests)
{
	double g = gm_policy_guest_cores(r->lend_cores, guests, r->own_jobs);
	uint32_t m = g > 0 ? (uint32_t)(g * 1000 + 0.5) : 0;
	return g > 0 && m < 1 ? 1 : m > 999 ? 0 : m;
}

/* Tell l's workers their pace (their fd 3: worker.c reads it before each batch). */
static void set_pace(struct ljob *l, uint32_t pace)
{
	if (!l->bfd1 || l->blob.pace_milli == pace)
		return;
	l->blob.pace_milli = pace;
	(void)!pwrite(l->bfd1 - 1, &l->blob.pace_milli, sizeof(l->blob.pace_milli),
		      offsetof(struct wblob, pace_milli));
}

/* How often the lender reads its guests' CPU time (in ticks of 10 ms: a guest
 * paced to 0.1 of a core reads within 10%; a misread heavy guest is given
 * 1.25 x what it used, near its pace anyway) */
#define PACE_WINDOW_MS 1000

/* The sum over l's workers of read (gm_host_proc_cpu_ns: their CPU time;
 * gm_host_proc_wait_ns: the time they waited for a CPU), ns; UINT64_MAX when
 * one cannot be read (it ended: its use is not known over the window). */
static uint64_t workers_ns(const struct ljob *l, uint64_t (*read)(const char *, pid_t))
{
	uint64_t ns = 0;
	for (uint32_t k = 0; k < l->n; k++) {
		uint64_t c = read(NULL, l->pid[k]);
		if (c == UINT64_MAX)
			return c;
		ns += c;
	}
	return ns;
}

/* Beside its own jobs its guests, all together, spend at most the cores those
 * leave (guest_pace), split by what they use (gm_policy_guest_shares: a job
 * whose guests sit idle, its ring full, leaves its share to the others);
 * their use (the CPU they spent, and the time they waited for one) is
 * measured every PACE_WINDOW_MS. A Python job's guest is counted
 * as using all it is given: its Python worker, a child, is not in its time.
 * total: the guests that run. */
static void lend_paces(struct gm_remote *r, uint32_t total, int64_t now)
{
	uint32_t n[MAX_LJOBS];
	double used[MAX_LJOBS], last[MAX_LJOBS], out[MAX_LJOBS];
	int at[MAX_LJOBS];
	size_t k = 0;
	double each = gm_policy_guest_cores(r->lend_cores, total, r->own_jobs);
	for (int i = 0; i < MAX_LJOBS; i++) {
		struct ljob *l = &r->ljobs[i];
		if (!l->used)
			continue;
		if (!l->cpu_ms || now - l->cpu_ms >= PACE_WINDOW_MS) {
			uint64_t c = workers_ns(l, gm_host_proc_cpu_ns),
				 w = workers_ns(l, gm_host_proc_wait_ns);
			bool known = l->cpu_ms && now > l->cpu_ms && l->cpu_n == l->n &&
				     c != UINT64_MAX && l->cpu_ns != UINT64_MAX && c >= l->cpu_ns &&
				     !l->blob.py;
			double ms = known ? (double)(now - l->cpu_ms) : 0;
			l->used_cores = known ? (double)(c - l->cpu_ns) / 1e6 / ms : -1;
			/* the time they waited for a CPU they wanted (a guest starved
			 * by its host's own job, or by the quota, is not a light one:
			 * counted light, seed 105's guests were paced down to 0.012 of
			 * a core, 22 img/s, making "on CPU 7%" of their time) */
			if (known && w != UINT64_MAX && l->wait_ns != UINT64_MAX && w >= l->wait_ns)
				l->used_cores += (double)(w - l->wait_ns) / 1e6 / ms;
			l->cpu_ns = c, l->wait_ns = w, l->cpu_ms = now, l->cpu_n = l->n;
		}
		at[k] = i;
		n[k] = l->n;
		used[k] = l->used_cores > 0 ? l->used_cores : 0;
		last[k] = l->used_cores >= 0 ? l->blob.pace_milli / 1000.0 : 0;
		k++;
	}
	if (each > 0)
		gm_policy_guest_shares(each * total, n, used, last, k, out);
	for (size_t j = 0; j < k; j++) {
		uint32_t m = each > 0 ? (uint32_t)(out[j] * 1000 + 0.5) : 0;
		set_pace(&r->ljobs[at[j]], each > 0 && out[j] > 0 && m < 1 ? 1 : m > 999 ? 0 : m);
	}
}

static void spawn(struct gm_remote *r, struct ljob *l)
{
	/* beside its host's own jobs, a share of the cores they leave (node.c
	 * lend_capacity): a guest that took more emptied the host's CPU quota
	 * in each period the own job's worker slept, that job's trainer then
	 * waited, and the guest was preempted (seed 105: 9-13 a run) */
	l->blob.pace_milli = guest_pace(r, gm_remote_lend_total(r) + 1);
	if (!l->bfd1) {
		int fd = memfd_create("goldminer-remote-worker", MFD_CLOEXEC);
		bool spec_ok =
		    fd >= 0 && (!l->blob.py ||
				(l->spec && pwrite(fd, l->spec, l->blob.spec_len,
						   sizeof(l->blob)) == (ssize_t)l->blob.spec_len));
		if (fd < 0 || !spec_ok) {
			gm_remote_logf(&r->net, "cannot start a remote worker: memfd: %s",
				       strerror(errno));
			if (fd >= 0)
				close(fd);
			return;
		}
		l->bfd1 = fd + 1;
	}
	int fd = l->bfd1 - 1;
	if (pwrite(fd, &l->blob, sizeof(l->blob), 0) != (ssize_t)sizeof(l->blob)) {
		gm_remote_logf(&r->net, "cannot start a remote worker: memfd: %s", strerror(errno));
		return;
	}
	pid_t pid = exec_self(r, fd, "--remote-worker");
	if (pid > 0)
		l->pid[l->n++] = pid;
	else
		gm_remote_logf(&r->net, "fork of a remote worker failed: %s", strerror(errno));
}

/* Reap exited workers; keep each lent job at its target within what may be lent. */
static void checks_tick(struct gm_remote *r, int64_t now);
static void end_keeping_spec(struct gm_remote *r, struct ljob *l);

/* A lent worker stopped for STOP_MS holds a lease and this host's slot while
 * making nothing: killed (the home's endpoint fails at once, so its lease is
 * taken back then, not at the lease deadline), and replaced by the tick. */
static void watch_stopped(struct gm_remote *r, struct ljob *l, int64_t now)
{
	for (uint32_t k = 0; k < l->n; k++) {
		if (!gm_host_stopped(NULL, l->pid[k])) {
			l->stopped_ms[k] = 0;
			continue;
		}
		if (!l->stopped_ms[k]) {
			l->stopped_ms[k] = now;
			continue;
		}
		if (now - l->stopped_ms[k] < STOP_MS || l->stopped_ms[k] < 0)
			continue;
		gm_remote_logf(&r->net,
			       "remote worker %d for job %016" PRIx64 " stopped for %" PRId64
			       " ms: killed; a new one replaces it",
			       (int)l->pid[k], l->token, now - l->stopped_ms[k]);
		kill(l->pid[k], SIGKILL);
		l->stopped_ms[k] = -1; /* killed: reaped below */
	}
}

static void reap_lent(struct gm_remote *r, struct ljob *l)
{
	for (uint32_t k = 0; l->used && k < l->n;) {
		int st;
		pid_t pid = waitpid(l->pid[k], &st, WNOHANG);
		if (pid != l->pid[k] && !(pid < 0 && errno == ECHILD)) {
			k++;
			continue;
		}
		if (pid > 0 && l->stopped_ms[k] < 0)
			; /* killed stopped: said */
		else if (pid > 0 && (!WIFEXITED(st) || WEXITSTATUS(st)))
			gm_remote_logf_from(&r->net, l->home ? l->home->ip : NULL,
					    "remote worker %d for job %016" PRIx64
					    " ended (status %#x)",
					    (int)l->pid[k], l->token, st);
		else if (pid > 0 && l->target) /* no task left: not started again */
			l->target--;
		l->n--;
		l->pid[k] = l->pid[l->n];
		l->stopped_ms[k] = l->stopped_ms[l->n];
		l->stopped_ms[l->n] = 0;
	}
}

/* This host's own jobs need the CPUs its lent workers hold: lent workers go
 * first and at once (SIGKILL: the home keeps what they delivered and makes the
 * rest; a guest never holds a CPU its host's job waits for), and the home is
 * told it has fewer (it asks the other peers). */
static void preempt(struct gm_remote *r, struct ljob *l, uint32_t *total)
{
	uint32_t n = 0;
	while (*total > r->lendable && l->n) {
		l->n--;
		kill(l->pid[l->n], SIGKILL);
		forget(l->pid[l->n]);
		l->pid[l->n] = 0;
		l->stopped_ms[l->n] = 0;
		(*total)--;
		n++;
	}
	if (!n)
		return;
	l->target = l->n;
	gm_remote_logf(&r->net,
		       "job %016" PRIx64 ": %u remote worker%s preempted: this host's own jobs "
		       "need its CPUs (%u lent now)",
		       l->token, n, n == 1 ? "" : "s", l->n);
	struct m_lent a = {.token = l->token, .granted = l->target};
	gm_remote_conn_send(l->home, AM_LENT, &a, sizeof(a), NULL, 0);
}

void gm_remote_lend_tick(struct gm_remote *r, int64_t now)
{
	checks_tick(r, now);
	reap_retired();
	/* only our own children: the pools' workers are reaped by their pidfds */
	for (int i = 0; i < MAX_LJOBS; i++) {
		if (r->ljobs[i].used)
			watch_stopped(r, &r->ljobs[i], now);
		reap_lent(r, &r->ljobs[i]);
	}
	uint32_t total = gm_remote_lend_total(r);
	for (int i = 0; i < MAX_LJOBS; i++) {
		struct ljob *l = &r->ljobs[i];
		if (!l->used)
			continue;
		if (!l->home || l->home->st == C_DEAD) {
			gm_remote_logf_from(&r->net, l->home ? l->home->ip : NULL,
					    "job %016" PRIx64
					    ": its home agent is gone; its remote workers stop",
					    l->token);
			total -= l->n;
			gm_remote_lend_end(l);
			continue;
		}
		if (now - l->home->heard_ms >= QUIET_MS) { /* its workers cannot reach it */
			gm_remote_logf_from(&r->net, l->home->ip,
					    "job %016" PRIx64 ": its home agent at %s is not heard "
					    "from for %" PRId64 " ms; its remote workers stop",
					    l->token, l->home->ip, now - l->home->heard_ms);
			total -= l->n;
			end_keeping_spec(r, l); /* (heard again, it asks again) */
			continue;
		}
		while (l->n > l->target) {
			retire_one(l);
			total--;
		}
		preempt(r, l, &total);
		/* (re)spawn at most every 200 ms: a worker that cannot start must not spin */
		if (l->n < l->target && total < r->lendable && now - l->spawn_ms >= 200) {
			while (l->n < l->target && total < r->lendable) {
				uint32_t before = l->n;
				spawn(r, l);
				if (l->n == before)
					break;
				total++;
			}
			l->spawn_ms = now;
		}
	}
	lend_paces(r, total, now); /* its guests share what its own leave */
}

/* ---- Python jobs' specs kept after their job ended here --------------------- */

static void spec_drop(struct spec_kept *s)
{
	free(s->spec);
	memset(s, 0, sizeof(*s));
}

/* l ends with its spec kept (a Python job whose home is still connected and
 * may ask again: then it names the spec only): the least recently used kept
 * specs make room (SPEC_KEPT entries, SPEC_KEPT_BYTES in all). */
static void end_keeping_spec(struct gm_remote *r, struct ljob *l)
{
	uint64_t bytes = l->blob.spec_len;
	/* (at most SPEC_KEPT + 1 rounds: each but the last frees one) */
	for (int i = 0; l->spec && l->home && bytes <= SPEC_KEPT_BYTES && i <= SPEC_KEPT; i++) {
		struct spec_kept *lru = NULL, *free_ = NULL;
		uint64_t held = 0;
		for (int k = 0; k < SPEC_KEPT; k++) {
			struct spec_kept *s = &r->specs[k];
			held += s->len;
			if (!s->home)
				free_ = free_ ? free_ : s;
			else if (!lru || s->used_ms < lru->used_ms)
				lru = s;
		}
		if (free_ && held + bytes <= SPEC_KEPT_BYTES) {
			*free_ = (struct spec_kept){.home = l->home,
						    .token = l->token,
						    .spec = l->spec,
						    .len = bytes,
						    .used_ms = gm_now_ms()};
			memcpy(free_->hash, l->spec_hash, sizeof(free_->hash));
			l->spec = NULL;
			break;
		}
		if (lru)
			spec_drop(lru);
	}
	gm_remote_lend_end(l);
}

/* The spec of home c's job token named hash, len bytes, taken from the kept
 * ones (the caller owns it; NULL: not held here). */
static unsigned char *spec_take(struct gm_remote *r, const struct conn *c, uint64_t token,
				const uint8_t *hash, uint64_t len)
{
	for (int k = 0; k < SPEC_KEPT; k++) {
		struct spec_kept *s = &r->specs[k];
		if (s->home == c && s->token == token && s->len == len &&
		    !memcmp(s->hash, hash, sizeof(s->hash))) {
			unsigned char *spec = s->spec;
			s->spec = NULL;
			spec_drop(s);
			return spec;
		}
	}
	return NULL;
}

void gm_remote_lend_forget(struct gm_remote *r, const struct conn *c)
{
	for (int k = 0; k < SPEC_KEPT; k++)
		if (r->specs[k].home == c)
			spec_drop(&r->specs[k]);
}

static struct ljob *ljob_for(struct gm_remote *r, struct conn *c, uint64_t token, bool make)
{
	struct ljob *free_ = NULL;
	for (int i = 0; i < MAX_LJOBS; i++) {
		struct ljob *l = &r->ljobs[i];
		if (l->used && l->home == c && l->token == token)
			return l;
		if (!l->used && !free_)
			free_ = l;
	}
	return make ? free_ : NULL;
}

/* ---- the check: is a LEND's dataset lendable here, and the same? ------------ */

/* What the check process is given on its fd 3 (a memfd) and what it writes back
 * at OUT_AT in the same memfd; both ends are in this file. */
struct lcheck_in {
	uint32_t magic;
	uint64_t max_files;
	char lend_root[PATH_MAX]; /* the canonical --lend-root the root lies below */
	struct wblob b;		  /* the job; its key zeroed: a check needs none */
	/* a Python job (b.py): the canonical --lend-root of each of its roots */
	char py_lend[GM_REMOTE_PY_ROOTS][PATH_MAX];
};
enum lc_kind {
	LC_OK,
	LC_NOT_LENDABLE,
	LC_DIFFERS,
	LC_TOO_LARGE,
	LC_OPTIONS,
	LC_SLOW,
	LC_BUSY,
	LC_NO_PYTHON,
	LC_PY_INTERP,
	LC_GM_VERSION,
	LC_SPEC,  /* not a refusal: a Python job this agent would lend, its spec not held */
	LC_FAILED /* the last */
};
struct lcheck_out {
	uint32_t magic, kind;
	char root[sizeof(((struct gm_node_req *)0)->root)]; /* realpath, for the workers */
	char detail[1024];				    /* for this agent's log only */
};
#define OUT_AT ((sizeof(struct lcheck_in) + 4095) / 4096 * 4096)

/* The words a peer is told: never a path, a fingerprint or a count. */
static const char *const lc_words[] = {
    [LC_NOT_LENDABLE] = "not lendable here",
    [LC_DIFFERS] = "the dataset differs here",
    [LC_TOO_LARGE] = "the dataset is larger than this agent indexes for peers",
    [LC_OPTIONS] = "the job's options are refused here",
    [LC_SLOW] = "indexing the dataset took too long here",
    [LC_BUSY] = "busy indexing other datasets; ask again",
    [LC_NO_PYTHON] = "Python workers are not lent here (--lend-python)",
    [LC_PY_INTERP] = "the job's interpreter is missing here or reports another Python",
    [LC_GM_VERSION] = "another goldminer version here",
    [LC_SPEC] = "the job's spec is not held here: send it",
    [LC_FAILED] = "the dataset cannot be checked here now",
};

/* A peer's path for this agent's log: control bytes as '?', 200 bytes at most. */
static void printable(char *dst, size_t len, const char *src)
{
	size_t k = 0;
	for (; src[k] && k + 1 < len && k < 200; k++)
		dst[k] = (unsigned char)src[k] < 0x20 || src[k] == 0x7f ? '?' : src[k];
	dst[k] = '\0';
}

/* The status a refusal carries: the home tells the reasons apart by it
 * (home.c: peer busy, no root for the dataset, the dataset refused). */
static const int lc_status[] = {
    [LC_NOT_LENDABLE] = -EACCES, [LC_DIFFERS] = -ESTALE,    [LC_TOO_LARGE] = -EFBIG,
    [LC_OPTIONS] = -EINVAL,	 [LC_SLOW] = -ETIMEDOUT,    [LC_BUSY] = -EBUSY,
    [LC_NO_PYTHON] = -EPERM,	 [LC_PY_INTERP] = -ENOEXEC, [LC_GM_VERSION] = -EPROTONOSUPPORT,
    [LC_SPEC] = PY_SPEC_WANTED,	 [LC_FAILED] = -EIO,
};

static void refuse(struct conn *c, uint64_t token, enum lc_kind k)
{
	struct m_lent a = {.token = token, .status = lc_status[k]};
	copy_str(a.msg, sizeof(a.msg), lc_words[k]);
	gm_remote_conn_send(c, AM_LENT, &a, sizeof(a), NULL, 0);
}

/* Keep l at min(workers, what may be lent) and say so to its home. */
static void grant(struct gm_remote *r, struct ljob *l, uint32_t workers)
{
	struct m_lent a = {.token = l->token};
	uint32_t others = gm_remote_lend_total(r) - l->n;
	uint32_t room = r->lendable > others ? r->lendable - others : 0;
	l->target = workers < room ? workers : room;
	a.granted = l->target;
	gm_remote_conn_send(l->home, AM_LENT, &a, sizeof(a), NULL, 0);
}

/* The check process's verdict on in: LC_OK (o->root the realpath) or why not,
 * with what it found in o->detail. */
static enum lc_kind check(struct lcheck_in *in, struct lcheck_out *o)
{
	struct gm_node_req *req = &in->b.req;
	const char *lr = in->lend_root;
	char real[PATH_MAX], e[768];
	struct gm_loader_opts opts;
	struct gm_dataset *ds = NULL;
	uint64_t first, end;
	uint32_t bpe;
	enum lc_kind k = LC_OK;

	if (!realpath(req->root, real)) {
		snprintf(o->detail, sizeof(o->detail), "%.300s: %s", req->root, strerror(errno));
		return LC_NOT_LENDABLE;
	}
	if (gm_lendroot_find(&lr, 1, real) < 0 || strlen(real) >= sizeof(req->root)) {
		snprintf(o->detail, sizeof(o->detail),
			 "%.300s resolves to %.300s, not below %.300s", req->root, real, lr);
		return LC_NOT_LENDABLE;
	}
	copy_str(req->root, sizeof(req->root), real);
	copy_str(o->root, sizeof(o->root), real);
	gm_wire_request_opts(req, &opts);
	if (gm_pool_check(&opts, e, sizeof(e))) {
		copy_str(o->detail, sizeof(o->detail), e);
		return LC_OPTIONS;
	}
	struct gm_dataset_bounds b = {.max_entries = in->max_files, .confined = true};
	int rc = gm_dataset_open_bounded(&ds, opts.root, &b, e, sizeof(e));
	if (rc) {
		copy_str(o->detail, sizeof(o->detail), e);
		return rc == -EFBIG ? LC_TOO_LARGE : rc == -EXDEV ? LC_NOT_LENDABLE : LC_DIFFERS;
	}
	e[0] = '\0';
	if (gm_dataset_fingerprint(ds) != in->b.fingerprint ||
	    gm_dataset_count(ds) != in->b.nsamples) {
		snprintf(o->detail, sizeof(o->detail),
			 "%.300s differs (fingerprint %016" PRIx64
			 ", %u samples; the job's: %016" PRIx64 ", %" PRIu64 ")",
			 real, gm_dataset_fingerprint(ds), gm_dataset_count(ds), in->b.fingerprint,
			 in->b.nsamples);
		k = LC_DIFFERS;
	} else if (gm_pool_tasks(&opts, ds, &bpe, &first, &end, e, sizeof(e)) || bpe != in->b.bpe) {
		snprintf(o->detail, sizeof(o->detail), "the job's batches differ here%s%s",
			 e[0] ? ": " : "", e);
		k = LC_DIFFERS;
	}
	gm_dataset_close(ds);
	return k;
}

/* What the interpreter at path says sys.version is, into buf: run with -S
 * -c (no site: its version only), killed with this process. 0 or -errno. */
static int py_version(const char *path, char *buf, size_t len)
{
	int pfd[2];
	pid_t parent = getpid();
	if (pipe(pfd))
		return -errno;
	pid_t pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent || dup2(pfd[1], 1) != 1)
			_exit(127);
		close_range(3, ~0u, 0);
		char *argv[] = {(char *)path, "-S", "-c",
				"import sys; sys.stdout.write(sys.version)", NULL};
		char *envp[] = {NULL};
		execve(path, argv, envp);
		_exit(127);
	}
	close(pfd[1]);
	size_t k = 0;
	ssize_t got;
	while (pid > 0 && k + 1 < len && (got = read(pfd[0], buf + k, len - 1 - k)) > 0)
		k += (size_t)got;
	buf[k] = '\0';
	close(pfd[0]);
	int st = 0;
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
		return -ENOEXEC;
	return 0;
}

/* A Python job's check: every root's realpath below its --lend-root, the
 * interpreter there and reporting the trainer's sys.version. */
static enum lc_kind py_check(struct lcheck_in *in, struct lcheck_out *o)
{
	struct gm_remote_py_facts f;
	char real[PATH_MAX], ver[512];
	if (gm_remote_py_facts(in->b.req.root, sizeof(in->b.req.root), &f, o->detail,
			       sizeof(o->detail)))
		return LC_OPTIONS;
	for (int k = 0; k < f.nroots; k++) {
		const char *lr = in->py_lend[k];
		lr = lr[0] ? lr : "/nonexistent";
		if (!realpath(f.roots[k], real) || gm_lendroot_find(&lr, 1, real) < 0) {
			snprintf(o->detail, sizeof(o->detail), "%.300s is not below %.300s",
				 f.roots[k], lr);
			return LC_NOT_LENDABLE;
		}
	}
	if (access(f.argv[0], X_OK) || py_version(f.argv[0], ver, sizeof(ver))) {
		snprintf(o->detail, sizeof(o->detail), "%.300s cannot run here", f.argv[0]);
		return LC_PY_INTERP;
	}
	if (strcmp(ver, f.py)) {
		snprintf(o->detail, sizeof(o->detail), "%.300s is Python %.200s, the job's %.200s",
			 f.argv[0], ver, f.py);
		return LC_PY_INTERP;
	}
	return LC_OK;
}

int gm_remote_lend_check_main(int fd)
{
	struct lcheck_in in;
	struct lcheck_out o = {.magic = MSG_MAGIC};
	gm_remote_worker_drop_admin(); /* it reads a peer's tree: it needs none */
	if (pread(fd, &in, sizeof(in), 0) != (ssize_t)sizeof(in) || in.magic != MSG_MAGIC) {
		gm_log("node --lend-check", "fd %d holds no check", fd);
		return -EINVAL;
	}
	in.lend_root[sizeof(in.lend_root) - 1] = '\0';
	in.b.req.root[sizeof(in.b.req.root) - 1] = '\0';
	o.kind = in.b.py ? py_check(&in, &o) : check(&in, &o);
	if (pwrite(fd, &o, sizeof(o), OUT_AT) != (ssize_t)sizeof(o))
		return -errno;
	return 0;
}

/* The lent jobs whose check runs now. */
static int checks_running(const struct gm_remote *r)
{
	int n = 0;
	for (int i = 0; i < MAX_LJOBS; i++)
		n += r->ljobs[i].used && r->ljobs[i].checking;
	return n;
}

/* The key b's remote workers prove to the home with (tls.h): derived from the
 * secret of this agent's session c with the home and their identity, never the
 * group secret. 0 or -errno. */
static int worker_key(const struct conn *c, struct wblob *b)
{
	char id[TLS_ID_MAX];
	memcpy(b->sid, c->sid, sizeof(b->sid));
	if (gm_remote_tls_worker_id(id, sizeof(id), c->sid, b->token) < 0)
		return -EINVAL;
	return gm_remote_tls_worker_key(c->xs, id, &b->key);
}

/* The check process of l, a new job from home c, on in (its blob but the
 * home's address, which is c's address and the home's port): started on a
 * memfd, l then used and checking (answered when the check ends). LC_OK, or
 * LC_FAILED (logged). */
static enum lc_kind check_exec(struct gm_remote *r, struct ljob *l, struct conn *c,
			       struct lcheck_in *in, uint32_t port, uint32_t workers)
{
	snprintf(in->b.home_addr, sizeof(in->b.home_addr), strchr(c->ip, ':') ? "[%s]:%u" : "%s:%u",
		 c->ip, port);
	int fd = memfd_create("goldminer-lend-check", MFD_CLOEXEC);
	pid_t pid = -1;
	if (fd >= 0 && pwrite(fd, in, sizeof(*in), 0) == (ssize_t)sizeof(*in))
		pid = exec_self(r, fd, "--lend-check");
	if (pid < 0) {
		gm_remote_logf(&r->net, "job %016" PRIx64 ": cannot start its check: %s",
			       in->b.token, strerror(errno));
		if (fd >= 0)
			close(fd);
		return LC_FAILED;
	}
	l->blob = in->b;
	if (worker_key(c, &l->blob)) { /* the workers' own, not the check's */
		gm_remote_logf(&r->net, "job %016" PRIx64 ": no key for its workers", in->b.token);
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		close(fd);
		return LC_FAILED;
	}
	l->token = in->b.token;
	snprintf(l->home_addr, sizeof(l->home_addr), "%s", in->b.home_addr);
	l->home = c;
	l->used = l->checking = true;
	l->check_pid = pid;
	l->check_fd = fd;
	l->check_end = gm_now_ms() + r->lend_index_ms;
	l->want = workers;
	return LC_OK;
}

/* A new lent job: its root matched by words, then the check process started.
 * LC_OK (answered when the check ends), or why it is refused at once. */
static enum lc_kind check_start(struct gm_remote *r, struct ljob *l, struct conn *c,
				const struct m_lend *m, const struct gm_node_req *req)
{
	struct lcheck_in in = {.magic = MSG_MAGIC, .max_files = r->lend_max_files};
	char path[sizeof(req->root)], shown[208];
	int w = -1;
	if (!gm_lendroot_normalise(req->root, path, sizeof(path)))
		w = gm_lendroot_find((const char *const *)r->lend_words, r->nlend_words, path);
	if (w < 0) {
		printable(shown, sizeof(shown), req->root);
		gm_remote_logf_from(&r->net, c->ip,
				    "job %016" PRIx64
				    " from %s: refused: '%s' is not below a --lend-root",
				    m->token, c->ip, shown);
		return LC_NOT_LENDABLE;
	}
	if (checks_running(r) >= LEND_CHECKS)
		return LC_BUSY;
	in.b = (struct wblob){.magic = MSG_MAGIC,
			      .version = MSG_VERSION,
			      .size = sizeof(struct wblob),
			      .token = m->token,
			      .fingerprint = m->fingerprint,
			      .nsamples = m->nsamples,
			      .bpe = m->bpe,
			      .lease_ms = m->lease_ms,
			      .lport = r->port,
			      .unguarded = r->net.unguarded_ok,
			      .req = *req};
	copy_str(in.b.req.root, sizeof(in.b.req.root), path);
	copy_str(in.lend_root, sizeof(in.lend_root), r->lend_canon[r->lend_of[w]]);
	return check_exec(r, l, c, &in, m->port, m->workers);
}

/* A check that ended (st its wait status) or ran out of time: the LEND answered. */
static void check_done(struct gm_remote *r, struct ljob *l, int st, bool late)
{
	struct lcheck_out o = {0};
	enum lc_kind k = LC_SLOW;
	if (!late && (!WIFEXITED(st) || WEXITSTATUS(st) ||
		      pread(l->check_fd, &o, sizeof(o), OUT_AT) != (ssize_t)sizeof(o) ||
		      o.magic != MSG_MAGIC || o.kind > LC_FAILED)) {
		k = LC_FAILED;
		snprintf(o.detail, sizeof(o.detail), "its check process ended (status %#x)", st);
	} else if (!late) {
		k = o.kind;
	} else {
		snprintf(o.detail, sizeof(o.detail), "not indexed within %u ms (--lend-index-ms)",
			 r->lend_index_ms);
	}
	o.detail[sizeof(o.detail) - 1] = o.root[sizeof(o.root) - 1] = '\0';
	if (k != LC_OK) {
		gm_remote_logf_from(&r->net, l->home->ip,
				    "job %016" PRIx64 " from %s: refused (%s): %s", l->token,
				    l->home->ip, lc_words[k], o.detail);
		refuse(l->home, l->token, k);
		gm_remote_lend_end(l); /* a late one still runs: killed, reaped later */
		return;
	}
	close(l->check_fd);
	l->checking = false;
	if (!l->blob.py)
		copy_str(l->blob.req.root, sizeof(l->blob.req.root), o.root);
	gm_remote_logf_from(&r->net, l->home->ip,
			    "job %016" PRIx64 " from %s: %s, up to %u workers", l->token,
			    l->home->ip, l->blob.py ? "Python workers" : o.root, l->want);
	grant(r, l, l->want);
}

static void checks_tick(struct gm_remote *r, int64_t now)
{
	for (int i = 0; i < MAX_LJOBS; i++) {
		struct ljob *l = &r->ljobs[i];
		if (!l->used || !l->checking || !l->home || l->home->st == C_DEAD)
			continue; /* a gone home: the tick ends the job, and its check */
		int st = 0;
		pid_t pid = waitpid(l->check_pid, &st, WNOHANG);
		if (pid == l->check_pid || pid < 0) {
			l->check_pid = 0; /* reaped (or not ours any more): never signalled */
			check_done(r, l, pid < 0 ? 0x7f00 : st, false);
		} else if (now >= l->check_end)
			check_done(r, l, 0, true);
	}
}

/* A valid LEND or Python LEND for (c, token), answered here (NULL back) when
 * it asks nothing of a new job: an end for a job not known, no room for a new
 * one, a job whose check is still running, a running job's new count. A new
 * job's free entry comes back for the caller to start its check (a C and a
 * Python job are checked differently). */
static struct ljob *lend_known(struct gm_remote *r, struct conn *c, uint64_t token,
			       uint32_t workers)
{
	struct m_lent a = {.token = token};
	struct ljob *l = ljob_for(r, c, token, workers > 0);
	if (!l) {
		gm_remote_conn_send(c, AM_LENT, &a, sizeof(a), NULL, 0);
		return NULL;
	}
	if (!l->used)
		return l;
	if (l->checking) { /* asked again meanwhile: the answer is still to come */
		l->want = workers;
		if (!workers) {
			gm_remote_lend_end(l);
			gm_remote_conn_send(c, AM_LENT, &a, sizeof(a), NULL, 0);
		}
		return NULL;
	}
	grant(r, l, workers);
	gm_remote_lend_tick(r, gm_now_ms());
	if (!workers) /* (its home may ask again: its spec is kept) */
		end_keeping_spec(r, l);
	return NULL;
}

/* A lend request that did not pass its check (rc, why): one of another
 * goldminer version is refused in words (its header's layout is this build's,
 * so its token can be answered), a malformed one ends the connection. false
 * when it passed. */
static bool skewed_or_malformed(struct gm_remote *r, struct conn *c, uint64_t token, int rc,
				const char *why)
{
	if (rc == -EPROTONOSUPPORT) {
		gm_remote_logf(&r->net, "job %016" PRIx64 " from %s: refused: %s", token, c->ip,
			       why);
		refuse(c, token, LC_GM_VERSION);
	} else if (rc)
		gm_remote_conn_kill(c, "%s: malformed lend request: %s", c->ip, why);
	return rc != 0;
}

void gm_remote_lend_on_lend(struct gm_remote *r, struct conn *c, const struct m_lend *m,
			    const void *data, size_t len)
{
	struct gm_node_req req;
	char why[256] = "not from an agent";
	int rc = c->role != ROLE_AGENT ? -EBADMSG
				       : gm_remote_check_lend(m, data, len, &req, why, sizeof(why));
	if (skewed_or_malformed(r, c, m->token, rc, why))
		return;
	struct ljob *l = lend_known(r, c, m->token, m->workers);
	if (!l)
		return;
	enum lc_kind k = check_start(r, l, c, m, &req); /* answered when it ends */
	if (k != LC_OK)
		refuse(c, m->token, k);
}

/* ---- a Python job (AM_PYLEND; pyhome.c at the home, pywork.c its workers) ----- */

/* A Python LEND's words: --lend-python, the same goldminer, every root below
 * a lend root by its words (each one's canonical lend root into in). */
static enum lc_kind py_words(struct gm_remote *r, struct conn *c, const struct m_pylend *m,
			     const struct gm_node_req *req, struct lcheck_in *in)
{
	struct gm_remote_py_facts f;
	char why[256], path[PATH_MAX];
	enum lc_kind k = LC_OK;
	int rc = gm_remote_py_facts(req->root, sizeof(req->root), &f, why, sizeof(why));
	if (!r->lend_python)
		k = LC_NO_PYTHON;
	else if (strcmp(m->gm, gm_version()))
		k = LC_GM_VERSION;
	else if (rc)
		k = rc == -ENOENT ? LC_NOT_LENDABLE : LC_OPTIONS;
	for (int q = 0; k == LC_OK && q < f.nroots; q++) {
		int w = -1;
		if (!gm_lendroot_normalise(f.roots[q], path, sizeof(path)))
			w = gm_lendroot_find((const char *const *)r->lend_words, r->nlend_words,
					     path);
		if (w < 0)
			k = LC_NOT_LENDABLE;
		else
			copy_str(in->py_lend[q], sizeof(in->py_lend[q]),
				 r->lend_canon[r->lend_of[w]]);
	}
	if (k == LC_OK && checks_running(r) >= LEND_CHECKS)
		k = LC_BUSY;
	if (k != LC_OK)
		gm_remote_logf_from(&r->net, c->ip,
				    "Python job %016" PRIx64 " from %s: refused: %s%s%s", m->token,
				    c->ip, lc_words[k], rc ? ": " : "", rc ? why : "");
	return k;
}

/* The check process of a Python job (as check_start's) once py_words pass
 * and the spec came with the LEND (spec NULL: it was named only, and this
 * agent, which would lend the job, does not hold it: LC_SPEC, the home sends
 * it). LC_OK (answered when the check ends), or why not at once. */
static enum lc_kind py_check_start(struct gm_remote *r, struct ljob *l, struct conn *c,
				   const struct m_pylend *m, const struct gm_node_req *req,
				   const void *spec)
{
	struct lcheck_in *in = calloc(1, sizeof(*in));
	if (!in)
		return LC_FAILED;
	*in = (struct lcheck_in){.magic = MSG_MAGIC, .max_files = r->lend_max_files};
	enum lc_kind k = py_words(r, c, m, req, in);
	unsigned char *kept =
	    k == LC_OK && !spec ? spec_take(r, c, m->token, m->spec_hash, m->spec_len) : NULL;
	if (k == LC_OK && !spec && !kept)
		k = LC_SPEC;
	if (k != LC_OK)
		goto out_free;
	in->b = (struct wblob){.magic = MSG_MAGIC,
			       .version = MSG_VERSION,
			       .size = sizeof(struct wblob),
			       .token = m->token,
			       .lease_ms = m->lease_ms,
			       .lport = r->port,
			       .unguarded = r->net.unguarded_ok,
			       .req = *req,
			       .py = 1,
			       .rows = m->rows,
			       .sample_bytes = m->sample_bytes,
			       .spec_len = m->spec_len};
	l->spec = kept ? kept : malloc(m->spec_len);
	kept = NULL;
	if (!l->spec) {
		gm_remote_logf_from(&r->net, c->ip,
				    "job %016" PRIx64 ": cannot start its check: %s", m->token,
				    strerror(ENOMEM));
		k = LC_FAILED;
		goto out_free;
	}
	k = check_exec(r, l, c, in, m->port, m->workers);
	if (k != LC_OK) {
		free(l->spec);
		l->spec = NULL;
		goto out_free;
	}
	if (spec)
		memcpy(l->spec, spec, m->spec_len);
	memcpy(l->spec_hash, m->spec_hash, sizeof(l->spec_hash));
out_free:
	free(kept);
	free(in);
	return k;
}

void gm_remote_lend_on_pylend(struct gm_remote *r, struct conn *c, const struct m_pylend *m,
			      const void *data, size_t len)
{
	struct gm_node_req req;
	char why[256] = "not from an agent";
	int rc = c->role != ROLE_AGENT
		     ? -EBADMSG
		     : gm_remote_check_pylend(m, data, len, &req, why, sizeof(why));
	if (skewed_or_malformed(r, c, m->token, rc, why))
		return;
	const unsigned char *spec = len > sizeof(req) ? (const unsigned char *)data + sizeof(req)
						      : NULL; /* else named only: its hash */
	uint8_t md[PY_SPEC_HASH];
	if (spec && (!EVP_Digest(spec, m->spec_len, md, NULL, EVP_sha256(), NULL) ||
		     memcmp(md, m->spec_hash, sizeof(md)))) {
		gm_remote_conn_kill(
		    c, "%s: a Python lend request whose spec is not the one it names", c->ip);
		return;
	}
	/* a job lent here already holds its spec (ljob's, kept while it is lent) */
	struct ljob *l = lend_known(r, c, m->token, m->workers);
	if (!l)
		return;
	enum lc_kind k = py_check_start(r, l, c, m, &req, spec); /* answered when it ends */
	if (k != LC_OK)
		refuse(c, m->token, k);
}

/* ---- --lend-root ------------------------------------------------------------- */

int gm_remote_lend_root(struct gm_remote *r, const char *dir, char *err, size_t errlen)
{
	char canon[PATH_MAX], given[PATH_MAX];
	if (r->nlend_canon == GM_LEND_MAX_ROOTS) {
		gm_errf(err, errlen, "--lend-root: at most %d directories", GM_LEND_MAX_ROOTS);
		return -EINVAL;
	}
	int rc = gm_lendroot_canon(dir, canon, sizeof(canon), err, errlen);
	if (rc)
		return rc;
	int i = r->nlend_canon;
	if (!(r->lend_canon[i] = strdup(canon)))
		return -ENOMEM;
	r->nlend_canon++;
	/* matched as given too (a symlink on this host): the check's realpath must
	 * still land below the canonical root */
	bool other = !gm_lendroot_normalise(dir, given, sizeof(given)) && strcmp(given, canon);
	for (int k = 0; k < 1 + other; k++) {
		if (!(r->lend_words[r->nlend_words] = strdup(k ? given : canon)))
			return -ENOMEM;
		r->lend_of[r->nlend_words++] = i;
	}
	return 0;
}

void gm_remote_lend_fini(struct gm_remote *r)
{
	for (int k = 0; k < SPEC_KEPT; k++)
		spec_drop(&r->specs[k]);
	for (int i = 0; i < r->nlend_canon; i++)
		free(r->lend_canon[i]);
	for (int k = 0; k < r->nlend_words; k++)
		free(r->lend_words[k]);
}
