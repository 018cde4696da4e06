/*
 * cluster.c - cluster readers (cluster.h): synthetic shapes, the openb node list
 * and the PAI machine list. GPUs, vCPUs, (where given: a shape's "NNNgb", the
 * openb list's memory) memory and (a shape's "Fcores") cores are kept; GPU models are ignored (the
 * profile table gives one GPU-bound rate per model class).
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "goldminer/cluster.h"
#include "goldminer/util.h"

/* Append a node (cores 0: a vCPU is a core): 0, -E2BIG past GM_CLUSTER_MAX_NODES,
 * -ENOMEM. */
static int add_node(struct gm_cluster *c, uint32_t *cap, uint32_t g, uint32_t cpu, uint32_t mem,
		    double cores)
{
	if (c->n >= GM_CLUSTER_MAX_NODES)
		return -E2BIG;
	if (c->n == *cap) {
		uint32_t nc = *cap ? *cap * 2 : 64; /* <= 2 x GM_CLUSTER_MAX_NODES: no wrap */
		void *a = realloc(c->gpus, (size_t)nc * sizeof(uint32_t)), *b;
		if (!a)
			return -ENOMEM;
		c->gpus = a;
		if (!(b = realloc(c->cpus, (size_t)nc * sizeof(uint32_t))))
			return -ENOMEM;
		c->cpus = b;
		if (!(b = realloc(c->mem, (size_t)nc * sizeof(uint32_t))))
			return -ENOMEM;
		c->mem = b;
		if (!(b = realloc(c->cores, (size_t)nc * sizeof(double))))
			return -ENOMEM;
		c->cores = b;
		*cap = nc;
	}
	c->gpus[c->n] = g;
	c->cpus[c->n] = cpu;
	c->mem[c->n] = mem;
	c->cores[c->n] = cores;
	c->n++;
	c->total_gpus += g;
	c->total_cpus += cpu;
	if (g > c->max_gpus)
		c->max_gpus = g;
	return 0;
}

/* The message of add_node's error. */
static const char *add_node_error(int rc)
{
	return rc == -E2BIG ? "more than 10000000 nodes (the accepted range is 1..10000000)"
			    : "out of memory";
}

static bool field_num(const char *s, double *v)
{
	char *end;
	if (!*s)
		return false;
	*v = strtod(s, &end);
	return (*end == 0 || *end == '\n' || *end == '\r') && isfinite(*v) && *v >= 0;
}

/* Split line at its commas into fld (at most 6; 6 means there were more). */
static int split_commas(char *line, char *fld[6])
{
	char *s = line;
	int nf = 0;
	while (nf < 6) {
		fld[nf++] = s;
		char *cm = strchr(s, ',');
		if (!cm)
			break;
		*cm = 0;
		s = cm + 1;
	}
	return nf;
}

/* GB of an openb memory_mib field; 0 where it is not a number in range. */
static uint32_t mem_gb(const char *mib_field)
{
	double mib;
	if (!field_num(mib_field, &mib) || mib / 1024 > GM_CLUSTER_MAX_NODE_MEM)
		return 0;
	return (uint32_t)floor(mib / 1024);
}

static int read_nodes(struct gm_cluster *c, const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	char *line = NULL;
	size_t lcap = 0;
	uint32_t cap = 0;
	unsigned lineno = 0;
	int rc = 0, openb = -1;

	if (!f) {
		rc = -errno;
		gm_errf(err, errlen, "%s: %s", path, strerror(errno));
		return rc;
	}
	while (getline(&line, &lcap, f) >= 0) {
		char *fld[6];
		double cpu, g;

		lineno++;
		line[strcspn(line, "\r\n")] = 0;
		if (openb < 0) {
			openb = !strcmp(line, "sn,cpu_milli,memory_mib,gpu,model");
			if (openb)
				continue;
		}
		if (!line[0])
			continue;
		if (split_commas(line, fld) != 5) {
			gm_errf(err, errlen, "%s:%u: expected 5 comma-separated fields (%s)", path,
				lineno,
				openb ? "sn,cpu_milli,memory_mib,gpu,model"
				      : "machine,gpu_type,cap_cpu,cap_mem,cap_gpu");
			rc = -EBADMSG;
			goto out_close;
		}
		if (openb ? !field_num(fld[1], &cpu) || !field_num(fld[3], &g)
			  : !field_num(fld[2], &cpu) || !field_num(fld[4], &g)) {
			gm_errf(err, errlen, "%s:%u: bad CPU or GPU count", path, lineno);
			rc = -EBADMSG;
			goto out_close;
		}
		if (openb)
			cpu /= 1000.0;
		if (g != floor(g) || g > GM_CLUSTER_MAX_NODE_GPUS) {
			gm_errf(err, errlen,
				"%s:%u: GPU count %.17g is not a whole number in 0..%u", path,
				lineno, g, GM_CLUSTER_MAX_NODE_GPUS);
			rc = -EBADMSG;
			goto out_close;
		}
		if (cpu > GM_CLUSTER_MAX_NODE_CPUS) {
			gm_errf(err, errlen, "%s:%u: %.17g vCPUs is beyond the accepted 0..%u",
				path, lineno, cpu, GM_CLUSTER_MAX_NODE_CPUS);
			rc = -EBADMSG;
			goto out_close;
		}
		if ((rc = add_node(c, &cap, (uint32_t)g, (uint32_t)floor(cpu),
				   openb ? mem_gb(fld[2]) : 0, 0))) {
			gm_errf(err, errlen, "%s:%u: %s", path, lineno, add_node_error(rc));
			rc = rc == -E2BIG ? -EBADMSG : rc;
			goto out_close;
		}
	}
	if (!c->n) {
		gm_errf(err, errlen, "%s:%u: no nodes", path, lineno);
		rc = -EBADMSG;
	}
out_close:
	free(line);
	fclose(f);
	return rc;
}

/*
 * A whole number of at most max at *s (digits only: no sign, no space, no
 * exponent), followed by the text want; advances *s past both. Out of range or
 * malformed: false.
 */
static bool shape_num(const char **s, uint64_t max, const char *want, uint64_t *v)
{
	const char *p = *s;
	uint64_t x = 0;

	if (*p < '0' || *p > '9')
		return false;
	for (; *p >= '0' && *p <= '9'; p++) {
		x = x * 10 + (uint64_t)(*p - '0');
		if (x > max)
			return false; /* also stops before x * 10 can wrap */
	}
	if (strncmp(p, want, strlen(want)))
		return false;
	*s = p + strlen(want);
	*v = x;
	return true;
}

/*
 * Cores at *s: digits, optionally '.' and 1..6 more digits, > 0 and at most max,
 * followed by "cores"; advances *s past them. Malformed or out of range: false.
 */
static bool shape_cores(const char **s, double max, double *v)
{
	const char *p = *s;
	uint64_t whole = 0, frac = 0, scale = 1;

	if (*p < '0' || *p > '9')
		return false;
	for (; *p >= '0' && *p <= '9'; p++)
		if ((whole = whole * 10 + (uint64_t)(*p - '0')) > (uint64_t)max)
			return false;
	if (*p == '.') {
		if (*++p < '0' || *p > '9')
			return false;
		for (; *p >= '0' && *p <= '9'; p++) {
			if (scale == 1000000)
				return false; /* more than 6 decimals */
			frac = frac * 10 + (uint64_t)(*p - '0');
			scale *= 10;
		}
	}
	*v = (double)whole + (double)frac / (double)scale;
	if (!(*v > 0) || *v > max || strncmp(p, "cores", 5))
		return false;
	*s = p + 5;
	return true;
}

