/* SPDX-License-Identifier: MIT */
/* TLS 1.3 contexts with external pre-shared keys: identity = user name, 256-bit key. */
#pragma once

#include <stdint.h>

#include "key.h"

struct ssl_ctx_st;

/* The one ciphersuite spoken: its hash (SHA-384) is bound to every PSK. */
#define EB_TLS_CIPHERSUITE "TLS_AES_256_GCM_SHA384"

/* Finds the key of the user named identity; returns 0 and fills ret_key and ret_tag, or
 * -ENOENT. The tag is the caller's: which version of the key was handed out, so that a server
 * that changes keys while handshakes are under way can tell afterwards which one a peer proved
 * (eb_conn_key_tag()). It may run on any thread that drives a handshake. */
typedef int (*eb_tls_psk_lookup_t)(const char *identity, uint8_t ret_key[EB_KEY_SIZE],
                                   uint64_t *ret_tag, void *userdata);

/* A server context: TLS 1.3 only, PSK with (EC)DHE key exchange only (psk_dhe_ke), no
 * certificates, no session tickets. */
int eb_tls_server_new(eb_tls_psk_lookup_t lookup, void *userdata, struct ssl_ctx_st **ret);

/* A client context that offers user's key. The key is copied into the context's own memory and
 * wiped when the context is freed. */
int eb_tls_client_new(const char *user, const uint8_t key[EB_KEY_SIZE], struct ssl_ctx_st **ret);

struct ssl_ctx_st *eb_tls_free(struct ssl_ctx_st *ctx);
