/* SPDX-License-Identifier: MIT */
/* Unit tests for eb-metrics' HTTP request parser, status page and history JSON: the routes and
 * refusals, a peer's names escaped in HTML and in JSON, nothing the page would load from
 * elsewhere, and the charts drawn. EB_TEST_PAGE_OUT=PATH also writes the page to PATH. */
#include <errno.h>
#include <json-c/json.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "broker-view.h"
#include "http.h"
#include "macro.h"
#include "status-json.h"
#include "status-page.h"

static int parse(const char *s, struct http_request *ret)
{
	return http_request_parse(s, strlen(s), ret);
}

static void test_http_routes(void **state)
{
	struct http_request r;

	(void)state;
	assert_int_equal(parse("GET / HTTP/1.1\r\nHost: x\r\n\r\n", &r), 200);
	assert_int_equal(r.route, HTTP_ROUTE_PAGE);
	assert_false(r.head);
	assert_int_equal(parse("HEAD /history.json?a=1 HTTP/1.0\n\n", &r), 200);
	assert_int_equal(r.route, HTTP_ROUTE_HISTORY_JSON);
	assert_true(r.head);
	assert_int_equal(parse("GET /metrics HTTP/1.1\r\nHost: x\r\nACCEPT: "
	                       "application/openmetrics-text;version=1.0.0\r\n\r\n",
	                       &r),
	                 200);
	assert_int_equal(r.route, HTTP_ROUTE_METRICS);
	assert_true(r.openmetrics);
	/* An Accept past the blank line is the body's, not the head's. */
	assert_int_equal(
	    parse("GET /metrics HTTP/1.1\r\n\r\nAccept: application/openmetrics-text\r\n", &r),
	    200);
	assert_false(r.openmetrics);
	assert_int_equal(parse("GET /index.html HTTP/1.1\r\n\r\n", &r), 200);
	assert_int_equal(r.route, HTTP_ROUTE_PAGE);
}

static void test_http_refusals(void **state)
{
	static const struct {
		const char *req;
		int status;
	} cases[] = {
	    {"POST /metrics HTTP/1.1\r\n\r\n", 405},
	    {"GET /metricsx HTTP/1.1\r\n\r\n", 404},
	    {"GET /history.jsonp HTTP/1.1\r\n\r\n", 404},
	    {"GET //metrics HTTP/1.1\r\n\r\n", 404},
	    {"nonsense\r\n\r\n", 400},
	    {"GET / HTTP/2.0\r\n\r\n", 400},
	    {"GET / HTTP/1.10\r\n\r\n", 400},
	    {"GET  / HTTP/1.1\r\n\r\n", 400},
	    {"GET /\x01 HTTP/1.1\r\n\r\n", 400},
	    {"GET / HTTP/1.1", 400}, /* no line end */
	    {"", 400},
	};
	struct http_request r = {.route = _HTTP_ROUTE_INVALID};

	(void)state;
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		/* A TAP comment: the request line alone, which names the case that fails. */
		print_message("# case %zu: %.*s\n", i, (int)strcspn(cases[i].req, "\r\n"),
		              cases[i].req);
		assert_int_equal(parse(cases[i].req, &r), cases[i].status);
		assert_int_equal(r.route, _HTTP_ROUTE_INVALID);
	}
	/* A NUL inside the request line is refused, not taken for its end. */
	assert_int_equal(http_request_parse("GET /\0 HTTP/1.1\r\n\r\n", 19, &r), 400);
}

#define EVIL "<script>alert(\"x\")</script>&'"

/* A broker up for a day with an hour of 10 s samples and a day of minutes, a source with a
 * hostile name and a starving sink. */
static void fake_view(struct view *v)
{
	static const size_t slots[] = {360, 1440};
	static const uint32_t interval[] = {10, 60};

	*v = (struct view){.broker_id = 0x0123456789abcdefULL, .read_at_s = 1800000000};
	snprintf(v->version, sizeof(v->version), "0.1.0");
	v->status = (struct eb_msg_status){.pool_bits = 300000,
	                                   .capacity_bits = 1048576,
	                                   .bits_in = 123456789,
	                                   .bits_out = 98765432,
	                                   .sources = 1,
	                                   .sinks = 1,
	                                   .uptime_s = 90000};
	for (int w = 0; w < _VIEW_WINDOW_MAX; w++) {
		struct view_series *h = &v->history[w];

		*h = (struct view_series){
		    .slots = slots[w], .interval_ms = interval[w] * 1000, .age_ms = 3000};
		h->n = w == VIEW_HOUR ? slots[w] : slots[w] - 200;
		h->samples = calloc(h->n, sizeof(*h->samples));
		assert_non_null(h->samples);
		for (size_t i = 0; i < h->n; i++) {
			double x = (double)i / (double)h->n;
			struct view_sample *s = &h->samples[i];

			s->pool_bits = (uint64_t)(1048576 * (0.5 + 0.4 * __builtin_sin(6.3 * x)) *
			                          (x > 0.6 && x < 0.7 ? 0.02 : 1));
			s->bits_in = (uint64_t)(interval[w] * (4000 + 1500 * __builtin_cos(9 * x)));
			s->bits_out =
			    (uint64_t)(interval[w] * (3500 + 2000 * __builtin_sin(5 * x)));
			s->sources = 1;
			s->sinks = 1;
			s->alarms = i == h->n / 3 || i == h->n / 3 + 1;
			s->empty_answers = x > 0.6 && x < 0.7 ? 5 : 0;
		}
	}
	v->n_sessions = 3;
	v->sessions = calloc(3, sizeof(*v->sessions));
	assert_non_null(v->sessions);
	v->sessions[0] = (struct eb_report_session){.id = 1,
	                                            .roles = EB_ROLE_SOURCE,
	                                            .health = EB_SOURCE_STUCK,
	                                            .claim_mbits_per_byte = 7500,
	                                            .last_ms = 2500,
	                                            .bytes_in = 4096,
	                                            .bits_in = 30000,
	                                            .user = EVIL,
	                                            .kind = "stream </td>",
	                                            .peer = "tcp 127.0.0.1:4000"};
	v->sessions[1] = (struct eb_report_session){.id = 2,
	                                            .roles = EB_ROLE_SINK,
	                                            .last_ms = 100,
	                                            .bits_out = 8192,
	                                            .empty_answers = 3,
	                                            .starving_ms = 4000,
	                                            .user = "vm1",
	                                            .kind = "kernel",
	                                            .peer = "unix pid=12 uid=1000"};
	v->sessions[2] = (struct eb_report_session){.id = UINT64_MAX,
	                                            .roles = EB_ROLE_SOURCE,
	                                            .flags = EB_REPORT_UPSTREAM,
	                                            .health = EB_SOURCE_OK,
	                                            .user = "up",
	                                            .kind = "upstream",
	                                            .peer = "tcp://upstream.example:55225"};
}

static char *render(const struct view *v, const char *error)
{
	char *body = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&body, &len);

	assert_non_null(f);
	status_page_write(f, v, error);
	assert_int_equal(fclose(f), 0);
	return body;
}

static void test_page(void **state)
{
	_cleanup_free_ char *page = NULL;
	const char *out = getenv("EB_TEST_PAGE_OUT");
	struct view v;

	(void)state;
	fake_view(&v);
	page = render(&v, NULL);
	if (out) {
		FILE *f = fopen(out, "we");

		assert_non_null(f);
		fputs(page, f);
		assert_int_equal(fclose(f), 0);
	}
	/* The peer's name is text, never markup. */
	assert_null(strstr(page, "<script"));
	assert_null(strstr(page, "</td>\""));
	assert_non_null(
	    strstr(page, "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;&#39;"));
	assert_non_null(strstr(page, "stream &lt;/td&gt;"));
	/* Nothing loaded from elsewhere: every src is a data: URI, no stylesheet or frame. */
	for (const char *p = strstr(page, "src="); p; p = strstr(p + 1, "src="))
		assert_memory_equal(p, "src=\"data:image/svg+xml,", 24);
	assert_null(strstr(page, "<link"));
	assert_null(strstr(page, "<iframe"));
	assert_null(strstr(page, "url("));
	/* What the page promises: a phone's viewport, the charts of both windows, the alarm, the
	 * tables and the broker's id. */
	assert_non_null(strstr(page, "<meta name=\"viewport\" content=\"width=device-width"));
	assert_non_null(strstr(page, "[chart: pool level over the last hour: "));
	assert_non_null(strstr(page, "[chart: bits per second over the last day: "));
	assert_non_null(strstr(page, "<b>Health alarm:</b> source "));
	assert_non_null(strstr(page, "<h2>Upstreams</h2>"));
	assert_non_null(strstr(page, "tcp://upstream.example:55225"));
	assert_non_null(strstr(page, "0123456789abcdef"));
	/* An SVG path per line, percent-encoded into its image. */
	assert_non_null(strstr(page, "%3Cpath%20d=%27M"));
	view_done(&v);
}

/* A failing upstream is said, with its reason, as a warning: not a source's health alarm, though
 * its row's health is silent. */
static void test_page_upstream_failing(void **state)
{
	_cleanup_free_ char *page = NULL;
	struct view v;

	(void)state;
	fake_view(&v);
	v.sessions[0].health = EB_SOURCE_OK;
	v.sessions[2].health = EB_SOURCE_SILENT;
	v.has_state = true;
	v.state = (struct eb_msg_state){.flags = EB_STATE_UPSTREAM,
	                                .upstream = EB_UPSTREAM_FAILING,
	                                .upstream_since_ms = (v.read_at_s - 35) * 1000,
	                                .upstream_broker = "tcp://upstream.example:55225",
	                                .upstream_reason = "Connection refused"};
	page = render(&v, NULL);
	assert_non_null(
	    strstr(page, "<p class=\"warn\">Upstream failing for 35 s: Connection refused"));
	assert_null(strstr(page, "<b>Health alarm:</b>"));
	assert_non_null(strstr(page, "<td class=\"warn\">failing</td>"));
	view_done(&v);
}

static void test_page_broker_down(void **state)
{
	_cleanup_free_ char *page = NULL;
	struct view v = {};

	(void)state;
	page = render(&v, "Connection refused <by> peer");
	assert_non_null(
	    strstr(page, "The broker did not answer:</b> Connection refused &lt;by&gt;"));
	assert_null(strstr(page, "<h2>Sources</h2>"));
}

static void test_json(void **state)
{
	_cleanup_free_ char *body = NULL;
	struct json_object *root, *o, *a;
	size_t len = 0;
	struct view v;
	FILE *f;

	(void)state;
	fake_view(&v);
	f = open_memstream(&body, &len);
	assert_non_null(f);
	assert_int_equal(status_json_write(f, &v, true), 0);
	assert_int_equal(fclose(f), 0);
	root = json_tokener_parse(body);
	assert_non_null(root);
	assert_true(json_object_object_get_ex(root, "sources", &a));
	assert_int_equal(json_object_array_length(a), 1);
	assert_true(json_object_object_get_ex(json_object_array_get_idx(a, 0), "user", &o));
	assert_string_equal(json_object_get_string(o), EVIL);
	assert_true(json_object_object_get_ex(root, "history", &o));
	assert_true(json_object_object_get_ex(o, "hour", &o));
	assert_true(json_object_object_get_ex(o, "samples", &a));
	assert_int_equal(json_object_array_length(a), 360);
	assert_true(json_object_object_get_ex(root, "broker", &o));
	assert_true(json_object_object_get_ex(o, "id", &o));
	assert_string_equal(json_object_get_string(o), "0123456789abcdef");
	json_object_put(root);
	view_done(&v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_http_routes),
	    cmocka_unit_test(test_http_refusals),
	    cmocka_unit_test(test_page),
	    cmocka_unit_test(test_page_upstream_failing),
	    cmocka_unit_test(test_page_broker_down),
	    cmocka_unit_test(test_json),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
