/*
 * tls.c - the control port's TLS 1.3 with external pre-shared keys (tls.h).
 *
 * The idea: OpenSSL does the protocol; this file only says which key goes
 * with which identity, and refuses whatever is not a PSK handshake. Both
 * contexts allow TLS 1.3 alone, one cipher suite (TLS_AES_128_GCM_SHA256,
 * whose hash, SHA-256, the PSK is bound to) and no session tickets. A PSK is
 * handed to OpenSSL as a session object built from the key (the documented
 * way for TLS 1.3 external PSKs). The client also demands a certificate it
 * can never verify (an empty trust store): a server that ignores the PSK and
 * offers a certificate instead fails, and after the handshake the caller
 * checks that the PSK was what authenticated it (SSL_session_reused).
 *
 * Not here: sockets, the frames inside TLS and who is admitted (ctl.c).
 */
#include "tls.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/x509v3.h>

#include "goldminer/util.h"

#define IDENT_PREFIX "goldminer/"
#define EXPORT_LABEL "EXPORTER-goldminer session"

static const unsigned char aes128gcm_sha256[2] = {0x13, 0x01};

/* A session object that carries key as the PSK of cipher c. NULL: no memory. */
static SSL_SESSION *psk_session(const SSL_CIPHER *c, const struct gm_auth_key *key)
{
	SSL_SESSION *s = SSL_SESSION_new();
	if (!s || !SSL_SESSION_set1_master_key(s, key->key, key->len) ||
	    !SSL_SESSION_set_cipher(s, c) || !SSL_SESSION_set_protocol_version(s, TLS1_3_VERSION)) {
		SSL_SESSION_free(s);
		return NULL;
	}
	return s;
}

/* The client's PSK: its side's identity and key (SHA-256 only). */
static int use_psk(SSL *ssl, const EVP_MD *md, const unsigned char **id, size_t *idlen,
		   SSL_SESSION **sess)
{
	struct tls_side *t = SSL_get_app_data(ssl);
	const SSL_CIPHER *c = SSL_CIPHER_find(ssl, aes128gcm_sha256);
	*sess = NULL;
	if (!t || !c)
		return 0;
	if (!t->key.len)
		return 1; /* no PSK offered: an agent with a certificate */
	if (md && EVP_MD_type(md) != NID_sha256)
		return 1; /* (a retried hello for another hash: no PSK for it) */
	*sess = psk_session(c, &t->key);
	if (!*sess)
		return 0;
	*id = (const unsigned char *)t->id;
	*idlen = strlen(t->id);
	return 1;
}

/* The server's: the identity checked for printable words of a bounded length
 * here, then the side's psk chooses the key (or refuses: no session, and the
 * handshake fails for want of a certificate). */
static int find_psk(SSL *ssl, const unsigned char *id, size_t len, SSL_SESSION **sess)
{
	struct tls_side *t = SSL_get_app_data(ssl);
	const SSL_CIPHER *c = SSL_CIPHER_find(ssl, aes128gcm_sha256);
	struct gm_auth_key key;
	*sess = NULL;
	if (!t || !t->psk || !c)
		return 0;
	for (size_t i = 0; i < len; i++)
		if (id[i] < 0x20 || id[i] > 0x7e)
			len = sizeof(t->id); /* not words: refused below */
	if (len >= sizeof(t->id)) {
		t->status = -EPROTO;
		gm_errf(t->why, sizeof(t->why),
			"not a goldminer peer (its TLS identity is not ours)");
		return 1;
	}
	memcpy(t->id, id, len);
	t->id[len] = '\0';
	if (t->psk(t, t->id, &key) == 0)
		*sess = psk_session(c, &key);
	gm_auth_wipe(&key);
	return 1;
}

static SSL_CTX *context(bool client)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_method());
	if (!ctx || !SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) ||
	    !SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION) ||
	    !SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256") ||
	    !SSL_CTX_set_num_tickets(ctx, 0)) {
		SSL_CTX_free(ctx);
		return NULL;
	}
	SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
	if (client) {
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL); /* no CA: no certificate passes */
		SSL_CTX_set_psk_use_session_callback(ctx, use_psk);
	} else {
		SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
		SSL_CTX_set_psk_find_session_callback(ctx, find_psk);
	}
	return ctx;
}

int gm_remote_tls_init(SSL_CTX **cli, SSL_CTX **srv, char *err, size_t errlen)
{
	*cli = context(true);
	*srv = context(false);
	if (*cli && *srv)
		return 0;
	gm_remote_tls_fini(cli, srv);
	gm_errf(err, errlen, "TLS 1.3 with pre-shared keys: OpenSSL cannot make a context (%s)",
		ERR_reason_error_string(ERR_peek_last_error()) ?: "no reason given");
	ERR_clear_error();
	return -EIO;
}

void gm_remote_tls_fini(SSL_CTX **cli, SSL_CTX **srv)
{
	SSL_CTX_free(*cli);
	SSL_CTX_free(*srv);
	*cli = *srv = NULL;
}

SSL *gm_remote_tls_new(SSL_CTX *ctx, int fd, bool client, struct tls_side *t)
{
	SSL *ssl = SSL_new(ctx);
	if (!ssl || !SSL_set_fd(ssl, fd)) {
		SSL_free(ssl);
		return NULL;
	}
	SSL_set_app_data(ssl, t);
	if (client)
		SSL_set_connect_state(ssl);
	else
		SSL_set_accept_state(ssl);
	return ssl;
}

int gm_remote_tls_io(SSL *ssl, int ret, bool *want_write)
{
	if (ret > 0)
		return ret;
	switch (SSL_get_error(ssl, ret)) {
	case SSL_ERROR_WANT_READ:
		*want_write = false;
		return 0;
	case SSL_ERROR_WANT_WRITE:
		*want_write = true;
		return 0;
	default:
		return -1;
	}
}

int gm_remote_tls_handshake(SSL *ssl, bool *want_write)
{
	ERR_clear_error();
	int r = SSL_do_handshake(ssl);
	if (r == 1 && SSL_session_reused(ssl))
		return 1; /* authenticated by the PSK */
	if (r == 1)	  /* or by a certificate that verified (only a context with a CA asks) */
		return SSL_get0_peer_certificate(ssl) && SSL_get_verify_result(ssl) == X509_V_OK
			   ? 2
			   : -1;
	return gm_remote_tls_io(ssl, r, want_write) == 0 ? 0 : -1;
}

void gm_remote_tls_why(SSL *ssl, char *buf, size_t len, bool client, bool certs)
{
	unsigned long e = ERR_peek_last_error();
	int reason = ERR_GET_REASON(e);
	const char *s = ERR_reason_error_string(e);
	long v = ssl ? SSL_get_verify_result(ssl) : X509_V_OK;
	buf[0] = '\0';
	if (!e)
		return;
	if (certs && reason == SSL_R_CERTIFICATE_VERIFY_FAILED && v != X509_V_OK)
		gm_errf(buf, len, "its certificate does not verify against --tls-ca: %s",
			X509_verify_cert_error_string(v));
	else if (certs && (reason == SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE ||
			   reason == SSL_R_NO_SHARED_CIPHER))
		gm_errf(buf, len,
			"it presented no certificate (it uses --secret; this agent "
			"--tls-cert: give every agent the same kind)");
	else if (certs && client && reason == SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE)
		gm_errf(buf, len,
			"it refused the handshake: it uses --secret instead of certificates, "
			"or does not take this host as a peer (its log says which)");
	else if (certs && client &&
		 (reason == SSL_R_TLSV1_ALERT_UNKNOWN_CA ||
		  reason == SSL_R_SSLV3_ALERT_BAD_CERTIFICATE ||
		  reason == SSL_R_TLSV1_ALERT_DECRYPT_ERROR))
		gm_errf(buf, len,
			"it refused our certificate (another --tls-ca there, or ours expired)");
	else if (reason == SSL_R_BINDER_DOES_NOT_VERIFY)
		gm_errf(buf, len,
			"it does not know the secret (its key does not verify): check "
			"--secret on both hosts");
	else if (client && (reason == SSL_R_TLSV1_ALERT_DECRYPT_ERROR ||
			    reason == SSL_R_SSLV3_ALERT_ILLEGAL_PARAMETER))
		/* (OpenSSL 3 answers a binder that does not verify with illegal_parameter) */
		gm_errf(buf, len,
			"it refused our key: the secrets differ (check --secret on both "
			"hosts)");
	else if (client && reason == SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE)
		gm_errf(buf, len,
			"it refused the handshake: it does not take this host as a peer, "
			"or it runs another goldminer version (its log says which)");
	else if (client && (reason == SSL_R_CERTIFICATE_VERIFY_FAILED ||
			    reason == SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE))
		gm_errf(buf, len, "it does not know the secret (it offered a certificate instead)");
	else if (reason == SSL_R_WRONG_VERSION_NUMBER || reason == SSL_R_PACKET_LENGTH_TOO_LONG ||
		 reason == SSL_R_UNSUPPORTED_PROTOCOL || reason == SSL_R_HTTP_REQUEST)
		gm_errf(buf, len,
			"it does not speak TLS 1.3: another goldminer version, or not "
			"a goldminer agent");
	else if (!client && (reason == SSL_R_NO_SHARED_CIPHER ||
			     reason == SSL_R_NO_SUITABLE_SIGNATURE_ALGORITHM))
		gm_errf(buf, len,
			"it offered no pre-shared key: not a goldminer peer, or one with "
			"--tls-cert (this agent uses --secret: give every agent the same kind)");
	else if (client && (reason == SSL_R_DECRYPTION_FAILED_OR_BAD_RECORD_MAC ||
			    reason == SSL_R_DIGEST_CHECK_FAILED))
		gm_errf(buf, len, "it does not know the secret (its handshake does not verify)");
	else
		gm_errf(buf, len, "TLS: %s", s ? s : "no reason given");
	ERR_clear_error();
}

int gm_remote_tls_export(SSL *ssl, uint8_t sid[SESSION_ID], uint8_t xs[SESSION_KEY])
{
	uint8_t out[SESSION_ID + SESSION_KEY];
	int ok = SSL_export_keying_material(ssl, out, sizeof(out), EXPORT_LABEL,
					    strlen(EXPORT_LABEL), NULL, 0, 0);
	if (ok == 1) {
		memcpy(sid, out, SESSION_ID);
		memcpy(xs, out + SESSION_ID, SESSION_KEY);
	}
	OPENSSL_cleanse(out, sizeof(out));
	ERR_clear_error();
	return ok == 1 ? 0 : -EIO;
}

/* ---- certificates (--tls-cert, --tls-key, --tls-ca) --------------------------- */

/* The last OpenSSL reason, in words, and the queue cleared. */
static const char *ossl_reason(void)
{
	const char *s = ERR_reason_error_string(ERR_peek_last_error());
	ERR_clear_error();
	return s ? s : "no reason given";
}

/* A private key's file: a regular file that others cannot read. */
static int key_file_ok(const char *key, char *err, size_t errlen)
{
	struct stat st;
	if (stat(key, &st)) {
		int rc = -errno;
		gm_errf(err, errlen, "--tls-key %s: %s", key, strerror(-rc));
		return rc;
	}
	if (!S_ISREG(st.st_mode)) {
		gm_errf(err, errlen, "--tls-key %s: not a regular file", key);
		return -EINVAL;
	}
	if (st.st_mode & (S_IROTH | S_IWOTH)) {
		gm_errf(err, errlen,
			"--tls-key %s: readable or writable by every user (mode %03o): "
			"chmod 600 it",
			key, (unsigned)(st.st_mode & 0777));
		return -EACCES;
	}
	return 0;
}

/* ctx presents cert (a PEM chain) and key and trusts ca's certificates. */
static int load_certs(SSL_CTX *ctx, const char *cert, const char *key, const char *ca, char *err,
		      size_t errlen)
{
	ERR_clear_error();
	if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
		gm_errf(err, errlen, "--tls-cert %s: not a PEM certificate chain (%s)", cert,
			ossl_reason());
		return -EINVAL;
	}
	if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
		gm_errf(err, errlen,
			"--tls-key %s: not a PEM private key, or not the key of --tls-cert %s (%s)",
			key, cert, ossl_reason());
		return -EINVAL;
	}
	if (SSL_CTX_check_private_key(ctx) != 1) {
		gm_errf(err, errlen, "--tls-key %s is not the key of --tls-cert %s (%s)", key, cert,
			ossl_reason());
		return -EINVAL;
	}
	if (SSL_CTX_load_verify_locations(ctx, ca, NULL) != 1) {
		gm_errf(err, errlen, "--tls-ca %s: no PEM certificate in it (%s)", ca,
			ossl_reason());
		return -EINVAL;
	}
	return 0;
}

