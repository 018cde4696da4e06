build-reader/sim/trace.o: sim/trace.c include/goldminer/rng.h \
 include/goldminer/trace.h
include/goldminer/rng.h:
include/goldminer/trace.h:
