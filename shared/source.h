/* SPDX-License-Identifier: MIT */
/* The loop every source runs: fill a buffer, donate it with its credit, rest while the broker
 * says SLEEP, fail over when a broker goes away. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct eb_client;

/* Fills buf with up to size bytes and says how many bits of entropy they carry; returns the
 * count, 0 at the end of the input, or a negative errno. */
typedef ssize_t (*eb_source_fill_t)(void *userdata, uint8_t *buf, size_t size,
                                    uint64_t *ret_credit_bits);

struct eb_source_stats {
	uint64_t bytes;    /* donated */
	uint64_t claimed;  /* bits claimed */
	uint64_t credited; /* bits the broker credited */
};

/* Runs until the input ends (0) or a fatal error. chunk: bytes per fill, at most EB_DATA_MAX. */
int eb_source_run(struct eb_client *c, eb_source_fill_t fill, void *userdata, size_t chunk,
                  struct eb_source_stats *ret_stats);
