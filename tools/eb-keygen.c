/* SPDX-License-Identifier: MIT */
/* eb-keygen: writes a new pre-shared key file for a broker user. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "account.h"
#include "cli.h"
#include "key.h"
#include "log.h"

static void help(void)
{
	printf("Usage: eb-keygen [OPTIONS] PATH\n\n"
	       "Writes a new random 256-bit pre-shared key to PATH as 64 hexadecimal digits,\n"
	       "creating it with mode 0600 (0640 with --group). An existing file is never\n"
	       "overwritten.\n\n"
	       "  -o, --owner USER      owner of the new file (default: the caller)\n"
	       "  -g, --group GROUP     group of the new file, which may read it (mode 0640):\n"
	       "                        the group of the service that reads the key, with\n"
	       "                        --owner root, e.g. --owner root --group entropy-broker\n"
	       "  -h, --help            show this help\n"
	       "      --version         show the version\n"
	       "\nSee eb-keygen(1) and eb-brokerd.conf(5).\n");
}

static uid_t arg_owner = (uid_t)-1;
static gid_t arg_group = (gid_t)-1;

static const struct option options[] = {
    {"owner", required_argument, NULL, 'o'},
    {"group", required_argument, NULL, 'g'},
    EB_CLI_HELP_OPTIONS,
    {},
};

/* --owner and --group: a name looked up as the system would, or a number. */
static int option(int c, const char *arg, void *userdata)
{
	bool user = c == 'o';
	uint32_t id;
	int r;

	(void)userdata;
	if (c != 'o' && c != 'g')
		return 0;
	r = eb_account_resolve(user ? EB_ACCOUNT_USER : EB_ACCOUNT_GROUP, arg, &id);
	if (r < 0) {
		log_error(
		    "Invalid --%s \"%s\": %s", user ? "owner" : "group", arg,
		    r == -ESRCH ? (user ? "no such user" : "no such group")
		    /* check-source: allow einval-compare (account.h: neither an id nor a name) */
		    : r == -EINVAL ? "expected a name or a number"
				   : strerror(-r));
		return -2;
	}
	if (user)
		arg_owner = id;
	else
		arg_group = id;
	return 1;
}

static const struct eb_cli_program program = {
    .name = "eb-keygen",
    .help = help,
    .shortopts = "o:g:h",
    .options = options,
    .option = option,
};

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

	r = eb_key_generate_owned(path, arg_owner, arg_group, arg_group != (gid_t)-1);
	if (r == -EEXIST) {
		log_error("Refusing to overwrite '%s': it already exists.", path);
		return 1;
	}
	if (r == -EPERM && (arg_owner != (uid_t)-1 || arg_group != (gid_t)-1)) {
		log_error("Failed to give '%s' to the owner or group asked for: only root may; "
		          "nothing was written.",
		          path);
		return 1;
	}
	if (r < 0) {
		log_error_errno(r, "Failed to write key file '%s': %m", path);
		return 1;
	}
	log_debug("Wrote a new key to '%s'.", path);
	return 0;
}
