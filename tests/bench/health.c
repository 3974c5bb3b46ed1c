/* SPDX-License-Identifier: MIT */
/* Samples per second through eb_health_feed() (and eb_vonneumann_feed_bits()), which every
 * sample of every source passes through: good data (the fast path), and a stuck source (the
 * sample-by-sample path it falls back to while alarms fire). */
#include "health.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "macro.h"
#include "splitmix64.h"
#include "time-util.h"
#include "vonneumann.h"

#define BUF_SIZE    (16u << 20)
#define CALL_SIZE   (64u << 10)
#define MIN_SECONDS 0.5

static double now(void)
{
	return (double)eb_now_ns() * 1e-9;
}

static int bench_health(const char *what, const uint8_t *buf, unsigned bits, double hps)
{
	struct eb_health h;
	double start, elapsed;
	uint64_t samples = 0, credited = 0;
	int r;

	r = eb_health_init(&h, hps, bits);
	if (r < 0)
		return r;

	start = now();
	do {
		for (size_t i = 0; i < BUF_SIZE; i += CALL_SIZE) {
			size_t ok;

			r = eb_health_feed(&h, buf + i, CALL_SIZE, &ok);
			if (r < 0)
				return r;
			credited += ok;
		}
		samples += BUF_SIZE;
		elapsed = now() - start;
	} while (elapsed < MIN_SECONDS);

	/* Credit lost to an alarm is the start-up test after it plus whatever of its call preceded
	 * it: with CALL_SIZE calls, a false alarm on good data costs up to 65 536 + 1024 samples.
	 */
	printf("health %-6s bits=%u H=%-3g %8.1f Msamples/s  (%llu Msamples, credited %5.1f%%, "
	       "failure episodes %llu)\n",
	       what, bits, hps, (double)samples / elapsed / 1e6,
	       (unsigned long long)(samples / 1000000), 100.0 * (double)credited / (double)samples,
	       (unsigned long long)h.episodes);
	return 0;
}

static int bench_vonneumann(const uint8_t *bits)
{
	static uint8_t out[BUF_SIZE / 16 + 1];
	struct eb_vonneumann vn;
	double start, elapsed;
	uint64_t samples = 0;
	int r;

	eb_vonneumann_init(&vn);
	start = now();
	do {
		size_t len;

		r = eb_vonneumann_feed_bits(&vn, bits, BUF_SIZE, out, sizeof(out), &len);
		if (r < 0)
			return r;
		samples += BUF_SIZE;
		elapsed = now() - start;
	} while (elapsed < MIN_SECONDS);

	printf("vonneumann bits          %8.1f Msamples/s\n", (double)samples / elapsed / 1e6);
	return 0;
}

int main(void)
{
	static const struct {
		unsigned bits;
		double h;
	} configs[] = {
	    {8, 8}, {8, 6}, {8, 1}, {4, 3}, {1, 1}, {1, 0.5},
	};
	uint8_t *good = malloc(BUF_SIZE), *stuck = malloc(BUF_SIZE);
	int r = 0;

	if (!good || !stuck)
		return 1;
	memset(stuck, 0, BUF_SIZE);

	for (size_t i = 0; i < ELEMENTSOF(configs) && r >= 0; i++) {
		uint64_t seed = 42;

		splitmix64_samples(&seed, good, BUF_SIZE, configs[i].bits);
		r = bench_health("good", good, configs[i].bits, configs[i].h);
	}
	if (r >= 0)
		r = bench_health("stuck", stuck, 8, 6);
	if (r >= 0)
		r = bench_health("stuck", stuck, 1, 0.5);
	if (r >= 0) {
		uint64_t seed = 43;

		splitmix64_samples(&seed, good, BUF_SIZE, 1);
		r = bench_vonneumann(good);
	}

	free(good);
	free(stuck);
	if (r < 0) {
		fprintf(stderr, "bench failed: %s\n", strerror(-r));
		return 1;
	}
	return 0;
}
