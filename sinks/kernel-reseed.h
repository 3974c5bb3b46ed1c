/* SPDX-License-Identifier: MIT */
/* A copy's fresh start (eb-sink-kernel --reseed): after a broker's bits went into the kernel,
 * the CRNG is made to take them now, the seed files a later boot would reuse are rewritten from
 * it, and the generation userspace watches goes up by one. Every step must succeed. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A seed file is rewritten at its own size within these bounds (systemd's is 512 bytes). */
#define EB_RESEED_SEED_MIN 32
#define EB_RESEED_SEED_MAX 4096
/* A generation file larger than this is not one this program wrote. */
#define EB_RESEED_GENERATION_MAX_LEN 32

/* What --reseed does after kernel_feed(): RNDRESEEDCRNG on fd (any refusal, -EPERM without
 * CAP_SYS_ADMIN or -ENODATA before init, is a failure); each of seed_files that exists is
 * replaced, atomically and with mode 0600, by as many bytes of getrandom() (drawn after the
 * reseed) as it held, marked creditable for systemd-random-seed (the xattr
 * user.random-seed-creditable = "1", where the file system keeps user xattrs); then the number
 * in generation_file (0 when it does not exist; its directory is made) goes up by one, written
 * to a new file renamed over it, so that a reader sees the old number or the new. Returns 0 and
 * the new generation, or a negative errno and, in *ret_step, which step failed (a static
 * string: "RNDRESEEDCRNG", "seed file", "generation"); the generation moves only when every
 * step before it succeeded. */
int kernel_reseed_finish(int fd, const char *const *seed_files, size_t n_seed_files,
                         const char *generation_file, uint64_t *ret_generation,
                         const char **ret_step);

/* What the kernel logs when a VM generation ID changed (Linux 5.18 and later, Debian 12's 6.1
 * included): a copy of this machine started from a saved state. */
#define EB_RESEED_FORK_TEXT "crng reseeded due to virtual machine fork"

/* Whether a /dev/kmsg record (len bytes: "PRIO,SEQ,USEC,FLAGS;TEXT\n" and continuation lines) is
 * that line: its text, after the first ';', begins with "random: " and holds the words. */
bool kernel_reseed_is_fork_record(const char *record, size_t len);
