#!/bin/sh
# experiments.sh - the simulator experiments of issues 3 and 14 in one command
# (`make sim-experiments`): runs every policy (the baselines synergy-tune, cachew
# and pecan included), over $SEEDS seeds of the model-class draw, on
#   openb-64        the openb trace on 8 x (8 GPU, 96 vCPU), arrivals compressed to an
#                   offered GPU load of 0.9 (contended); also strict FIFO and a
#                   CPU-poor variant (48 vCPU per node), and a load sweep
#   openb-full      the same trace on the full openb cluster (1,523 nodes), as traced
#   philly-pai      the Philly trace on the PAI machine list, compressed to load 0.9
# and a remote-cost sweep; writes tables + figures under $SIM_OUT (default
# $B/sim-experiments) and regenerates sim/RESULTS.md. Figures are drawn from the
# first seed's run; tables give the mean and 95% interval over the seeds.
#
# Environment: B (build dir, default build), SIM_OUT, TRACES (directory holding
# alibaba-gpu-v2023/ etc.; default traces/public, as `make traces` puts them),
# BACKFILL (backfill window, default 32), LOAD (target offered load, default
# 0.9), SEEDS (seeds per figure, default 10), RESULTS (default sim/RESULTS.md).
set -e
B=${B:-build}
G="$B/goldminer"
OUT=${SIM_OUT:-$B/sim-experiments}
BF=${BACKFILL:-32}
LOAD=${LOAD:-0.9}
SEEDS=${SEEDS:-10}
POLICIES="static proportional synergy-tune cachew pecan goldminer unlimited-cpu"
# the default remote cost, as --help states it (GM_SIM_REMOTE_COST)
RC=$("$B/goldminer" sim --help | sed -n 's/.*--remote-cost.*(\([0-9.]*\),.*/\1/p')
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

# run NAME CLUSTER TRACE SCALE [extra options]: every policy, seed 1 into
# $OUT/NAME (figures), and $SEEDS seeds into $OUT/NAME.seeds.jsonl (tables)
run() {
	name=$1 cl=$2 tr=$3 sc=$4
	shift 4
	echo "== $name: --cluster $cl --trace $(basename "$tr") --arrival-scale $sc $*" >&2
	rm -rf "${OUT:?}/$name"
	"$G" sim --cluster "$cl" --trace "$tr" --policy all --arrival-scale "$sc" --out "$OUT/$name" "$@" \
		>"$OUT/$name.jsonl" 2>"$OUT/$name.log"
	"$G" sim --cluster "$cl" --trace "$tr" --policy all --arrival-scale "$sc" --seeds "$SEEDS" "$@" \
		>"$OUT/$name.seeds.jsonl" 2>/dev/null
	printf '%s\n' "--cluster '$cl' --trace $(basename "$tr") --arrival-scale $sc $*" >"$OUT/$name/command"
}

# pf FILE POLICY KEY: a value from that policy's line of a JSON-lines file
pf() { grep "\"policy\":\"$2\"" "$1" | sed -n "s/.*\"$3\":\"\{0,1\}\([^,\"}]*\).*/\1/p"; }

# table NAME: markdown table of an experiment over the seeds, ratios against static
table() {
	f="$OUT/$1.seeds.jsonl"
	sj=$(pf "$f" static avg_jct)
	echo "| policy | avg JCT (h) | p50 JCT (h) | p95 JCT (h) | avg queue (h) | GPU util | GPU busy | CPU busy | avg JCT vs static |"
	echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
	for p in $POLICIES; do
		set -- avg_jct p50_jct p95_jct avg_queue gpu_util gpu_busy cpu_util
		v=""
		for k in "$@"; do v="$v $(pf "$f" "$p" "$k") $(pf "$f" "$p" "${k}_ci95")"; done
		# shellcheck disable=SC2086
		echo $v | awk -v p="$p" -v sj="$sj" '{
			printf "| %s | %.2f ± %.2f | %.2f ± %.2f | %.2f ± %.2f | %.2f ± %.2f | %.3f ± %.3f | %.3f ± %.3f | %.3f ± %.3f | %.2fx |\n",
				p, $1 / 3600, $2 / 3600, $3 / 3600, $4 / 3600, $5 / 3600, $6 / 3600, $7 / 3600, $8 / 3600,
				$9, $10, $11, $12, $13, $14, sj / $1 }'
	done
}

# ratio NAME A B: mean avg JCT of policy A over that of B in experiment NAME
ratio() {
	awk -v a="$(pf "$OUT/$1.seeds.jsonl" "$2" avg_jct)" -v b="$(pf "$OUT/$1.seeds.jsonl" "$3" avg_jct)" \
		'BEGIN { printf "%.2f", a / b }'
}

# jct FILE POLICY: "mean ± ci" of avg JCT in hours
jct() {
	awk -v m="$(pf "$1" "$2" avg_jct)" -v c="$(pf "$1" "$2" avg_jct_ci95)" \
		'BEGIN { printf "%.2f ± %.2f", m / 3600, c / 3600 }'
}

C64="8x(8gpu,96cpu)"
C48="8x(8gpu,48cpu)"
S64=$(scale_for "$C64" "$OPENB")
run openb-64 "$C64" "$OPENB" "$S64" --backfill "$BF"
run openb-64-fifo "$C64" "$OPENB" "$S64" --backfill 0
run openb-64-cpu48 "$C48" "$OPENB" "$S64" --backfill "$BF"
run openb-full "$NODES" "$OPENB" 1 --backfill "$BF"
# the same trace with goldminer's measured data plane for the image classes
GMP=traces/profile-goldminer.tsv
run openb-64-gmprof "$C64" "$OPENB" "$S64" --backfill "$BF" --profile "$GMP"
run openb-64-cpu48-gmprof "$C48" "$OPENB" "$S64" --backfill "$BF" --profile "$GMP"
if [ -f "$PHILLY" ] && [ -f "$PAI" ]; then
	SPH=$(scale_for "$PAI" "$PHILLY")
	run philly-pai "$PAI" "$PHILLY" "$SPH" --backfill "$BF"
fi

# load sweep on 64 GPUs: avg JCT (h, mean ± 95% CI over the seeds) per policy
SWEEP="$OUT/openb-64-sweep.md"
: >"$SWEEP"
for f in 0.25 0.5 0.75 1 1.25; do
	sc=$(awk -v s="$S64" -v f="$f" 'BEGIN { printf "%.3f", s * f }')
	j="$OUT/.sweep.jsonl"
	"$G" sim --cluster "$C64" --trace "$OPENB" --policy all --arrival-scale "$sc" --backfill "$BF" \
		--seeds "$SEEDS" 2>/dev/null >"$j"
	row="| $(pf "$j" static offered_load | awk '{ printf "%.2f", $1 }') | $sc"
	for p in $POLICIES; do row="$row | $(jct "$j" "$p")"; done
	echo "$row |" >>"$SWEEP"
done

# remote-cost sweep on both node shapes: avg JCT (h) of the policies it moves
RCS="$OUT/remote-cost-sweep.md"
: >"$RCS"
for cl in "$C64" "$C48"; do
	for rc in 0 0.05 0.1 0.2 0.3; do
		j="$OUT/.rc.jsonl"
		"$G" sim --cluster "$cl" --trace "$OPENB" --policy all --arrival-scale "$S64" --backfill "$BF" \
			--seeds "$SEEDS" --remote-cost "$rc" 2>/dev/null >"$j"
		row="| $cl | $rc"
		for p in proportional synergy-tune cachew pecan goldminer; do row="$row | $(jct "$j" "$p")"; done
		r=$(awk -v a="$(pf "$j" proportional avg_jct)" -v b="$(pf "$j" goldminer avg_jct)" \
			-v c="$(pf "$j" pecan avg_jct)" 'BEGIN { printf "%.2fx | %.2fx", a / b, c / b }')
		echo "$row | $r |" >>"$RCS"
	done
done
rm -f "$OUT/.probe.json" "$OUT/.sweep.jsonl" "$OUT/.rc.jsonl"

philly=""
[ -d "$OUT/philly-pai" ] && philly="$OUT/philly-pai"
sh plots/make-plots.sh "$OUT"/openb-64 "$OUT"/openb-64-fifo "$OUT"/openb-64-cpu48 \
	"$OUT"/openb-full "$OUT"/openb-64-gmprof "$OUT"/openb-64-cpu48-gmprof ${philly:+"$philly"} >&2

# ---- sim/RESULTS.md ----
{
	cat <<EOT
# Simulator results

Generated by \`make sim-experiments\` (sim/experiments.sh); do not edit by hand.
Figures (JCT CDF, GPU utilisation over time, bars per policy; the first seed's
run) are written next to each experiment's output under
\`build/sim-experiments/<experiment>/\` (or \`\$SIM_OUT\`; \`make plots\` redraws them).

**What these numbers rest on.** Every number below comes from the model in
traces/README.md and the profile table traces/profile-pytorch.tsv (sections (a) to
(d); (e) uses traces/profile-goldminer.tsv). Each rate's source column says what it
is: two rates were checked against the document they cite (the ResNet-50 and
BERT GPU rates, NVIDIA DeepLearningExamples tables), the image classes' per-vCPU
rate of (e) was measured by \`goldminer profile\`, and **everything else is an
assumption**, listed here (rates in samples/s per GPU and per vCPU; every
\`share\`, the weight of a class in the draw, is an assumption too):

| class | gpu_rate | is | cpu_rate | is | cpu_rate in (e) | is | share |
|---|---:|---|---:|---|---:|---|---:|
$(awk -F'\t' 'NR == FNR { if (!/^#/) { g[$1] = $3; gs[$1] = $6 } next }
	!/^#/ { w5 = $5; sub(/:.*/, "", w5); w6 = $6; sub(/:.*/, "", w6); w7 = gs[$1]; sub(/:.*/, "", w7)
	printf "| %s | %g | %s | %g | %s | %.0f | %s | %g |\n", $1, $2, w5, $3, w6, g[$1], w7, $4 }' \
	"$GMP" traces/profile-pytorch.tsv)

The PyTorch-era rates describe input pipelines as the paper's users ran them, not
goldminer's own data plane. The remote cost, the fraction of a data worker's rate
lost when it runs on another node than the job's GPUs, is **$RC, measured** by
tests/bench/bench-remote.sh (one worker delivers 0.83-0.99 of its rate, median
0.91, to a trainer on another host over UCX/TCP, on the development machine);
section (d) shows how the results move with it (RDMA would lower it, a slow
network raise it). The simulator's model of one node was checked against the real
node agent
by tests/bench/bench-sim-real.sh (\`make bench\`; its figures depend on the
machine and are not part of this file).
Read every ratio as "what this model predicts", not as a measurement.

**Intervals.** Each job's model class is drawn from a hash of the seed and the job
itself; every figure is the mean over $SEEDS seeds (1..$SEEDS) ± the half-width of
its 95% confidence interval (Student t, $((SEEDS - 1)) degrees of freedom), from
\`goldminer sim --seeds $SEEDS\`. The interval covers the class draw only, not the
profile or the remote cost. Ratios are ratios of the means.

Columns: JCT = completion - submit; GPU util = useful fraction of allocated GPU
time (what nvidia-smi would show on the jobs' GPUs); GPU busy and CPU busy = share
of all cluster GPUs / vCPUs doing useful work, averaged over the window of the
middle 90% of submits. Policies: \`static\` (requested vCPUs, today's practice),
\`proportional\` (each node's vCPUs by GPU share), the baselines \`synergy-tune\`
(Synergy, OSDI'22), \`cachew\` (Cachew, ATC'22) and \`pecan\` (Pecan, ATC'24) as
modelled in traces/README.md, \`goldminer\`, and the \`unlimited-cpu\` bound.

## (a) openb trace on 64 GPUs (8 nodes x 8 GPUs, 96 vCPU each)

6,171 jobs; arrivals compressed $S64 x, so the traced GPU time submitted in the
window is $LOAD of the cluster's (contended); FIFO with best-fit packing and a
backfill window of $BF jobs. Command: \`goldminer sim $(cat "$OUT/openb-64/command") --policy all --seeds $SEEDS\`.

$(table openb-64)

goldminer's average JCT against static: **$(ratio openb-64 static goldminer)x** better (paper,
64-GPU cluster: up to 2.5x); against proportional $(ratio openb-64 proportional goldminer)x,
synergy-tune $(ratio openb-64 synergy-tune goldminer)x, cachew $(ratio openb-64 cachew goldminer)x,
pecan $(ratio openb-64 pecan goldminer)x (> 1: goldminer better).

Strict FIFO (no backfill), same load:

$(table openb-64-fifo)

Half the vCPUs (8 x (8 GPU, 48 vCPU)), same load:

$(table openb-64-cpu48)

goldminer's average JCT here against proportional: $(ratio openb-64-cpu48 proportional goldminer)x;
synergy-tune $(ratio openb-64-cpu48 synergy-tune goldminer)x, cachew $(ratio openb-64-cpu48 cachew goldminer)x,
pecan $(ratio openb-64-cpu48 pecan goldminer)x; the unlimited-CPU bound is $(ratio openb-64-cpu48 goldminer unlimited-cpu)x
faster than goldminer.

Load sweep on 8 x (8 GPU, 96 vCPU) (average JCT in hours; the offered load is
measured as above):

| offered load | arrival scale | $(echo "$POLICIES" | sed 's/ / | /g') |
|---:|---:|---:|---:|---:|---:|---:|---:|---:|
$(cat "$SWEEP")

## (b) openb trace on the full openb cluster (1,523 nodes, 6,212 GPUs)

As traced (arrival scale 1; offered load $(pf "$OUT/openb-full.seeds.jsonl" static offered_load)):

$(table openb-full)

The openb pod list is a sample: as traced it loads this cluster lightly, so there
is no queueing and the table shows the pure per-job speed-up. (Compressing
arrivals by the ~400x needed for load 0.9 squeezes a month of submits into two
hours, shorter than the mean job, which is a transient rather than a contended
steady state, so it is not reported.)
EOT
	if [ -d "$OUT/philly-pai" ]; then
		cat <<EOT

## (c) Philly trace on the PAI machine list (1,897 nodes, 6,742 GPUs)

Philly has no CPU request: each job is given the cluster's vCPU-per-GPU ratio
($(sed -n 's/.* \([0-9]*\) GPUs, \([0-9]*\) vCPUs;.*/\2 \1/p' "$OUT/philly-pai.log" | awk '{ printf "%.1f", $1 / $2 }') per GPU) as its request. Compressed $SPH x to offered load $LOAD:

$(table philly-pai)

Read with care: that request is generous, so under \`static\` few jobs are
input-bound (GPU util close to 1), but it is more than the 8-GPU, 96-vCPU
machines can give to all of their GPUs, so \`static\` also strands GPUs at
placement. Most of the JCT gain here comes from that placement effect, not from
faster jobs.
EOT
	fi
	cat <<EOT

## (d) The remote cost, swept

The openb trace on 64 GPUs as in (a), at remote costs 0 to 0.3 (a local data
worker never pays it; static, proportional, synergy-tune and unlimited-cpu use no
remote workers, so only cachew, pecan and goldminer move). Average JCT in hours;
the last two columns are proportional's and pecan's mean JCT over goldminer's.

| cluster | remote cost | proportional | synergy-tune | cachew | pecan | goldminer | proportional / goldminer | pecan / goldminer |
|---|---:|---:|---:|---:|---:|---:|---:|---:|
$(cat "$RCS")

## (e) goldminer's own data plane for the image classes

The profile above describes PyTorch-era pipelines: $(awk -F'\t' '$1 == "resnet50" { print $3 }' traces/profile-pytorch.tsv) images/s per
vCPU for the ImageNet transform. goldminer's data plane, measured here by
\`goldminer profile\` (traces/profile-goldminer.tsv, which says how), runs it at
$(awk -F'\t' '$1 == "resnet50" { printf "%.0f", $3 }' "$GMP") images/s per vCPU, so a ResNet-50 job needs about
$(awk -F'\t' '$1 == "resnet50" { printf "%.1f", $2 / $3 }' "$GMP") vCPU per GPU instead of $(awk -F'\t' '$1 == "resnet50" { printf "%.0f", $2 / $3 }' traces/profile-pytorch.tsv), and a cv-light one
$(awk -F'\t' '$1 == "cv-light" { printf "%.1f", $2 / $3 }' "$GMP") instead of $(awk -F'\t' '$1 == "cv-light" { printf "%.0f", $2 / $3 }' traces/profile-pytorch.tsv). Every other class keeps the PyTorch-era
rates (they are not image pipelines goldminer runs). The same file holds the
other pipelines the data plane runs, measured the same way (share 0: not in the
mix, so they do not change the tables below; the earlier resnet50 figure came from
another session of a shared machine, and the header gives this session's):

| class | images/s per vCPU | vCPU per GPU at its base class's GPU rate (an assumption) |
|---|---:|---:|
$(awk -F'\t' '!/^#/ && $4 == 0 { printf "| %s | %.0f | %.1f |\n", $1, $3, $2 / $3 }' "$GMP")

The same experiments as (a):

8 x (8 GPU, 96 vCPU):

$(table openb-64-gmprof)

8 x (8 GPU, 48 vCPU):

$(table openb-64-cpu48-gmprof)

In this world the allocation problem all but vanishes for JPEG classification.
\`static\` still trails, because its requests, not the pipelines' needs, decide
placement (a job waits for vCPUs it does not use); what separates the other
policies comes from the classes whose pipelines remain heavy (speech, recsys,
vit: all still PyTorch-era assumptions).

## What it means

- **Where the gain comes from.** A job's speed is min(GPU-bound rate, data rate of
  its vCPUs). Under \`static\` a job whose class needs more vCPUs per GPU than it
  requested (cv-light ~20, recsys ~12.5, resnet50/speech ~8 per GPU in the profile,
  against openb requests of median 11) is input-bound for its whole life, while
  jobs that need little (nlp ~0.04, vit ~3) leave requested vCPUs idle. goldminer
  keeps 1 local vCPU per GPU and moves the rest to where the marginal gain in busy
  GPUs is largest, so fewer GPU-hours are spent waiting for data: jobs run faster,
  free their GPUs sooner, and the queue behind them shrinks. Under contention the
  queueing effect dominates: average JCT falls by more than the per-job speed-up.
- **What the baselines isolate.** synergy-tune moves vCPUs between the jobs of one
  node by their need but never across nodes; cachew and pecan move vCPUs across
  the cluster but serve jobs in start order, without asking which job gains most
  from a worker; pecan adds local placement to cachew. The gap between pecan and
  goldminer is therefore the value of the marginal-gain priority alone (both place
  workers local first); the gap between synergy-tune and pecan that of crossing
  nodes. Where vCPUs are plentiful (96 per 8 GPUs) every cluster-wide policy feeds
  nearly every job and they converge on the unlimited-CPU bound; the CPU-short
  cluster (48 per 8 GPUs) is where the rules differ.
- **The remote cost.** A data worker next to the job's GPUs no longer pays it, yet
  where vCPUs are short the results still hang on it (section (d)): the more
  workers run remote, the more of the pool's vCPUs are lost to it, and a policy
  that moves vCPUs across nodes gains less over one that keeps them local. The
  default ($RC) was measured over TCP on one machine: quote no gain without (d).
- **Against the paper.** The paper reports up to 2.5x average JCT and 2.1x GPU
  utilisation on a 64-GPU cluster with its own production mix and its measured
  pipelines. The setup here differs: a public trace (openb) whose jobs' model
  classes are drawn from an assumed mix, PyTorch-era per-vCPU rates from the
  profile rather than measured ones, a remote cost measured over TCP on one
  machine, and a FIFO scheduler with backfill. Our GPU-utilisation gain is bounded by how input-bound jobs are
  under \`static\` in *our* profile (GPU util 1.0 is the ceiling), and the JCT gain
  depends on the load chosen (see the sweep).
- **Queueing is chaotic.** Under contention a small change in when one job ends
  reorders the queue, so single runs of policies whose per-job speeds are close
  can swap places; that is why every figure is a mean over seeds with its
  interval. Where two intervals overlap, the model does not tell the policies
  apart. unlimited-cpu bounds each job's run time, not the queueing of a FIFO
  scheduler.
- **Strict FIFO** results are dominated by head-of-line blocking: an 8-GPU job waits
  for a whole free node while GPUs idle. The backfill runs (a node is held for the
  blocked head so it cannot starve) are the ones to read.
- **Full cluster.** openb's pods occupy only a small part of the 6,212-GPU cluster
  as traced, so there is no queueing and the gain is the per-job speed-up alone.
- **Which world.** Sections (a) to (d) describe PyTorch-era input pipelines (the
  profile the paper's users ran); (e) replaces the image classes' rate with
  goldminer's measured one. The non-image rows are assumptions in both.
- **Not yet here** (issue 14, later work): measured rates for the non-image
  classes and measured GPU rates (the profile's assumptions above), and a measured
  remote cost.
EOT
} >"$RESULTS"
echo "sim-experiments: wrote $RESULTS and $OUT/" >&2
