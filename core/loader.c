/*
 * loader.c - the consumer (see loader.h): it reads batches from the job's ring in
 * task order and hands out zero-copy views of them.
 *
 * The loader finds its ring one of two ways and then forgets which: with its
 * workers here it makes a worker pool (pool.c: ring, coordinator thread, workers)
 * and reads the pool's ring; with opts.node it attaches to the node agent
 * (wire.c), which makes the pool there and sends the ring back as a memfd that is
 * mapped and validated here (and if that agent goes away, this process's own
 * workers go on with its ring until another adopts it: "the node agent gone"
 * below). Either way the consumer (consumer.c, embedded) waits
 * on the ring, gives slots back in order and keeps batches; this file validates
 * what the workers wrote and counts it. Task t is batch
 * (epoch0 + t / batches_per_epoch, t % batches_per_epoch). A shuffle_buffer op is
 * run here, in the consumer, on copies (contract 4).
 * It does not fork or reap (pool.c), decode (worker.c), move leases (ring.c),
 * size pools (elastic.c) or parse pipelines (pipeline.c).
 */
#include "goldminer/loader.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "goldminer/aug.h"
#include "goldminer/coef.h"
#include "goldminer/consumer.h"
#include "goldminer/cuda.h"
#include "goldminer/dataset.h"
#include "goldminer/elastic.h"
#include "goldminer/limits.h"
#include "goldminer/pipeline.h"
#include "goldminer/pool.h"
#include "goldminer/ring.h"
#include "goldminer/rng.h"
#include "goldminer/wire.h"
#include "goldminer/util.h"
#include "goldminer/worker.h"

#include "coef_device.h"

struct err_rec {
	uint32_t sample;
	char msg[GM_RING_MSG];
};

struct gm_loader {
	struct gm_loader_opts o; /* its strings point into `own` (copies: a caller, the
				  * Python binding say, may free its own after open) */
	char *own[3];		 /* root, pipeline, node as copied (or NULL) */
	uint32_t *own_order;	 /* opts.order as copied (or NULL) */
	char errmsg[512];
	struct gm_dataset *ds;
	struct gm_pool *pool; /* workers in this process, else NULL */
	int sock;	      /* workers in the node agent: the connection, else -1 */
	/* The node agent gone: our own workers over its ring (take_over), until an
	 * agent is back on the socket and adopts the ring (reattach). */
	struct gm_pool *fallback;
	struct gm_pool_cfg pcfg;   /* the pool a loader of its own would make */
	struct gm_ring *ring;	   /* the pool's, or the agent's mapped here (then ours) */
	struct gm_ring_hdr *h;	   /* shared counters and the pool's fatal error */
	struct gm_consumer c;	   /* the wait, give-back, kept batches, pin (consumer.h) */
	bool has_c;		   /* c was initialised */
	struct gm_worker_cfg wcfg; /* the task -> (epoch, batch) mapping */
	size_t sample_bytes;
	uint32_t bpe;		    /* batches per epoch */
	uint64_t first;		    /* the first task (then c.next: the next to deliver) */
	uint64_t end;		    /* GM_RING_NO_END or one past the last task */
	int held;		    /* slot of the batch the user holds (not kept), or -1 */
	struct gm_aug *fin;	    /* gpu_decode: gm_loader_finish's (made at its first call) */
	struct gm_coef_device *dev; /* gpu_decode: gm_loader_finish_device's (likewise) */
	bool stopped;		    /* gm_loader_stop: no workers, mapping kept */

	/* shuffle_buffer N in the consumer (contract 4: stateful ops stay here) */
	uint32_t shuf_cap; /* N; 0 = no shuffle buffer */
	uint32_t shuf_n;   /* samples in the pool */
	uint8_t *shuf_px;  /* pool: shuf_cap samples, then labels and ids */
	int32_t *shuf_lab;
	uint32_t *shuf_id;
	uint8_t *out_px; /* the delivered batch (a copy: the pool reorders) */
	int32_t *out_lab;
	uint32_t *out_id;
	size_t shuf_bytes;  /* mapping size of shuf_px + out_px */
	struct gm_batch up; /* upstream ring batch being drained */
	uint32_t up_pos;    /* next sample of `up` to take */
	bool up_valid, up_epoch_done, up_end, shuf_eoe;
	uint64_t out_k, out_epoch, out_draws;
	uint32_t out_fill; /* samples of out_* drawn by a call that then failed (-EINTR) */
	bool eoe_pending;  /* END_OF_EPOCH owed before the next batch */

	/* counters (consumer thread) */
	uint64_t batches, samples, first_samples;
	uint64_t t_first, t_last;
	uint64_t read_ns, decode_ns, augment_ns, write_ns;
	uint64_t read_bytes;  /* gm_loader_read_bytes */
	uint64_t preempt_ns;  /* gm_loader_preempt_ns */
	uint64_t stale;	      /* gm_loader_stale_index */
	uint64_t *stale_told; /* one bit a sample: its stale row index was logged */
	struct err_rec *errs;
	uint64_t n_errs, cap_errs;
	uint64_t errors; /* exact count; the listing keeps GM_RING_MAX_ERRS a batch */
};

static int set_err(struct gm_loader *l, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int set_err(struct gm_loader *l, int err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	gm_verrf(l->errmsg, sizeof(l->errmsg), fmt, ap); /* a long path loses its middle */
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

/* ---- open / close -------------------------------------------------------------- */

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
		return set_err(l, -ENOMEM, "gm_loader_open: shuffle_buffer %u x %zu bytes: %s",
			       l->shuf_cap, sb, strerror(errno));
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

/* A pipeline spec: the workers' transform and batch size; the consumer runs
 * shuffle_buffer (and the batch op after it) itself; anything else past the cut
 * has no consumer implementation. */
static int apply_pipeline(struct gm_loader *l)
{
	struct gm_pipeline *p;
	char why[512];
	int err = gm_pipeline_parse(l->o.pipeline, &p, why, sizeof(why));
	if (err)
		return set_err(l, err, "gm_loader_open: %s", why);
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
			return err;
		}
	}
	l->o.aug = *gm_pipeline_aug(p);
	if (gm_pipeline_batch_size(p))
		l->o.batch_size = gm_pipeline_batch_size(p);
	gm_pipeline_free(p);
	return 0;
}

/* The options alone: root, pipeline, workers, batch size and transform. */
static int check_opts(struct gm_loader *l)
{
	char why[512];
	int err;

	if (!l->o.root || !*l->o.root)
		return set_err(l, -EINVAL, "gm_loader_open: no dataset root given");
	if (l->o.pipeline) { /* "" is an error (the parser says so), not the default */
		err = apply_pipeline(l);
		if (err)
			return err;
	}
	if (l->o.workers < 0 || l->o.workers > GM_MAX_WORKERS)
		return set_err(l, -EINVAL, "gm_loader_open: workers must be 0..%d, not %d",
			       GM_MAX_WORKERS, l->o.workers);
	err = gm_pool_check(&l->o, why, sizeof(why));
	if (err)
		return set_err(l, err, "gm_loader_open: %s", why);
	l->sample_bytes = gm_aug_out_bytes(&l->o.aug);
	if (l->o.gpu_decode)
		l->sample_bytes = gm_coef_slot_bytes(l->sample_bytes);
	return 0;
}

/* Every id of an explicit order names a sample of the index. 0 or -EINVAL. */
static int check_order(struct gm_loader *l)
{
	uint32_t n = gm_dataset_count(l->ds);
	for (uint32_t i = 0; l->o.order && i < l->o.order_len; i++)
		if (l->o.order[i] >= n)
			return set_err(l, -EINVAL,
				       "gm_loader_open: order[%u] = %u, but %s has %u samples "
				       "(ids 0..%u)",
				       i, l->o.order[i], l->o.root, n, n ? n - 1 : 0);
	return 0;
}

/* The index, the task range and the shuffle buffer. */
static int open_index(struct gm_loader *l, struct gm_pool_cfg *c)
{
	char why[512];
	int err = gm_dataset_open(&l->ds, l->o.root, why, sizeof(why));
	if (!err && check_order(l))
		return -EINVAL;
	if (!err)
		err = gm_pool_tasks(&l->o, l->ds, &l->bpe, &l->first, &l->end, why, sizeof(why));
	if (err)
		return set_err(l, err, "gm_loader_open: %s", why);
	gm_pool_cfg_init(c, &l->o, l->ds, l->bpe, l->first, l->end);
	l->wcfg = c->w;
	l->pcfg = *c;

	/* The pool drains every epoch: more than an epoch's samples would never fill. */
	uint32_t n = l->o.order ? l->o.order_len : gm_dataset_count(l->ds);
	if (l->shuf_cap > n)
		l->shuf_cap = n;
	if (l->shuf_cap) {
		if (l->o.start_batch)
			return set_err(l, -EINVAL,
				       "gm_loader_open: with shuffle_buffer a loader "
				       "resumes at an epoch start only (start_batch 0)");
		return shuf_alloc(l);
	}
	return 0;
}

/* The consumer over l->ring, the ring pinned for the GPU where one is usable
 * (before any fork: the workers inherit the registration's pages). */
static int start_consumer(struct gm_loader *l)
{
	l->h = gm_ring_hdr(l->ring);
	if (gm_consumer_init(&l->c, l->ring, l->first))
		return set_err(l, -ENOMEM, "gm_loader_open: out of memory");
	l->has_c = true;
	l->c.agent_fd = l->sock;
	if (!l->o.no_pin)
		gm_consumer_pin(&l->c); /* no GPU: stats say pinned = false */
	return 0;
}

/* Workers here: a pool of our own (workers = 0: sized by the elastic controller
 * within max_workers, starting from two). The ring is pinned before any fork. */
static void size_pool(const struct gm_loader *l, struct gm_pool_cfg *c)
{
	uint32_t budget = l->o.max_workers;
	if (!budget) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		budget = n > 0 ? (uint32_t)n : 1;
	}
	if (budget > GM_MAX_WORKERS)
		budget = GM_MAX_WORKERS;
	if (l->o.workers == 0) {
		c->autoscale = true;
		c->budget = budget;
		c->workers = budget < 2 ? (int)budget : 2; /* then measured */
	}
}

static int start_pool(struct gm_loader *l, struct gm_pool_cfg *c)
{
	char why[512];
	size_pool(l, c);
	int err = gm_pool_create(&l->pool, c, why, sizeof(why));
	if (err)
		return set_err(l, err, "gm_loader_open: %s", why);
	l->ring = gm_pool_ring(l->pool);
	err = start_consumer(l);
	if (err)
		return err;
	err = gm_pool_start(l->pool, why, sizeof(why));
	if (err)
		return set_err(l, err, "gm_loader_open: %s", why);
	return 0;
}

static int client_attach(struct gm_loader *l);

/* Copy every string of the options the loader keeps past open (messages print
 * root long after; client_attach connects to node), and the explicit order (the
 * workers read it all along), so the caller's need not outlive this call. */
static int copy_strings(struct gm_loader *l)
{
	const char **field[3] = {&l->o.root, &l->o.pipeline, &l->o.node};
	for (int i = 0; i < 3; i++) {
		if (!*field[i])
			continue;
		l->own[i] = strdup(*field[i]);
		if (!l->own[i])
			return set_err(l, -ENOMEM, "gm_loader_open: out of memory");
		*field[i] = l->own[i];
	}
	if (l->o.order) {
		if (!l->o.order_len || (l->o.node && *l->o.node))
			return set_err(l, l->o.order_len ? -ENOTSUP : -EINVAL, "gm_loader_open: %s",
				       l->o.order_len
					   ? "an explicit order (opts.order) is made by "
					     "workers here only, not by a node agent's: "
					     "open it without node"
					   : "an explicit order of 0 samples (order_len)");
		l->own_order = malloc((size_t)l->o.order_len * sizeof(*l->own_order));
		if (!l->own_order)
			return set_err(l, -ENOMEM, "gm_loader_open: out of memory");
		memcpy(l->own_order, l->o.order, (size_t)l->o.order_len * sizeof(*l->own_order));
		l->o.order = l->own_order;
	}
	return 0;
}

int gm_loader_open(struct gm_loader **out, const struct gm_loader_opts *opts, char *errbuf,
		   size_t errlen)
{
	struct gm_loader *l;
	struct gm_pool_cfg c;
	int err;

	*out = NULL;
	l = calloc(1, sizeof(*l));
	if (!l) {
		if (errbuf && errlen)
			gm_errf(errbuf, errlen, "gm_loader_open: out of memory");
		return -ENOMEM;
	}
	l->o = *opts;
	l->held = -1;
	l->sock = -1;
	err = copy_strings(l);
	if (!err)
		err = check_opts(l);
	if (!err)
		err = open_index(l, &c);
	if (!err)
		err = l->o.node && *l->o.node ? client_attach(l) : start_pool(l, &c);
	if (err) {
		if (errbuf && errlen)
			gm_errf(errbuf, errlen, "%s", l->errmsg);
		gm_loader_close(l); /* undoes whatever was made */
		return err;
	}
	*out = l;
	return 0;
}

/* ---- client of a node agent --------------------------------------------------- */

/* The ring the agent sent must be the one asked for, over the same files. */
static int check_agent_ring(struct gm_loader *l, const struct gm_node_reply *rep)
{
	if (l->h->batch_size != l->o.batch_size || l->h->sample_bytes != l->sample_bytes ||
	    l->h->first_task != l->first || l->h->end_task != l->end ||
	    rep->batches_per_epoch != l->bpe)
		return set_err(l, -EPROTO,
			       "gm_loader_open: the node agent's ring does not match "
			       "the request (batch, sample size or range)");
	if (rep->fingerprint != gm_dataset_fingerprint(l->ds))
		return set_err(l, -ESTALE,
			       "gm_loader_open: %s: the node agent sees other files than this "
			       "process (dataset changed, or another mount)",
			       l->o.root);
	return 0;
}

/* Send req on the agent connection; a wire error becomes fn's message. */
static int agent_call(struct gm_loader *l, const char *fn, const struct gm_node_req *req,
		      struct gm_node_reply *rep, int *fd_out)
{
	int err = gm_wire_call(l->sock, req, rep, fd_out);
	if (err == -EPIPE)
		return set_err(l, err, "%s: the node agent closed the connection", fn);
	if (err == -EPROTONOSUPPORT)
		return set_err(l, err,
			       "%s: the node agent speaks goldminer node protocol version %u, "
			       "this process version %d (different goldminer builds: run the "
			       "agent of this build)",
			       fn, rep->version, GM_NODE_VERSION);
	if (err)
		return set_err(l, err, "%s: malformed reply from the node agent", fn);
	if (rep->status)
		return set_err(l, rep->status, "%s: node agent: %s", fn, rep->msg);
	return 0;
}

static int client_attach(struct gm_loader *l)
{
	struct gm_node_req req;
	struct gm_node_reply rep = {0};
	char why[512];
	int ring_fd = -1, err;

	if (gm_wire_attach_request(&req, &l->o))
		return set_err(l, -ENAMETOOLONG, "gm_loader_open: dataset path too long");
	l->sock = gm_wire_connect(l->o.node, why, sizeof(why));
	if (l->sock < 0) {
		err = l->sock;
		l->sock = -1;
		return set_err(l, err, "gm_loader_open: %s", why);
	}
	err = agent_call(l, "gm_loader_open", &req, &rep, &ring_fd);
	if (!err && ring_fd < 0)
		err = set_err(l, -EPROTO, "gm_loader_open: the node agent sent no ring");
	if (!err && l->o.gpu_decode && !(rep.flags & GM_NODE_COEF))
		err = set_err(l, -EPROTONOSUPPORT,
			      "gm_loader_open: the node agent at %s does not make coefficient "
			      "slots (gpu_decode; an older goldminer): run this build's agent, or "
			      "open the loader without node",
			      l->o.node);
	if (err)
		goto out_ring_fd;
	err = gm_ring_attach(&l->ring, ring_fd);
	if (err) {
		err = set_err(l, err, "gm_loader_open: the ring from the node agent is invalid: %s",
			      strerror(-err));
		goto out_ring_fd;
	}
	close(ring_fd);
	l->h = gm_ring_hdr(l->ring);
	err = check_agent_ring(l, &rep);
	if (err)
		return err; /* gm_loader_close unmaps the ring and hangs up */
	return start_consumer(l);

out_ring_fd:
	if (ring_fd >= 0)
		close(ring_fd);
	return err;
}

/* ---- the node agent gone ----------------------------------------------------------
 *
 * The ring is the job's memfd, mapped here, and the workers are stateless: a
 * task's bytes do not depend on who makes it (contract 1). So when the agent
 * goes away (its workers with it: PR_SET_PDEATHSIG), this process makes a pool
 * of its own over that ring (take_over): the leases the agent's workers held go
 * back to FREE once their holders are gone, and its workers make those batches
 * again, resuming where the dead ones stopped. Before each wait for a batch, at
 * most every GM_CONSUMER_RETRY_MS, the socket is tried again (reattach,
 * through gm_consumer_reattach): an agent that
 * answers there is asked to adopt the running ring (an ATTACH that carries the
 * ring's memfd, wire.h); once it has, this process's workers finish their
 * batches and exit (gm_pool_hand_over) and the agent's go on.
 */

/* The agent went away: this process's workers go on with its ring. 0, or -errno
 * with a message when they cannot start. */
static int take_over(struct gm_loader *l)
{
	struct gm_pool_cfg c = l->pcfg;
	char why[512];
	uint32_t epoch;
	uint64_t k;

	uint32_t n = gm_consumer_orphans(&l->c);
	size_pool(l, &c);
	c.ring_fd = gm_ring_fd(l->ring);
	int err = gm_pool_create(&l->fallback, &c, why, sizeof(why));
	if (!err)
		err = gm_pool_start(l->fallback, why, sizeof(why));
	if (err) {
		gm_pool_destroy(l->fallback);
		l->fallback = NULL;
		return set_err(l, err,
			       "gm_loader_next: the node agent at %s went away and this process "
			       "cannot run the job's workers itself: %s",
			       l->o.node, why);
	}
	close(l->sock); /* (kept until here: a next call tries again) */
	l->sock = -1;
	gm_consumer_agent_lost(&l->c);
	atomic_fetch_add(&l->h->p_reissued, n);
	gm_worker_task_pos(&l->wcfg, l->c.next, &epoch, &k);
	gm_log("loader",
	       "the node agent at %s went away: this process's own workers make the job's "
	       "batches from batch %llu of epoch %u on (the same bytes; %u batches its "
	       "workers held made again), until an agent answers there again",
	       l->o.node, (unsigned long long)k, epoch, n);
	return 0;
}

/* Ask the agent on fd to adopt the running ring (gm_consumer_ask_fn; arg: the
 * loader). 0, or -errno with why. */
static int ask_adopt(void *arg, int fd, char *why, size_t len)
{
	struct gm_loader *l = arg;
	struct gm_node_req req;
	struct gm_node_reply rep = {0};
	int ring_fd = gm_ring_fd(l->ring), got = -1;

	if (gm_wire_attach_request(&req, &l->o)) {
		snprintf(why, len, "dataset path too long");
		return -ENAMETOOLONG;
	}
	int err = gm_wire_call_fds(fd, &req, &ring_fd, 1, &rep, &got);
	if (got >= 0) /* an agent that made a ring of its own did not adopt ours */
		close(got);
	if (err)
		snprintf(why, len, "%s",
			 err == -EPROTONOSUPPORT ? "another goldminer build"
						 : "no answer to the request");
	else if (rep.status)
		snprintf(why, len, "%.400s", rep.msg);
	else if (got >= 0 || rep.batches_per_epoch != l->bpe ||
		 rep.fingerprint != gm_dataset_fingerprint(l->ds) ||
		 (l->o.gpu_decode && !(rep.flags & GM_NODE_COEF)))
		snprintf(why, len, "it did not adopt the running ring, or sees other files");
	else
		return 0;
	return err ? err : rep.status ? rep.status : -EPROTO;
}

