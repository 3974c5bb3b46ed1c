/* SPDX-License-Identifier: MIT */
/* Fuzzes eb-metrics' request parser: any bytes give one of the statuses it documents, and a
 * request it accepts is one a reader of its request line would accept too. */
#include <stdbool.h>
#include <string.h>

#include "fuzz.h"
#include "http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct http_request req = {.route = _HTTP_ROUTE_INVALID};
	char *buf;
	int status;

	/* http_read_head() never hands over more. */
	if (size >= HTTP_REQUEST_MAX)
		return 0;
	/* A copy of its own size exactly, so that ASan sees a read past the end. */
	buf = malloc(size ? size : 1);
	check(buf);
	memcpy(buf, data, size);

	status = http_request_parse(buf, size, &req);
	check(status == 200 || status == 400 || status == 404 || status == 405);
	if (status == 200) {
		check(req.route >= 0 && req.route < _HTTP_ROUTE_MAX);
		check(req.head ? size > 5 && memcmp(buf, "HEAD ", 5) == 0
		               : size > 4 && memcmp(buf, "GET ", 4) == 0);
		check(memchr(buf, '\n', size));
		/* The target starts with the path it was routed by. */
		check(buf[req.head ? 5 : 4] == '/');
	} else {
		check(req.route == _HTTP_ROUTE_INVALID);
	}
	/* The same bytes, the same answer. */
	check(http_request_parse(buf, size, &(struct http_request){}) == status);
	free(buf);
	return 0;
}
