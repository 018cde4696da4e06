/*
 * test_consumer.c - the consumer's side of a ring (consumer.h) over a real ring,
 * with this process playing the workers (claim, fill, publish): slots go back in
 * task order whatever order they are given back in; a kept batch holds its slot
 * and its bytes; one kept too long is detached to the same address with the same
 * bytes while its slot is refilled; the embedder's hold keeps a slot; a fatal
 * error, a worker's fatal, a hung-up node agent, an interrupt and a deadline each
 * end a wait with their own errno and words; a taken batch is counted for the
 * controller; an agent gone that only sized the trainer's workers leaves them
 * their leases and takes back every other (gm_consumer_strays); a refused
 * re-attach is said once and asked again ever less often, a yes gives the
 * connection back unbounded (gm_consumer_reattach). It does not
 * test the loader or the bindings (test_loader.c, test_bind.c), which embed it.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "goldminer/consumer.h"
#include "goldminer/ring.h"
#include "goldminer/util.h"
#include "goldminer/wire.h"

#define SLOTS  4
#define BATCH  8
#define SAMPLE 4096 /* a slot's data: 8 pages */

/* Play a worker: claim the lowest free task, fill its data with byte `fill`,
 * publish. The task claimed. */
static uint64_t produce(struct gm_ring *r, unsigned char fill)
{
	uint64_t task;
	int slot = gm_ring_claim(r, 1, &task);
	assert_true(slot >= 0);
	gm_ring_begin_task(r, (uint32_t)slot, task, BATCH);
	memset(gm_ring_data(r, (uint32_t)slot), fill, (size_t)BATCH * SAMPLE);
	struct gm_slot_ctl *ctl = gm_ring_ctl(r, (uint32_t)slot);
	ctl->n = BATCH;
	ctl->decode_ns = 1000;
	ctl->n_errors = 1;
	gm_ring_publish(r, (uint32_t)slot);
	return task;
}

static struct gm_ring *ring(struct gm_consumer *c)
{
	struct gm_ring *r;
	assert_int_equal(gm_ring_create(&r, SLOTS, BATCH, SAMPLE, 0, 100), 0);
	assert_int_equal(gm_consumer_init(c, r, 0), 0);
	return r;
}

/* Wait for and take the next task. Its slot. */
static uint32_t take(struct gm_consumer *c)
{
	uint64_t t = c->next;
	int slot = gm_consumer_wait(c, t, 2000);
	if (slot < 0)
		fail_msg("task %llu: %s", (unsigned long long)t, c->errmsg);
	gm_consumer_take(c, t, (uint32_t)slot, 0);
	return (uint32_t)slot;
}

static uint64_t consumed(struct gm_ring *r)
{
	return atomic_load(&gm_ring_hdr(r)->consumed);
}

static void test_slots_go_back_in_task_order_whatever_order_they_are_given_back(void **state)
{
	(void)state;
	struct gm_consumer c;
	struct gm_ring *r = ring(&c);
	uint32_t s[3];
	for (int i = 0; i < 3; i++) {
		produce(r, (unsigned char)i);
		s[i] = take(&c);
	}
	assert_int_equal(gm_consumer_held(&c), 3);
	gm_consumer_give_back(&c, s[2], GM_CONSUMER_USER);
	gm_consumer_give_back(&c, s[1], GM_CONSUMER_USER);
	assert_int_equal(consumed(r), 0); /* task 0 still held: nothing goes back */
	assert_int_equal(gm_consumer_held(&c), 3);
	gm_consumer_give_back(&c, s[0], GM_CONSUMER_USER);
	assert_int_equal(consumed(r), 3);
	assert_int_equal(gm_consumer_held(&c), 0);
	/* task 0's slot now carries task 4 */
	assert_int_equal(atomic_load(&gm_ring_ctl(r, s[0])->task), 4);
	gm_consumer_fini(&c);
	gm_ring_destroy(r);
}

static void test_the_embedders_hold_keeps_a_slot_after_the_users(void **state)
{
	(void)state;
	struct gm_consumer c;
	struct gm_ring *r = ring(&c);
	produce(r, 1);
	uint64_t t = c.next;
	int slot = gm_consumer_wait(&c, t, 2000);
	assert_true(slot >= 0);
	gm_consumer_take(&c, t, (uint32_t)slot, GM_CONSUMER_OWNER);
	gm_consumer_give_back(&c, (uint32_t)slot, GM_CONSUMER_USER);
	assert_int_equal(consumed(r), 0);
	gm_consumer_give_back(&c, (uint32_t)slot, GM_CONSUMER_OWNER);
	assert_int_equal(consumed(r), 1);
	gm_consumer_fini(&c);
	gm_ring_destroy(r);
}

static void test_a_kept_batch_holds_its_slot_and_bytes_until_dropped(void **state)
{
	(void)state;
	struct gm_consumer c;
	struct gm_ring *r = ring(&c);
	void *a;
	produce(r, 0xa0);
	uint32_t s0 = take(&c);
	size_t off = (size_t)((char *)gm_ring_data(r, s0) - (char *)gm_ring_slot(r, s0));
	assert_int_equal(gm_consumer_keep(&c, s0, off, (size_t)BATCH * SAMPLE, &a), 0);
	assert_ptr_not_equal(a, gm_ring_data(r, s0)); /* an alias, not the ring's mapping */
	assert_true(gm_consumer_kept(&c, s0));
	assert_int_equal(gm_consumer_keep(&c, s0, off, 0, &a), -EINVAL); /* kept already */
	/* later batches come and go; the kept one's slot does not */
	produce(r, 0xa1);
	uint32_t s1 = take(&c);
	gm_consumer_give_back(&c, s1, GM_CONSUMER_USER);
	assert_int_equal(consumed(r), 0);
	assert_int_equal(((unsigned char *)a)[0], 0xa0);
	assert_int_equal(((unsigned char *)a)[BATCH * SAMPLE - 1], 0xa0);
	assert_int_equal(gm_consumer_drop(&c, (char *)a + 100), 0);
	assert_int_equal(consumed(r), 2);
	assert_false(gm_consumer_kept(&c, s0));
	assert_int_equal(gm_consumer_drop(&c, a), -ENOENT); /* dropped already */
	assert_int_equal(c.detached, 0);
	gm_consumer_fini(&c);
	gm_ring_destroy(r);
}

static void test_a_batch_kept_too_long_is_detached_at_its_address_with_its_bytes(void **state)
{
	(void)state;
	struct gm_consumer c;
	struct gm_ring *r = ring(&c);
	void *a[3];
	/* keep tasks 0..2: the workers are left one slot of 4 */
	for (int i = 0; i < 3; i++) {
		produce(r, (unsigned char)(0xb0 + i));
		uint32_t s = take(&c);
		assert_int_equal(gm_consumer_keep(&c, s, 0, 0, &a[i]), 0);
	}
	assert_int_equal(consumed(r), 0);
	produce(r, 0xb3);
	/* waiting for task 3 detaches task 0: the workers have 2 slots again */
	uint32_t s3 = take(&c);
	assert_int_equal(c.detached, 1);
	assert_int_equal(consumed(r), 1);
	assert_false(gm_consumer_kept(&c, 0));
	/* task 0's slot is refilled (task 4) while its batch reads as before */
	assert_int_equal(produce(r, 0xee), 4);
	size_t off = (size_t)((char *)gm_ring_data(r, 0) - (char *)gm_ring_slot(r, 0));
	unsigned char *d0 = (unsigned char *)a[0] + off;
	assert_int_equal(((unsigned char *)gm_ring_data(r, 0))[0], 0xee);
	assert_int_equal(d0[0], 0xb0);
	assert_int_equal(d0[BATCH * SAMPLE - 1], 0xb0);
	/* its copy goes when dropped; the others are still kept */
	assert_int_equal(gm_consumer_drop(&c, d0), 0);
	assert_true(gm_consumer_kept(&c, 1));
	gm_consumer_give_back(&c, s3, GM_CONSUMER_USER);
	assert_int_equal(gm_consumer_drop(&c, a[2]), 0);
	assert_int_equal(consumed(r), 1); /* task 1 still kept */
	assert_int_equal(gm_consumer_drop(&c, a[1]), 0);
	assert_int_equal(consumed(r), 4);
	gm_consumer_fini(&c);
	gm_ring_destroy(r);
}

static void test_fatal_errors_end_the_wait_with_their_errno_and_words(void **state)
{
	(void)state;
	struct gm_consumer c;
	struct gm_ring *r = ring(&c);
	struct gm_ring_hdr *h = gm_ring_hdr(r);
	snprintf(h->fatal, sizeof(h->fatal), "no dataset here");
	atomic_store(&h->fatal_set, 2);
	assert_int_equal(gm_consumer_wait(&c, 0, 5000), -EIO);
	assert_non_null(strstr(c.errmsg, "workers cannot run: no dataset here"));
	snprintf(h->p_fatal_msg, sizeof(h->p_fatal_msg), "workers keep dying");
	atomic_store(&h->p_fatal, -EIO);
	assert_int_equal(gm_consumer_wait(&c, 0, 5000), -EIO);
	assert_string_equal(c.errmsg, "workers keep dying");
	gm_consumer_fini(&c);
	gm_ring_destroy(r);
}

static void test_a_node_agent_that_hangs_up_ends_the_wait_with_epipe(void **state)
{
	(void)state;
	struct gm_consumer c;
	struct gm_ring *r = ring(&c);
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	c.agent_fd = sv[0];
	assert_int_equal(gm_consumer_wait(&c, 0, 250), -ETIMEDOUT); /* there, silent */
	close(sv[1]);
	assert_int_equal(gm_consumer_wait(&c, 0, 5000), GM_CONSUMER_AGENT_GONE);
	assert_int_equal(GM_CONSUMER_AGENT_GONE, -EPIPE);
	assert_non_null(strstr(c.errmsg, "node agent went away"));
	close(sv[0]);
	gm_consumer_fini(&c);
	gm_ring_destroy(r);
}

static void test_interrupt_and_deadline_end_the_wait_in_time(void **state)
{
	(void)state;
	struct gm_consumer c;
	struct gm_ring *r = ring(&c);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(gm_consumer_wait(&c, 0, 300), -ETIMEDOUT);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	assert_true(s >= 0.29 && s < 3);
	assert_non_null(strstr(c.errmsg, "not ready after 300 ms"));
	gm_consumer_interrupt(&c);
	assert_int_equal(gm_consumer_wait(&c, 0, -1), -EINTR);
	assert_non_null(strstr(c.errmsg, "interrupted by a signal"));
	assert_int_equal(gm_consumer_wait(&c, 0, 0), -ETIMEDOUT); /* the flag is spent */
	gm_consumer_fini(&c);
	gm_ring_destroy(r);
}

static void test_a_taken_batch_is_counted_for_the_controller(void **state)
{
	(void)state;
	struct gm_consumer c;
	struct gm_ring *r = ring(&c);
	struct gm_ring_hdr *h = gm_ring_hdr(r);
	produce(r, 1);
	produce(r, 2);
	uint32_t s = take(&c);
	gm_consumer_take(&c, 0, s, 0); /* taken already: not counted twice */
	take(&c);
	assert_int_equal(atomic_load(&h->c_samples), 2 * BATCH);
	assert_int_equal(atomic_load(&h->c_work_ns), 2000);
	assert_int_equal(atomic_load(&h->c_errors), 2);
	assert_int_equal(atomic_load(&h->c_waiting), 0);
	assert_int_equal(atomic_load(&h->c_remote_samples), 0);
	/* a remote worker's batch (remote/home.c marks it): its samples count,
	 * as remote ones, its lender's time does not */
	uint64_t task;
	int slot = gm_ring_claim(r, 1, &task);
	assert_true(slot >= 0);
	struct gm_slot_ctl *ctl = gm_ring_ctl(r, (uint32_t)slot);
	ctl->remote = 1; /* a previous batch's mark: begin_task clears it */
	gm_ring_begin_task(r, (uint32_t)slot, task, BATCH);
	assert_int_equal(ctl->remote, 0);
	ctl->n = BATCH;
	ctl->decode_ns = 5000;
	ctl->remote = 1;
	gm_ring_publish(r, (uint32_t)slot);
	take(&c);
	assert_int_equal(atomic_load(&h->c_samples), 3 * BATCH);
	assert_int_equal(atomic_load(&h->c_remote_samples), BATCH);
	assert_int_equal(atomic_load(&h->c_work_ns), 2000);
	/* a remote lease taken back before its publish (seed 105: "connection
	 * lost: Endpoint timeout; its batch 62 is made again"): 6 of its 8
	 * samples had landed, a local worker makes the last 2 in 400 us; counted
	 * as a local batch, 8 samples in 400 us read 4 times its worker's rate */
	slot = gm_ring_claim(r, 1, &task);
	assert_true(slot >= 0);
	ctl = gm_ring_ctl(r, (uint32_t)slot);
	gm_ring_begin_task(r, (uint32_t)slot, task, BATCH);
	assert_int_equal(ctl->remote, 0); /* a fresh task: local */
	atomic_store(&gm_ring_done_bits(r, (uint32_t)slot)[0], (1ull << (BATCH - 2)) - 1);
	gm_ring_begin_task(r, (uint32_t)slot, task, BATCH); /* resumed by a local worker */
	assert_int_equal(ctl->remote, 1);
	ctl->decode_ns += 400;
	gm_ring_publish(r, (uint32_t)slot);
	take(&c);
	assert_int_equal(atomic_load(&h->c_samples), 4 * BATCH);
	assert_int_equal(atomic_load(&h->c_remote_samples), 2 * BATCH);
	assert_int_equal(atomic_load(&h->c_work_ns), 2000);
	gm_consumer_fini(&c);
	gm_ring_destroy(r);
}

/* ours for gm_consumer_strays: this process plays the trainer's one worker */
static bool this_process(void *arg, uint32_t holder)
{
	(void)arg;
	return holder == (uint32_t)getpid();
}

static void test_an_agent_gone_takes_back_every_lease_but_the_trainers_workers(void **state)
{
	(void)state;
	struct gm_consumer c;
	struct gm_ring *r = ring(&c);
	struct gm_ring_hdr *h = gm_ring_hdr(r);
	uint64_t task;
	pid_t dead = fork();
	assert_true(dead >= 0);
	if (dead == 0)
		_exit(0);
	assert_int_equal(waitpid(dead, NULL, 0), dead);
	/* a remote worker's lease (the agent's virtual id: remote.h), the trainer's
	 * live worker's, one of a process gone, one of a live process not ours */
	uint32_t holders[SLOTS] = {0x400001u, (uint32_t)getpid(), (uint32_t)dead, 1};
	for (int i = 0; i < SLOTS; i++)
		assert_int_equal(gm_ring_claim(r, holders[i], &task), i);
	atomic_store(&h->p_alive, 1);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(gm_consumer_strays(&c, this_process, NULL), 3);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	assert_true(s < 3); /* pid 1 lives on: taken back at the 2-s bound */
	for (uint32_t i = 0; i < SLOTS; i++)
		assert_int_equal(atomic_load(&gm_ring_ctl(r, i)->state),
				 i == 1 ? GM_SLOT_WORD(GM_SLOT_CLAIMED, getpid())
					: GM_SLOT_WORD(GM_SLOT_FREE, 0));
	assert_int_equal(atomic_load(&h->p_alive), 1); /* the trainer's worker's count */
	/* the three go to the next claimers; the trainer's worker still publishes */
	for (int i = 0; i < 3; i++)
		assert_true(gm_ring_claim(r, 7, &task) >= 0);
	assert_int_equal(gm_ring_publish_held(r, 1, (uint32_t)getpid()), 0);
	gm_consumer_fini(&c);
	gm_ring_destroy(r);
}

/* The agent the test plays at gm_consumer_reattach's ask: says no while `no` is
 * positive, and notes how often it was asked and fd's receive bound. */
struct fake_agent {
	int asked, no;
	long rcv_ms;
};

static int fake_ask(void *arg, int fd, char *why, size_t len)
{
	struct fake_agent *a = arg;
	struct timeval tv;
	socklen_t tl = sizeof(tv);

	a->asked++;
	assert_int_equal(getsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, &tl), 0);
	a->rcv_ms = (long)tv.tv_sec * 1000 + tv.tv_usec / 1000;
	if (a->no <= 0)
		return 0;
	a->no--;
	snprintf(why, len, "sees other files");
	return -EPROTO;
}

/* Lines in the file at fd (the captured stderr) holding word. */
static int lines_with(int fd, const char *word)
{
	char buf[8192];
	int n = 0;

	fflush(stderr);
	ssize_t got = pread(fd, buf, sizeof(buf) - 1, 0);
	assert_true(got >= 0);
	buf[got] = 0;
	for (char *p = buf; (p = strstr(p, word)); p += strlen(word))
		n++;
	return n;
}

static void test_a_refused_reattach_is_said_once_and_asked_again_ever_less_often(void **state)
{
	(void)state;
	struct gm_consumer c;
	struct gm_ring *r = ring(&c);
	struct fake_agent a = {.no = 5};
	struct sockaddr_un sa;
	char dir[] = "/tmp/gm-consumer-XXXXXX", path[64], err[256];
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/node.sock", dir);
	c.agent_fd = 99; /* (a connection the embedder closed) */
	gm_consumer_agent_lost(&c);
	assert_int_equal(c.agent_fd, -1);
	/* nothing listens yet: not asked, whenever */
	c.retry_ns = 0;
	assert_int_equal(gm_consumer_reattach(&c, path, fake_ask, &a), -1);
	assert_int_equal(a.asked, 0);
	int lfd = gm_wire_socket(path, &sa, err, sizeof(err));
	assert_true(lfd >= 0);
	assert_int_equal(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(lfd, 8), 0);
	char logp[] = "/tmp/gm-consumer-log-XXXXXX";
	int logfd = mkstemp(logp), saved = dup(2);
	assert_true(logfd >= 0 && saved >= 0);
	unlink(logp);
	fflush(stderr);
	dup2(logfd, 2);
	/* an agent listens: not asked before GM_CONSUMER_RETRY_MS, asked after */
	gm_consumer_agent_lost(&c);
	assert_int_equal(gm_consumer_reattach(&c, path, fake_ask, &a), -1);
	assert_int_equal(a.asked, 0);
	usleep((GM_CONSUMER_RETRY_MS + 50) * 1000);
	assert_int_equal(gm_consumer_reattach(&c, path, fake_ask, &a), -1);
	assert_int_equal(a.asked, 1);
	assert_int_equal(a.rcv_ms, GM_CONSUMER_REATTACH_MS); /* its answer bounded */
	assert_int_equal(gm_consumer_reattach(&c, path, fake_ask, &a), -1);
	assert_int_equal(a.asked, 1); /* too soon after the refusal */
	/* each refusal doubles the wait, up to GM_CONSUMER_RETRY_MAX_MS; said once */
	uint32_t want = 2 * GM_CONSUMER_RETRY_MS;
	for (int i = 2; i <= 5; i++) {
		assert_int_equal(c.retry_ms, want);
		uint64_t now = gm_now_ns();
		c.retry_ns = 0;
		assert_int_equal(gm_consumer_reattach(&c, path, fake_ask, &a), -1);
		assert_int_equal(a.asked, i);
		assert_in_range(c.retry_ns - now, want * 1000000ull, (want + 1000) * 1000000ull);
		want = want * 2 < GM_CONSUMER_RETRY_MAX_MS ? want * 2 : GM_CONSUMER_RETRY_MAX_MS;
	}
	assert_int_equal(c.retry_ms, GM_CONSUMER_RETRY_MAX_MS);
	assert_int_equal(lines_with(logfd, "does not take this job back (sees other files)"), 1);
	assert_int_equal(lines_with(logfd, path), 1);
	/* a yes: the connection is the consumer's agent's, with no bound left */
	c.retry_ns = 0;
	int fd = gm_consumer_reattach(&c, path, fake_ask, &a);
	assert_true(fd >= 0);
	assert_int_equal(c.agent_fd, fd);
	assert_int_equal(a.asked, 6);
	struct timeval tv;
	socklen_t tl = sizeof(tv);
	assert_int_equal(getsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, &tl), 0);
	assert_true(tv.tv_sec == 0 && tv.tv_usec == 0);
	/* after it, the next agent's first refusal is said again */
	close(fd);
	gm_consumer_agent_lost(&c);
	a.no = 1;
	c.retry_ns = 0;
	assert_int_equal(gm_consumer_reattach(&c, path, fake_ask, &a), -1);
	assert_int_equal(lines_with(logfd, "does not take this job back"), 2);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	close(logfd);
	close(lfd);
	unlink(path);
	rmdir(dir);
	gm_consumer_fini(&c);
	gm_ring_destroy(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_slots_go_back_in_task_order_whatever_order_they_are_given_back),
	    cmocka_unit_test(test_the_embedders_hold_keeps_a_slot_after_the_users),
	    cmocka_unit_test(test_a_kept_batch_holds_its_slot_and_bytes_until_dropped),
	    cmocka_unit_test(test_a_batch_kept_too_long_is_detached_at_its_address_with_its_bytes),
	    cmocka_unit_test(test_fatal_errors_end_the_wait_with_their_errno_and_words),
	    cmocka_unit_test(test_a_node_agent_that_hangs_up_ends_the_wait_with_epipe),
	    cmocka_unit_test(test_interrupt_and_deadline_end_the_wait_in_time),
	    cmocka_unit_test(test_a_taken_batch_is_counted_for_the_controller),
	    cmocka_unit_test(test_an_agent_gone_takes_back_every_lease_but_the_trainers_workers),
	    cmocka_unit_test(test_a_refused_reattach_is_said_once_and_asked_again_ever_less_often),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
