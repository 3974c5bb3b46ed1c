/* SPDX-License-Identifier: MIT */
/* Small I/O helpers the programs and libeb share. */
#pragma once

#include <stddef.h>
#include <sys/types.h>

/* Reads until len bytes are in buf or the input ends, retrying after signals and short reads.
 * Returns the count, less than len only at the end of the input, or a negative errno (read(2)'s;
 * what was read before the error is in buf, and the caller's to wipe). */
ssize_t eb_read_all(int fd, void *buf, size_t len);

/* Writes all of buf to fd, retrying after signals and short writes. Returns 0 or a negative
 * errno (write(2)'s). On a pipe or socket whose reader is gone that is -EPIPE only where
 * SIGPIPE is ignored. */
int eb_write_all(int fd, const void *buf, size_t len);

/* The same for a socket with send(MSG_NOSIGNAL): a peer that has gone is -EPIPE, never a
 * SIGPIPE, whatever the program's disposition. */
int eb_send_all(int fd, const void *buf, size_t len);
