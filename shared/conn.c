/* SPDX-License-Identifier: MIT */
#include "conn.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "macro.h"
#include "time-util.h"
#include "tls-internal.h"

/* Four full TLS 1.3 records with their overhead: an EB_FRAME_MAX frame in one read. */
#define CONN_READ_AHEAD (4 * (16384 + 256) + 512)

struct eb_conn {
	int fd;
	SSL *ssl;
	bool want_write;
	bool read_blocked; /* the last read wanted more from the socket */
	bool handshake_done;
	enum eb_conn_failure failure;
	/* What a server's peer sent (on_message()): records since eb_conn_take_records(), records
	 * before the handshake was done, handshake messages after it. */
	unsigned records, handshake_records, post_handshake;
	/* The peer's first record header: what its first bytes were, had they been TLS. */
	uint8_t first_header[EB_CONN_FIRST_HEADER_SIZE];
	bool have_first_header;
	char tls_error[160];
	int cancel_fd; /* eb_conn_set_cancel(); -EBADF: none */
	short cancel_events;
};

/* Stops OpenSSL from reading any further record of a peer that went past a limit: the record
 * layer drops everything once it believes the peer has closed, and the read or handshake step
 * under way returns at the next record instead of running on for as long as records come. The
 * caller sees c->failure and ends the connection without a close_notify. */
static void stop_reading(struct eb_conn *c, enum eb_conn_failure why)
{
	if (c->failure == EB_CONN_FAIL_NONE)
		c->failure = why;
	SSL_set_shutdown(c->ssl, SSL_get_shutdown(c->ssl) | SSL_RECEIVED_SHUTDOWN);
}

/* OpenSSL's message callback, server side: it sees every record header it reads and every
 * handshake message, so a peer's records are counted as OpenSSL takes them, also those it
 * handles inside one SSL_read_ex() without returning (KeyUpdate, empty records). */
static void on_message(int write_p, int version, int content_type, const void *buf, size_t len,
                       SSL *ssl, void *arg)
{
	struct eb_conn *c = arg;

	(void)version, (void)ssl;
	if (write_p)
		return;
	if (content_type == SSL3_RT_HEADER) {
		if (!c->have_first_header && len == sizeof(c->first_header)) {
			memcpy(c->first_header, buf, len);
			c->have_first_header = true;
		}
		c->records++;
		/* A ClientHello and a Finished need a few records: one-byte records cost the
		 * server a record's work per byte. */
		if (!c->handshake_done && ++c->handshake_records > EB_CONN_HANDSHAKE_RECORDS_MAX)
			stop_reading(c, EB_CONN_FAIL_RECORDS);
	} else if (content_type == SSL3_RT_HANDSHAKE && c->handshake_done) {
		/* After the Finished a client may send KeyUpdate and nothing else of the handshake
		 * (no certificates are asked, no tickets are the client's to send); each costs a
		 * key derivation and OpenSSL takes them without returning. */
		if (++c->post_handshake > EB_CONN_POST_HANDSHAKE_MAX)
			stop_reading(c, EB_CONN_FAIL_POST);
	}
}

static void save_tls_error(struct eb_conn *c)
{
	unsigned long e = ERR_peek_last_error();

	if (e)
		ERR_error_string_n(e, c->tls_error, sizeof(c->tls_error));
	ERR_clear_error();
}

/* Both ends write whole frames (the broker from its session buffer, clients one frame a call),
 * so Nagle's algorithm has nothing to coalesce and only delays: a small PUT_ACK, a GET, or a
 * DATA frame's last TLS record waits for the peer's delayed ACK, up to 40 ms on Linux. */
static void set_nodelay(int fd)
{
	int domain = 0, one = 1;
	socklen_t l = sizeof(domain);

	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &l) == 0 &&
	    (domain == AF_INET || domain == AF_INET6))
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

int eb_conn_new(int fd, SSL_CTX *ctx, bool server, bool nonblock, struct eb_conn **ret)
{
	_cleanup_close_ int owned = fd;
	struct eb_conn *c;

	if (fd < 0)
		return -EBADF;
	if (nonblock) {
		int fl = fcntl(fd, F_GETFL);

		if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
			return negative_errno();
	}
	/* A server's socket comes from accept() on a listener eb_listeners_add() set up, and has
	 * TCP_NODELAY already (listeners.c): two system calls fewer per connection. */
	if (!server)
		set_nodelay(fd);
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->cancel_fd = -EBADF;
	if (ctx) {
		c->ssl = SSL_new(ctx);
		if (!c->ssl || !SSL_set_fd(c->ssl, fd)) {
			SSL_free(c->ssl);
			free(c);
			return -ENOMEM;
		}
		/* Received plaintext is a source's donation or a sink's full-entropy bytes: OpenSSL
		 * wipes it from its record buffer once handed over, as we wipe our own copies. */
		SSL_set_options(c->ssl, SSL_OP_CLEANSE_PLAINTEXT);
		/* Read ahead: take up to a whole 64 KiB frame's records in one read(2), not two
		 * reads (header, body) per 16 KiB record. eb_conn_pending() accounts for it. */
		SSL_set_read_ahead(c->ssl, 1);
		if (server) {
			/* A server meets many peers that each say a few words and wait (sinks,
			 * sources told to SLEEP): one record's buffers, freed whenever empty,
			 * until eb_conn_set_bulk() says the peer streams. */
			SSL_set_mode(c->ssl, SSL_MODE_RELEASE_BUFFERS);
			SSL_set_accept_state(c->ssl);
			SSL_set_msg_callback(c->ssl, on_message);
			SSL_set_msg_callback_arg(c->ssl, c);
		} else {
			SSL_set_default_read_buffer_len(c->ssl, CONN_READ_AHEAD);
			SSL_set_connect_state(c->ssl);
		}
	} else
		c->handshake_done = true;
	c->fd = TAKE_FD(owned);
	*ret = c;
	return 0;
}

struct eb_conn *eb_conn_free(struct eb_conn *c)
{
	if (!c)
		return NULL;
	SSL_free(c->ssl);
	safe_close(c->fd);
	free(c);
	return NULL;
}

/* Maps an OpenSSL failure to -EAGAIN (and which way it waits), 0 for a clean end, or an errno. */
static int ssl_result(struct eb_conn *c, int ret)
{
	int e = SSL_get_error(c->ssl, ret);

	switch (e) {
	case SSL_ERROR_WANT_READ:
		c->want_write = false;
		return -EAGAIN;
	case SSL_ERROR_WANT_WRITE:
		c->want_write = true;
		return -EAGAIN;
	case SSL_ERROR_ZERO_RETURN:
		return 0;
	case SSL_ERROR_SYSCALL:
		save_tls_error(c);
		return errno == 0 || errno == EAGAIN ? -ECONNRESET : -errno;
	default:
		save_tls_error(c);
		return -EPROTO;
	}
}

static enum eb_conn_failure classify(struct eb_conn *c, unsigned long err)
{
	const struct eb_tls_peer *peer = eb_tls_peer(c->ssl);
	int reason = ERR_GET_REASON(err);

	if (peer && peer->wrong_hash)
		return EB_CONN_FAIL_KEY_HASH;
	if (peer && !peer->known)
		return EB_CONN_FAIL_UNKNOWN_USER;
	switch (reason) {
	case SSL_R_BINDER_DOES_NOT_VERIFY:
	case SSL_R_TLSV1_ALERT_DECRYPT_ERROR:
		return EB_CONN_FAIL_BAD_KEY;
	case SSL_R_WRONG_VERSION_NUMBER:
	case SSL_R_HTTP_REQUEST:
	case SSL_R_HTTPS_PROXY_REQUEST:
	case SSL_R_PACKET_LENGTH_TOO_LONG:
	case SSL_R_UNKNOWN_PROTOCOL:
	case SSL_R_RECORD_LENGTH_MISMATCH:
	case SSL_R_UNSUPPORTED_PROTOCOL:
		return EB_CONN_FAIL_NOT_TLS;
	default:
		return EB_CONN_FAIL_TLS;
	}
}

int eb_conn_handshake(struct eb_conn *c)
{
	unsigned long err;
	int r;

	if (c->handshake_done)
		return 0;
	ERR_clear_error();
	r = SSL_do_handshake(c->ssl);
	if (r == 1) {
		c->handshake_done = true;
		/* Records that came with the client's Finished (its HELLO, say) are whole and wait
		 * in the read-ahead buffer: eb_conn_pending() must report them. */
		c->read_blocked = false;
		return 0;
	}
	err = ERR_peek_last_error();
	if (c->failure != EB_CONN_FAIL_NONE) {
		ERR_clear_error();
		return -EPROTO; /* on_message() stopped it */
	}
	r = ssl_result(c, r);
	if (r == -EAGAIN) {
		/* As in eb_conn_read(): what OpenSSL holds now is a partial record (one byte of a
		 * header, say), which only the socket can complete. Without this a peer that sends
		 * part of a record and falls silent has eb_conn_pending() report true for ever. */
		c->read_blocked = !c->want_write;
		return r;
	}
	if (r == 0 || r == -ECONNRESET)
		c->failure = eb_tls_peer(c->ssl) && !eb_tls_peer(c->ssl)->known
		                 ? EB_CONN_FAIL_UNKNOWN_USER
		                 : EB_CONN_FAIL_EOF;
	else
		c->failure = classify(c, err);
	switch (c->failure) {
	case EB_CONN_FAIL_UNKNOWN_USER:
	case EB_CONN_FAIL_BAD_KEY:
	case EB_CONN_FAIL_KEY_HASH:
		return -EACCES;
	case EB_CONN_FAIL_NONE:
	case EB_CONN_FAIL_NOT_TLS:
	case EB_CONN_FAIL_TLS:
	case EB_CONN_FAIL_EOF:
	case EB_CONN_FAIL_RECORDS:
	case EB_CONN_FAIL_POST:
	case _EB_CONN_FAILURE_MAX:
	case _EB_CONN_FAILURE_INVALID:
		break;
	}
	return -EPROTO;
}

ssize_t eb_conn_read(struct eb_conn *c, void *buf, size_t n)
{
	size_t got;
	ssize_t k;

	if (n == 0)
		return 0;
	if (!c->ssl) {
		k = recv(c->fd, buf, n, 0);
		if (k < 0)
			return errno == EWOULDBLOCK ? -EAGAIN : -errno;
		return k;
	}
	ERR_clear_error();
	if (SSL_read_ex(c->ssl, buf, n, &got) == 1) {
		c->read_blocked = false;
		return (ssize_t)got;
	}
	if (c->failure != EB_CONN_FAIL_NONE) {
		ERR_clear_error();
		return -EPROTO; /* on_message() stopped it */
	}
	k = ssl_result(c, 0);
	/* Whatever OpenSSL holds now is a partial record: only the socket can complete it. */
	c->read_blocked = k == -EAGAIN && !c->want_write;
	return k;
}

ssize_t eb_conn_write(struct eb_conn *c, const void *buf, size_t n)
{
	size_t put;
	ssize_t k;
	int r;

	if (n == 0)
		return 0;
	if (!c->ssl) {
		k = send(c->fd, buf, n, MSG_NOSIGNAL);
		if (k < 0)
			return errno == EWOULDBLOCK ? -EAGAIN : -errno;
		return k;
	}
	ERR_clear_error();
	if (SSL_write_ex(c->ssl, buf, n, &put) == 1)
		return (ssize_t)put;
	r = ssl_result(c, 0);
	return r == 0 ? -EPIPE : r;
}

bool eb_conn_pending(const struct eb_conn *c)
{
	/* Decrypted bytes, or (read ahead) whole records not yet decrypted: both are invisible to
	 * poll(). A partial record after a read that wanted more is the socket's business. */
	return c->ssl && (SSL_pending(c->ssl) > 0 || (SSL_has_pending(c->ssl) && !c->read_blocked));
}

unsigned eb_conn_take_records(struct eb_conn *c)
{
	unsigned n = c->records;

	c->records = 0;
	return n;
}

void eb_conn_set_bulk(struct eb_conn *c)
{
	if (!c->ssl)
		return;
	/* The next read buffer is a whole frame's records, and kept: freeing and wiping 66 KiB
	 * after every frame would cost a streaming source more than it saves. The small one goes
	 * now if it is empty; if it holds records, it stays in release mode, to be freed when
	 * empty, and the big one then comes. */
	SSL_set_default_read_buffer_len(c->ssl, CONN_READ_AHEAD);
	if (SSL_free_buffers(c->ssl) == 1)
		SSL_clear_mode(c->ssl, SSL_MODE_RELEASE_BUFFERS);
}

bool eb_conn_wants_write(const struct eb_conn *c)
{
	return c->ssl && c->want_write;
}

bool eb_conn_key_exchanged(const struct eb_conn *c)
{
	/* A TLS 1.3 server writes its whole flight, ServerHello to Finished, in the step that
	 * takes the ClientHello; OpenSSL then waits for the client's Finished in the early data
	 * state (none is accepted here: no tickets). */
	OSSL_HANDSHAKE_STATE st = c->ssl ? SSL_get_state(c->ssl) : TLS_ST_OK;

	return !c->ssl || c->handshake_done || st == TLS_ST_SW_FINISHED || st == TLS_ST_EARLY_DATA;
}

void eb_conn_shutdown(struct eb_conn *c)
{
	/* Once said, close_notify is not said again: a second SSL_shutdown() would wait for the
	 * peer's instead. */
	if (c->ssl && c->handshake_done && !(SSL_get_shutdown(c->ssl) & SSL_SENT_SHUTDOWN)) {
		ERR_clear_error();
		(void)SSL_shutdown(c->ssl);
		ERR_clear_error();
	}
}

int eb_conn_fd(const struct eb_conn *c)
{
	return c->fd;
}

bool eb_conn_is_tls(const struct eb_conn *c)
{
	return c->ssl != NULL;
}

const char *eb_conn_identity(const struct eb_conn *c)
{
	const struct eb_tls_peer *peer = c->ssl ? eb_tls_peer(c->ssl) : NULL;

	return peer && peer->known && c->handshake_done ? peer->identity : NULL;
}

uint64_t eb_conn_key_tag(const struct eb_conn *c)
{
	return eb_conn_identity(c) ? eb_tls_peer(c->ssl)->tag : 0;
}

const char *eb_conn_offered_identity(const struct eb_conn *c)
{
	const struct eb_tls_peer *peer = c->ssl ? eb_tls_peer(c->ssl) : NULL;

	return peer ? peer->identity : "";
}

bool eb_conn_first_header(const struct eb_conn *c, uint8_t ret[static EB_CONN_FIRST_HEADER_SIZE])
{
	if (!c->have_first_header)
		return false;
	memcpy(ret, c->first_header, sizeof(c->first_header));
	return true;
}

enum eb_conn_failure eb_conn_failure(const struct eb_conn *c)
{
	return c->failure;
}

const char *eb_conn_failure_to_string(enum eb_conn_failure f)
{
	switch (f) {
	case EB_CONN_FAIL_NONE:
		return "no failure";
	case EB_CONN_FAIL_UNKNOWN_USER:
		return "unknown user";
	case EB_CONN_FAIL_BAD_KEY:
		return "wrong key";
	case EB_CONN_FAIL_KEY_HASH:
		return "key offered with the other hash than key-hash= binds it to";
	case EB_CONN_FAIL_NOT_TLS:
		return "not TLS (plaintext on the TLS port?)";
	case EB_CONN_FAIL_TLS:
		return "TLS handshake failed";
	case EB_CONN_FAIL_EOF:
		return "connection closed during the handshake";
	case EB_CONN_FAIL_RECORDS:
		return "too many TLS records before the handshake was done (tiny records?)";
	case EB_CONN_FAIL_POST:
		return "too many TLS post-handshake messages (KeyUpdate)";
	case _EB_CONN_FAILURE_MAX:
	case _EB_CONN_FAILURE_INVALID:
		break;
	}
	return "invalid";
}

const char *eb_conn_tls_error(const struct eb_conn *c)
{
	return c->tls_error;
}

void eb_conn_set_cancel(struct eb_conn *c, int fd, short events)
{
	c->cancel_fd = fd;
	c->cancel_events = events;
}

static int wait_fd(struct eb_conn *c, bool for_write, int64_t deadline)
{
	struct pollfd p[2] = {
	    {.fd = c->fd, .events = for_write ? POLLOUT : POLLIN},
	    {.fd = c->cancel_fd, .events = c->cancel_events},
	};
	int64_t left = deadline - (int64_t)eb_now_ms();
	int r;

	if (left <= 0)
		return -ETIMEDOUT;
	r = poll(p, c->cancel_fd >= 0 ? 2 : 1, (int)MIN(left, (int64_t)1 << 30));
	if (r < 0)
		return errno == EINTR ? 0 : -errno;
	if (r == 0)
		return -ETIMEDOUT;
	if (c->cancel_fd >= 0 && (p[1].revents & (c->cancel_events | POLLHUP | POLLERR | POLLNVAL)))
		return -ECANCELED;
	/* A virtio-serial port whose host side went away reports POLLHUP and never POLLOUT again:
	 * a writer that took that for a wake-up would spin until its deadline. */
	if (for_write && !(p[0].revents & POLLOUT) && (p[0].revents & POLLHUP))
		return -ECONNRESET;
	return 0;
}

static int handshake_blocking(struct eb_conn *c, int64_t deadline)
{
	for (;;) {
		int r = eb_conn_handshake(c);

		if (r != -EAGAIN)
			return r;
		r = wait_fd(c, c->want_write, deadline);
		if (r < 0)
			return r;
	}
}

int eb_conn_read_full(struct eb_conn *c, void *buf, size_t n, int timeout_ms)
{
	int64_t deadline = (int64_t)eb_now_ms() + timeout_ms;
	uint8_t *p = buf;
	int r;

	r = handshake_blocking(c, deadline);
	if (r < 0)
		return r;
	while (n > 0) {
		ssize_t k = eb_conn_read(c, p, n);

		if (k == 0)
			return -ECONNRESET;
		if (k == -EAGAIN) {
			r = wait_fd(c, eb_conn_wants_write(c), deadline);
			if (r < 0)
				return r;
			continue;
		}
		if (k < 0)
			return (int)k;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

int eb_conn_write_full(struct eb_conn *c, const void *buf, size_t n, int timeout_ms)
{
	int64_t deadline = (int64_t)eb_now_ms() + timeout_ms;
	const uint8_t *p = buf;
	int r;

	r = handshake_blocking(c, deadline);
	if (r < 0)
		return r;
	while (n > 0) {
		ssize_t k = eb_conn_write(c, p, n);

		if (k == -EAGAIN) {
			r = wait_fd(c, eb_conn_wants_write(c) || !c->ssl, deadline);
			if (r < 0)
				return r;
			continue;
		}
		if (k < 0)
			return (int)k;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}
