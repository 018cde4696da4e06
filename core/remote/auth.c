/*
 * auth.c - the group secret of node agents and the keys derived from it (auth.h).
 *
 * The idea: the secret file is checked the way ssh checks a private key (a
 * regular file of ours that nobody else can read or write), then hashed with
 * SHA-256 so that any length of content gives a fixed 32-byte HMAC key. All
 * checks run on the open descriptor (fstat, not stat), so the file that was
 * checked is the file that is read. Keys for connections are derived from it
 * with HKDF-SHA256 (RFC 5869), never used as they are.
 *
 * It deliberately does not do any I/O beyond reading the secret file: the
 * handshake is TLS's (tls.c), and so is the decision of what to do with a peer
 * that fails.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/sha.h>

#include "auth.h"
#include "goldminer/util.h"

static void say(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void say(char *err, size_t errlen, const char *fmt, ...)
{
	if (!err || errlen == 0)
		return;
	va_list ap;
	va_start(ap, fmt);
	gm_verrf(err, errlen, fmt, ap);
	va_end(ap);
}

/* The checks on the open file: type, owner, mode. 0 or -errno. */
static int check_stat(int fd, const char *path, char *err, size_t errlen)
{
	struct stat st;
	if (fstat(fd, &st) != 0) {
		int e = errno;
		say(err, errlen, "gm_auth_load: secret file '%s': %s", path, strerror(e));
		return -e;
	}
	if (!S_ISREG(st.st_mode)) {
		say(err, errlen,
		    "gm_auth_load: secret file '%s' is not a regular file (give a file of at "
		    "least %d bytes with mode 600)",
		    path, GM_AUTH_MIN);
		return -EINVAL;
	}
	if (st.st_uid != geteuid()) {
		say(err, errlen,
		    "gm_auth_load: secret file '%s' is owned by uid %u, not by this process's uid "
		    "%u (chown %u '%s')",
		    path, (unsigned)st.st_uid, (unsigned)geteuid(), (unsigned)geteuid(), path);
		return -EPERM;
	}
	if (st.st_mode & 077) {
		say(err, errlen,
		    "gm_auth_load: secret file '%s' has mode %04o: group or others may access "
		    "it (chmod 600 '%s')",
		    path, (unsigned)(st.st_mode & 0777), path);
		return -EPERM;
	}
	return 0;
}

/* Read at most cap bytes of fd into buf; *got is how many. 0 or -errno. */
static int read_some(int fd, unsigned char *buf, size_t cap, size_t *got)
{
	*got = 0;
	while (*got < cap) {
		ssize_t r = read(fd, buf + *got, cap - *got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			break;
		*got += (size_t)r;
	}
	return 0;
}

int gm_auth_load(struct gm_auth_key *k, const char *path, char *err, size_t errlen)
{
	/* One byte more than the most a file may hold (with its newline) tells
	 * "too long" apart from "exactly the maximum". */
	unsigned char buf[GM_AUTH_MAX + 2];
	size_t n = 0;
	int rc;

	memset(k, 0, sizeof(*k));
	/* O_NONBLOCK: a FIFO named as the secret must not hang the agent (it is
	 * refused as not a regular file right after). */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		rc = -errno;
		say(err, errlen,
		    "gm_auth_load: secret file '%s': %s (create it on every host: head -c 32 "
		    "/dev/urandom > '%s'; chmod 600 '%s')",
		    path, strerror(-rc), path, path);
		return rc;
	}
	rc = check_stat(fd, path, err, errlen);
	if (rc)
		goto out_close;
	rc = read_some(fd, buf, sizeof(buf), &n);
	if (rc) {
		say(err, errlen, "gm_auth_load: reading secret file '%s': %s", path, strerror(-rc));
		goto out_wipe;
	}
	if (n > 0 && buf[n - 1] == '\n')
		n--;
	if (n < GM_AUTH_MIN || n > GM_AUTH_MAX) {
		say(err, errlen,
		    "gm_auth_load: secret file '%s' holds %s%zu bytes; it needs %d to %d "
		    "(head -c 32 /dev/urandom > '%s'; chmod 600 '%s')",
		    path, n > GM_AUTH_MAX ? "more than " : "",
		    n > GM_AUTH_MAX ? (size_t)GM_AUTH_MAX : n, GM_AUTH_MIN, GM_AUTH_MAX, path,
		    path);
		rc = -EINVAL;
		goto out_wipe;
	}
	if (!SHA256(buf, n, k->key)) {
		say(err, errlen, "gm_auth_load: secret file '%s': SHA-256 failed in libcrypto",
		    path);
		rc = -EIO;
		goto out_wipe;
	}
	k->len = SHA256_DIGEST_LENGTH;
out_wipe:
	OPENSSL_cleanse(buf, sizeof(buf));
out_close:
	close(fd);
	if (rc)
		memset(k, 0, sizeof(*k));
	return rc;
}

int gm_auth_nonce(uint8_t n[GM_AUTH_NONCE])
{
	size_t got = 0;
	while (got < GM_AUTH_NONCE) {
		ssize_t r = getrandom(n + got, GM_AUTH_NONCE - got, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		got += (size_t)r;
	}
	return 0;
}

int gm_auth_derive(const struct gm_auth_key *k, const char *salt, const void *info, size_t infolen,
		   struct gm_auth_key *out)
{
	size_t sl = strnlen(salt, GM_AUTH_INFO_MAX + 1), len = 32;
	EVP_PKEY_CTX *pc = NULL;
	int rc = -EIO;

	memset(out, 0, sizeof(*out));
	if (k->len == 0 || k->len > sizeof(k->key) || sl > GM_AUTH_INFO_MAX ||
	    infolen > GM_AUTH_INFO_MAX)
		return -EINVAL;
	/* EVP_PKEY's HKDF: the same calls in OpenSSL 1.1.1 and 3 (EVP_KDF is 3's
	 * only). */
	pc = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, NULL);
	if (pc && EVP_PKEY_derive_init(pc) > 0 && EVP_PKEY_CTX_set_hkdf_md(pc, EVP_sha256()) > 0 &&
	    EVP_PKEY_CTX_set1_hkdf_salt(pc, (const unsigned char *)salt, (int)sl) > 0 &&
	    EVP_PKEY_CTX_set1_hkdf_key(pc, k->key, (int)k->len) > 0 &&
	    EVP_PKEY_CTX_add1_hkdf_info(pc, info, (int)infolen) > 0 &&
	    EVP_PKEY_derive(pc, out->key, &len) > 0 && len == 32) {
		out->len = 32;
		rc = 0;
	}
	EVP_PKEY_CTX_free(pc);
	if (rc)
		gm_auth_wipe(out);
	return rc;
}

void gm_auth_wipe(struct gm_auth_key *k)
{
	OPENSSL_cleanse(k, sizeof(*k));
}
