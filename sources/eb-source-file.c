/* SPDX-License-Identifier: MIT */
/* eb-source-file: donates a file, a FIFO or standard input to a broker. */
#include <errno.h>
#include <fcntl.h>
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
	static const struct option options[] = {
	    EB_CLI_CLIENT_OPTIONS,
	    EB_CLI_SOURCE_OPTIONS,
	    EB_CLI_CREDIT_OPTIONS,
	    EB_CLI_CREDIT_CAP_OPTION,
	    {},
	};
	static const struct eb_cli_program prog = {
	    .name = "eb-source-file", .help = help, .options = options};
	struct eb_client_options o = {.roles = EB_ROLE_SOURCE};
	_cleanup_(eb_cli_source_params_done) struct eb_source_params p = {
	    .gate = {.bits = 8, .cap_mbits_per_byte = LOW_TRUST_CAP_MBITS},
	    .dump_fd = -EBADF,
	    .quarantine_ms = 100,
	};
	_cleanup_(eb_client_freep) struct eb_client *client = NULL;
	char kind[EB_KIND_MAX + 1], name[256];
	struct eb_source_stats st;
	struct input in = {.fd = -EBADF};
	int r;

	log_setup(argv[0]);
	r = eb_cli_source_parse(argc, argv, &prog, &o, &p, NULL);
	if (r != EB_CLI_CONTINUE)
		return r;
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
	snprintf(name, sizeof(name), "file %s", in.path);
	o.kind = kind;
	p.name = name;
	if (eb_cli_source_client_new(&o, &p, "byte", &client) < 0)
		return 2;
	r = eb_source_run(client, &p, sample, &in, &st);
	if (in.fd != STDIN_FILENO)
		close(in.fd);
	return eb_cli_source_report(r, &st, "of", in.path);
}
