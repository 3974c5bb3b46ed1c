/* SPDX-License-Identifier: MIT */
/* What the TLS context learns about a peer during the handshake; shared by tls.c and conn.c. */
#pragma once

#include <stdbool.h>

#include <openssl/ssl.h>

#include "proto.h"
#include "tls.h"

struct eb_tls_peer {
	char identity[EB_TLS_IDENTITY_MAX + 4]; /* printable copy of the PSK identity offered;
	                                         * "..." ends one longer than the maximum */
	bool known;       /* the identity named a configured user, whose key is
	                   * bound to this handshake's hash */
	bool wrong_hash;  /* ... whose key is bound to the other hash */
	unsigned offered; /* identities offered so far in this handshake */
	uint64_t tag;     /* what the lookup said of the key it gave (known only) */
};

/* The peer record of a server-side connection, or NULL before the client offered a PSK. */
const struct eb_tls_peer *eb_tls_peer(SSL *ssl);
