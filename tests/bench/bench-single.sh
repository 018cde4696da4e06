#!/bin/sh
# The single-job target of pooling in a cluster: a greedy trainer on host A under a
# quarter core, alone, then fed by three peer hosts of half a core each
# (tests/multihost.sh: a network namespace and a CPU quota per host, UCX over
# TCP between them; real photos, PHOTOS). The target is 5x the trainer-only
# rate (the cores would give 7x: 1.75 / 0.25).
#   1. rounds alternate: the trainer alone (host A's plain agent, --cpus 0.25),
#      then fed (host A's other agent, which lends and borrows, with the three
#      peers): img/s both ways per round, the ratio of the medians; for each
#      fed round what the peers' cgroups used of their quota and how idle the
#      machine was (this machine's two cores are shared: a fed round whose
#      peers did not get their quota says so, instead of a low figure alone);
#   2. one epoch each way with --checksum: the per-epoch checksums of the
#      fed run must equal the trainer-only one's;
#   3. a restarted peer lends again: its agent SIGKILLed mid-job (its lent
#      worker dies with it), started again at once on its port: the seconds
#      from the restart to the home seeing it connected, to its first lent
#      worker connected to the home, and to the home counting samples from it
#      (the target is 3 s; a bound of 20 s fails the bench).
# The trainers do not hash in the timed rounds (hashing 600 MB/s would take
# host A's quarter core). Needs root for the namespaces and cgroups
# (elsewhere: skipped, said). Env: B, PHOTOS, SINGLE_ROUNDS (3),
# SINGLE_EPOCHS_ALONE (3), SINGLE_EPOCHS_FED (16), SINGLE_RESTART (1; 0: not 3.),
# SINGLE_MTU (jumbo frames: a figure apart from the target's).
# Not here: the cluster experiment (bench-cluster.sh) or the remote cost of
# one worker (bench-remote.sh).
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
B=${B:-build}
case $B in /*) ;; *) B=$repo/$B ;; esac
G="$B/goldminer"
PHOTOS=${PHOTOS:-/var/tmp/goldminer-photos}
ROUNDS=${SINGLE_ROUNDS:-3}
EA=${SINGLE_EPOCHS_ALONE:-3}
EF=${SINGLE_EPOCHS_FED:-16}
if [ ! -f "$B/libgoldminer-remote.so" ]; then
	echo "single: skipped (no $B/libgoldminer-remote.so: UCX not installed; make deps && make)"
	exit 0
fi
tmp=$(mktemp -d)
# shellcheck source=tests/multihost.sh
. "$repo/tests/multihost.sh"
MH_ATEXIT="rm -rf '$tmp'"
mh_setup 4
if [ "$(mh_mode)" != netns ] || [ "$MH_CGROUP" = none ]; then
	echo "single: skipped (hosts in mode $(mh_mode), cgroup $MH_CGROUP: needs namespaces and CPU quotas; $(mh_why))"
	exit 0
fi
# SINGLE_MTU=9000: jumbo frames on every link (a measurement apart, not the target's)
if [ -n "${SINGLE_MTU:-}" ]; then
	for i in 1 2 3 4; do
		mh_ip -n "${MH_TAG}s" link set "h$i" mtu "$SINGLE_MTU"
		mh_ip -n "${MH_TAG}h$i" link set gm0 mtu "$SINGLE_MTU"
	done
	echo "single: every link's MTU is $SINGLE_MTU"
fi
# a 20 ms quota period, as bench-remote.sh says why
MH_PERIOD=20000
mh_ucx_env
mh_secret "$tmp/secret"
port=$((30000 + $$ % 20000))
peers="$(mh_addr 2):$((port + 2)),$(mh_addr 3):$((port + 3)),$(mh_addr 4):$((port + 4))"
echo "single: load before: $(uptime | sed 's/.*load average/load average/')"

pid4='' # set by peer() through eval (peer 4's is the one restarted)
# peer I: host I's agent, half a core, lending PHOTOS' directory to A's home
peer() {
	mh_agent "$1" 0.5 "$tmp/$1.sock" --cpus 0.5 \
		--listen "$(mh_addr "$1"):$((port + $1))" --peers "$(mh_addr 1):$((port + 1))" \
		--secret "$tmp/secret" --lend-root "$(dirname "$PHOTOS")" >>"$tmp/agent$1.log" 2>&1
	eval "pid$1=\$MH_PID"
}
mh_agent 1 0.25 "$tmp/alone.sock" --cpus 0.25 >"$tmp/alone.log" 2>&1
mh_agent 1 - "$tmp/home.sock" --cpus 0.25 \
	--listen "$(mh_addr 1):$((port + 1))" --peers "$peers" --secret "$tmp/secret" \
	--lend-root "$(dirname "$PHOTOS")" >"$tmp/home.log" 2>&1
for i in 2 3 4; do peer $i; done
status() { mh_run 1 - "$G" node --socket "$tmp/home.sock" --status 2>/dev/null; }
# the three peers connected and heard (their heartbeats say what they lend)
mh_connected "$tmp/home.sock" 3 || echo "single: after 10 s the home has fewer than 3 peers connected"
sleep 0.5

field() { sed -n "s/.*\"$1\": \\([0-9.]*\\).*/\\1/p" "$2" | head -1; }
sums() { sed -n 's/.*"checksum": \[\([^]]*\)\].*/\1/p' "$tmp/run.json"; }
# trainer SOCKET EPOCHS [ARGS]: img/s (the JSON in $tmp/run.json)
trainer() {
	s=$1 e=$2
	shift 2
	mh_run 1 - "$G" bench "$PHOTOS" --node "$tmp/$s.sock" --epochs "$e" --workers auto \
		--batch 32 --quiet "$@" >"$tmp/run.json" 2>"$tmp/run.err"
	field img_per_s "$tmp/run.json"
}
# steady: the last run's img/s after its first epoch (bench's epoch_end_s): the
# workers' start and the home's borrowing ramp (it asks for one worker, then, as
# delivery grows, for the rest: about a second) left out, as a training job of
# hours sees them
steady() {
	sed -n 's/.*"dataset": \([0-9]*\).*"epoch_end_s": \[\([^]]*\)\].*/\1 \2/p' "$tmp/run.json" |
		tr -d ',' | awk '{ n = NF - 1; if (n >= 2 && $NF > $2) printf "%.1f", $1 * (n - 1) / ($NF - $2) }'
}
peers_ns() { echo $(($(mh_usage 2) + $(mh_usage 3) + $(mh_usage 4))); }
idle_ticks() { awk '$1 == "cpu" { print $5 + $6 }' /proc/stat; }
all_ticks() { awk '$1 == "cpu" { s = 0; for (i = 2; i <= NF; i++) s += $i; print s }' /proc/stat; }

a_all='' f_all='' as_all='' fs_all='' use_all='' idle_all='' acpu=0 aimg=0 pcpu=0 hcpu=0 fimg=0
r=0
while [ $r -lt "$ROUNDS" ]; do
	h0=$(mh_usage 1)
	a_all="$a_all $(trainer alone "$EA")"
	as_all="$as_all $(steady)"
	h1=$(mh_usage 1)
	acpu=$((acpu + h1 - h0)) aimg=$((aimg + $(field images "$tmp/run.json")))
	u0=$(peers_ns) i0=$(idle_ticks) c0=$(all_ticks) t0=$(date +%s%N)
	f_all="$f_all $(trainer home "$EF")"
	fs_all="$fs_all $(steady)"
	u1=$(peers_ns) i1=$(idle_ticks) c1=$(all_ticks) t1=$(date +%s%N) h2=$(mh_usage 1)
	pcpu=$((pcpu + u1 - u0)) hcpu=$((hcpu + h2 - h1)) fimg=$((fimg + $(field images "$tmp/run.json")))
	use_all="$use_all $(awk -v u=$((u1 - u0)) -v t=$((t1 - t0)) 'BEGIN { printf "%.0f%%", (t > 0 ? 100 * u / (t * 1.5) : 0) }')"
	idle_all="$idle_all $(awk -v i=$((i1 - i0)) -v c=$((c1 - c0)) 'BEGIN { printf "%.0f%%", (c > 0 ? 100 * i / c : 0) }')"
	r=$((r + 1))
done
rw=$(sed -n 's/.*asks the peers for \([0-9]*\) remote workers.*/\1/p' "$tmp/home.log" | sort -n | tail -1)
slots=$(sed -n 's/.*attached: .*a ring of \([0-9]* slots ([^)]*)\).*/\1/p' "$tmp/home.log" | tail -1)
trainer alone 1 --checksum >/dev/null
sum_alone=$(sums)
trainer home 1 --checksum >/dev/null
sum_fed=$(sums)
same=no
[ -n "$sum_alone" ] && [ "$sum_alone" = "$sum_fed" ] && same=yes
median() { echo "$1" | tr ' ' '\n' | grep . | sort -n | awk '{ v[NR] = $1 } END { print NR ? v[int((NR + 1) / 2)] : 0 }'; }
alone=$(median "$a_all")
fed=$(median "$f_all")
echo "single: trainer on A (0.25 core) alone:$a_all img/s; fed by 3 peers of 0.5 core" \
	"(${rw:-?} remote workers, ${slots:-? slots}):$f_all img/s"
echo "single: the peers used of their 1.5 cores in each fed round:$use_all; the machine idle:$idle_all"
# CPU time per image (the cgroups' counts: whatever else the machine runs, this
# is what the hosts spent), and the ratio the quotas allow at those costs
awk -v ac="$acpu" -v ai="$aimg" -v pc="$pcpu" -v hc="$hcpu" -v fi="$fimg" 'BEGIN {
	if (!(ai > 0 && fi > 0 && pc > 0)) exit
	a = ac / ai / 1000; p = pc / fi / 1000; h = hc / fi / 1000
	printf "single: CPU per image: trainer-only host A %.0f us (its worker, trainer and agent);", a
	printf " fed, the peers %.0f us, host A %.0f us;", p, h
	# the fed rate is the lesser of what the peers and host A can make at full quota
	f = 1.5 / p; if (h > 0 && 0.25 / h < f) f = 0.25 / h
	printf " at those costs the quotas allow %.2fx (peers %.2fx, host A %.2fx)\n", f / (0.25 / a), (1.5 / p) / (0.25 / a), (h > 0 ? (0.25 / h) / (0.25 / a) : 0) }'
echo "single: after the first epoch: alone:$as_all img/s; fed:$fs_all img/s"
awk -v a="${alone:-0}" -v f="${fed:-0}" -v sa="$(median "$as_all")" -v sf="$(median "$fs_all")" -v s="$same" 'BEGIN {
	printf "single: ratio %.2fx by medians over whole runs, %.2fx after the first epoch (target >= 5x, cores 7x); checksums equal: %s\n", (a > 0 ? f / a : 0), (sa > 0 ? sf / sa : 0), s }'
rc=0
[ "$same" = yes ] || { echo "single: FAIL: the fed run's checksums differ from the trainer-only run's"; rc=1; }

# 3. a peer restarted mid-job lends again: its agent SIGKILLed, started again at
# once; the home's --status polled every 50 ms (20 s at most)
if [ "${SINGLE_RESTART:-1}" = 0 ]; then
	echo "single: load after: $(uptime | sed 's/.*load average/load average/')"
	exit $rc
fi
mh_spawn 1 - "$G" bench "$PHOTOS" --node "$tmp/home.sock" --epochs 200 --workers auto \
	--batch 32 --quiet >"$tmp/long.json" 2>"$tmp/long.err"
long=$MH_PID
sleep 3
kill -KILL "$pid4"
wait "$pid4" 2>/dev/null
rm -f "$tmp/4.sock"
a4="$(mh_addr 4):$((port + 4))"
s0=$(date +%s%N)
peer 4
t_conn='' t_work='' t_lent='' seen0=''
k=0
while [ $k -lt 400 ] && [ -z "$t_lent" ]; do
	now=$(($(date +%s%N) - s0))
	st=$(status | tr '{' '\n' | grep "\"addr\": \"$a4\"")
	[ -n "${GM_BENCH_DEBUG:-}" ] && echo "# $now $st"
	[ -z "$t_conn" ] && echo "$st" | grep -q '"state": "connected"' && t_conn=$now
	w=$(echo "$st" | sed -n 's/.*"workers_connected": \([0-9]*\).*/\1/p')
	ips=$(echo "$st" | sed -n 's/.*"img_per_s": \([0-9.]*\).*/\1/p')
	# the killed agent's worker may still count until the home closes it
	[ "${w:-0}" = 0 ] && seen0=1
	[ -z "$t_work" ] && [ -n "$seen0" ] && [ -n "$t_conn" ] && [ "${w:-0}" -gt 0 ] && t_work=$now
	[ -n "$t_work" ] && awk -v v="${ips:-0}" 'BEGIN { exit !(v > 0) }' && t_lent=$now
	sleep 0.05
	k=$((k + 1))
done
kill "$long" 2>/dev/null
wait "$long" 2>/dev/null
sec() { awk -v n="${1:-}" 'BEGIN { if (n == "") print "never (20 s)"; else printf "%.2f s", n / 1e9 }'; }
echo "single: a peer agent SIGKILLed mid-job and restarted: connected to the home after" \
	"$(sec "$t_conn"), its first lent worker connected after $(sec "$t_work")," \
	"samples from it after $(sec "$t_lent") (target 3 s; the home's img/s per peer is a 1-s window)"
[ -n "$t_lent" ] || { echo "single: FAIL: the restarted peer lent nothing within 20 s"; sed 's/^/# home: /' "$tmp/home.log" | tail -20; sed 's/^/# peer 4: /' "$tmp/agent4.log" | tail -20; rc=1; }
[ -n "${GM_BENCH_DEBUG:-}" ] && { sed 's/^/# home: /' "$tmp/home.log"; sed 's/^/# peer 4: /' "$tmp/agent4.log"; }
echo "single: load after: $(uptime | sed 's/.*load average/load average/')"
exit $rc
