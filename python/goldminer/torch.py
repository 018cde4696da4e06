"""goldminer.torch - a drop-in for DataLoader(ImageFolder(root, transform)) in PyTorch.

    from goldminer.torch import Loader
    loader = Loader("/data/train", batch_size=64, workers=2, output="float32",
                    device="cuda")
    for epoch in range(epochs):
        for images, labels in loader:      # (64,3,224,224) on the GPU, labels int64
            loss = criterion(model(images), labels)

Design: images are built over the ring slot without a copy (torch.frombuffer).
uint8 output is stored HWC in the ring, so the (N,3,H,W) tensor is a permuted view:
the same shape DataLoader+PILToTensor gives, in channels_last memory format, which
convolutions accept directly (images.contiguous() makes a plain NCHW copy). float32
output is normalised CHW, exactly what ToTensor()+Normalize() give; float16 is that
rounded to half (for autocast/AMP training: half the bytes to copy). Labels are int64
copies, as DataLoader returns them.

device="cuda": the slot's bytes are copied with non_blocking=True (DMA when the C
library registered the ring with cudaHostRegister, see stats()["pinned"]); a CUDA
event is recorded after the copy, and the slot goes back to the workers only once
that event has completed (the adapter waits on it before asking for the next
batch, and before close). The layout permutation is then done on the device.

VIEW LIFETIME (device=None): images are valid until the next batch is requested
and never after close(); use images.clone() (or copy=True) to keep one.

copy=True: each batch is the caller's own (kept as long as it likes, never
overwritten), still without a copy: a view of its ring slot that the library
keeps (gm_loader_keep: a second mapping of the slot) until the last tensor, view
or storage over it dies; the slot goes back to the workers at the next batch
asked for after that. A batch held so long that the workers would have fewer
than 2 slots left to fill is detached by the library: one mremap puts a private
copy of its pages at the same addresses and its slot goes back (stats()
"kept_copied" counts them). Only a batch the library cannot keep (a
shuffle_buffer batch, a library without gm_loader_keep) is copied here instead,
into one of a few buffers this adapter keeps (_slot.Owned), each written again
only once nothing holds it (the storage holds a reference to the buffer, so its
reference count says so); their pages are touched once, when made: a fresh
allocation per batch would page-fault on every 4 KiB page of it, which costs
several times the copy itself.

gpu_decode=True: the workers write each sample's crop window as quantised DCT
coefficients (coefficient slots, include/goldminer/coef.h: their CPU per image is
the Huffman decode, 0.49-0.50 of the full decode's with float32 output, 0.56-0.57
with uint8, on the photo set: docs/MEASUREMENTS.md) and this process finishes them
(dequantise, IDCT, upsampling, colour conversion, resize, flip, jitter, layout),
with the bytes gpu_decode=False gives. Where: with device="cuda", on the device
when libgoldminer can (gm_loader_finish_device: the GPU decode's kernels, the
plugin libgoldminer-cuda.so that `make` builds where nvcc is, and a device that
libgoldminer sees): each batch into a fresh CUDA tensor, ordered on torch's
current stream (the kernels wait for the work queued there and the work queued
after waits for them: no host wait for the kernels), the slot back to the workers
once the device has copied it; else on the host through the library's host path
(gm_loader_finish, on this process's CPU) into a buffer of its own (pinned with
device="cuda", then copied), the one line on stderr saying why ("no CUDA device:
...", "libgoldminer-cuda.so not built: ..."). Without a device argument the host
path, always. The choice and its reason: gpu_decode_on_device,
gpu_decode_reason. gpu_decode="auto": decided once, from measurement: on only when
the workers' measured rate (one worker's img/s) times the CPUs this process may use
falls short of the consumer's measured demand AND torch sees a CUDA device (with
node=, the workers the agent runs for it stand for the CPUs); the decision and why
are said once on stderr and kept in gpu_decode_reason. Turned on, the loader
reopens at the next batch's position (the same bytes follow), finishing where
gpu_decode=True would.

What it does not do: no sampler/collate_fn hooks, no pin_memory thread (the ring is
already the pinned staging buffer), no multi-GPU placement beyond `device`.
"""
from __future__ import annotations

import ctypes
import errno
from typing import Any, Iterator, Literal, Mapping, Union

import torch as _torch

from .dataloader import DataLoader  # any map-style dataset
from .plan import plan  # where a DataLoader's sample runs: C, hybrid, Python
from .loader import Loader as _GmLoader, PathArg
from . import _abi, _slot

