#!/bin/sh
# goldminer node --metrics: a real HTTP client (curl) scrapes the agent's
# Prometheus text while a job runs through it, and the values agree with
# `goldminer node --status`; other paths are 404; a bad address is refused; 200
# slow connections (slowloris: nothing sent, or a request a byte at a time) from
# 127.0.0.1 leave scrapes from 127.0.0.1 answered within 2 s, and the server
# closes each of them 3 s after it opened; the agent stops on SIGTERM. TAP on
# stdout. Env: B (build dir).
# Every wait has a deadline.
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/agent.sh
. "$here/agent.sh"
if ! command -v curl >/dev/null 2>&1; then
	echo "ok 1 # SKIP curl is not installed"
	echo "1..1"
	exit 0
fi
"$G" node --socket "$sock" --metrics 127.0.0.1:nonsense --quiet >"$tmp/bad.out" 2>&1
rc=$?
t "$([ $rc = 1 ] && grep -q "^goldminer node: --metrics: address '127.0.0.1:nonsense'" "$tmp/bad.out"; echo $?)" \
	"--metrics with a bad address is refused naming it (rc $rc)"

"$G" synth "$tmp/set" --images 64 --classes 2 >/dev/null 2>&1
start_agent "$tmp/agent.err" --metrics 0 --cpus 2 --quiet
port_known() { grep -q 'metrics on port [0-9]' "$tmp/agent.err"; }
until_ok 10 port_known
port=$(sed -n 's/.*metrics on port \([0-9]*\).*/\1/p' "$tmp/agent.err")
t "$([ -n "$port" ]; echo $?)" "the agent says which port it serves metrics on ($port)"
"$G" bench "$tmp/set" --node "$sock" --workers 2 --epochs 1000 --batch 8 --size 32 \
	--consumer-rate 20 --quiet >/dev/null 2>"$tmp/job.err" &
tpid=$!
attached() { "$G" node --socket "$sock" --status 2>/dev/null | grep -q '"jobs": 1'; }
until_ok 20 attached
t $? "a job attaches through the agent"
sleep 1 # a tick or more of measurements
scrape() { curl -fsS --max-time 5 "http://127.0.0.1:$port/metrics" >"$tmp/m" 2>"$tmp/curl.err"; }
scrape
t $? "curl GET /metrics"
"$G" node --socket "$sock" --status >"$tmp/status" 2>&1
m() { sed -n "s/^$1 \\(.*\\)/\\1/p" "$tmp/m"; }
budget=$(sed -n 's/.*"budget": \([0-9]*\).*/\1/p' "$tmp/status")
t "$([ "$(m goldminer_node_cpu_budget)" = "$budget" ] && [ "$(m goldminer_node_jobs)" = 1 ]; echo $?)" \
	"node CPU budget ($budget) and jobs (1) agree with --status"
pid=$(sed -n 's/.*"pid": \([0-9]*\).*/\1/p' "$tmp/status")
# The pool may be resized between the two reads: agree on one of a few tries.
same_workers() {
	scrape && "$G" node --socket "$sock" --status >"$tmp/status" 2>&1 || return 1
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

# Slowloris: 200 connections from 127.0.0.1, the scraper's own address (the
# usual case: Prometheus on the same host). Half send nothing; half send a
# request line, then one byte of a header every 0.5 s (well under the idle
# timeout), never the end of the headers; each one the server closes is opened
# again for 6 s. Meanwhile 5 scrapes from 127.0.0.1 must each be answered
# within 2 s. The attacker then says how long a slow connection lived at most
# (the server closes one without a whole request 3 s after it opened: at most
# 4.5 s with the sweep's period and the attacker's own 0.5 s tick), and, after
# it stops reopening them, how many the server left open 5 s later (none).
slow() {
	python3 - "$port" 200 6 5 "$tmp/slow.ready" <<'PY'
import socket, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
attack, after, ready = float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]

def opened(k):
    s = socket.create_connection(("127.0.0.1", port), timeout=2)
    s.setblocking(False)
    if k % 2:
        s.sendall(b"GET /metrics HTTP/1.1\r\nX-Slow: ")
    return [s, time.monotonic(), k]

def gone(c):  # closed (or answered) by the server
    try:
        if c[2] % 2:
            c[0].send(b"a")
        c[0].recv(1, socket.MSG_PEEK)  # b"": closed; bytes: an answer
        return True
    except BlockingIOError:
        return False
    except OSError:
        return True

conns = [opened(k) for k in range(n)]
open(ready, "w").close()
start = time.monotonic()
oldest, closed = 0.0, 0
while time.monotonic() - start < attack + after:
    now = time.monotonic()
    attacking = now - start < attack
    for k, c in enumerate(conns):
        if c is None:
            continue
        if gone(c):
            c[0].close()
            closed += 1
            conns[k] = opened(k) if attacking else None
        else:
            oldest = max(oldest, now - c[1])
    time.sleep(0.5)
print("%.1f %d %d" % (oldest, closed, sum(c is not None for c in conns)))
PY
}
if command -v python3 >/dev/null 2>&1; then
	slow >"$tmp/slow.out" 2>"$tmp/slow.err" &
	slower=$!
	ready() { [ -e "$tmp/slow.ready" ]; }
	until_ok 10 ready
	sleep 1
	answered=0 worst=0
	for _ in 1 2 3 4 5; do
		took=$(curl -fsS --max-time 2 -o "$tmp/m2" -w '%{time_total}' \
			"http://127.0.0.1:$port/metrics" 2>>"$tmp/curl2.err") &&
			grep -q '^goldminer_node_jobs 1' "$tmp/m2" && answered=$((answered + 1))
		worst=$(awk -v a="$worst" -v b="${took:-2}" 'BEGIN { print (b > a ? b : a) }')
		sleep 0.5
	done
	t "$([ "$answered" = 5 ]; echo $?)" \
		"5 scrapes from 127.0.0.1 answered within 2 s each while 200 slow connections from 127.0.0.1 hang on ($answered answered, the slowest in ${worst}s)"
	wait "$slower"
	read -r oldest closed left <"$tmp/slow.out"
	t "$(awk -v o="${oldest:-99}" 'BEGIN { exit !(o <= 4.5) }'; echo $?)" \
		"a slow connection is closed 3 s after it opened, trickling or not (the oldest lived ${oldest:-?} s; $closed closed)"
	t "$([ "${left:-1}" = 0 ]; echo $?)" \
		"the server left none of the slow connections open (${left:-?} of 200)"
else
	t 0 "# SKIP python3 is not installed (slow connections)"
fi

kill "$tpid" 2>/dev/null
wait "$tpid" 2>/dev/null
tpid=''
kill -TERM "$apid"
gone() { ! kill -0 "$apid" 2>/dev/null; }
until_ok 10 gone
t $? "the agent stops on SIGTERM"
wait "$apid" 2>/dev/null
apid=
echo "1..$n"
[ "$fails" = 0 ]
