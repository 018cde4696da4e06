"""No worker process, memfd or mapping outlives a Loader: after close(), after
garbage collection, after KeyboardInterrupt (caught or not), after the consumer is
SIGKILLed. The interrupt cases run in a child /usr/bin/python3 and are checked
from outside through /proc."""
import errno
import gc
import json
import os
import signal
import subprocess
import sys
import time

import helpers
from helpers import GmTest, alive, children, copy_of, dataset, memfd_fds, memfd_maps

import goldminer

# A generous bound for processes to disappear (never a performance check); four
# times that under make sanitize (GM_SANITIZER: ASan preloaded, the other lane's
# tests beside it on 2 cores), where a bound of test_startup's was overrun once.
WAIT_S = 80 if os.environ.get("GM_SANITIZER") else 20


def wait_gone(pids):
    """The pids still alive after up to WAIT_S seconds (reaping our own zombies)."""
    deadline = time.monotonic() + WAIT_S
    left = list(pids)
    while left and time.monotonic() < deadline:
        left = [p for p in left if alive(p)]
        if left:
            time.sleep(0.05)
    return left


CHILD = r"""
import json, os, signal, sys, time
sys.path.insert(0, sys.argv[1])
sys.path.insert(0, sys.argv[2])
import goldminer
from helpers import children, memfd_maps, memfd_fds
mode, root = sys.argv[3], sys.argv[4]

def report(tag, **kw):
    print(json.dumps(dict(tag=tag, **kw)), flush=True)

if mode == "caught":
    try:
        with goldminer.Loader(root, batch_size=4, workers=2, size=32) as l:
            for i, b in enumerate(l):
                if i == 2:
                    report("workers", pids=[p for p, _ in children()], maps=len(memfd_maps()))
                    os.kill(os.getpid(), signal.SIGINT)
                    time.sleep(5)   # the interrupt lands here
    except KeyboardInterrupt:
        # `b` (the last batch) is still alive here: its view stays readable, so the
        # ring stays mapped until it dies; the workers are gone already.
        view_ok = sum(memoryview(b.data).tobytes()[:4096]) >= 0  # NumPy or memoryview
        kids, held = children(), len(memfd_maps())
        del b
        import gc; gc.collect()
        report("after", children=kids, held=held, view_ok=view_ok, maps=len(memfd_maps()),
               fds=len(memfd_fds()))
        sys.exit(0)
    sys.exit(3)
elif mode in ("uncaught", "kill"):
    # No `with`, no close(): the interpreter exits on the interrupt.
    l = goldminer.Loader(root, batch_size=4, workers=2, size=128, epochs=0)
    it = iter(l)
    next(it)
    report("workers", pids=[p for p, _ in children()], maps=len(memfd_maps()))
    while True:          # keep consuming until the parent interrupts or kills us
        for b in l:
            pass
"""


class TestLifecycle(GmTest):
    needs = ("lib",)

    def assertClean(self, before):
        now = set(children())
        self.assertEqual(now - before, set(), "processes left behind (pid, state)")
        self.assertEqual(memfd_maps(), [], "memfd still mapped")
        self.assertEqual(memfd_fds(), [], "memfd fd still open")

    def _open(self, **kw):
        l = goldminer.Loader(dataset(), batch_size=4, workers=2, size=32, **kw)
        self.assertEqual(l.stats()["workers"], 2)
        return l

    def test_close_stops_workers_and_unmaps(self):
        before = set(children())
        l = self._open()
        next(iter(l))
        workers = set(children()) - before
        self.assertEqual(len(workers), 2, "the loader's worker processes")
        self.assertNotEqual(memfd_maps(), [])
        l.close()
        self.assertClean(before)

    def test_garbage_collection_closes(self):
        before = set(children())
        l = self._open()
        kept = copy_of(next(iter(l)).data)
        del l
        gc.collect()
        self.assertClean(before)
        self.assertEqual(len(kept), 4 * 32 * 32 * 3 if isinstance(kept, bytes) else 4)

    def test_a_live_view_keeps_the_loader_open(self):
        before = set(children())
        l = self._open()
        b = next(iter(l))
        h = goldminer.checksum64(b.data)
        del l
        gc.collect()
        self.assertEqual(len(set(children()) - before), 2, "closed under a live view")
        self.assertEqual(goldminer.checksum64(b.data), h)
        del b
        gc.collect()
        self.assertClean(before)

    def test_a_forked_child_gets_a_clear_error_and_the_parent_goes_on(self):
        l = self._open()
        it = iter(l)
        first = goldminer.checksum64(next(it).data)
        pid = os.fork()
        if pid == 0:  # the child: every use of the parent's loader must raise
            code = 4
            try:
                l.next_batch()
            except goldminer.GoldminerError as e:
                code = 0 if e.errno == errno.ECHILD and "fork" in str(e) else 2
            except BaseException:
                code = 3
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        self.assertTrue(os.WIFEXITED(status), "the child crashed (status %#x)" % status)
        self.assertEqual(os.WEXITSTATUS(status), 0, "child: 4 no error, 2 wrong error, 3 other")
        self.assertIsNotNone(next(it).data, "the parent's loader goes on after the fork")
        self.assertEqual(l.stats()["workers"], 2)
        self.assertNotEqual(first, None)
        l.close()

    def test_many_open_close_cycles_leak_nothing(self):
        before = set(children())
        nfd = len(os.listdir("/proc/self/fd"))
        for _ in range(5):
            with self._open() as l:
                next(iter(l))
        self.assertClean(before)
        self.assertEqual(len(os.listdir("/proc/self/fd")), nfd, "file descriptors leaked")

    def _child(self, mode):
        return subprocess.Popen([sys.executable, "-B", "-c", CHILD,
                                 os.path.join(helpers.REPO, "python"),
                                 os.path.dirname(os.path.abspath(helpers.__file__)), mode,
                                 dataset()], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)

    def _workers_line(self, p):
        line = p.stdout.readline()
        if not line:
            p.kill()
            self.fail("child died before reporting: " + p.stderr.read())
        d = json.loads(line)
        self.assertEqual(d["tag"], "workers")
        self.assertEqual(len(d["pids"]), 2, "child's workers")
        self.assertGreater(d["maps"], 0)
        return d["pids"]

    def test_keyboard_interrupt_in_with_block_cleans_up(self):
        p = self._child("caught")
        try:
            pids = self._workers_line(p)
            out, err = p.communicate(timeout=60)
        finally:
            if p.poll() is None:
                p.kill()
        self.assertEqual(p.returncode, 0, err)
        d = json.loads(out.splitlines()[0])
        self.assertEqual(d["tag"], "after")
        self.assertEqual(d["children"], [], "workers left after the with block")
        self.assertTrue(d["view_ok"], "a live view must stay readable after close()")
        self.assertEqual(d["held"], 1, "the ring stays mapped while a view is alive")
        self.assertEqual((d["maps"], d["fds"]), (0, 0), "memfd left after the last view died")
        self.assertEqual(wait_gone(pids), [])

    def test_uncaught_keyboard_interrupt_kills_workers(self):
        p = self._child("uncaught")
        try:
            pids = self._workers_line(p)
            p.send_signal(signal.SIGINT)  # lands in gm_loader_next or in Python code
            _, err = p.communicate(timeout=60)
        finally:
            if p.poll() is None:
                p.kill()
        self.assertIn("KeyboardInterrupt", err)
        self.assertEqual(wait_gone(pids), [], "workers survived the interrupted consumer")

    def test_sigkilled_consumer_takes_its_workers_along(self):
        p = self._child("kill")
        try:
            pids = self._workers_line(p)
            p.kill()
            p.wait(timeout=60)
        finally:
            if p.poll() is None:
                p.kill()
        self.assertEqual(wait_gone(pids), [], "workers survived a SIGKILLed consumer")
