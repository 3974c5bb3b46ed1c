/* SPDX-License-Identifier: MIT */
/* The event loop's side of [upstream]: when to draw, and crediting what the thread hands over. */
#include "upstream.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <systemd/sd-event.h>

#include "broker.h"
#include "chain.h"
#include "client.h"
#include "health.h"
#include "history.h"
#include "key.h"
#include "log.h"
#include "macro.h"
#include "pool.h"
#include "serve.h"
#include "time-util.h"
#include "upstream-internal.h"
#include "uri.h"

/* The client's own timeout per step: how long a stop may wait for the thread, at worst about
 * this plus the 1 s a GET's answer is allowed on top. */
#define UPSTREAM_TIMEOUT_MS 3000
/* After a DATA whose bytes the health tests refused, the next DRAW waits this long, as a DATA of
 * 0 bytes or an EMPTY is waited on: an upstream sending a counter was asked again at once,
 * 15,500-25,100 DATA frames in 5 s (issue 31). The thread may have sent one more GET before it
 * hears, so such an upstream answers at most 2 GETs a second. */
#define UPSTREAM_HOLD_USEC (1000 * 1000)
/* Records taken per wake-up, so that a fast upstream cannot starve the rest of the loop. */
#define NOTES_PER_WAKEUP 16
/* The drop-in that gives eb-brokerd.service the network for [upstream] over TCP. */
#define UPSTREAM_DROPIN EB_EXAMPLES_DIR "/eb-brokerd-upstream.conf"

struct upstream {
	struct broker *b;
	struct up_thread t;
	bool started; /* the thread was created: join it */
	bool running; /* and has not ended on its own */
	int fd;       /* the loop's end */
	sd_event_source *io;
	bool drawing;  /* a DRAW is out and not yet DONE */
	bool too_deep; /* logged that the chain is over EB_CHAIN_MAX */
	bool tcp;      /* a broker= is tcp:// */
	bool netless;  /* logged that this network namespace has only lo */
	uint64_t chain[EB_CHAIN_MAX];
	int n_chain; /* what the thread was told last */
	uint64_t bits_in, bytes_in;
	/* The upstream's bytes pass SP 800-90B's RCT and APT as 8-bit samples claimed at 8 bits
	 * each, as a source's samples do at their claim: what the upstream vouches for is full
	 * entropy, and a run of zeros is not. */
	struct eb_health health;
	uint64_t health_episodes; /* logged so far */
	uint64_t hold_until;      /* broker_now() before which no DRAW goes out (the health hold) */
	sd_event_source *hold_timer;
	char last_broker[EB_TEXT_MAX + 64], last_failure[EB_TEXT_MAX + 64];
	/* For an admin: connected or failing since (CLOCK_REALTIME ms; 0: neither yet), and the
	 * last DATA. */
	bool connected;
	uint64_t since_ms, data_ms;
	uint8_t *buf; /* one record */
	/* A command the socket had no room for, sent when it has: the latest state of what the
	 * thread should do, so that a DRAW is never lost, only merged with what follows it. */
	bool cmd_queued;
	struct up_cmd queued;
	/* The key the thread was given last (upstream-key.c), and the one the connection logged
	 * in with; a REKEY not yet sent waits in rekey, ahead of queued. */
	struct up_key key;
	uint32_t conn_gen;
	bool rekey_queued;
	struct up_cmd rekey;
};

const struct up_key *upstream_key(const struct upstream *u)
{
	return &u->key;
}

/* Sends what is queued; the io source watches for room only while something is. */
static void flush_cmd(struct upstream *u)
{
	if (u->rekey_queued) {
		if (send(u->fd, &u->rekey, sizeof(u->rekey), MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
			if (errno != EAGAIN && errno != EINTR)
				log_debug_errno(errno,
				                "Failed to give the upstream thread its key: %m");
			(void)sd_event_source_set_io_events(u->io, EPOLLIN | EPOLLOUT);
			return;
		}
		explicit_bzero(&u->rekey, sizeof(u->rekey));
		u->rekey_queued = false;
	}
	if (!u->cmd_queued) {
		(void)sd_event_source_set_io_events(u->io, EPOLLIN);
		return;
	}
	if (send(u->fd, &u->queued, sizeof(u->queued), MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
		if (errno != EAGAIN && errno != EINTR)
			log_debug_errno(errno, "Failed to ask the upstream thread: %m");
		(void)sd_event_source_set_io_events(u->io, EPOLLIN | EPOLLOUT);
		return;
	}
	u->cmd_queued = false;
	(void)sd_event_source_set_io_events(u->io, EPOLLIN);
}

/* Tells the thread to draw bits more (0: nothing more), with the chain as it stands now. */
static void send_cmd(struct upstream *u, uint64_t bits)
{
	struct up_cmd cmd = {.type = UP_CMD_DRAW, .bits = bits};
	int n = chain_path(u->b, cmd.chain);

	if (n < 0) {
		/* Ids that do not fit cannot be vouched for: a cycle among them would go unseen. */
		if (!u->too_deep)
			log_warning(
			    "Not drawing from upstream: more than %u brokers draw through this one",
			    EB_CHAIN_MAX);
		u->too_deep = true;
		return;
	}
	u->too_deep = false;
	cmd.n_chain = (uint32_t)n;
	/* A path change after a DRAW still queued keeps the DRAW's bits: the thread takes the
	 * chain and the amount from the same record. */
	if (u->cmd_queued && bits == 0)
		cmd.bits = u->queued.bits;
	/* A HOLD still queued stays one: a path change after it must not restart the draw. */
	if (u->cmd_queued && u->queued.type == UP_CMD_HOLD && bits == 0)
		cmd.type = UP_CMD_HOLD;
	u->queued = cmd;
	u->cmd_queued = true;
	flush_cmd(u);
	u->n_chain = n;
	memcpy(u->chain, cmd.chain, sizeof(u->chain));
	if (bits > 0)
		u->drawing = true;
}

void upstream_level_changed(struct broker *b)
{
	struct upstream *u = b->upstream;
	const struct eb_conf_upstream *c = &b->conf->upstream;
	uint64_t level, capacity;

	if (!u || !u->running || u->drawing || b->stopping)
		return;
	if (broker_now(b) < u->hold_until) {
		/* The hold's timer calls again when it is over. */
		if (u->hold_timer && sd_event_source_set_time(u->hold_timer, u->hold_until) >= 0)
			(void)sd_event_source_set_enabled(u->hold_timer, SD_EVENT_ONESHOT);
		return;
	}
	level = eb_pool_level(b->pool);
	capacity = eb_pool_capacity(b->pool);
	/* In percent of capacity, as [broker]'s thresholds are; no overflow: capacity <= 2^31. */
	if (level * 100 >= capacity * c->low_water_pct)
		return;
	/* No more than the room below capacity: the pool would not credit the rest, and the
	 * upstream would have spent it for nothing. */
	send_cmd(u, MIN(c->draw_bits, (capacity - level) / 512 * 512));
}

void upstream_path_changed(struct broker *b)
{
	struct upstream *u = b->upstream;
	uint64_t chain[EB_CHAIN_MAX];
	int n;

	if (!u || !u->running || b->stopping)
		return;
	n = chain_path(b, chain);
	if (n == u->n_chain && memcmp(chain, u->chain, (size_t)n * sizeof(*chain)) == 0)
		return;
	send_cmd(u, 0);
	/* A path that shrank back under the limit lets a stopped refill start again. */
	upstream_level_changed(b);
}

void upstream_get_view(const struct upstream *u, struct upstream_view *ret)
{
	*ret = (struct upstream_view){
	    .broker = u->last_broker,
	    .failing = u->last_failure[0] != '\0',
	    .state = u->last_failure[0] ? EB_UPSTREAM_FAILING
	             : u->connected     ? EB_UPSTREAM_CONNECTED
	                                : EB_UPSTREAM_CONNECTING,
	    .reason = u->last_failure,
	    .since_ms = u->since_ms,
	    .data_ms = u->data_ms,
	    .bytes_in = u->bytes_in,
	    .bits_in = u->bits_in,
	};
}

/* The bits of a DATA its bytes may carry: what the upstream vouched for (at most 8 a byte; the
 * codec refuses more), and only for the bytes the health tests passed. Logs the start and the end
 * of a failure episode, once each. */
static uint32_t health_credit(struct upstream *u, const struct up_note *h, const uint8_t *data)
{
	struct eb_health_failure f;
	size_t ok = 0;
	bool failed_before = eb_health_get_state(&u->health) == EB_HEALTH_FAILED;

	if (eb_health_feed(&u->health, data, h->len, &ok) < 0)
		return 0; /* no 8-bit sample is too wide: cannot happen */
	if (u->health.episodes > u->health_episodes && eb_health_get_failure(&u->health, &f) >= 0) {
		u->health_episodes = u->health.episodes;
		log_warning(
		    "Upstream %s: its bytes failed the %s health test (cutoff %u, count %u, value 0x%02x); crediting nothing from upstream until %u clean bytes",
		    u->last_broker, eb_health_test_to_string(f.test), f.cutoff, f.count, f.value,
		    EB_HEALTH_STARTUP_SAMPLES);
	} else if (failed_before && eb_health_get_state(&u->health) == EB_HEALTH_OK)
		log_notice(
		    "Upstream %s: %u clean bytes after a health-test failure; crediting again",
		    u->last_broker, EB_HEALTH_STARTUP_SAMPLES);
	return (uint32_t)MIN((uint64_t)h->bits, 8 * (uint64_t)ok);
}

/* The upstream's bytes failed the health tests (or vouched for more than they can carry): the
 * rest of this draw is dropped, and the next waits UPSTREAM_HOLD_USEC, as from an upstream that
 * sends nothing. */
static void hold(struct upstream *u)
{
	/* The chain the thread has already: a HOLD changes nothing else. */
	struct up_cmd cmd = {.type = UP_CMD_HOLD, .n_chain = (uint32_t)MAX(u->n_chain, 0)};

	memcpy(cmd.chain, u->chain, sizeof(cmd.chain));
	u->hold_until = broker_now(u->b) + UPSTREAM_HOLD_USEC;
	if (!u->drawing)
		return;
	u->queued = cmd;
	u->cmd_queued = true;
	flush_cmd(u);
	u->drawing = false;
}

static int on_hold(sd_event_source *src, uint64_t usec, void *userdata)
{
	struct upstream *u = userdata;

	(void)src;
	(void)usec;
	upstream_level_changed(u->b);
	return 0;
}

static void take_data(struct upstream *u, const struct up_note *h, const uint8_t *data)
{
	uint64_t credited = 0;
	uint32_t bits;
	int r;

	/* Credit is what the upstream vouched for in its DATA and the health tests let through,
	 * never more: serve_put() clamps it to 8 bits a byte and to the room below capacity. */
	bits = h->bits > 8 * (uint64_t)h->len ? 0 : health_credit(u, h, data);
	/* Not the start-up test's first 1024 bytes: only a failure holds. */
	if (h->bits > 8 * (uint64_t)h->len || eb_health_get_state(&u->health) == EB_HEALTH_FAILED)
		hold(u);
	r = serve_put(u->b, data, h->len, bits, &credited);
	if (r < 0) {
		log_error_errno(r, "Failed to add what the upstream sent to the pool: %m");
		return;
	}
	u->bits_in += credited;
	u->bytes_in += h->len;
	u->data_ms = eb_wall_ms();
	/* In the history the draw is a source like the REPORT's upstream row: its user, kind
	 * "upstream". */
	history_count(u->b->history, HISTORY_SOURCE,
	              u->b->conf->upstream.user && u->b->conf->upstream.user[0]
	                  ? u->b->conf->upstream.user
	                  : "(by uid)",
	              "upstream", credited, broker_now(u->b));
	log_debug("Upstream: %" PRIu32 " bytes carrying %" PRIu32 " bits, %" PRIu64 " credited",
	          h->len, h->bits, credited);
}

/* Whether this process's network namespace has no interface but lo, as under
 * PrivateNetwork=yes: then no tcp:// upstream outside it can be reached. /proc/self/net/dev lists
 * the namespace's interfaces (ProcSubset=pid keeps /proc/self; RestrictAddressFamilies= rules
 * out netlink). False when it cannot tell. */
static bool only_loopback(void)
{
	_cleanup_fclose_ FILE *f = fopen("/proc/self/net/dev", "re");
	char line[512];
	unsigned n = 0;

	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		char *colon = strchr(line, ':'), *name = line;

		if (!colon)
			continue; /* the two header lines */
		*colon = '\0';
		name += strspn(name, " \t");
		if (strcmp(name, "lo") != 0)
			return false;
		n++;
	}
	return n > 0;
}

/* Whether a failure to reach an upstream is the network's: no answer at the address at all, as
 * in a namespace of its own. A refusal (a key, FORBIDDEN, a protocol error) is not. */
static bool network_failure(int err)
{
	return err == ECONNREFUSED || err == ENETUNREACH || err == EHOSTUNREACH ||
	       err == EADDRNOTAVAIL;
}

static void take_failure(struct upstream *u, const char *why, int err)
{
	/* The thread retries with back-off; a new reason is worth a line, a repeat not. */
	if (!u->last_failure[0])
		u->since_ms = eb_wall_ms();
	u->connected = false;
	if (strcmp(u->last_failure, why) != 0)
		log_warning("Upstream: %s; retrying with back-off", why);
	else
		log_debug("Upstream: %s, again", why);
	snprintf(u->last_failure, sizeof(u->last_failure), "%s", why);

	/* Why it cannot work, and what to do, once: the shipped eb-brokerd.service has
	 * PrivateNetwork=yes, and [upstream] over TCP needs the drop-in that turns it off. Only
	 * when the upstream could not be reached: a refusal after the connection has another cause.
	 */
	if (u->tcp && !u->netless && network_failure(err) && only_loopback()) {
		log_warning(
		    "Upstream: this broker's network namespace has no interface but lo "
		    "(eb-brokerd.service's PrivateNetwork=yes does that), so no tcp:// or srv: upstream "
		    "can be reached: give the service the network with \"systemctl edit "
		    "eb-brokerd.service\" as in %s, then restart it (eb-brokerd.conf(5), "
		    "[upstream])",
		    UPSTREAM_DROPIN);
		u->netless = true;
	}
}

static void take_note(struct upstream *u, const struct up_note *h, const uint8_t *data)
{
	const struct eb_conf_upstream *c = &u->b->conf->upstream;

	switch ((enum up_note_type)h->type) {
	case UP_NOTE_DATA:
		take_data(u, h, data);
		break;
	case UP_NOTE_DONE:
		u->drawing = false;
		upstream_level_changed(u->b);
		break;
	case UP_NOTE_CONNECTED:
		if (strcmp(u->last_broker, h->text) != 0 || u->last_failure[0] ||
		    h->bits != u->conn_gen)
			log_info("Drawing from upstream %s as user %s%s%s%s", h->text,
			         c->user ? c->user : "(by uid)",
			         !u->key.tls    ? ""
			         : u->key.id[0] ? " with key id "
			                        : " with its default key",
			         u->key.tls ? u->key.id : "",
			         h->bits != u->key.gen ? " (a key a reload replaced)"
			         : h->bits > 0         ? " (staged by a reload)"
			                               : "");
		u->conn_gen = h->bits;
		snprintf(u->last_broker, sizeof(u->last_broker), "%s", h->text);
		if (u->last_failure[0] || !u->connected)
			u->since_ms = eb_wall_ms();
		u->connected = true;
		u->last_failure[0] = '\0';
		break;
	case UP_NOTE_FAILED:
		take_failure(u, h->text, (int)h->bits);
		break;
	}
}

static int on_note(sd_event_source *src, int fd, uint32_t revents, void *userdata)
{
	struct upstream *u = userdata;

	(void)src;
	if (revents & EPOLLOUT)
		flush_cmd(u);
	for (unsigned k = 0; k < NOTES_PER_WAKEUP; k++) {
		struct up_note h;
		ssize_t n = recv(fd, u->buf, UP_NOTE_MAX, MSG_DONTWAIT);

		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return 0;
		if (n <= 0) {
			/* The thread ended on its own: out of memory, or a bug. */
			log_error(
			    "The upstream thread stopped; not drawing from upstream until restart");
			u->running = false;
			return sd_event_source_set_enabled(u->io, SD_EVENT_OFF);
		}
		if ((size_t)n < sizeof(h))
			continue;
		memcpy(&h, u->buf, sizeof(h));
		h.text[sizeof(h.text) - 1] = '\0';
		if (h.len == (size_t)n - sizeof(h) && h.len <= EB_DATA_MAX)
			take_note(u, &h, u->buf + sizeof(h));
		explicit_bzero(u->buf, (size_t)n);
	}
	return 0;
}

/* The thread's client, and the key it loaded, kept to compare a reload's with. */
static int make_client(struct upstream *u, const struct broker *b)
{
	const struct eb_conf_upstream *c = &b->conf->upstream;
	struct eb_client_options o = {
	    .n_brokers = c->n_brokers,
	    .user = c->user,
	    .key_file = c->key_file,
	    .key_id = c->key_id,
	    .roles = EB_ROLE_SINK,
	    .kind = "eb-brokerd upstream draw",
	    .timeout_ms = UPSTREAM_TIMEOUT_MS,
	};
	_cleanup_free_ char *error = NULL;
	int r;

	for (unsigned i = 0; i < c->n_brokers; i++)
		o.brokers[i] = c->brokers[i];
	r = eb_client_new(&o, &u->t.client, &error);
	if (r < 0)
		return log_error_errno(r, "%s: [upstream]: %s",
		                       b->conf->path ? b->conf->path : "configuration",
		                       error ? error : "invalid");
	r = up_key_init(&u->key, c);
	if (r < 0)
		return log_error_errno(r, "[upstream]: the key file changed while starting: %m");
	return 0;
}

int upstream_new(struct broker *b, struct upstream **ret)
{
	const struct eb_conf_upstream *c = &b->conf->upstream;
	struct upstream *u;
	int sv[2], r;

	*ret = NULL;
	if (!c->set)
		return 0;

	u = calloc(1, sizeof(*u));
	if (!u)
		return log_oom();
	u->b = b;
	u->fd = u->t.fd = -EBADF;
	for (unsigned i = 0; i < c->n_brokers; i++) {
		struct eb_uri uri;

		if (eb_uri_parse(c->brokers[i], &uri) >= 0 &&
		    (uri.kind == EB_URI_TCP || uri.kind == EB_URI_SRV))
			u->tcp = true;
	}
	r = eb_health_init(&u->health, 8.0, 8);
	assert(r >= 0); /* H = 8 for 8-bit samples is in range */
	u->n_chain = -1;
	u->buf = malloc(UP_NOTE_MAX);
	if (!u->buf) {
		upstream_free(u);
		return log_oom();
	}
	r = make_client(u, b);
	if (r < 0) {
		upstream_free(u);
		return r;
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		r = log_error_errno(errno, "Failed to create the upstream socket pair: %m");
		upstream_free(u);
		return r;
	}
	u->fd = sv[0];
	u->t.fd = sv[1];
	r = sd_event_add_time(b->event, &u->hold_timer, CLOCK_MONOTONIC, UINT64_MAX, 0, on_hold, u);
	if (r >= 0)
		r = sd_event_source_set_enabled(u->hold_timer, SD_EVENT_OFF);
	if (r < 0) {
		log_error_errno(r, "Failed to set up the upstream's timer: %m");
		upstream_free(u);
		return r;
	}
	r = sd_event_add_io(b->event, &u->io, u->fd, EPOLLIN, on_note, u);
	if (r < 0) {
		log_error_errno(r, "Failed to watch the upstream socket pair: %m");
		upstream_free(u);
		return r;
	}
	/* The thread inherits the signal mask brokerd_new() set up: signals stay the loop's. */
	r = -pthread_create(&u->t.id, NULL, upstream_thread, &u->t);
	if (r < 0) {
		log_error_errno(r, "Failed to start the upstream thread: %m");
		upstream_free(u);
		return r;
	}
	u->started = u->running = true;
	*ret = u;
	return 0;
}

struct upstream *upstream_free(struct upstream *u)
{
	if (!u)
		return NULL;
	if (u->started) {
		struct up_cmd cmd = {.type = UP_CMD_STOP};

		/* Shutting both ways also fails a send() the thread is blocked in, so it cannot
		 * wait for a reader that is gone; a client step in progress ends within its
		 * timeout. */
		(void)send(u->fd, &cmd, sizeof(cmd), MSG_NOSIGNAL | MSG_DONTWAIT);
		shutdown(u->fd, SHUT_RDWR);
		(void)pthread_join(u->t.id, NULL);
	}
	sd_event_source_disable_unref(u->io);
	sd_event_source_disable_unref(u->hold_timer);
	if (u->fd >= 0)
		close(u->fd);
	if (u->t.fd >= 0)
		close(u->t.fd);
	eb_client_free(u->t.client);
	explicit_bzero(&u->key, sizeof(u->key));
	explicit_bzero(&u->rekey, sizeof(u->rekey));
	if (u->buf)
		explicit_bzero(u->buf, UP_NOTE_MAX);
	free(u->buf);
	free(u);
	return NULL;
}

void upstream_key_stage(struct upstream *u, struct upstream_key *k, char *text, size_t size)
{
	text[0] = '\0';
	if (!k->change)
		return;
	memcpy(u->key.key, k->key, EB_KEY_SIZE);
	snprintf(u->key.id, sizeof(u->key.id), "%s", k->key_id);
	u->key.gen++;
	if (u->running) {
		u->rekey = (struct up_cmd){.type = UP_CMD_REKEY, .key_gen = u->key.gen};
		memcpy(u->rekey.key, k->key, EB_KEY_SIZE);
		snprintf(u->rekey.key_id, sizeof(u->rekey.key_id), "%s", k->key_id);
		u->rekey_queued = true;
		flush_cmd(u);
	}
	snprintf(text, size,
	         "upstream key staged (%s%s, %s): the next connection uses it, the one in use "
	         "keeps its key until the upstream ends it",
	         k->key_id[0] ? "key id " : "the default key", k->key_id, k->path);
	explicit_bzero(k->key, sizeof(k->key));
	k->change = false;
}
