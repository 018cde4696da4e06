#!/bin/sh
# WebDataset tar shards against the ImageFolder tree they were packed from, in this
# one run on $PHOTOS: `goldminer pack` (time), then goldminer bench on each, 2 workers,
# uint8, alternating ROUNDS times (medians compared), with --checksum: the two must deliver
# the same bytes. Prints images/s, the read stage per image, and shards / tree.
set -u
B=${B:-build}
: "${PHOTOS:?PHOTOS must name an ImageFolder directory}"
EPOCHS=${EPOCHS:-3}
ROUNDS=${ROUNDS:-5}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT INT TERM
echo "-- goldminer pack $PHOTOS (500 samples a shard)"
"$B/goldminer" pack "$PHOTOS" "$out/wds" --per-shard 500 || exit 1
r=1
while [ "$r" -le "$ROUNDS" ]; do
	for kind in tree wds; do
		d=$PHOTOS
		[ $kind = wds ] && d=$out/wds
		"$B/goldminer" bench "$d" --workers 2 --batch 64 --epochs "$EPOCHS" --checksum \
			--quiet 2>/dev/null | tail -1 >>"$out/$kind.json" || exit 1
	done
	r=$((r + 1))
done
python3 - "$out" <<'PY'
import json, os, sys
d = sys.argv[1]
def rows(k):
    return [json.loads(l) for l in open(os.path.join(d, k + ".json")) if l.startswith("{")]
t, w = rows("tree"), rows("wds")
def med(rs):
    v = sorted(r["img_per_s"] for r in rs)
    return (v[(len(v) - 1) // 2] + v[len(v) // 2]) / 2
print("== summary: shards vs ImageFolder (same run, 2 workers, uint8, %d alternating runs each)"
      % len(t))
for name, rs in (("ImageFolder", t), ("tar shards", w)):
    print("%-12s median %8.1f img/s   read %5.1f us/img   (runs: %s)" % (
        name, med(rs), sorted(r["stage_us_per_img"]["read"] for r in rs)[len(rs) // 2],
        ", ".join("%.1f" % r["img_per_s"] for r in rs)))
print("shards / ImageFolder = %.3f (medians)" % (med(w) / med(t)))
same = all(r["checksum"] == t[0]["checksum"] for r in t + w)
print("checksums %s" % ("identical" if same else "DIFFER"))
sys.exit(0 if same else 1)
PY
