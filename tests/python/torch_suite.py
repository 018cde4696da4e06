"""torch_suite - PyTorch's own test/test_dataloader.py, unmodified, against
goldminer.torch.DataLoader, compared with a run against torch's DataLoader.

    /usr/bin/python3 tests/python/torch_suite.py TORCH_TEST_DIR/test_dataloader.py \
        [--only Class.test_name ...] [--timeout S] [--json FILE] [--loaders torch,goldminer]

(make test-torch-suite finds or fetches the file: Debian's source of pytorch
1.13.1, the torch /usr/bin/python3 carries.) For each loader it runs pytest on
the file, without --forked (the goldminer run is one trainer process, as a
user's is), with this file as a pytest plugin (-p torch_suite). The plugin, in
pytest_configure, before the test module is imported:
  - with GM_TORCH_SUITE_LOADER=goldminer, sets torch.utils.data.DataLoader and
    torch.utils.data.dataloader.DataLoader to goldminer.torch.DataLoader, so the
    module's `from torch.utils.data import DataLoader` gets goldminer's (once
    the module is imported, torch.utils.data.dataloader.DataLoader is torch's
    again: torch's own class names itself through it, pytest_collection_finish);
  - bounds each test: SIGALRM raises TestTimeout after --timeout seconds, and a
    test still running 30 s later (stuck where Python never runs the handler)
    ends pytest through faulthandler, with every thread's stack on stderr;
  - writes each test's start and outcome (passed, failed, skipped, timeout, with
    the failure's text) to GM_TORCH_SUITE_LOG, one JSON object a line.
torch.testing._internal.common_utils imports `expecttest`, which Debian does
not package: when it does not import, the runner puts a stand-in on PYTHONPATH
(for pytest and every process it starts: torch's spawned workers and
goldminer's import the test module too) whose TestCase is unittest.TestCase and
ACCEPT False; test_dataloader.py uses none of its assertions (one that did would
fail with AttributeError, not pass).
A pytest that dies (a crash, or the hard stop) loses only the test it was
running: that test is recorded as "crashed" with the exit status and pytest runs
again on the tests not yet reported.

The report: one line per test with both outcomes, then the tests torch passes
and goldminer does not, split in two. "By design" (BY_DESIGN below, mirrored in
docs/USAGE.md, "PyTorch's own DataLoader tests"): a loader goldminer refuses in
words; such a test counts as by design only when its failure text holds that
refusal, else it is a regression like any other. "Regressions": the rest.
Exit status 0 when there is no regression, 1 otherwise, 2 when the file cannot
be run at all.

What it does not do: tests that start their own interpreter (subprocess) run
torch's DataLoader there whatever the loader; the runner neither copies nor
edits torch's file, and it never decides a test's outcome itself.
"""
import argparse
import fnmatch
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
PLUGIN = os.path.splitext(os.path.basename(__file__))[0]
HARD_GRACE_S = 30  # past --timeout, a test that did not take its SIGALRM ends pytest

# goldminer's refusals (dataloader.py): the words a user gets
ITERABLE = "an IterableDataset has no indices for stateless workers"
FORK = "goldminer's workers are always fresh processes of this interpreter (like 'spawn')"
PICKLE = "is shared between processes only by fork or a multiprocessing start"
BULK = "not an index: goldminer's workers take int indices"

# Tests torch passes and goldminer fails by design: a glob over Class.test (the
# persistent-workers class repeats TestDataLoader's tests) -> (the refusal in the
# failure's text, what the test wants). Keep docs/USAGE.md's list ("PyTorch's own
# DataLoader tests") the same: test_torch_suite checks it.
BY_DESIGN = {
    "TestDataLoader*.test_iterable_style_dataset": (ITERABLE, "an IterableDataset"),
    "TestDataLoader*.test_chain_iterable_style_dataset": (ITERABLE, "a ChainDataset"),
    "TestDataLoader*.test_iterabledataset_len": (ITERABLE, "len() of an IterableDataset"),
    "TestDataLoader*.test_multi_epochs_reproducibility": (ITERABLE, "an IterableDataset"),
    "TestDataLoader*.test_multiprocessing_iterdatapipe": (ITERABLE, "an IterDataPipe"),
    "IntegrationTestDataLoaderDataPipe.test_shuffler_iterdatapipe": (ITERABLE, "an IterDataPipe"),
    "TestSetAffinity.test_set_affinity_in_worker_init": (ITERABLE, "an IterableDataset"),
    # (its second half, an error in worker_init_fn, is not reached)
    "TestDataLoader*.test_error_in_init": (ITERABLE, "an IterableDataset whose __iter__ raises"),
    "TestDataLoader*.test_multiprocessing_contexts": (FORK, "'fork' and 'forkserver' contexts"),
    "TestDataLoader*.test_multiple_dataloaders": (FORK, "'fork' and 'forkserver' contexts"),
    "TestDataLoader*.test_worker_seed": (PICKLE, "a dataset holding multiprocessing.Value"),
    "TestDataLoader*.test_worker_seed_reproducibility":
        (PICKLE, "a dataset holding multiprocessing.Value"),
    # (its map-style half passes; the IterableDataset half is refused)
    "TestDataLoader*.test_builtin_collection_conversion": (ITERABLE, "an IterableDataset"),
    # (its num_workers=0 half passes)
    "TestDataLoader*.test_bulk_loading_nobatch":
        (BULK, "a sampler of index lists with workers (bulk loading)"),
}


def by_design(name):
    """(refusal, what the test wants) when name is a by-design failure, else None."""
    for pattern, entry in BY_DESIGN.items():
        if fnmatch.fnmatchcase(name, pattern):
            return entry
    return None


# --- the pytest plugin (-p torch_suite) ------------------------------------------
class TestTimeout(Exception):
    """A test ran past the runner's --timeout."""


_log = None
_torch_dataloader = None  # torch's class, while the module global is goldminer's


def _record(**rec):
    if _log is not None:
        _log.write(json.dumps(rec) + "\n")
        _log.flush()


def _name(item_or_report):
    """Class.test of a pytest node id (file::Class::test)."""
    parts = item_or_report.nodeid.split("::")
    return ".".join(parts[1:]) if len(parts) > 1 else parts[0]


EXPECTTEST = """\"\"\"expecttest stand-in written by goldminer's tests/python/torch_suite.py: the
real one is not installed (Debian does not package it). test_dataloader.py uses
none of its assertions; torch's TestCase only subclasses this one.\"\"\"
import unittest
ACCEPT = False
TestCase = unittest.TestCase
"""


def _expecttest_dir(tmp):
    """A directory to put on PYTHONPATH holding the expecttest stand-in, or None
    when the real module imports."""
    if subprocess.run([sys.executable, "-c", "import expecttest"],
                      stderr=subprocess.DEVNULL).returncode == 0:
        return None
    os.makedirs(os.path.join(tmp, "expecttest"))
    with open(os.path.join(tmp, "expecttest", "__init__.py"), "w") as f:
        f.write(EXPECTTEST)
    return tmp


def pytest_configure(config):
    global _log
    path = os.environ.get("GM_TORCH_SUITE_LOG")
    if path:
        _log = open(path, "a")
    if os.environ.get("GM_TORCH_SUITE_LOADER") == "goldminer":
        sys.path.insert(0, os.path.join(REPO, "python"))
        global _torch_dataloader
        import torch.utils.data
        import torch.utils.data.dataloader
        from goldminer.torch import DataLoader
        _torch_dataloader = torch.utils.data.dataloader.DataLoader
        torch.utils.data.DataLoader = DataLoader
        torch.utils.data.dataloader.DataLoader = DataLoader


def pytest_collection_finish(session):
    """The test module is imported: torch.utils.data.dataloader.DataLoader is
    torch's again, since torch's own class names itself through that global
    (super(DataLoader, self) in its __setattr__: DataLoader2 builds one). The
    module's DataLoader, and torch.utils.data.DataLoader that tests call at run
    time, stay goldminer's."""
    if os.environ.get("GM_TORCH_SUITE_LOADER") == "goldminer":
        import torch.utils.data.dataloader as tdl
        tdl.DataLoader = _torch_dataloader


def pytest_runtest_logstart(nodeid, location):
    _record(event="start", nodeid=nodeid)


def _on_alarm(signum, frame):
    raise TestTimeout("torch_suite: the test ran past %s s" % os.environ.get(
        "GM_TORCH_SUITE_TIMEOUT"))


def pytest_runtest_call(item):
    """(before the call: arm the per-test bounds; pytest_runtest_teardown disarms)"""
    import faulthandler
    limit = int(os.environ.get("GM_TORCH_SUITE_TIMEOUT", "120"))
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.alarm(limit)
    faulthandler.dump_traceback_later(limit + HARD_GRACE_S, exit=True)


def pytest_runtest_teardown(item):
    import faulthandler
    signal.alarm(0)
    faulthandler.cancel_dump_traceback_later()


def pytest_runtest_logreport(report):
    # one outcome a test: the call's, or setup's when setup did not pass (a skip,
    # an error); a teardown error fails a test that passed
    if report.when == "call" or (report.when == "setup" and not report.passed) or \
            (report.when == "teardown" and report.failed):
        outcome = report.outcome
        text = report.longreprtext if report.failed else ""
        if report.failed and "TestTimeout: torch_suite" in text:
            outcome = "timeout"
        if report.skipped and isinstance(report.longrepr, tuple):
            text = str(report.longrepr[2])
        _record(event="end", nodeid=report.nodeid, when=report.when, outcome=outcome,
                text=text[-4000:], seconds=round(report.duration, 2))


# --- the runner --------------------------------------------------------------------
def run_loader(test_file, loader, only, timeout, env_extra=None, say=print):
    """Outcomes {Class.test: (outcome, text)} of test_file's tests with `loader`
    ("torch" or "goldminer"), pytest run again after one that died."""
    results, started = {}, None
    tmp = tempfile.mkdtemp(prefix="gm-torch-suite-")
    log = os.path.join(tmp, "outcomes.jsonl")
    env = dict(os.environ, GM_TORCH_SUITE_LOADER=loader, GM_TORCH_SUITE_LOG=log,
               GM_TORCH_SUITE_TIMEOUT=str(timeout), PYTHONDONTWRITEBYTECODE="1")
    # (on PYTHONPATH: the processes torch's tests and goldminer start import them too)
    env["PYTHONPATH"] = os.pathsep.join(
        [HERE] + [p for p in [_expecttest_dir(os.path.join(tmp, "stand-in")),
                              env.get("PYTHONPATH")] if p])
    env.update(env_extra or {})
    targets = ["%s::%s" % (test_file, n.replace(".", "::")) for n in only] or [test_file]
    try:
        for attempt in range(200):  # (each attempt reports at least one more test)
            done = set(results)
            args = [sys.executable, "-m", "pytest", "-p", PLUGIN, "-p", "no:cacheprovider",
                    "-q", "-rN", "--color=no"]
            todo = [t for t in targets
                    if not only or t.split("::", 1)[1].replace("::", ".") not in done]
            if not todo:
                break  # every test asked for has its outcome
            args += ["--deselect=%s::%s" % (test_file, n.replace(".", "::")) for n in done]
            args += todo
            open(log, "w").close()
            p = subprocess.run(args, cwd=os.path.dirname(test_file), env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               errors="replace")
            new, started = 0, None
            with open(log) as f:
                for line in f:
                    rec = json.loads(line)
                    name = ".".join(rec["nodeid"].split("::")[1:])
                    if rec["event"] == "start":
                        started = name
                    elif name not in results or rec["outcome"] != "passed":
                        results[name] = (rec["outcome"], rec["text"])
                        new += 1
                        started = None if name == started else started
            if p.returncode in (0, 1, 5):  # all passed, some failed, none collected
                if p.returncode == 5 and not results:
                    raise RuntimeError("pytest collected no test of %s:\n%s"
                                       % (test_file, p.stdout[-3000:]))
                break
            if started is None:
                # pytest itself failed (usage, import of the module): nothing to resume
                raise RuntimeError("pytest ended with status %d before any test ran:\n%s"
                                   % (p.returncode, p.stdout[-3000:]))
            why = ("killed by signal %d" % -p.returncode if p.returncode < 0
                   else "pytest exited with status %d" % p.returncode)
            results[started] = ("crashed", "%s while running it; pytest's last output:\n%s"
                                % (why, p.stdout[-3000:]))
            say("# %s: %s crashed pytest (%s): running the rest again" % (loader, started, why))
    finally:
        shutil.rmtree(tmp, True)
    return results


def classify(name, torch_result, gm_result):
    """'both', 'neither', 'goldminer only', 'by design' or 'regression'."""
    t_ok, g_ok = torch_result[0] == "passed", gm_result[0] == "passed"
    if t_ok and g_ok:
        return "both"
    if not t_ok:
        return "goldminer only" if g_ok else "neither"
    entry = by_design(name)
    if entry and entry[0] in gm_result[1]:
        return "by design"
    return "regression"


def first_line(text):
    """The failure's exception line (the last 'Error:' or 'Exception' line), short."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if ln.startswith("E ") or "Error" in ln.split(":")[0] or "Exception" in ln.split(":")[0]:
            return ln[2:].strip()[:160] if ln.startswith("E ") else ln[:160]
    return lines[-1][:160] if lines else ""


def report(torch_res, gm_res, say=print):
    names = sorted(set(torch_res) | set(gm_res))
    kinds = {}
    for n in names:
        t = torch_res.get(n, ("absent", ""))
        g = gm_res.get(n, ("absent", ""))
        kinds[n] = classify(n, t, g)
        say("%-78s torch=%-8s goldminer=%-8s %s" % (n, t[0], g[0], kinds[n]))
    tp = sum(1 for n in names if torch_res.get(n, ("",))[0] == "passed")
    gp = sum(1 for n in names if gm_res.get(n, ("",))[0] == "passed")
    design = [n for n in names if kinds[n] == "by design"]
    regress = [n for n in names if kinds[n] == "regression"]
    say("")
    say("torch_suite: %d tests; torch passes %d, goldminer passes %d; of those torch"
        " passes, goldminer fails %d by design and %d as regressions; goldminer passes"
        " %d that torch does not" % (len(names), tp, gp, len(design), len(regress),
                                      sum(1 for n in names if kinds[n] == "goldminer only")))
    for n in design:
        say("by design:  %s: %s: \"%s\"" % (n, by_design(n)[1], by_design(n)[0]))
    for n in regress:
        g = gm_res.get(n, ("absent", ""))
        say("regression: %s: %s: %s" % (n, g[0], first_line(g[1])))
    return kinds


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("test_file", help="torch's test/test_dataloader.py")
    ap.add_argument("--only", nargs="*", default=[], metavar="Class.test",
                    help="run these tests only")
    ap.add_argument("--timeout", type=int, default=120, help="seconds a test may run")
    ap.add_argument("--loaders", default="torch,goldminer")
    ap.add_argument("--json", help="write {loader: {test: [outcome, text]}} here")
    a = ap.parse_args(argv)
    test_file = os.path.abspath(a.test_file)
    if not os.path.isfile(test_file):
        sys.stderr.write("torch_suite: %s: no such file (make test-torch-suite fetches"
                         " torch's tests: TORCH_TEST_DIR)\n" % test_file)
        return 2
    res = {}
    for loader in a.loaders.split(","):
        t0 = time.monotonic()
        try:
            res[loader] = run_loader(test_file, loader, a.only, a.timeout)
        except RuntimeError as e:
            sys.stderr.write("torch_suite: %s with %s's DataLoader: %s\n" % (test_file, loader, e))
            return 2
        print("# %s: %d tests in %.0f s" % (loader, len(res[loader]), time.monotonic() - t0),
              flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    if set(res) != {"torch", "goldminer"}:
        for loader, r in res.items():
            for n in sorted(r):
                print("%-78s %s=%s" % (n, loader, r[n][0]))
        return 0
    kinds = report(res["torch"], res["goldminer"])
    return 1 if "regression" in kinds.values() else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
