/* SPDX-License-Identifier: MIT */
/* A broker's full-entropy bits into the kernel's RNG: drawn with failover, credited exactly as
 * the broker vouched for them, and after the first seed taken into the CRNG at once where that
 * needs asking. When, and how often, is eb-sink-kernel.c's. */
#pragma once

#include <stdint.h>

struct eb_client;

/* Draws want bits of full entropy and feeds them to the kernel on fd (/dev/random), failing over
 * between brokers, until they are in or deadline (0: none) passes. Each DATA is credited with its
 * bits when the broker vouched for every byte it sent; anything less is mixed in with no credit
 * at all. *ready_first (when not NULL, and still negative) is set to whether the CRNG was
 * initialised just before the first credited RNDADDENTROPY: that, not the state at start, says
 * whether these bits initialised it, since a connection can take as long as the kernel needs to
 * get there by itself. Logs what went wrong. */
int kernel_feed(struct eb_client *client, int fd, uint64_t want, uint64_t deadline,
                uint64_t *ret_credited, int *ready_first);

/* The first seed, in either mode: feeds bits, then makes sure the CRNG uses them now (see
 * eb_kernel_followup()), and says in the journal what state the kernel was in and how long it
 * took. */
int kernel_seed(struct eb_client *client, int fd, uint64_t bits, uint64_t deadline);
