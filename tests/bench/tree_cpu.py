#!/usr/bin/python3
"""tree_cpu.py - run a command and add, to each of its "epoch N: K images in T s"
lines, the CPU time its whole process tree spent in those T seconds.

    tree_cpu.py [--threads] -- CMD [ARGS...]

A shared machine moves img/s with the load of everything else; the CPU time
the pipeline itself burns per image moves much less, so a benchmark can report
both (bench-run.sh). The tree is the command and every descendant, found from
/proc's parent links every 50 ms; a process's CPU is its utime + stime plus the
cutime + cstime of the children it reaped, so a worker that exits between two
samples still counts (in its parent). Stdout passes through, each epoch line
followed by "cpu: epoch N: X ms/img (K images, C s of CPU in T s)"; stderr is
the command's own. The exit status is the command's.

--threads: after each epoch's line, where its CPU went since the epoch line before
(or the start), one "threads: epoch N: ..." line: the CPU of each kind of thread
in ms per image, a kind being the process's name (the trainer is the root) and
the thread's (/proc/PID/task/TID/comm, e.g. the trainer's torch intra-op threads
beside its main one), and how many threads of that kind ran; "KIND/reaped" is
the whole life of the children a process reaped in that time (torch's workers at
an epoch's end; their time before the previous line is counted there too); then
each kind's minor page faults per image. What profiles a training run without a
profiler: the trainer's per-batch cost against the workers'.

Not done: processes that leave the tree by re-parenting to init (goldminer's
pool is a subreaper: its workers stay in the trainer's tree).
"""
import os
import re
import subprocess
import sys
import threading
import time

TICK = os.sysconf("SC_CLK_TCK")
EPOCH = re.compile(r"epoch (\d+): (\d+) images in ([0-9.]+) s")


def _stat(pid):
    with open("/proc/%d/stat" % pid) as f:
        s = f.read()
    f = s[s.rindex(")") + 2:].split()
    return int(f[1]), sum(int(x) for x in f[11:15]) / TICK  # ppid; utime stime cutime cstime


def tree_cpu(root):
    """CPU seconds of root and its descendants now."""
    procs = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                procs[int(d)] = _stat(int(d))
            except (OSError, ValueError, IndexError):
                continue
    kids = {}
    for pid, (ppid, _) in procs.items():
        kids.setdefault(ppid, []).append(pid)
    total, todo = 0.0, [root]
    while todo:
        p = todo.pop()
        if p in procs:
            total += procs[p][1]
        todo += kids.get(p, [])
    return total


def _comm(path):
    with open(path) as f:
        return f.read().strip()


def tree_threads(root):
    """{(process kind, thread name, tid): CPU seconds} of root's tree now; the
    kind is "trainer" for root, else the process's comm."""
    procs = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                procs[int(d)] = _stat(int(d))[0]
            except (OSError, ValueError, IndexError):
                continue
    kids = {}
    for pid, ppid in procs.items():
        kids.setdefault(ppid, []).append(pid)
    out, todo = {}, [root]
    while todo:
        p = todo.pop()
        todo += kids.get(p, [])
        try:
            kind = "trainer" if p == root else _comm("/proc/%d/comm" % p)
            for t in os.listdir("/proc/%d/task" % p):
                base = "/proc/%d/task/%s/" % (p, t)
                with open(base + "stat") as f:
                    s = f.read()
                f = s[s.rindex(")") + 2:].split()
                cpu = (int(f[11]) + int(f[12])) / TICK  # the thread's own utime stime
                out[(kind, _comm(base + "comm"), int(t))] = cpu
                out[(kind, "minflt", int(t))] = -int(f[7])  # (negative: not CPU)
                if int(t) == p:  # children it reaped (torch's workers of past epochs)
                    out[(kind, "reaped", p)] = (int(f[13]) + int(f[14])) / TICK
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile: its CPU is lost to this breakdown
    return out


def threads_line(epoch, n, before, now):
    """The "threads:" line: CPU per image of each (kind, thread name) between two
    tree_threads() snapshots."""
    by, faults = {}, {}
    for key, cpu in now.items():
        if key[1] == "minflt":
            faults[key[0]] = faults.get(key[0], 0) + before.get(key, 0) - cpu
            continue
        d = cpu - before.get(key, 0.0)
        k = key[:2]
        c, m = by.get(k, (0.0, 0))
        by[k] = (c + d, m + (d > 0))
    parts = ["%s/%s %.2f ms/img (%d)" % (k[0], k[1], 1e3 * c / n, m)
             for k, (c, m) in sorted(by.items(), key=lambda kv: -kv[1][0]) if c > 0]
    parts += ["%s page faults %.0f/img" % (k, f / n) for k, f in sorted(faults.items())]
    return "threads: epoch %s: %s" % (epoch, "; ".join(parts))


def main(argv):
    threads = False
    if argv and argv[0] == "--threads":
        threads, argv = True, argv[1:]
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, bufsize=1)
    samples, done = [], threading.Event()

    def sample():
        while not done.is_set():
            try:
                samples.append((time.monotonic(), tree_cpu(proc.pid)))
            except OSError:
                pass
            time.sleep(0.05)
    t = threading.Thread(target=sample, daemon=True)
    t.start()
    last = {}
    for line in proc.stdout:
        now = time.monotonic()
        sys.stdout.write(line)
        m = EPOCH.search(line)
        if m and samples:
            n, dt = int(m.group(2)), float(m.group(3))
            end = max(samples, key=lambda s: s[0])
            start = min(samples, key=lambda s: abs(s[0] - (now - dt)))
            cpu = end[1] - start[1]
            if n and end[0] > start[0]:
                print("cpu: epoch %s: %.2f ms/img (%d images, %.2f s of CPU in %.2f s)"
                      % (m.group(1), 1e3 * cpu / n, n, cpu, end[0] - start[0]))
            if threads and n:
                snap = tree_threads(proc.pid)
                print(threads_line(m.group(1), n, last, snap))
                last = snap
        sys.stdout.flush()
    rc = proc.wait()
    done.set()
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
