/* SPDX-License-Identifier: MIT */
/* eb-source-file: donates a file, a FIFO or standard input to a broker. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "log.h"
#include "proto.h"
#include "source.h"

/* A file is a low-trust source: it vouches for nothing unless told, and even then its credit
 * is capped unless the operator raises the cap too. */
#define LOW_TRUST_CAP_MBITS 1000u

struct input {
	int fd;
	const char *path;
};

static void help(void)
{
	printf(
	    "Usage: eb-source-file [OPTIONS] PATH\n\n"
	    "Donates the bytes of a file, a FIFO or standard input (-) to a broker. Each byte is\n"
	    "one 8-bit sample; the health tests run on them when an entropy is claimed.\n\n"
	    "      --credit-per-byte H     min-entropy to claim per byte, 0-8, up to three\n"
	    "                              decimals (default 0: mixed in, not credited)\n"
	    "      --min-entropy H         the same\n"
	    "      --max-credit-per-byte BITS\n"
	    "                              cap on the credit per byte (default 1: a file is a\n"
	    "                              low-trust source)\n" EB_CLI_SOURCE_HELP
		EB_CLI_CLIENT_HELP "\nSee eb-source-file(1).\n");
}

static ssize_t sample(void *userdata, uint8_t *buf, size_t n)
{
	struct input *in = userdata;
	ssize_t k;

	do
		k = read(in->fd, buf, n);
	while (k < 0 && errno == EINTR);
	if (k < 0)
		return log_error_errno(errno, "Failed to read %s: %m", in->path);
	return k;
}

int main(int argc, char *argv[])
{
	enum { ARG_CREDIT = EB_CLI_ARG_FIRST_PRIVATE, ARG_CAP };
	static const struct option options[] = {
	    EB_CLI_CLIENT_OPTIONS,
	    EB_CLI_SOURCE_OPTIONS,
	    {"credit-per-byte", required_argument, NULL, ARG_CREDIT},
	    {"min-entropy", required_argument, NULL, ARG_CREDIT},
	    {"max-credit-per-byte", required_argument, NULL, ARG_CAP},
	    {},
	};
	struct eb_client_options o = {.roles = EB_ROLE_SOURCE};
	struct eb_source_params p = {
	    .gate = {.bits = 8, .cap_mbits_per_byte = LOW_TRUST_CAP_MBITS},
	    .dump_fd = -EBADF,
	    .quarantine_ms = 100,
	};
	_cleanup_(eb_client_freep) struct eb_client *client = NULL;
	_cleanup_close_ int dump_fd = -EBADF;
	char kind[EB_KIND_MAX + 1], name[256];
	struct eb_source_stats st;
	struct input in = {.fd = -EBADF};
	int c, r;

	log_setup(argv[0]);
	while ((c = getopt_long(argc, argv, EB_CLI_CLIENT_SHORTOPTS, options, NULL)) >= 0) {
		r = eb_cli_client_option(c, optarg, &o, "eb-source-file", help);
		if (r == 0)
			r = eb_cli_source_option(c, optarg, &p);
		dump_fd = p.dump_fd;
		if (r == -1)
			return 0;
		if (r == -2)
			return 2;
		if (r == 1)
			continue;
		if (c == ARG_CREDIT) {
			if (eb_cli_parse_mbits(optarg, 8000, &p.gate.h_mbits) < 0) {
				log_error("Invalid %s \"%s\": expected 0-8 bits", argv[optind - 1],
				          optarg);
				return 2;
			}
		} else if (c == ARG_CAP) {
			if (eb_cli_parse_mbits(optarg, 8000, &p.gate.cap_mbits_per_byte) < 0) {
				log_error("Invalid --max-credit-per-byte \"%s\": expected 0-8 bits",
				          optarg);
				return 2;
			}
		} else
			return 2;
	}
	if (optind + 1 != argc) {
		log_error("Expected one PATH (or - for standard input); see --help");
		return 2;
	}
	if (eb_cli_client_env(&o) < 0) {
		log_error("Too many brokers in $EB_BROKER");
		return 2;
	}
	in.path = argv[optind];
	if (strcmp(in.path, "-") == 0) {
		in.fd = STDIN_FILENO;
		in.path = "standard input";
	} else {
		in.fd = open(in.path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
		if (in.fd < 0) {
			log_error_errno(errno, "Failed to open %s: %m", in.path);
			return 1;
		}
	}
	if (p.gate.h_mbits > p.gate.cap_mbits_per_byte)
		log_notice("Claiming %" PRIu32 ".%03" PRIu32
		           " bits per byte, credited at most %" PRIu32 ".%03" PRIu32
		           " (a low-trust source; raise with --max-credit-per-byte)",
		           p.gate.h_mbits / 1000, p.gate.h_mbits % 1000,
		           p.gate.cap_mbits_per_byte / 1000, p.gate.cap_mbits_per_byte % 1000);
	/* HELLO says what kind of source this is; a file is a low-trust source. */
	snprintf(kind, sizeof(kind), "file %s (low trust)", in.path);
	snprintf(name, sizeof(name), "file %s", in.path);
	o.kind = kind;
	o.claim_mbits_per_byte = MIN(p.gate.h_mbits, p.gate.cap_mbits_per_byte);
	p.name = name;
	if (eb_cli_client_new(&o, &client) < 0)
		return 2;
	r = eb_source_run(client, &p, sample, &in, &st);
	if (in.fd != STDIN_FILENO)
		close(in.fd);
	if (r < 0)
		return 1;
	log_info("Donated %" PRIu64 " bytes of %s, %" PRIu64 " bits credited of %" PRIu64
	         " claimed; %" PRIu64 " health-test alarm(s)",
	         st.bytes, in.path, st.credited, st.claimed, st.alarms);
	return 0;
}
