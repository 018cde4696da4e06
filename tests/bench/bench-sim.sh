#!/bin/sh
# bench-sim.sh - scale benchmark of the cluster simulator (its scale target):
# 1,000,000 synthetic jobs on 10,000 nodes (80,000 GPUs) under the goldminer
# policy, once with 96 vCPUs per node (openb's common node) and once with 32
# (CPU-contended: the policy reallocates on most events). Prints events/s, wall
# time and peak RSS; fails if a run exceeds 60 s or 2 GiB.
# Usage: B=build sh tests/bench/bench-sim.sh
B=${B:-build}
G="$B/goldminer"
[ -x "$G" ] || { echo "bench-sim: $G not built (make B=$B)" >&2; exit 1; }
TRACE="synth:jobs=1000000,seed=1,load=1.0,gpus=80000"
rc=0
for cpus in 96 32; do
	out=$("$G" sim --cluster "10000x(8gpu,${cpus}cpu)" --trace "$TRACE" --policy goldminer 2>/dev/null)
	if [ -z "$out" ]; then
		echo "bench-sim: run failed (${cpus} vCPU/node)" >&2
		rc=1
		continue
	fi
	echo "$out" | awk -v cpus="$cpus" '{
		match($0, /"events":[0-9]+/); ev = substr($0, RSTART + 9, RLENGTH - 9);
		match($0, /"wall_s":[0-9.]+/); w = substr($0, RSTART + 9, RLENGTH - 9) + 0;
		match($0, /"max_rss_mib":[0-9.]+/); m = substr($0, RSTART + 14, RLENGTH - 14) + 0;
		match($0, /"reallocations":[0-9]+/); r = substr($0, RSTART + 16, RLENGTH - 16);
		printf "sim 1M jobs, 10000x(8gpu,%scpu), goldminer: %d events in %.2f s = %.0f events/s, %s reallocations, peak RSS %.0f MiB%s\n",
			cpus, ev, w, ev / w, r, m, (w > 60 || m > 2048) ? "  OVER BUDGET (60 s, 2 GiB)" : "";
		if (w > 60 || m > 2048) exit 1 }' || rc=1
done

# The openb trace (7,064 GPU pods, 6,171 replayed) on 128 GPUs, every policy: the
# issue cites ~2-3 minutes for Synergy's Python simulator on this replay (a figure
# from the issue, not measured here).
OPENB=${TRACES:-traces/public}/alibaba-gpu-v2023/openb_pod_list_default.csv
if [ -f "$OPENB" ]; then
	t0=$(date +%s.%N)
	n=$("$G" sim --cluster "16x(8gpu,96cpu)" --trace "$OPENB" --policy all --arrival-scale 2 \
		--backfill 32 2>/dev/null | wc -l)
	t1=$(date +%s.%N)
	awk -v a="$t0" -v b="$t1" -v n="$n" 'BEGIN {
		w = b - a;
		printf "sim openb trace on 128 GPUs, %d policies: %.2f s in all (%.3f s per policy); Synergy (issue figure): ~150 s per replay, ~%.0fx slower\n",
			n, w, w / n, 150 / (w / n) }'
else
	echo "sim openb replay: skipped ($OPENB not found; set TRACES)"
fi
exit $rc
