/*
 * cgroup.c - the cgroup limits above this process (see cgroup.h).
 *
 * /proc/self/cgroup names the process's cgroup once per hierarchy: v1 lines
 * "ID:CONTROLLERS:/path" (CONTROLLERS a comma list, "cpu,cpuacct"), the v2 line
 * "0::/path". own_cgroup() is the one parser of it; walk() then visits that
 * cgroup's directory under a mount and every parent up to the mount's root,
 * because a limit set on any ancestor binds as much as one set on the process's
 * own level. The three readers below (memory, CPU quota, cpuset) are each a visit
 * function over walk().
 *
 * In a cgroup namespace the path in /proc/self/cgroup is relative to the
 * namespace while the mount shows only the namespace's root: when the named
 * directory does not exist, the mount's root is taken as the process's cgroup.
 *
 * It does not write to cgroups, and does not look for mounts elsewhere than the
 * usual places (/sys/fs/cgroup for v2, /sys/fs/cgroup/unified for the hybrid
 * layout, /sys/fs/cgroup/CONTROLLER for v1).
 */
#include "goldminer/cgroup.h"
#include "goldminer/util.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* cgroup v1 writes "no limit" as the largest page multiple below 2^63 */
#define NO_LIMIT (UINT64_C(1) << 62)
#define CG_PATH	 4096

static const char *or_empty(const char *root)
{
	return root ? root : "";
}

/* Does the comma list ctls hold exactly the word ctl? */
static bool has_controller(const char *ctls, const char *ctl)
{
	size_t n = strlen(ctl);
	for (const char *t = ctls; t; t = strchr(t, ',') ? strchr(t, ',') + 1 : NULL)
		if (!strncmp(t, ctl, n) && (t[n] == ',' || t[n] == '\0'))
			return true;
	return false;
}

/* The process's cgroup path into out: in the v1 hierarchy holding controller ctl,
 * or (ctl NULL) the v2 one. false when /proc/self/cgroup has no such line. */
static bool own_cgroup(const char *root, const char *ctl, char *out, size_t len)
{
	char path[CG_PATH], line[CG_PATH];
	bool found = false;
	FILE *f;

	snprintf(path, sizeof(path), "%s/proc/self/cgroup", or_empty(root));
	if (!(f = fopen(path, "re")))
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		char *c = strchr(line, ':'), *p = c ? strchr(c + 1, ':') : NULL;
		if (!p)
			continue; /* malformed: not ID:CONTROLLERS:PATH */
		*c++ = 0;
		*p++ = 0;
		p[strcspn(p, "\n")] = 0;
		if (ctl ? has_controller(c, ctl) : !strcmp(line, "0") && !*c) {
			snprintf(out, len, "%s", p);
			found = true;
		}
	}
	fclose(f);
	return found;
}

/* Call visit(dir, cg, arg) for the process's cgroup under root+mount (v1: the
 * hierarchy of ctl; v2: ctl NULL) and for each parent up to the mount's root. */
static void walk(const char *root, const char *mount, const char *ctl,
		 void (*visit)(const char *dir, const char *cg, void *arg), void *arg)
{
	char cg[CG_PATH], dir[2 * CG_PATH];
	struct stat st;

	if (!own_cgroup(root, ctl, cg, sizeof(cg)) || cg[0] != '/')
		return;
	snprintf(dir, sizeof(dir), "%s%s%s", or_empty(root), mount, cg);
	if (stat(dir, &st) < 0) /* a cgroup namespace: the mount's root is our cgroup */
		snprintf(cg, sizeof(cg), "/");
	for (;;) {
		snprintf(dir, sizeof(dir), "%s%s%s", or_empty(root), mount,
			 strcmp(cg, "/") ? cg : "");
		visit(dir, cg, arg);
		char *slash = strrchr(cg, '/');
		if (!slash || slash == cg) {
			if (!strcmp(cg, "/"))
				break;
			snprintf(cg, sizeof(cg), "/");
		} else {
			*slash = 0;
		}
	}
}

/* The first line of dir/name into buf; false when it cannot be read. */
static bool read_line(const char *dir, const char *name, char *buf, size_t len)
{
	char path[2 * CG_PATH + 64];
	FILE *f;
	bool ok;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (!(f = fopen(path, "re")))
		return false;
	ok = fgets(buf, (int)len, f) != NULL;
	fclose(f);
	return ok;
}

/* A decimal, or "max" (v2) as UINT64_MAX, from dir/name; false if neither. */
static bool read_u64(const char *dir, const char *name, uint64_t *v)
{
	char buf[64], *end;
	unsigned long long x;

	if (!read_line(dir, name, buf, sizeof(buf)))
		return false;
	buf[strcspn(buf, "\n")] = 0;
	if (!strcmp(buf, "max")) {
		*v = UINT64_MAX;
		return true;
	}
	if (buf[0] < '0' || buf[0] > '9')
		return false; /* no sign, no blank: strtoull would take "-1" */
	errno = 0;
	x = strtoull(buf, &end, 10);
	if (errno || *end)
		return false;
	*v = x;
	return true;
}

struct mem_walk {
	struct gm_cgroup_mem *m;
	bool v2;
};

static void mem_visit(const char *dir, const char *cg, void *arg)
{
	struct mem_walk *w = arg;
	const char *lim_f = w->v2 ? "memory.max" : "memory.limit_in_bytes";
	const char *use_f = w->v2 ? "memory.current" : "memory.usage_in_bytes";
	uint64_t lim, use;

	if (!read_u64(dir, lim_f, &lim) || lim >= NO_LIMIT)
		return;
	if (!read_u64(dir, use_f, &use) || use == UINT64_MAX)
		use = 0;
	uint64_t room = use < lim ? lim - use : 0;
	if (lim < w->m->limit)
		w->m->limit = lim;
	if (room < w->m->room) {
		w->m->room = room;
		char h_lim[32], h_use[32];
		snprintf(w->m->src, sizeof(w->m->src), "memory cgroup %.200s: %s %s, %s in use", cg,
			 lim_f, gm_fmt_bytes(h_lim, sizeof(h_lim), lim),
			 gm_fmt_bytes(h_use, sizeof(h_use), use));
	}
}

void gm_cgroup_mem(const char *root, struct gm_cgroup_mem *m)
{
	struct mem_walk v1, v2;

	m->limit = m->room = UINT64_MAX;
	m->src[0] = 0;
	v1 = (struct mem_walk){m, false};
	v2 = (struct mem_walk){m, true};
	walk(root, "/sys/fs/cgroup/memory", "memory", mem_visit, &v1);
	walk(root, "/sys/fs/cgroup", NULL, mem_visit, &v2);	    /* v2 only (unified) */
	walk(root, "/sys/fs/cgroup/unified", NULL, mem_visit, &v2); /* hybrid */
}

struct cpu_walk {
	double best;
	bool v2;
};

static void cpu_visit(const char *dir, const char *cg, void *arg)
{
	struct cpu_walk *w = arg;
	char buf[128], more;
	long long q = -1, per = 0;

	(void)cg;
	if (w->v2) {
		/* "QUOTA PERIOD", QUOTA "max" for none */
		if (!read_line(dir, "cpu.max", buf, sizeof(buf)) ||
		    sscanf(buf, "%lld %lld %c", &q, &per, &more) != 2)
			return;
	} else {
		if (!read_line(dir, "cpu.cfs_quota_us", buf, sizeof(buf)) ||
		    sscanf(buf, "%lld %c", &q, &more) != 1 ||
		    !read_line(dir, "cpu.cfs_period_us", buf, sizeof(buf)) ||
		    sscanf(buf, "%lld %c", &per, &more) != 1)
			return;
	}
	if (q > 0 && per > 0 && (!w->best || (double)q / (double)per < w->best))
		w->best = (double)q / (double)per;
}

double gm_cgroup_cpu_quota(const char *root)
{
	struct cpu_walk v1 = {0, false}, v2 = {0, true};

	walk(root, "/sys/fs/cgroup/cpu", "cpu", cpu_visit, &v1);
	walk(root, "/sys/fs/cgroup", NULL, cpu_visit, &v2);
	walk(root, "/sys/fs/cgroup/unified", NULL, cpu_visit, &v2);
	if (v2.best && (!v1.best || v2.best < v1.best))
		return v2.best;
	return v1.best;
}

/* The number of CPUs in a list "0-3,8,10-11" (cpuset.cpus, /sys/.../cpu/online);
 * 0 when empty or malformed. */
unsigned gm_cgroup_cpu_list(const char *list)
{
	unsigned n = 0;
	const char *s = list;

	while (*s && *s != '\n') {
		char *end;
		unsigned long a = strtoul(s, &end, 10), b = a;
		if (end == s || *s < '0' || *s > '9')
			return 0;
		s = end;
		if (*s == '-') {
			const char *t = s + 1;
			b = strtoul(t, &end, 10);
			if (end == t || *t < '0' || *t > '9' || b < a)
				return 0;
			s = end;
		}
		if (b - a >= 65536)
			return 0;
		n += (unsigned)(b - a + 1);
		if (*s == ',')
			s++;
		else if (*s && *s != '\n')
			return 0;
	}
	return n;
}

struct cpuset_walk {
	unsigned best;
	bool v2;
};

static void cpuset_visit(const char *dir, const char *cg, void *arg)
{
	struct cpuset_walk *w = arg;
	char buf[4096];
	unsigned n;

	(void)cg;
	/* v2: the effective set (what the parents allow), else the one asked for;
	 * v1: cpuset.cpus (v1 has cpuset.effective_cpus too) */
	if (!(read_line(dir, w->v2 ? "cpuset.cpus.effective" : "cpuset.effective_cpus", buf,
			sizeof(buf)) &&
	      (n = gm_cgroup_cpu_list(buf))) &&
	    !(read_line(dir, "cpuset.cpus", buf, sizeof(buf)) && (n = gm_cgroup_cpu_list(buf))))
		return;
	if (!w->best || n < w->best)
		w->best = n;
}

unsigned gm_cgroup_cpuset(const char *root)
{
	struct cpuset_walk v1 = {0, false}, v2 = {0, true};

	walk(root, "/sys/fs/cgroup/cpuset", "cpuset", cpuset_visit, &v1);
	walk(root, "/sys/fs/cgroup", NULL, cpuset_visit, &v2);
	walk(root, "/sys/fs/cgroup/unified", NULL, cpuset_visit, &v2);
	if (v2.best && (!v1.best || v2.best < v1.best))
		return v2.best;
	return v1.best;
}
