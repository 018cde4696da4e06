/*
 * version.h - the library's version (the Makefile's VERSION, also the shared
 * library's version and its SONAME major: libgoldminer.so.MAJOR).
 */
#ifndef GOLDMINER_VERSION_H
#define GOLDMINER_VERSION_H

/* "MAJOR.MINOR.PATCH" of the libgoldminer that is running. Pure. */
const char *gm_version(void);

#endif
