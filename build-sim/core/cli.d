build-sim/core/cli.o: core/cli.c include/goldminer/cli.h
include/goldminer/cli.h:
