/* SPDX-License-Identifier: MIT */
/* The broker: one sd-event loop that owns the pool, the listeners and every session. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <systemd/sd-event.h>

#include "conf.h"
#include "proto.h"

struct ssl_ctx_st;
struct eb_pool;
struct session;
struct listener;

/* Where the pool level stands, for SLEEP/WAKE and for the journal. */
enum pool_zone {
	POOL_EMPTY, /* cannot back even a small request */
	POOL_LOW,   /* below low water: sources are woken */
	POOL_NORMAL,
	POOL_HIGH, /* at or above high water: sources are told to sleep */
	POOL_FULL, /* at capacity */
	_POOL_ZONE_MAX,
	_POOL_ZONE_INVALID = -22,
};

struct user_state {
	double quota_tokens; /* full-entropy bits this user may still draw */
	uint64_t quota_refilled_usec;
};

struct broker {
	sd_event *event;
	struct eb_conf *conf;    /* owned; replaced by a reload */
	const char *config_path; /* --config, or NULL for the default path */
	struct eb_pool *pool;
	struct ssl_ctx_st *tls;
	struct user_state *users; /* parallel to conf->users */

	struct listener *listeners;
	unsigned n_listeners;
	bool socket_activated;

	struct session *sessions; /* doubly linked through session->next/prev */
	unsigned n_sessions, n_sources, n_sinks;

	/* Sinks whose GET waits for the pool, in the order they will be served. */
	struct session *waitq;
	uint64_t waitq_seq;
	bool scheduling; /* scheduler_run() is on the stack */

	bool sources_asleep;
	enum pool_zone zone;        /* where the level is now */
	enum pool_zone zone_logged; /* what the journal was last told */
	uint64_t zone_logged_usec;

	uint64_t bits_in, bits_out, bytes_drbg, bits_seed;
	uint64_t start_usec;
	bool status_dirty;
	bool stopping;

	sd_event_source *status_timer, *notify_timer, *seed_timer;
	uint8_t *scratch; /* EB_DATA_MAX bytes of output on its way into a frame; wiped after */
};

/* Loads the configuration and its keys from path (NULL: EB_CONF_DEFAULT_PATH, whose absence
 * means defaults and no users). Logs what is wrong, with file and line. */
int broker_load_config(const char *path, struct eb_conf **ret);
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

/* Called by sessions after the pool level changed: flow control, waiting sinks, status. */
void broker_pool_changed(struct broker *b);
void broker_mark_status(struct broker *b);
void broker_fill_status(struct broker *b, struct eb_msg_status *ret);
uint64_t broker_now(struct broker *b);

/* listen.c */
int listeners_open(struct broker *b, char **uris, unsigned n_uris);
void listeners_free(struct broker *b);
