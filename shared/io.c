/* SPDX-License-Identifier: MIT */
#include "io.h"

#include <errno.h>
#include <stdint.h>
#include <sys/socket.h>
#include <unistd.h>

#include "macro.h"

int eb_write_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len > 0) {
		ssize_t k = write(fd, p, len);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return negative_errno();
		p += k;
		len -= (size_t)k;
	}
	return 0;
}

int eb_send_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len > 0) {
		ssize_t k = send(fd, p, len, MSG_NOSIGNAL);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return negative_errno();
		p += k;
		len -= (size_t)k;
	}
	return 0;
}
