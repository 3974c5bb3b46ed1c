/* SPDX-License-Identifier: MIT */
/* Writes the seed inputs that are easier to make with the codec and a real TLS client than by
 * hand: fuzz-tls's ClientHellos, fuzz-session's scripts and fuzz-egd's request streams, into
 * tests/fuzz/corpus/{tls,session,egd}/. Run it again after a change to the protocol or to a
 * harness's script format: build/tests/fuzz/fuzz-seeds tests/fuzz/corpus */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "egd-proto.h"
#include "fuzz.h" /* check() */
#include "macro.h"
#include "proto.h"
#include "report.h"
#include "tls.h"

/* Large enough for a script with a few full frames. */
#define SEED_MAX (4 * EB_FRAME_MAX)

struct seed {
	uint8_t data[SEED_MAX];
	size_t len;
};

static const char *corpus;

static void put(struct seed *s, const void *p, size_t n)
{
	check(s->len + n <= sizeof(s->data));
	memcpy(s->data + s->len, p, n);
	s->len += n;
}

static void put_u8(struct seed *s, unsigned v)
{
	uint8_t b = (uint8_t)v;

	put(s, &b, 1);
}

static void put_u16(struct seed *s, unsigned v)
{
	put_u8(s, v >> 8);
	put_u8(s, v);
}

static void save(const char *dir, const char *name, const void *data, size_t n)
{
	_cleanup_close_ int fd = -EBADF;
	char path[4096];

	check((size_t)snprintf(path, sizeof(path), "%s/%s/%s", corpus, dir, name) < sizeof(path));
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	check(fd >= 0);
	check(write(fd, data, n) == (ssize_t)n);
}

/* fuzz-tls: the server knows alice (key bytes 0xa1), bob (0xb0) and a user with a 64-character
 * name of 'u' (0x64). */

/* The ClientHello a real client of ours sends, as the records on the wire. */
static size_t client_hello(const char *user, uint8_t fill, uint8_t *buf, size_t size)
{
	uint8_t key[EB_KEY_SIZE];
	SSL_CTX *ctx = NULL;
	BIO *rbio, *wbio;
	SSL *ssl;
	int n;

	memset(key, fill, sizeof(key));
	check(eb_tls_client_new(user, NULL, key, &ctx) == 0);
	ssl = SSL_new(ctx);
	rbio = BIO_new(BIO_s_mem());
	wbio = BIO_new(BIO_s_mem());
	check(ssl && rbio && wbio);
	BIO_set_mem_eof_return(rbio, -1);
	SSL_set_bio(ssl, rbio, wbio);
	SSL_set_connect_state(ssl);
	check(SSL_do_handshake(ssl) == -1 && SSL_get_error(ssl, -1) == SSL_ERROR_WANT_READ);
	n = BIO_read(wbio, buf, (int)size);
	check(n > 0 && BIO_pending(wbio) == 0);
	SSL_free(ssl);
	eb_tls_free(ctx);
	return (size_t)n;
}

static size_t get16(const uint8_t *p)
{
	return (size_t)p[0] << 8 | p[1];
}

static void set16(uint8_t *p, size_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

/* Replaces a one-record ClientHello's pre_shared_key extension (RFC 8446 4.2.11; always the
 * last) with psk, fixing the three lengths around it. */
static void replace_psk(const uint8_t *ch, size_t n, const struct seed *psk, struct seed *out)
{
	size_t off, ext_len_at, e, end;

	check(n > 9 && ch[0] == 0x16 && ch[5] == 0x01 && get16(ch + 3) == n - 5);
	off = 9 + 2 + 32;           /* record and handshake headers, legacy_version, random */
	off += 1 + ch[off];         /* legacy_session_id */
	off += 2 + get16(ch + off); /* cipher_suites */
	off += 1 + ch[off];         /* legacy_compression_methods */
	ext_len_at = off;
	e = off + 2;
	end = e + get16(ch + off);
	check(end == n);
	while (e + 4 <= end && get16(ch + e) != 41)
		e += 4 + get16(ch + e + 2);
	check(e + 4 <= end && e + 4 + get16(ch + e + 2) == end);

	out->len = 0;
	put(out, ch, e);
	put_u16(out, 41);
	put_u16(out, psk->len);
	put(out, psk->data, psk->len);
	set16(out->data + ext_len_at, out->len - ext_len_at - 2);
	out->data[6] = (uint8_t)((out->len - 9) >> 16);
	set16(out->data + 7, out->len - 9);
	check(out->len - 5 <= 16384);
	set16(out->data + 3, out->len - 5);
}

/* A pre_shared_key body: count identities of id (idlen bytes each), then one SHA-384-sized
 * binder, which is all OpenSSL reads unless an identity has a session. */
static void psk_body(struct seed *psk, const char *id, size_t idlen, unsigned count)
{
	uint8_t binder[48];

	memset(binder, 0x5a, sizeof(binder));
	psk->len = 0;
	put_u16(psk, count * (2 + idlen + 4));
	for (unsigned i = 0; i < count; i++) {
		put_u16(psk, idlen);
		put(psk, id, idlen);
		put(psk, "\0\0\0\0", 4); /* obfuscated_ticket_age */
	}
	put_u16(psk, 1 + sizeof(binder));
	put_u8(psk, sizeof(binder));
	put(psk, binder, sizeof(binder));
}

static void tls_seeds(void)
{
	static struct seed psk, out;
	static uint8_t ch[4096];
	char uu[EB_KIND_MAX + 2];
	size_t n, half;

	n = client_hello("alice", 0xa1, ch, sizeof(ch));
	save("tls", "client-hello-alice", ch, n);
	save("tls", "truncated-record", ch, n / 2);
	save("tls", "truncated-header", ch, 3);

	/* The same hello fragmented over two records, as RFC 8446 5.1 allows. */
	half = (n - 5) / 2;
	out.len = 0;
	put(&out, ch, 3);
	put_u16(&out, half);
	put(&out, ch + 5, half);
	put(&out, ch, 3);
	put_u16(&out, n - 5 - half);
	put(&out, ch + 5 + half, n - 5 - half);
	save("tls", "client-hello-two-records", out.data, out.len);

	n = client_hello("bob", 0xb0, ch, sizeof(ch));
	save("tls", "client-hello-bob", ch, n);
	n = client_hello("alice", 0xb0, ch, sizeof(ch));
	save("tls", "client-hello-wrong-key", ch, n);
	n = client_hello("mallory", 0x11, ch, sizeof(ch));
	save("tls", "client-hello-unknown-user", ch, n);

	/* Hand-made identities in an otherwise real hello. */
	psk_body(&psk, "a", 1, 2000);
	replace_psk(ch, n, &psk, &out);
	save("tls", "identities-2000", out.data, out.len);

	memset(uu, 'u', sizeof(uu));
	uu[EB_KIND_MAX] = 'X';
	psk_body(&psk, uu, EB_KIND_MAX + 1, 1);
	replace_psk(ch, n, &psk, &out);
	save("tls", "identity-65-bytes", out.data, out.len);
	psk_body(&psk, uu, EB_KIND_MAX, 1);
	replace_psk(ch, n, &psk, &out);
	save("tls", "identity-64-bytes", out.data, out.len);
	psk_body(&psk, "al\001ce", 5, 1);
	replace_psk(ch, n, &psk, &out);
	save("tls", "identity-unprintable", out.data, out.len);
	psk_body(&psk, "", 0, 1);
	replace_psk(ch, n, &psk, &out);
	save("tls", "identity-empty", out.data, out.len);

	save("tls", "http", "GET / HTTP/1.1\r\nHost: x\r\n\r\n", 27);
}

/* fuzz-session: see the script format at the top of fuzz-session.c. */
enum {
	OP_WRITE = 0,
	OP_RUN = 1,
	OP_TIME = 2,
	OP_SHUT = 3,
	OP_READ = 4,
	OP_RAW = 5,
	OP_CLOSE = 6,
};
enum {
	MODE_PLAIN = 0,
	MODE_TLS_SOURCE = 1,
	MODE_TLS_RAW = 2,
	MODE_TLS_SINK = 4,
	MODE_TLS_ADMIN = 7,
	MODE_TLS_STRANGER = 10,
	MODE_TLS_WRONG_KEY = 13,
};

static void script_start(struct seed *s, unsigned n_peers, const uint8_t *modes)
{
	s->len = 0;
	put_u8(s, n_peers - 1);
	put(s, modes, n_peers);
}

static void op(struct seed *s, unsigned peer, unsigned code, unsigned arg)
{
	put_u8(s, peer << 4 | code);
	put_u8(s, arg);
}

/* A WRITE carries at most 65535 bytes: a full-size frame takes two. */
static void op_write(struct seed *s, unsigned peer, const void *p, size_t n, bool raw)
{
	const uint8_t *b = p;

	do {
		size_t k = MIN(n, (size_t)UINT16_MAX);

		put_u8(s, peer << 4 | (raw ? OP_RAW : OP_WRITE));
		put_u16(s, k);
		put(s, b, k);
		b += k;
		n -= k;
	} while (n > 0);
}

static void op_msg(struct seed *s, unsigned peer, const struct eb_msg *m)
{
	static uint8_t frame[EB_FRAME_MAX];
	int n = eb_msg_encode(m, frame, sizeof(frame));

	check(n > 0);
	op_write(s, peer, frame, (size_t)n, false);
}

/* Writes, lets the broker answer, and reads the answer. */
static void op_msg_run(struct seed *s, unsigned peer, const struct eb_msg *m)
{
	op_msg(s, peer, m);
	op(s, peer, OP_RUN, 16);
	put_u8(s, peer << 4 | OP_READ);
}

static void hello(struct seed *s, unsigned peer, unsigned roles)
{
	struct eb_msg m = {.type = EB_MSG_HELLO,
	                   .hello = {.version = EB_PROTO_VERSION,
	                             .roles = (uint8_t)roles,
	                             .claim_mbits_per_byte = 4000}};

	snprintf(m.hello.kind, sizeof(m.hello.kind), "fuzz");
	op_msg_run(s, peer, &m);
}

static void put_msg(struct seed *s, unsigned peer, size_t len, uint32_t credit)
{
	static uint8_t data[EB_DATA_MAX];
	struct eb_msg m = {.type = EB_MSG_PUT, .put = {.credit_bits = credit, .data = data}};

	/* Not constant and not repeating, so the broker credits it. */
	for (size_t i = 0; i < len; i++)
		data[i] = (uint8_t)(i * 131 + i / 256 * 7 + s->len);
	m.put.len = (uint32_t)len;
	op_msg_run(s, peer, &m);
}

static void get_msg(struct seed *s, unsigned peer, uint32_t bits, enum eb_get_mode mode)
{
	struct eb_msg m = {.type = EB_MSG_GET, .get = {.bits = bits, .mode = mode}};

	op_msg_run(s, peer, &m);
}

static void simple_msg(struct seed *s, unsigned peer, enum eb_msg_type type)
{
	struct eb_msg m = {.type = type};

	op_msg_run(s, peer, &m);
}

static void session_seeds(void)
{
	static struct seed s;
	static uint8_t ch[4096];
	struct eb_msg m;
	uint8_t modes[3];
	size_t n;

	/* One local peer doing everything its roles allow. */
	modes[0] = MODE_PLAIN;
	script_start(&s, 1, modes);
	hello(&s, 0, EB_ROLE_ALL);
	put_msg(&s, 0, 1024, 4096);
	get_msg(&s, 0, 1024, EB_GET_FULL);
	get_msg(&s, 0, 4096, EB_GET_DRBG);
	simple_msg(&s, 0, EB_MSG_STATUS_REQ);
	save("session", "plain-all-roles", s.data, s.len);

	/* An admin reads both tables while a source and a sink are connected. */
	modes[1] = MODE_PLAIN;
	script_start(&s, 2, modes);
	hello(&s, 0, EB_ROLE_SOURCE | EB_ROLE_SINK);
	put_msg(&s, 0, 1024, 4096);
	get_msg(&s, 0, 1024, EB_GET_FULL);
	hello(&s, 1, EB_ROLE_ADMIN);
	m = (struct eb_msg){.type = EB_MSG_REPORT_REQ, .report_req = {.table = 1}};
	op_msg_run(&s, 1, &m);
	m.report_req = (struct eb_msg_report_req){.table = 2, .after = 1};
	op_msg_run(&s, 1, &m);
	save("session", "plain-admin-report", s.data, s.len);

	/* The same admin reads the history, from its first page and from past its samples. */
	script_start(&s, 2, modes);
	hello(&s, 0, EB_ROLE_SOURCE | EB_ROLE_SINK);
	put_msg(&s, 0, 1024, 4096);
	get_msg(&s, 0, 1024, EB_GET_FULL);
	hello(&s, 1, EB_ROLE_ADMIN);
	m = (struct eb_msg){.type = EB_MSG_REPORT_REQ,
	                    .report_req = {.table = EB_REPORT_HISTORY, .version = 1}};
	op_msg_run(&s, 1, &m);
	m.report_req.after = EB_HISTORY_ID(EB_HISTORY_SOURCE, 0);
	op_msg_run(&s, 1, &m);
	save("session", "plain-admin-history", s.data, s.len);

	/* A GET the empty pool cannot back waits, then the clock runs out its wait. */
	script_start(&s, 1, modes);
	hello(&s, 0, EB_ROLE_SINK);
	get_msg(&s, 0, 8192, EB_GET_FULL);
	op(&s, 0, OP_TIME, 3);
	op(&s, 0, OP_RUN, 8);
	put_u8(&s, OP_READ);
	save("session", "plain-get-waits", s.data, s.len);

	/* Silence after connecting: the HELLO timeout closes the session. */
	script_start(&s, 1, modes);
	op(&s, 0, OP_RUN, 4);
	op(&s, 0, OP_TIME, 110);
	op(&s, 0, OP_RUN, 8);
	save("session", "plain-hello-timeout", s.data, s.len);

	/* Refusals: a wrong version, a frame before HELLO, an oversized header, half a frame. */
	script_start(&s, 1, modes);
	m = (struct eb_msg){.type = EB_MSG_HELLO, .hello = {.version = 99, .roles = 1}};
	op_msg_run(&s, 0, &m);
	save("session", "plain-bad-version", s.data, s.len);
	script_start(&s, 1, modes);
	get_msg(&s, 0, 1024, EB_GET_FULL);
	save("session", "plain-get-before-hello", s.data, s.len);
	script_start(&s, 1, modes);
	hello(&s, 0, EB_ROLE_SOURCE);
	op_write(&s, 0, "\x00\x03\x00\x00\x7f\xff\xff\xff", 8, false);
	op(&s, 0, OP_RUN, 8);
	save("session", "plain-oversized-frame", s.data, s.len);
	script_start(&s, 1, modes);
	hello(&s, 0, EB_ROLE_SOURCE);
	op_write(&s, 0, "\x00\x03\x00\x00\x00\x00\x04\x00\x00", 9, false);
	op(&s, 0, OP_RUN, 8);
	put_u8(&s, OP_SHUT);
	op(&s, 0, OP_RUN, 8);
	save("session", "plain-half-frame-then-shut", s.data, s.len);

	/* A full-size PUT, then the pool above high water puts the source to sleep. */
	script_start(&s, 1, modes);
	hello(&s, 0, EB_ROLE_SOURCE);
	put_msg(&s, 0, EB_DATA_MAX, 8 * EB_DATA_MAX);
	put_msg(&s, 0, 4096, 4096);
	save("session", "plain-put-full-size", s.data, s.len);

	/* A GET waits for the pool while a second peer donates. */
	modes[0] = MODE_TLS_SINK;
	modes[1] = MODE_TLS_SOURCE;
	script_start(&s, 2, modes);
	hello(&s, 0, EB_ROLE_SINK);
	hello(&s, 1, EB_ROLE_SOURCE);
	get_msg(&s, 0, 2048, EB_GET_FULL);
	put_msg(&s, 1, 4096, 8 * 4096);
	op(&s, 0, OP_RUN, 16);
	put_u8(&s, OP_READ);
	get_msg(&s, 0, 65536, EB_GET_FULL); /* more than the sink's quota allows */
	op(&s, 0, OP_TIME, 5);
	op(&s, 0, OP_RUN, 16);
	put_u8(&s, OP_READ);
	save("session", "tls-sink-waits-for-source", s.data, s.len);

	/* Three peers: an admin reads the status while a source and a sink work. */
	modes[0] = MODE_TLS_ADMIN;
	modes[1] = MODE_TLS_SOURCE;
	modes[2] = MODE_PLAIN;
	script_start(&s, 3, modes);
	hello(&s, 0, EB_ROLE_ADMIN);
	hello(&s, 1, EB_ROLE_SOURCE);
	hello(&s, 2, EB_ROLE_SINK);
	put_msg(&s, 1, 2048, 8192);
	get_msg(&s, 2, 512, EB_GET_FULL);
	simple_msg(&s, 0, EB_MSG_STATUS_REQ);
	get_msg(&s, 1, 512, EB_GET_FULL); /* a source may not draw */
	save("session", "tls-three-peers", s.data, s.len);

	/* Authentication failures and a role not granted. */
	modes[0] = MODE_TLS_STRANGER;
	script_start(&s, 1, modes);
	hello(&s, 0, EB_ROLE_SINK);
	save("session", "tls-stranger", s.data, s.len);
	modes[0] = MODE_TLS_WRONG_KEY;
	script_start(&s, 1, modes);
	hello(&s, 0, EB_ROLE_SINK);
	save("session", "tls-wrong-key", s.data, s.len);
	modes[0] = MODE_TLS_SINK;
	script_start(&s, 1, modes);
	hello(&s, 0, EB_ROLE_ADMIN);
	save("session", "tls-role-refused", s.data, s.len);

	/* Garbage under the TLS layer after the handshake, and a close_notify mid-frame. */
	modes[0] = MODE_TLS_SOURCE;
	script_start(&s, 1, modes);
	hello(&s, 0, EB_ROLE_SOURCE);
	op_write(&s, 0, "\x17\x03\x03\x00\x10garbagegarbage!!", 21, true);
	op(&s, 0, OP_RUN, 8);
	save("session", "tls-raw-after-handshake", s.data, s.len);
	script_start(&s, 1, modes);
	hello(&s, 0, EB_ROLE_SOURCE);
	op_write(&s, 0, "\x00\x03\x00\x00\x00\x00\x04", 7, false);
	put_u8(&s, OP_SHUT);
	op(&s, 0, OP_RUN, 8);
	save("session", "tls-shutdown-mid-frame", s.data, s.len);

	/* The pre-handshake path: a real ClientHello (its key is not the broker's), plaintext, a
	 * record header cut short, and nothing at all until the HELLO timeout. */
	modes[0] = MODE_TLS_RAW;
	n = client_hello("source", 0x11, ch, sizeof(ch));
	script_start(&s, 1, modes);
	op_write(&s, 0, ch, n, false);
	op(&s, 0, OP_RUN, 16);
	put_u8(&s, OP_READ);
	save("session", "raw-client-hello", s.data, s.len);
	script_start(&s, 1, modes);
	hello(&s, 0, EB_ROLE_SOURCE);
	save("session", "raw-plaintext-hello", s.data, s.len);
	script_start(&s, 1, modes);
	op_write(&s, 0, ch, 3, false);
	op(&s, 0, OP_RUN, 32);
	op(&s, 0, OP_TIME, 110);
	op(&s, 0, OP_RUN, 8);
	save("session", "raw-partial-header", s.data, s.len);
}

/* fuzz-egd: streams of requests, and one cut short in each way. */
static void egd_seeds(void)
{
	static struct seed s;
	uint8_t data[EGD_COUNT_MAX];

	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 37 + 11);
	s.len = 0;
	put_u8(&s, EGD_CMD_LEVEL);
	put_u8(&s, EGD_CMD_WRITE);
	put_u16(&s, 800);
	put_u8(&s, 100);
	put(&s, data, 100);
	put_u8(&s, EGD_CMD_READ);
	put_u8(&s, 40);
	put_u8(&s, EGD_CMD_READ_BLOCK);
	put_u8(&s, 255);
	put_u8(&s, EGD_CMD_PID);
	put_u8(&s, EGD_CMD_WRITE);
	put_u16(&s, 2040);
	put_u8(&s, 255);
	put(&s, data, 255);
	put_u8(&s, EGD_CMD_READ);
	put_u8(&s, 0);
	save("egd", "every-command", s.data, s.len);

	s.len = 0;
	for (unsigned i = 0; i < 8; i++) {
		put_u8(&s, EGD_CMD_WRITE);
		put_u16(&s, 8 * 50);
		put_u8(&s, 50);
		put(&s, data + i, 50);
		put_u8(&s, EGD_CMD_READ_BLOCK);
		put_u8(&s, 30);
	}
	save("egd", "ring-wraps", s.data, s.len);

	s.len = 0;
	put_u8(&s, EGD_CMD_WRITE);
	put_u16(&s, 8);
	put_u8(&s, 200);
	put(&s, data, 100);
	save("egd", "write-cut-short", s.data, s.len);
	save("egd", "write-header-only", "\x03\x00", 2);
	save("egd", "read-without-count", "\x00\x01", 2);
	save("egd", "unknown-command", "\x00\x05\x01", 3);
}

int main(int argc, char *argv[])
{
	if (argc != 2) {
		fprintf(stderr, "Usage: %s CORPUS-DIRECTORY\n", argv[0]);
		return 2;
	}
	corpus = argv[1];
	tls_seeds();
	session_seeds();
	egd_seeds();
	return 0;
}
