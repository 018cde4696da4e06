"""run - `python3 -m goldminer run SCRIPT [ARGS...]`: a training script, unchanged,
with goldminer serving its DataLoaders.

    python3 -m goldminer run train.py --epochs 3      (or: goldminer run -- python3 train.py ...)
    python3 -m goldminer run --node SOCKET train.py   (or GOLDMINER_NODE=SOCKET)

The script runs as `python3 train.py --epochs 3` would run it: it is the module
__main__ (its own file, __file__, sys.argv = [train.py, --epochs, 3], sys.path[0]
its directory with symbolic links resolved), its exit status is its own
(sys.exit(n), 1 with the traceback of an uncaught exception, a KeyboardInterrupt
ends the process by SIGINT as the interpreter does), and no signal handler is
installed or changed. Before it starts, torch.utils.data.DataLoader is replaced
by a subclass of itself (under every name a script reaches it by:
torch.utils.data.DataLoader and torch.utils.data.dataloader.DataLoader), so
`from torch.utils.data import DataLoader`, `torch.utils.data.DataLoader(...)`
and isinstance() checks all meet it.

Each DataLoader the script builds over a map-style dataset is planned
(plan.py: the C data plane, a C+Python hybrid, or Python workers) and served by
goldminer with the same arguments; an IterableDataset stays with torch (an
iterator keeps state: there are no indices to hand stateless workers), and so
does a loader goldminer refuses while torch accepts it; either is named in one
line on stderr. GOLDMINER_PLAN=1 prints each plan when the loader is built. At
exit one line per loader on stderr: its plan, the images per second it
delivered while iterated, its workers (local/remote) and the trainer's stall
share (time spent waiting in next() over the time spent iterating).

--node SOCKET (before SCRIPT; else $GOLDMINER_NODE): every loader's workers run
in the node agent at SOCKET (`goldminer node`), which sizes them with its
division across the host's jobs and may borrow workers from its peers: the C
path's Loader(node=), the hybrid and Python paths' DataLoader(node=). A loader
with num_workers=0 makes its batches in this process, as the script asked; the
script's num_workers stays the most workers its job gets, the agent's and its
peers' together. The agent must answer before the script starts (else one line
naming the socket, and the script is not run); the summary names the agent and
counts its workers here (local) and on its peers (remote, from the agent's
status).

Every Python interpreter started under the run (torch.multiprocessing.spawn's and
multiprocessing's spawn children, a script run by subprocess) swaps DataLoader
too: the run puts _site/ first on PYTHONPATH and sets GOLDMINER_RUN_SWAP=1; its
sitecustomize.py calls install_child() once torch.utils.data is imported (not in
goldminer's own workers). A child's loaders are planned and served as the run's,
and its summary lines at its exit name its pid.

torch's own DataLoader class keeps its __setattr__ rule, bound to itself: torch's
version calls super() with its module's global DataLoader, the swapped class,
which every instance made by torch's own code (DataLoader2, datapipes) or by a
subclass made before the swap would fail.

What it does not do: no change to anything but DataLoader (models, optimisers,
devices are the script's); loaders built before the swap (a module imported by
`python -m goldminer` itself) are not served, nor those of a child interpreter
started with -E, -I or -S (it reads no PYTHONPATH or no sitecustomize); a
subclass of DataLoader that overrides __iter__ gets torch's behaviour for what it
overrides.
"""
import atexit
import errno
import os
import sys
import time
import types

_PREFIX = "goldminer run: "
_records = []  # one per loader built, for the exit summary
_node = None  # the node agent's socket (--node, $GOLDMINER_NODE): the loaders' workers
# the attributes torch's DataLoader refuses to change once built
_FROZEN = ("batch_size", "batch_sampler", "sampler", "drop_last", "dataset",
           "persistent_workers")


def _say(line):
    sys.stderr.write(_PREFIX + line + "\n")
    sys.stderr.flush()


class Record:
    """What one served loader did: filled while it is iterated, printed at exit."""

    def __init__(self, where, plan_line, kind, node=None):
        self.where, self.plan_line, self.kind, self.node = where, plan_line, kind, node
        self.images = self.batches = 0
        self.busy_s = self.wait_s = 0.0
        self.open = []  # the start of each loop still open (a script's next(it) to the end)
        self.local = self.remote = 0
        self.loader = None  # the C path's batches: its .copied, polled with the workers

    def line(self):
        if not self.batches:
            return "%s: %s: never iterated" % (self.where, self.plan_line)
        now = time.monotonic()
        busy = self.busy_s + sum(now - t for t in self.open)
        rate = self.images / busy if busy > 0 else 0.0
        stall = 100.0 * self.wait_s / busy if busy > 0 else 0.0
        copied = getattr(self.loader, "copied", 0)
        return ("%s: %s: %d images in %.2f s = %.1f img/s, workers %d local / %d remote%s,"
                " trainer stalled %.1f%% of its time%s" % (
                    self.where, self.plan_line, self.images, busy, rate, self.local,
                    self.remote, " (node agent %s)" % self.node if self.node else "", stall,
                    "; %d batches held across the ring's slots were copied" % copied
                    if copied else ""))


def _summary():
    for r in _records:
        _say(r.line())


def _caller():
    """file:line of the script's frame that built the loader."""
    f = sys._getframe(1)
    here = os.path.dirname(os.path.abspath(__file__))
    tud = os.sep + os.path.join("torch", "utils", "data") + os.sep
    while f is not None:
        fn = f.f_code.co_filename
        if not fn.startswith(here) and tud not in fn:
            return "%s:%d" % (os.path.basename(fn), f.f_lineno)
        f = f.f_back
    return "?"


def _batch_len(out):
    """Samples in a collated batch: the first tensor's (or sequence's) length."""
    if isinstance(out, dict):
        out = next(iter(out.values()), None)
    while isinstance(out, (list, tuple)) and out:
        if hasattr(out[0], "shape") or isinstance(out[0], (list, tuple, dict)):
            out = out[0]
            if isinstance(out, dict):
                out = next(iter(out.values()), None)
            continue
        return len(out)
    shape = getattr(out, "shape", None)
    return int(shape[0]) if shape else 1


def timed(it, rec, workers, owner=None):
    """Yield from it, counting images, batches, the time iterated and waited.
    owner (the script's loader object) lives as long as the loop does: torch's
    iterator holds its loader, so `for b in DataLoader(...)` outlives the
    temporary, whose __del__ would close the served loader under the loop."""
    t_start = time.monotonic()
    rec.open.append(t_start)  # counted at exit too if the script never ends the loop
    try:
        while True:
            t0 = time.monotonic()
            try:
                out = next(it)
            except StopIteration:
                rec.wait_s += time.monotonic() - t0
                return
            rec.wait_s += time.monotonic() - t0
            rec.batches += 1
            rec.images += _batch_len(out)
            # every batch: a pool's workers are still starting at the first ones
            # (its first batch sizes the slots), so an early look undercounts
            loc, rem = workers()
            rec.local, rec.remote = max(rec.local, loc), max(rec.remote, rem)
            yield out
    finally:
        rec.busy_s += time.monotonic() - t_start
        rec.open.remove(t_start)
        try:
            workers()  # once more: what the last batches changed (the C path's copies)
        except Exception:  # noqa: BLE001 (a finally must not raise its own)
            pass  # the loader closed under the loop: the counts stay as last seen
        close = getattr(it, "close", None)
        if close:
            close()


def make_dataloader_class(torch_dl):
    """The DataLoader the script meets: a subclass of torch's (isinstance holds) whose
    constructor hands a map-style dataset to goldminer (plan.serve)."""
    import inspect

    sig = inspect.signature(torch_dl.__init__)

    class DataLoader(torch_dl):
        __doc__ = torch_dl.__doc__
        _goldminer = None

        def __init__(self, *args, **kw):
            from torch.utils.data import IterableDataset
            bound = sig.bind(self, *args, **kw)
            bound.apply_defaults()
            a = dict(bound.arguments)
            a.pop("self")
            a.update(a.pop("kwargs", {}) or {})
            where = _caller()
            if isinstance(a["dataset"], IterableDataset):
                torch_dl.__init__(self, *args, **kw)
                _say("%s: %s is an IterableDataset: it stays with torch (an iterator keeps"
                     " state; there are no indices for stateless workers)"
                     % (where, type(a["dataset"]).__name__))
                return
            from . import plan as _plan
            try:
                served = _plan.serve(a, node=_node)
            except (TypeError, ValueError, OSError) as e:
                torch_dl.__init__(self, *args, **kw)  # torch's own error if torch refuses too
                _say("%s: stays with torch: goldminer cannot serve it: %s" % (where, e))
                return
            object.__setattr__(self, "_goldminer", served)
            rec = Record(where, served.plan.line(), served.plan.path, served.node)
            rec.loader = served.loader
            object.__setattr__(self, "_gm_record", rec)
            _records.append(rec)
            if os.environ.get("GOLDMINER_PLAN", "") not in ("", "0"):
                _say("%s: plan\n%s" % (where, served.plan.text()))
            for name in ("dataset", "batch_size", "num_workers", "drop_last", "timeout",
                         "collate_fn", "pin_memory", "worker_init_fn", "prefetch_factor",
                         "persistent_workers", "generator", "pin_memory_device"):
                if name in a:
                    object.__setattr__(self, name, a[name])
            for name in ("sampler", "batch_sampler"):
                object.__setattr__(self, name, getattr(served.loader, name, a.get(name)))

        def __iter__(self):
            served = self._goldminer
            if served is None:
                return torch_dl.__iter__(self)
            return timed(iter(served.loader), self._gm_record, served.workers, self)

        def __len__(self):
            served = self._goldminer
            return torch_dl.__len__(self) if served is None else len(served.loader)

        def __setattr__(self, attr, val):
            # torch's __setattr__ calls super(DataLoader, self) with the module's
            # global DataLoader, which is this class now: it would call itself.
            # Its rule, then object's setattr.
            if getattr(self, "_DataLoader__initialized", False) and attr in _FROZEN:
                from ._abi import ArgumentError  # (a ValueError, as torch's)
                raise ArgumentError("%s attribute should not be set after %s is initialized"
                                    % (attr, torch_dl.__name__))
            object.__setattr__(self, attr, val)

        @property
        def goldminer_plan(self):
            """The plan (plan.Plan) goldminer serves this loader by; None with torch."""
            return self._goldminer.plan if self._goldminer is not None else None

        def __del__(self):
            served = self.__dict__.get("_goldminer")
            if served is not None:
                served.close()

    DataLoader.__module__ = torch_dl.__module__
    DataLoader.__qualname__ = torch_dl.__qualname__
    return DataLoader


def _own_setattr(orig):
    """torch's DataLoader.__setattr__ calls super(DataLoader, self) with its module's
    global DataLoader, which install() replaces: every instance of torch's own
    class (DataLoader2's loader, a subclass made before the swap) would fail with
    "super(type, obj): obj must be an instance or subtype of type". The same rule,
    bound to torch's class."""
    if getattr(orig, "_goldminer_setattr", False):
        return

    def __setattr__(self, attr, val):
        if getattr(self, "_DataLoader__initialized", False) and attr in _FROZEN:
            from ._abi import ArgumentError  # (a ValueError, as torch's)
            raise ArgumentError("%s attribute should not be set after %s is initialized"
                                % (attr, type(self).__name__))
        super(orig, self).__setattr__(attr, val)
    orig.__setattr__ = __setattr__
    orig._goldminer_setattr = True


def install():
    """Replace torch.utils.data.DataLoader under every name; False without torch."""
    try:
        import torch.utils.data as tud
        import torch.utils.data.dataloader as tdl
    except ImportError:
        return False
    orig = getattr(tdl.DataLoader, "_goldminer_original", tdl.DataLoader)
    _own_setattr(orig)
    cls = make_dataloader_class(orig)
    cls._goldminer_original = orig
    tud.DataLoader = cls
    tdl.DataLoader = cls
    return True


_SITE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_site")


def children_environ(env, node):
    """env (a dict: os.environ) made so that every Python interpreter started under
    the run swaps DataLoader too (_site/sitecustomize.py): that folder first on
    PYTHONPATH, then this package's, GOLDMINER_RUN_SWAP=1, and GOLDMINER_NODE when
    --node gave the agent."""
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    old = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != _SITE]
    env["PYTHONPATH"] = os.pathsep.join([_SITE] + ([] if pkg in old else [pkg]) + old)
    env["GOLDMINER_RUN_SWAP"] = "1"
    if node is not None:
        env["GOLDMINER_NODE"] = node
    return env


def install_child():
    """The swap in a child interpreter of a run (_site/sitecustomize.py calls it once
    torch.utils.data is imported): loaders served as in the run's own process, the
    agent of $GOLDMINER_NODE, one summary at this interpreter's exit, its lines
    naming its pid. Nothing in goldminer's own workers (they serve no loader)."""
    global _PREFIX, _node
    if "goldminer._worker" in sys.modules or \
            getattr(sys.modules.get("torch.utils.data.dataloader"), "DataLoader", None) \
            is not None and hasattr(sys.modules["torch.utils.data.dataloader"].DataLoader,
                                    "_goldminer_original"):
        return False
    _PREFIX = "goldminer run (pid %d): " % os.getpid()
    _node = os.environ.get("GOLDMINER_NODE") or None
    if not install():
        return False
    atexit.register(_summary)
    return True


def _main_module(path):
    """A fresh __main__ for the script, as the interpreter makes one."""
    import importlib.machinery
    mod = types.ModuleType("__main__")
    mod.__file__ = path
    mod.__builtins__ = __builtins__
    mod.__loader__ = importlib.machinery.SourceFileLoader("__main__", path)
    mod.__spec__ = None
    mod.__cached__ = None
    return mod


