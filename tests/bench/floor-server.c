/* SPDX-License-Identifier: MIT */
/* The floor of the boot-storm benchmark: the least work a server with the broker's TLS settings
 * does for one fresh seed, against which tests/bench/boot-storm sets eb-brokerd's CPU per seed.
 *
 * One thread, one epoll loop. Each connection: accept4(), the TLS 1.3 handshake with an external
 * PSK found by the identity's name (SSL_CTX set up as shared/tls.c sets up the broker's: TLS 1.3
 * only, both suites with the suite picked from the first binder's length, psk_dhe_ke only with
 * OpenSSL's default groups, no tickets, no cache), then a WELCOME for the HELLO and a DATA of 32
 * bytes for the GET, both encoded once at start-up with shared/proto.c, as the broker would send
 * them to a sink asking for 256 bits; then it reads until the client's close_notify or end of
 * stream (docs/protocol.md 1.1), sends its own close_notify and closes. No pool, no accounting,
 * no limits beyond a frame's size: only what any server of this protocol must do.
 *
 *   bench-floor-server --users-file FILE [--port PORT]
 *
 * FILE holds "NAME KEYFILE" lines (bench-storm-client's); every key is bound to SHA-384, the
 * broker's default. Listens on 127.0.0.1:PORT (0, the default: any free port), prints
 * "port=N" once it listens, and runs until killed. */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>

#include "cli.h"
#include "key.h"
#include "log.h"
#include "proto.h"
#include "tls.h"

#define USERS_MAX 100000

struct user {
	char name[EB_KIND_MAX + 1];
	uint8_t key[EB_KEY_SIZE];
};

enum step { STEP_HANDSHAKE, STEP_FRAMES, STEP_END };

struct peer {
	int fd;
	SSL *ssl;
	enum step step;
	uint8_t in[EB_FRAME_HEADER_SIZE + 256];
	size_t in_len;
	const uint8_t *out; /* a canned frame being written */
	size_t out_len;
};

static struct user *users;
static size_t n_users;
static uint8_t welcome[EB_FRAME_HEADER_SIZE + 128], data[EB_FRAME_HEADER_SIZE + 64];
static size_t welcome_len, data_len;

static int user_cmp(const void *a, const void *b)
{
	return strcmp(((const struct user *)a)->name, ((const struct user *)b)->name);
}

static int load_users(const char *path)
{
	FILE *f = fopen(path, "re");
	char name[128], key_path[4096];
	int r = 0;

	if (!f)
		return -errno;
	while (fscanf(f, "%127s %4095s", name, key_path) == 2) {
		struct user *n;

		if (strlen(name) > EB_KIND_MAX || n_users >= USERS_MAX) {
			r = -E2BIG;
			break;
		}
		n = realloc(users, (n_users + 1) * sizeof(*users));
		if (!n) {
			r = -ENOMEM;
			break;
		}
		users = n;
		snprintf(users[n_users].name, sizeof(users[n_users].name), "%s", name);
		r = eb_key_load(key_path, users[n_users].key);
		if (r < 0) {
			fprintf(stderr, "Failed to load the key %s: %s\n", key_path, strerror(-r));
			break;
		}
		n_users++;
	}
	fclose(f);
	if (r < 0)
		return r;
	qsort(users, n_users, sizeof(*users), user_cmp);
	return n_users > 0 ? 0 : -ENOENT;
}

/* The suite whose hash is as long as the first binder offered, as shared/tls.c chooses it. */
static int on_client_hello(SSL *ssl, int *alert, void *arg)
{
	const unsigned char *p;
	size_t n, ids;

	(void)arg;
	if (!SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_psk, &p, &n) || n < 2)
		return SSL_CLIENT_HELLO_SUCCESS;
	ids = (size_t)p[0] << 8 | p[1];
	if (n >= 2 + ids + 3 && p[2 + ids + 2] == 32 &&
	    !SSL_set_ciphersuites(ssl, "TLS_AES_128_GCM_SHA256")) {
		*alert = SSL_AD_INTERNAL_ERROR;
		return SSL_CLIENT_HELLO_ERROR;
	}
	return SSL_CLIENT_HELLO_SUCCESS;
}

