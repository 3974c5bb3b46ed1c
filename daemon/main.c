/* SPDX-License-Identifier: MIT */
/* eb-brokerd: pools entropy from sources and serves it to sinks. */
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "broker-config.h"
#include "broker.h"
#include "brokerd.h"
#include "conf.h"
#include "log.h"
#include "uri.h"

/* eb-brokerd.service's User= and Group=: whom --check-config reads as when run as root. */
#define EB_SERVICE_USER "entropy-broker"

static const char *arg_config;
static bool arg_check_config;
static const char *arg_check_path;
static const char *arg_as_user;
static char *arg_listen[EB_CONF_LISTEN_MAX];
static unsigned arg_n_listen;

static void help(void)
{
	printf(
	    "Usage: eb-brokerd [OPTIONS]\n\n"
	    "Pools entropy from sources and serves it to sinks.\n\n"
	    "  -c, --config PATH   configuration file (default " EB_CONF_DEFAULT_PATH ")\n"
	    "      --check-config [PATH]\n"
	    "                      check the configuration (PATH, or --config's, or the\n"
	    "                      default with its drop-ins) and its key files, print every\n"
	    "                      error as FILE:LINE: ..., and exit: 0 if it is good, 2 if not;\n"
	    "                      run as root, read the default file as the service's user\n"
	    "      --as-user NAME  with --check-config as root: read as NAME (for the default\n"
	    "                      file: " EB_SERVICE_USER ", eb-brokerd.service's User=)\n"
	    "  -l, --listen URI    listen on URI when not socket-activated (repeatable):\n"
	    "                      tcp://HOST[:PORT], unix:/PATH, vsock://CID[:PORT]\n"
	    "  -v, --verbose       log debug messages\n"
	    "  -h, --help          show this help\n"
	    "      --version       show the version\n\n"
	    "See eb-brokerd(8) and eb-brokerd.conf(5).\n");
}

/* Returns 1 to go on, 0 to exit successfully (--help), or a negative errno for a usage error. */
static int parse_argv(int argc, char *argv[])
{
	enum { ARG_VERSION = 0x100, ARG_CHECK_CONFIG, ARG_AS_USER };
	static const struct option options[] = {
	    {"config", required_argument, NULL, 'c'},
	    {"listen", required_argument, NULL, 'l'},
	    {"verbose", no_argument, NULL, 'v'},
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, ARG_VERSION},
	    {"check-config", optional_argument, NULL, ARG_CHECK_CONFIG},
	    {"as-user", required_argument, NULL, ARG_AS_USER},
	    {},
	};
	int c;

	while ((c = getopt_long(argc, argv, "c:l:vh", options, NULL)) >= 0)
		switch (c) {
		case 'c':
			arg_config = optarg;
			break;
		case 'l': {
			struct eb_uri u;

			/* A mistyped address is the operator's error (exit 2), not a runtime
			 * failure found only after the configuration and the pool are set up. */
			if (eb_uri_parse(optarg, &u) < 0 || u.kind == EB_URI_SRV)
				return log_error_errno(
				    EINVAL,
				    "Invalid --listen address \"%s\": expected tcp://HOST[:PORT], unix:/PATH, unix+tls:/PATH or vsock://CID[:PORT]",
				    optarg);
			if (arg_n_listen >= EB_CONF_LISTEN_MAX)
				return log_error_errno(E2BIG, "At most %d --listen addresses",
				                       EB_CONF_LISTEN_MAX);
			arg_listen[arg_n_listen++] = optarg;
			break;
		}
		case 'v':
			log_set_max_level(LOG_DEBUG);
			break;
		case 'h':
			help();
			return 0;
		case ARG_VERSION:
			eb_print_version("eb-brokerd");
			return 0;
		case ARG_CHECK_CONFIG:
			arg_check_config = true;
			arg_check_path = optarg;
			break;
		case ARG_AS_USER:
			arg_as_user = optarg;
			break;
		default:
			return -EINVAL;
		}
	/* "--check-config FILE", as "nginx -t -c FILE" and "sshd -t -f FILE" take it. */
	if (arg_check_config && !arg_check_path && optind < argc)
		arg_check_path = argv[optind++];
	if (arg_check_path) {
		if (arg_config)
			return log_error_errno(EINVAL,
			                       "--check-config PATH and --config PATH both given; "
			                       "give one of them");
		arg_config = arg_check_path;
	}
	if (optind < argc)
		return log_error_errno(EINVAL, "Unexpected argument \"%s\"; see --help",
		                       argv[optind]);
	if (arg_as_user && !arg_check_config)
		return log_error_errno(EINVAL, "--as-user is for --check-config; the service's "
		                               "user is its unit's User=");
	return 1;
}

/* --check-config run as root reads the service's configuration as the service would: as its
 * user (the unit's User=), with its groups, so that a key file the service cannot read, or may
 * not (root's group is no service's), is named with the service's fix and not root's. Another
 * file (PATH, -c) is read as the caller unless --as-user names a user. A default user that does
 * not exist (the package is not installed) leaves root reading, and says so. Returns 0, or -1
 * having logged why. */
static int become_service_user(void)
{
	const char *name = arg_as_user ? arg_as_user : EB_SERVICE_USER;
	struct passwd pw, *pwp = NULL;
	char buf[4096];
	int r;

	if (geteuid() != 0) {
		if (arg_as_user)
			log_warning("Not root: checking as the user this runs as, not %s", name);
		return 0;
	}
	if (strcmp(name, "root") == 0 || (!arg_as_user && arg_config))
		return 0;
	r = getpwnam_r(name, &pw, buf, sizeof(buf), &pwp);
	if (r != 0 || !pwp) {
		if (arg_as_user) {
			log_error("No user %s to check the configuration as (--as-user)", name);
			return -1;
		}
		log_warning("No user %s (eb-brokerd.service's User=): checking as root, who may "
		            "judge key files otherwise than the service; --as-user names another",
		            name);
		return 0;
	}
	if (initgroups(pw.pw_name, pw.pw_gid) < 0 || setgid(pw.pw_gid) < 0 ||
	    setuid(pw.pw_uid) < 0) {
		log_error_errno(errno, "Failed to become %s to check the configuration: %m", name);
		return -1;
	}
	log_info("Checking as %s, the user the service runs as (--as-user names another)", name);
	return 0;
}

/* --check-config: what a start or a reload would read, read the same way, with every error
 * logged; nothing is bound, no pool is made and the seed file is not touched. */
static int check_config(void)
{
	struct eb_conf *conf = NULL;
	unsigned n_keys = 0;

	if (become_service_user() < 0)
		return 2;
	if (broker_config_load(arg_config, &conf, NULL) < 0)
		return 2;
	for (unsigned i = 0; i < conf->n_users; i++)
		n_keys += conf->users[i].n_keys;
	printf("%s: configuration good: %u user%s, %u key file%s\n",
	       arg_config ? arg_config : EB_CONF_DEFAULT_PATH, conf->n_users,
	       conf->n_users == 1 ? "" : "s", n_keys, n_keys == 1 ? "" : "s");
	eb_conf_free(conf);
	return 0;
}

static int run(int argc, char *argv[])
{
	_cleanup_(brokerd_freep) struct broker *b = NULL;
	struct eb_conf *conf = NULL;
	int r;

	log_setup(argv[0]);
	r = parse_argv(argc, argv);
	if (r <= 0)
		return r < 0 ? 2 : 0;
	if (arg_check_config)
		return check_config();
	if (broker_config_load(arg_config, &conf, NULL) < 0)
		return 2;
	/* Without sockets from systemd the broker binds its own; having none to bind is the
	 * operator's error (exit 2), so say so before the pool is set up. */
	if (sd_listen_fds(false) == 0 && arg_n_listen == 0 && conf->n_listen == 0) {
		log_error(
		    "Nothing to listen on: no sockets from systemd, no --listen, no listen= in %s",
		    conf->path ? conf->path : "the configuration");
		eb_conf_free(conf);
		return 2;
	}
	/* A peer that vanishes mid-write must cost us a session, not the process. */
	signal(SIGPIPE, SIG_IGN);

	/* The broker owns conf from here on: a reload replaces it. */
	r = brokerd_new(conf, arg_config, &b);
	if (r < 0)
		return 1;
	r = brokerd_listen(b, arg_listen, arg_n_listen);
	if (r >= 0)
		r = brokerd_run(b);
	b = brokerd_free(b);
	return r < 0 ? 1 : 0;
}

int main(int argc, char *argv[])
{
	return run(argc, argv);
}
