#!/usr/bin/python3
"""train_torchvision.py - a training script written the ordinary torchvision way.

    /usr/bin/python3 examples/train_torchvision.py DATA [--epochs 1] [--batch-size 64]
            [--workers 2] [--augment plain|jitter|randaugment] [--steps N] [--seed S]
            [--model small|mobilenet|none] [--no-eval]

It does not import goldminer. Run as it is, torch's DataLoader feeds it; run as

    goldminer run -- python3 examples/train_torchvision.py DATA

(or `python3 -m goldminer run examples/train_torchvision.py DATA`) goldminer
serves the same DataLoader: `--augment plain` (RandomResizedCrop, flip, ToTensor,
Normalize) and `jitter` (ColorJitter(0.4, 0.4, 0.4) before ToTensor) entirely
in C, `randaugment` (RandAugment() before ToTensor) as a C+Python hybrid; the
validation loader (Resize 256, CenterCrop 224, ToTensor, Normalize) in C.
GOLDMINER_PLAN=1 prints each plan.

The model is a small CNN on the CPU (on the GPU when torch sees one), so the
input pipeline is what the images/s it prints per epoch measure; `--model
mobilenet` is torchvision's mobilenet_v3_small (no pretrained weights), a model
that bounds the rate on a CPU instead (bench-run.sh's model case); `--model none`
only iterates the batches (tests/bench/bench-run.sh: the input pipeline alone).
"""
import argparse
import time

import torch
from torch import nn
from torch.utils.data import DataLoader
from torchvision import datasets, models, transforms

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def train_transform(augment):
    ops = [transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip()]
    if augment == "jitter":
        ops.append(transforms.ColorJitter(0.4, 0.4, 0.4))
    elif augment == "randaugment":
        ops.append(transforms.RandAugment())
    ops += [transforms.ToTensor(), transforms.Normalize(MEAN, STD)]
    return transforms.Compose(ops)


def small_cnn(num_classes):
    return nn.Sequential(
        nn.Conv2d(3, 16, 5, stride=4, padding=2), nn.BatchNorm2d(16), nn.ReLU(inplace=True),
        nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU(inplace=True),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, num_classes))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("data")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--augment", choices=("plain", "jitter", "randaugment"), default="plain")
    ap.add_argument("--steps", type=int, default=0, help="stop an epoch after N batches")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-eval", action="store_true")
    ap.add_argument("--model", choices=("small", "mobilenet", "none"), default="small")
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    train_set = datasets.ImageFolder(args.data, train_transform(args.augment))
    train = DataLoader(train_set, batch_size=args.batch_size, shuffle=True,
                       num_workers=args.workers, drop_last=True)
    if args.model == "mobilenet":
        model = models.mobilenet_v3_small(num_classes=len(train_set.classes)).to(device)
    else:
        model = small_cnn(len(train_set.classes)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(args.epochs):
        model.train()
        seen, t0, loss = 0, None, torch.zeros(())
        for step, (images, labels) in enumerate(train):
            if args.model != "none":
                images, labels = images.to(device), labels.to(device)
                loss = loss_fn(model(images), labels)
                opt.zero_grad()
                loss.backward()
                opt.step()
            seen += images.shape[0]
            if step == 0:  # timed from here: batch 0 includes the workers' start
                t0, seen = time.monotonic(), 0
            if args.steps and step + 1 >= args.steps:
                break
        dt = time.monotonic() - t0 if t0 else 0.0
        print("epoch %d: %d images in %.2f s = %.1f img/s (after batch 0), loss %.3f"
              % (epoch, seen, dt, seen / dt if dt else 0.0, loss.item()), flush=True)

    if args.no_eval:
        return
    val_set = datasets.ImageFolder(args.data, transforms.Compose([
        transforms.Resize(256), transforms.CenterCrop(224), transforms.ToTensor(),
        transforms.Normalize(MEAN, STD)]))
    val = DataLoader(val_set, batch_size=args.batch_size, num_workers=args.workers)
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for step, (images, labels) in enumerate(val):
            pred = model(images.to(device)).argmax(1).cpu()
            correct += int((pred == labels).sum())
            total += labels.shape[0]
            if args.steps and step + 1 >= args.steps:
                break
    print("eval: %d/%d correct (%.1f%%)" % (correct, total, 100.0 * correct / max(total, 1)))


if __name__ == "__main__":
    main()
