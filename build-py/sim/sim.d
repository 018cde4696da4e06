build-py/sim/sim.o: sim/sim.c include/goldminer/policy.h \
 include/goldminer/rng.h include/goldminer/sim.h \
 include/goldminer/cluster.h include/goldminer/profile.h \
 include/goldminer/trace.h
include/goldminer/policy.h:
include/goldminer/rng.h:
include/goldminer/sim.h:
include/goldminer/cluster.h:
include/goldminer/profile.h:
include/goldminer/trace.h:
