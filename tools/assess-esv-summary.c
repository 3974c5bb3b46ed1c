/* SPDX-License-Identifier: MIT */
/* eb-assess esv's summary.md: every figure of results.json, for a reader. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "assess-esv.h"
#include "macro.h"

static double down(double h)
{
	return floor(h * 1e6) / 1e6;
}

static void figure(FILE *f, double v)
{
	if (isnan(v))
		fputs(" - |", f);
	else
		fprintf(f, " %.6f |", down(v));
}

static void header(FILE *f, const struct assess_esv *e)
{
	fprintf(f, "# SP 800-90B entropy source evidence: %s\n\n",
	        e->claim.line[0] ? e->claim.name : e->cmd[0]);
	fprintf(f, "Verdict: **%s**%s.\n\n",
	        e->pass[ASSESS_ESV_CLAIM] && e->pass[ASSESS_ESV_RESTART_SANITY] &&
	                e->pass[ASSESS_ESV_RESTART_VALIDATION]
	            ? "pass"
	            : "fail",
	        assess_esv_sized(e) ? ""
	                            : " (a smaller trial than ESV asks: not the sizes of a "
	                              "registration)");
	fputs("Command:", f);
	for (int i = 0; i < e->argc; i++)
		fprintf(f, " `%s`", e->argv[i]);
	fprintf(f, "\n\nTool: eb-assess %s. Source: %s.\n\n", EB_VERSION, e->source_version);
	fprintf(f,
	        "Captured on %s (%s, %s) from %s to %s: the raw samples in %.2f s, %u restarts "
	        "in %.2f s (%.1f ms each), every one a fresh run of the program writing its raw "
	        "samples with its own --dump-raw, as its health tests and crediting see them.\n\n",
	        e->host, e->kernel, e->machine, e->started, e->finished, e->raw_seconds,
	        e->restarts, e->restart_seconds, 1000.0 * e->restart_seconds / e->restarts);
	if (e->claim.line[0])
		fprintf(f, "The source's start-up line: `%s`\n\n", e->claim.line);
}

static void registration(FILE *f, const struct assess_esv *e)
{
	struct assess_esv_component comp[4];
	size_t n = assess_esv_components(e, comp);

	fputs("## Registration\n\n| field | value |\n| --- | --- |\n", f);
	fprintf(f, "| bits per sample | %u |\n", e->bits);
	fprintf(f, "| H estimate (min of the assessments) | %.6f |\n", e->h_estimate);
	fprintf(f, "| stated H (%s) | %.3f |\n",
	        e->claim_given ? "--claim" : "the source's start-up line", e->stated_h);
	fprintf(f, "| raw samples | %" PRIu64 " (`%s`) |\n", e->samples, ASSESS_ESV_RAW);
	fprintf(f, "| restarts | %u |\n| samples per restart | %u (`%s`, row after row) |\n",
	        e->restarts, e->length, ASSESS_ESV_RESTART);
	for (size_t i = 0; i < n; i++)
		fprintf(f, "| conditioning component %zu | %s, %s: %s |\n", i + 1, comp[i].name,
		        comp[i].vetted ? "vetted" : "not vetted", comp[i].where);
	fputc('\n', f);
}

static void sequential(FILE *f, const struct assess_esv *e)
{
	const struct assess_noniid *s = &e->seq;

	fprintf(f, "## Raw samples: SP 800-90B non-IID estimates (section 6.3)\n\n");
	fprintf(f, "%" PRIu64 " samples of %u bits, %u distinct values.\n\n", e->samples, e->bits,
	        s->alphabet);
	fputs("| estimator | samples (bits per sample) | bit string (bits per bit) |\n"
	      "| --- | ---: | ---: |\n",
	      f);
	for (unsigned i = 0; i < _ASSESS_ESTIMATOR_MAX; i++) {
		fprintf(f, "| %s |", assess_estimator_to_string(i));
		figure(f, s->literal[i]);
		figure(f, s->bitstring_h[i]);
		fputc('\n', f);
	}
	fprintf(f,
	        "\nH_original %.6f, H_bitstring %.6f: min(H_original, %u x H_bitstring) = "
	        "**%.6f** bits per sample.\n\n",
	        down(s->h_original), isnan(s->h_bitstring) ? 0 : down(s->h_bitstring), e->bits,
	        down(s->min_entropy));
}

static void restart(FILE *f, const struct assess_esv *e)
{
	const struct assess_restart *rs = &e->rs;

	fprintf(f, "## Restart tests (section 3.1.4)\n\n");
	fprintf(f,
	        "%u restarts x %u samples; H_I = min(H_original, %u x H_bitstring, stated H) = "
	        "%.6f.\n\n",
	        e->restarts, e->length, e->bits, down(e->h_i));
	if (!e->have_restart) {
		fputs("Not run: H_I is 0.\n\n", f);
		return;
	}
	fputs("| figure | value |\n| --- | ---: |\n", f);
	fprintf(f, "| cutoff, rows | %u |\n| cutoff, columns | %u |\n", rs->cutoff, rs->col_cutoff);
	fprintf(f, "| most common count in a row | %u |\n| most common count in a column | %u |\n",
	        rs->row_max, rs->col_max);
	fprintf(f, "| sanity check | %s |\n", rs->sanity ? "pass" : "fail");
	if (rs->sanity)
		fprintf(f, "| H_r (rows) | %.6f |\n| H_c (columns) | %.6f |\n| H_I / 2 | %.6f |\n",
		        down(rs->rows.min_entropy), down(rs->cols.min_entropy), rs->h_i / 2);
	fprintf(f, "| verdict | %s |\n\n", rs->validated ? "pass" : "fail");
}

static void criteria(FILE *f, const struct assess_esv *e)
{
	fputs("## Criteria\n\n| criterion | result | why |\n| --- | --- | --- |\n", f);
	for (unsigned c = 0; c < _ASSESS_ESV_CRITERION_MAX; c++) {
		char text[512];

		assess_esv_criterion_text(e, c, text, sizeof(text));
		fprintf(f, "| %s | %s | %s |\n", assess_esv_criterion_to_string(c),
		        e->pass[c] ? "pass" : "fail", text);
	}
	fprintf(f,
	        "\nFiles: `%s`, `%s`, `%s` (the source's log of the raw capture), `%s`, this "
	        "summary; `%s` (check with `sha256sum -c %s`).\n",
	        ASSESS_ESV_RAW, ASSESS_ESV_RESTART, ASSESS_ESV_LOG, ASSESS_ESV_JSON,
	        ASSESS_ESV_SUMS, ASSESS_ESV_SUMS);
}

int assess_esv_write_summary(const struct assess_esv *e, int dir_fd)
{
	_cleanup_fclose_ FILE *f = NULL;
	int r;

	r = assess_esv_fcreate(dir_fd, ASSESS_ESV_SUMMARY, &f);
	if (r < 0)
		return r;
	header(f, e);
	registration(f, e);
	sequential(f, e);
	restart(f, e);
	criteria(f, e);
	if (fflush(f) != 0 || ferror(f) || fsync(fileno(f)) < 0)
		return -EIO;
	return 0;
}
