"""goldminer run: a script runs as plain python runs it (argv, __main__, sys.path[0],
exit status, a signal's death, an uncaught exception's traceback from the script's
frame) and every DataLoader name it can reach is goldminer's; a map-style dataset
gives the same batches as torch's; an IterableDataset, and a loader goldminer
refuses while torch takes it, stay with torch in one line; at exit one summary per
loader; GOLDMINER_PLAN=1 prints the plan; the binary's `goldminer run --` does
the same through the interpreter it names; --node SOCKET (or GOLDMINER_NODE) has a
node agent run every path's workers with the same bytes, and a socket no agent
answers on is refused in one line before the script starts."""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time

from helpers import BUILD, REPO, GmTest, dataset, need_problem, tmpdir

PY = sys.executable
# (the caller's PYTHONPATH after ours: a run with cloudpickle hidden stays so)
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(
    [os.path.join(REPO, "python")] + [p for p in [os.environ.get("PYTHONPATH")] if p]))


def write(name, text):
    path = os.path.join(tmpdir(), name)
    with open(path, "w") as f:
        f.write(textwrap.dedent(text))
    return path


def plain(script, *args, env=None):
    return subprocess.run([PY, script] + list(args), capture_output=True, text=True,
                          env=env or ENV, timeout=300)


def served(script, *args, env=None):
    return subprocess.run([PY, "-m", "goldminer", "run", script] + list(args),
                          capture_output=True, text=True, env=env or ENV, timeout=300,
                          cwd=tmpdir())


def summaries(stderr):
    return [ln for ln in stderr.splitlines() if ln.startswith("goldminer run: ") and
            " img/s" in ln or ln.endswith("never iterated")]


IDENTITY = """
    import json, os, sys
    mod = sys.modules["__main__"]
    print(json.dumps({"argv": sys.argv, "name": __name__, "file": __file__,
                      "path0": sys.path[0], "main_is_us": mod.__dict__ is globals(),
                      "spec": __spec__}))
    what = sys.argv[1] if len(sys.argv) > 1 else ""
    if what == "exit":
        sys.exit(7)
    if what == "raise":
        def inner():
            raise ValueError("from the script")
        inner()
    if what == "term":
        os.kill(os.getpid(), 15)
    if what == "int":
        raise KeyboardInterrupt
"""


class TestRunIsPlainPython(GmTest):
    needs = ("lib",)

    def test_argv_main_path_and_exit_status_are_the_scripts(self):
        d = os.path.join(tmpdir(), "scripts")
        os.makedirs(d, exist_ok=True)
        real = write("scripts/ident.py", IDENTITY)
        link = os.path.join(tmpdir(), "ident_link.py")  # sys.path[0]: the link resolved
        if not os.path.exists(link):
            os.symlink(real, link)
        for args in ([], ["a", "--b", "c d"], ["exit"]):
            p, g = plain(link, *args), served(link, *args)
            self.assertEqual(g.returncode, p.returncode, g.stderr)
            self.assertEqual(json.loads(g.stdout), json.loads(p.stdout))
            self.assertEqual(json.loads(g.stdout)["path0"], d)
        self.assertEqual(served(link, "exit").returncode, 7)

    def test_uncaught_exception_and_signals_end_it_as_plain_python(self):
        s = write("ident2.py", IDENTITY)
        p, g = plain(s, "raise"), served(s, "raise")
        self.assertEqual((g.returncode, p.returncode), (1, 1))
        tb = g.stderr[g.stderr.index("Traceback"):]
        self.assertEqual(tb, p.stderr[p.stderr.index("Traceback"):])  # from the script on
        for what, sig in (("term", signal.SIGTERM), ("int", signal.SIGINT)):
            p, g = plain(s, what), served(s, what)
            self.assertEqual((g.returncode, p.returncode), (-sig, -sig), g.stderr)

    def test_a_missing_script_is_refused_as_python_does(self):
        g = served("/nonexistent/x.py")
        self.assertEqual(g.returncode, 2)
        self.assertIn("can't open file '/nonexistent/x.py'", g.stderr)


