/*
 * test_auth.c - shared-secret peer authentication (auth.h): every refusal of
 * a secret file (group/other mode bits, another owner, too short, too long,
 * a directory, a FIFO, a missing file, a symlink to a bad file) with a
 * message naming the file and the fix; the boundaries that pass; the key is
 * the SHA-256 of the contents with one trailing newline dropped; derived keys
 * match RFC 5869's HKDF-SHA256 known answer (case 3), depend on the secret, the salt
 * and every bit of the info (the two identities of a connection, in order),
 * and are never the secret itself; empty keys and long inputs are refused.
 * A system manager's credential (LoadCredential=: root's, mode 0400, read
 * through an ACL entry of the service's uid, in $CREDENTIALS_DIRECTORY on a
 * read-only tmpfs, made here as systemd makes it) is taken by that uid, and
 * refused where one of systemd's guarantees is missing: outside that
 * directory, on a writable mount, with a second uid or others in its ACL.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <openssl/sha.h>

#include "../core/remote/auth.h" /* the plugin's, not installed */
#include "testutil.h"

static char base[64];

static int group_setup(void **state)
{
	(void)state;
	return gm_test_tmpdir(base, sizeof(base), "gm-test-auth");
}

static int group_teardown(void **state)
{
	(void)state;
	gm_test_rm_tree(base);
	return 0;
}

/* Write len bytes of data to base/name with the given mode; the path into out. */
static void put_file(char *out, size_t outlen, const char *name, const void *data, size_t len,
		     mode_t mode)
{
	snprintf(out, outlen, "%s/%s", base, name);
	unlink(out);
	int fd = open(out, O_WRONLY | O_CREAT | O_EXCL, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	close(fd);
	assert_int_equal(chmod(out, mode), 0);
}

/* A file of n bytes of 'x' (plus a newline if nl). */
static void put_sized(char *out, size_t outlen, const char *name, size_t n, int nl, mode_t mode)
{
	static char buf[GM_AUTH_MAX + 16];
	assert_true(n + 1 <= sizeof(buf));
	memset(buf, 'x', n);
	buf[n] = '\n';
	put_file(out, outlen, name, buf, n + (nl ? 1 : 0), mode);
}

/* gm_auth_load(path) returns want, leaves k zeroed and its message names the
 * path and contains hint. */
static void refused(const char *path, int want, const char *hint)
{
	struct gm_auth_key k;
	char err[512] = "";
	memset(&k, 0xab, sizeof(k));
	assert_int_equal(gm_auth_load(&k, path, err, sizeof(err)), want);
	assert_non_null(strstr(err, path));
	assert_non_null(strstr(err, hint));
	struct gm_auth_key zero;
	memset(&zero, 0, sizeof(zero));
	assert_memory_equal(&k, &zero, sizeof(k));
}

static void test_key_is_sha256_of_contents_without_one_newline(void **state)
{
	(void)state;
	const char *secret = "correct horse battery staple";
	char p1[256], p2[256], err[256];
	put_file(p1, sizeof(p1), "nl", "correct horse battery staple\n", strlen(secret) + 1, 0600);
	put_file(p2, sizeof(p2), "raw", secret, strlen(secret), 0400);
	struct gm_auth_key a, b;
	assert_int_equal(gm_auth_load(&a, p1, err, sizeof(err)), 0);
	assert_int_equal(gm_auth_load(&b, p2, err, sizeof(err)), 0);
	uint8_t want[SHA256_DIGEST_LENGTH];
	SHA256((const unsigned char *)secret, strlen(secret), want);
	assert_int_equal(a.len, 32);
	assert_memory_equal(a.key, want, 32);
	assert_int_equal(b.len, 32);
	assert_memory_equal(b.key, want, 32);
	/* Only one newline is dropped: two make a different key. */
	char p3[256];
	put_file(p3, sizeof(p3), "nl2", "correct horse battery staple\n\n", strlen(secret) + 2,
		 0600);
	assert_int_equal(gm_auth_load(&b, p3, err, sizeof(err)), 0);
	assert_memory_not_equal(b.key, want, 32);
}

static void test_mode_open_to_group_or_others_refused(void **state)
{
	(void)state;
	const mode_t modes[] = {0644, 0640, 0604, 0620, 0602, 0610};
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		char p[256];
		put_sized(p, sizeof(p), "mode", 32, 0, modes[i]);
		refused(p, -EPERM, "chmod 600");
		char want[32];
		snprintf(want, sizeof(want), "has mode %04o", (unsigned)modes[i]);
		refused(p, -EPERM, want);
	}
}

static void test_other_owner_refused(void **state)
{
	(void)state;
	if (geteuid() != 0)
		skip(); /* chown to another uid needs root */
	char p[256];
	put_sized(p, sizeof(p), "owner", 32, 0, 0600);
	assert_int_equal(chown(p, 65534, 65534), 0);
	refused(p, -EPERM, "is owned by uid 65534");
	refused(p, -EPERM, "chown 0");
}

static void test_size_bounds(void **state)
{
	(void)state;
	char p[256], err[512];
	struct gm_auth_key k;
	put_sized(p, sizeof(p), "short", GM_AUTH_MIN - 1, 0, 0600);
	refused(p, -EINVAL, "holds 15 bytes; it needs 16 to 4096");
	refused(p, -EINVAL, "chmod 600");
	put_sized(p, sizeof(p), "short-nl", GM_AUTH_MIN - 1, 1, 0600); /* 16 with the newline */
	refused(p, -EINVAL, "holds 15 bytes");
	put_file(p, sizeof(p), "empty", "", 0, 0600);
	refused(p, -EINVAL, "holds 0 bytes");
	put_sized(p, sizeof(p), "min", GM_AUTH_MIN, 0, 0600);
	assert_int_equal(gm_auth_load(&k, p, err, sizeof(err)), 0);
	put_sized(p, sizeof(p), "long", GM_AUTH_MAX + 1, 0, 0600);
	refused(p, -EINVAL, "holds more than 4096 bytes");
	put_sized(p, sizeof(p), "long-nl", GM_AUTH_MAX + 1, 1, 0600);
	refused(p, -EINVAL, "holds more than 4096 bytes");
	put_sized(p, sizeof(p), "max-nl", GM_AUTH_MAX, 1, 0600);
	assert_int_equal(gm_auth_load(&k, p, err, sizeof(err)), 0);
}

static void test_not_a_regular_file_refused(void **state)
{
	(void)state;
	char p[256];
	snprintf(p, sizeof(p), "%s/dir", base);
	assert_int_equal(mkdir(p, 0700), 0);
	refused(p, -EINVAL, "is not a regular file");
	/* A FIFO: refused at once, not a hang waiting for a writer. */
	snprintf(p, sizeof(p), "%s/fifo", base);
	assert_int_equal(mkfifo(p, 0600), 0);
	refused(p, -EINVAL, "is not a regular file");
}

static void test_missing_file_refused(void **state)
{
	(void)state;
	char p[256];
	snprintf(p, sizeof(p), "%s/no-such-secret", base);
	refused(p, -ENOENT, "No such file or directory");
	refused(p, -ENOENT, "chmod 600");
}

static void test_symlink_followed_and_target_checked(void **state)
{
	(void)state;
	char good[256], bad[256], l1[256], l2[256], err[256];
	put_sized(good, sizeof(good), "target-good", 32, 0, 0600);
	put_sized(bad, sizeof(bad), "target-bad", 32, 0, 0644);
	snprintf(l1, sizeof(l1), "%s/link-good", base);
	snprintf(l2, sizeof(l2), "%s/link-bad", base);
	assert_int_equal(symlink(good, l1), 0);
	assert_int_equal(symlink(bad, l2), 0);
	struct gm_auth_key a, b;
	assert_int_equal(gm_auth_load(&a, l1, err, sizeof(err)), 0);
	assert_int_equal(gm_auth_load(&b, good, err, sizeof(err)), 0);
	assert_memory_equal(a.key, b.key, 32);
	refused(l2, -EPERM, "chmod 600");
}

/* RFC 5869 test case 3 (HKDF-SHA256, empty salt and info) through the
 * public API: ikm = 22 bytes of 0x0b (a key of that length); the first 32
 * bytes of the known output. */
static void test_rfc5869_case3(void **state)
{
	(void)state;
	static const uint8_t want[32] = {0x8d, 0xa4, 0xe7, 0x75, 0xa5, 0x63, 0xc1, 0x8f,
					 0x71, 0x5f, 0x80, 0x2a, 0x06, 0x3c, 0x5a, 0x31,
					 0xb8, 0xa1, 0x1f, 0x5c, 0x5e, 0xe1, 0x87, 0x9e,
					 0xc3, 0x45, 0x4e, 0x5f, 0x3c, 0x73, 0x8d, 0x2d};
	struct gm_auth_key k = {.len = 22}, out;
	memset(k.key, 0x0b, 22);
	assert_int_equal(gm_auth_derive(&k, "", "", 0, &out), 0);
	assert_int_equal(out.len, 32);
	assert_memory_equal(out.key, want, 32);
}

