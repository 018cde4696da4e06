#!/bin/sh
# deploy/ (issue 25): what runs on this machine of the three ways to run the
# agents on a cluster manager. TAP on stdout; a check whose tool is missing
# skips, saying which.
#   1. the systemd unit passes systemd-analyze verify without a word
#   2. it is hardened: systemd-analyze security rates its exposure 3.0 or less
#      (a unit as root with no sandboxing rates 9.6)
#   3. every option the unit, the DaemonSet and the Slurm script give
#      `goldminer node` is one of its options
#   4. each Kubernetes object is valid against the Kubernetes API schemas
#      (npm's kubernetes-models, installed into a temporary directory), and a
#      broken copy of the DaemonSet (no selector, a port that is no number) is
#      not
#   5. the objects fit together: the headless Service (clusterIP None) selects
#      the DaemonSet's pods on the port the agents listen on, --peers names the
#      Service, the Secret is the one mounted
#   6. the Slurm scripts pass shellcheck
#   7. the Slurm recipe, dry run (scontrol and srun faked): one agent's keeper
#      per node of the expanded host list, each agent with every host as --peers
#      on the job's port and GM_NODE_ARGS's options, a log per node, then a wait
#      for all of them; outside an allocation it says so
#   8. the dry run where one node's agent cannot start: the script ends at
#      once, naming the node and showing its log, and cancels the step
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
B=${B:-build}
case $B in /*) ;; *) B=$repo/$B ;; esac
G="$B/goldminer"
D=$repo/deploy
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
t() { # t STATUS DESCRIPTION
	n=$((n + 1))
	if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fi
}
skip() {
	n=$((n + 1))
	echo "ok $n # SKIP $1"
}
diag() { sed 's/^/# /' "$1"; }
PY=/usr/bin/python3

echo "1..8"

# 1-2: the unit, its program the build's (verify wants the command to exist)
sed "s#/usr/local/bin/goldminer#$G#" "$D/goldminer-node.service" >"$tmp/goldminer-node.service"
if command -v systemd-analyze >/dev/null 2>&1; then
	systemd-analyze verify --man=no "$tmp/goldminer-node.service" >"$tmp/verify.out" 2>&1
	rc=$?
	ok=1
	[ $rc = 0 ] && [ ! -s "$tmp/verify.out" ] && ok=0
	[ $ok = 0 ] || diag "$tmp/verify.out"
	t $ok "systemd-analyze verify: deploy/goldminer-node.service has no error and no warning"
	if systemd-analyze security --offline=yes "$tmp/goldminer-node.service" >"$tmp/sec.out" 2>&1; then
		lvl=$(sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p' "$tmp/sec.out")
		ok=1
		[ -n "$lvl" ] && awk -v l="$lvl" 'BEGIN { exit !(l <= 3.0) }' && ok=0
		[ $ok = 0 ] || grep '✗' "$tmp/sec.out" | head -20 | sed 's/^/# /'
		t $ok "the unit is hardened: exposure ${lvl:-?} (systemd-analyze security; 3.0 at most)"
	else
		skip "systemd-analyze security --offline is not in this systemd ($(head -1 "$tmp/sec.out"))"
	fi
else
	skip "no systemd-analyze (apt-get install systemd)"
	skip "no systemd-analyze (apt-get install systemd)"
fi

# 3: the options given to `goldminer node` are its options
"$G" node --help >"$tmp/help" 2>&1
bad=
for f in "$D/goldminer-node.service" "$D/kubernetes/daemonset.yaml" "$D/slurm/goldminer-agents.sh"; do
	# shellcheck disable=SC2013 # the words are what is wanted: each --option
	for o in $(grep -v '^[[:space:]]*#' "$f" | grep -o -- '--[a-z][a-z-]*' | sort -u); do
		case $o in # srun's, and sh's in the DaemonSet's command
		--nodes | --ntasks | --ntasks-per-node | --overlap | --kill-on-bad-exit | --job-name) continue ;;
		esac
		grep -q -- "$o\b" "$tmp/help" || bad="$bad ${f##*/}:$o"
	done
done
ok=1
[ -z "$bad" ] && [ -s "$tmp/help" ] && ok=0
t $ok "every option given to goldminer node in deploy/ is one of its options${bad:+ (not:$bad)}"

# 4-5: the Kubernetes objects
yaml_ok=no
[ -x "$PY" ] && "$PY" -c 'import yaml' 2>/dev/null && yaml_ok=yes
if [ $yaml_ok = no ]; then
	skip "no PyYAML in $PY to read the manifests (apt-get install python3-yaml)"
elif ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
	skip "no npm and node: the schemas (npm's kubernetes-models) cannot be installed"
elif ! timeout 180 npm install --no-audit --no-fund --silent --prefix "$tmp/npm" \
	kubernetes-models >"$tmp/npm.out" 2>&1; then
	skip "npm could not install kubernetes-models (no registry reachable?): $(tail -1 "$tmp/npm.out")"
else
	# every document of every manifest as JSON, and a broken DaemonSet
	"$PY" - "$D/kubernetes" "$tmp/json" <<'PY'
import json, os, sys, yaml
src, out = sys.argv[1], sys.argv[2]
os.makedirs(out)
for f in sorted(os.listdir(src)):
    if f.endswith(".yaml"):
        for i, doc in enumerate(yaml.safe_load_all(open(os.path.join(src, f)))):
            json.dump(doc, open(os.path.join(out, "%s.%d.json" % (f[:-5], i)), "w"))
            if doc["kind"] == "DaemonSet":
                del doc["spec"]["selector"]
                doc["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = "7070x"
                json.dump(doc, open(os.path.join(out, "broken.json"), "w"))
PY
	cat >"$tmp/npm/validate.js" <<'JS'
// node validate.js FILE.json...: each object against its kind's schema
const path = require("path");
let bad = 0;
for (const f of process.argv.slice(2)) {
	const o = require(path.resolve(f));
	const group = o.apiVersion.includes("/") ? o.apiVersion : o.apiVersion;
	const mod = require(`kubernetes-models/${group}/${o.kind}`);
	try {
		new mod[o.kind](o).validate();
		console.log(`valid ${path.basename(f)}: ${o.apiVersion} ${o.kind} ${o.metadata.name}`);
	} catch (e) {
		bad++;
		console.log(`invalid ${path.basename(f)}: ${o.kind}: ${e.message.split("\n")[0]}`);
	}
}
process.exit(bad ? 1 : 0);
JS
	ok=0
	kinds=
	for j in "$tmp/json"/*.json; do
		[ "${j##*/}" = broken.json ] && continue
		(cd "$tmp/npm" && node validate.js "$j") >>"$tmp/valid.out" 2>&1 || ok=1
		kinds="$kinds $(sed -n 's/^valid [^:]*: [^ ]* \([A-Za-z]*\) .*/\1/p' "$tmp/valid.out" | tail -1)"
	done
	(cd "$tmp/npm" && node validate.js "$tmp/json/broken.json") >"$tmp/broken.out" 2>&1 && ok=1
	grep -q "must have required property selector\|must be integer" "$tmp/broken.out" || ok=1
	for k in DaemonSet Service Secret; do
		echo "$kinds" | grep -qw $k || ok=1
	done
	diag "$tmp/valid.out"
	diag "$tmp/broken.out"
	t $ok "the Kubernetes objects are valid against the API schemas (kubernetes-models):$kinds; a broken DaemonSet is not"
fi
if [ $yaml_ok = yes ]; then
	"$PY" - "$D/kubernetes" >"$tmp/fit.out" 2>&1 <<'PY'
import os, sys, yaml
objs = {}
d = sys.argv[1]
for f in os.listdir(d):
    if f.endswith(".yaml"):
        for doc in yaml.safe_load_all(open(os.path.join(d, f))):
            objs[doc["kind"]] = doc
ds, svc, sec = objs["DaemonSet"], objs["Service"], objs["Secret"]
pod = ds["spec"]["template"]
agent = pod["spec"]["containers"][0]
cmd = " ".join(agent["command"])
ns = svc["metadata"]["namespace"]
fails = []
def check(cond, what):
    print(("ok: " if cond else "FAIL: ") + what)
    if not cond:
        fails.append(what)
check(svc["spec"].get("clusterIP") == "None", "the Service is headless")
check(all(pod["metadata"]["labels"].get(k) == v for k, v in svc["spec"]["selector"].items()),
      "the Service selects the DaemonSet's pods")
check(ds["spec"]["selector"]["matchLabels"] == {k: pod["metadata"]["labels"][k] for k in ds["spec"]["selector"]["matchLabels"]},
      "the DaemonSet's selector matches its pods")
port = svc["spec"]["ports"][0]["port"]
check("--listen 0.0.0.0:%d" % port in cmd, "the agent listens on the Service's port %d" % port)
check("--peers %s.%s.svc" % (svc["metadata"]["name"], ns) in cmd, "--peers names the Service")
vols = {v["name"]: v for v in pod["spec"]["volumes"]}
check(any(v.get("secret", {}).get("secretName") == sec["metadata"]["name"] for v in vols.values()),
      "the Secret is mounted")
check(ds["metadata"]["namespace"] == ns == sec["metadata"]["namespace"], "one namespace")
sys.exit(1 if fails else 0)
PY
	ok=$?
	diag "$tmp/fit.out"
	t $ok "the objects fit: a headless Service selecting the agents on their port, named by --peers; the Secret mounted"
else
	skip "no PyYAML in $PY to read the manifests (apt-get install python3-yaml)"
fi

# 6: shellcheck
if command -v shellcheck >/dev/null 2>&1; then
	shellcheck -s sh "$D/slurm/goldminer-agents.sh" "$D/slurm/train.sbatch" >"$tmp/sc.out" 2>&1
	ok=$?
	diag "$tmp/sc.out"
	t $ok "shellcheck: deploy/slurm/goldminer-agents.sh and train.sbatch"
else
	skip "no shellcheck (apt-get install shellcheck)"
fi

# 7: the Slurm recipe, dry run: scontrol expands the host list; srun logs its
# arguments (the script's own text, which it sends to the nodes, as <script>)
# and prints what the keepers on the three nodes would (DRY_FAIL: the node whose
# agent cannot start), then lasts DRY_HOLD s or until scancel
mkdir -p "$tmp/bin"
cat >"$tmp/bin/scontrol" <<'SH'
#!/bin/sh
[ "$1 $2 $3" = "show hostnames gpu[01-03]" ] && printf 'gpu01\ngpu02\ngpu03\n' && exit 0
echo "scontrol: unexpected: $*" >&2
exit 1
SH
cat >"$tmp/bin/srun" <<'SH'
#!/bin/sh
for a in "$@"; do
	case $a in *"
"*) a="<script>" ;; esac
	printf '%s ' "$a"
done >>"$SRUN_LOG"
echo >>"$SRUN_LOG"
for h in gpu01 gpu02 gpu03; do
	echo "$h: 00:00:00 goldminer-agents.sh: keeper of step 42.0: the agent on port 20042"
	echo "$h: goldminer node: listening on /tmp/goldminer-42.sock"
	if [ "$h" = "${DRY_FAIL:-}" ]; then
		echo "$h: goldminer node: gm_node_run: remote workers: --listen 0.0.0.0:20042: Address already in use"
		echo "$h: 00:00:00 goldminer-agents.sh: the agent could not start (exit 1: its words above)"
	else
		echo "$h: 00:00:00 goldminer-agents.sh: agent up (pid 1, port 20042)"
	fi
done
echo $$ >"$SRUN_LOG.pid"
exec sleep "${DRY_HOLD:-0}"
SH
cat >"$tmp/bin/scancel" <<'SH'
#!/bin/sh
echo "scancel $*" >>"$SRUN_LOG"
kill "$(cat "$SRUN_LOG.pid")"
SH
chmod +x "$tmp/bin/scontrol" "$tmp/bin/srun" "$tmp/bin/scancel"
mkdir "$tmp/logs"
dry() { # dry ENV...: the script in the fake allocation; its output in $tmp/slurm.out
	env HOME="$tmp" PATH="$tmp/bin:$PATH" SRUN_LOG="$tmp/srun.log" SLURM_JOB_NODELIST='gpu[01-03]' \
		SLURM_JOB_ID=42 GM_LEND_ROOT=/data GM_LOG_DIR="$tmp/logs" GM_WAIT_S=20 "$@" \
		sh "$D/slurm/goldminer-agents.sh" >"$tmp/slurm.out" 2>&1
}
dry GM_NODE_ARGS="--cpus 4  --metrics 9464"
rc=$?
# the agents' step runs in the background of the script, which has exited: its
# line can come after the script's end (5 s at most)
k=0
while [ $k -lt 50 ] && [ "$(grep -c '^--nodes=' "$tmp/srun.log" 2>/dev/null)" != 1 ]; do
	sleep 0.1
	k=$((k + 1))
done
env -u SLURM_JOB_NODELIST sh "$D/slurm/goldminer-agents.sh" >"$tmp/noalloc.out" 2>&1
rc2=$?
logs_ok=0
for h in gpu01 gpu02 gpu03; do
	[ "$(grep -c 'agent up\|listening on' "$tmp/logs/goldminer-agents-42-$h.log")" = 2 ] || logs_ok=1
done
ok=1
agents=$(grep -c -- "^--nodes=3 --ntasks=3 --ntasks-per-node=1 --overlap --kill-on-bad-exit=0 .* sh -c <script> goldminer-agents.sh _keep goldminer /tmp/goldminer-42.sock $tmp/.goldminer/secret 20042 20 --listen 0.0.0.0:20042 --peers gpu01,gpu02,gpu03 --lend-root /data --cpus 4 --metrics 9464 $" "$tmp/srun.log")
[ $rc = 0 ] && [ "$agents" = 1 ] && [ "$(grep -c '^--nodes=' "$tmp/srun.log")" = 1 ] &&
	[ "$(stat -c %a "$tmp/.goldminer/secret")" = 600 ] &&
	grep -q "3 agents up (peers gpu01,gpu02,gpu03, port 20042" "$tmp/slurm.out" &&
	[ $logs_ok = 0 ] && [ $rc2 != 0 ] && grep -q "run this inside a Slurm allocation" "$tmp/noalloc.out" && ok=0
[ $ok = 0 ] || { diag "$tmp/srun.log"; diag "$tmp/slurm.out"; diag "$tmp/noalloc.out"; }
t $ok "the Slurm recipe (dry run): one step of an agent's keeper per node of gpu[01-03], each agent with every host as --peers on the job's port (20042) and GM_NODE_ARGS, a secret of mode 600, a log per node; outside an allocation it says so"
# 8: an agent that cannot start ends the script at once, naming its node
: >"$tmp/srun.log"
t0=$(date +%s)
dry DRY_FAIL=gpu02 DRY_HOLD=30
rc=$?
el=$(($(date +%s) - t0))
ok=1
[ $rc = 1 ] && [ $el -le 5 ] && grep -q "the agent could not start on: gpu02; port 20042" "$tmp/slurm.out" &&
	grep -q "gpu02: goldminer node: gm_node_run: .*Address already in use" "$tmp/slurm.out" &&
	grep -q "^scancel 42.0" "$tmp/srun.log" && ok=0
[ $ok = 0 ] || { diag "$tmp/srun.log"; diag "$tmp/slurm.out"; }
t $ok "the Slurm recipe (dry run): an agent that cannot start ends it at once ($el s), naming the node, showing its log and cancelling the step"
