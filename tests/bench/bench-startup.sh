#!/bin/sh
# Start-up of a DataLoader's workers, goldminer.torch.DataLoader against torch's
# DataLoader with the same arguments, in this one run (tests/bench/startup_bench.py
# says how each figure is taken): ImageFolder over $PHOTOS (RandomResizedCrop, flip,
# ToTensor), 2 workers, batch 32, not persistent, each run a fresh interpreter.
# Targets (the median over ROUNDS of goldminer / torch of the same round):
#   first    the first batch, timed from the loader's build, the script building
#            its model in between as a training script does  <= 1.5x torch's
#            (on an idle machine: a loaded one starts interpreters slower)
#   epoch2   the first batch of a non-persistent loader's second epoch, from its
#            iter()                                            <= 1.2x torch's
# and, with no target, first_now: iter() right after the build. MISSED marks a
# target not held. Env: B (build dir), PHOTOS (ImageFolder; without it a synthetic
# set is made with $B/goldminer synth), GM_PYTHON (default /usr/bin/python3),
# ROUNDS (default 3), LIMIT (images, default 640).
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$(dirname "$here")")
B=${B:-build}
case $B in /*) ;; *) B=$repo/$B ;; esac
PY=${GM_PYTHON:-/usr/bin/python3}
if ! "$PY" -c 'import torch, torchvision' 2>/dev/null; then
	echo "-- SKIP: $PY cannot import torch and torchvision"
	exit 0
fi
export GOLDMINER_LIB="$B/libgoldminer.so"
export PYTHONPATH="$repo/python${PYTHONPATH:+:$PYTHONPATH}"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
trap 'exit 1' INT TERM
if [ -z "${PHOTOS:-}" ] || [ ! -d "$PHOTOS" ]; then
	PHOTOS=$out/synth
	echo "-- PHOTOS not set: synthetic set of ${LIMIT:-640} images ($B/goldminer synth)"
	"$B/goldminer" synth "$PHOTOS" --images "${LIMIT:-640}" >/dev/null || exit 1
fi
"$PY" -B "$here/startup_bench.py" --root "$PHOTOS" --rounds "${ROUNDS:-3}" \
	--limit "${LIMIT:-640}" >"$out/log"
rc=$?
cat "$out/log"
"$PY" - "$out/log" <<'PY' || rc=1
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
print("== summary: DataLoader start-up (same run, 2 workers, not persistent)")
for r in rows:
    want = r["target"]
    print("%-9s goldminer = %.3fx torch (median of %s; goldminer %s s, torch %s s)%s"
          % (r["what"], r["vs_torch"], r["vs_torch_rounds"], r["goldminer_s"], r["torch_s"],
             "" if want is None else "; target <= %.1fx %s" % (want, "ok" if r["ok"]
                                                              else "MISSED")))
sys.exit(0 if all(r["ok"] for r in rows) else 1)
PY
exit $rc
