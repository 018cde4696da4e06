build-reader/tests/test_uring: tests/test_uring.c \
 include/goldminer/uring.h
include/goldminer/uring.h:
