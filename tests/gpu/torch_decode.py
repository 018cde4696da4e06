"""torch_decode - the GPU decode through goldminer.torch.Loader on a CUDA device
(tests/gpu/check.sh runs it after coef_check; needs torch with CUDA, the library
and its plugin libgoldminer-cuda.so, both from the same build).

    python3 tests/gpu/torch_decode.py DIR [WORKERS [EPOCHS]]

DIR: an ImageFolder of JPEGs. 1. Same bytes: for uint8, float32 and float16 (train,
224, seed 5, one epoch, batches of 64), every batch of Loader(device="cuda",
gpu_decode=True), finished on the device by the kernels, must equal
gpu_decode=False's batch (the CPU workers' samples copied to the device), images
and labels; a loader that does not finish on the device fails with its reason.
2. Speed: img/s of WORKERS (default 4) workers, train float32 224 (the default
pipeline), EPOCHS (default 2) epochs, a consumer that only takes the batches (a
torch.cuda.synchronize at the end), CPU path against GPU decode on the device.
One line per result; exit 0 when every byte matched, 1 otherwise, 77 when torch
sees no CUDA device.
"""
import sys
import time

import goldminer
import goldminer.torch as gt
import torch


def sums(root, output, gpu, workers):
    """[(checksum of the batch's bytes as the ring holds them, labels)] of one
    epoch, and whether it was finished on the device (gpu_decode_on_device)."""
    got = []
    with gt.Loader(root, batch_size=64, workers=workers, seed=5, size=224, output=output,
                   device="cuda", gpu_decode=gpu, epochs=1) as tl:
        on, why = tl.gpu_decode_on_device, tl.gpu_decode_reason
        for x, y in tl:
            if x.device.type != "cuda":
                raise SystemExit("FAIL: a batch on %s, not cuda" % x.device)
            if output == "uint8":
                x = x.permute(0, 2, 3, 1)  # NHWC: the ring's bytes
            got.append((goldminer.checksum64(x.contiguous().cpu()), y.tolist()))
    return got, on, why


def rate(root, gpu, workers, epochs):
    """img/s of a consumer that takes every batch of `epochs` epochs."""
    n = 0
    with gt.Loader(root, batch_size=64, workers=workers, seed=5, size=224, output="float32",
                   device="cuda", gpu_decode=gpu, epochs=epochs) as tl:
        on = tl.gpu_decode_on_device
        t0 = None
        for _ in range(epochs):
            for x, _labels in tl:
                if t0 is None:  # from the first batch: the workers' start is not the rate
                    torch.cuda.synchronize()
                    t0 = time.monotonic()
                    continue
                n += x.shape[0]
        torch.cuda.synchronize()
        dt = time.monotonic() - t0 if t0 is not None else 0.0
    return n / dt if dt > 0 else 0.0, on


def main():
    if len(sys.argv) < 2:
        print("usage: torch_decode.py DIR [WORKERS [EPOCHS]]", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("SKIP: torch sees no CUDA device")
        return 77
    root = sys.argv[1]
    workers = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    epochs = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    bad = 0
    for output in ("uint8", "float32", "float16"):
        ref, _, _ = sums(root, output, False, workers)
        got, on, why = sums(root, output, True, workers)
        if not on:
            print("FAIL: torch.Loader(gpu_decode=True, device='cuda') did not finish on the "
                  "device: %s" % why)
            return 1
        differ = sum(a != b for a, b in zip(ref, got)) + abs(len(ref) - len(got))
        print("torch same bytes, %s: %d batches finished on the device, %d differ from "
              "gpu_decode=False's" % (output, len(got), differ))
        bad += differ
    cpu, _ = rate(root, False, workers, epochs)
    dev, on = rate(root, True, workers, epochs)
    print("torch speed, train float32 224, %d workers, %d epochs: CPU path %.0f img/s, GPU "
          "decode on the device %.0f img/s (%.2fx; %s)" % (
              workers, epochs, cpu, dev, dev / cpu if cpu else 0.0,
              "finished on the device" if on else "NOT on the device"))
    print("FAIL: bytes differ" if bad else "ok: the same bytes")
    return 1 if bad or not on else 0


if __name__ == "__main__":
    sys.exit(main())
