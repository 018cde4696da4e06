# shellcheck shell=sh
# multihost.sh - several "hosts" on one machine for the tests of remote workers
# (data workers on other hosts): sourced by a test (". tests/multihost.sh"),
# POSIX sh.
#
# The layout (mode netns, root with iproute2): each host is a network
# namespace gm<PID>h<i> whose one link gm0 (a veth) ends on a bridge in a
# switch namespace gm<PID>s, so every host reaches every other through its gm0
# (UCX_NET_DEVICES=gm0 works in each), at 10.231.X.<i>/24 with X taken from
# the PID; lo is up in each. Nothing is added to the machine's own network:
# the switch lives in its own namespace, so the subnet cannot collide with a
# real one. Each host also gets a CPU cgroup (v1 cpu.cfs_quota_us here; v2
# cpu.max where the unified hierarchy holds the cpu controller); the quota is
# the host's, shared by every process run in it, and mh_run/mh_spawn set it.
#
# Fallback (mode loopback): where namespaces cannot be made (not root, no
# ip, EPERM) every host is 127.0.0.1 and mh_netdev is lo; the cgroups are
# still used where they can be made (MH_CGROUP=none otherwise: quotas are
# not applied, and mh_quota says so). mh_cut/mh_heal return 2 there.
#
#   mh_setup N            make N hosts (always 0: the fallback cannot fail).
#                         Owns the traps: on EXIT (and HUP INT PIPE TERM, which
#                         exit) it runs mh_cleanup, then eval "$MH_ATEXIT" (the
#                         test's own cleanup: set it, do not trap yourself)
#   mh_mode               netns | loopback
#   mh_why                why loopback ("not root", "ip failed: ...")
#   mh_addr I             host I's IPv4 address
#   mh_netdev             the hosts' interface for UCX_NET_DEVICES (gm0 | lo)
#   mh_run I CORES CMD... run CMD in host I, in the foreground; the host's
#                         quota becomes CORES cores (0.25, 1.5; 0 = no limit;
#                         - = leave it as it is: use - for a helper command in
#                         a host whose agent has a quota)
#   mh_spawn I CORES CMD... the same in the background; MH_PID is its pid
#                         (the command's own: it execs). Redirect the call to
#                         send the command's output to a file:
#                           mh_spawn 2 1.5 cmd >"$tmp/h2.log" 2>&1; p2=$MH_PID
#   mh_cut I, mh_heal I   take host I's link down / up (netns mode only)
#   mh_quota I            host I's quota as "QUOTA PERIOD" in us (or "none")
#   mh_throttled I        how many periods host I's cgroup was throttled
#   mh_usage I            CPU ns host I's processes used so far (v1: its cpuacct
#                         cgroup, made where /sys/fs/cgroup/cpuacct is writable;
#                         v2: cpu.stat usage_usec); empty where neither is there
#   mh_cleanup            kill every process of the run, delete the
#                         namespaces and cgroups (bounded: about 2 s)
#
# Node agents in the hosts (for the scripts that run `goldminer node`; G names
# the goldminer binary):
#   mh_ucx_env            export UCX over TCP on the hosts' link (UCX_TLS=tcp,
#                         UCX_NET_DEVICES=$(mh_netdev), UCX's warning about
#                         variables it does not use off)
#   mh_secret FILE        a new peer secret in FILE: 48 random bytes in hex,
#                         mode 600 (the agent refuses a file others can read)
#   mh_agent I CORES SOCK ARGS...  `$G node --socket SOCK ARGS...` spawned in
#                         host I under CORES as mh_spawn (redirect the call for
#                         its output; MH_PID its pid, also kept in MH_AGENTS),
#                         then a wait until SOCK is there: 1 if the agent
#                         exited first or MH_WAIT_S passed
#   mh_peers SOCK         how many peers the agent at SOCK lists as connected
#                         (its --status, asked from outside the hosts: no
#                         host's quota pays for it; 0 when it does not answer)
#   mh_connected SOCK N   wait until the agent at SOCK has N peers connected
#                         (mh_peers): 1 if not within MH_WAIT_S
#   mh_delivered LOG [N]  the samples a job's remote workers delivered, from
#                         the home agent's LOG: the number in its last
#                         "remote workers delivered" line (the agent writes
#                         one as each job ends), once LOG has N (default 1)
#                         such lines or MH_WAIT_S passed; empty when none came
#   mh_agents_stop        SIGTERM to every agent in MH_AGENTS, SIGKILL to those
#                         left after 2 s, every one reaped; MH_AGENTS emptied
#
# Env: MH_FORCE_LOOPBACK=1 takes the fallback even where netns would work;
# MH_WAIT_S (10) bounds mh_agent's and mh_connected's waits, in seconds.
# Every ip(8) call here runs under timeout(1), so no step can hang a test.
#
# Node agents in two hosts, each under its own quota (tests/test_multihost.sh
# does this for one). Pass UCX's variables through env(1): an assignment in
# front of a shell function is not reliably exported to what it runs. Give
# each agent its own --socket: path sockets live in the shared file system,
# so a trainer in any host reaches an agent by its path. Give --cpus too:
# the quota does not change what nproc says inside the host.
#
#   . tests/multihost.sh
#   MH_ATEXIT="rm -rf '$tmp'"
#   mh_setup 2
#   mh_spawn 1 0.25 env UCX_TLS=tcp UCX_NET_DEVICES="$(mh_netdev)" \
#       "$G" node --socket "$tmp/h1.sock" --cpus 1 --quiet >"$tmp/agent1.log" 2>&1
#   agent1=$MH_PID
#   mh_spawn 2 1.5 env UCX_TLS=tcp UCX_NET_DEVICES="$(mh_netdev)" \
#       "$G" node --socket "$tmp/h2.sock" --cpus 2 --quiet >"$tmp/agent2.log" 2>&1
#   agent2=$MH_PID
#   mh_run 1 0.25 "$G" bench "$set" --node "$tmp/h1.sock" ...   # the trainer, host 1
#
# The agent's workers are its children, so they are in its host's cgroup and
# namespace, under the same quota; host 1's trainer shares host 1's quota.
# mh_addr I is the address host I's agent listens on for the others.

MH_MODE=
MH_N=0
MH_TAG=gm$$
MH_NET=
MH_CGROUP=none
MH_CGDIR=
MH_ACCT=
MH_PIDS=
MH_PID=
MH_AGENTS=
MH_WHY=
MH_ATEXIT=${MH_ATEXIT:-}
MH_PERIOD=100000

# mh_ip ARGS...: ip(8) with a deadline.
mh_ip() {
	timeout 5 ip "$@"
}

# mh_cg_detect: set MH_CGROUP (v1 | v2 | none) and MH_CGDIR (the parent the
# hosts' cgroups go under).
mh_cg_detect() {
	MH_CGROUP=none
	if [ -f /sys/fs/cgroup/cgroup.controllers ] &&
		grep -qw cpu /sys/fs/cgroup/cgroup.controllers; then
		# v2: a child of the root may use cpu once the root delegates it.
		grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null ||
			echo +cpu >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null
		if grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null; then
			MH_CGROUP=v2 MH_CGDIR=/sys/fs/cgroup
		fi
	elif [ -w /sys/fs/cgroup/cpu/cpu.cfs_quota_us ] || [ -w /sys/fs/cgroup/cpu ]; then
		MH_CGROUP=v1 MH_CGDIR=/sys/fs/cgroup/cpu
	fi
}

# mh_acct_setup: under cgroup v1, one cpuacct cgroup per host beside its cpu one
# (the two controllers are mounted apart here), so mh_usage can count its CPU
# time; MH_ACCT stays empty where that cannot be made.
mh_acct_setup() {
	MH_ACCT=
	[ "$MH_CGROUP" = v1 ] && [ -w /sys/fs/cgroup/cpuacct ] || return 0
	i=1
	while [ "$i" -le "$MH_N" ]; do
		mkdir "/sys/fs/cgroup/cpuacct/${MH_TAG}h$i" 2>/dev/null || return 0
		i=$((i + 1))
	done
	MH_ACCT=/sys/fs/cgroup/cpuacct
}

mh_usage() {
	if [ -n "$MH_ACCT" ]; then
		cat "$MH_ACCT/${MH_TAG}h$1/cpuacct.usage"
	elif [ "$MH_CGROUP" = v2 ]; then
		awk '$1 == "usage_usec" { print $2 * 1000 }' "$(mh_cg "$1")/cpu.stat"
	fi
}

# mh_cg I: host I's cgroup directory.
mh_cg() {
	echo "$MH_CGDIR/${MH_TAG}h$1"
}

mh_setup() {
	MH_N=$1
	MH_NET=10.231.$(($$ % 250 + 1))
	trap 'mh_cleanup; eval "$MH_ATEXIT"' EXIT
	trap 'exit 129' HUP
	trap 'exit 130' INT
	trap 'exit 141' PIPE
	trap 'exit 143' TERM
	mh_cg_detect
	if [ "$MH_CGROUP" != none ]; then
		i=1
		while [ "$i" -le "$MH_N" ]; do
			if ! mkdir "$(mh_cg "$i")" 2>/dev/null; then
				while [ "$i" -gt 1 ]; do # undo the ones made
					i=$((i - 1))
					rmdir "$(mh_cg "$i")"
				done
				MH_CGROUP=none
				break
			fi
			i=$((i + 1))
		done
	fi
	mh_acct_setup
	MH_MODE=loopback
	if [ "${MH_FORCE_LOOPBACK:-0}" = 1 ]; then
		MH_WHY="MH_FORCE_LOOPBACK=1"
	elif [ "$(id -u)" != 0 ]; then
		MH_WHY="not root"
	elif ! command -v ip >/dev/null 2>&1; then
		MH_WHY="no ip(8): install iproute2"
	elif mh_net_setup 2>"/tmp/$MH_TAG.err"; then
		MH_MODE=netns
	else
		MH_WHY="ip failed: $(tr '\n' ' ' <"/tmp/$MH_TAG.err")"
		mh_net_teardown
	fi
	rm -f "/tmp/$MH_TAG.err"
	return 0
}

# mh_net_setup: the switch namespace and its bridge, then one host per i.
mh_net_setup() {
	sw=${MH_TAG}s
	mh_ip netns add "$sw" || return 1
	mh_ip -n "$sw" link add br0 type bridge || return 1
	mh_ip -n "$sw" link set br0 up || return 1
	# A switch does not run the firewall on what it forwards: where br_netfilter
	# is loaded, turn its hooks off in this namespace only (per-namespace since
	# Linux 5.3), so the hosts' traffic does not pay iptables on every frame.
	for f in iptables ip6tables arptables; do
		timeout 5 ip netns exec "$sw" sh -c \
			"echo 0 >/proc/sys/net/bridge/bridge-nf-call-$f" 2>/dev/null
	done
	i=1
	while [ "$i" -le "$MH_N" ]; do
		h=${MH_TAG}h$i
		mh_ip netns add "$h" || return 1
		mh_ip -n "$h" link set lo up || return 1
		# The switch's end is h<i>; the host's end is made inside the host.
		mh_ip -n "$sw" link add "h$i" type veth peer name gm0 netns "$h" || return 1
		mh_ip -n "$sw" link set "h$i" master br0 || return 1
		mh_ip -n "$sw" link set "h$i" up || return 1
		mh_ip -n "$h" addr add "$MH_NET.$i/24" dev gm0 || return 1
		mh_ip -n "$h" link set gm0 up || return 1
		i=$((i + 1))
	done
}

mh_mode() {
	echo "$MH_MODE"
}

mh_why() {
	echo "$MH_WHY"
}

mh_addr() {
	if [ "$MH_MODE" = netns ]; then echo "$MH_NET.$1"; else echo 127.0.0.1; fi
}

mh_netdev() {
	if [ "$MH_MODE" = netns ]; then echo gm0; else echo lo; fi
}

