/* SPDX-License-Identifier: MIT */
/* The PROXY protocol header, versions 1 and 2, as HAProxy's proxy-protocol.txt defines them. */
#include "proxy.h"

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#include "macro.h"

/*
 * Version 2 (binary, big-endian):
 *
 *   12 bytes  signature \r\n\r\n\0\r\nQUIT\n
 *   u8        version (high nibble, 2) and command (low nibble: 0 LOCAL, 1 PROXY)
 *   u8        address family (high nibble: 0 UNSPEC, 1 INET, 2 INET6, 3 UNIX) and transport
 *             (low nibble: 0 UNSPEC, 1 STREAM, 2 DGRAM)
 *   u16       len: the bytes that follow, addresses then TLVs
 *   INET      u32 src, u32 dst, u16 src port, u16 dst port          (12 bytes)
 *   INET6     16 bytes src, 16 bytes dst, u16 src port, u16 dst port (36 bytes)
 *   UNIX      108 bytes src path, 108 bytes dst path                 (216 bytes)
 *   TLVs      u8 type, u16 length, value; to the end of len
 *
 * Version 1 (text): "PROXY TCP4 SRC DST SPORT DPORT\r\n" (or TCP6), or "PROXY UNKNOWN" and
 * anything up to the CRLF; one space between fields; at most 107 bytes.
 */
static const uint8_t v2_signature[12] = {0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d,
                                         0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a};
static const char v1_prefix[] = "PROXY ";
/* "PROXY UNKNOWN\r\n": no header is shorter, of either version (v2's fixed part is 16). */
#define HEADER_MIN 15

#define V2_CMD_LOCAL  0x0
#define V2_CMD_PROXY  0x1
#define V2_AF_UNSPEC  0x0
#define V2_AF_INET    0x1
#define V2_AF_INET6   0x2
#define V2_AF_UNIX    0x3
#define V2_TR_UNSPEC  0x0
#define V2_TR_STREAM  0x1
#define V2_TR_DGRAM   0x2
#define V2_INET_LEN   12
#define V2_INET6_LEN  36
#define V2_UNIX_LEN   216
#define V2_TLV_HEADER 3

static uint16_t get_be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static void set_inet(struct sockaddr_storage *ss, const uint8_t addr[static 4], uint16_t port)
{
	struct sockaddr_in *in = (struct sockaddr_in *)ss;

	memset(ss, 0, sizeof(*ss));
	in->sin_family = AF_INET;
	memcpy(&in->sin_addr, addr, 4);
	in->sin_port = htons(port);
}

static void set_inet6(struct sockaddr_storage *ss, const uint8_t addr[static 16], uint16_t port)
{
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	in6->sin6_family = AF_INET6;
	memcpy(&in6->sin6_addr, addr, 16);
	in6->sin6_port = htons(port);
}

/* The TLVs after the addresses: each must fit whole in what len left; their meaning (ALPN, the
 * authority, SSL details, a CRC) is not this broker's business, so they are skipped. */
static int v2_skip_tlvs(const uint8_t *p, size_t n)
{
	while (n > 0) {
		size_t k;

		if (n < V2_TLV_HEADER)
			return -EBADMSG;
		k = V2_TLV_HEADER + (size_t)get_be16(p + 1);
		if (k > n)
			return -EBADMSG;
		p += k;
		n -= k;
	}
	return 0;
}

