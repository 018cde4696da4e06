/*
 * util.c - helpers for the fuzz targets (see fuzz.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz.h"

int gm_fuzz_memfile(const uint8_t *data, size_t size, char *path, size_t pathlen)
{
	int fd = memfd_create("gm-fuzz", MFD_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t off = 0;
	while (off < size) {
		ssize_t w = write(fd, data + off, size - off);
		if (w <= 0) {
			close(fd);
			return -1;
		}
		off += (size_t)w;
	}
	snprintf(path, pathlen, "/proc/self/fd/%d", fd);
	return fd;
}

void gm_fuzz_check_msg(const char *msg, size_t cap)
{
	size_t n = strnlen(msg, cap);
	if (n == 0 || n == cap)
		abort(); /* an error must say what was wrong, within its buffer */
}
