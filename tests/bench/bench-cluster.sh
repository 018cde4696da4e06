#!/bin/sh
# The cluster experiment, over a family of scenarios: up to five hosts built with
# tests/multihost.sh (a network namespace and a CPU quota each), the real photos
# (PHOTOS), one node agent per host (`goldminer node --listen --secret
# --lend-root`), and the jobs of a scenario as `goldminer bench --node SOCK
# --consumer-rate R --workers W` trainers in their home hosts, each started at
# its submit time. Lending off (agents without --peers) and on (each agent has
# all the others as --peers), alternating, CLUSTER_RUNS times each (1 per seed;
# 3 for a fixed file; short: 1).
#
# The scenarios: by default the seeded family (`goldminer sim --scenario-gen SEED
# --epoch-images NIMG`: 1-3 CPU-poor hosts P1.., two lenders L1 L2 with their own
# rising and falling demand; ranges in docs/USAGE.md, "Scenario family"), one per
# seed of CLUSTER_SEEDS (default "1 101": minutes per seed). Seeds 1..99 are the
# tuning seeds (a controller or a cost may be adjusted on what they show); seeds
# 100 and up are held out (reported, never tuned on). CLUSTER_SCENARIO="FILE..."
# runs fixed files instead (CLUSTER_SHORT=1: traces/cluster-short.tsv), e.g.
# traces/cluster-unseen-1.tsv and -2.tsv, the two scenarios that first showed
# the controller failing on clusters it was not tuned to; a file with a `cost
# local_us` line has its rates scaled as the family's (scale_rates), one
# without runs as written.
#
# Per job: JCT (its submit to its trainer's exit), images, the images remote
# workers sent it (the home agent's --status, sampled every 0.5 s from outside
# the hosts, so the sampling costs no host any CPU). Per run: the average JCT,
# the GPU utilisation (delivered / demanded, time-weighted: the sum of the
# jobs' bounds over the sum of their JCTs, a job's bound being images / its
# consumer's rate) and the average JCT at the bound; and each host's CPU time
# (its cgroup, mh_usage). The costs the simulator takes come from one
# calibration before the scenarios, on traces/cluster.tsv's three hosts (A
# 0.25 core, B and C 0.75, whatever the scenarios): local_us (A's CPU
# per image a greedy trainer on A alone takes, lending off; beside it, reported
# only, job_cpu_s_cal, the CPU a job costs beside its images, from a one-epoch
# run: cluster_report.py says why the prediction leaves it out); remote_home_us and
# remote_lender_us (the same trainer lending on: A's CPU less its local images,
# over the remote ones; B's and C's CPU less their idle agents', over the same);
# the same calibration gives start_s (a trainer's launch to its first image)
# and remote_start_s (its first image to its first remote sample: the agent's
# first ask, a lent worker's start and first batch, with idle lenders);
# tests/bench/cluster_report.py adds, per scenario, the figures its own runs
# give (remote_worker_img_s, start_s).
#
# Then, per scenario, `goldminer sim --scenario` on it and the per-job JCT,
# simulated vs measured: the prediction judged uses the costs of this
# invocation's one calibration (local_us_cal, remote_home_us,
# remote_lender_us, remote_worker_img_s_cal, start_s_cal,
# remote_start_s_cal; the committed ones where it
# measured none), the same for every scenario; beside it the committed costs,
# and the costs fitted to the scenario's own runs (a diagnostic, not a
# prediction). The scenario's "feedable" (gm_scenario_feedable) is the share of
# the poor hosts' demand its CPUs can feed at best. Writes CLUSTER_OUT (default
# $B/bench-cluster): cal.tsv, and per scenario a folder (seed-N; fixed for one
# fixed file, fixed-NAME for each of several) with scenario.tsv, jobs.tsv (one row per
# run and job), runs.tsv, costs.tsv, sim-*.tsv, figures.tsv and summary.txt;
# prints each summary, then the family's: per seed (tuning or held out) and in
# total, the poor hosts' GPU use, the average JCT over the bound, the lenders'
# own loss (their jobs' JCT on over off) and the simulator's per-job error. A
# host is CPU-poor when it has under GM_NODE_FED_CORES (0.5) cores. Needs root
# for the namespaces and cgroups (skipped otherwise: loopback hosts without
# quotas would not be this experiment). A benchmark: it reports, it does not
# fail on a missed target (the machine may be shared; uptime's load is printed
# with the figures).
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
B=${B:-build}
case $B in /*) ;; *) B=$repo/$B ;; esac
G="$B/goldminer"
: "${PHOTOS:?PHOTOS must name an ImageFolder directory}"
FIXED=
if [ -n "${CLUSTER_SHORT:-}" ]; then
	FIXED=${CLUSTER_SCENARIO:-$repo/traces/cluster-short.tsv}
	RUNS=${CLUSTER_RUNS:-1}
elif [ -n "${CLUSTER_SCENARIO:-}" ]; then
	FIXED=$CLUSTER_SCENARIO
	RUNS=${CLUSTER_RUNS:-3}
else
	RUNS=${CLUSTER_RUNS:-1}
fi
SEEDS=${CLUSTER_SEEDS:-1 101}
for s in $SEEDS; do
	case $s in '' | *[!0-9]*) echo "cluster: CLUSTER_SEEDS: '$s' is not a seed (want numbers: \"1 2 101\")"; exit 1 ;; esac
done
MAXH=5 # hosts a scenario may have: the family's 3 poor hosts and 2 lenders
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
mh_setup $MAXH
if [ "$(mh_mode)" != netns ] || [ "$MH_CGROUP" = none ] || [ -z "$(mh_usage 1)" ]; then
	echo "cluster: skipped (needs network namespaces, CPU quotas and CPU accounting:" \
		"mode $(mh_mode) $(mh_why), cgroup $MH_CGROUP)"
	exit 0
fi
# A 20 ms quota period, as bench-remote.sh: a quarter core runs 5 ms in every 20,
# so A's agent is never away for 75 ms at a time.
MH_PERIOD=${MH_PERIOD_US:-20000}
mkdir -p "$OUT" || exit 1
rm -rf "$OUT"/seed-* "$OUT"/fixed "$OUT"/fixed-* "$OUT"/*.tsv "$OUT"/*.txt "$OUT"/*.log
mh_ucx_env
mh_secret "$tmp/secret"
# the agents' ports above Linux's ephemeral range (32768-60999): a UCX connection
# of an earlier run in the same namespace cannot hold the port the next run's
# agent listens on (seed 1's first run lost its P2 agent so, at 38705)
port=$((61000 + $$ % 2000))
NIMG=$(find "$PHOTOS" -type f -iname '*.jp*g' | wc -l)

# use_scenario FILE: its nodes (index = host number, in file order: name cores
# worker budget) into $tmp/nodes, its jobs (name home submit images rate
# workers) into $tmp/jobs, NH hosts; 1 after a message if the bench cannot run it
use_scenario() {
	awk -F'\t' '$1 == "node" { print $2, $3, ($4 != "" ? $4 : $3) }' "$1" >"$tmp/nodes"
	awk -F'\t' '$1 == "job" { print $2, $3, $4, $5, $6, ($7 != "" ? $7 : "auto") }' "$1" |
		sort -s -k3,3n >"$tmp/jobs"
	NH=$(wc -l <"$tmp/nodes")
	if [ "$NH" -lt 2 ] || [ "$NH" -gt $MAXH ]; then
		echo "cluster: $1: want 2..$MAXH node lines, not $NH"
		return 1
	fi
	while read -r name home sub img rate w; do
		[ -n "$(host_of "$home")" ] || { echo "cluster: $1: job $name: no node $home"; return 1; }
		[ $((img % NIMG)) = 0 ] ||
			{ echo "cluster: $1: job $name: $img images is not whole epochs of $NIMG" \
				"(goldminer sim --scenario-gen SEED --epoch-images $NIMG)"; return 1; }
	done <"$tmp/jobs"
}
host_of() { awk -v n="$1" '$1 == n { print NR }' "$tmp/nodes"; }

# agents MODE: one agent per host of $tmp/nodes under its quota (CORES), with
# --cpus WORKERS where the node line gives a worker budget (its cores stay the
# quota: the agent takes the least of --cpus and the quota) and --cpus CORES
# otherwise; MODE on gives each all the others as --peers. Logs in $SO, each
# line timed (GOLDMINER_LOG_TIME=1: the hosts' events side by side).
agents() {
	i=1
	while read -r name cores cpus; do
		peers=
		if [ "$1" = on ]; then
			k=1
			while [ $k -le "$NH" ]; do
				[ $k = $i ] || peers="$peers${peers:+,}$(mh_addr $k):$((port + k))"
				k=$((k + 1))
			done
		fi
		GOLDMINER_LOG_TIME=1 mh_agent $i "$cores" "$tmp/$i.sock" --cpus "$cpus" \
			--listen "$(mh_addr $i):$((port + i))" ${peers:+--peers "$peers"} \
			--secret "$tmp/secret" --lend-root "$(dirname "$PHOTOS")" \
			>"$SO/agent-$run-$1-$name.log" 2>&1 ||
			{ echo "cluster: agent $i did not start (no socket within 10 s: $SO/agent-$run-$1-$name.log)"; return 1; }
		i=$((i + 1))
	done <"$tmp/nodes"
	sleep 1 # an agent that cannot listen ends (and its socket goes) within this
	i=1
	while [ $i -le "$NH" ]; do
		[ -S "$tmp/$i.sock" ] ||
			{ echo "cluster: agent $i ended at its start (its log: $SO/agent-$run-$1-*.log)"; return 1; }
		i=$((i + 1))
	done
	[ "$1" = on ] || return 0
	i=1
	while [ $i -le "$NH" ]; do # every agent has all its peers connected
		mh_connected "$tmp/$i.sock" $((NH - 1)) ||
			{ echo "cluster: agent $i: peers not connected within 10 s"; return 1; }
		i=$((i + 1))
	done
}
stop_agents() {
	mh_agents_stop
	rm -f "$tmp"/*.sock
	port=$((port + 10)) # no wait for the old ports' TIME_WAIT
}
now() { date +%s.%N; }
# every host's CPU ns, in $tmp/nodes order
usage_all() {
	u=""
	i=1
	while [ $i -le "$NH" ]; do u="$u${u:+ }$(mh_usage $i)"; i=$((i + 1)); done
	echo "$u"
}

# experiment MODE: one run of the scenario in $tmp/nodes and jobs; appends to
# $SO/raw.tsv and usage.txt
experiment() {
	mode=$1
	agents "$mode" || { stop_agents; return 1; }
	d="$tmp/run-$tag-$run-$mode"
	mkdir -p "$d"
	u0=$(usage_all)
	t0=$(now)
	# the home agents' status every 0.5 s from the start until every trainer is
	# done (in the background: the jobs are launched at their submit times)
	(
		while [ ! -f "$d/done" ]; do
			i=1
			while [ $i -le "$NH" ]; do
				st=$("$G" node --socket "$tmp/$i.sock" --status 2>/dev/null) &&
					echo "$i $(now) $st" >>"$d/status"
				i=$((i + 1))
			done
			sleep 0.5
		done
	) &
	poller=$!
	pids=
	while read -r name home sub img rate w; do
		h=$(host_of "$home")
		# sleep until t0 + submit
		dt=$(awk -v t0="$t0" -v s="$sub" -v n="$(now)" 'BEGIN { x = t0 + s - n; print (x > 0 ? x : 0) }')
		sleep "$dt"
		set -- --consumer-rate "$(awk -v r="$rate" -v b=$BATCH 'BEGIN { print r / b }')"
		[ "$rate" = 0 ] && set --
		# shellcheck disable=SC2016 # the inner shell's
		mh_spawn "$h" - sh -c '"$@" >"$0.json" 2>"$0.err" & echo $! >"$0.pid"; wait $!
			echo $? >"$0.rc"; date +%s.%N >"$0.end"' "$d/$name" \
			"$G" bench "$PHOTOS" --node "$tmp/$h.sock" --workers "$w" --batch $BATCH \
			--epochs $((img / NIMG)) --quiet "$@"
		pids="$pids $MH_PID"
	done <"$tmp/jobs"
	for p in $pids; do wait "$p"; done
	: >"$d/done"
	wait $poller
	u1=$(usage_all)
	t1=$(now)
	stop_agents
	echo "$run $mode $t0 $t1 $u0 $u1" >>"$SO/usage.txt"
	while read -r name home sub img rate w; do
		[ "$(cat "$d/$name.rc" 2>/dev/null)" = 0 ] ||
			{ echo "cluster: run $run $mode: job $name failed:"; cat "$d/$name.err"; }
		echo "$run	$mode	$name	$home	$sub	$img	$rate	$t0	$(cat "$d/$name.end" 2>/dev/null)	$(cat "$d/$name.pid" 2>/dev/null)	$(tail -1 "$d/$name.json" 2>/dev/null)" >>"$SO/raw.tsv"
	done <"$tmp/jobs"
	cp "$d/status" "$SO/status-$run-$mode.txt" 2>/dev/null
	return 0
}

# calibrate MODE EPOCHS [HOST]: one greedy trainer on A alone (B and C idle; the
# calibration's three hosts), lending MODE (off, on, or short: off with one
# epoch, whose CPU beside off's parts a job's own cost from its images'; or
# lender: off with one epoch on HOST 2, B, its consumer paced at LEAD_RATE
# img/s, well under what B's worker makes, whose agent's readings give the CPU
# a lender's paced job spends ahead of its consumer: a greedy one's ring never
# fills, and showed none on A or B, where the seeds' lenders' paced jobs
# showed 0.14-0.30 s); a row
# of cal.tsv: mode, images,
# remote images, each host's CPU s, wall s, the most remote workers it had at once,
# its start-up (launch to first image) and launch to first remote sample (- if none),
# and the CPU its workers spent ahead of its consumer as its agent's readings
# count it (- if too few).
# Lending on, B and C run nothing of their own, so their CPU is the lent images'.
calibrate() {
	run="cal"
	ch=${3:-1} # the host the trainer runs on
	pace= # a lender's job is paced, the others greedy
	[ "$1" = lender ] && pace="--consumer-rate $(awk -v r="$LEAD_RATE" -v b=$BATCH 'BEGIN { print r / b }')"
	agents "$1" || { stop_agents; return 1; }
	d="$tmp/cal-$1"
	# each pair's own polls: appended to the last pair's, the most remote samples
	# (and workers) any poll saw were the first pair's in every later row
	rm -rf "$d"
	mkdir -p "$d"
	u0=$(usage_all)
	t0=$(now)
	# shellcheck disable=SC2086 # pace is a list of options
	mh_spawn "$ch" - "$G" bench "$PHOTOS" --node "$tmp/$ch.sock" --workers auto --batch $BATCH \
		--epochs "$2" $pace --quiet >"$d/json" 2>"$d/err"
	p=$MH_PID
	while kill -0 "$p" 2>/dev/null; do
		st=$("$G" node --socket "$tmp/$ch.sock" --status 2>/dev/null) && echo "$(now) $st" >>"$d/all"
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
	# start-up: from the launch to the first image (the trainer's wall clock
	# runs from its dataset open on); and to the first remote sample a poll saw
	# (its agent's first ask, a lent worker's start, connection and batch)
	ws=$(sed -n 's/.*"wall_s": \([0-9.]*\).*/\1/p' "$d/json")
	os=$(sed -n 's/.*"open_s": \([0-9.]*\).*/\1/p' "$d/json")
	fr=$(awk -v t0="$t0" '{ if (match($0, /"remote_samples": [1-9]/)) { print $1 - t0; exit } }' "$d/all" 2>/dev/null)
	# the CPU its workers spent ahead of its consumer (its ring's fill, their
	# start), as its agent's rate reading counts it: the agent's readings (its
	# workers' CPU s against the local samples, each distinct one once) fitted
	# by a line, whose value at no sample is that CPU
	sc=$(sed -n 's/.*"worker_cpu_s": \([0-9.]*\), "local_samples": \([0-9]*\).*/\2 \1/p' "$d/all" 2>/dev/null |
		awk '$1 > 0 && !seen[$0]++ { n++; sx += $1; sy += $2; sxx += $1 * $1; sxy += $1 * $2 }
			END { d = n * sxx - sx * sx
				if (n >= 3 && d > 0) printf "%.4f", (sy * sxx - sx * sxy) / d; else print "-" }')
	echo "$1 ${img:-0} $rem $u0 $u1 $t0 $t1 $rw ${ws:--} ${os:--} ${fr:--} ${sc:--}" | awk '{
		w = $11 - $10
		printf "%s\t%d\t%d\t%.4f\t%.4f\t%.4f\t%.3f\t%d\t%s\t%s\t%s\n", $1, $2, $3, ($7 - $4) / 1e9,
			($8 - $5) / 1e9, ($9 - $6) / 1e9, w, $12,
			$13 == "-" ? "-" : sprintf("%.3f", w - $13 + $14), $15 == "-" ? "-" : sprintf("%.3f", $15), $16 }' >>"$OUT/cal.tsv"
}

rc=0
# the per-image costs on the real path, once for every scenario: a greedy trainer
# on A alone, lending off then on (the remote images it gets cost A receive, B and
# C decode and send), on traces/cluster.tsv's three hosts whatever the scenarios
SO=$OUT
tag="cal"
for f in $FIXED; do # each fixed file readable before the minutes of calibration
	use_scenario "$f" || exit 1
done
use_scenario "$repo/traces/cluster.tsv" || exit 1
[ "$NH" = 3 ] || { echo "cluster: the calibration wants 3 hosts (home, two lenders)"; exit 1; }
echo "cluster: ${FIXED:+fixed files }${FIXED:-seeds $SEEDS}, $RUNS run(s) each way, $NIMG photos," \
	"calibration hosts (name cores --cpus) $(tr '\n' ' ' <"$tmp/nodes"), cgroup $MH_CGROUP;" \
	"load before: $(uptime | sed 's/.*load/load/')"
CAL_EPOCHS=${CLUSTER_CAL_EPOCHS:-$([ -n "${CLUSTER_SHORT:-}" ] && echo 2 || echo 4)}
# CLUSTER_CAL_RUNS pairs (off, on; 3, short: 1): the report takes each cost's
# median over the pairs, local_us's least. One pair's local_us drifted 411-446 us between
# invocations on a quiet machine (one run's own 399-412), enough to put a
# lending-off job 15% off the simulator.
CAL_RUNS=${CLUSTER_CAL_RUNS:-$([ -n "${CLUSTER_SHORT:-}" ] && echo 1 || echo 3)}
case $CAL_RUNS in '' | *[!0-9]* | 0) echo "cluster: CLUSTER_CAL_RUNS: '$CAL_RUNS' is not a count (1 or more)"; exit 1 ;; esac
printf 'mode\timages\tremote_images\tcpu_s_A\tcpu_s_B\tcpu_s_C\twall_s\tremote_workers\tstart_s\tfirst_remote_s\tlead_cpu_s\n' >"$OUT/cal.tsv"
cal_k=1 # (not k: agents() counts with it)
LEAD_RATE=${CLUSTER_LEAD_RATE:-400} # img/s: calibrate lender's pace
while [ $cal_k -le "$CAL_RUNS" ]; do
	calibrate off "$CAL_EPOCHS" || rc=1
	calibrate on "$CAL_EPOCHS" || rc=1
	calibrate short 1 || rc=1
	calibrate lender 1 2 || rc=1
	echo "cluster: calibration $cal_k of $CAL_RUNS done: $(tail -4 "$OUT/cal.tsv" | tr '\t\n' ' ')"
	cal_k=$((cal_k + 1))
done

# scenario TAG FILE SEED ROLE: the runs of one scenario into $OUT/TAG, its report
scenario() {
	tag=$1
	SO=$OUT/$1
	mkdir -p "$SO" || return 1
	cp "$2" "$SO/scenario.tsv" && cp "$OUT/cal.tsv" "$SO/cal.tsv" || return 1
	use_scenario "$SO/scenario.tsv" || return 1
	echo "cluster: $1 ($4): $(grep -c '^job' "$SO/scenario.tsv") jobs on hosts" \
		"$(tr '\n' ' ' <"$tmp/nodes")"
	run=1
	while [ $run -le "$RUNS" ]; do
		for mode in off on; do
			experiment $mode || return 1
			echo "cluster: $1 run $run lending $mode done ($(uptime | sed 's/.*load/load/'))"
		done
		run=$((run + 1))
	done
	uptime | sed 's/.*load/load/' >"$SO/load.txt"
	python3 "$here/cluster_report.py" "$SO" "$G" "$NIMG" "$3" "$4"
}

# scale_rates IN OUT: the family's jobs drawn feedable at the committed costs
# (traces/cluster.tsv's machine); on this machine their rates times that
# machine's local_us over this calibration's, their submit times over it (the
# same images: each job as long, in this machine's time, as drawn, and the
# overlaps as drawn; CLUSTER_SCALE=0: as drawn), so a seed loads this machine's
# CPUs as it loaded that one's (an Intel Xeon here
# decoded at 476-530 us where the family was drawn at 335, and the same seeds
# became 0.37-0.71 feedable: the targets would have measured the machine).
scale_rates() {
	f=1
	if [ "${CLUSTER_SCALE:-1}" != 0 ]; then
		f=$(awk -F'\t' -v cal="$OUT/cal.tsv" '$1 == "cost" && $2 == "local_us" { c = $3 }
			END { while ((getline l < cal) > 0) { split(l, a, "\t")
				if (a[1] == "off" && a[2] > 0) v[++n] = 1e6 * a[4] / a[2] }
			u = v[1] # the least: as local_us_cal in cluster_report.py (it says why)
			for (i = 2; i <= n; i++) if (v[i] < u) u = v[i]
			if (c > 0 && u > 0) printf "%.4f", c / u; else print 1 }' "$1")
	fi
	awk -F'\t' -v OFS='\t' -v f="$f" 'NR == 2 && f != 1 {
		print "# Job rates x " f ", submit times / " f ": the committed local_us over this machine'"'"'s calibrated one (bench-cluster.sh scale_rates)" }
		$1 == "job" { r = int($6 * f + 0.5); $6 = r < 1 ? 1 : r; $4 = sprintf("%.2f", $4 / f) }
		{ print }' "$1" >"$2" || return 1
	[ "$f" = 1 ] || echo "cluster: the job rates x $f, submit times / $f (the committed local_us over this machine's)"
}

if [ -n "$FIXED" ]; then
	for f in $FIXED; do
		name=$(basename "$f" .tsv)
		dir=fixed
		[ "$(echo "$FIXED" | wc -w)" = 1 ] || dir=fixed-$name
		scale_rates "$f" "$tmp/fixed.tsv" || { rc=1; continue; }
		scenario "$dir" "$tmp/fixed.tsv" "$name" fixed || rc=1
	done
else
	for seed in $SEEDS; do
		role=tuning
		[ "$seed" -ge 100 ] && role=held-out
		"$G" sim --scenario-gen "$seed" --epoch-images "$NIMG" --out "$tmp/gen0.tsv" ||
			{ rc=1; continue; }
		scale_rates "$tmp/gen0.tsv" "$tmp/gen.tsv" || { rc=1; continue; }
		scenario "seed-$seed" "$tmp/gen.tsv" "$seed" "$role" || rc=1
	done
fi
python3 "$here/cluster_report.py" --family "$OUT" || rc=1
exit $rc
