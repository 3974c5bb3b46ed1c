/* SPDX-License-Identifier: MIT */
/* min-entropy: a conservative estimate of the min-entropy per sample of a raw capture (one sample
 * per byte, the --dump-raw format), by shared/estimate.c's SP 800-90B estimators; eb-assess
 * prints the same figures with more around them.
 *
 * Usage: min-entropy [--bits N] [--json] FILE */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "estimate.h"

static int usage(void)
{
	fprintf(stderr, "Usage: min-entropy [--bits N] [--json] FILE\n");
	return 2;
}

int main(int argc, char *argv[])
{
	static const struct option options[] = {
	    {"bits", required_argument, NULL, 'b'},
	    {"json", no_argument, NULL, 'j'},
	    {"help", no_argument, NULL, 'h'},
	    {},
	};
	struct eb_estimate e;
	struct {
		const char *name;
		double h;
	} sym[2], bit[4];
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
	s = malloc(EB_ESTIMATE_SAMPLES_MAX);
	if (!s) {
		fclose(f);
		return 1;
	}
	n = fread(s, 1, EB_ESTIMATE_SAMPLES_MAX, f);
	fclose(f);
	if (n < EB_ESTIMATE_SAMPLES_MIN) {
		fprintf(stderr, "min-entropy: %s: %zu samples; need at least %u\n", argv[optind], n,
		        EB_ESTIMATE_SAMPLES_MIN);
		free(s);
		return 1;
	}
	seen_bits = eb_estimate_sample_bits(s, n);
	if (bits == 0)
		bits = seen_bits;
	else if (seen_bits > bits) {
		fprintf(stderr, "min-entropy: samples are wider than %u bits\n", bits);
		free(s);
		return 1;
	}
	r = eb_estimate_min_entropy(s, n, bits, &e);
	free(s);
	if (r < 0) {
		fprintf(stderr, "min-entropy: %s: %s\n", argv[optind], strerror(-r));
		return 1;
	}

	sym[0].name = "mcv", sym[0].h = e.mcv;
	sym[1].name = "lag", sym[1].h = e.lag;
	bit[0].name = "mcv", bit[0].h = e.bit_mcv;
	bit[1].name = "collision", bit[1].h = e.bit_collision;
	bit[2].name = "markov", bit[2].h = e.bit_markov;
	bit[3].name = "lag", bit[3].h = e.bit_lag;
	if (json) {
		printf("{\"samples\": %zu, \"bits\": %u", n, bits);
		for (unsigned i = 0; i < 2; i++)
			printf(", \"%s\": %.6f", sym[i].name, sym[i].h);
		for (unsigned i = 0; i < 4; i++)
			printf(", \"bitstring_%s\": %.6f", bit[i].name, bit[i].h);
		printf(", \"h_original\": %.6f, \"h_bitstring\": %.6f, \"min_entropy\": %.6f}\n",
		       e.h_original, e.h_bitstring, e.min_entropy);
	} else {
		printf("%s: %zu samples of %u bits\n", argv[optind], n, bits);
		for (unsigned i = 0; i < 2; i++)
			printf("  %-22s %8.4f bits/sample\n", sym[i].name, sym[i].h);
		for (unsigned i = 0; i < 4; i++)
			printf("  bitstring %-12s %8.4f bits/bit\n", bit[i].name, bit[i].h);
		printf("  min(H_original %.4f, %u x H_bitstring %.4f) = %.4f bits/sample\n",
		       e.h_original, bits, e.h_bitstring, e.min_entropy);
	}
	return 0;
}
