#!/bin/sh
# goldminer node --status is JSON whatever bytes its strings hold: an agent on a
# socket path with a quote, a backslash and a control character serves a job
# whose dataset path holds a quote, a backslash, a tab, a control character and
# a byte that is no UTF-8; its --status parses with python3 -m json.tool, and
# the job's "root" read back (json.loads, then os.fsencode) is the path's exact
# bytes. TAP on stdout. Env: B (build dir). Every wait has a deadline.
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/agent.sh
. "$here/agent.sh"
odd=$(printf 'a"b\\c\001d')     # quote, backslash, control character
set=$(printf '%s/set"\\\t\002\377x' "$tmp") # and a tab, and 0xff (no UTF-8)
sock="$tmp/$odd.sock"
"$G" synth "$set" --images 32 --classes 2 >/dev/null 2>"$tmp/synth.err"
t $? "a dataset at a path with a quote, a backslash, a tab, byte 2 and byte 0xff"
start_agent "$tmp/agent.err" --cpus 2 --quiet
"$G" bench "$set" --node "$sock" --workers 1 --epochs 1000 --batch 8 --size 32 \
	--consumer-rate 20 --quiet >/dev/null 2>"$tmp/job.err" &
tpid=$!
attached() { "$G" node --socket "$sock" --status 2>/dev/null | grep -q '"jobs": 1'; }
until_ok 20 attached
rc=$?
[ $rc = 0 ] || sed 's/^/# /' "$tmp/agent.err" "$tmp/job.err"
t $rc "a job attaches through an agent whose socket path holds a quote, a backslash and byte 1"
"$G" node --socket "$sock" --status >"$tmp/status" 2>"$tmp/status.err"
python3 -m json.tool "$tmp/status" >/dev/null 2>"$tmp/json.err"
rc=$?
[ $rc = 0 ] || sed 's/^/# /' "$tmp/status" "$tmp/json.err"
t $rc "its --status parses (python3 -m json.tool)"
python3 - "$tmp/status" "$set" <<'PY'
import json, os, sys
with open(sys.argv[1], "rb") as f:
    status = json.loads(f.read().decode())
roots = [os.fsencode(j["root"]) for j in status["job"]]
want = os.fsencode(sys.argv[2])
sys.exit(0 if roots == [want] else print("# roots", roots, "want", want) or 1)
PY
t $? "the job's root in --status is the dataset path's exact bytes"
echo "1..$n"
[ "$fails" = 0 ]
