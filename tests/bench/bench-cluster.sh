#!/bin/sh
# The cluster experiment (issue 25 item 6, issue 28 item 4): three hosts built
# with tests/multihost.sh (a network namespace and a CPU quota each: A 0.25
# core, B and C 0.75), the real photos (PHOTOS), one node agent per host
# (`goldminer node --listen --secret --lend-root`), and the jobs of a scenario
# file (traces/cluster.tsv; CLUSTER_SHORT=1: traces/cluster-short.tsv) as
# `goldminer bench --node SOCK --consumer-rate R` trainers in their home hosts,
# each started at its submit time. Lending off (agents without --peers) and on
# (each agent has the other two as --peers), alternating, CLUSTER_RUNS times
# each (3; short: 1).
#
# Per job: JCT (its submit to its trainer's exit), images, the images remote
# workers sent it (the home agent's --status, sampled every 0.5 s from outside
# the hosts, so the sampling costs no host any CPU). Per run: the average JCT,
# the GPU utilisation (delivered / demanded, time-weighted: the sum of the
# jobs' bounds over the sum of their JCTs, a job's bound being images / its
# consumer's rate) and the average JCT at the bound; and each host's CPU time
# (its cgroup, mh_usage). From these, the costs the simulator takes, measured
# in the same run (tests/bench/cluster_report.py): local_us (the hosts' CPU per
# image their own workers decode and their trainers take, lending off);
# remote_home_us and remote_lender_us from a calibration first (a greedy trainer
# on A alone, B and C idle, lending off then on: A's CPU less its local images,
# over the remote ones; B's and C's CPU less their idle agents', over the same),
# or from the lending-on runs where the calibration counted no remote image;
# remote_worker_img_s (the remote images a job fed by remote workers alone got
# per remote-worker-second while its trainer waited, lending-on runs); start_s
# (launch to first image).
#
# Then `goldminer sim --scenario` on the same scenario, with the committed costs
# and with this run's, and the per-job JCT, simulated vs measured. Writes
# CLUSTER_OUT (default $B/bench-cluster): jobs.tsv (one row per run and job),
# runs.tsv (per run), costs.tsv, sim-*.tsv and summary.txt, and prints the
# summary. Needs root for the namespaces and cgroups (skipped otherwise: loopback
# hosts without quotas would not be this experiment). A benchmark: it reports,
# it does not fail on a missed target (the machine may be shared; uptime's load
# is printed with the figures).
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
B=${B:-build}
case $B in /*) ;; *) B=$repo/$B ;; esac
G="$B/goldminer"
: "${PHOTOS:?PHOTOS must name an ImageFolder directory}"
if [ -n "${CLUSTER_SHORT:-}" ]; then
	SCEN=${CLUSTER_SCENARIO:-$repo/traces/cluster-short.tsv}
	RUNS=${CLUSTER_RUNS:-1}
else
	SCEN=${CLUSTER_SCENARIO:-$repo/traces/cluster.tsv}
	RUNS=${CLUSTER_RUNS:-3}
fi
OUT=${CLUSTER_OUT:-$B/bench-cluster}
BATCH=32
if [ ! -f "$B/libgoldminer-remote.so" ]; then
	echo "cluster: skipped (no $B/libgoldminer-remote.so: UCX not installed; make deps && make)"
	exit 0
fi
tmp=$(mktemp -d)
# shellcheck source=tests/multihost.sh
. "$repo/tests/multihost.sh"
MH_ATEXIT="rm -rf '$tmp'"
mh_setup 3
if [ "$(mh_mode)" != netns ] || [ "$MH_CGROUP" = none ] || [ -z "$(mh_usage 1)" ]; then
	echo "cluster: skipped (needs network namespaces, CPU quotas and CPU accounting:" \
		"mode $(mh_mode) $(mh_why), cgroup $MH_CGROUP)"
	exit 0
fi
# A 20 ms quota period, as bench-remote.sh: a quarter core runs 5 ms in every 20,
# so A's agent is never away for 75 ms at a time.
MH_PERIOD=${MH_PERIOD_US:-20000}
mkdir -p "$OUT" || exit 1
rm -f "$OUT"/*.tsv "$OUT"/*.txt "$OUT"/*.log
cp "$SCEN" "$OUT/scenario.tsv"
mh_ucx_env
mh_secret "$tmp/secret"
port=$((30000 + $$ % 20000))
NIMG=$(find "$PHOTOS" -type f -iname '*.jp*g' | wc -l)

# The scenario: nodes (index = host number, in file order) and jobs.
awk -F'\t' '$1 == "node" { print $2, $3, ($4 != "" ? $4 : $3) }' "$SCEN" >"$tmp/nodes"
awk -F'\t' '$1 == "job" { print $2, $3, $4, $5, $6 }' "$SCEN" | sort -s -k3,3n >"$tmp/jobs"
[ "$(wc -l <"$tmp/nodes")" = 3 ] || { echo "cluster: $SCEN: want 3 node lines"; exit 1; }
host_of() { awk -v n="$1" '$1 == n { print NR }' "$tmp/nodes"; }
while read -r name home sub img rate; do
	[ -n "$(host_of "$home")" ] || { echo "cluster: $SCEN: job $name: no node $home"; exit 1; }
	[ $((img % NIMG)) = 0 ] ||
		{ echo "cluster: $SCEN: job $name: $img images is not whole epochs of $NIMG"; exit 1; }
done <"$tmp/jobs"

# agents MODE: one agent per host under its quota (CORES), with --cpus WORKERS
# where the node line gives a worker budget (its cores stay the quota: the agent
# takes the least of --cpus and the quota) and --cpus CORES otherwise; MODE on
# gives each the other two as --peers.
agents() {
	i=1
	while read -r name cores cpus; do
		peers=
		if [ "$1" = on ]; then
			for k in 1 2 3; do
				[ $k = $i ] || peers="$peers${peers:+,}$(mh_addr $k):$((port + k))"
			done
		fi
		mh_agent $i "$cores" "$tmp/$i.sock" --cpus "$cpus" \
			--listen "$(mh_addr $i):$((port + i))" ${peers:+--peers "$peers"} \
			--secret "$tmp/secret" --lend-root "$(dirname "$PHOTOS")" \
			>"$OUT/agent-$run-$1-$name.log" 2>&1 ||
			{ echo "cluster: agent $i did not start (no socket within 10 s: $OUT/agent-$run-$1-$name.log)"; return 1; }
		i=$((i + 1))
	done <"$tmp/nodes"
	[ "$1" = on ] || return 0
	for i in 1 2 3; do # every agent has its two peers connected
		mh_connected "$tmp/$i.sock" 2 ||
			{ echo "cluster: agent $i: peers not connected within 10 s"; return 1; }
	done
}
stop_agents() {
	mh_agents_stop
	rm -f "$tmp"/*.sock
	port=$((port + 10)) # no wait for the old ports' TIME_WAIT
}
now() { date +%s.%N; }
usage_all() { echo "$(mh_usage 1) $(mh_usage 2) $(mh_usage 3)"; }

# experiment MODE: one run of the scenario; appends to $OUT/raw.tsv
experiment() {
	mode=$1
	agents "$mode" || { stop_agents; return 1; }
	d="$tmp/run-$run-$mode"
	mkdir -p "$d"
	u0=$(usage_all)
	t0=$(now)
	# the home agents' status every 0.5 s from the start until every trainer is
	# done (in the background: the jobs are launched at their submit times)
	(
		while [ ! -f "$d/done" ]; do
			for i in 1 2 3; do
				st=$("$G" node --socket "$tmp/$i.sock" --status 2>/dev/null) &&
					echo "$i $(now) $st" >>"$d/status"
			done
			sleep 0.5
		done
	) &
	poller=$!
	pids=
	while read -r name home sub img rate; do
		h=$(host_of "$home")
		# sleep until t0 + submit
		dt=$(awk -v t0="$t0" -v s="$sub" -v n="$(now)" 'BEGIN { x = t0 + s - n; print (x > 0 ? x : 0) }')
		sleep "$dt"
		set -- --consumer-rate "$(awk -v r="$rate" -v b=$BATCH 'BEGIN { print r / b }')"
		[ "$rate" = 0 ] && set --
		# shellcheck disable=SC2016 # the inner shell's
		mh_spawn "$h" - sh -c '"$@" >"$0.json" 2>"$0.err" & echo $! >"$0.pid"; wait $!
			echo $? >"$0.rc"; date +%s.%N >"$0.end"' "$d/$name" \
			"$G" bench "$PHOTOS" --node "$tmp/$h.sock" --workers auto --batch $BATCH \
			--epochs $((img / NIMG)) --quiet "$@"
		pids="$pids $MH_PID"
	done <"$tmp/jobs"
	for p in $pids; do wait "$p"; done
	: >"$d/done"
	wait $poller
	u1=$(usage_all)
	t1=$(now)
	stop_agents
	echo "$run $mode $t0 $t1 $u0 $u1" >>"$OUT/usage.txt"
	while read -r name home sub img rate; do
		[ "$(cat "$d/$name.rc" 2>/dev/null)" = 0 ] ||
			{ echo "cluster: run $run $mode: job $name failed:"; cat "$d/$name.err"; }
		echo "$run	$mode	$name	$home	$sub	$img	$rate	$t0	$(cat "$d/$name.end" 2>/dev/null)	$(cat "$d/$name.pid" 2>/dev/null)	$(tail -1 "$d/$name.json" 2>/dev/null)" >>"$OUT/raw.tsv"
	done <"$tmp/jobs"
	cp "$d/status" "$OUT/status-$run-$mode.txt" 2>/dev/null
	return 0
}

# calibrate MODE EPOCHS: one greedy trainer on A alone (B and C idle), lending
# MODE; a row of cal.tsv: mode, images, remote images, each host's CPU s, wall s,
# the most remote workers it had at once.
# Lending on, B and C run nothing of their own, so their CPU is the lent images'.
calibrate() {
	run="cal"
	agents "$1" || { stop_agents; return 1; }
	d="$tmp/cal-$1"
	mkdir -p "$d"
	u0=$(usage_all)
	t0=$(now)
	mh_spawn 1 - "$G" bench "$PHOTOS" --node "$tmp/1.sock" --workers auto --batch $BATCH \
		--epochs "$2" --quiet >"$d/json" 2>"$d/err"
	p=$MH_PID
	while kill -0 "$p" 2>/dev/null; do
		"$G" node --socket "$tmp/1.sock" --status >>"$d/all" 2>/dev/null
		sleep 0.25
	done
	wait "$p" || { echo "cluster: calibration $1 failed:"; cat "$d/err"; }
	u1=$(usage_all)
	t1=$(now)
	stop_agents
	img=$(sed -n 's/.*"images": \([0-9]*\).*/\1/p' "$d/json")
	# the most remote samples any poll saw (the last one may come after the detach)
	rem=$(grep -o '"remote_samples": [0-9]*' "$d/all" 2>/dev/null | awk '$2 > m { m = $2 } END { print m + 0 }')
	rw=$(grep -o '"remote_workers": [0-9]*' "$d/all" 2>/dev/null | awk '$2 > m { m = $2 } END { print m + 0 }')
	echo "$1 ${img:-0} $rem $u0 $u1 $t0 $t1 $rw" | awk '{
		printf "%s\t%d\t%d\t%.4f\t%.4f\t%.4f\t%.3f\t%d\n", $1, $2, $3, ($7 - $4) / 1e9,
			($8 - $5) / 1e9, ($9 - $6) / 1e9, $11 - $10, $12 }' >>"$OUT/cal.tsv"
}

echo "cluster: $SCEN ($(grep -c '^job' "$SCEN") jobs), $RUNS run(s) each way, $NIMG photos," \
	"hosts (name cores --cpus) $(tr '\n' ' ' <"$tmp/nodes"), cgroup $MH_CGROUP; load before: $(uptime | sed 's/.*load/load/')"
rc=0
# the per-image costs on the real path: a greedy trainer on A alone, lending off
# then on (the remote images it gets cost A receive, B and C decode and send)
CAL_EPOCHS=${CLUSTER_CAL_EPOCHS:-$([ -n "${CLUSTER_SHORT:-}" ] && echo 2 || echo 4)}
printf 'mode\timages\tremote_images\tcpu_s_A\tcpu_s_B\tcpu_s_C\twall_s\tremote_workers\n' >"$OUT/cal.tsv"
calibrate off "$CAL_EPOCHS" || rc=1
calibrate on "$CAL_EPOCHS" || rc=1
echo "cluster: calibration done: $(tail -2 "$OUT/cal.tsv" | tr '\t\n' ' ')"
run=1
while [ $run -le "$RUNS" ]; do
	for mode in off on; do
		experiment $mode || rc=1
		echo "cluster: run $run lending $mode done ($(uptime | sed 's/.*load/load/'))"
	done
	run=$((run + 1))
done
uptime | sed 's/.*load/load/' >"$OUT/load.txt"
python3 "$here/cluster_report.py" "$OUT" "$G" "$NIMG" || rc=1
exit $rc
