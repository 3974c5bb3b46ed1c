/* SPDX-License-Identifier: MIT */
/* Account names to ids: a uid or gid given as a number or as a name looked up through NSS. */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

enum eb_account_kind {
	EB_ACCOUNT_USER,  /* passwd: a uid */
	EB_ACCOUNT_GROUP, /* group: a gid */
	_EB_ACCOUNT_KIND_MAX,
	_EB_ACCOUNT_KIND_INVALID = -EINVAL,
};

/* What may name an account: a decimal id, or a name as useradd(8) would take it. Anything else (a
 * sign, a space) is a typo better reported as such than as "no such user". */
bool eb_account_name_valid(const char *s);

/* Resolves s to a uid or gid: digits are the id itself, up to (id_t)-2, since (id_t)-1 means "no
 * id" to the kernel's calls and cannot name anyone; anything else is looked up as a name through
 * NSS (getpwnam_r, getgrnam_r), as the system would. -EINVAL when s is neither an id nor a valid
 * name, -ESRCH when no such account exists, -ENOMEM, or the lookup's own error as a negative
 * errno (an unreachable directory service, say). */
int eb_account_resolve(enum eb_account_kind kind, const char *s, uint32_t *ret_id);
