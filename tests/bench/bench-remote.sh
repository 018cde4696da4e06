#!/bin/sh
# Remote workers (issue 12), measured on one machine that behaves like two
# hosts (tests/multihost.sh: a network namespace and a CPU quota per host; UCX
# over TCP between them). Same run, same photos (PHOTOS):
#   1. the paper's single-job speed-up: a trainer whose host gives it 0.25 of a
#      core (agent --cpus 1 and the trainer share it), alone, then with a peer
#      host lending 1.5 cores (agent --cpus 2): img/s both ways, the ratio and
#      the per-epoch checksums (must be equal);
#   2. the remote cost: one local worker (trainer host 0.9 core) beside one
#      remote worker (peer host 0.9 core): each one's img/s (local = delivered
#      - remote), the ratio, and the bytes/s over the link. The simulator's
#      --remote-cost is 1 - that ratio (floored at 0).
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
	mh_run 1 - "$G" bench "$PHOTOS" --node "$tmp/1.sock" --epochs "$EPOCHS" \
		--checksum >"$tmp/run.json" 2>"$tmp/run.err"
	wait $sp
}
field() { sed -n "s/.*\"$1\": \\([0-9.]*\\).*/\\1/p" "$2" | head -1; }
sums() { sed -n 's/.*"checksum": \[\([^]]*\)\].*/\1/p' "$tmp/run.json"; }

# 1. alone, then with a peer
agent 1 0.25 1
run
alone=$(field img_per_s "$tmp/run.json")
sum_alone=$(sums)
stop
agent 2 1.5 2 1
agent 1 0.25 1 2
STATUS_AT=2 run
peer=$(field img_per_s "$tmp/run.json")
sum_peer=$(sums)
rw=$(field remote_workers "$tmp/status.json")
stop
same=no
[ -n "$sum_alone" ] && [ "$sum_alone" = "$sum_peer" ] && same=yes
echo "remote: trainer host 0.25 core alone: ${alone:-?} img/s; with a peer lending 1.5 cores" \
	"(${rw:-?} remote workers): ${peer:-?} img/s"
awk -v a="${alone:-0}" -v p="${peer:-0}" -v s="$same" 'BEGIN {
	printf "remote: speed-up %.2fx (bar >= 4x, ideal 7x); checksums equal: %s\n", (a > 0 ? p / a : 0), s }'

# 2. the remote cost: one local and one remote worker, 0.9 core each
EPOCHS=4
agent 2 0.9 1 1
agent 1 0.9 1 2
STATUS_AT=3 run
stop
total=$(field img_per_s "$tmp/run.json")
r=$(field remote_img_per_s "$tmp/status.json")
rwk=$(field remote_workers "$tmp/status.json")
bytes=$(field remote_bytes "$tmp/status.json")
samples=$(field remote_samples "$tmp/status.json")
awk -v t="${total:-0}" -v r="${r:-0}" -v n="${rwk:-0}" -v b="${bytes:-0}" -v s="${samples:-0}" 'BEGIN {
	l = t - r; per = n > 0 ? r / n : 0; ratio = l > 0 ? per / l : 0
	printf "remote: 1 local + %d remote worker(s), 0.9 core per host: delivered %.0f img/s;", n, t
	printf " local worker %.0f img/s, remote worker %.0f img/s: ratio %.2f (bar >= 0.8)\n", l, per, ratio
	printf "remote: over the link %.1f MB/s (%.0f KB per sample)\n", r * (s > 0 ? b / s : 0) / 1e6, (s > 0 ? b / s : 0) / 1e3
	c = 1 - ratio; if (c < 0) c = 0
	printf "remote: measured remote cost (1 - ratio, floored at 0): %.2f\n", c }'
