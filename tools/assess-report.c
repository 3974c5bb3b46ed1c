/* SPDX-License-Identifier: MIT */
/* eb-assess's report of the IID tests and the restart tests, as text and as JSON members. */
#include "assess-report.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>

void assess_report_iid_json(const struct assess_iid *iid, uint64_t seed)
{
	const char *sep = "";

	printf(", \"iid\": {\"verdict\": \"%s\", \"permutation\": \"%s\", \"chi_square\": \"%s\", "
	       "\"lrs\": \"%s\", \"seed\": %" PRIu64 ", \"shuffles\": %u, \"lrs_length\": %zu",
	       iid->iid ? "pass" : "fail", iid->permutation ? "pass" : "fail",
	       iid->chi_square ? "pass" : "fail", iid->lrs ? "pass" : "fail", seed, iid->shuffles,
	       iid->lrs_length);
	printf(", \"chi_square_independence_p\": %.6f, \"chi_square_fit_p\": %.6f",
	       iid->chi_independence_p, iid->chi_fit_p);
	printf(", \"outliers\": [");
	for (unsigned t = 0; t < ASSESS_IID_TESTS; t++) {
		const unsigned *c = iid->count[t];

		if (iid->ran[t] && (c[0] + c[1] <= 5 || c[1] + c[2] <= 5)) {
			printf("%s\"%s\"", sep, assess_iid_test_to_string(t));
			sep = ", ";
		}
	}
	printf("]}");
}

void assess_report_iid_text(const struct assess_iid *iid, uint64_t seed)
{
	printf("SP 800-90B IID tests (section 5, permutations from seed %" PRIu64 "): %s\n", seed,
	       iid->iid ? "IID" : "not IID");
	printf("  permutation tests        %s after %u shuffles",
	       iid->permutation ? "pass" : "fail", iid->shuffles);
	for (unsigned t = 0, first = 1; t < ASSESS_IID_TESTS; t++) {
		const unsigned *c = iid->count[t];

		if (iid->ran[t] && (c[0] + c[1] <= 5 || c[1] + c[2] <= 5)) {
			printf("%s%s", first ? "; outliers: " : ", ", assess_iid_test_to_string(t));
			first = 0;
		}
	}
	printf(
	    "\n  chi-square               %s (independence p = %.4g, goodness of fit p = %.4g)\n",
	    iid->chi_square ? "pass" : "fail", iid->chi_independence_p, iid->chi_fit_p);
	printf("  longest repeated string  %s (%zu samples)\n\n", iid->lrs ? "pass" : "fail",
	       iid->lrs_length);
}

/* Rounded down to the six decimals printed, as eb-assess's other estimates are. */
static double down(double h)
{
	return floor(h * 1e6) / 1e6;
}

void assess_report_restart_json(const struct assess_restart *rs)
{
	printf(
	    ", \"restart\": {\"h_i\": %.6f, \"cutoff\": %u, \"row_max\": %u, \"column_max\": %u, "
	    "\"sanity\": \"%s\"",
	    rs->h_i, rs->cutoff, rs->row_max, rs->col_max, rs->sanity ? "pass" : "fail");
	if (rs->sanity)
		printf(", \"h_rows\": %.6f, \"h_columns\": %.6f", down(rs->rows.min_entropy),
		       down(rs->cols.min_entropy));
	printf(", \"verdict\": \"%s\"}", rs->validated ? "pass" : "fail");
}

void assess_report_restart_text(const struct assess_restart *rs)
{
	printf(
	    "SP 800-90B restart tests (section 3.1.4, %u restarts of %u samples) at H_I = %.4f: %s\n",
	    rs->restarts, rs->length, rs->h_i, rs->validated ? "pass" : "fail");
	printf(
	    "  sanity check             %s (most common count: rows %u, columns %u; cutoff %u)\n",
	    rs->sanity ? "pass" : "fail", rs->row_max, rs->col_max, rs->cutoff);
	if (rs->sanity)
		printf(
		    "  rows, columns            %.6f, %.6f bits/sample (at least H_I / 2 = %.4f)\n",
		    down(rs->rows.min_entropy), down(rs->cols.min_entropy), rs->h_i / 2);
	putchar('\n');
}
