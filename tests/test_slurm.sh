#!/bin/sh
# The Slurm recipe (deploy/slurm/) run as an operator runs it, on a real Slurm
# cluster made here: Debian's slurm-wlm (slurmctld, one slurmd per node) with
# munge, ProctrackType=proctrack/linuxproc. Each node is a network namespace
# (tests/multihost.sh) with a hostname (UTS namespace), an /etc/hosts naming
# every node (/etc/netns/NS/hosts, which ip netns exec binds) and a /tmp of its
# own (a bind mount), as real nodes have; slurmctld runs in a fourth. Jobs are
# `sbatch deploy/slurm/train.sbatch` with a trainer (TRAIN) that runs on the
# job's first node: two `goldminer bench` runs over a synthetic dataset, each
# after this script's go-ahead. TAP on stdout; every wait is bounded.
#   1. two jobs sharing the three nodes at once: each job's three agents up, on
#      ports of their own
#   2. a third job given the port the first job's agents hold (GM_PORT) fails
#      at once (10 s at most from its start), saying which port and what to do
#   3. GM_NODE_ARGS reaches every agent of the job: "--cpus 1 --mem 256M" is
#      budget 1 and mem_budget 268435456 in each agent's --status
#   4. agents SIGKILLed (node2's while the trainer runs, node1's, the trainer's
#      own, between its runs) are started again by their keepers, and node1's
#      agent has both peers connected again
#   5. the agents' step of the second job cancelled (scancel JOB.STEP) is
#      started again: three keepers of a new step, three agents up
#   6. both jobs complete, every trainer run with the checksums of a
#      single-host run
#   7. one log per node: each node's log file has its own agent's lines, and
#      the job's output none
# Skips, saying why: not root, no slurm-wlm or munge (apt-get install
# slurm-wlm munge), no network namespaces, no remote plugin (UCX), a
# sanitizer build (the recipe is shell; make test runs it), a repository
# under /tmp (the nodes' own /tmp hides it). Env: B (build dir),
# GM_SLURM_KEEP=DIR (a copy of the jobs' outputs and logs, the daemons' logs).
here=$(cd "$(dirname "$0")" && pwd)
# tmp: the nodes' /tmp is their own (daemon below), so the test's files live
# where every node sees them
AGENT_TMP=/var/tmp
# shellcheck source=tests/agent.sh
. "$here/agent.sh"
N=7
echo "1..$N"
PATH=$PATH:/usr/sbin
missing=
for p in slurmctld slurmd munged sbatch srun scontrol squeue unshare; do
	command -v $p >/dev/null 2>&1 || missing="$missing $p"
done
[ "$(id -u)" = 0 ] || skip_all "not root (slurmd, namespaces and mounts need it)"
[ -z "$missing" ] || skip_all "no$missing (apt-get install slurm-wlm munge)"
[ -f "$B/libgoldminer-remote.so" ] || skip_all "no $B/libgoldminer-remote.so (UCX not installed: make deps)"
readelf -d "$B/libgoldminer.so" 2>/dev/null | grep -q libasan &&
	skip_all "a sanitizer build: the Slurm recipe is shell (make test runs it)"
case "$repo/ $B/" in /tmp/* | *" /tmp/"*) skip_all "$repo or $B is under /tmp, which the test's nodes replace with their own" ;; esac

# shellcheck source=tests/multihost.sh
. "$here/multihost.sh"
mh_setup 4
ctl=4 # slurmctld's host; nodes 1-3 are node1..node3
MH_ATEXIT="[ -f '$tmp/munged.pid' ] && kill \"\$(cat '$tmp/munged.pid')\" 2>/dev/null;
	[ -n '${GM_SLURM_KEEP:-}' ] && mkdir -p '${GM_SLURM_KEEP:-}' && cp -r '$tmp/submit' '$tmp'/*.log '$tmp'/*.out '${GM_SLURM_KEEP:-}';
	rm -rf /etc/netns/${MH_TAG}h1 /etc/netns/${MH_TAG}h2 /etc/netns/${MH_TAG}h3 \
	/etc/netns/${MH_TAG}h4; agent_cleanup"
[ "$(mh_mode)" = netns ] || skip_all "no network namespaces ($(mh_why))"
T0=$(date +%s)

# sums FILE: a bench's per-epoch checksums (its JSON's "checksum")
sums() { sed -n 's/.*"checksum": \[\([^]]*\)\].*/\1/p' "$1" 2>/dev/null; }
# in_ctl CMD...: a Slurm client command, run in the controller's host (10 s
# at most)
in_ctl() { mh_run $ctl - timeout 10 "$@"; }

# --- the cluster: hosts, munge, slurm.conf, daemons
for i in 1 2 3 4; do
	mkdir -p "/etc/netns/${MH_TAG}h$i" "$tmp/node$i/tmp" "$tmp/spool/node$i"
	chmod 1777 "$tmp/node$i/tmp"
	{
		echo "127.0.0.1 localhost"
		for j in 1 2 3; do echo "$(mh_addr $j) node$j"; done
		echo "$(mh_addr $ctl) ctl"
	} >"/etc/netns/${MH_TAG}h$i/hosts"
done
mkdir -p "$tmp/munge" "$tmp/ctld" "$tmp/submit" "$tmp/home"
chmod 700 "$tmp/munge"
head -c 1024 /dev/urandom >"$tmp/munge/key"
chmod 400 "$tmp/munge/key"
munged --force --socket="$tmp/munge/sock" --key-file="$tmp/munge/key" \
	--log-file="$tmp/munged.log" --pid-file="$tmp/munged.pid" \
	--seed-file="$tmp/munge/seed" >"$tmp/munged.out" 2>&1 ||
	{ diag "$tmp/munged.out"; skip_all "munged does not start here"; }
if [ "$MH_CGROUP" = v2 ]; then
	printf 'CgroupPlugin=cgroup/v2\nIgnoreSystemd=yes\n' >"$tmp/cgroup.conf"
else
	echo "CgroupPlugin=cgroup/v1" >"$tmp/cgroup.conf"
fi
cat >"$tmp/slurm.conf" <<EOF
ClusterName=gmtest
SlurmctldHost=ctl($(mh_addr $ctl))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$tmp/munge/sock
CredType=cred/munge
StateSaveLocation=$tmp/ctld
SlurmdSpoolDir=$tmp/spool/%n
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd-%n.pid
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
KillWait=2
MessageTimeout=5
NodeName=node1 NodeAddr=$(mh_addr 1) CPUs=4 State=UNKNOWN
NodeName=node2 NodeAddr=$(mh_addr 2) CPUs=4 State=UNKNOWN
NodeName=node3 NodeAddr=$(mh_addr 3) CPUs=4 State=UNKNOWN
PartitionName=test Nodes=node[1-3] Default=YES MaxTime=INFINITE State=UP
EOF
SLURM_CONF=$tmp/slurm.conf
export SLURM_CONF
# daemon I NAME CMD...: CMD in host I as a host of its own: hostname NAME,
# its own /tmp
daemon() {
	d_i=$1 d_name=$2
	shift 2
	# shellcheck disable=SC2016 # the inner shell's
	mh_spawn "$d_i" 0 unshare --uts sh -c 'hostname "$0" && mount --bind "$1" /tmp &&
		shift && exec "$@"' "$d_name" "$tmp/node$d_i/tmp" "$@"
}
daemon $ctl ctl slurmctld -D -f "$SLURM_CONF" >"$tmp/slurmctld.out" 2>&1
for i in 1 2 3; do
	daemon "$i" "node$i" slurmd -D -f "$SLURM_CONF" >"$tmp/slurmd$i.out" 2>&1
done
idle3() { [ "$(in_ctl sinfo -h -o '%D %T' 2>/dev/null)" = "3 idle" ]; }
if ! until_ok 20 idle3; then
	for f in "$tmp"/slurm*.out; do diag "$f"; done
	in_ctl sinfo >"$tmp/sinfo.out" 2>&1
	diag "$tmp/sinfo.out"
	skip_all "the test's Slurm cluster did not come up in 20 s (its daemons' words above)"
fi
echo "# Slurm cluster up in $(($(date +%s) - T0)) s: $(in_ctl sinfo -h -o '%P %D %T %N')"

# --- the data, a single-host reference, the trainer
"$G" synth "$tmp/data" --images 256 >/dev/null 2>&1
set -- --epochs 2 --batch 32 --size 96 --checksum --quiet
BENCH="$*"
# shellcheck disable=SC2086 # BENCH is a list of options
"$G" bench "$tmp/data" --workers 2 $BENCH >"$tmp/ref.json" 2>"$tmp/ref.err"
ref=$(sums "$tmp/ref.json")
echo "# single-host checksums: $ref"
# the trainer (TRAIN, given --node SOCK): on the job's first node, two bench
# runs, run R once $tmp/JOB.goR exists (30 s at most), then JOB.doneR
cat >"$tmp/trainer.sh" <<EOF
#!/bin/sh
[ "\$SLURM_NODEID" = 0 ] || exit 0
j=$tmp/\$SLURM_JOB_ID
for r in 1 2; do
	k=0
	while [ ! -e "\$j.go\$r" ] && [ \$k -lt 300 ]; do sleep 0.1; k=\$((k + 1)); done
	"$G" bench "$tmp/data" $BENCH "\$@" >"\$j.run\$r.json" 2>"\$j.run\$r.err" || exit 1
	touch "\$j.done\$r"
done
EOF
# submit NAME VAR=VALUE...: sbatch train.sbatch on the three nodes, one CPU
# each (--exclusive=user: the same user's jobs share nodes); prints the job id
submit() {
	s_name=$1
	shift
	in_ctl env -C "$tmp/submit" HOME="$tmp/home" GOLDMINER="$G" GM_DEPLOY_DIR="$repo/deploy/slurm" \
		GM_LEND_ROOT="$tmp" TRAIN="sh $tmp/trainer.sh" UCX_NET_DEVICES=gm0 \
		UCX_WARN_UNUSED_ENV_VARS=n GM_WAIT_S=20 "$@" \
		sbatch --parsable -N3 --ntasks-per-node=1 --cpus-per-task=1 --exclusive=user \
		-J "$s_name" -o "$tmp/submit/job-%j.out" \
		"$repo/deploy/slurm/train.sbatch" 2>>"$tmp/sbatch.err"
}
state() { in_ctl scontrol -o show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p'; }
ended() { case $(state "$1") in COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL) return 0 ;; esac; return 1; }
# nodelog JOB I: job JOB's log of node I
nodelog() { echo "$tmp/submit/goldminer-agents-$1-node$2.log"; }
# ups JOB: how many of JOB's agents said they are up
ups() { cat "$(nodelog "$1" 1)" "$(nodelog "$1" 2)" "$(nodelog "$1" 3)" 2>/dev/null | grep -c "agent up ("; }
all3() { [ "$(ups "$1")" = 3 ]; }
both3() { all3 "$a" && all3 "$b"; }
# apid JOB I: the pid of JOB's agent on node I (its keeper's last "up" line)
apid() { sed -n 's/.*agent up.* (pid \([0-9]*\),.*/\1/p' "$(nodelog "$1" "$2")" 2>/dev/null | tail -1; }
aport() { sed -n 's/.*agent up.* (pid [0-9]*, port \([0-9]*\)).*/\1/p' "$(nodelog "$1" "$2")" 2>/dev/null | tail -1; }
# status JOB I: JOB's agent on node I, its --status (its socket is node I's /tmp)
status() { "$G" node --socket "$tmp/node$2/tmp/goldminer-$1.sock" --status 2>/dev/null; }
jobdiag() { # jobdiag JOB: its output and its nodes' logs
	diag "$tmp/submit/job-$1.out" "job $1: "
	for i in 1 2 3; do diag "$(nodelog "$1" $i)" "job $1 node$i: "; done
}

# 1: two jobs at once on the same nodes
a=$(submit jobA)
b=$(submit jobB GM_NODE_ARGS="--cpus 1 --mem 256M")
echo "# jobs $a and $b submitted"
ok=1
until_ok 25 both3 && [ "$(in_ctl squeue -h -j "$a,$b" -o %N | sort -u)" = "node[1-3]" ] &&
	[ -n "$(aport "$a" 1)" ] && [ -n "$(aport "$b" 1)" ] && [ "$(aport "$a" 1)" != "$(aport "$b" 1)" ] &&
	ok=0
[ $ok = 0 ] || { jobdiag "$a"; jobdiag "$b"; diag "$tmp/sbatch.err"; }
t $ok "two jobs on node[1-3] at once: 3 agents up in each, job $a's on port $(aport "$a" 1), job $b's on $(aport "$b" 1) ($(($(date +%s) - T0)) s)"

# 2: a clash: a third job on job A's port; how long it ran, by Slurm's clock
c=$(submit jobC GM_PORT="$(aport "$a" 1 | grep . || echo 7070)")
until_ok 30 ended "$c"
el=$(in_ctl scontrol -o show job "$c" | sed -n 's/.* StartTime=\([^ ]*\) EndTime=\([^ ]*\) .*/\1 \2/p' |
	{ read -r s e && echo $(($(date -d "$e" +%s) - $(date -d "$s" +%s))); })
el=${el:-99}
ok=1
[ "$(state "$c")" = FAILED ] && [ "$el" -le 10 ] &&
	grep -q "could not start on:" "$tmp/submit/job-$c.out" &&
	grep -q "if port $(aport "$a" 1) is taken.*set GM_PORT" "$tmp/submit/job-$c.out" &&
	grep -q "Address already in use" "$tmp/submit/job-$c.out" && ok=0
[ $ok = 0 ] || { echo "# job $c: $(state "$c") after $el s"; jobdiag "$c"; }
t $ok "a job given job $a's port (GM_PORT) fails at once ($el s), saying the port is taken and GM_PORT"

# 3: GM_NODE_ARGS
ok=0
for i in 1 2 3; do
	status "$b" $i >"$tmp/b$i.status"
	if ! grep -q '"budget": 1,' "$tmp/b$i.status" ||
		! grep -q '"mem_budget": 268435456,' "$tmp/b$i.status"; then
		ok=1
		diag "$tmp/b$i.status" "node$i: "
	fi
done
t $ok "GM_NODE_ARGS='--cpus 1 --mem 256M' reaches every agent of job $b (--status: budget 1, mem_budget 268435456)"

# 4: agents killed. Node2's while job A's first run goes on (the trainer
# attached: its agent lists one job), node1's between the runs.
touch "$tmp/$a.go1" "$tmp/$b.go1"
one_job() { status "$a" 1 | grep -q '"jobs": 1,'; }
until_ok 10 one_job
p2=$(apid "$a" 2)
[ -n "$p2" ] && kill -KILL "$p2"
until_ok 30 test -e "$tmp/$a.done1"
p1=$(apid "$a" 1)
[ -n "$p1" ] && kill -KILL "$p1"
again() { grep -q "agent up again" "$(nodelog "$a" 1)" && grep -q "agent up again" "$(nodelog "$a" 2)"; }
peers2() { [ "$(mh_peers "$tmp/node1/tmp/goldminer-$a.sock")" = 2 ]; }
ok=1
until_ok 20 again && until_ok 15 peers2 && [ "$(apid "$a" 1)" != "$p1" ] && [ "$(apid "$a" 2)" != "$p2" ] &&
	grep -q "the agent ended (killed by signal 9)" "$(nodelog "$a" 1)" && ok=0
[ $ok = 0 ] || { jobdiag "$a"; status "$a" 1 >"$tmp/a1.status"; diag "$tmp/a1.status"; }
t $ok "agents SIGKILLed (job $a's on node2 mid-run, pid ${p2:-?}; on node1 between runs, pid ${p1:-?}) are started again (pids $(apid "$a" 2), $(apid "$a" 1)), node1's with both peers connected"
touch "$tmp/$a.go2"

# 5: job B's agents' step cancelled as a whole
st=$(sed -n 's/.*keeper of step \([0-9]*\.[0-9]*\):.*/\1/p' "$(nodelog "$b" 1)" | head -1)
[ -n "$st" ] && in_ctl scancel "$st"
# steps JOB: how many keepers of a step other than $st say so
steps() { cat "$(nodelog "$1" 1)" "$(nodelog "$1" 2)" "$(nodelog "$1" 3)" 2>/dev/null | grep "keeper of step" | grep -vc "step $st:"; }
new3() { [ "$(steps "$b")" = 3 ] && [ "$(ups "$b")" = 6 ]; }
ok=1
[ -n "$st" ] && until_ok 20 new3 && ok=0
[ $ok = 0 ] || jobdiag "$b"
t $ok "job $b's agents' step cancelled (scancel ${st:-?}) is started again: $(steps "$b") keepers of a new step, $(ups "$b") agents up in all"
touch "$tmp/$b.go2"

# 5: both jobs complete with a single-host run's checksums
ok=1
until_ok 40 ended "$a" && until_ok 10 ended "$b" &&
	[ "$(state "$a")" = COMPLETED ] && [ "$(state "$b")" = COMPLETED ] && ok=0
for r in "$a.run1" "$a.run2" "$b.run1" "$b.run2"; do
	if [ -z "$ref" ] || [ "$(sums "$tmp/$r.json")" != "$ref" ]; then
		ok=1
		echo "# $r: $(sums "$tmp/$r.json")"
		diag "$tmp/$r.err"
	fi
done
[ $ok = 0 ] || { echo "# jobs: $a $(state "$a"), $b $(state "$b")"; jobdiag "$a"; jobdiag "$b"; }
t $ok "jobs $a and $b complete ($(state "$a"), $(state "$b")), all four trainer runs with the single-host checksums"

# 6: one log per node, none of the agents' lines in the job's output
ok=0
for j in "$a" "$b"; do
	for i in 1 2 3; do
		f=$(nodelog "$j" $i)
		if ! grep -q "listening on /tmp/goldminer-$j.sock" "$f" || ! grep -q "keeper of step $j\." "$f"; then
			ok=1
			echo "# $f: no agent's or keeper's line"
		fi
	done
	grep -q "goldminer node:" "$tmp/submit/job-$j.out" && { ok=1; diag "$tmp/submit/job-$j.out" "job $j: "; }
done
t $ok "one log per node and job (goldminer-agents-JOB-NODE.log), the job's output free of agents' lines"
echo "# $(($(date +%s) - T0)) s in all"