def _excepthook_without_us(e):
    """Report an uncaught exception as python3 SCRIPT does: its traceback starts at
    the script's frame, not at this runner's."""
    tb = e.__traceback__
    here = os.path.abspath(__file__)
    while tb is not None and os.path.abspath(tb.tb_frame.f_code.co_filename) == here:
        tb = tb.tb_next
    sys.excepthook(type(e), e.with_traceback(tb), tb)


def run_script(path, args):
    """Run the script at path as __main__ with argv [path] + args; returns its exit
    status for sys.exit (SystemExit and KeyboardInterrupt pass through)."""
    try:
        with open(path, "rb") as f:
            source = f.read()
    except OSError as e:
        sys.stderr.write("%s: can't open file %r: [Errno %d] %s\n"
                         % (sys.executable, path, e.errno, e.strerror))
        return 2
    sys.argv[:] = [path] + list(args)
    sys.path[0] = os.path.dirname(os.path.realpath(path))
    mod = _main_module(path)
    # __mp_main__ too, as multiprocessing names the interpreter's main module: a
    # worker that imports the script (spawn, goldminer's without cloudpickle) pickles
    # the script's classes under that name
    sys.modules["__main__"] = sys.modules["__mp_main__"] = mod
    code = compile(source, path, "exec", dont_inherit=True)
    try:
        exec(code, mod.__dict__)
    except (SystemExit, KeyboardInterrupt):
        raise
    except BaseException as e:  # noqa: BLE001 - reported as the interpreter would
        _excepthook_without_us(e)
        return 1
    return 0


_USAGE = """usage: python3 -m goldminer run [--node SOCKET] SCRIPT [ARGS...]

Runs SCRIPT as `python3 SCRIPT ARGS` would, with every torch DataLoader over
a map-style dataset served by goldminer. GOLDMINER_PLAN=1 prints each plan.
  --node SOCKET  the workers run in the node agent at SOCKET (goldminer node),
                 sized across the host's jobs; default: $GOLDMINER_NODE, else here"""


def _options(argv):
    """run's own options, before SCRIPT: (node or None, the rest); ValueError."""
    node = None
    while argv and argv[0].startswith("-"):
        if argv[0] in ("-h", "--help"):
            break
        a = argv.pop(0)
        if a == "--":
            break
        if a == "--node" and argv:
            node = argv.pop(0)
        elif a.startswith("--node="):
            node = a[len("--node="):]
        else:
            raise ValueError("%s: not an option of run (--node SOCKET, then SCRIPT)" % a
                             if a != "--node" else "--node needs the agent's socket")
        if not node:
            raise ValueError("--node needs the agent's socket, not an empty word")
    if node is None:
        node = os.environ.get("GOLDMINER_NODE") or None
    return node, argv


def _check_agent(node):
    """None when the agent at node answers, else the line that says what to do."""
    fix = ("start one (goldminer node --socket %s) or run without --node/GOLDMINER_NODE"
           % node)
    if not os.path.exists(node):
        return "no node agent at %s: the socket does not exist: %s" % (node, fix)
    try:
        from ._abi import lib
        L = lib()
    except ImportError as e:
        return "the node agent at %s cannot be asked: %s" % (node, e)
    if not L.has("gm_node_status"):
        return "the node agent at %s cannot be asked: %s has no gm_node_status" % (node, L.path)
    import ctypes
    out = ctypes.create_string_buffer(1 << 16)
    rc = L.gm_node_status(os.fsencode(node), out, len(out))
    if rc in (-errno.ECONNREFUSED, -errno.ENOTSOCK, -errno.EPROTOTYPE):
        return "no node agent answers at %s (%s): %s" % (node, os.strerror(-rc).lower(), fix)
    if rc:  # an agent of another uid or build, a reply it cannot read: the library's words
        why = out.value.decode(errors="replace").replace("gm_node_status: ", "", 1)
        return "the node agent at %s cannot serve this script: %s" % (
            node, why or os.strerror(-rc))
    return None


def main(argv):
    global _node
    try:
        node, argv = _options(list(argv))
    except ValueError as e:
        _say(str(e))
        print(_USAGE, file=sys.stderr)
        return 2
    if not argv or argv[0] in ("-h", "--help"):
        print(_USAGE, file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    if node is not None:
        why = _check_agent(node)
        if why:
            _say(why + " (the script was not started)")
            return 1
        _node = node
    children_environ(os.environ, node)  # the swap in every child interpreter too
    if install():
        atexit.register(_summary)
        from . import _zserver  # loaders' zygotes forked with torch loaded
        _zserver.start()
    else:
        _say("torch is not importable: the script runs with nothing to serve")
    return run_script(argv[0], argv[1:])
