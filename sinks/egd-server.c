/* SPDX-License-Identifier: MIT */
#include "egd-server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "egd-proto.h"
#include "egd-refill.h"
#include "list.h"
#include "listeners.h"
#include "log.h"
#include "macro.h"

/* Input is read in chunks; a chunk holds at least one whole request. */
#define CLIENT_IN_MAX (2 * EGD_REQUEST_MAX)
/* One reply at a time: the largest is 0x01's count byte and 255 bytes. */
#define CLIENT_OUT_MAX (1 + EGD_COUNT_MAX)
/* The kernel holds what a client has not read yet; this caps that (the kernel doubles it), so
 * a client that never reads strands little entropy before it stalls and is dropped. */
#define CLIENT_SNDBUF (16 * 1024)
/* Warnings a flood of clients causes come at most this often. */
#define WARN_INTERVAL_USEC (10 * 1000000ULL)
/* The sweep for stalled clients, and the STATUS line's refresh at most every 10 s. */
#define SWEEP_USEC  1000000ULL
#define STATUS_USEC (10 * 1000000ULL)

/* Who a client is, as far as limits go: a uid over a unix socket, an IPv4 address, an IPv6
 * /64 (what one host is usually given), or for any other family the family alone. */
struct peer_key {
	int family;
	uint32_t uid;
	uint8_t addr[8];
};

/* The clients of one peer_key. Peers live as long as they have clients. */
struct peer {
	struct eb_list_node node; /* in server->peers */
	struct peer_key key;
	unsigned n_clients;
};

struct client {
	struct egd_server *server;
	struct peer *peer;
	struct eb_list_node node;  /* in server->clients */
	struct eb_list_node wnode; /* in server->waiters while a blocking read is owed bytes */
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
	uint64_t active;        /* server->activity when the client last sent or was sent bytes */
	uint64_t stalled_since; /* CLOCK_MONOTONIC usec since output has waited, 0 when none */
};

struct stats {
	uint64_t accepted, refused, requests[_EGD_CMD_MAX];
	uint64_t served, served_blocking;
	uint64_t dropped_stalled, dropped_unknown, dropped_gone, dropped_idle;
};

struct egd_server {
	sd_event *event;
	struct egd_refill *refill;
	struct egd_server_options opts;
	sd_event_source *refill_src, *sweep_src;
	struct eb_list clients; /* of client.node */
	struct eb_list waiters; /* of client.wnode, oldest first */
	struct eb_list peers;   /* of peer.node */
	unsigned n_clients;
	uint64_t next_id;
	uint64_t activity; /* counts events on clients: orders them by how recently they acted */
	uint64_t last_refused_log, last_accept_log, last_evict_log, last_status;
	struct stats stats;
	char pid[16];
	size_t pid_len;
};

static uint64_t server_now(struct egd_server *s)
{
	uint64_t t = 0;

	(void)sd_event_now(s->event, CLOCK_MONOTONIC, &t);
	return t;
}

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

static void client_free(struct client *c, const char *why)
{
	struct egd_server *s = c->server;

	log_debug("Client %" PRIu64 ": %s", c->id, why);
	waiters_remove(s, c);
	eb_list_remove(&s->clients, &c->node);
	s->n_clients--;
	if (--c->peer->n_clients == 0) {
		eb_list_remove(&s->peers, &c->peer->node);
		free(c->peer);
	}
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

/* ---- peers and their limits ---- */

static void peer_key_of(int fd, struct peer_key *ret)
{
	struct sockaddr_storage ss = {};
	socklen_t len = sizeof(ss);
	struct peer_key k = {};

	if (getpeername(fd, (struct sockaddr *)&ss, &len) < 0)
		ss.ss_family = AF_UNSPEC;
	k.family = ss.ss_family;
	if (ss.ss_family == AF_UNIX) {
		struct ucred uc;
		socklen_t l = sizeof(uc);

		/* Every unix client is someone: an unknown uid counts as one peer, nobody's. */
		k.uid = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &l) < 0 ? UINT32_MAX : uc.uid;
	} else if (ss.ss_family == AF_INET) {
		memcpy(k.addr, &((struct sockaddr_in *)&ss)->sin_addr, 4);
	} else if (ss.ss_family == AF_INET6) {
		const struct in6_addr *a = &((struct sockaddr_in6 *)&ss)->sin6_addr;

		if (IN6_IS_ADDR_V4MAPPED(a)) {
			k.family = AF_INET;
			memcpy(k.addr, a->s6_addr + 12, 4);
		} else
			memcpy(k.addr, a->s6_addr, 8);
	}
	*ret = k;
}

static bool peer_key_eq(const struct peer_key *a, const struct peer_key *b)
{
	return a->family == b->family && a->uid == b->uid && memcmp(a->addr, b->addr, 8) == 0;
}

/* The peer for the log: "uid 1000", "192.0.2.1", "2001:db8::/64". */
static const char *peer_name(const struct peer_key *k, char *buf, size_t size)
{
	uint8_t a6[16] = {};
	char a[INET6_ADDRSTRLEN];

	switch (k->family) {
	case AF_UNIX:
		snprintf(buf, size, "uid %" PRIu32, k->uid);
		break;
	case AF_INET:
		snprintf(buf, size, "%s", inet_ntop(AF_INET, k->addr, a, sizeof(a)) ?: "?");
		break;
	case AF_INET6:
		memcpy(a6, k->addr, 8);
		snprintf(buf, size, "%s/64", inet_ntop(AF_INET6, a6, a, sizeof(a)) ?: "?");
		break;
	default:
		snprintf(buf, size, "a peer of address family %d", k->family);
		break;
	}
	return buf;
}

static struct peer *peer_find(struct egd_server *s, const struct peer_key *k)
{
	struct peer *p;

	eb_list_foreach(p, &s->peers, node)
		if (peer_key_eq(&p->key, k))
			return p;
	return NULL;
}

/* Idle: owed no bytes and with no answer pending, so dropping it loses nothing it asked for. */
static bool client_idle(const struct client *c)
{
	return c->owed == 0 && c->out_len == 0;
}

/* The client of peer p (any peer when NULL) that has been idle longest, or NULL. */
static struct client *oldest_idle(struct egd_server *s, const struct peer *p)
{
	struct client *c, *best = NULL;

	eb_list_foreach(c, &s->clients, node)
		if ((!p || c->peer == p) && client_idle(c) && (!best || c->active < best->active))
			best = c;
	return best;
}

/* The peer with the most clients: at the total limit it is the one that gives up a slot. */
static struct peer *largest_peer(struct egd_server *s)
{
	struct peer *p, *best = NULL;

	eb_list_foreach(p, &s->peers, node)
		if (!best || p->n_clients > best->n_clients)
			best = p;
	return best;
}

/* Makes room for a new client of key: nothing when it is within both limits; else drops the
 * longest-idle client of the same peer (at --max-clients-per-peer), or of the peer with the
 * most clients, or of anyone (at --max-clients). Clients owed bytes are never dropped for a
 * newcomer. Returns false, having logged, when there is no room. */
static bool make_room(struct egd_server *s, const struct peer_key *key, struct peer *p)
{
	/* A share of all is a limit of its own only when it is less than all. */
	bool per_peer = p && s->opts.max_clients_per_peer < s->opts.max_clients &&
	                p->n_clients >= s->opts.max_clients_per_peer;
	struct client *victim = NULL;
	uint64_t now = server_now(s);
	char name[64];

	if (per_peer)
		victim = oldest_idle(s, p);
	else if (s->n_clients >= s->opts.max_clients) {
		victim = oldest_idle(s, largest_peer(s));
		if (!victim)
			victim = oldest_idle(s, NULL);
	} else
		return true;

	if (!victim) {
		s->stats.refused++;
		if (now - s->last_refused_log > WARN_INTERVAL_USEC) {
			if (per_peer)
				log_warning(
				    "Refusing clients of %s: all its %u clients are waiting for bytes (--max-clients-per-peer)",
				    peer_name(key, name, sizeof(name)), p->n_clients);
			else
				log_warning(
				    "Refusing clients: all %u are waiting for bytes (--max-clients)",
				    s->n_clients);
			s->last_refused_log = now;
		}
		return false;
	}
	s->stats.dropped_idle++;
	if (now - s->last_evict_log > WARN_INTERVAL_USEC) {
		if (per_peer)
			log_warning(
			    "Dropping idle clients of %s for its new ones: %u is the limit (--max-clients-per-peer)",
			    peer_name(key, name, sizeof(name)), p->n_clients);
		else
			log_warning(
			    "Dropping idle clients of %s for new ones: %u clients is the limit (--max-clients)",
			    peer_name(&victim->peer->key, name, sizeof(name)), s->n_clients);
		s->last_evict_log = now;
	}
	client_free(victim, "idle, dropped to make room");
	return true;
}

static void on_accept(struct eb_listener *l, int fd, void *userdata)
{
	struct egd_server *s = userdata;
	struct peer_key key;
	struct peer *p;
	struct client *c;
	int r;

	(void)l;
	peer_key_of(fd, &key);
	p = peer_find(s, &key);
	if (!make_room(s, &key, p)) {
		safe_close(fd);
		return;
	}
	/* Dropping a victim may have freed p, when the victim was its last client. */
	p = peer_find(s, &key);
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &(int){CLIENT_SNDBUF}, sizeof(int));
	c = calloc(1, sizeof(*c));
	if (!c) {
		safe_close(fd);
		log_oom();
		return;
	}
	if (!p) {
		p = calloc(1, sizeof(*p));
		if (!p) {
			free(c);
			safe_close(fd);
			log_oom();
			return;
		}
		p->key = key;
		eb_list_append(&s->peers, &p->node);
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
		if (p->n_clients == 0) {
			eb_list_remove(&s->peers, &p->node);
			free(p);
		}
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
			client_free(c, "did not read its answer in time, dropping");
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
		client_free(c, "the sink is stopping");
	sd_event_source_disable_unref(s->refill_src);
	sd_event_source_disable_unref(s->sweep_src);
	sd_event_unref(s->event);
	free(s);
	return NULL;
}
