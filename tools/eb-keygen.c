/* SPDX-License-Identifier: MIT */
/* eb-keygen: writes a new pre-shared key file for a broker user. */
#include <errno.h>
#include <stdio.h>

#include "cli.h"
#include "key.h"
#include "log.h"

static void help(void)
{
	printf("Usage: eb-keygen [OPTIONS] PATH\n\n"
	       "Writes a new random 256-bit pre-shared key to PATH as 64 hexadecimal digits,\n"
	       "creating it with mode 0600. An existing file is never overwritten.\n\n"
	       "  -h, --help            show this help\n"
	       "      --version         show the version\n"
	       "\nSee eb-keygen(1) and eb-brokerd.conf(5).\n");
}

static const struct option options[] = {
    EB_CLI_HELP_OPTIONS,
    {},
};

static const struct eb_cli_program program = {
    .name = "eb-keygen", .help = help, .options = options};

int main(int argc, char *argv[])
{
	const char *path;
	int r;

	log_setup(argv[0]);
	r = eb_cli_parse(argc, argv, &program, NULL, NULL);
	if (r != EB_CLI_CONTINUE)
		return r;
	if (optind >= argc) {
		log_error("Missing PATH; see eb-keygen --help.");
		return 2;
	}
	if (argc - optind > 1) {
		log_error("Too many arguments: one PATH only; see eb-keygen --help.");
		return 2;
	}
	path = argv[optind];

	r = eb_key_generate(path);
	if (r == -EEXIST) {
		log_error("Refusing to overwrite '%s': it already exists.", path);
		return 1;
	}
	if (r < 0) {
		log_error_errno(r, "Failed to write key file '%s': %m", path);
		return 1;
	}
	log_debug("Wrote a new key to '%s'.", path);
	return 0;
}
