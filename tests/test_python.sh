#!/bin/sh
# Python binding and PyTorch adapter tests (tests/python/), TAP on stdout.
# Debian's /usr/bin/python3 carries python3-torch/numpy; a python3 earlier on PATH
# may not. Tests needing torch/numpy/the library report SKIP with the reason.
# Env: B = build directory holding libgoldminer.so (default build).
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
cd "$repo" && exec "$py" -B tests/python/tap.py "$@"