static int find_session(SSL *ssl, const unsigned char *identity, size_t identity_len,
                        SSL_SESSION **ret)
{
	const SSL_CIPHER *cipher = SSL_get_pending_cipher(ssl);
	struct user want = {};
	const struct user *u;
	SSL_SESSION *s;

	*ret = NULL;
	if (!cipher || identity_len > EB_KIND_MAX)
		return 1; /* no session: the handshake fails for want of a PSK */
	memcpy(want.name, identity, identity_len);
	u = bsearch(&want, users, n_users, sizeof(*users), user_cmp);
	if (!u)
		return 1;
	s = SSL_SESSION_new();
	if (!s)
		return 0;
	if (!SSL_SESSION_set1_master_key(s, u->key, EB_KEY_SIZE) ||
	    !SSL_SESSION_set_cipher(s, cipher) ||
	    !SSL_SESSION_set_protocol_version(s, TLS1_3_VERSION)) {
		SSL_SESSION_free(s);
		return 0;
	}
	*ret = s;
	return 1;
}

static SSL_CTX *server_ctx(void)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());

	if (!ctx)
		return NULL;
	if (!SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) ||
	    !SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION) ||
	    !SSL_CTX_set_ciphersuites(ctx, EB_TLS_SERVER_CIPHERSUITES) ||
	    !SSL_CTX_set_num_tickets(ctx, 0)) {
		SSL_CTX_free(ctx);
		return NULL;
	}
	SSL_CTX_clear_options(ctx, SSL_OP_ALLOW_NO_DHE_KEX);
	SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET | SSL_OP_IGNORE_UNEXPECTED_EOF);
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	SSL_CTX_set_client_hello_cb(ctx, on_client_hello, NULL);
	SSL_CTX_set_psk_find_session_callback(ctx, find_session);
	return ctx;
}

/* WELCOME for a sink, and a DATA of 32 bytes carrying 256 bits, encoded once. */
static int canned_frames(void)
{
	uint8_t seed[32];
	struct eb_msg m = {.type = EB_MSG_WELCOME};
	int k;

	m.welcome.version = EB_PROTO_VERSION;
	m.welcome.roles = EB_ROLE_SINK;
	m.welcome.max_data = EB_DATA_MAX;
	snprintf(m.welcome.user, sizeof(m.welcome.user), "vm0");
	k = eb_msg_encode(&m, welcome, sizeof(welcome));
	if (k < 0)
		return k;
	welcome_len = (size_t)k;
	if (RAND_bytes(seed, sizeof(seed)) != 1)
		return -EIO;
	m = (struct eb_msg){.type = EB_MSG_DATA,
	                    .data = {.bits = 8 * sizeof(seed), .data = seed, .len = sizeof(seed)}};
	k = eb_msg_encode(&m, data, sizeof(data));
	OPENSSL_cleanse(seed, sizeof(seed));
	if (k < 0)
		return k;
	data_len = (size_t)k;
	return 0;
}

static void peer_close(int epfd, struct peer *p)
{
	(void)epoll_ctl(epfd, EPOLL_CTL_DEL, p->fd, NULL);
	close(p->fd);
	SSL_free(p->ssl);
	free(p);
}

static void watch(int epfd, struct peer *p, uint32_t events)
{
	struct epoll_event ev = {.events = events, .data.ptr = p};

	(void)epoll_ctl(epfd, EPOLL_CTL_MOD, p->fd, &ev);
}

/* Waits for what OpenSSL wants; false when the connection is done with (failed or ended). */
static bool want(int epfd, struct peer *p, int k)
{
	switch (SSL_get_error(p->ssl, k)) {
	case SSL_ERROR_WANT_READ:
		watch(epfd, p, EPOLLIN);
		return true;
	case SSL_ERROR_WANT_WRITE:
		watch(epfd, p, EPOLLOUT);
		return true;
	default:
		return false;
	}
}

/* Runs a connection as far as it can go without blocking; false once it is to be closed. */
static bool pump(int epfd, struct peer *p)
{
	int k;

	if (p->step == STEP_HANDSHAKE) {
		k = SSL_accept(p->ssl);
		if (k <= 0)
			return want(epfd, p, k);
		p->step = STEP_FRAMES;
	}
	for (;;) {
		struct eb_frame f;
		size_t size;
		int r;

		while (p->out_len > 0) {
			size_t n;

			k = SSL_write_ex(p->ssl, p->out, p->out_len, &n);
			if (k <= 0)
				return want(epfd, p, k);
			p->out += n;
			p->out_len -= n;
		}
		if (p->step == STEP_FRAMES) {
			r = eb_frame_parse(p->in, p->in_len, &f, &size);
			if (r >= 0) {
				if (f.type == EB_MSG_HELLO) {
					p->out = welcome, p->out_len = welcome_len;
				} else if (f.type == EB_MSG_GET) {
					p->out = data, p->out_len = data_len;
					p->step = STEP_END;
				} else
					return false;
				memmove(p->in, p->in + size, p->in_len - size);
				p->in_len -= size;
				continue;
			}
			if (r != -EAGAIN || p->in_len == sizeof(p->in))
				return false;
		}
		if (p->step == STEP_END) {
			/* After DATA: the client's close_notify or end of stream, then ours. */
			uint8_t sink[64];
			size_t n;

			k = SSL_read_ex(p->ssl, sink, sizeof(sink), &n);
			if (k > 0)
				continue;
			if (SSL_get_error(p->ssl, k) == SSL_ERROR_ZERO_RETURN) {
				(void)SSL_shutdown(p->ssl);
				return false;
			}
			return want(epfd, p, k);
		} else {
			size_t n;

			k = SSL_read_ex(p->ssl, p->in + p->in_len, sizeof(p->in) - p->in_len, &n);
			if (k <= 0)
				return want(epfd, p, k);
			p->in_len += n;
		}
	}
}

/* Takes every connection waiting, and runs each as far as it goes. */
static void accept_all(int epfd, int lfd, SSL_CTX *ctx)
{
	int fd;

	while ((fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
		struct epoll_event ev = {.events = EPOLLIN};
		struct peer *p = calloc(1, sizeof(*p));

		if (!p || !(p->ssl = SSL_new(ctx)) || !SSL_set_fd(p->ssl, fd)) {
			if (p)
				SSL_free(p->ssl);
			free(p);
			close(fd);
			continue;
		}
		p->fd = fd;
		ev.data.ptr = p;
		if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
			SSL_free(p->ssl);
			free(p);
			close(fd);
			continue;
		}
		if (!pump(epfd, p))
			peer_close(epfd, p);
	}
}

static void help(void)
{
	printf("bench-floor-server --users-file FILE [--port PORT]\n\n"
	       "The least work a server with eb-brokerd's TLS settings does for a fresh seed\n"
	       "(tests/bench/boot-storm's floor): PSK handshake, canned WELCOME and DATA, the\n"
	       "client's close_notify, close. Prints port=N once it listens on 127.0.0.1.\n\n"
	       "  -u, --users-file FILE  \"NAME KEYFILE\" lines\n"
	       "  -p, --port PORT        port to listen on (default 0: any free one)\n"
	       "  -h, --help             show this help\n"
	       "      --version          show the version\n");
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
	    {"users-file", required_argument, NULL, 'u'},
	    {"port", required_argument, NULL, 'p'},
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'},
	    {},
	};
	struct sockaddr_in addr = {.sin_family = AF_INET,
	                           .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t addr_len = sizeof(addr);
	const char *users_file = NULL;
	struct epoll_event ev = {.events = EPOLLIN};
	int c, r, lfd, epfd, one = 1;
	SSL_CTX *ctx;

	while ((c = getopt_long(argc, argv, "u:p:h", options, NULL)) >= 0)
		switch (c) {
		case 'u':
			users_file = optarg;
			break;
		case 'p': {
			unsigned long long port;

			if (eb_cli_parse_u64(optarg, 0, 65535, &port) < 0) {
				fprintf(stderr, "Invalid --port '%s': 0..65535\n", optarg);
				return 2;
			}
			addr.sin_port = htons((uint16_t)port);
			break;
		}
		case 'h':
			help();
			return 0;
		case 'V':
			eb_print_version("bench-floor-server");
			return 0;
		default:
			return 2;
		}
	if (!users_file) {
		fprintf(stderr, "Missing --users-file; see --help\n");
		return 2;
	}
	r = load_users(users_file);
	if (r < 0) {
		fprintf(stderr, "Failed to load the users of %s: %s\n", users_file, strerror(-r));
		return 1;
	}
	ctx = server_ctx();
	if (!ctx || canned_frames() < 0) {
		fprintf(stderr, "Failed to set up TLS or the canned frames\n");
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	epfd = epoll_create1(EPOLL_CLOEXEC);
	if (lfd < 0 || epfd < 0 ||
	    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(lfd, (struct sockaddr *)&addr, sizeof(addr)) < 0 || listen(lfd, 4096) < 0 ||
	    getsockname(lfd, (struct sockaddr *)&addr, &addr_len) < 0 ||
	    epoll_ctl(epfd, EPOLL_CTL_ADD, lfd, &ev) < 0) {
		fprintf(stderr, "Failed to listen on 127.0.0.1: %s\n", strerror(errno));
		return 1;
	}
	printf("port=%u\n", ntohs(addr.sin_port));
	fflush(stdout);

	for (;;) {
		struct epoll_event evs[64];
		int n = epoll_wait(epfd, evs, 64, -1);

		for (int i = 0; i < n; i++) {
			struct peer *p = evs[i].data.ptr;

			if (!p) {
				accept_all(epfd, lfd, ctx);
				continue;
			}
			if (!pump(epfd, p))
				peer_close(epfd, p);
		}
	}
}
