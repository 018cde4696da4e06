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

/*
 * Accepted ranges, checked at load time (and by gm_sim_run for a cluster built by
 * hand). 1,024 GPUs and 1,000,000 vCPUs per node are far past any machine and keep
 * the simulator's per-GPU-count buckets small; 10,000,000 nodes keeps node ids and
 * totals far from 32-bit overflow (the largest public list has ~6,000 nodes).
 */
#define GM_CLUSTER_MAX_NODES	 10000000u
#define GM_CLUSTER_MAX_NODE_GPUS 1024u
#define GM_CLUSTER_MAX_NODE_CPUS 1000000u
#define GM_CLUSTER_MAX_NODE_MEM	 100000000u /* GB */

struct gm_cluster {
	uint32_t n;	/* nodes */
	uint32_t *gpus; /* per node */
	uint32_t *cpus; /* vCPUs per node */
	uint32_t *mem;	/* GB of memory per node, 0: not known (only synergy-tune reads it) */
	/*
	 * Cores per node that its data workers time-share (fractions allowed: a CPU
	 * quota of 0.25), where it has fewer cores than its vCPU budget; 0: every vCPU
	 * is a core (the default). NULL in a cluster built by hand: all 0.
	 */
	double *cores;
	uint64_t total_gpus, total_cpus;
	uint32_t max_gpus; /* most GPUs on one node */
};

/*
 * Build a cluster from spec:
 *   NxSHAPE[+NxSHAPE...]  with SHAPE "(8gpu,96cpu)", e.g. "8x(8gpu,96cpu)"; memory
 *                         and cores optional, in that order: "(8gpu,24cpu,500gb)",
 *                         "(1gpu,4cpu,0.25cores)" (cores: a number > 0 with at
 *                         most 6 decimals, at most GM_CLUSTER_MAX_NODE_CPUS)
 *   PATH                  openb_node_list_*.csv (header "sn,cpu_milli,...") or the
 *                         PAI machine list (no header: machine,gpu_type,cap_cpu,
 *                         cap_mem,cap_gpu)
 * Counts are whole numbers in the ranges above (the message names the range); a
 * cluster without GPUs or without any vCPU is refused (no job could run). A node
 * with GPUs but 0 vCPUs is accepted here: whether it is usable depends on the CPU
 * policy (gm_sim_run refuses it under static and proportional).
 * Returns 0 and *out, -errno when the file cannot be read, -EBADMSG for a malformed
 * line or spec ("FILE:LINE: what" in err), -ENOMEM.
 */
int gm_cluster_load(struct gm_cluster **out, const char *spec, char *err, size_t errlen);

/* Free; NULL does nothing. */
void gm_cluster_destroy(struct gm_cluster *c);

#endif
