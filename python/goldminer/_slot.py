"""_slot - the layout of a Python batch in a ring slot, and the per-sample seeds.

A slot's payload is what collate_fn returned, laid out so that the trainer can
view it without a copy:

    offset 0   u64 total bytes of the payload (for -EMSGSIZE: the bytes needed)
    offset 8   u64 bytes of the tree
    offset 16  8 bytes "GMPYSLOT" ("GMPYFAIL": a failed batch, the pickled exception)
    offset 24  u32 epoch, u32 batch index: the batch's place (stamp())
    offset 32  u64 the lease's digest: gm_checksum64 from its offset basis over
               the slot's ids[] (epoch, batch, the sample indices, u32 each)
    offset 40  24 reserved
    offset 64  the tree: a pickle of the result's structure in which every tensor
               and array is replaced by a small record (kind, dtype, shape, offset)
    then       each array's bytes, C-contiguous, at a 64-byte aligned offset

The tree carries tensors, NumPy arrays, numbers (Python and NumPy scalars), bools,
None, strings, bytes and tuples, lists, dicts and namedtuples of them; anything
else is refused with the path to it (`batch[1]['mask']`), at the first batch.
The trainer rebuilds tensors with torch.frombuffer over the ring: they view the
slot until the next batch is asked for (copy=True: owned copies, see Owned).
collate_into() lays out torch's default_collate of (tensor, number) items the
same way with the stack made in the slot itself (no batch tensor in between).

Every field but the reserved ones is one the node agent that vouches for a peer's
batch (core/remote/check.c, gm_remote_check_pyslot) compares with the lease it
granted: the layout is a contract between the worker, the trainer and that check.

Seeds (the same bytes whatever the worker count): before dataset[i] the worker seeds
Python's random, NumPy's global generator and torch's default (CPU) generator from
(seed, epoch, i), and before collate_fn from (seed, epoch, batch index), so the bytes
of a batch do not depend on which worker made it, how many there are, or how often it
was re-issued.
A transform's own generator object is not covered.
"""
import ctypes
import pickle
import random
import struct
import sys

from . import _abi

MAGIC = b"GMPYSLOT"
HDR = 64
ALIGN = 64
M64 = (1 << 64) - 1

try:
    import numpy as _np
except ImportError:  # pragma: no cover - numpy is optional
    _np = None  # type: ignore[assignment]
try:
    import torch as _torch
except ImportError:  # pragma: no cover - torch is optional for the worker
    _torch = None


class LayoutError(_abi.GoldminerError, TypeError):
    """collate_fn returned something the ring cannot carry."""


class Owned:
    """Buffers for copy=True batches (the caller's own, kept as long as it likes,
    never overwritten), each reused only once nothing holds it: no tensor, view,
    storage or NumPy array over it is alive (a storage made by torch.frombuffer
    holds a reference to the buffer, so the buffer's reference count says so).
    A buffer's pages are touched once, when made: a fresh allocation per batch
    page-faults on each 4 KiB page of it, which costs several times the copy.
    Tensors under MIN bytes are cloned (malloc reuses small blocks anyway)."""

    KEEP = 4  # buffers tracked per size; a caller keeping more gets new ones
    SIZES = 8  # sizes tracked (the least recently used one is let go)
    MIN = 256 << 10

    def __init__(self):
        self._bufs = {}  # nbytes -> [bytearray], in insertion order = use order

    def copy(self, x):
        """An owned copy of tensor x (same shape and dtype, contiguous)."""
        nbytes = x.numel() * x.element_size()
        if nbytes < self.MIN:
            return x.clone()
        bufs = self._bufs.pop(nbytes, [])
        self._bufs[nbytes] = bufs  # now the most recently used size
        for b in bufs:
            # references: the list, b, getrefcount's argument; one more while a
            # storage (any tensor, view or array over it) is alive
            if sys.getrefcount(b) == 3:
                return self._over(b, x)
        # none free: the oldest one held is left to its holder (it dies with the
        # last tensor over it) and a new one made in its place
        del bufs[:max(0, len(bufs) - self.KEEP + 1)]
        if len(self._bufs) > self.SIZES:
            del self._bufs[next(iter(self._bufs))]
        b = bytearray(nbytes + 64)  # zeroed: every page touched now, once
        bufs.append(b)
        return self._over(b, x)

    @staticmethod
    def _over(b, x):
        addr = ctypes.addressof(ctypes.c_char.from_buffer(b))
        off = -addr % 64  # aligned as torch's own allocations
        out = _torch.frombuffer(b, dtype=x.dtype, count=x.numel(), offset=off)
        return out.view(x.shape).copy_(x)

    def buffers(self):
        """Every buffer tracked now (for tests)."""
        return [b for bufs in self._bufs.values() for b in bufs]

    def clear(self):
        self._bufs = {}


def _mix(x):
    """splitmix64 finaliser: a well-spread 64-bit value of x."""
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def seed_base(seed, epoch):
    """What the seeds of one epoch share (a worker computes it once a batch)."""
    return _mix(_mix(seed & M64) ^ (epoch & M64))


def seed_at(base, what):
    """seed_of(seed, epoch, what) from seed_base(seed, epoch)."""
    return _mix(base ^ (what & M64))


def index_key(i):
    """What an index seeds by: an int index itself; anything else a sampler
    yields (a list of indices, a key) a stable 63-bit digest of its repr."""
    if isinstance(i, int):
        return i
    import hashlib
    d = hashlib.blake2b(repr(i).encode(), digest_size=8).digest()
    return int.from_bytes(d, "little") & ((1 << 63) - 1)


def seed_of(seed, epoch, what):
    """The 64-bit seed of sample `what` (or of a batch's collate: what = -1 - k)."""
    return seed_at(seed_base(seed, epoch), what)


# _random.Random.seed, under random.seed's checks
_c_seed = random.Random.__mro__[1].seed  # type: ignore[attr-defined]


# torch's default generator is not seeded per sample in this process: a worker's
# worker_init_fn seeded it itself (torch.manual_seed), which torch honours
torch_taken = False


def seed_all(s):
    """Seed the three global generators a transform usually draws from (torch's
    not when worker_init_fn took it over: torch_taken)."""
    # what random.seed(s) does for an int s, without its Python wrapper (a third
    # of its cost, paid once a sample)
    _c_seed(random._inst, s)
    random._inst.gauss_next = None
    if _np is not None:
        _np.random.seed(s & 0xFFFFFFFF)
    if _torch is not None and not torch_taken:
        # the CPU generator only: torch.manual_seed would also look for CUDA/MPS/XPU
        # generators, 20x the cost, for a DataLoader's workers that draw on the CPU
        _torch.default_generator.manual_seed(s & ((1 << 63) - 1))


def _align(n):
    return (n + ALIGN - 1) // ALIGN * ALIGN


_LEAVES = (int, float, complex, bool, str, bytes, type(None))


def _flatten(obj, arrays, path):
    """obj with every array replaced by ("@a", index); arrays collected in order."""
    if _torch is not None and isinstance(obj, _torch.Tensor):
        arrays.append(obj)
        return ("@t", len(arrays) - 1, str(obj.dtype).split(".")[1], tuple(obj.shape))
    if _np is not None and isinstance(obj, _np.ndarray):
        if obj.dtype.hasobject:
            raise LayoutError("%s is a NumPy array of Python objects: the ring carries"
                              " arrays of numbers only" % path)
        arrays.append(obj)
        return ("@n", len(arrays) - 1, obj.dtype.str, obj.shape)
    if isinstance(obj, _LEAVES) or (_np is not None and isinstance(obj, _np.generic)):
        return ("@v", obj)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return ("@nt", type(obj), [_flatten(v, arrays, "%s.%s" % (path, f))
                                   for f, v in zip(obj._fields, obj)])
    if isinstance(obj, (tuple, list)):
        kind = "@tu" if isinstance(obj, tuple) else "@li"
        return (kind, [_flatten(v, arrays, "%s[%d]" % (path, i)) for i, v in enumerate(obj)])
    if isinstance(obj, dict):
        return ("@d", [(k, _flatten(v, arrays, "%s[%r]" % (path, k))) for k, v in obj.items()])
    raise LayoutError("%s is a %s.%s: the ring carries tensors, NumPy arrays, numbers,"
                      " strings, bytes and tuples, lists, dicts and namedtuples of them"
                      " (convert it in collate_fn)"
                      % (path, type(obj).__module__, type(obj).__qualname__))


def _raw(a):
    """The bytes of array a as a flat uint8 view (tensor) or memoryview (NumPy)."""
    if _torch is not None and isinstance(a, _torch.Tensor):
        t = a.detach()
        if t.device.type != "cpu":
            t = t.cpu()
        t = t.contiguous().reshape(-1)
        return t.view(_torch.uint8) if t.numel() else None
    return memoryview(_np.ascontiguousarray(a).reshape(-1).view(_np.uint8)) if a.size else None


def pack(obj, dumps=pickle.dumps):
    """(tree bytes, [(offset, raw)], total bytes) of a collate result."""
    arrays = []
    tree = _flatten(obj, arrays, "batch")
    tb = dumps(tree)
    off = _align(HDR + len(tb))
    parts = []
    for a in arrays:
        r = _raw(a)
        n = 0 if r is None else (r.numel() if hasattr(r, "numel") else r.nbytes)
        parts.append((off, r, n))
        off = _align(off + n)
    return tb, parts, off


def write(buf, packed):
    """Write a pack() result into writable buffer buf (large enough)."""
    tb, parts, total = packed
    struct.pack_into("<QQ8s", buf, 0, total, len(tb), MAGIC)
    buf[HDR:HDR + len(tb)] = tb
    for off, r, n in parts:
        if not n:
            continue
        if _torch is not None and isinstance(r, _torch.Tensor):
            _torch.frombuffer(buf, dtype=_torch.uint8, count=n, offset=off).copy_(r)
        else:
            buf[off:off + n] = r


