/* SPDX-License-Identifier: MIT */
/* min-entropy: a conservative estimate of the min-entropy per sample of a raw capture (one sample
 * per byte, the --dump-raw format), from a subset of the NIST SP 800-90B section 6.3 non-IID
 * estimators that are simple to implement exactly:
 *
 *   6.3.1 most common value (with the 99 % upper bound on its probability),
 *   6.3.2 collision (binary),
 *   6.3.3 Markov (binary),
 *   6.3.8 lag prediction (global with its 99 % upper bound, and local from the longest run).
 *
 * As 90B section 6.3 prescribes for samples wider than one bit, the symbol estimators (MCV, lag)
 * run on the samples and every estimator runs on the samples' bit string (most significant of the
 * sample's bits first); the result is min(H_symbols, bits x H_bitstring). This is a lower-effort
 * cousin of NIST's ea_non_iid, which has more estimators: a source's claim must sit well below
 * what this prints, and anyone can check a claim with the real tool on the same capture.
 *
 * Usage: min-entropy [--bits N] [--json] FILE */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 99 % one-sided, as in SP 800-90B. */
#define Z_ALPHA 2.5758293035489
/* Lag predictor depth, as in SP 800-90B 6.3.8. */
#define LAG_D 128
/* The capture is read whole; 90B asks for 10^6 samples, this allows a good margin. */
#define SAMPLES_MAX (64u << 20)

struct estimate {
	const char *name;
	double h; /* bits per sample of the sequence it ran on */
};

static double upper_bound(double p, size_t n)
{
	double u = p + Z_ALPHA * sqrt(p * (1.0 - p) / (double)(n - 1));

	return u > 1.0 ? 1.0 : u;
}

/* 6.3.1: H = -log2(p_u), p_u the 99 % upper bound on the most common value's probability. */
static double mcv(const uint8_t *s, size_t n)
{
	size_t count[256] = {0}, max = 0;

	for (size_t i = 0; i < n; i++)
		count[s[i]]++;
	for (unsigned v = 0; v < 256; v++)
		if (count[v] > max)
			max = count[v];
	return -log2(upper_bound((double)max / (double)n, n));
}

/* 6.3.2 for binary data: the waiting times to the first repeat are 2 (00, 11) or 3; their mean
 * is 2 + 2pq, so the 99 % lower bound on the mean bounds p from above. */
static double collision(const uint8_t *b, size_t n)
{
	double sum = 0, sum2 = 0, mean, sd, x, p;
	size_t v = 0, i = 0;

	while (i + 1 < n) {
		unsigned t;

		if (b[i] == b[i + 1])
			t = 2;
		else if (i + 2 < n)
			t = 3;
		else
			break;
		sum += t;
		sum2 += (double)t * t;
		v++;
		i += t;
	}
	if (v < 2)
		return 0;
	mean = sum / (double)v;
	sd = sqrt((sum2 - (double)v * mean * mean) / (double)(v - 1));
	x = mean - Z_ALPHA * sd / sqrt((double)v);
	if (x < 2.0)
		x = 2.0;
	if (x >= 2.5)
		return 1.0;
	p = 0.5 + sqrt(1.25 - 0.5 * x);
	return -log2(p);
}

/* 6.3.3 for binary data: the most likely 128-bit sequence under a first-order Markov model fitted
 * to the data; H = -log2(P_max) / 128, at most 1. */
static double markov(const uint8_t *b, size_t n)
{
	double c[2][2] = {{0, 0}, {0, 0}}, p0, p1, t[2][2], lp[6], pmax;
	size_t ones = 0;

	for (size_t i = 0; i < n; i++)
		ones += b[i];
	for (size_t i = 0; i + 1 < n; i++)
		c[b[i]][b[i + 1]]++;
	p1 = (double)ones / (double)n;
	p0 = 1.0 - p1;
	for (unsigned a = 0; a < 2; a++) {
		double row = c[a][0] + c[a][1];

		t[a][0] = row > 0 ? c[a][0] / row : 0;
		t[a][1] = row > 0 ? c[a][1] / row : 0;
	}
	/* log2 of the six candidate sequences' probabilities (log2(0) = -inf is fine here). */
	lp[0] = log2(p0) + 127 * log2(t[0][0]);
	lp[1] = log2(p0) + 64 * log2(t[0][1]) + 63 * log2(t[1][0]);
	lp[2] = log2(p0) + log2(t[0][1]) + 126 * log2(t[1][1]);
	lp[3] = log2(p1) + log2(t[1][0]) + 126 * log2(t[0][0]);
	lp[4] = log2(p1) + 64 * log2(t[1][0]) + 63 * log2(t[0][1]);
	lp[5] = log2(p1) + 127 * log2(t[1][1]);
	pmax = lp[0];
	for (unsigned i = 1; i < 6; i++)
		if (lp[i] > pmax)
			pmax = lp[i];
	return fmin(-pmax / 128.0, 1.0);
}

/* P_local of SP 800-90B 6.3.7 step 9: the p for which a longest run of r - 1 correct predictions
 * in N has probability 0.99, found by bisection (the left side falls as p grows). */
static double p_local(size_t longest, size_t n)
{
	double lo = 0.0, hi = 1.0, r = (double)longest + 1.0;

	for (unsigned it = 0; it < 200; it++) {
		double p = (lo + hi) / 2, q = 1.0 - p, x = 1.0, f;

		for (unsigned j = 0; j < 10; j++)
			x = 1.0 + q * pow(p, r) * pow(x, r + 1.0);
		f = (1.0 - p * x) / ((r + 1.0 - r * x) * q) / pow(x, (double)n + 1.0);
		if (f > 0.99)
			lo = p;
		else
			hi = p;
	}
	return lo;
}

/* 6.3.8: D subpredictors guess s[i - d]; the one with the most hits so far predicts. k: how many
 * values a sample can take. */
static double lag(const uint8_t *s, size_t n, unsigned k)
{
	size_t score[LAG_D] = {0}, winner = 0, correct = 0, run = 0, longest = 0, predictions;
	double pg, pl;

	if (n < 2)
		return 0;
	for (size_t i = 1; i < n; i++) {
		size_t d_max = i < LAG_D ? i : LAG_D;

		if (winner < d_max && s[i - winner - 1] == s[i]) {
			correct++;
			if (++run > longest)
				longest = run;
		} else
			run = 0;
		for (size_t d = 0; d < d_max; d++)
			if (s[i - d - 1] == s[i] && ++score[d] >= score[winner])
				winner = d;
	}
	predictions = n - 1;
	pg = (double)correct / (double)predictions;
	if (correct == 0)
		pg = 1.0 - pow(0.01, 1.0 / (double)predictions);
	else
		pg = upper_bound(pg, predictions);
	pl = p_local(longest, predictions);
	/* No predictor does worse than guessing among the k possible values. */
	return -log2(fmax(fmax(pg, pl), 1.0 / k));
}

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
	struct estimate sym[2], bit[4];
	unsigned bits = 0, seen_bits = 1;
	int json = 0, c;
	uint8_t *s, *b, or_all = 0;
	size_t n = 0, nb;
	double h_sym, h_bit, h;
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
	s = malloc(SAMPLES_MAX);
	if (!s)
		return 1;
	n = fread(s, 1, SAMPLES_MAX, f);
	fclose(f);
	if (n < 1000) {
		fprintf(stderr, "min-entropy: %s: %zu samples; need at least 1000\n", argv[optind],
		        n);
		free(s);
		return 1;
	}
	for (size_t i = 0; i < n; i++)
		or_all |= s[i];
	while (seen_bits < 8 && (or_all >> seen_bits) != 0)
		seen_bits++;
	if (bits == 0)
		bits = seen_bits;
	else if (seen_bits > bits) {
		fprintf(stderr, "min-entropy: samples are wider than %u bits\n", bits);
		free(s);
		return 1;
	}

	nb = n * bits;
	b = malloc(nb);
	if (!b) {
		free(s);
		return 1;
	}
	for (size_t i = 0; i < n; i++)
		for (unsigned k = 0; k < bits; k++)
			b[i * bits + k] = (uint8_t)((s[i] >> (bits - 1 - k)) & 1);

	sym[0] = (struct estimate){"mcv", mcv(s, n)};
	sym[1] = (struct estimate){"lag", lag(s, n, 1u << bits)};
	bit[0] = (struct estimate){"mcv", mcv(b, nb)};
	bit[1] = (struct estimate){"collision", collision(b, nb)};
	bit[2] = (struct estimate){"markov", markov(b, nb)};
	bit[3] = (struct estimate){"lag", lag(b, nb, 2)};
	h_sym = fmin(sym[0].h, sym[1].h);
	h_bit = 1.0;
	for (unsigned i = 0; i < 4; i++)
		h_bit = fmin(h_bit, bit[i].h);
	h = fmin(h_sym, bits * h_bit);

	if (json) {
		printf("{\"samples\": %zu, \"bits\": %u", n, bits);
		for (unsigned i = 0; i < 2; i++)
			printf(", \"%s\": %.6f", sym[i].name, sym[i].h);
		for (unsigned i = 0; i < 4; i++)
			printf(", \"bitstring_%s\": %.6f", bit[i].name, bit[i].h);
		printf(", \"h_original\": %.6f, \"h_bitstring\": %.6f, \"min_entropy\": %.6f}\n",
		       h_sym, h_bit, h);
	} else {
		printf("%s: %zu samples of %u bits\n", argv[optind], n, bits);
		for (unsigned i = 0; i < 2; i++)
			printf("  %-22s %8.4f bits/sample\n", sym[i].name, sym[i].h);
		for (unsigned i = 0; i < 4; i++)
			printf("  bitstring %-12s %8.4f bits/bit\n", bit[i].name, bit[i].h);
		printf("  min(H_original %.4f, %u x H_bitstring %.4f) = %.4f bits/sample\n", h_sym,
		       bits, h_bit, h);
	}
	free(b);
	free(s);
	return 0;
}
