/* SPDX-License-Identifier: MIT */
/* The broker: one sd-event loop that owns the pool, the listeners and every session. */
#pragma once

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <systemd/sd-event.h>

#include "admin.h"
#include "conf.h"
#include "list.h"
#include "listeners.h"
#include "log.h"
#include "proto.h"
#include "ratelimit.h"
#include "registry.h"
#include "scheduler.h"

struct ssl_ctx_st;
struct eb_pool;
struct session;
struct upstream;

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

struct broker {
	sd_event *event;
	struct eb_conf *conf; /* owned; replaced by a reload */
	/* Handshakes on worker threads read conf's users and keys (psk_lookup()): a reload
	 * replaces conf under the write lock. Everything else in the broker is the loop's. */
	pthread_rwlock_t conf_lock;
	uint64_t last_key_serial; /* the users' keys are numbered: broker_number_keys() */
	struct workers *workers;  /* NULL: handshakes on the loop (handshake-threads = 0) */
	const char *config_path;  /* --config, or NULL for the default path */
	struct eb_pool *pool;
	struct ssl_ctx_st *tls;
	struct sched_quota *quotas; /* parallel to conf->users */
	struct user_totals *totals; /* parallel to conf->users */
	uint64_t last_session_id;

	struct eb_listeners listeners;

	/* Every session and every count of them: written by registry.c alone. */
	struct registry registry;
	struct eb_list proxied; /* of proxied.node: waiting for a PROXY header (proxied.c) */
	unsigned n_proxied;
	struct eb_ratelimit peer_log[_PEER_LOG_MAX];

	/* DRBG mode reseeds from the pool at most once per SCHEDULER_DRBG_RESEED_USEC. */
	uint64_t drbg_reseed_usec;
	bool drbg_reseeded;

	/* Sinks whose GET waits, in the order they will be served. Only the run source answers
	 * them (and sends SLEEP and WAKE), never a session's own handler: what a session does
	 * reaches other sessions one loop iteration later, never from inside its own stack. */
	struct sched_queue queue;
	sd_event_source *run_source;  /* deferred: answers the queue, flow control */
	sd_event_source *queue_timer; /* the first wait in the queue ends */
	bool pool_changed;            /* since the run source last ran */
	bool queue_changed;           /* a GET joined an empty queue */

	bool sources_asleep;
	enum pool_zone zone;        /* where the level is now */
	enum pool_zone zone_logged; /* what the journal was last told */
	uint64_t zone_logged_usec;

	uint64_t bits_in, bits_out, bytes_drbg, bits_seed;
	uint64_t start_usec;
	bool status_dirty;
	bool stopping;
	/* The first error of the last reload, if it failed: STATUS= says so until one succeeds. */
	char *reload_error;

	/* Chaining (chain.c, upstream.c): this run's id, carried in HELLO upstream; the last
	 * refusal of a cycle logged, so that a downstream's retries do not repeat it; and the
	 * upstream this broker draws from, if any. */
	uint64_t chain_id;
	int chain_refused_user;
	uint64_t chain_refused_first;
	struct upstream *upstream;

	sd_event_source *status_timer, *notify_timer, *seed_timer;
	/* The last hour and day, sampled by its own timer (admin.c); a reload keeps it. */
	struct history *history;
	sd_event_source *history_timer;
	uint8_t *scratch; /* EB_DATA_MAX bytes of output on its way into a frame; wiped after */
};

/* Loads the configuration and its keys from path (NULL: EB_CONF_DEFAULT_PATH, whose absence
 * means defaults and no users). Logs every error found, one line each with file and line; on
 * failure hands the first of them to *ret_error (malloc()ed) if ret_error is not NULL. */
int broker_load_config(const char *path, struct eb_conf **ret, char **ret_error);
/* Takes conf, also on failure; config_path is kept for reloads (SIGHUP). */
int broker_new(struct eb_conf *conf, const char *config_path, struct broker **ret);
struct broker *broker_free(struct broker *b);
static inline void broker_freep(struct broker **b)
{
	if (*b)
		broker_free(*b);
}

/* Takes the fds systemd passed, or binds the URIs given (or the config's). */
int broker_listen(struct broker *b, char **uris, unsigned n_uris);
int broker_run(struct broker *b);

/* What sessions ask of the broker. Only these touch the pool; answers come later, from the run
 * source, through session_answer(). */
/* Conditions len bytes claiming claim_bits into the pool; returns the bits credited, or a
 * negative errno when the pool failed. */
int broker_put(struct broker *b, const uint8_t *data, size_t len, uint64_t claim_bits,
               uint64_t *ret_credited);
/* Queues a sink's GET; it is answered from the run source (DATA, QUOTA or EMPTY) within
 * SCHEDULER_WAIT_USEC. */
void broker_get(struct broker *b, struct sched_request *r);
/* Takes a GET out of the queue unanswered (its session is closing). */
void broker_cancel_get(struct broker *b, struct sched_request *r);
void broker_mark_status(struct broker *b);
void broker_fill_status(struct broker *b, struct eb_msg_status *ret);
uint64_t broker_now(struct broker *b);

/* Whether a log line of this kind may be written now; logs a summary of the lines held back in
 * the window that just ended first. */
bool broker_log_allowed(struct broker *b, enum peer_log kind);
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
