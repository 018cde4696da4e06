build-pipeline/sim/sim_cli.o: sim/sim_cli.c include/goldminer/cli.h \
 include/goldminer/cluster.h include/goldminer/profile.h \
 include/goldminer/sim.h include/goldminer/trace.h
include/goldminer/cli.h:
include/goldminer/cluster.h:
include/goldminer/profile.h:
include/goldminer/sim.h:
include/goldminer/trace.h:
