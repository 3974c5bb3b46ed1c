/* SPDX-License-Identifier: MIT */
#include "account.h"

#include <grp.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "macro.h"

/* getpwnam_r() and getgrnam_r() take the caller's buffer; a member list or a long gecos field may
 * need more than sysconf() suggests, so the buffer doubles on ERANGE up to this ceiling. */
#define LOOKUP_BUF_MAX (1024 * 1024)

_Static_assert(sizeof(uid_t) == sizeof(uint32_t) && sizeof(gid_t) == sizeof(uint32_t),
               "ids are returned as uint32_t");

bool eb_account_name_valid(const char *s)
{
	if (!s || !*s || strlen(s) > 256)
		return false;
	for (const char *p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '_' || *p == '.' || (*p == '-' && p != s) ||
		      (*p == '$' && p[1] == '\0')))
			return false;
	return true;
}

/* A decimal id with nothing around it: strtoull() alone takes signs, spaces and "0x". */
static int parse_id(const char *s, uint32_t *ret)
{
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || *end != '\0' || v > UINT32_MAX - 1)
		return -EINVAL;
	*ret = (uint32_t)v;
	return 0;
}

/* One call of the NSS lookup for kind into buf; 0 with *ret_id set, or the lookup's errno. */
static int lookup_once(enum eb_account_kind kind, const char *name, char *buf, size_t size,
                       uint32_t *ret_id)
{
	int e = EINVAL;

	switch (kind) {
	case EB_ACCOUNT_USER: {
		struct passwd pw, *res = NULL;

		e = getpwnam_r(name, &pw, buf, size, &res);
		if (e == 0 && res)
			*ret_id = res->pw_uid;
		else if (e == 0)
			e = ENOENT;
		break;
	}
	case EB_ACCOUNT_GROUP: {
		struct group gr, *res = NULL;

		e = getgrnam_r(name, &gr, buf, size, &res);
		if (e == 0 && res)
			*ret_id = res->gr_gid;
		else if (e == 0)
			e = ENOENT;
		break;
	}
	case _EB_ACCOUNT_KIND_MAX:
	case _EB_ACCOUNT_KIND_INVALID:
		break;
	}
	return e;
}

int eb_account_resolve(enum eb_account_kind kind, const char *s, uint32_t *ret_id)
{
	long hint;
	size_t size;
	uint32_t id;

	if ((kind != EB_ACCOUNT_USER && kind != EB_ACCOUNT_GROUP) || !ret_id)
		return -EINVAL;
	if (!eb_account_name_valid(s))
		return -EINVAL;
	if (s[0] >= '0' && s[0] <= '9') {
		if (parse_id(s, &id) < 0)
			return -EINVAL;
		*ret_id = id;
		return 0;
	}

	hint = sysconf(kind == EB_ACCOUNT_USER ? _SC_GETPW_R_SIZE_MAX : _SC_GETGR_R_SIZE_MAX);
	size = hint > 0 ? (size_t)hint : 16384;
	for (;;) {
		_cleanup_free_ char *buf = malloc(size);
		int e;

		if (!buf)
			return -ENOMEM;
		e = lookup_once(kind, s, buf, size, &id);
		if (e == ERANGE && size < LOOKUP_BUF_MAX) {
			size *= 2;
			continue;
		}
		/* glibc reports "not found" as 0 with no result, some NSS modules as ENOENT. */
		if (e == ENOENT)
			return -ESRCH;
		if (e != 0)
			return -e;
		*ret_id = id;
		return 0;
	}
}
