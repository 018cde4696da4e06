#!/bin/sh
# A Python job's remote workers that misbehave (the peer runs the test build of
# the plugin, build/tests/libgoldminer-remote-test.so: core/remote/pywork.c
# with -DGM_REMOTE_TESTING, $GOLDMINER_REMOTE_MISBEHAVE=py-*), on one machine
# that behaves like two hosts (tests/multihost.sh, as tests/test_remote.sh).
# The home vouches for every batch of a peer before the trainer unpickles it
# (core/remote/check.c, gm_remote_check_pyslot: the container of
# python/goldminer/_slot.py against the lease it granted). Each case: the
# per-epoch checksums equal a local run's (tests/python/pyremote_job.py, the
# trainer, prints them), and for a misbehaving peer its first lease does so
# (its worker makes the file $tmp/once), the home refuses that batch, its log
# names the peer and the rule, and the batch is made again:
#   1. honest batches by rendezvous (147 KB, straight into the slot): every
#      one vouched for, the peer made some, same checksums
#   2. honest batches eager (5 KB): the same
#   3. a batch whose container's magic is not GMPYSLOT (eager)
#   4. a container whose total is not the batch's size
#   5. a container whose tree runs past the batch's end
#   6. a container of the next batch index (not its lease's)
#   7. a failed status (-EBADMSG) with no error record
#   8. a worker that never sends its batch: the lease is taken back at the
#      lease deadline from its claim (5 s), not 8 deadlines (40 s) later; the
#      time from its lease to the home's revoke is printed (bound 7.5 s)
#   9. no agent or remote worker wrote a sanitizer report or crashed (their
#      logs, every case's)
# /usr/bin/python3 with torch runs the trainer and the workers; without it
# every case skips, saying so. Under a sanitizer build (make sanitize) the
# Python processes cannot load the ASan'ed libgoldminer without its runtime
# (test_remote.sh's 40-45 skip too): the ASan runtime is preloaded into them
# (LD_PRELOAD, leaks not checked: Python's own); 1 and 3 run (the eager and the
# rendezvous path through the home's checks under ASan), the others skip,
# saying why. TAP on stdout; every wait has a deadline. Env: B (build dir),
# PY_CASES (the case numbers to run, e.g. "3 8"; the others skip).
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/agent.sh
. "$here/agent.sh"
TP=$B/tests/libgoldminer-remote-test.so
N=9
T_TIMED=1 # each case's line says how long it took
ms_since() { echo $((($(date +%s%N) - $1) / 1000000)); }

echo "1..$N"
why=
[ -f "$B/libgoldminer-remote.so" ] || why="no $B/libgoldminer-remote.so (UCX not installed: make deps)"
[ -n "$why" ] || [ -f "$TP" ] || why="no $TP (make $TP)"
[ -n "$why" ] || "$PY" -c "import torch" 2>/dev/null || why="no $PY with torch: the Python job's cases need it"
san=0
readelf -d "$B/libgoldminer.so" 2>/dev/null | grep -q 'libasan' && san=1
if [ -z "$why" ] && [ "$san" = 1 ]; then
	# the sanitizer runtimes the library needs, preloaded into every Python
	# process of the run (the trainer, the pools' workers on both hosts)
	pre=
	for r in libasan.so libubsan.so; do
		f=$(${CC:-cc} -print-file-name=$r 2>/dev/null)
		[ -f "$f" ] && pre="$pre${pre:+ }$(readlink -f "$f")"
	done
	LD_PRELOAD=$pre
	ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0:verify_asan_link_order=0
	export LD_PRELOAD ASAN_OPTIONS
	"$PY" -c "import torch" 2>/dev/null ||
		why="$PY with torch does not start with the sanitizer runtimes preloaded ($pre)"
fi
[ -z "$why" ] || skip_all "$why"

# shellcheck source=tests/multihost.sh
. "$here/multihost.sh"
MH_ATEXIT=agent_cleanup
mh_setup 2
mode=$(mh_mode)
echo "# multihost mode: $mode, hosts: $(mh_addr 1) $(mh_addr 2)"
[ "$mode" = loopback ] && echo "# namespaces could not be made ($(mh_why)): every host is 127.0.0.1"
mh_ucx_env
mh_secret "$tmp/secret"
"$G" synth "$tmp/data" --images 384 >/dev/null 2>&1
EPOCHS=2
port=$((20000 + ($$ + 7) % 20000))
# agent I [PEER]: a node agent in host I listening at $port + I, lending
# Python workers of datasets below $tmp/data; log $tmp/I.log
agent() {
	mh_agent "$1" 0 "$tmp/$1.sock" --cpus "${AGENT_CPUS:-1}" \
		--listen "$(mh_addr "$1"):$((port + $1))" \
		${2:+--peers "$(mh_addr "$2"):$((port + $2))"} \
		--secret "$tmp/secret" --lend-root "$tmp/data" --lend-python >"$tmp/$1.log" 2>&1
}
stop_agents() {
	mh_agents_stop
	for i in 1 2; do
		[ -f "$tmp/$i.log" ] && sed "s/^/[after case $n, host $i] /" "$tmp/$i.log" >>"$tmp/all.log"
	done
	port=$((port + 10))
}
# pytrain: the trainer in host 1 (0.5 of a core) through agent 1, its
# checksums into $tmp/pysum, each sample taking SLOW_MS (20) ms more (the same
# bytes): the job lasts until the peer's Python workers have started (an
# interpreter importing torch: seconds); pyref: a local run's (no agent)
pytrain() {
	mh_run 1 0.5 env NODE="$tmp/1.sock" M="$M" SLOW_MS="${SLOW_MS:-20}" PYTHONPATH="$repo/python" \
		GOLDMINER_LIB="$B/libgoldminer.so" timeout "${TRAIN_S:-300}" \
		"$PY" "$here/python/pyremote_job.py" "$tmp/data" plain $EPOCHS >"$tmp/pysum" 2>"$tmp/py.err"
}
pyref() {
	PYTHONPATH="$repo/python" GOLDMINER_LIB="$B/libgoldminer.so" NW=2 M="$M" timeout 300 \
		"$PY" "$here/python/pyremote_job.py" "$tmp/data" plain $EPOCHS 2>"$tmp/pyref.err"
}
delivered() { mh_delivered "$tmp/1.log"; } # what the remote workers gave agent 1's job
wanted() { # wanted K: case K runs (PY_CASES, and a sanitizer build's choice)
	case " ${PY_CASES:-1 2 3 4 5 6 7 8} " in *" $1 "*) ;; *) return 1 ;; esac
	[ "$san" = 0 ] || [ "$1" = 1 ] || [ "$1" = 3 ]
}
skip_why() {
	if [ "$san" = 1 ]; then
		echo "under a sanitizer build: 1 and 3 take the home's check of a batch under ASan on both paths (rendezvous, eager); test_remote_check runs every rule under ASan"
	else
		echo "not in PY_CASES ($PY_CASES)"
	fi
}
M=48
want48=$(pyref)
M=8
want8=$(pyref)
echo "# local runs' checksums: $want48 (147-KB batches), $want8 (5-KB batches)"

# pyrun MODE: agents 1 and 2 (2 with the test build misbehaving as MODE on its
# first lease, none: honest), then the trainer; again, 3 times at most, when
# the peer's worker took no lease before the job ended (a loaded machine)
pyrun() {
	try=0
	while [ $try -lt 3 ]; do
		try=$((try + 1))
		rm -f "$tmp/once"
		GOLDMINER_REMOTE_LIB=$TP GOLDMINER_REMOTE_MISBEHAVE=$1 GOLDMINER_REMOTE_MISBEHAVE_ONCE=$tmp/once
		export GOLDMINER_REMOTE_LIB GOLDMINER_REMOTE_MISBEHAVE GOLDMINER_REMOTE_MISBEHAVE_ONCE
		AGENT_CPUS=2 agent 2 1
		unset GOLDMINER_REMOTE_LIB GOLDMINER_REMOTE_MISBEHAVE GOLDMINER_REMOTE_MISBEHAVE_ONCE
		agent 1 2
		mh_connected "$tmp/1.sock" 1 || echo "# agent 1 saw no peer connected within 10 s"
		wpid=
		if [ "$1" = py-silent ]; then
			silent_watch &
			wpid=$!
		fi
		pytrain
		[ -z "$wpid" ] || wait "$wpid"
		{ [ "$1" = none ] && [ "$(delivered)" -gt 0 ] 2>/dev/null; } || [ -f "$tmp/once" ] && return 0
		echo "# $1: the peer's worker took no lease before the job ended (try $try)"
		stop_agents
	done
}
at() { echo "remote worker at $(mh_addr 2): "; }
# silent_watch: the milliseconds from the silent worker's lease (its file) to
# the home's revoke of it, into $tmp/silent_ms (empty: none within 60 s)
silent_watch() {
	: >"$tmp/silent_ms"
	until_ok 120 test -f "$tmp/once" || return 0
	t0=$(date +%s%N)
	wait_for "$tmp/1.log" "$(at)no batch" 60 && ms_since "$t0" >"$tmp/silent_ms"
}

