#!/bin/sh
# torchvision_train.sh: torchvision's reference references/classification/train.py
# (the installed torchvision's version, unmodified) on a small ImageFolder, plain
# and under `goldminer run`, as TAP: the plan is the C path for the default recipe
# (train and validation loaders) and hybrid for the train loader with
# --auto-augment ta_wide --random-erase 0.1; each run's exit status is plain's
# (0) and its stdout has plain's format (the same lines with every number
# masked: losses and times differ, the lines do not).
#
# The reference scripts are not goldminer's and are not in the repository: they
# come from `apt-get source --download-only pytorch-vision=VERSION` (Debian's
# source of the installed python3-torchvision) with a private apt state under
# $REF/../tv-src-fetch (the machine's sources are not touched), and only
# references/classification/*.py of the upstream tarball is kept, in $REF
# (default build/torchvision-ref; nothing is fetched when it holds train.py).
# Anything missing (python3-torchvision, the network, the photos) is a skip that
# says why. Env: B (build directory, default build), REF, PHOTOS (a folder of
# class folders of JPEGs, default /tmp/photos, made by
# tests/bench/make-photos.sh when absent), GM_PYTHON.
# About 2 minutes on 2 shared cores (6 runs of 1 epoch of mobilenet_v3_small at
# 64 px over 40 + 20 images).
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
B=${B:-build}
case $B in /*) ;; *) B=$repo/$B ;; esac
py=${GM_PYTHON:-/usr/bin/python3}
ref=${REF:-$B/torchvision-ref}
photos=${PHOTOS:-/tmp/photos}
n=0
fails=0
skip_all() {
	echo "1..1"
	echo "ok 1 # SKIP torchvision train.py: $1"
	exit 0
}
ok() {
	n=$((n + 1))
	echo "ok $n - $1"
}
not_ok() {
	n=$((n + 1))
	fails=$((fails + 1))
	echo "not ok $n - $1"
	[ -n "${2:-}" ] && sed 's/^/# /' "$2" | tail -40
}

"$py" -c 'import torch, torchvision, PIL' 2>/dev/null || skip_all "$py cannot import torch, torchvision and PIL"
[ -f "$B/libgoldminer.so" ] || skip_all "no $B/libgoldminer.so (make all)"

# --- the reference scripts ------------------------------------------------------------
fetch_ref() {
	version=$(dpkg-query -W -f='${Version}' python3-torchvision 2>/dev/null || true)
	[ -n "$version" ] || {
		echo "python3-torchvision is not installed (its version names the source to fetch)"
		return 1
	}
	upstream=${version%-*}
	work=$(dirname "$ref")/tv-src-fetch
	rm -rf "$work"
	mkdir -p "$work/apt/lists/partial" "$work/apt/cache/archives/partial" "$work/src" "$work/u"
	echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian ${GM_TV_DIST:-bookworm} main" \
		>"$work/apt/sources.list"
	set -- -o Dir::Etc::SourceList="$work/apt/sources.list" -o Dir::Etc::SourceParts=/dev/null \
		-o Dir::State::Lists="$work/apt/lists" -o Dir::Cache="$work/apt/cache" -o Debug::NoLocking=1
	apt-get -qq "$@" update >"$work/log" 2>&1 || true
	# (a mirror may refuse the .debian.tar.xz: the orig tarball is what counts)
	(cd "$work/src" && apt-get -qq "$@" source --download-only "pytorch-vision=$version" >>"$work/log" 2>&1) || true
	orig=
	for f in "$work/src/pytorch-vision_$upstream.orig.tar."*; do
		[ -f "$f" ] && orig=$f
	done
	[ -n "$orig" ] || {
		echo "apt-get source pytorch-vision=$version fetched no orig tarball (is deb.debian.org reachable? GM_TV_DIST names the suite): $(tail -1 "$work/log")"
		return 1
	}
	tar --no-same-owner -xf "$orig" -C "$work/u" --wildcards '*/references/classification/*.py' 2>/dev/null
	mkdir -p "$ref"
	mv "$work"/u/*/references/classification/*.py "$ref"/ 2>/dev/null
	rm -rf "$work"
	[ -f "$ref/train.py" ] || {
		echo "the pytorch-vision $version source has no references/classification/train.py"
		return 1
	}
}
if [ ! -f "$ref/train.py" ]; then
	why=$(fetch_ref) || skip_all "$why"
fi

# --- a small ImageFolder: 5 classes (train.py reports top-5), 8 train and 4 val each --
if [ ! -d "$photos" ] || [ "$(find "$photos" -name '*.jpg' | head -40 | wc -l)" -lt 40 ]; then
	bash "$repo/tests/bench/make-photos.sh" "$photos" >/dev/null 2>&1 ||
		skip_all "no photos in $photos and tests/bench/make-photos.sh could not make them"
fi
data=$B/torchvision-train-data
rm -rf "$data"
k=0
for cdir in "$photos"/*/; do
	c=$(basename "$cdir")
	i=0
	for f in "$cdir"*.jpg "$cdir"*.jpeg "$cdir"*.JPG; do
		if [ ! -f "$f" ] || [ $i -ge 12 ]; then continue; fi
		if [ $i -lt 8 ]; then
			mkdir -p "$data/train/$c" && cp "$f" "$data/train/$c/"
		else
			mkdir -p "$data/val/$c" && cp "$f" "$data/val/$c/"
		fi
		i=$((i + 1))
	done
	if [ $i -lt 12 ]; then # too few: not a class of the test's
		rm -rf "$data/train/$c" "$data/val/$c"
		continue
	fi
	k=$((k + 1))
	[ $k -ge 5 ] && break
done
[ $k -ge 5 ] || skip_all "$photos has fewer than 5 class folders of 12 JPEGs"

# --- the runs -------------------------------------------------------------------------
out=$B/torchvision-train-out
rm -rf "$out"
mkdir -p "$out"
export PYTHONPATH="$repo/python${PYTHONPATH:+:$PYTHONPATH}"
export GOLDMINER_LIB="$B/libgoldminer.so"
args="--data-path $data --model mobilenet_v3_small --epochs 1 --device cpu -b 8 -j 2
	--train-crop-size 64 --val-resize-size 72 --val-crop-size 64 --print-freq 1 --output-dir="
# train.py imports presets, utils, ... from its own folder (sys.path[0])
run() { # NAME [goldminer] [train.py options...]
	name=$1
	shift
	if [ "${1:-}" = goldminer ]; then
		shift
		set -- "$py" -m goldminer run "$ref/train.py" "$@"
	else
		set -- "$py" "$ref/train.py" "$@"
	fi
	# shellcheck disable=SC2086 # $args: one word per option
	(cd "$out" && timeout 600 "$@" $args >"$out/$name.out" 2>"$out/$name.err")
	echo $? >"$out/$name.rc"
}
# the lines of stdout with numbers masked (losses, accuracies, times, eta)
shape() {
	sed -E 's/[0-9]+(\.[0-9]+)?(e[-+]?[0-9]+)?/#/g; s/ +/ /g' "$1"
}
for recipe in default ta_wide; do
	extra=
	[ $recipe = ta_wide ] && extra="--auto-augment ta_wide --random-erase 0.1"
	# shellcheck disable=SC2086
	run "$recipe.plain" $extra
	# shellcheck disable=SC2086
	GOLDMINER_PLAN=1 run "$recipe.goldminer" goldminer $extra
	p=$(cat "$out/$recipe.plain.rc") g=$(cat "$out/$recipe.goldminer.rc")
	if [ "$p" = 0 ] && [ "$g" = 0 ]; then
		ok "$recipe: train.py exits 0 plain and under goldminer run"
	else
		not_ok "$recipe: train.py exits $p plain, $g under goldminer run" "$out/$recipe.goldminer.err"
	fi
	if shape "$out/$recipe.plain.out" >"$out/$recipe.plain.shape" &&
		shape "$out/$recipe.goldminer.out" >"$out/$recipe.goldminer.shape" &&
		[ -s "$out/$recipe.plain.shape" ] &&
		cmp -s "$out/$recipe.plain.shape" "$out/$recipe.goldminer.shape"; then
		ok "$recipe: stdout has plain's lines (numbers masked)"
	else
		diff "$out/$recipe.plain.shape" "$out/$recipe.goldminer.shape" >"$out/$recipe.diff" 2>&1
		not_ok "$recipe: stdout differs from plain's beyond its numbers" "$out/$recipe.diff"
	fi
	# the summary at exit: one line per loader, train.py's train loader first
	grep '^goldminer run: train.py:' "$out/$recipe.goldminer.err" | grep 'img/s' >"$out/$recipe.sum"
	train=$(sed -n 1p "$out/$recipe.sum")
	val=$(sed -n 2p "$out/$recipe.sum")
	want=C
	[ $recipe = ta_wide ] && want=hybrid
	case "$want:$train" in
	"C:"*": C path ["*" 40 images "* | "hybrid:"*": hybrid [C: RandomResizedCrop, RandomHorizontalFlip | python: TrivialAugmentWide,"*" 40 images "*)
		ok "$recipe: the train loader's plan is $want ($train)"
		;;
	*) not_ok "$recipe: the train loader's plan is not $want: '${train:-no summary}'" "$out/$recipe.goldminer.err" ;;
	esac
	case "$val" in
	*": C path [read | decode | resize 72 | center_crop 64 "*" 20 images "*)
		ok "$recipe: the validation loader's plan is C ($val)"
		;;
	*) not_ok "$recipe: the validation loader's plan is not C: '${val:-no summary}'" "$out/$recipe.goldminer.err" ;;
	esac
done
echo "1..$n"
[ $fails = 0 ]
