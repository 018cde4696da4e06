/*
 * reader_bench.c - io_uring batch reader vs a plain open/pread/close loop.
 *
 *   reader_bench DIR [--depth N] [--batch N] [--reps N] [--cold]
 *
 * Indexes DIR as an ImageFolder tree, warms the page cache with one untimed pass,
 * then times both readers on the same file list, alternating them for --reps rounds
 * and keeping each one's best round. Both compute the same cheap checksum (length
 * plus first and last byte) so each proves it read the bytes and they agree. Prints
 * one JSON line: files/s and MB/s of each and the uring/plain ratio (wall time), and
 * CPU microseconds per file of each (process CPU time, io-wq threads included: less
 * disturbed by other load on a shared machine) with their ratio.
 *
 * Measures the read path only (no decode). Warm page cache by default; --cold
 * drops the files' own pages (posix_fadvise DONTNEED, nothing machine-wide) before
 * each timed pass, so both readers fetch from the device (or the hypervisor's cache
 * behind a virtual disk).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "goldminer/dataset.h"
#include "goldminer/reader.h"

static double clock_s(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double now(void)
{
	return clock_s(CLOCK_MONOTONIC);
}

/* CPU time of the whole process, io_uring's io-wq worker threads included. */
static double cpu(void)
{
	return clock_s(CLOCK_PROCESS_CPUTIME_ID);
}

struct sum {
	uint64_t check, bytes, errors;
};

static void account(struct sum *s, const unsigned char *p, size_t len)
{
	s->check += len + (len ? p[0] + 7u * p[len - 1] : 0);
	s->bytes += len;
}

static int on_file(void *arg, unsigned i, const void *data, size_t len, int err)
{
	struct sum *s = arg;

	(void)i;
	if (err)
		s->errors++;
	else
		account(s, data, len);
	return 0;
}

static int run_uring(struct gm_reader *r, const char **paths, const uint64_t *hints, unsigned n,
		     unsigned batch, struct sum *s)
{
	for (unsigned i = 0; i < n; i += batch) {
		unsigned k = n - i < batch ? n - i : batch;
		int ret = gm_reader_read(r, paths + i, hints + i, k, on_file, s);

		if (ret) {
			fprintf(stderr, "reader_bench: %s\n", gm_reader_errmsg(r));
			return ret;
		}
	}
	return 0;
}

/* The baseline: what a simple data loader does, with the same buffer reuse. */
static int run_plain(const char **paths, const uint64_t *hints, unsigned n, struct sum *s)
{
	static unsigned char *buf;
	static size_t cap;

	for (unsigned i = 0; i < n; i++) {
		size_t len = 0, need = hints[i] + 4096;
		ssize_t got;
		int fd;

		if (need > cap) {
			free(buf);
			cap = need * 2;
			buf = malloc(cap);
			if (!buf)
				return -ENOMEM;
		}
		fd = open(paths[i], O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			s->errors++;
			continue;
		}
		while ((got = pread(fd, buf + len, cap - len, (off_t)len)) > 0) {
			len += (size_t)got;
			if (len == cap) {
				unsigned char *nb = realloc(buf, cap * 2);

				if (!nb) {
					close(fd);
					return -ENOMEM;
				}
				buf = nb;
				cap *= 2;
			}
		}
		close(fd);
		if (got < 0)
			s->errors++;
		else
			account(s, buf, len);
	}
	return 0;
}

/* --cold: drop these files' pages from the page cache (only theirs, not the whole
 * machine's) so the next pass reads from the device. */
static void evict(const char **paths, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		int fd = open(paths[i], O_RDONLY | O_CLOEXEC);

		if (fd >= 0) {
			(void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
			close(fd);
		}
	}
}

int main(int argc, char **argv)
{
	unsigned depth = 64, batch = 256, reps = 5, cold = 0;
	double best_u = 1e30, best_p = 1e30, cpu_u = 1e30, cpu_p = 1e30;
	struct sum su = {0}, sp = {0};
	struct gm_dataset *ds;
	struct gm_reader *r;
	const char **paths;
	uint64_t *hints;
	char err[512];
	unsigned n;
	int ret;

	if (argc < 2) {
		fprintf(stderr, "usage: %s DIR [--depth N] [--batch N] [--reps N] [--cold]\n",
			argv[0]);
		return 2;
	}
	for (int i = 2; i < argc; i += 2) {
		unsigned v;

		if (!strcmp(argv[i], "--cold")) {
			cold = 1;
			i--;
			continue;
		}
		if (i + 1 >= argc)
			break;
		v = (unsigned)strtoul(argv[i + 1], NULL, 10);
		if (!strcmp(argv[i], "--depth"))
			depth = v;
		else if (!strcmp(argv[i], "--batch"))
			batch = v;
		else if (!strcmp(argv[i], "--reps"))
			reps = v;
	}
	if (!depth || !batch || !reps) {
		fprintf(stderr, "reader_bench: --depth, --batch and --reps must be > 0\n");
		return 2;
	}
	ret = gm_dataset_open(&ds, argv[1], err, sizeof(err));
	if (ret) {
		fprintf(stderr, "reader_bench: %s\n", err);
		return 1;
	}
	n = gm_dataset_count(ds);
	paths = calloc(n, sizeof(*paths));
	hints = calloc(n, sizeof(*hints));
	if (!paths || !hints)
		return 1;
	for (unsigned i = 0; i < n; i++) {
		paths[i] = gm_dataset_path(ds, i);
		hints[i] = gm_dataset_file_size(ds, i);
	}
	ret = gm_reader_create(&r, depth);
	if (ret) {
		fprintf(stderr, "reader_bench: %s\n", gm_reader_errmsg(NULL));
		return 1;
	}

	/* Warm-up: page cache, buffers, ring. */
	if (run_uring(r, paths, hints, n, batch, &su) || run_plain(paths, hints, n, &sp))
		return 1;
	for (unsigned k = 0; k < reps; k++) {
		struct sum a = {0}, b = {0};
		double c0, t0, t1, t2, c1, c2, tp, cp;

		if (cold)
			evict(paths, n);
		c0 = cpu();
		t0 = now();
		if (run_uring(r, paths, hints, n, batch, &a))
			return 1;
		t1 = now();
		c1 = cpu();
		if (cold)
			evict(paths, n);
		tp = now();
		cp = cpu();
		if (run_plain(paths, hints, n, &b))
			return 1;
		t2 = now();
		c2 = cpu();
		if (c1 - c0 < cpu_u)
			cpu_u = c1 - c0;
		if (c2 - cp < cpu_p)
			cpu_p = c2 - cp;
		if (a.check != b.check || a.bytes != b.bytes || a.errors || b.errors) {
			fprintf(stderr,
				"reader_bench: readers disagree (%" PRIu64 "/%" PRIu64
				" bytes, %" PRIu64 "/%" PRIu64 " errors)\n",
				a.bytes, b.bytes, a.errors, b.errors);
			return 1;
		}
		su = a;
		if (t1 - t0 < best_u)
			best_u = t1 - t0;
		if (t2 - tp < best_p)
			best_p = t2 - tp;
	}
	printf(
	    "{\"bench\":\"reader\",\"dir\":\"%s\",\"files\":%u,\"bytes\":%" PRIu64
	    ",\"cold\":%s,\"depth\":%u,\"batch\":%u,\"reps\":%u,"
	    "\"uring_files_s\":%.0f,\"uring_mb_s\":%.1f,"
	    "\"plain_files_s\":%.0f,\"plain_mb_s\":%.1f,\"ratio\":%.3f,"
	    "\"uring_cpu_us_per_file\":%.2f,\"plain_cpu_us_per_file\":%.2f,\"cpu_ratio\":%.3f}\n",
	    argv[1], n, su.bytes, cold ? "true" : "false", depth, batch, reps, n / best_u,
	    su.bytes / best_u / 1e6, n / best_p, su.bytes / best_p / 1e6, best_p / best_u,
	    cpu_u / n * 1e6, cpu_p / n * 1e6, cpu_p / cpu_u);
	gm_reader_destroy(r);
	free(paths);
	free(hints);
	gm_dataset_close(ds);
	return 0;
}
