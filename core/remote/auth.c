/*
 * auth.c - the group secret of node agents and the keys derived from it (auth.h).
 *
 * The idea: the secret file is checked the way ssh checks a private key (a
 * regular file of ours that nobody else can read or write), then hashed with
 * SHA-256 so that any length of content gives a fixed 32-byte HMAC key. All
 * checks run on the open descriptor (fstat, not stat), so the file that was
 * checked is the file that is read. One other kind of file is taken: a
 * credential a system manager's LoadCredential= hands over (root's, read
 * through an ACL entry of ours, on a read-only file system), checked for what
 * systemd guarantees instead (cred_check). Keys for connections are derived from it
 * with HKDF-SHA256 (RFC 5869), never used as they are.
 *
 * It deliberately does not do any I/O beyond reading the secret file: the
 * handshake is TLS's (tls.c), and so is the decision of what to do with a peer
 * that fails.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <linux/posix_acl.h>

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

/* ---- systemd's credentials ------------------------------------------------
 * A system manager's LoadCredential= hands the secret over in a way the
 * ssh-like check refuses: the file is root's, mode 0400, and the service's uid
 * reads it through one ACL entry (user:UID:r--), so its group bits show the
 * ACL's mask (0440). What systemd guarantees instead (its exec-credential.c
 * and namespace.c): the file is an entry of the directory it exports as
 * $CREDENTIALS_DIRECTORY, that directory is mounted read-only (nobody can chmod
 * the file, rewrite it or add to its ACL), and the ACL names the service's uid
 * and nobody else. Exactly that is checked, on the open file; any other
 * file of another owner or open mode is refused as before. A user manager's
 * credentials are files of the service's own uid: the usual check takes them. */

/* One ACL entry in getfacl's words ("user:65534:r--", "other::r--"). */
static void acl_words(char *out, size_t len, uint16_t tag, uint16_t perm, uint32_t id)
{
	const char *kind = tag == ACL_USER || tag == ACL_USER_OBJ     ? "user"
			   : tag == ACL_GROUP || tag == ACL_GROUP_OBJ ? "group"
			   : tag == ACL_MASK			      ? "mask"
								      : "other";
	char who[16] = "";
	if (tag == ACL_USER || tag == ACL_GROUP)
		snprintf(who, sizeof(who), "%u", (unsigned)id);
	snprintf(out, len, "%s:%s:%c%c%c", kind, who, perm & ACL_READ ? 'r' : '-',
		 perm & ACL_WRITE ? 'w' : '-', perm & ACL_EXECUTE ? 'x' : '-');
}

/* Does the access ACL of fd let nobody but its owner (root) and this uid read
 * it, and nobody write it? 0, or -EPERM with the entry that says otherwise in
 * why. A file without an ACL is judged by its group bits. */
static int cred_acl(int fd, const struct stat *st, char *why, size_t whylen)
{
	unsigned char buf[4 + 8 * 32]; /* the version, then 8 bytes an entry */
	ssize_t n = fgetxattr(fd, "system.posix_acl_access", buf, sizeof(buf));
	if (n < 0 && (errno == ENODATA || errno == EOPNOTSUPP)) {
		if (!(st->st_mode & 070))
			return 0;
		snprintf(why, whylen, "its group may read it (mode %04o)",
			 (unsigned)(st->st_mode & 0777));
		return -EPERM;
	}
	if (n < 0) {
		snprintf(why, whylen, "its ACL cannot be read (%s)",
			 errno == ERANGE ? "more than 32 entries" : strerror(errno));
		return -EPERM;
	}
	uint32_t ver = 0;
	if (n >= 4)
		memcpy(&ver, buf, sizeof(ver));
	if (n < 4 || (n - 4) % 8 || le32toh(ver) != 2) {
		snprintf(why, whylen, "its ACL is not a POSIX ACL of version 2 (%zd bytes)", n);
		return -EPERM;
	}
	for (ssize_t off = 4; off < n; off += 8) {
		uint16_t tag, perm;
		uint32_t id;
		memcpy(&tag, buf + off, 2);
		memcpy(&perm, buf + off + 2, 2);
		memcpy(&id, buf + off + 4, 4);
		tag = le16toh(tag), perm = le16toh(perm), id = le32toh(id);
		bool ok = tag == ACL_USER_OBJ || tag == ACL_MASK ||
			  (tag == ACL_USER && id == (uint32_t)geteuid() && !(perm & ACL_WRITE)) ||
			  ((tag == ACL_GROUP_OBJ || tag == ACL_GROUP || tag == ACL_OTHER) && !perm);
		if (!ok) {
			char e[48];
			acl_words(e, sizeof(e), tag, perm, id);
			snprintf(why, whylen, "its ACL has %s (only user:%u:r-- may be there)", e,
				 (unsigned)geteuid());
			return -EPERM;
		}
	}
	return 0;
}

