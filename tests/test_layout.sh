#!/bin/sh
# The layering rules of docs/DESIGN.md, checked on the tree and the built library.
# TAP on stdout, one test per rule; a failing rule lists its offenders as "# "
# diagnostics. A rule whose tool is missing reports SKIP.
#   1 libgoldminer.so exports gm_* names only, and no command (gm_cli_*, gm_cmd_*)
#   2 no upward includes: core/ includes no simulator header (sim.h, trace.h,
#     cluster.h, profile.h); no library file (core/, sim/, include/goldminer/)
#     includes the commands' cmd.h or cli.h
#   3 no new circle in the module graph (tests/include_graph.py): a module (a source
#     file with the headers named for it, or a Python module of python/goldminer)
#     points to each module whose header one of its files includes, a header to
#     the module that defines a function or variable it declares, a Python module
#     to each it imports; the circles are the listed ones, each still a circle
#   4 no function in core/ sim/ cmd/ over 80 lines unless a comment within the 3
#     lines above it says why it must be "one piece"
#   5 every module test tests/test_NAME.c names a module: a source file or header
#     NAME.c / NAME.h in core/ sim/ cmd/ include/goldminer/ (or a folder below
#     core/ or tests/), or it is one of the exceptions listed with their reason
#   6 every source file (core/ sim/ cmd/ include/goldminer/ tests/test_*.c) opens
#     with its comment block (what it is for, the idea, what it does not do)
#   7 every library source file (core/, sim/) has a caller in the product: a
#     function it defines is named in another file of core/ sim/ cmd/ or python/
#     than it and its header (a module only tests and benches use belongs beside
#     them in tests/)
#   8 no file of the tree (code, tests, traces, plots, deploy/, docs, README,
#     Makefile) cites an issue by its number ("issue N"): a reader of the
#     repository has no such tracker; say what the thing is instead
# The source rules read the sources only (no compiler). A function is a line that
# opens with "{" alone at column 0 (the repo's clang-format puts a function's brace
# there and no other brace) up to the next "}" at column 0, counted from the first
# line of its signature; a declaration or definition starts at column 0 and is
# not static. A module is the files named for it: NAME.c, NAME.h, and NAME_*.c
# (remote_load.c is remote's).
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
# (core/*/: a module of several files, such as the remote plugin's, in a folder)
core_files=$(files core/*.c core/*.h core/*/*.c core/*/*.h)
lib_files=$(files core/*.c core/*.h core/*/*.c core/*/*.h sim/*.c sim/*.h include/goldminer/*.h |
	grep -v '^include/goldminer/cli\.h$')
src_files=$(files core/*.c core/*/*.c sim/*.c cmd/*.c)
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

# ---- 3: no new circle in the module graph
# The circles the tree has, each by its modules (tests/include_graph.py names them;
# docs/DESIGN.md section 2 says why each is there). A new one, or one of these
# gone, fails the rule: change this list and DESIGN together.
allowed_circles='# aug.c includes aug_simd.h and jitter.h; both include aug.h (gm_f32_to_f16, struct gm_aug)
core/aug core/aug_simd core/jitter
# agent.h declares the home, Python home and lender functions; each of them includes agent.h
core/remote/agent core/remote/home core/remote/lender core/remote/pyhome
# conn.c calls the UCX port guard of ctl.c (ctl.h), ctl.h includes conn.h (struct conn, gm_remote_net)
core/remote/conn core/remote/ctl
# worker.h declares gm_remote_pywork_main (pywork.c); pywork.c includes worker.h
core/remote/pywork core/remote/worker
# the seam sim_policy.h: the engine reads sim_policies (policies.c), a policy calls sim_fail, sim_set_rate (sim.c)
sim/policies sim/sim
# the seam pool_impl.h: the coordinator (pool.c) calls gm_pool_spawn and the zygote calls (spawn.c), which make the workers of struct gm_pool
core/pool core/spawn
# torch.py imports plan (goldminer.torch.plan), plan.py imports torch lazily (its Loader)
python/goldminer/plan.py python/goldminer/torch.py'
if ! command -v python3 >/dev/null 2>&1; then
	skip 3 "module circles: python3 not found (apt-get install python3)"
else
	list=$(mktemp)
	printf '%s\n' "$allowed_circles" >"$list"
	out=$(python3 "$here/include_graph.py" --check "$list" "$root" 2>&1)
	st=$?
	rm -f "$list"
	if [ $st = 0 ]; then
		ok 3 "module circles: $out"
	else
		notok 3 "module circles: not the $(printf '%s\n' "$allowed_circles" | grep -vc '^#') listed in this rule"
		diag "$out"
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

# ---- 5: a module test names its module
# The tests named for a behaviour of several modules together, with the reason.
test_exceptions='chaos	crash safety (contract 2): workers SIGKILLed at random under a loader (loader, pool, ring)
lease	the lease deadline: the ring'"'"'s lease word and the pool'"'"'s watch of it, through a loader'
untested=''
for t in $(files tests/test_*.c); do
	name=${t#tests/test_}
	name=${name%.c}
	# (test_FOLDER_MODULE names core/FOLDER/MODULE.c, e.g. test_remote_check)
	found=$(files core/"$name".[ch] core/*/"$name".[ch] core/"$(echo "$name" | sed 's#_#/#')".[ch] \
		sim/"$name".[ch] cmd/"$name".[ch] include/goldminer/"$name".h tests/*/"$name".[ch])
	[ -n "$found" ] && continue
	printf '%s\n' "$test_exceptions" | grep -q "^$name	" && continue
	untested="$untested$t: no module $name (core/ sim/ cmd/ include/goldminer/ tests/*/), and not an exception
"
done
if [ -z "$untested" ]; then
	ok 5 "module tests: each tests/test_NAME.c names a module or a listed exception"
else
	notok 5 "module tests: tests named for no module"
	diag "$(printf '%s' "$untested")"
fi

# ---- 6: every file says what it is for
tree_files=$(files core/*.c core/*.h core/*/*.c core/*/*.h sim/*.c sim/*.h cmd/*.c cmd/*.h \
	include/goldminer/*.h)
# shellcheck disable=SC2086
bare=$(for f in $tree_files $(files tests/test_*.c); do
	head -n 1 "$f" | grep -q '^/\*' || echo "$f: does not open with its comment block"
done)
if [ -z "$bare" ]; then
	ok 6 "file comments: every source file opens with its comment block"
else
	notok 6 "file comments: files without their opening comment"
	diag "$bare"
fi

# ---- 7: every library file has a caller in the product
# defs FILE: the non-static gm_ functions FILE defines, one a line
defs() {
	awk '/^[A-Za-z_]/ && !/^static/ && !/;[ \t]*$/ && match($0, /gm_[A-Za-z0-9_]+\(/) {
		print substr($0, RSTART, RLENGTH - 1) }' "$1" | sort -u
}
# the product: the library, the commands and the Python binding
product=$(files core/*.c core/*.h core/*/*.c core/*/*.h sim/*.c sim/*.h cmd/*.c cmd/*.h \
	include/goldminer/*.h python/goldminer/*.py)
orphans=''
for f in $(files core/*.c core/*/*.c sim/*.c); do
	m=${f##*/}
	m=${m%.c}
	names=$(defs "$f")
	[ -z "$names" ] && continue
	# every file of the product but this one and its headers (a command of the
	# same name, cmd/NAME.c, is a caller)
	others=$(printf '%s\n' "$product" | grep -vxF -e "$f" -e "${f%.c}.h" -e "include/goldminer/$m.h")
	# shellcheck disable=SC2086
	printf '%s\n' "$names" | grep -qwF -f - $others ||
		orphans="$orphans$f: none of its functions is called outside tests/ (move it beside its users)
"
done
if [ -z "$orphans" ]; then
	ok 7 "callers: every library file has a caller in core/ sim/ cmd/ or python/"
else
	notok 7 "callers: library files that only tests and benches use"
	diag "$(printf '%s' "$orphans")"
fi

# ---- 8: no issue numbers
cited=$(cd "$root" && grep -rnIE '(^|[^-[:alnum:]])[Ii]ssues? #?[0-9]' --exclude-dir='build*' \
	core cmd include python sim tests traces plots deploy docs .ci Makefile README.md 2>/dev/null)
if [ -z "$cited" ]; then
	ok 8 "no issue numbers: nothing in the tree cites an issue by its number"
else
	notok 8 "issue numbers: say what the thing is instead of its issue's number"
	diag "$cited"
fi

echo "1..8"
exit $rc
