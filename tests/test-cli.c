/* SPDX-License-Identifier: MIT */
/* Tests for shared/cli.c's command line: eb_cli_source_parse(), which every source program runs
 * (where each shared option lands, that a bad value is a usage error (2), that the program's own
 * options reach it, and the end of the options: arguments, "+", $EB_BROKER), and eb_cli_parse(),
 * the same loop for the sinks and tools. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli.h"
#include "macro.h"
#include "source.h"

enum { ARG_OWN = EB_CLI_ARG_FIRST_PRIVATE, ARG_FAIL };

static const struct option options[] = {
    EB_CLI_CLIENT_OPTIONS,
    EB_CLI_SOURCE_OPTIONS,
    EB_CLI_CREDIT_OPTIONS,
    EB_CLI_CREDIT_CAP_OPTION,
    {"own", required_argument, NULL, ARG_OWN},
    {"fail", no_argument, NULL, ARG_FAIL},
    {},
};

static unsigned n_help;

/* --help's output would go into the TAP stream: count the calls instead. */
static void help(void)
{
	n_help++;
}

struct own {
	unsigned calls;
	const char *arg;
};

static int own_option(int c, const char *arg, void *userdata)
{
	struct own *own = userdata;

	own->calls++;
	if (c == ARG_FAIL)
		return -2;
	assert_int_equal(c, ARG_OWN);
	own->arg = arg;
	return 0;
}

static const struct eb_cli_program program = {
    .name = "test-cli", .help = help, .options = options, .option = own_option};

struct run {
	struct eb_client_options o;
	struct eb_source_params p;
	struct own own;
};

/* Parses argv (NULL-terminated, after the program name) with prog, from a fresh getopt. */
static int parse_with(const struct eb_cli_program *prog, struct run *run, const char *const *args)
{
	char *argv[48] = {(char *)"test-cli"};
	int argc = 1;

	while (*args) {
		assert_true(argc < (int)ELEMENTSOF(argv) - 1);
		argv[argc++] = (char *)*args++;
	}
	*run = (struct run){
	    .o = {.roles = EB_ROLE_SOURCE},
	    .p = {.gate = {.bits = 8, .h_mbits = 1000, .cap_mbits_per_byte = 2000},
	          .dump_fd = -EBADF},
	};
	optind = 0; /* glibc: start over, as for a new program */
	opterr = 0; /* the unknown option's own message is getopt's, not under test */
	return eb_cli_source_parse(argc, argv, prog, &run->o, &run->p, &run->own);
}

#define PARSE(run, ...) parse_with(&program, run, (const char *[]){__VA_ARGS__, NULL})

static void test_shared_options(void **state)
{
	char path[] = "/tmp/test-cli-dump-XXXXXX";
	int fd = mkstemp(path);
	struct run run;

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(PARSE(&run, "--credit-per-byte", "2.5", "--max-credit-per-byte=3",
	                       "--dump-raw", path, "--samples", "10", "-b", "tcp://h", "-u",
	                       "alice", "--own", "value", "ARG"),
	                 EB_CLI_CONTINUE);
	assert_int_equal(run.p.gate.h_mbits, 2500);
	assert_int_equal(run.p.gate.cap_mbits_per_byte, 3000);
	assert_int_equal(run.p.max_samples, 10);
	assert_true(run.p.dump_fd >= 0);
	assert_int_equal(run.o.n_brokers, 1);
	assert_string_equal(run.o.brokers[0], "tcp://h");
	assert_string_equal(run.o.user, "alice");
	assert_int_equal(run.own.calls, 1);
	assert_string_equal(run.own.arg, "value");
	assert_int_equal(optind, 14);
	eb_cli_source_params_done(&run.p);
	assert_int_equal(run.p.dump_fd, -EBADF);
	eb_cli_source_params_done(&run.p); /* twice is harmless */
	unlink(path);

	/* --user or --key-file where every broker is plain unix: is a usage error, not ignored. */
	assert_int_equal(PARSE(&run, "-b", "unix:/x", "-u", "alice"), 2);
	assert_int_equal(PARSE(&run, "-b", "unix:/x", "-b", "unix:/y", "-k", "/k"), 2);
	assert_int_equal(PARSE(&run, "-b", "unix:/x", "-b", "tcp://h", "-u", "alice"),
	                 EB_CLI_CONTINUE);
	assert_int_equal(PARSE(&run, "-b", "unix+tls:/x", "-u", "alice"), EB_CLI_CONTINUE);
	assert_int_equal(PARSE(&run, "-b", "unix:/x"), EB_CLI_CONTINUE);

	/* --min-entropy is --credit-per-byte under another name. */
	assert_int_equal(PARSE(&run, "--min-entropy=0.125"), EB_CLI_CONTINUE);
	assert_int_equal(run.p.gate.h_mbits, 125);
	assert_int_equal(PARSE(&run, "--credit-per-byte", "0"), EB_CLI_CONTINUE);
	assert_int_equal(run.p.gate.h_mbits, 0);
	assert_int_equal(PARSE(&run, "--credit-per-byte", "8", "--max-credit-per-byte", "8"),
	                 EB_CLI_CONTINUE);
	assert_int_equal(run.p.gate.h_mbits, 8000);
	assert_int_equal(run.p.gate.cap_mbits_per_byte, 8000);
}

