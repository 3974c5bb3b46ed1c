/* SPDX-License-Identifier: MIT */
/* eb-keygen: writes a new pre-shared key file for a broker user. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "account.h"
#include "cli.h"
#include "conf.h"
#include "key.h"
#include "keygen-user.h"
#include "log.h"
#include "macro.h"

static void help(void)
{
	printf("Usage: eb-keygen [OPTIONS] PATH\n"
	       "       eb-keygen [OPTIONS] --user NAME --role ROLES [--conf-dir DIR] [PATH]\n\n"
	       "Writes a new random 256-bit pre-shared key to PATH as 64 hexadecimal digits,\n"
	       "creating it with mode 0600 (0640 with --group). An existing file is never\n"
	       "overwritten. With --user, also the user's [user NAME] section, as the drop-in\n"
	       "DIR/user-NAME.conf of the broker's configuration: one key per guest; removing\n"
	       "the file and reloading the broker revokes that user alone.\n\n"
	       "  -o, --owner USER      owner of the new file (default: the caller)\n"
	       "  -g, --group GROUP     group of the new file, which may read it (mode 0640):\n"
	       "                        the group of the service that reads the key, with\n"
	       "                        --owner root, e.g. --owner root --group entropy-broker\n"
	       "      --user NAME       write the [user NAME] drop-in too; PATH defaults to\n"
	       "                        " KEYGEN_KEY_DIR "/NAME.key and must be absolute\n"
	       "      --role ROLES      its role: source, sink or admin, or a comma list\n"
	       "      --conf-dir DIR    where the drop-in goes (default " KEYGEN_CONF_DIR ")\n"
	       "  -i, --key-id ID       the key's id: print the line that adds it to a user of\n"
	       "                        eb-brokerd.conf, key = ID PATH (to rotate a key)\n"
	       "  -h, --help            show this help\n"
	       "      --version         show the version\n"
	       "\nSee eb-keygen(1) and eb-brokerd.conf(5).\n");
}

static uid_t arg_owner = (uid_t)-1;
static gid_t arg_group = (gid_t)-1;
static const char *arg_user, *arg_role, *arg_conf_dir = KEYGEN_CONF_DIR, *arg_key_id;

enum { ARG_USER = EB_CLI_ARG_FIRST_PRIVATE, ARG_ROLE, ARG_CONF_DIR };

static const struct option options[] = {
    {"owner", required_argument, NULL, 'o'},
    {"group", required_argument, NULL, 'g'},
    {"user", required_argument, NULL, ARG_USER},
    {"role", required_argument, NULL, ARG_ROLE},
    {"conf-dir", required_argument, NULL, ARG_CONF_DIR},
    {"key-id", required_argument, NULL, 'i'},
    EB_CLI_HELP_OPTIONS,
    {},
};

/* "source", "sink", "admin" or a comma list of them, as eb-brokerd.conf(5)'s role=. */
static bool roles_valid(const char *s)
{
	do {
		size_t n = strcspn(s, ",");

		if (!((n == 6 && strncmp(s, "source", n) == 0) ||
		      (n == 4 && strncmp(s, "sink", n) == 0) ||
		      (n == 5 && strncmp(s, "admin", n) == 0)))
			return false;
		s += n;
	} while (*s++ == ',');
	return true;
}

/* --user, --role and --conf-dir: checked here, so that nothing is written for a bad one. */
static int user_option(int c, const char *arg)
{
	if (c == ARG_USER && !eb_conf_user_name_valid(arg, strlen(arg))) {
		log_error("Invalid --user \"%s\": 1-64 letters, digits, '.', '_' or '-', the first "
		          "a letter or a digit",
		          arg);
		return -2;
	}
	if (c == ARG_ROLE && !roles_valid(arg)) {
		log_error("Invalid --role \"%s\": source, sink or admin, or a comma list of them",
		          arg);
		return -2;
	}
	if (c == ARG_USER)
		arg_user = arg;
	else if (c == ARG_ROLE)
		arg_role = arg;
	else
		arg_conf_dir = arg;
	return 1;
}

/* --owner and --group: a name looked up as the system would, or a number. */
static int option(int c, const char *arg, void *userdata)
{
	bool user = c == 'o';
	uint32_t id;
	int r;

	(void)userdata;
	if (c == ARG_USER || c == ARG_ROLE || c == ARG_CONF_DIR)
		return user_option(c, arg);
	if (c == 'i') {
		if (!eb_key_id_valid(arg)) {
			log_error(
			    "Invalid --key-id \"%s\": expected 1..%d letters, digits, \".\", \"_\" or "
			    "\"-\", starting with a letter or digit",
			    arg, EB_KEY_ID_MAX);
			return -2;
		}
		arg_key_id = arg;
		return 1;
	}
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
    .shortopts = "o:g:i:h",
    .options = options,
    .option = option,
};

/* --user's other options: a role, and an absolute key path, which the broker reads from
 * wherever the drop-in is. 0, or the exit code. */
static int check_user_args(const char *path)
{
	if (!arg_role) {
		log_error("--user %s needs --role: source, sink or admin.", arg_user);
		return 2;
	}
	if (path[0] != '/') {
		log_error("The key file '%s' must be an absolute path with --user: the broker's "
		          "key-file= reads it from its own directory.",
		          path);
		return 2;
	}
	return 0;
}

/* The drop-in, before the key: an existing one (the user has a key already) stops both. 0, or
 * the exit code. */
static int write_dropin(const char *path, char **ret)
{
	_cleanup_free_ char *dropin = NULL;
	int r;

	r = keygen_user_dropin_path(arg_conf_dir, arg_user, &dropin);
	if (r < 0) {
		log_oom();
		return 1;
	}
	r = keygen_user_dropin_write(arg_conf_dir, arg_user, arg_role, path);
	if (r == -EEXIST) {
		log_error(
		    "Refusing to overwrite '%s': user %s has a drop-in already; remove it (and "
		    "its key) first to give the user a new key.",
		    dropin, arg_user);
		return 1;
	}
	if (r < 0) {
		log_error_errno(r, "Failed to write the drop-in '%s': %m", dropin);
		return 1;
	}
	*ret = TAKE_PTR(dropin);
	return 0;
}

int main(int argc, char *argv[])
{
	_cleanup_free_ char *default_path = NULL, *dropin = NULL;
	const char *path;
	int r;

	log_setup(argv[0]);
	r = eb_cli_parse(argc, argv, &program, NULL, NULL);
	if (r != EB_CLI_CONTINUE)
		return r;
	if (argc - optind > 1) {
		log_error("Too many arguments: one PATH only; see eb-keygen --help.");
		return 2;
	}
	if (optind == argc && !arg_user) {
		log_error("Missing PATH; see eb-keygen --help.");
		return 2;
	}
	if (optind == argc && asprintf(&default_path, "%s/%s.key", KEYGEN_KEY_DIR, arg_user) < 0) {
		log_oom();
		return 1;
	}
	path = optind < argc ? argv[optind] : default_path;
	if (arg_user && arg_key_id) {
		log_error(
		    "--key-id adds a key to a user that has one, --user makes a new user: give "
		    "one of them.");
		return 2;
	}
	if (arg_user) {
		r = check_user_args(path);
		if (r != 0)
			return r;
		r = write_dropin(path, &dropin);
		if (r != 0)
			return r;
	}

	r = eb_key_generate_owned(path, arg_owner, arg_group, arg_group != (gid_t)-1);
	/* No drop-in naming a key that is not there. */
	if (r < 0 && dropin)
		(void)unlink(dropin);
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
	if (dropin)
		printf("Wrote %s and %s: copy the key to the user's machine and reload the broker "
		       "(systemctl reload eb-brokerd).\n",
		       path, dropin);
	if (arg_key_id) {
		_cleanup_free_ char *abs = realpath(path, NULL);

		if (!abs) {
			log_error_errno(errno, "Failed to resolve '%s': %m", path);
			return 1;
		}
		printf("key = %s %s\n", arg_key_id, abs);
	}
	return 0;
}
