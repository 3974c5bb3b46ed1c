/* SPDX-License-Identifier: MIT */
/* eb-assess esv's captures: one run of a source program, started fresh, writing its raw samples
 * with its own --dump-raw (the samples its health tests and crediting see, before any
 * conditioning) and stopping after --samples; and what the source says at start about its claim. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* At most this much of a run's stderr is kept: the source's log, which says its claim. */
#define ASSESS_CAPTURE_LOG_MAX (64u * 1024u)

struct assess_capture_run {
	int status;  /* the exit code; 128 + N when killed by signal N */
	size_t size; /* of the dump it wrote */
};

/* Runs cmd (cmd[0] looked up in $PATH) as cmd[0] --dump-raw dump --samples n cmd[1...], with
 * stdin and stdout on /dev/null, stderr into the file log, and no broker: $EB_BROKER, $EB_USER
 * and $EB_KEY_ID are unset for it, so that a source capturing alone donates nothing. Waits for it
 * to end. -errno when it could not be started. */
int assess_capture_run(char *const *cmd, const char *dump, uint64_t n, const char *log,
                       struct assess_capture_run *ret);

/* The first ASSESS_CAPTURE_LOG_MAX bytes of the file path, NUL-terminated, into *ret. */
int assess_capture_read_log(const char *path, char **ret);

/* The first line program --version prints, into buf, by way of the file tmp (removed): -ENOMSG
 * when it fails or prints nothing. */
int assess_capture_version(const char *program, const char *tmp, char *buf, size_t size);

/* What a source's start-up line says (shared/source.c, log_start()): "Sampling NAME: B-bit
 * samples, H = X bits each; ...", or "..., claiming no entropy". */
struct assess_capture_claim {
	char name[64];
	unsigned bits;
	uint32_t h_mbits;   /* the claim per sample; 0 when it claims none */
	uint32_t cap_mbits; /* at most this credited per byte; 0 when it claims none */
	bool vonneumann;    /* its samples are Von Neumann debiased before crediting */
	char line[512];     /* the line itself, for the report */
};

/* Finds the start-up line in log. -ENOENT when there is none, -EBADMSG when it does not parse. */
int assess_capture_claim_parse(const char *log, struct assess_capture_claim *ret);
