/* SPDX-License-Identifier: MIT */
/* eb-metrics' HTTP/1.x: a request's head read within a size and a time, its request line and
 * one header parsed with every length checked, one response. Only what eb-metrics needs: one
 * request per connection (the socket unit starts a process for each), no body, no keep-alive;
 * docs/decisions.md says why this stays hand-written. */
#include "http.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "io.h"
#include "macro.h"
#include "time-util.h"

/* The head is complete at its first blank line, written with CRLF or, leniently, LF alone. */
static bool head_complete(const char *buf, size_t len)
{
	return memmem(buf, len, "\r\n\r\n", 4) || memmem(buf, len, "\n\n", 2);
}

int http_read_head(int fd, char *buf, size_t size, uint64_t deadline)
{
	size_t len = 0;

	if (size == 0)
		return -EMSGSIZE;
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		uint64_t now = eb_now_ms();
		ssize_t n;
		int r;

		if (now >= deadline)
			return -ETIMEDOUT;
		r = poll(&p, 1, (int)MIN(deadline - now, (uint64_t)INT32_MAX));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -ETIMEDOUT;
		if (len + 1 >= size)
			return -EMSGSIZE;
		n = recv(fd, buf + len, size - 1 - len, MSG_DONTWAIT);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ECONNRESET;
		len += (size_t)n;
		buf[len] = '\0';
		if (head_complete(buf, len))
			return (int)len;
	}
}

/* Whether the target's path (up to a query) is exactly path. */
static bool path_is(const char *target, size_t n, const char *path)
{
	size_t p = strlen(path);

	return n >= p && memcmp(target, path, p) == 0 && (n == p || target[p] == '?');
}

/* An Accept header that names OpenMetrics. Header lines are those after the request line, up to
 * the blank line; a line's end is LF, with or without CR before it. */
static bool accepts_openmetrics(const char *buf, size_t len)
{
	static const char want[] = "application/openmetrics-text";
	const char *end = buf + len;

	for (const char *l = memchr(buf, '\n', len); l && l + 1 < end;
	     l = memchr(l + 1, '\n', (size_t)(end - l - 1))) {
		const char *line = l + 1;
		const char *eol = memchr(line, '\n', (size_t)(end - line));
		size_t n = (size_t)((eol ? eol : end) - line);

		if (n == 0 || (n == 1 && line[0] == '\r'))
			break;
		if (n > 7 && strncasecmp(line, "accept:", 7) == 0 &&
		    memmem(line + 7, n - 7, want, sizeof(want) - 1))
			return true;
	}
	return false;
}

int http_request_parse(const char *buf, size_t len, struct http_request *ret)
{
	const char *eol = memchr(buf, '\n', len), *method = buf, *target, *version, *sp;
	size_t line, m, t;
	bool head;

	/* The request line: METHOD SP TARGET SP HTTP/1.x, of printable characters. */
	if (!eol)
		return 400;
	line = (size_t)(eol - buf);
	if (line > 0 && buf[line - 1] == '\r')
		line--;
	for (size_t i = 0; i < line; i++)
		if (buf[i] < 0x20 || buf[i] > 0x7e)
			return 400;
	sp = memchr(method, ' ', line);
	if (!sp || sp == method)
		return 400;
	m = (size_t)(sp - method);
	target = sp + 1;
	sp = memchr(target, ' ', line - m - 1);
	if (!sp || sp == target)
		return 400;
	t = (size_t)(sp - target);
	version = sp + 1;
	if (line - (m + 1 + t + 1) != 8 || memcmp(version, "HTTP/1.", 7) != 0 ||
	    (version[7] != '0' && version[7] != '1'))
		return 400;

	if (m == 3 && memcmp(method, "GET", 3) == 0)
		head = false;
	else if (m == 4 && memcmp(method, "HEAD", 4) == 0)
		head = true;
	else
		return 405;

	/* A query string is allowed and ignored: there is one set of figures. */
	if (path_is(target, t, "/metrics"))
		ret->route = HTTP_ROUTE_METRICS;
	else if (path_is(target, t, "/") || path_is(target, t, "/index.html"))
		ret->route = HTTP_ROUTE_PAGE;
	else if (path_is(target, t, "/history.json"))
		ret->route = HTTP_ROUTE_HISTORY_JSON;
	else
		return 404;
	ret->head = head;
	ret->openmetrics = accepts_openmetrics(buf, len);
	return 200;
}

static void drain(int fd, uint64_t deadline)
{
	char buf[4096];

	for (size_t total = 0; total < 256 * 1024;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		uint64_t now = eb_now_ms();
		ssize_t n;

		if (now >= deadline || poll(&p, 1, (int)(deadline - now)) <= 0)
			return;
		n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
			return;
		total += n > 0 ? (size_t)n : 0;
	}
}

static const char *reason(int status)
{
	static const struct {
		int code;
		const char *reason;
	} reasons[] = {
	    {200, "OK"},
	    {400, "Bad Request"},
	    {404, "Not Found"},
	    {405, "Method Not Allowed"},
	    {408, "Request Timeout"},
	    {431, "Request Header Fields Too Large"},
	};

	for (size_t i = 0; i < ELEMENTSOF(reasons); i++)
		if (reasons[i].code == status)
			return reasons[i].reason;
	return "Error";
}

int http_respond(int fd, int status, const char *content_type, const char *extra, const char *body,
                 size_t len, bool head)
{
	char hdr[1024];
	int n, r;

	n = snprintf(hdr, sizeof(hdr),
	             "HTTP/1.1 %d %s\r\n"
	             "Content-Type: %s\r\n"
	             "Content-Length: %zu\r\n"
	             "%s%s"
	             "Connection: close\r\n\r\n",
	             status, reason(status), content_type, len,
	             status == 405 ? "Allow: GET, HEAD\r\n" : "", extra ? extra : "");
	if (n < 0 || (size_t)n >= sizeof(hdr))
		return -ENOBUFS;
	r = eb_send_all(fd, hdr, (size_t)n);
	if (r >= 0 && !head)
		r = eb_send_all(fd, body, len);
	/* The response is whole: say so, then read what the client still sends (a request cut
	 * short at HTTP_REQUEST_MAX) until it closes, for a while: closing with unread bytes would
	 * reset the connection, and the client might lose the response with it. */
	(void)shutdown(fd, SHUT_WR);
	drain(fd, eb_now_ms() + 1000);
	return r;
}
