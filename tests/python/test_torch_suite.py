"""PyTorch's own test_dataloader.py through tests/python/torch_suite.py: the drop-in
holds where PyTorch's own tests look.

make test-torch-suite runs all of it (minutes); here a sample of a dozen tests
runs both ways when the file is present (TORCH_TEST_DIR, default
build/torch-tests: make test-torch-suite or tests/torch_tests.sh fetches it),
else the test skips saying so. The sample is tests goldminer passes as torch
does, and two it refuses by design; a regression among them fails make test.
The runner's by-design list is checked against what goldminer really says and
against docs/USAGE.md, and its classification against made-up outcomes.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

from helpers import BUILD, REPO, GmTest

import torch_suite

SAMPLE_BOTH = [
    "TestDataLoader.test_sequential_batch",
    "TestDataLoader.test_shuffle_batch_workers",
    "TestDataLoader.test_batch_sampler",
    "TestDataLoader.test_len",
    "TestDataLoader.test_growing_dataset",
    "TestDataLoader.test_segfault",
    "TestDataLoader.test_timeout",
    "TestDataLoader.test_get_worker_info",
    "TestDataLoaderPersistentWorkers.test_shuffle_workers",
    "TestDataLoaderPersistentWorkers.test_dataset_not_reset",
    "TestIndividualWorkerQueue.test_ind_worker_queue",
    "TestDictDataLoader.test_sequential_batch",
    "TestDataLoader.test_worker_init_fn",
    "TestDataLoader.test_invalid_ctor_args_combinations",
    "TestDataLoader.test_partial_workers",
    "TestDataLoader.test_excessive_thread_creation_warning",
]
SAMPLE_BY_DESIGN = [
    "TestDataLoader.test_iterabledataset_len",
    "TestDataLoader.test_worker_seed",
    "TestDataLoader.test_multiprocessing_iterdatapipe",
]


def torch_test_file():
    d = os.environ.get("TORCH_TEST_DIR") or os.path.join(BUILD, "torch-tests")
    return os.path.join(d, "test_dataloader.py")


class TestTorchSuiteRunner(GmTest):
    needs = ()

    def test_a_by_design_test_failing_otherwise_is_a_regression(self):
        name = "TestDataLoaderPersistentWorkers.test_iterable_style_dataset"
        ok, refused = ("passed", ""), ("failed", "ValueError: goldminer DataLoader: "
                                       + torch_suite.ITERABLE + ": give ...")
        self.assertEqual(torch_suite.classify(name, ok, refused), "by design")
        self.assertEqual(torch_suite.classify(name, ok, ("failed", "AssertionError: 3 != 4")),
                         "regression")
        self.assertEqual(torch_suite.classify("TestDataLoader.test_len", ok, refused),
                         "regression")  # not in the list: a refusal is no excuse
        self.assertEqual(torch_suite.classify(name, ("failed", "x"), refused), "neither")
        self.assertEqual(torch_suite.classify(name, ok, ("crashed", "")), "regression")

    def test_by_design_list_is_the_one_in_usage(self):
        with open(os.path.join(REPO, "docs", "USAGE.md")) as f:
            text = f.read()
        section = text[text.index("### PyTorch's own DataLoader tests"):]
        section = section[:section.index("\n#", 1)]
        listed = re.findall(r"^- `([^`]+)`", section, re.M)
        self.assertEqual(sorted(listed), sorted(torch_suite.BY_DESIGN))
        for pattern, (refusal, _) in torch_suite.BY_DESIGN.items():
            line = [ln for ln in section.split("\n- ") if ln.startswith("`%s`" % pattern)][0]
            self.assertIn(refusal, " ".join(line.split()), pattern)


class TestTorchSuiteRefusals(GmTest):
    needs = ("lib", "torch")

    def test_each_by_design_refusal_is_what_goldminer_says(self):
        import multiprocessing
        import torch.utils.data as tud
        from goldminer.torch import DataLoader

        class Stream(tud.IterableDataset):
            def __iter__(self):
                return iter(range(4))

        class Shared(tud.Dataset):
            count = multiprocessing.Value("i", 0)

            def __init__(self):
                self.count = Shared.count

            def __len__(self):
                return 4

            def __getitem__(self, i):
                return i

        class Bulk(tud.Sampler):
            def __init__(self):
                super().__init__(None)

            def __iter__(self):
                return iter([[0, 1], [2, 3]])

            def __len__(self):
                return 2
        said = []
        pipe = tud.datapipes.iter.IterableWrapper([[1, 2], [3, 4]])
        with self.assertRaises(ValueError) as cm:  # torch takes shuffle= for a datapipe
            DataLoader(pipe, shuffle=True, num_workers=2, batch_size=2)
        self.assertIn(torch_suite.ITERABLE, str(cm.exception))
        for args, kw in (((Stream(),), {}),
                         ((Shared(),), {"num_workers": 2, "multiprocessing_context": "fork"}),
                         ((Shared(),), {"num_workers": 2})):
            with self.assertRaises((ValueError, TypeError)) as cm:
                DataLoader(*args, **kw)
            said.append(str(cm.exception))
        loader = DataLoader(list(range(4)), batch_size=None, sampler=Bulk(), num_workers=2)
        with self.assertRaises(TypeError) as cm:  # at the epoch's draw: the sampler's
            iter(loader)
        said.append(str(cm.exception))
        for refusal in (torch_suite.ITERABLE, torch_suite.FORK, torch_suite.PICKLE,
                        torch_suite.BULK):
            self.assertTrue(any(refusal in s for s in said), (refusal, said))


class TestTorchSuiteSample(GmTest):
    needs = ("lib", "torch", "numpy", "pytest")

    def test_a_sample_of_torchs_own_tests_passes_or_is_refused_by_design(self):
        path = torch_test_file()
        if not os.path.isfile(path):
            self.skipTest("no %s: make test-torch-suite fetches PyTorch's tests (or set"
                          " TORCH_TEST_DIR)" % path)
        out = os.path.join(tempfile.mkdtemp(prefix="gm-torch-suite-"), "outcomes.json")
        p = subprocess.run([sys.executable, os.path.join(REPO, "tests", "python",
                                                         "torch_suite.py"), path, "--json", out,
                            "--timeout", "120", "--only"] + SAMPLE_BOTH + SAMPLE_BY_DESIGN,
                           capture_output=True, text=True, timeout=900)
        self.assertEqual(p.returncode, 0, p.stdout[-4000:] + p.stderr[-2000:])
        with open(out) as f:
            res = json.load(f)
        for name in SAMPLE_BOTH + SAMPLE_BY_DESIGN:
            self.assertEqual(res["torch"][name][0], "passed", name)
        for name in SAMPLE_BOTH:
            self.assertEqual(res["goldminer"][name][0], "passed", (name, res["goldminer"][name]))
        for name in SAMPLE_BY_DESIGN:
            self.assertEqual(torch_suite.classify(name, res["torch"][name], res["goldminer"][name]),
                             "by design", (name, res["goldminer"][name]))
        self.assertIn("0 as regressions", p.stdout)
