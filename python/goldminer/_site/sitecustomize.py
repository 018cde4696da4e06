"""sitecustomize - goldminer run's DataLoader swap in every child interpreter of a
run (multiprocessing and torch.multiprocessing spawn children, a script started
with subprocess): `goldminer run` puts this folder first on PYTHONPATH and sets
GOLDMINER_RUN_SWAP=1, so each Python started under it imports this module at
start (site.py does, before the program).

It costs an interpreter nothing until torch.utils.data is imported: it only adds
a finder to sys.meta_path that, once torch.utils.data has been executed, calls
goldminer.run.install_child() (the swap, and its summary at exit; nothing in
goldminer's own workers, which import goldminer._worker first). Then it runs the
sitecustomize this one hides (the next on sys.path, e.g. Debian's), as site.py
would have. Without GOLDMINER_RUN_SWAP=1 it does nothing but that.
"""
import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


class _SwapWhenImported:
    """A one-shot meta path finder: torch.utils.data's own spec, whose loader calls
    goldminer.run.install_child() once the module has been executed."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch.utils.data":
            return None
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module

        def exec_module(module):
            run(module)
            try:
                from goldminer import run as gm_run
                gm_run.install_child()
            except Exception as e:  # noqa: BLE001 - the script runs on with torch's
                sys.stderr.write("goldminer run (pid %d): the DataLoader swap failed in this"
                                 " interpreter, its loaders stay with torch: %s: %s\n"
                                 % (os.getpid(), type(e).__name__, e))
        loader.exec_module = exec_module
        return spec


def _chain():
    """Run the sitecustomize this one hides, as site.py would have run it."""
    rest = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)


if os.environ.get("GOLDMINER_RUN_SWAP") == "1":
    if "torch.utils.data" in sys.modules:  # (imported by something at start)
        from goldminer import run as _gm_run
        _gm_run.install_child()
    else:
        sys.meta_path.insert(0, _SwapWhenImported())
_chain()
