#!/bin/sh
# deploy/grafana/goldminer.json against a real agent: an agent with a peer
# (--listen, --peers) and --metrics, a job attached through it, its /metrics
# scraped; then every metric name the dashboard's queries read must be a
# family of that output with samples, and every label a query groups by or a
# legend names must be on those samples (or be Prometheus' own target label,
# instance). TAP on stdout. Env: B (build dir). Every wait has a deadline.
#   1. the agent serves /metrics with a job and a peer
#   2. every name the dashboard reads is in it, with its labels
#   3. the dashboard reads what it is for: CPUs lent and borrowed, delivered
#      and demanded img/s, trainer stall, remote workers, refusals
#   4. the check itself fails on a dashboard whose query names a metric the
#      agent does not serve (goldminer_job_img_per_sec)
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/agent.sh
. "$here/agent.sh"
DASH=$repo/deploy/grafana/goldminer.json
N=4
echo "1..$N"
[ -f "$B/libgoldminer-remote.so" ] ||
	skip_all "no $B/libgoldminer-remote.so (UCX missing): no peer families"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/secret"
chmod 600 "$tmp/secret"
"$G" synth "$tmp/set" --images 64 --classes 2 >/dev/null 2>&1
# a peer that is never up (nothing listens on 127.0.0.1:9): its families are
# there all the same, labelled by it
start_agent "$tmp/agent.err" --cpus 2 --metrics 127.0.0.1:0 --listen 127.0.0.1:0 \
	--peers 127.0.0.1:9 --secret "$tmp/secret" --unguarded-ucx
port_known() { grep -q 'metrics on port [0-9]' "$tmp/agent.err"; }
until_ok 10 port_known
port=$(sed -n 's/.*metrics on port \([0-9]*\).*/\1/p' "$tmp/agent.err")
"$G" bench "$tmp/set" --node "$sock" --workers 2 --epochs 1000 --batch 8 --size 32 \
	--consumer-rate 20 --quiet >/dev/null 2>"$tmp/job.err" &
tpid=$!
scraped() {
	python3 - "$port" "$tmp/m" <<'PY'
import sys, urllib.request
body = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=5).read()
open(sys.argv[2], "wb").write(body)
PY
	grep -q '^goldminer_job_img_per_s{pid=' "$tmp/m" && grep -q '^goldminer_peer_up{peer=' "$tmp/m"
}
until_ok 20 scraped
ok=$?
[ $ok = 0 ] || { diag "$tmp/agent.err"; diag "$tmp/job.err"; }
t $ok "the agent (port $port) serves /metrics with a job's and a peer's samples"

# check DASHBOARD: each query's metric names and labels against $tmp/m
check() {
	python3 - "$1" "$tmp/m" <<'PY'
import json, re, sys
dash, text = json.load(open(sys.argv[1])), open(sys.argv[2]).read()
labels = {}  # family -> label names on its samples
for line in text.splitlines():
    m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})? ", line)
    if m and not line.startswith("#"):
        labels.setdefault(m.group(1), set()).update(re.findall(r'([a-zA-Z_]\w*)="', m.group(3) or ""))
bad, names = [], set()
target_labels = {"instance", "job"}  # Prometheus' own, on every series it scrapes
for p in dash["panels"]:
    if not p.get("targets"):
        bad.append("panel %r has no query" % p["title"])
    for t in p.get("targets", []):
        e = t["expr"]
        used = set(re.findall(r"\bgoldminer_[a-z0-9_]+", e))
        names |= used
        lab = set(re.findall(r"\{\{\s*(\w+)\s*\}\}", t.get("legendFormat", "")))
        for grp in re.findall(r"\bby\s*\(([^)]*)\)", e):
            lab |= {x.strip() for x in grp.split(",") if x.strip()}
        lab |= set(re.findall(r"(\w+)\s*=~?\s*\"", e))
        for u in sorted(used):
            if u not in labels:
                bad.append("%r reads %s: no such family with samples in /metrics" % (p["title"], u))
        have = set().union(*(labels.get(u, set()) for u in used)) | target_labels
        for l in sorted(lab - have):
            bad.append("%r uses label %s, which %s do not carry" % (p["title"], l, ", ".join(sorted(used))))
for b in bad:
    print(b)
print("names: " + " ".join(sorted(names)))
sys.exit(1 if bad else 0)
PY
}
check "$DASH" >"$tmp/check.out" 2>&1
ok=$?
[ -s "$tmp/m" ] || ok=1
diag "$tmp/check.out"
t $ok "every metric the dashboard reads is in the agent's /metrics, with the labels it uses"

ok=0
for f in goldminer_peer_workers_lent_by_us goldminer_peer_workers_lent_to_us goldminer_job_img_per_s \
	goldminer_job_demand_img_per_s goldminer_job_stall_ratio goldminer_job_remote_workers_granted \
	goldminer_job_remote_refusals_total; do
	grep -q "^names: .*\b$f\b" "$tmp/check.out" || {
		ok=1
		echo "# the dashboard does not read $f"
	}
done
t $ok "the dashboard reads CPUs lent and borrowed, delivered vs demanded img/s, stall, remote workers, refusals"

sed 's/goldminer_job_img_per_s{/goldminer_job_img_per_sec{/' "$DASH" >"$tmp/bad.json"
check "$tmp/bad.json" >"$tmp/bad.out" 2>&1
rc=$?
ok=1
[ $rc != 0 ] && grep -q "goldminer_job_img_per_sec: no such family" "$tmp/bad.out" && ok=0
[ $ok = 0 ] || diag "$tmp/bad.out"
t $ok "a dashboard reading a metric the agent does not serve fails the check"
