#!/bin/sh
# Any map-style dataset, all in this one run, 2 workers each:
# goldminer.torch.DataLoader against torch.utils.data.DataLoader with the same
# arguments, on a text dataset (read, tokenize and pad the licences Debian ships)
# and on torchvision's ImageFolder over $PHOTOS with ColorJitter + ToTensor
# (tests/bench/pydataset_bench.py says how each figure is taken). Targets:
# goldminer >= 0.95x torch's samples/s with 2 workers, >= 1.0x with
# num_workers="auto" through a node agent (goldminer node --cpus 2: the same CPUs),
# medians of ROUNDS rounds, each interleaving the loaders' timed epochs one by one
# in alternating order, with the CPU time per sample of the workers and the
# trainer, the cores each loader got and the highest load average (the machine
# may be shared: there the cores a loader gets are the scheduler's to give, and
# "per CPU second" is the figure a loaded machine does not move);
# with a worker SIGKILLed every 200 ms goldminer completes with its undisturbed
# checksum (torch's DataLoader stops: what it raised is printed); memory of the
# trainer and the workers beside torch's. MISSED marks a target not held.
# Env: B (build dir), PHOTOS (ImageFolder), GM_PYTHON (default /usr/bin/python3),
# EPOCHS (default 3; text: TEXT_EPOCHS, default 6), ROUNDS (default 3), LIMIT (images, default 600).
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$(dirname "$here")")
B=${B:-build}
case $B in /*) ;; *) B=$repo/$B ;; esac
PY=${GM_PYTHON:-/usr/bin/python3}
if ! "$PY" -c 'import torch' 2>/dev/null; then
	echo "-- SKIP: $PY cannot import torch (apt-get install python3-torch)"
	exit 0
fi
export GOLDMINER_LIB="$B/libgoldminer.so"
out=$(mktemp)
trap 'rm -f "$out"' EXIT INT TERM
fail=0
"$PY" -B "$here/pydataset_bench.py" text --epochs "${TEXT_EPOCHS:-${EPOCHS:-6}}" --rounds "${ROUNDS:-3}" \
	| tee -a "$out" || fail=1
if "$PY" -c 'import torchvision' 2>/dev/null && [ -d "${PHOTOS:-}" ]; then
	"$PY" -B "$here/pydataset_bench.py" images --root "$PHOTOS" --epochs "${EPOCHS:-3}" \
		--rounds "${ROUNDS:-3}" --limit "${LIMIT:-600}" | tee -a "$out" || fail=1
else
	echo "-- images: skipped (no torchvision, or PHOTOS is not a directory)"
fi
"$PY" - "$out" <<'PY' || fail=1
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
bad = 0
cores = {(r["kind"], r["loader"], r["workers"]): r["cpu_share"] for r in rows
         if r["what"] == "rate"}
print("== summary: any map-style dataset (same run, 2 workers)")
for r in rows:
    if r["what"] == "rate" and r["loader"] == "goldminer":
        want = 1.0 if r["workers"] == "auto" else 0.95
        ok = r["vs_torch"] >= want
        bad += not ok
        print("%-6s goldminer workers=%-4s %9.1f samples/s = %.3fx torch (median of %s;"
              " target >= %.2f) %s; per CPU second %.3fx torch; got %.2f cores;"
              " cpu/sample workers %.1f us, trainer %.1f us; load <= %.1f"
              % (r["kind"], r["workers"], r["samples_per_s"], r["vs_torch"],
                 r["vs_torch_rounds"], want, "ok" if ok else "MISSED",
                 r["vs_torch_per_cpu"], r["cpu_share"], r["workers_cpu_us_per_sample"],
                 r["trainer_cpu_us_per_sample"], r["load_max"]))
        if not ok and r["cpu_share"] < cores.get((r["kind"], "torch", "2"), 0):
            print("       (it got fewer cores than torch's from a loaded machine, per CPU"
                  " second %.3fx: docs/MEASUREMENTS.md, session 11, says why)"
                  % r["vs_torch_per_cpu"])
    elif r["what"] == "rate":
        print("%-6s torch DataLoader        %9.1f samples/s (median); got %.2f cores;"
              " cpu/sample workers %.1f us, trainer %.1f us; load <= %.1f"
              % (r["kind"], r["samples_per_s"], r["cpu_share"],
                 r["workers_cpu_us_per_sample"], r["trainer_cpu_us_per_sample"],
                 r["load_max"]))
    elif r["what"] == "kill" and r["loader"] == "goldminer":
        ok = r.get("completed") and r.get("same_checksum")
        bad += not ok
        print("%-6s goldminer, SIGKILL every 200 ms: %s (%d kills) %s"
              % (r["kind"], "same checksum" if ok else r.get("stopped_with", "other bytes"),
                 r["kills"], "ok" if ok else "MISSED"))
    elif r["what"] == "kill":
        print("%-6s torch, SIGKILL every 200 ms: %s (%d kills)"
              % (r["kind"], "completed" if r.get("completed") else
                 "stopped: " + r.get("stopped_with", "?"), r["kills"]))
    elif r["what"] == "memory":
        print("%-6s memory %-9s trainer RSS %6.1f MB PSS %6.1f MB; %d processes (2 workers"
              "%s) RSS %6.1f MB PSS %6.1f MB; all PSS %6.1f MB; one worker's own %5.1f MB"
              % (r["kind"], r["loader"], r.get("trainer_rss_mb", 0),
                 r.get("trainer_pss_mb", 0), r.get("processes", 0),
                 " and the zygote" if r["loader"] == "goldminer" else "",
                 r.get("workers_rss_mb", 0), r.get("workers_pss_mb", 0),
                 r.get("total_pss_mb", 0), r.get("worker_uss_mb", 0)))
sys.exit(1 if bad else 0)
PY
exit $fail
