/* SPDX-License-Identifier: MIT */
#include "io.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <unistd.h>

#include "macro.h"

/* The one loop behind both: a socket is written with send(MSG_NOSIGNAL), so that a peer gone
 * costs an EPIPE and not the process. */
static int put_all(int fd, const void *buf, size_t len, bool socket)
{
	const uint8_t *p = buf;

	while (len > 0) {
		ssize_t k = socket ? send(fd, p, len, MSG_NOSIGNAL) : write(fd, p, len);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return negative_errno();
		p += k;
		len -= (size_t)k;
	}
	return 0;
}

ssize_t eb_read_all(int fd, void *buf, size_t len)
{
	uint8_t *p = buf;
	size_t got = 0;

	/* Capped so that the count always fits the return value. */
	len = MIN(len, (size_t)SSIZE_MAX);
	while (got < len) {
		ssize_t k = read(fd, p + got, len - got);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return negative_errno();
		if (k == 0)
			break;
		got += (size_t)k;
	}
	return (ssize_t)got;
}

int eb_write_all(int fd, const void *buf, size_t len)
{
	return put_all(fd, buf, len, false);
}

int eb_send_all(int fd, const void *buf, size_t len)
{
	return put_all(fd, buf, len, true);
}
