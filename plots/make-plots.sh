#!/bin/sh
# make-plots.sh - PNG figures from simulator output (run by `make plots`).
# Usage: sh plots/make-plots.sh [DIR...]
# Each DIR is an experiment directory holding one subdirectory per policy (as
# written by `goldminer sim --policy all --out DIR`). Without arguments, every such
# directory under $SIM_OUT (default build/sim-experiments) is plotted. Writes into
# each DIR: jct_cdf.png, gpu_util.png (the window of the middle 90% of submits,
# one panel per policy), bars.png (and summary.tsv, its table: the mean and 95%
# interval over the seeds where DIR.seeds.jsonl is there, else the one run), and
# where DIR.seeds.tsv (goldminer sim --per-seed) is there scatter.png (per seed,
# proportional's average JCT against goldminer's; scatter.tsv its table).
here=$(dirname "$0")
command -v gnuplot >/dev/null 2>&1 || { echo "make-plots: gnuplot not found (make deps)" >&2; exit 1; }
if gnuplot -e 'set terminal' 2>&1 | grep -q pngcairo; then term=pngcairo; else term=png; fi

if [ $# = 0 ]; then
	root=${SIM_OUT:-build/sim-experiments}
	# Split on purpose (POSIX sh has no arrays): one experiment directory per word.
	# shellcheck disable=SC2046
	set -- $(find "$root" -name summary.json 2>/dev/null | sed 's#/[^/]*/summary.json$##' | sort -u)
	[ $# = 0 ] && { echo "make-plots: no simulator output under $root (make sim-experiments)" >&2; exit 1; }
fi

rc=0
for dir in "$@"; do
	pols=""
	for p in static proportional synergy-tune cachew pecan goldminer unlimited-cpu; do
		[ -f "$dir/$p/jobs.tsv" ] && pols="$pols $p"
	done
	pols=${pols# }
	[ -n "$pols" ] || { echo "make-plots: $dir has no policy output" >&2; rc=1; continue; }
	name=$(basename "$dir")
	# policy, avg_jct and gpu_util with their 95% half-widths (0 for one run)
	printf 'policy\tavg_jct\tavg_jct_ci95\tgpu_util\tgpu_util_ci95\n' >"$dir/summary.tsv"
	for p in $pols; do
		if [ -f "$dir.seeds.jsonl" ]; then
			line=$(grep "^{\"policy\":\"$p\"" "$dir.seeds.jsonl")
		else
			line=$(cat "$dir/$p/summary.json")
		fi
		printf '%s\n' "$line" | awk -v p="$p" '{
			n = split("avg_jct avg_jct_ci95 gpu_util gpu_util_ci95", k, " ")
			printf "%s", p
			for (i = 1; i <= n; i++) {
				v = 0
				if (match($0, "\"" k[i] "\":[0-9.]+")) { v = substr($0, RSTART, RLENGTH); sub(/.*:/, "", v) }
				printf "\t%s", v
			}
			printf "\n" }' >>"$dir/summary.tsv"
	done
	# the reference drawn behind each panel: static, else the first policy there
	ref=${pols%% *}
	case " $pols " in *" static "*) ref=static ;; esac
	# the contended window: the 5th to 95th percentile of submits, in hours
	win=$(awk -F'\t' 'FNR > 1 { print $5 }' "$dir/$ref/jobs.tsv" | sort -g |
		awk '{ v[NR] = $1 } END { a = v[int(NR * 0.05) + 1]; b = v[int(NR * 0.95)]
			if (b <= a) b = a + 1; printf "%.3f %.3f", a / 3600, b / 3600 }')
	x0=${win% *} x1=${win#* }
	gnuplot -e "dir='$dir'; policies='$pols'; out='$dir/jct_cdf.png'; term='$term'; ttl='$name: JCT CDF'" \
		"$here/jct_cdf.gp" || rc=1
	gnuplot -e "dir='$dir'; policies='$pols'; out='$dir/gpu_util.png'; term='$term'; x0=$x0; x1=$x1; ref='$ref'; ttl='$name: GPUs busy and allocated, middle 90% of submits (seed 1)'" \
		"$here/gpu_util.gp" || rc=1
	gnuplot -e "data='$dir/summary.tsv'; out='$dir/bars.png'; term='$term'; ttl='$name'" \
		"$here/bars.gp" || rc=1
	if [ -f "$dir.seeds.tsv" ]; then
		awk -F'\t' 'NR > 1 && $1 == "goldminer" { g[$2] = $3 } NR > 1 && $1 == "proportional" { p[$2] = $3 }
			END { print "seed\tgoldminer\tproportional"
				for (s in g) if (s in p) printf "%d\t%.3f\t%.3f\n", s, g[s] / 3600, p[s] / 3600 }' \
			"$dir.seeds.tsv" | sort -n >"$dir/scatter.tsv"
		gnuplot -e "data='$dir/scatter.tsv'; out='$dir/scatter.png'; term='$term'; ttl='$name: average JCT per seed'" \
			"$here/scatter.gp" || rc=1
	fi
	echo "plots: $dir/{jct_cdf,gpu_util,bars}.png"
done
exit $rc
