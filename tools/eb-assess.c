/* SPDX-License-Identifier: MIT */
/* eb-assess: what an administrator wants to know about a capture before trusting the device it
 * came from: SP 800-90B min-entropy estimates, ent's statistics, what the health tests would
 * have done, and plots of all three. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "assess-esv.h"
#include "assess-health.h"
#include "assess-iid.h"
#include "assess-noniid.h"
#include "assess-plot.h"
#include "assess-report.h"
#include "assess-stats.h"
#include "cli.h"
#include "log.h"
#include "macro.h"

/* The permutation tests' shuffles are drawn from this seed unless --seed says otherwise, so that
 * two runs on one file give one verdict. */
#define ASSESS_SEED_DEFAULT 90

static unsigned arg_bits;
static double arg_claim;
static const char *arg_plots;
static bool arg_json;
static bool arg_iid;
static double arg_restart;
static uint64_t arg_seed = ASSESS_SEED_DEFAULT;

static void help(void)
{
	printf(
	    "Usage: eb-assess [OPTIONS] FILE\n"
	    "       eb-assess esv [OPTIONS] -o DIR PROGRAM [ARGUMENTS...]\n\n"
	    "Assesses a raw capture (a source's --dump-raw output, one sample per byte) or a\n"
	    "sink's output: SP 800-90B min-entropy estimates, ent-style statistics, and what the\n"
	    "SP 800-90B health tests would have done with it. FILE may be - for stdin.\n\n"
	    "      --bits N          bits per sample, 1-8 (default: the widest sample seen)\n"
	    "      --claim H         run the health tests as for a source claiming H bits per\n"
	    "                        sample (default: the estimate)\n"
	    "  -p, --plots DIR       write histogram.png, pairs.png and health.png into DIR\n"
	    "      --iid             run SP 800-90B's IID tests too (section 5: 10,000\n"
	    "                        permutations, chi-square, LRS)\n"
	    "      --seed N          draw the permutations from seed N (default 90)\n"
	    "      --restart H       FILE is a restart matrix (1,000 restarts x 1,000 samples,\n"
	    "                        row after row): run SP 800-90B's restart tests at H_I = H\n"
	    "      --json            print one JSON object\n"
	    "  -h, --help            show this help\n"
	    "      --version         show the version\n"
	    "\nSee eb-assess(1).\n");
}

enum { ARG_BITS = EB_CLI_ARG_FIRST_PRIVATE, ARG_CLAIM, ARG_JSON, ARG_IID, ARG_SEED, ARG_RESTART };

static int option(int c, const char *arg, void *userdata)
{
	char *end;

	(void)userdata;
	switch (c) {
	case ARG_BITS: {
		unsigned long v;

		errno = 0;
		v = strtoul(arg, &end, 10);
		if (errno != 0 || end == arg || *end != '\0' || v < 1 || v > 8) {
			log_error("Invalid --bits \"%s\": expected 1-8.", arg);
			return -2;
		}
		arg_bits = (unsigned)v;
		return 0;
	}
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
	case 'p':
		arg_plots = arg;
		return 0;
	case ARG_JSON:
		arg_json = true;
		return 0;
	case ARG_IID:
		arg_iid = true;
		return 0;
	case ARG_RESTART:
		errno = 0;
		arg_restart = strtod(arg, &end);
		if (errno != 0 || end == arg || *end != '\0' || !(arg_restart > 0) ||
		    arg_restart > 8) {
			log_error(
			    "Invalid --restart \"%s\": expected the claimed H_I, bits per sample, "
			    "more than 0 and at most 8.",
			    arg);
			return -2;
		}
		return 0;
	case ARG_SEED: {
		unsigned long long v;

		errno = 0;
		v = strtoull(arg, &end, 10);
		if (errno != 0 || end == arg || *end != '\0' || arg[0] == '-') {
			log_error("Invalid --seed \"%s\": expected a number below 2^64.", arg);
			return -2;
		}
		arg_seed = v;
		return 0;
	}
	default:
		return -2;
	}
}

static const struct option options[] = {
    {"bits", required_argument, NULL, ARG_BITS},
    {"claim", required_argument, NULL, ARG_CLAIM},
    {"plots", required_argument, NULL, 'p'},
    {"json", no_argument, NULL, ARG_JSON},
    {"iid", no_argument, NULL, ARG_IID},
    {"seed", required_argument, NULL, ARG_SEED},
    {"restart", required_argument, NULL, ARG_RESTART},
    EB_CLI_HELP_OPTIONS,
    {},
};

static const struct eb_cli_program program = {
    .name = "eb-assess",
    .help = help,
    .shortopts = "p:h",
    .options = options,
    .option = option,
};

/* The command line: the exit code, or EB_CLI_CONTINUE with optind at FILE. */
static int parse_args(int argc, char *argv[])
{
	int r;

	r = eb_cli_parse(argc, argv, &program, NULL, NULL);
	if (r != EB_CLI_CONTINUE)
		return r;
	if (optind >= argc) {
		log_error("Missing FILE; see eb-assess --help.");
		return 2;
	}
	if (argc - optind > 1) {
		log_error("Too many arguments: one FILE only; see eb-assess --help.");
		return 2;
	}
	return EB_CLI_CONTINUE;
}

/* Reads at most ASSESS_SAMPLES_MAX bytes of path ("-": stdin); *ret_more says whether the
 * file went on beyond them. */
static int read_capture(const char *path, uint8_t **ret, size_t *ret_n, bool *ret_more)
{
	_cleanup_fclose_ FILE *f = NULL;
	_cleanup_free_ uint8_t *buf = NULL;
	size_t n = 0, size = 0;
	struct stat st;
	int c;

	if (strcmp(path, "-") == 0)
		f = fdopen(dup(STDIN_FILENO), "re");
	else
		f = fopen(path, "re");
	if (!f)
		return -errno;
	/* A directory opens for reading; only its first read fails, with an error fread() loses. */
	if (fstat(fileno(f), &st) < 0)
		return -errno;
	if (S_ISDIR(st.st_mode))
		return -EISDIR;
	for (;;) {
		size_t k;

		if (n == size) {
			uint8_t *p;

			if (size == ASSESS_SAMPLES_MAX)
				break;
			size = MIN(MAX(size * 2, (size_t)1 << 20), (size_t)ASSESS_SAMPLES_MAX);
			p = realloc(buf, size);
			if (!p)
				return -ENOMEM;
			buf = p;
		}
		k = fread(buf + n, 1, size - n, f);
		n += k;
		if (k == 0) {
			if (ferror(f))
				return -EIO;
			break;
		}
	}
	c = n == ASSESS_SAMPLES_MAX ? fgetc(f) : EOF;
	*ret_more = c != EOF;
	*ret = TAKE_PTR(buf);
	*ret_n = n;
	return 0;
}

static void json_string(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

/* NaN (an undefined statistic) as JSON's null. */
static void json_number(const char *key, double v)
{
	if (isnan(v))
		printf(", \"%s\": null", key);
	else
		printf(", \"%s\": %.6f", key, v);
}

/* One object of the ten estimates, by key; null where one did not run. */
static void json_estimates(const char *key, const double h[_ASSESS_ESTIMATOR_MAX])
{
	printf(", \"%s\": {", key);
	for (unsigned i = 0; i < _ASSESS_ESTIMATOR_MAX; i++) {
		const char *k = assess_estimator_to_key(i);

		if (isnan(h[i]))
			printf("%s\"%s\": null", i ? ", " : "", k);
		else
			printf("%s\"%s\": %.6f", i ? ", " : "", k, h[i]);
	}
	putchar('}');
}

static uint64_t alarms(const struct assess_health *a)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < a->n_spans; i++)
		sum += a->spans[i].alarms;
	return sum;
}

/* What --iid and --restart add to the report. */
struct extras {
	bool have_iid, have_restart;
	struct assess_iid iid;
	struct assess_restart restart;
};

static void print_json(const char *path, const struct assess_noniid *e,
                       const struct assess_stats *st, const struct assess_health *a,
                       const struct extras *x, bool truncated)
{
	printf("{\"file\": ");
	json_string(path);
	printf(", \"bytes\": %zu, \"truncated\": %s, \"bits\": %u", st->bytes,
	       truncated ? "true" : "false", e->bits);
	printf(", \"sp800_90b\": {\"alphabet\": %u, \"bitstring_bits\": %zu", e->alphabet,
	       e->bitstring);
	json_estimates("literal", e->literal);
	json_estimates("bitstring", e->bitstring_h);
	json_number("h_original", e->h_original);
	json_number("h_bitstring", e->h_bitstring);
	json_number("min_entropy", e->min_entropy);
	printf("}, \"ent\": {\"entropy\": %.6f", st->entropy);
	json_number("compression", st->compression);
	json_number("chi_square", st->chi_square);
	json_number("chi_square_p", st->chi_p);
	json_number("mean", st->mean);
	json_number("monte_carlo_pi", st->pi);
	json_number("serial_correlation", st->correlation);
	printf("}, \"health\": {\"claim\": %.6f, \"claim_raised\": %s, \"rct_cutoff\": %u, "
	       "\"apt_cutoff\": %u, \"apt_window\": %u, \"state\": \"%s\", \"episodes\": %" PRIu64
	       ", \"alarms\": %" PRIu64 ", \"credited\": %" PRIu64,
	       a->h, a->h_raised ? "true" : "false", a->health.rct_cutoff, a->health.apt_cutoff,
	       a->health.apt_window, eb_health_state_to_string(a->health.state), a->health.episodes,
	       alarms(a), a->health.credited);
	if (a->health.episodes > 0)
		printf(", \"first_alarm\": {\"test\": \"%s\", \"sample\": %" PRIu64 "}",
		       eb_health_test_to_string(a->first.test), a->first.sample);
	putchar('}');
	if (x->have_iid)
		assess_report_iid_json(&x->iid, arg_seed);
	if (x->have_restart)
		assess_report_restart_json(&x->restart);
	if (arg_plots) {
		printf(", \"plots\": {\"histogram\": [%d, %d], \"pairs\": [%d, %d], \"health\": "
		       "[%d, %d]}",
		       ASSESS_HISTOGRAM_WIDTH, ASSESS_HISTOGRAM_HEIGHT, ASSESS_PAIRS_WIDTH,
		       ASSESS_PAIRS_HEIGHT, ASSESS_HEALTH_WIDTH, ASSESS_HEALTH_HEIGHT);
	}
	printf("}\n");
}

static void print_text(const char *path, const struct assess_noniid *e,
                       const struct assess_stats *st, const struct assess_health *a,
                       const struct extras *x)
{
	struct eb_health_failure fail;

	printf("%s: %zu bytes, samples of %u bits\n\n", path, st->bytes, e->bits);
	printf("SP 800-90B min-entropy estimates (section 6.3, non-IID), %u distinct values:\n",
	       e->alphabet);
	printf("  %-24s %10s %14s\n", "estimator", "samples", "bit string");
	for (unsigned i = 0; i < _ASSESS_ESTIMATOR_MAX; i++) {
		printf("  %-24s", assess_estimator_to_string(i));
		if (isnan(e->literal[i]))
			printf(" %10s", "-");
		else
			printf(" %10.6f", e->literal[i]);
		if (isnan(e->bitstring_h[i]))
			printf(" %14s\n", "-");
		else
			printf(" %14.6f\n", e->bitstring_h[i]);
	}
	if (e->bitstring > 0)
		printf("  min-entropy              %8.4f bits/sample = min(%.4f, %u x %.4f)\n\n",
		       e->min_entropy, e->h_original, e->bits, e->h_bitstring);
	else
		printf("  min-entropy              %8.4f bits/sample = min(%.4f)\n\n",
		       e->min_entropy, e->h_original);
	if (x->have_iid)
		assess_report_iid_text(&x->iid, arg_seed);
	if (x->have_restart)
		assess_report_restart_text(&x->restart);
	printf("Byte statistics (as ent computes them):\n");
	printf("  entropy                  %8.4f bits/byte (an optimal coder saves %.2f %%)\n",
	       st->entropy, st->compression);
	printf("  chi-square               %8.2f for 255 degrees of freedom (exceeded by chance "
	       "%.2f %% of the time)\n",
	       st->chi_square, st->chi_p);
	printf("  arithmetic mean          %8.4f (127.5 = random)\n", st->mean);
	if (isnan(st->pi))
		printf("  Monte Carlo pi           undefined (fewer than 6 bytes)\n");
	else
		printf("  Monte Carlo pi           %8.6f (error %.2f %%)\n", st->pi,
		       100.0 * fabs(st->pi - M_PI) / M_PI);
	if (isnan(st->correlation))
		printf("  serial correlation       undefined (every byte the same)\n\n");
	else
		printf("  serial correlation       %8.6f (0.0 = uncorrelated)\n\n",
		       st->correlation);

	printf("SP 800-90B health tests at H = %.4f bits/sample%s:\n", a->h,
	       a->h_raised ? " (raised: the tests have no cutoffs below it)" : "");
	printf("  cutoffs                  repetition count %u, adaptive proportion %u in %u\n",
	       a->health.rct_cutoff, a->health.apt_cutoff, a->health.apt_window);
	printf("  state at the end         %s, %" PRIu64 " failure episode(s), %" PRIu64
	       " alarm(s)\n",
	       eb_health_state_to_string(a->health.state), a->health.episodes, alarms(a));
	if (a->health.episodes > 0)
		printf("  first alarm              %s at sample %" PRIu64 " (count %u, value %u)\n",
		       eb_health_test_to_string(a->first.test), a->first.sample, a->first.count,
		       a->first.value);
	if (eb_health_get_failure(&a->health, &fail) >= 0 && a->health.episodes > 1)
		printf("  last episode opened      %s at sample %" PRIu64 " (count %u, value %u)\n",
		       eb_health_test_to_string(fail.test), fail.sample, fail.count, fail.value);
	printf("  creditable samples       %" PRIu64 " of %zu\n", a->health.credited, st->bytes);
}

/* Figures are reported to six decimals, rounded down: a report never credits more than the
 * computation gave, not even by the last digit. */
static double round_down(double h)
{
	return isnan(h) ? h : floor(h * 1e6) / 1e6;
}

static void round_down_all(struct assess_noniid *e)
{
	for (unsigned i = 0; i < _ASSESS_ESTIMATOR_MAX; i++) {
		e->literal[i] = round_down(e->literal[i]);
		e->bitstring_h[i] = round_down(e->bitstring_h[i]);
	}
	e->h_original = round_down(e->h_original);
	e->h_bitstring = round_down(e->h_bitstring);
	e->min_entropy = round_down(e->min_entropy);
}

/* The non-IID track, its figures rounded down. */
static int estimate(const char *path, const uint8_t *s, size_t n, unsigned bits,
                    struct assess_noniid *ret)
{
	int r;

	r = assess_noniid_run(s, n, bits, ret);
	/* One value only: no entropy at all, which is the answer, not a failure. */
	if (r == -EDOM) {
		ret->h_original = ret->h_bitstring = ret->min_entropy = 0;
		r = 0;
	}
	if (r < 0)
		return log_error_errno(r, "Failed to estimate the min-entropy of '%s': %m", path);
	round_down_all(ret);
	return 0;
}

static int plot_all(const char *dir, const char *name, const uint8_t *s, size_t n,
                    const struct assess_stats *st, const struct assess_health *a)
{
	static const char *const files[] = {"histogram.png", "pairs.png", "health.png"};
	int r;

	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		return log_error_errno(errno, "Failed to create '%s': %m", dir);
	for (unsigned i = 0; i < ELEMENTSOF(files); i++) {
		_cleanup_free_ char *path = NULL;

		if (asprintf(&path, "%s/%s", dir, files[i]) < 0)
			return log_oom();
		switch (i) {
		case 0:
			r = assess_plot_histogram(st, name, path);
			break;
		case 1:
			r = assess_plot_pairs(s, n, name, path);
			break;
		default:
			r = assess_plot_health(a, name, path);
			break;
		}
		if (r < 0)
			return log_error_errno(r, "Failed to write '%s': %m", path);
		log_debug("Wrote '%s'.", path);
	}
	return 0;
}

/* The IID and restart tests, as the options ask. */
static int run_extras(const char *path, const uint8_t *s, size_t n, unsigned bits,
                      struct extras *ret)
{
	int r;