/* An agent on the socket again: it adopts the running ring and its workers go
 * on; this process's finish their batches. A refusal is said once; asked again
 * later (gm_consumer_reattach). */
static void reattach(struct gm_loader *l)
{
	uint32_t epoch;
	uint64_t k;
	int fd = gm_consumer_reattach(&l->c, l->o.node, ask_adopt, l);

	if (fd < 0)
		return;
	gm_pool_hand_over(l->fallback);
	gm_pool_destroy(l->fallback);
	l->fallback = NULL;
	l->sock = fd;
	gm_worker_task_pos(&l->wcfg, l->c.next, &epoch, &k);
	gm_log("loader",
	       "re-attached to the node agent at %s: its workers make the job's batches "
	       "again from batch %llu of epoch %u on",
	       l->o.node, (unsigned long long)k, epoch);
}

void gm_loader_interrupt(struct gm_loader *l)
{
	gm_consumer_interrupt(&l->c);
}

void gm_loader_stop(struct gm_loader *l)
{
	if (!l || l->stopped)
		return;
	l->stopped = true;
	if (l->pool)
		gm_pool_stop(l->pool);
	if (l->fallback)
		gm_pool_stop(l->fallback);
	if (l->sock >= 0) {
		close(l->sock); /* the agent detaches the job and stops its workers */
		l->sock = -1;
		l->c.agent_fd = -1;
	}
}

void gm_loader_close(struct gm_loader *l)
{
	if (!l)
		return;
	gm_loader_stop(l);
	if (l->has_c)
		gm_consumer_fini(&l->c); /* kept batches and the pin, before the ring goes */
	gm_pool_destroy(l->fallback);	 /* its own mapping of the ring */
	if (l->pool)
		gm_pool_destroy(l->pool); /* and its ring */
	else
		gm_ring_destroy(l->ring);
	shuf_free(l);
	gm_coef_device_destroy(l->dev);
	gm_aug_destroy(l->fin);
	gm_dataset_close(l->ds);
	free(l->errs);
	free(l->stale_told);
	for (int i = 0; i < 3; i++)
		free(l->own[i]);
	free(l->own_order);
	free(l);
}

/* ---- consumer -------------------------------------------------------------------- */

static void keep_error(struct gm_loader *l, const struct gm_slot_err *e)
{
	if (e->sample >= gm_dataset_count(l->ds))
		return; /* names no file of the dataset: nothing to list (the count stays) */
	if (l->n_errs == l->cap_errs) {
		uint64_t cap = l->cap_errs ? l->cap_errs * 2 : 16;
		struct err_rec *p = realloc(l->errs, cap * sizeof(*p));
		if (!p)
			return; /* the count in stats stays exact; only the listing is short */
		l->errs = p;
		l->cap_errs = cap;
	}
	l->errs[l->n_errs].sample = e->sample;
	/* (a writer's record: its message may lack its NUL) */
	snprintf(l->errs[l->n_errs].msg, sizeof(l->errs[l->n_errs].msg), "%.*s", GM_RING_MSG - 1,
		 e->msg);
	l->n_errs++;
}

int gm_loader_release(struct gm_loader *l, struct gm_batch *b)
{
	if (b && b->slot == UINT32_MAX)
		return 0; /* a shuffled batch is a private copy: nothing to give back */
	if (b && gm_consumer_drop(&l->c, b->data) == 0)
		return 0; /* a kept batch (or its detached copy): the held one is in neither */
	if (l->held < 0 || (b && b->slot != (uint32_t)l->held))
		return set_err(l, -EINVAL, "gm_loader_release: no such batch is held");
	gm_consumer_give_back(&l->c, (uint32_t)l->held, GM_CONSUMER_USER);
	l->held = -1;
	return 0;
}

int gm_loader_keep(struct gm_loader *l, struct gm_batch *b)
{
	void *a;
	if (b->slot == UINT32_MAX)
		return set_err(l, -ENOTSUP,
			       "gm_loader_keep: a shuffle_buffer batch is a copy that the next "
			       "batch overwrites; copy it to keep it");
	if (l->held < 0 || b->slot != (uint32_t)l->held ||
	    (char *)b->data != gm_ring_data(l->ring, b->slot))
		return set_err(l, -EINVAL, "gm_loader_keep: no such batch is held");
	/* the whole slot, control page first: labels and ids move with the pixels */
	int err = gm_consumer_keep(&l->c, b->slot, 0, 0, &a);
	if (err)
		return set_err(l, err, "gm_loader_keep: %s", l->c.errmsg);
	char *start = gm_ring_slot(l->ring, b->slot);
	b->data = (char *)a + ((char *)b->data - start);
	b->labels = (const int32_t *)((char *)a + ((const char *)b->labels - start));
	b->sample_ids = (const uint32_t *)((char *)a + ((const char *)b->sample_ids - start));
	l->held = -1;
	return 0;
}

