build-sim/core/ops.o: core/ops.c include/goldminer/ops.h \
 include/goldminer/jpeg.h include/goldminer/rng.h
include/goldminer/ops.h:
include/goldminer/jpeg.h:
include/goldminer/rng.h:
