/*
 * auth.h - peer authentication by a shared secret (issue 12): two node agents
 * that hold the same secret file (`goldminer node --secret FILE`) prove it to
 * each other before either acts on the other's requests.
 *
 * The exchange it supports is a mutual challenge-response over any channel
 * (the agents' first UCX messages):
 *
 *     client -> server   nonce_c                                  (32 random bytes)
 *     server -> client   nonce_s, proof("server", nonce_c, nonce_s)
 *     client             verify("server", nonce_c, nonce_s, proof): else hang up
 *     client -> server   proof("client", nonce_s, nonce_c)
 *     server             verify("client", nonce_s, nonce_c, proof): else hang up
 *
 * where proof(role, a, b) = HMAC-SHA256(key, role || a || b). Each side
 * proves knowledge of the key over a nonce it did not choose, so a recorded
 * exchange cannot be replayed (fresh nonces each time); the role string makes
 * a server's proof useless as a client's answer, so a peer cannot reflect a
 * challenge back to the side that issued it and have it answer itself. The
 * secret itself never crosses the wire. The first nonce after the role is
 * always the challenge (the one the verifying side chose), the second the
 * prover's own.
 *
 * Not here: transport, message framing, which hosts may connect (the agent
 * checks --peers), encryption of the traffic that follows (the channel is
 * authenticated at its start, not protected afterwards). Built with OpenSSL's
 * libcrypto, so it is NOT in libgoldminer: it goes into the remote-workers
 * plugin (libgoldminer-remote.so), and this header is not installed.
 *
 * Threads: every function is pure or uses only its arguments; safe from any
 * thread.
 */
#ifndef GOLDMINER_AUTH_H
#define GOLDMINER_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GM_AUTH_NONCE	 32   /* bytes of a nonce */
#define GM_AUTH_PROOF	 32   /* bytes of a proof (HMAC-SHA256) */
#define GM_AUTH_MIN	 16   /* a secret file holds at least this many bytes ... */
#define GM_AUTH_MAX	 4096 /* ... and at most this many (one trailing \n not counted) */
#define GM_AUTH_ROLE_MAX 128  /* the longest role string gm_auth_proof takes */

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
 * retried on EINTR). Returns 0 or -errno (-ENOSYS on a kernel without
 * getrandom); n must not be used then. */
int gm_auth_nonce(uint8_t n[GM_AUTH_NONCE]);

/*
 * out = HMAC-SHA256(k, role || challenge || own), role without its NUL:
 * challenge is the nonce the peer sent (the one that will verify), own the
 * nonce this side chose. role is
 * "server" or "client" in the exchange above (at most GM_AUTH_ROLE_MAX bytes).
 * Returns 0, -EINVAL (role too long, key empty) or -EIO (libcrypto failed);
 * out is zeroed on error.
 */
int gm_auth_proof(const struct gm_auth_key *k, const char *role,
		  const uint8_t challenge[GM_AUTH_NONCE], const uint8_t own[GM_AUTH_NONCE],
		  uint8_t out[GM_AUTH_PROOF]);

/* Whether proof == gm_auth_proof(k, role, challenge, own), compared in
 * constant time (CRYPTO_memcmp): the verifier passes its own nonce as
 * challenge and the peer's as own. False also when the proof cannot be
 * computed. */
bool gm_auth_verify(const struct gm_auth_key *k, const char *role,
		    const uint8_t challenge[GM_AUTH_NONCE], const uint8_t own[GM_AUTH_NONCE],
		    const uint8_t proof[GM_AUTH_PROOF]);

#endif
