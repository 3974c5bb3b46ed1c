/* SPDX-License-Identifier: MIT */
#include "listen.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "agent.h"
#include "broker.h"
#include "listeners.h"
#include "log.h"
#include "proxied.h"
#include "session.h"
#include "uri.h"

static void on_accept(struct eb_listener *l, int fd, const struct sockaddr *peer,
                      socklen_t peer_len, void *userdata)
{
	struct broker *b = userdata;
	struct sockaddr_storage balancer;
	struct session *s;
	int r;

	/* A balancer's agent check reads a line and is gone: no session, no TLS. */
	if (strcmp(l->name, AGENT_LISTENER) == 0) {
		agent_answer(b, fd);
		return;
	}
	/* A listed load balancer's client is known only once its PROXY header is in. */
	if (l->tls && proxied_expected(b, peer, peer_len, &balancer)) {
		proxied_new(b, fd, &balancer, l->name);
		return;
	}
	/* session_new() applies the limits and refuses, with a log line, what is over. */
	r = session_new(b, fd, peer, peer_len, l->tls, l->name, &s);
	if (r < 0)
		log_peer(b, PEER_LOG_ACCEPT, LOG_WARNING,
		         "Failed to set up a session on %s, ignoring: %s", l->name, strerror(-r));
}

static void on_accept_error(struct eb_listener *l, int error, uint64_t pause_usec, void *userdata)
{
	log_peer(userdata, PEER_LOG_ACCEPT, LOG_WARNING,
	         "Failed to accept on %s, pausing for %llu ms: %s", l->name,
	         (unsigned long long)(pause_usec / 1000), strerror(-error));
}

/* Whether a socket handed over by systemd carries TLS: by its name when it has one of ours,
 * by its family otherwise (only AF_UNIX is trusted to name its peer). */
static int fd_is_tls(int fd, const char *name, bool *ret)
{
	int family;
	socklen_t len = sizeof(family);

	if (strcmp(name, AGENT_LISTENER) == 0) {
		*ret = false; /* no TLS: one line of ASCII, the same for anyone */
		return 0;
	}
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

static int bind_uris(struct broker *b, char **uris, unsigned n_uris)
{
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
		struct eb_listener *l;
		struct eb_uri u;
		int fd, r;

		r = eb_uri_parse(uris[i], &u);
		if (r < 0)
			return log_error_errno(r, "Invalid listen address \"%s\"", uris[i]);
		r = eb_uri_listen(&u, &fd);
		if (r < 0)
			return log_error_errno(r, "Failed to listen on %s: %m", uris[i]);
		r = eb_listeners_add(&b->listeners, fd, uris[i], &l);
		if (r < 0)
			return log_oom();
		l->tls = eb_uri_is_tls(&u);
		log_info("Listening on %s%s", uris[i], l->tls ? " (TLS)" : "");
	}
	return 0;
}

int listen_open(struct broker *b, char **uris, unsigned n_uris)
{
	int n, r;

	n = eb_listeners_take_fds(&b->listeners, UINT16_MAX);
	if (n < 0)
		return log_error_errno(n, "%s", b->listeners.error);
	for (unsigned i = 0; i < b->listeners.n; i++) {
		struct eb_listener *l = &b->listeners.v[i];

		r = fd_is_tls(l->fd, l->name, &l->tls);
		if (r < 0)
			return log_error_errno(r, "Failed to inspect socket \"%s\": %m", l->name);
		log_debug("Listening on socket \"%s\" (fd %d)%s", l->name, l->fd,
		          l->tls ? " with TLS" : "");
	}
	if (n == 0) {
		r = bind_uris(b, uris, n_uris);
		if (r < 0)
			return r;
	}
	r = eb_listeners_start(&b->listeners, b->event, on_accept, on_accept_error, b);
	if (r < 0)
		return log_error_errno(r, "%s", b->listeners.error);
	return 0;
}

void listen_close(struct broker *b)
{
	eb_listeners_done(&b->listeners);
}
