/* SPDX-License-Identifier: MIT */
/* eb-keygen --user: the [user] drop-in, written once and synced, so that a crash leaves either
 * no file or a whole one. */
#include "keygen-user.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io.h"
#include "macro.h"

int keygen_user_dropin_path(const char *dir, const char *name, char **ret)
{
	return asprintf(ret, "%s/user-%s.conf", dir, name) < 0 ? -ENOMEM : 0;
}

static int sync_dir(const char *dir)
{
	_cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0 || fsync(fd) < 0)
		return negative_errno();
	return 0;
}

int keygen_user_dropin_write(const char *dir, const char *name, const char *roles,
                             const char *key_path)
{
	_cleanup_free_ char *path = NULL, *text = NULL;
	_cleanup_close_ int fd = -EBADF;
	int n, r;

	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		return negative_errno();
	r = keygen_user_dropin_path(dir, name, &path);
	if (r < 0)
		return r;
	n = asprintf(
	    &text,
	    "# Written by eb-keygen --user %s. To revoke the user alone, remove this file\n"
	    "# and reload the broker (systemctl reload eb-brokerd).\n"
	    "[user %s]\nrole = %s\nkey-file = %s\n",
	    name, name, roles, key_path);
	if (n < 0)
		return -ENOMEM;
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0644);
	if (fd < 0)
		return negative_errno();
	r = eb_write_all(fd, text, (size_t)n);
	if (r >= 0 && (fchmod(fd, 0644) < 0 || fsync(fd) < 0))
		r = negative_errno();
	if (r >= 0)
		r = sync_dir(dir);
	if (r < 0) {
		(void)unlink(path);
		return r;
	}
	return 0;
}