/* ctx's own certificate verifies against its trust store: a wrong --tls-ca
 * is said at start, not as every peer's refusal. */
static int own_verifies(SSL_CTX *ctx, const char *cert, const char *ca, char *err, size_t errlen)
{
	X509_STORE_CTX *v = X509_STORE_CTX_new();
	STACK_OF(X509) *chain = NULL;
	int ok = v && SSL_CTX_get0_chain_certs(ctx, &chain) &&
		 X509_STORE_CTX_init(v, SSL_CTX_get_cert_store(ctx), SSL_CTX_get0_certificate(ctx),
				     chain) == 1;
	ok = ok && X509_STORE_CTX_set_purpose(v, X509_PURPOSE_ANY) == 1 && X509_verify_cert(v) == 1;
	if (!ok)
		gm_errf(
		    err, errlen, "--tls-cert %s does not verify against --tls-ca %s: %s", cert, ca,
		    v ? X509_verify_cert_error_string(X509_STORE_CTX_get_error(v)) : "no memory");
	X509_STORE_CTX_free(v);
	ERR_clear_error();
	return ok ? 0 : -EINVAL;
}

int gm_remote_tls_certs(SSL_CTX *cli, SSL_CTX *srv, const char *cert, const char *key,
			const char *ca, char *err, size_t errlen)
{
	int rc = key_file_ok(key, err, errlen);
	if (!rc)
		rc = load_certs(cli, cert, key, ca, err, errlen);
	if (!rc)
		rc = load_certs(srv, cert, key, ca, err, errlen);
	if (!rc)
		rc = own_verifies(srv, cert, ca, err, errlen);
	/* a client that offers no pre-shared key (an agent) must show a
	 * certificate; one that offers a key (a remote worker) is never asked */
	if (!rc) {
		SSL_CTX_set_verify(srv, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
		/* (OpenSSL wants one where it verifies peers, tickets or not) */
		SSL_CTX_set_session_id_context(srv, (const unsigned char *)"goldminer", 9);
	}
	return rc;
}

bool gm_remote_tls_cert_names(X509 *cert, const char *ip, const char *name)
{
	if (!cert)
		return false;
	if (ip && ip[0] && X509_check_ip_asc(cert, ip, 0) == 1)
		return true;
	bool named = name && name[0] && X509_check_host(cert, name, 0, 0, NULL) == 1;
	ERR_clear_error();
	return named;
}

bool gm_remote_tls_own_cert(SSL *ssl)
{
	X509 *them = SSL_get0_peer_certificate(ssl);
	X509 *me = SSL_get_certificate(ssl);
	return them && me && X509_cmp(them, me) == 0;
}

/* ---- identities and keys ------------------------------------------------------ */

int gm_remote_tls_agent_id(char *buf, size_t len, const struct sockaddr *sa, uint32_t port)
{
	char ip[INET6_ADDRSTRLEN];
	const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)sa;
	if (sa->sa_family == AF_INET) {
		if (!inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, ip,
			       sizeof(ip)))
			return -EINVAL;
	} else if (sa->sa_family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&v6->sin6_addr)) {
		if (!inet_ntop(AF_INET, &v6->sin6_addr.s6_addr[12], ip, sizeof(ip)))
			return -EINVAL;
	} else if (sa->sa_family == AF_INET6) {
		if (!inet_ntop(AF_INET6, &v6->sin6_addr, ip, sizeof(ip)))
			return -EINVAL;
	} else {
		return -EINVAL;
	}
	int n = snprintf(buf, len, IDENT_PREFIX "%u agent %s:%u", MSG_VERSION, ip, port);
	return n > 0 && (size_t)n < len ? n : -EINVAL;
}

