/* SPDX-License-Identifier: MIT */
/* A server's listening sockets on an sd-event loop: taken from systemd (LISTEN_FDS, named by
 * FileDescriptorName=) or added after binding, accepted from in bounded batches, and rested with a
 * doubling back-off when accept() runs out of fds or memory. The broker and eb-sink-egd both
 * serve this way. Silent above debug: what fails is returned, with its words in ->error. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include <systemd/sd-event.h>

/* After accept() failed for want of fds or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM) the listeners
 * rest this long, doubling up to the ceiling while it goes on: the refused connection stays
 * queued, so accepting again at once would fail again at once, and spin. */
#define EB_ACCEPT_BACKOFF_MIN_USEC (100 * 1000ULL)
#define EB_ACCEPT_BACKOFF_MAX_USEC (2 * 1000000ULL)
/* Connections accepted per wakeup: one busy listener does not starve the clients. */
#define EB_ACCEPT_BATCH 64

struct eb_listeners;

struct eb_listener {
	struct eb_listeners *set;
	int fd;
	char name[64]; /* the name systemd gave it ("unknown" for none), or the address bound */
	bool tls;      /* the owner's to set: whether its connections carry TLS */
	sd_event_source *src;
};

/* A connection accepted on l: fd is non-blocking and close-on-exec, and the callee's to close;
 * peer (peer_len bytes) is its address as accept4() gave it, so that no getpeername() is needed. */
typedef void (*eb_accept_fn)(struct eb_listener *l, int fd, const struct sockaddr *peer,
                             socklen_t peer_len, void *userdata);
/* accept() on l failed with error (a negative errno), or after a rest the listeners could not be
 * turned on again, and every listener rests for pause_usec: the owner decides whether and how
 * often to say so. */
typedef void (*eb_accept_error_fn)(struct eb_listener *l, int error, uint64_t pause_usec,
                                   void *userdata);

struct eb_listeners {
	struct eb_listener *v;
	unsigned n;
	bool socket_activated; /* the sockets came from systemd */

	sd_event *event;
	eb_accept_fn on_accept;
	eb_accept_error_fn on_error;
	void *userdata;
	sd_event_source *backoff_timer;
	uint64_t backoff_usec; /* the current pause; 0 after a successful accept */

	char error[192]; /* what the last failure was, naming the socket */
};

/* Takes the sockets systemd passed (at most max; more is -E2BIG) and makes them non-blocking;
 * refuses any that is not a listening stream socket (-EBADF). Returns how many it took: 0 when
 * the process was not socket-activated. */
int eb_listeners_take_fds(struct eb_listeners *ls, unsigned max);

/* Adds a listening socket bound by the caller, taking fd (closed on failure too). ret (may be
 * NULL) is the new listener, valid until the next add. */
int eb_listeners_add(struct eb_listeners *ls, int fd, const char *name, struct eb_listener **ret);

/* Watches every listener on event: each accepted connection goes to on_accept, each accept()
 * failure other than a connection that went away to on_error (may be NULL), after which the
 * listeners rest. */
int eb_listeners_start(struct eb_listeners *ls, sd_event *event, eb_accept_fn on_accept,
                       eb_accept_error_fn on_error, void *userdata);

/* Stops accepting for the back-off's next step; the timer turns the listeners on again. */
void eb_listeners_pause(struct eb_listeners *ls);

/* Closes every listener and the back-off timer, leaving ls empty; safe on an empty one. */
void eb_listeners_done(struct eb_listeners *ls);
