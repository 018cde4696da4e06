"""goldminer.torch.DataLoader's start-up: its workers start when the loader is
built (loaded and waiting before the first next()), a non-persistent loader's
next epoch is served by the same workers with the bytes a new pool would make (a
worker SIGKILLed in a later epoch included), a dataset changed between epochs is
what the next epoch's workers load, and nothing is left running after close(),
garbage collection or the interpreter's exit, whether the loader was iterated
or not.
"""
import gc
import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time

from helpers import REPO, GmTest, alive, children, tmpdir

from test_dataloader import BATCH, AugDataset, flat, workers, zygotes

# A bound for processes to appear or go (never a performance figure). Under
# make sanitize (GM_SANITIZER: the interpreter runs with ASan preloaded, beside
# the other lane's tests on 2 cores) a loader's two workers were not both up
# within 30 s once (the whole test takes about 18 s alone there): 120 s.
WAIT_S = 120 if os.environ.get("GM_SANITIZER") else 30


def wait_for(cond):
    """cond()'s first true value within WAIT_S seconds, else its last value."""
    deadline = time.monotonic() + WAIT_S
    while True:
        v = cond()
        if v or time.monotonic() > deadline:
            return v
        time.sleep(0.02)


def wait_empty(fn):
    """fn()'s list once it is empty, within WAIT_S seconds (else what is left)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        v = fn()
        if not v or time.monotonic() > deadline:
            return v
        time.sleep(0.02)


class Shifted(AugDataset):
    """An AugDataset whose samples move by `shift`, an attribute the trainer may
    change between epochs."""

    shift = 0.0

    def __getitem__(self, i):
        x, a, r, k = super().__getitem__(i)
        return x + self.shift, a, r, k


CHILD = textwrap.dedent("""
    import json, os, sys, time
    sys.path[:0] = [sys.argv[1], sys.argv[2]]
    from goldminer.torch import DataLoader
    from test_dataloader import AugDataset, workers
    dl = DataLoader(AugDataset(), batch_size=4, num_workers=2, seed=1)
    deadline = time.monotonic() + (120 if os.environ.get("GM_SANITIZER") else 30)
    while len(workers()) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    pids = workers()  # before any next()
    if sys.argv[3] == "iterate":
        for b in dl:
            pass
    print(json.dumps({"pids": pids, "all": [c for c, _ in __import__("helpers").children(
        server=True)]}),
          flush=True)
    sys.exit(0)  # no close(): the interpreter's exit ends them
""")


class WhereLoaded(AugDataset):
    """An AugDataset that says, where it is unpickled (the zygote that loads the
    spec), its pid, its parent, and whether the trainer's marker module (put in
    sys.modules before goldminer.torch was imported) is there: a zygote forked
    from the trainer's zygote server has it, an exec'd one does not. Each sample
    carries len(os.getcwd()) and $GM_TEST_MARK as this process sees them."""

    def __init__(self, log, **kw):
        super().__init__(**kw)
        self.zlog = log

    def __setstate__(self, state):
        self.__dict__.update(state)
        with open(self.zlog, "a") as f:
            f.write(json.dumps({"pid": os.getpid(), "ppid": os.getppid(),
                                "marker": "gm_trainer_marker" in sys.modules,
                                "late": "gm_late_marker" in sys.modules,
                                "argv0": open("/proc/self/cmdline", "rb").read()
                                .split(b"\0")[1:2][0].decode(errors="replace")}) + "\n")

    def __getitem__(self, i):
        import torch
        x, a, r, k = super().__getitem__(i)
        return x, a, r, k, torch.tensor([len(os.getcwd()), int(os.environ.get("GM_TEST_MARK",
                                                                              "0"))])


# A trainer as a script is one: torch imported, then goldminer.torch (the zygote
# server is forked there, the process having one thread). argv: python dirs,
# the zygote log, the mode; prints one JSON line.
SERVER_CHILD = textwrap.dedent("""
    import json, os, signal, sys, time, types
    sys.path[:0] = [sys.argv[1], sys.argv[2]]
    import torch
    sys.modules["gm_trainer_marker"] = types.ModuleType("gm_trainer_marker")
    from goldminer.torch import DataLoader
    try:
        from goldminer import _zserver
    except ImportError:  # (a tree without one: the tests say what differs)
        _zserver = types.SimpleNamespace(pid=lambda: 0)
    from test_startup import WhereLoaded
    log, mode = sys.argv[3], sys.argv[4]
    out = {"trainer": os.getpid(), "server": _zserver.pid()}

    def signal_server(pid, sig):
        if pid > 0:  # (never 0: that is this process group)
            os.kill(pid, sig)
        end = time.monotonic() + 10
        while sig == signal.SIGKILL and pid > 0 and time.monotonic() < end:
            with open("/proc/%d/stat" % pid) as f:  # (unreaped: it is ours)
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    break  # dead: what the next loader's build finds
            time.sleep(0.005)

    def epoch(**kw):
        dl = DataLoader(WhereLoaded(log, **kw), batch_size=4, num_workers=2, seed=3)
        got = [[t.tolist() for t in b] for b in dl]
        ref = [[t.tolist() for t in b] for b in DataLoader(
            WhereLoaded(log + ".ref", **kw), batch_size=4, num_workers=0, seed=3)]
        return dl, got == ref

    if mode == "first":
        os.chdir(sys.argv[5])  # after the server's fork: the zygote takes them
        os.environ["GM_TEST_MARK"] = "7"
        dl, out["same"] = epoch()
        out["mark"] = [t.tolist() for t in next(iter(dl))][4]
    elif mode == "killed":
        signal_server(out["server"], signal.SIGKILL)
        dl, out["same"] = epoch()  # one thread still: a new server forked
        out["server2"] = _zserver.pid()
        it = iter(dl)
        next(it)  # a pool runs (threads): the next server cannot be forked
        signal_server(out["server2"], signal.SIGKILL)
        dl2, out["same2"] = epoch(n=30)
        out["server3"] = _zserver.pid()
    elif mode == "stopped":
        signal_server(out["server"], signal.SIGSTOP)  # alive, but it answers nothing
        t0 = time.monotonic()
        dl, out["same"] = epoch()
        out["took"] = time.monotonic() - t0
        signal_server(out["server"], signal.SIGCONT)
    elif mode == "refresh":
        for k in range(40):  # what a script imports after goldminer.torch
            sys.modules["gm_late_marker" + ("" if k == 0 else str(k))] = \
                types.ModuleType("gm_late_marker")
        dl, out["same"] = epoch()
        out["server2"] = _zserver.pid()
        from helpers import alive
        end = time.monotonic() + 10
        while alive(out["server"]) and time.monotonic() < end:
            time.sleep(0.01)
        out["first_alive"] = alive(out["server"])
    elif mode == "hold":
        dl = DataLoader(WhereLoaded(log), batch_size=4, num_workers=2, seed=3)
        it = iter(dl)
        next(it)
        print(json.dumps(out), flush=True)
        time.sleep(60)  # until the test kills this trainer
    print(json.dumps(out), flush=True)
""")


def zygote_loads(log):
    """The zygotes' lines of WhereLoaded's log (one per process that loaded it)."""
    try:
        with open(log) as f:
            return [json.loads(line) for line in f]
    except OSError:
        return []


class TestZygoteServer(GmTest):
    """The zygote server (goldminer/_zserver.py): a fork of the trainer, taken while
    it has one thread, that makes each loader's zygote with what the trainer had
    imported; it dies with the trainer; a dead or stuck one costs the speed, never
    the batches."""

    needs = ("lib", "torch", "numpy")

    def child(self, mode, *extra, check=True):
        d = tempfile.mkdtemp(dir=tmpdir())
        log = os.path.join(d, "loads")
        p = subprocess.run([sys.executable, "-B", "-c", SERVER_CHILD,
                            os.path.join(REPO, "python"),
                            os.path.dirname(os.path.abspath(__file__)), log, mode] + list(extra),
                           capture_output=True, text=True, timeout=180)
        if check:
            self.assertEqual(p.returncode, 0, p.stderr)
        return json.loads(p.stdout.strip().splitlines()[-1]), zygote_loads(log), p.stderr

    def test_zygote_is_forked_from_the_trainers_server_with_its_imports(self):
        where = tempfile.mkdtemp(dir=tmpdir())
        out, loads, _ = self.child("first", where)
        self.assertTrue(out["same"], "the bytes of a loader without workers")
        self.assertEqual(len(loads), 1, "one zygote loaded the spec: %s" % loads)
        z = loads[0]
        self.assertTrue(z["marker"], "the zygote has what the trainer imported: %s" % z)
        self.assertGreater(out["server"], 0, "a server forked at goldminer.torch's import")
        self.assertEqual(z["ppid"], out["trainer"], "the zygote is the trainer's child")
        self.assertNotEqual(z["argv0"], "-c", "forked from the trainer, not exec'd")
        # the environment and directory of the build, not of the server's fork
        self.assertEqual(out["mark"][0], [len(os.path.realpath(where)), 7])

    def test_a_server_older_than_the_trainers_imports_is_forked_again(self):
        out, loads, _ = self.child("refresh")
        self.assertTrue(out["same"])
        self.assertEqual([(z["marker"], z["late"]) for z in loads], [(True, True)],
                         "the zygote has what the trainer imported after goldminer.torch")
        self.assertNotIn(out["server2"], (0, out["server"]), "a new server")
        self.assertFalse(out["first_alive"], "the old one ended")

    def test_a_killed_server_is_forked_again_or_zygotes_are_execd(self):
        out, loads, err = self.child("killed")
        self.assertTrue(out["same"] and out["same2"], "the bytes, whatever the server")
        self.assertNotIn(out["server2"], (0, out["server"]), "one thread: a new server")
        self.assertEqual(out["server3"], 0, "a pool's threads run: no fork of the trainer")
        self.assertIn("zygote server (pid %d) ended (killed by signal 9)" % out["server2"],
                      err)
        self.assertEqual([z["marker"] for z in loads], [True, False],
                         "the first zygote from the new server, the second exec'd")

    def test_a_server_that_does_not_answer_costs_a_wait_not_the_batches(self):
        out, loads, _ = self.child("stopped")
        self.assertTrue(out["same"])
        self.assertEqual([z["marker"] for z in loads], [False], "the zygote exec'd")
        self.assertLess(out["took"], 60)

    def test_a_package_that_imports_goldminer_in_its_init_is_loaded_whole(self):
        # the server is forked while the package's __init__ runs (the import of
        # goldminer.torch): its Dataset, defined after, must still reach the zygote
        d = tempfile.mkdtemp(dir=tmpdir())
        os.mkdir(os.path.join(d, "gm_half_pkg"))
        with open(os.path.join(d, "gm_half_pkg", "__init__.py"), "w") as f:
            f.write(textwrap.dedent("""
                import torch
                from goldminer.torch import DataLoader
                class Later:
                    def __len__(self):
                        return 10
                    def __getitem__(self, i):
                        return torch.tensor([i, i * i])
            """))
        script = ("import sys; sys.path[:0] = [sys.argv[1], sys.argv[2]]\n"
                  "import gm_half_pkg as P\n"
                  "from goldminer import _zserver\n"
                  "got = [b.tolist() for b in P.DataLoader(P.Later(), batch_size=4,"
                  " num_workers=2)]\n"
                  "print(_zserver.pid() > 0, got)\n")
        p = subprocess.run([sys.executable, "-B", "-c", script, d,
                            os.path.join(REPO, "python")],
                           capture_output=True, text=True, timeout=180)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.strip(), "True %s" % [[[i, i * i] for i in range(k, min(
            k + 4, 10))] for k in range(0, 10, 4)])

    def test_server_and_zygote_die_with_a_sigkilled_trainer(self):
        d = tempfile.mkdtemp(dir=tmpdir())
        p = subprocess.Popen([sys.executable, "-B", "-c", SERVER_CHILD,
                              os.path.join(REPO, "python"),
                              os.path.dirname(os.path.abspath(__file__)),
                              os.path.join(d, "loads"), "hold"],
                             stdout=subprocess.PIPE, text=True)
        try:
            out = json.loads(p.stdout.readline())
            procs = wait_for(lambda: [c for c, _ in children(p.pid, True)]
                             if len(children(p.pid, True)) >= 4 else None) or children(p.pid, True)
            self.assertIn(out["server"], procs)
            self.assertGreaterEqual(len(procs), 4, "the server, a zygote, two workers")
        finally:
            p.kill()
            p.wait(30)
            p.stdout.close()
        left = wait_empty(lambda: [c for c in procs if alive(c)])
        self.assertEqual(left, [], "processes left after the trainer was SIGKILLed")


class TestStartup(GmTest):
    needs = ("lib", "torch", "numpy")

    def setUp(self):
        super().setUp()
        from goldminer.torch import DataLoader
        self.DL = DataLoader

    def tearDown(self):
        gc.collect()  # a loader a failed test left behind ends its workers here
        super().tearDown()

    def test_workers_are_running_when_the_loader_is_built_before_any_next(self):
        dl = self.DL(AugDataset(), batch_size=BATCH, num_workers=2, seed=1)
        self.addCleanup(dl.close)
        got = wait_for(lambda: workers() if len(workers()) == 2 else None)
        self.assertEqual(len(got or []), 2, "the loader's two workers, started by its build")
        self.assertEqual(len(zygotes()), 1, "the zygote they were forked from")
        it = iter(dl)
        first = next(it)
        self.assertEqual(sorted(workers()), sorted(got), "the first epoch's are those")
        self.assertEqual(tuple(first[0].shape), (BATCH, 3))

    def check_reuse(self, make, kill_in=None):
        """Three epochs of a non-persistent loader: the workers' pids after each,
        and the bytes against a loader without workers (the bytes do not depend on
        the worker count); kill_in: SIGKILL a worker half-way through that epoch."""
        ref = make(0)
        want = [flat(list(ref)) for _ in range(3)]
        dl = make(2)
        self.addCleanup(dl.close)
        got, pids = [], []
        for e in range(3):
            out = []
            for k, b in enumerate(dl):
                out.append(b)
                if e == kill_in and k == 2:
                    os.kill(workers()[0], signal.SIGKILL)
            got.append(flat(out))
            pids.append(sorted(wait_for(lambda: workers() if len(workers()) == 2 else None)
                               or workers()))
        for e in range(3):
            self.assertEqual(got[e], want[e], "epoch %d's bytes" % e)
        return pids

    def test_next_epoch_of_a_non_persistent_loader_reuses_its_workers(self):
        pids = self.check_reuse(lambda w: self.DL(
            AugDataset(n=42), batch_size=BATCH, shuffle=True, num_workers=w, seed=5,
            copy=True))
        self.assertEqual(len(pids[0]), 2)
        self.assertEqual(pids[0], pids[1], "epoch 2 is served by epoch 1's workers")
        self.assertEqual(pids[1], pids[2])

    def test_reused_workers_give_each_epochs_torch_seed_bytes(self):
        import torch

        def make(w):
            torch.manual_seed(11)  # seed=None: each epoch's seed is torch's draw
            return self.DL(AugDataset(), batch_size=BATCH, shuffle=True, num_workers=w,
                           copy=True)
        pids = self.check_reuse(make)
        self.assertEqual(len(pids[0]), 2)
        self.assertEqual(pids[0], pids[2], "the same workers, three seeds")

    def test_a_worker_killed_in_a_reused_epoch_costs_a_reissue_not_the_bytes(self):
        pids = self.check_reuse(lambda w: self.DL(
            AugDataset(delay=0.01), batch_size=BATCH, shuffle=True, num_workers=w, seed=3,
            copy=True), kill_in=1)
        self.assertEqual(len(set(pids[1]) & set(pids[0])), 1, "one worker replaced")

    def test_a_dataset_changed_between_epochs_is_what_the_next_epoch_loads(self):
        ds, ref = Shifted(), Shifted()
        dl = self.DL(ds, batch_size=BATCH, num_workers=2, seed=2, copy=True)
        r0 = self.DL(ref, batch_size=BATCH, num_workers=0, seed=2, copy=True)
        self.addCleanup(dl.close)
        self.assertEqual(flat(list(dl)), flat(list(r0)))
        ds.shift = ref.shift = 100.0  # torch's next epoch's workers would see it
        self.assertEqual(flat(list(dl)), flat(list(r0)))
        self.assertGreaterEqual(flat(list(dl))[0][0][0][0], 100.0)

    def test_a_dataset_changed_before_the_first_epoch_is_what_it_loads(self):
        # the workers started with the build loaded the dataset as it was then;
        # torch's start at the first iter(), persistent or not (its own suite:
        # a dataset attribute set after the loader is built)
        for persistent in (False, True):
            ds, ref = Shifted(), Shifted()
            dl = self.DL(ds, batch_size=BATCH, num_workers=2, seed=2, copy=True,
                         persistent_workers=persistent)
            self.addCleanup(dl.close)
            wait_for(lambda: len(workers()) >= 2)
            ds.shift = ref.shift = 100.0
            r0 = self.DL(ref, batch_size=BATCH, num_workers=0, seed=2, copy=True)
            got = flat(list(dl))
            self.assertEqual(got, flat(list(r0)), "persistent=%s" % persistent)
            self.assertGreaterEqual(got[0][0][0][0], 100.0)
            dl.close()

    def test_close_of_a_loader_never_iterated_leaves_no_process(self):
        before = set(c for c, _ in children())
        dl = self.DL(AugDataset(), batch_size=BATCH, num_workers=2, seed=1)
        started = wait_for(lambda: workers() if len(workers()) == 2 else None) or []
        self.assertEqual(len(started), 2, "workers started by the build (%d seen after %d s)"
                         % (len(workers()), WAIT_S))
        dl.close()
        left = wait_empty(lambda: [c for c, _ in children() if c not in before])
        self.assertEqual(left, [], "processes left after close()")
        dl2 = self.DL(AugDataset(), batch_size=BATCH, num_workers=2, seed=1)
        self.assertEqual(len(wait_for(lambda: workers() if len(workers()) == 2 else None)
                             or []), 2)
        del dl2
        gc.collect()
        left = wait_empty(lambda: [c for c, _ in children() if c not in before])
        self.assertEqual(left, [], "processes left after the loader was collected")

    def test_interpreter_exit_leaves_no_process(self):
        for mode in ("idle", "iterate"):
            p = subprocess.run([sys.executable, "-B", "-c", CHILD, os.path.join(REPO, "python"),
                                os.path.dirname(os.path.abspath(__file__)), mode],
                               capture_output=True, text=True, timeout=120)
            self.assertEqual(p.returncode, 0, p.stderr)
            d = json.loads(p.stdout.strip().splitlines()[-1])
            self.assertEqual(len(d["pids"]), 2, "%s: workers before the first next()" % mode)
            self.assertGreaterEqual(len(d["all"]), 3, "%s: two workers, a zygote" % mode)
            left = wait_empty(lambda: [c for c in d["all"] if alive(c)])
            self.assertEqual(left, [], "%s: processes left after the exit" % mode)
