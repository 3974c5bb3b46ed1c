/* SPDX-License-Identifier: MIT */
/* eb-brokerctl drain, undrain, disconnect and disconnect-user, and the state "status" shows. */
#include "brokerctl-actions.h"

#include <errno.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client.h"
#include "log.h"
#include "macro.h"
#include "proto.h"
#include "time-util.h"

static const struct {
	const char *word;
	enum eb_action action;
	const char *arg; /* what follows the word, or NULL */
} words[] = {
    {"drain", EB_ACTION_DRAIN, NULL},
    {"undrain", EB_ACTION_UNDRAIN, NULL},
    {"disconnect", EB_ACTION_DISCONNECT, "a session ID (eb-brokerctl sources, sinks)"},
    {"disconnect-user", EB_ACTION_DISCONNECT_USER, "a USER"},
};

int brokerctl_action_parse(int argc, char *argv[], struct eb_msg_action_req *ret)
{
	for (size_t i = 0; i < ELEMENTSOF(words); i++) {
		struct eb_msg_action_req q = {.action = (uint8_t)words[i].action};
		char *end = NULL;

		if (strcmp(argv[0], words[i].word) != 0)
			continue;
		if (argc != (words[i].arg ? 2 : 1)) {
			log_error("\"%s\" takes %s%s; see --help", words[i].word,
			          words[i].arg ? words[i].arg : "no argument",
			          words[i].arg ? " and nothing else" : "");
			return -EINVAL;
		}
		if (words[i].action == EB_ACTION_DISCONNECT) {
			errno = 0;
			q.session = strtoull(argv[1], &end, 10);
			if (errno != 0 || end == argv[1] || *end || q.session == 0 ||
			    argv[1][0] == '-') {
				log_error("\"%s\" is not a session ID: the ID column of "
				          "\"eb-brokerctl sources\" or \"sinks\", 1 or above",
				          argv[1]);
				return -EINVAL;
			}
		} else if (words[i].action == EB_ACTION_DISCONNECT_USER) {
			if (strlen(argv[1]) == 0 || strlen(argv[1]) > EB_KIND_MAX) {
				log_error("\"%s\" is not a user name: 1 to %d bytes", argv[1],
				          EB_KIND_MAX);
				return -EINVAL;
			}
			snprintf(q.user, sizeof(q.user), "%s", argv[1]);
		}
		*ret = q;
		return 1;
	}
	return 0;
}

int brokerctl_action(struct eb_client *c, const struct eb_msg_action_req *q, bool json)
{
	struct eb_msg_action a;
	bool ok;
	int r;

	r = eb_client_action(c, q, &a);
	if (r < 0) {
		log_error("Broker %s did not %s: %s (a broker older than eb-brokerctl refuses "
		          "actions)",
		          eb_client_broker(c), eb_action_to_string(q->action),
		          eb_client_last_error(c));
		return 1;
	}
	ok = a.result == EB_ACTION_DONE || a.result == EB_ACTION_UNCHANGED;
	if (json) {
		struct json_object *o = json_object_new_object();

		json_object_object_add(o, "broker", json_object_new_string(eb_client_broker(c)));
		json_object_object_add(o, "action",
		                       json_object_new_string(eb_action_to_string(q->action)));
		json_object_object_add(
		    o, "result", json_object_new_string(eb_action_result_to_string(a.result)));
		json_object_object_add(o, "sessions", json_object_new_uint64(a.sessions));
		json_object_object_add(o, "retry_ms", json_object_new_uint64(a.retry_ms));
		json_object_object_add(o, "text", json_object_new_string(a.text));
		puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
		                                           JSON_C_TO_STRING_NOSLASHESCAPE));
		json_object_put(o);
	} else if (a.result == EB_ACTION_LIMITED)
		log_error("Broker %s: %s (in %u ms)", eb_client_broker(c), a.text, a.retry_ms);
	else if (!ok)
		log_error("Broker %s: %s", eb_client_broker(c), a.text);
	else
		printf("%s: %s\n", eb_client_broker(c), a.text);
	return ok ? 0 : 1;
}

/* "2026-12-05 23:40:01 UTC (3m20s ago)", or "never". */
static const char *when(uint64_t ms, char *buf, size_t size)
{
	uint64_t now = eb_wall_ms(), s = now > ms ? (now - ms) / 1000 : 0;
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	char date[32];

	if (ms == 0 || !gmtime_r(&t, &tm) || strftime(date, sizeof(date), "%F %T UTC", &tm) == 0)
		return "never";
	if (s < 60)
		snprintf(buf, size, "%s (%" PRIu64 ".%" PRIu64 "s ago)", date, s,
		         (now - ms) % 1000 / 100);
	else if (s < 3600)
		snprintf(buf, size, "%s (%" PRIu64 "m%02" PRIu64 "s ago)", date, s / 60, s % 60);
	else
		snprintf(buf, size, "%s (%" PRIu64 "h%02" PRIu64 "m ago)", date, s / 3600,
		         s / 60 % 60);
	return buf;
}

void brokerctl_state_print(const struct eb_msg_state *st)
{
	char a[96];

	if (st->flags & EB_STATE_DRAINED)
		printf("Drained:  yes, by %s since %s\n", st->drained_by,
		       when(st->drained_ms, a, sizeof(a)));
	else
		printf("Drained:  no\n");
	if (st->flags & EB_STATE_STOPPING)
		printf("Stopping: yes\n");
	printf("Config:   loaded %s\n", when(st->config_loaded_ms, a, sizeof(a)));
	if (st->last_reload_ms)
		printf("Reloads:  %u, %u failed; the last %s %s: %s\n", st->reloads,
		       st->reload_failures,
		       st->flags & EB_STATE_RELOAD_FAILED ? "FAILED" : "succeeded",
		       when(st->last_reload_ms, a, sizeof(a)), st->reload_text);
	else
		printf("Reloads:  none since start\n");
	brokerctl_upstream_print(st);
}

void brokerctl_upstream_print(const struct eb_msg_state *st)
{
	char a[96], b[96];

	if (!(st->flags & EB_STATE_UPSTREAM))
		return;
	if (st->upstream == EB_UPSTREAM_FAILING)
		printf("Upstream: failing since %s: %s%s%s\n",
		       when(st->upstream_since_ms, a, sizeof(a)), st->upstream_reason,
		       st->upstream_broker[0] ? "; last broker " : "", st->upstream_broker);
	else if (st->upstream == EB_UPSTREAM_CONNECTED)
		printf("Upstream: connected to %s since %s\n", st->upstream_broker,
		       when(st->upstream_since_ms, a, sizeof(a)));
	else
		printf("Upstream: connecting (no attempt has ended yet)\n");
	printf("          last data %s\n", when(st->upstream_data_ms, b, sizeof(b)));
}

static void add_ms(struct json_object *o, const char *key, uint64_t ms)
{
	json_object_object_add(o, key, ms ? json_object_new_uint64(ms) : NULL);
}

void brokerctl_state_json(const struct eb_msg_state *st, struct json_object *o)
{
	json_object_object_add(o, "drained", json_object_new_boolean(st->flags & EB_STATE_DRAINED));
	json_object_object_add(o, "drained_by",
	                       st->drained_by[0] ? json_object_new_string(st->drained_by) : NULL);
	add_ms(o, "drained_since_ms", st->drained_ms);
	json_object_object_add(o, "stopping",
	                       json_object_new_boolean(st->flags & EB_STATE_STOPPING));
	add_ms(o, "config_loaded_ms", st->config_loaded_ms);
	json_object_object_add(o, "reloads", json_object_new_uint64(st->reloads));
	json_object_object_add(o, "reload_failures", json_object_new_uint64(st->reload_failures));
	add_ms(o, "last_reload_ms", st->last_reload_ms);
	json_object_object_add(o, "last_reload_successful",
	                       json_object_new_boolean(!(st->flags & EB_STATE_RELOAD_FAILED)));
	json_object_object_add(o, "last_reload_text",
	                       st->last_reload_ms ? json_object_new_string(st->reload_text) : NULL);
	json_object_object_add(o, "upstream", brokerctl_upstream_json(st));
}

struct json_object *brokerctl_upstream_json(const struct eb_msg_state *st)
{
	struct json_object *up;

	if (!(st->flags & EB_STATE_UPSTREAM))
		return NULL;
	up = json_object_new_object();
	json_object_object_add(up, "state",
	                       json_object_new_string(eb_upstream_state_to_string(st->upstream)));
	json_object_object_add(up, "broker", json_object_new_string(st->upstream_broker));
	json_object_object_add(up, "reason",
	                       st->upstream == EB_UPSTREAM_FAILING
	                           ? json_object_new_string(st->upstream_reason)
	                           : NULL);
	add_ms(up, "since_ms", st->upstream_since_ms);
	add_ms(up, "last_data_ms", st->upstream_data_ms);
	return up;
}
