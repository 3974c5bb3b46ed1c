/* SPDX-License-Identifier: MIT */
/* Small I/O helpers the programs and libeb share. */
#pragma once

#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

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

/* Replaces path with a file holding the n pieces of iov, mode 0600: written next to it (mkostemp,
 * O_EXCL: nobody else's file is ever written), synced, renamed over it, and its directory synced,
 * so that a reader or a crash sees the old file or the new one, never a torn one, and the new one
 * is durable when this returns. mark, when not NULL, is called on the new file once its bytes are
 * in and before it is synced (an xattr, say); its negative errno fails the whole. A negative errno
 * leaves path as it was. */
int eb_replace_file(const char *path, const struct iovec *iov, size_t n,
                    int (*mark)(int fd, const char *path));

/* Syncs the directory that holds path, so that an entry just made or renamed there survives a
 * power cut. */
int eb_fsync_parent(const char *path);
