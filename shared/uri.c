/* SPDX-License-Identifier: MIT */
/* Broker addresses as text: parsed strictly, formatted back. The sockets they name are
 * uri-socket.c's. */
#include "uri.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <linux/vm_sockets.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "proto.h"
#include "srv.h"

/* A decimal number without sign, spaces or leading junk, that strtoul() alone would accept. */
static int parse_uint(const char *s, size_t len, unsigned long max, unsigned long *ret)
{
	char buf[16], *end;
	unsigned long v;

	if (len == 0 || len >= sizeof(buf))
		return -EINVAL;
	for (size_t i = 0; i < len; i++)
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
	memcpy(buf, s, len);
	buf[len] = '\0';

	errno = 0;
	v = strtoul(buf, &end, 10);
	if (errno != 0 || end != buf + len || v > max)
		return -EINVAL;
	*ret = v;
	return 0;
}

/* ":PORT" at the end of the string, or nothing for the default port. */
static int parse_port(const char *s, uint16_t *ret)
{
	unsigned long v;
	int r;

	if (*s == '\0') {
		*ret = EB_DEFAULT_PORT;
		return 0;
	}
	if (*s != ':')
		return -EINVAL;
	r = parse_uint(s + 1, strlen(s + 1), 65535, &v);
	if (r < 0)
		return r;
	if (v == 0)
		return -EINVAL;
	*ret = (uint16_t)v;
	return 0;
}

static bool is_host_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '.' || c == '_';
}

static int parse_tcp(const char *s, struct eb_uri *u)
{
	const char *end;
	size_t len;

	if (*s == '[') {
		char addr[INET6_ADDRSTRLEN];
		struct in6_addr a6;
		const char *pct;

		end = strchr(s, ']');
		if (!end)
			return -EINVAL;
		len = (size_t)(end - s - 1);
		if (len == 0 || len >= sizeof(u->host))
			return -EINVAL;
		memcpy(u->host, s + 1, len);
		u->host[len] = '\0';

		/* A link-local address may carry a zone ("fe80::1%eth0"); the address before it
		 * must be IPv6, which is the only thing brackets are for. */
		pct = strchr(u->host, '%');
		len = pct ? (size_t)(pct - u->host) : len;
		if (len >= sizeof(addr) || (pct && pct[1] == '\0'))
			return -EINVAL;
		memcpy(addr, u->host, len);
		addr[len] = '\0';
		if (inet_pton(AF_INET6, addr, &a6) != 1)
			return -EINVAL;
		if (pct)
			for (const char *p = pct + 1; *p; p++)
				if (!is_host_char(*p))
					return -EINVAL;
		end++;
	} else {
		end = s + strcspn(s, ":");
		len = (size_t)(end - s);
		if (len == 0 || len >= sizeof(u->host))
			return -EINVAL;
		for (size_t i = 0; i < len; i++)
			if (!is_host_char(s[i]))
				return -EINVAL;
		memcpy(u->host, s, len);
		u->host[len] = '\0';
	}

	u->kind = EB_URI_TCP;
	return parse_port(end, &u->port);
}

static int parse_unix(const char *s, enum eb_uri_kind kind, struct eb_uri *u)
{
	size_t len = strlen(s);

	/* Abstract and relative names are left out: a broker's address must not depend on the
	 * working directory, and abstract sockets escape file-system permissions. */
	if (s[0] != '/' || len >= sizeof(u->path))
		return -EINVAL;
	memcpy(u->path, s, len + 1);
	u->kind = kind;
	return 0;
}

static int parse_vsock(const char *s, struct eb_uri *u)
{
	size_t len = strcspn(s, ":");
	unsigned long cid;
	int r;

	if (len == 3 && strncmp(s, "any", 3) == 0)
		cid = VMADDR_CID_ANY;
	else {
		r = parse_uint(s, len, UINT32_MAX, &cid);
		if (r < 0)
			return r;
	}
	u->kind = EB_URI_VSOCK;
	u->cid = (uint32_t)cid;
	return parse_port(s + len, &u->port);
}

/* A port name as QEMU's virtserialport name= gives it ("org.entropy-broker.seed.0"): one path
 * component of the characters such names use, never "." or "..", so that the device path cannot
 * leave /dev/virtio-ports/. */
