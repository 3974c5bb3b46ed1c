/* SPDX-License-Identifier: MIT */
/* The broker's shared state, the layer every module above the registry stands on: the loop, the
 * configuration, the pool, the registry of sessions, the GET queue, the counters, and the few
 * services all of them use (the clock, rate-limited peer logs, the pool's zone, the status).
 * brokerd.c makes it and wires the layers; docs/design.md draws them. */
#pragma once

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <systemd/sd-event.h>

#include "agent-word.h"
#include "conf.h"
#include "list.h"
#include "listeners.h"
#include "log.h"
#include "proto.h"
#include "ratelimit.h"
#include "registry.h"
#include "report.h"
#include "scheduler.h"

struct broker;
struct ssl_ctx_st;
struct eb_pool;
struct upstream;
struct registry_entry;
struct eb_msg;
struct eb_msg_report_req;
struct eb_msg_action_req;

/* One identity of a guest (session-clones.c): a key, by its serial (0: over plain unix, no key). */
struct clone_slot {
	uint64_t serial;
	/* A live session of it that draws; 0: none; CLONE_SLOT_LOOK: several may, look. */
	uint64_t session_id;
	uint64_t used_usec;   /* the last session that began to draw */
	uint64_t logged_usec; /* the journal last told of its clones */
};
#define CLONE_SLOTS (EB_USER_KEYS_MAX + 1)

/* A user's counters since start, its closed sessions included; the broker keeps one per user,
 * parallel to conf->users, and a reload carries them over by name. */
struct user_totals {
	uint64_t bytes_in, bits_in, bits_out, bytes_drbg;
	uint64_t empty_answers;     /* GETs answered EMPTY */
	uint64_t quota_answers;     /* GETs answered QUOTA */
	uint64_t quota_logged_usec; /* serve.c's: the journal last told of its spent quota */
	struct clone_slot clones[CLONE_SLOTS]; /* a guest's identities */
};

/* The calls that go up the layers, each by pointer, set once by brokerd_new(): the modules form
 * layers with no circle (scripts/check-layers), and these are the only ways a lower one reaches
 * a higher one. */
struct broker_hooks {
	/* serve.c's flow control: SLEEP (asleep) or WAKE to a ready source (session.h). */
	void (*set_asleep)(struct registry_entry *e, bool asleep);
	/* broker.c: the pool's level moved (upstream.h); NULL: nobody listens. */
	void (*level_changed)(struct broker *b);
	/* A session's REPORT request: a page of rows (admin.h). */
	int (*report)(struct broker *b, const struct eb_msg_report_req *q, uint8_t *buf,
	              size_t size, struct eb_msg *ret);
	/* A session's ACTION_REQ, and STATE_REQ (admin-actions.h). */
	void (*action)(struct broker *b, struct registry_entry *asker,
	               const struct eb_msg_action_req *q, struct eb_msg *ret);
	void (*state)(struct broker *b, struct eb_msg *ret);
};

/* Where the pool level stands, for SLEEP/WAKE and for the journal. */
enum pool_zone {
	POOL_EMPTY, /* cannot back even a small request */
	POOL_LOW,   /* below low water: sources are woken */
	POOL_NORMAL,
	POOL_HIGH, /* at or above high water: sources are told to sleep */
	POOL_FULL, /* at capacity */
	_POOL_ZONE_MAX,
	_POOL_ZONE_INVALID = -EINVAL,
};

/* Log lines a peer can cause, each kind rate-limited on its own (see broker_log_allowed()). */
enum peer_log {
	PEER_LOG_ACCEPT,    /* accept() failures */
	PEER_LOG_LIMIT,     /* connections refused at a session limit */
	PEER_LOG_HANDSHAKE, /* unauthenticated peers: TLS failures, unknown users, timeouts */
	PEER_LOG_REFUSED,   /* authenticated peers: refused requests, protocol errors */
	PEER_LOG_SESSION,   /* authenticated peers coming and going */
	PEER_LOG_RECORDS,   /* TLS peers past a limit on records: tiny records, KeyUpdate floods */
	_PEER_LOG_MAX,
	_PEER_LOG_INVALID = -EINVAL,
};

/* At most this many lines of one kind per window; then one line says how many were held back. */
#define PEER_LOG_BURST         20
#define PEER_LOG_INTERVAL_USEC (10 * 1000000ULL)

/* The loop's, but for conf, which handshake workers read under conf_lock. Each field is written by
 * the module its comment names, or by brokerd.c at start and end. */
struct broker {
	struct broker_hooks hooks;
	sd_event *event;
	struct eb_conf *conf; /* owned; replaced by a reload */
	/* Handshakes on worker threads read conf's users and keys (psk_lookup()): a reload
	 * replaces conf under the write lock. Everything else in the broker is the loop's. */
	pthread_rwlock_t conf_lock;
	uint64_t last_key_serial; /* the users' keys are numbered: broker_config_number_keys() */
	struct workers *workers;  /* NULL: handshakes on the loop (handshake-threads = 0) */
	const char *config_path;  /* --config, or NULL for the default path */
	struct eb_pool *pool;
	struct ssl_ctx_st *tls;
	struct sched_quota *quotas; /* parallel to conf->users: serve.c charges, a reload moves */
	struct user_totals *totals; /* parallel to conf->users: sessions count, a reload moves */
	uint64_t last_session_id;   /* session-dispatch.c numbers sessions at HELLO */

	struct eb_listeners listeners;

	/* Every session and every count of them: written by registry.c alone. */
	struct registry registry;
	struct eb_list proxied; /* of proxied.node: waiting for a PROXY header (proxied.c) */
	/* session-poll.c's: every session's socket in one epoll set, watched by poll_src; the
	 * sessions to pump again soon (comeback, run by comeback_src); and those freed while a
	 * batch of either ran (in_batch), whose memory waits for its end. */
	int poll_fd;
	sd_event_source *poll_src, *comeback_src;
	struct eb_list comeback, graveyard;
	unsigned n_comeback;
	bool in_batch;
	unsigned n_proxied;
	struct eb_ratelimit peer_log[_PEER_LOG_MAX];

	/* serve.c's: DRBG mode reseeds from the pool at most once per SCHEDULER_DRBG_RESEED_USEC.
	 */
	uint64_t drbg_reseed_usec;
	bool drbg_reseeded;

	/* serve.c's: sinks whose GET waits, in the order they will be served. Only the run source
	 * answers them (and sends SLEEP and WAKE), never a session's own handler: what a session
	 * does reaches other sessions one loop iteration later, never from inside its own stack. */
	struct sched_queue queue;
	sd_event_source *run_source;  /* deferred: answers the queue, flow control */
	sd_event_source *queue_timer; /* the first wait in the queue ends */
	bool pool_changed;            /* since the run source last ran */
	bool queue_changed;           /* a GET joined an empty queue */

	bool sources_asleep;        /* serve.c's flow control */
	enum pool_zone zone;        /* where the level is now */
	enum pool_zone zone_logged; /* what the journal was last told */
	uint64_t zone_logged_usec;

	uint64_t bits_in, bits_out, bytes_drbg, bits_seed;
	/* Refusals since start, by the counters table's ids (report.h): broker_count(). */
	uint64_t counters[_EB_COUNTER_MAX];
	uint64_t start_usec;
	bool status_dirty;
	bool stopping;
	/* The first error of the last reload, if it failed: STATUS= says so until one succeeds. */
	char *reload_error;
	/* broker-config.c's, for STATE: reloads since start, when the running configuration was
	 * loaded (CLOCK_REALTIME ms), when the last reload ended, and what it changed or why it
	 * failed. */
	uint32_t reloads, reload_failures;
	uint64_t config_loaded_ms, last_reload_ms;
	char reload_text[EB_TEXT_MAX + 1];
	/* admin-actions.c's: an admin's drain (the balancers' agent answers "drain"), who asked
	 * and since when; and the rate limit on every admin's actions. */
	bool drained;
	uint64_t drained_ms;
	char drained_by[EB_KIND_MAX + 1];
	struct eb_ratelimit actions;
	/* agent.c's: the hysteresis of what balancers are told, and the word told last (logged
	 * when it changes). */
	struct agent_state agent;
	enum agent_word agent_word;

	/* Chaining (chain.c, upstream.c): this run's id, carried in HELLO upstream; the brokers
	 * drawing through this one (chain_link.node); the last refusal of a cycle logged, so that
	 * a downstream's retries do not repeat it; and the upstream this broker draws from. */
	uint64_t chain_id;
	struct eb_list chain_links;
	int chain_refused_user;
	uint64_t chain_refused_first;
	struct upstream *upstream;

	sd_event_source *status_timer, *notify_timer, *seed_timer;
	/* The last hour and day, sampled by its own timer (admin.c); a reload keeps it. */
	struct history *history;
	sd_event_source *history_timer;
	uint8_t *scratch; /* EB_DATA_MAX bytes of output on its way into a frame; wiped after */
};

/* The level's thresholds and the zone the journal is told of. */
uint64_t broker_low_water(const struct broker *b);  /* WAKE sources below this */
uint64_t broker_high_water(const struct broker *b); /* SLEEP sources at this */
/* Logs a change of zone (at most once a second), marks the status for sd_notify() and tells the
 * hook (the upstream). */
void broker_update_zone(struct broker *b);
/* Tells the journal where the level is, at most once per ZONE_LOG_INTERVAL_USEC; the notify
 * timer calls it every second too, so a change held back is logged a moment later, not lost. */
void broker_log_zone(struct broker *b);
/* The pool's level, sources and sinks, as one journal line with its fields. */
void broker_log_pool(struct broker *b, int level, const char *msgid, const char *what);
/* Sends STATUS= now: the pool, and a failed reload in front of it. */
void broker_notify_status(struct broker *b);
void broker_mark_status(struct broker *b);
/* STATUS in the layout of version (0 .. EB_STATUS_VERSION). */
void broker_fill_status(struct broker *b, uint8_t version, struct eb_msg_status *ret);
uint64_t broker_now(struct broker *b);
/* One more of a refusal the admin's counters table shows; counted whether or not it is logged. */
static inline void broker_count(struct broker *b, enum eb_counter c)
{
	b->counters[c]++;
}

/* Whether a log line of this kind may be written now; logs a summary of the lines held back in
 * the window that just ended first. */
bool broker_log_allowed(struct broker *b, enum peer_log kind);
/* A burst that no later line follows is summed up here, from the one-second notify timer. */
void broker_flush_peer_logs(struct broker *b);
/* The periodic status line's MESSAGE_ID. */
#define MSGID_STATUS "d13ada50fb8f442fa4b17753c4d07182"
#define log_peer(b, kind, level, ...)                                                              \
	do {                                                                                       \
		if (broker_log_allowed(b, kind))                                                   \
			log_full(level, __VA_ARGS__);                                              \
	} while (0)
/* A refused peer, as log_peer() with the MESSAGE_ID the journal's catalog explains. */
#define MSGID_REFUSED "818b3631cad641cd86096a9c7da237a4"
#define log_peer_refused(b, kind, level, ...)                                                      \
	do {                                                                                       \
		if (broker_log_allowed(b, kind))                                                   \
			log_struct(level, "MESSAGE_ID=" MSGID_REFUSED, __VA_ARGS__);               \
	} while (0)
