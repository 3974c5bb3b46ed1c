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
#include "source.h"

static unsigned arg_credit_per_byte; /* a file vouches for nothing unless told */

struct input {
	int fd;
	const char *path;
};

static void help(void)
{
	printf("Usage: eb-source-file [OPTIONS] PATH\n\n"
	       "Donates the bytes of a file, a FIFO or standard input (-) to a broker.\n\n"
	       "      --credit-per-byte BITS  entropy to claim per byte, 0-8 (default 0: mixed\n"
	       "                              into the pool but not credited)\n" EB_CLI_CLIENT_HELP
	       "\nSee eb-source-file(1).\n");
}

static ssize_t fill(void *userdata, uint8_t *buf, size_t size, uint64_t *ret_credit)
{
	struct input *in = userdata;
	size_t got = 0;

	/* Fill whole chunks where the input allows, so that a pipe does not make tiny PUTs. */
	while (got < size) {
		ssize_t k = read(in->fd, buf + got, size - got);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return log_error_errno(errno, "Failed to read %s: %m", in->path);
		if (k == 0)
			break;
		got += (size_t)k;
	}
	*ret_credit = (uint64_t)got * arg_credit_per_byte;
	return (ssize_t)got;
}

int main(int argc, char *argv[])
{
	enum { ARG_CREDIT = EB_CLI_ARG_FIRST_PRIVATE };
	static const struct option options[] = {
	    EB_CLI_CLIENT_OPTIONS,
	    {"credit-per-byte", required_argument, NULL, ARG_CREDIT},
	    {},
	};
	struct eb_client_options o = {.roles = EB_ROLE_SOURCE};
	_cleanup_(eb_client_freep) struct eb_client *client = NULL;
	struct eb_source_stats st;
	struct input in = {.fd = -EBADF};
	char kind[EB_KIND_MAX + 1];
	int c, r;

	log_setup(argv[0]);
	while ((c = getopt_long(argc, argv, EB_CLI_CLIENT_SHORTOPTS, options, NULL)) >= 0) {
		unsigned long long v;

		r = eb_cli_client_option(c, optarg, &o, "eb-source-file", help);
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
		} else
			return 2;
	}
	if (optind + 1 != argc) {
		log_error("Expected one PATH (or - for standard input); see --help");
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
	/* HELLO says what kind of source this is; a file is a low-trust source. */
	snprintf(kind, sizeof(kind), "file %s (low trust)", in.path);
	o.kind = kind;
	o.claim_mbits_per_byte = arg_credit_per_byte * 1000;
	if (eb_cli_client_new(&o, &client) < 0)
		return 2;
	r = eb_source_run(client, fill, &in, 0, &st);
	if (in.fd != STDIN_FILENO)
		close(in.fd);
	if (r < 0)
		return 1;
	log_info("Donated %" PRIu64 " bytes of %s, %" PRIu64 " bits credited of %" PRIu64
	         " claimed",
	         st.bytes, in.path, st.credited, st.claimed);
	return 0;
}
