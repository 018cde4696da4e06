#!/bin/sh
# The build's libjpeg probe (core/probe/huff.c, the Makefile's HUFF_PROBE block) and
# the fallback it chooses. TAP on stdout. Env: B (the normal build, default build).
#   1 the probe passes on this machine's normal build (GM_OWN_HUFFMAN 1, goldminer's
#     decoder in the library), unless the libjpeg-turbo here is not 2.1.x (SKIP)
#   2 failed on purpose (make HUFF_PROBE_FAIL=1, library and command only, into a
#     temporary B), the build goes on and says so in one line that names the
#     fallback and what was found
#   3 that build left the decoder out: verdict 0, no gm_huff_install or decode_mcu
#     in libgoldminer.so, no object compiled with jpegint.h
#   4 its decodes give the same pixels: `goldminer bench --checksum` over a
#     synthetic set equals the normal build's (and libjpeg's decoder's in it,
#     GM_LIBJPEG_HUFFMAN=1)
#   (under a sanitizer build, make sanitize's, 2 and 3 skip and 4 compares the
#   normal build's two decoders only: the fallback build's logic is make test's)
#   5 the run-time guard: gm_huff_install refuses a libjpeg whose message list is
#     not the one its headers declare (a program built on the normal build's
#     static library, one decompressor as libjpeg sets it up, one with
#     last_jpeg_message changed)
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
B=${B:-build}
case $B in /*) ;; *) B=$repo/$B ;; esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
n=0
fails=0
t() { # t STATUS DESCRIPTION
	n=$((n + 1))
	if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fails=$((fails + 1)); fi
}
skip() { n=$((n + 1)); echo "not ok $n # SKIP $1"; }
verdict() { sed -n 's/^#define GM_OWN_HUFFMAN \([01]\)$/\1/p' "$1/core/huff_probe.h" 2>/dev/null; }

# ---- 1: the normal build
ver=$(pkg-config --modversion libjpeg 2>/dev/null)
case $ver in
2.1.*)
	t "$([ "$(verdict "$B")" = 1 ] && nm "$B/libgoldminer.so" | grep -q ' gm_huff_install$'; echo $?)" \
		"the probe passes with libjpeg-turbo $ver: GM_OWN_HUFFMAN 1, the decoder in $B/libgoldminer.so"
	;;
*) skip "libjpeg-turbo ${ver:-(no pkg-config)} here, the probe is written for 2.1.x" ;;
esac

# ---- 2, 3: the library and the command with the probe failed on purpose
# (not under a sanitizer build, make sanitize's: they check the build's logic,
# which make test does, and the fallback build is a whole library again; what
# ASan would check of its decodes, libjpeg's decoder under jpeg.c, 4 runs in
# this build, GM_LIBJPEG_HUFFMAN=1)
F=$tmp/fallback
san=0
readelf -d "$B/libgoldminer.so" 2>/dev/null | grep -q 'libasan' && san=1
if [ $san = 1 ]; then
	skip "under a sanitizer build: the fallback build's logic is make test's"
	skip "under a sanitizer build: the fallback build's logic is make test's"
else
	make -s --no-print-directory -C "$repo" -j2 B="$F" HUFF_PROBE_FAIL=1 "$F/libgoldminer.so" \
		"$F/goldminer" >"$tmp/build.out" 2>"$tmp/build.err"
	rc=$?
	lines=$(grep -c "falls back to libjpeg's Huffman decoder" "$tmp/build.err")
	t "$([ $rc = 0 ] && [ "$lines" = 1 ] && grep -q 'found libjpeg' "$tmp/build.err"; echo $?)" \
		"HUFF_PROBE_FAIL=1: the build goes on and says so once ($lines lines)"
	sed 's/^/# /' "$tmp/build.err" | grep 'falls back' || sed 's/^/# /' "$tmp/build.err" | tail -5
	left=$(nm "$F/libgoldminer.so" 2>/dev/null | grep -c ' gm_huff_install$\| decode_mcu$')
	withint=$(grep -l 'jpegint\.h' "$F"/core/*.d 2>/dev/null | wc -l)
	t "$([ "$(verdict "$F")" = 0 ] && [ -f "$F/libgoldminer.so" ] && [ "$left" = 0 ] &&
		[ "$withint" = 0 ]; echo $?)" \
		"the fallback build has no own decoder (verdict $(verdict "$F"), $left symbols, $withint objects with jpegint.h)"
fi

# ---- 4: same pixels
sums() { # sums GOLDMINER [ENV=VALUE]: the checksum lines of one epoch, uint8 then float32
	for o in uint8 float32; do
		env GM_LIBJPEG_HUFFMAN="${2:-0}" "$1" bench "$tmp/data" --workers 1 --batch 16 --output "$o" \
			--checksum --quiet 2>/dev/null | sed -n 's/.*"checksum": *\(\[[^]]*\]\).*/'"$o"' \1/p'
	done
}
if "$B/goldminer" synth "$tmp/data" --images 48 --classes 2 >/dev/null 2>&1; then
	own=$(sums "$B/goldminer")
	lib=$(sums "$B/goldminer" 1)
	if [ $san = 1 ]; then
		t "$([ -n "$own" ] && [ "$own" = "$lib" ]; echo $?)" \
			"bench --checksum: libjpeg's decoder's batches equal goldminer's (no fallback build under a sanitizer)"
	else
		fb=$(sums "$F/goldminer")
		t "$([ -n "$own" ] && [ "$own" = "$fb" ] && [ "$own" = "$lib" ]; echo $?)" \
			"bench --checksum: the fallback build's batches equal the normal build's"
		printf '%s\n' "$own" "$fb" | sed 's/^/# /'
	fi
else
	t 1 "goldminer synth failed"
fi

# ---- 5: the run-time guard
cat >"$tmp/guard.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include "huff.h"
/* argv[1]: a baseline JPEG; prints "normal=N changed=N" (1: installed) */
int main(int argc, char **argv)
{
	static unsigned char buf[1 << 20];
	FILE *f = argc > 1 ? fopen(argv[1], "rb") : NULL;
	size_t len = f ? fread(buf, 1, sizeof(buf), f) : 0;
	struct gm_huff *h = calloc(1, sizeof(*h));
	int got[2];
	if (f)
		fclose(f);
	if (!len || !h)
		return 1;
	for (int k = 0; k < 2; k++) {
		struct jpeg_decompress_struct ci;
		struct jpeg_error_mgr jerr;
		ci.err = jpeg_std_error(&jerr);
		if (k)
			jerr.last_jpeg_message--; /* as another libjpeg release would have it */
		jpeg_create_decompress(&ci);
		jpeg_mem_src(&ci, buf, (unsigned long)len);
		jpeg_read_header(&ci, TRUE);
		jpeg_start_decompress(&ci);
		got[k] = gm_huff_install(h, &ci);
		jpeg_destroy_decompress(&ci);
	}
	printf("normal=%d changed=%d\n", got[0], got[1]);
	free(h);
	return 0;
}
C
img=$(find "$tmp/data" -name '*.jpg' 2>/dev/null | head -1)
# (CFLAGS and LDFLAGS: make's, when it runs this, e.g. make sanitize's; they and
# pkg-config's flags are split into words on purpose)
# shellcheck disable=SC2086,SC2046
if [ "$(verdict "$B")" != 1 ]; then
	skip "the normal build has no own decoder to guard"
elif ${CC:-cc} ${CFLAGS:-} -std=c11 -I"$repo/include" -I"$repo/core" \
	-include "$B/core/huff_probe.h" -o "$tmp/guard" "$tmp/guard.c" "$B/libgoldminer.a" \
	${LDFLAGS:-} $(pkg-config --cflags --libs libjpeg 2>/dev/null || echo -ljpeg) 2>"$tmp/cc.err"; then
	got=$("$tmp/guard" "$img")
	t "$([ "$got" = "normal=1 changed=0" ]; echo $?)" \
		"gm_huff_install: installed under the libjpeg it was built for, not under another ($got)"
else
	t 1 "the guard's test program did not build"
	sed 's/^/# /' "$tmp/cc.err" | head -5
fi

echo "1..$n"
[ "$fails" = 0 ]