# mh_set_quota I CORES: write host I's quota (0 = no limit, - = unchanged).
# 0 or 1.
mh_set_quota() {
	[ "$MH_CGROUP" = none ] || [ "$2" = - ] && return 0
	q=$(awk -v c="$2" -v p="$MH_PERIOD" 'BEGIN { q = int(c * p + 0.5); print (q > 0 ? q : -1) }')
	if [ "$MH_CGROUP" = v1 ]; then
		echo "$MH_PERIOD" >"$(mh_cg "$1")/cpu.cfs_period_us" &&
			echo "$q" >"$(mh_cg "$1")/cpu.cfs_quota_us"
	else
		[ "$q" = -1 ] && q=max
		echo "$q $MH_PERIOD" >"$(mh_cg "$1")/cpu.max"
	fi
}

mh_quota() {
	case $MH_CGROUP in
	v1) echo "$(cat "$(mh_cg "$1")/cpu.cfs_quota_us") $(cat "$(mh_cg "$1")/cpu.cfs_period_us")" ;;
	v2) cat "$(mh_cg "$1")/cpu.max" ;;
	*) echo none ;;
	esac
}

mh_throttled() {
	if [ "$MH_CGROUP" = none ]; then echo 0; return; fi
	awk '$1 == "nr_throttled" { print $2 }' "$(mh_cg "$1")/cpu.stat"
}

# mh_enter I CORES CMD...: become CMD inside host I: a shell that writes its
# own pid into the host's cgroup, then execs ip netns exec, which execs CMD,
# so the pid is CMD's all along (and every child it forks is in the cgroup).
mh_enter() {
	mh_i=$1
	shift 2
	if [ "$MH_MODE" = netns ]; then
		# ip netns exec gives the command a sysfs of its own, without the
		# cgroup file systems: mount them again (in its private mount
		# namespace) so a program can read its own CPU quota, as on a host.
		# shellcheck disable=SC2016 # the inner shell's
		set -- ip netns exec "${MH_TAG}h$mh_i" sh -c '
			if [ -z "$(ls /sys/fs/cgroup 2>/dev/null)" ]; then
				mount -t tmpfs gm-cgroup /sys/fs/cgroup 2>/dev/null
				if [ "$0" = v1 ]; then
					mkdir -p /sys/fs/cgroup/cpu &&
						mount -t cgroup -o cpu gm-cpu /sys/fs/cgroup/cpu 2>/dev/null
				elif [ "$0" = v2 ]; then
					mount -t cgroup2 gm-cgroup2 /sys/fs/cgroup 2>/dev/null
				fi
			fi
			exec "$@"' "$MH_CGROUP" "$@"
	fi
	if [ "$MH_CGROUP" = none ]; then
		exec "$@"
	fi
	if [ -n "$MH_ACCT" ]; then # its cpuacct cgroup too (mh_usage)
		# shellcheck disable=SC2016 # $$ and $@ are the inner shell's
		set -- sh -c 'echo $$ >"$0" || exit 126; exec "$@"' \
			"$MH_ACCT/${MH_TAG}h$mh_i/cgroup.procs" "$@"
	fi
	# shellcheck disable=SC2016 # $$ and $@ are the inner shell's
	exec sh -c 'echo $$ >"$0" || exit 126; exec "$@"' "$(mh_cg "$mh_i")/cgroup.procs" "$@"
}

mh_run() {
	mh_set_quota "$1" "$2" || return 1
	(mh_enter "$@")
}

mh_spawn() {
	mh_set_quota "$1" "$2" || return 1
	(mh_enter "$@") </dev/null &
	MH_PID=$!
	MH_PIDS="$MH_PIDS $MH_PID"
}

mh_cut() {
	[ "$MH_MODE" = netns ] || return 2
	mh_ip -n "${MH_TAG}h$1" link set gm0 down
}

mh_heal() {
	[ "$MH_MODE" = netns ] || return 2
	mh_ip -n "${MH_TAG}h$1" link set gm0 up
}

# mh_kill_all: SIGKILL every process of the run (spawned, in a cgroup, in a
# namespace), twice a little apart for those forked meanwhile.
mh_kill_all() {
	for round in 1 2; do
		pids=$MH_PIDS
		i=1
		while [ "$i" -le "$MH_N" ]; do
			[ "$MH_CGROUP" != none ] && [ -f "$(mh_cg "$i")/cgroup.procs" ] &&
				pids="$pids $(cat "$(mh_cg "$i")/cgroup.procs")"
			[ "$MH_MODE" = netns ] &&
				pids="$pids $(timeout 2 ip netns pids "${MH_TAG}h$i" 2>/dev/null)"
			i=$((i + 1))
		done
		for p in $pids; do
			kill -9 "$p" 2>/dev/null
		done
		[ "$round" = 1 ] && sleep 0.1
	done
}

mh_net_teardown() {
	i=1
	while [ "$i" -le "$MH_N" ]; do
		mh_ip netns del "${MH_TAG}h$i" 2>/dev/null
		i=$((i + 1))
	done
	mh_ip netns del "${MH_TAG}s" 2>/dev/null
	return 0
}

mh_cleanup() {
	[ "$MH_N" -gt 0 ] || return 0
	mh_kill_all
	mh_net_teardown
	if [ "$MH_CGROUP" != none ]; then
		i=1
		while [ "$i" -le "$MH_N" ]; do
			# A killed process leaves its cgroup when it is reaped: retry a
			# little (bounded) before giving up on rmdir.
			t=0
			while [ -d "$(mh_cg "$i")" ] && ! rmdir "$(mh_cg "$i")" 2>/dev/null &&
				[ "$t" -lt 20 ]; do
				sleep 0.05
				t=$((t + 1))
			done
			[ -n "$MH_ACCT" ] && rmdir "$MH_ACCT/${MH_TAG}h$i" 2>/dev/null
			i=$((i + 1))
		done
	fi
	MH_N=0
}

mh_ucx_env() {
	UCX_TLS=tcp UCX_WARN_UNUSED_ENV_VARS=n
	UCX_NET_DEVICES=$(mh_netdev)
	export UCX_TLS UCX_WARN_UNUSED_ENV_VARS UCX_NET_DEVICES
}

mh_secret() {
	(umask 077 && head -c 48 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$1") &&
		chmod 600 "$1"
}

# mh_alive PID: PID runs (a zombie, exited but not yet reaped, does not).
mh_alive() {
	mh_st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)
	[ -n "$mh_st" ] && [ "$mh_st" != Z ]
}

mh_agent() {
	mh_i=$1 mh_c=$2 mh_sock=$3
	shift 3
	mh_spawn "$mh_i" "$mh_c" "${G:?mh_agent: G must name the goldminer binary}" node \
		--socket "$mh_sock" "$@" || return 1
	MH_AGENTS="$MH_AGENTS $MH_PID"
	mh_k=0
	while ! [ -S "$mh_sock" ]; do
		mh_alive "$MH_PID" && [ $mh_k -lt $((${MH_WAIT_S:-10} * 20)) ] || return 1
		sleep 0.05
		mh_k=$((mh_k + 1))
	done
}

mh_peers() {
	"${G:?mh_peers: G must name the goldminer binary}" node --socket "$1" --status 2>/dev/null |
		grep -o '"state": "connected"' | wc -l
}

mh_connected() {
	mh_k=0
	while [ "$(mh_peers "$1")" -lt "$2" ]; do
		[ $mh_k -lt $((${MH_WAIT_S:-10} * 20)) ] || return 1
		sleep 0.05
		mh_k=$((mh_k + 1))
	done
}

mh_delivered() {
	mh_k=0
	while [ "$(grep -c "remote workers delivered" "$1" 2>/dev/null)" -lt "${2:-1}" ] &&
		[ $mh_k -lt $((${MH_WAIT_S:-10} * 20)) ]; do
		sleep 0.05
		mh_k=$((mh_k + 1))
	done
	sed -n 's/.*remote workers delivered \([0-9]*\) samples.*/\1/p' "$1" 2>/dev/null | tail -1
}

mh_agents_stop() {
	for mh_p in $MH_AGENTS; do
		kill "$mh_p" 2>/dev/null
	done
	mh_k=0
	for mh_p in $MH_AGENTS; do
		while mh_alive "$mh_p" && [ $mh_k -lt 40 ]; do
			sleep 0.05
			mh_k=$((mh_k + 1))
		done
		kill -9 "$mh_p" 2>/dev/null
		wait "$mh_p" 2>/dev/null
	done
	MH_AGENTS=
}
