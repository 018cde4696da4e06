#!/bin/sh
# Remote workers (data workers on other hosts) on one machine that behaves like several hosts
# (tests/multihost.sh: a network namespace per host joined through a bridge,
# a CPU quota per host; over loopback where namespaces cannot be made, and
# then it says so). Node agents talk UCX over TCP (UCX_TLS=tcp) through gm0.
# The trainer's host (1) is CPU-poor; its agent asks the peers for workers.
# Every run's per-epoch checksums must equal those of a single-host run:
#   1. one agent (listening, no peer): same bytes
#   2. two agents: same bytes, and the peer's workers really delivered samples
#   3. three agents: same bytes, both peers ran workers
#   4. the peer agent SIGKILLed mid-epoch: same bytes, its leases taken back
#   5. the peer's link cut (ip link set down) mid-epoch: same bytes (netns only)
#   6. a stale writer (remote workers SIGSTOPped past the lease deadline, then
#      resumed; again until one held a lease): fenced, same bytes
#   7. a peer with a wrong secret is refused, and so is a host not in --peers;
#      the job still completes with its local workers
#   8. samples by rendezvous (GOLDMINER_REMOTE_RNDV=1: received straight into
#      the slot): same bytes
#   9. bad remote options are refused in words: --peers without --listen, no
#      --secret, a secret file open to others, an unresolvable peer, a missing
#      plugin, an address not of this host, --lend-root without --listen, or
#      naming a file or nothing
#  10. no agent or remote worker wrote a sanitizer report or crashed (their
#      logs; under make sanitize the build is ASan+UBSan)
#  11. an agent restarted at once on its port, left in TCP TIME_WAIT, takes it
#      at once (the control port is goldminer's own socket, SO_REUSEADDR) and
#      its peer connects to it again
#  12. bad files, remote workers SIGKILLed again and again while they ship their
#      batches (the peer's link slowed where tc can): every bad file is named, as
#      in a single-host run, and the bytes are the same
# The lender decides what it lends (--lend-root; every lender above names the
# run's dataset, and strace, where present, watches the lender's file calls):
#  13. a root below no --lend-root (a sibling whose name starts like the lend
#      root's) is refused in fixed words, and no file under it is opened,
#      stat'ed or listed by the lender or its children; the listed root, asked
#      for in the same run, is lent and its files are seen in the same trace
#  14. a dataset with a symlink out of its lend root is refused without the
#      link's target being touched; one of more entries than --lend-max-files
#      is refused with no count; an agent with no --lend-root lends nothing
#  15. a slow index (strace delays the lender's getdents64) runs outside the
#      agent's loop: the agent answers --status throughout, and the LEND is
#      refused at --lend-index-ms; the job completes locally with the same bytes
# 16-25. a remote worker that misbehaves (the peer runs the test build of the
#      plugin, build/tests/libgoldminer-remote-test.so, once per case): each
#      refused, the home's log naming the peer and the rule, and the same bytes:
#  16. a publish with status 1 (END_OF_EPOCH)
#  17. a publish with status 2 (END)
#  18. a publish with status -5 (an errno no worker publishes)
#  19. a publish with status INT_MIN
#  20. a publish's error record for a sample outside the lease (no file named)
#  21. a sample's error record for an id past the dataset (no "(null)" named)
#  22. a sample with a wrong label (999999)
#  23. a sample with an id outside its lease
#  24. a resend loop: the lease's first sample again every 0.4 deadline; the
#      lease ends at its deadline all the same
#  25. a trickle: one new sample every 0.4 deadline; the lease ends at its
#      bound, 8 deadlines (or at 51's rule, which may come first)
#  26-28. a host not in --peers (host 3) attacks agent 1 while its trainer runs
#      8-epoch jobs one after another with agent 2's workers: every run has the
#      same checksums and agent 2's workers delivered samples in every run, the
#      agent never dies (netns only: over loopback every host is 127.0.0.1).
#      26: raw TCP connections to the control port (3,000; GM_FLOOD_FULL=1:
#      30,000), and to each port UCX listens on (which ss shows bound to the
#      host's address: none of them reaches it); 27: UCX client endpoints to the
#      control port re-opening as they fail (100 for 10 s; full: 300 for 30 s;
#      a third as many to each UCX port);
#      28: 2,000 connections held idle (the agent closes every one on the
#      control port; none reaches UCX's ports)
#  29. from a peer's address: a connection that drips its handshake is closed
#      after AUTH_MS (5 s), connections beyond 32 in their handshake are reset
#      at once, and the real peer connects again afterwards
# Discovery: the peers from DNS names and a file, not a fixed list
# (30-32 netns only: the agents share one port on their own addresses, and each
# host's /etc/netns/NAME/resolv.conf points at a small DNS server of the test's)
#  30. a name with the three agents' A records: every agent connects to the two
#      others and never to itself; the home's job gets its peers' workers and
#      the same bytes
#  31. an address taken out of the answer while a job runs: that peer is closed
#      within the refresh (its leases back, as on a cut link) and the bytes are
#      the same; put back: it is connected again
#  32. a dead DNS server: the agent starts, answers --status at once
#      throughout, connects to its numeric peer and says in words that the
#      name resolves to no address
#  33. --peers-file read again on SIGHUP: a peer added is connected, one taken
#      out is closed, a bad line is named FILE:LINE and the peers stay as they
#      were; a bad file at start is refused the same way
# Liveness: heartbeats every 250 ms, a peer silent for 1 s is down
#  34. the peer's link cut mid-job (netns only): the peer is "down" in --status
#      within ~1 s, the leases its workers held are taken back then (not at the
#      5 s lease deadline): the trainer's longest wait for a batch is printed
#      and under 3 s; healed, the peer is connected again and its workers
#      deliver again; same bytes
#  35. a lent worker SIGSTOPped mid-job: its lender kills it and a new one
#      replaces it within 2 s (time printed); the trainer's longest wait is
#      printed and under 3 s; same bytes
#  36. the idlest peer first: with --peers listing a peer that lends half a
#      core before one that lends a whole core, the job's one remote worker
#      goes to the whole core (each peer's lendable cores in --status); when
#      that peer's own job starts, it preempts the lent worker and the job's
#      worker moves to the other peer; same bytes
#  37. why a job has fewer remote workers: a peer with no --lend-root refuses
#      it; --status says so per reason and in words, with the --workers cap
#      that cut what it asks for; --metrics has the same per reason, and the
#      peer's liveness and lendable cores; the log says why it asks and why
#      the peer lends nothing
#  38. a remote worker holds a lease and one ahead, no more: a third claim is
#      refused, both leases taken back, same bytes
#  39. a job's ring holds a lease ahead per remote worker without --slots, and
#      is halved to what --mem holds; a peer agent SIGKILLed and restarted is
#      dialed back as it connects and lends again (seconds printed; bound 20 s);
#      same bytes
# Python jobs' workers on peers (/usr/bin/python3 with torch,
# else they skip saying so; tests/python/pyremote_job.py is the trainer):
#  40. a plain Dataset through agent 1 with a peer that lends Python workers
#      (--lend-python): the peer's Python workers made batches, and the
#      per-epoch checksums equal a local run's
#  41. the same for the hybrid pipeline (an ImageFolder with RandomResizedCrop,
#      flip, RandAugment, ToTensor as `goldminer run` plans it: crop and flip
#      in C, in the peer's Python workers)
#  42. declines: a peer without --lend-python, and one whose --lend-root does
#      not hold the dataset: --status names both reasons, the job runs locally
#      with the same checksums
#  43. the peer's Python workers SIGKILLed mid-job, again and again: the
#      batches are made again, same checksums
#  44. the Python job's peer's link cut mid-job (netns only): its leases are
#      taken back when it is down, the job completes with the same checksums
#      (its batches of 5 KB go eager, the others' by rendezvous)
#  45. the trainer's interpreter missing on the peer (a tmpfs over its
#      directory in the peer's mount namespace; netns only): declined in
#      --status, same checksums locally
#  46. a home its lender did not hear for QUIET_MS (its agent SIGSTOPped 3.5 s)
#      while it heard the lender: the lender stopped its workers, the home sees
#      in the lender's heartbeats fewer workers than granted and asks again;
#      the workers deliver again, same bytes
#  47. version skew: a remote worker's sample stamped in another build's layout
#      of SAMPLE (the test build's "layout") is refused as "another goldminer
#      version", naming the peer and both layouts; same bytes
#  48. two jobs of one home, a peer with one worker to lend: the second job does
#      not ask again and again for the worker its sibling holds
#  49. a lender's own job beside its guests: each guest paced by its lender to
#      a share of the cores the own job leaves (its exit line says so), same bytes
#  50. the same with a Python job's guests: each paced by its lender between
#      batches (its exit line says to what, and how long it waited), same bytes
#  51. a remote worker several times slower than the job's others (a trickle
#      within the default 5-s deadline: one sample every 2 s) holds the batch
#      the trainer waits for: its lease is revoked once the trainer waited 1 s
#      for it with the rest of the ring made (HEAD_MS), not at the lease's bound
#      (40 s); the batch is made again, same bytes
#  52. a job fed by the peer's workers alone (its home of 0.25 of a core runs no
#      local worker) whose peer agent is SIGKILLed: its local workers run
#      again as the remote ones go, not at the next measured window; same bytes
# (TAP numbers follow the order the cases run in: 10 comes last)
# Under a sanitizer build (make sanitize), 6, 12, 13-15, 16-18, 34-37, 39, 40-45, 46, 48, 49 and 50 skip,
# naming the tests that run their code under ASan: it keeps CI short, strace cannot
# share a process with LeakSanitizer, 16-18 take the path of 19 (INT_MIN), and
# 34-37 time rules in fractions of a second.
# TAP on stdout; every wait has a deadline. Env: B (build dir), GM_FLOOD_FULL=1
# (the acceptance's sizes for 26-28), GM_REMOTE_UPTO=N (stop after the Nth case
# in run order: a quick look at the first ones, not a full run).
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
B=${B:-build}
case $B in /*) ;; *) B=$repo/$B ;; esac
G="$B/goldminer"
tmp=$(mktemp -d)
n=0
t_last=$(date +%s)
t() { # t STATUS DESCRIPTION (and how long the case took, to see where time goes)
	n=$((n + 1))
	if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fi
	echo "# case $n took $(($(date +%s) - t_last)) s"
	t_last=$(date +%s)
	if [ "${GM_REMOTE_UPTO:-0}" -gt 0 ] && [ "$n" -ge "$GM_REMOTE_UPTO" ]; then
		stop_agents
		exit 0
	fi
}
diag() { sed 's/^/# /' "$1"; }
# ms_since T0: milliseconds since T0 (date +%s%N); here, not in a case's block: a
# case a sanitizer build skips must not take its helpers with it
ms_since() { echo $((($(date +%s%N) - $1) / 1000000)); }
# clock_start, then clock_gap: the longest the clock stood still between two
# reads of a shell loop that reads it every 0.1 s (ms): a machine that stopped
# (a shared host's stall) stops the processes it times too
clock_start() {
	(while :; do
		date +%s%N
		sleep 0.1
	done) >"$tmp/clock" 2>/dev/null &
	clockpid=$!
}
clock_gap() {
	kill "$clockpid" 2>/dev/null
	wait "$clockpid" 2>/dev/null
	awk 'NR > 1 { g = ($1 - p) / 1e6; if (g > m) m = g } { p = $1 } END { printf "%d\n", m }' "$tmp/clock"
}
wait_max() { sed -n 's/.*"wait_max_ms": \([0-9.]*\).*/\1/p' "$tmp/run.json"; }
# wait_log FILE PATTERN: until FILE has a line matching PATTERN (10 s at most)
wait_log() {
	k=0
	while [ $k -lt 200 ] && ! grep -q "$2" "$1" 2>/dev/null; do
		sleep 0.05
		k=$((k + 1))
	done
	grep -q "$2" "$1" 2>/dev/null
}
# A sanitizer build (make sanitize) skips the cases below that ASan has nothing
# more to find in than the tests named in their skip line, to keep CI short;
# san_skip LAST WHY: under such a build, the TAP numbers up to LAST skip, saying WHY.
san=0
readelf -d "$B/libgoldminer.so" 2>/dev/null | grep -q 'libasan' && san=1
# Under such a build a worker forked from an agent's coordinator thread can hang
# in ASan's allocator (GCC 12's has no fork handlers: the Makefile's sanitize);
# the pool's start watch kills and replaces it after GM_POOL_START_MS, 30 s by
# default (limits.h): 5 s here (an ASan'ed worker is made in under 1 s). Seven
# cases of CI's sanitize stage each waited the 30 s.
if [ "$san" = 1 ]; then
	GM_POOL_START_MS=5000
	export GM_POOL_START_MS
fi
san_skip() {
	[ "$san" = 1 ] || return 1
	while [ "$n" -lt "$1" ]; do
		n=$((n + 1))
		echo "ok $n # SKIP $2"
	done
	t_last=$(date +%s)
}

echo "1..52"
if [ ! -f "$B/libgoldminer-remote.so" ]; then
	i=1
	while [ $i -le 52 ]; do
		echo "ok $i # SKIP no $B/libgoldminer-remote.so (UCX not installed: make deps)"
		i=$((i + 1))
	done
	rm -rf "$tmp"
	exit 0
fi

# shellcheck source=tests/multihost.sh
. "$here/multihost.sh"
MH_ATEXIT="rm -rf '$tmp'"
mh_setup 3
mode=$(mh_mode)
echo "# multihost mode: $mode, cgroup: $MH_CGROUP, hosts: $(mh_addr 1) $(mh_addr 2) $(mh_addr 3)"
[ "$mode" = loopback ] && echo "# namespaces could not be made ($(mh_why)): every host is 127.0.0.1"
export UCX_TLS=tcp
UCX_NET_DEVICES=$(mh_netdev)
export UCX_NET_DEVICES
export UCX_WARN_UNUSED_ENV_VARS=n

head -c 48 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/secret"
chmod 600 "$tmp/secret"
head -c 48 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/wrong"
chmod 600 "$tmp/wrong"
"$G" synth "$tmp/data" --images 384 >/dev/null 2>&1
set -- --batch 32 --size 96 --checksum --quiet # the bench options of every run
BENCH="$*"
EPOCHS=4
# shellcheck disable=SC2086 # BENCH is a list of options
"$G" bench "$tmp/data" --workers 2 --epochs $EPOCHS $BENCH >"$tmp/ref.json" 2>"$tmp/ref.err"
ref=$(sed -n 's/.*"checksum": \[\([^]]*\)\].*/\1/p' "$tmp/ref.json")
echo "# single-host checksums: $ref"

port=$((20000 + $$ % 20000))
apid1='' apid2='' # set by agent() through eval
LEND=$tmp/data # what a lender lends (--lend-root; empty: nothing)
AGENT_OPTS=    # more options of the next agents (set, then reset, around a call)
# agent I SECRET PEERS...: a node agent in host I (socket $tmp/I.sock, log
# $tmp/I.log); listens on its address at $port. AGENT_CPUS: its budget.
agent() {
	i=$1 secret=$2
	shift 2
	peers=
	for p in "$@"; do peers="$peers${peers:+,}$(mh_addr "$p"):$((port + p))"; done
	# shellcheck disable=SC2086 # AGENT_OPTS is a list of options
	mh_spawn "$i" "${QUOTA:-0}" "$G" node --cpus "${AGENT_CPUS:-1}" --socket "$tmp/$i.sock" \
		--listen "$(mh_addr "$i"):$((port + i))" ${peers:+--peers "$peers"} \
		--secret "$secret" ${LEND:+--lend-root "$LEND"} $AGENT_OPTS >"$tmp/$i.log" 2>&1
	eval "apid$i=\$MH_PID"
	k=0
	while [ $k -lt 100 ] && ! grep -q "listening on $tmp/$i.sock" "$tmp/$i.log" 2>/dev/null; do
		sleep 0.05
		k=$((k + 1))
	done
}
# The remote workers of this test's agents (their children), none of another
# test's: make test runs a second lane beside this script, whose agents' remote
# workers a machine-wide pgrep would stop or kill.
rworkers() {
	for a in ${apid1:-} ${apid2:-} ${apid3:-}; do
		pgrep -P "$a" -f "goldminer node --remote-worker"
	done
}
stop_agents() {
	for i in 1 2 3; do
		eval "p=\${apid$i:-}"
		[ -n "$p" ] && kill "$p" 2>/dev/null
		eval "apid$i="
	done
	k=0
	while [ $k -lt 40 ] && pgrep -f "node --cpus .* --socket $tmp/" >/dev/null; do
		sleep 0.05
		k=$((k + 1))
	done
	pkill -KILL -f "node --cpus .* --socket $tmp/" 2>/dev/null
	for i in 1 2 3; do # each line names its case and host, for the last case's report
		[ -f "$tmp/$i.log" ] && sed "s/^/[after case $n, host $i] /" "$tmp/$i.log" >>"$tmp/all.log"
	done
	port=$((port + 10))
}
# peers_connected I N: wait (5 s at most) until agent I has N peers connected
peers_connected() {
	k=0
	while [ $k -lt 100 ]; do
		c=$("$G" node --socket "$tmp/$1.sock" --status 2>/dev/null | grep -o '"state": "connected"' | wc -l)
		[ "$c" -ge "$2" ] && return 0
		sleep 0.05
		k=$((k + 1))
	done
	return 1
}
# peers_lend I N: wait (5 s at most) until N of agent I's peers say in their
# heartbeats that they can lend a worker (a spread before them places nothing there)
peers_lend() {
	k=0
	while [ $k -lt 100 ]; do
		c=$("$G" node --socket "$tmp/$1.sock" --status 2>/dev/null |
			grep -o '"lendable_workers": [1-9]' | wc -l)
		[ "$c" -ge "$2" ] && return 0
		sleep 0.05
		k=$((k + 1))
	done
	return 1
}
# remote_samples: samples the home's remote workers delivered so far (status)
remote_samples() {
	"$G" node --socket "$tmp/1.sock" --status 2>/dev/null |
		sed -n 's/.*"remote_samples": \([0-9]*\).*/\1/p'
}
# wait_remote N: until the job's remote workers delivered N samples (20 s at most)
wait_remote() {
	k=0
	while [ $k -lt 400 ]; do
		s=$(remote_samples)
		[ -n "$s" ] && [ "$s" -ge "$1" ] && return 0
		sleep 0.05
		k=$((k + 1))
	done
	return 1
}
# train EPOCHS [ARGS]: the trainer in host 1 (0.5 of a core, shared with its
# agent) against its agent; checksums into $tmp/sum
train() {
	e=$1
	shift
	# shellcheck disable=SC2086
	mh_run 1 0.5 timeout "${TRAIN_S:-600}" "$G" bench "${DATA:-$tmp/data}" --node "$tmp/1.sock" \
		--epochs "$e" $BENCH "$@" >"$tmp/run.json" 2>"$tmp/run.err"
	sed -n 's/.*"checksum": \[\([^]]*\)\].*/\1/p' "$tmp/run.json" >"$tmp/sum"
}
same() { [ -n "$ref" ] && [ "$(cat "$tmp/sum")" = "$ref" ]; }
# delivered I: samples the remote workers delivered to agent I's job (its log).
# The agent logs it when it sees the trainer gone, which can come after `train`
# returns on a loaded machine: wait for the line, 10 s at most (empty if none).
delivered() {
	k=0
	while [ $k -lt 200 ] && ! grep -q "remote workers delivered" "$tmp/$1.log"; do
		sleep 0.05
		k=$((k + 1))
	done
	sed -n 's/.*remote workers delivered \([0-9]*\) samples.*/\1/p' "$tmp/$1.log" | tail -1
}

# 1: one agent
agent 1 "$tmp/secret"
train $EPOCHS
same
t $? "one agent: per-epoch checksums equal a single-host run"
stop_agents

# 2: two agents; each lent worker at nice 19 (/proc/PID/stat field 19, read
# while it works)
AGENT_CPUS=1 agent 2 "$tmp/secret" 1
agent 1 "$tmp/secret" 2
peers_connected 1 1
train $EPOCHS &
tp=$!
wait_remote 1
pol=
for w in $(rworkers); do
	pol="$pol$(sed 's/^.*) //' "/proc/$w/stat" 2>/dev/null | cut -d' ' -f17) "
done
wait $tp
d=$(delivered 1)
ok=1
same && [ "${d:-0}" -gt 0 ] && [ -n "$pol" ] && [ -z "$(echo "$pol" | sed 's/\<19\>//g' | tr -d ' ')" ] && ok=0
[ $ok = 0 ] || { diag "$tmp/1.log"; diag "$tmp/2.log"; cat "$tmp/sum"; echo "# nice: $pol"; }
t $ok "two agents: same checksums; the peer's workers delivered ${d:-0} samples; lent workers' nice ${pol:-none seen} (19)"
stop_agents

# 3: three agents; the home asks both peers
agent 2 "$tmp/secret" 1
agent 3 "$tmp/secret" 1
agent 1 "$tmp/secret" 2 3
peers_connected 1 2
peers_lend 1 2 # (before both beats, the first one heard took all 3)
# (a cap of 4: 1 local worker leaves room for 3 remote ones, so that both
# peers are asked, the idlest first (each lends 4: a worker per idle quarter
# core), whatever the order of their answers; the bytes do not change)
train 8 --workers 4
# shellcheck disable=SC2086
ref8=$("$G" bench "$tmp/data" --workers 2 --epochs 8 $BENCH 2>/dev/null |
	sed -n 's/.*"checksum": \[\([^]]*\)\].*/\1/p')
r2=$(grep -c "peer $(mh_addr 2):.* runs [1-9]" "$tmp/1.log")
r3=$(grep -c "peer $(mh_addr 3):.* runs [1-9]" "$tmp/1.log")
ok=1
[ "$(cat "$tmp/sum")" = "$ref8" ] && [ "$r2" -gt 0 ] && [ "$r3" -gt 0 ] && ok=0
[ $ok = 0 ] || { diag "$tmp/1.log"; cat "$tmp/sum"; echo "# want $ref8"; }
t $ok "three agents: same checksums; both peers ran workers for the job"
stop_agents

# 4: the peer agent SIGKILLed mid-epoch
agent 2 "$tmp/secret" 1
agent 1 "$tmp/secret" 2
peers_connected 1 1
train 8 &
tp=$!
wait_remote 64
kill -KILL "$apid2"
wait $tp
ok=1
[ "$(cat "$tmp/sum")" = "$ref8" ] && ok=0
[ $ok = 0 ] || { diag "$tmp/1.log"; cat "$tmp/sum"; }
t $ok "the peer agent SIGKILLed mid-epoch: same checksums ($(grep -c 'is made again' "$tmp/1.log") batches made again)"
stop_agents

# 5: the peer's link cut mid-epoch
if [ "$mode" = netns ]; then
	agent 2 "$tmp/secret" 1
	agent 1 "$tmp/secret" 2
	peers_connected 1 1
	train 8 --lease-timeout-ms 1000 &
	tp=$!
	wait_remote 64
	mh_cut 2
	wait $tp
	mh_heal 2
	ok=1
	[ "$(cat "$tmp/sum")" = "$ref8" ] && ok=0
	[ $ok = 0 ] || { diag "$tmp/1.log"; cat "$tmp/sum"; }
	t $ok "the peer's link cut mid-epoch: same checksums ($(grep -c 'is made again' "$tmp/1.log") batches made again)"
	stop_agents
else
	echo "ok 5 # SKIP a link can be cut only between namespaces ($(mh_why))"
	n=$((n + 1))
fi

# 6: a stale writer: the remote workers stopped past the lease deadline (and
# resumed before their lender kills a worker stopped for 700 ms: case 35)
if ! san_skip 6 "under a sanitizer build: its 200-ms lease deadline is shorter than an ASan worker's first sample on a loaded machine (every lease was taken back before a stop, no remote sample delivered); a lease taken back, its batches made again, runs under ASan in case 24 (its bound of 8 deadlines) and in this case itself when it fails"; then
agent 2 "$tmp/secret" 1
agent 1 "$tmp/secret" 2
peers_connected 1 1
train 24 --lease-timeout-ms 200 &
tp=$!
wait_remote 64
# A stop lands on a lease only if the remote worker holds one then (it may be
# waiting for a free task): stop it again, 5 times at most, until one is fenced.
fenced=1 k=0
while [ $k -lt 5 ] && [ $fenced = 1 ] && kill -0 $tp 2>/dev/null; do
	w=$(rworkers | tr '\n' ' ')
	# shellcheck disable=SC2086 # a list of pids
	[ -n "$w" ] && kill -STOP $w
	sleep 0.4
	# shellcheck disable=SC2086
	[ -n "$w" ] && kill -CONT $w
	grep -q "no sample for 200 ms" "$tmp/1.log" && fenced=0
	k=$((k + 1))
	sleep 0.3
done
wait $tp
ok=1
case "$(cat "$tmp/sum")" in # its first 8 epochs are the 8-epoch run's
"$ref8"*) [ $fenced = 0 ] && ok=0 ;;
esac
# the home told the fenced worker why (BYE): it ended as soon as it ran again,
# not after waiting 10 s for an answer to its next claim
[ $ok = 1 ] || wait_log "$tmp/2.log" "its home ended it: no sample for 200 ms"
grep -q "its home ended it: no sample for 200 ms" "$tmp/2.log" || ok=1
[ $ok = 0 ] || { diag "$tmp/1.log"; diag "$tmp/2.log"; cat "$tmp/sum"; echo "# fenced: $fenced after $k stops"; }
t $ok "a remote writer stopped past its lease deadline is fenced (lease taken back, endpoint closed, the worker told why; $k stops): same checksums"
stop_agents
fi # san_skip (case 6)

# 7: a wrong secret, and a host that is not a peer
agent 2 "$tmp/wrong" 1
agent 3 "$tmp/secret" 1
agent 1 "$tmp/secret" 2
train $EPOCHS
# (the refusals can come after a short job: their lines, 10 s at most, where a
# fixed second waited before the job)
wait_log "$tmp/1.log" "does not know the secret"
[ "$mode" = loopback ] || wait_log "$tmp/1.log" "refused a connection from $(mh_addr 3)"
ok=1
same && grep -q "does not know the secret" "$tmp/1.log" && [ "$(delivered 1)" = 0 ] &&
	grep -q "refused a connection from $(mh_addr 3)" "$tmp/1.log" && ok=0
if [ "$mode" = loopback ]; then # every host is 127.0.0.1: "not a peer" cannot be told apart
	ok=1
	same && grep -q "does not know the secret" "$tmp/1.log" && [ "$(delivered 1)" = 0 ] && ok=0
fi
[ $ok = 0 ] || { diag "$tmp/run.err"; cat "$tmp/sum"; echo "# delivered $(delivered 1)"; }
t $ok "a peer with a wrong secret is refused (and a host not in --peers); the job completes locally"
stop_agents

# 8: samples by rendezvous, received into the slot
GOLDMINER_REMOTE_RNDV=1
export GOLDMINER_REMOTE_RNDV
agent 2 "$tmp/secret" 1
agent 1 "$tmp/secret" 2
peers_connected 1 1
train 8
unset GOLDMINER_REMOTE_RNDV
d=$(delivered 1)
ok=1
[ "$(cat "$tmp/sum")" = "$ref8" ] && [ "${d:-0}" -gt 0 ] && ok=0
[ $ok = 0 ] || { diag "$tmp/1.log"; diag "$tmp/2.log"; cat "$tmp/sum"; }
t $ok "samples by rendezvous into the slot: same checksums; the peer's workers delivered ${d:-0}"
stop_agents

# 9: bad remote options, each refused in words (exit 1, the reason on stderr)
refused() { # refused PATTERN ARGS...: the agent exits 1 saying PATTERN
	pat=$1
	shift
	timeout 10 env -u UCX_NET_DEVICES "$G" node --socket "$tmp/x.sock" "$@" >"$tmp/x.out" 2>&1
	rc=$?
	[ $rc = 1 ] && grep -q "$pat" "$tmp/x.out" && return 0
	echo "# rc $rc for $*:"
	diag "$tmp/x.out"
	return 1
}
cp "$tmp/secret" "$tmp/open"
chmod 644 "$tmp/open"
ok=0
refused "needs --listen" --peers 127.0.0.1:1 --secret "$tmp/secret" || ok=1
refused "secret FILE (or --tls-cert, --tls-key, --tls-ca) is required" --listen 127.0.0.1:0 || ok=1
refused "chmod 600" --listen 127.0.0.1:0 --secret "$tmp/open" || ok=1
refused "not HOST:PORT" --listen 127.0.0.1:0 --peers no-such-host:99999 --secret "$tmp/secret" || ok=1
refused "names no port, and --listen's port is 0" --listen 127.0.0.1:0 --peers some-host \
	--secret "$tmp/secret" || ok=1
printf '127.0.0.1:1 # fine\nnot a host\n' >"$tmp/badpeers"
refused "$tmp/badpeers:2: 'not a host' is not HOST:PORT" --listen 127.0.0.1:0 --secret "$tmp/secret" \
	--peers-file "$tmp/badpeers" || ok=1
GOLDMINER_REMOTE_LIB=$tmp/none.so refused "libgoldminer-remote.so" --listen 127.0.0.1:0 \
	--secret "$tmp/secret" || ok=1
refused "an address of this host" --listen 192.0.2.1:1 --secret "$tmp/secret" || ok=1
refused "lend-root needs --listen" --lend-root "$tmp/data" || ok=1
"$G" node --socket "$tmp/x.sock" --lend-max-workers 0 >"$tmp/x.out" 2>&1
rc=$?
{ [ $rc = 2 ] && grep -q "lend-max-workers: must be an integer in 1..256, not '0'" "$tmp/x.out"; } ||
	{ ok=1; echo "# rc $rc for --lend-max-workers 0:"; diag "$tmp/x.out"; }
refused "lend-root $tmp/secret: not a directory" --listen 127.0.0.1:0 --secret "$tmp/secret" \
	--lend-root "$tmp/secret" || ok=1
refused "lend-root $tmp/none: No such file" --listen 127.0.0.1:0 --secret "$tmp/secret" \
	--lend-root "$tmp/none" || ok=1
t $ok "bad remote options are refused in words (no listen, no secret, open secret, bad peer, no port, a bad --peers-file line, no plugin, foreign address, a lend root without --listen, not a directory, missing, --lend-max-workers 0)"

# 11: restarted at once on the same port, left in TIME_WAIT: it takes the port at once
agent 2 "$tmp/secret" 1
agent 1 "$tmp/secret" 2
# connected first (15 s at most on a busy machine): the connection is what leaves
# the port in TIME_WAIT
peers_connected 1 1 || peers_connected 1 1 || peers_connected 1 1
kill "$apid2"
k=0
while [ $k -lt 40 ] && kill -0 "$apid2" 2>/dev/null; do
	sleep 0.05
	k=$((k + 1))
done
cp "$tmp/2.log" "$tmp/2.first.log"
# Which side closes first decides where TIME_WAIT lands: when the stopped agent's
# port has none (the peer closed first), make one there, as a client bound to
# that port that closes first (a bind that fails: the port has one already).
mh_run 2 - python3 -c '
import errno, socket, sys
addr, port = sys.argv[1], int(sys.argv[2])
srv = socket.socket()
srv.bind((addr, 0))
srv.listen(1)
c = socket.socket()
c.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try:
    c.bind((addr, port))
except OSError as e:
    sys.exit(0 if e.errno == errno.EADDRINUSE else 1)
c.connect(srv.getsockname())
a, _ = srv.accept()
c.close()
a.recv(1)
a.close()
' "$(mh_addr 2)" $((port + 2)) || echo "# could not make a TIME_WAIT on port $((port + 2))"
agent 2 "$tmp/secret" 1 # returns once listening on the socket, or after 5 s
ok=1
grep -q "listening on $tmp/2.sock" "$tmp/2.log" && kill -0 "$apid2" 2>/dev/null &&
	{ peers_connected 1 1 || peers_connected 1 1 || peers_connected 1 1; } && ok=0
[ $ok = 0 ] || { diag "$tmp/2.first.log"; diag "$tmp/2.log"; }
t $ok "an agent restarted at once on its port (in TIME_WAIT) takes it at once; its peer connects again"
stop_agents

if ! san_skip 11 "under a sanitizer build this case is make test's: the error records it ships are checked under ASan by test_remote_check and cases 16-25"; then
# 12: bad files; the remote workers SIGKILLed every 0.3 s while they ship their
# batches (the peer's egress limited to 40 Mbit/s, so that shipping a batch takes
# most of its time): a bad sample's error record lands with the sample, so every
# bad file is named, as in a single-host run
cp -r "$tmp/data" "$tmp/bad"
find "$tmp/bad" -name '*.jpg' | sort | awk 'NR % 6 == 0' | while read -r f; do
	printf 'not a jpeg' >"$f"
done
# shellcheck disable=SC2086 # BENCH is a list of options
"$G" bench "$tmp/bad" --workers 2 --epochs 8 $BENCH >"$tmp/badref.json" 2>"$tmp/badref.err"
want=$(grep -c "^goldminer bench: .*: skipped: " "$tmp/badref.err")
more=$(grep "more bad samples" "$tmp/badref.err") # over 8 in a batch: not listed
badsum=$(sed -n 's/.*"checksum": \[\([^]]*\)\].*/\1/p' "$tmp/badref.json")
LEND=$tmp/bad
agent 2 "$tmp/secret" 1
LEND=$tmp/data
agent 1 "$tmp/secret" 2
peers_connected 1 1 || peers_connected 1 1
shaped=no
if [ "$mode" = netns ] && timeout 5 ip netns exec "${MH_TAG}h2" tc qdisc add dev gm0 root tbf \
	rate 40mbit burst 32kbit latency 400ms 2>/dev/null; then
	shaped=yes
fi
DATA=$tmp/bad train 8 &
tp=$!
wait_remote 32
kills=0 k=0
while [ $k -lt 200 ] && kill -0 $tp 2>/dev/null; do
	# (this test's lender's workers only: a pattern alone kills every test's and
	# bench's remote workers on the machine)
	pkill -KILL -P "$apid2" -f "goldminer node --remote-worker" && kills=$((kills + 1))
	sleep 0.3
	k=$((k + 1))
done
wait $tp
got=$(grep -c "^goldminer bench: .*: skipped: " "$tmp/run.err")
ok=1
[ "$want" -gt 0 ] && [ "$got" = "$want" ] && [ "$(grep "more bad samples" "$tmp/run.err")" = "$more" ] &&
	[ -n "$badsum" ] && [ "$(cat "$tmp/sum")" = "$badsum" ] && ok=0
[ $ok = 0 ] || {
	diag "$tmp/run.err"
	echo "# named $got of $want bad samples; sums $(cat "$tmp/sum") want $badsum"
}
t $ok "bad files, remote workers killed $kills times while shipping (link shaped: $shaped): all $want named, same bytes"
[ "$shaped" = yes ] && timeout 5 ip netns exec "${MH_TAG}h2" tc qdisc del dev gm0 root 2>/dev/null
stop_agents
fi # san_skip (case 12)

# The lender's file calls, watched: trace_on I starts strace (where present) on
# agent I and the processes it starts, their file calls (and getdents64, which
# INJECT may delay: "getdents64:delay_exit=US") into $tmp/trace, and waits until
# it is attached; trace_off detaches it. TRACE: yes, or why not.
trace_on() {
	tp_=
	eval "tp_=\$apid$1"
	rm -f "$tmp/trace"
	if ! command -v strace >/dev/null 2>&1; then
		TRACE="strace is not installed (apt-get install strace)"
		return
	fi
	strace -f -qq -o "$tmp/trace" -e trace=%file,getdents64 ${INJECT:+-e "inject=$INJECT"} \
		-p "$tp_" 2>"$tmp/strace.err" &
	spid=$!
	k=0 # attached: the agent's TracerPid is strace (5 s at most)
	while [ $k -lt 100 ] && ! grep -q "^TracerPid:[[:space:]]*$spid\$" "/proc/$tp_/status"; do
		sleep 0.05
		k=$((k + 1))
	done
	TRACE=yes
	grep -q "^TracerPid:[[:space:]]*$spid\$" "/proc/$tp_/status" ||
		TRACE="strace could not attach: $(head -c 200 "$tmp/strace.err")"
}
trace_off() {
	[ "$TRACE" = yes ] || return 0
	kill "$spid" 2>/dev/null
	wait "$spid" 2>/dev/null
}
# refusals I WORDS: the home's refusal lines from peer I: at least one, and each
# says exactly WORDS (no path, fingerprint or count after them)
refusals() {
	grep "peer $(mh_addr "$1"):[0-9]* lends no workers: " "$tmp/1.log" >"$tmp/refusals"
	[ -s "$tmp/refusals" ] && ! grep -v "lends no workers: $2\$" "$tmp/refusals" >/dev/null
}
# delivered_nth N: what the remote workers delivered to agent 1's Nth job (its
# log line, 10 s at most)
delivered_nth() {
	k=0
	while [ $k -lt 200 ] && [ "$(grep -c "remote workers delivered" "$tmp/1.log")" -lt "$1" ]; do
		sleep 0.05
		k=$((k + 1))
	done
	sed -n 's/.*remote workers delivered \([0-9]*\) samples.*/\1/p' "$tmp/1.log" | sed -n "$1p"
}

if ! san_skip 14 "under a sanitizer build: strace and LeakSanitizer cannot share a process; the lend-root rules run under ASan in test_lendroot"; then
# Cases 13-15 run the lender under strace, and LeakSanitizer (a make sanitize
# build) cannot run under ptrace: its check process would exit 1.
asan_before=${ASAN_OPTIONS-}
export ASAN_OPTIONS="detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
# 13: a root below no --lend-root: refused in words, nothing under it touched;
# the listed root, in the same run and trace, is lent
cp -r "$tmp/data" "$tmp/data2" # "data2": a byte prefix of it is the lend root
agent 2 "$tmp/secret" 1        # --lend-root $tmp/data
agent 1 "$tmp/secret" 2
peers_connected 1 1 || peers_connected 1 1
trace_on 2
DATA=$tmp/data2 train 8
sum2=$(cat "$tmp/sum")
train 8
d=$(delivered_nth 2)
trace_off
ok=1
refusals 2 "not lendable here" && [ "$sum2" = "$ref8" ] && [ "$(cat "$tmp/sum")" = "$ref8" ] &&
	[ "${d:-0}" -gt 0 ] && grep -q "refused: '$tmp/data2' is not below a --lend-root" "$tmp/2.log" &&
	ok=0
if [ "$TRACE" = yes ]; then
	touched=$(grep -c "$tmp/data2" "$tmp/trace")
	seen=$(grep -c "\"$tmp/data/" "$tmp/trace")
	[ "$touched" = 0 ] && [ "$seen" -gt 0 ] || ok=1
	[ $ok = 0 ] || { grep "$tmp/data2" "$tmp/trace" | head -5 | sed 's/^/# /'; diag "$tmp/2.log"; diag "$tmp/refusals"; }
	t $ok "a root below no --lend-root is refused in words (no fingerprint, no count) and the lender opened nothing under it ($touched calls; $seen on the listed root, lent in the same run: ${d:-0} samples)"
elif [ $ok = 0 ]; then
	n=$((n + 1))
	echo "not ok $n # SKIP $TRACE: the refusal was checked, not that nothing under the root was opened"
else
	diag "$tmp/2.log"
	t 1 "a root below no --lend-root is refused in words ($TRACE)"
fi
stop_agents

# 14: a symlink out of the lend root; more entries than --lend-max-files; an
# agent with no --lend-root
mkdir -p "$tmp/lend" "$tmp/outside"
cp -r "$tmp/data" "$tmp/lend/sym"
cls=$(find "$tmp/lend/sym" -mindepth 1 -maxdepth 1 -type d | sort | tail -1)
cls=${cls##*/}
mv "$tmp/lend/sym/$cls" "$tmp/outside/$cls"
ln -s "$tmp/outside/$cls" "$tmp/lend/sym/$cls" # the home follows it: the same files
LEND=$tmp/lend
agent 2 "$tmp/secret" 1
LEND=$tmp/data
agent 1 "$tmp/secret" 2
peers_connected 1 1 || peers_connected 1 1
trace_on 2
DATA=$tmp/lend/sym train 8
trace_off
ok=1
refusals 2 "not lendable here" && [ "$(cat "$tmp/sum")" = "$ref8" ] &&
	grep -q "refused (not lendable here): .*$tmp/lend/sym/$cls: a symbolic link that leads out of" \
		"$tmp/2.log" &&
	ok=0
out="the link's target not checked: $TRACE"
if [ "$TRACE" = yes ]; then
	out="$(grep -c "$tmp/outside" "$tmp/trace") calls on the link's target"
	grep -q "$tmp/outside" "$tmp/trace" && ok=1
	grep -q "\"$tmp/lend/sym" "$tmp/trace" || ok=1 # the check did run, traced
fi
[ $ok = 0 ] || {
	diag "$tmp/2.log"
	diag "$tmp/refusals"
	echo "# sums $(cat "$tmp/sum"), want $ref8; trace: $TRACE"
	grep -e "$tmp/outside" -e "\"$tmp/lend/sym\"" "$tmp/trace" | head -5 | sed 's/^/# /'
}
stop_agents
AGENT_OPTS="--lend-max-files 50"
agent 2 "$tmp/secret" 1
AGENT_OPTS='' LEND=''
agent 3 "$tmp/secret" 1
LEND=$tmp/data
agent 1 "$tmp/secret" 2 3
peers_connected 1 2 || peers_connected 1 2
train 8
if ! refusals 2 "the dataset is larger than this agent indexes for peers" ||
	! grep -q "more than 50 directory entries" "$tmp/2.log"; then
	ok=1
	diag "$tmp/2.log"
fi
if ! refusals 3 "not lendable here" || ! grep -q "lending nothing (no --lend-root)" "$tmp/3.log" ||
	[ "$(cat "$tmp/sum")" != "$ref8" ]; then
	ok=1
	diag "$tmp/3.log"
	diag "$tmp/1.log"
fi
t $ok "a symlink out of the lend root is refused ($out), a dataset over --lend-max-files too (no count said), and an agent with no --lend-root lends nothing"
stop_agents

# 15: a slow index runs outside the loop: --status answered throughout, the LEND
# refused at --lend-index-ms, the job done locally
AGENT_OPTS="--lend-index-ms 1000"
agent 2 "$tmp/secret" 1
AGENT_OPTS=
agent 1 "$tmp/secret" 2
peers_connected 1 1 || peers_connected 1 1
# (and the lender's own connection to the home, which it retries every 2 s when
# the home was not up yet: made under strace, its UCP worker's getdents64 calls
# would be delayed too, and its loop with them)
peers_connected 2 1 || peers_connected 2 1
INJECT=getdents64:delay_exit=1000000
trace_on 2
INJECT=
if [ "$TRACE" = yes ]; then
	train 24 &
	tp=$!
	asked=0 slow=0 worst=0
	while kill -0 $tp 2>/dev/null; do
		t0=$(date +%s%N)
		timeout 10 "$G" node --socket "$tmp/2.sock" --status >/dev/null 2>&1 || slow=$((slow + 1))
		ms=$((($(date +%s%N) - t0) / 1000000))
		[ "$ms" -gt "$worst" ] && worst=$ms
		[ "$ms" -gt 1500 ] && slow=$((slow + 1))
		pgrep -f "node --lend-check" >/dev/null && asked=$((asked + 1))
		sleep 0.2
	done
	wait $tp
	trace_off
	ok=1
	case "$(cat "$tmp/sum")" in # its first 8 epochs are the 8-epoch run's
	"$ref8"*) refusals 2 "indexing the dataset took too long here" &&
		grep -q "not indexed within 1000 ms" "$tmp/2.log" && [ "$asked" -ge 3 ] &&
		[ $slow = 0 ] && ok=0 ;;
	esac
	[ $ok = 0 ] || { diag "$tmp/2.log"; diag "$tmp/refusals"; }
	t $ok "a slow index runs outside the agent's loop: --status answered $asked times while it ran (slowest ${worst} ms, $slow late), the LEND refused at --lend-index-ms; same bytes"
else
	n=$((n + 1))
	echo "not ok $n # SKIP $TRACE: the slow index is made by strace's syscall delay"
fi
stop_agents
if [ -n "$asan_before" ]; then export ASAN_OPTIONS="$asan_before"; else unset ASAN_OPTIONS; fi
fi # san_skip (cases 13-15)
# 16-25: a remote worker that misbehaves once (the peer runs the test build of
# the plugin): the home refuses it, logs the peer and the rule in one line and
# takes the lease back; the batch is made again, and the bytes are a clean run's
TP=$B/tests/libgoldminer-remote-test.so
# misbehave MODE PATTERN DESCRIPTION [TRAIN ARGS]: the peer's first lease
# misbehaves as MODE; the home's log must match PATTERN (and $ALSO if set)
misbehave() {
	how=$1 pat=$2 desc=$3
	shift 3
	if [ ! -f "$TP" ]; then
		t 1 "$desc: no $TP (make $TP)"
		return
	fi
	# A job can end before the peer's worker claims a lease (a loaded machine):
	# then nothing misbehaved and the case says nothing; it runs again, 3 times
	# at most.
	try=0
	while [ $try -lt 3 ]; do
		try=$((try + 1))
		rm -f "$tmp/once"
		GOLDMINER_REMOTE_LIB=$TP GOLDMINER_REMOTE_MISBEHAVE=$how GOLDMINER_REMOTE_MISBEHAVE_ONCE=$tmp/once
		export GOLDMINER_REMOTE_LIB GOLDMINER_REMOTE_MISBEHAVE GOLDMINER_REMOTE_MISBEHAVE_ONCE
		agent 2 "$tmp/secret" 1
		unset GOLDMINER_REMOTE_LIB GOLDMINER_REMOTE_MISBEHAVE GOLDMINER_REMOTE_MISBEHAVE_ONCE
		agent 1 "$tmp/secret" 2
		peers_connected 1 1 || peers_connected 1 1
		TRAIN_S=120 train $EPOCHS "$@"
		at="remote worker at $(mh_addr 2): "
		# (or UCX timed the worker's endpoint out first, on a loaded machine or
		# under ASan, or the lease deadline took the lease back first: a
		# trickle's 200-ms gaps grew past its 500-ms deadline under ASan while
		# CI's sanitize stage loaded the machine; the lease was taken back
		# before the rule could act)
		[ -f "$tmp/once" ] && { grep -q "$at$pat" "$tmp/1.log" ||
			! grep -q "${at}connection lost: Endpoint timeout\|${at}no sample for [0-9]* ms (lease deadline)" \
				"$tmp/1.log"; } && break
		echo "# $desc: the peer's worker took no lease, or UCX or the lease deadline took it back, before the rule acted (try $try)"
		stop_agents
	done
	at="remote worker at $(mh_addr 2): "
	ok=1
	same && [ -f "$tmp/once" ] && grep -q "$at$pat" "$tmp/1.log" &&
		{ [ -z "${ALSO:-}" ] || grep -q "$at$ALSO" "$tmp/1.log"; } &&
		! grep -q "goldminer bench: .*: skipped: " "$tmp/run.err" && ok=0
	if [ $ok = 0 ]; then
		grep -m1 "$at$pat" "$tmp/1.log" | sed 's/^/# /'
	else
		diag "$tmp/1.log"
		diag "$tmp/run.err"
		echo "# sums $(cat "$tmp/sum"); misbehaved: $([ -f "$tmp/once" ] && echo yes || echo no)"
	fi
	t $ok "$desc: refused, the home logs the peer and the rule; same checksums"
	stop_agents
}
for st in 1 2 -5 -2147483648; do
	if [ "$st" != -2147483648 ] && san_skip $((n + 1)) "under a sanitizer build: the home's refusal of a publish's status takes one path whatever the status, run under ASan by the INT_MIN case; test_remote_check checks each status's rule under ASan"; then
		continue
	fi
	misbehave "status=$st" "refused its publish: status $st is not one its job's workers" \
		"a publish with status $st"
done
misbehave rec-out "refused its publish: an error record for sample [0-9]*, which no position" \
	"a publish's error record for a sample outside the lease"
misbehave rec-big "refused its sample: an error record for sample 1384 with position" \
	"a sample's error record for id 1384 (the dataset has 384)"
misbehave label "refused its sample: label 999999 of sample [0-9]* is not its label" \
	"a sample with a wrong label"
misbehave id "refused its sample: sample id [0-9]* at position [0-9]* is not its lease's" \
	"a sample with an id outside its lease"
ALSO="no sample for 500 ms (lease deadline)" misbehave resend "refused a sample sent again" \
	"a resend loop of a delivered sample every 200 ms (deadline 500 ms)" --lease-timeout-ms 500
# (or sooner, where its trainer waited 1 s for it with the rest of the ring
# made: home.c's HEAD_MS, the rule case 51 shows alone)
misbehave trickle "\(held its lease [0-9]* ms, 8 x the lease deadline\|held the batch its trainer waited for\)" \
	"a trickle of one sample every 200 ms: the lease ends at 8 x its 500-ms deadline, or as the batch its trainer waits for" \
	--lease-timeout-ms 500
# 26-28: a stranger's attacks on agent 1 while its jobs run (netns only)
P="$B/bench/mh_peer"
full=${GM_FLOOD_FULL:-0}
# attack_during NAME CMD...: CMD (the attack) in host 3 in the background while
# the trainer runs 8-epoch jobs one after another until CMD ends (one at least);
# true when every run had the 8-epoch checksums and remote samples, and agent 1
# is alive afterwards. CMD's output: $tmp/attack.out.
attack_during() {
	name=$1
	shift
	mh_spawn 3 0 "$@" >"$tmp/attack.out" 2>&1
	ap=$MH_PID
	runs=0 fails=0 got=
	while :; do
		before=$(grep -c "remote workers delivered" "$tmp/1.log")
		train 8
		k=0
		while [ $k -lt 200 ] && [ "$(grep -c "remote workers delivered" "$tmp/1.log")" -le "$before" ]; do
			sleep 0.05
			k=$((k + 1))
		done
		d=$(sed -n 's/.*remote workers delivered \([0-9]*\) samples.*/\1/p' "$tmp/1.log" | tail -1)
		runs=$((runs + 1))
		got="$got ${d:-0}"
		{ [ "$(cat "$tmp/sum")" = "$ref8" ] && [ "${d:-0}" -gt 0 ]; } || fails=$((fails + 1))
		kill -0 "$ap" 2>/dev/null || break
	done
	wait "$ap"
	kill -0 "$apid1" 2>/dev/null || fails=$((fails + 1))
	sed "s/^/# $name: /" "$tmp/attack.out"
	echo "# $name: $runs runs of 8 epochs, samples from the peer per run:$got"
	[ $fails = 0 ]
}
# ucx_ports: the ports agent 1's process listens on besides its control port
ucx_ports() {
	mh_run 1 - ss -ltnpH 2>/dev/null | grep "pid=$apid1," | awk '{print $4}' |
		sed 's/.*://' | grep -vx "$((port + 1))" | tr '\n' ' '
}
if [ "$mode" = netns ]; then
	agent 2 "$tmp/secret" 1
	agent 1 "$tmp/secret" 2
	peers_connected 1 1 || peers_connected 1 1
	a1=$(mh_addr 1)
	uports=$(ucx_ports)
	# every socket agent 1 listens on is bound to its own address (UCX_NET_DEVICES)
	bound=$(mh_run 1 - ss -ltnpH 2>/dev/null | grep "pid=$apid1," | awk '{print $4}' |
		grep -vc "^$a1:")
	echo "# agent 1 listens on control port $((port + 1)) and UCX ports: $uports($bound not on $a1)"
	# 13: raw connections
	if [ "$full" = 1 ]; then nraw=30000 nu=3000; else nraw=3000 nu=500; fi
	script="$P tcp-flood $a1 $((port + 1)) $nraw 120"
	for u in $uports; do script="$script; $P tcp-flood $a1 $u $nu 60"; done
	ok=1
	attack_during "raw flood" sh -c "$script" && [ -n "$uports" ] && [ "$bound" = 0 ] &&
		! grep "tcp-flood $a1:[0-9]*: .* [1-9][0-9]* connected" "$tmp/attack.out" | grep -qv ":$((port + 1)):" &&
		grep -q "tcp-flood $a1:$((port + 1)): $nraw started" "$tmp/attack.out" && ok=0
	refused=$("$G" node --socket "$tmp/1.sock" --status 2>/dev/null |
		sed -n 's/.*"refused": \([0-9]*\).*/\1/p')
	echo "# raw flood: the agent reset ${refused:-?} connections at accept"
	[ "${refused:-0}" -gt 0 ] || ok=1
	[ $ok = 0 ] || { diag "$tmp/1.log"; cat "$tmp/sum"; }
	t $ok "$nraw raw connections from a host not in --peers ($nu to each UCX port, none reached): same checksums, the peer delivered in every run"
	# 14: UCX endpoints to the control port, re-opening as they fail
	if [ "$full" = 1 ]; then neps=300 secs=30; else neps=100 secs=10; fi
	script="$P ucx-churn $a1 $((port + 1)) $neps $secs"
	for u in $uports; do script="$script & $P ucx-churn $a1 $u $((neps / 3)) $secs"; done
	ok=1
	attack_during "UCX endpoints" sh -c "$script; wait" &&
		grep -q "ucx-churn $a1:$((port + 1)): [0-9]* endpoints opened" "$tmp/attack.out" && ok=0
	[ $ok = 0 ] || { diag "$tmp/1.log"; cat "$tmp/sum"; }
	t $ok "$neps UCX endpoints re-opening for $secs s from a host not in --peers (and $((neps / 3)) to each UCX port): same checksums, the peer delivered in every run"
	# 15: held idle connections
	if [ "$full" = 1 ]; then secs=30; else secs=10; fi
	script="$P tcp-hold $a1 $((port + 1)) 2000 $secs"
	for u in $uports; do script="$script & $P tcp-hold $a1 $u 2000 $secs"; done
	ok=1
	attack_during "idle connections" sh -c "$script; wait" &&
		grep -q "tcp-hold $a1:$((port + 1)): 2000 started, .*, 0 open," "$tmp/attack.out" &&
		! grep "tcp-hold" "$tmp/attack.out" | grep -v ":$((port + 1)):" | grep -qv ", 0 connected," && ok=0
	[ $ok = 0 ] || { diag "$tmp/1.log"; cat "$tmp/sum"; }
	t $ok "2000 idle connections held $secs s from a host not in --peers (none left open, none on UCX's ports): same checksums, the peer delivered in every run"
	stop_agents
else
	for c in 26 27 28; do
		echo "ok $((n + 1)) # SKIP case $c: a stranger needs a host of its own ($(mh_why))"
		n=$((n + 1))
	done
fi

# 29: from a peer's own address: a slow drip is closed after AUTH_MS, connections
# beyond the per-address limit are reset, and the real peer connects afterwards
agent 2 "$tmp/secret" 1
agent 1 "$tmp/secret" 2
peers_connected 1 1 || peers_connected 1 1
mh_run 2 - "$P" tcp-drip "$(mh_addr 1)" $((port + 1)) 15 >"$tmp/drip.out" 2>&1
drip=$?
mh_run 2 - "$P" tcp-hold "$(mh_addr 1)" $((port + 1)) 60 1 >"$tmp/hold.out" 2>&1
kill "$apid2" 2>/dev/null # the peer comes back: it must get in again
k=0
while [ $k -lt 40 ] && kill -0 "$apid2" 2>/dev/null; do
	sleep 0.05
	k=$((k + 1))
done
agent 2 "$tmp/secret" 1
ok=1
secs=$(sed -n 's/.*after \([0-9.]*\) s.*/\1/p' "$tmp/drip.out")
[ $drip = 0 ] && awk -v s="${secs:-99}" 'BEGIN { exit !(s >= 4.5 && s < 8) }' &&
	grep -q " 60 started, .*, 32 open," "$tmp/hold.out" &&
	{ peers_connected 2 1 || peers_connected 2 1 || peers_connected 2 1; } && ok=0
[ $ok = 0 ] || { cat "$tmp/drip.out" "$tmp/hold.out"; diag "$tmp/1.log"; }
t $ok "from a peer's address: a dripping handshake closed after ${secs:-?} s, 32 of 60 left in their handshake, the peer connects again"
stop_agents

# 30-33: discovery. dagent I ARGS...: an agent in host I on its address and
# the port all of them share ($port), refreshing its names every 500 ms.
dagent() {
	i=$1
	shift
	mh_spawn "$i" 0 "$G" node --cpus 1 --socket "$tmp/$i.sock" --listen "$(mh_addr "$i"):$port" \
		--secret "$tmp/secret" --lend-root "$tmp/data" --peers-refresh-ms 500 "$@" \
		>"$tmp/$i.log" 2>&1
	eval "apid$i=\$MH_PID"
	k=0
	while [ $k -lt 100 ] && ! grep -q "listening on $tmp/$i.sock" "$tmp/$i.log" 2>/dev/null; do
		sleep 0.05
		k=$((k + 1))
	done
}
# peer_is I ADDR STATE: wait (8 s at most) until agent I lists peer ADDR in
# STATE (connected, ...), or, STATE "gone", does not list it
peer_is() {
	k=0
	while [ $k -lt 160 ]; do
		st=$("$G" node --socket "$tmp/$1.sock" --status 2>/dev/null)
		if [ "$3" = gone ]; then
			[ -n "$st" ] && ! echo "$st" | grep -q "\"addr\": \"$2\"" && return 0
		else
			echo "$st" | grep -q "\"addr\": \"$2\", \"state\": \"$3\"" &&
				return 0
		fi
		sleep 0.05
		k=$((k + 1))
	done
	return 1
}
if [ "$mode" = netns ] && [ -x /usr/bin/python3 ]; then
	# A DNS server (UDP, A records) answering from $tmp/zone ("NAME ADDRESS" a
	# line; a NAME it does not list: NXDOMAIN), read at every query.
	cat >"$tmp/dns.py" <<'PY'
import socket, struct, sys
zone, addr = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((addr, 53))
while True:
    q, who = s.recvfrom(512)
    i, labels = 12, []
    while i < len(q) and q[i]:
        labels.append(q[i + 1:i + 1 + q[i]].decode("ascii", "replace"))
        i += 1 + q[i]
    i += 1
    if len(q) < 12 or i + 4 > len(q):
        continue
    qtype = struct.unpack(">H", q[i:i + 2])[0]
    name = ".".join(labels).lower()
    known, ans = False, b""
    for line in open(zone):
        f = line.split()
        if len(f) == 2 and f[0].lower() == name:
            known = True
            if qtype == 1:
                ans += b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 1, 4) + socket.inet_aton(f[1])
    hdr = struct.pack(">HHHHHH", q[0] << 8 | q[1], 0x8180 | (0 if known else 3), 1,
                      len(ans) // 16, 0, 0)
    s.sendto(hdr + q[12:i + 4] + ans, who)
PY
	for i in 1 2 3; do
		mkdir -p "/etc/netns/${MH_TAG}h$i"
		printf 'nameserver %s\noptions timeout:1 attempts:1\n' "$(mh_addr 1)" \
			>"/etc/netns/${MH_TAG}h$i/resolv.conf"
	done
	MH_ATEXIT="$MH_ATEXIT; rm -rf /etc/netns/${MH_TAG}h1 /etc/netns/${MH_TAG}h2 /etc/netns/${MH_TAG}h3"
	zone() { # zone HOST...: agents.gm.test's A records become those hosts'
		: >"$tmp/zone.new"
		for h in "$@"; do echo "agents.gm.test $(mh_addr "$h")" >>"$tmp/zone.new"; done
		mv "$tmp/zone.new" "$tmp/zone"
	}
	zone 1 2 3
	mh_spawn 1 - /usr/bin/python3 "$tmp/dns.py" "$tmp/zone" "$(mh_addr 1)" >"$tmp/dns.log" 2>&1
	dnspid=$MH_PID
	sleep 0.3

	# 30: one name, three A records
	for i in 2 3 1; do dagent $i --peers agents.gm.test; done
	a1=$(mh_addr 1) a2=$(mh_addr 2) a3=$(mh_addr 3)
	ok=1
	peer_is 1 "$a2:$port" connected && peer_is 1 "$a3:$port" connected &&
		peer_is 2 "$a3:$port" connected && peer_is 3 "$a2:$port" connected &&
		peer_is 1 "$a1:$port" gone && grep -q "agents.gm.test resolves to 3 addresses" "$tmp/1.log" &&
		"$G" node --socket "$tmp/1.sock" --status |
		grep -q "\"from\": \"agents.gm.test\".*\"peer_names\": \[{\"name\": \"agents.gm.test\", \"addresses\": 3}\]" &&
		ok=0
	train $EPOCHS
	d=$(delivered 1)
	{ same && [ "${d:-0}" -gt 0 ]; } || ok=1
	[ $ok = 0 ] || { diag "$tmp/1.log"; diag "$tmp/2.log"; "$G" node --socket "$tmp/1.sock" --status | diag /dev/stdin; }
	t $ok "a DNS name with 3 A records: each agent connects to the 2 others, not to itself; the job got ${d:-0} samples from them, same checksums"

	# 31: host 3 taken out of the answer while a job runs, then put back
	train 8 &
	tp=$!
	wait_remote 64
	zone 1 2
	ok=1
	peer_is 1 "$a3:$port" gone
	gone=$?
	wait $tp
	[ "$gone" = 0 ] && [ "$(cat "$tmp/sum")" = "$ref8" ] &&
		grep -q "peer $a3:$port (agents.gm.test) is no longer a peer" "$tmp/1.log" &&
		peer_is 1 "$a2:$port" connected && ok=0
	zone 1 2 3
	peer_is 1 "$a3:$port" connected || ok=1
	[ $ok = 0 ] || { diag "$tmp/1.log"; cat "$tmp/sum"; }
	t $ok "an address taken out of the answer mid-job: that peer closed within the refresh, same checksums; put back: connected again"
	stop_agents

	# 32: a dead DNS server (nothing answers at its address)
	# (each lookup then waits 2 x 3 s: an agent that waited for one at start, or
	# on its loop, would be seen)
	printf 'nameserver %s.99\noptions timeout:3 attempts:2\n' "${a1%.*}" >"/etc/netns/${MH_TAG}h1/resolv.conf"
	port2=$port
	dagent 2 --peers "$a1"
	t0=$(date +%s%N)
	dagent 1 --peers "agents.gm.test,$a2"
	up=$((($(date +%s%N) - t0) / 1000000))
	slow=0 worst=0 k=0
	while [ $k -lt 50 ] && { [ $k -lt 15 ] || ! grep -q "resolves to no address" "$tmp/1.log"; }; do
		s0=$(date +%s%N)
		timeout 10 "$G" node --socket "$tmp/1.sock" --status >/dev/null 2>&1 || slow=$((slow + 1))
		ms=$((($(date +%s%N) - s0) / 1000000))
		[ "$ms" -gt "$worst" ] && worst=$ms
		[ "$ms" -gt 1000 ] && slow=$((slow + 1))
		sleep 0.2
		k=$((k + 1))
	done
	polls=$k
	ok=1
	peer_is 1 "$a2:$port2" connected && [ $slow = 0 ] && [ "$up" -lt 3000 ] &&
		grep -q "agents.gm.test resolves to no address" "$tmp/1.log" && ok=0
	[ $ok = 0 ] || { diag "$tmp/1.log"; echo "# up in $up ms, $slow late"; }
	t $ok "a dead DNS server: the agent is up in $up ms, answers --status $polls times (slowest $worst ms), connects to its numeric peer, says the name resolves to no address"
	stop_agents
	kill "$dnspid" 2>/dev/null
else
	for c in 30 31 32; do
		echo "ok $((n + 1)) # SKIP case $c: DNS discovery needs hosts of their own, a resolv.conf each ($(mh_why))"
		n=$((n + 1))
	done
fi

# 33: --peers-file read again on SIGHUP
agent 2 "$tmp/secret" 1
agent 3 "$tmp/secret" 1
p2="$(mh_addr 2):$((port + 2))" p3="$(mh_addr 3):$((port + 3))"
printf '# the peers\n%s\n' "$p2" >"$tmp/peers.txt"
AGENT_OPTS="--peers-file $tmp/peers.txt"
agent 1 "$tmp/secret"
AGENT_OPTS=
ok=1
if peer_is 1 "$p2" connected; then
	printf '%s\n\n%s   # another\n' "$p2" "$p3" >"$tmp/peers.txt"
	kill -HUP "$apid1"
	if peer_is 1 "$p3" connected && peer_is 1 "$p2" connected; then
		printf '%s\n' "$p3" >"$tmp/peers.txt"
		kill -HUP "$apid1"
		if peer_is 1 "$p2" gone && peer_is 1 "$p3" connected; then
			printf '%s\nbad:host:\n' "$p2" >"$tmp/peers.txt"
			kill -HUP "$apid1"
			# (the line is written as the agent reads the file: its peers then
			# are what it decided)
			wait_log "$tmp/1.log" "SIGHUP: $tmp/peers.txt:2: 'bad:host:' is not HOST:PORT .*; the peers stay as they were" &&
				peer_is 1 "$p3" connected && peer_is 1 "$p2" gone &&
				kill -0 "$apid1" && ok=0
		fi
	fi
fi
[ $ok = 0 ] || { diag "$tmp/1.log"; "$G" node --socket "$tmp/1.sock" --status | diag /dev/stdin; }
t $ok "--peers-file read again on SIGHUP: a peer added is connected, one taken out closed, a bad line named FILE:LINE and the peers kept"
stop_agents

# (16 epochs' checksums: cases 34-37, 39, 48-50 and 52; 52 runs under a
# sanitizer build too)
# shellcheck disable=SC2086
ref16=$("$G" bench "$tmp/data" --workers 2 --epochs 16 $BENCH 2>/dev/null |
	sed -n 's/.*"checksum": \[\([^]]*\)\].*/\1/p')
if ! san_skip 36 "under a sanitizer build: these cases time the liveness rules in fractions of a second, and ASan's allocator can hang a worker forked from the agent's threads for the 30-s start watch (Makefile, sanitize); the rules run under ASan in test_remote_check, test_policy and every case's heartbeats"; then

# 34: the peer's link cut mid-job: down within ~1 s, its leases back then
if [ "$mode" = netns ]; then
	agent 2 "$tmp/secret" 1
	agent 1 "$tmp/secret" 2
	peers_connected 1 1
	a2="$(mh_addr 2):$((port + 2))"
	train 24 &
	tp=$!
	wait_remote 64
	clock_start
	mh_cut 2
	t0=$(date +%s%N)
	down=99999
	peer_is 1 "$a2" down && down=$(ms_since "$t0")
	sleep 1
	mh_heal 2
	up=1
	peer_is 1 "$a2" connected && up=0
	healed=$(remote_samples)
	wait $tp
	gap=$(clock_gap)
	stall=$(wait_max)
	d=$(delivered 1)
	ok=1
	case "$(cat "$tmp/sum")" in # its first 16 epochs are the 16-epoch run's
	"$ref16"*) ;;
	*) up=2 ;;
	esac
	[ "${d:-0}" -gt "${healed:-0}" ] || up=3 # its workers delivered again
	# the bounds, plus the time the machine itself stood still (a machine that
	# stops stops the clock's sampler too; an agent held alone does not, and
	# fails here: CI's once read the peer down after 38,674 ms, a run here
	# after 134,642 ms, "the control port took 134592 ms": UCX's blocking TCP
	# connect to the cut worker, UCX_TCP_CONN_NB, conn.c)
	late=0
	[ "$gap" -ge 2000 ] && late=$gap
	[ "$down" -lt $((2000 + late)) ] && [ $up = 0 ] &&
		awk -v s="${stall:-99999}" -v l="$late" 'BEGIN { exit !(s < 3000 + l) }' &&
		grep -q "peer $a2 is down: not heard from" "$tmp/1.log" && ok=0
	[ $ok = 0 ] || {
		diag "$tmp/1.log"
		diag "$tmp/2.log"
		cat "$tmp/sum"
		echo "# down after $down ms, up: $up; the machine stood still $gap ms at most; held loops:"
		grep -h "loop was held\|remote workers: .* took [0-9]* ms" "$tmp/1.log" "$tmp/2.log" | diag /dev/stdin
	}
	[ "$late" = 0 ] || echo "# the machine stood still for $gap ms (the clock read every 0.1 s by a shell loop): the bounds were given that much more"
	t $ok "the peer's link cut mid-job: down in --status after $down ms, the trainer's longest wait ${stall:-?} ms (lease deadline 5000 ms), connected again when healed and its workers deliver again (${healed:-?} -> ${d:-?} samples); same checksums"
	stop_agents
else
	n=$((n + 1))
	echo "ok $n # SKIP a link can be cut only between namespaces ($(mh_why))"
fi

# 35: a lent worker SIGSTOPped: killed and replaced by its lender
agent 2 "$tmp/secret" 1
agent 1 "$tmp/secret" 2
peers_connected 1 1
train 16 &
tp=$!
wait_remote 64
w=$(pgrep -P "$apid2" -f "goldminer node --remote-worker" | head -1)
replaced=99999
if [ -n "$w" ]; then
	kill -STOP "$w"
	t0=$(date +%s%N)
	k=0
	while [ $k -lt 100 ]; do
		nw=$(pgrep -P "$apid2" -f "goldminer node --remote-worker" | grep -vx "$w" | head -1)
		if [ -n "$nw" ] && ! kill -0 "$w" 2>/dev/null; then
			replaced=$(ms_since "$t0")
			break
		fi
		sleep 0.05
		k=$((k + 1))
	done
	kill -CONT "$w" 2>/dev/null
fi
wait $tp
stall=$(wait_max)
ok=1
[ "$(cat "$tmp/sum")" = "$ref16" ] && [ "$replaced" -lt 2000 ] &&
	awk -v s="${stall:-99999}" 'BEGIN { exit !(s < 3000) }' &&
	grep -q "remote worker $w for job .* stopped for [0-9]* ms: killed" "$tmp/2.log" && ok=0
[ $ok = 0 ] || { diag "$tmp/1.log"; diag "$tmp/2.log"; cat "$tmp/sum"; }
t $ok "a lent worker SIGSTOPped: killed and replaced by its lender after $replaced ms, the trainer's longest wait ${stall:-?} ms; same checksums"
stop_agents

# 36: the idlest peer first; a lender's own job takes its CPUs back (host 2 half a
# core: under that a host is CPU-poor and lends nothing, gm_policy_lendable)
AGENT_CPUS=0.5 agent 2 "$tmp/secret" 1
agent 3 "$tmp/secret" 1
agent 1 "$tmp/secret" 2 3
peers_connected 1 2
a2="$(mh_addr 2):$((port + 2))" a3="$(mh_addr 3):$((port + 3))"
k=0 cores2='' cores3=''
while [ $k -lt 40 ] && { [ -z "$cores2" ] || [ -z "$cores3" ]; }; do # their first beats
	st=$("$G" node --socket "$tmp/1.sock" --status)
	cores2=$(echo "$st" | sed -n "s/.*\"addr\": \"$a2\"[^}]*\"lendable_cores\": \([0-9.]*\).*/\1/p")
	cores3=$(echo "$st" | sed -n "s/.*\"addr\": \"$a3\"[^}]*\"lendable_cores\": \([0-9.]*\).*/\1/p")
	sleep 0.05
	k=$((k + 1))
done
# (a cap of 2: one local worker, one remote one)
train 16 --workers 2 &
tp=$!
wait_remote 64
first=2
grep -q "peer $a3 runs 1 remote workers" "$tmp/1.log" && first=3
grep -q "peer $a2 runs [1-9]" "$tmp/1.log" && first=2
# host 3's own job: its agent wants its CPU back
# shellcheck disable=SC2086 # BENCH is a list of options
mh_run 3 0.5 timeout 60 "$G" bench "$tmp/data" --node "$tmp/3.sock" --epochs 2 $BENCH \
	>/dev/null 2>&1 &
own=$!
k=0 moved=1
while [ $k -lt 100 ] && kill -0 $tp 2>/dev/null; do
	grep -q "peer $a2 runs 1 remote workers" "$tmp/1.log" && { moved=0; break; }
	sleep 0.05
	k=$((k + 1))
done
wait $own
wait $tp
ok=1
[ "$(cat "$tmp/sum")" = "$ref16" ] && [ "$first" = 3 ] && [ "$moved" = 0 ] &&
	[ "$cores2" = 0.500 ] && [ "$cores3" = 1.000 ] &&
	grep -q "preempted: this host's own jobs need its CPUs" "$tmp/3.log" && ok=0
[ $ok = 0 ] || { diag "$tmp/1.log"; diag "$tmp/3.log"; cat "$tmp/sum"; echo "# first $first moved $moved cores $cores2 $cores3"; }
t $ok "the idlest peer first: the remote worker went to the peer lending ${cores3:-?} cores, not the first in --peers (${cores2:-?} cores); that peer's own job preempted it and it moved to the other; same checksums"
stop_agents

# 37: say why: a peer that lends no root refuses the job
lend=$LEND
LEND=
agent 2 "$tmp/secret" 1
LEND=$lend
AGENT_OPTS="--metrics 0"
agent 1 "$tmp/secret" 2
AGENT_OPTS=
peers_connected 1 1
train 16 --workers 2 &
tp=$!
k=0 said=1
while [ $k -lt 200 ] && kill -0 $tp 2>/dev/null; do
	"$G" node --socket "$tmp/1.sock" --status >"$tmp/st37" 2>/dev/null
	grep -q '"remote_refused": {"busy": 0, "no_root": 1, "dataset": 0}' "$tmp/st37" &&
		grep -q '"remote_why": "[^"]*refused: no --lend-root there for this dataset' "$tmp/st37" &&
		grep -q '"workers_cap": 2, "remote_capped": true' "$tmp/st37" && { said=0; break; }
	sleep 0.05
	k=$((k + 1))
done
mport=$(sed -n 's/.*metrics on port \([0-9]*\).*/\1/p' "$tmp/1.log" | head -1)
metrics=1
k=0
while [ $said = 0 ] && [ -n "$mport" ] && command -v curl >/dev/null && [ $k -lt 40 ]; do
	# (the metrics are made at each tick, 1 s)
	mh_run 1 - curl -fsS --max-time 5 "http://127.0.0.1:$mport/metrics" >"$tmp/m37" 2>&1
	grep -q '^goldminer_job_remote_shortfall{pid="[0-9]*",reason="no_root"} 1$' "$tmp/m37" &&
		grep -q '^goldminer_job_remote_shortfall{pid="[0-9]*",reason="cap"} 1$' "$tmp/m37" &&
		grep -q '^goldminer_job_demand_img_per_s{pid=' "$tmp/m37" &&
		grep -q "^goldminer_peer_up{peer=\"$(mh_addr 2):$((port + 2))\"} 1\$" "$tmp/m37" &&
		grep -q "^goldminer_peer_lendable_cores{peer=\"$(mh_addr 2):$((port + 2))\"} 1\$" "$tmp/m37" &&
		{ metrics=0; break; }
	sleep 0.1
	k=$((k + 1))
done
if ! command -v curl >/dev/null; then
	metrics=0 # (no curl here: the status is checked)
fi
wait $tp
ok=1
[ "$(cat "$tmp/sum")" = "$ref16" ] && [ $said = 0 ] && [ $metrics = 0 ] &&
	grep -q "job pid [0-9]*: asks the peers for [0-9]* remote workers (was 0): " "$tmp/1.log" &&
	grep -q "job .*: peer .* refused it: no --lend-root there for this dataset" "$tmp/1.log" && ok=0
[ $ok = 0 ] || { diag "$tmp/1.log"; diag "$tmp/st37"; diag "$tmp/m37"; echo "# said $said metrics $metrics port $mport"; }
t $ok "why fewer remote workers: a peer with no --lend-root refuses the job, --status and --metrics say so per reason, with the --workers cap; the log says why"
stop_agents
fi # san_skip (cases 34-37)

# 38: a remote worker holds a lease and one it asked for ahead (a ring of 16
# slots has room for one ahead), no more: a third claim is refused, both leases
# are taken back, the bytes are a clean run's
misbehave claim "refused its claim: a claim while it holds a lease and one ahead" \
	"a claim while the worker holds a lease and one ahead" --slots 16

# 39: a job's ring has room for a lease ahead per remote worker without --slots
# (two peers lending one each, --lend-max-workers 1, and a budget of one:
# 8 x 3 + 2 -> 32 slots), halved
# to what --mem holds (4 slots of 32 x 96x96x3 bytes: 3.4 MiB in 5 MiB, 8 do not
# fit); a peer agent SIGKILLed and started again is dialed back as its agent
# connects (not at the end of our 2-s retry), and lends again: the seconds from
# its start to its first worker's samples here are printed (a bound of 20 s)
if ! san_skip 38 "under a sanitizer build: it times a restarted peer's lending again (ASan's start of the restarted agent and its worker can outlast the job); node.c's ring sizing runs under ASan for every job test_node attaches"; then
AGENT_OPTS="--lend-max-workers 1" agent 2 "$tmp/secret" 1
AGENT_OPTS="--lend-max-workers 1" agent 3 "$tmp/secret" 1
agent 1 "$tmp/secret" 2 3
peers_connected 1 2
peers_lend 1 2
train 40 &
tp=$!
wait_remote 64
kill -KILL "$apid2"
wait "$apid2" 2>/dev/null
t0=$(date +%s%N)
AGENT_OPTS="--lend-max-workers 1" agent 2 "$tmp/secret" 1
a2="$(mh_addr 2):$((port + 2))"
k=0 back='' w0=''
while [ $k -lt 400 ] && [ -z "$back" ] && kill -0 $tp 2>/dev/null; do
	st=$("$G" node --socket "$tmp/1.sock" --status 2>/dev/null | tr '{' '\n' | grep "\"addr\": \"$a2\"")
	w=$(echo "$st" | sed -n 's/.*"workers_connected": \([0-9]*\).*/\1/p')
	[ "${w:-0}" = 0 ] && w0=1 # the killed agent's worker gone first
	[ -n "$w0" ] && echo "$st" | grep -q '"state": "connected"' &&
		awk -v v="$(echo "$st" | sed -n 's/.*"img_per_s": \([0-9.]*\).*/\1/p')" 'BEGIN { exit !(v > 0) }' &&
		back=$(ms_since "$t0")
	sleep 0.05
	k=$((k + 1))
done
wait $tp
sum39=$(cat "$tmp/sum")
cp "$tmp/1.log" "$tmp/1.first39.log"
stop_agents
AGENT_OPTS="--mem 5M"
agent 2 "$tmp/secret" 1
agent 3 "$tmp/secret" 1
agent 1 "$tmp/secret" 2 3
AGENT_OPTS=
peers_connected 1 2
peers_lend 1 2
train 1
ok=1
case "$sum39" in "$ref"*) same39=0 ;; *) same39=1 ;; esac # (its first EPOCHS epochs)
[ -n "$ref" ] && [ $same39 = 0 ] && [ "$(cat "$tmp/sum")" = "$(echo "$ref" | cut -d, -f1)" ] &&
	[ -n "$back" ] && [ "$back" -lt 20000 ] &&
	grep -q "attached: .*, a ring of 32 slots" "$tmp/1.first39.log" &&
	grep -q "peer $a2: its agent connected to us: connecting to it now" "$tmp/1.first39.log" &&
	grep -q "attached: .*, a ring of 4 slots" "$tmp/1.log" && ok=0
# the job's end line of its claims told "no batch free" (where any was: the
# 4-slot ring's three makers usually meet one) adds up: those while the
# trainer waited among all, those whose awaited batch a worker made among them
none=$(sed -n "s/.*: \([0-9]*\) claims answered 'no batch free', \([0-9]*\) of them while its trainer waited: for a batch a remote worker made \([0-9]*\), a local one \([0-9]*\); [0-9]* remote leases of the batch it waited for revoked (HEAD_MS)$/\1 \2 \3 \4/p" "$tmp/1.log" "$tmp/1.first39.log")
echo "$none" | awk 'NF && !($2 <= $1 && $3 + $4 <= $2) { bad = 1 } END { exit bad }' || ok=1
[ $ok = 0 ] || { diag "$tmp/1.first39.log"; diag "$tmp/1.log"; echo "# back $back sums $sum39 / $(cat "$tmp/sum"); no batch free: $none"; }
t $ok "a job's ring holds leases ahead for its remote workers (32 slots for 3 workers), 4 where --mem 5M holds no more; a restarted peer agent is dialed back and lends again after ${back:-?} ms"
stop_agents
fi # san_skip (case 39)


# 40-43: Python jobs' workers on peers. pytrain KIND EPOCHS: the trainer in
# host 1 (0.5 of a core) through agent 1; its checksums into $tmp/pysum. With
# SLOW_MS, each sample takes that much longer (the same bytes): a remote
# worker claims its first lease only once its Python worker runs (seconds: an
# interpreter importing torch), so a job that must see a peer's batches lasts
# longer than that
PY=/usr/bin/python3
pytrain() {
	mh_run 1 0.5 env NODE="$tmp/1.sock" M="${M:-48}" SLOW_MS="${SLOW_MS:-0}" PYTHONPATH="$repo/python" \
		GOLDMINER_LIB="$B/libgoldminer.so" timeout "${TRAIN_S:-300}" \
		"$PY" "$here/python/pyremote_job.py" "$tmp/data" "$1" "$2" >"$tmp/pysum" 2>"$tmp/py.err"
}
pyref() { # the local run's checksums (no agent)
	PYTHONPATH="$repo/python" GOLDMINER_LIB="$B/libgoldminer.so" NW=2 M="${M:-48}" timeout 300 \
		"$PY" "$here/python/pyremote_job.py" "$tmp/data" "$1" "$2" 2>"$tmp/pyref.err"
}
if san_skip 44 "under a sanitizer build: Python processes would load the ASan'ed libgoldminer without its runtime; the Python jobs' messages run under ASan in test_remote_check and fuzz_peermsg"; then
	:
elif ! "$PY" -c "import torch, torchvision" 2>/dev/null; then
	for i in 40 41 42 43 44 45; do
		n=$((n + 1))
		echo "ok $n # SKIP no $PY with torch and torchvision: the Python jobs' cases need them"
	done
else
# the local run's checksums: 3 epochs of the plain job (43), whose first 2 are
# the 2-epoch run's (40, 42, 45): an epoch's batches do not depend on how many follow
want3=$(pyref plain 3)
for kind in plain hybrid; do
	if [ "$kind" = plain ]; then want=$(echo "$want3" | cut -d, -f1-2); else want=$(pyref "$kind" 2); fi
	AGENT_OPTS=--lend-python AGENT_CPUS=2 agent 2 "$tmp/secret" 1
	AGENT_OPTS=
	AGENT_CPUS=1 agent 1 "$tmp/secret" 2
	peers_connected 1 1
	SLOW_MS=20
	pytrain "$kind" 2
	SLOW_MS=
	d=$(delivered 1)
	ok=1
	[ -n "$want" ] && [ "$(cat "$tmp/pysum")" = "$want" ] && [ "${d:-0}" -gt 0 ] && ok=0
	[ $ok = 0 ] || { diag "$tmp/1.log"; diag "$tmp/2.log"; diag "$tmp/py.err"; echo "# got $(cat "$tmp/pysum") want $want"; }
	t $ok "a Python job ($kind) with a peer that lends Python workers: the peer made ${d:-0} samples' batches, checksums equal a local run's"
	stop_agents
	[ "$kind" = plain ] && wantp=$want
done

# 42: declines
AGENT_CPUS=2 agent 2 "$tmp/secret" 1
LEND=$tmp/other
mkdir -p "$LEND"
AGENT_OPTS=--lend-python AGENT_CPUS=2 agent 3 "$tmp/secret" 1
AGENT_OPTS=
LEND=$tmp/data
AGENT_CPUS=1 agent 1 "$tmp/secret" 2 3
peers_connected 1 2
pytrain plain 2 &
tp=$!
k=0 said=1
while [ $k -lt 400 ] && kill -0 $tp 2>/dev/null; do
	"$G" node --socket "$tmp/1.sock" --status >"$tmp/st42" 2>/dev/null
	grep -q 'refused: Python workers are not lent there (no --lend-python)' "$tmp/st42" &&
		grep -q 'refused: no --lend-root there for this dataset' "$tmp/st42" && { said=0; break; }
	sleep 0.05
	k=$((k + 1))
done
wait $tp
ok=1
[ -n "$wantp" ] && [ "$(cat "$tmp/pysum")" = "$wantp" ] && [ $said = 0 ] && ok=0
[ $ok = 0 ] || { diag "$tmp/1.log"; diag "$tmp/2.log"; diag "$tmp/3.log"; diag "$tmp/st42"; diag "$tmp/py.err"; }
t $ok "a Python job's declines: no --lend-python and a root below no --lend-root, both in --status; same checksums locally"
stop_agents

# 43: the peer's Python workers SIGKILLed mid-job
AGENT_OPTS=--lend-python AGENT_CPUS=2 agent 2 "$tmp/secret" 1
AGENT_OPTS=
AGENT_CPUS=1 agent 1 "$tmp/secret" 2
peers_connected 1 1
# slow samples (the same bytes): the job must outlast the peer's Python workers'
# start (an interpreter importing torch, seconds on a loaded machine)
SLOW_MS=40
pytrain plain 3 &
SLOW_MS=
tp=$!
kills=0 k=0
# the Python workers of each remote worker process (its children: a zygote's
# workers are reparented to it, their pool's subreaper), not its zygote (its
# first Python child, the lowest pid: forked workers share its command line).
# Looked for every 0.2 s, so the first kill comes as soon as a worker runs;
# after a kill, 1.5 s for the replacement to work a while; 4 rounds of kills
while [ $k -lt 1500 ] && kill -0 $tp 2>/dev/null; do
	sleep 0.2
	k=$((k + 1))
	[ $kills -lt 4 ] || continue
	hit=0
	for rw in $(rworkers); do
		for w in $(pgrep -P "$rw" | sort -n | sed 1d); do
			kill -KILL "$w" 2>/dev/null && kills=$((kills + 1)) hit=1
		done
	done
	[ $hit = 0 ] || sleep 1.5
done
wait $tp
ok=1
[ -n "$want3" ] && [ "$(cat "$tmp/pysum")" = "$want3" ] && [ $kills -gt 0 ] && ok=0
[ $ok = 0 ] || { diag "$tmp/1.log"; diag "$tmp/2.log"; diag "$tmp/py.err"; echo "# got $(cat "$tmp/pysum") want $want3"; }
t $ok "the peer's Python workers SIGKILLed $kills times mid-job: same checksums"
stop_agents

# 44: the Python job's peer's link cut mid-job
if [ "$mode" = netns ]; then
	AGENT_OPTS=--lend-python AGENT_CPUS=2 agent 2 "$tmp/secret" 1
	AGENT_OPTS=
	AGENT_CPUS=1 agent 1 "$tmp/secret" 2
	peers_connected 1 1
	M=8
	wantm=$(pyref plain 3)
	pytrain plain 3 &
	tp=$!
	wait_remote 32
	mh_cut 2
	sleep 2
	mh_heal 2
	wait $tp
	ok=1
	M=
	[ -n "$wantm" ] && [ "$(cat "$tmp/pysum")" = "$wantm" ] &&
		grep -q "peer $(mh_addr 2):$((port + 2)) is down" "$tmp/1.log" && ok=0
	[ $ok = 0 ] || { diag "$tmp/1.log"; diag "$tmp/2.log"; diag "$tmp/py.err"; echo "# got $(cat "$tmp/pysum") want $wantm"; }
	t $ok "the Python job's peer's link cut mid-job (5-KB batches, eager): the peer down, its leases back, same checksums"
	stop_agents
else
	n=$((n + 1))
	echo "ok $n # SKIP a link can be cut only between namespaces ($(mh_why))"
fi

# 45: the interpreter missing on the peer: the trainer runs $tmp/py/python3
# (a link to $PY); the peer's agent starts with a tmpfs over $tmp/py
if [ "$mode" = netns ]; then
	mkdir -p "$tmp/py"
	ln -sf "$PY" "$tmp/py/python3"
	printf '#!/bin/sh\nmount -t tmpfs gm-hide "%s" || exit 126\nexec "%s" "$@"\n' \
		"$tmp/py" "$G" >"$tmp/hide.sh"
	chmod +x "$tmp/hide.sh"
	G0=$G
	G=$tmp/hide.sh AGENT_OPTS=--lend-python AGENT_CPUS=2 agent 2 "$tmp/secret" 1
	G=$G0 AGENT_OPTS=
	AGENT_CPUS=1 agent 1 "$tmp/secret" 2
	peers_connected 1 1
	PY=$tmp/py/python3 pytrain plain 2 &
	tp=$!
	k=0 said=1
	while [ $k -lt 400 ] && kill -0 $tp 2>/dev/null; do
		"$G" node --socket "$tmp/1.sock" --status >"$tmp/st45" 2>/dev/null
		grep -q "refused: the job's interpreter is missing there" "$tmp/st45" && { said=0; break; }
		sleep 0.05
		k=$((k + 1))
	done
	wait $tp
	ok=1
	[ -n "$wantp" ] && [ "$(cat "$tmp/pysum")" = "$wantp" ] && [ $said = 0 ] && ok=0
	[ $ok = 0 ] || { diag "$tmp/1.log"; diag "$tmp/2.log"; diag "$tmp/st45"; diag "$tmp/py.err"; }
	t $ok "the trainer's interpreter missing on the peer: declined, --status says so; same checksums locally"
	stop_agents
else
	n=$((n + 1))
	echo "ok $n # SKIP a path can be hidden from one host only in its own namespaces ($(mh_why))"
fi
fi

# 46: a home its lender does not hear for QUIET_MS (its agent SIGSTOPped for 3.5
# s) while it hears the lender all along (its beats wait in its socket): the
# lender takes the home for down and, after QUIET_MS, stops its workers (a
# home's late beats alone no longer do: msg.h), the home does not take
# the lender for down; the lender's heartbeats then say it runs fewer workers
# for our jobs than it granted, and the home asks it again: its workers deliver
# again, same bytes
if ! san_skip 45 "under a sanitizer build: it times the liveness rules in fractions of a second (as 34-37)"; then
# shellcheck disable=SC2086
ref40=$("$G" bench "$tmp/data" --workers 2 --epochs 40 $BENCH 2>/dev/null |
	sed -n 's/.*"checksum": \[\([^]]*\)\].*/\1/p')
agent 2 "$tmp/secret" 1
agent 1 "$tmp/secret" 2
peers_connected 1 1
# (a cap of 2, one remote worker: with the four its peer lends, the job ended
# before its home could see the lender run fewer than it granted)
train 40 --workers 2 &
tp=$!
wait_remote 64
kill -STOP "$apid1"
sleep 3.5
kill -CONT "$apid1"
t0=$(date +%s%N)
s0=$(remote_samples)
k=0 again=''
while [ $k -lt 200 ] && kill -0 $tp 2>/dev/null; do
	if grep -q "runs 0 remote workers for our jobs, not the [1-9][0-9]* it granted: asking it again" "$tmp/1.log"; then
		again=$(ms_since "$t0")
		break
	fi
	sleep 0.05
	k=$((k + 1))
done
more=no
[ -n "$again" ] && wait_remote $((${s0:-0} + 64)) && more=yes
wait $tp
ok=1
[ -n "$ref40" ] && [ "$(cat "$tmp/sum")" = "$ref40" ] && [ "$more" = yes ] &&
	grep -q "its home agent at .* is not heard from for [0-9]* ms; its remote workers stop" "$tmp/2.log" &&
	! grep -q "peer .* is down" "$tmp/1.log" && ok=0
[ $ok = 0 ] || { diag "$tmp/1.log"; diag "$tmp/2.log"; echo "# again ${again:-never} more $more"; }
t $ok "a home its lender took for down (its agent stopped 3.5 s) asks again ${again:-never} ms after it resumed, seeing the lender's heartbeats say 0 workers of those granted; the lender's workers deliver again; same checksums"
stop_agents
fi

# 47: version skew: a remote worker (test build) stamps one sample as another
# build's layout of SAMPLE would be; the home refuses it in words, naming the
# peer and both layouts, never reading it; the batch is made again
misbehave layout ".*another goldminer version: message SAMPLE in layout 2 of [0-9]* bytes (this build's: layout 1" \
	"a sample in another build's layout"

# 48: two jobs of one home, a peer with one worker to lend: the first holds it;
# the second sees none to ask for (the slot its sibling holds is not free) and
# asks no more than twice in its life (the old home counted its own jobs'
# workers as free: it asked, was granted none, saw none, asked again, each tick)
if ! san_skip $((n + 1)) "under a sanitizer build: it counts the home's asks over a job's life, which ASan's slower agents stretch"; then
	AGENT_CPUS=1 agent 2 "$tmp/secret" 1
	agent 1 "$tmp/secret" 2
	peers_connected 1 1
	train 16 --workers 2 &
	tp=$!
	wait_remote 64
	# shellcheck disable=SC2086 # BENCH is a list of options
	mh_run 1 0.5 timeout 120 "$G" bench "$tmp/data" --node "$tmp/1.sock" --epochs 8 \
		--workers 2 $BENCH >/dev/null 2>&1 &
	tp2=$!
	wait $tp2
	wait $tp
	most=$(sed -n 's/.*job pid \([0-9]*\): asks the peers for [1-9][0-9]* remote workers (was 0).*/\1/p' \
		"$tmp/1.log" | sort | uniq -c | sort -n | tail -1 | awk '{print $1}')
	jobs=$(grep -c "job pid [0-9]* attached" "$tmp/1.log")
	ok=1
	[ "$(cat "$tmp/sum")" = "$ref16" ] && [ "$jobs" = 2 ] && [ "${most:-0}" -le 2 ] && ok=0
	[ $ok = 0 ] || { diag "$tmp/1.log"; echo "# jobs $jobs most asks from none $most"; }
	t $ok "two jobs of one home, a peer lending one worker: a job asked for remote workers from none at most ${most:-0} times (at most 2), same checksums"
	stop_agents
fi # san_skip (case 48)

# 49: a lender's own job runs beside its guests: they share the cores it leaves
# (--cpus 1; its own job's trainer takes 4 batches a second), each paced by its
# lender (its exit line says to what, at least); same checksums
if ! san_skip $((n + 1)) "under a sanitizer build: every lent worker reads its pace before each batch, and every lender writes it at each tick, under ASan in the other cases; this one only shows a pace in force"; then
	AGENT_CPUS=1 agent 2 "$tmp/secret" 1
	agent 1 "$tmp/secret" 2
	peers_connected 1 1
	# shellcheck disable=SC2086 # BENCH is a list of options
	mh_run 2 0.5 timeout 120 "$G" bench "$tmp/data" --node "$tmp/2.sock" --epochs 40 \
		--consumer-rate 4 $BENCH >/dev/null 2>&1 &
	own=$!
	wait_log "$tmp/2.log" "job pid [0-9]* attached"
	train 16 --workers 2 &
	tp=$!
	wait $tp
	kill "$own" 2>/dev/null
	wait "$own" 2>/dev/null
	got=$(delivered 1)
	stop_agents
	paced=$(sed -n 's/.*; paced by its lender to \([0-9.]*\) of a core at least$/\1/p' "$tmp/2.log" | sort -n | head -1)
	ok=1
	[ "$(cat "$tmp/sum")" = "$ref16" ] && [ "${got:-0}" -gt 0 ] && [ -n "$paced" ] &&
		awk -v p="$paced" 'BEGIN { exit !(p > 0 && p < 1) }' && ok=0
	[ $ok = 0 ] || { diag "$tmp/2.log"; echo "# delivered ${got:-?}"; }
	t $ok "a lender's own job beside its guests: they delivered ${got:-?} samples, each paced by its lender (the least: ${paced:-none} of a core); same checksums"
fi # san_skip (case 49)

# 50: a Python job's guests beside their lender's own job (--cpus 1, a trainer
# of 4 batches a second): each paced by its lender between its batches (its
# exit line says to what at least, and how long it waited); same checksums
if san_skip $((n + 1)) "under a sanitizer build: Python processes would load the ASan'ed libgoldminer without its runtime; the pace's read and step run under ASan in case 49's C guests and test_policy"; then
	:
elif ! "$PY" -c "import torch, torchvision" 2>/dev/null; then
	n=$((n + 1))
	echo "ok $n # SKIP no $PY with torch and torchvision: a Python job's guests need them"
else
	[ -n "${wantp:-}" ] || wantp=$(pyref plain 2)
	AGENT_OPTS=--lend-python AGENT_CPUS=1 agent 2 "$tmp/secret" 1
	AGENT_OPTS=
	agent 1 "$tmp/secret" 2
	peers_connected 1 1
	# shellcheck disable=SC2086 # BENCH is a list of options
	mh_run 2 0.5 timeout 120 "$G" bench "$tmp/data" --node "$tmp/2.sock" --epochs 40 \
		--consumer-rate 4 $BENCH >/dev/null 2>&1 &
	own=$!
	wait_log "$tmp/2.log" "job pid [0-9]* attached"
	SLOW_MS=20
	pytrain plain 2
	SLOW_MS=
	kill "$own" 2>/dev/null
	wait "$own" 2>/dev/null
	d=$(delivered 1)
	stop_agents
	waited=$(sed -n 's/.* of a core at least, \([0-9.]*\) s spent waiting for its pace$/\1/p' "$tmp/2.log" | sort -n | tail -1)
	paced=$(sed -n 's/.* batches; paced by its lender to \([0-9.]*\) of a core at least, .*/\1/p' "$tmp/2.log" | sort -n | head -1)
	ok=1
	[ "$(cat "$tmp/pysum")" = "$wantp" ] && [ "${d:-0}" -gt 0 ] && [ -n "$paced" ] &&
		awk -v p="$paced" 'BEGIN { exit !(p > 0 && p < 1) }' && ok=0
	[ $ok = 0 ] || { diag "$tmp/2.log"; diag "$tmp/py.err"; echo "# got $(cat "$tmp/pysum") want $wantp"; }
	t $ok "a Python job's guests beside their lender's own job: they made ${d:-?} samples' batches, each paced by its lender (the least: ${paced:-none} of a core; one waited ${waited:-?} s for it); same checksums"
fi

# 51: a worker several times slower than the others, within its lease deadline
# (the trickle at the default 5 s: a sample every 2 s, the lease's bound 40 s),
# holds the batch the trainer waits for: revoked after the trainer's HEAD_MS
# (1 s) of waiting with the rest of the ring made, and the batch made again
misbehave trickle "held the batch its trainer waited for [0-9]* ms while every other slot of the ring was made or being made" \
	"a remote worker several times slower than the others (one sample every 2 s, within its 5-s deadline) holds the batch the trainer waits for: revoked after 1 s of the trainer's wait, not at the lease's 40-s bound"

# 52: a job fed by the peer's workers (a home of 0.25 of a core by --cpus:
# it runs no local worker once they deliver measurably more) whose peer agent
# is SIGKILLed: the home runs the job's local workers again at once, at the
# loss of its remote workers ("its remote workers are gone"), not at its next
# measured window; same bytes. Again, 3 times at most, where the job ended
# before it went fed, or went fed as it ended (a loaded machine: its
# trainer gone before the kill, its home had nothing left to take back).
try=0
while [ $try -lt 3 ]; do
	try=$((try + 1))
	agent 2 "$tmp/secret" 1
	AGENT_CPUS=0.25 agent 1 "$tmp/secret" 2
	peers_connected 1 1
	train 16 &
	tp=$!
	wait_log "$tmp/1.log" "runs no local worker, remote workers feed it" && fed=0 || fed=1
	kill -0 $tp 2>/dev/null || fed=1
	kill -KILL "$apid2"
	wait $tp
	[ "$fed" = 0 ] && break
	echo "# the job was not fed while it ran (try $try)"
	stop_agents
done
ok=1
[ "$fed" = 0 ] && [ "$(cat "$tmp/sum")" = "$ref16" ] &&
	wait_log "$tmp/1.log" "runs its local workers again: its remote workers are gone" && ok=0
[ $ok = 0 ] || { diag "$tmp/1.log"; cat "$tmp/sum"; }
t $ok "a fed job's peer agent SIGKILLed: its home runs the job's local workers again as its remote workers go; same checksums"
stop_agents

# 10: the agents' and remote workers' own words: no sanitizer report, no crash.
# LeakSanitizer's "encountered a fatal error" is not a finding: its check at exit
# could not stop the process's threads (seen on CI's machine, where it names
# ptrace); those lines are counted and shown, not failed on, and ASan's and
# UBSan's checks of the same process ran all the same.
grep -E "LeakSanitizer has encountered a fatal error|HINT: .*(LSAN_OPTIONS|does not work under ptrace)" \
	"$tmp/all.log" >"$tmp/lsan.log"
if [ -s "$tmp/lsan.log" ]; then
	echo "# LeakSanitizer could not run its exit check in $(grep -c "fatal error" "$tmp/lsan.log") processes:"
	diag "$tmp/lsan.log"
fi
if grep -E "Sanitizer|runtime error:|Segmentation|core dumped|ended \(status 0x(8|b|6)" "$tmp/all.log" |
	grep -vxF -f "$tmp/lsan.log" >"$tmp/bad.log"; then
	diag "$tmp/bad.log"
	t 1 "no agent or remote worker reported a sanitizer error or crashed"
else
	t 0 "no agent or remote worker reported a sanitizer error or crashed"
fi
