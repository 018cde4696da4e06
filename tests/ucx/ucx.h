/*
 * ucx.h - one process writes into another process's registered memory (a
 * job's memfd ring) by RMA over UCX (the UCP API): the transport under
 * workers on other hosts (include/goldminer/remote.h).
 *
 * The idea: the side that owns the memory maps it with gm_ucx_mem_map and
 * hands gm_ucx_region_pack's blob (base address, length, UCX rkey) to the
 * writer by any bootstrap channel; the writer connects an endpoint, unpacks
 * the blob against it and puts bytes at an offset of the region. Wire-up,
 * framing, retransmission and peer-failure detection are UCX's (err_mode
 * PEER); what this module adds is a deadline on every wait, 0/-errno returns
 * with a per-handle message, and a bounds check of every put against the
 * region the owner registered, before UCX sees it.
 *
 * Transports come from UCX's own configuration (UCX_TLS, UCX_NET_DEVICES, ...
 * read from the environment when the context is created).
 *
 * Not here: who may connect (the control plane authenticates peers), leases
 * and fencing of stale writers, active-message handlers. Not in the product
 * either: the remote workers (core/remote.c) use UCX's active messages
 * directly, so this is a test-support library (tests/ucx/, archived as
 * build/tests/libgmucx.a) for test_ucx, ucx_bench and the multi-host harness
 * (mh_peer), never installed. Built only when UCX is present (make
 * UCX=auto|1|0); GM_HAVE_UCX is defined then.
 *
 * Threads: a struct gm_ucx and everything made from it (endpoints, regions,
 * rkeys) belong to one thread at a time (UCS_THREAD_MODE_SINGLE). Create it
 * after fork(), never before, in each process that uses it.
 */
#ifndef GOLDMINER_UCX_H
#define GOLDMINER_UCX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gm_ucx;	      /* a UCP context + one worker (+ an optional listener) */
struct gm_ucx_ep;     /* a connected endpoint to one peer */
struct gm_ucx_region; /* local memory registered for remote access */
struct gm_ucx_rkey;   /* a peer's region, unpacked against one endpoint */

/* gm_ucx_put flag: return once the source buffer may be reused (local
 * completion), not once the bytes are in the peer's memory; a later
 * gm_ucx_flush confirms delivery. */
#define GM_UCX_PUT_LOCAL 1u

/*
 * Create a UCP context (features RMA and AM, configuration from the UCX_*
 * environment) and one worker. *out on success. 0, or -ENOTSUP / -ENOMEM /
 * -EIO; there is no handle yet then, so the message goes to errbuf (errlen
 * bytes; may be NULL).
 */
int gm_ucx_create(struct gm_ucx **out, char *errbuf, size_t errlen);

/* Close the listener and the worker and the context. Endpoints, regions and
 * rkeys made from u must be destroyed first. NULL does nothing. */
void gm_ucx_destroy(struct gm_ucx *u);

/* The last error of u or of anything made from it, starting with the
 * function's name. Never NULL. */
const char *gm_ucx_errmsg(const struct gm_ucx *u);

/* Make progress on u's worker (the target of a put over TCP must progress
 * for the bytes to land). Returns the number of events handled (>= 0). */
int gm_ucx_progress(struct gm_ucx *u);

/*
 * Listen for connections on "ADDR:PORT" ("[v6addr]:PORT" for IPv6; PORT 0 for
 * one the kernel picks). The bound port goes to *port (may be NULL). One
 * listener per handle. 0, -EINVAL (malformed address), -EBUSY (already
 * listening), -EADDRINUSE or another -errno.
 */
int gm_ucx_listen(struct gm_ucx *u, const char *addr_port, uint16_t *port);

/* Accept one connection from the listener within timeout_ms: *out is a new
 * endpoint owned by the caller. 0, -EINVAL (not listening), -ETIMEDOUT. */
int gm_ucx_accept(struct gm_ucx *u, struct gm_ucx_ep **out, int timeout_ms);

/* Connect to a listener at "ADDR:PORT" and wait until the connection is up
 * (the endpoint flushed) or timeout_ms passes. *out is owned by the caller.
 * 0, -EINVAL, -ETIMEDOUT, -ECONNREFUSED / -EHOSTUNREACH / -ECONNRESET. */
int gm_ucx_connect(struct gm_ucx *u, const char *addr_port, struct gm_ucx_ep **out, int timeout_ms);

/* Close ep: gracefully within timeout_ms while the peer is alive, forced
 * otherwise (or when the deadline passes). NULL does nothing. */
void gm_ucx_ep_close(struct gm_ucx_ep *ep, int timeout_ms);

/* False once UCX reported an error on ep (peer died, link lost, a put timed
 * out); every later operation on it fails fast with -ECONNRESET. */
bool gm_ucx_ep_alive(const struct gm_ucx_ep *ep);

/*
 * Register [addr, addr+len) (an existing mapping, e.g. a memfd ring; not
 * taken over, must outlive the region) for remote reads and writes. 0,
 * -EINVAL (NULL or len 0), -ENOMEM, -EIO.
 */
int gm_ucx_mem_map(struct gm_ucx *u, void *addr, size_t len, struct gm_ucx_region **out);

/* Deregister. NULL does nothing. */
void gm_ucx_mem_unmap(struct gm_ucx_region *r);

/*
 * What a peer needs to write into r: a blob (base address, length, UCX packed
 * rkey) in *blob (malloc'd: the caller frees it) of *len bytes. 0 or -errno.
 * The blob carries no secret beyond UCX's rkey: hand it only to trusted peers.
 */
int gm_ucx_region_pack(struct gm_ucx_region *r, void **blob, size_t *len);

/* Unpack a peer's blob against ep. The blob is validated (magic, version,
 * lengths) before UCX sees its rkey. 0, -EBADMSG (corrupt), -ECONNRESET (ep
 * dead) or -errno. */
int gm_ucx_rkey_unpack(struct gm_ucx_ep *ep, const void *blob, size_t len,
		       struct gm_ucx_rkey **out);

/* Release an unpacked rkey (before its endpoint is closed). NULL does nothing. */
void gm_ucx_rkey_destroy(struct gm_ucx_rkey *k);

/* Length of the peer's region behind k. */
uint64_t gm_ucx_rkey_length(const struct gm_ucx_rkey *k);

/*
 * Write len bytes from src at byte offset `offset` of the peer's region k
 * (unpacked against ep), and wait until they are in the peer's memory (or,
 * with GM_UCX_PUT_LOCAL, until src may be reused), at most timeout_ms.
 * A range outside the region is refused before UCX sees it (-ERANGE).
 * 0, -ERANGE, -EINVAL (k not of ep), -ECONNRESET (ep dead), -ETIMEDOUT (ep
 * is then closed by force and dead: src is free again on return), or the
 * peer's failure as -errno. The message names the offset, length and cause.
 */
int gm_ucx_put(struct gm_ucx_ep *ep, struct gm_ucx_rkey *k, uint64_t offset, const void *src,
	       size_t len, unsigned flags, int timeout_ms);

/* Wait until every put issued on ep is in the peer's memory, at most
 * timeout_ms. 0, -ECONNRESET, -ETIMEDOUT (ep then dead) or -errno. */
int gm_ucx_flush(struct gm_ucx_ep *ep, int timeout_ms);

#endif
