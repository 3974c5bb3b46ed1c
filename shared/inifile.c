/* SPDX-License-Identifier: MIT */
#include "inifile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <unistd.h>

#include <ini.h>

#include "macro.h"

_printf_(3, 0) static int verror_at(struct eb_ini *ini, struct eb_ini_place at, const char *fmt,
                                    va_list ap)
{
	_cleanup_free_ char *msg = NULL;
	char *all;
	int n;

	if (ini->r >= 0)
		ini->r = -EINVAL;
	if (ini->stop || ini->n_errors >= EB_INI_ERRORS_MAX)
		return ini->r;
	if (vasprintf(&msg, fmt, ap) < 0) {
		msg = NULL;
		return eb_ini_fail(ini, -ENOMEM);
	}
	if (++ini->n_errors == EB_INI_ERRORS_MAX)
		n = asprintf(&all, "%s%s:%u: too many errors (at most %d reported)\n",
		             ini->errors ? ini->errors : "", ini->files[at.file], at.line,
		             EB_INI_ERRORS_MAX - 1);
	else
		n = asprintf(&all, "%s%s:%u: %s\n", ini->errors ? ini->errors : "",
		             ini->files[at.file], at.line, msg);
	if (n < 0)
		return eb_ini_fail(ini, -ENOMEM);
	free(ini->errors);
	ini->errors = all;
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
	/* Out of memory overrides an error found before: the caller must not take the errors
	 * found so far for all of them. */
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

/* A callback refused what it was given (and said why with eb_ini_error()): out of memory stops
 * the read, anything else is one more error and the read goes on. */
static void refused(struct eb_ini *ini, int r)
{
	if (r == -ENOMEM)
		eb_ini_fail(ini, r);
	else if (ini->r >= 0)
		ini->r = r;
}

/* Handles a "[...]" line. inih would note the section too, but it truncates long names silently
 * and does not tell its handler where a section starts, so sections are tracked here. A header
 * refused leaves the keys under it unread: they would land in the section before. */
static void begin_section(struct eb_ini *ini, const char *p)
{
	const char *end = strchr(p, ']');
	const char *rest;
	int r;

	ini->in_section = false;
	ini->skip_section = true;
	if (!end) {
		eb_ini_error(ini, "invalid section header: missing \"]\"");
		return;
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
		return;
	}
	r = ini->ops->section(ini, p + 1, (size_t)(end - p - 1), ini->userdata);
	if (r < 0) {
		refused(ini, r);
		return;
	}
	ini->in_section = true;
	ini->skip_section = false;
}

/* inih reads through this, one line per call, so that every error can name its line (Debian's
 * inih is built without INI_HANDLER_LINENO) and so that what inih would take differently from
 * what a reader of the file sees is refused: over-long lines, which inih splits silently, and
 * indented lines, which inih joins to the key before as a continuation. A line refused here, and
 * every section header (handled here), reaches inih as an empty line. */
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
	memcpy(str, "\n", 2);

	/* inih sees a string, so a NUL byte would end the value there and drop the rest of the
	 * line without a word: "capacity-bits = 4096\0junk" must not read as 4096. */
	if (memchr(ini->raw, '\0', (size_t)len)) {
		eb_ini_error(ini, "NUL byte in the line");
		return str;
	}
	if (len >= EB_INI_LINE_MAX || len > num - 1) {
		eb_ini_error(ini, "line too long (at most %d characters)", num - 3);
		return str;
	}

	p = ini->raw;
	if (ini->line == 1 && strncmp(p, "\xef\xbb\xbf", 3) == 0)
		p += 3;
	if (*p == ' ' || *p == '\t') {
		p += strspn(p, " \t");
		if (*p != '\0' && *p != '\r' && *p != '\n' && *p != ';' && *p != '#') {
			eb_ini_error(
			    ini,
			    "line starts with white space: continuation lines are not supported");
			return str;
		}
	}
	if (*p == '[') {
		begin_section(ini, p);
		return str;
	}
	memcpy(str, ini->raw, (size_t)len + 1);
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
	if (ini->skip_section)
		return 1;
	if (!value) {
		eb_ini_error(ini, "expected KEY = VALUE");
		return 1;
	}
	if (!ini->in_section) {
		eb_ini_error(ini, "key \"%s\" outside any section",
		             eb_ini_quote(name, k, sizeof(k)));
		return 1;
	}
	r = ini->ops->key(ini, name, value, ini->userdata);
	if (r < 0)
		refused(ini, r);
	return 1;
}