static void load_key(struct gm_auth_key *k, const char *name, const char *content)
{
	char p[256], err[256];
	put_file(p, sizeof(p), name, content, strlen(content), 0600);
	assert_int_equal(gm_auth_load(k, p, err, sizeof(err)), 0);
}

/* Keys derived from one secret differ with the salt and the info (each bit of
 * it), and equal for the same inputs from files that hold the same secret. */
static void test_derived_keys_depend_on_every_input(void **state)
{
	(void)state;
	struct gm_auth_key a, b, other, ka, kb, k2;
	load_key(&a, "k-a", "the shared secret of the cluster");
	load_key(&b, "k-b", "the shared secret of the cluster\n");
	load_key(&other, "k-other", "the shared secret of the clusteR");
	const char info[] = "client=A\nserver=B";
	assert_int_equal(gm_auth_derive(&a, "s", info, sizeof(info) - 1, &ka), 0);
	assert_int_equal(gm_auth_derive(&b, "s", info, sizeof(info) - 1, &kb), 0);
	assert_memory_equal(ka.key, kb.key, 32);
	assert_memory_not_equal(ka.key, a.key, 32); /* never the secret itself */
	assert_int_equal(gm_auth_derive(&other, "s", info, sizeof(info) - 1, &k2), 0);
	assert_memory_not_equal(ka.key, k2.key, 32);
	assert_int_equal(gm_auth_derive(&a, "t", info, sizeof(info) - 1, &k2), 0);
	assert_memory_not_equal(ka.key, k2.key, 32);
	const char swapped[] = "client=B\nserver=A";
	assert_int_equal(gm_auth_derive(&a, "s", swapped, sizeof(swapped) - 1, &k2), 0);
	assert_memory_not_equal(ka.key, k2.key, 32);
	char flip[sizeof(info)];
	for (size_t bit = 0; bit < 8 * (sizeof(info) - 1); bit++) {
		memcpy(flip, info, sizeof(info));
		flip[bit / 8] ^= (char)(1u << (bit % 8));
		assert_int_equal(gm_auth_derive(&a, "s", flip, sizeof(info) - 1, &k2), 0);
		assert_memory_not_equal(ka.key, k2.key, 32);
	}
}

static void test_empty_key_or_long_inputs_refused(void **state)
{
	(void)state;
	struct gm_auth_key k, empty, out;
	load_key(&k, "k-role", "0123456789abcdef0123");
	memset(&empty, 0, sizeof(empty));
	char big[GM_AUTH_INFO_MAX + 2];
	memset(big, 'r', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	uint8_t zero[32] = {0};
	assert_int_equal(gm_auth_derive(&k, big, "i", 1, &out), -EINVAL);
	assert_memory_equal(out.key, zero, 32);
	assert_int_equal(gm_auth_derive(&k, "s", big, sizeof(big) - 1, &out), -EINVAL);
	big[GM_AUTH_INFO_MAX] = '\0'; /* exactly the maximum */
	assert_int_equal(gm_auth_derive(&k, big, big, GM_AUTH_INFO_MAX, &out), 0);
	assert_int_equal(gm_auth_derive(&empty, "s", "i", 1, &out), -EINVAL);
	assert_memory_equal(out.key, zero, 32);
	uint8_t n1[GM_AUTH_NONCE], n2[GM_AUTH_NONCE];
	assert_int_equal(gm_auth_nonce(n1), 0);
	assert_int_equal(gm_auth_nonce(n2), 0);
	assert_memory_not_equal(n1, n2, GM_AUTH_NONCE);
}

/* ---- a system manager's credential ---------------------------------------- */

#define CRED_UID 65534 /* the service's uid: nobody */

/* dir/name: the secret, mode, root's, with an access ACL of user:CRED_UID:r--
 * (and user:extra:r-- when extra) as systemd's write_credential leaves it.
 * 0, or -errno (EOPNOTSUPP: no ACLs on this file system). */
static int put_cred(const char *dir, const char *name, mode_t mode, unsigned extra)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	/* entries: tag, perm, id (little-endian, as the kernel's xattr has them) */
	struct __attribute__((packed)) {
		uint32_t version;
		struct __attribute__((packed)) {
			uint16_t tag, perm;
			uint32_t id;
		} e[6];
	} acl = {2,
		 {{0x01, 4, ~0u},
		  {0x02, 4, CRED_UID},
		  {0x02, 4, extra},
		  {0x04, 0, ~0u},
		  {0x10, 4, ~0u},
		  {0x20, (uint16_t)(mode & 07), ~0u}}};
	size_t len = sizeof(acl);
	if (!extra) { /* no second user: drop that entry */
		memmove(&acl.e[2], &acl.e[3], 3 * sizeof(acl.e[0]));
		len -= sizeof(acl.e[0]);
	}
	int rc = write(fd, "0123456789abcdef0123456789abcdef\n", 33) == 33 ? 0 : -EIO;
	if (!rc && fchmod(fd, mode))
		rc = -errno;
	if (!rc && fsetxattr(fd, "system.posix_acl_access", &acl, len, 0))
		rc = -errno;
	close(fd);
	return rc;
}

