/* SPDX-License-Identifier: MIT */
/* An aligned text table: cells kept as copies, printed with each column as wide as its widest. */
#include "table.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"

#define COLS_MAX 16

struct table {
	unsigned n_cols;
	bool right[COLS_MAX];
	size_t width[COLS_MAX];
	char **cells; /* row-major, the header first */
	size_t n_cells, allocated;
};

/* What a terminal shows of a UTF-8 text: one column per code point (texts from the broker have
 * no control characters; wide characters are rare enough in names to be off by one). */
static size_t columns(const char *s)
{
	size_t n = 0;

	for (; *s; s++)
		n += ((unsigned char)*s & 0xc0) != 0x80;
	return n;
}

static int add_cells(struct table *t, va_list ap)
{
	if (t->n_cells + t->n_cols > t->allocated) {
		size_t want = MAX(t->allocated * 2, (size_t)t->n_cols * 16);
		char **c = realloc(t->cells, want * sizeof(*c));

		if (!c)
			return -ENOMEM;
		t->cells = c;
		t->allocated = want;
	}
	for (unsigned i = 0; i < t->n_cols; i++) {
		const char *s = va_arg(ap, const char *);
		char *copy;

		if (t->n_cells / t->n_cols == 0 && s[0] == '>') {
			t->right[i] = true;
			s++;
		}
		copy = strdup(s);
		if (!copy) {
			/* The row is dropped whole: no half row is ever printed. */
			while (i-- > 0)
				free(t->cells[--t->n_cells]);
			return -ENOMEM;
		}
		t->cells[t->n_cells++] = copy;
		t->width[i] = MAX(t->width[i], columns(copy));
	}
	return 0;
}

int table_new(struct table **ret, unsigned n_cols, ...)
{
	struct table *t;
	va_list ap;
	int r;

	if (n_cols == 0 || n_cols > COLS_MAX)
		return -EINVAL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->n_cols = n_cols;
	va_start(ap, n_cols);
	r = add_cells(t, ap);
	va_end(ap);
	if (r < 0) {
		table_free(t);
		return r;
	}
	*ret = t;
	return 0;
}

struct table *table_free(struct table *t)
{
	if (!t)
		return NULL;
	for (size_t i = 0; i < t->n_cells; i++)
		free(t->cells[i]);
	free(t->cells);
	free(t);
	return NULL;
}

int table_add_row(struct table *t, ...)
{
	va_list ap;
	int r;

	va_start(ap, t);
	r = add_cells(t, ap);
	va_end(ap);
	return r;
}

void table_print(const struct table *t, FILE *f)
{
	for (size_t i = 0; i < t->n_cells; i++) {
		unsigned col = (unsigned)(i % t->n_cols);
		const char *s = t->cells[i];
		size_t pad = t->width[col] - columns(s);
		bool last = col + 1 == t->n_cols;

		if (col > 0)
			fputs("  ", f);
		if (t->right[col])
			fprintf(f, "%*s%s", (int)pad, "", s);
		else
			fprintf(f, "%s%*s", s, last ? 0 : (int)pad, "");
		if (last)
			fputc('\n', f);
	}
}
