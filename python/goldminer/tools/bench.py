"""goldminer.tools.bench - images/s of the Python path, one JSON line (make bench).

    /usr/bin/python3 -m goldminer.tools.bench ROOT [--workers 2] [--batch 64] [--epochs 3]
                     [--output uint8|float32|float16] [--size 224] [--seed 0] [--plain]

Consumes every batch through goldminer.torch.Loader (tensors over the ring, as a
training script gets them), or through goldminer.Loader with --plain or when torch
is missing. img_per_s uses the C CLI's definition (samples after the first batch /
time from the first to the last batch, over all epochs) so it compares directly
with `goldminer bench`; img_per_s_by_epoch uses torch_loader.py's per-epoch one.

What it does not do: no training step, no device copy (see examples/train.py).
"""
import argparse
import json
import os
import sys
import time


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m goldminer.tools.bench")
    ap.add_argument("root")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--output", choices=("uint8", "float32", "float16"), default="uint8")
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--plain", action="store_true", help="goldminer.Loader, no torch")
    a = ap.parse_args(argv)

    Loader = None
    if not a.plain:
        try:
            from .. import torch as gm_torch
            Loader = gm_torch.Loader
        except ImportError:  # no torch for this interpreter
            pass
    plain = Loader is None
    if plain:
        from .. import loader as gm_loader
        Loader = gm_loader.Loader
    t_open = time.perf_counter()
    loader = Loader(a.root, batch_size=a.batch, workers=a.workers, seed=a.seed,
                    epochs=a.epochs, output=a.output, size=a.size)
    t_open = time.perf_counter() - t_open
    n = n0 = 0
    first = last = None
    by_epoch = []
    cpu0 = time.process_time()  # this process: Python consumer + coordinator thread
    with loader:
        for _ in range(a.epochs):
            en, efirst, en0 = 0, None, 0
            for batch in loader:
                t = time.perf_counter()
                bs = len(batch[1]) if not plain else len(batch)
                if first is None:
                    first, n0 = t, bs
                if efirst is None:
                    efirst, en0 = t, bs
                last = t
                n += bs
                en += bs
            if efirst is not None and last > efirst:
                by_epoch.append((en - en0) / (last - efirst))
        st = loader.stats()
    cpu = time.process_time() - cpu0
    worker_ns = st["read_ns"] + st["decode_ns"] + st["augment_ns"] + st["write_ns"]
    rate = (n - n0) / (last - first) if last and last > first else 0.0
    print(json.dumps({
        "peer": "goldminer.Loader" if plain else "goldminer.torch.Loader",
        "python": sys.version.split()[0], "workers": a.workers, "batch": a.batch,
        "output": a.output, "size": a.size, "images": n, "epochs": a.epochs,
        "cpus": os.cpu_count(), "open_s": round(t_open, 3),
        "img_per_s": round(rate, 1),
        "img_per_s_by_epoch": [round(r, 1) for r in by_epoch],
        "c_stats_img_per_s": round(st["img_per_s"], 1),
        "consumer_wait_s": round(st["wait_ns"] / 1e9, 3),
        # CPU the consuming process spent per image, and as a share of the workers'
        # per-image time: the cost of the Python path, independent of other load.
        "consumer_cpu_us_per_img": round(cpu * 1e6 / max(n, 1), 2),
        "consumer_cpu_share": round(cpu * 1e9 / worker_ns, 4) if worker_ns else None,
        "errors": st["errors"], "pinned": bool(st["pinned"])}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
