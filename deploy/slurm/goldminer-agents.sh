#!/bin/sh
# goldminer-agents.sh - one goldminer node agent on every node of a Slurm job,
# each with the job's hosts as its peers. Run it inside the allocation (an
# sbatch script, or a salloc shell) before the training step (train.sbatch):
#
#   sh goldminer-agents.sh        # returns once every agent answers
#   srun ... python train.py --node "/tmp/goldminer-$SLURM_JOB_ID.sock"
#
# The agents are one job step (srun, one task per node) in the background:
# they end with the job. The hosts come from $SLURM_JOB_NODELIST expanded by
# `scontrol show hostnames`; every agent gets all of them as --peers (names,
# looked up by the agents; each one skips itself) on the same port.
#
# Env: GM_PORT the agents' port (7070); GM_SECRET the shared secret (default
# $HOME/.goldminer/secret, made with mode 0600 if absent: $HOME must be on a
# file system every node sees); GM_LEND_ROOT the directory of the datasets the
# agents lend each other (none: they lend nothing); GM_SOCKET the agent's
# socket on each node (/tmp/goldminer-$SLURM_JOB_ID.sock); GOLDMINER the
# program (goldminer); GM_WAIT_S how long to wait for the agents (60).
# UCX_TLS and UCX_NET_DEVICES pass through srun's environment.
# GM_UNGUARDED=1 adds --unguarded-ucx: the agents run as the job's user, and a
# kernel that lets only CAP_NET_ADMIN attach socket filters leaves them unable
# to guard UCX's ports (without it they refuse to start, saying so); set it
# only where the cluster's network keeps other hosts off the nodes' ports
# (docs/USAGE.md, "Security and limits").
set -eu

: "${SLURM_JOB_NODELIST:?run this inside a Slurm allocation (sbatch or salloc)}"
: "${SLURM_JOB_ID:?run this inside a Slurm allocation (sbatch or salloc)}"
gm=${GOLDMINER:-goldminer}
port=${GM_PORT:-7070}
secret=${GM_SECRET:-$HOME/.goldminer/secret}
sock=${GM_SOCKET:-/tmp/goldminer-$SLURM_JOB_ID.sock}
wait_s=${GM_WAIT_S:-60}

hosts=$(scontrol show hostnames "$SLURM_JOB_NODELIST")
nodes=$(printf '%s\n' "$hosts" | grep -c .)
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

# one task per node, beside the job's other steps (--overlap), kept running
# when one agent fails (the others still serve their trainers)
set -- --listen "0.0.0.0:$port" --peers "$peers" --secret "$secret" --socket "$sock"
[ -n "${GM_LEND_ROOT:-}" ] && set -- "$@" --lend-root "$GM_LEND_ROOT"
[ "${GM_UNGUARDED:-0}" = 1 ] && set -- "$@" --unguarded-ucx
srun --nodes="$nodes" --ntasks="$nodes" --ntasks-per-node=1 --overlap --kill-on-bad-exit=0 \
	--job-name=goldminer-agents "$gm" node "$@" &

# every agent up: its socket answers --status (a step of one task per node)
# shellcheck disable=SC2016 # the inner shell's
srun --nodes="$nodes" --ntasks="$nodes" --ntasks-per-node=1 --overlap \
	--job-name=goldminer-wait sh -c '
		k=0
		until "$0" node --socket "$1" --status >/dev/null 2>&1; do
			k=$((k + 1))
			if [ "$k" -gt $(($2 * 4)) ]; then
				echo "goldminer-agents.sh: no agent on $(hostname) after $2 s" >&2
				exit 1
			fi
			sleep 0.25
		done' "$gm" "$sock" "$wait_s"
echo "goldminer-agents.sh: $nodes agents up (peers $peers, port $port, socket $sock)"
