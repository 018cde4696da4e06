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
#include <pthread.h>
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

int gm_host_pick_cpu(double quota, const char *env, int now, const cpu_set_t *allowed, char *why,
		     size_t len)
{
	int n = CPU_COUNT(allowed), first = -1;

	for (int c = 0; c < CPU_SETSIZE && first < 0; c++)
		if (CPU_ISSET(c, allowed))
			first = c;
	if (env && !strcmp(env, "off"))
		return -1;
	if (env && *env && strcmp(env, "auto")) {
		char *end;
		errno = 0;
		long c = strtol(env, &end, 10);
		if (errno || *env < '0' || *env > '9' || *end || c >= CPU_SETSIZE) {
			gm_errf(why, len,
				"GM_WORKER_CPU='%s': want auto, off or a CPU number (0, 1, ...)",
				env);
			return -EINVAL;
		}
		if (!CPU_ISSET((int)c, allowed)) {
			gm_errf(
			    why, len,
			    "GM_WORKER_CPU=%ld: this process may not run on CPU %ld (it may on %d "
			    "CPU%s, the first %d)",
			    c, c, n, n == 1 ? "" : "s", first);
			return -EINVAL;
		}
		return (int)c;
	}
	if (!(quota > 0 && quota < GM_HOST_PIN_CORES) || n < 2)
		return -1;
	return now >= 0 && now < CPU_SETSIZE && CPU_ISSET(now, allowed) ? now : first;
}

/* the process's decision: once, under a lock (a second thread waits for it) */
static pthread_mutex_t pick_mu = PTHREAD_MUTEX_INITIALIZER;
static bool picked;
static int pick_cpu;
static char pick_why[256];

int gm_host_worker_cpu(char *why, size_t len)
{
	pthread_mutex_lock(&pick_mu);
	if (!picked) {
		cpu_set_t set;
		CPU_ZERO(&set);
		if (sched_getaffinity(0, sizeof(set), &set))
			CPU_ZERO(&set);
		pick_cpu = gm_host_pick_cpu(gm_cgroup_cpu_quota(NULL), getenv("GM_WORKER_CPU"),
					    sched_getcpu(), &set, pick_why, sizeof(pick_why));
		picked = true;
	}
	int c = pick_cpu;
	if (c < -1)
		gm_errf(why, len, "%s", pick_why);
	pthread_mutex_unlock(&pick_mu);
	return c;
}

int gm_host_pin(pid_t pid, int cpu)
{
	cpu_set_t set;

	if (cpu < 0)
		return 0;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(pid, sizeof(set), &set) ? -errno : 0;
}
