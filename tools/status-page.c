/* SPDX-License-Identifier: MIT */
/* The status page: the pool now, its history as charts, the sources, sinks and upstreams. One
 * document with its style inline and its charts as data: images, so that it works through a
 * plain ssh -L tunnel and the Content-Security-Policy can forbid everything else; tables and the
 * charts' alternative texts carry the figures for a text browser. Every text a peer chose (user
 * names, kinds, addresses) goes through html_escape(). */
#include "status-page.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "broker-view.h"
#include "macro.h"
#include "svg.h"

#define COLOUR_POOL "#1f6feb"
#define COLOUR_IN   "#1a7f37"
#define COLOUR_OUT  "#bc4c00"

/* 1200 px: the sources table (nine columns) whole on a laptop's screen; narrower, it scrolls. */
static const char style[] =
    "body{font:15px/1.45 system-ui,'DejaVu Sans',sans-serif;margin:0 auto;max-width:1200px;"
    "padding:12px;color:#1f2328;background:#f6f8fa}"
    "h1{font-size:1.5em;margin:.2em 0}h2{font-size:1.15em;margin:1.2em 0 .4em}"
    ".meta{color:#57606a;margin:0 0 .8em}"
    ".cards{display:flex;flex-wrap:wrap;gap:8px}"
    ".card{background:#fff;border:1px solid #d0d7de;border-radius:6px;padding:6px 12px;"
    "flex:1 1 130px}.card b{display:block;font-size:1.35em}"
    ".bar{height:14px;background:#d0d7de;border-radius:7px;overflow:hidden;margin:8px 0}"
    ".bar span{display:block;height:100%;background:" COLOUR_POOL "}"
    ".charts{display:flex;flex-wrap:wrap;gap:12px}"
    "figure{margin:0;flex:1 1 440px;background:#fff;border:1px solid #d0d7de;border-radius:6px;"
    "padding:8px}figure img{width:100%;height:auto;display:block}"
    "figcaption{font-weight:600;margin-bottom:4px}"
    ".key{font-size:.85em;color:#57606a}.key span{white-space:nowrap}.key i{display:inline-block;width:12px;height:12px;"
    "vertical-align:middle;margin:0 4px 0 10px;border-radius:2px}"
    ".scroll{overflow-x:auto}"
    "table{border-collapse:collapse;background:#fff;width:100%;font-size:.92em}"
    "th,td{border:1px solid #d0d7de;padding:4px 8px;text-align:left;white-space:nowrap}"
    "th{background:#eaeef2}td.n{text-align:right;font-variant-numeric:tabular-nums}"
    ".bad{color:#c8102e;font-weight:600}.warn{color:#9a6700;font-weight:600}"
    ".alarm{background:#ffebe9;border:1px solid #c8102e;border-radius:6px;padding:6px 12px}"
    "@media (max-width:600px){body{padding:6px;font-size:14px}figure{flex-basis:100%}}";

void html_escape(FILE *f, const char *s)
{
	for (; *s; s++)
		switch (*s) {
		case '&':
			fputs("&amp;", f);
			break;
		case '<':
			fputs("&lt;", f);
			break;
		case '>':
			fputs("&gt;", f);
			break;
		case '"':
			fputs("&quot;", f);
			break;
		case '\'':
			fputs("&#39;", f);
			break;
		default:
			/* The broker refuses control characters in a peer's text; should one come,
			 * it is shown as what it is not, a replacement character. */
			if ((unsigned char)*s < 0x20 || *s == 0x7f)
				fputs("&#xfffd;", f);
			else
				fputc(*s, f);
		}
}

/* "2 d 3 h", "3 h 05 min", "4 min 10 s", "12 s": how long, at a glance. */
static const char *duration(uint64_t s, char buf[static 32])
{
	if (s >= 86400)
		snprintf(buf, 32, "%" PRIu64 " d %" PRIu64 " h", s / 86400, s / 3600 % 24);
	else if (s >= 3600)
		snprintf(buf, 32, "%" PRIu64 " h %02" PRIu64 " min", s / 3600, s / 60 % 60);
	else if (s >= 60)
		snprintf(buf, 32, "%" PRIu64 " min %02" PRIu64 " s", s / 60, s % 60);
	else
		snprintf(buf, 32, "%" PRIu64 " s", s);
	return buf;
}

/* 123456789 as 123 456 789, with thin spaces between the groups of three. */
static const char *grouped(uint64_t x, char buf[static 64])
{
	char digits[24];
	int n = snprintf(digits, sizeof(digits), "%" PRIu64, x);
	size_t o = 0;

	for (int i = 0; i < n; i++) {
		if (i > 0 && (n - i) % 3 == 0)
			o += (size_t)snprintf(buf + o, 64 - o, "&#8201;");
		buf[o++] = digits[i];
	}
	buf[o] = '\0';
	return buf;
}

/* The time of day, UTC, of a moment ms before the view was read. */
static const char *clock_of(const struct view *v, uint64_t ms_ago, char buf[static 32])
{
	time_t t = (time_t)(v->read_at_s - MIN(ms_ago / 1000, v->read_at_s));
	struct tm tm;

	if (!gmtime_r(&t, &tm) || strftime(buf, 32, "%H:%M:%S", &tm) == 0)
		snprintf(buf, 32, "?");
	return buf;
}

/* Which broker the page is of, in its heading and its title: its machine and its id, so that a
 * fleet's pages in a row of tabs are told apart. */
static void name(FILE *f, const struct view *v)
{
	fputs("Entropy broker", f);
	if (v->host[0]) {
		fputs(" on ", f);
		html_escape(f, v->host);
	}
	if (v->broker_id)
		fprintf(f, " (id %016" PRIx64 ")", v->broker_id);
}

static void head(FILE *f, const struct view *v)
{
	fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
	      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
	      "<meta http-equiv=\"refresh\" content=\"60\"><title>",
	      f);
	name(f, v);
	fprintf(f, " &middot; status</title><style>%s</style></head><body>\n", style);
}

static void summary(FILE *f, const struct view *v)
{
	const struct eb_msg_status *st = &v->status;
	double pct =
	    st->capacity_bits ? 100.0 * (double)st->pool_bits / (double)st->capacity_bits : 0;
	char a[32], b[32], g[64], g2[64];
	struct tm tm;
	time_t now = (time_t)v->read_at_s;

	if (!gmtime_r(&now, &tm) || strftime(b, sizeof(b), "%Y-%m-%d %H:%M:%S UTC", &tm) == 0)
		snprintf(b, sizeof(b), "?");
	fputs("<h1>", f);
	name(f, v);
	fputs("</h1>\n<p class=\"meta\">", f);
	/* A broker that does not say its id has none shown. */
	if (v->broker_id)
		fprintf(f, "id <code>%016" PRIx64 "</code> &middot; ", v->broker_id);
	fputs("version ", f);
	html_escape(f, v->version);
	fprintf(f, " &middot; up %s &middot; read %s</p>\n", duration(st->uptime_s, a), b);
	fprintf(f, "<p><b>Pool: %s of ", grouped(st->pool_bits, g));
	fprintf(f,
	        "%s bits (%.1f%%)</b></p>"
	        "<div class=\"bar\"><span style=\"width:%.1f%%\"></span></div>\n",
	        grouped(st->capacity_bits, g), pct, MIN(pct, 100.0));
	fprintf(f,
	        "<div class=\"cards\"><div class=\"card\">Sources <b>%" PRIu32 "</b></div>"
	        "<div class=\"card\">Sinks <b>%" PRIu32 "</b></div>"
	        "<div class=\"card\">Bits in <b>%s</b></div>",
	        st->sources, st->sinks, grouped(st->bits_in, g));
	fprintf(f,
	        "<div class=\"card\">Bits out <b>%s</b></div>"
	        "<div class=\"card\">DRBG bytes <b>%s</b></div></div>\n",
	        grouped(st->bits_out, g), grouped(st->bytes_drbg, g2));
}

/* The chart as an image of its own SVG document, percent-encoded into a data: URI. */
static void chart_img(FILE *f, const struct svg_chart *c, const char *alt)
{
	_cleanup_free_ char *svg = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&svg, &len);

	if (!m)
		return;
	svg_chart_write(m, c);
	if (fclose(m) != 0)
		return;
	fputs("<img src=\"data:image/svg+xml,", f);
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)svg[i];

		if (ch < 0x21 || ch > 0x7e || strchr("\"%#<>&'", ch))
			fprintf(f, "%%%02X", ch);
		else
			fputc(ch, f);
	}
	fprintf(f, "\" width=\"%d\" height=\"%d\" alt=\"", SVG_WIDTH, SVG_HEIGHT);
	html_escape(f, alt);
	fputs("\">", f);
}

/* The end of sample i of a window, in ms before the view was read. */
static uint64_t sample_ago_ms(const struct view_series *h, size_t i)
{
	return h->age_ms + (uint64_t)(h->n - 1 - i) * h->interval_ms;
}

struct chart_data {
	size_t n;
	double *pool, *in, *out;
	uint8_t *marks;
	uint64_t alarms, empty;
	size_t starved;
	double pool_min, pool_max, in_avg, out_avg;
};

static void chart_data_done(struct chart_data *d)
{
	free(d->pool);
	free(d->in);
	free(d->out);
	free(d->marks);
}

/* The window's newest samples that fit it, as the charts' values. */
static int chart_data_load(struct chart_data *d, const struct view_series *h)
{
	size_t skip = h->n > h->slots ? h->n - h->slots : 0;

	*d = (struct chart_data){.n = h->n - skip, .pool_min = INFINITY};
	d->pool = calloc(MAX(d->n, (size_t)1), sizeof(double));
	d->in = calloc(MAX(d->n, (size_t)1), sizeof(double));
	d->out = calloc(MAX(d->n, (size_t)1), sizeof(double));
	d->marks = calloc(MAX(d->n, (size_t)1), 1);
	if (!d->pool || !d->in || !d->out || !d->marks)
		return -ENOMEM;
	for (size_t i = 0; i < d->n; i++) {
		const struct view_sample *s = &h->samples[skip + i];

		d->pool[i] = (double)s->pool_bits;
		d->in[i] = (double)s->bits_in * 1000 / h->interval_ms;
		d->out[i] = (double)s->bits_out * 1000 / h->interval_ms;
		d->marks[i] =
		    (s->alarms ? SVG_MARK_ALARM : 0) | (s->empty_answers ? SVG_MARK_STARVED : 0);
		d->alarms += s->alarms;
		d->empty += s->empty_answers;
		d->starved += s->empty_answers > 0;
		d->pool_min = MIN(d->pool_min, d->pool[i]);
		d->pool_max = MAX(d->pool_max, d->pool[i]);
		d->in_avg += d->in[i] / (double)d->n;
		d->out_avg += d->out[i] / (double)d->n;
	}
	return 0;
}

static void key(FILE *f, const char *colour, const char *what)
{
	fprintf(f, "<span><i style=\"background:%s\"></i>%s</span> ", colour, what);
}

static void charts(FILE *f, const struct view *v, enum view_window w)
{
	const struct view_series *h = &v->history[w];
	const char *span = view_window_to_string(w);
	_cleanup_(chart_data_done) struct chart_data d = {};
	char alt[512], a[16], b[16], c[16];

	fprintf(f, "<h2>The last %s</h2>\n", span);
	if (h->n == 0 || h->slots == 0 || h->interval_ms == 0 || chart_data_load(&d, h) < 0) {
		fputs("<p>No history yet: this broker keeps none, or has only just started.</p>\n",
		      f);
		return;
	}
	fputs("<div class=\"charts\"><figure><figcaption>Pool level, bits</figcaption>", f);
	snprintf(alt, sizeof(alt),
	         "[chart: pool level over the last %s: now %s bits, lowest %s, highest %s]", span,
	         svg_si(d.pool[d.n - 1], a), svg_si(d.pool_min, b), svg_si(d.pool_max, c));
	chart_img(f,
	          &(struct svg_chart){.slots = h->slots,
	                              .n = d.n,
	                              .interval_ms = h->interval_ms,
	                              .lines = (struct svg_line[]){{d.pool, COLOUR_POOL, true}},
	                              .n_lines = 1,
	                              .marks = d.marks},
	          alt);
	fputs("<div class=\"key\">", f);
	key(f, COLOUR_POOL, "pool level");
	key(f, "#f2b705", "starved (EMPTY answers)");
	key(f, "#c8102e", "health alarm");
	fputs(
	    "</div></figure>\n<figure><figcaption>Entropy in and out, bits per second</figcaption>",
	    f);
	snprintf(alt, sizeof(alt),
	         "[chart: bits per second over the last %s: in %s on average, out %s; %" PRIu64
	         " health alarms; starved in %zu of %zu intervals]",
	         span, svg_si(d.in_avg, a), svg_si(d.out_avg, b), d.alarms, d.starved, d.n);
	chart_img(f,
	          &(struct svg_chart){.slots = h->slots,
	                              .n = d.n,
	                              .interval_ms = h->interval_ms,
	                              .lines = (struct svg_line[]){{d.in, COLOUR_IN, false},
	                                                           {d.out, COLOUR_OUT, false}},
	                              .n_lines = 2,
	                              .marks = d.marks},
	          alt);
	fputs("<div class=\"key\">", f);
	key(f, COLOUR_IN, "in (credited)");
	key(f, COLOUR_OUT, "out (full entropy)");
	key(f, "#f2b705", "starved");
	key(f, "#c8102e", "health alarm");
	fputs("</div></figure></div>\n", f);
}

/* One row per run of intervals with alarms or EMPTY answers: from the hour's finer samples, then
 * the day's before the hour began. */
static size_t event_rows(FILE *f, const struct view *v, const struct view_series *h,
                         uint64_t older_than_ms)
{
	size_t rows = 0;

	for (size_t i = 0; i < h->n;) {
		const struct view_sample *s = &h->samples[i];
		uint64_t alarms = 0, empty = 0;
		size_t j = i;
		char a[32], b[32];

		if ((!s->alarms && !s->empty_answers) || sample_ago_ms(h, i) < older_than_ms) {
			i++;
			continue;
		}
		for (; j < h->n && (h->samples[j].alarms || h->samples[j].empty_answers); j++) {
			alarms += h->samples[j].alarms;
			empty += h->samples[j].empty_answers;
		}
		fprintf(f, "<tr><td>%s</td><td>%s</td>",
		        clock_of(v, sample_ago_ms(h, i) + h->interval_ms, a),
		        clock_of(v, sample_ago_ms(h, j - 1), b));
		fprintf(f,
		        "<td class=\"n%s\">%" PRIu64 "</td><td class=\"n%s\">%" PRIu64
		        "</td></tr>\n",
		        alarms ? " bad" : "", alarms, empty ? " warn" : "", empty);
		rows++;
		i = j;
	}
	return rows;
}

static void events(FILE *f, const struct view *v)
{
	const struct view_series *hour = &v->history[VIEW_HOUR];
	size_t rows;

	if (hour->n == 0 && v->history[VIEW_DAY].n == 0)
		return;
	fputs("<h2>Health alarms and starvation</h2>\n<div class=\"scroll\"><table><tr><th>from "
	      "(UTC)</th><th>to</th><th>health alarms</th><th>EMPTY answers</th></tr>\n",
	      f);
	rows = event_rows(f, v, hour, 0);
	rows += event_rows(f, v, &v->history[VIEW_DAY],
	                   hour->n ? sample_ago_ms(hour, 0) + hour->interval_ms : 0);
	if (rows == 0)
		fputs("<tr><td colspan=\"4\">none in the last day</td></tr>\n", f);
	fputs("</table></div>\n", f);
}

static void td(FILE *f, const char *cls, const char *text)
{
	fprintf(f, "<td%s%s%s>", cls ? " class=\"" : "", cls ? cls : "", cls ? "\"" : "");
	html_escape(f, text);
	fputs("</td>", f);
}

static void td_u64(FILE *f, uint64_t x)
{
	fprintf(f, "<td class=\"n\">%" PRIu64 "</td>", x);
}

/* Who the session is: user, kind and peer, each a peer's own words. */
static void td_who(FILE *f, const struct eb_report_session *s)
{
	td(f, NULL, s->user);
	td(f, NULL, s->kind[0] ? s->kind : "-");
	td(f, NULL, s->peer);
}

static void td_seen(FILE *f, const struct view *v, const struct eb_report_session *s)
{
	char a[32], b[32];

	fprintf(f, "<td>%s (%s ago)</td>", clock_of(v, s->last_ms, a),
	        duration(s->last_ms / 1000, b));
}

static bool health_bad(enum eb_source_health h)
{
	return h == EB_SOURCE_STUCK || h == EB_SOURCE_SILENT;
}

static void source_row(FILE *f, const struct view *v, const struct eb_report_session *s)
{
	char buf[64];

	fputs("<tr>", f);
	td_who(f, s);
	snprintf(buf, sizeof(buf), "%s%s", eb_source_health_to_string(s->health),
	         s->flags & EB_REPORT_ASLEEP ? " (asleep)" : "");
	/* The upstream's column is its state, which a failing upstream is, not a health alarm. */
	if ((s->flags & EB_REPORT_UPSTREAM) && v->has_state)
		td(f, v->state.upstream == EB_UPSTREAM_FAILING ? "warn" : NULL,
		   eb_upstream_state_to_string(v->state.upstream));
	else
		td(f, health_bad(s->health) ? "bad" : NULL, buf);
	snprintf(buf, sizeof(buf), "%u.%03u", s->claim_mbits_per_byte / 1000,
	         s->claim_mbits_per_byte % 1000);
	td(f, "n", buf);
	td_u64(f, s->bytes_in);
	td_u64(f, s->bits_in);
	td_seen(f, v, s);
	fputs("</tr>\n", f);
}

/* Why a starving sink waits: its user's quota, or the pool. */
static bool quota_spent(const struct eb_report_session *s)
{
	return s->flags & EB_REPORT_QUOTA_SPENT;
}

static void td_count(FILE *f, uint64_t x)
{
	fprintf(f, "<td class=\"n%s\">%" PRIu64 "</td>", x ? " warn" : "", x);
}

static void sink_row(FILE *f, const struct view *v, const struct eb_report_session *s)
{
	char buf[32], text[64];

	fputs("<tr>", f);
	td_who(f, s);
	td_u64(f, s->bits_out);
	td_u64(f, s->bytes_drbg);
	if (s->flags & EB_REPORT_QUOTA)
		td_u64(f, s->quota_left_bits);
	else
		td(f, NULL, "-");
	td_count(f, s->empty_answers);
	td_count(f, s->quota_answers);
	if (s->starving_ms)
		snprintf(text, sizeof(text), "%s (%s)", duration(s->starving_ms / 1000, buf),
		         quota_spent(s) ? "quota" : "empty");
	td(f, s->starving_ms ? "warn" : NULL, s->starving_ms ? text : "-");
	td_seen(f, v, s);
	fputs("</tr>\n", f);
}

enum table_kind { TABLE_SOURCES, TABLE_SINKS, TABLE_UPSTREAMS };

static bool in_table(const struct eb_report_session *s, enum table_kind k)
{
	bool up = s->flags & EB_REPORT_UPSTREAM;

	switch (k) {
	case TABLE_SOURCES:
		return !up && (s->roles & EB_ROLE_SOURCE);
	case TABLE_SINKS:
		return !up && (s->roles & EB_ROLE_SINK);
	case TABLE_UPSTREAMS:
		return up;
	}
	return false;
}

static void sessions(FILE *f, const struct view *v, enum table_kind k)
{
	static const char *const heads[] = {
	    [TABLE_SOURCES] =
		"<h2>Sources</h2>\n<div class=\"scroll\"><table><tr><th>user</th>"
		"<th>kind</th><th>peer</th><th>health</th><th>claim, bits/byte</th>"
		"<th>bytes in</th><th>bits credited</th><th>last seen (UTC)</th></tr>\n",
	    [TABLE_SINKS] = "<h2>Sinks</h2>\n<div class=\"scroll\"><table><tr><th>user</th>"
			    "<th>kind</th><th>peer</th><th>bits served</th><th>DRBG bytes</th>"
			    "<th>quota left, bits</th><th>EMPTY answers</th><th>QUOTA answers</th>"
			    "<th>starving for (why)</th><th>last seen (UTC)</th></tr>\n",
	    [TABLE_UPSTREAMS] = "<h2>Upstreams</h2>\n<div class=\"scroll\"><table><tr><th>user</th>"
				"<th>kind</th><th>peer</th><th>health</th><th>claim, bits/byte</th>"
				"<th>bytes in</th><th>bits credited</th><th>last seen (UTC)</th>"
				"</tr>\n",
	};
	static const char *const none[] = {
	    [TABLE_SOURCES] = "no source is connected",
	    [TABLE_SINKS] = "no sink is connected",
	    [TABLE_UPSTREAMS] = "none: this broker draws from no other",
	};
	size_t rows = 0;

	fputs(heads[k], f);
	for (size_t i = 0; i < v->n_sessions; i++) {
		if (!in_table(&v->sessions[i], k))
			continue;
		if (k == TABLE_SINKS)
			sink_row(f, v, &v->sessions[i]);
		else
			source_row(f, v, &v->sessions[i]);
		rows++;
	}
	if (rows == 0)
		fprintf(f, "<tr><td colspan=\"%d\">%s</td></tr>\n", k == TABLE_SINKS ? 10 : 8,
		        none[k]);
	fputs("</table></div>\n", f);
}

/* What needs a look now, above everything: sources whose data the broker refuses or that went
 * quiet, and sinks that wait. */
static void alarms_now(FILE *f, const struct view *v)
{
	const struct eb_msg_state *st = &v->state;
	bool any = false;
	char buf[32];

	/* A failing upstream is said, and why, but as a warning: the pool may hold plenty. */
	if (v->has_state && st->upstream == EB_UPSTREAM_FAILING) {
		fprintf(
		    f, "<p class=\"warn\">Upstream failing for %s: ",
		    duration(v->read_at_s - MIN(st->upstream_since_ms / 1000, v->read_at_s), buf));
		html_escape(f, st->upstream_reason);
		fputs("</p>\n", f);
	}
	for (size_t i = 0; i < v->n_sessions; i++) {
		const struct eb_report_session *s = &v->sessions[i];
		bool bad = (s->roles & EB_ROLE_SOURCE) && !(s->flags & EB_REPORT_UPSTREAM) &&
		           health_bad(s->health);

		if (!bad && !((s->roles & EB_ROLE_SINK) && s->starving_ms))
			continue;
		fputs(any ? "<br>" : "<p class=\"alarm\">", f);
		any = true;
		fputs(bad ? "<b>Health alarm:</b> source " : "<b>Starving:</b> sink ", f);
		html_escape(f, s->user);
		fputs(" (", f);
		html_escape(f, s->peer);
		if (bad)
			fprintf(f, ") is %s", eb_source_health_to_string(s->health));
		else if (quota_spent(s))
			fprintf(f,
			        ") has waited %s: its user's quota is spent (answered QUOTA; "
			        "quota-bits-per-hour)",
			        duration(s->starving_ms / 1000, buf));
		else
			fprintf(f, ") has been answered EMPTY for %s",
			        duration(s->starving_ms / 1000, buf));
	}
	if (any)
		fputs("</p>\n", f);
}

void status_page_write(FILE *f, const struct view *v, const char *error)
{
	head(f, v);
	if (error) {
		fputs("<h1>", f);
		name(f, v);
		fputs("</h1>\n<p class=\"alarm\"><b>The broker did not answer:</b> ", f);
		html_escape(f, error);
		fputs("</p>\n</body></html>\n", f);
		return;
	}
	summary(f, v);
	alarms_now(f, v);
	for (int w = 0; w < _VIEW_WINDOW_MAX; w++)
		charts(f, v, w);
	events(f, v);
	sessions(f, v, TABLE_SOURCES);
	sessions(f, v, TABLE_SINKS);
	sessions(f, v, TABLE_UPSTREAMS);
	fputs("<p class=\"meta\">eb-metrics " EB_VERSION
	      " &middot; this page refreshes every minute &middot; the same data: "
	      "<a href=\"history.json\">history.json</a>, <a href=\"metrics\">metrics</a></p>\n"
	      "</body></html>\n",
	      f);
}
