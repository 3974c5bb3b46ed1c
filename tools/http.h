/* SPDX-License-Identifier: MIT */
/* eb-metrics' HTTP: one request per connection, its head read within a bound and parsed, one
 * response with Connection: close. */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A request head; Prometheus sends about 300 bytes, a browser under 1 KiB. */
#define HTTP_REQUEST_MAX 8192

enum http_route {
	HTTP_ROUTE_METRICS,      /* /metrics: the figures for Prometheus */
	HTTP_ROUTE_PAGE,         /* /: the status page */
	HTTP_ROUTE_HISTORY_JSON, /* /history.json: the page's data for scripts */
	_HTTP_ROUTE_MAX,
	_HTTP_ROUTE_INVALID = -EINVAL,
};

struct http_request {
	enum http_route route;
	bool head;        /* HEAD: the response's head alone */
	bool openmetrics; /* an Accept header names application/openmetrics-text */
};

/* Parses the head of a request, len bytes (a NUL among them is refused, not an end). Returns 200
 * and fills *ret, or the status to answer: 400 for a malformed request line, 405 for a method
 * other than GET or HEAD, 404 for another path. Pure: no I/O, no allocation. */
int http_request_parse(const char *buf, size_t len, struct http_request *ret);

/* Reads from fd until the blank line that ends a request's head, into buf (NUL-terminated), at
 * most size - 1 bytes and until deadline (eb_now_ms()). Returns the head's length, -ETIMEDOUT,
 * -EMSGSIZE when it does not fit, -ECONNRESET when the client closed first, or recv()'s error.
 * The body of a GET, if any, is never read. */
int http_read_head(int fd, char *buf, size_t size, uint64_t deadline);

/* Sends one response (the body only when !head), closes the sending side and drains what the
 * client still sends for a while, so that closing does not reset a connection whose response
 * the client has not read. extra: more header lines, each ending in \r\n, or NULL. */
int http_respond(int fd, int status, const char *content_type, const char *extra, const char *body,
                 size_t len, bool head);
