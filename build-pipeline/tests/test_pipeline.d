build-pipeline/tests/test_pipeline: tests/test_pipeline.c \
 include/goldminer/cli.h include/goldminer/ops.h \
 include/goldminer/pipeline.h
include/goldminer/cli.h:
include/goldminer/ops.h:
include/goldminer/pipeline.h:
