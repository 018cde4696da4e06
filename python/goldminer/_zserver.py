"""_zserver - the zygote server: one per trainer process, a fork of the trainer
that makes each loader's zygote (core/pool.c, "the zygote") in milliseconds.

A Python loader's workers are forked from a zygote that loaded the loader's spec
(the pickled dataset, collate_fn, worker_init_fn: _worker.py). Exec'd, that
zygote is a fresh interpreter that imports torch (and torchvision, ...) again:
a second or more of CPU before the first batch, where torch forks its workers
from the trainer, which has them. The server is that fork, taken once, early:
when goldminer.torch is imported, `goldminer run` starts the script, or a
loader's pool starts (start()), while the trainer can be forked safely (one
thread, CUDA not initialised: the reasons torch's 'fork' context is refused are
not there yet). It holds what the trainer had imported by then and nothing
runs in it but this loop: each pool sends it "Z" with its ring, its zygote's
socket and its spec (SCM_RIGHTS, core/pool.c zygote_from_server); it forks
twice so that the zygote is orphaned to the trainer while the pool's adoption
window is open, and says "P" and the zygote's pid on the zygote's socket. The
zygote, once the trainer's child, dies with it (PR_SET_PDEATHSIG), leads its
own process group, puts the fds where an exec'd zygote finds them (3 the ring,
4 its socket, 5 the spec), takes the trainer's environment and working
directory from the spec (they may have changed since the server's fork), and
goes on as an exec'd zygote does (_worker.zygote): the spec loaded (the script
imported afresh as __mp_main__ when its classes are pickled by name: the
server's __main__ is an empty module), "R", then a worker forked per request.

The server dies with the trainer: PR_SET_PDEATHSIG (tied to the thread that
forked it), and its socket's end (the trainer's, closed however the trainer
ends). It is refreshed (forked again, the old one ended) when a pool starts
while the trainer is still safe to fork and has imported more modules since
(torchvision, the dataset's modules), so its zygotes import nothing the trainer
had. A server that died is said once on stderr and forked again when the
trainer can be forked; else (a thread runs) the pools exec their zygotes, as
without a server, and a pool whose server fails (no answer within 5 s) execs
its zygotes from then on (pool.c). GOLDMINER_ZYGOTE_SERVER=0: no server.

The trainer's end keeps one fd number for the process's life (a refresh dup2s
the new socket onto it), so a pool that holds that number never sends to
another file. stdio is flushed before each fork (no buffered bytes twice).
"""
import ctypes
import fcntl
import gc
import os
import signal
import socket
import struct
import sys
import time
import traceback
import types

from . import _worker

PR_SET_PDEATHSIG = 1
ADOPT_S = 10  # a zygote not orphaned to the trainer within this long ends itself

_sock = None  # the trainer's end (its fd number is the pools' zygote_server)
_pid = 0  # the server's pid; 0: none
_modules = 0  # len(sys.modules) when it was forked
REFRESH_MODULES = 32  # a pool's start forks a new server when the trainer has this
#                       many more modules (when it can: unsafe() is None)
_owner = 0  # the process that forked it (a fork of the trainer must not use it)
_old: "list[int]" = []  # servers replaced, not reaped yet (their pids)


def unsafe():
    """Why the trainer cannot be forked now, or None when it can: one thread (a
    fork copies no other, nor the locks they hold) and CUDA not initialised."""
    if os.environ.get("GOLDMINER_ZYGOTE_SERVER", "1") == "0":
        return "GOLDMINER_ZYGOTE_SERVER=0"
    if _worker.in_worker():
        return "a goldminer worker"
    try:
        threads = len(os.listdir("/proc/self/task"))
    except OSError as e:
        return "/proc/self/task: %s" % e
    if threads != 1:
        return "%d threads" % threads
    cuda = getattr(sys.modules.get("torch"), "cuda", None)
    try:
        if cuda is not None and cuda.is_initialized():
            return "CUDA is initialised"
    except Exception as e:  # noqa: BLE001 - a torch without it: not forked
        return "torch.cuda: %s" % e
    return None


def _alive():
    """Is this process's server running? A dead one is reaped and said."""
    global _pid
    if not _pid or os.getpid() != _owner:
        return False
    try:
        pid, status = os.waitpid(_pid, os.WNOHANG)
    except ChildProcessError:  # reaped by someone else: gone
        pid, status = _pid, -1
    if pid == 0:
        return True
    how = ("killed by signal %d" % os.WTERMSIG(status) if status >= 0
           and os.WIFSIGNALED(status) else "exit status %d" % os.WEXITSTATUS(status)
           if status >= 0 else "reaped elsewhere")
    try:
        sys.stderr.write("goldminer: the zygote server (pid %d) ended (%s): a new one is"
                         " forked when this process has one thread again, else each loader"
                         " starts its zygote as a fresh interpreter (slower first batch)\n"
                         % (_pid, how))
    except Exception:  # noqa: BLE001 - a closed stderr
        pass
    _pid = 0
    return False


def start():
    """Fork the server if there is none (or it died), or if the trainer imported
    more since its fork; only while the trainer can be forked (unsafe())."""
    global _sock, _pid, _modules, _owner
    if _owner and os.getpid() != _owner:  # a fork of the trainer: not its server
        _sock, _pid, _owner, _old[:] = None, 0, 0, []
    if _old:
        _reap()
    if _alive() and len(sys.modules) < _modules + REFRESH_MODULES:
        return
    if unsafe() is not None:
        return
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except Exception:  # noqa: BLE001 - closed or replaced streams
            pass
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    trainer = os.getpid()
    pid = os.fork()
    if pid == 0:
        try:
            ours.close()
            _serve(theirs, trainer)
        finally:
            os._exit(1)
    theirs.close()
    old, _pid, _modules, _owner = _pid, pid, len(sys.modules), trainer
    if _sock is None:
        _sock = ours
    else:  # the same fd number for the pools that hold it; the old server reads EOF
        os.dup2(ours.fileno(), _sock.fileno(), inheritable=False)
        ours.close()
    if old:
        _reap(old)


def _reap(pid=0):
    """Old servers (pid: one more, SIGKILLed now) reaped as they exit, never
    waited for: a loader's build does not wait for a process to end."""
    if pid:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
        _old.append(pid)
    for p in list(_old):
        try:
            if os.waitpid(p, os.WNOHANG)[0] == 0:
                continue
        except ChildProcessError:
            pass
        _old.remove(p)


def fd():
    """The pools' zygote_server: the server's socket (started or refreshed here
    when it can be), 0 when there is none."""
    start()
    return _sock.fileno() if _alive() else 0


def pid():
    """The server's pid (0: none); for tests and stats."""
    return _pid if _alive() else 0


def _prctl(option, arg):
    ctypes.CDLL(None).prctl(option, ctypes.c_ulong(arg), 0, 0, 0)


def _quiet_signals():
    """Signals as core/pool.c's child() leaves them for a zygote: SIGINT ignored
    (the terminal's Ctrl-C is the trainer's), the trainer's handlers gone, none
    blocked."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2,
                signal.SIGALRM, signal.SIGCHLD, signal.SIGQUIT):
        try:
            signal.signal(sig, signal.SIG_DFL)
        except (OSError, ValueError):
            pass
    signal.pthread_sigmask(signal.SIG_SETMASK, [])


def _serve(sock, trainer):
    """The server (a fork of the trainer): a zygote for each "Z" until the
    trainer's end closes or the trainer dies."""
    try:
        _worker._loading = True  # no loader here starts workers (in_worker)
        _quiet_signals()
        os.setpgid(0, 0)  # the trainer's terminal signals are not its
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != trainer:
            os._exit(0)
        _worker._name(b"gm-zserver")
        keep = sock.fileno()
        os.closerange(3, keep)  # nothing of the trainer's stays open here
        os.closerange(keep + 1, 1 << 20)
        try:
            signal.set_wakeup_fd(-1)  # (the trainer's, closed above)
        except (ValueError, OSError):
            pass
        # the trainer's script, half run, is not the __main__ a zygote imports;
        # nor is a module the trainer was importing when it forked (a package
        # whose __init__ imported goldminer.torch): a zygote imports them afresh
        sys.modules["__main__"] = types.ModuleType("__main__")
        sys.modules.pop("__mp_main__", None)
        for name, mod in list(sys.modules.items()):
            if getattr(getattr(mod, "__spec__", None), "_initializing", False):
                del sys.modules[name]
        gc.freeze()  # the trainer's objects: never collected (or finalised) here
        while True:
            try:
                msg, fds, _, _ = socket.recv_fds(sock, 16, 3)
            except InterruptedError:
                continue
            if not msg:
                os._exit(0)  # the trainer closed its end (or is gone)
            if msg == b"Z" and len(fds) == 3:
                _make(trainer, *fds)
            for f in fds:
                os.close(f)
    except BaseException:  # noqa: BLE001 - said, then gone (pools exec their zygotes)
        try:
            sys.stderr.write("goldminer zygote server: %s" % traceback.format_exc())
        except Exception:  # noqa: BLE001
            pass
    os._exit(1)


def _make(trainer, ring, zs, spec):
    """A zygote for one pool: forked twice (orphaned to the trainer, whose pool is
    a subreaper until the answer), its pid said on its socket as "P" + int32."""
    pid = -1
    try:
        r, w = os.pipe()
        mid = os.fork()
        if mid == 0:
            try:
                os.close(r)
                me = os.getpid()
                z = os.fork()
                if z == 0:
                    os.close(w)
                    _zygote(trainer, me, ring, zs, spec)
                os.write(w, struct.pack("i", z))
            finally:
                os._exit(0)
        os.close(w)
        data = os.read(r, 4)
        os.close(r)
        os.waitpid(mid, 0)  # the zygote is the trainer's from here
        if len(data) == 4:
            pid = struct.unpack("i", data)[0]
    except OSError:
        pass
    try:
        os.write(zs, b"P" + struct.pack("i", pid))
    except OSError:
        pass


def _zygote(trainer, middle, ring, zs, spec):
    """The zygote: the trainer's child (else it ends), then _worker.zygote over
    fds 3 (ring), 4 (its socket), 5 (spec)."""
    try:
        end = time.monotonic() + ADOPT_S
        while os.getppid() == middle and time.monotonic() < end:
            time.sleep(0.001)
        if os.getppid() != trainer:
            os._exit(0)  # the pool gave up on it (its window closed), or no trainer
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != trainer:
            os._exit(0)
        os.setpgid(0, 0)
        moved = [fcntl.fcntl(f, fcntl.F_DUPFD, 10) for f in (ring, zs, spec)]
        for want, f in zip((3, 4, 5), moved):
            os.dup2(f, want)
        os.closerange(6, 1 << 20)
        _worker.from_server = True
        from . import _bind
        _worker.zygote(_bind.lib())
    except BaseException:  # noqa: BLE001 - said; the pool execs the next one
        try:
            sys.stderr.write("goldminer zygote (from the server): %s"
                             % traceback.format_exc())
        except Exception:  # noqa: BLE001
            pass
    os._exit(1)
