/* SPDX-License-Identifier: MIT */
/* eb-source-exec: runs a program and donates its standard output to a broker. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "log.h"
#include "proto.h"
#include "source.h"

/* A program is a low-trust source, as a file is: it vouches for nothing unless told, and even
 * then its credit is capped unless the operator raises the cap too. */
#define LOW_TRUST_CAP_MBITS 1000u

struct child {
	int fd;
	pid_t pid;
	const char *name;
	bool eof; /* its output ended */
};

static ssize_t sample(void *userdata, uint8_t *buf, size_t n)
{
	struct child *ch = userdata;
	ssize_t k;

	do
		k = read(ch->fd, buf, n);
	while (k < 0 && errno == EINTR);
	if (k < 0)
		return log_error_errno(errno, "Failed to read the output of %s: %m", ch->name);
	ch->eof = k == 0;
	return k;
}

static int spawn(char **argv, struct child *ret)
{
	int p[2];
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) < 0)
		return negative_errno();
	pid = fork();
	if (pid < 0) {
		int r = negative_errno();

		safe_close(p[0]);
		safe_close(p[1]);
		return r;
	}
	if (pid == 0) {
		int null = open("/dev/null", O_RDONLY | O_CLOEXEC);

		/* The program goes when we go, even when we are killed: it must not go on
		 * writing noise into a pipe nobody reads. */
		(void)prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() == 1)
			_exit(127);
		if (null < 0 || dup2(null, STDIN_FILENO) < 0 || dup2(p[1], STDOUT_FILENO) < 0)
			_exit(127);
		execvp(argv[0], argv);
		fprintf(stderr, "eb-source-exec: Failed to run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	safe_close(p[1]);
	ret->fd = p[0];
	ret->pid = pid;
	return 0;
}

/* Reaps the program: 0 if it exited 0, -ECHILD otherwise (logged). */
static int reap(struct child *ch, bool kill_it)
{
	int status;

	if (ch->pid <= 0)
		return 0;
	if (kill_it)
		(void)kill(ch->pid, SIGTERM);
	while (waitpid(ch->pid, &status, 0) < 0)
		if (errno != EINTR)
			return log_error_errno(errno, "Failed to wait for %s: %m", ch->name);
	ch->pid = 0;
	if (kill_it)
		return 0;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (WIFEXITED(status))
		log_error("%s exited with status %d", ch->name, WEXITSTATUS(status));
	else
		log_error("%s was killed by signal %s", ch->name, strsignal(WTERMSIG(status)));
	return -ECHILD;
}

static void help(void)
{
	printf(
	    "Usage: eb-source-exec [OPTIONS] -- COMMAND [ARGUMENT...]\n\n"
	    "Runs COMMAND and donates its standard output to a broker. Each byte is one 8-bit\n"
	    "sample; the health tests run on them when an entropy is claimed. It exits when the\n"
	    "command's output ends: 0 if the command exited 0, 1 otherwise.\n\n"
	    "      --min-entropy H         min-entropy to claim per byte, 0-8, up to three\n"
	    "                              decimals (default 0: mixed in, not credited)\n"
	    "      --credit-per-byte H     the same\n"
	    "      --max-credit-per-byte BITS\n"
	    "                              cap on the credit per byte (default 1: a program is a\n"
	    "                              low-trust source)\n" EB_CLI_SOURCE_HELP
		EB_CLI_CLIENT_HELP "\nSee eb-source-exec(1).\n");
}

int main(int argc, char *argv[])
{
	static const struct option options[] = {
	    EB_CLI_CLIENT_OPTIONS,
	    EB_CLI_SOURCE_OPTIONS,
	    EB_CLI_CREDIT_OPTIONS,
	    EB_CLI_CREDIT_CAP_OPTION,
	    {},
	};
	/* "+": options end at the first non-option, so the command's own options are its own. */
	static const struct eb_cli_program prog = {.name = "eb-source-exec",
	                                           .help = help,
	                                           .shortopts = "+" EB_CLI_CLIENT_SHORTOPTS,
	                                           .options = options};
	struct eb_client_options o = {.roles = EB_ROLE_SOURCE};
	_cleanup_(eb_cli_source_params_done) struct eb_source_params p = {
	    .gate = {.bits = 8, .cap_mbits_per_byte = LOW_TRUST_CAP_MBITS},
	    .dump_fd = -EBADF,
	    .quarantine_ms = 100,
	};
	_cleanup_(eb_client_freep) struct eb_client *client = NULL;
	char kind[EB_KIND_MAX + 1], name[256];
	struct child ch = {.fd = -EBADF};
	struct eb_source_stats st;
	int r, k;

	log_setup(argv[0]);
	r = eb_cli_source_parse(argc, argv, &prog, &o, &p, NULL);
	if (r != EB_CLI_CONTINUE)
		return r;
	if (optind >= argc) {
		log_error("Expected a COMMAND to run, after --; see --help");
		return 2;
	}
	ch.name = argv[optind];
	snprintf(kind, sizeof(kind), "exec %s (low trust)", ch.name);
	snprintf(name, sizeof(name), "exec %s", ch.name);
	o.kind = kind;
	p.name = name;
	/* The client first: a usage error in the broker options must not start the command. */
	if (eb_cli_source_client_new(&o, &p, "byte", &client) < 0)
		return 2;
	/* A SIGPIPE from a lost broker connection is an error to handle, not a death. */
	(void)signal(SIGPIPE, SIG_IGN);
	r = spawn(argv + optind, &ch);
	if (r < 0) {
		log_error_errno(r, "Failed to start %s: %m", ch.name);
		return 1;
	}
	r = eb_source_run(client, &p, sample, &ch, &st);
	safe_close(ch.fd);
	/* The command's end is ours; restarting it is systemd's job (Restart=), which also
	 * runs the start-up health test again on the new process's output. */
	k = reap(&ch, r < 0 || !ch.eof); /* --samples may end the run before the output */
	return eb_cli_source_report(r < 0 ? r : k, &st, "from", ch.name);
}
