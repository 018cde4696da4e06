# shellcheck shell=sh
# agent.sh - what the test scripts that run node agents share: sourced by a
# test once it has set here, its own folder (. "$here/agent.sh"), POSIX sh.
#
# Sourcing it sets repo, B (the build folder, made absolute; default build),
# G (the goldminer binary), PY (/usr/bin/python3), GM_POOL_START_MS (5000 in a
# sanitizer build, exported: see below), tmp (a new folder, removed
# at exit; under $AGENT_TMP where the test sets it, else mktemp's default), sock ($tmp/a.sock: the agent's socket), apid and tpid (the agent's and the
# trainer's pids, empty), the TAP counters n and fails, and a trap on EXIT,
# INT and TERM that runs agent_cleanup. A test that sources tests/multihost.sh
# too, whose mh_setup owns the traps, sets MH_ATEXIT=agent_cleanup instead.
#
#   t STATUS DESCRIPTION   one TAP line, ok when STATUS is 0 (fails counts the
#                          others); T_TIMED=1 adds "# case N took S s"
#   skip WHY               the next case's line: a SKIP saying WHY
#   skip_all WHY           N such lines (N: the script's plan), then exit 0
#   diag FILE [PREFIX]     FILE's lines as TAP comments, each after PREFIX
#                          (nothing when FILE is not there)
#   listed WORD LIST       WORD is one of the blank-separated LIST, or LIST is
#                          empty (a script's env knob naming the cases to run)
#   until_ok SECONDS CMD [ARG...]  run CMD every 0.05 s until it succeeds (0)
#                          or SECONDS of wall-clock time pass (1): a CMD that
#                          itself takes a while counts against the bound
#   wait_for FILE PATTERN [S]  until FILE has a line matching PATTERN (0), or
#                          S seconds (default 10) passed (1)
#   start_agent LOG ARGS...  `$G node --socket $sock ARGS...` in the background
#                          (apid), its stdout and stderr in LOG; then until its
#                          socket answers --status (0), 10 s at most (1)
#   stop_agent             SIGKILL to the agent in apid, reaped; its socket
#                          file removed
#   py_unfit MODULES       why $PY (/usr/bin/python3) cannot run this build's
#                          Python jobs (a sanitizer build; MODULES, "torch" or
#                          "torch, torchvision", not there), or nothing
#   agent_cleanup          SIGKILL to the trainer in tpid, stop_agent, tmp
#                          removed
#
# Every wait here has a deadline. It neither starts trainers, reads an agent's
# --status for a test's checks, nor makes hosts (tests/multihost.sh does).
# shellcheck disable=SC2154 # here: set by the test that sources this file
repo=$(dirname "$here")
B=${B:-build}
case $B in /*) ;; *) B=$repo/$B ;; esac
G="$B/goldminer"
PY=/usr/bin/python3
tmp=$(mktemp -d ${AGENT_TMP:+"$AGENT_TMP/gm-test.XXXXXX"})
sock=$tmp/a.sock
apid='' tpid=''
n=0
fails=0
t_last=$(date +%s)
# Under a sanitizer build (make sanitize) a worker forked from an agent's
# coordinator thread can hang in ASan's allocator (GCC 12's has no fork
# handlers: the Makefile's sanitize); the pool's start watch replaces it after
# GM_POOL_START_MS, 30 s by default: 5 s here (an ASan'ed worker is made in
# under 1 s), as tests/test_remote.sh does, for every agent the test starts.
if readelf -d "$B/libgoldminer.so" 2>/dev/null | grep -q libasan; then
	GM_POOL_START_MS=${GM_POOL_START_MS:-5000}
	export GM_POOL_START_MS
fi

t() { # t STATUS DESCRIPTION
	n=$((n + 1))
	if [ "$1" = 0 ]; then
		echo "ok $n - $2"
	else
		echo "not ok $n - $2"
		fails=$((fails + 1))
	fi
	if [ "${T_TIMED:-0}" = 1 ]; then
		echo "# case $n took $(($(date +%s) - t_last)) s"
		t_last=$(date +%s)
	fi
}
skip() { # skip WHY
	n=$((n + 1))
	echo "ok $n # SKIP $1"
	t_last=$(date +%s)
}
skip_all() { # skip_all WHY: the rest of the plan's N cases skip, then exit
	while [ "$n" -lt "$N" ]; do skip "$1"; done
	exit 0
}
diag() { [ -f "$1" ] && sed "s/^/# ${2:-}/" "$1"; }
listed() { # listed WORD LIST
	[ -z "$2" ] && return 0
	for w in $2; do [ "$w" = "$1" ] && return 0; done
	return 1
}
until_ok() { # until_ok SECONDS CMD [ARG...]
	u_end=$(($(date +%s%N) / 1000000 + $1 * 1000))
	shift
	until "$@"; do
		[ $(($(date +%s%N) / 1000000)) -lt $u_end ] || return 1
		sleep 0.05
	done
}
wait_for() { # wait_for FILE PATTERN [S]
	k=0
	while [ $k -lt $((${3:-10} * 20)) ] && ! grep -q "$2" "$1" 2>/dev/null; do
		sleep 0.05
		k=$((k + 1))
	done
	grep -q "$2" "$1" 2>/dev/null
}
agent_up() { "$G" node --socket "$sock" --status >/dev/null 2>&1; }
start_agent() { # start_agent LOG ARGS...
	log=$1
	shift
	"$G" node --socket "$sock" "$@" >"$log" 2>&1 &
	apid=$!
	until_ok 10 agent_up
}
stop_agent() {
	[ -n "$apid" ] && kill -KILL "$apid" 2>/dev/null
	[ -n "$apid" ] && wait "$apid" 2>/dev/null
	apid=''
	rm -f "$sock"
}
py_unfit() { # py_unfit MODULES
	if readelf -d "$B/libgoldminer.so" 2>/dev/null | grep -q libasan; then
		echo "a sanitizer build: Python would load the ASan'ed libgoldminer without its runtime"
	elif ! "$PY" -c "import $1" 2>/dev/null; then
		echo "no $PY with $1"
	fi
}
agent_cleanup() {
	[ -n "$tpid" ] && kill -KILL "$tpid" 2>/dev/null && wait "$tpid" 2>/dev/null
	tpid=''
	stop_agent
	rm -rf "$tmp"
}
trap agent_cleanup EXIT
trap 'exit 1' INT TERM
