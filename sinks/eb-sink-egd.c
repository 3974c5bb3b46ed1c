/* SPDX-License-Identifier: MIT */
/* eb-sink-egd: serves the EGD protocol on sockets from a locked buffer kept full by a broker.
 * The options, the sockets and the loop; the serving is egd-server.c's, the buffer
 * egd-refill.c's. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>

#include "cli.h"
#include "egd-buffer.h"
#include "egd-proto.h"
#include "egd-refill.h"
#include "egd-server.h"
#include "listeners.h"
#include "log.h"
#include "uri.h"

#define LISTENERS_MAX 16
/* A write queue for the broker: EGD writers are rare and small. */
#define DONATE_MAX 4096

static const char *arg_listen[LISTENERS_MAX];
static unsigned arg_n_listen;
static unsigned long long arg_buffer_size = 4096;
static unsigned long long arg_low_water_pct = 50;
static unsigned long long arg_max_clients = 4096;
/* A host's VMs' QEMUs usually share one uid (libvirt-qemu): a quarter leaves them room. */
static unsigned long long arg_max_clients_per_peer = 1024;
static unsigned long long arg_client_timeout_s = 30;

static void help(void)
{
	printf(
	    "Usage: eb-sink-egd [OPTIONS]\n\n"
	    "Serves the EGD protocol (commands 0x00-0x04) on sockets systemd passes, or on --listen\n"
	    "addresses, from a locked buffer that a broker keeps full of full-entropy bytes.\n\n"
	    "  -l, --listen URI      unix:/PATH or tcp://HOST:PORT to serve when not socket-activated\n"
	    "                        (repeatable)\n"
	    "      --buffer-size N   bytes to keep buffered (64..1048576; default 4096)\n"
	    "      --low-water PCT   refill when the buffer falls below PCT percent (1..100; default 50)\n"
	    "      --max-clients N   clients served at once (1..65536; default 4096)\n"
	    "      --max-clients-per-peer N\n"
	    "                        of those, one uid's (unix) or address's (TCP; an IPv6 /64)\n"
	    "                        (1..65536; default 1024); past either limit a newcomer takes\n"
	    "                        the place of the longest-idle client of the fullest peer\n"
	    "      --client-timeout SEC\n"
	    "                        drop a client that has not read its answer for SEC seconds\n"
	    "                        (default 30)\n" EB_CLI_CLIENT_HELP
	    "\nWithout --broker, the brokers are $EB_BROKER (space-separated); without --user, $EB_USER.\n"
	    "\nSee eb-sink-egd(8).\n");
}

static int on_exit_signal(sd_event_source *src, const struct signalfd_siginfo *si, void *userdata)
{
	sd_event *e = userdata;

	(void)src;
	log_debug("Received %s, stopping", strsignal((int)si->ssi_signo));
	(void)sd_notify(false, "STOPPING=1");
	return sd_event_exit(e, 0);
}

/* The sockets systemd passed, or else the --listen addresses, bound here: 0, or the exit code to
 * leave with (2 for a usage error, 1 when a socket fails), logged. */
static int listen_all(struct eb_listeners *ls)
{
	int n, r;

	n = eb_listeners_take_fds(ls, LISTENERS_MAX);
	if (n < 0) {
		log_error_errno(n, "%s", ls->error);
		return 1;
	}
	for (unsigned i = 0; i < ls->n; i++)
		log_debug("Serving socket \"%s\" (fd %d)", ls->v[i].name, ls->v[i].fd);
	if (n > 0)
		return 0;
	if (arg_n_listen == 0) {
		log_error("Nothing to listen on: no sockets from systemd and no --listen");
		return 2;
	}
	for (unsigned i = 0; i < arg_n_listen; i++) {
		struct eb_uri u;
		int fd;

		r = eb_uri_parse(arg_listen[i], &u);
		if (r < 0 || (u.kind != EB_URI_UNIX && u.kind != EB_URI_TCP)) {
			log_error("Invalid --listen \"%s\": expected unix:/PATH or tcp://HOST:PORT",
			          arg_listen[i]);
			return 2;
		}
		r = eb_uri_listen(&u, &fd);
		if (r < 0) {
			log_error_errno(r, "Failed to listen on %s: %m", arg_listen[i]);
			return 1;
		}
		r = eb_listeners_add(ls, fd, arg_listen[i], NULL);
		if (r < 0) {
			log_oom();
			return 1;
		}
		/* As eb-sink-egd.socket's SocketMode=0660: the group decides who reads. */
		if (u.kind == EB_URI_UNIX && chmod(u.path, 0660) < 0) {
			log_error_errno(errno, "Failed to chmod %s: %m", u.path);
			return 1;
		}
		log_info("Listening on %s", arg_listen[i]);
	}
	return 0;
}

/* Each client costs a descriptor; the soft limit is often 1024 where the hard one is far
 * higher. */
static void raise_nofile(void)
{
	struct rlimit rl;
	rlim_t want = (rlim_t)arg_max_clients + LISTENERS_MAX + 32;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= want)
		return;
	rl.rlim_cur = MIN(want, rl.rlim_max);
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur < want)
		log_warning(
		    "Open files are limited to %llu: fewer than --max-clients=%llu clients can connect",
		    (unsigned long long)rl.rlim_cur, arg_max_clients);
}

enum {
	ARG_BUFFER_SIZE = EB_CLI_ARG_FIRST_PRIVATE,
	ARG_LOW_WATER,
	ARG_MAX_CLIENTS,
	ARG_MAX_CLIENTS_PER_PEER,
	ARG_CLIENT_TIMEOUT,
};

static int option(int c, const char *arg, void *userdata)
{
	(void)userdata;
	switch (c) {
	case 'l':
		if (arg_n_listen >= LISTENERS_MAX) {
			log_error("At most %d --listen addresses", LISTENERS_MAX);
			return -2;
		}
		arg_listen[arg_n_listen++] = arg;
		return 0;
	case ARG_BUFFER_SIZE:
		if (eb_cli_parse_u64(arg, EGD_BUFFER_MIN, EGD_BUFFER_MAX, &arg_buffer_size) < 0) {
			log_error("Invalid --buffer-size \"%s\": expected %d to %d bytes", arg,
			          EGD_BUFFER_MIN, EGD_BUFFER_MAX);
			return -2;
		}
		return 0;
	case ARG_LOW_WATER:
		if (eb_cli_parse_u64(arg, 1, 100, &arg_low_water_pct) < 0) {
			log_error("Invalid --low-water \"%s\": expected 1 to 100 (percent)", arg);
			return -2;
		}
		return 0;
	case ARG_MAX_CLIENTS:
		if (eb_cli_parse_u64(arg, 1, 65536, &arg_max_clients) < 0) {
			log_error("Invalid --max-clients \"%s\": expected 1 to 65536", arg);
			return -2;
		}
		return 0;
	case ARG_MAX_CLIENTS_PER_PEER:
		if (eb_cli_parse_u64(arg, 1, 65536, &arg_max_clients_per_peer) < 0) {
			log_error("Invalid --max-clients-per-peer \"%s\": expected 1 to 65536",
			          arg);
			return -2;
		}
		return 0;
	case ARG_CLIENT_TIMEOUT:
		if (eb_cli_parse_u64(arg, 1, 86400, &arg_client_timeout_s) < 0) {
			log_error("Invalid --client-timeout \"%s\": expected 1 to 86400 seconds",
			          arg);
			return -2;
		}
		return 0;
	default:
		return -2;
	}
}

static const struct option options[] = {
    EB_CLI_CLIENT_OPTIONS,
    {"listen", required_argument, NULL, 'l'},
    {"buffer-size", required_argument, NULL, ARG_BUFFER_SIZE},
    {"low-water", required_argument, NULL, ARG_LOW_WATER},
    {"max-clients", required_argument, NULL, ARG_MAX_CLIENTS},
    {"max-clients-per-peer", required_argument, NULL, ARG_MAX_CLIENTS_PER_PEER},
    {"client-timeout", required_argument, NULL, ARG_CLIENT_TIMEOUT},
    {},
};

/* The units name their brokers in an EnvironmentFile=, one list for every sink: the environment
 * is read. */
static const struct eb_cli_program program = {
    .name = "eb-sink-egd",
    .help = help,
    .shortopts = EB_CLI_CLIENT_SHORTOPTS "l:",
    .options = options,
    .option = option,
    .no_arguments = true,
};

/* The command line, and the refill's and the server's options it makes: the exit code, or
 * EB_CLI_CONTINUE. */
static int parse_args(int argc, char *argv[], struct egd_refill_options *ret_ro,
                      struct egd_server_options *ret_so)
{
	struct eb_client_options o = {.roles = EB_ROLE_SINK, .kind = "egd"};
	int r;

