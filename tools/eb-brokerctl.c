/* SPDX-License-Identifier: MIT */
/* eb-brokerctl: asks a broker how it is doing. */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "log.h"

static bool arg_json;

static void help(void)
{
	printf("Usage: eb-brokerctl [OPTIONS] status [--json]\n\n"
	       "Shows a broker's pool level, capacity, sources and sinks.\n\n"
	       "      --json            print one JSON object\n" EB_CLI_CLIENT_HELP
	       "\nWithout --broker, unix:/run/entropy-broker/broker.sock is used.\n"
	       "See eb-brokerctl(1).\n");
}

static void print_status(const char *broker, const struct eb_msg_status *st)
{
	unsigned pct = st->capacity_bits ? (unsigned)(st->pool_bits * 100 / st->capacity_bits) : 0;

	if (arg_json) {
		printf("{\"broker\":\"");
		/* A URI is ours, but quote defensively: it came from the command line. */
		for (const char *p = broker; *p; p++)
			if (*p == '"' || *p == '\\')
				printf("\\%c", *p);
			else if ((unsigned char)*p >= 0x20)
				putchar(*p);
		printf("\",\"pool_bits\":%" PRIu64 ",\"capacity_bits\":%" PRIu64
		       ",\"fill_percent\":%u,\"sources\":%u,\"sinks\":%u,\"bits_in\":%" PRIu64
		       ",\"bits_out\":%" PRIu64 ",\"bytes_drbg\":%" PRIu64 ",\"uptime_s\":%u}\n",
		       st->pool_bits, st->capacity_bits, pct, st->sources, st->sinks, st->bits_in,
		       st->bits_out, st->bytes_drbg, st->uptime_s);
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
}

int main(int argc, char *argv[])
{
	enum { ARG_JSON = EB_CLI_ARG_FIRST_PRIVATE };
	static const struct option options[] = {
	    EB_CLI_CLIENT_OPTIONS,
	    {"json", no_argument, NULL, ARG_JSON},
	    {},
	};
	struct eb_client_options o = {.roles = EB_ROLE_ADMIN, .kind = "eb-brokerctl"};
	_cleanup_(eb_client_freep) struct eb_client *client = NULL;
	struct eb_msg_status st;
	int c, r;

	log_setup(argv[0]);
	while ((c = getopt_long(argc, argv, EB_CLI_CLIENT_SHORTOPTS, options, NULL)) >= 0) {
		r = eb_cli_client_option(c, optarg, &o, "eb-brokerctl", help);
		if (r == -1)
			return 0;
		if (r == -2)
			return 2;
		if (r == 1)
			continue;
		if (c == ARG_JSON)
			arg_json = true;
		else
			return 2;
	}
	if (optind >= argc) {
		log_error("Expected a command: status; see --help");
		return 2;
	}
	if (strcmp(argv[optind], "status") != 0) {
		log_error("Unknown command \"%s\"; the commands are: status", argv[optind]);
		return 2;
	}
	if (optind + 1 < argc) {
		log_error("Unexpected argument \"%s\"; see --help", argv[optind + 1]);
		return 2;
	}
	if (o.n_brokers == 0)
		o.brokers[o.n_brokers++] = "unix:/run/entropy-broker/broker.sock";
	if (eb_cli_client_new(&o, &client) < 0)
		return 2;
	r = eb_client_connect(client);
	if (r < 0) {
		log_error("Cannot query %s: %s", eb_client_broker(client),
		          eb_client_last_error(client));
		return 1;
	}
	r = eb_client_status(client, &st);
	if (r < 0) {
		log_error("Broker %s did not answer STATUS: %s", eb_client_broker(client),
		          eb_client_last_error(client));
		return 1;
	}
	print_status(eb_client_broker(client), &st);
	return 0;
}
