/* SPDX-License-Identifier: MIT */
/* The entry point every fuzzer defines, for libFuzzer or for the corpus replay driver. */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Runs one input; returns 0. A bug is reported by aborting, so both libFuzzer and the replay
 * driver stop at the input that found it. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