/* A shape's optional fields after its vCPUs: ",NNNgb" then ",Fcores", then ')'. */
static bool shape_tail(const char **s, uint64_t *mem, double *cores)
{
	const char *p = *s;
	*mem = 0;
	*cores = 0;
	if (*p == ',' && p[1] >= '0' && p[1] <= '9' && p[1 + strspn(p + 1, "0123456789")] == 'g') {
		p++;
		if (!shape_num(&p, GM_CLUSTER_MAX_NODE_MEM, "gb", mem))
			return false;
	}
	if (*p == ',') {
		p++;
		if (!shape_cores(&p, GM_CLUSTER_MAX_NODE_CPUS, cores))
			return false;
	}
	if (*p++ != ')')
		return false;
	*s = p;
	return true;
}

/* "8x(8gpu,96cpu)+2x(0gpu,64cpu)", memory and cores optional, in that order:
 * "8x(8gpu,24cpu,500gb)", "3x(1gpu,1cpu,0.75cores)" */
static int parse_shape(struct gm_cluster *c, const char *spec, char *err, size_t errlen)
{
	const char *s = spec;
	uint32_t cap = 0;
	int rc;

	for (;;) {
		uint64_t n, g, cpu, mem;
		double cores;
		if (!shape_num(&s, GM_CLUSTER_MAX_NODES, "x(", &n) || !n ||
		    !shape_num(&s, GM_CLUSTER_MAX_NODE_GPUS, "gpu,", &g) ||
		    !shape_num(&s, GM_CLUSTER_MAX_NODE_CPUS, "cpu", &cpu) ||
		    !shape_tail(&s, &mem, &cores))
			goto bad;
		for (uint64_t i = 0; i < n; i++)
			if ((rc = add_node(c, &cap, (uint32_t)g, (uint32_t)cpu, (uint32_t)mem,
					   cores))) {
				gm_errf(err, errlen, "%s: %s", spec, add_node_error(rc));
				return rc == -E2BIG ? -EBADMSG : rc;
			}
		if (!*s)
			return 0;
		if (*s++ != '+')
			goto bad;
	}
bad:
	gm_errf(err, errlen,
		"%s: bad cluster shape at '%.32s' (want NxSHAPE[+NxSHAPE...], e.g. "
		"8x(8gpu,96cpu), 8x(8gpu,24cpu,500gb) or 3x(1gpu,1cpu,0.75cores), with whole "
		"numbers N 1..%u, GPUs 0..%u, vCPUs 0..%u, GB 0..%u per node, and cores > 0 "
		"and <= %u with at most 6 decimals)",
		spec, s, GM_CLUSTER_MAX_NODES, GM_CLUSTER_MAX_NODE_GPUS, GM_CLUSTER_MAX_NODE_CPUS,
		GM_CLUSTER_MAX_NODE_MEM, GM_CLUSTER_MAX_NODE_CPUS);
	return -EBADMSG;
}

int gm_cluster_load(struct gm_cluster **out, const char *spec, char *err, size_t errlen)
{
	struct gm_cluster *c = calloc(1, sizeof(*c));
	int rc;

	if (!c)
		return -ENOMEM;
	if (strchr(spec, '(') && spec[0] >= '0' && spec[0] <= '9')
		rc = parse_shape(c, spec, err, errlen);
	else
		rc = read_nodes(c, spec, err, errlen);
	if (!rc && !c->total_gpus) {
		gm_errf(err, errlen, "%s: cluster has no GPUs", spec);
		rc = -EBADMSG;
	}
	if (!rc && !c->total_cpus) {
		gm_errf(err, errlen,
			"%s: cluster has no vCPUs, so no job's data pipeline can run "
			"(give its nodes vCPUs)",
			spec);
		rc = -EBADMSG;
	}
	if (rc) {
		gm_cluster_destroy(c);
		return rc;
	}
	*out = c;
	return 0;
}

void gm_cluster_destroy(struct gm_cluster *c)
{
	if (!c)
		return;
	free(c->gpus);
	free(c->cpus);
	free(c->mem);
	free(c->cores);
	free(c);
}
