/* SPDX-License-Identifier: MIT */
/* Knuth's Algorithms M and B over bytes (m = 256). */
#include "shuffle.h"

#include <assert.h>
#include <string.h>

int eb_shuffle_init(struct eb_shuffle *s, enum eb_shuffle_algorithm algorithm, unsigned k)
{
	assert(s);
	if (algorithm < 0 || algorithm >= _EB_SHUFFLE_ALGORITHM_MAX)
		return -EINVAL;
	if (k < 1 || k > EB_SHUFFLE_TABLE_MAX)
		return -EINVAL;
	*s = (struct eb_shuffle){.algorithm = algorithm, .k = k};
	return 0;
}

unsigned eb_shuffle_fill_left(const struct eb_shuffle *s)
{
	unsigned need = 0;

	assert(s);
	switch (s->algorithm) {
	case EB_SHUFFLE_M:
		need = s->k;
		break;
	case EB_SHUFFLE_B:
		need = s->k + 1;
		break;
	case _EB_SHUFFLE_ALGORITHM_MAX:
	case _EB_SHUFFLE_ALGORITHM_INVALID:
		assert(!"invalid algorithm");
	}
	return need - s->filled;
}

void eb_shuffle_fill(struct eb_shuffle *s, uint8_t x)
{
	assert(eb_shuffle_fill_left(s) > 0);
	/* Knuth fills V[0..k-1] with X_0..X_{k-1}; B then sets Y = X_k. */
	if (s->filled < s->k)
		s->v[s->filled] = x;
	else
		s->y = x;
	s->filled++;
}

/* floor(k * y / m) with m = 256: the high-order part of y picks the entry, as Knuth advises,
 * since the low-order bits of many generators are the weakest. */
static unsigned index_of(const struct eb_shuffle *s, uint8_t y)
{
	return (s->k * (unsigned)y) >> 8;
}

uint8_t eb_shuffle_next_m(struct eb_shuffle *s, uint8_t x, uint8_t y)
{
	unsigned j;
	uint8_t out;

	assert(s->algorithm == EB_SHUFFLE_M && eb_shuffle_fill_left(s) == 0);
	j = index_of(s, y);
	out = s->v[j];
	s->v[j] = x;
	return out;
}

uint8_t eb_shuffle_next_b(struct eb_shuffle *s, uint8_t x)
{
	unsigned j;

	assert(s->algorithm == EB_SHUFFLE_B && eb_shuffle_fill_left(s) == 0);
	j = index_of(s, s->y);
	s->y = s->v[j];
	s->v[j] = x;
	return s->y;
}

void eb_shuffle_wipe(struct eb_shuffle *s)
{
	assert(s);
	explicit_bzero(s->v, sizeof(s->v));
	explicit_bzero(&s->y, sizeof(s->y));
	s->filled = 0;
}

static const char *const algorithm_names[_EB_SHUFFLE_ALGORITHM_MAX] = {
    [EB_SHUFFLE_M] = "m",
    [EB_SHUFFLE_B] = "b",
};

const char *eb_shuffle_algorithm_to_string(enum eb_shuffle_algorithm a)
{
	if (a < 0 || a >= _EB_SHUFFLE_ALGORITHM_MAX)
		return NULL;
	return algorithm_names[a];
}

enum eb_shuffle_algorithm eb_shuffle_algorithm_from_string(const char *s)
{
	if (!s)
		return _EB_SHUFFLE_ALGORITHM_INVALID;
	for (int a = 0; a < (int)_EB_SHUFFLE_ALGORITHM_MAX; a++)
		if (strcmp(s, algorithm_names[a]) == 0)
			return (enum eb_shuffle_algorithm)a;
	return _EB_SHUFFLE_ALGORITHM_INVALID;
}
