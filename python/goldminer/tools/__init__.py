"""goldminer.tools - the developer's tools that ship with the package but are no part
of what a trainer imports: `import goldminer` (and goldminer.torch) never loads them.

    python3 -m goldminer.tools.bench ROOT ...        images/s of the Python path (make bench)
    python3 -m goldminer.tools.gpucheck DATA ...     the pinned ring's check on a GPU
    python3 -m goldminer.tools.profile_classes P ... per-vCPU rates for goldminer profile --class

Each is a command (a main() run by `python3 -m`); none is an API.
"""
