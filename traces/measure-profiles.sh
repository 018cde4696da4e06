#!/bin/sh
# measure-profiles.sh - re-measure every cpu_rate of the shipped profiles with
# `goldminer profile` on this machine (measured rates for every class): the PyTorch-era pipelines of
# traces/profile-pytorch.tsv (torchvision through a 1-worker DataLoader for the
# image classes and vit, the Python pipelines of nlp, speech and recsys) and
# goldminer's data plane for the image rows of traces/profile-goldminer.tsv (its
# other rows take the Python pipelines' rates, as goldminer's Python workers run
# those same pipelines; the shards row reads PHOTOS-shards, packed once by
# `goldminer pack`). GPU rates, shares and the files' headers are kept: only
# the cpu_rate and cpu_source columns change. Each row's source names its command.
#
#   sh traces/measure-profiles.sh [PHOTOS]     (default /var/tmp/goldminer-photos)
#
# Needs build/goldminer (make), the photos (tests/bench/make-photos.sh) and, for
# the Python pipelines, /usr/bin/python3 with NumPy, torch/torchvision, SciPy and
# soundfile plus Debian's sound-theme-freedesktop (`make profile-deps`). Takes
# about two minutes of CPU. Rates depend on the CPU: compare runs on one machine.
set -e
G=${B:-build}/goldminer
PH=${1:-/var/tmp/goldminer-photos}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT INT TERM
[ -x "$G" ] || { echo "measure-profiles: $G not built (make)" >&2; exit 1; }
[ -d "$PH" ] || { echo "measure-profiles: no photos at $PH (tests/bench/make-photos.sh $PH)" >&2; exit 1; }

# keep FILE: the file's own header (its leading '#' lines but the column line)
keep() { sed -n '/^#class/q;/^#/p' "$1"; }
# put SRC DST: DST's header, then SRC's column line and rows
put() {
	{ keep "$2"; sed -n '/^#class/,$p' "$1"; } >"$T/put" && cat "$T/put" >"$2"
}

# PyTorch-era: each step starts from the previous one's output
P=traces/profile-pytorch.tsv
cp "$P" "$T/p0.tsv"
"$G" profile --base "$T/p0.tsv" --class nlp --out "$T/p1.tsv"
"$G" profile --base "$T/p1.tsv" --class speech --out "$T/p2.tsv"
"$G" profile --base "$T/p2.tsv" --class recsys --out "$T/p3.tsv"
"$G" profile "$PH" --torchvision --base "$T/p3.tsv" --class resnet50,cv-light,vit \
	--images 1500 --out "$T/p4.tsv"
put "$T/p4.tsv" "$P"

# goldminer's data plane for the image rows; the rest as measured above
M=traces/profile-goldminer.tsv
"$G" profile "$PH" --base "$M" --class resnet50,cv-light --images 4000 --out "$T/g1.tsv"
"$G" profile "$PH" --base "$T/g1.tsv" --class resnet50-eval --images 4000 \
	--pipeline 'read | decode | resize 256 | center_crop 224 | to_hwc_u8' --out "$T/g2.tsv"
"$G" profile "$PH" --base "$T/g2.tsv" --class resnet50-f16 --images 4000 \
	--pipeline 'read | decode | random_resized_crop 224 | flip 0.5 | normalize imagenet | to_chw_f16' \
	--out "$T/g3.tsv"
"$G" profile "$PH" --base "$T/g3.tsv" --class cv-light-160 --images 4000 \
	--pipeline 'read | decode | random_resized_crop 160 | flip 0.5 | to_hwc_u8' --out "$T/g4.tsv"
"$G" profile "$PH" --base "$T/g4.tsv" --class cv-light-128 --images 4000 \
	--pipeline 'read | decode | random_resized_crop 128 | flip 0.5 | to_hwc_u8' --out "$T/g5.tsv"
"$G" profile "$PH" --base "$T/g5.tsv" --class cv-light-128-eval --images 4000 \
	--pipeline 'read | decode | resize 146 | center_crop 128 | to_hwc_u8' --out "$T/g6.tsv"
SH=${PH%/}-shards # the same photos as WebDataset shards, packed once
[ -d "$SH" ] || "$G" pack "$PH" "$SH" --per-shard 100 >/dev/null
"$G" profile "$SH" --base "$T/g6.tsv" --class resnet50-shards --images 4000 --out "$T/g7.tsv"
# vit, nlp, speech, recsys: the Python pipelines' rows of the PyTorch-era table
# (goldminer's Python workers run the same transforms, without a DataLoader)
awk -F'\t' -v OFS='\t' 'NR == FNR { if ($1 == "vit" || $1 == "nlp" || $1 == "speech" || $1 == "recsys") {
		r[$1] = $3; s[$1] = $6 } next }
	($1 in r) { $3 = r[$1]; $6 = s[$1] } { print }' "$P" "$T/g7.tsv" >"$T/g8.tsv"
put "$T/g8.tsv" "$M"
echo "measure-profiles: wrote $P and $M (cpu_rate and cpu_source)" >&2
