/* SPDX-License-Identifier: MIT */
/* Fuzzes a real broker session: the broker's own modules and event loop, with up to three peers on
 * socketpairs, each plain (a unix peer mapped by our uid), TLS through a real client with one of
 * the configured keys, or raw bytes on a TLS session's socket.
 *
 * The input is a script. Byte 0 picks the number of peers (1 + b % 3), one mode byte per peer
 * follows, then operations: a byte whose high nibble picks the peer and low nibble the code,
 *   0 WRITE  u16 BE length, then that many bytes (fewer if the input ends): through TLS if
 *            the peer speaks it
 *   1 RUN    u8 k: k % 64 + 1 iterations of the event loop, none waiting
 *   2 TIME   u8 t: the monotonic clock jumps t * 100 ms (the broker's timers see it)
 *   3 SHUT   half-close: close_notify if TLS, then shutdown(SHUT_WR)
 *   4 READ   read and drop what the broker sent
 *   5 RAW    as WRITE, but bytes go to the socket under TLS
 *   6 CLOSE  close this peer's end
 * Other codes do nothing. After the script every peer's end is closed; every session must then
 * be gone, and the loop must fall quiet when nothing happens, or the harness aborts. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <systemd/sd-event.h>

#include "broker-config.h"
#include "broker.h"
#include "brokerd.h"
#include "conf.h"
#include "fuzz.h"
#include "key.h"
#include "log.h"
#include "macro.h"
#include "proto.h"
#include "session.h"
#include "tls.h"

/* A few frames of the largest size each way are plenty. */
#define INPUT_MAX (4 * EB_FRAME_MAX)
#define PEERS_MAX 3
/* The clock may jump this far per input: far past the HELLO timeout, not so far that the
 * broker's one-second timers take long to catch up. */
#define TIME_MAX_USEC (120 * 1000000ULL)
/* Nothing that happens without input or time may keep the loop busy longer than this. */
#define QUIET_ITERATIONS 1024

enum peer_mode {
	PEER_PLAIN,
	PEER_TLS,
	PEER_TLS_RAW,
	_PEER_MODE_MAX,
};

/* Who a TLS peer claims to be: three configured users, a stranger, and a known name with the
 * wrong key. */
enum client_id {
	CLIENT_SOURCE,
	CLIENT_SINK,
	CLIENT_ADMIN,
	CLIENT_STRANGER,
	CLIENT_WRONG_KEY,
	_CLIENT_ID_MAX,
};

struct peer {
	enum peer_mode mode;
	int fd; /* our end; -EBADF once closed */
	SSL *ssl;
	bool broken; /* TLS failed on our side: WRITE does nothing any more */
};

/* The clock seam: sd-event reads CLOCK_MONOTONIC (and CLOCK_BOOTTIME) through clock_gettime(),
 * and this definition in the executable takes the place of libc's for libsystemd too. libFuzzer
 * measures its timeouts with CLOCK_REALTIME, which is left alone. */
static uint64_t clock_offset_usec;

int clock_gettime(clockid_t id, struct timespec *ts)
{
	uint64_t ns;

	if (syscall(SYS_clock_gettime, id, ts) < 0)
		return -1;
	if (clock_offset_usec == 0 || (id != CLOCK_MONOTONIC && id != CLOCK_BOOTTIME))
		return 0;
	ns = (uint64_t)ts->tv_nsec + clock_offset_usec % 1000000 * 1000;
	ts->tv_sec += (time_t)(clock_offset_usec / 1000000 + ns / 1000000000);
	ts->tv_nsec = (long)(ns % 1000000000);
	return 0;
}

/* $EB_FUZZ_HANDSHAKE_THREADS (0 to 4, default 0): handshakes on worker threads, so that the
 * hand-off is fuzzed too. Inputs then need not replay the same: the loop waits a little for the
 * workers instead of polling. */
static unsigned handshake_threads;

static char conf_path[PATH_MAX];
static char dir_path[PATH_MAX];
static SSL_CTX *clients[_CLIENT_ID_MAX];

static void write_file(const char *path, const char *text)
{
	_cleanup_close_ int fd = -EBADF;
	size_t n = strlen(text);

	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	check(fd >= 0);
	check(write(fd, text, n) == (ssize_t)n);
}

static void key_path(const char *name, char *buf, size_t size)
{
	check((size_t)snprintf(buf, size, "%s/%s.key", dir_path, name) < size);
}

static void remove_files(void)
{
	static const char *const names[] = {"source", "sink", "admin", "stranger"};
	char path[PATH_MAX];

	for (size_t i = 0; i < ELEMENTSOF(names); i++) {
		key_path(names[i], path, sizeof(path));
		(void)unlink(path);
	}
	(void)unlink(conf_path);
	(void)rmdir(dir_path);
	for (size_t i = 0; i < ELEMENTSOF(clients); i++)
		clients[i] = eb_tls_free(clients[i]);
}

static SSL_CTX *client_new(const char *user, const char *key_name)
{
	uint8_t key[EB_KEY_SIZE];
	char path[PATH_MAX];
	SSL_CTX *ctx = NULL;

	key_path(key_name, path, sizeof(path));
	check(eb_key_load(path, key) == 0);
	check(eb_tls_client_new(user, NULL, key, &ctx) == 0);
	explicit_bzero(key, sizeof(key));
	return ctx;
}

/* Writes the configuration and the keys once, into a directory removed at exit. */
static void setup(void)
{
	static const char *const names[] = {"source", "sink", "admin", "stranger"};
	const char *tmp = getenv("TMPDIR"), *threads = getenv("EB_FUZZ_HANDSHAKE_THREADS");
	char path[PATH_MAX], text[4096];

	if (threads) {
		char *end = NULL;
		unsigned long v = strtoul(threads, &end, 10);

		check(end != threads && *end == '\0' && v <= 4);
		handshake_threads = (unsigned)v;
	}

	check((size_t)snprintf(dir_path, sizeof(dir_path), "%s/fuzz-session.XXXXXX",
	                       tmp ? tmp : "/tmp") < sizeof(dir_path));
	check(mkdtemp(dir_path));
	/* OpenSSL cleans up in its own exit handler; ours must run before it, so it is
	 * registered after OpenSSL's. */
	check(OPENSSL_init_ssl(0, NULL) == 1);
	check(atexit(remove_files) == 0);
	for (size_t i = 0; i < ELEMENTSOF(names); i++) {
		key_path(names[i], path, sizeof(path));
		check(eb_key_generate(path) == 0);
	}
	/* A small pool fills and empties within one input; a one-second status interval lets the
	 * status timer run when the clock jumps. */
	check((size_t)snprintf(text, sizeof(text),
	                       "[broker]\n"
	                       "capacity-bits = 8192\n"
	                       "seed-file =\n"
	                       "status-interval-sec = 1\n"
	                       /* Handshakes on the loop unless asked: each input must
	                        * replay the same. */
	                       "handshake-threads = %u\n"
	                       "[user local]\n"
	                       "role = source,sink,admin\n"
	                       "unix-uid = %u\n"
	                       "quota-bits-per-hour = 3600000\n"
	                       "[user source]\n"
	                       "role = source\n"
	                       "key-file = %s/source.key\n"
	                       "max-credit-per-byte = 4\n"
	                       "[user sink]\n"
	                       "role = sink\n"
	                       "key-file = %s/sink.key\n"
	                       "quota-bits-per-hour = 36000\n"
	                       "[user admin]\n"
	                       "role = admin,sink\n"
	                       "key-file = %s/admin.key\n",
	                       handshake_threads, (unsigned)getuid(), dir_path, dir_path,
	                       dir_path) < sizeof(text));
	check((size_t)snprintf(conf_path, sizeof(conf_path), "%s/eb-brokerd.conf", dir_path) <
	      sizeof(conf_path));
	write_file(conf_path, text);

	clients[CLIENT_SOURCE] = client_new("source", "source");
	clients[CLIENT_SINK] = client_new("sink", "sink");
	clients[CLIENT_ADMIN] = client_new("admin", "admin");
	clients[CLIENT_STRANGER] = client_new("stranger", "stranger");
	clients[CLIENT_WRONG_KEY] = client_new("sink", "admin");

	/* A peer that is gone must cost a write an EPIPE, not the process. */
	signal(SIGPIPE, SIG_IGN);
	/* The broker's refusals are the point here; $EB_FUZZ_LOG shows them when debugging. */
	log_set_max_level(getenv("EB_FUZZ_LOG") ? LOG_DEBUG : LOG_CRIT);
}

/* Runs the loop n times without waiting; returns how many iterations dispatched something. */
static unsigned run(struct broker *b, unsigned n)
{
	unsigned busy = 0;

	for (unsigned i = 0; i < n; i++) {
		/* With workers, a step comes back through their eventfd: wait for it a moment. */
		int r = sd_event_run(b->event, handshake_threads > 0 ? 2000 : 0);

		check(r >= 0);
		busy += r > 0;
	}
	return busy;
}

/* Whether the loop falls quiet (an iteration that dispatches nothing) within QUIET_ITERATIONS. */
static bool settle(struct broker *b)
{
	for (unsigned i = 0; i < QUIET_ITERATIONS; i++)
		if (run(b, 1) == 0)
			return true;
	return false;
}

/* The seam must reach sd-event, or TIME would test nothing. */
static void check_clock_seam(void)
{
	_cleanup_(brokerd_freep) struct broker *b = NULL;
	struct eb_conf *conf = NULL;
	uint64_t t0 = 0, t1 = 0;
	sigset_t saved;

	check(pthread_sigmask(SIG_SETMASK, NULL, &saved) == 0);
	check(broker_config_load(conf_path, &conf, NULL) == 0);
	check(brokerd_new(conf, conf_path, &b) == 0);
	(void)settle(b);
	check(sd_event_now(b->event, CLOCK_MONOTONIC, &t0) >= 0);
	clock_offset_usec += 10 * 1000000ULL;
	(void)settle(b);
	check(sd_event_now(b->event, CLOCK_MONOTONIC, &t1) >= 0);
	check(t1 >= t0 + 10 * 1000000ULL);
	b = brokerd_free(b);
	check(pthread_sigmask(SIG_SETMASK, &saved, NULL) == 0);
}

static void check_broker(const struct broker *b)
{
	const struct registry *reg = &b->registry;
	const struct registry_entry *e;
	unsigned n = 0, hs = 0, closing = 0, slots[2] = {0}, per_user[64] = {0};

	eb_list_foreach(e, &reg->sessions, node) {
		const struct session *s = session_of(e);

		check(n < reg->n_sessions);
		check(e->state != SESSION_OUTSIDE);
		hs += e->state == SESSION_HANDSHAKE;
		closing += e->state == SESSION_CLOSING;
		if (e->state != SESSION_CLOSING)
			slots[e->local]++;
		check(e->state == SESSION_HANDSHAKE || !e->hs.addr_counted);
		if (e->user >= 0 && e->user < 64 &&
		    (e->state == SESSION_HELLO || e->state == SESSION_READY))
			per_user[e->user]++;
		check(s->broker == b);
		check(s->rstart <= s->rend && s->rend <= SESSION_RBUF_SIZE);
		check(s->wstart <= s->wend && s->wend <= SESSION_WBUF_SIZE);
		check(s->rend <= s->rcap && s->wend <= s->wcap);
		n++;
	}
	check(n == reg->n_sessions);
	check(hs == reg->n_handshakes);
	check(closing == reg->n_closing);
	check(slots[0] == reg->n_network && slots[1] == reg->n_local);
	for (unsigned u = 0; u < b->conf->n_users && u < 64; u++)
		check(per_user[u] == reg->user_sessions[u]);
	check(reg->n_sources <= n && reg->n_sinks <= n);
}

static void peer_close(struct peer *p)
{
	if (p->ssl) {
		SSL_free(p->ssl);
		p->ssl = NULL;
	}
	p->fd = safe_close(p->fd);
}

static bool peer_tls(const struct peer *p)
{
	return p->mode == PEER_TLS && p->ssl;
}

/* Opens a session the way an accepted connection gets one, and runs a TLS client's handshake
 * with it as far as both sides go. */
static void peer_open(struct broker *b, struct peer *p, uint8_t mode)
{
	struct session *s = NULL;
	int sv[2], r;

	p->mode = (enum peer_mode)(mode % _PEER_MODE_MAX);
	p->ssl = NULL;
	p->broken = false;
	check(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) == 0);
	p->fd = sv[0];
	r = session_new(b, sv[1], NULL, 0, p->mode != PEER_PLAIN, "fuzz", &s);
	check(r == 0);
	if (p->mode != PEER_TLS)
		return;

	p->ssl = SSL_new(clients[(mode / _PEER_MODE_MAX) % _CLIENT_ID_MAX]);
	check(p->ssl && SSL_set_fd(p->ssl, p->fd) == 1);
	SSL_set_connect_state(p->ssl);
	for (unsigned i = 0; i < 64; i++) {
		int e;

		ERR_clear_error();
		r = SSL_do_handshake(p->ssl);
		if (r == 1)
			break;
		e = SSL_get_error(p->ssl, r);
		if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
			p->broken = true;
			break;
		}
		run(b, 1);
	}
	ERR_clear_error();
}

/* Writes what the socket takes, letting the broker read in between; the rest is dropped. */
static void peer_write(struct broker *b, struct peer *p, const uint8_t *buf, size_t n, bool raw)
{
	for (unsigned tries = 0; p->fd >= 0 && n > 0 && tries < 16; tries++) {
		ssize_t k;

		if (peer_tls(p) && !raw) {
			int r;

			if (p->broken)
				return;
			ERR_clear_error();
			r = SSL_write(p->ssl, buf, (int)MIN(n, (size_t)INT32_MAX));
			if (r <= 0) {
				int e = SSL_get_error(p->ssl, r);

				ERR_clear_error();
				if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
					p->broken = true;
					return;
				}
				k = 0;
			} else
				k = r;
		} else {
			k = send(p->fd, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT);
			if (k < 0 && errno != EAGAIN)
				return;
			k = MAX(k, (ssize_t)0);
		}
		buf += k;
		n -= (size_t)k;
		if (n > 0)
			run(b, 4);
	}
}

static void peer_read(struct peer *p)
{
	static uint8_t buf[65536];

	for (unsigned i = 0; p->fd >= 0 && i < 64; i++) {
		if (peer_tls(p) && !p->broken) {
			int r;

			ERR_clear_error();
			r = SSL_read(p->ssl, buf, sizeof(buf));
			if (r <= 0) {
				ERR_clear_error();
				return;
			}
		} else if (recv(p->fd, buf, sizeof(buf), MSG_DONTWAIT) <= 0)
			return;
	}
}

static void peer_shutdown(struct peer *p)
{
	if (p->fd < 0)
		return;
	if (peer_tls(p) && !p->broken) {
		ERR_clear_error();
		(void)SSL_shutdown(p->ssl);
		ERR_clear_error();
	}
	(void)shutdown(p->fd, SHUT_WR);
}

static size_t take_u8(const uint8_t **data, size_t *size)
{
	size_t v;

	if (*size < 1)
		return 0;
	v = (*data)[0];
	*data += 1;
	*size -= 1;
	return v;
}

static void run_script(struct broker *b, struct peer *peers, unsigned n_peers, const uint8_t *data,
                       size_t size)
{
	uint64_t jumped = 0;

	while (size > 0) {
		uint8_t op = (uint8_t)take_u8(&data, &size);
		struct peer *p = &peers[(op >> 4) % n_peers];
		size_t len;

		switch (op & 0x0f) {
		case 0:
		case 5:
			len = take_u8(&data, &size) << 8;
			len |= take_u8(&data, &size);
			len = MIN(len, size);
			peer_write(b, p, data, len, (op & 0x0f) == 5);
			data += len;
			size -= len;
			break;
		case 1:
			run(b, take_u8(&data, &size) % 64 + 1);
			break;
		case 2: {
			uint64_t t = take_u8(&data, &size) * 100000ULL;

			t = MIN(t, TIME_MAX_USEC - jumped);
			jumped += t;
			clock_offset_usec += t;
			break;
		}
		case 3:
			peer_shutdown(p);
			break;
		case 4:
			peer_read(p);
			break;
		case 6:
			peer_close(p);
			break;
		default:
			break;
		}
		check_broker(b);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool ready;
	_cleanup_(brokerd_freep) struct broker *b = NULL;
	struct peer peers[PEERS_MAX];
	struct eb_conf *conf = NULL;
	unsigned n_peers;
	sigset_t saved;

	if (size > INPUT_MAX || size < 1)
		return 0;
	if (!ready) {
		setup();
		check_clock_seam();
		ready = true;
	}

	/* brokerd_new() blocks the signals it watches; libFuzzer gets them back afterwards. */
	check(pthread_sigmask(SIG_SETMASK, NULL, &saved) == 0);
	check(broker_config_load(conf_path, &conf, NULL) == 0);
	check(brokerd_new(conf, conf_path, &b) == 0);

	n_peers = 1 + data[0] % PEERS_MAX;
	data++, size--;
	for (unsigned i = 0; i < n_peers; i++)
		peer_open(b, &peers[i], (uint8_t)take_u8(&data, &size));
	check_broker(b);

	run_script(b, peers, n_peers, data, size);

	/* With no input and no time passing, the loop must come to rest: a session that keeps
	 * dispatching now is spinning (a partial TLS record once did this). */
	check(settle(b));
	for (unsigned i = 0; i < n_peers; i++) {
		peer_read(&peers[i]);
		peer_close(&peers[i]);
	}
	/* A peer that is gone is noticed at once; give timers a chance too, then insist. */
	for (unsigned i = 0; i < 64 && b->registry.n_sessions > 0; i++) {
		run(b, 16);
		if (i >= 8)
			clock_offset_usec += 1000000;
	}
	if (b->registry.n_sessions > 0)
		fprintf(stderr, "%u session(s) outlived their peers\n", b->registry.n_sessions);
	check(b->registry.n_sessions == 0);
	check(b->registry.n_sources == 0 && b->registry.n_sinks == 0);

	b = brokerd_free(b);
	check(pthread_sigmask(SIG_SETMASK, &saved, NULL) == 0);
	ERR_clear_error();
	return 0;
}
