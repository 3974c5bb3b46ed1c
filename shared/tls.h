/* SPDX-License-Identifier: MIT */
/* TLS 1.3 contexts with external pre-shared keys: identity = user name, 256-bit key bound to one
 * hash. */
#pragma once

#include <stdint.h>

#include "key.h"
#include "proto.h"

struct ssl_ctx_st;

/* The suites a server speaks, one per hash a key may be bound to (enum eb_key_hash). A session
 * uses the suite of its key's hash. */
#define EB_TLS_SERVER_CIPHERSUITES "TLS_AES_256_GCM_SHA384:TLS_AES_128_GCM_SHA256"

/* The longest PSK identity that can name a key: a user name (64 bytes), '/' and a key id (32). */
#define EB_TLS_IDENTITY_MAX (EB_KIND_MAX + 1 + EB_KEY_ID_MAX)

/* What a server's lookup finds for an identity. */
struct eb_tls_psk {
	uint8_t key[EB_KEY_SIZE];
	enum eb_key_hash hash; /* the one hash the key is used with */
	uint64_t tag;          /* the caller's: see eb_tls_psk_lookup_t */
};

/* Finds the key of the user named identity; returns 0 and fills ret, or -ENOENT. The tag is the
 * caller's: which version of the key was handed out, so that a server that changes keys while
 * handshakes are under way can tell afterwards which one a peer proved (eb_conn_key_tag()). It
 * may run on any thread that drives a handshake. */
typedef int (*eb_tls_psk_lookup_t)(const char *identity, struct eb_tls_psk *ret, void *userdata);

/* A server context: TLS 1.3 only, PSK with (EC)DHE key exchange only (psk_dhe_ke), no
 * certificates, no session tickets. The suite of each handshake is the one whose hash the
 * client's binder was made with. An identity that names no user, or a user whose key is bound to
 * the other hash, is given a key no client holds (derived from a secret of the context's and the
 * identity), so that every failed login fails the same way, on the binder, after the same work. */
int eb_tls_server_new(eb_tls_psk_lookup_t lookup, void *userdata, struct ssl_ctx_st **ret);

/* A client context that offers key under identity (a user name, or "USER/KEYID"), bound to hash,
 * with that hash's suite alone. The key is copied into the context's own memory and wiped when
 * the context is freed. */
int eb_tls_client_new_hash(const char *identity, const uint8_t key[EB_KEY_SIZE],
                           enum eb_key_hash hash, struct ssl_ctx_st **ret);
/* The context of user's key of id key_id (NULL: none), bound to SHA-384, the hash of every key
 * the project's own clients hold. */
int eb_tls_client_new(const char *user, const char *key_id, const uint8_t key[EB_KEY_SIZE],
                      struct ssl_ctx_st **ret);

struct ssl_ctx_st *eb_tls_free(struct ssl_ctx_st *ctx);
