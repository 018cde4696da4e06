"""loader - goldminer.Loader, the Python face of gm_loader_* (include/goldminer/loader.h).

Design: one Loader owns one C handle (its worker processes, its memfd ring).
Iterating it with `for` delivers one epoch, like torch's DataLoader; the next
`for` delivers the next epoch. A batch's pixels are a zero-copy view of its ring
slot (a NumPy array when NumPy is importable, else a typed memoryview); labels and
sample ids are small copies. The handle is closed by close(), by leaving a `with`
block, by garbage collection, or at interpreter exit, whichever comes first, and
only in the process that opened it (a fork()ed child never closes its parent's
workers).

VIEW LIFETIME: batch.data is valid until the next batch is requested from the
same Loader (the slot then goes back to the workers and is overwritten), and
never after close(). Keep `batch.data.copy()` (or pass copy=True) to hold a batch
longer. A view keeps the Loader object alive, so garbage collection never unmaps
memory a live view points to.

copy=True: each batch.data is the caller's for as long as it likes, without a
copy: the library keeps its slot (gm_loader_keep) and it goes back to the workers
at the next request after the last view over it died. A batch held across as many
later ones as the ring has slots is copied once, by the library, to private pages
at the same addresses (the views do not notice). A shuffle_buffer batch is copied.

What it does not do: no threads of its own, no prefetching (the C workers already
run ahead by the ring's depth), no GPU (see goldminer.torch for device="cuda").
One thread uses a Loader at a time.
"""
from __future__ import annotations

import ctypes
import errno
import os
import weakref
from typing import Any, Iterator, Literal, Mapping, Optional, Sequence, Union

from . import _abi
from ._abi import ArgumentError, ArgumentTypeError, LibraryError, lib

try:
    import numpy as _np
except ImportError:  # pure standard library fallback: memoryviews
    _np = None  # type: ignore[assignment]

_OUTPUTS = {"uint8": _abi.GM_OUT_U8_HWC, "float32": _abi.GM_OUT_F32_CHW,
            "float16": _abi.GM_OUT_F16_CHW}
_OUT_NAMES = {v: k for k, v in _OUTPUTS.items()}
_ON_ERROR = {"skip": _abi.GM_ON_ERROR_SKIP, "fail": _abi.GM_ON_ERROR_FAIL}
_MODES = {"train": _abi.GM_AUG_TRAIN, "eval": _abi.GM_AUG_EVAL}
_ERRLEN = 1024

# include/goldminer/limits.h (tests/python/test_loader.py checks these against it)
GM_MAX_WORKERS = 256
GM_MAX_BATCH = 65536
GM_MAX_SLOTS = 1024
GM_MAX_CHAOS_MS = 3600000
GM_MAX_LEASE_MS = 86400000  # include/goldminer/job.h (checked there too)
_MAX_SIDE = 8192  # core/aug.c MAX_SIZE: the largest output side the library takes
_MAX_PIXELS = 10 ** 12  # the range of the pipeline's `decode max_pixels`
_U32, _U64 = (1 << 32) - 1, (1 << 64) - 1
_F32_MAX = 3.4028234663852886e38
PathArg = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]  # root=, node=

# Integer keywords: (lowest, highest, note). The C fields are fixed-width, so a
# value outside them would be silently wrapped by ctypes; each is refused instead,
# naming the range the library accepts.
_INT_ARGS = {
    "batch_size": (1, GM_MAX_BATCH, "GM_MAX_BATCH"),
    "seed": (0, _U64, "64 bits"),
    "epoch": (0, _U32, "32 bits"),
    "epochs": (0, _U32, "0: unlimited"),
    "start_batch": (0, _U64, "64 bits"),
    "size": (1, _MAX_SIDE, "output side in px"),
    "resize": (1, 4 * _MAX_SIDE, "shorter side before the center crop"),
    "max_pixels": (0, _MAX_PIXELS, "0: the default 64000000"),
    "slots": (0, GM_MAX_SLOTS, "0: sized from the workers"),
    "chaos_kill_ms": (0, GM_MAX_CHAOS_MS, "0: off"),
    "max_workers": (0, GM_MAX_WORKERS, "0: the online CPUs"),
    "lease_timeout_ms": (0, GM_MAX_LEASE_MS, "0: the library's default"),
}


def _int_arg(name, v, lo=None, hi=None, note=None):
    """v as an int within [lo, hi] (from _INT_ARGS when not given), else ValueError
    naming the accepted range. bool and float are refused, any int-like accepted."""
    if lo is None:
        lo, hi, note = _INT_ARGS[name]
    rng = "%d..%d%s" % (lo, hi, " (%s)" % note if note else "")
    if isinstance(v, bool) or not hasattr(v, "__index__"):
        raise ArgumentError("%s must be an int in %s, not %r" % (name, rng, v))
    i = v.__index__()
    if not lo <= i <= hi:
        raise ArgumentError("%s must be an int in %s, not %d" % (name, rng, i))
    return i


