#!/bin/sh
# Every committed fuzz input (tests/fuzz/corpus/NAME/*) through its target once,
# with the replay build of the target ($B/fuzz/fuzz_NAME; under make sanitize with
# ASan+UBSan). A crash or a sanitizer report fails. TAP on stdout. fuzz_ctl (the
# remote plugin's control port) needs UCX's headers: a UCX=0 build skips it.
here=$(cd "$(dirname "$0")" && pwd)
B=${B:-build}
n=0 rc=0
for src in "$here"/fuzz/fuzz_*.c; do
	t=$(basename "$src" .c)
	c=${t#fuzz_}
	n=$((n + 1))
	if [ "$t" = fuzz_ctl ] && grep -q ' UCX=0 ' "$B/build-flags" 2>/dev/null; then
		echo "ok $n # SKIP $t: built without UCX (UCX=0)"
		continue
	fi
	if [ ! -x "$B/fuzz/$t" ]; then
		echo "not ok $n - $t: $B/fuzz/$t was not built"
		rc=1
		continue
	fi
	files=$(find "$here/fuzz/corpus/$c" -mindepth 1 -maxdepth 1 ! -name '.*' 2>/dev/null | wc -l)
	if [ "$files" = 0 ]; then
		echo "not ok $n - $t: no corpus in tests/fuzz/corpus/$c"
		rc=1
		continue
	fi
	if out=$("$B/fuzz/$t" "$here/fuzz/corpus/$c" 2>&1); then
		echo "ok $n - $t: $files corpus inputs, no crash"
	else
		echo "not ok $n - $t: failed on the corpus"
		printf '%s\n' "$out" | grep -v '^ok ' | tail -30 | sed 's/^/# /'
		rc=1
	fi
done
echo "1..$n"
exit $rc
