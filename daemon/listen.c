/* SPDX-License-Identifier: MIT */
#include "listen.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>

#include "broker.h"
#include "log.h"
#include "session.h"
#include "uri.h"

struct listener {
	struct broker *broker;
	int fd;
	bool tls;
	char name[64];
	sd_event_source *src;
};

/* After accept() failed for want of fds or memory the listeners rest this long, doubling up to
 * the ceiling while it goes on: the refused connection stays queued, so accepting again at once
 * would fail again at once, and spin. */
#define ACCEPT_BACKOFF_MIN_USEC (100 * 1000ULL)
#define ACCEPT_BACKOFF_MAX_USEC (2 * 1000000ULL)

static void listeners_enable(struct broker *b, int enabled)
{
	for (unsigned i = 0; i < b->n_listeners; i++)
		(void)sd_event_source_set_enabled(b->listeners[i].src, enabled);
}

static int on_accept_timer(sd_event_source *src, uint64_t usec, void *userdata)
{
	(void)src, (void)usec;
	listeners_enable(userdata, SD_EVENT_ON);
	return 0;
}

void listeners_pause(struct broker *b)
{
	uint64_t t;
	int r;

	b->accept_backoff_usec = b->accept_backoff_usec == 0
	                             ? ACCEPT_BACKOFF_MIN_USEC
	                             : MIN(2 * b->accept_backoff_usec, ACCEPT_BACKOFF_MAX_USEC);
	t = broker_now(b) + b->accept_backoff_usec;
	if (b->accept_timer)
		r = sd_event_source_set_time(b->accept_timer, t);
	else
		r = sd_event_add_time(b->event, &b->accept_timer, CLOCK_MONOTONIC, t, 0,
		                      on_accept_timer, b);
	if (r >= 0)
		r = sd_event_source_set_enabled(b->accept_timer, SD_EVENT_ONESHOT);
	if (r < 0) {
		/* Without a timer to wake them, listeners must not be left off. */
		log_warning_errno(r, "Failed to arm the accept back-off timer, ignoring: %m");
		return;
	}
	listeners_enable(b, SD_EVENT_OFF);
}

static int on_accept(sd_event_source *src, int fd, uint32_t revents, void *userdata)
{
	struct listener *l = userdata;
	struct broker *b = l->broker;

	(void)src, (void)revents;
	/* A bounded batch per wakeup keeps one busy listener from starving the sessions. */
	for (unsigned i = 0; i < 64; i++) {
		struct session *s;
		int cfd, r;

		cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (cfd < 0) {
			if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED)
				return 0;
			r = -errno;
			listeners_pause(b);
			log_peer(b, PEER_LOG_ACCEPT, LOG_WARNING,
			         "Failed to accept on %s, pausing for %llu ms: %s", l->name,
			         (unsigned long long)(b->accept_backoff_usec / 1000), strerror(-r));
			return 0;
		}
		b->accept_backoff_usec = 0;
		/* session_new() applies the limits and refuses, with a log line, what is over. */
		r = session_new(b, cfd, l->tls, l->name, &s);
		if (r < 0)
			log_peer(b, PEER_LOG_ACCEPT, LOG_WARNING,
			         "Failed to set up a session on %s, ignoring: %s", l->name,
			         strerror(-r));
	}
	return 0;
}

static int add_listener(struct broker *b, int fd, bool tls, const char *name)
{
	struct listener *l, *n;

	n = reallocarray(b->listeners, b->n_listeners + 1, sizeof(*b->listeners));
	if (!n)
		return -ENOMEM;
	b->listeners = n;
	l = &b->listeners[b->n_listeners];
	*l = (struct listener){.broker = b, .fd = fd, .tls = tls};
	snprintf(l->name, sizeof(l->name), "%s", name);
	b->n_listeners++;
	return 0;
}

/* Whether a socket handed over by systemd carries TLS: by its name when it has one of ours,
 * by its family otherwise (only AF_UNIX is trusted to name its peer). */
static int fd_is_tls(int fd, const char *name, bool *ret)
{
	int family;
	socklen_t len = sizeof(family);

	if (strcmp(name, "tcp") == 0 || strcmp(name, "vsock") == 0 ||
	    strcmp(name, "unix-tls") == 0) {
		*ret = true;
		return 0;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &family, &len) < 0)
		return -errno;
	*ret = family != AF_UNIX;
	return 0;
}

int listeners_open(struct broker *b, char **uris, unsigned n_uris)
{
	char **names = NULL;
	int n, r;

	n = sd_listen_fds_with_names(true, &names);
	if (n < 0)
		return log_error_errno(n, "Failed to take the sockets systemd passed: %m");
	if (n > 0) {
		b->socket_activated = true;
		for (int i = 0; i < n; i++) {
			int fd = SD_LISTEN_FDS_START + i;
			const char *name = names && names[i] ? names[i] : "unknown";
			bool tls = false;

			r = sd_is_socket(fd, AF_UNSPEC, SOCK_STREAM, 1);
			if (r <= 0) {
				log_error(
				    "File descriptor %d (\"%s\") passed by systemd is not a listening stream socket",
				    fd, name);
				r = -EBADF;
				goto done;
			}
			/* systemd hands sockets over blocking; accepting in batches needs them not
			 * to be, or the last accept() of a batch would wait for a new peer. */
			r = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
			if (r < 0) {
				r = log_error_errno(
				    errno, "Failed to make socket \"%s\" non-blocking: %m", name);
				goto done;
			}
			r = fd_is_tls(fd, name, &tls);
			if (r < 0) {
				log_error_errno(r, "Failed to inspect socket \"%s\": %m", name);
				goto done;
			}
			r = add_listener(b, fd, tls, name);
			if (r < 0) {
				log_oom();
				goto done;
			}
			log_debug("Listening on socket \"%s\" (fd %d)%s", name, fd,
			          tls ? " with TLS" : "");
		}
	} else {
		if (n_uris == 0) {
			uris = b->conf->listen;
			n_uris = b->conf->n_listen;
		}
		if (n_uris == 0) {
			log_error(
			    "Nothing to listen on: no sockets from systemd, no --listen, no listen= in %s",
			    b->conf->path ? b->conf->path : "the configuration");
			return -EINVAL;
		}
		for (unsigned i = 0; i < n_uris; i++) {
			struct eb_uri u;
			int fd;

			r = eb_uri_parse(uris[i], &u);
			if (r < 0)
				return log_error_errno(r, "Invalid listen address \"%s\"", uris[i]);
			r = eb_uri_listen(&u, &fd);
			if (r < 0)
				return log_error_errno(r, "Failed to listen on %s: %m", uris[i]);
			r = add_listener(b, fd, eb_uri_is_tls(&u), uris[i]);
			if (r < 0) {
				safe_close(fd);
				return log_oom();
			}
			log_info("Listening on %s%s", uris[i], eb_uri_is_tls(&u) ? " (TLS)" : "");
		}
	}
	for (unsigned i = 0; i < b->n_listeners; i++) {
		struct listener *l = &b->listeners[i];

		r = sd_event_add_io(b->event, &l->src, l->fd, EPOLLIN, on_accept, l);
		if (r < 0) {
			log_error_errno(r, "Failed to watch %s: %m", l->name);
			goto done;
		}
	}
	r = 0;
done:
	if (names)
		for (int i = 0; i < n; i++)
			free(names[i]);
	free(names);
	return r;
}

void listeners_free(struct broker *b)
{
	b->accept_timer = sd_event_source_disable_unref(b->accept_timer);
	for (unsigned i = 0; i < b->n_listeners; i++) {
		sd_event_source_disable_unref(b->listeners[i].src);
		safe_close(b->listeners[i].fd);
	}
	free(b->listeners);
	b->listeners = NULL;
	b->n_listeners = 0;
}
