#!/bin/sh
# A lending agent run as an ordinary user, in the hosts of
# tests/multihost.sh: host 1's agent (root) is the home and its trainer's,
# host 2's agent runs as nobody (setpriv) and lends, host 3 is a stranger.
# On a kernel that lets only CAP_NET_ADMIN attach a socket filter (a probe
# says which this one is) the guard on UCX's ports (ctl.h) cannot be set by
# an ordinary user:
#   1. without CAP_NET_ADMIN and without --unguarded-ucx the agent starts with
#      the guard at accept (the goldminer program's accept closes a stranger's
#      connection to UCX's ports before UCX reads a byte), one line saying so
#      and keeping the errno; it lends (same checksums), and a stranger in host
#      3 finds UCX's port and the control port closing on it, logged
#   2. with --unguarded-ucx it starts, one line says no guard is in force,
#      why (the errno) and on which ports (those it listens on), and it lends
#      to the home: its workers (uid nobody) delivered samples
#   3. a stranger is still reset at its control port; UCX's ports named in
#      that line do take its connection (what the line says: a firewall's job)
#   4. the agent SIGKILLed while it lends: every lent worker is gone within
#      5 s (time printed), the job ends with a single-host run's checksums
#   5. with CAP_NET_ADMIN as an ambient capability (no setcap: the binary
#      loads its library by $ORIGIN), the filter is in force, it lends, and
#      its lent workers run as nobody holding no CAP_NET_ADMIN
#   6. a stranger reaches neither its control port nor UCX's ports (no SYN
#      answered)
#   7. that agent SIGKILLed while it lends: its lent workers gone within 5 s,
#      same checksums
#   8. a lent process whose --agent-pid is not its parent (the agent died
#      before it set PR_SET_PDEATHSIG again) ends at once, silently; one whose
#      parent it is goes on
# Skips, saying why: not root, no setpriv, no /usr/bin/python3 (the probes,
# run as nobody), no remote plugin; 1-3 where the kernel lets anyone filter
# its sockets; 3 and 6 where namespaces cannot be made (every host is
# 127.0.0.1, no stranger). TAP on stdout; every wait has a deadline.
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/agent.sh
. "$here/agent.sh"
N=8
echo "1..$N"
[ -f "$B/libgoldminer-remote.so" ] || skip_all "no $B/libgoldminer-remote.so (UCX not installed: make deps)"
[ "$(id -u)" = 0 ] || skip_all "not root: the test switches to nobody (setpriv)"
command -v setpriv >/dev/null 2>&1 || skip_all "no setpriv (util-linux)"
[ -x "$PY" ] || skip_all "no $PY (the probes run as nobody)"
id nobody >/dev/null 2>&1 || skip_all "no user nobody"
NOGROUP=$(id -gn nobody)
AS_NOBODY="setpriv --reuid=nobody --regid=$NOGROUP --clear-groups"
# every directory above the build must let nobody in (a checkout in /root does not)
$AS_NOBODY test -x "$G" || skip_all "nobody cannot run $G (a directory above it is closed to others)"

chmod 755 "$tmp" # nobody's agent reads the dataset below it and writes its own dir
# The probe: a socket filter (one instruction: accept) on a listening socket;
# prints "ok" or the errno's words.
PROBE='
import ctypes, socket, struct
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(1)
code = ctypes.create_string_buffer(struct.pack("HBBI", 0x06, 0, 0, 0xffffffff))
try:
    s.setsockopt(socket.SOL_SOCKET, 26, struct.pack("HxxxxxxQ", 1, ctypes.addressof(code)))
    print("ok")
except OSError as e:
    print(e.strerror)
'
# A stranger's connection: "timeout" (no SYN answered within MS), "refused",
# "closed" (reset or closed before a byte came within 1 s), "open" (held), "data"
CONNECT='
import socket, sys
a, p, ms = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
s = socket.socket()
s.settimeout(ms / 1000)
try:
    s.connect((a, p))
except socket.timeout:
    print("timeout"); sys.exit()
except ConnectionRefusedError:
    print("refused"); sys.exit()
except ConnectionResetError:  # accepted and reset before connect() returned
    print("closed"); sys.exit()
s.settimeout(1)
try:
    print("closed" if s.recv(1) == b"" else "data")
except socket.timeout:
    print("open")
except ConnectionResetError:
    print("closed")
'
as_root=$("$PY" -c "$PROBE")
as_nobody=$($AS_NOBODY "$PY" -c "$PROBE")
echo "# probe: a socket filter as root: $as_root; as nobody: $as_nobody"
refuses=0
case $as_nobody in "Operation not permitted" | "Permission denied") refuses=1 ;; esac

# shellcheck source=tests/multihost.sh
. "$here/multihost.sh"
MH_ATEXIT=agent_cleanup
mh_setup 3
mode=$(mh_mode)
echo "# multihost mode: $mode, hosts: $(mh_addr 1) $(mh_addr 2) $(mh_addr 3)"
[ "$mode" = loopback ] && echo "# namespaces could not be made ($(mh_why)): every host is 127.0.0.1"
mh_ucx_env

mh_secret "$tmp/secret"
mkdir -m 700 "$tmp/u" # nobody's: its agent's socket, its copy of the secret
cp "$tmp/secret" "$tmp/u/secret"
chown -R nobody:"$NOGROUP" "$tmp/u"
chmod 600 "$tmp/u/secret"
"$G" synth "$tmp/data" --images 384 >/dev/null 2>&1
chmod -R a+rX "$tmp/data"
set -- --batch 32 --size 96 --checksum --quiet
BENCH="$*"
EPOCHS=24 # long enough that the lender is SIGKILLed while it lends
# shellcheck disable=SC2086 # BENCH is a list of options
ref=$("$G" bench "$tmp/data" --workers 2 --epochs $EPOCHS $BENCH 2>/dev/null |
	sed -n 's/.*"checksum": \[\([^]]*\)\].*/\1/p')

