#!/bin/sh
# The multi-host harness (tests/multihost.sh) checked on itself: three hosts
# reach each other through their gm0 links (a TCP probe each way, and ping
# where installed); UCX over TCP (UCX_TLS=tcp UCX_NET_DEVICES=gm0) puts 8 MB
# from host 1 into memory registered by host 2, every byte as sent, and host
# 2's gm0 counted them; a 0.25-core quota holds a busy loop to <= 0.35 of a
# core and the cgroup reports throttling; a cut link stops a connect with a
# 500 ms deadline and a healed one carries it again; a node agent runs in a
# host, in its cgroup and namespace; an agent under a quota of less than half
# a core runs on one CPU with its workers (GM_WORKER_CPU=off: on any; a bad
# one refused); the agents' helpers (mh_secret, mh_agent,
# mh_connected, mh_agents_stop) do what they say, their failures included
# (two agents with peers where the remote plugin is built); the cleanup
# leaves no namespace, cgroup or process of the run (the agent killed); the
# loopback fallback works and says so. Where namespaces cannot be made (not root, no ip) the same checks
# run over loopback and the link checks skip. TAP on stdout; every wait has a
# deadline. Env: B (build dir).
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/agent.sh
. "$here/agent.sh"
P="$B/bench/mh_peer"

# shellcheck source=tests/multihost.sh
. "$here/multihost.sh"
MH_ATEXIT=agent_cleanup
mh_setup 3
mode=$(mh_mode)
tag=$MH_TAG
echo "# multihost mode: $mode, cgroup: $MH_CGROUP, hosts: $(mh_addr 1) $(mh_addr 2) $(mh_addr 3)"
[ "$mode" = loopback ] && echo "# namespaces could not be made ($(mh_why)): every host is 127.0.0.1"

# 1: each host has its own gm0 with its own address (netns), or all are lo.
if [ "$mode" = netns ]; then
	ok=0
	for i in 1 2 3; do
		mh_run "$i" - ip -4 -o addr show dev gm0 >"$tmp/addr$i" 2>&1
		grep -q "inet $(mh_addr "$i")/24" "$tmp/addr$i" || { ok=1; diag "$tmp/addr$i"; }
	done
	t $ok "every host has gm0 at its own address ($(mh_addr 1), $(mh_addr 2), $(mh_addr 3))"
else
	t "$([ "$(mh_addr 2)" = 127.0.0.1 ] && [ "$(mh_netdev)" = lo ]; echo $?)" \
		"loopback: every host is 127.0.0.1 on lo"
fi

# listen I PORT SECONDS: a TCP probe listener in host I; waits until it listens.
listen() {
	mh_spawn "$1" - "$P" tcp-listen "$(mh_addr "$1")" "$2" "$3" >"$tmp/listen$1.$2" 2>&1
	i=0
	while [ $i -lt 50 ] && ! grep -q listening "$tmp/listen$1.$2"; do
		sleep 0.05
		i=$((i + 1))
	done
}
# probe FROM TO PORT MS: connect from host FROM to host TO's listener
probe() {
	mh_run "$1" - "$P" tcp-connect "$(mh_addr "$2")" "$3" "$4" 2>>"$tmp/probe.err"
}

# 2: every host reaches every other (ports differ per host: loopback shares one).
for i in 1 2 3; do listen "$i" $((7100 + i)) 15; done
ok=0
for pair in 1:2 2:1 2:3 3:2 3:1 1:3; do
	probe "${pair%:*}" "${pair#*:}" $((7100 + ${pair#*:})) 2000 || ok=1
done
[ $ok = 0 ] || diag "$tmp/probe.err"
t $ok "every host reaches every other through $(mh_netdev) (TCP, 6 directions)"
if command -v ping >/dev/null 2>&1 && [ "$mode" = netns ]; then
	mh_run 1 0 ping -c 1 -W 2 "$(mh_addr 2)" >"$tmp/ping" 2>&1 &&
		mh_run 2 - ping -c 1 -W 2 "$(mh_addr 1)" >>"$tmp/ping" 2>&1
	rc=$?
	[ $rc = 0 ] || diag "$tmp/ping"
	t $rc "hosts 1 and 2 ping each other"
else
	echo "# ping not installed (or loopback): the TCP probe above stands for it"
fi

# 3: UCX over TCP from host 1 into host 2's registered memory.
bytes=$((8 << 20))
rxb() { mh_run 2 - cat /sys/class/net/gm0/statistics/rx_bytes 2>/dev/null || echo 0; }
rx0=$(rxb)
export UCX_TLS=tcp UCX_NET_DEVICES
UCX_NET_DEVICES=$(mh_netdev)
mh_spawn 2 0 "$P" ucx-serve "$(mh_addr 2)" $bytes "$tmp/region" 10 >"$tmp/serve" 2>&1
serve=$MH_PID
mh_run 1 0 "$P" ucx-put "$(mh_addr 2)" $bytes "$tmp/region" 10 >"$tmp/put" 2>&1
prc=$?
wait "$serve"
src=$?
rx1=$(rxb)
if [ $prc = 77 ]; then
	skip "UCX put between hosts: mh_peer built without UCX"
else
	ok=1
	[ $prc = 0 ] && [ $src = 0 ] && grep -q 'every byte as sent' "$tmp/serve" && ok=0
	[ $ok = 0 ] || { diag "$tmp/put"; diag "$tmp/serve"; }
	t $ok "UCX (UCX_TLS=tcp UCX_NET_DEVICES=$(mh_netdev)) puts 8 MB from host 1 into host 2, every byte as sent"
	diag "$tmp/put"
	if [ "$mode" = netns ]; then
		t "$([ $((rx1 - rx0)) -ge $bytes ]; echo $?)" \
			"the bytes crossed host 2's gm0 ($((rx1 - rx0)) bytes received on it)"
	fi
fi
unset UCX_TLS UCX_NET_DEVICES

# 4: the CPU quota holds.
if [ "$MH_CGROUP" = none ]; then
	skip "CPU quota: no writable cpu cgroup (v1 or v2) here"
else
	mh_run 2 1.5 true
	q2=$(mh_quota 2)
	mh_spawn 1 0.25 sh -c 'while :; do :; done' >/dev/null 2>&1
	busy=$MH_PID
	sleep 0.3
	ticks() { awk '{ print $14 + $15 }' "/proc/$busy/stat"; }
	a=$(ticks)
	s0=$(date +%s%N)
	sleep 1
	b=$(ticks)
	s1=$(date +%s%N)
	kill -9 "$busy" 2>/dev/null
	wait "$busy" 2>/dev/null
	used=$(awk -v d=$((b - a)) -v hz="$(getconf CLK_TCK)" -v ns=$((s1 - s0)) \
		'BEGIN { printf "%.3f", d / hz / (ns / 1e9) }')
	thr=$(mh_throttled 1)
	mh_run 1 - true # a helper command leaves the quota as it is
	q1=$(mh_quota 1)
	t "$(awk -v u="$used" 'BEGIN { exit !(u <= 0.35) }'; echo $?)" \
		"a busy loop under a 0.25-core quota used $used of a core (<= 0.35)"
	t "$([ "${thr:-0}" -gt 0 ]; echo $?)" "its cgroup was throttled ($thr periods)"
	t "$([ "$q1" = "25000 100000" ] && [ "$q2" = "150000 100000" ]; echo $?)" \
		"quotas as asked: 0.25 (then -) -> '$q1', 1.5 -> '$q2' (quota period, us)"
fi

# 5: a cut link stops traffic; healed, it carries it again.
if [ "$mode" = netns ]; then
	mh_cut 2
	probe 1 2 7102 500
	cut=$?
	mh_heal 2
	healed=1
	i=0
	while [ $i -lt 20 ] && [ $healed != 0 ]; do
		probe 1 2 7102 500 && healed=0
		i=$((i + 1))
	done
	t "$([ $cut != 0 ]; echo $?)" "mh_cut 2: a connect from host 1 with a 500 ms deadline fails"
	t $healed "mh_heal 2: it connects again (after $i tries)"
else
	skip "mh_cut/mh_heal: loopback mode has no link to cut"
fi

# 6: a node agent as the lead starts one: in host 2, quota 1.5 cores, its own
# socket (a path socket is reached from any host: the file system is shared).
listener=$MH_PID # the last listener (15 s): still running
mh_spawn 2 1.5 env UCX_TLS=tcp UCX_NET_DEVICES="$(mh_netdev)" \
	"$G" node --socket "$tmp/h2.sock" --cpus 2 --quiet >"$tmp/agent2" 2>&1
agent=$MH_PID
i=0
until mh_run 2 - "$G" node --socket "$tmp/h2.sock" --status >"$tmp/status2" 2>&1 ||
	[ $i -ge 50 ]; do
	sleep 0.1
	i=$((i + 1))
done
ok=0
grep -q '"budget": 2' "$tmp/status2" || ok=1
if [ "$MH_CGROUP" != none ]; then
	grep -q "${tag}h2\$" "/proc/$agent/cgroup" || ok=1
fi
if [ "$mode" = netns ]; then
	[ "$(readlink "/proc/$agent/ns/net")" != "$(readlink /proc/$$/ns/net)" ] || ok=1
fi
[ $ok = 0 ] || { diag "$tmp/status2"; diag "$tmp/agent2"; }
t $ok "a node agent spawned in host 2 answers --status, inside host 2's cgroup and namespace"

# 6b: the agents' helpers: a secret the agent takes, two agents that listen
# and connect (mh_agent, mh_connected), an agent that cannot start, a wait for
# a peer that never comes, and mh_agents_stop with a stopped agent (SIGTERM
# cannot end it: SIGKILL must).
mh_secret "$tmp/secret"
t "$([ "$(stat -c %a "$tmp/secret")" = 600 ] && grep -qx '[0-9a-f]\{96\}' "$tmp/secret"; echo $?)" \
	"mh_secret: 96 hex digits, mode 600"
MH_WAIT_S=2
s0=$(date +%s)
mh_agent 3 - "$tmp/bad.sock" --cpus nonsense >"$tmp/bad.log" 2>&1
rc=$?
t "$([ $rc = 1 ] && [ $(($(date +%s) - s0)) -lt 2 ]; echo $?)" \
	"mh_agent: an agent that exits at once (--cpus nonsense) is 1 before MH_WAIT_S (rc $rc)"
if [ ! -f "$B/libgoldminer-remote.so" ]; then
	skip "mh_agent/mh_connected with peers: no $B/libgoldminer-remote.so (UCX not installed)"
else
	mh_ucx_env
	port=$((30000 + $$ % 20000))
	MH_WAIT_S=10
	for i in 1 2; do
		mh_agent $i - "$tmp/a$i.sock" --cpus 1 --listen "$(mh_addr $i):$((port + i))" \
			--peers "$(mh_addr $((3 - i))):$((port + 3 - i))" --secret "$tmp/secret" \
			>"$tmp/a$i.log" 2>&1 || diag "$tmp/a$i.log"
	done
	ok=1
	mh_connected "$tmp/a1.sock" 1 && mh_connected "$tmp/a2.sock" 1 && ok=0
	[ $ok = 0 ] || { diag "$tmp/a1.log"; diag "$tmp/a2.log"; }
	t $ok "mh_agent, mh_connected: agents in hosts 1 and 2 listen and see each other connected"
	MH_WAIT_S=1
	mh_connected "$tmp/a1.sock" 2
	t "$([ $? = 1 ]; echo $?)" "mh_connected: 1 when the peers asked for do not come within MH_WAIT_S"
	unset UCX_TLS UCX_NET_DEVICES UCX_WARN_UNUSED_ENV_VARS
	a1=${MH_AGENTS% *}
	a1=${a1##* } # the first agent of the two
	kill -STOP "$a1"
	s0=$(date +%s)
	mh_agents_stop
	left=0
	for p in $a1 $MH_PID; do mh_alive "$p" && left=$((left + 1)); done
	t "$([ $left = 0 ] && [ -z "$MH_AGENTS" ] && [ $(($(date +%s) - s0)) -le 4 ]; echo $?)" \
		"mh_agents_stop: both agents gone within 4 s, the SIGSTOPped one too ($left left)"
fi
unset MH_WAIT_S

# 6c: an agent under a quota of less than half a core runs on one CPU, and so
# do the workers it starts (a fair share of the quota between jobs: host.h,
# GM_HOST_PIN_CORES); GM_WORKER_CPU=off leaves them on any CPU; a bad one is
# refused at the start, named.
# allowed PID: the CPUs process PID may run on ("0-1", "1")
allowed() { awk '$1 == "Cpus_allowed_list:" { print $2 }' "/proc/$1/status" 2>/dev/null; }
if [ "$MH_CGROUP" = none ]; then
	for _ in 1 2 3; do skip "one CPU under a small quota: no writable cpu cgroup here"; done
elif [ "$(allowed $$ | tr -cd ',-')" = "" ]; then
	for _ in 1 2 3; do skip "one CPU under a small quota: this process may run on one CPU only"; done
else
	"$G" synth "$tmp/set" --images 32 --classes 2 >/dev/null 2>&1
	MH_WAIT_S=10
	mh_agent 3 0.25 "$tmp/p.sock" --cpus 1 >"$tmp/p.log" 2>&1
	pa=$MH_PID
	mh_spawn 3 - timeout 60 "$G" bench "$tmp/set" --node "$tmp/p.sock" --workers 1 \
		--epochs 100000 --batch 8 --size 32 --quiet >/dev/null 2>"$tmp/pt.err"
	pt=$MH_PID
	worker=
	k=0
	while [ -z "$worker" ] && [ $k -lt 200 ]; do # its worker: the agent's child
		worker=$(pgrep -P "$pa" | head -1)
		[ -n "$worker" ] || sleep 0.05
		k=$((k + 1))
	done
	cpu=$(sed -n 's/.* run on CPU \([0-9]*\) only: a CPU quota of 0.25 core.*/\1/p' "$tmp/p.log")
	ok=1
	[ -n "$cpu" ] && [ "$(allowed "$pa")" = "$cpu" ] && [ -n "$worker" ] &&
		[ "$(allowed "$worker")" = "$cpu" ] && ok=0
	[ $ok = 0 ] || { diag "$tmp/p.log"; diag "$tmp/pt.err"; }
	seen="agent '$(allowed "$pa")', worker '$(allowed "$worker")', of '$(allowed $$)'"
	t $ok "an agent under 0.25 core runs on CPU '$cpu' only, its job's worker too ($seen)"
	kill -9 "$pt" 2>/dev/null
	mh_agents_stop
	export GM_WORKER_CPU=off
	mh_agent 3 0.25 "$tmp/q.sock" --cpus 1 >"$tmp/q.log" 2>&1
	qa=$MH_PID
	ok=1
	[ "$(allowed "$qa")" = "$(allowed $$)" ] && ! grep -q "run on CPU" "$tmp/q.log" && ok=0
	[ $ok = 0 ] || diag "$tmp/q.log"
	t $ok "GM_WORKER_CPU=off: the agent under 0.25 core may run on '$(allowed "$qa")' (as the test)"
	mh_agents_stop
	MH_WAIT_S=2
	GM_WORKER_CPU=one
	mh_agent 3 0.25 "$tmp/r.sock" --cpus 1 >"$tmp/r.log" 2>&1
	rc=$?
	unset GM_WORKER_CPU
	ok=1
	[ $rc = 1 ] && grep -q "GM_WORKER_CPU='one': want auto, off or a CPU number" "$tmp/r.log" && ok=0
	[ $ok = 0 ] || diag "$tmp/r.log"
	t $ok "GM_WORKER_CPU=one: the agent does not start, and says why (rc $rc)"
	mh_agents_stop
	unset MH_WAIT_S
fi

# 7: the cleanup leaves nothing of the run.
mh_cleanup
left=$(ip netns list 2>/dev/null | grep -c "^${tag}[sh]")
cgs=$(find /sys/fs/cgroup -maxdepth 2 -name "${tag}h*" 2>/dev/null | wc -l)
alive=0
for p in "$listener" "$agent"; do
	kill -0 "$p" 2>/dev/null && alive=$((alive + 1))
done
t "$([ "$left" = 0 ] && [ "$cgs" = 0 ] && [ $alive = 0 ]; echo $?)" \
	"after mh_cleanup: $left namespaces, $cgs cgroups, $alive processes of the run left (a listener and an agent were running)"

# 8: the fallback, taken on purpose (a new shell: its own tag).
MH_FORCE_LOOPBACK=1 P="$P" sh -c '
	. "$1"
	mh_setup 2
	echo "mode $(mh_mode) $(mh_addr 1) $(mh_addr 2) $(mh_netdev)"
	mh_cut 2
	echo "cut $?"
	mh_spawn 2 0 "$P" tcp-listen "$(mh_addr 2)" 7199 5 >/dev/null 2>&1
	i=0
	until mh_run 1 0 "$P" tcp-connect "$(mh_addr 2)" 7199 500 2>/dev/null || [ $i -ge 20 ]; do
		sleep 0.05
		i=$((i + 1))
	done
	echo "probe $i"
' sh "$here/multihost.sh" >"$tmp/fallback" 2>&1
ok=1
grep -q '^mode loopback 127.0.0.1 127.0.0.1 lo$' "$tmp/fallback" && grep -q '^cut 2$' "$tmp/fallback" &&
	! grep -q '^probe 20$' "$tmp/fallback" && ok=0
[ $ok = 0 ] || diag "$tmp/fallback"
t $ok "MH_FORCE_LOOPBACK=1: mode loopback, every host 127.0.0.1 on lo, mh_cut refused, hosts reach each other"
echo "1..$n"
