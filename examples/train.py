#!/usr/bin/python3
"""train.py - a tiny training loop fed by goldminer or by torch's DataLoader.

    /usr/bin/python3 examples/train.py DATA [--loader goldminer|dataloader|both]
            [--epochs 2] [--batch 64] [--workers 2] [--size 224] [--device auto]

DATA is an ImageFolder tree (make one with `build/goldminer synth DIR --images 2000`).
Both loaders apply RandomResizedCrop(size) + RandomHorizontalFlip and deliver
normalised float32 NCHW batches; the model is a small CNN, trained on the GPU when
torch sees one (goldminer then copies each batch out of its pinned ring with
non_blocking=True), else on the CPU. For each loader it prints images/s of the
whole loop (data + training step, first batch excluded) and, with --loader both,
the ratio. Needs Debian's python3-torch (+ python3-torchvision for DataLoader);
finds goldminer in ../python and libgoldminer.so in ../build (or GOLDMINER_LIB).

The goldminer part is three lines:

    from goldminer.torch import Loader
    loader = Loader(root, batch_size=64, workers=2, output="float32", device=device)
    for images, labels in loader: ...
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import torch  # noqa: E402
from torch import nn  # noqa: E402

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def small_cnn(num_classes):
    return nn.Sequential(
        nn.Conv2d(3, 16, 5, stride=4, padding=2), nn.BatchNorm2d(16), nn.ReLU(inplace=True),
        nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU(inplace=True),
        nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, num_classes))


def goldminer_loader(a, device):
    from goldminer.torch import Loader
    loader = Loader(a.data, batch_size=a.batch, workers=a.workers, seed=a.seed,
                    output="float32", size=a.size, device=device)
    return loader, loader.num_classes, loader.close


def torch_dataloader(a, device):
    from torch.utils.data import DataLoader
    from torchvision import datasets, transforms
    tf = transforms.Compose([transforms.RandomResizedCrop(a.size),
                             transforms.RandomHorizontalFlip(), transforms.ToTensor(),
                             transforms.Normalize(MEAN, STD)])
    ds = datasets.ImageFolder(a.data, transform=tf)
    dl = DataLoader(ds, batch_size=a.batch, shuffle=True, num_workers=a.workers,
                    persistent_workers=a.workers > 0, pin_memory=device.type == "cuda")

    def gen():
        for x, y in dl:
            yield x.to(device, non_blocking=True), y.to(device, non_blocking=True)

    class Wrapped:
        def __iter__(self):
            return gen()

        def __len__(self):
            return len(dl)
    return Wrapped(), len(ds.classes), lambda: None


def train(name, make, a, device):
    torch.manual_seed(a.seed)
    loader, num_classes, close = make(a, device)
    model = small_cnn(num_classes).to(device).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    lossf = nn.CrossEntropyLoss()
    n = n0 = 0
    t_first = None
    try:
        for epoch in range(a.epochs):
            tot, cnt = 0.0, 0
            for images, labels in loader:
                if t_first is None:
                    t_first, n0 = time.perf_counter(), images.shape[0]
                loss = lossf(model(images), labels)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                tot += loss.item()  # also waits for the step: the rate is honest
                cnt += 1
                n += images.shape[0]
            print("%-10s epoch %d  loss %.3f  (%d batches)" % (name, epoch, tot / max(cnt, 1),
                                                               cnt), flush=True)
    finally:
        close()
    if device.type == "cuda":
        torch.cuda.synchronize()
    dt = time.perf_counter() - t_first if t_first else 0.0
    rate = (n - n0) / dt if dt > 0 else 0.0
    print("%-10s %d images, %.1f images/s (data + training step, on %s)"
          % (name, n, rate, device), flush=True)
    return rate


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("data", help="ImageFolder root")
    ap.add_argument("--loader", choices=("goldminer", "dataloader", "both"), default="both")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:1, ...")
    ap.add_argument("--threads", type=int, default=0,
                    help="torch intra-op threads (0: torch's default)")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    dev = a.device
    if dev == "auto":
        dev = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(dev)
    rates = {}
    if a.loader in ("goldminer", "both"):
        rates["goldminer"] = train("goldminer", goldminer_loader, a, device)
    if a.loader in ("dataloader", "both"):
        rates["dataloader"] = train("dataloader", torch_dataloader, a, device)
    if len(rates) == 2 and rates["dataloader"] > 0:
        print("goldminer / DataLoader = %.2fx" % (rates["goldminer"] / rates["dataloader"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
