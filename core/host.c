/*
 * host.c - the cores this host can deliver (see host.h).
 *
 * The cgroup files are cgroup.c's (gm_cgroup_cpu_quota, gm_cgroup_cpuset); this
 * adds the online CPUs, the process's affinity and the operator's --cpus, and
 * takes the least. Each source is kept apart in the result so that the agent can
 * say which one binds. gm_host_stopped reads one process's state from /proc.
 */
#include "goldminer/host.h"

#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "goldminer/cgroup.h"

/* CPUs in the list file root/rel; 0 when missing or malformed. */
static unsigned list_file(const char *root, const char *rel)
{
	char path[4200], buf[4096];
	unsigned n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s%s", root ? root : "", rel);
	if (!(f = fopen(path, "re")))
		return 0;
	if (fgets(buf, sizeof(buf), f))
		n = gm_cgroup_cpu_list(buf);
	fclose(f);
	return n;
}

/* Take v as the least so far when it is set and below; name it. */
static void least(struct gm_host_cpu *h, double v, const char *what)
{
	if (v <= 0 || (h->cores > 0 && v >= h->cores))
		return;
	h->cores = v;
	snprintf(h->src, sizeof(h->src), "%s %.2f", what, v);
}

void gm_host_cpu(const char *root, double cpus, struct gm_host_cpu *h)
{
	bool real = !root || !*root;

	*h = (struct gm_host_cpu){0};
	h->online = list_file(root, "/sys/devices/system/cpu/online");
	if (!h->online && real) {
		long c = sysconf(_SC_NPROCESSORS_ONLN);
		h->online = c > 0 ? (double)c : 0;
	}
	h->cpuset = gm_cgroup_cpuset(root);
	if (real) {
		cpu_set_t set;
		if (!sched_getaffinity(0, sizeof(set), &set) && CPU_COUNT(&set) > 0 &&
		    (!h->cpuset || CPU_COUNT(&set) < h->cpuset))
			h->cpuset = CPU_COUNT(&set);
	}
	h->quota = gm_cgroup_cpu_quota(root);
	h->cpus = cpus > 0 ? cpus : 0;
	least(h, h->online, "online CPUs");
	least(h, h->cpuset, "cpuset");
	least(h, h->quota, "cgroup CPU quota");
	least(h, h->cpus, "--cpus");
	if (h->cores <= 0) { /* nothing known: one core, said so */
		h->cores = 1;
		snprintf(h->src, sizeof(h->src), "no CPU count found: 1 assumed");
	}
}

char gm_host_proc_state(const char *root, pid_t pid)
{
	char path[4200], buf[512];
	snprintf(path, sizeof(path), "%s/proc/%d/stat", root ? root : "", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* "pid (comm) S ...": comm may hold ") ", so the state follows the last ')' */
	const char *paren = strrchr(buf, ')');
	if (!paren || paren[1] != ' ' || !paren[2] || (paren[3] != ' ' && paren[3]))
		return 0;
	return paren[2];
}

bool gm_host_stopped(const char *root, pid_t pid)
{
	return gm_host_proc_state(root, pid) == 'T';
}
