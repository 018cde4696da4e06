"""_abi - ctypes mirror of libgoldminer's API for Python (include/goldminer/loader.h,
aug.h, bind.h, hybrid.h, jitter.h): every structure and prototype the package
uses, declared here once.

Design: the structures are declared field for field in header order with the
ctypes type of the same size and alignment (C enums are `int`, `bool` is
`_Bool`), so ctypes lays them out exactly as gcc does on the same ABI. The
library is found once (env GOLDMINER_LIB, then the installed library by its
SONAME, then ../../build/libgoldminer.so next to this package) and its prototypes are declared
here, so the rest of the package never calls an undeclared function.

What it does not do: no policy, no Python objects beyond the raw structures;
goldminer.loader builds the user-facing Loader on top of this.

A layout check runs at load time when the library exports
`size_t gm_loader_abi_size(int which)` (0 aug spec, 1 loader opts, 2 batch,
3 loader stats); tests/python/test_abi.py also compiles the header with cc and
compares every field offset.
"""
import ctypes
import ctypes.util
import os

# enum gm_aug_mode, gm_out_type, gm_on_error
GM_AUG_TRAIN, GM_AUG_EVAL = 0, 1
GM_OUT_U8_HWC, GM_OUT_F32_CHW, GM_OUT_F16_CHW = 0, 1, 2
GM_ON_ERROR_SKIP, GM_ON_ERROR_FAIL = 0, 1
# gm_loader_next results besides 0 / -errno
GM_LOADER_END_OF_EPOCH = 1
GM_LOADER_END = 2

FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3

_enum = ctypes.c_int
_U32P = ctypes.POINTER(ctypes.c_uint32)


class AugSpec(ctypes.Structure):
    """struct gm_aug_spec"""
    _fields_ = [
        ("mode", _enum),
        ("size", ctypes.c_uint32),
        ("scale_min", ctypes.c_float),
        ("scale_max", ctypes.c_float),
        ("ratio_min", ctypes.c_float),
        ("ratio_max", ctypes.c_float),
        ("flip_p", ctypes.c_float),
        ("resize", ctypes.c_uint32),
        ("out", _enum),
        ("mean", ctypes.c_float * 3),
        ("std", ctypes.c_float * 3),
        ("max_pixels", ctypes.c_uint64),
        ("jitter", (ctypes.c_float * 2) * 4),
    ]


class LoaderOpts(ctypes.Structure):
    """struct gm_loader_opts"""
    _fields_ = [
        ("root", ctypes.c_char_p),
        ("pipeline", ctypes.c_char_p),
        ("aug", AugSpec),
        ("batch_size", ctypes.c_uint32),
        ("workers", ctypes.c_int),
        ("seed", ctypes.c_uint64),
        ("epoch", ctypes.c_uint32),
        ("epochs", ctypes.c_uint32),
        ("start_batch", ctypes.c_uint64),
        ("slots", ctypes.c_uint32),
        ("on_error", _enum),
        ("drop_last", ctypes.c_bool),
        ("shuffle", ctypes.c_bool),
        ("no_pin", ctypes.c_bool),
        ("chaos_kill_ms", ctypes.c_uint32),
        ("max_workers", ctypes.c_uint32),
        ("node", ctypes.c_char_p),
        ("lease_timeout_ms", ctypes.c_uint32),
        ("order", ctypes.POINTER(ctypes.c_uint32)),
        ("order_len", ctypes.c_uint32),
        ("gpu_decode", ctypes.c_bool),
    ]


class Batch(ctypes.Structure):
    """struct gm_batch"""
    _fields_ = [
        ("epoch", ctypes.c_uint64),
        ("index", ctypes.c_uint64),
        ("size", ctypes.c_uint32),
        ("n_errors", ctypes.c_uint32),
        ("data", ctypes.c_void_p),
        ("sample_bytes", ctypes.c_size_t),
        ("labels", ctypes.POINTER(ctypes.c_int32)),
        ("sample_ids", ctypes.POINTER(ctypes.c_uint32)),
        ("slot", ctypes.c_uint32),
    ]


class LoaderStats(ctypes.Structure):
    """struct gm_loader_stats"""
    _fields_ = [
        ("batches", ctypes.c_uint64),
        ("samples", ctypes.c_uint64),
        ("elapsed_s", ctypes.c_double),
        ("img_per_s", ctypes.c_double),
        ("read_ns", ctypes.c_uint64),
        ("decode_ns", ctypes.c_uint64),
        ("augment_ns", ctypes.c_uint64),
        ("write_ns", ctypes.c_uint64),
        ("wait_ns", ctypes.c_uint64),
        ("errors", ctypes.c_uint64),
        ("workers", ctypes.c_uint32),
        ("worker_deaths", ctypes.c_uint64),
        ("reissued", ctypes.c_uint64),
        ("batches_per_epoch", ctypes.c_uint32),
        ("dataset_size", ctypes.c_uint32),
        ("num_classes", ctypes.c_uint32),
        ("pinned", ctypes.c_bool),
        ("chaos_kills", ctypes.c_uint64),
        ("detect_ns_max", ctypes.c_uint64),
        ("detect_ns_sum", ctypes.c_uint64),
        ("batch_size", ctypes.c_uint32),
        ("size", ctypes.c_uint32),
        ("out", ctypes.c_uint32),
        ("mode", ctypes.c_uint32),
        ("sample_bytes", ctypes.c_uint64),
        ("target_workers", ctypes.c_uint32),
        ("demand_img_per_s", ctypes.c_double),
        ("worker_img_per_s", ctypes.c_double),
        ("kept_copied", ctypes.c_uint64),
    ]


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
        ("zygote_server", ctypes.c_int),
    ]


class BindBatch(ctypes.Structure):
    """struct gm_bind_batch"""
    _fields_ = [
        ("epoch", ctypes.c_uint32),
        ("batch", ctypes.c_uint32),
        ("idx", _U32P),
        ("n", ctypes.c_uint32),
    ]


class JitterDraw(ctypes.Structure):
    """struct gm_jitter"""
    _fields_ = [("n", ctypes.c_uint32), ("order", ctypes.c_uint8 * 4),
                ("factor", ctypes.c_float * 4)]


NO_END = (1 << 64) - 1  # GM_RING_NO_END

# Order of gm_loader_abi_size(which).
ABI_STRUCTS = (("gm_aug_spec", AugSpec), ("gm_loader_opts", LoaderOpts),
               ("gm_batch", Batch), ("gm_loader_stats", LoaderStats))
# The other structures (bind.h's, jitter.h's): the library cannot report their
# sizes, so only tests/python/test_abi.py checks them, against gcc's layout, as it
# checks ABI_STRUCTS.
OTHER_STRUCTS = (("gm_bind_pool_cfg", PoolCfg), ("gm_bind_batch", BindBatch),
                 ("gm_jitter", JitterDraw))

_P = ctypes.c_void_p
_BP = ctypes.POINTER(BindBatch)
_PROTOS = {
    # name: (restype, argtypes)
    "gm_aug_spec_default": (None, [ctypes.POINTER(AugSpec)]),
    "gm_aug_out_bytes": (ctypes.c_size_t, [ctypes.POINTER(AugSpec)]),
    "gm_loader_opts_default": (None, [ctypes.POINTER(LoaderOpts)]),
    "gm_loader_open": (ctypes.c_int, [ctypes.POINTER(_P), ctypes.POINTER(LoaderOpts),
                                      ctypes.c_char_p, ctypes.c_size_t]),
    "gm_loader_next": (ctypes.c_int, [_P, ctypes.POINTER(Batch)]),
    "gm_loader_release": (ctypes.c_int, [_P, ctypes.POINTER(Batch)]),
    "gm_loader_stats": (None, [_P, ctypes.POINTER(LoaderStats)]),
    "gm_loader_error": (ctypes.c_int, [_P, ctypes.c_uint64, ctypes.POINTER(ctypes.c_char_p),
                                       ctypes.POINTER(ctypes.c_char_p)]),
    "gm_loader_scale": (ctypes.c_int, [_P, ctypes.c_int]),
    "gm_loader_position": (None, [_P, ctypes.POINTER(ctypes.c_uint32),
                                  ctypes.POINTER(ctypes.c_uint64)]),
    "gm_loader_copy_to_device": (ctypes.c_int, [_P, ctypes.POINTER(Batch), _P]),
    "gm_loader_errmsg": (ctypes.c_char_p, [_P]),
    "gm_loader_close": (None, [_P]),
    "gm_loader_stop": (None, [_P]),
    "gm_loader_keep": (ctypes.c_int, [_P, ctypes.POINTER(Batch)]),
    "gm_loader_kept": (ctypes.c_uint32, [_P, ctypes.POINTER(ctypes.c_uint32)]),
    "gm_loader_finish": (ctypes.c_int, [_P, ctypes.POINTER(Batch), _P, ctypes.c_size_t]),
    "gm_loader_finish_device": (ctypes.c_int, [_P, ctypes.POINTER(Batch), _P, ctypes.c_size_t,
                                               _P, ctypes.c_uint]),
    "gm_loader_device_finish_ready": (ctypes.c_bool, [ctypes.c_char_p, ctypes.c_size_t]),
    # Optional helpers (asked of the lead; used when present).
    "gm_loader_abi_size": (ctypes.c_size_t, [ctypes.c_int]),
    "gm_version": (ctypes.c_char_p, []),
    "gm_checksum64": (ctypes.c_uint64, [ctypes.c_uint64, _P, ctypes.c_size_t]),
    "gm_node_status": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]),
    # bind.h: both sides of a Python worker pool (BIND)
    "gm_bind_attach": (ctypes.c_int, [ctypes.POINTER(_P), ctypes.c_int]),
    "gm_bind_detach": (None, [_P]),
    "gm_bind_claim": (ctypes.c_int, [_P, ctypes.c_int, ctypes.POINTER(ctypes.c_uint64)]),
    "gm_bind_deal": (ctypes.c_int, [_P, ctypes.c_uint32, ctypes.c_uint32]),
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
    "gm_bind_epoch_seed": (ctypes.c_int, [_P, ctypes.c_uint32,
                                          ctypes.POINTER(ctypes.c_uint64)]),
    "gm_bind_first_epoch": (ctypes.c_int, [_P, ctypes.c_int, ctypes.POINTER(ctypes.c_uint32),
                                           ctypes.POINTER(ctypes.c_uint64)]),
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
    "gm_bind_pool_seed": (None, [_P, ctypes.c_uint32, ctypes.c_uint64]),
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
    "gm_bind_pool_culprit": (ctypes.c_int, [_P, ctypes.c_uint32, ctypes.POINTER(ctypes.c_int),
                                            ctypes.POINTER(ctypes.c_int)]),
    "gm_bind_pool_pids": (ctypes.c_int, [_P, ctypes.POINTER(ctypes.c_int), ctypes.c_int]),
    "gm_bind_pool_pin": (ctypes.c_int, [_P]),
    "gm_bind_pool_destroy": (None, [_P]),
    # hybrid.h and the draws the plan's tests compare with torchvision's (HYBRID)
    "gm_hybrid_create": (ctypes.c_int, [ctypes.POINTER(_P), ctypes.POINTER(AugSpec),
                                        ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]),
    "gm_hybrid_destroy": (None, [_P]),
    "gm_hybrid_out_bytes": (ctypes.c_size_t, [_P]),
    "gm_hybrid_sample": (ctypes.c_int, [_P, ctypes.c_char_p, ctypes.c_uint64, ctypes.c_uint64,
                                        ctypes.c_uint64, _P, ctypes.c_size_t]),
    "gm_hybrid_errmsg": (ctypes.c_char_p, [_P]),
    "gm_aug_window": (None, [ctypes.POINTER(AugSpec), ctypes.c_uint32, ctypes.c_uint32,
                             ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64,
                             ctypes.POINTER(ctypes.c_double), ctypes.POINTER(ctypes.c_bool)]),
    "gm_jitter_draw": (None, [ctypes.POINTER(AugSpec), ctypes.c_uint64, ctypes.c_uint64,
                              ctypes.c_uint64, ctypes.POINTER(JitterDraw)]),
}
# The groups a module needs whole (_Lib.need): a library built before their
# source file lacks them.
BIND = tuple(n for n in _PROTOS if n.startswith("gm_bind_"))
HYBRID = tuple(n for n in _PROTOS if n.startswith("gm_hybrid_"))
REQUIRED = ("gm_aug_spec_default", "gm_aug_out_bytes", "gm_loader_opts_default",
            "gm_loader_open", "gm_loader_next", "gm_loader_release", "gm_loader_stats",
            "gm_loader_position", "gm_loader_errmsg", "gm_loader_close")


class GoldminerError(Exception):
    """The one base of every error goldminer raises itself: `except
    goldminer.GoldminerError` catches each kind. Each kind also derives from the
    built-in that code written without goldminer catches, so an `except
    ValueError` (or RuntimeError, OSError, TypeError, ImportError) around a
    loader works unchanged:

      LoaderError        OSError, RuntimeError  a loader, its pool, a node agent
                                                or the library failed (.errno: the
                                                C error, EBADMSG, EIO, EPIPE for a
                                                node agent gone, ETIMEDOUT, ...);
                                                torch's DataLoader raises
                                                RuntimeError there
      WorkerError        RuntimeError           a worker died or was killed on a
                                                sample (as torch words it), or no
                                                sample could stand in for a bad one
      ArgumentError      ValueError             a value refused: an argument, a
                                                state_dict, a batch's payload
      ArgumentTypeError  TypeError              an argument of the wrong type, or a
                                                loader pickled or copied
      LibraryError       ImportError            libgoldminer.so absent, of
                                                another ABI, or without a function
                                                a call needs

    str() is the message, which names the cause and the fix. A worker's own
    exception (the user's dataset's) is re-raised as its own type, not one of
    these. GoldminerError(errno, message) itself makes a LoaderError (the one
    kind it meant before the others existed)."""

    def __new__(cls, *args, **kwargs):
        if cls is GoldminerError:
            cls = LoaderError
        return super().__new__(cls, *args, **kwargs)


class LoaderError(GoldminerError, OSError, RuntimeError):
    """A loader, its pool, a node agent or the library failed: .errno, str()."""


class WorkerError(GoldminerError, RuntimeError):
    """A worker process died or was killed on a sample (.sample_index)."""


class ArgumentError(GoldminerError, ValueError):
    """A value goldminer refuses; the message names it and what it accepts."""


class ArgumentTypeError(GoldminerError, TypeError):
    """An argument of a type goldminer does not take."""


class LibraryError(GoldminerError, ImportError):
    """libgoldminer.so was not found, lacks the loader, or its ABI differs."""


def candidate_paths():
    """Where the library is looked for, in order: GOLDMINER_LIB (alone, when set),
    the installed library (`make install`: found by the dynamic linker by its
    SONAME, or by ldconfig's cache), then the build tree this package sits in."""
    env = os.environ.get("GOLDMINER_LIB")
    if env:
        return [env]
    out = ["libgoldminer.so.0"]
    found = ctypes.util.find_library("goldminer")
    if found and found not in out:
        out.append(found)
    here = os.path.dirname(os.path.abspath(__file__))
    out.append(os.path.normpath(os.path.join(here, "..", "..", "build", "libgoldminer.so")))
    return out


class _Lib:
    """The loaded library with declared prototypes; `has(name)` for optional ones."""

    def __init__(self, path):
        self.path = path
        self.dll = ctypes.CDLL(path)  # CDLL releases the GIL during every call
        self._have = set()
        for name, (res, args) in _PROTOS.items():
            try:
                fn = getattr(self.dll, name)
            except AttributeError:
                continue
            fn.restype, fn.argtypes = res, args
            setattr(self, name, fn)
            self._have.add(name)
        missing = [n for n in REQUIRED if n not in self._have]
        if missing:
            raise LibraryError("%s lacks %s (library built before core/loader.c?)"
                               % (path, ", ".join(missing)))
        if self.has("gm_loader_abi_size"):
            for i, (cname, cls) in enumerate(ABI_STRUCTS):
                n = self.gm_loader_abi_size(i)
                if n != ctypes.sizeof(cls):
                    raise LibraryError("%s: sizeof(struct %s) is %d in C, %d in the binding;"
                                       " rebuild or update goldminer/_abi.py"
                                       % (path, cname, n, ctypes.sizeof(cls)))

    def has(self, name):
        return name in self._have

    def need(self, names, source):
        """Raise LibraryError unless every one of names is there (built from
        `source`)."""
        missing = [n for n in names if n not in self._have]
        if missing:
            raise LibraryError("%s lacks %s (a library built before %s?)"
                               % (self.path, ", ".join(missing), source))


_lib = None


def lib():
    """Load (once) and return the library wrapper; raises LibraryError."""
    global _lib
    if _lib is None:
        errs = []
        for p in candidate_paths():
            if os.sep in p and not os.path.exists(p):
                errs.append("%s: not found" % p)
                continue
            try:
                _lib = _Lib(p)
                break
            except (OSError, LibraryError) as e:  # absent, or built for another ABI
                errs.append("%s: %s" % (p, e))
        else:
            raise LibraryError("libgoldminer.so not loadable; tried, in order: "
                               + "; ".join(errs or ["no candidate"])
                               + " (set GOLDMINER_LIB=PATH, `make install`, or run make in"
                               " the source tree)")
    return _lib