static int v2_parse(const uint8_t *buf, size_t len, struct eb_proxy_header *ret)
{
	struct eb_proxy_header h = {.version = 2};
	size_t body, need;
	uint8_t cmd, af, tr;
	const uint8_t *p;
	int r;

	if (memcmp(buf, v2_signature, MIN(len, sizeof(v2_signature))) != 0)
		return -EBADMSG;
	/* The fixed part is checked as it comes, so that garbage is refused at its first byte. */
	if (len > 12 && buf[12] >> 4 != 2)
		return -EBADMSG;
	cmd = len > 12 ? buf[12] & 0x0f : 0;
	if (cmd != V2_CMD_LOCAL && cmd != V2_CMD_PROXY)
		return -EBADMSG;
	af = len > 13 ? buf[13] >> 4 : 0;
	tr = len > 13 ? buf[13] & 0x0f : 0;
	if (af > V2_AF_UNIX || tr > V2_TR_DGRAM)
		return -EBADMSG;
	if (len < EB_PROXY_V2_FIXED)
		return -EAGAIN;
	body = get_be16(buf + 14);
	if (body > EB_PROXY_V2_LEN_MAX)
		return -EMSGSIZE;
	if (len < EB_PROXY_V2_FIXED + body)
		return -EAGAIN;
	h.size = EB_PROXY_V2_FIXED + body;
	p = buf + EB_PROXY_V2_FIXED;

	/* LOCAL: the balancer speaks for itself (a health check); whatever the block holds, the
	 * family included, is to be ignored. So are addresses this broker cannot count by: an
	 * UNSPEC or a UNIX client is named by the connection's own peer, as the spec allows. */
	if (cmd == V2_CMD_LOCAL || af == V2_AF_UNSPEC || af == V2_AF_UNIX) {
		h.local = true;
		*ret = h;
		return 0;
	}
	if (tr == V2_TR_DGRAM)
		return -EPROTONOSUPPORT;
	if (tr != V2_TR_STREAM)
		return -EBADMSG;
	need = af == V2_AF_INET ? V2_INET_LEN : V2_INET6_LEN;
	if (body < need)
		return -EBADMSG;
	if (af == V2_AF_INET) {
		set_inet(&h.src, p, get_be16(p + 8));
		set_inet(&h.dst, p + 4, get_be16(p + 10));
	} else {
		set_inet6(&h.src, p, get_be16(p + 32));
		set_inet6(&h.dst, p + 16, get_be16(p + 34));
	}
	r = v2_skip_tlvs(p + need, body - need);
	if (r < 0)
		return r;
	*ret = h;
	return 0;
}

/* A port: 1 to 5 digits, no leading zero but in "0" itself, at most 65535. */
static int v1_port(const char *s, size_t n, uint16_t *ret)
{
	unsigned v = 0;

	if (n == 0 || n > 5 || (n > 1 && s[0] == '0'))
		return -EBADMSG;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EBADMSG;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	if (v > 65535)
		return -EBADMSG;
	*ret = (uint16_t)v;
	return 0;
}

/* An address of family af, as inet_pton() takes it (dotted quad; RFC 4291 text). */
static int v1_addr(int af, const char *s, size_t n, uint8_t ret[static 16])
{
	char tmp[INET6_ADDRSTRLEN];

	if (n == 0 || n >= sizeof(tmp))
		return -EBADMSG;
	memcpy(tmp, s, n);
	tmp[n] = '\0';
	return inet_pton(af, tmp, ret) == 1 ? 0 : -EBADMSG;
}

/* The fields of a whole v1 line, CRLF excluded: "PROXY " already matched at line[0, 6). */
static int v1_fields(const char *line, size_t n, struct eb_proxy_header *h)
{
	const char *field[4];
	size_t flen[4];
	uint8_t src[16], dst[16];
	uint16_t sport, dport;
	const char *p = line + 6, *end = line + n;
	int af;

	if ((size_t)(end - p) >= 7 && memcmp(p, "UNKNOWN", 7) == 0 &&
	    (end - p == 7 || p[7] == ' ')) {
		/* The sender could not name the client; what follows is to be ignored. */
		h->local = true;
		return 0;
	}
	if ((size_t)(end - p) < 5 || p[4] != ' ')
		return -EBADMSG;
	if (memcmp(p, "TCP4", 4) == 0)
		af = AF_INET;
	else if (memcmp(p, "TCP6", 4) == 0)
		af = AF_INET6;
	else
		return -EBADMSG;
	p += 5;
	/* Exactly four fields, one space between each. */
	for (unsigned i = 0; i < 4; i++) {
		const char *sp = memchr(p, ' ', (size_t)(end - p));

		if (i < 3 && !sp)
			return -EBADMSG;
		if (i == 3 && sp)
			return -EBADMSG;
		field[i] = p;
		flen[i] = (size_t)((sp ? sp : end) - p);
		p += flen[i] + 1;
	}
	if (v1_addr(af, field[0], flen[0], src) < 0 || v1_addr(af, field[1], flen[1], dst) < 0 ||
	    v1_port(field[2], flen[2], &sport) < 0 || v1_port(field[3], flen[3], &dport) < 0)
		return -EBADMSG;
	if (af == AF_INET) {
		set_inet(&h->src, src, sport);
		set_inet(&h->dst, dst, dport);
	} else {
		set_inet6(&h->src, src, sport);
		set_inet6(&h->dst, dst, dport);
	}
	return 0;
}

static int v1_parse(const uint8_t *buf, size_t len, struct eb_proxy_header *ret)
{
	struct eb_proxy_header h = {.version = 1};
	size_t n = MIN(len, (size_t)EB_PROXY_V1_MAX), i;
	int r;

	if (memcmp(buf, v1_prefix, MIN(len, sizeof(v1_prefix) - 1)) != 0)
		return -EBADMSG;
	/* Printable ASCII up to the CR: anything else is refused as it comes, not at 107 bytes. */
	for (i = 0; i < n; i++) {
		if (buf[i] == '\r')
			break;
		if (buf[i] < 0x20 || buf[i] > 0x7e)
			return -EBADMSG;
	}
	if (i == n)
		return len >= EB_PROXY_V1_MAX ? -EMSGSIZE : -EAGAIN;
	if (i + 1 == n)
		return i + 1 >= EB_PROXY_V1_MAX ? -EMSGSIZE : -EAGAIN;
	if (buf[i + 1] != '\n')
		return -EBADMSG;
	r = v1_fields((const char *)buf, i, &h);
	if (r < 0)
		return r;
	h.size = i + 2;
	*ret = h;
	return 0;
}

int eb_proxy_parse(const uint8_t *buf, size_t len, struct eb_proxy_header *ret)
{
	if (len == 0)
		return -EAGAIN;
	if (buf[0] == v2_signature[0])
		return v2_parse(buf, len, ret);
	if (buf[0] == (uint8_t)v1_prefix[0])
		return v1_parse(buf, len, ret);
	return -EBADMSG;
}

/* How many bytes may be read next without a chance of taking one past the header, given a
 * proper prefix of one in buf[0, n). */
static size_t safe_to_read(const uint8_t *buf, size_t n)
{
	if (n < HEADER_MIN)
		return HEADER_MIN - n;
	if (buf[0] == v2_signature[0])
		return n < EB_PROXY_V2_FIXED ? EB_PROXY_V2_FIXED - n
		                             : EB_PROXY_V2_FIXED + get_be16(buf + 14) - n;
	/* A v1 line ends at a CRLF that may come at any byte. */
	return 1;
}

int eb_proxy_read(struct eb_proxy_reader *r, int fd, struct eb_proxy_header *ret)
{
	for (;;) {
		struct eb_proxy_header h;
		size_t want;
		ssize_t k;
		int q;

		q = eb_proxy_parse(r->buf, r->n, &h);
		if (q == 0) {
			/* Nothing past the header was read, so it is all of what was. */
			if (h.size != r->n)
				return -EBADMSG;
			*ret = h;
			return 0;
		}
		if (q != -EAGAIN)
			return q;
		want = safe_to_read(r->buf, r->n);
		/* parse() bounds every prefix it asks more for: the header fits in buf. */
		if (want == 0 || want > sizeof(r->buf) - r->n)
			return -EMSGSIZE;
		k = recv(fd, r->buf + r->n, want, MSG_DONTWAIT);
		if (k < 0 && errno == EWOULDBLOCK)
			return -EAGAIN;
		/* Gone, by a FIN or a reset (HAProxy ends its health checks with one): before a
		 * byte, or partway through the header. */
		if (k == 0 || (k < 0 && errno == ECONNRESET))
			return r->n == 0 ? -EPIPE : -ECONNRESET;
		if (k < 0)
			return -errno;
		r->n += (size_t)k;
	}
}
