#!/bin/sh
# bench-sim.sh - scale benchmark of the cluster simulator (issue 3, item 8):
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
exit $rc
