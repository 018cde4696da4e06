"""python3 -m goldminer COMMAND: the package's commands.

    python3 -m goldminer bench DATA [options]   images/s of the Python path (goldminer.tools.bench)
    python3 -m goldminer run SCRIPT [ARGS...]  run a training script with goldminer serving its
                                                DataLoaders (goldminer.run; GOLDMINER_PLAN=1 prints plans;
                                                --node SOCKET before SCRIPT: a node agent's workers)
    python3 -m goldminer library                which libgoldminer.so is loaded, and its version
"""
import sys


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(__doc__.strip())
        return 0 if argv else 2
    cmd, rest = argv[0], argv[1:]
    if cmd == "bench":
        from .tools.bench import main as bench
        return bench(rest)
    if cmd == "run":
        from .run import main as run
        return run(rest)
    if cmd == "library":
        from ._abi import lib
        L = lib()
        ver = L.gm_version() if L.has("gm_version") else None
        print("%s %s" % (L.path, ver.decode() if ver else "(version unknown)"))
        return 0
    print("python3 -m goldminer: unknown command %r (bench, run, library)" % cmd, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
