#!/bin/sh
# README.md's examples are real, its headline figures are where its links say, and
# docs/DESIGN.md's Layout names every module. TAP on stdout.
#   1 the marked examples are found: the README line
#     "<!-- tested by tests/test_readme.sh -->" stands before each tested fenced
#     block, in this order by language: one ```c (the C loader), two ```python
#     (goldminer.Loader, then goldminer.torch.DataLoader), one ```sh (goldminer run)
#   2 the C example compiles against include/ and $B/libgoldminer.a, with the
#     libraries the Makefile links (liburing, libjpeg, -lm -pthread, and libcudart
#     when the library was built with CUDA)
#   3 run in a directory holding data/train (`goldminer synth data/train --images
#     64`, as the README says), it exits 0 and prints "64 images"
#   4 the Python example, run with /usr/bin/python3 and PYTHONPATH=python, prints
#     "(32, 224, 224, 3) 32" twice (two batches of 32): the same with NumPy (an
#     array) or without (a memoryview), so it needs no SKIP for NumPy
#   5 every file under core/ sim/ cmd/ is named, by its path from the
#     repository root (a header: or by its file name, beside its module), in
#     docs/DESIGN.md's "## 2. Layout" section
#   6 the DataLoader example, run as a script with /usr/bin/python3 and
#     PYTHONPATH=python, prints "(32, 3, 8, 8) 32" four times (2 batches, 2 epochs)
#     (SKIP without torch)
#   7 the goldminer run example, run in a directory holding data/train (64
#     synthetic images) and examples/ (this repository's), with goldminer the
#     built one and python3 /usr/bin/python3: exit 0, the script's own lines (an
#     epoch, the evaluation) and goldminer run's summary of both its loaders on the
#     C path (SKIP without torch or torchvision)
#   8 every headline of README's "## Measurements" links to a section that exists
#     and holds each of its figures (tests/readme_figures.py: a number there that
#     rounds to it)
#   9 README is a newcomer's page: at most 300 lines (the layout and every detail
#     live in docs/)
# Each example runs under a deadline (GM_README_TIMEOUT seconds, default 300).
# A sanitizer build (make sanitize) is linked with the sanitizers, and its Python
# run preloads libasan as tests/test_python.sh does.
# Env: B (build directory holding libgoldminer.a, .so and goldminer; default
# build), README (the file to check, default this repository's README.md), DESIGN
# (likewise docs/DESIGN.md).
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
B=${B:-build}
case $B in /*) ;; *) B=$repo/$B ;; esac
readme=${README:-$repo/README.md}
design=${DESIGN:-$repo/docs/DESIGN.md}
limit=${GM_README_TIMEOUT:-300}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
n=0
fails=0
t() { # t STATUS DESCRIPTION
	n=$((n + 1))
	if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fails=$((fails + 1)); fi
}
skip() { # skip REASON
	n=$((n + 1))
	echo "not ok $n # SKIP $1"
}
diag() { sed 's/^/# /' "$1" | tail -20; }

# ---- 1: the marked blocks, each into example.LANG (the first of its language),
# example2.LANG (the second), ...
awk -v dir="$tmp" '
	/^<!-- tested by tests\/test_readme\.sh -->$/ { marked = 1; next }
	marked && /^```[a-z]+$/ { lang = substr($0, 4); k = ++seen[lang]
		out = dir "/example" (k > 1 ? k : "") "." lang
		printf "" > out; inblock = 1; marked = 0; next }
	inblock && /^```$/ { inblock = 0; close(out); next }
	inblock { print > out; next }
	{ marked = 0 }' "$readme"
blocks=$(for f in "$tmp"/example*.*; do [ -f "$f" ] && printf '%s ' "${f##*/}"; done)
t "$([ "$blocks" = "example.c example.python example.sh example2.python " ]; echo $?)" \
	"README has the marked examples: one C, two Python, one sh (found: ${blocks:-none})"

# ---- 2, 3: the C example
san=""
if readelf -d "$B/libgoldminer.so" 2>/dev/null | grep -q libasan; then
	san="-fsanitize=address,undefined"
fi
cudalibs=""
if nm "$B/libgoldminer.a" 2>/dev/null | grep -q ' U cudaHostRegister$'; then
	cuda=${CUDA_HOME:-/usr/local/cuda}
	cudalibs="-L$cuda/lib64 -Wl,-rpath,$cuda/lib64 -lcudart"
fi
libs=$(pkg-config --libs liburing libjpeg 2>/dev/null || echo -luring -ljpeg)
if [ ! -s "$tmp/example.c" ]; then
	t 1 "the C example: no marked C block in $readme"
	t 1 "the C example runs: no marked C block"
else
	# shellcheck disable=SC2086 # san, libs and cudalibs are lists of compiler words
	${CC:-cc} -std=c11 -Wall -Wextra -Werror $san -I"$repo/include" -o "$tmp/example" \
		"$tmp/example.c" "$B/libgoldminer.a" $libs -lm -pthread $cudalibs >"$tmp/cc.log" 2>&1
	rc=$?
	t $rc "the C example compiles (-Wall -Wextra -Werror) and links with $B/libgoldminer.a"
	[ $rc = 0 ] || diag "$tmp/cc.log"
	mkdir -p "$tmp/run"
	"$B/goldminer" synth "$tmp/run/data/train" --images 64 >"$tmp/synth.log" 2>&1 ||
		diag "$tmp/synth.log"
	if [ $rc != 0 ]; then
		t 1 "the C example runs: it did not build"
	else
		out=$(cd "$tmp/run" && ASAN_OPTIONS=detect_leaks=0 timeout "$limit" "$tmp/example" 2>"$tmp/c.err")
		rc=$?
		t "$([ $rc = 0 ] && [ "$out" = "64 images" ]; echo $?)" \
			"the C example on 64 synthetic images: exit $rc, prints \"$out\" (want \"64 images\")"
		[ $rc = 0 ] || diag "$tmp/c.err"
	fi
fi

# ---- 4: the Python example
py=/usr/bin/python3
pre="" # a sanitizer build's library needs libasan first in the interpreter
if [ -n "$san" ]; then
	pre=$(${CC:-cc} -print-file-name=libasan.so 2>/dev/null)
fi
if [ ! -x "$py" ]; then
	skip "the Python example: no $py"
elif [ ! -s "$tmp/example.python" ]; then
	t 1 "the Python example: no marked Python block in $readme"
else
	out=$(cd "$tmp/run" && PYTHONPATH=$repo/python GOLDMINER_LIB=$B/libgoldminer.so \
		LD_PRELOAD=$pre ASAN_OPTIONS=detect_leaks=0:alloc_dealloc_mismatch=0 \
		timeout "$limit" "$py" -B "$tmp/example.python" 2>"$tmp/py.err")
	rc=$?
	want=$(printf '%s\n%s' "(32, 224, 224, 3) 32" "(32, 224, 224, 3) 32")
	numpy=$("$py" -c 'import numpy' 2>/dev/null && echo "with NumPy" || echo "without NumPy")
	t "$([ $rc = 0 ] && [ "$out" = "$want" ]; echo $?)" \
		"the Python example ($numpy): exit $rc, prints $(printf '%s' "$out" | tr '\n' '|')"
	[ $rc = 0 ] || diag "$tmp/py.err"
fi

# ---- 5: DESIGN's Layout section names every file of core/ sim/ cmd/
awk '/^## / { in_layout = ($0 ~ /^## [0-9.]* *Layout/) } in_layout' "$design" >"$tmp/layout"
missing=""
for f in $(cd "$repo" && find core sim cmd -type f | sort); do
	# the path as a whole word: "core/aug.c" is not named by "core/aug.c.in"; a
	# header may be named by its file name beside its module ("(conn.h)")
	re=$(printf '%s' "$f" | sed 's/\./\\./g')
	case $f in *.h) re="\($re\|$(basename "$re")\)" ;; esac
	grep -q "\(^\|[^a-z0-9_/]\)$re\([^a-z0-9_]\|$\)" "$tmp/layout" || missing="$missing $f"
done
t "$([ -s "$tmp/layout" ] && [ -z "$missing" ]; echo $?)" \
	"DESIGN's Layout names every file of core/ sim/ cmd/${missing:+ (missing:$missing)}"

# ---- 6: the DataLoader example
if [ ! -x "$py" ] || ! "$py" -c 'import torch' 2>/dev/null; then
	skip "the DataLoader example: no torch in $py (apt-get install python3-torch)"
elif [ ! -s "$tmp/example2.python" ]; then
	t 1 "the DataLoader example: no second marked Python block in $readme"
else
	out=$(cd "$tmp/run" && PYTHONPATH=$repo/python GOLDMINER_LIB=$B/libgoldminer.so \
		LD_PRELOAD=$pre ASAN_OPTIONS=detect_leaks=0:alloc_dealloc_mismatch=0 \
		timeout "$limit" "$py" -B "$tmp/example2.python" 2>"$tmp/dl.err")
	rc=$?
	want=$(printf '(32, 3, 8, 8) 32\n%.0s' 1 2 3 4)
	t "$([ $rc = 0 ] && [ "$out" = "$want" ]; echo $?)" \
		"the DataLoader example: exit $rc, prints $(printf '%s' "$out" | tr '\n' '|') (want 4 x (32, 3, 8, 8) 32)"
	[ $rc = 0 ] || diag "$tmp/dl.err"
fi

# ---- 7: the goldminer run example: goldminer and python3 as the README means them
if [ ! -x "$py" ] || ! "$py" -c 'import torch, torchvision' 2>/dev/null; then
	skip "the goldminer run example: no torch or torchvision in $py (apt-get install python3-torchvision)"
elif [ ! -s "$tmp/example.sh" ]; then
	t 1 "the goldminer run example: no marked sh block in $readme"
else
	mkdir -p "$tmp/bin"
	ln -s "$B/goldminer" "$tmp/bin/goldminer"
	ln -s "$py" "$tmp/bin/python3"
	ln -s "$repo/examples" "$tmp/run/examples"
	(cd "$tmp/run" && PATH=$tmp/bin:$PATH LD_PRELOAD=$pre \
		ASAN_OPTIONS=detect_leaks=0:alloc_dealloc_mismatch=0 \
		timeout "$limit" sh "$tmp/example.sh" >"$tmp/run.out" 2>"$tmp/run.err")
	rc=$?
	# the script's lines, and goldminer run's one line per loader (train, eval)
	own=$(grep -c '^epoch 0: \|^eval: [0-9]*/[0-9]* correct' "$tmp/run.out")
	served=$(grep -c '^goldminer run: train_torchvision\.py:[0-9]*: C path \[.*\]: 64 images in ' "$tmp/run.err")
	t "$([ $rc = 0 ] && [ "$own" = 2 ] && [ "$served" = 2 ]; echo $?)" \
		"the goldminer run example: exit $rc, $own of the script's 2 lines, $served of 2 loaders served on the C path"
	if [ $rc != 0 ] || [ "$served" != 2 ]; then
		diag "$tmp/run.out"
		diag "$tmp/run.err"
	fi
fi

# ---- 8: each headline figure is in the section its link lands on
if ! command -v python3 >/dev/null 2>&1; then
	skip "the headlines' figures: no python3"
else
	python3 "$here/readme_figures.py" "$readme" >"$tmp/figures.log" 2>&1
	rc=$?
	t $rc "the headlines' figures are in the sections their links land on"
	[ $rc = 0 ] || diag "$tmp/figures.log"
fi

# ---- 9: the README's length
lines=$(wc -l <"$readme")
t "$([ "$lines" -le 300 ]; echo $?)" "README is $lines lines (at most 300)"

echo "1..$n"
[ "$fails" = 0 ]
