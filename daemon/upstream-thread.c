/* SPDX-License-Identifier: MIT */
/* The upstream client's thread: libeb's sink runtime (eb_sink_run()) drawing what the event loop
 * asks for and handing every DATA back as one record, its rests spent listening to the loop. It
 * logs nothing: the loop's side decides what is worth a line. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client.h"
#include "macro.h"
#include "sink.h"
#include "time-util.h"
#include "upstream-internal.h"

/* Slower than a sink's reconnect schedule: a broker has a pool to live on meanwhile, and a
 * refused cycle is retried about once a minute. The jitter also keeps two brokers configured to
 * draw from each other from saying HELLO in step. */
#define BACKOFF_FIRST_MS 1000
#define BACKOFF_MAX_MS   60000
/* With nothing to draw the thread still watches the upstream, so that an idle broker knows
 * within seconds that it is gone (issue 26): a connection it holds is watched for the upstream
 * closing it, and without one it connects (HELLO, no GET) after this long at rest, failures then
 * backing off as above. */
#define PROBE_MS 5000
/* An EMPTY or QUOTA's retry hint, bounded: a hint is the upstream's, and so under its control. */
#define RETRY_MIN_MS 100
#define RETRY_MAX_MS 10000

/* The thread's own: what the loop last said, and a record to build notes in. */
struct draw {
	struct up_thread *t;
	uint64_t want; /* bits the last DRAW asked for, not drawn yet */
	uint64_t chain[EB_CHAIN_MAX];
	unsigned n_chain;
	bool hello_due; /* the ids changed while connected: HELLO again with the new ones */
	bool probe_due; /* idle and not connected, or the upstream hung up: connect to know */
	/* A key was staged (REKEY): once the connection in use is gone, the next one goes at once
	 * with the new key, not after the back-off, which the old key's end may have started.
	 * Once only, so that a new key the upstream refuses too is retried on the back-off. */
	bool rekeyed;
	uint32_t key_gen, conn_gen; /* the key staged last; the one the connection logged in with */
	uint8_t *note;
};

/* 1 and a command in *ret, 0 when timeout_ms (-1: none) passed first, 2 when the upstream hung up
 * on up_fd (-1: not watched), -EPIPE when the loop's end is gone. */
static int wait_cmd(int fd, int up_fd, int timeout_ms, struct up_cmd *ret)
{
	struct pollfd p[2] = {{.fd = fd, .events = POLLIN}, {.fd = up_fd, .events = POLLRDHUP}};
	ssize_t n;
	int r;

	r = poll(p, 2, timeout_ms);
	if (r < 0)
		return errno == EINTR ? 0 : -errno;
	if (r == 0)
		return 0;
	if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR)))
		return 2; /* only the upstream's socket spoke: closed or broken */
	n = recv(fd, ret, sizeof(*ret), 0);
	if (n < 0)
		return errno == EINTR || errno == EAGAIN ? 0 : -errno;
	if (n != (ssize_t)sizeof(*ret))
		return -EPIPE; /* 0: the loop closed its end */
	return 1;
}

static int send_note(int fd, uint8_t *buf, enum up_note_type type, uint32_t bits, const void *data,
                     size_t len, const char *text)
{
	struct up_note h = {.type = type, .bits = bits, .len = (uint32_t)len};
	ssize_t n;

	if (text)
		snprintf(h.text, sizeof(h.text), "%s", text);
	memcpy(buf, &h, sizeof(h));
	if (len > 0)
		memcpy(buf + sizeof(h), data, len);
	do
		n = send(fd, buf, sizeof(h) + len, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	explicit_bzero(buf, sizeof(h) + len);
	return n < 0 ? -errno : 0;
}

/* A new key for the connections to come; the one in use keeps its own. */
static void rekey(struct draw *d, struct up_cmd *cmd)
{
	if (eb_client_set_key(d->t->client, cmd->key_id[0] ? cmd->key_id : NULL, cmd->key) >= 0) {
		d->key_gen = cmd->key_gen;
		d->rekeyed = true;
	}
	explicit_bzero(cmd->key, sizeof(cmd->key));
}

/* One command from the loop: 0, or -ECANCELED for a stop. */
static int apply_cmd(struct draw *d, struct up_cmd *cmd)
{
	if (cmd->type == UP_CMD_STOP)
		return -ECANCELED;
	if (cmd->type == UP_CMD_REKEY) {
		rekey(d, cmd);
		return 0;
	}
	if (cmd->n_chain <= EB_CHAIN_MAX &&
	    (cmd->n_chain != d->n_chain ||
	     memcmp(cmd->chain, d->chain, d->n_chain * sizeof(*d->chain)) != 0)) {
		d->n_chain = cmd->n_chain;
		memcpy(d->chain, cmd->chain, sizeof(d->chain));
		(void)eb_client_set_chain(d->t->client, d->chain, d->n_chain);
		/* The upstream judged the old ids: the next connection says the new ones. */
		if (eb_client_connected(d->t->client))
			d->hello_due = true;
	}
	if (cmd->type == UP_CMD_HOLD)
		d->want = 0; /* the loop asks again once the hold is over */
	else if (cmd->bits > 0)
		d->want = cmd->bits;
	return 0;
}

/* The runtime's rests: up to ms (-1: until the loop says something), taking the loop's commands
 * meanwhile. A stop or the loop's end gone ends the run. A rest ends early when there is
 * something to do at once: resting idle, any command; otherwise a HELLO due, for which the
 * connection goes now (the runtime reconnects when it finds it gone). A DRAW in a back-off or
 * an EMPTY's rest waits it out: what the back-off or the upstream's hint said still holds.
 * Resting idle is watching: the upstream hanging up is told to the loop at once and a connect
 * is due, and PROBE_MS without a connection makes one due too. */
static int rest(void *userdata, int ms)
{
	struct draw *d = userdata;
	bool idle = ms < 0;
	uint64_t end = eb_now_ms() + (uint64_t)(idle ? PROBE_MS : ms);

	for (;;) {
		struct eb_client *c = d->t->client;
		struct up_cmd cmd;
		int r;

		/* Not connected, with a key staged since the last connection: connect now. */
		if (d->rekeyed && !eb_client_connected(c)) {
			d->rekeyed = false;
			d->probe_due = true;
			return 0;
		}
		r = wait_cmd(d->t->fd, idle ? eb_client_fd(c) : -1, (int)eb_ms_until(end), &cmd);
		if (r == 2) {
			eb_client_disconnect(c);
			(void)send_note(d->t->fd, d->note, UP_NOTE_FAILED, ECONNRESET, NULL, 0,
			                "the upstream closed the connection");
			d->probe_due = true;
			return 0;
		}
		if (r == 0 && idle && !eb_client_connected(c))
			d->probe_due = true;
		if (r <= 0)
			return r;
		r = apply_cmd(d, &cmd);
		explicit_bzero(&cmd, sizeof(cmd));
		if (r < 0)
			return r;
		if (d->hello_due && eb_client_connected(c)) {
			eb_client_disconnect(c);
			return 0;
		}
		if (idle)
			return 0;
	}
}

/* Whole bytes, at least the 8 a GET asks for, at most one DATA's worth; one GET at a time (the
 * window is 1, so in_flight is 0). A HELLO due connects even with nothing to draw. */
static size_t want(void *userdata, struct eb_client *c, uint64_t in_flight)
{
	struct draw *d = userdata;

	(void)c;
	(void)in_flight;
	if (d->want == 0)
		return d->hello_due || d->probe_due ? EB_SINK_WANT_CONNECT : 0;
	return (size_t)MIN(MAX((d->want + 7) / 8, (uint64_t)8), (uint64_t)EB_DATA_MAX);
}

static int take(void *userdata, struct eb_client *c, const uint8_t *buf, size_t len, uint32_t bits)
{
	struct draw *d = userdata;
	int r;

	(void)c;
	r = send_note(d->t->fd, d->note, UP_NOTE_DATA, bits, buf, len, NULL);
	if (r < 0)
		return r;
	d->want -= MIN(d->want, (uint64_t)bits);
	if (d->want == 0)
		(void)send_note(d->t->fd, d->note, UP_NOTE_DONE, 0, NULL, 0, NULL);
	/* What the loop said meanwhile, before the next GET: new ids go upstream now, not after
	 * the whole draw. */
	return rest(d, 0);
}

/* The runtime's events, as the notes the loop logs from. */
static void event(void *userdata, struct eb_client *c, enum eb_sink_event e, int r, unsigned ms)
{
	struct draw *d = userdata;

	(void)ms;
	switch (e) {
	case EB_SINK_CONNECTED:
		d->hello_due = false;
		d->conn_gen = d->key_gen;
		d->rekeyed = false;
		/* A probe has no answer to wait for: the WELCOME is the upstream's word. */
		if (d->probe_due && d->want == 0)
			(void)send_note(d->t->fd, d->note, UP_NOTE_CONNECTED, d->conn_gen, NULL, 0,
			                eb_client_broker(c));
		d->probe_due = false;
		break;
	case EB_SINK_SERVED:
		/* Connected is said once the upstream has answered, so that one that takes HELLO
		 * and ends each session with an ERROR is one failure, logged once. */
		(void)send_note(d->t->fd, d->note, UP_NOTE_CONNECTED, d->conn_gen, NULL, 0,
		                eb_client_broker(c));
		break;
	case EB_SINK_RETRYING:
		/* A connect pass failed, or the upstream went away (after EB_SINK_LOST). */
		(void)send_note(d->t->fd, d->note, UP_NOTE_FAILED, (uint32_t)-r, NULL, 0,
		                eb_client_last_error(c));
		break;
	case EB_SINK_DATA:        /* take() sends it */
	case EB_SINK_WAITING:     /* an EMPTY or QUOTA is not worth a note */
	case EB_SINK_LOST:        /* EB_SINK_RETRYING follows */
	case EB_SINK_MOVING:      /* the connect that follows says where */
	case EB_SINK_UNREACHABLE: /* not without a deadline */
	case EB_SINK_REFUSED:     /* not with persist */
	case _EB_SINK_EVENT_MAX:
	case _EB_SINK_EVENT_INVALID:
		break;
	}
}

static const struct eb_sink_ops draw_ops = {
    .want = want,
    .take = take,
    .wait = rest,
    .event = event,
};

void *upstream_thread(void *arg)
{
	struct up_thread *t = arg;
	struct draw d = {.t = t};
	const struct eb_sink_params p = {
	    .mode = EB_GET_FULL,
	    .window = 1,
	    .retry_min_ms = RETRY_MIN_MS,
	    .retry_max_ms = RETRY_MAX_MS,
	    .backoff_min_ms = BACKOFF_FIRST_MS,
	    .backoff_max_ms = BACKOFF_MAX_MS,
	    /* A refusal (a key, FORBIDDEN) is a failure like any other: the loop logs it and the
	     * thread retries on the back-off, for the upstream's administrator may fix it while
	     * this broker runs. */
	    .persist = true,
	};

	d.note = malloc(UP_NOTE_MAX);
	if (d.note) {
		/* The loop stops the thread by shutting its end: every wait on the upstream ends
		 * then, whatever the upstream sends meanwhile (a WAKE flood once held a stop for
		 * 15 s). */
		eb_client_set_cancel(t->client, t->fd, POLLRDHUP);
		/* However it ends (a stop, the loop's end gone, out of memory), the loop's side
		 * sees EOF and stops drawing. */
		(void)eb_sink_run(t->client, &p, &draw_ops, &d);
	}
	free(d.note);
	shutdown(t->fd, SHUT_RDWR);
	return NULL;
}
