#!/bin/sh
# GPU check: the GPU decode's same bytes and speed (tests/gpu/coef_check.c); build
# with CUDA, verify the ring is registered (pinned), that device
# copies carry the ring's bytes, host-to-device GB/s from the ring against pageable
# memory and a cudaMallocHost buffer, the torch device path, and how bench
# --device-copy scales with workers up to the core count. Run on a machine with an NVIDIA GPU:
#     sh tests/gpu/check.sh
# On a GPU machine with no package registry (no liburing/libjpeg headers there),
# build the bundle where the packages are (`make gpu-bundle`: build-gpu/ with the
# shared libraries it needs in build-gpu/lib) and bring build-gpu/ along: an existing
# bundle is used as it is.
# Exit 0 ok, 1 failure, 77 skipped (no GPU or no toolkit here).
set -u
cd "$(dirname "$0")/../.." || exit 1
B=${B:-build-gpu}
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q GPU; then
	echo "SKIP: no NVIDIA GPU here (nvidia-smi is missing or lists no GPU)"
	exit 77
fi
nvidia-smi -L
if [ -x "$B/goldminer" ] && [ -f "$B/libgoldminer.so" ] && [ -d "$B/lib" ]; then
	echo "# using the prebuilt bundle in $B (make gpu-bundle)"
	# The bundle's libraries find each other here too (libmicrohttpd's own
	# dependencies have no run path of their own).
	LD_LIBRARY_PATH="$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
	export LD_LIBRARY_PATH
else
	CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
	if [ ! -f "$CUDA_HOME/include/cuda_runtime_api.h" ]; then
		echo "SKIP: no CUDA toolkit at CUDA_HOME=$CUDA_HOME"
		exit 77
	fi
	make -s B="$B" CUDA=1 CUDA_HOME="$CUDA_HOME" "$B/libgoldminer.so" "$B/goldminer" \
		"$B/libgoldminer-cuda.so" || exit 1
fi
# Python: the first of GM_PYTHON, python3, /usr/bin/python3 whose torch sees CUDA;
# else the first that runs (the torch device="cuda" part is then skipped).
PY=""
for p in ${GM_PYTHON:-} python3 /usr/bin/python3; do
	command -v "$p" >/dev/null 2>&1 || continue
	[ -n "$PY" ] || PY=$p
	if "$p" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' \
		2>/dev/null; then
		PY=$p
		break
	fi
done
[ -n "$PY" ] || { echo "FAIL - no python3 here"; exit 1; }
echo "# python: $PY"
data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT INT TERM
# The GPU decode first (coef_check, built by make gpu-bundle / make coef-cuda):
# every sample's window rebuilt on the device from its coefficient slot must be
# the host path's bytes, the sample finished from it on the host and the sample
# finished on the device (resize, flip, jitter, layout there too) the CPU workers'
# (train, eval, uint8, float32, float16, jitter); then img/s of 4 workers, CPU path
# against GPU decode finishing on the device. Then the same through the consumer:
# goldminer.torch.Loader(device="cuda", gpu_decode=True), finished on the device by
# the plugin libgoldminer-cuda.so, must give gpu_decode=False's batches (uint8,
# float32, float16), and its img/s with 4 workers against the CPU path's
# (tests/gpu/torch_decode.py). The real photos where GM_PHOTOS names them, else
# 2000 synthetic images. Then the C consumer's the same way (bench --gpu-decode
# --device-copy against --device-copy).
# COEF_ONLY=1: stop after these (about 4 minutes of an 8-minute device budget).
[ -x "$B/cuda/coef_check" ] || make -s B="$B" coef-cuda || exit 1
photos=${GM_PHOTOS:-}
if [ -z "$photos" ] || [ ! -d "$photos" ]; then
	photos="$data/photos"
	"$B/goldminer" synth "$photos" --images 2000 --classes 10 >/dev/null || exit 1
fi
rc=0
if [ -x "$B/cuda/coef_check" ]; then
	timeout 300 "$B/cuda/coef_check" "$photos" 0 4 || rc=1
else
	echo "FAIL - no $B/cuda/coef_check: build the bundle with make gpu-bundle where nvcc is"
	rc=1
fi
if [ ! -f "$B/libgoldminer-cuda.so" ]; then
	echo "FAIL - no $B/libgoldminer-cuda.so (the GPU decode's plugin): make gpu-bundle where nvcc is"
	rc=1
elif "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
	GOLDMINER_LIB="$B/libgoldminer.so" PYTHONPATH="python${PYTHONPATH:+:$PYTHONPATH}" \
		timeout 180 "$PY" -B tests/gpu/torch_decode.py "$photos" 4 2 || rc=1
else
	echo "SKIP - the torch.Loader GPU decode check: $PY's torch sees no CUDA device"
fi
# The C consumer: bench --gpu-decode --device-copy finishes every batch on the
# device (gm_loader_finish_device, waited for), against the CPU path's batches
# copied there; 4 workers, train float32 224, one epoch each.
for mode in "" --gpu-decode; do
	echo "# bench --device-copy ${mode:-(CPU path)}, 4 workers, float32"
	timeout 120 "$B/goldminer" bench "$photos" --workers 4 --epochs 1 --output float32 \
		--device-copy $mode --quiet || rc=1
done
[ "${COEF_ONLY:-0}" = 1 ] && exit $rc
"$B/goldminer" synth "$data/set" --images 1024 --classes 8 >/dev/null || exit 1
# The C path too: every batch copied to the device, with the H2D rate.
for out in uint8 float16 float32; do
	"$B/goldminer" bench "$data/set" --workers 4 --epochs 1 --output $out --device-copy \
		--quiet || rc=1
done
GOLDMINER_LIB="$B/libgoldminer.so" PYTHONPATH="python${PYTHONPATH:+:$PYTHONPATH}" \
	"$PY" -B -m goldminer.tools.gpucheck "$data/set" "$@" || rc=$?

# How far the data plane scales on this host: bench --device-copy with 1, 2, 4, ...
# workers up to the core count (SCALE_WORKERS overrides), img/s and img/s per
# worker, every batch copied to the device. Target: per-worker rate at the most
# workers >= 85% of that at 1 worker (printed, not a failure of the check).
ncpu=$(nproc 2>/dev/null || echo 2)
if [ -z "${SCALE_WORKERS:-}" ]; then
	SCALE_WORKERS=1
	w=2
	while [ "$w" -le "$ncpu" ]; do
		SCALE_WORKERS="$SCALE_WORKERS $w"
		w=$((w * 2))
	done
fi
"$B/goldminer" synth "$data/scale" --images "${SCALE_IMAGES:-4096}" --classes 16 >/dev/null || exit 1
echo "# scaling: bench --device-copy, ${SCALE_IMAGES:-4096} synthetic images, $ncpu cores"
one=""
for w in $SCALE_WORKERS; do
	ep=$((w < 4 ? 1 : w / 2))
	"$B/goldminer" bench "$data/scale" --workers "$w" --epochs "$ep" --device-copy --quiet \
		>"$data/scale.json" || { rc=1; continue; }
	ips=$(sed -n 's/.*"img_per_s": *\([0-9.]*\).*/\1/p' "$data/scale.json")
	h2d=$(sed -n 's/.*"h2d_gb_per_s": *\([0-9.]*\).*/\1/p' "$data/scale.json")
	[ -n "$one" ] || one=$ips
	awk -v w="$w" -v r="$ips" -v one="$one" -v h="$h2d" -v ep="$ep" 'BEGIN {
		printf "scale workers=%d epochs=%d img_per_s=%.0f per_worker=%.0f efficiency=%.2f h2d_gb_per_s=%s\n",
			w, ep, r, r / w, (r / w) / one, h }'
	cat "$data/scale.json"
done
exit $rc
