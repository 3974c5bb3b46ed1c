/* SPDX-License-Identifier: MIT */
/* The dictionary SP 800-90B's MultiMMC (6.3.9) and LZ78Y (6.3.10) predictors keep: strings x of
 * the samples (held as where they occur, not copied), each with the counts of the samples y that
 * followed it and its prediction, the y seen most often (ties to the larger y). Two open-address
 * hash tables: one of strings, one of (string, y) counts. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct assess_dict_x {
	uint64_t hash;
	uint32_t pos;  /* the string is s[pos .. pos + len - 1] */
	uint8_t len;   /* 0: an empty slot */
	uint8_t pred;  /* the y seen most often after it */
	uint32_t best; /* how often */
};

struct assess_dict_y {
	uint32_t x; /* the string's slot + 1; 0: an empty slot */
	uint8_t y;
	uint32_t count;
};

struct assess_dict {
	const uint8_t *s;
	struct assess_dict_x *xs;
	struct assess_dict_y *ys;
	size_t x_cap, x_n, y_cap, y_n;
};

/* The hash of the string one sample longer at the front: h of s[pos + 1 ..], c = s[pos]. */
static inline uint64_t assess_dict_hash(uint64_t h, uint8_t c)
{
	h = (h + c + 1) * 0x9E3779B97F4A7C15ull;
	return h ^ (h >> 29);
}

/* An empty dictionary over the samples s. -ENOMEM. */
int assess_dict_init(struct assess_dict *d, const uint8_t *s);
void assess_dict_done(struct assess_dict *d);

/* The slot of s[pos .. pos + len - 1] (len 1..255), hash its assess_dict_hash(), or -1. */
long assess_dict_find(const struct assess_dict *d, uint32_t pos, uint8_t len, uint64_t hash);
/* The same string's slot, added when absent. -ENOMEM. */
long assess_dict_get(struct assess_dict *d, uint32_t pos, uint8_t len, uint64_t hash);
/* One more y after the string in slot x; a y never seen after it is added only when make_new
 * says so. Returns 1 when it added one, 0 when not, -ENOMEM. */
int assess_dict_bump(struct assess_dict *d, long x, uint8_t y, bool make_new);
