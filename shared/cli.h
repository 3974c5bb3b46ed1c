/* SPDX-License-Identifier: MIT */
/* The options every client program shares: -b, -u, -k, -v, -h, --version; and what every source
 * program shares besides: its source options, its command-line loop and its closing report.
 * Part of libeb's program layer: it logs usage errors and the report itself (docs/decisions.md,
 * "a silent core, and a program layer that logs"). */
#pragma once

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>

#include "client.h"

struct eb_source_params;
struct eb_source_stats;

enum {
	EB_CLI_ARG_VERSION = 0x100,
	EB_CLI_ARG_KEY_ID,
	EB_CLI_ARG_DUMP_RAW,
	EB_CLI_ARG_SAMPLES,
	EB_CLI_ARG_CREDIT,
	EB_CLI_ARG_CREDIT_CAP,
	EB_CLI_ARG_ESTIMATE,
	EB_CLI_ARG_FIRST_PRIVATE = 0x200, /* programs number their own long options from here */
};

#define EB_CLI_CLIENT_SHORTOPTS "b:u:k:vh"
#define EB_CLI_CLIENT_OPTIONS                                                                      \
	{"broker", required_argument, NULL, 'b'}, {"user", required_argument, NULL, 'u'},          \
	    {"key-file", required_argument, NULL, 'k'},                                            \
	    {"key-id", required_argument, NULL, EB_CLI_ARG_KEY_ID},                                \
	    {"verbose", no_argument, NULL, 'v'}, {"help", no_argument, NULL, 'h'},                 \
	{                                                                                          \
		"version", no_argument, NULL, EB_CLI_ARG_VERSION                                   \
	}

/* --help and --version alone, for a program that is no client. */
#define EB_CLI_HELP_OPTIONS                                                                        \
	{"help", no_argument, NULL, 'h'},                                                          \
	{                                                                                          \
		"version", no_argument, NULL, EB_CLI_ARG_VERSION                                   \
	}

#define EB_CLI_CLIENT_HELP                                                                         \
	"  -b, --broker URI      broker to use (repeatable; tried in order, with failover):\n"     \
	"                        tcp://HOST[:PORT], unix:/PATH, vsock://CID[:PORT],\n"             \
	"                        unix+tls:/PATH, virtio:NAME\n"                                    \
	"  -u, --user NAME       user name for TLS brokers\n"                                      \
	"  -k, --key-file PATH   key file (default: the credential eb.key)\n"                      \
	"      --key-id ID       the key's id at the broker (key = ID PATH), when the user\n"      \
	"                        has several; default: none, the user's first key\n"               \
	"  -v, --verbose         log debug messages\n"                                             \
	"  -h, --help            show this help\n"                                                 \
	"      --version         show the version\n"

/* The options every sampling source shares. */
#define EB_CLI_SOURCE_OPTIONS                                                                      \
	{"dump-raw", required_argument, NULL, EB_CLI_ARG_DUMP_RAW},                                \
	{                                                                                          \
		"samples", required_argument, NULL, EB_CLI_ARG_SAMPLES                             \
	}

#define EB_CLI_SOURCE_HELP                                                                         \
	"      --dump-raw FILE   also write every raw sample to FILE, one per byte, before any\n"  \
	"                        conditioning (the input of NIST's SP 800-90B ea_* tools); with\n" \
	"                        no --broker, only that (a capture for eb-assess)\n"               \
	"      --samples N       stop after N samples (default: run until stopped)\n"

/* The credit claimed per byte by a source with no estimate of its own (a file, a program, the
 * kernel), into gate.h_mbits: --credit-per-byte H, alias --min-entropy, 0-8. Each program says its
 * own default in its help, which is why there is no shared help text. A source that names it
 * --min-entropy alone (egd, stream) lists {"min-entropy", ..., EB_CLI_ARG_CREDIT} itself. */
#define EB_CLI_CREDIT_OPTIONS                                                                      \
	{"credit-per-byte", required_argument, NULL, EB_CLI_ARG_CREDIT},                           \
	{                                                                                          \
		"min-entropy", required_argument, NULL, EB_CLI_ARG_CREDIT                          \
	}

/* A low-trust source's cap on that credit, into gate.cap_mbits_per_byte: raising it is a second,
 * deliberate step beyond claiming. */
#define EB_CLI_CREDIT_CAP_OPTION                                                                   \
	{                                                                                          \
		"max-credit-per-byte", required_argument, NULL, EB_CLI_ARG_CREDIT_CAP              \
	}

/* The min-entropy per sample of a source whose H was measured (jitter, timers), into
 * gate.h_mbits: --min-entropy H, 0.001-8. Not 0: such a source is only worth running at its
 * estimate, and a 0 is more likely a slip than a wish to donate uncredited noise. */
#define EB_CLI_ESTIMATE_OPTION                                                                     \
	{                                                                                          \
		"min-entropy", required_argument, NULL, EB_CLI_ARG_ESTIMATE                        \
	}

/* Returned by eb_cli_source_parse() when the program is to go on. */
#define EB_CLI_CONTINUE (-1)

/* A program's own options, for eb_cli_source_parse(): 0 when handled, -2 for a usage error
 * (already logged). */
typedef int (*eb_cli_option_t)(int c, const char *arg, void *userdata);

struct eb_cli_program {
	const char *name;             /* for --version and the messages */
	void (*help)(void);           /* --help */
	const char *shortopts;        /* EB_CLI_CLIENT_SHORTOPTS and the program's own; NULL: the
	                               * former alone ("h" for a program that is no client) */
	const struct option *options; /* EB_CLI_CLIENT_OPTIONS, EB_CLI_SOURCE_OPTIONS, maybe
	                               * EB_CLI_CREDIT_OPTIONS and EB_CLI_CREDIT_CAP_OPTION or
	                               * EB_CLI_ESTIMATE_OPTION, the program's own */
	eb_cli_option_t option;       /* the program's own options; NULL: it has none */
	bool no_arguments;            /* refuse any argument after the options */
	bool no_environment;          /* leave $EB_BROKER and $EB_USER unread */
	const char *default_broker;   /* the broker when none is given; NULL: none */
};

/* Parses a program's command line with getopt_long(): -h/--help and --version, the client
 * options into o (NULL for a program that is no client, such as eb-keygen), the program's own
 * through prog->option(c, optarg, userdata); refuses arguments if prog->no_arguments; then, unless
 * prog->no_environment, fills in o from the environment (eb_cli_client_env()), and then
 * prog->default_broker if no broker is named yet. --user or --key-file given while every broker
 * is plain unix: is a usage error. Unknown options and missing arguments are logged with the
 * program's name.
 * Returns EB_CLI_CONTINUE with optind at the first argument, or the exit code to leave with: 0
 * after --help or --version, 2 after a usage error (logged). */
int eb_cli_parse(int argc, char *argv[], const struct eb_cli_program *prog,
                 struct eb_client_options *o, void *userdata);

/* eb_cli_parse() for a source program: the source and credit options too, into p. An invalid
 * value is logged with the option's name. p->dump_fd may be open either way:
 * eb_cli_source_params_done() closes it. */
int eb_cli_source_parse(int argc, char *argv[], const struct eb_cli_program *prog,
                        struct eb_client_options *o, struct eb_source_params *p, void *userdata);

/* Closes what the command line opened for p (--dump-raw): for _cleanup_(). */
void eb_cli_source_params_done(struct eb_source_params *p);

/* Creates a source's client: claims p's H per byte up to the cap (saying so when the cap cuts
 * the claim of a low-trust source; per: "byte", "byte of X"), then as eb_cli_client_new(). With
 * no broker and --dump-raw given, *ret is NULL: an offline capture (eb_source_run() takes NULL),
 * and a watch (eb_cli_client_watch()) on a client made. */
int eb_cli_source_client_new(struct eb_client_options *o, const struct eb_source_params *p,
                             const char *per, struct eb_client **ret);

/* Ends a source's run r (eb_source_run()'s result, or a later failure): 1 when it failed
 * (r < 0, already logged); otherwise logs "Donated N bytes of PATH, C bits credited of L
 * claimed; A health-test alarm(s)" (prep "of" and input PATH; input NULL: no input named) and
 * returns 0. */
int eb_cli_source_report(int r, const struct eb_source_stats *st, const char *prep,
                         const char *input);

/* The same for a source that takes more samples than it donates, or other ones: "Took N
 * samples (A admitted, ...), donated ..." with verb "Took" and samples "samples". */
int eb_cli_source_report_samples(int r, const struct eb_source_stats *st, const char *verb,
                                 const char *samples);

/* Handles one of the shared options: 1 when it was one, 0 when not, -1 after --help/--version
 * (exit 0), -2 for a usage error (already logged). */
int eb_cli_client_option(int c, const char *arg, struct eb_client_options *o, const char *program,
                         void (*help)(void));

/* Fills in what the command line left out from the environment, so that a unit can take them
 * from an EnvironmentFile=: $EB_BROKER (broker URIs separated by spaces) when no --broker was
 * given, $EB_USER when no --user, $EB_KEY_ID when no --key-id. Empty variables count as unset.
 * -E2BIG: too many brokers; -EINVAL: $EB_KEY_ID is no key id. */
int eb_cli_client_env(struct eb_client_options *o);

/* Parses a non-negative number of bits with at most three decimals ("4", "0.5", "7.125") into
 * millibits, at most max_mbits; -EINVAL or -ERANGE. */
int eb_cli_parse_mbits(const char *s, uint32_t max_mbits, uint32_t *ret);

/* Parses a whole number in [min, max] with end and range checks; -EINVAL or -ERANGE. */
int eb_cli_parse_u64(const char *s, unsigned long long min, unsigned long long max,
                     unsigned long long *ret);

/* Parses arg, the value of --name, as a whole number from 1 to max into *ret, for an
 * eb_cli_option_t: 0, or -2 after logging 'Invalid --name "arg": expected 1-max' and the unit,
 * when given ("nanoseconds"). */
int eb_cli_option_uint(const char *name, const char *arg, unsigned max, const char *unit,
                       unsigned *ret);

/* Creates the client; logs the error (naming the broker or key file) and returns it. */
int eb_cli_client_new(const struct eb_client_options *o, struct eb_client **ret);

/* For a program that waits for its broker (a source, a sink; not a one-question tool): logs the
 * first failed attempt to reach one as a warning naming the broker and the reason, then once a
 * minute while it lasts with the count of attempts, and "Connected to X after N s" when one
 * answers again; under systemd, STATUS= says "Connected to X" or "Not connected: REASON". All the
 * clients of a program share one record of the outage: a failure followed at once by a success
 * of another client of the same program (eb-sink-egd's two) is no outage. Refusals (-EACCES) are
 * final and left to the program to log; they only set STATUS=. */
void eb_cli_client_watch(struct eb_client *c);

/* For a sink, after each eb_client_receive(): r is its result. The first EMPTY or QUOTA of a wait
 * is a notice (no -v needed) naming the broker ("Waiting for broker X: its pool is empty"), then
 * one line a minute with the count of answers and the time waited, and "Served by X again after N
 * s" when DATA comes; STATUS= says "Waiting for ..." meanwhile. Other results are left alone. */
void eb_cli_sink_answer(struct eb_client *c, int r);
