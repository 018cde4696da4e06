#!/bin/sh
# bench-ab.sh - throughput of two builds of goldminer in the same run, to show that
# a refactor did not change speed:
#     sh tests/regress/bench-ab.sh OLD_BUILD_DIR NEW_BUILD_DIR DATA [ROUNDS]
# Runs `goldminer bench DATA --workers 2 --epochs E` for uint8 train, float32
# train and uint8 eval, alternating old and new (ABAB..., so drift on a shared
# machine hits both alike), ROUNDS times each (default 5), and prints the medians
# and new/old. Acceptance for a pure refactor: every ratio within 0.95..1.05.
set -eu
OLD=${1:?usage: bench-ab.sh OLD_B NEW_B DATA [ROUNDS]}
NEW=${2:?usage: bench-ab.sh OLD_B NEW_B DATA [ROUNDS]}
DATA=${3:?usage: bench-ab.sh OLD_B NEW_B DATA [ROUNDS]}
ROUNDS=${4:-5}
EPOCHS=${EPOCHS:-2}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

rate() { sed -n 's/.*"img_per_s": *\([0-9.]*\).*/\1/p'; }
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

for cfg in "uint8" "float32" "uint8 --eval"; do
	name=$(printf '%s' "$cfg" | tr -d ' -')
	i=0
	while [ "$i" -lt "$ROUNDS" ]; do
		for side in old new; do
			if [ $side = old ]; then g="$OLD/goldminer"; else g="$NEW/goldminer"; fi
			# shellcheck disable=SC2086 # the words of cfg are separate arguments
			set -- $cfg
			out=$1
			shift
			"$g" bench "$DATA" --workers 2 --epochs "$EPOCHS" --output "$out" "$@" --quiet |
				rate >>"$tmp/$name.$side"
		done
		i=$((i + 1))
	done
	o=$(median <"$tmp/$name.old")
	n=$(median <"$tmp/$name.new")
	awk -v c="$cfg" -v o="$o" -v n="$n" -v r="$ROUNDS" 'BEGIN {
		printf "%-14s old %8.1f img/s  new %8.1f img/s  new/old %.3f  (median of %d, alternating)\n",
			c, o, n, n / o, r }'
done
