/* SPDX-License-Identifier: MIT */
#include "key.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "credential.h"
#include "io.h"
#include "macro.h"

const char *eb_key_error_text(int r)
{
	switch (r) {
	case -EPERM:
		return "is readable by others, or by a group not this process's own; chmod 0600";
	case -EBADMSG:
		return "is not 64 hexadecimal digits and an optional newline";
	case -ELOOP:
		return "is a symbolic link, which is not followed";
	default:
		return NULL;
	}
}

static const char *const hash_names[_EB_KEY_HASH_MAX] = {
    [EB_KEY_HASH_SHA384] = "sha384",
    [EB_KEY_HASH_SHA256] = "sha256",
};

bool eb_key_id_valid(const char *id)
{
	size_t n = id ? strlen(id) : 0;

	return n > 0 && n <= EB_KEY_ID_MAX &&
	       strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") ==
	           n &&
	       !strchr("._-", id[0]);
}

const char *eb_key_hash_to_string(enum eb_key_hash h)
{
	return h >= 0 && h < _EB_KEY_HASH_MAX ? hash_names[h] : NULL;
}

enum eb_key_hash eb_key_hash_from_string(const char *s)
{
	for (int h = 0; s && h < _EB_KEY_HASH_MAX; h++)
		if (strcmp(s, hash_names[h]) == 0)
			return (enum eb_key_hash)h;
	return _EB_KEY_HASH_INVALID;
}

#define KEY_HEX_LEN (EB_KEY_SIZE * 2)
/* 64 digits, an optional newline, and one byte more so that trailing garbage is seen. */
#define KEY_FILE_MAX (KEY_HEX_LEN + 2)

/* Decodes one hex digit without branches or table lookups on its value, after WireGuard's
 * key_from_hex(): a key's digits must not leak through timing or the cache. Returns the value in
 * the low four bits; *bad gets all ones when c is not a hex digit. */
static unsigned hex_digit(unsigned c, unsigned *bad)
{
	unsigned num = c ^ 48u;             /* '0'..'9' -> 0..9 */
	unsigned num_ok = (num - 10u) >> 8; /* all ones when num < 10 */
	unsigned alpha = (c & ~32u) - 55u;  /* 'A'..'F', 'a'..'f' -> 10..15 */
	unsigned alpha_ok =
	    ((alpha - 10u) ^ (alpha - 16u)) >> 8; /* all ones when 10 <= alpha < 16 */

	num_ok &= 0xff;
	alpha_ok &= 0xff;
	*bad |= ((num_ok | alpha_ok) - 1u) >> 8; /* all ones when neither matched */
	return ((num_ok & num) | (alpha_ok & alpha)) & 0xf;
}

/* Encodes a nibble as a lowercase hex digit without a table lookup indexed by the secret. */
static char hex_char(unsigned v)
{
	/* 87 + v is 'a' + v - 10; for v < 10, the mask subtracts 39 to land on '0' + v. */
	return (char)(87u + v + (((v - 10u) >> 8) & ~38u));
}

/* See eb_key_load(): the owner alone, or a service's own group with root or the service as the
 * owner. Root's group is no service's: a process running as root:root gets no group reading. */
static bool mode_safe(const struct stat *st)
{
	gid_t gid;

	if (st->st_mode & (S_IRWXO | S_IWGRP | S_IXGRP))
		return false;
	if (!(st->st_mode & S_IRGRP))
		return true;
	gid = getegid();
	return gid != 0 && st->st_gid == gid && (st->st_uid == 0 || st->st_uid == geteuid());
}

/* "name" of a uid or gid, or the number when it has none; into buf. */
static const char *account_name(bool user, uint32_t id, char *buf, size_t size)
{
	char tmp[1024];
	struct passwd pw, *pwp = NULL;
	struct group gr, *grp = NULL;

	if (user && getpwuid_r(id, &pw, tmp, sizeof(tmp), &pwp) == 0 && pwp)
		snprintf(buf, size, "%s", pwp->pw_name);
	else if (!user && getgrgid_r(id, &gr, tmp, sizeof(tmp), &grp) == 0 && grp)
		snprintf(buf, size, "%s", grp->gr_name);
	else
		snprintf(buf, size, "%u", (unsigned)id);
	return buf;
}

char *eb_key_describe_error(const char *path, int r)
{
	char me[64], my_group[64], owner[64], group[64];
	const char *why = eb_key_error_text(r);
	uid_t uid = geteuid();
	gid_t gid = getegid();
	struct stat st;
	char *msg = NULL;
	int n;

	if (r != -EPERM && r != -EACCES) {
		n = why ? asprintf(&msg, "key file %s %s", path, why)
		        : asprintf(&msg, "cannot read key file %s: %s", path, strerror(-r));
		return n < 0 ? NULL : msg;
	}
	account_name(true, uid, me, sizeof(me));
	account_name(false, gid, my_group, sizeof(my_group));
	if (lstat(path, &st) < 0) {
		n = asprintf(&msg, "cannot read key file %s as %s:%s: %s", path, me, my_group,
		             strerror(-r));
		return n < 0 ? NULL : msg;
	}
	account_name(true, st.st_uid, owner, sizeof(owner));
	account_name(false, st.st_gid, group, sizeof(group));
	/* The fix: the reader's own file, 0600; else, for a service in a group of its own,
	 * root:GROUP 0640 (as chrony keeps its keys); running in root's group, root's own file. */
	if (st.st_uid == uid || gid == 0)
		n = asprintf(&msg,
		             "key file %s is %s:%s %04o and this runs as %s:%s: %s; "
		             "run \"chown %s %s && chmod 0600 %s\"",
		             path, owner, group, (unsigned)(st.st_mode & 07777), me, my_group,
		             r == -EPERM ? "others could read it" : "it cannot read it", me, path,
		             path);
	else
		n = asprintf(&msg,
		             "key file %s is %s:%s %04o and this runs as %s:%s: %s; "
		             "run \"chown root:%s %s && chmod 0640 %s\"",
		             path, owner, group, (unsigned)(st.st_mode & 07777), me, my_group,
		             r == -EPERM ? "others could read it" : "it cannot read it", my_group,
		             path, path);
	return n < 0 ? NULL : msg;
}

int eb_key_load(const char *path, uint8_t ret_key[EB_KEY_SIZE])
{
	_cleanup_close_ int fd = -EBADF;
	uint8_t buf[KEY_FILE_MAX], key[EB_KEY_SIZE];
	unsigned bad = 0;
	struct stat st;
	ssize_t k;
	size_t n;

	if (!path || !ret_key)
		return -EINVAL;

	/* O_NONBLOCK so that a FIFO put in the key's place cannot stall us before fstat() sees it.
	 */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return negative_errno();
	if (fstat(fd, &st) < 0)
		return negative_errno();
	if (S_ISDIR(st.st_mode))
		return -EISDIR;
	if (!S_ISREG(st.st_mode))
		return -EBADMSG;
	/* A key others can read is a key others may have; refuse it before reading a byte. */
	if (!mode_safe(&st))
		return -EPERM;

	k = eb_read_all(fd, buf, sizeof(buf));
	if (k < 0) {
		explicit_bzero(buf, sizeof(buf));
		return (int)k;
	}
	n = (size_t)k;

	/* The length and the newline's place are not secret; the digits are. */
	if (n < KEY_HEX_LEN || n > KEY_HEX_LEN + 1 ||
	    (n == KEY_HEX_LEN + 1 && buf[KEY_HEX_LEN] != '\n')) {
		explicit_bzero(buf, sizeof(buf));
		return -EBADMSG;
	}

	for (size_t i = 0; i < EB_KEY_SIZE; i++) {
		unsigned hi = hex_digit(buf[2 * i], &bad);
		unsigned lo = hex_digit(buf[2 * i + 1], &bad);
		key[i] = (uint8_t)((hi << 4) | lo);
	}
	explicit_bzero(buf, sizeof(buf));

	/* Only the verdict over the whole key branches, never a single digit. */
	if (bad & 1) {
		explicit_bzero(key, sizeof(key));
		return -EBADMSG;
	}

	memcpy(ret_key, key, EB_KEY_SIZE);
	explicit_bzero(key, sizeof(key));
	return 0;
}

int eb_key_generate(const char *path)
{
	return eb_key_generate_owned(path, (uid_t)-1, (gid_t)-1, false);
}

int eb_key_generate_owned(const char *path, uid_t uid, gid_t gid, bool group_read)
{
	_cleanup_close_ int fd = -EBADF;
	uint8_t key[EB_KEY_SIZE];
	char hex[KEY_HEX_LEN + 1];
	size_t n = 0;
	int r;

	if (!path || !*path)
		return -EINVAL;

	while (n < sizeof(key)) {
		ssize_t k = getrandom(key + n, sizeof(key) - n, 0);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			r = negative_errno();
			explicit_bzero(key, sizeof(key));
			return r;
		}
		n += (size_t)k;
	}

	for (size_t i = 0; i < EB_KEY_SIZE; i++) {
		hex[2 * i] = hex_char(key[i] >> 4);
		hex[2 * i + 1] = hex_char(key[i] & 0xf);
	}
	hex[KEY_HEX_LEN] = '\n';
	explicit_bzero(key, sizeof(key));

	/* O_EXCL: never replace a key someone already holds; O_NOFOLLOW: never write through a link
	 * planted where the key should go. */
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0600);
	if (fd < 0) {
		r = negative_errno();
		explicit_bzero(hex, sizeof(hex));
		return r;
	}

	/* Owner and mode before the key: the file is never both group-readable and in the wrong
	 * group, and umask does not decide the group's bit. */
	r = 0;
	if ((uid != (uid_t)-1 || gid != (gid_t)-1) && fchown(fd, uid, gid) < 0)
		r = negative_errno();
	if (r >= 0 && fchmod(fd, group_read ? 0640 : 0600) < 0)
		r = negative_errno();
	if (r >= 0)
		r = eb_write_all(fd, hex, sizeof(hex));
	explicit_bzero(hex, sizeof(hex));
	if (r >= 0 && fsync(fd) < 0)
		r = negative_errno();
	if (r >= 0 && close(TAKE_FD(fd)) < 0)
		r = negative_errno();
	if (r < 0) {
		/* A half-written key is worse than none: the next run would refuse to replace it.
		 */
		(void)unlink(path);
		return r;
	}

	/* The new entry made durable too: a key that vanished with a power cut would leave a peer
	 * holding a key the broker no longer knows. Best effort: the file itself is synced. */
	(void)eb_fsync_parent(path);
	return 0;
}

char *eb_key_default_path(void)
{
	return eb_credential_path("eb.key");
}