# 1, 2: honest batches (the test build, misbehaving in no way), rendezvous
# then eager: the home vouches for each
for k in 1 2; do
	if ! wanted $k; then
		skip "$(skip_why)"
		continue
	fi
	if [ $k = 1 ]; then M=48 want=$want48 how="by rendezvous (147-KB batches)"; else M=8 want=$want8 how="eager (5-KB batches)"; fi
	pyrun none
	d=$(delivered)
	ok=1
	[ -n "$want" ] && [ "$(cat "$tmp/pysum")" = "$want" ] && [ "${d:-0}" -gt 0 ] &&
		! grep -q "refused its batch" "$tmp/1.log" && ok=0
	[ $ok = 0 ] || { diag "$tmp/1.log"; diag "$tmp/2.log"; diag "$tmp/py.err"; echo "# got $(cat "$tmp/pysum") want $want"; }
	t $ok "honest Python batches $how: every one vouched for, the peer made ${d:-0} samples' batches, checksums equal a local run's"
	stop_agents
done

# 3-7: a batch the home must refuse
k=2
for c in "py-magic|8|rule magic: a container whose magic \"GMPYSLOt\" is not GMPYSLOT|a batch whose container's magic is GMPYSLOt (eager)" \
	"py-total|48|rule total: a container whose total [0-9]* is not its [0-9]* bytes|a container whose total is not the batch's size" \
	"py-tree|48|rule tree: a container whose tree of [0-9]* bytes ends past its [0-9]*|a container whose tree runs past the batch's end" \
	"py-batch|48|rule batch: a container of batch [0-9]* of epoch [0-9]* for the lease of batch|a container of another batch index than its lease's" \
	"py-norec|48|rule record: a failed batch (status -74) without an error record|a failed status (-EBADMSG) with no error record"; do
	k=$((k + 1))
	if ! wanted $k; then
		skip "$(skip_why)"
		continue
	fi
	mode=${c%%|*} rest=${c#*|}
	M=${rest%%|*} rest=${rest#*|}
	pat=${rest%%|*} desc=${rest#*|}
	if [ "$M" = 8 ]; then want=$want8; else want=$want48; fi
	pyrun "$mode"
	ok=1
	[ -n "$want" ] && [ "$(cat "$tmp/pysum")" = "$want" ] && [ -f "$tmp/once" ] &&
		grep -q "$(at)refused its batch: $pat.*; its batch [0-9]* is made again" "$tmp/1.log" && ok=0
	if [ $ok = 0 ]; then
		grep -m1 "$(at)refused its batch" "$tmp/1.log" | sed 's/^/# /'
	else
		diag "$tmp/1.log"
		diag "$tmp/2.log"
		diag "$tmp/py.err"
		echo "# got $(cat "$tmp/pysum") want $want; misbehaved: $([ -f "$tmp/once" ] && echo yes || echo no)"
	fi
	t $ok "$desc: refused, the home logs the peer and the rule, the batch is made again; same checksums"
	stop_agents
done

# 8: a worker that never sends its batch
if wanted 8; then
	M=48
	pyrun py-silent
	ms=$(cat "$tmp/silent_ms" 2>/dev/null)
	ok=1
	[ -n "$want48" ] && [ "$(cat "$tmp/pysum")" = "$want48" ] && [ -n "$ms" ] &&
		[ "$ms" -ge 4500 ] && [ "$ms" -le 7500 ] &&
		grep -q "$(at)no batch [0-9]* ms after its claim (lease deadline 5000 ms); its batch [0-9]* is made again" \
			"$tmp/1.log" && ok=0
	if [ $ok = 0 ]; then
		grep -m1 "$(at)no batch" "$tmp/1.log" | sed 's/^/# /'
	else
		diag "$tmp/1.log"
		diag "$tmp/2.log"
		diag "$tmp/py.err"
		echo "# got $(cat "$tmp/pysum") want $want48; misbehaved: $([ -f "$tmp/once" ] && echo yes || echo no); revoked after ${ms:+$ms ms}${ms:-no revoke in 60 s}"
	fi
	t $ok "a worker that never sends its batch loses its lease ${ms:-?} ms after it got it (the 5-s deadline, bound 7.5 s); same checksums"
	stop_agents
else
	skip "$(skip_why)"
fi

# 9: the agents' and remote workers' own words, every case's
if grep -E "Sanitizer|runtime error:|Segmentation|core dumped|ended \(status 0x(8|b|6)" \
	"$tmp/all.log" >"$tmp/bad.log"; then
	diag "$tmp/bad.log"
	t 1 "no agent or remote worker reported a sanitizer error or crashed"
else
	t 0 "no agent or remote worker reported a sanitizer error or crashed"
fi
