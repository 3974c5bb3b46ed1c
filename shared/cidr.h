/* SPDX-License-Identifier: MIT */
/* An IP address or network (CIDR: "192.0.2.1", "10.0.0.0/8", "2001:db8::/32"), and whether a
 * peer's address falls in one. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* "ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255/128" and its NUL. */
#define EB_CIDR_STRING_MAX 50

struct eb_cidr {
	int family;        /* AF_INET or AF_INET6 */
	uint8_t bytes[16]; /* the first 4 for AF_INET; bits past prefix are zero */
	unsigned prefix;   /* 0..32 or 0..128; an address alone is the whole length */
};

/* Parses an address, or an address and "/PREFIX" (decimal, no sign, no leading zero). Bits set
 * past the prefix are an error (-EINVAL), since "10.1.2.3/8" most likely means something other
 * than 10.0.0.0/8. An IPv6 address is given without brackets. */
int eb_cidr_parse(const char *s, struct eb_cidr *ret);

/* Whether the socket address sa (AF_INET or AF_INET6; an IPv4 peer on a dual-stack socket, as
 * ::ffff:a.b.c.d, counts as IPv4) lies in c. */
bool eb_cidr_match(const struct eb_cidr *c, const struct sockaddr *sa);

/* The canonical text of c into buf (at least EB_CIDR_STRING_MAX bytes); returns buf. */
const char *eb_cidr_to_string(const struct eb_cidr *c, char *buf, size_t size);
