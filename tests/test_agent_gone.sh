#!/bin/sh
# A trainer outlives its node agent: when the agent that runs its workers dies,
# the trainer's loader goes on with its own workers over the same ring, says so
# in one line on its stderr, and an agent started again on the socket adopts
# the running ring (the trainer re-attaches). The trainer is `goldminer bench
# --node` (the C loader); every run's per-epoch checksums must equal those of
# a single-host run with the same options:
#   1. the agent SIGKILLed mid-batch (the trainer drains as fast as it can, so
#      the agent's workers hold leases): same bytes, the one line once
#   2. the agent SIGKILLed between epochs (an epoch of 4 batches in a ring of
#      8 slots: the ring always holds an epoch's end and the next one's start)
#   3. the agent SIGKILLed during a scale-up (node --scale PID=4, then the kill
#      while it forks the workers)
#   4. the agent SIGTERMed (it stops the ring on its way out): same bytes
#   5. the agent SIGKILLed and started again, twice in one run: same bytes
#   6. ... and the job was re-attached each time (the agent's log and --status
#      say the ring was adopted, the trainer's stderr says it re-attached)
#   7. with remote workers lending (tests/multihost.sh: host 1's trainer and
#      agent on a CPU-poor host, host 2's agent lends): agent 1 SIGKILLed while
#      host 2's workers deliver, started again: same bytes, re-attached
#   8. a Python job (goldminer.torch.DataLoader with node=, as `goldminer run`
#      makes one; tests/python/pyremote_job.py): the agent SIGKILLed while its
#      Python workers run, started again: the same per-epoch checksums as a
#      run with local workers, the one line, and the job sent to the new agent
#      (the trainer says it re-attached)
#   9. under `goldminer run --node` (a torchvision ImageFolder script that run
#      serves from the C loader): the agent SIGKILLed, started again: the same
#      per-epoch hashes as `goldminer run` without an agent, one line,
#      re-attached
#  10. a Python job whose workers the trainer runs (GOLDMINER_NODE_WORKERS=
#      trainer: the agent only sizes them) while host 2's agent lends Python
#      workers to it (they write into the ring through agent 1): agent 1
#      SIGKILLed once they delivered, mid-epoch: the leases they held go back
#      at once (nothing else would ever take them back), the job ends within
#      a bound (90 s from the kill) with a local run's per-epoch checksums;
#      agent 1 started again re-attaches the job (run by the trainer again)
#  11. the same with the Python workers run by agent 1 (it has the trainer's
#      interpreter): the trainer's own workers take over, re-attached
#      (10 and 11 run the job again, 3 times at most, while host 2's workers
#      delivered less than 2 batches before it ended: a loaded machine)
# Skips 7, 10 and 11, saying why, without the remote plugin (UCX); 8-11 without
# /usr/bin/python3 with torch (and torchvision for 9), and under a sanitizer
# build. TAP on stdout; every
# wait has a deadline. Env: B (build dir), GM_AGENT_GONE_CASES="1 5" (run only
# these cases; the others skip).
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/agent.sh
. "$here/agent.sh"
T_TIMED=1 # each case's line says how long it took
N=11
echo "1..$N"
want() { # want CASE: is the case to run (GM_AGENT_GONE_CASES)? If not, it skips
	listed "$1" "${GM_AGENT_GONE_CASES:-}" && return 0
	skip "not in GM_AGENT_GONE_CASES"
	return 1
}

"$G" synth "$tmp/data" --images 384 >/dev/null 2>&1
"$G" synth "$tmp/small" --images 128 >/dev/null 2>&1
BENCH="--batch 32 --size 96 --checksum --quiet"
sums() { sed -n 's/.*"checksum": \[\([^]]*\)\].*/\1/p' "$1"; }
# ref DATA EPOCHS [ARGS]: a single-host run's checksums
ref() {
	d=$1 e=$2
	shift 2
	# shellcheck disable=SC2086 # BENCH is a list of options
	"$G" bench "$d" --workers 2 --epochs "$e" $BENCH "$@" >"$tmp/ref.json" 2>&1
	sums "$tmp/ref.json"
}

r16=$(ref "$tmp/data" 16) # cases 1, 3 and 4

# train DATA EPOCHS [ARGS]: the trainer in the background (pid $tpid), against
# the agent on $sock; output in $tmp/run.json and run.err (120 s at most)
train() {
	d=$1 e=$2
	shift 2
	# shellcheck disable=SC2086
	timeout 120 "$G" bench "$d" --node "$sock" --epochs "$e" $BENCH "$@" \
		>"$tmp/run.json" 2>"$tmp/run.err" &
	tpid=$!
}
# went_away: lines of the trainer's stderr that say the agent went away
went_away() { grep -c "goldminer loader: the node agent at $sock went away" "$tmp/run.err"; }
# check REF WHAT: the run ended 0 with REF's checksums and said each going once
# per agent killed ($kills), and no sanitizer report in its stderr or an agent's
# log (make sanitize's build); TAP line WHAT
check() {
	wait "$tpid"
	rc=$? ok=1 tpid=''
	w=$(went_away)
	[ "$rc" = 0 ] && [ -n "$1" ] && [ "$(sums "$tmp/run.json")" = "$1" ] &&
		[ "$w" = "${kills:-1}" ] && ! grep -q "Sanitizer" "$tmp/run.err" "$tmp"/*.log &&
		ok=0
	[ $ok = 0 ] || {
		echo "# exit $rc, $w 'went away' lines; checksums $(sums "$tmp/run.json"), want $1"
		diag "$tmp/run.err"
		diag "$tmp/a.log"
	}
	t $ok "$2"
}

# 1: mid-batch
if want 1; then
	r=$r16
	start_agent "$tmp/a.log" --cpus 2
	train "$tmp/data" 16
	wait_for "$tmp/a.log" "job pid [0-9]* attached"
	sleep 0.5
	kill -KILL "$apid"
	kills=1 check "$r" "the agent SIGKILLed mid-batch: same checksums, one line on the trainer's stderr"
	echo "# $(grep -o '[0-9]* batches its workers held' "$tmp/run.err") made again"
	stop_agent
fi

# 2: between epochs
if want 2; then
	r=$(ref "$tmp/small" 24)
	start_agent "$tmp/a.log" --cpus 2
	train "$tmp/small" 24 --slots 8 --consumer-rate 20
	wait_for "$tmp/a.log" "job pid [0-9]* attached"
	sleep 1.2
	kill -KILL "$apid"
	kills=1 check "$r" "the agent SIGKILLed between epochs (4 batches an epoch, 8 slots): same checksums"
	stop_agent
fi

# 3: during a scale-up
if want 3; then
	r=$r16
	start_agent "$tmp/a.log" --cpus 4
	train "$tmp/data" 16 --workers 1
	wait_for "$tmp/a.log" "job pid [0-9]* attached"
	sleep 0.3
	jp=$(sed -n 's/.*job pid \([0-9]*\) attached.*/\1/p' "$tmp/a.log")
	"$G" node --socket "$sock" --scale "$jp=4" >"$tmp/scale.out" 2>&1
	kill -KILL "$apid"
	kills=1 check "$r" "the agent SIGKILLed while it scales the job up to 4 workers: same checksums"
	stop_agent
fi

# 4: SIGTERM
if want 4; then
	r=$r16
	start_agent "$tmp/a.log" --cpus 2
	train "$tmp/data" 16
	wait_for "$tmp/a.log" "job pid [0-9]* attached"
	sleep 0.5
	kill -TERM "$apid"
	kills=1 check "$r" "the agent SIGTERMed (it stops the ring on its way out): same checksums"
	stop_agent
fi

# 5: restarted twice: re-attached each time
if want 5; then
	r=$(ref "$tmp/data" 10)
	start_agent "$tmp/a.log" --cpus 2
	train "$tmp/data" 10 --consumer-rate 12
	wait_for "$tmp/a.log" "job pid [0-9]* attached"
	ok=0
	for round in 1 2; do
		sleep 1
		kill -KILL "$apid"
		wait_for "$tmp/run.err" "went away" || ok=1
		sleep 0.5
		start_agent "$tmp/b$round.log" --cpus 2
		wait_for "$tmp/b$round.log" "job pid [0-9]* re-attached" || ok=1
		"$G" node --socket "$sock" --status >"$tmp/status$round" 2>&1
		grep -q '"adopted_at_task": [0-9]' "$tmp/status$round" || ok=1
	done
	cat "$tmp/b1.log" >>"$tmp/a.log"
	kills=2 check "$r" "the agent SIGKILLed and started again twice: same checksums"
	ra=$(grep -c "re-attached to the node agent at $sock" "$tmp/run.err")
	[ "$ra" = 2 ] || ok=1
	[ $ok = 0 ] || {
		diag "$tmp/b1.log"
		diag "$tmp/b2.log"
		diag "$tmp/status1"
	}
	t $ok "... and the job re-attached each time: the new agent adopted the running ring (its log, --status), the trainer said so ($ra times)"
	stop_agent
else
	skip "not in GM_AGENT_GONE_CASES" # case 6: case 5's second line
fi

# hosts: two hosts (tests/multihost.sh), made once for cases 7, 10 and 11; the
# agents' addresses in $l1 and $l2, new ports each call
hosts() {
	if [ -z "${port:-}" ]; then
		# shellcheck source=tests/multihost.sh
		. "$here/multihost.sh"
		MH_ATEXIT="stop_agent; rm -rf '$tmp'"
		mh_setup 2
		mh_ucx_env
		mh_secret "$tmp/secret"
		port=$((20000 + $$ % 20000))
	fi
	port=$((port + 10))
	l1="$(mh_addr 1):$((port + 1))" l2="$(mh_addr 2):$((port + 2))"
}

# 7: remote workers lending to the job when its agent dies
remote() {
	if [ ! -f "$B/libgoldminer-remote.so" ]; then
		skip "no $B/libgoldminer-remote.so (UCX not installed: make deps)"
		return
	fi
	hosts
	r=$(ref "$tmp/data" 12)
	lend="--secret $tmp/secret --lend-root $tmp/data"
	# shellcheck disable=SC2086 # lend is a list of options
	mh_agent 2 0 "$tmp/2.sock" --cpus 1 --listen "$l2" --peers "$l1" $lend >"$tmp/2.log" 2>&1
	# host 1: a quarter of a core for its agent, its workers and the trainer
	# shellcheck disable=SC2086
	mh_agent 1 0.25 "$sock" --cpus 0.25 --listen "$l1" --peers "$l2" $lend >"$tmp/a.log" 2>&1
	apid=$MH_PID
	mh_connected "$sock" 1
	# shellcheck disable=SC2086 # BENCH is a list of options
	mh_spawn 1 0.25 timeout 120 "$G" bench "$tmp/data" --node "$sock" --epochs 12 $BENCH \
		>"$tmp/run.json" 2>"$tmp/run.err"
	tpid=$MH_PID
	k=0 s=0
	while [ $k -lt 400 ] && [ "${s:-0}" -lt 64 ]; do
		s=$("$G" node --socket "$sock" --status 2>/dev/null |
			sed -n 's/.*"remote_samples": \([0-9]*\).*/\1/p')
		sleep 0.05
		k=$((k + 1))
	done
	kill -KILL "$apid"
	sleep 0.5
	rm -f "$sock"
	# shellcheck disable=SC2086
	mh_agent 1 0.25 "$sock" --cpus 0.25 --listen "$l1" --peers "$l2" $lend >"$tmp/b.log" 2>&1
	apid=$MH_PID
	ra=0
	wait_for "$tmp/b.log" "re-attached" 30 && ra=1
	kills=1 check "$r" "its agent SIGKILLed while host 2's workers lend to the job (${s:-0} samples delivered), started again: same checksums, re-attached ($ra)"
	[ $ra = 1 ] || diag "$tmp/b.log"
	mh_agents_stop # both hosts' agents: the next cases start their own on $sock
	apid=
	rm -f "$sock"
}
want 7 && remote

# 8: a Python job
python_job() {
	why=$(py_unfit torch)
	[ -z "$why" ] || {
		skip "$why (cases 1-7 run bind.c's C twin, loader.c, under ASan)"
		return
	}
	job() { # job [NODE]: the trainer's per-epoch checksums (3 epochs)
		# shellcheck disable=SC2086 # no NODE: no argument
		env ${1:+NODE="$1"} NW=2 M=8 SLOW_MS=5 PYTHONPATH="$repo/python" \
			GOLDMINER_LIB="$B/libgoldminer.so" timeout 300 \
			"$PY" "$here/python/pyremote_job.py" "$tmp/data" plain 3
	}
	r=$(job 2>"$tmp/pyref.err")
	start_agent "$tmp/a.log" --cpus 2
	job "$sock" >"$tmp/py.out" 2>"$tmp/run.err" &
	tpid=$!
	wait_for "$tmp/a.log" "job pid [0-9]* attached"
	sleep 2
	kill -KILL "$apid"
	sleep 0.5
	start_agent "$tmp/b.log" --cpus 2
	wait "$tpid"
	rc=$? ok=1
	w=$(went_away)
	ra=$(grep -c "re-attached to the node agent at $sock" "$tmp/run.err")
	[ "$rc" = 0 ] && [ -n "$r" ] && [ "$(cat "$tmp/py.out")" = "$r" ] && [ "$w" = 1 ] &&
		[ "$ra" = 1 ] && ok=0
	[ $ok = 0 ] || {
		echo "# exit $rc, checksums $(cat "$tmp/py.out"), want $r"
		diag "$tmp/run.err"
		diag "$tmp/b.log"
	}
	t $ok "a Python job: its agent SIGKILLed while its Python workers run, started again: same checksums as local workers, one line, re-attached ($ra)"
	stop_agent
}
want 8 && python_job

# 9: under goldminer run
run_job() {
	why=$(py_unfit "torch, torchvision")
	[ -z "$why" ] || {
		skip "$why"
		return
	}
	cat >"$tmp/train.py" <<'PYEOF'
import hashlib, sys, time
import torch
from torch.utils.data import DataLoader
from torchvision import datasets, transforms as T

if __name__ == "__main__":
    torch.manual_seed(5)
    dl = DataLoader(datasets.ImageFolder(sys.argv[1], T.Compose(
        [T.RandomResizedCrop(32), T.ToTensor()])), batch_size=32, shuffle=True, num_workers=2)
    out = []
    for _ in range(8):
        h = hashlib.sha256()
        for x, y in dl:
            h.update(x.numpy().tobytes() + y.numpy().tobytes())
            time.sleep(0.03)  # a trainer's step
        out.append(h.hexdigest()[:16])
    print(",".join(out))
PYEOF
	r=$(cd "$tmp" && timeout 300 "$G" run -- "$PY" "$tmp/train.py" "$tmp/data" 2>"$tmp/runref.err")
	start_agent "$tmp/a.log" --cpus 2
	(cd "$tmp" && exec timeout 300 "$G" run --node "$sock" -- "$PY" "$tmp/train.py" "$tmp/data") \
		>"$tmp/run.out" 2>"$tmp/run.err" &
	tpid=$!
	wait_for "$tmp/a.log" "job pid [0-9]* attached" 60
	sleep 1
	kill -KILL "$apid"
	sleep 0.5
	start_agent "$tmp/b.log" --cpus 2
	wait "$tpid"
	rc=$? ok=1
	w=$(went_away)
	ra=$(grep -c "re-attached to the node agent at $sock" "$tmp/run.err")
	[ "$rc" = 0 ] && [ -n "$r" ] && [ "$(cat "$tmp/run.out")" = "$r" ] && [ "$w" = 1 ] &&
		[ "$ra" = 1 ] && grep -q "job pid [0-9]* re-attached" "$tmp/b.log" && ok=0
	[ $ok = 0 ] || {
		echo "# exit $rc, hashes $(cat "$tmp/run.out"), want $r"
		diag "$tmp/runref.err"
		diag "$tmp/run.err"
		diag "$tmp/b.log"
	}
	t $ok "under goldminer run --node (the C path): the agent SIGKILLed, started again: same hashes as goldminer run without an agent, one line, re-attached ($ra)"
	stop_agent
}
want 9 && run_job

# end_trainer: the trainer (timeout(1), which passes TERM on to python) ended,
# 5 s at most; its exit status
end_trainer() {
	kill -TERM "$tpid" 2>/dev/null
	k=0
	while [ $k -lt 100 ] && kill -0 "$tpid" 2>/dev/null; do
		sleep 0.05
		k=$((k + 1))
	done
	kill -KILL "$tpid" 2>/dev/null
	wait "$tpid"
}

# 10, 11: a Python job that host 2's agent lends Python workers to, its agent
# SIGKILLed; py_lent WORKERS: trainer (GOLDMINER_NODE_WORKERS) or auto
py_lent() {
	why=
	[ -f "$B/libgoldminer-remote.so" ] || why="no $B/libgoldminer-remote.so (UCX not installed: make deps)"
	[ -n "$why" ] || why=$(py_unfit torch)
	if [ -n "$why" ]; then
		skip "$why (test_remote_py.sh runs the home's Python path under ASan)"
		return
	fi
	hosts
	# a local run's checksums (4 epochs of 24 batches; SLOW_MS changes no byte)
	[ -n "${pyref4:-}" ] || pyref4=$(NW=2 M=8 PYTHONPATH="$repo/python" \
		GOLDMINER_LIB="$B/libgoldminer.so" timeout 300 \
		"$PY" "$here/python/pyremote_job.py" "$tmp/data" plain 4 2>"$tmp/pyref.err")
	lend="--secret $tmp/secret --lend-root $tmp/data --lend-python"
	wk=
	[ "$1" = trainer ] && wk=trainer
	try=0
	while :; do # 3 tries at most: the peer's workers must have delivered first
		try=$((try + 1))
		[ $try = 1 ] || hosts # new ports
		# shellcheck disable=SC2086 # lend is a list of options
		mh_agent 2 0 "$tmp/2.sock" --cpus 2 --listen "$l2" --peers "$l1" $lend >"$tmp/2.log" 2>&1
		# host 1: half a core for its agent, the trainer and the job's workers
		# shellcheck disable=SC2086
		mh_agent 1 0.5 "$sock" --cpus 1 --listen "$l1" --peers "$l2" $lend >"$tmp/a.log" 2>&1
		apid=$MH_PID
		mh_connected "$sock" 1
		mh_spawn 1 0.5 env ${wk:+GOLDMINER_NODE_WORKERS=$wk} NODE="$sock" NW=4 M=8 SLOW_MS=20 \
			PYTHONPATH="$repo/python" GOLDMINER_LIB="$B/libgoldminer.so" timeout 240 \
			"$PY" "$here/python/pyremote_job.py" "$tmp/data" plain 4 >"$tmp/py.out" 2>"$tmp/run.err"
		tpid=$MH_PID
		k=0 s=0 st=
		while [ $k -lt 1800 ] && [ "${s:-0}" -lt 32 ] && kill -0 "$tpid" 2>/dev/null; do # 90 s
			st=$("$G" node --socket "$sock" --status 2>/dev/null)
			s=$(printf '%s\n' "$st" | sed -n 's/.*"remote_samples": \([0-9]*\).*/\1/p')
			sleep 0.05
			k=$((k + 1))
		done
		{ [ "${s:-0}" -ge 32 ] && kill -0 "$tpid" 2>/dev/null; } || [ $try -ge 3 ] && break
		echo "# try $try: the peer's workers delivered ${s:-0} samples before the job ended or in 90 s (a loaded machine): again"
		end_trainer
		mh_agents_stop
		apid=
		rm -f "$sock"
	done
	by=$(printf '%s\n' "$st" | sed -n 's/.*"run_by": "\([^"]*\)".*/\1/p')
	kill -KILL "$apid"
	t0=$(date +%s)
	wait_for "$tmp/run.err" "went away" 30
	rm -f "$sock"
	# shellcheck disable=SC2086
	mh_agent 1 - "$sock" --cpus 1 --listen "$l1" --peers "$l2" $lend >"$tmp/b.log" 2>&1
	apid=$MH_PID
	k=0
	while [ $k -lt 1800 ] && kill -0 "$tpid" 2>/dev/null; do # 90 s from the kill
		sleep 0.05
		k=$((k + 1))
	done
	dt=$(($(date +%s) - t0))
	end_trainer
	rc=$? ok=1
	w=$(went_away)
	ra=$(grep -c "re-attached to the node agent at $sock" "$tmp/run.err")
	held=$(sed -n "s/.*(\([0-9]*\) batches its peers' workers held made again).*/\1/p" "$tmp/run.err")
	[ "$1" = trainer ] && want_by="workers run by the trainer" || want_by="workers run by the agent"
	[ "$rc" = 0 ] && [ -n "$pyref4" ] && [ "$(cat "$tmp/py.out")" = "$pyref4" ] && [ "$w" = 1 ] &&
		[ "$ra" = 1 ] && [ "${s:-0}" -ge 32 ] && [ "$by" = "$want_by" ] &&
		grep -q "job pid [0-9]* attached" "$tmp/b.log" && ok=0
	[ $ok = 0 ] || {
		echo "# exit $rc ($dt s after the kill), checksums $(cat "$tmp/py.out"), want $pyref4; $w went away, $ra re-attached; ${s:-0} remote samples before the kill; $by"
		diag "$tmp/run.err"
		diag "$tmp/a.log"
		diag "$tmp/b.log"
		diag "$tmp/2.log"
	}
	if [ "$1" = trainer ]; then
		t $ok "a trainer-run Python job, host 2 lending (${s:-0} samples): its agent SIGKILLed mid-epoch, the peers' leases back (${held:-?} batches), done $dt s after the kill with a local run's checksums, re-attached ($ra)"
	else
		t $ok "an agent-run Python job, host 2 lending (${s:-0} samples): its agent SIGKILLed mid-epoch, the trainer's workers take over, done $dt s after the kill with a local run's checksums, re-attached ($ra)"
	fi
	mh_agents_stop
	apid=
	rm -f "$sock"
}
want 10 && py_lent trainer
if want 11; then py_lent auto; fi # (a skipped last case is no exit status 1)
