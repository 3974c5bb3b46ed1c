/* SPDX-License-Identifier: MIT */
/* The entry point every fuzzer defines, for libFuzzer or for the corpus replay driver. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Runs one input; returns 0. A bug is reported by aborting, so both libFuzzer and the replay
 * driver stop at the input that found it. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A fuzzer's invariant. Not assert(): it must hold in every build type, NDEBUG included. */
#define check(expr)                                                                                \
	do {                                                                                       \
		if (!(expr)) {                                                                     \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #expr);   \
			abort();                                                                   \
		}                                                                                  \
	} while (0)
