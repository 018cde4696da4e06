build-sim/core/bench.o: core/bench.c include/goldminer/cli.h \
 include/goldminer/cuda.h include/goldminer/loader.h \
 include/goldminer/ops.h
include/goldminer/cli.h:
include/goldminer/cuda.h:
include/goldminer/loader.h:
include/goldminer/ops.h:
