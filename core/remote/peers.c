/*
 * peers.c - the entries of --peers and --peers-file and what they resolve to
 * (peers.h): the parsers, one lookup, and the resolver thread.
 *
 * The idea: the agent's loop must never wait on DNS. The thread owns every
 * call to getaddrinfo for a name; the loop hands it the names (a copy) and
 * takes its answers (a copy) under one mutex, held only to copy. The thread
 * and the loop share the resolver by a count of two: whichever leaves last
 * frees it, so stopping never waits for a lookup in flight (the plugin stays
 * loaded for the life of the process: remote_load.c). An answer is sorted and
 * cut at PEER_ADDRS, so a name with more addresses gives the same ones in
 * every round (DNS servers rotate their answers).
 *
 * Not here: what the agent does with the addresses (agent.c).
 */

#include "peers.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "goldminer/util.h"

/* ---- entries ---------------------------------------------------------------- */

static bool is_name(const char *h)
{
	size_t len = strlen(h);
	if (!len || len > 253 || h[0] == '-' || h[0] == '.')
		return false;
	for (const char *s = h; *s; s++)
		if (!isalnum((unsigned char)*s) && *s != '-' && *s != '.' && *s != '_')
			return false;
	return true;
}

int gm_peers_entry(const char *s, uint16_t dport, struct peer_entry *e, char *err, size_t errlen)
{
	char buf[300], *host, *port = NULL;
	unsigned char bin[16];
	size_t len;
	while (isspace((unsigned char)*s))
		s++;
	len = strlen(s);
	while (len && isspace((unsigned char)s[len - 1]))
		len--;
	if (!len || len >= sizeof(buf))
		goto bad;
	memcpy(buf, s, len);
	buf[len] = '\0';
	host = buf;
	if (buf[0] == '[') { /* [V6] or [V6]:PORT */
		char *close = strchr(buf, ']');
		if (!close || (close[1] && close[1] != ':'))
			goto bad;
		*close = '\0';
		host = buf + 1;
		port = close[1] ? close + 2 : NULL;
	} else {
		char *colon = strchr(buf, ':');
		if (colon && !strchr(colon + 1, ':')) { /* one colon: NAME:PORT */
			*colon = '\0';
			port = colon + 1;
		} /* more: a bare IPv6 address, no port */
	}
	memset(e, 0, sizeof(*e));
	e->numeric = inet_pton(AF_INET, host, bin) == 1 || inet_pton(AF_INET6, host, bin) == 1;
	if (!e->numeric && !is_name(host))
		goto bad;
	if (port) {
		char *end;
		unsigned long p = strtoul(port, &end, 10);
		if (!isdigit((unsigned char)*port) || *end || p < 1 || p > 65535)
			goto bad;
		e->port = (uint16_t)p;
	} else if (!dport) {
		gm_errf(err, errlen,
			"'%.*s' names no port, and --listen's port is 0 (give HOST:PORT, or "
			"--listen ADDR:PORT with a port of its own)",
			(int)len, s);
		return -EINVAL;
	} else {
		e->port = dport;
	}
	snprintf(e->host, sizeof(e->host), "%s", host);
	return 0;
bad:
	gm_errf(err, errlen,
		"'%.*s' is not HOST:PORT or HOST (a DNS name or an IPv4 or [IPv6] address, a "
		"port from 1 to 65535)",
		(int)(len < 256 ? len : 256), s);
	return -EINVAL;
}

int gm_peers_list(const char *list, uint16_t dport, struct peer_entry *e, int max, int *n,
		  char *err, size_t errlen)
{
	char buf[4096], why[512];
	if (!list)
		return 0;
	if (strlen(list) >= sizeof(buf)) {
		gm_errf(err, errlen, "--peers: longer than %zu characters (use --peers-file)",
			sizeof(buf) - 1);
		return -EINVAL;
	}
	snprintf(buf, sizeof(buf), "%s", list);
	for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (*n == max) {
			gm_errf(err, errlen, "--peers: more than %d entries", max);
			return -EINVAL;
		}
		if (gm_peers_entry(t, dport, &e[*n], why, sizeof(why))) {
			gm_errf(err, errlen, "--peers: %s", why);
			return -EINVAL;
		}
		(*n)++;
	}
	return 0;
}

int gm_peers_file(const char *path, uint16_t dport, struct peer_entry *e, int max, int *n,
		  char *err, size_t errlen)
{
	char why[512], *text = NULL;
	struct stat st;
	int rc = 0, line = 0, fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		gm_errf(err, errlen, "--peers-file %s: %s", path, strerror(-rc));
		return rc;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size > PEERS_FILE_MAX) {
		rc = -EINVAL;
		gm_errf(err, errlen, "--peers-file %s: not a regular file of at most %d bytes",
			path, PEERS_FILE_MAX);
		goto out_close;
	}
	text = malloc((size_t)st.st_size + 1);
	ssize_t got = text ? read(fd, text, (size_t)st.st_size) : -1;
	if (got < 0) {
		rc = text ? -errno : -ENOMEM;
		gm_errf(err, errlen, "--peers-file %s: %s", path, strerror(-rc));
		goto out_free;
	}
	text[got] = '\0';
	for (char *l = text, *nl; l && *l; l = nl) {
		nl = strchr(l, '\n');
		if (nl)
			*nl++ = '\0';
		line++;
		char *hash = strchr(l, '#');
		if (hash)
			*hash = '\0';
		size_t k = strspn(l, " \t\r");
		if (!l[k])
			continue;
		if (*n == max) {
			rc = -EINVAL;
			gm_errf(err, errlen, "%s:%d: more than %d peers", path, line, max);
			goto out_free;
		}
		if (gm_peers_entry(l, dport, &e[*n], why, sizeof(why))) {
			rc = -EINVAL;
			gm_errf(err, errlen, "%s:%d: %s", path, line, why);
			goto out_free;
		}
		(*n)++;
	}
out_free:
	free(text);
out_close:
	close(fd);
	return rc;
}

/* ---- lookups ---------------------------------------------------------------- */

/* An address's sort key: 4 or 6, then its 16 bytes (IPv4 in the first 4). */
static void ip_key(const char *ip, unsigned char key[17])
{
	memset(key, 0, 17);
	key[0] = inet_pton(AF_INET, ip, key + 1) == 1 ? 4 : 6;
	if (key[0] == 6 && inet_pton(AF_INET6, ip, key + 1) != 1)
		key[0] = 7; /* not an address: last */
}

int gm_peers_ipcmp(const char *a, const char *b)
{
	unsigned char ka[17], kb[17];
	ip_key(a, ka);
	ip_key(b, kb);
	return memcmp(ka, kb, sizeof(ka));
}

static int cmp_ip(const void *a, const void *b)
{
	return gm_peers_ipcmp(a, b);
}

bool gm_peers_temporary(int gai)
{
#ifdef EAI_NODATA
	if (gai == EAI_NODATA)
		return false;
#endif
	return gai && gai != EAI_NONAME;
}

int gm_peers_lookup(const char *host, bool numeric_only, struct peer_answer *a)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				 .ai_flags = numeric_only ? AI_NUMERICHOST : 0};
	struct addrinfo *ai = NULL;
	/* every address, sorted: cut at PEER_ADDRS after sorting (a stable choice) */
	static __thread char all[1024][INET6_ADDRSTRLEN];
	int total = 0;
	memset(a, 0, sizeof(*a));
	snprintf(a->host, sizeof(a->host), "%s", host);
	a->gai = getaddrinfo(host, NULL, &hints, &ai);
	for (struct addrinfo *p = a->gai ? NULL : ai; p && total < 1024; p = p->ai_next) {
		char ip[INET6_ADDRSTRLEN];
		if ((p->ai_family != AF_INET && p->ai_family != AF_INET6) ||
		    getnameinfo(p->ai_addr, p->ai_addrlen, ip, sizeof(ip), NULL, 0, NI_NUMERICHOST))
			continue;
		bool dup = false;
		for (int i = 0; i < total && !dup; i++)
			dup = !strcmp(all[i], ip);
		if (!dup)
			snprintf(all[total++], INET6_ADDRSTRLEN, "%s", ip);
	}
	if (ai)
		freeaddrinfo(ai);
	qsort(all, (size_t)total, INET6_ADDRSTRLEN, cmp_ip);
	a->total = total;
	a->n = total < PEER_ADDRS ? total : PEER_ADDRS;
	for (int i = 0; i < a->n; i++)
		memcpy(a->ip[i], all[i], INET6_ADDRSTRLEN);
	if (!a->gai && !total)
		a->gai = EAI_NONAME; /* no IPv4 or IPv6 address */
	return a->gai;
}

/* ---- the resolver thread ------------------------------------------------------ */

struct peers_resolver {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int refs; /* the loop's and the thread's: the last to leave frees it */
	bool stop, kick, ready;
	int efd;
	uint32_t refresh_ms;
	char names[PEER_ENTRIES][256]; /* the loop's: what to look up */
	int nnames;
	struct peer_answer out[PEER_ENTRIES]; /* the last round's, for the loop */
	int nout;
	/* the thread's own */
	char mine[PEER_ENTRIES][256];
	struct peer_answer now[PEER_ENTRIES], last[PEER_ENTRIES];
	int nmine, nlast;
};

static void leave(struct peers_resolver *res)
{
	bool last = --res->refs == 0;
	pthread_mutex_unlock(&res->mu);
	if (!last)
		return;
	pthread_cond_destroy(&res->cv);
	pthread_mutex_destroy(&res->mu);
	close(res->efd);
	free(res);
}

/* One round: every name looked up; a temporary failure keeps the last answer. */
static void round_(struct peers_resolver *res)
{
	for (int i = 0; i < res->nmine; i++) {
		struct peer_answer *a = &res->now[i];
		gm_peers_lookup(res->mine[i], false, a);
		if (!gm_peers_temporary(a->gai))
			continue;
		for (int k = 0; k < res->nlast; k++)
			if (!strcmp(res->last[k].host, a->host) && res->last[k].n) {
				int gai = a->gai;
				*a = res->last[k];
				a->gai = gai;
				a->kept = true;
				break;
			}
	}
	memcpy(res->last, res->now, sizeof(res->now[0]) * (size_t)res->nmine);
	res->nlast = res->nmine;
}

static void *resolver_main(void *arg)
{
	struct peers_resolver *res = arg;
	pthread_mutex_lock(&res->mu);
	while (!res->stop) {
		if (!res->kick) {
			struct timespec until;
			clock_gettime(CLOCK_MONOTONIC, &until);
			until.tv_sec += res->refresh_ms / 1000;
			until.tv_nsec += (long)(res->refresh_ms % 1000) * 1000000L;
			if (until.tv_nsec >= 1000000000L) {
				until.tv_sec++;
				until.tv_nsec -= 1000000000L;
			}
			while (!res->stop && !res->kick &&
			       pthread_cond_timedwait(&res->cv, &res->mu, &until) != ETIMEDOUT)
				;
		}
		if (res->stop)
			break;
		res->kick = false;
		res->nmine = res->nnames;
		memcpy(res->mine, res->names, sizeof(res->names[0]) * (size_t)res->nnames);
		pthread_mutex_unlock(&res->mu);
		round_(res); /* without the lock: the loop never waits on DNS */
		pthread_mutex_lock(&res->mu);
		memcpy(res->out, res->now, sizeof(res->now[0]) * (size_t)res->nmine);
		res->nout = res->nmine;
		res->ready = true;
		uint64_t one = 1;
		(void)!write(res->efd, &one, sizeof(one));
	}
	leave(res);
	return NULL;
}

int gm_peers_resolver_start(struct peers_resolver **out, uint32_t refresh_ms, int *efd)
{
	pthread_t t;
	pthread_condattr_t ca;
	int rc;
	*out = NULL;
	struct peers_resolver *res = calloc(1, sizeof(*res));
	if (!res)
		return -ENOMEM;
	res->refresh_ms = refresh_ms ? refresh_ms : PEERS_REFRESH_MS;
	res->refs = 2;
	res->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (res->efd < 0) {
		rc = -errno;
		goto out_free;
	}
	pthread_mutex_init(&res->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&res->cv, &ca);
	pthread_condattr_destroy(&ca);
	rc = -pthread_create(&t, NULL, resolver_main, res);
	if (rc)
		goto out_sync;
	pthread_detach(t);
	*efd = res->efd;
	*out = res;
	return 0;
out_sync:
	pthread_cond_destroy(&res->cv);
	pthread_mutex_destroy(&res->mu);
	close(res->efd);
out_free:
	free(res);
	return rc;
}

void gm_peers_resolver_names(struct peers_resolver *res, const struct peer_entry *e, int n)
{
	pthread_mutex_lock(&res->mu);
	res->nnames = 0;
	for (int i = 0; i < n; i++) {
		bool dup = e[i].numeric;
		for (int k = 0; k < res->nnames && !dup; k++)
			dup = !strcmp(res->names[k], e[i].host);
		if (!dup)
			snprintf(res->names[res->nnames++], 256, "%s", e[i].host);
	}
	res->kick = true;
	pthread_cond_signal(&res->cv);
	pthread_mutex_unlock(&res->mu);
}

void gm_peers_resolver_kick(struct peers_resolver *res)
{
	pthread_mutex_lock(&res->mu);
	res->kick = true;
	pthread_cond_signal(&res->cv);
	pthread_mutex_unlock(&res->mu);
}

bool gm_peers_resolver_pending(struct peers_resolver *res)
{
	uint64_t v;
	return read(res->efd, &v, sizeof(v)) == sizeof(v);
}

int gm_peers_resolver_take(struct peers_resolver *res, struct peer_answer *out, int max)
{
	int n = -1;
	pthread_mutex_lock(&res->mu);
	if (res->ready) {
		n = res->nout < max ? res->nout : max;
		memcpy(out, res->out, sizeof(out[0]) * (size_t)n);
		res->ready = false;
	}
	pthread_mutex_unlock(&res->mu);
	return n;
}

void gm_peers_resolver_stop(struct peers_resolver *res)
{
	if (!res)
		return;
	pthread_mutex_lock(&res->mu);
	res->stop = true;
	pthread_cond_signal(&res->cv);
	leave(res);
}