static void test_bad_values(void **state)
{
	static const char *const bad[][2] = {
	    {"--credit-per-byte", "8.001"},
	    {"--credit-per-byte", "x"},
	    {"--credit-per-byte", "-1"},
	    {"--credit-per-byte", ""},
	    {"--min-entropy", "1.0001"},
	    {"--max-credit-per-byte", "9"},
	    {"--max-credit-per-byte", "1e3"},
	    {"--samples", "0"},
	    {"--samples", "-5"},
	    {"--dump-raw", "/nonexistent/dir/raw"},
	    {"--broker", "unix:/a"}, /* the 17th */
	};
	struct run run;

	(void)state;
	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		const char *args[2 * EB_CLIENT_BROKERS_MAX + 3] = {NULL};
		size_t n = 0;

		if (strcmp(bad[i][0], "--broker") == 0)
			for (unsigned k = 0; k < EB_CLIENT_BROKERS_MAX; k++) {
				args[n++] = "-b";
				args[n++] = "unix:/b";
			}
		args[n++] = bad[i][0];
		args[n++] = bad[i][1];
		assert_int_equal(parse_with(&program, &run, args), 2);
		/* Nothing half-taken: the defaults stand. */
		assert_int_equal(run.p.gate.h_mbits, 1000);
		assert_int_equal(run.p.gate.cap_mbits_per_byte, 2000);
		assert_int_equal(run.p.max_samples, 0);
		assert_int_equal(run.p.dump_fd, -EBADF);
	}
	/* Unknown options, a missing value, and the program's own refusal. */
	assert_int_equal(PARSE(&run, "--no-such-option"), 2);
	assert_int_equal(PARSE(&run, "-Z"), 2);
	assert_int_equal(PARSE(&run, "--credit-per-byte"), 2);
	assert_int_equal(PARSE(&run, "--fail"), 2);
	assert_int_equal(run.own.calls, 1);
}

static void test_help(void **state)
{
	struct run run;

	(void)state;
	n_help = 0;
	assert_int_equal(PARSE(&run, "--credit-per-byte", "1", "--help", "--credit-per-byte", "x"),
	                 0);
	assert_int_equal(n_help, 1);
	assert_int_equal(PARSE(&run, "-h"), 0);
	assert_int_equal(n_help, 2);
}

static void test_estimate(void **state)
{
	static const struct option estimate_options[] = {
	    EB_CLI_CLIENT_OPTIONS,
	    EB_CLI_SOURCE_OPTIONS,
	    EB_CLI_ESTIMATE_OPTION,
	    {},
	};
	const struct eb_cli_program prog = {
	    .name = "test-cli", .help = help, .options = estimate_options, .no_arguments = true};
	struct run run;

	(void)state;
	assert_int_equal(parse_with(&prog, &run, (const char *[]){"--min-entropy", "0.001", NULL}),
	                 EB_CLI_CONTINUE);
	assert_int_equal(run.p.gate.h_mbits, 1);
	/* A measured source is not run at no credit, nor beyond 8 bits. */
	assert_int_equal(parse_with(&prog, &run, (const char *[]){"--min-entropy", "0", NULL}), 2);
	assert_int_equal(run.p.gate.h_mbits, 1000);
	assert_int_equal(parse_with(&prog, &run, (const char *[]){"--min-entropy", "8.5", NULL}),
	                 2);
	assert_int_equal(run.p.gate.h_mbits, 1000);
	/* Nor does it take the low-trust credit options, nor arguments. */
	assert_int_equal(parse_with(&prog, &run, (const char *[]){"--credit-per-byte", "1", NULL}),
	                 2);
	assert_int_equal(
	    parse_with(&prog, &run, (const char *[]){"--max-credit-per-byte", "1", NULL}), 2);
	assert_int_equal(parse_with(&prog, &run, (const char *[]){"extra", NULL}), 2);
	/* And no option of its own: nothing left to hand on. */
	assert_int_equal(parse_with(&prog, &run, (const char *[]){"--own", "x", NULL}), 2);
}

static void test_arguments(void **state)
{
	const struct eb_cli_program plus = {.name = "test-cli",
	                                    .help = help,
	                                    .shortopts = "+" EB_CLI_CLIENT_SHORTOPTS,
	                                    .options = options,
	                                    .option = own_option};
	struct run run;

	(void)state;
	/* Without "+", getopt takes options after an argument too. */
	assert_int_equal(PARSE(&run, "cmd", "--credit-per-byte", "3"), EB_CLI_CONTINUE);
	assert_int_equal(run.p.gate.h_mbits, 3000);
	assert_int_equal(optind, 3);
	/* With it, options end at the command: its own are its own. */
	assert_int_equal(
	    parse_with(&plus, &run,
	               (const char *[]){"-b", "unix:/x", "cmd", "--credit-per-byte", "x", NULL}),
	    EB_CLI_CONTINUE);
	assert_int_equal(optind, 3);
	assert_int_equal(run.p.gate.h_mbits, 1000);
	/* "--" ends them too. */
	assert_int_equal(PARSE(&run, "--", "--credit-per-byte"), EB_CLI_CONTINUE);
	assert_int_equal(optind, 2);
}

static void test_environment(void **state)
{
	char many[EB_CLIENT_BROKERS_MAX * 8 + 16] = "";
	struct run run;

	(void)state;
	assert_int_equal(setenv("EB_BROKER", " unix:/a\tunix:/b ", 1), 0);
	assert_int_equal(setenv("EB_USER", "bob", 1), 0);
	assert_int_equal(PARSE(&run, "--samples", "1"), EB_CLI_CONTINUE);
	assert_int_equal(run.o.n_brokers, 2);
	assert_string_equal(run.o.brokers[1], "unix:/b");
	assert_string_equal(run.o.user, "bob");
	/* The command line wins. */
	assert_int_equal(PARSE(&run, "-b", "tcp://c", "-u", "carol"), EB_CLI_CONTINUE);
	assert_int_equal(run.o.n_brokers, 1);
	assert_string_equal(run.o.brokers[0], "tcp://c");
	assert_string_equal(run.o.user, "carol");
	/* More brokers than a client takes is a usage error. */
	for (size_t k = 0, len = 0; k <= EB_CLIENT_BROKERS_MAX; k++)
		len += (size_t)snprintf(many + len, sizeof(many) - len, "unix:/m ");
	assert_int_equal(setenv("EB_BROKER", many, 1), 0);
	assert_int_equal(PARSE(&run, "--samples", "1"), 2);
	assert_int_equal(unsetenv("EB_BROKER"), 0);
	assert_int_equal(unsetenv("EB_USER"), 0);
}

/* Runs eb_cli_parse() over args (NULL-terminated, after the program name) from a fresh getopt, with
 * *o fresh when opts is not NULL (then opts is o). */
static int run_program(const struct eb_cli_program *prog, struct eb_client_options *opts,
                       struct eb_client_options *o, struct own *own, const char *const *args)
{
	char *argv[16] = {(char *)"test"};
	int argc = 1;

	while (*args) {
		assert_true(argc < (int)ELEMENTSOF(argv) - 1);
		argv[argc++] = (char *)*args++;
	}
	*o = (struct eb_client_options){.roles = EB_ROLE_SINK};
	*own = (struct own){};
	optind = 0;
	return eb_cli_parse(argc, argv, prog, opts, own);
}

/* eb_cli_parse() for the sinks and tools: a client without the source options, one that leaves
 * the environment alone, and a program that is no client at all. */
static void test_programs(void **state)
{
	static const struct option sink_options[] = {
	    EB_CLI_CLIENT_OPTIONS,
	    {"own", required_argument, NULL, ARG_OWN},
	    {},
	};
	static const struct option tool_options[] = {
	    EB_CLI_HELP_OPTIONS,
	    {"own", required_argument, NULL, ARG_OWN},
	    {},
	};
	const struct eb_cli_program sink = {.name = "test-sink",
	                                    .help = help,
	                                    .options = sink_options,
	                                    .option = own_option,
	                                    .no_arguments = true};
	const struct eb_cli_program quiet = {
	    .name = "test-ctl", .help = help, .options = sink_options, .no_environment = true};
	const struct eb_cli_program tool = {
	    .name = "test-tool", .help = help, .options = tool_options, .option = own_option};
	struct eb_client_options o;
	struct own own;
	unsigned helped = n_help;

#define RUN(prog, opts, ...) run_program(prog, opts, &o, &own, (const char *[]){__VA_ARGS__, NULL})

	(void)state;
	assert_int_equal(setenv("EB_BROKER", "tcp://env", 1), 0);
	assert_int_equal(RUN(&sink, &o, "-u", "alice", "--own", "x"), EB_CLI_CONTINUE);
	assert_string_equal(o.user, "alice");
	assert_string_equal(own.arg, "x");
	assert_int_equal(o.n_brokers, 1);
	assert_string_equal(o.brokers[0], "tcp://env");
	/* $EB_BROKER counts: -u with its only broker plain unix: is a usage error. */
	assert_int_equal(setenv("EB_BROKER", "unix:/env", 1), 0);
	assert_int_equal(RUN(&sink, &o, "-u", "alice"), 2);
	/* A source's options are not a sink's. */
	assert_int_equal(RUN(&sink, &o, "--samples", "1"), 2);
	assert_int_equal(RUN(&sink, &o, "extra"), 2);
	/* A missing argument and an unknown option are usage errors, said through the log. */
	assert_int_equal(RUN(&sink, &o, "--own"), 2);
	assert_int_equal(RUN(&sink, &o, "-Z"), 2);
	assert_int_equal(RUN(&sink, &o, "--help"), 0);
	assert_int_equal(n_help, helped + 1);

	/* Told to, it leaves $EB_BROKER unread, and takes arguments. */
	assert_int_equal(RUN(&quiet, &o, "status"), EB_CLI_CONTINUE);
	assert_int_equal(o.n_brokers, 0);
	assert_int_equal(optind, 1);
	/* It has no options of its own to hand on. */
	assert_int_equal(RUN(&quiet, &o, "--own", "x"), 2);

	/* A program that is no client: no -b, -u, -k, -v; --help and its own options. */
	assert_int_equal(RUN(&tool, NULL, "--own", "y", "PATH"), EB_CLI_CONTINUE);
	assert_string_equal(own.arg, "y");
	assert_int_equal(optind, 3);
	assert_int_equal(RUN(&tool, NULL, "-b", "unix:/x"), 2);
	assert_int_equal(RUN(&tool, NULL, "--user", "bob"), 2);
	assert_int_equal(RUN(&tool, NULL, "-h"), 0);
	assert_int_equal(n_help, helped + 2);
#undef RUN
	assert_int_equal(unsetenv("EB_BROKER"), 0);
}

static void test_report(void **state)
{
	const struct eb_source_stats st = {
	    .samples = 10, .admitted = 9, .bytes = 10, .claimed = 80, .credited = 72, .alarms = 1};

	(void)state;
	assert_int_equal(eb_cli_source_report(0, &st, "of", "/dev/null"), 0);
	assert_int_equal(eb_cli_source_report(0, &st, NULL, NULL), 0);
	assert_int_equal(eb_cli_source_report(-EIO, &st, "of", "/dev/null"), 1);
	assert_int_equal(eb_cli_source_report(-ECHILD, &st, "from", "cmd"), 1);
	assert_int_equal(eb_cli_source_report_samples(0, &st, "Took", "samples"), 0);
	assert_int_equal(eb_cli_source_report_samples(-EPIPE, &st, "Took", "samples"), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_shared_options), cmocka_unit_test(test_bad_values),
	    cmocka_unit_test(test_help),           cmocka_unit_test(test_estimate),
	    cmocka_unit_test(test_arguments),      cmocka_unit_test(test_environment),
	    cmocka_unit_test(test_programs),       cmocka_unit_test(test_report),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
