#!/usr/bin/python3
"""Any map-style dataset: goldminer.torch.DataLoader against torch's DataLoader, in
one run, 2 workers each, the same arguments.

    /usr/bin/python3 pydataset_bench.py text|images [--root PHOTOS] [--epochs 3]
                                        [--rounds 2] [--limit 600]

Datasets: "text" reads, tokenizes (a word regex, hashed into a 30000-word
vocabulary) and pads (in collate_fn, to the batch's longest) the lines of the
licences Debian ships (/usr/share/common-licenses); "images" is torchvision's
ImageFolder over PHOTOS (the first --limit images) with Resize(144) +
CenterCrop(128) + ColorJitter + ToTensor. For each it prints JSON lines:
  rate     samples/s of epochs 2..E (persistent workers, so the workers' start is
           not timed; epoch 1 is timed apart as "first_epoch_s"). In each of
           --rounds, the three loaders (torch's, goldminer's with 2 workers, and
           goldminer's num_workers="auto" through a node agent, `goldminer node
           --cpus 2`, a subprocess that runs and sizes the workers) are made,
           then their timed epochs interleave one by one, the order reversed at
           each step (ABC CBA ...), so that a shared machine's drift falls on all
           alike; vs_torch is the median of the rounds' ratios to torch's rate
           of the same round. Beside it: the CPU time the workers and the
           trainer spent per sample (utime + stime of every thread, from /proc),
           the CPU the loader's processes got (cpu_share, cores: on a shared
           machine the scheduler's to give), samples per CPU second and its
           ratio to torch's (vs_torch_per_cpu: what a loaded machine does not
           change much), and the highest load average seen;
  kill     one worker SIGKILLed every 200 ms from the first batch on (goldminer's
           zygote, which holds no lease, is not a worker) over --epochs epochs: goldminer's checksum
           against its undisturbed one; torch's DataLoader: what it raised;
  memory   mid-epoch: the trainer's RSS and PSS, the workers' total (goldminer's
           zygote with them), the sum of all PSS, and one worker's own pages
           (USS, the median worker's: what one more worker costs).
The checksum is a SHA-256 over every batch's tensors' bytes.
"""
import argparse
import glob
import hashlib
import json
import os
import re
import signal
import sys
import threading
import time

import torch
from torch.utils.data import DataLoader as TorchDL

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))
from goldminer.torch import DataLoader as GmDL  # noqa: E402

WORD = re.compile(r"[A-Za-z]+|[0-9]+|[^\sA-Za-z0-9]")


class Lines:
    """Lines of text files, read from disk in __getitem__ (offsets kept)."""

    def __init__(self, paths):
        self.where = []
        for p in paths:
            off = 0
            with open(p, "rb") as f:
                for line in f:
                    if line.strip():
                        self.where.append((p, off))
                    off += len(line)

    def __len__(self):
        return len(self.where)

    def __getitem__(self, i):
        p, off = self.where[i]
        with open(p, "rb") as f:
            f.seek(off)
            line = f.readline().decode("utf-8", "replace")
        ids = [hash_word(w) for w in WORD.findall(line.lower())][:64]
        return torch.tensor(ids or [0], dtype=torch.int64)


def hash_word(w):
    h = 2166136261
    for c in w.encode():
        h = ((h ^ c) * 16777619) & 0xFFFFFFFF
    return 1 + h % 30000


def pad(items):
    n = max(len(x) for x in items)
    out = torch.zeros(len(items), n, dtype=torch.int64)
    for i, x in enumerate(items):
        out[i, :len(x)] = x
    return out, torch.tensor([len(x) for x in items])


