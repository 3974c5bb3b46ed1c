/* SPDX-License-Identifier: MIT */
#include "cli.h"

#include <errno.h>
#include <stdlib.h>

#include "log.h"

int eb_cli_client_option(int c, const char *arg, struct eb_client_options *o, const char *program,
                         void (*help)(void))
{
	switch (c) {
	case 'b':
		if (o->n_brokers >= EB_CLIENT_BROKERS_MAX) {
			log_error("At most %d --broker addresses", EB_CLIENT_BROKERS_MAX);
			return -2;
		}
		o->brokers[o->n_brokers++] = arg;
		return 1;
	case 'u':
		o->user = arg;
		return 1;
	case 'k':
		o->key_file = arg;
		return 1;
	case 'v':
		log_set_max_level(LOG_DEBUG);
		return 1;
	case 'h':
		help();
		return -1;
	case EB_CLI_ARG_VERSION:
		eb_print_version(program);
		return -1;
	case '?':
		return -2;
	default:
		return 0;
	}
}

int eb_cli_parse_u64(const char *s, unsigned long long min, unsigned long long max,
                     unsigned long long *ret)
{
	unsigned long long v;
	char *end;

	if (!s || !*s || *s == '-' || *s == '+')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno == ERANGE)
		return -ERANGE;
	if (errno != 0 || *end != '\0')
		return -EINVAL;
	if (v < min || v > max)
		return -ERANGE;
	*ret = v;
	return 0;
}

int eb_cli_client_new(const struct eb_client_options *o, struct eb_client **ret)
{
	_cleanup_free_ char *error = NULL;
	int r;

	r = eb_client_new(o, ret, &error);
	if (r < 0)
		return log_error_errno(r, "%s", error ? error : "Failed to set up the client: %m");
	return 0;
}
