/*
 * lender.c - the lender's side of the remote plugin (agent.h): a peer's jobs
 * that this agent lends workers to, and the remote worker processes it runs
 * for them.
 *
 * The idea: a LEND names the job (its ATTACH request, dataset fingerprint and
 * the home's port); the lender opens the same dataset path here, checks the
 * fingerprint and the job's batches with the worker's own function
 * (gm_remote_worker_job_cfg), so that it refuses in words what a worker would
 * fail on, then keeps the job at min(asked, what its idle budget allows)
 * worker processes. Each is this program exec'ed afresh (UCX's process-wide
 * state does not survive a fork) with its blob on fd 3, at nice
 * GM_NODE_LENT_NICE, killed with the agent (PR_SET_PDEATHSIG). Retiring is
 * SIGUSR1 (the batch in hand is finished first); a job whose home is gone
 * ends at once (SIGKILL).
 *
 * Not here: the worker process itself (worker.c), the connections (conn.c).
 */

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent.h"
#include "conn.h"
#include "goldminer/dataset.h"
#include "goldminer/node.h"
#include "msg.h"
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
}

void gm_remote_lend_end(struct ljob *l)
{
	for (uint32_t i = 0; i < l->n; i++) {
		kill(l->pid[i], SIGKILL);
		forget(l->pid[i]);
	}
	l->n = 0;
	gm_dataset_close(l->ds);
	memset(l, 0, sizeof(*l));
}

static void spawn(struct gm_remote *r, struct ljob *l)
{
	int fd = memfd_create("goldminer-remote-worker", MFD_CLOEXEC);
	if (fd < 0 || pwrite(fd, &l->blob, sizeof(l->blob), 0) != (ssize_t)sizeof(l->blob)) {
		gm_remote_logf(&r->net, "cannot start a remote worker: memfd: %s", strerror(errno));
		if (fd >= 0)
			close(fd);
		return;
	}
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* survives the exec */
		if (getppid() != parent || dup2(fd, 3) != 3)
			_exit(127);
		close_range(4, ~0u, 0); /* not the agent's sockets */
		(void)setpriority(PRIO_PROCESS, 0, GM_NODE_LENT_NICE);
		char *argv[] = {"goldminer", "node", "--remote-worker", "3", NULL};
		execv(r->exe, argv);
		_exit(127);
	}
	close(fd);
	if (pid > 0)
		l->pid[l->n++] = pid;
	else
		gm_remote_logf(&r->net, "fork of a remote worker failed: %s", strerror(errno));
}

/* Reap exited workers; keep each lent job at its target within what may be lent. */
void gm_remote_lend_tick(struct gm_remote *r, int64_t now)
{
	reap_retired();
	/* only our own children: the pools' workers are reaped by their pidfds */
	for (int i = 0; i < MAX_LJOBS; i++) {
		struct ljob *l = &r->ljobs[i];
		for (uint32_t k = 0; l->used && k < l->n;) {
			int st;
			pid_t pid = waitpid(l->pid[k], &st, WNOHANG);
			if (pid != l->pid[k] && !(pid < 0 && errno == ECHILD)) {
				k++;
				continue;
			}
			if (pid > 0 && (!WIFEXITED(st) || WEXITSTATUS(st)))
				gm_remote_logf(&r->net,
					       "remote worker %d for job %016" PRIx64
					       " ended (status %#x)",
					       (int)l->pid[k], l->token, st);
			else if (pid > 0 && l->target) /* no task left: not started again */
				l->target--;
			l->pid[k] = l->pid[--l->n];
		}
	}
	uint32_t total = gm_remote_lend_total(r);
	for (int i = 0; i < MAX_LJOBS; i++) {
		struct ljob *l = &r->ljobs[i];
		if (!l->used)
			continue;
		if (!l->home || l->home->st == C_DEAD) {
			gm_remote_logf(&r->net,
				       "job %016" PRIx64
				       ": its home agent is gone; its remote workers stop",
				       l->token);
			gm_remote_lend_end(l);
			continue;
		}
		while (l->n > l->target || (total > r->lendable && l->n)) {
			retire_one(l);
			total--;
		}
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

static int ljob_open(struct gm_remote *r, struct ljob *l, struct conn *c, const struct m_lend *m,
		     const struct gm_node_req *req, char *why, size_t wl)
{
	struct wblob *b = &l->blob;
	*b = (struct wblob){.magic = MSG_MAGIC,
			    .version = MSG_VERSION,
			    .token = m->token,
			    .fingerprint = m->fingerprint,
			    .nsamples = m->nsamples,
			    .bpe = m->bpe,
			    .lease_ms = m->lease_ms,
			    .key = r->net.key,
			    .req = *req};
	snprintf(b->home_addr, sizeof(b->home_addr), strchr(c->ip, ':') ? "[%s]:%u" : "%s:%u",
		 c->ip, m->port);
	int rc = gm_remote_worker_job_cfg(&l->ds, &l->pc, b, why, wl);
	if (rc)
		return rc;
	l->token = b->token;
	snprintf(l->home_addr, sizeof(l->home_addr), "%s", b->home_addr);
	l->home = c;
	l->used = true;
	return 0;
}

void gm_remote_lend_on_lend(struct gm_remote *r, struct conn *c, const struct m_lend *m,
			    const void *data, size_t len)
{
	struct m_lent a = {.token = m->token};
	struct gm_node_req req;
	if (c->role != ROLE_AGENT || len != sizeof(req) || m->workers > GM_MAX_WORKERS ||
	    !m->port || m->port > 65535) {
		gm_remote_conn_kill(c, "%s: malformed lend request", c->ip);
		return;
	}
	memcpy(&req, data, sizeof(req));
	req.root[sizeof(req.root) - 1] = '\0';
	struct ljob *l = ljob_for(r, c, m->token, m->workers > 0);
	if (!l) {
		gm_remote_conn_send(c, AM_LENT, &a, sizeof(a), NULL, 0);
		return;
	}
	if (!l->used) {
		int rc = ljob_open(r, l, c, m, &req, a.msg, sizeof(a.msg));
		if (rc) {
			a.status = rc;
			gm_remote_logf(&r->net, "job %016" PRIx64 " from %s: %s", m->token, c->ip,
				       a.msg);
			gm_remote_conn_send(c, AM_LENT, &a, sizeof(a), NULL, 0);
			return;
		}
		gm_remote_logf(&r->net, "job %016" PRIx64 " from %s: %s, up to %u workers",
			       m->token, c->ip, req.root, m->workers);
	}
	uint32_t others = gm_remote_lend_total(r) - l->n;
	uint32_t room = r->lendable > others ? r->lendable - others : 0;
	l->target = m->workers < room ? m->workers : room;
	gm_remote_lend_tick(r, now_ms());
	a.granted = l->target;
	gm_remote_conn_send(c, AM_LENT, &a, sizeof(a), NULL, 0);
	if (!m->workers)
		gm_remote_lend_end(l);
}
