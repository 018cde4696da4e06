build-sim/core/loader.o: core/loader.c include/goldminer/loader.h \
 include/goldminer/ops.h include/goldminer/cuda.h \
 include/goldminer/dataset.h include/goldminer/pipeline.h \
 include/goldminer/ring.h include/goldminer/worker.h
include/goldminer/loader.h:
include/goldminer/ops.h:
include/goldminer/cuda.h:
include/goldminer/dataset.h:
include/goldminer/pipeline.h:
include/goldminer/ring.h:
include/goldminer/worker.h:
