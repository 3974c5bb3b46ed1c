/* SPDX-License-Identifier: MIT */
/* Fuzzes the PROXY protocol header parser: its results, its bounds, and that a header's meaning
 * depends on its own bytes alone, never on what follows it or on how much of it has come. */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "fuzz.h"
#include "proxy.h"

/* A little past the longest header, so that the bytes after one are fuzzed too. */
#define INPUT_MAX (EB_PROXY_HEADER_MAX + 64)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct eb_proxy_header h, again;
	int r, q;

	if (size > INPUT_MAX)
		return 0;
	r = eb_proxy_parse(data, size, &h);
	check(r == 0 || r == -EAGAIN || r == -EBADMSG || r == -EMSGSIZE || r == -EPROTONOSUPPORT);
	if (r == -EAGAIN) {
		/* More is asked for only while a header could still fit. */
		check(size < EB_PROXY_HEADER_MAX);
		return 0;
	}
	/* A prefix is never refused where the whole is taken, nor taken where the whole is
	 * refused: a header arriving in pieces means what it means at once. */
	for (size_t n = 0; n < size; n++) {
		q = eb_proxy_parse(data, n, &again);
		if (r < 0)
			check(q == -EAGAIN || q == r);
		else
			check(n < h.size ? q == -EAGAIN : q == 0 && again.size == h.size);
	}
	if (r < 0)
		return 0;

	check(h.version == 1 || h.version == 2);
	check(h.size <= size && h.size <= EB_PROXY_HEADER_MAX);
	if (h.version == 1)
		check(h.size <= EB_PROXY_V1_MAX && h.size >= 15);
	else
		check(h.size >= 16);
	if (h.local)
		check(h.src.ss_family == AF_UNSPEC && h.dst.ss_family == AF_UNSPEC);
	else
		check((h.src.ss_family == AF_INET || h.src.ss_family == AF_INET6) &&
		      h.dst.ss_family == h.src.ss_family);
	/* The header alone means the same as the header with anything after it. */
	check(eb_proxy_parse(data, h.size, &again) == 0);
	check(memcmp(&h, &again, sizeof(h)) == 0);
	return 0;
}
