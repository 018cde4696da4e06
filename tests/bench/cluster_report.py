#!/usr/bin/env python3
"""cluster_report.py - the figures of tests/bench/bench-cluster.sh (the cluster
experiment), from its raw files in OUT; standard library only.

Reads OUT/scenario.tsv, raw.tsv (one row per run and job: the run's start, the
trainer's exit, its pid and bench's JSON line), usage.txt (each host's cgroup CPU
ns at a run's start and end), cal.tsv (the calibration) and status-RUN-MODE.txt
(the agents' --status every 0.5 s). Writes jobs.tsv, runs.tsv, costs.tsv,
sim-*.tsv, figures.tsv (one row: the scenario's figures) and summary.txt, and
prints the summary. Runs `goldminer sim --scenario` (G) on the scenario with its
committed costs and with the costs measured in this run. A host is CPU-poor
below GM_NODE_FED_CORES (0.5 cores); the others are lenders.

With --family OUT: the figures.tsv of every scenario folder of OUT, per seed
(tuning or held out) and in total.

Usage: cluster_report.py OUT GOLDMINER PHOTOS_COUNT [SEED ROLE]
       cluster_report.py --family OUT
"""
import json
import os
import statistics
import subprocess
import sys

POOR_CORES = 0.5  # GM_NODE_FED_CORES (include/goldminer/node.h)
FIG_COLS = ("seed", "role", "jobs", "feedable", "feedable_cal", "poor_util_off", "poor_util_on", "jct_bound_off",
            "jct_bound_on", "lender_loss_pct", "lender_worst_pct", "sim_err_mean_pct",
            "sim_err_worst_pct", "slower_on")
SLOWER = 1.05  # a job "slower with lending on": its JCT on over off above this (runs' noise: 2-4%)


def family(out):
    """The family's report: each scenario's figures.tsv, per seed and in total."""
    rows = []
    for d in sorted(os.listdir(out)):
        p = os.path.join(out, d, "figures.tsv")
        if os.path.exists(p):
            hdr, vals = [l.rstrip("\n").split("\t") for l in open(p)][:2]
            rows.append(dict(zip(hdr, vals)))
    if not rows:
        print(f"cluster: no scenario of {out} has figures (figures.tsv)")
        return 1
    print("cluster family: per scenario (targets: poor hosts' GPU use >= 0.9 on, avg JCT "
          "<= 1.10x the bound on, lenders' own loss <= 5%, simulator per-job error <= 15%, "
          f"no job slower with lending on: 'slower', JCT on over off above {SLOWER})")
    print(f"{'seed':>6} {'role':>9} {'jobs':>5} {'feedable drawn/cal':>18} {'poor util off/on':>17} "
          f"{'JCT/bound off/on':>17} {'lender loss':>12} {'worst':>7} {'sim err mean':>13} "
          f"{'worst':>7} {'slower':>6}")
    for r in rows:
        print(f"{r['seed']:>6} {r['role']:>9} {r['jobs']:>5} {float(r.get('feedable', 'nan')):13.2f}/"
              f"{float(r.get('feedable_cal', 'nan')):.2f} "
              f"{float(r['poor_util_off']):8.3f}/{float(r['poor_util_on']):.3f} "
              f"{float(r['jct_bound_off']):8.2f}x/{float(r['jct_bound_on']):.2f}x "
              f"{float(r['lender_loss_pct']):+11.1f}% {float(r['lender_worst_pct']):+6.1f}% "
              f"{float(r['sim_err_mean_pct']):12.1f}% {float(r['sim_err_worst_pct']):6.1f}% "
              f"{r.get('slower_on', '?'):>6}")
    for role in sorted({r["role"] for r in rows}) + ["all"]:
        rs = [r for r in rows if role in ("all", r["role"])]

        def m(k):
            return sum(float(r[k]) for r in rs) / len(rs)

        def w(k, f=max):
            return f(float(r[k]) for r in rs)
        print(f"total {role} ({len(rs)} scenarios): poor hosts' GPU use on {m('poor_util_on'):.3f}"
              f" (least {w('poor_util_on', min):.3f}; off {m('poor_util_off'):.3f}), avg JCT "
              f"{m('jct_bound_on'):.2f}x the bound on (worst {w('jct_bound_on'):.2f}x; off "
              f"{m('jct_bound_off'):.2f}x), lenders' own loss {m('lender_loss_pct'):+.1f}% "
              f"(worst job {w('lender_worst_pct'):+.1f}%), simulator per-job error "
              f"{m('sim_err_mean_pct'):.1f}% mean, {w('sim_err_worst_pct'):.1f}% worst; "
              f"{sum(int(r.get('slower_on', 0)) for r in rs)} job(s) slower with lending on")
    return 0


if sys.argv[1] == "--family":
    sys.exit(family(sys.argv[2]))
OUT, G = sys.argv[1], sys.argv[2]
SEED, ROLE = (sys.argv[4], sys.argv[5]) if len(sys.argv) > 5 else ("-", "fixed")


def scenario(path):
    nodes, cores, jobs, costs = [], {}, [], {}
    for line in open(path):
        f = line.split("#")[0].rstrip("\n").split("\t")
        if f[0] == "node":
            nodes.append(f[1])
            cores[f[1]] = float(f[2])
        elif f[0] == "job":
            jobs.append(dict(name=f[1], home=f[2], submit=float(f[3]), images=int(f[4]),
                             rate=float(f[5])))
        elif f[0] == "cost":
            costs[f[1]] = float(f[2])
    return nodes, cores, jobs, costs


NODES, CORES, JOBS, COSTS = scenario(os.path.join(OUT, "scenario.tsv"))
POOR = [n for n in NODES if CORES[n] < POOR_CORES] or NODES[:1]
LENDERS = [n for n in NODES if n not in POOR]
POOR_IX = {str(NODES.index(n) + 1) for n in POOR}  # host numbers in the status files
BYNAME = {j["name"]: j for j in JOBS}


def remote_samples(status_path):
    """pid -> the most remote_samples the home agent reported for that job."""
    got = {}
    if not os.path.exists(status_path):
        return got
    for line in open(status_path):
        try:
            _, _, js = line.split(" ", 2)
            st = json.loads(js)
        except ValueError:
            continue
        for j in st.get("job", []):
            pid = j.get("pid")
            got[pid] = max(got.get(pid, 0), j.get("remote_samples", 0))
    return got


# per run and job
rows = []
for line in open(os.path.join(OUT, "raw.tsv")):
    f = line.rstrip("\n").split("\t")
    run, mode, name, home, sub, img, rate, t0, end, pid = f[:10]
    js = json.loads(f[10]) if len(f) > 10 and f[10].startswith("{") else {}
    if not end or not js:
        print(f"cluster: run {run} {mode}: job {name} has no result; left out")
        continue
    rem = remote_samples(os.path.join(OUT, f"status-{run}-{mode}.txt")).get(int(pid), 0)
    jct = float(end) - float(t0) - float(sub)
    rows.append(dict(run=int(run), mode=mode, name=name, home=home, submit=float(sub),
                     images=js["images"], rate=float(rate), jct=jct,
                     bound=js["images"] / float(rate) if float(rate) > 0 else 0.0,
                     img_per_s=js["img_per_s"], remote=rem,
                     start=jct - js["wall_s"] + js.get("open_s", 0)))
with open(os.path.join(OUT, "jobs.tsv"), "w") as f:
    f.write("run\tlending\tjob\thome\tsubmit_s\timages\trate_img_s\tjct_s\tbound_s"
            "\timg_per_s\tremote_images\n")
    for r in rows:
        f.write(f"{r['run']}\t{r['mode']}\t{r['name']}\t{r['home']}\t{r['submit']:g}\t"
                f"{r['images']}\t{r['rate']:g}\t{r['jct']:.2f}\t{r['bound']:.2f}\t"
                f"{r['img_per_s']:.1f}\t{r['remote']}\n")


