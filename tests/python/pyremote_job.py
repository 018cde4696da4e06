"""pyremote_job - the trainer of tests/test_remote.sh's Python cases (40-43) and
tests/test_remote_py.sh's:
goldminer.torch.DataLoader over a plain Dataset (KIND=plain: each file's bytes
and a seeded torch computation) or a torchvision ImageFolder with
RandomResizedCrop, flip, RandAugment and ToTensor, in Python (KIND=python) or
planned as `goldminer run` plans it (KIND=hybrid: crop and flip in C), through the node
agent at $NODE (unset: local workers), printing each epoch's SHA-256 (16 hex
digits) on one line. Not a test by itself: the script compares the lines.

    python3 pyremote_job.py DATA KIND EPOCHS
"""
import hashlib
import os
import sys
import time

import torch
from goldminer.torch import DataLoader


class Files(torch.utils.data.Dataset):
    """Every file below root: its first 16 bytes and a seeded MxM computation
    (M from $M, 48: batches of 147 KB, which go to the home by rendezvous; 8:
    5 KB, eager); $SLOW_MS (0) ms of sleep each, which changes no byte: a job
    that lasts until a peer's workers have started (tests/test_remote_py.sh)."""

    def __init__(self, root):
        self.root = root
        self.m = int(os.environ.get("M", "48"))
        self.slow = int(os.environ.get("SLOW_MS", "0")) / 1000.0
        self.files = sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs)

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        with open(self.files[i], "rb") as f:
            head = f.read(16)
        if self.slow:
            time.sleep(self.slow)
        t = torch.rand(self.m, self.m)
        for _ in range(20):
            t = t @ t
            t = t / t.norm()
        return torch.tensor(list(head)), t


class Slow:
    """A transform that sleeps first ($SLOW_MS, as Files does): no byte changes."""

    def __init__(self, t, s):
        self.t, self.s = t, s

    def __call__(self, x):
        time.sleep(self.s)
        return self.t(x)


def dataset(root, kind, size=48, normalize=False):
    """plain: Files; python: an ImageFolder with RandomResizedCrop, flip,
    RandAugment, ToTensor (and Normalize) in Python (RandAugment: an op the C
    plane does not have; ColorJitter runs in C, core/jitter.c); hybrid: the same
    pipeline as `goldminer run` plans it (goldminer.plan): the crop and flip in C, read and
    decoded by libgoldminer in the worker, the rest in Python."""
    if kind == "plain":
        return Files(root)
    import torchvision.transforms as T
    from torchvision.datasets import ImageFolder
    ops = [T.RandomResizedCrop(size), T.RandomHorizontalFlip(), T.RandAugment(),
           T.ToTensor()] + ([T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])]
                            if normalize else [])
    ds = ImageFolder(root, T.Compose(ops))
    if kind == "python":
        return ds
    from goldminer import plan
    from goldminer.hybrid import HybridDataset
    p = plan.make({"dataset": ds, "batch_size": 16, "num_workers": 2, "shuffle": True,
                   "collate_fn": None, "drop_last": False, "pin_memory": False})
    if p.path != "hybrid":
        raise SystemExit("pyremote_job: the plan is %s, not hybrid: %s" % (p.path, p.why))
    n_c = sum(1 for o in p.ops if o.where == "C")
    tail = T.Compose(ops[n_c:])
    if int(os.environ.get("SLOW_MS", "0")):
        tail = Slow(tail, int(os.environ["SLOW_MS"]) / 1000.0)
    return HybridDataset(list(ds.samples), p.c, tail, ds.target_transform)


def main():
    root, kind, epochs = sys.argv[1], sys.argv[2], int(sys.argv[3])
    node = os.environ.get("NODE") or None
    dl = DataLoader(dataset(root, kind), batch_size=16, shuffle=True, seed=5,
                    num_workers=int(os.environ.get("NW", "4")), node=node,
                    persistent_workers=True)
    sums = []
    for _ in range(epochs):
        h = hashlib.sha256()
        for x, y in dl:
            h.update(x.numpy().tobytes())
            h.update(y.numpy().tobytes())
        sums.append(h.hexdigest()[:16])
    print(",".join(sums), flush=True)


if __name__ == "__main__":
    main()
