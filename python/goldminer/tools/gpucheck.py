"""goldminer.tools.gpucheck - the GPU check of the pinned ring.

    python3 -m goldminer.tools.gpucheck DATA [--batch 64] [--batches 8] [--reps 20]

On a machine with an NVIDIA GPU and a library built with CUDA (make CUDA=1):
  1. the ring is registered with CUDA: stats()["pinned"], and the CUDA runtime's
     own cudaPointerGetAttributes says "host (registered)" for a batch's address;
  2. batches copied to the device (gm_loader_copy_to_device) come back (device ->
     host) with the same FNV-1a hash as the ring slot, uint8, float32 and float16;
  3. host-to-device GB/s from the ring slot vs from pageable memory of the same
     size (malloc'ed, touched) vs a cudaMallocHost buffer (the ceiling), cudaMemcpy
     all three, `reps` copies each, three interleaved rounds, best of each;
  4. if torch sees CUDA: goldminer.torch.Loader(device="cuda") tensors hold the
     same bytes as the ring.
Prints "ok - ..."/"FAIL - ..." lines and a JSON summary line. Exit status: 0 all
passed, 1 a check failed, 77 skipped (no usable GPU, or no CUDA in this build), with
the reason on stdout.

What it does not do: no multi-GPU, no peer-to-peer, no timing of the training step.
It uses the library's own CUDA door (gm_cuda_*, include/goldminer/cuda.h) so that the
copies go through the same runtime instance that registered the ring.
"""
import argparse
import ctypes
import json
import sys
import time

SKIP = 77


def _cudart():
    """The libcudart instance libgoldminer loaded (by its path in /proc/self/maps)."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                p = line.split()[-1]
                if "libcudart.so" in p:
                    return ctypes.CDLL(p)
    except OSError:
        pass
    return None


def _malloc_host(cudart, n):
    """A page-locked buffer from cudaMallocHost (touched), or 0 when it cannot."""
    if cudart is None:
        return 0
    p = ctypes.c_void_p()
    f = cudart.cudaMallocHost
    f.restype, f.argtypes = ctypes.c_int, [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
    if f(ctypes.byref(p), n) != 0 or not p.value:
        return 0
    ctypes.memset(p.value, 1, n)
    cudart.cudaFreeHost.argtypes = [ctypes.c_void_p]
    return p.value


def _gbs(n, reps, fn):
    fn()  # warm-up (first-touch, TLB, lazy context work)
    t = time.perf_counter()
    for _ in range(reps):
        fn()
    return n * reps / (time.perf_counter() - t) / 1e9


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m goldminer.tools.gpucheck")
    ap.add_argument("data", help="ImageFolder root")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--batches", type=int, default=8, help="batches verified per output type")
    ap.add_argument("--reps", type=int, default=20, help="copies per bandwidth figure")
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args(argv)

    from .. import Loader, checksum64
    from .._abi import lib
    L = lib()
    for name, res, args in (
            ("gm_cuda_build", ctypes.c_char_p, []),
            ("gm_cuda_available", ctypes.c_bool, [ctypes.c_char_p, ctypes.c_size_t]),
            ("gm_cuda_malloc", ctypes.c_int, [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]),
            ("gm_cuda_free", None, [ctypes.c_void_p]),
            ("gm_cuda_memcpy_h2d", ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p,
                                                  ctypes.c_size_t]),
            ("gm_cuda_memcpy_d2h", ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p,
                                                  ctypes.c_size_t])):
        try:
            fn = getattr(L.dll, name)
        except AttributeError:
            print("FAIL - %s does not export %s (core/cuda.c missing?)" % (L.path, name))
            return 1
        fn.restype, fn.argtypes = res, args
    dll = L.dll
    build = (dll.gm_cuda_build() or b"").decode()
    print("# library %s, CUDA support: %s" % (L.path, build))
    if not build.startswith("cuda"):
        print("SKIP: %s was built without CUDA (build with make CUDA=1 where the toolkit is"
              " installed)" % L.path)
        return SKIP
    why = ctypes.create_string_buffer(256)
    if not dll.gm_cuda_available(why, len(why)):
        print("SKIP: no usable CUDA device: %s" % why.value.decode(errors="replace"))
        return SKIP

    failed = 0
    summary = {"cuda": build}

    def check(ok, what):
        nonlocal failed
        print("%s - %s" % ("ok" if ok else "FAIL", what), flush=True)
        failed += not ok

    cudart = _cudart()
    for output in ("uint8", "float32", "float16"):
        with Loader(a.data, batch_size=a.batch, workers=a.workers, seed=1, output=output,
                    epochs=0) as l:
            st = l.stats()
            check(st["pinned"], "%s: ring registered with cudaHostRegister (stats pinned)"
                  % output)
            nmax = a.batch * l._sample_bytes
            dptr = ctypes.c_void_p()
            rc = dll.gm_cuda_malloc(ctypes.byref(dptr), nmax)
            if rc:
                check(False, "gm_cuda_malloc(%d) = %d" % (nmax, rc))
                continue
            try:
                back = (ctypes.c_uint8 * nmax)()
                good = 0
                b = None
                for _ in range(a.batches):
                    b = l.next_batch()
                    if b is None:
                        b = l.next_batch()  # end of an epoch: go on with the next one
                    n = len(b) * l._sample_bytes
                    want = checksum64((b._raw.data, n))
                    l.copy_to_device(b, dptr.value)
                    ctypes.memset(back, 0, n)
                    if dll.gm_cuda_memcpy_d2h(ctypes.addressof(back), dptr, n) == 0 and \
                            checksum64((ctypes.addressof(back), n)) == want:
                        good += 1
                check(good == a.batches, "%s: %d/%d batches read back from the device with"
                      " the ring's bytes" % (output, good, a.batches))
                if cudart is not None and b is not None:
                    # Room to spare: the struct grew across CUDA versions (CUDA 13
                    # appends reserved words past 64 bytes; a 64-byte buffer was
                    # overrun and crashed the check on an H200).
                    attr = (ctypes.c_int * 256)()
                    f = cudart.cudaPointerGetAttributes
                    f.restype, f.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p]
                    rc = f(attr, ctypes.c_void_p(b._raw.data))
                    # struct cudaPointerAttributes starts with enum cudaMemoryType type;
                    # cudaMemoryTypeHost = 1 means page-locked (registered) host memory.
                    check(rc == 0 and attr[0] == 1,
                          "%s: cudaPointerGetAttributes(batch) = host-registered (rc %d,"
                          " type %d)" % (output, rc, attr[0]))
                # bandwidth of a full batch: from the ring slot vs pageable memory
                n = a.batch * l._sample_bytes
                src = b._raw.data
                pageable = ctypes.create_string_buffer(n)  # malloc'ed, zeroed = touched
                # The ceiling: a buffer the runtime allocated page-locked itself
                # (cudaMallocHost), copied with the same call.
                host = _malloc_host(cudart, n)
                # Interleaved rounds, best of each: the three sources see the same
                # machine state (clocks, other tenants), not one after the other.
                ring_gbs = page_gbs = ceil_gbs = 0.0
                for _ in range(3):
                    ring_gbs = max(ring_gbs, _gbs(n, a.reps,
                                                  lambda: dll.gm_cuda_memcpy_h2d(dptr, src, n)))
                    page_gbs = max(page_gbs, _gbs(n, a.reps, lambda: dll.gm_cuda_memcpy_h2d(
                        dptr, ctypes.addressof(pageable), n)))
                    if host:
                        ceil_gbs = max(ceil_gbs, _gbs(n, a.reps, lambda: dll.gm_cuda_memcpy_h2d(
                            dptr, host, n)))
                if host:
                    cudart.cudaFreeHost(ctypes.c_void_p(host))
                print("# %s: %d MB per copy: ring (pinned) %.1f GB/s, pageable %.1f GB/s,"
                      " cudaMallocHost %.1f GB/s; ring/pageable %.2fx, ring/ceiling %.2f"
                      % (output, n >> 20, ring_gbs, page_gbs, ceil_gbs,
                         ring_gbs / page_gbs if page_gbs else 0,
                         ring_gbs / ceil_gbs if ceil_gbs else 0), flush=True)
                check(ring_gbs >= 0.9 * page_gbs, "%s: copies from the ring are not slower"
                      " than from pageable memory" % output)
                check(host and ring_gbs >= 0.9 * ceil_gbs, "%s: copies from the ring reach"
                      " >= 90%% of the cudaMallocHost ceiling (%.2f)"
                      % (output, ring_gbs / ceil_gbs if ceil_gbs else 0))
                summary[output] = {"bytes_per_copy": n, "ring_gbs": round(ring_gbs, 2),
                                   "pageable_gbs": round(page_gbs, 2),
                                   "malloc_host_gbs": round(ceil_gbs, 2)}
            finally:
                dll.gm_cuda_free(dptr)

    try:
        import torch
        have_torch_cuda = torch.cuda.is_available()
    except ImportError:
        have_torch_cuda = False
    if have_torch_cuda:
        from ..torch import Loader as TorchLoader
        for output in ("uint8", "float32", "float16"):
            with Loader(a.data, batch_size=a.batch, workers=a.workers, seed=3,
                        output=output, epochs=1) as l:
                ref = [checksum64(b.data) for _, b in zip(range(a.batches), l)]
            with TorchLoader(a.data, batch_size=a.batch, workers=a.workers, seed=3,
                             output=output, epochs=1, device="cuda") as tl:
                got = []
                for _, (x, _y) in zip(range(a.batches), tl):
                    if output == "uint8":
                        x = x.permute(0, 2, 3, 1)
                    got.append(checksum64(x.contiguous().cpu()))
            check(got == ref, "%s: goldminer.torch.Loader(device='cuda') tensors hold the"
                  " ring's bytes (%d batches)" % (output, len(ref)))
    else:
        print("# torch with CUDA not importable: the torch device='cuda' check is skipped")
    summary["failed"] = failed
    print(json.dumps(summary))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
