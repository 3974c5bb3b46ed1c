/* SPDX-License-Identifier: MIT */
/* The ten estimators of NIST SP 800-90B (January 2018) section 6.3, one function each. Each
 * returns min-entropy in bits per sample of its input, or NaN where the spec gives the estimator
 * nothing to say (too few samples; no tuple common enough). Samples are symbols 0..k-1 (the
 * literal samples, mapped onto their own alphabet) or bits 0/1 (the estimators marked binary). */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "assess-predict-bits.h"

/* 6.3.4's block width in bits and its dictionary's warm-up in blocks. */
#define ASSESS_COMPRESSION_B 6u
#define ASSESS_COMPRESSION_D 1000u
/* 6.3.5: a tuple length counts while some tuple of it occurs this often. */
#define ASSESS_TUPLE_MIN_COUNT 35u
/* 6.3.7's windows; 6.3.8's lags (6.3.9's and 6.3.10's sizes are in assess-predict-bits.h). */
#define ASSESS_MCW_WINDOWS 4u
#define ASSESS_LAG_D       128u

double assess_mcv(const uint8_t *s, size_t n);         /* 6.3.1 */
double assess_collision(const uint8_t *b, size_t n);   /* 6.3.2, binary */
double assess_markov(const uint8_t *b, size_t n);      /* 6.3.3, binary */
double assess_compression(const uint8_t *b, size_t n); /* 6.3.4, binary */

/* 6.3.5 and 6.3.6 share a suffix array: both at once. -ENOMEM, else 0. */
int assess_tuple_lrs(const uint8_t *s, size_t n, double *ret_tuple, double *ret_lrs);
/* The longest repeated substring's length alone (for 5.2.3's test). -ENOMEM, -ERANGE. */
int assess_lrs_length(const uint8_t *s, size_t n, size_t *ret);

/* 6.3.7-6.3.10, k the alphabet's size (2..256). -ENOMEM where they need memory, else 0. */
double assess_multi_mcw(const uint8_t *s, size_t n, unsigned k);
double assess_lag(const uint8_t *s, size_t n, unsigned k);
int assess_multi_mmc(const uint8_t *s, size_t n, unsigned k, double *ret);
int assess_lz78y(const uint8_t *s, size_t n, unsigned k, double *ret);
