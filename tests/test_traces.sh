#!/bin/sh
# traces/download.sh: a local mirror (--from) gives verified traces; a corrupted or
# missing file in the mirror fails naming it and is not left behind; a re-run keeps
# what is already right; bad options are usage errors. TAP on stdout. Uses
# ../shared/traces as the mirror when present (TRACE_MIRROR overrides), else skips
# the mirror cases (the network is never used here).
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
dl="$repo/traces/download.sh"
mirror=${TRACE_MIRROR:-$repo/../shared/traces}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
n=0
fails=0
t() { # t OK DESCRIPTION
	n=$((n + 1))
	if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fails=$((fails + 1)); fi
}
skip() { n=$((n + 1)); echo "ok $n # SKIP $1"; }

sh "$dl" --bogus "$tmp/x" >"$tmp/out" 2>&1
t "$([ $? = 2 ] && grep -q "unknown option '--bogus'" "$tmp/out"; echo $?)" \
	"an unknown option is a usage error naming it"
sh "$dl" --from "$tmp/nonexistent" "$tmp/x" >"$tmp/out" 2>&1
t "$([ $? = 2 ] && grep -q "not a directory" "$tmp/out"; echo $?)" "--from a missing directory is refused"

if [ ! -f "$mirror/SHA256SUMS" ]; then
	for w in "verified copy" "re-run keeps files" "corrupted file" "missing file"; do
		skip "no trace mirror at $mirror ($w)"
	done
else
	sh "$dl" --from "$mirror" "$tmp/t" >"$tmp/out" 2>&1
	rc=$?
	good=1
	(cd "$tmp/t" && sha256sum -c --quiet "$repo/traces/SHA256SUMS") >/dev/null 2>&1 && good=0
	t "$([ $rc = 0 ] && [ $good = 0 ]; echo $?)" "--from MIRROR: every listed file arrives and matches SHA256SUMS"
	sh "$dl" --from "$mirror" "$tmp/t" >"$tmp/out" 2>&1
	rc=$?
	t "$([ $rc = 0 ] && [ "$(grep -c 'already here' "$tmp/out")" = "$(wc -l <"$repo/traces/SHA256SUMS")" ]; echo $?)" \
		"a re-run keeps the files that match"
	# A mirror with one corrupted and one missing file.
	mkdir -p "$tmp/m"
	cp -r "$mirror/." "$tmp/m/"
	chmod -R u+w "$tmp/m"
	echo "corrupt" >>"$tmp/m/philly-pollux/philly.csv"
	rm -f "$tmp/t/philly-pollux/philly.csv"
	sh "$dl" --from "$tmp/m" "$tmp/t" >"$tmp/out" 2>&1
	rc=$?
	t "$([ $rc = 1 ] && grep -q "philly.csv: sha256 differs" "$tmp/out" &&
		[ ! -e "$tmp/t/philly-pollux/philly.csv" ]; echo $?)" \
		"a corrupted file fails the run, is named and is removed"
	rm -f "$tmp/m/alibaba-gpu-v2023/openb_pod_list_cpu050.csv" "$tmp/t/alibaba-gpu-v2023/openb_pod_list_cpu050.csv"
	sh "$dl" --from "$tmp/m" "$tmp/t" >"$tmp/out" 2>&1
	t "$([ $? = 1 ] && grep -q "openb_pod_list_cpu050.csv: missing in the mirror" "$tmp/out"; echo $?)" \
		"a file missing in the mirror fails the run and is named"
fi
echo "1..$n"
[ "$fails" = 0 ]
