#!/bin/sh
# synergy-tune does what Synergy's TUNE does: on a small job set
# (traces/synergy/gen7-300.tsv, 300 jobs of Synergy's own generator) goldminer sim's
# proportional (FIFO+fair) and synergy-tune (FIFO+tune), in Synergy's rounds, queue
# and random placement (--placement node-order), are checked against Synergy's
# simulator's per-job JCTs on the same jobs
# (traces/synergy/gen7-300-synergy.tsv): fair share's average JCT within 3%, the
# tune gain (fair / tune average JCT - 1) within 10% of Synergy's over all jobs
# and for each model with a CPU speed-up (alexnet, res18, res50, mobilenet,
# shufflenet, m5). TAP on stdout. B: the build directory (default build).
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
B=${B:-build}
case $B in /*) ;; *) B="$repo/$B" ;; esac
syn="$repo/traces/synergy"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
n=0
fails=0
t() { # t OK DESCRIPTION
	n=$((n + 1))
	if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fails=$((fails + 1)); fi
}

timeout 120 "$B/goldminer" sim --cluster '16x(8gpu,24cpu,500gb)' --trace "$syn/gen7-300.tsv" \
	--profile "$repo/traces/profile-synergy.tsv" --work-at share --round 300 --backfill all \
	--placement node-order --policy proportional,synergy-tune --check --out "$tmp/out" >"$tmp/log" 2>&1
t $? "goldminer sim runs the set (proportional, synergy-tune; --check)"

# per model (and ALL): jobs, Synergy fair, Synergy tune, goldminer fair, goldminer tune (sums)
awk -F'\t' '
	FILENAME ~ /gen7-300-synergy/ { if ($1 ~ /^[0-9]+$/) { m[$1] = $2; sf[$2] += $4; st[$2] += $5; sf["ALL"] += $4; st["ALL"] += $5; c[$2]++; c["ALL"]++ } next }
	FILENAME ~ /proportional/ { if (FNR > 1) { gf[m[$1]] += $8; gf["ALL"] += $8 } next }
	FNR > 1 { gt[m[$1]] += $8; gt["ALL"] += $8 }
	END { for (k in c) printf "%s %d %.1f %.1f %.1f %.1f\n", k, c[k], sf[k], st[k], gf[k], gt[k] }
' "$syn/gen7-300-synergy.tsv" "$tmp/out/proportional/jobs.tsv" "$tmp/out/synergy-tune/jobs.tsv" \
	>"$tmp/sums"
sed 's/^/# /' "$tmp/sums" | sort
all=$(grep -c . "$tmp/sums")
t "$([ "$all" -ge 11 ]; echo $?)" "every model of the set is compared ($all rows)"

fair_ok=$(awk '$1 == "ALL" { d = $5 / $3 - 1; print (d < 0.03 && d > -0.03) ? 0 : 1 }' "$tmp/sums")
t "${fair_ok:-1}" "fair share: average JCT within 3% of Synergy's FIFO+fair"
for k in ALL alexnet res18 res50 mobilenet shufflenet m5; do
	ok=$(awk -v k=$k '$1 == k { sg = $3 / $4 - 1; gg = $5 / $6 - 1
		printf "%d %.3f %.3f", (gg > 0.9 * sg && gg < 1.1 * sg) ? 0 : 1, 1 + sg, 1 + gg }' "$tmp/sums")
	t "${ok%% *}" "$k: tune gain within 10% of Synergy's (Synergy, goldminer: ${ok#* })"
done
echo "1..$n"
[ "$fails" = 0 ]
