/* SPDX-License-Identifier: MIT */
#include "listeners.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <systemd/sd-daemon.h>

#include "log.h"
#include "macro.h"

/* Says in ls->error what failed, and returns r. */
_printf_(3, 4) static int fail(struct eb_listeners *ls, int r, const char *format, ...)
{
	va_list ap;

	va_start(ap, format);
	vsnprintf(ls->error, sizeof(ls->error), format, ap);
	va_end(ap);
	return r;
}

/* What every TCP connection accepted here should have: no Nagle (both ends write whole frames,
 * so it has nothing to coalesce and only waits for a delayed ACK, up to 40 ms), and keepalive,
 * which finds a peer that vanished (a crashed VM, a pulled cable) in about 4 minutes, so that a
 * dead one does not hold its slot. Set once on the listener: Linux copies these options to every
 * socket accept() returns, five system calls fewer per connection in a boot storm. A listener
 * that is not TCP (unix, vsock) refuses the first and is left as it is. */
static void set_tcp_options(int fd)
{
	int one = 1, idle = 120, intvl = 30, cnt = 4;

	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0)
		return;
	(void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	(void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	(void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
	(void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
}

int eb_listeners_add(struct eb_listeners *ls, int fd, const char *name, struct eb_listener **ret)
{
	struct eb_listener *v;

	v = reallocarray(ls->v, ls->n + 1, sizeof(*ls->v));
	if (!v) {
		safe_close(fd);
		return fail(ls, -ENOMEM, "Out of memory for socket \"%s\"", name);
	}
	ls->v = v;
	set_tcp_options(fd);
	v[ls->n] = (struct eb_listener){.set = ls, .fd = fd};
	snprintf(v[ls->n].name, sizeof(v[ls->n].name), "%s", name);
	if (ret)
		*ret = &v[ls->n];
	ls->n++;
	return 0;
}

int eb_listeners_take_fds(struct eb_listeners *ls, unsigned max)
{
	char **names = NULL;
	int n, r = 0;

	n = sd_listen_fds_with_names(true, &names);
	if (n < 0)
		return fail(ls, n, "Failed to take the sockets systemd passed: %s", strerror(-n));
	if ((unsigned)n > max) {
		r = fail(ls, -E2BIG, "systemd passed %d sockets; at most %u", n, max);
		goto done;
	}
	for (int i = 0; i < n; i++) {
		int fd = SD_LISTEN_FDS_START + i, flags;
		const char *name = names && names[i] ? names[i] : "unknown";

		if (sd_is_socket(fd, AF_UNSPEC, SOCK_STREAM, 1) <= 0) {
			r = fail(
			    ls, -EBADF,
			    "File descriptor %d (\"%s\") passed by systemd is not a listening stream socket",
			    fd, name);
			goto done;
		}
		/* systemd hands sockets over blocking; accepting in batches needs them not to be,
		 * or the last accept() of a batch would wait for a new peer. */
		flags = fcntl(fd, F_GETFL);
		if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
			r = negative_errno();
			fail(ls, r, "Failed to make socket \"%s\" non-blocking: %s", name,
			     strerror(-r));
			goto done;
		}
		r = eb_listeners_add(ls, fd, name, NULL);
		if (r < 0)
			goto done;
	}
	ls->socket_activated = n > 0;
	r = n;
done:
	if (names)
		for (int i = 0; i < n; i++)
			free(names[i]);
	free(names);
	return r;
}

/* Returns the first failure, after trying every listener. */
static int enable_all(struct eb_listeners *ls, int enabled)
{
	int r = 0;

	for (unsigned i = 0; i < ls->n; i++) {
		int k = sd_event_source_set_enabled(ls->v[i].src, enabled);

		if (k < 0 && r == 0)
			r = k;
	}
	return r;
}

static int on_backoff_timer(sd_event_source *src, uint64_t usec, void *userdata)
{
	struct eb_listeners *ls = userdata;
	int r;

	(void)src, (void)usec;
	/* A listener left off would stop the server accepting for good, without a word: rest
	 * again and retry, and tell the owner as for a failed accept(). */
	r = enable_all(ls, SD_EVENT_ON);
	if (r < 0 && ls->n > 0) {
		eb_listeners_pause(ls);
		if (ls->on_error)
			ls->on_error(&ls->v[0], r, ls->backoff_usec, ls->userdata);
	}
	return 0;
}

void eb_listeners_pause(struct eb_listeners *ls)
{
	uint64_t t;
	int r;

	ls->backoff_usec = ls->backoff_usec == 0
	                       ? EB_ACCEPT_BACKOFF_MIN_USEC
	                       : MIN(2 * ls->backoff_usec, EB_ACCEPT_BACKOFF_MAX_USEC);
	r = sd_event_now(ls->event, CLOCK_MONOTONIC, &t);
	if (r >= 0)
		r = sd_event_source_set_time(ls->backoff_timer, t + ls->backoff_usec);
	if (r >= 0)
		r = sd_event_source_set_enabled(ls->backoff_timer, SD_EVENT_ONESHOT);
	if (r < 0) {
		/* Without a timer to wake them, listeners must not be left off: accepting goes on,
		 * at the cost of spinning while fds are short. */
		log_debug_errno(r, "Failed to arm the accept back-off timer, not pausing: %m");
		return;
	}
	/* One that stays on only spins until the timer; nothing is lost. */
	(void)enable_all(ls, SD_EVENT_OFF);
}

static int on_accept(sd_event_source *src, int fd, uint32_t revents, void *userdata)
{
	struct eb_listener *l = userdata;
	struct eb_listeners *ls = l->set;

	(void)src, (void)revents;
	for (unsigned i = 0; i < EB_ACCEPT_BATCH; i++) {
		struct sockaddr_storage peer;
		socklen_t len = sizeof(peer);
		int cfd, r;

		cfd = accept4(fd, (struct sockaddr *)&peer, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (cfd < 0) {
			/* ECONNABORTED: the peer left before it was taken; the next one may be
			 * there. */
			if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED)
				return 0;
			r = -errno;
			eb_listeners_pause(ls);
			if (ls->on_error)
				ls->on_error(l, r, ls->backoff_usec, ls->userdata);
			return 0;
		}
		ls->backoff_usec = 0;
		ls->on_accept(l, cfd, (struct sockaddr *)&peer, MIN(len, (socklen_t)sizeof(peer)),
		              ls->userdata);
	}
	return 0;
}

int eb_listeners_start(struct eb_listeners *ls, sd_event *event, eb_accept_fn on_accept_fn,
                       eb_accept_error_fn on_error, void *userdata)
{
	int r;

	ls->event = event;
	ls->on_accept = on_accept_fn;
	ls->on_error = on_error;
	ls->userdata = userdata;
	/* Made now, off: when accept() runs out of descriptors, so would a timer's timerfd. */
	r = sd_event_add_time(event, &ls->backoff_timer, CLOCK_MONOTONIC, 0, 0, on_backoff_timer,
	                      ls);
	if (r >= 0)
		r = sd_event_source_set_enabled(ls->backoff_timer, SD_EVENT_OFF);
	if (r < 0)
		return fail(ls, r, "Failed to set up the accept back-off timer: %s", strerror(-r));
	for (unsigned i = 0; i < ls->n; i++) {
		r = sd_event_add_io(event, &ls->v[i].src, ls->v[i].fd, EPOLLIN, on_accept,
		                    &ls->v[i]);
		if (r < 0)
			return fail(ls, r, "Failed to watch %s: %s", ls->v[i].name, strerror(-r));
	}
	return 0;
}

void eb_listeners_done(struct eb_listeners *ls)
{
	ls->backoff_timer = sd_event_source_disable_unref(ls->backoff_timer);
	for (unsigned i = 0; i < ls->n; i++) {
		sd_event_source_disable_unref(ls->v[i].src);
		safe_close(ls->v[i].fd);
	}
	free(ls->v);
	ls->v = NULL;
	ls->n = 0;
}
