"""tap - run the Python test modules (tests/python/test_*.py) and print TAP.

    /usr/bin/python3 tests/python/tap.py [test_module ...]

One line per test: "ok N - name", "not ok N - name" (with the traceback as "#"
comment lines), "not ok N # SKIP name: reason" (the form tests/run.sh counts).
Exit status 1 when a test failed. unittest underneath; a GmTest subclass lists
what it needs in `needs` ("lib", "numpy", "torch", "torchvision", "cc", "PIL"),
and each test is skipped, with the reason, when a need is missing.
"""
import importlib
import os
import sys
import time
import traceback
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


class TapResult(unittest.TestResult):
    def __init__(self):
        super().__init__()
        self.n = 0
        self.failed = 0
        self.t0 = 0.0

    @staticmethod
    def _name(test):
        return "%s.%s" % (type(test).__module__, getattr(test, "_testMethodName", str(test)))

    def startTest(self, test):
        super().startTest(test)
        self.t0 = time.monotonic()

    def _emit(self, line, diag=None):
        self.n += 1
        print(line % self.n, flush=True)
        if diag:
            for d in diag.rstrip().splitlines():
                print("# " + d, flush=True)

    def addSuccess(self, test):
        self._emit("ok %%d - %s (%.1fs)" % (self._name(test), time.monotonic() - self.t0))

    def addSkip(self, test, reason):
        self._emit("not ok %%d # SKIP %s: %s" % (self._name(test), reason))

    def addFailure(self, test, err):
        self.failed += 1
        self._emit("not ok %%d - %s" % self._name(test),
                   "".join(traceback.format_exception(*err)))

    addError = addFailure

    def addExpectedFailure(self, test, err):
        self._emit("ok %%d - %s (expected failure)" % self._name(test))

    def addUnexpectedSuccess(self, test):
        self.failed += 1
        self._emit("not ok %%d - %s (unexpected success)" % self._name(test))


def main(argv):
    names = argv or sorted(f[:-3] for f in os.listdir(HERE)
                           if f.startswith("test_") and f.endswith(".py"))
    suite = unittest.TestSuite()
    result = TapResult()
    for name in names:
        try:
            mod = importlib.import_module(name)
        except Exception:
            result.failed += 1
            result._emit("not ok %%d - %s (import)" % name, traceback.format_exc())
            continue
        suite.addTests(unittest.defaultTestLoader.loadTestsFromModule(mod))
    suite.run(result)
    print("1..%d" % result.n)
    return 1 if result.failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
