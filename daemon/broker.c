/* SPDX-License-Identifier: MIT */
/* The broker's shared state and what every layer above asks of it: the clock, rate-limited peer
 * logs, the pool's zone and thresholds, and the status systemd and admins see. */
#include "broker.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>

#include "log.h"
#include "pool.h"

/* Journal message IDs; catalog/entropy-broker.catalog explains each. */
#define MSGID_EMPTY  "920903174bf44f4ea5d1618a32e772c1"
#define MSGID_LOW    "5dd456dd5ca94692b6dcddb20bb2033d"
#define MSGID_NORMAL "e4817e771f8e41dc87b4421dcbc1bab2"
#define MSGID_HIGH   "0a5ce97308b5492992b15d3855fcddd4"
#define MSGID_FULL   "104d8d93cda5411f8b5ac528c359f748"

/* Zone changes are logged at most this often, so that a pool hovering at a threshold under
 * heavy traffic does not flood the journal; the periodic status line reports the rest. */
#define ZONE_LOG_INTERVAL_USEC (1000000ULL)

uint64_t broker_now(struct broker *b)
{
	uint64_t now = 0;

	(void)sd_event_now(b->event, CLOCK_MONOTONIC, &now);
	return now;
}

static const char *peer_log_name(enum peer_log kind)
{
	switch (kind) {
	case PEER_LOG_ACCEPT:
		return "accept failures";
	case PEER_LOG_LIMIT:
		return "connections refused at a limit";
	case PEER_LOG_HANDSHAKE:
		return "unauthenticated peers";
	case PEER_LOG_REFUSED:
		return "refused requests";
	case PEER_LOG_SESSION:
		return "sessions";
	case PEER_LOG_RECORDS:
		return "TLS peers past a limit on records";
	case _PEER_LOG_MAX:
	case _PEER_LOG_INVALID:
		break;
	}
	return "invalid";
}

static void log_suppressed(enum peer_log kind, unsigned n)
{
	if (n > 0)
		log_notice("Suppressed %u more log messages about %s in the last %llu s", n,
		           peer_log_name(kind),
		           (unsigned long long)(PEER_LOG_INTERVAL_USEC / 1000000));
}

bool broker_log_allowed(struct broker *b, enum peer_log kind)
{
	unsigned suppressed;
	bool ok;

	ok = eb_ratelimit_below(&b->peer_log[kind], broker_now(b), &suppressed);
	log_suppressed(kind, suppressed);
	return ok;
}

void broker_flush_peer_logs(struct broker *b)
{
	for (int k = 0; k < _PEER_LOG_MAX; k++)
		log_suppressed(k, eb_ratelimit_flush(&b->peer_log[k], broker_now(b)));
}

static const char *zone_name(enum pool_zone z)
{
	switch (z) {
	case POOL_EMPTY:
		return "empty";
	case POOL_LOW:
		return "low";
	case POOL_NORMAL:
		return "normal";
	case POOL_HIGH:
		return "high";
	case POOL_FULL:
		return "full";
	case _POOL_ZONE_MAX:
	case _POOL_ZONE_INVALID:
		break;
	}
	return "invalid";
}

static const char *zone_msgid(enum pool_zone z)
{
	switch (z) {
	case POOL_EMPTY:
		return MSGID_EMPTY;
	case POOL_LOW:
		return MSGID_LOW;
	case POOL_NORMAL:
		return MSGID_NORMAL;
	case POOL_HIGH:
		return MSGID_HIGH;
	case POOL_FULL:
		return MSGID_FULL;
	case _POOL_ZONE_MAX:
	case _POOL_ZONE_INVALID:
		break;
	}
	return MSGID_STATUS;
}

uint64_t broker_low_water(const struct broker *b)
{
	return eb_pool_capacity(b->pool) / 100 * b->conf->low_water_pct;
}

uint64_t broker_high_water(const struct broker *b)
{
	return eb_pool_capacity(b->pool) / 100 * b->conf->high_water_pct;
}

static enum pool_zone current_zone(const struct broker *b)
{
	uint64_t level = eb_pool_level(b->pool), cap = eb_pool_capacity(b->pool);

	if (level < eb_pool_cost_bits(b->pool, 32))
		return POOL_EMPTY;
	if (level < broker_low_water(b))
		return POOL_LOW;
	if (level + 512 > cap)
		return POOL_FULL;
	if (level >= broker_high_water(b))
		return POOL_HIGH;
	return POOL_NORMAL;
}

static void format_fields(struct broker *b, const char *msgid, char *buf, size_t size)
{
	snprintf(buf, size,
	         "MESSAGE_ID=%s\nEB_POOL_BITS=%" PRIu64 "\nEB_POOL_CAPACITY_BITS=%" PRIu64
	         "\nEB_POOL_ZONE=%s\nEB_SOURCES=%u\nEB_SINKS=%u\nEB_BITS_IN=%" PRIu64
	         "\nEB_BITS_OUT=%" PRIu64,
	         msgid, eb_pool_level(b->pool), eb_pool_capacity(b->pool), zone_name(b->zone),
	         b->registry.n_sources, b->registry.n_sinks, b->bits_in, b->bits_out);
}

void broker_log_pool(struct broker *b, int level, const char *msgid, const char *what)
{
	uint64_t bits = eb_pool_level(b->pool), cap = eb_pool_capacity(b->pool);
	char fields[512];

	format_fields(b, msgid, fields, sizeof(fields));
	log_struct(level, fields,
	           "%s: %" PRIu64 " of %" PRIu64 " bits (%u%%), %u source%s, %u sink%s, %" PRIu64
	           " bits in, %" PRIu64 " bits out",
	           what, bits, cap, (unsigned)(bits * 100 / cap), b->registry.n_sources,
	           b->registry.n_sources == 1 ? "" : "s", b->registry.n_sinks,
	           b->registry.n_sinks == 1 ? "" : "s", b->bits_in, b->bits_out);
}

void broker_log_zone(struct broker *b)
{
	uint64_t now = broker_now(b);
	char what[64];

	if (b->zone == b->zone_logged || now < b->zone_logged_usec + ZONE_LOG_INTERVAL_USEC)
		return;
	b->zone_logged = b->zone;
	b->zone_logged_usec = now;
	snprintf(what, sizeof(what), "Pool %s", zone_name(b->zone));
	broker_log_pool(b, b->zone == POOL_EMPTY ? LOG_NOTICE : LOG_INFO, zone_msgid(b->zone),
	                what);
}

void broker_update_zone(struct broker *b)
{
	enum pool_zone z = current_zone(b);

	if (z != b->zone) {
		b->zone = z;
		broker_log_zone(b);
	}
	broker_mark_status(b);
	/* Up to upstream_level_changed() (upstream.c, wired in brokerd.c), when there is one. */
	if (b->hooks.level_changed)
		b->hooks.level_changed(b);
}

void broker_mark_status(struct broker *b)
{
	b->status_dirty = true;
}

void broker_fill_status(struct broker *b, uint8_t version, struct eb_msg_status *ret)
{
	*ret = (struct eb_msg_status){
	    .version = version,
	    .pool_bits = eb_pool_level(b->pool),
	    .capacity_bits = eb_pool_capacity(b->pool),
	    .bits_in = b->bits_in,
	    .bits_out = b->bits_out,
	    .bytes_drbg = b->bytes_drbg,
	    .sources = b->registry.n_sources,
	    .sinks = b->registry.n_sinks,
	    .uptime_s = (uint32_t)((broker_now(b) - b->start_usec) / 1000000),
	};
	if (version >= 1) {
		/* The pool's, since the broker started: a seed file conditioned at start counts in
		 * them and not in bits_in (docs/protocol.md 3.11). */
		ret->carried_bits = eb_pool_carried(b->pool);
		ret->dropped_bits = eb_pool_dropped(b->pool);
	}
}

void broker_notify_status(struct broker *b)
{
	uint64_t bits = eb_pool_level(b->pool), cap = eb_pool_capacity(b->pool);

	b->status_dirty = false;
	/* A failed reload stays in front until a reload succeeds: the administrator who ran
	 * "systemctl reload" must see that the file on disk is not what runs. */
	(void)sd_notifyf(
	    false,
	    "STATUS=%s%s%s%s%s%sPool %" PRIu64 "/%" PRIu64 " bits (%u%%), %u source%s, %u sink%s",
	    b->reload_error ? "Reload failed: " : "", b->reload_error ? b->reload_error : "",
	    b->reload_error ? "; running the previous configuration. " : "",
	    b->drained ? "Drained by " : "", b->drained ? b->drained_by : "",
	    b->drained ? ". " : "", bits, cap, (unsigned)(bits * 100 / cap), b->registry.n_sources,
	    b->registry.n_sources == 1 ? "" : "s", b->registry.n_sinks,
	    b->registry.n_sinks == 1 ? "" : "s");
}
