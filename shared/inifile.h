/* SPDX-License-Identifier: MIT */
/* A strict INI reader over inih: every error names "path:line", and what inih would take
 * differently from what a reader of the file sees is refused. What the sections and keys mean is
 * the caller's (conf.c's table). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "macro.h"

/* The longest line, newline included; inih splits longer ones silently, the reader refuses them.
 */
#define EB_INI_LINE_MAX 1024
/* A buffer for eb_ini_quote() of anything one line holds. */
#define EB_INI_QUOTE_SIZE (4 * EB_INI_LINE_MAX + 1)
/* The most errors one read reports; a file of garbage must not make a message of megabytes. */
#define EB_INI_ERRORS_MAX 64

/* Where something was set: files[file], line. */
struct eb_ini_place {
	unsigned file, line;
};

struct eb_ini;

struct eb_ini_ops {
	/* A file begins; ini->file is its index. May be NULL. */
	void (*begin_file)(struct eb_ini *ini, void *userdata);
	/* A well-formed "[NAME]" header: name is the n bytes between the brackets, as written.
	 * Returns >= 0 to enter the section, or a negative errno (after eb_ini_error()) to refuse
	 * it: its keys are then skipped, and -ENOMEM stops the read. */
	int (*section)(struct eb_ini *ini, const char *name, size_t n, void *userdata);
	/* "KEY = VALUE" inside a section the callback above entered; the same return. */
	int (*key)(struct eb_ini *ini, const char *key, const char *value, void *userdata);
};

struct eb_ini {
	const char *const *files; /* read in this order */
	unsigned n_files;
	unsigned file; /* the one being read */
	unsigned line; /* its line handed to inih last */
	bool in_section;
	bool skip_section; /* its header was refused: its keys are not handed on */
	bool stop;         /* out of memory: hand inih no more lines */
	int r;             /* the first error, or 0 */
	char *errors;      /* every error's "path:line: message", each ending in '\n' */
	unsigned n_errors;
	const struct eb_ini_ops *ops;
	void *userdata;
	FILE *f;
	char *raw; /* the line as read, NUL bytes and all */
	size_t raw_size;
};

/* Reads files in order into the callbacks. An error does not stop the read, so that one pass
 * finds them all: a refused line is skipped, a refused section header skips the section's keys,
 * a file that cannot be opened is left out; only running out of memory stops it. Returns ini->r.
 * The caller may record further errors (eb_ini_error_at()) before eb_ini_finish(). */
int eb_ini_parse(struct eb_ini *ini, const char *const *files, unsigned n_files,
                 const struct eb_ini_ops *ops, void *userdata);

/* On failure, hands over the errors' messages if ret_error is not NULL: one "path:line: message"
 * line each, in the order found, joined by '\n' with no final one (malloc()ed; NULL when out of
 * memory). Frees the reader's buffers and returns ini->r. */
int eb_ini_finish(struct eb_ini *ini, char **ret_error);

/* Records an error as "path:line: message"; the parse goes on. Returns ini->r (-EINVAL, or the
 * first error's). */
_printf_(3, 4) int eb_ini_error_at(struct eb_ini *ini, struct eb_ini_place at, const char *fmt,
                                   ...);
/* The same at the line being read. */
_printf_(2, 3) int eb_ini_error(struct eb_ini *ini, const char *fmt, ...);
/* Records a failure without a message (-ENOMEM) and stops the parse; returns ini->r. */
int eb_ini_fail(struct eb_ini *ini, int r);

static inline struct eb_ini_place eb_ini_here(const struct eb_ini *ini)
{
	return (struct eb_ini_place){ini->file, ini->line};
}

/* Quotes a value for a message: printable ASCII as is, anything else as \xNN, so that a stray
 * control character in the file cannot forge a log line. Returns buf. */
const char *eb_ini_quote(const char *s, char *buf, size_t size);