/* Opens path for reading if it is a regular file (or /dev/null), -EBADFD if it is anything else.
 * The open does not block (O_NONBLOCK), so that a FIFO or a device in a configuration directory is
 * refused instead of stopping the broker on open, at start as on reload; a regular file then reads
 * as usual. */
static int open_regular(const char *path, FILE **ret)
{
	_cleanup_close_ int fd = -EBADF;
	struct stat st;
	int flags;
	FILE *f;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return negative_errno();
	if (fstat(fd, &st) < 0)
		return negative_errno();
	/* /dev/null reads as an empty file: a drop-in linked to it is masked. */
	if (!S_ISREG(st.st_mode) &&
	    !(S_ISCHR(st.st_mode) && major(st.st_rdev) == 1 && minor(st.st_rdev) == 3))
		return -EBADFD;
	flags = fcntl(fd, F_GETFL);
	if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) < 0)
		return negative_errno();
	f = fdopen(fd, "re");
	if (!f)
		return negative_errno();
	TAKE_FD(fd);
	*ret = f;
	return 0;
}

/* Reads files[ini->file] into the callbacks. */
static void parse_file(struct eb_ini *ini)
{
	_cleanup_fclose_ FILE *f = NULL;
	int e, r;

	ini->line = 0;
	ini->in_section = false;
	ini->skip_section = false;
	if (ini->ops->begin_file)
		ini->ops->begin_file(ini, ini->userdata);
	r = open_regular(ini->files[ini->file], &f);
	if (r < 0) {
		char *all;

		if (ini->r >= 0)
			ini->r = r;
		if (ini->n_errors >= EB_INI_ERRORS_MAX)
			return;
		if (asprintf(&all, "%s%s: %s\n", ini->errors ? ini->errors : "",
		             ini->files[ini->file],
		             r == -EBADFD ? "not a regular file; remove it or move it away"
		                          : strerror(-r)) < 0) {
			eb_ini_fail(ini, -ENOMEM);
			return;
		}
		free(ini->errors);
		ini->errors = all;
		ini->n_errors++;
		return;
	}
	ini->f = f;
	e = ini_parse_stream(reader, ini, handler, ini);
	if (ini->stop)
		;
	else if (ferror(f))
		eb_ini_error_at(ini, (struct eb_ini_place){ini->file, ini->line + 1}, "read error");
	else if (e > 0)
		eb_ini_error_at(ini, (struct eb_ini_place){ini->file, (unsigned)e},
		                "syntax error: expected [SECTION], KEY = VALUE or a comment");
	else if (e < 0)
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
	for (ini->file = 0; ini->file < n_files && !ini->stop; ini->file++)
		parse_file(ini);
	/* Errors found after the parse name their own place; the last file is the default. */
	ini->file = n_files - 1;
	return ini->r;
}

int eb_ini_finish(struct eb_ini *ini, char **ret_error)
{
	size_t n;

	free(ini->raw);
	ini->raw = NULL;
	ini->raw_size = 0;
	n = ini->errors ? strlen(ini->errors) : 0;
	if (n > 0)
		ini->errors[n - 1] = '\0'; /* the last line's '\n' */
	if (ini->r < 0 && ret_error)
		*ret_error = TAKE_PTR(ini->errors);
	free(ini->errors);
	ini->errors = NULL;
	return ini->r;
}
