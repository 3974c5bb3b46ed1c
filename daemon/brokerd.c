/* SPDX-License-Identifier: MIT */
/* eb-brokerd put together: the broker made, its layers wired to each other (struct broker_hooks),
 * its timers, signals, seed file, handshake workers and upstream started, the listeners opened,
 * the loop run, and all of it taken down again. The one module that knows every other. */
#include "brokerd.h"

#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>

#include "admin-actions.h"
#include "admin-history.h"
#include "admin.h"
#include "agent.h"
#include "broker-config.h"
#include "broker.h"
#include "chain.h"
#include "listen.h"
#include "log.h"
#include "pool.h"
#include "proxied.h"
#include "seedfile.h"
#include "serve.h"
#include "session.h"
#include "time-util.h"
#include "tls.h"
#include "upstream.h"
#include "workers.h"

/* Journal message IDs; catalog/entropy-broker.catalog explains each. */
#define MSGID_START "0b5326000d994ea7810c664f2154854b"
#define MSGID_STOP  "266ae99641f74b32bce03b5590f15e6b"
#define MSGID_SEED  "a44d62412b8e4ee4831c3e16a6d5b02d"

#define NOTIFY_INTERVAL_USEC (1000000ULL)

/* Called by OpenSSL during a handshake, on a worker thread or on the loop. */
static int psk_lookup(const char *identity, struct eb_tls_psk *ret, void *userdata)
{
	struct broker *b = userdata;
	const struct eb_user_key *k;
	const struct eb_user *u;
	int r = -ENOENT;

	pthread_rwlock_rdlock(&b->conf_lock);
	k = eb_conf_find_key(b->conf, identity, &u);
	if (k) {
		memcpy(ret->key, k->key, EB_KEY_SIZE);
		ret->hash = u->key_hash;
		ret->tag = k->serial;
		r = 0;
	}
	pthread_rwlock_unlock(&b->conf_lock);
	return r;
}

/* handshake-threads = auto: one per CPU the broker may run on, none on one or two CPUs, at most
 * EB_CONF_HANDSHAKE_THREADS_MAX. On two CPUs the peers' own handshakes (a boot storm's guests,
 * the load generator) need the other one: workers there bought no seeds a second and cost a
 * hand-off and context switches a handshake (docs/performance.md, "The TLS floor"). */
static unsigned handshake_threads(const struct eb_conf *conf)
{
	cpu_set_t set;
	int n;

	if (conf->handshake_threads >= 0)
		return (unsigned)conf->handshake_threads;
	n = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
	return n <= 2 ? 0 : (unsigned)MIN(n, EB_CONF_HANDSHAKE_THREADS_MAX);
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

	broker_log_zone(b);
	trim_heap(b);
	broker_flush_peer_logs(b);
	if (b->status_dirty)
		broker_notify_status(b);
	(void)sd_event_source_set_time(src, usec + NOTIFY_INTERVAL_USEC);
	return 0;
}

static int on_status_timer(sd_event_source *src, uint64_t usec, void *userdata)
{
	struct broker *b = userdata;

	broker_log_pool(b, LOG_INFO, MSGID_STATUS, "Pool status");
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
	broker_config_reload(userdata);
	return 0;
}

/* The broker's own state: the configuration it now owns, the per-user tables sized by it, and a
 * scratch buffer for the largest frame. Nothing here can be watched or started yet. */
