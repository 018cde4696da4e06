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
import textwrap
import time

from helpers import REPO, GmTest, alive, children

from test_dataloader import BATCH, AugDataset, flat, workers, zygotes

WAIT_S = 30  # a bound for processes to appear or go (never a performance figure)


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
    deadline = time.monotonic() + 30
    while len(workers()) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    pids = workers()  # before any next()
    if sys.argv[3] == "iterate":
        for b in dl:
            pass
    print(json.dumps({"pids": pids, "all": [c for c, _ in __import__("helpers").children()]}),
          flush=True)
    sys.exit(0)  # no close(): the interpreter's exit ends them
""")


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
        self.assertEqual(len(started), 2, "workers started by the build")
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
