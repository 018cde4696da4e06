"""What real training recipes build reaches the C path: a plain object whose
__call__ only applies a Compose it holds (torchvision's reference presets) is
planned as that Compose, and one whose __call__ does anything else is not, the
plan saying why in one line; a DistributedSampler (num_replicas=2, rank=0), a
Subset and a RandomSampler with a generator keep an all-C transform on the C
path, in torch's order of indices to the byte (each sample its own class: the
labels are the indices); DataLoaders built in torch.multiprocessing.spawn and
multiprocessing spawn children under `goldminer run` are served, each child's
summary naming its pid, with torch's batches, and what a child leaves to torch
(an IterableDataset) is one such line."""
import json
import os
import subprocess
import sys
import textwrap

from helpers import REPO, GmTest, dataset, tmpdir

PY = sys.executable
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(
    [os.path.join(REPO, "python")] + [p for p in [os.environ.get("PYTHONPATH")] if p]))


class Preset:
    """torchvision's references/classification/presets.py, as a user writes one."""

    def __init__(self, ops):
        from torchvision import transforms
        self.transforms = transforms.Compose(ops)

    def __call__(self, img):
        return self.transforms(img)


class Logged(Preset):
    """Does something besides applying its Compose: not unwrapped."""

    def __call__(self, img):
        print("sample")
        return self.transforms(img)


class Converted(Preset):
    def __call__(self, img):
        return self.transforms(img.convert("RGB"))


class ByProperty:
    """self.transforms is a property: what it returns is the class's business."""

    def __init__(self, ops):
        self._t = Preset(ops).transforms

    @property
    def transforms(self):
        return self._t

    def __call__(self, img):
        return self.transforms(img)


class Nested:
    def __init__(self, inner):
        self.inner = inner

    def __call__(self, x):
        return self.inner(x)


class TestPresetsAreReadThrough(GmTest):
    needs = ("lib", "torch", "torchvision", "PIL")

    def plan(self, transform, **kw):
        import goldminer.torch as gt
        from torch.utils.data import DataLoader
        from torchvision import datasets
        ds = datasets.ImageFolder(dataset(), transform)
        return gt.plan(DataLoader(ds, batch_size=8, **kw))

    def test_a_preset_holding_a_compose_is_planned_as_the_compose(self):
        import torch
        from torchvision import transforms as T
        train = [T.RandomResizedCrop(32), T.RandomHorizontalFlip(0.5), T.PILToTensor(),
                 T.ConvertImageDtype(torch.float), T.Normalize([0.5] * 3, [0.25] * 3)]
        p = self.plan(Preset(train), shuffle=True)
        self.assertEqual(p.path, "C", p.text())
        self.assertIn("random_resized_crop 32", p.spec)
        self.assertIn("Preset applies its Compose: read as that", p.notes)
        ev = [T.Resize(40), T.CenterCrop(32), T.PILToTensor(), T.ConvertImageDtype(torch.float)]
        self.assertEqual(self.plan(Preset(ev)).path, "C")
        self.assertEqual(self.plan(Nested(Preset(ev))).path, "C")  # a preset in a preset
        hy = self.plan(Preset(train[:2] + [T.TrivialAugmentWide()] + train[2:]))
        self.assertEqual(hy.path, "hybrid", hy.text())
        self.assertEqual([o.where for o in hy.ops], ["C", "C"] + ["python"] * 4)

    def test_a_preset_whose_call_does_more_is_not_unwrapped_and_the_plan_says_why(self):
        from torchvision import transforms as T
        ops = [T.RandomResizedCrop(32), T.ToTensor()]
        for cls, words in ((Logged, "does more than return self.ATTR(x)"),
                           (Converted, "does more than return self.ATTR(x)"),
                           (ByProperty, "not a plain attribute")):
            p = self.plan(cls(ops))
            self.assertEqual(p.path, "python", (cls, p.text()))
            said = [n for n in p.notes if n.startswith("not unwrapped: ")]
            self.assertEqual(len(said), 1, p.notes)
            self.assertIn(words, said[0])
            self.assertNotIn("\n", said[0])
        p = self.plan(Nested(lambda x: x))  # holds something that is no transform
        self.assertIn("not a torchvision transform", " ".join(p.notes))


class TestSamplersKeepTheCPath(GmTest):
    needs = ("lib", "torch", "torchvision", "PIL", "numpy")

    def setUp(self):
        super().setUp()
        import torch
        from torchvision import datasets, transforms as T
        from goldminer import run
        # each sample its own class: a batch's labels are its dataset indices
        self.root = dataset("one_per_class", classes=20, per_class=1)
        self.ds = datasets.ImageFolder(self.root, T.Compose([T.RandomResizedCrop(16),
                                                             T.ToTensor()]))
        self.torch = torch
        self.orig = torch.utils.data.DataLoader
        self.GM = run.make_dataloader_class(getattr(self.orig, "_goldminer_original",
                                                    self.orig))

    def orders(self, cls, make, epochs=2, dataset=None):
        """Each epoch's labels in order, and the plan (None for torch's)."""
        torch = self.torch
        torch.manual_seed(11)
        extra = {}
        if cls is self.orig and os.environ.get("GM_SANITIZER"):
            # torch's own loader's worker, forked from this process with ASan
            # preloaded, hung in CI's sanitize stage (2026-12-05: the parent in
            # _try_get_data past the 240 s limit); spawned, it starts clean.
            # The order is the sampler's, drawn here either way.
            extra = {"multiprocessing_context": "spawn"}
        dl = cls(dataset or self.ds, batch_size=3, num_workers=1, **extra, **make())
        out = []
        for e in range(epochs):
            if hasattr(dl.sampler, "set_epoch"):
                dl.sampler.set_epoch(e)
            out.append([int(v) for _, y in dl for v in y])
        plan = getattr(dl, "goldminer_plan", None)
        del dl
        return out, plan

    def check(self, make, dataset=None):
        want, _ = self.orders(self.orig, make, dataset=dataset)
        got, plan = self.orders(self.GM, make, dataset=dataset)
        self.assertEqual(plan.path, "C", plan.text())
        self.assertEqual(got, want)
        self.assertNotEqual(want[0], sorted(want[0]))  # an order that tells
        return plan

    def test_distributed_sampler_rank_0_of_2_keeps_c_in_torchs_order(self):
        from torch.utils.data.distributed import DistributedSampler
        p = self.check(lambda: {"sampler": DistributedSampler(self.ds, num_replicas=2, rank=0,
                                                              seed=3)})
        self.assertIn("DistributedSampler's indices", " ".join(p.notes))

    def test_random_sampler_with_a_generator_keeps_c_in_torchs_order(self):
        self.check(lambda: {"sampler": self.torch.utils.data.RandomSampler(
            self.ds, generator=self.torch.Generator().manual_seed(5))})
        self.check(lambda: {"shuffle": True,
                            "generator": self.torch.Generator().manual_seed(6)})

    def test_a_subset_keeps_c_in_torchs_order(self):
        from torch.utils.data import Subset
        sub = Subset(Subset(self.ds, list(range(19, -1, -1))), [3, 0, 7, 12, 5, 9, 1])
        p = self.check(lambda: {"shuffle": True}, dataset=sub)
        self.assertIn("a Subset of ImageFolder: 7 of its 20 samples", " ".join(p.notes))
        want, _ = self.orders(self.orig, lambda: {}, dataset=sub)
        got, p = self.orders(self.GM, lambda: {}, dataset=sub)
        self.assertEqual(p.path, "C")
        self.assertEqual(got, want)
        self.assertEqual(got[0], [16, 19, 12, 7, 14, 10, 18])


SPAWNED = """
    import json, sys
    import multiprocessing
    import torch
    import torch.multiprocessing as mp
    from torch.utils.data import Dataset

    class Squares(Dataset):
        def __len__(self):
            return 10
        def __getitem__(self, i):
            return torch.tensor([i, i * i])

    class Stream(torch.utils.data.IterableDataset):
        def __iter__(self):
            return iter(range(3))

    def child(rank, tag):
        from torch.utils.data import DataLoader
        assert [b.tolist() for b in DataLoader(Stream(), batch_size=2)] == [[0, 1], [2]]
        dl = DataLoader(Squares(), batch_size=4, num_workers=1)
        print(json.dumps({"tag": tag, "served": getattr(dl, "goldminer_plan", None) is not None,
                          "batches": [b.tolist() for b in dl]}), flush=True)

    if __name__ == "__main__":
        mp.spawn(child, args=("mp.spawn",), nprocs=1)
        p = multiprocessing.get_context("spawn").Process(target=child,
                                                         args=(0, "multiprocessing"))
        p.start()
        p.join()
        sys.exit(p.exitcode)
"""


class TestSpawnChildrenAreServed(GmTest):
    needs = ("lib", "torch", "numpy")

    def test_loaders_of_mp_spawn_and_multiprocessing_children_are_served(self):
        path = os.path.join(tmpdir(), "spawned.py")
        with open(path, "w") as f:
            f.write(textwrap.dedent(SPAWNED))
        run = [PY, "-m", "goldminer", "run", path]
        p = subprocess.run([PY, path], capture_output=True, text=True, env=ENV, timeout=300)
        g = subprocess.run(run, capture_output=True, text=True, env=ENV, timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(g.returncode, 0, g.stderr)
        plain = [json.loads(ln) for ln in p.stdout.splitlines()]
        served = [json.loads(ln) for ln in g.stdout.splitlines()]
        self.assertEqual([d["tag"] for d in served], ["mp.spawn", "multiprocessing"])
        self.assertEqual([d["served"] for d in plain], [False, False])
        self.assertEqual([d["served"] for d in served], [True, True], g.stderr)
        self.assertEqual([d["batches"] for d in served], [d["batches"] for d in plain])
        # one summary per child, naming its pid
        said = [ln for ln in g.stderr.splitlines() if ln.startswith("goldminer run (pid ")]
        sums = [ln for ln in said if "img/s" in ln]
        self.assertEqual(len(sums), 2, g.stderr)
        self.assertTrue(all("spawned.py:" in ln and "10 images" in ln for ln in sums), sums)
        # what a child leaves to torch, in one line naming its pid
        torchs = [ln for ln in said if "Stream is an IterableDataset: it stays with torch" in ln]
        self.assertEqual(len(torchs), 2, g.stderr)
        self.assertEqual(len(set(ln.split(")")[0] for ln in sums + torchs)), 2)  # two pids