LOADERS = """
    import json, sys, threading
    import torch
    import torch.utils.data as tud
    from torch.utils.data import DataLoader, Dataset, IterableDataset
    from torch.utils.data.dataloader import DataLoader as DL2

    class Squares(Dataset):
        def __len__(self):
            return 10
        def __getitem__(self, i):
            return torch.tensor([i, i * i]), i % 3

    class Stream(IterableDataset):
        def __iter__(self):
            return iter(range(6))

    class Locked(Squares):
        def __init__(self):
            self.lock = threading.Lock()  # no pickler carries a lock to a worker

    out = {"same_class": DataLoader is tud.DataLoader is DL2}
    loaders = {"a": DataLoader(Squares(), batch_size=4),
               "b": tud.DataLoader(Squares(), batch_size=3, num_workers=2),
               "c": DL2(Squares(), batch_size=5, drop_last=True),
               "stream": DataLoader(Stream(), batch_size=4),
               "locked": DataLoader(Locked(), batch_size=4, num_workers=2)}
    for k, dl in loaders.items():
        out[k] = [[b[0].tolist(), b[1].tolist()] if isinstance(b, list) else b.tolist()
                  for b in dl]
        out[k + "_len"] = len(dl) if k != "stream" else None  # torch: no len()
        out[k + "_isinstance"] = isinstance(dl, DataLoader)
    print(json.dumps(out, sort_keys=True))
"""


# torch's own users of its DataLoader class, bound before `goldminer run` swaps it:
# DataLoader2 (its own DataLoader for a map-style dataset), datapipes, a subclass
TORCH_OWN = """
    import json
    import torch
    from torch.utils.data import DataLoader
    from torch.utils.data.dataloader_experimental import DataLoader2
    from torch.utils.data.datapipes.iter import IterableWrapper
    import torch.utils.data.dataloader as tdl

    out = {
        "dl2_map": [b.tolist() for b in DataLoader2(list(range(6)), batch_size=2)],
        "dl2_pipe": [b.tolist() for b in DataLoader2(IterableWrapper(range(6)), batch_size=2)],
        "pipe": [b.tolist() for b in DataLoader(IterableWrapper(range(6)), batch_size=3)],
        "gm_is_torch": isinstance(DataLoader(list(range(4))), DataLoader2.__new__.__globals__[
            "DataLoader"]),
    }
    dl = DataLoader2(list(range(6)), batch_size=2)
    try:
        dl.batch_size = 3
    except ValueError as e:
        out["frozen"] = str(e)
    print(json.dumps(out, sort_keys=True))
"""


# LOADERS and NODE_SCRIPT are unmodified scripts as torch's fork workers allow
# them: classes of __main__, loops not under `if __name__ == "__main__":`.
# Without cloudpickle a worker imports the script to find those classes, and
# refuses one whose loops would then start workers of their own
# (test_spawn_main): cloudpickle, which make deps installs, is what serves them.
UNGUARDED = ("lib", "torch", "numpy", "cloudpickle")


class TestRunServesDataLoaders(GmTest):
    needs = UNGUARDED

    def test_torchs_own_dataloader2_and_datapipes_still_work(self):
        # torch's DataLoader.__setattr__ calls super(DataLoader, self) with its
        # module's global, the swapped class: DataLoader2's loader failed there
        s = write("torch_own.py", TORCH_OWN)
        p, g = plain(s), served(s)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(g.returncode, 0, g.stderr)
        self.assertEqual(json.loads(g.stdout), json.loads(p.stdout))
        self.assertEqual(json.loads(g.stdout)["frozen"],
                         "batch_size attribute should not be set after DataLoader is"
                         " initialized")

    def test_every_name_is_served_with_torchs_batches(self):
        s = write("loaders.py", LOADERS)
        p, g = plain(s), served(s)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(g.returncode, 0, g.stderr)
        self.assertEqual(json.loads(g.stdout), json.loads(p.stdout))
        self.assertTrue(json.loads(g.stdout)["same_class"])
        lines = g.stderr.splitlines()
        stream = [ln for ln in lines if "IterableDataset" in ln]
        self.assertEqual(len(stream), 1, g.stderr)
        self.assertIn("loaders.py:", stream[0])
        self.assertIn("stays with torch", stream[0])
        locked = [ln for ln in lines if "stays with torch: goldminer cannot serve it" in ln]
        self.assertEqual(len(locked), 1, g.stderr)
        self.assertIn("dataset.lock", locked[0])
        sums = summaries(g.stderr)
        self.assertEqual(len(sums), 3, g.stderr)  # a, b, c: one line each
        self.assertIn("python workers", sums[0])
        self.assertIn("10 images", sums[0])
        # num_workers=2: the pool's size, though four tiny batches may all be
        # made before the second worker is up (the summary takes the target)
        self.assertIn("workers 2 local / 0 remote", sums[1])
        self.assertIn("trainer stalled", sums[2])
        self.assertIn("10 images", sums[2])  # drop_last: 2 batches of 5

    def test_goldminer_plan_prints_each_plan_when_built(self):
        s = write("loaders2.py", LOADERS)
        g = served(s, env=dict(ENV, GOLDMINER_PLAN="1"))
        self.assertEqual(g.returncode, 0, g.stderr)
        self.assertEqual(g.stderr.count(": plan\npath: python"), 3, g.stderr)
        self.assertEqual(len(summaries(g.stderr)), 3)


IMAGEFOLDER = """
    import sys
    import torch
    from torch.utils.data import DataLoader
    from torchvision import datasets, transforms as T
    torch.manual_seed(3)
    ops = [T.RandomResizedCrop(32), T.RandomHorizontalFlip()]
    if sys.argv[2] == "jitter":
        ops.append(T.ColorJitter(0.4, 0.4, 0.4))
    elif sys.argv[2] == "hue":
        ops.append(T.ColorJitter(0.4, 0.4, 0.4, 0.1))
    elif sys.argv[2] == "blur":
        ops.append(T.GaussianBlur(3))
    ops += [T.ToTensor(), T.Normalize([0.5] * 3, [0.25] * 3)]
    ds = datasets.ImageFolder(sys.argv[1], T.Compose(ops))
    dl = DataLoader(ds, batch_size=8, shuffle=True, num_workers=2)
    n, labels, kept = 0, [], []
    for x, y in dl:
        assert x.dtype == torch.float32 and tuple(x.shape[1:]) == (3, 32, 32), x.shape
        assert x.is_contiguous() and y.dtype == torch.int64 and len(y) == len(x)
        assert -3 < float(x.min()) and float(x.max()) < 3
        n += len(x)
        labels += y.tolist()
        if sys.argv[3:] == ["keep"]:  # every batch held to the end, as some scripts do
            kept.append((x, float(x.double().sum())))
    assert all(float(x.double().sum()) == s for x, s in kept)  # none was overwritten
    print(n, sorted(labels))
"""


class TestRunImageFolder(GmTest):
    needs = ("lib", "torch", "torchvision", "PIL", "numpy")

    def test_train_transform_is_served_in_c_and_hybrid_with_torchs_shapes(self):
        s, root = write("folder.py", IMAGEFOLDER), dataset()
        p = plain(s, root, "plain")
        self.assertEqual(p.returncode, 0, p.stderr)
        for aug, path in (("plain", "C path"), ("jitter", "C path"), ("hue", "C path"),
                          ("blur", "hybrid")):
            g = served(s, root, aug)
            self.assertEqual(g.returncode, 0, g.stderr)
            self.assertEqual(g.stdout, p.stdout)  # every sample once, with its label
            sums = summaries(g.stderr)
            self.assertEqual(len(sums), 1, g.stderr)
            self.assertIn(path, sums[0])
            self.assertIn("36 images", sums[0])
            self.assertNotIn("copied", sums[0])  # each batch dropped: none copied
        # the C path's batches held to the end (more than the ring's slots): the
        # oldest are copied by the library, so the ring goes on, and the summary
        # says how many
        g = served(s, root, "plain", "keep")
        self.assertEqual(g.returncode, 0, g.stderr)
        self.assertEqual(g.stdout, p.stdout)
        self.assertRegex(summaries(g.stderr)[0],
                         r"; [1-9][0-9]* batches held across the ring's slots were copied")

    def test_a_loop_left_part_way_starts_the_next_epoch_with_its_own_batches(self):
        # a script that leaves its epoch early (`break` after N steps), as training
        # scripts with a step limit do: the next `for` is a whole new epoch (torch's
        # new iterator), the same batches as after an epoch run to its end
        s = write("folder_break.py", """
            import hashlib, sys
            import torch
            from torch.utils.data import DataLoader
            from torchvision import datasets, transforms as T
            torch.manual_seed(5)
            ds = datasets.ImageFolder(sys.argv[1], T.Compose([
                T.RandomResizedCrop(32), T.RandomHorizontalFlip(), T.ToTensor()]))
            dl = DataLoader(ds, batch_size=8, shuffle=True, num_workers=2)
            for step, (x, y) in enumerate(dl):
                if sys.argv[2] == "break" and step == 1:
                    break
            n = 0
            for x, y in dl:
                n += len(x)
                print(hashlib.sha1(x.numpy().tobytes()).hexdigest(), y.tolist())
            print(n)
        """)
        root = dataset()
        full = served(s, root, "full")
        self.assertEqual(full.returncode, 0, full.stderr)
        self.assertIn("C path", summaries(full.stderr)[0])
        self.assertEqual(full.stdout.splitlines()[-1], "36")
        cut = served(s, root, "break")
        self.assertEqual(cut.returncode, 0, cut.stderr)
        self.assertEqual(cut.stdout, full.stdout)  # (before: the 20 left of epoch 0)

    def test_a_loop_the_script_never_ends_is_timed_in_the_summary(self):
        # a step-based script takes batches with next(it) and exits with the
        # iterator open: its summary counts the time to exit (it said 0.00 s =
        # 0.0 img/s and 0% stalled)
        s = write("folder_next.py", """
            import sys, time
            from torch.utils.data import DataLoader
            from torchvision import datasets, transforms as T
            ds = datasets.ImageFolder(sys.argv[1], T.Compose([
                T.RandomResizedCrop(32), T.ToTensor()]))
            it = iter(DataLoader(ds, batch_size=8, shuffle=True, num_workers=2))
            for step in range(3):
                x, y = next(it)
                time.sleep(0.2)  # the model's step
        """)
        g = served(s, dataset())
        self.assertEqual(g.returncode, 0, g.stderr)
        m = re.search(r"C path .*: 24 images in ([0-9.]+) s = ([0-9.]+) img/s",
                      summaries(g.stderr)[0])
        self.assertIsNotNone(m, g.stderr)
        self.assertGreaterEqual(float(m.group(1)), 0.4)
        self.assertGreater(float(m.group(2)), 0.0)

    def test_gpu_decode_c_path_gives_the_same_batches_and_auto_stays_off_here(self):
        # GOLDMINER_GPU_DECODE=1: the C path's workers write coefficient slots and
        # the trainer finishes them (the host path): every batch's bytes as with 0
        import torch
        s = write("folder_sums.py", IMAGEFOLDER.replace(
            "labels += y.tolist()",
            "labels += y.tolist(); print(__import__('hashlib').sha1(x.numpy().tobytes())"
            ".hexdigest(), y.tolist())"))
        root = dataset()
        env0 = dict(ENV, GOLDMINER_GPU_DECODE="0")
        ref = served(s, root, "jitter", env=env0)
        self.assertEqual(ref.returncode, 0, ref.stderr)
        for mode in ("1", "auto"):
            g = served(s, root, "jitter", env=dict(env0, GOLDMINER_GPU_DECODE=mode))
            self.assertEqual(g.returncode, 0, g.stderr)
            self.assertEqual(g.stdout, ref.stdout, mode)
            self.assertIn("C path", summaries(g.stderr)[0])
            if mode == "auto" and not torch.cuda.is_available():
                self.assertEqual(g.stderr.count("gpu_decode='auto': off: no CUDA device"), 1,
                                 g.stderr)
        # a word it does not know: the loader stays with torch, saying why
        bad = served(s, root, "jitter", env=dict(env0, GOLDMINER_GPU_DECODE="yes"))
        self.assertIn("GOLDMINER_GPU_DECODE must be 0, 1 or auto", bad.stderr)

    def test_the_binary_execs_the_named_interpreter(self):
        exe = os.path.join(BUILD, "goldminer")
        s = write("ident3.py", IDENTITY)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        g = subprocess.run([exe, "run", "--", PY, "-B", s, "exit", "x"], capture_output=True,
                           text=True, env=env, timeout=300)
        self.assertEqual(g.returncode, 7, g.stderr)
        self.assertEqual(json.loads(g.stdout)["argv"], [s, "exit", "x"])
        g = subprocess.run([exe, "run", "--", PY, "-m", "json.tool"], capture_output=True,
                           text=True, env=env, timeout=60)
        self.assertEqual(g.returncode, 2)
        self.assertIn("goldminer run: -m: the interpreter's -m and -c are not served", g.stderr)
        f = write("folder2.py", IMAGEFOLDER)
        g = subprocess.run([exe, "run", "--", PY, f, dataset(), "plain"], capture_output=True,
                           text=True, env=env, timeout=300)
        self.assertEqual(g.returncode, 0, g.stderr)
        self.assertIn("C path", summaries(g.stderr)[0])


class TestExample(GmTest):
    needs = ("lib", "torch", "torchvision", "PIL", "numpy")

    def test_the_torchvision_example_runs_plain_and_served(self):
        ex = os.path.join(REPO, "examples", "train_torchvision.py")
        with open(ex) as f:
            self.assertNotIn("goldminer", "".join(ln for ln in f if ln.startswith(("import",
                                                                                  "from"))))
        args = [dataset(), "--steps", "2", "--batch-size", "8"]
        p = plain(ex, *args)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("eval: ", p.stdout)
        g = served(ex, *args)
        self.assertEqual(g.returncode, 0, g.stderr)
        sums = summaries(g.stderr)
        self.assertEqual(len(sums), 2, g.stderr)
        self.assertIn("C path [read | decode | random_resized_crop 224", sums[0])
        self.assertIn("C path [read | decode | resize 256 | center_crop 224", sums[1])
        g = served(ex, *args, "--augment", "randaugment", "--no-eval")
        self.assertEqual(g.returncode, 0, g.stderr)
        self.assertIn("hybrid [C: RandomResizedCrop, RandomHorizontalFlip | python: RandAugment",
                      summaries(g.stderr)[0])


NODE_SCRIPT = """
    import hashlib, json, os, subprocess, sys
    import torch
    from torch.utils.data import DataLoader, Dataset
    from torchvision import datasets, transforms as T

    class Noisy(Dataset):
        def __len__(self):
            return 12  # 3 batches an epoch: fewer than the persistent ring's slots
        def __getitem__(self, i):
            return torch.rand(3) + i, i

    def jobs():
        st = subprocess.run([os.environ["GM_TEST_EXE"], "node", "--status", "--socket",
                             os.environ["GM_TEST_SOCK"]], capture_output=True, text=True)
        st = json.loads(st.stdout) if st.returncode == 0 else {}
        return [j.get("python_workers", False) for j in st.get("job", [])
                if j["pid"] == os.getpid()]

    torch.manual_seed(3)
    blur = [T.RandomResizedCrop(32), T.GaussianBlur(3), T.ToTensor()]
    loaders = {
        "python": (DataLoader(Noisy(), batch_size=4, shuffle=True, num_workers=2), 3),
        "C": (DataLoader(datasets.ImageFolder(sys.argv[1], T.Compose(
            [T.RandomResizedCrop(32), T.ToTensor()])), batch_size=8, num_workers=2), 1),
        "hybrid": (DataLoader(datasets.ImageFolder(sys.argv[1], T.Compose(blur)),
                              batch_size=8, num_workers=2), 1)}
    out = {}
    for name, (dl, epochs) in loaders.items():
        h = hashlib.sha256()
        for _ in range(epochs):
            for k, (x, y) in enumerate(dl):
                h.update(x.numpy().tobytes() + y.numpy().tobytes())
                if k == 0 and "GM_TEST_SOCK" in os.environ:
                    out[name + "_jobs"] = jobs()
        out[name] = h.hexdigest()
    print(json.dumps(out, sort_keys=True))
"""


class TestRunNode(GmTest):
    """--node SOCKET / GOLDMINER_NODE: every path's workers run in a node agent."""
    needs = ("lib", "torch", "torchvision", "PIL", "numpy")

    def setUp(self):
        super().setUp()
        self.exe = os.path.join(BUILD, "goldminer")
        if not os.access(self.exe, os.X_OK):
            self.skipTest("no %s (make all)" % self.exe)
        self.sock = os.path.join(tempfile.mkdtemp(prefix="gm-run-node-"), "agent.sock")

    def start_agent(self):
        agent = subprocess.Popen([self.exe, "node", "--cpus", "2", "--socket", self.sock,
                                  "--quiet"])
        self.addCleanup(agent.wait, timeout=30)
        self.addCleanup(agent.terminate)
        deadline = time.monotonic() + 20
        while not os.path.exists(self.sock) and time.monotonic() < deadline:
            time.sleep(0.02)
        self.assertTrue(os.path.exists(self.sock), "the agent did not start")

    def test_every_path_gets_its_batches_through_the_agent_with_the_same_bytes(self):
        for need in UNGUARDED:  # NODE_SCRIPT is unguarded too
            if need_problem(need):
                self.skipTest(need_problem(need))
        self.start_agent()
        s, root = write("node.py", NODE_SCRIPT), dataset()
        ref = served(s, root)
        self.assertEqual(ref.returncode, 0, ref.stderr)
        env = dict(ENV, GM_TEST_EXE=self.exe, GM_TEST_SOCK=self.sock)
        g = subprocess.run([PY, "-m", "goldminer", "run", "--node", self.sock, s, root],
                           capture_output=True, text=True, env=env, timeout=300, cwd=tmpdir())
        self.assertEqual(g.returncode, 0, g.stderr)
        got, want = json.loads(g.stdout), json.loads(ref.stdout)
        for name in ("python", "C", "hybrid"):
            self.assertEqual(got[name], want[name], name)  # the same bytes
        # the agent's status at each loader's first batch: this process's jobs,
        # Python workers (True) for the python and hybrid paths, a C job (False)
        # for the C one, attached since it was built; the persistent pool of the
        # python loader is still there when the hybrid one runs
        self.assertEqual(sorted(got["python_jobs"]), [False, True], g.stderr)
        self.assertEqual(sorted(got["C_jobs"]), [False, True], g.stderr)
        self.assertEqual(sorted(got["hybrid_jobs"]), [False, True, True], g.stderr)
        sums = summaries(g.stderr)
        self.assertEqual(len(sums), 3, g.stderr)
        for line, path in zip(sums, ("python workers", "C path", "hybrid")):
            self.assertIn(path, line)
            self.assertIn("/ 0 remote (node agent %s)" % self.sock, line)  # no peers
        self.assertNotIn("node agent", "".join(summaries(ref.stderr)))
        # GOLDMINER_NODE, and the binary's --node before --, say the same
        env = dict(env, GOLDMINER_NODE=self.sock)
        g = subprocess.run([PY, "-m", "goldminer", "run", s, root], capture_output=True,
                           text=True, env=env, timeout=300, cwd=tmpdir())
        self.assertEqual(g.returncode, 0, g.stderr)
        self.assertEqual(sorted(json.loads(g.stdout)["python_jobs"]), [False, True])
        g = subprocess.run([self.exe, "run", "--node", self.sock, "--", PY, s, root],
                           capture_output=True, text=True, env=dict(env, GOLDMINER_NODE=""),
                           timeout=300, cwd=tmpdir())
        self.assertEqual(g.returncode, 0, g.stderr)
        self.assertEqual(sorted(json.loads(g.stdout)["C_jobs"]), [False, True])
        self.assertEqual(json.loads(g.stdout)["C"], want["C"])

    def test_no_agent_at_the_socket_is_refused_in_words_and_the_script_not_started(self):
        marker = os.path.join(tmpdir(), "started")
        s = write("marker.py", "open(%r, 'w').close()\n" % marker)
        dead = os.path.join(os.path.dirname(self.sock), "dead.sock")
        lone = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.addCleanup(lone.close)
        lone.bind(dead)  # a socket file no agent listens on (one that died)
        for argv, env in (([self.exe, "run", "--node", self.sock, "--", PY, s], ENV),
                          ([PY, "-m", "goldminer", "run", "--node=" + self.sock, s], ENV),
                          ([PY, "-m", "goldminer", "run", s], dict(ENV, GOLDMINER_NODE=dead))):
            g = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)
            self.assertEqual(g.returncode, 1, g.stderr)
            self.assertFalse(os.path.exists(marker), "the script ran")
            lines = g.stderr.strip().splitlines()
            self.assertEqual(len(lines), 1, g.stderr)
            where = dead if "GOLDMINER_NODE" in env else self.sock
            self.assertIn(where, lines[0])
            self.assertIn("goldminer node --socket %s" % where, lines[0])
            self.assertIn("the script was not started", lines[0])
        for argv in (["--node"], ["--node="], ["--nod", s]):
            g = subprocess.run([PY, "-m", "goldminer", "run"] + argv, capture_output=True,
                               text=True, env=ENV, timeout=60)
            self.assertEqual(g.returncode, 2, g.stderr)
            self.assertIn("goldminer run: --no", g.stderr)
