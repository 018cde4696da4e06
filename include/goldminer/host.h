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
 * It also reads a process's state letter (gm_host_proc_state, gm_host_stopped).
 */
#ifndef GOLDMINER_HOST_H
#define GOLDMINER_HOST_H

#include <stdbool.h>
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

#endif
