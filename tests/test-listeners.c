/* SPDX-License-Identifier: MIT */
/* Tests for shared/listeners.c: the sockets systemd passes (named, made non-blocking, refused when
 * not listening or too many), and accept() running out of descriptors: the listeners rest, the
 * pause doubles while it goes on, and the first connection taken again resets it. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>
#include <systemd/sd-daemon.h>

#include "listeners.h"
#include "macro.h"

/* Binds s to an abstract address the kernel picks: bind() with the family alone. */
static void autobind(int s)
{
	static const struct sockaddr_un sa = {.sun_family = AF_UNIX};

	assert_int_equal(bind(s, (const struct sockaddr *)&sa, sizeof(sa_family_t)), 0);
}

/* Puts a listening (or, when !listening, a merely bound) unix socket at fd. */
static void fake_fd(int fd, bool listening)
{
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(s >= 0);
	autobind(s);
	if (listening)
		assert_int_equal(listen(s, 8), 0);
	if (s != fd) {
		assert_int_equal(dup2(s, fd), fd);
		close(s);
	}
}

/* Says in the environment that systemd passed n fds from SD_LISTEN_FDS_START, named names. */
static void fake_env(unsigned n, const char *names)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%d", (int)getpid());
	setenv("LISTEN_PID", buf, 1);
	snprintf(buf, sizeof(buf), "%u", n);
	setenv("LISTEN_FDS", buf, 1);
	setenv("LISTEN_FDNAMES", names, 1);
}

static void test_not_activated(void **state)
{
	struct eb_listeners ls = {};

	(void)state;
	unsetenv("LISTEN_FDS");
	assert_int_equal(eb_listeners_take_fds(&ls, 4), 0);
	assert_int_equal(ls.n, 0);
	assert_false(ls.socket_activated);
	eb_listeners_done(&ls);
}

static void test_take_fds(void **state)
{
	struct eb_listeners ls = {};
	int r;

	(void)state;
	fake_fd(SD_LISTEN_FDS_START, true);
	fake_fd(SD_LISTEN_FDS_START + 1, true);
	fake_env(2, "tcp:unix");
	r = eb_listeners_take_fds(&ls, 4);
	assert_int_equal(r, 2);
	assert_true(ls.socket_activated);
	assert_int_equal(ls.n, 2);
	assert_string_equal(ls.v[0].name, "tcp");
	assert_string_equal(ls.v[1].name, "unix");
	assert_int_equal(ls.v[1].fd, SD_LISTEN_FDS_START + 1);
	/* Batches of accept() need them non-blocking; systemd hands them over blocking. */
	assert_true(fcntl(ls.v[0].fd, F_GETFL) & O_NONBLOCK);
	/* The environment is consumed: a child would not take them again. */
	assert_null(getenv("LISTEN_FDS"));
	eb_listeners_done(&ls);
	assert_int_equal(ls.n, 0);
	assert_int_equal(fcntl(SD_LISTEN_FDS_START, F_GETFD), -1);
}

static void test_refusals(void **state)
{
	struct eb_listeners ls = {};

	(void)state;
	fake_fd(SD_LISTEN_FDS_START, true);
	fake_fd(SD_LISTEN_FDS_START + 1, false);
	fake_env(2, "good:bad");
	assert_int_equal(eb_listeners_take_fds(&ls, 4), -EBADF);
	assert_non_null(strstr(ls.error, "(\"bad\") passed by systemd is not a listening"));
	eb_listeners_done(&ls);
	close(SD_LISTEN_FDS_START + 1);

	fake_fd(SD_LISTEN_FDS_START, true);
	fake_fd(SD_LISTEN_FDS_START + 1, true);
	fake_env(2, "a:b");
	assert_int_equal(eb_listeners_take_fds(&ls, 1), -E2BIG);
	assert_string_equal(ls.error, "systemd passed 2 sockets; at most 1");
	eb_listeners_done(&ls);
	close(SD_LISTEN_FDS_START);
	close(SD_LISTEN_FDS_START + 1);
}

/* The seam: with fail_enable set, turning a listener on fails as sd-event does when epoll_ctl()
 * has no memory; everything else goes to sd-event. */
static bool fail_enable;

int __real_sd_event_source_set_enabled(sd_event_source *s, int enabled);
int __wrap_sd_event_source_set_enabled(sd_event_source *s, int enabled);
int __wrap_sd_event_source_set_enabled(sd_event_source *s, int enabled)
{
	if (fail_enable && enabled == SD_EVENT_ON)
		return -ENOMEM;
	return __real_sd_event_source_set_enabled(s, enabled);
}

struct seen {
	unsigned accepted, errors;
	int error;
	uint64_t pause_usec;
};

static void on_accept(struct eb_listener *l, int fd, const struct sockaddr *peer,
                      socklen_t peer_len, void *userdata)
{
	struct seen *seen = userdata;

	(void)l, (void)peer, (void)peer_len;
	seen->accepted++;
	close(fd);
}

static void on_error(struct eb_listener *l, int error, uint64_t pause_usec, void *userdata)
{
	struct seen *seen = userdata;

	(void)l;
	seen->errors++;
	seen->error = error;
	seen->pause_usec = pause_usec;
}

static int connect_to(int listener)
{
	struct sockaddr_un sa;
	socklen_t len = sizeof(sa);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(getsockname(listener, (struct sockaddr *)&sa, &len), 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, len), 0);
	return fd;
}

/* One listening unix socket, watched on a new event loop; returns its fd. */
static int start_one(struct eb_listeners *ls, sd_event **e, struct seen *seen)
{
	int fd;

	assert_int_equal(sd_event_new(e), 0);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	autobind(fd);
	assert_int_equal(listen(fd, 8), 0);
	assert_int_equal(eb_listeners_add(ls, fd, "test", NULL), 0);
	assert_int_equal(eb_listeners_start(ls, *e, on_accept, on_error, seen), 0);
	return fd;
}

/* Leaves no descriptor for accept(); *saved is the limit to put back. The lowest free descriptor
 * is the next one accept() would take: a limit at it leaves none. */
static void no_fds_left(struct rlimit *saved)
{
	struct rlimit tight;
	int probe;

	assert_int_equal(getrlimit(RLIMIT_NOFILE, saved), 0);
	probe = dup(0);
	assert_true(probe >= 0);
	close(probe);
	tight = *saved;
	tight.rlim_cur = (rlim_t)probe;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &tight), 0);
}

static void test_backoff(void **state)
{
	struct eb_listeners ls = {};
	struct seen seen = {};
	struct rlimit saved;
	sd_event *e = NULL;
	int fd, c1, c2, c3, enabled;

	(void)state;
	fd = start_one(&ls, &e, &seen);

	c1 = connect_to(fd);
	assert_true(sd_event_run(e, 1000000) > 0);
	assert_int_equal(seen.accepted, 1);

	/* No descriptor left for accept(): EMFILE, and the listener rests 100 ms. */
	c2 = connect_to(fd);
	c3 = connect_to(fd);
	no_fds_left(&saved);
	assert_true(sd_event_run(e, 1000000) > 0);
	assert_int_equal(seen.errors, 1);
	assert_int_equal(seen.error, -EMFILE);
	assert_true(seen.pause_usec == EB_ACCEPT_BACKOFF_MIN_USEC);
	assert_int_equal(sd_event_source_get_enabled(ls.v[0].src, &enabled), 0);
	assert_int_equal(enabled, SD_EVENT_OFF);

	/* The timer turns it on again; still no descriptor: the pause doubles. */
	assert_true(sd_event_run(e, 1000000) > 0); /* the timer */
	assert_true(sd_event_run(e, 1000000) > 0); /* the accept that fails */
	assert_int_equal(seen.errors, 2);
	assert_true(seen.pause_usec == 2 * EB_ACCEPT_BACKOFF_MIN_USEC);

	/* Descriptors are back: both waiting peers are taken, and the next failure starts the
	 * back-off from its floor again. */
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &saved), 0);
	assert_true(sd_event_run(e, 1000000) > 0); /* the timer */
	assert_true(sd_event_run(e, 1000000) > 0); /* the accepts */
	assert_int_equal(seen.accepted, 3);
	assert_true(ls.backoff_usec == 0);
	assert_int_equal(seen.errors, 2);

	eb_listeners_done(&ls);
	assert_null(ls.backoff_timer);
	close(c1);
	close(c2);
	close(c3);
	sd_event_unref(e);
}

/* A listener that cannot be turned on again after a pause is not left off in silence: the owner
 * hears of it, the listeners rest again, and the next timer tries again. */
static void test_reenable_fails(void **state)
{
	struct eb_listeners ls = {};
	struct seen seen = {};
	struct rlimit saved;
	sd_event *e = NULL;
	int fd, c1, enabled;

	(void)state;
	fd = start_one(&ls, &e, &seen);

	/* A pause, as in test_backoff. */
	c1 = connect_to(fd);
	no_fds_left(&saved);
	assert_true(sd_event_run(e, 1000000) > 0);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &saved), 0);
	assert_int_equal(seen.errors, 1);
	assert_int_equal(seen.error, -EMFILE);

	/* The timer cannot turn the listener on: said, and another, longer rest. */
	fail_enable = true;
	assert_true(sd_event_run(e, 1000000) > 0);
	fail_enable = false;
	assert_int_equal(seen.errors, 2);
	assert_int_equal(seen.error, -ENOMEM);
	assert_true(seen.pause_usec == 2 * EB_ACCEPT_BACKOFF_MIN_USEC);
	assert_int_equal(sd_event_source_get_enabled(ls.v[0].src, &enabled), 0);
	assert_int_equal(enabled, SD_EVENT_OFF);
	assert_int_equal(seen.accepted, 0);

	/* The next timer succeeds, and the waiting peer is taken. */
	assert_true(sd_event_run(e, 1000000) > 0); /* the timer */
	assert_true(sd_event_run(e, 1000000) > 0); /* the accept */
	assert_int_equal(seen.accepted, 1);
	assert_int_equal(seen.errors, 2);

	eb_listeners_done(&ls);
	close(c1);
	sd_event_unref(e);
}

struct opts_seen {
	int nodelay, keepalive, idle, intvl, cnt;
	struct sockaddr_storage peer;
	socklen_t peer_len;
};

static int get_int(int fd, int level, int name)
{
	int v = -1;
	socklen_t l = sizeof(v);

	assert_int_equal(getsockopt(fd, level, name, &v, &l), 0);
	return v;
}

static void on_accept_opts(struct eb_listener *l, int fd, const struct sockaddr *peer,
                           socklen_t peer_len, void *userdata)
{
	struct opts_seen *o = userdata;

	(void)l;
	assert_true(peer_len <= sizeof(o->peer));
	memcpy(&o->peer, peer, peer_len);
	o->peer_len = peer_len;
	o->nodelay = get_int(fd, IPPROTO_TCP, TCP_NODELAY);
	o->keepalive = get_int(fd, SOL_SOCKET, SO_KEEPALIVE);
	o->idle = get_int(fd, IPPROTO_TCP, TCP_KEEPIDLE);
	o->intvl = get_int(fd, IPPROTO_TCP, TCP_KEEPINTVL);
	o->cnt = get_int(fd, IPPROTO_TCP, TCP_KEEPCNT);
	close(fd);
}

/* A TCP connection accepted from a listener has no Nagle and keeps alive (listeners.c sets both
 * on the listener once, and the broker no longer sets them per connection), and comes with its
 * peer's address from accept4(), which the broker takes instead of calling getpeername(). */
static void test_tcp_options(void **state)
{
	struct eb_listeners ls = {};
	struct opts_seen o = {-1, -1, -1, -1, -1};
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);
	sd_event *e = NULL;
	int fd, c;

	(void)state;
	assert_int_equal(sd_event_new(&e), 0);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, 8), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	assert_int_equal(eb_listeners_add(&ls, fd, "tcp", NULL), 0);
	assert_int_equal(eb_listeners_start(&ls, e, on_accept_opts, on_error, &o), 0);

	c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(c >= 0);
	assert_int_equal(connect(c, (struct sockaddr *)&sa, len), 0);
	assert_true(sd_event_run(e, 5000000) > 0);
	assert_int_equal(o.nodelay, 1);
	assert_int_equal(o.keepalive, 1);
	assert_int_equal(o.idle, 120);
	assert_int_equal(o.intvl, 30);
	assert_int_equal(o.cnt, 4);
	{
		struct sockaddr_in mine;
		socklen_t mine_len = sizeof(mine);
		const struct sockaddr_in *got = (const struct sockaddr_in *)&o.peer;

		assert_int_equal(getsockname(c, (struct sockaddr *)&mine, &mine_len), 0);
		assert_int_equal(o.peer_len, sizeof(struct sockaddr_in));
		assert_int_equal(got->sin_family, AF_INET);
		assert_int_equal(got->sin_port, mine.sin_port);
		assert_int_equal(got->sin_addr.s_addr, mine.sin_addr.s_addr);
	}

	eb_listeners_done(&ls);
	close(c);
	sd_event_unref(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_not_activated),  cmocka_unit_test(test_take_fds),
	    cmocka_unit_test(test_refusals),       cmocka_unit_test(test_backoff),
	    cmocka_unit_test(test_reenable_fails), cmocka_unit_test(test_tcp_options),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
