/* SPDX-License-Identifier: MIT */
/* eb-sink-egd: serves the EGD protocol on sockets from a locked buffer kept full by a broker. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>

#include "cli.h"
#include "egd-buffer.h"
#include "egd-proto.h"
#include "egd-refill.h"
#include "log.h"
#include "uri.h"

#define LISTENERS_MAX 16
/* Input is read in chunks; a chunk holds at least one whole request. */
#define CLIENT_IN_MAX (2 * EGD_REQUEST_MAX)
/* One reply at a time: the largest is 0x01's count byte and 255 bytes. */
#define CLIENT_OUT_MAX (1 + EGD_COUNT_MAX)
/* A write queue for the broker: EGD writers are rare and small. */
#define DONATE_MAX 4096
/* The kernel holds what a client has not read yet; this caps that (the kernel doubles it), so
 * a client that never reads strands little entropy before it stalls and is dropped. */
#define CLIENT_SNDBUF (16 * 1024)

static char *arg_listen[LISTENERS_MAX];
static unsigned arg_n_listen;
static unsigned long long arg_buffer_size = 4096;
static unsigned long long arg_low_water_pct = 50;
static unsigned long long arg_max_clients = 4096;
static unsigned long long arg_client_timeout_s = 30;

struct server;

struct client {
	struct server *server;
	struct client *prev, *next; /* all clients */
	struct client *wnext;       /* waiting for bytes a blocking read owes */
	bool waiting;
	int fd;
	sd_event_source *io;
	uint32_t events;
	uint64_t id;
	uint8_t in[CLIENT_IN_MAX];
	size_t in_len;
	uint8_t out[CLIENT_OUT_MAX];
	size_t out_off, out_len;
	unsigned owed; /* bytes a 0x02 read has still to stream */
	bool eof;
	uint64_t stalled_since; /* CLOCK_MONOTONIC usec since output has waited, 0 when none */
};

struct listener {
	int fd;
	char name[64];
	sd_event_source *src;
};

struct stats {
	uint64_t accepted, refused, requests[_EGD_CMD_MAX];
	uint64_t served, served_blocking;
	uint64_t dropped_stalled, dropped_unknown, dropped_gone;
};

struct server {
	sd_event *event;
	struct egd_refill *refill;
	sd_event_source *refill_src, *sweep_src;
	struct listener listeners[LISTENERS_MAX];
	unsigned n_listeners;
	struct client *clients;
	struct client *waiters, *waiters_tail;
	unsigned n_clients;
	uint64_t next_id;
	uint64_t last_refused_log;
	/* accept() failed for want of fds or memory: the listeners rest until the next sweep,
	 * since the refused client stays queued and accepting again at once would spin. */
	bool accept_paused;
	uint64_t last_accept_log;
	uint64_t last_status;
	struct stats stats;
	char pid[16];
	size_t pid_len;
};

static void help(void)
{
	printf(
	    "Usage: eb-sink-egd [OPTIONS]\n\n"
	    "Serves the EGD protocol (commands 0x00-0x04) on sockets systemd passes, or on --listen\n"
	    "addresses, from a locked buffer that a broker keeps full of full-entropy bytes.\n\n"
	    "  -l, --listen URI      unix:/PATH or tcp://HOST:PORT to serve when not socket-activated\n"
	    "                        (repeatable)\n"
	    "      --buffer-size N   bytes to keep buffered (64..1048576; default 4096)\n"
	    "      --low-water PCT   refill when the buffer falls below PCT percent (1..100; default 50)\n"
	    "      --max-clients N   clients served at once (1..65536; default 4096)\n"
	    "      --client-timeout SEC\n"
	    "                        drop a client that has not read its answer for SEC seconds\n"
	    "                        (default 30)\n" EB_CLI_CLIENT_HELP
	    "\nWithout --broker, the brokers are $EB_BROKER (space-separated); without --user, $EB_USER.\n"
	    "\nSee eb-sink-egd(8).\n");
}

static uint64_t now_usec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

/* ---- clients ---- */

static void waiters_remove(struct server *s, struct client *c)
{
	struct client **p, *prev = NULL;

	if (!c->waiting)
		return;
	for (p = &s->waiters; *p; prev = *p, p = &(*p)->wnext)
		if (*p == c) {
			*p = c->wnext;
			if (s->waiters_tail == c)
				s->waiters_tail = prev;
			break;
		}
	c->wnext = NULL;
	c->waiting = false;
}

static void waiters_append(struct server *s, struct client *c)
{
	if (c->waiting)
		return;
	c->wnext = NULL;
	if (s->waiters_tail)
		s->waiters_tail->wnext = c;
	else
		s->waiters = c;
	s->waiters_tail = c;
	c->waiting = true;
}

static void client_free(struct client *c, const char *why)
{
	struct server *s = c->server;

	log_debug("Client %" PRIu64 ": %s", c->id, why);
	waiters_remove(s, c);
	if (c->prev)
		c->prev->next = c->next;
	else
		s->clients = c->next;
	if (c->next)
		c->next->prev = c->prev;
	s->n_clients--;
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
				c->stalled_since = now_usec();
			return 0;
		}
		if (n < 0)
			return -errno;
		explicit_bzero(c->out + c->out_off, (size_t)n);
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
	struct server *s = c->server;
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
	struct server *s = c->server;
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
	struct server *s = c->server;

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
		client_free(c, why);
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
		client_free(c,
		            c->owed > 0 || c->out_len > 0 ? "went away during a read" : "hung up");
		return 0;
	}
	if ((revents & EPOLLIN) && !c->eof && c->in_len < sizeof(c->in)) {
		ssize_t n = recv(fd, c->in + c->in_len, sizeof(c->in) - c->in_len, MSG_DONTWAIT);

		if (n == 0)
			c->eof = true;
		else if (n < 0 && errno != EAGAIN && errno != EINTR) {
			client_free(c, "failed to read, dropping");
			return 0;
		} else if (n > 0)
			c->in_len += (size_t)n;
	}
	(void)client_step(c);
	return 0;
}

static void serve_waiters(struct server *s)
{
	/* Oldest first. A waiter that is served in full and asks again joins the end of the
	 * line; the rounds go on while bytes and waiters that can take them are left. */
	for (bool progress = true; progress && s->waiters;) {
		struct client *list = s->waiters, *next;

		progress = false;
		s->waiters = s->waiters_tail = NULL;
		for (struct client *c = list; c; c = next) {
			next = c->wnext;
			c->wnext = NULL;
			c->waiting = false;
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

static int on_accept(sd_event_source *src, int fd, uint32_t revents, void *userdata)
{
	struct server *s = userdata;

	(void)src, (void)revents;
	/* A bounded batch per wakeup keeps one busy listener from starving the clients. */
	for (unsigned i = 0; i < 64; i++) {
		struct client *c;
		int cfd, r;

		cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (cfd < 0) {
			uint64_t now = now_usec();

			if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED)
				return 0;
			if (now - s->last_accept_log > 10 * 1000000ULL) {
				log_warning_errno(
				    errno, "Failed to accept a client, pausing for a second: %m");
				s->last_accept_log = now;
			}
			for (unsigned k = 0; k < s->n_listeners; k++)
				(void)sd_event_source_set_enabled(s->listeners[k].src,
				                                  SD_EVENT_OFF);
			s->accept_paused = true;
			return 0;
		}
		if (s->n_clients >= arg_max_clients) {
			uint64_t now = now_usec();

			s->stats.refused++;
			if (now - s->last_refused_log > 10 * 1000000ULL) {
				log_warning("Refusing clients: %u is the limit (--max-clients)",
				            s->n_clients);
				s->last_refused_log = now;
			}
			safe_close(cfd);
			continue;
		}
		(void)setsockopt(cfd, SOL_SOCKET, SO_SNDBUF, &(int){CLIENT_SNDBUF}, sizeof(int));
		c = calloc(1, sizeof(*c));
		if (!c) {
			safe_close(cfd);
			log_oom();
			continue;
		}
		c->server = s;
		c->fd = cfd;
		c->id = ++s->next_id;
		c->events = EPOLLIN;
		r = sd_event_add_io(s->event, &c->io, cfd, c->events, on_client, c);
		if (r < 0) {
			log_warning_errno(r, "Failed to watch a client, dropping it: %m");
			safe_close(cfd);
			free(c);
			continue;
		}
		c->next = s->clients;
		if (s->clients)
			s->clients->prev = c;
		s->clients = c;
		s->n_clients++;
		s->stats.accepted++;
		log_debug("Client %" PRIu64 ": connected (%u now)", c->id, s->n_clients);
	}
	return 0;
}

/* ---- the broker side ---- */

static int on_refill(sd_event_source *src, int fd, uint32_t revents, void *userdata)
{
	struct server *s = userdata;
	struct egd_refill_stats st;

	(void)src, (void)fd, (void)revents;
	egd_refill_ack(s->refill);
	egd_refill_stats(s->refill, &st);
	if (st.failed)
		return sd_event_exit(s->event, 1);
	serve_waiters(s);
	return 0;
}

static void log_stats(struct server *s, bool final)
{
	struct egd_refill_stats st;
	const struct stats *t = &s->stats;
	char status[512];

	egd_refill_stats(s->refill, &st);
	snprintf(status, sizeof(status),
	         "%u clients, %zu bytes buffered; served %" PRIu64 " bytes (%" PRIu64
	         " by blocking reads) to %" PRIu64 " clients",
	         s->n_clients, egd_refill_level(s->refill), t->served, t->served_blocking,
	         t->accepted);
	(void)sd_notifyf(false, "STATUS=%s", status);
	if (!final)
		return;
	log_info("%s; requests: level %" PRIu64 ", read %" PRIu64 ", read-blocking %" PRIu64
	         ", write %" PRIu64 ", pid %" PRIu64 "; dropped: %" PRIu64 " stalled, %" PRIu64
	         " unknown command, %" PRIu64 " gone mid-read, %" PRIu64
	         " refused; broker: %" PRIu64 " bytes fetched, %" PRIu64
	         " bytes of writes donated, %" PRIu64 " dropped",
	         status, t->requests[EGD_CMD_LEVEL], t->requests[EGD_CMD_READ],
	         t->requests[EGD_CMD_READ_BLOCK], t->requests[EGD_CMD_WRITE],
	         t->requests[EGD_CMD_PID], t->dropped_stalled, t->dropped_unknown, t->dropped_gone,
	         t->refused, st.fetched, st.donated, st.donate_dropped);
}

/* Drops clients that left an answer unread for too long, and refreshes the STATUS line. */
static int on_sweep(sd_event_source *src, uint64_t usec, void *userdata)
{
	struct server *s = userdata;
	uint64_t now = now_usec(), limit = arg_client_timeout_s * 1000000ULL;
	struct client *next;

	if (s->accept_paused) {
		for (unsigned k = 0; k < s->n_listeners; k++)
			(void)sd_event_source_set_enabled(s->listeners[k].src, SD_EVENT_ON);
		s->accept_paused = false;
	}
	for (struct client *c = s->clients; c; c = next) {
		next = c->next;
		if (c->stalled_since && now - c->stalled_since >= limit) {
			s->stats.dropped_stalled++;
			client_free(c, "did not read its answer in time, dropping");
		}
	}
	if (now - s->last_status >= 10 * 1000000ULL) {
		log_stats(s, false);
		s->last_status = now;
	}
	return sd_event_source_set_time(src, usec + 1000000);
}

static int on_exit_signal(sd_event_source *src, const struct signalfd_siginfo *si, void *userdata)
{
	struct server *s = userdata;

	(void)src;
	log_debug("Received %s, stopping", strsignal((int)si->ssi_signo));
	(void)sd_notify(false, "STOPPING=1");
	return sd_event_exit(s->event, 0);
}

/* ---- set-up ---- */

static int listen_all(struct server *s)
{
	char **names = NULL;
	int n, r = 0;

	n = sd_listen_fds_with_names(true, &names);
	if (n < 0)
		return log_error_errno(n, "Failed to take the sockets systemd passed: %m");
	if (n > LISTENERS_MAX) {
		r = log_error_errno(E2BIG, "systemd passed %d sockets; at most %d", n,
		                    LISTENERS_MAX);
		goto done;
	}
	for (int i = 0; i < n; i++) {
		int fd = SD_LISTEN_FDS_START + i;
		const char *name = names && names[i] ? names[i] : "unknown";
		struct listener *l = &s->listeners[s->n_listeners++];

		l->fd = fd;
		snprintf(l->name, sizeof(l->name), "%s", name);
		if (sd_is_socket(fd, AF_UNSPEC, SOCK_STREAM, 1) <= 0) {
			r = log_error_errno(
			    EBADF,
			    "File descriptor %d (\"%s\") passed by systemd is not a listening stream socket",
			    fd, name);
			goto done;
		}
		/* Accepting in batches needs a non-blocking socket; systemd hands it blocking. */
		if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0) {
			r = log_error_errno(errno, "Failed to make socket \"%s\" non-blocking: %m",
			                    name);
			goto done;
		}
		log_debug("Serving socket \"%s\" (fd %d)", name, fd);
	}
	if (n == 0) {
		if (arg_n_listen == 0) {
			r = log_error_errno(
			    EINVAL,
			    "Nothing to listen on: no sockets from systemd and no --listen");
			goto done;
		}
		for (unsigned i = 0; i < arg_n_listen; i++) {
			struct listener *l = &s->listeners[s->n_listeners];
			struct eb_uri u;

			r = eb_uri_parse(arg_listen[i], &u);
			if (r < 0 || (u.kind != EB_URI_UNIX && u.kind != EB_URI_TCP)) {
				r = log_error_errno(
				    EINVAL,
				    "Invalid --listen \"%s\": expected unix:/PATH or tcp://HOST:PORT",
				    arg_listen[i]);
				goto done;
			}
			r = eb_uri_listen(&u, &l->fd);
			if (r < 0) {
				log_error_errno(r, "Failed to listen on %s: %m", arg_listen[i]);
				goto done;
			}
			s->n_listeners++;
			/* As eb-sink-egd.socket's SocketMode=0660: the group decides who reads. */
			if (u.kind == EB_URI_UNIX && chmod(u.path, 0660) < 0) {
				r = log_error_errno(errno, "Failed to chmod %s: %m", u.path);
				goto done;
			}
			snprintf(l->name, sizeof(l->name), "%s", arg_listen[i]);
			log_info("Listening on %s", arg_listen[i]);
		}
	}
	for (unsigned i = 0; i < s->n_listeners; i++) {
		r = sd_event_add_io(s->event, &s->listeners[i].src, s->listeners[i].fd, EPOLLIN,
		                    on_accept, s);
		if (r < 0) {
			log_error_errno(r, "Failed to watch %s: %m", s->listeners[i].name);
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

/* Each client costs a descriptor; the soft limit is often 1024 where the hard one is far
 * higher. */
static void raise_nofile(void)
{
	struct rlimit rl;
	rlim_t want = (rlim_t)arg_max_clients + LISTENERS_MAX + 32;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= want)
		return;
	rl.rlim_cur = MIN(want, rl.rlim_max);
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur < want)
		log_warning(
		    "Open files are limited to %llu: fewer than --max-clients=%llu clients can connect",
		    (unsigned long long)rl.rlim_cur, arg_max_clients);
}

static int parse_args(int argc, char *argv[], struct eb_client_options *o)
{
	enum {
		ARG_BUFFER_SIZE = EB_CLI_ARG_FIRST_PRIVATE,
		ARG_LOW_WATER,
		ARG_MAX_CLIENTS,
		ARG_CLIENT_TIMEOUT,
	};
	static const struct option options[] = {
	    EB_CLI_CLIENT_OPTIONS,
	    {"listen", required_argument, NULL, 'l'},
	    {"buffer-size", required_argument, NULL, ARG_BUFFER_SIZE},
	    {"low-water", required_argument, NULL, ARG_LOW_WATER},
	    {"max-clients", required_argument, NULL, ARG_MAX_CLIENTS},
	    {"client-timeout", required_argument, NULL, ARG_CLIENT_TIMEOUT},
	    {},
	};
	int c, r;

	while ((c = getopt_long(argc, argv, EB_CLI_CLIENT_SHORTOPTS "l:", options, NULL)) >= 0) {
		r = eb_cli_client_option(c, optarg, o, "eb-sink-egd", help);
		if (r == -1)
			return 0;
		if (r == -2)
			return -EINVAL;
		if (r == 1)
			continue;
		switch (c) {
		case 'l':
			if (arg_n_listen >= LISTENERS_MAX)
				return log_error_errno(EINVAL, "At most %d --listen addresses",
				                       LISTENERS_MAX);
			arg_listen[arg_n_listen++] = optarg;
			break;
		case ARG_BUFFER_SIZE:
			if (eb_cli_parse_u64(optarg, EGD_BUFFER_MIN, EGD_BUFFER_MAX,
			                     &arg_buffer_size) < 0)
				return log_error_errno(
				    EINVAL, "Invalid --buffer-size \"%s\": expected %d to %d bytes",
				    optarg, EGD_BUFFER_MIN, EGD_BUFFER_MAX);
			break;
		case ARG_LOW_WATER:
			if (eb_cli_parse_u64(optarg, 1, 100, &arg_low_water_pct) < 0)
				return log_error_errno(
				    EINVAL,
				    "Invalid --low-water \"%s\": expected 1 to 100 (percent)",
				    optarg);
			break;
		case ARG_MAX_CLIENTS:
			if (eb_cli_parse_u64(optarg, 1, 65536, &arg_max_clients) < 0)
				return log_error_errno(
				    EINVAL, "Invalid --max-clients \"%s\": expected 1 to 65536",
				    optarg);
			break;
		case ARG_CLIENT_TIMEOUT:
			if (eb_cli_parse_u64(optarg, 1, 86400, &arg_client_timeout_s) < 0)
				return log_error_errno(
				    EINVAL,
				    "Invalid --client-timeout \"%s\": expected 1 to 86400 seconds",
				    optarg);
			break;
		default:
			return -EINVAL;
		}
	}
	if (optind < argc)
		return log_error_errno(EINVAL, "Unexpected argument \"%s\"; see --help",
		                       argv[optind]);
	/* The units name their brokers in an EnvironmentFile=, one list for every sink. */
	r = eb_cli_client_env(o);
	if (r < 0)
		return log_error_errno(r, "Invalid $EB_BROKER: at most %d brokers",
		                       EB_CLIENT_BROKERS_MAX);
	return 1;
}

static void server_done(struct server *s)
{
	while (s->clients)
		client_free(s->clients, "the sink is stopping");
	for (unsigned i = 0; i < s->n_listeners; i++) {
		sd_event_source_disable_unref(s->listeners[i].src);
		safe_close(s->listeners[i].fd);
	}
	sd_event_source_disable_unref(s->refill_src);
	sd_event_source_disable_unref(s->sweep_src);
	sd_event_unref(s->event);
}

int main(int argc, char *argv[])
{
	struct eb_client_options o = {.roles = EB_ROLE_SINK, .kind = "egd"};
	struct egd_refill_options ro = {};
	struct server s = {};
	struct egd_refill_stats st;
	sigset_t mask;
	int r, ret = 1;

	log_setup(argv[0]);
	r = parse_args(argc, argv, &o);
	if (r <= 0)
		return r < 0 ? 2 : 0;
	signal(SIGPIPE, SIG_IGN);
	raise_nofile();

	ro.client = o;
	ro.capacity = arg_buffer_size;
	/* A GET asks for at least 8 bytes, so the refill point leaves room for that. */
	ro.low_water =
	    MIN(MAX(arg_buffer_size * arg_low_water_pct / 100, 1ULL), arg_buffer_size - 8);
	ro.donate_max = DONATE_MAX;
	r = egd_refill_new(&ro, &s.refill);
	if (r < 0)
		return r == -ENOMEM || r == -EMFILE ? 1 : 2;
	s.pid_len = (size_t)snprintf(s.pid, sizeof(s.pid), "%d", (int)getpid());

	/* Blocked before the refill thread starts, so that it inherits the mask and the
	 * signals reach the event loop. */
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0) {
		log_error_errno(errno, "Failed to block signals: %m");
		goto out;
	}
	r = sd_event_default(&s.event);
	if (r < 0) {
		log_error_errno(r, "Failed to create the event loop: %m");
		goto out;
	}
	if (sd_event_add_signal(s.event, NULL, SIGTERM, on_exit_signal, &s) < 0 ||
	    sd_event_add_signal(s.event, NULL, SIGINT, on_exit_signal, &s) < 0) {
		log_error("Failed to watch signals");
		goto out;
	}
	r = sd_event_set_watchdog(s.event, true);
	if (r < 0) {
		log_error_errno(r, "Failed to set up the watchdog: %m");
		goto out;
	}
	r = listen_all(&s);
	if (r < 0) {
		ret = r == -EINVAL ? 2 : 1;
		goto out;
	}
	r = sd_event_add_io(s.event, &s.refill_src, egd_refill_fd(s.refill), EPOLLIN, on_refill,
	                    &s);
	if (r >= 0)
		r = sd_event_add_time_relative(s.event, &s.sweep_src, CLOCK_MONOTONIC, 1000000, 0,
		                               on_sweep, &s);
	if (r >= 0)
		r = sd_event_source_set_enabled(s.sweep_src, SD_EVENT_ON);
	if (r < 0) {
		log_error_errno(r, "Failed to set up the event loop: %m");
		goto out;
	}
	r = egd_refill_start(s.refill);
	if (r < 0) {
		log_error_errno(r, "Failed to start the refill thread: %m");
		goto out;
	}
	(void)sd_notify(false, "READY=1\nSTATUS=Filling the buffer");
	r = sd_event_loop(s.event);
	if (r < 0)
		log_error_errno(r, "Event loop failed: %m");
	egd_refill_stats(s.refill, &st);
	ret = r == 0 && !st.failed ? 0 : 1;
	log_stats(&s, true);
out:
	server_done(&s);
	if (egd_refill_stop_and_free(s.refill, 2000) < 0) {
		/* The thread is stuck in a broker call; its buffers are wiped and the process
		 * ends around it. */
		egd_refill_wipe(s.refill);
		log_debug("The broker call did not return in time; exiting without it");
		_exit(ret);
	}
	return ret;
}
