/* SPDX-License-Identifier: MIT */
/* Load for the boot-storm and idle benchmarks: many authenticated sinks over TLS (PSK) at once.
 *
 *   fresh:     N seeds, C connections at a time; each connects, shakes hands, says HELLO, asks
 *              for --bits in full-entropy mode, and closes when DATA comes, as a booting VM's
 *              one-shot sink does. Latency runs from connect() to the last byte of DATA.
 *   keepalive: C connections, each asking again as soon as DATA comes, N GETs in all. Latency
 *              runs from the GET to its DATA.
 *   idle:      N sessions, C at a time being set up, each stopping after WELCOME; prints
 *              "ready" once all are up and holds them until stdin closes.
 *
 * Each thread runs its own epoll loop over its share of the connections. Prints one line of
 * key=value figures; the benchmark scripts read it. Users come from a file of "NAME KEYFILE"
 * lines, used in turn, so that a storm can look like many machines with keys of their own.
 *
 * For the fleet test (tests/fleet/): --retries tries a failed fresh seed again on a new
 * connection, as a booting VM's sink does when its broker dies under it; --bind connects from
 * given addresses in turn, so that one process looks like many guests; --seeds-file writes
 * every seed delivered, so that the test can check no two are the same. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/ssl.h>

#include "conn.h"
#include "key.h"
#include "proto.h"
#include "tls.h"

enum mode { MODE_FRESH, MODE_KEEPALIVE, MODE_IDLE };

/* Why a seed was not delivered; the benchmark prints each count. */
enum fail {
	FAIL_CONNECT,   /* connect() failed: refused, no route, no ports */
	FAIL_HANDSHAKE, /* TLS failed, or the broker closed before the handshake ended */
	FAIL_CLOSED,    /* closed after the handshake without an answer */
	FAIL_BUSY,      /* ERROR(BUSY): a session limit */
	FAIL_ERROR,     /* any other ERROR */
	FAIL_EMPTY,     /* EMPTY or QUOTA: the pool could not serve */
	FAIL_TIMEOUT,   /* no answer within --timeout */
	FAIL_PROTOCOL,  /* a frame we did not expect, or a short DATA */
	_FAIL_MAX,
};

static const char *const fail_names[_FAIL_MAX] = {
    "connect", "handshake", "closed", "busy", "error", "empty", "timeout", "protocol",
};

/* STEP_END: the seed is in, and the broker's close_notify and end are read before the close, so
 * that the close sends no reset (fresh mode, unless --keep-open). */
enum step { STEP_CONNECT, STEP_HANDSHAKE, STEP_WELCOME, STEP_DATA, STEP_END, STEP_IDLE };

struct link {
	int fd;
	unsigned long seed; /* its index, kept across retries */
	unsigned tries;     /* retries so far */
	struct eb_conn *conn;
	enum step step;
	uint64_t start_ns; /* connect(), or the GET in keepalive mode */
	uint64_t deadline_ns;
	uint8_t out[64];
	size_t out_len, out_off;
	uint8_t in[256];
	size_t in_len;
	bool ended; /* close_notify sent after the GET (docs/protocol.md 1.1) */
};

struct worker {
	pthread_t thread;
	unsigned id, slots;
	int epfd;
	struct link *links;
	uint64_t fails[_FAIL_MAX];
	unsigned up;      /* idle mode: sessions welcomed */
	unsigned next;    /* idle mode: the next slot to set up */
	uint64_t lost;    /* seeds given up: failed with no retry left */
	uint64_t retries; /* failed attempts tried again */
	uint8_t *seeds;   /* --seeds-file: every seed delivered, arg_bits / 8 bytes each */
	size_t n_seeds, max_seeds;
};

static struct sockaddr_in arg_addr;
static enum mode arg_mode = MODE_FRESH;
static unsigned long arg_count = 1000;
static unsigned arg_concurrency = 100, arg_threads = 2;
static unsigned arg_bits = 256, arg_timeout_s = 30;
static const char *arg_users_file;
static unsigned arg_retries;
static bool arg_keep_open;
static const char *arg_seeds_file;
#define MAX_BINDS 256
static struct sockaddr_in arg_binds[MAX_BINDS];
static unsigned n_binds;

static SSL_CTX **ctxs;
static unsigned n_ctxs;

static atomic_ulong started; /* seeds (fresh/idle: connections) begun */
static atomic_ulong done;    /* seeds answered, delivered or failed */
static atomic_uint welcomed;
static uint32_t *latency_us; /* one per delivered seed */
static atomic_ulong n_latency;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static int load_users(void)
{
	FILE *f = fopen(arg_users_file, "re");
	char name[128], path[4096];

	if (!f)
		return -errno;
	while (fscanf(f, "%127s %4095s", name, path) == 2) {
		uint8_t key[EB_KEY_SIZE];
		SSL_CTX **n;
		int r;

		r = eb_key_load(path, key);
		if (r < 0) {
			fprintf(stderr, "Failed to load the key %s: %s\n", path, strerror(-r));
			fclose(f);
			return r;
		}
		n = realloc(ctxs, (n_ctxs + 1) * sizeof(*ctxs));
		if (!n) {
			fclose(f);
			return -ENOMEM;
		}
		ctxs = n;
		r = eb_tls_client_new(name, NULL, key, &ctxs[n_ctxs]);
		explicit_bzero(key, sizeof(key));
		if (r < 0) {
			fclose(f);
			return r;
		}
		n_ctxs++;
	}
	fclose(f);
	return n_ctxs > 0 ? 0 : -ENOENT;
}

static void queue_msg(struct link *l, const struct eb_msg *m)
{
	int n = eb_msg_encode(m, l->out, sizeof(l->out));

	l->out_len = n > 0 ? (size_t)n : 0;
	l->out_off = 0;
}

static void queue_get(struct link *l)
{
	struct eb_msg m = {.type = EB_MSG_GET, .get = {.bits = arg_bits, .mode = EB_GET_FULL}};

	queue_msg(l, &m);
	l->step = STEP_DATA;
}

static void watch(struct worker *w, struct link *l, uint32_t events, int op)
{
	struct epoll_event ev = {.events = events, .data.ptr = l};

	(void)epoll_ctl(w->epfd, op, l->fd, &ev);
}

static void drop(struct link *l)
{
	/* eb_conn_free() closes the fd; a link without a conn yet owns it alone. */
	if (l->conn)
		eb_conn_free(l->conn);
	else if (l->fd >= 0)
		close(l->fd);
	l->conn = NULL;
	l->fd = -1;
}

/* One connection for seed i on this slot; false when it failed at once. The latency of a seed
 * runs from its first try's connect(). */
static bool try_seed(struct link *l, unsigned long i, unsigned tries, uint64_t start_ns)
{
	int r;

	*l = (struct link){.fd = -1, .seed = i, .tries = tries, .start_ns = start_ns};
	l->deadline_ns = now_ns() + (uint64_t)arg_timeout_s * 1000000000ULL;
	l->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (l->fd < 0)
		return false;
	if (n_binds > 0) {
		int one = 1;

		/* The port is picked at connect(), for the destination: thousands of seeds from
		 * one address do not run out of ports picked at bind(). */
		(void)setsockopt(l->fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
		if (bind(l->fd, (struct sockaddr *)&arg_binds[i % n_binds], sizeof(arg_binds[0])) <
		    0) {
			drop(l);
			return false;
		}
	}
	r = connect(l->fd, (struct sockaddr *)&arg_addr, sizeof(arg_addr));
	if ((r < 0 && errno != EINPROGRESS) ||
	    eb_conn_new(l->fd, ctxs[i % n_ctxs], false, true, &l->conn) < 0) {
		drop(l);
		return false;
	}
	l->step = STEP_CONNECT;
	return true;
}

/* Seed i on this slot, tried again while it fails at once and --retries allow. */
static void start_seed(struct worker *w, struct link *l, unsigned long i, unsigned tries,
                       uint64_t start_ns)
{
	while (!try_seed(l, i, tries, start_ns)) {
		w->fails[FAIL_CONNECT]++;
		if (arg_mode != MODE_FRESH || tries >= arg_retries) {
			w->lost++;
			atomic_fetch_add(&done, 1);
			return;
		}
		tries++;
		w->retries++;
	}
	watch(w, l, EPOLLOUT, EPOLL_CTL_ADD);
}

/* Begins the next seed on this slot; false when there are none left to begin. */
static bool begin(struct worker *w, struct link *l)
{
	unsigned long i = atomic_fetch_add(&started, 1);

	if (i >= arg_count)
		return false;
	start_seed(w, l, i, 0, now_ns());
	return true;
}

static void keep_seed(struct worker *w, const struct eb_msg *m)
{
	if (!arg_seeds_file)
		return;
	if (w->n_seeds == w->max_seeds) {
		size_t max = w->max_seeds ? 2 * w->max_seeds : 1024;
		uint8_t *n = realloc(w->seeds, max * (arg_bits / 8));

		if (!n)
			return;
		w->seeds = n;
		w->max_seeds = max;
	}
	memcpy(w->seeds + w->n_seeds * (arg_bits / 8), m->data.data, arg_bits / 8);
	w->n_seeds++;
}

/* In idle mode sessions are set up C at a time: the next one begins as one settles. */
static void begin_next(struct worker *w)
{
	while (w->next < w->slots) {
		struct link *l = &w->links[w->next++];

		if (!begin(w, l))
			return;
		if (l->fd >= 0)
			return;
	}
}

/* The seed on l ended: counted as delivered (fail < 0) or as a failure. Returns whether l goes on
 * (keepalive: the next GET is queued); otherwise its slot starts the next seed in fresh mode. */
static bool finish(struct worker *w, struct link *l, int fail)
{
	if (fail >= 0) {
		w->fails[fail]++;
		if (arg_mode == MODE_FRESH && l->tries < arg_retries) {
			unsigned long i = l->seed;
			unsigned tries = l->tries + 1;
			uint64_t start_ns = l->start_ns;

			w->retries++;
			drop(l);
			start_seed(w, l, i, tries, start_ns);
			if (l->fd >= 0)
				return false;
			/* Given up at once: the slot takes the next seed. */
			while (begin(w, l) && l->fd < 0)
				;
			return false;
		}
		w->lost++;
	} else {
		unsigned long k = atomic_fetch_add(&n_latency, 1);

		if (k < arg_count)
			latency_us[k] = (uint32_t)((now_ns() - l->start_ns) / 1000);
	}
	atomic_fetch_add(&done, 1);
	if (arg_mode == MODE_KEEPALIVE && fail < 0) {
		if (atomic_fetch_add(&started, 1) < arg_count) {
			l->start_ns = now_ns();
			l->deadline_ns = l->start_ns + (uint64_t)arg_timeout_s * 1000000000ULL;
			queue_get(l);
			return true;
		}
	}
	drop(l);
	if (arg_mode == MODE_FRESH)
		while (begin(w, l) && l->fd < 0)
			;
	else if (arg_mode == MODE_IDLE && l->step != STEP_IDLE)
		begin_next(w);
	return false;
}

/* A whole message for l; returns whether l goes on reading and writing. */
static bool on_msg(struct worker *w, struct link *l, const struct eb_msg *m)
{
	if (m->type == EB_MSG_ERROR)
		return finish(w, l, m->error.code == EB_ERR_BUSY ? FAIL_BUSY : FAIL_ERROR);
	if (l->step == STEP_WELCOME) {
		if (m->type != EB_MSG_WELCOME)
			return finish(w, l, FAIL_PROTOCOL);
		if (arg_mode == MODE_IDLE) {
			l->step = STEP_IDLE;
			w->up++;
			atomic_fetch_add(&welcomed, 1);
			watch(w, l, EPOLLIN, EPOLL_CTL_MOD);
			begin_next(w);
			return false;
		}
		queue_get(l);
		return true;
	}
	if (m->type == EB_MSG_EMPTY || m->type == EB_MSG_QUOTA)
		return finish(w, l, FAIL_EMPTY);
	if (m->type != EB_MSG_DATA || m->data.len * 8 != arg_bits)
		return finish(w, l, FAIL_PROTOCOL);
	keep_seed(w, m);
	if (l->ended) {
		l->step = STEP_END;
		return true;
	}
	return finish(w, l, -1);
}

static void pump(struct worker *w, struct link *l)
{
	for (;;) {
		int r;

		if (l->step == STEP_CONNECT) {
			int err = 0;
			socklen_t len = sizeof(err);

			if (getsockopt(l->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err != 0) {
				(void)finish(w, l, FAIL_CONNECT);
				return;
			}
			l->step = STEP_HANDSHAKE;
		}
		if (l->step == STEP_HANDSHAKE) {
			r = eb_conn_handshake(l->conn);
			if (r == -EAGAIN) {
				watch(w, l, eb_conn_wants_write(l->conn) ? EPOLLOUT : EPOLLIN,
				      EPOLL_CTL_MOD);
				return;
			}
			if (r < 0) {
				(void)finish(w, l, FAIL_HANDSHAKE);
				return;
			}
			struct eb_msg m = {
			    .type = EB_MSG_HELLO,
			    .hello = {.version = EB_PROTO_VERSION, .roles = EB_ROLE_SINK}};
			snprintf(m.hello.kind, sizeof(m.hello.kind), "bench storm");
			queue_msg(l, &m);
			l->step = STEP_WELCOME;
		}
		while (l->out_off < l->out_len) {
			ssize_t k =
			    eb_conn_write(l->conn, l->out + l->out_off, l->out_len - l->out_off);

			if (k == -EAGAIN) {
				watch(w, l, EPOLLOUT, EPOLL_CTL_MOD);
				return;
			}
			if (k < 0) {
				(void)finish(w, l, FAIL_CLOSED);
				return;
			}
			l->out_off += (size_t)k;
		}
		/* The GET is the session's last: close_notify after it, and the broker ends it. */
		if (l->step == STEP_DATA && arg_mode == MODE_FRESH && !arg_keep_open && !l->ended) {
			eb_conn_shutdown(l->conn);
			l->ended = true;
		}
		if (l->step == STEP_IDLE) {
			/* A held session only listens: anything the broker says ends it. */
			uint8_t sink[64];
			ssize_t k = eb_conn_read(l->conn, sink, sizeof(sink));

			if (k == -EAGAIN)
				return;
			w->up--;
			atomic_fetch_sub(&welcomed, 1);
			(void)finish(w, l, k == 0 ? FAIL_CLOSED : FAIL_ERROR);
			return;
		}
		ssize_t k = eb_conn_read(l->conn, l->in + l->in_len, sizeof(l->in) - l->in_len);

		if (k == -EAGAIN) {
			watch(w, l, EPOLLIN, EPOLL_CTL_MOD);
			return;
		}
		if (l->step == STEP_END && k <= 0) {
			(void)finish(w, l, -1); /* the broker's end, after the seed */
			return;
		}
		if (k <= 0) {
			(void)finish(w, l, FAIL_CLOSED);
			return;
		}
		l->in_len += (size_t)k;
		for (;;) {
			struct eb_frame f;
			struct eb_msg m;
			uint8_t data[64];
			size_t size;

			r = eb_frame_parse(l->in, l->in_len, &f, &size);
			if (r == -EAGAIN) {
				if (l->in_len == sizeof(l->in)) {
					(void)finish(w, l, FAIL_PROTOCOL);
					return;
				}
				break;
			}
			if (r < 0 || eb_msg_decode(&f, &m) < 0) {
				(void)finish(w, l, FAIL_PROTOCOL);
				return;
			}
			/* Only the type, a length, an error code and a seed's bytes are looked
			 * at: the bytes may go before the message is handled, once a seed's are
			 * copied. */
			if (m.type == EB_MSG_DATA && m.data.len <= sizeof(data)) {
				memcpy(data, m.data.data, m.data.len);
				m.data.data = data;
			}
			memmove(l->in, l->in + size, l->in_len - size);
			l->in_len -= size;
			if (!on_msg(w, l, &m))
				return;
		}
	}
}

static void expire(struct worker *w)
{
	uint64_t now = now_ns();

	for (unsigned i = 0; i < w->slots; i++) {
		struct link *l = &w->links[i];

		if (l->fd >= 0 && l->step != STEP_IDLE && now > l->deadline_ns)
			finish(w, l, FAIL_TIMEOUT);
	}
}

static void *run(void *userdata)
{
	struct worker *w = userdata;
	struct epoll_event evs[64];
	uint64_t last_expire = now_ns();

	for (unsigned i = 0; i < w->slots; i++)
		w->links[i].fd = -1;
	if (arg_mode == MODE_IDLE)
		for (unsigned i = 0; i < arg_concurrency / arg_threads + 1; i++)
			begin_next(w);
	else
		for (unsigned i = 0; i < w->slots; i++)
			while (begin(w, &w->links[i]) && w->links[i].fd < 0)
				;
	for (;;) {
		int n;

		if (atomic_load(&done) >= arg_count)
			break;
		if (arg_mode == MODE_IDLE &&
		    atomic_load(&welcomed) + atomic_load(&done) >= arg_count)
			break;
		n = epoll_wait(w->epfd, evs, 64, 100);
		for (int i = 0; i < n; i++)
			pump(w, evs[i].data.ptr);
		if (now_ns() - last_expire > 100000000ULL) {
			expire(w);
			last_expire = now_ns();
		}
		/* Slots whose seed failed at once begin anew here when others still remain. */
		if (arg_mode == MODE_FRESH)
			for (unsigned i = 0; n == 0 && i < w->slots; i++)
				if (w->links[i].fd < 0)
					while (begin(w, &w->links[i]) && w->links[i].fd < 0)
						;
	}
	return NULL;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static double pct(const uint32_t *v, unsigned long n, double p)
{
	unsigned long i;

	if (n == 0)
		return 0;
	i = (unsigned long)(p * (double)(n - 1) + 0.5);
	return v[i] / 1000.0;
}

static void help(void)
{
	printf("Usage: bench-storm-client --connect IP:PORT --users-file PATH [OPTIONS]\n\n"
	       "Many authenticated TLS sinks at once against eb-brokerd.\n\n"
	       "  -m, --mode MODE          fresh (default), keepalive or idle\n"
	       "  -n, --count N            seeds (fresh, keepalive) or sessions (idle); 1000\n"
	       "  -c, --concurrency C      connections at a time (default 100)\n"
	       "  -t, --threads T          client threads (default 2)\n"
	       "  -b, --bits BITS          bits a GET asks for (default 256)\n"
	       "  -T, --timeout SEC        per seed (default 30)\n"
	       "  -u, --users-file PATH    lines of \"NAME KEYFILE\", used in turn\n"
	       "  -r, --retries N          fresh: try a failed seed again, N times (default 0)\n"
	       "  -k, --keep-open          fresh: keep the session open after the GET, as clients\n"
	       "                           did before the broker ended one-shot sessions\n"
	       "  -B, --bind IP[,IP...]    connect from these addresses, in turn\n"
	       "  -s, --seeds-file PATH    write every seed delivered (--bits / 8 bytes each)\n"
	       "  -h, --help               show this help\n");
}

static int parse_addr(const char *text)
{
	char host[64];
	const char *colon = strrchr(text, ':');

	if (!colon || (size_t)(colon - text) >= sizeof(host))
		return -EINVAL;
	memcpy(host, text, (size_t)(colon - text));
	host[colon - text] = '\0';
	arg_addr.sin_family = AF_INET;
	arg_addr.sin_port = htons((uint16_t)strtoul(colon + 1, NULL, 10));
	return inet_pton(AF_INET, host, &arg_addr.sin_addr) == 1 ? 0 : -EINVAL;
}

static int parse_binds(const char *text)
{
	const char *p = text;

	while (*p) {
		const char *end = strchrnul(p, ',');
		char host[INET_ADDRSTRLEN];

		if ((size_t)(end - p) >= sizeof(host) || n_binds == MAX_BINDS)
			return -EINVAL;
		memcpy(host, p, (size_t)(end - p));
		host[end - p] = '\0';
		arg_binds[n_binds].sin_family = AF_INET;
		if (inet_pton(AF_INET, host, &arg_binds[n_binds].sin_addr) != 1)
			return -EINVAL;
		n_binds++;
		p = *end ? end + 1 : end;
	}
	return n_binds > 0 ? 0 : -EINVAL;
}

static int parse_argv(int argc, char *argv[])
{
	static const struct option options[] = {
	    {"connect", required_argument, NULL, 'a'},
	    {"mode", required_argument, NULL, 'm'},
	    {"count", required_argument, NULL, 'n'},
	    {"concurrency", required_argument, NULL, 'c'},
	    {"threads", required_argument, NULL, 't'},
	    {"bits", required_argument, NULL, 'b'},
	    {"timeout", required_argument, NULL, 'T'},
	    {"users-file", required_argument, NULL, 'u'},
	    {"retries", required_argument, NULL, 'r'},
	    {"keep-open", no_argument, NULL, 'k'},
	    {"bind", required_argument, NULL, 'B'},
	    {"seeds-file", required_argument, NULL, 's'},
	    {"help", no_argument, NULL, 'h'},
	    {},
	};
	int c;

	while ((c = getopt_long(argc, argv, "a:m:n:c:t:b:T:u:r:kB:s:h", options, NULL)) >= 0)
		switch (c) {
		case 'a':
			if (parse_addr(optarg) < 0) {
				fprintf(stderr, "Invalid address \"%s\": expected IPv4:PORT\n",
				        optarg);
				return -EINVAL;
			}
			break;
		case 'm':
			if (strcmp(optarg, "fresh") == 0)
				arg_mode = MODE_FRESH;
			else if (strcmp(optarg, "keepalive") == 0)
				arg_mode = MODE_KEEPALIVE;
			else if (strcmp(optarg, "idle") == 0)
				arg_mode = MODE_IDLE;
			else {
				fprintf(stderr, "Invalid mode \"%s\"\n", optarg);
				return -EINVAL;
			}
			break;
		case 'n':
			arg_count = strtoul(optarg, NULL, 10);
			break;
		case 'c':
			arg_concurrency = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 't':
			arg_threads = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'b':
			arg_bits = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'T':
			arg_timeout_s = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'u':
			arg_users_file = optarg;
			break;
		case 'r':
			arg_retries = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'k':
			arg_keep_open = true;
			break;
		case 'B':
			if (parse_binds(optarg) < 0) {
				fprintf(stderr, "Invalid --bind \"%s\": expected IPv4[,IPv4...]\n",
				        optarg);
				return -EINVAL;
			}
			break;
		case 's':
			arg_seeds_file = optarg;
			break;
		case 'h':
			help();
			return 0;
		default:
			return -EINVAL;
		}
	if (!arg_users_file || arg_addr.sin_family == 0 || arg_count == 0 || arg_concurrency == 0 ||
	    arg_threads == 0 || arg_bits == 0 || arg_bits % 8 != 0 || arg_bits > 8 * 64 ||
	    arg_count > 100000000UL) {
		fprintf(stderr, "Missing or invalid options; see --help\n");
		return -EINVAL;
	}
	if (arg_mode == MODE_IDLE)
		arg_concurrency =
		    (unsigned)(arg_concurrency < arg_count ? arg_concurrency : arg_count);
	if (arg_threads > arg_concurrency)
		arg_threads = arg_concurrency;
	return 1;
}

int main(int argc, char *argv[])
{
	struct worker *workers;
	struct rlimit rl;
	unsigned long n, total_fail = 0, total_retries = 0;
	uint64_t t0, t1;
	double secs;
	int r;

	r = parse_argv(argc, argv);
	if (r <= 0)
		return r < 0 ? 2 : 0;
	/* A broker that closes a connection (a limit, a reload, a stop) is a failure to count,
	 * not the end of the load. */
	signal(SIGPIPE, SIG_IGN);
	/* Every connection is an fd: take what the hard limit allows. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
	r = load_users();
	if (r < 0) {
		fprintf(stderr, "Failed to load users from %s: %s\n", arg_users_file, strerror(-r));
		return 2;
	}
	latency_us = calloc(arg_count, sizeof(*latency_us));
	workers = calloc(arg_threads, sizeof(*workers));
	if (!latency_us || !workers)
		return 1;

	t0 = now_ns();
	for (unsigned i = 0; i < arg_threads; i++) {
		struct worker *w = &workers[i];

		w->id = i;
		/* In idle mode C is how many are set up at a time; every session stays, so each
		 * worker needs a slot per session it will hold. */
		w->slots =
		    (arg_mode == MODE_IDLE ? (unsigned)arg_count : arg_concurrency) / arg_threads +
		    (i <
		     (arg_mode == MODE_IDLE ? (unsigned)arg_count : arg_concurrency) % arg_threads);
		w->links = calloc(w->slots, sizeof(*w->links));
		w->epfd = epoll_create1(EPOLL_CLOEXEC);
		if (!w->links || w->epfd < 0)
			return 1;
		if (pthread_create(&w->thread, NULL, run, w) != 0)
			return 1;
	}
	for (unsigned i = 0; i < arg_threads; i++)
		pthread_join(workers[i].thread, NULL);
	t1 = now_ns();
	secs = (double)(t1 - t0) / 1e9;

	n = atomic_load(&n_latency);
	if (n > arg_count)
		n = arg_count;
	for (unsigned i = 0; i < arg_threads; i++) {
		total_fail += workers[i].lost;
		total_retries += workers[i].retries;
	}
	qsort(latency_us, n, sizeof(*latency_us), cmp_u32);
	if (arg_mode == MODE_IDLE) {
		printf("ready sessions=%u failed=%lu setup_s=%.3f\n", atomic_load(&welcomed),
		       total_fail, secs);
		fflush(stdout);
		/* Hold every session until told to let go. */
		char c;
		while (read(STDIN_FILENO, &c, 1) > 0)
			;
	} else {
		printf("seeds=%lu failed=%lu seconds=%.3f seeds_per_s=%.1f p50_ms=%.2f "
		       "p90_ms=%.2f p99_ms=%.2f max_ms=%.2f",
		       n, total_fail, secs, (double)n / secs, pct(latency_us, n, 0.50),
		       pct(latency_us, n, 0.90), pct(latency_us, n, 0.99),
		       n ? latency_us[n - 1] / 1000.0 : 0.0);
	}
	for (int k = 0; k < _FAIL_MAX; k++) {
		uint64_t sum = 0;

		for (unsigned i = 0; i < arg_threads; i++)
			sum += workers[i].fails[k];
		printf(" fail_%s=%llu", fail_names[k], (unsigned long long)sum);
	}
	printf(" retries=%lu\n", total_retries);
	if (arg_seeds_file) {
		FILE *f = fopen(arg_seeds_file, "we");

		if (!f) {
			fprintf(stderr, "Failed to open %s: %s\n", arg_seeds_file, strerror(errno));
			return 1;
		}
		for (unsigned i = 0; i < arg_threads; i++)
			(void)fwrite(workers[i].seeds, arg_bits / 8, workers[i].n_seeds, f);
		if (fclose(f) != 0) {
			fprintf(stderr, "Failed to write %s: %s\n", arg_seeds_file,
			        strerror(errno));
			return 1;
		}
	}
	for (unsigned i = 0; i < arg_threads; i++) {
		for (unsigned j = 0; j < workers[i].slots; j++)
			drop(&workers[i].links[j]);
		free(workers[i].links);
		free(workers[i].seeds);
		close(workers[i].epfd);
	}
	for (unsigned i = 0; i < n_ctxs; i++)
		eb_tls_free(ctxs[i]);
	free(ctxs);
	free(workers);
	free(latency_us);
	return 0;
}
