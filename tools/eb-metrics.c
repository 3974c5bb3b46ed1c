/* SPDX-License-Identifier: MIT */
/* eb-metrics: answers one HTTP GET /metrics on the connection systemd hands it (Accept=yes) with
 * the broker's figures in OpenMetrics or the Prometheus text format, read over the admin
 * protocol. */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "cli.h"
#include "io.h"
#include "log.h"
#include "macro.h"
#include "report.h"
#include "time-util.h"

/* A scrape's request is one line and a few headers; Prometheus sends about 300 bytes. */
#define REQUEST_MAX 8192
#define TIMEOUT_MAX 300
/* As eb-brokerctl: no listing without end from a broken broker. */
#define ROWS_MAX (2 * 65536 + 1024)

static unsigned arg_timeout_s = 5;

static void help(void)
{
	printf(
	    "Usage: eb-metrics [OPTIONS]\n\n"
	    "Answers one HTTP GET /metrics on the connection systemd passes (a socket unit with\n"
	    "Accept=yes) with the broker's pool, sources, sinks and users in the Prometheus text\n"
	    "format.\n\n"
	    "      --timeout SEC     give up on a slow client or broker after SEC seconds\n"
	    "                        (default 5, at most 300)\n" EB_CLI_CLIENT_HELP
	    "\nWithout --broker (or $EB_BROKER), unix:/run/entropy-broker/broker.sock is used.\n"
	    "See eb-metrics(8).\n");
}

/* Reads until the blank line that ends the request's head, at most REQUEST_MAX bytes and until
 * deadline. The body of a GET, if any, is never read. */
static int read_request(int fd, char *buf, size_t size, uint64_t deadline)
{
	size_t len = 0;

	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		uint64_t now = eb_now_ms();
		ssize_t n;
		int r;

		if (now >= deadline)
			return -ETIMEDOUT;
		r = poll(&p, 1, (int)(deadline - now));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -ETIMEDOUT;
		if (len + 1 >= size)
			return -EMSGSIZE;
		n = recv(fd, buf + len, size - 1 - len, MSG_DONTWAIT);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ECONNRESET;
		len += (size_t)n;
		buf[len] = '\0';
		if (strstr(buf, "\r\n\r\n") || strstr(buf, "\n\n"))
			return 0;
	}
}

/* An Accept header that names OpenMetrics: the format is then OpenMetrics 1.0.0, else the
 * Prometheus text format 0.0.4, which is the same but for counters' family names and # EOF. */
static bool wants_openmetrics(const char *req)
{
	for (const char *l = strchr(req, '\n'); l && l[1]; l = strchr(l + 1, '\n')) {
		size_t n = strcspn(l + 1, "\r\n");

		if (n > 7 && strncasecmp(l + 1, "accept:", 7) == 0 &&
		    memmem(l + 8, n - 7, "application/openmetrics-text", 28))
			return true;
	}
	return false;
}

/* The request line: 200 for GET or HEAD of /metrics, else the status to answer. */
static int parse_request(const char *buf, bool *ret_head)
{
	size_t m = strcspn(buf, " "), t;
	const char *target = buf + m + 1;

	if (buf[m] != ' ')
		return 400;
	t = strcspn(target, " ");
	if (target[t] != ' ' || strncmp(target + t + 1, "HTTP/1.", 7) != 0)
		return 400;
	if (!((m == 3 && strncmp(buf, "GET", 3) == 0) || (m == 4 && strncmp(buf, "HEAD", 4) == 0)))
		return 405;
	/* A query string is allowed and ignored: there is one set of figures. */
	if (!(strncmp(target, "/metrics", 8) == 0 && (t == 8 || target[8] == '?')))
		return 404;
	*ret_head = m == 4;
	return 200;
}

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

static void sample_label(FILE *f, const char *name, const char *label, const char *value,
                         uint64_t v)
{
	fprintf(f, "%s{%s=\"", name, label);
	put_label(f, value);
	fprintf(f, "\"} %" PRIu64 "\n", v);
}

/* Every page of a table, the rows into a growing array. */
static int fetch(struct eb_client *c, uint8_t table, void **ret, size_t *ret_n)
{
	size_t row = table == EB_REPORT_USERS ? sizeof(struct eb_report_user)
	                                      : sizeof(struct eb_report_session);
	_cleanup_free_ uint8_t *v = NULL;
	size_t n = 0, allocated = 0;
	uint64_t after = 0;
	int r;

	do {
		struct eb_msg_report page;
		struct eb_report_rows it;

		r = eb_client_report(c, table, after, &page);
		if (r < 0)
			return r;
		if (n + page.count > ROWS_MAX)
			return -EPROTO;
		if (n + page.count > allocated) {
			size_t want = MAX(allocated * 2, n + page.count);
			uint8_t *p = realloc(v, want * row);

			if (!p)
				return -ENOMEM;
			v = p;
			allocated = want;
		}
		eb_report_rows_init(&it, &page);
		for (;;) {
			r = table == EB_REPORT_USERS
			        ? eb_report_next_user(&it, (struct eb_report_user *)(v + n * row))
			        : eb_report_next_session(&it,
			                                 (struct eb_report_session *)(v + n * row));
			if (r < 0)
				return r;
			if (r == 0)
				break;
			n++;
		}
		if (page.next != 0 && page.next <= after)
			return -EPROTO;
		after = page.next;
	} while (after != 0);
	*ret = TAKE_PTR(v);
	*ret_n = n;
	return 0;
}

static void write_broker(FILE *f, const struct eb_msg_status *st)
{
	family(f, "eb_pool_bits", "gauge", "Credited entropy in the pool, in bits.");
	sample(f, "eb_pool_bits", st->pool_bits);
	family(f, "eb_pool_capacity_bits", "gauge", "The pool's capacity, in bits.");
	sample(f, "eb_pool_capacity_bits", st->capacity_bits);
	family(f, "eb_bits_in_total", "counter",
	       "Bits credited to the pool since the broker started.");
	sample(f, "eb_bits_in_total", st->bits_in);
	family(f, "eb_bits_out_total", "counter",
	       "Bits served as full entropy since the broker started.");
	sample(f, "eb_bits_out_total", st->bits_out);
	family(f, "eb_drbg_bytes_total", "counter",
	       "Bytes served from the DRBG since the broker started.");
	sample(f, "eb_drbg_bytes_total", st->bytes_drbg);
	family(f, "eb_sources", "gauge", "Sessions connected as sources.");
	sample(f, "eb_sources", st->sources);
	family(f, "eb_sinks", "gauge", "Sessions connected as sinks.");
	sample(f, "eb_sinks", st->sinks);
	family(f, "eb_uptime_seconds", "gauge", "Seconds since the broker started.");
	sample(f, "eb_uptime_seconds", st->uptime_s);
}

/* Sources by the broker's word on their health, and the sessions asleep or waiting: counts, not
 * one series per session, so that a broker with thousands of sessions stays a small scrape. */
static void write_sessions(FILE *f, const struct eb_report_session *v, size_t n)
{
	uint64_t health[_EB_SOURCE_HEALTH_MAX] = {}, asleep = 0, waiting = 0;
	const struct eb_report_session *up = NULL;

	for (size_t i = 0; i < n; i++) {
		if (v[i].flags & EB_REPORT_UPSTREAM)
			up = &v[i];
		health[v[i].health]++;
		asleep += !!(v[i].flags & EB_REPORT_ASLEEP);
		/* A sink answered EMPTY and waiting to retry waits all the same: counted from
		 * its first unanswered GET until a DATA, not only while the broker holds it. */
		waiting += v[i].starving_ms > 0;
	}
	family(f, "eb_sources_by_health", "gauge",
	       "Source sessions by what the broker sees of their data (eb-brokerctl(1)).");
	for (int h = EB_SOURCE_NEW; h < _EB_SOURCE_HEALTH_MAX; h++)
		sample_label(f, "eb_sources_by_health", "health", eb_source_health_to_string(h),
		             health[h]);
	family(f, "eb_sources_asleep", "gauge", "Sources told to rest while the pool is full.");
	sample(f, "eb_sources_asleep", asleep);
	family(
	    f, "eb_sinks_waiting", "gauge",
	    "Sinks waiting for entropy: a GET held, or answered EMPTY and not yet served since.");
	sample(f, "eb_sinks_waiting", waiting);
	if (!up)
		return;
	/* Only a broker with an [upstream] has these. */
	family(f, "eb_upstream_bits_in_total", "counter",
	       "Bits credited from the upstream broker since start.");
	sample(f, "eb_upstream_bits_in_total", up->bits_in);
	family(f, "eb_upstream_failing", "gauge",
	       "Whether the latest attempt to reach the upstream broker failed.");
	sample(f, "eb_upstream_failing", up->health == EB_SOURCE_SILENT);
}

enum user_field {
	USER_SESSIONS,
	USER_BYTES_IN,
	USER_BITS_IN,
	USER_BITS_OUT,
	USER_DRBG,
	USER_QUOTA_LEFT,
	USER_QUOTA,
	USER_EMPTY,
	_USER_FIELD_MAX,
};

static const struct {
	const char *name, *type, *help;
} user_fields[_USER_FIELD_MAX] = {
    [USER_SESSIONS] = {"eb_user_sessions", "gauge", "Established sessions of the user."},
    [USER_BYTES_IN] = {"eb_user_bytes_in_total", "counter",
                       "Bytes the user's sources donated since the broker started."},
    [USER_BITS_IN] = {"eb_user_bits_in_total", "counter",
                      "Bits credited to the user's sources since the broker started."},
    [USER_BITS_OUT] = {"eb_user_bits_out_total", "counter",
                       "Full-entropy bits served to the user since the broker started."},
    [USER_DRBG] = {"eb_user_drbg_bytes_total", "counter",
                   "DRBG bytes served to the user since the broker started."},
    [USER_QUOTA_LEFT] = {"eb_user_quota_left_bits", "gauge",
                         "Pool bits the user's quota can still spend now."},
    [USER_QUOTA] = {"eb_user_quota_bits_per_hour", "gauge", "The user's quota-bits-per-hour."},
    [USER_EMPTY] = {"eb_user_empty_answers_total", "counter",
                    "GETs of the user's sinks answered EMPTY (the pool too low) since start."},
};

/* A user's figure; false for a quota figure of a user without a quota. */
static bool user_value(const struct eb_report_user *u, enum user_field k, uint64_t *ret)
{
	bool quota = u->flags & EB_REPORT_USER_QUOTA;

	switch (k) {
	case USER_SESSIONS:
		*ret = u->sessions;
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
	case _USER_FIELD_MAX:
		break;
	}
	return false;
}

/* One series per configured user: users are few and named by the administrator. */
static void write_users(FILE *f, const struct eb_report_user *v, size_t n)
{
	uint64_t empty = 0;

	for (size_t i = 0; i < n; i++)
		empty += v[i].empty_answers;
	family(f, "eb_empty_answers_total", "counter",
	       "GETs answered EMPTY (the pool too low) since start, all users.");
	sample(f, "eb_empty_answers_total", empty);
	for (int k = 0; k < _USER_FIELD_MAX; k++) {
		family(f, user_fields[k].name, user_fields[k].type, user_fields[k].help);
		for (size_t i = 0; i < n; i++) {
			uint64_t x;

			if (user_value(&v[i], k, &x))
				sample_label(f, user_fields[k].name, "user", v[i].name, x);
		}
	}
}

/* The figures, or eb_broker_up 0 alone when the broker cannot be asked: the scrape still
 * succeeds, so that an alert can say the broker is down rather than the exporter. */
static int write_metrics(struct eb_client *c, FILE *f)
{
	_cleanup_free_ struct eb_report_session *sessions = NULL;
	_cleanup_free_ struct eb_report_user *users = NULL;
	size_t n_sessions = 0, n_users = 0;
	struct eb_msg_status st;
	int r;

	r = eb_client_connect(c);
	if (r >= 0)
		r = eb_client_status(c, &st);
	if (r >= 0)
		r = fetch(c, EB_REPORT_SESSIONS, (void **)&sessions, &n_sessions);
	if (r >= 0)
		r = fetch(c, EB_REPORT_USERS, (void **)&users, &n_users);
	family(f, "eb_broker_up", "gauge", "Whether the broker answered (1) or not (0).");
	sample(f, "eb_broker_up", r >= 0);
	if (r < 0) {
		log_warning("Broker %s did not answer: %s", eb_client_broker(c),
		            r == -EPROTO || r == -EBADMSG ? "a malformed report"
		                                          : eb_client_last_error(c));
		return 0;
	}
	write_broker(f, &st);
	write_sessions(f, sessions, n_sessions);
	write_users(f, users, n_users);
	return 0;
}

static void drain(int fd, uint64_t deadline)
{
	char buf[4096];

	for (size_t total = 0; total < 256 * 1024;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		uint64_t now = eb_now_ms();
		ssize_t n;

		if (now >= deadline || poll(&p, 1, (int)(deadline - now)) <= 0)
			return;
		n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
			return;
		total += n > 0 ? (size_t)n : 0;
	}
}

static int respond(int fd, int status, const char *body, size_t len, bool head)
{
	static const struct {
		int code;
		const char *reason;
	} reasons[] = {
	    {200, "OK"},
	    {400, "Bad Request"},
	    {404, "Not Found"},
	    {405, "Method Not Allowed"},
	    {408, "Request Timeout"},
	    {431, "Request Header Fields Too Large"},
	};
	const char *reason = "Error";
	char hdr[512];
	int n, r;

	for (size_t i = 0; i < ELEMENTSOF(reasons); i++)
		if (reasons[i].code == status)
			reason = reasons[i].reason;
	n = snprintf(hdr, sizeof(hdr),
	             "HTTP/1.1 %d %s\r\n"
	             "Content-Type: %s\r\n"
	             "Content-Length: %zu\r\n"
	             "%s"
	             "Connection: close\r\n\r\n",
	             status, reason,
	             status != 200 ? "text/plain; charset=utf-8"
	             : openmetrics ? "application/openmetrics-text; version=1.0.0; charset=utf-8"
	                           : "text/plain; version=0.0.4; charset=utf-8",
	             len, status == 405 ? "Allow: GET, HEAD\r\n" : "");
	r = eb_send_all(fd, hdr, (size_t)n);
	if (r >= 0 && !head)
		r = eb_send_all(fd, body, len);
	/* The response is whole: say so, then read what the client still sends (a request cut
	 * short at REQUEST_MAX) until it closes, for a while: closing with unread bytes would
	 * reset the connection, and the client might lose the response with it. */
	(void)shutdown(fd, SHUT_WR);
	drain(fd, eb_now_ms() + 1000);
	return r;
}

static int serve(int fd, struct eb_client *c)
{
	_cleanup_free_ char *body = NULL;
	_cleanup_fclose_ FILE *f = NULL;
	char req[REQUEST_MAX];
	size_t len = 0;
	bool head = false;
	int r, status;

	r = read_request(fd, req, sizeof(req), eb_now_ms() + arg_timeout_s * 1000ULL);
	if (r == -ECONNRESET)
		return 0; /* a port probe: nothing asked, nothing to say */
	if (r == -ETIMEDOUT || r == -EMSGSIZE) {
		log_warning("%s", r == -ETIMEDOUT ? "The client sent no whole request in time"
		                                  : "The client's request is too large");
		status = r == -ETIMEDOUT ? 408 : 431;
		return respond(fd, status, "", 0, false);
	}
	if (r < 0)
		return log_error_errno(r, "Failed to read the request: %m");
	status = parse_request(req, &head);
	if (status != 200) {
		static const char *const msg[] = {"bad request\n", "not found; try /metrics\n",
		                                  "only GET and HEAD\n"};
		const char *m = status == 400 ? msg[0] : status == 404 ? msg[1] : msg[2];

		log_debug("Answering %d to \"%.*s\"", status, (int)strcspn(req, "\r\n"), req);
		return respond(fd, status, m, strlen(m), false);
	}

	openmetrics = wants_openmetrics(req);
	f = open_memstream(&body, &len);
	if (!f)
		return log_oom();
	r = write_metrics(c, f);
	if (r < 0)
		return r;
	if (openmetrics)
		fputs("# EOF\n", f);
	if (fflush(f) != 0 || ferror(f))
		return log_oom();
	r = respond(fd, 200, body, len, head);
	if (r < 0)
		return log_error_errno(r, "Failed to send the metrics: %m");
	return 0;
}

enum { ARG_TIMEOUT = EB_CLI_ARG_FIRST_PRIVATE };

static int option(int c, const char *arg, void *userdata)
{
	(void)userdata;
	if (c == ARG_TIMEOUT)
		return eb_cli_option_uint("timeout", arg, TIMEOUT_MAX, "seconds", &arg_timeout_s);
	return -2;
}

static const struct option options[] = {
    EB_CLI_CLIENT_OPTIONS,
    {"timeout", required_argument, NULL, ARG_TIMEOUT},
    {},
};

static const struct eb_cli_program program = {
    .name = "eb-metrics",
    .help = help,
    .options = options,
    .option = option,
    .no_arguments = true,
    .default_broker = "unix:/run/entropy-broker/broker.sock",
};

int main(int argc, char *argv[])
{
	struct eb_client_options o = {.roles = EB_ROLE_ADMIN, .kind = "eb-metrics"};
	_cleanup_(eb_client_freep) struct eb_client *client = NULL;
	_cleanup_close_ int fd = -EBADF;
	int n, r;

	log_setup(argv[0]);
	r = eb_cli_parse(argc, argv, &program, &o, NULL);
	if (r != EB_CLI_CONTINUE)
		return r;
	o.timeout_ms = (int)arg_timeout_s * 1000;
	if (eb_cli_client_new(&o, &client) < 0)
		return 2;

	n = sd_listen_fds(true);
	if (n != 1 || sd_is_socket(SD_LISTEN_FDS_START, AF_UNSPEC, SOCK_STREAM, 0) <= 0) {
		log_error("Expected one connected stream socket from systemd (a socket unit with "
		          "Accept=yes), got %d file descriptor(s)",
		          n < 0 ? 0 : n);
		return 2;
	}
	fd = SD_LISTEN_FDS_START;

	/* The backstop: a client that stops reading, or a broker that hangs between the checks
	 * above, cannot keep this process past three timeouts. */
	alarm(3 * arg_timeout_s);
	return serve(fd, client) < 0 ? 1 : 0;
}
