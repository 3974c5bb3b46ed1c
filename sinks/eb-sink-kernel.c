/* SPDX-License-Identifier: MIT */
/* eb-sink-kernel: seeds the kernel's RNG from a broker, once at boot or on a schedule. The options,
 * the modes and READY=1; drawing the bits and crediting them is kernel-feed.c's. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "bootrand.h"
#include "cli.h"
#include "fork-watch.h"
#include "kernel-feed.h"
#include "kernel-reseed.h"
#include "kernel.h"
#include "log.h"
#include "time-util.h"

/* How often the persistent loop looks for a resume from suspend when nothing else wakes it:
 * CLOCK_MONOTONIC stops in suspend, so a longer sleep would notice a resume only that much
 * later. The kernel reseeds its CRNG on resume by itself; what we add is fresh outside input,
 * where seconds do not matter. */
#define RESUME_CHECK_MS 10000
/* A jump of the suspend gap smaller than this is scheduling noise, not a suspend. */
#define RESUME_SLACK_NS (2 * (int64_t)1000000000)
/* One scheduled mix gives up after this long and waits for the next. */
#define MIX_DEADLINE_MS 60000ULL
/* --oneshot gives up this much before the hard --timeout (a quarter of it at most). */
#define ONESHOT_MARGIN_MS 500
/* Before 5.18 a refill asks for what the pool lacks, within these bounds. */
#define REFILL_MIN_BITS 64ULL
#define REFILL_MAX_BITS 4096ULL

static bool arg_oneshot;
static bool arg_reseed;
/* --reseed: the seed files a later boot would reuse, and the generation userspace watches. */
#define SEED_FILES_MAX 8
static const char *arg_seed_files[SEED_FILES_MAX];
static size_t arg_n_seed_files;
static const char *arg_generation_file = "/run/entropy-broker/generation";
/* --watch-fork: the kernel's log, the RTC and how the clock trigger runs (fork-watch.h). */
static bool arg_watch_fork;
static struct fork_watch_options arg_watch = FORK_WATCH_DEFAULTS;
static bool arg_watch_set;
#define MSGID_RESEEDED      "c4245c3f44154925b549f0f1a3f7d016"
#define MSGID_RESEED_FAILED "b06025e086b44e89a07c0a6fa3053877"
static unsigned long long arg_bits = 256;
static unsigned long long arg_timeout_s = 30;
static bool arg_timeout_set;
static unsigned long long arg_interval_s = 300;
static bool arg_interval_set;
/* 0: READY=1 only once the seed is in. */
static unsigned long long arg_ready_timeout_s;

static void help(void)
{
	printf(
	    "Usage: eb-sink-kernel [OPTIONS]\n\n"
	    "Feeds full-entropy output from a broker to the kernel's RNG (RNDADDENTROPY), crediting\n"
	    "exactly the bits the broker vouched for. Needs CAP_SYS_ADMIN.\n\n"
	    "      --oneshot         seed once and exit (early boot); default: keep mixing in\n"
	    "      --reseed          a copy of a VM (restored or cloned): draw, mix in, force a\n"
	    "                        CRNG reseed, rewrite the seed files, bump the generation,\n"
	    "                        and exit; every step must succeed\n"
	    "      --seed-file PATH  --reseed rewrites PATH if it exists (repeatable; default\n"
	    "                        /var/lib/systemd/random-seed)\n"
	    "      --watch-fork      watch the kernel log and the RTC for a copy of this VM and\n"
	    "                        start " RESEED_UNIT " at each (no broker needed)\n"
	    "      --kmsg PATH       --watch-fork reads PATH (default /dev/kmsg)\n"
	    "      --rtc PATH|none   --watch-fork reseeds when the RTC in PATH jumps ahead of the\n"
	    "                        VM's clock (default " FORK_WATCH_RTC_DEFAULT ")\n"
	    "      --clock-interval SEC  read the RTC every SEC seconds (default 5)\n"
	    "      --fork-grace SEC  a clock jump waits SEC seconds for the kernel's fork line\n"
	    "                        (default: 10 with a vmgenid device, else 0)\n"
	    "      --generation-file PATH\n"
	    "                        --reseed bumps the number in PATH (default\n"
	    "                        /run/entropy-broker/generation)\n"
	    "      --bits N          bits to draw per seed, a multiple of 8 (default 256)\n"
	    "      --timeout SEC     --oneshot gives up after SEC seconds (default 30)\n"
	    "      --ready-timeout SEC\n"
	    "                        --oneshot tells systemd it is ready (READY=1) once seeded or\n"
	    "                        after SEC seconds of trying, and goes on until --timeout\n"
	    "      --interval SEC    persistent mode mixes in fresh bits every SEC seconds\n"
	    "                        (default 300)\n" EB_CLI_CLIENT_HELP
	    "\nSee eb-sink-kernel(8).\n");
}

/* The hard limit of --oneshot: whatever blocks (a vsock connect, a TLS handshake), boot goes on.
 * Every ioctl credits only what it carries, so exiting between two of them credits nothing that
 * was not vouched for. */
static void on_alarm(int sig)
{
	static const char msg[] = "eb-sink-kernel: --timeout reached, giving up\n";

	(void)sig;
	(void)!write(STDERR_FILENO, msg, sizeof(msg) - 1);
	_exit(1);
}

enum {
	ARG_ONESHOT = EB_CLI_ARG_FIRST_PRIVATE,
	ARG_BITS,
	ARG_TIMEOUT,
	ARG_INTERVAL,
	ARG_READY_TIMEOUT,
	ARG_RESEED,
	ARG_SEED_FILE,
	ARG_GENERATION_FILE,
	ARG_WATCH_FORK,
	/* --watch-fork's own, in the order of enum fork_watch_option. */
	ARG_KMSG,
	ARG_RTC,
	ARG_CLOCK_INTERVAL,
	ARG_FORK_GRACE,
};

static int option(int c, const char *arg, void *userdata)
{
	(void)userdata;
	switch (c) {
	case ARG_ONESHOT:
		arg_oneshot = true;
		return 0;
	case ARG_RESEED:
		arg_reseed = true;
		return 0;
	case ARG_SEED_FILE:
		if (arg[0] != '/' || arg_n_seed_files >= SEED_FILES_MAX) {
			log_error(
			    "Invalid --seed-file \"%s\": expected an absolute path, at most %d",
			    arg, SEED_FILES_MAX);
			return -2;
		}
		arg_seed_files[arg_n_seed_files++] = arg;
		return 0;
	case ARG_WATCH_FORK:
		arg_watch_fork = true;
		return 0;
	case ARG_KMSG:
	case ARG_RTC:
	case ARG_CLOCK_INTERVAL:
	case ARG_FORK_GRACE:
		arg_watch_set = true;
		return fork_watch_option(&arg_watch, c - ARG_KMSG, arg) < 0 ? -2 : 0;
	case ARG_GENERATION_FILE:
		if (arg[0] != '/') {
			log_error("Invalid --generation-file \"%s\": expected an absolute path",
			          arg);
			return -2;
		}
		arg_generation_file = arg;
		return 0;
	case ARG_BITS:
		/* The kernel's input pool holds 256 bits; more than 4096 per seed only drains the
		 * broker. */
		if (eb_cli_parse_u64(arg, 8, 4096, &arg_bits) < 0 || arg_bits % 8 != 0) {
			log_error("Invalid --bits \"%s\": expected a multiple of 8, 8 to 4096",
			          arg);
			return -2;
		}
		return 0;
	case ARG_TIMEOUT:
		if (eb_cli_parse_u64(arg, 1, 3600, &arg_timeout_s) < 0) {
			log_error("Invalid --timeout \"%s\": expected 1 to 3600 seconds", arg);
			return -2;
		}
		arg_timeout_set = true;
		return 0;
	case ARG_READY_TIMEOUT:
		if (eb_cli_parse_u64(arg, 1, 3600, &arg_ready_timeout_s) < 0) {
			log_error("Invalid --ready-timeout \"%s\": expected 1 to 3600 seconds",
			          arg);
			return -2;
		}
		return 0;
	case ARG_INTERVAL:
		if (eb_cli_parse_u64(arg, 1, 86400, &arg_interval_s) < 0) {
			log_error("Invalid --interval \"%s\": expected 1 to 86400 seconds", arg);
			return -2;
		}
		arg_interval_set = true;
		return 0;
	default:
		return -2;
	}
}

static const struct option options[] = {
    EB_CLI_CLIENT_OPTIONS,
    {"oneshot", no_argument, NULL, ARG_ONESHOT},
    {"reseed", no_argument, NULL, ARG_RESEED},
    {"seed-file", required_argument, NULL, ARG_SEED_FILE},
    {"generation-file", required_argument, NULL, ARG_GENERATION_FILE},
    {"watch-fork", no_argument, NULL, ARG_WATCH_FORK},
    {"kmsg", required_argument, NULL, ARG_KMSG},
    {"rtc", required_argument, NULL, ARG_RTC},
    {"clock-interval", required_argument, NULL, ARG_CLOCK_INTERVAL},
    {"fork-grace", required_argument, NULL, ARG_FORK_GRACE},
    {"bits", required_argument, NULL, ARG_BITS},
    {"timeout", required_argument, NULL, ARG_TIMEOUT},
    {"interval", required_argument, NULL, ARG_INTERVAL},
    {"ready-timeout", required_argument, NULL, ARG_READY_TIMEOUT},
    {},
};

static const struct eb_cli_program program = {
    .name = "eb-sink-kernel",
    .help = help,
    .options = options,
    .option = option,
    .no_arguments = true,
};

/* The command line, then what its options say together: the exit code, or EB_CLI_CONTINUE. */
static int parse_args(int argc, char *argv[], struct eb_client_options *o)
{
	int r;

	r = eb_cli_parse(argc, argv, &program, o, NULL);
	if (r != EB_CLI_CONTINUE)
		return r;
	if (arg_watch_fork && (arg_reseed || arg_oneshot)) {
		log_error("--watch-fork is a mode of its own; it starts " RESEED_UNIT
		          ", which runs --reseed");
		return 2;
	}
	if (!arg_watch_fork && arg_watch_set) {
		log_error("--kmsg, --rtc, --clock-interval and --fork-grace are for --watch-fork");
		return 2;
	}
	if (arg_watch_fork)
		return EB_CLI_CONTINUE;
	if (arg_reseed && arg_oneshot) {
		log_error("--reseed and --oneshot are two modes; choose one");
		return 2;
	}
	if (arg_reseed && (arg_interval_set || arg_ready_timeout_s > 0)) {
		log_error("--interval and --ready-timeout are not for --reseed");
		return 2;
	}
	if (!arg_reseed && (arg_n_seed_files > 0 ||
	                    strcmp(arg_generation_file, "/run/entropy-broker/generation") != 0)) {
		log_error("--seed-file and --generation-file are for --reseed");
		return 2;
	}
	if (arg_reseed) {
		/* --reseed is a oneshot: its --timeout holds. */
		if (arg_n_seed_files == 0)
			arg_seed_files[arg_n_seed_files++] = "/var/lib/systemd/random-seed";
		return EB_CLI_CONTINUE;
	}
	if (arg_oneshot && arg_interval_set) {
		log_error("--interval is for persistent mode, not --oneshot");
		return 2;
	}
	if (!arg_oneshot && arg_ready_timeout_s > 0) {
		log_error("--ready-timeout is for --oneshot; persistent mode is ready once seeded");
		return 2;
	}
	if (!arg_oneshot && arg_timeout_set) {
		log_error(
		    "--timeout is for --oneshot; persistent mode retries until it is stopped");
		return 2;
	}
	return EB_CLI_CONTINUE;
}

/* --ready-timeout: a unit ordered before sysinit.target holds up boot until READY=1. The seed
 * sends it when it is in; this thread sends it when the bound passes first, whatever the program
 * is busy with (its own start-up, a connect, a handshake with a silent host), and the seeding
 * goes on. The bound counts from the program's start: what boot waits for is the whole of it. */
struct ready_bound {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_t thread;
	struct timespec at; /* CLOCK_MONOTONIC */
	bool running;       /* the thread was started */
	bool done;          /* the seeding ended: the thread sends nothing more */
	bool notified;      /* READY=1 was sent */
	const char *broker;
};

static void *ready_bound_thread(void *userdata)
{
	struct ready_bound *rb = userdata;

	pthread_mutex_lock(&rb->lock);
	while (!rb->done && pthread_cond_timedwait(&rb->cond, &rb->lock, &rb->at) != ETIMEDOUT)
		;
	if (!rb->done && !rb->notified) {
		rb->notified = true;
		(void)sd_notifyf(
		    false,
		    "READY=1\nSTATUS=Not seeded within %llu s; boot goes on, still trying "
		    "%s for up to %llu s",
		    arg_ready_timeout_s, rb->broker, arg_timeout_s);
		log_info("Not seeded within --ready-timeout=%llu s: boot goes on, and this goes on "
		         "trying until --timeout=%llu s",
		         arg_ready_timeout_s, arg_timeout_s);
	}
	pthread_mutex_unlock(&rb->lock);
	return NULL;
}

static int ready_bound_start(struct ready_bound *rb, const char *broker)
{
	pthread_condattr_t attr;
	int r;

	rb->broker = broker;
	rb->at = eb_timespec_after_ms(CLOCK_MONOTONIC, arg_ready_timeout_s * 1000);
	r = -pthread_mutex_init(&rb->lock, NULL);
	if (r < 0)
		return r;
	r = -pthread_condattr_init(&attr);
	if (r >= 0) {
		r = -pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
		if (r >= 0)
			r = -pthread_cond_init(&rb->cond, &attr);
		pthread_condattr_destroy(&attr);
	}
	if (r < 0) {
		pthread_mutex_destroy(&rb->lock);
		return r;
	}
	r = -pthread_create(&rb->thread, NULL, ready_bound_thread, rb);
	if (r < 0) {
		pthread_cond_destroy(&rb->cond);
		pthread_mutex_destroy(&rb->lock);
		return r;
	}
	rb->running = true;
	return 0;
}

/* The seeding ended (r: its result; client NULL when it never began): READY=1 now if the seed
 * is in and nobody said so yet, and the thread is gone. */
static void ready_bound_stop(struct ready_bound *rb, struct eb_client *client, int r)
{
	if (!rb->running) {
		if (client && r >= 0)
			(void)sd_notifyf(false, "READY=1\nSTATUS=Seeded with %llu bits from %s",
			                 arg_bits, eb_client_broker(client));
		return;
	}
	pthread_mutex_lock(&rb->lock);
	rb->done = true;
	if (client && r >= 0 && !rb->notified) {
		rb->notified = true;
		(void)sd_notifyf(false, "READY=1\nSTATUS=Seeded with %llu bits from %s", arg_bits,
		                 eb_client_broker(client));
	}
	pthread_cond_signal(&rb->cond);
	pthread_mutex_unlock(&rb->lock);
	pthread_join(rb->thread, NULL);
	pthread_cond_destroy(&rb->cond);
	pthread_mutex_destroy(&rb->lock);
	rb->running = false;
}

static int run_oneshot(struct eb_client *client, int fd)
{
	/* The program's own deadline comes first, so that giving up says what it waited for (no
	 * broker, no port, no host side); the alarm is only for an operation that hangs. */
	uint64_t deadline = eb_now_ms() + arg_timeout_s * 1000 -
	                    MIN((uint64_t)ONESHOT_MARGIN_MS, arg_timeout_s * 1000 / 4);
	struct sigaction sa = {.sa_handler = on_alarm};
	int r;

	if (sigaction(SIGALRM, &sa, NULL) < 0)
		return log_error_errno(errno, "Failed to set up --timeout: %m");
	alarm((unsigned)arg_timeout_s);
	r = kernel_seed(client, fd, arg_bits, deadline);
	/* It ended by itself, having said why: the alarm is for an operation that hangs, and one
	 * more line from it while a loaded machine runs the exit would only confuse. */
	alarm(0);
	return r;
}

/* --reseed: one journal line whatever happened, with the generation on success. */
static int run_reseed(struct eb_client *client, int fd)
{
	uint64_t deadline = eb_now_ms() + arg_timeout_s * 1000 -
	                    MIN((uint64_t)ONESHOT_MARGIN_MS, arg_timeout_s * 1000 / 4);
	struct sigaction sa = {.sa_handler = on_alarm};
	uint64_t t0 = eb_now_ms(), credited = 0, generation = 0;
	const char *step = "draw";
	char fields[256];
	int r;

	if (sigaction(SIGALRM, &sa, NULL) < 0)
		return log_error_errno(errno, "Failed to set up --timeout: %m");
	alarm((unsigned)arg_timeout_s);
	r = kernel_feed(client, fd, arg_bits, deadline, &credited, NULL);
	if (r >= 0)
		r = kernel_reseed_finish(fd, arg_seed_files, arg_n_seed_files, arg_generation_file,
		                         &generation, &step);
	alarm(0);
	if (r < 0) {
		snprintf(fields, sizeof(fields),
		         "MESSAGE_ID=" MSGID_RESEED_FAILED "\nEB_STEP=%s\nEB_BROKER=%s", step,
		         eb_client_broker(client));
		(void)log_struct_internal(
		    LOG_ERR, r, fields,
		    "Reseed FAILED at %s: %m; the kernel's CRNG, the seed files or the generation "
		    "may still be the saved state's (%s)",
		    step, r == -EPERM ? "needs CAP_SYS_ADMIN" : "see the lines above");
		return r;
	}
	snprintf(fields, sizeof(fields),
	         "MESSAGE_ID=" MSGID_RESEEDED "\nEB_GENERATION=%" PRIu64
	         "\nEB_CREDITED_BITS=%" PRIu64 "\nEB_BROKER=%s\nEB_RESEED_MS=%" PRIu64,
	         generation, credited, eb_client_broker(client), eb_now_ms() - t0);
	log_struct(LOG_INFO, fields,
	           "Reseeded with %" PRIu64 " bits from %s in %" PRIu64
	           " ms: CRNG reseeded (RNDRESEEDCRNG), seed files rewritten, generation %" PRIu64,
	           credited, eb_client_broker(client), eb_now_ms() - t0, generation);
	return 0;
}

/* Before 5.18 the pool's count falls as it is used; a refill brings it back to the pool size. */
static uint64_t refill_bits(int fd)
{
	unsigned long long poolsize = 4096;
	_cleanup_fclose_ FILE *f = NULL;
	int count = 0;

	f = fopen("/proc/sys/kernel/random/poolsize", "re");
	if (!f || fscanf(f, "%llu", &poolsize) != 1)
		poolsize = 4096;
	if (eb_kernel_entropy_count(fd, &count) < 0 || count < 0)
		count = 0;
	if ((unsigned long long)count >= poolsize)
		return REFILL_MIN_BITS;
	return MIN(MAX((poolsize - (unsigned long long)count + 7) / 8 * 8, REFILL_MIN_BITS),
	           REFILL_MAX_BITS);
}

static void reseed(int fd, const char *why)
{
	int r = eb_kernel_reseed(fd);

	if (r == -ENODATA)
		log_debug("The CRNG is not initialised yet; it reseeds itself at init");
	else if (r < 0)
		log_warning_errno(r,
		                  "Failed to force a CRNG reseed (RNDRESEEDCRNG) after %s, "
		                  "ignoring: %m",
		                  why);
	else
		log_debug("Forced a CRNG reseed after %s", why);
}

static int run_persistent(struct eb_client *client, int fd)
{
	bool modern = eb_kernel_is_modern();
	uint64_t total, next, mixes = 0;
	int64_t gap;
	int r;

	r = kernel_seed(client, fd, arg_bits, 0);
	if (r < 0)
		return r;
	total = arg_bits;
	eb_client_disconnect(client);
	(void)sd_notifyf(false,
	                 "READY=1\nSTATUS=Seeded with %llu bits from %s; mixing in %llu bits every "
	                 "%llu s%s",
	                 arg_bits, eb_client_broker(client), arg_bits, arg_interval_s,
	                 modern ? " and forcing a reseed" : ", refilling below the watermark");
	log_info("Mixing in %llu bits every %llu s%s", arg_bits, arg_interval_s,
	         modern ? ", each followed by a forced CRNG reseed (kernel 5.18+)"
	                : ", and refilling when the kernel wants writers (kernel before 5.18)");

	next = eb_now_ms() + arg_interval_s * 1000;
	gap = eb_kernel_suspend_gap_ns();
	for (;;) {
		uint64_t want = arg_bits, credited = 0,
			 wait = MIN(eb_ms_until(next), (uint64_t)RESUME_CHECK_MS);
		const char *why = NULL;
		int64_t g;

		if (modern) {
			/* POLLOUT means "before init" on 5.18+: nothing to wait for after it. */
			(void)eb_sleep_ms(wait);
		} else {
			r = eb_kernel_wait_writable(fd, (int)wait);
			if (r < 0)
				return log_error_errno(r, "Failed to poll /dev/random: %m");
			if (r > 0) {
				why = "the kernel asked for entropy";
				want = refill_bits(fd);
			}
		}
		g = eb_kernel_suspend_gap_ns();
		if (eb_kernel_suspended_between(gap, g, RESUME_SLACK_NS)) {
			why = "resume from suspend";
			log_info("Resumed after %.1f s suspended; mixing in fresh bits",
			         (double)(g - gap) / 1e9);
		}
		gap = g;
		if (!why && eb_now_ms() >= next)
			why = "schedule";
		if (!why)
			continue;

		r = kernel_feed(client, fd, want,
		                eb_now_ms() + MIN(arg_interval_s * 1000, MIX_DEADLINE_MS),
		                &credited, NULL);
		eb_client_disconnect(client);
		next = eb_now_ms() + arg_interval_s * 1000;
		if (r == -EPERM)
			return r;
		if (r < 0) {
			(void)sd_notifyf(false, "STATUS=Last mix (%s) failed: %s; next in %llu s",
			                 why, eb_client_last_error(client), arg_interval_s);
			continue;
		}
		if (modern)
			reseed(fd, why);
		mixes++;
		total += credited;
		log_debug("Mixed in %" PRIu64 " bits (%s)", credited, why);
		(void)sd_notifyf(false,
		                 "STATUS=%" PRIu64 " bits mixed in from brokers (%" PRIu64
		                 " mixes since the seed); last: %" PRIu64
		                 " bits from %s after %s; next in %llu s",
		                 total, mixes, credited, eb_client_broker(client), why,
		                 arg_interval_s);
	}
}

int main(int argc, char *argv[])
{
	struct eb_client_options o = {.roles = EB_ROLE_SINK, .kind = "kernel"};
	_cleanup_(eb_client_freep) struct eb_client *client = NULL;
	_cleanup_close_ int fd = -EBADF;
	struct ready_bound rb = {};
	int r;

	log_setup(argv[0]);
	r = parse_args(argc, argv, &o);
	if (r != EB_CLI_CONTINUE)
		return r;
	if (arg_watch_fork)
		return fork_watch_run(&arg_watch) < 0 ? 1 : 0;
	if (arg_oneshot && arg_ready_timeout_s > 0 && arg_ready_timeout_s < arg_timeout_s) {
		r = ready_bound_start(&rb, o.n_brokers > 0 ? o.brokers[0] : "a broker");
		if (r < 0) {
			log_error_errno(r, "Failed to set up --ready-timeout: %m");
			return 1;
		}
	}
	if (arg_oneshot || arg_reseed)
		/* No single operation may outlast the whole --timeout. */
		o.timeout_ms =
		    (int)MIN(arg_timeout_s * 1000, (unsigned long long)EB_CLIENT_TIMEOUT_MS);
	/* Before the kernel's CRNG is initialised OpenSSL's own seeding would wait for it, and so
	 * would the TLS handshake that brings the bits to initialise it. */
	if (eb_kernel_crng_ready() == 0) {
		r = eb_bootrand_use();
		if (r < 0)
			log_warning_errno(r, "Failed to keep TLS from waiting for the kernel RNG, "
			                     "ignoring: %m");
		else
			log_debug(
			    "Kernel RNG not initialised: TLS draws from getrandom(GRND_INSECURE)");
	}
	if (eb_cli_client_new(&o, &client) < 0) {
		ready_bound_stop(&rb, NULL, -EINVAL);
		return 2;
	}
	eb_cli_client_watch(client);
	r = eb_kernel_open(&fd);
	if (r < 0) {
		log_error_errno(r, "Failed to open /dev/random: %m");
		ready_bound_stop(&rb, NULL, r);
		return 1;
	}
	if (arg_reseed)
		r = run_reseed(client, fd);
	else if (arg_oneshot) {
		r = run_oneshot(client, fd);
		ready_bound_stop(&rb, client, r);
	} else
		r = run_persistent(client, fd);
	return r < 0 ? 1 : 0;
}
