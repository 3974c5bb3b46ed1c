/* SPDX-License-Identifier: MIT */
#include "cli.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <systemd/sd-daemon.h>

#include "key.h"
#include "log.h"
#include "source.h"
#include "time-util.h"
#include "uri.h"

/* While no broker answers, a line this often: enough to show in any journal excerpt that the
 * outage goes on, few enough not to bury anything else. */
#define OUTAGE_REPEAT_MS (60 * 1000)

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
	case EB_CLI_ARG_KEY_ID:
		if (!eb_key_id_valid(arg)) {
			log_error(
			    "Invalid --key-id \"%s\": expected 1..%d letters, digits, \".\", \"_\" "
			    "or \"-\", starting with a letter or digit, as in the broker's "
			    "key = ID PATH",
			    arg, EB_KEY_ID_MAX);
			return -2;
		}
		o->key_id = arg;
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

int eb_cli_option_uint(const char *name, const char *arg, unsigned max, const char *unit,
                       unsigned *ret)
{
	unsigned long long v;

	if (eb_cli_parse_u64(arg, 1, max, &v) < 0) {
		log_error("Invalid --%s \"%s\": expected 1-%u%s%s", name, arg, max, unit ? " " : "",
		          unit ? unit : "");
		return -2;
	}
	*ret = (unsigned)v;
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

/* One outage of a program's clients; eb_cli_client_watch(). */
static struct {
	bool down;
	uint64_t since_ms, logged_ms;
	unsigned attempts; /* failed since the outage began */
} outage;

static void watch(struct eb_client *c, int r, void *userdata)
{
	uint64_t now = eb_now_ms();

	(void)userdata;
	if (r >= 0) {
		if (outage.down)
			log_notice("Connected to %s after %" PRIu64 " s (%u failed attempts)",
			           eb_client_broker(c), (now - outage.since_ms + 500) / 1000,
			           outage.attempts);
		outage.down = false;
		(void)sd_notifyf(false, "STATUS=Connected to %s", eb_client_broker(c));
		return;
	}
	(void)sd_notifyf(false, "STATUS=Not connected: %s", eb_client_last_error(c));
	if (r == -EACCES || r == -EPROTONOSUPPORT)
		return;
	if (!outage.down) {
		outage.down = true;
		outage.since_ms = outage.logged_ms = now;
		outage.attempts = 1;
		log_warning("Cannot reach a broker: %s; retrying", eb_client_last_error(c));
		return;
	}
	outage.attempts++;
	if (now - outage.logged_ms >= OUTAGE_REPEAT_MS) {
		outage.logged_ms = now;
		log_warning("Still no broker after %u attempts in %" PRIu64 " s: %s; retrying",
		            outage.attempts, (now - outage.since_ms + 500) / 1000,
		            eb_client_last_error(c));
	}
}

void eb_cli_client_watch(struct eb_client *c)
{
	eb_client_set_watch(c, watch, NULL);
}

/* One wait of a sink for its broker's pool or quota; eb_cli_sink_answer(). */
static struct {
	int why; /* -EAGAIN, -EDQUOT, or 0 when not waiting */
	uint64_t since_ms, logged_ms;
	unsigned answers;
} starving;

static const char *starving_reason(int why)
{
	return why == -EDQUOT ? "its quota for this user is spent" : "its pool is empty";
}

void eb_cli_sink_answer(struct eb_client *c, int r)
{
	uint64_t now = eb_now_ms();

	if (r >= 0) {
		if (starving.why)
			log_notice("Served by %s again after %" PRIu64 " s of waiting (%u answers)",
			           eb_client_broker(c), (now - starving.since_ms + 500) / 1000,
			           starving.answers);
		if (starving.why)
			(void)sd_notifyf(false, "STATUS=Connected to %s", eb_client_broker(c));
		starving.why = 0;
		return;
	}
	if (r != -EAGAIN && r != -EDQUOT)
		return;
	if (starving.why != r) {
		starving.why = r;
		starving.since_ms = starving.logged_ms = now;
		starving.answers = 1;
		log_notice("Waiting for broker %s: %s", eb_client_broker(c), starving_reason(r));
		(void)sd_notifyf(false, "STATUS=Waiting for broker %s: %s", eb_client_broker(c),
		                 starving_reason(r));
		return;
	}
	starving.answers++;
	if (now - starving.logged_ms >= OUTAGE_REPEAT_MS) {
		starving.logged_ms = now;
		log_notice("Still waiting for broker %s after %" PRIu64 " s (%u answers): %s",
		           eb_client_broker(c), (now - starving.since_ms + 500) / 1000,
		           starving.answers, starving_reason(r));
	}
}

/* Handles one of the source or credit options into p (--dump-raw opens its file, mode 0600,
 * truncated): 1 when it was one, 0 when not, -2 for a usage or open error (already logged). name
 * is the long option's, for the message. */
static int source_option(int c, const char *arg, const char *name, struct eb_source_params *p)
{
	unsigned long long v;
	uint32_t mbits;
	int fd;

	switch (c) {
	case EB_CLI_ARG_DUMP_RAW:
		/* Raw samples become pool input: whoever reads them knows what was credited. */
		fd = open(arg, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, 0600);
		if (fd < 0) {
			log_error_errno(errno, "Failed to open --dump-raw file %s: %m", arg);
			return -2;
		}
		safe_close(p->dump_fd);
		p->dump_fd = fd;
		return 1;
	case EB_CLI_ARG_SAMPLES:
		if (eb_cli_parse_u64(arg, 1, UINT64_MAX, &v) < 0) {
			log_error("Invalid --samples \"%s\": expected a positive number", arg);
			return -2;
		}
		p->max_samples = v;
		return 1;
	case EB_CLI_ARG_CREDIT:
	case EB_CLI_ARG_CREDIT_CAP:
		if (eb_cli_parse_mbits(arg, 8000, &mbits) < 0) {
			log_error("Invalid --%s \"%s\": expected 0-8 bits", name, arg);
			return -2;
		}
		if (c == EB_CLI_ARG_CREDIT)
			p->gate.h_mbits = mbits;
		else
			p->gate.cap_mbits_per_byte = mbits;
		return 1;
	case EB_CLI_ARG_ESTIMATE:
		if (eb_cli_parse_mbits(arg, 8000, &mbits) < 0 || mbits == 0) {
			log_error("Invalid --%s \"%s\": expected 0.001-8 bits", name, arg);
			return -2;
		}
		p->gate.h_mbits = mbits;
		return 1;
	default:
		return 0;
	}
}

/* Says what getopt_long() refused (it is told to be quiet, so that the words reach the log). */
static void log_refused(int c, char *argv[], const char *program)
{
	const char *opt = argv[optind - 1];

	if (c == ':')
		log_error("Option %s needs an argument; see %s --help.", opt, program);
	else if (optopt && optopt < 0x100)
		log_error("Unknown option -%c; see %s --help.", optopt, program);
	else
		log_error("Unknown option %s; see %s --help.", opt, program);
}

/* --user or --key-file given while every broker is plain unix:, where the broker knows its peer
 * by uid and gid and no key is used: said, as a usage error, rather than ignored. Brokers given
 * by $EB_BROKER count, as the client would use them. */
static bool identity_unused(const struct eb_client_options *o)
{
	struct eb_uri u;

	if (o->n_brokers == 0)
		return false;
	for (unsigned i = 0; i < o->n_brokers; i++)
		if (eb_uri_parse(o->brokers[i], &u) < 0 || u.kind != EB_URI_UNIX)
			return false;
	log_error("--user and --key-file are for TLS brokers, and %s is a plain unix: socket, "
	          "where the broker knows a peer by its uid and gid (eb-brokerd.conf(5), "
	          "unix-uid=, unix-gid=); drop them, or give a tcp://, vsock:// or unix+tls: "
	          "broker",
	          o->n_brokers == 1 ? o->brokers[0] : "every --broker");
	return true;
}

/* The loop of eb_cli_parse() and eb_cli_source_parse(): o NULL for a program that is no
 * client, p NULL for one that is no source. */
static int parse(int argc, char *argv[], const struct eb_cli_program *prog,
                 struct eb_client_options *o, struct eb_source_params *p, void *userdata)
{
	const char *s = prog->shortopts ? prog->shortopts : o ? EB_CLI_CLIENT_SHORTOPTS : "h";
	char shortopts[64];
	int mode = s[0] == '+' || s[0] == '-';
	const char *user = o ? o->user : NULL, *key_file = o ? o->key_file : NULL;
	bool given_identity;
	int c, r, n;

	/* A ':' first (after a '+' or '-' that says where options end) makes a missing argument
	 * ':' rather than '?'. */
	n = snprintf(shortopts, sizeof(shortopts), "%.*s:%s", mode, s, s + mode);
	assert(n > 0 && (size_t)n < sizeof(shortopts));
	(void)n;
	opterr = 0;
	for (;;) {
		int i = -1;

		c = getopt_long(argc, argv, shortopts, prog->options, &i);
		if (c < 0)
			break;
		if (c == '?' || c == ':') {
			log_refused(c, argv, prog->name);
			return 2;
		}
		if (c == 'h') {
			prog->help();
			return 0;
		}
		if (c == EB_CLI_ARG_VERSION) {
			eb_print_version(prog->name);
			return 0;
		}
		r = o ? eb_cli_client_option(c, optarg, o, prog->name, prog->help) : 0;
		if (r == 0 && p)
			/* The credit options are long ones only, so i names them. */
			r = source_option(c, optarg, i >= 0 ? prog->options[i].name : "?", p);
		if (r == 0)
			r = prog->option ? prog->option(c, optarg, userdata) : -2;
		if (r == -1)
			return 0;
		if (r == -2)
			return 2;
	}
	if (prog->no_arguments && optind < argc) {
		log_error("Unexpected argument \"%s\"; see --help", argv[optind]);
		return 2;
	}
	/* Given on the command line: $EB_USER, from a unit's environment file, is no error. */
	given_identity = o && (o->user != user || o->key_file != key_file);
	r = o && !prog->no_environment ? eb_cli_client_env(o) : 0;
	/* check-source: allow einval-compare (eb_cli_client_env(): a bad $EB_KEY_ID) */
	if (r == -EINVAL) {
		log_error(
		    "Invalid $EB_KEY_ID \"%s\": expected 1..%d letters, digits, \".\", \"_\" or "
		    "\"-\", starting with a letter or digit",
		    getenv("EB_KEY_ID"), EB_KEY_ID_MAX);
		return 2;
	}
	if (r < 0) {
		log_error("Too many brokers in $EB_BROKER: at most %d", EB_CLIENT_BROKERS_MAX);
		return 2;
	}
	if (o && o->n_brokers == 0 && prog->default_broker)
		o->brokers[o->n_brokers++] = prog->default_broker;
	if (given_identity && identity_unused(o))
		return 2;
	return EB_CLI_CONTINUE;
}

int eb_cli_parse(int argc, char *argv[], const struct eb_cli_program *prog,
                 struct eb_client_options *o, void *userdata)
{
	return parse(argc, argv, prog, o, NULL, userdata);
}

int eb_cli_source_parse(int argc, char *argv[], const struct eb_cli_program *prog,
                        struct eb_client_options *o, struct eb_source_params *p, void *userdata)
{
	return parse(argc, argv, prog, o, p, userdata);
}

void eb_cli_source_params_done(struct eb_source_params *p)
{
	p->dump_fd = safe_close(p->dump_fd);
}

int eb_cli_source_client_new(struct eb_client_options *o, const struct eb_source_params *p,
                             const char *per, struct eb_client **ret)
{
	const struct eb_gate_params *g = &p->gate;
	int r;

	if (g->h_mbits > g->cap_mbits_per_byte)
		log_notice("Claiming %" PRIu32 ".%03" PRIu32
		           " bits per %s, credited at most %" PRIu32 ".%03" PRIu32
		           " (a low-trust source; raise with --max-credit-per-byte)",
		           g->h_mbits / 1000, g->h_mbits % 1000, per, g->cap_mbits_per_byte / 1000,
		           g->cap_mbits_per_byte % 1000);
	o->claim_mbits_per_byte = MIN(g->h_mbits, g->cap_mbits_per_byte);
	/* A capture for eb-assess needs no broker: sample, test and dump, donate nothing. */
	if (o->n_brokers == 0 && p->dump_fd >= 0) {
		log_notice(
		    "No broker given: capturing raw samples to --dump-raw only, donating nothing");
		*ret = NULL;
		return 0;
	}
	r = eb_cli_client_new(o, ret);
	if (r >= 0)
		eb_cli_client_watch(*ret);
	return r;
}

int eb_cli_source_report(int r, const struct eb_source_stats *st, const char *prep,
                         const char *input)
{
	const char *sep = input ? " " : "";

	if (r < 0)
		return 1;
	log_info("Donated %" PRIu64 " bytes%s%s%s%s, %" PRIu64 " bits credited of %" PRIu64
	         " claimed; %" PRIu64 " health-test alarm(s)",
	         st->bytes, sep, input ? prep : "", sep, input ? input : "", st->credited,
	         st->claimed, st->alarms);
	return 0;
}

int eb_cli_source_report_samples(int r, const struct eb_source_stats *st, const char *verb,
                                 const char *samples)
{
	if (r < 0)
		return 1;
	log_info("%s %" PRIu64 " %s (%" PRIu64 " admitted, %" PRIu64
	         " health-test alarm(s)), donated %" PRIu64 " bytes, %" PRIu64
	         " bits credited of %" PRIu64 " claimed",
	         verb, st->samples, samples, st->admitted, st->alarms, st->bytes, st->credited,
	         st->claimed);
	return 0;
}

int eb_cli_client_env(struct eb_client_options *o)
{
	/* The split copy lives as long as the options that point into it: the whole program. */
	static char *brokers;
	const char *e;

	e = getenv("EB_USER");
	if (!o->user && e && *e)
		o->user = e;
	e = getenv("EB_KEY_ID");
	if (!o->key_id && e && *e) {
		if (!eb_key_id_valid(e))
			return -EINVAL;
		o->key_id = e;
	}
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
