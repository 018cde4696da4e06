"""_worker - a Python data worker: a fresh process of the trainer's interpreter.

    python3 -c '...from goldminer._worker import main; main()' [--zygote]

started by the trainer's pool (core/pool.c, exec mode) with the ring's memfd as
fd 3 and the spec as fd 5 (a sealed memfd, dataloader.py). It loads the spec (the pickled dataset, collate_fn, worker_init_fn, seed,
on_error and the trainer's sys.path; without cloudpickle, the trainer's main
script is imported first, as torch's spawn workers import it: _import_main), then loops through libgoldminer's bind API
(include/goldminer/bind.h), the same lease protocol as the C workers: claim a
task, read its batch's place (epoch, index) and sample indices from the ring, seed the global generators per
sample, compute collate_fn([dataset[i] ...]), write it into the slot in the
layout of _slot.py (torch's default_collate of (tensor, number) items is stacked
in the slot itself: _slot.collate_into), publish. It keeps nothing between tasks. A worker of a pool started before its loader's first
epoch (the spec's seed_table) reads each task's epoch's base seed from the ring's
epoch table (bind.h), and waits for the first one before worker_init_fn.

Errors: an exception in dataset[i] is recorded in the slot (sample, type and
message); with on_error="fail" the batch fails with the exception pickled into
the payload (the trainer raises it with this traceback and the index); with
"skip" the sample is replaced by the first good one among the next 64 dataset
indices (i+1, i+2, ... modulo the length: the same whatever worker does it).
A sample quarantined by the pool (it crashed or stalled two workers) counts as
bad without being touched. A batch too big for the slot is published as
-EMSGSIZE with its size; a collate result the layout cannot carry fails the batch
with the LayoutError. It never decides pool sizes, retries or timeouts: the pool
and the trainer do.

It exits when the ring says stop or every task is handed out, on SIGUSR1 (the
pool retires it) after its batch, and with the pool's SIGKILL.

Forks: a dataset (or collate_fn, worker_init_fn) may fork, as libraries that
spawn helpers do; the child is a copy of the worker with its lease, ring mapping
and ids. A child that ends (os._exit, exec) is the dataset's business; one that
returns into this loop would make and publish the worker's batches a second
time, so after every dataset[i], collate_fn and worker_init_fn the worker
checks that it is still the process the pool started (os.getpid(), one system
call) and a child that came back ends there, with a line on stderr naming the
dataset's class and without touching the ring (libgoldminer refuses its writes
too: bind.h). What such children leave running ends with the worker: it leads
its own process group, which the pool kills when the worker ends (core/pool.c),
and it is a child subreaper, so the orphans of its descendants (a helper that
left the group with setsid) come to it, and it kills them when it ends.

With --zygote first, it is the pool's zygote instead (core/pool.c): it loads the
spec once, then forks a worker for each request on fd 4 ("F" and the worker's id), so that a replaced
worker starts in milliseconds rather than the seconds an interpreter takes to
import torch and unpickle the dataset. The same zygote, forked by the trainer's
zygote server (_zserver.py) instead of exec'd, has torch loaded already: it
takes the trainer's environment and directory from the spec (fork_env).

With --probe first, it only loads goldminer's library and finds torch (without
importing it: that takes seconds) and exits 0:
a node agent runs it once per interpreter to know whether it can run a job's
workers itself (core/node.c; when not, the trainer runs them, sized by the agent).
"""
import ctypes
import errno
import os
import pickle
import signal
import struct
import sys
import time
import traceback

from ._abi import FNV_OFFSET, WorkerError  # FNV_OFFSET: GM_CHECKSUM_INIT (checksum.h)

_slot = None  # goldminer._slot once the spec has set sys.path (it imports torch)
SUBSTITUTE_TRIES = 64
KEEP_S = 0.001  # an item that took this long is kept in the slot for a re-issue
_retire = False
_me = 0  # the pid of the worker the pool started (_serve): any other is a fork of it
_loading = False  # loading the spec (a zygote or a worker): what runs is the user's import
from_server = False  # a zygote the zygote server forked (_zserver.py), not exec'd
PR_SET_CHILD_SUBREAPER = 36


class Quarantined(WorkerError):
    """A sample the pool quarantined (it killed or stalled two workers): the
    trainer words it as torch words a dead worker, with the pid and signal the
    pool saw (dataloader.py, _raise_failed)."""


def _on_usr1(sig, frame):
    global _retire
    _retire = True


def in_worker():
    """Is this process a goldminer worker or zygote, or loading what one loads (the
    trainer's script imported as __mp_main__)? A DataLoader built there starts no
    workers of its own."""
    return _loading or _me != 0


def _load_spec(fd=5):
    """The spec from fd (read with pread: the offset is shared with every process
    given the same memfd), then fd is closed."""
    size, blob = os.fstat(fd).st_size, bytearray()
    while len(blob) < size:
        part = os.pread(fd, size - len(blob), len(blob))
        if not part:
            raise EOFError("the spec (fd %d) ends early" % fd)
        blob += part
    os.close(fd)
    # the trainer's sys.path first: its modules are where the script found them
    head = pickle.loads(blob[:int(blob[:16], 16) + 16][16:])
    sys.path[:] = head["sys_path"]
    here = head.get("fork_env")
    if from_server and here is not None:  # forked from the trainer as it was earlier:
        os.environ.clear()                # its environment and directory as they are
        os.environ.update(here["environ"])  # now, as an exec'd zygote inherits them
        try:
            os.chdir(here["cwd"])
        except OSError:
            pass
    if head.get("environ") is not None:  # started by a node agent: the trainer's
        os.environ.clear()
        os.environ.update(head["environ"])
        try:
            os.chdir(head["cwd"])  # ('' in sys.path is the trainer's directory)
        except OSError:
            pass
    try:
        __import__("cloudpickle")  # its types must be importable to load
    except ImportError:
        pass
    if head.get("main"):
        _import_main(head["main"])
    return head, pickle.loads(blob[int(blob[:16], 16) + 16:])


def main_ref(body, by_name):
    """(In the trainer.) What a worker needs to import the trainer's main script:
    multiprocessing.spawn's preparation data for it (its module name, or its
    path, and sys.argv), when the pickled spec names __main__ by reference
    (by_name: plain pickle, python3-cloudpickle being absent; cloudpickle pickles
    the script's classes and functions by value), or names __mp_main__ (the script
    as a spawn child of the trainer imported it: multiprocessing's, mp.spawn's;
    cloudpickle pickles those by name too); None when it does not."""
    if not (by_name and b"__main__" in body) and b"__mp_main__" not in body:
        return None
    from multiprocessing import spawn
    data = spawn.get_preparation_data("goldminer")
    ref = {k: data[k] for k in ("init_main_from_name", "init_main_from_path") if k in data}
    if ref:
        ref["sys_argv"] = list(sys.argv)
    return ref or None


def _import_main(ref):
    """The trainer's main script imported as __mp_main__ and aliased as __main__
    (multiprocessing.spawn.prepare, what torch's spawn workers do), so that the
    pickle's __main__.X finds X; its `if __name__ == "__main__":` block does not
    run. A DataLoader with workers iterated meanwhile (a script whose loop is not
    under that guard) raises instead of starting workers of its own, as
    multiprocessing refuses to start a process then: the worker fails to load,
    and the trainer's loader says why."""
    from multiprocessing import spawn
    script = os.path.basename(ref.get("init_main_from_path") or
                              ref.get("init_main_from_name") or "")
    why = ("%s iterates a DataLoader with workers when a worker imports it to unpickle its"
           " classes: put that loop under if __name__ == '__main__': (or install"
           " python3-cloudpickle)" % script)
    classes = []
    for mod, name in (("torch.utils.data.dataloader", "DataLoader"),
                      ("goldminer.dataloader", "DataLoader")):
        try:
            classes.append(getattr(__import__(mod, fromlist=[name]), name))
        except ImportError:
            pass
    saved = [(c, c.__dict__["__iter__"]) for c in classes if "__iter__" in c.__dict__]

    def refuse(orig):
        def __iter__(self):
            if getattr(self, "num_workers", 0):
                raise WorkerError(why)
            return orig(self)
        return __iter__
    for c, orig in saved:
        c.__iter__ = refuse(orig)
    try:
        spawn.prepare(ref)
    finally:
        for c, orig in saved:
            c.__iter__ = orig


class _Task:
    """One claimed slot: its indices, payload buffer and bind calls."""

    def __init__(self, lib, b, slot, task):
        self.lib, self.b, self.slot, self.task = lib, b, slot, task
        idx = ctypes.POINTER(ctypes.c_uint32)()
        epoch, batch = ctypes.c_uint32(), ctypes.c_uint32()
        n = lib.gm_bind_indices(b, slot, ctypes.byref(idx), ctypes.byref(epoch),
                                ctypes.byref(batch))
        self.indices = idx[:n]
        self.epoch, self.batch = epoch.value, batch.value  # the trainer's, in the slot
        self.fresh = lib.gm_bind_done_count(b, slot) == 0  # no earlier holder's work
        self.base = None
        cap = ctypes.c_uint64()
        ptr = lib.gm_bind_payload(b, slot, ctypes.byref(cap))
        self.cap = cap.value
        self.buf = memoryview((ctypes.c_char * self.cap).from_address(ptr)).cast("B")

    quiet = False  # position made again after a death: its record exists

    def stamp(self):
        """The batch's place and its lease's digest into the payload's header
        (_slot.py): the lease's ids[] (epoch, batch, indices), as the node agent
        that checks a peer's batch computes it (core/remote/check.c)."""
        ids = struct.pack("<II", self.epoch, self.batch) + struct.pack(
            "<%dI" % len(self.indices), *self.indices)
        digest = self.lib.gm_checksum64(FNV_OFFSET, ids, len(ids))
        _slot.stamp(self.buf, self.epoch, self.batch, digest)

    def error(self, pos, sample, msg):
        if self.quiet:
            return
        self.lib.gm_bind_error(self.b, self.slot, pos, sample, -errno.EIO,
                               msg.encode("utf-8", "replace")[:111])

    def publish(self, status):
        self.lib.gm_bind_sample(self.b, self.slot, 0xFFFFFFFF)
        self.lib.gm_bind_publish(self.b, self.slot, status)


def _sample(w, t, i):
    """dataset[i] seeded for (seed, epoch, i); raises what it raises."""
    if t.lib.gm_bind_sample(t.b, t.slot, i):  # (one call: it says if quarantined)
        raise Quarantined("sample %d is quarantined: it crashed or stalled two workers" % i)
    _slot.seed_all(_slot.seed_at(t.base, i))
    try:
        return w["dataset"][i]
    finally:
        if os.getpid() != _me:  # (one system call a sample: a fork is not the worker)
            _refuse_fork(w, "__getitem__(%d)" % i)


def _one(w, t, pos, i):
    """The item for position pos (index i), substituted on error per on_error.
    Returns (item, None) or (None, (exception, traceback text, index, status))."""
    n = len(w["dataset"])
    try:
        return _sample(w, t, i), None
    except Exception as e:  # noqa: BLE001 - any error of the user's dataset
        tb = traceback.format_exc()
        t.error(pos, i, "%s: %s" % (type(e).__name__, e))
        if w["on_error"] != "skip":
            return None, (e, tb, i, -errno.EBADMSG)
    for j in range(1, SUBSTITUTE_TRIES + 1):
        k = (i + j) % n
        try:
            return _sample(w, t, k), None
        except Exception:  # noqa: BLE001
            continue
    return None, (WorkerError("sample %d is bad and so are the %d after it: no substitute"
                              % (i, SUBSTITUTE_TRIES)), "", i, -errno.ENODATA)


def _fail(w, t, exc, tb, index, status=-errno.EBADMSG):
    """Publish the batch as failed, the exception pickled into the payload."""
    info = {"type": type(exc), "msg": str(exc), "tb": tb, "index": index, "batch": t.batch}
    try:
        blob = w["dumps"]((exc, info))
    except Exception:  # noqa: BLE001 - an exception that does not pickle
        info["type"] = RuntimeError
        blob = pickle.dumps((None, info))
    blob = blob[:max(0, t.cap - _slot.HDR)]
    struct.pack_into("<QQ8s", t.buf, 0, _slot.HDR + len(blob), len(blob), b"GMPYFAIL")
    t.buf[_slot.HDR:_slot.HDR + len(blob)] = blob
    t.stamp()
    t.publish(status)


class _Kept:
    """The batch's finished items, kept in the slot so that a re-issued batch
    resumes after them (the done bits say which, bind.h): a directory of
    (offset, length) per position at the very end of the slot, the pickles below
    it. An item that does not fit, or took less than KEEP_S to make (pickling a
    small tensor costs about as much), or of a dataset that says
    goldminer_keep_items = False, is not kept (length 0): it is made again,
    with the same bytes (its seed is its own)."""

    def __init__(self, t):
        self.t, self.n = t, len(t.indices)
        self.dir = t.cap - 16 * self.n
        self.low = self.dir
        for pos in range(0 if t.fresh else self.n):
            off, ln = self.entry(pos)
            if ln:
                self.low = min(self.low, off)

    def entry(self, pos):
        """(offset, length) of position pos's kept item, (0, 0) when none."""
        t = self.t
        if self.dir < 0 or t.fresh or not t.lib.gm_bind_is_done(t.b, t.slot, pos):
            return 0, 0
        off, ln = struct.unpack_from("<QQ", t.buf, self.dir + 16 * pos)
        return (off, ln) if ln and off + ln <= self.dir else (0, 0)

    def load(self, pos):
        off, ln = self.entry(pos)
        if not ln:
            return None, False
        try:
            return pickle.loads(self.t.buf[off:off + ln]), True
        except Exception:  # noqa: BLE001 - a torn write: make it again
            return None, False

    def keep(self, pos, item):
        if self.dir < 0:
            return
        try:
            blob = pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # noqa: BLE001 - not picklable by value: not kept
            blob = b""
        off = (self.low - len(blob)) // 64 * 64
        if blob and off >= 0:
            self.t.buf[off:off + len(blob)] = blob
            self.low = off
        else:
            off, blob = 0, b""
        struct.pack_into("<QQ", self.t.buf, self.dir + 16 * pos, off, len(blob))

    def forget(self):
        """Before the payload overwrites them: a holder that dies while writing it
        leaves positions done but no item, made again by the next."""
        for pos in range(max(0, self.n) if self.dir >= 0 else 0):
            struct.pack_into("<QQ", self.t.buf, self.dir + 16 * pos, 0, 0)


def produce(w, t):
    items, kept = [], _Kept(t)
    # a dataset may say its items are cheaper to make again on a re-issue than to
    # pickle into the slot for every batch (hybrid.py: C-made, seeded per sample)
    keep = getattr(w["dataset"], "goldminer_keep_items", True)
    seed = w["seed"] if not w.get("seed_table") else _epoch_seed(t)
    if seed is None:
        return _fail(w, t, RuntimeError(
            "goldminer worker: the ring's epoch table has no seed for epoch %d (the"
            " trainer gives an epoch's seed before its tasks): this batch cannot be made"
            " with its bytes" % t.epoch), "", t.indices[0] if t.indices else 0)
    t.base = _slot.seed_base(seed, t.epoch)
    for pos, i in enumerate(t.indices):
        item, ok = (None, False) if t.fresh else kept.load(pos)
        if not ok:
            # made again after a death: its error record is the dead holder's
            t.quiet = not t.fresh and t.lib.gm_bind_is_done(t.b, t.slot, pos)
            t0 = time.monotonic()
            item, bad = _one(w, t, pos, i)
            t.quiet = False
            if bad:
                return _fail(w, t, *bad)
            if keep and time.monotonic() - t0 >= KEEP_S:  # else cheaper to make again
                kept.keep(pos, item)  # before the done bit: what a resumer may read
        items.append(item)
        t.lib.gm_bind_done(t.b, t.slot, pos)
    try:
        _slot.seed_all(_slot.seed_at(t.base, -1 - t.batch))
        total = packed = None
        auto = w.get("auto_collation", True)  # False: batch_size=None, one item
        if auto and w["collate_fn"] is _default_collate():
            kept.forget()  # the stack is written over them
            total = _slot.collate_into(items, t.buf, t.cap, w["dumps"])
        if total is None:
            packed = _slot.pack(_collate(w, items if auto else items[0]), w["dumps"])
            total = packed[2]
    except Exception as e:  # noqa: BLE001 - collate_fn's or the layout's
        # a failed batch carries an error record (a peer's home refuses one
        # without: core/remote/check.c), here on its first sample
        if t.indices:
            t.error(0, t.indices[0], "collate_fn: %s: %s" % (type(e).__name__, e))
        return _fail(w, t, e, traceback.format_exc(), t.indices[0] if t.indices else 0)
    kept.forget()
    if total > t.cap:
        struct.pack_into("<Q", t.buf, 0, total)
        return t.publish(-errno.EMSGSIZE)
    if packed is not None:
        _slot.write(t.buf, packed)
    t.stamp()
    t.publish(0)


def _epoch_seed(t):
    """The base seed of task t's epoch, from the ring's epoch table (bind.h): the
    trainer writes each epoch's before its tasks; None when it is not there."""
    seed = ctypes.c_uint64()
    if t.lib.gm_bind_epoch_seed(t.b, t.epoch, ctypes.byref(seed)):
        return None
    return seed.value


def _first_seed(lib, b):
    """A worker started before its loader's first epoch (seed_table): wait for the
    first epoch's seed, what worker_init_fn and get_worker_info() see, as a torch
    worker sees the base seed of the iterator that started it; None when the ring
    says stop or the pool retires this worker first."""
    epoch, seed = ctypes.c_uint32(), ctypes.c_uint64()
    while not _retire:
        rc = lib.gm_bind_first_epoch(b, 200, ctypes.byref(epoch), ctypes.byref(seed))
        if rc == 0:
            return seed.value
        if rc == -errno.ENODATA:
            return None
    return None


def _collate(w, items):
    try:
        return w["collate_fn"](items)
    finally:
        if os.getpid() != _me:
            _refuse_fork(w, "collate_fn")


def _refuse_fork(w, where):
    """In a process forked by the user's code that came back into the worker's
    loop instead of ending: end it here, before it writes into the ring. A child
    that was ending anyway (sys.exit) ends with its code, quietly."""
    exc = sys.exc_info()[1]
    if isinstance(exc, SystemExit):
        code = exc.code
        os._exit(code if isinstance(code, int) else 0 if code is None else 1)
    ds = type(w["dataset"])
    msg = ("goldminer worker: process %d, forked by worker %d in %s of dataset %s.%s, "
           "returned into the worker's loop: it is ended here and makes nothing (a "
           "process the dataset forks must end with os._exit() or exec; the worker "
           "makes the batch)\n" % (os.getpid(), _me, where, ds.__module__, ds.__qualname__))
    try:
        os.write(2, msg.encode("utf-8", "replace"))  # (not sys.stderr: the worker's
    except OSError:                                  # buffered bytes are not ours)
        pass
    os._exit(70)  # EX_SOFTWARE


def _end_descendants(limit_s=1.0):
    """SIGKILL and reap every process this worker leaves: its children, then the
    orphans of theirs, which come to it (a child subreaper); within limit_s."""
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        kids = _children()
        if not kids:
            return
        for k in kids:
            try:
                os.kill(k, signal.SIGKILL)
            except OSError:
                pass
        while True:  # the dead, as they come; the next look finds the rest
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                time.sleep(0.002)
                break


def _children():
    """This process's children (/proc/self/task/TID/children, else a scan of
    /proc for their parent), zombies too: they must be reaped."""
    me, out = os.getpid(), []
    try:
        for tid in os.listdir("/proc/self/task"):
            with open("/proc/self/task/%s/children" % tid) as f:
                out += [int(v) for v in f.read().split()]
        return out
    except OSError:
        pass
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == me:
                        out.append(int(d))
            except (OSError, IndexError, ValueError):
                pass
    return out


def _default_collate():
    """torch's default_collate (None without torch): made straight into the slot."""
    try:
        from torch.utils.data import default_collate
    except ImportError:
        return None
    return default_collate


def _setup():
    global _slot, _loading
    _loading = True  # (never reset: this process is a zygote or a worker from now)
    head, w = _load_spec()
    from . import _slot as slot_module  # (torch and NumPy: from the trainer's sys.path)
    _slot = slot_module
    w.update(head)

    try:
        import cloudpickle
        w["dumps"] = cloudpickle.dumps
    except ImportError:
        w["dumps"] = pickle.dumps
    try:  # one intra-op thread per worker, as torch's own workers do
        import torch
        torch.set_num_threads(1)
    except ImportError:
        pass
    return w


def _attach(lib):
    b = ctypes.c_void_p()
    rc = lib.gm_bind_attach(ctypes.byref(b), 3)
    if rc:
        sys.stderr.write("goldminer worker: cannot map the ring (fd 3): %s\n" % os.strerror(-rc))
        os._exit(2)
    return b


def _load(lib, b):
    """The spec, or the process ends with the reason in the ring header."""
    try:
        return _setup()
    except BaseException as e:  # noqa: BLE001 - say why, then go
        msg = "%s: %s" % (type(e).__name__, e)
        lib.gm_bind_fatal(b, ("cannot load the dataset: " + msg).encode()[:250])
        sys.stderr.write("goldminer worker: %s\n%s" % (msg, traceback.format_exc()))
        os._exit(1)


def _name(name):
    """This process's name in ps and /proc/PID/comm (PR_SET_NAME)."""
    ctypes.CDLL(None).prctl(15, ctypes.c_char_p(name), 0, 0, 0)


def _worker_info(w, wid):
    """torch.utils.data.get_worker_info() in this worker: its id (the pool's,
    0..num_workers-1, kept by a replacement), num_workers, seed (the loader's seed
    plus the id, as torch's base seed plus the id) and the dataset; the three
    global generators are seeded with that seed for worker_init_fn."""
    seed = (w["seed"] + wid) & ((1 << 63) - 1)
    try:
        from torch.utils.data._utils import worker as tw
        tw._worker_info = tw.WorkerInfo(id=wid, num_workers=w.get("num_workers", 1),
                                        seed=seed, dataset=w["dataset"])
    except (ImportError, AttributeError):  # a torch without it: the id still reaches
        pass                               # worker_init_fn
    _slot.seed_all(seed)
    return seed


def _torch_taken(wid, seed):
    """worker_init_fn seeded torch's generator itself (torch.manual_seed: its
    initial seed is no longer the one set for it): as torch does, that seed is
    what the worker's samples draw from; goldminer stops reseeding torch's
    generator per sample there, so torch draws then depend on which worker made
    which sample (random's and NumPy's stay seeded per sample). Said once."""
    if _slot._torch is None or _slot._torch.initial_seed() == seed & ((1 << 63) - 1):
        return
    _slot.torch_taken = True
    if wid == 0:
        sys.stderr.write("goldminer worker: worker_init_fn seeded torch's generator"
                         " (torch.manual_seed): its draws are no longer seeded per sample,"
                         " so they depend on which worker makes which batch\n")


def _serve(lib, b, w):
    """The worker loop: claim, produce, publish until stop, the end or retirement."""
    global _me
    _me = os.getpid()
    _name(b"gm-pyworker")
    # The orphans of what the dataset forks come to this process, not to the
    # trainer or init: the worker holds only its own descendants, so this changes
    # nothing for anyone else (the trainer is a subreaper only in its adoption
    # window, core/pool.c), and they end with it (_end_descendants).
    ctypes.CDLL(None).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    signal.signal(signal.SIGUSR1, _on_usr1)
    wid = int(os.environ.get("GM_WORKER_ID", "0"))
    if w.get("seed_table"):  # started with its loader, before the first epoch
        w["seed"] = _first_seed(lib, b)
        if w["seed"] is None:
            sys.stdout.flush()
            os._exit(0)
    seed = _worker_info(w, wid)
    if w.get("worker_init_fn") is not None:
        try:
            w["worker_init_fn"](wid)
        except Exception as e:  # noqa: BLE001 - the user's: the pool's fatal error says it
            if os.getpid() != _me:
                _refuse_fork(w, "worker_init_fn")
            _init_failed(lib, b, wid, e)
        if os.getpid() != _me:
            _refuse_fork(w, "worker_init_fn")
        _torch_taken(wid, seed)
    if w.get("deal", 0) > 1 and wid < w["deal"]:  # torch's round robin (bind.h)
        lib.gm_bind_deal(b, w["deal"], wid)
    task = ctypes.c_uint64()
    while not _retire:
        slot = lib.gm_bind_claim(b, 200, ctypes.byref(task))
        if slot == -errno.ENODATA:
            break
        if slot == -errno.EPERM:  # a fork none of the checks above saw (bind.h)
            _refuse_fork(w, "code it called")
        if slot >= 0:
            produce(w, _Task(lib, b, slot, task.value))
    sys.stdout.flush()
    _end_descendants()
    os._exit(0)  # no interpreter teardown: the ring and the dataset go with the process


def _init_failed(lib, b, wid, e):
    """worker_init_fn raised: every worker would, so the pool's error (what the
    trainer raises) is its type and message; the traceback goes to stderr."""
    msg = "worker_init_fn(%d) raised %s: %s" % (wid, type(e).__name__, e)
    lib.gm_bind_fatal(b, msg.encode("utf-8", "replace")[:250])
    try:
        sys.stderr.write("goldminer worker %d: %s\n%s" % (wid, msg, traceback.format_exc()))
        sys.stderr.flush()
    except OSError:
        pass
    _end_descendants()
    os._exit(1)


def _forked(lib, b, w, trainer, mid, wid):
    """In a worker the zygote forked: wait to be the trainer's (orphaned to it while
    it is a subreaper, core/pool.c's adoption window), die with it, map the ring as
    this process, serve as worker wid. Orphaned to anyone else (the trainer gone, or
    its window closed: it gave up on this fork), or still the zygote's child after
    10 s, it ends."""
    os.close(4)
    os.environ["GM_WORKER_ID"] = str(wid)
    try:  # its own process group, as an exec'd worker's (core/pool.c, child())
        os.setpgid(0, 0)
    except OSError:
        pass
    deadline = time.monotonic() + 10
    while os.getppid() == mid and time.monotonic() < deadline:
        time.sleep(0.001)  # (the zygote's child exits right after the fork)
    if os.getppid() != trainer:
        os._exit(0)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    if os.getppid() != trainer:
        os._exit(0)
    lib.gm_bind_detach(b)  # the zygote's mapping: its lease id is the zygote's pid
    _serve(lib, _attach(lib), w)


def zygote(lib):
    """Load once, then fork a worker for each request on fd 4 (core/pool.c, "the
    zygote"): fork twice so that the worker is orphaned to the trainer."""
    _name(b"gm-zygote")
    b = _attach(lib)
    w = _load(lib, b)
    trainer = os.getppid()
    # what is loaded now stays where it is: the garbage collector of a forked
    # worker will not touch (and so copy) the pages the workers share with us
    import gc
    gc.collect()
    gc.freeze()
    os.write(4, b"R")
    while True:
        try:
            req = os.read(4, 16)
        except InterruptedError:
            continue
        if not req:
            os._exit(0)  # the coordinator closed the socket
        if len(req) != 5 or req[:1] != b"F":
            continue  # not the pool's request ("F" and the worker's id)
        wid = struct.unpack("=i", req[1:5])[0]
        r, wr = os.pipe()
        mid = os.fork()
        if mid == 0:
            os.close(r)
            me = os.getpid()  # (taken before the fork: it may exit before the child looks)
            pid = os.fork()
            if pid == 0:
                os.close(wr)
                _forked(lib, b, w, trainer, me, wid)
            os.write(wr, struct.pack("i", pid))
            os._exit(0)
        os.close(wr)
        data = os.read(r, 4)
        os.close(r)
        os.waitpid(mid, 0)
        os.write(4, data if len(data) == 4 else struct.pack("i", -1))


def main(argv=None):
    from . import _bind
    argv = sys.argv[1:] if argv is None else argv
    lib = _bind.lib()
    if argv and argv[0] == "--probe":  # a node agent asks: can it run these workers?
        import importlib.util  # torch found, not imported: seconds the agent's loop would wait
        sys.exit(0 if lib and importlib.util.find_spec("torch") else 1)
    if argv and argv[0] == "--zygote":
        zygote(lib)
    b = _attach(lib)
    _serve(lib, b, _load(lib, b))


if __name__ == "__main__":
    main()
