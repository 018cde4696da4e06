"""startup_bench.py - how fast a DataLoader's workers start: goldminer.torch.DataLoader
against torch.utils.data.DataLoader, same arguments, each run a fresh interpreter.

    startup_bench.py --root PHOTOS [--rounds 3] [--workers 2] [--batch 32] [--limit 640]

One run (a child interpreter, `--child goldminer|torch`): it imports torch and
torchvision (as a training script has at its top), then, timed from there:
  build   the dataset (ImageFolder over --root, RandomResizedCrop(224), flip,
          ToTensor; the first --limit images) and the loader (shuffle, 2 workers,
          not persistent), then the model a training script builds next
          (torchvision's resnet18, on the CPU), then iter() and the first batch:
          `first` is the time from the loader's build to that batch in hand, the
          figure a training script waits before its first step;
  first_now  the same with iter() right after the build (no model in between):
          the worst case for workers started at the build;
  epoch2  the rest of epoch 1 read, then iter() and the first batch of epoch 2:
          the start of a non-persistent loader's next epoch.
Each round runs both loaders once, in alternating order (goldminer first in odd
rounds), the two `first` kinds in separate runs; the figure is the median over
the rounds of goldminer / torch of the same round, so a shared machine's drift
hits both alike. The load average at each run's start is printed. Targets:
first <= 1.5x torch's (an idle machine), epoch2 <= 1.2x torch's. Prints one JSON
line per figure and a summary; the exit status is 1 when a target is missed.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

TARGETS = {"first": 1.5, "epoch2": 1.2}


def child(args):
    import torch
    import torchvision
    from torchvision import transforms as T
    if args.child == "goldminer":
        from goldminer.torch import DataLoader
    else:
        from torch.utils.data import DataLoader
    t0 = time.monotonic()
    ds = torchvision.datasets.ImageFolder(args.root, T.Compose([
        T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor()]))
    ds = torch.utils.data.Subset(ds, range(min(args.limit, len(ds))))
    dl = DataLoader(ds, batch_size=args.batch, shuffle=True, num_workers=args.workers)
    if not args.now:  # what a training script builds after its loader
        torchvision.models.resnet18()
    it = iter(dl)
    next(it)
    first = time.monotonic() - t0
    for _ in it:
        pass
    t1 = time.monotonic()
    it = iter(dl)
    next(it)
    epoch2 = time.monotonic() - t1
    for _ in it:
        pass
    print(json.dumps({"first": first, "epoch2": epoch2}), flush=True)


def run(args, loader, now):
    cmd = [sys.executable, "-B", os.path.abspath(__file__), "--child", loader,
           "--root", args.root, "--workers", str(args.workers), "--batch", str(args.batch),
           "--limit", str(args.limit)] + (["--now"] if now else [])
    load = os.getloadavg()[0]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if p.returncode:
        raise SystemExit("%s run failed (%d): %s" % (loader, p.returncode, p.stderr[-2000:]))
    out = json.loads(p.stdout.strip().splitlines()[-1])
    out["load"] = load
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", choices=("goldminer", "torch"))
    ap.add_argument("--root", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--limit", type=int, default=640)
    ap.add_argument("--now", action="store_true")
    args = ap.parse_args()
    if args.child:
        return child(args)
    ratios = {"first": [], "first_now": [], "epoch2": []}
    per = {k: {"goldminer": [], "torch": []} for k in ratios}
    for r in range(args.rounds):
        for now in (False, True):
            order = ("goldminer", "torch") if r % 2 == 0 else ("torch", "goldminer")
            got = {}
            for loader in order:
                got[loader] = run(args, loader, now)
                print("round %d %-9s %s: first %.3f s, epoch 2 start %.3f s (load %.1f)"
                      % (r + 1, loader, "iter() at once" if now else "model built first",
                         got[loader]["first"], got[loader]["epoch2"], got[loader]["load"]),
                      flush=True)
            kinds = ("first_now", "epoch2") if now else ("first", "epoch2")
            for k in kinds:
                if k == "epoch2" and now:
                    continue  # (one epoch-2 figure a round: the model-first run's)
                src = "first" if k == "first_now" else k
                for loader in order:
                    per[k][loader].append(got[loader][src])
                ratios[k].append(got["goldminer"][src] / got["torch"][src])
    bad = 0
    for k, rs in ratios.items():
        med = statistics.median(rs)
        want = TARGETS.get(k)
        ok = want is None or med <= want
        bad += not ok
        print(json.dumps({"what": k, "vs_torch": round(med, 3),
                          "vs_torch_rounds": [round(x, 3) for x in rs],
                          "goldminer_s": [round(x, 3) for x in per[k]["goldminer"]],
                          "torch_s": [round(x, 3) for x in per[k]["torch"]],
                          "target": want, "ok": ok}))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