	r = eb_cli_parse(argc, argv, &program, &o, NULL);
	if (r != EB_CLI_CONTINUE)
		return r;
	*ret_ro = (struct egd_refill_options){
	    .client = o,
	    .capacity = arg_buffer_size,
	    /* A GET asks for at least 8 bytes, so the refill point leaves room for that. */
	    .low_water =
		MIN(MAX(arg_buffer_size * arg_low_water_pct / 100, 1ULL), arg_buffer_size - 8),
	    .donate_max = DONATE_MAX,
	};
	*ret_so = (struct egd_server_options){
	    .max_clients = (unsigned)arg_max_clients,
	    .max_clients_per_peer = (unsigned)MIN(arg_max_clients_per_peer, arg_max_clients),
	    .client_timeout_usec = arg_client_timeout_s * 1000000ULL,
	};
	return EB_CLI_CONTINUE;
}

/* What the program runs: the refill thread, the loop, its sockets and the server on them. */
struct sink {
	struct egd_refill *refill;
	sd_event *event;
	struct eb_listeners ls;
	struct egd_server *server;
};

/* The loop, watching the stop signals and the watchdog: 0, or a negative errno (logged). */
static int loop_new(sd_event **ret)
{
	_cleanup_(sd_event_unrefp) sd_event *event = NULL;
	sigset_t mask;
	int r;

	/* Blocked before the refill thread starts, so that it inherits the mask and the
	 * signals reach the event loop. */
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
		return log_error_errno(errno, "Failed to block signals: %m");
	r = sd_event_default(&event);
	if (r < 0)
		return log_error_errno(r, "Failed to create the event loop: %m");
	r = sd_event_add_signal(event, NULL, SIGTERM, on_exit_signal, event);
	if (r >= 0)
		r = sd_event_add_signal(event, NULL, SIGINT, on_exit_signal, event);
	if (r < 0)
		return log_error_errno(r, "Failed to watch signals: %m");
	r = sd_event_set_watchdog(event, true);
	if (r < 0)
		return log_error_errno(r, "Failed to set up the watchdog: %m");
	*ret = TAKE_PTR(event);
	return 0;
}

/* The loop, the sockets and the server on them, then the refill thread: 0, or the exit code to
 * leave with (logged). */
static int sink_setup(struct sink *k, const struct egd_server_options *so)
{
	int r;

	if (loop_new(&k->event) < 0)
		return 1;
	r = listen_all(&k->ls);
	if (r != 0)
		return r;
	if (egd_server_new(k->event, k->refill, so, &k->server) < 0)
		return log_oom(), 1;
	if (egd_server_start(k->server, &k->ls) < 0)
		return 1;
	r = egd_refill_start(k->refill);
	if (r < 0)
		return log_error_errno(r, "Failed to start the refill thread: %m"), 1;
	return 0;
}

/* Serves until stopped: 0 when stopped by a signal, 1 when the loop or the refill failed. */
static int sink_run(struct sink *k)
{
	struct egd_refill_stats st;
	int r;

	(void)sd_notify(false, "READY=1\nSTATUS=Filling the buffer");
	r = sd_event_loop(k->event);
	if (r < 0)
		log_error_errno(r, "Event loop failed: %m");
	egd_refill_stats(k->refill, &st);
	egd_server_log_stats(k->server, true);
	return r == 0 && !st.failed ? 0 : 1;
}

/* Frees it all and returns ret, the exit code; or exits with it when the refill thread does not
 * stop. */
static int sink_done(struct sink *k, int ret)
{
	k->server = egd_server_free(k->server);
	eb_listeners_done(&k->ls);
	k->event = sd_event_unref(k->event);
	if (egd_refill_stop_and_free(k->refill, 2000) < 0) {
		/* The thread is stuck in a broker call; its buffers are wiped and the process
		 * ends around it. */
		egd_refill_wipe(k->refill);
		log_debug("The broker call did not return in time; exiting without it");
		_exit(ret);
	}
	return ret;
}

int main(int argc, char *argv[])
{
	struct egd_refill_options ro;
	struct egd_server_options so;
	struct sink k = {};
	int r;

	log_setup(argv[0]);
	r = parse_args(argc, argv, &ro, &so);
	if (r != EB_CLI_CONTINUE)
		return r;
	signal(SIGPIPE, SIG_IGN);
	raise_nofile();
	r = egd_refill_new(&ro, &k.refill);
	if (r < 0)
		return r == -ENOMEM || r == -EMFILE ? 1 : 2;
	r = sink_setup(&k, &so);
	if (r == 0)
		r = sink_run(&k);
	return sink_done(&k, r);
}
