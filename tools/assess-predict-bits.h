/* SPDX-License-Identifier: MIT */
/* MultiMMC, LZ78Y and lag for bits (0/1 a byte): what assess_multi_mmc(), assess_lz78y() and
 * assess_lag() run for an alphabet of two. MultiMMC and LZ78Y keep their dictionaries as direct
 * tables and need n >= ASSESS_LZ78Y_B + 2. */
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
/* The lag predictor (6.3.8) for bits; n >= 3. */
double assess_lag_bits(const uint8_t *b, size_t n);
