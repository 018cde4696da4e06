#!/bin/sh
# No storms: peers that refuse a job are asked again after a wait that doubles
# (2 s, 4 s, ... 32 s), never in a loop, and what they cause in the logs is a
# few lines per address (tests/multihost.sh hosts, as tests/test_remote.sh).
# The home (host 1, CPU-poor: its jobs want remote workers) runs a C job
# (`goldminer bench --node`) and a Python job (tests/python/pyremote_job.py
# through goldminer.torch.DataLoader(node=...); /usr/bin/python3 with torch,
# else the C job alone, saying so) next to two peers that refuse both: host
# 2 lends no Python workers (no --lend-python) and host 3 lends Python
# workers, both with a --lend-root that does not hold the dataset. Under a
# sanitizer build (make sanitize) the C job alone, ASan watching the agents.
#   1. over 10 s, once both peers refused both jobs, each job sent the peers
#      at most a handful of LENDs (its remote_lends in --status; before the
#      backoff, a refusing peer was asked ~600 times a second, the Python
#      job's whole pickled spec each time)
#   2. over the same 10 s each refusing peer's log grew by at most a few
#      lines, and the home's by at most a few about each peer
#   3. host 3's agent restarted with --lend-python and a --lend-root that
#      holds the dataset is asked again within the cap (32 s) and lends:
#      every job still running has a remote worker granted (seconds printed)
#   4. the jobs complete with the checksums of a run without peers, the
#      restarted peer's workers delivered samples (to a job at least: one
#      may end before they start), and no agent wrote a sanitizer report
# TAP on stdout; every wait has a deadline. Env: B (build dir).
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/agent.sh
. "$here/agent.sh"
N=4
echo "1..$N"
[ -f "$B/libgoldminer-remote.so" ] ||
	skip_all "no $B/libgoldminer-remote.so (UCX not installed: make deps)"
san=0
readelf -d "$B/libgoldminer.so" 2>/dev/null | grep -q 'libasan' && san=1

# shellcheck source=tests/multihost.sh
. "$here/multihost.sh"
MH_ATEXIT=agent_cleanup
mh_setup 3
mh_ucx_env
mode=$(mh_mode)
echo "# multihost mode: $mode, hosts: $(mh_addr 1) $(mh_addr 2) $(mh_addr 3)"
[ "$mode" = loopback ] && echo "# namespaces could not be made ($(mh_why)): every host is 127.0.0.1"
mh_secret "$tmp/secret"
"$G" synth "$tmp/data" --images 384 >/dev/null 2>&1
mkdir -p "$tmp/other"

# The jobs run long enough for the window, the restart and the lending that
# follows (about a minute under host 1's half core): CE epochs of the C job,
# PE of the Python one.
CE=${CE:-160}
PE=${PE:-24}
set -- --batch 32 --size 96 --checksum --quiet
BENCH="$*"
# shellcheck disable=SC2086 # BENCH is a list of options
ref=$("$G" bench "$tmp/data" --workers 2 --epochs "$CE" $BENCH 2>/dev/null |
	sed -n 's/.*"checksum": \[\([^]]*\)\].*/\1/p')
py=0
if [ $san = 1 ]; then # (test_remote.sh's Python cases skip there too)
	echo "# under a sanitizer build: the C job alone (Python processes would load the ASan'ed libgoldminer without its runtime)"
elif "$PY" -c "import torch" 2>/dev/null; then
	py=1
	pyref=$(PYTHONPATH="$repo/python" GOLDMINER_LIB="$B/libgoldminer.so" NW=2 M=48 timeout 300 \
		"$PY" "$here/python/pyremote_job.py" "$tmp/data" plain "$PE" 2>"$tmp/pyref.err")
else
	echo "# no $PY with torch: the C job alone (the Python job's cases need torch)"
fi

port=$((20000 + $$ % 20000))
apid3='' # set by agent() through eval
# agent I LEND-ROOT [OPTIONS]: host I's agent (log $tmp/I.log), the others its
# peers; CPUS its budget (1)
agent() {
	i=$1 lend=$2
	shift 2
	peers=
	for p in 1 2 3; do
		[ "$p" = "$i" ] || peers="$peers${peers:+,}$(mh_addr "$p"):$((port + p))"
	done
	mh_agent "$i" 0 "$tmp/$i.sock" --cpus "${CPUS:-1}" --listen "$(mh_addr "$i"):$((port + i))" \
		--peers "$peers" --secret "$tmp/secret" --lend-root "$lend" "$@" >"$tmp/$i.log" 2>&1
	eval "apid$i=\$MH_PID"
}
agent 2 "$tmp/other"
agent 3 "$tmp/other" --lend-python
agent 1 "$tmp/other"
mh_connected "$tmp/1.sock" 2 || echo "# agent 1 did not see both peers within 10 s"

# the jobs, in host 1 under half a core (agent, workers and trainers)
# shellcheck disable=SC2086 # BENCH is a list of options
mh_spawn 1 0.5 timeout 300 "$G" bench "$tmp/data" --node "$tmp/1.sock" --epochs "$CE" $BENCH \
	>"$tmp/c.json" 2>"$tmp/c.err"
cpid=$MH_PID
ppid_=
if [ $py = 1 ]; then
	mh_spawn 1 0.5 env NODE="$tmp/1.sock" M=48 PYTHONPATH="$repo/python" \
		GOLDMINER_LIB="$B/libgoldminer.so" timeout 300 \
		"$PY" "$here/python/pyremote_job.py" "$tmp/data" plain "$PE" >"$tmp/pysum" 2>"$tmp/py.err"
	ppid_=$MH_PID
fi
njobs=$((1 + py))

# jobs_field FIELD: each job's FIELD in agent 1's --status, one per line, the
# Python job's (if any) last
jobs_field() {
	"$G" node --socket "$tmp/1.sock" --status 2>/dev/null | sed 's/{"pid"/\n{"pid"/g' |
		grep '^{"pid"' | awk -v f="\"$1\": " '
		{ i = index($0, f); v = i ? substr($0, i + length(f)) : "";
		  sub(/[^0-9].*/, "", v); if (index($0, "\"python_workers\": true")) p = v; else print v }
		END { if (p != "") print p }'
}
# all_at_least FIELD N [JOBS]: every job's FIELD is N or more, and there are
# JOBS jobs (njobs), or at least one with JOBS "any"
all_at_least() {
	v=$(jobs_field "$1")
	m=$(echo "$v" | grep -c .)
	if [ "${3:-$njobs}" = any ]; then [ "$m" -ge 1 ] || return 1; else [ "$m" = "${3:-$njobs}" ] || return 1; fi
	for x in $v; do [ "$x" -ge "$2" ] || return 1; done
}

# both peers refused both jobs (two refusals each job), 30 s at most
k=0
while [ $k -lt 600 ] && ! all_at_least remote_refusals 2; do
	sleep 0.05
	k=$((k + 1))
done
refused=$k
lends0=$(jobs_field remote_lends | tr '\n' ' ')
l2=$(wc -l <"$tmp/2.log") l3=$(wc -l <"$tmp/3.log") l1=$(wc -l <"$tmp/1.log")
sleep 10
lends1=$(jobs_field remote_lends | tr '\n' ' ')
sed -n "$((l2 + 1)),\$p" "$tmp/2.log" >"$tmp/2.win"
sed -n "$((l3 + 1)),\$p" "$tmp/3.log" >"$tmp/3.win"
sed -n "$((l1 + 1)),\$p" "$tmp/1.log" >"$tmp/1.win"

# 1: asks over 10 s, per job (both peers together)
# shellcheck disable=SC2086 # a list of numbers
set -- $lends1
ok=1 asks=
[ $refused -lt 600 ] && ok=0
for x in $lends0; do
	d=$(($1 - x))
	asks="$asks${asks:+, }$d"
	[ "$d" -le 8 ] || ok=1
	shift
done
[ $ok = 0 ] || { echo "# refusals seen: $(jobs_field remote_refusals | tr '\n' ' ')"; diag "$tmp/1.win"; }
t $ok "over 10 s two refusing peers were sent $asks LENDs (per job: C${ppid_:+, Python}; at most 8: a handful each)"

# 2: log lines over the same 10 s
w2=$(wc -l <"$tmp/2.win") w3=$(wc -l <"$tmp/3.win")
h2=$(grep -c -e "$(mh_addr 2):$((port + 2))" -e "from $(mh_addr 2)\b" "$tmp/1.win")
h3=$(grep -c -e "$(mh_addr 3):$((port + 3))" -e "from $(mh_addr 3)\b" "$tmp/1.win")
ok=1
[ "$w2" -le 6 ] && [ "$w3" -le 6 ] && [ "$h2" -le 6 ] && [ "$h3" -le 6 ] && ok=0
[ $ok = 0 ] || { head -20 "$tmp/2.win" | sed 's/^/# 2: /'; head -20 "$tmp/3.win" | sed 's/^/# 3: /'; head -20 "$tmp/1.win" | sed 's/^/# 1: /'; }
t $ok "over 10 s the refusing peers logged $w2 and $w3 lines, the home $h2 and $h3 about them (at most 6 each)"

# 3: host 3 restarted, lending the dataset and Python workers: asked again
kill "$apid3"
k=0
while mh_alive "$apid3" && [ $k -lt 100 ]; do
	sleep 0.05
	k=$((k + 1))
done
mv "$tmp/3.log" "$tmp/3.first.log"
CPUS=2 agent 3 "$tmp/data" --lend-python # (a worker for each job)
t0=$(date +%s%N)
k=0
while [ $k -lt 800 ] && ! all_at_least remote_granted 1 any; do # 40 s at most
	sleep 0.05
	k=$((k + 1))
done
secs=$((($(date +%s%N) - t0) / 1000000))
ok=1
[ $k -lt 800 ] && [ $secs -le 32000 ] && ok=0
[ $ok = 0 ] || { echo "# granted: $(jobs_field remote_granted | tr '\n' ' ')"; diag "$tmp/3.log"; }
t $ok "a refusing peer restarted with --lend-python and the dataset's --lend-root is asked again and lends every job still running ($(echo "$v" | grep -c .) of $njobs) in $secs ms (the cap: 32 s)"

# 4: the jobs end with a run's checksums; the restarted peer's workers delivered
wait "$cpid"
[ -n "$ppid_" ] && wait "$ppid_"
got=$(sed -n 's/.*"checksum": \[\([^]]*\)\].*/\1/p' "$tmp/c.json")
k=0
while [ $k -lt 200 ] && [ "$(grep -c "remote workers delivered" "$tmp/1.log")" -lt "$njobs" ]; do
	sleep 0.05
	k=$((k + 1))
done
d=$(sed -n 's/.*remote workers delivered \([0-9]*\) samples.*/\1/p' "$tmp/1.log" | tr '\n' ' ')
ok=1
[ -n "$ref" ] && [ "$got" = "$ref" ] && ok=0
[ $py = 0 ] || { [ -n "$pyref" ] && [ "$(cat "$tmp/pysum")" = "$pyref" ]; } || ok=1
lent=0
for x in $d; do [ "$x" -gt 0 ] && lent=1; done
[ $lent = 1 ] || ok=1
# no agent reported a sanitizer error or crashed (a sanitizer build's reports)
if grep -l -e "ERROR: AddressSanitizer" -e "runtime error:" -e "Segmentation fault" \
	"$tmp"/*.log >"$tmp/bad" 2>/dev/null; then
	ok=1
	echo "# reports in: $(tr '\n' ' ' <"$tmp/bad")"
fi
[ $ok = 0 ] || { echo "# C: got $got want $ref"; [ $py = 0 ] || echo "# Python: got $(cat "$tmp/pysum") want $pyref"; diag "$tmp/c.err"; [ $py = 0 ] || diag "$tmp/py.err"; diag "$tmp/1.log"; }
t $ok "the jobs complete with a run's checksums (C${ppid_:+ and Python}); the restarted peer's workers delivered $d samples"
mh_agents_stop