uint32_t gm_loader_kept(const struct gm_loader *l, uint32_t *slots)
{
	if (slots)
		*slots = l->ring ? gm_ring_hdr(l->ring)->nslots : 0;
	return gm_consumer_held(&l->c) - (l->held >= 0);
}

/* Samples of a delivered batch whose member's row index did not match it: counted,
 * and each named once a run (one event line). */
static void count_stale(struct gm_loader *l, const struct gm_slot_ctl *ctl)
{
	uint32_t n = gm_dataset_count(l->ds);
	l->stale += ctl->n_stale;
	if (ctl->n_stale && !l->stale_told)
		l->stale_told = calloc((n + 63) / 64, sizeof(uint64_t));
	for (uint32_t i = 0; l->stale_told && i < ctl->n_stale && i < GM_RING_MAX_STALE; i++) {
		uint32_t id = ctl->stale[i];
		if (id >= n || l->stale_told[id / 64] >> (id % 64) & 1)
			continue;
		l->stale_told[id / 64] |= 1ull << (id % 64);
		gm_log("loader",
		       "%s: its row index does not match the member (a header copy or row "
		       "offsets unlike its bytes): decoded whole, the same pixels (pack the "
		       "shard again)",
		       gm_dataset_name(l->ds, id));
	}
}

/* The counters of a delivered batch (the ring's for the controller are
 * gm_consumer_take's). */
static void count_batch(struct gm_loader *l, const struct gm_slot_ctl *ctl, uint64_t t1)
{
	count_stale(l, ctl);
	l->read_ns += ctl->read_ns;
	l->read_bytes += ctl->read_bytes;
	l->preempt_ns += ctl->preempt_ns;
	l->decode_ns += ctl->decode_ns;
	l->augment_ns += ctl->augment_ns;
	l->write_ns += ctl->write_ns;
	if (l->batches == 0) {
		l->t_first = t1;
		l->first_samples = ctl->n;
	}
	l->t_last = t1;
	l->batches++;
	l->samples += ctl->n;
}

/* A batch the workers could not make: on_error=fail met a bad sample (-EBADMSG),
 * or no good sample was left to replace a bad one (-ENODATA). It is not
 * delivered; the loader stays at it. */
static int batch_failed(struct gm_loader *l, const struct gm_slot_ctl *ctl)
{
	const struct gm_slot_err *e = &ctl->errs[0];
	int st = ctl->status;
	const char *name = ctl->n_recs ? gm_dataset_name(l->ds, e->sample) : NULL;
	if (st != -ENODATA) {
		set_err(l, st, "gm_loader_next: %s: %.*s", name ? name : "a sample of the batch",
			GM_RING_MSG, name ? e->msg : "bad (no record names it)");
		return st;
	}
	/* name the batch's bad files, as many as the message holds */
	uint32_t epoch, nrec = ctl->n_recs < GM_RING_MAX_ERRS ? ctl->n_recs : GM_RING_MAX_ERRS;
	uint64_t k;
	gm_worker_task_pos(&l->wcfg, l->c.next, &epoch, &k);
	char list[sizeof(l->errmsg)] = "";
	size_t n = 0;
	for (uint32_t i = 0; i < nrec && n < sizeof(list); i++) {
		name = gm_dataset_name(l->ds, ctl->errs[i].sample);
		if (name)
			n += (size_t)snprintf(list + n, sizeof(list) - n, "%s %s: %.*s",
					      i ? ";" : "", name, GM_RING_MSG, ctl->errs[i].msg);
	}
	gm_errf(l->errmsg, sizeof(l->errmsg),
		"gm_loader_next: no good sample left: batch %llu of epoch %u has %u bad sample%s "
		"and none of the %d after one of them in epoch order is good (is every file of "
		"%s bad?):%s",
		(unsigned long long)k, epoch, ctl->n_errors, ctl->n_errors == 1 ? "" : "s",
		GM_WORKER_SUBSTITUTE_TRIES, l->o.root, list);
	return st;
}

/* A slot's control block is written by other processes (the workers; the node
 * agent for remote ones): its status, size and error count are what a worker
 * writes for task l->c.next, or the batch is not passed on (a positive status
 * would read as END or END_OF_EPOCH to the caller). 0 or -EPROTO. */
static int check_slot(struct gm_loader *l, const struct gm_slot_ctl *ctl)
{
	uint32_t epoch;
	uint64_t k, b = l->o.batch_size;
	uint64_t count = l->o.order ? l->o.order_len : gm_dataset_count(l->ds);
	gm_worker_task_pos(&l->wcfg, l->c.next, &epoch, &k);
	uint64_t nb = count - k * b < b ? count - k * b : b;
	if (gm_ring_status_ok(ctl->status) && ctl->n == nb && ctl->n_errors <= nb)
		return 0;
	return set_err(l, -EPROTO,
		       "gm_loader_next: batch %llu of epoch %u came with status %d, %u samples, "
		       "%u bad (a worker writes status 0, -EBADMSG or -ENODATA and %llu "
		       "samples): a writer of the ring misbehaves; the batch is not delivered",
		       (unsigned long long)k, epoch, (int)ctl->status, ctl->n, ctl->n_errors,
		       (unsigned long long)nb);
}

static int ring_next(struct gm_loader *l, struct gm_batch *b)
{
	if (l->held >= 0)
		gm_loader_release(l, NULL);
	if (l->eoe_pending) {
		l->eoe_pending = false;
		return GM_LOADER_END_OF_EPOCH;
	}
	if (l->c.next >= l->end)
		return GM_LOADER_END;
	if (l->fallback)
		reattach(l);
	int rc = gm_consumer_wait(&l->c, l->c.next, -1);
	if (rc == GM_CONSUMER_AGENT_GONE && l->sock >= 0) {
		rc = take_over(l); /* our own workers go on with the agent's ring */
		if (!rc)
			rc = gm_consumer_wait(&l->c, l->c.next, -1);
		else
			return rc;
	}
	if (rc < 0)
		return set_err(l, rc, "gm_loader_next: %s", l->c.errmsg);
	uint64_t t1 = gm_now_ns();
	uint32_t slot = (uint32_t)rc;
	struct gm_slot_ctl *ctl = gm_ring_ctl(l->ring, slot);
	uint32_t nerr = ctl->n_errors;
	int err = check_slot(l, ctl);
	if (err)
		return err;
	for (uint32_t i = 0; i < ctl->n_recs && i < GM_RING_MAX_ERRS; i++)
		keep_error(l, &ctl->errs[i]);
	if (ctl->status)
		return batch_failed(l, ctl);

	uint32_t epoch;
	uint64_t k;
	gm_worker_task_pos(&l->wcfg, l->c.next, &epoch, &k);
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
	count_batch(l, ctl, t1);
	gm_consumer_take(&l->c, l->c.next, slot, 0); /* the ring's counters, and c.next */
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
/* The shuffle pool's epoch is over: the next output batch is the next epoch's first. */
static void shuf_epoch_reset(struct gm_loader *l)
{
	l->up_epoch_done = false;
	l->out_k = 0;
	l->out_draws = 0;
}

/* Refill the pool from upstream until it is full or the epoch (or the job) ends.
 * 0, or ring_next's -errno (a call again goes on where this one stopped). */
static int shuf_refill(struct gm_loader *l)
{
	size_t sb = l->sample_bytes;

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
	return 0;
}

/* Output position k takes the pool sample drawn by the RNG keyed (seed, epoch,
 * draw); the last pool entry fills its place. The pool is not empty. */
static void shuf_draw(struct gm_loader *l, uint32_t k)
{
	size_t sb = l->sample_bytes;
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
}

static int shuf_next(struct gm_loader *l, struct gm_batch *b)
{
	uint32_t k = l->out_fill, B = l->o.batch_size;

	if (l->shuf_eoe) {
		l->shuf_eoe = false;
		return GM_LOADER_END_OF_EPOCH;
	}
	if (l->up_end && !l->shuf_n && !k)
		return GM_LOADER_END;
	while (k < B) {
		int rc = shuf_refill(l);
		if (rc < 0) {
			l->out_fill = k; /* a call again goes on (-EINTR) */
			return rc;
		}
		if (!l->shuf_n)
			break;
		shuf_draw(l, k);
		k++;
	}
	l->out_fill = 0;
	if (k == 0) {
		/* epoch drained */
		shuf_epoch_reset(l);
		return l->up_end ? GM_LOADER_END : GM_LOADER_END_OF_EPOCH;
	}
	b->epoch = l->out_epoch;
	b->index = l->out_k++;
	b->size = k;
	b->n_errors = 0;
	b->data = l->out_px;
	b->sample_bytes = l->sample_bytes;
	b->labels = l->out_lab;
	b->sample_ids = l->out_id;
	b->slot = UINT32_MAX;
	/* the last output batch of an epoch: report the end right after it */
	if (l->up_epoch_done && !l->shuf_n) {
		shuf_epoch_reset(l);
		l->shuf_eoe = true;
	}
	return 0;
}

int gm_loader_next(struct gm_loader *l, struct gm_batch *b)
{
	if (l->stopped)
		return set_err(l, -ECANCELED, "gm_loader_next: the loader was stopped");
	/* the time between an epoch's end and this call is the trainer's, not its
	 * demand's (gm_elastic_pause): the agent and the elastic pool measure
	 * what it takes while it iterates */
	gm_elastic_pause(l->h, 0);
	int rc = l->shuf_cap ? shuf_next(l, b) : ring_next(l, b);
	if (rc == GM_LOADER_END_OF_EPOCH)
		gm_elastic_pause(l->h, 1);
	return rc;
}

/* gm_loader_finish and _device: the batch's arguments checked, the host path's
 * transform made. 0 or -EINVAL / -ENOMEM with the message set under `fn`. */
static int finish_ready(struct gm_loader *l, const char *fn, const struct gm_batch *b,
			const void *out, size_t out_len)
{
	size_t ob = gm_aug_out_bytes(&l->o.aug);
	if (!l->o.gpu_decode)
		return set_err(l, -EINVAL,
			       "%s: the loader was opened without gpu_decode: its batches are "
			       "finished samples already",
			       fn);
	if (!b || !out || out_len != (size_t)b->size * ob || b->sample_bytes != l->sample_bytes)
		return set_err(
		    l, -EINVAL,
		    "%s: out must hold the batch's %u samples of %zu bytes (%zu), not %zu%s", fn,
		    b ? b->size : 0, ob, b ? (size_t)b->size * ob : 0, out_len,
		    b && b->sample_bytes != l->sample_bytes
			? " (and the batch's slots are not this loader's)"
			: "");
	if (!l->fin) {
		int err = gm_aug_create(&l->fin, &l->o.aug);
		if (err)
			return set_err(l, err, "%s: the host path's transform: %s", fn,
				       strerror(-err));
	}
	return 0;
}

int gm_loader_finish(struct gm_loader *l, const struct gm_batch *b, void *out, size_t out_len)
{
	size_t ob = gm_aug_out_bytes(&l->o.aug);
	int err = finish_ready(l, "gm_loader_finish", b, out, out_len);
	if (err)
		return err;
	for (uint32_t i = 0; i < b->size; i++) {
		err = gm_aug_coef_finish(l->fin,
					 (const uint8_t *)b->data + (size_t)i * b->sample_bytes,
					 b->sample_bytes, (uint8_t *)out + (size_t)i * ob);
		if (err)
			return set_err(l, err, "gm_loader_finish: sample %u of batch %llu: %s", i,
				       (unsigned long long)b->index, gm_aug_errmsg(l->fin));
	}
	return 0;
}

int gm_loader_finish_device(struct gm_loader *l, const struct gm_batch *b, void *d_out,
			    size_t out_len, void *stream, unsigned flags)
{
	char why[480];
	int err = finish_ready(l, "gm_loader_finish_device", b, d_out, out_len);
	if (err)
		return err;
	if (flags & ~GM_LOADER_FINISH_SYNC)
		return set_err(l, -EINVAL,
			       "gm_loader_finish_device: flags 0x%x: only "
			       "GM_LOADER_FINISH_SYNC (1) is known",
			       flags);
	if (!l->dev && (err = gm_coef_device_create(&l->dev)))
		return set_err(l, err, "gm_loader_finish_device: %s", strerror(-err));
	err = gm_coef_device_finish(l->dev, l->fin, b->data, b->size, b->sample_bytes, d_out,
				    gm_aug_out_bytes(&l->o.aug), stream,
				    flags & GM_LOADER_FINISH_SYNC, why, sizeof(why));
	if (err)
		return set_err(l, err, "gm_loader_finish_device: batch %llu: %s",
			       (unsigned long long)b->index, why);
	return 0;
}

bool gm_loader_device_finish_ready(char *why, size_t len)
{
	return gm_coef_device_available(why, len);
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
	s->wait_ns = l->c.wait_ns;
	s->errors = l->errors;
	s->workers = atomic_load(&l->h->p_alive);
	s->worker_deaths = atomic_load(&l->h->p_deaths);
	s->reissued = atomic_load(&l->h->p_reissued);
	s->batches_per_epoch = l->bpe;
	s->dataset_size = gm_dataset_count(l->ds);
	s->num_classes = gm_dataset_num_classes(l->ds);
	s->pinned = l->c.pinned;
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
	s->kept_copied = l->c.detached;
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
	if (workers < 1 || workers > GM_MAX_WORKERS)
		return set_err(l, -EINVAL, "gm_loader_scale: workers must be 1..%d, not %d",
			       GM_MAX_WORKERS, workers);
	if (l->fallback) { /* the agent's again once one adopts the ring */
		gm_pool_fix(l->fallback, workers);
		return 0;
	}
	if (l->sock >= 0) {
		struct gm_node_req req;
		struct gm_node_reply rep = {0};
		gm_wire_request(&req, GM_NODE_SCALE);
		req.workers = workers;
		return agent_call(l, "gm_loader_scale", &req, &rep, NULL);
	}
	if (l->pool)
		gm_pool_fix(l->pool, workers);
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
	gm_worker_task_pos(&l->wcfg, l->c.next, epoch, &k);
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

uint64_t gm_loader_read_bytes(const struct gm_loader *l)
{
	return l->read_bytes;
}

uint64_t gm_loader_stale_index(const struct gm_loader *l)
{
	return l->stale;
}

uint64_t gm_loader_preempt_ns(const struct gm_loader *l)
{
	return l->preempt_ns;
}
