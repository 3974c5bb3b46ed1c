/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "macro.h"
#include "uri.h"

/* Link seam (-Wl,--wrap=open64): a virtio-serial port exists only in a guest, so the port
 * "test.port" is a pty master here, which reports its far end the way a port reports its host
 * side: POLLHUP while no one holds the other end, writable once someone does. */
#define TEST_PORT "/dev/virtio-ports/test.port"
static int test_port_fd = -EBADF;

int __real_open64(const char *path, int flags, ...);
int __wrap_open64(const char *path, int flags, ...);
int __wrap_open64(const char *path, int flags, ...)
{
	va_list ap;
	mode_t mode;

	va_start(ap, flags);
	mode = (flags & O_CREAT) ? va_arg(ap, mode_t) : 0;
	va_end(ap);
	if (strcmp(path, TEST_PORT) == 0) {
		int fd;

		if (test_port_fd < 0) {
			errno = ENOENT;
			return -1;
		}
		fd = fcntl(test_port_fd, F_DUPFD_CLOEXEC, 3);
		if (fd >= 0 && (flags & O_NONBLOCK))
			(void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
		return fd;
	}
	return __real_open64(path, flags, mode);
}

static void expect_uri(const char *s, enum eb_uri_kind kind, const char *host_or_path,
                       uint16_t port, uint32_t cid, const char *canonical)
{
	struct eb_uri u;
	char buf[256];

	assert_int_equal(eb_uri_parse(s, &u), 0);
	assert_int_equal(u.kind, kind);
	switch (kind) {
	case EB_URI_TCP:
	case EB_URI_SRV:
		assert_string_equal(u.host, host_or_path);
		assert_int_equal(u.port, port);
		break;
	case EB_URI_UNIX:
	case EB_URI_UNIX_TLS:
	case EB_URI_VIRTIO:
		assert_string_equal(u.path, host_or_path);
		break;
	case EB_URI_VSOCK:
		assert_int_equal(u.cid, cid);
		assert_int_equal(u.port, port);
		break;
	case _EB_URI_KIND_MAX:
	case _EB_URI_KIND_INVALID:
		fail();
	}
	assert_string_equal(eb_uri_to_string(&u, buf, sizeof(buf)), canonical);

	/* The canonical form parses back to the same address. */
	{
		struct eb_uri v;
		assert_int_equal(eb_uri_parse(canonical, &v), 0);
		assert_memory_equal(&u, &v, sizeof(u));
	}
}

static void test_good(void **state)
{
	(void)state;
	expect_uri("tcp://broker.example.org", EB_URI_TCP, "broker.example.org", 55225, 0,
	           "tcp://broker.example.org:55225");
	expect_uri("tcp://broker.example.org:1", EB_URI_TCP, "broker.example.org", 1, 0,
	           "tcp://broker.example.org:1");
	expect_uri("tcp://127.0.0.1:65535", EB_URI_TCP, "127.0.0.1", 65535, 0,
	           "tcp://127.0.0.1:65535");
	expect_uri("tcp://localhost", EB_URI_TCP, "localhost", 55225, 0, "tcp://localhost:55225");
	expect_uri("tcp://[::1]:55225", EB_URI_TCP, "::1", 55225, 0, "tcp://[::1]:55225");
	expect_uri("tcp://[::]", EB_URI_TCP, "::", 55225, 0, "tcp://[::]:55225");
	expect_uri("tcp://[2001:db8::42]:8080", EB_URI_TCP, "2001:db8::42", 8080, 0,
	           "tcp://[2001:db8::42]:8080");
	expect_uri("tcp://[fe80::1%eth0]:7", EB_URI_TCP, "fe80::1%eth0", 7, 0,
	           "tcp://[fe80::1%eth0]:7");
	expect_uri("tcp://[::ffff:192.0.2.1]", EB_URI_TCP, "::ffff:192.0.2.1", 55225, 0,
	           "tcp://[::ffff:192.0.2.1]:55225");
	expect_uri("tcp://host:00080", EB_URI_TCP, "host", 80, 0, "tcp://host:80");

	expect_uri("unix:/run/entropy-broker/broker.sock", EB_URI_UNIX,
	           "/run/entropy-broker/broker.sock", 0, 0, "unix:/run/entropy-broker/broker.sock");
	expect_uri("unix+tls:/run/vmm/vsock_55225", EB_URI_UNIX_TLS, "/run/vmm/vsock_55225", 0, 0,
	           "unix+tls:/run/vmm/vsock_55225");

	expect_uri("vsock://2", EB_URI_VSOCK, NULL, 55225, 2, "vsock://2:55225");
	expect_uri("vsock://3:1234", EB_URI_VSOCK, NULL, 1234, 3, "vsock://3:1234");
	expect_uri("vsock://4294967294:9", EB_URI_VSOCK, NULL, 9, 4294967294u,
	           "vsock://4294967294:9");
	expect_uri("vsock://any", EB_URI_VSOCK, NULL, 55225, UINT32_MAX, "vsock://any:55225");
	expect_uri("vsock://4294967295:1", EB_URI_VSOCK, NULL, 1, UINT32_MAX, "vsock://any:1");

	expect_uri("virtio:org.entropy-broker.seed.0", EB_URI_VIRTIO,
	           "/dev/virtio-ports/org.entropy-broker.seed.0", 0, 0,
	           "virtio:org.entropy-broker.seed.0");
	expect_uri("virtio:x", EB_URI_VIRTIO, "/dev/virtio-ports/x", 0, 0, "virtio:x");

	expect_uri("srv:example.org", EB_URI_SRV, "example.org", 0, 0, "srv:example.org");
	expect_uri("srv:fleet.test.", EB_URI_SRV, "fleet.test", 0, 0, "srv:fleet.test");
	expect_uri("srv:x", EB_URI_SRV, "x", 0, 0, "srv:x");
}

static void test_virtio_name_length(void **state)
{
	char s[160];
	struct eb_uri u;

	(void)state;
	/* "/dev/virtio-ports/" (18) and the name share sun_path's 108 bytes with the NUL. */
	memcpy(s, "virtio:", 7);
	memset(s + 7, 'p', 89);
	s[7 + 89] = '\0';
	assert_int_equal(eb_uri_parse(s, &u), 0);
	assert_int_equal(strlen(u.path), 107);
	s[7 + 89] = 'p';
	s[7 + 90] = '\0';
	assert_int_equal(eb_uri_parse(s, &u), -EINVAL);
}

static void test_unix_path_length(void **state)
{
	char s[sizeof(((struct sockaddr_un *)0)->sun_path) + 16];
	struct eb_uri u;

	(void)state;
	/* sun_path holds 107 characters and the terminating NUL. */
	memcpy(s, "unix:/", 6);
	memset(s + 6, 'a', 106);
	s[6 + 106] = '\0';
	assert_int_equal(eb_uri_parse(s, &u), 0);
	assert_int_equal(strlen(u.path), 107);
	s[6 + 106] = 'a';
	s[6 + 107] = '\0';
	assert_int_equal(eb_uri_parse(s, &u), -EINVAL);
}

static void test_bad(void **state)
{
	static const char *const bad[] = {
	    "",
	    "tcp",
	    "tcp:",
	    "tcp:/",
	    "tcp://",
	    "tcp://:55225",
	    "tcp://host:",
	    "tcp://host:0",
	    "tcp://host:65536",
	    "tcp://host:99999999999999999999",
	    "tcp://host:-1",
	    "tcp://host:+80",
	    "tcp://host: 80",
	    "tcp://host:80 ",
	    "tcp://host:80x",
	    "tcp://host:0x50",
	    "tcp://host:80/",
	    "tcp://host/path",
	    "tcp://host:80:81",
	    "tcp://user@host",
	    "tcp:// host",
	    "tcp://host name",
	    "tcp://::1",
	    "tcp://::1:55225",
	    "tcp://[::1",
	    "tcp://[::1]x",
	    "tcp://[::1]:",
	    "tcp://[::1]:0",
	    "tcp://[]",
	    "tcp://[]:80",
	    "tcp://[127.0.0.1]",
	    "tcp://[host]",
	    "tcp://[::1%]",
	    "tcp://[::1%a b]",
	    "tcp://[[::1]]",
	    "TCP://host",
	    "http://host",
	    "tcp:host",
	    "unix:",
	    "unix:relative/path",
	    "unix:@abstract",
	    "unix+tls:",
	    "unix+tls:relative",
	    "unix+tcp:/x",
	    "unixx:/x",
	    "vsock://",
	    "vsock://:5",
	    "vsock://-1",
	    "vsock://+2",
	    "vsock://2:",
	    "vsock://2:0",
	    "vsock://2:65536",
	    "vsock://4294967296",
	    "vsock://2x",
	    "vsock://2:5x",
	    "vsock://0x2",
	    "vsock://host",
	    "vsock://anyx",
	    "vsock:2",
	    " tcp://host",
	    "virtio:",
	    "virtio:.",
	    "virtio:..",
	    "virtio:.hidden",
	    "virtio:../../dev/sda",
	    "virtio:a/b",
	    "virtio:/dev/virtio-ports/x",
	    "virtio:a b",
	    "virtio:a:1",
	    "virtio://x",
	    "VIRTIO:x",
	    "srv:",
	    "srv:.",
	    "srv:.example.org",
	    "srv:example..org",
	    "srv:example.org:55225",
	    "srv://example.org",
	    "srv:exa mple.org",
	    "srv:a.0123456789012345678901234567890123456789012345678901234567890123.org",
	    "SRV:example.org",
	};
	struct eb_uri u;

	(void)state;
	memset(&u, 0x5a, sizeof(u));
	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		if (eb_uri_parse(bad[i], &u) != -EINVAL)
			fail_msg("accepted \"%s\"", bad[i]);
		for (size_t j = 0; j < sizeof(u); j++) /* untouched on failure */
			assert_int_equal(((uint8_t *)&u)[j], 0x5a);
	}
	assert_int_equal(eb_uri_parse(NULL, &u), -EINVAL);

	{
		char host[300] = "tcp://";
		memset(host + 6, 'h', 260);
		host[266] = '\0';
		assert_int_equal(eb_uri_parse(host, &u), -EINVAL);
		host[6 + 255] = '\0';
		assert_int_equal(eb_uri_parse(host, &u), 0);
	}
	{
		/* _entropy-broker._tcp.NAME must fit in a DNS name's 253 characters. */
		char name[300] = "srv:";
		for (size_t i = 0; i < 233; i++)
			name[4 + i] = i % 8 == 7 ? '.' : 'h';
		name[4 + 233] = '\0';
		assert_int_equal(eb_uri_parse(name, &u), -EINVAL);
		name[4 + 232] = '\0';
		assert_int_equal(eb_uri_parse(name, &u), 0);
	}
}

static void test_is_tls(void **state)
{
	struct eb_uri u;

	(void)state;
	assert_int_equal(eb_uri_parse("tcp://h", &u), 0);
	assert_int_equal(eb_uri_is_tls(&u), 1);
	assert_int_equal(eb_uri_parse("vsock://2", &u), 0);
	assert_int_equal(eb_uri_is_tls(&u), 1);
	assert_int_equal(eb_uri_parse("unix+tls:/x", &u), 0);
	assert_int_equal(eb_uri_is_tls(&u), 1);
	assert_int_equal(eb_uri_parse("virtio:org.entropy-broker.seed.0", &u), 0);
	assert_int_equal(eb_uri_is_tls(&u), 1);
	assert_int_equal(eb_uri_parse("srv:example.org", &u), 0);
	assert_int_equal(eb_uri_is_tls(&u), 1);
	assert_int_equal(eb_uri_parse("unix:/x", &u), 0);
	assert_int_equal(eb_uri_is_tls(&u), 0);
}

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void test_virtio(void **state)
{
	_cleanup_close_ int master = -EBADF, far = -EBADF, fd = -EBADF;
	struct eb_uri u;
	int64_t t0;
	char c = 0;

	(void)state;
	assert_int_equal(eb_uri_parse("virtio:test.port", &u), 0);
	assert_string_equal(u.path, TEST_PORT);

	/* A guest without the port. */
	assert_int_equal(eb_uri_connect(&u, 1000, &fd), -ENOENT);
	assert_int_equal(fd, -EBADF);
	/* A broker does not listen on a guest's port. */
	assert_int_equal(eb_uri_listen(&u, &fd), -EOPNOTSUPP);

	/* The port is there, its host side is not: POLLHUP for the whole timeout, then a clear
	 * error, not a descriptor that would spin in poll(). */
	master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	assert_true(master >= 0);
	assert_int_equal(grantpt(master), 0);
	assert_int_equal(unlockpt(master), 0);
	far = open(ptsname(master), O_RDWR | O_NOCTTY | O_CLOEXEC);
	assert_true(far >= 0);
	far = safe_close(far);
	test_port_fd = master;
	t0 = mono_ms();
	assert_int_equal(eb_uri_connect(&u, 300, &fd), -ENOTCONN);
	assert_true(mono_ms() - t0 >= 300);
	assert_true(mono_ms() - t0 < 3000);
	assert_int_equal(fd, -EBADF);

	/* The host side connects: a blocking, close-on-exec descriptor that carries bytes. */
	far = open(ptsname(master), O_RDWR | O_NOCTTY | O_CLOEXEC);
	assert_true(far >= 0);
	assert_int_equal(eb_uri_connect(&u, 1000, &fd), 0);
	assert_false(fcntl(fd, F_GETFL) & O_NONBLOCK);
	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	assert_int_equal(write(far, "y\n", 2), 2);
	assert_int_equal(read(fd, &c, 1), 1);
	assert_int_equal(c, 'y');
	test_port_fd = -EBADF;
}

/* Accepts one connection on lfd and checks that bytes cross both ways. */
static void check_pair(int lfd, int cfd)
{
	_cleanup_close_ int afd = -EBADF;
	char c = 0;
	int flags;

	/* The listener is non-blocking and close-on-exec; the connected socket is blocking. */
	flags = fcntl(lfd, F_GETFL);
	assert_true(flags & O_NONBLOCK);
	assert_true(fcntl(lfd, F_GETFD) & FD_CLOEXEC);
	flags = fcntl(cfd, F_GETFL);
	assert_false(flags & O_NONBLOCK);
	assert_true(fcntl(cfd, F_GETFD) & FD_CLOEXEC);

	afd = accept(lfd, NULL, NULL);
	assert_true(afd >= 0);
	assert_int_equal(write(cfd, "x", 1), 1);
	assert_int_equal(read(afd, &c, 1), 1);
	assert_int_equal(c, 'x');
	assert_int_equal(write(afd, "y", 1), 1);
	assert_int_equal(read(cfd, &c, 1), 1);
	assert_int_equal(c, 'y');
}

static void test_unix(void **state)
{
	char dir[] = "/tmp/test-uri.XXXXXX", s[192], path[128];
	_cleanup_close_ int lfd = -EBADF, cfd = -EBADF, lfd2 = -EBADF;
	struct eb_uri u;
	struct stat st;
	int fd;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/broker.sock", dir);
	snprintf(s, sizeof(s), "unix:%s", path);
	assert_int_equal(eb_uri_parse(s, &u), 0);

	/* Nothing listens yet. */
	assert_int_equal(eb_uri_connect(&u, 1000, &cfd), -ENOENT);

	assert_int_equal(eb_uri_listen(&u, &lfd), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_true(S_ISSOCK(st.st_mode));

	/* A socket someone listens on is not taken over. The probe that found out is a connection
	 * that closes at once, which the listener sees as such. */
	assert_int_equal(eb_uri_listen(&u, &lfd2), -EADDRINUSE);
	{
		_cleanup_close_ int probe = accept(lfd, NULL, NULL);
		char c;
		assert_true(probe >= 0);
		assert_int_equal(read(probe, &c, 1), 0);
	}

	assert_int_equal(eb_uri_connect(&u, 1000, &cfd), 0);
	check_pair(lfd, cfd);
	cfd = safe_close(cfd);

	/* A stale socket (its listener gone) is replaced. */
	lfd = safe_close(lfd);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(eb_uri_connect(&u, 1000, &cfd), -ECONNREFUSED);
	assert_int_equal(eb_uri_listen(&u, &lfd), 0);
	assert_int_equal(eb_uri_connect(&u, 1000, &cfd), 0);
	check_pair(lfd, cfd);
	lfd = safe_close(lfd);
	cfd = safe_close(cfd);

	/* A file that is not a socket is never unlinked. */
	assert_int_equal(unlink(path), 0);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(eb_uri_listen(&u, &lfd), -EEXIST);
	assert_int_equal(stat(path, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(unlink(path), 0);

	/* unix+tls: is the same socket underneath. */
	snprintf(s, sizeof(s), "unix+tls:%s", path);
	assert_int_equal(eb_uri_parse(s, &u), 0);
	assert_int_equal(eb_uri_listen(&u, &lfd), 0);
	assert_int_equal(eb_uri_connect(&u, -1, &cfd), 0);
	check_pair(lfd, cfd);

	assert_int_equal(unlink(path), 0);
	assert_int_equal(rmdir(dir), 0);
}

/* A port nothing listens on, kept for the test while *ret_fd is open: a socket bound to it with
 * SO_REUSEADDR that never listens. eb_uri_listen() (SO_REUSEADDR too) may listen there; no other
 * test running beside this one can take it, as it could a port read back and released. */
static uint16_t reserve_port(int *ret_fd)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	assert_true(fd >= 0);
	assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)), 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	*ret_fd = fd;
	return ntohs(sa.sin_port);
}

static uint16_t bound_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	assert_int_equal(getsockname(fd, (struct sockaddr *)&ss, &len), 0);
	if (ss.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

static void test_tcp(void **state)
{
	_cleanup_close_ int lfd = -EBADF, cfd = -EBADF, held = -EBADF;
	struct eb_uri u, c;
	char s[64];
	int one = 0;
	socklen_t len = sizeof(one);
	uint16_t port = reserve_port(&held);

	(void)state;
	snprintf(s, sizeof(s), "tcp://127.0.0.1:%u", (unsigned)port);
	assert_int_equal(eb_uri_parse(s, &u), 0);
	assert_int_equal(eb_uri_connect(&u, 1000, &cfd), -ECONNREFUSED);

	assert_int_equal(eb_uri_listen(&u, &lfd), 0);
	assert_int_equal(bound_port(lfd), port);
	assert_int_equal(getsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, &len), 0);
	assert_int_equal(one, 1);

	/* By name too: "localhost" may resolve to ::1 first, which must fall through to 127.0.0.1.
	 */
	snprintf(s, sizeof(s), "tcp://localhost:%u", (unsigned)port);
	assert_int_equal(eb_uri_parse(s, &c), 0);
	assert_int_equal(eb_uri_connect(&c, 2000, &cfd), 0);
	check_pair(lfd, cfd);
	cfd = safe_close(cfd);
	lfd = safe_close(lfd);

	/* Port 0 (only reachable by building the struct) lets the kernel choose. */
	u.port = 0;
	assert_int_equal(eb_uri_listen(&u, &lfd), 0);
	u.port = bound_port(lfd);
	assert_true(u.port > 0);
	assert_int_equal(eb_uri_connect(&u, 1000, &cfd), 0);
	check_pair(lfd, cfd);
}

static void test_tcp_any(void **state)
{
	_cleanup_close_ int lfd = -EBADF, cfd = -EBADF, fd6 = -EBADF;
	struct eb_uri u, c;
	char s[64];
	int v6only = 1, r;
	socklen_t len = sizeof(v6only);

	(void)state;
	/* Without IPv6 in this sandbox there is nothing to test. */
	fd6 = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd6 < 0)
		skip();

	/* The kernel chooses the port (0, only reachable by building the struct): one free on every
	 * address of both families. A port reserved on 127.0.0.1 alone, as test_tcp does, may be in
	 * use on ::1 or another address by then, and [::] covers them all (EADDRINUSE on a loaded
	 * machine). */
	assert_int_equal(eb_uri_parse("tcp://[::]", &u), 0);
	u.port = 0;
	r = eb_uri_listen(&u, &lfd);
	if (r == -EADDRNOTAVAIL)
		skip();
	assert_int_equal(r, 0);
	u.port = bound_port(lfd);
	assert_true(u.port > 0);
	assert_int_equal(getsockopt(lfd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, &len), 0);
	assert_int_equal(v6only, 0);

	/* [::] takes IPv4 connections too. */
	snprintf(s, sizeof(s), "tcp://127.0.0.1:%u", (unsigned)u.port);
	assert_int_equal(eb_uri_parse(s, &c), 0);
	assert_int_equal(eb_uri_connect(&c, 1000, &cfd), 0);
	check_pair(lfd, cfd);
}

static void test_connect_errors(void **state)
{
	struct eb_uri u;
	int fd = -EBADF;

	(void)state;
	assert_int_equal(eb_uri_parse("tcp://no-such-host.invalid:1", &u), 0);
	/* A resolver failure is one, in the resolver's words, not "No route to host". */
	assert_int_equal(eb_uri_connect(&u, 1000, &fd), -EADDRNOTAVAIL);
	assert_non_null(eb_uri_resolve_error());
	assert_int_equal(fd, -EBADF); /* untouched on failure */
	/* A later look-up that succeeds clears it. */
	assert_int_equal(eb_uri_parse("tcp://127.0.0.1:1", &u), 0);
	assert_true(eb_uri_connect(&u, 1000, &fd) < 0);
	assert_null(eb_uri_resolve_error());

	u.kind = _EB_URI_KIND_INVALID;
	assert_int_equal(eb_uri_connect(&u, 1000, &fd), -EINVAL);
	assert_int_equal(eb_uri_listen(&u, &fd), -EINVAL);
	assert_int_equal(eb_uri_is_tls(&u), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_good),
	    cmocka_unit_test(test_unix_path_length),
	    cmocka_unit_test(test_virtio_name_length),
	    cmocka_unit_test(test_virtio),
	    cmocka_unit_test(test_bad),
	    cmocka_unit_test(test_is_tls),
	    cmocka_unit_test(test_unix),
	    cmocka_unit_test(test_tcp),
	    cmocka_unit_test(test_tcp_any),
	    cmocka_unit_test(test_connect_errors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
