/* SPDX-License-Identifier: MIT */
/* Fuzzes broker addresses: the parser, and the round trip through the canonical form. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "uri.h"

/* Longer than any address that fits; longer inputs only slow the fuzzer down. */
#define INPUT_MAX 512

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char s[INPUT_MAX + 1], canon[INPUT_MAX + 64], again[INPUT_MAX + 64];
	struct eb_uri u, v;
	int r;

	if (size > INPUT_MAX)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';

	r = eb_uri_parse(s, &u);
	if (r < 0) {
		check(r == -EINVAL);
		return 0;
	}

	check(u.kind >= 0 && u.kind < _EB_URI_KIND_MAX);
	check(eb_uri_is_tls(&u) >= 0);
	switch (u.kind) {
	case EB_URI_TCP:
	case EB_URI_VSOCK:
		check(u.port != 0);
		break;
	case EB_URI_UNIX:
	case EB_URI_UNIX_TLS:
	case EB_URI_VIRTIO:
		check(u.path[0] == '/');
		check(strnlen(u.path, sizeof(u.path)) < sizeof(u.path));
		break;
	case EB_URI_SRV:
		check(u.host[0] != '\0' && u.port == 0);
		break;
	case _EB_URI_KIND_MAX:
	case _EB_URI_KIND_INVALID:
		abort();
	}

	/* Every accepted address has a canonical form that parses back to the same address, and is
	 * its own canonical form. */
	eb_uri_to_string(&u, canon, sizeof(canon));
	check(eb_uri_parse(canon, &v) == 0);
	check(memcmp(&u, &v, sizeof(u)) == 0);
	check(strcmp(eb_uri_to_string(&v, again, sizeof(again)), canon) == 0);
	return 0;
}
