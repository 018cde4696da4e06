#!/bin/sh
# The Makefile's own promises, checked on a built tree with make's question and
# dry-run modes (-q, -n: nothing is rebuilt, nothing written). TAP on stdout.
#   1 an identical make rebuilds nothing (make -q all answers "up to date")
#   2 a change of CFLAGS rebuilds the objects and the binaries; so does one of
#     LDFLAGS, CUDA or UCX; -q/-n leave the flags stamp as it was; CFLAGS from
#     the environment reaches a sub-make as the caller gave it (not with the
#     Makefile's flags added twice)
#   3 make clean removes every build folder the Makefile makes (the B= of its
#     sub-makes and the default B), and another B only when a build made it
#   4 without a library the build needs, make stops before compiling with one
#     line naming the package and `make deps` (a fake pkg-config that knows
#     no liburing; PKG_CONFIG naming no program: pkg-config itself is named)
#   5 the remote-workers plugin needs libgoldminer.so (DT_NEEDED) and defines no
#     function of the library itself (nm)
#   6 the goldminer binary needs libgoldminer.so and carries none of its
#     functions; an agent that loads the plugin holds one libgoldminer, the one
#     in B (ldd, LD_DEBUG=files)
# Run from make test, make's MAKEFLAGS carry the build's own variables (make
# sanitize's CFLAGS...): the sub-makes here see the same ones. If B is not built,
# it is built once first. Env: B (build dir, default build).
# (a parallel make's jobserver is not: its descriptors are not ours, and a sub-make
# told of them warns "jobserver unavailable" on the line check 4 reads)
MAKEFLAGS=$(printf '%s' "${MAKEFLAGS:-}" | sed 's/--jobserver-[a-z]*=[^ ]*//g; s/\(^\| \)-j[0-9]*/\1/g')
export MAKEFLAGS
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
B=${B:-build}
case $B in /*) Babs=$B ;; *) Babs=$repo/$B ;; esac
tmp=$(mktemp -d)
agent=""
trap '[ -n "$agent" ] && kill "$agent" 2>/dev/null; rm -rf "$tmp"' EXIT INT TERM
n=0
fails=0
t() { # t STATUS DESCRIPTION
	n=$((n + 1))
	if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fails=$((fails + 1)); fi
}
skip() { n=$((n + 1)); echo "not ok $n # SKIP $1"; }
diag() { sed 's/^/# /' "$1"; }
m() { make --no-print-directory -C "$repo" B="$B" "$@"; }

if ! m -q all 2>/dev/null; then
	echo "# $B is not built (or not with these flags): building it once"
	m -s all >"$tmp/build.log" 2>&1 || { diag "$tmp/build.log"; echo "Bail out! make all failed"; exit 1; }
fi
stamp=$Babs/build-flags
cp "$stamp" "$tmp/stamp" 2>/dev/null

# ---- 1: an identical make does nothing
m -q all
q=$?
m -n all >"$tmp/n.out" 2>&1
t "$([ $q = 0 ] && ! grep -q ' -c -o \| -o .*goldminer' "$tmp/n.out"; echo $?)" \
	"an identical make rebuilds nothing (make -q all: $q, make -n all: $(grep -c . "$tmp/n.out") lines)"
[ $q = 0 ] || diag "$tmp/n.out"

# ---- 2: a change of what the objects are built with rebuilds them
m -n CFLAGS="-O0 -g" all >"$tmp/cflags.out" 2>&1
m -q CFLAGS="-O0 -g" all
q=$?
miss=""
for o in core/ring.o cmd/main.o; do
	grep -q -- "-O0 -g .*-c -o $B/$o" "$tmp/cflags.out" || miss="$miss $o"
done
grep -q -- "-o $B/libgoldminer.so " "$tmp/cflags.out" || miss="$miss libgoldminer.so"
grep -q -- "-o $B/goldminer " "$tmp/cflags.out" || miss="$miss goldminer"
others=""
cuda=$(sed -n 's/.* CUDA=\([01]\) .*/\1/p' "$stamp" 2>/dev/null)
ucx=$(sed -n 's/.* UCX=\([01]\) .*/\1/p' "$stamp" 2>/dev/null)
for v in "LDFLAGS=-Wl,-O1" "CUDA=$((1 - ${cuda:-0}))" "UCX=$((1 - ${ucx:-0}))"; do
	m -q "$v" all 2>/dev/null && others="$others $v"
done
t "$([ $q = 1 ] && [ -z "$miss$others" ] && cmp -s "$stamp" "$tmp/stamp"; echo $?)" \
	"CFLAGS=-O0 rebuilds the objects and binaries (make -q: $q${miss:+; not rebuilt:$miss}); LDFLAGS, CUDA, UCX changes rebuild${others:+ (not:$others)}; the stamp is untouched"
[ -z "$miss" ] || diag "$tmp/cflags.out"

# ---- 2, continued: CFLAGS in the environment, seen by make and by a sub-make
# shellcheck disable=SC2016 # $($*) and $(MAKE) are make's
pr='gm-print-%: ; @echo $($*)'
top=$(CFLAGS='-O1 -g' m -s --eval "$pr" gm-print-CFLAGS 2>&1)
# shellcheck disable=SC2016
sub=$(CFLAGS='-O1 -g' m -s --eval "$pr" --eval 'gm-sub: ; @$(MAKE) -s --no-print-directory gm-print-CFLAGS' gm-sub 2>&1)
t "$(case $top in '-O1 -g '*) [ "$top" = "$sub" ] ;; *) false ;; esac; echo $?)" \
	"CFLAGS='-O1 -g' in the environment: a sub-make builds with what make does ($(echo "$sub" | grep -o -- '-std=c11' | wc -l) x -std=c11)"
[ "$top" = "$sub" ] || printf '# make:     %s\n# sub-make: %s\n' "$top" "$sub"

# ---- 3: make clean's list against the build folders
# every B= of the Makefile's sub-makes (a variable's value or a literal) and B's default
# shellcheck disable=SC2016 # $($*) is make's, not the shell's
mkvar() { make --no-print-directory -C "$repo" -s DEPS_CHECK=0 --eval 'gm-print-%: ; @echo $($*)' "gm-print-$1"; }
dirs=$(sed -n 's/^B ?= *//p' "$repo/Makefile")
words=$(grep -o 'B=[^ ]*' "$repo/Makefile" | sed 's/^B=//' | sort -u)
for w in $words; do
	case $w in
	*'$'*) # a make variable: its value, unless it is B itself (the caller's folder)
		# shellcheck disable=SC2016 # $(NAME) is make's
		v=$(echo "$w" | sed -n 's/^\$(\([A-Za-z_]*\))$/\1/p')
		[ -n "$v" ] && [ "$v" != B ] && dirs="$dirs $(mkvar "$v")" ;;
	*) dirs="$dirs $w" ;;
	esac
done
cl=$(make --no-print-directory -C "$repo" -n clean)
left=""
for d in $dirs; do
	echo " $cl " | grep -q " $d " || left="$left $d"
done
mkdir -p "$tmp/made" "$tmp/other"
: >"$tmp/made/build-flags"
withb=$(make --no-print-directory -C "$repo" -n B="$tmp/made" clean)
without=$(make --no-print-directory -C "$repo" -n B="$tmp/other" clean)
t "$([ -n "$dirs" ] && [ -z "$left" ] && echo "$withb" | grep -q "$tmp/made" &&
	! echo "$without" | grep -q "$tmp/other"; echo $?)" \
	"make clean removes every build folder ($(echo "$dirs" | tr -s ' ' ',')${left:+; left:$left}), another B only if a build made it"

# ---- 4: missing libraries are named before anything compiles
cat >"$tmp/pkg-config" <<'EOF'
#!/bin/sh
# pkg-config that has never heard of liburing
for a; do [ "$a" = liburing ] && exit 1; done
exec pkg-config "$@"
EOF
chmod +x "$tmp/pkg-config"
m -n PKG_CONFIG="$tmp/pkg-config" all >"$tmp/deps.out" 2>"$tmp/deps.err"
rc=$?
m -n PKG_CONFIG="$tmp/none" all >/dev/null 2>"$tmp/nopc.err"
rc2=$?
t "$([ $rc != 0 ] && [ "$(grep -c . "$tmp/deps.err")" = 1 ] && [ ! -s "$tmp/deps.out" ] &&
	grep -q 'goldminer: missing build dependencies: liburing-dev (run: make deps)' "$tmp/deps.err" &&
	[ $rc2 != 0 ] && grep -q 'dependencies: pkg-config .*(run: make deps)' "$tmp/nopc.err"; echo $?)" \
	"make without liburing stops at once: $(cat "$tmp/deps.err")"
[ -s "$tmp/deps.out" ] && diag "$tmp/deps.out"

# ---- 5: the plugin links the library, it does not carry a copy
nm -D --defined-only "$Babs/libgoldminer.so" | awk 'NF >= 3 { print $3 }' | sort -u >"$tmp/lib.syms"
plugin=$Babs/libgoldminer-remote.so
if [ ! -f "$plugin" ]; then
	skip "the remote-workers plugin: not built (UCX=0 or UCX missing)"
else
	needed=$(readelf -d "$plugin" | sed -n 's/.*(NEEDED).*\[\(libgoldminer\.so[^]]*\)\].*/\1/p')
	nm --defined-only "$plugin" | awk 'NF >= 3 { print $3 }' | sort -u >"$tmp/plugin.syms"
	dup=$(comm -12 "$tmp/lib.syms" "$tmp/plugin.syms" | grep '^gm_')
	t "$([ -n "$needed" ] && [ -z "$dup" ]; echo $?)" \
		"the plugin needs ${needed:-no libgoldminer} and defines $(echo "$dup" | grep -c .) of the library's functions"
	[ -z "$dup" ] || echo "$dup" | head -5 | sed 's/^/# defined in the plugin: /'
fi

# ---- 6: the binary links the library; an agent with the plugin holds one copy
g=$Babs/goldminer
libpath=$(ldd "$g" | awk '$1 ~ /^libgoldminer\.so/ { print $3 }')
nm --defined-only "$g" | awk 'NF >= 3 { print $3 }' | sort -u >"$tmp/bin.syms"
dup=$(comm -12 "$tmp/lib.syms" "$tmp/bin.syms" | grep '^gm_')
same=1
[ -n "$libpath" ] && [ "$(readlink -f "$libpath")" = "$(readlink -f "$Babs/libgoldminer.so")" ] && same=0
loaded="no plugin to load"
if [ $same = 0 ] && [ -z "$dup" ] && [ -f "$plugin" ]; then
	head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/secret"
	chmod 600 "$tmp/secret"
	LD_DEBUG=files LD_DEBUG_OUTPUT="$tmp/ld" "$g" node --socket "$tmp/a.sock" \
		--listen 127.0.0.1:0 --secret "$tmp/secret" >"$tmp/node.log" 2>&1 &
	agent=$!
	i=0
	while [ $i -lt 100 ] && ! grep -q "listening for peers" "$tmp/node.log"; do
		sleep 0.1
		i=$((i + 1))
	done
	kill "$agent" 2>/dev/null
	wait "$agent" 2>/dev/null
	agent=""
	maps=$(cat "$tmp"/ld.* 2>/dev/null | grep 'generating link map' | grep -c 'file=[^ ]*libgoldminer\.so')
	plug=$(cat "$tmp"/ld.* 2>/dev/null | grep -c 'file=[^ ]*libgoldminer-remote\.so.*generating link map')
	loaded="the agent loaded the plugin $plug time(s) and libgoldminer $maps time(s)"
	[ "$plug" = 1 ] && [ "$maps" = 1 ] || same=1
	[ $same = 0 ] || diag "$tmp/node.log"
fi
t "$([ $same = 0 ] && [ -z "$dup" ]; echo $?)" \
	"goldminer loads ${libpath:-no libgoldminer.so} and defines $(echo "$dup" | grep -c .) of its functions; $loaded"

echo "1..$n"
[ "$fails" = 0 ]
