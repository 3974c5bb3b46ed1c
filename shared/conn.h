/* SPDX-License-Identifier: MIT */
/* A byte stream to a peer: a plain socket (AF_UNIX) or TLS over a socket. */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct ssl_ctx_st;
struct eb_conn;

/* Why a handshake failed, for a log line that names the cause. */
enum eb_conn_failure {
	EB_CONN_FAIL_NONE,
	EB_CONN_FAIL_UNKNOWN_USER, /* the PSK identity is not a configured user */
	EB_CONN_FAIL_BAD_KEY,      /* the binder did not verify: wrong key */
	EB_CONN_FAIL_KEY_HASH,     /* the user's key is bound to the hash the peer did not use */
	EB_CONN_FAIL_NOT_TLS,      /* the peer did not speak TLS (plaintext?) */
	EB_CONN_FAIL_TLS,          /* any other TLS failure */
	EB_CONN_FAIL_EOF,          /* the peer closed during the handshake */
	EB_CONN_FAIL_RECORDS,      /* past EB_CONN_HANDSHAKE_RECORDS_MAX records in it */
	EB_CONN_FAIL_POST,         /* past EB_CONN_POST_HANDSHAKE_MAX messages after it */
	_EB_CONN_FAILURE_MAX,
	_EB_CONN_FAILURE_INVALID = -EINVAL,
};

/* What a server takes from a TLS peer (docs/protocol.md 1.1): records before its handshake is
 * done (a ClientHello, a ChangeCipherSpec, a Finished and a second ClientHello after a
 * HelloRetryRequest need 5), and handshake messages after it (KeyUpdate) in a session. Past
 * either the connection stops reading: eb_conn_handshake() or eb_conn_read() returns -EPROTO and
 * eb_conn_failure() says which. */
#define EB_CONN_HANDSHAKE_RECORDS_MAX 16
#define EB_CONN_POST_HANDSHAKE_MAX    8

/* Takes ownership of fd, on failure too: the fd is closed then, so a caller never closes it after
 * this call. With ctx NULL the stream is plain. server says which side of the TLS handshake this
 * is; a client's TCP socket gets TCP_NODELAY here, a server's has it from its listener
 * (eb_listeners_add()). The fd is switched to non-blocking when nonblock is true; the broker's
 * come non-blocking from accept4(). */
int eb_conn_new(int fd, struct ssl_ctx_st *ctx, bool server, bool nonblock, struct eb_conn **ret);
struct eb_conn *eb_conn_free(struct eb_conn *c);

/* Drives the handshake: 0 when done (at once for plain streams), -EAGAIN when it waits for the
 * socket (see eb_conn_wants_write()), -EACCES for an authentication failure, -EPROTO for any
 * other. eb_conn_failure() then says why. */
int eb_conn_handshake(struct eb_conn *c);

/* Reads up to n bytes: the count, 0 at a clean end of stream, -EAGAIN, or a negative errno;
 * -EPROTO with eb_conn_failure() set when the peer went past a limit above. */
ssize_t eb_conn_read(struct eb_conn *c, void *buf, size_t n);
/* Writes up to n bytes: the count written, -EAGAIN, or a negative errno (-EPIPE, -ECONNRESET). */
ssize_t eb_conn_write(struct eb_conn *c, const void *buf, size_t n);
/* The TLS records a server connection read from its peer since the last call (0 for plain
 * streams and clients): what the broker bounds a peer's turn by, since one read may take many. */
unsigned eb_conn_take_records(struct eb_conn *c);
/* Whether bytes already decrypted wait in the TLS layer, so that poll() would not report them. */
bool eb_conn_pending(const struct eb_conn *c);
/* The peer streams big frames (a source's PUTs): read a whole frame's TLS records per read(2)
 * and keep the buffers. Until then a server connection reads a record at a time and frees
 * OpenSSL's buffers whenever they are empty; a client always reads ahead. */
void eb_conn_set_bulk(struct eb_conn *c);
/* Whether the last call that returned -EAGAIN waits for the socket to become writable. */
bool eb_conn_wants_write(const struct eb_conn *c);
/* Whether a server's handshake is past its dear step, the key exchange: only the client's
 * Finished (an HMAC) is left to read, or the handshake is done (true for plain streams). */
bool eb_conn_key_exchanged(const struct eb_conn *c);
/* Sends a TLS close_notify, best effort. */
void eb_conn_shutdown(struct eb_conn *c);

int eb_conn_fd(const struct eb_conn *c);
bool eb_conn_is_tls(const struct eb_conn *c);
/* The PSK identity the peer used (server side, after the handshake, else NULL). */
const char *eb_conn_identity(const struct eb_conn *c);
/* The tag the PSK lookup gave the key the peer proved (server side, after the handshake, else
 * 0); see eb_tls_psk_lookup_t. */
uint64_t eb_conn_key_tag(const struct eb_conn *c);
/* The identity the peer offered, known or not, printable (server side; "" if none). */
const char *eb_conn_offered_identity(const struct eb_conn *c);
enum eb_conn_failure eb_conn_failure(const struct eb_conn *c);
/* A server's peer's first 5 bytes, as OpenSSL read them for a TLS record header, so that a
 * refusal can say what the peer spoke instead (a load balancer's PROXY header); false when
 * none were read. */
#define EB_CONN_FIRST_HEADER_SIZE 5
bool eb_conn_first_header(const struct eb_conn *c, uint8_t ret[static EB_CONN_FIRST_HEADER_SIZE]);
const char *eb_conn_failure_to_string(enum eb_conn_failure f);
/* The last TLS library error as text, for a log line ("" if none). */
const char *eb_conn_tls_error(const struct eb_conn *c);

/* Blocking helpers for clients: read or write exactly n bytes, waiting at most timeout_ms in
 * total (-ETIMEDOUT); reading returns -ECONNRESET at an early end of stream. */
int eb_conn_read_full(struct eb_conn *c, void *buf, size_t n, int timeout_ms);
int eb_conn_write_full(struct eb_conn *c, const void *buf, size_t n, int timeout_ms);
/* Makes those helpers give up with -ECANCELED as soon as fd reports one of events (or a hang-up
 * or error) while they wait: a thread that must stop at once whatever its peer sends. fd -EBADF:
 * none (the default). */
void eb_conn_set_cancel(struct eb_conn *c, int fd, short events);
