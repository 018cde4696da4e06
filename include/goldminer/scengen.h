/*
 * scengen.h - a seeded family of host-level scenarios (scenario.h): the cluster
 * experiment drawn afresh per seed, so that the controller and the simulator are
 * judged on clusters they were not tuned to. `goldminer sim --scenario-gen SEED`
 * writes one as a scenario file; `goldminer sim --scenario` and
 * tests/bench/bench-cluster.sh read that file, so both run the same scenario.
 *
 * What a seed draws (every range inclusive; docs/USAGE.md lists the same):
 *   - 1..3 CPU-poor hosts P1..P3 of 0.15..0.30 core each (steps of 0.05), each
 *     the home of 2..5 jobs: the first submitted at 0..10 s, each next one 5..20
 *     s (steps of 0.5 s) after the one before;
 *   - 2 lenders L1, L2 of 0.50..0.80 core each (steps of 0.05; the upper end
 *     lowered so that all hosts together hold at most 2 cores), each running its
 *     own jobs one after another from 0 s until 30 s after the poor hosts' last
 *     submit: each submitted 0..8 s after the one before was due to end at its
 *     rate (its demand falls to nothing in the gap; a slowed job overlaps the
 *     next, and it rises), at 128..1536 img/s (steps of 128): some of these
 *     need more than their lender's quota, which then lends nothing;
 *   - every job: a consumer rate of 256..1024 img/s on a poor host (steps of
 *     128), a length of 8..30 s at that rate on a poor host and 10..30 s on a
 *     lender (steps of 0.5 s), rounded to whole epochs of epoch_images (at least
 *     one: the bench's photo set is read whole); --workers 8 with probability
 *     0.60, 4 or 16 with 0.075 each, auto with 0.25 (users name a count);
 *   - the per-image costs given in opts (the committed measured ones by default);
 *   - the jobs drawn again (the hosts kept) until the cluster's CPUs can feed
 *     the poor hosts' demand throughout with every host at
 *     GM_SCENGEN_FEED_SHARE of its cores (gm_scenario_feedable: scenario.h),
 *     at most GM_SCENGEN_DRAWS times (then the draw that came closest).
 * Deterministic: the same seed and options give the same scenario, on any host.
 * It does not draw GPU counts (one trainer per job), disk or network limits.
 */
#ifndef GOLDMINER_SCENGEN_H
#define GOLDMINER_SCENGEN_H

#include <stdint.h>
#include <stdio.h>

#include "goldminer/scenario.h"

/* The ranges above, for the tests and the writer's comment. */
#define GM_SCENGEN_POOR_MIN	   1
#define GM_SCENGEN_POOR_MAX	   3
#define GM_SCENGEN_POOR_CORES_MIN  0.15
#define GM_SCENGEN_POOR_CORES_MAX  0.30
#define GM_SCENGEN_LENDERS	   2
#define GM_SCENGEN_LEND_CORES_MIN  0.50
#define GM_SCENGEN_LEND_CORES_MAX  0.80
#define GM_SCENGEN_TOTAL_CORES	   2.0
#define GM_SCENGEN_JOBS_MIN	   2 /* per poor host */
#define GM_SCENGEN_JOBS_MAX	   5
#define GM_SCENGEN_FIRST_MAX_S	   10.0
#define GM_SCENGEN_GAP_MIN_S	   5.0
#define GM_SCENGEN_GAP_MAX_S	   20.0
#define GM_SCENGEN_RATE_MIN	   256.0
#define GM_SCENGEN_RATE_MAX	   1024.0
#define GM_SCENGEN_LEN_MIN_S	   8.0
#define GM_SCENGEN_LEN_MAX_S	   30.0
#define GM_SCENGEN_OWN_RATE_MIN	   128.0
#define GM_SCENGEN_OWN_RATE_MAX	   1536.0
#define GM_SCENGEN_OWN_LEN_MIN_S   10.0
#define GM_SCENGEN_OWN_LEN_MAX_S   30.0
#define GM_SCENGEN_OWN_PAUSE_MAX_S 8.0
#define GM_SCENGEN_OWN_TAIL_S	   30.0
#define GM_SCENGEN_EPOCH_IMAGES	   2900 /* the bench's photo set (make-photos.sh) */
/* A host's cores the feasibility check lets it use: the bench measured its
 * costs 1.25-1.35x the committed ones on this machine's loaded hosts. */
#define GM_SCENGEN_FEED_SHARE 0.75
#define GM_SCENGEN_DRAWS      4096

struct gm_scengen_opts {
	uint32_t epoch_images; /* a job's images are whole multiples (0: the default) */
	/* the scenario's costs (0: the committed ones of traces/cluster.tsv) */
	double local_cpu, remote_home_cpu, remote_lender_cpu; /* CPU s per image */
	double worker_rate, start_s;			      /* img/s, s */
};

/*
 * Draw scenario number seed into *out (freed with gm_scenario_destroy). opts may
 * be NULL (the defaults). Returns 0; -EINVAL for epoch_images over 1e9 or a cost
 * out of scenario.h's ranges (err says which), -ENOMEM.
 */
int gm_scengen_make(struct gm_scenario **out, uint64_t seed, const struct gm_scengen_opts *opts,
		    char *err, size_t errlen);

/*
 * Write s as a scenario file gm_scenario_load reads back to the same values: the
 * header line, a comment naming the seed and the ranges, the nodes, the jobs in
 * submit order (with their --workers), the costs. Returns 0 or -errno (-EIO).
 */
int gm_scengen_write(const struct gm_scenario *s, uint64_t seed, FILE *f);

#endif