static int parse_virtio(const char *s, struct eb_uri *u)
{
	size_t len = strlen(s);

	if (len == 0 || s[0] == '.' || len >= sizeof(u->path) - strlen(EB_URI_VIRTIO_DIR))
		return -EINVAL;
	for (size_t i = 0; i < len; i++)
		if (!is_host_char(s[i]))
			return -EINVAL;
	snprintf(u->path, sizeof(u->path), EB_URI_VIRTIO_DIR "%s", s);
	u->kind = EB_URI_VIRTIO;
	return 0;
}

/* A domain name whose SRV records name the brokers: a host name short enough that
 * _entropy-broker._tcp.NAME fits in a DNS name. A final dot is dropped. */
static int parse_srv(const char *s, struct eb_uri *u)
{
	size_t len = strlen(s), label = 0;

	if (len > 0 && s[len - 1] == '.')
		len--;
	if (len == 0 || len > EB_SRV_DOMAIN_MAX)
		return -EINVAL;
	/* Labels of 1 to 63 characters (RFC 1035 2.3.4). */
	for (size_t i = 0; i < len; i++) {
		if (!is_host_char(s[i]))
			return -EINVAL;
		label = s[i] == '.' ? 0 : label + 1;
		if (label > 63 || (s[i] == '.' && (i == 0 || s[i - 1] == '.')))
			return -EINVAL;
	}
	memcpy(u->host, s, len);
	u->host[len] = '\0';
	u->kind = EB_URI_SRV;
	return 0;
}

int eb_uri_parse(const char *s, struct eb_uri *ret)
{
	struct eb_uri u = {};
	int r;

	if (!s || !ret)
		return -EINVAL;

	if (strncmp(s, "tcp://", 6) == 0)
		r = parse_tcp(s + 6, &u);
	else if (strncmp(s, "unix:", 5) == 0)
		r = parse_unix(s + 5, EB_URI_UNIX, &u);
	else if (strncmp(s, "unix+tls:", 9) == 0)
		r = parse_unix(s + 9, EB_URI_UNIX_TLS, &u);
	else if (strncmp(s, "vsock://", 8) == 0)
		r = parse_vsock(s + 8, &u);
	else if (strncmp(s, "virtio:", 7) == 0)
		r = parse_virtio(s + 7, &u);
	else if (strncmp(s, "srv:", 4) == 0)
		r = parse_srv(s + 4, &u);
	else
		r = -EINVAL;
	if (r < 0)
		return r;

	*ret = u;
	return 0;
}

const char *eb_uri_to_string(const struct eb_uri *uri, char *buf, size_t size)
{
	if (size == 0)
		return buf;

	switch (uri->kind) {
	case EB_URI_TCP:
		if (strchr(uri->host, ':'))
			snprintf(buf, size, "tcp://[%s]:%u", uri->host, (unsigned)uri->port);
		else
			snprintf(buf, size, "tcp://%s:%u", uri->host, (unsigned)uri->port);
		return buf;
	case EB_URI_UNIX:
		snprintf(buf, size, "unix:%s", uri->path);
		return buf;
	case EB_URI_UNIX_TLS:
		snprintf(buf, size, "unix+tls:%s", uri->path);
		return buf;
	case EB_URI_VSOCK:
		if (uri->cid == VMADDR_CID_ANY)
			snprintf(buf, size, "vsock://any:%u", (unsigned)uri->port);
		else
			snprintf(buf, size, "vsock://%" PRIu32 ":%u", uri->cid,
			         (unsigned)uri->port);
		return buf;
	case EB_URI_VIRTIO:
		snprintf(buf, size, "virtio:%s", uri->path + strlen(EB_URI_VIRTIO_DIR));
		return buf;
	case EB_URI_SRV:
		snprintf(buf, size, "srv:%s", uri->host);
		return buf;
	case _EB_URI_KIND_MAX:
	case _EB_URI_KIND_INVALID:
		break;
	}
	snprintf(buf, size, "invalid:");
	return buf;
}

int eb_uri_is_tls(const struct eb_uri *uri)
{
	switch (uri->kind) {
	case EB_URI_TCP:
	case EB_URI_VSOCK:
	case EB_URI_UNIX_TLS:
	case EB_URI_VIRTIO:
	case EB_URI_SRV:
		return 1;
	case EB_URI_UNIX:
		return 0;
	case _EB_URI_KIND_MAX:
	case _EB_URI_KIND_INVALID:
		break;
	}
	return -EINVAL;
}