def dataset(kind, root, limit):
    if kind == "text":
        return Lines(sorted(glob.glob("/usr/share/common-licenses/*"))), pad, 64
    from torchvision import datasets, transforms
    tf = transforms.Compose([transforms.Resize(144), transforms.CenterCrop(128),
                             transforms.ColorJitter(0.4, 0.4, 0.4, 0.1),
                             transforms.ToTensor()])
    ds = datasets.ImageFolder(root, tf)
    idx = list(range(0, len(ds), max(1, len(ds) // limit)))[:limit]
    return torch.utils.data.Subset(ds, idx), None, 32


AGENT = {}  # the node agent of the "auto" rows: {"proc": Popen, "sock": path}


def agent():
    """A node agent with the 2 CPUs of the other rows (started once)."""
    if not AGENT:
        import subprocess
        import tempfile
        exe = os.environ.get("GOLDMINER_BIN") or os.path.join(
            os.path.dirname(os.environ.get("GOLDMINER_LIB", "build/x")), "goldminer")
        sock = os.path.join(tempfile.mkdtemp(prefix="gm-bench-"), "agent.sock")
        AGENT.update(proc=subprocess.Popen([exe, "node", "--cpus", "2", "--socket", sock,
                                            "--quiet"]), sock=sock)
        deadline = time.monotonic() + 30
        while not os.path.exists(sock) and time.monotonic() < deadline:
            time.sleep(0.02)
    return AGENT["sock"]


def make(which, ds, collate, batch, workers="2"):
    kw = dict(batch_size=batch, shuffle=True, num_workers=2, persistent_workers=True,
              collate_fn=collate)
    g = torch.Generator()
    g.manual_seed(1)
    if which == "torch":
        return TorchDL(ds, generator=g, **{k: v for k, v in kw.items() if v is not None})
    if workers == "auto":
        kw.update(num_workers="auto", max_workers=2, node=agent())
    return GmDL(ds, generator=g, seed=1, **{k: v for k, v in kw.items() if v is not None})


def tensors(obj):
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (tuple, list)):
        for v in obj:
            yield from tensors(v)


def epoch(dl, h=None, each=None):
    n = 0
    for b in dl:
        ts = list(tensors(b))
        n += ts[0].shape[0]
        for t in ts if h is not None else ():
            h.update(t.contiguous().numpy().tobytes())
        if each:
            each()
    return n


def cpu_s(pids, reaped=False):
    """{pid: CPU seconds} of each pid: the run time of every thread
    (/proc/PID/task/*/schedstat, in ns: the ticks of /proc/PID/stat are 10 ms,
    too coarse for an epoch of 0.2 s); reaped: with the cutime + cstime (ticks)
    of the children it reaped."""
    out = {}
    for p in pids:
        t = 0
        try:
            for tid in os.listdir("/proc/%d/task" % p):
                try:
                    with open("/proc/%d/task/%s/schedstat" % (p, tid)) as f:
                        t += int(f.read().split()[0])
                except OSError:
                    continue  # a thread that ended
            if reaped:
                with open("/proc/%d/stat" % p) as f:
                    st = f.read()
                v = st[st.rfind(")") + 2:].split()
                t += (int(v[13]) + int(v[14])) * 1e9 / os.sysconf("SC_CLK_TCK")
        except OSError:
            continue
        out[p] = t / 1e9
    return out


LOADERS = (("torch", "2"), ("goldminer", "2"), ("goldminer", "auto"))


def tree_cpu_s(key, pids):
    """The CPU seconds of a loader's processes (every thread of each): its live
    workers (and zygote); for "auto", the node agent too, with the workers it
    reaped (a shrink ends some); in-process, the workers this process reaped."""
    t = sum(cpu_s(pids).values())
    if key[1] == "auto":
        return t + sum(cpu_s([AGENT["proc"].pid], reaped=True).values())
    me = os.times()
    return t + me.children_user + me.children_system


def round_rates(ds, collate, batch, epochs, rnd):
    """One round: the three loaders made (persistent workers, the first epoch
    apart), then their timed epochs interleaved, epoch by epoch, the order
    reversed at each step (ABC CBA ABC ...; odd rounds start reversed), so that
    a shared machine's drift falls on all of them alike. {key: row}."""
    dls, rows, pids = {}, {}, {}
    before = set(children())
    for key in LOADERS:
        t0 = time.monotonic()
        dls[key] = make(key[0], ds, collate, batch, key[1])
        epoch(dls[key])
        rows[key] = {"loader": key[0], "workers": key[1], "first_epoch_s":
                     round(time.monotonic() - t0, 2), "n": 0, "s": 0.0, "cpu_w": 0.0,
                     "cpu_t": 0.0, "loads": []}
        if key[1] == "auto":  # the agent's children are the workers (and its zygote)
            pids[key] = children(pid=AGENT["proc"].pid)
        else:
            now = set(children())
            pids[key], before = sorted(now - before), now
    order = list(LOADERS) if rnd % 2 == 0 else list(LOADERS)[::-1]
    for e in range(epochs - 1):
        for key in (order if e % 2 == 0 else order[::-1]):
            r = rows[key]
            if key[1] == "auto":  # the agent may have started others since
                pids[key] = children(pid=AGENT["proc"].pid)
            me = os.getpid()
            w0, me0, t0 = tree_cpu_s(key, pids[key]), cpu_s([me])[me], time.monotonic()
            r["n"] += epoch(dls[key])
            r["s"] += time.monotonic() - t0
            r["cpu_t"] += cpu_s([me])[me] - me0
            if key[1] == "auto":  # and any it started during the epoch (all its CPU)
                pids[key] = sorted(set(pids[key]) | set(children(pid=AGENT["proc"].pid)))
            r["cpu_w"] += tree_cpu_s(key, pids[key]) - w0
            r["loads"].append(os.getloadavg()[0])
    for dl in dls.values():
        if hasattr(dl, "close"):
            dl.close()
    out = {}
    for key, r in rows.items():
        n, s = r.pop("n"), r.pop("s")
        cw, ct, loads = r.pop("cpu_w"), r.pop("cpu_t"), r.pop("loads")
        out[key] = dict(r, samples_per_s=n / s,
                        workers_cpu_us_per_sample=cw / n * 1e6,
                        trainer_cpu_us_per_sample=ct / n * 1e6,
                        # the CPU the loader's processes got (cores): what the
                        # scheduler gave them on a shared machine
                        cpu_share=(cw + ct) / s,
                        samples_per_cpu_s=n / max(cw + ct, 1e-9),
                        load=max(loads))
    return out


def children(workers_only=False, pid=None):
    """This process's (or pid's) children; workers_only: not goldminer's zygote (a
    loader of workers that holds no lease: the workers are what is killed)."""
    me, out = os.getpid() if pid is None else pid, []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    st = f.read()
            except OSError:
                continue
            if int(st[st.rfind(")") + 2:].split()[1]) == me and not (
                    workers_only and st[st.find("(") + 1:st.rfind(")")] == "gm-zygote"):
                out.append(int(d))
    return out


class Killer(threading.Thread):
    """SIGKILL one worker (a child of this process) every period seconds."""

    def __init__(self, period=0.2):
        super().__init__(daemon=True)
        self.period, self.stop, self.kills = period, threading.Event(), 0

    def run(self):
        k = 0
        while not self.stop.wait(self.period):
            kids = children(workers_only=True)
            if kids:
                try:
                    os.kill(kids[k % len(kids)], signal.SIGKILL)
                    self.kills += 1
                except OSError:
                    pass
                k += 1


def under_kills(which, ds, collate, batch, epochs):
    dl = make(which, ds, collate, batch)
    ref = hashlib.sha256()
    if which == "goldminer":
        ok = make(which, ds, collate, batch)
        for _ in range(epochs):
            epoch(ok, ref)
        ok.close()
    h, k = hashlib.sha256(), Killer()
    out = {"loader": which, "kill_every_ms": 200, "epochs": epochs}
    try:
        t0 = time.monotonic()
        for _ in range(epochs):  # the kills start once the first batch is there
            epoch(dl, h, each=lambda: k.is_alive() or k.start())
        out["seconds"] = round(time.monotonic() - t0, 2)
        out.update(completed=True, same_checksum=h.hexdigest() == ref.hexdigest()
                   if which == "goldminer" else None)
    except Exception as e:  # noqa: BLE001 - what torch's DataLoader raises
        out.update(completed=False, stopped_with="%s: %s" % (type(e).__name__,
                                                            str(e).splitlines()[0][:160]))
    k.stop.set()
    if k.is_alive():
        k.join()
    out["kills"] = k.kills
    if hasattr(dl, "close"):
        dl.close()
    return out


def median(v):
    v = sorted(v)
    return (v[(len(v) - 1) // 2] + v[len(v) // 2]) / 2


def mem_kb(pid, key):
    """VmRSS (status), or Pss / Private_Dirty / Private_Clean (smaps_rollup), kB."""
    try:
        path = "/proc/%d/%s" % (pid, "status" if key == "VmRSS" else "smaps_rollup")
        with open(path) as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def memory(which, ds, collate, batch):
    dl, seen = make(which, ds, collate, batch), {}

    def look():
        if not seen:
            kids = children()
            seen.update(trainer_rss_mb=mem_kb(os.getpid(), "VmRSS") / 1024,
                        trainer_pss_mb=mem_kb(os.getpid(), "Pss") / 1024,
                        processes=len(kids),  # goldminer's: its zygote too
                        workers_rss_mb=sum(mem_kb(p, "VmRSS") for p in kids) / 1024,
                        workers_pss_mb=sum(mem_kb(p, "Pss") for p in kids) / 1024)
            # a forked process's PSS depends on whom it shares pages with (torch's
            # workers: the trainer; goldminer's: the zygote), so the sum over the
            # trainer and every process is the one to compare; a worker's own
            # pages (private: USS) say what one more worker costs
            seen["total_pss_mb"] = seen["trainer_pss_mb"] + seen["workers_pss_mb"]
            uss = [mem_kb(p, "Private_Dirty") + mem_kb(p, "Private_Clean") for p in
                   children(workers_only=True)]
            seen["worker_uss_mb"] = median(uss) / 1024 if uss else 0
    n = [0]

    def each():
        n[0] += 1
        # from batch 10 on, once both workers run (goldminer's start from the zygote
        # once it has loaded: the second may come later than batch 10)
        if n[0] >= 10 and not seen and len(children(workers_only=True)) >= 2:
            look()
    epoch(dl, each=each)
    if hasattr(dl, "close"):
        dl.close()
    return dict({"loader": which}, **{k: round(v, 1) for k, v in seen.items()})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kind", choices=("text", "images"))
    ap.add_argument("--root", default=os.environ.get("PHOTOS", "/var/tmp/goldminer-photos"))
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--limit", type=int, default=600)
    a = ap.parse_args()
    ds, collate, batch = dataset(a.kind, a.root, a.limit)
    runs = {}
    for rnd in range(a.rounds):
        row = round_rates(ds, collate, batch, a.epochs, rnd)
        for key, r in row.items():
            ref = row[("torch", "2")]
            r["vs_torch"] = r["samples_per_s"] / ref["samples_per_s"]
            r["vs_torch_per_cpu"] = r["samples_per_cpu_s"] / ref["samples_per_cpu_s"]
            runs.setdefault(key, []).append(r)
    for key, rs in runs.items():
        r = dict(rs[0])
        for f in ("samples_per_s", "vs_torch", "vs_torch_per_cpu", "samples_per_cpu_s",
                  "cpu_share", "workers_cpu_us_per_sample", "trainer_cpu_us_per_sample",
                  "first_epoch_s", "load"):
            r[f] = round(median([x[f] for x in rs]), 3 if f.startswith(("vs_", "cpu_"))
                         else 1)
        r.update(kind=a.kind, samples=len(ds), batch=batch, rounds=len(rs),
                 timed_epochs=a.epochs - 1, load_max=round(max(x["load"] for x in rs), 1),
                 vs_torch_rounds=[round(x["vs_torch"], 3) for x in rs])
        print(json.dumps(dict(r, what="rate")), flush=True)
    if AGENT:
        AGENT["proc"].terminate()
        AGENT["proc"].wait()
    for which in ("goldminer", "torch"):
        print(json.dumps(dict(under_kills(which, ds, collate, batch, a.epochs), what="kill",
                              kind=a.kind)), flush=True)
    for which in ("goldminer", "torch"):
        print(json.dumps(dict(memory(which, ds, collate, batch), what="memory",
                              kind=a.kind)), flush=True)


if __name__ == "__main__":
    main()
