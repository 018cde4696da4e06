#!/bin/sh
# goldminer run against plain python, the same script both sides, in this one run:
# examples/train_torchvision.py on $PHOTOS, 2 workers, batch 64, $EPOCHS epochs,
# --model none (the input pipeline alone), under `$B/goldminer run -- python3` and
# under plain `python3`. Three transforms, with the path goldminer must choose and
# the target (img/s, goldminer / torch, the script's own figure after batch 0):
#   plain        RandomResizedCrop, flip, ToTensor, Normalize      C path  >= 4x
#   jitter       ... ColorJitter(0.4, 0.4, 0.4) before ToTensor    C path  >= 1.5x
#   randaugment  ... RandAugment() before ToTensor                 hybrid  >= 1.3x
# and a model-bound case, the one where the model, not the data, sets the pace:
#   model        plain, --model mobilenet (torchvision's mobilenet_v3_small on
#                the CPU), $STEPS batches an epoch       C path  >= 1.0x, and
#                less CPU per image than torch (its ratio > 1.0)
# and, for plain, goldminer.torch.Loader with the same transform (python3 -m
# goldminer.tools.bench --output float32, its last epoch): goldminer run's C path within
# 5% of it (the run hands the script batches it owns: kept ring slots, no copy,
# unless it holds one across as many batches as the ring has slots).
# The figure of a run is its last epoch's (training is many epochs: the first
# holds goldminer's start of exec'd Python workers, which a fork does not pay).
# Each round runs every side once, in alternating order (goldminer first in odd
# rounds, last in even ones), and the figure is the median over ROUNDS of the
# per-round ratios (goldminer / torch of the same round), so that drift of a
# shared machine hits both sides alike; every run is printed with the load
# average at its start. Each run also reports the CPU time its process tree
# (trainer and workers) spent per image in that epoch (tests/bench/tree_cpu.py):
# the ratio of those moves far less with the machine's load than img/s does,
# and where it went by kind of thread, the trainer's page faults too (tree_cpu.py
# --threads: the profile of a run, the "threads:" lines). Env: B (build dir),
# PHOTOS (ImageFolder; without it a synthetic set is made with $B/goldminer
# synth), EPOCHS (default 2), ROUNDS (default 3), AUGS (the cases to run, default
# "plain jitter randaugment model"), STEPS (the model case's batches per epoch,
# default 8: about 2 s each on one core).
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$(dirname "$here")")
B=${B:-build}
case $B in /*) ;; *) B=$repo/$B ;; esac
EPOCHS=${EPOCHS:-2}
ROUNDS=${ROUNDS:-3}
PY=${GM_PYTHON:-/usr/bin/python3}
EX=$repo/examples/train_torchvision.py
CPU="$here/tree_cpu.py"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
trap 'exit 1' INT TERM

if ! "$PY" -c 'import torch, torchvision' 2>/dev/null; then
	echo "-- SKIP: $PY cannot import torch and torchvision"
	exit 0
fi
if [ -z "${PHOTOS:-}" ]; then
	PHOTOS=$out/synth
	echo "-- PHOTOS not set: synthetic set of 2000 images ($B/goldminer synth)"
	"$B/goldminer" synth "$PHOTOS" --images 2000 >/dev/null || exit 1
fi
unset GOLDMINER_PLAN
# ex AUG CMD...: the example under CMD (an interpreter, or goldminer run -- one),
# its CPU time per epoch added (tree_cpu.py)
ex() {
	aug=$1
	shift
	set -- "$@" "$EX" "$PHOTOS" --workers 2 --batch-size 64 --epochs "$EPOCHS" --no-eval
	case $aug in
	model) set -- "$@" --augment plain --model mobilenet --steps "${STEPS:-8}" ;;
	*) set -- "$@" --augment "$aug" --model none ;;
	esac
	"$PY" "$CPU" --threads -- "$@"
}
load() { cut -d' ' -f1-3 /proc/loadavg; }
# side SIDE AUG ROUND: one run of one side (gm, torch or loader), its lines
# appended to that side's files
side() {
	case $1 in
	gm)
		echo "-- [$2, round $3] goldminer run -- $PY $EX ($2)   (load: $(load))"
		ex "$2" "$B/goldminer" run -- "$PY" >"$out/run.out" 2>"$out/run.err" ||
			{ fail=1; tail -5 "$out/run.err"; }
		tee -a "$out/gm_$2.out" <"$out/run.out"
		grep '^goldminer run: .* img/s' "$out/run.err" | tee -a "$out/gm_$2.err"
		;;
	torch)
		echo "-- [$2, round $3] $PY $EX ($2)   (load: $(load))"
		ex "$2" "$PY" >"$out/run.out" 2>"$out/run.err" ||
			{ fail=1; tail -5 "$out/run.err"; }
		tee -a "$out/torch_$2.out" <"$out/run.out"
		;;
	loader)
		echo "-- [$2, round $3] python3 -m goldminer.tools.bench --output float32   (load: $(load))"
		GOLDMINER_LIB="$B/libgoldminer.so" PYTHONPATH="$repo/python${PYTHONPATH:+:$PYTHONPATH}" \
			"$PY" -B -m goldminer.tools.bench "$PHOTOS" --workers 2 --batch 64 \
			--epochs "$EPOCHS" --output float32 2>/dev/null | tee -a "$out/loader.json" || fail=1
		;;
	esac
}
fail=0
echo "-- torch's intra-op threads here: $("$PY" -c 'import torch; print(torch.get_num_threads())'
) ($(nproc) CPUs online)"
for aug in ${AUGS:-plain jitter randaugment model}; do
	sides="gm torch"
	[ "$aug" = plain ] && sides="gm torch loader"
	r=1
	while [ "$r" -le "$ROUNDS" ]; do
		order=$sides
		# even rounds: the other order (loader, torch, goldminer)
		[ $((r % 2)) -eq 0 ] && order=$(echo "$sides" | awk '{for (i = NF; i > 0; i--) printf "%s ", $i}')
		for s in $order; do
			side "$s" "$aug" "$r"
		done
		r=$((r + 1))
	done
done

AUGS=${AUGS:-plain jitter randaugment model} "$PY" - "$out" <<'PY' || fail=1
import json, os, re, sys
d = sys.argv[1]
want = {"plain": ("C path", 4.0), "jitter": ("C path", 1.5), "randaugment": ("hybrid", 1.3),
        "model": ("C path", 1.0)}
want = {k: v for k, v in want.items() if k in os.environ["AUGS"].split()}
def rates(name):
    """Each run's last epoch's img/s (a run's lines start at its epoch 0)."""
    p = os.path.join(d, name)
    out = []
    for ln in open(p).read().splitlines() if os.path.exists(p) else []:
        m = re.match(r"epoch (\d+): .*= ([0-9.]+) img/s", ln)
        if m and m.group(1) == "0":
            out.append(None)
        if m:
            out[-1] = float(m.group(2))
    return [x for x in out if x is not None]
def cpus(name):
    """Each run's last epoch's CPU ms per image (tree_cpu.py's lines)."""
    p = os.path.join(d, name)
    out = []
    for ln in open(p).read().splitlines() if os.path.exists(p) else []:
        m = re.match(r"cpu: epoch (\d+): ([0-9.]+) ms/img", ln)
        if m and m.group(1) == "0":
            out.append(None)
        if m:
            out[-1] = float(m.group(2))
    return [x for x in out if x is not None]
def median(xs):
    xs = sorted(xs)
    return (xs[(len(xs) - 1) // 2] + xs[len(xs) // 2]) / 2 if xs else None
bad = 0
print("== summary: goldminer run vs plain python (same script, same run, 2 workers, batch 64)")
with open("/proc/loadavg") as f:
    load = " ".join(f.read().split()[:3])
for aug, (path, target) in want.items():
    gs, ts = rates("gm_%s.out" % aug), rates("torch_%s.out" % aug)
    p = os.path.join(d, "gm_%s.err" % aug)
    lines = open(p).read().splitlines() if os.path.exists(p) else []
    chose = bool(lines) and all(path in ln for ln in lines)
    if not gs or len(gs) != len(ts):
        print("%-12s missing figures (goldminer %s, torch %s)" % (aug, gs, ts))
        bad = 1
        continue
    rs = [g / t for g, t in zip(gs, ts)]  # one ratio per round: the same machine state
    r = median(rs)
    ok = r >= target and chose
    bad |= not ok
    print("%-12s goldminer / torch img/s, median of %d rounds: %.2fx (target >= %.1fx, %s%s) %s"
          % (aug, len(rs), r, target, path, "" if chose else ": NOT CHOSEN",
             "ok" if ok else "MISSED"))
    print("%-12s   rounds: %s" % ("", "; ".join("%.1f / %.1f = %.2fx" % (g, t, g / t)
                                                for g, t in zip(gs, ts))))
    gc, tc = cpus("gm_%s.out" % aug), cpus("torch_%s.out" % aug)
    if gc and len(gc) == len(tc):
        rc = median([t / g for g, t in zip(gc, tc)])
        # the model case: goldminer must also spend less CPU per image
        cpu_ok = "" if aug != "model" else " (target > 1.0) ok" if rc > 1.0 else \
            " (target > 1.0) MISSED"
        bad |= cpu_ok.endswith("MISSED")
        print("%-12s   CPU per image: torch / goldminer, median of rounds %.2fx (goldminer %.2f ms,"
              " torch %.2f ms)%s" % ("", rc, median(gc), median(tc), cpu_ok))
        print("%-12s   rounds: %s" % ("", "; ".join("%.2f / %.2f = %.2fx" % (t, g, t / g)
                                                    for g, t in zip(gc, tc))))
    elif aug == "model":
        print("%-12s   CPU per image: missing figures (goldminer %s, torch %s)" % (aug, gc, tc))
        bad = 1
lr = []
for ln in open(os.path.join(d, "loader.json")).read().splitlines() \
        if os.path.exists(os.path.join(d, "loader.json")) else []:
    if ln.strip().startswith("{"):
        by = json.loads(ln).get("img_per_s_by_epoch") or [json.loads(ln)["img_per_s"]]
        lr.append(by[-1])
gs = rates("gm_plain.out")
if lr and len(lr) == len(gs):
    r = median([g / x for g, x in zip(gs, lr)])
    print("plain        goldminer run's C path / goldminer.torch.Loader img/s, median of rounds:"
          " %.3f (target >= 0.95) %s" % (r, "ok" if r >= 0.95 else "MISSED"))
    print("               rounds: %s" % "; ".join("%.1f / %.1f = %.3f" % (g, x, g / x)
                                                 for g, x in zip(gs, lr)))
    bad |= r < 0.95
print("load average at the end: %s (%d CPUs online)" % (load, os.cpu_count()))
sys.exit(bad)
PY
exit $fail
