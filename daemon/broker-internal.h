/* SPDX-License-Identifier: MIT */
/* What broker.c, serve.c and broker-config.c share; sessions and listeners do not use it. */
#pragma once

#include <stdint.h>

#include <systemd/sd-event.h>

struct broker;
struct eb_conf;

/* broker.c: the level's thresholds and the zone the journal is told of. */
uint64_t broker_low_water(const struct broker *b);  /* WAKE sources below this */
uint64_t broker_high_water(const struct broker *b); /* SLEEP sources at this */
/* Logs a change of zone (at most once a second) and marks the status for sd_notify(). */
void broker_update_zone(struct broker *b);
/* Sends STATUS= now: the pool, and a failed reload in front of it. */
void broker_notify_status(struct broker *b);

/* serve.c: the run source and the queue timer. */
/* The level moved, or its thresholds did: the zone now, flow control and the queue from the run
 * source. */
void broker_pool_changed(struct broker *b);
int broker_on_run(sd_event_source *src, void *userdata);
int broker_on_queue_timer(sd_event_source *src, uint64_t usec, void *userdata);

/* broker-config.c */
/* Raises the soft RLIMIT_NOFILE to what max-sessions and max-local-sessions need. */
void broker_raise_nofile(const struct eb_conf *conf);
/* SIGHUP: reads the configuration again; a file that does not load changes nothing. */
void broker_reload(struct broker *b);
/* Numbers the keys in new: a user whose key old had too keeps its number, any other key gets a
 * new one. A handshake's key lookup hands the number out, and the session checks it once the
 * handshake is done: a key rotated while the peer was still proving the old one is refused. */
void broker_number_keys(struct broker *b, const struct eb_conf *old, struct eb_conf *new);
