/*
 * lendroot.h - which dataset roots a lending agent opens for its peers
 * (--lend-root, lender.c): a LEND's root is matched by its words, before any
 * file is touched.
 *
 * The idea: the roots are canonical directories (gm_lendroot_canon, at
 * start-up). A path a peer names is first normalised without the file system
 * (gm_lendroot_normalise: absolute, no "..", no control bytes), then matched
 * against those words (gm_lendroot_find): only a path equal to a root or below
 * one may be opened at all. What a symlink under a root resolves to is the
 * opener's to check (its realpath must stay below the root; the index is
 * confined: dataset.h's gm_dataset_open_bounded).
 *
 * Not here: opening or indexing anything (lender.c). Thread-safe: no state.
 */
#ifndef GM_REMOTE_LENDROOT_H
#define GM_REMOTE_LENDROOT_H

#include <stddef.h>

/* asked, normalised into out[outlen]: absolute, "//" and "." components
 * dropped, no trailing '/' (but "/" itself). -EINVAL for a relative path, a ".."
 * component, a control byte (below 0x20, or 0x7f) or one that does not fit; 0
 * otherwise. No I/O. */
int gm_lendroot_normalise(const char *asked, char *out, size_t outlen);

/* The index in roots[0..n) of the first root that path (normalised) equals or
 * lies below ("/data" covers "/data" and "/data/x", not "/data2"), or -1. */
int gm_lendroot_find(const char *const *roots, int n, const char *path);

/* --lend-root DIR at start-up: its realpath into out[outlen], which must be a
 * directory. 0, or -errno with the reason in err naming DIR. */
int gm_lendroot_canon(const char *dir, char *out, size_t outlen, char *err, size_t errlen);

#endif
