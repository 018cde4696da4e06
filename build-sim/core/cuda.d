build-sim/core/cuda.o: core/cuda.c include/goldminer/cuda.h
include/goldminer/cuda.h:
