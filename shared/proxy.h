/* SPDX-License-Identifier: MIT */
/* The PROXY protocol header a load balancer puts before a client's bytes (HAProxy's
 * proxy-protocol.txt, versions 1 and 2): who the client is. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* Version 2: a 16-byte fixed part and at most 520 bytes of addresses and TLVs. Version 1: a text
 * line of at most 107 bytes, CRLF included. Longer headers are refused (-EMSGSIZE). */
#define EB_PROXY_V2_FIXED   16
#define EB_PROXY_V2_LEN_MAX 520
#define EB_PROXY_HEADER_MAX (EB_PROXY_V2_FIXED + EB_PROXY_V2_LEN_MAX)
#define EB_PROXY_V1_MAX     107

struct eb_proxy_header {
	unsigned version; /* 1 or 2 */
	/* No client address: a v2 LOCAL command (the balancer's own connection, a health
	 * check), v1 UNKNOWN, or a v2 family without an IP address (UNSPEC, UNIX). The
	 * connection's own peer is the one to name then. */
	bool local;
	/* The client (src) and the address it connected to (dst), AF_INET or AF_INET6 with
	 * their ports; AF_UNSPEC when local. */
	struct sockaddr_storage src, dst;
	size_t size; /* bytes the header takes; what follows is the client's */
};

/* Parses the header at the start of buf[0, len). 0 and *ret when a whole header is there, however
 * many bytes follow it; -EAGAIN when buf is a proper prefix of one (more bytes are needed);
 * -EBADMSG when it is no PROXY header or a malformed one; -EMSGSIZE when it is longer than the
 * limits above; -EPROTONOSUPPORT for a well-formed v2 header this listener cannot take (a
 * datagram transport). Reads no byte past the header. */
int eb_proxy_parse(const uint8_t *buf, size_t len, struct eb_proxy_header *ret);

/* A header on its way in from a socket: what has come so far. Reads take exactly the bytes that
 * cannot belong to what follows the header (the client's own, a TLS ClientHello): a v2 header
 * in two reads (its fixed part, then the length it states), a v1 line byte by byte once its
 * shortest form is in, so no byte past the header is ever taken. */
struct eb_proxy_reader {
	uint8_t buf[EB_PROXY_HEADER_MAX];
	size_t n;
};

/* Reads what there is of the header from the stream socket fd (non-blocking: call again when it
 * is readable). 0 and *ret once the header is whole; -EAGAIN: not yet; -EPIPE: the peer closed
 * before sending a byte; -ECONNRESET: it closed partway; the errors of eb_proxy_parse(); or
 * another negative errno from recv(). */
int eb_proxy_read(struct eb_proxy_reader *r, int fd, struct eb_proxy_header *ret);
