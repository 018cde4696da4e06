build-pipeline/core/rng.o: core/rng.c include/goldminer/rng.h
include/goldminer/rng.h:
