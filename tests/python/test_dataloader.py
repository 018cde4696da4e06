"""goldminer.torch.DataLoader: any map-style dataset in goldminer's workers.

Each test shows one promise: the same bytes whatever the worker count (and torch's
DataLoader not), a SIGKILLed worker or one that os._exit()s mid-batch costs a
re-issue and nothing else, a SIGSTOPped lease holder loses its lease at the
deadline, exceptions with on_error fail/skip, a lambda and a class of a script's
__main__ reach the workers, an unpicklable attribute is refused naming it, a
collate result the ring cannot carry and a batch bigger than its slot are refused
in words, state_dict resumes mid-epoch with the same bytes, batches view the ring,
and Ctrl-C leaves no process. The first pool is a sparse probe: a first batch that
fits it goes on with one zygote (one interpreter loads the dataset), one that does
not is made again in a pool of its size, and a probe the memory limit refuses
falls back to a 1 MiB first guess.
"""
import collections
import ctypes
import functools
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time

import json

from helpers import BUILD, REPO, GmTest, alive, children, memfd_maps

N, BATCH = 40, 4


class AugDataset:
    """Random 'augmentations' from the three global generators, optionally slow."""

    def __init__(self, n=N, delay=0.0, bad=(), marker=None, exit_on=None, crash_on=None,
                 loop_on=None, log=None):
        self.n, self.delay, self.bad, self.marker, self.exit_on = n, delay, bad, marker, exit_on
        self.crash_on, self.loop_on, self.log = crash_on, loop_on, log

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        import numpy as np
        import torch
        if i in self.bad:
            raise KeyError("sample %d is broken" % i)
        if self.exit_on == i and self.marker and os.path.exists(self.marker):
            os.unlink(self.marker)
            os._exit(3)  # a worker that dies in the user's code, once
        if self.crash_on == i:
            import ctypes
            ctypes.string_at(0)  # a segfault in C code, every time
        while self.loop_on == i:
            pass  # a transform that never returns
        if self.delay:
            time.sleep(self.delay)
        if self.log:  # one file per finished call: which samples were made twice
            open(os.path.join(self.log, "%d.%d.%d" % (i, os.getpid(), time.monotonic_ns())),
                 "w").close()
        return (torch.rand(3) + i, np.random.rand(2), random.random(), i)


def named(name, pid=None):
    """pid's live children called name (/proc/PID/comm: the workers set theirs);
    not zombies (a worker that exited and is not reaped yet)."""
    out = []
    for c, state in children(pid):
        if state == "Z":
            continue
        try:
            with open("/proc/%d/comm" % c) as f:
                if f.read().strip() == name:
                    out.append(c)
        except OSError:
            pass
    return out


def workers(pid=None):
    """The worker processes among pid's children (not the pool's zygote); a worker
    still starting (not named yet) is not counted."""
    return named("gm-pyworker", pid)


def zygotes():
    return named("gm-zygote")


def flat(batches):
    """A comparable form of a list of batches (tensors to lists)."""
    out = []
    for x, a, r, i in batches:
        out.append((x.tolist(), a.tolist(), r.tolist(), i.tolist()))
    return out


Pair = collections.namedtuple("Pair", "tokens meta")


def pad_collate(items):
    """Variable-length samples padded here, and every kind of leaf the slot carries."""
    import numpy as np
    import torch
    n = max(len(x) for x, *_ in items)
    tok = torch.zeros(len(items), n, dtype=torch.int32)
    for k, (x, *_) in enumerate(items):
        tok[k, :len(x)] = torch.tensor(x, dtype=torch.int32)
    return Pair(tok, {"len": [len(x) for x, *_ in items], "name": [v[1] for v in items],
                      "raw": b"".join(v[2] for v in items), "none": None,
                      "half": torch.ones(2, 3, dtype=torch.float16),
                      "np": np.arange(6, dtype=np.int16).reshape(2, 3), "f": np.float32(1.5),
                      "empty": torch.zeros(0, 4), "t": (1, 2.5, True)})


def dataloader_probe():
    from goldminer import dataloader
    return dataloader.PROBE_SLOT


def big_collate(items):
    """1.6 MB a batch, more than half the first guess of a slot (1 MiB)."""
    import torch
    return torch.arange(400000, dtype=torch.float32) + items[0][0][0]


class Remade(AugDataset):
    """Items a worker makes again after a re-issue instead of keeping them."""

    goldminer_keep_items = False


class Big:
    """Tensors big enough for copy=True's reused buffers (goldminer._slot.Owned)."""

    nbytes = 3 * 128 * 128 * 4

    def __len__(self):
        return 24

    def __getitem__(self, i):
        import torch
        return torch.full((3, 128, 128), float(i)) + torch.rand(3, 128, 128), i


class Texts:
    def __len__(self):
        return 30

    def __getitem__(self, i):
        return [i] * (1 + i % 7), "s%d" % i, bytes([i])


class CountedTexts(Texts):
    """Texts that write the pid of each process that loads them (unpickles the
    spec: a zygote, or a worker started as a fresh process) into the file log."""

    def __init__(self, log):
        self.log = log

    def __setstate__(self, state):
        self.__dict__.update(state)
        with open(self.log, "a") as f:
            f.write("%d\n" % os.getpid())


class Who:
    """Each sample says what torch.utils.data.get_worker_info() says where it is made."""

    def __init__(self, n=400, delay=0.01):
        self.n, self.delay = n, delay

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        import torch
        from torch.utils.data import get_worker_info
        info = get_worker_info()
        time.sleep(self.delay)
        return torch.tensor([i, info.id, info.num_workers, info.seed, info.dataset is self])


class Shifting:
    """A sampler whose length changes each epoch (5, 27, 1, 9, 2 samples)."""

    lens = (5, 27, 1, 9, 2)

    def __init__(self):
        self.epoch = 0

    def __len__(self):
        return self.lens[self.epoch % len(self.lens)]

    def __iter__(self):
        n = len(self)
        self.epoch += 1
        return iter([(7 * k + self.epoch) % N for k in range(n)])


def fail_on_12(items):
    """collate_fn: default_collate, but the batch holding sample 12 raises."""
    from torch.utils.data import default_collate
    if any(it[3] == 12 for it in items):
        raise ValueError("collate_fn refuses sample 12")
    return default_collate(items)


def init_that_raises(wid):
    raise ZeroDivisionError("worker %d cannot divide its shard" % wid)


class Converted:
    """Samples default_convert changes (NumPy to tensors) and leaves (ints, strings)."""

    def __len__(self):
        return 7

    def __getitem__(self, i):
        import numpy as np
        return {"x": np.arange(3, dtype=np.int64) + i, "i": i, "s": "s%d" % i}


class Counting(AugDataset):
    """A dataset with a multiprocessing.Value, as scripts count with under fork."""

    def __init__(self):
        import multiprocessing
        super().__init__()
        self.counter = multiprocessing.Value("i", 0)


# (module functions, not lambdas: the suite passes without cloudpickle too)
def seed_torch_12345(wid):
    import torch
    torch.manual_seed(12345)


class TorchSeed(AugDataset):
    """Each item: torch's initial seed as dataset[i] sees it."""

    def __getitem__(self, i):
        import torch
        return torch.initial_seed()


def uncarriable_collate(items):
    return {"x": [object()]}


def zeros_collate(items):
    import torch
    return torch.zeros(10000)


def note_init(log, wid):
    """worker_init_fn: one file per call, named for the id and the process."""
    open(os.path.join(log, "%d.%d" % (wid, os.getpid())), "w").close()


def inits(log):
    return [tuple(int(v) for v in f.split(".")) for f in os.listdir(log)]


