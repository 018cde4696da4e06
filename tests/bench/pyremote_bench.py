"""pyremote_bench - the trainer of tests/bench/bench-pyremote.sh: the hybrid
pipeline (RandomResizedCrop(224), flip, RandAugment(), ToTensor,
Normalize; crop and flip in C as `goldminer run` plans it, the rest in Python
workers) over the first N photos, through the node agent at $NODE, for EPOCHS
epochs. Prints one JSON line: img/s over the epochs after the first (the first
pays for starting the workers), and with CHECK=1 each epoch's SHA-256 (the timed
runs do not hash: hashing 19 MB batches would take much of a quarter core).

    python3 pyremote_bench.py PHOTOS N EPOCHS
"""
import hashlib
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from torch.utils.data import Subset  # noqa: E402

import pyremote_job  # noqa: E402
from goldminer.torch import DataLoader  # noqa: E402


def main():
    root, n, epochs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    check = os.environ.get("CHECK") == "1"
    ds = pyremote_job.dataset(root, "hybrid", size=224, normalize=True)
    ds = Subset(ds, range(min(n, len(ds))))
    dl = DataLoader(ds, batch_size=32, shuffle=True, seed=3, num_workers=4,
                    node=os.environ["NODE"], persistent_workers=True)
    sums, t0, imgs = [], None, 0
    for e in range(epochs):
        if e == 1:
            t0 = time.monotonic()
        h = hashlib.sha256()
        for x, y in dl:
            if check:
                h.update(x.numpy().tobytes())
                h.update(y.numpy().tobytes())
            if e >= 1:
                imgs += len(y)
        sums.append(h.hexdigest()[:16])
    el = time.monotonic() - t0 if t0 is not None else 0
    print(json.dumps({"img_per_s": round(imgs / el, 1) if el > 0 else 0,
                      "checksum": sums if check else []}), flush=True)


if __name__ == "__main__":
    main()
