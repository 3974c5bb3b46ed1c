/* SPDX-License-Identifier: MIT */
/* Small macros every file of the project uses: cleanup attributes, ownership transfer, sizes. */
#pragma once

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* One wipe primitive across the tree: secrets (keys, pool blocks, data on its way to a peer) are
 * wiped with explicit_bzero() from <string.h>, which the compiler may not drop as a dead store and
 * which needs no OpenSSL header outside the crypto and transport files (docs/decisions.md). Memory
 * OpenSSL allocated goes back through OPENSSL_clear_free(), its allocator's own wiping free. */

#define _cleanup_(f)   __attribute__((cleanup(f)))
#define _unused_       __attribute__((unused))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _noreturn_     __attribute__((noreturn))
#define _pure_         __attribute__((pure))
#define _likely_(x)    __builtin_expect(!!(x), 1)
#define _unlikely_(x)  __builtin_expect(!!(x), 0)

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))

/* name(v): the entry of table, an array of names indexed by an enum, for v; NULL for a value the
 * table does not cover (an enum's _X_INVALID, or one past its _X_MAX). */
#define EB_DEFINE_STRING_TABLE_LOOKUP(name, type, table)                                           \
	const char *name(type v)                                                                   \
	{                                                                                          \
		if ((int)v < 0 || (int)v >= (int)ELEMENTSOF(table))                                \
			return NULL;                                                               \
		return (table)[v];                                                                 \
	}
/* Each argument is evaluated once, so that MIN(next(), n) calls next() once and MAX(i++, j)
 * steps i once: GNU statement expressions (gcc, clang), the temporaries named with __COUNTER__ so
 * that MIN(MAX(a, b), c) shadows nothing. The result has the type a ?: b would have. Not in a
 * constant expression (an array's size, a static initialiser): a statement expression is none. */
#define EB_CONCAT_(a, b) a##b
#define EB_CONCAT(a, b)  EB_CONCAT_(a, b)
#define EB_MIN_(x, y, a, b)                                                                        \
	__extension__({                                                                            \
		__typeof__(a) x = (a);                                                             \
		__typeof__(b) y = (b);                                                             \
		x < y ? x : y;                                                                     \
	})
#define EB_MAX_(x, y, a, b)                                                                        \
	__extension__({                                                                            \
		__typeof__(a) x = (a);                                                             \
		__typeof__(b) y = (b);                                                             \
		x > y ? x : y;                                                                     \
	})
#define MIN(a, b) EB_MIN_(EB_CONCAT(min_a_, __COUNTER__), EB_CONCAT(min_b_, __COUNTER__), a, b)
#define MAX(a, b) EB_MAX_(EB_CONCAT(max_a_, __COUNTER__), EB_CONCAT(max_b_, __COUNTER__), a, b)
#define SWAP(a, b)                                                                                 \
	do {                                                                                       \
		__typeof__(a) _t_ = (a);                                                           \
		(a) = (b);                                                                         \
		(b) = _t_;                                                                         \
	} while (0)

/* Hands ownership of *p to the caller and leaves NULL behind, so the _cleanup_ at scope exit
 * does not free what was just returned. */
#define TAKE_PTR(p)                                                                                \
	({                                                                                         \
		__typeof__(p) _p_ = (p);                                                           \
		(p) = NULL;                                                                        \
		_p_;                                                                               \
	})

#define TAKE_FD(fd)                                                                                \
	({                                                                                         \
		int _fd_ = (fd);                                                                   \
		(fd) = -EBADF;                                                                     \
		_fd_;                                                                              \
	})

#define DEFINE_TRIVIAL_CLEANUP_FUNC(type, func)                                                    \
	static inline void func##p(type *p)                                                        \
	{                                                                                          \
		if (*p)                                                                            \
			func(*p);                                                                  \
	}

static inline void freep(void *p)
{
	free(*(void **)p);
}

static inline int safe_close(int fd)
{
	if (fd >= 0) {
		int saved = errno;
		(void)close(fd);
		errno = saved;
	}
	return -EBADF;
}

static inline void closep(int *fd)
{
	safe_close(*fd);
}

static inline void fclosep(FILE **f)
{
	if (*f)
		fclose(*f);
}

#define _cleanup_free_   _cleanup_(freep)
#define _cleanup_close_  _cleanup_(closep)
#define _cleanup_fclose_ _cleanup_(fclosep)

/* Returns a negative errno from errno, never 0, for functions that signal failure with -1. */
static inline int negative_errno(void)
{
	return errno > 0 ? -errno : -EIO;
}
