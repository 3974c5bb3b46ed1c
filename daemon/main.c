/* SPDX-License-Identifier: MIT */
/* eb-brokerd: pools entropy from sources and serves it to sinks. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include <systemd/sd-daemon.h>

#include "broker.h"
#include "conf.h"
#include "log.h"
#include "uri.h"

static const char *arg_config;
static char *arg_listen[EB_CONF_LISTEN_MAX];
static unsigned arg_n_listen;

static void help(void)
{
	printf("Usage: eb-brokerd [OPTIONS]\n\n"
	       "Pools entropy from sources and serves it to sinks.\n\n"
	       "  -c, --config PATH   configuration file (default " EB_CONF_DEFAULT_PATH ")\n"
	       "  -l, --listen URI    listen on URI when not socket-activated (repeatable):\n"
	       "                      tcp://HOST[:PORT], unix:/PATH, vsock://CID[:PORT]\n"
	       "  -v, --verbose       log debug messages\n"
	       "  -h, --help          show this help\n"
	       "      --version       show the version\n\n"
	       "See eb-brokerd(8) and eb-brokerd.conf(5).\n");
}

/* Returns 1 to go on, 0 to exit successfully (--help), or a negative errno for a usage error. */
static int parse_argv(int argc, char *argv[])
{
	enum { ARG_VERSION = 0x100 };
	static const struct option options[] = {
	    {"config", required_argument, NULL, 'c'},    {"listen", required_argument, NULL, 'l'},
	    {"verbose", no_argument, NULL, 'v'},         {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, ARG_VERSION}, {},
	};
	int c;

	while ((c = getopt_long(argc, argv, "c:l:vh", options, NULL)) >= 0)
		switch (c) {
		case 'c':
			arg_config = optarg;
			break;
		case 'l': {
			struct eb_uri u;

			/* A mistyped address is the operator's error (exit 2), not a runtime
			 * failure found only after the configuration and the pool are set up. */
			if (eb_uri_parse(optarg, &u) < 0)
				return log_error_errno(
				    EINVAL,
				    "Invalid --listen address \"%s\": expected tcp://HOST[:PORT], unix:/PATH, unix+tls:/PATH or vsock://CID[:PORT]",
				    optarg);
			if (arg_n_listen >= EB_CONF_LISTEN_MAX)
				return log_error_errno(E2BIG, "At most %d --listen addresses",
				                       EB_CONF_LISTEN_MAX);
			arg_listen[arg_n_listen++] = optarg;
			break;
		}
		case 'v':
			log_set_max_level(LOG_DEBUG);
			break;
		case 'h':
			help();
			return 0;
		case ARG_VERSION:
			eb_print_version("eb-brokerd");
			return 0;
		default:
			return -EINVAL;
		}
	if (optind < argc)
		return log_error_errno(EINVAL, "Unexpected argument \"%s\"; see --help",
		                       argv[optind]);
	return 1;
}

static int run(int argc, char *argv[])
{
	_cleanup_(broker_freep) struct broker *b = NULL;
	struct eb_conf *conf = NULL;
	int r;

	log_setup(argv[0]);
	r = parse_argv(argc, argv);
	if (r <= 0)
		return r < 0 ? 2 : 0;
	if (broker_load_config(arg_config, &conf) < 0)
		return 2;
	/* Without sockets from systemd the broker binds its own; having none to bind is the
	 * operator's error (exit 2), so say so before the pool is set up. */
	if (sd_listen_fds(false) == 0 && arg_n_listen == 0 && conf->n_listen == 0) {
		log_error(
		    "Nothing to listen on: no sockets from systemd, no --listen, no listen= in %s",
		    conf->path ? conf->path : "the configuration");
		eb_conf_free(conf);
		return 2;
	}
	/* A peer that vanishes mid-write must cost us a session, not the process. */
	signal(SIGPIPE, SIG_IGN);

	/* The broker owns conf from here on: a reload replaces it. */
	r = broker_new(conf, arg_config, &b);
	if (r < 0)
		return 1;
	r = broker_listen(b, arg_listen, arg_n_listen);
	if (r >= 0)
		r = broker_run(b);
	b = broker_free(b);
	return r < 0 ? 1 : 0;
}

int main(int argc, char *argv[])
{
	return run(argc, argv);
}
