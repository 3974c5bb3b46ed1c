/* SPDX-License-Identifier: MIT */
/* Tests for shared/tls.c and the handshake side of shared/conn.c against what a hostile client
 * sends before it is anyone: part of a record, a ClientHello offering thousands of PSK identities,
 * an identity longer than any user name; and the limits on records before the handshake is done
 * and on post-handshake messages after it. The server side is the broker's own; the clients are
 * OpenSSL, or bytes built here. */
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/ssl.h>

#include "conn.h"
#include "macro.h"
#include "tls.h"

/* As long as an identity may be (EB_TLS_IDENTITY_MAX: a user name, "/" and a key id): 97. */
#define LONG_ID                                                                                         \
	"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" \
	"aaaa"

static const uint8_t user_key[EB_KEY_SIZE] = {1, 2, 3, 4, 5, 6, 7, 8};
static unsigned lookups;

static int lookup(const char *identity, struct eb_tls_psk *ret, void *userdata)
{
	(void)userdata;
	ret->tag = 7;
	lookups++;
	if (strcmp(identity, "alice") != 0 && strcmp(identity, LONG_ID) != 0 &&
	    strcmp(identity, "gnu") != 0)
		return -ENOENT;
	memcpy(ret->key, user_key, EB_KEY_SIZE);
	/* gnu's key is bound to SHA-256, everyone else's to SHA-384. */
	ret->hash = strcmp(identity, "gnu") == 0 ? EB_KEY_HASH_SHA256 : EB_KEY_HASH_SHA384;
	return 0;
}

/* A server connection on one end of a socketpair; the other end is returned for the client. */
static struct eb_conn *server_conn(SSL_CTX *ctx, int *ret_client_fd)
{
	struct eb_conn *c = NULL;
	int sv[2];

	/* Non-blocking both ways: a ClientHello of half a megabyte is more than the socket holds.
	 */
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv), 0);
	assert_int_equal(eb_conn_new(sv[0], ctx, true, true, &c), 0);
	*ret_client_fd = sv[1];
	return c;
}

static void test_partial_record_is_not_pending(void **state)
{
	SSL_CTX *ctx = NULL;
	struct eb_conn *c;
	int fd;

	(void)state;
	assert_int_equal(eb_tls_server_new(lookup, NULL, &ctx), 0);
	c = server_conn(ctx, &fd);

	/* One byte of a record header, then a header announcing 100 bytes and 3 of them: either
	 * way the handshake waits for the socket, and nothing is pending that poll() would miss.
	 * Were it pending, the broker would come back for it at once, for ever. */
	assert_int_equal(write(fd, "\x16", 1), 1);
	assert_int_equal(eb_conn_handshake(c), -EAGAIN);
	assert_false(eb_conn_wants_write(c));
	assert_false(eb_conn_pending(c));
	assert_int_equal(write(fd, "\x03\x01\x00\x64\x01\x00\x00", 7), 7);
	assert_int_equal(eb_conn_handshake(c), -EAGAIN);
	assert_false(eb_conn_pending(c));

	eb_conn_free(c);
	close(fd);
	eb_tls_free(ctx);
}

/* Appends big-endian integers and byte strings to a growing buffer. */
struct out {
	uint8_t *p;
	size_t n, size;
};

static void put(struct out *o, const void *data, size_t n)
{
	if (o->n + n > o->size) {
		o->size = MAX(2 * o->size, o->n + n);
		o->p = realloc(o->p, o->size);
		assert_non_null(o->p);
	}
	memcpy(o->p + o->n, data, n);
	o->n += n;
}

static void put_u(struct out *o, uint32_t v, unsigned bytes)
{
	for (unsigned i = bytes; i > 0; i--) {
		uint8_t b = (uint8_t)(v >> (8 * (i - 1)));
		put(o, &b, 1);
	}
}

/* A TLS 1.3 ClientHello (RFC 8446, 4.1.2) offering n PSK identities, each identity_len bytes of
 * 'a' (the first one with its last byte changed per index, so that they differ), with a made-up
 * binder, wrapped in as many handshake records as it takes. */
static struct out client_hello(unsigned n, size_t identity_len)
{
	struct out ext = {}, psk = {}, body = {}, hs = {}, rec = {};
	uint8_t zeros[64] = {}, id[512];

	assert_true(identity_len <= sizeof(id));
	memset(id, 'a', identity_len);

	put_u(&ext, 0x002b, 2), put_u(&ext, 3, 2), put_u(&ext, 2, 1), put_u(&ext, 0x0304, 2);
	put_u(&ext, 0x000a, 2), put_u(&ext, 4, 2), put_u(&ext, 2, 2), put_u(&ext, 0x001d, 2);
	put_u(&ext, 0x0033, 2), put_u(&ext, 38, 2), put_u(&ext, 36, 2), put_u(&ext, 0x001d, 2);
	put_u(&ext, 32, 2), put(&ext, zeros, 32);
	put_u(&ext, 0x002d, 2), put_u(&ext, 2, 2), put_u(&ext, 1, 1), put_u(&ext, 1, 1);

	/* pre_shared_key, last: identities, then one 48-byte binder (SHA-384). OpenSSL asks about
	 * the identities before it reads a binder, so one is all a flood needs, and it keeps a
	 * ClientHello of 9000 identities under OpenSSL's 128 KiB limit. */
	put_u(&psk, n * (2 + (unsigned)identity_len + 4), 2);
	for (unsigned i = 0; i < n; i++) {
		put_u(&psk, (uint32_t)identity_len, 2);
		if (identity_len > 0)
			id[identity_len - 1] = (uint8_t)('a' + i % 26);
		put(&psk, id, identity_len);
		put_u(&psk, 0, 4);
	}
	put_u(&psk, 49, 2);
	put_u(&psk, 48, 1), put(&psk, zeros, 48);
	put_u(&ext, 0x0029, 2), put_u(&ext, (uint32_t)psk.n, 2), put(&ext, psk.p, psk.n);

	put_u(&body, 0x0303, 2), put(&body, zeros, 32);
	put_u(&body, 32, 1), put(&body, zeros, 32);
	put_u(&body, 2, 2), put_u(&body, 0x1302, 2);
	put_u(&body, 1, 1), put_u(&body, 0, 1);
	put_u(&body, (uint32_t)ext.n, 2), put(&body, ext.p, ext.n);

	put_u(&hs, 1, 1), put_u(&hs, (uint32_t)body.n, 3), put(&hs, body.p, body.n);
	for (size_t off = 0; off < hs.n; off += 16384) {
		size_t k = MIN(hs.n - off, (size_t)16384);

		put_u(&rec, 0x16, 1), put_u(&rec, 0x0301, 2), put_u(&rec, (uint32_t)k, 2);
		put(&rec, hs.p + off, k);
	}
	free(ext.p), free(psk.p), free(body.p), free(hs.p);
	return rec;
}

/* Runs the server's handshake on a ClientHello until it fails; returns the connection. */
static struct eb_conn *offer(SSL_CTX *ctx, const struct out *hello)
{
	struct eb_conn *c;
	size_t off = 0;
	int fd, r;

	c = server_conn(ctx, &fd);
	do {
		ssize_t k = write(fd, hello->p + off, hello->n - off);

		if (k > 0)
			off += (size_t)k;
		r = eb_conn_handshake(c);
	} while (r == -EAGAIN && off < hello->n);
	while (r == -EAGAIN && eb_conn_wants_write(c))
		r = eb_conn_handshake(c);
	close(fd);
	if (r == -EAGAIN)
		r = eb_conn_handshake(c); /* the peer is gone: this ends it */
	assert_true(r < 0);
	return c;
}

static void test_many_identities(void **state)
{
	struct out hello = client_hello(9000, 1);
	SSL_CTX *ctx = NULL;
	size_t before, after;

	(void)state;
	assert_int_equal(eb_tls_server_new(lookup, NULL, &ctx), 0);
	/* Warm up OpenSSL's own one-time allocations before measuring. */
	eb_conn_free(offer(ctx, &hello));

	lookups = 0;
	before = mallinfo2().uordblks;
	for (unsigned i = 0; i < 20; i++) {
		struct eb_conn *c = offer(ctx, &hello);

		/* Refused as nobody, and the user table searched a few times, not 9000. */
		assert_int_equal(eb_conn_failure(c), EB_CONN_FAIL_UNKNOWN_USER);
		eb_conn_free(c);
	}
	after = mallinfo2().uordblks;
	assert_true(lookups <= 20 * 4);
	/* 20 x 9000 leaked records would be megabytes; allow OpenSSL's caches a little. */
	print_message("# heap grew by %zu bytes over 20 handshakes of 9000 identities\n",
	              after > before ? after - before : 0);
	assert_true(after < before + 256 * 1024);

	free(hello.p);
	eb_tls_free(ctx);
}

static void test_long_identity_is_nobody(void **state)
{
	struct out hello = client_hello(1, EB_TLS_IDENTITY_MAX + 1);
	SSL_CTX *ctx = NULL;
	struct eb_conn *c;

	(void)state;
	assert_int_equal(eb_tls_server_new(lookup, NULL, &ctx), 0);

	/* 97 'a's and one more: the first 97 name a user, the 98 do not. Looking it up under a
	 * shortened name would let the broker judge the binder by that user's key. */
	assert_int_equal(strlen(LONG_ID), EB_TLS_IDENTITY_MAX);
	lookups = 0;
	c = offer(ctx, &hello);
	assert_int_equal(lookups, 0);
	assert_int_equal(eb_conn_failure(c), EB_CONN_FAIL_UNKNOWN_USER);
	assert_string_equal(eb_conn_offered_identity(c), LONG_ID "...");
	eb_conn_free(c);
	free(hello.p);

	/* Exactly 97 is looked up (and refused here for its made-up binder, as a wrong key). */
	hello = client_hello(1, EB_TLS_IDENTITY_MAX);
	c = offer(ctx, &hello);
	assert_int_equal(lookups, 1);
	assert_int_equal(eb_conn_failure(c), EB_CONN_FAIL_BAD_KEY);
	eb_conn_free(c);
	free(hello.p);
	eb_tls_free(ctx);
}

/* The alert a client read, as the info callback saw it (level << 8 | description). */
static int alert_read;

static void on_info(const SSL *ssl, int where, int ret)
{
	(void)ssl;
	if (where & SSL_CB_READ_ALERT)
		alert_read = ret;
}

/* One handshake of a client offering user with key (or user_key) bound to hash, against ctx;
 * returns the connection's result, stores the server's CPU time for the ClientHello in *ret_ns
 * (if not NULL) and the alert the client read in alert_read (0: none). */
static int login(SSL_CTX *ctx, const char *user, const uint8_t key[EB_KEY_SIZE],
                 enum eb_key_hash hash, uint64_t *ret_ns)
{
	SSL_CTX *cctx = NULL;
	struct eb_conn *c;
	struct timespec t0, t1;
	SSL *cl;
	int fd, r;

	assert_int_equal(eb_tls_client_new_hash(user, key, hash, &cctx), 0);
	SSL_CTX_set_info_callback(cctx, on_info);
	c = server_conn(ctx, &fd);
	cl = SSL_new(cctx);
	assert_non_null(cl);
	assert_int_equal(SSL_set_fd(cl, fd), 1);
	alert_read = 0;
	/* The ClientHello, then the server's answer to it, timed, then the client reads that. */
	assert_int_equal(SSL_connect(cl), -1);
	assert_int_equal(SSL_get_error(cl, -1), SSL_ERROR_WANT_READ);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
	r = eb_conn_handshake(c);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
	if (ret_ns)
		*ret_ns = (uint64_t)(t1.tv_sec - t0.tv_sec) * 1000000000u + (uint64_t)t1.tv_nsec -
		          (uint64_t)t0.tv_nsec;
	while (r == -EAGAIN) {
		int k = SSL_connect(cl);

		if (k != 1 && SSL_get_error(cl, k) != SSL_ERROR_WANT_READ)
			break;
		r = eb_conn_handshake(c); /* with the client's Finished when k is 1 */
		if (k == 1)
			break;
	}
	(void)SSL_connect(cl); /* reads the alert, if the server sent one */
	SSL_free(cl);
	eb_conn_free(c);
	close(fd);
	SSL_CTX_free(cctx);
	return r;
}

