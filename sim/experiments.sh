#!/bin/sh
# experiments.sh - the simulator experiments of issues 3 and 14 in one command
# (`make sim-experiments`): runs every policy (the baselines synergy-tune, cachew
# and pecan included), over $SEEDS seeds of the model-class draw, on
#   openb-64        the openb trace on 8 x (8 GPU, 96 vCPU), arrivals compressed to an
#                   offered GPU load of 0.9 (contended); also strict FIFO and a
#                   CPU-poor variant (48 vCPU per node), and a load sweep
#   openb-full      the same trace on the full openb cluster (1,523 nodes), as traced
#   philly-pai      the Philly trace on the PAI machine list, compressed to load 0.9
#   synergy-24      the same trace on 8 x (8 GPU, 24 vCPU) with Synergy's ten models
#                   (traces/profile-synergy.tsv), side by side with Synergy's simulator
# and a remote-cost sweep; writes tables + figures under $SIM_OUT (default
# $B/sim-experiments) and regenerates sim/RESULTS.md. Figures are drawn from the
# first seed's run (the per-seed ones from every seed); tables give the mean and
# 95% interval over the seeds, and every comparison is a paired per-seed ratio
# (median, bootstrap 95% interval: goldminer sim --vs).
#
# Where the time goes (2 cores): the Philly runs (about 1.8 s per seed for the
# seven policies) outweigh all openb ones together (under 0.1 s per seed each), so
# independent experiments run two at a time.
#
# Environment: B (build dir, default build), SIM_OUT, TRACES (directory holding
# alibaba-gpu-v2023/ etc.; default traces/public, as `make traces` puts them),
# BACKFILL (backfill window, default 32), LOAD (target offered load, default
# 0.9), SEEDS (seeds per figure, default 30), RESULTS (default sim/RESULTS.md).
set -e
B=${B:-build}
G="$B/goldminer"
OUT=${SIM_OUT:-$B/sim-experiments}
BF=${BACKFILL:-32}
LOAD=${LOAD:-0.9}
SEEDS=${SEEDS:-30}
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
# $OUT/NAME (figures), and $SEEDS seeds into $OUT/NAME.seeds.jsonl (tables and the
# paired ratios against static and goldminer) and $OUT/NAME.seeds.tsv (per seed)
run() {
	name=$1 cl=$2 tr=$3 sc=$4
	shift 4
	echo "== $name: --cluster $cl --trace $(basename "$tr") --arrival-scale $sc $*" >&2
	rm -rf "${OUT:?}/$name"
	"$G" sim --cluster "$cl" --trace "$tr" --policy all --arrival-scale "$sc" --out "$OUT/$name" "$@" \
		>"$OUT/$name.jsonl" 2>"$OUT/$name.log"
	"$G" sim --cluster "$cl" --trace "$tr" --policy all --arrival-scale "$sc" --seeds "$SEEDS" \
		--vs static,goldminer,synergy-tune --per-seed "$OUT/$name.seeds.tsv" "$@" \
		>"$OUT/$name.seeds.jsonl" 2>/dev/null
	printf '%s\n' "--cluster '$cl' --trace $(basename "$tr") --arrival-scale $sc $*" >"$OUT/$name/command"
}

# pf FILE POLICY KEY: a value from that policy's line of a JSON-lines file
pf() { grep "^{\"policy\":\"$2\"" "$1" | sed -n "s/.*\"$3\":\"\{0,1\}\([^,\"}]*\).*/\1/p"; }

# rk FILE NUM DEN KEY: a field of the paired ratio avg JCT(NUM) / avg JCT(DEN)
rk() { grep "\"num\":\"$2\",\"den\":\"$3\"" "$1" | sed -n "s/.*\"$4\":\([^,}]*\).*/\1/p"; }

# rt FILE NUM DEN: "1.23x [1.10, 1.40]", or the same with "not separated" where the
# interval contains 1
rt() {
	awk -v m="$(rk "$1" "$2" "$3" median)" -v l="$(rk "$1" "$2" "$3" lo)" -v h="$(rk "$1" "$2" "$3" hi)" \
		-v s="$(rk "$1" "$2" "$3" separated)" \
		'BEGIN { printf "%.2fx [%.2f, %.2f]%s", m, l, h, s == "true" ? "" : " not separated" }'
}

# cmp NAME: the paired ratios policy / goldminer of experiment NAME, one row each
cmp() {
	f="$OUT/$1.seeds.jsonl"
	echo "| avg JCT ratio (paired per seed) | median | 95% interval | per-seed range | reading |"
	echo "|---|---:|---:|---:|---|"
	for p in $POLICIES; do
		[ "$p" = goldminer ] && continue
		awk -v p="$p" -v m="$(rk "$f" "$p" goldminer median)" -v l="$(rk "$f" "$p" goldminer lo)" \
			-v h="$(rk "$f" "$p" goldminer hi)" -v a="$(rk "$f" "$p" goldminer min)" \
			-v b="$(rk "$f" "$p" goldminer max)" -v s="$(rk "$f" "$p" goldminer separated)" 'BEGIN {
			r = s != "true" ? "not separated" : m > 1 ? "goldminer faster" : p " faster"
			if (s == "true" && sprintf("%.2f", l) == sprintf("%.2f", h)) r = r " by under 0.5%"
			printf "| %s / goldminer | %.2fx | [%.2f, %.2f] | %.2f - %.2f | %s |\n", p, m, l, h, a, b, r }'
	done
}

# table NAME: markdown table of an experiment over the seeds, ratios against static
table() {
	f="$OUT/$1.seeds.jsonl"
	echo "| policy | avg JCT (h) | p50 JCT (h) | p95 JCT (h) | avg queue (h) | GPU util | GPU busy | CPU busy | static / policy (paired) |"
	echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
	for p in $POLICIES; do
		set -- avg_jct p50_jct p95_jct avg_queue gpu_util gpu_busy cpu_util
		v=""
		for k in "$@"; do v="$v $(pf "$f" "$p" "$k") $(pf "$f" "$p" "${k}_ci95")"; done
		if [ "$p" = static ]; then vs="1.00x"; else vs=$(rt "$f" static "$p"); fi
		# shellcheck disable=SC2086
		echo $v | awk -v p="$p" -v vs="$vs" '{
			printf "| %s | %.2f ± %.2f | %.2f ± %.2f | %.2f ± %.2f | %.2f ± %.2f | %.3f ± %.3f | %.3f ± %.3f | %.3f ± %.3f | %s |\n",
				p, $1 / 3600, $2 / 3600, $3 / 3600, $4 / 3600, $5 / 3600, $6 / 3600, $7 / 3600, $8 / 3600,
				$9, $10, $11, $12, $13, $14, vs }'
	done
}

# jct FILE POLICY: "mean ± ci" of avg JCT in hours
jct() {
	awk -v m="$(pf "$1" "$2" avg_jct)" -v c="$(pf "$1" "$2" avg_jct_ci95)" \
		'BEGIN { printf "%.2f ± %.2f", m / 3600, c / 3600 }'
}

C64="8x(8gpu,96cpu)"
C48="8x(8gpu,48cpu)"
C24="8x(8gpu,24cpu,500gb)"
S64=$(scale_for "$C64" "$OPENB")
GMP=traces/profile-goldminer.tsv
SYP=traces/profile-synergy.tsv
# two at a time (independent outputs; each run is deterministic on its own)
run openb-64 "$C64" "$OPENB" "$S64" --backfill "$BF" &
run openb-64-fifo "$C64" "$OPENB" "$S64" --backfill 0 &
wait
run openb-64-cpu48 "$C48" "$OPENB" "$S64" --backfill "$BF" &
run openb-full "$NODES" "$OPENB" 1 --backfill "$BF" &
wait
# the same trace with goldminer's measured data plane for the image classes
run openb-64-gmprof "$C64" "$OPENB" "$S64" --backfill "$BF" --profile "$GMP" &
run openb-64-cpu48-gmprof "$C48" "$OPENB" "$S64" --backfill "$BF" --profile "$GMP" &
wait
# Synergy's setup: its ten models, trace durations at fair share, 24 vCPUs per node
S24=$(scale_for "$C24" "$OPENB")
run synergy-24 "$C24" "$OPENB" "$S24" --backfill "$BF" --profile "$SYP" --work-at share &
if [ -f "$PHILLY" ] && [ -f "$PAI" ]; then
	SPH=$(scale_for "$PAI" "$PHILLY")
	run philly-pai "$PAI" "$PHILLY" "$SPH" --backfill "$BF"
fi
wait

# sweep_point FILE ARGS...: every policy over the seeds, with paired ratios
sweep_point() {
	j=$1
	shift
	"$G" sim --trace "$OPENB" --policy all --backfill "$BF" --seeds "$SEEDS" --vs goldminer "$@" \
		2>/dev/null >"$j"
}

# load sweep on 64 GPUs: avg JCT (h, mean ± 95% CI over the seeds) per policy, and
# proportional / goldminer paired
SWEEP="$OUT/openb-64-sweep.md"
for f in 0.25 0.5 0.75 1 1.25; do
	sc=$(awk -v s="$S64" -v f="$f" 'BEGIN { printf "%.3f", s * f }')
	sweep_point "$OUT/.sweep-$f.jsonl" --cluster "$C64" --arrival-scale "$sc" &
	[ "$f" = 0.5 ] || [ "$f" = 1 ] && wait
done
wait
: >"$SWEEP"
for f in 0.25 0.5 0.75 1 1.25; do
	j="$OUT/.sweep-$f.jsonl"
	sc=$(awk -v s="$S64" -v f="$f" 'BEGIN { printf "%.3f", s * f }')
	row="| $(pf "$j" static offered_load | awk '{ printf "%.2f", $1 }') | $sc"
	for p in $POLICIES; do row="$row | $(jct "$j" "$p")"; done
	echo "$row | $(rt "$j" proportional goldminer) |" >>"$SWEEP"
done

# remote-cost sweep on both node shapes: avg JCT (h) of the policies it moves
RCS="$OUT/remote-cost-sweep.md"
for cl in "$C64" "$C48"; do
	for rc in 0 0.05 0.1 0.2 0.3; do
		sweep_point "$OUT/.rc-$cl-$rc.jsonl" --cluster "$cl" --arrival-scale "$S64" --remote-cost "$rc" &
		[ "$rc" = 0.05 ] || [ "$rc" = 0.2 ] || [ "$rc" = 0.3 ] && wait
	done
done
wait
: >"$RCS"
for cl in "$C64" "$C48"; do
	for rc in 0 0.05 0.1 0.2 0.3; do
		j="$OUT/.rc-$cl-$rc.jsonl"
		row="| $cl | $rc"
		for p in proportional synergy-tune cachew pecan goldminer; do row="$row | $(jct "$j" "$p")"; done
		echo "$row | $(rt "$j" proportional goldminer) | $(rt "$j" pecan goldminer) |" >>"$RCS"
	done
done

# Synergy's setup at lower loads: how the tune / fair ratio moves with the queue
SYS="$OUT/synergy-24-sweep.md"
for f in 0.9 0.95 0.975; do
	sc=$(awk -v s="$S24" -v f="$f" 'BEGIN { printf "%.3f", s * f }')
	"$G" sim --cluster "$C24" --trace "$OPENB" --policy all --backfill "$BF" --seeds "$SEEDS" \
		--profile "$SYP" --work-at share --arrival-scale "$sc" --vs synergy-tune \
		2>/dev/null >"$OUT/.sys-$f.jsonl" &
	[ "$f" = 0.95 ] && wait
done
wait
: >"$SYS"
for f in 0.9 0.95 0.975 1; do
	j="$OUT/.sys-$f.jsonl"
	[ "$f" = 1 ] && j="$OUT/synergy-24.seeds.jsonl"
	sc=$(awk -v s="$S24" -v f="$f" 'BEGIN { printf "%.3f", s * f }')
	echo "| $sc | $(pf "$j" static offered_load | awk '{ printf "%.2f", $1 }') | $(jct "$j" proportional) | $(jct "$j" synergy-tune) | $(rt "$j" proportional synergy-tune) |" >>"$SYS"
done

# Bimodality (CPU-short openb-64): per seed, the vCPUs per GPU its class draw needs
# (GPU time weighted: traced GPU-seconds x gpu_rate / cpu_rate, over all jobs) next
# to goldminer's and proportional's average JCT (h). The draw is the same for every
# policy, so static's jobs.tsv of each seed gives it.
BI="$OUT/openb-64-cpu48.demand.tsv"
rm -rf "$OUT/.draws"
"$G" sim --cluster "$C48" --trace "$OPENB" --policy static --arrival-scale "$S64" --backfill "$BF" \
	--seeds "$SEEDS" --out "$OUT/.draws" >/dev/null 2>&1
printf 'seed\tdemand\tgoldminer\tproportional\n' >"$BI"
k=1
while [ "$k" -le "$SEEDS" ]; do
	awk -F'\t' -v k="$k" 'NR == FNR { if (!/^#/) need[$1] = $2 / $3; next }
		FNR > 1 { w = $3 * $11; s += w; d += w * need[$2] }
		END { printf "%d\t%.3f", k, d / s }' traces/profile-pytorch.tsv "$OUT/.draws/seed-$k/jobs.tsv"
	awk -F'\t' -v k="$k" '$2 == k && $1 == "goldminer" { g = $3 } $2 == k && $1 == "proportional" { p = $3 }
		END { printf "\t%.2f\t%.2f\n", g / 3600, p / 3600 }' "$OUT/openb-64-cpu48.seeds.tsv"
	k=$((k + 1))
done >>"$BI"
rm -rf "$OUT/.draws"
# Pearson r of demand and goldminer's JCT; seeds above and below the split
BISTAT=$(awk -F'\t' 'NR > 1 { n++; x += $2; y += $3; xx += $2 * $2; yy += $3 * $3; xy += $2 * $3
		if ($2 < 7.5) { lo++; if ($3 < 15) lod++ } else { hi++; if ($3 >= 15) hib++ } }
	END { r = (n * xy - x * y) / sqrt((n * xx - x * x) * (n * yy - y * y))
		printf "%.2f %d %d %d %d", r, lo, lod, hi, hib }' "$BI")
# shellcheck disable=SC2086 # five words on purpose
set -- $BISTAT
BI_R=$1 BI_LO=$2 BI_LOD=$3 BI_HI=$4 BI_HIB=$5
rm -f "$OUT/.probe.json" "$OUT"/.sweep-*.jsonl "$OUT"/.rc-*.jsonl "$OUT"/.sys-*.jsonl

philly=""
[ -d "$OUT/philly-pai" ] && philly="$OUT/philly-pai"
sh plots/make-plots.sh "$OUT"/openb-64 "$OUT"/openb-64-fifo "$OUT"/openb-64-cpu48 \
	"$OUT"/openb-full "$OUT"/openb-64-gmprof "$OUT"/openb-64-cpu48-gmprof "$OUT"/synergy-24 \
	${philly:+"$philly"} >&2
if gnuplot -e 'set terminal' 2>&1 | grep -q pngcairo; then term=pngcairo; else term=png; fi
gnuplot -e "data='$BI'; out='$OUT/openb-64-cpu48.bimodal.png'; term='$term'" plots/bimodal.gp >&2

# ---- sim/RESULTS.md ----
{
	cat <<EOT
# Simulator results

Generated by \`make sim-experiments\` (sim/experiments.sh); do not edit by hand.
Figures are written next to each experiment's output under
\`build/sim-experiments/<experiment>/\` (or \`\$SIM_OUT\`; \`make plots\` redraws them):
\`gpu_util.png\` (the contended window, one panel per policy, static's busy GPUs
in grey behind each) and \`jct_cdf.png\` from the first seed's run;
\`bars.png\` (mean and 95% interval over the seeds) and \`scatter.png\`
(proportional's against goldminer's average JCT, one point per seed) from all
seeds; and \`openb-64-cpu48.bimodal.png\` (section (g)).

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

**Intervals and comparisons.** Each job's model class is drawn from a hash of
the seed and the job itself, so a seed draws the same classes for every policy:
runs with the same seed are *paired*. Every table cell is the mean over $SEEDS
seeds (1..$SEEDS) ± the half-width of its 95% Student-t interval (a description
of the spread: where outcomes are bimodal, section (g), it is not a reliable
interval for the mean). Every **comparison** is a paired ratio instead: per seed
the ratio of two policies' average JCTs, their median, and a 95% percentile
bootstrap interval of that median (2,000 resamples, seeded: \`goldminer sim
--seeds $SEEDS --vs POLICY\`, sim/stats.c). A ratio whose interval contains 1 is
printed "not separated": the model does not tell those two policies apart, and
it is no win for either. The intervals cover the class draw only, not the
profile or the remote cost.

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

goldminer against the others, paired per seed (> 1: goldminer's average JCT is
lower; the paper, on its 64-GPU cluster, reports up to 2.5x against static):

$(cmp openb-64)

Strict FIFO (no backfill), same load:

$(table openb-64-fifo)

$(cmp openb-64-fifo)

Half the vCPUs (8 x (8 GPU, 48 vCPU)), same load:

$(table openb-64-cpu48)

$(cmp openb-64-cpu48)

Where vCPUs are this short the outcome of a seed is bimodal (section (g)): read
the medians and intervals above, not the means of the table.

Load sweep on 8 x (8 GPU, 96 vCPU) (average JCT in hours; the offered load is
measured as above; the last column the paired ratio):

| offered load | arrival scale | $(echo "$POLICIES" | sed 's/ / | /g') | proportional / goldminer |
|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|
$(cat "$SWEEP")

## (b) openb trace on the full openb cluster (1,523 nodes, 6,212 GPUs)

As traced (arrival scale 1; offered load $(pf "$OUT/openb-full.seeds.jsonl" static offered_load)):

$(table openb-full)

$(cmp openb-full)

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

$(cmp philly-pai)

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
the last two columns are the paired ratios of proportional's and pecan's average
JCT over goldminer's (median and 95% interval over the seeds).

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

$(cmp openb-64-gmprof)

8 x (8 GPU, 48 vCPU):

$(table openb-64-cpu48-gmprof)

$(cmp openb-64-cpu48-gmprof)

In this world the allocation problem all but vanishes for JPEG classification.
\`static\` still trails, because its requests, not the pipelines' needs, decide
placement (a job waits for vCPUs it does not use); what separates the other
policies comes from the classes whose pipelines remain heavy (speech, recsys,
vit: all still PyTorch-era assumptions).

## (f) synergy-tune side by side with Synergy's simulator

Synergy's own simulator (msr-fiddle/synergy), run on the same 6,171 openb jobs on
8 x (8 GPU, 24 vCPU, 500 GB) with its ten models, gives FIFO+fair / FIFO+tune = **1.36x**
(average JCT 14.11 -> 10.37 h; issue 28). The same setup here: Synergy's ten
models as profile rows (traces/profile-synergy.tsv: the rate at the fair share of
3 vCPUs per GPU is 1, the model's published speed-up is reached at 3 x speed-up
vCPUs per GPU; its memory demand per GPU; shares as Synergy's default split), each job's trace duration taken
as its run at fair share (\`--work-at share\`, as Synergy's trace is), arrivals
compressed $S24 x to offered load $LOAD. \`proportional\` is Synergy's
FIFO+fair (every job its GPU-proportional share), \`synergy-tune\` its
FIFO+tune. Command: \`goldminer sim $(cat "$OUT/synergy-24/command") --policy all --seeds $SEEDS --vs synergy-tune\`.

$(table synergy-24)

**proportional / synergy-tune, paired per seed: $(rt "$OUT/synergy-24.seeds.jsonl" proportional synergy-tune)**
(per-seed range $(awk -v a="$(rk "$OUT/synergy-24.seeds.jsonl" proportional synergy-tune min)" -v b="$(rk "$OUT/synergy-24.seeds.jsonl" proportional synergy-tune max)" 'BEGIN { printf "%.2f - %.2f", a, b }'); ratio of the means
$(awk -v a="$(pf "$OUT/synergy-24.seeds.jsonl" proportional avg_jct)" -v b="$(pf "$OUT/synergy-24.seeds.jsonl" synergy-tune avg_jct)" 'BEGIN { printf "%.2fx: %.2f -> %.2f h", a / b, a / 3600, b / 3600 }')).
goldminer / synergy-tune: $(rt "$OUT/synergy-24.seeds.jsonl" goldminer synergy-tune). \`static\` is
no reference here: it places jobs by openb's vCPU requests, which nodes of 24
vCPUs cannot hold side by side, so GPUs stay idle behind blocked requests.

The ratio here is above Synergy's 1.36x, and it moves with the load, not
monotonically (queueing amplifies the per-job speed-up, and FIFO queueing is
chaotic: even fair share's JCT is not monotone in the load here). Same setup,
arrivals less compressed; average JCT in hours, the last column paired per seed:

| arrival scale | offered load | proportional (FIFO+fair) | synergy-tune (FIFO+tune) | proportional / synergy-tune |
|---:|---:|---:|---:|---:|
$(cat "$SYS")

Synergy's FIFO+fair averages 14.11 h on this trace; the row whose
\`proportional\` JCT is nearest to that is the like-for-like load, and its ratio
the figure to set beside 1.36x.

What still differs from Synergy's simulator, and which way it moves the ratio
(none of these was measured on its own here):
- **Rounds and preemption.** Synergy re-plans every 300 s: at each round every
  job is deallocated, the queue is walked in arrival order, and a job's progress
  in the round is counted in whole iterations; jobs can move between servers
  from round to round. Here time is continuous, a node is re-planned the moment
  its jobs change, and a job keeps its GPUs until it ends. A job that arrives or
  ends mid-round waits for the next round in Synergy; here vCPUs freed by an
  ending job reach its peers at once, which favours tune more than fair (fair
  shares never move): expected to raise the ratio here, by an amount not
  measured (rounds of 300 s are short against jobs of hours).
- **Memory** is planned as Synergy plans it (alexnet and shufflenet ask twice
  the fair share of 62.5 GB per GPU, m5 three times; a job whose memory does not
  fit is switched to fair share), but storage bandwidth, Synergy's third
  resource, is not.
- **Ideal vCPUs.** Here a job asks for the fewest vCPUs that reach its speed-up
  (3 x speed-up per GPU: alexnet and shufflenet 9 instead of Synergy's 12,
  res18 8 instead of 9, mobilenet 5 instead of 6, m5 8 instead of 6): smaller
  asks fit more often (a higher ratio; m5 the other way).
- **The queue.** Synergy's FIFO walks the whole queue in arrival order every
  round and preempts: a job that arrived earlier takes GPUs back from later ones
  at the next round, and any job that fits starts (no reservation). Here a job
  keeps its GPUs to the end, and the blocked head holds a node while up to $BF
  jobs behind it backfill. Queueing amplifies per-job speed-ups differently
  under the two (direction not known without running both).
- **Placement.** Synergy places a tuned job's GPUs where its demand fits; here
  placement is the engine's (best fit on GPUs, backfill of $BF) for every
  policy, and only the vCPU split follows Synergy's rule.
- **Speed between the two points.** Synergy's job runs at its speed-up or at 1
  (fair share); here a job's rate is min(GPU-bound rate, vCPUs x per-vCPU rate),
  which agrees at both points and is linear between them (a multi-node job
  trimmed on one node only).

## (g) Why the CPU-short outcomes are bimodal

On 8 x (8 GPU, 48 vCPU) (6 vCPUs per GPU) goldminer's average JCT per seed ranges
$(awk -F'\t' 'NR > 1 && $1 == "goldminer" { v = $3 / 3600; if (n++ == 0 || v < a) a = v; if (v > b) b = v } END { printf "%.1f to %.1f h", a, b }' "$OUT/openb-64-cpu48.seeds.tsv"): in some seeds the queue drains after the
busy period, in others it builds up for the rest of the trace. The seed decides
it through the class draw: how many vCPUs per GPU the drawn mix needs (GPU-time
weighted: traced GPU-seconds x gpu_rate / cpu_rate). Where that is near the 6
the nodes have, the pool keeps the GPUs fed and jobs leave as fast as they come;
where it is well above, every running job is slower, GPUs stay allocated longer,
and the queue grows, which makes it worse (the figure: one point per seed,
goldminer's and proportional's average JCT against the draw's need). Pearson r
between the need and goldminer's JCT over the $SEEDS seeds: $BI_R. Of the $BI_LO
seeds that need under 7.5 vCPUs per GPU, $BI_LOD finish with an average JCT under
15 h; of the $BI_HI that need more, $BI_HIB stay above it. The rest is timing:
when the heaviest jobs of the draw arrive relative to the busy period (the
correlation is far from 1). A mean over such seeds, and a Student-t interval
around it, mix two regimes; the paired per-seed ratios compare the policies
within each seed, where the draw is the same.

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
  node by their need (greedy in arrival order, as Synergy's tune does; section
  (f)) but never across nodes; cachew and pecan move vCPUs across
  the cluster but serve jobs in start order, without asking which job gains most
  from a worker; pecan adds local placement to cachew. The gap between pecan and
  goldminer is therefore the value of the marginal-gain priority alone (both place
  workers local first); the gap between synergy-tune and pecan that of crossing
  nodes. Where vCPUs are plentiful (96 per 8 GPUs) every cluster-wide policy feeds
  nearly every job and they converge on the unlimited-CPU bound; the CPU-short
  cluster (48 per 8 GPUs) is where the rules differ.
- **What separates, and what does not.** On the CPU-short cluster (48 vCPUs per
  8 GPUs, 30 seeds) goldminer against proportional is $(rt "$OUT/openb-64-cpu48.seeds.jsonl" proportional goldminer),
  against synergy-tune $(rt "$OUT/openb-64-cpu48.seeds.jsonl" synergy-tune goldminer), against pecan
  $(rt "$OUT/openb-64-cpu48.seeds.jsonl" pecan goldminer) and against static $(rt "$OUT/openb-64-cpu48.seeds.jsonl" static goldminer) (each the
  paired median of the other's JCT over goldminer's). With 96 vCPUs per node
  goldminer against proportional is $(rt "$OUT/openb-64.seeds.jsonl" proportional goldminer) and against
  synergy-tune $(rt "$OUT/openb-64.seeds.jsonl" synergy-tune goldminer). Quote only separated ratios, with their
  interval; the earlier means-of-seeds ratios (1.68x, 1.59x on 10 seeds) came
  from a bimodal mix (section (g)) and a per-node rule weaker than Synergy's.
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
  can swap places; that is why every comparison is a paired ratio over seeds
  with its interval. Where that interval contains 1 ("not separated"), the model
  does not tell the policies apart. unlimited-cpu bounds each job's run time, not
  the queueing of a FIFO scheduler.
- **Strict FIFO** results are dominated by head-of-line blocking: an 8-GPU job waits
  for a whole free node while GPUs idle. The backfill runs (a node is held for the
  blocked head so it cannot starve) are the ones to read.
- **Full cluster.** openb's pods occupy only a small part of the 6,212-GPU cluster
  as traced, so there is no queueing and the gain is the per-job speed-up alone.
- **Which world.** Sections (a) to (d) describe PyTorch-era input pipelines (the
  profile the paper's users ran); (e) replaces the image classes' rate with
  goldminer's measured one. The non-image rows are assumptions in both.
- **Not yet here** (issue 28, items 3 and 4, later work): measured rates for the
  non-image classes and measured GPU rates (the profile's assumptions above), and
  the multi-node model checked against a real multi-node run.
EOT
} >"$RESULTS"
echo "sim-experiments: wrote $RESULTS and $OUT/" >&2
