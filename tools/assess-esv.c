/* SPDX-License-Identifier: MIT */
/* eb-assess esv: runs a source program fresh for a capture of raw samples and for each restart,
 * assesses them as SP 800-90B asks, and writes the folder an Entropy Source Validation takes. */
#include "assess-esv.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "io.h"
#include "log.h"
#include "macro.h"

/* The restart file's samples are taken one run at a time into this file of the folder, and each
 * run's log into the next; both removed at the end. */
#define RESTART_TMP     ".restart.tmp"
#define RESTART_LOG_TMP ".restart-log.tmp"
#define VERSION_TMP     ".version.tmp"

static const char *arg_output;
static double arg_claim;
static unsigned long long arg_samples = ASSESS_ESV_SAMPLES;
static unsigned arg_restarts = ASSESS_RESTARTS, arg_length = ASSESS_RESTART_LENGTH;

static void help(void)
{
	printf("Usage: eb-assess esv [OPTIONS] -o DIR PROGRAM [ARGUMENTS...]\n\n"
	       "Takes the evidence of NIST's Entropy Source Validation from a source program:\n"
	       "its raw samples through its own --dump-raw, and a restart matrix from a fresh\n"
	       "run of it for each restart; runs the SP 800-90B estimators and restart tests,\n"
	       "and writes DIR: raw.bin, restart.bin, capture.log, results.json, summary.md,\n"
	       "SHA256SUMS. Exits 3 when the source's stated H is above what the data support\n"
	       "or a restart test fails.\n\n"
	       "  -o, --output DIR      the folder to write (created; must not exist)\n"
	       "      --claim H         the stated H per sample (default: the claim the source\n"
	       "                        states at start)\n"
	       "      --samples N       raw samples (default and ESV: 1000000)\n"
	       "      --restarts N      restarts (default and ESV: 1000)\n"
	       "      --samples-per-restart N\n"
	       "                        samples taken after each restart (default and ESV: 1000)\n"
	       "  -h, --help            show this help\n"
	       "      --version         show the version\n"
	       "\nSee eb-assess(1), section ESV.\n");
}

enum { ARG_CLAIM = EB_CLI_ARG_FIRST_PRIVATE, ARG_SAMPLES, ARG_RESTARTS, ARG_LENGTH };

static int option(int c, const char *arg, void *userdata)
{
	unsigned long long v;
	char *end;

	(void)userdata;
	switch (c) {
	case 'o':
		arg_output = arg;
		return 0;
	case ARG_CLAIM:
		errno = 0;
		arg_claim = strtod(arg, &end);
		if (errno != 0 || end == arg || *end != '\0' || !(arg_claim > 0) || arg_claim > 8) {
			log_error(
			    "Invalid --claim \"%s\": expected bits per sample, more than 0 and "
			    "at most 8.",
			    arg);
			return -2;
		}
		return 0;
	case ARG_SAMPLES:
		if (eb_cli_parse_u64(arg, ASSESS_SAMPLES_MIN, ASSESS_SAMPLES_MAX, &v) < 0) {
			log_error("Invalid --samples \"%s\": expected %u-%u.", arg,
			          ASSESS_SAMPLES_MIN, ASSESS_SAMPLES_MAX);
			return -2;
		}
		arg_samples = v;
		return 0;
	case ARG_RESTARTS:
		/* 2 at least, for columns; 10,000 at most, 10 times the spec's. */
		if (eb_cli_parse_u64(arg, 2, 10000, &v) < 0) {
			log_error("Invalid --restarts \"%s\": expected 2-10000.", arg);
			return -2;
		}
		arg_restarts = (unsigned)v;
		return 0;
	case ARG_LENGTH:
		if (eb_cli_parse_u64(arg, 2, 10000, &v) < 0) {
			log_error("Invalid --samples-per-restart \"%s\": expected 2-10000.", arg);
			return -2;
		}
		arg_length = (unsigned)v;
		return 0;
	default:
		return -2;
	}
}

static const struct option options[] = {
    {"output", required_argument, NULL, 'o'},
    {"claim", required_argument, NULL, ARG_CLAIM},
    {"samples", required_argument, NULL, ARG_SAMPLES},
    {"restarts", required_argument, NULL, ARG_RESTARTS},
    {"samples-per-restart", required_argument, NULL, ARG_LENGTH},
    EB_CLI_HELP_OPTIONS,
    {},
};

