/* SPDX-License-Identifier: MIT */
/* eb-source-egd: pulls from an EGD (Entropy Gathering Daemon) socket, such as ekeyd's for the
 * Simtec Entropy Key, and donates what it reads to a broker. */
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "io.h"
#include "log.h"
#include "proto.h"
#include "source.h"
#include "time-util.h"
#include "uri.h"

/* The EGD protocol (egd.pl; ekeyd's README.egd-protocol): a command byte, then its arguments;
 * multi-byte integers are big-endian, and one request reads at most 255 bytes. */
#define EGD_CMD_LEVEL         0x00 /* -> u32 bits available */
#define EGD_CMD_READ_NONBLOCK 0x01 /* u8 n -> u8 k (k <= n), then k bytes */
#define EGD_CMD_READ_BLOCK    0x02 /* u8 n -> exactly n bytes, no length */
#define EGD_READ_MAX          255u

/* The server's claim cannot be checked, and the protocol carries none: EGD output is whatever
 * the daemon behind it produced, conditioned. Half of what a byte can carry, as for the
 * stream devices; ekeyd itself tells the kernel 7 bits per byte for the Entropy Key. */
#define DEFAULT_H_MBITS 4000u

#define TIMEOUT_MS     10000
#define BACKOFF_MIN_MS 50u
#define BACKOFF_MAX_MS 2000u

struct egd {
	int fd;
	const char *address;
	bool nonblocking;
	unsigned backoff_ms;
};

static int io_wait(int fd, short events, int timeout_ms)
{
	struct pollfd p = {.fd = fd, .events = events};
	int r;

	do
		r = poll(&p, 1, timeout_ms);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return negative_errno();
	return r == 0 ? -ETIMEDOUT : 0;
}

/* Reads exactly len bytes; timeout_ms < 0 waits as long as the server takes (a blocking EGD
 * read is answered as entropy comes in). */
static int read_exact(int fd, uint8_t *buf, size_t len, int timeout_ms)
{
	while (len > 0) {
		ssize_t k;
		int r = io_wait(fd, POLLIN, timeout_ms);

		if (r < 0)
			return r;
		k = read(fd, buf, len);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return negative_errno();
		if (k == 0)
			return -ECONNRESET;
		buf += k;
		len -= (size_t)k;
	}
	return 0;
}

/* An EGD server's address: a unix socket's path, or a TCP host and port. */
struct egd_addr {
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)]; /* empty for TCP */
	struct eb_uri tcp;
};

/* ADDRESS: /PATH or unix:/PATH, or HOST:PORT or tcp://HOST:PORT ([V6]:PORT for IPv6). Parsed
 * apart from connecting, so that a malformed address is told from a failed connect(). */
static int egd_parse(const char *address, struct egd_addr *ret)
{
	struct egd_addr a = {.tcp.kind = EB_URI_TCP};
	unsigned long long port_number;
	const char *path = NULL;
	char *port;

	if (address[0] == '/')
		path = address;
	else if (strncmp(address, "unix:", 5) == 0)
		path = address + 5;
	if (path) {
		if (path[0] != '/' || strlen(path) >= sizeof(a.path))
			return -EINVAL;
		memcpy(a.path, path, strlen(path) + 1);
		*ret = a;
		return 0;
	}
	if (strncmp(address, "tcp://", 6) == 0)
		address += 6;
	if (strlen(address) >= sizeof(a.tcp.host))
		return -EINVAL;
	memcpy(a.tcp.host, address, strlen(address) + 1);
	port = strrchr(a.tcp.host, ':');
	if (!port || port == a.tcp.host || eb_cli_parse_u64(port + 1, 1, 65535, &port_number) < 0)
		return -EINVAL;
	*port = '\0';
	a.tcp.port = (uint16_t)port_number;
	if (a.tcp.host[0] == '[') {
		size_t n = strlen(a.tcp.host);

		if (n < 3 || a.tcp.host[n - 1] != ']')
			return -EINVAL;
		a.tcp.host[n - 1] = '\0';
		memmove(a.tcp.host, a.tcp.host + 1, n - 1);
	}
	*ret = a;
	return 0;
}

static int egd_connect(const struct egd_addr *a, int *ret_fd)
{
	_cleanup_close_ int fd = -EBADF;
	int one = 1, r;

	if (a->path[0]) {
		struct sockaddr_un sa = {.sun_family = AF_UNIX};

		memcpy(sa.sun_path, a->path, strlen(a->path));
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return negative_errno();
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
			return negative_errno();
		*ret_fd = TAKE_FD(fd);
		return 0;
	}
	/* The name's look-up and the connects within TIMEOUT_MS, as a client's to its broker:
	 * getaddrinfo() alone waits as long as resolv.conf lets it (15 s a name and more against a
	 * DNS server that does not answer), and a connect to a host that drops it, minutes. */
	r = eb_uri_connect(&a->tcp, TIMEOUT_MS, &fd);
	if (r < 0)
		return r;
	/* A server that vanished must not leave a blocking read waiting forever. */
	(void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	*ret_fd = TAKE_FD(fd);
	return 0;
}

static int egd_level(int fd, uint32_t *ret)
{
	uint8_t cmd = EGD_CMD_LEVEL, b[4];
	int r;

	r = eb_send_all(fd, &cmd, 1);
	if (r < 0)
		return r;
	r = read_exact(fd, b, sizeof(b), TIMEOUT_MS);
	if (r < 0)
		return r;
	*ret = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
	return 0;
}

static ssize_t sample(void *userdata, uint8_t *buf, size_t n)
{
	struct egd *e = userdata;
	uint8_t req[2];
	int r;

	n = MIN(n, (size_t)EGD_READ_MAX);
	req[1] = (uint8_t)n;
	if (!e->nonblocking) {
		/* 0x02: exactly n bytes come back, as the server has them. */
		req[0] = EGD_CMD_READ_BLOCK;
		r = eb_send_all(e->fd, req, sizeof(req));
		if (r >= 0)
			r = read_exact(e->fd, buf, n, -1);
		if (r < 0)
			return log_error_errno(r, "EGD read from %s failed: %m", e->address);
		return (ssize_t)n;
	}
	for (;;) {
		uint8_t k;

		/* 0x01: a count, at most what was asked, then that many bytes; 0 when the
		 * server has nothing, and then we back off rather than spin. */
		req[0] = EGD_CMD_READ_NONBLOCK;
		r = eb_send_all(e->fd, req, sizeof(req));
		if (r >= 0)
			r = read_exact(e->fd, &k, 1, TIMEOUT_MS);
		if (r >= 0 && k > n)
			return log_error_errno(EPROTO,
			                       "EGD server %s sent %u bytes for a request of %zu",
			                       e->address, k, n);
		if (r >= 0 && k > 0)
			r = read_exact(e->fd, buf, k, TIMEOUT_MS);
		if (r < 0)
			return log_error_errno(r, "EGD read from %s failed: %m", e->address);
		if (k > 0) {
			e->backoff_ms = BACKOFF_MIN_MS;
			return k;
		}
		(void)eb_sleep_ms(e->backoff_ms);
		e->backoff_ms = MIN(e->backoff_ms * 2, BACKOFF_MAX_MS);
	}
}

static void help(void)
{
	printf(
	    "Usage: eb-source-egd [OPTIONS] ADDRESS\n\n"
	    "Pulls from an EGD socket (ADDRESS: /PATH, unix:/PATH, HOST:PORT or tcp://HOST:PORT)\n"
	    "and donates it to a broker. Each byte is one 8-bit sample; SP 800-90B health tests\n"
	    "run on them.\n\n"
	    "      --min-entropy H   min-entropy to claim per byte, 0-8 (default 4)\n"
	    "      --nonblocking     read with EGD command 0x01, backing off when the server\n"
	    "                        has nothing (default: 0x02, the blocking read)\n" EB_CLI_SOURCE_HELP
		EB_CLI_CLIENT_HELP "\nSee eb-source-egd(1).\n");
}

enum { ARG_NONBLOCKING = EB_CLI_ARG_FIRST_PRIVATE };

static int parse_option(int c, const char *arg, void *userdata)
{
	struct egd *e = userdata;

	(void)arg;
	if (c != ARG_NONBLOCKING)
		return -2;
	e->nonblocking = true;
	return 0;
}

int main(int argc, char *argv[])
{
	static const struct option options[] = {
	    EB_CLI_CLIENT_OPTIONS,
	    EB_CLI_SOURCE_OPTIONS,
	    {"min-entropy", required_argument, NULL, EB_CLI_ARG_CREDIT},
	    {"nonblocking", no_argument, NULL, ARG_NONBLOCKING},
	    {},
	};
	static const struct eb_cli_program prog = {
	    .name = "eb-source-egd", .help = help, .options = options, .option = parse_option};
	struct eb_client_options o = {.roles = EB_ROLE_SOURCE};
	_cleanup_(eb_cli_source_params_done) struct eb_source_params p = {
	    .gate = {.bits = 8, .h_mbits = DEFAULT_H_MBITS, .cap_mbits_per_byte = 8000},
	    .dump_fd = -EBADF,
	    .quarantine_ms = 1000,
	};
	_cleanup_(eb_client_freep) struct eb_client *client = NULL;
	_cleanup_close_ int fd = -EBADF;
	struct egd e = {.fd = -EBADF, .backoff_ms = BACKOFF_MIN_MS};
	char kind[EB_KIND_MAX + 1], name[256];
	struct egd_addr addr;
	struct eb_source_stats st;
	uint32_t level;
	int r;

	log_setup(argv[0]);
	r = eb_cli_source_parse(argc, argv, &prog, &o, &p, &e);
	if (r != EB_CLI_CONTINUE)
		return r;
	if (optind + 1 != argc) {
		log_error("Expected one EGD ADDRESS (/PATH or HOST:PORT); see --help");
		return 2;
	}
	e.address = argv[optind];
	snprintf(kind, sizeof(kind), "egd %s", e.address);
	snprintf(name, sizeof(name), "egd %s", e.address);
	o.kind = kind;
	p.name = name;
	if (eb_cli_source_client_new(&o, &p, "byte", &client) < 0)
		return 2;
	r = egd_parse(e.address, &addr);
	if (r < 0) {
		log_error("Invalid EGD address \"%s\": expected /PATH, unix:/PATH or HOST:PORT",
		          e.address);
		return 2;
	}
	r = egd_connect(&addr, &fd);
	if (r == -EADDRNOTAVAIL && eb_uri_resolve_error()) {
		log_error("Failed to look up EGD server %s: %s", e.address, eb_uri_resolve_error());
		return 1;
	}
	if (r < 0) {
		log_error_errno(r, "Failed to connect to EGD server %s: %m", e.address);
		return 1;
	}
	e.fd = fd;
	/* Asking the level first proves the peer speaks EGD before anything is credited. */
	r = egd_level(fd, &level);
	if (r < 0) {
		log_error_errno(r, "EGD server %s did not answer the level query: %m", e.address);
		return 1;
	}
	log_info("EGD server %s has %" PRIu32 " bits available", e.address, level);

	r = eb_source_run(client, &p, sample, &e, &st);
	return eb_cli_source_report(r, &st, "from", e.address);
}
