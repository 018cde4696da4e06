#!/bin/sh
# The layering rules of docs/DESIGN.md, checked on the tree and the built library.
# TAP on stdout, one test per rule; a failing rule lists its offenders as "# "
# diagnostics. A rule whose tool is missing reports SKIP.
#   1 libgoldminer.so exports gm_* names only, and no command (gm_cli_*, gm_cmd_*)
#   2 no upward includes: core/ includes no simulator header (sim.h, trace.h,
#     cluster.h, profile.h); no library file (core/, sim/, include/goldminer/)
#     includes the commands' cmd.h or cli.h
#   3 no include cycle among include/goldminer/*.h (tsort finds them)
#   4 no function in core/ sim/ cmd/ over 100 lines unless a comment within the 3
#     lines above it says why it must be "one piece"
# It reads the sources only (no compiler): a function is a line that opens with
# "{" alone at column 0 (the repo's clang-format puts a function's brace there and
# no other brace) up to the next "}" at column 0, counted from the first line of
# its signature.
# Env: B (build directory holding libgoldminer.so, default build), LAYOUT_ROOT
# (the tree to check, default this repository: lets a copy be checked).
here=$(cd "$(dirname "$0")" && pwd)
root=${LAYOUT_ROOT:-$(dirname "$here")}
B=${B:-build}
case $B in /*) ;; *) B=$(dirname "$here")/$B ;; esac
MAX_LINES=80
rc=0

ok() { echo "ok $1 - $2"; }
notok() { echo "not ok $1 - $2"; rc=1; }
skip() { echo "not ok $1 # SKIP $2"; }
# diag TEXT: each line of TEXT as a TAP diagnostic
diag() { printf '%s\n' "$1" | sed 's/^/# /'; }

# ---- 1: what the shared library exports
lib=$B/libgoldminer.so
if ! command -v nm >/dev/null 2>&1; then
	skip 1 "exports: nm not found (apt-get install binutils)"
elif [ ! -f "$lib" ]; then
	notok 1 "exports: $lib was not built"
else
	syms=$(nm -D --defined-only "$lib" | awk 'NF >= 3 { print $3 }')
	cmds=$(printf '%s\n' "$syms" | grep '^gm_cli_\|^gm_cmd_')
	other=$(printf '%s\n' "$syms" | grep -v '^gm_\|^$')
	if [ -z "$cmds" ] && [ -z "$other" ]; then
		ok 1 "exports: $(printf '%s\n' "$syms" | grep -c .) symbols, all gm_*, no command"
	else
		notok 1 "exports: libgoldminer.so exports command or non-gm_ symbols"
		[ -n "$cmds" ] && diag "$(printf '%s\n' "$cmds" | sed 's/$/  (a command: it belongs in cmd\/)/')"
		[ -n "$other" ] && diag "$(printf '%s\n' "$other" | sed 's/$/  (not a gm_ name: make it static)/')"
	fi
fi

# ---- 2: no upward includes
# includes FILE...: "file:line: header" for every #include "..." or <goldminer/...>
includes() {
	[ $# = 0 ] && return
	awk '/^[ \t]*#[ \t]*include[ \t]*["<]/ {
		h = $0; sub(/^[^"<]*["<]/, "", h); sub(/[">].*$/, "", h)
		if ($0 ~ /"/ || h ~ /^goldminer\//) { n = split(h, p, "/"); print FILENAME ":" FNR ": " p[n] }
	}' "$@"
}
# files GLOB...: the files the globs name, one a line (an unmatched glob names none)
files() {
	for f in "$@"; do
		[ -f "$f" ] && printf '%s\n' "$f"
	done
}
cd "$root" || exit 1
# The lists below are split on purpose: the repository's file names have no blanks.
core_files=$(files core/*.c core/*.h)
lib_files=$(files core/*.c core/*.h sim/*.c sim/*.h include/goldminer/*.h |
	grep -v '^include/goldminer/cli\.h$')
src_files=$(files core/*.c sim/*.c cmd/*.c)
hdr_files=$(files include/goldminer/*.h)
# shellcheck disable=SC2086
up=$(includes $core_files | grep ': \(sim\|trace\|cluster\|profile\)\.h$' |
	sed 's/$/  (core\/ includes a simulator header)/')
# shellcheck disable=SC2086
clis=$(includes $lib_files | grep ': \(cmd\|cli\)\.h$' |
	sed 's/$/  (the library includes a command header)/')
if [ -z "$up$clis" ]; then
	ok 2 "includes: core/ includes no sim/ header, the library no cmd.h or cli.h"
else
	notok 2 "includes: upward includes"
	diag "$(printf '%s\n%s\n' "$up" "$clis" | grep .)"
fi

# ---- 3: no include cycle among the public headers
if ! command -v tsort >/dev/null 2>&1; then
	skip 3 "include cycles: tsort not found (coreutils)"
else
	# one "a.h b.h" pair per include of b.h by include/goldminer/a.h
	pairs=$(
		# shellcheck disable=SC2086
		includes $hdr_files | sed -n 's#^include/goldminer/\([^:]*\):[0-9]*: \(.*\)$#\1 \2#p' |
		while read -r a b; do
			[ -f "include/goldminer/$b" ] && [ "$a" != "$b" ] && echo "$a $b"
		done)
	loop=$(printf '%s\n' "$pairs" | grep . | tsort 2>&1 >/dev/null)
	if [ -z "$loop" ]; then
		ok 3 "include cycles: none among $(printf '%s\n' "$hdr_files" | grep -c .) headers"
	else
		notok 3 "include cycles: include/goldminer/ headers include each other"
		diag "$loop"
	fi
fi

# ---- 4: functions that fit on a screen
# shellcheck disable=SC2086
long=$(awk -v max="$MAX_LINES" '
	# the name: the first identifier followed by "(" at parenthesis depth 0 that is
	# not __attribute__ (whose ((...)) may come first)
	function fname(from, to,    t, i, c, d, id, last) {
		t = ""
		for (i = from; i < to; i++) t = t " " line[i]
		d = 0; id = ""
		for (i = 1; i <= length(t); i++) {
			c = substr(t, i, 1)
			if (c ~ /[A-Za-z0-9_]/) { id = id c; continue }
			if (id != "") last = id
			id = ""
			if (c == "(") {
				if (d == 0 && last != "__attribute__" && last != "") return last
				d++; last = ""
			} else if (c == ")") {
				d--
			} else if (c !~ /[ \t]/) {
				last = ""
			}
		}
		return "?"
	}
	FNR == 1 { sig = 0; infn = 0; delete line }
	{ line[FNR] = $0 }
	# outside a function: a signature starts at column 0 with a name and runs on
	# over indented lines; a ";" (a declaration), a blank line, a directive, a
	# comment or a closing brace ends the candidate
	!infn && /^\{[ \t]*$/ { infn = 1; start = sig ? sig : FNR; next }
	!infn {
		if ($0 ~ /;[ \t]*$/ || $0 ~ /^$|^#|^\/[*\/]|^ \*|^\*\/|^}/)
			sig = 0
		else if ($0 ~ /^[A-Za-z_]/ && !sig)
			sig = FNR
		next
	}
	infn && /^}/ {
		infn = 0
		n = FNR - start + 1
		if (n > max) {
			name = fname(start, FNR)
			why = 0
			for (i = start - 3; i < start; i++) if (i > 0 && line[i] ~ /one piece/) why = 1
			if (!why) printf "%s:%d: %s is %d lines (over %d) with no \"one piece\" comment above it\n", FILENAME, start, name, n, max
		}
		sig = 0
	}
' $src_files </dev/null)
if [ -z "$long" ]; then
	ok 4 "function length: none over $MAX_LINES lines without a \"one piece\" comment"
else
	notok 4 "function length: $(printf '%s\n' "$long" | grep -c .) functions over $MAX_LINES lines without a reason"
	diag "$long"
fi

echo "1..4"
exit $rc
