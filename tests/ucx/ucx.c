/*
 * ucx.c - RMA puts into another process's registered memory over UCX (ucx.h).
 *
 * Design: a thin layer over UCP. A handle is one context (features RMA + AM,
 * configuration read from the UCX_* environment) and one single-threaded
 * worker; endpoints are made by UCX's sockaddr wire-up (ucp_listener on one
 * side, ucp_ep_create with a socket address on the other), always with
 * err_mode PEER so that UCX itself detects a dead peer or link and calls
 * ep_error_cb, which marks the endpoint dead. Every UCX request is waited on
 * by progressing the worker until it completes or a CLOCK_MONOTONIC deadline
 * passes. A put that misses its deadline cannot simply be abandoned (UCX still
 * owns the source buffer), so the endpoint is closed by force: UCX then
 * completes its outstanding requests with an error, the buffer is free again
 * and the endpoint is dead for good - a writer reconnects, it never retries
 * on a half-known state.
 *
 * The region blob (gm_ucx_region_pack) is the base address and length of the
 * registration with UCX's packed rkey; a put is checked against that range
 * before UCX sees it, so a peer's bug cannot write beside the region through
 * this module (UCX over TCP would not stop it: its emulated puts trust the
 * address). The blob is in host byte order: the hosts of one cluster share
 * one architecture.
 *
 * Not here: framing, retries or keepalive of our own (UCX's), authentication
 * of peers, leases and fencing (the control plane), active-message handlers.
 */
#include "ucx.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <ucp/api/ucp.h>

#define CONN_QUEUE 8
/* After a forced close, the time UCX gets to hand back the cancelled
 * requests (local work only: no peer is waited for). */
#define FORCE_CLOSE_MS 2000
#define BLOB_MAGIC     0x58554d47u /* "GMUX" */
#define BLOB_VERSION   1u
#define BLOB_MAX_RKEY  (64u << 10)

struct gm_ucx {
	ucp_context_h ctx;
	ucp_worker_h worker;
	ucp_listener_h listener;
	ucp_conn_request_h conn[CONN_QUEUE]; /* accepted by gm_ucx_accept, FIFO */
	unsigned nconn;
	char err[256];
};

struct gm_ucx_ep {
	struct gm_ucx *u;
	ucp_ep_h ep; /* NULL once closed by force */
	bool dead;
	ucs_status_t status; /* why it died */
};

struct gm_ucx_region {
	struct gm_ucx *u;
	ucp_mem_h memh;
	void *addr;
	size_t len;
};

struct gm_ucx_rkey {
	struct gm_ucx_ep *ep;
	ucp_rkey_h rkey;
	uint64_t base, len;
};

struct blob_hdr {
	uint32_t magic;
	uint16_t version;
	uint16_t reserved;
	uint64_t base, len, rkey_len;
};

static void set_err(struct gm_ucx *u, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_err(struct gm_ucx *u, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(u->err, sizeof(u->err), fmt, ap);
	va_end(ap);
}

/* UCX status -> -errno (the mapping is lossy; the message keeps UCX's text). */
static int st_errno(ucs_status_t st)
{
	if (UCS_IS_ENDPOINT_ERROR(st) || UCS_IS_LINK_ERROR(st))
		return st == UCS_ERR_ENDPOINT_TIMEOUT ? -ETIMEDOUT : -ECONNRESET;
	switch (st) {
	case UCS_OK:
		return 0;
	case UCS_ERR_NO_MEMORY:
		return -ENOMEM;
	case UCS_ERR_INVALID_PARAM:
	case UCS_ERR_INVALID_ADDR:
		return -EINVAL;
	case UCS_ERR_UNREACHABLE:
		return -EHOSTUNREACH;
	case UCS_ERR_TIMED_OUT:
		return -ETIMEDOUT;
	case UCS_ERR_BUSY:
		return -EADDRINUSE;
	case UCS_ERR_CANCELED:
		return -ECANCELED;
	case UCS_ERR_REJECTED:
		return -ECONNREFUSED;
	case UCS_ERR_NOT_CONNECTED:
	case UCS_ERR_CONNECTION_RESET:
		return -ECONNRESET;
	case UCS_ERR_NO_DEVICE:
	case UCS_ERR_UNSUPPORTED:
	case UCS_ERR_NOT_IMPLEMENTED:
		return -ENOTSUP;
	case UCS_ERR_OUT_OF_RANGE:
		return -ERANGE;
	default:
		return -EIO;
	}
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t deadline_of(int timeout_ms)
{
	return now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000u;
}

int gm_ucx_progress(struct gm_ucx *u)
{
	return (int)ucp_worker_progress(u->worker);
}

/* Progress until req (a UCX request pointer, not NULL or an error) is done or
 * the deadline passes: its status, or UCS_INPROGRESS on timeout (req then
 * still owned by UCX and not freed). Frees a completed request. */
static ucs_status_t wait_req(struct gm_ucx *u, void *req, uint64_t deadline)
{
	for (;;) {
		ucs_status_t st = ucp_request_check_status(req);
		if (st != UCS_INPROGRESS) {
			ucp_request_free(req);
			return st;
		}
		if (now_ns() >= deadline)
			return UCS_INPROGRESS;
		if (ucp_worker_progress(u->worker) == 0)
			sched_yield();
	}
}

/* The status of an nbx call's result: done now, failed now, or waited on. */
static ucs_status_t wait_ptr(struct gm_ucx *u, ucs_status_ptr_t p, uint64_t deadline)
{
	if (p == NULL)
		return UCS_OK;
	if (UCS_PTR_IS_ERR(p))
		return UCS_PTR_STATUS(p);
	return wait_req(u, p, deadline);
}

int gm_ucx_create(struct gm_ucx **out, char *errbuf, size_t errlen)
{
	ucp_config_t *cfg = NULL;
	ucs_status_t st;
	const char *what;
	int rc;

	*out = NULL;
	struct gm_ucx *u = calloc(1, sizeof(*u));
	if (!u) {
		rc = -ENOMEM;
		what = "out of memory";
		goto out_err;
	}
	st = ucp_config_read(NULL, NULL, &cfg);
	if (st != UCS_OK) {
		what = "ucp_config_read (check the UCX_* environment)";
		goto out_st;
	}
	ucp_params_t p = {
	    .field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED,
	    .features = UCP_FEATURE_RMA | UCP_FEATURE_AM,
	    .mt_workers_shared = 0,
	};
	st = ucp_init(&p, cfg, &u->ctx);
	ucp_config_release(cfg);
	if (st != UCS_OK) {
		what = "ucp_init (no transport for RMA+AM? check UCX_TLS)";
		goto out_st;
	}
	ucp_worker_params_t wp = {
	    .field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
	    .thread_mode = UCS_THREAD_MODE_SINGLE,
	};
	st = ucp_worker_create(u->ctx, &wp, &u->worker);
	if (st != UCS_OK) {
		what = "ucp_worker_create";
		goto out_cleanup;
	}
	*out = u;
	return 0;

out_cleanup:
	ucp_cleanup(u->ctx);
out_st:
	rc = st_errno(st);
	if (errbuf && errlen)
		snprintf(errbuf, errlen, "gm_ucx_create: %s: %s", what, ucs_status_string(st));
	free(u);
	return rc;
out_err:
	if (errbuf && errlen)
		snprintf(errbuf, errlen, "gm_ucx_create: %s", what);
	return rc;
}

void gm_ucx_destroy(struct gm_ucx *u)
{
	if (!u)
		return;
	for (unsigned i = 0; i < u->nconn; i++)
		ucp_listener_reject(u->listener, u->conn[i]);
	if (u->listener)
		ucp_listener_destroy(u->listener);
	ucp_worker_destroy(u->worker);
	ucp_cleanup(u->ctx);
	free(u);
}

const char *gm_ucx_errmsg(const struct gm_ucx *u)
{
	return u->err;
}

/* "host:port" or "[v6]:port" -> a socket address. 0 or -EINVAL. */
static int parse_addr(struct gm_ucx *u, const char *fn, const char *s, struct sockaddr_storage *ss,
		      socklen_t *sl)
{
	char host[256];
	const char *colon = s ? strrchr(s, ':') : NULL;
	size_t hl = colon ? (size_t)(colon - s) : 0;
	if (!colon || hl == 0 || hl >= sizeof(host) || colon[1] == '\0') {
		set_err(u, "%s: '%s' is not ADDR:PORT", fn, s ? s : "(null)");
		return -EINVAL;
	}
	memcpy(host, s, hl);
	host[hl] = '\0';
	if (host[0] == '[' && host[hl - 1] == ']') {
		memmove(host, host + 1, hl - 2);
		host[hl - 2] = '\0';
	}
	struct addrinfo hints = {
	    .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
	struct addrinfo *ai = NULL;
	int e = getaddrinfo(host, colon + 1, &hints, &ai);
	if (e != 0) {
		set_err(u, "%s: '%s': %s", fn, s, gai_strerror(e));
		return -EINVAL;
	}
	memcpy(ss, ai->ai_addr, ai->ai_addrlen);
	*sl = ai->ai_addrlen;
	freeaddrinfo(ai);
	return 0;
}

static void conn_cb(ucp_conn_request_h req, void *arg)
{
	struct gm_ucx *u = arg;
	if (u->nconn == CONN_QUEUE) {
		ucp_listener_reject(u->listener, req); /* nobody is accepting */
		return;
	}
	u->conn[u->nconn++] = req;
}

int gm_ucx_listen(struct gm_ucx *u, const char *addr_port, uint16_t *port)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	if (u->listener) {
		set_err(u, "gm_ucx_listen: already listening");
		return -EBUSY;
	}
	int rc = parse_addr(u, "gm_ucx_listen", addr_port, &ss, &sl);
	if (rc)
		return rc;
	ucp_listener_params_t lp = {
	    .field_mask =
		UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER,
	    .sockaddr = {.addr = (const struct sockaddr *)&ss, .addrlen = sl},
	    .conn_handler = {.cb = conn_cb, .arg = u},
	};
	ucs_status_t st = ucp_listener_create(u->worker, &lp, &u->listener);
	if (st != UCS_OK) {
		u->listener = NULL;
		set_err(u, "gm_ucx_listen: %s: %s", addr_port, ucs_status_string(st));
		return st_errno(st);
	}
	ucp_listener_attr_t la = {.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR};
	st = ucp_listener_query(u->listener, &la);
	if (st != UCS_OK) {
		set_err(u, "gm_ucx_listen: ucp_listener_query: %s", ucs_status_string(st));
		ucp_listener_destroy(u->listener);
		u->listener = NULL;
		return st_errno(st);
	}
	if (port) {
		const struct sockaddr *sa = (const struct sockaddr *)&la.sockaddr;
		*port = sa->sa_family == AF_INET6
			    ? ntohs(((const struct sockaddr_in6 *)sa)->sin6_port)
			    : ntohs(((const struct sockaddr_in *)sa)->sin_port);
	}
	return 0;
}

static void ep_error_cb(void *arg, ucp_ep_h ep, ucs_status_t status)
{
	struct gm_ucx_ep *e = arg;
	(void)ep;
	e->dead = true;
	e->status = status;
}

/* An endpoint from ep params (the error mode and handler added here). */
static int ep_new(struct gm_ucx *u, const char *fn, ucp_ep_params_t *ep_p, struct gm_ucx_ep **out)
{
	struct gm_ucx_ep *e = calloc(1, sizeof(*e));
	if (!e) {
		set_err(u, "%s: out of memory", fn);
		return -ENOMEM;
	}
	e->u = u;
	ep_p->field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
	ep_p->err_mode = UCP_ERR_HANDLING_MODE_PEER;
	ep_p->err_handler.cb = ep_error_cb;
	ep_p->err_handler.arg = e;
	ucs_status_t st = ucp_ep_create(u->worker, ep_p, &e->ep);
	if (st != UCS_OK) {
		set_err(u, "%s: ucp_ep_create: %s", fn, ucs_status_string(st));
		free(e);
		return st_errno(st);
	}
	*out = e;
	return 0;
}

int gm_ucx_accept(struct gm_ucx *u, struct gm_ucx_ep **out, int timeout_ms)
{
	*out = NULL;
	if (!u->listener) {
		set_err(u, "gm_ucx_accept: not listening (gm_ucx_listen first)");
		return -EINVAL;
	}
	uint64_t deadline = deadline_of(timeout_ms);
	while (u->nconn == 0) {
		if (now_ns() >= deadline) {
			set_err(u, "gm_ucx_accept: no connection within %d ms", timeout_ms);
			return -ETIMEDOUT;
		}
		if (ucp_worker_progress(u->worker) == 0)
			sched_yield();
	}
	ucp_conn_request_h req = u->conn[0];
	memmove(u->conn, u->conn + 1, --u->nconn * sizeof(u->conn[0]));
	ucp_ep_params_t p = {.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST, .conn_request = req};
	return ep_new(u, "gm_ucx_accept", &p, out);
}

/* Close e->ep by force and wait (bounded) for UCX to hand back its requests. */
static void ep_force_close(struct gm_ucx_ep *e)
{
	if (!e->ep)
		return;
	ucp_request_param_t rp = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
				  .flags = UCP_EP_CLOSE_FLAG_FORCE};
	void *p = ucp_ep_close_nbx(e->ep, &rp);
	e->ep = NULL;
	if (wait_ptr(e->u, p, deadline_of(FORCE_CLOSE_MS)) == UCS_INPROGRESS)
		ucp_request_free(p); /* UCX releases it when done */
}

/* ep failed with st in fn: mark it dead, close it by force, say why. */
static int ep_fail(struct gm_ucx_ep *e, const char *fn, const char *what, ucs_status_t st)
{
	if (!e->dead) {
		e->dead = true;
		e->status = st;
	}
	ep_force_close(e);
	set_err(e->u, "%s: %s: %s (endpoint closed; reconnect)", fn, what, ucs_status_string(st));
	return st_errno(st);
}

static int ep_check(struct gm_ucx_ep *e, const char *fn)
{
	if (!e->dead)
		return 0;
	ep_force_close(e);
	set_err(e->u, "%s: endpoint dead: %s (peer or link lost; reconnect)", fn,
		ucs_status_string(e->status));
	return st_errno(e->status) ? st_errno(e->status) : -ECONNRESET;
}

int gm_ucx_flush(struct gm_ucx_ep *ep, int timeout_ms)
{
	int rc = ep_check(ep, "gm_ucx_flush");
	if (rc)
		return rc;
	ucp_request_param_t rp = {.op_attr_mask = 0};
	void *p = ucp_ep_flush_nbx(ep->ep, &rp);
	ucs_status_t st = wait_ptr(ep->u, p, deadline_of(timeout_ms));
	if (st == UCS_INPROGRESS) {
		ep_force_close(ep); /* completes p with an error; UCX frees it */
		ucp_request_free(p);
		return ep_fail(ep, "gm_ucx_flush", "deadline passed", UCS_ERR_TIMED_OUT);
	}
	if (st != UCS_OK || ep->dead)
		return ep_fail(ep, "gm_ucx_flush", "peer or link lost",
			       st != UCS_OK ? st : ep->status);
	return 0;
}

int gm_ucx_connect(struct gm_ucx *u, const char *addr_port, struct gm_ucx_ep **out, int timeout_ms)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	*out = NULL;
	int rc = parse_addr(u, "gm_ucx_connect", addr_port, &ss, &sl);
	if (rc)
		return rc;
	ucp_ep_params_t p = {
	    .field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR,
	    .flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER,
	    .sockaddr = {.addr = (const struct sockaddr *)&ss, .addrlen = sl},
	};
	struct gm_ucx_ep *e;
	rc = ep_new(u, "gm_ucx_connect", &p, &e);
	if (rc)
		return rc;
	/* The flush completes once wire-up has (or fails when it cannot). */
	rc = gm_ucx_flush(e, timeout_ms);
	if (rc) {
		char why[sizeof(u->err)];
		snprintf(why, sizeof(why), "%s", u->err);
		set_err(u, "gm_ucx_connect: %s: %s", addr_port, why);
		gm_ucx_ep_close(e, 0);
		return rc;
	}
	*out = e;
	return 0;
}

void gm_ucx_ep_close(struct gm_ucx_ep *ep, int timeout_ms)
{
	if (!ep)
		return;
	if (ep->ep && !ep->dead) {
		ucp_request_param_t rp = {.op_attr_mask = 0}; /* graceful: flushes first */
		void *p = ucp_ep_close_nbx(ep->ep, &rp);
		ucs_status_t st = wait_ptr(ep->u, p, deadline_of(timeout_ms));
		if (st == UCS_INPROGRESS)
			ucp_request_free(p); /* the peer is slow: UCX ends it on its own */
		ep->ep = NULL;
	}
	ep_force_close(ep);
	free(ep);
}

bool gm_ucx_ep_alive(const struct gm_ucx_ep *ep)
{
	return ep && ep->ep && !ep->dead;
}

int gm_ucx_mem_map(struct gm_ucx *u, void *addr, size_t len, struct gm_ucx_region **out)
{
	*out = NULL;
	if (!addr || len == 0) {
		set_err(u, "gm_ucx_mem_map: empty region (addr %p, %zu bytes)", addr, len);
		return -EINVAL;
	}
	struct gm_ucx_region *r = calloc(1, sizeof(*r));
	if (!r) {
		set_err(u, "gm_ucx_mem_map: out of memory");
		return -ENOMEM;
	}
	ucp_mem_map_params_t mp = {
	    .field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH,
	    .address = addr,
	    .length = len,
	};
	ucs_status_t st = ucp_mem_map(u->ctx, &mp, &r->memh);
	if (st != UCS_OK) {
		set_err(u, "gm_ucx_mem_map: %zu bytes at %p: %s", len, addr, ucs_status_string(st));
		free(r);
		return st_errno(st);
	}
	r->u = u;
	r->addr = addr;
	r->len = len;
	*out = r;
	return 0;
}

void gm_ucx_mem_unmap(struct gm_ucx_region *r)
{
	if (!r)
		return;
	ucp_mem_unmap(r->u->ctx, r->memh);
	free(r);
}

int gm_ucx_region_pack(struct gm_ucx_region *r, void **blob, size_t *len)
{
	void *rk;
	size_t rkl;
	*blob = NULL;
	*len = 0;
	ucs_status_t st = ucp_rkey_pack(r->u->ctx, r->memh, &rk, &rkl);
	if (st != UCS_OK) {
		set_err(r->u, "gm_ucx_region_pack: ucp_rkey_pack: %s", ucs_status_string(st));
		return st_errno(st);
	}
	struct blob_hdr h = {.magic = BLOB_MAGIC,
			     .version = BLOB_VERSION,
			     .base = (uint64_t)(uintptr_t)r->addr,
			     .len = r->len,
			     .rkey_len = rkl};
	unsigned char *b = malloc(sizeof(h) + rkl);
	if (!b) {
		ucp_rkey_buffer_release(rk);
		set_err(r->u, "gm_ucx_region_pack: out of memory");
		return -ENOMEM;
	}
	memcpy(b, &h, sizeof(h));
	memcpy(b + sizeof(h), rk, rkl);
	ucp_rkey_buffer_release(rk);
	*blob = b;
	*len = sizeof(h) + rkl;
	return 0;
}

int gm_ucx_rkey_unpack(struct gm_ucx_ep *ep, const void *blob, size_t len, struct gm_ucx_rkey **out)
{
	struct blob_hdr h;
	*out = NULL;
	int rc = ep_check(ep, "gm_ucx_rkey_unpack");
	if (rc)
		return rc;
	if (!blob || len < sizeof(h)) {
		set_err(ep->u, "gm_ucx_rkey_unpack: blob of %zu bytes is shorter than its header",
			len);
		return -EBADMSG;
	}
	memcpy(&h, blob, sizeof(h));
	if (h.magic != BLOB_MAGIC || h.version != BLOB_VERSION || h.rkey_len == 0 ||
	    h.rkey_len > BLOB_MAX_RKEY || h.rkey_len != len - sizeof(h) || h.len == 0 ||
	    h.base + h.len < h.base) {
		set_err(ep->u,
			"gm_ucx_rkey_unpack: not a gm_ucx region blob (magic %#x version %u, "
			"%zu bytes, rkey %llu bytes)",
			h.magic, h.version, len, (unsigned long long)h.rkey_len);
		return -EBADMSG;
	}
	struct gm_ucx_rkey *k = calloc(1, sizeof(*k));
	if (!k) {
		set_err(ep->u, "gm_ucx_rkey_unpack: out of memory");
		return -ENOMEM;
	}
	ucs_status_t st =
	    ucp_ep_rkey_unpack(ep->ep, (const unsigned char *)blob + sizeof(h), &k->rkey);
	if (st != UCS_OK) {
		set_err(ep->u, "gm_ucx_rkey_unpack: ucp_ep_rkey_unpack: %s", ucs_status_string(st));
		free(k);
		return st == UCS_ERR_INVALID_PARAM ? -EBADMSG : st_errno(st);
	}
	k->ep = ep;
	k->base = h.base;
	k->len = h.len;
	*out = k;
	return 0;
}

void gm_ucx_rkey_destroy(struct gm_ucx_rkey *k)
{
	if (!k)
		return;
	ucp_rkey_destroy(k->rkey);
	free(k);
}

uint64_t gm_ucx_rkey_length(const struct gm_ucx_rkey *k)
{
	return k->len;
}

int gm_ucx_put(struct gm_ucx_ep *ep, struct gm_ucx_rkey *k, uint64_t offset, const void *src,
	       size_t len, unsigned flags, int timeout_ms)
{
	if (k->ep != ep) {
		set_err(ep->u, "gm_ucx_put: the rkey was unpacked against another endpoint");
		return -EINVAL;
	}
	if (offset > k->len || len > k->len - offset) {
		set_err(ep->u,
			"gm_ucx_put: %zu bytes at offset %llu fall outside the peer's region of "
			"%llu bytes (refused)",
			len, (unsigned long long)offset, (unsigned long long)k->len);
		return -ERANGE;
	}
	int rc = ep_check(ep, "gm_ucx_put");
	if (rc)
		return rc;
	uint64_t deadline = deadline_of(timeout_ms);
	ucp_request_param_t rp = {.op_attr_mask = 0};
	void *p = ucp_put_nbx(ep->ep, src, len, k->base + offset, k->rkey, &rp);
	ucs_status_t st = wait_ptr(ep->u, p, deadline);
	char what[96];
	snprintf(what, sizeof(what), "%zu bytes at offset %llu", len, (unsigned long long)offset);
	if (st == UCS_INPROGRESS) {
		ep_force_close(ep); /* completes p with an error: src is free */
		ucp_request_free(p);
		return ep_fail(ep, "gm_ucx_put", what, UCS_ERR_TIMED_OUT);
	}
	if (st != UCS_OK || ep->dead)
		return ep_fail(ep, "gm_ucx_put", what, st != UCS_OK ? st : ep->status);
	/* (UCX over TCP would have written beside the region: its emulated
	 * put does not check the target range; tests/test_ucx.c shows it.) */
	if (flags & GM_UCX_PUT_LOCAL)
		return 0;
	uint64_t now = now_ns();
	int left = now >= deadline ? 0 : (int)((deadline - now + 999999) / 1000000);
	rc = gm_ucx_flush(ep, left);
	if (rc) {
		char why[sizeof(ep->u->err)];
		snprintf(why, sizeof(why), "%s", ep->u->err);
		set_err(ep->u, "gm_ucx_put: %s not delivered: %s", what, why);
	}
	return rc;
}
