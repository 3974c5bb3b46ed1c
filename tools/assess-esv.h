/* SPDX-License-Identifier: MIT */
/* eb-assess esv: the evidence NIST's Entropy Source Validation asks of a source, taken through the
 * source's own read path and written to a folder (raw samples, restart matrix, results as JSON, a
 * summary, SHA256SUMS). */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "assess-capture.h"
#include "assess-noniid.h"
#include "assess-restart.h"

/* The sizes SP 800-90B (3.1.1, 3.1.4) and the ESV program ask for. */
#define ASSESS_ESV_SAMPLES 1000000u

/* The folder's files. */
#define ASSESS_ESV_RAW     "raw.bin"
#define ASSESS_ESV_RESTART "restart.bin"
#define ASSESS_ESV_LOG     "capture.log"
#define ASSESS_ESV_JSON    "results.json"
#define ASSESS_ESV_SUMMARY "summary.md"
#define ASSESS_ESV_SUMS    "SHA256SUMS"

/* What failed, if anything; each a criterion the report names. */
enum assess_esv_criterion {
	ASSESS_ESV_CLAIM,              /* the stated H is at most the H estimate */
	ASSESS_ESV_RESTART_SANITY,     /* 3.1.4.3 steps 1-2 */
	ASSESS_ESV_RESTART_VALIDATION, /* 3.1.4.3 steps 3-5: min(H_r, H_c) >= H_I / 2 */
	_ASSESS_ESV_CRITERION_MAX,
	_ASSESS_ESV_CRITERION_INVALID = -EINVAL,
};

struct assess_esv {
	/* What was asked. */
	char **argv; /* eb-assess's own command line, argc entries */
	int argc;
	char **cmd;       /* the source's, NULL-terminated */
	uint64_t samples; /* in the raw file */
	unsigned restarts, length;
	bool claim_given; /* --claim, rather than the source's start-up line */
	double stated_h;  /* bits per sample */

	/* What the capture was. */
	struct assess_capture_claim claim; /* claim.line empty: the source said none */
	char source_version[128];
	char host[256], kernel[256], machine[80];
	char started[32], finished[32]; /* UTC, ISO 8601 */
	double raw_seconds, restart_seconds;

	/* What the data say. */
	unsigned bits;
	struct assess_noniid seq; /* the raw file's assessment, rounded down */
	double h_i;        /* min(H_original, bits x H_bitstring, stated H): the restart claim */
	bool have_restart; /* the restart tests ran (h_i > 0) */
	struct assess_restart rs;
	double h_estimate; /* min of the assessments, rounded down */
	bool pass[_ASSESS_ESV_CRITERION_MAX];
};

bool assess_esv_sized(const struct assess_esv *e);
const char *assess_esv_criterion_to_string(enum assess_esv_criterion c);
/* One sentence on how the criterion came out, into buf. */
void assess_esv_criterion_text(const struct assess_esv *e, enum assess_esv_criterion c, char *buf,
                               size_t size);
/* The conditioning a source's samples go through before the pool's full-entropy output: n of
 * them, each with its name, whether it is vetted (SP 800-90B 3.1.5.1.1) and where it runs. */
struct assess_esv_component {
	const char *name, *where;
	bool vetted;
};
size_t assess_esv_components(const struct assess_esv *e, struct assess_esv_component ret[4]);

/* A new file name in the folder dir_fd (never one already there), mode 0644: its descriptor or
 * -errno; the same as a stream in *ret, 0 or -errno. */
int assess_esv_create(int dir_fd, const char *name);
int assess_esv_fcreate(int dir_fd, const char *name, FILE **ret);

/* results.json and summary.md into the folder dir_fd; -errno. */
int assess_esv_write_json(const struct assess_esv *e, int dir_fd);
int assess_esv_write_summary(const struct assess_esv *e, int dir_fd);
/* SHA256SUMS of the n files named, as sha256sum(1) writes them; -errno. */
int assess_esv_write_sums(int dir_fd, const char *const *files, size_t n);

/* eb-assess esv's main: argv[1] is "esv". An exit code. */
int assess_esv_main(int argc, char *argv[]);
