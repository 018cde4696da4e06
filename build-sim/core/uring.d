build-sim/core/uring.o: core/uring.c include/goldminer/uring.h
include/goldminer/uring.h:
