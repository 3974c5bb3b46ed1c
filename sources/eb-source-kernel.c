/* SPDX-License-Identifier: MIT */
/* eb-source-kernel: donates the local kernel's randomness to a broker. */
#include <errno.h>
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

enum { ARG_BYTES = EB_CLI_ARG_FIRST_PRIVATE };

static int parse_option(int c, const char *arg, void *userdata)
{
	struct eb_source_params *p = userdata;
	unsigned long long v;

	if (c != ARG_BYTES)
		return -2;
	if (eb_cli_parse_u64(arg, 1, UINT64_MAX, &v) < 0) {
		log_error("Invalid --bytes \"%s\": expected a positive number", arg);
		return -2;
	}
	p->max_samples = v;
	return 0;
}

int main(int argc, char *argv[])
{
	static const struct option options[] = {
	    EB_CLI_CLIENT_OPTIONS,
	    EB_CLI_SOURCE_OPTIONS,
	    EB_CLI_CREDIT_OPTIONS,
	    {"bytes", required_argument, NULL, ARG_BYTES},
	    {},
	};
	static const struct eb_cli_program prog = {.name = "eb-source-kernel",
	                                           .help = help,
	                                           .options = options,
	                                           .option = parse_option,
	                                           .no_arguments = true};
	struct eb_client_options o = {.roles = EB_ROLE_SOURCE, .kind = "kernel getrandom"};
	_cleanup_(eb_cli_source_params_done) struct eb_source_params p = {
	    .name = "kernel getrandom",
	    .gate = {.bits = 8, .h_mbits = DEFAULT_H_MBITS, .cap_mbits_per_byte = 8000},
	    .dump_fd = -EBADF,
	};
	_cleanup_(eb_client_freep) struct eb_client *client = NULL;
	struct eb_source_stats st;
	int r;

	log_setup(argv[0]);
	r = eb_cli_source_parse(argc, argv, &prog, &o, &p, &p);
	if (r != EB_CLI_CONTINUE)
		return r;
	if (eb_cli_source_client_new(&o, &p, "byte", &client) < 0)
		return 2;
	r = eb_source_run(client, &p, sample, NULL, &st);
	return eb_cli_source_report(r, &st, NULL, NULL);
}
