/* SPDX-License-Identifier: MIT */
/* eb-source-kernel: donates the local kernel's randomness to a broker. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/random.h>

#include "cli.h"
#include "log.h"
#include "source.h"

static unsigned arg_credit_per_byte = 1;
static unsigned long long arg_bytes; /* 0: until stopped */
static unsigned long long done_bytes;

static void help(void)
{
	printf(
	    "Usage: eb-source-kernel [OPTIONS]\n\n"
	    "Donates the local kernel's randomness (getrandom) to a broker.\n\n"
	    "      --credit-per-byte BITS  entropy to claim per byte, 0-8 (default 1)\n"
	    "      --bytes N               stop after N bytes (default: run until stopped)\n" EB_CLI_CLIENT_HELP
	    "\nSee eb-source-kernel(1).\n");
}

static ssize_t fill(void *userdata, uint8_t *buf, size_t size, uint64_t *ret_credit)
{
	ssize_t k;

	(void)userdata;
	if (arg_bytes > 0) {
		if (done_bytes >= arg_bytes)
			return 0;
		if (size > arg_bytes - done_bytes)
			size = (size_t)(arg_bytes - done_bytes);
	}
	/* Blocks until the kernel's CRNG is seeded, so an unseeded kernel donates nothing. */
	do
		k = getrandom(buf, size, 0);
	while (k < 0 && errno == EINTR);
	if (k < 0)
		return log_error_errno(errno, "getrandom() failed: %m");
	done_bytes += (uint64_t)k;
	*ret_credit = (uint64_t)k * arg_credit_per_byte;
	return k;
}

int main(int argc, char *argv[])
{
	enum { ARG_CREDIT = EB_CLI_ARG_FIRST_PRIVATE, ARG_BYTES };
	static const struct option options[] = {
	    EB_CLI_CLIENT_OPTIONS,
	    {"credit-per-byte", required_argument, NULL, ARG_CREDIT},
	    {"bytes", required_argument, NULL, ARG_BYTES},
	    {},
	};
	struct eb_client_options o = {.roles = EB_ROLE_SOURCE, .kind = "kernel getrandom"};
	_cleanup_(eb_client_freep) struct eb_client *client = NULL;
	struct eb_source_stats st;
	int c, r;

	log_setup(argv[0]);
	while ((c = getopt_long(argc, argv, EB_CLI_CLIENT_SHORTOPTS, options, NULL)) >= 0) {
		unsigned long long v;

		r = eb_cli_client_option(c, optarg, &o, "eb-source-kernel", help);
		if (r == -1)
			return 0;
		if (r == -2)
			return 2;
		if (r == 1)
			continue;
		if (c == ARG_CREDIT) {
			if (eb_cli_parse_u64(optarg, 0, 8, &v) < 0) {
				log_error("Invalid --credit-per-byte \"%s\": expected 0-8", optarg);
				return 2;
			}
			arg_credit_per_byte = (unsigned)v;
		} else if (c == ARG_BYTES) {
			if (eb_cli_parse_u64(optarg, 1, UINT64_MAX, &arg_bytes) < 0) {
				log_error("Invalid --bytes \"%s\": expected a positive number",
				          optarg);
				return 2;
			}
		} else
			return 2;
	}
	if (optind < argc) {
		log_error("Unexpected argument \"%s\"; see --help", argv[optind]);
		return 2;
	}
	o.claim_mbits_per_byte = arg_credit_per_byte * 1000;
	if (eb_cli_client_new(&o, &client) < 0)
		return 2;
	r = eb_source_run(client, fill, NULL, 0, &st);
	if (r < 0)
		return 1;
	log_info("Donated %" PRIu64 " bytes, %" PRIu64 " bits credited of %" PRIu64 " claimed",
	         st.bytes, st.credited, st.claimed);
	return 0;
}
