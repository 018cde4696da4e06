#!/bin/sh
# io_uring batch reader vs a plain open/pread/close loop, same run, warm cache,
# at two queue depths (the ratio is printed by reader_bench itself).
set -u
B=${B:-build}
: "${PHOTOS:?PHOTOS must name an ImageFolder directory}"
"$B/bench/reader_bench" "$PHOTOS" --depth 16
"$B/bench/reader_bench" "$PHOTOS" --depth 64
