#!/bin/sh
# README.md's examples are real, and its Layout names every module. TAP on stdout.
#   1 the marked examples are found: the README line
#     "<!-- tested by tests/test_readme.sh -->" stands before each tested fenced
#     block, one ```c and one ```python
#   2 the C example compiles against include/ and $B/libgoldminer.a, with the
#     libraries the Makefile links (liburing, libjpeg, -lm -pthread, and libcudart
#     when the library was built with CUDA)
#   3 run in a directory holding data/train (`goldminer synth data/train --images
#     64`, as the README says), it exits 0 and prints "64 images"
#   4 the Python example, run with /usr/bin/python3 and PYTHONPATH=python, prints
#     "(32, 224, 224, 3) 32" twice (two batches of 32): the same with NumPy (an
#     array) or without (a memoryview), so it needs no SKIP for NumPy
#   5 every .c file under core/ sim/ cmd/ is named, by its path from the
#     repository root, in README's "## Layout" section
# A sanitizer build (make sanitize) is linked with the sanitizers, and its Python
# run preloads libasan as tests/test_python.sh does.
# Env: B (build directory holding libgoldminer.a, .so and goldminer; default
# build), README (the file to check, default this repository's README.md).
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
B=${B:-build}
case $B in /*) ;; *) B=$repo/$B ;; esac
readme=${README:-$repo/README.md}
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

# ---- 1: the marked blocks, each into example.LANG
awk -v dir="$tmp" '
	/^<!-- tested by tests\/test_readme\.sh -->$/ { marked = 1; next }
	marked && /^```[a-z]+$/ { lang = substr($0, 4); out = dir "/example." lang;
		printf "" > out; inblock = 1; marked = 0; next }
	inblock && /^```$/ { inblock = 0; close(out); next }
	inblock { print > out; next }
	{ marked = 0 }' "$readme"
t "$([ -s "$tmp/example.c" ] && [ -s "$tmp/example.python" ]; echo $?)" \
	"README has a marked C example and a marked Python example"

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
		out=$(cd "$tmp/run" && ASAN_OPTIONS=detect_leaks=0 "$tmp/example" 2>"$tmp/c.err")
		rc=$?
		t "$([ $rc = 0 ] && [ "$out" = "64 images" ]; echo $?)" \
			"the C example on 64 synthetic images: exit $rc, prints \"$out\" (want \"64 images\")"
		[ $rc = 0 ] || diag "$tmp/c.err"
	fi
fi

# ---- 4: the Python example
py=/usr/bin/python3
if [ ! -x "$py" ]; then
	skip "the Python example: no $py"
elif [ ! -s "$tmp/example.python" ]; then
	t 1 "the Python example: no marked Python block in $readme"
else
	pre=""
	if [ -n "$san" ]; then
		pre=$(${CC:-cc} -print-file-name=libasan.so 2>/dev/null)
	fi
	out=$(cd "$tmp/run" && PYTHONPATH=$repo/python GOLDMINER_LIB=$B/libgoldminer.so \
		LD_PRELOAD=$pre ASAN_OPTIONS=detect_leaks=0:alloc_dealloc_mismatch=0 \
		"$py" -B "$tmp/example.python" 2>"$tmp/py.err")
	rc=$?
	want=$(printf '%s\n%s' "(32, 224, 224, 3) 32" "(32, 224, 224, 3) 32")
	numpy=$("$py" -c 'import numpy' 2>/dev/null && echo "with NumPy" || echo "without NumPy")
	t "$([ $rc = 0 ] && [ "$out" = "$want" ]; echo $?)" \
		"the Python example ($numpy): exit $rc, prints $(printf '%s' "$out" | tr '\n' '|')"
	[ $rc = 0 ] || diag "$tmp/py.err"
fi

# ---- 5: the Layout section names every .c of core/ sim/ cmd/
awk '/^## / { in_layout = ($0 ~ /^## Layout/) } in_layout' "$readme" >"$tmp/layout"
missing=""
for f in $(cd "$repo" && find core sim cmd -name '*.c' | sort); do
	# the path as a whole word: "core/aug.c" is not named by "core/aug.c.in"
	re=$(printf '%s' "$f" | sed 's/\./\\./g')
	grep -q "\(^\|[^a-z0-9_/]\)$re\([^a-z0-9_]\|$\)" "$tmp/layout" || missing="$missing $f"
done
t "$([ -s "$tmp/layout" ] && [ -z "$missing" ]; echo $?)" \
	"README's Layout names every .c of core/ sim/ cmd/${missing:+ (missing:$missing)}"

echo "1..$n"
[ "$fails" = 0 ]
