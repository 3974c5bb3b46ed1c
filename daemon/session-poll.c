/* SPDX-License-Identifier: MIT */
/* Every session's socket in one epoll set of the broker's own, watched by one sd-event io source,
 * and the sessions to pump again soon (the come-back list), run by one defer source. sd-event
 * dispatches one source per epoll_wait(): with a source per socket and a defer source per
 * session, a fresh seed took four loop iterations, each an epoll_wait() and the sd-event work
 * around it, and four sources made and freed. Here one epoll_wait() serves every session ready
 * at once, and a session adds one epoll_ctl() where it added two sources.
 *
 * A batch holds pointers to the sessions it was given: a session freed while a batch runs (its
 * own pump ends it, or another's reaches it) keeps its memory, marked dead, until the batch is
 * over, so that a later event of the batch that names it is skipped, and no new session can be
 * given its address meanwhile. */
#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <systemd/sd-event.h>

#include "broker.h"
#include "conn.h"
#include "log.h"
#include "macro.h"
#include "session-internal.h"
#include "session.h"

/* Events taken per epoll_wait(): more ready sockets than this are in the set's ready list still,
 * and the io source, level-triggered on the set, comes back for them at the next iteration,
 * after the loop's other sources (accept, timers, the run source) have had their turn. */
#define POLL_BATCH 64

/* The sessions freed during the batch, now that no pointer of the batch is left. */
static void bury(struct broker *b)
{
	while (!eb_list_is_empty(&b->graveyard)) {
		struct session *s = eb_list_first(&b->graveyard, struct session, poll_node);

		eb_list_remove(&b->graveyard, &s->poll_node);
		free(s);
	}
}

static int on_poll(sd_event_source *src, int fd, uint32_t revents, void *userdata)
{
	SESSION_ENTRY();
	struct broker *b = userdata;
	struct epoll_event ev[POLL_BATCH];
	int n;

	(void)src, (void)revents;
	n = epoll_wait(fd, ev, POLL_BATCH, 0);
	if (n < 0)
		return errno == EINTR ? 0
		                      : log_error_errno(errno, "Failed to poll the sessions: %m");
	b->in_batch = true;
	for (int i = 0; i < n; i++) {
		struct session *s = ev[i].data.ptr;

		if (!s->dead)
			session_on_io(s);
	}
	b->in_batch = false;
	bury(b);
	return 0;
}

static int on_comeback(sd_event_source *src, void *userdata)
{
	SESSION_ENTRY();
	struct broker *b = userdata;
	/* Those on the list now: a session that asks to come back again while it is pumped goes
	 * to the end, and waits for the next iteration, as a defer source of its own did. */
	unsigned n = b->n_comeback;

	(void)src;
	b->in_batch = true;
	while (n-- > 0 && !eb_list_is_empty(&b->comeback)) {
		struct session *s = eb_list_first(&b->comeback, struct session, poll_node);

		session_stay(s);
		session_pump(s);
	}
	b->in_batch = false;
	bury(b);
	if (!eb_list_is_empty(&b->comeback))
		(void)sd_event_source_set_enabled(b->comeback_src, SD_EVENT_ONESHOT);
	return 0;
}

int session_poll_new(struct broker *b)
{
	_cleanup_close_ int fd = epoll_create1(EPOLL_CLOEXEC);
	int r;

	if (fd < 0)
		return -errno;
	r = sd_event_add_io(b->event, &b->poll_src, fd, EPOLLIN, on_poll, b);
	if (r < 0)
		return r;
	r = sd_event_add_defer(b->event, &b->comeback_src, on_comeback, b);
	if (r < 0)
		return r;
	(void)sd_event_source_set_enabled(b->comeback_src, SD_EVENT_OFF);
	b->poll_fd = TAKE_FD(fd);
	return 0;
}

void session_poll_free(struct broker *b)
{
	b->poll_src = sd_event_source_disable_unref(b->poll_src);
	b->comeback_src = sd_event_source_disable_unref(b->comeback_src);
	b->poll_fd = safe_close(b->poll_fd);
	bury(b);
}

int session_poll_add(struct session *s, uint32_t events)
{
	struct epoll_event ev = {.events = events, .data.ptr = s};

	if (epoll_ctl(s->broker->poll_fd, EPOLL_CTL_ADD, eb_conn_fd(s->conn), &ev) < 0)
		return -errno;
	s->polled = true;
	s->io_events = events;
	return 0;
}

void session_poll_set(struct session *s, uint32_t events)
{
	struct epoll_event ev = {.events = events, .data.ptr = s};

	/* Only when they change: a boot storm's seed set the same events four times. A MOD looks
	 * at the socket again, as a new edge would. */
	if (!s->polled || events == s->io_events)
		return;
	if (epoll_ctl(s->broker->poll_fd, EPOLL_CTL_MOD, eb_conn_fd(s->conn), &ev) >= 0)
		s->io_events = events;
}

void session_come_back(struct session *s)
{
	struct broker *b = s->broker;

	session_unmark(s);
	if (s->come_back || s->dead)
		return;
	if (eb_list_is_empty(&b->comeback))
		(void)sd_event_source_set_enabled(b->comeback_src, SD_EVENT_ONESHOT);
	eb_list_append(&b->comeback, &s->poll_node);
	b->n_comeback++;
	s->come_back = true;
}

void session_stay(struct session *s)
{
	if (!s->come_back)
		return;
	eb_list_remove(&s->broker->comeback, &s->poll_node);
	s->broker->n_comeback--;
	s->come_back = false;
}

void session_poll_remove(struct session *s)
{
	session_stay(s);
	/* Before the fd closes: epoll forgets a socket only once every copy of its file is
	 * closed, and the set must name no freed session. */
	if (s->polled)
		(void)epoll_ctl(s->broker->poll_fd, EPOLL_CTL_DEL, eb_conn_fd(s->conn), NULL);
	s->polled = false;
}

bool session_poll_bury(struct session *s)
{
	struct broker *b = s->broker;

	if (!b->in_batch)
		return false;
	s->dead = true;
	eb_list_append(&b->graveyard, &s->poll_node);
	return true;
}