port=$((20000 + $$ % 20000))
a1=$(mh_addr 1) a2=$(mh_addr 2)
c1=$((port + 1)) c2=$((port + 2))
hpid='' lpid=''
# home: host 1's agent, root, asks host 2
home() {
	mh_spawn 1 0 "$G" node --cpus 1 --socket "$tmp/1.sock" --listen "$a1:$c1" \
		--peers "$a2:$c2" --secret "$tmp/secret" >"$tmp/1.log" 2>&1
	hpid=$MH_PID
}
# lender LOG SETPRIV-OPTIONS... -- AGENT-OPTIONS...: host 2's agent as nobody
lender() {
	log=$1
	shift
	opts=
	while [ "$1" != -- ]; do
		opts="$opts $1"
		shift
	done
	shift
	# shellcheck disable=SC2086 # opts is a list of options
	mh_spawn 2 0 $AS_NOBODY $opts "$G" node --cpus 1 --socket "$tmp/u/2.sock" \
		--listen "$a2:$c2" --peers "$a1:$c1" --secret "$tmp/u/secret" \
		--lend-root "$tmp/data" "$@" >"$log" 2>&1
	lpid=$MH_PID
}
# wait_log FILE PATTERN: until FILE has a matching line (10 s at most)
wait_log() {
	k=0
	while [ $k -lt 200 ] && ! grep -q "$2" "$1" 2>/dev/null; do
		mh_alive "$lpid" || break
		sleep 0.05
		k=$((k + 1))
	done
	grep -q "$2" "$1" 2>/dev/null
}
remote_samples() {
	"$G" node --socket "$tmp/1.sock" --status 2>/dev/null |
		sed -n 's/.*"remote_samples": \([0-9]*\).*/\1/p'
}
# lent: the lender's remote worker processes now (pids)
lent() {
	pgrep -P "$lpid" -f 'node --remote-worker' | tr '\n' ' '
}
# train_bg: the trainer in host 1 in the background (tpid), checksums later in $tmp/sum
train_bg() {
	# shellcheck disable=SC2086
	mh_spawn 1 0.5 timeout 300 "$G" bench "$tmp/data" --node "$tmp/1.sock" \
		--epochs $EPOCHS $BENCH >"$tmp/run.json" 2>"$tmp/run.err"
	tpid=$MH_PID
}
# until_lending: the home's job got remote samples and the lender runs workers
# (20 s at most); LENT their pids
until_lending() {
	k=0 LENT=
	while [ $k -lt 400 ]; do
		s=$(remote_samples)
		LENT=$(lent)
		[ -n "$s" ] && [ "$s" -ge 64 ] && [ -n "$LENT" ] && return 0
		sleep 0.05
		k=$((k + 1))
	done
	return 1
}
# kill_lender: SIGKILL the lender; KILLED_MS: until none of LENT runs (5 s at most)
kill_lender() {
	t0=$(date +%s%N)
	kill -KILL "$lpid"
	k=0
	while [ $k -lt 500 ]; do
		left=
		for p in $LENT; do mh_alive "$p" && left="$left $p"; done
		[ -z "$left" ] && break
		sleep 0.01
		k=$((k + 1))
	done
	KILLED_MS=$((($(date +%s%N) - t0) / 1000000))
	wait "$lpid" 2>/dev/null
	[ -z "$left" ]
}
finish_train() {
	wait "$tpid"
	sed -n 's/.*"checksum": \[\([^]]*\)\].*/\1/p' "$tmp/run.json" >"$tmp/sum"
	[ -n "$ref" ] && [ "$(cat "$tmp/sum")" = "$ref" ]
}
# ports_of LOG: the main UCX worker's port its guard line names; listening PID
# CTL: the ports PID listens on but CTL (UCX's: the main worker's and one per
# peer it dials)
ports_of() {
	sed -n 's/.*guard: [^(]*(port \([0-9]*\),.*/\1/p' "$1" | head -1
}
listening() {
	mh_run 2 - ss -ltnpH 2>/dev/null | grep "pid=$1," | awk '{print $4}' | sed 's/.*://' |
		grep -vx "$2" | sort -n | tr '\n' ' ' | sed 's/ $//'
}
# stranger PORT: what host 3 gets from host 2's PORT
stranger() { mh_run 3 - "$PY" -c "$CONNECT" "$a2" "$1" 1500; }
# strangers WANT WHO HOW: host 3 is reset at host 2's control port and gets
# WANT (open, timeout) from each of UCX's ports it listens on ($open): a TAP
# line, or a skip where every host is 127.0.0.1 (no stranger)
strangers() {
	if [ "$mode" != netns ]; then
		skip "a stranger needs a host of its own ($(mh_why))"
		return
	fi
	cp=$(stranger "$c2")
	got=
	for u in $open; do got="$got $(stranger "$u")"; done
	ok=1
	[ "$cp" = closed ] && [ -n "$got" ] && [ -z "$(echo "$got" | tr -d ' ' | sed "s/$1//g")" ] && ok=0
	t $ok "$2: a stranger is reset at the control port ($cp); UCX's ports ($open) $3:$got"
}
# killed_lending WHO: the lender SIGKILLed while it lends: its lent workers gone
# within 5 s and the job's checksums a single-host run's (a TAP line); then
# both agents stopped
killed_lending() {
	kill_lender
	killed=$?
	finish_train
	same=$?
	ok=1
	[ $lending = 0 ] && [ $killed = 0 ] && [ $same = 0 ] && ok=0
	[ $ok = 0 ] || { diag "$tmp/1.log"; diag "$tmp/sum"; }
	t $ok "$1 lender SIGKILLed while it lends: its $(echo "$LENT" | wc -w) lent workers gone after $KILLED_MS ms (bound 5000); same checksums"
	stop_all
}
stop_all() {
	for p in $hpid $lpid; do kill "$p" 2>/dev/null; done
	for p in $hpid $lpid; do
		k=0
		while mh_alive "$p" && [ $k -lt 40 ]; do
			sleep 0.05
			k=$((k + 1))
		done
		kill -9 "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	hpid='' lpid=''
}

# 1: no CAP_NET_ADMIN, no --unguarded-ucx: the guard at accept
if [ $refuses = 1 ]; then
	home
	lender "$tmp/2a.log" --
	wait_log "$tmp/2a.log" "listening on $tmp/u/2.sock"
	train_bg
	until_lending
	lending=$?
	named=$(ports_of "$tmp/2a.log")
	got_ucx=$( [ -n "$named" ] && stranger "$named")
	got_ctl=$(stranger "$c2")
	finish_train
	same=$?
	ok=1
	[ $lending = 0 ] && [ $same = 0 ] && [ "$got_ucx" = closed ] && [ "$got_ctl" = closed ] &&
		grep -q "guard: at accept on UCX's listening sockets (port .*SO_ATTACH_FILTER: $as_nobody" "$tmp/2a.log" &&
		wait_log "$tmp/2a.log" "refused $(mh_addr 3) at accept on a UCX port" && ok=0
	[ $ok = 0 ] || { diag "$tmp/2a.log"; echo "# UCX port ${named:-?}: $got_ucx; control port: $got_ctl"; }
	t $ok "as nobody without CAP_NET_ADMIN: starts with the guard at accept, naming SO_ATTACH_FILTER's '$as_nobody'; it lends (same checksums); a stranger's connection to UCX's port ${named:-?} is $got_ucx before a byte, to the control port $got_ctl"
	stop_all
else
	skip "this kernel lets any user filter its sockets (as nobody: $as_nobody)"
fi

# 2-4: --unguarded-ucx
if [ $refuses = 1 ]; then
	home
	lender "$tmp/2u.log" -- --unguarded-ucx
	wait_log "$tmp/2u.log" "listening on $tmp/u/2.sock"
	train_bg
	until_lending
	lending=$?
	uids=
	for p in $LENT; do uids="$uids $(awk '/^Uid:/ { print $2 }' "/proc/$p/status" 2>/dev/null)"; done
	named=$(ports_of "$tmp/2u.log")
	open=$(listening "$lpid" "$c2")
	ok=1
	[ $lending = 0 ] && [ -n "$named" ] && [ "$(echo "$open" | wc -w)" = 2 ] &&
		echo " $open " | grep -q " $named " &&
		grep -q "guard: none on UCX's ports (port .*SO_ATTACH_FILTER: $as_nobody" "$tmp/2u.log" &&
		[ -z "$(echo "$uids" | tr -d ' 65534')" ] && [ -n "$uids" ] && ok=0
	[ $ok = 0 ] || { diag "$tmp/2u.log"; diag "$tmp/1.log"; }
	t $ok "as nobody with --unguarded-ucx: starts, says 'guard: none' and why, naming UCX's port ${named:-?} (it listens on ${open:-?}: that one and its dialled peer's); its workers (uid$uids) delivered $(remote_samples) samples"
	strangers open unguarded "take its connection, as the line says"
	killed_lending unguarded
else
	for _ in 2 3 4; do skip "this kernel lets any user filter its sockets: --unguarded-ucx changes nothing"; done
fi

# 5-7: CAP_NET_ADMIN as an ambient capability
home
lender "$tmp/2c.log" --inh-caps +net_admin --ambient-caps +net_admin --
wait_log "$tmp/2c.log" "listening on $tmp/u/2.sock"
train_bg
until_lending
lending=$?
# held_by PID: its Cap* fields holding CAP_NET_ADMIN (" PID:CapEff ..."), from one
# read of its status; "gone" where it has none (ended); a field missing from a
# status read whole counts as held
held_by() {
	st=$(cat "/proc/$1/status" 2>/dev/null) || { echo gone; return; }
	[ -n "$st" ] || { echo gone; return; }
	for f in CapEff CapPrm CapInh CapAmb; do
		v=$(echo "$st" | awk -v f="$f:" '$1 == f { print $2 }')
		[ $((0x${v:-1000} & 0x1000)) = 0 ] || printf ' %s:%s' "$1" "$f"
	done
}
uids='' caps='' clean=0 k=0
# the workers listed may all have ended since (moved by their lender): list again
while [ -z "$uids" ] && [ $k -lt 40 ]; do
	[ $k = 0 ] || { sleep 0.05; LENT=$(lent); }
	for p in $LENT; do
		h=$(held_by "$p")
		[ "$h" != gone ] || continue
		uids="$uids $(awk '/^Uid:/ { print $2 }' "/proc/$p/status" 2>/dev/null)"
		if [ -z "$h" ]; then clean=$((clean + 1)); else caps="$caps $p"; fi
	done
	k=$((k + 1))
done
# A worker drops the capability once its own sockets' guard is set, before it
# connects to its home: one just started (the lender moves and restarts them)
# holds it for that while (CI's 'held by' was such a fresh worker). One seen
# holding it must lose it within 10 s, or end (then it says nothing); and at
# least one worker must be seen alive without it (a build that never drops it
# fails here even when its workers all end meanwhile).
still=''
for p in $caps; do
	k=0
	while h=$(held_by "$p") && [ "$h" != gone ] && [ -n "$h" ] && [ $k -lt 200 ]; do
		sleep 0.05
		k=$((k + 1))
	done
	[ -n "$h" ] || clean=$((clean + 1))
	[ "$h" = gone ] || still="$still$h"
done
caps=$still
[ $clean -gt 0 ] || caps="$caps (none seen alive without it)"
named=$(ports_of "$tmp/2c.log")
open=$(listening "$lpid" "$c2")
ok=1
[ $lending = 0 ] && [ -n "$named" ] && [ -n "$uids" ] && echo " $open " | grep -q " $named " && [ -z "$caps" ] &&
	grep -q "guard: a socket filter on UCX's listening sockets" "$tmp/2c.log" &&
	[ -z "$(echo "$uids" | tr -d ' 65534')" ] && ok=0
[ $ok = 0 ] || { diag "$tmp/2c.log"; diag "$tmp/1.log"; echo "# CAP_NET_ADMIN held by:$caps"; }
t $ok "as nobody with ambient CAP_NET_ADMIN: the filter is in force on UCX's ports ($open); its workers (uid$uids) delivered $(remote_samples) samples, none holds CAP_NET_ADMIN"
strangers timeout filtered "leave its SYNs unanswered"
killed_lending filtered

# 8: --agent-pid: not the parent, ends silently; the parent, goes on (to find
# no work on its fd 3 and say so)
sleep 10 &
other=$!
"$G" node --remote-worker 3 --agent-pid $other 3</dev/null >"$tmp/orphan.out" 2>&1
orc=$?
kill $other
wait $other 2>/dev/null
# shellcheck disable=SC2016 # the inner shell's $$ (the child's parent: not exec'ed)
sh -c '"$0" node --remote-worker 3 --agent-pid $$ 3</dev/null; exit $?' "$G" >"$tmp/child.out" 2>&1
crc=$?
ok=1
[ $orc = 1 ] && [ ! -s "$tmp/orphan.out" ] && [ $crc = 1 ] &&
	grep -q "holds no worker blob" "$tmp/child.out" && ok=0
[ $ok = 0 ] || { diag "$tmp/orphan.out"; diag "$tmp/child.out"; }
t $ok "a lent process whose --agent-pid is not its parent ends silently (exit $orc); its agent's child goes on (exit $crc: no work on fd 3)"
