/*
 * test_auth.c - shared-secret peer authentication (auth.h): every refusal of
 * a secret file (group/other mode bits, another owner, too short, too long,
 * a directory, a FIFO, a missing file, a symlink to a bad file) with a
 * message naming the file and the fix; the boundaries that pass; the key is
 * the SHA-256 of the contents with one trailing newline dropped; proofs match
 * RFC 4231 test case 7 through the public API; a full mutual exchange passes
 * and a flipped bit, a wrong role (a reflected proof), swapped nonces or a
 * wrong key fail verification.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
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

/*
 * RFC 4231 test case 7 through the public API: key = 131 bytes of 0xaa,
 * which HMAC-SHA256 first hashes to SHA-256(key) because it is longer than
 * the block, exactly what gm_auth_load makes of a file holding those bytes;
 * data = the 152-byte sentence, split as role (88 bytes) || challenge (32)
 * || own (32).
 */
static void test_rfc4231_case7(void **state)
{
	(void)state;
	static const char data[] = "This is a test using a larger than block-size key and a larger "
				   "than block-size data. The key needs to be hashed before being "
				   "used by the HMAC algorithm.";
	static const uint8_t want[32] = {0x9b, 0x09, 0xff, 0xa7, 0x1b, 0x94, 0x2f, 0xcb,
					 0x27, 0x63, 0x5f, 0xbc, 0xd5, 0xb0, 0xe9, 0x44,
					 0xbf, 0xdc, 0x63, 0x64, 0x4f, 0x07, 0x13, 0x93,
					 0x8a, 0x7f, 0x51, 0x53, 0x5c, 0x3a, 0x35, 0xe2};
	assert_int_equal(sizeof(data) - 1, 152);
	uint8_t keybytes[131];
	memset(keybytes, 0xaa, sizeof(keybytes));
	char p[256], err[256], role[89];
	put_file(p, sizeof(p), "rfc4231", keybytes, sizeof(keybytes), 0600);
	struct gm_auth_key k;
	assert_int_equal(gm_auth_load(&k, p, err, sizeof(err)), 0);
	memcpy(role, data, 88);
	role[88] = '\0';
	uint8_t out[32];
	assert_int_equal(
	    gm_auth_proof(&k, role, (const uint8_t *)data + 88, (const uint8_t *)data + 120, out),
	    0);
	assert_memory_equal(out, want, 32);
	assert_true(gm_auth_verify(&k, role, (const uint8_t *)data + 88,
				   (const uint8_t *)data + 120, want));
}

static void load_key(struct gm_auth_key *k, const char *name, const char *content)
{
	char p[256], err[256];
	put_file(p, sizeof(p), name, content, strlen(content), 0600);
	assert_int_equal(gm_auth_load(k, p, err, sizeof(err)), 0);
}

static void test_mutual_exchange_and_every_forgery_fails(void **state)
{
	(void)state;
	struct gm_auth_key srv, cli, other;
	load_key(&srv, "k-srv", "the shared secret of the cluster");
	load_key(&cli, "k-cli", "the shared secret of the cluster\n");
	load_key(&other, "k-other", "the shared secret of the clusteR");
	uint8_t nc[32], ns[32], ps[32], pc[32], bad[32];
	assert_int_equal(gm_auth_nonce(nc), 0);
	assert_int_equal(gm_auth_nonce(ns), 0);
	assert_memory_not_equal(nc, ns, 32);
	/* The exchange of auth.h. */
	assert_int_equal(gm_auth_proof(&srv, "server", nc, ns, ps), 0);
	assert_true(gm_auth_verify(&cli, "server", nc, ns, ps));
	assert_int_equal(gm_auth_proof(&cli, "client", ns, nc, pc), 0);
	assert_true(gm_auth_verify(&srv, "client", ns, nc, pc));
	/* Every single flipped bit of a proof fails. */
	for (int bit = 0; bit < 256; bit++) {
		memcpy(bad, pc, 32);
		bad[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		assert_false(gm_auth_verify(&srv, "client", ns, nc, bad));
	}
	/* Reflection: the server's own proof sent back as the client's answer. */
	assert_false(gm_auth_verify(&srv, "client", nc, ns, ps));
	assert_false(gm_auth_verify(&srv, "client", ns, nc, ps));
	/* Nonces swapped, a wrong key, a key of the wrong file. */
	assert_false(gm_auth_verify(&srv, "client", nc, ns, pc));
	assert_false(gm_auth_verify(&other, "client", ns, nc, pc));
	assert_int_equal(gm_auth_proof(&other, "client", ns, nc, bad), 0);
	assert_false(gm_auth_verify(&srv, "client", ns, nc, bad));
}

static void test_bad_role_or_empty_key_refused(void **state)
{
	(void)state;
	struct gm_auth_key k, empty;
	load_key(&k, "k-role", "0123456789abcdef0123");
	memset(&empty, 0, sizeof(empty));
	char role[GM_AUTH_ROLE_MAX + 2];
	memset(role, 'r', sizeof(role) - 1);
	role[sizeof(role) - 1] = '\0';
	uint8_t n[32] = {0}, out[32];
	assert_int_equal(gm_auth_proof(&k, role, n, n, out), -EINVAL);
	role[GM_AUTH_ROLE_MAX] = '\0'; /* exactly the maximum */
	assert_int_equal(gm_auth_proof(&k, role, n, n, out), 0);
	assert_int_equal(gm_auth_proof(&empty, "client", n, n, out), -EINVAL);
	uint8_t zero[32] = {0};
	assert_memory_equal(out, zero, 32);
	assert_false(gm_auth_verify(&empty, "client", n, n, zero));
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
	    cmocka_unit_test(test_rfc4231_case7),
	    cmocka_unit_test(test_mutual_exchange_and_every_forgery_fails),
	    cmocka_unit_test(test_bad_role_or_empty_key_refused),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
