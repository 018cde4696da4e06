"""pyremote_job - the trainer of tests/test_remote.sh's Python cases (38-41):
goldminer.torch.DataLoader over a plain Dataset (KIND=plain: each file's bytes
and a seeded torch computation) or a torchvision ImageFolder with
RandomResizedCrop, flip, ColorJitter and ToTensor (KIND=hybrid), through the node
agent at $NODE (unset: local workers), printing each epoch's SHA-256 (16 hex
digits) on one line. Not a test by itself: the script compares the lines.

    python3 pyremote_job.py DATA KIND EPOCHS
"""
import hashlib
import os
import sys

import torch
from goldminer.torch import DataLoader


class Files(torch.utils.data.Dataset):
    """Every file below root: its first 16 bytes and a seeded 48x48 computation."""

    def __init__(self, root):
        self.root = root
        self.files = sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs)

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        with open(self.files[i], "rb") as f:
            head = f.read(16)
        t = torch.rand(48, 48)
        for _ in range(20):
            t = t @ t
            t = t / t.norm()
        return torch.tensor(list(head)), t


def dataset(root, kind):
    if kind == "plain":
        return Files(root)
    import torchvision.transforms as T
    from torchvision.datasets import ImageFolder
    return ImageFolder(root, T.Compose([T.RandomResizedCrop(48), T.RandomHorizontalFlip(),
                                        T.ColorJitter(0.4, 0.4, 0.4), T.ToTensor()]))


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