int gm_remote_tls_worker_id(char *buf, size_t len, const uint8_t sid[SESSION_ID], uint64_t token)
{
	uint64_t s = 0;
	for (int i = 0; i < SESSION_ID; i++)
		s = s << 8 | sid[i];
	int n = snprintf(buf, len, IDENT_PREFIX "%u worker %016" PRIx64 " %016" PRIx64, MSG_VERSION,
			 s, token);
	return n > 0 && (size_t)n < len ? n : -EINVAL;
}

/* Exactly 16 lower-case hex digits at s into *v. */
static bool hex64(const char *s, uint64_t *v)
{
	*v = 0;
	for (int i = 0; i < 16; i++) {
		char c = s[i];
		int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
		if (d < 0)
			return false;
		*v = *v << 4 | (uint64_t)d;
	}
	return true;
}

/* "IP:PORT" (the last ':' ends the address) into id, the address as
 * inet_ntop writes it. */
static int parse_agent(const char *rest, struct tls_id *id)
{
	const char *colon = strrchr(rest, ':');
	unsigned char b[16];
	char ip[INET6_ADDRSTRLEN], *end;
	size_t n = colon ? (size_t)(colon - rest) : 0;
	if (!n || n >= sizeof(ip) || !colon[1] || colon[1] < '1' || colon[1] > '9')
		return -EPROTO;
	memcpy(ip, rest, n);
	ip[n] = '\0';
	unsigned long port = strtoul(colon + 1, &end, 10);
	if (*end || port > 65535)
		return -EPROTO;
	int fam = inet_pton(AF_INET, ip, b) == 1 ? AF_INET : AF_INET6;
	if ((fam == AF_INET6 && inet_pton(AF_INET6, ip, b) != 1) ||
	    !inet_ntop(fam, b, id->ip, sizeof(id->ip)))
		return -EPROTO;
	id->port = (uint32_t)port;
	id->role = ROLE_AGENT;
	return 0;
}

int gm_remote_tls_parse_id(const char *s, size_t len, struct tls_id *id)
{
	char buf[TLS_ID_MAX], *end;
	size_t pl = strlen(IDENT_PREFIX);
	uint64_t sid;
	memset(id, 0, sizeof(*id));
	if (len >= sizeof(buf) || len < pl || memcmp(s, IDENT_PREFIX, pl))
		return -EPROTO;
	for (size_t i = 0; i < len; i++)
		if (s[i] < 0x20 || s[i] > 0x7e)
			return -EPROTO;
	memcpy(buf, s, len);
	buf[len] = '\0';
	if (buf[pl] < '1' || buf[pl] > '9')
		return -EPROTO;
	unsigned long v = strtoul(buf + pl, &end, 10);
	if (*end != ' ' || v > UINT32_MAX)
		return -EPROTO;
	id->version = (uint32_t)v;
	if (v != MSG_VERSION)
		return -EPROTONOSUPPORT;
	end++;
	if (!strncmp(end, "agent ", 6))
		return parse_agent(end + 6, id);
	if (strncmp(end, "worker ", 7) || strlen(end + 7) != 33 || end[7 + 16] != ' ' ||
	    !hex64(end + 7, &sid) || !hex64(end + 7 + 17, &id->token))
		return -EPROTO;
	for (int i = SESSION_ID - 1; i >= 0; i--, sid >>= 8)
		id->sid[i] = (uint8_t)sid;
	id->role = ROLE_WORKER;
	return 0;
}

int gm_remote_tls_agent_key(const struct gm_auth_key *group, const char *client_id,
			    const char *server_id, struct gm_auth_key *out)
{
	char info[2 * TLS_ID_MAX + 32];
	int n = snprintf(info, sizeof(info), "client=%s\nserver=%s", client_id, server_id);
	if (n < 0 || (size_t)n >= sizeof(info)) {
		memset(out, 0, sizeof(*out));
		return -EINVAL;
	}
	return gm_auth_derive(group, "goldminer control psk", info, (size_t)n, out);
}

int gm_remote_tls_worker_key(const uint8_t xs[SESSION_KEY], const char *id, struct gm_auth_key *out)
{
	struct gm_auth_key k = {.len = SESSION_KEY};
	memcpy(k.key, xs, SESSION_KEY);
	int rc = gm_auth_derive(&k, "goldminer worker psk", id, strnlen(id, TLS_ID_MAX), out);
	gm_auth_wipe(&k);
	return rc;
}
