#!/usr/bin/env python3
"""cluster_report.py - the figures of tests/bench/bench-cluster.sh (the cluster
experiment), from its raw files in OUT; standard library only.

Reads OUT/scenario.tsv, raw.tsv (one row per run and job: the run's start, the
trainer's exit, its pid and bench's JSON line), usage.txt (each host's cgroup CPU
ns at a run's start and end) and status-RUN-MODE.txt (the agents' --status every
0.5 s). Writes jobs.tsv, runs.tsv, costs.tsv, sim-*.tsv and summary.txt, and
prints the summary. Runs `goldminer sim --scenario` (G) on the scenario with its
committed costs and with the costs measured in this run.

Usage: cluster_report.py OUT GOLDMINER PHOTOS_COUNT
"""
import json
import os
import statistics
import subprocess
import sys

OUT, G = sys.argv[1], sys.argv[2]


def scenario(path):
    nodes, jobs, costs = [], [], {}
    for line in open(path):
        f = line.split("#")[0].rstrip("\n").split("\t")
        if f[0] == "node":
            nodes.append(f[1])
        elif f[0] == "job":
            jobs.append(dict(name=f[1], home=f[2], submit=float(f[3]), images=int(f[4]),
                             rate=float(f[5])))
        elif f[0] == "cost":
            costs[f[1]] = float(f[2])
    return nodes, jobs, costs


NODES, JOBS, COSTS = scenario(os.path.join(OUT, "scenario.tsv"))
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
homeA = NODES[0]
with open(os.path.join(OUT, "runs.tsv"), "w") as f:
    f.write("run\tlending\tavg_jct_s\tavg_jct_A_s\tbound_avg_jct_s\tgpu_util\tgpu_util_A\n")
    for run, mode in runs:
        rs = [r for r in rows if (r["run"], r["mode"]) == (run, mode)]
        ra = [r for r in rs if r["home"] == homeA]
        f.write(f"{run}\t{mode}\t{avg([r['jct'] for r in rs]):.2f}\t"
                f"{avg([r['jct'] for r in ra]):.2f}\t{avg([r['bound'] for r in rs]):.2f}\t"
                f"{util(rs):.3f}\t{util(ra):.3f}\n")

# per-image CPU costs from the hosts' CPU time (usage.txt: run mode t0 t1 u0[3] u1[3])
use = {}
for line in open(os.path.join(OUT, "usage.txt")):
    f = line.split()
    u0, u1 = [float(x) for x in f[4:7]], [float(x) for x in f[7:10]]
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
    costs["local_us_A"] = 1e6 * sum(use[k][0] for k in off) / sum(images_on(k, homeA) for k in off)
# the remote costs from the calibration (cal.tsv): a greedy trainer on A alone,
# lending off (A's CPU per local image) then on (B and C idle but for what they
# lend: their CPU less their idle agents' over the same time, per lent image)
cal = {}
if os.path.exists(os.path.join(OUT, "cal.tsv")):
    for line in list(open(os.path.join(OUT, "cal.tsv")))[1:]:
        f = line.split()
        cal[f[0]] = dict(images=int(f[1]), remote=int(f[2]), a=float(f[3]), b=float(f[4]),
                         c=float(f[5]), wall=float(f[6]), workers=int(f[7]) if len(f) > 7 else 0)
if "off" in cal and "on" in cal and cal["off"]["images"] and cal["on"]["remote"] > 0:
    co, cn = cal["off"], cal["on"]
    Lc = co["a"] / co["images"]
    costs["local_us_cal"] = 1e6 * Lc
    costs["remote_home_us"] = 1e6 * (cn["a"] - (cn["images"] - cn["remote"]) * Lc) / cn["remote"]
    idle = (co["b"] + co["c"]) / co["wall"]  # B's and C's agents doing nothing, per s
    costs["remote_lender_us"] = 1e6 * (cn["b"] + cn["c"] - idle * cn["wall"]) / cn["remote"]
    if cn["workers"] > 0:  # what one lent worker sent, lenders idle, a greedy trainer
        costs["remote_worker_img_s_cal"] = cn["remote"] / cn["wall"] / cn["workers"]
    say_cal = (f"calibration (greedy trainer on A alone): lending off {co['images'] / co['wall']:.0f}"
               f" img/s, on {cn['images'] / cn['wall']:.0f} img/s with {cn['remote']} of "
               f"{cn['images']} images remote, {cn['workers'] or '?'} remote workers at most")
elif on and "local_us" in costs:
    # no remote images in the calibration: the lending-on runs instead (A's CPU
    # less its local images at local_us; B's and C's less their own images)
    L = costs["local_us"] / 1e6
    remA = sum(images_on(k, homeA, True) for k in on)
    if remA > 0:
        homecpu = sum(use[k][0] for k in on) - L * sum(
            images_on(k, homeA) - images_on(k, homeA, True) for k in on)
        lendcpu = sum(use[k][1] + use[k][2] for k in on) - L * sum(
            images_on(k, n) for k in on for n in NODES[1:])
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
        if h != "1":
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

# start-up: from a trainer's launch to its first image (process start, dataset
# open, attach): its JCT less the time bench's clock saw it consuming
if rows:
    costs["start_s"] = statistics.mean(r["start"] for r in rows)
with open(os.path.join(OUT, "costs.tsv"), "w") as f:
    f.write("# per-image CPU costs measured in this run (microseconds of CPU per image)\n")
    for k, v in costs.items():
        f.write(f"cost\t{k}\t{v:.1f}\n")


def simulate(tag, cost):
    """goldminer sim on the scenario with these costs: name -> JCT, and the summaries."""
    path = os.path.join(OUT, f"scenario-{tag}.tsv")
    done = set()
    with open(os.path.join(OUT, "scenario.tsv")) as src, open(path, "w") as dst:
        for line in src:
            f = line.split("\t")
            if f[0] == "cost" and f[1] in cost:
                line = f"cost\t{f[1]}\t{cost[f[1]]:.{3 if f[1] == 'start_s' else 1}f}\n"
                done.add(f[1])
            dst.write(line)
        for k in ("local_us", "remote_home_us", "remote_lender_us", "remote_worker_img_s",
                  "start_s"):
            if k in cost and k not in done:
                dst.write(f"cost\t{k}\t{cost[k]:.{3 if k == 'start_s' else 1}f}\n")
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
say(f"cluster experiment: {len(JOBS)} jobs on {', '.join(NODES)}; "
    f"{len([1 for k in runs if k[1] == 'off'])} run(s) lending off, "
    f"{len([1 for k in runs if k[1] == 'on'])} on; machine load at the end: {load}")
say(f"{'lending':>8} {'avg JCT s':>14} {'A jobs s':>10} {'bound s':>8} {'util':>6} "
    f"{'util A':>7}  (mean over runs; per run)")
per_mode = {}
for mode in ("off", "on"):
    ks = [k for k in runs if k[1] == mode]
    if not ks:
        continue
    rr = [[r for r in rows if (r["run"], r["mode"]) == k] for k in ks]
    a = [avg([r["jct"] for r in rs]) for rs in rr]
    aa = [avg([r["jct"] for r in rs if r["home"] == homeA]) for rs in rr]
    per_mode[mode] = dict(avg=avg(a), avgA=avg(aa), bound=avg([avg([r["bound"] for r in rs])
                                                               for rs in rr]),
                          util=avg([util(rs) for rs in rr]),
                          utilA=avg([util([r for r in rs if r["home"] == homeA]) for rs in rr]))
    m = per_mode[mode]
    say(f"{mode:>8} {m['avg']:14.1f} {m['avgA']:10.1f} {m['bound']:8.1f} {m['util']:6.3f} "
        f"{m['utilA']:7.3f}  ({', '.join(f'{x:.1f}' for x in a)})")
if "off" in per_mode and "on" in per_mode:
    o, n = per_mode["off"], per_mode["on"]
    say(f"lending on vs off: average JCT {o['avg'] / n['avg']:.2f}x faster "
        f"(A's jobs {o['avgA'] / n['avgA']:.2f}x); on is {n['avg'] / n['bound']:.2f}x the bound "
        f"(off {o['avg'] / o['bound']:.2f}x); A's GPU utilisation {o['utilA']:.2f} -> "
        f"{n['utilA']:.2f} (target >= 0.9)")
    for nm in NODES[1:]:
        for j in [j for j in JOBS if j["home"] == nm]:
            jo = avg([r["jct"] for r in rows if r["name"] == j["name"] and r["mode"] == "off"])
            jn = avg([r["jct"] for r in rows if r["name"] == j["name"] and r["mode"] == "on"])
            if jo > 0:
                say(f"  {nm}'s job {j['name']}: {jo:.1f} s off, {jn:.1f} s on "
                    f"({100 * (jn - jo) / jo:+.1f}%; target within +5%)")
say(say_cal)
say("measured costs (us of CPU per image; start_s in s, remote_worker_img_s img/s): " +
    ", ".join(f"{k} {v:.{2 if k == 'start_s' else 0}f}" for k, v in costs.items()) +
    "; committed in the scenario: " + ", ".join(f"{k} {v:g}" for k, v in COSTS.items()))
real = {}
for r in rows:
    real.setdefault((r["mode"], r["name"]), []).append(r["jct"])
sims = [("committed", COSTS)]
if {"local_us", "remote_home_us", "remote_lender_us"} <= set(costs):
    sims.append(("measured", costs))
for tag, cost in sims:
    summ, jct = simulate(tag, cost)
    if not summ:
        continue
    say(f"sim ({tag} costs) vs measured JCT per job (target within 15%):")
    say(f"{'job':>6} {'home':>5} {'rate':>6} " + " ".join(
        f"{'real ' + m:>9} {'sim ' + m:>8} {'err':>7}" for m in ("off", "on")))
    worst = 0.0
    with open(os.path.join(OUT, f"sim-{tag}.tsv"), "w") as f:
        f.write("job\thome\tlending\treal_jct_s\tsim_jct_s\terror_pct\n")
        for j in JOBS:
            line = f"{j['name']:>6} {j['home']:>5} {j['rate']:6.0f} "
            for m in ("off", "on"):
                rj = avg(real.get((m, j["name"]), []))
                sj = jct.get((m, j["name"]), 0.0)
                e = 100 * (sj - rj) / rj if rj > 0 else 0.0
                worst = max(worst, abs(e))
                line += f"{rj:9.1f} {sj:8.1f} {e:+6.1f}% "
                f.write(f"{j['name']}\t{j['home']}\t{m}\t{rj:.2f}\t{sj:.2f}\t{e:.1f}\n")
            say(line)
    say(f"  sim avg JCT off {summ['off']['avg_jct']:.1f} s, on {summ['on']['avg_jct']:.1f} s "
        f"({summ['off']['avg_jct'] / summ['on']['avg_jct']:.2f}x), util "
        f"{summ['off']['gpu_util']:.3f} -> {summ['on']['gpu_util']:.3f}; worst per-job error "
        f"{worst:.1f}%")
text = "\n".join(lines) + "\n"
open(os.path.join(OUT, "summary.txt"), "w").write(text)
print(text, end="")
