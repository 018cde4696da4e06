#!/bin/sh
# Elasticity and crash safety on $PHOTOS, same run:
#   - chaos: a random worker SIGKILLed every 50 ms; checksum vs a run without
#     kills, kill-to-reissue latency, throughput ratio;
#   - node agent overhead: the same job through `goldminer node` vs in-process;
#   - workers=auto against a synthetic trainer of fixed rate: the pool size it
#     settles on and the trainer's stall.
set -u
B=${B:-build}
: "${PHOTOS:?PHOTOS must name an ImageFolder directory}"
G="$B/goldminer"
out=$(mktemp -d)
sock="$out/agent.sock"
trap 'kill $agent 2>/dev/null; rm -rf "$out"' EXIT
# The options common to the three compared runs, as the positional parameters.
set -- --batch 64 --epochs 2 --quiet --checksum

echo "-- in-process, 2 workers"
"$G" bench "$PHOTOS" --workers 2 "$@" | tee "$out/plain.json"
echo "-- chaos: SIGKILL a random worker every 50 ms"
"$G" bench "$PHOTOS" --workers 2 "$@" --chaos-kill-ms 50 | tee "$out/chaos.json"
"$G" node --cpus 2 --socket "$sock" --quiet &
agent=$!
sleep 0.5
echo "-- through the node agent (--cpus 2)"
"$G" bench "$PHOTOS" --node "$sock" "$@" | tee "$out/node.json"
kill $agent
echo "-- workers=auto (budget 4), trainer at 15 batches/s of 64"
"$G" bench "$PHOTOS" --workers auto --cpus 4 --consumer-rate 15 --batch 64 --epochs 2 --quiet |
	tee "$out/auto.json"
python3 - "$out" <<'PY'
import json, os, sys
d = sys.argv[1]
j = lambda n: json.loads(open(os.path.join(d, n)).read().strip().splitlines()[-1])
p, c, n, a = j("plain.json"), j("chaos.json"), j("node.json"), j("auto.json")
print("== summary (same run)")
print(f"chaos: {c['chaos_kills']} kills, kill->reissue {c['detect_ms_mean']:.1f} ms mean, "
      f"{c['detect_ms_max']:.1f} ms max; checksums equal: {c['checksum'] == p['checksum']}; "
      f"throughput {c['img_per_s'] / p['img_per_s']:.2f} of the run without kills")
print(f"node agent: {n['img_per_s']:.0f} vs {p['img_per_s']:.0f} img/s in-process "
      f"= {n['img_per_s'] / p['img_per_s']:.2f}; checksums equal: {n['checksum'] == p['checksum']}")
print(f"auto: trainer demand {a['demand_img_per_s']:.0f} img/s, one worker {a['worker_img_per_s']:.0f} img/s "
      f"-> {a['target_workers']} workers, trainer stall {a['stall_pct']:.1f}%")
PY