def util(rs):
    """delivered / demanded, time-weighted over each job's life: sum of bounds over
    sum of JCTs (jobs with a rate)."""
    rs = [r for r in rs if r["rate"] > 0]
    return sum(r["bound"] for r in rs) / sum(r["jct"] for r in rs) if rs else 0.0


def avg(xs):
    return sum(xs) / len(xs) if xs else 0.0


runs = sorted({(r["run"], r["mode"]) for r in rows})
with open(os.path.join(OUT, "runs.tsv"), "w") as f:
    f.write("run\tlending\tavg_jct_s\tavg_jct_poor_s\tbound_avg_jct_s\tgpu_util"
            "\tgpu_util_poor\n")
    for run, mode in runs:
        rs = [r for r in rows if (r["run"], r["mode"]) == (run, mode)]
        ra = [r for r in rs if r["home"] in POOR]
        f.write(f"{run}\t{mode}\t{avg([r['jct'] for r in rs]):.2f}\t"
                f"{avg([r['jct'] for r in ra]):.2f}\t{avg([r['bound'] for r in rs]):.2f}\t"
                f"{util(rs):.3f}\t{util(ra):.3f}\n")

# per-image CPU costs from the hosts' CPU time (usage.txt: run mode t0 t1 u0[n] u1[n])
use = {}
NH = len(NODES)
for line in open(os.path.join(OUT, "usage.txt")):
    f = line.split()
    u0, u1 = [float(x) for x in f[4:4 + NH]], [float(x) for x in f[4 + NH:4 + 2 * NH]]
    use[(int(f[0]), f[1])] = [(b - a) / 1e9 for a, b in zip(u0, u1)]
costs = {}
off = [k for k in use if k[1] == "off"]
on = [k for k in use if k[1] == "on"]


def images_on(k, node, remote=False):
    return sum(r["remote"] if remote else r["images"] for r in rows
               if (r["run"], r["mode"]) == k and r["home"] == node)


if off:
    cpu = sum(sum(use[k]) for k in off)
    img = sum(images_on(k, n) for k in off for n in NODES)
    costs["local_us"] = 1e6 * cpu / img
    pi = [NODES.index(n) for n in POOR]
    img_poor = sum(images_on(k, n) for k in off for n in POOR)
    if img_poor:
        costs["local_us_poor"] = 1e6 * sum(use[k][i] for k in off for i in pi) / img_poor
# the remote costs from the calibration (cal.tsv): a greedy trainer on A alone,
# lending off (A's CPU per local image) then on (B and C idle but for what they
# lend: their CPU less their idle agents' over the same time, per lent image)
# the calibration's pairs (and short and lender runs), in order
cal = {"off": [], "on": [], "short": [], "lender": []}
if os.path.exists(os.path.join(OUT, "cal.tsv")):
    for line in list(open(os.path.join(OUT, "cal.tsv")))[1:]:
        f = line.split()
        if f and f[0] in cal:
            cal[f[0]].append(dict(images=int(f[1]), remote=int(f[2]), a=float(f[3]),
                                  b=float(f[4]), c=float(f[5]), wall=float(f[6]),
                                  workers=int(f[7]) if len(f) > 7 else 0,
                                  start=float(f[8]) if len(f) > 8 and f[8] != "-" else None,
                                  first_remote=float(f[9]) if len(f) > 9 and f[9] != "-"
                                  else None,
                                  lead_cpu=float(f[10]) if len(f) > 10 and f[10] != "-"
                                  else None))
shorts = cal["short"] + [None] * max(0, len(cal["off"]) - len(cal["short"]))
kept = [(co, cn, cs) for co, cn, cs in zip(cal["off"], cal["on"], shorts)
        if co["images"] and cn["remote"] > 0]
# the CPU a lender's paced job spends ahead of its consumer, as its agent reads
# it (bench-cluster.sh, calibrate lender): the median over the runs that read one
leads = [c["lead_cpu"] for c in cal["lender"] if c["lead_cpu"] is not None]
pairs = [(co, cn) for co, cn, _ in kept]
if pairs:
    # each cost from each pair, then its median over the pairs (bench-cluster.sh:
    # one pair's local_us drifts several percent between invocations)
    per = {}
    for co, cn, cs in kept:
        Lc = co["a"] / co["images"]
        idle = (co["b"] + co["c"]) / co["wall"]  # B's and C's agents doing nothing, per s
        got = {"local_us_cal": 1e6 * Lc,
               "remote_home_us": 1e6 * (cn["a"] - (cn["images"] - cn["remote"]) * Lc) / cn["remote"],
               "remote_lender_us": 1e6 * (cn["b"] + cn["c"] - idle * cn["wall"]) / cn["remote"]}
        if cs and 0 < cs["images"] < co["images"]:
            # A's CPU, off, for two image counts: a job's own cost (its
            # processes' starts, its ring's pages; job_cpu_s) and its images'
            # apart, A's agent's idle CPU (one of B's and C's) taken out of
            # both. Reported, not taken by the prediction: over three pairs
            # it read 0.10-0.42 s (a run's CPU drifts several percent between
            # runs, and the difference of two runs carries it), and the
            # prediction with it was no closer than with local_us_cal alone.
            a_off, a_short = co["a"] - idle / 2 * co["wall"], cs["a"] - idle / 2 * cs["wall"]
            u = (a_off - a_short) / (co["images"] - cs["images"])
            got["image_us_cal"] = 1e6 * u
            got["job_cpu_s_cal"] = a_off - u * co["images"]
        # the same for A's greedy trainer (reported: its ring never fills; the
        # prediction takes the paced one's on B, lead_cpu_s_cal)
        if co["lead_cpu"] is not None:
            got["lead_cpu_s_cal_a"] = co["lead_cpu"]
        if cn["workers"] > 0:  # what one lent worker sent, lenders idle, a greedy trainer
            got["remote_worker_img_s_cal"] = cn["remote"] / cn["wall"] / cn["workers"]
        # start-up: launch to first image (both runs), first image to first
        # remote sample (lending on: the first ask, a lent worker's start)
        if co["start"] is not None and cn["start"] is not None:
            got["start_s_cal"] = (co["start"] + cn["start"]) / 2
        if cn["start"] is not None and cn["first_remote"] is not None:
            got["remote_start_s_cal"] = max(0.0, cn["first_remote"] - cn["start"])
        for k, v in got.items():
            per.setdefault(k, []).append(v)
    if leads:
        per["lead_cpu_s_cal"] = leads
    for k, v in per.items():
        costs[k] = statistics.median(v)
    # A's CPU per image: the least over the pairs. What other work on the
    # machine does to a run only adds to its CPU per image (its caches and
    # cores shared), never takes from it: bc33's three pairs read 464, 522 and
    # 495 us, its poor hosts 474, and the median put a 0.25-core host's job
    # +15.6% off (bench-cluster.sh's scale_rates takes the least too).
    costs["local_us_cal"] = min(per["local_us_cal"])
    off_r = statistics.median(co["images"] / co["wall"] for co, _ in pairs)
    on_r = statistics.median(cn["images"] / cn["wall"] for _, cn in pairs)
    co, cn = pairs[-1]
    spread = (f"; local_us_cal over the {len(pairs)} pairs "
              f"{min(per['local_us_cal']):.0f}-{max(per['local_us_cal']):.0f}, the least taken"
              if len(pairs) > 1 else "")
    say_cal = (f"calibration (greedy trainer on A alone): lending off {off_r:.0f}"
               f" img/s, on {on_r:.0f} img/s (medians) with {cn['remote']} of "
               f"{cn['images']} images remote, {cn['workers'] or '?'} remote workers at most"
               f" (the last pair){spread}")
elif on and "local_us" in costs:
    # no remote images in the calibration: the lending-on runs instead (the poor
    # hosts' CPU less their local images at local_us; the lenders' less their own)
    L = costs["local_us"] / 1e6
    pi = [NODES.index(n) for n in POOR]
    li = [NODES.index(n) for n in LENDERS]
    remA = sum(images_on(k, n, True) for k in on for n in POOR)
    if remA > 0:
        homecpu = sum(use[k][i] for k in on for i in pi) - L * sum(
            images_on(k, n) - images_on(k, n, True) for k in on for n in POOR)
        lendcpu = sum(use[k][i] for k in on for i in li) - L * sum(
            images_on(k, n) for k in on for n in LENDERS)
        costs["remote_home_us"] = 1e6 * homecpu / remA
        costs["remote_lender_us"] = 1e6 * lendcpu / remA
    say_cal = ("calibration: no remote images counted; remote costs from the lending-on "
               f"runs ({remA} remote images)")
else:
    say_cal = "calibration: no remote images (no remote costs measured)"
# what one lent worker sends in the lending-on runs: between two polls of the
# home's --status, the remote images a job fed by remote workers only (no local
# worker) received over the remote-worker-seconds it held, pooled over the runs,
# counting only the polls where its trainer waited (stall_ratio above the
# agent's 5%: the workers, not the trainer, set the pace); a job its workers
# satisfy leaves them idle (no batch free) and would lower the figure. With
# under 2 remote-worker-seconds of those, every poll (a lower bound).
STALL = 0.05
got, held, got_all, held_all = 0, 0.0, 0, 0.0
for k in on:
    path = os.path.join(OUT, f"status-{k[0]}-on.txt")
    prev = {}
    for line in open(path) if os.path.exists(path) else []:
        h, t, js = line.split(" ", 2)
        if h not in POOR_IX:
            continue
        for j in json.loads(js).get("job", []):
            now = (float(t), j.get("remote_samples", 0), j.get("remote_workers", 0),
                   j.get("workers", 1))
            p = prev.get(j["pid"])
            if p and p[2] > 0 and p[3] == 0 and now[2] > 0:
                got_all += now[1] - p[1]
                held_all += (now[0] - p[0]) * p[2]
                if j.get("stall_ratio", 0) > STALL:
                    got += now[1] - p[1]
                    held += (now[0] - p[0]) * p[2]
            prev[j["pid"]] = now
if held < 2:
    got, held = got_all, held_all
if held > 0:
    costs["remote_worker_img_s"] = got / held
    costs["remote_worker_s"] = held
    costs["remote_worker_img_s_all"] = got_all / held_all

# the CPU a lender's job's workers spend ahead of its consumer, as its agent's
# readings count it, in this scenario's own runs: per job, a line through its
# agent's readings (its workers' CPU s against its local samples), at no
# sample; the median over the lenders' jobs with three distinct readings or more
reads = {}
for k in runs:
    path = os.path.join(OUT, f"status-{k[0]}-{k[1]}.txt")
    for line in open(path) if os.path.exists(path) else []:
        h, t, js = line.split(" ", 2)
        try:
            jobs = json.loads(js).get("job", [])
        except ValueError:
            continue
        for j in jobs if h not in POOR_IX else []:  # a lender's (where it counts)
            if j.get("local_samples", 0) > 0 and "worker_cpu_s" in j:
                reads.setdefault((k, h, j["pid"]), set()).add(
                    (j["local_samples"], j["worker_cpu_s"]))


def intercept(pts):
    n = len(pts)
    sx, sy = sum(p[0] for p in pts), sum(p[1] for p in pts)
    sxx, sxy = sum(p[0] * p[0] for p in pts), sum(p[0] * p[1] for p in pts)
    d = n * sxx - sx * sx
    return (sy * sxx - sx * sxy) / d if n >= 3 and d > 0 else None


fits = [v for v in (intercept(sorted(p)) for p in reads.values()) if v is not None]
if fits:
    costs["lead_cpu_s"] = statistics.median(fits)

# start-up: from a trainer's launch to its first image (process start, dataset
# open, attach): its JCT less the time bench's clock saw it consuming
if rows:
    costs["start_s"] = statistics.mean(r["start"] for r in rows)
with open(os.path.join(OUT, "costs.tsv"), "w") as f:
    f.write("# per-image CPU costs measured in this run (microseconds of CPU per image)\n")
    for k, v in costs.items():
        f.write(f"cost\t{k}\t{v:.1f}\n")


SECONDS = ("start_s", "remote_start_s", "job_cpu_s", "lead_cpu_s")


def simulate(tag, cost):
    """goldminer sim on the scenario with these costs: name -> JCT, and the summaries."""
    path = os.path.join(OUT, f"scenario-{tag}.tsv")
    done = set()
    with open(os.path.join(OUT, "scenario.tsv")) as src, open(path, "w") as dst:
        for line in src:
            f = line.split("\t")
            if f[0] == "cost" and f[1] in cost:
                line = f"cost\t{f[1]}\t{cost[f[1]]:.{3 if f[1] in SECONDS else 1}f}\n"
                done.add(f[1])
            dst.write(line)
        for k in ("local_us", "remote_home_us", "remote_lender_us", "remote_worker_img_s",
                  "start_s", "remote_start_s", "job_cpu_s", "lead_cpu_s"):
            if k in cost and k not in done:
                dst.write(f"cost\t{k}\t{cost[k]:.{3 if k in SECONDS else 1}f}\n")
    out, jct = {}, {}
    for mode in ("off", "on"):
        d = os.path.join(OUT, f"sim-{tag}-{mode}")
        p = subprocess.run([G, "sim", "--scenario", path, "--lending", mode, "--out", d],
                           capture_output=True, text=True)
        if p.returncode:
            print(f"cluster: goldminer sim --scenario {path} --lending {mode} failed:\n{p.stderr}")
            return None, None
        out[mode] = json.loads(p.stdout.strip().splitlines()[-1])
        hdr, *body = [l.rstrip("\n").split("\t") for l in open(os.path.join(d, "jobs.tsv"))]
        for b in body:
            jct[(mode, b[hdr.index("job")])] = float(b[hdr.index("jct_s")])
    return out, jct


lines = []
say = lines.append
load = open(os.path.join(OUT, "load.txt")).read().strip() if os.path.exists(
    os.path.join(OUT, "load.txt")) else "?"
say(f"cluster experiment (seed {SEED}, {ROLE}): {len(JOBS)} jobs on "
    f"{', '.join(f'{n} {CORES[n]:g}' for n in NODES)} cores (CPU-poor: {', '.join(POOR)}); "
    f"{len([1 for k in runs if k[1] == 'off'])} run(s) lending off, "
    f"{len([1 for k in runs if k[1] == 'on'])} on; machine load at the end: {load}")
say(f"{'lending':>8} {'avg JCT s':>14} {'poor jobs s':>11} {'bound s':>8} {'util':>6} "
    f"{'util poor':>9}  (mean over runs; per run)")
per_mode = {}
for mode in ("off", "on"):
    ks = [k for k in runs if k[1] == mode]
    if not ks:
        continue
    rr = [[r for r in rows if (r["run"], r["mode"]) == k] for k in ks]
    a = [avg([r["jct"] for r in rs]) for rs in rr]
    aa = [avg([r["jct"] for r in rs if r["home"] in POOR]) for rs in rr]
    per_mode[mode] = dict(avg=avg(a), avgA=avg(aa), bound=avg([avg([r["bound"] for r in rs])
                                                               for rs in rr]),
                          util=avg([util(rs) for rs in rr]),
                          utilA=avg([util([r for r in rs if r["home"] in POOR]) for rs in rr]))
    m = per_mode[mode]
    say(f"{mode:>8} {m['avg']:14.1f} {m['avgA']:11.1f} {m['bound']:8.1f} {m['util']:6.3f} "
        f"{m['utilA']:9.3f}  ({', '.join(f'{x:.1f}' for x in a)})")
fig = dict(seed=SEED, role=ROLE, jobs=len(JOBS))
for mode in ("off", "on"):
    m = per_mode.get(mode)
    fig[f"poor_util_{mode}"] = f"{m['utilA']:.4f}" if m else "nan"
    fig[f"jct_bound_{mode}"] = f"{m['avg'] / m['bound']:.4f}" if m and m["bound"] else "nan"
if "off" in per_mode and "on" in per_mode:
    o, n = per_mode["off"], per_mode["on"]
    say(f"lending on vs off: average JCT {o['avg'] / n['avg']:.2f}x faster "
        f"(the poor hosts' jobs {o['avgA'] / n['avgA']:.2f}x); on is "
        f"{n['avg'] / n['bound']:.2f}x the bound (off {o['avg'] / o['bound']:.2f}x); the poor "
        f"hosts' GPU utilisation {o['utilA']:.2f} -> {n['utilA']:.2f} (target >= 0.9)")
    so = sn = 0.0
    worst_loss = float("-inf")
    for nm in LENDERS:
        for j in [j for j in JOBS if j["home"] == nm]:
            jo = avg([r["jct"] for r in rows if r["name"] == j["name"] and r["mode"] == "off"])
            jn = avg([r["jct"] for r in rows if r["name"] == j["name"] and r["mode"] == "on"])
            if jo > 0 and jn > 0:
                so, sn = so + jo, sn + jn
                worst_loss = max(worst_loss, 100 * (jn - jo) / jo)
                say(f"  {nm}'s job {j['name']}: {jo:.1f} s off, {jn:.1f} s on "
                    f"({100 * (jn - jo) / jo:+.1f}%; target within +5%)")
    slower = []
    for j in JOBS:  # acceptance: lending never makes a job slower than lending off
        jo = avg([r["jct"] for r in rows if r["name"] == j["name"] and r["mode"] == "off"])
        jn = avg([r["jct"] for r in rows if r["name"] == j["name"] and r["mode"] == "on"])
        if jo > 0 and jn > jo * SLOWER:
            slower.append(f"{j['name']} {jo:.1f} -> {jn:.1f} s")
    fig["slower_on"] = str(len(slower))
    say(f"  jobs slower with lending on (JCT on over off above {SLOWER}): "
        f"{', '.join(slower) if slower else 'none'}")
    if so > 0:
        fig["lender_loss_pct"] = f"{100 * (sn / so - 1):.2f}"
        fig["lender_worst_pct"] = f"{worst_loss:.2f}"
        say(f"  the lenders' own jobs: {100 * (sn / so - 1):+.1f}% in all (JCT on over off), "
            f"worst {worst_loss:+.1f}%")
say(say_cal)
say("measured costs (us of CPU per image; start_s* in s, job_cpu_s* in s of CPU, "
    "remote_worker_img_s img/s): " +
    ", ".join(f"{k} {v:.{2 if 'start_s' in k or 'cpu_s' in k else 0}f}" for k, v in costs.items()) +
    "; committed in the scenario: " + ", ".join(f"{k} {v:g}" for k, v in COSTS.items()))
real = {}
for r in rows:
    real.setdefault((r["mode"], r["name"]), []).append(r["jct"])
# The simulator's prediction: with the costs of this bench's one calibration
# (before any scenario ran; the same for every scenario of the invocation, never
# fitted to a scenario's own runs) where it measured them, else the committed
# ones. Beside it, for reference: the committed costs alone, and the costs
# fitted to this scenario's own runs ("measured": not a prediction).
calibrated = dict(COSTS)
for k, ck in (("local_us", "local_us_cal"), ("remote_home_us", "remote_home_us"),
              ("remote_lender_us", "remote_lender_us"),
              ("remote_worker_img_s", "remote_worker_img_s_cal"), ("start_s", "start_s_cal"),
              ("remote_start_s", "remote_start_s_cal"), ("lead_cpu_s", "lead_cpu_s_cal")):
    if ck in costs and "local_us_cal" in costs:
        calibrated[k] = costs[ck]
sims = [("calibrated", calibrated), ("committed", COSTS)]
if {"local_us", "remote_home_us", "remote_lender_us"} <= set(costs):
    sims.append(("measured", costs))
for tag, cost in sims:
    summ, jct = simulate(tag, cost)
    if not summ:
        continue
    say(f"sim ({tag} costs{': the prediction' if tag == 'calibrated' else ''}) vs measured "
        f"JCT per job (target within 15%):")
    say(f"{'job':>6} {'home':>5} {'rate':>6} " + " ".join(
        f"{'real ' + m:>9} {'sim ' + m:>8} {'err':>7}" for m in ("off", "on")))
    worst, errs = 0.0, []
    with open(os.path.join(OUT, f"sim-{tag}.tsv"), "w") as f:
        f.write("job\thome\tlending\treal_jct_s\tsim_jct_s\terror_pct\n")
        for j in JOBS:
            line = f"{j['name']:>6} {j['home']:>5} {j['rate']:6.0f} "
            for m in ("off", "on"):
                rj = avg(real.get((m, j["name"]), []))
                sj = jct.get((m, j["name"]), 0.0)
                e = 100 * (sj - rj) / rj if rj > 0 else 0.0
                worst = max(worst, abs(e))
                if rj > 0:
                    errs.append(abs(e))
                line += f"{rj:9.1f} {sj:8.1f} {e:+6.1f}% "
                f.write(f"{j['name']}\t{j['home']}\t{m}\t{rj:.2f}\t{sj:.2f}\t{e:.1f}\n")
            say(line)
    say(f"  sim avg JCT off {summ['off']['avg_jct']:.1f} s, on {summ['on']['avg_jct']:.1f} s "
        f"({summ['off']['avg_jct'] / summ['on']['avg_jct']:.2f}x), util "
        f"{summ['off']['gpu_util']:.3f} -> {summ['on']['gpu_util']:.3f}; worst per-job error "
        f"{worst:.1f}%, mean {avg(errs):.1f}%")
    if tag == "committed":  # the scenario's own costs (as drawn): what its CPUs can feed
        fig["feedable"] = f"{summ['on'].get('feedable', float('nan')):.4f}"
    if tag == "calibrated":  # the one calibration's costs: the prediction judged
        # and what the CPUs can feed at the costs this machine measured (a lender's
        # CPU per lent image was 521-775 us in seed 107's runs, not the 385 drawn:
        # 0.82 feedable, under the 0.9 target, where the drawn costs said 1.00)
        fig["feedable_cal"] = f"{summ['on'].get('feedable', float('nan')):.4f}"
        fig["sim_err_mean_pct"] = f"{avg(errs):.2f}"
        fig["sim_err_worst_pct"] = f"{worst:.2f}"
with open(os.path.join(OUT, "figures.tsv"), "w") as f:
    f.write("\t".join(FIG_COLS) + "\n")
    f.write("\t".join(str(fig.get(k, "nan")) for k in FIG_COLS) + "\n")
text = "\n".join(lines) + "\n"
open(os.path.join(OUT, "summary.txt"), "w").write(text)
print(text, end="")
