/*
 * test_remote_peers.c - the entries of --peers and --peers-file and what they
 * resolve to (core/remote/peers.h): every form of an entry and every refusal
 * in words, a file's comments and blank lines and its bad line named by its
 * number, a file that is not one, numeric lookups and the order of addresses,
 * which lookup errors are temporary, and the resolver thread's answers through
 * its eventfd (a name from /etc/hosts: no DNS server is asked).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core/remote/peers.h" /* the plugin's, not installed */

static void test_entry_forms(void **state)
{
	(void)state;
	struct peer_entry e;
	char err[512];
	assert_int_equal(gm_peers_entry("agents.ns.svc:7070", 1, &e, err, sizeof(err)), 0);
	assert_string_equal(e.host, "agents.ns.svc");
	assert_int_equal(e.port, 7070);
	assert_false(e.numeric);
	assert_int_equal(gm_peers_entry("  gpu01 ", 7470, &e, err, sizeof(err)), 0);
	assert_string_equal(e.host, "gpu01");
	assert_int_equal(e.port, 7470); /* no port: the default (--listen's) */
	assert_int_equal(gm_peers_entry("10.0.0.2:9", 1, &e, err, sizeof(err)), 0);
	assert_true(e.numeric);
	assert_int_equal(e.port, 9);
	assert_int_equal(gm_peers_entry("[fe80::1]:65535", 1, &e, err, sizeof(err)), 0);
	assert_string_equal(e.host, "fe80::1");
	assert_int_equal(e.port, 65535);
	assert_true(e.numeric);
	assert_int_equal(gm_peers_entry("fd00::5", 7070, &e, err, sizeof(err)), 0);
	assert_string_equal(e.host, "fd00::5"); /* a bare IPv6 address: no port */
	assert_int_equal(e.port, 7070);
	assert_int_equal(gm_peers_entry("[::1]", 80, &e, err, sizeof(err)), 0);
	assert_int_equal(e.port, 80);
}

static void test_entry_refusals_in_words(void **state)
{
	(void)state;
	struct peer_entry e;
	char err[512];
	const char *bad[] = {"",       "   ",	 "a b:1",   "host:0", "host:65536",
			     "host:x", "host:",	 "host:+1", "[::1",   "[::1]x",
			     "-bad:1", ".bad:1", "a/b:1",   "x:1:2:z"};
	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		err[0] = '\0';
		assert_int_equal(gm_peers_entry(bad[k], 7070, &e, err, sizeof(err)), -EINVAL);
		assert_non_null(strstr(err, "is not HOST:PORT or HOST"));
	}
	assert_int_equal(gm_peers_entry("gpu01", 0, &e, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "'gpu01' names no port, and --listen's port is 0"));
}

static void test_list(void **state)
{
	(void)state;
	struct peer_entry e[3];
	char err[512], big[5000];
	int n = 0;
	assert_int_equal(gm_peers_list("a:1, b ,10.0.0.3:3", 2, e, 3, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 3);
	assert_string_equal(e[1].host, "b");
	assert_int_equal(e[1].port, 2);
	n = 0;
	assert_int_equal(gm_peers_list("a:1,b:2,c:3,d:4", 2, e, 3, &n, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "--peers: more than 3 entries"));
	n = 0;
	assert_int_equal(gm_peers_list("a:1,b c", 2, e, 3, &n, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "--peers: 'b c' is not"));
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	n = 0;
	assert_int_equal(gm_peers_list(big, 2, e, 3, &n, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "use --peers-file"));
	n = 0;
	assert_int_equal(gm_peers_list(NULL, 2, e, 3, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 0);
}

static char dir[64];

static const char *write_file(const char *name, const char *text)
{
	static char path[128];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	return path;
}

static void test_file(void **state)
{
	(void)state;
	struct peer_entry e[4];
	char err[512], want[256];
	int n = 0;
	const char *p = write_file("ok", "# the agents\n\nagents.ns.svc\n  10.0.0.2:9  # b\n\n");
	assert_int_equal(gm_peers_file(p, 7070, e, 4, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 2);
	assert_string_equal(e[0].host, "agents.ns.svc");
	assert_int_equal(e[0].port, 7070);
	assert_int_equal(e[1].port, 9);
	n = 0;
	p = write_file("bad", "a:1\n\n# c\nnot a host\nb:2\n");
	assert_int_equal(gm_peers_file(p, 7070, e, 4, &n, err, sizeof(err)), -EINVAL);
	snprintf(want, sizeof(want), "%s:4: 'not a host' is not HOST:PORT", p);
	assert_non_null(strstr(err, want));
	n = 0;
	p = write_file("many", "a\nb\nc\nd\ne\n");
	assert_int_equal(gm_peers_file(p, 7070, e, 4, &n, err, sizeof(err)), -EINVAL);
	snprintf(want, sizeof(want), "%s:5: more than 4 peers", p);
	assert_non_null(strstr(err, want));
	n = 0;
	assert_int_equal(gm_peers_file("/nonexistent/peers", 7070, e, 4, &n, err, sizeof(err)),
			 -ENOENT);
	assert_non_null(strstr(err, "--peers-file /nonexistent/peers: No such file"));
	assert_int_equal(gm_peers_file(dir, 7070, e, 4, &n, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "not a regular file"));
	char fifo[128];
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	assert_int_equal(mkfifo(fifo, 0600), 0); /* no writer: opening must not block */
	assert_int_equal(gm_peers_file(fifo, 7070, e, 4, &n, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "not a regular file"));
	unlink(fifo);
}

static void test_lookup_numeric_and_order(void **state)
{
	(void)state;
	struct peer_answer a;
	assert_int_equal(gm_peers_lookup("10.0.0.2", true, &a), 0);
	assert_int_equal(a.n, 1);
	assert_string_equal(a.ip[0], "10.0.0.2");
	assert_int_equal(gm_peers_lookup("::1", true, &a), 0);
	assert_string_equal(a.ip[0], "::1");
	assert_int_not_equal(gm_peers_lookup("a-name", true, &a), 0); /* no DNS asked */
	assert_int_equal(a.n, 0);
	assert_true(gm_peers_ipcmp("10.0.0.9", "10.0.0.10") < 0); /* numbers, not text */
	assert_true(gm_peers_ipcmp("10.0.0.10", "10.0.0.9") > 0);
	assert_true(gm_peers_ipcmp("255.255.255.255", "::1") < 0); /* IPv4 first */
	assert_int_equal(gm_peers_ipcmp("10.0.0.1", "10.0.0.1"), 0);
	assert_true(gm_peers_temporary(EAI_AGAIN));
	assert_true(gm_peers_temporary(EAI_FAIL));
	assert_false(gm_peers_temporary(EAI_NONAME));
	assert_false(gm_peers_temporary(0));
}

/* An answer from the resolver within 5 s: its count (-1: none came). */
static int answer(struct peers_resolver *res, int efd, struct peer_answer *out, int max)
{
	struct pollfd p = {.fd = efd, .events = POLLIN};
	if (poll(&p, 1, 5000) != 1 || !gm_peers_resolver_pending(res))
		return -1;
	return gm_peers_resolver_take(res, out, max);
}

static void test_resolver_answers_through_its_eventfd(void **state)
{
	(void)state;
	struct peers_resolver *res;
	struct peer_answer out[4];
	struct peer_entry e[2];
	char err[256];
	int efd = -1;
	assert_int_equal(gm_peers_entry("localhost:1", 1, &e[0], err, sizeof(err)), 0);
	assert_int_equal(gm_peers_entry("10.0.0.1:1", 1, &e[1], err, sizeof(err)), 0);
	assert_int_equal(gm_peers_resolver_start(&res, 60000, &efd), 0);
	assert_true(efd >= 0);
	assert_false(gm_peers_resolver_pending(res)); /* no names yet: nothing looked up */
	gm_peers_resolver_names(res, e, 2);	      /* localhost only: 10.0.0.1 is numeric */
	assert_int_equal(answer(res, efd, out, 4), 1);
	assert_string_equal(out[0].host, "localhost");
	assert_int_equal(out[0].gai, 0);
	assert_true(out[0].n >= 1);
	assert_int_equal(gm_peers_resolver_take(res, out, 4), -1); /* taken once */
	gm_peers_resolver_kick(res);				   /* at once again, not in 60 s */
	assert_int_equal(answer(res, efd, out, 4), 1);
	gm_peers_resolver_stop(res);
	gm_peers_resolver_stop(NULL);
	usleep(100000); /* the thread frees the resolver as it leaves */
}

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/gm-peers-XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	const char *names[] = {"ok", "bad", "many"};
	char p[128];
	for (size_t k = 0; k < 3; k++) {
		snprintf(p, sizeof(p), "%s/%s", dir, names[k]);
		unlink(p);
	}
	return rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_entry_forms),
	    cmocka_unit_test(test_entry_refusals_in_words),
	    cmocka_unit_test(test_list),
	    cmocka_unit_test(test_file),
	    cmocka_unit_test(test_lookup_numeric_and_order),
	    cmocka_unit_test(test_resolver_answers_through_its_eventfd),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
