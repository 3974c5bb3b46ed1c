/* SPDX-License-Identifier: MIT */
/* The options every client program shares: -b, -u, -k, -v, -h, --version. */
#pragma once

#include <getopt.h>

#include "client.h"

enum {
	EB_CLI_ARG_VERSION = 0x100,
	EB_CLI_ARG_FIRST_PRIVATE = 0x200, /* programs number their own long options from here */
};

#define EB_CLI_CLIENT_SHORTOPTS "b:u:k:vh"
#define EB_CLI_CLIENT_OPTIONS                                                                      \
	{"broker", required_argument, NULL, 'b'}, {"user", required_argument, NULL, 'u'},          \
	    {"key-file", required_argument, NULL, 'k'}, {"verbose", no_argument, NULL, 'v'},       \
	    {"help", no_argument, NULL, 'h'},                                                      \
	{                                                                                          \
		"version", no_argument, NULL, EB_CLI_ARG_VERSION                                   \
	}

#define EB_CLI_CLIENT_HELP                                                                         \
	"  -b, --broker URI      broker to use (repeatable; tried in order, with failover):\n"     \
	"                        tcp://HOST[:PORT], unix:/PATH, vsock://CID[:PORT],\n"             \
	"                        unix+tls:/PATH\n"                                                 \
	"  -u, --user NAME       user name for TLS brokers\n"                                      \
	"  -k, --key-file PATH   key file (default: the credential eb.key)\n"                      \
	"  -v, --verbose         log debug messages\n"                                             \
	"  -h, --help            show this help\n"                                                 \
	"      --version         show the version\n"

/* Handles one of the shared options: 1 when it was one, 0 when not, -1 after --help/--version
 * (exit 0), -2 for a usage error (already logged). */
int eb_cli_client_option(int c, const char *arg, struct eb_client_options *o, const char *program,
                         void (*help)(void));

/* Parses a whole number in [min, max] with end and range checks; -EINVAL or -ERANGE. */
int eb_cli_parse_u64(const char *s, unsigned long long min, unsigned long long max,
                     unsigned long long *ret);

/* Creates the client; logs the error (naming the broker or key file) and returns it. */
int eb_cli_client_new(const struct eb_client_options *o, struct eb_client **ret);
