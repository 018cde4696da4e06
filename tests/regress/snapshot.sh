#!/bin/sh
# snapshot.sh - record the observable behaviour of a build, to prove that a
# refactor changed nothing:
#     sh tests/regress/snapshot.sh OUTDIR            (B=build by default)
#     sh tests/regress/snapshot.sh /tmp/before; ...; sh tests/regress/snapshot.sh /tmp/after
#     diff -r /tmp/before /tmp/after && echo identical
# It records the deterministic part of every output: bench batch checksums
# (uint8/float32/float16, train/eval, tree/shards, 1 and 3 workers), the
# simulator's jobs.tsv/summary.json/timeseries for every policy on the synthetic
# samples (and on the openb trace when TRACES, ../shared/traces or traces/public
# holds it), plan --json for a few specs, the bytes of pack and synth --shards,
# and the exit status and first error line of a few bad inputs. Timings are
# dropped. Runs in about a minute on 2 cores.
set -eu
OUT=${1:?usage: snapshot.sh OUTDIR}
B=${B:-build}
G="$B/goldminer"
[ -x "$G" ] || { echo "snapshot: $G not built (make)" >&2; exit 1; }
rm -rf "$OUT"
mkdir -p "$OUT"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

# keep KEY...: the named fields of a one-line JSON object, one per line
keep() {
	line=$(cat)
	for k in "$@"; do
		printf '%s\n' "$line" |
			sed -n "s/.*\"$k\": *\(\[[^]]*\]\|\"[^\"]*\"\|[^,}]*\).*/$k=\1/p"
	done
}

"$G" synth "$tmp/tree" --images 150 --classes 3 --seed 7 >/dev/null
"$G" pack "$tmp/tree" "$tmp/shards" --per-shard 40 >/dev/null
"$G" synth "$tmp/synthshards" --images 60 --classes 2 --seed 9 --shards 2 >/dev/null
(cd "$tmp" && find shards synthshards -type f | sort | xargs sha256sum) >"$OUT/pack.sha256"
(cd "$tmp" && find tree -type f | sort | xargs sha256sum) >"$OUT/synth.sha256"

for data in tree shards; do
	for mode in train eval; do
		ev=""
		[ $mode = eval ] && ev=--eval
		for out in uint8 float32 float16; do
			for w in 1 3; do
				f="$OUT/bench-$data-$mode-$out-w$w"
				# shellcheck disable=SC2086
				"$G" bench "$tmp/$data" --workers $w --epochs 2 --batch 16 --size 96 \
					--output $out $ev --seed 5 --checksum --quiet >"$tmp/b.json"
				keep images batches dataset classes errors checksum <"$tmp/b.json" >"$f"
			done
		done
	done
done
# a pipeline spec through bench
"$G" bench "$tmp/tree" --workers 2 --epochs 1 --batch 8 --checksum --quiet --pipeline \
	'read | decode | random_resized_crop 64 scale=0.5,1 | flip 0.2 | normalize imagenet | to_chw_f16 | batch 8' \
	>"$tmp/b.json"
keep images batches errors checksum <"$tmp/b.json" >"$OUT/bench-pipeline"

# a corrupt file: skipped and counted, same bytes
cp -r "$tmp/tree" "$tmp/bad"
f=$(find "$tmp/bad" -name '*.jpg' | sort | sed -n 5p)
head -c 300 "$f" >"$f.cut" && mv "$f.cut" "$f"
"$G" bench "$tmp/bad" --workers 2 --epochs 1 --batch 16 --checksum --quiet >"$tmp/b.json" \
	2>"$tmp/b.err" || true
keep images errors checksum <"$tmp/b.json" >"$OUT/bench-corrupt"
sed "s#$tmp#TMP#g" "$tmp/b.err" | grep -v 'img/s' | sort >"$OUT/bench-corrupt.stderr"

for spec in --train --eval 'read | decode | resize 128 | center_crop 112 | to_hwc_u8 | batch 4' \
	'read | decode | shuffle_buffer 100 | random_resized_crop 224 | cache | to_chw_f32 | batch 2' \
	'read | decode | bogus 3'; do
	n=$(printf '%s' "$spec" | cksum | cut -d' ' -f1)
	rc=0
	"$G" plan --json "$spec" >"$OUT/plan-$n" 2>&1 || rc=$?
	echo "rc=$rc" >>"$OUT/plan-$n"
done

# run-time measurements, not behaviour: wall time, event rate, peak RSS
NOTIME='s/"\(wall_s\|events_per_s\|max_rss_mib\)": *[0-9.e+-]*,\{0,1\}//g'
# simulator: every policy, the synthetic samples and (when present) openb
simrun() {
	name=$1
	shift
	rc=0
	"$G" sim --policy all --out "$tmp/sim-$name" "$@" >"$tmp/sim.json" 2>"$tmp/sim.err" || rc=$?
	echo "rc=$rc" >"$OUT/sim-$name.rc"
	sed "$NOTIME" "$tmp/sim.json" >"$OUT/sim-$name.jsonl"
	sed "s#$tmp#TMP#g; s#$OUT#OUT#g" "$tmp/sim.err" >"$OUT/sim-$name.stderr"
	if [ -d "$tmp/sim-$name" ]; then
		(cd "$tmp/sim-$name" && find . -type f | sort | while read -r p; do
			case $p in
			*summary.json) sed "$NOTIME" "$p" ;;
			*) cat "$p" ;;
			esac | sha256sum | sed "s#-\$#$p#"
		done) >"$OUT/sim-$name.sha256"
	fi
}
simrun tiny --cluster '2x(4gpu,16cpu)' --trace traces/samples/tiny.tsv --profile traces/samples/tiny-profile.tsv
simrun s100 --cluster '4x(4gpu,32cpu)' --trace traces/samples/synth-100-16gpu.tsv
simrun s1k --cluster '8x(8gpu,96cpu)' --trace traces/samples/synth-1k-64gpu.tsv --seed 3
TR=""
for d in "${TRACES:-}" ../shared/traces traces/public; do
	if [ -n "$d" ] && [ -f "$d/alibaba-gpu-v2023/openb_pod_list_default.csv" ]; then
		TR=$d
		break
	fi
done
if [ -n "$TR" ]; then
	simrun openb --cluster '8x(8gpu,96cpu)' --trace "$TR/alibaba-gpu-v2023/openb_pod_list_default.csv" \
		--arrival-scale 4
	simrun openb-nodes --cluster "$TR/alibaba-gpu-v2023/openb_node_list_all_node.csv" \
		--trace "$TR/alibaba-gpu-v2023/openb_pod_list_default.csv" --policy goldminer
	simrun philly --cluster "$TR/alibaba-gpu-v2020/pai_machine_spec.csv" \
		--trace "$TR/philly-pollux/philly.csv" --arrival-scale 2
else
	echo "snapshot: openb trace not found (TRACES=DIR); skipped" >&2
fi
simrun badtrace --cluster '2x(4gpu,16cpu)' --trace "$OUT/pack.sha256"
echo "snapshot: $(find "$OUT" -type f | wc -l) files in $OUT" >&2
