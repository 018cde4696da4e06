/*
 * lendroot.c - the roots a lending agent opens for its peers (lendroot.h): a
 * path matched by its words, so that a root no --lend-root covers is refused
 * before anything under it is opened, stat'ed or listed.
 *
 * The idea: a path is split on '/', empty and "." components dropped, ".."
 * refused outright (resolving it lexically would disagree with the file system
 * wherever a symlink sits before it; refusing costs nothing, since a trainer's
 * root arrives realpath'd), and compared whole-component with each canonical
 * root. Matching is a prefix test on components, never on bytes.
 *
 * Not here: realpath of what a peer named (that touches the file system: the
 * lender's check process does it, and then only below a listed root).
 */

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lendroot.h"
#include "goldminer/util.h"

int gm_lendroot_normalise(const char *asked, char *out, size_t outlen)
{
	size_t o = 0;

	if (!asked || asked[0] != '/' || outlen < 2)
		return -EINVAL;
	for (const char *p = asked; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return -EINVAL;
	for (const char *p = asked; *p;) {
		while (*p == '/')
			p++;
		size_t len = strcspn(p, "/");
		if (!len || (len == 1 && p[0] == '.')) {
			p += len;
			continue;
		}
		if (len == 2 && p[0] == '.' && p[1] == '.')
			return -EINVAL;
		if (o + 1 + len + 1 > outlen)
			return -EINVAL;
		out[o++] = '/';
		memcpy(out + o, p, len);
		o += len;
		p += len;
	}
	if (!o)
		out[o++] = '/';
	out[o] = '\0';
	return 0;
}

int gm_lendroot_find(const char *const *roots, int n, const char *path)
{
	for (int i = 0; i < n; i++) {
		size_t len = strlen(roots[i]);
		if (!strcmp(roots[i], "/") ||
		    (!strncmp(path, roots[i], len) && (path[len] == '\0' || path[len] == '/')))
			return i;
	}
	return -1;
}

int gm_lendroot_canon(const char *dir, char *out, size_t outlen, char *err, size_t errlen)
{
	char real[PATH_MAX];
	struct stat st;

	if (!realpath(dir, real)) {
		int rc = -errno;
		gm_errf(err, errlen, "--lend-root %s: %s", dir, strerror(-rc));
		return rc;
	}
	if (stat(real, &st) || !S_ISDIR(st.st_mode)) {
		gm_errf(err, errlen,
			"--lend-root %s: not a directory (name the directory that holds the "
			"datasets peers may use)",
			dir);
		return -ENOTDIR;
	}
	if (strlen(real) >= outlen) {
		gm_errf(err, errlen, "--lend-root %s: path too long", dir);
		return -ENAMETOOLONG;
	}
	memcpy(out, real, strlen(real) + 1);
	return 0;
}
