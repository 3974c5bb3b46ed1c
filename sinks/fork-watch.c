/* SPDX-License-Identifier: MIT */
#include "fork-watch.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "cli.h"
#include "clock-jump.h"
#include "kernel-reseed.h"
#include "log.h"
#include "macro.h"

#define MSGID_FORK_SEEN  "989e3ad85bae4fc0ad56c7a564611dfd"
#define MSGID_CLOCK_JUMP "efe5014b814841a2b427a9e0ecb8200a"
/* Debian 12's kernel logs the fork line within a second of a resume (guest time, under TCG): a
 * VM with a generation ID device lets a clock jump wait this long for it, so that one resume
 * costs one draw. */
#define VMGENID_GRACE_S    10
#define VMGENID_DRIVER_DIR "/sys/bus/acpi/drivers/vmgenid"
/* What the RTC's file may hold: a number of seconds and a newline. */
#define RTC_TEXT_MAX 32

struct watch {
	const struct fork_watch_options *o;
	int fd;
	bool clock;       /* the clock trigger is on */
	bool rtc_failing; /* the last read failed, and said so */
	struct clock_jump jump;
	int64_t waiting_jump_ms; /* the jump a WAIT holds, for the line when it runs out */
	int64_t next_sample_ns;  /* CLOCK_BOOTTIME */
	uint64_t forks, clock_reseeds;
};

static int64_t boottime_ns(void)
{
	struct timespec ts;

	(void)clock_gettime(CLOCK_BOOTTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The RTC's time in whole seconds since the epoch, as /sys/class/rtc/rtcN/since_epoch gives it
 * (read through the RTC's driver, not kept by the kernel's clock; not the exclusive /dev/rtc). */
static int read_rtc(const char *path, int64_t *ret_s)
{
	_cleanup_close_ int fd = -EBADF;
	char buf[RTC_TEXT_MAX + 1], *end;
	long long v;
	ssize_t n;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return negative_errno();
	n = read(fd, buf, RTC_TEXT_MAX);
	if (n < 0)
		return negative_errno();
	buf[n] = '\0';
	if (n == 0 || buf[0] < '0' || buf[0] > '9')
		return -EBADMSG;
	errno = 0;
	v = strtoll(buf, &end, 10);
	if (errno != 0 || (*end != '\0' && strcmp(end, "\n") != 0))
		return -EBADMSG;
	*ret_s = v;
	return 0;
}

/* Whether the kernel's vmgenid driver holds a device: then a resume from a saved state may come
 * with the kernel's own fork line. */
static bool vmgenid_bound(void)
{
	DIR *d = opendir(VMGENID_DRIVER_DIR);
	struct dirent *e;
	bool bound = false;

	if (!d)
		return false;
	/* A bound device is a link named after it; "module" is the driver's own. */
	while (!bound && (e = readdir(d)))
		bound = e->d_type == DT_LNK && strcmp(e->d_name, "module") != 0;
	closedir(d);
	return bound;
}

/* One VM fork seen: systemd starts the reseed, so that it runs with its own unit's sandbox,
 * credentials and journal lines, and a fork that comes while one runs is queued after it. */
static void start_reseed_unit(void)
{
	char *argv[] = {(char *)"systemctl", (char *)"--no-block", (char *)"start",
	                (char *)RESEED_UNIT, NULL};
	extern char **environ;
	int status = 0, r;
	pid_t pid;

	r = -posix_spawnp(&pid, "systemctl", NULL, NULL, argv, environ);
	if (r < 0) {
		log_error_errno(r, "Failed to run systemctl start " RESEED_UNIT ": %m");
		return;
	}
	while ((r = waitpid(pid, &status, 0)) < 0 && errno == EINTR)
		;
	if (r < 0)
		log_error_errno(errno,
		                "Failed to wait for systemctl start " RESEED_UNIT ": %m; this copy "
		                "may not be reseeded");
	else if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
		log_error("systemctl start " RESEED_UNIT " exited with status %d; this copy is not "
		          "reseeded (systemctl status " RESEED_UNIT " says why)",
		          WEXITSTATUS(status));
	else if (!WIFEXITED(status))
		log_error("systemctl start " RESEED_UNIT " was killed by signal %d; this copy is "
		          "not reseeded",
		          WTERMSIG(status));
}

/* Reads the RTC between two readings of CLOCK_BOOTTIME. A failure is said once, until a read
 * works again; the clock trigger then has no base until it does. */
static bool rtc_sample(struct watch *w, int64_t *ret_rtc_s, int64_t *ret_b0, int64_t *ret_b1)
{
	int r;

	*ret_b0 = boottime_ns();
	r = read_rtc(w->o->rtc, ret_rtc_s);
	*ret_b1 = boottime_ns();
	if (r < 0 && !w->rtc_failing)
		log_warning_errno(
		    r,
		    "Failed to read the RTC at %s: %m; the clock trigger waits for it "
		    "(a VM fork the kernel logs still starts " RESEED_UNIT ")",
		    w->o->rtc);
	else if (r >= 0 && w->rtc_failing)
		log_info("The RTC at %s reads again", w->o->rtc);
	w->rtc_failing = r < 0;
	return r >= 0;
}

static void clock_reseed(struct watch *w, int64_t jump_ms)
{
	char fields[160];

	snprintf(fields, sizeof(fields),
	         "MESSAGE_ID=" MSGID_CLOCK_JUMP "\nEB_CLOCK_JUMP_MS=%" PRId64
	         "\nEB_CLOCK_RESEEDS=%" PRIu64,
	         jump_ms, ++w->clock_reseeds);
	log_struct(LOG_NOTICE, fields,
	           "This VM's clock fell %.1f s behind its RTC (a copy started from a saved state, "
	           "or the VM paused) and the kernel logged no VM fork: starting " RESEED_UNIT,
	           (double)jump_ms / 1000);
	start_reseed_unit();
}

static void sample_clock(struct watch *w, int64_t now_ns)
{
	enum clock_jump_verdict v;
	int64_t rtc_s, b0, b1, jump_ms;

	w->next_sample_ns = now_ns + (int64_t)w->o->interval_s * 1000000000;
	if (!rtc_sample(w, &rtc_s, &b0, &b1)) {
		clock_jump_forget(&w->jump);
		return;
	}
	v = clock_jump_sample(&w->jump, rtc_s, b0, b1, &jump_ms);
	log_debug("RTC sample: %" PRId64 " s at boot time %.3f s, jump %" PRId64 " ms", rtc_s,
	          (double)b1 / 1e9, jump_ms);
	switch (v) {
	case CLOCK_JUMP_NONE:
		break;
	case CLOCK_JUMP_WAIT:
		w->waiting_jump_ms = jump_ms;
		log_info(
		    "The RTC jumped %.1f s ahead of this VM's clock; waiting up to %d s for the "
		    "kernel's VM fork line before starting " RESEED_UNIT,
		    (double)jump_ms / 1000, w->o->grace_s);
		break;
	case CLOCK_JUMP_RESEED:
		clock_reseed(w, jump_ms);
		break;
	case _CLOCK_JUMP_VERDICT_MAX:
	case _CLOCK_JUMP_VERDICT_INVALID:
		break;
	}
}

static void on_fork_record(struct watch *w)
{
	int64_t rtc_s = 0, b0 = 0, b1 = 0, jump_ms;
	bool waiting = clock_jump_deadline(&w->jump) != INT64_MAX, have_rtc;
	char fields[128];

	snprintf(fields, sizeof(fields), "MESSAGE_ID=" MSGID_FORK_SEEN "\nEB_FORKS=%" PRIu64,
	         ++w->forks);
	log_struct(LOG_NOTICE, fields,
	           "The kernel says this VM forked (\"" EB_RESEED_FORK_TEXT
	           "\"): starting " RESEED_UNIT);
	start_reseed_unit();
	if (!w->clock)
		return;
	/* The jump this fork left, if the clock has not seen it yet, is the line's: measured now,
	 * it is answered, and the next resume is measured from here. */
	have_rtc = rtc_sample(w, &rtc_s, &b0, &b1);
	clock_jump_fork_line(&w->jump, have_rtc, rtc_s, b0, b1, &jump_ms);
	if (waiting || jump_ms > CLOCK_JUMP_THRESHOLD_MS)
		log_info("The kernel's fork line answers the RTC's jump of %.1f s",
		         (double)(waiting ? w->waiting_jump_ms : jump_ms) / 1000);
}

/* One read of kmsg: 1 to go on, 0 at its end (a test's FIFO), a negative errno, logged. */
static int read_kmsg(struct watch *w)
{
	char buf[8192];
	ssize_t n = read(w->fd, buf, sizeof(buf));
	size_t at = 0;

	/* A record overwritten before it was read (EPIPE) is skipped. */
	if (n < 0 && (errno == EINTR || errno == EPIPE || errno == EAGAIN))
		return 1;
	if (n < 0)
		return log_error_errno(errno, "Failed to read %s: %m", w->o->kmsg);
	if (n == 0)
		return 0;
	/* /dev/kmsg gives one record a read; a FIFO may give several lines at once. */
	while (at < (size_t)n) {
		const char *nl = memchr(buf + at, '\n', (size_t)n - at);
		size_t len = nl ? (size_t)(nl - (buf + at)) + 1 : (size_t)n - at;

		if (kernel_reseed_is_fork_record(buf + at, len))
			on_fork_record(w);
		at += len;
	}
	return 1;
}

/* Until the next sample or the end of a jump's wait, whichever is first; -1: no clock. */
static int poll_timeout_ms(const struct watch *w, int64_t now_ns)
{
	int64_t until = MIN(w->next_sample_ns, clock_jump_deadline(&w->jump));

	if (!w->clock)
		return -1;
	if (until <= now_ns)
		return 0;
	return (int)MIN((until - now_ns + 999999) / 1000000, (int64_t)INT32_MAX);
}

/* The clock trigger is on when the RTC reads at start; its first sample is the base. */
static void clock_start(struct watch *w)
{
	int64_t rtc_s, b0, b1, jump_ms;
	int r;

	if (!w->o->rtc)
		return;
	r = read_rtc(w->o->rtc, &rtc_s);
	if (r < 0) {
		log_notice_errno(
		    r,
		    "No RTC to read at %s (%m): only the kernel's VM fork line starts " RESEED_UNIT,
		    w->o->rtc);
		return;
	}
	w->clock = true;
	clock_jump_init(&w->jump, (int64_t)w->o->grace_s * 1000000000);
	if (rtc_sample(w, &rtc_s, &b0, &b1))
		(void)clock_jump_sample(&w->jump, rtc_s, b0, b1, &jump_ms);
	w->next_sample_ns = b1 + (int64_t)w->o->interval_s * 1000000000;
}

int fork_watch_option(struct fork_watch_options *o, int which, const char *arg)
{
	enum fork_watch_option opt = which;
	unsigned long long v;

	switch (opt) {
	case FORK_WATCH_KMSG:
		if (arg[0] != '/')
			break;
		o->kmsg = arg;
		return 0;
	case FORK_WATCH_RTC:
		if (strcmp(arg, "none") != 0 && arg[0] != '/')
			break;
		o->rtc = strcmp(arg, "none") == 0 ? NULL : arg;
		return 0;
	case FORK_WATCH_CLOCK_INTERVAL:
		/* Each sample is one read of the RTC: a minute is the longest a resume may go
		 * unseen. */
		if (eb_cli_parse_u64(arg, 1, 60, &v) < 0)
			break;
		o->interval_s = (unsigned)v;
		return 0;
	case FORK_WATCH_FORK_GRACE:
		if (eb_cli_parse_u64(arg, 0, 60, &v) < 0)
			break;
		o->grace_s = (int)v;
		return 0;
	case _FORK_WATCH_OPTION_MAX:
	case _FORK_WATCH_OPTION_INVALID:
		break;
	}
	log_error("Invalid --%s \"%s\": expected %s",
	          opt == FORK_WATCH_KMSG             ? "kmsg"
	          : opt == FORK_WATCH_RTC            ? "rtc"
	          : opt == FORK_WATCH_CLOCK_INTERVAL ? "clock-interval"
	                                             : "fork-grace",
	          arg,
	          opt == FORK_WATCH_KMSG             ? "an absolute path"
	          : opt == FORK_WATCH_RTC            ? "an absolute path or \"none\""
	          : opt == FORK_WATCH_CLOCK_INTERVAL ? "1 to 60 seconds"
	                                             : "0 to 60 seconds");
	return -ERANGE;
}

/* --watch-fork: reads the kernel's log from its end on, one record a read, and samples the RTC
 * between reads; either starts the reseed. A file that ends (a test's FIFO) ends the watch. */
int fork_watch_run(const struct fork_watch_options *o)
{
	struct fork_watch_options opts = *o;
	struct watch w = {.o = &opts, .fd = -EBADF};
	_cleanup_close_ int fd = -EBADF;
	int r;

	if (opts.grace_s < 0)
		opts.grace_s = vmgenid_bound() ? VMGENID_GRACE_S : 0;
	fd = open(o->kmsg, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return log_error_errno(errno,
		                       "Failed to open %s (reading the kernel log needs "
		                       "CAP_SYSLOG): %m",
		                       o->kmsg);
	w.fd = fd;
	/* What the log held before this started is not a fork this copy has to answer. */
	(void)lseek(fd, 0, SEEK_END);
	clock_start(&w);
	if (w.clock)
		log_info("Watching %s for a VM fork, and the RTC at %s every %u s for a resume "
		         "(a jump waits %d s for the kernel's line)",
		         o->kmsg, o->rtc, opts.interval_s, opts.grace_s);
	(void)sd_notifyf(false, "READY=1\nSTATUS=Watching %s for a VM fork%s", o->kmsg,
	                 w.clock ? ", and the RTC for a resume" : "");
	for (;;) {
		int64_t now = boottime_ns();
		struct pollfd p = {.fd = fd, .events = POLLIN};

		if (w.clock && now >= w.next_sample_ns)
			sample_clock(&w, now);
		if (w.clock && clock_jump_tick(&w.jump, now) == CLOCK_JUMP_RESEED)
			clock_reseed(&w, w.waiting_jump_ms);
		r = poll(&p, 1, poll_timeout_ms(&w, now));
		if (r < 0 && errno != EINTR)
			return log_error_errno(errno, "Failed to wait for %s: %m", o->kmsg);
		if (r <= 0)
			continue;
		r = read_kmsg(&w);
		if (r <= 0)
			return r;
	}
}
