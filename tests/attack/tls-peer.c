/* SPDX-License-Identifier: MIT */
/* A TLS peer for attack-close-notify.py: connects to a broker with a user's PSK (TLS 1.3,
 * TLS_AES_256_GCM_SHA384, as docs/protocol.md says), says HELLO as a sink, then does what the
 * broker must end the session for, and reports how the session ended: with a close_notify alert
 * before the TCP FIN, or a bare EOF. It is OpenSSL alone, not libeb, so that no broker code
 * judges the broker; and without SSL_OP_IGNORE_UNEXPECTED_EOF, so that a bare EOF shows.
 *
 * Usage: attack-tls-peer HOST PORT USER KEYFILE put|garbage|hold|keyupdate=N|busy=N
 * [SOURCE-ADDRESS] last: after WELCOME, a GET of 256 bits and close_notify, then prints "answer T"
 * (the answer's frame type, -1 for none) and how the session ended. put      a PUT, which a
 * sink-only user may not send (ERROR FORBIDDEN) garbage  a frame header with an unknown type (ERROR
 * PROTOCOL) keyupdate=N  for attack-keyupdate.py: after WELCOME, N TLS 1.3 KeyUpdate messages, each
 * in a record of its own, written as fast as the socket takes them; prints "bytes SENT of TOTAL",
 * "seconds S", and "close: closed" when the broker ended the session (before or after all were
 * sent), "close: open" when it did not. hold     for test-reload.py: the handshake up to the
 * client's Finished, which is held back (the broker has looked the key up and answered); prints
 * "held" and waits for a line on stdin; then sends it and HELLO as a sink, and prints "welcome",
 * "error CODE" or "closed" for what came back. busy=N   for attack-refused.py: N sessions one after
 * the other, each a handshake, HELLO as a sink and the broker's answer, all held open; then waits
 * for a line on stdin and prints "welcome W", "refused R" (ERROR frames), "unanswered U" (no
 * handshake or no answer) and "closed C": how many of the N the broker had closed by then;
 * $TLS_PEER_ROLES (1..7) asks for other roles than the sink's (2) in their HELLO. USER is the PSK
 * identity as sent ("USER/KEYID" names a key). SOURCE-ADDRESS: an IPv4 address to connect from (the
 * attack tests' attacker is 127.0.0.2). Prints "welcome", "error CODE" and one of "close:
 * close_notify", "close: eof", "close: other ..."; exits 0 when it got that far, 1 otherwise. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

static const unsigned char suite_id[2] = {0x13, 0x02};
static char user[98]; /* an identity: a user name, "/" and a key id */
static unsigned char key[32];

static int use_session(SSL *ssl, const EVP_MD *md, const unsigned char **id, size_t *idlen,
                       SSL_SESSION **sess)
{
	const SSL_CIPHER *cipher = SSL_CIPHER_find(ssl, suite_id);
	SSL_SESSION *s;

	*sess = NULL;
	/* The PSK is bound to SHA-384; offered with another hash it would not verify. */
	if (!cipher || (md && md != SSL_CIPHER_get_handshake_digest(cipher)))
		return 1;
	s = SSL_SESSION_new();
	if (!s || !SSL_SESSION_set1_master_key(s, key, sizeof(key)) ||
	    !SSL_SESSION_set_cipher(s, cipher) ||
	    !SSL_SESSION_set_protocol_version(s, TLS1_3_VERSION)) {
		SSL_SESSION_free(s);
		return 0;
	}
	*sess = s;
	*id = (const unsigned char *)user;
	*idlen = strlen(user);
	return 1;
}

static int read_key(const char *path)
{
	char hex[80] = "";
	FILE *f = fopen(path, "re");

	if (!f)
		return -errno;
	if (!fgets(hex, sizeof(hex), f)) {
		fclose(f);
		return -EINVAL;
	}
	fclose(f);
	for (size_t i = 0; i < sizeof(key); i++) {
		unsigned v;

		if (sscanf(hex + 2 * i, "%2x", &v) != 1)
			return -EINVAL;
		key[i] = (unsigned char)v;
	}
	return 0;
}

static int connect_to(const char *host, const char *port, const char *from)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
	struct timeval tv = {.tv_sec = 10};
	int fd;

	if (getaddrinfo(host, port, &hints, &ai) != 0 || !ai)
		return -1;
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0 && from) {
		struct sockaddr_in sin = {.sin_family = AF_INET};

		if (inet_pton(AF_INET, from, &sin.sin_addr) != 1 ||
		    bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0) {
			close(fd);
			fd = -1;
		}
	}
	if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
		close(fd);
		fd = -1;
	}
	freeaddrinfo(ai);
	/* A broker that never answers must not hang the test. */
	if (fd >= 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

static int read_exact(SSL *ssl, unsigned char *buf, size_t n)
{
	size_t got;

	while (n > 0) {
		if (SSL_read_ex(ssl, buf, n, &got) != 1)
			return -1;
		buf += got;
		n -= got;
	}
	return 0;
}

/* Reads one frame; returns its type, or -1. The payload's first bytes go to payload. */
static int read_frame(SSL *ssl, unsigned char *payload, size_t size)
{
	unsigned char hdr[8], skip[256];
	uint32_t len;

	if (read_exact(ssl, hdr, sizeof(hdr)) < 0)
		return -1;
	len = (uint32_t)hdr[4] << 24 | (uint32_t)hdr[5] << 16 | (uint32_t)hdr[6] << 8 | hdr[7];
	if (len <= size)
		return read_exact(ssl, payload, len) < 0 ? -1 : hdr[0];
	if (read_exact(ssl, payload, size) < 0)
		return -1;
	for (len -= (uint32_t)size; len > 0;) {
		size_t k = len < sizeof(skip) ? len : sizeof(skip);

		if (read_exact(ssl, skip, k) < 0)
			return -1;
		len -= (uint32_t)k;
	}
	return hdr[0];
}

static int write_all(SSL *ssl, const unsigned char *buf, size_t n)
{
	size_t put;

	return SSL_write_ex(ssl, buf, n, &put) == 1 && put == n ? 0 : -1;
}

/* Sends what the client wrote into its memory BIO. */
static int flush_out(BIO *out, int fd)
{
	char buf[4096];
	int n;

	while ((n = BIO_read(out, buf, sizeof(buf))) > 0)
		for (int off = 0; off < n;) {
			ssize_t k = send(fd, buf + off, (size_t)(n - off), MSG_NOSIGNAL);

			if (k <= 0)
				return -1;
			off += (int)k;
		}
	return 0;
}

/* The handshake through memory BIOs, so that the client's last flight (its Finished) can wait:
 * by then the broker has taken the ClientHello, looked the key up and sent its Finished. Then
 * the socket itself again, for HELLO and the answer. */
static int hold(SSL *ssl, int fd)
{
	BIO *in = BIO_new(BIO_s_mem()), *out = BIO_new(BIO_s_mem()), *sock;
	char buf[4096], line[16];
	int r;

	if (!in || !out)
		return -1;
	SSL_set_bio(ssl, in, out);
	SSL_set_connect_state(ssl);
	while ((r = SSL_do_handshake(ssl)) != 1) {
		ssize_t k;

		if (SSL_get_error(ssl, r) != SSL_ERROR_WANT_READ || flush_out(out, fd) < 0)
			return -1;
		k = recv(fd, buf, sizeof(buf), 0);
		if (k <= 0 || BIO_write(in, buf, (int)k) != (int)k)
			return -1;
	}
	/* Nothing more comes from a broker that sends no tickets until it hears from us. */
	if (BIO_pending(in) != 0)
		return -1;
	printf("held\n");
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin) || flush_out(out, fd) < 0)
		return -1;
	sock = BIO_new_socket(fd, BIO_NOCLOSE);
	if (!sock)
		return -1;
	SSL_set_bio(ssl, sock, sock);
	return 0;
}

/* N KeyUpdate messages, each in a record of its own (the write key changes after each), made
 * first into memory and then written to the socket as fast as it takes them: a record the
 * broker must decrypt and a key it must derive, for 22 bytes on the wire. Stops when the broker
 * closes the connection. */
static int keyupdate_flood(SSL *ssl, int fd, unsigned long n)
{
	BIO *mem = BIO_new(BIO_s_mem()), *sock = SSL_get_wbio(ssl);
	struct timeval t0, t1;
	size_t sent = 0;
	long total;
	char *data;
	bool closed = false;

	if (!mem || !BIO_up_ref(sock))
		return 1;
	SSL_set0_wbio(ssl, mem);
	for (unsigned long i = 0; i < n; i++)
		if (SSL_key_update(ssl, SSL_KEY_UPDATE_NOT_REQUESTED) != 1 ||
		    SSL_do_handshake(ssl) != 1)
			return 1;
	total = BIO_get_mem_data(mem, &data);
	gettimeofday(&t0, NULL);
	while (sent < (size_t)total) {
		ssize_t k = send(fd, data + sent, (size_t)total - sent, MSG_NOSIGNAL);

		if (k <= 0) {
			closed = true;
			break;
		}
		sent += (size_t)k;
	}
	gettimeofday(&t1, NULL);
	SSL_set0_wbio(ssl, sock);
	if (!closed) {
		/* All sent: did the broker end the session meanwhile? A read says, within 10 s
		 * (SO_RCVTIMEO): a closed session reads an end or a reset, an open one times out.
		 */
		unsigned char c;
		size_t got;
		int r = SSL_read_ex(ssl, &c, 1, &got);
		int e = SSL_get_error(ssl, r);

		closed = r != 1 && e != SSL_ERROR_WANT_READ &&
		         !(e == SSL_ERROR_SYSCALL && (errno == EAGAIN || errno == EWOULDBLOCK));
	}
	printf("keyupdates %lu\nbytes %zu of %ld\nseconds %.2f\nclose: %s\n", n, sent, total,
	       (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_usec - t0.tv_usec) / 1e6,
	       closed ? "closed" : "open");
	fflush(stdout);
	return 0;
}

