#!/bin/sh
# The remote cost: UCX puts into a forked process's registered memfd
# over TCP loopback (UCX_TLS=tcp unless set), 64 KiB, 1 MiB and a 9.6 MB batch,
# against memcpy of the same sizes in the same run (ratios printed by
# ucx_bench itself), and the put+flush round trip. Skipped without UCX.
set -u
B=${B:-build}
UCX_TLS=${UCX_TLS:-tcp} "$B/bench/ucx_bench" "$@"
