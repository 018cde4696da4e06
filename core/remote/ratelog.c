/*
 * ratelog.c - a per-address rate limiter for log lines a remote party can
 * cause (ratelog.h).
 *
 * The idea: a small table of addresses, each with the start of its window,
 * the lines said and the lines held back in it, plus one shared window for
 * all addresses together (the cap `total`). Lookups are linear: the table
 * holds a few dozen addresses (the agent's peers, 64 at most, and whoever
 * the control port refuses), and a line costs a scan of it, far less than
 * the formatting and the write it may save. An address that does not fit
 * is counted under GM_RATELOG_OTHERS, so nothing is ever lost from the
 * counts; an entry is freed only by the flush that says its summary.
 *
 * Not here: the clock, the words, the writing (the caller's).
 */

#include "ratelog.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct entry {
	bool used;
	char addr[GM_RATELOG_ADDR];
	int64_t start; /* its window opened then */
	uint32_t said; /* lines said in it */
	uint64_t held; /* lines held back in it */
};

struct gm_ratelog {
	struct gm_ratelog_cfg cfg;
	int64_t gstart; /* the window of all addresses together */
	uint32_t gsaid;
	bool gopen;
	uint64_t held_all;
	struct entry e[]; /* cfg.slots, then the one of GM_RATELOG_OTHERS */
};

int gm_ratelog_create(struct gm_ratelog **out, const struct gm_ratelog_cfg *cfg)
{
	*out = NULL;
	if (!cfg->lines || cfg->total < cfg->lines || !cfg->window_ms || !cfg->slots ||
	    cfg->slots > 4096)
		return -EINVAL;
	struct gm_ratelog *rl = calloc(1, sizeof(*rl) + (cfg->slots + 1) * sizeof(struct entry));
	if (!rl)
		return -ENOMEM;
	rl->cfg = *cfg;
	*out = rl;
	return 0;
}

void gm_ratelog_destroy(struct gm_ratelog *rl)
{
	free(rl);
}

static void set_addr(struct entry *e, const char *addr)
{
	size_t n = strnlen(addr, sizeof(e->addr) - 1);
	memcpy(e->addr, addr, n);
	e->addr[n] = '\0';
}

/* addr's entry: its own, a free one, or the shared one of the others. */
static struct entry *entry_of(struct gm_ratelog *rl, const char *addr)
{
	struct entry *free_ = NULL, *others = &rl->e[rl->cfg.slots];
	if (!addr || !addr[0])
		addr = GM_RATELOG_OTHERS;
	for (uint32_t i = 0; i < rl->cfg.slots; i++) {
		struct entry *e = &rl->e[i];
		if (e->used && !strncmp(e->addr, addr, sizeof(e->addr) - 1))
			return e;
		if (!e->used && !free_)
			free_ = e;
	}
	struct entry *e = free_ ? free_ : others;
	if (!e->used) {
		*e = (struct entry){.used = true};
		set_addr(e, free_ ? addr : GM_RATELOG_OTHERS);
	}
	return e;
}

bool gm_ratelog_line(struct gm_ratelog *rl, const char *addr, int64_t now)
{
	struct entry *e = entry_of(rl, addr);
	if (e->said + e->held == 0 || (now - e->start >= rl->cfg.window_ms && !e->held)) {
		e->start = now; /* its first line, or its window ended with nothing to say */
		e->said = 0;
	}
	if (!rl->gopen || now - rl->gstart >= rl->cfg.window_ms) {
		rl->gopen = true;
		rl->gstart = now;
		rl->gsaid = 0;
	}
	if (e->said < rl->cfg.lines && rl->gsaid < rl->cfg.total) {
		e->said++;
		rl->gsaid++;
		return true;
	}
	e->held++;
	rl->held_all++;
	return false;
}

unsigned gm_ratelog_flush(struct gm_ratelog *rl, int64_t now, gm_ratelog_say_fn *say, void *arg)
{
	unsigned n = 0;
	for (uint32_t i = 0; i <= rl->cfg.slots; i++) {
		struct entry *e = &rl->e[i];
		if (!e->used || (now != INT64_MAX && now - e->start < rl->cfg.window_ms))
			continue;
		if (e->held) {
			say(arg, e->addr, e->held);
			n++;
		}
		e->used = false;
	}
	return n;
}

uint64_t gm_ratelog_held(const struct gm_ratelog *rl)
{
	return rl->held_all;
}
