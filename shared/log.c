/* SPDX-License-Identifier: MIT */
#include "log.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>

/* We pass the caller's location ourselves; sd-journal would otherwise name log.c. */
#define SD_JOURNAL_SUPPRESS_LOCATION 1
#include <systemd/sd-journal.h>

#include "io.h"

#define LOG_LINE_MAX   2048
#define LOG_FIELDS_MAX 16

static int max_level = LOG_INFO;
static bool to_journal;
static bool to_stream; /* stderr is journald's stream for this process */
static const char *program_name = "entropy-broker";

/* stderr is the journal when $JOURNAL_STREAM names the device and inode of our fd 2, which is
 * how systemd tells a service that its stderr goes there. */
static bool stderr_is_journal(void)
{
	const char *e = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;
	char end;

	if (!e || sscanf(e, "%llu:%llu%c", &dev, &ino, &end) != 2)
		return false;
	if (fstat(STDERR_FILENO, &st) < 0)
		return false;
	return st.st_dev == dev && st.st_ino == ino;
}

void log_setup(const char *program)
{
	const char *t = getenv("EB_LOG_TARGET");
	const char *l = getenv("EB_LOG_LEVEL");

	if (program) {
		const char *slash = strrchr(program, '/');
		program_name = slash ? slash + 1 : program;
	}
	to_stream = stderr_is_journal();
	if (t && strcmp(t, "journal") == 0)
		to_journal = true;
	else if (t && strcmp(t, "console") == 0)
		to_journal = to_stream = false;
	else
		to_journal = to_stream;
	if (l && strcmp(l, "debug") == 0)
		max_level = LOG_DEBUG;
}

void log_set_max_level(int level)
{
	max_level = level;
}

/* One line on journald's stream, its level as the "<N>" prefix the stream takes. One write(),
 * so that threads' lines do not interleave. */
static void emit_stream(int level, const char *msg)
{
	char buf[LOG_LINE_MAX + 16];
	int n = snprintf(buf, sizeof(buf), "<%d>%s\n", level, msg);

	if (n < 0)
		return;
	if ((size_t)n >= sizeof(buf)) {
		n = (int)sizeof(buf) - 1;
		buf[n - 1] = '\n';
	}
	(void)eb_send_all(STDERR_FILENO, buf, (size_t)n);
}

static void emit(int level, const char *fields, const char *msg, const char *file, int line)
{
	/* A line without fields goes down the stream systemd gave us: journald tells its unit from
	 * the stream's header even once we have exited, where a datagram from a process already
	 * gone loses its unit (so "ExecReload=eb-brokerd --check-config"'s FILE:LINE would be
	 * missing from "systemctl status" as often as not). Fields need the native protocol. */
	if (to_stream && !fields) {
		emit_stream(level, msg);
		return;
	}
	if (to_journal) {
		struct iovec iov[LOG_FIELDS_MAX + 6];
		char prio[32], msgbuf[LOG_LINE_MAX + 16], loc[256], lineno[32], ident[96];
		char fbuf[LOG_LINE_MAX];
		size_t n = 0;

		snprintf(prio, sizeof(prio), "PRIORITY=%d", level);
		snprintf(msgbuf, sizeof(msgbuf), "MESSAGE=%s", msg);
		iov[n++] = (struct iovec){prio, strlen(prio)};
		iov[n++] = (struct iovec){msgbuf, strlen(msgbuf)};
		snprintf(ident, sizeof(ident), "SYSLOG_IDENTIFIER=%s", program_name);
		iov[n++] = (struct iovec){ident, strlen(ident)};
		if (file) {
			snprintf(loc, sizeof(loc), "CODE_FILE=%s", file);
			snprintf(lineno, sizeof(lineno), "CODE_LINE=%d", line);
			iov[n++] = (struct iovec){loc, strlen(loc)};
			iov[n++] = (struct iovec){lineno, strlen(lineno)};
		}
		if (fields) {
			/* Split "K=v\nK=v" in a copy; sd_journal_sendv() takes one field per iovec.
			 */
			snprintf(fbuf, sizeof(fbuf), "%s", fields);
			for (char *p = fbuf, *nl; p && *p && n < ELEMENTSOF(iov); p = nl) {
				nl = strchr(p, '\n');
				if (nl)
					*nl++ = '\0';
				iov[n++] = (struct iovec){p, strlen(p)};
			}
		}
		if (sd_journal_sendv(iov, (int)n) >= 0)
			return;
	}
	fprintf(stderr, "%s: %s\n", program_name, msg);
}

_printf_(6, 0) static int log_va(int level, int error, const char *fields, const char *file,
                                 int line, const char *fmt, va_list ap)
{
	char msg[LOG_LINE_MAX];
	int saved = errno;

	if (error < 0)
		error = -error;
	if (level <= max_level) {
		errno = error;
		vsnprintf(msg, sizeof(msg), fmt, ap);
		emit(level, fields, msg, file, line);
	}
	errno = saved;
	return error > 0 ? -error : -EIO;
}

int log_internal(int level, int error, const char *file, int line, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = log_va(level, error, NULL, file, line, fmt, ap);
	va_end(ap);
	return error == 0 ? 0 : r;
}

int log_struct_internal(int level, int error, const char *fields, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = log_va(level, error, fields, NULL, 0, fmt, ap);
	va_end(ap);
	return error == 0 ? 0 : r;
}

void eb_print_version(const char *program)
{
	printf("%s (entropy-broker) %s\n", program, EB_VERSION);
}