static void test_sha256_key(void **state)
{
	SSL_CTX *ctx = NULL;

	(void)state;
	assert_int_equal(eb_tls_server_new(lookup, NULL, &ctx), 0);
	/* The client lists only its own key's suite, and the broker follows the binder: each
	 * hash gets through with its own user, and the other hash is refused as a bad key. */
	assert_int_equal(login(ctx, "gnu", user_key, EB_KEY_HASH_SHA256, NULL), 0);
	assert_int_equal(login(ctx, "alice", user_key, EB_KEY_HASH_SHA384, NULL), 0);
	assert_int_equal(login(ctx, "alice", user_key, EB_KEY_HASH_SHA256, NULL), -EACCES);
	assert_int_equal(login(ctx, "gnu", user_key, EB_KEY_HASH_SHA384, NULL), -EACCES);
	eb_tls_free(ctx);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

#define LOGINS 301
/* How far apart the medians may be: the work is the same (a lookup, a key, a binder); what
 * differs is one HMAC-SHA-256 for the unknown name's key, about 1 us of some 30. */
#define MARGIN_PERCENT 10

static void test_one_answer(void **state)
{
	static uint64_t ns[2][LOGINS];
	static const uint8_t wrong[EB_KEY_SIZE] = {9};
	SSL_CTX *ctx = NULL;
	int alerts[2];
	uint64_t med[2];

	(void)state;
	assert_int_equal(eb_tls_server_new(lookup, NULL, &ctx), 0);
	/* A known name with a wrong key, and an unknown name, taken in turns so that the load of
	 * the machine falls on both alike. */
	for (unsigned i = 0; i < LOGINS; i++) {
		assert_int_equal(login(ctx, "alice", wrong, EB_KEY_HASH_SHA384, &ns[0][i]),
		                 -EACCES);
		alerts[0] = alert_read;
		assert_int_equal(login(ctx, "mallory", wrong, EB_KEY_HASH_SHA384, &ns[1][i]),
		                 -EACCES);
		alerts[1] = alert_read;
		/* The same alert byte, every time: illegal_parameter, which OpenSSL 3.0 sends for a
		 * binder that does not verify. */
		assert_int_equal(alerts[0], SSL3_AL_FATAL << 8 | SSL_AD_ILLEGAL_PARAMETER);
		assert_int_equal(alerts[1], alerts[0]);
	}
	for (unsigned k = 0; k < 2; k++) {
		qsort(ns[k], LOGINS, sizeof(ns[k][0]), cmp_u64);
		med[k] = ns[k][LOGINS / 2];
	}
	print_message("# server CPU per refused ClientHello, median of %u: wrong key %" PRIu64
	              " ns, unknown name %" PRIu64 " ns\n",
	              LOGINS, med[0], med[1]);
	assert_true(med[1] * 100 <= med[0] * (100 + MARGIN_PERCENT));
	assert_true(med[0] * 100 <= med[1] * (100 + MARGIN_PERCENT));
	eb_tls_free(ctx);
}

/* A client of the test's own: OpenSSL with the libeb client context, its records passed by hand
 * through memory BIOs, so that the test decides how they are cut and when they are sent. */
struct peer {
	SSL_CTX *ctx;
	SSL *ssl;
	BIO *in, *out; /* what the server sent the client, what the client has to send */
	struct eb_conn *server;
	int fd; /* the client's end of the server's socket */
};

static void peer_new(struct peer *p, SSL_CTX *server_ctx)
{
	assert_int_equal(eb_tls_client_new("alice", NULL, user_key, &p->ctx), 0);
	p->ssl = SSL_new(p->ctx);
	p->in = BIO_new(BIO_s_mem());
	p->out = BIO_new(BIO_s_mem());
	assert_non_null(p->ssl);
	assert_true(p->in && p->out);
	SSL_set_bio(p->ssl, p->in, p->out);
	SSL_set_connect_state(p->ssl);
	p->server = server_conn(server_ctx, &p->fd);
}

static void peer_free(struct peer *p)
{
	SSL_free(p->ssl);
	eb_tls_free(p->ctx);
	eb_conn_free(p->server);
	close(p->fd);
}

static void send_all(int fd, const uint8_t *buf, size_t n)
{
	while (n > 0) {
		ssize_t k = write(fd, buf, n);

		assert_true(k > 0);
		buf += k;
		n -= (size_t)k;
	}
}

/* What the client has to send, sent as is. */
static void peer_flush(struct peer *p)
{
	uint8_t *data;
	long n = BIO_get_mem_data(p->out, &data);

	if (n > 0)
		send_all(p->fd, data, (size_t)n);
	(void)BIO_reset(p->out);
}

/* What the server sent, handed to the client. */
static void peer_receive(struct peer *p)
{
	uint8_t buf[4096];
	ssize_t k;

	while ((k = read(p->fd, buf, sizeof(buf))) > 0)
		assert_int_equal(BIO_write(p->in, buf, (int)k), k);
}

/* The client's first flight is one handshake record (a ClientHello): sent cut into pieces
 * records, the handshake message's bytes spread evenly over them. */
static void peer_hello_in_records(struct peer *p, unsigned pieces)
{
	uint8_t *data;
	long n;
	size_t body, off = 0;

	assert_int_equal(SSL_do_handshake(p->ssl), -1);
	n = BIO_get_mem_data(p->out, &data);
	assert_true(n > 5 && data[0] == 22);
	body = (size_t)data[3] << 8 | data[4];
	assert_int_equal((size_t)n, 5 + body);
	for (unsigned i = 0; i < pieces; i++) {
		size_t len = body * (i + 1) / pieces - off;
		uint8_t hdr[5] = {22, data[1], data[2], (uint8_t)(len >> 8), (uint8_t)len};

		send_all(p->fd, hdr, sizeof(hdr));
		send_all(p->fd, data + 5 + off, len);
		off += len;
	}
	(void)BIO_reset(p->out);
}

/* Runs both sides until the server's handshake ends; returns its result. */
static int peer_handshake(struct peer *p)
{
	int r = -EAGAIN;

	for (unsigned round = 0; round < 100 && r == -EAGAIN; round++) {
		r = eb_conn_handshake(p->server);
		peer_receive(p);
		(void)SSL_do_handshake(p->ssl);
		peer_flush(p);
	}
	return r;
}

/* docs/protocol.md 1.1: a ClientHello, a ChangeCipherSpec and a Finished in 16 records before the
 * handshake is done; the 17th stops the connection. */
static void test_handshake_records(void **state)
{
	SSL_CTX *ctx;
	struct peer p = {0};

	(void)state;
	assert_int_equal(eb_tls_server_new(lookup, NULL, &ctx), 0);

	/* 14 records (12 + CCS + Finished): under the limit, the handshake completes. */
	peer_new(&p, ctx);
	peer_hello_in_records(&p, 12);
	assert_int_equal(peer_handshake(&p), 0);
	assert_int_equal(eb_conn_failure(p.server), EB_CONN_FAIL_NONE);
	peer_free(&p);

	/* The ClientHello alone in 17: the 17th record is one too many. */
	memset(&p, 0, sizeof(p));
	peer_new(&p, ctx);
	peer_hello_in_records(&p, EB_CONN_HANDSHAKE_RECORDS_MAX + 1);
	assert_int_equal(peer_handshake(&p), -EPROTO);
	assert_int_equal(eb_conn_failure(p.server), EB_CONN_FAIL_RECORDS);
	peer_free(&p);
	eb_tls_free(ctx);
}

/* After n KeyUpdates, one byte of data: whether the server reads it. */
static ssize_t read_after_keyupdates(SSL_CTX *ctx, unsigned n, enum eb_conn_failure *ret_failure)
{
	struct peer p = {0};
	size_t written;
	uint8_t c = 0;
	ssize_t k;

	peer_new(&p, ctx);
	assert_int_equal(peer_handshake(&p), 0);
	for (unsigned i = 0; i < n; i++) {
		assert_int_equal(SSL_key_update(p.ssl, SSL_KEY_UPDATE_NOT_REQUESTED), 1);
		assert_int_equal(SSL_do_handshake(p.ssl), 1);
	}
	assert_int_equal(SSL_write_ex(p.ssl, "x", 1, &written), 1);
	peer_flush(&p);
	k = eb_conn_read(p.server, &c, 1);
	assert_true(k != 1 || c == 'x');
	*ret_failure = eb_conn_failure(p.server);
	peer_free(&p);
	return k;
}

/* docs/protocol.md 1.1: 8 post-handshake messages (KeyUpdate) in a session; the 9th ends it. */
static void test_post_handshake_messages(void **state)
{
	enum eb_conn_failure f;
	SSL_CTX *ctx;

	(void)state;
	assert_int_equal(eb_tls_server_new(lookup, NULL, &ctx), 0);
	assert_int_equal(read_after_keyupdates(ctx, 0, &f), 1);
	assert_int_equal(f, EB_CONN_FAIL_NONE);
	assert_int_equal(read_after_keyupdates(ctx, EB_CONN_POST_HANDSHAKE_MAX, &f), 1);
	assert_int_equal(f, EB_CONN_FAIL_NONE);
	assert_int_equal(read_after_keyupdates(ctx, EB_CONN_POST_HANDSHAKE_MAX + 1, &f), -EPROTO);
	assert_int_equal(f, EB_CONN_FAIL_POST);
	/* The figure docs/protocol.md and docs/security.md state. */
	assert_int_equal(EB_CONN_POST_HANDSHAKE_MAX, 8);
	assert_int_equal(EB_CONN_HANDSHAKE_RECORDS_MAX, 16);
	eb_tls_free(ctx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_partial_record_is_not_pending),
	    cmocka_unit_test(test_many_identities),
	    cmocka_unit_test(test_long_identity_is_nobody),
	    cmocka_unit_test(test_sha256_key),
	    cmocka_unit_test(test_one_answer),
	    cmocka_unit_test(test_handshake_records),
	    cmocka_unit_test(test_post_handshake_messages),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
