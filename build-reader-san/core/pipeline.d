build-reader-san/core/pipeline.o: core/pipeline.c \
 include/goldminer/pipeline.h include/goldminer/ops.h \
 include/goldminer/cli.h
include/goldminer/pipeline.h:
include/goldminer/ops.h:
include/goldminer/cli.h:
