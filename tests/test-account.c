/* SPDX-License-Identifier: MIT */
/* eb_account_resolve(): ids as numbers, names through NSS. getpwnam_r() and getgrnam_r() are link
 * seams, so the buffer growth and a failing directory service can be tested; the real NSS
 * answers for root. */
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "account.h"
#include "macro.h"

/* What the seam does: pass the call on to NSS, or play a scripted answer. */
enum seam {
	SEAM_REAL,
	SEAM_FOUND,     /* the account exists with id 4242, once the buffer is at least needed */
	SEAM_NOT_FOUND, /* 0 and no result, as glibc says "no such account" */
	SEAM_ENOENT,    /* ENOENT, as some NSS modules say it */
	SEAM_EIO,       /* the directory service cannot be reached */
	SEAM_ERANGE,    /* always too small */
};

static enum seam seam = SEAM_REAL;
static size_t needed;       /* SEAM_FOUND: ERANGE below this buffer size */
static unsigned calls;      /* lookups made */
static size_t largest_size; /* the largest buffer offered */
static char pw_name[] = "seam";

int __real_getpwnam_r(const char *name, struct passwd *pw, char *buf, size_t size,
                      struct passwd **res);
int __wrap_getpwnam_r(const char *name, struct passwd *pw, char *buf, size_t size,
                      struct passwd **res);
int __real_getgrnam_r(const char *name, struct group *gr, char *buf, size_t size,
                      struct group **res);
int __wrap_getgrnam_r(const char *name, struct group *gr, char *buf, size_t size,
                      struct group **res);

/* The scripted answer, common to both: 0 with found set, or an errno. */
static int script(size_t size, bool *found)
{
	calls++;
	largest_size = MAX(largest_size, size);
	*found = false;
	switch (seam) {
	case SEAM_FOUND:
		if (size < needed)
			return ERANGE;
		*found = true;
		return 0;
	case SEAM_NOT_FOUND:
		return 0;
	case SEAM_ENOENT:
		return ENOENT;
	case SEAM_EIO:
		return EIO;
	case SEAM_ERANGE:
		return ERANGE;
	case SEAM_REAL:
		break;
	}
	return EINVAL;
}

int __wrap_getpwnam_r(const char *name, struct passwd *pw, char *buf, size_t size,
                      struct passwd **res)
{
	bool found;
	int e;

	if (seam == SEAM_REAL)
		return __real_getpwnam_r(name, pw, buf, size, res);
	*res = NULL;
	e = script(size, &found);
	if (found) {
		*pw = (struct passwd){.pw_name = pw_name, .pw_uid = 4242};
		*res = pw;
	}
	return e;
}

int __wrap_getgrnam_r(const char *name, struct group *gr, char *buf, size_t size,
                      struct group **res)
{
	bool found;
	int e;

	if (seam == SEAM_REAL)
		return __real_getgrnam_r(name, gr, buf, size, res);
	*res = NULL;
	e = script(size, &found);
	if (found) {
		*gr = (struct group){.gr_name = pw_name, .gr_gid = 4343};
		*res = gr;
	}
	return e;
}

static int reset(void **state)
{
	(void)state;
	seam = SEAM_REAL;
	needed = 0;
	calls = 0;
	largest_size = 0;
	return 0;
}

static void test_name_valid(void **state)
{
	(void)state;
	assert_true(eb_account_name_valid("root"));
	assert_true(eb_account_name_valid("0"));
	assert_true(eb_account_name_valid("a.b_c-d"));
	assert_true(eb_account_name_valid("machine$")); /* Samba machine accounts */
	assert_false(eb_account_name_valid(NULL));
	assert_false(eb_account_name_valid(""));
	assert_false(eb_account_name_valid("-root")); /* would read as an option */
	assert_false(eb_account_name_valid("ro ot"));
	assert_false(eb_account_name_valid("+1"));
	assert_false(eb_account_name_valid("a$b"));
	assert_false(eb_account_name_valid("r\xc3\xb6t"));
}

/* Digits are the id itself, both kinds alike, without NSS. */
static void test_numbers(void **state)
{
	uint32_t id = 7;

	(void)state;
	seam = SEAM_EIO; /* any lookup would fail */
	for (int k = EB_ACCOUNT_USER; k <= EB_ACCOUNT_GROUP; k++) {
		assert_int_equal(eb_account_resolve(k, "0", &id), 0);
		assert_int_equal(id, 0);
		assert_int_equal(eb_account_resolve(k, "1000", &id), 0);
		assert_int_equal(id, 1000);
		assert_int_equal(eb_account_resolve(k, "4294967294", &id), 0);
		assert_int_equal(id, 4294967294u);
		id = 7;
		/* (id_t)-1 is "no id" to the kernel, and cannot name anyone. */
		assert_int_equal(eb_account_resolve(k, "4294967295", &id), -EINVAL);
		assert_int_equal(eb_account_resolve(k, "99999999999999999999", &id), -EINVAL);
		assert_int_equal(eb_account_resolve(k, "12ab", &id), -EINVAL);
		assert_int_equal(eb_account_resolve(k, " 1", &id), -EINVAL);
		assert_int_equal(eb_account_resolve(k, "-1", &id), -EINVAL);
		assert_int_equal(eb_account_resolve(k, "", &id), -EINVAL);
		assert_int_equal(id, 7); /* untouched on failure */
	}
	assert_int_equal(calls, 0);
	assert_int_equal(eb_account_resolve(_EB_ACCOUNT_KIND_MAX, "0", &id), -EINVAL);
	assert_int_equal(eb_account_resolve(EB_ACCOUNT_USER, "0", NULL), -EINVAL);
}

/* The real NSS: root is uid 0 and gid 0 on every Debian system. */
static void test_root(void **state)
{
	uint32_t id = 7;

	(void)state;
	assert_int_equal(eb_account_resolve(EB_ACCOUNT_USER, "root", &id), 0);
	assert_int_equal(id, 0);
	id = 7;
	assert_int_equal(eb_account_resolve(EB_ACCOUNT_GROUP, "root", &id), 0);
	assert_int_equal(id, 0);
	assert_int_equal(eb_account_resolve(EB_ACCOUNT_USER, "no-such-user-eb-test", &id), -ESRCH);
	assert_int_equal(eb_account_resolve(EB_ACCOUNT_GROUP, "no-such-group-eb-test", &id),
	                 -ESRCH);
}

/* One helper, both databases: each kind reaches its own lookup. */
static void test_kind_picks_database(void **state)
{
	uint32_t id = 0;

	(void)state;
	seam = SEAM_FOUND;
	assert_int_equal(eb_account_resolve(EB_ACCOUNT_USER, "seam", &id), 0);
	assert_int_equal(id, 4242);
	assert_int_equal(eb_account_resolve(EB_ACCOUNT_GROUP, "seam", &id), 0);
	assert_int_equal(id, 4343);
	assert_int_equal(calls, 2);
}

/* A small buffer doubles until the entry fits (a group with many members), and up to a ceiling
 * only. */
static void test_buffer_grows(void **state)
{
	uint32_t id = 7;

	(void)state;
	seam = SEAM_FOUND;
	needed = 300 * 1024;
	assert_int_equal(eb_account_resolve(EB_ACCOUNT_GROUP, "big", &id), 0);
	assert_int_equal(id, 4343);
	assert_true(calls > 1);
	assert_true(largest_size >= needed);

	reset(NULL);
	seam = SEAM_ERANGE;
	id = 7;
	assert_int_equal(eb_account_resolve(EB_ACCOUNT_USER, "huge", &id), -ERANGE);
	assert_int_equal(id, 7);
	assert_true(largest_size >= 1024 * 1024 && largest_size < 4 * 1024 * 1024);
}

/* "Not found" said either way is -ESRCH; a failing service is its own error, not "no such". */
static void test_not_found_and_failure(void **state)
{
	uint32_t id = 7;

	(void)state;
	for (int k = EB_ACCOUNT_USER; k <= EB_ACCOUNT_GROUP; k++) {
		seam = SEAM_NOT_FOUND;
		assert_int_equal(eb_account_resolve(k, "nobody-here", &id), -ESRCH);
		seam = SEAM_ENOENT;
		assert_int_equal(eb_account_resolve(k, "nobody-here", &id), -ESRCH);
		seam = SEAM_EIO;
		assert_int_equal(eb_account_resolve(k, "nobody-here", &id), -EIO);
	}
	assert_int_equal(id, 7);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(test_name_valid, reset),
	    cmocka_unit_test_setup(test_numbers, reset),
	    cmocka_unit_test_setup(test_root, reset),
	    cmocka_unit_test_setup(test_kind_picks_database, reset),
	    cmocka_unit_test_setup(test_buffer_grows, reset),
	    cmocka_unit_test_setup(test_not_found_and_failure, reset),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
