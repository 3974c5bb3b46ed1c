/* SPDX-License-Identifier: MIT */
#include "inifile.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include <ini.h>

#include "macro.h"

_printf_(3, 0) static int verror_at(struct eb_ini *ini, struct eb_ini_place at, const char *fmt,
                                    va_list ap)
{
	_cleanup_free_ char *msg = NULL;

	ini->stop = true;
	if (ini->r < 0)
		return ini->r;
	ini->r = -EINVAL;
	if (vasprintf(&msg, fmt, ap) < 0) {
		msg = NULL;
		ini->r = -ENOMEM;
	} else if (asprintf(&ini->error, "%s:%u: %s", ini->files[at.file], at.line, msg) < 0)
		ini->error = NULL;
	return ini->r;
}

int eb_ini_error_at(struct eb_ini *ini, struct eb_ini_place at, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = verror_at(ini, at, fmt, ap);
	va_end(ap);
	return r;
}

int eb_ini_error(struct eb_ini *ini, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = verror_at(ini, eb_ini_here(ini), fmt, ap);
	va_end(ap);
	return r;
}

int eb_ini_fail(struct eb_ini *ini, int r)
{
	ini->stop = true;
	if (ini->r >= 0)
		ini->r = r < 0 ? r : -EINVAL;
	return ini->r;
}

const char *eb_ini_quote(const char *s, char *buf, size_t size)
{
	size_t n = 0;

	for (; *s && n + 5 < size; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch >= 0x20 && ch < 0x7f && ch != '"' && ch != '\\')
			buf[n++] = (char)ch;
		else
			n += (size_t)snprintf(buf + n, size - n, "\\x%02x", ch);
	}
	buf[n] = '\0';
	return buf;
}

/* Handles a "[...]" line. inih would note the section too, but it truncates long names silently
 * and does not tell its handler where a section starts, so sections are tracked here. */
static bool begin_section(struct eb_ini *ini, const char *p)
{
	const char *end = strchr(p, ']');
	const char *rest;
	int r;

	if (!end) {
		eb_ini_error(ini, "invalid section header: missing \"]\"");
		return false;
	}
	rest = end + 1 + strspn(end + 1, " \t\r\n");
	if (*rest != '\0' && *rest != ';' && *rest != '#') {
		char q[EB_INI_QUOTE_SIZE];
		_cleanup_free_ char *copy = strndup(rest, strcspn(rest, "\r\n"));

		if (!copy)
			eb_ini_fail(ini, -ENOMEM);
		else
			eb_ini_error(ini, "unexpected \"%s\" after section header",
			             eb_ini_quote(copy, q, sizeof(q)));
		return false;
	}
	r = ini->ops->section(ini, p + 1, (size_t)(end - p - 1), ini->userdata);
	if (r < 0) {
		eb_ini_fail(ini, r);
		return false;
	}
	ini->in_section = true;
	return true;
}

/* inih reads through this, one line per call, so that every error can name its line (Debian's
 * inih is built without INI_HANDLER_LINENO) and so that what inih would take differently from
 * what a reader of the file sees is refused: over-long lines, which inih splits silently, and
 * indented lines, which inih joins to the key before as a continuation. */
static char *reader(char *str, int num, void *stream)
{
	struct eb_ini *ini = stream;
	const char *p;
	ssize_t len;

	if (ini->stop || num < 2)
		return NULL;
	len = getline(&ini->raw, &ini->raw_size, ini->f);
	if (len < 0)
		return NULL;
	ini->line++;

	/* inih sees a string, so a NUL byte would end the value there and drop the rest of the
	 * line without a word: "capacity-bits = 4096\0junk" must not read as 4096. */
	if (memchr(ini->raw, '\0', (size_t)len)) {
		eb_ini_error(ini, "NUL byte in the line");
		return NULL;
	}
	if (len >= EB_INI_LINE_MAX || len > num - 1) {
		eb_ini_error(ini, "line too long (at most %d characters)", num - 3);
		return NULL;
	}
	memcpy(str, ini->raw, (size_t)len + 1);

	p = str;
	if (ini->line == 1 && strncmp(p, "\xef\xbb\xbf", 3) == 0)
		p += 3;
	if (*p == ' ' || *p == '\t') {
		p += strspn(p, " \t");
		if (*p != '\0' && *p != '\r' && *p != '\n' && *p != ';' && *p != '#') {
			eb_ini_error(
			    ini,
			    "line starts with white space: continuation lines are not supported");
			return NULL;
		}
	}
	if (*p == '[' && !begin_section(ini, p))
		return NULL;
	return str;
}

static int handler(void *user, const char *section, const char *name, const char *value)
{
	char k[EB_INI_QUOTE_SIZE];
	struct eb_ini *ini = user;
	int r;

	(void)section; /* tracked by the reader, which sees every header */
	if (ini->stop)
		return 0;
	if (!value) {
		eb_ini_error(ini, "expected KEY = VALUE");
		return 0;
	}
	if (!ini->in_section) {
		eb_ini_error(ini, "key \"%s\" outside any section",
		             eb_ini_quote(name, k, sizeof(k)));
		return 0;
	}
	r = ini->ops->key(ini, name, value, ini->userdata);
	if (r < 0) {
		eb_ini_fail(ini, r);
		return 0;
	}
	return 1;
}

/* Reads files[ini->file] into the callbacks. */
static void parse_file(struct eb_ini *ini)
{
	_cleanup_fclose_ FILE *f = NULL;
	int e;

	ini->line = 0;
	ini->in_section = false;
	if (ini->ops->begin_file)
		ini->ops->begin_file(ini, ini->userdata);
	f = fopen(ini->files[ini->file], "re");
	if (!f) {
		ini->r = negative_errno();
		ini->stop = true;
		if (asprintf(&ini->error, "%s: %s", ini->files[ini->file], strerror(-ini->r)) < 0)
			ini->error = NULL;
		return;
	}
	ini->f = f;
	e = ini_parse_stream(reader, ini, handler, ini);
	if (ini->r >= 0 && ferror(f))
		eb_ini_error_at(ini, (struct eb_ini_place){ini->file, ini->line + 1}, "read error");
	else if (ini->r >= 0 && e > 0)
		eb_ini_error_at(ini, (struct eb_ini_place){ini->file, (unsigned)e},
		                "syntax error: expected [SECTION], KEY = VALUE or a comment");
	else if (ini->r >= 0 && e < 0)
		eb_ini_fail(ini, -ENOMEM);
	ini->f = NULL;
}

int eb_ini_parse(struct eb_ini *ini, const char *const *files, unsigned n_files,
                 const struct eb_ini_ops *ops, void *userdata)
{
	if (!ini || !files || n_files == 0 || !ops || !ops->section || !ops->key)
		return -EINVAL;
	*ini = (struct eb_ini){
	    .files = files,
	    .n_files = n_files,
	    .ops = ops,
	    .userdata = userdata,
	};
	for (ini->file = 0; ini->file < n_files && ini->r >= 0; ini->file++)
		parse_file(ini);
	/* Errors found after the parse name their own place; the last file is the default. */
	ini->file = n_files - 1;
	return ini->r;
}

int eb_ini_finish(struct eb_ini *ini, char **ret_error)
{
	free(ini->raw);
	ini->raw = NULL;
	ini->raw_size = 0;
	if (ini->r < 0 && ret_error)
		*ret_error = TAKE_PTR(ini->error);
	free(ini->error);
	ini->error = NULL;
	return ini->r;
}
