build-pipeline/core/jpeg.o: core/jpeg.c include/goldminer/jpeg.h
include/goldminer/jpeg.h:
