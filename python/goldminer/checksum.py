"""checksum - the batch checksum of `goldminer bench --checksum` (C: gm_checksum64, checksum.h).

Design: the C CLI hashes, per epoch, every delivered batch's data bytes in
delivery order (labels excluded), one gm_checksum64() call per batch, starting from
GM_CHECKSUM_INIT = 0xcbf29ce484222325, and prints the result as 16 hex digits.
gm_checksum64 is FNV-1a's step over 8-byte little-endian words, then the tail bytes one
by one (so not FNV-1a of the bytes), so the hash of a buffer depends on how it is split into calls: hash one
batch per call, as the CLI does. The library's gm_checksum64 is used when present;
the pure-Python fallback (same words-then-tail rule) is for test-sized data only.

What it does not do: it is a consistency check, not a cryptographic hash.
"""
import ctypes

from ._abi import FNV_OFFSET, FNV_PRIME

_MASK = (1 << 64) - 1


def _py_fnv(h, data):
    # Same rule as gm_checksum64: little-endian 64-bit words, then the tail bytes.
    import struct
    mv = memoryview(data).cast("B")
    n8 = len(mv) // 8 * 8
    for (w,) in struct.iter_unpack("<Q", mv[:n8]):
        h = ((h ^ w) * FNV_PRIME) & _MASK
    for byte in mv[n8:]:
        h = ((h ^ byte) * FNV_PRIME) & _MASK
    return h


def checksum64(data, h=FNV_OFFSET):
    """gm_checksum64(h, data): continue hash h over data (bytes-like, NumPy array,
    CPU torch tensor, or an (address, nbytes) tuple); returns the new h. One call
    per batch gives the CLI's per-epoch checksums."""
    addr = n = None
    if isinstance(data, tuple):
        addr, n = data
    elif hasattr(data, "data_ptr") and hasattr(data, "element_size"):  # torch.Tensor
        t = data if data.is_contiguous() else data.contiguous()
        addr, n, data = t.data_ptr(), t.numel() * t.element_size(), t
    elif hasattr(data, "__array_interface__"):  # NumPy
        import numpy as np
        data = np.ascontiguousarray(data)
        addr, n = data.__array_interface__["data"][0], data.nbytes
    if addr is None:
        mv = memoryview(data).cast("B")
        n = mv.nbytes
        if n == 0:
            return h
        buf = (ctypes.c_uint8 * n).from_buffer_copy(mv) if mv.readonly else \
            (ctypes.c_uint8 * n).from_buffer(mv)
        addr = ctypes.addressof(buf)
    if n == 0:
        return h
    from ._abi import lib, LibraryError
    try:
        L = lib()
    except LibraryError:
        L = None
    if L is not None and L.has("gm_checksum64"):
        return L.gm_checksum64(h, addr, n)
    return _py_fnv(h, (ctypes.c_uint8 * n).from_address(addr))


def hexdigest(h):
    """The CLI's spelling of a hash: 16 lowercase hex digits."""
    return "%016x" % h


# The name this function had before 2026-11-30 (it is not byte-wise FNV-1a).
fnv1a64 = checksum64
