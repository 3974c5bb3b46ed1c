/* SPDX-License-Identifier: MIT */
/* eb-source-jitter: donates CPU execution-time jitter, in the spirit of jitterentropy and HAVEGE.
 *
 * One measurement times a short loop of memory accesses and data-dependent branches over a buffer
 * larger than the L1 and L2 caches, with CLOCK_MONOTONIC_RAW; the raw sample is the low 8 bits
 * of the elapsed nanoseconds. Caches, TLBs, branch predictors, interrupts and the other core's
 * traffic make that time wobble by a few nanoseconds each time. The wobble is what is credited,
 * at the conservative H that docs/sources.md derives from captures of this very sample. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "log.h"
#include "source.h"

/* The claimed min-entropy per 8-bit sample, in millibits. docs/sources.md ("eb-source-jitter")
 * has the captures and estimates behind it: the least SP 800-90B estimate seen on the reference
 * machine, idle or loaded, was 4.4 bits per sample; 1 bit is claimed, a factor of 4.4 below, to
 * allow for machines quieter than the one measured and for dependence that the estimators used
 * there (a subset of NIST's) miss. */
#define JITTER_H_MBITS_DEFAULT 1000u
/* Work per measurement: enough memory traffic that cache misses dominate its time. */
#define JITTER_LOOPS_DEFAULT 16u
#define JITTER_LOOPS_MAX     65536u
/* Larger than the L2 cache of current x86 and ARM cores (EPYC: 512 KiB), so accesses miss. */
#define JITTER_MEM_SIZE (1u << 21)

struct jitter {
	uint8_t *mem;
	unsigned loops;
	uint64_t state; /* walks the buffer; not secret, the timing is what is sampled */
	uint64_t prev;  /* time of the last measurement */
};

static unsigned arg_loops = JITTER_LOOPS_DEFAULT;

static void help(void)
{
	printf("Usage: eb-source-jitter [OPTIONS]\n\n"
	       "Donates CPU execution-time jitter: the low 8 bits of the time a memory- and\n"
	       "branch-heavy loop takes, health-tested (SP 800-90B RCT and APT).\n\n"
	       "      --min-entropy H   claimed min-entropy per 8-bit sample, 0.001-8 bits\n"
	       "                        (default 1, 4.4 times below the least estimate measured)\n"
	       "      --loops N         memory accesses per measurement, 1-%u (default %u);\n"
	       "                        re-estimate H before changing it\n" EB_CLI_SOURCE_HELP
	           EB_CLI_CLIENT_HELP "\nSee eb-source-jitter(1).\n",
	       JITTER_LOOPS_MAX, JITTER_LOOPS_DEFAULT);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	/* Not slewed by NTP: a slewed clock's rate changes would add structure, not entropy. */
	(void)clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* One measurement. The loop's length and the addresses it touches depend on the previous
 * delta, so the work itself varies with the noise, as jitterentropy's loop shuffle does. */
static uint8_t measure(struct jitter *j)
{
	unsigned n = j->loops + (unsigned)(j->prev & 7);
	uint64_t s = j->state ^ j->prev, t, delta;

	for (unsigned i = 0; i < n; i++) {
		size_t a;

		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		a = (size_t)(s & (JITTER_MEM_SIZE - 1));
		j->mem[a] = (uint8_t)(j->mem[a] + i + 1);
		/* A branch the predictor cannot learn: it depends on memory that keeps changing. */
		if (j->mem[a] & 1)
			s += j->mem[(a + 4099) & (JITTER_MEM_SIZE - 1)];
	}
	j->state = s;
	t = now_ns();
	delta = t - j->prev;
	j->prev = t;
	return (uint8_t)delta;
}

static ssize_t sample(void *userdata, uint8_t *buf, size_t n)
{
	struct jitter *j = userdata;

	for (size_t i = 0; i < n; i++)
		buf[i] = measure(j);
	return (ssize_t)n;
}

/* A timer too coarse to see the loop's wobble gives the same delta again and again; the health
 * tests would quarantine it, but a clear refusal at start is kinder than silence. */
static int check_timer(struct jitter *j)
{
	unsigned distinct = 0;
	uint8_t seen[256] = {0};

	for (unsigned i = 0; i < 1024; i++) {
		uint8_t v = measure(j);

		distinct += !seen[v];
		seen[v] = 1;
	}
	return distinct >= 8 ? 0 : -EOPNOTSUPP;
}

enum { ARG_LOOPS = EB_CLI_ARG_FIRST_PRIVATE };

static int parse_option(int c, const char *arg, void *userdata)
{
	(void)userdata;
	if (c != ARG_LOOPS)
		return -2;
	return eb_cli_option_uint("loops", arg, JITTER_LOOPS_MAX, NULL, &arg_loops);
}

int main(int argc, char *argv[])
{
	static const struct option options[] = {
	    EB_CLI_CLIENT_OPTIONS,
	    EB_CLI_SOURCE_OPTIONS,
	    EB_CLI_ESTIMATE_OPTION,
	    {"loops", required_argument, NULL, ARG_LOOPS},
	    {},
	};
	static const struct eb_cli_program prog = {.name = "eb-source-jitter",
	                                           .help = help,
	                                           .options = options,
	                                           .option = parse_option,
	                                           .no_arguments = true};
	struct eb_client_options o = {.roles = EB_ROLE_SOURCE, .kind = "jitter"};
	/* 8-bit samples, one per byte sent: H per sample is H per byte, and no cap beyond it. */
	_cleanup_(eb_cli_source_params_done) struct eb_source_params p = {
	    .name = "jitter",
	    .gate = {.bits = 8, .h_mbits = JITTER_H_MBITS_DEFAULT, .cap_mbits_per_byte = 8000},
	    .dump_fd = -EBADF,
	};
	_cleanup_(eb_client_freep) struct eb_client *client = NULL;
	_cleanup_free_ uint8_t *mem = NULL;
	struct eb_source_stats st;
	struct jitter j;
	int r;

	log_setup(argv[0]);
	r = eb_cli_source_parse(argc, argv, &prog, &o, &p, NULL);
	if (r != EB_CLI_CONTINUE)
		return r;

	if (eb_cli_source_client_new(&o, &p, "byte", &client) < 0)
		return 2;

	mem = calloc(1, JITTER_MEM_SIZE);
	if (!mem)
		return log_oom(), 1;
	j = (struct jitter){.mem = mem, .loops = arg_loops, .state = 0x9e3779b97f4a7c15u};
	j.prev = now_ns();
	if (check_timer(&j) < 0) {
		log_error("CLOCK_MONOTONIC_RAW is too coarse to see execution-time jitter here");
		return 1;
	}
	r = eb_source_run(client, &p, sample, &j, &st);
	explicit_bzero(mem, JITTER_MEM_SIZE);
	return eb_cli_source_report_samples(r, &st, "Took", "samples");
}
