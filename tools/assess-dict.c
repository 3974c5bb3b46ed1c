/* SPDX-License-Identifier: MIT */
/* The predictors' dictionary: strings as positions in the samples, counts by (string, y). */
#include "assess-dict.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"

#define CAP_MIN 1024u

/* splitmix64's finalizer: every bit of a slot index depends on every bit of the key, so that
 * linear probing meets no clusters. */
static uint64_t mix(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

int assess_dict_init(struct assess_dict *d, const uint8_t *s)
{
	*d = (struct assess_dict){.s = s, .x_cap = CAP_MIN, .y_cap = CAP_MIN};
	d->xs = calloc(d->x_cap, sizeof(*d->xs));
	d->ys = calloc(d->y_cap, sizeof(*d->ys));
	if (!d->xs || !d->ys) {
		assess_dict_done(d);
		return -ENOMEM;
	}
	return 0;
}

void assess_dict_done(struct assess_dict *d)
{
	free(d->xs);
	free(d->ys);
	d->xs = NULL;
	d->ys = NULL;
}

static bool same(const struct assess_dict *d, const struct assess_dict_x *e, uint32_t pos,
                 uint8_t len, uint64_t hash)
{
	return e->hash == hash && e->len == len && memcmp(d->s + e->pos, d->s + pos, len) == 0;
}

/* The slot holding the string, or the empty one where it would go. Tables are at most half
 * full, so the probe ends. */
static size_t x_slot(const struct assess_dict *d, uint32_t pos, uint8_t len, uint64_t hash)
{
	size_t i = mix(hash) & (d->x_cap - 1);

	while (d->xs[i].len != 0 && !same(d, &d->xs[i], pos, len, hash))
		i = (i + 1) & (d->x_cap - 1);
	return i;
}

static uint64_t y_hash(uint32_t x, uint8_t y)
{
	return mix((uint64_t)x << 8 | y);
}

static size_t y_slot(const struct assess_dict *d, uint32_t x, uint8_t y)
{
	size_t i = y_hash(x, y) & (d->y_cap - 1);

	while (d->ys[i].x != 0 && (d->ys[i].x != x || d->ys[i].y != y))
		i = (i + 1) & (d->y_cap - 1);
	return i;
}

long assess_dict_find(const struct assess_dict *d, uint32_t pos, uint8_t len, uint64_t hash)
{
	size_t i = x_slot(d, pos, len, hash);

	return d->xs[i].len != 0 ? (long)i : -1;
}

/* Doubles the strings' table. Slots move, so the (string, y) table is rebuilt with them. */
static int x_grow(struct assess_dict *d)
{
	struct assess_dict_x *old = d->xs;
	struct assess_dict_y *oldy = d->ys;
	size_t cap = d->x_cap, *moved;

	moved = malloc(cap * sizeof(*moved));
	d->xs = calloc(cap * 2, sizeof(*d->xs));
	d->ys = calloc(d->y_cap, sizeof(*d->ys));
	if (!moved || !d->xs || !d->ys) {
		free(moved);
		free(d->xs);
		free(d->ys);
		d->xs = old;
		d->ys = oldy;
		return -ENOMEM;
	}
	d->x_cap = cap * 2;
	for (size_t i = 0; i < cap; i++) {
		if (old[i].len == 0)
			continue;
		moved[i] = x_slot(d, old[i].pos, old[i].len, old[i].hash);
		d->xs[moved[i]] = old[i];
	}
	for (size_t i = 0; i < d->y_cap; i++) {
		struct assess_dict_y e = oldy[i];

		if (e.x == 0)
			continue;
		e.x = (uint32_t)moved[e.x - 1] + 1;
		d->ys[y_slot(d, e.x, e.y)] = e;
	}
	free(moved);
	free(old);
	free(oldy);
	return 0;
}

static int y_grow(struct assess_dict *d)
{
	struct assess_dict_y *old = d->ys;
	size_t cap = d->y_cap;

	d->ys = calloc(cap * 2, sizeof(*d->ys));
	if (!d->ys) {
		d->ys = old;
		return -ENOMEM;
	}
	d->y_cap = cap * 2;
	for (size_t i = 0; i < cap; i++)
		if (old[i].x != 0)
			d->ys[y_slot(d, old[i].x, old[i].y)] = old[i];
	free(old);
	return 0;
}

long assess_dict_get(struct assess_dict *d, uint32_t pos, uint8_t len, uint64_t hash)
{
	size_t i;
	int r;

	i = x_slot(d, pos, len, hash);
	if (d->xs[i].len != 0)
		return (long)i;
	if (2 * (d->x_n + 1) > d->x_cap) {
		r = x_grow(d);
		if (r < 0)
			return r;
		i = x_slot(d, pos, len, hash);
	}
	d->xs[i] = (struct assess_dict_x){.hash = hash, .pos = pos, .len = len};
	d->x_n++;
	return (long)i;
}

int assess_dict_bump(struct assess_dict *d, long x, uint8_t y, bool make_new)
{
	struct assess_dict_x *e = &d->xs[x];
	uint32_t key = (uint32_t)x + 1;
	size_t i;
	int r, added = 0;

	i = y_slot(d, key, y);
	if (d->ys[i].x == 0) {
		if (!make_new)
			return 0;
		if (2 * (d->y_n + 1) > d->y_cap) {
			r = y_grow(d);
			if (r < 0)
				return r;
			i = y_slot(d, key, y);
		}
		d->ys[i] = (struct assess_dict_y){.x = key, .y = y};
		d->y_n++;
		added = 1;
	}
	d->ys[i].count++;
	/* The most frequent y; of equals, the larger (SP 800-90B 6.3.9 step 3a, 6.3.10). */
	if (d->ys[i].count > e->best || (d->ys[i].count == e->best && y > e->pred)) {
		e->best = d->ys[i].count;
		e->pred = y;
	}
	return added;
}
