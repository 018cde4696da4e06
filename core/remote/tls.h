/*
 * tls.h - the control port's TLS 1.3 (tls.c): contexts, identities, keys and
 * the secret a session exports, for ctl.c's handshake.
 *
 * The idea: the control port speaks a standard authenticated protocol, TLS
 * 1.3 with an external pre-shared key (RFC 8446 section 2.2; psk_dhe_ke, so
 * every session also has a fresh ECDHE secret), instead of a challenge of our
 * own. Who a client is travels as its PSK identity, printable words:
 *
 *     "goldminer/V agent IP:PORT"          an agent: its address as the server
 *                                          sees the connection's source, and
 *                                          its control port
 *     "goldminer/V worker SID TOKEN"       a remote worker: the session (hex)
 *                                          its lending agent has with the home,
 *                                          and the job (hex)
 *
 * (V is MSG_VERSION: another version is refused in words.) The key of a
 * connection is never the group secret. An agent's is HKDF over the secret
 * and both identities, client first (gm_remote_tls_agent_key), so A->B and
 * B->A have different keys and no agent accepts a handshake under the key
 * of one it started: relaying an agent's own ClientHello back to it fails,
 * whatever address the relay comes from (the Selfie attack on group PSKs).
 * A remote worker's is HKDF over the secret its lender's session with the
 * home exported (gm_remote_tls_export) and its identity, so a worker is tied
 * to that live session and that job: a lender that reconnected, or a former
 * peer, has no key a home will take.
 *
 * Certificates instead (--tls-cert, --tls-key, --tls-ca: an operator's own
 * PKI): agents then authenticate each other by X.509 certificates that chain
 * to the CA, mutually, and offer no pre-shared key; a certificate must name
 * the other end's address or its --peers name (gm_remote_tls_cert_names), and
 * one that is this agent's own (a reflected handshake) is refused. Remote
 * workers keep their session-bound pre-shared keys (no certificate of their
 * own): a server with certificates still chooses a PSK for a client that
 * offers one, and asks the others for a certificate.
 *
 * Not here: which identities a server admits (ctl.c: the source address,
 * --peers through the owner, never its own identity), the frames inside TLS
 * (ctl.c), sockets. Threads: the contexts are built once (gm_remote_net_init)
 * and read-only after; an SSL and its side belong to one connection.
 */
#ifndef GM_REMOTE_TLS_H
#define GM_REMOTE_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <arpa/inet.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/socket.h>

#include "auth.h"
#include "msg.h"

#define TLS_ID_MAX 128 /* the longest identity taken, NUL included */

/* One side of one connection's TLS: what the PSK callbacks read and write.
 * A client sets id and key before its handshake starts. A server sets psk,
 * which chooses the key for the identity the client presents (0; or -errno
 * with why set: the handshake then fails), and remembers the identity. */
struct tls_side {
	char id[TLS_ID_MAX];
	struct gm_auth_key key;
	int (*psk)(struct tls_side *t, const char *id, struct gm_auth_key *key);
	char why[256];
	int status; /* the psk callback's refusal, 0: none */
};

/* A parsed identity: role ROLE_AGENT (ip, port) or ROLE_WORKER (sid, token). */
struct tls_id {
	int role;
	uint32_t version;
	char ip[INET6_ADDRSTRLEN];
	uint32_t port;
	uint8_t sid[SESSION_ID];
	uint64_t token;
};

/* The client's and the server's contexts (TLS 1.3 only, TLS_AES_128_GCM_SHA256,
 * no tickets, no certificates): 0 or -EIO with err. fini frees them (NULL
 * ones too). */
int gm_remote_tls_init(SSL_CTX **cli, SSL_CTX **srv, char *err, size_t errlen);
void gm_remote_tls_fini(SSL_CTX **cli, SSL_CTX **srv);

/* A connection's SSL on fd (not owned) as client or server, t its side (kept
 * by the caller for the SSL's life). NULL: no memory. */
SSL *gm_remote_tls_new(SSL_CTX *ctx, int fd, bool client, struct tls_side *t);

/* Load the operator's certificate chain, its key (a file others cannot read)
 * and the CA to trust into both contexts; the server then asks every client
 * that offers no PSK for a certificate. The own certificate must verify
 * against ca. 0 or -errno with err naming the file and what is wrong. */
int gm_remote_tls_certs(SSL_CTX *cli, SSL_CTX *srv, const char *cert, const char *key,
			const char *ca, char *err, size_t errlen);
/* Whether cert names the address ip (a subjectAltName IP) or the host name
 * (a DNS subjectAltName, RFC 6125 rules; NULL or "": none). */
bool gm_remote_tls_cert_names(X509 *cert, const char *ip, const char *name);
/* Whether the other end of ssl presented this end's own certificate. */
bool gm_remote_tls_own_cert(SSL *ssl);

/* One step of the handshake: 1 done with a PSK, 2 done with a certificate
 * that verified against the CA (only with gm_remote_tls_certs), 0 it waits
 * (*want_write: for the socket to take bytes, else to bring some), -1 failed
 * (gm_remote_tls_why says why). */
int gm_remote_tls_handshake(SSL *ssl, bool *want_write);
/* SSL_read / SSL_write's result as: > 0 bytes, 0 it waits (*want_write as
 * above), -1 the connection ended or failed. */
int gm_remote_tls_io(SSL *ssl, int ret, bool *want_write);
/* Why the last call on ssl failed, in words ("" when OpenSSL said nothing):
 * a binder that does not verify is a client without the secret; a decrypt
 * error alert from the server, a refusal of ours; with certs (this end uses
 * certificates), a certificate that does not verify and why. ssl may be NULL. */
void gm_remote_tls_why(SSL *ssl, char *buf, size_t len, bool client, bool certs);

/* The session's id and secret, the same at both ends (RFC 8446 exporter,
 * label "EXPORTER-goldminer session"). 0 or -EIO. */
int gm_remote_tls_export(SSL *ssl, uint8_t sid[SESSION_ID], uint8_t xs[SESSION_KEY]);

/* Identities: an agent's from its address (IPv4-mapped IPv6 as IPv4) and
 * control port; a remote worker's from the session id and job token. The
 * length written, or -EINVAL (not an IP address, too long). */
int gm_remote_tls_agent_id(char *buf, size_t len, const struct sockaddr *sa, uint32_t port);
int gm_remote_tls_worker_id(char *buf, size_t len, const uint8_t sid[SESSION_ID], uint64_t token);
/* Parse an identity of len bytes (not NUL-terminated; printable ASCII only).
 * 0, -EPROTONOSUPPORT (a goldminer identity of another version: id->version
 * says which) or -EPROTO (not one of ours). */
int gm_remote_tls_parse_id(const char *s, size_t len, struct tls_id *id);

/* Keys: an agent connection's, from the group secret and both identities
 * (client first); a remote worker's, from the session secret its lender
 * exported and its identity. 0 or -errno (*out zeroed). */
int gm_remote_tls_agent_key(const struct gm_auth_key *group, const char *client_id,
			    const char *server_id, struct gm_auth_key *out);
int gm_remote_tls_worker_key(const uint8_t xs[SESSION_KEY], const char *id,
			     struct gm_auth_key *out);

#endif
