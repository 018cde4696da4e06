#!/bin/sh
# make install into a temporary DESTDIR, then use it as a C user would: build a
# small program with `pkg-config --cflags --libs goldminer` against the installed
# headers and library, run it on a synthetic set, and compare its checksum with the
# installed command's `bench --checksum`. Also: the SONAME, the installed headers
# against what libgoldminer.so exports, the man page covering every subcommand,
# goldminer --version, the installed agent loading the installed remote-workers
# plugin, the installed library finding the installed GPU decode plugin. TAP on
# stdout. Env: B (build dir).
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
B=${B:-build}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
n=0
fails=0
t() { # t STATUS DESCRIPTION
	n=$((n + 1))
	if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fails=$((fails + 1)); fi
}
if ! command -v pkg-config >/dev/null 2>&1; then
	echo "ok 1 # SKIP pkg-config is not installed"
	echo "1..1"
	exit 0
fi
D=$tmp/dest
P=/usr/local
make -s --no-print-directory -C "$repo" B="$B" DESTDIR="$D" PREFIX="$P" install >"$tmp/install.log" 2>&1
t $? "make install DESTDIR=... PREFIX=$P"
L=$D$P/lib
so=$(readelf -d "$L/libgoldminer.so" 2>/dev/null | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
t "$([ -n "$so" ] && [ -e "$L/$so" ] && [ -e "$L/libgoldminer.a" ] &&
	[ -f "$D$P/include/goldminer/loader.h" ]; echo $?)" "library (SONAME $so), static library and headers installed"

# The installed headers promise only what the installed libraries give: every
# gm_* function an installed header declares (a static inline one is not a
# symbol) is exported by libgoldminer.so (nm -D), and every header an
# installed header includes is installed. The declarations come from gcc's
# -aux-info over each header compiled alone against the installed tree.
I=$D$P/include
if ! command -v gcc >/dev/null 2>&1 || ! command -v nm >/dev/null 2>&1; then
	n=$((n + 1))
	echo "ok $n # SKIP gcc or nm missing: the installed headers are not checked"
else
	nm -D --defined-only "$L/libgoldminer.so" | awk 'NF >= 3 { sub(/@.*/, "", $3); print $3 }' |
		sort -u >"$tmp/exported"
	: >"$tmp/declared"
	: >"$tmp/bad"
	for h in "$I"/goldminer/*.h; do
		b=${h##*/}
		sed -n 's/^[ \t]*#[ \t]*include[ \t]*"\([^"]*\)".*/\1/p; s/^[ \t]*#[ \t]*include[ \t]*<\(goldminer\/[^>]*\)>.*/\1/p' \
			"$h" | while read -r inc; do
			[ -f "$I/$inc" ] || [ -f "$I/goldminer/$inc" ] ||
				echo "goldminer/$b includes $inc, which is not installed" >>"$tmp/bad"
		done
		printf '#include <goldminer/%s>\n' "$b" >"$tmp/hdr.c"
		if ! gcc -std=c11 -D_GNU_SOURCE -I"$I" -fsyntax-only -aux-info "$tmp/hdr.aux" \
			"$tmp/hdr.c" >"$tmp/hdr.log" 2>&1; then
			echo "goldminer/$b does not compile alone: $(grep -m1 error "$tmp/hdr.log")" >>"$tmp/bad"
			continue
		fi
		# "/* FILE:LINE:NC */ extern TYPE NAME (ARGS);" for the functions FILE declares
		grep -F "/* $h:" "$tmp/hdr.aux" | grep -v '\*/ static ' |
			sed 's#^/\*[^*]*\*/ ##; s/ (.*//; s/.*[ *]//' | grep '^gm_' |
			sed "s#\$# goldminer/$b#" >>"$tmp/declared"
	done
	sort -u "$tmp/declared" | while read -r fn hdr; do
		grep -qx "$fn" "$tmp/exported" || echo "$hdr declares $fn, which libgoldminer.so does not export" >>"$tmp/bad"
	done
	nh=$(find "$I/goldminer" -name '*.h' | grep -c .)
	nd=$(sort -u "$tmp/declared" | grep -c .)
	t "$([ ! -s "$tmp/bad" ] && [ "$nd" -gt 0 ]; echo $?)" \
		"the $nh installed headers declare $nd gm_* functions, all exported; they include only installed headers"
	sed 's/^/# /' "$tmp/bad"
fi

# no LD_LIBRARY_PATH: the command finds the installed libgoldminer.so by its run path
v=$(env -u LD_LIBRARY_PATH "$D$P/bin/goldminer" --version 2>&1)
t "$(echo "$v" | grep -q '^goldminer [0-9]*\.[0-9]*\.[0-9]*$'; echo $?)" \
	"goldminer --version, the library found by its run path: $v"
man=$D$P/share/man/man1/goldminer.1
miss=""
for c in bench node pack plan profile sim synth; do
	grep -q "^\.SS goldminer $c\$" "$man" 2>/dev/null || miss="$miss $c"
done
t "$([ -z "$miss" ] && grep -q -- '--per-shard' "$man"; echo $?)" "goldminer(1) covers every subcommand${miss:+ (missing:$miss)}"

# the remote-workers plugin: installed beside the library, found by the installed agent
if [ -f "$B/libgoldminer-remote.so" ] || [ -f "$repo/$B/libgoldminer-remote.so" ]; then
	head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/secret"
	chmod 600 "$tmp/secret"
	LD_LIBRARY_PATH=$L timeout 3 "$D$P/bin/goldminer" node --socket "$tmp/a.sock" \
		--listen 127.0.0.1:0 --secret "$tmp/secret" >"$tmp/node.log" 2>&1
	t "$([ -f "$L/libgoldminer-remote.so" ] && grep -q "listening for peers" "$tmp/node.log"; echo $?)" \
		"the installed agent loads the installed remote-workers plugin"
else
	n=$((n + 1))
	echo "ok $n # SKIP no remote-workers plugin built (UCX missing)"
fi

# the GPU decode's kernels: installed beside the library, found there by it (what
# may then be missing is a device, never the plugin)
if [ -f "$B/libgoldminer-cuda.so" ] || [ -f "$repo/$B/libgoldminer-cuda.so" ]; then
	why=$(env -u GOLDMINER_CUDA_PLUGIN python3 -c 'import ctypes, sys
L = ctypes.CDLL(sys.argv[1])
L.gm_loader_device_finish_ready.restype = ctypes.c_bool
w = ctypes.create_string_buffer(512)
print("ready" if L.gm_loader_device_finish_ready(w, 512) else w.value.decode())' \
		"$L/libgoldminer.so" 2>&1)
	t "$([ -f "$L/libgoldminer-cuda.so" ] && ! echo "$why" | grep -q "not built"; echo $?)" \
		"the installed library finds the installed GPU decode plugin (${why%%(*})"
else
	n=$((n + 1))
	echo "ok $n # SKIP no GPU decode plugin built (no nvcc, or CUDA_KERNELS=0)"
fi

cat >"$tmp/user.c" <<'C'
#include <stdio.h>
#include <goldminer/checksum.h>
#include <goldminer/loader.h>
#include <goldminer/version.h>
int main(int argc, char **argv)
{
	struct gm_loader_opts o;
	struct gm_loader *l;
	struct gm_batch b;
	char err[512];
	uint64_t h = GM_CHECKSUM_INIT, images = 0;
	int rc;
	gm_loader_opts_default(&o);
	o.root = argv[1];
	o.workers = 2;
	o.batch_size = 16;
	o.epochs = 1;
	o.no_pin = 1;
	if (argc < 2 || gm_loader_open(&l, &o, err, sizeof(err))) {
		fprintf(stderr, "user: %s\n", err);
		return 1;
	}
	while ((rc = gm_loader_next(l, &b)) == 0 || rc == GM_LOADER_END_OF_EPOCH)
		if (rc == 0) {
			h = gm_checksum64(h, b.data, (size_t)b.size * b.sample_bytes);
			images += b.size;
		}
	gm_loader_close(l);
	printf("%s %llu %016llx\n", gm_version(), (unsigned long long)images, (unsigned long long)h);
	return rc == GM_LOADER_END ? 0 : 1;
}
C
export PKG_CONFIG_PATH="$L/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$D"
flags=$(pkg-config --cflags --libs goldminer 2>"$tmp/pc.err")
t $? "pkg-config --cflags --libs goldminer: $flags"
san=""
if readelf -d "$L/libgoldminer.so" | grep -q libasan; then
	san="-fsanitize=address,undefined" # a make sanitize build: the program links ASan too
fi
# shellcheck disable=SC2086 # flags and san are lists of compiler words
${CC:-cc} -std=c11 $san -o "$tmp/user" "$tmp/user.c" $flags >"$tmp/cc.log" 2>&1
rc=$?
t $rc "a C program builds against the installed goldminer"
[ $rc = 0 ] || sed 's/^/# /' "$tmp/cc.log"
LD_LIBRARY_PATH=$L "$D$P/bin/goldminer" synth "$tmp/set" --images 40 --classes 2 >/dev/null 2>&1
out=$(LD_LIBRARY_PATH=$L ASAN_OPTIONS=detect_leaks=0 "$tmp/user" "$tmp/set" 2>&1)
rc=$?
want=$(LD_LIBRARY_PATH=$L "$D$P/bin/goldminer" bench "$tmp/set" --workers 2 --batch 16 --quiet \
	--checksum 2>/dev/null | sed -n 's/.*"checksum": *\["\([0-9a-f]*\)"\].*/\1/p')
t "$([ $rc = 0 ] && [ "$(echo "$out" | cut -d' ' -f2)" = 40 ] &&
	[ "$(echo "$out" | cut -d' ' -f3)" = "$want" ]; echo $?)" \
	"it runs on a synthetic set: 40 images, the checksum of the installed bench ($out; bench $want)"
echo "1..$n"
[ "$fails" = 0 ]
