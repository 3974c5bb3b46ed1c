/* SPDX-License-Identifier: MIT */
/* eb-source-timers: donates sleep-duration jitter.
 *
 * One measurement asks the kernel to sleep for a short interval (clock_nanosleep) and times how
 * long the sleep really took with CLOCK_MONOTONIC_RAW; the raw sample is the low 8 bits of the
 * overshoot in nanoseconds. The overshoot is the timer interrupt's latency, the scheduler's
 * decision and the wake-up path's cache state: it wobbles by tens of nanoseconds. The wobble is
 * credited at the conservative H that docs/sources.md derives from captures of this very sample.
 * It is slow (one sample per wake-up) but costs little CPU, and its noise is not
 * eb-source-jitter's: a second, independent source on the same machine. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include "cli.h"
#include "log.h"
#include "source.h"

/* The claimed min-entropy per 8-bit sample, in millibits. docs/sources.md ("eb-source-timers")
 * has the captures and estimates behind it: the least of the ten SP 800-90B estimates seen on
 * the reference machine was 6.6 bits per sample; 1.75 bits are claimed, a factor of 3.8 below,
 * for the same reasons as eb-source-jitter's factor. */
#define TIMERS_H_MBITS_DEFAULT 1750u
/* The requested sleep: short, so samples come quickly; any sleep at all goes through the timer
 * and the scheduler, which is where the noise is. */
#define TIMERS_INTERVAL_NS_DEFAULT 10000u
#define TIMERS_INTERVAL_NS_MAX     100000000u

static unsigned arg_interval_ns = TIMERS_INTERVAL_NS_DEFAULT;

static void help(void)
{
	printf(
	    "Usage: eb-source-timers [OPTIONS]\n\n"
	    "Donates sleep-duration jitter: the low 8 bits of how far a short\n"
	    "clock_nanosleep() overshoots, health-tested (SP 800-90B RCT and APT).\n\n"
	    "      --min-entropy H   claimed min-entropy per 8-bit sample, 0.001-8 bits\n"
	    "                        (default 1.75, 3.8 times below the least estimate measured)\n"
	    "      --interval NS     requested sleep in nanoseconds, 1-%u (default %u);\n"
	    "                        re-estimate H before changing it\n" EB_CLI_SOURCE_HELP
		EB_CLI_CLIENT_HELP "\nSee eb-source-timers(1).\n",
	    TIMERS_INTERVAL_NS_MAX, TIMERS_INTERVAL_NS_DEFAULT);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	/* Not slewed by NTP: a slewed clock's rate changes would add structure, not entropy. */
	(void)clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static ssize_t sample(void *userdata, uint8_t *buf, size_t n)
{
	const struct timespec interval = {.tv_nsec = (long)arg_interval_ns};

	(void)userdata;
	for (size_t i = 0; i < n; i++) {
		uint64_t t0 = now_ns(), t1;
		int r;

		/* An interrupted sleep (a signal) is as noisy as any; only failures count. */
		r = clock_nanosleep(CLOCK_MONOTONIC, 0, &interval, NULL);
		if (r != 0 && r != EINTR)
			return log_error_errno(r, "clock_nanosleep() failed: %m");
		t1 = now_ns();
		/* The overshoot; a negative one (an interrupted sleep) wraps, and its low bits are
		 * still the timing's. */
		buf[i] = (uint8_t)(t1 - t0 - arg_interval_ns);
	}
	return (ssize_t)n;
}

enum { ARG_INTERVAL = EB_CLI_ARG_FIRST_PRIVATE };

static int parse_option(int c, const char *arg, void *userdata)
{
	(void)userdata;
	if (c != ARG_INTERVAL)
		return -2;
	return eb_cli_option_uint("interval", arg, TIMERS_INTERVAL_NS_MAX, "nanoseconds",
	                          &arg_interval_ns);
}

int main(int argc, char *argv[])
{
	static const struct option options[] = {
	    EB_CLI_CLIENT_OPTIONS,
	    EB_CLI_SOURCE_OPTIONS,
	    EB_CLI_ESTIMATE_OPTION,
	    {"interval", required_argument, NULL, ARG_INTERVAL},
	    {},
	};
	static const struct eb_cli_program prog = {.name = "eb-source-timers",
	                                           .help = help,
	                                           .options = options,
	                                           .option = parse_option,
	                                           .no_arguments = true};
	struct eb_client_options o = {.roles = EB_ROLE_SOURCE, .kind = "timers"};
	/* 8-bit samples, one per byte sent: H per sample is H per byte, and no cap beyond it. */
	_cleanup_(eb_cli_source_params_done) struct eb_source_params p = {
	    .name = "timers",
	    .gate = {.bits = 8, .h_mbits = TIMERS_H_MBITS_DEFAULT, .cap_mbits_per_byte = 8000},
	    .dump_fd = -EBADF,
	    /* At about ten thousand samples a second a 4096-sample block would take long to
	     * reach the broker; smaller blocks keep the pool filling steadily. */
	    .block = 1024,
	};
	_cleanup_(eb_client_freep) struct eb_client *client = NULL;
	struct eb_source_stats st;
	int r;

	log_setup(argv[0]);
	r = eb_cli_source_parse(argc, argv, &prog, &o, &p, NULL);
	if (r != EB_CLI_CONTINUE)
		return r;
	if (eb_cli_source_client_new(&o, &p, "byte", &client) < 0)
		return 2;

	/* The default slack (50 us) would round every wake-up to the kernel's convenience; the
	 * least slack lets the timer hardware's own latency show. */
	if (prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL) < 0)
		log_warning_errno(errno, "Failed to set the timer slack, ignoring: %m");

	r = eb_source_run(client, &p, sample, NULL, &st);
	return eb_cli_source_report_samples(r, &st, "Took", "samples");
}
