/* SPDX-License-Identifier: MIT */
#include "tls.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>

#include "macro.h"
#include "proto.h"
#include "tls-internal.h"

/* The suites on the wire (RFC 8446, B.4), by the hash a key is bound to (enum eb_key_hash). */
static const unsigned char suite_ids[_EB_KEY_HASH_MAX][2] = {
    [EB_KEY_HASH_SHA384] = {0x13, 0x02},
    [EB_KEY_HASH_SHA256] = {0x13, 0x01},
};
static const char *const suite_names[_EB_KEY_HASH_MAX] = {
    [EB_KEY_HASH_SHA384] = "TLS_AES_256_GCM_SHA384",
    [EB_KEY_HASH_SHA256] = "TLS_AES_128_GCM_SHA256",
};

/* The key given to an identity that has none: HMAC-SHA-256 of the identity under a secret of
 * this size, drawn when the server context is made. */
#define DUMMY_SECRET_SIZE 32

struct server_data {
	eb_tls_psk_lookup_t lookup;
	void *userdata;
};

struct client_data {
	char identity[EB_TLS_IDENTITY_MAX + 1];
	uint8_t key[EB_KEY_SIZE];
	enum eb_key_hash hash;
};

/* ctx_index: a context's server_data or client_data; ssl_index: a connection's eb_tls_peer;
 * mac_index: a server context's HMAC keyed with its dummy secret (dummy_key()). */
static int ctx_index = -1, ssl_index = -1, mac_index = -1;

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

static void free_mac(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl, void *argp)
{
	(void)parent, (void)ad, (void)idx, (void)argl, (void)argp;
	EVP_MAC_CTX_free(ptr); /* OpenSSL wipes the key it holds */
}

static int init_indexes(void)
{
	if (ctx_index < 0)
		ctx_index = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, free_ctx_data);
	if (ssl_index < 0)
		ssl_index = SSL_get_ex_new_index(0, NULL, NULL, NULL, free_peer);
	if (mac_index < 0)
		mac_index = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, free_mac);
	return ctx_index < 0 || ssl_index < 0 || mac_index < 0 ? -ENOMEM : 0;
}

/* Builds the session that carries an external PSK: OpenSSL takes PSKs for TLS 1.3 as resumable
 * sessions whose master key is the PSK and whose cipher fixes the hash the PSK is bound to. */
static SSL_SESSION *psk_session(const SSL_CIPHER *cipher, const uint8_t key[EB_KEY_SIZE])
{
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

/* The hash of the suite OpenSSL chose for this handshake. */
static enum eb_key_hash cipher_hash(const SSL_CIPHER *cipher)
{
	uint16_t id = SSL_CIPHER_get_protocol_id(cipher);

	return id == 0x1301 ? EB_KEY_HASH_SHA256 : EB_KEY_HASH_SHA384;
}

/* The length of the first binder of a pre_shared_key extension (RFC 8446, 4.2.11): the length of
 * the hash the client bound its PSK to. 0 when the extension is malformed, which OpenSSL's own
 * parser refuses later. */
static size_t first_binder_len(const unsigned char *p, size_t n)
{
	size_t ids;

	if (n < 2)
		return 0;
	ids = (size_t)p[0] << 8 | p[1];
	if (n < 2 + ids + 3)
		return 0;
	return p[2 + ids + 2];
}

/* OpenSSL 3.0 chooses the suite before it looks at a PSK, by the server's order or the client's,
 * and a PSK bound to the other suite's hash is then passed over: a client of SHA-256 keys that
 * lists TLS_AES_256_GCM_SHA384 first (as OpenSSL and GnuTLS do) would fail. So the suite is
 * chosen here, before that, as the one whose hash is as long as the first binder offered; the
 * PSK's session is then built with that suite (find_session()). */
static int on_client_hello(SSL *ssl, int *alert, void *arg)
{
	const unsigned char *ext;
	size_t n;
	enum eb_key_hash h;

	(void)alert, (void)arg;
	if (!SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_psk, &ext, &n))
		return SSL_CLIENT_HELLO_SUCCESS; /* no PSK: the handshake fails for want of one */
	h = first_binder_len(ext, n) == 32 ? EB_KEY_HASH_SHA256 : EB_KEY_HASH_SHA384;
	if (!SSL_set_ciphersuites(ssl, suite_names[h])) {
		*alert = SSL_AD_INTERNAL_ERROR;
		return SSL_CLIENT_HELLO_ERROR;
	}
	return SSL_CLIENT_HELLO_SUCCESS;
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

/* The key of an identity that has none: derived from the context's secret and the identity as
 * sent, so that the same name is always given the same key, and no client can hold it. The HMAC
 * keyed once with the secret is copied for each handshake: a one-shot HMAC() looks the MAC and
 * the digest up by name each time, under OpenSSL's locks, which cost as much as a tenth of
 * the broker's own work for a fresh seed. A copy only reads the keyed one, so handshake
 * workers may copy it at once. */
static bool dummy_key(SSL_CTX *ctx, const unsigned char *identity, size_t identity_len,
                      uint8_t ret_key[EB_KEY_SIZE])
{
	EVP_MAC_CTX *mac = EVP_MAC_CTX_dup(SSL_CTX_get_ex_data(ctx, mac_index));
	size_t len = 0;
	bool ok;

	ok = mac && EVP_MAC_update(mac, identity, identity_len) &&
	     EVP_MAC_final(mac, ret_key, &len, EB_KEY_SIZE) && len == EB_KEY_SIZE;
	EVP_MAC_CTX_free(mac);
	return ok;
}

/* The HMAC-SHA-256 that dummy_key() copies, keyed with a fresh secret, in ctx's mac_index. */
static int dummy_mac_new(SSL_CTX *ctx)
{
	OSSL_PARAM params[] = {
	    OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0),
	    OSSL_PARAM_construct_end(),
	};
	uint8_t secret[DUMMY_SECRET_SIZE];
	EVP_MAC *hmac = EVP_MAC_fetch(NULL, OSSL_MAC_NAME_HMAC, NULL);
	EVP_MAC_CTX *mac = hmac ? EVP_MAC_CTX_new(hmac) : NULL;
	int r = -ENOMEM;

	EVP_MAC_free(hmac); /* the context holds its own reference */
	if (mac && RAND_priv_bytes(secret, sizeof(secret)) != 1)
		r = -EIO;
	else if (mac && EVP_MAC_init(mac, secret, sizeof(secret), params) &&
	         SSL_CTX_set_ex_data(ctx, mac_index, mac))
		r = 0;
	explicit_bzero(secret, sizeof(secret));
	if (r < 0)
		EVP_MAC_CTX_free(mac);
	return r;
}

static int find_session(SSL *ssl, const unsigned char *identity, size_t identity_len,
                        SSL_SESSION **ret)
{
	struct server_data *d = SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), ctx_index);
	const SSL_CIPHER *cipher = SSL_get_pending_cipher(ssl);
	struct eb_tls_peer *peer;
	struct eb_tls_psk psk = {};
	uint8_t dummy[EB_KEY_SIZE];
	bool printable = true, too_long = identity_len > EB_TLS_IDENTITY_MAX, ok;
	size_t shown;

	*ret = NULL;
	peer = peer_record(ssl);
	if (!peer || !cipher)
		return 0;
	/* Past the first few: no session for this one either, and the handshake fails for want of
	 * a PSK. (Every identity looked up gets a session, so OpenSSL asks about the first alone;
	 * the limit holds should that change.) */
	if (peer->offered++ >= PEER_LOOKUPS_MAX)
		return 1;

	/* The identity is the peer's first word to us: keep a printable copy, since it ends up in
	 * a log line when the user is unknown. One longer than any user name and key id can be is
	 * nobody, and is not looked up under a shortened name: "..." marks it in the log. */
	peer->known = peer->wrong_hash = false;
	shown = MIN(identity_len, (size_t)EB_TLS_IDENTITY_MAX);
	for (size_t i = 0; i < shown; i++) {
		bool ok_byte = identity[i] >= 0x20 && identity[i] < 0x7f;

		peer->identity[i] = ok_byte ? (char)identity[i] : '?';
		printable = printable && ok_byte;
	}
	peer->identity[shown] = '\0';
	if (too_long)
		memcpy(peer->identity + shown, "...", sizeof("..."));
	/* Nobody gets a key too, so that an unknown name fails as a wrong key does: on the binder,
	 * with the same alert, after the same work (the dummy key is made for everyone). Told
	 * apart, they would list the users. */
	ok = dummy_key(SSL_get_SSL_CTX(ssl), identity, identity_len, dummy);
	/* Only the bytes as sent name a user: "al\001ce" is not "al?ce". A user's key is used with
	 * the one hash it is bound to; offered with the other, it is as good as no key. */
	if (!too_long && printable && d->lookup(peer->identity, &psk, d->userdata) >= 0) {
		peer->known = psk.hash == cipher_hash(cipher);
		peer->wrong_hash = !peer->known;
		peer->tag = psk.tag;
	}
	*ret = ok ? psk_session(cipher, peer->known ? psk.key : dummy) : NULL;
	explicit_bzero(&psk, sizeof(psk));
	explicit_bzero(dummy, sizeof(dummy));
	return *ret ? 1 : 0;
}

static int use_session(SSL *ssl, const EVP_MD *md, const unsigned char **ret_id, size_t *ret_idlen,
                       SSL_SESSION **ret)
{
	struct client_data *d = SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), ctx_index);
	const SSL_CIPHER *cipher = SSL_CIPHER_find(ssl, suite_ids[d->hash]);

	*ret = NULL;
	/* After a HelloRetryRequest OpenSSL asks again with the negotiated hash; our PSK is only
	 * valid with its own. */
	if (!cipher || (md && md != SSL_CIPHER_get_handshake_digest(cipher)))
		return 1;
	*ret = psk_session(cipher, d->key);
	if (!*ret)
		return 0;
	*ret_id = (const unsigned char *)d->identity;
	*ret_idlen = strlen(d->identity);
	return 1;
}

/* A context with our settings and a zeroed data block attached, which free_ctx_data() wipes. */
static SSL_CTX *ctx_new(const SSL_METHOD *method, const char *suites, void **ret_data)
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
	/* TLS 1.3 only, (EC)DHE with every PSK (psk_dhe_ke: forward secrecy), no tickets or
	 * cache: every connection authenticates with the user's key afresh. */
	if (!SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) ||
	    !SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION) ||
	    !SSL_CTX_set_ciphersuites(ctx, suites) || !SSL_CTX_set_num_tickets(ctx, 0)) {
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
	int r;

	ctx = ctx_new(TLS_server_method(), EB_TLS_SERVER_CIPHERSUITES, (void **)&d);
	if (!ctx)
		return -ENOMEM;
	r = dummy_mac_new(ctx);
	if (r < 0) {
		SSL_CTX_free(ctx);
		return r;
	}
	d->lookup = lookup;
	d->userdata = userdata;
	SSL_CTX_set_client_hello_cb(ctx, on_client_hello, NULL);
	SSL_CTX_set_psk_find_session_callback(ctx, find_session);
	*ret = ctx;
	return 0;
}

int eb_tls_client_new_hash(const char *identity, const uint8_t key[EB_KEY_SIZE],
                           enum eb_key_hash hash, SSL_CTX **ret)
{
	struct client_data *d;
	SSL_CTX *ctx;

	if (!identity || strlen(identity) == 0 || strlen(identity) > EB_TLS_IDENTITY_MAX ||
	    hash < 0 || hash >= _EB_KEY_HASH_MAX)
		return -EINVAL;
	/* The one suite of the key's hash: a broker then has nothing else to choose. */
	ctx = ctx_new(TLS_client_method(), suite_names[hash], (void **)&d);
	if (!ctx)
		return -ENOMEM;
	memcpy(d->identity, identity, strlen(identity) + 1);
	memcpy(d->key, key, EB_KEY_SIZE);
	d->hash = hash;
	SSL_CTX_set_psk_use_session_callback(ctx, use_session);
	*ret = ctx;
	return 0;
}

int eb_tls_client_new(const char *user, const char *key_id, const uint8_t key[EB_KEY_SIZE],
                      SSL_CTX **ret)
{
	char identity[EB_TLS_IDENTITY_MAX + 1];

	/* The identity names the key (docs/protocol.md 1.1): "USER/KEYID", or the bare user name
	 * for the user's default key, which every broker understands. */
	if (!user || strlen(user) == 0 || strlen(user) > EB_KIND_MAX ||
	    (key_id && !eb_key_id_valid(key_id)))
		return -EINVAL;
	snprintf(identity, sizeof(identity), "%s%s%s", user, key_id ? "/" : "",
	         key_id ? key_id : "");
	return eb_tls_client_new_hash(identity, key, EB_KEY_HASH_SHA384, ret);
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
