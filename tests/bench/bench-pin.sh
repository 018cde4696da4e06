#!/bin/sh
# One CPU under a small quota (include/goldminer/host.h, GM_HOST_PIN_CORES): a
# host of PIN_CORES (0.2) core, its node agent (--cpus 1, as the cluster
# bench's poor hosts) and three greedy trainers started together on it, each
# one epoch of the real photos (PHOTOS), the agent with GM_WORKER_CPU=off
# (its workers on any CPU) and then auto (on one CPU), alternating, PIN_ROUNDS
# (3) times, under a quota period of each of PIN_PERIODS_US ("20000 100000":
# the cluster bench's, and the kernel's default). Per run: each trainer's
# img/s (its images over its wall time), the spread (the slowest trainer's
# wall over the fastest's: 1 is a fair share), the three's img/s together (all
# images over the last one's end) and the host's CPU per image (its cgroup);
# then, per period, the medians and the ratios auto over off. Needs root for
# the cgroup (elsewhere: skipped, said) and two CPUs. Env: B, PHOTOS,
# PIN_ROUNDS, PIN_CORES, PIN_PERIODS_US.
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
B=${B:-build}
case $B in /*) ;; *) B=$repo/$B ;; esac
G="$B/goldminer"
: "${PHOTOS:?PHOTOS must name an ImageFolder directory}"
ROUNDS=${PIN_ROUNDS:-3}
CORES=${PIN_CORES:-0.2}
PERIODS=${PIN_PERIODS_US:-20000 100000}
if [ "$(getconf _NPROCESSORS_ONLN)" -lt 2 ]; then
	echo "pin: skipped (one CPU online: nothing to confine to)"
	exit 0
fi
tmp=$(mktemp -d)
# shellcheck source=tests/multihost.sh
. "$repo/tests/multihost.sh"
MH_ATEXIT="rm -rf '$tmp'"
mh_setup 1
if [ "$MH_CGROUP" = none ] || [ -z "$(mh_usage 1)" ]; then
	echo "pin: skipped (needs a CPU quota and CPU accounting: cgroup $MH_CGROUP)"
	exit 0
fi
NIMG=$(find "$PHOTOS" -type f -iname '*.jp*g' | wc -l)
echo "pin: $CORES core, 3 trainers of one epoch ($NIMG photos) each, $ROUNDS round(s) per period" \
	"($PERIODS us); load before: $(uptime | sed 's/.*load/load/')"

# run MODE PERIOD: one run, a line "MODE PERIOD rate1 rate2 rate3 spread all us"
run() {
	MH_PERIOD=$2
	export GM_WORKER_CPU="$1"
	mh_agent 1 "$CORES" "$tmp/a.sock" --cpus 1 --quiet >"$tmp/agent.log" 2>&1 ||
		{ echo "pin: the agent did not start:"; cat "$tmp/agent.log"; return 1; }
	unset GM_WORKER_CPU
	u0=$(mh_usage 1)
	t0=$(date +%s.%N)
	pids=
	for k in 1 2 3; do
		# shellcheck disable=SC2016 # the inner shell's
		mh_spawn 1 - sh -c '"$@" >"$0.json" 2>"$0.err"; date +%s.%N >"$0.end"' "$tmp/t$k" \
			"$G" bench "$PHOTOS" --node "$tmp/a.sock" --workers 8 --batch 32 --epochs 1 --quiet
		pids="$pids $MH_PID"
	done
	for p in $pids; do wait "$p"; done
	u1=$(mh_usage 1)
	mh_agents_stop
	rm -f "$tmp/a.sock"
	for k in 1 2 3; do
		img=$(sed -n 's/.*"images": \([0-9]*\).*/\1/p' "$tmp/t$k.json")
		[ -n "$img" ] || { echo "pin: trainer $k failed:"; cat "$tmp/t$k.err"; return 1; }
		echo "$img $(cat "$tmp/t$k.end")"
	done | awk -v m="$1" -v p="$2" -v t0="$t0" -v u="$((u1 - u0))" '
		{ img += $1; w = $2 - t0; r[NR] = $1 / w; if (w > last) last = w
		  if (NR == 1 || w < lo) lo = w; if (w > hi) hi = w }
		END { printf "%s %d %.1f %.1f %.1f %.3f %.1f %.0f\n", m, p, r[1], r[2], r[3], hi / lo,
			img / last, u / 1e3 / img }' >>"$tmp/runs"
	tail -1 "$tmp/runs" | awk '{ printf "pin: period %d us, GM_WORKER_CPU=%s: trainers %s %s %s img/s, spread %sx, together %s img/s, %s us of CPU an image\n", $2, $1, $3, $4, $5, $6, $7, $8 }'
}

rc=0
for period in $PERIODS; do
	r=1
	while [ $r -le "$ROUNDS" ]; do
		run off "$period" || rc=1
		run auto "$period" || rc=1
		r=$((r + 1))
	done
done
# per period: the medians each way, and auto over off
awk '
	function med(a, n,    i, k, t) { for (i = 2; i <= n; i++) for (k = i; k > 1 && a[k - 1] > a[k]; k--) { t = a[k]; a[k] = a[k - 1]; a[k - 1] = t }
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
	{ key = $2 " " $1; n[key]++; s[key, n[key]] = $6; t[key, n[key]] = $7; c[key, n[key]] = $8; per[$2] = 1 }
	END { for (p in per) {
		for (m = 0; m < 2; m++) { key = p " " (m ? "auto" : "off"); k = n[key]
			for (i = 1; i <= k; i++) { a[i] = s[key, i] } S[m] = med(a, k)
			for (i = 1; i <= k; i++) { a[i] = t[key, i] } T[m] = med(a, k)
			for (i = 1; i <= k; i++) { a[i] = c[key, i] } C[m] = med(a, k) }
		printf "pin: period %d us (medians): spread %.2fx off, %.2fx on one CPU; together %.0f -> %.0f img/s (x%.2f); %.0f -> %.0f us of CPU an image (x%.2f)\n",
			p, S[0], S[1], T[0], T[1], T[1] / T[0], C[0], C[1], C[1] / C[0] } }' "$tmp/runs"
exit $rc
