build-pipeline/core/worker.o: core/worker.c include/goldminer/worker.h \
 include/goldminer/loader.h include/goldminer/ops.h \
 include/goldminer/dataset.h include/goldminer/rng.h \
 include/goldminer/ring.h include/goldminer/uring.h
include/goldminer/worker.h:
include/goldminer/loader.h:
include/goldminer/ops.h:
include/goldminer/dataset.h:
include/goldminer/rng.h:
include/goldminer/ring.h:
include/goldminer/uring.h:
