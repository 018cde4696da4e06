#!/bin/sh
# goldminer-agents.sh - one goldminer node agent on every node of a Slurm job,
# each with the job's hosts as its peers, kept running for the job's life. Run
# it with sh inside the allocation (an sbatch script, or a salloc shell) before
# the training step (train.sbatch):
#
#   sh goldminer-agents.sh        # returns once every agent answers
#   srun ... python train.py --node "/tmp/goldminer-$SLURM_JOB_ID.sock"
#
# The agents are one job step in the background (srun, one task per node,
# --overlap, --kill-on-bad-exit=0: one node's trouble ends no other's agent);
# they end with the job. Each task is this script again, as the agent's keeper
# on its node (its text travels in srun's arguments: no shared path needed).
# The keeper restarts its agent whenever it ends (the OOM killer, a crash, a
# kill): after 1 s, doubling to 30 s while it keeps failing. If the whole step
# ends while the job runs (`scancel JOBID.STEP`), it is started again. An agent
# that cannot start the first time (its port taken, an option it refuses) ends
# this script at once with that node's log, never after a silent wait.
#
# Per job, so that jobs sharing nodes never meet:
# - the port: GM_PORT, or 20000 + SLURM_JOB_ID mod 10000: jobs fewer than 10000
#   ids apart never share one, and it is below Linux's ephemeral ports (32768
#   and up), which no outgoing connection can hold;
# - the secret: derived on each node from the user's secret and the job id
#   (SHA-256), in a private directory of the node's ${TMPDIR:-/tmp} removed
#   with the keeper; another job's agents (the same user's too) are strangers;
# - the socket: /tmp/goldminer-$SLURM_JOB_ID.sock on each node (GM_SOCKET).
# Logs: one file per node, GM_LOG_DIR/goldminer-agents-JOBID-NODE.log (the
# agent's lines and its keeper's, which carry the time), written here from
# the step's output: GM_LOG_DIR need not be shared.
#
# Env: GM_SECRET the user's secret (default $HOME/.goldminer/secret, made with
# mode 0600 if absent: it must be on a file system every node sees);
# GM_LEND_ROOT the directory of the datasets the agents lend each other (none:
# they lend nothing); GM_NODE_ARGS more options of `goldminer node`, split at
# blanks (e.g. "--cpus 8 --mem 16G --metrics 9464 --lend-python"); GM_LOG_DIR
# (the submit directory); GOLDMINER the program (goldminer); GM_WAIT_S how long
# to wait for the agents (60). UCX_TLS and UCX_NET_DEVICES pass through srun's
# environment. GM_UNGUARDED=1 adds --unguarded-ucx: the agents run as the job's
# user, and a kernel that lets only CAP_NET_ADMIN attach socket filters leaves
# them unable to guard UCX's ports (without it they refuse to start, saying
# so); set it only where the cluster's network keeps other hosts off the
# nodes' ports (docs/USAGE.md, "Security and limits").
set -eu

# say WORDS...: one line of a keeper, with the time
say() {
	echo "$(date +%H:%M:%S) goldminer-agents.sh: $*"
}

# alive PID: PID runs (a zombie, ended but not yet reaped, does not)
alive() {
	k_st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)
	[ -n "$k_st" ] && [ "$k_st" != Z ]
}

# how STATUS: an exit status in words
how() {
	if [ "$1" -gt 128 ]; then echo "killed by signal $(($1 - 128))"; else echo "exit $1"; fi
}

# up GM SOCK PID WAIT_S: 0 once the agent PID answers --status at SOCK (and
# still runs: not another agent there); 1 if it ended first or WAIT_S passed
# (it is then stopped)
up() {
	u_end=$(($(date +%s) + $4))
	until "$1" node --socket "$2" --status >/dev/null 2>&1 && alive "$3"; do
		alive "$3" || return 1
		if [ "$(date +%s)" -ge $u_end ]; then
			kill -KILL "$3" 2>/dev/null
			return 1
		fi
		sleep 0.1
	done
}

# keep GM SOCK SECRET PORT WAIT_S ARGS...: the keeper, a task of the agents'
# step on each node. Its lines, and its agent's, go out labelled "NODE: "
# (the step's output is split into one log per node from that label).
keep() {
	gm=$1 sock=$2 base=$3 port=$4 wait_s=$5
	shift 5
	node=${SLURMD_NODENAME:-$(hostname)}
	step="$SLURM_JOB_ID.${SLURM_STEP_ID:-?}"
	priv=$(mktemp -d "${TMPDIR:-/tmp}/goldminer-$SLURM_JOB_ID.XXXXXX") || {
		echo "$node: $(say "could not start: no private directory in ${TMPDIR:-/tmp}")"
		exit 3
	}
	mkfifo "$priv/out"
	# (a shell loop, not awk: mawk would hold the lines until its buffer fills)
	while IFS= read -r l || [ -n "$l" ]; do
		printf '%s: %s\n' "$node" "$l"
	done <"$priv/out" &
	exec >"$priv/out" 2>&1
	rm -f "$priv/out"
	pid=
	# shellcheck disable=SC2317 # run by the traps
	stop() {
		[ -n "$pid" ] && kill "$pid" 2>/dev/null
		rm -rf "$priv"
		exit 0
	}
	trap stop TERM INT HUP
	# The job's secret: the user's, hashed with the job id; the agent checks
	# the file's owner and mode (0600).
	if [ ! -r "$base" ] || ! command -v sha256sum >/dev/null; then
		say "could not start: cannot read the secret $base (GM_SECRET: on a file system every node sees), or no sha256sum"
		rm -rf "$priv"
		exit 3
	fi
	(
		umask 077
		{ cat "$base" && printf '\ngoldminer job %s\n' "$SLURM_JOB_ID"; } |
			sha256sum | cut -c1-64 >"$priv/secret"
	)
	say "keeper of step $step: the agent on port $port, socket $sock"
	ever=0 delay=1
	while :; do
		t0=$(date +%s)
		"$gm" node --socket "$sock" --secret "$priv/secret" "$@" </dev/null &
		pid=$!
		if up "$gm" "$sock" "$pid" "$wait_s"; then
			[ $ever = 0 ] && say "agent up (pid $pid, port $port)"
			[ $ever = 1 ] && say "agent up again (pid $pid, port $port)"
			ever=1
		elif [ $ever = 0 ]; then
			rc=0
			wait "$pid" || rc=$?
			say "the agent could not start ($(how $rc): its words above);" \
				"if port $port is taken (another job's agents, another program)," \
				"set GM_PORT to a free port for this job"
			rm -rf "$priv"
			exit 3
		fi
		rc=0
		wait "$pid" || rc=$?
		pid=
		[ $(($(date +%s) - t0)) -ge 60 ] && delay=1
		say "the agent ended ($(how $rc)); starting it again in $delay s"
		sleep "$delay" &
		wait $! || : # (a TERM ends the wait: the trap runs now)
		delay=$((delay * 2))
		[ $delay -gt 30 ] && delay=30
	done
}

if [ "${1:-}" = _keep ]; then
	shift
	keep "$@"
fi

: "${SLURM_JOB_NODELIST:?run this inside a Slurm allocation (sbatch or salloc)}"
: "${SLURM_JOB_ID:?run this inside a Slurm allocation (sbatch or salloc)}"
self=$(cat "$0" 2>/dev/null) || self=
case $self in *"keep GM SOCK SECRET PORT WAIT_S"*) ;; *)
	echo "goldminer-agents.sh: run it as 'sh path/to/goldminer-agents.sh' (it sends its own text to the nodes; \$0 is '$0')" >&2
	exit 1
	;;
esac
gm=${GOLDMINER:-goldminer}
port=${GM_PORT:-$((20000 + SLURM_JOB_ID % 10000))}
secret=${GM_SECRET:-$HOME/.goldminer/secret}
sock=${GM_SOCKET:-/tmp/goldminer-$SLURM_JOB_ID.sock}
logs=${GM_LOG_DIR:-${SLURM_SUBMIT_DIR:-.}}
wait_s=${GM_WAIT_S:-60}

hosts=$(scontrol show hostnames "$SLURM_JOB_NODELIST")
nodes=$(printf '%s\n' "$hosts" | grep -c .) || true
peers=$(printf '%s\n' "$hosts" | paste -sd, -)
if [ "$nodes" -lt 1 ]; then
	echo "goldminer-agents.sh: scontrol gave no host for '$SLURM_JOB_NODELIST'" >&2
	exit 1
fi
if [ ! -f "$secret" ]; then
	(
		umask 077
		mkdir -p "$(dirname "$secret")"
		head -c 48 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$secret"
	)
fi
mkdir -p "$logs"
pre=$logs/goldminer-agents-$SLURM_JOB_ID- # + NODE.log: that node's log
for h in $hosts; do
	: >"$pre$h.log"
done

set -- --listen "0.0.0.0:$port" --peers "$peers"
[ -n "${GM_LEND_ROOT:-}" ] && set -- "$@" --lend-root "$GM_LEND_ROOT"
[ "${GM_UNGUARDED:-0}" = 1 ] && set -- "$@" --unguarded-ucx
set -f # GM_NODE_ARGS: words, never patterns
# shellcheck disable=SC2086 # split into options on purpose
set -- "$@" ${GM_NODE_ARGS:-}
set +f

# all_up: every node's log says its agent came up (once, at least); one grep
# for all of them
all_up() {
	[ "$(grep -l "goldminer-agents.sh: agent up" "$pre"*.log | grep -c .)" -ge "$nodes" ]
}

# split_logs: each "NODE: line" of the step's output to NODE's log, anything
# else to this script's output (a shell loop: mawk would hold the lines)
split_logs() {
	while IFS= read -r l || [ -n "$l" ]; do
		h=${l%%": "*}
		case $h in
		"$l" | "" | *[!A-Za-z0-9._-]*) printf '%s\n' "$l" ;;
		*) printf '%s\n' "${l#*": "}" >>"$pre$h.log" ;;
		esac
	done
}

# The agents' step, and again if it ends once every agent was up while the
# job still runs. Its output, "NODE: line", goes to NODE's log; the rest
# (none expected) to this script's output.
(
	delay=2
	while :; do
		srun --nodes="$nodes" --ntasks="$nodes" --ntasks-per-node=1 --overlap \
			--kill-on-bad-exit=0 --job-name=goldminer-agents \
			sh -c "$self" goldminer-agents.sh _keep "$gm" "$sock" "$secret" "$port" \
			"$wait_s" "$@" </dev/null |
			split_logs
		all_up || exit 0
		[ "$(squeue -h -j "$SLURM_JOB_ID" -o %T 2>/dev/null)" = RUNNING ] || exit 0
		echo "goldminer-agents.sh: the agents' step ended while the job runs; starting it again in $delay s" >&2
		sleep "$delay"
		delay=$((delay * 2))
		[ $delay -gt 60 ] && delay=60
	done
) &
loop=$!

# every agent up, or at once the first that could not start, or the step gone
end=$(($(date +%s) + wait_s))
while ! all_up; do
	bad='' why=''
	failed=$(grep -l "goldminer-agents.sh: \(the agent \)\{0,1\}could not start" "$pre"*.log) || true
	for h in $hosts; do
		case "$failed" in *"$pre$h.log"*) bad="$bad $h" ;; esac
	done
	if [ -n "$bad" ]; then
		why="the agent could not start on:$bad"
	elif ! alive "$loop" && ! all_up; then
		# (all_up again: the step may have written the last 'agent up' and
		# ended, its loop with it, since this loop's all_up read the logs)
		why="the agents' step ended before every agent was up (srun's words above)"
	elif [ "$(date +%s)" -ge $end ]; then
		why="not every agent answered within $wait_s s (GM_WAIT_S)"
	fi
	if [ -n "$why" ]; then
		echo "goldminer-agents.sh: $why; port $port, logs $pre*.log" >&2
		for h in $hosts; do # the log of each node whose agent is not up
			grep -q "goldminer-agents.sh: agent up" "$pre$h.log" && continue
			echo "goldminer-agents.sh: $pre$h.log:" >&2
			tail -n 20 "$pre$h.log" | sed "s/^/  $h: /" >&2
		done
		# the other agents end too: the step's number is in the keepers' lines
		for h in $hosts; do
			st=$(sed -n 's/.*keeper of step \([0-9.]*\):.*/\1/p' "$pre$h.log" | head -1)
			[ -n "$st" ] && scancel "$st" 2>/dev/null && break
		done
		exit 1
	fi
	sleep 0.1
done
echo "goldminer-agents.sh: $nodes agents up (peers $peers, port $port, socket $sock, logs $pre*.log)"
