/* SPDX-License-Identifier: MIT */
/* A ring of secret bytes in locked memory: what goes in comes out once, and is wiped as it does. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#define EGD_BUFFER_MIN 64
#define EGD_BUFFER_MAX (1024 * 1024)

struct egd_buffer;

/* Maps capacity (EGD_BUFFER_MIN..EGD_BUFFER_MAX) bytes kept out of core dumps and forked
 * children, and tries to lock them; egd_buffer_locked() says whether that worked. */
int egd_buffer_new(size_t capacity, struct egd_buffer **ret);
/* Wipes, unlocks and unmaps; accepts NULL. */
struct egd_buffer *egd_buffer_free(struct egd_buffer *b);
static inline void egd_buffer_freep(struct egd_buffer **b)
{
	if (*b)
		egd_buffer_free(*b);
}

bool egd_buffer_locked(const struct egd_buffer *b);
size_t egd_buffer_capacity(const struct egd_buffer *b);
size_t egd_buffer_level(const struct egd_buffer *b);
size_t egd_buffer_space(const struct egd_buffer *b);

/* Appends up to n bytes (as many as fit); returns how many. */
size_t egd_buffer_put(struct egd_buffer *b, const void *src, size_t n);
/* Moves up to n of the oldest bytes into dst and wipes them in the ring; returns how many. */
size_t egd_buffer_take(struct egd_buffer *b, void *dst, size_t n);
/* Wipes everything still held. */
void egd_buffer_clear(struct egd_buffer *b);