	if (arg_iid) {
		r = assess_iid_run(s, n, arg_seed, &ret->iid);
		if (r == -EDOM)
			log_warning("'%s' holds one value only: no IID tests.", path);
		else if (r < 0)
			return log_error_errno(r, "Failed to run the IID tests over '%s': %m",
			                       path);
		ret->have_iid = r >= 0;
	}
	if (arg_restart > 0) {
		if (n != (size_t)ASSESS_RESTARTS * ASSESS_RESTART_LENGTH) {
			log_error("'%s' holds %zu samples; a restart matrix has %u x %u.", path, n,
			          ASSESS_RESTARTS, ASSESS_RESTART_LENGTH);
			return -EINVAL;
		}
		if (arg_restart > bits) {
			log_error("--restart %g is more than the %u bits a sample has.",
			          arg_restart, bits);
			return -EINVAL;
		}
		r = assess_restart_run(s, bits, arg_restart, &ret->restart);
		if (r < 0)
			return log_error_errno(r, "Failed to run the restart tests over '%s': %m",
			                       path);
		ret->have_restart = true;
	}
	return 0;
}

/* The samples' width: the widest seen, or --bits. An exit code, or EB_CLI_CONTINUE. */
static int sample_bits(const char *path, const uint8_t *s, size_t n, unsigned *ret)
{
	unsigned bits = assess_sample_bits(s, n);

	if (arg_bits > 0) {
		if (bits > arg_bits) {
			log_error("'%s' has samples wider than --bits %u.", path, arg_bits);
			return 1;
		}
		bits = arg_bits;
	}
	if (arg_claim > bits) {
		log_error("--claim %g is more than the %u bits a sample has.", arg_claim, bits);
		return 2;
	}
	*ret = bits;
	return EB_CLI_CONTINUE;
}

int main(int argc, char *argv[])
{
	_cleanup_free_ uint8_t *s = NULL;
	struct assess_health a = {};
	struct assess_stats st;
	struct assess_noniid e;
	struct extras x = {};
	const char *path, *name;
	unsigned bits;
	size_t n = 0;
	bool more = false;
	int r;

	log_setup(argv[0]);
	/* A mode of its own, with its own options; a capture named esv is ./esv. */
	if (argc > 1 && strcmp(argv[1], "esv") == 0)
		return assess_esv_main(argc, argv);
	r = parse_args(argc, argv);
	if (r != EB_CLI_CONTINUE)
		return r;
	path = argv[optind];
	name = strcmp(path, "-") == 0 ? "stdin"
	       : strrchr(path, '/')   ? strrchr(path, '/') + 1
	                              : path;

	r = read_capture(path, &s, &n, &more);
	if (r < 0) {
		log_error_errno(r, "Failed to read '%s': %m", path);
		return 1;
	}
	if (more)
		log_warning("'%s' is longer than %u bytes; assessing its first %u.", path,
		            ASSESS_SAMPLES_MAX, ASSESS_SAMPLES_MAX);
	if (n < ASSESS_SAMPLES_MIN) {
		log_error("'%s' holds %zu bytes; the estimates need at least %u.", path, n,
		          ASSESS_SAMPLES_MIN);
		return 1;
	}
	r = sample_bits(path, s, n, &bits);
	if (r != EB_CLI_CONTINUE)
		return r;

	r = estimate(path, s, n, bits, &e);
	if (r < 0)
		return 1;
	r = run_extras(path, s, n, bits, &x);
	if (r < 0)
		return 1;
	assess_stats_compute(s, n, &st);
	/* An estimate of 0 still runs the tests, at the least claim that gives them cutoffs. */
	r = assess_health_run(s, n, bits, arg_claim > 0 ? arg_claim : MAX(e.min_entropy, 1e-6),
	                      ASSESS_HEALTH_SPANS, &a);
	if (r < 0) {
		log_error_errno(r, "Failed to run the health tests over '%s': %m", path);
		return 1;
	}

	if (arg_plots) {
		r = plot_all(arg_plots, name, s, n, &st, &a);
		assess_plot_done();
		if (r < 0) {
			assess_health_done(&a);
			return 1;
		}
	}
	if (arg_json)
		print_json(path, &e, &st, &a, &x, more);
	else
		print_text(path, &e, &st, &a, &x);
	assess_health_done(&a);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		log_error("Failed to write the report to stdout.");
		return 1;
	}
	return 0;
}
