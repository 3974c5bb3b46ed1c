/* SPDX-License-Identifier: MIT */
/* Throughput of the pool on 64 KiB chunks, side by side with the raw OpenSSL primitives it is
 * built from, so a regression shows as a ratio and not just as a slower machine. Also measures
 * what RBG3(RS) would cost (a reseed per 256-bit request), the construction docs/pool.md argues
 * against. Run: meson test -C build --benchmark --verbose, or build/tests/bench/bench-pool. */
#include "pool.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include "macro.h"
#include "time-util.h"

#define CHUNK    (64 * 1024)
#define MIN_TIME 0.4 /* seconds per figure */

static uint8_t in[CHUNK + CHUNK / 8], out[CHUNK];

static double now(void)
{
	return (double)eb_now_ns() * 1e-9;
}

static void die(const char *what)
{
	fprintf(stderr, "bench-pool: %s failed\n", what);
	exit(EXIT_FAILURE);
}

static double mbps(double bytes, double secs)
{
	return bytes / secs / 1e6;
}

static double bench_sha512(void)
{
	EVP_MD *md = EVP_MD_fetch(NULL, "SHA512", NULL);
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	double t0, t, bytes = 0;

	if (!md || !ctx || EVP_DigestInit_ex2(ctx, md, NULL) != 1)
		die("SHA-512");
	t0 = now();
	do {
		for (int i = 0; i < 64; i++)
			EVP_DigestUpdate(ctx, in, CHUNK);
		bytes += 64.0 * CHUNK;
	} while ((t = now() - t0) < MIN_TIME);
	EVP_MD_CTX_free(ctx);
	EVP_MD_free(md);
	return mbps(bytes, t);
}

static EVP_RAND_CTX *ctr_drbg(void)
{
	EVP_RAND *rand = EVP_RAND_fetch(NULL, "CTR-DRBG", NULL);
	EVP_RAND_CTX *ctx = rand ? EVP_RAND_CTX_new(rand, NULL) : NULL;
	OSSL_PARAM params[] = {
	    OSSL_PARAM_construct_utf8_string(OSSL_DRBG_PARAM_CIPHER, (char *)"AES-256-CTR", 0),
	    OSSL_PARAM_construct_end(),
	};

	if (!ctx || EVP_RAND_instantiate(ctx, 256, 0, NULL, 0, params) != 1)
		die("CTR-DRBG");
	EVP_RAND_free(rand);
	return ctx;
}

static double bench_drbg(void)
{
	EVP_RAND_CTX *ctx = ctr_drbg();
	double t0, t, bytes = 0;

	t0 = now();
	do {
		for (int i = 0; i < 64; i++)
			if (EVP_RAND_generate(ctx, out, CHUNK, 256, 0, NULL, 0) != 1)
				die("generate");
		bytes += 64.0 * CHUNK;
	} while ((t = now() - t0) < MIN_TIME);
	EVP_RAND_CTX_free(ctx);
	return mbps(bytes, t);
}

/* RBG3(RS), SP 800-90C: a reseed with fresh entropy before every request of at most 256 bits. */
static double bench_rs(void)
{
	EVP_RAND_CTX *ctx = ctr_drbg();
	double t0, t, bytes = 0;

	t0 = now();
	do {
		for (int i = 0; i < 1024; i++)
			if (EVP_RAND_reseed(ctx, 0, in + 64 * (i % 64), 64, NULL, 0) != 1 ||
			    EVP_RAND_generate(ctx, out, 32, 256, 0, NULL, 0) != 1)
				die("reseed");
		bytes += 1024.0 * 32;
	} while ((t = now() - t0) < MIN_TIME);
	EVP_RAND_CTX_free(ctx);
	return mbps(bytes, t);
}

static struct eb_pool *pool_new(void)
{
	struct eb_pool *p = NULL;

	/* The largest pool, so the adds never hit capacity during a run. */
	if (eb_pool_new(UINT64_C(1) << 31, &p, NULL) < 0)
		die("eb_pool_new");
	return p;
}

/* Adds 64 KiB chunks with bits_per_byte of credit each, for at most max_bytes of input. */
static double bench_add(unsigned bits_per_byte, double max_bytes)
{
	struct eb_pool *p = pool_new();
	double t0, t, bytes = 0;

	t0 = now();
	do {
		for (int i = 0; i < 16; i++)
			if (eb_pool_add(p, in, CHUNK, (uint64_t)CHUNK * bits_per_byte, NULL) < 0)
				die("eb_pool_add");
		bytes += 16.0 * CHUNK;
	} while ((t = now() - t0) < MIN_TIME && bytes < max_bytes);
	eb_pool_free(p);
	return mbps(bytes, t);
}

/* take_full from a pool filled beforehand, timed alone (restore is a copy, so the filling is not
 * what is measured). */
static double bench_take_full(void)
{
	struct eb_pool *p = pool_new();
	double t = 0, bytes = 0;

	while (t < MIN_TIME) {
		double t0;

		for (int i = 0; i < 2048; i++)
			(void)eb_pool_restore(p, in, CHUNK, NULL);
		t0 = now();
		while (eb_pool_take_full(p, out, CHUNK) == 0)
			bytes += CHUNK;
		t += now() - t0;
	}
	eb_pool_free(p);
	return mbps(bytes, t);
}

static double bench_take_drbg(void)
{
	struct eb_pool *p = pool_new();
	double t0, t, bytes = 0;

	(void)eb_pool_restore(p, in, CHUNK, NULL);
	t0 = now();
	do {
		for (int i = 0; i < 64; i++)
			if (eb_pool_take_drbg(p, out, CHUNK, true) < 0)
				die("eb_pool_take_drbg");
		bytes += 64.0 * CHUNK;
	} while ((t = now() - t0) < MIN_TIME);
	eb_pool_free(p);
	return mbps(bytes, t);
}

/* The full-entropy path end to end: credited input at 8 bits a byte in, take_full out. Each
 * 64 KiB out needs 72 KiB in (512 bits of block per 576 of credit). */
static double bench_through(void)
{
	struct eb_pool *p = pool_new();
	double t0, t, bytes = 0;

	t0 = now();
	do {
		for (int i = 0; i < 16; i++) {
			if (eb_pool_add(p, in, sizeof(in), 8 * (uint64_t)sizeof(in), NULL) < 0 ||
			    eb_pool_take_full(p, out, CHUNK) < 0)
				die("add + take_full");
		}
		bytes += 16.0 * CHUNK;
	} while ((t = now() - t0) < MIN_TIME);
	eb_pool_free(p);
	return mbps(bytes, t);
}

int main(void)
{
	double sha, drbg, v;

	for (size_t i = 0; i < sizeof(in); i++)
		in[i] = (uint8_t)(i * 131 + (i >> 8));

	sha = bench_sha512();
	drbg = bench_drbg();
	printf("%-44s %9s %9s\n", "64 KiB chunks", "MB/s", "ratio");
	printf("%-44s %9.0f %9s\n", "raw EVP SHA-512 update", sha, "1.00");
	v = bench_add(8, 200e6);
	printf("%-44s %9.0f %9.2f  (of SHA-512)\n", "eb_pool_add, 8 bits/byte (72 B a block)", v,
	       v / sha);
	v = bench_add(1, 2e9);
	printf("%-44s %9.0f %9.2f  (of SHA-512)\n", "eb_pool_add, 1 bit/byte (576 B a block)", v,
	       v / sha);
	v = bench_add(0, 2e9);
	printf("%-44s %9.0f %9.2f  (of SHA-512)\n", "eb_pool_add, uncredited (DRBG mix)", v,
	       v / sha);
	printf("%-44s %9.0f %9s\n", "raw CTR-DRBG (AES-256) generate", drbg, "1.00");
	v = bench_take_full();
	printf("%-44s %9.0f %9.2f  (of CTR-DRBG)\n", "eb_pool_take_full (RBG3(XOR))", v, v / drbg);
	v = bench_take_drbg();
	printf("%-44s %9.0f %9.2f  (of CTR-DRBG)\n", "eb_pool_take_drbg", v, v / drbg);
	v = bench_rs();
	printf("%-44s %9.1f %9.3f  (of CTR-DRBG)\n", "RBG3(RS): reseed + 32-byte generate", v,
	       v / drbg);
	v = bench_through();
	printf("%-44s %9.0f %9s\n", "add 72 KiB + take_full 64 KiB (MB/s out)", v, "");
	return 0;
}
