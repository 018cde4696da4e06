build-pipeline/core/dataset.o: core/dataset.c include/goldminer/dataset.h
include/goldminer/dataset.h:
