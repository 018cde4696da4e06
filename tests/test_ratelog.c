/*
 * test_ratelog.c - the per-address limiter of log lines a remote party can
 * cause (core/remote/ratelog.h): a few lines per address per window, then a
 * count that comes back once as a summary when the window ends; addresses
 * apart, a cap on all of them together, the table's overflow counted under
 * one name, nothing lost at the owner's stop, and bad figures refused.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "../core/remote/ratelog.h" /* the plugin's, not installed */

/* What flush said: each summary's address and count, in order. */
struct said {
	int n;
	char addr[16][GM_RATELOG_ADDR];
	uint64_t count[16];
};

static void say(void *arg, const char *addr, uint64_t n)
{
	struct said *s = arg;
	assert_true(s->n < 16);
	snprintf(s->addr[s->n], sizeof(s->addr[0]), "%s", addr);
	s->count[s->n++] = n;
}

static struct gm_ratelog *make(uint32_t lines, uint32_t total, uint32_t window, uint32_t slots)
{
	struct gm_ratelog *rl;
	struct gm_ratelog_cfg c = {
	    .lines = lines, .total = total, .window_ms = window, .slots = slots};
	assert_int_equal(gm_ratelog_create(&rl, &c), 0);
	return rl;
}

/* 600 lines a second from one address (a refusing peer asked in a loop):
 * 3 said, the rest one summary at the window's end, then a new window. */
static void test_flood_from_one_address_is_a_few_lines_and_a_count(void **state)
{
	(void)state;
	struct gm_ratelog *rl = make(3, 20, 10000, 8);
	struct said s = {0};
	int said = 0;
	for (int k = 0; k < 6000; k++) { /* 10 s at 600 a second */
		int64_t now = 1000 + k * 10000 / 6000;
		gm_ratelog_flush(rl, now, say, &s);
		said += gm_ratelog_line(rl, "10.0.0.2", now);
	}
	assert_int_equal(said, 3);
	assert_int_equal(s.n, 0); /* the window has not ended */
	assert_int_equal(gm_ratelog_flush(rl, 10999, say, &s), 0);
	assert_int_equal(gm_ratelog_flush(rl, 11000, say, &s), 1);
	assert_string_equal(s.addr[0], "10.0.0.2");
	assert_int_equal(s.count[0], 5997);
	assert_int_equal(gm_ratelog_held(rl), 5997);
	/* said once: the next flush has nothing, the next line opens a new window */
	assert_int_equal(gm_ratelog_flush(rl, 20000, say, &s), 0);
	assert_true(gm_ratelog_line(rl, "10.0.0.2", 20000));
	gm_ratelog_destroy(rl);
}

/* One address's flood does not silence another's lines. */
static void test_addresses_are_counted_apart(void **state)
{
	(void)state;
	struct gm_ratelog *rl = make(2, 100, 1000, 8);
	struct said s = {0};
	for (int k = 0; k < 50; k++)
		gm_ratelog_line(rl, "10.0.0.2", 100 + k);
	assert_true(gm_ratelog_line(rl, "10.0.0.3", 200));
	assert_true(gm_ratelog_line(rl, "10.0.0.3", 201));
	assert_false(gm_ratelog_line(rl, "10.0.0.3", 202));
	assert_int_equal(gm_ratelog_flush(rl, 1150, say, &s), 1); /* .2's window only */
	assert_string_equal(s.addr[0], "10.0.0.2");
	assert_int_equal(s.count[0], 48);
	assert_int_equal(gm_ratelog_flush(rl, 1200, say, &s), 1);
	assert_string_equal(s.addr[1], "10.0.0.3");
	assert_int_equal(s.count[1], 1);
	gm_ratelog_destroy(rl);
}

/* A window with nothing held back ends without a summary, and an address
 * quiet past its window starts afresh even when no flush ran. */
static void test_quiet_window_says_nothing_and_starts_again(void **state)
{
	(void)state;
	struct gm_ratelog *rl = make(2, 100, 1000, 4);
	struct said s = {0};
	assert_true(gm_ratelog_line(rl, "a", 0));
	assert_true(gm_ratelog_line(rl, "a", 10));
	assert_true(gm_ratelog_line(rl, "a", 1000)); /* no flush, nothing held: new window */
	assert_true(gm_ratelog_line(rl, "a", 1001));
	assert_false(gm_ratelog_line(rl, "a", 1002));
	assert_int_equal(gm_ratelog_flush(rl, 1999, say, &s), 0);
	assert_int_equal(gm_ratelog_flush(rl, 2000, say, &s), 1);
	assert_int_equal(s.count[0], 1);
	gm_ratelog_destroy(rl);
}

/* Many addresses at once: at most `total` lines in all per window, the
 * table's overflow counted under GM_RATELOG_OTHERS, every line counted. */
static void test_many_addresses_are_capped_in_all(void **state)
{
	(void)state;
	struct gm_ratelog *rl = make(3, 5, 1000, 4);
	struct said s = {0};
	int said = 0;
	char ip[32];
	for (int k = 0; k < 100; k++) { /* two lines each */
		snprintf(ip, sizeof(ip), "192.0.2.%d", k);
		said += gm_ratelog_line(rl, ip, 10);
		said += gm_ratelog_line(rl, ip, 11);
	}
	assert_int_equal(said, 5); /* .0 twice, .1 twice, .2 once: the cap in all */
	assert_int_equal(gm_ratelog_flush(rl, 1010, say, &s), 3);
	assert_string_equal(s.addr[0], "192.0.2.2");
	assert_int_equal(s.count[0], 1);
	assert_string_equal(s.addr[1], "192.0.2.3");
	assert_int_equal(s.count[1], 2);
	assert_string_equal(s.addr[2], GM_RATELOG_OTHERS); /* .4 to .99: beyond the table */
	assert_int_equal(s.count[2], 96 * 2);
	assert_int_equal(gm_ratelog_held(rl), 200 - 5);
	gm_ratelog_destroy(rl);
}

/* At the owner's stop every count is said, window ended or not; no address
 * and an overlong one are still counted. */
static void test_flush_at_stop_says_every_count(void **state)
{
	(void)state;
	struct gm_ratelog *rl = make(1, 10, 60000, 4);
	struct said s = {0};
	char lng[200];
	memset(lng, 'x', sizeof(lng) - 1);
	lng[sizeof(lng) - 1] = '\0';
	assert_true(gm_ratelog_line(rl, NULL, 5));
	assert_false(gm_ratelog_line(rl, "", 6));
	assert_true(gm_ratelog_line(rl, lng, 7));
	assert_false(gm_ratelog_line(rl, lng, 8));
	assert_int_equal(gm_ratelog_flush(rl, 100, say, &s), 0);
	assert_int_equal(gm_ratelog_flush(rl, INT64_MAX, say, &s), 2);
	assert_string_equal(s.addr[0], GM_RATELOG_OTHERS);
	assert_int_equal(strlen(s.addr[1]), GM_RATELOG_ADDR - 1);
	assert_int_equal(s.count[0] + s.count[1], 2);
	gm_ratelog_destroy(rl);
}

static void test_bad_figures_are_refused(void **state)
{
	(void)state;
	struct gm_ratelog *rl = (struct gm_ratelog *)&rl;
	struct gm_ratelog_cfg bad[] = {
	    {.lines = 0, .total = 1, .window_ms = 1, .slots = 1},
	    {.lines = 2, .total = 1, .window_ms = 1, .slots = 1},
	    {.lines = 1, .total = 1, .window_ms = 0, .slots = 1},
	    {.lines = 1, .total = 1, .window_ms = 1, .slots = 0},
	    {.lines = 1, .total = 1, .window_ms = 1, .slots = 4097},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(gm_ratelog_create(&rl, &bad[i]), -EINVAL);
		assert_null(rl);
	}
	gm_ratelog_destroy(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_addresses_are_counted_apart),
	    cmocka_unit_test(test_bad_figures_are_refused),
	    cmocka_unit_test(test_flood_from_one_address_is_a_few_lines_and_a_count),
	    cmocka_unit_test(test_flush_at_stop_says_every_count),
	    cmocka_unit_test(test_many_addresses_are_capped_in_all),
	    cmocka_unit_test(test_quiet_window_says_nothing_and_starts_again),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
