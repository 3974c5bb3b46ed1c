/* SPDX-License-Identifier: MIT */
/* min-entropy: the min-entropy per sample of a raw capture (one sample per byte, the --dump-raw
 * format) by all ten SP 800-90B non-IID estimators, the library eb-assess runs, and nothing
 * else: the figure a source's claim is checked against, one line of JSON for scripts. A claim
 * or a credit is never decided on fewer estimators, which can only give a higher figure (a
 * period longer than the lag predictor's 128 samples passes under MCV, collision, Markov and lag
 * at nearly full entropy; MultiMMC sees it).
 *
 * Usage: min-entropy [--bits N] [--json] FILE */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "assess-noniid.h"

static int usage(void)
{
	fprintf(stderr, "Usage: min-entropy [--bits N] [--json] FILE\n");
	return 2;
}

/* Rounded down, as eb-assess reports them: a printed figure never credits more than computed. */
static double down(double h)
{
	return isnan(h) ? h : floor(h * 1e6) / 1e6;
}

/* The estimator whose figure is the final one, or NULL when the samples take one value. */
static const char *least(const struct assess_noniid *e, const char **ret_data)
{
	const char *name = NULL;
	double best = INFINITY;

	for (unsigned i = 0; i < _ASSESS_ESTIMATOR_MAX; i++) {
		if (!isnan(e->literal[i]) && e->literal[i] < best) {
			best = e->literal[i];
			name = assess_estimator_to_key(i);
			*ret_data = "samples";
		}
		if (e->bitstring > 0 && !isnan(e->bitstring_h[i]) &&
		    e->bits * e->bitstring_h[i] < best) {
			best = e->bits * e->bitstring_h[i];
			name = assess_estimator_to_key(i);
			*ret_data = "bitstring";
		}
	}
	return name;
}

static void json_set(const char *key, const double h[_ASSESS_ESTIMATOR_MAX])
{
	printf(", \"%s\": {", key);
	for (unsigned i = 0; i < _ASSESS_ESTIMATOR_MAX; i++) {
		printf("%s\"%s\": ", i > 0 ? ", " : "", assess_estimator_to_key(i));
		if (isnan(h[i]))
			printf("null");
		else
			printf("%.6f", down(h[i]));
	}
	putchar('}');
}

static void print(const char *path, const struct assess_noniid *e, int json)
{
	const char *data = "samples", *name = least(e, &data);

	if (json) {
		printf("{\"samples\": %zu, \"bits\": %u", e->samples, e->bits);
		json_set("literal", e->literal);
		json_set("bitstring", e->bitstring_h);
		printf(", \"h_original\": %.6f, \"h_bitstring\": %.6f, \"min_entropy\": %.6f",
		       down(e->h_original), down(e->h_bitstring), down(e->min_entropy));
		if (name)
			printf(", \"least\": \"%s\", \"least_on\": \"%s\"", name, data);
		printf("}\n");
		return;
	}
	printf("%s: %zu samples of %u bits\n", path, e->samples, e->bits);
	printf("  %-18s %12s %12s\n", "estimator", "bits/sample", "bits/bit");
	for (unsigned i = 0; i < _ASSESS_ESTIMATOR_MAX; i++) {
		printf("  %-18s", assess_estimator_to_string(i));
		if (isnan(e->literal[i]))
			printf(" %12s", "-");
		else
			printf(" %12.6f", down(e->literal[i]));
		if (isnan(e->bitstring_h[i]))
			printf(" %12s\n", "-");
		else
			printf(" %12.6f\n", down(e->bitstring_h[i]));
	}
	printf("  min(H_original %.6f, %u x H_bitstring %.6f) = %.6f bits/sample",
	       down(e->h_original), e->bits, down(e->h_bitstring), down(e->min_entropy));
	if (name)
		printf(" (%s on the %s)", name, data);
	putchar('\n');
}

int main(int argc, char *argv[])
{
	static const struct option options[] = {
	    {"bits", required_argument, NULL, 'b'},
	    {"json", no_argument, NULL, 'j'},
	    {"help", no_argument, NULL, 'h'},
	    {},
	};
	struct assess_noniid e;
	unsigned bits = 0, seen_bits;
	int json = 0, c, r;
	uint8_t *s;
	size_t n = 0;
	FILE *f;

	while ((c = getopt_long(argc, argv, "b:jh", options, NULL)) >= 0) {
		char *end;
		unsigned long v;

		switch (c) {
		case 'b':
			errno = 0;
			v = strtoul(optarg, &end, 10);
			if (errno != 0 || end == optarg || *end != '\0' || v < 1 || v > 8)
				return usage();
			bits = (unsigned)v;
			break;
		case 'j':
			json = 1;
			break;
		case 'h':
			usage();
			return 0;
		default:
			return usage();
		}
	}
	if (optind + 1 != argc)
		return usage();
	f = fopen(argv[optind], "re");
	if (!f) {
		fprintf(stderr, "min-entropy: %s: %s\n", argv[optind], strerror(errno));
		return 1;
	}
	s = malloc(ASSESS_SAMPLES_MAX);
	if (!s) {
		fclose(f);
		return 1;
	}
	n = fread(s, 1, ASSESS_SAMPLES_MAX, f);
	fclose(f);
	if (n < ASSESS_SAMPLES_MIN) {
		fprintf(stderr, "min-entropy: %s: %zu samples; need at least %u\n", argv[optind], n,
		        ASSESS_SAMPLES_MIN);
		free(s);
		return 1;
	}
	seen_bits = assess_sample_bits(s, n);
	if (bits == 0)
		bits = seen_bits;
	else if (seen_bits > bits) {
		fprintf(stderr, "min-entropy: %s: samples are wider than %u bits\n", argv[optind],
		        bits);
		free(s);
		return 1;
	}
	r = assess_noniid_run(s, n, bits, &e);
	free(s);
	/* One value only: no entropy at all, which is the answer, not a failure. */
	if (r == -EDOM) {
		e.h_original = e.h_bitstring = e.min_entropy = 0;
		r = 0;
	}
	if (r < 0) {
		fprintf(stderr, "min-entropy: %s: %s\n", argv[optind], strerror(-r));
		return 1;
	}
	print(argv[optind], &e, json);
	return 0;
}
