"""_bind - the ring's protocol for bindings (include/goldminer/bind.h), as declared in _abi.

Both sides of a Python worker pool go through libgoldminer, never a protocol of
their own: the worker (_worker.py) claims, fills and publishes slots with
gm_bind_*; the trainer (goldminer.torch.DataLoader) creates the pool, gives each
batch's sample indices and reads the payloads with gm_bind_pool_*. This module
only checks that the library _abi loads has them (their prototypes and
structures are _abi's); it holds no state.
"""
from . import _abi

PoolCfg, Batch, NO_END = _abi.PoolCfg, _abi.BindBatch, _abi.NO_END


def lib():
    """The library (its ctypes CDLL) with the bind prototypes; raises
    _abi.LibraryError when it lacks them (built before core/bind.c)."""
    L = _abi.lib()
    L.need(_abi.BIND, "core/bind.c")
    return L.dll
