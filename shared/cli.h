/* SPDX-License-Identifier: MIT */
/* The options every client program shares: -b, -u, -k, -v, -h, --version. */
#pragma once

#include <getopt.h>
#include <stdint.h>

#include "client.h"

struct eb_source_params;

enum {
	EB_CLI_ARG_VERSION = 0x100,
	EB_CLI_ARG_DUMP_RAW,
	EB_CLI_ARG_SAMPLES,
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

/* The options every sampling source shares. */
#define EB_CLI_SOURCE_OPTIONS                                                                      \
	{"dump-raw", required_argument, NULL, EB_CLI_ARG_DUMP_RAW},                                \
	{                                                                                          \
		"samples", required_argument, NULL, EB_CLI_ARG_SAMPLES                             \
	}

#define EB_CLI_SOURCE_HELP                                                                         \
	"      --dump-raw FILE   also write every raw sample to FILE, one per byte, before any\n"  \
	"                        conditioning (the input of NIST's SP 800-90B ea_* tools)\n"       \
	"      --samples N       stop after N samples (default: run until stopped)\n"

/* Handles one of the shared options: 1 when it was one, 0 when not, -1 after --help/--version
 * (exit 0), -2 for a usage error (already logged). */
int eb_cli_client_option(int c, const char *arg, struct eb_client_options *o, const char *program,
                         void (*help)(void));

/* Handles one of the source options into p (--dump-raw opens its file, mode 0600, truncated):
 * 1 when it was one, 0 when not, -2 for a usage or open error (already logged). */
int eb_cli_source_option(int c, const char *arg, struct eb_source_params *p);

/* Fills in what the command line left out from the environment, so that a unit can take them
 * from an EnvironmentFile=: $EB_BROKER (broker URIs separated by spaces) when no --broker was
 * given, $EB_USER when no --user. Empty variables count as unset. */
int eb_cli_client_env(struct eb_client_options *o);

/* Parses a non-negative number of bits with at most three decimals ("4", "0.5", "7.125") into
 * millibits, at most max_mbits; -EINVAL or -ERANGE. */
int eb_cli_parse_mbits(const char *s, uint32_t max_mbits, uint32_t *ret);

/* Parses a whole number in [min, max] with end and range checks; -EINVAL or -ERANGE. */
int eb_cli_parse_u64(const char *s, unsigned long long min, unsigned long long max,
                     unsigned long long *ret);

/* Creates the client; logs the error (naming the broker or key file) and returns it. */
int eb_cli_client_new(const struct eb_client_options *o, struct eb_client **ret);