__all__ = ["Loader", "DataLoader", "plan"]  # (the last two from their own modules)

_DTYPES = {"uint8": _torch.uint8, "float32": _torch.float32, "float16": _torch.float16}


_Owned = _slot.Owned  # copy=True's buffers (the test reads KEEP)


class Loader:
    """Yields (images, labels) like torch.utils.data.DataLoader over a torchvision
    ImageFolder with RandomResizedCrop(size) + RandomHorizontalFlip() (+ ToTensor +
    Normalize for output="float32"; PILToTensor for output="uint8").

    Loader(root, batch_size=64, workers=2, seed=0, output="float32", device=None,
           copy=False, gpu_decode=False, **goldminer_kwargs)

    Every keyword of goldminer.Loader is accepted (pipeline, epoch, epochs,
    on_error, size, mode, shuffle, drop_last, ...). len() is batches per epoch;
    each `for` is one epoch. stats(), scale(n), state_dict(), load_state_dict(),
    errors() and close() are those of goldminer.Loader.
    """

    def __init__(self, root: PathArg, batch_size: int = 64, workers: Union[int, str] = 2,
                 seed: int = 0, output: str = "float32",
                 device: Union[str, _torch.device, None] = None, copy: bool = False,
                 gpu_decode: Union[bool, str] = False, **kw: Any) -> None:
        self.device = _torch.device(device) if device is not None else None
        if self.device is not None and self.device.type == "cuda" and \
                not _torch.cuda.is_available():
            raise _abi.LoaderError(errno.ENODEV, "goldminer.torch.Loader: device=%r but torch"
                                   " has no CUDA device" % (device,))
        if gpu_decode not in (True, False, "auto") or gpu_decode in (0, 1) and \
                not isinstance(gpu_decode, bool):
            raise _abi.ArgumentError("gpu_decode must be True, False or 'auto', not %r"
                                     % (gpu_decode,))
        self._copy = _Owned() if copy else None
        self._auto = _Auto(self) if gpu_decode == "auto" else None
        self.gpu_decode_reason = None if self._auto else \
            "gpu_decode=%r given" % (gpu_decode,)
        self._gm = _GmLoader(root, batch_size=batch_size, workers=workers, seed=seed,
                             output=output, gpu_decode=gpu_decode is True, **kw)
        self._on_device = False  # gpu_decode's batches finished by the kernels
        if gpu_decode is True:
            self._choose_finish()
        if self._auto is not None:
            self._auto.start()
        self._dtype = _DTYPES[self._gm.output]  # a pipeline spec may have chosen it
        self._pending = None  # CUDA event of the copy out of the current slot
        self.batch_size = batch_size

    # DataLoader-like surface ---------------------------------------------------
    def __len__(self) -> int:
        return len(self._gm)

    def __iter__(self) -> Iterator[tuple[_torch.Tensor, _torch.Tensor]]:
        self._gm._handle()
        return self._gm._epoch_iter(self._convert, self._before_next)

    @property
    def gpu_decode(self) -> bool:
        """True while the workers write coefficient slots that this process finishes."""
        return self._gm.gpu_decode

    @property
    def gpu_decode_on_device(self) -> bool:
        """True while those slots are finished by the GPU decode's kernels on the
        device (device="cuda", libgoldminer-cuda.so and a device there)."""
        return self._gm.gpu_decode and self._on_device

    def _choose_finish(self):
        """gpu_decode on: where its slots are finished, decided once, the reason
        added to gpu_decode_reason; a device asked for but not used is said on
        stderr, once a process."""
        if self.device is None or self.device.type != "cuda":
            self._on_device = False
            where = "finished on the host (device=%s)" % (
                "None" if self.device is None else repr(str(self.device)))
        else:
            why = self._gm._device_finish_why()
            self._on_device = why is None
            if why is None:
                where = "finished on the device (libgoldminer-cuda.so's kernels)"
            else:
                where = "finished on the host, then copied to %s: %s" % (self.device, why)
                _say("goldminer.torch.Loader: gpu_decode: %s\n" % where)
        self.gpu_decode_reason = "%s; %s" % (self.gpu_decode_reason or "gpu_decode on", where)

    def _before_next(self):
        self._wait_copy()
        if self._auto is not None:
            self._auto.tick()

    def __reduce_ex__(self, protocol):
        raise _abi.ArgumentTypeError("goldminer.torch.Loader cannot be pickled or copied: it"
                                     " owns worker processes and a shared-memory ring; pickle"
                                     " its arguments instead and open a Loader where they"
                                     " arrive")

    def __enter__(self) -> Loader:
        return self

    def __exit__(self, *exc: object) -> Literal[False]:
        self.close()
        return False

    def close(self) -> None:
        """Wait for an in-flight device copy, then stop the workers and unmap."""
        if not self._gm.closed:
            self._wait_copy()
        self._gm.close()
        if self._copy is not None:
            self._copy.clear()  # batches the caller holds keep their own buffer

    @property
    def loader(self) -> _GmLoader:
        """The underlying goldminer.Loader."""
        return self._gm

    def stats(self) -> dict[str, Any]:
        return self._gm.stats()

    def errors(self) -> list[tuple[str, str]]:
        return self._gm.errors()

    def scale(self, n: int) -> None:
        self._gm.scale(n)

    def state_dict(self) -> dict[str, Any]:
        return self._gm.state_dict()

    def load_state_dict(self, sd: Mapping[str, Any]) -> None:
        self._wait_copy()
        self._gm.load_state_dict(sd)

    @property
    def num_classes(self) -> int:
        return self._gm.num_classes

    # Batches ---------------------------------------------------------------------
    def _wait_copy(self):
        ev, self._pending = self._pending, None
        if ev is not None:
            ev.synchronize()  # the DMA out of the slot is done: the slot may be reused

    def _finished(self, raw):
        """gpu_decode: raw's slots finished on the device into a CUDA tensor, or on
        the host into a tensor of this process (pinned when copied to a CUDA
        device); the slot goes back at once (on the device: once it is copied)."""
        n, ob = raw.size, self._gm.out_bytes
        if self._on_device:
            out = _torch.empty(n * ob, dtype=_torch.uint8, device=self.device)
            stream = _torch.cuda.current_stream(out.device).cuda_stream
            self._gm._finish_device(raw, out.data_ptr(), n * ob, stream)
        else:
            pin = self.device is not None and self.device.type == "cuda"
            out = _torch.empty(n * ob, dtype=_torch.uint8, pin_memory=pin)
            self._gm._finish(raw, out.data_ptr(), n * ob)
        lab_addr = ctypes.cast(raw.labels, ctypes.c_void_p).value
        labels = _torch.frombuffer((ctypes.c_int32 * n).from_address(lab_addr),
                                   dtype=_torch.int32).to(_torch.int64)  # a copy
        self._gm.release()
        flat = out.view(self._dtype)
        side, hwc = self._side(ob)
        if side:
            x = flat.view(n, side, side, 3) if hwc else flat.view(n, 3, side, side)
        else:
            x = flat.view(n, -1)
        if self.device is not None and self.device.type != "cpu":
            if not self._on_device:
                x = x.to(self.device, non_blocking=True)
                if self.device.type == "cuda":
                    ev = _torch.cuda.Event()
                    ev.record()
                    self._pending = ev  # (out stays alive in the copy until it is done)
            labels = labels.to(self.device, non_blocking=True)
        if side and hwc:
            x = x.permute(0, 3, 1, 2)
        return x, labels

    def _convert(self, raw):
        if self._auto is not None:
            self._auto.batch_taken(raw.size)
        if self._gm.gpu_decode:
            return self._finished(raw)
        n = raw.size
        nbytes = n * raw.sample_bytes
        on_cpu = self.device is None or self.device.type == "cpu"
        kept = self._copy is not None and on_cpu and self._gm._keep(raw)
        buf = (ctypes.c_uint8 * nbytes).from_address(raw.data)
        # The tensor keeps buf alive; buf keeps the ring mapped after close()
        # until the last tensor over it dies (stale bytes, never a crash).
        self._gm._keep_alive_while(buf)
        if kept:
            self._gm._give_back_when_dead(raw, buf)
        flat = _torch.frombuffer(buf, dtype=self._dtype)
        side, hwc = self._side(raw.sample_bytes)
        if side:
            x = flat.view(n, side, side, 3) if hwc else flat.view(n, 3, side, side)
        else:
            x = flat.view(n, -1)
        lab_addr = ctypes.cast(raw.labels, ctypes.c_void_p).value
        labels = _torch.frombuffer((ctypes.c_int32 * n).from_address(lab_addr),
                                   dtype=_torch.int32).to(_torch.int64)  # a copy
        if self.device is not None and self.device.type != "cpu":
            x = x.to(self.device, non_blocking=True)
            if self.device.type == "cuda":
                ev = _torch.cuda.Event()
                ev.record()
                self._pending = ev
            labels = labels.to(self.device, non_blocking=True)
        elif self._copy is not None and not kept:
            x = self._copy.copy(x)
            # the batch is the caller's now: the slot goes back to the workers at
            # once, not when the next batch is asked for
            self._gm.release()
        if side and hwc:
            x = x.permute(0, 3, 1, 2)  # (N,3,H,W) in channels_last memory format
        return x, labels

    def _side(self, sample_bytes):
        hwc = self._dtype == _torch.uint8
        per = 3 * _torch.tensor([], dtype=self._dtype).element_size()
        if sample_bytes % per:
            return None, hwc
        v = sample_bytes // per
        r = int(round(v ** 0.5))
        return (r if r * r == v else None), hwc


_SAID = set()  # the lines said on stderr (auto's decisions, where gpu_decode finishes)


def _say(line):
    """line on stderr, once a process (goldminer run opens a loader a sampler epoch)."""
    import sys
    if line not in _SAID:
        _SAID.add(line)
        sys.stderr.write(line)


class _Auto:
    """gpu_decode="auto": measures the workers' rate (one worker's img/s: the
    library's measure, else samples over the workers' stage time) and the
    consumer's demand (its samples over its own time between batches: what it
    would take if never kept waiting), and decides once: on when rate x the CPUs
    this process may use (with node=, the workers the agent runs for it) < demand
    and torch sees a CUDA device. Without a device it is off from the start. The
    decision is said once on stderr."""

    BATCHES = 8  # batches measured before deciding

    def __init__(self, owner):
        self.o, self.done = owner, False
        self.busy_s, self.samples, self.t_back, self.seen = 0.0, 0, None, 0

    def start(self):
        import os
        if not _torch.cuda.is_available():
            self.decide(False, "no CUDA device (torch.cuda.is_available() is False): the "
                        "workers decode on the CPU")
        self.cpus = len(os.sched_getaffinity(0))
        self.agent = self.o._gm._kw.get("node") is not None

    def batch_taken(self, n):
        import time
        self.seen += 1
        if not self.done and self.seen > 1:
            self.samples += n
        self.t_back = time.monotonic()  # the consumer's own time starts here

    def tick(self):
        import time
        if self.done or self.t_back is None:
            return
        if self.seen > 1:  # the first batch's time includes the workers' start
            self.busy_s += time.monotonic() - self.t_back
        self.t_back = None
        if self.seen <= self.BATCHES or self.o._gm._skip_eoe:
            return  # (at an epoch's end its end marker is owed: decide after it)
        st = self.o._gm.stats()
        rate = st.get("worker_img_per_s", 0)
        stage_ns = st["read_ns"] + st["decode_ns"] + st["augment_ns"] + st["write_ns"]
        if not rate and stage_ns:
            rate = st["samples"] / (stage_ns / 1e9)
        demand = st.get("demand_img_per_s", 0) or (
            self.samples / self.busy_s if self.busy_s > 0 else float("inf"))
        cpus = max(1, st.get("workers", 1)) if self.agent else self.cpus
        why = ("workers %.0f img/s each x %d %s = %.0f img/s against the consumer's "
               "demand of %.0f img/s" % (rate, cpus, "workers of the node agent"
                                          if self.agent else "CPUs", rate * cpus, demand))
        if rate * cpus < demand:
            self.decide(True, why + ": short, the CUDA device is there")
        else:
            self.decide(False, why + ": enough")

    def decide(self, on, why):
        self.done = True
        self.o.gpu_decode_reason = why
        _say("goldminer.torch.Loader: gpu_decode='auto': %s: %s\n" % ("on" if on else "off", why))
        if on:
            self.o._choose_finish()
        if on and not self.o._gm.gpu_decode:
            gm = self.o._gm
            sd = gm.state_dict()  # the next batch's position: the same bytes follow
            gm._kw["gpu_decode"] = True
            gm.load_state_dict(sd)


# The zygote server (a fork of this process, while it has one thread): each
# loader's zygote is forked from it with torch loaded, not exec'd (_zserver.py).
# Last: the fork holds this module whole.
from . import _zserver  # noqa: E402
_zserver.start()
