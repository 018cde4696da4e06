/*
 * cluster.h - the machines a simulated cluster is made of.
 *
 * Plain data: one entry per node with its GPUs and vCPUs (memory is read but not
 * simulated). Readers for the openb node list, the PAI machine list and synthetic
 * shapes; formats in traces/README.md.
 */
#ifndef GOLDMINER_CLUSTER_H
#define GOLDMINER_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

struct gm_cluster {
	uint32_t n;	/* nodes */
	uint32_t *gpus; /* per node */
	uint32_t *cpus; /* vCPUs per node */
	uint64_t total_gpus, total_cpus;
	uint32_t max_gpus; /* most GPUs on one node */
};

/*
 * Build a cluster from spec:
 *   NxSHAPE[+NxSHAPE...]  with SHAPE "(8gpu,96cpu)", e.g. "8x(8gpu,96cpu)"
 *   PATH                  openb_node_list_*.csv (header "sn,cpu_milli,...") or the
 *                         PAI machine list (no header: machine,gpu_type,cap_cpu,
 *                         cap_mem,cap_gpu)
 * Returns 0 and *out, -errno when the file cannot be read, -EBADMSG for a malformed
 * line or spec ("FILE:LINE: what" in err), -ENOMEM.
 */
int gm_cluster_load(struct gm_cluster **out, const char *spec, char *err, size_t errlen);

/* Free; NULL does nothing. */
void gm_cluster_destroy(struct gm_cluster *c);

#endif
