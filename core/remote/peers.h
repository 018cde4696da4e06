/*
 * peers.h - who the agent's peers are (peers.c): the entries of --peers and
 * --peers-file, and the addresses they resolve to.
 *
 * The idea: an entry is a NAME or an ADDR (IPv4, IPv6 in brackets when a port
 * follows), with :PORT or, without one, this agent's --listen port (the
 * agents of a cluster usually share one). A numeric entry is its address at
 * once. A name may stand for many agents (a Kubernetes headless Service, a
 * DNS round-robin name): it is resolved by getaddrinfo on a resolver thread,
 * never on the agent's loop, so a slow or dead DNS server delays only the next
 * answer; at start, every refresh period (--peers-refresh-ms, 30 s) and when
 * asked (SIGHUP). Each answer wakes the loop through an eventfd, and the loop
 * (agent.c) makes the new set of peers from the entries and the last answer
 * per name, in one step. A lookup that fails for a temporary reason (no answer
 * in time, SERVFAIL) keeps the name's last addresses, so a DNS outage does not
 * cut the cluster apart; a name the DNS says does not exist, or has no address,
 * has none.
 *
 * Not here: what a peer is to the agent (agent.c: dialing, the allowed
 * addresses, what happens to a peer that leaves).
 * Threads: the parsers and gm_peers_lookup are pure (any thread); the
 * resolver's functions are the agent loop's, its thread is its own.
 */
#ifndef GM_REMOTE_PEERS_H
#define GM_REMOTE_PEERS_H

#include <arpa/inet.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PEER_ENTRIES	 64	    /* entries of --peers and --peers-file together */
#define PEER_ADDRS	 64	    /* addresses kept per name (more: the first, sorted) */
#define PEERS_REFRESH_MS 30000	    /* names resolved again this often */
#define PEERS_FILE_MAX	 (64 << 10) /* the longest --peers-file read */

/* One entry: host is a DNS name or a numeric address (numeric), port its port. */
struct peer_entry {
	char host[256];
	uint16_t port;
	bool numeric;
};

/* What one host resolved to: its addresses (numeric, sorted, unique; at most
 * PEER_ADDRS of total), the lookup's getaddrinfo error (0: none) and whether
 * the addresses are an earlier answer's, kept over a temporary failure. */
struct peer_answer {
	char host[256];
	char ip[PEER_ADDRS][INET6_ADDRSTRLEN];
	int n, total, gai;
	bool kept;
};

/* Parse one entry ("NAME", "NAME:PORT", "ADDR", "ADDR:PORT", "[V6]:PORT");
 * dport: the port of an entry without one (0: such an entry is refused).
 * 0 or -EINVAL with err (the entry quoted). */
int gm_peers_entry(const char *s, uint16_t dport, struct peer_entry *e, char *err, size_t errlen);

/* Append the entries of a comma-separated list (--peers) to e[*n..max).
 * 0 or -EINVAL with err ("--peers: ..."). */
int gm_peers_list(const char *list, uint16_t dport, struct peer_entry *e, int max, int *n,
		  char *err, size_t errlen);

/* Append the entries of a file, one per line ('#' starts a comment, blank
 * lines skipped), to e[*n..max). A regular file of at most PEERS_FILE_MAX
 * bytes, read without blocking. 0 or -errno with err naming FILE:LINE. */
int gm_peers_file(const char *path, uint16_t dport, struct peer_entry *e, int max, int *n,
		  char *err, size_t errlen);

/* Resolve host into a (numeric_only: without asking DNS). Returns getaddrinfo's
 * 0 or EAI_* (a->gai too); a->n 0 on an error. */
int gm_peers_lookup(const char *host, bool numeric_only, struct peer_answer *a);

/* Whether a failed lookup's error is a temporary one (the last answer stands). */
bool gm_peers_temporary(int gai);

/* Order two numeric addresses (IPv4 before IPv6, then by their bytes). */
int gm_peers_ipcmp(const char *a, const char *b);

/* The resolver thread. start: its eventfd (readable when an answer waits)
 * into *efd, which stays the resolver's; names: the hosts of e[0..n) that
 * are not numeric, looked up at once and then every refresh_ms; kick: at
 * once again; pending: whether an answer came (the eventfd read); take: the answers of the last
 * round into out (count), or -1 when none came since the last take; stop: the thread ends after its
 * lookup in flight (never waited for) and frees the resolver. 0 or -errno. */
struct peers_resolver;
int gm_peers_resolver_start(struct peers_resolver **out, uint32_t refresh_ms, int *efd);
void gm_peers_resolver_names(struct peers_resolver *res, const struct peer_entry *e, int n);
void gm_peers_resolver_kick(struct peers_resolver *res);
bool gm_peers_resolver_pending(struct peers_resolver *res);
int gm_peers_resolver_take(struct peers_resolver *res, struct peer_answer *out, int max);
void gm_peers_resolver_stop(struct peers_resolver *res);

#endif
