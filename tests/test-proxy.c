/* SPDX-License-Identifier: MIT */
/* The PROXY protocol header: every field of both versions, prefixes, limits, malformed input,
 * and the reader over a real socket, fed in pieces, taking no byte past the header. Every parse
 * reads its input at the end of a page, so that a read past it fails the test. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "macro.h"
#include "proxy.h"

static const uint8_t sig[12] = {0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d,
                                0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a};

/* A v2 header: ver_cmd, fam, then body of len bytes. Returns its size. */
static size_t v2(uint8_t *buf, uint8_t ver_cmd, uint8_t fam, const uint8_t *body, uint16_t len)
{
	memcpy(buf, sig, sizeof(sig));
	buf[12] = ver_cmd;
	buf[13] = fam;
	buf[14] = (uint8_t)(len >> 8);
	buf[15] = (uint8_t)len;
	memcpy(buf + 16, body, len);
	return 16 + (size_t)len;
}

static sigjmp_buf overread;

static void on_overread(int signo)
{
	(void)signo;
	siglongjmp(overread, 1);
}

/* eb_proxy_parse() on a copy of buf[0..n) that ends where a page ends, the next page unreadable:
 * a parser that reads past what it was given is stopped at its first byte too many, and the
 * test fails saying so, rather than reading on into whatever the caller's buffer held. */
static int parse(const uint8_t *buf, size_t n, struct eb_proxy_header *ret)
{
	static uint8_t *page;
	size_t ps = (size_t)sysconf(_SC_PAGESIZE);
	struct sigaction sa = {.sa_handler = on_overread}, old;
	uint8_t *copy;
	int r;

	if (!page) {
		page =
		    mmap(NULL, 2 * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		assert_true(page != MAP_FAILED);
		assert_int_equal(mprotect(page + ps, ps, PROT_NONE), 0);
	}
	assert_true(n <= ps);
	copy = page + ps - n;
	memcpy(copy, buf, n);
	assert_int_equal(sigaction(SIGSEGV, &sa, &old), 0);
	if (sigsetjmp(overread, 1)) {
		(void)sigaction(SIGSEGV, &old, NULL);
		fail_msg("eb_proxy_parse() read past the %zu bytes it was given", n);
	}
	r = eb_proxy_parse(copy, n, ret);
	(void)sigaction(SIGSEGV, &old, NULL);
	return r;
}

/* 192.0.2.10:40000 -> 198.51.100.1:55225 */
static const uint8_t inet_body[12] = {192, 0, 2, 10, 198, 51, 100, 1, 0x9c, 0x40, 0xd7, 0xb9};

static void check_inet(const struct sockaddr_storage *ss, const char *addr, uint16_t port)
{
	const struct sockaddr_in *in = (const struct sockaddr_in *)ss;
	char text[INET_ADDRSTRLEN];

	assert_int_equal(ss->ss_family, AF_INET);
	assert_non_null(inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text)));
	assert_string_equal(text, addr);
	assert_int_equal(ntohs(in->sin_port), port);
}

static void check_inet6(const struct sockaddr_storage *ss, const char *addr, uint16_t port)
{
	const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)ss;
	char text[INET6_ADDRSTRLEN];

	assert_int_equal(ss->ss_family, AF_INET6);
	assert_non_null(inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text)));
	assert_string_equal(text, addr);
	assert_int_equal(ntohs(in6->sin6_port), port);
}

/* Every proper prefix of a whole header asks for more; the whole one parses, and so does the
 * whole one with the client's bytes after it, to the same size. */
static void check_prefixes(const uint8_t *buf, size_t size)
{
	uint8_t more[EB_PROXY_HEADER_MAX + 64];
	struct eb_proxy_header h;

	for (size_t n = 0; n < size; n++)
		assert_int_equal(parse(buf, n, &h), -EAGAIN);
	assert_int_equal(parse(buf, size, &h), 0);
	assert_int_equal(h.size, size);
	memcpy(more, buf, size);
	memset(more + size, 0x16, sizeof(more) - size); /* a TLS record's first byte */
	assert_int_equal(parse(more, sizeof(more), &h), 0);
	assert_int_equal(h.size, size);
}

static void test_v2_inet(void **state)
{
	uint8_t buf[64];
	struct eb_proxy_header h;
	size_t n;

	(void)state;
	n = v2(buf, 0x21, 0x11, inet_body, sizeof(inet_body));
	assert_int_equal(parse(buf, n, &h), 0);
	assert_int_equal(h.version, 2);
	assert_false(h.local);
	assert_int_equal(h.size, 28);
	check_inet(&h.src, "192.0.2.10", 40000);
	check_inet(&h.dst, "198.51.100.1", 55225);
	check_prefixes(buf, n);
}

static void test_v2_inet6(void **state)
{
	uint8_t body[36] = {}, buf[64];
	struct eb_proxy_header h;
	size_t n;

	(void)state;
	assert_int_equal(inet_pton(AF_INET6, "2001:db8::7", body), 1);
	assert_int_equal(inet_pton(AF_INET6, "2001:db8:1::1", body + 16), 1);
	body[32] = 0x00, body[33] = 0x01; /* port 1 */
	body[34] = 0xff, body[35] = 0xff; /* port 65535 */
	n = v2(buf, 0x21, 0x21, body, sizeof(body));
	assert_int_equal(parse(buf, n, &h), 0);
	assert_int_equal(h.version, 2);
	assert_false(h.local);
	assert_int_equal(h.size, 52);
	check_inet6(&h.src, "2001:db8::7", 1);
	check_inet6(&h.dst, "2001:db8:1::1", 65535);
	check_prefixes(buf, n);
}

/* LOCAL, UNSPEC and UNIX name no client: the connection's own peer is the one. */
static void test_v2_local(void **state)
{
	uint8_t body[300] = {}, buf[400];
	struct eb_proxy_header h;
	size_t n;

	(void)state;
	/* HAProxy's health check: LOCAL, no addresses. */
	n = v2(buf, 0x20, 0x00, body, 0);
	assert_int_equal(parse(buf, n, &h), 0);
	assert_true(h.local);
	assert_int_equal(h.size, 16);
	assert_int_equal(h.src.ss_family, AF_UNSPEC);
	check_prefixes(buf, n);
	/* LOCAL with a block, even one that would be malformed as PROXY: ignored whole. */
	memset(body, 0xee, sizeof(body));
	n = v2(buf, 0x20, 0x12, body, 7);
	assert_int_equal(parse(buf, n, &h), 0);
	assert_true(h.local);
	assert_int_equal(h.size, 23);
	/* PROXY with UNSPEC, and with UNIX addresses. */
	n = v2(buf, 0x21, 0x00, body, 0);
	assert_int_equal(parse(buf, n, &h), 0);
	assert_true(h.local);
	n = v2(buf, 0x21, 0x31, body, 216);
	assert_int_equal(parse(buf, n, &h), 0);
	assert_true(h.local);
	assert_int_equal(h.size, 232);
	assert_int_equal(h.src.ss_family, AF_UNSPEC);
}

static void test_v2_tlvs(void **state)
{
	uint8_t body[EB_PROXY_V2_LEN_MAX + 8], buf[EB_PROXY_HEADER_MAX + 8];
	struct eb_proxy_header h;
	size_t n;

	(void)state;
	/* ALPN "h2", an empty NOOP, then the authority. */
	memcpy(body, inet_body, 12);
	memcpy(body + 12,
	       "\x01\x00\x02h2\x04\x00\x00\x02\x00\x0b"
	       "example.org",
	       22);
	n = v2(buf, 0x21, 0x11, body, 34);
	assert_int_equal(parse(buf, n, &h), 0);
	check_inet(&h.src, "192.0.2.10", 40000);
	assert_int_equal(h.size, 50);
	check_prefixes(buf, n);
	/* A TLV longer than what is left, and stray bytes too few for a TLV header. */
	n = v2(buf, 0x21, 0x11, body, 33);
	assert_int_equal(parse(buf, n, &h), -EBADMSG);
	n = v2(buf, 0x21, 0x11, body, 14);
	assert_int_equal(parse(buf, n, &h), -EBADMSG);
	n = v2(buf, 0x21, 0x11, body, 13);
	assert_int_equal(parse(buf, n, &h), -EBADMSG);

	/* The largest header there may be: one TLV fills len = 520 exactly. */
	memcpy(body, inet_body, 12);
	body[12] = 0xe0;
	body[13] = (uint8_t)((EB_PROXY_V2_LEN_MAX - 15) >> 8);
	body[14] = (uint8_t)(EB_PROXY_V2_LEN_MAX - 15);
	memset(body + 15, 'x', EB_PROXY_V2_LEN_MAX - 15);
	n = v2(buf, 0x21, 0x11, body, EB_PROXY_V2_LEN_MAX);
	assert_int_equal(n, EB_PROXY_HEADER_MAX);
	assert_int_equal(parse(buf, n, &h), 0);
	assert_int_equal(h.size, 536);
}

static void test_v2_oversized(void **state)
{
	uint8_t buf[16];
	struct eb_proxy_header h;

	(void)state;
	/* Refused as soon as the length is in, not after 521 bytes more. */
	(void)v2(buf, 0x21, 0x11, inet_body, 0);
	buf[14] = (EB_PROXY_V2_LEN_MAX + 1) >> 8;
	buf[15] = (uint8_t)(EB_PROXY_V2_LEN_MAX + 1);
	assert_int_equal(parse(buf, 16, &h), -EMSGSIZE);
	buf[14] = buf[15] = 0xff;
	assert_int_equal(parse(buf, 16, &h), -EMSGSIZE);
}

static void test_v2_malformed(void **state)
{
	uint8_t buf[64], bad[64];
	struct eb_proxy_header h;
	size_t n;

	(void)state;
	n = v2(buf, 0x21, 0x11, inet_body, sizeof(inet_body));
	/* Any byte of the signature wrong: refused at that byte already. */
	for (size_t i = 0; i < sizeof(sig); i++) {
		memcpy(bad, buf, n);
		bad[i] ^= 0x20;
		for (size_t k = i + 1; k <= n; k++)
			assert_int_equal(parse(bad, k, &h), -EBADMSG);
	}
	/* Version 1 or 3 in binary, commands 2..15, families 4..15, transports 3..15. */
	static const uint8_t bad_vc[] = {0x11, 0x31, 0x01, 0x22, 0x2f};
	for (size_t i = 0; i < ELEMENTSOF(bad_vc); i++) {
		memcpy(bad, buf, n);
		bad[12] = bad_vc[i];
		assert_int_equal(parse(bad, 13, &h), -EBADMSG);
		assert_int_equal(parse(bad, n, &h), -EBADMSG);
	}
	static const uint8_t bad_fam[] = {0x41, 0xf1, 0x13, 0x1f};
	for (size_t i = 0; i < ELEMENTSOF(bad_fam); i++) {
		memcpy(bad, buf, n);
		bad[13] = bad_fam[i];
		assert_int_equal(parse(bad, 14, &h), -EBADMSG);
		assert_int_equal(parse(bad, n, &h), -EBADMSG);
	}
	/* INET with an unspecified transport; datagrams on a stream listener. */
	memcpy(bad, buf, n);
	bad[13] = 0x10;
	assert_int_equal(parse(bad, n, &h), -EBADMSG);
	bad[13] = 0x12;
	assert_int_equal(parse(bad, n, &h), -EPROTONOSUPPORT);
	bad[13] = 0x22;
	assert_int_equal(parse(bad, n, &h), -EPROTONOSUPPORT);
	/* Addresses shorter than the family's: INET in 11 bytes, INET6 in 12. */
	n = v2(bad, 0x21, 0x11, inet_body, 11);
	assert_int_equal(parse(bad, n, &h), -EBADMSG);
	n = v2(bad, 0x21, 0x21, inet_body, 12);
	assert_int_equal(parse(bad, n, &h), -EBADMSG);
	/* Neither version's first byte: a TLS ClientHello, HTTP. */
	assert_int_equal(parse((const uint8_t *)"\x16\x03\x01", 3, &h), -EBADMSG);
	assert_int_equal(parse((const uint8_t *)"GET / HTTP/1.0\r\n", 16, &h), -EBADMSG);
}

static int v1(const char *line, struct eb_proxy_header *h)
{
	return parse((const uint8_t *)line, strlen(line), h);
}

static void test_v1(void **state)
{
	static const char tcp4[] = "PROXY TCP4 192.0.2.10 198.51.100.1 40000 55225\r\n";
	static const char tcp6[] = "PROXY TCP6 2001:db8::7 ::1 0 65535\r\n";
	struct eb_proxy_header h;

	(void)state;
	assert_int_equal(v1(tcp4, &h), 0);
	assert_int_equal(h.version, 1);
	assert_false(h.local);
	assert_int_equal(h.size, strlen(tcp4));
	check_inet(&h.src, "192.0.2.10", 40000);
	check_inet(&h.dst, "198.51.100.1", 55225);
	check_prefixes((const uint8_t *)tcp4, strlen(tcp4));

	assert_int_equal(v1(tcp6, &h), 0);
	assert_false(h.local);
	check_inet6(&h.src, "2001:db8::7", 0);
	check_inet6(&h.dst, "::1", 65535);
	check_prefixes((const uint8_t *)tcp6, strlen(tcp6));

	assert_int_equal(v1("PROXY UNKNOWN\r\n", &h), 0);
	assert_true(h.local);
	assert_int_equal(h.size, 15);
	check_prefixes((const uint8_t *)"PROXY UNKNOWN\r\n", 15);
	assert_int_equal(v1("PROXY UNKNOWN whatever 1 2\r\n", &h), 0);
	assert_true(h.local);
}

static void test_v1_limits(void **state)
{
	/* The longest line the spec allows: 107 bytes. */
	static const char longest[] = "PROXY UNKNOWN ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff "
				      "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n";
	static const char tcp6_longest[] =
	    "PROXY TCP6 ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff "
	    "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n";
	char line[256];
	struct eb_proxy_header h;

	(void)state;
	assert_int_equal(strlen(longest), EB_PROXY_V1_MAX);
	assert_int_equal(v1(longest, &h), 0);
	assert_int_equal(h.size, 107);
	assert_int_equal(v1(tcp6_longest, &h), 0);
	check_inet6(&h.src, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 65535);

	/* 108 bytes: the CRLF comes one byte late, and a line without one at all. */
	snprintf(line, sizeof(line), "PROXY UNKNOWN %094d\r\n", 0);
	assert_int_equal(strlen(line), 110);
	line[106] = '\r', line[107] = '\n', line[108] = '\0';
	assert_int_equal(v1(line, &h), -EMSGSIZE);
	memset(line + 6, 'x', 200);
	line[206] = '\0';
	assert_int_equal(v1(line, &h), -EMSGSIZE);
	/* 107 bytes whose last is a CR: the LF could only come at 108. */
	line[106] = '\r';
	assert_int_equal(parse((const uint8_t *)line, 107, &h), -EMSGSIZE);
	assert_int_equal(parse((const uint8_t *)line, 106, &h), -EAGAIN);
}

static void test_v1_malformed(void **state)
{
	static const char *const bad[] = {
	    "PROXY TCP4 192.0.2.10 198.51.100.1 40000 55225\n",    /* bare LF */
	    "PROXY TCP4 192.0.2.10 198.51.100.1 40000 55225\rX",   /* CR, no LF */
	    "PROXY TCP4  192.0.2.10 198.51.100.1 40000 55225\r\n", /* two spaces */
	    "PROXY TCP4 192.0.2.10 198.51.100.1 40000 55225 \r\n", /* trailing space */
	    "PROXY TCP4 192.0.2.10 198.51.100.1 40000\r\n",        /* three fields */
	    "PROXY TCP4 192.0.2.10 198.51.100.1 1 2 3\r\n",        /* five */
	    "PROXY TCP4 192.0.2.10 198.51.100.1 040000 55225\r\n", /* leading zero */
	    "PROXY TCP4 192.0.2.10 198.51.100.1 65536 55225\r\n",  /* port too big */
	    "PROXY TCP4 192.0.2.10 198.51.100.1 -1 55225\r\n",
	    "PROXY TCP4 192.0.2.10 198.51.100.1 +1 55225\r\n",
	    "PROXY TCP4 192.0.2.256 198.51.100.1 1 2\r\n",
	    "PROXY TCP4 2001:db8::1 198.51.100.1 1 2\r\n", /* family mismatch */
	    "PROXY TCP6 192.0.2.1 ::1 1 2\r\n",
	    "PROXY TCP6 [::1] ::1 1 2\r\n",
	    "PROXY TCP5 192.0.2.1 192.0.2.1 1 2\r\n",
	    "PROXY UDP4 192.0.2.1 192.0.2.1 1 2\r\n",
	    "PROXY UNKNOWNX\r\n",
	    "PROXY \r\n",
	    "PROXY TCP4\r\n",
	    "PROXY TCP4 \r\n",
	    "proxy TCP4 192.0.2.10 198.51.100.1 1 2\r\n",
	    "PROXY\tTCP4 192.0.2.10 198.51.100.1 1 2\r\n",
	    "PROXY TCP4 192.0.2.10\x01 198.51.100.1 1 2\r\n",
	    "PROXY TCP4 192.0.2.10 198.51.100.1 1 2\xc3\xa9\r\n",
	};
	struct eb_proxy_header h;

	(void)state;
	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		int r = v1(bad[i], &h);

		if (r != -EBADMSG)
			fail_msg("\"%s\": %d, expected -EBADMSG", bad[i], r);
	}
	/* A control character is refused as it comes, before any CRLF. */
	assert_int_equal(v1("PROXY TCP4 \x01", &h), -EBADMSG);
	assert_int_equal(v1("PROXX", &h), -EBADMSG);
}

/* Writes data to fd in pieces of step bytes, running the reader after each; returns its last
 * result. */
static int feed(struct eb_proxy_reader *r, int rd, int wr, const uint8_t *data, size_t n,
                size_t step, struct eb_proxy_header *h)
{
	int q = -EAGAIN;

	for (size_t i = 0; i < n; i += step) {
		size_t k = MIN(step, n - i);

		assert_int_equal(write(wr, data + i, k), (ssize_t)k);
		q = eb_proxy_read(r, rd, h);
		if (q != -EAGAIN) {
			/* The client's bytes that had not come yet come now. */
			k = n - i - k;
			assert_int_equal(write(wr, data + n - k, k), (ssize_t)k);
			return q;
		}
	}
	return q;
}

/* The header, in pieces of every size, with the client's bytes right behind it: the reader
 * takes the header and leaves every byte after it in the socket. */
static void check_reader(const uint8_t *header, size_t size, bool local)
{
	static const char hello[] = "\x16\x03\x01 ClientHello";
	uint8_t data[EB_PROXY_HEADER_MAX + sizeof(hello)], rest[64];

	memcpy(data, header, size);
	memcpy(data + size, hello, sizeof(hello));
	for (size_t step = 1; step <= size + sizeof(hello); step++) {
		struct eb_proxy_reader r = {};
		struct eb_proxy_header h;
		int sv[2], q;
		ssize_t k;

		assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
		q = feed(&r, sv[0], sv[1], data, size + sizeof(hello), step, &h);
		assert_int_equal(q, 0);
		assert_int_equal(h.size, size);
		assert_int_equal(h.local, local);
		/* The reader took nothing it was not sure of, so what is left is all the client's.
		 */
		assert_int_equal(shutdown(sv[1], SHUT_WR), 0);
		k = recv(sv[0], rest, sizeof(rest), MSG_WAITALL);
		assert_int_equal(k, sizeof(hello));
		assert_memory_equal(rest, hello, sizeof(hello));
		close(sv[0]);
		close(sv[1]);
	}
}

static void test_reader(void **state)
{
	static const char tcp4[] = "PROXY TCP4 192.0.2.10 198.51.100.1 40000 55225\r\n";
	uint8_t buf[EB_PROXY_HEADER_MAX];
	size_t n;

	(void)state;
	n = v2(buf, 0x21, 0x11, inet_body, sizeof(inet_body));
	check_reader(buf, n, false);
	n = v2(buf, 0x20, 0x00, inet_body, 0);
	check_reader(buf, n, true);
	check_reader((const uint8_t *)tcp4, strlen(tcp4), false);
	check_reader((const uint8_t *)"PROXY UNKNOWN\r\n", 15, true);
}

static void test_reader_errors(void **state)
{
	static const uint8_t hello[] = {0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc,
	                                0x03, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
	struct eb_proxy_reader r = {};
	struct eb_proxy_header h;
	uint8_t buf[64];
	int sv[2];
	size_t n;

	(void)state;
	/* Closed before a byte: a health check that only connects. */
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(eb_proxy_read(&r, sv[0], &h), -EAGAIN);
	close(sv[1]);
	assert_int_equal(eb_proxy_read(&r, sv[0], &h), -EPIPE);
	close(sv[0]);

	/* Closed partway. */
	r = (struct eb_proxy_reader){};
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	n = v2(buf, 0x21, 0x11, inet_body, sizeof(inet_body));
	assert_int_equal(write(sv[1], buf, n - 1), (ssize_t)(n - 1));
	assert_int_equal(eb_proxy_read(&r, sv[0], &h), -EAGAIN);
	close(sv[1]);
	assert_int_equal(eb_proxy_read(&r, sv[0], &h), -ECONNRESET);
	close(sv[0]);

	/* A TLS ClientHello where the header should be: refused at once. */
	r = (struct eb_proxy_reader){};
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(write(sv[1], hello, sizeof(hello)), (ssize_t)sizeof(hello));
	assert_int_equal(eb_proxy_read(&r, sv[0], &h), -EBADMSG);
	close(sv[0]);
	close(sv[1]);

	/* Oversized: refused once the length is in, with nothing more read. */
	r = (struct eb_proxy_reader){};
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	(void)v2(buf, 0x21, 0x11, inet_body, 0);
	buf[14] = buf[15] = 0xff;
	memset(buf + 16, 0, 32);
	assert_int_equal(write(sv[1], buf, 48), 48);
	assert_int_equal(eb_proxy_read(&r, sv[0], &h), -EMSGSIZE);
	assert_int_equal(r.n, 16);
	close(sv[0]);
	close(sv[1]);
}

/* A TCP peer that resets (as HAProxy ends its health checks): before a byte it is gone as
 * quietly as one that closed; partway through a header it is not. */
static void reset_after(const uint8_t *data, size_t n, int expected)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct linger lin = {.l_onoff = 1, .l_linger = 0};
	struct eb_proxy_reader r = {};
	struct eb_proxy_header h;
	socklen_t len = sizeof(a);
	int l, c, s, q;

	l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(l >= 0);
	assert_int_equal(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(l, 1), 0);
	assert_int_equal(getsockname(l, (struct sockaddr *)&a, &len), 0);
	c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_int_equal(connect(c, (struct sockaddr *)&a, sizeof(a)), 0);
	s = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	assert_true(s >= 0);
	if (n > 0) {
		assert_int_equal(write(c, data, n), (ssize_t)n);
		/* The bytes are in before the reset comes. */
		assert_int_equal(eb_proxy_read(&r, s, &h), -EAGAIN);
	}
	assert_int_equal(setsockopt(c, SOL_SOCKET, SO_LINGER, &lin, sizeof(lin)), 0);
	close(c);
	do
		q = eb_proxy_read(&r, s, &h);
	while (q == -EAGAIN);
	assert_int_equal(q, expected);
	close(s);
	close(l);
}

static void test_reader_reset(void **state)
{
	(void)state;
	reset_after(NULL, 0, -EPIPE);
	reset_after(sig, 8, -ECONNRESET);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_v2_inet),
	    cmocka_unit_test(test_v2_inet6),
	    cmocka_unit_test(test_v2_local),
	    cmocka_unit_test(test_v2_tlvs),
	    cmocka_unit_test(test_v2_oversized),
	    cmocka_unit_test(test_v2_malformed),
	    cmocka_unit_test(test_v1),
	    cmocka_unit_test(test_v1_limits),
	    cmocka_unit_test(test_v1_malformed),
	    cmocka_unit_test(test_reader),
	    cmocka_unit_test(test_reader_errors),
	    cmocka_unit_test(test_reader_reset),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
