/*
 * synth.c - synthetic JPEG datasets (see synth.h); `goldminer synth` is cmd/synth.c.
 *
 * Design: every image is painted from its own counter-based RNG stream (seed,
 * image index), so any file can be regenerated alone and the dataset does not
 * depend on the order of writing. Content is a smooth corner-colour gradient,
 * a few flat ellipses and rectangles, and two kinds of texture that give the
 * entropy coder photo-like work: a value-noise field (cells of 6-40 px) and
 * per-pixel grain. Amplitudes are drawn per image so file sizes spread over
 * roughly 30-80 KB at 500x375, quality 90, like ImageNet photos.
 *
 * Encoding is libjpeg-turbo's libjpeg API (jpeg_mem_dest), errors through a
 * setjmp handler: a library never exits.
 *
 * Not done: EXIF, ICC profiles, restart markers, arithmetic coding, 12-bit.
 */
#include "goldminer/synth.h"
#include "goldminer/tar.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jpeglib.h> /* before jerror.h, which needs its jconfig.h */
#include <jerror.h>

#include "goldminer/rng.h"
#include "goldminer/util.h"

#define STREAM_SYNTH_IMAGE  0x53594e49ull /* per-image choices of gm_synth_write */
#define STREAM_SYNTH_PIXELS 0x53594e50ull /* content of one picture */
#define JPEG_MAX_DIM	    65500u

/* ---- content ---------------------------------------------------------------- */

static uint8_t clamp8(int v)
{
	return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* Small fast generator for per-pixel grain (xorshift32), seeded from gm_rng. */
static uint32_t xs32(uint32_t *s)
{
	uint32_t x = *s;
	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	return *s = x;
}

/* Gradient background from four random corner colours, 16.16 fixed point bilinear. */
static void paint_gradient(uint8_t *rgb, uint32_t w, uint32_t h, struct gm_rng *r)
{
	int corner[4][3];
	for (int k = 0; k < 4; k++)
		for (int c = 0; c < 3; c++)
			corner[k][c] = (int)gm_rng_below(r, 256);
	for (uint32_t y = 0; y < h; y++) {
		int64_t fy = h > 1 ? ((int64_t)y << 16) / (h - 1) : 0;
		int left[3], right[3];
		for (int c = 0; c < 3; c++) {
			left[c] = (int)((corner[0][c] * (65536 - fy) + corner[2][c] * fy) >> 8);
			right[c] = (int)((corner[1][c] * (65536 - fy) + corner[3][c] * fy) >> 8);
		}
		uint8_t *row = rgb + (size_t)y * w * 3;
		for (uint32_t x = 0; x < w; x++) {
			int64_t fx = w > 1 ? ((int64_t)x << 8) / (w - 1) : 0;
			for (int c = 0; c < 3; c++)
				row[3 * x + c] =
				    clamp8((int)((left[c] * (256 - fx) + right[c] * fx) >> 16));
		}
	}
}

/* Flat shapes: 3..12 ellipses and rectangles of random colour. */
static void paint_shapes(uint8_t *rgb, uint32_t w, uint32_t h, struct gm_rng *r)
{
	uint32_t nshapes = 3 + (uint32_t)gm_rng_below(r, 10);
	for (uint32_t s = 0; s < nshapes; s++) {
		bool ellipse = gm_rng_below(r, 2);
		int64_t cx = (int64_t)gm_rng_below(r, w), cy = (int64_t)gm_rng_below(r, h);
		int64_t rx = 4 + (int64_t)gm_rng_below(r, w / 3 + 1);
		int64_t ry = 4 + (int64_t)gm_rng_below(r, h / 3 + 1);
		uint8_t col[3];
		for (int c = 0; c < 3; c++)
			col[c] = (uint8_t)gm_rng_below(r, 256);
		int64_t y0 = cy - ry < 0 ? 0 : cy - ry, y1 = cy + ry >= h ? h - 1 : cy + ry;
		int64_t x0 = cx - rx < 0 ? 0 : cx - rx, x1 = cx + rx >= w ? w - 1 : cx + rx;
		for (int64_t y = y0; y <= y1; y++)
			for (int64_t x = x0; x <= x1; x++) {
				if (ellipse) {
					int64_t dx = x - cx, dy = y - cy;
					if (dx * dx * ry * ry + dy * dy * rx * rx >
					    rx * rx * ry * ry)
						continue;
				}
				memcpy(rgb + ((size_t)y * w + (size_t)x) * 3, col, 3);
			}
	}
}

/* Value noise (a coarse random grid, bilinearly interpolated; luma + some chroma)
 * and per-pixel grain. Without memory for the grid, grain only. */
static void paint_texture(uint8_t *rgb, uint32_t w, uint32_t h, struct gm_rng *r)
{
	uint32_t cell = 6 + (uint32_t)gm_rng_below(r, 35);
	int amp = 8 + (int)gm_rng_below(r, 28);
	int grain = 3 + (int)gm_rng_below(r, 8);
	uint32_t gw = w / cell + 2, gh = h / cell + 2;
	int16_t *grid = malloc(sizeof(int16_t) * gw * gh * 3);
	uint32_t st = (uint32_t)gm_rng_next(r) | 1u;
	if (grid) {
		for (size_t i = 0; i < (size_t)gw * gh; i++) {
			int l = (int)gm_rng_below(r, (uint64_t)(2 * amp + 1)) - amp;
			for (int c = 0; c < 3; c++)
				grid[3 * i + c] = (int16_t)(l + (int)gm_rng_below(r, 9) - 4);
		}
	}
	for (uint32_t y = 0; y < h; y++) {
		uint32_t gy = y / cell, fy = (y % cell) * 256 / cell;
		uint8_t *row = rgb + (size_t)y * w * 3;
		for (uint32_t x = 0; x < w; x++) {
			uint32_t gx = x / cell, fx = (x % cell) * 256 / cell;
			uint32_t g = xs32(&st);
			for (int c = 0; c < 3; c++) {
				int v = row[3 * x + c];
				if (grid) {
					const int16_t *p = grid + ((size_t)gy * gw + gx) * 3 + c;
					int a = p[0], b = p[3], d = p[gw * 3], e = p[gw * 3 + 3];
					int top = a * (256 - (int)fx) + b * (int)fx;
					int bot = d * (256 - (int)fx) + e * (int)fx;
					v += (top * (256 - (int)fy) + bot * (int)fy) >> 16;
				}
				v += (int)((g >> (8 * c)) & 0xff) % (2 * grain + 1) - grain;
				row[3 * x + c] = clamp8(v);
			}
		}
	}
	free(grid);
}

/* Paint w x h RGB pixels into rgb (w*h*3 bytes): the layers in order, all drawn
 * from one stream, so the order of the draws is part of the dataset's bytes. */
static void paint(uint8_t *rgb, uint32_t w, uint32_t h, uint64_t seed, unsigned flags)
{
	struct gm_rng r;
	gm_rng_init(&r, seed, STREAM_SYNTH_PIXELS, w, h);
	paint_gradient(rgb, w, h, &r);
	paint_shapes(rgb, w, h, &r);
	if (!(flags & GM_SYNTH_FLAT))
		paint_texture(rgb, w, h, &r);
}

/* ---- encoding --------------------------------------------------------------- */

struct cerr {
	struct jpeg_error_mgr pub;
	jmp_buf jb;
	int code;
};

static void c_error_exit(j_common_ptr c)
{
	struct cerr *e = (struct cerr *)c->err;
	e->code = c->err->msg_code == JERR_OUT_OF_MEMORY ? -ENOMEM : -EINVAL;
	longjmp(e->jb, 1);
}

static void c_output_message(j_common_ptr c)
{
	(void)c;
}

/* Encode pixels (RGB; converted here for gray/CMYK) into a malloc'ed buffer. */
static int encode(const uint8_t *rgb, uint32_t w, uint32_t h, unsigned flags, int quality,
		  uint8_t **out, size_t *len)
{
	struct jpeg_compress_struct c;
	struct cerr err;
	unsigned char *mem = NULL;
	unsigned long memlen = 0;
	int ncomp = (flags & GM_SYNTH_GRAY) ? 1 : (flags & GM_SYNTH_CMYK) ? 4 : 3;
	uint8_t *row = malloc((size_t)w * 4);
	volatile int ret = 0; /* set after setjmp, read after longjmp */

	if (!row)
		return -ENOMEM;
	memset(&c, 0, sizeof(c));
	c.err = jpeg_std_error(&err.pub);
	err.pub.error_exit = c_error_exit;
	err.pub.output_message = c_output_message;
	err.code = 0;
	if (setjmp(err.jb)) {
		ret = err.code ? err.code : -EINVAL;
		goto out_destroy;
	}
	jpeg_create_compress(&c);
	jpeg_mem_dest(&c, &mem, &memlen);
	c.image_width = w;
	c.image_height = h;
	c.input_components = ncomp;
	c.in_color_space = ncomp == 1 ? JCS_GRAYSCALE : ncomp == 4 ? JCS_CMYK : JCS_RGB;
	jpeg_set_defaults(&c);
	if (ncomp == 4)
		jpeg_set_colorspace(&c, JCS_CMYK); /* writes an Adobe marker, transform 0 */
	jpeg_set_quality(&c, quality, TRUE);
	if (ncomp == 3 && (flags & GM_SYNTH_444)) {
		c.comp_info[0].h_samp_factor = 1;
		c.comp_info[0].v_samp_factor = 1;
	} else if (ncomp == 3 && (flags & GM_SYNTH_422)) {
		c.comp_info[0].h_samp_factor = 2;
		c.comp_info[0].v_samp_factor = 1;
	}
	if (flags & GM_SYNTH_PROGRESSIVE)
		jpeg_simple_progression(&c);
	jpeg_start_compress(&c, TRUE);
	while (c.next_scanline < h) {
		const uint8_t *src = rgb + (size_t)c.next_scanline * w * 3;
		JSAMPROW rp = row;
		for (uint32_t x = 0; x < w; x++) {
			int r = src[3 * x], g = src[3 * x + 1], b = src[3 * x + 2];
			if (ncomp == 1) {
				row[x] = (uint8_t)((77 * r + 150 * g + 29 * b + 128) >> 8);
			} else if (ncomp == 4) {
				/* Inverted (Adobe) CMYK: stored = 255 - ink; K ink = 255 - max. */
				int mx = r > g ? (r > b ? r : b) : (g > b ? g : b);
				for (int k = 0; k < 3; k++) {
					int v = src[3 * x + k];
					row[4 * x + k] =
					    (uint8_t)(mx ? 255 - ((mx - v) * 255 + mx / 2) / mx
							 : 255);
				}
				row[4 * x + 3] = (uint8_t)mx;
			} else {
				memcpy(row + 3 * x, src + 3 * x, 3);
			}
		}
		jpeg_write_scanlines(&c, &rp, 1);
	}
	jpeg_finish_compress(&c);
	*out = mem;
	*len = memlen;
	mem = NULL;

out_destroy:
	jpeg_destroy_compress(&c);
	free(mem);
	free(row);
	return ret;
}

int gm_synth_jpeg_mem(uint32_t w, uint32_t h, uint64_t seed, unsigned flags, int quality,
		      uint8_t **out, size_t *len)
{
	if (quality == 0)
		quality = 90;
	if (w == 0 || h == 0 || w > JPEG_MAX_DIM || h > JPEG_MAX_DIM || quality < 1 ||
	    quality > 100 || !out || !len)
		return -EINVAL;
	uint8_t *rgb = malloc((size_t)w * h * 3);
	if (!rgb)
		return -ENOMEM;
	paint(rgb, w, h, seed, flags);
	int ret = encode(rgb, w, h, flags, quality, out, len);
	free(rgb);
	return ret;
}

/* Write all of buf to path (created or truncated). 0 or -errno. */
static int write_file(const char *path, const void *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	int ret = 0;
	if (fd < 0)
		return -errno;
	for (size_t off = 0; off < len;) {
		ssize_t n = write(fd, (const char *)buf + off, len - off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			ret = -errno;
			goto out_close;
		}
		off += (size_t)n;
	}
out_close:
	if (close(fd) < 0 && ret == 0)
		ret = -errno;
	if (ret)
		unlink(path);
	return ret;
}

int gm_synth_write_jpeg(const char *path, uint32_t w, uint32_t h, uint64_t seed, unsigned flags)
{
	uint8_t *buf;
	size_t len;
	int ret = gm_synth_jpeg_mem(w, h, seed, flags, 90, &buf, &len);
	if (ret)
		return ret;
	ret = write_file(path, buf, len);
	free(buf);
	return ret;
}

/* Offset of the first marker 0xFF <m> after the SOI, or 0 if none. */
static size_t find_marker(const uint8_t *b, size_t len, uint8_t m)
{
	size_t i = 2;
	while (i + 4 <= len && b[i] == 0xff) {
		if (b[i + 1] == m)
			return i;
		i += 2 + ((size_t)b[i + 2] << 8 | b[i + 3]);
	}
	return 0;
}

int gm_synth_bomb_mem(uint32_t w, uint32_t h, uint8_t **out, size_t *len)
{
	if (w == 0 || h == 0 || w > JPEG_MAX_DIM || h > JPEG_MAX_DIM)
		return -EINVAL;
	int ret = gm_synth_jpeg_mem(16, 16, 1, GM_SYNTH_FLAT, 90, out, len);
	if (ret)
		return ret;
	size_t sof = find_marker(*out, *len, 0xc0);
	if (!sof) {
		free(*out);
		*out = NULL; /* callers free(*out) on any return */
		return -EINVAL;
	}
	/* SOF0: FF C0, length(2), precision(1), height(2), width(2) */
	(*out)[sof + 5] = (uint8_t)(h >> 8);
	(*out)[sof + 6] = (uint8_t)h;
	(*out)[sof + 7] = (uint8_t)(w >> 8);
	(*out)[sof + 8] = (uint8_t)w;
	return 0;
}

int gm_synth_write_bad(const char *path, enum gm_synth_bad kind, uint64_t seed)
{
	static const uint8_t png[] = {0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a, 0, 0,
				      0,    13,	 'I', 'H', 'D',	 'R',  0,    0,	   1, 0,
				      0,    0,	 1,   0,   8,	 2,    0,    0,	   0};
	uint8_t *buf = NULL;
	size_t len = 0, at;
	int ret;

	switch (kind) {
	case GM_SYNTH_BAD_EMPTY:
		return write_file(path, "", 0);
	case GM_SYNTH_BAD_NOT_JPEG:
		return write_file(path, png, sizeof(png));
	case GM_SYNTH_BAD_BOMB:
		ret = gm_synth_bomb_mem(30000, 30000, &buf, &len);
		break;
	case GM_SYNTH_BAD_TRUNCATED:
		ret = gm_synth_jpeg_mem(320, 240, seed, 0, 90, &buf, &len);
		if (ret)
			break;
		at = find_marker(buf, len, 0xda);
		if (!at) {
			ret = -EINVAL;
			break;
		}
		len = at + 2 + ((size_t)buf[at + 2] << 8 | buf[at + 3]) + 16;
		break;
	case GM_SYNTH_BAD_CORRUPT:
		ret = gm_synth_jpeg_mem(320, 240, seed, 0, 90, &buf, &len);
		if (ret)
			break;
		at = find_marker(buf, len, 0xc4);
		if (!at) {
			ret = -EINVAL;
			break;
		}
		/* FF C4, length(2), class/id(1), 16 code counts: make them sum past 256 */
		memset(buf + at + 5, 0xff, 16);
		break;
	default:
		return -EINVAL;
	}
	if (ret == 0)
		ret = write_file(path, buf, len);
	free(buf);
	return ret;
}

/* ---- datasets ----------------------------------------------------------------- */

/* mkdir -p; 0 or -errno. path is modified temporarily. */
static int mkdirs(char *path)
{
	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		int r = mkdir(path, 0755);
		*p = '/';
		if (r < 0 && errno != EEXIST)
			return -errno;
	}
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		return -errno;
	struct stat st;
	if (stat(path, &st) < 0)
		return -errno;
	return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

/* Image i of a dataset: size and flags, drawn from its own stream. */
static void pick_image(uint64_t seed, uint32_t i, uint32_t *w, uint32_t *h, unsigned *flags)
{
	struct gm_rng r;
	gm_rng_init(&r, seed, STREAM_SYNTH_IMAGE, i, 0);
	double u = gm_rng_uniform(&r);
	if (u < 0.40) {
		*w = 500, *h = 375;
	} else if (u < 0.55) {
		*w = 375, *h = 500;
	} else if (u < 0.65) {
		*w = 500, *h = 333;
	} else {
		/* long side 250..800, aspect 1..1.8, 3/4 landscape */
		uint32_t lng = 250 + (uint32_t)gm_rng_below(&r, 551);
		uint32_t shrt = (uint32_t)(lng / (1.0 + 0.8 * gm_rng_uniform(&r)));
		if (shrt < 200)
			shrt = 200;
		if (gm_rng_below(&r, 4))
			*w = lng, *h = shrt;
		else
			*w = shrt, *h = lng;
	}
	double v = gm_rng_uniform(&r);
	*flags = v < 0.03   ? GM_SYNTH_GRAY
		 : v < 0.08 ? GM_SYNTH_PROGRESSIVE
		 : v < 0.13 ? GM_SYNTH_444
		 : v < 0.14 ? GM_SYNTH_CMYK
			    : 0;
}

int gm_synth_write(const char *dir, uint32_t n, uint32_t classes, uint64_t seed, int quality,
		   uint64_t *bytes_out, char *errbuf, size_t errlen)
{
	char path[PATH_MAX];
	uint64_t total = 0;
	int width = 2, ret = 0;

	if (errlen)
		errbuf[0] = '\0';
	if (quality == 0)
		quality = 90;
	if (!dir || !*dir || classes == 0 || quality < 1 || quality > 100) {
		if (errlen)
			snprintf(errbuf, errlen, "gm_synth_write: bad arguments");
		return -EINVAL;
	}
	for (uint32_t c = classes - 1; c >= 100; c /= 10)
		width++;
	for (uint32_t c = 0; c < classes && c < n; c++) {
		if (snprintf(path, sizeof(path), "%s/class_%0*u", dir, width, c) >=
		    (int)sizeof(path)) {
			ret = -ENAMETOOLONG;
			goto out_err;
		}
		ret = mkdirs(path);
		if (ret)
			goto out_err;
	}
	for (uint32_t i = 0; i < n; i++) {
		uint32_t w, h;
		unsigned flags;
		uint8_t *buf;
		size_t len;
		pick_image(seed, i, &w, &h, &flags);
		if (snprintf(path, sizeof(path), "%s/class_%0*u/img_%06u.jpg", dir, width,
			     i % classes, i) >= (int)sizeof(path)) {
			ret = -ENAMETOOLONG;
			goto out_err;
		}
		ret = gm_synth_jpeg_mem(w, h, seed ^ ((uint64_t)i << 20) ^ i, flags, quality, &buf,
					&len);
		if (ret)
			goto out_err;
		ret = write_file(path, buf, len);
		free(buf);
		if (ret)
			goto out_err;
		total += len;
	}
	if (bytes_out)
		*bytes_out = total;
	return 0;

out_err:
	if (errlen)
		gm_errf(errbuf, errlen, "gm_synth_write: %s: %s", path, strerror(-ret));
	return ret;
}

int gm_synth_write_shards(const char *dir, uint32_t n, uint32_t classes, uint64_t seed, int quality,
			  uint32_t per_shard, uint64_t *bytes_out, char *errbuf, size_t errlen)
{
	char path[PATH_MAX], key[64];
	struct gm_tar_writer *w = NULL;
	uint64_t total = 0;
	uint32_t width = 2;
	int ret;

	if (errlen)
		errbuf[0] = '\0';
	if (quality == 0)
		quality = 90;
	if (!dir || !*dir || classes == 0 || per_shard == 0 || quality < 1 || quality > 100) {
		if (errlen)
			snprintf(errbuf, errlen, "gm_synth_write_shards: bad arguments");
		return -EINVAL;
	}
	for (uint32_t c = classes - 1; c >= 100; c /= 10)
		width++;
	snprintf(path, sizeof(path), "%s", dir);
	if ((ret = mkdirs(path)) || (ret = gm_tar_writer_open(&w, dir, per_shard, false)))
		goto out_err;
	/* ImageFolder order of gm_synth_write's tree: class-major, then image number */
	for (uint32_t c = 0; c < classes && c < n; c++)
		for (uint32_t i = c; i < n; i += classes) {
			uint32_t iw, ih;
			unsigned flags;
			uint8_t *buf;
			size_t len;
			pick_image(seed, i, &iw, &ih, &flags);
			ret = gm_synth_jpeg_mem(iw, ih, seed ^ ((uint64_t)i << 20) ^ i, flags,
						quality, &buf, &len);
			if (ret)
				goto out_err;
			snprintf(key, sizeof(key), "class_%0*u/img_%06u", (int)width, c, i);
			ret = gm_tar_writer_add(w, key, "jpg", buf, len, c);
			free(buf);
			if (ret) {
				snprintf(path, sizeof(path), "%s", gm_tar_writer_path(w));
				goto out_err;
			}
			total += len;
		}
	ret = gm_tar_writer_commit(w); /* the shards get their names only now */
	if (ret) {
		snprintf(path, sizeof(path), "%s", gm_tar_writer_path(w));
		goto out_err;
	}
	gm_tar_writer_close(w);
	if (bytes_out)
		*bytes_out = total;
	return 0;

out_err:
	if (errlen) {
		char cause[200];
		gm_errf(errbuf, errlen, "gm_synth_write_shards: %s: %s", path,
			gm_write_cause(ret, dir, cause, sizeof(cause)));
	}
	gm_tar_writer_close(w); /* not committed: removes the temporaries */
	return ret;
}
