/* SPDX-License-Identifier: MIT */
/* eb-sink-file: writes N bytes of broker output to a file or standard output, or keeps a FIFO
 * fed. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "io.h"
#include "log.h"
#include "sink.h"
#include "time-util.h"

/* Requests in flight: two keep the broker busy while we write the previous answer. */
#define WINDOW 2
/* A FIFO gets a page at a time and holds one page: what a reader has not asked for is drawn
 * from the broker a page ahead at most, and what a departing reader leaves is little. */
#define FIFO_CHUNK 4096
/* Otherwise a request is the most whole 64-byte pool blocks whose DATA frame (16 bytes of
 * headers) fills four 16 KiB TLS records: 64 KiB would add a fifth record of 16 bytes, an
 * encryption and a write(2) more at the broker per frame, and a block part of which is wiped. */
#define CHUNK (1023 * 64)

static unsigned long long arg_bytes;
static const char *arg_output;
static const char *arg_fifo;
static enum eb_get_mode arg_mode = EB_GET_FULL;
static unsigned long long arg_timeout_s;

static void help(void)
{
	printf(
	    "Usage: eb-sink-file --bytes N [OPTIONS]\n"
	    "       eb-sink-file --fifo PATH [OPTIONS]\n\n"
	    "Writes exactly N bytes of full-entropy output from a broker to a file or standard\n"
	    "output, or exits non-zero; every byte written is one the broker vouched for.\n"
	    "With --fifo, keeps the FIFO at PATH fed for whoever reads it, until stopped.\n\n"
	    "      --bytes N         how many bytes to write\n"
	    "  -o, --output PATH     write to PATH (created 0600) instead of standard output\n"
	    "      --fifo PATH       feed the FIFO at PATH (created 0600 if missing) as readers\n"
	    "                        read it, reader after reader\n"
	    "      --mode MODE       full (default: SP 800-90C full entropy) or drbg\n"
	    "      --timeout SEC     give up after SEC seconds (default: wait forever)\n" EB_CLI_CLIENT_HELP
	    "\nSee eb-sink-file(1).\n");
}

/* Makes sure PATH is a FIFO, creating it 0600 when missing. */
static int fifo_prepare(const char *path)
{
	struct stat st;

	if (mkfifo(path, 0600) < 0 && errno != EEXIST)
		return log_error_errno(errno, "Failed to create FIFO %s: %m", path);
	if (stat(path, &st) < 0)
		return log_error_errno(errno, "Failed to stat %s: %m", path);
	if (!S_ISFIFO(st.st_mode))
		return log_error_errno(ENOTTY, "%s exists and is not a FIFO", path);
	return 0;
}

/* Waits for a reader: opening a FIFO for writing blocks until one comes. */
static int fifo_open(const char *path, int *ret_fd)
{
	int fd;

	log_debug("Waiting for a reader of %s", path);
	do
		fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
	while (fd < 0 && errno == EINTR);
	if (fd < 0)
		return log_error_errno(errno, "Failed to open FIFO %s: %m", path);
	/* Best effort: the smallest pipe keeps little unread entropy in the kernel. */
	(void)fcntl(fd, F_SETPIPE_SZ, FIFO_CHUNK);
	log_debug("A reader opened %s", path);
	*ret_fd = fd;
	return 0;
}

/* Writes to the FIFO; when its reader goes away (EPIPE), the rest goes to the next one. The
 * old write end is closed only after the new one is open: a reader that opened in between has
 * joined the same pipe, and closing the only write end under it would show it end-of-file.
 * What the last reader left unread goes to the next reader: nobody reads a byte twice. */
static int fifo_write(int *fd, const uint8_t *p, size_t n)
{
	while (n > 0) {
		ssize_t k = write(*fd, p, n);
		int next, r;

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && errno == EPIPE) {
			log_debug("The reader of %s went away", arg_fifo);
			r = fifo_open(arg_fifo, &next);
			if (r < 0)
				return r;
			safe_close(*fd);
			*fd = next;
			continue;
		}
		if (k < 0)
			return log_error_errno(errno, "Failed to write FIFO %s: %m", arg_fifo);
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

enum { ARG_BYTES = EB_CLI_ARG_FIRST_PRIVATE, ARG_MODE, ARG_TIMEOUT, ARG_FIFO };

static int option(int c, const char *arg, void *userdata)
{
	(void)userdata;
	switch (c) {
	case ARG_BYTES:
		if (eb_cli_parse_u64(arg, 1, 1ULL << 48, &arg_bytes) < 0) {
			log_error("Invalid --bytes \"%s\": expected 1 to 2^48", arg);
			return -2;
		}
		return 0;
	case 'o':
		arg_output = arg;
		return 0;
	case ARG_MODE:
		if (strcmp(arg, "full") == 0)
			arg_mode = EB_GET_FULL;
		else if (strcmp(arg, "drbg") == 0)
			arg_mode = EB_GET_DRBG;
		else {
			log_error("Invalid --mode \"%s\": expected full or drbg", arg);
			return -2;
		}
		return 0;
	case ARG_FIFO:
		arg_fifo = arg;
		return 0;
	case ARG_TIMEOUT:
		if (eb_cli_parse_u64(arg, 1, 86400 * 365, &arg_timeout_s) < 0) {
			log_error("Invalid --timeout \"%s\": expected seconds", arg);
			return -2;
		}
		return 0;
	default:
		return -2;
	}
}

static const struct option options[] = {
    EB_CLI_CLIENT_OPTIONS,
    {"bytes", required_argument, NULL, ARG_BYTES},
    {"output", required_argument, NULL, 'o'},
    {"mode", required_argument, NULL, ARG_MODE},
    {"timeout", required_argument, NULL, ARG_TIMEOUT},
    {"fifo", required_argument, NULL, ARG_FIFO},
    {},
};

static const struct eb_cli_program program = {
    .name = "eb-sink-file",
    .help = help,
    .shortopts = EB_CLI_CLIENT_SHORTOPTS "o:",
    .options = options,
    .option = option,
    .no_arguments = true,
    .no_environment = true, /* brokers come from the command line alone */
};

/* The command line, then what its options say together: the exit code, or EB_CLI_CONTINUE. */
static int parse_args(int argc, char *argv[], struct eb_client_options *o)
{
	int r;

	r = eb_cli_parse(argc, argv, &program, o, NULL);
	if (r != EB_CLI_CONTINUE)
		return r;
	if (arg_fifo && (arg_bytes > 0 || arg_output || arg_timeout_s > 0)) {
		log_error("--fifo runs until stopped: it takes no --bytes, --output or --timeout");
		return 2;
	}
	if (arg_bytes == 0 && !arg_fifo) {
		log_error("--bytes N is required; see --help");
		return 2;
	}
	return EB_CLI_CONTINUE;
}

/* What the run has done: bytes written, and whether it ended for want of a broker. */
struct sink_file {
	int fd;
	uint64_t written;
	size_t chunk;
	bool unreachable;
};

/* What is left to ask for, a chunk at a time. No reader, no drawing: the broker's entropy is not
 * spent on an empty room. */
static size_t want(void *userdata, struct eb_client *c, uint64_t in_flight)
{
	struct sink_file *f = userdata;
	uint64_t left = arg_bytes - f->written;

	(void)c;
	if (left <= in_flight)
		return 0;
	if (arg_fifo && f->fd < 0 && fifo_open(arg_fifo, &f->fd) < 0)
		return 0; /* logged; the run ends, and a FIFO's always fails */
	return (size_t)MIN(left - in_flight, (uint64_t)f->chunk);
}

static int take(void *userdata, struct eb_client *c, const uint8_t *buf, size_t len, uint32_t bits)
{
	struct sink_file *f = userdata;
	int r;

	if (arg_mode == EB_GET_FULL && bits < len * 8) {
		log_error("Broker %s sent %zu bytes carrying only %u bits; refusing to write them",
		          eb_client_broker(c), len, bits);
		return -EBADMSG;
	}
	r = arg_fifo ? fifo_write(&f->fd, buf, len) : eb_write_all(f->fd, buf, len);
	if (r < 0 && !arg_fifo)
		log_error_errno(r, "Failed to write %s: %m",
		                arg_output ? arg_output : "standard output");
	if (r < 0)
		return r;
	f->written += len;
	return f->written >= arg_bytes ? EB_SINK_DONE : 0;
}

static void on_event(void *userdata, struct eb_client *c, enum eb_sink_event e, int r, unsigned ms)
{
	struct sink_file *f = userdata;

	if (e == EB_SINK_UNREACHABLE)
		f->unreachable = true;
	eb_sink_log_event(c, e, r, ms);
}

static const struct eb_sink_ops sink_ops = {.want = want, .take = take, .event = on_event};

/* Opens where the bytes go: the file, standard output, or (later, when a reader comes) the
 * FIFO. The exit code on failure, or EB_CLI_CONTINUE. */
static int open_output(struct sink_file *f, struct eb_sink_params *p)
{
	if (arg_fifo) {
		if (fifo_prepare(arg_fifo) < 0)
			return 2;
		/* A reader that leaves is EPIPE, not a fatal signal. */
		signal(SIGPIPE, SIG_IGN);
		arg_bytes = UINT64_MAX;
		p->window = 1;
		f->chunk = FIFO_CHUNK;
		f->fd = -EBADF;
		log_info("Feeding FIFO %s", arg_fifo);
	}
	if (arg_output) {
		f->fd = open(arg_output, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, 0600);
		if (f->fd < 0) {
			log_error_errno(errno, "Failed to open %s: %m", arg_output);
			return 1;
		}
	}
	return EB_CLI_CONTINUE;
}

int main(int argc, char *argv[])
{
	struct eb_client_options o = {.roles = EB_ROLE_SINK, .kind = "file"};
	_cleanup_(eb_client_freep) struct eb_client *client = NULL;
	struct eb_sink_params p = {.mode = EB_GET_FULL, .window = WINDOW};
	struct sink_file f = {.fd = STDOUT_FILENO, .chunk = CHUNK};
	int r;

	log_setup(argv[0]);
	r = parse_args(argc, argv, &o);
	if (r != EB_CLI_CONTINUE)
		return r;
	if (eb_cli_client_new(&o, &client) < 0)
		return 2;
	eb_cli_client_watch(client);
	p.mode = arg_mode;
	/* --bytes N is one draw: the broker ends the session after its last answer. */
	p.oneshot = !arg_fifo;
	if (arg_timeout_s > 0) {
		p.deadline_ms = eb_now_ms() + arg_timeout_s * 1000;
		/* Every wait of the client ends there too, whatever the broker sends. */
		eb_client_set_deadline(client, p.deadline_ms);
	}
	r = open_output(&f, &p);
	if (r != EB_CLI_CONTINUE)
		return r;

	r = eb_sink_run(client, &p, &sink_ops, &f);
	if (r == -ETIMEDOUT && !f.unreachable)
		log_error("Timed out after writing %" PRIu64 " of %llu bytes", f.written,
		          arg_bytes);
	if (arg_fifo) {
		safe_close(f.fd);
		return 1;
	}
	if (f.fd != STDOUT_FILENO && close(f.fd) < 0 && r >= 0)
		r = log_error_errno(errno, "Failed to close %s: %m", arg_output);
	if (r < 0 || f.written < arg_bytes)
		return 1;
	log_debug("Wrote %" PRIu64 " bytes", f.written);
	return 0;
}
