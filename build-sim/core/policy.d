build-sim/core/policy.o: core/policy.c include/goldminer/policy.h
include/goldminer/policy.h:
