#!/bin/sh
# deploy/: what runs on this machine of the three ways to run the
# agents on a cluster manager. TAP on stdout; a check whose tool is missing
# skips, saying which.
#   1. the systemd unit passes systemd-analyze verify without a word, alone
#      and with each drop-in of deploy/goldminer-node.service.d (peers.conf,
#      rdma.conf) and with both
#   2. it is hardened: systemd-analyze security rates its exposure 2.0 or less
#      each way (a unit as root with no sandboxing rates 9.6), and it denies IP
#      but to an allow list
#   3. every option the unit, the DaemonSet and the Slurm script give
#      `goldminer node` is one of its options
#   4. each Kubernetes object, as kustomize renders deploy/kubernetes (or the
#      files as they are without kubectl), is valid against the Kubernetes API
#      schemas (npm's kubernetes-models; the ServiceMonitor against
#      @kubernetes-models/prometheus-operator), and a broken copy of the
#      DaemonSet (no selector, a port that is no number) is not
#   5. the objects fit together: the headless Service (clusterIP None) selects
#      the DaemonSet's pods on the port the agents listen on, --peers names the
#      Service, the Secret is the one mounted; GPU taints tolerated, a
#      PriorityClass of the set, probes that ask the agent, the metrics port
#      annotated, in the Service and scraped by the ServiceMonitor, a
#      NetworkPolicy admitting only agent pods on the control port and UCX's
#      fixed range (the agents' UCX_TCP_PORT_RANGE), no service account token,
#      non-root with NET_ADMIN its one capability, maxUnavailable 1 and a
#      PodDisruptionBudget; with other parameters (params.yaml) the DaemonSet
#      runs as that uid and mounts that claim at that path, its --lend-root
#   6. the Slurm scripts pass shellcheck
#   7. the Slurm recipe, dry run (scontrol and srun faked): one agent's keeper
#      per node of the expanded host list, each agent with every host as --peers
#      on the job's port and GM_NODE_ARGS's options, a log per node, then a wait
#      for all of them; outside an allocation it says so
#   8. the unit's command line without /etc/goldminer/node.env (GM_PEERS unset:
#      `--peers ''`) is refused with exit status 2 and words naming GM_PEERS,
#      and the unit does not restart on 2; an agent with --listen and no
#      --peers at all starts, saying even under --quiet that it lends to nobody
#   9. the unit's secret as systemd hands it over lets the agent start as the
#      service user: a private mount namespace, a tmpfs at a credentials
#      directory made as systemd makes it (the file root's, mode 0400, an ACL
#      entry for the user, the mount read-only), the agent as nobody with the
#      unit's ambient CAP_NET_ADMIN and $CREDENTIALS_DIRECTORY, its --secret
#      the unit's ${CREDENTIALS_DIRECTORY}/secret (needs root, unshare, setpriv)
#  10. the dry run where one node's agent cannot start: the script ends at
#      once, naming the node and showing its log, and cancels the step
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/agent.sh
. "$here/agent.sh"
D=$repo/deploy

echo "1..10"

# 1-2: the unit, its program the build's (verify wants the command to exist),
# alone and with its drop-ins (read from the directory beside it)
U=goldminer-node.service
for v in unit peers rdma both; do
	mkdir -p "$tmp/$v/$U.d"
	sed "s#/usr/local/bin/goldminer#$G#" "$D/$U" >"$tmp/$v/$U"
	case $v in peers | both) cp "$D/$U.d/peers.conf" "$tmp/$v/$U.d/" ;; esac
	case $v in rdma | both) cp "$D/$U.d/rdma.conf" "$tmp/$v/$U.d/" ;; esac
done
if command -v systemd-analyze >/dev/null 2>&1; then
	ok=0
	for v in unit peers rdma both; do
		systemd-analyze verify --man=no "$tmp/$v/$U" >"$tmp/verify.$v" 2>&1
		rc=$?
		{ [ $rc = 0 ] && [ ! -s "$tmp/verify.$v" ]; } || {
			ok=1
			diag "$tmp/verify.$v"
		}
	done
	t $ok "systemd-analyze verify: deploy/$U alone, with peers.conf, rdma.conf and both: no error and no warning"
	if systemd-analyze security --offline=yes "$tmp/unit/$U" >"$tmp/sec.out" 2>&1; then
		ok=0
		lvls=
		for v in unit peers rdma both; do
			systemd-analyze security --offline=yes "$tmp/$v/$U" >"$tmp/sec.$v" 2>&1
			lvl=$(sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p' "$tmp/sec.$v")
			lvls="$lvls $v ${lvl:-?}"
			if [ -z "$lvl" ] || ! awk -v l="$lvl" 'BEGIN { exit !(l <= 2.0) }'; then
				ok=1
				grep '✗' "$tmp/sec.$v" | head -20 | sed 's/^/# /'
			fi
		done
		grep -q '^IPAddressDeny=any' "$D/$U" || ok=1
		t $ok "the unit is hardened: exposure$lvls (systemd-analyze security; 2.0 at most), IP denied but to a list"
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

# 4-5: the Kubernetes objects: kustomize's rendering of deploy/kubernetes
# (kubectl kustomize), or without kubectl every file but kustomization.yaml
K=$D/kubernetes
render() { # render DIR OUT: the objects of DIR as one YAML stream
	if command -v kubectl >/dev/null 2>&1; then
		kubectl kustomize "$1" >"$2" 2>"$2.err"
	else
		for f in "$1"/*.yaml; do
			[ "${f##*/}" = kustomization.yaml ] && continue
			echo "---"
			cat "$f"
		done >"$2"
	fi
}
kust=no
command -v kubectl >/dev/null 2>&1 && kust=yes
render "$K" "$tmp/objs.yaml" || { diag "$tmp/objs.yaml.err"; : >"$tmp/objs.yaml"; }
# the same with other parameters: what params.yaml is for
if [ $kust = yes ]; then
	mkdir -p "$tmp/k2"
	cp "$K"/*.yaml "$tmp/k2/"
	sed -i -e 's/TRAINER_UID: "1000"/TRAINER_UID: "4242"/' -e 's/TRAINER_GID: "1000"/TRAINER_GID: "4343"/' \
		-e 's#DATA_CLAIM: goldminer-data#DATA_CLAIM: imagenet-ro#' -e 's#DATA_PATH: /data#DATA_PATH: /mnt/datasets#' \
		"$tmp/k2/params.yaml"
	render "$tmp/k2" "$tmp/objs2.yaml" || diag "$tmp/objs2.yaml.err"
fi
yaml_ok=no
[ -x "$PY" ] && "$PY" -c 'import yaml' 2>/dev/null && yaml_ok=yes
if [ $yaml_ok = no ]; then
	skip "no PyYAML in $PY to read the manifests (apt-get install python3-yaml)"
elif ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
	skip "no npm and node: the schemas (npm's kubernetes-models) cannot be installed"
elif ! timeout 180 npm install --no-audit --no-fund --silent --prefix "$tmp/npm" \
	kubernetes-models >"$tmp/npm.out" 2>&1 ||
	! timeout 180 npm install --no-audit --no-fund --silent --prefix "$tmp/npm-po" \
		@kubernetes-models/prometheus-operator >>"$tmp/npm.out" 2>&1; then
	skip "npm could not install kubernetes-models (no registry reachable?): $(tail -1 "$tmp/npm.out")"
else
	# every object as JSON, and a broken DaemonSet
	"$PY" - "$tmp/objs.yaml" "$tmp/json" <<'PY'
import json, os, sys, yaml
src, out = sys.argv[1], sys.argv[2]
os.makedirs(out)
for i, doc in enumerate(d for d in yaml.safe_load_all(open(src)) if d):
    json.dump(doc, open(os.path.join(out, "%s.%d.json" % (doc["kind"], i)), "w"))
    if doc["kind"] == "DaemonSet":
        del doc["spec"]["selector"]
        doc["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = "7070x"
        json.dump(doc, open(os.path.join(out, "broken.json"), "w"))
PY
	cat >"$tmp/npm/validate.js" <<'JS'
// node validate.js FILE.json...: each object against its kind's schema
// (the Prometheus Operator's kinds from @kubernetes-models/prometheus-operator)
const path = require("path");
let bad = 0;
for (const f of process.argv.slice(2)) {
	const o = require(path.resolve(f));
	// (a prefix of its own: it brings another version of kubernetes-models)
	const pkg = o.apiVersion.startsWith("monitoring.coreos.com/")
		? "../npm-po/node_modules/@kubernetes-models/prometheus-operator" : "kubernetes-models";
	const mod = require(`${pkg}/${o.apiVersion}/${o.kind}`);
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
	for k in DaemonSet Service Secret NetworkPolicy PriorityClass PodDisruptionBudget ServiceMonitor; do
		echo "$kinds" | grep -qw $k || ok=1
	done
	diag "$tmp/valid.out"
	diag "$tmp/broken.out"
	t $ok "the Kubernetes objects are valid against the API schemas (kubernetes-models):$kinds; a broken DaemonSet is not"
fi
if [ $yaml_ok = yes ]; then
	"$PY" - "$tmp/objs.yaml" "$tmp/objs2.yaml" >"$tmp/fit.out" 2>&1 <<'PY'
import os, sys, yaml
def load(f):
    objs = {}
    if os.path.exists(f):
        for doc in yaml.safe_load_all(open(f)):
            if doc:
                objs[doc["kind"]] = doc
    return objs
objs = load(sys.argv[1])
fails = []
def check(cond, what):
    print(("ok: " if cond else "FAIL: ") + what)
    if not cond:
        fails.append(what)
def get(d, *keys):
    for k in keys:
        d = d.get(k, {}) if isinstance(d, dict) else {}
    return d
ds, svc, sec = objs["DaemonSet"], objs["Service"], objs["Secret"]
pod = ds["spec"]["template"]
ps = pod["spec"]
agent = [c for c in ps["containers"] if c["name"] == "agent"][0]
cmd = " ".join(agent["command"])
ns = svc["metadata"]["namespace"]
env = {e["name"]: e.get("value") for e in agent.get("env", [])}
cports = {p["name"]: p["containerPort"] for p in agent["ports"]}
check(svc["spec"].get("clusterIP") == "None", "the Service is headless")
check(all(pod["metadata"]["labels"].get(k) == v for k, v in svc["spec"]["selector"].items()),
      "the Service selects the DaemonSet's pods")
check(ds["spec"]["selector"]["matchLabels"] == {k: pod["metadata"]["labels"][k] for k in ds["spec"]["selector"]["matchLabels"]},
      "the DaemonSet's selector matches its pods")
port = [p for p in svc["spec"]["ports"] if p["name"] == "control"][0]["port"]
check("--listen 0.0.0.0:%d" % port in cmd, "the agent listens on the Service's port %d" % port)
check("--peers %s.%s.svc" % (svc["metadata"]["name"], ns) in cmd, "--peers names the Service")
vols = {v["name"]: v for v in ps["volumes"]}
check(any(v.get("secret", {}).get("secretName") == sec["metadata"]["name"] for v in vols.values()),
      "the Secret is mounted")
check(ds["metadata"]["namespace"] == ns == sec["metadata"]["namespace"], "one namespace")
# what an operator of node-level DaemonSets expects
tol = ps.get("tolerations", [])
check(any(t.get("key") == "nvidia.com/gpu" and t.get("operator") == "Exists" for t in tol),
      "GPU nodes' taint nvidia.com/gpu is tolerated")
pc = objs.get("PriorityClass", {})
check(ps.get("priorityClassName") and ps.get("priorityClassName") == get(pc, "metadata", "name"),
      "a priorityClassName, of a PriorityClass in the set (%s)" % ps.get("priorityClassName"))
def asks_agent(p):
    ex = " ".join(get(p, "exec").get("command", [])) if get(p, "exec") else ""
    hg = get(p, "httpGet")
    return ("node --status" in ex and "/run/goldminer/goldminer.sock" in ex) or \
        (hg.get("path") == "/metrics" and hg.get("port") in ("metrics", cports.get("metrics")))
check(asks_agent(agent.get("livenessProbe", {})) and asks_agent(agent.get("readinessProbe", {})),
      "liveness and readiness probes ask the agent (--status on its socket, or /metrics)")
mport = cports.get("metrics")
ann = pod["metadata"].get("annotations", {})
check(mport is not None and "--metrics 0.0.0.0:%s" % mport in cmd, "--metrics on the container's metrics port %s" % mport)
check(ann.get("prometheus.io/scrape") == "true" and ann.get("prometheus.io/port") == str(mport)
      and ann.get("prometheus.io/path") == "/metrics", "the pods carry Prometheus' annotations for that port")
sm = objs.get("ServiceMonitor", {})
sport = [p for p in svc["spec"]["ports"] if p.get("targetPort") == mport]
check(bool(sport) and all(get(sm, "spec", "selector", "matchLabels").get(k) == v
                          for k, v in svc["metadata"]["labels"].items())
      and any(e.get("port") == sport[0]["name"] for e in get(sm, "spec").get("endpoints", [])),
      "the Service has the metrics port and a ServiceMonitor scrapes it")
np_ = objs.get("NetworkPolicy", {})
rng = env.get("UCX_TCP_PORT_RANGE") or ""
lo, _, hi = rng.partition("-")
rules = get(np_, "spec").get("ingress", [])
agents_only = {"podSelector": {"matchLabels": ds["spec"]["selector"]["matchLabels"]}}
def admits(port, end=None):
    return [r for r in rules for p in r.get("ports", [])
            if p.get("port") == port and p.get("endPort") == end]
check(bool(rng) and all(r.get("ports") for r in rules)
      and all(r["from"] == [agents_only] for r in admits(port) + admits(int(lo or 0), int(hi or 0) or None))
      and admits(port) and admits(int(lo or 0), int(hi or 0) or None),
      "the NetworkPolicy admits only the agent pods, on the control port and UCX's range %s (UCX_TCP_PORT_RANGE), every rule with ports" % rng)
check(ps.get("automountServiceAccountToken") is False, "automountServiceAccountToken: false")
sc = agent.get("securityContext", {})
check(get(ps, "securityContext").get("runAsNonRoot") is True and sc.get("capabilities") == {"drop": ["ALL"], "add": ["NET_ADMIN"]},
      "non-root, every capability dropped but NET_ADMIN")
check(get(ds, "spec", "updateStrategy", "rollingUpdate").get("maxUnavailable") == 1,
      "a rolling update takes one agent at a time")
pdb = objs.get("PodDisruptionBudget", {})
check(get(pdb, "spec").get("maxUnavailable") == 1 and get(pdb, "spec", "selector", "matchLabels") == ds["spec"]["selector"]["matchLabels"],
      "a PodDisruptionBudget lets one agent at a time be evicted")
check(vols.get("data", {}).get("persistentVolumeClaim", {}).get("claimName"), "the datasets come from a PersistentVolumeClaim")
# other parameters (uid 4242, gid 4343, claim imagenet-ro at /mnt/datasets)
o2 = load(sys.argv[2])
if o2:
    ds2 = o2["DaemonSet"]["spec"]["template"]["spec"]
    a2 = [c for c in ds2["containers"] if c["name"] == "agent"][0]
    mnt = [m["mountPath"] for m in a2["volumeMounts"] if m["name"] == "data"]
    cl = [v["persistentVolumeClaim"]["claimName"] for v in ds2["volumes"] if v["name"] == "data"]
    cm = o2["ConfigMap"]["data"]
    check(ds2["securityContext"]["runAsUser"] == 4242 and ds2["securityContext"]["runAsGroup"] == 4343
          and ds2["securityContext"]["fsGroup"] == 4343
          and mnt == ["/mnt/datasets"] and cl == ["imagenet-ro"] and cm["DATA_PATH"] == "/mnt/datasets"
          and '--lend-root "$DATA_PATH"' in " ".join(a2["command"])
          and any(e.get("configMapRef", {}).get("name") == o2["ConfigMap"]["metadata"]["name"] for e in a2.get("envFrom", [])),
          "params.yaml: uid 4242 gid 4343, claim imagenet-ro mounted at /mnt/datasets, which --lend-root names")
else:
    print("# no kubectl: the parameters are not rendered")
sys.exit(1 if fails else 0)
PY
	ok=$?
	diag "$tmp/fit.out"
	t $ok "the objects fit: the agents' Service, Secret, probes, metrics, tolerations, priority, NetworkPolicy, rolling update and parameters (${kust:+kustomize: $kust})"
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

# 8: the unit without node.env: ExecStart as systemd expands it with GM_PEERS
# unset (a variable that is a word of its own becomes one empty argument)
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/secret8"
chmod 600 "$tmp/secret8"
timeout 10 "$G" node --socket "$tmp/8.sock" --listen 127.0.0.1:0 --peers '' \
	--secret "$tmp/secret8" >"$tmp/8.out" 2>&1
rc=$?
ok=1
word='--peers $''{GM_PEERS}' # the unit's words, not the shell's to expand
[ $rc = 2 ] && grep -q "names no agent" "$tmp/8.out" && grep -q "GM_PEERS" "$tmp/8.out" &&
	grep -qF -- "$word" "$D/goldminer-node.service" &&
	grep -q '^RestartPreventExitStatus=2' "$D/goldminer-node.service" && ok=0
timeout 3 "$G" node --socket "$tmp/8.sock" --listen 127.0.0.1:0 --secret "$tmp/secret8" \
	--quiet >"$tmp/8b.out" 2>&1
rc2=$?
[ $rc2 = 124 ] && grep -q "peers: none (no --peers nor --peers-file): this agent lends to nobody" \
	"$tmp/8b.out" || ok=1
[ $ok = 0 ] || { echo "# exit status $rc, $rc2"; diag "$tmp/8.out"; diag "$tmp/8b.out"; }
t $ok "without node.env (--peers '') the agent refuses to start, exit 2, naming GM_PEERS; the unit does not restart it; no --peers at all is said even under --quiet"

# 9: LoadCredential='s file, as the service user
if [ "$(id -u)" != 0 ] || ! command -v unshare >/dev/null 2>&1 || ! command -v setpriv >/dev/null 2>&1; then
	skip "needs root, unshare and setpriv (util-linux) to make a credentials directory and switch to nobody"
elif [ ! -f "$B/libgoldminer-remote.so" ]; then
	skip "no $B/libgoldminer-remote.so (UCX missing): no --secret to read"
else
	run=$(mktemp -d /tmp/gm-deploy-cred.XXXXXX)
	mkdir "$run/credentials" "$run/rt"
	chown nobody "$run/rt"
	chmod 700 "$run/rt"
	chmod 755 "$run" "$run/credentials"
	cp "$tmp/secret8" "$run/secret.src"
	cat >"$tmp/cred.sh" <<'SH'
# in a mount namespace of its own: the credentials directory as systemd makes
# it, then the unit's command line as the service user with the unit's
# capability; the agent runs 3 s
set -e
run=$1 G=$2
d=$run/credentials
mount -t tmpfs -o mode=0755,nosuid,nodev,noexec gm-credentials "$d"
cp "$run/secret.src" "$d/secret"
chmod 400 "$d/secret"
uid=$(id -u nobody)
python3 - "$d/secret" "$uid" <<'PY'
import os, struct, sys
e = lambda tag, perm, i=0xffffffff: struct.pack("<HHI", tag, perm, i)
acl = struct.pack("<I", 2) + e(1, 4) + e(2, 4, int(sys.argv[2])) + e(4, 0) + e(0x10, 4) + e(0x20, 0)
os.setxattr(sys.argv[1], "system.posix_acl_access", acl)
PY
mount -o remount,bind,ro,nosuid,nodev,noexec "$d"
set +e
CREDENTIALS_DIRECTORY=$d timeout 3 setpriv --reuid=nobody --regid=nogroup --clear-groups \
	--inh-caps=-all,+net_admin --ambient-caps=+net_admin --bounding-set=-all,+net_admin \
	"$G" node --socket "$run/rt/goldminer.sock" --listen 127.0.0.1:0 --peers 127.0.0.1:9 \
	--secret "$d/secret"
echo "agent exit $?"
ls -ln "$d"
SH
	unshare -m --propagation private sh "$tmp/cred.sh" "$run" "$G" >"$tmp/cred.out" 2>&1
	ok=1
	grep -q "listening for peers" "$tmp/cred.out" && grep -q "agent exit 124" "$tmp/cred.out" &&
		grep -q -- "-r--r-----[+ ]* 1 0 0 .* secret" "$tmp/cred.out" && ok=0
	[ $ok = 0 ] || diag "$tmp/cred.out"
	rm -rf "$run"
	t $ok "the unit's secret as systemd hands it over (root's, 0400 + ACL, read-only, \$CREDENTIALS_DIRECTORY): the agent starts as nobody"
fi
# 10: an agent that cannot start ends the script at once, naming its node
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
