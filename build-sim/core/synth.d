build-sim/core/synth.o: core/synth.c include/goldminer/synth.h \
 include/goldminer/cli.h include/goldminer/rng.h
include/goldminer/synth.h:
include/goldminer/cli.h:
include/goldminer/rng.h:
