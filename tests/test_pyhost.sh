#!/bin/sh
# Python workers where the trainer's interpreter is: a goldminer.torch.DataLoader
# job sent to a node agent (node=) whose host cannot run the trainer's
# interpreter (a container's agent without torch) is run by the trainer's own
# workers over its ring, sized by the agent (core/node.c, core/bind.c, wire.h's
# GM_NODE_TRAINER_WORKERS). The trainer runs python through a path that exists
# only in its own mount namespace (unshare -m: a tmpfs with a link to
# /usr/bin/python3), so the agent, outside it, cannot see its interpreter:
#   1. such a job completes with the same per-epoch checksums as the same job
#      with local workers (no agent), and the agent runs none of its workers
#      (no child of the agent runs python)
#   2. the agent's --status shows the job with the worker count it decided,
#      that many alive (the trainer's), and "workers run by the trainer"
#   3. `goldminer node --scale PID=1` changes the trainer-run worker count: the
#      status's alive workers (the trainer's pool) go from 3 to 1, and the job
#      still ends with the same checksums
#   4. GOLDMINER_NODE_WORKERS=trainer with the interpreter visible to the agent:
#      the trainer runs them all the same ("the trainer asked"), same checksums
#   5. without it the agent, which can run the interpreter (its probe passes),
#      runs them itself ("workers run by the agent")
#   6. the agent of a trainer-run job SIGKILLed mid-run and started again: the
#      trainer's workers go on (one line), the new agent sizes them again (the
#      trainer says it re-attached, the new agent's --status shows the job run
#      by the trainer), same checksums
#   7. the agent sees the trainer's interpreter but not torch (its own mount
#      namespace hides dist-packages, as an image with python and no torch):
#      its probe fails, the trainer runs the workers, same checksums
# Skips all without root (unshare -m and mount), without /usr/bin/python3 with
# torch, or under a sanitizer build. TAP on stdout; every wait has a deadline.
# Env: B (build dir), GM_PYHOST_CASES="1 4" (run only the jobs of these cases:
# 1 runs the job of 1 and 2, the others their own).
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/agent.sh
. "$here/agent.sh"
N=7
echo "1..$N"
[ "$(id -u)" = 0 ] || skip_all "not root (unshare -m and mount need it)"
command -v unshare >/dev/null 2>&1 || skip_all "no unshare (util-linux)"
why=$(py_unfit torch)
[ -z "$why" ] || skip_all "$why"
unshare -m true 2>/dev/null || skip_all "unshare -m refused here"

want() { listed "$1" "${GM_PYHOST_CASES:-}"; } # is the case's job to run?
skip_cases() { # skip_cases K...: SKIP lines for these cases
	for _ in "$@"; do skip "not in GM_PYHOST_CASES"; done
}

"$G" synth "$tmp/data" --images 192 >/dev/null 2>&1
ns=$tmp/ns # empty here; the trainer's interpreter is there in its namespace
mkdir -p "$ns"
# job HIDDEN [NODE]: the trainer's per-epoch checksums (2 epochs); HIDDEN=1 runs
# python as $ns/python3, a path only its own mount namespace has
job() {
	hidden=$1
	shift
	# shellcheck disable=SC2016 # expanded by the inner shell
	env ${1:+NODE="$1"} NW="${NW:-2}" M=8 SLOW_MS="${SLOW_MS:-5}" \
		PYTHONPATH="$repo/python" GOLDMINER_LIB="$B/libgoldminer.so" \
		timeout 300 unshare -m sh -c '
		if [ "$1" = 1 ]; then
			mount -t tmpfs none "$2" && ln -s "$3" "$2/python3" || exit 99
			py=$2/python3
		else
			py=$3
		fi
		exec "$py" "$4" "$5" plain 2' sh "$hidden" "$ns" "$PY" \
		"$here/python/pyremote_job.py" "$tmp/data"
}
status() { "$G" node --socket "$sock" --status 2>&1; }
# field JSON NAME: the first job's NAME in an agent's --status line
field() { printf '%s\n' "$1" | sed -n "s/.*\"job\": \[{[^}]*\"$2\": \"*\([^,\"}]*\).*/\1/p"; }
# until_field NAME VALUE S: the agent's --status in s until its first job's NAME
# is VALUE, while the trainer (tpid) runs, S seconds at most
until_field() {
	s='' k=0
	while [ $k -lt $(($3 * 10)) ] && kill -0 "$tpid" 2>/dev/null; do
		s=$(status)
		[ "$(field "$s" "$1")" = "$2" ] && break
		sleep 0.1
		k=$((k + 1))
	done
}
# finish_job: wait for the trainer (tpid); rc its exit status, same 0 when it
# ended 0 with the local workers' checksums ($r)
finish_job() {
	wait "$tpid"
	rc=$? tpid=''
	same=1
	[ "$rc" = 0 ] && [ -n "$r" ] && [ "$(cat "$tmp/py.out")" = "$r" ] && same=0
}
# explain MORE FILE...: why a case failed: the trainer's exit and checksums
# (MORE after them), then the FILEs
explain() {
	echo "# exit $rc, checksums $(cat "$tmp/py.out"), want $r$1"
	shift
	for f in "$@"; do diag "$f"; done
}
# agent_py: the agent's children that run python (the workers it ran itself)
agent_py() { for c in $(pgrep -P "$apid"); do tr '\0' ' ' <"/proc/$c/cmdline"; done | grep -c python; }

r=$(job 0 2>"$tmp/ref.err")
[ -n "$r" ] || {
	echo "# the reference job (local workers) failed:"
	diag "$tmp/ref.err"
}

# 1 and 2: the interpreter hidden from the agent
if want 1; then
	start_agent "$tmp/a.log" --cpus 2
	SLOW_MS=20 job 1 "$sock" >"$tmp/py.out" 2>"$tmp/run.err" &
	tpid=$!
	until_field alive 2 60 # the job's workers alive
	apy=$(agent_py)
	finish_job
	ok=1
	[ $same = 0 ] && [ "$apy" = 0 ] &&
		grep -q "the trainer runs them: .*python3 is not an executable file" "$tmp/a.log" &&
		ok=0
	[ $ok = 0 ] || explain "; $apy python children of the agent" "$tmp/run.err" "$tmp/a.log"
	t $ok "the trainer's interpreter hidden from the agent: the trainer's workers make the job, same checksums as local workers, none run by the agent"
	ok=1
	[ "$(field "$s" workers)" = 2 ] && [ "$(field "$s" alive)" = 2 ] &&
		[ "$(field "$s" run_by)" = "workers run by the trainer" ] && ok=0
	[ $ok = 0 ] || echo "# status: $s"
	t $ok "--status shows the job's worker count the agent decided (2), 2 alive, workers run by the trainer"
	stop_agent
else
	skip_cases 1 2
fi

# 3: --scale changes the trainer-run worker count
if want 3; then
	start_agent "$tmp/a.log" --cpus 3
	NW=3 SLOW_MS=40 job 1 "$sock" >"$tmp/py.out" 2>"$tmp/run.err" &
	tpid=$!
	wait_for "$tmp/a.log" "job pid [0-9]* attached" 60
	jpid=$(sed -n 's/.*job pid \([0-9]*\) attached.*/\1/p' "$tmp/a.log" | head -1)
	until_field alive 3 60
	a0=$(field "$s" alive)
	"$G" node --socket "$sock" --scale "$jpid=1" >"$tmp/scale.out" 2>&1
	until_field alive 1 30
	a1=$(field "$s" alive)
	finish_job
	ok=1
	[ $same = 0 ] && [ "$a0" = 3 ] && [ "$a1" = 1 ] &&
		[ "$(field "$s" workers)" = 1 ] && ok=0
	[ $ok = 0 ] || explain "; alive $a0 then $a1; status $s" "$tmp/scale.out" "$tmp/run.err" "$tmp/a.log"
	t $ok "goldminer node --scale PID=1: the trainer's workers go from $a0 to $a1, same checksums"
	stop_agent
else
	skip_cases 3
fi

# 4: GOLDMINER_NODE_WORKERS=trainer, the interpreter visible to the agent
if want 4; then
	start_agent "$tmp/a.log" --cpus 2
	GOLDMINER_NODE_WORKERS=trainer SLOW_MS=20 job 0 "$sock" >"$tmp/py.out" 2>"$tmp/run.err" &
	tpid=$!
	until_field alive 2 60
	apy=$(agent_py)
	finish_job
	ok=1
	[ $same = 0 ] && [ "$apy" = 0 ] &&
		[ "$(field "$s" run_by)" = "workers run by the trainer" ] &&
		grep -q "the trainer asked (GOLDMINER_NODE_WORKERS=trainer)" "$tmp/a.log" && ok=0
	[ $ok = 0 ] || explain "; $apy python children of the agent; status $s" "$tmp/run.err" "$tmp/a.log"
	t $ok "GOLDMINER_NODE_WORKERS=trainer: the trainer runs the workers though the agent could, same checksums"
	stop_agent
else
	skip_cases 4
fi

# 5: the agent that can run the interpreter runs the workers
if want 5; then
	start_agent "$tmp/a.log" --cpus 2
	SLOW_MS=20 job 0 "$sock" >"$tmp/py.out" 2>"$tmp/run.err" &
	tpid=$!
	until_field alive 2 60
	apy=$(agent_py)
	finish_job
	ok=1
	[ $same = 0 ] && [ "$apy" -ge 1 ] &&
		[ "$(field "$s" run_by)" = "workers run by the agent" ] && ok=0
	[ $ok = 0 ] || explain "; $apy python children of the agent; status $s" "$tmp/run.err" "$tmp/a.log"
	t $ok "the agent with the trainer's interpreter (its probe passes) runs the workers itself, same checksums"
	stop_agent
else
	skip_cases 5
fi

# 6: the agent of a trainer-run job killed and started again
if want 6; then
	start_agent "$tmp/a.log" --cpus 2
	SLOW_MS=40 job 1 "$sock" >"$tmp/py.out" 2>"$tmp/run.err" &
	tpid=$!
	wait_for "$tmp/a.log" "job pid [0-9]* attached" 60
	sleep 2
	kill -KILL "$apid"
	wait "$apid" 2>/dev/null
	rm -f "$sock"
	sleep 1
	start_agent "$tmp/b.log" --cpus 2
	until_field run_by "workers run by the trainer" 30 # the job back
	finish_job
	ok=1
	w=$(grep -c "went away: this process's workers, which it sized, go on" "$tmp/run.err")
	ra=$(grep -c "re-attached to the node agent at $sock: it sizes this process's workers" \
		"$tmp/run.err")
	[ $same = 0 ] && [ "$w" = 1 ] && [ "$ra" = 1 ] &&
		[ "$(field "$s" run_by)" = "workers run by the trainer" ] && ok=0
	[ $ok = 0 ] || explain "; $w went away, $ra re-attached; status $s" "$tmp/run.err" "$tmp/b.log"
	t $ok "the agent of a trainer-run job SIGKILLed and started again: the trainer's workers go on, sized again by the new agent (re-attached $ra), same checksums"
	stop_agent
else
	skip_cases 6
fi

# 7: the interpreter there, torch not (the agent's probe fails)
if want 7; then
	pkgs=$("$PY" -c "import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))")
	# shellcheck disable=SC2016 # expanded by the inner shell
	unshare -m sh -c 'mount -t tmpfs none "$1" && shift && exec "$@"' sh "$pkgs" \
		"$G" node --socket "$sock" --cpus 2 >"$tmp/a.log" 2>&1 &
	apid=$!
	wait_for "$tmp/a.log" "listening on $sock"
	SLOW_MS=20 job 0 "$sock" >"$tmp/py.out" 2>"$tmp/run.err" &
	tpid=$!
	until_field alive 2 60
	finish_job
	ok=1
	[ $same = 0 ] && [ "$(field "$s" run_by)" = "workers run by the trainer" ] &&
		grep -q "the trainer runs them: .*--probe failed" "$tmp/a.log" && ok=0
	[ $ok = 0 ] || explain "; status $s" "$tmp/run.err" "$tmp/a.log"
	t $ok "the agent's interpreter has no torch (its probe fails): the trainer runs the workers, same checksums"
	stop_agent
else
	skip_cases 7
fi
