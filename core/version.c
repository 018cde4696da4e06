/*
 * version.c - gm_version (version.h); GM_VERSION comes from the Makefile.
 */
#include "goldminer/version.h"

#ifndef GM_VERSION
#define GM_VERSION "0.0.0"
#endif

const char *gm_version(void)
{
	return GM_VERSION;
}
