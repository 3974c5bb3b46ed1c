/* SPDX-License-Identifier: MIT */
/* SP 800-90B section 3.1.4, the restart tests: a matrix of R restarts (rows) of C samples each,
 * read row after row. The sanity check (3.1.4.3 steps 1-2) fails when a value is more common in
 * some row or column than a source of the claimed H_I could make it but with probability 0.01
 * over all 2000 of them; the validation (steps 3-5) fails when the non-IID estimates of the rows
 * and of the columns, each read as one sequence, are below H_I / 2. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "assess-noniid.h"

#define ASSESS_RESTARTS       1000u
#define ASSESS_RESTART_LENGTH 1000u

struct assess_restart {
	double h_i;
	unsigned restarts, length;       /* the matrix: restarts rows of length samples */
	unsigned cutoff;                 /* the most common count a row may reach */
	unsigned col_cutoff;             /* and a column (cutoff when the matrix is square) */
	unsigned row_max, col_max;       /* the most common counts found */
	bool sanity;                     /* row_max and col_max within their cutoffs */
	struct assess_noniid rows, cols; /* 0 bits each when the check failed (not run) */
	bool validated;                  /* sanity, and min(H_r, H_c) >= H_I / 2 */
};

/* The cutoff for n samples of a source whose most likely value has probability p = 2^-H_I, the
 * others as likely as can be (p each, and one with the rest): the least U with P(the most common
 * count > U) <= alpha, computed exactly (the reference estimates it from 5 x 10^6 simulated
 * matrices; the two may differ by one where P sits at alpha). -ENOMEM. */
int assess_restart_cutoff(double h_i, unsigned n, double alpha, unsigned *ret);

/* The tests on ASSESS_RESTARTS x ASSESS_RESTART_LENGTH samples of bits bits against the claim
 * h_i. -EINVAL for h_i outside (0, bits], -ENOMEM. */
int assess_restart_run(const uint8_t *s, unsigned bits, double h_i, struct assess_restart *ret);

/* The same on a matrix of restarts x length samples, row after row, for a smaller trial than
 * the spec's (eb-assess esv --restarts, --samples-per-restart): alpha is still 0.01 over all
 * restarts + length rows and columns, and a row's cutoff is for length samples, a column's for
 * restarts. -EINVAL also for fewer than 2 restarts or samples. */
int assess_restart_run_matrix(const uint8_t *s, unsigned restarts, unsigned length, unsigned bits,
                              double h_i, struct assess_restart *ret);
