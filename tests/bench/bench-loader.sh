#!/bin/sh
# Node data plane vs its peers, all in this one run on $PHOTOS:
#   - 1-core decode-only reference (libjpeg-turbo full decode, crop-window decode)
#   - goldminer bench, 2 workers, uint8 and float32
#   - tests/bench/torch_loader.py (PyTorch DataLoader), 2 workers, uint8, float32
# Prints every figure and the ratios (targets: >= 5x DataLoader; >= 0.65 of 2 x the
# 1-core crop-window decode rate).
set -u
B=${B:-build}
: "${PHOTOS:?PHOTOS must name an ImageFolder directory}"
EPOCHS=${EPOCHS:-3}
TORCH=tests/bench/torch_loader.py
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

echo "-- 1-core decode reference ($B/bench/decode_ref)"
"$B/bench/decode_ref" "$PHOTOS" | tee "$out/ref.json"
for t in uint8 float32; do
	echo "-- goldminer bench --workers 2 --batch 64 --epochs $EPOCHS --output $t"
	"$B/goldminer" bench "$PHOTOS" --workers 2 --batch 64 --epochs "$EPOCHS" --output $t \
		--quiet | tee "$out/gm_$t.json"
done
have_torch=0
if [ -f "$TORCH" ] && /usr/bin/python3 -c 'import torch, torchvision' 2>/dev/null; then
	have_torch=1
	echo "-- torch DataLoader (2 workers, uint8)"
	/usr/bin/python3 "$TORCH" "$PHOTOS" --workers 2 --batch 64 --epochs "$EPOCHS" --uint8 |
		tee "$out/torch_uint8.json"
	echo "-- torch DataLoader (2 workers, float32)"
	/usr/bin/python3 "$TORCH" "$PHOTOS" --workers 2 --batch 64 --epochs "$EPOCHS" |
		tee "$out/torch_float32.json"
else
	echo "-- torch DataLoader: skipped (no $TORCH or no torch for /usr/bin/python3)"
fi
python3 - "$out" "$have_torch" <<'PY'
import json, sys, os
d, have_torch = sys.argv[1], sys.argv[2] == "1"
def j(name):
    with open(os.path.join(d, name)) as f:
        return json.loads(f.read().strip().splitlines()[-1])
ref = j("ref.json")
crop = ref["crop_decode_img_per_s"]
print("== summary (same run)")
print(f"1-core crop-window decode      {crop:10.1f} img/s   (full decode {ref['full_decode_img_per_s']:.1f})")
for t in ("uint8", "float32"):
    g = j(f"gm_{t}.json")["img_per_s"]
    line = f"goldminer 2 workers {t:8s}   {g:10.1f} img/s   {g / (2 * crop):5.2f} of 2 x crop decode (target >= 0.65)"
    print(line)
    if have_torch:
        p = j(f"torch_{t}.json")["img_per_s"]
        print(f"torch DataLoader 2 workers {t:8s}{p:9.1f} img/s   goldminer/torch = {g / p:5.2f}x (target >= 5x)")
PY
