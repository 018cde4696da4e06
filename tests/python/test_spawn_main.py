"""A script's own classes reach goldminer's workers without cloudpickle.

With python3-cloudpickle absent the spec is plain pickle, which names a class of
the script as __main__.X; a worker imports the trainer's main script as
__mp_main__, aliased as __main__, as torch's spawn workers do, without running
its `if __name__ == "__main__":` block. Each script here runs with cloudpickle
hidden (a directory first on PYTHONPATH whose cloudpickle raises ImportError; the
workers get the trainer's sys.path) and says so, so a test cannot pass by
finding cloudpickle after all.
"""
import os
import subprocess
import sys
import tempfile
import textwrap

from helpers import REPO, GmTest, tmpdir

# A Dataset, a collate_fn and an item class of the script's __main__, sized by an
# argument read at import (a worker gets the trainer's sys.argv); batches compared
# with torch's own DataLoader's, with 0 and 2 workers.
GUARDED = textwrap.dedent("""
    import sys
    import torch
    from torch.utils.data import Dataset, default_collate

    N = int(sys.argv[1])

    class Squares(Dataset):
        def __len__(self):
            return N
        def __getitem__(self, i):
            return torch.tensor([i * i, i]), i

    def collate(items):
        return default_collate(items)

    if __name__ == "__main__":
        try:
            import cloudpickle  # noqa: F401
            print("cloudpickle importable")
        except ImportError:
            print("cloudpickle hidden")
        import torch.utils.data as tud
        from goldminer.torch import DataLoader
        for workers in (0, 2):
            dl = DataLoader(Squares(), batch_size=4, num_workers=workers, collate_fn=collate)
            print("pickler", dl.pickler.split()[0])
            ours = list(dl)
            theirs = list(tud.DataLoader(Squares(), batch_size=4, num_workers=workers,
                                         collate_fn=collate))
            same = len(ours) == len(theirs) == (N + 3) // 4 and all(
                torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
                for a, b in zip(ours, theirs))
            print("workers", workers, "same" if same else "differ", len(ours))
""")

# The same loop, not under the guard: a worker importing the script would
# iterate it and start workers of its own.
UNGUARDED = textwrap.dedent("""
    import torch
    from torch.utils.data import Dataset
    from goldminer.torch import DataLoader

    class Squares(Dataset):
        def __len__(self):
            return 8
        def __getitem__(self, i):
            return torch.tensor(i * i)

    for b in DataLoader(Squares(), batch_size=4, num_workers=2):
        print(b.tolist())
""")

# Under `goldminer run`: torch's DataLoader served by Python workers over a
# dataset that raises an exception class of the script. The worker pickles it as
# __mp_main__.BadSample; the trainer must find that name to raise it.
SERVED = textwrap.dedent("""
    from torch.utils.data import DataLoader, Dataset

    class BadSample(Exception):
        pass

    class Numbers(Dataset):
        def __len__(self):
            return 6
        def __getitem__(self, i):
            if i == 4:
                raise BadSample("sample %d is bad" % i)
            return i

    if __name__ == "__main__":
        try:
            for batch in DataLoader(Numbers(), batch_size=3, num_workers=2):
                print(batch.tolist(), flush=True)
        except BadSample as e:
            print("BadSample:", str(e).split("\\n")[0])
""")


def hidden_cloudpickle_dir():
    """A directory whose cloudpickle package raises ImportError on import."""
    d = os.path.join(tmpdir(), "no-cloudpickle")
    if not os.path.isdir(d):
        os.makedirs(os.path.join(d, "cloudpickle"))
        with open(os.path.join(d, "cloudpickle", "__init__.py"), "w") as f:
            f.write("raise ImportError('cloudpickle hidden by tests/python/test_spawn_main.py')\n")
    return d


def run_script(text, args=(), served=False):
    d = tempfile.mkdtemp(prefix="gm-main-", dir=tmpdir())
    path = os.path.join(d, "train.py")
    with open(path, "w") as f:
        f.write(text)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [hidden_cloudpickle_dir(), os.path.join(REPO, "python")]))
    argv = [sys.executable] + (["-m", "goldminer", "run"] if served else []) + [path]
    return subprocess.run(argv + list(args), capture_output=True, text=True, env=env,
                          timeout=300, cwd=d)


class TestMainWithoutCloudpickle(GmTest):
    needs = ("lib", "torch")

    def test_main_dataset_gives_torchs_batches_without_cloudpickle(self):
        p = run_script(GUARDED, ["10"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.split("\n")[:5],
                         ["cloudpickle hidden", "pickler pickle", "workers 0 same 3",
                          "pickler pickle", "workers 2 same 3"], p.stderr)

    def test_loop_outside_the_main_guard_is_refused_naming_the_guard(self):
        p = run_script(UNGUARDED)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("train.py iterates a DataLoader with workers when a worker imports it",
                      p.stderr)
        self.assertIn("put that loop under if __name__ == '__main__':", p.stderr)
        self.assertNotIn("[0, 1, 4, 9]", p.stdout)  # no batch: the trainer's loop raised

    def test_goldminer_run_raises_the_scripts_own_exception_class(self):
        p = run_script(SERVED, served=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.split("\n")[:2], ["[0, 1, 2]", "BadSample: sample 4 is bad"],
                         p.stderr)
