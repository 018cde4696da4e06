build-jpeg/sim/cluster.o: sim/cluster.c include/goldminer/cluster.h
include/goldminer/cluster.h:
