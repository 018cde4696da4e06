#!/bin/sh
# GPU check (issue 5, item 6): build with CUDA, verify the ring is registered
# (pinned), that device copies carry the ring's bytes, and host-to-device GB/s from
# the ring against pageable memory. Run on a machine with an NVIDIA GPU:
#     sh tests/gpu/check.sh
# Exit 0 ok, 1 failure, 77 skipped (no GPU or no toolkit here).
set -u
cd "$(dirname "$0")/../.." || exit 1
B=${B:-build-gpu}
PY=${GM_PYTHON:-/usr/bin/python3}
[ -x "$PY" ] || PY=python3
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q GPU; then
	echo "SKIP: no NVIDIA GPU here (nvidia-smi is missing or lists no GPU)"
	exit 77
fi
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
if [ ! -f "$CUDA_HOME/include/cuda_runtime_api.h" ]; then
	echo "SKIP: no CUDA toolkit at CUDA_HOME=$CUDA_HOME"
	exit 77
fi
make -s B="$B" CUDA=1 CUDA_HOME="$CUDA_HOME" "$B/libgoldminer.so" "$B/goldminer" || exit 1
data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT INT TERM
"$B/goldminer" synth "$data/set" --images 1024 --classes 8 >/dev/null || exit 1
# The C path too: every batch copied to the device, with the H2D rate.
"$B/goldminer" bench "$data/set" --workers 2 --epochs 1 --device-copy --quiet || exit 1
GOLDMINER_LIB="$B/libgoldminer.so" PYTHONPATH="python${PYTHONPATH:+:$PYTHONPATH}" \
	"$PY" -B -m goldminer.gpucheck "$data/set" "$@"
