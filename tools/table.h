/* SPDX-License-Identifier: MIT */
/* An aligned text table for eb-brokerctl: columns as wide as their widest cell. */
#pragma once

#include <stdio.h>

struct table;

/* n_cols header texts follow; one that starts with ">" names a right-aligned column (numbers),
 * the ">" not shown. */
int table_new(struct table **ret, unsigned n_cols, ...);
struct table *table_free(struct table *t);
static inline void table_freep(struct table **t)
{
	if (*t)
		table_free(*t);
}

/* Copies n_cols cells. -ENOMEM. */
int table_add_row(struct table *t, ...);
/* The header and every row, cells two spaces apart, no trailing blanks. */
void table_print(const struct table *t, FILE *f);