static int broker_init(struct broker *b, struct eb_conf *conf, const char *config_path)
{
	b->conf = conf;
	b->config_path = config_path;
	pthread_rwlock_init(&b->conf_lock, NULL);
	(void)broker_config_number_keys(b, NULL, conf, NULL);
	/* glibc gives the top of the heap back at every free() past 128 KiB, and a sink drawing
	 * 64 KiB frames would take it again at the next: the broker trims after storms instead
	 * (trim_heap()). */
	(void)mallopt(M_TRIM_THRESHOLD, 64 << 20);
	broker_config_raise_nofile(conf);
	b->zone = b->zone_logged = _POOL_ZONE_INVALID;
	b->agent_word = _AGENT_WORD_INVALID;
	b->chain_refused_user = -1;
	b->poll_fd = -EBADF;
	b->actions = EB_RATELIMIT_INIT(ADMIN_ACTIONS_INTERVAL_USEC, ADMIN_ACTIONS_BURST);
	b->config_loaded_ms = eb_wall_ms();
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

/* The calls that go up the layers, each by pointer: serve.c tells sources SLEEP and WAKE and the
 * upstream of a level that moved, a session builds a REPORT page. */
static void wire(struct broker *b)
{
	b->hooks = (struct broker_hooks){
	    .set_asleep = session_tell_asleep,
	    .level_changed = upstream_level_changed,
	    .report = admin_report,
	    .action = admin_action,
	    .state = admin_state,
	};
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

	/* A loop of its own, not sd_event_default(): sd-event checks that the default loop runs in
	 * the thread that made it, with a gettid() system call at every iteration, four of them a
	 * fresh seed in a boot storm. Nothing else in the broker looks for the default loop. */
	r = sd_event_new(&b->event);
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
		r = sd_event_add_defer(b->event, &b->run_source, serve_on_run, b);
	if (r >= 0)
		/* Answers go out before the next frame is read. */
		r = sd_event_source_set_priority(b->run_source, SD_EVENT_PRIORITY_IMPORTANT);
	if (r >= 0)
		r = sd_event_source_set_enabled(b->run_source, SD_EVENT_OFF);
	/* 10 ms, not sd-event's default 250 ms of slack: docs/protocol.md promises EMPTY after
	 * about 250 ms, not up to 500. */
	if (r >= 0)
		r = sd_event_add_time(b->event, &b->queue_timer, CLOCK_MONOTONIC, UINT64_MAX,
		                      10 * 1000ULL, serve_on_queue_timer, b);
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

int brokerd_new(struct eb_conf *conf, const char *config_path, struct broker **ret)
{
	_cleanup_(brokerd_freep) struct broker *b = NULL;
	int r;

	b = calloc(1, sizeof(*b));
	if (!b) {
		eb_conf_free(conf);
		return log_oom();
	}
	r = broker_init(b, conf, config_path);
	if (r < 0)
		return r;
	wire(b);
	r = pool_and_tls_new(b);
	if (r < 0)
		return r;
	r = event_new(b);
	if (r < 0)
		return r;
	r = session_poll_new(b);
	if (r < 0)
		return log_error_errno(r, "Failed to set up the sessions' epoll set: %m");
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

struct broker *brokerd_free(struct broker *b)
{
	if (!b)
		return NULL;
	b->upstream = upstream_free(b->upstream);
	for (struct registry_entry *e; (e = registry_any(&b->registry));)
		session_free(session_of(e));
	proxied_free_all(b);
	/* After the sessions: a handshake still on a worker is freed as the workers stop. */
	b->workers = workers_free(b->workers);
	session_poll_free(b);
	listen_close(b);
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

int brokerd_listen(struct broker *b, char **uris, unsigned n_uris)
{
	return listen_open(b, uris, n_uris);
}

int brokerd_run(struct broker *b)
{
	struct registry_entry *e;
	int r;

	serve_pool_changed(b);
	broker_log_pool(b, LOG_INFO, MSGID_START, "Broker ready");
	broker_notify_status(b);
	(void)sd_notify(false, "READY=1");

	r = sd_event_loop(b->event);
	if (r < 0)
		return log_error_errno(r, "Event loop failed: %m");

	/* A balancer checking now is told the broker stops; then goodbye to every peer, and
	 * what the pool holds is kept for the next start. */
	agent_answer_pending(b);
	registry_foreach_ready(e, &b->registry)
		session_goodbye(session_of(e));
	broker_log_pool(b, LOG_INFO, MSGID_STOP, "Broker stopping");
	save_seed(b, true);
	return 0;
}
