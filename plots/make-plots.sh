#!/bin/sh
# make-plots.sh - PNG figures from simulator output (run by `make plots`).
# Usage: sh plots/make-plots.sh [DIR...]
# Each DIR is an experiment directory holding one subdirectory per policy (as
# written by `goldminer sim --policy all --out DIR`). Without arguments, every such
# directory under $SIM_OUT (default build/sim-experiments) is plotted. Writes into
# each DIR: jct_cdf.png, gpu_util.png, bars.png (and summary.tsv, their table).
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
	# policy, avg_jct, gpu_util, gpu_busy from each summary.json
	printf 'policy\tavg_jct\tgpu_util\tgpu_busy\n' >"$dir/summary.tsv"
	for p in $pols; do
		sed -e 's/.*"avg_jct":\([0-9.]*\).*"gpu_util":\([0-9.]*\),"gpu_busy":\([0-9.]*\).*/\1\t\2\t\3/' \
			"$dir/$p/summary.json" | sed "s/^/$p\t/" >>"$dir/summary.tsv"
	done
	gnuplot -e "dir='$dir'; policies='$pols'; out='$dir/jct_cdf.png'; term='$term'; ttl='$name: JCT CDF'" \
		"$here/jct_cdf.gp" || rc=1
	gnuplot -e "dir='$dir'; policies='$pols'; out='$dir/gpu_util.png'; term='$term'; ttl='$name: GPU utilisation over time'" \
		"$here/gpu_util.gp" || rc=1
	gnuplot -e "data='$dir/summary.tsv'; out='$dir/bars.png'; term='$term'; ttl='$name'" \
		"$here/bars.gp" || rc=1
	echo "plots: $dir/{jct_cdf,gpu_util,bars}.png"
done
exit $rc
