/* SPDX-License-Identifier: MIT */
#include "broker.h"

#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>

#include "broker-internal.h"
#include "chain.h"
#include "listen.h"
#include "log.h"
#include "pool.h"
#include "proxied.h"
#include "seedfile.h"
#include "session.h"
#include "tls.h"
#include "upstream.h"
#include "workers.h"

/* Journal message IDs; catalog/entropy-broker.catalog explains each. */
#define MSGID_STATUS "d13ada50fb8f442fa4b17753c4d07182"
#define MSGID_EMPTY  "920903174bf44f4ea5d1618a32e772c1"
#define MSGID_LOW    "5dd456dd5ca94692b6dcddb20bb2033d"
#define MSGID_NORMAL "e4817e771f8e41dc87b4421dcbc1bab2"
#define MSGID_HIGH   "0a5ce97308b5492992b15d3855fcddd4"
#define MSGID_FULL   "104d8d93cda5411f8b5ac528c359f748"
#define MSGID_START  "0b5326000d994ea7810c664f2154854b"
#define MSGID_STOP   "266ae99641f74b32bce03b5590f15e6b"
#define MSGID_SEED   "a44d62412b8e4ee4831c3e16a6d5b02d"

/* Zone changes are logged at most this often, so that a pool hovering at a threshold under
 * heavy traffic does not flood the journal; the periodic status line reports the rest. */
#define ZONE_LOG_INTERVAL_USEC (1000000ULL)
#define NOTIFY_INTERVAL_USEC   (1000000ULL)

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

/* A burst that no later line follows is summed up here, from the one-second notify timer. */
static void flush_peer_logs(struct broker *b)
{
	for (int k = 0; k < _PEER_LOG_MAX; k++)
		log_suppressed(k, eb_ratelimit_flush(&b->peer_log[k], broker_now(b)));
}

/* Called by OpenSSL during a handshake, on a worker thread or on the loop. */
static int psk_lookup(const char *identity, uint8_t ret_key[EB_KEY_SIZE], uint64_t *ret_tag,
                      void *userdata)
{
	struct broker *b = userdata;
	const struct eb_user *u;
	int r = -ENOENT;

	pthread_rwlock_rdlock(&b->conf_lock);
	u = eb_conf_find_user(b->conf, identity);
	if (u && u->has_key) {
		memcpy(ret_key, u->key, EB_KEY_SIZE);
		*ret_tag = u->key_serial;
		r = 0;
	}
	pthread_rwlock_unlock(&b->conf_lock);
	return r;
}

/* handshake-threads = auto: one per CPU the broker may run on, none on a single CPU (a thread
 * there adds hand-offs and wins no time), at most EB_CONF_HANDSHAKE_THREADS_MAX. */
static unsigned handshake_threads(const struct eb_conf *conf)
{
	cpu_set_t set;
	int n;

	if (conf->handshake_threads >= 0)
		return (unsigned)conf->handshake_threads;
	n = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
	return n < 2 ? 0 : (unsigned)MIN(n, EB_CONF_HANDSHAKE_THREADS_MAX);
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

static void log_pool(struct broker *b, int level, const char *msgid, const char *what)
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

/* Tells the journal where the level is, at most once per ZONE_LOG_INTERVAL_USEC; the notify
 * timer calls it every second too, so a change held back is logged a moment later, not lost. */
static void log_zone(struct broker *b)
{
	uint64_t now = broker_now(b);
	char what[64];

	if (b->zone == b->zone_logged || now < b->zone_logged_usec + ZONE_LOG_INTERVAL_USEC)
		return;
	b->zone_logged = b->zone;
	b->zone_logged_usec = now;
	snprintf(what, sizeof(what), "Pool %s", zone_name(b->zone));
	log_pool(b, b->zone == POOL_EMPTY ? LOG_NOTICE : LOG_INFO, zone_msgid(b->zone), what);
}

void broker_update_zone(struct broker *b)
{
	enum pool_zone z = current_zone(b);

	if (z != b->zone) {
		b->zone = z;
		log_zone(b);
	}
	broker_mark_status(b);
	upstream_level_changed(b);
}

void broker_mark_status(struct broker *b)
{
	b->status_dirty = true;
}

void broker_fill_status(struct broker *b, struct eb_msg_status *ret)
{
	*ret = (struct eb_msg_status){
	    .pool_bits = eb_pool_level(b->pool),
	    .capacity_bits = eb_pool_capacity(b->pool),
	    .bits_in = b->bits_in,
	    .bits_out = b->bits_out,
	    .bytes_drbg = b->bytes_drbg,
	    .sources = b->registry.n_sources,
	    .sinks = b->registry.n_sinks,
	    .uptime_s = (uint32_t)((broker_now(b) - b->start_usec) / 1000000),
	};
}

void broker_notify_status(struct broker *b)
{
	uint64_t bits = eb_pool_level(b->pool), cap = eb_pool_capacity(b->pool);

	b->status_dirty = false;
	/* A failed reload stays in front until a reload succeeds: the administrator who ran
	 * "systemctl reload" must see that the file on disk is not what runs. */
	(void)sd_notifyf(
	    false, "STATUS=%s%s%sPool %" PRIu64 "/%" PRIu64 " bits (%u%%), %u source%s, %u sink%s",
	    b->reload_error ? "Reload failed: " : "", b->reload_error ? b->reload_error : "",
	    b->reload_error ? "; running the previous configuration. " : "", bits, cap,
	    (unsigned)(bits * 100 / cap), b->registry.n_sources,
	    b->registry.n_sources == 1 ? "" : "s", b->registry.n_sinks,
	    b->registry.n_sinks == 1 ? "" : "s");
}

/* Sessions that ended leave their memory in the heap, in holes the allocator does not give back
 * by itself. After a storm (this many fewer sessions than at the peak) the free pages go back to
 * the system at once, rather than staying with the broker until the next storm. */
#define TRIM_SESSIONS 64

static void trim_heap(struct broker *b)
{
	if (b->registry.n_sessions + TRIM_SESSIONS > b->registry.n_sessions_high)
		return;
	(void)malloc_trim(0);
	registry_reset_high(&b->registry);
}

static int on_notify_timer(sd_event_source *src, uint64_t usec, void *userdata)
{
	struct broker *b = userdata;

	log_zone(b);
	trim_heap(b);
	flush_peer_logs(b);
	if (b->status_dirty)
		broker_notify_status(b);
	(void)sd_event_source_set_time(src, usec + NOTIFY_INTERVAL_USEC);
	return 0;
}

static int on_status_timer(sd_event_source *src, uint64_t usec, void *userdata)
{
	struct broker *b = userdata;

	log_pool(b, LOG_INFO, MSGID_STATUS, "Pool status");
	(void)sd_event_source_set_time(src, usec + (uint64_t)b->conf->status_interval_s * 1000000);
	return 0;
}

static void save_seed(struct broker *b, bool drain)
{
	uint64_t bits = 0;
	int r;

	if (!b->conf->seed_file || !b->conf->seed_file[0])
		return;
	bits = eb_pool_level(b->pool);
	r = eb_seedfile_save(b->conf->seed_file, b->pool, drain, &bits);
	if (r < 0 && drain)
		/* The blocks left the pool before the write failed (a full disk, say): they are
		 * lost rather than risk being counted twice, and the file on disk is the previous,
		 * uncredited one. */
		log_error_errno(
		    r,
		    "Failed to save the seed file %s: %m; the pool's %" PRIu64
		    " credited bits are lost, and the next start finds the previous file, which carries no credit",
		    b->conf->seed_file, bits);
	else if (r < 0)
		log_warning_errno(r, "Failed to save the seed file %s, ignoring: %m",
		                  b->conf->seed_file);
	else if (drain)
		log_struct(
		    LOG_INFO, "MESSAGE_ID=" MSGID_SEED,
		    "Saved %" PRIu64 " credited bits of pool to %s (%s)", bits, b->conf->seed_file,
		    b->conf->credit_seed_file
			? "credited again at the next start: credit-seed-file=yes"
			: "mixed in but not credited at the next start: credit-seed-file=no");
	else
		log_debug("Refreshed the seed file %s", b->conf->seed_file);
}

static int on_seed_timer(sd_event_source *src, uint64_t usec, void *userdata)
{
	struct broker *b = userdata;

	save_seed(b, false);
	(void)sd_event_source_set_time(src,
	                               usec + (uint64_t)b->conf->seed_save_interval_s * 1000000);
	return 0;
}

static void load_seed(struct broker *b)
{
	uint64_t credited = 0;
	int r;

	if (!b->conf->seed_file || !b->conf->seed_file[0])
		return;
	r = eb_seedfile_load(b->conf->seed_file, b->pool, b->conf->credit_seed_file, &credited);
	if (r == -ENOENT) {
		log_info("No seed file at %s yet", b->conf->seed_file);
		return;
	}
	if (r < 0) {
		log_warning_errno(r, "Failed to load the seed file %s, ignoring: %m",
		                  b->conf->seed_file);
		return;
	}
	b->bits_seed = credited;
	log_struct(LOG_INFO, "MESSAGE_ID=" MSGID_SEED,
	           "Loaded the seed file %s: %" PRIu64 " bits credited%s", b->conf->seed_file,
	           credited, b->conf->credit_seed_file ? "" : " (credit-seed-file=no)");
}

static int on_exit_signal(sd_event_source *src, const struct signalfd_siginfo *si, void *userdata)
{
	struct broker *b = userdata;

	(void)src;
	log_info("Received %s, stopping", strsignal((int)si->ssi_signo));
	b->stopping = true;
	(void)sd_notify(false, "STOPPING=1");
	return sd_event_exit(b->event, 0);
}

static int on_hup(sd_event_source *src, const struct signalfd_siginfo *si, void *userdata)
{
	(void)src, (void)si;
	broker_reload(userdata);
	return 0;
}

/* The broker's own state: the configuration it now owns, the per-user tables sized by it, and a
 * scratch buffer for the largest frame. Nothing here can be watched or started yet. */
static int broker_init(struct broker *b, struct eb_conf *conf, const char *config_path)
{
	b->conf = conf;
	b->config_path = config_path;
	pthread_rwlock_init(&b->conf_lock, NULL);
	broker_number_keys(b, NULL, conf);
	/* glibc gives the top of the heap back at every free() past 128 KiB, and a sink drawing
	 * 64 KiB frames would take it again at the next: the broker trims after storms instead
	 * (trim_heap()). */
	(void)mallopt(M_TRIM_THRESHOLD, 64 << 20);
	broker_raise_nofile(conf);
	b->zone = b->zone_logged = _POOL_ZONE_INVALID;
	b->chain_refused_user = -1;
	for (int k = 0; k < _PEER_LOG_MAX; k++)
		b->peer_log[k] = EB_RATELIMIT_INIT(PEER_LOG_INTERVAL_USEC, PEER_LOG_BURST);
	b->quotas = calloc(MAX(conf->n_users, 1u), sizeof(*b->quotas));
	b->totals = calloc(MAX(conf->n_users, 1u), sizeof(*b->totals));
	b->scratch = malloc(EB_DATA_MAX);
	if (!b->quotas || !b->totals || !b->scratch ||
	    registry_init(&b->registry, conf->n_users) < 0)
		return log_oom();
	return 0;
}

static int pool_and_tls_new(struct broker *b)
{
	bool locked = false;
	int r;

	r = eb_pool_new(b->conf->capacity_bits, &b->pool, &locked);
	if (r < 0)
		return log_error_errno(r, "Failed to create a pool of %" PRIu64 " bits: %m",
		                       b->conf->capacity_bits);
	if (!locked)
		log_notice(
		    "Could not lock the pool in memory (RLIMIT_MEMLOCK?); it may be swapped out");

	r = eb_tls_server_new(psk_lookup, b, &b->tls);
	if (r < 0)
		return log_error_errno(r, "Failed to set up TLS: %m");
	return 0;
}

/* The loop, the signals it handles (blocked for the whole process, so that every thread started
 * later inherits the mask) and the watchdog. */
static int event_new(struct broker *b)
{
	sigset_t mask;
	int r;

	r = sd_event_default(&b->event);
	if (r < 0)
		return log_error_errno(r, "Failed to create the event loop: %m");
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
		return log_error_errno(errno, "Failed to block signals: %m");
	r = sd_event_add_signal(b->event, NULL, SIGTERM, on_exit_signal, b);
	if (r >= 0)
		r = sd_event_add_signal(b->event, NULL, SIGINT, on_exit_signal, b);
	if (r >= 0)
		r = sd_event_add_signal(b->event, NULL, SIGHUP, on_hup, b);
	if (r < 0)
		return log_error_errno(r, "Failed to watch signals: %m");
	r = sd_event_set_watchdog(b->event, true);
	if (r < 0)
		return log_error_errno(r, "Failed to set up the watchdog: %m");
	b->start_usec = broker_now(b);
	return 0;
}

/* A timer that fires usec from now, enabled; its handler sets the next time. */
static int add_timer(struct broker *b, sd_event_source **ret, uint64_t usec,
                     sd_event_time_handler_t handler)
{
	int r;

	r = sd_event_add_time_relative(b->event, ret, CLOCK_MONOTONIC, usec, 0, handler, b);
	if (r < 0)
		return r;
	return sd_event_source_set_enabled(*ret, SD_EVENT_ON);
}

/* The periodic timers, the deferred run that answers, and the queue's timer, off until a GET
 * waits. */
static int timers_new(struct broker *b)
{
	const struct eb_conf *conf = b->conf;
	int r;

	r = add_timer(b, &b->notify_timer, NOTIFY_INTERVAL_USEC, on_notify_timer);
	if (r >= 0)
		r = add_timer(b, &b->status_timer, (uint64_t)conf->status_interval_s * 1000000,
		              on_status_timer);
	if (r >= 0 && conf->seed_file && conf->seed_file[0])
		r = add_timer(b, &b->seed_timer, (uint64_t)conf->seed_save_interval_s * 1000000,
		              on_seed_timer);
	if (r >= 0)
		r = sd_event_add_defer(b->event, &b->run_source, broker_on_run, b);
	if (r >= 0)
		/* Answers go out before the next frame is read. */
		r = sd_event_source_set_priority(b->run_source, SD_EVENT_PRIORITY_IMPORTANT);
	if (r >= 0)
		r = sd_event_source_set_enabled(b->run_source, SD_EVENT_OFF);
	/* 10 ms, not sd-event's default 250 ms of slack: docs/protocol.md promises EMPTY after
	 * about 250 ms, not up to 500. */
	if (r >= 0)
		r = sd_event_add_time(b->event, &b->queue_timer, CLOCK_MONOTONIC, UINT64_MAX,
		                      10 * 1000ULL, broker_on_queue_timer, b);
	if (r >= 0)
		r = sd_event_source_set_enabled(b->queue_timer, SD_EVENT_OFF);
	if (r < 0)
		return log_error_errno(r, "Failed to set up timers: %m");
	return 0;
}

static int handshake_workers_new(struct broker *b)
{
	unsigned n_threads = handshake_threads(b->conf);
	int r;

	if (n_threads == 0)
		return 0;
	r = workers_new(b->event, n_threads, &b->workers);
	if (r < 0)
		return log_error_errno(r, "Failed to start %u handshake threads: %m", n_threads);
	log_debug("TLS handshakes on %u threads", n_threads);
	return 0;
}

int broker_new(struct eb_conf *conf, const char *config_path, struct broker **ret)
{
	_cleanup_(broker_freep) struct broker *b = NULL;
	int r;

	b = calloc(1, sizeof(*b));
	if (!b) {
		eb_conf_free(conf);
		return log_oom();
	}
	r = broker_init(b, conf, config_path);
	if (r < 0)
		return r;
	r = pool_and_tls_new(b);
	if (r < 0)
		return r;
	r = event_new(b);
	if (r < 0)
		return r;
	r = timers_new(b);
	if (r >= 0)
		r = admin_history_start(b);
	if (r < 0)
		return r;
	/* Into the pool made above, before any peer can reach it. */
	load_seed(b);
	r = chain_init(b);
	if (r < 0)
		return log_error_errno(r, "Failed to draw a broker id: %m");
	/* Threads last: they inherit the signal mask event_new() set. */
	r = handshake_workers_new(b);
	if (r < 0)
		return r;
	r = upstream_new(b, &b->upstream);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(b);
	return 0;
}

struct broker *broker_free(struct broker *b)
{
	if (!b)
		return NULL;
	b->upstream = upstream_free(b->upstream);
	for (struct registry_entry *e; (e = registry_any(&b->registry));)
		session_free(session_of(e));
	proxied_free_all(b);
	/* After the sessions: a handshake still on a worker is freed as the workers stop. */
	b->workers = workers_free(b->workers);
	listeners_free(b);
	sd_event_source_disable_unref(b->run_source);
	sd_event_source_disable_unref(b->queue_timer);
	sd_event_source_disable_unref(b->status_timer);
	sd_event_source_disable_unref(b->notify_timer);
	sd_event_source_disable_unref(b->seed_timer);
	admin_history_stop(b);
	sd_event_unref(b->event);
	eb_pool_free(b->pool);
	eb_tls_free(b->tls);
	if (b->scratch)
		explicit_bzero(b->scratch, EB_DATA_MAX);
	free(b->scratch);
	free(b->quotas);
	free(b->totals);
	free(b->reload_error);
	registry_done(&b->registry);
	eb_conf_free(b->conf);
	pthread_rwlock_destroy(&b->conf_lock);
	free(b);
	return NULL;
}

int broker_listen(struct broker *b, char **uris, unsigned n_uris)
{
	return listeners_open(b, uris, n_uris);
}

int broker_run(struct broker *b)
{
	struct registry_entry *e;
	int r;

	broker_pool_changed(b);
	log_pool(b, LOG_INFO, MSGID_START, "Broker ready");
	broker_notify_status(b);
	(void)sd_notify(false, "READY=1");

	r = sd_event_loop(b->event);
	if (r < 0)
		return log_error_errno(r, "Event loop failed: %m");

	/* Say goodbye to every peer, then keep what the pool holds for the next start. */
	registry_foreach_ready(e, &b->registry)
		session_goodbye(session_of(e));
	log_pool(b, LOG_INFO, MSGID_STOP, "Broker stopping");
	save_seed(b, true);
	return 0;
}
