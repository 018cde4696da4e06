#!/bin/sh
# The DataLoader's Python tests (tests/python/test_dataloader.py: about half the
# Python tests' time), a script of its own so that each part of the Python
# tests has tests/run.sh's time limit to itself; tests/test_python.sh runs the
# rest. TAP on stdout. Env: as tests/test_python.sh.
here=$(cd "$(dirname "$0")" && pwd)
GM_PY_PART=dataloader exec sh "$here/test_python.sh"
