#!/bin/sh
# bench-ab-remote.sh - the single job of bench-remote.sh's part 1 (a 0.25-core home fed
# by a peer lending 1.5 cores, UCX over TCP between two network namespaces),
# built two ways (or more) and run alternately in one setup, so that the
# machine's load falls on all alike: an A/B of two trees' node agents.
#
#   usage: sh tests/regress/bench-ab-remote.sh A_BUILD B_BUILD [C_BUILD ...]
#          (each a build directory holding goldminer, e.g. /tmp/old/build build)
#
# Each round, for A, then B (then C ...): a fresh lender (host 2, --cpus 2, 1.5 cores) and a
# fresh home (host 1, --cpus 1, 0.25 core), connected; then RUNS trainer runs of
# EPOCHS epochs each against the home (the first on a fresh agent, the others on
# an agent that has served a job), then both agents stopped. Prints per run the
# img/s, the open time and the epochs' ends, and at the end the medians per
# build and per run index and each one's median over A's. The agents' logs (with the
# node lines' timestamps) and --status samples taken every STATUS_MS ms from
# outside the hosts (no quota pays for them) stay in KEEP if set.
# Env: PHOTOS (default /var/tmp/goldminer-photos), ROUNDS (4), RUNS (2),
# EPOCHS (4), STATUS_MS (0: none), KEEP (a directory), MH_PERIOD_US (20000).
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
[ $# -ge 2 ] || { echo "usage: bench-ab-remote.sh A_BUILD B_BUILD [C_BUILD ...]"; exit 2; }
[ $# -le 8 ] || { echo "ab-remote: at most 8 builds (A..H)"; exit 2; }
builds='' names='' k=0
for d in "$@"; do
	[ -x "$d/goldminer" ] || { echo "ab-remote: no $d/goldminer (build it first)"; exit 1; }
	k=$((k + 1))
	builds="$builds $(cd "$d" && pwd)"
	names="$names $(echo ABCDEFGH | cut -c$k)"
done
# build NAME: its directory
build() {
	k=$(($(echo ABCDEFGH | sed "s/$1.*//" | wc -c)))
	echo "$builds" | cut -d' ' -f$((k + 1))
}
PHOTOS=${PHOTOS:-/var/tmp/goldminer-photos}
[ -d "$PHOTOS" ] || { echo "ab-remote: no $PHOTOS (tests/bench/make-photos.sh DIR, or PHOTOS=DIR)"; exit 1; }
ROUNDS=${ROUNDS:-4} RUNS=${RUNS:-2} EPOCHS=${EPOCHS:-4} STATUS_MS=${STATUS_MS:-0}
tmp=$(mktemp -d)
# shellcheck source=tests/multihost.sh
. "$repo/tests/multihost.sh"
MH_ATEXIT="rm -rf '$tmp'"
mh_setup 2
MH_PERIOD=${MH_PERIOD_US:-20000}
echo "ab-remote: hosts in mode $(mh_mode);$(for n in $names; do printf ' %s=%s' "$n" "$(build "$n")"; done); load $(cut -d' ' -f1-3 /proc/loadavg)"
mh_ucx_env
mh_secret "$tmp/secret"
port=$((30000 + $$ % 20000))
[ -n "${KEEP:-}" ] && mkdir -p "$KEEP"

# stamped FILE: a FIFO whose lines go to FILE, each after the epoch time in ms
# (the stamper runs outside the hosts: no quota pays for it)
stamped() {
	rm -f "$tmp/fifo.$$"
	mkfifo "$tmp/fifo.$$" && rm -f "$1.fifo" && mv "$tmp/fifo.$$" "$1.fifo"
	perl -MTime::HiRes=time -ne '$| = 1; printf "%.3f %s", time(), $_' \
		<"$1.fifo" >"$1" &
	stampers="$stampers $!"
}
# unstamp: the stampers end at their FIFO's end (the agents gone); 5 s at most
unstamp() {
	for _ in $(seq 50); do
		live=''
		for p in $stampers; do kill -0 "$p" 2>/dev/null && live="$live $p"; done
		[ -z "$live" ] && break
		sleep 0.1
	done
	for p in $live; do kill "$p" 2>/dev/null; done
	stampers=''
}
# pair TAG: a lender and a home of build $G, connected (1 if not)
pair() {
	stamped "$tmp/lender-$1.log"
	stamped "$tmp/home-$1.log"
	mh_agent 2 1.5 "$tmp/2.sock" --cpus 2 --listen "$(mh_addr 2):$((port + 2))" \
		--peers "$(mh_addr 1):$((port + 1))" --secret "$tmp/secret" \
		--lend-root "$(dirname "$PHOTOS")" >"$tmp/lender-$1.log.fifo" 2>&1 &&
		mh_agent 1 0.25 "$tmp/1.sock" --cpus 1 --listen "$(mh_addr 1):$((port + 1))" \
			--peers "$(mh_addr 2):$((port + 2))" --secret "$tmp/secret" \
			--lend-root "$(dirname "$PHOTOS")" >"$tmp/home-$1.log.fifo" 2>&1 &&
		mh_connected "$tmp/1.sock" 1 && heard
}
# heard: wait (MH_WAIT_S at most) until the home has heard its peer's heartbeat
# (what it can lend): as in bench-remote.sh, whose home runs its job seconds
# after it connected, the job's ring is then sized for the peer's workers
heard() {
	k=0
	until "$G" node --socket "$tmp/1.sock" --status 2>/dev/null | grep -q '"lendable_workers": [1-9]'; do
		[ $k -lt $((${MH_WAIT_S:-10} * 20)) ] || return 1
		sleep 0.05
		k=$((k + 1))
	done
}
# sampler TAG: --status of the home every STATUS_MS ms, each line after its ms
sampler() {
	while :; do
		printf '%s ' "$(date +%s.%3N)"
		"$G" node --socket "$tmp/1.sock" --status 2>/dev/null || echo
		sleep "$(awk -v m="$STATUS_MS" 'BEGIN { printf "%.3f", m / 1000 }')"
	done >"$tmp/status-$1.log"
}
field() { sed -n "s/.*\"$1\": \\([0-9.]*\\).*/\\1/p" "$2" | head -1; }
stampers=''
res="$tmp/results"
: >"$res"
for r in $(seq 1 "$ROUNDS"); do
	for side in $names; do
		G=$(build "$side")/goldminer
		tag=$side$r
		if ! pair "$tag"; then
			echo "ab-remote: $tag: the agents did not start or connect:"
			tail -5 "$tmp/home-$tag.log" "$tmp/lender-$tag.log"
			mh_agents_stop
			exit 1
		fi
		for k in $(seq 1 "$RUNS"); do
			sp=''
			if [ "$STATUS_MS" -gt 0 ]; then
				sampler "$tag.$k" &
				sp=$!
			fi
			t0=$(date +%s.%3N)
			mh_run 1 - "$G" bench "$PHOTOS" --node "$tmp/1.sock" --epochs "$EPOCHS" \
				--workers 8 >"$tmp/run-$tag.$k.json" 2>"$tmp/run-$tag.$k.err"
			[ -n "$sp" ] && kill "$sp" && wait "$sp" 2>/dev/null
			j="$tmp/run-$tag.$k.json"
			ips=$(field img_per_s "$j")
			ends=$(sed -n 's/.*"epoch_end_s": \[\([^]]*\)\].*/\1/p' "$j")
			echo "$side $r $k ${ips:-0} $t0" >>"$res"
			echo "ab-remote: $tag run $k (at $t0): ${ips:-FAILED} img/s, open $(field open_s "$j") s," \
				"epochs end [$ends] s; load $(cut -d' ' -f1 /proc/loadavg)"
			[ -n "$ips" ] || tail -3 "$tmp/run-$tag.$k.err"
		done
		mh_agents_stop
		unstamp
		rm -f "$tmp"/*.sock "$tmp"/*.fifo
		port=$((port + 10))
	done
done
[ -n "${KEEP:-}" ] && cp "$tmp"/*.log "$tmp"/*.json "$tmp"/*.err "$res" "$KEEP"/ 2>/dev/null
med() { sort -n | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
for k in all $(seq 1 "$RUNS"); do
	ma=$(awk -v k="$k" '$1 == "A" && (k == "all" || $3 == k) { print $4 }' "$res" | med)
	for side in $names; do
		m=$(awk -v s="$side" -v k="$k" '$1 == s && (k == "all" || $3 == k) { print $4 }' "$res" | med)
		l=$(awk -v s="$side" -v k="$k" '$1 == s && (k == "all" || $3 == k) { printf " %s", $4 }' "$res")
		awk -v k="$k" -v s="$side" -v a="$ma" -v m="$m" -v l="$l" 'BEGIN {
			printf "ab-remote: runs %s: %s%s (median %.1f): %s/A %.3f\n", k, s, l, m, s,
				(a > 0 ? m / a : 0) }'
	done
done
echo "ab-remote: load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
