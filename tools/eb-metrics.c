/* SPDX-License-Identifier: MIT */
/* eb-metrics: answers one HTTP request on the connection systemd hands it (Accept=yes): GET
 * /metrics with the broker's figures for Prometheus, GET / with a status page and GET
 * /history.json with the page's data, read over the admin protocol. */
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

#include "broker-view.h"
#include "cli.h"
#include "client.h"
#include "http.h"
#include "log.h"
#include "macro.h"
#include "prometheus.h"
#include "status-json.h"
#include "status-page.h"
#include "time-util.h"

#define TIMEOUT_MAX 300

static unsigned arg_timeout_s = 5;

static void help(void)
{
	printf(
	    "Usage: eb-metrics [OPTIONS]\n\n"
	    "Answers one HTTP request on the connection systemd passes (a socket unit with\n"
	    "Accept=yes): GET /metrics with the broker's pool, sources, sinks and users in the\n"
	    "Prometheus text format, GET / with a status page, GET /history.json with its data.\n\n"
	    "      --timeout SEC     give up on a slow client or broker after SEC seconds\n"
	    "                        (default 5, at most 300)\n" EB_CLI_CLIENT_HELP
	    "\nWithout --broker (or $EB_BROKER), unix:/run/entropy-broker/broker.sock is used.\n"
	    "See eb-metrics(8).\n");
}

/* The page's headers: a policy that lets the browser load nothing and run nothing, so that a
 * peer's name that slipped past the escaping still could not act; and no copy kept. */
#define PAGE_HEADERS                                                                               \
	"Content-Security-Policy: default-src 'none'; style-src 'unsafe-inline'; img-src data:; "  \
	"form-action 'none'; frame-ancestors 'none'; base-uri 'none'\r\n"                          \
	"X-Content-Type-Options: nosniff\r\n"                                                      \
	"Cache-Control: no-store\r\n"

static const char *content_type(const struct http_request *req)
{
	switch (req->route) {
	case HTTP_ROUTE_METRICS:
		return req->openmetrics
		           ? "application/openmetrics-text; version=1.0.0; charset=utf-8"
		           : "text/plain; version=0.0.4; charset=utf-8";
	case HTTP_ROUTE_PAGE:
		return "text/html; charset=utf-8";
	case HTTP_ROUTE_HISTORY_JSON:
		return "application/json";
	case _HTTP_ROUTE_MAX:
	case _HTTP_ROUTE_INVALID:
		break;
	}
	return "text/plain; charset=utf-8";
}

/* The answer's body for a request that parsed. A broker that does not answer is not a failed
 * request: each route says so in its own terms (eb_broker_up 0, a page that says it). */
static int write_answer(struct eb_client *c, const struct http_request *req, FILE *f)
{
	struct view v;
	int r;

	r = view_load(&v, c, req->route != HTTP_ROUTE_METRICS);
	if (r < 0)
		log_warning("Broker %s did not answer: %s", eb_client_broker(c),
		            r == -EPROTO || r == -EBADMSG ? "a malformed report"
		                                          : eb_client_last_error(c));
	switch (req->route) {
	case HTTP_ROUTE_METRICS:
		prometheus_write(f, &v, r >= 0, req->openmetrics);
		break;
	case HTTP_ROUTE_PAGE:
		status_page_write(f, &v, r >= 0 ? NULL : eb_client_last_error(c));
		break;
	case HTTP_ROUTE_HISTORY_JSON:
		r = status_json_write(f, &v, r >= 0);
		break;
	case _HTTP_ROUTE_MAX:
	case _HTTP_ROUTE_INVALID:
		break;
	}
	view_done(&v);
	return r == -ENOMEM ? r : 0;
}

static int serve(int fd, struct eb_client *c)
{
	_cleanup_free_ char *body = NULL;
	_cleanup_fclose_ FILE *f = NULL;
	char buf[HTTP_REQUEST_MAX];
	struct http_request req;
	size_t len = 0;
	int r, status;

	r = http_read_head(fd, buf, sizeof(buf), eb_now_ms() + arg_timeout_s * 1000ULL);
	if (r == -ECONNRESET)
		return 0; /* a port probe: nothing asked, nothing to say */
	if (r == -ETIMEDOUT || r == -EMSGSIZE) {
		log_warning("%s", r == -ETIMEDOUT ? "The client sent no whole request in time"
		                                  : "The client's request is too large");
		status = r == -ETIMEDOUT ? 408 : 431;
		return http_respond(fd, status, "text/plain; charset=utf-8", NULL, "", 0, false);
	}
	if (r < 0)
		return log_error_errno(r, "Failed to read the request: %m");
	status = http_request_parse(buf, (size_t)r, &req);
	if (status != 200) {
		static const char *const msg[] = {"bad request\n",
		                                  "not found; try /metrics, / or /history.json\n",
		                                  "only GET and HEAD\n"};
		const char *m = status == 400 ? msg[0] : status == 404 ? msg[1] : msg[2];

		log_debug("Answering %d to \"%.*s\"", status, (int)strcspn(buf, "\r\n"), buf);
		return http_respond(fd, status, "text/plain; charset=utf-8", NULL, m, strlen(m),
		                    false);
	}

	f = open_memstream(&body, &len);
	if (!f)
		return log_oom();
	r = write_answer(c, &req, f);
	if (r < 0)
		return log_oom();
	if (fflush(f) != 0 || ferror(f))
		return log_oom();
	r = http_respond(fd, 200, content_type(&req),
	                 req.route == HTTP_ROUTE_METRICS ? NULL : PAGE_HEADERS, body, len,
	                 req.head);
	if (r < 0)
		return log_error_errno(r, "Failed to send the answer: %m");
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
