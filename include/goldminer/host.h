/*
 * host.h - what this host's CPUs can deliver to the node agent's workers: the
 * fewest cores among the online CPUs, the CPUs the process may run on (its
 * affinity and its cpuset cgroup), its CPU cgroup quota (v1 and v2) and the
 * operator's --cpus, fractions kept (a 0.25-core quota is 0.25, not 1).
 *
 * The agent multiplies it by a worker's measured on-CPU rate to get what its
 * workers can deliver together (policy.h, gm_policy_borrow): a worker's on-CPU
 * speed says what one image costs, this says how many such seconds the host has.
 *
 * root is a directory prefixed to /proc and /sys (NULL or "": the real ones; a
 * fake tree in tests, as in cgroup.h); with a root given the process's own
 * affinity is not asked (it is the real process's, not the tree's). Nothing is
 * cached and nothing fails: a file missing or malformed counts as no limit.
 * It also reads a process's state letter (gm_host_proc_state, gm_host_stopped),
 * and the memory this process may take (gm_host_mem_room, gm_host_mem_total,
 * gm_host_mem_limit: what every ring's admission, gm_ring_admit, and the node
 * agent's default budget are measured against; these read the real /proc and
 * cgroups, no root).
 */
#ifndef GOLDMINER_HOST_H
#define GOLDMINER_HOST_H

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The host's CPUs, each figure 0 when it sets no limit. */
struct gm_host_cpu {
	double online; /* CPUs online (/sys/devices/system/cpu/online, else sysconf) */
	double cpuset; /* CPUs the process may run on: affinity and cpuset cgroup */
	double quota;  /* the CPU cgroup's quota / period, e.g. 0.25 */
	double cpus;   /* --cpus as given */
	double cores;  /* the least of the above that are set: what workers can use, > 0 */
	char src[96];  /* the figure that gave cores, in words: "cgroup CPU quota 0.25" */
};

/* Fill *h for this process (root as above), with the operator's limit cpus
 * (0: none). */
void gm_host_cpu(const char *root, double cpus, struct gm_host_cpu *h);

/*
 * Workers confined to one CPU. Under a CPU cgroup quota the kernel hands each
 * CPU's run queue the quota in slices (/proc/sys/kernel/sched_cfs_bandwidth_slice_us,
 * 5 ms): a quota under a slice a period (0.2 core of a 20 ms period is 4 ms)
 * goes whole to the first CPU to ask, and the tasks on the other CPUs wait out
 * the period. Workers spread over two CPUs then share the quota by where the
 * scheduler put them, not fairly: three busy loops in a 0.2-core cgroup took
 * 0.18, 1.23 and 0.18 CPU s of 8 s, and on one CPU 0.53 each (docs/MEASUREMENTS.md,
 * "Workers confined to one CPU"). A host under GM_HOST_PIN_CORES cannot use
 * more than one CPU's time anyway, and any two such hosts fit on one CPU
 * together; on one CPU its workers share it as the scheduler's weights say
 * (tests/bench/bench-pin.sh: three jobs on a 0.2-core host, their walls 1.43-1.65x
 * apart spread, 1.00-1.01x on one CPU), and an image costs 2-5% less.
 */
#define GM_HOST_PIN_CORES 0.5

/* The CPU to confine workers to, from the CPU quota h->quota (0: none), the
 * value of $GM_WORKER_CPU env (NULL or "" or "auto": the rule above; "off":
 * never; a CPU number: that one), the CPU the process runs on now (now) and the
 * CPUs it may run on (allowed). The CPU, -1 for none (no quota under
 * GM_HOST_PIN_CORES, "off", or a single CPU allowed), or -EINVAL with a
 * message naming the variable in why when env is none of those or names a CPU
 * not allowed. Pure (tests feed it). */
int gm_host_pick_cpu(double quota, const char *env, int now, const cpu_set_t *allowed, char *why,
		     size_t len);

/* gm_host_pick_cpu for this process (its CPU quota, $GM_WORKER_CPU, sched_getcpu,
 * its affinity), decided on the first call and the same on every later one,
 * so that every pool of one process (the agent's jobs) shares the one CPU.
 * Thread-safe. */
int gm_host_worker_cpu(char *why, size_t len);

/* Confine process or thread pid (0: the caller) to cpu (< 0: nothing to do). 0
 * or -errno. */
int gm_host_pin(pid_t pid, int cpu);

/* Whether process pid of this host is stopped by a signal (SIGSTOP, SIGTSTP:
 * state T in root/proc/PID/stat, read after the last ')' of its name, which may
 * hold anything). Not a tracer's stop (t): a debugger or strace holds it, and
 * someone is looking at it. false when the file cannot be read or parsed. (A
 * lender watches its lent workers with it: core/remote/lender.c.) */
bool gm_host_stopped(const char *root, pid_t pid);

/* The state letter of process pid (root/proc/PID/stat, after the last ')'): 'R',
 * 'S', 'T', 't'...; 0 when the file cannot be read or parsed. (The pool's idle
 * watch counts a tracer's stop too: core/pool.c.) */
char gm_host_proc_state(const char *root, pid_t pid);

/* The CPU time process pid has spent (root/proc/PID/stat's utime + stime, in
 * clock ticks: 10 ms here), in ns; UINT64_MAX when the file cannot be read or
 * parsed. (Lenders pace their guests with it, core/remote/lender.c, and a
 * Python job's guest its Python worker, pywork.c.) */
uint64_t gm_host_proc_cpu_ns(const char *root, pid_t pid);

/* The time process pid's main thread has spent runnable but not running
 * (root/proc/PID/schedstat's second field: waiting on a run queue, throttled
 * by its cgroup's CPU quota included), in ns; UINT64_MAX when the file cannot
 * be read or parsed (a kernel without CONFIG_SCHED_INFO). A lender reads it
 * beside the CPU time: a guest that waited for the CPU wanted it
 * (core/remote/lender.c). */
uint64_t gm_host_proc_wait_ns(const char *root, pid_t pid);

/*
 * Memory this process may still take, in bytes: the least of MemAvailable
 * (/proc/meminfo), every memory cgroup limit above it less that cgroup's usage
 * (v1 memory.limit_in_bytes - memory.usage_in_bytes, v2 memory.max -
 * memory.current, up to the root), and $GM_MEM_LIMIT (bytes, or with a K/M/G/T
 * suffix: a cap an operator or a test sets). UINT64_MAX when nothing is known.
 * src (may be NULL) names the bound that decided, in words. Thread-safe.
 */
uint64_t gm_host_mem_room(char *src, size_t srclen);

/* The memory of the machine as this process sees it: the least of MemTotal, the
 * cgroup limits above it and $GM_MEM_LIMIT (UINT64_MAX when nothing is known; a
 * GM_MEM_LIMIT that is not a size counts as unset here: `goldminer node` refuses
 * it at start, gm_ring_admit for every ring). The node agent's default budget is
 * half of it. Thread-safe. */
uint64_t gm_host_mem_total(void);

/* $GM_MEM_LIMIT, read with gm_parse_bytes (util.h, the parser of `node --mem`): 0
 * with *out its bytes (UINT64_MAX when unset or empty), or -EINVAL with a message
 * in err (may be NULL) naming the variable and its value when it is not a size
 * ("-1", "abc", "1e30", one that overflows). Thread-safe. */
int gm_host_mem_limit(uint64_t *out, char *err, size_t errlen);

#endif
