/* SPDX-License-Identifier: MIT */
/* eb-source-exec: runs a program and donates its standard output to a broker. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "log.h"
#include "proto.h"
#include "source.h"

/* A program is a low-trust source, as a file is: it vouches for nothing unless told, and even
 * then its credit is capped unless the operator raises the cap too. */
#define LOW_TRUST_CAP_MBITS 1000u

/* How long the command's processes have to end after SIGTERM before they get SIGKILL, and how
 * long the source then waits for the kernel to remove them before it gives up on them. */
#define STOP_GRACE_MS 5000
#define KILL_WAIT_MS  1000

/* The command's process group while it may hold a process, for the signal handler; 0 otherwise. */
static volatile sig_atomic_t group;

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

static int64_t now_ms(void)
{
	struct timespec ts;

	(void)clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Ends every process of the command's group pg: SIGTERM (with SIGCONT, so that a stopped one
 * acts on it), STOP_GRACE_MS for them to go, then SIGKILL. It reaps what it may: the leader, and
 * the members that their own parent's end left to us (we are their subreaper). True once the
 * group is empty. Async-signal-safe: the stop signals' handler calls it too. */
static bool stop_group(pid_t pg)
{
	int64_t deadline = now_ms() + STOP_GRACE_MS;
	bool killed = false;

	(void)kill(-pg, SIGTERM);
	(void)kill(-pg, SIGCONT);
	for (;;) {
		while (waitpid(-pg, NULL, WNOHANG) > 0)
			;
		if (kill(-pg, 0) < 0 && errno == ESRCH)
			return true;
		if (now_ms() >= deadline) {
			if (killed)
				return false;
			(void)kill(-pg, SIGKILL);
			killed = true;
			deadline = now_ms() + KILL_WAIT_MS;
		}
		(void)poll(NULL, 0, 20);
	}
}

/* SIGTERM, SIGINT, SIGHUP: the command's whole group goes before we do, then we die of the
 * signal as we would have without a handler (what systemd and a shell expect to see). */
static void on_stop(int sig)
{
	static const char msg[] = "eb-source-exec: some of the command's processes survived "
				  "SIGKILL; leaving them\n";
	pid_t pg = group;

	if (pg > 0 && !stop_group(pg))
		(void)!write(STDERR_FILENO, msg, sizeof(msg) - 1);
	(void)signal(sig, SIG_DFL);
	(void)raise(sig);
}

static const int stop_signal_list[] = {SIGTERM, SIGINT, SIGHUP};

static void stop_signals(sigset_t *ret)
{
	sigemptyset(ret);
	for (size_t i = 0; i < ELEMENTSOF(stop_signal_list); i++)
		sigaddset(ret, stop_signal_list[i]);
}

/* A stop signal we were started with ignored (nohup's SIGHUP) stays ignored, for the command
 * too; the others get on_stop(), which the command's process puts back to the default action. */
static void handle_stop_signals(bool handle)
{
	struct sigaction sa = {.sa_handler = handle ? on_stop : SIG_DFL}, cur;

	stop_signals(&sa.sa_mask);
	for (size_t i = 0; i < ELEMENTSOF(stop_signal_list); i++)
		if (sigaction(stop_signal_list[i], NULL, &cur) == 0 && cur.sa_handler != SIG_IGN)
			(void)sigaction(stop_signal_list[i], &sa, NULL);
}

/* Starts the command in a process group of its own, whose id is its pid: a shell pipeline's
 * members, or whatever else it starts, are stopped with it (stop_group()), not left behind. */
static int spawn(char **argv, struct child *ret)
{
	pid_t parent = getpid(), pid;
	sigset_t stop, old;
	int p[2];

	if (pipe2(p, O_CLOEXEC) < 0)
		return negative_errno();
	/* No stop signal between the fork and group's being set: the handler must know the group
	 * of any command that runs. */
	stop_signals(&stop);
	(void)sigprocmask(SIG_BLOCK, &stop, &old);
	pid = fork();
	if (pid < 0) {
		int r = negative_errno();

		(void)sigprocmask(SIG_SETMASK, &old, NULL);
		safe_close(p[0]);
		safe_close(p[1]);
		return r;
	}
	if (pid == 0) {
		int null = open("/dev/null", O_RDONLY | O_CLOEXEC);

		(void)setpgid(0, 0);
		handle_stop_signals(false);
		/* Ignored here for the broker's socket, not for the command: a pipeline's member
		 * whose reader went ends as it would anywhere else. */
		(void)signal(SIGPIPE, SIG_DFL);
		(void)sigprocmask(SIG_SETMASK, &old, NULL);
		/* The program goes when we go, even when we are killed (SIGKILL leaves us no time
		 * to stop its group): it must not go on writing noise into a pipe nobody reads. */
		(void)prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() != parent)
			_exit(127);
		if (null < 0 || dup2(null, STDIN_FILENO) < 0 || dup2(p[1], STDOUT_FILENO) < 0)
			_exit(127);
		execvp(argv[0], argv);
		fprintf(stderr, "eb-source-exec: Failed to run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	/* Both sides set the group, so that it exists before either goes on. */
	(void)setpgid(pid, pid);
	group = pid;
	(void)sigprocmask(SIG_SETMASK, &old, NULL);
	safe_close(p[1]);
	ret->fd = p[0];
	ret->pid = pid;
	return 0;
}

/* Reaps the program: 0 if it exited 0 or was stopped (kill_it), -ECHILD otherwise (logged).
 * Whatever it leaves in its group is stopped either way: its end is the end of all it started. */
static int reap(struct child *ch, bool kill_it)
{
	sigset_t stop, old;
	int status, r = 0;

	if (ch->pid <= 0)
		return 0;
	if (!kill_it) {
		/* Unbounded, with the stop signals open: a command that closed its output but
		 * goes on is waited for, and SIGTERM still ends it. */
		while (waitpid(ch->pid, &status, 0) < 0)
			if (errno != EINTR) {
				r = log_error_errno(errno, "Failed to wait for %s: %m", ch->name);
				break;
			}
		if (r == 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
			if (WIFEXITED(status))
				log_error("%s exited with status %d", ch->name,
				          WEXITSTATUS(status));
			else
				log_error("%s was killed by signal %s", ch->name,
				          strsignal(WTERMSIG(status)));
			r = -ECHILD;
		}
	}
	/* A stop signal now waits for the group to be stopped here, then ends us. */
	stop_signals(&stop);
	(void)sigprocmask(SIG_BLOCK, &stop, &old);
	if (!stop_group(ch->pid))
		log_warning("Some processes of %s (process group %d) survived SIGKILL; leaving "
		            "them",
		            ch->name, (int)ch->pid);
	group = 0;
	ch->pid = 0;
	(void)sigprocmask(SIG_SETMASK, &old, NULL);
	return r;
}

static void help(void)
{
	printf(
	    "Usage: eb-source-exec [OPTIONS] -- COMMAND [ARGUMENT...]\n\n"
	    "Runs COMMAND and donates its standard output to a broker. Each byte is one 8-bit\n"
	    "sample; the health tests run on them when an entropy is claimed. It exits when the\n"
	    "command's output ends: 0 if the command exited 0, 1 otherwise. Its end, or a\n"
	    "SIGTERM, SIGINT or SIGHUP, stops every process of the command's process group:\n"
	    "SIGTERM, and SIGKILL 5 s later.\n\n"
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
	/* The command's members orphaned by its own processes' ends come to us, so that
	 * stop_group() reaps them and knows when the group is gone. */
	(void)prctl(PR_SET_CHILD_SUBREAPER, 1);
	handle_stop_signals(true);
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
