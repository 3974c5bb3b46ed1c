/* SPDX-License-Identifier: MIT */
/* The broker's figures in OpenMetrics 1.0.0 or the Prometheus text format 0.0.4, which are the
 * same but for counters' family names and # EOF. */
#include "prometheus.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "broker-view.h"
#include "macro.h"

/* A label value: backslash, double quote and newline escaped, as the format asks. */
static void put_label(FILE *f, const char *s)
{
	for (; *s; s++)
		if (*s == '\\' || *s == '"')
			fprintf(f, "\\%c", *s);
		else if (*s == '\n')
			fputs("\\n", f);
		else
			fputc(*s, f);
}

/* Whether the client asked for OpenMetrics (Prometheus does, before the text format). */
static bool openmetrics;

static void family(FILE *f, const char *name, const char *type, const char *help_text)
{
	/* OpenMetrics names a counter's family without the _total its samples carry. */
	int n = (int)strlen(name);

	if (openmetrics && strcmp(type, "counter") == 0 && n > 6 &&
	    strcmp(name + n - 6, "_total") == 0)
		n -= 6;
	fprintf(f, "# HELP %.*s %s\n# TYPE %.*s %s\n", n, name, help_text, n, name, type);
}

static void sample(FILE *f, const char *name, uint64_t v)
{
	fprintf(f, "%s %" PRIu64 "\n", name, v);
}

/* Entropy is counted in bits and shown in bytes, Prometheus' base unit (docs/decisions.md): an
 * eighth is exact in a float, and in three decimals. */
static void put_bytes_of_bits(FILE *f, uint64_t bits)
{
	static const char *const eighths[8] = {"",   ".125", ".25", ".375",
	                                       ".5", ".625", ".75", ".875"};

	fprintf(f, "%" PRIu64 "%s\n", bits / 8, eighths[bits % 8]);
}

static void sample_bits(FILE *f, const char *name, uint64_t bits)
{
	fprintf(f, "%s ", name);
	put_bytes_of_bits(f, bits);
}

static void sample_label(FILE *f, const char *name, const char *label, const char *value,
                         uint64_t v)
{
	fprintf(f, "%s{%s=\"", name, label);
	put_label(f, value);
	fprintf(f, "\"} %" PRIu64 "\n", v);
}

static void write_broker(FILE *f, const struct view *v)
{
	const struct eb_msg_status *st = &v->status;

	family(f, "eb_build_info", "gauge", "1, labelled with the version of eb-metrics.");
	sample_label(f, "eb_build_info", "version", v->version, 1);
	family(f, "eb_pool_bytes", "gauge", "Credited entropy in the pool, in bytes (bits / 8).");
	sample_bits(f, "eb_pool_bytes", st->pool_bits);
	family(f, "eb_pool_capacity_bytes", "gauge", "The pool's capacity, in bytes.");
	sample_bits(f, "eb_pool_capacity_bytes", st->capacity_bits);
	family(f, "eb_entropy_in_bytes_total", "counter",
	       "Entropy credited to the pool since the broker started, in bytes (bits / 8).");
	sample_bits(f, "eb_entropy_in_bytes_total", st->bits_in);
	family(f, "eb_entropy_out_bytes_total", "counter",
	       "Entropy served as full entropy since the broker started, in bytes (bits / 8).");
	sample_bits(f, "eb_entropy_out_bytes_total", st->bits_out);
	family(f, "eb_drbg_bytes_total", "counter",
	       "Bytes served from the DRBG since the broker started.");
	sample(f, "eb_drbg_bytes_total", st->bytes_drbg);
	/* STATUS version 1: the credit accepted that has not reached the level, carried toward the
	 * next block or dropped at a cut (docs/pool.md, "Conditioning"); absent from an older
	 * broker rather than a 0 that lies. */
	if (st->version >= 1) {
		family(f, "eb_pool_carried_bytes", "gauge",
		       "Credit carried toward the pool's next block (short of one), in bytes.");
		sample_bits(f, "eb_pool_carried_bytes", st->carried_bits);
		family(f, "eb_pool_dropped_bytes_total", "counter",
		       "Credit dropped at the cuts of the pool's blocks since start, in bytes.");
		sample_bits(f, "eb_pool_dropped_bytes_total", st->dropped_bits);
	}
	family(f, "eb_sources", "gauge", "Sessions connected as sources (not the upstream).");
	sample(f, "eb_sources", st->sources);
	family(f, "eb_sinks", "gauge", "Sessions connected as sinks.");
	sample(f, "eb_sinks", st->sinks);
	family(f, "eb_uptime_seconds", "gauge", "Seconds since the broker started.");
	sample(f, "eb_uptime_seconds", st->uptime_s);
}

/* What Prometheus says of its own configuration (prometheus_config_last_reload_*), said of the
 * broker's, and the drain an admin set. */
static void write_state(FILE *f, const struct eb_msg_state *st)
{
	family(f, "eb_config_last_reload_successful", "gauge",
	       "Whether the last reload of the configuration succeeded (1; also before any).");
	sample(f, "eb_config_last_reload_successful", !(st->flags & EB_STATE_RELOAD_FAILED));
	family(f, "eb_config_last_reload_success_timestamp_seconds", "gauge",
	       "When the running configuration was loaded, at start or by a reload.");
	sample(f, "eb_config_last_reload_success_timestamp_seconds", st->config_loaded_ms / 1000);
	family(f, "eb_drained", "gauge",
	       "Whether an admin drained the broker (eb-brokerctl drain): 1 or 0.");
	sample(f, "eb_drained", !!(st->flags & EB_STATE_DRAINED));
	if (!(st->flags & EB_STATE_UPSTREAM))
		return;
	family(
	    f, "eb_upstream_connected", "gauge",
	    "Whether the broker holds a connection to its upstream that answered (1) or not (0).");
	sample(f, "eb_upstream_connected", st->upstream == EB_UPSTREAM_CONNECTED);
	family(f, "eb_upstream_last_data_timestamp_seconds", "gauge",
	       "When the upstream's last data came, in seconds since the epoch (0: none yet).");
	sample(f, "eb_upstream_last_data_timestamp_seconds", st->upstream_data_ms / 1000);
}

/* Why a sink waits: the pool (a GET held, or answered EMPTY) or its user's quota. */
enum wait_reason {
	WAIT_EMPTY,
	WAIT_QUOTA,
	_WAIT_REASON_MAX,
};

/* Sources by the broker's word on their health, and the sessions asleep or waiting: counts, not
 * one series per session, so that a broker with thousands of sessions stays a small scrape. The
 * upstream has its own series, so that these add up to eb_sources. */
static void write_sessions(FILE *f, const struct eb_report_session *v, size_t n)
{
	uint64_t health[_EB_SOURCE_HEALTH_MAX] = {}, asleep = 0, waiting[_WAIT_REASON_MAX] = {};
	const struct eb_report_session *up = NULL;

	for (size_t i = 0; i < n; i++) {
		if (v[i].flags & EB_REPORT_UPSTREAM) {
			up = &v[i];
			continue;
		}
		health[v[i].health]++;
		asleep += !!(v[i].flags & EB_REPORT_ASLEEP);
		/* A sink answered EMPTY or QUOTA and waiting to retry waits all the same: counted
		 * from its first unanswered GET until a DATA, not only while the broker holds it.
		 */
		if (v[i].starving_ms > 0)
			waiting[v[i].flags & EB_REPORT_QUOTA_SPENT ? WAIT_QUOTA : WAIT_EMPTY]++;
	}
	family(f, "eb_sources_by_health", "gauge",
	       "Source sessions by what the broker sees of their data (eb-brokerctl(1)).");
	for (int h = EB_SOURCE_NEW; h < _EB_SOURCE_HEALTH_MAX; h++)
		sample_label(f, "eb_sources_by_health", "health", eb_source_health_to_string(h),
		             health[h]);
	family(f, "eb_sources_asleep", "gauge", "Sources told to rest while the pool is full.");
	sample(f, "eb_sources_asleep", asleep);
	family(f, "eb_sinks_waiting", "gauge",
	       "Sinks waiting for entropy, by reason: empty (a GET held, or answered EMPTY) or "
	       "quota (answered QUOTA), not yet served since.");
	sample_label(f, "eb_sinks_waiting", "reason", "empty", waiting[WAIT_EMPTY]);
	sample_label(f, "eb_sinks_waiting", "reason", "quota", waiting[WAIT_QUOTA]);
	if (!up)
		return;
	/* Only a broker with an [upstream] has these. */
	family(f, "eb_upstream_entropy_in_bytes_total", "counter",
	       "Entropy credited from the upstream broker since start, in bytes (bits / 8).");
	sample_bits(f, "eb_upstream_entropy_in_bytes_total", up->bits_in);
	family(f, "eb_upstream_failing", "gauge",
	       "Whether the latest attempt to reach the upstream broker failed.");
	sample(f, "eb_upstream_failing", up->health == EB_SOURCE_SILENT);
}

enum user_field {
	USER_SESSIONS,
	USER_MAX_SESSIONS,
	USER_BYTES_IN,
	USER_BITS_IN,
	USER_BITS_OUT,
	USER_DRBG,
	USER_QUOTA_LEFT,
	USER_QUOTA,
	USER_EMPTY,
	USER_QUOTA_ANSWERS,
	_USER_FIELD_MAX,
};

static const struct {
	const char *name, *type, *help;
	bool bits; /* counted in bits, shown in bytes */
} user_fields[_USER_FIELD_MAX] = {
    [USER_SESSIONS] = {"eb_user_sessions", "gauge", "Established sessions of the user."},
    [USER_MAX_SESSIONS] = {"eb_user_max_sessions", "gauge", "The user's max-sessions."},
    [USER_BYTES_IN] = {"eb_user_bytes_in_total", "counter",
                       "Bytes the user's sources donated since the broker started."},
    [USER_BITS_IN] = {"eb_user_entropy_in_bytes_total", "counter",
                      "Entropy credited to the user's sources since start, in bytes.", true},
    [USER_BITS_OUT] = {"eb_user_entropy_out_bytes_total", "counter",
                       "Full entropy served to the user since start, in bytes.", true},
    [USER_DRBG] = {"eb_user_drbg_bytes_total", "counter",
                   "DRBG bytes served to the user since the broker started."},
    [USER_QUOTA_LEFT] = {"eb_user_quota_left_bytes", "gauge",
                         "Pool entropy the user's quota can still spend now, in bytes.", true},
    [USER_QUOTA] = {"eb_user_quota_bytes_per_hour", "gauge",
                    "The user's quota-bits-per-hour, in bytes.", true},
    [USER_EMPTY] = {"eb_user_empty_answers_total", "counter",
                    "GETs of the user's sinks answered EMPTY (the pool too low) since start."},
    [USER_QUOTA_ANSWERS] = {"eb_user_quota_answers_total", "counter",
                            "GETs of the user's sinks answered QUOTA (its quota spent) since "
                            "start."},
};

/* A user's figure; false for a quota figure of a user without a quota. */
static bool user_value(const struct eb_report_user *u, enum user_field k, uint64_t *ret)
{
	bool quota = u->flags & EB_REPORT_USER_QUOTA;

	switch (k) {
	case USER_SESSIONS:
		*ret = u->sessions;
		return true;
	case USER_MAX_SESSIONS:
		*ret = u->max_sessions;
		return true;
	case USER_BYTES_IN:
		*ret = u->bytes_in;
		return true;
	case USER_BITS_IN:
		*ret = u->bits_in;
		return true;
	case USER_BITS_OUT:
		*ret = u->bits_out;
		return true;
	case USER_DRBG:
		*ret = u->bytes_drbg;
		return true;
	case USER_QUOTA_LEFT:
		*ret = u->quota_left_bits;
		return quota;
	case USER_QUOTA:
		*ret = u->quota_bits_per_hour;
		return quota;
	case USER_EMPTY:
		*ret = u->empty_answers;
		return true;
	case USER_QUOTA_ANSWERS:
		*ret = u->quota_answers;
		return true;
	case _USER_FIELD_MAX:
		break;
	}
	return false;
}

/* One series per configured user: users are few and named by the administrator. */
static void write_users(FILE *f, const struct eb_report_user *v, size_t n)
{
	uint64_t empty = 0, quota = 0;

	for (size_t i = 0; i < n; i++) {
		empty += v[i].empty_answers;
		quota += v[i].quota_answers;
	}
	family(f, "eb_empty_answers_total", "counter",
	       "GETs answered EMPTY (the pool too low) since start, all users.");
	sample(f, "eb_empty_answers_total", empty);
	family(f, "eb_quota_answers_total", "counter",
	       "GETs answered QUOTA (the user's quota spent) since start, all users.");
	sample(f, "eb_quota_answers_total", quota);
	for (int k = 0; k < _USER_FIELD_MAX; k++) {
		family(f, user_fields[k].name, user_fields[k].type, user_fields[k].help);
		for (size_t i = 0; i < n; i++) {
			uint64_t x;

			if (!user_value(&v[i], k, &x))
				continue;
			fprintf(f, "%s{user=\"", user_fields[k].name);
			put_label(f, v[i].name);
			fputs("\"} ", f);
			if (user_fields[k].bits)
				put_bytes_of_bits(f, x);
			else
				fprintf(f, "%" PRIu64 "\n", x);
		}
	}
}

/* A family of the counters table: its label's value for each counter id it sums. */
struct counter_label {
	enum eb_counter id;
	const char *value;
};

static const struct counter_label limits[] = {
    {EB_COUNTER_LIMIT_MAX_SESSIONS, "max-sessions"},
    {EB_COUNTER_LIMIT_MAX_LOCAL_SESSIONS, "max-local-sessions"},
    {EB_COUNTER_LIMIT_MAX_HANDSHAKES, "max-handshakes"},
    {EB_COUNTER_LIMIT_MAX_HANDSHAKES_PER_ADDRESS, "max-handshakes-per-address"},
    {EB_COUNTER_LIMIT_USER_MAX_SESSIONS, "user-max-sessions"},
};
static const struct counter_label auths[] = {
    {EB_COUNTER_AUTH_UNKNOWN_USER, "unknown-user"},
    {EB_COUNTER_AUTH_WRONG_KEY, "wrong-key"},
    {EB_COUNTER_AUTH_UNMAPPED_PEER, "unmapped-peer"},
    {EB_COUNTER_AUTH_OTHER, "other"},
};
static const struct counter_label proxies[] = {
    {EB_COUNTER_PROXY_BAD_HEADER, "malformed"},
    {EB_COUNTER_PROXY_NOT_ALLOWED, "not-allowed"},
};

static uint64_t counters_sum(const uint64_t *c, const struct counter_label *l, size_t n)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < n; i++)
		sum += c[l[i].id];
	return sum;
}

static void counter_family(FILE *f, const char *name, const char *label, const char *help_text,
                           const uint64_t *c, const struct counter_label *l, size_t n)
{
	family(f, name, "counter", help_text);
	for (size_t i = 0; i < n; i++)
		sample_label(f, name, label, l[i].value, c[l[i].id]);
}

/* What the broker refused, by reason and in detail, and its sessions against their limits. */
static void write_counters(FILE *f, const uint64_t *c)
{
	family(f, "eb_refusals_total", "counter",
	       "Peers and requests the broker refused since start, by reason.");
	sample_label(f, "eb_refusals_total", "reason", "limit",
	             counters_sum(c, limits, ELEMENTSOF(limits)));
	sample_label(f, "eb_refusals_total", "reason", "authentication",
	             counters_sum(c, auths, ELEMENTSOF(auths)));
	sample_label(f, "eb_refusals_total", "reason", "tls", c[EB_COUNTER_TLS_FAILED]);
	sample_label(f, "eb_refusals_total", "reason", "proxy-header",
	             counters_sum(c, proxies, ELEMENTSOF(proxies)));
	sample_label(f, "eb_refusals_total", "reason", "request", c[EB_COUNTER_REFUSED_REQUEST]);
	family(f, "eb_clone_sessions_total", "counter",
	       "Sessions of a guest's key that began to draw while another session of that key "
	       "drew (copies of one machine), since start; each counted but the first.");
	sample(f, "eb_clone_sessions_total", c[EB_COUNTER_CLONES]);
	counter_family(f, "eb_limit_hits_total", "limit",
	               "Peers refused at a session limit since start, by the limit's key.", c,
	               limits, ELEMENTSOF(limits));
	counter_family(f, "eb_authentication_failures_total", "reason",
	               "Peers that failed to authenticate since start, by reason.", c, auths,
	               ELEMENTSOF(auths));
	counter_family(f, "eb_proxy_header_errors_total", "reason",
	               "Connections refused for their PROXY protocol header since start.", c,
	               proxies, ELEMENTSOF(proxies));
	family(f, "eb_sessions", "gauge",
	       "Sessions now (network: handshakes included), against eb_sessions_max.");
	sample_label(f, "eb_sessions", "transport", "network", c[EB_COUNTER_NETWORK_SESSIONS]);
	sample_label(f, "eb_sessions", "transport", "local", c[EB_COUNTER_LOCAL_SESSIONS]);
	family(f, "eb_sessions_max", "gauge",
	       "The session limits: max-sessions (network), max-local-sessions (local).");
	sample_label(f, "eb_sessions_max", "transport", "network", c[EB_COUNTER_MAX_SESSIONS]);
	sample_label(f, "eb_sessions_max", "transport", "local", c[EB_COUNTER_MAX_LOCAL_SESSIONS]);
	family(f, "eb_handshakes", "gauge",
	       "TLS handshakes in progress, against eb_handshakes_max.");
	sample(f, "eb_handshakes", c[EB_COUNTER_HANDSHAKES]);
	family(f, "eb_handshakes_max", "gauge", "The limit max-handshakes.");
	sample(f, "eb_handshakes_max", c[EB_COUNTER_MAX_HANDSHAKES]);
}

void prometheus_write(FILE *f, const struct view *v, bool up, bool om)
{
	openmetrics = om;
	/* The figures, or eb_broker_up 0 alone when the broker cannot be asked: the scrape still
	 * succeeds, so that an alert can say the broker is down rather than the exporter. */
	family(f, "eb_broker_up", "gauge", "Whether the broker answered (1) or not (0).");
	sample(f, "eb_broker_up", up);
	if (up) {
		write_broker(f, v);
		write_sessions(f, v->sessions, v->n_sessions);
		write_users(f, v->users, v->n_users);
		write_counters(f, v->counters);
		if (v->has_state)
			write_state(f, &v->state);
	}
	if (openmetrics)
		fputs("# EOF\n", f);
}
