#!/bin/sh
# The GPU decode's worker half: a worker's CPU time per image in coefficient mode
# (entropy decode into the slot) against the full CPU path, the same run, each
# image's best of COEF_PASSES (default 5) alternating passes over 300 photos
# (coef_bench prints both and their ratio; the target is 0.50 or less). Specs:
# train float32 (the default pipeline's), train uint8 (slots the uint8 sample's
# size: windows whose coefficients do not fit take the CPU path, before the decode
# where gm_jpeg_coef_guess expects it, else after the row where they outgrow it),
# train float32 over the photos restart-marked (as `goldminer pack --restart`
# writes them). COEF_ROUNDS (default 1): the three that many times, in turn.
set -u
B=${B:-build}
: "${PHOTOS:?PHOTOS must name an ImageFolder directory}"
passes=${COEF_PASSES:-5}
rounds=${COEF_ROUNDS:-1}
r=0
while [ "$r" -lt "$rounds" ]; do
	r=$((r + 1))
	for spec in train32 train "train32 restart"; do
		echo "-- $spec${COEF_ROUNDS:+ (round $r)}"
		# shellcheck disable=SC2086 # spec: the mode, then "restart" or nothing
		"$B/bench/coef_bench" "$PHOTOS" 300 "$passes" 224 $spec || exit 1
	done
done
