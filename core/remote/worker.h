/*
 * worker.h - the remote worker process (worker.c): `goldminer node
 * --remote-worker FD`, which a lending agent execs for a peer's job.
 *
 * The idea: the process owns its own connection layer (conn.h), the lease it
 * makes and the one it asked for ahead, nothing of an agent's state; the lender and the worker
 * build the job's configuration from the same blob (msg.h) with the same function, so the lender
 * refuses in words what the worker would fail on; the home computes what a lease must carry from
 * the batches of the same function (gm_remote_job_batches, over its own index).
 *
 * Not here: forking and retiring workers (lender.c).
 */
#ifndef GM_REMOTE_WORKER_H
#define GM_REMOTE_WORKER_H

#include <stddef.h>

#include "goldminer/pool.h"
#include "msg.h"

struct gm_dataset;
struct gm_node_req;

/* The batches of the job that req describes, over index ds: its worker
 * configuration (pc->w: seed, epochs, batch, permutation), as the home's pool
 * makes them. 0 or -errno with why. */
int gm_remote_job_batches(const struct gm_node_req *req, const struct gm_dataset *ds,
			  struct gm_pool_cfg *pc, char *why, size_t wl);

/* A job's worker configuration from its blob: the same dataset path here, its
 * fingerprint equal to the home's. 0 or -errno with why (*ds then NULL). */
int gm_remote_worker_job_cfg(struct gm_dataset **ds, struct gm_pool_cfg *pc, const struct wblob *b,
			     char *why, size_t wl);

/* CAP_NET_ADMIN given up for good (effective, permitted, inheritable,
 * ambient; the bounding set where CAP_SETPCAP allows): the agent may hold it
 * to guard UCX's ports (ctl.h), and a remote worker needs it only until its
 * one UCP worker is guarded, not while it decodes a peer's files or runs a
 * peer's pickles. Nothing else changes (root stays root). */
void gm_remote_worker_drop_admin(void);

/* Run one remote worker from the blob on fd until retired or cut off. 0, or
 * -errno (said on stderr). */
int gm_remote_worker_main(int fd);

/* A Python job's remote worker (pywork.c): blob b read from fd, whose spec
 * follows it in fd (closed here). 0, or -errno (said on stderr). */
int gm_remote_pywork_main(const struct wblob *b, int fd);

#ifdef GM_REMOTE_TESTING
/* The test build (worker.c): is $GOLDMINER_REMOTE_MISBEHAVE mode, and this
 * worker the one to misbehave now (with $GOLDMINER_REMOTE_MISBEHAVE_ONCE=FILE
 * only the first to make FILE; said on stderr)? pywork.c's py-* modes. */
#include <stdbool.h>
bool gm_remote_misbehave(const char *mode);
#endif

#endif
