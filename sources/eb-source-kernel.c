/* SPDX-License-Identifier: MIT */
/* eb-source-kernel: donates the local kernel's randomness to a broker. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/random.h>

#include "cli.h"
#include "log.h"
#include "proto.h"
#include "source.h"

/* getrandom() output is a CSPRNG's, whose seed the kernel credited from its own sources. We
 * claim 1 bit per byte by default: the kernel's pool is the one this machine trusts, but
 * handing it on must not make a broker count it as fully fresh. */
#define DEFAULT_H_MBITS 1000u

static void help(void)
{
	printf(
	    "Usage: eb-source-kernel [OPTIONS]\n\n"
	    "Donates the local kernel's randomness (getrandom) to a broker.\n\n"
	    "      --credit-per-byte H     min-entropy to claim per byte, 0-8, up to three\n"
	    "                              decimals (default 1)\n"
	    "      --min-entropy H         the same\n"
	    "      --bytes N               stop after N bytes (the same as --samples N)\n" EB_CLI_SOURCE_HELP
		EB_CLI_CLIENT_HELP "\nSee eb-source-kernel(1).\n");
}

static ssize_t sample(void *userdata, uint8_t *buf, size_t n)
{
	ssize_t k;

	(void)userdata;
	/* Blocks until the kernel's CRNG is seeded, so an unseeded kernel donates nothing. */
	do
		k = getrandom(buf, n, 0);
	while (k < 0 && errno == EINTR);
	if (k < 0)
		return log_error_errno(errno, "getrandom() failed: %m");
	return k;
}

int main(int argc, char *argv[])
{
	enum { ARG_CREDIT = EB_CLI_ARG_FIRST_PRIVATE, ARG_BYTES };
	static const struct option options[] = {
	    EB_CLI_CLIENT_OPTIONS,
	    EB_CLI_SOURCE_OPTIONS,
	    {"credit-per-byte", required_argument, NULL, ARG_CREDIT},
	    {"min-entropy", required_argument, NULL, ARG_CREDIT},
	    {"bytes", required_argument, NULL, ARG_BYTES},
	    {},
	};
	struct eb_client_options o = {.roles = EB_ROLE_SOURCE, .kind = "kernel getrandom"};
	struct eb_source_params p = {
	    .name = "kernel getrandom",
	    .gate = {.bits = 8, .h_mbits = DEFAULT_H_MBITS, .cap_mbits_per_byte = 8000},
	    .dump_fd = -EBADF,
	};
	_cleanup_(eb_client_freep) struct eb_client *client = NULL;
	_cleanup_close_ int dump_fd = -EBADF;
	struct eb_source_stats st;
	int c, r;

	log_setup(argv[0]);
	while ((c = getopt_long(argc, argv, EB_CLI_CLIENT_SHORTOPTS, options, NULL)) >= 0) {
		unsigned long long v;

		r = eb_cli_client_option(c, optarg, &o, "eb-source-kernel", help);
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
		} else if (c == ARG_BYTES) {
			if (eb_cli_parse_u64(optarg, 1, UINT64_MAX, &v) < 0) {
				log_error("Invalid --bytes \"%s\": expected a positive number",
				          optarg);
				return 2;
			}
			p.max_samples = v;
		} else
			return 2;
	}
	if (optind < argc) {
		log_error("Unexpected argument \"%s\"; see --help", argv[optind]);
		return 2;
	}
	if (eb_cli_client_env(&o) < 0) {
		log_error("Too many brokers in $EB_BROKER");
		return 2;
	}
	o.claim_mbits_per_byte = p.gate.h_mbits;
	if (eb_cli_client_new(&o, &client) < 0)
		return 2;
	r = eb_source_run(client, &p, sample, NULL, &st);
	if (r < 0)
		return 1;
	log_info("Donated %" PRIu64 " bytes, %" PRIu64 " bits credited of %" PRIu64
	         " claimed; %" PRIu64 " health-test alarm(s)",
	         st.bytes, st.credited, st.claimed, st.alarms);
	return 0;
}
