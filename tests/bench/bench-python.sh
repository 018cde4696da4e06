#!/bin/sh
# The Python path against its peers, all in this one run on $PHOTOS, 2 workers,
# batch 64, RandomResizedCrop 224 + flip, for uint8 and float32 output:
#   - goldminer.torch.Loader (python/goldminer, ctypes over $B/libgoldminer.so)
#   - the C consumer: $B/goldminer bench
#   - torch.utils.data.DataLoader: tests/bench/torch_loader.py (--uint8 for uint8)
# C and Python runs alternate ROUNDS times (best of each kept) so that drift of a
# shared machine hits both alike. Targets: Python >= 0.95 x C, Python >= 5x DataLoader.
# Env: B (build dir), PHOTOS (ImageFolder; without it a synthetic set is made with
# $B/goldminer synth), EPOCHS (default 3), ROUNDS (default 3).
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$(dirname "$here")")
B=${B:-build}
case $B in /*) ;; *) B=$repo/$B ;; esac
EPOCHS=${EPOCHS:-3}
ROUNDS=${ROUNDS:-3}
PY=${GM_PYTHON:-/usr/bin/python3}
TORCH=$repo/tests/bench/torch_loader.py
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT INT TERM

if [ -z "${PHOTOS:-}" ]; then
	PHOTOS=$out/synth
	echo "-- PHOTOS not set: synthetic set of 2000 images ($B/goldminer synth)"
	"$B/goldminer" synth "$PHOTOS" --images 2000 >/dev/null || exit 1
fi
if ! "$PY" -c 'import torch' 2>/dev/null; then
	echo "-- $PY cannot import torch: the Python path runs as plain goldminer.Loader and"
	echo "   DataLoader is skipped"
fi
export GOLDMINER_LIB="$B/libgoldminer.so"
export PYTHONPATH="$repo/python${PYTHONPATH:+:$PYTHONPATH}"

fail=0
for t in uint8 float32; do
	r=1
	while [ "$r" -le "$ROUNDS" ]; do
		echo "-- [$t, round $r] C: goldminer bench --workers 2 --batch 64 --epochs $EPOCHS"
		"$B/goldminer" bench "$PHOTOS" --workers 2 --batch 64 --epochs "$EPOCHS" \
			--output $t --quiet 2>/dev/null | tee -a "$out/c_$t.json" || fail=1
		echo "-- [$t, round $r] Python: goldminer.torch.Loader (python3 -m goldminer.tools.bench)"
		"$PY" -B -m goldminer.tools.bench "$PHOTOS" --workers 2 --batch 64 --epochs "$EPOCHS" \
			--output $t 2>/dev/null | tee -a "$out/py_$t.json" || fail=1
		r=$((r + 1))
	done
	if [ -f "$TORCH" ] && "$PY" -c 'import torch, torchvision' 2>/dev/null; then
		flag=""
		[ $t = uint8 ] && flag=--uint8
		echo "-- [$t] torch DataLoader, 2 workers ($TORCH $flag)"
		"$PY" "$TORCH" "$PHOTOS" --workers 2 --batch 64 --epochs "$EPOCHS" $flag \
			2>/dev/null | tee "$out/torch_$t.json" || fail=1
	else
		echo "-- [$t] torch DataLoader: skipped (no $TORCH or no torch/torchvision)"
	fi
done

"$PY" - "$out" <<'PY'
import json, os, sys
d = sys.argv[1]
def rows(name):
    p = os.path.join(d, name)
    if not os.path.exists(p):
        return []
    return [json.loads(l) for l in open(p) if l.strip().startswith("{")]
def rates(name):
    return [r["img_per_s"] for r in rows(name)]
print("== summary: Python path (same run, 2 workers, batch 64)")
for t in ("uint8", "float32"):
    c, py, tv = rates("c_%s.json" % t), rates("py_%s.json" % t), rates("torch_%s.json" % t)
    if not c or not py:
        print("%-8s missing figures (C %s, Python %s)" % (t, c, py))
        continue
    cb, pb = max(c), max(py)
    r = pb / cb
    print("%-8s C consumer      %9.1f img/s   (runs: %s)" % (t, cb, ", ".join("%.1f" % x for x in c)))
    print("%-8s Python (torch)  %9.1f img/s   (runs: %s)" % (t, pb, ", ".join("%.1f" % x for x in py)))
    print("%-8s Python / C = %.3f   loss %.1f%% (target < 5%%) %s"
          % (t, r, 100 * (1 - r), "ok" if r >= 0.95 else "MISSED"))
    share = sorted(r.get("consumer_cpu_share") or 0 for r in rows("py_%s.json" % t))
    us = sorted(r.get("consumer_cpu_us_per_img") or 0 for r in rows("py_%s.json" % t))
    if share:
        print("%-8s Python consumer CPU %.1f us/img = %.2f%% of the workers' CPU per image"
              " (median; the load-independent cost of the Python path)"
              % (t, us[len(us) // 2], 100 * share[len(share) // 2]))
    if tv:
        print("%-8s DataLoader      %9.1f img/s" % (t, tv[0]))
        print("%-8s Python / DataLoader = %.2fx (target >= 5x) %s"
              % (t, pb / tv[0], "ok" if pb >= 5 * tv[0] else "MISSED"))
PY
exit $fail
