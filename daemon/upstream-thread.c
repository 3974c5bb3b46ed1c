/* SPDX-License-Identifier: MIT */
/* The upstream client's thread: the blocking libeb client, with back-off, drawing what the event
 * loop asks for and handing every DATA back as one record. It logs nothing: the loop's side
 * decides what is worth a line. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "backoff.h"
#include "client.h"
#include "macro.h"
#include "upstream-internal.h"

/* Slower than a sink's reconnect schedule: a broker has a pool to live on meanwhile, and a
 * refused cycle is retried about once a minute. The jitter also keeps two brokers configured to
 * draw from each other from saying HELLO in step. */
#define BACKOFF_FIRST_MS 1000
#define BACKOFF_MAX_MS   60000
/* An EMPTY or QUOTA's retry hint, bounded: a hint is the upstream's, and so under its control. */
#define RETRY_MIN_MS 100
#define RETRY_MAX_MS 10000

/* 1 and a command in *ret, 0 when timeout_ms (-1: none) passed first, -EPIPE when the loop's end
 * is gone. */
static int wait_cmd(int fd, int timeout_ms, struct up_cmd *ret)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	ssize_t n;
	int r;

	r = poll(&p, 1, timeout_ms);
	if (r < 0)
		return errno == EINTR ? 0 : -errno;
	if (r == 0)
		return 0;
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

void *upstream_thread(void *arg)
{
	struct up_thread *t = arg;
	uint64_t want = 0, chain[EB_CHAIN_MAX] = {};
	unsigned n_chain = 0;
	bool connected = false, revalidate = false, announced = false;
	struct eb_backoff backoff = EB_BACKOFF_INIT(BACKOFF_FIRST_MS, BACKOFF_MAX_MS);
	int wait_ms = 0;
	uint8_t *note, *data;

	note = malloc(UP_NOTE_MAX);
	data = malloc(EB_DATA_MAX);
	if (!note || !data)
		goto out; /* the loop sees its end close and says so */
	/* The loop stops the thread by shutting its end: every wait on the upstream ends then,
	 * whatever the upstream sends meanwhile (a WAKE flood once held a stop for 15 s). */
	eb_client_set_cancel(t->client, t->fd, POLLRDHUP);

	for (;;) {
		struct up_cmd cmd;
		size_t len, bytes;
		uint32_t bits, retry_ms;
		int r;

		r = wait_cmd(t->fd, want > 0 || revalidate ? wait_ms : -1, &cmd);
		if (r < 0)
			break;
		if (r > 0) {
			if (cmd.type == UP_CMD_STOP)
				break;
			if (cmd.n_chain <= EB_CHAIN_MAX &&
			    (cmd.n_chain != n_chain ||
			     memcmp(cmd.chain, chain, n_chain * sizeof(*chain)) != 0)) {
				n_chain = cmd.n_chain;
				memcpy(chain, cmd.chain, sizeof(chain));
				(void)eb_client_set_chain(t->client, chain, n_chain);
				/* The upstream judged the old ids: say HELLO again with the new
				 * ones, now. */
				if (connected) {
					eb_client_disconnect(t->client);
					connected = false;
					revalidate = true;
					wait_ms = 0;
				}
			}
			if (cmd.bits > 0)
				want = cmd.bits;
			continue;
		}

		wait_ms = 0;
		if (!connected) {
			r = eb_client_connect(t->client);
			if (r < 0) {
				wait_ms = (int)eb_backoff_next(&backoff);
				(void)send_note(t->fd, note, UP_NOTE_FAILED, (uint32_t)-r, NULL, 0,
				                eb_client_last_error(t->client));
				continue;
			}
			connected = true;
			announced = false;
			revalidate = false;
		}
		if (want == 0)
			continue;

		/* Whole bytes, at least the 8 a GET asks for, at most one DATA's worth. */
		bytes = MIN(MAX((want + 7) / 8, (uint64_t)8), (uint64_t)EB_DATA_MAX);
		r = eb_client_request(t->client, bytes, EB_GET_FULL);
		if (r >= 0)
			r = eb_client_receive(t->client, data, EB_DATA_MAX, &len, &bits, &retry_ms);
		/* Only an answer resets the back-off: an upstream that takes HELLO and then ends
		 * every session with an ERROR is retried on the back-off's schedule. */
		if (r >= 0 || r == -EAGAIN || r == -EDQUOT) {
			eb_backoff_reset(&backoff);
			/* Connected is said once the upstream has answered, so that one that takes
			 * HELLO and ends each session with an ERROR is one failure, logged once. */
			if (!announced)
				(void)send_note(t->fd, note, UP_NOTE_CONNECTED, 0, NULL, 0,
				                eb_client_broker(t->client));
			announced = true;
		}
		if (r >= 0) {
			r = send_note(t->fd, note, UP_NOTE_DATA, bits, data, len, NULL);
			explicit_bzero(data, len);
			if (r < 0)
				break;
			want -= MIN(want, (uint64_t)bits);
			if (want == 0)
				(void)send_note(t->fd, note, UP_NOTE_DONE, 0, NULL, 0, NULL);
			continue;
		}
		if (r == -EAGAIN || r == -EDQUOT) {
			wait_ms =
			    (int)MIN(MAX(retry_ms, (uint32_t)RETRY_MIN_MS), (uint32_t)RETRY_MAX_MS);
			continue;
		}
		eb_client_disconnect(t->client);
		connected = false;
		if (r == -ECANCELED)
			break;
		wait_ms = (int)eb_backoff_next(&backoff);
		(void)send_note(t->fd, note, UP_NOTE_FAILED, (uint32_t)-r, NULL, 0,
		                eb_client_last_error(t->client));
	}
out:
	free(note);
	if (data)
		explicit_bzero(data, EB_DATA_MAX);
	free(data);
	/* The loop's side sees EOF and stops drawing. */
	shutdown(t->fd, SHUT_RDWR);
	return NULL;
}
