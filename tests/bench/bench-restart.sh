#!/bin/sh
# Restart-marked JPEGs against the originals, in this one run on $PHOTOS:
#   - goldminer pack --restart --tree (and into shards): time, bytes, images kept
#   - the 1-core decode reference (full and crop-window decode) on both trees, on
#     the originals again after the runs (the ratio takes the mean of the two)
#   - goldminer bench, 2 workers, uint8 and float32, alternating ROUNDS times over
#     the original tree, the restart-marked tree, the restart-marked shards, and the
#     restart-marked tree with GM_NO_SPLICE=1 (transcode without the splice), the
#     shards with GM_NO_RANGE=1 (whole members read, not the crop's rows), and the
#     original tree with GM_LIBJPEG_HUFFMAN=1 (libjpeg's Huffman decoder instead of
#     core/huff.c's);
#     medians of img/s, of the decode and augment stages (us/img), of the
#     bytes read per image and of the time the workers sat preempted on a run
#     queue (a busy machine shows there); the timed runs do not hash; then
#     CHECK_EPOCHS (20) epochs of each kind and of uint8, float16 and float32 with
#     --checksum: 20 random crops of every photo, and every kind must deliver the
#     same bytes (eval mode checked too)
#   - tests/bench/torch_loader.py (PyTorch DataLoader) on the restart-marked tree,
#     ROUNDS times each output type (the median counts)
# Ratios: restart-marked / original (target >= 1.15x), each / 2 x the 1-core
# crop-window decode rate of the originals (target >= 0.9; the reference is
# libjpeg-turbo's own decode, crop_decode_gm beside it is goldminer's), goldminer /
# DataLoader on the same files (target >= 5x).
set -u
B=${B:-build}
: "${PHOTOS:?PHOTOS must name an ImageFolder directory}"
EPOCHS=${EPOCHS:-2}
ROUNDS=${ROUNDS:-3}
CHECK_EPOCHS=${CHECK_EPOCHS:-20}
TORCH=tests/bench/torch_loader.py
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT INT TERM
echo "-- goldminer pack --restart --tree $PHOTOS"
"$B/goldminer" pack --restart --tree "$PHOTOS" "$out/rst" | tee "$out/pack.txt" || exit 1
echo "-- goldminer pack --restart $PHOTOS (500 samples a shard)"
"$B/goldminer" pack --restart --per-shard 500 "$PHOTOS" "$out/rstwds" || exit 1
for k in orig rst; do
	d=$PHOTOS
	[ $k = rst ] && d=$out/rst
	echo "-- 1-core decode reference on $k ($B/bench/decode_ref)"
	"$B/bench/decode_ref" "$d" 2>/dev/null | tee "$out/ref_$k.json" || exit 1
done
# one run of goldminer bench on kind $1, output $2, $3 epochs, more options after
run_kind() {
	k=$1 t=$2 e=$3
	shift 3
	d=$out/rst
	[ "$k" = orig ] || [ "$k" = libjpeg ] && d=$PHOTOS
	[ "$k" = wds ] || [ "$k" = wdswhole ] && d=$out/rstwds
	ns=0 nr=0 lh=0
	[ "$k" = nosplice ] && ns=1
	[ "$k" = wdswhole ] && nr=1
	[ "$k" = libjpeg ] && lh=1
	GM_NO_SPLICE=$ns GM_NO_RANGE=$nr GM_LIBJPEG_HUFFMAN=$lh "$B/goldminer" bench "$d" --workers 2 --batch 64 \
		--epochs "$e" --output "$t" --quiet "$@" 2>/dev/null | tail -1
}
# The timed runs do not hash (the trainer's process would take CPU from the
# workers); one more run of each kind and output type hashes the batches.
r=1
while [ "$r" -le "$ROUNDS" ]; do
	for t in uint8 float32; do
		for k in orig rst wds wdswhole nosplice libjpeg; do
			run_kind "$k" "$t" "$EPOCHS" >>"$out/${k}_$t.json" || exit 1
		done
	done
	r=$((r + 1))
done
# The proof of exactness on the photo set: CHECK_EPOCHS epochs (20 random crops of
# every photo) of each kind and output type, hashed per epoch.
echo "-- checksums: $CHECK_EPOCHS epochs of every kind, uint8, float16 and float32"
for t in uint8 float16 float32; do
	for k in orig rst wds wdswhole nosplice libjpeg; do
		run_kind "$k" "$t" "$CHECK_EPOCHS" --checksum >>"$out/${k}_${t}_sum.json" || exit 1
	done
done
echo "-- 1-core decode reference on orig again ($B/bench/decode_ref)"
"$B/bench/decode_ref" "$PHOTOS" 2>/dev/null | tee "$out/ref_orig2.json" || exit 1
for k in orig rst; do
	d=$PHOTOS
	[ $k = rst ] && d=$out/rst
	"$B/goldminer" bench "$d" --workers 2 --eval --checksum --quiet 2>/dev/null |
		tail -1 >"$out/eval_$k.json" || exit 1
