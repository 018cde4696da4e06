#!/bin/sh
# experiments.sh - the simulator's experiments in one command
# (`make sim-experiments`): runs every policy (the baselines synergy-tune, cachew
# and pecan included), over $SEEDS seeds of the model-class draw, on
#   openb-64        the openb trace on 8 x (8 GPU, 96 vCPU), arrivals compressed to an
#                   offered GPU load of 0.9 (contended); also strict FIFO and a
#                   CPU-short variant (24 vCPU per node), and a load sweep
#   openb-full      the same trace on the full openb cluster (1,523 nodes), as traced
#   philly-pai      the Philly trace on the PAI machine list, compressed to load 0.9
#   synergy-24      the same trace on 8 x (8 GPU, 24 vCPU, 500 GB) with Synergy's ten
#                   models (traces/profile-synergy.tsv) in Synergy's 300-s rounds, and
#                   each part of Synergy's scheduling measured on its own; beside it,
#                   the job sets of traces/synergy/ (the same jobs Synergy's simulator
#                   ran, its figures in traces/synergy/synergy-figures.tsv)
#   paper-*         the GoldMiner paper's comparison: static (its baseline), node-elastic
#                   (per-job elastic, no pooling across nodes) and goldminer, each placed
#                   by 1 vCPU per GPU and by the request, on PAI's node shapes (8 x (8
#                   GPU, 96 vCPU) and PAI's mix scaled to 64 GPUs) and the CPU-short one
# and sweeps of the remote cost and of the profile's assumptions; writes tables + figures under $SIM_OUT (default
# $B/sim-experiments) and regenerates sim/RESULTS.md. Figures are drawn from the
# first seed's run (the per-seed ones from every seed); tables give the mean and
# 95% interval over the seeds, and every comparison is a paired per-seed ratio
# (median, bootstrap 95% interval: goldminer sim --vs).
#
# Where the time goes (2 cores): the Philly runs (about 1.8 s per seed for the
# eight policies, about 40% of the CPU time) outweigh all openb ones together
# (under 0.1 s per seed each), so Philly starts first, on its own, and the other
# independent experiments run two at a time beside it.
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
		>"$OUT/$name.jsonl" 2>"$OUT/$name.log" || return 1
	"$G" sim --cluster "$cl" --trace "$tr" --policy all --arrival-scale "$sc" --seeds "$SEEDS" \
		--vs static,goldminer,synergy-tune --per-seed "$OUT/$name.seeds.tsv" "$@" \
		>"$OUT/$name.seeds.jsonl" 2>/dev/null || return 1
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
# the CPU-short shape: 3 vCPUs per GPU, where the measured pipelines' needs (about
# 3 per GPU on the mix's average) meet the nodes' vCPUs (at 48 or 96 per node every
# elastic policy feeds every job and they tie)
CSH="8x(8gpu,24cpu)"
VPG=3
C24="8x(8gpu,24cpu,500gb)"
S64=$(scale_for "$C64" "$OPENB")
# Philly, the longest, started first and detached (the bare waits below are for the
# openb pairs; its end is $OUT/.philly.rc, read before its results are)
rm -f "$OUT/.philly.rc"
if [ -f "$PHILLY" ] && [ -f "$PAI" ]; then
	SPH=$(scale_for "$PAI" "$PHILLY")
	( (if run philly-pai "$PAI" "$PHILLY" "$SPH" --backfill "$BF"; then echo 0; else echo 1; fi \
		>"$OUT/.philly.rc.tmp" && mv "$OUT/.philly.rc.tmp" "$OUT/.philly.rc") &)
fi
GMP=traces/profile-goldminer.tsv
SYP=traces/profile-synergy.tsv
# two at a time (independent outputs; each run is deterministic on its own)
run openb-64 "$C64" "$OPENB" "$S64" --backfill "$BF" &
run openb-64-fifo "$C64" "$OPENB" "$S64" --backfill 0 &
wait
run openb-64-cpu24 "$CSH" "$OPENB" "$S64" --backfill "$BF" &
run openb-full "$NODES" "$OPENB" 1 --backfill "$BF" &
wait
# the same trace with goldminer's measured data plane for the image classes
run openb-64-gmprof "$C64" "$OPENB" "$S64" --backfill "$BF" --profile "$GMP" &
run openb-64-cpu24-gmprof "$CSH" "$OPENB" "$S64" --backfill "$BF" --profile "$GMP" &
wait
# Synergy's setup: its ten models, trace durations at fair share, 24 vCPUs per node
S24=$(scale_for "$C24" "$OPENB")
run synergy-24 "$C24" "$OPENB" "$S24" --backfill all --profile "$SYP" --work-at share --round 300


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
for cl in "$C64" "$CSH"; do
	for rc in 0 0.05 0.1 0.2 0.3; do
		sweep_point "$OUT/.rc-$cl-$rc.jsonl" --cluster "$cl" --arrival-scale "$S64" --remote-cost "$rc" &
		[ "$rc" = 0.05 ] || [ "$rc" = 0.2 ] || [ "$rc" = 0.3 ] && wait
	done
done
wait
: >"$RCS"
for cl in "$C64" "$CSH"; do
	for rc in 0 0.05 0.1 0.2 0.3; do
		j="$OUT/.rc-$cl-$rc.jsonl"
		row="| $cl | $rc"
		for p in proportional synergy-tune cachew pecan goldminer; do row="$row | $(jct "$j" "$p")"; done
		echo "$row | $(rt "$j" proportional goldminer) | $(rt "$j" pecan goldminer) |" >>"$RCS"
	done
done

# Synergy's setup: each difference between the two simulators on its own (fair and
# tune only), from continuous time (the earlier model) and from the rounds adopted
SYS="$OUT/synergy-24-causes.md"
syn_cause() { # syn_cause NAME OPTIONS...: proportional and synergy-tune over the seeds
	n=$1
	shift
	"$G" sim --cluster "$C24" --trace "$OPENB" --policy proportional,synergy-tune --backfill "$BF" \
		--seeds "$SEEDS" --profile "$SYP" --work-at share --arrival-scale "$S24" --vs synergy-tune "$@" \
		2>/dev/null >"$OUT/.sys-$n.jsonl"
}
syn_cause cont &
syn_cause cont-bfall --backfill all
wait
syn_cause cont-demand --placement demand &
syn_cause cont-fewest --tune-asks ideal
wait
syn_cause round --round 300 &
syn_cause round-all --round 300 --backfill all --placement demand
wait
: >"$SYS"
while IFS='|' read -r n what; do
	j="$OUT/.sys-$n.jsonl"
	[ "$n" = round-bfall ] && j="$OUT/synergy-24.seeds.jsonl"
	echo "| $what | $(jct "$j" proportional) | $(jct "$j" synergy-tune) | $(rt "$j" proportional synergy-tune) |" >>"$SYS"
done <<'L'
cont|continuous time, backfill of 32 (Synergy's asks, random placement: the defaults)
cont-bfall|... with `--backfill all` (Synergy's queue: any job that fits starts, no node held)
cont-demand|... with `--placement demand` (Synergy's placement mode: a server where the whole ideal fits)
cont-fewest|... with `--tune-asks ideal` (the fewest vCPUs that reach the speed-up as the ask)
round|`--round 300` (Synergy's rounds with preemption)
round-bfall|**`--round 300` with `--backfill all` (Synergy's rounds and queue): adopted**
round-all|... with `--placement demand` too
L

# The profile's assumptions, each moved on its own: the vit GPU rate (the one GPU
# rate without a table), the shares of the mix, and the speed of a vCPU (every
# cpu_rate is one machine's); static, proportional and goldminer on both shapes
SENS="$OUT/assumptions.md"
PP=traces/profile-pytorch.tsv
awk -F'\t' -v OFS='\t' '!/^#/ && $1 == "vit" { $2 = $2 / 2 } { print }' "$PP" >"$OUT/.p-vit-half.tsv"
awk -F'\t' -v OFS='\t' '!/^#/ && $1 == "vit" { $2 = $2 * 2 } { print }' "$PP" >"$OUT/.p-vit-double.tsv"
awk -F'\t' -v OFS='\t' '!/^#/ { $4 = 1 } { print }' "$PP" >"$OUT/.p-shares-equal.tsv"
awk -F'\t' -v OFS='\t' '!/^#/ { $3 = $3 / 2 } { print }' "$PP" >"$OUT/.p-cpu-half.tsv"
sens() { # sens VARIANT CLUSTER TAG
	"$G" sim --cluster "$2" --trace "$OPENB" --policy static,proportional,goldminer --backfill "$BF" \
		--seeds "$SEEDS" --arrival-scale "$S64" --profile "$OUT/.p-$1.tsv" --vs goldminer \
		2>/dev/null >"$OUT/.sens-$1-$3.jsonl"
}
for v in vit-half vit-double shares-equal cpu-half; do
	sens "$v" "$C64" 96 &
	sens "$v" "$CSH" 24
	wait
done
: >"$SENS"
while IFS='|' read -r v what; do
	a="$OUT/.sens-$v-96.jsonl" b="$OUT/.sens-$v-24.jsonl"
	if [ "$v" = base ]; then a="$OUT/openb-64.seeds.jsonl" b="$OUT/openb-64-cpu24.seeds.jsonl"; fi
	echo "| $what | $(rt "$a" static goldminer) | $(rt "$b" static goldminer) | $(rt "$b" proportional goldminer) |" >>"$SENS"
done <<'L'
base|as measured (the profile)
vit-half|vit's GPU rate halved (150 images/s)
vit-double|vit's GPU rate doubled (600 images/s)
shares-equal|every class drawn equally often
cpu-half|every cpu_rate halved (a vCPU half as fast as the measuring machine's)
L

# Bimodality (CPU-short openb-64): per seed, the vCPUs per GPU its class draw needs
# (GPU time weighted: traced GPU-seconds x gpu_rate / cpu_rate, over all jobs) next
# to goldminer's and proportional's average JCT (h). The draw is the same for every
# policy, so static's jobs.tsv of each seed gives it.
BI="$OUT/openb-64-cpu24.demand.tsv"
rm -rf "$OUT/.draws"
"$G" sim --cluster "$CSH" --trace "$OPENB" --policy static --arrival-scale "$S64" --backfill "$BF" \
	--seeds "$SEEDS" --out "$OUT/.draws" >/dev/null 2>&1
printf 'seed\tdemand\tgoldminer\tproportional\n' >"$BI"
k=1
while [ "$k" -le "$SEEDS" ]; do
	awk -F'\t' -v k="$k" 'NR == FNR { if (!/^#/) need[$1] = $2 / $3; next }
		FNR > 1 { w = $3 * $11; s += w; d += w * need[$2] }
		END { printf "%d\t%.3f", k, d / s }' traces/profile-pytorch.tsv "$OUT/.draws/seed-$k/jobs.tsv"
	awk -F'\t' -v k="$k" '$2 == k && $1 == "goldminer" { g = $3 } $2 == k && $1 == "proportional" { p = $3 }
		END { printf "\t%.2f\t%.2f\n", g / 3600, p / 3600 }' "$OUT/openb-64-cpu24.seeds.tsv"
	k=$((k + 1))
done >>"$BI"
rm -rf "$OUT/.draws"
# Pearson r of demand and goldminer's JCT; seeds above and below the nodes' vCPUs
# per GPU, and above and below the median of goldminer's JCT over the seeds
BI_MED=$(awk -F'\t' 'NR > 1 { print $3 }' "$BI" | sort -g | awk '{ v[NR] = $1 }
	END { printf "%.2f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
BISTAT=$(awk -F'\t' -v s="$VPG" -v m="$BI_MED" 'NR > 1 { n++; x += $2; y += $3; xx += $2 * $2; yy += $3 * $3; xy += $2 * $3
		if ($2 < s) { lo++; if ($3 < m) lod++ } else { hi++; if ($3 >= m) hib++ } }
	END { d = sqrt((n * xx - x * x) * (n * yy - y * y)); r = d > 0 ? (n * xy - x * y) / d : 0
		printf "%.2f %d %d %d %d", r, lo, lod, hi, hib }' "$BI")
# shellcheck disable=SC2086 # five words on purpose
set -- $BISTAT
BI_R=$1 BI_LO=$2 BI_LOD=$3 BI_HI=$4 BI_HIB=$5
# The paper's comparison (section (h)): static (the paper's baseline: each job's
# vCPUs fixed at its request), node-elastic (per-job elastic on its own nodes, no
# pooling across nodes) and goldminer, each placed two ways: jobs reserving 1 vCPU
# per GPU (--local-min 1, the default) or their whole request (--local-min request,
# static's placement), on PAI's node shapes and the CPU-short one; the paired
# ratios across the two runs by goldminer sim --pair
PAI8="8x(8gpu,96cpu)"
PAIMIX="5x(8gpu,96cpu)+8x(2gpu,64cpu)+4x(2gpu,96cpu)"
PAPER_CLUSTERS="$PAI8 $PAIMIX $CSH"
paper_run() { # paper_run TAG CLUSTER SCALE LOCAL_MIN
	"$G" sim --cluster "$2" --trace "$OPENB" --arrival-scale "$3" \
		--backfill "$BF" --policy static,node-elastic,goldminer,unlimited-cpu --local-min "$4" \
		--seeds "$SEEDS" --per-seed "$OUT/paper-$1-$4.tsv" 2>/dev/null >"$OUT/paper-$1-$4.jsonl"
}
k=0
for cl in $PAPER_CLUSTERS; do
	k=$((k + 1))
	sc=$(scale_for "$cl" "$OPENB") # the arrival scale of load $LOAD on this cluster
	paper_run "$k" "$cl" "$sc" 1 &
	paper_run "$k" "$cl" "$sc" request
	wait
done
# pp TAG NUM_PLACEMENT NUM_POLICY DEN_PLACEMENT DEN_POLICY [FIGURE]: "1.23x [1.10, 1.40]"
# (paired per seed, "not separated" where the interval holds 1)
pp() {
	"$G" sim --pair "$OUT/paper-$1-$2.tsv:$3,$OUT/paper-$1-$4.tsv:$5" --figure "${6:-avg_jct}" |
		awk -F'[:,]' '{ for (i = 1; i < NF; i++) v[$i] = $(i + 1)
			printf "%.2fx [%.2f, %.2f]%s", v["\"median\""], v["\"lo\""], v["\"hi\""],
				v["\"separated\""] ~ /true/ ? "" : " not separated" }'
}
PAPER_RATIOS="$OUT/paper-ratios.md"
: >"$PAPER_RATIOS"
while IFS='|' read -r np nu dp de fig what; do
	row="| $what"
	k=0
	for cl in $PAPER_CLUSTERS; do
		k=$((k + 1))
		row="$row | $(pp "$k" "$np" "$nu" "$dp" "$de" "$fig")"
	done
	echo "$row |" >>"$PAPER_RATIOS"
done <<'L'
request|static|request|node-elastic|avg_jct|static / node-elastic, both reserving the request: **per-job elasticity** on the job's own nodes
request|node-elastic|request|goldminer|avg_jct|node-elastic / goldminer, both reserving the request: **pooling** across nodes at static's placement
request|node-elastic|1|node-elastic|avg_jct|node-elastic reserving the request / 1 vCPU per GPU: **placement**, no pooling
request|goldminer|1|goldminer|avg_jct|goldminer reserving the request / 1 vCPU per GPU: **placement**, with pooling
1|node-elastic|1|goldminer|avg_jct|node-elastic / goldminer, both reserving 1 vCPU per GPU: **pooling** at goldminer's placement
1|static|1|goldminer|avg_jct|**static / goldminer: all of it** (the paper's 2.5x)
1|goldminer|1|static|gpu_util|GPU util (busy / allocated GPU time), **goldminer / static** (the paper's 2.1x)
1|goldminer|1|static|gpu_busy|GPU busy (of all the cluster's GPUs), goldminer / static
1|unlimited-cpu|1|goldminer|avg_jct|unlimited-cpu / goldminer (the bound; < 1: goldminer short of it)
L
# the figures per policy and placement: avg JCT (h) and GPU util, mean ± 95% interval
PAPER_TABLE="$OUT/paper-table.md"
: >"$PAPER_TABLE"
k=0
for cl in $PAPER_CLUSTERS; do
	k=$((k + 1))
	for lm in request 1; do
		f="$OUT/paper-$k-$lm.jsonl"
		if [ "$lm" = 1 ]; then pl="1 vCPU per GPU"; else pl="the request"; fi
		row="| $cl | $pl"
		for p in static node-elastic goldminer unlimited-cpu; do
			row="$row | $(jct "$f" "$p") | $(awk -v m="$(pf "$f" "$p" gpu_util)" \
				-v c="$(pf "$f" "$p" gpu_util_ci95)" 'BEGIN { printf "%.3f ± %.3f", m, c }')"
		done
		echo "$row |" >>"$PAPER_TABLE"
	done
done
PAI_SCALE=$(scale_for "$PAIMIX" "$OPENB")
# the PAI machine list's shapes: machines per (GPU model, vCPUs, GPUs)
PAI_SHAPES=$(if [ -f "$PAI" ]; then awk -F, '$5 > 0 { n[$2 " (" $5 " GPUs, " $3 " vCPUs)"]++ }
	END { for (k in n) printf "%d\t%s\n", n[k], k }' "$PAI" | sort -k1,1nr -k2 |
	awk -F'\t' '{ printf "%s%s: %d", (NR > 1 ? ", " : ""), $2, $1 }'; else echo "(not found)"; fi)
rm -f "$OUT/.probe.json" "$OUT"/.sweep-*.jsonl "$OUT"/.rc-*.jsonl "$OUT"/.sys-*.jsonl \
	"$OUT"/.sens-*.jsonl "$OUT"/.p-*.tsv

philly=""
if [ -n "${SPH:-}" ]; then # Philly's end, an hour at most
	k=0
	while [ ! -f "$OUT/.philly.rc" ] && [ "$k" -lt 3600 ]; do
		sleep 1
		k=$((k + 1))
	done
	[ "$(cat "$OUT/.philly.rc" 2>/dev/null)" = 0 ] ||
		{ echo "sim-experiments: the Philly run failed or took over an hour ($OUT/philly-pai.log)" >&2; exit 1; }
	rm -f "$OUT/.philly.rc"
	philly="$OUT/philly-pai"
fi
# Synergy's simulator and synergy-tune on identical jobs (traces/synergy/: the job
# sets, Synergy's figures and their provenance): proportional and synergy-tune on
# each set, in Synergy's rounds and queue and its random placement (--placement
# node-order), then with the engine's best fit for comparison; per GPU count
# against Synergy's per-job averages (synergy-by-gpus.tsv). Last, so that
# Synergy's figures are read when the long runs are done.
SAME="$OUT/synergy-same-jobs.md"
SAMEG="$OUT/synergy-same-gpus.md"
SYF=traces/synergy/synergy-figures.tsv
SYG=traces/synergy/synergy-by-gpus.tsv
avg_of() { # avg_of JSONL LINE: avg_jct of that line of a run's output
	sed -n "$2p" "$1" | sed -n 's/.*"avg_jct":\([^,]*\).*/\1/p'
}
: >"$SAME"
: >"$SAMEG"
grep -v '^#' "$SYF" | sed 1d | while IFS="$(printf '\t')" read -r set cl jobs sf st _; do
	for pl in node-order best-fit; do
		"$G" sim --cluster "$cl" --trace "traces/synergy/$set.tsv" --policy proportional,synergy-tune \
			--profile "$SYP" --work-at share --round 300 --backfill all --placement "$pl" \
			--out "$OUT/.same-$set-$pl" 2>/dev/null >"$OUT/.same-$set-$pl.jsonl"
	done
	gf=$(avg_of "$OUT/.same-$set-node-order.jsonl" 1)
	gt=$(avg_of "$OUT/.same-$set-node-order.jsonl" 2)
	bf=$(avg_of "$OUT/.same-$set-best-fit.jsonl" 1)
	bt=$(avg_of "$OUT/.same-$set-best-fit.jsonl" 2)
	awk -v set="$set" -v cl="$cl" -v n="$jobs" -v sf="$sf" -v st="$st" -v gf="$gf" -v gt="$gt" \
		-v bf="$bf" -v bt="$bt" 'BEGIN {
		sr = sf / st; gr = gf / gt; br = bf / bt
		printf "| %s | %s | %d | %.2f -> %.2f h | **%.3fx** | %.2f -> %.2f h | **%.3fx** | **%+.1f%%** | %+.0f%% | %.3fx (%+.1f%%) |\n",
			set, cl, n, sf, st, sr, gf / 3600, gt / 3600, gr, (gr / sr - 1) * 100,
			((gr - 1) / (sr - 1) - 1) * 100, br, (br / sr - 1) * 100 }' >>"$SAME"
	# per GPU count: Synergy's averages beside goldminer's (jobs.tsv: gpus, jct)
	d="$OUT/.same-$set-node-order"
	awk -F'\t' -v set="$set" '
		FILENAME == ARGV[1] { if ($1 == set) { n[$2] = $3; sf[$2] = $4; st[$2] = $5 } next }
		FNR == 1 { next }
		FILENAME == ARGV[2] { gf[$3] += $8; c[$3]++; next }
		{ gt[$3] += $8 }
		END { for (g in n) {
			if (c[g] != n[g]) { printf "%s: %s-GPU jobs: %d here, %d in Synergy'"'"'s\n", set, g, c[g], n[g] > "/dev/stderr"; exit 1 }
			sr = sf[g] / st[g]; gr = gf[g] / gt[g]
			printf "%d\t| %s | %d | %d | %.2f -> %.2f h | %.3fx | %.2f -> %.2f h | %.3fx | %+.1f%% |\n",
				g, set, g, n[g], sf[g], st[g], sr, gf[g] / c[g] / 3600, gt[g] / c[g] / 3600, gr, (gr / sr - 1) * 100 } }
	' "$SYG" "$d/proportional/jobs.tsv" "$d/synergy-tune/jobs.tsv" >"$OUT/.same-$set-g.tsv" ||
		{ echo "sim-experiments: $set: the jobs differ from $SYG's" >&2; exit 1; }
	sort -n "$OUT/.same-$set-g.tsv" | cut -f2- >>"$SAMEG"
	rm -rf "$OUT/.same-$set-node-order" "$OUT/.same-$set-best-fit" "$OUT/.same-$set-"*.jsonl \
		"$OUT/.same-$set-g.tsv"
done || exit 1
sh plots/make-plots.sh "$OUT"/openb-64 "$OUT"/openb-64-fifo "$OUT"/openb-64-cpu24 \
	"$OUT"/openb-full "$OUT"/openb-64-gmprof "$OUT"/openb-64-cpu24-gmprof "$OUT"/synergy-24 \
	${philly:+"$philly"} >&2
if gnuplot -e 'set terminal' 2>&1 | grep -q pngcairo; then term=pngcairo; else term=png; fi
gnuplot -e "data='$BI'; out='$OUT/openb-64-cpu24.bimodal.png'; term='$term'; vpg=$VPG; cluster='$CSH'" \
	plots/bimodal.gp >&2

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
seeds; and \`openb-64-cpu24.bimodal.png\` (section (g)).

**What these numbers rest on.** Every number below comes from the model in
traces/README.md and the profile table traces/profile-pytorch.tsv (sections (a) to
(d); (e) uses traces/profile-goldminer.tsv). Each rate's source column says what it
is. Every per-vCPU rate is **measured**: \`goldminer profile --class CLASS\` ran
the class's real pipeline on one pinned vCPU of the development machine (a shared
AMD EPYC VM; traces/measure-profiles.sh, traces/README.md says what each pipeline
and its data are). Five GPU rates are **checked** against the NVIDIA
DeepLearningExamples table each cites (1 V100: ResNet-50, EfficientNet-B0 for
cv-light, BERT at sequence length 128, QuartzNet for speech, DLRM for recsys).
What is left an **assumption**: vit's GPU rate and every \`share\`, the weight of a
class in the draw; section (d) shows how far each moves the results, and how far
a vCPU half as fast as the measuring machine's would (rates in samples/s per GPU
and per vCPU):

| class | gpu_rate | is | cpu_rate | is | cpu_rate in (e) | is | share |
|---|---:|---|---:|---|---:|---|---:|
$(awk -F'\t' 'NR == FNR { if (!/^#/) { g[$1] = $3; gs[$1] = $6 } next }
	!/^#/ { w5 = $5; sub(/:.*/, "", w5); w6 = $6; sub(/:.*/, "", w6); w7 = gs[$1]; sub(/:.*/, "", w7)
	printf "| %s | %g | %s | %.0f | %s | %.0f | %s | %g |\n", $1, $2, w5, $3, w6, g[$1], w7, $4 }' \
	"$GMP" traces/profile-pytorch.tsv)

The PyTorch-era rates describe input pipelines as the paper's users ran them
(torchvision through a DataLoader worker, Python tokenising, feature extraction
and parsing), not goldminer's own data plane. With them a ResNet-50 needs
$(awk -F'\t' '$1 == "resnet50" { printf "%.1f", $2 / $3 }' traces/profile-pytorch.tsv) vCPUs per GPU, cv-light $(awk -F'\t' '$1 == "cv-light" { printf "%.1f", $2 / $3 }' traces/profile-pytorch.tsv), vit $(awk -F'\t' '$1 == "vit" { printf "%.1f", $2 / $3 }' traces/profile-pytorch.tsv), nlp $(awk -F'\t' '$1 == "nlp" { printf "%.2f", $2 / $3 }' traces/profile-pytorch.tsv),
speech $(awk -F'\t' '$1 == "speech" { printf "%.1f", $2 / $3 }' traces/profile-pytorch.tsv) and recsys $(awk -F'\t' '$1 == "recsys" { printf "%.1f", $2 / $3 }' traces/profile-pytorch.tsv) (gpu_rate / cpu_rate): far less than the
assumptions they replace (8, 20, 3, 0.04, 8 and 12.5), so vCPUs are short only on
small nodes. The measurement shows the machine's load: two runs minutes apart
differed by up to 25% (the files' headers). The remote cost, the fraction of a data worker's rate
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
of the spread: where outcomes spread widely, section (g), it is not a reliable
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
middle 90% of submits. Policies: \`static\` (requested vCPUs, today's practice and
the paper's baseline), \`proportional\` (each node's vCPUs by GPU share), the
baselines \`synergy-tune\` (Synergy, OSDI'22), \`cachew\` (Cachew, ATC'22) and
\`pecan\` (Pecan, ATC'24) as modelled in traces/README.md, \`goldminer\`, and the
\`unlimited-cpu\` bound; section (h) adds \`node-elastic\` (goldminer without
pooling across nodes).

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

A CPU-short cluster, 8 x (8 GPU, 24 vCPU) (3 vCPUs per GPU, about what the
measured mix needs on average), same load (with 48 vCPUs per node, as with 96,
every elastic policy feeds every job and all of them tie):

$(table openb-64-cpu24)

$(cmp openb-64-cpu24)

Where vCPUs are this short the outcome of a seed spreads widely (section (g)):
read the medians and intervals above, not the means of the table.

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

## (d) The remote cost and the profile's assumptions, swept

The openb trace on 64 GPUs as in (a), at remote costs 0 to 0.3 (a local data
worker never pays it; static, proportional, synergy-tune and unlimited-cpu use no
remote workers, so only cachew, pecan and goldminer move). Average JCT in hours;
the last two columns are the paired ratios of proportional's and pecan's average
JCT over goldminer's (median and 95% interval over the seeds).

| cluster | remote cost | proportional | synergy-tune | cachew | pecan | goldminer | proportional / goldminer | pecan / goldminer |
|---|---:|---:|---:|---:|---:|---:|---:|---:|
$(cat "$RCS")

What is left an assumption in the profile, each moved on its own with everything
else as in (a): vit's GPU rate (the one GPU rate no table gives), the shares of
the mix, and the speed of a vCPU (every per-vCPU rate is one machine's: a vCPU of
an older or busier machine may be half as fast). The paired ratios of the
headline comparisons, static's and proportional's average JCT over goldminer's
(median and 95% interval over the $SEEDS seeds; \`goldminer sim --policy
static,proportional,goldminer --profile VARIANT --seeds $SEEDS --vs goldminer\`,
the variants made from traces/profile-pytorch.tsv by sim/experiments.sh):

| profile | static / goldminer, 96 vCPU per node | static / goldminer, 24 vCPU per node | proportional / goldminer, 24 vCPU per node |
|---|---:|---:|---:|
$(cat "$SENS")

## (e) goldminer's own data plane for the image classes

The profile above describes PyTorch-era pipelines: $(awk -F'\t' '$1 == "resnet50" { printf "%.0f", $3 }' traces/profile-pytorch.tsv) images/s per
vCPU for the ImageNet transform (torchvision through a DataLoader worker). goldminer's data plane, measured here by
\`goldminer profile\` (traces/profile-goldminer.tsv, which says how), runs it at
$(awk -F'\t' '$1 == "resnet50" { printf "%.0f", $3 }' "$GMP") images/s per vCPU, so a ResNet-50 job needs about
$(awk -F'\t' '$1 == "resnet50" { printf "%.1f", $2 / $3 }' "$GMP") vCPU per GPU instead of $(awk -F'\t' '$1 == "resnet50" { printf "%.0f", $2 / $3 }' traces/profile-pytorch.tsv), and a cv-light one
$(awk -F'\t' '$1 == "cv-light" { printf "%.1f", $2 / $3 }' "$GMP") instead of $(awk -F'\t' '$1 == "cv-light" { printf "%.0f", $2 / $3 }' traces/profile-pytorch.tsv). vit, nlp, speech and recsys keep the Python pipelines' measured rates
(goldminer's Python workers run those same transforms). The same file holds the
other pipelines the data plane runs, measured the same way (share 0: not in the
mix, so they do not change the tables below):

| class | images/s per vCPU | vCPU per GPU at its base class's GPU rate (an assumption) |
|---|---:|---:|
$(awk -F'\t' '!/^#/ && $4 == 0 { printf "| %s | %.0f | %.1f |\n", $1, $3, $2 / $3 }' "$GMP")

The same experiments as (a):

8 x (8 GPU, 96 vCPU):

$(table openb-64-gmprof)

$(cmp openb-64-gmprof)

8 x (8 GPU, 24 vCPU):

$(table openb-64-cpu24-gmprof)

$(cmp openb-64-cpu24-gmprof)

In this world the allocation problem all but vanishes for JPEG classification.
\`static\` still trails, because its requests, not the pipelines' needs, decide
placement (a job waits for vCPUs it does not use); what separates the other
policies on the small nodes comes from the classes whose Python pipelines stay
heavy against their GPU rate (recsys, then vit and speech).

## (f) synergy-tune side by side with Synergy's simulator

**On identical jobs.** Synergy's own simulator (msr-fiddle/synergy at commit
1bb2bed, outside this repository) and \`goldminer sim\` run the same jobs (each
job's model, GPUs, arrival and run at fair share the same in both, so the class
mix is the same by construction) on four job sets: openb's 6,171 jobs (models
drawn here with seed 1, arrivals compressed 4.219 x), 5,000 jobs of Synergy's own
generator (seed 7: its benchmark's 9 jobs/hour, 20% image, 70% language, 10%
speech models), and two windows of 5,000 Philly jobs (rows 40,000-44,999 and
60,000-64,999, models drawn here, arrivals as traced; GPU counts as Synergy's
Philly parser takes them). Both are FIFO in Synergy's 300-s rounds with its
queue; Synergy's placement mode is its **random placement** (runner.py's
benchmark: \`placement=False\`, a job's GPUs taken server by server, in server
order, where its demand fits: \`Cluster.allocate_synergy_random\`), for FIFO+fair
and FIFO+tune alike. \`--placement node-order\` is that mode here, for both
policies: a job's GPUs are taken node by node, in node order, where its demand
fits (synergy-tune: its ideal, else its fair share, as Synergy's second try;
proportional: its fair share), so that a job that fits one node but finds its
GPUs free only on several is spread over them, as Synergy spreads it, rather
than waiting for one node (the engine's best fit, the default, which every other
section uses). Synergy's figures, its per-GPU-count averages, the job sets and
the commands are in traces/synergy/ (traces/README.md). Average JCT, FIFO+fair
(\`proportional\`) -> FIFO+tune (\`synergy-tune\`), with \`--placement node-order\`;
"vs Synergy's" is goldminer's fair / tune over Synergy's, minus 1 (the
measure of "within 10%"); "excess gain" compares the gains less 1,
(goldminer's - 1) / (Synergy's - 1) - 1, which magnifies a small difference where
the gains are small (the Philly windows' 5-8%), so both are shown; the last
column is the same run with the engine's best fit instead:

| job set | cluster | jobs | Synergy | Synergy fair / tune | goldminer | goldminer fair / tune | vs Synergy's | excess gain | best fit: fair / tune (vs Synergy's) |
|---|---|---:|---:|---:|---:|---:|---:|---:|---:|
$(cat "$SAME")

Per GPU count (Synergy's per-job output on the same runs, averaged per GPU
count in traces/synergy/synergy-by-gpus.tsv), \`--placement node-order\`:

| job set | GPUs | jobs | Synergy | Synergy fair / tune | goldminer | goldminer fair / tune | vs Synergy's |
|---|---:|---:|---:|---:|---:|---:|---:|
$(cat "$SAMEG")

How synergy-tune was brought to Synergy's TUNE, found by comparing both
simulators' per-job JCTs per model and per GPU count: it asks for Synergy's
profiled CPUs per GPU (the profile's \`ask_cpu_per_gpu\`) and runs at the
profiled speed-up once it holds them; a demand above a server is capped at the
server's vCPUs and memory as Synergy caps it (an m5 job of 4 GPUs asks 24 vCPUs
and 500 GB, not 750 GB, and runs at its full speed-up; a 4-GPU alexnet or res18
job asks 24 vCPUs and runs at the speed-up on Synergy's line between fair share
and its whole ask); its GPUs are taken node by node where its ideal fits, as
Synergy's random placement takes them, rather than where best fit puts them and
its ideal then seldom fits; and where its ideal fits nowhere, its GPUs are
taken node by node at fair share (\`--placement node-order\`), as Synergy's
second try takes them, rather than waiting for one node. Before the first of
these, the jobs of the models with the highest CPU speed-up (alexnet,
shufflenet, res18, m5) lost most of their gain. Before the last, multi-GPU tune
jobs waited for one node while the 1-GPU jobs behind them ran (Synergy's queue
starts any job that fits): on philly40 the 1-GPU jobs gained 1.204x against
Synergy's 1.081x and the whole set 1.188x against 1.079x (the best-fit column),
and on openb the 8-GPU jobs gained 1.005x against 1.161x. In node order every
GPU count of every set is within a few percent of Synergy's, and so is every
model (on the Philly windows each model's gain is 1-3% above Synergy's, the
speed-up-1 language and speech models alike: what is left is in the queue, not
in a job's speed). \`proportional\` met no such job on these sets (each round
places its whole queue again, from an empty cluster, in arrival order, and best
fit left no job of 1, 2, 4 or 8 GPUs with its GPUs free only on several nodes):
its per-job JCTs are the same under both placements, and its average within 1%
of Synergy's FIFO+fair on every set.

**On openb with the model classes drawn** ($SEEDS seeds; the class mix of the
profile's shares: 34% image, 33% language, 33% speech models). Synergy's ten
models as profile rows (traces/profile-synergy.tsv: the rate at the fair share of
3 vCPUs per GPU is 1, the model's published speed-up is reached at its profiled
CPUs per GPU; its memory demand per GPU), each job's trace duration taken as its
run at fair share (\`--work-at share\`, as Synergy's trace is), arrivals
compressed $S24 x to offered load $LOAD, and Synergy's scheduling: rounds of 300 s
with preemption (\`--round 300\`: arrivals and ends wait for the next round, which
takes every running job off its GPUs and places the queue again in arrival
order) and its queue (\`--backfill all\`: any queued job that fits starts, no node
is held for the head). \`proportional\` is Synergy's FIFO+fair (every job its GPU-proportional
share), \`synergy-tune\` its FIFO+tune. Command: \`goldminer sim $(cat "$OUT/synergy-24/command") --policy all --seeds $SEEDS --vs synergy-tune\`.

$(table synergy-24)

**proportional / synergy-tune, paired per seed: $(rt "$OUT/synergy-24.seeds.jsonl" proportional synergy-tune)**
(per-seed range $(awk -v a="$(rk "$OUT/synergy-24.seeds.jsonl" proportional synergy-tune min)" -v b="$(rk "$OUT/synergy-24.seeds.jsonl" proportional synergy-tune max)" 'BEGIN { printf "%.2f - %.2f", a, b }'); ratio of the means
$(awk -v a="$(pf "$OUT/synergy-24.seeds.jsonl" proportional avg_jct)" -v b="$(pf "$OUT/synergy-24.seeds.jsonl" synergy-tune avg_jct)" 'BEGIN { printf "%.2fx: %.2f -> %.2f h", a / b, a / 3600, b / 3600 }')).
This mix is not the one Synergy's runs above had, so the ratio is set beside
none of them: the comparison with Synergy is the identical-jobs table.
goldminer / synergy-tune: $(rt "$OUT/synergy-24.seeds.jsonl" goldminer synergy-tune). \`static\` is
no reference here: it places jobs by openb's vCPU requests, which nodes of 24
vCPUs cannot hold side by side, so GPUs stay idle behind blocked requests.

**Each part of Synergy's scheduling on its own** (proportional and
synergy-tune over the same $SEEDS seeds; average JCT in hours, the last column
paired per seed):

| model | proportional (FIFO+fair) | synergy-tune (FIFO+tune) | proportional / synergy-tune |
|---|---:|---:|---:|
$(cat "$SYS")

In continuous time a job that ends hands its GPUs and vCPUs to the queue at once,
which serves the faster tune more than fair share and compounds through the
queue; in rounds every end waits for the next multiple of 300 s, and every round
preempts and re-places the whole queue in arrival order. Rounds and queue
together are how Synergy's simulator schedules and are adopted above; the asks
and the placement are synergy-tune's own defaults (Synergy's), and the rows with
\`--tune-asks ideal\` and \`--placement demand\` show how far each moves it.
goldminer's own results, (a) to (e), stay in continuous time with a backfill
window, as a real cluster's scheduler runs.

What still differs from Synergy's simulator:
- **Progress in whole iterations.** Synergy counts a job's progress in a round
  in whole iterations; here in samples, continuously.
- **Storage bandwidth**, Synergy's third resource, is not modelled (memory is,
  as Synergy plans it: alexnet and shufflenet ask twice the fair share of
  62.5 GB per GPU, m5 three times, each capped at a server's 500 GB).
- **Fair-share placement** (the table of 30 seeds above, and (a)-(e), which keep
  the engine's best fit). Where its ideal fits nowhere, a job goes where best
  fit puts it (on one node where it fits one), at fair share; Synergy takes the
  first free GPUs, server by server, as \`--placement node-order\` does (the
  identical-jobs tables). A job spanning several nodes is trimmed on the node
  that needs it only (Synergy trims it on all).
- **Speed between the two points.** Synergy's job runs at its speed-up or at 1
  (fair share); here a job below its ideal runs at min(its peak, vCPUs x
  per-vCPU rate), which agrees at both points (plans give a job its ideal or its
  fair share, nothing between).

## (g) Why the CPU-short outcomes spread

On $CSH ($VPG vCPUs per GPU) goldminer's average JCT per seed ranges
$(awk -F'\t' 'NR > 1 && $1 == "goldminer" { v = $3 / 3600; if (n++ == 0 || v < a) a = v; if (v > b) b = v } END { printf "%.1f to %.1f h", a, b }' "$OUT/openb-64-cpu24.seeds.tsv"): in some seeds the queue drains after the
busy period, in others it builds up for the rest of the trace. Two things decide
it. The class draw: how many vCPUs per GPU the drawn mix needs (GPU-time
weighted: traced GPU-seconds x gpu_rate / cpu_rate); where that is above the $VPG
the nodes have, every running job is slower, GPUs stay allocated longer and the
queue grows, which makes it worse. And timing: when the heaviest jobs of the draw
arrive relative to the busy period. The figure plots one point per seed,
goldminer's and proportional's average JCT against the draw's need. Pearson r
between the need and goldminer's JCT over the $SEEDS seeds: $BI_R, so the need
accounts for $(awk -v r="$BI_R" 'BEGIN { printf "%.0f%%", 100 * r * r }') of the spread. Of the $BI_LO seeds that need under $VPG vCPUs
per GPU, $BI_LOD finish with an average JCT under the median over the seeds
($BI_MED h); of the $BI_HI that need more, $BI_HIB stay at or above it$(awk -v r="$BI_R" 'BEGIN { print (r * r < 0.25 ? ": with the measured rates timing decides most of it." : ".") }')
A mean over such seeds, and a Student-t interval around it, mix the regimes; the
paired per-seed ratios compare the policies within each seed, where the draw is
the same.

## (h) Against the GoldMiner paper, apples to apples

**What the paper reports.** GoldMiner (H. Zhao et al., SIGMOD 2023, Proc. ACM
Manag. Data 1(2), doi:10.1145/3589773), in its abstract: on a 64-GPU cluster,
scheduling data workers elastically cuts the average JCT by up to 2.5x and raises
the aggregate GPU utilisation by up to 2.1x. Not verified here (only the abstract
was at hand): the vCPUs of that cluster's nodes, its job mix and pipelines, the
exact baseline and how it measured GPU utilisation; an Alibaba Cloud blog post
gives 2.5x for utilisation instead, and the abstract's pairing is used. What is
matched, and how:

- **Baselines.** \`static\` is the paper's: each job's vCPUs fixed at its request
  (openb's, Alibaba's own requests), its pipeline on them only. \`node-elastic\`
  is per-job elasticity without pooling: a job's data workers grow onto the idle
  vCPUs of its own nodes, shared by goldminer's own rule (core/policy.c, marginal
  gain in busy GPUs), never onto another node's: goldminer with the pool confined
  to each job's nodes.
- **GPU utilisation as the paper's:** busy GPU time over allocated GPU time, over
  the whole run (the GPU util column; 1 at most by definition), so the figure to
  set beside 2.1x is its ratio goldminer / static, paired per seed. GPU busy
  (busy GPU time over all the cluster's GPUs, middle 90% of submits) is beside
  it: it also counts GPUs left unallocated, which requests that do not fit
  beside each other leave idle.
- **The node shapes of PAI** (where GoldMiner runs), from the PAI machine list
  (alibaba-gpu-v2020, the GPU machines by model, GPUs and vCPUs: $PAI_SHAPES):
  every 8-GPU machine has 96 vCPUs, so \`$PAI8\` is the paper's 64 GPUs as
  eight of them; \`$PAIMIX\` is the list's GPU mix scaled to 64 GPUs (61% of its
  GPUs in 8-GPU machines, 24% in P100 pairs, 15% in T4 pairs). The CPU-short
  \`$CSH\` of (a) is there for contrast: PAI has no such node.
- The rest as in (a): the openb trace compressed $PAI_SCALE x to load $LOAD, FIFO
  with a backfill of $BF, the profile of (a) to (d), $SEEDS seeds.

**Placement apart from pooling.** Every policy runs with two placements: a job
reserves 1 vCPU per GPU when placed (\`--local-min 1\`, goldminer's default), or
its whole request (\`--local-min request\`: static's placement, where a GPU stays
idle while the vCPUs requested beside it are taken). Average JCT in hours and GPU
util, mean ± 95% interval over the seeds (static places by its request either
way). Command: \`goldminer sim --cluster CLUSTER --trace $(basename "$OPENB")
--arrival-scale $PAI_SCALE --backfill $BF --policy static,node-elastic,goldminer,unlimited-cpu
--local-min 1|request --seeds $SEEDS --per-seed FILE\`:

| cluster | a job reserves | static | GPU util | node-elastic | GPU util | goldminer | GPU util | unlimited-cpu | GPU util |
|---|---|---:|---:|---:|---:|---:|---:|---:|---:|
$(cat "$PAPER_TABLE")

Each gain on its own, paired per seed across the two runs (\`goldminer sim --pair
A.tsv:POLICY,B.tsv:POLICY [--figure gpu_util]\`: median and bootstrap 95%
interval; > 1: the second is faster, or its GPUs busier):

| comparison | $PAI8 | PAI mix | $CSH |
|---|---:|---:|---:|
$(cat "$PAPER_RATIOS")

**What it shows.** On PAI's nodes the gain over the paper's baseline is
$(pp 1 1 static 1 goldminer) ($(pp 2 1 static 1 goldminer) on the mix), and
it is per-job elasticity: at static's own placement, jobs that add workers on
their own node's idle vCPUs already gain $(pp 1 request static request node-elastic)
($(pp 2 request static request node-elastic)); pooling across nodes adds
$(pp 1 1 node-elastic 1 goldminer), and placement is not told apart. GPU util rises
$(pp 1 1 goldminer 1 static gpu_util), not 2.1x: with the measured pipelines and
openb's requests a static job's GPUs wait for data $(awk -v u="$(pf "$OUT/paper-1-1.jsonl" static gpu_util)" 'BEGIN { printf "%.1f%%", 100 * (1 - u) }')
of their allocated time (the few jobs that asked for fewer vCPUs than their
pipeline needs), and the JCT gain is that little speed compounded through a queue
at load $LOAD. Pooling across nodes pays only where nodes are short of vCPUs: at
3 per GPU it is $(pp 3 1 node-elastic 1 goldminer) over node-elastic, while
placement (1 vCPU per GPU reserved instead of requests that nodes of 24 cannot
hold side by side) is $(pp 3 request goldminer 1 goldminer); there GPU busy rises
$(pp 3 1 goldminer 1 static gpu_busy), the one GPU figure here of the order of the
paper's 2.1x, and it is placement's. So the paper's gains need jobs whose
pipelines need more vCPUs per GPU than they ask for, or than their nodes have;
with the measured pipelines few jobs are such on PAI's 12 vCPUs per GPU.

## What it means

- **Where the gain comes from.** A job's speed is min(GPU-bound rate, data rate of
  its vCPUs). Under \`static\` a job whose class needs more vCPUs per GPU than it
  requested is input-bound for its whole life, while jobs that need little leave
  requested vCPUs idle; and its request, not its need, decides where it can be
  placed. With the measured rates the classes need $(awk -F'\t' '!/^#/ { printf "%s%s %.2g", n++ ? ", " : "", $1, $2 / $3 }' traces/profile-pytorch.tsv) vCPUs per GPU,
  against openb requests of median 11: few jobs are input-bound under their
  request. Section (h) takes the gain over \`static\` apart: on 96-vCPU nodes it
  is those few jobs' (their nodes' idle vCPUs would feed them), not placement and
  not pooling; on 24-vCPU nodes it is placement first. goldminer keeps 1 local vCPU
  per GPU and moves the rest to where the marginal gain in busy GPUs is largest;
  that matters only where the nodes' vCPUs fall short of the mix's need.
- **What the baselines isolate.** synergy-tune moves vCPUs between the jobs of one
  node by their need (greedy in arrival order, as Synergy's tune does; section
  (f)) but never across nodes; it also places as Synergy does (a job's GPUs node
  by node where its ideal fits, spread over nodes where that is so), not by the
  engine's best fit as every other policy, so part of its difference from the
  others is placement (it packs worse where vCPUs are plentiful, and it escapes
  strict FIFO's head-of-line blocking); cachew and pecan move vCPUs across
  the cluster but serve jobs in start order, without asking which job gains most
  from a worker; pecan adds local placement to cachew. The gap between pecan and
  goldminer is therefore the value of the marginal-gain priority alone (both place
  workers local first); the gap between synergy-tune and pecan that of crossing
  nodes. Where vCPUs are plentiful (96 or 48 per 8 GPUs with the measured rates)
  every elastic policy feeds every job and they tie with the unlimited-CPU bound
  (synergy-tune apart, by its placement);
  the CPU-short cluster (24 per 8 GPUs) is where the rules differ.
- **What separates, and what does not.** On the CPU-short cluster (24 vCPUs per
  8 GPUs, $SEEDS seeds) goldminer against proportional is $(rt "$OUT/openb-64-cpu24.seeds.jsonl" proportional goldminer),
  against synergy-tune $(rt "$OUT/openb-64-cpu24.seeds.jsonl" synergy-tune goldminer), against pecan
  $(rt "$OUT/openb-64-cpu24.seeds.jsonl" pecan goldminer) and against static $(rt "$OUT/openb-64-cpu24.seeds.jsonl" static goldminer) (each the
  paired median of the other's JCT over goldminer's). With 96 vCPUs per node
  goldminer against proportional is $(rt "$OUT/openb-64.seeds.jsonl" proportional goldminer) and against
  static $(rt "$OUT/openb-64.seeds.jsonl" static goldminer). Quote only separated ratios, with their
  interval, and with section (d): how far they move with the assumptions left and
  with the speed of a vCPU.
- **The remote cost.** A data worker next to the job's GPUs no longer pays it, yet
  where vCPUs are short the results still hang on it (section (d)): the more
  workers run remote, the more of the pool's vCPUs are lost to it, and a policy
  that moves vCPUs across nodes gains less over one that keeps them local. The
  default ($RC) was measured over TCP on one machine: quote no gain without (d).
- **Against the paper.** The paper reports up to 2.5x average JCT and 2.1x GPU
  utilisation on a 64-GPU cluster with its own production mix and its measured
  pipelines; section (h) sets its baseline, its GPU utilisation and PAI's node
  shapes beside it. The setup here differs: a public trace (openb) whose jobs' model
  classes are drawn from an assumed mix, per-vCPU rates measured on one shared
  machine's vCPUs (an AMD EPYC VM whose exact model is not exposed, perhaps faster
per core than the paper's servers: section (d) halves them), a remote cost
  measured over TCP on one machine, and a FIFO scheduler with backfill. Our
  GPU-utilisation gain is bounded by how input-bound jobs are under \`static\` in
  *our* profile (GPU util 1.0 is the ceiling), and the JCT gain depends on the
  load chosen (see the sweep) and on how short the nodes' vCPUs are.
- **Queueing is chaotic.** Under contention a small change in when one job ends
  reorders the queue, so single runs of policies whose per-job speeds are close
  can swap places; that is why every comparison is a paired ratio over seeds
  with its interval. Where that interval contains 1 ("not separated"), the model
  does not tell the policies apart. unlimited-cpu bounds each job's run time, not
  the queueing of a FIFO scheduler.
- **Strict FIFO** results are dominated by head-of-line blocking: an 8-GPU job waits
  for a whole free node while GPUs idle (not under synergy-tune, whose jobs spread
  over nodes where their ideal fits, as Synergy's random placement spreads them).
  The backfill runs (a node is held for the blocked head so it cannot starve) are
  the ones to read.
- **Full cluster.** openb's pods occupy only a small part of the 6,212-GPU cluster
  as traced, so there is no queueing and the gain is the per-job speed-up alone.
- **Which world.** Sections (a) to (d) describe PyTorch-era input pipelines (the
  profile the paper's users ran, measured); (e) replaces the image classes' rate
  with goldminer's data plane's, measured the same way.
- **Not yet here** (later work): the multi-node model checked
  against a real multi-node run.
EOT
} >"$RESULTS"
echo "sim-experiments: wrote $RESULTS and $OUT/" >&2
