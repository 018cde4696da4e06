#!/bin/sh
# experiments.sh - the simulator experiments of issue 3 in one command
# (`make sim-experiments`): runs every policy on
#   openb-64        the openb trace on 8 x (8 GPU, 96 vCPU), arrivals compressed to an
#                   offered GPU load of 0.9 (contended); also strict FIFO and a
#                   CPU-poor variant (48 vCPU per node), and a load sweep
#   openb-full      the same trace on the full openb cluster (1,523 nodes), as traced
#   philly-pai      the Philly trace on the PAI machine list, compressed to load 0.9
# writes tables + figures under $SIM_OUT (default $B/sim-experiments) and
# regenerates sim/RESULTS.md.
#
# Environment: B (build dir, default build), SIM_OUT, TRACES (directory holding
# alibaba-gpu-v2023/ etc.; default traces/public, as `make traces` puts them),
# BACKFILL (backfill window, default 32), LOAD (target offered load, default
# 0.9), RESULTS (default sim/RESULTS.md).
set -e
B=${B:-build}
G="$B/goldminer"
OUT=${SIM_OUT:-$B/sim-experiments}
BF=${BACKFILL:-32}
LOAD=${LOAD:-0.9}
RESULTS=${RESULTS:-sim/RESULTS.md}
[ -x "$G" ] || { echo "sim-experiments: $G not built (make)" >&2; exit 1; }
TR=""
for d in "${TRACES:-}" traces/public; do
	if [ -n "$d" ] && [ -f "$d/alibaba-gpu-v2023/openb_pod_list_default.csv" ]; then
		TR=$d
		break
	fi
done
[ -n "$TR" ] || { echo "sim-experiments: public traces not found in traces/public; run make traces (or set TRACES=DIR)" >&2; exit 1; }
OPENB="$TR/alibaba-gpu-v2023/openb_pod_list_default.csv"
NODES="$TR/alibaba-gpu-v2023/openb_node_list_all_node.csv"
PAI="$TR/alibaba-gpu-v2020/pai_machine_spec.csv"
PHILLY="$TR/philly-pollux/philly.csv"
mkdir -p "$OUT"

# field FILE KEY: a value from a one-line JSON summary
field() { sed -n "s/.*\"$2\":\"\{0,1\}\([^,\"}]*\).*/\1/p" "$1"; }

# scale_for CLUSTER TRACE: arrival scale that makes the offered load $LOAD
scale_for() {
	"$G" sim --cluster "$1" --trace "$2" --policy static 2>/dev/null >"$OUT/.probe.json"
	awk -v l="$(field "$OUT/.probe.json" offered_load)" -v t="$LOAD" \
		'BEGIN { s = t / l; printf "%.3f\n", s < 1 ? 1 : s }'
}

# run NAME CLUSTER TRACE SCALE [extra options]: all policies into $OUT/NAME
run() {
	name=$1 cl=$2 tr=$3 sc=$4
	shift 4
	echo "== $name: --cluster $cl --trace $(basename "$tr") --arrival-scale $sc $*" >&2
	rm -rf "${OUT:?}/$name"
	"$G" sim --cluster "$cl" --trace "$tr" --policy all --arrival-scale "$sc" --out "$OUT/$name" "$@" \
		>"$OUT/$name.jsonl" 2>"$OUT/$name.log"
	cat "$OUT/$name.jsonl" >&2
	printf '%s\n' "--cluster '$cl' --trace $(basename "$tr") --arrival-scale $sc $*" >"$OUT/$name/command"
}

# table NAME: markdown table of an experiment, ratios against static
table() {
	d="$OUT/$1"
	sj=$(field "$d/static/summary.json" avg_jct)
	su=$(field "$d/static/summary.json" gpu_util)
	echo "| policy | jobs | avg JCT (h) | p50 (h) | p95 (h) | avg queue (h) | GPU util | GPU busy | CPU busy | avg JCT vs static | GPU util vs static |"
	echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
	for p in static proportional goldminer unlimited-cpu; do
		f="$d/$p/summary.json"
		awk -v p="$p" -v n="$(field "$f" jobs)" -v j="$(field "$f" avg_jct)" \
			-v p50="$(field "$f" p50_jct)" -v p95="$(field "$f" p95_jct)" \
			-v q="$(field "$f" avg_queue)" -v u="$(field "$f" gpu_util)" \
			-v b="$(field "$f" gpu_busy)" -v c="$(field "$f" cpu_util)" -v sj="$sj" -v su="$su" \
			'BEGIN { printf "| %s | %d | %.2f | %.2f | %.2f | %.2f | %.3f | %.3f | %.3f | %.2fx | %.2fx |\n",
				p, n, j / 3600, p50 / 3600, p95 / 3600, q / 3600, u, b, c, sj / j, u / su }'
	done
}

ratio() { # ratio NAME KEY POLICY: static/POLICY for jct keys, POLICY/static otherwise
	a=$(field "$OUT/$1/static/summary.json" "$2")
	b=$(field "$OUT/$1/$3/summary.json" "$2")
	case $2 in
	*jct*) awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2f", a / b }' ;;
	*) awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2f", b / a }' ;;
	esac
}

C64="8x(8gpu,96cpu)"
S64=$(scale_for "$C64" "$OPENB")
run openb-64 "$C64" "$OPENB" "$S64" --backfill "$BF"
run openb-64-fifo "$C64" "$OPENB" "$S64" --backfill 0
run openb-64-cpu48 "8x(8gpu,48cpu)" "$OPENB" "$S64" --backfill "$BF"
run openb-full "$NODES" "$OPENB" 1 --backfill "$BF"
if [ -f "$PHILLY" ] && [ -f "$PAI" ]; then
	SPH=$(scale_for "$PAI" "$PHILLY")
	run philly-pai "$PAI" "$PHILLY" "$SPH" --backfill "$BF"
fi

# load sweep on 64 GPUs: avg JCT (h) per policy against offered load
SWEEP="$OUT/openb-64-sweep.tsv"
printf 'offered_load\tarrival_scale\tstatic\tproportional\tgoldminer\tunlimited-cpu\n' >"$SWEEP"
for f in 0.25 0.5 0.75 1 1.25; do
	sc=$(awk -v s="$S64" -v f="$f" 'BEGIN { printf "%.3f", s * f }')
	"$G" sim --cluster "$C64" --trace "$OPENB" --policy all --arrival-scale "$sc" --backfill "$BF" \
		2>/dev/null >"$OUT/.sweep.jsonl"
	awk -v sc="$sc" '{ match($0, /"offered_load":[0-9.]+/); l = substr($0, RSTART + 15, RLENGTH - 15);
		match($0, /"avg_jct":[0-9.]+/); j[NR] = substr($0, RSTART + 10, RLENGTH - 10) / 3600 }
		END { printf "%.2f\t%s\t%.2f\t%.2f\t%.2f\t%.2f\n", l, sc, j[1], j[2], j[3], j[4] }' \
		"$OUT/.sweep.jsonl" >>"$SWEEP"
done
# seeds: the model-class draw changes with --seed; average JCT (h) per seed
SEEDS="$OUT/openb-64-seeds.tsv"
printf 'seed\tstatic\tproportional\tgoldminer\tunlimited-cpu\n' >"$SEEDS"
for seed in 1 2 3 4 5; do
	"$G" sim --cluster "$C64" --trace "$OPENB" --policy all --arrival-scale "$S64" --backfill "$BF" \
		--seed "$seed" 2>/dev/null >"$OUT/.sweep.jsonl"
	awk -v seed="$seed" '{ match($0, /"avg_jct":[0-9.]+/); j[NR] = substr($0, RSTART + 10, RLENGTH - 10) / 3600 }
		END { printf "%s\t%.2f\t%.2f\t%.2f\t%.2f\n", seed, j[1], j[2], j[3], j[4] }' \
		"$OUT/.sweep.jsonl" >>"$SEEDS"
done
rm -f "$OUT/.probe.json" "$OUT/.sweep.jsonl"

philly=""
[ -d "$OUT/philly-pai" ] && philly="$OUT/philly-pai"
sh plots/make-plots.sh "$OUT"/openb-64 "$OUT"/openb-64-fifo "$OUT"/openb-64-cpu48 \
	"$OUT"/openb-full ${philly:+"$philly"} >&2

# ---- sim/RESULTS.md ----
{
	cat <<EOF
# Simulator results

Generated by \`make sim-experiments\` (sim/experiments.sh); do not edit by hand.
Figures (JCT CDF, GPU utilisation over time, bars per policy) are written next to
each experiment's output under \`build/sim-experiments/<experiment>/\` (or
\`\$SIM_OUT\`; \`make plots\` redraws them).
Every number below comes from the model in traces/README.md and the profile table
traces/profile.tsv, whose rates are approximate published figures and stated
assumptions: read the ratios as "what this model predicts", not as measurements.

Columns: JCT = completion - submit; GPU util = useful fraction of allocated GPU
time (what nvidia-smi would show on the jobs' GPUs); GPU busy and CPU busy = share
of all cluster GPUs / vCPUs doing useful work, averaged over the window of the
middle 90% of submits; ratios are against \`static\` (today's practice).

## (a) openb trace on 64 GPUs (8 nodes x 8 GPUs, 96 vCPU each)

Arrivals compressed $S64 x, so the traced GPU time submitted in the window is
$LOAD of the cluster's (contended); FIFO with best-fit packing and a backfill
window of $BF jobs. Command: \`goldminer sim $(cat "$OUT/openb-64/command") --policy all\`.

$(table openb-64)

goldminer against static: average JCT **$(ratio openb-64 avg_jct goldminer)x** better
(paper, 64-GPU cluster: up to 2.5x), GPU utilisation **$(ratio openb-64 gpu_util goldminer)x**
(paper: up to 2.1x). goldminer against proportional: average JCT
$(awk -v a="$(field "$OUT/openb-64/proportional/summary.json" avg_jct)" -v b="$(field "$OUT/openb-64/goldminer/summary.json" avg_jct)" 'BEGIN { printf "%.2f", a / b }')x.

The same run with five seeds of the model-class draw (average JCT, hours):

| seed | static | proportional | goldminer | unlimited-cpu |
|---:|---:|---:|---:|---:|
$(tail -n +2 "$SEEDS" | awk -F'\t' '{ printf "| %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5; for (i = 2; i <= 5; i++) s[i] += $i; n++ }
	END { printf "| mean | %.2f | %.2f | %.2f | %.2f |\n", s[2] / n, s[3] / n, s[4] / n, s[5] / n;
	      printf "\nMean over seeds: goldminer %.2fx better than static, %.2fx than proportional.\n", s[2] / s[4], s[3] / s[4] }')

Strict FIFO (no backfill), same load:

$(table openb-64-fifo)

Half the vCPUs (8 x (8 GPU, 48 vCPU)), same load:

$(table openb-64-cpu48)

Load sweep (average JCT in hours; the offered load is measured as above):

| offered load | arrival scale | static | proportional | goldminer | unlimited-cpu |
|---:|---:|---:|---:|---:|---:|
$(tail -n +2 "$SWEEP" | awk -F'\t' '{ printf "| %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6 }')

## (b) openb trace on the full openb cluster (1,523 nodes, 6,212 GPUs)

As traced (arrival scale 1; offered load $(field "$OUT/openb-full/static/summary.json" offered_load)):

$(table openb-full)

The openb pod list is a sample: as traced it loads this cluster lightly, so there
is no queueing and the table shows the pure per-job speed-up. (Compressing
arrivals by the ~400x needed for load 0.9 squeezes a month of submits into two
hours, shorter than the mean job, which is a transient rather than a contended
steady state, so it is not reported.)
EOF
	if [ -d "$OUT/philly-pai" ]; then
		cat <<EOF

## (c) Philly trace on the PAI machine list (1,897 nodes, 6,742 GPUs)

Philly has no CPU request: each job is given the cluster's vCPU-per-GPU ratio
($(sed -n 's/.* \([0-9]*\) GPUs, \([0-9]*\) vCPUs;.*/\2 \1/p' "$OUT/philly-pai.log" | awk '{ printf "%.1f", $1 / $2 }') per GPU) as its request. Compressed $SPH x to offered load $LOAD:

$(table philly-pai)

Read with care: that request is generous, so under \`static\` few jobs are
input-bound (GPU util close to 1), but it is more than the 8-GPU, 96-vCPU
machines can give to all of their GPUs, so \`static\` also strands GPUs at
placement. Most of the JCT gain here comes from that placement effect, not from
faster jobs.
EOF
	fi
	cat <<EOF

## What it means

- **Where the gain comes from.** A job's speed is min(GPU-bound rate, data rate of
  its vCPUs). Under \`static\` a job whose class needs more vCPUs per GPU than it
  requested (cv-light ~20, recsys ~12.5, resnet50/speech ~8 per GPU in the profile,
  against openb requests of median 11) is input-bound for its whole life, while
  jobs that need little (nlp ~0.1, vit ~3) leave requested vCPUs idle. goldminer
  keeps 1 local vCPU per GPU and moves the rest to where the marginal gain in busy
  GPUs is largest, so fewer GPU-hours are spent waiting for data: jobs run faster,
  free their GPUs sooner, and the queue behind them shrinks. Under contention the
  queueing effect dominates: average JCT falls by more than the per-job speed-up.
- **goldminer vs unlimited-cpu.** With 96 vCPU per 8 GPUs the idle vCPUs of the
  cluster cover every job's need, so goldminer reaches the unlimited-CPU bound; with
  48 vCPU per node the pool runs short and the gap to the bound shows how well the
  marginal-gain rule spends scarce vCPUs (pool workers pay a 10% network cost).
- **proportional** already recovers much of the gain on this cluster because 12
  vCPUs per GPU is above the mean need of the class mix; it cannot move vCPUs
  between nodes, nor away from jobs that do not need them.
- **Against the paper.** The paper reports up to 2.5x average JCT and 2.1x GPU
  utilisation on a 64-GPU cluster with its own production mix. Our GPU-utilisation
  gain is bounded by how input-bound jobs are under \`static\` in *our* profile
  (GPU util 1.0 is the ceiling); the JCT gain depends on the load chosen (see the
  sweep). The profile is the main source of uncertainty: replace it with measured
  rates (\`--profile\`) to sharpen these numbers.
- **Queueing is chaotic.** Under contention a small change in when one job ends
  reorders the queue, so single runs of policies whose per-job speeds are close
  (proportional and goldminer here, GPU util 0.95 vs 1.0) can swap places; read the
  seed table and the sweep rather than one number. unlimited-cpu bounds each job's
  run time, not the queueing of a FIFO scheduler.
- **Strict FIFO** results are dominated by head-of-line blocking: an 8-GPU job waits
  for a whole free node while GPUs idle. The backfill runs (a node is held for the
  blocked head so it cannot starve) are the ones to read.
- **Full cluster.** openb's pods occupy only a small part of the 6,212-GPU cluster
  as traced, so there is no queueing and the gain is the per-job speed-up alone.
EOF
} >"$RESULTS"
echo "sim-experiments: wrote $RESULTS and $OUT/" >&2
