/* SPDX-License-Identifier: MIT */
/* Logging for the programs: the journal with structured fields under systemd, stderr elsewhere. */
#pragma once

#include <stdarg.h>
#include <syslog.h>

#include "macro.h"

/* Decides once where messages go: the journal when stderr is connected to it ($JOURNAL_STREAM)
 * or when $EB_LOG_TARGET=journal, stderr otherwise. */
void log_setup(const char *program);
void log_set_max_level(int level);

/* Logs at level with errno set to |error| (so "%m" names it) and returns -|error|, so callers
 * can write "return log_error_errno(r, ...)". */
int log_internal(int level, int error, const char *file, int line, const char *fmt, ...)
    _printf_(5, 6);

/* As log_internal(), with extra journal fields: "KEY=value" lines separated by '\n', e.g.
 * "MESSAGE_ID=...\nEB_POOL_BITS=4096". On stderr the fields are left out. */
int log_struct_internal(int level, int error, const char *fields, const char *fmt, ...)
    _printf_(4, 5);

#define log_full_errno(level, error, ...)                                                          \
	log_internal(level, error, __FILE__, __LINE__, __VA_ARGS__)
#define log_full(level, ...) (void)log_full_errno(level, 0, __VA_ARGS__)

#define log_error_errno(error, ...)   log_full_errno(LOG_ERR, error, __VA_ARGS__)
#define log_warning_errno(error, ...) log_full_errno(LOG_WARNING, error, __VA_ARGS__)
#define log_notice_errno(error, ...)  log_full_errno(LOG_NOTICE, error, __VA_ARGS__)
#define log_info_errno(error, ...)    log_full_errno(LOG_INFO, error, __VA_ARGS__)
#define log_debug_errno(error, ...)   log_full_errno(LOG_DEBUG, error, __VA_ARGS__)

#define log_error(...)   log_full(LOG_ERR, __VA_ARGS__)
#define log_warning(...) log_full(LOG_WARNING, __VA_ARGS__)
#define log_notice(...)  log_full(LOG_NOTICE, __VA_ARGS__)
#define log_info(...)    log_full(LOG_INFO, __VA_ARGS__)
#define log_debug(...)   log_full(LOG_DEBUG, __VA_ARGS__)

#define log_struct(level, fields, ...) (void)log_struct_internal(level, 0, fields, __VA_ARGS__)

/* Every program's --version output. */
void eb_print_version(const char *program);

#define log_oom() log_error_errno(ENOMEM, "Out of memory")