/* "+": options end at PROGRAM, whose own options follow it. */
static const struct eb_cli_program program = {
    .name = "eb-assess esv",
    .help = help,
    .shortopts = "+o:h",
    .options = options,
    .option = option,
};

static double now_s(void)
{
	struct timespec ts;

	(void)clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void utc_now(char *buf, size_t size)
{
	time_t t = time(NULL);
	struct tm tm;

	if (!gmtime_r(&t, &tm) || strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
		snprintf(buf, size, "unknown");
}

int assess_esv_create(int dir_fd, const char *name)
{
	int fd = openat(dir_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);

	return fd < 0 ? -errno : fd;
}

int assess_esv_fcreate(int dir_fd, const char *name, FILE **ret)
{
	int fd = assess_esv_create(dir_fd, name), r;

	if (fd < 0)
		return fd;
	*ret = fdopen(fd, "w");
	if (!*ret) {
		r = -errno;
		safe_close(fd);
		return r;
	}
	return 0;
}

/* Writes the n bytes of buf to name in dir_fd, mode 0644, a new file. */
static int write_file(int dir_fd, const char *name, const void *buf, size_t n)
{
	_cleanup_close_ int fd = -EBADF;
	int r;

	fd = assess_esv_create(dir_fd, name);
	if (fd < 0)
		return fd;
	r = eb_write_all(fd, buf, n);
	if (r < 0)
		return r;
	return fsync(fd) < 0 ? -errno : 0;
}

/* Reads exactly n bytes of path into buf. */
static int read_exactly(const char *path, uint8_t *buf, size_t n)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	uint8_t extra;
	ssize_t k;

	if (fd < 0)
		return -errno;
	k = eb_read_all(fd, buf, n);
	if (k < 0)
		return (int)k;
	if ((size_t)k != n || eb_read_all(fd, &extra, 1) != 0)
		return -EBADMSG;
	return 0;
}

/* One run of the source for n samples into path, its log into log_path; logs what went wrong,
 * naming the run. */
static int capture(const struct assess_esv *e, const char *path, uint64_t n, const char *log_path,
                   const char *what)
{
	struct assess_capture_run run = {};
	_cleanup_free_ char *log = NULL;
	int r;

	r = assess_capture_run(e->cmd, path, n, log_path, &run);
	if (r < 0)
		return log_error_errno(r, "Failed to run %s for %s: %m", e->cmd[0], what);
	if (run.status != 0 || run.size != n) {
		(void)assess_capture_read_log(log_path, &log);
		log_error("%s for %s exited with status %d after writing %zu of %" PRIu64
		          " samples; its log:\n%s",
		          e->cmd[0], what, run.status, run.size, n, log ? log : "(unreadable)");
		return -EBADMSG;
	}
	return 0;
}

/* The raw samples, and the claim and width the source states at start. */
static int capture_raw(struct assess_esv *e, const char *dir, uint8_t **ret)
{
	_cleanup_free_ char *path = NULL, *log_path = NULL, *log = NULL;
	_cleanup_free_ uint8_t *s = NULL;
	double t = now_s();
	int r;

	if (asprintf(&path, "%s/%s", dir, ASSESS_ESV_RAW) < 0 ||
	    asprintf(&log_path, "%s/%s", dir, ASSESS_ESV_LOG) < 0)
		return log_oom();
	r = capture(e, path, e->samples, log_path, "the raw samples");
	if (r < 0)
		return r;
	e->raw_seconds = now_s() - t;
	r = assess_capture_read_log(log_path, &log);
	if (r < 0)
		return log_error_errno(r, "Failed to read %s: %m", log_path);
	r = assess_capture_claim_parse(log, &e->claim);
	if (r < 0 && !e->claim_given)
		return log_error_errno(
		    r,
		    "%s stated no claim at start (no line \"Sampling NAME: B-bit "
		    "samples, H = X bits each\" in %s/%s); give --claim H",
		    e->cmd[0], dir, ASSESS_ESV_LOG);
	if (r < 0)
		e->claim = (struct assess_capture_claim){};
	if (!e->claim_given)
		e->stated_h = e->claim.h_mbits / 1000.0;
	s = malloc(e->samples);
	if (!s)
		return log_oom();
	r = read_exactly(path, s, e->samples);
	if (r < 0)
		return log_error_errno(r, "Failed to read back %s: %m", path);
	*ret = TAKE_PTR(s);
	return 0;
}

/* The restart matrix: a fresh run of the source for each row. */
static int capture_restarts(struct assess_esv *e, const char *dir, int dir_fd, uint8_t **ret)
{
	size_t n = (size_t)e->restarts * e->length;
	_cleanup_free_ uint8_t *m = malloc(n);
	_cleanup_free_ char *path = NULL, *log_path = NULL;
	double t = now_s();
	int r;

	if (!m || asprintf(&path, "%s/%s", dir, RESTART_TMP) < 0 ||
	    asprintf(&log_path, "%s/%s", dir, RESTART_LOG_TMP) < 0)
		return log_oom();
	for (unsigned i = 0; i < e->restarts; i++) {
		char what[32];

		snprintf(what, sizeof(what), "restart %u", i + 1);
		r = capture(e, path, e->length, log_path, what);
		if (r >= 0) {
			r = read_exactly(path, m + (size_t)i * e->length, e->length);
			if (r < 0)
				log_error_errno(r, "Failed to read back %s: %m", path);
		}
		if (r < 0) {
			(void)unlinkat(dir_fd, RESTART_TMP, 0);
			(void)unlinkat(dir_fd, RESTART_LOG_TMP, 0);
			return r;
		}
		if ((i + 1) % 100 == 0)
			log_debug("%u of %u restarts taken", i + 1, e->restarts);
	}
	(void)unlinkat(dir_fd, RESTART_TMP, 0);
	(void)unlinkat(dir_fd, RESTART_LOG_TMP, 0);
	e->restart_seconds = now_s() - t;
	r = write_file(dir_fd, ASSESS_ESV_RESTART, m, n);
	if (r < 0)
		return log_error_errno(r, "Failed to write %s/%s: %m", dir, ASSESS_ESV_RESTART);
	*ret = TAKE_PTR(m);
	return 0;
}

static double round_down(double h)
{
	return floor(h * 1e6) / 1e6;
}

/* The estimators on the raw samples, the restart tests at H_I, and the criteria. */
static int assess(struct assess_esv *e, const uint8_t *raw, const uint8_t *matrix)
{
	unsigned widest = assess_sample_bits(raw, e->samples);
	int r;

	e->bits = e->claim.bits > 0 ? e->claim.bits : widest;
	if (widest > e->bits) {
		log_error("%s stated %u-bit samples and wrote %u-bit ones", e->cmd[0], e->bits,
		          widest);
		return -EBADMSG;
	}
	if (e->stated_h > e->bits) {
		log_error("--claim %g is more than the %u bits a sample has.", e->stated_h,
		          e->bits);
		return -EINVAL;
	}
	r = assess_noniid_run(raw, e->samples, e->bits, &e->seq);
	if (r == -EDOM) {
		e->seq.h_original = e->seq.h_bitstring = e->seq.min_entropy = 0;
		r = 0;
	}
	if (r < 0)
		return log_error_errno(r, "Failed to estimate the raw samples' min-entropy: %m");
	e->seq.min_entropy = round_down(e->seq.min_entropy);
	/* SP 800-90B 3.1.3: H_I = min(H_original, bits x H_bitstring, H_submitter). A source that
	 * claims nothing submits no H; the data's estimate stands alone then. */
	e->h_i = e->stated_h > 0 ? MIN(e->seq.min_entropy, e->stated_h) : e->seq.min_entropy;
	e->h_estimate = e->seq.min_entropy;
	e->have_restart = e->h_i > 0;
	if (e->have_restart) {
		r = assess_restart_run_matrix(matrix, e->restarts, e->length, e->bits, e->h_i,
		                              &e->rs);
		if (r < 0)
			return log_error_errno(r, "Failed to run the restart tests: %m");
		if (e->rs.sanity)
			e->h_estimate =
			    MIN(e->h_estimate, MIN(e->rs.rows.min_entropy, e->rs.cols.min_entropy));
	}
	e->h_estimate = round_down(e->h_estimate);
	/* The claim is in millibits, the estimate rounded down to a millionth: no slack needed. */
	e->pass[ASSESS_ESV_CLAIM] = e->stated_h <= e->h_estimate;
	e->pass[ASSESS_ESV_RESTART_SANITY] = e->have_restart && e->rs.sanity;
	e->pass[ASSESS_ESV_RESTART_VALIDATION] = e->have_restart && e->rs.validated;
	return 0;
}

static void origin(struct assess_esv *e, const char *dir)
{
	_cleanup_free_ char *tmp = NULL;
	struct utsname u;

	if (uname(&u) == 0) {
		snprintf(e->host, sizeof(e->host), "%s", u.nodename);
		snprintf(e->kernel, sizeof(e->kernel), "%s %s", u.sysname, u.release);
		snprintf(e->machine, sizeof(e->machine), "%s", u.machine);
	}
	if (asprintf(&tmp, "%s/%s", dir, VERSION_TMP) < 0 ||
	    assess_capture_version(e->cmd[0], tmp, e->source_version, sizeof(e->source_version)) <
	        0)
		snprintf(e->source_version, sizeof(e->source_version), "unknown");
}

/* The report's files, then what it says. An exit code. */
static int report(const struct assess_esv *e, int dir_fd)
{
	static const char *const files[] = {ASSESS_ESV_RAW, ASSESS_ESV_RESTART, ASSESS_ESV_LOG,
	                                    ASSESS_ESV_JSON, ASSESS_ESV_SUMMARY};
	bool ok = true;
	int r;

	r = assess_esv_write_json(e, dir_fd);
	if (r < 0)
		return log_error_errno(r, "Failed to write %s/%s: %m", arg_output, ASSESS_ESV_JSON),
		       1;
	r = assess_esv_write_summary(e, dir_fd);
	if (r < 0)
		return log_error_errno(r, "Failed to write %s/%s: %m", arg_output,
		                       ASSESS_ESV_SUMMARY),
		       1;
	r = assess_esv_write_sums(dir_fd, files, ELEMENTSOF(files));
	if (r < 0)
		return log_error_errno(r, "Failed to write %s/%s: %m", arg_output, ASSESS_ESV_SUMS),
		       1;
	for (unsigned c = 0; c < _ASSESS_ESV_CRITERION_MAX; c++) {
		char text[512];

		assess_esv_criterion_text(e, c, text, sizeof(text));
		if (!e->pass[c])
			log_error("ESV criterion %s failed: %s", assess_esv_criterion_to_string(c),
			          text);
		ok = ok && e->pass[c];
	}
	printf("%s: H estimate %.6f bits per sample (stated %.3f), %u restarts x %u samples%s: "
	       "%s\n",
	       arg_output, e->h_estimate, e->stated_h, e->restarts, e->length,
	       assess_esv_sized(e) ? "" : " (not ESV-sized)", ok ? "pass" : "fail");
	return ok ? 0 : 3;
}

/* The command line: an exit code, or EB_CLI_CONTINUE with optind at PROGRAM. */
static int parse_args(int argc, char *argv[])
{
	int r;

	r = eb_cli_parse(argc - 1, argv + 1, &program, NULL, NULL);
	if (r != EB_CLI_CONTINUE)
		return r;
	if (!arg_output) {
		log_error("Missing -o DIR, the folder to write; see eb-assess esv --help.");
		return 2;
	}
	if (optind >= argc - 1) {
		log_error("Missing PROGRAM, the source to assess; see eb-assess esv --help.");
		return 2;
	}
	return EB_CLI_CONTINUE;
}

int assess_esv_main(int argc, char *argv[])
{
	struct assess_esv e = {.argv = argv, .argc = argc};
	_cleanup_free_ uint8_t *raw = NULL, *matrix = NULL;
	_cleanup_close_ int dir_fd = -EBADF;
	int r;

	r = parse_args(argc, argv);
	if (r != EB_CLI_CONTINUE)
		return r;
	e.cmd = argv + 1 + optind;
	e.samples = arg_samples;
	e.restarts = arg_restarts;
	e.length = arg_length;
	e.claim_given = arg_claim > 0;
	e.stated_h = arg_claim;
	/* A folder of its own: evidence is never mixed with an older run's. */
	if (mkdir(arg_output, 0755) < 0)
		return log_error_errno(errno, "Failed to create '%s' (it must not exist yet): %m",
		                       arg_output),
		       1;
	dir_fd = open(arg_output, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (dir_fd < 0)
		return log_error_errno(errno, "Failed to open '%s': %m", arg_output), 1;
	utc_now(e.started, sizeof(e.started));
	origin(&e, arg_output);
	if (capture_raw(&e, arg_output, &raw) < 0 ||
	    capture_restarts(&e, arg_output, dir_fd, &matrix) < 0)
		return 1;
	utc_now(e.finished, sizeof(e.finished));
	if (assess(&e, raw, matrix) < 0)
		return 1;
	return report(&e, dir_fd);
}
