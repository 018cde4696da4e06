#!/bin/sh
# Python binding and PyTorch adapter tests (tests/python/), TAP on stdout.
# Debian's /usr/bin/python3 carries python3-torch/numpy; a python3 earlier on PATH
# may not. Tests needing torch/numpy/the library report SKIP with the reason.
# Env: B = build directory holding libgoldminer.so (default build); GM_PYTEST_ONLY
# = globs of the tests to run (tap.py), e.g. "*fork*".
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
py=${GM_PYTHON:-/usr/bin/python3}
if [ ! -x "$py" ]; then
	py=$(command -v python3)
fi
if [ -z "$py" ]; then
	echo "not ok 1 # SKIP python: no python3 interpreter"
	exit 0
fi
B=${B:-build}
case $B in /*) ;; *) B=$repo/$B ;; esac
export B
export GOLDMINER_LIB="${GOLDMINER_LIB:-$B/libgoldminer.so}"
# A sanitizer build (make sanitize) cannot be dlopen()ed by an uninstrumented
# python: the ASan runtime must come first, so preload it (Python's own allocations
# at exit are not ours to report: no leak check; the library is still checked).
# handle_segv=0: the DataLoader tests crash Python workers on purpose (a segfault
# in C code, as ctypes.string_at(0) makes), and the pool must see a worker killed
# by SIGSEGV, not one that ASan's handler reported and exited 1.
# GM_SANITIZER=address: tap.py then skips, each saying why, the tests that drive
# no C code that another test run under ASan does not (its SANITIZER_SKIP: pure
# Python, or a C path run under ASan elsewhere); torch under ASan made this
# script 334 s of make sanitize's 518 on CI's machine. make test runs them all.
if [ -f "$GOLDMINER_LIB" ] && readelf -d "$GOLDMINER_LIB" 2>/dev/null | grep -q 'libasan'; then
	asan=$(${CC:-cc} -print-file-name=libasan.so 2>/dev/null)
	if [ -f "$asan" ]; then
		export LD_PRELOAD="$asan${LD_PRELOAD:+ $LD_PRELOAD}"
		export ASAN_OPTIONS="detect_leaks=0:alloc_dealloc_mismatch=0:handle_segv=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
		export GM_SANITIZER=address
	fi
fi
# without modules named: all but those tests/test_python_dataloader.sh runs
# (GM_PY_PART=rest; tap.py's PARTS), unless GM_PY_PART says otherwise
[ $# = 0 ] && export GM_PY_PART="${GM_PY_PART:-rest}"
cd "$repo" && exec "$py" -B tests/python/tap.py "$@"
