/* SPDX-License-Identifier: MIT */
/* IP addresses and networks, and matching a peer against them. */
#include "cidr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

static unsigned family_bits(int family)
{
	return family == AF_INET ? 32 : 128;
}

/* Whether the first prefix bits of a and b are the same. */
static bool same_prefix(const uint8_t *a, const uint8_t *b, unsigned prefix)
{
	unsigned whole = prefix / 8, rest = prefix % 8;
	uint8_t mask;

	if (memcmp(a, b, whole) != 0)
		return false;
	if (rest == 0)
		return true;
	mask = (uint8_t)(0xff << (8 - rest));
	return ((a[whole] ^ b[whole]) & mask) == 0;
}

int eb_cidr_parse(const char *s, struct eb_cidr *ret)
{
	struct eb_cidr c = {};
	char addr[INET6_ADDRSTRLEN];
	const char *slash = strchr(s, '/');
	size_t n = slash ? (size_t)(slash - s) : strlen(s);

	if (n == 0 || n >= sizeof(addr))
		return -EINVAL;
	memcpy(addr, s, n);
	addr[n] = '\0';
	if (inet_pton(AF_INET, addr, c.bytes) == 1)
		c.family = AF_INET;
	else if (inet_pton(AF_INET6, addr, c.bytes) == 1)
		c.family = AF_INET6;
	else
		return -EINVAL;
	c.prefix = family_bits(c.family);
	if (slash) {
		const char *p = slash + 1;
		unsigned v = 0;
		size_t k = strlen(p);

		if (k == 0 || k > 3 || (k > 1 && p[0] == '0'))
			return -EINVAL;
		for (size_t i = 0; i < k; i++) {
			if (p[i] < '0' || p[i] > '9')
				return -EINVAL;
			v = v * 10 + (unsigned)(p[i] - '0');
		}
		if (v > c.prefix)
			return -EINVAL;
		c.prefix = v;
	}
	/* Host bits set: the administrator meant another network, or a single address. */
	for (unsigned bit = c.prefix; bit < family_bits(c.family); bit++)
		if (c.bytes[bit / 8] & (0x80 >> (bit % 8)))
			return -EINVAL;
	*ret = c;
	return 0;
}

bool eb_cidr_match(const struct eb_cidr *c, const struct sockaddr *sa)
{
	static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	const uint8_t *a;
	int family = sa->sa_family;

	if (family == AF_INET)
		a = (const uint8_t *)&((const struct sockaddr_in *)sa)->sin_addr;
	else if (family == AF_INET6) {
		a = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
		/* An IPv4 peer on a dual-stack socket is that IPv4 address. */
		if (c->family == AF_INET && memcmp(a, v4mapped, sizeof(v4mapped)) == 0) {
			a += sizeof(v4mapped);
			family = AF_INET;
		}
	} else
		return false;
	return family == c->family && same_prefix(a, c->bytes, c->prefix);
}

const char *eb_cidr_to_string(const struct eb_cidr *c, char *buf, size_t size)
{
	char addr[INET6_ADDRSTRLEN] = "?";

	(void)inet_ntop(c->family, c->bytes, addr, sizeof(addr));
	if (c->prefix == family_bits(c->family))
		snprintf(buf, size, "%s", addr);
	else
		snprintf(buf, size, "%s/%u", addr, c->prefix);
	return buf;
}
