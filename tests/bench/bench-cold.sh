#!/bin/sh
# Cold page cache, in this one run on $PHOTOS: the io_uring reader against the pread
# fallback (GM_READER=pread), for the ImageFolder tree and for tar shards packed from
# it, 2 workers, 1 epoch each, the page cache dropped before every run (needs root:
# skipped otherwise). Alternates ROUNDS times; prints medians and the ratios.
set -u
B=${B:-build}
: "${PHOTOS:?PHOTOS must name an ImageFolder directory}"
ROUNDS=${ROUNDS:-2}
drop() { sync && echo 3 >/proc/sys/vm/drop_caches 2>/dev/null; }
if ! drop; then
	echo "-- cold-cache reader bench skipped: cannot drop the page cache (needs root)"
	exit 0
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT INT TERM
"$B/goldminer" pack "$PHOTOS" "$out/wds" --per-shard 500 >/dev/null || exit 1
r=1
while [ "$r" -le "$ROUNDS" ]; do
	for kind in tree wds; do
		d=$PHOTOS
		[ $kind = wds ] && d=$out/wds
		for m in io_uring pread; do
			drop
			GM_READER=$m "$B/goldminer" bench "$d" --workers 2 --epochs 1 --quiet \
				2>/dev/null | tail -1 >>"$out/$kind-$m.json" || exit 1
		done
	done
	r=$((r + 1))
done
# warm the page cache again for the benchmarks that follow
find "$PHOTOS" -type f -exec cat {} + >/dev/null 2>&1
python3 - "$out" <<'PY'
import json, os, sys
d = sys.argv[1]
def med(k, f):
    v = sorted(f(json.loads(l)) for l in open(os.path.join(d, k + ".json")) if l.startswith("{"))
    return (v[(len(v) - 1) // 2] + v[len(v) // 2]) / 2
print("== summary: cold page cache, 2 workers, 1 epoch, medians")
for kind, name in (("tree", "ImageFolder"), ("wds", "tar shards")):
    ru, rp = med(kind + "-io_uring", lambda r: r["img_per_s"]), med(kind + "-pread", lambda r: r["img_per_s"])
    su = med(kind + "-io_uring", lambda r: r["stage_us_per_img"]["read"])
    sp = med(kind + "-pread", lambda r: r["stage_us_per_img"]["read"])
    print("%-12s io_uring %7.1f img/s (read %5.1f us/img)   pread %7.1f img/s (read %5.1f)   io_uring/pread = %.2f"
          % (name, ru, su, rp, sp, ru / rp))
PY
