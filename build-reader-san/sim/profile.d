build-reader-san/sim/profile.o: sim/profile.c include/goldminer/profile.h
include/goldminer/profile.h:
