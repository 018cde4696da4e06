#!/bin/sh
# make bench: every tests/bench/bench-*.sh in order, with B (build dir) and PHOTOS
# (the real-photo ImageFolder; built with tests/bench/make-photos.sh from Debian
# packages when missing) in the environment. Each prints its figures and
# the ratios against its peer measured in the same run.
set -u
B=${B:-build}
export B
if [ -z "${PHOTOS:-}" ]; then
	PHOTOS=${GM_PHOTOS:-/var/tmp/goldminer-photos}
fi
if [ ! -d "$PHOTOS" ]; then
	mk=tests/bench/make-photos.sh
	echo "== building the real-photo set into $PHOTOS ($mk)"
	bash "$mk" "$PHOTOS" || { echo "make-photos.sh failed; or pass PHOTOS=DIR"; exit 1; }
fi
export PHOTOS
rc=0
for s in tests/bench/bench-*.sh; do
	[ -f "$s" ] || continue
	echo "== $s"
	sh "$s" || { echo "!! $s failed"; rc=1; }
done
exit $rc