/* Load dir/name as CRED_UID with $CREDENTIALS_DIRECTORY = creds (NULL: unset);
 * 0 when the result is want and the message holds hint, else 1 (said). */
static int cred_load(const char *dir, const char *name, const char *creds, int want,
		     const char *hint)
{
	char p[512], err[1024] = "";
	struct gm_auth_key k;
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	if (creds)
		setenv("CREDENTIALS_DIRECTORY", creds, 1);
	else
		unsetenv("CREDENTIALS_DIRECTORY");
	if (seteuid(CRED_UID))
		return 1;
	int rc = gm_auth_load(&k, p, err, sizeof(err));
	int back = seteuid(0);
	if (back || rc != want || (hint && !strstr(err, hint))) {
		fprintf(stderr,
			"# %s as uid %d (CREDENTIALS_DIRECTORY=%s): %d, want %d with '%s': %s\n", p,
			CRED_UID, creds ? creds : "unset", rc, want, hint ? hint : "", err);
		return 1;
	}
	if (!rc) {
		uint8_t sum[SHA256_DIGEST_LENGTH];
		SHA256((const unsigned char *)"0123456789abcdef0123456789abcdef", 32, sum);
		return k.len == 32 && !memcmp(k.key, sum, 32) ? 0 : 1;
	}
	return 0;
}

/* The child: its own mount namespace, a tmpfs at dir made as systemd makes
 * the credentials directory, the cases in order. Exit status: 0, 77 (cannot
 * be made here: skip), or the failing case's number. */
static int cred_child(const char *dir)
{
	if (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
	    mount("gm-test-cred", dir, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0755"))
		return 77;
	int rc = put_cred(dir, "secret", 0400, 0);
	if (rc == -EOPNOTSUPP)
		return 77;
	if (rc || put_cred(dir, "two-users", 0400, 1234) || put_cred(dir, "others", 0404, 0))
		return 2;
	/* 3: still writable (systemd remounts it read-only before the service runs) */
	if (cred_load(dir, "secret", dir, -EPERM, "not mounted read-only"))
		return 3;
	if (mount(NULL, dir, NULL,
		  MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL))
		return 77;
	if (cred_load(dir, "secret", dir, 0, NULL)) /* 4: what systemd hands over */
		return 4;
	if (cred_load(dir, "secret", NULL, -EPERM, "is owned by uid 0")) /* 5: outside a unit */
		return 5;
	if (cred_load(dir, "secret", base, -EPERM, "is owned by uid 0")) /* 6: another dir */
		return 6;
	if (cred_load(dir, "two-users", dir, -EPERM, "its ACL has user:1234:r--")) /* 7 */
		return 7;
	if (cred_load(dir, "others", dir, -EPERM, "others may read it (mode 0444)")) /* 8 */
		return 8;
	return 0;
}

static void test_systemd_credential_taken_where_its_guarantees_hold(void **state)
{
	(void)state;
	if (geteuid() != 0)
		skip(); /* a mount namespace, root's files and a second uid need root */
	char dir[] = "/tmp/gm-test-cred.XXXXXX";
	assert_non_null(mkdtemp(dir));
	assert_int_equal(chmod(dir, 0755), 0);
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(cred_child(dir));
	int st = 0;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	rmdir(dir);
	assert_true(WIFEXITED(st));
	if (WEXITSTATUS(st) == 77)
		skip(); /* no mount namespace, tmpfs or ACLs here */
	assert_int_equal(WEXITSTATUS(st), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_key_is_sha256_of_contents_without_one_newline),
	    cmocka_unit_test(test_mode_open_to_group_or_others_refused),
	    cmocka_unit_test(test_other_owner_refused),
	    cmocka_unit_test(test_size_bounds),
	    cmocka_unit_test(test_not_a_regular_file_refused),
	    cmocka_unit_test(test_missing_file_refused),
	    cmocka_unit_test(test_symlink_followed_and_target_checked),
	    cmocka_unit_test(test_systemd_credential_taken_where_its_guarantees_hold),
	    cmocka_unit_test(test_rfc5869_case3),
	    cmocka_unit_test(test_derived_keys_depend_on_every_input),
	    cmocka_unit_test(test_empty_key_or_long_inputs_refused),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
