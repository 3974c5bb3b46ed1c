/* SPDX-License-Identifier: MIT */
/* Knuth's table shuffles of a byte sequence (TAOCP vol. 2, 3rd ed., section 3.2.2): Algorithm M
 * (MacLaren-Marsaglia), where a second sequence Y picks which table entry of X comes out next, and
 * Algorithm B (Bays-Durham), where the sequence's own last output does. Pure: no I/O, no
 * allocation.
 *
 * A shuffle only reorders: every output byte is an X byte that went in, so the output carries no
 * more entropy than the X bytes it consists of, and Y's entropy cannot be counted at all (if X is
 * constant, so is the output, whatever Y is). What it buys is decorrelation: serial structure in X
 * is broken up over a table of k entries. */
#pragma once

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#define EB_SHUFFLE_TABLE_MAX 256u

enum eb_shuffle_algorithm {
	EB_SHUFFLE_M, /* Algorithm M: X fills the table, Y selects */
	EB_SHUFFLE_B, /* Algorithm B: X fills the table, the last output selects */
	_EB_SHUFFLE_ALGORITHM_MAX,
	_EB_SHUFFLE_ALGORITHM_INVALID = -EINVAL,
};

/* All fields are read-only outside shuffle.c. */
struct eb_shuffle {
	enum eb_shuffle_algorithm algorithm;
	unsigned k;      /* table size, 1..EB_SHUFFLE_TABLE_MAX */
	unsigned filled; /* X values taken by eb_shuffle_fill() so far */
	uint8_t y;       /* B: the register Y, the last output (initially X_k) */
	uint8_t v[EB_SHUFFLE_TABLE_MAX];
};

/* -EINVAL for an unknown algorithm or k outside 1..EB_SHUFFLE_TABLE_MAX. */
int eb_shuffle_init(struct eb_shuffle *s, enum eb_shuffle_algorithm algorithm, unsigned k);

/* How many X values must still go to eb_shuffle_fill() before the first output: k for M (the
 * table), k + 1 for B (the table and the register Y). */
unsigned eb_shuffle_fill_left(const struct eb_shuffle *s);
void eb_shuffle_fill(struct eb_shuffle *s, uint8_t x);

/* One step once filled. M: j = floor(k * y / 256); output V[j], then V[j] = x. B: j = floor(k * Y /
 * 256); Y = V[j]; output Y, then V[j] = x. */
uint8_t eb_shuffle_next_m(struct eb_shuffle *s, uint8_t x, uint8_t y);
uint8_t eb_shuffle_next_b(struct eb_shuffle *s, uint8_t x);

/* Wipes the table: it holds bytes not yet handed out. */
void eb_shuffle_wipe(struct eb_shuffle *s);

const char *eb_shuffle_algorithm_to_string(enum eb_shuffle_algorithm a);
enum eb_shuffle_algorithm eb_shuffle_algorithm_from_string(const char *s);
