/* SPDX-License-Identifier: MIT */
/* eb-proxy-knuth: shuffles one upstream byte stream by another (Knuth's Algorithm M) or by itself
 * (Algorithm B) and donates the result.
 *
 * A shuffle reorders X's bytes; it makes no entropy. So the credit is X's, and only for X bytes
 * that actually came out: each output byte is one X byte, health-tested (as an 8-bit sample, at
 * the H claimed for X) after the shuffle, and credited at that H if admitted. Y only chooses the
 * order, and nothing is credited for it: with a constant X the output is constant whatever Y is.
 * What the shuffle buys is decorrelation: serial structure in X (a slow drift, a short period) is
 * spread over a table of up to 256 entries before the broker's conditioner sees it. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "io.h"
#include "log.h"
#include "proto.h"
#include "shuffle.h"
#include "source.h"

/* Its inputs are files, FIFOs or pipes: a low-trust source, as eb-source-file is. */
#define LOW_TRUST_CAP_MBITS 1000u

struct input {
	int fd;
	const char *path;
};

struct proxy {
	struct eb_shuffle shuffle;
	struct input x, y;    /* y unused for Algorithm B */
	uint8_t *xbuf, *ybuf; /* EB_GATE_BLOCK_MAX each */
};

static void help(void)
{
	printf("Usage: eb-proxy-knuth [OPTIONS] --algorithm m X Y\n"
	       "       eb-proxy-knuth [OPTIONS] --algorithm b X\n\n"
	       "Shuffles the bytes of X (a file, a FIFO or - for standard input) with Knuth's\n"
	       "Algorithm M, where the bytes of Y choose the order, or Algorithm B, where X's own\n"
	       "output does, and donates the result. Only X's claimed entropy is credited, per\n"
	       "X byte that came out and passed the health tests.\n\n"
	       "  -a, --algorithm m|b         Knuth's Algorithm M (two inputs) or B (one)\n"
	       "      --table-size K          shuffle table entries, 1-256 (default 256)\n"
	       "      --credit-per-byte H     min-entropy of X per byte, 0-8, up to three\n"
	       "                              decimals (default 0: mixed in, not credited)\n"
	       "      --min-entropy H         the same\n"
	       "      --max-credit-per-byte BITS\n"
	       "                              cap on the credit per byte (default 1: a low-trust\n"
	       "                              source)\n" EB_CLI_SOURCE_HELP EB_CLI_CLIENT_HELP
	       "\nSee eb-proxy-knuth(1).\n");
}

/* Reads until n bytes or the end of the input; the count, or a negative errno (logged). */
static ssize_t read_full(const struct input *in, uint8_t *buf, size_t n)
{
	ssize_t got = eb_read_all(in->fd, buf, n);

	if (got < 0)
		return log_error_errno((int)got, "Failed to read %s: %m", in->path);
	return got;
}

/* The runtime's raw samples are the shuffled bytes: X's bytes in their new order. 0 when an
 * input ends. */
static ssize_t sample(void *userdata, uint8_t *buf, size_t n)
{
	struct proxy *px = userdata;
	ssize_t got;

	n = MIN(n, (size_t)EB_GATE_BLOCK_MAX);
	/* Knuth starts with the table full of X's first values (and, for B, Y = the next). */
	while (eb_shuffle_fill_left(&px->shuffle) > 0) {
		got = read_full(&px->x, px->xbuf, eb_shuffle_fill_left(&px->shuffle));
		if (got <= 0)
			return got;
		for (ssize_t i = 0; i < got; i++)
			eb_shuffle_fill(&px->shuffle, px->xbuf[i]);
	}

	got = read_full(&px->x, px->xbuf, n);
	if (got <= 0)
		return got;
	switch (px->shuffle.algorithm) {
	case EB_SHUFFLE_M: {
		ssize_t goty = read_full(&px->y, px->ybuf, (size_t)got);

		if (goty <= 0)
			return goty;
		/* X bytes without a Y byte to place them are dropped with the end of Y. */
		for (ssize_t i = 0; i < goty; i++)
			buf[i] = eb_shuffle_next_m(&px->shuffle, px->xbuf[i], px->ybuf[i]);
		explicit_bzero(px->ybuf, (size_t)goty);
		got = goty;
		break;
	}
	case EB_SHUFFLE_B:
		for (ssize_t i = 0; i < got; i++)
			buf[i] = eb_shuffle_next_b(&px->shuffle, px->xbuf[i]);
		break;
	case _EB_SHUFFLE_ALGORITHM_MAX:
	case _EB_SHUFFLE_ALGORITHM_INVALID:
		return -EINVAL;
	}
	explicit_bzero(px->xbuf, n);
	return got;
}

static int open_input(struct input *in, const char *path)
{
	if (strcmp(path, "-") == 0) {
		in->fd = STDIN_FILENO;
		in->path = "standard input";
		return 0;
	}
	in->path = path;
	in->fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (in->fd < 0)
		return log_error_errno(errno, "Failed to open %s: %m", path);
	return 0;
}

static void close_input(struct input *in)
{
	if (in->fd > STDIN_FILENO)
		close(in->fd);
	in->fd = -EBADF;
}

/* The buffers and the inputs at x and y (NULL for Algorithm B): 0, or a negative errno (logged).
 * proxy_close() undoes it either way. */
static int proxy_open(struct proxy *px, const char *x, const char *y)
{
	int r;

	px->xbuf = malloc(EB_GATE_BLOCK_MAX);
	px->ybuf = malloc(EB_GATE_BLOCK_MAX);
	if (!px->xbuf || !px->ybuf)
		return log_oom();
	r = open_input(&px->x, x);
	if (r >= 0 && y)
		r = open_input(&px->y, y);
	return r;
}

static void proxy_close(struct proxy *px)
{
	eb_shuffle_wipe(&px->shuffle);
	close_input(&px->x);
	close_input(&px->y);
	free(px->xbuf);
	free(px->ybuf);
	px->xbuf = px->ybuf = NULL;
}

enum { ARG_TABLE = EB_CLI_ARG_FIRST_PRIVATE };

/* What the command line says beyond the shared options. */
struct args {
	enum eb_shuffle_algorithm algorithm;
	unsigned table_size;
	const char *x, *y;          /* the inputs' paths; y NULL for Algorithm B */
	char kind[EB_KIND_MAX + 1]; /* for HELLO */
	char name[256];             /* for the log */
};

static int parse_option(int c, const char *arg, void *userdata)
{
	struct args *a = userdata;

	switch (c) {
	case 'a':
		a->algorithm = eb_shuffle_algorithm_from_string(arg);
		if (a->algorithm < 0) {
			log_error("Invalid --algorithm \"%s\": expected m or b", arg);
			return -2;
		}
		return 0;
	case ARG_TABLE:
		return eb_cli_option_uint("table-size", arg, EB_SHUFFLE_TABLE_MAX, NULL,
		                          &a->table_size);
	default:
		return -2;
	}
}

static const struct option options[] = {
    EB_CLI_CLIENT_OPTIONS,
    EB_CLI_SOURCE_OPTIONS,
    {"algorithm", required_argument, NULL, 'a'},
    {"table-size", required_argument, NULL, ARG_TABLE},
    EB_CLI_CREDIT_OPTIONS,
    EB_CLI_CREDIT_CAP_OPTION,
    {},
};

static const struct eb_cli_program program = {
    .name = "eb-proxy-knuth",
    .help = help,
    .shortopts = EB_CLI_CLIENT_SHORTOPTS "a:",
    .options = options,
    .option = parse_option,
};

/* The command line, then what its options and inputs say together, and the names the source
 * goes by (a's kind and name, which o and p point to): the exit code, or EB_CLI_CONTINUE. */
static int parse_args(int argc, char *argv[], struct eb_client_options *o,
                      struct eb_source_params *p, struct args *a)
{
	unsigned n_inputs;
	int r;

	r = eb_cli_source_parse(argc, argv, &program, o, p, a);
	if (r != EB_CLI_CONTINUE)
		return r;
	if (a->algorithm < 0) {
		log_error("No --algorithm: m (X shuffled by Y) or b (X shuffled by itself)");
		return 2;
	}
	n_inputs = a->algorithm == EB_SHUFFLE_M ? 2 : 1;
	if ((unsigned)(argc - optind) != n_inputs) {
		log_error("Algorithm %s takes %s; see --help",
		          eb_shuffle_algorithm_to_string(a->algorithm),
		          n_inputs == 2 ? "two inputs, X and Y" : "one input, X");
		return 2;
	}
	a->x = argv[optind];
	a->y = n_inputs == 2 ? argv[optind + 1] : NULL;
	if (a->y && strcmp(a->x, "-") == 0 && strcmp(a->y, "-") == 0) {
		log_error("X and Y cannot both be standard input");
		return 2;
	}

	if (a->y)
		snprintf(a->name, sizeof(a->name), "knuth-m %s by %s", a->x, a->y);
	else
		snprintf(a->name, sizeof(a->name), "knuth-b %s", a->x);
	/* HELLO says what kind of source this is: a proxy of files is low trust. The paths are
	 * in the log, not in the few bytes HELLO has for this. */
	snprintf(a->kind, sizeof(a->kind), "knuth-%s proxy (low trust)",
	         eb_shuffle_algorithm_to_string(a->algorithm));
	o->kind = a->kind;
	p->name = a->name;
	return EB_CLI_CONTINUE;
}

int main(int argc, char *argv[])
{
	struct eb_client_options o = {.roles = EB_ROLE_SOURCE};
	_cleanup_(eb_cli_source_params_done) struct eb_source_params p = {
	    .gate = {.bits = 8, .cap_mbits_per_byte = LOW_TRUST_CAP_MBITS},
	    .dump_fd = -EBADF,
	    .quarantine_ms = 100,
	};
	struct args a = {.algorithm = _EB_SHUFFLE_ALGORITHM_INVALID,
	                 .table_size = EB_SHUFFLE_TABLE_MAX};
	_cleanup_(eb_client_freep) struct eb_client *client = NULL;
	struct proxy px = {.x.fd = -EBADF, .y.fd = -EBADF};
	struct eb_source_stats st;
	int r;

	log_setup(argv[0]);
	r = parse_args(argc, argv, &o, &p, &a);
	if (r != EB_CLI_CONTINUE)
		return r;
	r = eb_shuffle_init(&px.shuffle, a.algorithm, a.table_size);
	if (r < 0)
		return log_error_errno(r, "Failed to set up the shuffle: %m"), 2;
	if (eb_cli_source_client_new(&o, &p, "byte of X", &client) < 0)
		return 2;
	r = proxy_open(&px, a.x, a.y);
	if (r < 0) {
		proxy_close(&px);
		return 1;
	}
	r = eb_source_run(client, &p, sample, &px, &st);
	proxy_close(&px);
	return eb_cli_source_report_samples(r, &st, "Shuffled", "bytes of X");
}
