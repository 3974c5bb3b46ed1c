/* SPDX-License-Identifier: MIT */
/* Fuzzes the server side of tls.c: the input is what a client sends before the server answers
 * (its ClientHello, in one or more records), fed through a memory BIO into a server SSL made from
 * eb_tls_server_new()'s context, so that OpenSSL's parser hands every PSK identity it finds to
 * the find-session callback. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "fuzz.h"
#include "macro.h"
#include "proto.h"
#include "tls-internal.h"
#include "tls.h"

/* OpenSSL takes a ClientHello of up to 128 KiB, in records of at most 16 KiB plus overhead. */
#define INPUT_MAX (160 * 1024)
/* A stranger must not make the server search its user table once per identity it offers. */
#define LOOKUPS_MAX 64

/* The users the server knows, with the keys tests/fuzz/fuzz-seeds.c gave their clients. */
static const struct {
	const char *name;
	uint8_t fill;
} users[] = {
    {"alice", 0xa1},
    {"bob", 0xb0},
    /* As long as a name may be: an identity one byte longer must not pass for it. */
    {"uuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuu", 0x64},
};

static unsigned lookups;
static bool last_found;

static int lookup(const char *identity, struct eb_tls_psk *ret, void *userdata)
{
	size_t len = strnlen(identity, EB_TLS_IDENTITY_MAX + 1);

	(void)userdata;
	lookups++;
	/* What the callback passes on is a bounded, printable C string. */
	check(len <= EB_TLS_IDENTITY_MAX);
	for (size_t i = 0; i < len; i++)
		check(identity[i] >= 0x20 && identity[i] < 0x7f);
	last_found = false;
	for (size_t i = 0; i < ELEMENTSOF(users); i++)
		if (strcmp(identity, users[i].name) == 0) {
			memset(ret->key, users[i].fill, EB_KEY_SIZE);
			ret->hash = EB_KEY_HASH_SHA384;
			ret->tag = i + 1;
			last_found = true;
			return 0;
		}
	return -ENOENT;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static SSL_CTX *ctx;
	const struct eb_tls_peer *peer;
	BIO *rbio, *wbio;
	SSL *ssl;
	int r = 0;

	if (size > INPUT_MAX)
		return 0;
	if (!ctx)
		check(eb_tls_server_new(lookup, NULL, &ctx) == 0);

	ssl = SSL_new(ctx);
	rbio = BIO_new(BIO_s_mem());
	wbio = BIO_new(BIO_s_mem());
	check(ssl && rbio && wbio);
	check(size == 0 || BIO_write(rbio, data, (int)size) == (int)size);
	/* An empty BIO means "more later", as a non-blocking socket would. */
	BIO_set_mem_eof_return(rbio, -1);
	SSL_set_bio(ssl, rbio, wbio);
	SSL_set_accept_state(ssl);
	lookups = 0;
	last_found = false;

	/* Each call goes as far as the bytes given allow; the bound only keeps a bug in OpenSSL's
	 * state machine from hanging the fuzzer. */
	for (unsigned i = 0; i < 16; i++) {
		ERR_clear_error();
		r = SSL_do_handshake(ssl);
		if (r == 1)
			break;
		if (SSL_get_error(ssl, r) != SSL_ERROR_WANT_READ || BIO_pending(rbio) == 0)
			break;
	}
	/* The client cannot have finished: it has not seen the server's key share. */
	check(r != 1);
	check(lookups <= LOOKUPS_MAX);

	peer = eb_tls_peer(ssl);
	if (peer) {
		size_t len = strnlen(peer->identity, sizeof(peer->identity));

		check(len < sizeof(peer->identity));
		for (size_t i = 0; i < len; i++)
			check(peer->identity[i] >= 0x20 && peer->identity[i] < 0x7f);
		/* Known means the last identity looked up named a user. */
		check(!peer->known || (lookups > 0 && last_found));
	} else
		check(lookups == 0);

	SSL_free(ssl);
	ERR_clear_error();
	return 0;
}
