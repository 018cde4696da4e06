#!/bin/sh
# Python jobs' workers on peers, measured on one machine that
# behaves like two hosts (tests/multihost.sh: a network namespace and a CPU quota
# per host; UCX over TCP). Same run, same photos (PHOTOS): the hybrid pipeline
# (RandomResizedCrop(224), flip, RandAugment, ToTensor, Normalize; crop and flip
# in C, the rest in Python workers: tests/bench/pyremote_bench.py) for a trainer
# whose host gives it and its agent 0.25 of a core (cgroup v1 quota), alone
# (its agent has no peer), then with a peer host lending 1.5 cores (--cpus 2
# --lend-python), ROUNDS times alternating; img/s of the epochs after the first
# each way, the ratio of the medians (target >= 3x), and whether one more short
# run each way gives the same checksums. Needs root for the namespaces
# (loopback otherwise, said below) and /usr/bin/python3 with torch and
# torchvision. Env: B, PHOTOS, ROUNDS (3), N (photos, 512: at least as many
# batches as ring slots, 8), EPOCHS (3).
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
B=${B:-build}
case $B in /*) ;; *) B=$repo/$B ;; esac
G="$B/goldminer"
PY=/usr/bin/python3
if [ ! -f "$B/libgoldminer-remote.so" ]; then
	echo "pyremote: skipped (no $B/libgoldminer-remote.so: UCX not installed; make deps && make)"
	exit 0
fi
if ! "$PY" -c "import torch, torchvision" 2>/dev/null; then
	echo "pyremote: skipped (no $PY with torch and torchvision)"
	exit 0
fi
tmp=$(mktemp -d)
# shellcheck source=tests/multihost.sh
. "$repo/tests/multihost.sh"
MH_ATEXIT="rm -rf '$tmp'"
mh_setup 2
MH_PERIOD=${MH_PERIOD_US:-20000} # (bench-remote.sh says why a 20 ms period)
echo "pyremote: hosts in mode $(mh_mode) (cgroup $MH_CGROUP)$([ "$(mh_mode)" = loopback ] && echo ": $(mh_why)"); load $(cut -d' ' -f1-3 /proc/loadavg)"
mh_ucx_env
mh_secret "$tmp/secret"
port=$((30000 + $$ % 20000))
ROUNDS=${ROUNDS:-3} N=${N:-512} EPOCHS=${EPOCHS:-3}

# agent NAME HOST CORES CPUS PORT [PEER_PORT] [OPTS]: an agent with socket NAME
agent() {
	# shellcheck disable=SC2086 # $7: a list of options
	mh_agent "$2" "$3" "$tmp/$1.sock" --cpus "$4" \
		--listen "$(mh_addr "$2"):$5" ${6:+--peers "$(mh_addr $((3 - $2))):$6"} \
		--secret "$tmp/secret" --lend-root "$(dirname "$PHOTOS")" $7 >"$tmp/agent-$1.log" 2>&1
}
agent peer 2 1.5 2 $((port + 2)) $((port + 1)) --lend-python
agent alone 1 0.25 1 $((port + 5))
agent home 1 - 1 $((port + 1)) $((port + 2))
mh_connected "$tmp/home.sock" 1
# trainer SOCKET [N EPOCHS]: its JSON line in $tmp/run.json, img/s on stdout
trainer() {
	mh_run 1 - env NODE="$tmp/$1.sock" PYTHONPATH="$repo/python" \
		GOLDMINER_LIB="$B/libgoldminer.so" timeout 900 \
		"$PY" "$here/pyremote_bench.py" "$PHOTOS" "${2:-$N}" "${3:-$EPOCHS}" \
		>"$tmp/run.json" 2>"$tmp/run.err"
	sed -n 's/.*"img_per_s": \([0-9.]*\).*/\1/p' "$tmp/run.json"
	[ -s "$tmp/run.json" ] || sed 's/^/# trainer: /' "$tmp/run.err" >&2
}
a_all='' p_all=''
r=0
while [ $r -lt "$ROUNDS" ]; do
	a_all="$a_all $(trainer alone)"
	p_all="$p_all $(trainer home)"
	r=$((r + 1))
done
rw=$(sed -n 's/.* runs \([0-9]*\) remote workers.*/\1/p' "$tmp/agent-home.log" | sort -n | tail -1)
CHECK=1 trainer alone "$N" 2 >/dev/null
sum_alone=$(sed -n 's/.*"checksum": \[\([^]]*\)\].*/\1/p' "$tmp/run.json")
CHECK=1 trainer home "$N" 2 >/dev/null
sum_peer=$(sed -n 's/.*"checksum": \[\([^]]*\)\].*/\1/p' "$tmp/run.json")
[ -n "${GM_BENCH_DEBUG:-}" ] && sed 's/^/# home: /' "$tmp/agent-home.log" && sed 's/^/# peer: /' "$tmp/agent-peer.log"
mh_agents_stop
same=no
[ -n "$sum_alone" ] && [ "$sum_alone" = "$sum_peer" ] && same=yes
median() { echo "$1" | tr ' ' '\n' | grep . | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
alone=$(median "$a_all")
peer=$(median "$p_all")
echo "pyremote: hybrid pipeline, trainer host 0.25 core alone:$a_all img/s; with a peer lending 1.5 cores" \
	"(${rw:-?} remote Python workers):$p_all img/s"
ratio=$(awk -v a="${alone:-0}" -v p="${peer:-0}" 'BEGIN { if (a > 0) printf "%.2f", p / a; else print "?" }')
echo "pyremote: median ratio ${ratio}x (target >= 3x); same checksums: $same; load $(cut -d' ' -f1-3 /proc/loadavg)"
[ "$same" = yes ] || exit 1
