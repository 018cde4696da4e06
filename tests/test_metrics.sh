#!/bin/sh
# goldminer node --metrics: a real HTTP client (curl) scrapes the agent's
# Prometheus text while a job runs through it, and the values agree with
# `goldminer node --status`; other paths are 404; a bad address is refused; 40
# connections trickling their requests from one address (127.0.0.1) hold at most
# the per-address limit, and a scrape from another (127.0.0.2) is answered while
# they hang on; the agent stops on SIGTERM. TAP on stdout. Env: B (build dir).
# Every wait has a deadline.
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
B=${B:-build}
case $B in /*) ;; *) B=$repo/$B ;; esac
G="$B/goldminer"
tmp=$(mktemp -d)
agent="" job=""
cleanup() {
	[ -n "$job" ] && kill -9 "$job" 2>/dev/null
	[ -n "$agent" ] && kill -9 "$agent" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT INT TERM
n=0
fails=0
t() { # t STATUS DESCRIPTION
	n=$((n + 1))
	if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fails=$((fails + 1)); fi
}
if ! command -v curl >/dev/null 2>&1; then
	echo "ok 1 # SKIP curl is not installed"
	echo "1..1"
	exit 0
fi
# until SECONDS CMD...: run CMD every 0.1 s until it succeeds or SECONDS pass
until_ok() {
	i=0
	while [ "$i" -lt $(($1 * 10)) ]; do
		"$2" && return 0
		sleep 0.1
		i=$((i + 1))
	done
	return 1
}
S=$tmp/agent.sock
"$G" node --socket "$S" --metrics 127.0.0.1:nonsense --quiet >"$tmp/bad.out" 2>&1
rc=$?
t "$([ $rc = 1 ] && grep -q "^goldminer node: --metrics: address '127.0.0.1:nonsense'" "$tmp/bad.out"; echo $?)" \
	"--metrics with a bad address is refused naming it (rc $rc)"

"$G" synth "$tmp/set" --images 64 --classes 2 >/dev/null 2>&1
"$G" node --socket "$S" --metrics 0 --cpus 2 --quiet 2>"$tmp/agent.err" &
agent=$!
port_known() { grep -q 'metrics on port [0-9]' "$tmp/agent.err"; }
until_ok 10 port_known
port=$(sed -n 's/.*metrics on port \([0-9]*\).*/\1/p' "$tmp/agent.err")
t "$([ -n "$port" ]; echo $?)" "the agent says which port it serves metrics on ($port)"
"$G" bench "$tmp/set" --node "$S" --workers 2 --epochs 1000 --batch 8 --size 32 \
	--consumer-rate 20 --quiet >/dev/null 2>"$tmp/job.err" &
job=$!
attached() { "$G" node --socket "$S" --status 2>/dev/null | grep -q '"jobs": 1'; }
until_ok 20 attached
t $? "a job attaches through the agent"
sleep 1 # a tick or more of measurements
scrape() { curl -fsS --max-time 5 "http://127.0.0.1:$port/metrics" >"$tmp/m" 2>"$tmp/curl.err"; }
scrape
t $? "curl GET /metrics"
"$G" node --socket "$S" --status >"$tmp/status" 2>&1
m() { sed -n "s/^$1 \\(.*\\)/\\1/p" "$tmp/m"; }
budget=$(sed -n 's/.*"budget": \([0-9]*\).*/\1/p' "$tmp/status")
t "$([ "$(m goldminer_node_cpu_budget)" = "$budget" ] && [ "$(m goldminer_node_jobs)" = 1 ]; echo $?)" \
	"node CPU budget ($budget) and jobs (1) agree with --status"
pid=$(sed -n 's/.*"pid": \([0-9]*\).*/\1/p' "$tmp/status")
# The pool may be resized between the two reads: agree on one of a few tries.
same_workers() {
	scrape && "$G" node --socket "$S" --status >"$tmp/status" 2>&1 || return 1
	w=$(sed -n 's/.*"job": \[{"pid": [0-9]*, "workers": \([0-9]*\).*/\1/p' "$tmp/status")
	[ -n "$w" ] && [ "$(m "goldminer_job_workers_granted{pid=\"$pid\"}")" = "$w" ]
}
until_ok 5 same_workers
t $? "job $pid: workers granted ($w) agree with --status"
rate=$(m "goldminer_job_img_per_s{pid=\"$pid\"}")
t "$(awk -v r="$rate" 'BEGIN { exit !(r > 0) }'; echo $?)" "job $pid: delivered img/s is measured ($rate)"
t "$(grep -q '^# TYPE goldminer_job_bad_samples_total counter' "$tmp/m" &&
	grep -q "^goldminer_job_stall_ratio{pid=\"$pid\"} " "$tmp/m" &&
	grep -q '^goldminer_node_mem_used_bytes [1-9]' "$tmp/m"; echo $?)" \
	"families carry HELP/TYPE; stall share, bad samples and memory are there"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$port/other")
t "$([ "$code" = 404 ]; echo $?)" "another path is 404 ($code)"

# 40 slow-drip connections from 127.0.0.1: each sends a request line, then one
# header line a second, never the end of the headers (under the idle timeout).
# The dripper says how many the server left open after 6 s.
drip() {
	python3 - "$port" 40 6 "$tmp/drip.ready" <<'PY'
import socket, sys, time
port, n, secs, ready = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
socks = []
for _ in range(n):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.connect(("127.0.0.1", port))
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
    socks.append(s)
open(ready, "w").close()
alive = set(range(n))
end = time.time() + secs
while time.time() < end:
    for i in list(alive):
        try:
            socks[i].sendall(b"X-Drip: 1\r\n")
            if socks[i].recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b"":
                alive.discard(i)  # closed by the server
        except BlockingIOError:
            pass
        except OSError:
            alive.discard(i)
    time.sleep(1)
print(len(alive))
PY
}
if command -v python3 >/dev/null 2>&1; then
	drip >"$tmp/drip.out" 2>"$tmp/drip.err" &
	dripper=$!
	ready() { [ -e "$tmp/drip.ready" ]; }
	until_ok 10 ready
	sleep 1
	start=$(date +%s)
	curl -fsS --interface 127.0.0.2 --max-time 5 "http://127.0.0.1:$port/metrics" \
		>"$tmp/m2" 2>"$tmp/curl2.err"
	rc=$?
	took=$(($(date +%s) - start))
	t "$([ $rc = 0 ] && grep -q '^goldminer_node_jobs 1' "$tmp/m2"; echo $?)" \
		"a scrape from 127.0.0.2 is answered while 127.0.0.1 trickles 40 requests (rc $rc, ${took}s)"
	wait "$dripper"
	held=$(cat "$tmp/drip.out")
	t "$([ -n "$held" ] && [ "$held" -ge 1 ] && [ "$held" -le 4 ]; echo $?)" \
		"one address holds at most 4 connections (${held:-none} of 40 left open)"
else
	t 0 "# SKIP python3 is not installed (slow-drip connections)"
fi

kill "$job" 2>/dev/null
wait "$job" 2>/dev/null
job=""
kill -TERM "$agent"
gone() { ! kill -0 "$agent" 2>/dev/null; }
until_ok 10 gone
t $? "the agent stops on SIGTERM"
wait "$agent" 2>/dev/null
agent=""
echo "1..$n"
[ "$fails" = 0 ]
