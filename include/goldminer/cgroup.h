/*
 * cgroup.h - what the control groups above this process allow: the memory limit
 * and room (ring admission, ring.c), the CPU quota and the cpuset (what the host
 * can deliver, host.c).
 * One reader of /proc/self/cgroup for all three, cgroup v1 and v2 (and the hybrid
 * layout), every level from the process's own cgroup up to the root.
 *
 * Every function takes root: a directory prefixed to "/proc/self/cgroup" and
 * "/sys/fs/cgroup/..." (NULL or "": the real ones), so that a test can point it
 * at a fake tree. Nothing is cached: each call reads the files again (a process
 * may be moved, a limit changed). A file missing, unreadable or malformed counts
 * as no limit at that level; nothing here fails. Thread-safe (no shared state).
 */
#ifndef GOLDMINER_CGROUP_H
#define GOLDMINER_CGROUP_H

#include <stddef.h>
#include <stdint.h>

/* The memory cgroups above this process (v1 memory.limit_in_bytes and
 * memory.usage_in_bytes, v2 memory.max and memory.current). */
struct gm_cgroup_mem {
	uint64_t limit; /* the least limit on the path; UINT64_MAX: none ("max", or v1's
			 * "no limit", any value from 2^62 up) */
	uint64_t room;	/* the least limit less usage (0 when over); UINT64_MAX: none */
	char src[320];	/* the level giving the least room, in words: "memory cgroup
			 * /a/b: memory.max 64.0 MiB, 12.0 MiB in use"; "" when none */
};

/* Fill *m from the memory cgroups above this process (see above for root). */
void gm_cgroup_mem(const char *root, struct gm_cgroup_mem *m);

/*
 * Cores the CPU cgroups above this process allow: the tightest quota / period on
 * the path (v1 cpu.cfs_quota_us / cpu.cfs_period_us, v2 cpu.max "QUOTA PERIOD"),
 * e.g. 0.5 for half a core; 0 when no level sets one ("max", -1, missing files).
 */
double gm_cgroup_cpu_quota(const char *root);

/*
 * CPUs the cpuset cgroups above this process allow: the smallest set on the path
 * (v2 cpuset.cpus.effective, else cpuset.cpus; v1 cpuset.effective_cpus, else
 * cpuset.cpus), counted; 0 when no level names one.
 */
unsigned gm_cgroup_cpuset(const char *root);

/* CPUs in a kernel CPU list ("0-3,8"; a trailing newline is allowed); 0 when
 * empty or malformed. */
unsigned gm_cgroup_cpu_list(const char *list);

#endif