/* Is the file of path (its fstat: st) the entry named by its last component
 * in $CREDENTIALS_DIRECTORY? */
static bool cred_in_dir(const struct stat *st, const char *path, const char *dir)
{
	char parent[4096];
	const char *slash = strrchr(path, '/');
	const char *name = slash ? slash + 1 : path;
	size_t plen = slash ? (size_t)(slash - path) : 0;
	struct stat pd, cd, ent;
	if (!*name || plen >= sizeof(parent))
		return false;
	memcpy(parent, path, plen);
	parent[plen] = '\0';
	if (!slash)
		snprintf(parent, sizeof(parent), ".");
	else if (plen == 0)
		snprintf(parent, sizeof(parent), "/");
	int dfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return false;
	bool same = fstat(dfd, &pd) == 0 && stat(dir, &cd) == 0 && pd.st_dev == cd.st_dev &&
		    pd.st_ino == cd.st_ino && fstatat(dfd, name, &ent, AT_SYMLINK_NOFOLLOW) == 0 &&
		    ent.st_dev == st->st_dev && ent.st_ino == st->st_ino;
	close(dfd);
	return same;
}

/* The secret file (fd, st) taken as a system manager's credential: 0 when it
 * is one and holds what systemd guarantees; 1 when it is no credential (not in
 * $CREDENTIALS_DIRECTORY, or not root's: the usual check says why); -EPERM,
 * said, when it is in that directory but fails a guarantee. */
static int cred_check(int fd, const struct stat *st, const char *path, char *err, size_t errlen)
{
	const char *dir = getenv("CREDENTIALS_DIRECTORY");
	char why[160] = "";
	struct statvfs vfs;
	if (!dir || dir[0] != '/' || st->st_uid != 0 || !cred_in_dir(st, path, dir))
		return 1;
	if (st->st_mode & 0222)
		snprintf(why, sizeof(why), "it is writable (mode %04o)",
			 (unsigned)(st->st_mode & 0777));
	else if (st->st_mode & 07)
		snprintf(why, sizeof(why), "others may read it (mode %04o)",
			 (unsigned)(st->st_mode & 0777));
	else if (fstatvfs(fd, &vfs) != 0 || !(vfs.f_flag & ST_RDONLY))
		snprintf(why, sizeof(why), "its file system is not mounted read-only");
	else if (cred_acl(fd, st, why, sizeof(why)) == 0)
		return 0;
	say(err, errlen,
	    "gm_auth_load: secret file '%s' is root's in $CREDENTIALS_DIRECTORY (%s), which "
	    "a system manager's LoadCredential= makes, but %s: it is not what systemd hands "
	    "over (LoadCredential=secret:FILE in the unit, or a file of this uid with mode 600)",
	    path, dir, why);
	return -EPERM;
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
	if (st.st_uid != geteuid() || (st.st_mode & 077)) {
		int rc = cred_check(fd, &st, path, err, errlen);
		if (rc <= 0)
			return rc;
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