done
have_torch=0
if [ -f "$TORCH" ] && /usr/bin/python3 -c 'import torch, torchvision' 2>/dev/null; then
	have_torch=1
	r=1
	while [ "$r" -le "$ROUNDS" ]; do # as many runs as goldminer's; the median counts
		for t in uint8 float32; do
			flag=
			[ $t = uint8 ] && flag=--uint8
			echo "-- torch DataLoader on the restart-marked tree (2 workers, $t, run $r)"
			/usr/bin/python3 "$TORCH" "$out/rst" --workers 2 --batch 64 --epochs "$EPOCHS" \
				$flag | tee -a "$out/torch_$t.json"
		done
		r=$((r + 1))
	done
else
	echo "-- torch DataLoader: skipped (no $TORCH or no torch for /usr/bin/python3)"
fi
python3 - "$out" "$have_torch" <<'PY'
import json, os, sys
d, have_torch = sys.argv[1], sys.argv[2] == "1"
def last(name):
    with open(os.path.join(d, name)) as f:
        return json.loads(f.read().strip().splitlines()[-1])
def rows(name):
    return [json.loads(l) for l in open(os.path.join(d, name)) if l.startswith("{")]
def med(v):
    v = sorted(v)
    return (v[(len(v) - 1) // 2] + v[len(v) // 2]) / 2
ro, rr, ro2 = last("ref_orig.json"), last("ref_rst.json"), last("ref_orig2.json")
crop = (ro["crop_decode_img_per_s"] + ro2["crop_decode_img_per_s"]) / 2
print("== summary: restart-marked vs original files (same run, 2 workers)")
print(open(os.path.join(d, "pack.txt")).read().strip())
print("1-core crop-window decode (libjpeg-turbo): original %.1f img/s (mean of %.1f before and "
      "%.1f after the runs), restart-marked %.1f img/s (%.2fx); full decode %.1f vs %.1f"
      % (crop, ro["crop_decode_img_per_s"], ro2["crop_decode_img_per_s"], rr["crop_decode_img_per_s"],
      rr["crop_decode_img_per_s"] / crop, ro["full_decode_img_per_s"], rr["full_decode_img_per_s"]))
cgm = (ro["crop_decode_gm_img_per_s"] + ro2["crop_decode_gm_img_per_s"]) / 2
print("1-core crop-window decode with goldminer's Huffman decoder: original %.1f img/s (%.2fx "
      "libjpeg-turbo's), restart-marked %.1f (%.2fx)"
      % (cgm, cgm / crop, rr["crop_decode_gm_img_per_s"],
         rr["crop_decode_gm_img_per_s"] / rr["crop_decode_img_per_s"]))
ok = True
names = {"orig": "original tree", "rst": "restart tree", "wds": "restart shards",
         "wdswhole": "shards, whole reads", "nosplice": "restart, no splice",
         "libjpeg": "orig, libjpeg Huffman"}
for t in ("uint8", "float32"):
    base = None
    for k in ("orig", "rst", "wds", "wdswhole", "nosplice", "libjpeg"):
        rs = rows("%s_%s.json" % (k, t))
        ips = med([r["img_per_s"] for r in rs])
        dec = med([r["stage_us_per_img"]["decode"] for r in rs])
        aug = med([r["stage_us_per_img"]["augment"] for r in rs])
        kb = med([r.get("read_bytes", 0) / r["images"] / 1e3 for r in rs])
        pre = med([r["stage_us_per_img"].get("preempted", 0) for r in rs])
        base = base or ips
        print("%-8s %-19s median %8.1f img/s  %5.2fx original  %4.2f of 2 x crop decode  "
              "decode %5.1f  augment %5.1f  preempted %5.1f us/img  read %5.1f KB/img"
              % (t, names[k], ips, ips / base, ips / (2 * crop), dec, aug, pre, kb))
        sums = {tuple(r["checksum"]) for r in rows("%s_%s_sum.json" % (k, t))}
        ok = ok and len(sums) == 1
        if k == "orig":
            ref = sums
        ok = ok and sums == ref
    if have_torch:
        p = med([r["img_per_s"] for r in rows("torch_%s.json" % t)])
        g = med([r["img_per_s"] for r in rows("rst_%s.json" % t)])
        print("%-8s torch DataLoader on the restart tree median %8.1f img/s   goldminer/torch = %.2fx"
              % (t, p, g / p))
f16 = [{tuple(r["checksum"]) for r in rows("%s_float16_sum.json" % k)}
       for k in ("orig", "rst", "wds", "wdswhole", "nosplice", "libjpeg")]
ok = ok and all(len(x) == 1 and x == f16[0] for x in f16)
ev = last("eval_orig.json")["checksum"] == last("eval_rst.json")["checksum"]
ok = ok and ev
n_ep = len(rows("orig_uint8_sum.json")[0]["checksum"])
print("checksums %s (train, %d epochs = %d random crops of every photo, uint8/float16/float32, "
      "every kind; eval original vs restart)" % ("identical" if ok else "DIFFER", n_ep, n_ep))
sys.exit(0 if ok else 1)
PY
