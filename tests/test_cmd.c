/*
 * test_cmd.c - the option parser every command shares (cmd/opt.c): long names,
 * prefixes, --name=value, aliases, positional arguments anywhere, and a clear
 * refusal (exit status 2) for each way a command line can be wrong; the number
 * conversions refuse signs, junk and out-of-range values and never read octal.
 * Every message has the one form "goldminer CMD: WHAT: WHY (HINT)" (cmd/err.c).
 * `goldminer node` refuses a GM_MEM_LIMIT its --mem would refuse, and `node
 * --status` that the agent refuses exits non-zero saying why.
 * cmd_parse_each hands over every value of a repeated option (node --lend-root).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cmd.h"
#include "goldminer/wire.h"

enum { O_WORKERS, O_WORDS, O_QUIET, O_SEED, O_N };
static const struct cmd_opt opts[O_N] = {
    [O_WORKERS] = {"workers", "N", 'w', "worker processes"},
    [O_WORDS] = {"words", "W", 0, "a second option sharing the prefix 'wor'"},
    [O_QUIET] = {"quiet", NULL, 'q', "no progress line"},
    [O_SEED] = {"seed", "X", 0, "seed"},
};

/* The end of a word list: a pointer, not a bare NULL (which may be an int). */
#define END ((const char *)0)

/* Parse an END-terminated list of words (argv[0] = "cmd"). */
static int parse(struct cmd_args *a, const char **val, char **pos, const char *w0, ...)
{
	static char buf[16][64];
	char *argv[16];
	int argc = 0;
	va_list ap;
	va_start(ap, w0);
	argv[argc++] = "cmd";
	for (const char *w = w0; w && argc < 15; w = va_arg(ap, const char *)) {
		snprintf(buf[argc], sizeof(buf[argc]), "%s", w);
		argv[argc] = buf[argc];
		argc++;
	}
	va_end(ap);
	argv[argc] = NULL;
	a->val = val;
	a->pos = pos;
	return cmd_parse("test", opts, O_N, argc, argv, a);
}

/* What fn(arg) writes on stderr, into buf (the file descriptor is swapped for a
 * temporary file for the call). */
static void capture(char *buf, size_t len, void (*fn)(void *), void *arg)
{
	char path[] = "/tmp/gm-test-cmd-XXXXXX";
	int fd = mkstemp(path), saved = dup(2);
	assert_true(fd >= 0 && saved >= 0);
	unlink(path);
	fflush(stderr);
	dup2(fd, 2);
	fn(arg);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	ssize_t n = pread(fd, buf, len - 1, 0);
	close(fd);
	buf[n > 0 ? n : 0] = 0;
}

static void say_every_part(void *arg)
{
	(void)arg;
	cmd_err("bench", "--on-error", "skip or fail", "bad value '%s'", "x");
	cmd_err("bench", NULL, NULL, "%d arguments", 3);
	cmd_err(NULL, "frob", NULL, "unknown command");
	cmd_note("node", "metrics on port %u", 9);
}

static void test_errors_read_goldminer_cmd_what_why_hint(void **state)
{
	char out[512];
	(void)state;
	capture(out, sizeof(out), say_every_part, NULL);
	assert_string_equal(out, "goldminer bench: --on-error: bad value 'x' (skip or fail)\n"
				 "goldminer bench: 3 arguments\n"
				 "goldminer: frob: unknown command\n"
				 "goldminer node: metrics on port 9\n");
}

static void refuse_ambiguous(void *arg)
{
	const char *val[O_N];
	char *pos[16];
	struct cmd_args a;
	*(int *)arg = parse(&a, val, pos, "--wor", "3", END);
}

static void refuse_number(void *arg)
{
	uint64_t v;
	*(int *)arg = cmd_u64("test", "--n", "101", 0, 100, &v);
}

/* A refused option names the option, the cause and where the options are listed,
 * on one line; a refused number names the option, the range and the value. */
static void test_refusals_name_the_option_and_the_fix(void **state)
{
	char out[512];
	int rc = 0;
	(void)state;
	capture(out, sizeof(out), refuse_ambiguous, &rc);
	assert_int_equal(rc, 2);
	assert_string_equal(out, "goldminer test: --wor: ambiguous option (could be --workers "
				 "--words) (goldminer test --help lists the options)\n");
	capture(out, sizeof(out), refuse_number, &rc);
	assert_int_equal(rc, -EINVAL);
	assert_string_equal(out, "goldminer test: --n: must be an integer in 0..100, not '101'\n");
}

static void test_names_prefixes_aliases_and_positionals_anywhere(void **state)
{
	const char *val[O_N];
	char *pos[16];
	struct cmd_args a;
	(void)state;
	assert_int_equal(parse(&a, val, pos, "DIR", "--work", "3", "--seed=7", "-q", "MORE", END),
			 0);
	assert_string_equal(val[O_WORKERS], "3");
	assert_string_equal(val[O_SEED], "7");
	assert_string_equal(val[O_QUIET], "");
	assert_null(val[O_WORDS]);
	assert_int_equal(a.npos, 2);
	assert_string_equal(a.pos[0], "DIR");
	assert_string_equal(a.pos[1], "MORE");
	/* the last value given wins; "--" ends options */
	assert_int_equal(parse(&a, val, pos, "-w", "1", "--workers", "2", "--", "--seed", END), 0);
	assert_string_equal(val[O_WORKERS], "2");
	assert_null(val[O_SEED]);
	assert_int_equal(a.npos, 1);
	assert_string_equal(a.pos[0], "--seed");
}

static void test_every_bad_command_line_is_refused_with_2(void **state)
{
	const char *val[O_N];
	char *pos[16];
	struct cmd_args a;
	(void)state;
	assert_int_equal(parse(&a, val, pos, "--bogus", END), 2);     /* unknown */
	assert_int_equal(parse(&a, val, pos, "--wor", "3", END), 2);  /* ambiguous */
	assert_int_equal(parse(&a, val, pos, "--workers", END), 2);   /* value missing */
	assert_int_equal(parse(&a, val, pos, "--quiet=yes", END), 2); /* flag with a value */
	assert_int_equal(parse(&a, val, pos, "-x", END), 2);	      /* unknown alias */
	/* and a good line right after bad ones parses (no state kept) */
	assert_int_equal(parse(&a, val, pos, "--seed", "1", END), 0);
	assert_string_equal(val[O_SEED], "1");
}

static void test_numbers_are_decimal_or_hex_in_range(void **state)
{
	uint64_t v = 99;
	double d = 0;
	(void)state;
	assert_int_equal(cmd_u64("test", "--n", "010", 0, 100, &v), 0);
	assert_int_equal(v, 10); /* never octal */
	assert_int_equal(cmd_u64("test", "--n", "0x10", 0, 100, &v), 0);
	assert_int_equal(v, 16);
	assert_int_equal(cmd_u64("test", "--n", "0", 0, 100, &v), 0);
	assert_int_equal(v, 0);
	v = 5;
	assert_int_equal(cmd_u64("test", "--n", "101", 0, 100, &v), -EINVAL);
	assert_int_equal(cmd_u64("test", "--n", "-1", 0, 100, &v), -EINVAL);
	assert_int_equal(cmd_u64("test", "--n", "+1", 0, 100, &v), -EINVAL);
	assert_int_equal(cmd_u64("test", "--n", "1.5", 0, 100, &v), -EINVAL);
	assert_int_equal(cmd_u64("test", "--n", "", 0, 100, &v), -EINVAL);
	assert_int_equal(cmd_u64("test", "--n", "99999999999999999999999", 0, UINT64_MAX, &v),
			 -EINVAL);
	assert_int_equal(cmd_u64("test", "--n", "3", 4, 100, &v), -EINVAL);
	assert_int_equal(v, 5); /* untouched on error */
	assert_int_equal(cmd_double("test", "--f", "0.25", 0, &d), 0);
	assert_true(d == 0.25);
	assert_int_equal(cmd_double("test", "--f", "nan", 0, &d), -EINVAL);
	assert_int_equal(cmd_double("test", "--f", "inf", 0, &d), -EINVAL);
	assert_int_equal(cmd_double("test", "--f", "-1", 0, &d), -EINVAL);
	assert_int_equal(cmd_double("test", "--f", "1x", 0, &d), -EINVAL);
}

/* Every command answers --help with its usage on stdout and exit status 0 (profile
 * used to go on and measure an empty path: exit 1). */
/* cmd_parse_each: every value of a repeated option, in order, whatever form it
 * was given in; a callback that returns non-zero stops the parse with that. */
struct seen {
	const char *v[8];
	int n, stop_at;
};

static int collect(void *arg, int opt, const char *value)
{
	struct seen *s = arg;
	if (opt != O_SEED)
		return 0;
	if (s->n == s->stop_at)
		return 2;
	s->v[s->n++] = value;
	return 0;
}

static void test_each_sees_every_value_of_a_repeated_option(void **state)
{
	char a0[] = "cmd", a1[] = "--seed", a2[] = "1", a3[] = "--se=2", a4[] = "-q",
	     a5[] = "--seed", a6[] = "3";
	char *argv[] = {a0, a1, a2, a3, a4, a5, a6, NULL};
	const char *val[O_N];
	char *pos[8];
	struct cmd_args a = {val, pos, 0};
	struct seen s = {.stop_at = -1};
	(void)state;
	assert_int_equal(cmd_parse_each("test", opts, O_N, 7, argv, &a, collect, &s), 0);
	assert_int_equal(s.n, 3);
	assert_string_equal(s.v[0], "1");
	assert_string_equal(s.v[1], "2");
	assert_string_equal(s.v[2], "3");
	assert_string_equal(val[O_SEED], "3"); /* val still holds the last */
	assert_string_equal(val[O_QUIET], "");
	struct seen t = {.stop_at = 1};
	assert_int_equal(cmd_parse_each("test", opts, O_N, 7, argv, &a, collect, &t), 2);
	assert_int_equal(t.n, 1);
}

/* node --lend-root: at most 16 (GM_LEND_MAX_ROOTS), refused in words past them
 * with 2, before anything starts. */
static void run_node_with_roots(void *arg)
{
	int *nroots = arg;
	char a0[] = "node", opt[] = "--lend-root", dir[] = "/nonexistent-lend-root";
	char *argv[2 * 17 + 2];
	int argc = 0;
	argv[argc++] = a0;
	for (int i = 0; i < *nroots; i++) {
		argv[argc++] = opt;
		argv[argc++] = dir;
	}
	argv[argc] = NULL;
	*nroots = gm_cmd_node(argc, argv);
}

static void test_node_refuses_a_17th_lend_root(void **state)
{
	char out[512];
	int rc = 17;
	(void)state;
	capture(out, sizeof(out), run_node_with_roots, &rc);
	assert_int_equal(rc, 2);
	assert_string_equal(out, "goldminer node: --lend-root: given more than 16 times (name a "
				 "directory above them instead)\n");
}

static void test_every_command_answers_help_with_0(void **state)
{
	static int (*const cmds[])(int, char **) = {gm_cmd_bench, gm_cmd_node,	  gm_cmd_pack,
						    gm_cmd_plan,  gm_cmd_profile, gm_cmd_sim,
						    gm_cmd_synth};
	(void)state;
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		char a0[] = "cmd", a1[] = "--help";
		char *argv[] = {a0, a1, NULL};
		assert_int_equal(cmds[i](2, argv), 0);
	}
}

/* gm_cmd_node with the words of an END-terminated list (argv[0] = "node"). */
struct node_call {
	const char *w[8];
	int rc;
};

static void call_node(void *arg)
{
	struct node_call *c = arg;
	char buf[8][96], *argv[9];
	int argc = 0;
	argv[argc++] = "node";
	for (int i = 0; c->w[i] && argc < 8; i++) {
		snprintf(buf[argc], sizeof(buf[argc]), "%s", c->w[i]);
		argv[argc] = buf[argc];
		argc++;
	}
	argv[argc] = NULL;
	c->rc = gm_cmd_node(argc, argv);
}

/* The values `node --mem` refuses are refused in GM_MEM_LIMIT too, naming the
 * variable and the value, before the agent starts (its socket's directory does
 * not exist: an agent that started would fail with 1 and another message). */
static void test_mem_limit_refuses_what_mem_refuses(void **state)
{
	static const char *bad[] = {"-1", "abc", "1e30", "99999999999T", "12Q"};
	char out[512], want[160];
	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct node_call c = {
		    .w = {"--mem", bad[i], "--socket", "/nonexistent/gm/a.sock", END}};
		capture(out, sizeof(out), call_node, &c);
		assert_int_equal(c.rc, 2);
		snprintf(want, sizeof(want),
			 "goldminer node: --mem: takes a size of at least 1M, not '%s'", bad[i]);
		assert_non_null(strstr(out, want));

		assert_int_equal(setenv("GM_MEM_LIMIT", bad[i], 1), 0);
		struct node_call e = {.w = {"--socket", "/nonexistent/gm/a.sock", END}};
		capture(out, sizeof(out), call_node, &e);
		assert_int_equal(unsetenv("GM_MEM_LIMIT"), 0);
		assert_int_equal(e.rc, 2);
		snprintf(
		    want, sizeof(want),
		    "goldminer node: GM_MEM_LIMIT: takes a size, not '%s' (like 512M or 8G, or "
		    "unset it)\n",
		    bad[i]);
		assert_string_equal(out, want);
	}
	/* a good one passes the check: the agent then fails on its socket (1) */
	assert_int_equal(setenv("GM_MEM_LIMIT", "2G", 1), 0);
	struct node_call g = {.w = {"--socket", "/nonexistent/gm/a.sock", "--quiet", END}};
	capture(out, sizeof(out), call_node, &g);
	assert_int_equal(unsetenv("GM_MEM_LIMIT"), 0);
	assert_int_equal(g.rc, 1);
	assert_null(strstr(out, "GM_MEM_LIMIT"));
}

/* A one-shot agent at path: answers the first request with status and msg. */
static pid_t fake_agent(const char *path, int status, const char *msg)
{
	struct sockaddr_un sa;
	char err[256];
	int fd = gm_wire_socket(path, &sa, err, sizeof(err));
	assert_true(fd >= 0);
	unlink(path);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, 1), 0);
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		alarm(10);
		int c = accept(fd, NULL, NULL);
		struct gm_node_req req;
		if (c < 0 || recv(c, &req, sizeof(req), 0) <= 0)
			_exit(1);
		gm_wire_reply(c, status, -1, 0, 0, "%s", msg);
		close(c);
		_exit(0);
	}
	close(fd);
	return pid;
}

/* What `node --status` prints on stdout (into out) and stderr (captured). */
static void status_of(const char *path, int *rc, char *out, size_t len, char *err, size_t elen)
{
	char tmp[] = "/tmp/gm-test-cmd-out-XXXXXX";
	int fd = mkstemp(tmp), saved = dup(1);
	assert_true(fd >= 0 && saved >= 0);
	unlink(tmp);
	fflush(stdout);
	dup2(fd, 1);
	struct node_call c = {.w = {"--socket", path, "--status", END}};
	capture(err, elen, call_node, &c);
	fflush(stdout);
	dup2(saved, 1);
	close(saved);
	ssize_t n = pread(fd, out, len - 1, 0);
	close(fd);
	out[n > 0 ? n : 0] = 0;
	*rc = c.rc;
}

/* --status exits 0 with the agent's answer on stdout, and non-zero with its
 * refusal on stderr through cmd_err (nothing on stdout) when the agent refuses. */
static void test_status_refused_by_the_agent_exits_non_zero(void **state)
{
	char path[64], out[512], err[512];
	int rc, st;
	(void)state;
	snprintf(path, sizeof(path), "/tmp/gm-test-cmd-%d.sock", (int)getpid());
	pid_t pid = fake_agent(path, 0, "{\"jobs\": 0}");
	status_of(path, &rc, out, sizeof(out), err, sizeof(err));
	waitpid(pid, &st, 0);
	assert_int_equal(rc, 0);
	assert_string_equal(out, "{\"jobs\": 0}\n");
	assert_string_equal(err, "");
	pid = fake_agent(path, -EBUSY,
			 "refused: the agent already serves 1 jobs, its most; wait for one to end");
	status_of(path, &rc, out, sizeof(out), err, sizeof(err));
	waitpid(pid, &st, 0);
	unlink(path);
	assert_int_not_equal(rc, 0);
	assert_string_equal(out, "");
	assert_string_equal(err, "goldminer node: gm_node_status: refused: the agent already "
				 "serves 1 jobs, its most; wait for one to end\n");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_names_prefixes_aliases_and_positionals_anywhere),
	    cmocka_unit_test(test_every_bad_command_line_is_refused_with_2),
	    cmocka_unit_test(test_numbers_are_decimal_or_hex_in_range),
	    cmocka_unit_test(test_every_command_answers_help_with_0),
	    cmocka_unit_test(test_errors_read_goldminer_cmd_what_why_hint),
	    cmocka_unit_test(test_refusals_name_the_option_and_the_fix),
	    cmocka_unit_test(test_mem_limit_refuses_what_mem_refuses),
	    cmocka_unit_test(test_status_refused_by_the_agent_exits_non_zero),
	    cmocka_unit_test(test_each_sees_every_value_of_a_repeated_option),
	    cmocka_unit_test(test_node_refuses_a_17th_lend_root),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