def _column(col):
    """What default_collate makes of one column of a batch, without making the
    stack: ("stack", meta tensor of the result) for tensors of one shape and dtype,
    ("small", tensor) for Python ints or floats; None for anything else."""
    c0 = col[0]
    if type(c0) is _torch.Tensor:
        shape, dt = c0.shape, c0.dtype
        for x in col:
            if type(x) is not _torch.Tensor or x.shape != shape or x.dtype != dt or \
                    x.device.type != "cpu" or x.layout != _torch.strided or x.requires_grad:
                return None
        return "stack", _torch.empty((len(col),) + tuple(shape), dtype=dt, device="meta")
    for kind, dt in ((int, _torch.int64), (float, _torch.float64)):
        if type(c0) is kind:
            if any(type(x) is not kind for x in col):
                return None
            return "small", _torch.tensor(col, dtype=dt)
    return None


def collate_into(items, buf, cap, dumps=pickle.dumps):
    """torch's default_collate(items) laid out in slot buf as pack() and write()
    would lay it out, the stacked tensors made in the slot itself (no batch tensor
    allocated, no second copy): for items that are tuples (or lists) of CPU
    tensors and Python ints or floats, each tensor column of one shape and dtype
    (a dataset of (image, label), as ImageFolder's). Returns the payload's total
    bytes (over cap: nothing written), or None when the items are of another form
    (collate them as usual)."""
    if _torch is None or not items:
        return None
    e0 = items[0]
    if type(e0) not in (tuple, list) or not e0 or \
            any(type(x) is not type(e0) or len(x) != len(e0) for x in items):
        return None
    cols = [_column(c) for c in zip(*items)]
    if any(c is None for c in cols):
        return None
    arrays = []
    tb = dumps(_flatten([t for _, t in cols], arrays, "batch"))
    off, places = _align(HDR + len(tb)), []
    for a in arrays:
        n = a.numel() * a.element_size()
        places.append((off, n))
        off = _align(off + n)
    if off > cap:
        return off
    struct.pack_into("<QQ8s", buf, 0, off, len(tb), MAGIC)
    buf[HDR:HDR + len(tb)] = tb
    for (kind, t), col, (o, n) in zip(cols, zip(*items), places):
        if not n:
            continue
        dst = _torch.frombuffer(buf, dtype=t.dtype, count=t.numel(), offset=o).view(t.shape)
        if kind == "stack":
            _torch.stack(col, 0, out=dst)
        else:
            dst.copy_(t)
    return off


def stamp(buf, epoch, batch, digest):
    """Write the batch's place and its lease's digest into a written header."""
    struct.pack_into("<IIQ", buf, 24, epoch, batch, digest)


def size_of(buf):
    """The payload's total bytes (the first header field)."""
    return struct.unpack_from("<Q", buf, 0)[0]


def read(buf, copy=False):
    """Rebuild the collate result from payload buf: tensors/arrays view buf
    (zero copy) unless copy is true (an Owned: its buffers hold the tensors)."""
    total, tlen, magic = struct.unpack_from("<QQ8s", buf, 0)
    if magic != MAGIC or HDR + tlen > len(buf) or total > len(buf):
        raise _abi.ArgumentError("slot payload does not hold a goldminer batch")
    tree = pickle.loads(bytes(buf[HDR:HDR + tlen]))
    offs = []
    off = _align(HDR + tlen)
    return _build(tree, buf, copy, offs, [off])


def _build(node, buf, copy, offs, cur):
    tag = node[0]
    if tag == "@v":
        return node[1]
    if tag in ("@t", "@n"):
        off = cur[0]
        if tag == "@t":
            dt = getattr(_torch, node[2])
            shape = node[3]
            n = 1
            for d in shape:
                n *= d
            nbytes = n * _torch.empty((), dtype=dt).element_size()
            t = (_torch.frombuffer(buf, dtype=dt, count=n, offset=off).view(shape) if n
                 else _torch.empty(shape, dtype=dt))
            out = (copy.copy(t) if isinstance(copy, Owned) else t.clone()) if copy else t
        else:
            dt = _np.dtype(node[2])
            n = 1
            for d in node[3]:
                n *= d
            nbytes = n * dt.itemsize
            a = _np.frombuffer(buf, dtype=dt, count=n, offset=off).reshape(node[3])
            out = a.copy() if copy else a
        cur[0] = _align(off + nbytes)
        return out
    if tag == "@nt":
        return node[1](*[_build(v, buf, copy, offs, cur) for v in node[2]])
    if tag == "@tu":
        return tuple(_build(v, buf, copy, offs, cur) for v in node[1])
    if tag == "@li":
        return [_build(v, buf, copy, offs, cur) for v in node[1]]
    if tag == "@d":
        return {k: _build(v, buf, copy, offs, cur) for k, v in node[1]}
    raise _abi.ArgumentError("slot payload: unknown node %r" % (tag,))