def _float_arg(name, v, lo=-_F32_MAX, hi=_F32_MAX):
    """v as a float within [lo, hi] that a C float holds as it is (finite), else
    ValueError naming the range (ctypes would turn 1e39 into inf silently)."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        f = None
    if isinstance(v, bool) or f is None or not lo <= f <= hi:  # NaN fails too
        raise ArgumentError("%s must be a finite number in [%g, %g], not %r" % (name, lo, hi, v))
    return f


def _floats_arg(name, v, n, lo=-_F32_MAX, hi=_F32_MAX):
    try:
        vals = list(v)
    except TypeError:
        vals = None
    if vals is None or len(vals) != n:
        raise ArgumentError("%s must be %d numbers, not %r" % (name, n, v))
    return [_float_arg("%s[%d]" % (name, k), x, lo, hi) for k, x in enumerate(vals)]


def _path_arg(name, v):
    """v (str, bytes or os.PathLike) as the bytes the C library gets. A str is
    encoded as os.fsencode does, so a name os.listdir() returned (undecodable
    bytes included, as surrogate escapes) names the same file. TypeError for
    another type; ValueError for a str no file name decodes to (a surrogate that
    is not an escape of a byte) and for a NUL byte (the C string would end there)."""
    try:
        p = os.fspath(v)
    except TypeError:
        raise ArgumentTypeError("%s must be a path (str, bytes or os.PathLike), not %s"
                                % (name, type(v).__name__)) from None
    if isinstance(p, str):
        try:
            b = os.fsencode(p)
        except UnicodeEncodeError as e:
            raise ArgumentError("%s %r is not a file name this system can encode (%s, "
                                "position %d: %s); give the name as bytes, or as the str "
                                "os.fsdecode() makes of them" % (name, p, e.encoding, e.start,
                                                                 e.reason)) from None
    else:
        b = p
    if b"\0" in b:
        raise ArgumentError("%s must not contain a NUL byte: %r" % (name, p))
    return b


def _order_arg(order):
    """order (an iterable of ints) as a C array of uint32, else ValueError."""
    import array
    try:
        a = array.array("I", [_int_arg("order[]", i, 0, _U32, "a dataset id") for i in order])
    except TypeError:
        raise ArgumentError("order must be an iterable of dataset ids, not %r" % (order,))
    if not 0 < len(a) <= _U32 or a.itemsize != 4:
        raise ArgumentError("order must hold 1..%d dataset ids, not %d" % (_U32, len(a)))
    return (ctypes.c_uint32 * len(a)).from_buffer(a)


def _text_arg(name, v):
    """The str v as UTF-8 bytes for the C library, else ValueError naming name."""
    try:
        b = v.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ArgumentError("%s must be text that UTF-8 can encode (position %d: %s)"
                            % (name, e.start, e.reason)) from None
    if b"\0" in b:
        raise ArgumentError("%s must not contain a NUL character" % name)
    return b


GoldminerError = _abi.GoldminerError  # (one base for every error: _abi's)
LoaderError = _abi.LoaderError  # a failure at run time: .errno


def _raise(rc, msg, fn):
    err = -rc
    if not msg:
        msg = "%s: %s" % (fn, os.strerror(err))
    e = LoaderError(err, msg)
    raise e


def _check_signals():
    # PyErr_CheckSignals through ctypes.pythonapi (which keeps the GIL and raises
    # what the handlers raised).
    f = ctypes.pythonapi.PyErr_CheckSignals
    f.restype, f.argtypes = ctypes.c_int, []
    f()


def _close_handle(L, handle, pid, live):
    # weakref.finalize callback: must not reference the Loader. It runs when the
    # Loader is collected (no view is alive then: a view's buffer holds the Loader)
    # or at interpreter exit, where views may still be alive (a script's last
    # batch): then the workers stop and the ring stays mapped, so a view read
    # while the interpreter tears down shows stale bytes, never a crash.
    if not handle or os.getpid() != pid:
        return
    if any(r() is not None for r in live) and L.has("gm_loader_stop"):
        L.gm_loader_stop(handle)
    else:
        L.gm_loader_close(handle)


class Batch:
    """One delivered batch. Unpacks as (data, labels).

    data: view of the ring slot, shape (size, S, S, 3) uint8 (HWC, RGB) or
          (size, 3, S, S) float32 or float16 (CHW, normalised); valid until the
          next batch. Without NumPy the views are memoryviews; float16 ones hold
          the raw half-precision bit patterns as format "H" (uint16), readable
          with struct.unpack("<%de" % n, view) (Python's memoryview cannot cast to
          half floats).
    labels, sample_ids: copies (int32 / uint32 arrays).
    epoch, index: position of this batch; n_errors: samples replaced (on_error=skip).
    """
    __slots__ = ("data", "labels", "sample_ids", "epoch", "index", "n_errors", "_raw")
    data: Any
    labels: Any
    sample_ids: Any
    epoch: int
    index: int
    n_errors: int
    _raw: Any

    def __iter__(self) -> Iterator[Any]:
        return iter((self.data, self.labels))

    def __len__(self) -> int:
        return len(self.labels)

    def __repr__(self) -> str:
        return "<goldminer.Batch epoch=%d index=%d size=%d>" % (self.epoch, self.index,
                                                                len(self.labels))


class Loader:
    """Batches of an ImageFolder tree decoded and augmented by goldminer workers.

    Loader(root, pipeline=None, batch_size=64, workers="auto"|N, seed=0, epoch=0,
           output="uint8"|"float32"|"float16", on_error="skip"|"fail", ...)

    root       ImageFolder root (root/<class>/*.jpg), classes sorted like torchvision.
    pipeline   pipeline spec text (see `goldminer plan`), e.g. "read | decode |
               random_resized_crop 224 | flip 0.5 | to_chw_f32 | batch 64"; it then
               decides the transform, the output layout and the batch size (the
               keyword arguments for those are ignored). None: the keywords decide.
    batch_size samples per batch.
    workers    worker processes, or "auto": elastic, sized by the library's policy
               from measured rates within max_workers (0: the online CPUs).
    seed       shuffling and augmentation seed; same seed -> same bytes.
    epoch      first epoch; epochs: how many to deliver (0 = unlimited).
    output     "uint8" (N,S,S,3 HWC), "float32" (N,3,S,S normalised CHW) or
               "float16" (the float32 values rounded to nearest even: half the
               ring and half the host-to-device copy, for mixed precision).
    on_error   "skip" (replace a bad sample deterministically, see errors())
               or "fail" (iteration raises GoldminerError naming the file).
    size, mode ("train": RandomResizedCrop+flip, "eval": resize+center crop),
    scale, ratio, flip_p, resize, mean, std, max_pixels: the transform.
    shuffle, drop_last, slots, start_batch, pin: as in struct gm_loader_opts.
    copy       True: batches the caller owns, never overwritten (see above).
    chaos_kill_ms  testing: SIGKILL a random worker every N ms (batches stay the same).
    node       path of a node agent's socket (`goldminer node`): the workers run in
               the agent; None: here, as children of this process.
    lease_timeout_ms  a worker whose batch makes no progress this long is killed
               and the batch made again (0: the library's default, 5000).
    order      None, or the dataset ids of every epoch in order (a torch sampler's
               indices, repeats allowed; `shuffle` is then ignored): batch k is
               order[k*batch_size:(k+1)*batch_size]. Workers here only (not with
               node). ValueError for an id that is not a uint32 or an empty order;
               GoldminerError for an id past the dataset.

    root and node are paths: str, bytes or os.PathLike (a str is encoded as
    os.fsencode() does, so names from os.listdir() work whatever their bytes).

    Raises (each a goldminer.GoldminerError) LoaderError, an OSError and
    RuntimeError with the C message, when the library rejects the dataset or an
    option; ArgumentError, a ValueError, for options the binding itself rejects:
    a number outside the range its C field (or the library) accepts, never
    wrapped or rounded to fit (seed 0..2**64-1, batch_size 1..GM_MAX_BATCH,
    max_pixels 0..10**12, a float that a C float cannot hold, ...), an empty
    pipeline, a root, node or pipeline that cannot be encoded (or holds a NUL);
    ArgumentTypeError, a TypeError, for a root or node that is not a path.

    A Loader cannot be pickled (nor copied): it owns worker processes and a
    shared-memory ring. Hand its arguments to another process and open a Loader
    there.
    """

    def __init__(self, root: PathArg, pipeline: Optional[str] = None, batch_size: int = 64,
                 workers: Union[int, str] = "auto", seed: int = 0, epoch: int = 0,
                 output: str = "uint8", on_error: str = "skip", *, epochs: int = 0,
                 size: int = 224, mode: str = "train",
                 scale: Optional[Sequence[float]] = None,
                 ratio: Optional[Sequence[float]] = None, flip_p: Optional[float] = None,
                 resize: Optional[int] = None, mean: Optional[Sequence[float]] = None,
                 std: Optional[Sequence[float]] = None,
                 max_pixels: Optional[int] = None, shuffle: bool = True,
                 drop_last: bool = False, slots: int = 0, start_batch: int = 0,
                 pin: bool = True, copy: bool = False, chaos_kill_ms: int = 0,
                 max_workers: int = 0, node: Optional[PathArg] = None,
                 lease_timeout_ms: int = 0, order: Optional[Any] = None,
                 gpu_decode: bool = False) -> None:
        self._h = None
        self._live: list[Any] = []  # weak references to the buffers of views handed out
        self._dead: list[Any] = []  # (handle, slot) of kept batches whose last view died
        # id -> their weak references (alive while the views are)
        self._kept_refs: dict[int, Any] = {}
        if output not in _OUTPUTS:
            raise ArgumentError("output must be 'uint8', 'float32' or 'float16', not %r"
                                % (output,))
        if on_error not in _ON_ERROR:
            raise ArgumentError("on_error must be 'skip' or 'fail', not %r" % (on_error,))
        if mode not in _MODES:
            raise ArgumentError("mode must be 'train' or 'eval', not %r" % (mode,))
        if workers == "auto":
            nworkers = 0
        elif isinstance(workers, int) and not isinstance(workers, bool) and workers >= 1:
            nworkers = _int_arg("workers", workers, 1, GM_MAX_WORKERS, "or 'auto'")
        else:
            raise ArgumentError("workers must be 'auto' or an int >= 1, not %r" % (workers,))
        if pipeline is not None and not isinstance(pipeline, str):
            raise ArgumentError("pipeline must be a spec (str) or None, not %r" % (pipeline,))
        if pipeline is not None and not pipeline.strip():
            raise ArgumentError("pipeline must not be empty: give a spec (see `goldminer plan`),"
                                " or None for the keyword arguments")
        # the bytes the C library gets (it copies them: they need not outlive open)
        self._root_b = _path_arg("root", root)
        self._node_b = _path_arg("node", node) if node is not None else None
        self._pipeline_b = _text_arg("pipeline", pipeline) if pipeline is not None else None
        ints = dict(batch_size=batch_size, seed=seed, epoch=epoch, epochs=epochs,
                    start_batch=start_batch, size=size, slots=slots,
                    chaos_kill_ms=chaos_kill_ms, max_workers=max_workers)
        if resize is not None:
            ints["resize"] = resize
        if max_pixels is not None:
            ints["max_pixels"] = max_pixels
        ints = {k: _int_arg(k, v) for k, v in ints.items()}
        batch_size, seed, size = ints["batch_size"], ints["seed"], ints["size"]
        epoch, epochs, start_batch = ints["epoch"], ints["epochs"], ints["start_batch"]
        slots, chaos_kill_ms, max_workers = ints["slots"], ints["chaos_kill_ms"], \
            ints["max_workers"]
        resize, max_pixels = ints.get("resize"), ints.get("max_pixels")
        if scale is not None:
            scale = tuple(_floats_arg("scale", scale, 2))
        if ratio is not None:
            ratio = tuple(_floats_arg("ratio", ratio, 2))
        if flip_p is not None:
            flip_p = _float_arg("flip_p", flip_p, 0.0, 1.0)
        if mean is not None:
            mean = _floats_arg("mean", mean, 3)
        if std is not None:
            std = _floats_arg("std", std, 3)
        lease_timeout_ms = _int_arg("lease_timeout_ms", lease_timeout_ms)
        self._order = _order_arg(order) if order is not None else None
        if not isinstance(gpu_decode, bool):
            raise ArgumentError("gpu_decode must be True or False here, not %r (goldminer.torch."
                                "Loader takes 'auto')" % (gpu_decode,))
        self._L = lib()
        if gpu_decode and not self._L.has("gm_loader_finish"):
            raise LibraryError("%s has no gm_loader_finish (gpu_decode): rebuild it (make)"
                               % self._L.path)
        self._kw = dict(root=os.fspath(root), pipeline=pipeline, batch_size=batch_size,
                        workers=workers, seed=seed, epoch=epoch, output=output,
                        on_error=on_error, epochs=epochs, size=size, mode=mode, scale=scale,
                        ratio=ratio, flip_p=flip_p, resize=resize, mean=mean, std=std,
                        max_pixels=max_pixels, shuffle=shuffle, drop_last=drop_last,
                        slots=slots, start_batch=start_batch, pin=pin, copy=copy,
                        chaos_kill_ms=chaos_kill_ms, max_workers=max_workers, node=node,
                        lease_timeout_ms=lease_timeout_ms, order=order, gpu_decode=gpu_decode)
        self.output, self.batch_size, self.seed, self.copy = output, batch_size, seed, copy
        self._nworkers = nworkers
        self._open(epoch, epochs, start_batch)

    # --- opening and closing ------------------------------------------------
    def _opts(self, epoch, epochs, start_batch):
        kw, L = self._kw, self._L
        o = _abi.LoaderOpts()
        L.gm_loader_opts_default(ctypes.byref(o))
        if o.aug.size == 0:  # opts_default left the transform empty: fill it
            L.gm_aug_spec_default(ctypes.byref(o.aug))
        o.root = self._root_b
        o.pipeline = self._pipeline_b
        o.batch_size = kw["batch_size"]
        o.workers = self._nworkers
        o.seed = kw["seed"]
        o.epoch = epoch
        o.epochs = epochs
        o.start_batch = start_batch
        o.slots = kw["slots"]
        o.on_error = _ON_ERROR[kw["on_error"]]
        o.drop_last = bool(kw["drop_last"])
        o.shuffle = bool(kw["shuffle"])
        o.no_pin = not kw["pin"]
        o.chaos_kill_ms = kw["chaos_kill_ms"]
        o.max_workers = kw["max_workers"]
        o.lease_timeout_ms = kw["lease_timeout_ms"]
        if self._order is not None:  # the library copies it at open
            o.order = ctypes.cast(self._order, ctypes.POINTER(ctypes.c_uint32))
            o.order_len = len(self._order)
        o.node = self._node_b
        o.gpu_decode = bool(kw["gpu_decode"])
        a = o.aug
        a.mode = _MODES[kw["mode"]]
        a.size = kw["size"]
        a.out = _OUTPUTS[kw["output"]]
        if kw["scale"] is not None:
            a.scale_min, a.scale_max = kw["scale"]
        if kw["ratio"] is not None:
            a.ratio_min, a.ratio_max = kw["ratio"]
        if kw["flip_p"] is not None:
            a.flip_p = kw["flip_p"]
        if kw["resize"] is not None:
            a.resize = kw["resize"]
        if kw["mean"] is not None:
            a.mean[:] = list(kw["mean"])
        if kw["std"] is not None:
            a.std[:] = list(kw["std"])
        if kw["max_pixels"] is not None:
            a.max_pixels = kw["max_pixels"]
        return o

    def _open(self, epoch, epochs, start_batch):
        o = self._opts(epoch, epochs, start_batch)
        h = ctypes.c_void_p()
        err = ctypes.create_string_buffer(_ERRLEN)
        rc = self._L.gm_loader_open(ctypes.byref(h), ctypes.byref(o), err, _ERRLEN)
        if rc < 0:
            _raise(rc, err.value.decode(errors="replace"), "gm_loader_open")
        self._h = h.value
        self._pid = os.getpid()
        self._fin = weakref.finalize(self, _close_handle, self._L, self._h, self._pid,
                                     self._live)
        self._epoch0, self._epochs = epoch, epochs
        self._raw = _abi.Batch()
        self._finished = False
        self._skip_eoe = False  # an epoch's last batch was delivered, its end marker not yet
        self._last_epoch = epoch
        self._sample_bytes = _abi_out_bytes(self._L, o.aug)
        self._side = o.aug.size
        st = self._stats_raw()
        if st.sample_bytes:
            # The transform in effect (a pipeline spec may have chosen the layout,
            # the size and the batch size): the views are shaped from it.
            self.output = _OUT_NAMES.get(st.out, "uint8")
            self.batch_size = st.batch_size
            self._sample_bytes, self._side = st.sample_bytes, st.size
            self._kw.update(output=self.output, batch_size=st.batch_size, size=st.size,
                            mode="eval" if st.mode == _abi.GM_AUG_EVAL else "train")
        self._bpe = st.batches_per_epoch
        self.num_classes, self.dataset_size = st.num_classes, st.dataset_size
        # a finished sample's bytes (with gpu_decode the ring's slots are larger:
        # coefficient slots, which _finish turns into samples of this size)
        elem = {"uint8": 1, "float16": 2, "float32": 4}[self.output]
        self.out_bytes = 3 * self._side * self._side * elem if self._side else \
            self._sample_bytes

    @property
    def gpu_decode(self) -> bool:
        """True when the workers write coefficient slots (finished by _finish)."""
        return bool(self._kw["gpu_decode"])

    def _finish(self, raw, addr, nbytes):
        """gpu_decode: the host path, in this process: raw's coefficient slots
        finished into nbytes at addr (raw.size * out_bytes), the CPU path's bytes."""
        rc = self._L.gm_loader_finish(self._handle(), ctypes.byref(raw), addr, nbytes)
        if rc < 0:
            _raise(rc, self._errmsg(), "gm_loader_finish")

    def _finish_device(self, raw, addr, nbytes, stream, sync=False):
        """gpu_decode on a CUDA device: raw's slots finished by the kernels into
        nbytes of device memory at addr, ordered on the cudaStream_t `stream` (an
        int, 0 the legacy default stream); on return the slot may go back."""
        rc = self._L.gm_loader_finish_device(self._handle(), ctypes.byref(raw), addr, nbytes,
                                             stream or None, 1 if sync else 0)
        if rc < 0:
            _raise(rc, self._errmsg(), "gm_loader_finish_device")

    def _device_finish_why(self) -> Optional[str]:
        """None when gpu_decode's batches can be finished on a CUDA device in this
        process (libgoldminer-cuda.so and a device), else why not, in words."""
        if not self._L.has("gm_loader_device_finish_ready"):
            return ("%s has no gm_loader_device_finish_ready: a library built before the "
                    "GPU decode's kernels were loadable (rebuild it: make)" % self._L.path)
        why = ctypes.create_string_buffer(512)
        if self._L.gm_loader_device_finish_ready(why, len(why)):
            return None
        return why.value.decode("utf-8", "replace")

    def _view_died(self, ref):
        try:
            self._live.remove(ref)
        except ValueError:
            pass
        if self._h is None and not self._live and self._fin.alive:
            self._fin()  # closed earlier with views alive: the last one is gone now

    def close(self) -> None:
        """Stop the workers and unmap the ring. Idempotent. If views of batches are
        still alive, the workers stop now and the ring is unmapped when the last
        view dies, so a view read after close() shows stale bytes, never a crash."""
        if self._h is not None:
            h, self._h = self._h, None
            if not self._fin.alive:
                return  # its finalizer ran (interpreter exit): the handle is gone
            self._live[:] = [r for r in self._live if r() is not None]  # (shared)
            if self._live and self._L.has("gm_loader_stop"):
                self._L.gm_loader_stop(h)
            else:
                self._fin()

    @property
    def closed(self) -> bool:
        return self._h is None or not self._fin.alive

    def __reduce_ex__(self, protocol):
        # pickle, copy.copy and copy.deepcopy all come here
        raise ArgumentTypeError("goldminer.Loader cannot be pickled or copied: it owns worker "
                                "processes and a shared-memory ring; pickle its arguments instead "
                                "and open a Loader where they arrive")

    def __enter__(self) -> Loader:
        return self

    def __exit__(self, *exc: object) -> Literal[False]:
        self.close()
        return False

    def _handle(self):
        if self._h is None or not self._fin.alive:  # (alive: not run at exit)
            raise ArgumentError("goldminer.Loader is closed")
        if os.getpid() != self._pid:
            # A fork()ed child shares the parent's ring mapping but not its
            # coordinator thread or its workers: using the handle there would
            # race the parent on the ring (or crash). Open a Loader in the child.
            raise LoaderError(errno.ECHILD, "goldminer.Loader: this loader belongs to"
                              " process %d; a fork()ed child (pid %d) cannot use it:"
                              " open a new Loader in the child" % (self._pid, os.getpid()))
        return self._h

    def _keep_alive_while(self, buf):
        # buf is a ctypes array over a ring slot that a view (NumPy array, memoryview
        # or torch tensor) holds: while it lives, close() only stops the workers and
        # the ring stays mapped; the last one to die unmaps it (_view_died).
        buf._owner = self
        self._live.append(weakref.ref(buf, self._view_died))

    def _keep(self, raw):
        """Keep raw's batch past the next request (gm_loader_keep: raw.data now
        points into a second mapping of its slot). False if the library cannot (a
        shuffle_buffer batch, an older library): the caller copies instead."""
        h = self._handle()
        return self._L.has("gm_loader_keep") and self._L.gm_loader_keep(h, ctypes.byref(raw)) == 0

    def _give_back_when_dead(self, raw, buf):
        """Give raw's kept batch back once buf, the buffer under every view of it,
        dies. Any thread may drop the last view: the consumer gives it back at its
        next request (_give_back), where it alone calls the library."""
        dead, refs, key = self._dead, self._kept_refs, (self._h, raw.slot, raw.data)

        def died(ref):
            dead.append(key)
            refs.pop(id(ref), None)
        r = weakref.ref(buf, died)
        refs[id(r)] = r

    def _give_back(self):
        while self._dead:
            h, slot, data = self._dead.pop()
            if h == self._h:  # not a handle closed since (load_state_dict reopens)
                b = _abi.Batch()
                b.slot, b.data = slot, data
                self._L.gm_loader_release(h, ctypes.byref(b))

    def _errmsg(self):
        m = self._L.gm_loader_errmsg(self._h)
        return m.decode(errors="replace") if m else ""

    # --- iteration ------------------------------------------------------------
    def __len__(self) -> int:
        """Batches per epoch."""
        return self._bpe

    def __iter__(self) -> Iterator[Batch]:
        """One epoch of Batch objects (the next epoch on the next `for`). A loop
        left early continues where it stopped on the next `for`."""
        self._handle()
        return self._epoch_iter(self._wrap)

    def _epoch_iter(self, convert, before_next=None):
        # One epoch of convert(raw batch); before_next() runs before each request
        # (the torch adapter waits there for the device copy of the previous batch).
        yielded = 0
        while not self._finished:
            skip = self._skip_eoe and yielded == 0
            if before_next is not None:
                before_next()
            raw = self._next_raw()
            if raw is None:
                if skip and not self._finished:
                    continue  # the end marker of the epoch a previous loop finished
                return
            yielded += 1
            yield convert(raw)

    def next_batch(self) -> Optional[Batch]:
        """The next Batch, or None at the end of an epoch or of all epochs (then
        `finished` is True). Releases the previous batch. Raises GoldminerError."""
        raw = self._next_raw()
        return None if raw is None else self._wrap(raw)

    def _next_raw(self):
        # The struct gm_batch just filled (reused on every call), or None.
        h = self._handle()
        if self._finished:
            return None
        raw = self._raw
        if self._dead:
            self._give_back()
        rc = self._L.gm_loader_next(h, ctypes.byref(raw))
        while rc == -errno.EINTR:
            # A signal arrived while the C library waited: run Python's handlers
            # now (Ctrl-C raises KeyboardInterrupt here), then wait on (PEP 475).
            _check_signals()
            rc = self._L.gm_loader_next(h, ctypes.byref(raw))
        if rc < 0:
            _raise(rc, self._errmsg(), "gm_loader_next")
        if rc == _abi.GM_LOADER_END_OF_EPOCH:
            self._skip_eoe = False
            if self._epochs and self._last_epoch + 1 >= self._epoch0 + self._epochs:
                self._finished = True  # the next call could only say GM_LOADER_END
            return None
        if rc == _abi.GM_LOADER_END:
            self._finished = True
            return None
        if rc != 0:
            raise LoaderError(0, "gm_loader_next: unexpected result %d" % rc)
        # After an epoch's last batch an END_OF_EPOCH is still due; a new `for`
        # begun right there must not see it as an empty epoch.
        self._skip_eoe = bool(self._bpe) and raw.index + 1 >= self._bpe
        self._last_epoch = raw.epoch
        return raw

    def _wrap(self, raw):
        n = raw.size
        b = Batch()
        b.epoch, b.index, b.n_errors, b._raw = raw.epoch, raw.index, raw.n_errors, raw
        if self.gpu_decode:
            # the host path finishes the slots into a buffer of the caller's own;
            # the slot goes back to the workers at once
            buf = (ctypes.c_uint8 * (n * self.out_bytes))()
            self._finish(raw, ctypes.addressof(buf), len(buf))
            b.data = _shape(buf, n, self.out_bytes, self.output, False)
            b.labels, b.sample_ids = _copies(raw, n)
            self.release()
            return b
        nbytes = n * raw.sample_bytes
        kept = self.copy and self._keep(raw)  # owned without a copy (gm_loader_keep)
        buf = (ctypes.c_uint8 * nbytes).from_address(raw.data)
        self._keep_alive_while(buf)
        if kept:
            self._give_back_when_dead(raw, buf)
        b.data = _shape(buf, n, raw.sample_bytes, self.output, self.copy and not kept)
        b.labels, b.sample_ids = _copies(raw, n)
        return b

    def release(self) -> None:
        """Give the current batch's slot back to the workers now (its view dies)."""
        rc = self._L.gm_loader_release(self._handle(), ctypes.byref(self._raw))
        if rc < 0:
            _raise(rc, self._errmsg(), "gm_loader_release")

    @property
    def finished(self) -> bool:
        """True once all requested epochs were delivered."""
        return self._finished

    # --- control and introspection --------------------------------------------
    def _stats_raw(self):
        s = _abi.LoaderStats()
        self._L.gm_loader_stats(self._handle(), ctypes.byref(s))
        return s

    def stats(self) -> dict[str, Any]:
        """Counters of struct gm_loader_stats as a dict."""
        s = self._stats_raw()
        return {name: (list(getattr(s, name)) if hasattr(getattr(s, name), "__len__")
                       else getattr(s, name)) for name, _ in s._fields_}

    def errors(self) -> list[tuple[str, str]]:
        """Bad samples met so far: list of (path, message)."""
        out: list[tuple[str, str]] = []
        if not self._L.has("gm_loader_error"):
            return out
        h = self._handle()
        n = self._stats_raw().errors
        for i in range(n):
            p, m = ctypes.c_char_p(), ctypes.c_char_p()
            if self._L.gm_loader_error(h, i, ctypes.byref(p), ctypes.byref(m)) == 0:
                out.append(((p.value or b"").decode(errors="replace"),
                            (m.value or b"").decode(errors="replace")))
        return out

    def scale(self, n: int) -> None:
        """Set the number of worker processes (int >= 1)."""
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ArgumentError("scale(n) needs an int >= 1, not %r" % (n,))
        n = _int_arg("scale(n)", n, 1, GM_MAX_WORKERS, "GM_MAX_WORKERS")
        if not self._L.has("gm_loader_scale"):
            raise LibraryError("%s has no gm_loader_scale: rebuild it (make)" % self._L.path)
        rc = self._L.gm_loader_scale(self._handle(), n)
        if rc < 0:
            _raise(rc, self._errmsg(), "gm_loader_scale")
        self._nworkers = n

    def position(self) -> tuple[int, int]:
        """(epoch, batch) that the next batch will have."""
        ce, ck = ctypes.c_uint32(), ctypes.c_uint64()
        self._L.gm_loader_position(self._handle(), ctypes.byref(ce), ctypes.byref(ck))
        e, k = ce.value, ck.value
        if self._bpe and k >= self._bpe:
            e, k = e + 1, 0
        return e, k

    def state_dict(self) -> dict[str, Any]:
        """Where to resume: the batch after the last one delivered, plus what must
        match for the bytes to be the same (root, seed, batch size, transform)."""
        e, k = self.position()
        kw = self._kw
        return {"epoch": e, "batch": k,
                "epochs_end": (self._epoch0 + self._epochs) if self._epochs else 0,
                "root": kw["root"], "seed": kw["seed"], "batch_size": kw["batch_size"],
                "output": kw["output"], "size": kw["size"], "mode": kw["mode"],
                "pipeline": kw["pipeline"], "shuffle": kw["shuffle"],
                "drop_last": kw["drop_last"], "dataset_size": self.dataset_size}

    _MUST_MATCH = ("seed", "batch_size", "output", "size", "mode", "pipeline", "shuffle",
                   "drop_last")

    def load_state_dict(self, sd: Mapping[str, Any]) -> None:
        """Continue from state_dict() sd: the workers restart at sd's position, and
        the following batches are byte-identical to those of an uninterrupted run."""
        bad = [k for k in self._MUST_MATCH if k in sd and sd[k] != self._kw[k]]
        if "dataset_size" in sd and sd["dataset_size"] != self.dataset_size:
            bad.append("dataset_size")
        if bad:
            raise ArgumentError("state_dict does not match this Loader: " + ", ".join(
                "%s=%r (loader has %r)" % (k, sd[k], self._kw.get(k, self.dataset_size))
                for k in bad))
        epoch = _int_arg("state_dict epoch", sd["epoch"], 0, _U32, "32 bits")
        batch = _int_arg("state_dict batch", sd["batch"], 0, _U64, "64 bits")
        end = _int_arg("state_dict epochs_end", sd.get("epochs_end", 0), 0, 2 * _U32, "")
        if end and epoch >= end:
            epochs = None  # nothing left
        else:
            epochs = _int_arg("state_dict epochs", (end - epoch) if end else 0, 0, _U32,
                              "epochs_end - epoch")
        self._handle()
        self.close()
        if epochs is None:
            self._open(epoch, 1, 0)
            self._finished = True
        else:
            self._open(epoch, epochs, batch)

    def copy_to_device(self, batch: Batch, dst: int) -> None:
        """gm_loader_copy_to_device: copy batch's bytes to the device pointer dst
        (an int). Only the current batch can be copied (ValueError otherwise).
        Raises GoldminerError (ENODEV without a GPU)."""
        if (batch.epoch, batch.index) != (self._raw.epoch, self._raw.index):
            raise ArgumentError("copy_to_device: batch %d of epoch %d is no longer current"
                                % (batch.index, batch.epoch))
        rc = self._L.gm_loader_copy_to_device(self._handle(), ctypes.byref(batch._raw), dst)
        if rc < 0:
            _raise(rc, self._errmsg(), "gm_loader_copy_to_device")

    def __repr__(self) -> str:
        return "<goldminer.Loader %r batch_size=%d %s%s>" % (
            self._kw["root"], self.batch_size, self.output, " closed" if self.closed else "")


def _copies(raw, n):
    """raw's labels and sample ids as copies (NumPy arrays, else lists)."""
    lab = (ctypes.c_int32 * n).from_address(ctypes.cast(raw.labels, ctypes.c_void_p).value)
    ids = (ctypes.c_uint32 * n).from_address(
        ctypes.cast(raw.sample_ids, ctypes.c_void_p).value) if raw.sample_ids else None
    if _np is not None:
        return (_np.array(lab, dtype=_np.int32),
                _np.array(ids, dtype=_np.uint32) if ids is not None else None)
    return list(lab), list(ids) if ids is not None else None


def _abi_out_bytes(L, aug):
    return L.gm_aug_out_bytes(ctypes.byref(aug))


def _shape(buf, n, sample_bytes, output, copy):
    """View (or copy) of n samples of sample_bytes in buf with the layout's shape."""
    if output == "uint8":
        elem, code = 1, "B"
        side = _isqrt_exact(sample_bytes // 3) if sample_bytes % 3 == 0 else None
        shape = (n, side, side, 3) if side else (n, sample_bytes)
    else:
        # float16 without NumPy: memoryview cannot cast to "e" (half), so the
        # view holds the raw IEEE half bit patterns as "H" (uint16), same shape
        # and bytes; struct.unpack("<%de" % n, view) or numpy.frombuffer(view,
        # numpy.float16) read them as numbers.
        elem, code = (2, "H") if output == "float16" else (4, "f")
        per = 3 * elem
        side = _isqrt_exact(sample_bytes // per) if sample_bytes % per == 0 else None
        shape = (n, 3, side, side) if side else (n, sample_bytes // elem)
    if _np is not None:
        dt = {1: _np.uint8, 2: _np.float16, 4: _np.float32}[elem]
        a = _np.frombuffer(buf, dtype=dt).reshape(shape)
        return a.copy() if copy else a
    raw = memoryview(buf).cast("B")  # ctypes says "<B"; cast() wants plain bytes first
    if copy:
        raw = memoryview(bytearray(raw))
    return raw.cast(code, shape)


def _isqrt_exact(v):
    import math
    r = math.isqrt(v)
    return r if r * r == v and r > 0 else None