/* N sessions held open at once (see busy=N above). */
static int busy(SSL_CTX *ctx, const char *host, const char *port, const char *from, unsigned long n)
{
	unsigned char hello[] = {1, 0, 0, 0, 0, 0, 0, 10, 0, 1, 2, 0, 0, 0, 0, 0, 0, 0};
	const char *roles = getenv("TLS_PEER_ROLES");
	unsigned long welcome = 0, refused = 0, unanswered = 0, closed = 0;
	int *fds = calloc(n, sizeof(int));
	unsigned char payload[64];
	char line[16];

	if (!fds)
		return 1;
	if (roles && roles[0] >= '1' && roles[0] <= '7' && !roles[1])
		hello[10] = (unsigned char)(roles[0] - '0');
	for (unsigned long i = 0; i < n; i++) {
		SSL *ssl = SSL_new(ctx);
		int t = -1;

		fds[i] = connect_to(host, port, from);
		if (ssl && fds[i] >= 0 && SSL_set_fd(ssl, fds[i]) && SSL_connect(ssl) == 1 &&
		    write_all(ssl, hello, sizeof(hello)) == 0)
			t = read_frame(ssl, payload, sizeof(payload));
		if (t == 2)
			welcome++;
		else if (t == 11)
			refused++;
		else
			unanswered++;
		/* The SSL goes, the connection stays: nothing more is said on it. */
		SSL_free(ssl);
	}
	printf("held\n");
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		line[0] = '\0';
	for (unsigned long i = 0; i < n; i++) {
		char buf[4096];
		ssize_t k;

		if (fds[i] < 0)
			continue;
		/* What is left unread (an alert, a close_notify) comes first; then the end. */
		while ((k = recv(fds[i], buf, sizeof(buf), MSG_DONTWAIT)) > 0)
			;
		if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
			closed++;
		close(fds[i]);
	}
	free(fds);
	printf("welcome %lu\nrefused %lu\nunanswered %lu\nclosed %lu\n", welcome, refused,
	       unanswered, closed);
	fflush(stdout);
	return 0;
}

int main(int argc, char **argv)
{
	static const unsigned char hello[] = {1, 0, 0, 0, 0, 0, 0, 10, /* header: HELLO, 10 bytes */
	                                      0, 1, 2, 0, 0, 0, 0, 0, /* version 1, sink, claim 0 */
	                                      0, 0};                  /* kind: empty */
	static const unsigned char put[] = {3, 0, 0, 0,  0, 0, 0, 16, /* header: PUT, 16 bytes */
	                                    0, 0, 0, 64, 0, 0, 0, 8,  /* credit 64, len 8 */
	                                    1, 2, 3, 4,  5, 6, 7, 8};
	static const unsigned char garbage[] = {99, 0, 0, 0, 0, 0, 0, 0};
	static const unsigned char get[] = {5, 0, 0, 0, 0, 0, 0, 8,  /* header: GET, 8 bytes */
	                                    0, 0, 1, 0, 0, 0, 0, 0}; /* 256 bits, full */
	unsigned char payload[64], c;
	SSL_CTX *ctx;
	SSL *ssl;
	size_t got;
	unsigned long keyupdates = 0, sessions = 0;
	int fd, t, r, e;

	if (argc >= 6 && strncmp(argv[5], "busy=", strlen("busy=")) == 0) {
		char *end;

		errno = 0;
		sessions = strtoul(argv[5] + strlen("busy="), &end, 10);
		if (errno != 0 || *end != '\0' || sessions > 100000)
			sessions = 0;
	}

	if (argc >= 6 && strncmp(argv[5], "keyupdate=", strlen("keyupdate=")) == 0) {
		char *end;

		errno = 0;
		keyupdates = strtoul(argv[5] + strlen("keyupdate="), &end, 10);
		if (errno != 0 || *end != '\0' || keyupdates == 0)
			keyupdates = 0;
	}
	if ((argc != 6 && argc != 7) || strlen(argv[3]) == 0 || strlen(argv[3]) >= sizeof(user) ||
	    (strcmp(argv[5], "put") != 0 && strcmp(argv[5], "garbage") != 0 &&
	     strcmp(argv[5], "hold") != 0 && strcmp(argv[5], "last") != 0 && keyupdates == 0 &&
	     sessions == 0)) {
		fprintf(stderr,
		        "Usage: %s HOST PORT USER KEYFILE put|garbage|hold|last|keyupdate=N|busy=N "
		        "[SOURCE-ADDRESS]\n",
		        argv[0]);
		return 2;
	}
	/* A broker that ends the session under a write must not kill the peer before it reports. */
	signal(SIGPIPE, SIG_IGN);
	memcpy(user, argv[3], strlen(argv[3]) + 1);
	if (read_key(argv[4]) < 0) {
		fprintf(stderr, "%s: cannot read a key from %s\n", argv[0], argv[4]);
		return 2;
	}
	ctx = SSL_CTX_new(TLS_client_method());
	if (!ctx || !SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) ||
	    !SSL_CTX_set_ciphersuites(ctx, "TLS_AES_256_GCM_SHA384"))
		return 1;
	SSL_CTX_set_psk_use_session_callback(ctx, use_session);
	if (sessions > 0) {
		r = busy(ctx, argv[1], argv[2], argc == 7 ? argv[6] : NULL, sessions);
		SSL_CTX_free(ctx);
		return r;
	}
	fd = connect_to(argv[1], argv[2], argc == 7 ? argv[6] : NULL);
	if (fd < 0) {
		fprintf(stderr, "%s: cannot connect to %s port %s\n", argv[0], argv[1], argv[2]);
		return 1;
	}
	ssl = SSL_new(ctx);
	if (ssl && strcmp(argv[5], "hold") == 0) {
		if (hold(ssl, fd) < 0) {
			fprintf(stderr, "%s: TLS handshake failed\n", argv[0]);
			return 1;
		}
		t = write_all(ssl, hello, sizeof(hello)) < 0
		        ? -1
		        : read_frame(ssl, payload, sizeof(payload));
		if (t == 2)
			printf("welcome\n");
		else if (t == 11)
			printf("error %u\n", (unsigned)payload[0] << 8 | payload[1]);
		else
			printf("closed\n");
		SSL_free(ssl);
		close(fd);
		SSL_CTX_free(ctx);
		return 0;
	}
	if (!ssl || !SSL_set_fd(ssl, fd) || SSL_connect(ssl) != 1) {
		fprintf(stderr, "%s: TLS handshake failed\n", argv[0]);
		ERR_print_errors_fp(stderr);
		return 1;
	}
	if (write_all(ssl, hello, sizeof(hello)) < 0 ||
	    read_frame(ssl, payload, sizeof(payload)) != 2) {
		fprintf(stderr, "%s: no WELCOME\n", argv[0]);
		return 1;
	}
	printf("welcome\n");
	fflush(stdout);
	if (keyupdates > 0) {
		r = keyupdate_flood(ssl, fd, keyupdates);
		SSL_free(ssl);
		close(fd);
		SSL_CTX_free(ctx);
		return r;
	}
	if (strcmp(argv[5], "last") == 0) {
		/* A GET, then close_notify: the session's last request (docs/protocol.md 1.1). */
		r = write_all(ssl, get, sizeof(get));
		if (r == 0 && SSL_shutdown(ssl) < 0)
			r = -1;
		t = r < 0 ? -1 : read_frame(ssl, payload, sizeof(payload));
		printf("answer %d\n", t);
	} else {
		if (strcmp(argv[5], "put") == 0)
			r = write_all(ssl, put, sizeof(put));
		else
			r = write_all(ssl, garbage, sizeof(garbage));
		t = r < 0 ? -1 : read_frame(ssl, payload, sizeof(payload));
		if (t != 11) {
			fprintf(stderr, "%s: no ERROR (frame type %d)\n", argv[0], t);
			return 1;
		}
		printf("error %u\n", (unsigned)payload[0] << 8 | payload[1]);
	}

	/* Nothing may follow the ERROR but the end of the session: how does it end? */
	ERR_clear_error();
	errno = 0;
	r = SSL_read_ex(ssl, &c, 1, &got);
	e = SSL_get_error(ssl, r);
	if (r == 1)
		printf("close: other (data after the ERROR)\n");
	else if (e == SSL_ERROR_ZERO_RETURN)
		printf("close: close_notify\n");
	else if ((e == SSL_ERROR_SYSCALL && errno == 0) ||
	         (e == SSL_ERROR_SSL &&
	          ERR_GET_REASON(ERR_peek_error()) == SSL_R_UNEXPECTED_EOF_WHILE_READING))
		printf("close: eof\n");
	else
		printf("close: other (SSL error %d, errno %d, %s)\n", e, errno,
		       ERR_reason_error_string(ERR_peek_error())
		           ? ERR_reason_error_string(ERR_peek_error())
		           : "-");
	SSL_free(ssl);
	close(fd);
	SSL_CTX_free(ctx);
	return 0;
}
