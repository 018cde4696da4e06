"""goldminer.dataloader - torch.utils.data.DataLoader's arguments over goldminer's
stateless, crash-proof workers, for any map-style dataset.

    from goldminer.torch import DataLoader
    loader = DataLoader(MyDataset(), batch_size=32, shuffle=True, num_workers=2, seed=1)
    for epoch in range(3):
        for x, y in loader:          # batch k = collate_fn([dataset[i] for i in indices_k])
            ...

The split (docs/DESIGN.md, "Python workers"): the trainer keeps everything that
has state - the sampler's order for the epoch and its base seed (drawn when
iter(loader) makes the epoch's iterator, as torch's iterator draws them: from
`generator`, else torch's default generator; from (seed, epoch) with seed=N),
the epoch counter, the resume position -
and writes each batch's sample indices into its ring slot. A worker (a fresh
process of this interpreter, _worker.py) gets only (epoch, batch index, indices)
through libgoldminer's lease protocol and keeps nothing between batches, so a
killed, stopped or crashed worker costs one batch's re-issue and the bytes do not
depend on the worker count: each sample is computed after seeding random, NumPy
and torch from (the epoch's base seed, epoch, index).

Where a script sees it, it is torch's DataLoader (a subclass: isinstance,
DataLoader[T], the frozen attributes): iter(loader) is the next epoch; next()
raises a batch's own exception and the next call goes on (_Iter);
batch_size=None converts each item; a sample that kills workers is worded as
torch words a dead worker. USAGE.md, "Python and PyTorch", lists what differs
by design.

Batches come back as tensors viewing the ring slot (zero copy), kept
(gm_bind_pool_keep) as long as the caller holds any of them: past the next
batch, the iterator, the epoch and close(). The slot goes back to the workers at
the first request after the last view died; a caller that holds so many that
the workers would have fewer than 2 slots to fill gets the oldest detached (a
private copy at the same addresses, its slot given back: consumer.h), so
`list(loader)` and `x, y = next(iter(loader))` read the bytes made, never other
ones. A pool closed with views alive stops its workers at once and unmaps its
ring when the last view dies. copy=True copies each batch into buffers the caller
owns instead (reused once nothing holds them, _slot.Owned). The slot size is given by slot_bytes=,
or measured once from the first batch of the first pool, computed in a worker like
any other (a crash there costs a re-issue and is reported with the index, never
the trainer's life): the first pool is a probe, its slots PROBE_SLOT bytes of a
sparse ring (not reserved, pre-faulted or pinned: only the pages written cost).
Twice that batch (at least MIN_SLOT) is the slot size of every later pool; when
it fits the probe's slots, the probe goes on (to the end of its epoch, or as the
persistent pool, except with pin_memory: its batches are copied into pinned
memory until the next epoch's pool, pinned); else (a worker that cannot fit the
batch says its size) the pool is made again with that size, and the first batch
computed again. Through a node agent the first guess is MIN_SLOT, reserved.

num_workers="auto": the pool starts with two workers and the elastic controller
(elastic.h, the one the C loader uses) sizes it within max_workers (0: the CPUs this
process may use) from the trainer's wait and the workers' rate.

The workers start when the loader is built (_warm: a pool with no epoch yet,
every slot parked), so they have loaded the interpreter, torch and the dataset by
the first next(); not through node=, nor with the user's batch_sampler (the
longest batch is known once it runs). One ring and its workers serve every epoch
(each slot says which epoch its batch is of, the ring's epoch table its base
seed: bind.h), persistent or not: a non-persistent loader's next iterator takes
the last epoch's pool when its batches fit and the spec pickles the same (else
new workers load the changed dataset, as torch's next epoch would; so does the
first epoch of a dataset changed after the build, persistent or not), and each
epoch keeps its own seed; persistent_workers=True keeps the first epoch's, as
torch's persistent workers do. An epoch left half-way ends them (the next starts
new ones).

Worker ids: each worker has the pool's id, 0..num_workers-1 (max_workers with
"auto"), the lowest no live worker holds, so a replacement takes the id of the
worker it replaces; worker_init_fn(id) and torch.utils.data.get_worker_info()
(id, num_workers, seed = seed + id, dataset) say it, as in torch's workers. Batch
k of an epoch is made by worker k mod num_workers, as torch deals them
(gm_bind_deal; with "auto" or node=, whose pools change size, the next free
worker claims it). The bytes never depend on it (the seeds are per sample).

node=PATH (a node agent's socket, `goldminer node`; "" or True: the default one):
the agent runs the workers instead of this process (wire.h, CMDJOB): this
process makes the ring and the spec, the agent execs the same command over them
with its own uid (it refuses another uid) and sizes the pool with its division
across every job it serves, within num_workers (an int is the most it gives;
"auto": within max_workers when given, else its policy alone). Its peers that
lend Python workers (--lend-python) may make whole batches too, for a dataset
that names its roots (_remote_facts; the agent's --status says why not). They get
this process's environment and working directory with the spec.
When the agent cannot run this interpreter (not on its host, or its probe fails:
a container's agent without torch), or GOLDMINER_NODE_WORKERS=trainer, this
process runs the workers itself over its ring, at the size the agent gives it
(core/bind.c: the agent still counts and sizes the job; its --status says
"workers run by the trainer").

What it does not do: IterableDataset is refused in words, and node= with
num_workers=0 (the batches would be made here); multiprocessing objects in a
dataset (they cross processes only by fork or multiprocessing's own start) are
refused naming the attribute.
"""
from __future__ import annotations

import ctypes
import errno
import fcntl
import hashlib
import os
import pickle
import sys
import time
import weakref
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Optional, Union

from . import _abi, _bind, _slot, _worker, _zserver
from . import loader as _loader
from ._abi import ArgumentError, ArgumentTypeError

if TYPE_CHECKING:  # annotations only: no import of the C loader at run time
    from .loader import PathArg

_ON_ERROR = ("fail", "skip")
MIN_SLOT = 1 << 20  # a slot's payload at least (and the first guess through a node agent)
PROBE_SLOT = 64 << 20  # the first pool's sparse slots: a batch of 32 224x224 float images fits


class _Resize(Exception):
    """The first batch needs slots of `size` bytes: make the pool again."""

    def __init__(self, size):
        super().__init__(size)
        self.size = size


def _pickler():
    try:
        import cloudpickle
        return cloudpickle.dumps, "cloudpickle"
    except ImportError:
        return pickle.dumps, "pickle (python3-cloudpickle is not installed: lambdas and"\
                             " classes of __main__ cannot reach the workers)"


_MP_SHARED = ("multiprocessing.synchronize", "multiprocessing.sharedctypes",
              "multiprocessing.queues")


def _unpicklable(obj, dumps, name, depth=0):
    """The attribute path of the first part of obj that does not pickle, and why."""
    if type(obj).__module__ in _MP_SHARED:
        # torch's workers inherit these (fork), or get them while multiprocessing
        # starts them (spawn); ours are exec'd from a pickled spec, which neither is
        return ("%s (a multiprocessing %s) is shared between processes only by fork or a"
                " multiprocessing start, and goldminer's workers are started from a pickled"
                " copy of the dataset: it cannot reach them as the same object. Keep it out"
                " of the dataset: what differs per worker from"
                " torch.utils.data.get_worker_info(), what the workers share in a file or in"
                " the trainer" % (name, type(obj).__name__))
    try:
        dumps(obj)
        return None
    except Exception as e:  # noqa: BLE001 - any pickling error
        why = "%s: %s" % (type(e).__name__, e)
    attrs = getattr(obj, "__dict__", None)
    if depth < 4 and isinstance(attrs, dict):
        for k, v in attrs.items():
            found = _unpicklable(v, dumps, "%s.%s" % (name, k), depth + 1)
            if found:
                return found
    return "%s (a %s) cannot be pickled for the workers: %s" % (name, type(obj).__name__, why)


def _torch_dataloader():
    """torch's own DataLoader class (not the one `goldminer run` puts in its place),
    or object without torch."""
    try:
        from torch.utils.data import dataloader as tdl
    except ImportError:
        return object
    return getattr(tdl.DataLoader, "_goldminer_original", tdl.DataLoader)


# the attributes torch's DataLoader refuses to change once built
_FROZEN = ("batch_size", "batch_sampler", "sampler", "drop_last", "dataset",
           "persistent_workers")


def _mp_context(ctx, num_workers):
    """multiprocessing_context as torch's setter takes it (a start method's name or a
    context, only with workers), where goldminer's exec'd workers honour it."""
    import multiprocessing
    if ctx is None:
        return None
    if not num_workers:
        raise ArgumentError("multiprocessing_context can only be used with multi-process"
                            " loading (num_workers > 0), but got num_workers=%r"
                            % (num_workers,))
    if isinstance(ctx, str):
        if ctx not in multiprocessing.get_all_start_methods():
            raise ArgumentError("multiprocessing_context option should specify a valid start"
                                " method in %r, but got multiprocessing_context=%r"
                                % (multiprocessing.get_all_start_methods(), ctx))
        ctx = multiprocessing.get_context(ctx)
    if not isinstance(ctx, multiprocessing.context.BaseContext):
        raise ArgumentTypeError("multiprocessing_context option should be a valid context"
                                " object or a string specifying the start method, but got"
                                " multiprocessing_context=%r" % (ctx,))
    if ctx.get_start_method() not in ("spawn", "forkserver"):
        raise ArgumentError("goldminer DataLoader: multiprocessing_context=%r: goldminer's workers"
                            " are always fresh processes of this interpreter (like 'spawn'),"
                            " never forked: give 'spawn' or 'forkserver', or None"
                            % (ctx.get_start_method(),))
    return ctx


def _rng_states():
    """The trainer's three global generators (what a batch made here seeds)."""
    import random
    import torch
    np = _slot._np
    return (random.getstate(), np.random.get_state() if np is not None else None,
            torch.default_generator.get_state())


def _set_rng_states(st):
    import random
    import torch
    random.setstate(st[0])
    if st[1] is not None:
        _slot._np.random.set_state(st[1])
    torch.default_generator.set_state(st[2])


def _int_indices(batches, sampler):
    """Workers take int indices (the ring carries them): anything else a sampler
    yields (a list: torch's bulk loading, a key) is refused in words."""
    for b in batches:
        for i in b:
            if not isinstance(i, int) or isinstance(i, bool) or i < 0 or i >= 1 << 32:
                raise ArgumentTypeError(
                    "goldminer DataLoader: %s yields %r (%s), not an index: goldminer's"
                    " workers take int indices 0 <= i < 2**32 (a sampler of lists is"
                    " torch's bulk loading: give num_workers=0 for it, or a batch_sampler"
                    " of ints)" % (sampler, i, type(i).__name__))


def _generic_base():
    """torch's DataLoader[T_co] (so that DataLoader[T] works here too), or object."""
    import typing
    base = _torch_dataloader()
    return base if base is object else base[typing.TypeVar("T_co", covariant=True)]


class DataLoader(_generic_base()):  # type: ignore[misc] # torch's or object, at run time
    """torch.utils.data.DataLoader for map-style datasets, goldminer's workers (a
    subclass of torch's: isinstance holds, DataLoader[T] too)."""

    __initialized = False  # torch's own flag (_DataLoader__initialized): attributes freeze

    def __init__(self, dataset: Any, batch_size: Optional[int] = 1,
                 shuffle: Optional[bool] = None, sampler: Any = None, batch_sampler: Any = None,
                 num_workers: Union[int, str] = 0, collate_fn: Optional[Callable[..., Any]] = None,
                 pin_memory: bool = False, drop_last: bool = False, timeout: float = 0,
                 worker_init_fn: Optional[Callable[[int], Any]] = None,
                 multiprocessing_context: Any = None, generator: Any = None, *,
                 prefetch_factor: Optional[int] = None, persistent_workers: bool = False,
                 pin_memory_device: str = "", node: Optional[PathArg] = None,
                 seed: Optional[int] = None, lease_timeout_ms: int = 0, on_error: str = "fail",
                 slot_bytes: int = 0, copy: bool = False, max_workers: int = 0) -> None:
        import torch
        from torch.utils import data as tud
        from torch.utils.data.dataloader import _DatasetKind
        self._refuse(dataset, num_workers, persistent_workers, node, on_error,
                     prefetch_factor, timeout, seed, (shuffle, sampler, batch_sampler), tud)
        # torch's checks, in torch's order and words
        if sampler is not None and shuffle:
            raise ArgumentError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ArgumentError("batch_sampler option is mutually exclusive with batch_size,"
                                    " shuffle, sampler, and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None:  # no auto-batching: each item is dataset[i], converted
            if drop_last:
                raise ArgumentError("batch_size=None option disables auto-batching and is mutually"
                                    " exclusive with drop_last")
        self.dataset, self.batch_size, self.drop_last = dataset, batch_size, drop_last
        self.num_workers, self.timeout, self.seed = num_workers, timeout, seed
        self.multiprocessing_context = multiprocessing_context
        # "auto": the elastic controller sizes the pool within max_workers (0: the CPUs)
        self.max_workers = max_workers or len(os.sched_getaffinity(0))
        self._cap = (num_workers if num_workers != "auto" else max_workers) or 0
        self.node = (None if node is None or node is False
                     else b"" if node is True else os.fsencode(node))
        self._stats = [0, 0, 0, 0, 0, 0]
        # what the trainer got (stats()): batches, samples, its waits (ns), and
        # when its first batch of this loader came (monotonic s; 0: none yet)
        self._got = [0, 0, 0, 0.0]
        self.pin_memory, self.pin_memory_device = pin_memory, pin_memory_device
        self.prefetch_factor = 2 if prefetch_factor is None and num_workers else prefetch_factor
        self.worker_init_fn, self.generator = worker_init_fn, generator
        # (checked as goldminer.Loader checks it: ctypes would wrap it into 32 bits)
        lease_timeout_ms = _loader._int_arg("lease_timeout_ms", lease_timeout_ms)
        self.on_error, self.lease_timeout_ms, self.slot_bytes = on_error, lease_timeout_ms, slot_bytes
        self.copy, self.persistent_workers, self._pool = copy, persistent_workers, None
        self._owned = _slot.Owned() if copy and _slot._torch is not None else None
        # seed=N: the order from (N, epoch) in a generator of our own, unless one is
        # given; seed=None: torch's draws (the given generator, else torch's default)
        self._own_gen = generator is None and seed is not None
        self._gen = torch.Generator() if self._own_gen else generator
        if sampler is None:
            sampler = (tud.RandomSampler(dataset, generator=self._gen) if shuffle
                       else tud.SequentialSampler(dataset))
        if batch_size is not None and batch_sampler is None:
            batch_sampler = tud.BatchSampler(sampler, batch_size, drop_last)
        self.sampler, self.batch_sampler = sampler, batch_sampler
        # torch's: its properties (_auto_collation, _index_sampler) read these
        self._dataset_kind, self._IterableDataset_len_called = _DatasetKind.Map, None
        self._iterator = None
        self.collate_fn = collate_fn or (tud.default_collate if self._auto_collation
                                         else tud.default_convert)
        self._epoch, self._start = 0, 0
        self._resume: Optional[tuple[Any, Any]] = None  # load_state_dict's (seed, generator)
        self._errors: list[tuple[int, int, int, str]] = []
        self._measured = 0
        self._live: Optional[Callable[[], Any]] = None  # a weak reference to the newest _Iter
        self._its: weakref.WeakSet[Any] = weakref.WeakSet()
        self._dumps, self.pickler = _pickler()
        if num_workers:
            for name, obj in (("dataset", dataset), ("collate_fn", self.collate_fn),
                              ("worker_init_fn", worker_init_fn)):
                why = _unpicklable(obj, self._dumps, name)
                if why:
                    raise ArgumentTypeError("goldminer DataLoader: " + why)
        if isinstance(num_workers, int) and num_workers > 0:
            # torch's warning when the workers outnumber the CPUs this process may use
            getattr(self, "check_worker_number_rationality", lambda: None)()
        self._spare = None  # the idle pool a non-persistent loader's next epoch takes
        self._warm()
        self.__initialized = True

    def __setattr__(self, attr, val):
        # torch's rule; its own __setattr__ calls super() with its module's global
        # DataLoader, which `goldminer run` replaces
        if self.__initialized and attr in _FROZEN:
            raise ArgumentError("%s attribute should not be set after %s is initialized"
                                % (attr, type(self).__name__))
        object.__setattr__(self, attr, val)

    @property
    def multiprocessing_context(self):
        return self.__dict__.get("_gm_mp_context")

    @multiprocessing_context.setter
    def multiprocessing_context(self, ctx):
        object.__setattr__(self, "_gm_mp_context", _mp_context(ctx, self.num_workers))

    @staticmethod
    def _refuse(dataset, num_workers, persistent, node, on_error, prefetch, timeout, seed,
                orders, tud):
        def no(what):
            raise ArgumentError("goldminer DataLoader: " + what)
        if num_workers != "auto" and (not isinstance(num_workers, int) or num_workers < 0):
            no('num_workers option should be non-negative (an int, or "auto"), not %r'
               % (num_workers,))
        if timeout < 0:
            no("timeout option should be non-negative, not %r" % (timeout,))
        if isinstance(dataset, tud.IterableDataset):
            # torch's refusal first, in its words (a datapipe takes shuffle=: torch
            # sets its shuffle settings)
            pipe = isinstance(dataset, getattr(tud, "IterDataPipe", ()))
            for name, val in zip(("shuffle", "sampler", "batch_sampler"), orders):
                if val not in (None, False) and not (pipe and name == "shuffle"):
                    no("DataLoader with IterableDataset: expected unspecified %s option, but"
                       " got %s=%r" % (name, name, val))
            no("an IterableDataset has no indices for stateless workers: give a map-style"
               " dataset (__getitem__ and __len__)")
        if persistent and not num_workers:
            no("persistent_workers option needs num_workers > 0")
        if node is not None and not num_workers:
            no("node= has the node agent run the workers: it needs num_workers > 0 or"
               " \"auto\" (with 0 the batches are made in this process)")
        if node is not None and not isinstance(node, (str, bytes, os.PathLike, bool)):
            no("node= is the node agent's socket path (or True: the default one), not %r"
               % (node,))
        if on_error not in _ON_ERROR:
            no("on_error must be 'fail' or 'skip', not %r" % (on_error,))
        if prefetch is not None and (num_workers == 0 or prefetch < 1):
            no("prefetch_factor needs num_workers > 0 and a value >= 1")
        if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
            no("seed= is an int (every epoch's bytes fixed) or None (torch's default"
               " generator draws each epoch's seed), not %r" % (seed,))

    def __len__(self) -> int:
        return len(self._index_sampler)

    def stats(self) -> dict[str, Any]:
        """Counters under goldminer.Loader's stats() names (docs/USAGE.md, "stats()"):
        what the trainer got (batches, samples, elapsed_s since its first batch,
        img_per_s, wait_ns, errors replaced), the loader's shape (batch_size,
        batches_per_epoch, dataset_size), and the last pool's workers alive,
        worker_deaths, batches reissued, samples quarantined, target_workers (the
        controller's with num_workers="auto") and kept_copied (held batches
        detached into a copy)."""
        batches, samples, wait_ns, t0 = self._got
        elapsed = time.monotonic() - t0 if t0 else 0.0
        out = {"batches": batches, "samples": samples, "elapsed_s": elapsed,
               "img_per_s": samples / elapsed if elapsed > 0 else 0.0, "wait_ns": wait_ns,
               "errors": len(self._errors), "batch_size": self.batch_size or 1,
               "batches_per_epoch": len(self), "dataset_size": len(self.dataset)}
        out.update(zip(("workers", "worker_deaths", "reissued", "quarantined",
                        "target_workers", "kept_copied"), self._stats))
        return out

    def _count(self, n, wait_ns):
        """A batch of n samples handed to the trainer after waiting wait_ns."""
        got = self._got
        got[0] += 1
        got[1] += n
        got[2] += wait_ns
        if not got[3]:
            got[3] = time.monotonic()

    def errors(self) -> list[tuple[int, int, int, str]]:
        """Bad samples replaced (on_error="skip"): (epoch, batch, sample, message)."""
        return list(self._errors)

    def state_dict(self) -> dict[str, Any]:
        """Where the next batch comes from (the newest iterator's place while it
        runs): resume with load_state_dict. seed is the epoch's (drawn, with
        seed=None); generator the state its order was drawn from."""
        it = self._live() if self._live is not None else None
        if it is not None and not it.done:
            return {"epoch": it.epoch, "batch": it.k, "seed": it.seed, "generator": it.rng}
        return {"epoch": self._epoch, "batch": self._start, "seed": self.seed,
                "generator": None}

    def load_state_dict(self, sd: Mapping[str, Any]) -> None:
        self.close()  # a persistent pool's tasks in flight are not the resumed ones
        self._epoch, self._start = sd["epoch"], sd["batch"]
        if self.seed is not None:
            self.seed = sd["seed"]
        self._resume = (sd.get("seed"), sd.get("generator"))

    def _draw(self, epoch):
        """The epoch's base seed and batches of indices, drawn as torch's iterator
        draws them when it is made (the base seed, then the sampler's order: from
        the given generator, else torch's default one); with seed=N, N and an order
        from (N, epoch). Returns (the state drawn from, base seed, batches)."""
        import torch
        resume, self._resume = self._resume, None
        rng = None
        if self._own_gen:
            self._gen.manual_seed(_slot.seed_of(self.seed, epoch, 0) & ((1 << 63) - 1))
        else:
            src = self._gen if self._gen is not None else torch.default_generator
            if resume is not None and resume[1] is not None:
                src.set_state(resume[1])  # a resumed epoch draws what it drew
            rng = src.get_state()
        if self.seed is not None:
            base = self.seed
        else:
            base = torch.empty((), dtype=torch.int64).random_(generator=self._gen).item()
            if resume is not None and resume[0] is not None:
                base = resume[0]  # the persistent pool's seed, when it was not this epoch's
        if self._auto_collation:
            batches = [list(b) for b in self.batch_sampler]
        else:
            batches = [[i] for i in self.sampler]
        if self.num_workers:
            _int_indices(batches, type(self.batch_sampler if self._auto_collation
                                       else self.sampler).__name__)
        return rng, base & ((1 << 64) - 1), batches

    def __iter__(self) -> Iterator[Any]:
        return _Iter(self)

    def _item(self, i, seed, epoch):
        _slot.seed_all(_slot.seed_of(seed, epoch, _slot.index_key(i)))
        return self.dataset[i]

    def _substitute(self, k, i, e, seed, epoch):
        """on_error="skip" in the trainer: what _worker.py does (the next good index)."""
        self._errors.append((epoch, k, i, "%s: %s" % (type(e).__name__, e)))
        n = len(self.dataset)
        for j in range(1, 65):
            try:
                return self._item((i + j) % n, seed, epoch)
            except Exception:  # noqa: BLE001 - any error of the user's dataset
                continue
        err = _abi.WorkerError("sample %d is bad and so are the 64 after it: no substitute" % i)
        err.sample_index = i
        raise err

    def _compute(self, k, idx, seed, epoch):
        """Batch k here in the trainer, seeded as a worker seeds it; the trainer's
        own generators are as they were before (torch's single-process loader
        draws from them, ours seeds them per sample: the seeds are left alone)."""
        saved = _rng_states()
        try:
            items = []
            for i in idx:
                try:
                    items.append(self._item(i, seed, epoch))
                except Exception as e:  # noqa: BLE001
                    if self.on_error != "skip":
                        raise
                    items.append(self._substitute(k, i, e, seed, epoch))
            _slot.seed_all(_slot.seed_of(seed, epoch, -1 - k))
            return self.collate_fn(items if self._auto_collation else items[0])
        finally:
            _set_rng_states(saved)

    def _pin(self, out):
        """A pinned copy where the batch is not pinned already (torch's rule: no
        accelerator, no pinning, with torch's own warning)."""
        import torch
        if not self.pin_memory or not torch.cuda.is_available():
            if self.pin_memory and not getattr(self, "_warned", False):
                self._warned = True
                import warnings
                warnings.warn("pin_memory=True but no CUDA device is usable: batches are"
                              " not pinned")
            return out
        return _map_tensors(out, lambda t: t.pin_memory())

    def _payload_bytes(self):
        """A slot's payload, whether it is a first guess (the pool's first batch
        measures it), and whether the ring is a sparse probe."""
        if self.slot_bytes:
            return self.slot_bytes, False, False
        if self._measured:
            return self._measured, False, False
        if self.node is not None:  # the agent admits the ring's whole size
            return MIN_SLOT, True, False
        return PROBE_SLOT, True, True

    def _batch_max(self):
        """The longest batch any epoch's sampler gives, when it is known before one
        is drawn (batch_size, or 1 without auto-batching); None for a batch_sampler
        of the user's (its lengths are known once it is iterated)."""
        if not self._auto_collation:
            return 1
        if self.batch_size is not None:  # (else batch_sampler is the user's)
            return self.batch_size
        return None

    def _warm(self):
        """Start the workers now, as the loader is built, so that they have loaded
        the interpreter, torch and the dataset by the time its first iterator asks
        for a batch: a pool with no epoch yet (every slot parked), which that
        iterator takes (_pool_for). Not through a node agent (its pool is sized with
        the job), not in a worker that imports the trainer's script, and not when
        the batches' length is unknown before the sampler runs; a pool that cannot
        start now is made by the first iterator, which says why."""
        batch_max = self._batch_max()
        if (not self.num_workers or self.node is not None or batch_max is None
                or _worker.in_worker()):
            return
        payload, sizing, sparse = self._payload_bytes()
        try:
            pool = _Pool(self, payload, sizing, self.persistent_workers, sparse, batch_max)
        except Exception:  # noqa: BLE001 - the first iterator makes one and says why
            return
        pool.lib.gm_bind_pool_pause(pool.p, 1)  # no demand before the first epoch
        if self.persistent_workers:
            self._pool = pool
        else:
            self._spare = pool

    def _spec_digest(self):
        """What a pool's workers loaded, as a digest (_Pool._spec_blob): a pool whose
        spec differs (the dataset changed between epochs) is not reused."""
        return hashlib.sha256(_Pool.spec_blob(self, None, True)).digest()

    def _pool_for(self, it, start):
        """Iterator it's pool from batch start: the loader's idle one when it can go
        on (the persistent pool, or the pool of the last epoch or the one started
        when the loader was built: its workers are loaded and waiting), else a new
        one. A persistent pool's seed is the one it started with, as a torch
        persistent worker's; every other epoch has its own (the epoch table)."""
        if self.persistent_workers:
            pool = self._pool
        else:
            pool, self._spare = self._spare, None  # this iterator's while it runs
        if pool is not None and pool.fits(it, start):
            pool.extend(it, start)
            return pool
        if pool is not None:
            if pool is self._pool:
                self._pool = None
            pool.close()
        payload, sizing, sparse = self._payload_bytes()
        # a probe is not pinned: with pin_memory, the persistent pool starts at epoch 1
        persistent = self.persistent_workers and not (sparse and self.pin_memory)
        batch_max = max(max(len(b) for b in it.batches), self.batch_size or 0)
        if self.node is not None:  # the agent's workers read the seed from the spec
            pool = _Pool(self, payload, sizing, persistent, sparse, batch_max,
                         plan=(-start, it.epoch, it.batches, start), seed=it.seed)
        else:
            pool = _Pool(self, payload, sizing, persistent, sparse, batch_max)
            pool.extend(it, start)
        if persistent:
            self._pool = pool
        return pool

    def _idle(self, pool):
        """A non-persistent iterator's pool at the end of its epoch: the next epoch's
        (its workers stay loaded and waiting), unless one waits already."""
        if self._spare is None and pool.reusable():
            self._spare = pool
        else:
            pool.close()

    def close_pool(self) -> None:
        pool, self._pool = getattr(self, "_pool", None), None
        spare, self._spare = getattr(self, "_spare", None), None
        for p in (pool, spare):
            if p is not None:
                p.close()

    def close(self) -> None:
        """End the workers now, the persistent ones and those of every iterator
        still open (they also end with the loader); an iterator ended here says so
        at its next call. Batches held stay readable."""
        for it in list(getattr(self, "_its", ())):
            it._end("loader.close() ended its workers")
        self.close_pool()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - at interpreter exit ctypes may be gone
            pass


class _WorkerProcess:
    """A worker of a pool as a multiprocessing.Process shows one: pid, is_alive()
    (running: not exited, not a zombie) and join(timeout)."""

    def __init__(self, pid):
        self.pid = pid

    def is_alive(self):
        try:
            with open("/proc/%d/stat" % self.pid) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return False
        return state not in ("Z", "X")

    def join(self, timeout=None):
        import time
        end = None if timeout is None else time.monotonic() + timeout
        while self.is_alive() and (end is None or time.monotonic() < end):
            time.sleep(0.01)


class _Iter:
    """One epoch of a DataLoader, as torch's iterator behaves where a script sees it.

    Made by iter(loader): the epoch's number, base seed and order are drawn then
    (the loader's next iterator is the next epoch), and its workers start. next()
    gives batch k; an exception of batch k's own (its dataset[i], collate_fn, a
    sample that killed workers, a batch bigger than its slot) is raised there and
    the next call gives batch k+1, as torch's does. Without persistent workers each
    iterator has its own pool, so two iterators of one loader run side by side;
    a newer iterator over persistent workers takes them over, and the older one
    says so in words at its next call (torch's reuses the one iterator object).
    An error of the pool itself (the workers cannot run, the agent went away) ends
    the iterator; a timeout does not (the batch may still come)."""

    def __init__(self, dl):
        self.dl, self.pool, self.done, self.ended = dl, None, False, None
        self.epoch, self.k = dl._epoch, dl._start
        dl._epoch, dl._start = dl._epoch + 1, 0
        if dl.persistent_workers:
            for old in list(dl._its):
                old._end("a newer iter(loader) took over the persistent workers (torch's"
                         " loader resets its one iterator there): iterate the new one")
        self.rng, self.seed, self.batches = dl._draw(self.epoch)
        dl._live = weakref.ref(self)
        dl._its.add(self)
        if dl.num_workers and self.k < len(self.batches):
            self._open(self.k)

    def __iter__(self):
        return self

    def __len__(self):
        return len(self.batches)

    @property
    def _workers(self):
        """The workers running for this iterator now, as torch's iterator lists its
        processes (torch's tests join them): objects with pid, is_alive() and
        join(timeout). Empty without workers or before they start, and for a node
        agent's pool (its workers are the agent's)."""
        pool = self.pool
        if pool is None or not pool.p:
            return []
        pids = (ctypes.c_int * 256)()
        n = pool.lib.gm_bind_pool_pids(pool.p, pids, len(pids))
        return [_WorkerProcess(pids[i]) for i in range(max(n, 0))]

    def _open(self, k):
        self.pool = self.dl._pool_for(self, k)
        self.base = self.pool.plans[-1][0]
        # the time since the last epoch's end is the trainer's own (an evaluation,
        # another loader's epoch): not a demand the agent should size workers by
        self.pool.lib.gm_bind_pool_pause(self.pool.p, 0)

    def __next__(self):
        if self.ended:
            raise _abi.GoldminerError(errno.ECANCELED, "goldminer DataLoader: this iterator"
                                      " (epoch %d) is over: %s" % (self.epoch, self.ended))
        if self.done:
            raise StopIteration
        k = self.k
        if k >= len(self.batches):
            self._finish()
            raise StopIteration
        if not self.dl.num_workers:
            try:
                out = self.dl._compute(k, self.batches[k], self.seed, self.epoch)
            except Exception:
                self.k = k + 1  # the next call gives the next batch
                raise
            self.k = k + 1
            self.dl._count(len(self.batches[k]), 0)
            return self.dl._pin(out)  # a copy, as torch's
        t0 = time.monotonic_ns()
        while True:
            pool = self.pool
            try:
                out = pool.next(self.base + k, k, self.epoch)
            except _Resize as r:  # the first batch, measured: slots of its size
                self.dl._measured = r.size
                if pool is self.dl._pool:
                    self.dl._pool = None
                pool.close()
                self._open(k)
                continue
            except _abi.LoaderError as e:
                if pool.held is not None and pool.held[1] == self.base + k:
                    self.k = k + 1  # its own error (too big): the next call goes on
                elif e.errno != errno.ETIMEDOUT:
                    self._end(None)  # the pool's: the workers cannot go on
                raise
            except Exception:
                if pool.held is not None and pool.held[1] == self.base + k:
                    self.k = k + 1  # the batch's exception: the next call goes on
                raise
            break
        self.k = k + 1
        self.dl._count(len(self.batches[k]), time.monotonic_ns() - t0)
        return out if pool.pinned else self.dl._pin(out)

    def _finish(self):
        """The epoch ran to its end: a persistent pool waits for the next one."""
        self.done = True
        self.dl._its.discard(self)
        pool, self.pool = self.pool, None
        if pool is None:
            return
        pool.lib.gm_bind_pool_pause(pool.p, 1)
        if pool is not self.dl._pool:
            self.dl._idle(pool)

    def _end(self, why):
        """Left before its end (closed, collected, taken over): its pool ends (a
        persistent one too: its tasks in flight are this epoch's)."""
        if self.done:
            return
        if self.k >= len(self.batches):
            return self._finish()  # every batch given: nothing is in flight
        self.done, self.ended = True, why
        self.dl._its.discard(self)
        pool, self.pool = self.pool, None
        if pool is not None:
            if pool is self.dl._pool:
                self.dl._pool = None
            pool.close()

    def close(self):
        """Leave the epoch (a generator's close(): `for` loops and run.py call it)."""
        self._end(None)

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - at interpreter exit ctypes may be gone
            pass


def _map_tensors(obj, fn):
    import torch
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*[_map_tensors(v, fn) for v in obj])
    if isinstance(obj, (tuple, list)):
        return type(obj)(_map_tensors(v, fn) for v in obj)
    if isinstance(obj, dict):
        return {k: _map_tensors(v, fn) for k, v in obj.items()}
    return obj


