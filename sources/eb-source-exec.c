/* SPDX-License-Identifier: MIT */
/* eb-source-exec: runs a program and donates its standard output to a broker. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
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
 * long the keeper then waits for the kernel to remove them before it gives up on them. */
#define STOP_GRACE_MS 5000
#define KILL_WAIT_MS  1000
/* How long we wait for the keeper, which takes the two above at most, before it gets SIGKILL. */
#define KEEPER_WAIT_MS (STOP_GRACE_MS + KILL_WAIT_MS + 2000)

/* The keeper (see keep()) while it runs, for the signal handler; 0 otherwise. */
static volatile sig_atomic_t keeper;

struct child {
	int fd;
	int go_fd; /* the keeper starts the command when a byte comes, goes when it closes */
	pid_t pid; /* the keeper's */
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

static const int stop_signal_list[] = {SIGTERM, SIGINT, SIGHUP};

static void stop_signals(sigset_t *ret)
{
	sigemptyset(ret);
	for (size_t i = 0; i < ELEMENTSOF(stop_signal_list); i++)
		sigaddset(ret, stop_signal_list[i]);
}

/* Ends every process of the command's group pg: SIGTERM (with SIGCONT, so that a stopped one
 * acts on it), STOP_GRACE_MS for them to go, then SIGKILL. It reaps what it may: the leader, and
 * the members that their own parent's end left to the keeper (their subreaper). True once the
 * group is empty. */
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

/* stop_group(), saying when some survived SIGKILL (a process in uninterruptible sleep). */
static void stop_all(pid_t pg)
{
	static const char msg[] = "eb-source-exec: some of the command's processes survived "
				  "SIGKILL; leaving them\n";

	if (!stop_group(pg))
		(void)!write(STDERR_FILENO, msg, sizeof(msg) - 1);
}

/* Dies of sig, without a core of its own. */
static _Noreturn void die_of(int sig)
{
	static const struct rlimit no_core = {0, 0};
	sigset_t set;

	(void)setrlimit(RLIMIT_CORE, &no_core);
	(void)signal(sig, SIG_DFL);
	sigemptyset(&set);
	sigaddset(&set, sig);
	(void)sigprocmask(SIG_UNBLOCK, &set, NULL);
	(void)raise(sig);
	_exit(128 + sig);
}

/* Ignored stop signals stay ignored (nohup's SIGHUP); the others get handler. */
static void set_stop_signals(void (*handler)(int))
{
	struct sigaction sa = {.sa_handler = handler}, cur;

	stop_signals(&sa.sa_mask);
	for (size_t i = 0; i < ELEMENTSOF(stop_signal_list); i++)
		if (sigaction(stop_signal_list[i], NULL, &cur) == 0 && cur.sa_handler != SIG_IGN)
			(void)sigaction(stop_signal_list[i], &sa, NULL);
}

/* The command's side: a process group of its own, the default actions back (SIGPIPE is ignored
 * for our broker socket, not for a pipeline's member whose reader went), stdin on /dev/null,
 * stdout into out_fd. Never returns. */
static _Noreturn void command(char **argv, int out_fd, const sigset_t *mask, pid_t parent)
{
	int null = open("/dev/null", O_RDONLY | O_CLOEXEC);

	(void)setpgid(0, 0);
	set_stop_signals(SIG_DFL);
	(void)signal(SIGPIPE, SIG_DFL);
	(void)sigprocmask(SIG_SETMASK, mask, NULL);
	/* Should the keeper itself be killed, the command is not left writing into a pipe
	 * nobody reads. */
	(void)prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() != parent)
		_exit(127);
	if (null < 0 || dup2(null, STDIN_FILENO) < 0 || dup2(out_fd, STDOUT_FILENO) < 0)
		_exit(127);
	execvp(argv[0], argv);
	fprintf(stderr, "eb-source-exec: Failed to run %s: %s\n", argv[0], strerror(errno));
	_exit(127);
}

/* The keeper: a child of ours, forked before the client holds a key, that starts the command
 * in a process group of its own and stops that whole group when the command ends, when we stop
 * it, and when we die, SIGKILL included (PR_SET_PDEATHSIG): whatever the command started goes
 * with it. Once the command runs it takes the stop signals and SIGCHLD by sigwaitinfo(), and
 * holds no descriptor of ours but the standard ones. Never returns. */
static _Noreturn void keep(char **argv, int out_fd, int go_fd, const sigset_t *mask, pid_t parent)
{
	struct sigaction cur;
	sigset_t set;
	pid_t pid, self = getpid();
	int status = 0, sig;
	char go;

	/* Until the command runs, a stop signal, ours included (PR_SET_PDEATHSIG), ends the
	 * keeper at once: there is nothing else to stop. */
	set_stop_signals(SIG_DFL);
	(void)sigprocmask(SIG_SETMASK, mask, NULL);
	(void)prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() != parent)
		_exit(0);
	/* The members orphaned by their own parent's end come to us, so that stop_group() reaps
	 * them and knows when the group is gone. */
	(void)prctl(PR_SET_CHILD_SUBREAPER, 1);
	if (read(go_fd, &go, 1) != 1)
		_exit(0); /* we did not start the command after all, or died first */
	/* From here on they are taken by sigwaitinfo(), an ignored one left out. */
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	for (size_t i = 0; i < ELEMENTSOF(stop_signal_list); i++)
		if (sigaction(stop_signal_list[i], NULL, &cur) == 0 && cur.sa_handler != SIG_IGN)
			sigaddset(&set, stop_signal_list[i]);
	(void)sigprocmask(SIG_BLOCK, &set, NULL);
	pid = fork();
	if (pid < 0)
		_exit(127);
	if (pid == 0)
		command(argv, out_fd, mask, self);
	/* Both sides set the group, so that it exists before either goes on. */
	(void)setpgid(pid, pid);
	(void)close_range(STDERR_FILENO + 1, ~0U, 0);
	for (;;) {
		pid_t k;

		do
			sig = sigwaitinfo(&set, NULL);
		while (sig < 0);
		if (sig != SIGCHLD) {
			/* Stopped: the whole group, then the keeper dies of the signal. */
			stop_all(pid);
			die_of(sig);
		}
		while ((k = waitpid(-1, &status, WNOHANG)) > 0 && k != pid)
			;
		if (k == pid)
			break;
	}
	/* The command ended: what it left in its group goes too. */
	stop_all(pid);
	if (WIFEXITED(status))
		_exit(WEXITSTATUS(status));
	die_of(WTERMSIG(status)); /* so that we report the command's end */
}

/* Waits for the keeper, at most KEEPER_WAIT_MS when stop (after a SIGTERM), then SIGKILL: its
 * status. Async-signal-safe: the stop signals' handler calls it too. */
static int wait_keeper(pid_t k, bool stop, int *ret_status)
{
	int64_t deadline = now_ms() + KEEPER_WAIT_MS;
	pid_t w;

	if (stop)
		(void)kill(k, SIGTERM);
	for (;;) {
		w = waitpid(k, ret_status, stop ? WNOHANG : 0);
		if (w == k)
			return 0;
		if (w < 0 && errno != EINTR)
			return -errno;
		if (stop && now_ms() >= deadline) {
			(void)kill(k, SIGKILL);
			stop = false;
		} else if (stop)
			(void)poll(NULL, 0, 20);
	}
}

/* SIGTERM, SIGINT, SIGHUP: the keeper stops the command's whole group, then we die of the
 * signal as we would have without a handler (what systemd and a shell expect to see). */
static void on_stop(int sig)
{
	pid_t k = keeper;
	int status;

	if (k > 0)
		(void)wait_keeper(k, true, &status);
	(void)signal(sig, SIG_DFL);
	(void)raise(sig);
}

/* Forks the keeper, which starts the command at go(). */
static int spawn(char **argv, struct child *ret)
{
	pid_t parent = getpid(), pid;
	sigset_t stop, old;
	int p[2], g[2];

	if (pipe2(p, O_CLOEXEC) < 0)
		return negative_errno();
	if (pipe2(g, O_CLOEXEC) < 0) {
		int r = negative_errno();

		safe_close(p[0]);
		safe_close(p[1]);
		return r;
	}
	/* No stop signal between the fork and keeper's being set: the handler must know the
	 * keeper whenever one runs. */
	stop_signals(&stop);
	(void)sigprocmask(SIG_BLOCK, &stop, &old);
	pid = fork();
	if (pid < 0) {
		int r = negative_errno();

		(void)sigprocmask(SIG_SETMASK, &old, NULL);
		safe_close(p[0]);
		safe_close(p[1]);
		safe_close(g[0]);
		safe_close(g[1]);
		return r;
	}
	if (pid == 0) {
		/* Only our copy of the go pipe's write end: its close is our "no". */
		(void)close(g[1]);
		(void)close(p[0]);
		keep(argv, p[1], g[0], &old, parent);
	}
	keeper = pid;
	(void)sigprocmask(SIG_SETMASK, &old, NULL);
	safe_close(p[1]);
	safe_close(g[0]);
	ret->fd = p[0];
	ret->go_fd = g[1];
	ret->pid = pid;
	return 0;
}

/* Tells the keeper to start the command. */
static int go(struct child *ch)
{
	ssize_t k;

	do
		k = write(ch->go_fd, "g", 1);
	while (k < 0 && errno == EINTR);
	ch->go_fd = safe_close(ch->go_fd);
	return k == 1 ? 0 : -EPIPE;
}

/* Reaps the keeper, which ends as the command did once every process of its group is gone: 0
 * if it exited 0 or was stopped (kill_it), -ECHILD otherwise (logged). */
static int reap(struct child *ch, bool kill_it)
{
	sigset_t stop, old;
	int status, r;

	if (ch->pid <= 0)
		return 0;
	ch->go_fd = safe_close(ch->go_fd);
	/* Unbounded, with the stop signals open, unless we stop it: a command that closed its
	 * output but goes on is waited for, and SIGTERM still ends it. */
	if (!kill_it)
		r = wait_keeper(ch->pid, false, &status);
	else {
		/* A stop signal now waits for the group to be stopped here, then ends us. */
		stop_signals(&stop);
		(void)sigprocmask(SIG_BLOCK, &stop, &old);
		r = wait_keeper(ch->pid, true, &status);
	}
	keeper = 0;
	ch->pid = 0;
	if (kill_it)
		(void)sigprocmask(SIG_SETMASK, &old, NULL);
	if (r < 0)
		return log_error_errno(r, "Failed to wait for %s: %m", ch->name);
	if (kill_it || (WIFEXITED(status) && WEXITSTATUS(status) == 0))
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
	    "command's output ends: 0 if the command exited 0, 1 otherwise. Its end, however\n"
	    "it comes (SIGKILL included), stops every process of the command's process group:\n"
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
	struct child ch = {.fd = -EBADF, .go_fd = -EBADF};
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
	/* The keeper before the client, which holds the key: a process that outlives us by up to
	 * STOP_GRACE_MS holds no copy of it. The command itself waits for go(), after the client:
	 * a usage error in the broker options must not start it. */
	r = spawn(argv + optind, &ch);
	if (r < 0) {
		log_error_errno(r, "Failed to start %s: %m", ch.name);
		return 1;
	}
	/* A stop signal from here on stops the keeper and its command before we go. */
	set_stop_signals(on_stop);
	if (eb_cli_source_client_new(&o, &p, "byte", &client) < 0) {
		(void)reap(&ch, true);
		return 2;
	}
	/* A SIGPIPE from a lost broker connection is an error to handle, not a death. */
	(void)signal(SIGPIPE, SIG_IGN);
	r = go(&ch);
	if (r < 0) {
		(void)reap(&ch, true);
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
