"""_bind - ctypes prototypes of the ring's protocol for bindings (include/goldminer/bind.h).

Both sides of a Python worker pool go through libgoldminer, never a protocol of
their own: the worker (_worker.py) claims, fills and publishes slots with
gm_bind_*; the trainer (goldminer.torch.DataLoader) creates the pool, gives each
batch's sample indices and reads the payloads with gm_bind_pool_*. This module
only declares the functions on the library _abi loads; it holds no state.
"""
import ctypes

from . import _abi

_P = ctypes.c_void_p
_U32P = ctypes.POINTER(ctypes.c_uint32)


class PoolCfg(ctypes.Structure):
    """struct gm_bind_pool_cfg"""
    _fields_ = [
        ("argv", ctypes.POINTER(ctypes.c_char_p)),
        ("workers", ctypes.c_uint32),
        ("slots", ctypes.c_uint32),
        ("batch_max", ctypes.c_uint32),
        ("payload_bytes", ctypes.c_uint64),
        ("first_task", ctypes.c_uint64),
        ("end_task", ctypes.c_uint64),
        ("lease_timeout_ms", ctypes.c_uint32),
        ("budget", ctypes.c_uint32),
        ("zygote_argv", ctypes.POINTER(ctypes.c_char_p)),
        ("spec_fd", ctypes.c_int),
        ("sparse", ctypes.c_int),
    ]


class Batch(ctypes.Structure):
    """struct gm_bind_batch"""
    _fields_ = [
        ("epoch", ctypes.c_uint32),
        ("batch", ctypes.c_uint32),
        ("idx", _U32P),
        ("n", ctypes.c_uint32),
    ]


NO_END = (1 << 64) - 1  # GM_RING_NO_END
_BP = ctypes.POINTER(Batch)

_PROTOS = {
    "gm_bind_attach": (ctypes.c_int, [ctypes.POINTER(_P), ctypes.c_int]),
    "gm_bind_detach": (None, [_P]),
    "gm_bind_claim": (ctypes.c_int, [_P, ctypes.c_int, ctypes.POINTER(ctypes.c_uint64)]),
    "gm_bind_indices": (ctypes.c_uint32, [_P, ctypes.c_uint32, ctypes.POINTER(_U32P),
                                          _U32P, _U32P]),
    "gm_bind_payload": (_P, [_P, ctypes.c_uint32, ctypes.POINTER(ctypes.c_uint64)]),
    "gm_bind_sample": (ctypes.c_bool, [_P, ctypes.c_uint32, ctypes.c_uint32]),
    "gm_bind_done_count": (ctypes.c_uint32, [_P, ctypes.c_uint32]),
    "gm_bind_done": (None, [_P, ctypes.c_uint32, ctypes.c_uint32]),
    "gm_bind_is_done": (ctypes.c_bool, [_P, ctypes.c_uint32, ctypes.c_uint32]),
    "gm_bind_error": (ctypes.c_int, [_P, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32,
                                     ctypes.c_int32, ctypes.c_char_p]),
    "gm_bind_quarantined": (ctypes.c_bool, [_P, ctypes.c_uint32]),
    "gm_bind_publish": (ctypes.c_int, [_P, ctypes.c_uint32, ctypes.c_int32]),
    "gm_bind_fatal": (None, [_P, ctypes.c_char_p]),
    "gm_bind_pool_create": (ctypes.c_int, [ctypes.POINTER(_P), ctypes.POINTER(PoolCfg),
                                           ctypes.c_char_p, ctypes.c_size_t]),
    "gm_bind_pool_give": (ctypes.c_int, [_P, ctypes.c_uint64, _BP]),
    "gm_bind_pool_start": (ctypes.c_int, [_P, ctypes.c_char_p, ctypes.c_size_t]),
    "gm_bind_pool_node": (ctypes.c_int, [_P, ctypes.c_char_p, ctypes.c_uint32, ctypes.c_char_p,
                                         ctypes.c_size_t]),
    "gm_bind_pool_facts": (ctypes.c_int, [_P, ctypes.c_char_p, ctypes.c_size_t]),
    "gm_bind_pool_next": (ctypes.c_int, [_P, ctypes.c_uint64, ctypes.c_int, ctypes.c_char_p,
                                         ctypes.c_size_t]),
    "gm_bind_pool_pause": (None, [_P, ctypes.c_int]),
    "gm_bind_pool_status": (ctypes.c_int32, [_P, ctypes.c_uint32]),
    "gm_bind_pool_payload": (_P, [_P, ctypes.c_uint32, ctypes.POINTER(ctypes.c_uint64)]),
    "gm_bind_pool_errors": (ctypes.c_uint32, [_P, ctypes.c_uint32]),
    "gm_bind_pool_error": (ctypes.c_char_p, [_P, ctypes.c_uint32, ctypes.c_uint32, _U32P,
                                             ctypes.POINTER(ctypes.c_int32)]),
    "gm_bind_pool_release": (ctypes.c_int, [_P, ctypes.c_uint32, _BP]),
    "gm_bind_pool_keep": (ctypes.c_int, [_P, ctypes.c_uint32, ctypes.c_uint64,
                                         ctypes.POINTER(_P)]),
    "gm_bind_pool_drop": (ctypes.c_int, [_P, _P]),
    "gm_bind_pool_detached": (ctypes.c_uint64, [_P]),
    "gm_bind_pool_stop": (None, [_P]),
    "gm_bind_pool_stats": (None, [_P, ctypes.POINTER(ctypes.c_uint64)]),
    "gm_bind_pool_slots": (ctypes.c_uint32, [_P]),
    "gm_bind_pool_pin": (ctypes.c_int, [_P]),
    "gm_bind_pool_destroy": (None, [_P]),
}

_dll = None


def lib():
    """The library with the bind prototypes declared; raises _abi.LibraryError when
    it lacks them (built before core/bind.c)."""
    global _dll
    if _dll is None:
        l = _abi.lib()
        for name, (res, args) in _PROTOS.items():
            try:
                fn = getattr(l.dll, name)
            except AttributeError:
                raise _abi.LibraryError("%s lacks %s (library built before core/bind.c?)"
                                        % (l.path, name)) from None
            fn.restype, fn.argtypes = res, args
        _dll = l.dll
    return _dll
