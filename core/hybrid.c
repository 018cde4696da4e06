/*
 * hybrid.c - one file through the C per-sample prefix into a caller's buffer
 * (hybrid.h).
 *
 * Design: a thin layer over gm_aug: the file is read whole into a buffer the
 * handle keeps (it only grows), gm_aug_sample writes the sample, and for
 * GM_HYBRID_RGBX the uint8 HWC rows are widened in place to 4 bytes a pixel,
 * from the last pixel back to the first (pixel i moves from 3i to 4i >= 3i, and
 * every pixel still to move lies below 3i), so the caller's buffer is the only
 * one the pixels land in: PIL maps it as its image memory, no copy after.
 *
 * Not done here: ranged reads of restart-marked shards (the hybrid path reads
 * files of an ImageFolder tree), io_uring (one file at a time per worker: the
 * Python ops after it dominate).
 */
#include "goldminer/hybrid.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "goldminer/util.h"

struct gm_hybrid {
	struct gm_aug *aug;
	enum gm_hybrid_layout layout;
	size_t out_bytes;
	void *file; /* the last file's bytes (grows, never shrinks) */
	size_t file_cap;
	char errmsg[512];
};

int gm_hybrid_create(struct gm_hybrid **out, const struct gm_aug_spec *s,
		     enum gm_hybrid_layout layout, char *err, size_t errlen)
{
	struct gm_hybrid *h;
	int ret;

	if (!out || !s) {
		gm_errf(err, errlen, "gm_hybrid_create: no spec or no handle pointer");
		return -EINVAL;
	}
	*out = NULL;
	if (layout != GM_HYBRID_AUG && layout != GM_HYBRID_RGBX) {
		gm_errf(err, errlen,
			"gm_hybrid_create: layout %d is not GM_HYBRID_AUG or "
			"GM_HYBRID_RGBX",
			(int)layout);
		return -EINVAL;
	}
	if (layout == GM_HYBRID_RGBX && s->out != GM_OUT_U8_HWC) {
		gm_errf(err, errlen,
			"gm_hybrid_create: GM_HYBRID_RGBX needs out GM_OUT_U8_HWC "
			"(PIL images hold bytes)");
		return -EINVAL;
	}
	char why[256];
	ret = gm_aug_spec_check(s, why, sizeof(why));
	if (ret) {
		gm_errf(err, errlen, "gm_hybrid_create: %s", why);
		return ret;
	}
	h = calloc(1, sizeof(*h));
	if (!h) {
		ret = -ENOMEM;
		goto out_nomem;
	}
	ret = gm_aug_create(&h->aug, s);
	if (ret)
		goto out_free;
	h->layout = layout;
	h->out_bytes =
	    layout == GM_HYBRID_RGBX ? (size_t)s->size * s->size * 4 : gm_aug_out_bytes(s);
	*out = h;
	return 0;
out_free:
	free(h);
out_nomem:
	gm_errf(err, errlen, "gm_hybrid_create: out of memory");
	return ret;
}

void gm_hybrid_destroy(struct gm_hybrid *h)
{
	if (!h)
		return;
	gm_aug_destroy(h->aug);
	free(h->file);
	free(h);
}

size_t gm_hybrid_out_bytes(const struct gm_hybrid *h)
{
	return h->out_bytes;
}

const char *gm_hybrid_errmsg(const struct gm_hybrid *h)
{
	return h->errmsg;
}

static int fail(struct gm_hybrid *h, int ret, const char *path, const char *why)
{
	gm_errf(h->errmsg, sizeof(h->errmsg), "gm_hybrid_sample: %s: %s", path, why);
	return ret;
}

/* The whole file into h->file; *len its bytes. 0 or -errno with the message set. */
static int read_file(struct gm_hybrid *h, const char *path, size_t *len)
{
	struct stat st;
	size_t got = 0;
	int ret = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return fail(h, -errno, path, strerror(errno));
	if (fstat(fd, &st)) {
		ret = fail(h, -errno, path, strerror(errno));
		goto out_close;
	}
	if (S_ISDIR(st.st_mode)) {
		ret = fail(h, -EISDIR, path, "a directory, not an image file");
		goto out_close;
	}
	if ((uint64_t)st.st_size > GM_HYBRID_MAX_FILE) {
		ret = fail(h, -EFBIG, path, "over 1 GiB: not read as an image");
		goto out_close;
	}
	/* +1: a file that grew since fstat shows as one byte more than it said */
	if (gm_grow_scratch(&h->file, &h->file_cap, (size_t)st.st_size + 1, 1 << 16)) {
		ret = fail(h, -ENOMEM, path, "out of memory for the file's bytes");
		goto out_close;
	}
	while (got < (size_t)st.st_size + 1) {
		ssize_t n = read(fd, (char *)h->file + got, (size_t)st.st_size + 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			ret = fail(h, -errno, path, strerror(errno));
			goto out_close;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	if (got > (size_t)st.st_size)
		ret = fail(h, -EIO, path, "the file grew while it was read");
	*len = got;
out_close:
	close(fd);
	return ret;
}

/* uint8 HWC -> RGBX in place, last pixel first (see the header comment). */
static void widen_rgbx(uint8_t *p, size_t pixels)
{
	for (size_t i = pixels; i-- > 0;) {
		uint8_t r = p[3 * i], g = p[3 * i + 1], b = p[3 * i + 2];
		p[4 * i] = r;
		p[4 * i + 1] = g;
		p[4 * i + 2] = b;
		p[4 * i + 3] = 255;
	}
}

int gm_hybrid_sample(struct gm_hybrid *h, const char *path, uint64_t seed, uint64_t epoch,
		     uint64_t sample_id, void *out, size_t out_len)
{
	size_t len = 0;
	int ret;

	h->errmsg[0] = '\0';
	if (!path)
		return fail(h, -EINVAL, "(null)", "no path");
	if (!out || out_len < h->out_bytes)
		return fail(h, -ENOBUFS, path, "the output buffer is smaller than a sample");
	ret = read_file(h, path, &len);
	if (ret)
		return ret;
	if (len == 0)
		return fail(h, -ENODATA, path, "empty file");
	ret = gm_aug_sample(h->aug, h->file, len, seed, epoch, sample_id, out, NULL);
	if (ret) {
		const char *why = gm_aug_errmsg(h->aug);
		const char *p = strchr(why, ':');
		return fail(h, ret, path, p && p[1] ? p + 2 : why); /* without "gm_aug_sample: " */
	}
	if (h->layout == GM_HYBRID_RGBX)
		widen_rgbx(out, h->out_bytes / 4);
	return 0;
}