class _Pool:
    """A ring and its exec'd workers (gm_bind_pool_*), and the spec they load: a
    sealed memfd given to each as fd 5, so that nothing is left in a file system
    however the trainer ends (SIGKILL included).

    Tasks are ring positions; each epoch iterated through the pool is a plan,
    (base, epoch, batches): task base + k is batch k of that epoch. A pool of one
    epoch ends at its last batch; a persistent pool (persistent_workers=True)
    has no end and takes one plan after another. Slots go back in task order, each
    with the batch of task + slots; one whose next batch is not drawn yet (the
    next epoch's) is kept until it is. The ring's first window is given as far as
    the first plan goes; the rest (a persistent pool's first epoch shorter than
    the ring) stays parked in the library, claimed by no worker, until the next
    plans reach it (_give)."""

    def __init__(self, dl, payload, sizing, persistent, sparse, batch_max, plan=None,
                 seed=None):
        # (a proxy: a loader dropped by its script closes its pools in __del__)
        self.dl = dl if isinstance(dl, weakref.ProxyType) else weakref.proxy(dl)
        self.lib, self.sparse, self.seed = _bind.lib(), sparse, seed
        self.p, self.spec_fd = ctypes.c_void_p(), -1
        self.held, self.pending = None, []
        # kept batches (gm_bind_pool_keep): weakrefs to the buffer under each one's
        # views; a dead one's address waits in `dead` for the consumer's next call
        self.kept, self.dead, self.closing = {}, [], False
        self.sizing = sizing  # the first batch taken measures the slots
        self.persistent, self.batch_max = persistent, batch_max
        # the local pool's workers read each epoch's seed from the ring's epoch
        # table (bind.h): it can start before its first epoch and serve the next
        # ones; a node agent's pool (its peers' workers read the spec's) cannot
        self.table = plan is None
        if plan is None:
            self.plans, self.first, self.end = [], 0, _bind.NO_END
        else:
            base, _, batches, start = plan
            self.plans, self.first = [plan], base + start
            self.end = _bind.NO_END if persistent else base + len(batches)
        self.digest = None
        try:
            self._open(payload, batch_max)
        except BaseException:
            self.close()
            raise

    def fits(self, it, start):
        """Can iterator it (from batch start) go on in this pool: it runs, its
        batches fit the ring's, and its workers loaded what a new pool's would
        (a non-persistent loader's dataset may have changed since: torch's next
        epoch would see it; a persistent pool's workers keep what they loaded, as
        torch's do)?"""
        if not self.p or self.closing:
            return False
        if not self.table:  # a node agent's: the persistent pool, at an epoch's start
            return self.persistent and start == 0
        if max(len(b) for b in it.batches) > self.batch_max:
            return False
        if self.sparse and self.dl.pin_memory and self.plans:
            return False  # a probe is not pinned: the next pool is
        # (a persistent pool's workers keep what they loaded from its first epoch
        # on; the pool started when the loader was built has served none yet)
        return (self.persistent and bool(self.plans)) or self.digest == self.dl._spec_digest()

    def reusable(self):
        """May this pool serve a later epoch (_idle)?"""
        return bool(self.p) and not self.closing and self.table and \
            not (self.sparse and self.dl.pin_memory)

    def extend(self, it, start):
        """Iterator it's epoch from batch start: its seed into the epoch table, then
        its batches after the last plan's (given as slots come back)."""
        if self.table:
            if self.seed is None or not self.persistent:
                self.seed = it.seed
            it.seed = self.seed  # (a persistent pool's: the one it started with)
            self.lib.gm_bind_pool_seed(self.p, it.epoch, it.seed & ((1 << 64) - 1))
        else:
            it.seed = self.seed
        self.add_plan((self.tail() - start, it.epoch, it.batches, start))

    @staticmethod
    def spec_blob(dl, seed, table):
        """What a worker loads: a header (sys.path, the seed or the epoch table,
        options, the environment for an agent's workers, the script to import) and
        the pickled dataset, collate_fn and worker_init_fn."""
        auto, node = dl.num_workers == "auto", dl.node is not None
        body = dl._dumps({"dataset": dl.dataset, "collate_fn": dl.collate_fn,
                          "worker_init_fn": dl.worker_init_fn})
        head = pickle.dumps({"sys_path": list(sys.path), "seed": seed,
                             "seed_table": table,
                             "auto_collation": dl._auto_collation,
                             "on_error": dl.on_error,
                             "num_workers": dl.max_workers if auto else dl.num_workers,
                             # batch k of an epoch made by worker k mod num_workers, as
                             # torch deals them: a pool of exactly num_workers (not
                             # "auto", not an agent's)
                             "deal": 0 if auto or node else dl.num_workers,
                             # the agent's workers start in its environment: take ours
                             "environ": dict(os.environ) if node else None,
                             "cwd": os.getcwd() if node else None,
                             # a zygote forked by the zygote server (_zserver.py)
                             # takes these: the trainer's now, not at the server's fork
                             "fork_env": None if node else {"environ": dict(os.environ),
                                                            "cwd": os.getcwd()},
                             # classes of the script, pickled by name: it is imported
                             "main": _worker.main_ref(body, dl._dumps is pickle.dumps)})
        return b"%016x" % len(head) + head + body

    def _spec(self):
        """The memfd of what a worker loads (its fd; closed with the pool)."""
        blob = _Pool.spec_blob(self.dl, self.seed, self.table)
        if self.table:
            self.digest = hashlib.sha256(blob).digest()
        fd = os.memfd_create("goldminer-spec", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        self.spec_fd = fd
        blob = memoryview(blob)
        while blob:
            blob = blob[os.write(fd, blob):]
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK
                    | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE)
        return fd

    def _cfg(self, payload, batch_max):
        pkg = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        # this process's library, whoever starts the worker (a node agent: its env)
        code = ("import os, sys; sys.path.insert(0, %r); os.environ['GOLDMINER_LIB'] = %r; "
                "from goldminer._worker import main; main()" % (pkg, _abi.lib().path))
        spec = self.spec_fd if self.spec_fd >= 0 else self._spec()
        args = [sys.executable, "-c", code]
        self.argv = (ctypes.c_char_p * (len(args) + 1))(*[a.encode() for a in args], None)
        zyg = args + ["--zygote"]  # replacements fork from it
        self.zargv = (ctypes.c_char_p * (len(zyg) + 1))(*[a.encode() for a in zyg], None)
        auto = self.dl.num_workers == "auto"
        workers = min(2, self.dl.max_workers) if auto else self.dl.num_workers
        slots = 1
        while slots < max(4, self.dl.prefetch_factor * (self.dl.max_workers if auto
                                                       else workers)):
            slots *= 2
        if self.end == _bind.NO_END:  # the longest batch of any epoch: the sampler's size
            batch_max = max(batch_max, self.dl.batch_size or 0)
        self.batch_max = batch_max
        local_auto = auto and self.dl.node is None  # else the agent sizes the pool
        return _bind.PoolCfg(self.argv, workers, slots, batch_max, payload, self.first,
                             self.end, self.dl.lease_timeout_ms,
                             self.dl.max_workers if local_auto else 0, self.zargv, spec,
                             int(self.sparse), _zserver.fd())

    def _open(self, payload, batch_max):
        cfg = self._cfg(payload, batch_max)
        err = ctypes.create_string_buffer(512)
        rc = self.lib.gm_bind_pool_create(ctypes.byref(self.p), ctypes.byref(cfg), err, 512)
        if rc == -errno.ENOMEM and self.sparse:  # no room for the probe: the small guess
            self.sparse = False
            cfg = self._cfg(MIN_SLOT, batch_max)
            rc = self.lib.gm_bind_pool_create(ctypes.byref(self.p), ctypes.byref(cfg), err, 512)
        if rc:
            raise _abi.GoldminerError(-rc, "goldminer DataLoader: " + err.value.decode())
        self.slots = self.lib.gm_bind_pool_slots(self.p)
        # the first window: the rest of it (past a short first epoch of a
        # persistent pool) stays parked until the next epoch is drawn (_flush)
        self.ungiven, self.window = self.first, min(self.first + self.slots, self.end)
        self._give()
        # pin_memory: batches view page-locked memory (the ring registered with CUDA)
        # (not a probe's sparse ring: its batches are copied into pinned memory)
        self.pinned = (self.dl.pin_memory and not self.sparse
                       and self.lib.gm_bind_pool_pin(self.p) == 0)
        if self.dl.node is not None:
            facts = _remote_facts(self.dl.dataset)
            if facts:  # peers that lend Python workers may make its batches
                self.lib.gm_bind_pool_facts(self.p, facts, len(facts))
            rc = self.lib.gm_bind_pool_node(self.p, self.dl.node, self.dl._cap, err, 512)
        else:
            rc = self.lib.gm_bind_pool_start(self.p, err, 512)
        if rc:
            raise _abi.GoldminerError(-rc, "goldminer DataLoader: " + err.value.decode())

    def _batch(self, t):
        """Task t's struct gm_bind_batch, or None while its epoch is not drawn."""
        for base, epoch, batches, start in self.plans:
            if base + start <= t < base + len(batches):
                b = batches[t - base]
                arr = (ctypes.c_uint32 * len(b))(*b)
                out = _bind.Batch(epoch, t - base, arr, len(b))
                out._keep = arr  # alive until the call has copied it into the ring
                return out
        return None

    def add_plan(self, plan):
        self.plans = [p for p in self.plans if p[0] + len(p[2]) > self.first] + [plan]
        self._flush()

    def tail(self):
        """The task after the last plan's last batch (the first task: none yet)."""
        if not self.plans:
            return self.first
        base, _, batches, _ = self.plans[-1]
        return base + len(batches)

    def _give(self):
        """Give, in order, the first window's tasks whose batch is now known."""
        while self.ungiven < self.window:
            b = self._batch(self.ungiven)
            if b is None:
                return  # the next epoch's order is not drawn yet: parked
            self._check(self.lib.gm_bind_pool_give(self.p, self.ungiven, ctypes.byref(b)), b)
            self.ungiven += 1

    @staticmethod
    def _check(rc, b):
        if rc:
            raise _abi.GoldminerError(
                errno.EINVAL, "goldminer DataLoader: batch %d of epoch %d has %d samples,"
                " more than the persistent ring's batches (its first epoch's longest): use"
                " persistent_workers=False" % (b.batch, b.epoch, b.n))

    def _flush(self):
        """Give what is known of the first window, then hand back, in order,
        every kept slot whose next batch is known."""
        self._give()
        if self.held is not None:
            self.pending.append(self.held)
            self.held = None
        while self.pending:
            slot, t = self.pending[0]
            nt = t + self.slots
            b = None if nt >= self.end else self._batch(nt)
            if b is None and nt < self.end:
                return  # the next epoch's order is not drawn yet: keep it
            rc = self.lib.gm_bind_pool_release(self.p, slot, ctypes.byref(b) if b else None)
            self._check(rc, b)
            self.pending.pop(0)
            self.first = t + 1

    def _drop_dead(self):
        """Give back the kept batches whose last view died (here, in the consumer:
        the finalizers only note them)."""
        while self.dead:
            self.lib.gm_bind_pool_drop(self.p, self.dead.pop())

    def _keep(self, slot, total):
        """The payload of slot kept past its release (gm_bind_pool_keep): a buffer
        over its second mapping, whose death gives it back (_drop_dead)."""
        addr = ctypes.c_void_p()
        rc = self.lib.gm_bind_pool_keep(self.p, slot, total, ctypes.byref(addr))
        if rc:
            raise _abi.GoldminerError(-rc, "goldminer DataLoader: keeping a batch: %s"
                                      % os.strerror(-rc))
        buf = (ctypes.c_char * total).from_address(addr.value)
        buf._owner = self  # the ring stays mapped while a view lives
        dead, kept, a = self.dead, self.kept, addr.value

        def died(ref):
            kept.pop(id(ref), None)
            dead.append(a)
            if self.closing and not kept:
                try:  # closed earlier with views alive: the last is gone
                    self._destroy()
                except Exception:  # noqa: BLE001 - at interpreter exit ctypes may be gone
                    pass
        r = weakref.ref(buf, died)
        kept[id(r)] = r
        return buf

    def next(self, t, k, epoch):
        if not self.p or self.closing:  # never a call on a pool that is gone
            raise _abi.GoldminerError(errno.ECANCELED, "goldminer DataLoader: batch %d of"
                                      " epoch %d: its workers were ended" % (k, epoch))
        self._drop_dead()
        self._flush()  # the previous batch's indices are known: its slot goes on
        err = ctypes.create_string_buffer(512)
        waited, limit = 0, int(self.dl.timeout * 1000)
        while True:
            slot = self.lib.gm_bind_pool_next(self.p, t, 200, err, 512)
            if slot >= 0:
                break
            if slot == -errno.ETIMEDOUT or slot == -errno.EINTR:
                waited += 200  # a KeyboardInterrupt is raised here, between calls
                if limit and waited >= limit:
                    raise _abi.GoldminerError(
                        errno.ETIMEDOUT, "DataLoader timed out after %g seconds (batch %d"
                        " of epoch %d)" % (self.dl.timeout, k, epoch))
                continue
            raise _abi.GoldminerError(-slot, "goldminer DataLoader: batch %d of epoch %d: %s"
                                      % (k, epoch, err.value.decode(errors="replace")))
        self.held = (slot, t)
        st = (ctypes.c_uint64 * 5)()
        self.lib.gm_bind_pool_stats(self.p, st)
        self.dl._stats = list(st) + [self.lib.gm_bind_pool_detached(self.p)]
        return self._take(slot, k, epoch)

    def _take(self, slot, k, epoch):
        cap = ctypes.c_uint64()
        ptr = self.lib.gm_bind_pool_payload(self.p, slot, ctypes.byref(cap))
        buf = (ctypes.c_char * cap.value).from_address(ptr)
        status = self.lib.gm_bind_pool_status(self.p, slot)
        if self.sizing and status in (0, -errno.EMSGSIZE):
            self.sizing = False  # twice the first batch, at least MIN_SLOT
            want = max(MIN_SLOT, (2 * _slot.size_of(buf) + 4095) // 4096 * 4096)
            if want > cap.value:
                raise _Resize(want)
            self.dl._measured = want  # the next pools' (a probe that fits goes on)
        for r in range(min(self.lib.gm_bind_pool_errors(self.p, slot), 8)):
            s, e = ctypes.c_uint32(), ctypes.c_int32()
            msg = self.lib.gm_bind_pool_error(self.p, slot, r, ctypes.byref(s), ctypes.byref(e))
            if status == 0:
                text = (msg or b"").decode(errors="replace")
                if text.startswith("Quarantined: "):
                    text = self.culprit(s.value)
                self.dl._errors.append((epoch, k, s.value, text))
        if status == -errno.EMSGSIZE:
            raise _abi.GoldminerError(
                errno.EMSGSIZE, "goldminer DataLoader: batch %d of epoch %d is %d bytes, more"
                " than a slot's %d: raise slot_bytes=" % (k, epoch, _slot.size_of(buf),
                                                          cap.value))
        if status:
            _raise_failed(buf, k, epoch, self)
        copy = self.dl._owned or self.dl.copy
        if not copy and 0 < _slot.size_of(buf) <= cap.value:
            buf = self._keep(slot, _slot.size_of(buf))
        return _slot.read(memoryview(buf).cast("B"), copy=copy)

    def culprit(self, sample):
        """A quarantined sample in torch's words for a dead worker, with what the
        pool saw: the pid and the signal of the last worker it took down."""
        pid, sig = ctypes.c_int(), ctypes.c_int()
        if self.lib.gm_bind_pool_culprit(self.p, sample, ctypes.byref(pid), ctypes.byref(sig)):
            return ("DataLoader worker was killed twice on sample %d (by a signal, or by the"
                    " lease watch: the node agent's log says which); it is not made again"
                    % sample)
        if sig.value:
            import signal as _signal
            try:
                name = _signal.strsignal(sig.value) or "signal %d" % sig.value
            except ValueError:
                name = "signal %d" % sig.value
            return ("DataLoader worker (pid %d) is killed by signal: %s. Sample %d killed two"
                    " workers: it is not made again" % (pid.value, name, sample))
        return ("DataLoader worker (pid %d) made no progress on sample %d for lease_timeout_ms"
                " and was killed, twice; it is not made again" % (pid.value, sample))

    def close(self):
        """Stop the workers; unmap the ring now, or when the last view of a kept
        batch dies."""
        if self.p and self.kept:
            self.closing = True
            self.lib.gm_bind_pool_stop(self.p)  # stops and reaps every worker
        else:
            self._destroy()
        if self.spec_fd >= 0:
            os.close(self.spec_fd)
            self.spec_fd = -1

    def _destroy(self):
        p, self.p = self.p, ctypes.c_void_p()
        if p:
            self.lib.gm_bind_pool_destroy(p)  # stops and reaps every worker, unmaps


def _raise_failed(buf, k, epoch, pool):
    """Raise the worker's exception: same type, its traceback and the index; a
    quarantined sample as torch reports a dead worker (RuntimeError)."""
    import struct
    from ._worker import Quarantined
    total, tlen, magic = struct.unpack_from("<QQ8s", buf, 0)
    if magic != b"GMPYFAIL" or _slot.HDR + tlen > len(buf):
        raise _abi.GoldminerError(errno.EIO, "goldminer DataLoader: batch %d of epoch %d"
                                  " failed" % (k, epoch))
    exc, info = pickle.loads(bytes(memoryview(buf).cast("B")[_slot.HDR:_slot.HDR + tlen]))
    if info["type"] is Quarantined:
        new = _abi.WorkerError("%s (batch %d of epoch %d)"
                               % (pool.culprit(info["index"]), k, epoch))
        new.sample_index = info["index"]
        raise new from None
    text = ("%s\n(sample %d, batch %d of epoch %d, in a goldminer worker; its traceback:)\n%s"
            % (info["msg"], info["index"], k, epoch, info["tb"]))
    try:
        new = info["type"](text)
    except Exception:  # noqa: BLE001 - a type whose constructor wants more
        new = RuntimeError("%s: %s" % (info["type"].__name__, text))
    new.sample_index = info["index"]
    raise new from None


def _dataset_roots(dataset):
    """The directories a dataset reads, for a peer's --lend-root check: its
    `goldminer_roots` (a list), else its `root` (torchvision's datasets), else
    the directory holding all its `samples` paths (an ImageFolder's list, as the
    hybrid plan's dataset keeps it), looking through wrappers (Subset,
    ConcatDataset); [] when it names none."""
    roots, todo, seen = [], [dataset], set()
    while todo:
        d = todo.pop()
        if id(d) in seen:
            continue
        seen.add(id(d))
        named = getattr(d, "goldminer_roots", None)
        if named is None and isinstance(getattr(d, "root", None), (str, bytes, os.PathLike)):
            named = [d.root]
        if named is None:
            named = _samples_root(getattr(d, "samples", None))
        for r in named or ():
            r = os.path.abspath(os.fsdecode(r))
            if r not in roots:
                roots.append(r)
        todo.extend(x for x in [getattr(d, "dataset", None)] if x is not None)
        todo.extend(getattr(d, "datasets", None) or ())
    return roots


def _samples_root(samples):
    """The directory that holds every path of a list of (path, ...) items."""
    try:
        dirs = {os.path.dirname(os.fsdecode(s[0])) for s in samples}
        return [os.path.commonpath(sorted(dirs))] if dirs else None
    except (TypeError, ValueError, IndexError):
        return None


def _remote_facts(dataset):
    """The words a node agent's peers check before they run this job's workers
    (bind.h's gm_bind_pool_facts): this interpreter's version and the dataset's
    roots; None when it names no root or they do not fit (the workers then stay on
    the agent's host, and its --status says why)."""
    roots = _dataset_roots(dataset)
    words = [b"py=" + sys.version.encode()] + [b"root=" + os.fsencode(r) for r in roots[:8]]
    facts = b"".join(w + b"\0" for w in words) + b"\0"
    return facts if roots and len(facts) <= 2048 and b"\0\0" not in facts[:-1] else None
