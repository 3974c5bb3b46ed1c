/* SPDX-License-Identifier: MIT */
#include "tls.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "macro.h"
#include "proto.h"
#include "tls-internal.h"

/* TLS_AES_256_GCM_SHA384 on the wire (RFC 8446, B.4). */
static const unsigned char suite_id[2] = {0x13, 0x02};

struct server_data {
	eb_tls_psk_lookup_t lookup;
	void *userdata;
};

struct client_data {
	char user[EB_KIND_MAX + 1];
	uint8_t key[EB_KEY_SIZE];
};

static int ctx_index = -1, ssl_index = -1;

static void free_ctx_data(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl,
                          void *argp)
{
	(void)parent, (void)ad, (void)idx, (void)argl, (void)argp;
	if (!ptr)
		return;
	/* Both kinds of data are allocated with the larger size, so that this one function can
	 * wipe either: the client's holds a key. */
	OPENSSL_clear_free(ptr, MAX(sizeof(struct server_data), sizeof(struct client_data)));
}

static void free_peer(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl, void *argp)
{
	(void)parent, (void)ad, (void)idx, (void)argl, (void)argp;
	free(ptr);
}

static int init_indexes(void)
{
	if (ctx_index < 0)
		ctx_index = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, free_ctx_data);
	if (ssl_index < 0)
		ssl_index = SSL_get_ex_new_index(0, NULL, NULL, NULL, free_peer);
	return ctx_index < 0 || ssl_index < 0 ? -ENOMEM : 0;
}

/* Builds the session that carries an external PSK: OpenSSL takes PSKs for TLS 1.3 as resumable
 * sessions whose master key is the PSK and whose cipher fixes the hash the PSK is bound to. */
static SSL_SESSION *psk_session(SSL *ssl, const uint8_t key[EB_KEY_SIZE])
{
	const SSL_CIPHER *cipher = SSL_CIPHER_find(ssl, suite_id);
	SSL_SESSION *s;

	if (!cipher)
		return NULL;
	s = SSL_SESSION_new();
	if (!s)
		return NULL;
	if (!SSL_SESSION_set1_master_key(s, key, EB_KEY_SIZE) ||
	    !SSL_SESSION_set_cipher(s, cipher) ||
	    !SSL_SESSION_set_protocol_version(s, TLS1_3_VERSION)) {
		SSL_SESSION_free(s);
		return NULL;
	}
	return s;
}

/* A ClientHello may offer many identities, and OpenSSL asks us about each in turn until one has a
 * session. Only the first few are looked up: no client of ours offers more than one, and a
 * stranger must not make the broker search its user table thousands of times per handshake. */
#define PEER_LOOKUPS_MAX 4

/* The one peer record of a connection, made at the first identity offered and reused for the
 * next: a ClientHello with thousands of identities costs one allocation, not thousands. */
static struct eb_tls_peer *peer_record(SSL *ssl)
{
	struct eb_tls_peer *peer = SSL_get_ex_data(ssl, ssl_index);

	if (peer)
		return peer;
	peer = calloc(1, sizeof(*peer));
	if (!peer)
		return NULL;
	if (!SSL_set_ex_data(ssl, ssl_index, peer)) {
		free(peer);
		return NULL;
	}
	return peer;
}

static int find_session(SSL *ssl, const unsigned char *identity, size_t identity_len,
                        SSL_SESSION **ret)
{
	struct server_data *d = SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), ctx_index);
	struct eb_tls_peer *peer;
	uint8_t key[EB_KEY_SIZE];
	bool printable = true, too_long = identity_len > EB_KIND_MAX;
	size_t shown;

	*ret = NULL;
	peer = peer_record(ssl);
	if (!peer)
		return 0;
	/* Past the first few: no session for this one either, and the handshake fails for want of
	 * a PSK. */
	if (peer->offered++ >= PEER_LOOKUPS_MAX)
		return 1;

	/* The identity is the peer's first word to us: keep a printable copy, since it ends up in
	 * a log line when the user is unknown. One longer than any user name can be is nobody,
	 * and is not looked up under a shortened name: "..." marks it in the log. */
	peer->known = false;
	shown = MIN(identity_len, (size_t)EB_KIND_MAX);
	for (size_t i = 0; i < shown; i++) {
		bool ok = identity[i] >= 0x20 && identity[i] < 0x7f;

		peer->identity[i] = ok ? (char)identity[i] : '?';
		printable = printable && ok;
	}
	peer->identity[shown] = '\0';
	if (too_long)
		memcpy(peer->identity + shown, "...", sizeof("..."));
	/* Only the bytes as sent name a user: "al\001ce" is not "al?ce". */
	if (too_long || !printable || d->lookup(peer->identity, key, &peer->tag, d->userdata) < 0)
		return 1; /* No session: the handshake fails for want of a PSK. */
	peer->known = true;
	*ret = psk_session(ssl, key);
	explicit_bzero(key, sizeof(key));
	return *ret ? 1 : 0;
}

static int use_session(SSL *ssl, const EVP_MD *md, const unsigned char **ret_id, size_t *ret_idlen,
                       SSL_SESSION **ret)
{
	struct client_data *d = SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), ctx_index);
	const SSL_CIPHER *cipher = SSL_CIPHER_find(ssl, suite_id);

	*ret = NULL;
	/* After a HelloRetryRequest OpenSSL asks again with the negotiated hash; our PSK is only
	 * valid with SHA-384. */
	if (!cipher || (md && md != SSL_CIPHER_get_handshake_digest(cipher)))
		return 1;
	*ret = psk_session(ssl, d->key);
	if (!*ret)
		return 0;
	*ret_id = (const unsigned char *)d->user;
	*ret_idlen = strlen(d->user);
	return 1;
}

/* A context with our settings and a zeroed data block attached, which free_ctx_data() wipes. */
static SSL_CTX *ctx_new(const SSL_METHOD *method, void **ret_data)
{
	SSL_CTX *ctx;
	void *d;

	if (init_indexes() < 0)
		return NULL;
	ctx = SSL_CTX_new(method);
	if (!ctx)
		return NULL;
	d = OPENSSL_zalloc(MAX(sizeof(struct server_data), sizeof(struct client_data)));
	if (!d || !SSL_CTX_set_ex_data(ctx, ctx_index, d)) {
		OPENSSL_free(d);
		SSL_CTX_free(ctx);
		return NULL;
	}
	*ret_data = d;
	/* TLS 1.3 only, one suite, (EC)DHE with every PSK (psk_dhe_ke: forward secrecy), no
	 * tickets or cache: every connection authenticates with the user's key afresh. */
	if (!SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) ||
	    !SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION) ||
	    !SSL_CTX_set_ciphersuites(ctx, EB_TLS_CIPHERSUITE) ||
	    !SSL_CTX_set_num_tickets(ctx, 0)) {
		SSL_CTX_free(ctx);
		return NULL;
	}
	SSL_CTX_clear_options(ctx, SSL_OP_ALLOW_NO_DHE_KEX);
	SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET | SSL_OP_IGNORE_UNEXPECTED_EOF);
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	return ctx;
}

int eb_tls_server_new(eb_tls_psk_lookup_t lookup, void *userdata, SSL_CTX **ret)
{
	struct server_data *d;
	SSL_CTX *ctx;

	ctx = ctx_new(TLS_server_method(), (void **)&d);
	if (!ctx)
		return -ENOMEM;
	d->lookup = lookup;
	d->userdata = userdata;
	SSL_CTX_set_psk_find_session_callback(ctx, find_session);
	*ret = ctx;
	return 0;
}

int eb_tls_client_new(const char *user, const uint8_t key[EB_KEY_SIZE], SSL_CTX **ret)
{
	struct client_data *d;
	SSL_CTX *ctx;

	if (!user || strlen(user) == 0 || strlen(user) > EB_KIND_MAX)
		return -EINVAL;
	ctx = ctx_new(TLS_client_method(), (void **)&d);
	if (!ctx)
		return -ENOMEM;
	memcpy(d->user, user, strlen(user) + 1);
	memcpy(d->key, key, EB_KEY_SIZE);
	SSL_CTX_set_psk_use_session_callback(ctx, use_session);
	*ret = ctx;
	return 0;
}

SSL_CTX *eb_tls_free(SSL_CTX *ctx)
{
	SSL_CTX_free(ctx);
	return NULL;
}

const struct eb_tls_peer *eb_tls_peer(SSL *ssl)
{
	return ssl_index < 0 ? NULL : SSL_get_ex_data(ssl, ssl_index);
}
