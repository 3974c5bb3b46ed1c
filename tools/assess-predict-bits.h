/* SPDX-License-Identifier: MIT */
/* MultiMMC and LZ78Y for bits (0/1 a byte), with direct tables: what assess_multi_mmc() and
 * assess_lz78y() run for an alphabet of two. n must be at least ASSESS_LZ78Y_B + 2. */
#pragma once

#include <stddef.h>
#include <stdint.h>

int assess_multi_mmc_bits(const uint8_t *b, size_t n, double *ret);
int assess_lz78y_bits(const uint8_t *b, size_t n, double *ret);
