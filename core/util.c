/*
 * util.c - see util.h.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

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
