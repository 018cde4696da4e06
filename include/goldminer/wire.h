/*
 * wire.h - the node wire protocol: what a loader and the node agent say to each
 * other over the agent's Unix SOCK_SEQPACKET socket, written once for both sides.
 *
 * One request, one reply, each one fixed-size packet; an ATTACH reply carries the
 * job's ring as a memfd (SCM_RIGHTS). Magic and version are filled in by
 * gm_wire_request/gm_wire_reply and checked by gm_wire_request_valid/gm_wire_call,
 * here and nowhere else; a job's options travel through one table (wire.c) in
 * both directions, so that a new option is one row. The format is private to this
 * version of goldminer (the version is checked on both sides); it is not a stable
 * protocol.
 *
 * Both sides check who is at the other end: the agent the client's uid (node.c),
 * the client the agent's (gm_wire_connect: SO_PEERCRED, same effective uid, root
 * only when GM_NODE_TRUST_ROOT=1 says so). The default socket lives in a
 * directory of its own that only its user can enter (gm_wire_socket_dir).
 *
 * It does not listen, accept or decide anything: node.c does.
 */
#ifndef GOLDMINER_WIRE_H
#define GOLDMINER_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/un.h>

#include "goldminer/aug.h"
#include "goldminer/job.h"

#define GM_NODE_MAGIC 0x444e4d47u /* "GMND" */
/* 3: a reply's message of GM_NODE_MSG bytes; 4: CMDJOB (a version-3 agent would
 * answer it "unknown request type 4": a version names every request type too);
 * 5: struct gm_aug_spec (in the request) grew the colour jitter's ranges;
 * 6: an ATTACH may carry the job's running ring (adopted, no ring sent back);
 * a request's and a reply's flags (GM_NODE_TRAINER_WORKERS) */
#define GM_NODE_VERSION 6
/* Bytes of a reply's message: the agent's status, every job and peer, fits (2 KiB,
 * version 2, cut the JSON of three jobs with remote workers short). */
#define GM_NODE_MSG 65536

enum gm_node_msg {
	/* request a job; reply carries the ring memfd. (6) With one fd (SCM_RIGHTS),
	 * the job's running ring, made by an agent that went away and fed meanwhile
	 * by the client's own workers: the agent adopts it as it is (checked against
	 * the options: batch, sample bytes, tasks) and sends no ring back. */
	GM_NODE_ATTACH = 1,
	GM_NODE_SCALE = 2,  /* fix this job's pool size (workers), 0 = back to the policy */
	GM_NODE_STATUS = 3, /* reply.msg holds one JSON line about the agent */
	/* A job whose ring the client made (a binding's, bind.h), served by workers that
	 * run the client's command: root holds the command's arguments, each
	 * NUL-terminated, then an empty one (at most GM_NODE_CMD_ARGS; the first an
	 * absolute path); workers: cap (0 = policy decides); lease_timeout_ms. Two
	 * fds travel with it (SCM_RIGHTS): the ring's memfd, then what the workers
	 * load (their fd 5). Only a client of the agent's own uid may send it. */
	GM_NODE_CMDJOB = 4,
};

#define GM_NODE_CMD_ARGS 8 /* a CMDJOB command's arguments, at most */
#define GM_WIRE_MAX_FDS	 2 /* fds one request may carry */

struct gm_node_req {
	uint32_t magic, version, type;
	int32_t workers; /* ATTACH: cap (0 = policy decides); SCALE: fixed size */
	int32_t pid;	 /* SCALE from another connection: the job's consumer pid */
	char root[4096];
	struct gm_aug_spec aug;
	uint64_t seed, start_batch;
	uint32_t batch_size, epoch, epochs, slots;
	uint32_t on_error, shuffle, drop_last, chaos_kill_ms;
	uint32_t lease_timeout_ms; /* (version 2) the job's lease deadline, 0: default */
	uint32_t flags;		   /* (version 6) CMDJOB: GM_NODE_TRAINER_WORKERS */
};

/*
 * Who runs a CMDJOB's workers. The agent runs the client's command when it can:
 * its first argument is a file it may execute and a probe of it (the command
 * with "--probe" appended, run once per interpreter file and remembered)
 * exits 0. When it cannot (a container whose image has not the trainer's
 * interpreter), or when the request carries this flag (the trainer's
 * GOLDMINER_NODE_WORKERS=trainer), the reply carries this flag: the trainer
 * runs the workers itself over its ring, and the agent still sizes them, with
 * its division across jobs, through the ring header's a_target (ring.h).
 */
#define GM_NODE_TRAINER_WORKERS 1u

/*
 * An ATTACH whose samples are coefficient slots (gm_loader_opts.gpu_decode,
 * coef.h): the agent's workers write them, its ring is sized for them, and its
 * reply carries the flag back. An agent without it (an older build ignores a
 * flag it does not know) made pixel slots: the client refuses that ring.
 */
#define GM_NODE_COEF 2u

struct gm_node_reply {
	uint32_t magic, version;
	int32_t status; /* 0 or -errno */
	uint32_t batches_per_epoch;
	uint64_t fingerprint; /* of the agent's dataset index */
	uint32_t flags;	      /* (version 6) CMDJOB: GM_NODE_TRAINER_WORKERS */
	uint32_t pad;
	char msg[GM_NODE_MSG];
};

/* The environment variable that lets a client trust an agent run by root. */
#define GM_NODE_TRUST_ROOT_ENV "GM_NODE_TRUST_ROOT"

/*
 * Connect to the agent at path and check who it is: its SO_PEERCRED uid must be
 * this process's effective uid, or 0 when $GM_NODE_TRUST_ROOT is "1" (the agent
 * writes every batch the client reads, so it is trusted as the client itself).
 * The socket, or -errno with the reason in err: "cannot reach the node agent at
 * PATH: why"; -EACCES "refusing the node agent at PATH: it runs as uid U ...".
 */
int gm_wire_connect(const char *path, char *err, size_t errlen);

/* A SOCK_SEQPACKET socket (close-on-exec) and path's address in *sa, for both the
 * agent's listener and the client: the fd, or -ENAMETOOLONG / -errno with a
 * message in err. */
int gm_wire_socket(const char *path, struct sockaddr_un *sa, char *err, size_t errlen);

/* The default socket path into buf: $XDG_RUNTIME_DIR/goldminer/goldminer.sock,
 * else /run/goldminer-<euid>/goldminer.sock. Returns buf. */
const char *gm_wire_default_socket(char *buf, size_t len);

/*
 * The directory of the socket `path` must be a directory (not a symlink) owned by
 * this effective uid with no group or other permissions (0700), so that no one
 * else can put a socket there first. create: make it (mode 0700; its parent must
 * exist) when it is absent. 0, or -errno with the check that failed and how to
 * fix it in err: -ENOTDIR (not a directory, or a symlink), -EPERM (another
 * owner, or group/other permissions), or mkdir's error.
 */
int gm_wire_socket_dir(const char *path, bool create, char *err, size_t errlen);

/* A request of `type`: magic and version set, everything else 0. */
void gm_wire_request(struct gm_node_req *req, enum gm_node_msg type);

/* An ATTACH request for a job with options o: the option fields through the
 * table, the root made absolute (the agent runs in another directory).
 * 0, or -ENAMETOOLONG when the root does not fit. */
int gm_wire_attach_request(struct gm_node_req *req, const struct gm_loader_opts *o);

/* The agent's side: the options of an ATTACH request (o->root points into req;
 * root is NUL-terminated here). Fields not sent are 0. The values are not yet
 * checked: they come from another process (gm_pool_check does). */
void gm_wire_request_opts(struct gm_node_req *req, struct gm_loader_opts *o);

/* Is what recv() returned (n bytes into req) a request of this version? */
bool gm_wire_request_valid(const struct gm_node_req *req, ssize_t n);

/* A request that came as n bytes at data (any alignment), from another process
 * or, inside a peer agent's LEND, another host: the rule gm_wire_request_valid
 * applies (magic, this build's GM_NODE_VERSION, this build's size). 0 with a
 * copy in *req, its root NUL-terminated; -EPROTONOSUPPORT, another goldminer's
 * request (a version or a size not this build's: both in why, as "another
 * goldminer version: ..."); -EBADMSG, not a request. Pure. */
int gm_wire_request_take(struct gm_node_req *req, const void *data, size_t n, char *why, size_t wl);

/* Client: gm_wire_call with nfds (<= GM_WIRE_MAX_FDS) fds sent with the request
 * (SCM_RIGHTS; the caller keeps its own). */
int gm_wire_call_fds(int fd, const struct gm_node_req *req, const int *fds, int nfds,
		     struct gm_node_reply *rep, int *fd_out);

/* Agent: receive one request from fd into req (recv's return: bytes, 0 at
 * hang-up, -1 with errno) and the fds it carried, close-on-exec, into fds[]
 * (*nfds of them, at most GM_WIRE_MAX_FDS; any more are closed). The caller
 * owns them, and closes them whatever the request turns out to be. */
ssize_t gm_wire_recv(int fd, struct gm_node_req *req, int *fds, int *nfds);

/* Client: send req on fd, then wait for the reply and at most one fd (into
 * *fd_out when fd_out is not NULL, else closed; -1 when none came). 0 with
 * rep->msg NUL-terminated (an agent that refused the connection before reading
 * the request, e.g. at its connection limit, still gets its reply read: status
 * and words are in rep); -EPIPE when the agent hung up without a reply;
 * -EPROTONOSUPPORT when it is a reply of another protocol version (that version
 * in rep->version: client and agent are different builds); -EPROTO when the
 * reply is not one (size or magic). */
int gm_wire_call(int fd, const struct gm_node_req *req, struct gm_node_reply *rep, int *fd_out);

/* Agent: send a reply (status 0 or -errno; ring_fd >= 0 travels with it), never
 * blocking (MSG_DONTWAIT): a peer that does not read its replies loses them, it
 * cannot stall the agent. A peer that is gone is not an error here either: the
 * agent's poll loop sees its hang-up. */
void gm_wire_reply(int fd, int status, int ring_fd, uint32_t bpe, uint64_t fingerprint,
		   const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* Agent: the reply of status 0 to an ATTACH, with the ring's fd (-1: none sent,
 * an adopted ring) and the reply's flags (GM_NODE_COEF). */
void gm_wire_reply_attach(int fd, int ring_fd, uint32_t bpe, uint64_t fingerprint, uint32_t flags,
			  const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* Agent: gm_wire_reply of status 0 to a CMDJOB with the reply's flags (wire.h's
 * GM_NODE_TRAINER_WORKERS), no fd. */
void gm_wire_reply_flags(int fd, uint32_t flags, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
