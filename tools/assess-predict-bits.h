/* SPDX-License-Identifier: MIT */
/* MultiMMC and LZ78Y for bits (0/1 a byte), with direct tables: what assess_multi_mmc() and
 * assess_lz78y() run for an alphabet of two. n must be at least ASSESS_LZ78Y_B + 2. */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* 6.3.9's context lengths and dictionary (x, y) entries per length; 6.3.10's longest string and
 * dictionary strings. */
#define ASSESS_MMC_D         16u
#define ASSESS_MMC_ENTRIES   100000u
#define ASSESS_LZ78Y_B       16u
#define ASSESS_LZ78Y_STRINGS 65536u

int assess_multi_mmc_bits(const uint8_t *b, size_t n, double *ret);
int assess_lz78y_bits(const uint8_t *b, size_t n, double *ret);
