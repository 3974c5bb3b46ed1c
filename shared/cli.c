/* SPDX-License-Identifier: MIT */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "source.h"

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

int eb_cli_source_option(int c, const char *arg, struct eb_source_params *p)
{
	unsigned long long v;

	switch (c) {
	case EB_CLI_ARG_DUMP_RAW:
		safe_close(p->dump_fd);
		/* Raw samples become pool input: whoever reads them knows what was credited. */
		p->dump_fd = open(arg, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, 0600);
		if (p->dump_fd < 0) {
			log_error_errno(errno, "Failed to open --dump-raw file %s: %m", arg);
			return -2;
		}
		return 1;
	case EB_CLI_ARG_SAMPLES:
		if (eb_cli_parse_u64(arg, 1, UINT64_MAX, &v) < 0) {
			log_error("Invalid --samples \"%s\": expected a positive number", arg);
			return -2;
		}
		p->max_samples = v;
		return 1;
	default:
		return 0;
	}
}

int eb_cli_client_env(struct eb_client_options *o)
{
	/* The split copy lives as long as the options that point into it: the whole program. */
	static char *brokers;
	const char *e;

	e = getenv("EB_USER");
	if (!o->user && e && *e)
		o->user = e;
	e = getenv("EB_BROKER");
	if (o->n_brokers > 0 || !e || !*e)
		return 0;
	free(brokers);
	brokers = strdup(e);
	if (!brokers)
		return -ENOMEM;
	for (char *s = brokers, *end; *s; s = end) {
		s += strspn(s, " \t");
		if (!*s)
			break;
		end = s + strcspn(s, " \t");
		if (*end)
			*end++ = '\0';
		if (o->n_brokers >= EB_CLIENT_BROKERS_MAX)
			return -E2BIG;
		o->brokers[o->n_brokers++] = s;
	}
	return 0;
}

int eb_cli_parse_mbits(const char *s, uint32_t max_mbits, uint32_t *ret)
{
	unsigned long long whole = 0, frac = 0;
	unsigned digits = 0;
	const char *p = s;

	if (!s || !*s)
		return -EINVAL;
	/* By hand rather than strtod(): no locale, no exponent, no rounding of 0.1. */
	for (; *p >= '0' && *p <= '9'; p++) {
		whole = whole * 10 + (unsigned)(*p - '0');
		if (whole > UINT32_MAX)
			return -ERANGE;
	}
	if (p == s)
		return -EINVAL;
	if (*p == '.') {
		for (p++; *p >= '0' && *p <= '9'; p++) {
			if (++digits > 3)
				return -EINVAL;
			frac = frac * 10 + (unsigned)(*p - '0');
		}
		if (digits == 0)
			return -EINVAL;
		for (; digits < 3; digits++)
			frac *= 10;
	}
	if (*p != '\0')
		return -EINVAL;
	if (whole * 1000 + frac > max_mbits)
		return -ERANGE;
	*ret = (uint32_t)(whole * 1000 + frac);
	return 0;
}
