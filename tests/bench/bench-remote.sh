#!/bin/sh
# Remote workers (issue 12), measured on one machine that behaves like two
# hosts (tests/multihost.sh: a network namespace and a CPU quota per host; UCX
# over TCP between them). Same run, same photos (PHOTOS):
#   1. the paper's single-job speed-up: a trainer whose host gives it 0.25 of a
#      core (agent --cpus 1 and the trainer share it), alone, then with a peer
#      host lending 1.5 cores (agent --cpus 2): img/s both ways, the ratio and
#      the per-epoch checksums (must be equal);
#   2. the remote cost: one local worker (trainer host 1 core) beside one
#      remote worker (peer host 1 core): each one's img/s (the remote share
#      from the home agent's count), the ratio, and the bytes/s over the link.
#      The simulator's --remote-cost is 1 - that ratio (floored at 0).
# Needs root for the namespaces (loopback otherwise, said below). Env: B, PHOTOS.
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
B=${B:-build}
case $B in /*) ;; *) B=$repo/$B ;; esac
G="$B/goldminer"
if [ ! -f "$B/libgoldminer-remote.so" ]; then
	echo "remote: skipped (no $B/libgoldminer-remote.so: UCX not installed; make deps && make)"
	exit 0
fi
tmp=$(mktemp -d)
# shellcheck source=tests/multihost.sh
. "$repo/tests/multihost.sh"
MH_ATEXIT="rm -rf '$tmp'"
mh_setup 2
echo "remote: hosts in mode $(mh_mode) (cgroup $MH_CGROUP)$([ "$(mh_mode)" = loopback ] && echo ": $(mh_why)")"
export UCX_TLS=tcp UCX_WARN_UNUSED_ENV_VARS=n
UCX_NET_DEVICES=$(mh_netdev)
export UCX_NET_DEVICES
head -c 48 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/secret"
chmod 600 "$tmp/secret"
port=$((30000 + $$ % 20000))
EPOCHS=3

# agent I CORES CPUS [PEER]: an agent in host I under a quota of CORES
agent() {
	mh_spawn "$1" "$2" "$G" node --cpus "$3" --socket "$tmp/$1.sock" \
		--listen "$(mh_addr "$1"):$((port + $1))" \
		${4:+--peers "$(mh_addr "$4"):$((port + $4))"} --secret "$tmp/secret" \
		>"$tmp/agent$1.log" 2>&1
	k=0
	while [ $k -lt 100 ] && ! [ -S "$tmp/$1.sock" ]; do
		sleep 0.05
		k=$((k + 1))
	done
}
# connected: wait (5 s at most) until agent 1 has its peer connected
connected() {
	k=0
	while [ $k -lt 100 ]; do
		mh_run 1 - "$G" node --socket "$tmp/1.sock" --status 2>/dev/null |
			grep -q '"state": "connected"' && return 0
		sleep 0.05
		k=$((k + 1))
	done
}
stop() {
	pkill -f "node --cpus .* --socket $tmp/" 2>/dev/null
	sleep 0.5
	pkill -KILL -f "node --cpus .* --socket $tmp/" 2>/dev/null
	rm -f "$tmp"/*.sock
	port=$((port + 10))
}
# run: the trainer in host 1 (its quota as set), its status sampled at the end
run() {
	(
		sleep "${STATUS_AT:-3}"
		mh_run 1 - "$G" node --socket "$tmp/1.sock" --status >"$tmp/status.json" 2>&1
	) &
	sp=$!
	mh_run 1 - "$G" bench "$PHOTOS" --node "$tmp/1.sock" --epochs "$EPOCHS" --workers 8 \
		${CHECK:+--checksum} >"$tmp/run.json" 2>"$tmp/run.err"
	wait $sp
}
field() { sed -n "s/.*\"$1\": \\([0-9.]*\\).*/\\1/p" "$2" | head -1; }
sums() { sed -n 's/.*"checksum": \[\([^]]*\)\].*/\1/p' "$tmp/run.json"; }

# 1. alone, then with a peer; the timed runs do not hash (a trainer does not:
# hashing 300 MB/s would take a tenth of this host's quarter core), one more
# epoch each way with --checksum proves the bytes equal.
agent 1 0.25 1
run
alone=$(field img_per_s "$tmp/run.json")
EPOCHS=1 CHECK=1 run
sum_alone=$(sums)
stop
agent 2 1.5 2 1
agent 1 0.25 1 2
connected
STATUS_AT=2 run
peer=$(field img_per_s "$tmp/run.json")
rw=$(field remote_workers "$tmp/status.json")
EPOCHS=1 CHECK=1 run
sum_peer=$(sums)
stop
same=no
[ -n "$sum_alone" ] && [ "$sum_alone" = "$sum_peer" ] && same=yes
echo "remote: trainer host 0.25 core alone: ${alone:-?} img/s; with a peer lending 1.5 cores" \
	"(${rw:-?} remote workers): ${peer:-?} img/s"
awk -v a="${alone:-0}" -v p="${peer:-0}" -v s="$same" 'BEGIN {
	printf "remote: speed-up %.2fx (bar >= 4x, ideal 7x); checksums equal: %s\n", (a > 0 ? p / a : 0), s }'

# 2. the remote cost: one local and one remote worker, a core per host (a host
# under one core runs no local worker beside remote ones: see fed_remotely in
# core/node.c). Shares from the home agent's count of remotely made samples.
EPOCHS=6
agent 2 1.0 1 1
agent 1 1.0 1 2
connected
run
stop
total=$(field img_per_s "$tmp/run.json")
images=$(field images "$tmp/run.json")
rs=$(sed -n 's/.*remote workers delivered \([0-9]*\) samples (\([0-9]*\) bytes).*/\1 \2/p' "$tmp/agent1.log" | tail -1)
rwk=$(sed -n 's/.* runs \([0-9]*\) remote workers.*/\1/p' "$tmp/agent1.log" | tail -1)
wall=$(field wall_s "$tmp/run.json")
echo "$rs" | awk -v t="${total:-0}" -v im="${images:-0}" -v n="${rwk:-0}" -v w="${wall:-0}" '{
	f = im > 0 ? $1 / im : 0; r = f * t; l = t - r; per = n > 0 ? r / n : 0
	ratio = l > 0 ? per / l : 0
	printf "remote: 1 local + %d remote worker(s), 1 core per host: %.0f img/s delivered,", n, t
	printf " %.0f%% by the remote side\n", 100 * f
	printf "remote: local worker %.0f img/s, remote worker %.0f img/s: ratio %.2f (bar >= 0.8)\n", l, per, ratio
	printf "remote: over the link %.1f MB/s (%.0f KB per sample)\n", (w > 0 ? $2 / w / 1e6 : 0), ($1 > 0 ? $2 / $1 / 1e3 : 0)
	c = 1 - ratio; if (c < 0) c = 0
	printf "remote: measured remote cost (1 - ratio, floored at 0): %.2f\n", c }'
