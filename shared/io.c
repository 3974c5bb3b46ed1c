/* SPDX-License-Identifier: MIT */
#include "io.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
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

int eb_fsync_parent(const char *path)
{
	_cleanup_free_ char *dir = NULL;
	_cleanup_close_ int fd = -EBADF;
	const char *slash = strrchr(path, '/');

	if (!slash)
		dir = strdup(".");
	else if (slash == path)
		dir = strdup("/");
	else
		dir = strndup(path, (size_t)(slash - path));
	if (!dir)
		return -ENOMEM;
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fsync(fd) < 0)
		return negative_errno();
	return 0;
}

int eb_replace_file(const char *path, const struct iovec *iov, size_t n,
                    int (*mark)(int fd, const char *path))
{
	_cleanup_free_ char *tmp = NULL;
	_cleanup_close_ int fd = -EBADF;
	size_t plen = strlen(path);
	int r;

	tmp = malloc(plen + sizeof(".XXXXXX"));
	if (!tmp)
		return -ENOMEM;
	memcpy(tmp, path, plen);
	memcpy(tmp + plen, ".XXXXXX", sizeof(".XXXXXX"));
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return negative_errno();
	/* mkostemp() asks for 0600, which the umask may narrow further. */
	r = fchmod(fd, 0600) < 0 ? negative_errno() : 0;
	for (size_t i = 0; r >= 0 && i < n; i++)
		r = eb_write_all(fd, iov[i].iov_base, iov[i].iov_len);
	if (r >= 0 && mark)
		r = mark(fd, path);
	if (r >= 0 && fsync(fd) < 0)
		r = negative_errno();
	if (r >= 0 && rename(tmp, path) < 0)
		r = negative_errno();
	if (r < 0) {
		(void)unlink(tmp);
		return r;
	}
	return eb_fsync_parent(path);
}
