build-pipeline/core/cuda.o: core/cuda.c include/goldminer/cuda.h
include/goldminer/cuda.h:
