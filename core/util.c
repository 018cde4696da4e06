/*
 * util.c - see util.h.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include "goldminer/util.h"

void gm_errf(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

int gm_grow_scratch(void **p, size_t *cap, size_t n, size_t min_cap)
{
	if (n <= *cap)
		return 0;
	size_t c = *cap ? *cap : (min_cap ? min_cap : 64);
	while (c < n) {
		if (c > ((size_t)-1) / 2)
			return -ENOMEM;
		c *= 2;
	}
	void *q = malloc(c);
	if (!q)
		return -ENOMEM;
	free(*p);
	*p = q;
	*cap = c;
	return 0;
}

const char *gm_write_cause(int err, const char *dir, char *buf, size_t len)
{
	struct statvfs vfs;

	if (err == -ENOSPC && dir && statvfs(dir, &vfs) == 0 && vfs.f_files > 0 &&
	    vfs.f_favail == 0)
		snprintf(buf, len,
			 "no space left on device (ENOSPC: the file system has no free inodes;"
			 " remove files there or use another file system)");
	else if (err == -ENOSPC)
		snprintf(buf, len,
			 "no space left on device (ENOSPC: the file system is full; free space"
			 " or write elsewhere)");
	else if (err == -EDQUOT)
		snprintf(buf, len,
			 "disk quota exceeded (EDQUOT: your quota of blocks or inodes there is"
			 " used up)");
	else if (err == -EFBIG)
		snprintf(buf, len, "file too large (EFBIG: over the file size limit)");
	else
		snprintf(buf, len, "%s", strerror(-err));
	return buf;
}
