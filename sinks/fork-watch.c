/* SPDX-License-Identifier: MIT */
#include "fork-watch.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "kernel-reseed.h"
#include "log.h"
#include "macro.h"

#define MSGID_FORK_SEEN "989e3ad85bae4fc0ad56c7a564611dfd"

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
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		log_error("systemctl start " RESEED_UNIT " failed (status %d); this copy is not "
		          "reseeded",
		          status);
}

/* --watch-fork: reads the kernel's log from its end on, one record a read, and starts the
 * reseed at each VM fork the kernel reports. A record overwritten before it was read (EPIPE)
 * is skipped; a file that ends (a test's FIFO) ends the watch. */
int fork_watch_run(const char *kmsg)
{
	_cleanup_close_ int fd = -EBADF;
	char buf[8192];
	uint64_t forks = 0;

	fd = open(kmsg, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return log_error_errno(errno,
		                       "Failed to open %s (reading the kernel log needs "
		                       "CAP_SYSLOG): %m",
		                       kmsg);
	/* What the log held before this started is not a fork this copy has to answer. */
	(void)lseek(fd, 0, SEEK_END);
	(void)sd_notifyf(false, "READY=1\nSTATUS=Watching %s for a VM fork", kmsg);
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		size_t at = 0;

		if (n < 0 && (errno == EINTR || errno == EPIPE || errno == EAGAIN))
			continue;
		if (n < 0)
			return log_error_errno(errno, "Failed to read %s: %m", kmsg);
		if (n == 0)
			return 0;
		/* /dev/kmsg gives one record a read; a FIFO may give several lines at once. */
		while (at < (size_t)n) {
			const char *nl = memchr(buf + at, '\n', (size_t)n - at);
			size_t len = nl ? (size_t)(nl - (buf + at)) + 1 : (size_t)n - at;
			char fields[128];

			if (kernel_reseed_is_fork_record(buf + at, len)) {
				snprintf(fields, sizeof(fields),
				         "MESSAGE_ID=" MSGID_FORK_SEEN "\nEB_FORKS=%" PRIu64,
				         ++forks);
				log_struct(LOG_NOTICE, fields,
				           "The kernel says this VM forked (\"" EB_RESEED_FORK_TEXT
				           "\"): starting " RESEED_UNIT);
				start_reseed_unit();
			}
			at += len;
		}
	}
}
