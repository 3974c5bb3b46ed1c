/* SPDX-License-Identifier: MIT */
/* The loop every source runs: sample a block, pass it through the gate (health tests, debiasing,
 * credit), donate it, rest while the broker says SLEEP, fail over when a broker goes away. Part
 * of libeb's program layer: it logs what it decides (docs/decisions.md). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "gate.h"

struct eb_client;

/* Fills buf with up to n raw samples, one per byte, at most the sample width each; returns the
 * count, 0 at the end of the input, or a negative errno (already logged). Called only while the
 * broker wants data: never while it has said SLEEP. */
typedef ssize_t (*eb_source_sample_t)(void *userdata, uint8_t *buf, size_t n);

/* What a sample callback returns instead of a count when the device itself reports that its own
 * health tests failed (a ComScire QNG's bad-statistics bit): the runtime raises a health alarm as
 * its own tests would (logged once an episode, counted in eb_source_stats.alarms), drops the
 * samples of the block under way and what is pending unsent, and samples on; nothing is credited
 * until the start-up test passes again. Not an errno: below every one. */
#define EB_SOURCE_DEVICE_ALARM ((ssize_t)-0x10000)

struct eb_source_params {
	const char *name; /* "stream /dev/hwrng": log lines and EB_SOURCE= */
	struct eb_gate_params gate;
	size_t block;           /* raw samples per block; 0: EB_GATE_BLOCK_DEFAULT */
	int dump_fd;            /* every raw sample is also written here (--dump-raw); -1: none */
	uint64_t max_samples;   /* stop after this many samples (--samples); 0: never */
	unsigned quarantine_ms; /* pause after a block that left the source failed; 0: none */
};

struct eb_source_stats {
	uint64_t samples;  /* sampled */
	uint64_t admitted; /* admitted for credit by the health tests */
	uint64_t bytes;    /* donated */
	uint64_t claimed;  /* bits claimed */
	uint64_t credited; /* bits the broker credited */
	uint64_t alarms;   /* health-test failure episodes */
};

/* Blocks that follow each other quickly are sent together, up to 64 KiB a PUT, each with the
 * credit it earned; a block waits at most 10 ms from when its sampling began for others to join
 * it, so a slow source sends every block on its own. Runs until the input ends or max_samples are
 * taken (0), or a fatal error (negative errno, logged). Each health failure episode is logged once,
 * with its test, cutoff and count. stats, when given, is filled in either way: a failed run still
 * says what it did. */
/* c NULL: a capture with no broker (--dump-raw alone), nothing donated. With --dump-raw, a full
 * broker (SLEEP) does not stop the sampling: the dump goes on, the output is dropped meanwhile. */
int eb_source_run(struct eb_client *c, const struct eb_source_params *p, eb_source_sample_t sample,
                  void *userdata, struct eb_source_stats *stats);
