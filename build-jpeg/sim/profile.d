build-jpeg/sim/profile.o: sim/profile.c include/goldminer/profile.h
include/goldminer/profile.h:
