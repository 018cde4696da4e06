build-jpeg/bench/decode_ref: tests/bench/decode_ref.c \
 include/goldminer/jpeg.h include/goldminer/ops.h include/goldminer/rng.h
include/goldminer/jpeg.h:
include/goldminer/ops.h:
include/goldminer/rng.h:
