/* SPDX-License-Identifier: MIT */
/* Addresses and networks: what parses, its canonical text, and which peers match. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "cidr.h"
#include "macro.h"

static void test_parse(void **state)
{
	static const struct {
		const char *in, *canon;
	} good[] = {
	    {"192.0.2.1", "192.0.2.1"},
	    {"10.0.0.0/8", "10.0.0.0/8"},
	    {"0.0.0.0/0", "0.0.0.0/0"},
	    {"192.0.2.1/32", "192.0.2.1"},
	    {"::1", "::1"},
	    {"2001:db8::/32", "2001:db8::/32"},
	    {"2001:DB8:0::/48", "2001:db8::/48"},
	    {"::/0", "::/0"},
	    {"fe80::1/128", "fe80::1"},
	    {"::ffff:192.0.2.1", "::ffff:192.0.2.1"},
	    {"192.0.2.128/25", "192.0.2.128/25"},
	};
	static const char *const bad[] = {
	    "",
	    "/8",
	    "10.0.0.0/",
	    "10.0.0.0/33",
	    "10.0.0.0/08",
	    "10.0.0.0/-1",
	    "10.0.0.0/+8",
	    "10.1.2.3/8",
	    "10.0.0.0/8/8",
	    "10.0.0",
	    "010.0.0.1",
	    "[::1]",
	    "::1/129",
	    "2001:db8::1/32",
	    "host.example",
	    "192.0.2.1 ",
	    " 192.0.2.1",
	    "192.0.2.1/1000",
	    "::1%lo",
	};
	char text[EB_CIDR_STRING_MAX];
	struct eb_cidr c;

	(void)state;
	for (size_t i = 0; i < ELEMENTSOF(good); i++) {
		if (eb_cidr_parse(good[i].in, &c) < 0)
			fail_msg("\"%s\" refused", good[i].in);
		assert_string_equal(eb_cidr_to_string(&c, text, sizeof(text)), good[i].canon);
	}
	for (size_t i = 0; i < ELEMENTSOF(bad); i++)
		if (eb_cidr_parse(bad[i], &c) != -EINVAL)
			fail_msg("\"%s\" accepted", bad[i]);
	/* The longest text there is fits. */
	assert_int_equal(eb_cidr_parse("ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.0/120", &c), 0);
	assert_int_equal(strlen(eb_cidr_to_string(&c, text, sizeof(text))) < sizeof(text), 1);
}

static bool match4(const char *net, const char *addr)
{
	struct sockaddr_in in = {.sin_family = AF_INET};
	struct eb_cidr c;

	assert_int_equal(eb_cidr_parse(net, &c), 0);
	assert_int_equal(inet_pton(AF_INET, addr, &in.sin_addr), 1);
	return eb_cidr_match(&c, (const struct sockaddr *)&in);
}

static bool match6(const char *net, const char *addr)
{
	struct sockaddr_in6 in6 = {.sin6_family = AF_INET6};
	struct eb_cidr c;

	assert_int_equal(eb_cidr_parse(net, &c), 0);
	assert_int_equal(inet_pton(AF_INET6, addr, &in6.sin6_addr), 1);
	return eb_cidr_match(&c, (const struct sockaddr *)&in6);
}

static void test_match(void **state)
{
	struct sockaddr_un_like {
		sa_family_t family;
	} unix_peer = {AF_UNIX};
	struct eb_cidr c;

	(void)state;
	assert_true(match4("127.0.0.1", "127.0.0.1"));
	assert_false(match4("127.0.0.1", "127.0.0.2"));
	assert_true(match4("10.0.0.0/8", "10.255.1.2"));
	assert_false(match4("10.0.0.0/8", "11.0.0.0"));
	assert_true(match4("192.0.2.128/25", "192.0.2.200"));
	assert_false(match4("192.0.2.128/25", "192.0.2.127"));
	assert_true(match4("0.0.0.0/0", "203.0.113.9"));
	/* An IPv4 peer on a dual-stack socket is its IPv4 address. */
	assert_true(match6("127.0.0.1", "::ffff:127.0.0.1"));
	assert_true(match6("10.0.0.0/8", "::ffff:10.1.2.3"));
	assert_false(match6("10.0.0.0/8", "::ffff:11.1.2.3"));
	/* Families do not mix otherwise. */
	assert_false(match6("0.0.0.0/0", "2001:db8::1"));
	assert_false(match4("::/0", "192.0.2.1"));
	assert_true(match6("2001:db8::/32", "2001:db8:ffff::1"));
	assert_false(match6("2001:db8::/32", "2001:db9::1"));
	assert_true(match6("::1", "::1"));
	assert_false(match6("::1", "::2"));
	assert_true(match6("fe80::/10", "febf::1"));
	assert_false(match6("fe80::/10", "fec0::1"));
	assert_int_equal(eb_cidr_parse("0.0.0.0/0", &c), 0);
	assert_false(eb_cidr_match(&c, (const struct sockaddr *)&unix_peer));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse),
	    cmocka_unit_test(test_match),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
