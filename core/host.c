/*
 * host.c - the cores this host can deliver (see host.h).
 *
 * The cgroup files are cgroup.c's (gm_cgroup_cpu_quota, gm_cgroup_cpuset); this
 * adds the online CPUs, the process's affinity and the operator's --cpus, and
 * takes the least. Each source is kept apart in the result so that the agent can
 * say which one binds. gm_host_stopped reads one process's state from /proc.
 */
#include "goldminer/host.h"

#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "goldminer/cgroup.h"
#include "goldminer/util.h"

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

/* root/proc/PID/NAME's first len - 1 bytes into buf, NUL-terminated; false
 * when it cannot be opened. */
static bool proc_read(const char *root, pid_t pid, const char *name, char *buf, size_t len)
{
	char path[4200];
	snprintf(path, sizeof(path), "%s/proc/%d/%s", root ? root : "", (int)pid, name);
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	size_t n = fread(buf, 1, len - 1, f);
	fclose(f);
	buf[n] = '\0';
	return true;
}

char gm_host_proc_state(const char *root, pid_t pid)
{
	char buf[512];
	if (!proc_read(root, pid, "stat", buf, sizeof(buf)))
		return 0;
	/* "pid (comm) S ...": comm may hold ") ", so the state follows the last ')' */
	const char *paren = strrchr(buf, ')');
	if (!paren || paren[1] != ' ' || !paren[2] || (paren[3] != ' ' && paren[3]))
		return 0;
	return paren[2];
}

uint64_t gm_host_proc_cpu_ns(const char *root, pid_t pid)
{
	char buf[1024];
	if (!proc_read(root, pid, "stat", buf, sizeof(buf)))
		return UINT64_MAX;
	/* after the last ')': state, then 10 fields before utime and stime */
	const char *paren = strrchr(buf, ')');
	unsigned long long ut, st;
	long hz = sysconf(_SC_CLK_TCK);
	if (!paren || hz <= 0 ||
	    sscanf(paren + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) !=
		2 ||
	    ut + st > UINT64_MAX / 1000000000u)
		return UINT64_MAX;
	return (uint64_t)(ut + st) * (1000000000u / (uint64_t)hz);
}

uint64_t gm_host_proc_wait_ns(const char *root, pid_t pid)
{
	char buf[256];
	if (!proc_read(root, pid, "schedstat", buf, sizeof(buf)))
		return UINT64_MAX;
	unsigned long long run, wait;
	int used = 0;
	if (sscanf(buf, "%llu %llu %*u%n", &run, &wait, &used) != 2 || !used || wait >= UINT64_MAX)
		return UINT64_MAX;
	return (uint64_t)wait;
}

bool gm_host_stopped(const char *root, pid_t pid)
{
	return gm_host_proc_state(root, pid) == 'T';
}

/* A /proc/meminfo line ("MemAvailable:   23761024 kB") in bytes; UINT64_MAX if absent. */
static uint64_t meminfo(const char *key)
{
	char line[256];
	uint64_t v = UINT64_MAX, kb;
	size_t kl = strlen(key);
	FILE *f = fopen("/proc/meminfo", "re");

	if (!f)
		return v;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, kl) && line[kl] == ':' &&
		    sscanf(line + kl + 1, "%" SCNu64, &kb) == 1 && kb < UINT64_MAX / 1024) {
			v = kb * 1024;
			break;
		}
	fclose(f);
	return v;
}

int gm_host_mem_limit(uint64_t *out, char *err, size_t errlen)
{
	const char *s = getenv("GM_MEM_LIMIT");

	*out = UINT64_MAX;
	if (!s || !*s)
		return 0;
	if (gm_parse_bytes(s, out)) {
		*out = UINT64_MAX;
		if (err && errlen)
			gm_errf(err, errlen,
				"GM_MEM_LIMIT='%s' is not a size (bytes, or with a K, M, G or T "
				"suffix: like 512M or 8G); set it to one, or unset it",
				s);
		return -EINVAL;
	}
	return 0;
}

/* $GM_MEM_LIMIT in bytes, UINT64_MAX when unset (or not a size: gm_ring_admit
 * refuses that before anything asks how much room there is). */
static uint64_t env_limit(void)
{
	uint64_t v;
	gm_host_mem_limit(&v, NULL, 0);
	return v;
}

uint64_t gm_host_mem_room(char *src, size_t srclen)
{
	struct gm_cgroup_mem b;
	char h[32];
	uint64_t room = meminfo("MemAvailable"), env = env_limit();

	if (src && srclen) {
		gm_fmt_bytes(h, sizeof(h), room);
		snprintf(src, srclen, "MemAvailable %s", h);
	}
	gm_cgroup_mem(NULL, &b);
	if (b.room < room) {
		room = b.room;
		if (src && srclen)
			snprintf(src, srclen, "%s", b.src);
	}
	if (env < room) {
		room = env;
		if (src && srclen)
			snprintf(src, srclen, "GM_MEM_LIMIT=%s", getenv("GM_MEM_LIMIT"));
	}
	return room;
}

uint64_t gm_host_mem_total(void)
{
	struct gm_cgroup_mem b;
	uint64_t total = meminfo("MemTotal"), env = env_limit();

	gm_cgroup_mem(NULL, &b);
	if (b.limit < total)
		total = b.limit;
	return env < total ? env : total;
}
