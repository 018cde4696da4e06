build-reader-san/core/ring.o: core/ring.c include/goldminer/ring.h
include/goldminer/ring.h:
