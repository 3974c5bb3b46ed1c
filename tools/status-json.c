/* SPDX-License-Identifier: MIT */
/* The status page's data as JSON, written by json-c, which escapes every string (a peer's names
 * among them) as JSON asks. */
#include "status-json.h"

#include <errno.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdio.h>

#include "broker-view.h"
#include "macro.h"

static void add_u64(struct json_object *o, const char *k, uint64_t v)
{
	json_object_object_add(o, k, json_object_new_uint64(v));
}

static struct json_object *series_json(const struct view_series *h)
{
	struct json_object *o = json_object_new_object(), *a = json_object_new_array();

	add_u64(o, "interval_ms", h->interval_ms);
	add_u64(o, "slots", h->slots);
	/* The newest sample ended this long before read_at; the others one interval apart. */
	add_u64(o, "age_ms", h->age_ms);
	for (size_t i = 0; i < h->n; i++) {
		const struct view_sample *s = &h->samples[i];
		struct json_object *x = json_object_new_object();

		add_u64(x, "pool_bits", s->pool_bits);
		add_u64(x, "bits_in", s->bits_in);
		add_u64(x, "bits_out", s->bits_out);
		add_u64(x, "sources", s->sources);
		add_u64(x, "sinks", s->sinks);
		add_u64(x, "alarms", s->alarms);
		add_u64(x, "empty_answers", s->empty_answers);
		json_object_array_add(a, x);
	}
	json_object_object_add(o, "samples", a);
	return o;
}

static struct json_object *session_json(const struct eb_report_session *s)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "user", json_object_new_string(s->user));
	json_object_object_add(o, "kind", json_object_new_string(s->kind));
	json_object_object_add(o, "peer", json_object_new_string(s->peer));
	add_u64(o, "connected_s", s->connected_s);
	add_u64(o, "last_seen_ms", s->last_ms);
	if (s->roles & EB_ROLE_SOURCE) {
		json_object_object_add(
		    o, "health", json_object_new_string(eb_source_health_to_string(s->health)));
		add_u64(o, "bytes_in", s->bytes_in);
		add_u64(o, "bits_credited", s->bits_in);
	}
	if (s->roles & EB_ROLE_SINK) {
		add_u64(o, "bits_served", s->bits_out);
		add_u64(o, "bytes_drbg", s->bytes_drbg);
		add_u64(o, "empty_answers", s->empty_answers);
		add_u64(o, "starving_ms", s->starving_ms);
	}
	return o;
}

static struct json_object *broker_json(const struct view *v)
{
	const struct eb_msg_status *st = &v->status;
	struct json_object *o = json_object_new_object();
	char id[17];

	/* The id as hexadecimal text, as the broker logs it: 64 bits are past what a double
	 * (jq, JavaScript) holds exactly. */
	snprintf(id, sizeof(id), "%016" PRIx64, v->broker_id);
	json_object_object_add(o, "id", json_object_new_string(id));
	json_object_object_add(o, "version", json_object_new_string(v->version));
	add_u64(o, "uptime_s", st->uptime_s);
	add_u64(o, "pool_bits", st->pool_bits);
	add_u64(o, "capacity_bits", st->capacity_bits);
	add_u64(o, "bits_in", st->bits_in);
	add_u64(o, "bits_out", st->bits_out);
	add_u64(o, "bytes_drbg", st->bytes_drbg);
	add_u64(o, "sources", st->sources);
	add_u64(o, "sinks", st->sinks);
	if (st->version >= 1) {
		add_u64(o, "carried_bits", st->carried_bits);
		add_u64(o, "dropped_bits", st->dropped_bits);
	}
	return o;
}

int status_json_write(FILE *f, const struct view *v, bool up)
{
	struct json_object *root = json_object_new_object(), *h, *lists[3];
	const char *text;

	if (!root)
		return -ENOMEM;
	json_object_object_add(root, "broker_up", json_object_new_boolean(up));
	add_u64(root, "read_at", v->read_at_s);
	if (up) {
		json_object_object_add(root, "broker", broker_json(v));
		h = json_object_new_object();
		for (int w = 0; w < _VIEW_WINDOW_MAX; w++)
			json_object_object_add(h, view_window_to_string(w),
			                       series_json(&v->history[w]));
		json_object_object_add(root, "history", h);
		for (size_t k = 0; k < ELEMENTSOF(lists); k++)
			lists[k] = json_object_new_array();
		for (size_t i = 0; i < v->n_sessions; i++) {
			const struct eb_report_session *s = &v->sessions[i];
			size_t k = s->flags & EB_REPORT_UPSTREAM ? 2
			           : s->roles & EB_ROLE_SOURCE   ? 0
			           : s->roles & EB_ROLE_SINK     ? 1
			                                         : SIZE_MAX;

			if (k != SIZE_MAX)
				json_object_array_add(lists[k], session_json(s));
		}
		json_object_object_add(root, "sources", lists[0]);
		json_object_object_add(root, "sinks", lists[1]);
		json_object_object_add(root, "upstreams", lists[2]);
	}
	text = json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN |
	                                                JSON_C_TO_STRING_NOSLASHESCAPE);
	if (!text) {
		json_object_put(root);
		return -ENOMEM;
	}
	fputs(text, f);
	fputc('\n', f);
	json_object_put(root);
	return 0;
}
