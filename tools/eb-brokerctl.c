/* SPDX-License-Identifier: MIT */
/* eb-brokerctl: asks a broker how it is doing, as aligned tables for people or JSON for scripts. */
#include <errno.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brokerctl-actions.h"
#include "brokerctl-history.h"
#include "cli.h"
#include "log.h"
#include "macro.h"
#include "report.h"
#include "table.h"

/* A broker with 65536 network and 65536 local sessions has this many; a broker that pages on
 * beyond it is broken, and the listing stops rather than grow without end. */
#define ROWS_MAX (2 * 65536 + 1024)

enum command {
	CMD_STATUS,
	CMD_SOURCES,
	CMD_SINKS,
	CMD_USERS,
	CMD_HISTORY,
	_CMD_MAX,
	_CMD_INVALID = -EINVAL,
};

static const char *const command_names[_CMD_MAX] = {
    [CMD_STATUS] = "status", [CMD_SOURCES] = "sources", [CMD_SINKS] = "sinks",
    [CMD_USERS] = "users",   [CMD_HISTORY] = "history",
};

static bool arg_json;
/* Sinks marked as clones in the table just printed: a line under it says what the mark means. */
static unsigned clones_shown;

static void help(void)
{
	printf(
	    "Usage: eb-brokerctl [OPTIONS] status|sources|sinks|users|history [--json]\n"
	    "       eb-brokerctl [OPTIONS] drain|undrain|disconnect ID|disconnect-user USER\n\n"
	    "Shows a broker's pool, its sources, its sinks, its users or its history; or acts\n"
	    "on it (an admin's action, logged with who asked).\n\n"
	    "  status                pool level, capacity, totals in and out; the drain, the\n"
	    "                        reloads and the upstream\n"
	    "  sources               one line per source session: user, peer, kind, bytes in,\n"
	    "                        bits credited, claimed H, health, last seen\n"
	    "  sinks                 one line per sink session: user, peer, bits served, quota\n"
	    "                        left, EMPTY answers, how long it has waited for entropy\n"
	    "  users                 one line per configured user: roles, sessions, totals\n"
	    "  history               the last hour and day: a sparkline per series (pool level,\n"
	    "                        bits in and out, sources, sinks, alarms, EMPTY answers),\n"
	    "                        then each source's and sink's bits over the hour and day\n"
	    "  drain                 the balancers' agent answers \"drain\": no new clients\n"
	    "  undrain               the agent answers by the pool level again\n"
	    "  disconnect ID         closes session ID (the ID column of sources, sinks)\n"
	    "  disconnect-user USER  closes every session of USER but this one\n\n"
	    "      --json            print one JSON object\n" EB_CLI_CLIENT_HELP
	    "\nWithout --broker, unix:/run/entropy-broker/broker.sock is used.\n"
	    "See eb-brokerctl(1).\n");
}

static void print_json(struct json_object *o)
{
	const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
	                                                      JSON_C_TO_STRING_NOSLASHESCAPE);

	puts(s ? s : "null");
}

static void add_u64(struct json_object *o, const char *key, uint64_t v)
{
	json_object_object_add(o, key, json_object_new_uint64(v));
}

/* state: NULL from a broker that predates STATE; clones: NULL from one without that counter. */
static void print_status(const char *broker, const struct eb_msg_status *st,
                         const struct eb_msg_state *state, const uint64_t *clones)
{
	unsigned pct = st->capacity_bits ? (unsigned)(st->pool_bits * 100 / st->capacity_bits) : 0;

	if (arg_json) {
		struct json_object *o = json_object_new_object();

		json_object_object_add(o, "broker", json_object_new_string(broker));
		add_u64(o, "pool_bits", st->pool_bits);
		add_u64(o, "capacity_bits", st->capacity_bits);
		add_u64(o, "fill_percent", pct);
		add_u64(o, "sources", st->sources);
		add_u64(o, "sinks", st->sinks);
		add_u64(o, "bits_in", st->bits_in);
		add_u64(o, "bits_out", st->bits_out);
		add_u64(o, "bytes_drbg", st->bytes_drbg);
		add_u64(o, "uptime_s", st->uptime_s);
		/* Absent from a broker older than STATUS version 1, rather than a 0 that lies. */
		if (st->version >= 1) {
			add_u64(o, "carried_bits", st->carried_bits);
			add_u64(o, "dropped_bits", st->dropped_bits);
		}
		if (clones)
			add_u64(o, "clones", *clones);
		if (state)
			brokerctl_state_json(state, o);
		print_json(o);
		json_object_put(o);
		return;
	}
	printf("Broker:   %s\n"
	       "Pool:     %" PRIu64 " of %" PRIu64 " bits (%u%%)\n"
	       "Sources:  %u\n"
	       "Sinks:    %u\n"
	       "In:       %" PRIu64 " bits credited\n"
	       "Out:      %" PRIu64 " bits full entropy, %" PRIu64 " bytes DRBG\n"
	       "Uptime:   %u s\n",
	       broker, st->pool_bits, st->capacity_bits, pct, st->sources, st->sinks, st->bits_in,
	       st->bits_out, st->bytes_drbg, st->uptime_s);
	if (st->version >= 1)
		printf("Credit:   %" PRIu64 " bits carried toward the next block, %" PRIu64
		       " dropped at cuts\n",
		       st->carried_bits, st->dropped_bits);
	if (clones)
		printf("Clones:   %" PRIu64 " guest sessions drew beside another of their key%s\n",
		       *clones, *clones ? " (marked * in sinks)" : "");
	if (state)
		brokerctl_state_print(state);
}

static struct json_object *roles_json(unsigned roles)
{
	struct json_object *a = json_object_new_array();

	if (roles & EB_ROLE_SOURCE)
		json_object_array_add(a, json_object_new_string("source"));
	if (roles & EB_ROLE_SINK)
		json_object_array_add(a, json_object_new_string("sink"));
	if (roles & EB_ROLE_ADMIN)
		json_object_array_add(a, json_object_new_string("admin"));
	return a;
}

/* "1.5s", "3m20s", "2h05m": how long ago, at a glance. */
static const char *ago(uint32_t ms, char *buf, size_t size)
{
	uint32_t s = ms / 1000;

	if (s < 60)
		snprintf(buf, size, "%u.%us", s, ms % 1000 / 100);
	else if (s < 3600)
		snprintf(buf, size, "%um%02us", s / 60, s % 60);
	else
		snprintf(buf, size, "%uh%02um", s / 3600, s / 60 % 60);
	return buf;
}

static const char *u64(uint64_t v, char *buf, size_t size)
{
	snprintf(buf, size, "%" PRIu64, v);
	return buf;
}

/* Why a starving sink waits: its user's quota (the latest answer was QUOTA) or the pool. */
static const char *wait_reason(const struct eb_report_session *s)
{
	return s->flags & EB_REPORT_QUOTA_SPENT ? "quota" : "empty";
}

static struct json_object *session_json(const struct eb_report_session *s, enum command cmd)
{
	struct json_object *o = json_object_new_object();

	/* The upstream's id, 2^64 - 1, is past what a double (jq, JavaScript) holds exactly. */
	json_object_object_add(
	    o, "id", s->flags & EB_REPORT_UPSTREAM ? NULL : json_object_new_uint64(s->id));
	json_object_object_add(o, "user", json_object_new_string(s->user));
	json_object_object_add(o, "peer", json_object_new_string(s->peer));
	json_object_object_add(o, "kind", json_object_new_string(s->kind));
	json_object_object_add(o, "roles", roles_json(s->roles));
	json_object_object_add(o, "tls", json_object_new_boolean(s->flags & EB_REPORT_TLS));
	add_u64(o, "connected_s", s->connected_s);
	add_u64(o, "last_seen_ms", s->last_ms);
	if (cmd == CMD_SOURCES) {
		add_u64(o, "bytes_in", s->bytes_in);
		add_u64(o, "bits_credited", s->bits_in);
		add_u64(o, "claim_mbits_per_byte", s->claim_mbits_per_byte);
		json_object_object_add(
		    o, "health", json_object_new_string(eb_source_health_to_string(s->health)));
		json_object_object_add(o, "asleep",
		                       json_object_new_boolean(s->flags & EB_REPORT_ASLEEP));
		json_object_object_add(o, "upstream",
		                       json_object_new_boolean(s->flags & EB_REPORT_UPSTREAM));
	} else {
		add_u64(o, "bits_served", s->bits_out);
		add_u64(o, "bytes_drbg", s->bytes_drbg);
		/* null: no quota, no waiting GET. */
		json_object_object_add(
		    o, "quota_left_bits",
		    s->flags & EB_REPORT_QUOTA ? json_object_new_uint64(s->quota_left_bits) : NULL);
		json_object_object_add(
		    o, "waiting_ms",
		    s->flags & EB_REPORT_WAITING ? json_object_new_uint64(s->waiting_ms) : NULL);
		/* Across EMPTY answers and retries, until a DATA: null when not starving. */
		json_object_object_add(o, "starving_ms",
		                       s->starving_ms ? json_object_new_uint64(s->starving_ms)
		                                      : NULL);
		add_u64(o, "empty_answers", s->empty_answers);
		add_u64(o, "quota_answers", s->quota_answers);
		json_object_object_add(o, "clone",
		                       json_object_new_boolean(s->flags & EB_REPORT_CLONE));
		json_object_object_add(o, "wait_reason",
		                       s->starving_ms ? json_object_new_string(wait_reason(s))
		                                      : NULL);
	}
	return o;
}

static int session_cells(const struct eb_report_session *s, enum command cmd, struct table *t)
{
	char a[32], b[32], c[32], d[32], e[32], f[32], g[32], h[32], id[40];

	if (cmd == CMD_SOURCES) {
		snprintf(c, sizeof(c), "%u.%03u", s->claim_mbits_per_byte / 1000,
		         s->claim_mbits_per_byte % 1000);
		snprintf(d, sizeof(d), "%s%s", eb_source_health_to_string(s->health),
		         s->flags & EB_REPORT_ASLEEP ? " (asleep)" : "");
		/* The upstream's id is a placeholder after every session's: not worth a column. */
		return table_add_row(
		    t, s->flags & EB_REPORT_UPSTREAM ? "-" : u64(s->id, e, sizeof(e)), s->user,
		    s->peer, s->kind[0] ? s->kind : "-", u64(s->bytes_in, a, sizeof(a)),
		    u64(s->bits_in, b, sizeof(b)), c, d, ago(s->last_ms, f, sizeof(f)));
	}
	if (s->flags & EB_REPORT_QUOTA)
		u64(s->quota_left_bits, c, sizeof(c));
	else
		snprintf(c, sizeof(c), "-");
	/* A sink that was answered EMPTY and waits to retry is waiting all the same. */
	if (s->starving_ms)
		ago(s->starving_ms, d, sizeof(d));
	else
		snprintf(d, sizeof(d), "-");
	snprintf(id, sizeof(id), "%s%s", u64(s->id, e, sizeof(e)),
	         s->flags & EB_REPORT_CLONE ? "*" : "");
	clones_shown += !!(s->flags & EB_REPORT_CLONE);
	return table_add_row(t, id, s->user, s->peer, s->kind[0] ? s->kind : "-",
	                     u64(s->bits_out, a, sizeof(a)), u64(s->bytes_drbg, b, sizeof(b)), c,
	                     u64(s->empty_answers, g, sizeof(g)),
	                     u64(s->quota_answers, h, sizeof(h)), d,
	                     s->starving_ms ? wait_reason(s) : "-", ago(s->last_ms, f, sizeof(f)));
}

static struct json_object *user_json(const struct eb_report_user *u)
{
	struct json_object *o = json_object_new_object();
	bool quota = u->flags & EB_REPORT_USER_QUOTA;

	json_object_object_add(o, "name", json_object_new_string(u->name));
	json_object_object_add(o, "roles", roles_json(u->roles));
	add_u64(o, "sessions", u->sessions);
	add_u64(o, "sources", u->sources);
	add_u64(o, "sinks", u->sinks);
	add_u64(o, "bytes_in", u->bytes_in);
	add_u64(o, "bits_in", u->bits_in);
	add_u64(o, "bits_out", u->bits_out);
	add_u64(o, "bytes_drbg", u->bytes_drbg);
	json_object_object_add(o, "quota_bits_per_hour",
	                       quota ? json_object_new_uint64(u->quota_bits_per_hour) : NULL);
	json_object_object_add(o, "quota_left_bits",
	                       quota ? json_object_new_uint64(u->quota_left_bits) : NULL);
	add_u64(o, "empty_answers", u->empty_answers);
	add_u64(o, "quota_answers", u->quota_answers);
	return o;
}

static int user_cells(const struct eb_report_user *u, struct table *t)
{
	char roles[64], n[3][16], a[32], b[32], c[32], d[32], q[32], e[32], f[32];

	eb_roles_to_string(u->roles, roles, sizeof(roles));
	snprintf(n[0], sizeof(n[0]), "%u", u->sessions);
	snprintf(n[1], sizeof(n[1]), "%u", u->sources);
	snprintf(n[2], sizeof(n[2]), "%u", u->sinks);
	if (u->flags & EB_REPORT_USER_QUOTA)
		snprintf(q, sizeof(q), "%" PRIu64 "/%" PRIu64, u->quota_left_bits,
		         u->quota_bits_per_hour);
	else
		snprintf(q, sizeof(q), "-");
	return table_add_row(t, u->name, roles, n[0], n[1], n[2], u64(u->bytes_in, a, sizeof(a)),
	                     u64(u->bits_in, b, sizeof(b)), u64(u->bits_out, c, sizeof(c)),
	                     u64(u->bytes_drbg, d, sizeof(d)), q,
	                     u64(u->empty_answers, e, sizeof(e)),
	                     u64(u->quota_answers, f, sizeof(f)));
}

static int new_table(enum command cmd, struct table **ret)
{
	switch (cmd) {
	case CMD_SOURCES:
		return table_new(ret, 9, "ID", "USER", "PEER", "KIND", ">BYTES IN",
		                 ">BITS CREDITED", ">CLAIM H", "HEALTH", ">LAST SEEN");
	case CMD_SINKS:
		return table_new(ret, 12, "ID", "USER", "PEER", "KIND", ">BITS SERVED",
		                 ">DRBG BYTES", ">QUOTA LEFT", ">EMPTY", ">QUOTA", ">WAITING",
		                 "WAITS FOR", ">LAST SEEN");
	case CMD_USERS:
		return table_new(ret, 12, "USER", "ROLES", ">SESSIONS", ">SOURCES", ">SINKS",
		                 ">BYTES IN", ">BITS IN", ">BITS OUT", ">DRBG BYTES",
		                 ">QUOTA LEFT/HOUR", ">EMPTY", ">QUOTA");
	case CMD_STATUS:
	case CMD_HISTORY:
	case _CMD_MAX:
	case _CMD_INVALID:
		break;
	}
	return -EINVAL;
}

/* Every page of the command's table, each row into the JSON array or the table. */
static int list(struct eb_client *client, enum command cmd, struct json_object *array,
                struct table *t, unsigned *ret_rows)
{
	uint8_t table = cmd == CMD_USERS ? EB_REPORT_USERS : EB_REPORT_SESSIONS;
	unsigned role = cmd == CMD_SOURCES ? EB_ROLE_SOURCE : EB_ROLE_SINK;
	uint64_t after = 0;
	unsigned rows = 0, shown = 0;
	int r;

	do {
		struct eb_msg_report page;
		struct eb_report_rows it;

		r = eb_client_report(client, table, after, &page);
		if (r < 0)
			return log_error_errno(r, "Broker %s did not answer REPORT: %s",
			                       eb_client_broker(client),
			                       eb_client_last_error(client));
		eb_report_rows_init(&it, &page);
		for (;;) {
			struct eb_report_session s;
			struct eb_report_user u;
			uint64_t id;

			r = table == EB_REPORT_USERS ? eb_report_next_user(&it, &u)
			                             : eb_report_next_session(&it, &s);
			if (r < 0)
				return log_error_errno(r, "Broker %s sent a malformed row",
				                       eb_client_broker(client));
			if (r == 0)
				break;
			id = table == EB_REPORT_USERS ? u.id : s.id;
			if (id <= after || ++rows > ROWS_MAX) {
				log_error("Broker %s pages without end; giving up",
				          eb_client_broker(client));
				return -EPROTO;
			}
			if (table == EB_REPORT_SESSIONS && !(s.roles & role))
				continue;
			shown++;
			if (array)
				r = json_object_array_add(array, table == EB_REPORT_USERS
				                                     ? user_json(&u)
				                                     : session_json(&s, cmd));
			else
				r = table == EB_REPORT_USERS ? user_cells(&u, t)
				                             : session_cells(&s, cmd, t);
			if (r < 0)
				return log_oom();
		}
		after = page.next;
	} while (after != 0);
	*ret_rows = shown;
	return 0;
}

static int run_list(struct eb_client *client, enum command cmd)
{
	_cleanup_(table_freep) struct table *t = NULL;
	struct json_object *o, *array;
	struct eb_msg_state st;
	/* The sources' upstream is told under them; asked last: a broker that predates STATE
	 * closes on it, and the table is still good. */
	bool up = false;
	unsigned n = 0;
	int r;

	if (!arg_json) {
		r = new_table(cmd, &t);
		if (r < 0)
			return log_oom();
		r = list(client, cmd, NULL, t, &n);
		if (r < 0)
			return r;
		up = cmd == CMD_SOURCES && eb_client_state(client, &st) >= 0;
		if (n == 0)
			printf("No %s.\n", command_names[cmd]);
		else
			table_print(t, stdout);
		if (clones_shown > 0)
			printf("* a clone: another session of its guest key drew at the same time "
			       "(a copy of one machine)\n");
		if (up)
			brokerctl_upstream_print(&st);
		return 0;
	}
	o = json_object_new_object();
	array = json_object_new_array();
	json_object_object_add(o, "broker", json_object_new_string(eb_client_broker(client)));
	json_object_object_add(o, command_names[cmd], array);
	r = list(client, cmd, array, NULL, &n);
	if (r >= 0 && cmd == CMD_SOURCES && eb_client_state(client, &st) >= 0)
		json_object_object_add(o, "upstream", brokerctl_upstream_json(&st));
	if (r >= 0)
		print_json(o);
	json_object_put(o);
	return r;
}

/* The clones counter, from the counters table: false from a broker that does not count them. */
static bool fetch_clones(struct eb_client *client, uint64_t *ret)
{
	struct eb_msg_report page;
	struct eb_report_rows it;
	struct eb_report_counter row;

	if (eb_client_report(client, EB_REPORT_COUNTERS, 0, &page) < 0)
		return false;
	eb_report_rows_init(&it, &page);
	while (eb_report_next_counter(&it, &row) > 0)
		if (row.id == EB_COUNTER_CLONES) {
			*ret = row.value;
			return true;
		}
	return false;
}

static enum command command_from_string(const char *s)
{
	for (int i = 0; i < _CMD_MAX; i++)
		if (strcmp(s, command_names[i]) == 0)
			return i;
	return _CMD_INVALID;
}

enum { ARG_JSON = EB_CLI_ARG_FIRST_PRIVATE };

static int option(int c, const char *arg, void *userdata)
{
	(void)arg, (void)userdata;
	if (c != ARG_JSON)
		return -2;
	arg_json = true;
	return 0;
}

static const struct option options[] = {
    EB_CLI_CLIENT_OPTIONS,
    {"json", no_argument, NULL, ARG_JSON},
    {},
};

static const struct eb_cli_program program = {
    .name = "eb-brokerctl",
    .help = help,
    .options = options,
    .option = option,
    .no_environment = true, /* an admin's tool: the local broker unless told otherwise */
    .default_broker = "unix:/run/entropy-broker/broker.sock",
};

int main(int argc, char *argv[])
{
	struct eb_client_options o = {.roles = EB_ROLE_ADMIN, .kind = "eb-brokerctl"};
	_cleanup_(eb_client_freep) struct eb_client *client = NULL;
	struct eb_msg_action_req action;
	struct eb_msg_status st;
	struct eb_msg_state state;
	uint64_t clones = 0;
	bool is_action = false, have_clones;
	enum command cmd = _CMD_INVALID;
	int r;

	log_setup(argv[0]);
	r = eb_cli_parse(argc, argv, &program, &o, NULL);
	if (r != EB_CLI_CONTINUE)
		return r;
	if (optind >= argc) {
		log_error("Expected a command: status, sources, sinks, users, history, drain, "
		          "undrain, disconnect or disconnect-user; see --help");
		return 2;
	}
	r = brokerctl_action_parse(argc - optind, argv + optind, &action);
	if (r < 0)
		return 2;
	is_action = r > 0;
	if (!is_action) {
		cmd = command_from_string(argv[optind]);
		if (cmd < 0) {
			log_error(
			    "Unknown command \"%s\"; the commands are: status, sources, sinks, "
			    "users, history, drain, undrain, disconnect, disconnect-user",
			    argv[optind]);
			return 2;
		}
		if (optind + 1 < argc) {
			log_error("Unexpected argument \"%s\"; see --help", argv[optind + 1]);
			return 2;
		}
	}
	if (eb_cli_client_new(&o, &client) < 0)
		return 2;
	r = eb_client_connect(client);
	if (r < 0) {
		log_error("Cannot query %s: %s", eb_client_broker(client),
		          eb_client_last_error(client));
		return 1;
	}
	if (is_action)
		return brokerctl_action(client, &action, arg_json);
	if (cmd == CMD_HISTORY)
		return brokerctl_history(client, arg_json) < 0 ? 1 : 0;
	if (cmd != CMD_STATUS)
		return run_list(client, cmd) < 0 ? 1 : 0;
	r = eb_client_status(client, &st);
	if (r < 0) {
		log_error("Broker %s did not answer STATUS: %s", eb_client_broker(client),
		          eb_client_last_error(client));
		return 1;
	}
	/* A broker that predates STATE closes on it: its status is shown all the same. */
	r = eb_client_state(client, &state);
	if (r < 0)
		log_warning("Broker %s did not answer STATE (older than eb-brokerctl?): %s; "
		            "showing its status without the drain, reloads and upstream",
		            eb_client_broker(client), eb_client_last_error(client));
	/* Last: a broker older than the counters table closes on it. */
	have_clones = r >= 0 && fetch_clones(client, &clones);
	print_status(eb_client_broker(client), &st, r < 0 ? NULL : &state,
	             have_clones ? &clones : NULL);
	return 0;
}
