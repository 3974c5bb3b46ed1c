/* SPDX-License-Identifier: MIT */
/* eb-keygen: writes a new pre-shared key file for a broker user. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>

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

int main(int argc, char *argv[])
{
	enum { ARG_VERSION = 0x100 };
	static const struct option options[] = {
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, ARG_VERSION},
	    {},
	};
	const char *path;
	int c, r;

	log_setup(argv[0]);
	opterr = 0; /* say it ourselves, through the log */
	while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0)
		switch (c) {
		case 'h':
			help();
			return 0;
		case ARG_VERSION:
			eb_print_version("eb-keygen");
			return 0;
		case '?':
			if (optopt)
				log_error("Unknown option -%c; see eb-keygen --help.", optopt);
			else
				log_error("Unknown option %s; see eb-keygen --help.",
				          argv[optind - 1]);
			return 2;
		default:
			return 2;
		}

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
