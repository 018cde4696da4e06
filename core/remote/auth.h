/*
 * auth.h - the shared secret of a group of node agents (`goldminer node
 * --secret FILE`): loaded and checked like an ssh private key, and the keys
 * derived from it.
 *
 * The secret itself never keys a connection. The control port (tls.h, ctl.h)
 * speaks TLS 1.3 with an external pre-shared key, and a key shared by a whole
 * group is open to reflection in TLS 1.3 (the Selfie attack, Drucker and
 * Gueron, 2019: a party that plays both roles with one key can be made to
 * answer its own handshake). So every connection's key is derived with
 * gm_auth_derive (HKDF-SHA256) from the group secret and both ends'
 * identities, client first: agent A dialling B uses K(A, B), B dialling A
 * K(B, A), and no agent ever holds a key under which it would accept a
 * handshake it started itself. An earlier, home-made HMAC challenge-response
 * in this place bound neither identity and was reflectable; it is gone.
 *
 * Not here: TLS, identities and which peers are admitted (tls.c, ctl.c,
 * agent.c). Built with OpenSSL's libcrypto, so it is NOT in libgoldminer: it
 * is part of the remote-workers plugin (core/remote/, libgoldminer-remote.so),
 * a private header that is not installed; tests/test_auth.c links its object
 * with -lcrypto.
 *
 * Threads: every function is pure or uses only its arguments; safe from any
 * thread.
 */
#ifndef GM_REMOTE_AUTH_H
#define GM_REMOTE_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GM_AUTH_NONCE	 32   /* bytes of gm_auth_nonce's randomness */
#define GM_AUTH_MIN	 16   /* a secret file holds at least this many bytes ... */
#define GM_AUTH_MAX	 4096 /* ... and at most this many (one trailing \n not counted) */
#define GM_AUTH_INFO_MAX 512  /* the longest salt or info gm_auth_derive takes */

/* A loaded secret: the SHA-256 of the file's contents (len 32). The array is
 * larger so a future derivation can change the length without changing the
 * struct. Wipe it with OPENSSL_cleanse or explicit_bzero when done. */
struct gm_auth_key {
	uint8_t key[64];
	size_t len;
};

/*
 * Load the secret file at path into *k. The file must be a regular file (a
 * symlink is followed, and its target must pass), owned by the effective uid,
 * with no permission bits for group or others (mode & 077 == 0, like ssh's
 * private keys), and hold GM_AUTH_MIN..GM_AUTH_MAX bytes after one trailing
 * newline is dropped (so `echo word > FILE` and `printf word > FILE` give the
 * same key). Any content works: the key is its SHA-256.
 *
 * Returns 0, or -ENOENT / -EACCES (cannot open), -EPERM (wrong owner or
 * mode), -EINVAL (not a regular file, too short, too long), -EIO. On error
 * err (errlen bytes; may be NULL) says which file, what is wrong and the fix
 * ("chmod 600 FILE"), and *k is zeroed.
 */
int gm_auth_load(struct gm_auth_key *k, const char *path, char *err, size_t errlen);

/* Fill n with GM_AUTH_NONCE bytes from the kernel's CSPRNG (getrandom,
 * retried on EINTR): job tokens and the like. Returns 0 or -errno (-ENOSYS on
 * a kernel without getrandom); n must not be used then. */
int gm_auth_nonce(uint8_t n[GM_AUTH_NONCE]);

/*
 * out = HKDF-SHA256 (RFC 5869) with ikm the bytes of k, the salt string salt
 * (without its NUL) and info (infolen bytes): 32 bytes, out->len 32. The
 * control port's keys are made so (tls.h): one per ordered pair of agents
 * from the group secret, one per remote worker from its home session's
 * exported secret; never the group secret itself. Returns 0, -EINVAL (k
 * empty, salt or info too long) or -EIO (libcrypto failed); *out is zeroed on
 * error.
 */
int gm_auth_derive(const struct gm_auth_key *k, const char *salt, const void *info, size_t infolen,
		   struct gm_auth_key *out);

/* Wipe a key (OPENSSL_cleanse: the compiler keeps the stores). */
void gm_auth_wipe(struct gm_auth_key *k);

#endif
