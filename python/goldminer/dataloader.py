"""goldminer.dataloader - torch.utils.data.DataLoader's arguments over goldminer's
stateless, crash-proof workers, for any map-style dataset.

    from goldminer.torch import DataLoader
    loader = DataLoader(MyDataset(), batch_size=32, shuffle=True, num_workers=2, seed=1)
    for epoch in range(3):
        for x, y in loader:          # batch k = collate_fn([dataset[i] for i in indices_k])
            ...

The split (docs/DESIGN.md, "Python workers"): the trainer keeps everything that
has state - the sampler's order for the epoch (drawn here from `generator`, or
from (seed, epoch) when none is given), the epoch counter, the resume position -
and writes each batch's sample indices into its ring slot. A worker (a fresh
process of this interpreter, _worker.py) gets only (epoch, batch index, indices)
through libgoldminer's lease protocol and keeps nothing between batches, so a
killed, stopped or crashed worker costs one batch's re-issue and the bytes do not
depend on the worker count: each sample is computed after seeding random, NumPy
and torch from (seed, epoch, index).

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

persistent_workers=True keeps one ring and its workers across epochs (each slot
says which epoch its batch is of); an epoch left half-way ends them (the next
starts new ones).

Worker ids: each worker has the pool's id, 0..num_workers-1 (max_workers with
"auto"), the lowest no live worker holds, so a replacement takes the id of the
worker it replaces; worker_init_fn(id) and torch.utils.data.get_worker_info()
(id, num_workers, seed = seed + id, dataset) say it, as in torch's workers. The
bytes never depend on it (the seeds are per sample).

node=PATH (a node agent's socket, `goldminer node`; "" or True: the default one):
the agent runs the workers instead of this process (wire.h, CMDJOB): this
process makes the ring and the spec, the agent execs the same command over them
with its own uid (it refuses another uid) and sizes the pool with its division
across every job it serves, within num_workers (an int is the most it gives;
"auto": within max_workers when given, else its policy alone). Its peers that
lend Python workers (--lend-python) may make whole batches too, for a dataset
that names its roots (_remote_facts; the agent's --status says why not). They get
this process's environment and working directory with the spec.

What it does not do: IterableDataset is refused in words, and node= with
num_workers=0 (the batches would be made here).
"""
import ctypes
import errno
import fcntl
import os
import pickle
import sys
import weakref

from . import _abi, _bind, _slot, _worker

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


def _unpicklable(obj, dumps, name, depth=0):
    """The attribute path of the first part of obj that does not pickle, and why."""
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


class DataLoader:
    """torch.utils.data.DataLoader for map-style datasets, goldminer's workers."""

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False,
                 timeout=0, worker_init_fn=None, multiprocessing_context=None, generator=None,
                 *, prefetch_factor=None, persistent_workers=False, pin_memory_device="",
                 node=None, seed=0, lease_timeout_ms=0, on_error="fail", slot_bytes=0,
                 copy=False, max_workers=0):
        import torch
        from torch.utils import data as tud
        self._refuse(dataset, num_workers, multiprocessing_context, persistent_workers, node,
                     on_error, prefetch_factor, timeout, tud)
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size,"
                                 " shuffle, sampler, and drop_last")
            batch_size, drop_last = None, False
        elif sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        self.dataset, self.batch_size, self.drop_last = dataset, batch_size, drop_last
        self.num_workers, self.timeout, self.seed = num_workers, timeout, seed
        # "auto": the elastic controller sizes the pool within max_workers (0: the CPUs)
        self.max_workers = max_workers or len(os.sched_getaffinity(0))
        self._cap = (num_workers if num_workers != "auto" else max_workers) or 0
        self.node = (None if node is None or node is False
                     else b"" if node is True else os.fsencode(node))
        self._stats = [0, 0, 0, 0, 0, 0]
        self.pin_memory, self.pin_memory_device = pin_memory, pin_memory_device
        self.prefetch_factor = 2 if prefetch_factor is None and num_workers else prefetch_factor
        self.collate_fn = collate_fn or tud.default_collate
        self.worker_init_fn, self.generator = worker_init_fn, generator
        self.on_error, self.lease_timeout_ms, self.slot_bytes = on_error, lease_timeout_ms, slot_bytes
        self.copy, self.persistent_workers, self._pool = copy, persistent_workers, None
        self._owned = _slot.Owned() if copy and _slot._torch is not None else None
        self._own_gen = generator is None
        self._gen = generator if generator is not None else torch.Generator()
        if batch_sampler is None:
            if sampler is None:
                sampler = (tud.RandomSampler(dataset, generator=self._gen) if shuffle
                           else tud.SequentialSampler(dataset))
            batch_sampler = tud.BatchSampler(sampler, batch_size, drop_last)
        self.sampler, self.batch_sampler = sampler, batch_sampler
        self._epoch, self._start, self._gen_state = 0, 0, None
        self._errors, self._measured = [], 0
        self._dumps, self.pickler = _pickler()
        if num_workers:
            for name, obj in (("dataset", dataset), ("collate_fn", self.collate_fn),
                              ("worker_init_fn", worker_init_fn)):
                why = _unpicklable(obj, self._dumps, name)
                if why:
                    raise TypeError("goldminer DataLoader: " + why)

    @staticmethod
    def _refuse(dataset, num_workers, ctx, persistent, node, on_error, prefetch, timeout, tud):
        def no(what):
            raise ValueError("goldminer DataLoader: " + what)
        if isinstance(dataset, tud.IterableDataset):
            no("an IterableDataset has no indices for stateless workers: give a map-style"
               " dataset (__getitem__ and __len__)")
        if num_workers != "auto" and (not isinstance(num_workers, int) or num_workers < 0):
            no('num_workers must be an int >= 0 or "auto", not %r' % (num_workers,))
        if ctx not in (None, "spawn"):
            no("multiprocessing_context=%r: goldminer's workers are always fresh processes of"
               " this interpreter (like 'spawn'), never forked" % (ctx,))
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
        if timeout < 0:
            no("timeout must be >= 0")

    def __len__(self):
        return len(self.batch_sampler)

    def stats(self):
        """The last pool's counters, named as goldminer.Loader's stats() names them:
        workers alive, worker_deaths, batches reissued, samples quarantined (the
        C path has no such count), target_workers (the controller's with
        num_workers="auto"), and kept_copied (held batches detached into a copy)."""
        return dict(zip(("workers", "worker_deaths", "reissued", "quarantined",
                         "target_workers", "kept_copied"), self._stats))

    def errors(self):
        """Bad samples replaced (on_error="skip"): (epoch, batch, sample, message)."""
        return list(self._errors)

    def state_dict(self):
        """Where the next batch comes from: resume with load_state_dict."""
        return {"epoch": self._epoch, "batch": self._start, "seed": self.seed,
                "generator": self._gen_state if not self._own_gen else None}

    def load_state_dict(self, sd):
        self.close()  # a persistent pool's tasks in flight are not the resumed ones
        self._epoch, self._start, self.seed = sd["epoch"], sd["batch"], sd["seed"]
        if sd.get("generator") is not None:
            self._gen.set_state(sd["generator"])
            self._gen_state = sd["generator"]
        else:
            self._gen_state = None

    def _draw(self):
        """This epoch's batches of indices, drawn here (the state is the trainer's)."""
        if self._own_gen:
            self._gen.manual_seed(_slot.seed_of(self.seed, self._epoch, 0) & ((1 << 63) - 1))
        elif self._gen_state is not None:
            self._gen.set_state(self._gen_state)  # a resumed epoch draws the same order
        else:
            self._gen_state = self._gen.get_state()
        return [list(b) for b in self.batch_sampler]

    def __iter__(self):
        batches = self._draw()
        start, self._start = self._start, 0
        it = (self._local(batches, start) if self.num_workers == 0
              else self._pooled(batches, start))
        try:
            for k, out in it:
                self._start = k + 1
                yield out
        finally:  # one epoch per iteration, whole or abandoned
            it.close()
            self._epoch += 1
            self._start, self._gen_state = 0, None

    def _item(self, i):
        _slot.seed_all(_slot.seed_of(self.seed, self._epoch, i))
        return self.dataset[i]

    def _substitute(self, k, i, e):
        """on_error="skip" in the trainer: what _worker.py does (the next good index)."""
        self._errors.append((self._epoch, k, i, "%s: %s" % (type(e).__name__, e)))
        n = len(self.dataset)
        for j in range(1, 65):
            try:
                return self._item((i + j) % n)
            except Exception:  # noqa: BLE001 - any error of the user's dataset
                continue
        raise LookupError("sample %d is bad and so are the 64 after it: no substitute" % i)

    def _compute(self, k, idx):
        """Batch k here in the trainer, seeded as a worker seeds it."""
        items = []
        for i in idx:
            try:
                items.append(self._item(i))
            except Exception as e:  # noqa: BLE001
                if self.on_error != "skip":
                    raise
                items.append(self._substitute(k, i, e))
        _slot.seed_all(_slot.seed_of(self.seed, self._epoch, -1 - k))
        return self.collate_fn(items)

    def _local(self, batches, start):
        for k in range(start, len(batches)):
            yield k, self._pin(self._compute(k, batches[k]))  # a copy, as torch's

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

    def _pool_for(self, batches, start):
        """The pool of this epoch: the persistent one when it can go on (the last
        epoch ran to its end and this one starts at 0), else a new one."""
        epoch, pool = self._epoch, self._pool
        if pool is not None and start == 0:  # (an epoch left half-way closed it)
            pool.add_plan((pool.tail(), epoch, batches, 0))
            return pool
        self.close()
        payload, sizing, sparse = self._payload_bytes()
        # a probe is not pinned: with pin_memory, the persistent pool starts at epoch 1
        persistent = self.persistent_workers and not (sparse and self.pin_memory)
        pool = _Pool(self, (-start, epoch, batches, start), payload, sizing, persistent,
                     sparse)
        if persistent:
            self._pool = pool
        return pool

    def _pooled(self, batches, start):
        if start >= len(batches):
            return
        pool, done = self._pool_for(batches, start), False
        base, k = pool.plans[-1][0], start
        # the time since the last epoch's end is the trainer's own (an evaluation,
        # another loader's epoch): not a demand the agent should size workers by
        pool.lib.gm_bind_pool_pause(pool.p, 0)
        try:
            while k < len(batches):
                try:
                    out = pool.next(base + k, k, self._epoch)
                except _Resize as r:  # the first batch, measured: slots of its size
                    self._measured = r.size
                    if pool is self._pool:
                        self._pool = None
                    pool.close()
                    pool = self._pool_for(batches, k)
                    base = pool.plans[-1][0]
                    continue
                yield k, out if pool.pinned else self._pin(out)
                k += 1
            done = True
            pool.lib.gm_bind_pool_pause(pool.p, 1)
        finally:
            if not done or pool is not self._pool:
                if pool is self._pool:
                    self._pool = None  # an epoch left half-way: its tasks are dropped
                pool.close()

    def close(self):
        """End the persistent workers now (they also end with the loader)."""
        pool, self._pool = getattr(self, "_pool", None), None
        if pool is not None:
            pool.close()

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

    def __init__(self, dl, plan, payload, sizing, persistent, sparse=False):
        self.dl, self.lib, self.sparse = dl, _bind.lib(), sparse
        self.p, self.spec_fd = ctypes.c_void_p(), -1
        self.plans, self.held, self.pending = [plan], None, []
        # kept batches (gm_bind_pool_keep): weakrefs to the buffer under each one's
        # views; a dead one's address waits in `dead` for the consumer's next call
        self.kept, self.dead, self.closing = {}, [], False
        self.sizing = sizing  # the first batch taken measures the slots
        base, _, batches, start = plan
        self.first = base + start
        self.end = _bind.NO_END if persistent else base + len(batches)
        try:
            self._open(payload, max(len(b) for b in batches))
        except BaseException:
            self.close()
            raise

    def _spec(self):
        """The memfd of what a worker loads (its fd; closed with the pool)."""
        auto, node = self.dl.num_workers == "auto", self.dl.node is not None
        body = self.dl._dumps({"dataset": self.dl.dataset, "collate_fn": self.dl.collate_fn,
                               "worker_init_fn": self.dl.worker_init_fn})
        head = pickle.dumps({"sys_path": list(sys.path), "seed": self.dl.seed,
                             "on_error": self.dl.on_error,
                             "num_workers": self.dl.max_workers if auto else self.dl.num_workers,
                             # the agent's workers start in its environment: take ours
                             "environ": dict(os.environ) if node else None,
                             "cwd": os.getcwd() if node else None,
                             # classes of the script, pickled by name: it is imported
                             "main": _worker.main_ref(body, self.dl._dumps is pickle.dumps)})
        fd = os.memfd_create("goldminer-spec", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        self.spec_fd = fd
        blob = memoryview(b"%016x" % len(head) + head + body)
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
        local_auto = auto and self.dl.node is None  # else the agent sizes the pool
        return _bind.PoolCfg(self.argv, workers, slots, batch_max, payload, self.first,
                             self.end, self.dl.lease_timeout_ms,
                             self.dl.max_workers if local_auto else 0, self.zargv, spec,
                             int(self.sparse))

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
        """The task after the last plan's last batch."""
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
                self.dl._errors.append((epoch, k, s.value, (msg or b"").decode(errors="replace")))
        if status == -errno.EMSGSIZE:
            raise _abi.GoldminerError(
                errno.EMSGSIZE, "goldminer DataLoader: batch %d of epoch %d is %d bytes, more"
                " than a slot's %d: raise slot_bytes=" % (k, epoch, _slot.size_of(buf),
                                                          cap.value))
        if status:
            _raise_failed(buf, k, epoch)
        copy = self.dl._owned or self.dl.copy
        if not copy and 0 < _slot.size_of(buf) <= cap.value:
            buf = self._keep(slot, _slot.size_of(buf))
        return _slot.read(memoryview(buf).cast("B"), copy=copy)

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


def _raise_failed(buf, k, epoch):
    """Raise the worker's exception: same type, its traceback and the index."""
    import struct
    total, tlen, magic = struct.unpack_from("<QQ8s", buf, 0)
    if magic != b"GMPYFAIL" or _slot.HDR + tlen > len(buf):
        raise _abi.GoldminerError(errno.EIO, "goldminer DataLoader: batch %d of epoch %d"
                                  " failed" % (k, epoch))
    exc, info = pickle.loads(bytes(memoryview(buf).cast("B")[_slot.HDR:_slot.HDR + tlen]))
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
