/* SPDX-License-Identifier: MIT */
/* The EGD server: its clients' requests answered, the broker side, and its life; who may
 * connect is egd-peers.c's. */
#include "egd-server.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "egd-proto.h"
#include "egd-refill.h"
#include "egd-server-internal.h"
#include "list.h"
#include "listeners.h"
#include "log.h"
#include "macro.h"

/* The kernel holds what a client has not read yet; this caps that (the kernel doubles it), so
 * a client that never reads strands little entropy before it stalls and is dropped. */
#define CLIENT_SNDBUF (16 * 1024)
/* The sweep for stalled clients, and the STATUS line's refresh at most every 10 s. */
#define SWEEP_USEC  1000000ULL
#define STATUS_USEC (10 * 1000000ULL)

/* ---- clients ---- */

static void waiters_remove(struct egd_server *s, struct client *c)
{
	eb_list_remove(&s->waiters, &c->wnode);
}

static void waiters_append(struct egd_server *s, struct client *c)
{
	if (!eb_list_contains(&s->waiters, &c->wnode))
		eb_list_append(&s->waiters, &c->wnode);
}

void egd_client_free(struct client *c, const char *why)
{
	struct egd_server *s = c->server;

	log_debug("Client %" PRIu64 ": %s", c->id, why);
	waiters_remove(s, c);
	eb_list_remove(&s->clients, &c->node);
	s->n_clients--;
	c->peer->n_clients--;
	egd_peer_release(s, c->peer);
	sd_event_source_disable_unref(c->io);
	safe_close(c->fd);
	/* The output may hold bytes nobody read; the input a write's entropy. */
	explicit_bzero(c, sizeof(*c));
	free(c);
}

/* Writes what the socket takes: 0, or a negative errno when the client is gone. */
static int client_flush(struct client *c)
{
	while (c->out_len > 0) {
		ssize_t n =
		    send(c->fd, c->out + c->out_off, c->out_len, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			if (c->stalled_since == 0)
				c->stalled_since = server_now(c->server);
			return 0;
		}
		if (n < 0)
			return -errno;
		explicit_bzero(c->out + c->out_off, (size_t)n);
		c->active = ++c->server->activity;
		c->out_off += (size_t)n;
		c->out_len -= (size_t)n;
		c->stalled_since = 0;
	}
	c->out_off = 0;
	return 0;
}

/* Streams what the buffer has of a blocking read's bytes. */
static void client_serve_owed(struct client *c)
{
	struct egd_server *s = c->server;
	size_t n;

	if (c->owed == 0 || c->out_len > 0)
		return;
	n = egd_refill_take(s->refill, c->out, MIN((size_t)c->owed, sizeof(c->out)));
	c->out_len = n;
	c->owed -= (unsigned)n;
	s->stats.served += n;
	s->stats.served_blocking += n;
}

/* Answers one request, writing its reply into the empty output buffer. */
static void client_handle(struct client *c, const struct egd_request *q)
{
	struct egd_server *s = c->server;
	uint32_t bits;
	size_t n;

	s->stats.requests[q->cmd]++;
	switch (q->cmd) {
	case EGD_CMD_LEVEL:
		/* Only what is in the buffer now: EGD clients take this as what they can read. */
		bits = (uint32_t)MIN(egd_refill_level(s->refill) * 8, (size_t)UINT32_MAX);
		c->out[0] = (uint8_t)(bits >> 24);
		c->out[1] = (uint8_t)(bits >> 16);
		c->out[2] = (uint8_t)(bits >> 8);
		c->out[3] = (uint8_t)bits;
		c->out_len = 4;
		break;
	case EGD_CMD_READ:
		n = egd_refill_take(s->refill, c->out + 1, q->count);
		c->out[0] = (uint8_t)n;
		c->out_len = 1 + n;
		s->stats.served += n;
		break;
	case EGD_CMD_READ_BLOCK:
		/* A count of 0 owes nothing and gets nothing, as the protocol says. */
		c->owed = q->count;
		client_serve_owed(c);
		break;
	case EGD_CMD_WRITE:
		(void)egd_refill_donate(s->refill, q->data, q->count, q->bits);
		break;
	case EGD_CMD_PID:
		c->out[0] = (uint8_t)s->pid_len;
		memcpy(c->out + 1, s->pid, s->pid_len);
		c->out_len = 1 + s->pid_len;
		break;
	case _EGD_CMD_MAX:
	case _EGD_CMD_INVALID:
		break;
	}
}

/* Runs a client as far as it can go now: serve what a blocking read owes, then answer whole
 * requests one at a time, each only once the last answer has reached the socket (so a client
 * that never reads stops being read, and its output stays bounded). Returns a negative errno
 * when the client must go, with *why saying why. */
static int client_run(struct client *c, const char **why)
{
	struct egd_server *s = c->server;

	for (;;) {
		struct egd_request q;
		size_t size;
		int r;

		client_serve_owed(c);
		r = client_flush(c);
		if (r < 0) {
			*why =
			    c->owed > 0 || c->out_len > 0 ? "went away during a read" : "went away";
			if (c->owed > 0 || c->out_len > 0)
				s->stats.dropped_gone++;
			return r;
		}
		if (c->out_len > 0)
			break;
		if (c->owed > 0) {
			waiters_append(s, c);
			break;
		}
		waiters_remove(s, c);
		r = egd_request_parse(c->in, c->in_len, &q, &size);
		if (r < 0) {
			*why = "sent an unknown command, closing";
			s->stats.dropped_unknown++;
			return r;
		}
		if (r == 0)
			break;
		client_handle(c, &q);
		memmove(c->in, c->in + size, c->in_len - size);
		c->in_len -= size;
		/* A write's bytes were entropy: none stays behind in the input buffer. */
		explicit_bzero(c->in + c->in_len, size);
	}
	if (c->eof && c->out_len == 0 && c->owed == 0) {
		*why = "closed the connection";
		return -ECONNRESET;
	}
	return 0;
}

static void client_update_events(struct client *c)
{
	uint32_t ev = 0;

	if (!c->eof && c->in_len < sizeof(c->in))
		ev |= EPOLLIN;
	if (c->out_len > 0)
		ev |= EPOLLOUT;
	if (ev != c->events && sd_event_source_set_io_events(c->io, ev) >= 0)
		c->events = ev;
}

/* client_run() and its consequences; false when the client was freed. */
static bool client_step(struct client *c)
{
	const char *why = NULL;

	if (client_run(c, &why) < 0) {
		egd_client_free(c, why);
		return false;
	}
	client_update_events(c);
	return true;
}

static int on_client(sd_event_source *src, int fd, uint32_t revents, void *userdata)
{
	struct client *c = userdata;

	(void)src;
	/* A peer that closed both ways has nothing left to read our answers. */
	if (revents & (EPOLLHUP | EPOLLERR)) {
		if (c->owed > 0 || c->out_len > 0)
			c->server->stats.dropped_gone++;
		egd_client_free(c, c->owed > 0 || c->out_len > 0 ? "went away during a read"
		                                                 : "hung up");
		return 0;
	}
	if ((revents & EPOLLIN) && !c->eof && c->in_len < sizeof(c->in)) {
		ssize_t n = recv(fd, c->in + c->in_len, sizeof(c->in) - c->in_len, MSG_DONTWAIT);

		if (n == 0)
			c->eof = true;
		else if (n < 0 && errno != EAGAIN && errno != EINTR) {
			egd_client_free(c, "failed to read, dropping");
			return 0;
		} else if (n > 0) {
			c->in_len += (size_t)n;
			c->active = ++c->server->activity;
		}
	}
	(void)client_step(c);
	return 0;
}

static void serve_waiters(struct egd_server *s)
{
	/* Oldest first. A waiter that is served in full and asks again joins the end of the
	 * line; the rounds go on while bytes and waiters that can take them are left. */
	for (bool progress = true; progress && !eb_list_is_empty(&s->waiters);) {
		/* This round's line; the list is NULL-terminated, so it moves by value. */
		struct eb_list round = s->waiters;
		struct client *c;

		progress = false;
		s->waiters = (struct eb_list){};
		while ((c = eb_list_first(&round, struct client, wnode))) {
			eb_list_remove(&round, &c->wnode);
			if (c->out_len == 0 && egd_refill_level(s->refill) > 0)
				progress = true;
			if (!client_step(c))
				continue;
			/* Output still pending, or nothing to give: it waits, in the same order. */
			if (c->owed > 0)
				waiters_append(s, c);
		}
		if (egd_refill_level(s->refill) == 0)
			break;
	}
}

static void on_accept(struct eb_listener *l, int fd, const struct sockaddr *peer,
                      socklen_t peer_len, void *userdata)
{
	struct egd_server *s = userdata;
	struct peer *p;
	struct client *c;
	int r;

	(void)l, (void)peer, (void)peer_len;
	p = egd_peer_admit(s, fd);
	if (!p) {
		safe_close(fd);
		return;
	}
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &(int){CLIENT_SNDBUF}, sizeof(int));
	c = calloc(1, sizeof(*c));
	if (!c) {
		safe_close(fd);
		egd_peer_release(s, p);
		log_oom();
		return;
	}
	c->server = s;
	c->peer = p;
	c->fd = fd;
	c->id = ++s->next_id;
	c->active = ++s->activity;
	c->events = EPOLLIN;
	r = sd_event_add_io(s->event, &c->io, fd, c->events, on_client, c);
	if (r < 0) {
		log_warning_errno(r, "Failed to watch a client, dropping it: %m");
		safe_close(fd);
		free(c);
		egd_peer_release(s, p);
		return;
	}
	p->n_clients++;
	eb_list_prepend(&s->clients, &c->node);
	s->n_clients++;
	s->stats.accepted++;
	log_debug("Client %" PRIu64 ": connected (%u now, %u of its peer)", c->id, s->n_clients,
	          p->n_clients);
}

static void on_accept_error(struct eb_listener *l, int error, uint64_t pause_usec, void *userdata)
{
	struct egd_server *s = userdata;
	uint64_t now = server_now(s);

	(void)l;
	if (now - s->last_accept_log > WARN_INTERVAL_USEC) {
		log_warning_errno(error, "Failed to accept a client, pausing for %llu ms: %m",
		                  (unsigned long long)(pause_usec / 1000));
		s->last_accept_log = now;
	}
}

/* ---- the broker side ---- */

static int on_refill(sd_event_source *src, int fd, uint32_t revents, void *userdata)
{
	struct egd_server *s = userdata;
	struct egd_refill_stats st;

	(void)src, (void)fd, (void)revents;
	egd_refill_ack(s->refill);
	egd_refill_stats(s->refill, &st);
	if (st.failed)
		return sd_event_exit(s->event, 1);
	serve_waiters(s);
	return 0;
}

void egd_server_log_stats(struct egd_server *s, bool final)
{
	struct egd_refill_stats st;
	const struct stats *t = &s->stats;
	char status[1024];

	egd_refill_stats(s->refill, &st);
	snprintf(status, sizeof(status),
	         "%s; %u clients, %zu bytes buffered; served %" PRIu64 " bytes (%" PRIu64
	         " by blocking reads) to %" PRIu64 " clients",
	         st.link, s->n_clients, egd_refill_level(s->refill), t->served, t->served_blocking,
	         t->accepted);
	(void)sd_notifyf(false, "STATUS=%s", status);
	if (!final)
		return;
	log_info("%s; requests: level %" PRIu64 ", read %" PRIu64 ", read-blocking %" PRIu64
	         ", write %" PRIu64 ", pid %" PRIu64 "; dropped: %" PRIu64 " stalled, %" PRIu64
	         " unknown command, %" PRIu64 " gone mid-read, %" PRIu64
	         " idle for newcomers, %" PRIu64 " refused; broker: %" PRIu64
	         " bytes fetched, %" PRIu64 " bytes of writes donated, %" PRIu64 " dropped",
	         status, t->requests[EGD_CMD_LEVEL], t->requests[EGD_CMD_READ],
	         t->requests[EGD_CMD_READ_BLOCK], t->requests[EGD_CMD_WRITE],
	         t->requests[EGD_CMD_PID], t->dropped_stalled, t->dropped_unknown, t->dropped_gone,
	         t->dropped_idle, t->refused, st.fetched, st.donated, st.donate_dropped);
}

/* Drops clients that left an answer unread for too long, and refreshes the STATUS line. */
static int on_sweep(sd_event_source *src, uint64_t usec, void *userdata)
{
	struct egd_server *s = userdata;
	uint64_t now = server_now(s);
	struct client *c, *next;

	eb_list_foreach_safe(c, next, &s->clients, node) {
		if (c->stalled_since && now - c->stalled_since >= s->opts.client_timeout_usec) {
			s->stats.dropped_stalled++;
			egd_client_free(c, "did not read its answer in time, dropping");
		}
	}
	if (now - s->last_status >= STATUS_USEC) {
		egd_server_log_stats(s, false);
		s->last_status = now;
	}
	return sd_event_source_set_time(src, usec + SWEEP_USEC);
}

int egd_server_new(sd_event *event, struct egd_refill *refill, const struct egd_server_options *o,
                   struct egd_server **ret)
{
	struct egd_server *s;

	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->event = sd_event_ref(event);
	s->refill = refill;
	s->opts = *o;
	s->pid_len = (size_t)snprintf(s->pid, sizeof(s->pid), "%d", (int)getpid());
	*ret = s;
	return 0;
}

int egd_server_start(struct egd_server *s, struct eb_listeners *ls)
{
	int r;

	r = eb_listeners_start(ls, s->event, on_accept, on_accept_error, s);
	if (r < 0)
		return log_error_errno(r, "%s", ls->error);
	r = sd_event_add_io(s->event, &s->refill_src, egd_refill_fd(s->refill), EPOLLIN, on_refill,
	                    s);
	if (r >= 0)
		r = sd_event_add_time_relative(s->event, &s->sweep_src, CLOCK_MONOTONIC, SWEEP_USEC,
		                               0, on_sweep, s);
	if (r >= 0)
		r = sd_event_source_set_enabled(s->sweep_src, SD_EVENT_ON);
	if (r < 0)
		return log_error_errno(r, "Failed to set up the event loop: %m");
	return 0;
}

struct egd_server *egd_server_free(struct egd_server *s)
{
	struct client *c;

	if (!s)
		return NULL;
	while ((c = eb_list_first(&s->clients, struct client, node)))
		egd_client_free(c, "the sink is stopping");
	sd_event_source_disable_unref(s->refill_src);
	sd_event_source_disable_unref(s->sweep_src);
	sd_event_unref(s->event);
	free(s);
	return NULL;
}
