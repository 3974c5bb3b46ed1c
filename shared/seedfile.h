/* SPDX-License-Identifier: MIT */
/* The broker's seed file: pool content saved across restarts, credited at most once. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct eb_pool;

/* Saves pool content to path atomically (temporary file, fsync, rename), mode 0600.
 * With drain, credited pool bytes (up to the whole level) go into the file with their credit, as
 * on stop; without, 64 bytes of DRBG output with no credit, as in the periodic save. */
int eb_seedfile_save(const char *path, struct eb_pool *pool, bool drain, uint64_t *ret_bits);

/* Mixes the seed file into the pool, crediting what the file says only when credit is true, then
 * at once overwrites it with an uncredited file so that a crash cannot credit it again.
 * -ENOENT when there is none; -EBADMSG when it is malformed (it is then replaced). */
int eb_seedfile_load(const char *path, struct eb_pool *pool, bool credit, uint64_t *ret_credited);
