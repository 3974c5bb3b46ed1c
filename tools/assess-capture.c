/* SPDX-License-Identifier: MIT */
/* eb-assess esv's captures: a source program run fresh, its raw samples taken by its own
 * --dump-raw, and the claim its start-up line states. */
#include "assess-capture.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "io.h"
#include "macro.h"

/* The child's side: its stdin on /dev/null, stdout and stderr into out_fd and err_fd (-1:
 * /dev/null), no broker. Never returns. */
static _Noreturn void child(char *const *argv, int out_fd, int err_fd, pid_t parent)
{
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);

	/* A capture that outlives eb-assess would go on writing into the folder. A parent that
	 * died before the prctl() sends no signal: then the parent is already another. */
	(void)prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() != parent)
		_exit(127);
	if (null < 0 || dup2(null, STDIN_FILENO) < 0 ||
	    dup2(out_fd >= 0 ? out_fd : null, STDOUT_FILENO) < 0 ||
	    dup2(err_fd >= 0 ? err_fd : null, STDERR_FILENO) < 0)
		_exit(127);
	/* A capture donates nothing: the source's own no-broker mode (shared/cli.c). */
	(void)unsetenv("EB_BROKER");
	(void)unsetenv("EB_USER");
	(void)unsetenv("EB_KEY_ID");
	(void)unsetenv("JOURNAL_STREAM");
	execvp(argv[0], argv);
	dprintf(STDERR_FILENO, "Failed to run %s: %s\n", argv[0], strerror(errno));
	_exit(127);
}

/* Runs argv with its stdout (out) or its stderr written to the file path, and waits for it: its
 * exit code, 128 + N when killed by signal N. A file, not a pipe: a program's own children may
 * keep a pipe open long after it has gone (a shell pipeline under eb-source-exec), and the run
 * ends when the program does. */
static int spawn(char *const *argv, bool out, const char *path, int *ret_status)
{
	_cleanup_close_ int fd = -EBADF;
	int status;
	pid_t pid, parent;

	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return -errno;
	parent = getpid();
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0)
		child(argv, out ? fd : -1, out ? -1 : fd, parent);
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	*ret_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	return 0;
}

int assess_capture_read_log(const char *path, char **ret)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	_cleanup_free_ char *buf = malloc(ASSESS_CAPTURE_LOG_MAX + 1);
	ssize_t k;

	if (fd < 0)
		return -errno;
	if (!buf)
		return -ENOMEM;
	k = eb_read_all(fd, buf, ASSESS_CAPTURE_LOG_MAX);
	if (k < 0)
		return (int)k;
	buf[k] = '\0';
	*ret = TAKE_PTR(buf);
	return 0;
}

int assess_capture_run(char *const *cmd, const char *dump, uint64_t n, const char *log,
                       struct assess_capture_run *ret)
{
	_cleanup_free_ char **argv = NULL;
	char count[24];
	size_t argc = 0;
	struct stat st;
	int r;

	while (cmd[argc])
		argc++;
	argv = calloc(argc + 5, sizeof(*argv));
	if (!argv)
		return -ENOMEM;
	snprintf(count, sizeof(count), "%" PRIu64, n);
	/* Right after the program's name: before any argument of its own (a device, a file) and any
	 * "--" it may end its options with. */
	argv[0] = cmd[0];
	argv[1] = (char *)"--dump-raw";
	argv[2] = (char *)dump;
	argv[3] = (char *)"--samples";
	argv[4] = count;
	for (size_t i = 1; i < argc; i++)
		argv[4 + i] = cmd[i];
	r = spawn(argv, false, log, &ret->status);
	if (r < 0)
		return r;
	ret->size = stat(dump, &st) == 0 ? (size_t)st.st_size : 0;
	return 0;
}

int assess_capture_version(const char *program, const char *tmp, char *buf, size_t size)
{
	char *argv[] = {(char *)program, (char *)"--version", NULL};
	_cleanup_free_ char *text = NULL;
	int status, r;

	r = spawn(argv, true, tmp, &status);
	if (r >= 0)
		r = assess_capture_read_log(tmp, &text);
	(void)unlink(tmp);
	if (r < 0)
		return r;
	if (status != 0 || !*text)
		return -ENOMSG;
	text[strcspn(text, "\n")] = '\0';
	snprintf(buf, size, "%s", text);
	return 0;
}

/* Parses "D.DDD" (what log_start() prints: whole bits, three decimals) at *p into millibits. */
static int parse_mbits(const char **p, uint32_t *ret)
{
	const char *s = *p;
	uint32_t v = 0;
	unsigned digits = 0;

	for (; *s >= '0' && *s <= '9' && v < 1000000; s++)
		v = v * 10 + (uint32_t)(*s - '0');
	if (s == *p || *s != '.')
		return -EBADMSG;
	for (s++; *s >= '0' && *s <= '9' && digits < 3; s++, digits++)
		v = v * 10 + (uint32_t)(*s - '0');
	if (digits != 3)
		return -EBADMSG;
	*p = s;
	*ret = v;
	return 0;
}

/* The line after "Sampling ": "NAME: B-bit samples, ..." */
static int parse_line(const char *s, struct assess_capture_claim *c)
{
	const char *colon = strstr(s, ": "), *p;
	unsigned bits = 0;
	int r;

	if (!colon || colon == s || (size_t)(colon - s) >= sizeof(c->name))
		return -EBADMSG;
	memcpy(c->name, s, (size_t)(colon - s));
	c->name[colon - s] = '\0';
	p = colon + 2;
	for (; *p >= '0' && *p <= '9' && bits < 100; p++)
		bits = bits * 10 + (unsigned)(*p - '0');
	if (bits < 1 || bits > 8 || strncmp(p, "-bit samples, ", 14) != 0)
		return -EBADMSG;
	c->bits = bits;
	p += 14;
	if (strncmp(p, "claiming no entropy", 19) == 0)
		return 0;
	if (strncmp(p, "H = ", 4) != 0)
		return -EBADMSG;
	p += 4;
	r = parse_mbits(&p, &c->h_mbits);
	if (r < 0)
		return r;
	p = strstr(p, "; at most ");
	if (!p)
		return -EBADMSG;
	p += strlen("; at most ");
	r = parse_mbits(&p, &c->cap_mbits);
	if (r < 0)
		return r;
	c->vonneumann = strstr(p, "; Von Neumann debiased") != NULL;
	return 0;
}

int assess_capture_claim_parse(const char *log, struct assess_capture_claim *ret)
{
	struct assess_capture_claim c = {};
	const char *s, *end;
	size_t len;
	int r;

	/* "PROGRAM: Sampling ..." on a line of its own: what log.c writes to a stderr that is no
	 * journal. */
	for (s = log; (s = strstr(s, ": Sampling ")) != NULL; s++) {
		const char *bol = s;

		while (bol > log && bol[-1] != '\n')
			bol--;
		if (memchr(bol, ' ', (size_t)(s - bol)) == NULL)
			break;
	}
	if (!s)
		return -ENOENT;
	s += strlen(": ");
	end = strchrnul(s, '\n');
	len = MIN((size_t)(end - s), sizeof(c.line) - 1);
	memcpy(c.line, s, len);
	c.line[len] = '\0';
	r = parse_line(c.line + strlen("Sampling "), &c);
	if (r < 0)
		return r;
	*ret = c;
	return 0;
}