class TestDataLoader(GmTest):
    needs = ("lib", "torch", "numpy")

    def setUp(self):
        super().setUp()
        from goldminer.torch import DataLoader
        self.DL = DataLoader

    def run_loader(self, workers, ds=None, **kw):
        kw.setdefault("shuffle", True)
        kw.setdefault("seed", 5)
        dl = self.DL(ds or AugDataset(), batch_size=BATCH, num_workers=workers, copy=True, **kw)
        return flat(list(dl)), dl

    def test_same_bytes_with_0_1_2_and_4_workers(self):
        ref, dl = self.run_loader(0)
        self.assertEqual(len(ref), len(dl))
        self.assertEqual(len(ref), N // BATCH)
        for w in (1, 2, 4):
            self.assertEqual(self.run_loader(w)[0], ref, "%d workers" % w)

    def test_every_kind_of_collate_result_comes_back_as_it_went(self):
        import numpy as np
        import torch
        want = list(self.DL(Texts(), batch_size=4, collate_fn=pad_collate))
        got = list(self.DL(Texts(), batch_size=4, num_workers=2, collate_fn=pad_collate,
                           copy=True))
        self.assertEqual(len(got), len(want))
        for g, w in zip(got, want):
            self.assertIsInstance(g, tuple)
            self.assertEqual(g._fields, ("tokens", "meta"))
            self.assertTrue(torch.equal(g.tokens, w.tokens))
            self.assertEqual(g.tokens.dtype, torch.int32)
            self.assertEqual(set(g.meta), set(w.meta))
            for k in ("len", "name", "raw", "none", "t"):
                self.assertEqual(g.meta[k], w.meta[k], k)
            self.assertEqual(g.meta["half"].dtype, torch.float16)
            self.assertTrue(torch.equal(g.meta["half"], w.meta["half"]))
            self.assertTrue(np.array_equal(g.meta["np"], w.meta["np"]))
            self.assertEqual(g.meta["np"].dtype, np.int16)
            self.assertEqual(g.meta["f"], np.float32(1.5))
            self.assertEqual(tuple(g.meta["empty"].shape), (0, 4))
        self.assertEqual(got[-1].tokens.shape[0], 2)  # 30 = 7 x 4 + 2: the short batch

    def test_torch_differs_with_1_and_2_workers_goldminer_does_not(self):
        import torch
        from torch.utils.data import DataLoader as TorchDL

        def torch_run(w):
            g = torch.Generator()
            g.manual_seed(7)
            return flat(list(TorchDL(AugDataset(), batch_size=BATCH, num_workers=w,
                                     generator=g, shuffle=True)))

        self.assertNotEqual(torch_run(1), torch_run(2))
        g1, g2 = torch.Generator(), torch.Generator()
        g1.manual_seed(7)
        g2.manual_seed(7)
        self.assertEqual(self.run_loader(1, generator=g1)[0], self.run_loader(2, generator=g2)[0])

    def test_epochs_differ_and_each_iteration_is_one_epoch(self):
        dl = self.DL(AugDataset(), batch_size=BATCH, shuffle=True, num_workers=1, seed=5,
                     copy=True)
        e0, e1 = flat(list(dl)), flat(list(dl))
        self.assertNotEqual(e0, e1)
        self.assertEqual(dl.state_dict()["epoch"], 2)

    def test_persistent_workers_keep_their_processes_and_the_bytes(self):
        def epochs(persistent):
            dl = self.DL(AugDataset(n=42), batch_size=BATCH, shuffle=True, num_workers=2,
                         seed=5, copy=True, persistent_workers=persistent)
            out, pids = [], []
            for _ in range(3):
                out.append(flat(list(dl)))
                deadline = time.monotonic() + 20
                while persistent and len(workers()) < 2 and time.monotonic() < deadline:
                    time.sleep(0.05)  # a worker still starting: its name comes later
                pids.append(sorted(workers()))
            dl.close()
            return out, pids
        ref, _ = epochs(False)
        got, pids = epochs(True)
        self.assertEqual(got, ref)  # 42 samples: the last batch of each epoch is short
        self.assertEqual(len(pids[0]), 2)
        self.assertEqual(pids[0], pids[2])  # the same two workers served three epochs
        self.assertEqual(children(), [])  # close() ended them

    def test_persistent_epoch_left_half_way_restarts_cleanly(self):
        dl = self.DL(AugDataset(), batch_size=BATCH, shuffle=True, num_workers=2, seed=5,
                     copy=True, persistent_workers=True)
        ref = [flat(list(self.DL(AugDataset(), batch_size=BATCH, shuffle=True, num_workers=0,
                                 seed=5, copy=True))) for _ in range(1)]
        it = iter(dl)
        next(it)
        it.close()  # epoch 0 abandoned
        e1 = flat(list(dl))
        dl.close()
        dl0 = self.DL(AugDataset(), batch_size=BATCH, shuffle=True, num_workers=0, seed=5,
                      copy=True)
        list(dl0)
        self.assertEqual(e1, flat(list(dl0)))  # epoch 1's bytes
        self.assertNotEqual(e1, ref[0])

    def persistent_vs_local(self, epochs=3, abandon=False, **kw):
        """Each epoch of a persistent 2-worker loader (4 ring slots) and of
        num_workers=0's, and the pool's slots; abandon: epoch 0 of the persistent
        one is left after one batch (the local one's epoch 0 is not compared)."""
        def mk(w, persistent):
            a = dict(kw)
            a["sampler"] = a["sampler"]() if "sampler" in a else None  # one each
            return self.DL(a.pop("ds", None) or AugDataset(n=a.pop("n", N)),
                           batch_size=BATCH, num_workers=w, seed=5, copy=True,
                           persistent_workers=persistent, **a)
        dl0, dl = mk(0, False), mk(2, True)
        self.addCleanup(dl.close)
        ref = [flat(list(dl0)) for _ in range(epochs)]
        got, slots = [], None
        if abandon:
            it = iter(dl)
            next(it)
            it.close()
            got.append(ref[0])
        for _ in range(len(got), epochs):
            got.append(flat(list(dl)))
            slots = slots or dl._pool.slots
        return got, ref, slots

    def test_persistent_epochs_shorter_than_the_ring_give_the_same_bytes(self):
        for n, kw, batches in ((12, {}, 3), (4, {}, 1), (3, {}, 1), (16, {}, 4),
                               (14, {"drop_last": True}, 3), (20, {}, 5)):
            got, ref, slots = self.persistent_vs_local(n=n, shuffle=True, **kw)
            self.assertEqual(slots, 4)
            self.assertEqual([len(e) for e in ref], [batches] * 3, (n, kw))
            self.assertEqual(got, ref, "%d samples %s: %d batches an epoch" % (n, kw, batches))

    def test_persistent_short_epoch_left_half_way_then_whole_ones(self):
        got, ref, _ = self.persistent_vs_local(epochs=4, abandon=True, n=12, shuffle=True)
        self.assertEqual(got[1:], ref[1:])

    def test_persistent_sampler_whose_length_changes_between_epochs(self):
        got, ref, slots = self.persistent_vs_local(epochs=5, sampler=Shifting)
        self.assertEqual(slots, 4)
        self.assertEqual([len(e) for e in ref], [2, 7, 1, 3, 1])
        self.assertEqual(got, ref)

    def test_replacements_fork_from_the_zygote_and_are_reaped_here(self):
        ref = self.run_loader(0)[0]
        dl = self.DL(AugDataset(delay=0.02), batch_size=BATCH, shuffle=True, num_workers=2,
                     seed=5, copy=True)
        got, first, later = [], [], []
        for b in dl:
            got.append(b)
            if len(got) == 2:
                deadline = time.monotonic() + 20
                while not zygotes() and time.monotonic() < deadline:
                    time.sleep(0.05)
                zyg = zygotes()
                self.assertEqual(len(zyg), 1)
                time.sleep(1.0)  # loaded: it says so before it forks anyone
                first = workers()
                for pid in first:
                    os.kill(pid, signal.SIGKILL)
                t0 = time.monotonic()
                while time.monotonic() - t0 < 10:
                    later = [w for w in workers() if w not in first]
                    if len(later) == 2:
                        break
                    time.sleep(0.005)
                took = time.monotonic() - t0
        self.assertEqual(flat(got), ref)
        self.assertEqual(len(later), 2)
        self.assertLess(took, 1.0)  # forked replacements, not fresh interpreters
        dl.close()  # (its workers wait for the next epoch until then)
        self.assertEqual(children(), [])  # every process reaped

    def test_worker_ids_are_0_to_n_and_a_replacement_takes_the_dead_ones(self):
        log = tempfile.mkdtemp(prefix="gm-ids-")
        dl = self.DL(Who(), batch_size=BATCH, num_workers=3, seed=5,
                     worker_init_fn=functools.partial(note_init, log))
        rows, victim, later = [], None, []
        for b in dl:
            rows += b.tolist()
            if victim is None:
                deadline = time.monotonic() + 30
                while len(inits(log)) < 3 and time.monotonic() < deadline:
                    time.sleep(0.02)
                first = inits(log)
                self.assertEqual(sorted(w for w, _ in first), [0, 1, 2])
                victim = [pid for w, pid in first if w == 1][0]
                os.kill(victim, signal.SIGKILL)
            elif not later:
                deadline = time.monotonic() + 30
                while len(inits(log)) < 4 and time.monotonic() < deadline:
                    time.sleep(0.02)
                later = [x for x in inits(log) if x not in first]
        self.assertEqual([w for w, _ in later], [1])  # the dead worker's id
        self.assertNotEqual(later[0][1], victim)
        self.assertEqual({r[1] for r in rows} - {0, 1, 2}, set())
        self.assertEqual({(r[2], r[3] - r[1], r[4]) for r in rows}, {(3, 5, 1)})

    def test_batch_k_is_made_by_worker_k_mod_n_as_torch_deals_them(self):
        # torch deals batch k of each epoch to worker k mod num_workers; a
        # replacement keeps the dead worker's id, so its batches too
        dl = self.DL(Who(n=96, delay=0.002), batch_size=4, shuffle=True, num_workers=3,
                     seed=5)
        self.addCleanup(dl.close)
        for epoch in range(2):
            for k, b in enumerate(dl):
                self.assertEqual({r[1] for r in b.tolist()}, {k % 3}, (epoch, k))
                if epoch == 1 and k == 4:
                    for pid in workers()[:1]:
                        os.kill(pid, signal.SIGKILL)

    def test_sigkilled_worker_mid_batch_gives_the_same_bytes(self):
        ref = self.run_loader(0)[0]
        dl = self.DL(AugDataset(delay=0.02), batch_size=BATCH, shuffle=True, num_workers=2,
                     seed=5, copy=True)
        got, killed = [], 0
        for b in dl:
            got.append(b)
            if len(got) == 2:
                for pid, _ in children():
                    os.kill(pid, signal.SIGKILL)
                    killed += 1
        self.assertGreater(killed, 0)
        self.assertEqual(flat(got), ref)

    def test_reissued_batch_resumes_after_what_the_dead_worker_finished(self):
        ref = self.run_loader(0, shuffle=False)[0]
        log = tempfile.mkdtemp(prefix="gm-log-")
        dl = self.DL(AugDataset(delay=0.1, log=log), batch_size=BATCH, num_workers=1,
                     copy=True, seed=5, slot_bytes=1 << 20)
        it = iter(dl)
        got = flat([next(it)])  # batch 0; the worker goes on with batch 1 (4..7)
        deadline = time.monotonic() + 30

        def made():
            return [int(f.split(".")[0]) for f in os.listdir(log)]
        while not {4, 5} <= set(made()) and time.monotonic() < deadline:
            time.sleep(0.01)
        self.assertNotIn(7, made())  # still inside batch 1
        killed = workers()
        for pid in killed:
            os.kill(pid, signal.SIGKILL)
        got += flat(list(it))
        self.assertEqual(len(killed), 1)
        self.assertEqual(got, ref)
        self.assertEqual(made().count(4), 1)  # kept in the slot, not made again
        self.assertEqual(made().count(5), 1)
        self.assertEqual(sorted(set(made())), list(range(N)))
        self.assertGreaterEqual(dl.stats()["reissued"], 1)

    def test_items_of_a_dataset_that_says_so_are_made_again_not_kept(self):
        # goldminer_keep_items = False (hybrid.py's HybridDataset): a re-issued
        # batch makes the dead worker's finished items again, with the same bytes
        ref = self.run_loader(0, shuffle=False)[0]
        log = tempfile.mkdtemp(prefix="gm-log-")
        dl = self.DL(Remade(delay=0.1, log=log), batch_size=BATCH, num_workers=1,
                     copy=True, seed=5, slot_bytes=1 << 20)
        it = iter(dl)
        got = flat([next(it)])
        deadline = time.monotonic() + 30

        def made():
            return [int(f.split(".")[0]) for f in os.listdir(log)]
        while not {4, 5} <= set(made()) and time.monotonic() < deadline:
            time.sleep(0.01)
        self.assertNotIn(7, made())  # still inside batch 1
        for pid in workers():
            os.kill(pid, signal.SIGKILL)
        got += flat(list(it))
        self.assertEqual(got, ref)
        self.assertEqual(made().count(4), 2)  # made again, not kept in the slot

    def test_worker_that_exits_in_the_dataset_costs_a_reissue(self):
        ref = self.run_loader(0)[0]
        fd, marker = tempfile.mkstemp(prefix="gm-exit-")
        os.close(fd)
        ds = AugDataset(marker=marker, exit_on=13)
        self.assertEqual(self.run_loader(2, ds)[0], ref)
        self.assertFalse(os.path.exists(marker))  # a worker did exit on sample 13

    def test_sample_that_crashes_two_workers_is_quarantined_and_skipped(self):
        got, dl = self.run_loader(2, AugDataset(crash_on=13), on_error="skip", shuffle=False)
        self.assertEqual(got[3][3][1], 14)  # position of 13 holds the next sample
        self.assertEqual([(e[1], e[2]) for e in dl.errors()], [(3, 13)])
        # torch's words for a dead worker, with the pid and signal the pool saw
        self.assertRegex(dl.errors()[0][3], r"^DataLoader worker \(pid \d+\) is killed by"
                         r" signal: Segmentation fault\. Sample 13 killed two workers")

    def test_sample_that_crashes_workers_fails_the_batch_with_its_index(self):
        dl = self.DL(AugDataset(crash_on=13), batch_size=BATCH, num_workers=1)
        with self.assertRaises(RuntimeError) as cm:
            list(dl)
        self.assertRegex(str(cm.exception), r"^DataLoader worker \(pid \d+\) is killed by"
                         r" signal: Segmentation fault\. Sample 13 killed two workers: it is"
                         r" not made again \(batch 3 of epoch 0\)$")
        self.assertEqual(cm.exception.sample_index, 13)
        import goldminer
        self.assertIsInstance(cm.exception, goldminer.WorkerError)  # a GoldminerError too

    def test_sample_0_that_segfaults_is_reported_by_a_worker_not_the_trainer(self):
        # batch 0 sizes the slots: it is computed in a worker like any other
        dl = self.DL(AugDataset(crash_on=0), batch_size=BATCH, num_workers=1)
        with self.assertRaises(RuntimeError) as cm:
            list(dl)
        self.assertIn("Sample 0 killed two workers", str(cm.exception))
        self.assertIn("is killed by signal: Segmentation fault.", str(cm.exception))
        got, dl = self.run_loader(2, AugDataset(crash_on=0), on_error="skip", shuffle=False)
        self.assertEqual(got[0][3][0], 1)  # position of 0 holds the next sample
        self.assertEqual([(e[1], e[2]) for e in dl.errors()], [(0, 0)])
        self.assertEqual(dl.stats()["quarantined"], 1)

    def test_worker_that_exits_on_sample_0_costs_a_reissue(self):
        ref = self.run_loader(0, shuffle=False)[0]
        fd, marker = tempfile.mkstemp(prefix="gm-exit-")
        os.close(fd)
        ds = AugDataset(marker=marker, exit_on=0)
        self.assertEqual(self.run_loader(1, ds, shuffle=False)[0], ref)
        self.assertFalse(os.path.exists(marker))  # a worker did exit on sample 0

    def loads(self, persistent=False, probe=None):
        """Epochs 0-2 of 1.6 MB batches: the processes that loaded the dataset after
        each epoch, and the loader (probe: the first pool's slot bytes)."""
        import torch
        from goldminer import dataloader
        if probe is not None:
            self.addCleanup(setattr, dataloader, "PROBE_SLOT", dataloader.PROBE_SLOT)
            dataloader.PROBE_SLOT = probe
        fd, log = tempfile.mkstemp(prefix="gm-loads-")
        os.close(fd)
        self.addCleanup(os.unlink, log)
        ref = [b.clone() for b in self.DL(Texts(), batch_size=5, collate_fn=big_collate)]
        dl = self.DL(CountedTexts(log), batch_size=5, num_workers=2, collate_fn=big_collate,
                     copy=True, persistent_workers=persistent)
        self.addCleanup(dl.close)
        loads = []
        for _ in range(3):
            got = list(dl)
            self.assertEqual(len(got), len(ref))
            self.assertTrue(all(torch.equal(g, r) for g, r in zip(got, ref)))
            with open(log) as f:
                loads.append(len(f.read().split()))
        return loads, dl

    def test_first_batch_bigger_than_the_first_guess_sizes_the_slots(self):
        from goldminer import dataloader
        loads, dl = self.loads(probe=dataloader.MIN_SLOT)  # a 1 MiB probe: too small
        self.assertGreaterEqual(dl._measured, 2 * 4 * 400000)  # twice batch 0's 1.6 MB
        self.assertEqual(loads[0], 2)  # the first pool's zygote, then the resized pool's

    def test_first_batch_that_fits_the_probe_goes_on_with_one_zygote(self):
        loads, dl = self.loads()
        self.assertGreaterEqual(dl._measured, 2 * 4 * 400000)  # the next pools' slots
        self.assertLess(dl._measured, dataloader_probe())
        self.assertEqual(loads, [1, 1, 1])  # one interpreter loaded it: the next epochs
        # are served by the same workers (test_startup.py)

    def test_probe_the_memory_limit_refuses_falls_back_to_a_1_mib_guess(self):
        old = os.environ.get("GM_MEM_LIMIT")
        self.addCleanup(lambda: os.environ.pop("GM_MEM_LIMIT") if old is None
                        else os.environ.update(GM_MEM_LIMIT=old))
        os.environ["GM_MEM_LIMIT"] = "64M"  # under the probe's 4 x 64 MiB, over the rest
        loads, dl = self.loads()
        self.assertGreaterEqual(dl._measured, 2 * 4 * 400000)
        self.assertEqual(loads[0], 2)  # the 1 MiB guess was too small: made again

    def test_persistent_probe_that_fits_serves_every_epoch(self):
        loads, dl = self.loads(persistent=True)
        self.assertEqual(loads, [1, 1, 1])  # one zygote for the loader's life

    def test_endless_transform_costs_reissues_never_a_hang(self):
        t0 = time.monotonic()
        got, dl = self.run_loader(2, AugDataset(loop_on=13), on_error="skip", shuffle=False,
                                  lease_timeout_ms=400, timeout=60)
        self.assertEqual(got[3][3][1], 14)
        self.assertEqual([(e[1], e[2]) for e in dl.errors()], [(3, 13)])
        self.assertLess(time.monotonic() - t0, 60)

    def test_auto_grows_for_a_hungry_trainer_and_shrinks_for_a_slow_one(self):
        ref = self.run_loader(0, AugDataset(n=400))[0]
        dl = self.DL(AugDataset(n=400, delay=0.01), batch_size=BATCH, shuffle=True,
                     num_workers="auto", max_workers=3, seed=5, copy=True)
        got, most, least = [], 0, 99
        for b in dl:
            got.append(b)
            st = dl.stats()
            if len(got) < 40:
                most = max(most, st["target_workers"])  # 40 ms a batch per worker, taken at once
            elif most == 3:
                time.sleep(0.3)  # a trainer that takes a batch every 300 ms
                least = min(least, st["target_workers"])
                if least == 1:
                    break
        self.assertEqual(most, 3)
        self.assertEqual(least, 1)
        self.assertEqual(flat(got), ref[:len(got)])  # same bytes while it resized

    def test_sigstopped_lease_holder_loses_its_lease_at_the_deadline(self):
        ref = self.run_loader(0)[0]
        dl = self.DL(AugDataset(delay=0.05), batch_size=BATCH, shuffle=True, num_workers=1,
                     seed=5, copy=True, lease_timeout_ms=500, timeout=30)
        got, stopped = [], []
        t0 = time.monotonic()
        for b in dl:
            got.append(b)
            if len(got) == 1:
                stopped = workers()
                for pid in stopped:
                    os.kill(pid, signal.SIGSTOP)
        self.assertTrue(stopped)
        self.assertEqual(flat(got), ref)
        self.assertLess(time.monotonic() - t0, 30)

    def test_exception_with_on_error_fail_raises_its_type_with_the_index(self):
        dl = self.DL(AugDataset(bad=(7,)), batch_size=BATCH, num_workers=2)
        with self.assertRaises(KeyError) as cm:
            list(dl)
        self.assertIn("sample 7", str(cm.exception))
        self.assertIn("__getitem__", str(cm.exception))  # the worker's traceback
        self.assertEqual(cm.exception.sample_index, 7)

    def test_exception_with_on_error_skip_substitutes_and_lists_it(self):
        ref, dl0 = self.run_loader(0, AugDataset(bad=(7,)), on_error="skip", shuffle=False)
        got, dl2 = self.run_loader(2, AugDataset(bad=(7,)), on_error="skip", shuffle=False)
        self.assertEqual(got, ref)
        self.assertEqual(got[1][3][3], 8)  # position of 7 holds the next good sample
        self.assertEqual([(e[1], e[2]) for e in dl2.errors()], [(1, 7)])
        self.assertIn("KeyError", dl2.errors()[0][3])
        self.assertEqual([(e[1], e[2]) for e in dl0.errors()], [(1, 7)])

    def test_no_sample_to_stand_in_is_a_worker_error_naming_the_sample(self):
        # on_error="skip" with a bad sample and the 64 after it bad too: goldminer's
        # own error, a GoldminerError that is also the RuntimeError torch users catch
        import goldminer
        for workers in (0, 2):
            dl = self.DL(AugDataset(bad=tuple(range(N))), batch_size=BATCH,
                         num_workers=workers, on_error="skip", shuffle=False)
            with self.assertRaises(goldminer.WorkerError, msg="%d workers" % workers) as cm:
                list(dl)
            self.assertIsInstance(cm.exception, RuntimeError)
            self.assertIn("sample 0 is bad and so are the 64 after it: no substitute",
                          str(cm.exception))
            self.assertEqual(cm.exception.sample_index, 0)

    def test_unpicklable_attribute_is_refused_naming_it(self):
        ds = AugDataset()
        ds.lock = threading.Lock()
        with self.assertRaises(TypeError) as cm:
            self.DL(ds, batch_size=BATCH, num_workers=1)
        self.assertIn("dataset.lock", str(cm.exception))

    def test_collate_result_the_ring_cannot_carry_is_refused_in_words(self):
        dl = self.DL(AugDataset(), batch_size=BATCH, num_workers=1,
                     collate_fn=uncarriable_collate)
        with self.assertRaises(TypeError) as cm:
            list(dl)
        self.assertIn("batch['x'][0] is a builtins.object", str(cm.exception))

    def test_batch_bigger_than_its_slot_is_an_error_naming_the_option(self):
        dl = self.DL(AugDataset(), batch_size=BATCH, num_workers=1, slot_bytes=4096,
                     collate_fn=zeros_collate)
        with self.assertRaises(RuntimeError) as cm:
            list(dl)
        msg = str(cm.exception)
        self.assertIn("batch 0", msg)
        self.assertIn("40", msg)  # its size: 40000 bytes and more
        self.assertIn("slot_bytes=", msg)

    def test_its_errors_are_goldminers_one_type_with_an_errno(self):
        # one exception type for every loader; a RuntimeError too, as torch's
        import errno
        import goldminer
        from goldminer import loader
        self.assertIs(loader.GoldminerError, goldminer.GoldminerError)
        dl = self.DL(AugDataset(), batch_size=BATCH, num_workers=1, slot_bytes=4096,
                     collate_fn=zeros_collate)
        with self.assertRaises(goldminer.GoldminerError) as cm:
            list(dl)
        self.assertEqual(cm.exception.errno, errno.EMSGSIZE)
        self.assertIsInstance(cm.exception, RuntimeError)
        dl = self.DL(AugDataset(delay=2), batch_size=BATCH, num_workers=1, timeout=0.3)
        with self.assertRaises(goldminer.GoldminerError) as cm:
            next(iter(dl))
        self.assertEqual(cm.exception.errno, errno.ETIMEDOUT)

    def test_state_dict_resumes_mid_epoch_with_the_same_bytes(self):
        ref = self.run_loader(2)[0]
        dl = self.DL(AugDataset(), batch_size=BATCH, shuffle=True, num_workers=2, seed=5,
                     copy=True)
        it = iter(dl)
        first = [next(it) for _ in range(3)]
        sd = dl.state_dict()
        it.close()
        dl2 = self.DL(AugDataset(), batch_size=BATCH, shuffle=True, num_workers=2, seed=5,
                      copy=True)
        dl2.load_state_dict(sd)
        self.assertEqual(flat(first) + flat(list(dl2)), ref)

    def test_copies_kept_are_never_overwritten_and_dropped_ones_reuse_buffers(self):
        # copy=True (goldminer run's Python and hybrid paths): a batch the caller
        # keeps, whole or as a view, holds its bytes while later batches arrive;
        # buffers of the batches it drops are written again, not allocated anew
        import torch
        from goldminer import _slot
        ds = Big()
        self.assertGreaterEqual(2 * ds.nbytes, _slot.Owned.MIN)
        one = self.DL(ds, batch_size=2, seed=5)
        ref = [[x.clone() for x, _ in one] for _ in range(2)]  # epochs 0 and 1
        dl = self.DL(ds, batch_size=2, num_workers=2, seed=5, copy=True,
                     persistent_workers=True)
        self.addCleanup(dl.close)  # its workers outlive a failed assertion otherwise
        kept, ptrs = [], []
        for epoch in range(2):
            for k, (x, _) in enumerate(dl):
                self.assertTrue(torch.equal(x, ref[epoch][k]), (epoch, k))
                if epoch == 0 and k % 2 == 0:
                    kept.append((k, x[1:] if k % 4 else x))
                if epoch == 1:
                    ptrs.append(x.data_ptr())
                del x
        bufs = [ctypes.addressof(ctypes.c_char.from_buffer(b)) for b in dl._owned.buffers()]
        dl.close()
        self.assertGreater(len(kept), _slot.Owned.KEEP)
        for k, x in kept:
            self.assertTrue(torch.equal(x, ref[0][k][1:] if k % 4 else ref[0][k]), k)
        for p in ptrs:
            self.assertTrue(any(0 <= p - a < 64 for a in bufs), hex(p))

    def test_default_collate_made_in_the_slot_has_the_bytes_of_collate_then_pack(self):
        # the worker stacks (image, label) items straight into the slot: the
        # payload must be byte for byte what default_collate + pack + write give
        import numpy as np
        import torch
        from torch.utils.data import default_collate
        from goldminer import _slot
        g = torch.Generator().manual_seed(1)
        img = [torch.rand(3, 5, 7, generator=g) for _ in range(4)]
        forms = [
            [(x, i) for i, x in enumerate(img)],                        # ImageFolder's
            [[x, float(i), x.to(torch.uint8)] for i, x in enumerate(img)],  # lists
            [(x[:, :0], i) for i, x in enumerate(img)],                # empty tensors
        ]
        for items in forms:
            want, got = bytearray(1 << 16), bytearray(1 << 16)
            packed = _slot.pack(default_collate(items))
            _slot.write(want, packed)
            self.assertEqual(_slot.collate_into(items, got, len(got)), packed[2])
            self.assertEqual(got[:packed[2]], want[:packed[2]])
            small = bytearray(packed[2] - 1)
            self.assertEqual(_slot.collate_into(items, small, len(small)), packed[2])
            self.assertEqual(small, bytearray(len(small)))  # too big: nothing written
        for items in ([(img[0], 1), (img[1][:, :2], 2)],          # shapes differ
                      [(img[0], 1), (img[1], 2.0)],               # int, then float
                      [(img[0], np.int64(1))] * 2,                # not a Python number
                      [img[0], img[1]],                           # not tuples
                      [(img[0].requires_grad_(), 1)] * 2,         # autograd
                      []):
            self.assertIsNone(_slot.collate_into(items, bytearray(1 << 16), 1 << 16))

    def test_batches_view_the_ring_without_a_copy(self):
        dl = self.DL(AugDataset(), batch_size=BATCH, num_workers=1)
        for x, a, r, i in dl:
            maps = [l.split()[0].split("-") for l in memfd_maps() if "goldminer-ring" in l]
            inside = [int(lo, 16) <= x.data_ptr() < int(hi, 16) for lo, hi in maps]
            self.assertTrue(any(inside), "tensor at %#x not in a ring" % x.data_ptr())
            break

    def held_in_a_child(self, case):
        """HOLD's case in a child interpreter (the old way of holding a view crashed
        the process): its verdict line and exit status."""
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [os.path.dirname(os.path.abspath(__file__)), os.path.join(REPO, "python")]))
        p = subprocess.run([sys.executable, "-c", HOLD, case], capture_output=True,
                           text=True, env=env, timeout=300)
        return p.returncode, p.stdout.strip(), p.stderr[-2000:]

    def test_a_batch_unpacked_from_next_iter_outlives_its_iterator(self):
        # `x, a, r, i = next(iter(loader))`: the iterator (and its pool) die at once
        rc, out, err = self.held_in_a_child("next")
        self.assertEqual((rc, out), (0, "same"), err)

    def test_list_of_a_loader_holds_more_batches_than_slots_with_their_bytes(self):
        # list(loader): 10 batches over 4 slots, held past the epoch and the loader
        rc, out, err = self.held_in_a_child("list")
        self.assertEqual((rc, out), (0, "same"), err)

    def test_stats_speak_the_c_loaders_words_and_count_detached_batches(self):
        from goldminer import _abi
        dl = self.DL(AugDataset(), batch_size=BATCH, num_workers=2, seed=5)
        held = list(dl)  # 10 batches over 4 slots: the oldest were detached
        st = dl.stats()
        c_words = {name for name, _ in _abi.LoaderStats._fields_}
        self.assertEqual(set(st) - c_words, {"quarantined"})  # (none in the C path)
        self.assertGreaterEqual(st["kept_copied"], len(held) - 4)

    def test_held_batches_of_persistent_workers_are_never_overwritten(self):
        dl0 = self.DL(AugDataset(), batch_size=BATCH, num_workers=0, seed=5)
        ref = [flat(list(dl0)) for _ in range(3)]
        dl = self.DL(AugDataset(), batch_size=BATCH, num_workers=2, seed=5,
                     persistent_workers=True)
        self.addCleanup(dl.close)
        held = list(dl) + list(dl)  # two epochs: 20 batches over one ring of 4 slots
        for k in range(3):
            self.assertEqual(flat(held), ref[0] + ref[1], "read %d" % k)
            time.sleep(0.2)  # the workers would have refilled any slot given back
        del held
        self.assertEqual(flat(list(dl)), ref[2])  # the slots came back: epoch 2 goes on

    def ring_ranges(self):
        return [[int(v, 16) for v in l.split()[0].split("-")] for l in memfd_maps()
                if "goldminer-ring" in l]

    def test_pin_memory_views_the_registered_ring_or_says_it_cannot(self):
        import torch
        dl = self.DL(AugDataset(), batch_size=BATCH, num_workers=1, pin_memory=True)
        if not torch.cuda.is_available():
            with self.assertWarns(UserWarning):
                next(iter(dl))
            return
        for x, a, r, i in dl:
            self.assertTrue(x.is_pinned())
            self.assertTrue(any(lo <= x.data_ptr() < hi for lo, hi in self.ring_ranges()))
            break

    # --- torch's DataLoader where a script sees it (the drop-in) ----------------
    def test_without_seed_torch_manual_seed_sets_order_and_augmentations(self):
        import torch
        from torch.utils.data import DataLoader as TorchDL

        def ours(s, w, **kw):
            torch.manual_seed(s)
            dl = self.DL(AugDataset(), batch_size=BATCH, shuffle=True, num_workers=w,
                         copy=True, **kw)
            return [flat(list(dl)) for _ in range(2)], torch.rand(1).item()

        (a, after), (b, _), (c, _) = ours(1, 0), ours(1, 2), ours(2, 2)
        self.assertEqual(a, b)  # torch.manual_seed(1): the same bytes, 0 or 2 workers
        self.assertNotEqual(a[0], c[0])  # another seed, other data
        self.assertNotEqual(a[0], a[1])  # and each epoch its own
        # the order is torch's own (RandomSampler on torch's default generator,
        # drawn after the epoch's base seed), and the draws are those of torch's
        # iterator: the script's generator is where torch's would leave it
        torch.manual_seed(1)
        tl = TorchDL(list(range(N)), batch_size=BATCH, shuffle=True)
        order = [[b.tolist() for b in tl] for _ in range(2)]
        self.assertEqual([[x[3] for x in e] for e in a], order)
        self.assertEqual(after, torch.rand(1).item())
        # seed= fixes everything whatever the script's generator says
        self.assertEqual(ours(1, 2, seed=5)[0], ours(2, 0, seed=5)[0])

    def test_exception_in_a_batch_is_raised_and_the_next_batch_follows(self):
        ref = self.run_loader(0, shuffle=False)[0]
        for w in (0, 2):
            dl = self.DL(AugDataset(bad=(5,)), batch_size=BATCH, num_workers=w, seed=5,
                         copy=True)
            it = iter(dl)
            got = [next(it)]
            with self.assertRaises(KeyError):  # batch 1 holds sample 5
                next(it)
            got += list(it)
            self.assertEqual(flat(got), [ref[0]] + ref[2:], "%d workers" % w)
            dl = self.DL(AugDataset(), batch_size=BATCH, num_workers=w, seed=5, copy=True,
                         collate_fn=fail_on_12)
            it = iter(dl)
            got = [next(it) for _ in range(3)]
            with self.assertRaises(ValueError) as cm:  # batch 3 holds sample 12
                next(it)
            self.assertIn("collate_fn refuses sample 12", str(cm.exception))
            got += list(it)
            self.assertEqual(flat(got), ref[:3] + ref[4:], "%d workers" % w)

    def test_two_iterators_of_one_loader(self):
        dl0 = self.DL(AugDataset(), batch_size=BATCH, shuffle=True, seed=5)
        ref = [flat(list(dl0)) for _ in range(3)]
        for copy in (False, True):
            # without persistent workers: each iterator is an epoch of its own
            # (the newer the next epoch, from its batch 0), side by side
            dl = self.DL(AugDataset(), batch_size=BATCH, shuffle=True, num_workers=2, seed=5,
                         copy=copy)
            a = iter(dl)
            x = [next(a)]
            b = iter(dl)
            y = [next(b), next(b)]
            x += list(a)
            y += list(b)
            self.assertEqual((flat(x), flat(y)), (ref[0], ref[1]), "copy=%s" % copy)
            # persistent workers: the newer iterator takes them over, the older says so
            dl = self.DL(AugDataset(), batch_size=BATCH, shuffle=True, num_workers=2, seed=5,
                         copy=copy, persistent_workers=True)
            self.addCleanup(dl.close)
            a = iter(dl)
            x = next(a)
            b = iter(dl)
            with self.assertRaises(RuntimeError) as cm:
                next(a)
            self.assertIn("a newer iter(loader) took over the persistent workers",
                          str(cm.exception))
            self.assertEqual(flat(list(b)), ref[1])
            self.assertEqual(flat(list(dl)), ref[2])
            self.assertEqual(flat([x]), ref[0][:1])  # the first batch is still its own

    def test_batches_held_past_close_and_the_loader_are_read_in_another_thread(self):
        import gc
        ref = self.run_loader(0, shuffle=False)[0]
        dl = self.DL(AugDataset(), batch_size=BATCH, num_workers=2, seed=5)
        it = iter(dl)
        held = [next(it) for _ in range(7)]  # more than the ring's 4 slots
        dl.close()
        with self.assertRaises(RuntimeError) as cm:  # its workers are gone
            next(it)
        self.assertIn("loader.close() ended its workers", str(cm.exception))
        del it, dl
        gc.collect()
        out = []
        th = threading.Thread(target=lambda: out.append(flat(held)))
        th.start()
        th.join()
        self.assertEqual(out, [ref[:7]])

    def test_batch_size_none_gives_each_sample_converted_as_torch(self):
        import torch
        from torch.utils.data import DataLoader as TorchDL
        want = list(TorchDL(Converted(), batch_size=None))
        for w in (0, 2):
            dl = self.DL(Converted(), batch_size=None, num_workers=w, copy=True)
            self.assertEqual(len(dl), 7)
            got = list(dl)
            self.assertEqual(len(got), len(want))
            for g, x in zip(got, want):
                self.assertEqual((g["i"], g["s"]), (x["i"], x["s"]))
                self.assertIsInstance(g["x"], torch.Tensor)
                self.assertTrue(torch.equal(g["x"], x["x"]))
        with self.assertRaises(ValueError) as cm:
            self.DL(Converted(), batch_size=None, drop_last=True)
        self.assertIn("mutually exclusive with drop_last", str(cm.exception))

    def test_it_is_a_torch_dataloader_with_torchs_attribute_rules(self):
        import multiprocessing
        import torch.utils.data as tud
        dl = self.DL(AugDataset(), batch_size=BATCH, num_workers=1, seed=5)
        self.assertIsInstance(dl, tud.DataLoader)
        self.assertIs(self.DL[int].__origin__, self.DL)  # DataLoader[T]
        for attr in ("batch_size", "batch_sampler", "sampler", "drop_last", "dataset",
                     "persistent_workers"):
            with self.assertRaises(ValueError) as cm:
                setattr(dl, attr, getattr(dl, attr))
            self.assertEqual(str(cm.exception), "%s attribute should not be set after"
                             " DataLoader is initialized" % attr)
        dl.timeout = 30  # not frozen, as in torch
        self.assertIsNone(dl.multiprocessing_context)
        ref = self.run_loader(0, shuffle=False)[0][:1]
        for ctx in (multiprocessing.get_context("spawn"), "forkserver"):
            dl = self.DL(AugDataset(), batch_size=BATCH, num_workers=1, seed=5,
                         multiprocessing_context=ctx)
            self.assertIn(dl.multiprocessing_context.get_start_method(),
                          ("spawn", "forkserver"))
            self.assertEqual(flat([next(iter(dl))]), ref)
        with self.assertRaises(ValueError) as cm:
            self.DL(AugDataset(), num_workers=1,
                    multiprocessing_context=multiprocessing.get_context("fork"))
        self.assertIn("never forked", str(cm.exception))
        with self.assertRaises(ValueError) as cm:
            self.DL(AugDataset(), multiprocessing_context="spawn")
        self.assertIn("num_workers > 0", str(cm.exception))

    def test_worker_init_fn_that_raises_is_reported_with_its_type_and_message(self):
        dl = self.DL(AugDataset(), batch_size=BATCH, num_workers=2,
                     worker_init_fn=init_that_raises)
        with self.assertRaises(RuntimeError) as cm:
            next(iter(dl))
        self.assertRegex(str(cm.exception), r"worker_init_fn\(\d\) raised ZeroDivisionError:"
                         r" worker \d cannot divide its shard")
        self.assertEqual(children(), [])

    def test_multiprocessing_value_in_a_dataset_is_refused_naming_it(self):
        with self.assertRaises(TypeError) as cm:
            self.DL(Counting(), batch_size=BATCH, num_workers=1)
        msg = str(cm.exception)
        self.assertIn("dataset.counter (a multiprocessing Synchronized)", msg)
        self.assertIn("get_worker_info()", msg)  # what to do instead
        self.assertEqual(len(list(self.DL(Counting(), batch_size=BATCH))), N // BATCH)

    def test_worker_init_fn_seeding_torch_takes_its_generator_over(self):
        # as torch: what worker_init_fn seeds is what dataset[i] draws from
        loader = self.DL(TorchSeed(), batch_size=4, num_workers=2,
                         worker_init_fn=seed_torch_12345)
        seen = {int(v) for b in loader for v in b}
        self.assertEqual(seen, {12345})
        # without it, each sample has its own seed
        self.assertGreater(len({int(v) for b in self.DL(TorchSeed(), batch_size=4,
                                                        num_workers=2) for v in b}), 4)

    def test_stats_speak_the_loaders_words(self):
        import goldminer
        dl = self.DL(AugDataset(), batch_size=BATCH, num_workers=2, seed=1)
        n = sum(1 for _ in dl)
        st = dl.stats()
        self.assertEqual((st["batches"], st["samples"]), (n, N))
        self.assertEqual((st["batch_size"], st["batches_per_epoch"], st["dataset_size"]),
                         (BATCH, n, N))
        self.assertGreater(st["img_per_s"], 0)
        self.assertGreaterEqual(st["wait_ns"], 0)
        self.assertEqual(st["errors"], 0)
        # the keys both kinds of loader have mean the same thing under the same name
        c_keys = {name for name, _ in goldminer._abi.LoaderStats._fields_}
        shared = {"batches", "samples", "elapsed_s", "img_per_s", "wait_ns", "errors",
                  "batch_size", "batches_per_epoch", "dataset_size", "workers",
                  "target_workers", "worker_deaths", "reissued", "kept_copied"}
        self.assertLessEqual(shared, c_keys)
        self.assertLessEqual(shared, set(st))

    def test_iterator_lists_its_workers_as_torch_does(self):
        it = iter(self.DL(AugDataset(), batch_size=BATCH, num_workers=2))
        next(it)
        deadline = time.monotonic() + 20  # (the second may still be starting)
        while len(it._workers) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        procs = it._workers
        self.assertEqual(len(procs), 2)
        self.assertTrue(all(p.is_alive() for p in procs))
        del it
        for p in procs:
            p.join(10)
            self.assertFalse(p.is_alive(), p.pid)

    def test_refused_arguments_say_why(self):
        import goldminer
        for kw, words in ((dict(num_workers=-1), "should be non-negative"),
                          (dict(persistent_workers=True), "num_workers > 0"),
                          (dict(multiprocessing_context="fork", num_workers=1), "never forked"),
                          (dict(node="local"), "node="), (dict(on_error="ignore"), "on_error"),
                          # not wrapped into 32 bits by ctypes: the range, as Loader's
                          (dict(lease_timeout_ms=1 << 32), "lease_timeout_ms must be an int"
                           " in 0..86400000"),
                          (dict(lease_timeout_ms=-1), "lease_timeout_ms must be an int")):
            with self.assertRaises(ValueError) as cm:
                self.DL(AugDataset(), **kw)
            self.assertIn(words, str(cm.exception))
            self.assertIsInstance(cm.exception, goldminer.ArgumentError)

    def test_except_goldminererror_catches_each_kind_it_raises(self):
        # each also the built-in torch's DataLoader raises there
        import goldminer
        for kw, builtin in ((dict(sampler=[0, 1], shuffle=True), ValueError),
                            (dict(multiprocessing_context=5, num_workers=1), TypeError),
                            (dict(num_workers=-1), ValueError)):
            with self.assertRaises(goldminer.GoldminerError, msg=str(kw)) as cm:
                self.DL(AugDataset(), **kw)
            self.assertIsInstance(cm.exception, builtin)
        dl = self.DL(AugDataset(), batch_size=BATCH, num_workers=1)
        with self.assertRaises(goldminer.GoldminerError) as cm:
            dl.batch_size = 3
        self.assertIsInstance(cm.exception, ValueError)
        dl = self.DL(AugDataset(crash_on=0), batch_size=BATCH, num_workers=1)
        with self.assertRaises(goldminer.GoldminerError) as cm:
            list(dl)
        self.assertIsInstance(cm.exception, RuntimeError)
        dl = self.DL(AugDataset(), batch_size=BATCH, num_workers=1, slot_bytes=4096,
                     collate_fn=zeros_collate)
        with self.assertRaises(goldminer.GoldminerError) as cm:
            list(dl)
        self.assertIsInstance(cm.exception, (OSError, RuntimeError))


class TestNode(GmTest):
    """node=: a node agent (goldminer node) runs the Python workers and sizes them
    with its division across jobs."""
    needs = ("lib", "torch", "numpy")

    def setUp(self):
        super().setUp()
        from goldminer.torch import DataLoader
        self.DL = DataLoader
        exe = os.path.join(BUILD, "goldminer")
        if not os.access(exe, os.X_OK):
            self.skipTest("no %s (make all)" % exe)
        d = tempfile.mkdtemp(prefix="gm-node-")
        self.sock = os.path.join(d, "agent.sock")
        self.agent = subprocess.Popen([exe, "node", "--cpus", "2", "--socket", self.sock,
                                       "--quiet"])
        deadline = time.monotonic() + 20
        while not os.path.exists(self.sock) and time.monotonic() < deadline:
            time.sleep(0.02)
        self.assertTrue(os.path.exists(self.sock), "the agent did not start")

    def tearDown(self):
        if self.agent.poll() is None:
            self.agent.terminate()
        self.agent.wait(timeout=30)

    def status(self):
        out = subprocess.run([os.path.join(BUILD, "goldminer"), "node", "--status", "--socket",
                              self.sock], capture_output=True, text=True, timeout=30).stdout
        return json.loads(out)

    def test_agent_runs_the_workers_with_the_same_bytes(self):
        ref = flat(list(self.DL(AugDataset(), batch_size=BATCH, shuffle=True, seed=5,
                                copy=True)))
        dl = self.DL(AugDataset(delay=0.02), batch_size=BATCH, shuffle=True, seed=5, copy=True,
                     num_workers="auto", node=self.sock)
        got, st, theirs, ours = [], None, [], []
        for b in dl:
            got.append(b)
            if len(got) == 3:
                st = self.status()
                theirs, ours = workers(self.agent.pid), workers()
        self.assertEqual(flat(got), ref)
        self.assertEqual(ours, [])  # not this process's children: the agent's
        self.assertGreaterEqual(len(theirs), 1)
        self.assertEqual(st["jobs"], 1)
        job = st["job"][0]
        self.assertEqual(job["pid"], os.getpid())
        self.assertTrue(job["python_workers"])
        # an agent without peers says why no peer makes its batches
        self.assertEqual(job["remote"], "none: no peers (goldminer node --peers)")
        deadline = time.monotonic() + 10  # the end of the job ends its workers
        while any(alive(w) for w in theirs) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual([w for w in theirs if alive(w)], [])

    def test_persistent_epochs_shorter_than_the_ring_through_the_agent(self):
        def epochs(**kw):
            dl = self.DL(AugDataset(n=12), batch_size=BATCH, shuffle=True, seed=5, copy=True,
                         **kw)
            out = [flat(list(dl)) for _ in range(3)]  # 3 batches an epoch, 4 slots
            dl.close()
            return out
        self.assertEqual(epochs(num_workers=2, persistent_workers=True, node=self.sock),
                         epochs())

    def test_two_loaders_share_the_agents_budget(self):
        mk = functools.partial(self.DL, AugDataset(n=200, delay=0.01), batch_size=BATCH,
                               seed=5, copy=True, num_workers="auto", node=self.sock)
        a, b = iter(mk()), iter(mk())
        most, jobs = 0, 0
        for k in range(30):
            next(a)
            next(b)
            if k % 5 == 4:
                st = self.status()
                jobs = max(jobs, st["jobs"])
                most = max(most, st["alive"], sum(j["workers"] for j in st["job"]))
                self.assertTrue(all(j["workers"] >= 1 for j in st["job"]), st)
        a.close()
        b.close()
        self.assertEqual(jobs, 2)
        self.assertLessEqual(most, 2)  # --cpus 2: two jobs, one worker each at most 2

    def test_agent_gone_mid_epoch_the_trainer_goes_on_with_the_same_bytes(self):
        ref = flat(list(self.DL(AugDataset(), batch_size=BATCH, seed=5, copy=True)))
        dl = self.DL(AugDataset(delay=0.05), batch_size=BATCH, seed=5, num_workers=2, copy=True,
                     node=self.sock)
        t0 = time.monotonic()
        got = []
        for k, b in enumerate(dl):  # its own workers make the rest: no error
            got.append(b)
            if k == 1:
                self.agent.kill()
        self.assertEqual(flat(got), ref)
        self.assertLess(time.monotonic() - t0, 60)

    def test_sigkilled_agent_leaves_no_zombie_and_no_orphan_worker(self):
        # a trainer whose own pools forked workers from a zygote (it adopted them)
        list(self.DL(AugDataset(n=8), batch_size=BATCH, num_workers=2))
        dl = self.DL(AugDataset(delay=0.05), batch_size=BATCH, seed=5, num_workers=2,
                     node=self.sock)
        theirs = []
        for k, _ in enumerate(dl):  # (the trainer's own workers finish the epoch)
            if k == 1:
                theirs = [pid for pid, _ in children(self.agent.pid)]  # and its zygote
                self.agent.kill()
        self.agent.wait(timeout=30)
        self.assertGreaterEqual(len(theirs), 2)
        deadline = time.monotonic() + 10
        left = theirs
        while left and time.monotonic() < deadline:
            time.sleep(0.05)
            mine = [pid for pid, _ in children()]  # zombies included
            left = [w for w in theirs if alive(w) or w in mine]
        self.assertEqual(left, [], "the killed agent's workers: alive, or zombies of the"
                         " trainer (a subreaper that does not reap them)")

    def test_node_needs_workers(self):
        with self.assertRaises(ValueError) as cm:
            self.DL(AugDataset(), batch_size=BATCH, node=self.sock)
        self.assertIn("num_workers > 0", str(cm.exception))


# A child that holds batches the way scripts do (held_in_a_child): prints "same"
# when their bytes are those of num_workers=0's, "differ" otherwise.
HOLD = textwrap.dedent("""
    import gc, sys
    from test_dataloader import AugDataset, BATCH, flat
    from goldminer.torch import DataLoader
    ref = flat(list(DataLoader(AugDataset(), batch_size=BATCH, seed=5)))
    if sys.argv[1] == "next":
        got = [next(iter(DataLoader(AugDataset(), batch_size=BATCH, num_workers=2,
                                    seed=5)))]
        want = ref[:1]
    else:
        got = list(DataLoader(AugDataset(), batch_size=BATCH, num_workers=2, seed=5))
        want = ref
    gc.collect()  # the loaders and their pools are gone; the batches are not
    print("same" if flat(got) == want else "differ")
""")


SCRIPT = textwrap.dedent("""
    import os, sys, time
    import torch
    from goldminer.torch import DataLoader

    class Squares:                       # a class of __main__
        def __len__(self):
            return 12
        def __getitem__(self, i):
            time.sleep(float(os.environ.get("DELAY", "0")))
            return i * i

    dl = DataLoader(Squares(), batch_size=3, num_workers=2,
                    collate_fn=lambda xs: torch.tensor(xs) + 1)   # a lambda
    for b in dl:
        print(" ".join(str(v) for v in b.tolist()), flush=True)
""")


FORK_SCRIPT = textwrap.dedent("""
    import hashlib, os, time
    import torch
    from goldminer.torch import DataLoader
    MODE = os.environ["FORK_MODE"]

    class Forking:                       # forks in every 16th __getitem__
        def __init__(self, fork):
            self.fork = fork
        def __len__(self):
            return 96
        def __getitem__(self, i):
            if self.fork and i % 16 == 3:
                if os.fork() == 0 and MODE == "sleep":  # a helper holding our fds
                    if i % 32 == 3:
                        os.setsid()      # one that leaves the worker's group
                    time.sleep(60)
                    os._exit(0)
                # MODE "return": the child returns, as if it were the worker
            return torch.rand(3) + i, i

    def digest(workers, fork):
        h = hashlib.sha256()
        for x, y in DataLoader(Forking(fork), batch_size=4, num_workers=workers,
                               shuffle=True, seed=7):
            h.update(x.numpy().tobytes() + y.numpy().tobytes())
        return h.hexdigest()

    ref = digest(0, False)
    for run in range(3):
        print("same" if digest(2, True) == ref else "other", flush=True)
""")


def holders(token, inodes):
    """Processes other than this one that have token in their environment or
    hold one of the pipes (inodes) open."""
    out, me = [], os.getpid()
    pipes = {"pipe:[%d]" % i for i in inodes}
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == me:
            continue
        try:
            with open("/proc/%s/environ" % d, "rb") as f:
                if token in f.read():
                    out.append(int(d))
                    continue
            for fd in os.listdir("/proc/%s/fd" % d):
                if os.readlink("/proc/%s/fd/%s" % (d, fd)) in pipes:
                    out.append(int(d))
                    break
        except OSError:
            pass
    return out


class TestScript(GmTest):
    needs = ("lib", "torch", "cloudpickle")

    def script(self, delay="0", tmp=None):
        d = tempfile.mkdtemp(prefix="gm-dl-")
        path = os.path.join(d, "train.py")
        with open(path, "w") as f:
            f.write(SCRIPT)
        env = dict(os.environ, DELAY=delay,
                   PYTHONPATH=os.path.join(REPO, "python"), TMPDIR=tmp or d)
        return subprocess.Popen([sys.executable, path], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env)

    def forking(self, mode):
        """FORK_SCRIPT in mode: its lines, stderr, and the processes left holding
        its stdout or stderr or carrying its environment 10 s after it ended."""
        d = tempfile.mkdtemp(prefix="gm-fork-")
        path = os.path.join(d, "train.py")
        with open(path, "w") as f:
            f.write(FORK_SCRIPT)
        token = "GM_FORK_TEST=%d.%s" % (os.getpid(), mode)
        env = dict(os.environ, FORK_MODE=mode, GM_FORK_TEST=token.split("=")[1],
                   PYTHONPATH=os.path.join(REPO, "python"), TMPDIR=d)
        p = subprocess.Popen([sys.executable, path], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env)
        inodes = [os.fstat(p.stdout.fileno()).st_ino, os.fstat(p.stderr.fileno()).st_ino]
        left = []
        try:
            p.wait(timeout=300)  # (its output is a few lines: no pipe fills)
            deadline = time.monotonic() + 10
            left = holders(token.encode(), inodes)
            while left and time.monotonic() < deadline:
                time.sleep(0.1)
                left = holders(token.encode(), inodes)
        finally:
            for pid in left + [p.pid]:  # a failing run leaves nothing either
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            out, err = p.communicate(timeout=30)
            shutil.rmtree(d, True)
        return p.returncode, out.split(), err, left

    def test_dataset_whose_fork_returns_gives_the_same_bytes_and_the_fork_is_ended(self):
        rc, lines, err, left = self.forking("return")
        self.assertEqual(rc, 0, err)
        self.assertEqual(lines, ["same"] * 3, err)
        self.assertIn("in __getitem__(3) of dataset __main__.Forking, returned into the "
                      "worker's loop: it is ended here", err)
        self.assertEqual(left, [])

    def test_helpers_a_dataset_forks_end_with_their_worker(self):
        rc, lines, err, left = self.forking("sleep")
        self.assertEqual(rc, 0, err)
        self.assertEqual(lines, ["same"] * 3, err)
        self.assertEqual(left, [])  # nothing holds its stdout, nothing of its run left

    def test_lambda_and_main_class_reach_the_workers(self):
        p = self.script()
        out, err = p.communicate(timeout=120)
        self.assertEqual(p.returncode, 0, err)
        want = [" ".join(str(i * i + 1) for i in range(k, k + 3)) for k in range(0, 12, 3)]
        self.assertEqual(out.split("\n")[:4], want)

    def test_sigkilled_trainer_leaves_no_file_and_no_process(self):
        tmp = tempfile.mkdtemp(prefix="gm-tmp-")
        p = self.script(delay="0.5", tmp=tmp)
        self.assertTrue(p.stdout.readline())  # iterating: the workers run
        procs = [pid for pid, _ in children(p.pid)]  # workers and the zygote
        self.assertGreaterEqual(len(procs), 3)
        p.kill()
        p.communicate(timeout=60)
        deadline = time.monotonic() + 10
        while any(alive(w) for w in procs) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual([w for w in procs if alive(w)], [])
        self.assertEqual(os.listdir(tmp), [])  # the spec was a memfd: nothing to leak

    def test_ctrl_c_leaves_no_process(self):
        p = self.script(delay="0.5")
        self.assertTrue(p.stdout.readline())  # iterating: the workers run
        procs = [pid for pid, _ in children(p.pid)]  # workers and the zygote
        self.assertGreaterEqual(len(procs), 3)
        p.send_signal(signal.SIGINT)
        p.communicate(timeout=60)
        self.assertNotEqual(p.returncode, 0)
        deadline = time.monotonic() + 10
        while any(alive(w) for w in procs) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual([w for w in procs if alive(w)], [])
