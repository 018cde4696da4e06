#!/bin/sh
# Run test binaries (cmocka, TAP output) and scripts (tests/*.sh or .py that print
# TAP) and end with one line: "N passed, N failed, N skipped".
# A binary that dies without reporting, or exits non-zero with no failing case,
# counts as one failure. Env: B (build directory), TEST_TIMEOUT (seconds one
# binary or script may run, default 600), TEST_BIN_TIMEOUT (the same for a cmocka
# binary only, default TEST_TIMEOUT), TEST_RETRY_TIMEOUT (how many times one that
# timed out runs again, default 0), TEST_RETRY_FAIL (how many times one that failed
# runs again, default 0), TEST_BACKGROUND (names of tests that a second
# lane runs first, in the background: default test_remote.sh, whose minutes are
# mostly waits on its hosts' CPU quotas and deadlines; empty: one lane, everything
# in order), TEST_FIRST (names the first lane runs first: default test_python.sh,
# the next longest, so that it does not start last). Then each lane takes the
# next test no lane took, the first from the front of the list, the second from
# its back, so that both end about together (two tests at most run at once).
# "ok N # SKIP" and "not ok N # SKIP" are skips. The first lane's tests are
# reported as they end, the second's last.
pass=0 fail=0 skip=0
log=${B:-build}/test-logs
mkdir -p "$log"
background=${TEST_BACKGROUND-test_remote.sh}

# run_one T: run T (again after a timeout, as TEST_RETRY_TIMEOUT says); its TAP
# in $log/NAME.out, and "PASSED FAILED SKIPPED SECONDS EXIT" in $log/NAME.res
run_one() {
	name=$(basename "$1")
	start=$(date +%s)
	limit=${TEST_TIMEOUT:-600}
	case $name in *.sh | *.py) ;; *) limit=${TEST_BIN_TIMEOUT:-$limit} ;; esac
	CMOCKA_MESSAGE_OUTPUT=TAP timeout "$limit" "$1" >"$log/$name.out" 2>&1
	rc=$?
	# A binary that timed out runs again, up to TEST_RETRY_TIMEOUT more times (make
	# tsan and make sanitize: a worker forked from a multi-threaded process can
	# deadlock inside the sanitizer's own runtime, see the Makefile). The log of the
	# last timeout is kept as NAME.timeout.out.
	tries=0
	while [ "$rc" = 124 ] && [ "$tries" -lt "${TEST_RETRY_TIMEOUT:-0}" ]; do
		tries=$((tries + 1))
		echo "note $name timed out after ${limit}s; running it again ($tries of ${TEST_RETRY_TIMEOUT})"
		again "$1" timeout
	done
	count
	# One that failed runs again, up to TEST_RETRY_FAIL times (make sanitize: once;
	# its time bounds, beside the other lane on two cores under ASan, are the
	# likeliest to miss): the run that counts is the last, the first's log is
	# kept as NAME.failed.out and the report says it failed first. A failure
	# that repeats still fails.
	tries=0
	while [ "$f" != 0 ] && [ "$tries" -lt "${TEST_RETRY_FAIL:-0}" ]; do
		tries=$((tries + 1))
		echo "note $name failed ($f); running it again ($tries of ${TEST_RETRY_FAIL})"
		again "$1" failed
		count
	done
	echo "$p $f $s $(($(date +%s) - start)) $rc" >"$log/$name.res"
}

# again T KEPT: T run again (run_one's name, limit), its last log kept as
# NAME.KEPT.out; rc its status
again() {
	mv "$log/$name.out" "$log/$name.$2.out"
	CMOCKA_MESSAGE_OUTPUT=TAP timeout "$limit" "$1" >"$log/$name.out" 2>&1
	rc=$?
}

# count: p, f, s (passed, failed, skipped) from $log/$name.out and rc
count() {
	p=$(grep '^ok ' "$log/$name.out" | grep -vc '# SKIP')
	s=$(grep -c '^\(not \)\{0,1\}ok [0-9]* # SKIP' "$log/$name.out")
	f=$(grep '^not ok [0-9]' "$log/$name.out" | grep -vc '# SKIP')
	if [ "$rc" != 0 ] && [ "$f" = 0 ]; then f=1; fi
	if [ "$rc" = 0 ] && [ "$p" = 0 ] && [ "$s" = 0 ]; then f=$((f + 1)); fi
	# Sanitizer reports from forked workers do not fail the parent's cases: count them.
	if grep -q 'ERROR: AddressSanitizer\|ERROR: LeakSanitizer\|runtime error:\|WARNING: ThreadSanitizer' \
		"$log/$name.out"; then
		f=$((f + 1))
	fi
}

# report T: T's line (and its failures' output), added to the totals
report() {
	name=$(basename "$1")
	read -r p f s el rc <"$log/$name.res" || { p=0 f=1 s=0 el="?" rc="?"; }
	pass=$((pass + p)) fail=$((fail + f)) skip=$((skip + s))
	if [ "$f" != 0 ]; then
		echo "FAIL $name ($p passed, $f failed, $s skipped, ${el}s, exit $rc)"
		sed 's/^/    /' "$log/$name.out" | grep -v '^    ok ' | tail -40
	else
		echo "ok   $name ($p passed, $s skipped, ${el}s)"
		grep '^\(not \)\{0,1\}ok [0-9]* # SKIP' "$log/$name.out" | sed 's/^/    /'
	fi
	if [ -f "$log/$name.failed.out" ]; then # (run_one: TEST_RETRY_FAIL)
		echo "    failed first, then ran again; the first run's failures ($log/$name.failed.out):"
		{
			grep '^not ok' "$log/$name.failed.out" | grep -v '# SKIP' | head -5
			grep -m 3 'ERROR: AddressSanitizer\|ERROR: LeakSanitizer\|runtime error:\|WARNING: ThreadSanitizer' \
				"$log/$name.failed.out"
		} | sed 's/^/      /'
	fi
}

# claim T: true for the one lane that takes T (mkdir is atomic)
claim() { mkdir "$log/claims/$(basename "$1")" 2>/dev/null; }
listed() { case " $1 " in *" $(basename "$2") "*) return 0 ;; esac; return 1; }

rm -rf "$log/claims"
mkdir -p "$log/claims"
bg=
for t in "$@"; do
	rm -f "$log/$(basename "$t").res" "$log/$(basename "$t").failed.out"
	listed "$background" "$t" && claim "$t" && bg="$bg $t"
done
if [ -z "$bg" ]; then # one lane (make tsan's list, or TEST_BACKGROUND empty)
	for t in "$@"; do
		run_one "$t"
		report "$t"
	done
else
	# the second lane: its own tests, then the others from the back of the list
	(
		# shellcheck disable=SC2086 # lists of paths
		for t in $bg; do run_one "$t"; done
		back=
		for t in "$@"; do back="$t $back"; done
		# shellcheck disable=SC2086
		for t in $back; do claim "$t" && run_one "$t"; done
	) &
	lane2=$!
	# the first lane: TEST_FIRST's, then the others from the front
	mine=
	for t in "$@"; do
		{ listed "${TEST_FIRST-test_python.sh}" "$t" && claim "$t"; } || continue
		run_one "$t"
		report "$t"
		mine="$mine $(basename "$t")"
	done
	for t in "$@"; do
		claim "$t" || continue
		run_one "$t"
		report "$t"
		mine="$mine $(basename "$t")"
	done
	wait "$lane2"
	for t in "$@"; do listed "$mine" "$t" || report "$t"; done
fi
# The failures again, last, by name with their first "not ok" lines: a log
# that is cut in the middle (CI shows its head and tail) still names them.
if [ "$fail" != 0 ]; then
	for t in "$@"; do
		name=$(basename "$t")
		read -r _ f _ _ rc <"$log/$name.res" 2>/dev/null || f=1 rc="?"
		[ "$f" != 0 ] || continue
		echo "failed: $name (exit $rc)"
		{
			grep '^not ok' "$log/$name.out" | grep -v '# SKIP' | head -5
			grep -m 3 'ERROR: AddressSanitizer\|ERROR: LeakSanitizer\|runtime error:\|WARNING: ThreadSanitizer' \
				"$log/$name.out"
		} 2>/dev/null | sed 's/^/    /'
	done
fi
for t in "$@"; do # and the ones that passed when run again (TEST_RETRY_FAIL)
	name=$(basename "$t")
	read -r _ f _ _ _ <"$log/$name.res" 2>/dev/null || f=1
	if [ "$f" != 0 ] || [ ! -f "$log/$name.failed.out" ]; then continue; fi
	echo "failed once, passed when run again: $name"
	grep '^not ok' "$log/$name.failed.out" | grep -v '# SKIP' | head -3 | sed 's/^/    /'
done
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ]
